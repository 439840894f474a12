"""Which nodes a scale-down should empty first, and in which order their pods go (reference §1.8).

Per node, pods split into *eligible* targets (in scope and evictable), *skipped* targets (in scope but refused
by the evictor's Filter: they must not be chosen) and *non-targets* (out of scope). A node's evacuation score
is the weighted share of what stays (non-targets + skipped) over the weighted share of what could go
(eligible), in milli units: the lower, the cheaper the node is to empty.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from koordinator.apis.extension import pod_requests
from koordinator.apis.timestamps import parse_time
from koordinator_roles.descheduler.framework.podscope import Obj, allocatable, node_name

INFINITE_SCORE = math.inf


def weighted_share(requests: Mapping[str, int], alloc: Mapping[str, int], weights: Mapping[str, float]) -> float:
    """``Σ_r w_r · requests[r] / alloc[r]`` over the weighted resources the node offers."""
    return sum(w * requests.get(r, 0) / alloc[r] for r, w in weights.items() if alloc.get(r, 0) > 0)


def evacuation_score(staying: float, movable: float) -> float:
    """``staying / movable`` in milli units (rounded down); 0 when both are 0, +Inf when only ``staying`` is."""
    if movable <= 0:
        return 0 if staying <= 0 else INFINITE_SCORE
    return math.floor(staying * 1000 / movable)


def _total(pods: Iterable[Obj]) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in pods:
        for r, v in pod_requests(p).items():
            out[r] = out.get(r, 0) + v
    return out


@dataclass
class NodePlan:
    """One node's pods by class, its score, and its eligible pods in eviction order."""

    name: str
    score: float
    eligible: list[Obj] = field(default_factory=list)
    skipped: list[Obj] = field(default_factory=list)

    def sort_key(self) -> tuple:
        """Nodes: score asc, then fewer eligible pods first, then name."""
        return (self.score, len(self.eligible), self.name)


def pod_order(pods: list[Obj], alloc: Mapping[str, int], weights: Mapping[str, float]) -> list[Obj]:
    """Bigger pods first (weighted share of the node), then the newer, then namespace and name ascending."""

    def key(pod: Obj) -> tuple:
        meta = pod.get("metadata") or {}
        created = parse_time(meta.get("creationTimestamp")) or 0.0
        return (-weighted_share(pod_requests(pod), alloc, weights), -created, meta.get("namespace", ""),
                meta.get("name", ""))

    return sorted(pods, key=key)


def plan_node(node: Obj, pods: list[Obj], in_scope: Callable[[Obj], bool], evictable: Callable[[Obj], bool],
              weights: Mapping[str, float]) -> NodePlan | None:
    """The node's plan, or None when none of its pods is an eligible target."""
    eligible, skipped, others = [], [], []
    for pod in pods:
        if not in_scope(pod):
            others.append(pod)
        elif evictable(pod):
            eligible.append(pod)
        else:
            skipped.append(pod)
    if not eligible:
        return None
    alloc = allocatable(node)
    staying = weighted_share(_total([*others, *skipped]), alloc, weights)
    movable = weighted_share(_total(eligible), alloc, weights)
    return NodePlan(node_name(node), evacuation_score(staying, movable), pod_order(eligible, alloc, weights),
                    skipped)


def rank(plans: list[NodePlan]) -> list[NodePlan]:
    """The plans in the order their nodes should be emptied."""
    return sorted(plans, key=NodePlan.sort_key)
