"""MidResource: ``kubernetes.io/mid-cpu`` / ``mid-memory``.

Static mode (``midReclaimMode: static``)::

    mid = min(capacity × midStatic*ReservedPercent / 100, capacity × mid*ThresholdPercent / 100)

Default mode::

    nodeReserved = max(systemUsage + prod host apps, max(kubelet reservation, annotation reservation))
    unallocated  = max(capacity − nodeReserved − Σ requests of active prod/none pods, 0)
    alloc        = max(min(prodReclaimable, capacity − nodeUsage), 0) + unallocated × midUnallocatedPercent / 100
    mid          = min(alloc, capacity × mid*ThresholdPercent / 100)

CPU at milli precision, memory in bytes; a missing ``prodReclaimableMetric`` counts as 0 and
an invalid node usage leaves nothing unused (both Koordinator's behaviour).
"""

from __future__ import annotations

from typing import Any, Mapping

from koordinator.apis import extension as ext

from . import framework as fw
from .framework import CPU, MEMORY, NodeResource, Strategy

NAME = "MidResource"
RESOURCES = (ext.MID_CPU, ext.MID_MEMORY)
DEGRADE_MESSAGE = "degrade node Mid resource because of abnormal nodeMetric, reason: degradedByMidResource"
NOT_PROD = (ext.PRIORITY_MID, ext.PRIORITY_BATCH, ext.PRIORITY_FREE)


def reset(nr: NodeResource, message: str) -> None:
    for name in RESOURCES:
        nr.reset(name, message)


def calculate(strategy: Strategy, node: Mapping[str, Any], pods: list[Mapping[str, Any]],
              node_metric: Mapping[str, Any] | None, now: float, nr: NodeResource) -> None:
    """Fold mid-cpu (milli-cores as a plain integer) and mid-memory (bytes) into ``nr``."""
    if fw.is_metric_degraded(node_metric, strategy, now):
        reset(nr, DEGRADE_MESSAGE)
        return
    capacity = fw.node_capacity(node)
    cpu_cap = fw.scale_cpu(capacity[CPU], strategy.int("midCPUThresholdPercent"))
    mem_cap = fw.scale_memory(capacity[MEMORY], strategy.int("midMemoryThresholdPercent"))
    if strategy.str("midReclaimMode") == "static":
        cpu = min(fw.scale_cpu(capacity[CPU], strategy.int("midStaticCPUReservedPercent")), cpu_cap)
        memory = min(fw.scale_memory(capacity[MEMORY], strategy.int("midStaticMemoryReservedPercent")), mem_cap)
        nr.set_quantity(ext.MID_CPU, cpu, f"midAllocatable[CPU(milli-core)]:{cpu} = min(nodeCapacity:"
                        f"{capacity[CPU]} * midStaticCPUReservedPercent, nodeCapacity * midCPUThresholdPercent)")
        nr.set_quantity(ext.MID_MEMORY, ext.value_of_milli(memory),
                        f"midAllocatable[Memory(byte)]:{ext.value_of_milli(memory)} = min(nodeCapacity:"
                        f"{ext.value_of_milli(capacity[MEMORY])} * midStaticMemoryReservedPercent, "
                        "nodeCapacity * midMemoryThresholdPercent)")
        return

    status = fw.metric_status(node_metric)
    reclaimable = fw.usage_of(status.get("prodReclaimableMetric"), "resource", "status.prodReclaimableMetric")
    system_used = fw.rl_add(fw.system_usage(node_metric), fw.host_app_usage_above(node_metric, ext.PRIORITY_MID))
    reserved = fw.rl_max(system_used, fw.node_reserved(node))
    prod_requests = fw.rl_zero()
    for pod in pods:
        if ext.is_pod_active(pod) and ext.priority_class_with_default(pod) not in NOT_PROD:
            prod_requests = fw.rl_add(prod_requests, fw.pod_request(pod))
    unallocated = fw.rl_clamp(fw.rl_sub(fw.rl_sub(capacity, reserved), prod_requests))
    unused = node_unused(capacity, node_metric)
    unallocated_pct = strategy.int("midUnallocatedPercent")

    cpu = max(min(reclaimable[CPU], unused[CPU]), 0) + fw.scale_cpu(unallocated[CPU], unallocated_pct)
    cpu = min(cpu, cpu_cap)
    # Memory works in whole bytes: reclaimable and unused are compared as byte values.
    memory = max(min(ext.value_of_milli(reclaimable[MEMORY]), ext.value_of_milli(unused[MEMORY])), 0) \
        + fw.scale_memory(unallocated[MEMORY], unallocated_pct) // 1000
    memory = min(memory, mem_cap // 1000)
    nr.set_quantity(ext.MID_CPU, cpu, (
        f"midAllocatable[CPU(milli-core)]:{cpu} = min(max(min(ProdReclaimable:{reclaimable[CPU]}, "
        f"NodeUnused:{unused[CPU]}), 0) + Unallocated:{unallocated[CPU]} * midUnallocatedPercent:"
        f"{unallocated_pct}%, nodeCapacity:{capacity[CPU]} * midCPUThresholdPercent)"))
    nr.set_quantity(ext.MID_MEMORY, memory, (
        f"midAllocatable[Memory(byte)]:{memory} = min(max(min(ProdReclaimable:"
        f"{ext.value_of_milli(reclaimable[MEMORY])}, NodeUnused:{ext.value_of_milli(unused[MEMORY])}), 0) + "
        f"Unallocated:{ext.value_of_milli(unallocated[MEMORY])} * midUnallocatedPercent:{unallocated_pct}%, "
        f"nodeCapacity:{ext.value_of_milli(capacity[MEMORY])} * midMemoryThresholdPercent)"))


def node_unused(capacity: Mapping[str, int], node_metric: Mapping[str, Any] | None) -> dict[str, int]:
    """``capacity − nodeUsage``; nothing is unused when the node usage is missing or incomplete."""
    node_info = fw.metric_status(node_metric).get("nodeMetric") or {}
    resources = (node_info.get("nodeUsage") or {}).get("resources") or {}
    if CPU not in resources or MEMORY not in resources:
        return fw.rl_zero()
    return fw.rl_sub(capacity, fw.cpu_mem(resources, "status.nodeMetric.nodeUsage.resources"))
