"""resource.k8s.io/v1 (dynamic resource allocation): DeviceClass, ResourceSlice, ResourceClaim,
ResourceClaimTemplate.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.errors import cause, duplicate, not_supported, required
from koordinator.apiserver.validation.causes import (
    GREATER_THAN_ZERO,
    IMMUTABLE,
    Causes,
    Obj,
    as_dict,
    as_int,
    as_list,
    as_str,
    invalid,
    invalid_rendered,
    nonnegative,
)
from koordinator.apiserver.validation.core_resources import is_extended_resource, semantic
from koordinator.apiserver.validation.formats import is_dns1123_label, name_is_dns_subdomain
from koordinator.apiserver.validation.meta import validate_annotations, validate_labels, validate_object_meta
from koordinator.apiserver.validation.storage import csi_driver_name


# -- resource.k8s.io/v1 -----------------------------------------------------------------------

_ALLOCATION_MODES = ["All", "ExactCount"]
_MAX_REQUESTS = 32


def _dns_label_name(value: Any, path: str) -> Causes:
    text = as_str(value)
    if not text:
        return [required(path, "")]
    return [invalid(path, text, m) for m in is_dns1123_label(text)]


def _validate_cel_selectors(selectors: Any, path: str) -> Causes:
    causes: Causes = []
    for i, sel in enumerate(as_dict(s) for s in as_list(selectors)):
        cel = sel.get("cel")
        if cel is None:
            causes.append(required(f"{path}[{i}].cel", ""))
        elif not as_str(as_dict(cel).get("expression")):
            causes.append(required(f"{path}[{i}].cel.expression", ""))
    return causes


def _validate_exact_request(req: Obj, path: str) -> Causes:
    causes: Causes = []
    class_name = as_str(req.get("deviceClassName"))
    if not class_name:
        causes.append(required(f"{path}.deviceClassName", ""))
    else:
        causes.extend(invalid(f"{path}.deviceClassName", class_name, m)
                      for m in name_is_dns_subdomain(class_name, False))
    causes.extend(_validate_cel_selectors(req.get("selectors"), f"{path}.selectors"))
    mode = as_str(req.get("allocationMode"))
    if mode == "ExactCount":
        count = as_int(req.get("count"))
        if count is not None and count <= 0:
            causes.append(invalid(f"{path}.count", count, GREATER_THAN_ZERO))
    elif mode == "All":
        if req.get("count") not in (None, 0):
            causes.append(invalid(f"{path}.count", req.get("count"),
                                  "must not be specified when allocationMode is 'All'"))
    else:
        causes.append(not_supported(f"{path}.allocationMode", mode, _ALLOCATION_MODES))
    return causes


def validate_device_claim(spec: Obj, path: str) -> Causes:
    """``validateDeviceClaim``: named requests, each with exactly one of ``exactly``/``firstAvailable``."""
    devices = as_dict(spec.get("devices"))
    requests = as_list(devices.get("requests"))
    causes: Causes = []
    if len(requests) > _MAX_REQUESTS:
        causes.append(cause("FieldValueTooMany", f"{path}.devices.requests",
                            f"Too many: {len(requests)}: must have at most {_MAX_REQUESTS} items"))
    names: set[str] = set()
    for i, req in enumerate(as_dict(r) for r in requests):
        rpath = f"{path}.devices.requests[{i}]"
        name = as_str(req.get("name"))
        causes.extend(_dns_label_name(name, f"{rpath}.name"))
        if name and name in names:
            causes.append(duplicate(f"{rpath}.name", name))
        names.add(name)
        exactly, first = req.get("exactly"), req.get("firstAvailable")
        if (exactly is None) == (first is None):
            detail = "exactly one of `exactly` or `firstAvailable` is required"
            causes.append(required(rpath, detail) if exactly is None else invalid_rendered(rpath, "{...}", detail))
        if exactly is not None:
            causes.extend(_validate_exact_request(as_dict(exactly), f"{rpath}.exactly"))
        for j, sub in enumerate(as_dict(s) for s in as_list(first)):
            spath = f"{rpath}.firstAvailable[{j}]"
            causes.extend(_dns_label_name(sub.get("name"), f"{spath}.name"))
            causes.extend(_validate_exact_request(sub, spath))
    for i, constraint in enumerate(as_dict(c) for c in as_list(devices.get("constraints"))):
        for j, ref in enumerate(as_list(constraint.get("requests"))):
            if as_str(ref).split("/")[0] not in names:
                causes.append(invalid(f"{path}.devices.constraints[{i}].requests[{j}]", ref,
                                      "must be the name of a request in the claim or the name of a request and "
                                      "a subrequest separated by '/'"))
    return causes


def validate_device_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(_validate_cel_selectors(spec.get("selectors"), "spec.selectors"))
    ext = spec.get("extendedResourceName")
    if ext is not None and not is_extended_resource(as_str(ext)):
        causes.append(invalid("spec.extendedResourceName", ext, "must be a valid extended resource name"))
    return causes


def validate_resource_slice(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateResourceSlice``: driver, pool, and exactly one node selection field."""
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    driver = as_str(spec.get("driver"))
    if not driver:
        causes.append(required("spec.driver", ""))
    else:
        causes.extend(csi_driver_name(driver, "spec.driver"))
    pool = as_dict(spec.get("pool"))
    if not as_str(pool.get("name")):
        causes.append(required("spec.pool.name", ""))
    causes.extend(nonnegative(pool.get("generation"), "spec.pool.generation"))
    count = as_int(pool.get("resourceSliceCount"))
    if count is None or count <= 0:
        causes.append(invalid("spec.pool.resourceSliceCount", count if count is not None else 0, GREATER_THAN_ZERO))
    choices = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")
               if spec.get(k) not in (None, False, "")]
    detail = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not choices:
        causes.append(required("spec", detail))
    elif len(choices) > 1:
        causes.append(invalid_rendered("spec", "{" + ", ".join(f'"{c}"' for c in choices) + "}", detail))
    if as_str(spec.get("nodeName")):
        causes.extend(invalid("spec.nodeName", spec["nodeName"], m)
                      for m in name_is_dns_subdomain(spec["nodeName"], False))
    names: set[str] = set()
    for i, dev in enumerate(as_dict(d) for d in as_list(spec.get("devices"))):
        name = as_str(dev.get("name"))
        causes.extend(_dns_label_name(name, f"spec.devices[{i}].name"))
        if name and name in names:
            causes.append(duplicate(f"spec.devices[{i}].name", name))
        names.add(name)
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        for part in ("nodeName", "driver"):
            if spec.get(part) != old_spec.get(part):
                causes.append(invalid(f"spec.{part}", spec.get(part), IMMUTABLE))
    return causes


def validate_resource_claim(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(validate_device_claim(spec, "spec"))
    if old is not None and semantic(spec) != semantic(as_dict(old.get("spec"))):
        causes.append(invalid_rendered("spec", "core.ResourceClaimSpec{...}", IMMUTABLE))
    reserved = as_list(as_dict(obj.get("status")).get("reservedFor"))
    if len(reserved) > 256:
        causes.append(cause("FieldValueTooMany", "status.reservedFor",
                            f"Too many: {len(reserved)}: must have at most 256 items"))
    return causes


def validate_resource_claim_template(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    tmpl = as_dict(obj.get("spec"))
    md = as_dict(tmpl.get("metadata"))
    causes.extend(validate_labels(md.get("labels"), "spec.metadata.labels"))
    causes.extend(validate_annotations(md.get("annotations"), "spec.metadata.annotations"))
    causes.extend(validate_device_claim(as_dict(tmpl.get("spec")), "spec.spec"))
    if old is not None and semantic(tmpl) != semantic(as_dict(old.get("spec"))):
        causes.append(invalid_rendered("spec", "resource.ResourceClaimTemplateSpec{...}", IMMUTABLE))
    return causes
