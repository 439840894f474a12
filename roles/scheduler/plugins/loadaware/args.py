"""LoadAwareSchedulingArgs: defaults, validation and the resource vector they imply.

Amounts inside this package use the units Koordinator's LoadAware plugin compares: milli-cores
for ``cpu`` and whole units (``Quantity.Value()``) for every other resource. That keeps the
rounding of estimates and usage percentages identical to Koordinator and leaves room in int64
for the ``(capacity - used) * 100`` of the score even for large disks.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import extension
from koordinator.apis.pluginargs import bool_arg

CPU = extension.CPU
MEMORY = extension.MEMORY

AGGREGATION_TYPES = ("avg", "p50", "p90", "p95", "p99")
DEFAULT_USAGE_THRESHOLDS = {CPU: 65, MEMORY: 95}
DEFAULT_SCALING_FACTORS = {CPU: 85, MEMORY: 70}
DEFAULT_RESOURCE_WEIGHTS = {CPU: 1, MEMORY: 1}
DEFAULT_ESTIMATOR = "defaultEstimator"

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def go_round(x: float) -> int:
    """Go's ``math.Round``: half away from zero (Python's ``round`` rounds half to even)."""
    a = abs(x)
    r = math.floor(a)
    if a - r >= 0.5:
        r += 1
    return int(r) if x >= 0 else -int(r)


def parse_go_duration(value: Any) -> float:
    """A Go duration string (``5m``, ``1h30m``, ``5m0s``) in seconds; numbers are taken as seconds."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, bool):
        raise ValueError(f"invalid duration {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text == "0":
        return 0.0
    sign, pos, total = 1.0, 0, 0.0
    if text[:1] in "+-":
        sign, pos = (-1.0 if text[0] == "-" else 1.0), 1
    if pos >= len(text):
        raise ValueError(f"invalid duration {value!r}")
    while pos < len(text):
        m = _DURATION_PART.match(text, pos)
        if m is None:
            raise ValueError(f"invalid duration {value!r}")
        total += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * total


def to_units(name: str, milli: int) -> int:
    """A milli-unit amount (the scheduler's common unit) in LoadAware's units (see module docstring)."""
    return milli if name == CPU else extension.value_of_milli(milli)


@dataclass
class AggregatedArgs:
    """``aggregated``: percentile-based thresholds (filter) and usage (score); durations in seconds."""

    usage_thresholds: dict[str, int] = field(default_factory=dict)
    usage_aggregation_type: str = ""
    usage_aggregated_duration: float = 0.0
    score_aggregation_type: str = ""
    score_aggregated_duration: float = 0.0

    @property
    def filter_enabled(self) -> bool:
        return bool(self.usage_thresholds) and bool(self.usage_aggregation_type)

    @property
    def score_enabled(self) -> bool:
        return bool(self.score_aggregation_type)


@dataclass
class LoadAwareArgs:
    """Validated, defaulted LoadAwareSchedulingArgs (see ``parse_args``)."""

    filter_expired_node_metrics: bool = True
    node_metric_expiration_seconds: int = 180
    enable_schedule_when_node_metrics_expired: bool = False
    resource_weights: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS))
    dominant_resource_weight: int = 0
    usage_thresholds: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_USAGE_THRESHOLDS))
    prod_usage_thresholds: dict[str, int] = field(default_factory=dict)
    prod_usage_include_sys: bool = False
    score_according_prod_usage: bool = False
    estimator: str = DEFAULT_ESTIMATOR
    estimated_scaling_factors: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_SCALING_FACTORS))
    estimated_seconds_after_pod_scheduled: int | None = None
    estimated_seconds_after_initialized: int | None = None
    allow_customize_estimation: bool = False
    aggregated: AggregatedArgs = field(default_factory=AggregatedArgs)
    supported_resources: list[str] = field(default_factory=list)

    @property
    def resources(self) -> tuple[str, ...]:
        """The resource vector: every resource any map names, sorted (so cpu is checked before memory)."""
        names = {CPU, MEMORY, *self.usage_thresholds, *self.prod_usage_thresholds, *self.resource_weights,
                 *self.estimated_scaling_factors, *self.aggregated.usage_thresholds, *self.supported_resources}
        return tuple(sorted(names))


def _int(path: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{path}: Invalid value: {v!r}: must be an integer")
    return v


def _int_map(args: Mapping[str, Any], key: str, path: str | None = None) -> dict[str, int]:
    path = path or key
    raw = args.get(key)
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"{path}: Invalid value: {raw!r}: must be a map of resource name to integer")
    return {str(k): _int(f"{path}.{k}", v) for k, v in raw.items()}


def _check_range(path: str, values: Mapping[str, int], low: int, high: int, low_open: bool, what: str) -> None:
    for name, v in values.items():
        bad = v <= low if low_open else v < low
        if bad or v > high:
            interval = f"({low}, {high}]" if low_open else f"[{low}, {high}]"
            raise ValueError(f"{path}.{name}: Invalid value: {v}: {what} should be in {interval}")


def _aggregated(raw: Any) -> AggregatedArgs:
    if raw is None:
        return AggregatedArgs()
    if not isinstance(raw, Mapping):
        raise ValueError(f"aggregated: Invalid value: {raw!r}: must be an object")
    out = AggregatedArgs(usage_thresholds=_int_map(raw, "usageThresholds", "aggregated.usageThresholds"))
    _check_range("aggregated.usageThresholds", out.usage_thresholds, 0, 100, False, "threshold")
    for key in ("usageAggregationType", "scoreAggregationType"):
        t = raw.get(key) or ""
        if t and t not in AGGREGATION_TYPES:
            raise ValueError(f"aggregated.{key}: Unsupported value: {t!r}: supported values: "
                             + ", ".join(f'"{a}"' for a in AGGREGATION_TYPES))
        setattr(out, "usage_aggregation_type" if key.startswith("usage") else "score_aggregation_type", t)
    for key, attr in (("usageAggregatedDuration", "usage_aggregated_duration"),
                      ("scoreAggregatedDuration", "score_aggregated_duration")):
        try:
            seconds = parse_go_duration(raw.get(key))
        except ValueError as e:
            raise ValueError(f"aggregated.{key}: Invalid value: {raw.get(key)!r}: {e}") from None
        if seconds < 0:
            raise ValueError(f"aggregated.{key}: Invalid value: {raw.get(key)!r}: must not be negative")
        setattr(out, attr, seconds)
    return out


def parse_args(args: Mapping[str, Any] | None) -> LoadAwareArgs:
    """Apply Koordinator's defaults (beyond the schema's) and validate; ValueError names the field."""
    args = args or {}
    out = LoadAwareArgs()
    out.filter_expired_node_metrics = bool_arg(args, "filterExpiredNodeMetrics", True)
    out.enable_schedule_when_node_metrics_expired = bool_arg(args, "enableScheduleWhenNodeMetricsExpired", False)
    out.prod_usage_include_sys = bool_arg(args, "prodUsageIncludeSys", False)
    out.score_according_prod_usage = bool_arg(args, "scoreAccordingProdUsage", False)
    out.allow_customize_estimation = bool_arg(args, "allowCustomizeEstimation", False)

    exp = args.get("nodeMetricExpirationSeconds")
    out.node_metric_expiration_seconds = 180 if exp is None else _int("nodeMetricExpirationSeconds", exp)
    if out.node_metric_expiration_seconds <= 0:
        raise ValueError(f"nodeMetricExpirationSeconds: Invalid value: {out.node_metric_expiration_seconds}: "
                         "nodeMetricExpirationSeconds should be a positive value")

    dom = args.get("dominantResourceWeight")
    out.dominant_resource_weight = 0 if dom is None else _int("dominantResourceWeight", dom)
    if not 0 <= out.dominant_resource_weight <= 100:
        raise ValueError(f"dominantResourceWeight: Invalid value: {out.dominant_resource_weight}: "
                         "dominantResourceWeight should be in [0, 100]")

    # Thresholds replace rather than merge: an explicit map disables every resource it omits.
    out.usage_thresholds = _int_map(args, "usageThresholds") or dict(DEFAULT_USAGE_THRESHOLDS)
    _check_range("usageThresholds", out.usage_thresholds, 0, 100, False, "threshold")
    out.prod_usage_thresholds = _int_map(args, "prodUsageThresholds")
    _check_range("prodUsageThresholds", out.prod_usage_thresholds, 0, 100, False, "threshold")

    factors = _int_map(args, "estimatedScalingFactors")
    for name, default in DEFAULT_SCALING_FACTORS.items():
        factors.setdefault(name, default)
    _check_range("estimatedScalingFactors", factors, 0, 100, True, "scaling factor")
    out.estimated_scaling_factors = factors

    weights = _int_map(args, "resourceWeights")
    if not weights and out.dominant_resource_weight == 0:
        weights = dict(DEFAULT_RESOURCE_WEIGHTS)
    _check_range("resourceWeights", weights, 0, 100, True, "resource weight")
    for name in weights:
        if name not in factors:
            raise ValueError(f"resourceWeights.{name}: Invalid value: {weights[name]}: "
                             "resource weight must also be in estimatedScalingFactors")
    out.resource_weights = weights

    estimator = args.get("estimator") or ""
    if estimator not in ("", DEFAULT_ESTIMATOR):
        raise ValueError(f"estimator: Unsupported value: {estimator!r}: supported values: \"{DEFAULT_ESTIMATOR}\"")
    out.estimator = estimator or DEFAULT_ESTIMATOR

    for key, attr in (("estimatedSecondsAfterPodScheduled", "estimated_seconds_after_pod_scheduled"),
                      ("estimatedSecondsAfterInitialized", "estimated_seconds_after_initialized")):
        v = args.get(key)
        if v is not None:
            v = _int(key, v)
            if v < 0:
                raise ValueError(f"{key}: Invalid value: {v}: must be greater than or equal to 0")
        setattr(out, attr, v)

    out.aggregated = _aggregated(args.get("aggregated"))
    supported = args.get("supportedResources") or []
    if not isinstance(supported, list) or not all(isinstance(s, str) and s for s in supported):
        raise ValueError(f"supportedResources: Invalid value: {supported!r}: must be a list of resource names")
    out.supported_resources = list(supported)
    return out
