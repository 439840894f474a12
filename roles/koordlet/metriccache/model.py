"""Value types of the metric cache: Sample (one point to insert), Series (points of a query)."""

from __future__ import annotations

from types import MappingProxyType
from typing import Iterable, Mapping, NamedTuple, Sequence

from . import aggregate as _agg
from .aggregate import EmptySeriesError

__all__ = ["EmptySeriesError", "MetricCacheError", "Sample", "Series"]


class MetricCacheError(Exception):
    """Bad input to the metric cache (unknown kind, wrong labels, non-finite value ...) or an
    unusable database file; the message names the offending kind, labels, sample or path."""


class Sample(NamedTuple):
    """One point of one series: ``metric`` is a kind from :mod:`.kinds`, ``labels`` must be
    exactly that kind's property labels, ``timestamp`` is unix seconds (stored at millisecond
    resolution). Immutable; a named tuple because collectors build a thousand a second (a frozen
    dataclass costs 2.4 times as much to create)."""

    metric: str
    value: float
    timestamp: float
    labels: Mapping[str, str] = MappingProxyType({})


class Series:
    """The points returned by one query, sorted by timestamp (seconds)."""

    __slots__ = ("timestamps", "values")

    def __init__(self, timestamps: Iterable[float] = (), values: Iterable[float] = ()) -> None:
        self.timestamps: list[float] = list(timestamps)
        self.values: list[float] = list(values)
        if len(self.timestamps) != len(self.values):
            raise ValueError(
                f"series needs as many timestamps as values, got {len(self.timestamps)} and {len(self.values)}"
            )

    def __len__(self) -> int:
        return len(self.values)

    def __bool__(self) -> bool:
        return bool(self.values)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Series):
            return NotImplemented
        return self.timestamps == other.timestamps and self.values == other.values

    def __repr__(self) -> str:
        if not self.values:
            return "Series(empty)"
        return (f"Series({len(self.values)} points, {self.timestamps[0]}..{self.timestamps[-1]}, "
                f"last={self.values[-1]})")

    def aggregate(self, kind: str) -> float:
        """``"avg"``, ``"p50"``, ``"p90"``, ``"p95"``, ``"p99"``, ``"last"`` or ``"count"`` (A.5
        rules, see :mod:`.aggregate`). EmptySeriesError (a ValueError) when the series is empty,
        except ``count`` which is 0 then."""
        return _agg.aggregate(kind, self.timestamps, self.values)

    def percentiles(self, kinds: Sequence[str]) -> dict[str, float]:
        """Several percentile aggregations (``"p50"`` ...) with a single sort."""
        ps = []
        for k in kinds:
            p = _agg.PERCENTILES.get(k.lower())
            if p is None:
                raise ValueError(f"not a percentile aggregation: {k!r}")
            ps.append(p)
        return dict(zip(kinds, _agg.percentiles(self.values, ps)))

    def time_range(self) -> float:
        """Last timestamp minus first timestamp (0 for fewer than two points); the NodeMetric
        reporter's cold-start rule compares it with the aggregation window."""
        if len(self.timestamps) < 2:
            return 0.0
        return self.timestamps[-1] - self.timestamps[0]
