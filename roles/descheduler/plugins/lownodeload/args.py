"""LowNodeLoadArgs (``descheduler/v1alpha2``): defaults, node-pool conversion and validation (reference §1.6.1).

:func:`parse_args` takes the plugin's args as the configuration gives them, in either shape:

* v1alpha2 as users write it — thresholds at the top level, optional ``nodePools``;
* already converted by the role's configuration — a first pool named ``__default_node_pool__`` holding the
  top-level pool fields.

It returns a :class:`LowNodeLoadArgs` whose ``node_pools`` always start with the default pool, every pool's
unset fields inherited from the top level as Koordinator's defaulting does, or raises ``ValueError`` naming
the field and the value.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import schemas
from koordinator.apis.goduration import parse_go_duration
from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict

DEFAULT_NODE_POOL = "__default_node_pool__"
SCHEMA = "LowNodeLoad-args"
SCHEMA_VERSION = "v1alpha2"

DEFAULT_NODE_METRIC_EXPIRATION_SECONDS = 180
DEFAULT_ANOMALY_TIMEOUT_S = 60.0
DEFAULT_CONSECUTIVE_ABNORMALITIES = 5
DEFAULT_CONSECUTIVE_NORMALITIES = 3
DEFAULT_DETECTOR_CACHE_TIMEOUT_S = 300.0

# The fields a node pool carries; a pool that leaves one unset inherits the top-level value.
POOL_FIELDS = ("useDeviationThresholds", "highThresholds", "lowThresholds", "prodHighThresholds",
               "prodLowThresholds", "resourceWeights", "anomalyCondition")
THRESHOLD_FIELDS = ("highThresholds", "lowThresholds", "prodHighThresholds", "prodLowThresholds")


@dataclass(frozen=True)
class AnomalyCondition:
    """How many consecutive rounds turn a node abnormal (and normal again); ``timeout_s`` ends an anomaly."""

    timeout_s: float = DEFAULT_ANOMALY_TIMEOUT_S
    consecutive_abnormalities: int = DEFAULT_CONSECUTIVE_ABNORMALITIES
    consecutive_normalities: int = DEFAULT_CONSECUTIVE_NORMALITIES


@dataclass
class NodePool:
    """One pool of nodes balanced with its own thresholds (percentages per resource name)."""

    name: str
    node_selector: LabelSelector | None = None
    use_deviation_thresholds: bool = False
    high_thresholds: dict[str, float] = field(default_factory=dict)
    low_thresholds: dict[str, float] = field(default_factory=dict)
    prod_high_thresholds: dict[str, float] = field(default_factory=dict)
    prod_low_thresholds: dict[str, float] = field(default_factory=dict)
    resource_weights: dict[str, int] = field(default_factory=dict)
    anomaly_condition: AnomalyCondition | None = None


@dataclass
class PodSelector:
    """A named label selector; with any given, a pod must match one to be evicted."""

    name: str
    selector: LabelSelector


@dataclass
class LowNodeLoadArgs:
    """The plugin's settings after defaulting and validation."""

    paused: bool = False
    dry_run: bool = False
    number_of_nodes: int = 0
    node_metric_expiration_seconds: int = DEFAULT_NODE_METRIC_EXPIRATION_SECONDS
    include_namespaces: list[str] | None = None
    exclude_namespaces: list[str] | None = None
    pod_selectors: list[PodSelector] = field(default_factory=list)
    node_fit: bool = True
    detector_cache_timeout_s: float = DEFAULT_DETECTOR_CACHE_TIMEOUT_S
    node_pools: list[NodePool] = field(default_factory=list)


def parse_args(raw: Mapping[str, Any] | None) -> LowNodeLoadArgs:
    """Validate and default the plugin's args (either shape, see the module docstring); ValueError if bad."""
    raw = dict(raw or {})
    document, errors = schemas.validate_config(SCHEMA, raw, SCHEMA_VERSION)
    if errors:
        raise ValueError("; ".join(f"{e.path}: {e.message}" if e.path else e.message for e in errors))
    top, pools_raw = _split_pools(document)
    top_anomaly = _anomaly(top.get("anomalyCondition"), None, "anomalyCondition")
    pools = [_pool(DEFAULT_NODE_POOL, top, top, top_anomaly, "")]
    for i, entry in pools_raw:
        pools.append(_pool(str(entry.get("name") or ""), entry, top, top_anomaly, f"nodePools[{i}]."))
    namespaces = document.get("evictableNamespaces")
    include = exclude = None
    if namespaces is not None:
        include, exclude = namespaces.get("include"), namespaces.get("exclude")
        if include is not None and exclude is not None:
            raise ValueError("evictableNamespaces: only one of include and exclude may be set")
    number = document.get("numberOfNodes", 0)
    if number < 0:
        raise ValueError(f"numberOfNodes: {number} must be greater than or equal to 0")
    expiration = document.get("nodeMetricExpirationSeconds", DEFAULT_NODE_METRIC_EXPIRATION_SECONDS)
    if expiration <= 0:
        raise ValueError(f"nodeMetricExpirationSeconds: {expiration} must be greater than 0")
    return LowNodeLoadArgs(
        paused=bool(document.get("paused", False)),
        dry_run=bool(document.get("dryRun", False)),
        number_of_nodes=number,
        node_metric_expiration_seconds=expiration,
        include_namespaces=list(include) if include is not None else None,
        exclude_namespaces=list(exclude) if exclude is not None else None,
        pod_selectors=_pod_selectors(document.get("podSelectors") or []),
        node_fit=bool(document.get("nodeFit", True)),
        detector_cache_timeout_s=_duration(document.get("detectorCacheTimeout", "5m"), "detectorCacheTimeout"),
        node_pools=pools,
    )


def _split_pools(document: dict) -> tuple[dict, list[tuple[int, dict]]]:
    """The top-level pool fields and the user's own pools (with their index in the user's list).

    In the converted shape the default pool's entry supplies the top-level fields (conversion removed
    them from the top level, except the prod thresholds, which it copies).
    """
    pools = list(document.get("nodePools") or [])
    top = {k: document[k] for k in ("nodeSelector", *POOL_FIELDS) if k in document}
    if pools and pools[0].get("name") == DEFAULT_NODE_POOL:
        top.update({k: v for k, v in pools[0].items() if k != "name"})
        return top, [(i, p) for i, p in enumerate(pools[1:])]
    return top, list(enumerate(pools))


def _pool(name: str, own: dict, inherit: dict, top_anomaly: AnomalyCondition, path: str) -> NodePool:
    """One pool: its own values where set, else the top level's; then weights defaulted, all validated."""

    def value(key: str) -> Any:
        got = own.get(key)
        return got if got is not None else inherit.get(key)

    selector = None
    if own.get("nodeSelector") is not None:
        try:
            selector = label_selector_from_dict(own["nodeSelector"])
        except SelectorError as exc:
            raise ValueError(f"{path}nodeSelector: {exc}") from None
    thresholds = {key: {str(r): float(p) for r, p in (value(key) or {}).items()} for key in THRESHOLD_FIELDS}
    _validate_thresholds(thresholds, path)
    anomaly = top_anomaly if not path else _anomaly(own.get("anomalyCondition"), top_anomaly,
                                                    f"{path}anomalyCondition")
    return NodePool(
        name=name,
        node_selector=selector,
        use_deviation_thresholds=bool(value("useDeviationThresholds") or False),
        high_thresholds=thresholds["highThresholds"],
        low_thresholds=thresholds["lowThresholds"],
        prod_high_thresholds=thresholds["prodHighThresholds"],
        prod_low_thresholds=thresholds["prodLowThresholds"],
        resource_weights=_weights(value("resourceWeights"), thresholds),
        anomaly_condition=anomaly,
    )


def _weights(given: Mapping[str, Any] | None, thresholds: dict[str, dict[str, float]]) -> dict[str, int]:
    """cpu and memory weigh 1 unless configured; every resource with a low/high threshold weighs at least 1."""
    weights = {str(k): int(v) for k, v in given.items()} if given is not None else {"cpu": 1, "memory": 1}
    for r in [*thresholds["lowThresholds"], *thresholds["highThresholds"]]:
        if weights.get(r, 0) <= 0:
            weights[r] = 1
    return weights


def _anomaly(raw: Mapping[str, Any] | None, inherit: AnomalyCondition | None, path: str) -> AnomalyCondition:
    """Defaults as Koordinator applies them.

    Top level (``inherit`` None): absent → 1m/5/3; abnormalities 0 → 5, *else* normalities 0 → 3 (one of the
    two per call). A pool: absent → the top level's; counts of 0 → the top level's counts.
    """
    if raw is None:
        return inherit or AnomalyCondition()
    timeout = raw.get("timeout")
    abnormalities = int(raw.get("consecutiveAbnormalities") or 0)
    normalities = int(raw.get("consecutiveNormalities") or 0)
    if inherit is None:
        timeout_s = _duration(timeout, f"{path}.timeout") if timeout is not None else DEFAULT_ANOMALY_TIMEOUT_S
        if abnormalities == 0:
            abnormalities = DEFAULT_CONSECUTIVE_ABNORMALITIES
        elif normalities == 0:
            normalities = DEFAULT_CONSECUTIVE_NORMALITIES
    else:
        timeout_s = _duration(timeout, f"{path}.timeout") if timeout is not None else inherit.timeout_s
        abnormalities = abnormalities or inherit.consecutive_abnormalities
        normalities = normalities or inherit.consecutive_normalities
    if abnormalities <= 0:
        raise ValueError(f"{path}.consecutiveAbnormalities: {abnormalities} must be greater than 0")
    if normalities <= 0:
        raise ValueError(f"{path}.consecutiveNormalities: {normalities} must be greater than 0")
    return AnomalyCondition(timeout_s, abnormalities, normalities)


def _validate_thresholds(t: dict[str, dict[str, float]], path: str) -> None:
    """Percentages in [0, 100]; low ≤ high, prodHigh ≤ high, prodLow ≤ prodHigh per resource given in both."""
    for key, values in t.items():
        for r, p in values.items():
            if p < 0 or p > 100:
                raise ValueError(f"{path}{key}.{r}: {_num(p)} must be between 0 and 100")
    for lower, upper in (("lowThresholds", "highThresholds"), ("prodHighThresholds", "highThresholds"),
                         ("prodLowThresholds", "prodHighThresholds")):
        for r, p in t[lower].items():
            limit = t[upper].get(r)
            if limit is not None and p > limit:
                raise ValueError(f"{path}{lower}.{r}: {_num(p)} is above {path}{upper}.{r} {_num(limit)}")


def _pod_selectors(entries: list) -> list[PodSelector]:
    out = []
    for i, entry in enumerate(entries):
        if entry.get("selector") is None:
            continue  # Koordinator ignores an entry without a selector (it neither selects nor rejects)
        try:
            out.append(PodSelector(str(entry.get("name") or ""), label_selector_from_dict(entry["selector"])))
        except SelectorError as exc:
            raise ValueError(f"podSelectors[{i}].selector: {exc}") from None
    return out


def _duration(raw: Any, path: str) -> float:
    try:
        ns = parse_go_duration(str(raw))
    except ValueError:
        raise ValueError(f"{path}: {raw!r} is not a valid duration") from None
    if ns < 0:
        raise ValueError(f"{path}: {raw!r} must not be negative")
    return ns / 1e9


def _num(p: float) -> str:
    """A percentage as the user wrote it (80, not 80.0)."""
    return str(int(p)) if p == int(p) else str(p)
