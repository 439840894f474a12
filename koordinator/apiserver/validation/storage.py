"""storage.k8s.io/v1: StorageClass, CSIDriver, CSINode, CSIStorageCapacity, VolumeAttachment,
VolumeAttributesClass.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.errors import duplicate, forbidden_field, not_supported, required, too_long
from koordinator.apiserver.validation.causes import (
    IMMUTABLE,
    NEGATIVE,
    Causes,
    Obj,
    as_dict,
    as_int,
    as_list,
    as_str,
    fmt_value,
    invalid,
    invalid_rendered,
    label_selector_string,
)
from koordinator.apiserver.validation.core_resources import quantity, semantic
from koordinator.apiserver.validation.formats import is_dns1123_subdomain, is_qualified_name, name_is_dns_subdomain
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import validate_label_selector


# -- storage.k8s.io/v1 ------------------------------------------------------------------------

_SC_RECLAIM_POLICIES = ["Delete", "Retain"]
_BINDING_MODES = ["Immediate", "WaitForFirstConsumer"]
_MAX_PARAMETERS_SIZE = 256 * 1024


def _validate_parameters(params: Any, path: str) -> Causes:
    causes: Causes = []
    total = 0
    for key, value in as_dict(params).items():
        if not key:
            causes.append(invalid(path, key, "field can not be empty."))
        total += len(key) + len(as_str(value))
    if total > _MAX_PARAMETERS_SIZE:
        causes.append(too_long(path, _MAX_PARAMETERS_SIZE))
    return causes


def _validate_provisioner(value: Any, path: str) -> Causes:
    text = as_str(value)
    if not text:
        return [required(path, "")]
    return [invalid(path, text.lower(), m) for m in is_qualified_name(text.lower())]


def validate_storage_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(_validate_provisioner(obj.get("provisioner"), "provisioner"))
    causes.extend(_validate_parameters(obj.get("parameters"), "parameters"))
    policy = obj.get("reclaimPolicy")
    if as_str(policy) and policy not in _SC_RECLAIM_POLICIES:
        causes.append(not_supported("reclaimPolicy", policy, _SC_RECLAIM_POLICIES))
    mode = obj.get("volumeBindingMode")
    if mode is None:
        causes.append(required("volumeBindingMode", ""))
    elif mode not in _BINDING_MODES:
        causes.append(not_supported("volumeBindingMode", mode, _BINDING_MODES))
    for i, term in enumerate(as_dict(t) for t in as_list(obj.get("allowedTopologies"))):
        exprs = as_list(term.get("matchLabelExpressions"))
        if not exprs:
            causes.append(required(f"allowedTopologies[{i}].matchLabelExpressions", "must have at least one "
                                                                                   "label expression"))
        for j, expr in enumerate(as_dict(e) for e in exprs):
            epath = f"allowedTopologies[{i}].matchLabelExpressions[{j}]"
            key = as_str(expr.get("key"))
            causes.extend(invalid(f"{epath}.key", key, m) for m in is_qualified_name(key))
            if not as_list(expr.get("values")):
                causes.append(required(f"{epath}.values", "must specify as least one value"))
    if old is not None:
        if semantic(as_dict(obj.get("parameters"))) != semantic(as_dict(old.get("parameters"))):
            causes.append(forbidden_field("parameters", "updates to parameters are forbidden."))
        if obj.get("provisioner") != old.get("provisioner"):
            causes.append(forbidden_field("provisioner", "updates to provisioner are forbidden."))
        if obj.get("reclaimPolicy") != old.get("reclaimPolicy"):
            causes.append(forbidden_field("reclaimPolicy", "updates to reclaimPolicy are forbidden."))
        if obj.get("volumeBindingMode") != old.get("volumeBindingMode"):
            causes.append(invalid("volumeBindingMode", mode, IMMUTABLE))
    return causes


def csi_driver_name(value: Any, path: str) -> Causes:
    """``validateCSIDriverName``: required, at most 63 characters, a DNS-1123 subdomain."""
    name = as_str(value)
    if not name:
        return [required(path, name)]
    causes: Causes = []
    if len(name) > 63:
        causes.append(too_long(path, 63))
    lowered = name.lower()
    causes.extend(invalid(path, name, m) for m in is_dns1123_subdomain(lowered))
    return causes


_FS_GROUP_POLICIES = ["File", "None", "ReadWriteOnceWithFSType"]
_LIFECYCLE_MODES = ["Ephemeral", "Persistent"]


def validate_csi_driver(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(csi_driver_name(as_dict(obj.get("metadata")).get("name"), "metadata.name"))
    spec = as_dict(obj.get("spec"))
    for flag in ("attachRequired", "podInfoOnMount", "requiresRepublish", "storageCapacity", "seLinuxMount"):
        if spec.get(flag) is None:
            causes.append(required(f"spec.{flag}", ""))
    policy = spec.get("fsGroupPolicy")
    if policy is not None and policy not in _FS_GROUP_POLICIES:
        causes.append(not_supported("spec.fsGroupPolicy", policy, _FS_GROUP_POLICIES))
    for i, mode in enumerate(as_list(spec.get("volumeLifecycleModes"))):
        if mode not in _LIFECYCLE_MODES:
            causes.append(not_supported(f"spec.volumeLifecycleModes[{i}]", mode, _LIFECYCLE_MODES))
    audiences: set[str] = set()
    for i, token in enumerate(as_dict(t) for t in as_list(spec.get("tokenRequests"))):
        audience = as_str(token.get("audience"))
        if audience in audiences:
            causes.append(duplicate(f"spec.tokenRequests[{i}].audience", audience))
        audiences.add(audience)
        seconds = as_int(token.get("expirationSeconds"))
        if seconds is not None and seconds < 600:
            causes.append(invalid(f"spec.tokenRequests[{i}].expirationSeconds", seconds,
                                  "may not specify a duration less than 10 minutes"))
    if old is not None and spec.get("attachRequired") != as_dict(old.get("spec")).get("attachRequired"):
        causes.append(invalid("spec.attachRequired", spec.get("attachRequired"), IMMUTABLE))
    return causes


def validate_csi_node(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    names: set[str] = set()
    for i, drv in enumerate(as_dict(d) for d in as_list(as_dict(obj.get("spec")).get("drivers"))):
        path = f"spec.drivers[{i}]"
        causes.extend(csi_driver_name(drv.get("name"), f"{path}.name"))
        if as_str(drv.get("name")) in names:
            causes.append(duplicate(f"{path}.name", drv.get("name")))
        names.add(as_str(drv.get("name")))
        node_id = as_str(drv.get("nodeID"))
        if not node_id:
            causes.append(required(f"{path}.nodeID", node_id))
        elif len(node_id) > 192:
            causes.append(too_long(f"{path}.nodeID", 192))
        count = as_int(as_dict(drv.get("allocatable")).get("count"))
        if count is not None and count < 0:
            causes.append(invalid(f"{path}.allocatable.count", count, NEGATIVE))
        for j, key in enumerate(as_list(drv.get("topologyKeys"))):
            causes.extend(invalid(f"{path}.topologyKeys[{j}]", as_str(key), m) for m in is_qualified_name(as_str(key)))
    return causes


def validate_csi_storage_capacity(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(validate_label_selector(obj.get("nodeTopology"), "nodeTopology"))
    name = as_str(obj.get("storageClassName"))
    if not name:
        causes.append(required("storageClassName", ""))
    else:
        causes.extend(invalid("storageClassName", name, m) for m in name_is_dns_subdomain(name, False))
    for part in ("capacity", "maximumVolumeSize"):
        q = quantity(obj.get(part))
        if q is not None and q.value < 0:
            causes.append(invalid(part, q.string, NEGATIVE))
    if old is not None:
        for part in ("storageClassName", "nodeTopology"):
            if semantic(obj.get(part)) != semantic(old.get(part)):
                causes.append(invalid_rendered(part, fmt_value(obj.get(part)) if part == "storageClassName"
                                               else label_selector_string(obj.get(part)), IMMUTABLE))
    return causes


def validate_volume_attachment(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateVolumeAttachment``: attacher, nodeName and exactly one source."""
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    if not as_str(spec.get("attacher")):
        causes.append(required("spec.attacher", ""))
    else:
        causes.extend(csi_driver_name(spec.get("attacher"), "spec.attacher"))
    source = as_dict(spec.get("source"))
    count = 0
    if source.get("persistentVolumeName") is not None:
        count += 1
        if not as_str(source.get("persistentVolumeName")):
            causes.append(required("spec.source.persistentVolumeName", "must specify non empty persistentVolumeName"))
    if source.get("inlineVolumeSpec") is not None:
        count += 1
        inline = as_dict(source.get("inlineVolumeSpec"))
        if inline.get("csi") is None:
            causes.append(required("spec.source.inlineVolumeSpec.csi",
                                   "has to be specified in the context of inline volumes"))
    if count == 0:
        causes.append(required("spec.source", "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
    elif count > 1:
        causes.append(forbidden_field("spec.source",
                                      "must specify exactly one of inlineVolumeSpec and persistentVolumeName"))
    node = as_str(spec.get("nodeName"))
    if not node:
        causes.append(required("spec.nodeName", ""))
    else:
        causes.extend(invalid("spec.nodeName", node, m) for m in name_is_dns_subdomain(node, False))
    if old is not None and semantic(spec) != semantic(as_dict(old.get("spec"))):
        causes.append(forbidden_field("spec", "spec is immutable after creation"))
    return causes


def validate_volume_attributes_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(_validate_provisioner(obj.get("driverName"), "driverName"))
    causes.extend(_validate_parameters(obj.get("parameters"), "parameters"))
    if old is not None:
        if semantic(as_dict(obj.get("parameters"))) != semantic(as_dict(old.get("parameters"))):
            causes.append(forbidden_field("parameters", "updates to parameters are forbidden."))
        if obj.get("driverName") != old.get("driverName"):
            causes.append(forbidden_field("driverName", "updates to driverName are forbidden."))
    return causes
