"""``slo-controller-config`` turned into the manager's configuration (pure functions, no API calls).

The ConfigMap holds one JSON document per key. Two layouts exist (reference B.2):

* "inline + nodeConfigs" (``colocation-config``, ``cpu-normalization-config``,
  ``resource-amplification-config``): the cluster strategy's fields at top level plus
  ``nodeConfigs: [{name, nodeSelector, <strategy fields>}]``;
* "clusterStrategy + nodeStrategies" (``resource-threshold-config``, ``resource-qos-config``,
  ``cpu-burst-config``, ``system-config``);
* ``host-application-config``: ``{applications, nodeConfigs: [{name, nodeSelector, applications}]}``.

:class:`ManagerConfig` keeps every key in its ConfigMap layout, already merged the way
koord-manager merges it: the cluster strategy on top of Koordinator's defaults, each node entry on
top of the cluster strategy (``name``/``nodeSelector`` kept). Values are normalised the way Go's
typed decoding would leave them: unknown fields and JSON nulls dropped, field names matched
case-insensitively, durations in ``time.Duration`` form (``"5m"`` -> ``"5m0s"``) and
``totalNetworkBandwidth`` as a canonical quantity.

Deviations from koord-manager, all deliberate:

* every key is checked against its schema (``schemas/config/<key>/``) before it is put in force,
  so a value the ConfigMap webhook would reject (e.g. ``cpuReclaimThresholdPercent: -1``) is
  rejected here too and the last good value of that key stays in force; koord-manager only
  rejects JSON errors (and invalid colocation cluster strategies);
* a key present with an empty value means "defaults" for every key (Go's NodeSLO handler would
  fail to unmarshal ``""`` and keep the old value);
* unknown fields (which Go silently ignores) are applied without them and reported as warnings.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from dataclasses import dataclass, field, fields
from typing import Any, Callable

from koordinator.apis import quantity, schemas, slo_merge
# Shared with the koordlet; re-exported here for this module's callers.
from koordinator.apis.goduration import format_go_duration, parse_go_duration  # noqa: F401
from koordinator.apis.nodeslo_defaults import (DEFAULT_CPU_BURST_STRATEGY,  # noqa: F401
                                               DEFAULT_METRIC_AGGREGATE_DURATION_SECONDS,
                                               DEFAULT_METRIC_DURATIONS, DEFAULT_METRIC_MEMORY_COLLECT_POLICY,
                                               DEFAULT_METRIC_REPORT_INTERVAL_SECONDS,
                                               DEFAULT_RESOURCE_THRESHOLD_STRATEGY, DEFAULT_SYSTEM_STRATEGY)
from koordinator.apis.selectors import SelectorError, label_selector_from_dict
from koordinator.apis.slo_merge import merge_config

Obj = dict[str, Any]

COLOCATION_CONFIG_KEY = "colocation-config"
RESOURCE_THRESHOLD_CONFIG_KEY = "resource-threshold-config"
RESOURCE_QOS_CONFIG_KEY = "resource-qos-config"
CPU_BURST_CONFIG_KEY = "cpu-burst-config"
SYSTEM_CONFIG_KEY = "system-config"
HOST_APPLICATION_CONFIG_KEY = "host-application-config"
CPU_NORMALIZATION_CONFIG_KEY = "cpu-normalization-config"
RESOURCE_AMPLIFICATION_CONFIG_KEY = "resource-amplification-config"

SLO_CONFIG_KEYS = (
    COLOCATION_CONFIG_KEY,
    RESOURCE_THRESHOLD_CONFIG_KEY,
    RESOURCE_QOS_CONFIG_KEY,
    CPU_BURST_CONFIG_KEY,
    SYSTEM_CONFIG_KEY,
    HOST_APPLICATION_CONFIG_KEY,
    CPU_NORMALIZATION_CONFIG_KEY,
    RESOURCE_AMPLIFICATION_CONFIG_KEY,
)

# Node metadata read by the per-node colocation strategy (reference B.2.2).
ANNOTATION_COLOCATION_STRATEGY = "node.koordinator.sh/colocation-strategy"
LABEL_CPU_RECLAIM_RATIO = "node.koordinator.sh/cpu-reclaim-ratio"
LABEL_MEMORY_RECLAIM_RATIO = "node.koordinator.sh/memory-reclaim-ratio"
LABEL_MID_STATIC_CPU_RESERVED_RATIO = "node.koordinator.sh/mid-static-cpu-reserved-ratio"
LABEL_MID_STATIC_MEMORY_RESERVED_RATIO = "node.koordinator.sh/mid-static-memory-reserved-ratio"
_RATIO_LABELS = (
    (LABEL_CPU_RECLAIM_RATIO, "cpuReclaimThresholdPercent"),
    (LABEL_MEMORY_RECLAIM_RATIO, "memoryReclaimThresholdPercent"),
    (LABEL_MID_STATIC_CPU_RESERVED_RATIO, "midStaticCPUReservedPercent"),
    (LABEL_MID_STATIC_MEMORY_RESERVED_RATIO, "midStaticMemoryReservedPercent"),
)

SEVERITY_ERROR = "error"
SEVERITY_WARNING = "warning"

# Event reasons. The "...UnmarshalFailed" ones are koord-manager's; the "...Warning" ones are ours
# (koord-manager is silent about what it ignores).
_REASON_PREFIX = {
    COLOCATION_CONFIG_KEY: "ColocationCfg",
    CPU_NORMALIZATION_CONFIG_KEY: "CPUNormalizationCfg",
    RESOURCE_AMPLIFICATION_CONFIG_KEY: "ResourceAmplificationCfg",
}
REASON_UNKNOWN_KEY = "SLOCfgUnknownKey"


def problem_reason(key: str, severity: str) -> str:
    """The Event reason for a problem with ``key``: ``ColocationCfgUnmarshalFailed``, ``SLOCfgWarning``..."""
    prefix = _REASON_PREFIX.get(key, "SLOCfg")
    return prefix + ("UnmarshalFailed" if severity == SEVERITY_ERROR else "Warning")


# -- defaults (koord-manager's, reference B.2.2-B.2.9 and B.3.1) ------------------------------

DEFAULT_COLOCATION_STRATEGY: Obj = {
    "enable": False,
    "metricAggregateDurationSeconds": DEFAULT_METRIC_AGGREGATE_DURATION_SECONDS,
    "metricReportIntervalSeconds": DEFAULT_METRIC_REPORT_INTERVAL_SECONDS,
    "metricAggregatePolicy": {"durations": list(DEFAULT_METRIC_DURATIONS)},
    "metricMemoryCollectPolicy": DEFAULT_METRIC_MEMORY_COLLECT_POLICY,
    "cpuReclaimThresholdPercent": 60,
    "cpuCalculatePolicy": "usage",
    "memoryReclaimThresholdPercent": 65,
    "memoryCalculatePolicy": "usage",
    "degradeTimeMinutes": 15,
    "updateTimeThresholdSeconds": 300,
    "resourceDiffThreshold": 0.1,
    "midCPUThresholdPercent": 100,
    "midMemoryThresholdPercent": 100,
    "midUnallocatedPercent": 0,
    "midStaticCPUReservedPercent": 0,
    "midStaticMemoryReservedPercent": 0,
}
# The manager writes {} and leaves the per-class defaults to koordlet (pitfall 9).
DEFAULT_RESOURCE_QOS_STRATEGY: Obj = {}
DEFAULT_CPU_NORMALIZATION_STRATEGY: Obj = {"enable": False, "ratioModel": {}}
DEFAULT_RESOURCE_AMPLIFICATION_STRATEGY: Obj = {"enable": False}

_PROFILE_FIELDS = ("name", "nodeSelector")
GO_MAP_FIELDS = slo_merge.GO_MAP_FIELDS  # re-exported for this module's callers

# Go resource.Quantity fields, re-encoded canonically ("1000000" -> "1M") as Go would marshal them.
# (networkQOS bandwidths are IntOrString in Go and keep their form.)
_QUANTITY_FIELDS = frozenset({"totalNetworkBandwidth"})


# -- Go-style decoding of a document against its schema ----------------------------------------


class _DecodeError(ValueError):
    """A value Go's json.Unmarshal into the typed struct would refuse (wrong type, bad duration)."""


@dataclass
class _Decoded:
    value: Any
    renamed: list[tuple[str, str]] = field(default_factory=list)  # (path as written, field it matched)
    unknown: list[str] = field(default_factory=list)


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _go_decode(node: Any, value: Any, path: str = "", out: _Decoded | None = None) -> _Decoded:
    """``value`` as Go's typed decoding leaves it: see the module docstring. Raises _DecodeError."""
    out = out if out is not None else _Decoded(None)
    out.value = _decode_value(node if isinstance(node, dict) else {}, value, path, out)
    return out


def _decode_value(node: Obj, value: Any, path: str, out: _Decoded) -> Any:
    props = node.get("properties")
    extra = node.get("additionalProperties")
    typ = node.get("type")
    if props is not None or typ == "object" or isinstance(extra, dict):
        if not isinstance(value, dict):
            raise _DecodeError(f"{path or '<root>'}: cannot decode {_json_type(value)} into an object")
        if props is None and not isinstance(extra, dict):
            return copy.deepcopy(value)  # free-form (x-kubernetes-preserve-unknown-fields)
        result: Obj = {}
        lowered = {p.lower(): p for p in props or {}}
        for k, v in value.items():
            sub_path = _join(path, k)
            if props is not None and k in props:
                name, sub = k, props[k]
            elif props is not None and k.lower() in lowered:
                name, sub = lowered[k.lower()], props[lowered[k.lower()]]
                out.renamed.append((sub_path, name))
            elif isinstance(extra, dict):
                name, sub = k, extra
            else:
                out.unknown.append(sub_path)
                continue
            if v is None:
                result.pop(name, None)
                continue
            result[name] = _decode_value(sub, v, _join(path, name), out)
        return result
    if typ == "array":
        if not isinstance(value, list):
            raise _DecodeError(f"{path}: cannot decode {_json_type(value)} into an array")
        items = node.get("items") or {}
        return [_decode_value(items, v, f"{path}[{i}]", out) for i, v in enumerate(value) if v is not None]
    if node.get("format") == "duration" or typ == "string":
        if not isinstance(value, str):
            raise _DecodeError(f"{path}: cannot decode {_json_type(value)} into a string")
        if node.get("format") == "duration":
            try:
                return format_go_duration(parse_go_duration(value))
            except ValueError as exc:
                raise _DecodeError(f"{path}: {exc}") from None
        return value
    if typ == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            raise _DecodeError(f"{path}: cannot decode {_json_type(value)} {json.dumps(value)} into an integer")
        return value
    if typ == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise _DecodeError(f"{path}: cannot decode {_json_type(value)} into a number")
        return value
    if typ == "boolean":
        if not isinstance(value, bool):
            raise _DecodeError(f"{path}: cannot decode {_json_type(value)} into a boolean")
        return value
    if node.get("format") == "quantity":
        name = path.rsplit(".", 1)[-1]
        try:
            canonical = quantity.canonical(value)
        except (quantity.QuantityError, TypeError, ValueError):
            raise _DecodeError(f"{path}: {json.dumps(value)} is not a valid quantity") from None
        return canonical if name in _QUANTITY_FIELDS else copy.deepcopy(value)
    return copy.deepcopy(value)


def _json_type(value: Any) -> str:
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
            type(None): "null"}.get(type(value), type(value).__name__)


@functools.lru_cache(maxsize=None)
def _schema(key: str) -> Obj:
    return schemas.config_schema(key).schema


@functools.lru_cache(maxsize=None)
def _colocation_strategy_schema() -> Obj:
    """The colocation-config schema minus ``nodeConfigs``: what a node annotation may hold."""
    s = copy.deepcopy(_schema(COLOCATION_CONFIG_KEY))
    s["properties"].pop("nodeConfigs", None)
    return s


# -- the configuration ---------------------------------------------------------------------------


def _inline_defaults(strategy: Obj) -> Obj:
    return {**copy.deepcopy(strategy), "nodeConfigs": []}


def _cluster_defaults(strategy: Obj) -> Obj:
    return {"clusterStrategy": copy.deepcopy(strategy), "nodeStrategies": []}


@dataclass
class ManagerConfig:
    """Everything the manager derives from ``slo-controller-config``: one merged config per key.

    Each attribute keeps its key's ConfigMap layout, merged:

    * ``colocation``, ``cpu_normalization``, ``resource_amplification``: the cluster strategy's
      fields inline (merged on Koordinator's defaults) plus ``nodeConfigs`` (each entry's strategy
      merged on top of the cluster strategy, ``name``/``nodeSelector`` kept);
    * ``threshold``, ``resource_qos``, ``cpu_burst``, ``system``: ``{"clusterStrategy": ...,
      "nodeStrategies": [...]}``, merged the same way;
    * ``host_application``: ``{"applications": [...], "nodeConfigs": [...]}`` verbatim (no merging).

    ``colocation_error`` is koord-manager's colocation ``errorStatus``: True after the ConfigMap
    was deleted or ``colocation-config`` was rejected; NodeMetric specs freeze while it is True.
    Equality is deep, so ``new != old`` tells whether anything changed (:meth:`changed_keys` says what).
    """

    colocation: Obj = field(default_factory=lambda: _inline_defaults(DEFAULT_COLOCATION_STRATEGY))
    colocation_error: bool = False
    cpu_normalization: Obj = field(default_factory=lambda: _inline_defaults(DEFAULT_CPU_NORMALIZATION_STRATEGY))
    resource_amplification: Obj = field(
        default_factory=lambda: _inline_defaults(DEFAULT_RESOURCE_AMPLIFICATION_STRATEGY))
    threshold: Obj = field(default_factory=lambda: _cluster_defaults(DEFAULT_RESOURCE_THRESHOLD_STRATEGY))
    resource_qos: Obj = field(default_factory=lambda: _cluster_defaults(DEFAULT_RESOURCE_QOS_STRATEGY))
    cpu_burst: Obj = field(default_factory=lambda: _cluster_defaults(DEFAULT_CPU_BURST_STRATEGY))
    system: Obj = field(default_factory=lambda: _cluster_defaults(DEFAULT_SYSTEM_STRATEGY))
    host_application: Obj = field(default_factory=lambda: {"applications": [], "nodeConfigs": []})

    @classmethod
    def defaults(cls) -> "ManagerConfig":
        """The configuration without a ConfigMap key: Koordinator's defaults, no node entries."""
        return cls()

    def copy(self) -> "ManagerConfig":
        """A deep copy (callers may modify it freely)."""
        return copy.deepcopy(self)

    def colocation_cluster_enabled(self) -> bool:
        """The cluster-level ``colocation-config`` ``enable`` (noderesource needs it AND the node's)."""
        return bool(self.colocation.get("enable"))

    def changed_keys(self, other: "ManagerConfig | None") -> set[str]:
        """The ConfigMap keys whose merged value differs from ``other`` (all keys when other is None).

        A flip of ``colocation_error`` counts as a change of ``colocation-config``.
        """
        out = set()
        for attr, key in _ATTR_KEYS.items():
            if other is None or getattr(self, attr) != getattr(other, attr):
                out.add(key)
        if other is not None and self.colocation_error != other.colocation_error:
            out.add(COLOCATION_CONFIG_KEY)
        return out


_ATTR_KEYS = {
    "colocation": COLOCATION_CONFIG_KEY,
    "threshold": RESOURCE_THRESHOLD_CONFIG_KEY,
    "resource_qos": RESOURCE_QOS_CONFIG_KEY,
    "cpu_burst": CPU_BURST_CONFIG_KEY,
    "system": SYSTEM_CONFIG_KEY,
    "host_application": HOST_APPLICATION_CONFIG_KEY,
    "cpu_normalization": CPU_NORMALIZATION_CONFIG_KEY,
    "resource_amplification": RESOURCE_AMPLIFICATION_CONFIG_KEY,
}
_KEY_ATTRS = {v: k for k, v in _ATTR_KEYS.items()}
assert set(_ATTR_KEYS) | {"colocation_error"} == {f.name for f in fields(ManagerConfig)}


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with a key of ``slo-controller-config``.

    ``message`` names the field and value (``data.<key>.<path>: <what>``). ``severity`` is
    ``"error"`` when the key was rejected (its last good value stays in force) or ``"warning"``
    when it was applied anyway (unknown fields, a field name matched case-insensitively, a
    selector that can never match). ``reason`` is the Event reason (:func:`problem_reason`).
    """

    key: str
    message: str
    severity: str
    reason: str


def _problem(key: str, path: str, message: str, severity: str) -> ConfigProblem:
    where = f"data.{key}" + (f".{path}" if path else "")
    return ConfigProblem(key, f"{where}: {message}", severity, problem_reason(key, severity))


# -- parsing -------------------------------------------------------------------------------------


def parse_slo_controller_config(configmap: Obj | None,
                                previous: ManagerConfig | None) -> tuple[ManagerConfig, list[ConfigProblem]]:
    """Parse the ConfigMap (None = absent/deleted) into a :class:`ManagerConfig` and its problems.

    * ConfigMap None: every key takes its defaults and ``colocation_error`` is True (koord-manager:
      a deleted ConfigMap resets the colocation cache to defaults in error status, whatever came
      before; the NodeSLO cache just resets).
    * A key missing or empty: that key's defaults (``colocation_error`` False).
    * A key that is not JSON, or that its schema rejects: the previous value of THAT key stays
      (the default when there is no previous config) and a ``severity="error"`` problem is
      reported; for colocation-config ``colocation_error`` becomes True.
    * Unknown fields: applied without them, ``severity="warning"`` problems.
    * Keys this manager does not know: a warning each (koord-manager ignores them).
    """
    if configmap is None:
        return ManagerConfig(colocation_error=True), []
    prev = previous if previous is not None else ManagerConfig.defaults()
    data = configmap.get("data") or {}
    problems: list[ConfigProblem] = []
    if not isinstance(data, dict):
        problems.append(ConfigProblem("", "data: must be an object of strings", SEVERITY_ERROR,
                                      "SLOCfgUnmarshalFailed"))
        data = {}
    cfg = ManagerConfig()
    for key in SLO_CONFIG_KEYS:
        attr = _KEY_ATTRS[key]
        text = data.get(key)
        if text is None or (isinstance(text, str) and not text.strip()):
            continue  # defaults
        doc, key_problems = _load_key(key, text)
        problems += key_problems
        merged = None
        if doc is not None:
            merged, more = _MERGERS[key](key, doc)
            problems += more
        if merged is None:
            setattr(cfg, attr, copy.deepcopy(getattr(prev, attr)))
            if key == COLOCATION_CONFIG_KEY:
                cfg.colocation_error = True
        else:
            setattr(cfg, attr, merged)
    for key in data:
        if key not in SLO_CONFIG_KEYS:
            hint = schemas.suggest(key, SLO_CONFIG_KEYS)
            problems.append(ConfigProblem(
                key, f"data.{key}: unknown key, ignored" + (f"; did you mean {hint!r}?" if hint else ""),
                SEVERITY_WARNING, REASON_UNKNOWN_KEY))
    return cfg, problems


def _load_key(key: str, text: Any) -> tuple[Obj | None, list[ConfigProblem]]:
    """The key's document, Go-decoded, or None when it must be rejected; with its problems."""
    if not isinstance(text, str):
        return None, [_problem(key, "", f"Invalid value: {json.dumps(text)}: must be a string", SEVERITY_ERROR)]
    try:
        raw = json.loads(text)
    except ValueError:
        _, errs = schemas.validate_config(key, text)
        return None, [_problem(key, e.path, e.message, SEVERITY_ERROR) for e in errs]
    if raw is None:
        raw = {}  # Go: unmarshalling null leaves the struct empty
    schema = _schema(key)
    renames: list[tuple[str, str]] = []
    doc = _rename_only(schema, raw, "", renames)
    problems = [_problem(key, path, f"field name matches {name!r} only case-insensitively; applied as {name!r}",
                         SEVERITY_WARNING) for path, name in renames]
    _, errs = schemas.validate_config(key, doc)
    rejected = False
    for e in errs:
        unknown = e.message.startswith("unknown field")
        rejected = rejected or not unknown
        problems.append(_problem(key, e.path, e.message, SEVERITY_WARNING if unknown else SEVERITY_ERROR))
    if rejected:
        return None, problems
    try:
        return _go_decode(schema, doc).value, problems
    except _DecodeError as exc:  # a value the schema lets through but Go's decoder would refuse
        return None, problems + [_problem(key, "", str(exc), SEVERITY_ERROR)]


def _rename_only(node: Any, value: Any, path: str, renames: list[tuple[str, str]]) -> Any:
    """``value`` with field names that match only case-insensitively renamed to the schema's spelling.

    Go's decoder matches field names that way; the later of two spellings wins, as in Go.
    """
    if not isinstance(node, dict):
        return value
    props = node.get("properties")
    if isinstance(value, dict) and props is not None:
        lowered = {p.lower(): p for p in props}
        out: Obj = {}
        for k, v in value.items():
            name = k if k in props else lowered.get(k.lower(), k)
            if name != k:
                renames.append((_join(path, k), name))
                out.pop(name, None)
            out[name] = _rename_only(props.get(name), v, _join(path, name), renames)
        return out
    if isinstance(value, dict) and isinstance(node.get("additionalProperties"), dict):
        return {k: _rename_only(node["additionalProperties"], v, _join(path, k), renames) for k, v in value.items()}
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [_rename_only(node["items"], v, f"{path}[{i}]", renames) for i, v in enumerate(value)]
    return value


def _split_profile(entry: Obj) -> tuple[Obj, Obj]:
    profile = {k: copy.deepcopy(entry[k]) for k in _PROFILE_FIELDS if k in entry}
    strategy = {k: v for k, v in entry.items() if k not in _PROFILE_FIELDS}
    return profile, strategy


def _selector_warnings(key: str, entries: list[Obj], list_name: str) -> list[ConfigProblem]:
    out = []
    for i, entry in enumerate(entries):
        try:
            label_selector_from_dict(entry.get("nodeSelector"))
        except SelectorError as exc:
            out.append(_problem(key, f"{list_name}[{i}].nodeSelector", f"{exc}; this entry never matches a node",
                                SEVERITY_WARNING))
    return out


def _merge_inline(defaults: Obj, validity: Callable[[Obj], bool] | None = None):
    def merge(key: str, doc: Obj) -> tuple[Obj | None, list[ConfigProblem]]:
        problems: list[ConfigProblem] = []
        node_entries = doc.get("nodeConfigs") or []
        cluster = merge_config(defaults, {k: v for k, v in doc.items() if k != "nodeConfigs"})
        if validity is not None and not validity(cluster):
            problems.append(_problem(key, "", "the cluster strategy is invalid", SEVERITY_ERROR))
            return None, problems
        merged_entries = []
        for i, entry in enumerate(node_entries):
            profile, strategy = _split_profile(entry)
            merged = merge_config(cluster, strategy)
            if validity is not None and not validity(merged):
                # koord-manager's rule (B.2.2 #5). The schema already rejects every field that would
                # make a merged strategy invalid, so this only guards configs built without it.
                problems.append(_problem(key, f"nodeConfigs[{i}]", "the merged strategy is invalid; "
                                                                   "the cluster strategy applies", SEVERITY_WARNING))
                merged = copy.deepcopy(cluster)
            merged_entries.append({**profile, **merged})
        problems += _selector_warnings(key, merged_entries, "nodeConfigs")
        return {**cluster, "nodeConfigs": merged_entries}, problems
    return merge


def _merge_cluster(defaults: Obj):
    def merge(key: str, doc: Obj) -> tuple[Obj | None, list[ConfigProblem]]:
        cluster = merge_config(defaults, doc.get("clusterStrategy"))
        entries = []
        for entry in doc.get("nodeStrategies") or []:
            profile, strategy = _split_profile(entry)
            entries.append({**profile, **merge_config(cluster, strategy)})
        return {"clusterStrategy": cluster, "nodeStrategies": entries}, _selector_warnings(key, entries,
                                                                                             "nodeStrategies")
    return merge


def _merge_host_application(key: str, doc: Obj) -> tuple[Obj | None, list[ConfigProblem]]:
    out = {"applications": copy.deepcopy(doc.get("applications") or []),
           "nodeConfigs": copy.deepcopy(doc.get("nodeConfigs") or [])}
    return out, _selector_warnings(key, out["nodeConfigs"], "nodeConfigs")


def is_colocation_strategy_valid(strategy: Obj | None) -> bool:
    """Koordinator's ``IsColocationStrategyValid``: every field present is in its valid range."""
    if not isinstance(strategy, dict):
        return False

    def ok(name: str, check: Callable[[Any], bool]) -> bool:
        v = strategy.get(name)
        if v is None:
            return True
        try:
            return bool(check(v))
        except TypeError:
            return False

    positive = lambda v: v > 0  # noqa: E731
    non_negative = lambda v: v >= 0  # noqa: E731
    percent = lambda v: 0 <= v <= 100  # noqa: E731
    return all((
        ok("metricAggregateDurationSeconds", positive),
        ok("metricReportIntervalSeconds", positive),
        ok("cpuReclaimThresholdPercent", non_negative),
        ok("midStaticCPUReservedPercent", non_negative),
        ok("memoryReclaimThresholdPercent", non_negative),
        ok("midStaticMemoryReservedPercent", non_negative),
        ok("degradeTimeMinutes", positive),
        ok("updateTimeThresholdSeconds", positive),
        ok("resourceDiffThreshold", positive),
        ok("metricMemoryCollectPolicy", lambda v: len(v) > 0),
        ok("midCPUThresholdPercent", percent),
        ok("midMemoryThresholdPercent", percent),
        ok("midUnallocatedPercent", percent),
        ok("batchCPUThresholdPercent", non_negative),
        ok("batchMemoryThresholdPercent", non_negative),
    ))


_MERGERS: dict[str, Callable[[str, Obj], tuple[Obj | None, list[ConfigProblem]]]] = {
    COLOCATION_CONFIG_KEY: _merge_inline(DEFAULT_COLOCATION_STRATEGY, is_colocation_strategy_valid),
    CPU_NORMALIZATION_CONFIG_KEY: _merge_inline(DEFAULT_CPU_NORMALIZATION_STRATEGY),
    RESOURCE_AMPLIFICATION_CONFIG_KEY: _merge_inline(DEFAULT_RESOURCE_AMPLIFICATION_STRATEGY),
    RESOURCE_THRESHOLD_CONFIG_KEY: _merge_cluster(DEFAULT_RESOURCE_THRESHOLD_STRATEGY),
    RESOURCE_QOS_CONFIG_KEY: _merge_cluster(DEFAULT_RESOURCE_QOS_STRATEGY),
    CPU_BURST_CONFIG_KEY: _merge_cluster(DEFAULT_CPU_BURST_STRATEGY),
    SYSTEM_CONFIG_KEY: _merge_cluster(DEFAULT_SYSTEM_STRATEGY),
    HOST_APPLICATION_CONFIG_KEY: _merge_host_application,
}


# -- per-node strategies -------------------------------------------------------------------------


def _labels(node: Obj | None) -> dict[str, str]:
    return ((node or {}).get("metadata") or {}).get("labels") or {}


def _annotations(node: Obj | None) -> dict[str, str]:
    return ((node or {}).get("metadata") or {}).get("annotations") or {}


def first_matching(entries: list[Obj], node: Obj | None) -> Obj | None:
    """The first entry whose ``nodeSelector`` matches the node's labels (unparsable selectors skipped)."""
    labels = _labels(node)
    for entry in entries or []:
        try:
            selector = label_selector_from_dict(entry.get("nodeSelector"))
        except SelectorError:
            continue
        if selector.matches(labels):
            return entry
    return None


def _strategy_of(entry: Obj, drop: tuple[str, ...]) -> Obj:
    return {k: copy.deepcopy(v) for k, v in entry.items() if k not in drop}


def _inline_strategy(layout: Obj, node: Obj | None) -> Obj:
    entry = first_matching(layout.get("nodeConfigs") or [], node)
    if entry is not None:
        return _strategy_of(entry, _PROFILE_FIELDS)
    return _strategy_of(layout, ("nodeConfigs",))


def node_strategy(layout: Obj, node: Obj | None) -> Obj:
    """For a "clusterStrategy + nodeStrategies" layout: the first matching node strategy, else the cluster's."""
    entry = first_matching(layout.get("nodeStrategies") or [], node)
    if entry is not None:
        return _strategy_of(entry, _PROFILE_FIELDS)
    return copy.deepcopy(layout.get("clusterStrategy") or {})


def colocation_strategy_on_node(node: Obj | None) -> Obj | None:
    """The node's ``node.koordinator.sh/colocation-strategy`` annotation, Go-decoded; None if absent or bad."""
    text = _annotations(node).get(ANNOTATION_COLOCATION_STRATEGY)
    if text is None:
        return None
    try:
        raw = json.loads(text)
        return _go_decode(_colocation_strategy_schema(), {} if raw is None else raw).value
    except (ValueError, TypeError):  # _DecodeError is a ValueError
        return None


def reclaim_percent_from_label(node: Obj | None, label: str) -> int | None:
    """A ratio label as a percent, ``int(ratio * 100)`` in IEEE doubles ("0.29" -> 28); None if absent/bad/negative."""
    text = _labels(node).get(label)
    if text is None or "_" in text:  # Go's ParseFloat takes no digit separators here
        return None
    try:
        ratio = float(text)
    except ValueError:
        return None
    if ratio < 0 or not math.isfinite(ratio):
        return None
    return int(ratio * 100)


def colocation_strategy(cfg: ManagerConfig, node: Obj | None) -> Obj:
    """The node's colocation strategy (B.2.2): cluster, first matching nodeConfig, annotation, ratio labels."""
    strategy = _inline_strategy(cfg.colocation, node)
    on_node = colocation_strategy_on_node(node)
    if on_node:
        strategy = merge_config(strategy, on_node)
    for label, name in _RATIO_LABELS:
        percent = reclaim_percent_from_label(node, label)
        if percent is not None:
            strategy[name] = percent
    return strategy


def cpu_normalization_strategy(cfg: ManagerConfig, node: Obj | None) -> Obj:
    """The cluster CPU normalization strategy, or the (merged) one of the first matching nodeConfig."""
    return _inline_strategy(cfg.cpu_normalization, node)


def resource_amplification_strategy(cfg: ManagerConfig, node: Obj | None) -> Obj:
    """The cluster resource amplification strategy, or the (merged) one of the first matching nodeConfig."""
    return _inline_strategy(cfg.resource_amplification, node)
