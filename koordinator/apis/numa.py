"""CPU/NUMA topology keys and the annotations that carry them (Koordinator's apis/extension, NUMA part).

Parsers take the raw annotation text and raise :class:`AnnotationError` (a ValueError) naming the
annotation and the offending value, so that a scheduler or koordlet message says exactly what
is wrong. Unknown *policy strings* are kept as they are (Koordinator ignores them), but a value of
the wrong JSON type is an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import quantity
from koordinator.apis.cpuset import format_cpuset, parse_cpuset
# Re-exported: the scheduler writes it, the koordlet reads it.
from koordinator.apis.extension import ANNOTATION_RESOURCE_STATUS  # noqa: F401

# -- keys ----------------------------------------------------------------------------------------------

ANNOTATION_RESOURCE_SPEC = "scheduling.koordinator.sh/resource-spec"
ANNOTATION_NUMA_TOPOLOGY_SPEC = "scheduling.koordinator.sh/numa-topology-spec"

ANNOTATION_CPU_TOPOLOGY = "node.koordinator.sh/cpu-topology"
ANNOTATION_KUBELET_CPU_MANAGER_POLICY = "kubelet.koordinator.sh/cpu-manager-policy"
ANNOTATION_NODE_CPU_ALLOCS = "node.koordinator.sh/pod-cpu-allocs"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
ANNOTATION_AMPLIFICATION_RATIO = "node.koordinator.sh/resource-amplification-ratio"

LABEL_CPU_BIND_POLICY = "node.koordinator.sh/cpu-bind-policy"
LABEL_NUMA_ALLOCATE_STRATEGY = "node.koordinator.sh/numa-allocate-strategy"
LABEL_NUMA_TOPOLOGY_POLICY = "node.koordinator.sh/numa-topology-policy"

# Pod CPU bind policies (resource-spec).
CPU_BIND_POLICY_DEFAULT = "Default"
CPU_BIND_POLICY_FULL_PCPUS = "FullPCPUs"
CPU_BIND_POLICY_SPREAD_BY_PCPUS = "SpreadByPCPUs"
CPU_BIND_POLICY_CONSTRAINED_BURST = "ConstrainedBurst"

# Pod CPU exclusive policies.
CPU_EXCLUSIVE_POLICY_NONE = "None"
CPU_EXCLUSIVE_POLICY_PCPU_LEVEL = "PCPULevel"
CPU_EXCLUSIVE_POLICY_NUMA_NODE_LEVEL = "NUMANodeLevel"

# Node CPU bind policies (label node.koordinator.sh/cpu-bind-policy).
NODE_CPU_BIND_POLICY_NONE = "None"
NODE_CPU_BIND_POLICY_FULL_PCPUS_ONLY = "FullPCPUsOnly"
NODE_CPU_BIND_POLICY_SPREAD_BY_PCPUS = "SpreadByPCPUs"

# NUMA allocate strategies.
NUMA_MOST_ALLOCATED = "MostAllocated"
NUMA_LEAST_ALLOCATED = "LeastAllocated"

# NUMA topology policies ("" = none).
NUMA_POLICY_NONE = ""
NUMA_POLICY_BEST_EFFORT = "BestEffort"
NUMA_POLICY_RESTRICTED = "Restricted"
NUMA_POLICY_SINGLE_NUMA_NODE = "SingleNUMANode"
NUMA_POLICIES = (NUMA_POLICY_BEST_EFFORT, NUMA_POLICY_RESTRICTED, NUMA_POLICY_SINGLE_NUMA_NODE)
# NodeResourceTopology.topologyPolicies values -> NUMA policy.
NRT_TOPOLOGY_POLICIES = {
    "BestEffort": NUMA_POLICY_BEST_EFFORT,
    "Restricted": NUMA_POLICY_RESTRICTED,
    "SingleNUMANodePodLevel": NUMA_POLICY_SINGLE_NUMA_NODE,
}

# numa-topology-spec singleNUMANodeExclusive.
NUMA_EXCLUSIVE_REQUIRED = "Required"
NUMA_EXCLUSIVE_PREFERRED = "Preferred"

# NodeResourceTopology zone naming.
ZONE_TYPE_NODE = "Node"
ZONE_NAME_PREFIX = "node-"


class AnnotationError(ValueError):
    """A malformed annotation; the message names the annotation key and the bad value."""


def _load_object(key: str, raw: Any) -> dict:
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as e:
        raise AnnotationError(f"annotation {key}: invalid JSON {raw!r}: {e.msg}") from None
    if not isinstance(value, dict):
        raise AnnotationError(f"annotation {key}: {raw!r} is not a JSON object")
    return value


def _string(key: str, obj: Mapping[str, Any], name: str, raw: Any) -> str:
    v = obj.get(name)
    if v is None:
        return ""
    if not isinstance(v, str):
        raise AnnotationError(f"annotation {key}: field {name} must be a string, got {v!r} in {raw!r}")
    return v


def _cpus(key: str, obj: Mapping[str, Any], name: str, raw: Any) -> list[int]:
    text = obj.get(name)
    if not text:
        return []
    return _parse_cpus(text, f"annotation {key} {name}")


def _parse_cpus(text: Any, what: str) -> list[int]:
    try:
        return parse_cpuset(text, what)
    except ValueError as e:
        raise AnnotationError(str(e)) from None


# -- pod annotations --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ResourceSpec:
    """``scheduling.koordinator.sh/resource-spec``: the pod's CPU bind and exclusive policies."""

    required_cpu_bind_policy: str = ""
    preferred_cpu_bind_policy: str = ""
    preferred_cpu_exclusive_policy: str = ""


def parse_resource_spec(annotations: Mapping[str, str] | None) -> ResourceSpec:
    """The pod's resource-spec (empty when absent); AnnotationError for bad JSON or wrong types."""
    raw = (annotations or {}).get(ANNOTATION_RESOURCE_SPEC)
    if not raw:
        return ResourceSpec()
    key = ANNOTATION_RESOURCE_SPEC
    obj = _load_object(key, raw)
    return ResourceSpec(_string(key, obj, "requiredCPUBindPolicy", raw),
                        _string(key, obj, "preferredCPUBindPolicy", raw),
                        _string(key, obj, "preferredCPUExclusivePolicy", raw))


def format_resource_spec(spec: ResourceSpec) -> str:
    out = {}
    if spec.required_cpu_bind_policy:
        out["requiredCPUBindPolicy"] = spec.required_cpu_bind_policy
    if spec.preferred_cpu_bind_policy:
        out["preferredCPUBindPolicy"] = spec.preferred_cpu_bind_policy
    if spec.preferred_cpu_exclusive_policy:
        out["preferredCPUExclusivePolicy"] = spec.preferred_cpu_exclusive_policy
    return json.dumps(out, separators=(",", ":"))


@dataclass(frozen=True)
class NUMATopologySpec:
    """``scheduling.koordinator.sh/numa-topology-spec``: the pod's own NUMA policy."""

    numa_topology_policy: str = ""
    single_numa_node_exclusive: str = ""


def parse_numa_topology_spec(annotations: Mapping[str, str] | None) -> NUMATopologySpec:
    raw = (annotations or {}).get(ANNOTATION_NUMA_TOPOLOGY_SPEC)
    if not raw:
        return NUMATopologySpec()
    key = ANNOTATION_NUMA_TOPOLOGY_SPEC
    obj = _load_object(key, raw)
    policy = _string(key, obj, "numaTopologyPolicy", raw)
    if policy == "None":
        policy = ""
    if policy and policy not in NUMA_POLICIES:
        raise AnnotationError(f"annotation {key}: unknown numaTopologyPolicy {policy!r} in {raw!r}")
    exclusive = _string(key, obj, "singleNUMANodeExclusive", raw)
    if exclusive and exclusive not in (NUMA_EXCLUSIVE_REQUIRED, NUMA_EXCLUSIVE_PREFERRED):
        raise AnnotationError(f"annotation {key}: unknown singleNUMANodeExclusive {exclusive!r} in {raw!r}")
    return NUMATopologySpec(policy, exclusive)


@dataclass(frozen=True)
class NUMANodeResource:
    """One NUMA node's share of a pod's resources (milli-units)."""

    node: int
    resources: Mapping[str, int]


@dataclass(frozen=True)
class ResourceStatus:
    """``scheduling.koordinator.sh/resource-status``: the cpuset and NUMA amounts the scheduler chose."""

    cpuset: tuple[int, ...] = ()
    numa_node_resources: tuple[NUMANodeResource, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.cpuset and not self.numa_node_resources


def parse_resource_status(annotations: Mapping[str, str] | None) -> ResourceStatus:
    raw = (annotations or {}).get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return ResourceStatus()
    key = ANNOTATION_RESOURCE_STATUS
    obj = _load_object(key, raw)
    cpus = _cpus(key, obj, "cpuset", raw)
    numa = []
    entries = obj.get("numaNodeResources") or []
    if not isinstance(entries, list):
        raise AnnotationError(f"annotation {key}: numaNodeResources must be a list in {raw!r}")
    for e in entries:
        if not isinstance(e, dict) or isinstance(e.get("node", 0), bool) or not isinstance(e.get("node", 0), int):
            raise AnnotationError(f"annotation {key}: bad numaNodeResources entry {e!r} in {raw!r}")
        res = e.get("resources") or {}
        if not isinstance(res, dict):
            raise AnnotationError(f"annotation {key}: bad numaNodeResources entry {e!r} in {raw!r}")
        try:
            amounts = {name: quantity.milli_value(q) for name, q in res.items()}
        except ValueError as err:
            raise AnnotationError(f"annotation {key}: bad quantity in {e!r}: {err}") from None
        numa.append(NUMANodeResource(int(e.get("node", 0)), amounts))
    return ResourceStatus(tuple(cpus), tuple(numa))


def _quantity_text(name: str, milli: int) -> str:
    if name == "cpu":
        return str(milli // 1000) if milli % 1000 == 0 else f"{milli}m"
    return quantity.format_quantity(quantity.parse_quantity(f"{milli}m"), quantity.BINARY_SI) \
        if milli % 1000 == 0 else f"{milli}m"


def format_resource_status(status: ResourceStatus) -> str:
    """The annotation value: ``{"cpuset":"0-3","numaNodeResources":[{"node":0,"resources":{...}}]}``."""
    out: dict[str, Any] = {}
    if status.cpuset:
        out["cpuset"] = format_cpuset(status.cpuset)
    if status.numa_node_resources:
        out["numaNodeResources"] = [
            {"node": r.node, "resources": {k: _quantity_text(k, v) for k, v in sorted(r.resources.items())}}
            for r in status.numa_node_resources]
    return json.dumps(out, separators=(",", ":"))


# -- node / NodeResourceTopology annotations ------------------------------------------------------------

@dataclass(frozen=True)
class CPUInfo:
    """One logical CPU of ``node.koordinator.sh/cpu-topology``."""

    id: int
    core: int
    socket: int
    node: int


def parse_cpu_topology(raw: str | None) -> list[CPUInfo]:
    """``{"detail":[{"id","core","socket","node"}, ...]}`` → CPUInfo list (empty when absent)."""
    if not raw:
        return []
    key = ANNOTATION_CPU_TOPOLOGY
    obj = _load_object(key, raw)
    detail = obj.get("detail") or []
    if not isinstance(detail, list):
        raise AnnotationError(f"annotation {key}: detail must be a list in {raw!r}")
    out = []
    for e in detail:
        if not isinstance(e, dict):
            raise AnnotationError(f"annotation {key}: bad CPU entry {e!r}")
        values = []
        for f in ("id", "core", "socket", "node"):
            v = e.get(f, 0)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise AnnotationError(f"annotation {key}: bad {f} {v!r} in CPU entry {e!r}")
            values.append(v)
        out.append(CPUInfo(*values))
    return out


@dataclass(frozen=True)
class KubeletCPUManagerPolicy:
    """``kubelet.koordinator.sh/cpu-manager-policy``."""

    policy: str = ""
    options: Mapping[str, str] = field(default_factory=dict)
    reserved_cpus: tuple[int, ...] = ()

    @property
    def full_pcpus_only(self) -> bool:
        return self.policy == "static" and str(self.options.get("full-pcpus-only", "")).lower() == "true"


def parse_kubelet_cpu_manager_policy(raw: str | None) -> KubeletCPUManagerPolicy:
    if not raw:
        return KubeletCPUManagerPolicy()
    key = ANNOTATION_KUBELET_CPU_MANAGER_POLICY
    obj = _load_object(key, raw)
    options = obj.get("options") or {}
    if not isinstance(options, dict):
        raise AnnotationError(f"annotation {key}: options must be an object in {raw!r}")
    return KubeletCPUManagerPolicy(_string(key, obj, "policy", raw), dict(options),
                                   tuple(_cpus(key, obj, "reservedCPUs", raw)))


def parse_pod_cpu_allocs(raw: str | None) -> list[int]:
    """CPUs of ``node.koordinator.sh/pod-cpu-allocs`` entries managed by the kubelet (never ours to give)."""
    if not raw:
        return []
    key = ANNOTATION_NODE_CPU_ALLOCS
    try:
        entries = json.loads(raw)
    except ValueError as e:
        raise AnnotationError(f"annotation {key}: invalid JSON {raw!r}: {e.msg}") from None
    if not isinstance(entries, list):
        raise AnnotationError(f"annotation {key}: {raw!r} is not a JSON list")
    cpus: set[int] = set()
    for e in entries:
        if not isinstance(e, dict):
            raise AnnotationError(f"annotation {key}: bad entry {e!r}")
        if e.get("managedByKubelet") and e.get("cpuset"):
            cpus.update(_parse_cpus(e["cpuset"], f"annotation {key} cpuset"))
    return sorted(cpus)


def parse_node_reserved_cpus(raw: str | None) -> list[int]:
    """``reservedCPUs`` of ``node.koordinator.sh/reservation``."""
    if not raw:
        return []
    key = ANNOTATION_NODE_RESERVATION
    return _cpus(key, _load_object(key, raw), "reservedCPUs", raw)


def parse_system_qos_exclusive_cpus(raw: str | None) -> list[int]:
    """The system-QoS cpuset when exclusive (``cpusetExclusive`` defaults to true), else nothing."""
    if not raw:
        return []
    key = ANNOTATION_SYSTEM_QOS_RESOURCE
    obj = _load_object(key, raw)
    if obj.get("cpusetExclusive") is False:
        return []
    return _cpus(key, obj, "cpuset", raw)


def parse_amplification_ratios(raw: str | None) -> dict[str, float]:
    """``node.koordinator.sh/resource-amplification-ratio``: resource → ratio (``{"cpu": 1.5}``)."""
    if not raw:
        return {}
    key = ANNOTATION_AMPLIFICATION_RATIO
    obj = _load_object(key, raw)
    out = {}
    for name, v in obj.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            raise AnnotationError(f"annotation {key}: bad ratio {v!r} for {name} in {raw!r}")
        out[str(name)] = float(v)
    return out
