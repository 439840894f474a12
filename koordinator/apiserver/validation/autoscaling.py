"""autoscaling/v2 HorizontalPodAutoscaler (autoscaling/v1 objects are converted to v2 first)."""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.errors import not_supported, required
from koordinator.apiserver.validation.causes import Causes, Obj, as_dict, as_int, as_list, as_str, invalid
from koordinator.apiserver.validation.formats import name_is_path_segment
from koordinator.apiserver.validation.meta import validate_object_meta


# -- autoscaling ------------------------------------------------------------------------------

_METRIC_TYPES = ["ContainerResource", "External", "Object", "Pods", "Resource"]
_METRIC_SOURCE_FIELDS = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
                         "Object": "object", "External": "external"}


def _validate_metric_target(target: Any, path: str) -> Causes:
    target = as_dict(target)
    ttype = as_str(target.get("type"))
    causes: Causes = []
    if not ttype:
        causes.append(required(f"{path}.type", "must specify a metric target type"))
    elif ttype not in ("AverageValue", "Utilization", "Value"):
        causes.append(not_supported(f"{path}.type", ttype, ["AverageValue", "Utilization", "Value"]))
    if target.get("value") is None and target.get("averageValue") is None and target.get("averageUtilization") is None:
        causes.append(required(path, "must set either a target value, average value, or average utilization"))
    utilization = as_int(target.get("averageUtilization"))
    if utilization is not None and utilization < 1:
        causes.append(invalid(f"{path}.averageUtilization", utilization, "must be greater than 0"))
    return causes


def _validate_hpa_v2(obj: Obj) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    ref = as_dict(spec.get("scaleTargetRef"))
    if not as_str(ref.get("kind")):
        causes.append(required("spec.scaleTargetRef.kind", ""))
    else:
        causes.extend(invalid("spec.scaleTargetRef.kind", ref["kind"], m)
                      for m in name_is_path_segment(ref["kind"], False))
    if not as_str(ref.get("name")):
        causes.append(required("spec.scaleTargetRef.name", ""))
    else:
        causes.extend(invalid("spec.scaleTargetRef.name", ref["name"], m)
                      for m in name_is_path_segment(ref["name"], False))
    min_replicas = as_int(spec.get("minReplicas"))
    if min_replicas is not None and min_replicas < 1:
        causes.append(invalid("spec.minReplicas", min_replicas, "must be greater than or equal to 1"))
    max_replicas = as_int(spec.get("maxReplicas"))
    if max_replicas is None or max_replicas < 1:
        causes.append(invalid("spec.maxReplicas", max_replicas or 0, "must be greater than 0"))
    elif min_replicas is not None and max_replicas < min_replicas:
        causes.append(invalid("spec.maxReplicas", max_replicas, "must be greater than or equal to `minReplicas`"))
    for i, metric in enumerate(as_dict(m) for m in as_list(spec.get("metrics"))):
        mpath = f"spec.metrics[{i}]"
        mtype = as_str(metric.get("type"))
        if not mtype:
            causes.append(required(f"{mpath}.type", "must specify a metric source type"))
            continue
        if mtype not in _METRIC_TYPES:
            causes.append(not_supported(f"{mpath}.type", mtype, _METRIC_TYPES))
            continue
        field = _METRIC_SOURCE_FIELDS[mtype]
        source = metric.get(field)
        if source is None:
            causes.append(required(f"{mpath}.{field}", "must populate information for the given metric source"))
            continue
        source = as_dict(source)
        if mtype in ("Resource", "ContainerResource") and not as_str(source.get("name")):
            causes.append(required(f"{mpath}.{field}.name", "must specify a resource name"))
        if mtype == "ContainerResource" and not as_str(source.get("container")):
            causes.append(required(f"{mpath}.{field}.container", "must specify a container"))
        if mtype in ("Pods", "Object", "External") and not as_str(as_dict(source.get("metric")).get("name")):
            causes.append(required(f"{mpath}.{field}.metric.name", "must specify a metric name"))
        causes.extend(_validate_metric_target(source.get("target"), f"{mpath}.{field}.target"))
    return causes


def validate_hpa(obj: Obj, old: Obj | None) -> Causes:
    """Both served versions validate the stored (v2) form, as kube validates the internal one."""
    if obj.get("apiVersion") == "autoscaling/v1":
        from koordinator.apiserver.conversions import HPA_V1

        obj = HPA_V1.to_storage(obj)
    return _validate_hpa_v2(obj)
