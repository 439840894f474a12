"""The order pods leave an overloaded node in (reference §1.6.6): cheapest first."""

from __future__ import annotations

from typing import Any

from koordinator.apis import extension
from koordinator.apis.timestamps import parse_time

from .usage import Amounts, Obj

ANNOTATION_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"

_PRIORITY_RANK = {extension.PRIORITY_FREE: 1, extension.PRIORITY_BATCH: 2, extension.PRIORITY_MID: 3,
                  extension.PRIORITY_PROD: 4}
_KUBE_QOS_RANK = {extension.KUBE_BEST_EFFORT: 1, extension.KUBE_BURSTABLE: 2, extension.KUBE_GUARANTEED: 3}
_KOORD_QOS_RANK = {extension.QOS_BE: 1, extension.QOS_LS: 2, extension.QOS_LSR: 3, extension.QOS_LSE: 4,
                   extension.QOS_SYSTEM: 4}
_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _int32_annotation(pod: Obj, key: str) -> int:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(key)
    if raw is None:
        return 0
    try:
        value = int(str(raw).strip(), 10)
    except ValueError:
        return 0
    return value if _INT32_MIN <= value <= _INT32_MAX else 0


def usage_fit_score(pod_usage: Amounts, excess: Amounts, weights: dict[str, int]) -> float:
    """How well the pod's usage matches the node's excess over its high thresholds.

    ratio = usage / excess per resource over the threshold; f = ratio below 1, else 1/ratio + 1; the
    weighted mean over the pod's resources (weights only for resources over the threshold). A pod
    just covering the excess scores highest (2), then pods slightly larger, then the largest smaller ones.
    """
    total_w = 0
    score = 0.0
    for r, used in pod_usage.items():
        w = weights.get(r, 0) if r in excess else 0
        e = excess.get(r, 0)
        ratio = used / e if e else 0.0
        f = ratio if ratio < 1 else 1.0 / ratio + 1.0
        score += w * f
        total_w += w
    return score / total_w if total_w else 0.0


def sort_key(pod: Obj, pod_usage: Amounts | None, excess: Amounts, weights: dict[str, int]) -> tuple[Any, ...]:
    """Ascending sort key: priority class, spec.priority, Kubernetes QoS, Koordinator QoS, deletion cost,
    eviction cost, usage fit (descending; pods without metrics after those with), newer first."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    priority = spec.get("priority")
    created = parse_time(meta.get("creationTimestamp")) or 0.0
    has_metric = pod_usage is not None
    fit = usage_fit_score(pod_usage, excess, weights) if has_metric else 0.0
    return (_PRIORITY_RANK.get(extension.priority_class_with_default(pod), 5),
            priority if isinstance(priority, int) else 0,
            _KUBE_QOS_RANK.get(extension.kube_qos_class(pod), 0),
            _KOORD_QOS_RANK.get(extension.qos_class_with_default(pod), 5),
            _int32_annotation(pod, ANNOTATION_DELETION_COST),
            _int32_annotation(pod, ANNOTATION_EVICTION_COST),
            0 if has_metric else 1,
            -fit,
            -created)


def sort_pods(pods: list[Obj], metrics: dict[str, Amounts], excess: Amounts, weights: dict[str, int]) -> list[Obj]:
    """``pods`` in eviction order (``metrics`` by ``namespace/name``)."""
    def key(pod: Obj) -> tuple[Any, ...]:
        meta = pod.get("metadata") or {}
        return sort_key(pod, metrics.get(f"{meta.get('namespace', '')}/{meta.get('name', '')}"), excess, weights)
    return sorted(pods, key=key)
