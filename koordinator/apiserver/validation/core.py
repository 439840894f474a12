"""core/v1 kinds other than Pod: Node, Namespace, ConfigMap, Secret, Service, ServiceAccount,
Event, PersistentVolume(Claim), ReplicationController, PodTemplate, ResourceQuota, LimitRange.
"""

from __future__ import annotations

from typing import Any, Iterable

from koordinator.apiserver.errors import cause, duplicate, forbidden_field, not_supported, required, too_long
from koordinator.apiserver.validation.causes import (
    GREATER_THAN_ZERO,
    IMMUTABLE,
    Causes,
    Obj,
    as_dict,
    as_int,
    as_list,
    as_str,
    fmt_value,
    go_quote,
    go_string_map,
    invalid,
    invalid_rendered,
    nonnegative,
    one_of,
)
from koordinator.apiserver.validation.core_resources import (
    quantity,
    semantic,
    validate_quantity_value,
    validate_resource_name,
)
from koordinator.apiserver.validation.formats import (
    is_config_map_key,
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    is_valid_port_num,
    name_is_dns1035_label,
    name_is_dns_label,
    name_is_dns_subdomain,
)
from koordinator.apiserver.validation.meta import STANDARD_FINALIZERS, validate_labels, validate_object_meta
from koordinator.apiserver.validation.podspec import (
    PORT_PROTOCOLS,
    TAINT_EFFECTS,
    restart_always,
    validate_label_selector,
    validate_node_selector_term,
    validate_pod_template,
    validate_port_num_or_name,
)


def validate_node(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(as_dict(t) for t in as_list(as_dict(obj.get("spec")).get("taints"))):
        # Upstream builds this path from "metadata", so taint errors read metadata.taints[i].
        idx = f"metadata.taints[{i}]"
        key, val, effect = as_str(taint.get("key")), as_str(taint.get("value")), as_str(taint.get("effect"))
        causes.extend(invalid(f"{idx}.key", key, m) for m in is_qualified_name(key))
        msgs = is_label_value(val)
        if msgs:
            causes.append(invalid(f"{idx}.value", val, ";".join(msgs)))
        causes.extend(one_of(effect, f"{idx}.effect", TAINT_EFFECTS))
        if (effect, key) in seen:
            rendered = (f"core.Taint{{Key:{go_quote(key)}, Value:{go_quote(val)}, Effect:{go_quote(effect)}, "
                        f"TimeAdded:<nil>}}")
            causes.append(cause("FieldValueDuplicate", idx,
                                f"Duplicate value: {rendered}: taints must be unique by key and effect pair"))
            continue
        seen.add((effect, key))
    status = as_dict(obj.get("status"))
    for part in ("capacity", "allocatable"):
        for name, raw in as_dict(status.get(part)).items():
            q = quantity(raw)
            if q is not None:
                causes.extend(validate_quantity_value(name, q, f"status.{part}.{name}"))
    return causes


def validate_namespace(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj, name_is_dns_label)
    for f in as_list(as_dict(obj.get("spec")).get("finalizers")):
        f = as_str(f)
        causes.extend(invalid("spec.finalizers", f, m) for m in is_qualified_name(f))
        if "/" not in f and f not in STANDARD_FINALIZERS:
            causes.append(invalid("spec.finalizers", f,
                                  "name is neither a standard finalizer name nor is it fully qualified"))
    return causes


_MAX_CONFIG_SIZE = 1024 * 1024


def _b64_len(value: str) -> int:
    return len(value) * 3 // 4 - value[-2:].count("=")


def _immutable_data(obj: Obj, old: Obj | None, fields: Iterable[str]) -> Causes:
    if old is None or as_dict(old).get("immutable") is not True:
        return []
    causes: Causes = []
    if obj.get("immutable") is not True:
        causes.append(forbidden_field("immutable", "field is immutable when `immutable` is set"))
    for fld in fields:
        if (obj.get(fld) or {}) != (as_dict(old).get(fld) or {}):
            causes.append(forbidden_field(fld, "field is immutable when `immutable` is set"))
    return causes


def validate_configmap(obj: Obj, old: Obj | None) -> Causes:
    causes = _immutable_data(obj, old, ("data", "binaryData"))
    causes.extend(validate_object_meta(obj))
    data, binary = as_dict(obj.get("data")), as_dict(obj.get("binaryData"))
    total = 0
    for key, val in data.items():
        causes.extend(invalid(f"data[{key}]", key, m) for m in is_config_map_key(key))
        if key in binary:
            causes.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += len(as_str(val).encode())
    for key, val in binary.items():
        causes.extend(invalid(f"binaryData[{key}]", key, m) for m in is_config_map_key(key))
        total += _b64_len(as_str(val))
    if total > _MAX_CONFIG_SIZE:
        # A root path prints as "[]" in Go's field errors.
        causes.append(too_long("[]", _MAX_CONFIG_SIZE))
    return causes


def validate_secret(obj: Obj, old: Obj | None) -> Causes:
    causes: Causes = []
    if old is not None:
        if as_str(obj.get("type")) != as_str(as_dict(old).get("type")):
            causes.append(invalid("type", as_str(obj.get("type")), IMMUTABLE))
        causes.extend(_immutable_data(obj, old, ("data",)))
    causes.extend(validate_object_meta(obj))
    data = as_dict(obj.get("data"))
    total = 0
    for key, val in data.items():
        causes.extend(invalid(f"data[{key}]", key, m) for m in is_config_map_key(key))
        total += _b64_len(as_str(val))
    for key, val in as_dict(obj.get("stringData")).items():
        if key not in data:
            causes.extend(invalid(f"data[{key}]", key, m) for m in is_config_map_key(key))
            total += len(as_str(val).encode())
    if total > _MAX_CONFIG_SIZE:
        causes.append(too_long("data", _MAX_CONFIG_SIZE))
    keys = set(data) | set(as_dict(obj.get("stringData")))
    stype = as_str(obj.get("type"))
    annotations = as_dict(as_dict(obj.get("metadata")).get("annotations"))
    sa_name = as_str(annotations.get("kubernetes.io/service-account.name"))
    if stype == "kubernetes.io/service-account-token" and not sa_name:
        causes.append(required("metadata.annotations[kubernetes.io/service-account.name]", ""))
    elif stype == "kubernetes.io/dockercfg" and ".dockercfg" not in keys:
        causes.append(required("data[.dockercfg]", ""))
    elif stype == "kubernetes.io/dockerconfigjson" and ".dockerconfigjson" not in keys:
        causes.append(required("data[.dockerconfigjson]", ""))
    elif stype == "kubernetes.io/basic-auth" and "username" not in keys and "password" not in keys:
        causes.extend([required("data[username]", ""), required("data[password]", "")])
    elif stype == "kubernetes.io/ssh-auth" and "ssh-privatekey" not in keys:
        causes.append(required("data[ssh-privatekey]", ""))
    elif stype == "kubernetes.io/tls":
        causes.extend(required(f"data[{k}]", "") for k in ("tls.crt", "tls.key") if k not in keys)
    return causes


_SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]


def validate_service(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj, name_is_dns1035_label)
    spec = as_dict(obj.get("spec"))
    stype = as_str(spec.get("type"))
    ports = [as_dict(p) for p in as_list(spec.get("ports"))]
    headless = as_str(spec.get("clusterIP")) == "None" or (as_list(spec.get("clusterIPs"))[:1] == ["None"])
    if not ports and not headless and stype != "ExternalName":
        causes.append(required("spec.ports", ""))
    if stype == "ExternalName":
        cname = as_str(spec.get("externalName"))
        cname = cname[:-1] if cname.endswith(".") else cname
        if cname:
            causes.extend(invalid("spec.externalName", cname, m) for m in is_dns1123_subdomain(cname))
        else:
            causes.append(required("spec.externalName", ""))
    names: set[str] = set()
    for i, port in enumerate(ports):
        idx = f"spec.ports[{i}]"
        name = as_str(port.get("name"))
        if len(ports) > 1 and not name:
            causes.append(required(f"{idx}.name", ""))
        elif name:
            causes.extend(invalid(f"{idx}.name", name, m) for m in is_dns1123_label(name))
            if name in names:
                causes.append(duplicate(f"{idx}.name", name))
            names.add(name)
        num = as_int(port.get("port")) or 0
        causes.extend(invalid(f"{idx}.port", num, m) for m in is_valid_port_num(num))
        causes.extend(one_of(port.get("protocol"), f"{idx}.protocol", PORT_PROTOCOLS))
        causes.extend(validate_port_num_or_name(port.get("targetPort"), f"{idx}.targetPort"))
    if spec.get("selector") is not None:
        causes.extend(validate_labels(spec.get("selector"), "spec.selector"))
    causes.extend(one_of(spec.get("sessionAffinity"), "spec.sessionAffinity", ["ClientIP", "None"]))
    if spec.get("sessionAffinity") == "None" and spec.get("sessionAffinityConfig") is not None:
        causes.append(forbidden_field("spec.sessionAffinityConfig", "must not be set when session affinity is None"))
    causes.extend(one_of(stype, "spec.type", _SERVICE_TYPES))
    if stype == "ClusterIP":
        for i, port in enumerate(ports):
            if as_int(port.get("nodePort")):
                causes.append(forbidden_field(f"spec.ports[{i}].nodePort",
                                              "may not be used when `type` is 'ClusterIP'"))
    seen: set[tuple[str, int]] = set()
    for i, port in enumerate(ports):
        key = (as_str(port.get("protocol")), as_int(port.get("port")) or 0)
        if key in seen:
            rendered = f"core.ServicePort{{Name:\"\", Protocol:{go_quote(key[0])}, AppProtocol:(*string)(nil), "\
                       f"Port:{key[1]}, TargetPort:intstr.IntOrString{{Type:0, IntVal:0, StrVal:\"\"}}, NodePort:0}}"
            causes.append(cause("FieldValueDuplicate", f"spec.ports[{i}]", f"Duplicate value: {rendered}"))
        seen.add(key)
    return causes


def validate_service_account(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj)


_EVENT_LENGTH_LIMITS = (("reportingInstance", 128), ("action", 128), ("reason", 128), ("message", 1024))


def validate_event(obj: Obj, old: Obj | None) -> Causes:
    """``legacyValidateEvent`` for core/v1 Events (eventTime makes it a "new" event)."""
    causes = validate_object_meta(obj)
    namespace = as_str(as_dict(obj.get("metadata")).get("namespace"))
    involved_ns = as_str(as_dict(obj.get("involvedObject")).get("namespace"))
    mismatch = invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
    if not obj.get("eventTime"):
        if (not involved_ns and namespace not in ("", "default")) or (involved_ns and namespace != involved_ns):
            causes.append(mismatch)
        return causes
    if not involved_ns and namespace not in ("default", "kube-system"):
        causes.append(mismatch)
    component = as_str(obj.get("reportingComponent"))
    if not component:
        causes.append(required("reportingComponent", ""))
    causes.extend(invalid("reportingComponent", component, m) for m in is_qualified_name(component))
    for fld, limit in _EVENT_LENGTH_LIMITS:
        value = as_str(obj.get(fld))
        if fld != "message" and not value:
            causes.append(required(fld, ""))
        if len(value) > limit:
            causes.append(invalid(fld, "", f"can have at most {limit} characters"))
    return causes


# ---------------------------------------------------------------------------------------
# Storage and the kinds kube-scheduler / kube-controller-manager inform on
# (pkg/apis/core/validation, pkg/apis/storage/validation, pkg/apis/resource/validation,
# pkg/apis/networking/validation, pkg/apis/discovery/validation, pkg/apis/autoscaling/validation,
# pkg/apis/certificates/validation, pkg/apis/node/validation, pkg/apis/admissionregistration/validation)
# ---------------------------------------------------------------------------------------

_ACCESS_MODES = ["ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod"]
_RECLAIM_POLICIES = ["Delete", "Recycle", "Retain"]
_VOLUME_MODES = ["Block", "Filesystem"]
_PV_SOURCES = (
    "hostPath", "gcePersistentDisk", "awsElasticBlockStore", "glusterfs", "flocker", "nfs", "rbd", "quobyte",
    "cephfs", "iscsi", "cinder", "fc", "flexVolume", "azureFile", "vsphereVolume", "photonPersistentDisk",
    "portworxVolume", "azureDisk", "scaleIO", "local", "storageos", "csi",
)


def _go_resource_list(value: Any) -> str:
    """``%#v`` of a ``core.ResourceList`` as field errors print it (quantities by their text)."""
    if not value:
        return "core.ResourceList(nil)" if value is None else "core.ResourceList{}"
    items = ", ".join(f'"{k}":"{as_str(v) if isinstance(v, str) else v}"' for k, v in sorted(as_dict(value).items()))
    return "core.ResourceList{" + items + "}"


def _class_name(value: Any, path: str) -> Causes:
    text = as_str(value)
    return [invalid(path, text, m) for m in name_is_dns_subdomain(text, False)] if text else []


def _access_modes(modes: Any, path: str) -> Causes:
    causes: Causes = []
    rwop = other = False
    for mode in as_list(modes):
        if mode not in _ACCESS_MODES:
            causes.append(not_supported(path, mode, _ACCESS_MODES))
        elif mode == "ReadWriteOncePod":
            rwop = True
        else:
            other = True
    if rwop and other:
        causes.append(forbidden_field(path, "may not use ReadWriteOncePod with other access modes"))
    return causes


def _positive_quantity(raw: Any, path: str) -> Causes:
    q = quantity(raw)
    if q is None:
        return []
    return [invalid(path, q.string, GREATER_THAN_ZERO)] if q.value <= 0 else []


def _validate_pv_spec(spec: Obj, path: str = "spec") -> Causes:
    """``ValidatePersistentVolumeSpec`` (not inline): access modes, capacity, one volume source."""
    causes: Causes = []
    if not as_list(spec.get("accessModes")):
        causes.append(required(f"{path}.accessModes", ""))
    causes.extend(_access_modes(spec.get("accessModes"), f"{path}.accessModes"))
    capacity = spec.get("capacity")
    if not as_dict(capacity):
        causes.append(required(f"{path}.capacity", ""))
    if "storage" not in as_dict(capacity) or len(as_dict(capacity)) > 1:
        causes.append(cause("FieldValueNotSupported", f"{path}.capacity",
                            f'Unsupported value: {_go_resource_list(capacity)}: supported values: "storage"'))
    for name, raw in sorted(as_dict(capacity).items()):
        causes.extend(validate_resource_name(name, f"{path}.capacity[{name}]"))
        causes.extend(_positive_quantity(raw, f"{path}.capacity[{name}]"))
    policy = as_str(spec.get("persistentVolumeReclaimPolicy"))
    if policy and policy not in _RECLAIM_POLICIES:
        causes.append(not_supported(f"{path}.persistentVolumeReclaimPolicy", policy, _RECLAIM_POLICIES))
    affinity = spec.get("nodeAffinity")
    if affinity is not None:
        required_terms = as_dict(affinity).get("required")
        if required_terms is not None:
            terms = as_list(as_dict(required_terms).get("nodeSelectorTerms"))
            if not terms:
                causes.append(required(f"{path}.nodeAffinity.required.nodeSelectorTerms",
                                       "must have at least one node selector term"))
            for i, term in enumerate(terms):
                causes.extend(validate_node_selector_term(as_dict(term), f"{path}.nodeAffinity.required."
                                                                     f"nodeSelectorTerms[{i}]", True))
    found = [k for k in _PV_SOURCES if spec.get(k) is not None]
    for extra in found[1:]:
        if extra != "flexVolume":
            causes.append(forbidden_field(f"{path}.{extra}", "may not specify more than 1 volume type"))
    if not found:
        causes.append(required(path, "must specify a volume type"))
    if "local" in found and not as_dict(affinity).get("required"):
        causes.append(required(f"{path}.nodeAffinity", "Local volume requires node affinity"))
    if isinstance(spec.get("hostPath"), dict) and not as_str(spec["hostPath"].get("path")):
        causes.append(required(f"{path}.hostPath.path", ""))
    if isinstance(spec.get("nfs"), dict):
        if not as_str(spec["nfs"].get("server")):
            causes.append(required(f"{path}.nfs.server", ""))
        if not as_str(spec["nfs"].get("path")):
            causes.append(required(f"{path}.nfs.path", ""))
    if isinstance(spec.get("csi"), dict):
        if not as_str(spec["csi"].get("driver")):
            causes.append(required(f"{path}.csi.driver", ""))
        if not as_str(spec["csi"].get("volumeHandle")):
            causes.append(required(f"{path}.csi.volumeHandle", ""))
    if isinstance(spec.get("local"), dict) and not as_str(spec["local"].get("path")):
        causes.append(required(f"{path}.local.path", ""))
    causes.extend(_class_name(spec.get("storageClassName"), f"{path}.storageClassName"))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        causes.append(not_supported(f"{path}.volumeMode", mode, _VOLUME_MODES))
    vac = spec.get("volumeAttributesClassName")
    if vac is not None:
        if not as_str(vac):
            causes.append(required(f"{path}.volumeAttributesClassName", "an empty string is disallowed"))
        causes.extend(_class_name(vac, f"{path}.volumeAttributesClassName"))
        if spec.get("csi") is None:
            causes.append(required(f"{path}.csi", "has to be specified when using volumeAttributesClassName"))
    return causes


def _pv_source(spec: Obj) -> Obj:
    return {k: spec.get(k) for k in _PV_SOURCES if spec.get(k) is not None}


def validate_persistent_volume(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(_validate_pv_spec(spec))
    if old is not None:
        old_spec = as_dict(old.get("spec"))
        if semantic(_pv_source(spec)) != semantic(_pv_source(old_spec)):
            causes.append(forbidden_field("spec.persistentvolumesource",
                                          "spec.persistentvolumesource is immutable after creation"))
        if spec.get("volumeMode") != old_spec.get("volumeMode"):
            causes.append(invalid("volumeMode", spec.get("volumeMode"), IMMUTABLE))
        if old_spec.get("volumeAttributesClassName") is not None and spec.get("volumeAttributesClassName") is None:
            causes.append(forbidden_field("spec.volumeAttributesClassName",
                                          "update from non-nil value to nil is forbidden"))
    return causes


def _validate_data_source(ref: Any, path: str, namespaced: bool) -> Causes:
    ref = as_dict(ref)
    causes: Causes = []
    if not as_str(ref.get("name")):
        causes.append(required(f"{path}.name", ""))
    if not as_str(ref.get("kind")):
        causes.append(required(f"{path}.kind", ""))
    group = as_str(ref.get("apiGroup"))
    if not group and ref.get("kind") != "PersistentVolumeClaim":
        causes.append(invalid(path, as_str(ref.get("kind")),
                              "must be 'PersistentVolumeClaim' when referencing the default apiGroup"))
    if group:
        causes.extend(invalid(f"{path}.apiGroup", group, m) for m in is_dns1123_subdomain(group))
    if namespaced and as_str(ref.get("namespace")):
        causes.extend(invalid(f"{path}.namespace", ref["namespace"], m)
                      for m in name_is_dns_label(ref["namespace"], False))
    return causes


def validate_pvc_spec(spec: Obj, path: str) -> Causes:
    """``ValidatePersistentVolumeClaimSpec`` (also for ephemeral volume and StatefulSet templates)."""
    causes: Causes = []
    if not as_list(spec.get("accessModes")):
        causes.append(required(f"{path}.accessModes", "at least 1 access mode is required"))
    if spec.get("selector") is not None:
        causes.extend(validate_label_selector(spec.get("selector"), f"{path}.selector"))
    causes.extend(_access_modes(spec.get("accessModes"), f"{path}.accessModes"))
    requests = as_dict(as_dict(spec.get("resources")).get("requests"))
    storage_path = f"{path}.resources[storage]"
    if "storage" not in requests:
        causes.append(required(storage_path, ""))
    else:
        positive = _positive_quantity(requests["storage"], storage_path)
        causes.extend(positive)
        q = quantity(requests["storage"])
        if not positive and q is not None:
            causes.extend(validate_quantity_value("storage", q, storage_path))
    causes.extend(_class_name(spec.get("storageClassName"), f"{path}.storageClassName"))
    mode = spec.get("volumeMode")
    if mode is not None and mode not in _VOLUME_MODES:
        causes.append(not_supported(f"{path}.volumeMode", mode, _VOLUME_MODES))
    if spec.get("dataSource") is not None:
        causes.extend(_validate_data_source(spec["dataSource"], f"{path}.dataSource", False))
    if spec.get("dataSourceRef") is not None:
        causes.extend(_validate_data_source(spec["dataSourceRef"], f"{path}.dataSourceRef", True))
    causes.extend(_class_name(spec.get("volumeAttributesClassName"), f"{path}.volumeAttributesClassName"))
    return causes


def validate_pvc(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(validate_pvc_spec(spec, "spec"))
    if old is None:
        return causes
    old_spec = as_dict(old.get("spec"))
    # The PV controller binds a claim once (volumeName), a bound claim may grow; nothing else changes.
    comparable_new, comparable_old = dict(spec), dict(old_spec)
    if not as_str(old_spec.get("volumeName")):
        comparable_old["volumeName"] = spec.get("volumeName")
    if old_spec.get("storageClassName") is None:
        comparable_old["storageClassName"] = spec.get("storageClassName")
    for part in (comparable_new, comparable_old):
        part.pop("volumeAttributesClassName", None)
        if as_str(as_dict(obj.get("status")).get("phase")) == "Bound":
            res = dict(as_dict(part.get("resources")))
            res["requests"] = {k: v for k, v in as_dict(res.get("requests")).items() if k != "storage"}
            part["resources"] = res
    if semantic(comparable_new) != semantic(comparable_old):
        causes.append(forbidden_field("spec", "spec is immutable after creation except resources.requests and "
                                      "volumeAttributesClassName for bound claims"))
    new_size = quantity(as_dict(as_dict(spec.get("resources")).get("requests")).get("storage"))
    old_size = quantity(as_dict(as_dict(old_spec.get("resources")).get("requests")).get("storage"))
    if new_size is not None and old_size is not None and new_size.value < old_size.value:
        status_size = quantity(as_dict(as_dict(old.get("status")).get("capacity")).get("storage"))
        if status_size is None or new_size.value <= status_size.value:
            causes.append(forbidden_field("spec.resources.requests.storage",
                                          "field can not be less than status.capacity"))
    if spec.get("volumeMode") != old_spec.get("volumeMode"):
        causes.append(invalid("volumeMode", spec.get("volumeMode"), IMMUTABLE))
    return causes


def _rc_selector_as_label_selector(sel: Any) -> Any:
    return {"matchLabels": sel} if isinstance(sel, dict) else None


def validate_replication_controller(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateReplicationController``: a map selector that the template's labels must match."""
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(nonnegative(spec.get("replicas"), "spec.replicas"))
    causes.extend(nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    sel = spec.get("selector")
    if not as_dict(sel):
        causes.append(required("spec.selector", ""))
    else:
        causes.extend(validate_labels(sel, "spec.selector"))
    tmpl = spec.get("template")
    if tmpl is None:
        causes.append(required("spec.template", ""))
        return causes
    if as_dict(sel):
        labels = as_dict(as_dict(as_dict(tmpl).get("metadata")).get("labels"))
        if any(labels.get(k) != v for k, v in as_dict(sel).items()):
            causes.append(invalid_rendered("spec.template.metadata.labels", go_string_map(labels or None),
                                           "`selector` does not match template `labels`"))
    causes.extend(validate_pod_template(tmpl, "spec.template"))
    causes.extend(restart_always(tmpl, "spec.template"))
    if as_dict(as_dict(tmpl).get("spec")).get("activeDeadlineSeconds") is not None:
        causes.append(forbidden_field("spec.template.spec.activeDeadlineSeconds",
                                      "activeDeadlineSeconds in ReplicationController is not Supported"))
    return causes


def validate_pod_template_kind(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(validate_pod_template(obj.get("template"), "template"))
    return causes


_QUOTA_SCOPES = ["BestEffort", "CrossNamespacePodAffinity", "NotBestEffort", "NotTerminating", "PriorityClass",
                 "Terminating", "VolumeAttributesClass"]


def validate_resource_list(values: Any, path: str) -> Causes:
    causes: Causes = []
    for name, raw in sorted(as_dict(values).items()):
        causes.extend(validate_resource_name(name, f"{path}[{name}]"))
        q = quantity(raw)
        if q is not None:
            causes.extend(validate_quantity_value(name, q, f"{path}[{name}]"))
    return causes


def validate_resource_quota(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(validate_resource_list(spec.get("hard"), "spec.hard"))
    status = as_dict(obj.get("status"))
    causes.extend(validate_resource_list(status.get("hard"), "status.hard"))
    causes.extend(validate_resource_list(status.get("used"), "status.used"))
    for i, scope in enumerate(as_list(spec.get("scopes"))):
        if scope not in _QUOTA_SCOPES:
            causes.append(not_supported(f"spec.scopes[{i}]", scope, _QUOTA_SCOPES))
    for i, expr in enumerate(as_dict(e) for e in as_list(as_dict(spec.get("scopeSelector")).get("matchExpressions"))):
        epath = f"spec.scopeSelector.matchExpressions[{i}]"
        if expr.get("scopeName") not in _QUOTA_SCOPES:
            causes.append(not_supported(f"{epath}.scopeName", expr.get("scopeName"), _QUOTA_SCOPES))
        if expr.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist"):
            causes.append(not_supported(f"{epath}.operator", expr.get("operator"),
                                        ["DoesNotExist", "Exists", "In", "NotIn"]))
    return causes


def validate_limit_range(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateLimitRange``: one item per type; min <= defaultRequest <= default <= max."""
    causes = validate_object_meta(obj)
    seen: set[str] = set()
    for i, item in enumerate(as_dict(x) for x in as_list(as_dict(obj.get("spec")).get("limits"))):
        path = f"spec.limits[{i}]"
        ltype = as_str(item.get("type"))
        if not ltype:
            causes.append(required(f"{path}.type", ""))
        elif ltype in seen:
            causes.append(duplicate(f"{path}.type", ltype))
        seen.add(ltype)
        parts = {p: as_dict(item.get(p)) for p in ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")}
        for part, values in parts.items():
            causes.extend(validate_resource_list(values, f"{path}.{part}"))
        if ltype == "Pod" and (parts["default"] or parts["defaultRequest"]):
            key = "default" if parts["default"] else "defaultRequest"
            causes.append(forbidden_field(f"{path}.{key}", "may not be specified when `type` is 'Pod'"))
        for name in sorted(set().union(*(v.keys() for v in parts.values()))):
            q = {p: quantity(v.get(name)) for p, v in parts.items()}
            lo, hi = q["min"], q["max"]
            if lo is not None and hi is not None and lo.value > hi.value:
                causes.append(invalid_rendered(f"{path}.min[{name}]", fmt_value(lo.string),
                                               f"min value {lo.string} is greater than max value {hi.string}"))
            dr, df = q["defaultRequest"], q["default"]
            if dr is not None and hi is not None and dr.value > hi.value:
                causes.append(invalid_rendered(f"{path}.defaultRequest[{name}]", fmt_value(dr.string),
                                               f"default request value {dr.string} is greater than max value {hi.string}"))
            if dr is not None and df is not None and dr.value > df.value:
                causes.append(invalid_rendered(f"{path}.defaultRequest[{name}]", fmt_value(dr.string),
                                               f"default request value {dr.string} is greater than default limit value "
                                               f"{df.string}"))
            if df is not None and hi is not None and df.value > hi.value:
                causes.append(invalid_rendered(f"{path}.default[{name}]", fmt_value(df.string),
                                               f"default value {df.string} is greater than max value {hi.string}"))
    return causes
