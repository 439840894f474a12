"""Koordinator's pod model: QoS classes, priority classes, well-known keys and pod resource sums.

Shared by every role (the manager's webhooks and resource calculation, the scheduler, the
koordlet). Objects are plain dicts as decoded from JSON. Resource amounts are returned as
**milli-units** (``Quantity.MilliValue()``) for every resource, so ``cpu: 500m`` is 500 and
``memory: 1Gi`` is 1073741824000; divide by 1000 (see :func:`value_of_milli`) where Koordinator
works in whole units (bytes, batch-cpu "milli-cores as a plain integer").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from koordinator.apis import quantity

Obj = dict[str, Any]
ResourceList = dict[str, int]  # resource name -> milli-units

DOMAIN_PREFIX = "koordinator.sh/"
NODE_DOMAIN_PREFIX = "node.koordinator.sh/"
SCHEDULING_DOMAIN_PREFIX = "scheduling.koordinator.sh/"
QUOTA_DOMAIN_PREFIX = "quota.scheduling.koordinator.sh/"

LABEL_POD_QOS = "koordinator.sh/qosClass"
LABEL_POD_PRIORITY_CLASS = "koordinator.sh/priority-class"
LABEL_POD_PRIORITY = "koordinator.sh/priority"
ANNOTATION_EXTENDED_RESOURCE_SPEC = "node.koordinator.sh/extended-resource-spec"
ANNOTATION_RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"

# -- QoS classes -----------------------------------------------------------------------------------

QOS_LSE = "LSE"
QOS_LSR = "LSR"
QOS_LS = "LS"
QOS_BE = "BE"
QOS_SYSTEM = "SYSTEM"
QOS_NONE = ""
QOS_CLASSES = (QOS_LSE, QOS_LSR, QOS_LS, QOS_BE, QOS_SYSTEM)

# Kubernetes QoS (status.qosClass)
KUBE_GUARANTEED = "Guaranteed"
KUBE_BURSTABLE = "Burstable"
KUBE_BEST_EFFORT = "BestEffort"

# -- priority classes ------------------------------------------------------------------------------

PRIORITY_PROD = "koord-prod"
PRIORITY_MID = "koord-mid"
PRIORITY_BATCH = "koord-batch"
PRIORITY_FREE = "koord-free"
PRIORITY_NONE = ""
PRIORITY_CLASSES = (PRIORITY_PROD, PRIORITY_MID, PRIORITY_BATCH, PRIORITY_FREE)

# Inclusive value bands and the default value of each class.
PRIORITY_BANDS: dict[str, tuple[int, int]] = {
    PRIORITY_PROD: (9000, 9999),
    PRIORITY_MID: (7000, 7999),
    PRIORITY_BATCH: (5000, 5999),
    PRIORITY_FREE: (3000, 3999),
}
PRIORITY_DEFAULT_VALUES = {PRIORITY_PROD: 9500, PRIORITY_MID: 7500, PRIORITY_BATCH: 5500, PRIORITY_FREE: 3500,
                           PRIORITY_NONE: 0}

# -- resources -------------------------------------------------------------------------------------

CPU = "cpu"
MEMORY = "memory"
BATCH_CPU = "kubernetes.io/batch-cpu"
BATCH_MEMORY = "kubernetes.io/batch-memory"
MID_CPU = "kubernetes.io/mid-cpu"
MID_MEMORY = "kubernetes.io/mid-memory"

# What cpu/memory become for pods of each priority class (the pod webhook's translation).
RESOURCE_NAME_MAP: dict[str, dict[str, str]] = {
    PRIORITY_BATCH: {CPU: BATCH_CPU, MEMORY: BATCH_MEMORY},
    PRIORITY_MID: {CPU: MID_CPU, MEMORY: MID_MEMORY},
}


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _spec(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return pod.get("spec") or {}


def qos_class(pod: Mapping[str, Any]) -> str:
    """The pod's raw Koordinator QoS (label ``koordinator.sh/qosClass``); unknown values count as none."""
    value = _labels(pod).get(LABEL_POD_QOS, "")
    return value if value in QOS_CLASSES else QOS_NONE


def qos_class_by_name(name: str | None) -> str:
    """A QoS class name as Koordinator parses it (anything unknown is none)."""
    return name if name in QOS_CLASSES else QOS_NONE


def kube_qos_class(pod: Mapping[str, Any]) -> str:
    """Kubernetes QoS: ``status.qosClass`` if set, else computed from the spec like the kubelet."""
    status = (pod.get("status") or {}).get("qosClass")
    if status:
        return status
    return compute_kube_qos_class(pod)


def compute_kube_qos_class(pod: Mapping[str, Any]) -> str:
    """``v1qos.GetPodQOS``: Guaranteed, Burstable or BestEffort from cpu/memory requests and limits."""
    spec = _spec(pod)
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        res = c.get("resources") or {}
        for name, q in (res.get("requests") or {}).items():
            v = quantity.milli_value(q) if name in (CPU, MEMORY) else 0
            if v > 0:
                requests[name] = requests.get(name, 0) + v
        found = set()
        for name, q in (res.get("limits") or {}).items():
            v = quantity.milli_value(q) if name in (CPU, MEMORY) else 0
            if v > 0:
                found.add(name)
                limits[name] = limits.get(name, 0) + v
        if found != {CPU, MEMORY}:
            guaranteed = False
    if not requests and not limits:
        return KUBE_BEST_EFFORT
    if guaranteed and all(limits.get(name) == v for name, v in requests.items()) and len(requests) == len(limits):
        return KUBE_GUARANTEED
    return KUBE_BURSTABLE


def qos_class_with_default(pod: Mapping[str, Any]) -> str:
    """Raw QoS, or derived from Kubernetes QoS: Guaranteed -> LSR, Burstable -> LS, BestEffort -> BE."""
    qos = qos_class(pod)
    if qos:
        return qos
    return {KUBE_GUARANTEED: QOS_LSR, KUBE_BURSTABLE: QOS_LS, KUBE_BEST_EFFORT: QOS_BE}.get(kube_qos_class(pod), QOS_NONE)


def priority_class_by_value(value: int | None) -> str:
    """The band ``value`` falls in; None or outside every band is none."""
    if value is None:
        return PRIORITY_NONE
    for name, (low, high) in PRIORITY_BANDS.items():
        if low <= value <= high:
            return name
    return PRIORITY_NONE


def priority_class_by_name(name: str | None) -> str:
    """A priority class name as Koordinator parses it (anything unknown is none)."""
    return name if name in PRIORITY_CLASSES else PRIORITY_NONE


def priority_class(pod: Mapping[str, Any]) -> str:
    """Raw priority class: label ``koordinator.sh/priority-class`` if present, else by ``spec.priority``."""
    labels = _labels(pod)
    if LABEL_POD_PRIORITY_CLASS in labels:
        return priority_class_by_name(labels[LABEL_POD_PRIORITY_CLASS])
    priority = _spec(pod).get("priority")
    return priority_class_by_value(priority if isinstance(priority, int) and not isinstance(priority, bool) else None)


def priority_class_with_default(pod: Mapping[str, Any]) -> str:
    """Raw priority class, else from QoS with default: SYSTEM/LSE/LSR/LS -> prod, BE -> batch."""
    raw = priority_class(pod)
    if raw:
        return raw
    qos = qos_class_with_default(pod)
    if qos in (QOS_SYSTEM, QOS_LSE, QOS_LSR, QOS_LS):
        return PRIORITY_PROD
    if qos == QOS_BE:
        return PRIORITY_BATCH
    return PRIORITY_NONE


def sub_priority(pod: Mapping[str, Any]) -> int | None:
    """Label ``koordinator.sh/priority`` as an integer, or None when absent or not a number."""
    raw = _labels(pod).get(LABEL_POD_PRIORITY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


# -- resource arithmetic (milli-units) -------------------------------------------------------------

def resource_list(raw: Mapping[str, Any] | None) -> ResourceList:
    """A ResourceList of quantities (``{"cpu": "500m"}``) as milli-units (``{"cpu": 500}``)."""
    return {name: quantity.milli_value(q) for name, q in (raw or {}).items()}


def add(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def subtract(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) - v
    return out


def maximum(a: Mapping[str, int], b: Mapping[str, int]) -> ResourceList:
    out = dict(a)
    for k, v in b.items():
        out[k] = max(out.get(k, v), v)
    return out


def value_of_milli(milli: int) -> int:
    """Whole units of a milli amount, rounded away from zero as ``Quantity.Value()`` does."""
    magnitude = -(-abs(milli) // 1000)
    return magnitude if milli >= 0 else -magnitude


def _container_sum(containers: Iterable[Mapping[str, Any]], which: str) -> ResourceList:
    total: ResourceList = {}
    for c in containers:
        for name, q in (((c.get("resources") or {}).get(which)) or {}).items():
            total[name] = total.get(name, 0) + quantity.milli_value(q)
    return total


def pod_requests(pod: Mapping[str, Any]) -> ResourceList:
    """The pod's effective request, as the scheduler computes it (``resource.PodRequests``).

    Σ containers, raised to the largest init container per resource (restartable sidecar init
    containers add to the sum instead), plus ``spec.overhead``.
    """
    return _pod_amounts(pod, "requests")


def pod_limits(pod: Mapping[str, Any]) -> ResourceList:
    """The pod's effective limit (same rules as :func:`pod_requests`, over ``limits``)."""
    return _pod_amounts(pod, "limits")


def _pod_amounts(pod: Mapping[str, Any], which: str) -> ResourceList:
    spec = _spec(pod)
    total = _container_sum(spec.get("containers") or [], which)
    init_containers = spec.get("initContainers")
    if init_containers:
        sidecars: ResourceList = {}
        init_max: ResourceList = {}
        for c in init_containers:
            amounts = resource_list((c.get("resources") or {}).get(which))
            if c.get("restartPolicy") == "Always":
                sidecars = add(sidecars, amounts)
                total = add(total, amounts)
            else:
                # A regular init container runs beside the sidecars started before it.
                init_max = maximum(init_max, add(amounts, sidecars))
        total = maximum(total, init_max)
    if spec.get("overhead"):
        total = add(total, resource_list(spec["overhead"]))
    return total


def is_pod_active(pod: Mapping[str, Any]) -> bool:
    """Running or Pending (what the manager counts on a node)."""
    return (pod.get("status") or {}).get("phase") in ("Running", "Pending")
