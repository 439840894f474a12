"""DeviceShareArgs: Koordinator's defaults and validation (reference scheduler.md §2.6.1).

``allocator`` is deprecated and ignored; ``gpuSharedResourceTemplatesConfig`` is parsed and kept but
unused (shared-resource templates are not implemented in this build). A ValueError names the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import device as dev
from koordinator.apis.pluginargs import bool_arg

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
SCORING_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED)

# gpu-core is deliberately not weighted by default (reference §8 item 13).
DEFAULT_RESOURCE_WEIGHTS = {dev.GPU_MEMORY_RATIO: 1, dev.GPU_MEMORY: 1, dev.RDMA: 1, dev.FPGA: 1}


@dataclass(frozen=True)
class SharedTemplatesConfig:
    """Where the GPU shared-resource templates ConfigMap lives (kept for fidelity; unused in this build)."""

    config_map_namespace: str = "koordinator-system"
    config_map_name: str = "gpu-shared-resource-templates"
    matched_resources: tuple[str, ...] = (dev.NPU_CORE,)


@dataclass(frozen=True)
class DeviceShareArgs:
    """Validated, defaulted DeviceShareArgs (see :func:`parse_args`)."""

    scoring_type: str = LEAST_ALLOCATED
    resource_weights: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_RESOURCE_WEIGHTS))
    disable_device_numa_topology_alignment: bool = False
    shared_templates: SharedTemplatesConfig = SharedTemplatesConfig()
    # (vendor, model) pairs on which GPU sharing requests are rejected.
    gpu_share_unsupported_models: frozenset[tuple[str, str]] = frozenset()

    @property
    def most_allocated(self) -> bool:
        return self.scoring_type == MOST_ALLOCATED


def _scoring(raw: Any) -> tuple[str, dict[str, int]]:
    if raw is None:
        return LEAST_ALLOCATED, dict(DEFAULT_RESOURCE_WEIGHTS)
    if not isinstance(raw, Mapping):
        raise ValueError(f"scoringStrategy: Invalid value: {raw!r}: must be an object")
    kind = raw.get("type") or LEAST_ALLOCATED
    if kind not in SCORING_TYPES:
        raise ValueError(f"scoringStrategy.type: Unsupported value: {kind!r}: supported values: "
                         + ", ".join(f'"{t}"' for t in SCORING_TYPES))
    resources = raw.get("resources")
    if not resources:
        return kind, dict(DEFAULT_RESOURCE_WEIGHTS)
    if not isinstance(resources, list):
        raise ValueError(f"scoringStrategy.resources: Invalid value: {resources!r}: must be a list")
    weights: dict[str, int] = {}
    for i, item in enumerate(resources):
        path = f"scoringStrategy.resources[{i}]"
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not name:
            raise ValueError(f"{path}.name: Required value: a resource name is required, got {item!r}")
        weight = item.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ValueError(f"{path}.weight: Invalid value: {weight!r}: resource weight of {name} "
                             "should be in range [1, 100]")
        weights[name] = weight
    return kind, weights


def _templates(raw: Any) -> SharedTemplatesConfig:
    if raw is None:
        return SharedTemplatesConfig()
    if not isinstance(raw, Mapping):
        raise ValueError(f"gpuSharedResourceTemplatesConfig: Invalid value: {raw!r}: must be an object")
    matched = raw.get("matchedResources")
    if matched is None:
        matched = list(SharedTemplatesConfig.matched_resources)
    if not isinstance(matched, list) or not all(isinstance(m, str) and m for m in matched):
        raise ValueError(f"gpuSharedResourceTemplatesConfig.matchedResources: Invalid value: {matched!r}: "
                         "must be a list of resource names")
    return SharedTemplatesConfig(str(raw.get("configMapNamespace") or "koordinator-system"),
                                 str(raw.get("configMapName") or "gpu-shared-resource-templates"),
                                 tuple(matched))


def _unsupported_models(raw: Any) -> frozenset[tuple[str, str]]:
    if raw is None:
        return frozenset()
    if not isinstance(raw, list):
        raise ValueError(f"gpuShareUnsupportedModels: Invalid value: {raw!r}: must be a list of {{vendor, model}}")
    out = set()
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping):
            raise ValueError(f"gpuShareUnsupportedModels[{i}]: Invalid value: {item!r}: must be an object")
        for key in ("vendor", "model"):
            if not isinstance(item.get(key), str) or not item.get(key):
                raise ValueError(f"gpuShareUnsupportedModels[{i}].{key}: Required value: got {item!r}")
        out.add((item["vendor"], item["model"]))
    return frozenset(out)


def parse_args(args: Mapping[str, Any] | None) -> DeviceShareArgs:
    """Apply Koordinator's defaults (beyond the schema's) and validate; ValueError names the field."""
    args = args or {}
    kind, weights = _scoring(args.get("scoringStrategy"))
    return DeviceShareArgs(scoring_type=kind, resource_weights=weights,
                           disable_device_numa_topology_alignment=bool_arg(args, "disableDeviceNUMATopologyAlignment",
                                                                        False),
                           shared_templates=_templates(args.get("gpuSharedResourceTemplatesConfig")),
                           gpu_share_unsupported_models=_unsupported_models(args.get("gpuShareUnsupportedModels")))
