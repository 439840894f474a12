"""ScaleDownBinPackArgs (``descheduler/v1alpha2``): defaults and validation (reference §1.8).

Defaults come from ``schemas/config/ScaleDownBinPack-args/v1alpha2.yaml`` (the same schema the
configuration's validation uses); :func:`parse_args` adds the checks a schema cannot express.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator_roles.descheduler.framework.podscope import PodScope, invalid, resource_names, validated_document

SCHEMA = "ScaleDownBinPack-args"
CALCULATE_ONLY = "CalculateOnly"
EVICT_DIRECTLY = "EvictDirectly"
DEFAULT_RESOURCES = ("cpu", "memory")


@dataclass
class ScaleDownBinPackArgs:
    """The plugin's settings after defaulting and validation; ``resource_weights`` has every resource."""

    paused: bool = False
    strategy: str = CALCULATE_ONLY
    max_pods_to_evict: int = 0
    scope: PodScope = field(default_factory=PodScope)
    resources: tuple[str, ...] = DEFAULT_RESOURCES
    resource_weights: dict[str, float] = field(default_factory=lambda: {r: 1.0 for r in DEFAULT_RESOURCES})


def parse_args(raw: Mapping[str, Any] | None) -> ScaleDownBinPackArgs:
    """Validate and default the plugin's args; ValueError naming the field and the value."""
    document = validated_document(SCHEMA, raw)
    strategy = document["strategy"]
    max_pods = document.get("maxPodsToEvict")
    if strategy == EVICT_DIRECTLY and (max_pods is None or max_pods <= 0):
        if max_pods is None:
            raise ValueError("maxPodsToEvict: Required value: must be greater than 0 when strategy is EvictDirectly")
        raise invalid("maxPodsToEvict", max_pods, "must be greater than 0 when strategy is EvictDirectly")
    resources = resource_names(document)
    given = document.get("resourceWeights") or {}
    for r, w in given.items():
        if not math.isfinite(float(w)) or w <= 0:
            raise invalid(f"resourceWeights.{r}", w, "must be a positive finite number")
    return ScaleDownBinPackArgs(
        paused=bool(document["paused"]),
        strategy=strategy,
        max_pods_to_evict=int(max_pods or 0),
        scope=PodScope.from_document(document),
        resources=resources,
        resource_weights={r: float(given.get(r, 1.0)) for r in resources},
    )
