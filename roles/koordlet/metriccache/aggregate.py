"""Pure aggregation functions over the points of one query (reference A.5).

- ``avg``: arithmetic mean;
- ``p50``/``p90``/``p95``/``p99``: nearest-rank floor — sort ascending, take index
  ``int(n * p) - 1`` clamped to ``>= 0`` (no interpolation: n=9, p90 -> index 7, p50 -> index 3);
- ``last``: the value with the greatest timestamp;
- ``count``: the number of points (0 for an empty series, the only aggregation that has a value then).

Every other aggregation of an empty series raises :class:`EmptySeriesError`.
"""

from __future__ import annotations

import math
from typing import Sequence

AVG = "avg"
P50 = "p50"
P90 = "p90"
P95 = "p95"
P99 = "p99"
LAST = "last"
COUNT = "count"

#: percentile aggregation name -> p
PERCENTILES: dict[str, float] = {P50: 0.5, P90: 0.9, P95: 0.95, P99: 0.99}

#: every aggregation name accepted by :func:`aggregate` (case-insensitive: koordlet's own enum
#: spells "P90"/"P95" upper case).
AGGREGATIONS = (AVG, P50, P90, P95, P99, LAST, COUNT)


class EmptySeriesError(ValueError):
    """An aggregation other than ``count`` was asked of a series without points."""


def _require(values: Sequence[float], what: str) -> None:
    if not values:
        raise EmptySeriesError(f"cannot compute {what} of an empty series")


def avg(values: Sequence[float]) -> float:
    """Arithmetic mean; EmptySeriesError when empty."""
    _require(values, AVG)
    return math.fsum(values) / len(values)


def percentile_index(n: int, p: float) -> int:
    """Index into the ascending-sorted points for percentile ``p`` of ``n`` points."""
    return max(int(n * p) - 1, 0)


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank floor percentile (see module doc); EmptySeriesError when empty."""
    _require(values, f"percentile {p}")
    ordered = sorted(values)
    return ordered[percentile_index(len(ordered), p)]


def percentiles(values: Sequence[float], ps: Sequence[float]) -> list[float]:
    """Several percentiles with one sort (the NodeMetric report asks for four at once)."""
    _require(values, "percentiles")
    ordered = sorted(values)
    n = len(ordered)
    return [ordered[percentile_index(n, p)] for p in ps]


def last(timestamps: Sequence[float], values: Sequence[float]) -> float:
    """Value with the greatest timestamp (the later one in sequence order on ties)."""
    _require(values, LAST)
    best = 0
    best_ts = timestamps[0]
    for i in range(1, len(timestamps)):
        if timestamps[i] >= best_ts:
            best, best_ts = i, timestamps[i]
    return values[best]


def count(values: Sequence[float]) -> int:
    """Number of points (0 for an empty series)."""
    return len(values)


def time_range(timestamps: Sequence[float]) -> float:
    """Last timestamp minus first timestamp; 0 for fewer than two points."""
    if len(timestamps) < 2:
        return 0.0
    return max(timestamps) - min(timestamps)


def aggregate(kind: str, timestamps: Sequence[float], values: Sequence[float]) -> float:
    """Apply the aggregation named ``kind`` (one of :data:`AGGREGATIONS`, any case).

    An unknown name raises ValueError (Koordinator falls back to avg; a typo here would then
    silently report the mean, so we refuse it instead).
    """
    k = kind.lower() if isinstance(kind, str) else kind
    if k == AVG:
        return avg(values)
    if k in PERCENTILES:
        return percentile(values, PERCENTILES[k])
    if k == LAST:
        return last(timestamps, values)
    if k == COUNT:
        return count(values)
    raise ValueError(f"unknown aggregation {kind!r}; expected one of {', '.join(AGGREGATIONS)}")
