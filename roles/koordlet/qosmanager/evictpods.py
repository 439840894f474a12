"""Which pods eviction may choose and the facts it sorts them by (reference 0.5, A.7.3, A.7.4).

Pure functions over plain pod dicts, shared by :mod:`.cpuevict` and :mod:`.memoryevict`:

- :func:`is_be_class` is the hard rule every victim passes, whatever the trigger: a pod whose QoS
  label is LSE, LSR, LS or SYSTEM is never evicted, nor one whose QoS (with default: no label and
  Kubernetes QoS BestEffort) is not BE;
- :func:`policy_allows`: the ``koordinator.sh/eviction-policy`` annotation, when present, lists the
  only features that may evict the pod;
- :func:`priority_evictable`: the CPUEvict/MemoryEvict rule (priority with default at most
  ``evictEnabledPriorityThreshold`` and label ``koordinator.sh/eviction-enabled=true``);
- request and priority helpers in the units the triggers compare (milli-cores, bytes).
"""

from __future__ import annotations

import json
import logging
from typing import Any, Mapping

from koordinator.apis import extension as ext
from koordinator.apis import quantity

log = logging.getLogger("koordinator.koordlet.qosmanager")

LABEL_EVICTION_ENABLED = "koordinator.sh/eviction-enabled"
ANNOTATION_EVICTION_POLICY = "koordinator.sh/eviction-policy"
ANNOTATION_EVICTION_PRIORITY = "koordinator.sh/eviction-priority"

#: QoS label values that are never evicted (the classes the co-location protects).
PROTECTED_QOS = (ext.QOS_LSE, ext.QOS_LSR, ext.QOS_LS, ext.QOS_SYSTEM)

Obj = Mapping[str, Any]


def _md(pod: Obj) -> Mapping[str, Any]:
    return pod.get("metadata") or {}


def pod_key(pod: Obj) -> str:
    """``namespace/name`` for logs and messages."""
    md = _md(pod)
    return f"{md.get('namespace', '')}/{md.get('name', '')}"


def pod_uid(pod: Obj) -> str:
    return _md(pod).get("uid") or ""


def is_be_class(pod: Obj) -> bool:
    """The hard rule: QoS label not LSE/LSR/LS/SYSTEM and QoS with default BE."""
    raw = (_md(pod).get("labels") or {}).get(ext.LABEL_POD_QOS)
    if raw in PROTECTED_QOS:
        return False
    return ext.qos_class_with_default(pod) == ext.QOS_BE


def has_be_label(pod: Obj) -> bool:
    """QoS label exactly BE: the BECPUEvict / BEMemoryEvict candidates."""
    return ext.qos_class(pod) == ext.QOS_BE


def policy_allows(pod: Obj, feature: str) -> bool:
    """Whether ``feature`` may evict ``pod`` under its ``koordinator.sh/eviction-policy`` annotation.

    No annotation: any feature. A JSON list of feature names: only those. An annotation that is not
    such a list is ignored (logged at debug), as a malformed policy cannot express a restriction.
    """
    raw = (_md(pod).get("annotations") or {}).get(ANNOTATION_EVICTION_POLICY)
    if raw is None:
        return True
    try:
        names = json.loads(raw)
    except ValueError:
        names = None
    if not isinstance(names, list):
        log.debug("pod %s: annotation %s=%r is not a JSON list; ignored", pod_key(pod),
                  ANNOTATION_EVICTION_POLICY, raw)
        return True
    return feature in names


def priority_value(pod: Obj) -> int:
    """``spec.priority``, else the default value of the pod's priority class with default, else 0."""
    value = (pod.get("spec") or {}).get("priority")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return ext.PRIORITY_DEFAULT_VALUES.get(ext.priority_class_with_default(pod), 0)


def spec_priority(pod: Obj) -> int | None:
    """``spec.priority`` when set (the BE sort compares it only when both pods have one)."""
    value = (pod.get("spec") or {}).get("priority")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def eviction_priority(pod: Obj) -> int:
    """Annotation ``koordinator.sh/eviction-priority`` (int32, lower evicted first); 0 when absent or bad."""
    raw = (_md(pod).get("annotations") or {}).get(ANNOTATION_EVICTION_PRIORITY)
    try:
        return int(raw) if raw is not None else 0
    except ValueError:
        return 0


def eviction_enabled(pod: Obj) -> bool:
    return (_md(pod).get("labels") or {}).get(LABEL_EVICTION_ENABLED) == "true"


def priority_evictable(pod: Obj, threshold: int) -> bool:
    """CPUEvict / MemoryEvict candidates: active, priority with default ≤ ``threshold``, eviction enabled."""
    return ext.is_pod_active(pod) and priority_value(pod) <= threshold and eviction_enabled(pod)


def priority_sort_key(pod: Obj, used: float) -> tuple:
    """CPUEvict / MemoryEvict / allocatable order: eviction-priority, priority, sub-priority ascending,
    then ``used`` (usage or request) descending."""
    return (eviction_priority(pod), priority_value(pod), ext.sub_priority(pod) or 0, -used)


def request_value(pod: Obj, resource: str) -> int:
    """Σ containers and sidecar init containers (``restartPolicy: Always``) of ``resource``'s request,
    as ``Quantity.Value()``: milli-cores for batch-cpu / mid-cpu, bytes for memory-like names.
    ``cpu`` is returned in milli-cores too (``MilliValue()``) so that every CPU figure shares a unit."""
    spec = pod.get("spec") or {}
    containers = list(spec.get("containers") or [])
    containers += [c for c in spec.get("initContainers") or [] if c.get("restartPolicy") == "Always"]
    total = 0
    for c in containers:
        q = ((c.get("resources") or {}).get("requests") or {}).get(resource)
        if q is None:
            continue
        n = quantity.milli_value(q) if resource == ext.CPU else quantity.value(q)
        if n > 0:
            total += n
    return total


def node_quantity(node: Obj | None, where: str, resource: str) -> int | None:
    """``status.<where>[resource]`` of ``node`` in the same units as :func:`request_value`; None if absent."""
    raw = (((node or {}).get("status") or {}).get(where) or {}).get(resource)
    if raw is None:
        return None
    try:
        return quantity.milli_value(raw) if resource == ext.CPU else quantity.value(raw)
    except ValueError:
        log.debug("node status.%s[%s]=%r is not a quantity", where, resource, raw)
        return None


class WarnOnce:
    """A ``warn(message)`` callable that logs each distinct message once at warning, then at debug.

    A bad NodeSLO value is seen every round (every second): saying it once is enough, and saying it
    again when it comes back after a good value is still right (:meth:`reset` on a good round).
    """

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self._seen: set[str] = set()

    def __call__(self, message: str) -> None:
        if message in self._seen:
            log.debug("%s: %s", self.prefix, message)
            return
        self._seen.add(message)
        log.warning("%s: %s", self.prefix, message)

    def reset(self) -> None:
        self._seen.clear()
