"""The NodeMetric spec of a node (reference B.4): how koordlet collects and reports its metrics.

Pure: :func:`node_metric_spec` reads a :class:`~koordinator_roles.manager.sloconfig.ManagerConfig` and the
Node and returns the spec the NodeMetric of that node (same name, cluster-scoped) should have.
"""

from __future__ import annotations

import copy
from typing import Any

from koordinator_roles.manager.sloconfig import (DEFAULT_COLOCATION_STRATEGY, ManagerConfig, colocation_strategy,
                                                 is_colocation_strategy_valid)

Obj = dict[str, Any]


def collect_policy(strategy: Obj) -> Obj:
    """``metricCollectPolicy`` from a colocation strategy (fields the strategy lacks are left out)."""
    pairs = (("aggregateDurationSeconds", "metricAggregateDurationSeconds"),
             ("reportIntervalSeconds", "metricReportIntervalSeconds"),
             ("nodeAggregatePolicy", "metricAggregatePolicy"),
             ("nodeMemoryCollectPolicy", "metricMemoryCollectPolicy"))
    return {out: copy.deepcopy(strategy[src]) for out, src in pairs if strategy.get(src) is not None}


def default_node_metric_spec() -> Obj:
    """The spec from the default colocation strategy: 300 s aggregation, 60 s reports, 5m/10m/30m windows."""
    return {"metricCollectPolicy": collect_policy(DEFAULT_COLOCATION_STRATEGY)}


def node_metric_spec(cfg: ManagerConfig, node: Obj, old_spec: Obj | None = None) -> Obj:
    """The NodeMetric spec for ``node``.

    While ``cfg.colocation_error`` is set an existing spec (``old_spec`` not None) is kept as it is.
    Otherwise the node's colocation strategy gives the collect policy when it is valid and enabled;
    the default spec when not.
    """
    if old_spec is not None and cfg.colocation_error:
        return copy.deepcopy(old_spec)
    strategy = colocation_strategy(cfg, node)
    if is_colocation_strategy_valid(strategy) and strategy.get("enable") is True:
        return {"metricCollectPolicy": collect_policy(strategy)}
    return default_node_metric_spec()
