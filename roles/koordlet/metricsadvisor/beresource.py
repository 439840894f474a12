"""The BE resource collector (reference A.4.4): what the BE tier uses, requests and may use, for BECPUEvict.

Every round writes three ``node_be`` samples (``be_resource=cpu``, milli-cores), labelled by
``be_allocation``:

- ``usage``: int(Δ CPU time of the BE QoS cgroup in ms / Δt in ms × 1000); 0 on the first round
  and after a counter reset (Koordinator writes 0 until it has a baseline);
- ``request``: Σ over pods labelled ``koordinator.sh/qosClass=BE`` of their containers' positive
  ``kubernetes.io/batch-cpu`` requests;
- ``real-limit``: min(|current BE cpuset| × 1000, quota × 1000 / period when the BE QoS dir has a
  CFS quota), the current BE cpuset being the smallest among the BE QoS dir and its containers (the
  CPU suppress strategy narrows them bottom-up, so mid-update a container may already be smaller).

As in Koordinator, a round that cannot read the QoS dir's usage, cpuset or quota writes nothing.
"""

from __future__ import annotations

from typing import Any

from koordinator.apis import extension as ext
from koordinator.apis import quantity
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metricsadvisor.framework import Baselines, Collector, Round
from koordinator_roles.koordlet.system.cgroup import BEST_EFFORT, CgroupLayout
from koordinator_roles.koordlet.system.errors import SystemFileError

BE_USAGE = kinds.BE_ALLOCATION_USAGE
BE_REQUEST = kinds.BE_ALLOCATION_REQUEST
BE_REAL_LIMIT = kinds.BE_ALLOCATION_REAL_LIMIT

_KEY = "be-qos"
# One label dict per allocation, shared by every sample (the cache does not copy labels).
_LABELS = {alloc: {kinds.LABEL_BE_RESOURCE: kinds.BE_RESOURCE_CPU, kinds.LABEL_BE_ALLOCATION: alloc}
           for alloc in (BE_USAGE, BE_REQUEST, BE_REAL_LIMIT)}


def be_pod_request_milli(pod: Any) -> int:
    """A BE pod's batch-cpu request (milli-cores): Σ of its containers' positive requests (Koordinator's
    ``GetPodBEMilliCPURequest`` counts neither init containers nor overhead); 0 for other pods."""
    if not isinstance(pod, dict) or ext.qos_class(pod) != ext.QOS_BE:
        return 0
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        q = ((c.get("resources") or {}).get("requests") or {}).get(ext.BATCH_CPU)
        if q is None:
            continue
        try:
            n = quantity.value(q)       # batch-cpu is counted in milli-cores already
        except ValueError:
            continue
        if n > 0:
            total += n
    return total


def real_limit_milli(cpuset_size: int, quota: int, period: int) -> int:
    """min(cpuset size × 1000, quota × 1000 // period); the quota only counts when set (not -1)."""
    limit = cpuset_size * 1000
    if quota == -1 or period <= 0:
        return limit
    return min(limit, quota * 1000 // period)


def usage_milli(delta_ns: int, elapsed_s: float) -> int:
    """int((Δns / 1e6) / Δt_ms × 1000), Koordinator's milli-cores of a CPU-time delta."""
    elapsed_ms = elapsed_s * 1000
    if elapsed_ms <= 0 or delta_ns < 0:
        return 0
    return int(delta_ns / 1e6 / elapsed_ms * 1000)


class BEResourceCollector(Collector):
    """``node_be{be_resource=cpu, be_allocation=usage|request|real-limit}`` every round (milli-cores)."""

    name = "BEResourceCollector"

    def __init__(self, layout: CgroupLayout, baselines: Baselines) -> None:
        self.qos_dir = layout.qos_dir(BEST_EFFORT)
        self._prefix = self.qos_dir + "/"
        self.baselines = baselines

    def collect(self, ctx: Round) -> None:
        now = ctx.now
        try:
            limit = self._real_limit(ctx)
            usage_ns = ctx.cgroups.cpu_usage_ns(self.qos_dir)
        except SystemFileError as err:
            ctx.problems.report(("be-resource", err.path), now, "BE resource collection skipped: %s", err)
            return
        request = sum(be_pod_request_milli(getattr(view.meta, "pod", None)) for view in ctx.pods())
        prev = self.baselines.swap(_KEY, usage_ns, now)
        usage = 0 if prev is None else usage_milli(usage_ns - prev[0], now - prev[1])
        ctx.add(kinds.NODE_BE, usage, _LABELS[BE_USAGE])
        ctx.add(kinds.NODE_BE, request, _LABELS[BE_REQUEST])
        ctx.add(kinds.NODE_BE, limit, _LABELS[BE_REAL_LIMIT])
        ctx.last["be_cpu"] = {BE_USAGE: usage, BE_REQUEST: request, BE_REAL_LIMIT: limit}

    def _real_limit(self, ctx: Round) -> int:
        """The real limit from the current BE cpuset and the BE QoS dir's CFS quota (milli-cores)."""
        reader = ctx.cgroups
        size = len(reader.cpuset_cpus(self.qos_dir))
        prefix = self._prefix
        for view in ctx.pods():
            if not view.cgroup_dir.startswith(prefix):
                continue        # only pods in the BE QoS dir carry the BE cpuset
            for _name, _cid, cdir, _labels in view.containers:
                try:
                    cpus = reader.cpuset_cpus(cdir)
                except SystemFileError:
                    continue    # a container cgroup gone or not made yet does not bound the tier
                if cpus and len(cpus) < size:
                    size = len(cpus)
        quota, period = reader.cpu_quota(self.qos_dir)
        return real_limit_milli(size, quota, period)
