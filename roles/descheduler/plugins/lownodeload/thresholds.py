"""Threshold percentages of a pool and their amounts per node (reference §1.6.4 steps 1 and 3)."""

from __future__ import annotations

from dataclasses import dataclass

from .args import NodePool
from .usage import MEMORY, Amounts, NodeUsage


@dataclass
class PoolThresholds:
    """Step 1: the pool's percentages, every resource named anywhere filled in; ``resources`` = keys of low."""

    low: dict[str, float]
    high: dict[str, float]
    prod_low: dict[str, float]
    prod_high: dict[str, float]
    deviation: bool

    @property
    def resources(self) -> list[str]:
        return list(self.low)


def normalize(pool: NodePool) -> PoolThresholds:
    """A resource missing from ``low`` gets low = high = 0 (deviation) or 100 (absolute) — overwriting a high
    given alone — and likewise prodLow/prodHigh for one missing from ``prodLow``."""
    low, high = dict(pool.low_thresholds), dict(pool.high_thresholds)
    prod_low, prod_high = dict(pool.prod_low_thresholds), dict(pool.prod_high_thresholds)
    names = [*low]
    for source in (high, prod_low, prod_high, {MEMORY: 0.0}):
        names += [r for r in source if r not in names]
    filler = 0.0 if pool.use_deviation_thresholds else 100.0
    for r in names:
        if r not in low:
            low[r] = high[r] = filler
        if r not in prod_low:
            prod_low[r] = prod_high[r] = filler
    # A low threshold without its high one compares against 0%, as Go's zero map value does.
    for r in low:
        high.setdefault(r, 0.0)
        prod_high.setdefault(r, 0.0)
    return PoolThresholds(low, high, prod_low, prod_high, pool.use_deviation_thresholds)


@dataclass
class NodeThresholds:
    """Step 3: one node's thresholds as amounts."""

    low: Amounts
    high: Amounts
    prod_low: Amounts
    prod_high: Amounts


def _pct(percent: float, allocatable: int) -> int:
    # Go: int64(percent * 0.01 * float64(milli or value)) — float product, truncated toward zero.
    return int(percent * 0.01 * allocatable)


def node_thresholds(pool: PoolThresholds, nodes: dict[str, NodeUsage]) -> dict[str, NodeThresholds]:
    """Amounts per node: percent of allocatable, or (deviation mode) mean usage ± the deviation."""
    resources = pool.resources
    if not pool.deviation:
        out = {}
        for name, nu in nodes.items():
            alloc = nu.allocatable
            out[name] = NodeThresholds(
                low={r: _pct(pool.low[r], alloc.get(r, 0)) for r in resources},
                high={r: _pct(pool.high[r], alloc.get(r, 0)) for r in resources},
                prod_low={r: _pct(pool.prod_low[r], alloc.get(r, 0)) for r in resources},
                prod_high={r: _pct(pool.prod_high[r], alloc.get(r, 0)) for r in resources})
        return out
    avg = _average_percent(nodes, resources, prod=False)
    prod_avg = _average_percent(nodes, resources, prod=True)
    out = {}
    for name, nu in nodes.items():
        alloc = nu.allocatable
        low, high, prod_low, prod_high = {}, {}, {}, {}
        for r in resources:
            a = alloc.get(r, 0)
            if pool.low[r] == 0:
                low[r] = high[r] = a  # deviation 0 disables the resource: nothing is above allocatable
            else:
                low[r] = _pct(_clamp(avg[r] - pool.low[r]), a)
                high[r] = _pct(_clamp(avg[r] + pool.high[r]), a)
            if pool.prod_low[r] == 0:
                prod_low[r] = prod_high[r] = a
            else:
                prod_low[r] = _pct(_clamp(prod_avg[r] - pool.prod_low[r]), a)
                prod_high[r] = _pct(_clamp(prod_avg[r] + pool.prod_high[r]), a)
        out[name] = NodeThresholds(low, high, prod_low, prod_high)
    return out


def _average_percent(nodes: dict[str, NodeUsage], resources: list[str], *, prod: bool) -> dict[str, float]:
    """Mean usage percentage per resource over the nodes with usage; a node with no allocatable of a
    resource adds nothing to the sum but still counts."""
    total = {r: 0.0 for r in resources}
    for nu in nodes.values():
        used = nu.prod_usage if prod else nu.usage
        for r in resources:
            a = nu.allocatable.get(r, 0)
            if a > 0:
                total[r] += used.get(r, 0) * 100.0 / a
    n = len(nodes)
    return {r: (total[r] / n if n else 0.0) for r in resources}


def _clamp(percent: float) -> float:
    return min(max(percent, 0.0), 100.0)


def percent_of(used: int, allocatable: int) -> float:
    """Usage as a percentage of allocatable (0 when there is none)."""
    return used * 100.0 / allocatable if allocatable else 0.0

