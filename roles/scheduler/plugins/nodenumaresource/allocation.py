"""Per-node allocation state: the CPUs and NUMA amounts given to pods (Koordinator's NodeAllocation).

Built from assigned pods' ``scheduling.koordinator.sh/resource-status`` (Pod informer) and from
the plugin's own Reserve (assumed pods); released on Unreserve, ForgetPod and pod deletion.
Each pod's allocation is kept whole by UID so that adding it twice (Reserve, then the informer's
copy of the bound pod) replaces rather than double counts.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Iterable, Mapping

from koordinator_roles.scheduler.plugins.nodenumaresource.topology import CPUTopology


@dataclass(frozen=True)
class PodAllocation:
    """One pod's cpuset and NUMA amounts on a node."""

    uid: str
    cpus: frozenset[int] = frozenset()
    exclusive_policy: str = ""
    numa: Mapping[int, Mapping[str, int]] = field(default_factory=dict)  # NUMA node → resource → milli


class NodeAllocation:
    """The allocations on one node (not thread safe: the store's lock guards it)."""

    def __init__(self) -> None:
        self.pods: dict[str, PodAllocation] = {}
        self.cpu_refs: dict[int, int] = {}
        self.cpu_exclusive: dict[int, str] = {}

    def add(self, alloc: PodAllocation) -> None:
        self.remove(alloc.uid)
        self.pods[alloc.uid] = alloc
        for c in alloc.cpus:
            self.cpu_refs[c] = self.cpu_refs.get(c, 0) + 1
            if alloc.exclusive_policy:
                self.cpu_exclusive[c] = alloc.exclusive_policy

    def remove(self, uid: str) -> PodAllocation | None:
        alloc = self.pods.pop(uid, None)
        if alloc is None:
            return None
        for c in alloc.cpus:
            left = self.cpu_refs.get(c, 0) - 1
            if left > 0:
                self.cpu_refs[c] = left
            else:
                self.cpu_refs.pop(c, None)
                self.cpu_exclusive.pop(c, None)
        return alloc

    def view(self, removed: Iterable[str] = (), added: Iterable[PodAllocation] = ()) -> "AllocationView":
        """A frozen copy for one scheduling decision, with preemption's removed/added pods applied."""
        removed = set(removed)
        added = list(added)
        if not removed and not added:
            return AllocationView(list(self.pods.values()))
        pods = [a for uid, a in self.pods.items() if uid not in removed]
        return AllocationView(pods + added)


class AllocationView:
    """Derived facts over a list of pod allocations (CPU refcounts, NUMA use, single/shared NUMA state)."""

    def __init__(self, pods: list[PodAllocation]) -> None:
        self.pods = pods
        self.details: dict[int, tuple[int, str]] = {}
        for a in pods:
            for c in a.cpus:
                ref, excl = self.details.get(c, (0, ""))
                self.details[c] = (ref + 1, a.exclusive_policy or excl)

    @property
    def cpuset_count(self) -> int:
        """How many CPUs are allocated as cpusets (amplification and NUMA scoring count them)."""
        return len(self.details)

    def available_cpus(self, topo: CPUTopology, reserved: Iterable[int], max_ref_count: int = 1) -> set[int]:
        full = {c for c, (ref, _) in self.details.items() if ref >= max_ref_count}
        return set(topo.cpus) - full - set(reserved)

    def numa_used(self, topo: CPUTopology) -> dict[int, dict[str, int]]:
        """Allocated amounts per NUMA node; cpusets of pods without NUMA amounts count 1000 per CPU."""
        out: dict[int, dict[str, int]] = {}
        for a in self.pods:
            if a.numa:
                for node, res in a.numa.items():
                    slot = out.setdefault(node, {})
                    for k, v in res.items():
                        slot[k] = slot.get(k, 0) + v
            else:
                for c in a.cpus:
                    node = topo.node_of.get(c)
                    if node is not None:
                        slot = out.setdefault(node, {})
                        slot["cpu"] = slot.get("cpu", 0) + 1000
        return out

    def numa_states(self) -> tuple[set[int], set[int]]:
        """(NUMA nodes used by single-NUMA pods, NUMA nodes used by multi-NUMA pods)."""
        single: set[int] = set()
        shared: set[int] = set()
        for a in self.pods:
            nodes = [n for n, res in a.numa.items() if any(res.values())]
            if len(nodes) == 1:
                single.update(nodes)
            elif len(nodes) > 1:
                shared.update(nodes)
        return single, shared


class AllocationStore:
    """Every node's :class:`NodeAllocation`, shared by the scheduling thread and informer threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._nodes: dict[str, NodeAllocation] = {}
        self._where: dict[str, str] = {}  # pod uid → node name

    def add(self, node_name: str, alloc: PodAllocation) -> None:
        with self.lock:
            old = self._where.get(alloc.uid)
            if old is not None and old != node_name:
                self._nodes[old].remove(alloc.uid)
            self._nodes.setdefault(node_name, NodeAllocation()).add(alloc)
            self._where[alloc.uid] = node_name

    def remove(self, uid: str) -> None:
        with self.lock:
            node = self._where.pop(uid, None)
            if node is not None:
                na = self._nodes[node]
                na.remove(uid)
                if not na.pods:
                    del self._nodes[node]

    def get(self, uid: str) -> tuple[str, PodAllocation] | None:
        """(node name, allocation) of a pod or reserve pod, or None."""
        with self.lock:
            node = self._where.get(uid)
            return None if node is None else (node, self._nodes[node].pods[uid])

    def has(self, uid: str) -> bool:
        with self.lock:
            return uid in self._where

    def view(self, node_name: str, removed: Iterable[str] = (),
             added: Iterable[PodAllocation] = ()) -> AllocationView:
        with self.lock:
            na = self._nodes.get(node_name)
            if na is None:
                return AllocationView(list(added))
            return na.view(removed, added)
