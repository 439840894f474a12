"""Container resources between the CRI and the hook API, and Koordinator's two merge rules (koord-runtime-proxy
and the simulated kubelet apply them).

``runtime.v1.LinuxContainerResources`` and ``runtime.v1alpha1.LinuxContainerResources`` have the same
fields with the same numbers, so one converts into the other through its wire bytes (in C, and
fields a newer CRI adds travel along as unknown fields).

Merge rules (``a`` current, ``b`` incoming; Koordinator's, reference §3.5):

===================  =======================================  ==========================
field                hook response (:func:`merge_response`)    update request (:func:`merge_update`)
===================  =======================================  ==========================
cpu_period           b if b > 0                               same
cpu_quota            b if b != 0 (-1 means unlimited)         same
cpu_shares           b if b > 0                               same
memory_limit         b if b > 0                               same
oom_score_adj        b if -1000 <= b <= 1000 (0 overwrites)   never
cpuset cpus / mems   always b (even "")                       b if not ""
unified              union, b wins                            same
memory_swap_limit    b if b > 0                               same
hugepage_limits      a kept                                   a kept
===================  =======================================  ==========================

A hook server therefore answers with the container's whole resources (the request's, changed where it
wants), or an empty cpuset and an ``oom_score_adj`` of 0 would overwrite the kubelet's.
"""

from __future__ import annotations

from typing import TypeVar

from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi

M = TypeVar("M", cri.LinuxContainerResources, hookapi.LinuxContainerResources)


def to_hook(resources: cri.LinuxContainerResources) -> hookapi.LinuxContainerResources:
    """The CRI's container resources as the hook API's."""
    return hookapi.LinuxContainerResources.FromString(resources.SerializeToString())


def to_cri(resources: hookapi.LinuxContainerResources) -> cri.LinuxContainerResources:
    """The hook API's container resources as the CRI's."""
    return cri.LinuxContainerResources.FromString(resources.SerializeToString())


def _merge_common(a: M, b: M) -> None:
    if b.cpu_period > 0:
        a.cpu_period = b.cpu_period
    if b.cpu_quota != 0:
        a.cpu_quota = b.cpu_quota
    if b.cpu_shares > 0:
        a.cpu_shares = b.cpu_shares
    if b.memory_limit_in_bytes > 0:
        a.memory_limit_in_bytes = b.memory_limit_in_bytes
    if b.memory_swap_limit_in_bytes > 0:
        a.memory_swap_limit_in_bytes = b.memory_swap_limit_in_bytes
    for key, value in b.unified.items():
        a.unified[key] = value


def merge_response(a: M, b: M) -> M:
    """``a`` with a hook response's ``b`` merged in (the hook-response rule above); a new message."""
    out = type(a)()
    out.CopyFrom(a)
    _merge_common(out, b)
    if -1000 <= b.oom_score_adj <= 1000:
        out.oom_score_adj = b.oom_score_adj
    out.cpuset_cpus = b.cpuset_cpus
    out.cpuset_mems = b.cpuset_mems
    return out


def merge_update(a: M, b: M) -> M:
    """``a`` with an UpdateContainerResources request's ``b`` merged in (the update-request rule); a new message."""
    out = type(a)()
    out.CopyFrom(a)
    _merge_common(out, b)
    if b.cpuset_cpus:
        out.cpuset_cpus = b.cpuset_cpus
    if b.cpuset_mems:
        out.cpuset_mems = b.cpuset_mems
    return out
