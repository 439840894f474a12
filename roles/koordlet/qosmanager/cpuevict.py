"""CPUEvict (reference A.7.3): BECPUEvict → CPUAllocatableEvict → CPUEvict, then one execution.

The decisions are pure functions (figures, NodeSLO ``resourceUsedThresholdWithBE``, pods in;
:class:`~.evictor.EvictTask` out): :func:`be_cpu_evict`, :func:`cpu_evict` and, in
:mod:`.allocatableevict`, :func:`allocatable_evict`. :class:`CPUEvict` is the strategy: it reads
the figures from the metric cache, applies the gates, the NodeSLO switch and the 20 s cool-down,
and hands the tasks to the shared :class:`~.evictor.Evictor`. CPU figures are milli-cores.

BE metrics (``node_be`` with ``be_resource=cpu`` and ``be_allocation`` ``usage``, ``request``,
``real-limit``) come from the BE resource collector (reference A.4.4).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from koordinator.apis import extension as ext
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.qosmanager.allocatableevict import (CPU_RESOURCES, allocatable_config,
                                                                    allocatable_evict)
from koordinator_roles.koordlet.qosmanager.evictor import EvictStrategy, EvictTask, Victim
from koordinator_roles.koordlet.qosmanager.evictpods import (has_be_label, is_be_class, node_quantity,
                                                             policy_allows, priority_evictable, priority_sort_key,
                                                             request_value, spec_priority)
from koordinator_roles.koordlet.qosmanager.framework import threshold_enabled

log = logging.getLogger("koordinator.koordlet.qosmanager")

BE_CPU_EVICT = "BECPUEvict"
CPU_ALLOCATABLE_EVICT = "CPUAllocatableEvict"
CPU_EVICT = "CPUEvict"
FEATURES = (BE_CPU_EVICT, CPU_ALLOCATABLE_EVICT, CPU_EVICT)

DEFAULT_BE_USAGE_THRESHOLD_PERCENT = 90
#: Without cpuEvictLowerPercent / memoryEvictLowerPercent, lower = threshold − 2.
RELEASE_BUFFER_PERCENT = 2
MAX_BE_SATISFACTION_LOWER_PERCENT = 60
EVICT_BY_ALLOCATABLE = "evictByAllocatable"

TARGET_BATCH_CPU_REQUEST = "batch-cpu-request"
TARGET_CPU_USED = "cpu-used"

# The node_be series the BE resource collector writes (one definition, in kinds).
BE_USAGE = kinds.BE_ALLOCATION_USAGE
BE_REQUEST = kinds.BE_ALLOCATION_REQUEST
BE_REAL_LIMIT = kinds.BE_ALLOCATION_REAL_LIMIT

Obj = Mapping[str, Any]
Warn = Callable[[str], None]


@dataclass(frozen=True)
class BECPUFigures:
    """The BE tier's CPU (milli-cores): used, requested (Σ batch-cpu) and its real limit, and how
    many samples the figures stand on (the smallest count of the three series)."""

    usage: float
    request: float
    limit: float
    count: int = 1


def batch_cpu_limit(node: Obj | None) -> float:
    """``cpuEvictPolicy: evictByAllocatable``'s limit: the node's allocatable batch-cpu (milli-cores);
    0 counts as 1, missing or negative as −1 (Koordinator's rule)."""
    value = node_quantity(node, "allocatable", ext.BATCH_CPU)
    if value is None or value < 0:
        return -1.0
    return float(value) or 1.0


def be_usage_high_enough(usage: float, limit: float, threshold_percent: int) -> bool:
    """Only a BE tier that uses its limit is starved by it: limit < 1 core always counts."""
    if limit <= 0:
        return False
    if limit < 1000:
        return True
    return usage / limit >= threshold_percent / 100


def be_release(request: float, limit: float, lower_percent: int, upper_percent: int) -> int:
    """Batch-cpu request (milli) to evict so that satisfaction limit/request climbs to ``upper``;
    0 while satisfaction is above ``lower``."""
    if request <= 0:
        return 0
    rate = limit / request
    if rate > lower_percent / 100:
        return 0
    gap = upper_percent / 100 - rate
    if gap <= 0:
        return 0
    return int(request * gap)


def be_satisfaction_config(threshold: Obj, warn: Warn) -> tuple[int, int, int] | None:
    """``(lower, upper, usage threshold)`` of BECPUEvict; None when unset (no defaults) or out of range."""
    lower = threshold.get("cpuEvictBESatisfactionLowerPercent")
    upper = threshold.get("cpuEvictBESatisfactionUpperPercent")
    if lower is None and upper is None:
        return None
    if not isinstance(lower, int) or not 0 < lower <= MAX_BE_SATISFACTION_LOWER_PERCENT:
        warn(f"cpuEvictBESatisfactionLowerPercent={lower!r} must be in (0, {MAX_BE_SATISFACTION_LOWER_PERCENT}]; "
             f"{BE_CPU_EVICT} skipped")
        return None
    if not isinstance(upper, int) or not 0 < upper < 100 or upper < lower:
        warn(f"cpuEvictBESatisfactionUpperPercent={upper!r} must be in (0, 100) and >= the lower percent "
             f"{lower}; {BE_CPU_EVICT} skipped")
        return None
    usage = threshold.get("cpuEvictBEUsageThresholdPercent")
    if usage is None:
        usage = DEFAULT_BE_USAGE_THRESHOLD_PERCENT
    return lower, upper, usage


def _be_order(pod_cpu: Mapping[str, float]) -> Callable[[Obj, Obj], int]:
    def ratio(pod: Obj) -> float:
        request = request_value(pod, ext.BATCH_CPU)
        used = pod_cpu.get((pod.get("metadata") or {}).get("uid", ""), 0.0)
        if request <= 0:
            return float("inf") if used > 0 else 0.0
        return used / request

    def cmp(a: Obj, b: Obj) -> int:
        pa, pb = spec_priority(a), spec_priority(b)
        if pa is not None and pb is not None and pa != pb:
            return -1 if pa < pb else 1
        ra, rb = ratio(a), ratio(b)
        return -1 if ra > rb else (1 if ra < rb else 0)

    return cmp


def be_cpu_evict(threshold: Obj, node: Obj | None, pods: Sequence[Obj], pod_cpu: Mapping[str, float],
                 avg: BECPUFigures | None, current: BECPUFigures | None, *, window: float,
                 collect_interval: float, warn: Warn = log.warning) -> EvictTask | None:
    """BECPUEvict: release batch-cpu requests while the BE tier is starved (satisfaction below lower).

    ``avg``: the figures averaged over ``window``; ``current``: the latest ones; ``pod_cpu``: pod
    UID → used milli-cores. Victims: pods labelled BE, by priority then usage/request ratio.
    """
    config = be_satisfaction_config(threshold, warn)
    if config is None or avg is None or current is None:
        return None
    lower, upper, usage_threshold = config
    if avg.count * collect_interval < window / 3:
        log.debug("%s: %d samples of BE CPU are not enough for a %ss window", BE_CPU_EVICT, avg.count, window)
        return None
    by_allocatable = threshold.get("cpuEvictPolicy") == EVICT_BY_ALLOCATABLE
    limit_avg = batch_cpu_limit(node) if by_allocatable else avg.limit
    limit_cur = batch_cpu_limit(node) if by_allocatable else current.limit
    if not be_usage_high_enough(avg.usage, limit_avg, usage_threshold):
        return None
    release = be_release(avg.request, limit_avg, lower, upper)
    if release <= 0:
        return None
    if not be_usage_high_enough(current.usage, limit_cur, usage_threshold):
        return None
    if current.request == avg.request and limit_cur == limit_avg:
        release_cur = release
    else:
        release_cur = be_release(current.request, limit_cur, lower, upper)
    if release_cur <= 0:
        return None
    release = min(release, release_cur)
    candidates = [pod for pod in pods if has_be_label(pod) and policy_allows(pod, BE_CPU_EVICT)]
    candidates.sort(key=functools.cmp_to_key(_be_order(pod_cpu)))
    victims = [Victim(pod, {TARGET_BATCH_CPU_REQUEST: float(request_value(pod, ext.BATCH_CPU))})
               for pod in candidates]
    message = (f"BE CPU satisfaction {limit_avg:.0f}/{avg.request:.0f} below {lower}%, "
               f"need to release {release}m batch-cpu request")
    return EvictTask(BE_CPU_EVICT, TARGET_BATCH_CPU_REQUEST, float(release), victims, message)


def usage_config(threshold: Obj, name: str, lower_name: str, feature: str, warn: Warn) -> tuple[int, int] | None:
    """``(threshold, lower)`` percents of a usage trigger; lower defaults to threshold − 2 and must be below it."""
    t = threshold.get(name)
    if t is None:
        return None
    if not isinstance(t, int) or t < 0:
        warn(f"{name}={t!r} must be an integer >= 0; {feature} skipped")
        return None
    lower = threshold.get(lower_name)
    if lower is None:
        lower = t - RELEASE_BUFFER_PERCENT
    if not isinstance(lower, int) or lower >= t:
        warn(f"{lower_name}={lower!r} must be below {name}={t}; {feature} skipped")
        return None
    return t, lower


def usage_release(capacity: int, used: float, t: int, lower: int) -> tuple[int, int]:
    """``(usage %, release)``: usage % = int(used) × 100 // capacity (integer, as Koordinator);
    release = capacity × (usage % − lower) // 100 when usage % ≥ t, else 0."""
    percent = int(used) * 100 // capacity
    if percent < t:
        return percent, 0
    return percent, capacity * (percent - lower) // 100


def cpu_evict(threshold: Obj, capacity_milli: int, node_cpu_milli: float | None, pods: Sequence[Obj],
              pod_cpu: Mapping[str, float], warn: Warn = log.warning) -> EvictTask | None:
    """CPUEvict: node CPU (average over the window, milli-cores) at or over ``cpuEvictThresholdPercent``
    of capacity → release down to the lower percent by evicting eviction-enabled low-priority pods."""
    config = usage_config(threshold, "cpuEvictThresholdPercent", "cpuEvictLowerPercent", CPU_EVICT, warn)
    if config is None or node_cpu_milli is None or capacity_milli <= 0:
        return None
    t, lower = config
    priority_threshold = threshold.get("evictEnabledPriorityThreshold")
    if not isinstance(priority_threshold, int):
        warn(f"evictEnabledPriorityThreshold={priority_threshold!r} must be set; {CPU_EVICT} skipped")
        return None
    percent, release = usage_release(capacity_milli, node_cpu_milli, t, lower)
    if release <= 0:
        return None
    candidates = [pod for pod in pods
                  if priority_evictable(pod, priority_threshold) and is_be_class(pod) and policy_allows(pod, CPU_EVICT)
                  and (pod.get("metadata") or {}).get("uid") in pod_cpu]
    used = {id(pod): pod_cpu[pod["metadata"]["uid"]] for pod in candidates}
    candidates.sort(key=lambda pod: priority_sort_key(pod, used[id(pod)]))
    victims = [Victim(pod, {TARGET_CPU_USED: float(used[id(pod)])}) for pod in candidates]
    message = f"node CPU usage {percent}% over threshold {t}%, need to release {release}m down to {lower}%"
    return EvictTask(CPU_EVICT, TARGET_CPU_USED, float(release), victims, message)


class CPUEvict(EvictStrategy):
    """The CPU eviction strategy (gates BECPUEvict, CPUAllocatableEvict, CPUEvict; all off by default)."""

    name = "CPUEvict"
    features = FEATURES

    @property
    def interval(self) -> float:
        return self.ctx.options.cpu_evict_interval

    @property
    def cool_time(self) -> float:
        return self.ctx.options.cpu_evict_cool_time

    def decide(self, now: float) -> list[EvictTask]:
        """The tasks of every enabled trigger, in Koordinator's order, from the current figures."""
        slo = self.ctx.states.node_slo()
        if not threshold_enabled(slo):
            return []
        node = self.ctx.states.node()
        capacity = node_quantity(node, "capacity", ext.CPU) or 0
        if capacity <= 0:
            return []
        threshold = slo.get("resourceUsedThresholdWithBE") or {}
        window = max(self.collect_interval, float(threshold.get("cpuEvictTimeWindowSeconds") or 0))
        pods = [meta.pod for meta in self.ctx.states.pods()]
        pod_cpu = _pod_cpu(self.ctx.cache, now - window, now)
        gates = self.ctx.gates
        tasks: list[EvictTask] = []
        if gates.get(BE_CPU_EVICT):
            avg, current = _be_figures(self.ctx.cache, now, window, 2 * self.collect_interval)
            task = be_cpu_evict(threshold, node, pods, pod_cpu, avg, current, window=window,
                                collect_interval=self.collect_interval, warn=self.warn)
            tasks += [task] if task else []
        if gates.get(CPU_ALLOCATABLE_EVICT):
            config = allocatable_config(threshold, "cpuAllocatableEvict", self.warn)
            if config is not None:
                tasks += allocatable_evict(CPU_ALLOCATABLE_EVICT, CPU_RESOURCES, config, node, pods)
        if gates.get(CPU_EVICT):
            node_cpu = _avg(self.ctx.cache.query(kinds.NODE_CPU_USAGE, now - window, now))
            task = cpu_evict(threshold, capacity, None if node_cpu is None else node_cpu * 1000, pods, pod_cpu,
                             warn=self.warn)
            tasks += [task] if task else []
        return tasks


def _avg(series: Any) -> float | None:
    return series.aggregate("avg") if series else None


def _pod_cpu(cache: Any, start: float, end: float) -> dict[str, float]:
    """Pod UID → average used milli-cores over [start, end] (the cache stores cores)."""
    return {uid: s.aggregate("avg") * 1000 for uid, s in cache.query_by(kinds.POD_CPU_USAGE, kinds.LABEL_POD_UID,
                                                                          start, end).items() if s}


def _be_figures(cache: Any, now: float, window: float,
                current_window: float) -> tuple[BECPUFigures | None, BECPUFigures | None]:
    """Average over ``window`` and latest (within ``current_window``) BE CPU figures; None without data."""
    def series(alloc: str, start: float) -> Any:
        return cache.query(kinds.NODE_BE, start, now, **{kinds.LABEL_BE_RESOURCE: kinds.BE_RESOURCE_CPU,
                                                         kinds.LABEL_BE_ALLOCATION: alloc})

    allocs = (BE_USAGE, BE_REQUEST, BE_REAL_LIMIT)
    over_window = [series(a, now - window) for a in allocs]
    latest = [series(a, now - current_window) for a in allocs]
    avg = cur = None
    if all(over_window):
        avg = BECPUFigures(*(s.aggregate("avg") for s in over_window), count=min(len(s) for s in over_window))
    if all(latest):
        cur = BECPUFigures(*(s.aggregate("last") for s in latest), count=min(len(s) for s in latest))
    return avg, cur
