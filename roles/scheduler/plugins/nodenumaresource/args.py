"""NodeNUMAResourceArgs: Koordinator's defaults and validation (reference §2.2.1); ValueError names the field."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import numa

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED)
_BIND_POLICIES = ("", numa.CPU_BIND_POLICY_FULL_PCPUS, numa.CPU_BIND_POLICY_SPREAD_BY_PCPUS)


def _default_resources() -> list[tuple[str, int]]:
    return [("cpu", 1), ("memory", 1)]


@dataclass
class ScoringStrategy:
    """``type`` and the weighted resources (name, weight)."""

    type: str = LEAST_ALLOCATED
    resources: list[tuple[str, int]] = field(default_factory=_default_resources)


@dataclass
class NodeNUMAResourceArgs:
    """Validated, defaulted NodeNUMAResourceArgs.

    ``numa_scoring_strategy.resources`` is kept but unused: Koordinator scores NUMA nodes with
    ``scoring_strategy.resources`` and takes only the type from ``numaScoringStrategy``.
    """

    default_cpu_bind_policy: str = numa.CPU_BIND_POLICY_FULL_PCPUS
    scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)
    numa_scoring_strategy: ScoringStrategy = field(default_factory=ScoringStrategy)

    @property
    def default_numa_strategy(self) -> str:
        """The NUMA allocate strategy nodes without the label get (from numaScoringStrategy's type)."""
        if self.numa_scoring_strategy.type == MOST_ALLOCATED:
            return numa.NUMA_MOST_ALLOCATED
        return numa.NUMA_LEAST_ALLOCATED


def _strategy(args: Mapping[str, Any], key: str) -> ScoringStrategy:
    raw = args.get(key)
    if raw is None:
        return ScoringStrategy()
    if not isinstance(raw, Mapping):
        raise ValueError(f"{key}: Invalid value: {raw!r}: must be an object")
    t = raw.get("type") or LEAST_ALLOCATED
    if t not in _TYPES:
        raise ValueError(f"{key}.type: Unsupported value: {t!r}: supported values: "
                         + ", ".join(f'"{x}"' for x in _TYPES))
    resources_raw = raw.get("resources")
    if resources_raw is None:
        return ScoringStrategy(t)
    if not isinstance(resources_raw, list):
        raise ValueError(f"{key}.resources: Invalid value: {resources_raw!r}: must be a list")
    resources = []
    for i, r in enumerate(resources_raw):
        path = f"{key}.resources[{i}]"
        if not isinstance(r, Mapping) or not isinstance(r.get("name"), str) or not r.get("name"):
            raise ValueError(f"{path}.name: Required value: {r!r}")
        w = r.get("weight", 1)
        if isinstance(w, bool) or not isinstance(w, int) or not 0 < w <= 100:
            raise ValueError(f"{path}.weight: Invalid value: {w!r}: resource weight of {r['name']} should be "
                             "in (0, 100]")
        resources.append((r["name"], w))
    return ScoringStrategy(t, resources)


def parse_args(args: Mapping[str, Any] | None) -> NodeNUMAResourceArgs:
    """Apply Koordinator's defaults and validate; ValueError names the field and the value."""
    args = args or {}
    policy = args.get("defaultCPUBindPolicy", numa.CPU_BIND_POLICY_FULL_PCPUS)
    if policy is None:
        policy = numa.CPU_BIND_POLICY_FULL_PCPUS
    if policy not in _BIND_POLICIES:
        raise ValueError(f"defaultCPUBindPolicy: Unsupported value: {policy!r}: supported values: "
                         '"", "FullPCPUs", "SpreadByPCPUs"')
    return NodeNUMAResourceArgs(policy, _strategy(args, "scoringStrategy"), _strategy(args, "numaScoringStrategy"))
