"""Metric cache of the koordlet (reference A.5): time series with aggregations (avg, p50, p90,
p95, p99, last, count) and a small key-value store for static node information, in one SQLite
file under ``--run-dir`` that survives a restart, bounded by retention and size.

- :mod:`.kinds`: metric kind names, their exact property labels, KV keys;
- :mod:`.aggregate`: the pure aggregation rules;
- :mod:`.model`: :class:`Sample`, :class:`Series`, :class:`MetricCacheError`;
- :mod:`.store`: :class:`MetricCache` (thread-safe; ``run_gc`` is the runnable that bounds it);
- :mod:`.bench`: ``bench()`` / ``report_query()`` for ``scripts/bench_koordlet.py``.
"""

from .aggregate import EmptySeriesError
from .model import MetricCacheError, Sample, Series
from .store import MetricCache

__all__ = ["EmptySeriesError", "MetricCache", "MetricCacheError", "Sample", "Series"]
