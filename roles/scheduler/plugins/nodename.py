"""NodeName: a pod that names a node (``spec.nodeName``) fits only that node."""

from __future__ import annotations

from typing import Any

import numpy as np

from koordinator_roles.scheduler.framework.interfaces import (BatchFilterResult, ClusterEvent, EnqueueExtensions, Failure,
                                                              FilterPlugin, PreFilterPlugin, PreFilterResult)
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo

NAME = "NodeName"
ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    """Filter rejecting every node but ``spec.nodeName`` (UnschedulableAndUnresolvable)."""

    name = NAME

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Any) -> tuple[PreFilterResult | None, Status | None]:
        # No PreFilterResult: narrowing the nodes would replace kube's per-node reason with
        # "didn't satisfy plugin"; the batch filter is a single comparison anyway.
        if not pod.node_name:
            return None, Status.skip()
        return None, None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not pod.node_name or pod.node_name == node.name:
            return None
        return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON)

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        if not pod.node_name:
            return BatchFilterResult.all_pass(len(rows))
        passed = rows == snapshot.index.get(pod.node_name, -1)
        return BatchFilterResult(passed, [Failure(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON, ~passed)])

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add", _node_added_hint)]


def _node_added_hint(pod: dict, old: Any, new: Any) -> bool:
    wanted = (pod.get("spec") or {}).get("nodeName") or ""
    return new is not None and (not wanted or ((new.get("metadata") or {}).get("name") == wanted))


def new(args: dict | None, handle: Any) -> NodeName:
    """Registry factory (the plugin has no args)."""
    return NodeName()
