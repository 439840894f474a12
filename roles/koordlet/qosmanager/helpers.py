"""Shared inputs of the QoS strategies (reference A.7.1): node reservation, non-BE usage, pinned CPUs.

Functions of plain data (Node and Pod dicts, usage maps), so each is testable alone. CPU amounts are
milli-cores unless a name says otherwise.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Callable, Iterable, Mapping

from koordinator.apis import quantity
from koordinator.apis.extension import (ANNOTATION_RESOURCE_STATUS, KUBE_BEST_EFFORT, QOS_BE, kube_qos_class,
                                        qos_class)
from koordinator_roles.koordlet.system.cpuset import parse_cpuset

log = logging.getLogger("koordinator.koordlet.qosmanager")

Obj = dict[str, Any]

ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def _json_annotation(obj: Mapping[str, Any] | None, key: str) -> Obj:
    """A JSON-object annotation, ``{}`` when absent; a malformed one is logged and treated as absent."""
    raw = _annotations(obj).get(key)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        log.warning("annotation %s is not JSON: %r; ignored", key, raw)
        return {}
    if not isinstance(value, dict):
        log.warning("annotation %s is not a JSON object: %r; ignored", key, raw)
        return {}
    return value


def _cpuset_field(value: Any, what: str) -> set[int]:
    if not value:
        return set()
    try:
        return set(parse_cpuset(value, what))
    except ValueError as err:
        log.warning("%s; ignored", err)
        return set()


def node_capacity_milli_cpu(node: Mapping[str, Any]) -> int:
    """``status.capacity.cpu`` in milli-cores (capacity, not allocatable: A.7.2 step 3); 0 when absent."""
    cap = ((node.get("status") or {}).get("capacity") or {}).get("cpu")
    return quantity.milli_value(cap) if cap is not None else 0


def node_reserved_cpus(node: Mapping[str, Any]) -> set[int]:
    """The CPUs listed in ``node.koordinator.sh/reservation`` ``reservedCPUs`` (empty when none)."""
    return _cpuset_field(_json_annotation(node, ANNOTATION_NODE_RESERVATION).get("reservedCPUs"),
                         f"node annotation {ANNOTATION_NODE_RESERVATION} reservedCPUs")


def node_reserved_milli_cpu(node: Mapping[str, Any]) -> int:
    """koordlet's node reserved CPU: max(kubelet reserved = capacity − allocatable, the annotation's),
    where the annotation's ``reservedCPUs`` count overrides its ``resources.cpu``."""
    status = node.get("status") or {}
    cap = (status.get("capacity") or {}).get("cpu")
    alloc = (status.get("allocatable") or {}).get("cpu")
    kubelet = 0
    if cap is not None and alloc is not None:
        kubelet = max(quantity.milli_value(cap) - quantity.milli_value(alloc), 0)
    reservation = _json_annotation(node, ANNOTATION_NODE_RESERVATION)
    annotated = 0
    cpus = node_reserved_cpus(node)
    if cpus:
        annotated = len(cpus) * 1000
    else:
        cpu = (reservation.get("resources") or {}).get("cpu")
        if cpu is not None:
            try:
                annotated = quantity.milli_value(cpu)
            except ValueError as err:
                log.warning("node annotation %s resources.cpu %r: %s; ignored", ANNOTATION_NODE_RESERVATION, cpu, err)
    return max(kubelet, annotated)


def system_qos_exclusive_cpus(node: Mapping[str, Any]) -> set[int]:
    """CPUs of ``node.koordinator.sh/system-qos-resource`` when exclusive (``cpusetExclusive`` defaults to true)."""
    res = _json_annotation(node, ANNOTATION_SYSTEM_QOS_RESOURCE)
    if res.get("cpusetExclusive") is False:
        return set()
    return _cpuset_field(res.get("cpuset"), f"node annotation {ANNOTATION_SYSTEM_QOS_RESOURCE} cpuset")


def pod_cpuset(pod: Mapping[str, Any]) -> set[int]:
    """The CPUs the scheduler bound the pod to (``scheduling.koordinator.sh/resource-status`` ``cpuset``)."""
    return _cpuset_field(_json_annotation(pod, ANNOTATION_RESOURCE_STATUS).get("cpuset"),
                         f"pod annotation {ANNOTATION_RESOURCE_STATUS} cpuset")


def is_non_be_pod(pod: Mapping[str, Any]) -> bool:
    """NonBE pod filter: QoS label ≠ BE and Kubernetes QoS ≠ BestEffort."""
    return qos_class(pod) != QOS_BE and kube_qos_class(pod) != KUBE_BEST_EFFORT


def is_non_be_host_app(app: Mapping[str, Any]) -> bool:
    """NonBE host-application filter: not (qos BE and cgroupPath.base KubepodsBesteffort)."""
    base = (app.get("cgroupPath") or {}).get("base") if isinstance(app.get("cgroupPath"), Mapping) else None
    return not (app.get("qos") == QOS_BE and base == "KubepodsBesteffort")


def calculate_filter_pods_used(node_used: float, node_reserved: float, pods: Iterable[Mapping[str, Any]],
                               pod_used: Mapping[str, float], host_apps: Iterable[Mapping[str, Any]],
                               host_app_used: Mapping[str, float],
                               pod_filter: Callable[[Mapping[str, Any]], bool],
                               host_app_filter: Callable[[Mapping[str, Any]], bool]) -> tuple[float, float, float]:
    """``CalculateFilterPodsUsed`` (A.7.1): ``(pods_filtered, host_apps_filtered, system)``.

    ``pod_used`` maps pod UID → usage, ``host_app_used`` host-app name → usage. Pods with a usage
    but not in ``pods`` count as filtered (unknown pods are assumed to matter). System usage is
    max(node − all pods − all host apps, 0, node reserved).
    """
    by_uid = {((p.get("metadata") or {}).get("uid")): p for p in pods}
    pods_all = pods_filter = 0.0
    for uid, used in pod_used.items():
        pods_all += used
        pod = by_uid.get(uid)
        if pod is None or pod_filter(pod):
            pods_filter += used
    apps_all = apps_filter = 0.0
    for app in host_apps:
        used = host_app_used.get(app.get("name", ""))
        if used is None:
            continue
        apps_all += used
        if host_app_filter(app):
            apps_filter += used
    system = max(node_used - pods_all - apps_all, 0.0, node_reserved)
    return pods_filter, apps_filter, system
