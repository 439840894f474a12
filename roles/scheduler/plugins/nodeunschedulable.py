"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take only pods tolerating
``node.kubernetes.io/unschedulable:NoSchedule``."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from koordinator_roles.scheduler.framework.interfaces import (BatchFilterResult, ClusterEvent, EnqueueExtensions, Failure,
                                                              FilterPlugin)
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator.apis.taints import tolerates

NAME = "NodeUnschedulable"
ERR_REASON = "node(s) were unschedulable"
_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _tolerates_unschedulable(pod: Mapping[str, Any]) -> bool:
    return tolerates((pod.get("spec") or {}).get("tolerations"), _UNSCHEDULABLE_TAINT)


class NodeUnschedulable(FilterPlugin, EnqueueExtensions):
    """Filter rejecting cordoned nodes (UnschedulableAndUnresolvable)."""

    name = NAME

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if node.unschedulable and not pod.cached(NAME, _tolerates_unschedulable):
            return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)
        return None

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        if not snapshot.unschedulable_rows:
            return BatchFilterResult.all_pass(len(rows))
        cordoned = snapshot.unschedulable[rows]
        if not cordoned.any() or pod.cached(NAME, _tolerates_unschedulable):
            return BatchFilterResult.all_pass(len(rows))
        return BatchFilterResult(~cordoned, [Failure(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON, cordoned)])

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add", _node_hint), ClusterEvent("Node", "Update", _node_hint)]


def _node_hint(pod: dict, old: Any, new: Any) -> bool:
    """Helps when the node is (now) schedulable for the pod and was not before."""
    if new is None:
        return False

    def ok(node: Mapping[str, Any] | None) -> bool:
        return not ((node or {}).get("spec") or {}).get("unschedulable") or _tolerates_unschedulable(pod)

    return ok(new) and (old is None or not ok(old))


def new(args: dict | None, handle: Any) -> NodeUnschedulable:
    """Registry factory (the plugin has no args)."""
    return NodeUnschedulable()
