"""RemovePodsViolatingTopologySpreadConstraint (Balance): evict pods so topology domains end within maxSkew.

Per namespace, every distinct topology spread constraint of its pods (``DoNotSchedule`` ones by
default; ``constraints`` may add ``ScheduleAnyway``) is checked over the round's nodes: domains are the
values of ``topologyKey`` on the nodes (empty domains count), each holding the namespace's pods that
match the constraint's selector. When the largest and smallest domains differ by more than
``maxSkew``, pods move from the largest domains towards the smallest, never taking a big domain below
the ideal average nor raising a small one above it, at most half the excess skew per step. In each
domain pods the evictor refuses are kept first, then pods with a nodeSelector/node affinity, then by
descending priority, so the lowest-priority unconstrained pods go first. With
``topologyBalanceNodeFit`` (default) a chosen pod is only evicted when it fits a node of a domain
below the average. Simplification: nodeAffinityPolicy/nodeTaintsPolicy and matchLabelKeys are not
applied when counting.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Mapping

from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict
from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, Handle, Obj, Status
from koordinator_roles.descheduler.framework.nodefit import TERMINAL_PHASES, NodeFit, node_labels

from .args import ArgsReader, Namespaces
from .podutil import PodSelection, evict, meta, node_name, pod_priority, spec, status, watch_pods

NAME = "RemovePodsViolatingTopologySpreadConstraint"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"


@dataclass(frozen=True)
class TopologySpreadArgs:
    """``RemovePodsViolatingTopologySpreadConstraintArgs`` with upstream defaults."""

    namespaces: Namespaces = Namespaces()
    label_selector: LabelSelector | None = None
    constraints: tuple[str, ...] = (DO_NOT_SCHEDULE,)
    topology_balance_node_fit: bool = True


def parse_args(raw: Mapping[str, Any] | None) -> TopologySpreadArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("namespaces", "labelSelector", "constraints", "topologyBalanceNodeFit",
                               "includeSoftConstraints"))
    namespaces, selector = r.namespaces(), r.label_selector()
    constraints = r.strings("constraints") or (DO_NOT_SCHEDULE,)
    r.one_of("constraints", constraints, (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY), what="constraints")
    if r.bool("includeSoftConstraints") and SCHEDULE_ANYWAY not in constraints:
        constraints += (SCHEDULE_ANYWAY,)  # the older spelling of constraints: [.., ScheduleAnyway]
    args = TopologySpreadArgs(namespaces, selector, tuple(dict.fromkeys(constraints)),
                              r.bool("topologyBalanceNodeFit", True))
    r.finish()
    return args


def _has_selector_or_affinity(pod: Mapping[str, Any]) -> bool:
    s = spec(pod)
    return s.get("nodeSelector") is not None or (s.get("affinity") or {}).get("nodeAffinity") is not None


class RemovePodsViolatingTopologySpreadConstraint(BalancePlugin):
    """Evicts pods from the domains that make a topology spread constraint exceed its maxSkew."""

    name = NAME

    def __init__(self, args: TopologySpreadArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.selection = PodSelection(handle, args.namespaces, args.label_selector)
        watch_pods(handle)

    def balance(self, nodes: list[Obj]) -> Status | None:
        """One Balance round over the profile's ready nodes."""
        node_map = {node_name(n): n for n in nodes}

        def counted(pod: Obj) -> bool:
            """Running or pending, not being deleted, in a namespace the plugin processes."""
            return (not meta(pod).get("deletionTimestamp") and status(pod).get("phase") not in TERMINAL_PHASES
                    and self.args.namespaces.allows(meta(pod).get("namespace", "")))

        by_namespace: dict[str, list[Obj]] = {}
        for name in node_map:
            for pod in self.handle.pods_on_node(name, counted):
                by_namespace.setdefault(meta(pod).get("namespace", ""), []).append(pod)
        fit = NodeFit(self.handle, nodes)
        chosen: dict[int, Obj] = {}
        for ns in sorted(by_namespace):
            pods = by_namespace[ns]
            for constraint in self._constraints(pods):
                self._balance_constraint(constraint, pods, nodes, node_map, fit, chosen)
        for pod in chosen.values():
            name = spec(pod).get("nodeName", "")
            if self.handle.evictor.node_limit_exceeded(name) or not self.selection(pod):
                continue
            evict(self.handle, pod, NAME, "pod's topology domain exceeds the maxSkew of a topology spread "
                                          "constraint")
        return None

    def _constraints(self, pods: list[Obj]) -> list[Mapping[str, Any]]:
        seen: dict[str, Mapping[str, Any]] = {}
        for pod in pods:
            for c in spec(pod).get("topologySpreadConstraints") or ():
                if (c.get("whenUnsatisfiable") or DO_NOT_SCHEDULE) in self.args.constraints:
                    seen.setdefault(json.dumps(c, sort_keys=True), c)
        return list(seen.values())

    def _balance_constraint(self, constraint: Mapping[str, Any], pods: list[Obj], nodes: list[Obj],
                            node_map: Mapping[str, Obj], fit: NodeFit, chosen: dict[int, Obj]) -> None:
        key = constraint.get("topologyKey") or ""
        max_skew = int(constraint.get("maxSkew") or 1)
        try:
            selector = label_selector_from_dict(constraint.get("labelSelector"))
        except SelectorError:
            return  # the API server rejects such pods; nothing sensible to count
        domains: dict[str, list[Obj]] = {}
        for n in nodes:
            value = node_labels(n).get(key)
            if value is not None:
                domains.setdefault(value, [])
        total = 0
        for pod in pods:
            if not selector.matches(meta(pod).get("labels") or {}):
                continue
            value = node_labels(node_map[spec(pod)["nodeName"]]).get(key)
            if value is None:
                continue
            domains[value].append(pod)
            total += 1
        if not domains:
            return
        sizes = [len(v) for v in domains.values()]
        if max(sizes) - min(sizes) <= max_skew:
            return
        ideal = total / len(domains)
        # Each domain's pods: the ones to keep first, the first to evict at the end.
        for members in domains.values():
            members.sort(key=lambda p: (self.selection(p), not _has_selector_or_affinity(p), -pod_priority(p)))
        order = sorted(domains, key=lambda v: len(domains[v]))
        # Where moved pods could go: the nodes of the domains below the average (before any move).
        below = [n for n in nodes if (v := node_labels(n).get(key)) is not None and len(domains[v]) < ideal]
        i, j = 0, len(order) - 1
        while i < j:
            big, small = domains[order[j]], domains[order[i]]
            if len(big) <= ideal:
                j -= 1  # it cannot give without falling below the average
                continue
            skew = len(big) - len(small)
            if skew <= max_skew:
                i += 1
                continue
            move = int(min(math.ceil(len(big) - ideal), math.ceil(ideal - len(small)),
                           math.ceil((skew - max_skew) / 2)))
            if move <= 0:
                i += 1
                continue
            moving = big[len(big) - move:]
            del big[len(big) - move:]
            # Counted as moved even when they stay (they fit nowhere else), so the loop ends.
            small.extend(moving)
            for pod in moving:
                if self.args.topology_balance_node_fit and not any(
                        fit.fits(pod, n) for n in below if node_name(n) != spec(pod).get("nodeName")):
                    continue
                chosen[id(pod)] = pod


def new(args: Mapping[str, Any] | None, handle: Handle) -> RemovePodsViolatingTopologySpreadConstraint:
    """Factory for the registry."""
    return RemovePodsViolatingTopologySpreadConstraint(parse_args(args), handle)
