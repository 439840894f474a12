"""The koordlet's runtime hooks (reference A.8): what a pod's and its containers' cgroups must hold.

Plugins (:mod:`.hooks` contract) are pure request → response functions, each behind its feature gate:

- :class:`~.groupidentity.GroupIdentity` (``GroupIdentity``, on): ``cpu.bvt_warp_ns`` per QoS class;
- :class:`~.batchresource.BatchResource` (``BatchResource``, on): BE cgroups from batch-cpu/batch-memory;
- :class:`~.cpuset.CPUSetAllocator` (``CPUSetAllocator``, on): container cpusets (bound CPUs, shared pool);
- :class:`~.cpunormalization.CPUNormalization` (``CPUNormalization``, off): LS quotas ÷ the node's ratio;
- :class:`~.gpuenv.GPUEnvInject` (``GPUEnvInject``, off): ``NVIDIA_VISIBLE_DEVICES`` of new containers
  (proxy mode only).

This build delivers them in reconciler mode (:class:`~.reconciler.Reconciler`: on every pod, NodeSLO or
Node change and every ``--reconcile-interval-seconds``, through the resource executor) and in proxy
mode (:class:`~.hookserver.HookServer`: koord-runtime-proxy asks before a sandbox or container is
created, with requests built from the CRI's).
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from koordinator_roles.koordlet.runtimehooks.batchresource import BatchResource
from koordinator_roles.koordlet.runtimehooks.cpunormalization import CPUNormalization
from koordinator_roles.koordlet.runtimehooks.cpuset import CPUSetAllocator
from koordinator_roles.koordlet.runtimehooks.facts import NodeFacts, node_facts
from koordinator_roles.koordlet.runtimehooks.gpuenv import GPUEnvInject
from koordinator_roles.koordlet.runtimehooks.groupidentity import GroupIdentity
from koordinator_roles.koordlet.runtimehooks.hooks import HookPlugin, HostContext
from koordinator_roles.koordlet.runtimehooks.protocol import (ContainerRequest, HookError, HookResponse, PodRequest,
                                                             Resources)
from koordinator_roles.koordlet.runtimehooks.reconciler import Reconciler, RoundResult

#: Every implemented plugin's factory by gate name.
PLUGINS: dict[str, Callable[[Mapping[str, bool]], HookPlugin]] = {
    "BatchResource": lambda gates: BatchResource(),
    "CPUNormalization": lambda gates: CPUNormalization(),
    "CPUSetAllocator": lambda gates: CPUSetAllocator(be_cpu_manager=bool(gates.get("BECPUManager"))),
    "GroupIdentity": lambda gates: GroupIdentity(),
    "GPUEnvInject": lambda gates: GPUEnvInject(),
}


def enabled_plugins(gates: Mapping[str, bool]) -> list[HookPlugin]:
    """The plugins whose gate is on, sorted by name (the order their answers are merged in)."""
    return [make(gates) for name, make in sorted(PLUGINS.items()) if gates.get(name)]


def build(states: Any, executor: Any, gates: Mapping[str, bool], **kwargs: Any) -> Reconciler:
    """A :class:`Reconciler` with the plugins ``gates`` enable (``kwargs`` as the Reconciler takes them)."""
    return Reconciler(states, executor, enabled_plugins(gates), **kwargs)


__all__ = ["PLUGINS", "BatchResource", "CPUNormalization", "CPUSetAllocator", "ContainerRequest", "GPUEnvInject",
           "GroupIdentity", "HookError", "HookPlugin", "HookResponse", "HostContext", "NodeFacts", "PodRequest",
           "Reconciler", "Resources", "RoundResult", "build", "enabled_plugins", "node_facts"]
