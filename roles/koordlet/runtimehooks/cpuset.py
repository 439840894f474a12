"""CPUSetAllocator (gate ``CPUSetAllocator``, on; reference A.8.2): container cpusets.

First match decides a container's cpuset:

1. the scheduler bound the pod (``scheduling.koordinator.sh/resource-status`` ``cpuset``, LSE/LSR pods)
   → those CPUs; its pod and container CFS quotas are unset (-1): a pinned pod owns its CPUs;
2. a NUMA-aware allocation (``numaNodeResources`` with cpu or batch-cpu) → the shared pool of those
   NUMA nodes (BE pods only with ``BECPUManager``, not in this build: they fall through);
3. QoS SYSTEM with a ``node.koordinator.sh/system-qos-resource`` cpuset → that cpuset;
4. QoS LS → the shared pool (node CPUs minus reserved, exclusive system-QoS and bound CPUs);
5. Kubernetes BestEffort → "" (no cpuset: the BE cpuset is CPUSuppress's);
6. kubelet CPU manager policy ``static`` → nothing (the kubelet owns the cpusets);
7. otherwise → the shared pool.

A malformed ``resource-status`` raises :class:`~.protocol.HookError`: the pod is reported and skipped.
"""

from __future__ import annotations

import json
from typing import Mapping

from koordinator.apis import quantity
from koordinator.apis.extension import (ANNOTATION_RESOURCE_STATUS, BATCH_CPU, CPU, KUBE_BEST_EFFORT, LABEL_POD_QOS,
                                        QOS_BE, QOS_LS, QOS_SYSTEM)
from koordinator_roles.koordlet.runtimehooks.facts import POLICY_STATIC, NodeFacts, resource_status_cpuset
from koordinator_roles.koordlet.runtimehooks.hooks import (PRE_CREATE_CONTAINER, PRE_RUN_POD_SANDBOX,
                                                          PRE_UPDATE_CONTAINER_RESOURCES, HookPlugin)
from koordinator_roles.koordlet.runtimehooks.protocol import (ContainerRequest, HookError, HookResponse, PodRequest,
                                                             Resources)


def numa_nodes(req: PodRequest) -> list[int]:
    """NUMA nodes of the pod's NUMA-aware allocation (``numaNodeResources`` with cpu or batch-cpu > 0)."""
    raw = req.annotations.get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return []
    status = json.loads(raw)          # resource_status_cpuset has already refused a non-JSON value
    entries = status.get("numaNodeResources") or []
    what = f"pod {req.key}: annotation {ANNOTATION_RESOURCE_STATUS} numaNodeResources"
    if not isinstance(entries, list):
        raise HookError(f"{what} is not a list: {entries!r}", reason="InvalidResourceStatus")
    nodes = []
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("node"), int):
            raise HookError(f"{what}: entry {entry!r} has no integer node", reason="InvalidResourceStatus")
        resources = entry.get("resources") or {}
        try:
            amount = max(quantity.milli_value(resources.get(CPU, 0)), quantity.value(resources.get(BATCH_CPU, 0)))
        except (ValueError, TypeError) as err:
            raise HookError(f"{what}: node {entry['node']}: {err}", reason="InvalidResourceStatus") from None
        if amount > 0:
            nodes.append(entry["node"])
    return sorted(set(nodes))


def _join(pools: Mapping[int, str], nodes: list[int]) -> str:
    return ",".join(pools[n] for n in nodes if pools.get(n))


def container_cpuset(req: PodRequest, facts: NodeFacts, *, be_cpu_manager: bool = False) -> str | None:
    """The cpuset rule above for the pod's containers: a CPU list, "" (none) or None (leave it)."""
    bound = resource_status_cpuset(req.key, req.annotations)
    if bound:
        return bound
    qos = req.labels.get(LABEL_POD_QOS, "")
    nodes = numa_nodes(req)
    if nodes and facts.ls_share_pool is not None:
        if qos == QOS_BE:
            if be_cpu_manager:
                return _join(facts.be_pools, nodes)
        else:
            return _join(facts.ls_pools, nodes)
    if qos == QOS_SYSTEM and facts.system_qos_cpuset:
        return facts.system_qos_cpuset
    if qos == QOS_LS:
        return facts.ls_share_pool
    if req.kube_qos == KUBE_BEST_EFFORT:
        return ""
    if facts.cpu_manager_policy == POLICY_STATIC:
        return None
    return facts.ls_share_pool


class CPUSetAllocator(HookPlugin):
    """The CPUSetAllocator plugin (see the module docstring); ``unset_cpu_quota`` False is
    Koordinator's ``--disable-unset-cpu-quota``."""

    name = "CPUSetAllocator"
    gate = "CPUSetAllocator"
    stages = (PRE_RUN_POD_SANDBOX, PRE_CREATE_CONTAINER, PRE_UPDATE_CONTAINER_RESOURCES)

    def __init__(self, *, unset_cpu_quota: bool = True, be_cpu_manager: bool = False) -> None:
        self.unset_cpu_quota = unset_cpu_quota
        self.be_cpu_manager = be_cpu_manager

    def pod_hook(self, req: PodRequest, facts: NodeFacts) -> HookResponse | None:
        if self.unset_cpu_quota and resource_status_cpuset(req.key, req.annotations):
            return HookResponse(Resources(cfs_quota=-1))
        return None

    def container_hook(self, req: ContainerRequest, facts: NodeFacts) -> HookResponse | None:
        cpuset = container_cpuset(req.pod, facts, be_cpu_manager=self.be_cpu_manager)
        quota = None
        if self.unset_cpu_quota and resource_status_cpuset(req.pod.key, req.pod.annotations):
            quota = -1
        if cpuset is None and quota is None:
            return None
        return HookResponse(Resources(cpuset=cpuset, cfs_quota=quota))
