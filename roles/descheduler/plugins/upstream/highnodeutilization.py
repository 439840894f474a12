"""HighNodeUtilization (Balance): empty under-utilized nodes so the cluster packs onto fewer nodes.

Requests-based. Nodes with every resource at or below ``thresholds`` are sources; the other
schedulable nodes are destinations. Unless no more than ``numberOfNodes`` (or all) nodes are sources,
or there is no destination, pods leave the least used sources first (lowest priority, BestEffort first)
while the destinations' free allocatable lasts for every resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, Handle, Obj, Status

from .args import ArgsReader, Namespaces
from .nodeutilization import (evict_from_sources, evictable_namespaces, node_usages, parse_thresholds, schedulable,
                              with_defaults)
from .podutil import watch_pods

NAME = "HighNodeUtilization"


@dataclass(frozen=True)
class HighNodeUtilizationArgs:
    """``HighNodeUtilizationArgs``."""

    thresholds: Mapping[str, float]
    number_of_nodes: int = 0
    evictable_namespaces: Namespaces = Namespaces()


def parse_args(raw: Mapping[str, Any] | None) -> HighNodeUtilizationArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("thresholds", "numberOfNodes", "evictableNamespaces"))
    thresholds = with_defaults(parse_thresholds(r, "thresholds"), 100.0)
    args = HighNodeUtilizationArgs(thresholds, r.int("numberOfNodes", 0, minimum=0), evictable_namespaces(r))
    r.finish()
    return args


class HighNodeUtilization(BalancePlugin):
    """Evicts pods off under-utilized nodes while other nodes have room for them."""

    name = NAME

    def __init__(self, args: HighNodeUtilizationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.resources = tuple(sorted(args.thresholds))
        watch_pods(handle)

    def balance(self, nodes: list[Obj]) -> Status | None:
        """One Balance round over the profile's ready nodes."""
        usages = node_usages(self.handle, nodes, self.resources)
        t = self.args.thresholds
        sources = [u for u in usages if all(u.percent(r) <= t[r] for r in self.resources)]
        source_ids = {id(u) for u in sources}
        targets = [u for u in usages if id(u) not in source_ids and schedulable(u)]
        if not sources or len(sources) <= self.args.number_of_nodes or len(sources) == len(usages) or not targets:
            return None
        available = {r: sum(max(0.0, u.allocatable[r] - u.usage[r]) for u in targets) for r in self.resources}
        sources.sort(key=lambda u: sum(u.percent(r) for r in self.resources))
        evict_from_sources(self.handle, NAME, sources, available, self.resources, self.args.evictable_namespaces,
                           keep_going=lambda u: True, reason=lambda u: f"node {u.name} is under-utilized")
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> HighNodeUtilization:
    """Factory for the registry."""
    return HighNodeUtilization(parse_args(args), handle)
