"""koordlet's Prometheus metric families, on the Runtime's registry.

Koordinator's names and labels (``pkg/koordlet/metrics``) where this build does the same thing:

=========================================================  ==========================================
family                                                     labels
=========================================================  ==========================================
``koordlet_start_time`` (gauge, unix seconds)              node
``koordlet_node_predicted_resource_reclaimable`` (gauge)   node, predictor, resource, unit
``koordlet_node_metric_node_usage`` (gauge)                node, resource, unit (gate NodeMetricPromMetrics)
``koordlet_node_metric_system_usage`` (gauge)              node, resource, unit (gate NodeMetricPromMetrics)
``koordlet_node_metric_numa_node_usage`` (gauge)           node, numa_node_id, resource, unit (same gate)
``koordlet_node_metric_numa_system_usage`` (gauge)         node, numa_node_id, resource, unit (same gate)
=========================================================  ==========================================

and this build's own, for operating the agent:

- ``koordlet_collect_round_duration_seconds`` (histogram): CPU-bound time of one metrics-advisor round;
- ``koordlet_metric_cache_points`` / ``koordlet_metric_cache_series`` / ``koordlet_metric_cache_bytes`` (gauges).

Values are read from the modules at scrape time (a custom collector), so nothing here runs a thread
or goes stale: a NodeMetric series disappears when the next report no longer has it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from koordinator.apis import quantity

ROUND_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0)


class KoordletCollector(Collector):
    """Reads the advisor's, reporter's, predictor's and cache's current state on every scrape."""

    def __init__(self, node: str, *, cache: Any, reporter: Any = None, predictor: Any = None,
                 node_metric_gauges: bool = False) -> None:
        self.node = node
        self.cache = cache
        self.reporter = reporter
        self.predictor = predictor
        self.node_metric_gauges = node_metric_gauges
        self.started = time.time()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        g = GaugeMetricFamily("koordlet_start_time", "the start time of koordlet", labels=["node"])
        g.add_metric([self.node], self.started)
        yield g
        yield from self._prediction()
        if self.node_metric_gauges and self.reporter is not None and self.reporter.last_reported:
            yield from self._node_metric(self.reporter.last_reported)
        stats = self.cache.stats()
        for key, help_text in (("points", "samples held by the metric cache"),
                               ("series", "time series held by the metric cache"),
                               ("bytes", "size of the metric cache database")):
            g = GaugeMetricFamily(f"koordlet_metric_cache_{key}", help_text, labels=["node"])
            g.add_metric([self.node], float(stats.get(key, 0)))
            yield g

    def _prediction(self) -> Iterator[GaugeMetricFamily]:
        if self.predictor is None:
            return
        g = GaugeMetricFamily("koordlet_node_predicted_resource_reclaimable",
                              "the node reclaimable resources predicted by koordinator",
                              labels=["node", "predictor", "resource", "unit"])
        try:
            reclaimable, _ = self.predictor.prod_reclaimable()
        except Exception:  # noqa: BLE001 - not ready yet (no model): no series, as Koordinator
            reclaimable = {}
        if "cpu" in reclaimable:
            g.add_metric([self.node, "minPredictor", "cpu", "core"], reclaimable["cpu"] / 1000)
        if "memory" in reclaimable:
            g.add_metric([self.node, "minPredictor", "memory", "byte"], float(reclaimable["memory"]))
        yield g

    def _node_metric(self, status: dict) -> Iterator[GaugeMetricFamily]:
        metric = status.get("nodeMetric") or {}
        for name, key, help_text in (
                ("node_metric_node_usage", "nodeUsage", "the node usage reported in the NodeMetric"),
                ("node_metric_system_usage", "systemUsage", "the system usage reported in the NodeMetric")):
            g = GaugeMetricFamily(f"koordlet_{name}", help_text, labels=["node", "resource", "unit"])
            for resource, unit, value in _usage(metric.get(key)):
                g.add_metric([self.node, resource, unit], value)
            yield g
        for name, key, help_text in (
                ("node_metric_numa_node_usage", "nodeUsage", "the per-NUMA node usage reported in the NodeMetric"),
                ("node_metric_numa_system_usage", "systemUsage",
                 "the per-NUMA system usage reported in the NodeMetric")):
            g = GaugeMetricFamily(f"koordlet_{name}", help_text, labels=["node", "numa_node_id", "resource", "unit"])
            for zone in metric.get("numaUsages") or []:
                for resource, unit, value in _usage(zone.get(key)):
                    g.add_metric([self.node, str(zone.get("numaNodeID", "")), resource, unit], value)
            yield g


def _usage(usage: dict | None) -> Iterator[tuple[str, str, float]]:
    resources = (usage or {}).get("resources") or {}
    if "cpu" in resources:
        yield "cpu", "core", quantity.milli_value(resources["cpu"]) / 1000
    if "memory" in resources:
        yield "memory", "byte", float(quantity.value(resources["memory"]))


def round_duration(registry: Any) -> Histogram:
    """The metrics-advisor round duration histogram, registered on ``registry``."""
    return Histogram("koordlet_collect_round_duration_seconds",
                     "time one metrics advisor round (every collector, one cache insert) took",
                     buckets=ROUND_BUCKETS, registry=registry)
