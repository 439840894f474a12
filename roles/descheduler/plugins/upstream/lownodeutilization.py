"""LowNodeUtilization (Balance): move pods from over-utilized nodes while under-utilized nodes have room.

Requests-based. A node is under-utilized when every resource is at or below ``thresholds`` (and it is
schedulable), over-utilized when any resource is above ``targetThresholds``; with
``useDeviationThresholds`` both are offsets below/above the nodes' average utilization. Nothing happens
unless more than ``numberOfNodes`` nodes are under-utilized, not all nodes are, and some node is
over-utilized. Pods leave the most used nodes first (lowest priority, BestEffort first) until the node
drops to its target or the under-utilized nodes' room up to ``targetThresholds`` is used up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, Handle, Obj, Status

from .args import ArgsReader, Namespaces
from .nodeutilization import (NodeUsage, evict_from_sources, evictable_namespaces, node_usages, parse_thresholds,
                              schedulable, with_defaults)
from .podutil import watch_pods

NAME = "LowNodeUtilization"


@dataclass(frozen=True)
class LowNodeUtilizationArgs:
    """``LowNodeUtilizationArgs`` (metricsUtilization is not supported: usage is requests-based)."""

    thresholds: Mapping[str, float]
    target_thresholds: Mapping[str, float]
    use_deviation_thresholds: bool = False
    number_of_nodes: int = 0
    evictable_namespaces: Namespaces = Namespaces()


def parse_args(raw: Mapping[str, Any] | None) -> LowNodeUtilizationArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("thresholds", "targetThresholds", "useDeviationThresholds", "numberOfNodes",
                               "evictableNamespaces"))
    low = parse_thresholds(r, "thresholds")
    high = parse_thresholds(r, "targetThresholds")
    if set(low) != set(high):
        missing = sorted(set(low) ^ set(high))[0]
        raise r.error("thresholds", f"thresholds and targetThresholds configured different resources "
                                    f"({missing!r} is only in one of them)")
    for resource, value in low.items():
        if value > high[resource]:
            raise r.error(f"thresholds.{resource}", f"{value:g} is above targetThresholds.{resource} "
                                                    f"{high[resource]:g}")
    deviation = r.bool("useDeviationThresholds")
    default = 0.0 if deviation else 100.0
    args = LowNodeUtilizationArgs(with_defaults(low, default), with_defaults(high, default), deviation,
                                  r.int("numberOfNodes", 0, minimum=0), evictable_namespaces(r))
    r.finish()
    return args


class LowNodeUtilization(BalancePlugin):
    """Balances requested resources from over- to under-utilized nodes."""

    name = NAME

    def __init__(self, args: LowNodeUtilizationArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.resources = tuple(sorted(args.thresholds))
        watch_pods(handle)

    def thresholds(self, usages: list[NodeUsage]) -> tuple[dict[str, float], dict[str, float]]:
        """(low, high) percentages per resource, made absolute around the average with deviation thresholds."""
        low, high = dict(self.args.thresholds), dict(self.args.target_thresholds)
        if self.args.use_deviation_thresholds and usages:
            for r in self.resources:
                avg = sum(u.percent(r) for u in usages) / len(usages)
                low[r] = min(100.0, max(0.0, avg - low[r]))
                high[r] = min(100.0, max(0.0, avg + high[r]))
        return low, high

    def balance(self, nodes: list[Obj]) -> Status | None:
        """One Balance round over the profile's ready nodes."""
        usages = node_usages(self.handle, nodes, self.resources)
        low, high = self.thresholds(usages)
        under = [u for u in usages if schedulable(u) and all(u.percent(r) <= low[r] for r in self.resources)]
        over = [u for u in usages if any(u.percent(r) > high[r] for r in self.resources)]
        if not under or len(under) <= self.args.number_of_nodes or len(under) == len(usages) or not over:
            return None
        available = {r: sum(max(0.0, u.amount(r, high[r]) - u.usage[r]) for u in under) for r in self.resources}
        over.sort(key=lambda u: sum(u.percent(r) for r in self.resources), reverse=True)
        evict_from_sources(
            self.handle, NAME, over, available, self.resources, self.args.evictable_namespaces,
            keep_going=lambda u: any(u.percent(r) > high[r] for r in self.resources),
            reason=lambda u: f"node {u.name} is above targetThresholds")
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> LowNodeUtilization:
    """Factory for the registry."""
    return LowNodeUtilization(parse_args(args), handle)
