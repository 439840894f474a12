"""BatchResource: ``kubernetes.io/batch-cpu`` / ``batch-memory`` from usage, requests and the strategy.

    margin      = capacity × (100 − reclaimThresholdPercent) / 100
    sysOrRsv    = max(systemUsage + prod/mid host apps, max(kubelet reservation, annotation reservation))
    byUsage           = max(capacity − margin − sysOrRsv − HPUsed, 0)
    byRequest         = max(capacity − margin − nodeReserved − HPRequest, 0)
    byMaxUsageRequest = max(capacity − margin − sysOrRsv − HPMaxUsedReq, 0)

HP = every Running/Pending pod whose priority class (with default) is not batch or free.
Prepare subtracts third-party (e.g. YARN) batch allocations recorded on the node.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from koordinator.apis import extension as ext
from koordinator.apis import quantity

from . import framework as fw
from .framework import CPU, MEMORY, NodeResource, Strategy

NAME = "BatchResource"
RESOURCES = (ext.BATCH_CPU, ext.BATCH_MEMORY)
DEGRADE_MESSAGE = "degrade node resource because of abnormal nodeMetric, reason: degradedByBatchResource"
LOW_PRIORITY = (ext.PRIORITY_BATCH, ext.PRIORITY_FREE)


def reset(nr: NodeResource, message: str) -> None:
    for name in RESOURCES:
        nr.reset(name, message)


def calculate(strategy: Strategy, node: Mapping[str, Any], pods: list[Mapping[str, Any]],
              node_metric: Mapping[str, Any] | None, now: float, nr: NodeResource) -> None:
    """Fold batch-cpu (milli-cores as a plain integer) and batch-memory (bytes) into ``nr``."""
    if fw.is_metric_degraded(node_metric, strategy, now):
        reset(nr, DEGRADE_MESSAGE)
        return
    cpu, memory, cpu_msg, mem_msg = node_batch(strategy, node, pods, node_metric)
    nr.set_quantity(ext.BATCH_CPU, cpu, cpu_msg)
    nr.set_quantity(ext.BATCH_MEMORY, memory, mem_msg)


def hp_amounts(pods: list[Mapping[str, Any]], node_metric: Mapping[str, Any] | None):
    """(HPRequest, HPUsed, HPMaxUsedReq) of the high-priority pods, dangling metrics included."""
    metrics: dict[str, Mapping[str, Any]] = {}
    for pm in fw.metric_status(node_metric).get("podsMetric") or []:
        metrics[f"{pm.get('namespace', '')}/{pm.get('name', '')}"] = pm
    dangling = dict(metrics)
    hp_req, hp_used, hp_max = fw.rl_zero(), fw.rl_zero(), fw.rl_zero()
    for pod in pods:
        if not ext.is_pod_active(pod):
            continue  # its metric, if any, stays dangling
        key = fw.pod_key(pod)
        pm = metrics.get(key)
        if pm is not None:
            dangling.pop(key, None)
        if ext.priority_class_with_default(pod) in LOW_PRIORITY:
            continue
        req = fw.pod_request(pod)
        hp_req = fw.rl_add(hp_req, req)
        if pm is None:
            # Not reported yet: count the request as usage, but (like Koordinator) not in
            # HPMaxUsedReq.
            hp_used = fw.rl_add(hp_used, req)
            continue
        used = fw.usage_of(pm, "podUsage", f"podsMetric[{key}]")
        if ext.qos_class_with_default(pod) == ext.QOS_LSE:
            # LSE pods do not give back CPU: their cpu request counts as used.
            hp_used = fw.rl_add(hp_used, {CPU: req[CPU], MEMORY: used[MEMORY]})
        else:
            hp_used = fw.rl_add(hp_used, used)
        hp_max = fw.rl_add(hp_max, fw.rl_max(req, used))
    for key, pm in dangling.items():
        if ext.priority_class_by_name(pm.get("priority")) in LOW_PRIORITY:
            continue
        used = fw.usage_of(pm, "podUsage", f"podsMetric[{key}]")
        hp_used = fw.rl_add(hp_used, used)
        hp_max = fw.rl_add(hp_max, used)
    return hp_req, hp_used, hp_max


def safety_margin(strategy: Strategy, capacity: Mapping[str, int]) -> dict[str, int]:
    return {
        CPU: fw.scale_cpu(capacity[CPU], 100 - strategy.int("cpuReclaimThresholdPercent")),
        MEMORY: fw.scale_memory(capacity[MEMORY], 100 - strategy.int("memoryReclaimThresholdPercent")),
    }


def node_batch(strategy: Strategy, node: Mapping[str, Any], pods: list[Mapping[str, Any]],
               node_metric: Mapping[str, Any] | None) -> tuple[int, int, str, str]:
    """(batch-cpu milli, batch-memory bytes, cpu message, memory message) at node level."""
    hp_req, hp_used, hp_max = hp_amounts(pods, node_metric)
    capacity = fw.node_capacity(node)
    margin = safety_margin(strategy, capacity)
    system_used = fw.rl_add(fw.system_usage(node_metric), fw.host_app_usage_above(node_metric, ext.PRIORITY_BATCH))
    reserved = fw.node_reserved(node)
    sys_or_rsv = fw.rl_max(system_used, reserved)
    base = fw.rl_sub(capacity, margin)
    by_usage = fw.rl_clamp(fw.rl_sub(fw.rl_sub(base, sys_or_rsv), hp_used))
    by_request = fw.rl_clamp(fw.rl_sub(fw.rl_sub(base, reserved), hp_req))
    by_max = fw.rl_clamp(fw.rl_sub(fw.rl_sub(base, sys_or_rsv), hp_max))

    cpu_policy = strategy.str("cpuCalculatePolicy")
    if cpu_policy == "maxUsageRequest":
        cpu, cpu_hp, cpu_hp_name = by_max[CPU], hp_max[CPU], "podHPMaxUsedRequest"
    else:  # "usage" and anything else ("request" is not implemented for CPU)
        cpu, cpu_hp, cpu_hp_name = by_usage[CPU], hp_used[CPU], "podHPUsed"
    mem_policy = strategy.str("memoryCalculatePolicy")
    if mem_policy == "request":
        memory, mem_sys, mem_sys_name, mem_hp, mem_hp_name = (
            by_request[MEMORY], reserved[MEMORY], "nodeReserved", hp_req[MEMORY], "podHPRequest")
    elif mem_policy == "maxUsageRequest":
        memory, mem_sys, mem_sys_name, mem_hp, mem_hp_name = (
            by_max[MEMORY], sys_or_rsv[MEMORY], "systemUsage", hp_max[MEMORY], "podHPMaxUsedRequest")
    else:
        memory, mem_sys, mem_sys_name, mem_hp, mem_hp_name = (
            by_usage[MEMORY], sys_or_rsv[MEMORY], "systemUsage", hp_used[MEMORY], "podHPUsed")

    cpu_limit = strategy.optional_int("batchCPUThresholdPercent")
    if cpu_limit is not None:
        cpu = min(cpu, fw.scale_cpu(capacity[CPU], cpu_limit))
    mem_limit = strategy.optional_int("batchMemoryThresholdPercent")
    if mem_limit is not None:
        memory = min(memory, fw.scale_memory(capacity[MEMORY], mem_limit))

    giga = 10 ** 12  # milli-bytes per GB (messages show whole GB like Koordinator's ScaledValue(Giga))
    cpu_msg = (f"batchAllocatable[CPU(Milli-Core)]:{cpu} = nodeCapacity:{capacity[CPU]} - "
               f"nodeSafetyMargin:{margin[CPU]} - systemUsageOrNodeReserved:{sys_or_rsv[CPU]} - "
               f"{cpu_hp_name}:{cpu_hp}")
    mem_msg = (f"batchAllocatable[Mem(GB)]:{-(-memory // giga)} = "
               f"nodeCapacity:{-(-capacity[MEMORY] // giga)} - nodeSafetyMargin:{-(-margin[MEMORY] // giga)} - "
               f"{mem_sys_name}:{-(-mem_sys // giga)} - {mem_hp_name}:{-(-mem_hp // giga)}")
    return cpu, ext.value_of_milli(memory), cpu_msg, mem_msg


# -- prepare -----------------------------------------------------------------------------------------

def _third_party_batch(annotations: Mapping[str, Any]) -> dict[str, int] | None:
    """Σ resources (milli-units) of koord-batch third-party allocations; None when there are none."""
    raw = annotations.get(fw.ANNOTATION_THIRD_PARTY_ALLOCATIONS)
    if raw is None:
        return None
    try:
        doc = json.loads(raw)
        allocations = doc.get("allocations") or [] if isinstance(doc, dict) else []
        total: dict[str, int] | None = None
        for alloc in allocations:
            if not isinstance(alloc, dict) or alloc.get("priority") != ext.PRIORITY_BATCH:
                continue
            total = ext.add(total or {}, ext.resource_list(alloc.get("resources")))
        return total
    except (ValueError, TypeError, AttributeError, quantity.QuantityError):
        return None  # unreadable: Koordinator stops the prepare step here


def _origin_annotation(annotations: Mapping[str, Any], cpu: int, memory: int) -> str:
    """``originExtendedAllocatable`` JSON, merged into the resources already recorded there."""
    resources: dict[str, Any] = {}
    try:
        old = json.loads(annotations.get(fw.ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE) or "{}")
        if isinstance(old, dict) and isinstance(old.get("resources"), dict):
            resources = dict(old["resources"])
    except ValueError:
        pass
    resources[ext.BATCH_CPU] = quantity.format_quantity(max(cpu, 0), quantity.DECIMAL_SI)
    resources[ext.BATCH_MEMORY] = quantity.format_quantity(max(memory, 0), quantity.BINARY_SI)
    return json.dumps({"resources": dict(sorted(resources.items()))}, separators=(",", ":"))


def prepare_third_party(node: dict) -> None:
    """Record the origin batch allocatable and subtract third-party batch allocations (B.5.3)."""
    status = node.setdefault("status", {})
    allocatable = status.setdefault("allocatable", {})
    capacity = status.setdefault("capacity", {})
    cpu = quantity.value(allocatable[ext.BATCH_CPU]) if ext.BATCH_CPU in allocatable else -1
    memory = quantity.value(allocatable[ext.BATCH_MEMORY]) if ext.BATCH_MEMORY in allocatable else -1
    annotations = node.setdefault("metadata", {}).setdefault("annotations", {})
    annotations[fw.ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE] = _origin_annotation(annotations, cpu, memory)
    if cpu < 0 or memory < 0:
        return
    third = _third_party_batch(annotations)
    if third is None:
        return
    kube = {
        ext.BATCH_CPU: max(cpu - ext.value_of_milli(third.get(ext.BATCH_CPU, 0)), 0),
        ext.BATCH_MEMORY: max(memory - ext.value_of_milli(third.get(ext.BATCH_MEMORY, 0)), 0),
    }
    for name, value in kube.items():
        capacity[name] = allocatable[name] = fw.format_value(name, value)
