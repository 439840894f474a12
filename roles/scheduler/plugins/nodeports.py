"""NodePorts: a pod's host ports must be free on the node (kube's ``HostPortInfo`` conflict rules)."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from koordinator_roles.scheduler.framework.interfaces import (BatchFilterResult, ClusterEvent, EnqueueExtensions, Failure,
                                                              FilterPlugin, PreFilterPlugin, PreFilterResult)
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE, CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo

NAME = "NodePorts"
ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
_ANY_IP = "0.0.0.0"


def port_conflicts(used_ports: Mapping[tuple[str, int], set[str]], ip: str, protocol: str, port: int) -> bool:
    """Whether (ip, protocol, port) clashes with ``used_ports`` ({(protocol, port): host IPs}).

    0.0.0.0 on either side clashes with every IP of the same protocol and port; two specific IPs
    clash only when equal.
    """
    if port <= 0:
        return False
    ips = used_ports.get((protocol or "TCP", port))
    if not ips:
        return False
    ip = ip or _ANY_IP
    return ip == _ANY_IP or ip in ips or _ANY_IP in ips


def fits_ports(wanted: Iterable[tuple[str, str, int]], used_ports: Mapping[tuple[str, int], set[str]]) -> bool:
    return not any(port_conflicts(used_ports, ip, protocol, port) for ip, protocol, port in wanted)


class NodePorts(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Filter rejecting nodes where one of the pod's host ports is taken (Unschedulable)."""

    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Any) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.host_ports:
            return None, Status.skip()
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not pod.host_ports or not node.used_ports or fits_ports(pod.host_ports, node.used_ports):
            return None
        return Status(UNSCHEDULABLE, ERR_REASON)

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        wanted = pod.host_ports
        if not wanted:
            return BatchFilterResult.all_pass(len(rows))
        infos = snapshot.node_infos
        # Only nodes with host ports in use can conflict; most have none.
        passed = np.fromiter((not infos[r].used_ports or fits_ports(wanted, infos[r].used_ports)
                              for r in rows.tolist()), dtype=bool, count=len(rows))
        return BatchFilterResult(passed, [Failure(UNSCHEDULABLE, ERR_REASON, ~passed)])

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete", _pod_deleted_hint), ClusterEvent("Node", "Add"),
                ClusterEvent("Node", "Update")]


def _host_ports(pod: Mapping[str, Any]) -> list[tuple[str, str, int]]:
    return PodInfo(pod).host_ports


def _pod_deleted_hint(pod: dict, old: Any, new: Any) -> bool:
    """A deleted scheduled pod frees ports; it helps only if one of them is a port this pod wants."""
    if old is None or not (old.get("spec") or {}).get("nodeName"):
        return False
    freed: dict[tuple[str, int], set[str]] = {}
    for ip, protocol, port in _host_ports(old):
        freed.setdefault((protocol, port), set()).add(ip)
    return any(port_conflicts(freed, ip, protocol, port) for ip, protocol, port in _host_ports(pod))


def new(args: dict | None, handle: Any) -> NodePorts:
    """Registry factory (the plugin has no args)."""
    return NodePorts()
