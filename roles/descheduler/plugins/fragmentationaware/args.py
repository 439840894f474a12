"""FragmentationAwareArgs (``descheduler/v1alpha2``): defaults and validation (reference §1.8).

Defaults come from ``schemas/config/FragmentationAware-args/v1alpha2.yaml`` (the same schema the
configuration's validation uses); :func:`parse_args` adds the checks a schema cannot express.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator_roles.descheduler.framework.podscope import (PodScope, finite_number, resource_names,
                                                              validated_document)

SCHEMA = "FragmentationAware-args"
DEFAULT_RESOURCES = ("cpu", "memory")
DEFAULT_IMBALANCE_THRESHOLD = 0.15
DEFAULT_MIN_IMPROVEMENT_THRESHOLD = 0.02


@dataclass
class FragmentationAwareArgs:
    """The plugin's settings after defaulting and validation."""

    paused: bool = False
    dry_run: bool = False
    node_fit: bool = True
    scope: PodScope = field(default_factory=PodScope)
    resources: tuple[str, ...] = DEFAULT_RESOURCES
    imbalance_threshold: float = DEFAULT_IMBALANCE_THRESHOLD
    min_improvement_threshold: float = DEFAULT_MIN_IMPROVEMENT_THRESHOLD


def parse_args(raw: Mapping[str, Any] | None) -> FragmentationAwareArgs:
    """Validate and default the plugin's args; ValueError naming the field and the value."""
    document = validated_document(SCHEMA, raw)
    return FragmentationAwareArgs(
        paused=bool(document["paused"]),
        dry_run=bool(document["dryRun"]),
        node_fit=bool(document["nodeFit"]),
        scope=PodScope.from_document(document),
        resources=resource_names(document),
        imbalance_threshold=finite_number(document, "imbalanceThreshold"),
        min_improvement_threshold=finite_number(document, "minImprovementThreshold"),
    )
