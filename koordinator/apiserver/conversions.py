"""Served versions that are another view of a stored kind, converted field by field.

kube-apiserver stores one form of an object and converts it for every version it serves.
Two views here differ in shape, not only in ``apiVersion``:

* ``events.k8s.io/v1 Event`` is the same stored object as ``core/v1 Event``: a recorder
  that writes through one (kube-scheduler, kube-controller-manager) is read through the other
  (``kubectl get events``, ``kubectl describe``). Field mapping as in kube's
  ``pkg/apis/events/v1/conversion.go``.
* ``autoscaling/v1 HorizontalPodAutoscaler`` is stored as ``autoscaling/v2``. v1 has only a
  CPU utilization target; everything else v2 holds travels in the annotations kube uses
  (``autoscaling.alpha.kubernetes.io/metrics``, ``.../conditions``, ``.../behavior``,
  ``.../current-metrics``), so a v1 read-modify-write keeps what v1 cannot express.

Each ``View`` converts a whole object; ``to_storage`` leaves an object already in storage form
alone, so server-internal writes of a stored object pass through unchanged.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable

import orjson

Obj = dict[str, Any]


@dataclass(frozen=True)
class View:
    """How one served version converts to and from the stored form of its kind."""

    storage_api_version: str
    storage_kind: str
    _to_storage: Callable[[Obj], Obj]
    _from_storage: Callable[[Obj], Obj]

    def to_storage(self, obj: Obj) -> Obj:
        """The stored form of ``obj`` (returned unchanged when it already is in that form)."""
        if obj.get("apiVersion") == self.storage_api_version:
            return obj
        return self._to_storage(obj)

    def from_storage(self, obj: Obj) -> Obj:
        """The served form of a stored object."""
        return self._from_storage(obj)


# -- events.k8s.io/v1 <-> core/v1 -----------------------------------------------------------------

# (events.k8s.io/v1 name, core/v1 name) for fields that only change their name.
_EVENT_RENAMES = (
    ("regarding", "involvedObject"), ("note", "message"), ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"), ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"), ("reportingController", "reportingComponent"),
)
_EVENT_SAME = ("metadata", "eventTime", "series", "reportingInstance", "action", "reason", "related", "type")


def _event_to_core(obj: Obj) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": "v1"}
    for key in _EVENT_SAME:
        if key in obj:
            out[key] = copy.deepcopy(obj[key])
    for new, old in _EVENT_RENAMES:
        if obj.get(new) is not None:
            out[old] = copy.deepcopy(obj[new])
    # core/v1 always writes these (non-omitempty struct and string fields in Go).
    out.setdefault("involvedObject", {})
    out.setdefault("source", {})
    out.setdefault("reportingComponent", "")
    out.setdefault("reportingInstance", "")
    return out


def _event_from_core(obj: Obj) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    for key in _EVENT_SAME:
        if key in obj:
            out[key] = obj[key]
    for new, old in _EVENT_RENAMES:
        value = obj.get(old)
        if value is None or value == "" or (old == "source" and value == {}):
            continue
        out[new] = value
    out.setdefault("regarding", {})
    # eventTime is a required, non-omitempty field of events.k8s.io/v1: a legacy event shows null.
    out.setdefault("eventTime", None)
    return out


EVENTS_V1 = View("v1", "Event", _event_to_core, _event_from_core)


# -- autoscaling/v1 <-> autoscaling/v2 ------------------------------------------------------------

METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/metrics"
CURRENT_METRICS_ANNOTATION = "autoscaling.alpha.kubernetes.io/current-metrics"
CONDITIONS_ANNOTATION = "autoscaling.alpha.kubernetes.io/conditions"
BEHAVIOR_ANNOTATION = "autoscaling.alpha.kubernetes.io/behavior"
_HPA_ANNOTATIONS = (METRICS_ANNOTATION, CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION, BEHAVIOR_ANNOTATION)
DEFAULT_CPU_UTILIZATION = 80


def _is_cpu_utilization(metric: Any) -> bool:
    if not isinstance(metric, dict) or metric.get("type") != "Resource":
        return False
    res = metric.get("resource") or {}
    return res.get("name") == "cpu" and (res.get("target") or {}).get("type") == "Utilization"


def _target_v1(target: Obj, kind: str) -> Obj:
    """A v2 MetricTarget as the flat v1 (v2beta1-style) fields of one metric source."""
    out: Obj = {}
    if kind in ("Resource", "ContainerResource"):
        if target.get("averageUtilization") is not None:
            out["targetAverageUtilization"] = target["averageUtilization"]
        if target.get("averageValue") is not None:
            out["targetAverageValue"] = target["averageValue"]
    elif target.get("type") == "AverageValue" or kind == "Pods":
        out["targetAverageValue" if kind != "Object" else "averageValue"] = target.get("averageValue")
    else:
        out["targetValue"] = target.get("value")
    return {k: v for k, v in out.items() if v is not None}


def _metric_v2_to_v1(metric: Obj) -> Obj:
    kind = metric.get("type", "")
    out: Obj = {"type": kind}
    if kind == "Resource" and isinstance(metric.get("resource"), dict):
        src = metric["resource"]
        out["resource"] = {"name": src.get("name", ""), **_target_v1(src.get("target") or {}, kind)}
    elif kind == "ContainerResource" and isinstance(metric.get("containerResource"), dict):
        src = metric["containerResource"]
        out["containerResource"] = {"name": src.get("name", ""), "container": src.get("container", ""),
                                    **_target_v1(src.get("target") or {}, kind)}
    elif kind == "Pods" and isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        ident = src.get("metric") or {}
        out["pods"] = {"metricName": ident.get("name", ""), **_target_v1(src.get("target") or {}, kind)}
        if ident.get("selector") is not None:
            out["pods"]["selector"] = ident["selector"]
    elif kind == "Object" and isinstance(metric.get("object"), dict):
        src = metric["object"]
        ident = src.get("metric") or {}
        out["object"] = {"target": src.get("describedObject") or {}, "metricName": ident.get("name", ""),
                         **_target_v1(src.get("target") or {}, kind)}
        if ident.get("selector") is not None:
            out["object"]["selector"] = ident["selector"]
    elif kind == "External" and isinstance(metric.get("external"), dict):
        src = metric["external"]
        ident = src.get("metric") or {}
        out["external"] = {"metricName": ident.get("name", ""), **_target_v1(src.get("target") or {}, kind)}
        if ident.get("selector") is not None:
            out["external"]["metricSelector"] = ident["selector"]
    return out


def _target_v2(src: Obj, kind: str) -> Obj:
    if src.get("targetAverageUtilization") is not None:
        return {"type": "Utilization", "averageUtilization": src["targetAverageUtilization"]}
    if src.get("targetAverageValue") is not None:
        return {"type": "AverageValue", "averageValue": src["targetAverageValue"]}
    if src.get("averageValue") is not None:
        return {"type": "AverageValue", "averageValue": src["averageValue"]}
    if src.get("targetValue") is not None:
        return {"type": "Value", "value": src["targetValue"]}
    return {"type": "Utilization" if kind in ("Resource", "ContainerResource") else "Value"}


def _metric_v1_to_v2(metric: Any) -> Any:
    if not isinstance(metric, dict):
        return metric
    kind = metric.get("type", "")
    out: Obj = {"type": kind}
    if kind == "Resource" and isinstance(metric.get("resource"), dict):
        src = metric["resource"]
        out["resource"] = {"name": src.get("name", ""), "target": _target_v2(src, kind)}
    elif kind == "ContainerResource" and isinstance(metric.get("containerResource"), dict):
        src = metric["containerResource"]
        out["containerResource"] = {"name": src.get("name", ""), "container": src.get("container", ""),
                                    "target": _target_v2(src, kind)}
    elif kind == "Pods" and isinstance(metric.get("pods"), dict):
        src = metric["pods"]
        ident = {"name": src.get("metricName", "")}
        if src.get("selector") is not None:
            ident["selector"] = src["selector"]
        out["pods"] = {"metric": ident, "target": _target_v2(src, kind)}
    elif kind == "Object" and isinstance(metric.get("object"), dict):
        src = metric["object"]
        ident = {"name": src.get("metricName", "")}
        if src.get("selector") is not None:
            ident["selector"] = src["selector"]
        out["object"] = {"describedObject": src.get("target") or {}, "metric": ident, "target": _target_v2(src, kind)}
    elif kind == "External" and isinstance(metric.get("external"), dict):
        src = metric["external"]
        ident = {"name": src.get("metricName", "")}
        if src.get("metricSelector") is not None:
            ident["selector"] = src["metricSelector"]
        out["external"] = {"metric": ident, "target": _target_v2(src, kind)}
    return out


def _json_annotation(annotations: dict, key: str) -> Any:
    raw = annotations.pop(key, None)
    if not isinstance(raw, str):
        return None
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None  # not ours to interpret: kube ignores an unparsable annotation too


def _hpa_v1_to_v2(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["apiVersion"] = "autoscaling/v2"
    if not isinstance(out.get("metadata"), dict):
        out["metadata"] = {}
    md = out["metadata"]
    annotations = dict(md.get("annotations") or {}) if isinstance(md.get("annotations"), dict) else {}
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else {}
    metrics: list = []
    cpu = spec.pop("targetCPUUtilizationPercentage", None)
    if cpu is not None:
        metrics.append({"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": cpu}}})
    extra = _json_annotation(annotations, METRICS_ANNOTATION)
    if isinstance(extra, list):
        metrics.extend(_metric_v1_to_v2(m) for m in extra)
    if not metrics:
        # v1's conversion applies the CPU default itself (v1 defaulting cannot see the annotations).
        metrics = [{"type": "Resource", "resource": {
            "name": "cpu", "target": {"type": "Utilization", "averageUtilization": DEFAULT_CPU_UTILIZATION}}}]
    spec["metrics"] = metrics
    behavior = _json_annotation(annotations, BEHAVIOR_ANNOTATION)
    if isinstance(behavior, dict):
        spec["behavior"] = behavior
    out["spec"] = spec
    status = out.get("status")
    if isinstance(status, dict):
        new_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime", "currentReplicas",
                                                    "desiredReplicas") if k in status}
        current: list = []
        if status.get("currentCPUUtilizationPercentage") is not None:
            current.append({"type": "Resource", "resource": {
                "name": "cpu", "current": {"averageUtilization": status["currentCPUUtilizationPercentage"]}}})
        stored_current = _json_annotation(annotations, CURRENT_METRICS_ANNOTATION)
        if isinstance(stored_current, list):
            current.extend(m for m in stored_current if isinstance(m, dict))
        if current:
            new_status["currentMetrics"] = current
        conditions = _json_annotation(annotations, CONDITIONS_ANNOTATION)
        if isinstance(conditions, list):
            new_status["conditions"] = conditions
        out["status"] = new_status
    else:
        for key in (CURRENT_METRICS_ANNOTATION, CONDITIONS_ANNOTATION):
            annotations.pop(key, None)
    if annotations:
        md["annotations"] = annotations
    else:
        md.pop("annotations", None)
    return out


def _hpa_v2_to_v1(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["apiVersion"] = "autoscaling/v1"
    md = out.setdefault("metadata", {})
    annotations = dict(md.get("annotations") or {})
    spec = out.get("spec") if isinstance(out.get("spec"), dict) else {}
    metrics = spec.pop("metrics", None) or []
    behavior = spec.pop("behavior", None)
    others = []
    for metric in metrics:
        if _is_cpu_utilization(metric) and "targetCPUUtilizationPercentage" not in spec:
            spec["targetCPUUtilizationPercentage"] = metric["resource"]["target"].get("averageUtilization")
        else:
            others.append(_metric_v2_to_v1(metric))
    if others:
        annotations[METRICS_ANNOTATION] = orjson.dumps(others).decode()
    if behavior is not None:
        annotations[BEHAVIOR_ANNOTATION] = orjson.dumps(behavior).decode()
    out["spec"] = spec
    status = out.get("status")
    if isinstance(status, dict):
        new_status: Obj = {k: status[k] for k in ("observedGeneration", "lastScaleTime", "currentReplicas",
                                                    "desiredReplicas") if k in status}
        new_status.setdefault("currentReplicas", 0)
        new_status.setdefault("desiredReplicas", 0)
        rest = []
        for metric in status.get("currentMetrics") or []:
            res = (metric or {}).get("resource") or {}
            current = res.get("current") or {}
            is_cpu = (metric or {}).get("type") == "Resource" and res.get("name") == "cpu"
            if is_cpu and current.get("averageUtilization") is not None and \
                    "currentCPUUtilizationPercentage" not in new_status:
                new_status["currentCPUUtilizationPercentage"] = current["averageUtilization"]
            else:
                rest.append(metric)
        if rest:
            annotations[CURRENT_METRICS_ANNOTATION] = orjson.dumps(rest).decode()
        if status.get("conditions"):
            annotations[CONDITIONS_ANNOTATION] = orjson.dumps(status["conditions"]).decode()
        out["status"] = new_status
    if annotations:
        md["annotations"] = annotations
    return out


HPA_V1 = View("autoscaling/v2", "HorizontalPodAutoscaler", _hpa_v1_to_v2, _hpa_v2_to_v1)
