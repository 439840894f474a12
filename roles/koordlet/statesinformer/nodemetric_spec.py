"""The koordlet's view of a NodeMetric spec (reference A.6.3): the manager's collect policy on top of
Koordinator's defaults, with the koordlet's floors (aggregate over at least 60 s, report at most
every 30 s)."""

from __future__ import annotations

import logging
from typing import Any

from koordinator.apis.goduration import parse_go_duration
from koordinator.apis.nodeslo_defaults import (MIN_METRIC_AGGREGATE_DURATION_SECONDS,
                                               MIN_METRIC_REPORT_INTERVAL_SECONDS, default_metric_collect_policy)
from koordinator.apis.slo_merge import merge_config

log = logging.getLogger("koordinator.koordlet.statesinformer")

Obj = dict[str, Any]


def merge_node_metric_spec(spec: Obj | None) -> Obj:
    """``{"metricCollectPolicy": {...}}`` with every field set: the spec's values merged onto the
    defaults (300 s, 60 s, 5m/10m/30m, usageWithoutPageCache), intervals raised to their minimums."""
    policy = default_metric_collect_policy()
    raw = (spec or {}).get("metricCollectPolicy")
    if isinstance(raw, dict):
        policy = merge_config(policy, raw)
    for name, floor in (("aggregateDurationSeconds", MIN_METRIC_AGGREGATE_DURATION_SECONDS),
                        ("reportIntervalSeconds", MIN_METRIC_REPORT_INTERVAL_SECONDS)):
        value = policy.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < floor:
            policy[name] = floor
    return {"metricCollectPolicy": policy}


def aggregate_durations(policy: Obj) -> list[tuple[str, float]]:
    """``(duration text, seconds)`` of ``nodeAggregatePolicy.durations``; unparsable or non-positive
    entries are left out with a warning naming them."""
    out = []
    for text in (policy.get("nodeAggregatePolicy") or {}).get("durations") or []:
        try:
            seconds = parse_go_duration(text) / 1e9 if isinstance(text, str) else None
        except ValueError:
            seconds = None
        if seconds is None or seconds <= 0:
            log.warning("NodeMetric spec.metricCollectPolicy.nodeAggregatePolicy.durations: %r is not a positive "
                        "duration, skipped", text)
            continue
        out.append((text, seconds))
    return out
