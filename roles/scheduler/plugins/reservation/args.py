"""ReservationArgs: Koordinator's defaults and validation; a ValueError names the offending field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis.pluginargs import bool_arg


@dataclass
class ReservationArgs:
    """Validated, defaulted ReservationArgs (durations in seconds)."""

    enable_preemption: bool = False
    min_candidate_nodes_percentage: int = 10
    min_candidate_nodes_absolute: int = 100
    controller_workers: int = 1
    gc_duration_seconds: int = 86400
    gc_interval_seconds: int = 60
    disable_garbage_collection: bool = False
    resync_interval_seconds: int = 60
    ignored_resources: list[str] = field(default_factory=list)
    ignored_resource_groups: list[str] = field(default_factory=list)

    def ignores(self, resource: str) -> bool:
        """Whether the reservation fit checks skip ``resource`` (ignoredResources / ignoredResourceGroups)."""
        if resource in self.ignored_resources:
            return True
        return "/" in resource and resource.split("/", 1)[0] in self.ignored_resource_groups


def _int(args: Mapping[str, Any], key: str, default: int, minimum: int, maximum: int | None = None) -> int:
    v = args.get(key)
    if v is None:
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"{key}: Invalid value: {v!r}: must be an integer")
    if v < minimum:
        raise ValueError(f"{key}: Invalid value: {v}: must be greater than or equal to {minimum}")
    if maximum is not None and v > maximum:
        raise ValueError(f"{key}: Invalid value: {v}: must be less than or equal to {maximum}")
    return v


def _is_native(name: str) -> bool:
    return "/" not in name or name.startswith("kubernetes.io/")


def _strings(args: Mapping[str, Any], key: str) -> list[str]:
    v = args.get(key)
    if v is None:
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ValueError(f"{key}: Invalid value: {v!r}: must be a list of strings")
    return list(v)


def parse_args(args: Mapping[str, Any] | None) -> ReservationArgs:
    """Apply Koordinator's defaults and validate; unsupported features are refused by name."""
    args = args or {}
    out = ReservationArgs()
    out.enable_preemption = bool_arg(args, "enablePreemption", False)
    out.min_candidate_nodes_percentage = _int(args, "minCandidateNodesPercentage", 10, 0, 100)
    out.min_candidate_nodes_absolute = _int(args, "minCandidateNodesAbsolute", 100, 0)
    if out.min_candidate_nodes_percentage == 0 and out.min_candidate_nodes_absolute == 0:
        # Upstream's rule: the preemption dry run would look for no candidate at all.
        raise ValueError("minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
                         "minCandidateNodesAbsolute")
    out.controller_workers = _int(args, "controllerWorkers", 1, 1)
    out.gc_duration_seconds = _int(args, "gcDurationSeconds", 86400, 0)
    out.gc_interval_seconds = _int(args, "gcIntervalSeconds", 60, 1)
    out.disable_garbage_collection = bool_arg(args, "disableGarbageCollection", False)
    out.resync_interval_seconds = _int(args, "resyncIntervalSeconds", 60, 1)
    out.ignored_resources = _strings(args, "ignoredResources")
    for i, name in enumerate(out.ignored_resources):
        if _is_native(name):
            raise ValueError(f"ignoredResources[{i}]: Invalid value: {name!r}: native resources cannot be ignored")
    out.ignored_resource_groups = _strings(args, "ignoredResourceGroups")
    for i, group in enumerate(out.ignored_resource_groups):
        if "/" in group or group == "kubernetes.io":
            raise ValueError(f"ignoredResourceGroups[{i}]: Invalid value: {group!r}: must be a vendor domain "
                             "without '/' and not kubernetes.io")
    pre = args.get("preAllocationConfig")
    if pre is not None and not isinstance(pre, Mapping):
        raise ValueError(f"preAllocationConfig: Invalid value: {pre!r}: must be an object")
    index = args.get("reservationSelectorIndex")
    if isinstance(index, Mapping) and index.get("enabled"):
        raise ValueError("reservationSelectorIndex.enabled: Unsupported value: true: the reservation selector "
                         "index is not implemented in this build")
    return out
