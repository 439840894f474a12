"""MigrationControllerArgs (descheduler/v1alpha2): Koordinator's defaults and validation (reference §1.7.1).

A ValueError names the offending field and value. Skipped eviction gates are applied here, so the filters read
the *effective* settings (e.g. skipping ``LocalStorage`` turns on ``evictLocalStoragePods``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import migration as mj
from koordinator.apis.goduration import parse_go_duration
from koordinator.apis.pluginargs import bool_arg
from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict, parse_label_selector

RETRYABLE_GATES = ("MaxUnavailablePerWorkload", "MaxMigratingPerWorkload", "MaxMigratingPerNode",
                   "MaxMigratingPerNamespace", "MaxMigratingGlobally")
POLICY_GATES = ("ExpectedReplicas", "PVC", "BarePods", "LocalStorage", "SystemCritical", "PriorityThreshold",
                "LabelSelector", "Namespaces", "NodeFit")
EVICTION_POLICIES = ("Eviction", "Delete", "SoftEviction")
OBJECT_LIMITER_TYPES = ("workload", "namespace")


@dataclass
class ObjectLimiterArgs:
    """One migration-rate limiter: at most ``max_migrating`` per ``duration_seconds`` (burst ``burst``)."""

    duration_seconds: float = 0.0
    max_migrating: int | str | None = None
    burst: int = 0


@dataclass
class MigrationControllerArgs:
    """Validated, defaulted MigrationControllerArgs (durations in seconds)."""

    dry_run: bool = False
    max_concurrent_reconciles: int = 1
    evict_failed_bare_pods: bool = False
    evict_all_bare_pods: bool = False
    evict_local_storage_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    priority_threshold_value: int | None = None
    priority_threshold_name: str = ""
    label_selector: LabelSelector | None = None
    namespaces_include: list[str] = field(default_factory=list)
    namespaces_exclude: list[str] = field(default_factory=list)
    #: ``nodeFit``: a pod must fit some other ready node (among those ``node_selector`` matches; None: all).
    node_fit: bool = False
    node_selector: LabelSelector | None = None
    skip_eviction_gates: list[str] = field(default_factory=list)
    max_migrating_globally: int | None = None
    max_migrating_per_node: int | None = 2
    max_migrating_per_namespace: int | None = None
    max_migrating_per_workload: int | str | None = None
    max_unavailable_per_workload: int | str | None = None
    skip_check_expected_replicas: bool = False
    check_expected_replicas: bool = True
    object_limiters: dict[str, ObjectLimiterArgs] = field(
        default_factory=lambda: {"workload": ObjectLimiterArgs(duration_seconds=300.0)})
    default_job_mode: str = mj.MODE_RESERVATION_FIRST
    default_job_ttl_seconds: float = 300.0
    scheduler_names: list[str] = field(default_factory=lambda: ["koord-scheduler"])
    evict_qps: float = 10.0
    evict_burst: int = 1
    eviction_policy: str = "Eviction"
    default_delete_options: dict | None = None
    arbitration_interval_seconds: float = 0.5

    def skipped(self, gate: str) -> bool:
        return gate in self.skip_eviction_gates


def _int(args: Mapping[str, Any], key: str, default: int | None, minimum: int) -> int | None:
    v = args.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{key}: Invalid value: {v!r}: must be an integer")
    if v < minimum:
        raise ValueError(f"{key}: Invalid value: {v}: must be greater than or equal to {minimum}")
    return v


def _duration(value: Any, key: str, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, str):
        raise ValueError(f"{key}: Invalid value: {value!r}: must be a duration string like \"5m\"")
    try:
        seconds = parse_go_duration(value) / 1e9
    except ValueError:
        raise ValueError(f"{key}: Invalid value: {value!r}: must be a duration string like \"5m\"") from None
    if seconds < 0:
        raise ValueError(f"{key}: Invalid value: {value!r}: must be greater than or equal to 0")
    return seconds


def _strings(args: Mapping[str, Any], key: str, default: list[str] | None = None) -> list[str]:
    v = args.get(key)
    if v is None:
        return list(default or [])
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{key}: Invalid value: {v!r}: must be a list of strings")
    return list(v)


def _node_selector(value: Any) -> LabelSelector | None:
    """``nodeSelector``: a label selector string (``labels.Parse`` syntax); None when empty."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ValueError(f"nodeSelector: Invalid value: {value!r}: must be a label selector string like \"a=b,c!=d\"")
    try:
        return parse_label_selector(value)
    except SelectorError as exc:
        raise ValueError(f"nodeSelector: Invalid value: {value!r}: {exc}") from None


def _one_of(args: Mapping[str, Any], key: str, default: str, allowed: tuple[str, ...]) -> str:
    v = args.get(key)
    if v is None or v == "":
        return default
    if v not in allowed:
        raise ValueError(f"{key}: Unsupported value: {v!r}: supported values: {', '.join(allowed)}")
    return v


def _object_limiters(raw: Any) -> dict[str, ObjectLimiterArgs]:
    if raw is None:
        return {"workload": ObjectLimiterArgs(duration_seconds=300.0)}
    if not isinstance(raw, Mapping):
        raise ValueError(f"objectLimiters: Invalid value: {raw!r}: must be a map of type to limiter")
    out: dict[str, ObjectLimiterArgs] = {}
    for kind, spec in raw.items():
        path = f"objectLimiters.{kind}"
        if kind not in OBJECT_LIMITER_TYPES:
            raise ValueError(f"{path}: Unsupported value: {kind!r}: supported values: "
                             f"{', '.join(OBJECT_LIMITER_TYPES)}")
        if not isinstance(spec, Mapping):
            raise ValueError(f"{path}: Invalid value: {spec!r}: must be an object")
        out[kind] = ObjectLimiterArgs(
            duration_seconds=_duration(spec.get("duration"), f"{path}.duration", 0.0),
            max_migrating=mj.parse_int_or_percent(spec.get("maxMigrating"), f"{path}.maxMigrating"),
            burst=_int(spec, "burst", 0, 0) if "burst" in spec else 0)
    return out


def _qps(value: Any) -> float:
    if value is None:
        return 10.0
    try:
        qps = float(value) if not isinstance(value, bool) else -1.0
    except (TypeError, ValueError):
        qps = -1.0
    if not qps > 0:
        raise ValueError(f"evictQPS: Invalid value: {value!r}: must be a number greater than 0")
    return qps


def parse_args(args: Mapping[str, Any] | None) -> MigrationControllerArgs:
    """Apply Koordinator's defaults, validate, then apply ``skipEvictionGates``."""
    args = dict(args or {})
    args.pop("apiVersion", None)
    args.pop("kind", None)
    out = MigrationControllerArgs()
    out.dry_run = bool_arg(args, "dryRun")
    out.max_concurrent_reconciles = _int(args, "maxConcurrentReconciles", 1, 1)
    out.evict_failed_bare_pods = bool_arg(args, "evictFailedBarePods")
    out.evict_all_bare_pods = bool_arg(args, "evictAllBarePods")
    out.evict_local_storage_pods = bool_arg(args, "evictLocalStoragePods")
    out.evict_system_critical_pods = bool_arg(args, "evictSystemCriticalPods")
    out.ignore_pvc_pods = bool_arg(args, "ignorePvcPods")
    threshold = args.get("priorityThreshold")
    if threshold is not None:
        if not isinstance(threshold, Mapping):
            raise ValueError(f"priorityThreshold: Invalid value: {threshold!r}: must be an object")
        out.priority_threshold_value = _int(threshold, "value", None, -(2 ** 31))
        name = threshold.get("name") or ""
        if not isinstance(name, str):
            raise ValueError(f"priorityThreshold.name: Invalid value: {name!r}: must be a string")
        if name and out.priority_threshold_value is not None:
            raise ValueError("priorityThreshold: Invalid value: only one of priorityThreshold fields can be set")
        out.priority_threshold_name = name
    if args.get("labelSelector") is not None:
        try:
            out.label_selector = label_selector_from_dict(args["labelSelector"])
        except SelectorError as exc:
            raise ValueError(f"labelSelector: Invalid value: {args['labelSelector']!r}: {exc}") from None
    namespaces = args.get("namespaces")
    if namespaces is not None:
        if not isinstance(namespaces, Mapping):
            raise ValueError(f"namespaces: Invalid value: {namespaces!r}: must be an object")
        out.namespaces_include = _strings(namespaces, "include")
        out.namespaces_exclude = _strings(namespaces, "exclude")
        if out.namespaces_include and out.namespaces_exclude:
            raise ValueError("namespaces: Invalid value: only one of Include/Exclude namespaces can be set")
    out.node_fit = bool_arg(args, "nodeFit")
    out.node_selector = _node_selector(args.get("nodeSelector"))
    out.skip_eviction_gates = _strings(args, "skipEvictionGates")
    for i, gate in enumerate(out.skip_eviction_gates):
        if gate not in RETRYABLE_GATES + POLICY_GATES:
            raise ValueError(f"skipEvictionGates[{i}]: Unsupported value: {gate!r}: supported values: "
                             f"{', '.join(RETRYABLE_GATES + POLICY_GATES)}")
    out.max_migrating_globally = _int(args, "maxMigratingGlobally", None, 0)
    out.max_migrating_per_node = _int(args, "maxMigratingPerNode", 2, 0)
    out.max_migrating_per_namespace = _int(args, "maxMigratingPerNamespace", None, 0)
    out.max_migrating_per_workload = mj.parse_int_or_percent(args.get("maxMigratingPerWorkload"),
                                                             "maxMigratingPerWorkload")
    out.max_unavailable_per_workload = mj.parse_int_or_percent(args.get("maxUnavailablePerWorkload"),
                                                               "maxUnavailablePerWorkload")
    out.skip_check_expected_replicas = bool_arg(args, "skipCheckExpectedReplicas")
    out.object_limiters = _object_limiters(args.get("objectLimiters"))
    out.default_job_mode = _one_of(args, "defaultJobMode", mj.MODE_RESERVATION_FIRST, mj.MODES)
    out.default_job_ttl_seconds = _duration(args.get("defaultJobTTL"), "defaultJobTTL", 300.0)
    out.scheduler_names = _strings(args, "schedulerNames", ["koord-scheduler"])
    out.evict_qps = _qps(args.get("evictQPS"))
    out.evict_burst = _int(args, "evictBurst", 1, 1)
    out.eviction_policy = _one_of(args, "evictionPolicy", "Eviction", EVICTION_POLICIES)
    options = args.get("defaultDeleteOptions")
    if options is not None and not isinstance(options, Mapping):
        raise ValueError(f"defaultDeleteOptions: Invalid value: {options!r}: must be a DeleteOptions object")
    out.default_delete_options = dict(options) if options else None
    arbitration = args.get("arbitrationArgs") or {}
    if not isinstance(arbitration, Mapping):
        raise ValueError(f"arbitrationArgs: Invalid value: {arbitration!r}: must be an object")
    out.arbitration_interval_seconds = _duration(arbitration.get("interval"), "arbitrationArgs.interval", 0.5)
    if out.arbitration_interval_seconds == 0:
        out.arbitration_interval_seconds = 0.5
    _apply_skipped_gates(out)
    return out


def _apply_skipped_gates(out: MigrationControllerArgs) -> None:
    """Skipping a policy gate relaxes the matching setting (Koordinator's effective args)."""
    if out.skipped("NodeFit"):
        out.node_fit = False
    if out.skipped("LabelSelector"):
        out.label_selector = None
    if out.skipped("PriorityThreshold"):
        out.priority_threshold_value, out.priority_threshold_name = None, ""
    if out.skipped("LocalStorage"):
        out.evict_local_storage_pods = True
    if out.skipped("SystemCritical"):
        out.evict_system_critical_pods = True
    if out.skipped("PVC"):
        out.ignore_pvc_pods = False
    if out.skipped("BarePods"):
        out.evict_failed_bare_pods = out.evict_all_bare_pods = True
    if out.skipped("Namespaces"):
        out.namespaces_include, out.namespaces_exclude = [], []
    if out.skipped("ExpectedReplicas"):
        out.check_expected_replicas = False
