"""Requests-based node utilization shared by LowNodeUtilization and HighNodeUtilization.

A node's usage is the sum of its non-terminated pods' requests (``pods`` counts one per pod) against
its allocatable. Thresholds are percentages of allocatable per resource; ``cpu``, ``memory`` and
``pods`` not named in the args are set to 100 (0 with deviation thresholds) so they never decide.
Evicting moves usage from a source node to the pool of room left on the destination nodes and stops
when that room runs out for any resource.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from koordinator.apis.extension import kube_qos_class, pod_requests, resource_list
from koordinator_roles.descheduler.framework.interfaces import Handle, Obj
from koordinator_roles.descheduler.framework.nodefit import TERMINAL_PHASES, is_unschedulable

from .args import ArgsReader, Namespaces
from .podutil import evict, meta, node_name, pod_priority, spec, status

DEFAULT_RESOURCES = ("cpu", "memory", "pods")
_QOS_ORDER = {"BestEffort": 0, "Burstable": 1, "Guaranteed": 2}


def parse_thresholds(r: ArgsReader, name: str) -> dict[str, float]:
    """A ResourceThresholds map: resource → percentage in [0, 100]; it must name at least one resource."""
    raw = r.raw.get(name)
    if raw is None or raw == {}:
        raise r.error(name, "no resource threshold is configured")
    if not isinstance(raw, Mapping):
        raise r.error(name, f"must be a map of resource to percentage, got {raw!r}")
    out: dict[str, float] = {}
    for resource, value in raw.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise r.error(f"{name}.{resource}", f"must be a number, got {value!r}")
        if not 0 <= value <= 100:
            raise r.error(f"{name}.{resource}", f"{value} threshold not in [0, 100] range")
        out[resource] = float(value)
    return out


def evictable_namespaces(r: ArgsReader) -> Namespaces:
    """``evictableNamespaces``: only ``exclude`` is supported upstream."""
    ns = r.namespaces("evictableNamespaces")
    if ns.include:
        raise r.error("evictableNamespaces", "only Exclude namespaces can be set, inclusion is not supported")
    return ns


def with_defaults(thresholds: Mapping[str, float], value: float) -> dict[str, float]:
    """``thresholds`` with cpu/memory/pods set to ``value`` where not named."""
    out = dict(thresholds)
    for resource in DEFAULT_RESOURCES:
        out.setdefault(resource, value)
    return out


def pod_usage(pod: Mapping[str, Any], resources: tuple[str, ...]) -> dict[str, float]:
    """The pod's requests for ``resources`` (``pods``: 1000, one pod in milli-units)."""
    req = pod_requests(pod)
    return {r: (1000.0 if r == "pods" else float(req.get(r, 0))) for r in resources}


@dataclass
class NodeUsage:
    """One node's allocatable and requested amounts (milli-units; ``pods`` is 1000 per pod)."""

    node: Obj
    allocatable: dict[str, float]
    usage: dict[str, float]
    pods: list[Obj] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The node's name."""
        return node_name(self.node)

    def percent(self, resource: str) -> float:
        """Requested share of allocatable, in percent (0 when nothing is allocatable)."""
        alloc = self.allocatable.get(resource, 0.0)
        return 0.0 if alloc <= 0 else self.usage.get(resource, 0.0) * 100.0 / alloc

    def amount(self, resource: str, percent: float) -> float:
        """``percent`` of the node's allocatable, as an amount."""
        return self.allocatable.get(resource, 0.0) * percent / 100.0


def node_usages(handle: Handle, nodes: list[Obj], resources: tuple[str, ...]) -> list[NodeUsage]:
    """Allocatable, requested amounts and non-terminated pods of each node."""
    out = []
    for n in nodes:
        alloc = resource_list(status(n).get("allocatable") or status(n).get("capacity"))
        pods = handle.pods_on_node(node_name(n), lambda p: status(p).get("phase") not in TERMINAL_PHASES)
        usage = {r: 0.0 for r in resources}
        for p in pods:
            for r, v in pod_usage(p, resources).items():
                usage[r] += v
        out.append(NodeUsage(n, {r: float(alloc.get(r, 0)) for r in resources}, usage, pods))
    return out


def eviction_order(pods: list[Obj]) -> None:
    """Lowest priority first; within a priority BestEffort, then Burstable, then Guaranteed."""
    pods.sort(key=lambda p: (spec(p).get("priority") is not None, pod_priority(p),
                             _QOS_ORDER.get(kube_qos_class(p), 1)))


def evict_from_sources(handle: Handle, plugin: str, sources: list[NodeUsage], available: dict[str, float],
                       resources: tuple[str, ...], namespaces: Namespaces,
                       keep_going: Callable[[NodeUsage], bool], reason: Callable[[NodeUsage], str]) -> None:
    """Evict from each source node, in order, while ``keep_going(node)`` holds and every resource still has room
    in ``available`` (which is debited by each evicted pod's requests)."""

    def room_left() -> bool:
        """Every resource still has room on the destinations."""
        return all(available[r] > 0 for r in resources)

    for src in sources:
        if not room_left():
            return
        candidates = [p for p in src.pods
                      if namespaces.allows(meta(p).get("namespace", "")) and handle.evictor.filter(p)]
        eviction_order(candidates)
        for pod in candidates:
            if not (keep_going(src) and room_left()) or handle.evictor.node_limit_exceeded(src.name):
                break
            if not evict(handle, pod, plugin, reason(src)):
                continue
            for r, v in pod_usage(pod, resources).items():
                src.usage[r] -= v
                available[r] -= v


def schedulable(u: NodeUsage) -> bool:
    """The node is not cordoned."""
    return not is_unschedulable(u.node)
