"""PodSpec and PodTemplateSpec validation (``pkg/apis/core/validation``), shared by Pods and every
workload kind: containers, volumes, probes, affinity, tolerations, label selectors.
"""

from __future__ import annotations

from typing import Any

from koordinator.apis import quantity as qty
from koordinator.apiserver.errors import duplicate, forbidden_field, not_supported, required
from koordinator.apiserver.validation.causes import (
    Causes,
    Obj,
    as_dict,
    as_int,
    as_list,
    as_str,
    go_string_map,
    invalid,
    invalid_rendered,
    nonnegative,
    not_found,
    one_of,
)
from koordinator.apiserver.validation.core_resources import (
    quantity,
    validate_container_resource_name,
    validate_pod_resource_name,
    validate_resource_requirements,
)
from koordinator.apiserver.validation.formats import (
    inclusive_range_error,
    is_dns1123_label,
    is_label_value,
    is_qualified_name,
    is_valid_port_name,
    is_valid_port_num,
    name_is_dns_label,
    name_is_dns_subdomain,
)
from koordinator.apiserver.validation.meta import validate_annotations, validate_labels


_VOLUME_SOURCES = (
    # (JSON key, path Go uses in "may not specify more than 1 volume type"), in Go's order.
    ("emptyDir", "emptyDir"), ("hostPath", "hostPath"), ("gitRepo", "gitRepo"),
    ("gcePersistentDisk", "gcePersistentDisk"), ("awsElasticBlockStore", "awsElasticBlockStore"),
    ("secret", "secret"), ("nfs", "nfs"), ("iscsi", "iscsi"), ("glusterfs", "glusterfs"), ("flocker", "flocker"),
    ("persistentVolumeClaim", "persistentVolumeClaim"), ("rbd", "rbd"), ("cinder", "cinder"),
    ("cephfs", "cephFS"), ("quobyte", "quobyte"), ("downwardAPI", "downwarAPI"), ("fc", "fc"),
    ("flexVolume", "flexVolume"), ("configMap", "configMap"), ("azureFile", "azureFile"),
    ("vsphereVolume", "vsphereVolume"), ("photonPersistentDisk", "photonPersistentDisk"),
    ("portworxVolume", "portworxVolume"), ("azureDisk", "azureDisk"), ("storageos", "storageos"),
    ("projected", "projected"), ("scaleIO", "scaleIO"), ("csi", "csi"), ("ephemeral", "ephemeral"),
    ("image", "image"),
)
_HOST_PATH_TYPES = ["", "BlockDevice", "CharDevice", "Directory", "DirectoryOrCreate", "File", "FileOrCreate", "Socket"]


def _validate_volume_source(vol: Obj, path: str) -> Causes:
    causes: Causes = []
    count = 0
    for key, forbid_path in _VOLUME_SOURCES:
        src = vol.get(key)
        if src is None:
            continue
        if count > 0 and key != "emptyDir":
            causes.append(forbidden_field(f"{path}.{forbid_path}", "may not specify more than 1 volume type"))
            continue
        count += 1
        src = as_dict(src)
        if key == "hostPath":
            if not as_str(src.get("path")):
                causes.append(required(f"{path}.hostPath.path", ""))
            else:
                if ".." in as_str(src.get("path")).split("/"):
                    causes.append(invalid(f"{path}.hostPath.path", src["path"], "must not contain '..'"))
                htype = src.get("type")
                if htype is not None and htype not in _HOST_PATH_TYPES:
                    causes.append(not_supported(f"{path}.hostPath.type", htype, _HOST_PATH_TYPES))
        elif key == "secret" and not as_str(src.get("secretName")):
            causes.append(required(f"{path}.secret.secretName", ""))
        elif key == "configMap" and not as_str(src.get("name")):
            causes.append(required(f"{path}.configMap.name", ""))
        elif key == "persistentVolumeClaim" and not as_str(src.get("claimName")):
            causes.append(required(f"{path}.persistentVolumeClaim.claimName", ""))
        elif key == "emptyDir" and src.get("sizeLimit") is not None:
            q = quantity(src.get("sizeLimit"))
            if q is not None and q.value < 0:
                causes.append(forbidden_field(f"{path}.emptyDir.sizeLimit",
                                              "SizeLimit field must be a valid resource quantity"))
    if count == 0:
        causes.append(required(path, "must specify a volume type"))
    return causes


def _validate_volumes(volumes: Any, path: str) -> tuple[set[str], Causes]:
    causes: Causes = []
    names: set[str] = set()
    for i, vol in enumerate(as_dict(v) for v in as_list(volumes)):
        idx = f"{path}[{i}]"
        name = as_str(vol.get("name"))
        errs = _validate_volume_source(vol, idx)
        if not name:
            errs.append(required(f"{idx}.name", ""))
        else:
            errs.extend(invalid(f"{idx}.name", name, m) for m in is_dns1123_label(name))
        if name in names:
            errs.append(duplicate(f"{idx}.name", name))
        if errs:
            causes.extend(errs)
        else:
            names.add(name)
    return names, causes


def validate_port_num_or_name(port: Any, path: str) -> Causes:
    if isinstance(port, str):
        return [invalid(path, port, m) for m in is_valid_port_name(port)]
    n = as_int(port)
    if n is None:
        return []
    return [invalid(path, n, m) for m in is_valid_port_num(n)]


PORT_PROTOCOLS = ["SCTP", "TCP", "UDP"]


def _validate_container_ports(ports: Any, path: str) -> Causes:
    causes: Causes = []
    names: set[str] = set()
    for i, port in enumerate(as_dict(p) for p in as_list(ports)):
        idx = f"{path}[{i}]"
        name = as_str(port.get("name"))
        if name:
            msgs = is_valid_port_name(name)
            if msgs:
                causes.extend(invalid(f"{idx}.name", name, m) for m in msgs)
            elif name in names:
                causes.append(duplicate(f"{idx}.name", name))
            else:
                names.add(name)
        cport = as_int(port.get("containerPort")) or 0
        if cport == 0:
            causes.append(required(f"{idx}.containerPort", ""))
        else:
            causes.extend(invalid(f"{idx}.containerPort", cport, m) for m in is_valid_port_num(cport))
        hport = as_int(port.get("hostPort")) or 0
        if hport:
            causes.extend(invalid(f"{idx}.hostPort", hport, m) for m in is_valid_port_num(hport))
        protocol = as_str(port.get("protocol"))
        if not protocol:
            causes.append(required(f"{idx}.protocol", ""))
        elif protocol not in PORT_PROTOCOLS:
            causes.append(not_supported(f"{idx}.protocol", protocol, PORT_PROTOCOLS))
    return causes


def _validate_env(env: Any, path: str) -> Causes:
    causes: Causes = []
    for i, var in enumerate(as_dict(e) for e in as_list(env)):
        name = as_str(var.get("name"))
        npath = f"{path}[{i}].name"
        if not name:
            causes.append(required(npath, ""))
        elif any(ord(c) > 126 or ord(c) < 32 or c == "=" for c in name):
            # v1.36 validates env names relaxed: any printable ASCII except '='.
            causes.append(invalid(npath, name, "a valid environment variable name must consist only of "
                                                "printable ASCII characters other than '='"))
    return causes


def _validate_volume_mounts(mounts: Any, volumes: set[str], path: str) -> Causes:
    causes: Causes = []
    seen: set[str] = set()
    for i, mnt in enumerate(as_dict(m) for m in as_list(mounts)):
        idx = f"{path}[{i}]"
        name = as_str(mnt.get("name"))
        mount_path = as_str(mnt.get("mountPath"))
        if not name:
            causes.append(required(f"{idx}.name", ""))
        if name not in volumes:
            causes.append(not_found(f"{idx}.name", name))
        if not mount_path:
            causes.append(required(f"{idx}.mountPath", ""))
        if mount_path in seen:
            causes.append(invalid(f"{idx}.mountPath", mount_path, "must be unique"))
        seen.add(mount_path)
    return causes


_PULL_POLICIES = ["Always", "IfNotPresent", "Never"]
_TERMINATION_MESSAGE_POLICIES = ["File", "FallbackToLogsOnError"]
_HTTP_SCHEMES = ["HTTP", "HTTPS"]


def _validate_handler(handler: Obj, path: str, probe: bool) -> Causes:
    causes: Causes = []
    kinds = ("exec", "httpGet", "tcpSocket", "grpc") if probe else ("exec", "httpGet", "tcpSocket", "sleep")
    count = 0
    for kind in kinds:
        body = handler.get(kind)
        if body is None:
            continue
        if count:
            causes.append(forbidden_field(f"{path}.{kind}", "may not specify more than 1 handler type"))
            continue
        count += 1
        body = as_dict(body)
        if kind == "exec" and not as_list(body.get("command")):
            causes.append(required(f"{path}.exec.command", ""))
        elif kind == "httpGet":
            if not as_str(body.get("path")):
                causes.append(required(f"{path}.httpGet.path", ""))
            causes.extend(validate_port_num_or_name(body.get("port"), f"{path}.httpGet.port"))
            scheme = as_str(body.get("scheme"))
            if scheme not in _HTTP_SCHEMES:
                causes.append(not_supported(f"{path}.httpGet.scheme", scheme, _HTTP_SCHEMES))
        elif kind == "tcpSocket":
            causes.extend(validate_port_num_or_name(body.get("port"), f"{path}.tcpSocket.port"))
        elif kind == "grpc":
            causes.extend(validate_port_num_or_name(as_int(body.get("port")) or 0, f"{path}.grpc.port"))
    if count == 0:
        causes.append(required(path, "must specify a handler type"))
    return causes


def _validate_probe(probe: Any, path: str, kind: str) -> Causes:
    if probe is None:
        return []
    probe = as_dict(probe)
    causes = _validate_handler(probe, path, probe=True)
    for fld in ("initialDelaySeconds", "timeoutSeconds", "periodSeconds", "successThreshold", "failureThreshold"):
        causes.extend(nonnegative(probe.get(fld), f"{path}.{fld}"))
    grace = as_int(probe.get("terminationGracePeriodSeconds"))
    if grace is not None and grace <= 0:
        causes.append(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must be greater than 0"))
    success = as_int(probe.get("successThreshold"))
    if kind in ("livenessProbe", "startupProbe") and success is not None and success != 1:
        causes.append(invalid(f"{path}.successThreshold", success, "must be 1"))
    if kind == "readinessProbe" and probe.get("terminationGracePeriodSeconds") is not None:
        causes.append(invalid(f"{path}.terminationGracePeriodSeconds", grace, "must not be set for readinessProbes"))
    return causes


def _validate_lifecycle_and_probes(ctr: Obj, path: str) -> Causes:
    causes: Causes = []
    lifecycle = ctr.get("lifecycle")
    if lifecycle is not None:
        for hook in ("postStart", "preStop"):
            if as_dict(lifecycle).get(hook) is not None:
                causes.extend(_validate_handler(as_dict(as_dict(lifecycle)[hook]), f"{path}.lifecycle.{hook}",
                                                probe=False))
    for kind in ("livenessProbe", "readinessProbe", "startupProbe"):
        causes.extend(_validate_probe(ctr.get(kind), f"{path}.{kind}", kind))
    return causes


def _validate_container_common(ctr: Obj, volumes: set[str], path: str) -> Causes:
    causes: Causes = []
    name = as_str(ctr.get("name"))
    if not name:
        causes.append(required(f"{path}.name", ""))
    else:
        causes.extend(invalid(f"{path}.name", name, m) for m in is_dns1123_label(name))
    if not as_str(ctr.get("image")):
        causes.append(required(f"{path}.image", ""))
    policy = as_str(ctr.get("terminationMessagePolicy"))
    if not policy:
        causes.append(required(f"{path}.terminationMessagePolicy", ""))
    elif policy not in _TERMINATION_MESSAGE_POLICIES:
        causes.append(not_supported(f"{path}.terminationMessagePolicy", policy, _TERMINATION_MESSAGE_POLICIES))
    causes.extend(_validate_container_ports(ctr.get("ports"), f"{path}.ports"))
    causes.extend(_validate_env(ctr.get("env"), f"{path}.env"))
    causes.extend(_validate_volume_mounts(ctr.get("volumeMounts"), volumes, f"{path}.volumeMounts"))
    pull = as_str(ctr.get("imagePullPolicy"))
    if not pull:
        causes.append(required(f"{path}.imagePullPolicy", ""))
    elif pull not in _PULL_POLICIES:
        causes.append(not_supported(f"{path}.imagePullPolicy", pull, _PULL_POLICIES))
    causes.extend(validate_resource_requirements(ctr.get("resources"), f"{path}.resources",
                                                 validate_container_resource_name))
    return causes


def _host_port_conflicts(containers: list[Obj], path: str) -> Causes:
    causes: Causes = []
    seen: set[str] = set()
    for ci, ctr in enumerate(containers):
        for pi, port in enumerate(as_dict(p) for p in as_list(ctr.get("ports"))):
            host_port = as_int(port.get("hostPort")) or 0
            if not host_port:
                continue
            key = f"{as_str(port.get('protocol'))}/{as_str(port.get('hostIP'))}/{host_port}"
            if key in seen:
                causes.append(duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            seen.add(key)
    return causes


def _validate_containers(containers: Any, volumes: set[str], path: str) -> Causes:
    items = [as_dict(c) for c in as_list(containers)]
    if not items:
        return [required(path, "")]
    causes: Causes = []
    names: set[str] = set()
    for i, ctr in enumerate(items):
        idx = f"{path}[{i}]"
        causes.extend(_validate_container_common(ctr, volumes, idx))
        name = as_str(ctr.get("name"))
        if name in names:
            causes.append(duplicate(f"{idx}.name", name))
        else:
            names.add(name)
        causes.extend(_validate_lifecycle_and_probes(ctr, idx))
        if ctr.get("restartPolicy") is not None:
            causes.append(forbidden_field(f"{idx}.restartPolicy", "may not be set for non-init containers"))
    causes.extend(_host_port_conflicts(items, path))
    return causes


def _validate_init_containers(init: Any, regular: Any, volumes: set[str], path: str) -> Causes:
    causes: Causes = []
    names = {as_str(as_dict(c).get("name")) for c in as_list(regular)}
    for i, ctr in enumerate(as_dict(c) for c in as_list(init)):
        idx = f"{path}[{i}]"
        causes.extend(_validate_container_common(ctr, volumes, idx))
        restart = ctr.get("restartPolicy")
        if restart is not None and restart != "Always":
            causes.append(not_supported(f"{idx}.restartPolicy", restart, ["Always"]))
        name = as_str(ctr.get("name"))
        if name in names:
            causes.append(duplicate(f"{idx}.name", name))
        elif name:
            names.add(name)
        causes.extend(_host_port_conflicts([ctr], path))
        if restart == "Always":
            causes.extend(_validate_lifecycle_and_probes(ctr, idx))
        else:
            for fld in ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe"):
                if ctr.get(fld) is not None:
                    causes.append(forbidden_field(f"{idx}.{fld}",
                                                  "may not be set for init containers without restartPolicy=Always"))
    return causes


_RESTART_POLICIES = ["Always", "OnFailure", "Never"]
_DNS_POLICIES = ["ClusterFirstWithHostNet", "ClusterFirst", "Default", "None"]
PREEMPTION_POLICIES = ["PreemptLowerPriority", "Never"]
TAINT_EFFECTS = ["NoSchedule", "PreferNoSchedule", "NoExecute"]
_TOLERATION_OPERATORS = ["Equal", "Exists"]
_UNSATISFIABLE_ACTIONS = ["DoNotSchedule", "ScheduleAnyway"]


def _validate_node_selector_requirement(req: Obj, path: str, check_values: bool) -> Causes:
    causes: Causes = []
    op = as_str(req.get("operator"))
    values = [v for v in as_list(req.get("values"))]
    if op in ("In", "NotIn"):
        if not values:
            causes.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            causes.append(forbidden_field(f"{path}.values",
                                          "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            causes.append(required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        causes.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    key = as_str(req.get("key"))
    causes.extend(invalid(f"{path}.key", key, m) for m in is_qualified_name(key))
    if check_values:
        for i, val in enumerate(values):
            causes.extend(invalid(f"{path}.values[{i}]", as_str(val), m) for m in is_label_value(as_str(val)))
    return causes


def validate_node_selector_term(term: Obj, path: str, check_values: bool) -> Causes:
    causes: Causes = []
    for j, req in enumerate(as_dict(r) for r in as_list(term.get("matchExpressions"))):
        causes.extend(_validate_node_selector_requirement(req, f"{path}.matchExpressions[{j}]", check_values))
    for j, req in enumerate(as_dict(r) for r in as_list(term.get("matchFields"))):
        fpath = f"{path}.matchFields[{j}]"
        op = as_str(req.get("operator"))
        values = as_list(req.get("values"))
        if op in ("In", "NotIn"):
            if len(values) != 1:
                causes.append(required(f"{fpath}.values", "must be only one value when `operator` is 'In' or "
                                                          "'NotIn' for node field selector"))
        else:
            causes.append(invalid(f"{fpath}.operator", op, "not a valid selector operator"))
        key = as_str(req.get("key"))
        if key != "metadata.name":
            causes.append(invalid(f"{fpath}.key", key, "not a valid field selector key"))
        else:
            for i, val in enumerate(values):
                causes.extend(invalid(f"{fpath}.values[{i}]", as_str(val), m)
                              for m in name_is_dns_subdomain(as_str(val), False))
    return causes


def validate_label_selector(sel: Any, path: str, check_values: bool = True) -> Causes:
    """``ValidateLabelSelector`` for a ``metav1.LabelSelector`` (None is valid)."""
    if sel is None:
        return []
    sel = as_dict(sel)
    causes = validate_labels(sel.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(as_dict(e) for e in as_list(sel.get("matchExpressions"))):
        epath = f"{path}.matchExpressions[{i}]"
        op = as_str(expr.get("operator"))
        values = as_list(expr.get("values"))
        if op in ("In", "NotIn"):
            if not values:
                causes.append(required(f"{epath}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                causes.append(forbidden_field(f"{epath}.values",
                                              "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            causes.append(invalid(f"{epath}.operator", op, "not a valid selector operator"))
        key = as_str(expr.get("key"))
        causes.extend(invalid(f"{epath}.key", key, m) for m in is_qualified_name(key))
        if check_values:
            for j, val in enumerate(values):
                causes.extend(invalid(f"{epath}.values[{j}]", as_str(val), m) for m in is_label_value(as_str(val)))
    return causes


def selector_matches(sel: Any, labels: Any) -> bool:
    """Whether a LabelSelector selects ``labels`` (None selects nothing, {} everything)."""
    if sel is None:
        return False
    sel = as_dict(sel)
    labels = as_dict(labels)
    for k, v in as_dict(sel.get("matchLabels")).items():
        if labels.get(k) != v:
            return False
    for expr in (as_dict(e) for e in as_list(sel.get("matchExpressions"))):
        key, op, values = as_str(expr.get("key")), as_str(expr.get("operator")), as_list(expr.get("values"))
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def _validate_pod_affinity_term(term: Obj, path: str) -> Causes:
    causes = validate_label_selector(term.get("labelSelector"), f"{path}.labelSelector")
    causes.extend(validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector"))
    for ns in as_list(term.get("namespaces")):
        causes.extend(invalid(f"{path}.namespace", as_str(ns), m) for m in name_is_dns_label(as_str(ns), False))
    key = as_str(term.get("topologyKey"))
    if not key:
        causes.append(required(f"{path}.topologyKey", "can not be empty"))
    causes.extend(invalid(f"{path}.topologyKey", key, m) for m in is_qualified_name(key))
    return causes


def _validate_pod_affinity(aff: Obj, path: str) -> Causes:
    causes: Causes = []
    for i, term in enumerate(as_dict(t) for t in as_list(aff.get("requiredDuringSchedulingIgnoredDuringExecution"))):
        causes.extend(_validate_pod_affinity_term(term, f"{path}.requiredDuringSchedulingIgnoredDuringExecution[{i}]"))
    for i, wterm in enumerate(as_dict(t) for t in as_list(aff.get("preferredDuringSchedulingIgnoredDuringExecution"))):
        wpath = f"{path}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
        weight = as_int(wterm.get("weight")) or 0
        if weight <= 0 or weight > 100:
            causes.append(invalid(f"{wpath}.weight", weight, "must be in the range 1-100"))
        causes.extend(_validate_pod_affinity_term(as_dict(wterm.get("podAffinityTerm")), f"{wpath}.podAffinityTerm"))
    return causes


def _validate_affinity(affinity: Any, path: str) -> Causes:
    affinity = as_dict(affinity)
    causes: Causes = []
    node = affinity.get("nodeAffinity")
    if node is not None:
        node = as_dict(node)
        npath = f"{path}.nodeAffinity"
        req = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if req is not None:
            rpath = f"{npath}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            terms = as_list(as_dict(req).get("nodeSelectorTerms"))
            if not terms:
                causes.append(required(rpath, "must have at least one node selector term"))
            for i, term in enumerate(as_dict(t) for t in terms):
                causes.extend(validate_node_selector_term(term, f"{rpath}[{i}]", True))
        preferred = as_list(node.get("preferredDuringSchedulingIgnoredDuringExecution"))
        for i, pref in enumerate(as_dict(p) for p in preferred):
            ppath = f"{npath}.preferredDuringSchedulingIgnoredDuringExecution[{i}]"
            weight = as_int(pref.get("weight")) or 0
            if weight <= 0 or weight > 100:
                causes.append(invalid(f"{ppath}.weight", weight, "must be in the range 1-100"))
            # Preferred terms tolerate invalid label values: one node may still match.
            causes.extend(validate_node_selector_term(as_dict(pref.get("preference")), f"{ppath}.preference", False))
    for kind in ("podAffinity", "podAntiAffinity"):
        if affinity.get(kind) is not None:
            causes.extend(_validate_pod_affinity(as_dict(affinity[kind]), f"{path}.{kind}"))
    return causes


def validate_tolerations(tolerations: Any, path: str) -> Causes:
    """``ValidateTolerations``."""
    causes: Causes = []
    for i, tol in enumerate(as_dict(t) for t in as_list(tolerations)):
        idx = f"{path}[{i}]"
        key, op, val, effect = (as_str(tol.get(f)) for f in ("key", "operator", "value", "effect"))
        if key:
            causes.extend(invalid(f"{idx}.key", key, m) for m in is_qualified_name(key))
        if not key and op != "Exists":
            causes.append(invalid(f"{idx}.operator", op,
                                  "operator must be Exists when `key` is empty, which means "
                                  "\"match all values and all keys\""))
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            causes.append(invalid(f"{idx}.effect", effect,
                                  "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("Equal", ""):
            msgs = is_label_value(val)
            if msgs:
                causes.append(invalid(f"{idx}.operator", val, ";".join(msgs)))
        elif op == "Exists":
            if val:
                causes.append(invalid(f"{idx}.operator", val, "value must be empty when `operator` is 'Exists'"))
        else:
            causes.append(not_supported(f"{idx}.operator", op, _TOLERATION_OPERATORS))
        if effect and effect not in TAINT_EFFECTS:
            causes.append(not_supported(f"{idx}.effect", effect, TAINT_EFFECTS))
    return causes


def _validate_topology_spread(constraints: Any, path: str) -> Causes:
    causes: Causes = []
    for i, c in enumerate(as_dict(x) for x in as_list(constraints)):
        idx = f"{path}[{i}]"
        skew = as_int(c.get("maxSkew")) or 0
        if skew <= 0:
            causes.append(invalid(f"{idx}.maxSkew", skew, "must be greater than zero"))
        if not as_str(c.get("topologyKey")):
            causes.append(required(f"{idx}.topologyKey", "can not be empty"))
        action = as_str(c.get("whenUnsatisfiable"))
        if action not in _UNSATISFIABLE_ACTIONS:
            causes.append(not_supported(f"{idx}.whenUnsatisfiable", action, _UNSATISFIABLE_ACTIONS))
        causes.extend(validate_label_selector(c.get("labelSelector"), f"{idx}.labelSelector"))
    return causes


def _validate_scheduling_gates(gates: Any, path: str) -> Causes:
    causes: Causes = []
    seen: set[str] = set()
    for i, gate in enumerate(as_dict(g) for g in as_list(gates)):
        name = as_str(gate.get("name"))
        causes.extend(invalid(f"{path}[{i}]", name, m) for m in is_qualified_name(name))
        if name in seen:
            causes.append(duplicate(f"{path}[{i}]", name))
        seen.add(name)
    return causes


def _validate_pod_resources(spec: Obj, path: str) -> Causes:
    res = spec.get("resources")
    if res is None:
        return []
    res = as_dict(res)
    causes: Causes = []
    if res.get("claims") is not None:
        causes.append(forbidden_field(f"{path}.claims", "claims cannot be set for Resources at pod-level"))
    causes.extend(validate_resource_requirements(res, path, validate_pod_resource_name))
    # Consistency with the containers, for resources the pod level names explicitly.
    pod_requests, pod_limits = as_dict(res.get("requests")), as_dict(res.get("limits"))
    totals: dict[str, Any] = {}
    for ctr in (as_dict(c) for c in as_list(spec.get("containers"))):
        for name, raw in as_dict(as_dict(ctr.get("resources")).get("requests")).items():
            q = quantity(raw)
            if q is not None:
                totals[name] = totals.get(name, 0) + q.value
    for name, total in totals.items():
        pod_q = quantity(pod_requests[name]) if name in pod_requests else None
        if pod_q is not None and total > pod_q.value:
            causes.append(invalid(f"{path}.requests[{name}]", pod_q.string,
                                  f"must be greater than or equal to aggregate container requests of "
                                  f"{qty.format_quantity(total)}"))
    for i, ctr in enumerate(as_dict(c) for c in as_list(spec.get("containers"))):
        for name, raw in as_dict(as_dict(ctr.get("resources")).get("limits")).items():
            if name not in pod_limits:
                continue
            cq, pq = quantity(raw), quantity(pod_limits[name])
            if cq is not None and pq is not None and cq.value > pq.value:
                causes.append(invalid(f"{path}.containers[{i}][{name}].limits", cq.string,
                                      f"must be less than or equal to pod limits of {pq.string}"))
    return causes


def validate_pod_spec(spec: Any, path: str, is_pod: bool) -> Causes:
    """``ValidatePodSpec`` (defaults already applied). ``is_pod`` for a Pod, not a template."""
    spec = as_dict(spec)
    causes: Causes = []
    if spec.get("terminationGracePeriodSeconds") is None:
        causes.append(required(f"{path}.terminationGracePeriodSeconds", ""))
    volumes, vol_causes = _validate_volumes(spec.get("volumes"), f"{path}.volumes")
    causes.extend(vol_causes)
    causes.extend(_validate_containers(spec.get("containers"), volumes, f"{path}.containers"))
    causes.extend(_validate_init_containers(spec.get("initContainers"), spec.get("containers"), volumes,
                                            f"{path}.initContainers"))
    causes.extend(_validate_pod_resources(spec, f"{path}.resources"))
    if spec.get("hostNetwork") is True:
        for i, ctr in enumerate(as_dict(c) for c in as_list(spec.get("containers"))):
            for j, port in enumerate(as_dict(p) for p in as_list(ctr.get("ports"))):
                hp, cp = as_int(port.get("hostPort")) or 0, as_int(port.get("containerPort")) or 0
                if (is_pod or hp != 0) and hp != cp:
                    causes.append(invalid(f"{path}.containers[{i}].ports[{j}].hostPort", hp,
                                          "must match `containerPort` when `hostNetwork` is true"))
    causes.extend(one_of(spec.get("restartPolicy"), f"{path}.restartPolicy", _RESTART_POLICIES))
    causes.extend(one_of(spec.get("dnsPolicy"), f"{path}.dnsPolicy", _DNS_POLICIES))
    causes.extend(validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector"))
    if spec.get("affinity") is not None:
        causes.extend(_validate_affinity(spec.get("affinity"), f"{path}.affinity"))
    if spec.get("dnsPolicy") == "None" and not as_list(as_dict(spec.get("dnsConfig")).get("nameservers")):
        if spec.get("dnsConfig") is None:
            causes.append(required(f"{path}.dnsConfig", "must provide `dnsConfig` when `dnsPolicy` is None"))
        else:
            causes.append(required(f"{path}.dnsConfig.nameservers",
                                   "must provide at least one DNS nameserver when `dnsPolicy` is None"))
    for i, gate in enumerate(as_dict(g) for g in as_list(spec.get("readinessGates"))):
        ctype = as_str(gate.get("conditionType"))
        causes.extend(invalid(f"{path}.readinessGates[{i}].conditionType", ctype, m) for m in is_qualified_name(ctype))
    causes.extend(_validate_scheduling_gates(spec.get("schedulingGates"), f"{path}.schedulingGates"))
    causes.extend(_validate_topology_spread(spec.get("topologySpreadConstraints"), f"{path}.topologySpreadConstraints"))
    for fld, fn in (("serviceAccountName", name_is_dns_subdomain), ("nodeName", name_is_dns_subdomain)):
        val = as_str(spec.get(fld))
        if val:
            causes.extend(invalid(f"{path}.{fld}", val, m) for m in fn(val, False))
    deadline = as_int(spec.get("activeDeadlineSeconds"))
    if deadline is not None and not 1 <= deadline <= 2**31 - 1:
        causes.append(invalid(f"{path}.activeDeadlineSeconds", deadline, inclusive_range_error(1, 2**31 - 1)))
    for fld in ("hostname", "subdomain"):
        val = as_str(spec.get(fld))
        if val:
            causes.extend(invalid(f"{path}.{fld}", val, m) for m in is_dns1123_label(val))
    causes.extend(validate_tolerations(spec.get("tolerations"), f"{path}.tolerations"))
    for fld in ("priorityClassName", "runtimeClassName"):
        val = as_str(spec.get(fld))
        if val:
            causes.extend(invalid(f"{path}.{fld}", val, m) for m in name_is_dns_subdomain(val, False))
    if spec.get("preemptionPolicy") is not None:
        causes.extend(one_of(spec.get("preemptionPolicy"), f"{path}.preemptionPolicy", PREEMPTION_POLICIES))
    if spec.get("overhead") is not None:
        causes.extend(validate_resource_requirements({"limits": spec.get("overhead")}, f"{path}.overhead",
                                                     validate_container_resource_name))
    return causes


def validate_pod_template(tmpl: Any, path: str) -> Causes:
    """``ValidatePodTemplateSpec``: template labels/annotations sit on ``<path>.labels``."""
    tmpl = as_dict(tmpl)
    md = as_dict(tmpl.get("metadata"))
    causes = validate_labels(md.get("labels"), f"{path}.labels")
    causes.extend(validate_annotations(md.get("annotations"), f"{path}.annotations"))
    spec = as_dict(tmpl.get("spec"))
    causes.extend(validate_pod_spec(spec, f"{path}.spec", is_pod=False))
    if as_list(spec.get("ephemeralContainers")):
        causes.append(forbidden_field(f"{path}.spec.ephemeralContainers",
                                      "ephemeral containers not allowed in pod template"))
    return causes


def _template_labels(tmpl: Any) -> Any:
    md = as_dict(tmpl).get("metadata")
    return md.get("labels") if isinstance(md, dict) else None


def selector_mismatch(sel: Any, tmpl: Any, path: str) -> Causes:
    labels = _template_labels(tmpl)
    if selector_matches(sel, labels):
        return []
    return [invalid_rendered(f"{path}.metadata.labels", go_string_map(labels),
                             "`selector` does not match template `labels`")]


def restart_always(tmpl: Any, path: str) -> Causes:
    restart = as_str(as_dict(as_dict(tmpl).get("spec")).get("restartPolicy"))
    return [] if restart == "Always" else [not_supported(f"{path}.spec.restartPolicy", restart, ["Always"])]
