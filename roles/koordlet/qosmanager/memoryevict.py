"""MemoryEvict (reference A.7.4): BEMemoryEvict → MemoryAllocatableEvict → MemoryEvict, then one execution.

Pure decisions (:func:`be_memory_evict`, :func:`memory_evict`; MemoryAllocatableEvict in
:mod:`.allocatableevict`) and the strategy :class:`MemoryEvict` (gates, NodeSLO switch, 4 s
cool-down, metric cache reads). Memory figures are bytes; node and pod usage are the latest samples.

Both usage triggers share one rule: usage % = int(node used) × 100 // capacity; at or over
``memoryEvictThresholdPercent`` (default 70) release capacity × (usage % − lower %) // 100 bytes,
lower = ``memoryEvictLowerPercent`` or threshold − 2, which must be below the threshold.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Callable, Mapping, Sequence

from koordinator.apis import extension as ext
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.qosmanager.allocatableevict import (MEMORY_RESOURCES, allocatable_config,
                                                                    allocatable_evict)
from koordinator_roles.koordlet.qosmanager.cpuevict import usage_config, usage_release
from koordinator_roles.koordlet.qosmanager.evictor import EvictStrategy, EvictTask, Victim
from koordinator_roles.koordlet.qosmanager.evictpods import (has_be_label, is_be_class, node_quantity,
                                                             policy_allows, priority_evictable, priority_sort_key,
                                                             spec_priority)
from koordinator_roles.koordlet.qosmanager.framework import threshold_enabled

log = logging.getLogger("koordinator.koordlet.qosmanager")

BE_MEMORY_EVICT = "BEMemoryEvict"
MEMORY_ALLOCATABLE_EVICT = "MemoryAllocatableEvict"
MEMORY_EVICT = "MemoryEvict"
FEATURES = (BE_MEMORY_EVICT, MEMORY_ALLOCATABLE_EVICT, MEMORY_EVICT)

TARGET_MEMORY_USED = "memory-used"

Obj = Mapping[str, Any]
Warn = Callable[[str], None]


def _memory_config(threshold: Obj, feature: str, warn: Warn) -> tuple[int, int] | None:
    return usage_config(threshold, "memoryEvictThresholdPercent", "memoryEvictLowerPercent", feature, warn)


def _be_order(pod_memory: Mapping[str, float]) -> Callable[[Obj, Obj], int]:
    def used(pod: Obj) -> float:
        return pod_memory.get((pod.get("metadata") or {}).get("uid", ""), 0.0)

    def cmp(a: Obj, b: Obj) -> int:
        pa, pb = spec_priority(a), spec_priority(b)
        if pa is not None and pb is not None and pa != pb:
            return -1 if pa < pb else 1
        ua, ub = used(a), used(b)
        if ua != 0 and ub != 0:
            return -1 if ua > ub else (1 if ua < ub else 0)
        if ua == 0 and ub == 0:
            na, nb = (a.get("metadata") or {}).get("name", ""), (b.get("metadata") or {}).get("name", "")
            return -1 if na > nb else (1 if na < nb else 0)
        return -1 if ua != 0 else 1

    return cmp


def be_memory_evict(threshold: Obj, capacity: int, node_used: float | None, pods: Sequence[Obj],
                    pod_memory: Mapping[str, float], warn: Warn = log.warning) -> EvictTask | None:
    """BEMemoryEvict: victims are the pods labelled BE, lower spec.priority first, then larger usage."""
    config = _memory_config(threshold, BE_MEMORY_EVICT, warn)
    if config is None or node_used is None or capacity <= 0:
        return None
    t, lower = config
    percent, release = usage_release(capacity, node_used, t, lower)
    if release <= 0:
        return None
    candidates = [pod for pod in pods if has_be_label(pod) and policy_allows(pod, BE_MEMORY_EVICT)]
    candidates.sort(key=functools.cmp_to_key(_be_order(pod_memory)))
    victims = [Victim(pod, {TARGET_MEMORY_USED: float(pod_memory.get(pod["metadata"].get("uid", ""), 0.0))})
               for pod in candidates]
    message = f"node memory usage {percent}% over threshold {t}%, need to release {release} bytes down to {lower}%"
    return EvictTask(BE_MEMORY_EVICT, TARGET_MEMORY_USED, float(release), victims, message)


def memory_evict(threshold: Obj, capacity: int, node_used: float | None, pods: Sequence[Obj],
                 pod_memory: Mapping[str, float], warn: Warn = log.warning) -> EvictTask | None:
    """MemoryEvict: victims are eviction-enabled pods at or under ``evictEnabledPriorityThreshold``
    with a memory metric, by eviction-priority, priority, sub-priority, then usage descending."""
    config = _memory_config(threshold, MEMORY_EVICT, warn)
    if config is None or node_used is None or capacity <= 0:
        return None
    t, lower = config
    priority_threshold = threshold.get("evictEnabledPriorityThreshold")
    if not isinstance(priority_threshold, int):
        warn(f"evictEnabledPriorityThreshold={priority_threshold!r} must be set; {MEMORY_EVICT} skipped")
        return None
    percent, release = usage_release(capacity, node_used, t, lower)
    if release <= 0:
        return None
    candidates = [pod for pod in pods
                  if priority_evictable(pod, priority_threshold) and is_be_class(pod)
                  and policy_allows(pod, MEMORY_EVICT) and (pod.get("metadata") or {}).get("uid") in pod_memory]
    used = {id(pod): pod_memory[pod["metadata"]["uid"]] for pod in candidates}
    candidates.sort(key=lambda pod: priority_sort_key(pod, used[id(pod)]))
    victims = [Victim(pod, {TARGET_MEMORY_USED: float(used[id(pod)])}) for pod in candidates]
    message = f"node memory usage {percent}% over threshold {t}%, need to release {release} bytes down to {lower}%"
    return EvictTask(MEMORY_EVICT, TARGET_MEMORY_USED, float(release), victims, message)


class MemoryEvict(EvictStrategy):
    """The memory eviction strategy (gates BEMemoryEvict, MemoryAllocatableEvict, MemoryEvict; off by default)."""

    name = "memoryEvict"
    features = FEATURES

    @property
    def interval(self) -> float:
        return self.ctx.options.memory_evict_interval

    @property
    def cool_time(self) -> float:
        return self.ctx.options.memory_evict_cool_time

    def decide(self, now: float) -> list[EvictTask]:
        """The tasks of every enabled trigger, in Koordinator's order, from the latest figures."""
        slo = self.ctx.states.node_slo()
        if not threshold_enabled(slo):
            return []
        node = self.ctx.states.node()
        capacity = node_quantity(node, "capacity", ext.MEMORY) or 0
        if capacity <= 0:
            return []
        threshold = slo.get("resourceUsedThresholdWithBE") or {}
        start = now - 2 * self.collect_interval
        pods = [meta.pod for meta in self.ctx.states.pods()]
        series = self.ctx.cache.query(kinds.NODE_MEMORY_USAGE, start, now)
        node_used = series.aggregate("last") if series else None
        pod_memory = {uid: s.aggregate("last") for uid, s in
                      self.ctx.cache.query_by(kinds.POD_MEMORY_USAGE, kinds.LABEL_POD_UID, start, now).items() if s}
        gates = self.ctx.gates
        tasks: list[EvictTask] = []
        if gates.get(BE_MEMORY_EVICT):
            task = be_memory_evict(threshold, capacity, node_used, pods, pod_memory, warn=self.warn)
            tasks += [task] if task else []
        if gates.get(MEMORY_ALLOCATABLE_EVICT):
            config = allocatable_config(threshold, "memoryAllocatableEvict", self.warn)
            if config is not None:
                tasks += allocatable_evict(MEMORY_ALLOCATABLE_EVICT, MEMORY_RESOURCES, config, node, pods)
        if gates.get(MEMORY_EVICT):
            task = memory_evict(threshold, capacity, node_used, pods, pod_memory, warn=self.warn)
            tasks += [task] if task else []
        return tasks
