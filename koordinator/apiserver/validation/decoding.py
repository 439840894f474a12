"""Decode-stage checks, answered with a 400 before validation runs: non-string label and
annotation values, malformed quantities and timestamps in built-in kinds.
"""

from __future__ import annotations

from typing import Any

from koordinator.apis import quantity as qty
from koordinator.apiserver.validation.causes import Obj, as_dict, as_list


def json_type(value: Any) -> str:
    """The JSON type Go's decoding errors name for a value ("number", "array", ...)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "string"


_POD_TEMPLATE_PATHS: dict[str, tuple[tuple[str, ...], str]] = {
    # kind -> (keys down to the PodSpec, JSON path prefix Go prints for struct fields)
    "Pod": (("spec",), "spec"),
    "PodTemplate": (("template", "spec"), "template.spec"),
    "Deployment": (("spec", "template", "spec"), "spec.template.spec"),
    "DaemonSet": (("spec", "template", "spec"), "spec.template.spec"),
    "ReplicaSet": (("spec", "template", "spec"), "spec.template.spec"),
    "StatefulSet": (("spec", "template", "spec"), "spec.template.spec"),
    "ReplicationController": (("spec", "template", "spec"), "spec.template.spec"),
    "Job": (("spec", "template", "spec"), "spec.template.spec"),
    "CronJob": (("spec", "jobTemplate", "spec", "template", "spec"), "spec.jobTemplate.spec.template.spec"),
}


def _check_resource_list(value: Any, go_path: str, owner: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        return (f"json: cannot unmarshal {json_type(value)} into Go struct field {owner}.{go_path} "
                f"of type v1.ResourceList")
    for raw in value.values():
        try:
            qty.parse(raw)
        except qty.QuantityError as err:
            return str(err)
    return None


def _check_pod_spec_quantities(spec: Any, go_path: str) -> str | None:
    spec = as_dict(spec)
    for list_name in ("containers", "initContainers", "ephemeralContainers"):
        for ctr in (as_dict(c) for c in as_list(spec.get(list_name))):
            res = as_dict(ctr.get("resources"))
            for part in ("limits", "requests"):
                detail = _check_resource_list(res.get(part), f"{go_path}.{list_name}.resources.{part}",
                                              "ResourceRequirements")
                if detail:
                    return detail
            for env in (as_dict(e) for e in as_list(ctr.get("env"))):
                divisor = as_dict(as_dict(env.get("valueFrom")).get("resourceFieldRef")).get("divisor")
                if divisor is not None:
                    try:
                        qty.parse(divisor)
                    except qty.QuantityError as err:
                        return str(err)
    for part in ("limits", "requests"):
        detail = _check_resource_list(as_dict(spec.get("resources")).get(part), f"{go_path}.resources.{part}",
                                      "ResourceRequirements")
        if detail:
            return detail
    detail = _check_resource_list(spec.get("overhead"), f"{go_path}.overhead", "PodSpec")
    if detail:
        return detail
    for vol in (as_dict(v) for v in as_list(spec.get("volumes"))):
        size = as_dict(vol.get("emptyDir")).get("sizeLimit")
        if size is not None:
            try:
                qty.parse(size)
            except qty.QuantityError as err:
                return str(err)
    return None


def check_quantities(kind: str, obj: Obj) -> str | None:
    """The decode error for the first malformed quantity in a built-in object, or None.

    Covers pod specs (Pods and every workload template), Node capacity/allocatable and
    ResourceQuota hard limits: e.g. ``quantities must match the regular expression ...``.
    """
    if kind in _POD_TEMPLATE_PATHS:
        keys, go_path = _POD_TEMPLATE_PATHS[kind]
        node: Any = obj
        for k in keys:
            node = as_dict(node).get(k)
        return _check_pod_spec_quantities(node, go_path)
    if kind == "Node":
        status = as_dict(obj.get("status"))
        for part in ("capacity", "allocatable"):
            detail = _check_resource_list(status.get(part), f"status.{part}", "NodeStatus")
            if detail:
                return detail
    if kind == "ResourceQuota":
        return _check_resource_list(as_dict(obj.get("spec")).get("hard"), "spec.hard", "ResourceQuotaSpec")
    return None


def check_metadata_types(kind: str, version: str, obj: Obj, builtin: bool = True) -> str | None:
    """The decode error the real server gives for ill-typed metadata, or None.

    E.g. ``json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of
    type string``. Built-in kinds name the field ``ObjectMeta.metadata.labels``; custom
    resources (``builtin=False``), decoded through unstructured conversion, say
    ``ObjectMeta.labels``. For built-in kinds a malformed quantity is reported first, as Go's
    decoder aborts on it but only records type mismatches (see :func:`check_quantities`).
    ``version`` is accepted for symmetry with ``errors.cannot_handle``.
    """
    # Time and quantity errors abort Go's decoder (metadata comes first in a manifest);
    # plain type mismatches are only recorded, so they lose to both.
    detail = _check_meta_times(obj.get("metadata"))
    if detail:
        return detail
    if builtin:
        detail = check_quantities(kind, obj)
        if detail:
            return detail
    detail = _check_meta_types(obj.get("metadata"), "ObjectMeta.metadata." if builtin else "ObjectMeta.")
    if not detail and builtin:
        detail = _check_string_maps(kind, obj)
    if detail or not builtin or kind not in _POD_TEMPLATE_PATHS or kind == "Pod":
        return detail
    # The pod template's metadata decodes into ObjectMeta too, under its full JSON path.
    keys, go_path = _POD_TEMPLATE_PATHS[kind]
    node: Any = obj
    for k in keys[:-1]:
        node = as_dict(node).get(k)
    return _check_meta_types(as_dict(node).get("metadata"), f"ObjectMeta.{go_path[:-len('spec')]}metadata.")


_RFC3339 = "2006-01-02T15:04:05Z07:00"


def _go_time_quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _two_digits(value: str, fixed: bool) -> tuple[int, str] | None:
    """Go's ``getnum``: one or two leading digits (exactly two when ``fixed``)."""
    if not value[:1].isdigit():
        return None
    if not value[1:2].isdigit():
        return None if fixed else (int(value[0]), value[1:])
    return int(value[:2]), value[2:]


def rfc3339_error(text: str) -> str | None:
    """Go's ``time.Parse(time.RFC3339, text)`` error for a bad ``metav1.Time``, or None.

    Reproduces the element-by-element messages (``cannot parse "X" as "2006"``, ``month
    out of range``...) that the server returns for placeholders such as ``YYYY-MM-DD...``.
    """
    def fail(value_elem: str, layout_elem: str) -> str:
        return (f"parsing time {_go_time_quote(text)} as {_go_time_quote(_RFC3339)}: cannot parse "
                f"{_go_time_quote(value_elem)} as {_go_time_quote(layout_elem)}")

    def out_of_range(what: str) -> str:
        return f"parsing time {_go_time_quote(text)}: {what} out of range"

    value = text
    if len(value) < 4 or not value[:4].isdigit():
        return fail(value, "2006")
    year, value = int(value[:4]), value[4:]
    parts: dict[str, int] = {}
    for sep, elem, fixed, limit in (("-", "01", True, "month"), ("-", "02", True, "day"), ("T", "15", False, "hour"),
                                    (":", "04", True, "minute"), (":", "05", True, "second")):
        if not value.startswith(sep):
            return fail(value, sep)
        value = value[1:]
        got = _two_digits(value, fixed)
        if got is None:
            return fail(value, elem)
        num, rest = got
        if (limit == "month" and not 1 <= num <= 12) or (limit == "hour" and num >= 24) or\
                (limit in ("minute", "second") and num >= 60):
            return out_of_range(limit)
        parts[limit], value = num, rest
        if limit == "second" and len(value) >= 2 and value[0] in ".," and value[1].isdigit():
            n = 2
            while n < len(value) and value[n].isdigit():
                n += 1
            value = value[n:]
    if value.startswith("Z"):
        value = value[1:]
    elif len(value) < 6 or value[3] != ":" or value[0] not in "+-" or not (value[1:3] + value[4:6]).isdigit():
        return fail(value, "Z07:00")
    else:
        value = value[6:]
    if value:
        return f"parsing time {_go_time_quote(text)}: extra text: {_go_time_quote(value)}"
    month_days = [31, 29 if (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)) else 28,
                  31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
    if not 1 <= parts["day"] <= month_days[parts["month"] - 1]:
        return out_of_range("day")
    return None


def _check_meta_times(md: Any) -> str | None:
    if not isinstance(md, dict):
        return None
    for fld in ("creationTimestamp", "deletionTimestamp"):
        val = md.get(fld)
        if val is None:
            continue
        if not isinstance(val, str):
            return f"json: cannot unmarshal {json_type(val)} into Go value of type string"
        detail = rfc3339_error(val)
        if detail:
            return detail
    return None


_META_FIELD_TYPES = {
    # JSON field -> (Go type of the field, Go type of its elements or None)
    "name": ("string", None), "generateName": ("string", None), "namespace": ("string", None),
    "labels": ("map[string]string", "string"), "annotations": ("map[string]string", "string"),
    "finalizers": ("[]string", "string"),
}


#: Built-in kinds whose top-level maps hold only strings (Go ``map[string]string``; binaryData's
#: base64 ``[]byte`` values are JSON strings too). A number there would otherwise be stored as is.
_STRING_MAPS = {"ConfigMap": ("data", "binaryData"), "Secret": ("data", "stringData")}


def _check_string_maps(kind: str, obj: Obj) -> str | None:
    for fld in _STRING_MAPS.get(kind, ()):
        val = obj.get(fld)
        if val is None:
            continue
        go_type = "map[string][]uint8" if fld in ("binaryData",) or (kind, fld) == ("Secret", "data") \
            else "map[string]string"
        if not isinstance(val, dict):
            return f"json: cannot unmarshal {json_type(val)} into Go struct field {kind}.{fld} of type {go_type}"
        for item in val.values():
            if item is not None and not isinstance(item, str):
                elem = "[]uint8" if go_type.endswith("[]uint8") else "string"
                return f"json: cannot unmarshal {json_type(item)} into Go struct field {kind}.{fld} of type {elem}"
    return None


def _check_meta_types(md: Any, prefix: str) -> str | None:
    """First type mismatch in ObjectMeta, in document order as Go's decoder meets them."""
    if not isinstance(md, dict):
        return None
    for fld, val in md.items():
        if fld in ("generation", "deletionGracePeriodSeconds") and val is not None and (
                isinstance(val, bool) or not isinstance(val, int)):
            return f"json: cannot unmarshal {json_type(val)} into Go struct field {prefix}{fld} of type int64"
        if fld == "ownerReferences" and val is not None:
            if not isinstance(val, list):
                return (f"json: cannot unmarshal {json_type(val)} into Go struct field {prefix}{fld} "
                        "of type []v1.OwnerReference")
            for ref in val:
                if not isinstance(ref, dict):
                    return (f"json: cannot unmarshal {json_type(ref)} into Go struct field {prefix}{fld} "
                            "of type v1.OwnerReference")
        if fld not in _META_FIELD_TYPES or val is None:
            continue
        go_type, elem_type = _META_FIELD_TYPES[fld]
        if elem_type is None:
            if not isinstance(val, str):
                return f"json: cannot unmarshal {json_type(val)} into Go struct field {prefix}{fld} of type {go_type}"
            continue
        container = dict if go_type.startswith("map") else list
        if not isinstance(val, container):
            return f"json: cannot unmarshal {json_type(val)} into Go struct field {prefix}{fld} of type {go_type}"
        for item in (val.values() if container is dict else val):
            if item is not None and not isinstance(item, str):
                return (f"json: cannot unmarshal {json_type(item)} into Go struct field {prefix}{fld} "
                        f"of type {elem_type}")
    return None
