"""CustomPriorityArgs (``descheduler/v1alpha2``): defaults and validation (reference §1.8).

The schema ``schemas/config/CustomPriority-args/v1alpha2.yaml`` defaults the args and checks what a structural
schema can (types, ``mode``, at least two ``evictionOrder`` entries, DNS-1123 names, required nodeSelectors,
thresholds in 0-100); :func:`parse_args` adds what it cannot (unique names, valid selectors, include *or*
exclude) and raises ``ValueError`` in kube wording (``field: Invalid value: X: why``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import schemas
from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict

SCHEMA = "CustomPriority-args"
SCHEMA_VERSION = "v1alpha2"

BEST_EFFORT = "BestEffort"
DRAIN_NODE = "DrainNode"


@dataclass
class PriorityLevel:
    """One entry of ``evictionOrder``: a named node pool. The thresholds are validated but unused (as upstream)."""

    name: str
    node_selector: LabelSelector
    keep_threshold: dict[str, float] = field(default_factory=dict)
    reject_threshold: dict[str, float] = field(default_factory=dict)


@dataclass
class PodSelector:
    """A named label selector; with any given, a pod must match one to be evicted."""

    name: str
    selector: LabelSelector


@dataclass
class CustomPriorityArgs:
    """The plugin's settings after defaulting and validation."""

    eviction_order: list[PriorityLevel]
    paused: bool = False
    dry_run: bool = False
    include_namespaces: list[str] | None = None
    exclude_namespaces: list[str] | None = None
    node_selector: LabelSelector | None = None
    pod_selectors: list[PodSelector] = field(default_factory=list)
    node_fit: bool = True
    mode: str = BEST_EFFORT
    auto_cordon: bool = False


def parse_args(raw: Mapping[str, Any] | None) -> CustomPriorityArgs:
    """Validate and default the plugin's args; ValueError naming the field and value if bad."""
    document, errors = schemas.validate_config(SCHEMA, dict(raw or {}), SCHEMA_VERSION)
    if errors:
        raise ValueError("; ".join(f"{e.path}: {e.message}" if e.path else e.message for e in errors))
    # evictionOrder is optional in the schema's types but the algorithm needs it (upstream: "at least 2").
    if "evictionOrder" not in document:
        raise ValueError("evictionOrder: Required value: at least 2 priority levels are needed")
    include = exclude = None
    namespaces = document.get("evictableNamespaces")
    if namespaces is not None:
        include, exclude = namespaces.get("include"), namespaces.get("exclude")
        if include is not None and exclude is not None:
            raise ValueError("evictableNamespaces: Invalid value: both include and exclude: only one of "
                             "include and exclude may be set")
    node_selector = None
    if document.get("nodeSelector") is not None:
        node_selector = _selector(document["nodeSelector"], "nodeSelector")
    return CustomPriorityArgs(
        eviction_order=_levels(document["evictionOrder"]),
        paused=bool(document["paused"]),
        dry_run=bool(document["dryRun"]),
        include_namespaces=list(include) if include is not None else None,
        exclude_namespaces=list(exclude) if exclude is not None else None,
        node_selector=node_selector,
        pod_selectors=_pod_selectors(document.get("podSelectors") or []),
        node_fit=bool(document["nodeFit"]),
        mode=str(document["mode"]),
        auto_cordon=bool(document["autoCordon"]),
    )


def _levels(entries: list[Mapping[str, Any]]) -> list[PriorityLevel]:
    """The priority levels, most expensive first; names unique."""
    seen: set[str] = set()
    out = []
    for i, entry in enumerate(entries):
        name = str(entry["name"])
        if name in seen:
            raise ValueError(f'evictionOrder[{i}].name: Duplicate value: "{name}"')
        seen.add(name)
        out.append(PriorityLevel(
            name=name,
            node_selector=_selector(entry["nodeSelector"], f"evictionOrder[{i}].nodeSelector"),
            keep_threshold={str(k): float(v) for k, v in (entry.get("keepThreshold") or {}).items()},
            reject_threshold={str(k): float(v) for k, v in (entry.get("rejectThreshold") or {}).items()},
        ))
    return out


def _pod_selectors(entries: list[Mapping[str, Any]]) -> list[PodSelector]:
    out = []
    for i, entry in enumerate(entries):
        if entry.get("selector") is None:
            continue  # an entry without a selector neither selects nor rejects (as LowNodeLoad's)
        out.append(PodSelector(str(entry.get("name") or ""),
                               _selector(entry["selector"], f"podSelectors[{i}].selector")))
    return out


def _selector(raw: Mapping[str, Any], path: str) -> LabelSelector:
    try:
        return label_selector_from_dict(raw)
    except SelectorError as exc:
        raise ValueError(f"{path}: Invalid value: {json.dumps(raw, sort_keys=True)}: {exc}") from None
