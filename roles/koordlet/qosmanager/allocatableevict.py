"""The request-ratio triggers CPUAllocatableEvict and MemoryAllocatableEvict (reference A.7.3, A.7.4).

Pure: NodeSLO thresholds, the Node and its pods in, :class:`~.evictor.EvictTask` objects out. For
each low-priority tier resource (``batch-*`` for koord-batch pods, ``mid-*`` for koord-mid pods) the
pods whose priority (with default) is at most ``allocatableEvictPriorityThreshold`` request
``req``; with the node's allocatable ``alloc`` of that resource:

- ``alloc`` missing or 0 → release everything requested;
- ``req / alloc > T%`` → release ``req − L% × alloc`` (T, L: the feature's threshold and lower percent);
- else nothing.

Victims are those pods (BE class, eviction policy allowing the feature) in CPUEvict's order with
the request in place of the usage; each releases its request of the resource.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, Sequence

from koordinator.apis import extension as ext
from koordinator_roles.koordlet.qosmanager.evictor import EvictTask, Victim
from koordinator_roles.koordlet.qosmanager.evictpods import (is_be_class, node_quantity, policy_allows,
                                                             priority_sort_key, priority_value, request_value)

log = logging.getLogger("koordinator.koordlet.qosmanager")

#: The highest allocatableEvictPriorityThreshold Koordinator accepts (the top of koord-mid).
MAX_ALLOCATABLE_PRIORITY = 7999

CPU_RESOURCES = {ext.PRIORITY_BATCH: ext.BATCH_CPU, ext.PRIORITY_MID: ext.MID_CPU}
MEMORY_RESOURCES = {ext.PRIORITY_BATCH: ext.BATCH_MEMORY, ext.PRIORITY_MID: ext.MID_MEMORY}


def target_of(resource: str) -> str:
    """The release target name of a resource's requests."""
    return f"{resource}-request"


def allocatable_config(threshold: Mapping[str, Any], prefix: str,
                       warn: Callable[[str], None]) -> tuple[int, int, int] | None:
    """``(T, L, P)`` from ``<prefix>ThresholdPercent``, ``<prefix>LowerPercent`` and
    ``allocatableEvictPriorityThreshold``; None (``warn`` says why) when absent or out of range."""
    t = threshold.get(f"{prefix}ThresholdPercent")
    lower = threshold.get(f"{prefix}LowerPercent")
    p = threshold.get("allocatableEvictPriorityThreshold")
    if t is None:
        return None   # not configured: the feature stays idle, nothing to say
    if not isinstance(t, int) or t < 0:
        warn(f"{prefix}ThresholdPercent={t!r} must be an integer >= 0; {prefix} skipped")
        return None
    if not isinstance(lower, int) or lower < 0 or lower >= t:
        warn(f"{prefix}LowerPercent={lower!r} must be set, >= 0 and below {prefix}ThresholdPercent={t}; "
             f"{prefix} skipped")
        return None
    if not isinstance(p, int) or p > MAX_ALLOCATABLE_PRIORITY:
        warn(f"allocatableEvictPriorityThreshold={p!r} must be set and <= {MAX_ALLOCATABLE_PRIORITY}; "
             f"{prefix} skipped")
        return None
    return t, lower, p


def allocatable_evict(feature: str, resources: Mapping[str, str], config: tuple[int, int, int],
                      node: Mapping[str, Any] | None, pods: Sequence[Mapping[str, Any]]) -> list[EvictTask]:
    """One task per tier resource whose requests exceed ``T%`` of its allocatable (see the module docstring)."""
    t, lower, p = config
    tasks = []
    for tier, resource in resources.items():
        eligible = [pod for pod in pods
                    if ext.is_pod_active(pod) and priority_value(pod) <= p
                    and ext.priority_class_with_default(pod) == tier]
        requests = {id(pod): request_value(pod, resource) for pod in eligible}
        requested = sum(requests.values())
        if requested <= 0:
            continue
        alloc = node_quantity(node, "allocatable", resource)
        if not alloc:
            release = requested
            why = f"node allocatable {resource} is {alloc or 'missing'}, pods request {requested}"
        elif requested * 100 > t * alloc:
            release = requested - lower * alloc // 100
            why = f"pods request {requested} of allocatable {alloc} {resource} (over {t}%, lower {lower}%)"
        else:
            continue
        if release <= 0:
            continue
        target = target_of(resource)
        candidates = [pod for pod in eligible
                      if requests[id(pod)] > 0 and is_be_class(pod) and policy_allows(pod, feature)]
        candidates.sort(key=lambda pod: priority_sort_key(pod, requests[id(pod)]))
        victims = [Victim(pod, {target: float(requests[id(pod)])}) for pod in candidates]
        tasks.append(EvictTask(feature, target, float(release), victims, f"{why}, need to release {release}"))
    return tasks
