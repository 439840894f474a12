"""A node's CPU/NUMA topology as NodeNUMAResource sees it (reference §2.2.2).

:class:`CPUTopology` indexes the ``node.koordinator.sh/cpu-topology`` detail (core IDs made
globally unique as ``socket << 16 | core``). :class:`NodeTopology` is what one
NodeResourceTopology object says (CPUs, kubelet policy and reserved CPUs, per-NUMA allocatable
from the ``node-<i>`` zones, the topology policy); :class:`TopologyOptions` adds what the Node
object says (labels, reserved/system-QoS CPUs, amplification) and is what the plugin works with.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import extension, numa
from koordinator.apis.numa import AnnotationError, CPUInfo


class CPUTopology:
    """Logical CPUs by core, NUMA node and socket; ``valid`` when every count is at least one."""

    def __init__(self, cpus: list[CPUInfo]) -> None:
        self.core_of: dict[int, int] = {}
        self.socket_of: dict[int, int] = {}
        self.node_of: dict[int, int] = {}
        self.core_cpus: dict[int, list[int]] = {}
        self.node_cpus: dict[int, list[int]] = {}
        self.socket_cpus: dict[int, list[int]] = {}
        self.node_socket: dict[int, int] = {}
        for c in sorted(cpus, key=lambda c: c.id):
            core = (c.socket << 16) | c.core
            self.core_of[c.id] = core
            self.socket_of[c.id] = c.socket
            self.node_of[c.id] = c.node
            self.core_cpus.setdefault(core, []).append(c.id)
            self.node_cpus.setdefault(c.node, []).append(c.id)
            self.socket_cpus.setdefault(c.socket, []).append(c.id)
            self.node_socket.setdefault(c.node, c.socket)
        self.cpus = frozenset(self.core_of)
        self.num_cpus = len(self.core_of)
        self.num_cores = len(self.core_cpus)
        self.num_nodes = len(self.node_cpus)
        self.num_sockets = len(self.socket_cpus)

    @property
    def valid(self) -> bool:
        return min(self.num_cpus, self.num_cores, self.num_nodes, self.num_sockets) > 0

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_node(self) -> int:
        return self.num_cpus // self.num_nodes if self.num_nodes else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @classmethod
    def linux_x86(cls, sockets: int, cores_per_socket: int, threads: int) -> "CPUTopology":
        """One NUMA node per socket, numbered as Linux on x86 (cpu i and i + sockets×cores are siblings)."""
        per_thread = sockets * cores_per_socket
        infos = []
        for cpu in range(per_thread * threads):
            rest = cpu % per_thread
            socket, core = divmod(rest, cores_per_socket)
            infos.append(CPUInfo(cpu, socket * cores_per_socket + core, socket, socket))
        return cls(infos)


@dataclass
class NodeTopology:
    """What a NodeResourceTopology object says; ``error`` is set when one of its annotations is malformed."""

    topology: CPUTopology
    kubelet: numa.KubeletCPUManagerPolicy = field(default_factory=numa.KubeletCPUManagerPolicy)
    kubelet_cpus: frozenset[int] = frozenset()  # kubelet reservedCPUs ∪ kubelet-managed pod cpusets
    numa_resources: dict[int, dict[str, int]] = field(default_factory=dict)  # zone node-<i> allocatable
    policy: str = ""
    error: str = ""

    @property
    def special(self) -> bool:
        """Does this object change how ordinary pods are filtered (NUMA policy, full-pcpus-only)?"""
        return bool(self.policy) or self.kubelet.full_pcpus_only


def parse_nrt(obj: Mapping[str, Any]) -> NodeTopology:
    """A NodeTopology from a NodeResourceTopology object (never raises: problems go to ``error``)."""
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    errors = []
    try:
        topo = CPUTopology(numa.parse_cpu_topology(annotations.get(numa.ANNOTATION_CPU_TOPOLOGY)))
    except AnnotationError as e:
        topo, errors = CPUTopology([]), [str(e)]
    kubelet = numa.KubeletCPUManagerPolicy()
    kubelet_cpus: set[int] = set()
    try:
        kubelet = numa.parse_kubelet_cpu_manager_policy(annotations.get(numa.ANNOTATION_KUBELET_CPU_MANAGER_POLICY))
        kubelet_cpus.update(kubelet.reserved_cpus)
    except (AnnotationError, ValueError) as e:
        errors.append(str(e))
    try:
        kubelet_cpus.update(numa.parse_pod_cpu_allocs(annotations.get(numa.ANNOTATION_NODE_CPU_ALLOCS)))
    except (AnnotationError, ValueError) as e:
        errors.append(str(e))
    resources: dict[int, dict[str, int]] = {}
    for zone in obj.get("zones") or []:
        name = zone.get("name") or ""
        if zone.get("type") != numa.ZONE_TYPE_NODE or not name.startswith(numa.ZONE_NAME_PREFIX):
            continue
        try:
            node_id = int(name[len(numa.ZONE_NAME_PREFIX):])
            amounts = {r["name"]: extension.resource_list({"x": r.get("allocatable", 0)})["x"]
                       for r in zone.get("resources") or [] if r.get("name")}
        except (ValueError, TypeError, KeyError) as e:
            errors.append(f"zone {name!r}: {e}")
            continue
        resources[node_id] = amounts
    policy = ""
    for p in obj.get("topologyPolicies") or []:
        policy = numa.NRT_TOPOLOGY_POLICIES.get(p, policy)
    return NodeTopology(topo, kubelet, frozenset(kubelet_cpus), resources, policy, "; ".join(errors))


@dataclass
class TopologyOptions:
    """NodeTopology plus the Node's own say: the inputs of one node's allocation."""

    nrt: NodeTopology | None
    reserved_cpus: frozenset[int]
    bind_policy: str  # node cpu-bind-policy: "", FullPCPUsOnly, SpreadByPCPUs
    numa_policy: str
    numa_strategy: str  # "" = the args' default
    cpu_ratio: float  # cpu amplification ratio (1 = none)
    ratio_error: str = ""
    error: str = ""  # a malformed topology / reservation annotation, named

    @property
    def topology(self) -> CPUTopology:
        return self.nrt.topology if self.nrt is not None else _EMPTY

    def numa_allocatable(self) -> dict[int, dict[str, int]]:
        """Per-NUMA allocatable with cpu reduced by the reserved CPUs of that NUMA node."""
        if self.nrt is None:
            return {}
        out = {k: dict(v) for k, v in self.nrt.numa_resources.items()}
        topo = self.nrt.topology
        for cpu in self.reserved_cpus:
            node = topo.node_of.get(cpu)
            if node in out and "cpu" in out[node]:
                out[node]["cpu"] = max(0, out[node]["cpu"] - 1000)
        return out


_EMPTY = CPUTopology([])


def node_is_special(node: Mapping[str, Any] | None) -> bool:
    """Does the Node object change how ordinary pods are filtered (bind policy, NUMA policy, amplification)?"""
    meta = (node or {}).get("metadata") or {}
    labels = meta.get("labels") or {}
    bind = labels.get(numa.LABEL_CPU_BIND_POLICY, "")
    if bind and bind != numa.NODE_CPU_BIND_POLICY_NONE:
        return True
    policy = labels.get(numa.LABEL_NUMA_TOPOLOGY_POLICY, "")
    if policy and policy != "None":
        return True
    return numa.ANNOTATION_AMPLIFICATION_RATIO in (meta.get("annotations") or {})


def topology_options(node: Mapping[str, Any] | None, nrt: NodeTopology | None) -> TopologyOptions:
    """Combine the Node object and its NodeTopology (reference §2.2.2 precedence rules)."""
    meta = (node or {}).get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    reserved: set[int] = set(nrt.kubelet_cpus) if nrt is not None else set()
    errors = []
    try:
        reserved.update(numa.parse_node_reserved_cpus(annotations.get(numa.ANNOTATION_NODE_RESERVATION)))
    except (AnnotationError, ValueError) as e:
        errors.append(str(e))
    try:
        reserved.update(numa.parse_system_qos_exclusive_cpus(annotations.get(numa.ANNOTATION_SYSTEM_QOS_RESOURCE)))
    except (AnnotationError, ValueError) as e:
        errors.append(str(e))
    bind = labels.get(numa.LABEL_CPU_BIND_POLICY, "")
    if bind not in (numa.NODE_CPU_BIND_POLICY_FULL_PCPUS_ONLY, numa.NODE_CPU_BIND_POLICY_SPREAD_BY_PCPUS):
        bind = ""
    if not bind and nrt is not None and nrt.kubelet.full_pcpus_only:
        bind = numa.NODE_CPU_BIND_POLICY_FULL_PCPUS_ONLY
    policy = labels.get(numa.LABEL_NUMA_TOPOLOGY_POLICY, "")
    if policy not in numa.NUMA_POLICIES:
        policy = nrt.policy if nrt is not None else ""
    strategy = labels.get(numa.LABEL_NUMA_ALLOCATE_STRATEGY, "")
    if strategy not in (numa.NUMA_MOST_ALLOCATED, numa.NUMA_LEAST_ALLOCATED):
        strategy = ""
    ratio, ratio_error = 1.0, ""
    try:
        ratio = numa.parse_amplification_ratios(annotations.get(numa.ANNOTATION_AMPLIFICATION_RATIO)).get("cpu", 1.0)
    except AnnotationError as e:
        ratio_error = str(e)
    if nrt is not None and nrt.error:
        errors.append(nrt.error)
    return TopologyOptions(nrt, frozenset(reserved), bind, policy, strategy, ratio, ratio_error, "; ".join(errors))
