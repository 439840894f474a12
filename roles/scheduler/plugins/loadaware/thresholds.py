"""Per-node threshold profile: plugin args, overridden by the node's usage-thresholds annotation.

Each of the annotation's three parts, when present, *replaces* the corresponding args map
entirely (a resource it does not list is disabled on that node); a part that is absent or
empty falls back to the args; an unparsable annotation means "args only".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from koordinator_roles.scheduler.plugins.loadaware.args import LoadAwareArgs, parse_go_duration

ANNOTATION_USAGE_THRESHOLDS = "scheduling.koordinator.sh/usage-thresholds"


@dataclass(frozen=True)
class AggregatedProfile:
    """Percentile filter of one node: thresholds, aggregation type and window (seconds; 0 = longest)."""

    thresholds: Mapping[str, int]
    aggregation_type: str
    duration: float


@dataclass(frozen=True)
class ThresholdProfile:
    """The thresholds Filter applies on one node."""

    usage: Mapping[str, int]
    prod: Mapping[str, int]
    aggregated: AggregatedProfile | None


def _int_map(raw: Any) -> dict[str, int]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError("not a map")
    out = {}
    for k, v in raw.items():
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{k}: not an integer")
        out[str(k)] = v
    return out


def _args_aggregated(args: LoadAwareArgs) -> AggregatedProfile | None:
    agg = args.aggregated
    if not agg.filter_enabled:
        return None
    return AggregatedProfile(agg.usage_thresholds, agg.usage_aggregation_type, agg.usage_aggregated_duration)


def args_profile(args: LoadAwareArgs) -> ThresholdProfile:
    return ThresholdProfile(args.usage_thresholds, args.prod_usage_thresholds, _args_aggregated(args))


def node_profile(node: Mapping[str, Any] | None, args: LoadAwareArgs) -> ThresholdProfile:
    """The effective profile of ``node`` (see module docstring)."""
    raw = (((node or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_USAGE_THRESHOLDS)
    if not raw:
        return args_profile(args)
    try:
        doc = json.loads(raw)
        if not isinstance(doc, dict):
            raise ValueError("not an object")
        usage = _int_map(doc.get("usageThresholds"))
        prod = _int_map(doc.get("prodUsageThresholds"))
        agg = None
        agg_raw = doc.get("aggregatedUsage")
        if agg_raw is not None:
            if not isinstance(agg_raw, dict):
                raise ValueError("aggregatedUsage: not an object")
            agg_thresholds = _int_map(agg_raw.get("usageThresholds"))
            agg_type = agg_raw.get("usageAggregationType") or ""
            if not isinstance(agg_type, str):
                raise ValueError("usageAggregationType: not a string")
            duration = parse_go_duration(agg_raw.get("usageAggregatedDuration"))
            if agg_thresholds and agg_type:
                agg = AggregatedProfile(agg_thresholds, agg_type, duration)
    except ValueError:  # json.JSONDecodeError is a ValueError too
        return args_profile(args)
    return ThresholdProfile(usage or args.usage_thresholds, prod or args.prod_usage_thresholds,
                            agg or _args_aggregated(args))
