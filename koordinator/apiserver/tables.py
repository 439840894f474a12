"""Server-side printing: ``meta.k8s.io/v1 Table`` responses for ``kubectl get``.

kubectl asks for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the
cells verbatim, so each built-in kind reproduces kube-apiserver's printer
(pkg/printers/internalversion) cell for cell. The server always generates the wide columns;
kubectl hides ``priority`` > 0 columns unless ``-o wide``.

Custom resources use the CRD version's ``additionalPrinterColumns`` (JSONPath subset
evaluated here) behind a Name column, or Name + Age when there are none. Kinds without a
printer get the generic Name + "Created At" table.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from typing import Any, Callable

from koordinator.apiserver import errors
from koordinator.apis.selectors import SelectorError, label_selector_from_dict

Obj = dict[str, Any]

__all__ = ["to_table", "human_duration", "evaluate_jsonpath", "JsonPathError"]

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)
CREATION_TIMESTAMP_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. "
    "It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
)

# Groups whose kinds are compiled into kube-apiserver; a kind from any other group that reaches
# to_table without printer columns is a custom resource whose CRD declares none.
BUILTIN_GROUPS = frozenset({
    "", "apps", "batch", "autoscaling", "policy", "admissionregistration.k8s.io", "apiextensions.k8s.io",
    "apiregistration.k8s.io", "authentication.k8s.io", "authorization.k8s.io", "certificates.k8s.io",
    "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io", "flowcontrol.apiserver.k8s.io",
    "internal.apiserver.k8s.io", "networking.k8s.io", "node.k8s.io", "rbac.authorization.k8s.io",
    "resource.k8s.io", "scheduling.k8s.io", "storage.k8s.io", "storagemigration.k8s.io",
})

INCLUDE_OBJECT_VALUES = ("Object", "Metadata", "None", "")


# -- time ---------------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: ~2-3 significant figures ("45s", "5m3s", "3h4m", "2d3h", "3y45d").

    Up to 2s in the future counts as now (clock skew); further in the future is "<invalid>".
    """
    s = int(seconds)  # truncates toward zero, like Go's int(d.Seconds())
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h" if rem == 0 else f"{hours}h{rem}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d" if rem == 0 else f"{hours // 24}d{rem}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


_TIME_CACHE: dict[str, datetime | None] = {}


def _parse_time(value: Any) -> datetime | None:
    """An RFC 3339 timestamp as an aware datetime; None when absent or unparsable."""
    if not isinstance(value, str) or not value:
        return None
    cached = _TIME_CACHE.get(value, False)
    if cached is not False:
        return cached  # type: ignore[return-value]
    try:
        parsed: datetime | None = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
    except ValueError:
        parsed = None
    if len(_TIME_CACHE) > 50_000:
        # Timestamps repeat across list/watch calls; bound the cache rather than let it grow.
        _TIME_CACHE.clear()
    _TIME_CACHE[value] = parsed
    return parsed


def _since(value: Any, now: datetime) -> str:
    """``translateTimestampSince``: "<unknown>" for a zero/absent time."""
    ts = _parse_time(value)
    if ts is None:
        return "<unknown>"
    return human_duration((now - ts).total_seconds())


def _rfc3339(value: Any) -> str:
    ts = _parse_time(value)
    if ts is None:
        return "0001-01-01T00:00:00Z"
    return ts.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- column helpers -----------------------------------------------------------------------------


def _col(name: str, type_: str = "string", description: str = "", *, fmt: str = "", priority: int = 0) -> Obj:
    return {"name": name, "type": type_, "format": fmt, "description": description, "priority": priority}


def _name_col(priority: int = 0) -> Obj:
    return _col("Name", "string", NAME_DESCRIPTION, fmt="name", priority=priority)


def _age_col() -> Obj:
    return _col("Age", "string", CREATION_TIMESTAMP_DESCRIPTION)


def _wide(name: str, description: str) -> Obj:
    return _col(name, "string", description, priority=1)


_CONTAINERS_COL = _wide("Containers", "Names of each container in the template.")
_IMAGES_COL = _wide("Images", "Images referenced by each container in the template.")


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _name(obj: Obj) -> str:
    return _meta(obj).get("name", "")


def _age(obj: Obj, now: datetime) -> str:
    return _since(_meta(obj).get("creationTimestamp"), now)


def _dig(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _int(value: Any, default: int = 0) -> int:
    if isinstance(value, bool) or value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _format_labels(labels: dict[str, str] | None) -> str:
    """``labels.FormatLabels``: sorted ``k=v`` pairs, "<none>" when empty."""
    if not labels:
        return "<none>"
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _selector_string(sel: Obj | None) -> str | None:
    """``LabelSelectorAsSelector(sel).String()``; None when the selector is invalid."""
    try:
        return str(label_selector_from_dict(sel))
    except SelectorError:
        return None


def _format_label_selector(sel: Obj | None) -> str:
    """``metav1.FormatLabelSelector``: "<none>" for an empty result, "<error>" when invalid."""
    text = _selector_string(sel)
    if text is None:
        return "<error>"
    return text or "<none>"


def _container_cells(containers: list[Obj] | None) -> tuple[str, str]:
    containers = containers or []
    return ",".join(c.get("name", "") for c in containers), ",".join(c.get("image", "") for c in containers)


def _template_containers(obj: Obj) -> list[Obj]:
    return _dig(obj, "spec", "template", "spec", "containers") or []


# -- built-in printers --------------------------------------------------------------------------

Row = tuple[list[Any], list[Obj] | None]
Printer = Callable[[Obj, datetime], Row]


def _is_restartable_init(container: Obj | None) -> bool:
    return bool(container) and container.get("restartPolicy") == "Always"  # type: ignore[union-attr]


def _condition_true(conditions: list[Obj], ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True" for c in conditions)


def _later(current: datetime | None, candidate: Any) -> datetime | None:
    ts = _parse_time(candidate)
    if ts is None:
        return current
    if current is None or current < ts:
        return ts
    return current


_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]


def _print_pod(pod: Obj, now: datetime) -> Row:
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    init_specs = spec.get("initContainers") or []
    restarts = 0
    sidecar_restarts = 0
    total = len(spec.get("containers") or [])
    ready = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for cond in conditions:
        if cond.get("type") == "PodScheduled" and cond.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    # The real server stamps that condition on create; a pod stored without it but still gated and
    # unbound reads the same way.
    if spec.get("schedulingGates") and not spec.get("nodeName") and not status.get("reason"):
        reason = "SchedulingGated"

    conditions_out = _POD_SUCCEEDED if phase == "Succeeded" else _POD_FAILED if phase == "Failed" else None

    init_by_name: dict[str, Obj] = {}
    for c in init_specs:
        init_by_name[c.get("name", "")] = c
        if _is_restartable_init(c):
            total += 1

    initializing = False
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        restarts += _int(cs.get("restartCount"))
        last_terminated = _dig(cs, "lastState", "terminated")
        if last_terminated:
            last_restart = _later(last_restart, last_terminated.get("finishedAt"))
        sidecar = _is_restartable_init(init_by_name.get(cs.get("name", "")))
        if sidecar:
            sidecar_restarts += _int(cs.get("restartCount"))
            if last_terminated:
                last_sidecar_restart = _later(last_sidecar_restart, last_terminated.get("finishedAt"))
        state = cs.get("state") or {}
        terminated = state.get("terminated")
        waiting = state.get("waiting")
        if terminated is not None and _int(terminated.get("exitCode")) == 0:
            continue
        if sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if terminated is not None:
            if not terminated.get("reason"):
                if _int(terminated.get("signal")):
                    reason = f"Init:Signal:{_int(terminated.get('signal'))}"
                else:
                    reason = f"Init:ExitCode:{_int(terminated.get('exitCode'))}"
            else:
                reason = "Init:" + terminated["reason"]
        elif waiting is not None and waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    if not initializing or _condition_true(conditions, "Initialized"):
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += _int(cs.get("restartCount"))
            last_terminated = _dig(cs, "lastState", "terminated")
            if last_terminated:
                last_restart = _later(last_restart, last_terminated.get("finishedAt"))
            state = cs.get("state") or {}
            waiting = state.get("waiting")
            terminated = state.get("terminated")
            if waiting is not None and waiting.get("reason"):
                reason = waiting["reason"]
            elif terminated is not None and terminated.get("reason"):
                reason = terminated["reason"]
            elif terminated is not None:
                if _int(terminated.get("signal")):
                    reason = f"Signal:{_int(terminated.get('signal'))}"
                else:
                    reason = f"ExitCode:{_int(terminated.get('exitCode'))}"
            elif cs.get("ready") and state.get("running") is not None:
                has_running = True
                ready += 1
        # A "Completed" container next to a still-running one does not make the pod completed.
        if reason == "Completed" and has_running:
            reason = "Running" if _condition_true(conditions, "Ready") else "NotReady"

    deleting = _meta(pod).get("deletionTimestamp")
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_cell = str(restarts)
    if restarts and last_restart is not None:
        restarts_cell = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"

    pod_ips = status.get("podIPs") or []
    pod_ip = (pod_ips[0].get("ip") if pod_ips else None) or status.get("podIP") or "<none>"
    gates = spec.get("readinessGates") or []
    gates_cell = "<none>"
    if gates:
        true_count = 0
        for gate in gates:
            for cond in conditions:
                if cond.get("type") == gate.get("conditionType"):
                    if cond.get("status") == "True":
                        true_count += 1
                    break
        gates_cell = f"{true_count}/{len(gates)}"
    cells = [_name(pod), f"{ready}/{total}", reason, restarts_cell, _age(pod, now),
             pod_ip, spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>", gates_cell]
    return cells, conditions_out


_POD_COLUMNS = [
    _name_col(),
    _col("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
    _col("Status", "string", "The aggregate status of the containers in this pod."),
    _col("Restarts", "string", "The number of times the containers in this pod have been restarted and when the "
                               "last container in this pod has restarted."),
    _age_col(),
    _wide("IP", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet "
                "allocated."),
    _wide("Node", "NodeName indicates in which node this pod is scheduled."),
    _wide("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods on the node, but it "
                            "cannot be scheduled right away as preemption victims receive their graceful "
                            "termination periods."),
    _wide("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness."),
]


def _print_node(node: Obj, now: datetime) -> Row:
    status = node.get("status") or {}
    ready = None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "Ready":
            ready = cond  # the last one wins, as in the Go map build-up
    parts = ["Unknown"] if ready is None else ["Ready" if ready.get("status") == "True" else "NotReady"]
    if (node.get("spec") or {}).get("unschedulable"):
        parts.append("SchedulingDisabled")
    roles: set[str] = set()
    for key, value in (_meta(node).get("labels") or {}).items():
        if key.startswith("node-role.kubernetes.io/"):
            role = key[len("node-role.kubernetes.io/"):]
            if role:
                roles.add(role)
        elif key == "kubernetes.io/role" and value:
            roles.add(value)
    info = status.get("nodeInfo") or {}

    def address(kind: str) -> str:
        for addr in status.get("addresses") or []:
            if addr.get("type") == kind:
                return addr.get("address", "")
        return "<none>"

    cells = [_name(node), ",".join(parts), ",".join(sorted(roles)) or "<none>", _age(node, now),
             info.get("kubeletVersion", ""), address("InternalIP"), address("ExternalIP"),
             info.get("osImage") or "<unknown>", info.get("kernelVersion") or "<unknown>",
             info.get("containerRuntimeVersion") or "<unknown>"]
    return cells, None


_NODE_COLUMNS = [
    _name_col(),
    _col("Status", "string", "The status of the node"),
    _col("Roles", "string", "The roles of the node"),
    _age_col(),
    _col("Version", "string", "Kubelet Version reported by the node."),
    _wide("Internal-IP", "List of addresses reachable to the node."),
    _wide("External-IP", "List of addresses reachable to the node."),
    _wide("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy))."),
    _wide("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64)."),
    _wide("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API "
                               "(e.g. containerd://1.4.2)."),
]


def _print_namespace(obj: Obj, now: datetime) -> Row:
    return [_name(obj), _dig(obj, "status", "phase") or "", _age(obj, now)], None


def _print_configmap(obj: Obj, now: datetime) -> Row:
    return [_name(obj), len(obj.get("data") or {}) + len(obj.get("binaryData") or {}), _age(obj, now)], None


def _print_secret(obj: Obj, now: datetime) -> Row:
    return [_name(obj), obj.get("type") or "Opaque", len(obj.get("data") or {}), _age(obj, now)], None


def _print_service_account(obj: Obj, now: datetime) -> Row:
    return [_name(obj), len(obj.get("secrets") or []), _age(obj, now)], None


def _print_service(svc: Obj, now: datetime) -> Row:
    spec = svc.get("spec") or {}
    svc_type = spec.get("type") or "ClusterIP"
    cluster_ips = spec.get("clusterIPs") or ([spec["clusterIP"]] if spec.get("clusterIP") else [])
    internal_ip = cluster_ips[0] if cluster_ips else "<none>"
    external_ips = spec.get("externalIPs") or []
    if svc_type in ("ClusterIP", "NodePort"):
        external = ",".join(external_ips) or "<none>"
    elif svc_type == "LoadBalancer":
        # The server prints the wide form, so the ingress list is not clipped.
        ingress: set[str] = set()
        for item in _dig(svc, "status", "loadBalancer", "ingress") or []:
            if item.get("ip"):
                ingress.add(item["ip"])
            elif item.get("hostname"):
                ingress.add(item["hostname"])
        lb = sorted(ingress)
        if external_ips:
            external = ",".join(lb + list(external_ips))
        else:
            external = ",".join(lb) or "<pending>"
    elif svc_type == "ExternalName":
        external = spec.get("externalName", "")
    else:
        external = "<unknown>"
    pieces = []
    for port in spec.get("ports") or []:
        protocol = port.get("protocol") or "TCP"
        if _int(port.get("nodePort")) > 0:
            pieces.append(f"{_int(port.get('port'))}:{_int(port.get('nodePort'))}/{protocol}")
        else:
            pieces.append(f"{_int(port.get('port'))}/{protocol}")
    cells = [_name(svc), svc_type, internal_ip, external, ",".join(pieces) or "<none>", _age(svc, now),
             _format_labels(spec.get("selector"))]
    return cells, None


def _join_host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _print_endpoints(obj: Obj, now: datetime) -> Row:
    subsets = obj.get("subsets") or []
    if not subsets:
        return [_name(obj), "<none>", _age(obj, now)], None
    shown: list[str] = []
    limit, more, count = 3, False, 0
    for subset in subsets:
        addresses = subset.get("addresses") or []
        ports = subset.get("ports") or []
        if not ports:
            count += len(addresses)
            for addr in addresses:
                if len(shown) == limit:
                    more = True
                    break
                shown.append(addr.get("ip", ""))
            continue
        for port in ports:
            count += len(addresses)
            for addr in addresses:
                if len(shown) == limit:
                    more = True
                    break
                shown.append(_join_host_port(addr.get("ip", ""), _int(port.get("port"))))
    text = ",".join(shown)
    if more:
        text = f"{text} + {count - limit} more..."
    return [_name(obj), text, _age(obj, now)], None


def _event_view(obj: Obj, group: str) -> Obj:
    """events.k8s.io/v1 fields under their core/v1 names (both share one printer upstream)."""
    if group != "events.k8s.io":
        return obj
    return {
        "metadata": obj.get("metadata") or {},
        "involvedObject": obj.get("regarding") or {},
        "message": obj.get("note", ""),
        "reason": obj.get("reason", ""),
        "type": obj.get("type", ""),
        "source": obj.get("deprecatedSource") or {},
        "firstTimestamp": obj.get("deprecatedFirstTimestamp"),
        "lastTimestamp": obj.get("deprecatedLastTimestamp"),
        "count": obj.get("deprecatedCount"),
        "eventTime": obj.get("eventTime"),
        "series": obj.get("series"),
        "reportingComponent": obj.get("reportingController", ""),
        "reportingInstance": obj.get("reportingInstance", ""),
    }


def _print_event(raw: Obj, now: datetime, group: str = "") -> Row:
    obj = _event_view(raw, group)
    first = _since(obj.get("firstTimestamp"), now)
    if _parse_time(obj.get("firstTimestamp")) is None:
        first = _since(obj.get("eventTime"), now)
    last = _since(obj.get("lastTimestamp"), now)
    if _parse_time(obj.get("lastTimestamp")) is None:
        last = first
    count = _int(obj.get("count"))
    series = obj.get("series")
    if series is not None:
        last = _since(series.get("lastObservedTime"), now)
        count = _int(series.get("count"))
    elif count == 0:
        count = 1  # singleton events of the new API carry no count
    involved = obj.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = obj.get("source") or {}
    component = source.get("component") or obj.get("reportingComponent") or ""
    instance = source.get("host") or obj.get("reportingInstance") or ""
    source_cell = f"{component}, {instance}" if instance else component
    cells = [last, obj.get("type", ""), obj.get("reason", ""), target, involved.get("fieldPath", ""), source_cell,
             (obj.get("message") or "").strip(), first, count, _name(obj)]
    return cells, None


_EVENT_COLUMNS = [
    _col("Last Seen", "string", "The time at which the most recent occurrence of this event was recorded."),
    _col("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
    _col("Reason", "string", "This should be a short, machine understandable string that gives the reason for the "
                             "transition into the object's current status."),
    _col("Object", "string", "The object that this event is about."),
    _wide("Subobject", "If referring to a piece of an object instead of an entire object, this string should "
                       "contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]."),
    _wide("Source", "The component reporting this event. Should be a short machine understandable string."),
    _col("Message", "string", "A human-readable description of the status of this operation."),
    _wide("First Seen", "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)"),
    _wide("Count", "The number of times this event has occurred."),
    _name_col(priority=1),
]


def _print_lease(obj: Obj, now: datetime) -> Row:
    return [_name(obj), _dig(obj, "spec", "holderIdentity") or "", _age(obj, now)], None


def _print_priority_class(obj: Obj, now: datetime) -> Row:
    return [_name(obj), _int(obj.get("value")), bool(obj.get("globalDefault")), _age(obj, now),
            obj.get("preemptionPolicy") or ""], None


def _int_or_string(value: Any) -> str:
    if value is None:
        return "N/A"
    if isinstance(value, bool):
        return str(int(value))
    return str(value)


def _print_pdb(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    return [_name(obj), _int_or_string(spec.get("minAvailable")), _int_or_string(spec.get("maxUnavailable")),
            _int(_dig(obj, "status", "disruptionsAllowed")), _age(obj, now)], None


def _replicas(obj: Obj) -> int:
    # spec.replicas defaults to 1 on the server; treat an undefaulted object the same way.
    value = _dig(obj, "spec", "replicas")
    return 1 if value is None else _int(value)


def _print_deployment(obj: Obj, now: datetime) -> Row:
    status = obj.get("status") or {}
    names, images = _container_cells(_template_containers(obj))
    selector = _selector_string(_dig(obj, "spec", "selector"))
    cells = [_name(obj), f"{_int(status.get('readyReplicas'))}/{_replicas(obj)}", _int(status.get("updatedReplicas")),
             _int(status.get("availableReplicas")), _age(obj, now), names, images,
             "<invalid>" if selector is None else selector]
    return cells, None


def _print_replica_set(obj: Obj, now: datetime) -> Row:
    status = obj.get("status") or {}
    names, images = _container_cells(_template_containers(obj))
    return [_name(obj), _replicas(obj), _int(status.get("replicas")), _int(status.get("readyReplicas")),
            _age(obj, now), names, images, _format_label_selector(_dig(obj, "spec", "selector"))], None


def _print_daemon_set(obj: Obj, now: datetime) -> Row:
    status = obj.get("status") or {}
    names, images = _container_cells(_template_containers(obj))
    return [_name(obj), _int(status.get("desiredNumberScheduled")), _int(status.get("currentNumberScheduled")),
            _int(status.get("numberReady")), _int(status.get("updatedNumberScheduled")),
            _int(status.get("numberAvailable")),
            _format_labels(_dig(obj, "spec", "template", "spec", "nodeSelector")), _age(obj, now),
            names, images, _format_label_selector(_dig(obj, "spec", "selector"))], None


def _print_stateful_set(obj: Obj, now: datetime) -> Row:
    names, images = _container_cells(_template_containers(obj))
    ready = _int(_dig(obj, "status", "readyReplicas"))
    return [_name(obj), f"{ready}/{_replicas(obj)}", _age(obj, now), names, images], None


def _job_condition(conditions: list[Obj], ctype: str) -> bool:
    for cond in conditions:
        if cond.get("type") == ctype:
            return cond.get("status") == "True"
    return False


def _print_job(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    succeeded = _int(status.get("succeeded"))
    if spec.get("completions") is not None:
        completions = f"{succeeded}/{_int(spec['completions'])}"
    elif _int(spec.get("parallelism")) > 1:
        completions = f"{succeeded}/1 of {_int(spec['parallelism'])}"
    else:
        completions = f"{succeeded}/1"
    start = _parse_time(status.get("startTime"))
    end = _parse_time(status.get("completionTime"))
    if start is None:
        duration = ""
    elif end is None:
        duration = human_duration((now - start).total_seconds())
    else:
        duration = human_duration((end - start).total_seconds())
    conditions = status.get("conditions") or []
    if _job_condition(conditions, "Complete"):
        state = "Complete"
    elif _job_condition(conditions, "Failed"):
        state = "Failed"
    elif _meta(obj).get("deletionTimestamp"):
        state = "Terminating"
    elif _job_condition(conditions, "Suspended"):
        state = "Suspended"
    elif _job_condition(conditions, "FailureTarget"):
        state = "FailureTarget"
    else:
        state = "Running"
    names, images = _container_cells(_template_containers(obj))
    return [_name(obj), state, completions, duration, _age(obj, now), names, images,
            _format_label_selector(spec.get("selector"))], None


def _print_cron_job(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    last = _dig(obj, "status", "lastScheduleTime")
    suspend = spec.get("suspend")
    job_spec = _dig(spec, "jobTemplate", "spec") or {}
    names, images = _container_cells(_dig(job_spec, "template", "spec", "containers"))
    return [_name(obj), spec.get("schedule", ""), spec.get("timeZone") or "<none>",
            "<unset>" if suspend is None else ("True" if suspend else "False"),
            len(_dig(obj, "status", "active") or []), "<none>" if last is None else _since(last, now),
            _age(obj, now), names, images, _format_label_selector(job_spec.get("selector"))], None


def _print_webhook_configuration(obj: Obj, now: datetime) -> Row:
    return [_name(obj), len(obj.get("webhooks") or []), _age(obj, now)], None


def _print_binding(obj: Obj, now: datetime) -> Row:
    ref = obj.get("roleRef") or {}
    users: list[str] = []
    groups: list[str] = []
    service_accounts: list[str] = []
    for subject in obj.get("subjects") or []:
        kind = subject.get("kind")
        if kind == "ServiceAccount":
            service_accounts.append(f"{subject.get('namespace', '')}/{subject.get('name', '')}")
        elif kind == "User":
            users.append(subject.get("name", ""))
        elif kind == "Group":
            groups.append(subject.get("name", ""))
    return [_name(obj), f"{ref.get('kind', '')}/{ref.get('name', '')}", _age(obj, now), ", ".join(users),
            ", ".join(groups), ", ".join(service_accounts)], None


def _binding_columns(what: str) -> list[Obj]:
    return [_name_col(), _col("Role", "string", "RoleRef can reference a Role in the current namespace or a "
                                                "ClusterRole in the global namespace."),
            _age_col(), _wide("Users", f"Users in the {what}"), _wide("Groups", f"Groups in the {what}"),
            _wide("ServiceAccounts", f"ServiceAccounts in the {what}")]


_WORKLOAD_SELECTOR = "Label selector for pods."
_WEBHOOK_COLUMNS = [_name_col(), _col("Webhooks", "integer", "Webhooks indicates the number of webhooks registered "
                                                             "in this configuration"), _age_col()]

_PRINTERS: dict[tuple[str, str], tuple[list[Obj], Printer]] = {
    ("", "Pod"): (_POD_COLUMNS, _print_pod),
    ("", "Node"): (_NODE_COLUMNS, _print_node),
    ("", "Namespace"): ([_name_col(), _col("Status", "string", "The status of the namespace"), _age_col()],
                        _print_namespace),
    ("", "ConfigMap"): ([_name_col(), _col("Data", "string", "Data contains the configuration data."), _age_col()],
                        _print_configmap),
    ("", "Secret"): ([_name_col(), _col("Type", "string", "Used to facilitate programmatic handling of secret "
                                                          "data."),
                      _col("Data", "string", "Data contains the secret data."), _age_col()], _print_secret),
    ("", "ServiceAccount"): ([_name_col(), _col("Secrets", "string", "Secrets is a list of the secrets in the same "
                                                                     "namespace that pods running using this "
                                                                     "ServiceAccount are allowed to use."),
                              _age_col()], _print_service_account),
    ("", "Service"): ([_name_col(), _col("Type", "string", "type determines how the Service is exposed."),
                       _col("Cluster-IP", "string", "clusterIP is the IP address of the service."),
                       _col("External-IP", "string", "externalIPs is a list of IP addresses for which nodes in the "
                                                     "cluster will also accept traffic for this service."),
                       _col("Port(s)", "string", "The list of ports that are exposed by this service."),
                       _age_col(), _wide("Selector", "Route service traffic to pods with label keys and values "
                                                     "matching this selector.")], _print_service),
    ("", "Endpoints"): ([_name_col(), _col("Endpoints", "string", "The set of all endpoints is the union of all "
                                                                  "subsets."), _age_col()], _print_endpoints),
    ("", "Event"): (_EVENT_COLUMNS, _print_event),
    ("events.k8s.io", "Event"): (_EVENT_COLUMNS, lambda obj, now: _print_event(obj, now, "events.k8s.io")),
    ("coordination.k8s.io", "Lease"): ([_name_col(), _col("Holder", "string", "holderIdentity contains the identity "
                                                                              "of the holder of a current lease."),
                                        _age_col()], _print_lease),
    ("scheduling.k8s.io", "PriorityClass"): ([
        _name_col(), _col("Value", "integer", "value represents the integer value of this priority class."),
        _col("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered "
                                          "as the default priority for pods that do not have any priority class."),
        _age_col(), _col("PreemptionPolicy", "string", "preemptionPolicy is the Policy for preempting pods with "
                                                       "lower priority.")], _print_priority_class),
    ("policy", "PodDisruptionBudget"): ([
        _name_col(), _col("Min Available", "string", "The minimum number of pods that must be available."),
        _col("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
        _col("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
        _age_col()], _print_pdb),
    ("apps", "Deployment"): ([
        _name_col(), _col("Ready", "string", "Number of the pod with ready state"),
        _col("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the "
                                     "desired template spec."),
        _col("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by "
                                    "this deployment."),
        _age_col(), _CONTAINERS_COL, _IMAGES_COL, _wide("Selector", _WORKLOAD_SELECTOR)], _print_deployment),
    ("apps", "ReplicaSet"): ([
        _name_col(), _col("Desired", "integer", "Replicas is the number of desired replicas."),
        _col("Current", "integer", "Replicas is the most recently observed number of replicas."),
        _col("Ready", "integer", "The number of ready replicas for this replica set."),
        _age_col(), _CONTAINERS_COL, _IMAGES_COL, _wide("Selector", _WORKLOAD_SELECTOR)], _print_replica_set),
    ("apps", "DaemonSet"): ([
        _name_col(),
        _col("Desired", "integer", "The total number of nodes that should be running the daemon pod."),
        _col("Current", "integer", "The number of nodes that are running at least 1 daemon pod and are supposed to "
                                   "run the daemon pod."),
        _col("Ready", "integer", "The number of nodes that should be running the daemon pod and have one or more of "
                                 "the daemon pod running and ready."),
        _col("Up-to-date", "integer", "The total number of nodes that are running updated daemon pod"),
        _col("Available", "integer", "The number of nodes that should be running the daemon pod and have one or "
                                     "more of the daemon pod running and available."),
        _col("Node Selector", "string", "NodeSelector is a selector which must be true for the pod to fit on a "
                                        "node."),
        _age_col(), _CONTAINERS_COL, _IMAGES_COL, _wide("Selector", _WORKLOAD_SELECTOR)], _print_daemon_set),
    ("apps", "StatefulSet"): ([
        _name_col(), _col("Ready", "string", "Number of the pod with ready state"), _age_col(), _CONTAINERS_COL,
        _IMAGES_COL], _print_stateful_set),
    ("batch", "Job"): ([
        _name_col(), _col("Status", "string", "Status of the job."),
        _col("Completions", "string", "The number of pods which reached phase Succeeded."),
        _col("Duration", "string", "Time required to complete the job."), _age_col(), _CONTAINERS_COL, _IMAGES_COL,
        _wide("Selector", _WORKLOAD_SELECTOR)], _print_job),
    ("batch", "CronJob"): ([
        _name_col(), _col("Schedule", "string", "The schedule in Cron format."),
        _col("Timezone", "string", "The time zone name for the given schedule."),
        _col("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions."),
        _col("Active", "integer", "A list of pointers to currently running jobs."),
        _col("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
        _age_col(), _CONTAINERS_COL, _IMAGES_COL, _wide("Selector", _WORKLOAD_SELECTOR)], _print_cron_job),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): (_WEBHOOK_COLUMNS,
                                                                       _print_webhook_configuration),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): (_WEBHOOK_COLUMNS,
                                                                         _print_webhook_configuration),
    ("rbac.authorization.k8s.io", "RoleBinding"): (_binding_columns("roleBinding"), _print_binding),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): (_binding_columns("clusterRoleBinding"), _print_binding),
}


# -- storage, quota, DRA, networking and the other kinds kube-scheduler and kcm inform on ---------

_ACCESS_MODE_SHORT = (("ReadWriteOnce", "RWO"), ("ReadOnlyMany", "ROX"), ("ReadWriteMany", "RWX"),
                      ("ReadWriteOncePod", "RWOP"))


def _access_modes(modes: Any) -> str:
    """``GetAccessModesAsString``: known modes in a fixed order, abbreviated."""
    modes = modes or []
    return ",".join(short for mode, short in _ACCESS_MODE_SHORT if mode in modes)


def _storage_class_of(obj: Obj) -> str:
    name = _dig(obj, "spec", "storageClassName")
    if name is None:
        name = (_meta(obj).get("annotations") or {}).get("volume.beta.kubernetes.io/storage-class", "")
    return name or ""


def _phase_or_terminating(obj: Obj) -> str:
    return "Terminating" if _meta(obj).get("deletionTimestamp") else _dig(obj, "status", "phase") or ""


def _unset(value: Any) -> str:
    return "<unset>" if value is None else str(value)


def _print_pv(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    ref = spec.get("claimRef") or {}
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if spec.get("claimRef") is not None else ""
    return [_name(obj), (spec.get("capacity") or {}).get("storage", ""), _access_modes(spec.get("accessModes")),
            spec.get("persistentVolumeReclaimPolicy", ""), _phase_or_terminating(obj), claim, _storage_class_of(obj),
            _unset(spec.get("volumeAttributesClassName")), _dig(obj, "status", "reason") or "", _age(obj, now),
            _unset(spec.get("volumeMode"))], None


def _print_pvc(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    volume = spec.get("volumeName") or ""
    capacity = (status.get("capacity") or {}).get("storage", "") if volume else ""
    modes = _access_modes(status.get("accessModes")) if volume else ""
    return [_name(obj), _phase_or_terminating(obj), volume, capacity, modes, _storage_class_of(obj),
            _unset(status.get("currentVolumeAttributesClassName") or spec.get("volumeAttributesClassName")),
            _age(obj, now), _unset(spec.get("volumeMode"))], None


def _print_replication_controller(obj: Obj, now: datetime) -> Row:
    status = obj.get("status") or {}
    names, images = _container_cells(_template_containers(obj))
    return [_name(obj), _replicas(obj), _int(status.get("replicas")), _int(status.get("readyReplicas")),
            _age(obj, now), names, images, _format_labels(_dig(obj, "spec", "selector"))], None


def _print_pod_template(obj: Obj, now: datetime) -> Row:
    names, images = _container_cells(_dig(obj, "template", "spec", "containers"))
    return [_name(obj), names, images, _format_labels(_dig(obj, "template", "metadata", "labels"))], None


def _print_resource_quota(obj: Obj, now: datetime) -> Row:
    hard = _dig(obj, "status", "hard") or _dig(obj, "spec", "hard") or {}
    used = _dig(obj, "status", "used") or {}
    requests, limits = [], []
    for name in sorted(hard):
        text = f"{name}: {used.get(name, '0')}/{hard[name]}"
        (limits if name.startswith("limits.") else requests).append(text)
    return [_name(obj), _age(obj, now), ", ".join(requests), ", ".join(limits)], None


def _print_storage_class(obj: Obj, now: datetime) -> Row:
    name = _name(obj)
    annotations = _meta(obj).get("annotations") or {}
    if "true" in (annotations.get("storageclass.kubernetes.io/is-default-class"),
                  annotations.get("storageclass.beta.kubernetes.io/is-default-class")):
        name += " (default)"
    return [name, obj.get("provisioner", ""), obj.get("reclaimPolicy") or "Delete",
            obj.get("volumeBindingMode") or "Immediate", bool(obj.get("allowVolumeExpansion")), _age(obj, now)], None


def _print_csi_driver(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    tokens = spec.get("tokenRequests")
    token_cell = "<unset>" if tokens is None else ",".join(t.get("audience", "") for t in tokens) or "<unset>"
    modes = ",".join(spec.get("volumeLifecycleModes") or []) or "<none>"
    return [_name(obj), bool(spec.get("attachRequired")), bool(spec.get("podInfoOnMount")),
            bool(spec.get("storageCapacity")), token_cell, bool(spec.get("requiresRepublish")), modes,
            _age(obj, now)], None


def _print_resource_claim(obj: Obj, now: datetime) -> Row:
    states = []
    deleted = bool(_meta(obj).get("deletionTimestamp"))
    if deleted:
        states.append("deleted")
    if _dig(obj, "status", "allocation") is None:
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if _dig(obj, "status", "reservedFor"):
            states.append("reserved")
    return [_name(obj), ",".join(states), _age(obj, now)], None


def _print_endpoint_slice(obj: Obj, now: datetime) -> Row:
    ports = obj.get("ports")
    if not ports:
        port_cell = "<unset>"
    else:
        port_cell = ",".join(str(p["port"]) if p.get("port") is not None else "<unset>" for p in ports)
    addresses = [a for ep in obj.get("endpoints") or [] for a in ep.get("addresses") or []]
    if not addresses:
        endpoints = "<unset>"
    else:
        endpoints = ",".join(addresses[:3]) + (f" + {len(addresses) - 3} more..." if len(addresses) > 3 else "")
    return [_name(obj), obj.get("addressType", ""), port_cell, endpoints, _age(obj, now)], None


def _metric_current(statuses: list[Obj], i: int, source: str, key: str) -> str:
    if i < len(statuses) and isinstance(statuses[i].get(source), dict):
        value = (statuses[i][source].get("current") or {}).get(key)
        if value is not None:
            return f"{value}%" if key == "averageUtilization" else str(value)
    return "<unknown>"


def _hpa_metrics(specs: list[Obj], statuses: list[Obj]) -> str:
    """``formatHPAMetrics``: two targets, then "+ N more..."."""
    if not specs:
        return "<none>"
    shown = []
    for i, spec in enumerate(specs):
        mtype = spec.get("type")
        source = {"Resource": "resource", "ContainerResource": "containerResource", "Pods": "pods",
                  "Object": "object", "External": "external"}.get(mtype or "")
        src = spec.get(source) or {} if source else {}
        target = src.get("target") or {}
        if source is None:
            shown.append("<unknown type>")
        elif mtype in ("Resource", "ContainerResource"):
            if target.get("averageValue") is not None:
                shown.append(f"{src.get('name', '')}: {_metric_current(statuses, i, source, 'averageValue')}/"
                             f"{target['averageValue']}")
            else:
                goal = f"{target['averageUtilization']}%" if target.get("averageUtilization") is not None else "<auto>"
                shown.append(f"{src.get('name', '')}: {_metric_current(statuses, i, source, 'averageUtilization')}/"
                             f"{goal}")
        elif mtype == "Pods":
            shown.append(f"{_metric_current(statuses, i, source, 'averageValue')}/{target.get('averageValue', '')}")
        elif target.get("averageValue") is not None:
            shown.append(f"{_metric_current(statuses, i, source, 'averageValue')}/{target['averageValue']} (avg)")
        else:
            shown.append(f"{_metric_current(statuses, i, source, 'value')}/{target.get('value', '')}")
    text = ", ".join(shown[:2])
    return f"{text} + {len(shown) - 2} more..." if len(shown) > 2 else text


def _print_hpa(obj: Obj, now: datetime) -> Row:
    if obj.get("apiVersion") == "autoscaling/v1":
        from koordinator.apiserver.conversions import HPA_V1

        obj = HPA_V1.to_storage(obj)  # one printer for both versions, as upstream prints the internal form
    spec = obj.get("spec") or {}
    ref = spec.get("scaleTargetRef") or {}
    status = obj.get("status") or {}
    min_pods = spec.get("minReplicas")
    return [_name(obj), f"{ref.get('kind', '')}/{ref.get('name', '')}",
            _hpa_metrics(spec.get("metrics") or [], status.get("currentMetrics") or []),
            "<unset>" if min_pods is None else str(min_pods), _int(spec.get("maxReplicas")),
            _int(status.get("currentReplicas")), _age(obj, now)], None


def _print_csr(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    conditions = _dig(obj, "status", "conditions") or []
    states = []
    for ctype in ("Approved", "Denied", "Failed"):
        if any(c.get("type") == ctype and c.get("status", "True") != "False" for c in conditions):
            states.append(ctype)
    if _dig(obj, "status", "certificate"):
        states.append("Issued")
    seconds = spec.get("expirationSeconds")
    duration = "<none>" if seconds is None else human_duration(_int(seconds))
    return [_name(obj), _age(obj, now), spec.get("signerName") or "<none>", spec.get("username", ""), duration,
            ",".join(states) or "Pending"], None


def _print_ingress(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    hosts = [r.get("host") for r in spec.get("rules") or [] if r.get("host")]
    host_cell = "*" if not hosts else ",".join(hosts[:4]) + (f" + {len(hosts) - 4} more..." if len(hosts) > 4 else "")
    addresses = []
    for ing in _dig(obj, "status", "loadBalancer", "ingress") or []:
        if ing.get("ip"):
            addresses.append(ing["ip"])
        elif ing.get("hostname"):
            addresses.append(ing["hostname"])
    return [_name(obj), spec.get("ingressClassName") or "<none>", host_cell, ",".join(addresses),
            "80, 443" if spec.get("tls") else "80", _age(obj, now)], None


def _print_ingress_class(obj: Obj, now: datetime) -> Row:
    params = _dig(obj, "spec", "parameters")
    if params is None:
        cell = "<none>"
    else:
        group = params.get("apiGroup") or ""
        cell = f"{params.get('kind', '')}.{group}/{params.get('name', '')}" if group else \
            f"{params.get('kind', '')}/{params.get('name', '')}"
    return [_name(obj), _dig(obj, "spec", "controller") or "", cell, _age(obj, now)], None


def _print_ip_address(obj: Obj, now: datetime) -> Row:
    ref = _dig(obj, "spec", "parentRef") or {}
    resource = ref.get("resource", "")
    if ref.get("group"):
        resource = f"{resource}.{ref['group']}"
    parent = f"{resource}/{ref.get('namespace')}/{ref.get('name', '')}" if ref.get("namespace") else \
        f"{resource}/{ref.get('name', '')}"
    return [_name(obj), parent], None


def _print_admission_policy(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    param = spec.get("paramKind")
    cell = "<unset>" if param is None else f"{param.get('apiVersion', '')}/{param.get('kind', '')}"
    return [_name(obj), len(spec.get("validations") or []), cell, _age(obj, now)], None


def _print_admission_policy_binding(obj: Obj, now: datetime) -> Row:
    spec = obj.get("spec") or {}
    ref = spec.get("paramRef")
    if ref is None:
        cell = "<unset>"
    elif ref.get("name"):
        cell = f"{ref['namespace']}/{ref['name']}" if ref.get("namespace") else f"*/{ref['name']}"
    else:
        cell = _format_label_selector(ref.get("selector"))
    return [_name(obj), spec.get("policyName", ""), cell, _age(obj, now)], None


def _print_controller_revision(obj: Obj, now: datetime) -> Row:
    controller = "<none>"
    for ref in _meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            group = (ref.get("apiVersion") or "").rpartition("/")[0]
            kind = (ref.get("kind") or "").lower()
            controller = f"{kind}.{group}/{ref.get('name', '')}" if group else f"{kind}/{ref.get('name', '')}"
            break
    return [_name(obj), controller, _int(obj.get("revision")), _age(obj, now)], None


def _simple(*cells: Callable[[Obj], Any]) -> Printer:
    """A printer of Name, the given cells, then Age."""
    def printer(obj: Obj, now: datetime) -> Row:
        return [_name(obj), *(cell(obj) for cell in cells), _age(obj, now)], None
    return printer


_PRINTERS.update({
    ("", "PersistentVolume"): ([
        _name_col(), _col("Capacity", "string", "The capacity of the volume."),
        _col("Access Modes", "string", "AccessModes contains the desired access modes the volume should have."),
        _col("Reclaim Policy", "string", "What happens to a persistent volume when released from its claim."),
        _col("Status", "string", "Phase indicates if a volume is available, bound to a claim, or released by a "
                                 "claim."),
        _col("Claim", "string", "ClaimRef is part of a bi-directional binding between PersistentVolume and "
                                "PersistentVolumeClaim."),
        _col("StorageClass", "string", "StorageClass of the persistent volume."),
        _col("VolumeAttributesClass", "string", "VolumeAttributesClass of the persistent volume."),
        _col("Reason", "string", "Reason is a brief CamelCase string that describes any failure."), _age_col(),
        _wide("VolumeMode", "VolumeMode works with a Filesystem or a raw Block device.")], _print_pv),
    ("", "PersistentVolumeClaim"): ([
        _name_col(), _col("Status", "string", "Phase represents the current phase of PersistentVolumeClaim."),
        _col("Volume", "string", "VolumeName is the binding reference to the PersistentVolume backing this claim."),
        _col("Capacity", "string", "Capacity represents the actual resources of the underlying volume."),
        _col("Access Modes", "string", "AccessModes contains the desired access modes the volume should have."),
        _col("StorageClass", "string", "StorageClass of the claim."),
        _col("VolumeAttributesClass", "string", "VolumeAttributesClass of the claim."), _age_col(),
        _wide("VolumeMode", "VolumeMode defines what type of volume is required by the claim.")], _print_pvc),
    ("", "ReplicationController"): ([
        _name_col(), _col("Desired", "integer", "Replicas is the number of desired replicas."),
        _col("Current", "integer", "Replicas is the most recently observed number of replicas."),
        _col("Ready", "integer", "The number of ready replicas for this replication controller."),
        _age_col(), _CONTAINERS_COL, _IMAGES_COL, _wide("Selector", _WORKLOAD_SELECTOR)],
        _print_replication_controller),
    ("", "PodTemplate"): ([
        _name_col(), _col("Containers", "string", "Names of each container in the template."),
        _col("Images", "string", "Images referenced by each container in the template."),
        _col("Pod Labels", "string", "The labels for the pod template.")], _print_pod_template),
    ("", "ResourceQuota"): ([
        _name_col(), _age_col(), _col("Request", "string", "Request represents a minimum amount of cpu/memory that "
                                                           "a container may consume."),
        _col("Limit", "string", "Limits control the maximum amount of cpu/memory that a container may use "
                                "independent of contention on the node.")], _print_resource_quota),
    ("storage.k8s.io", "StorageClass"): ([
        _name_col(), _col("Provisioner", "string", "Indicates the type of the provisioner."),
        _col("ReclaimPolicy", "string", "Indicates the type of the reclaim policy."),
        _col("VolumeBindingMode", "string", "Indicates how PersistentVolumeClaims should be bound."),
        _col("AllowVolumeExpansion", "string", "Indicates whether the storage class allow volume expand."),
        _age_col()], _print_storage_class),
    ("storage.k8s.io", "CSIDriver"): ([
        _name_col(), _col("AttachRequired", "boolean", "Indicates this CSI volume driver requires an attach "
                                                       "operation."),
        _col("PodInfoOnMount", "boolean", "Indicates this CSI volume driver requires additional pod information "
                                          "during mount operations."),
        _col("StorageCapacity", "boolean", "Indicates this CSI volume driver publishes storage capacity."),
        _col("TokenRequests", "string", "Indicates the CSIDriver wants pods' service account tokens."),
        _col("RequiresRepublish", "boolean", "Indicates this CSI volume driver requires NodePublishVolume to be "
                                             "called periodically."),
        _col("Modes", "string", "Defines the volume lifecycle modes this CSI volume driver supports."),
        _age_col()], _print_csi_driver),
    ("storage.k8s.io", "CSINode"): ([
        _name_col(), _col("Drivers", "integer", "Drivers indicates the number of CSI drivers registered on the "
                                                "node"), _age_col()],
        _simple(lambda o: len(_dig(o, "spec", "drivers") or []))),
    ("storage.k8s.io", "CSIStorageCapacity"): ([
        _name_col(), _col("StorageClassName", "string", "The name of the StorageClass the capacity applies to."),
        _col("Capacity", "string", "The capacity reported by the CSI driver.")],
        lambda o, now: ([_name(o), o.get("storageClassName", ""), _unset(o.get("capacity"))], None)),
    ("storage.k8s.io", "VolumeAttachment"): ([
        _name_col(), _col("Attacher", "string", "Attacher indicates the name of the volume driver that MUST handle "
                                                "this request."),
        _col("PV", "string", "Name of the persistent volume to attach."),
        _col("Node", "string", "The node that the volume should be attached to."),
        _col("Attached", "boolean", "Indicates the volume is successfully attached."), _age_col()],
        _simple(lambda o: _dig(o, "spec", "attacher") or "",
                lambda o: _dig(o, "spec", "source", "persistentVolumeName") or "",
                lambda o: _dig(o, "spec", "nodeName") or "", lambda o: bool(_dig(o, "status", "attached")))),
    ("storage.k8s.io", "VolumeAttributesClass"): ([
        _name_col(), _col("DriverName", "string", "Indicates the name of the CSI driver that handles the class."),
        _age_col()], _simple(lambda o: o.get("driverName", ""))),
    ("resource.k8s.io", "ResourceClaim"): ([
        _name_col(), _col("State", "string", "A summary of the current state (allocated, pending, reserved, "
                                             "etc.)."), _age_col()], _print_resource_claim),
    ("resource.k8s.io", "ResourceSlice"): ([
        _name_col(), _col("Node", "string", "The node providing the resources of this slice."),
        _col("Driver", "string", "The name of the driver that provides the devices."),
        _col("Pool", "string", "The pool the slice belongs to."), _age_col()],
        _simple(lambda o: _dig(o, "spec", "nodeName") or "<none>", lambda o: _dig(o, "spec", "driver") or "",
                lambda o: _dig(o, "spec", "pool", "name") or "")),
    ("discovery.k8s.io", "EndpointSlice"): ([
        _name_col(), _col("AddressType", "string", "The IP protocol for this slice"),
        _col("Ports", "string", "The ports for this slice"),
        _col("Endpoints", "string", "The endpoints for this slice"), _age_col()], _print_endpoint_slice),
    ("autoscaling", "HorizontalPodAutoscaler"): ([
        _name_col(), _col("Reference", "string", "Reference to the scaled resource"),
        _col("Targets", "string", "The metrics and their targets"),
        _col("MinPods", "string", "The lower limit for the number of pods that can be set by the autoscaler, "
                                  "default 1."),
        _col("MaxPods", "integer", "The upper limit for the number of pods that can be set by the autoscaler; "
                                   "cannot be smaller than MinPods."),
        _col("Replicas", "integer", "Current number of replicas of pods managed by this autoscaler."), _age_col()],
        _print_hpa),
    ("certificates.k8s.io", "CertificateSigningRequest"): ([
        _name_col(), _age_col(), _col("SignerName", "string", "Name of the signer that is requested to issue the "
                                                              "certificate."),
        _col("Requestor", "string", "Name of the user who created the request."),
        _col("RequestedDuration", "string", "The requested duration of the certificate."),
        _col("Condition", "string", "The approval and issuance state of the request.")], _print_csr),
    ("networking.k8s.io", "NetworkPolicy"): ([
        _name_col(), _col("Pod-Selector", "string", "Selects the pods to which this NetworkPolicy object applies."),
        _age_col()], _simple(lambda o: _format_label_selector(_dig(o, "spec", "podSelector")))),
    ("networking.k8s.io", "Ingress"): ([
        _name_col(), _col("Class", "string", "The name of the IngressClass resource to use."),
        _col("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
        _col("Address", "string", "Address is a list containing ingress points for the load-balancer"),
        _col("Ports", "string", "Ports of TLS configurations that open"), _age_col()], _print_ingress),
    ("networking.k8s.io", "IngressClass"): ([
        _name_col(), _col("Controller", "string", "Controller that is responsible for handling this class"),
        _col("Parameters", "string", "A reference to a resource with additional parameters"), _age_col()],
        _print_ingress_class),
    ("networking.k8s.io", "ServiceCIDR"): ([
        _name_col(), _col("CIDRs", "string", "Network used to allocate ClusterIPs for Services"), _age_col()],
        _simple(lambda o: ",".join(_dig(o, "spec", "cidrs") or []))),
    ("networking.k8s.io", "IPAddress"): ([
        _name_col(), _col("ParentRef", "string", "The ParentReference of the object using this IPAddress")],
        _print_ip_address),
    ("node.k8s.io", "RuntimeClass"): ([
        _name_col(), _col("Handler", "string", "The name of the CRI handler for this runtime class."), _age_col()],
        _simple(lambda o: o.get("handler", ""))),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): ([
        _name_col(), _col("Validations", "integer", "Validations indicates the number of validation rules "
                                                    "defined in this configuration"),
        _col("ParamKind", "string", "ParamKind specifies the kind of resources used to parameterize this policy"),
        _age_col()], _print_admission_policy),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): ([
        _name_col(), _col("PolicyName", "string", "PolicyName indicates the policy definition which the policy "
                                                  "binding binded to"),
        _col("ParamRef", "string", "ParamRef indicates the param resource which sets the configration param"),
        _age_col()], _print_admission_policy_binding),
    ("apps", "ControllerRevision"): ([
        _name_col(), _col("Controller", "string", "Controller of the object"),
        _col("Revision", "integer", "Revision indicates the revision of the state represented by Data."),
        _age_col()], _print_controller_revision),
})
# LimitRange, DeviceClass and ResourceClaimTemplate print Name and Age (or Created At) upstream.
_PRINTERS[("resource.k8s.io", "DeviceClass")] = ([_name_col(), _age_col()], _simple())
_PRINTERS[("resource.k8s.io", "ResourceClaimTemplate")] = ([_name_col(), _age_col()], _simple())
_PRINTERS[("", "LimitRange")] = ([_name_col(), _col("Created At", "date", CREATION_TIMESTAMP_DESCRIPTION)],
                                 lambda o, now: ([_name(o), _rfc3339(_meta(o).get("creationTimestamp"))], None))


# Kinds with no printer (CRDs, Roles, ClusterRoles, ...) use the generic table convertor.
_DEFAULT_COLUMNS = [_name_col(), _col("Created At", "date", CREATION_TIMESTAMP_DESCRIPTION)]


def _print_default(obj: Obj, now: datetime) -> Row:
    return [_name(obj), _rfc3339(_meta(obj).get("creationTimestamp"))], None


# -- JSONPath (the subset CRD printer columns use) ------------------------------------------------


class JsonPathError(ValueError):
    """A JSONPath expression outside the supported subset, or malformed."""


_MISSING = object()
_TERMINATORS = set(" \t\r\n.,[]$@{}")


def _parse_jsonpath(path: str) -> list[tuple]:
    """Compile ``.a.b[0]['c.d'][*][?(@.x=="y")]..e`` into steps."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    if text.startswith("$"):
        text = text[1:]
    steps: list[tuple] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == ".":
            if text.startswith("..", i):
                steps.append(("recurse",))
                i += 2
                continue
            i += 1
            if i < n and text[i] == "*":
                steps.append(("wildcard",))
                i += 1
                continue
            start = i
            while i < n and text[i] not in _TERMINATORS:
                i += 2 if text[i] == "\\" else 1
            name = text[start:i].replace("\\", "")
            if name:
                steps.append(("field", name))
        elif ch == "[":
            end = _matching_bracket(text, i)
            steps.append(_parse_bracket(text[i + 1:end].strip()))
            i = end + 1
        elif ch in " \t":
            i += 1
        else:
            # Bare field at the start (".spec" written as "spec") is accepted for leniency.
            start = i
            while i < n and text[i] not in _TERMINATORS:
                i += 2 if text[i] == "\\" else 1
            if i == start:
                raise JsonPathError(f"unrecognized character in action: {ch!r}")
            steps.append(("field", text[start:i].replace("\\", "")))
    return steps


def _matching_bracket(text: str, start: int) -> int:
    depth, quote, i = 0, None, start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise JsonPathError("unclosed array expect ]")


_FILTER_RE = re.compile(r"\?\((.*)\)", re.S)
_FILTER_OPS = ("==", "!=", "<=", ">=", "<", ">")


def _parse_bracket(inner: str) -> tuple:
    if inner == "*":
        return ("wildcard",)
    if inner[:1] in "'\"" and inner[-1:] == inner[:1] and len(inner) >= 2:
        return ("field", inner[1:-1])
    match = _FILTER_RE.fullmatch(inner)
    if match:
        return ("filter",) + _parse_filter(match.group(1).strip())
    if ":" in inner:
        parts = inner.split(":")
        if len(parts) > 3:
            raise JsonPathError(f"invalid array index {inner}")
        nums = [int(p) if p.strip() else None for p in parts]
        while len(nums) < 3:
            nums.append(None)
        return ("slice", nums[0], nums[1], nums[2])
    try:
        return ("index", int(inner))
    except ValueError:
        raise JsonPathError(f"invalid array index {inner}") from None


def _parse_filter(expr: str) -> tuple:
    quote = None
    for i, ch in enumerate(expr):
        if quote:
            if ch == quote:
                quote = None
            continue
        if ch in "'\"":
            quote = ch
            continue
        for op in _FILTER_OPS:
            if expr.startswith(op, i):
                return (op, _filter_operand(expr[:i].strip()), _filter_operand(expr[i + len(op):].strip()))
    return ("exists", _filter_operand(expr), None)


def _filter_operand(text: str) -> tuple:
    if text.startswith("@"):
        return ("path", _parse_jsonpath(text[1:]))
    if text[:1] in "'\"" and text[-1:] == text[:1] and len(text) >= 2:
        return ("literal", text[1:-1])
    if text in ("true", "false"):
        return ("literal", text == "true")
    try:
        return ("literal", int(text))
    except ValueError:
        pass
    try:
        return ("literal", float(text))
    except ValueError:
        raise JsonPathError(f"unrecognized filter operand {text!r}") from None


def _apply(steps: list[tuple], nodes: list[Any]) -> list[Any]:
    for step in steps:
        kind = step[0]
        out: list[Any] = []
        if kind == "field":
            for node in nodes:
                if isinstance(node, dict) and step[1] in node:
                    out.append(node[step[1]])
        elif kind == "wildcard":
            for node in nodes:
                if isinstance(node, dict):
                    out.extend(node[k] for k in sorted(node))
                elif isinstance(node, list):
                    out.extend(node)
        elif kind == "index":
            for node in nodes:
                if isinstance(node, list):
                    idx = step[1] + len(node) if step[1] < 0 else step[1]
                    if 0 <= idx < len(node):
                        out.append(node[idx])
        elif kind == "slice":
            for node in nodes:
                if isinstance(node, list):
                    out.extend(node[slice(step[1], step[2], step[3])])
        elif kind == "recurse":
            for node in nodes:
                out.extend(_descendants(node))
        elif kind == "filter":
            op, left, right = step[1], step[2], step[3]
            for node in nodes:
                if isinstance(node, list):
                    out.extend(item for item in node if _filter_passes(op, left, right, item))
        nodes = out
        if not nodes:
            break
    return nodes


def _descendants(node: Any) -> list[Any]:
    found = [node]
    if isinstance(node, dict):
        for key in sorted(node):
            found.extend(_descendants(node[key]))
    elif isinstance(node, list):
        for item in node:
            found.extend(_descendants(item))
    return found


def _operand_values(operand: tuple | None, item: Any) -> list[Any]:
    if operand is None:
        return []
    if operand[0] == "literal":
        return [operand[1]]
    return _apply(operand[1], [item])


def _comparable(a: Any, b: Any) -> bool:
    numeric = (int, float)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, numeric) and isinstance(b, numeric):
        return True
    return isinstance(a, str) and isinstance(b, str)


def _filter_passes(op: str, left: tuple, right: tuple | None, item: Any) -> bool:
    lefts = _operand_values(left, item)
    if op == "exists":
        return bool(lefts)
    rights = _operand_values(right, item)
    if len(lefts) != 1 or len(rights) != 1:
        return False
    a, b = lefts[0], rights[0]
    if not _comparable(a, b):
        return False
    if op == "==":
        return a == b
    if op == "!=":
        return a != b
    if isinstance(a, bool):
        return False
    if op == "<":
        return a < b
    if op == ">":
        return a > b
    if op == "<=":
        return a <= b
    return a >= b


_JSONPATH_CACHE: dict[str, list[tuple]] = {}


def evaluate_jsonpath(path: str, obj: Any) -> list[Any]:
    """All values ``path`` selects in ``obj`` (missing keys select nothing rather than fail).

    Supports ``.field`` (``\\.`` escapes a dot inside a key), ``['key']``, ``[n]``/``[-n]``,
    ``[a:b:c]``, ``[*]``/``.*``, ``..field`` and filters ``[?(@.a.b == "x")]`` with
    ``== != < > <= >=`` or bare existence ``[?(@.a)]``. Raises :class:`JsonPathError` for
    syntax outside that subset.
    """
    steps = _JSONPATH_CACHE.get(path)
    if steps is None:
        steps = _parse_jsonpath(path)
        _JSONPATH_CACHE[path] = steps
    return _apply(steps, [obj])


def _go_float(value: float) -> str:
    """A float64 as Go's ``%v`` prints it: shortest digits, exponent form below 1e-4 or from 1e6 up."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1, value) < 0 else "0"
    sign = "-" if value < 0 else ""
    mantissa, _, exp_text = repr(abs(value)).partition("e")
    int_part, _, frac_part = mantissa.partition(".")
    digits = (int_part + frac_part).lstrip("0")
    # Decimal exponent of the first significant digit.
    if int_part.strip("0"):
        exp = len(int_part.lstrip("0")) - 1
    else:
        exp = -(len(frac_part) - len(frac_part.lstrip("0"))) - 1
    exp += int(exp_text) if exp_text else 0
    digits = digits.rstrip("0") or "0"
    if exp < -4 or exp >= 6:
        head, tail = digits[0], digits[1:]
        body = head + ("." + tail if tail else "")
        return f"{sign}{body}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if exp < 0:
        return f"{sign}0.{'0' * (-exp - 1)}{digits}"
    if len(digits) <= exp + 1:
        return sign + digits + "0" * (exp + 1 - len(digits))
    return f"{sign}{digits[:exp + 1]}.{digits[exp + 1:]}"


def _text_cell(value: Any) -> str:
    """How JSONPath prints one result: strings raw, maps/lists as compact JSON, scalars Go-style."""
    if value is None:
        return "<no value>"
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _go_float(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _typed_cell(col_type: str, value: Any, now: datetime) -> Any:
    """``cellForJSONValue``: the value as the column's type, or None when it does not fit."""
    if value is None:
        return None
    if col_type == "integer":
        if isinstance(value, bool):
            return None
        if isinstance(value, int):
            return value
        if isinstance(value, float):
            return int(value)
        return None
    if col_type == "number":
        if isinstance(value, bool):
            return None
        if isinstance(value, (int, float)):
            return float(value)
        return None
    if col_type == "boolean":
        return value if isinstance(value, bool) else None
    if col_type == "string":
        return value if isinstance(value, str) else None
    if col_type == "date":
        if not isinstance(value, str):
            return None
        if value in ("", "null"):
            return "<unknown>"
        ts = _parse_time(value)
        if ts is None:
            return "<invalid>"
        return human_duration((now - ts).total_seconds())
    return None


_DEFAULT_CR_COLUMNS = [{"name": "Age", "type": "date", "description": CREATION_TIMESTAMP_DESCRIPTION,
                        "jsonPath": ".metadata.creationTimestamp"}]


def _custom_columns(printer_columns: list[Obj]) -> tuple[list[Obj], list[tuple[str, str]]]:
    columns = printer_columns or _DEFAULT_CR_COLUMNS
    definitions = [_name_col()]
    paths: list[tuple[str, str]] = []
    for col in columns:
        path = col.get("jsonPath", "")
        definitions.append({
            "name": col.get("name", ""),
            "type": col.get("type", "string"),
            "format": col.get("format", ""),
            "description": col.get("description") or f"Custom resource definition column (in JSONPath format): {path}",
            "priority": _int(col.get("priority")),
        })
        paths.append((path, col.get("type", "string")))
    return definitions, paths


def _custom_row(obj: Obj, paths: list[tuple[str, str]], now: datetime) -> Row:
    cells: list[Any] = [_name(obj)]
    for path, col_type in paths:
        try:
            results = evaluate_jsonpath(path, obj)
        except (ValueError, TypeError):
            # Malformed paths (JsonPathError is a ValueError) print as an empty cell.
            results = []
        if not results:
            cells.append(None)
        elif col_type == "string":
            cells.append(_text_cell(results[0]))
        else:
            cells.append(_typed_cell(col_type, results[0], now))
    return cells, None


# -- entry point --------------------------------------------------------------------------------


def _row_object(obj: Obj, include_object: str) -> Obj | None:
    if include_object == "Object":
        return obj
    if include_object == "None":
        return None
    # PartialObjectMetadata is what kubectl reads labels/namespace from (--show-labels, -L, -A).
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata") or {}}


def to_table(group: str, kind: str, objects: list[Obj], *, printer_columns: list[Obj] | None,
             include_object: str = "Metadata", now: datetime | None = None, list_meta: Obj,
             no_headers: bool = False) -> Obj:
    """Render ``objects`` of ``group``/``kind`` as a ``meta.k8s.io/v1 Table``.

    ``printer_columns`` are a CRD version's ``additionalPrinterColumns``; pass ``[]`` for a custom
    resource whose CRD has none (Name + Age), ``None`` for built-in kinds. A ``None`` for a kind
    outside the built-in API groups is treated as a custom resource too.
    ``include_object`` is the ``includeObject`` query parameter: ``Metadata`` (default, also
    ``""``) embeds ``PartialObjectMetadata``, ``Object`` the full object, ``None`` nothing; any
    other value is a 400. ``no_headers`` (``TableOptions.noHeaders``) leaves out column
    definitions, as watch events after the first may.
    """
    if include_object not in INCLUDE_OBJECT_VALUES:
        raise errors.bad_request(f'unrecognized includeObject value: "{include_object}"')
    now = now or datetime.now(timezone.utc)
    printer: Printer
    if printer_columns is not None or group not in BUILTIN_GROUPS:
        columns, paths = _custom_columns(printer_columns or [])

        def printer(obj: Obj, when: datetime) -> Row:
            return _custom_row(obj, paths, when)
    elif (group, kind) in _PRINTERS:
        columns, printer = _PRINTERS[(group, kind)]
    else:
        columns, printer = _DEFAULT_COLUMNS, _print_default
    rows = []
    for obj in objects:
        cells, conditions = printer(obj, now)
        row: Obj = {"cells": cells}
        if conditions:
            row["conditions"] = conditions
        row["object"] = _row_object(obj, include_object)
        rows.append(row)
    table: Obj = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta}
    if not no_headers:
        table["columnDefinitions"] = [dict(c) for c in columns]
    table["rows"] = rows
    return table
