"""One node pool's round (reference §1.6.4 steps 2–6 and §1.6.5): classify, debounce, budget, evict.

:class:`PoolRound` holds a round's state for one pool; :func:`run_pool` drives it. Everything the
round needs from outside (NodeMetrics, pods, the evictor, detectors, the clock) comes in through
:class:`RoundContext`, so the algorithm is plain code over plain objects.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Callable

from koordinator_roles.descheduler.framework.interfaces import EvictOptions, Evictor

from . import nodefit
from .args import NodePool
from .detector import DetectorCache
from .firstfit import FirstFit
from .podorder import sort_pods
from .thresholds import NodeThresholds, PoolThresholds, node_thresholds, normalize, percent_of
from .usage import PODS, Amounts, NodeUsage, Obj, collect, pod_key

log = logging.getLogger(__name__)

PodFilter = Callable[[Obj], bool]


@dataclass
class RoundContext:
    """What one pool round uses from the plugin."""

    plugin_name: str
    evictor: Evictor
    pod_filter: PodFilter
    metric_of: Callable[[str], Obj | None]
    pods_of: Callable[[str], list[Obj]]
    node_detectors: DetectorCache
    prod_detectors: DetectorCache
    now: float
    expiration_seconds: int
    number_of_nodes: int
    node_fit: bool
    dry_run: bool


def over(used: Amounts, thresholds: Amounts) -> bool:
    """Some resource present in both maps is above its threshold."""
    for r, limit in thresholds.items():
        v = used.get(r)
        if v is not None and v > limit:
            return True
    return False


def usage_score(used: Amounts, allocatable: Amounts, weights: dict[str, int]) -> int:
    """Weighted mean over the usage map of ``min(used, alloc) * 1000 / alloc`` (integers, 0 without weights)."""
    total = weight_sum = 0
    for r, v in used.items():
        w = weights.get(r, 0)
        a = allocatable.get(r, 0)
        total += w * (min(v, a) * 1000 // a if a > 0 else 0)
        weight_sum += w
    return total // weight_sum if weight_sum else 0


@dataclass
class Classes:
    """Step 4's node lists (names, in node order)."""

    low: list[str] = field(default_factory=list)
    both_low: list[str] = field(default_factory=list)
    prod_low: list[str] = field(default_factory=list)
    source: list[str] = field(default_factory=list)
    prod_high: list[str] = field(default_factory=list)


def classify(usages: dict[str, NodeUsage], thresholds: dict[str, NodeThresholds]) -> Classes:
    """Low nodes must be schedulable; a node over its high thresholds is a source whatever its prod usage."""
    out = Classes()
    for name, nu in usages.items():
        t = thresholds[name]
        prod_over = over(nu.prod_usage, t.prod_high)
        if not nu.unschedulable and not over(nu.usage, t.low):
            if prod_over:
                out.prod_high.append(name)
            elif not over(nu.prod_usage, t.prod_low):
                out.both_low.append(name)
            else:
                out.low.append(name)
        elif over(nu.usage, t.high):
            out.source.append(name)
        elif prod_over:
            out.prod_high.append(name)
        elif not nu.unschedulable and not over(nu.prod_usage, t.prod_low):
            out.prod_low.append(name)
    return out


class PoolRound:
    """One pool, one round."""

    def __init__(self, ctx: RoundContext, pool: NodePool, nodes: list[Obj]) -> None:
        self.ctx = ctx
        self.pool = pool
        self.nodes = nodes
        self.thresholds: PoolThresholds = normalize(pool)
        self.resources = self.thresholds.resources
        self.usages = collect(nodes, ctx.metric_of, ctx.pods_of, self.resources, ctx.now, ctx.expiration_seconds)
        self.node_thresholds = node_thresholds(self.thresholds, self.usages)
        self.requests_of = nodefit.requests_cache()
        self._targets: dict[str, nodefit.TargetNode] = {}
        self.evicted = 0

    def run(self) -> list[str]:
        """Steps 4–6; returns the pool's source nodes once it got to evicting (later pools with a node selector
        do not see them again); a pool stopped at a gate returns none."""
        ctx = self.ctx
        classes = classify(self.usages, self.node_thresholds)
        if not classes.source and not classes.prod_high:
            return []
        abnormal = ctx.node_detectors.real_abnormal(classes.source, self.pool.anomaly_condition)
        abnormal_prod = ctx.prod_detectors.real_abnormal(classes.prod_high, self.pool.anomaly_condition)
        if not abnormal and not abnormal_prod:
            log.debug("pool %s: overutilized nodes are not yet abnormal", self.pool.name)
            return []
        if not classes.low and not classes.prod_low and not classes.both_low:
            log.debug("pool %s: no underutilized node to move pods to", self.pool.name)
            return []
        ctx.node_detectors.reset([*classes.low, *classes.both_low])
        ctx.prod_detectors.reset(classes.prod_low)
        all_low = len(classes.low) + len(classes.prod_low) + len(classes.both_low)
        if all_low <= ctx.number_of_nodes or all_low == len(self.nodes):
            return []
        weights = self.pool.resource_weights
        abnormal.sort(key=lambda n: usage_score(self.usages[n].usage, self.usages[n].allocatable, weights),
                      reverse=True)
        abnormal_prod.sort(
            key=lambda n: usage_score(self.usages[n].prod_usage, self.usages[n].allocatable, weights), reverse=True)
        log.info("LowNodeLoad pool %s: %d overutilized (%d abnormal), %d prod-overutilized (%d abnormal), "
                 "%d low, %d prod-low, %d both-low nodes", self.pool.name, len(classes.source), len(abnormal),
                 len(classes.prod_high), len(abnormal_prod), len(classes.low), len(classes.prod_low),
                 len(classes.both_low))
        self._evict(classes, abnormal, abnormal_prod)
        log.info("LowNodeLoad pool %s: %d pods evicted%s", self.pool.name, self.evicted,
                 " (dry run)" if ctx.dry_run else "")
        ctx.node_detectors.mark_normal(abnormal)
        ctx.prod_detectors.mark_normal(abnormal_prod)
        return classes.source

    # -- step 6 ----------------------------------------------------------------------------------

    def _budget(self, nodes: list[str], prod: bool) -> Amounts:
        """Σ over ``nodes`` of (high threshold − usage): what they can take before turning hot (may be < 0)."""
        budget = {r: 0 for r in self.resources}
        for n in nodes:
            t = self.node_thresholds[n]
            high = t.prod_high if prod else t.high
            used = self.usages[n].prod_usage if prod else self.usages[n].usage
            for r in self.resources:
                budget[r] += high[r] - used.get(r, 0)
        return budget

    def _evict(self, classes: Classes, abnormal: list[str], abnormal_prod: list[str]) -> None:
        node_low = self._budget(classes.low, prod=False)
        both_node = self._budget(classes.both_low, prod=False)
        prod_low = self._budget(classes.prod_low, prod=True)
        both_prod = self._budget(classes.both_low, prod=True)
        budget = {r: node_low[r] + both_node[r] for r in self.resources}
        self._balance(abnormal, [*classes.low, *classes.both_low], budget, prod=False)
        # What phase A took from the both-low nodes is no longer theirs to give in phase B.
        for r in self.resources:
            if both_node[r] > budget[r]:
                both_node[r] = budget[r]
        prod_budget = {r: prod_low[r] + min(both_prod[r], both_node[r]) for r in self.resources}
        self._balance(abnormal_prod, [*classes.prod_low, *classes.both_low], prod_budget, prod=True)

    def _target(self, name: str) -> nodefit.TargetNode:
        t = self._targets.get(name)
        if t is None:
            nu = self.usages[name]
            t = self._targets[name] = nodefit.TargetNode(nu.node, nu.pods, self.requests_of)
        return t

    def _fit_index(self, targets: list[str], prod: bool) -> FirstFit:
        """The targets' headroom under their high thresholds (node or prod), for first-fit queries."""
        rows = []
        for name in targets:
            used, high = self._used_high(name, prod)
            rows.append([high[r] - used.get(r, 0) for r in self.resources])
        return FirstFit(rows, len(self.resources))

    def _used_high(self, name: str, prod: bool) -> tuple[Amounts, Amounts]:
        nu, t = self.usages[name], self.node_thresholds[name]
        return (nu.prod_usage, t.prod_high) if prod else (nu.usage, t.high)

    def _fits_a_target(self, pod: Obj, metric: Amounts | None, targets: list[str], fit: FirstFit,
                       prod: bool) -> bool:
        """The first target (in order) the pod fits by requests that stays under its high thresholds with the
        pod's real usage added; that usage stays added (later candidates see the target filling up)."""
        if metric is None:
            return False
        requests = self.requests_of(pod)
        need = [metric.get(r, 0) for r in self.resources]
        i = fit.first(need, lambda i: nodefit.fits(pod, requests, self._target(targets[i])))
        if i is None:
            return False
        used, high = self._used_high(targets[i], prod)
        for r, v in zip(self.resources, need):
            used[r] = used.get(r, 0) + v
        fit.set(i, [high[r] - used[r] for r in self.resources])
        return True

    def _balance(self, sources: list[str], targets: list[str], budget: Amounts, prod: bool) -> None:
        """Evict from each source until it is no longer hot or the targets' budget is spent."""
        if not targets:
            return
        ctx = self.ctx
        detectors = ctx.prod_detectors if prod else ctx.node_detectors
        fit = self._fit_index(targets, prod) if ctx.node_fit else None
        for name in sources:
            nu, t = self.usages[name], self.node_thresholds[name]
            used = nu.prod_usage if prod else nu.usage
            high = t.prod_high if prod else t.high
            if self._spent(budget) and over(used, high):
                # Nothing can leave this node (the loop below would stop at its first pod); the candidates'
                # virtual reservations on targets would serve no further eviction either.
                continue
            # The informer's order is arbitrary; namespace/name order makes which pods fit (and so which
            # are evicted) reproducible from round to round.
            candidates = sorted(nu.prod_pods if prod else nu.pods, key=pod_key)
            removable = []
            for pod in candidates:
                if not ctx.pod_filter(pod):
                    continue
                if fit is not None and not self._fits_a_target(pod, nu.pod_metrics.get(pod_key(pod)), targets, fit,
                                                               prod):
                    continue
                removable.append(pod)
            if not removable:
                continue
            excess = {r: used[r] - limit for r, limit in high.items() if r in used and used[r] > limit}
            ordered = sort_pods(removable, nu.pod_metrics, excess, self.pool.resource_weights)
            for pod in ordered:
                if not over(used, high):
                    detector = detectors.get(name)
                    if detector is not None:
                        detector.reset()
                    break
                if self._spent(budget):
                    break
                if not ctx.pod_filter(pod):
                    continue
                if ctx.dry_run:
                    log.info("Evict pod in dry run mode: %s from %s", pod_key(pod), name)
                else:
                    # The reason reflects the node's usage as it is now, after the evictions before this one.
                    reason = self._reason(nu, high, prod)
                    if not ctx.evictor.evict(pod, EvictOptions(plugin_name=ctx.plugin_name, reason=reason)):
                        continue
                self.evicted += 1
                metric = nu.pod_metrics.get(pod_key(pod))
                if metric is None:
                    continue  # nothing known of its usage (possible with nodeFit off): no bookkeeping
                for r in budget:
                    amount = 1 if r == PODS else metric.get(r, 0)
                    budget[r] -= amount
                    nu.usage[r] = nu.usage.get(r, 0) - amount
                    if prod:
                        nu.prod_usage[r] = nu.prod_usage.get(r, 0) - amount

    def _spent(self, budget: Amounts) -> bool:
        return any(budget[r] <= 0 for r in self.resources)

    def _reason(self, nu: NodeUsage, high: Amounts, prod: bool) -> str:
        """``node is overutilized, node cpu usage(80.00%)>threshold(50.00%), ...`` over the resources above
        their thresholds, by name; the threshold is the configured percentage."""
        kind = "prod" if prod else "node"
        percents = self.thresholds.prod_high if prod else self.thresholds.high
        used = nu.prod_usage if prod else nu.usage
        parts = []
        for r in sorted(high):
            if r in used and used[r] > high[r]:
                parts.append(f"{kind} {r} usage({percent_of(used[r], nu.allocatable.get(r, 0)):.2f}%)"
                             f">threshold({percents[r]:.2f}%)")
        return ", ".join(["node is overutilized", *parts])


def run_pool(ctx: RoundContext, pool: NodePool, nodes: list[Obj]) -> tuple[list[str], int]:
    """Run one pool's round; returns its source nodes and how many pods it evicted (or would, dry run)."""
    round_ = PoolRound(ctx, pool, nodes)
    sources = round_.run()
    return sources, round_.evicted
