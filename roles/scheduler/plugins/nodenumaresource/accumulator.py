"""The cpuset algorithm (reference §2.2.5): ``take_cpus`` and the bind-policy aware ``allocate_cpus``.

Containers (NUMA nodes, sockets) are ordered by the NUMA allocate strategy: MostAllocated packs
(fewest free CPUs first), LeastAllocated spreads (most free first); ties go to the socket's free
count in the same direction, then the lower ID. Exclusive marks: CPUs allocated with
``PCPULevel`` make their core exclusive, ``NUMANodeLevel`` their NUMA node; a pod respects the
marks of its own exclusive policy only.
"""

from __future__ import annotations

from typing import Iterable, Mapping

from koordinator.apis import numa
from koordinator_roles.scheduler.plugins.nodenumaresource.topology import CPUTopology

NOT_ENOUGH = "not enough cpus available to satisfy request"
FAILED = "failed to allocate cpus"


class AllocationError(Exception):
    """A cpuset or NUMA allocation that cannot be made; the message is the user-facing reason."""


class _Accumulator:
    def __init__(self, topo: CPUTopology, max_ref_count: int, available: Iterable[int],
                 allocated: Mapping[int, tuple[int, str]], n: int, exclusive_policy: str, strategy: str) -> None:
        self.topo = topo
        self.max_ref = max_ref_count
        self.available = set(available)
        self.result: list[int] = []
        self.need = n
        self.refs = {cpu: ref for cpu, (ref, _) in allocated.items()}
        self.exclusive_policy = exclusive_policy
        self.most = strategy == numa.NUMA_MOST_ALLOCATED
        self.exclusive_cores = {topo.core_of[c] for c, (_, p) in allocated.items()
                                if p == numa.CPU_EXCLUSIVE_POLICY_PCPU_LEVEL and c in topo.core_of}
        self.exclusive_nodes = {topo.node_of[c] for c, (_, p) in allocated.items()
                                if p == numa.CPU_EXCLUSIVE_POLICY_NUMA_NODE_LEVEL and c in topo.node_of}

    # -- bookkeeping --------------------------------------------------------------------------------

    def take(self, cpus: Iterable[int]) -> None:
        for c in cpus:
            if c in self.available:
                self.available.discard(c)
                self.result.append(c)
                self.need -= 1

    @property
    def satisfied(self) -> bool:
        return self.need <= 0

    def _pcpu_exclusive(self, cpu: int) -> bool:
        return (self.exclusive_policy == numa.CPU_EXCLUSIVE_POLICY_PCPU_LEVEL
                and self.topo.core_of[cpu] in self.exclusive_cores)

    def _numa_exclusive(self, cpu: int) -> bool:
        return (self.exclusive_policy == numa.CPU_EXCLUSIVE_POLICY_NUMA_NODE_LEVEL
                and self.topo.node_of[cpu] in self.exclusive_nodes)

    def _free_in(self, cpus: Iterable[int]) -> int:
        avail = self.available
        return sum(1 for c in cpus if c in avail)

    def _direction(self, count: int) -> int:
        return count if self.most else -count

    def _sorted_nodes(self) -> list[int]:
        topo = self.topo
        socket_free = {s: self._free_in(cpus) for s, cpus in topo.socket_cpus.items()}
        return sorted(topo.node_cpus, key=lambda n: (self._direction(self._free_in(topo.node_cpus[n])),
                                                     self._direction(socket_free[topo.node_socket[n]]), n))

    def _sorted_sockets(self) -> list[int]:
        return sorted(self.topo.socket_cpus,
                      key=lambda s: (self._direction(self._free_in(self.topo.socket_cpus[s])), s))

    def _core_key(self, core: int) -> tuple:
        cpus = self.topo.core_cpus[core]
        ref = sum(self.refs.get(c, 0) for c in cpus) if self.max_ref > 1 else 0
        return (-self._free_in(cpus), ref, core)

    def _free_cores(self, cpus: Iterable[int], filter_exclusive: bool) -> list[int]:
        """CPUs of the cores whose every CPU is available, core by core (lower core ID first)."""
        topo, avail = self.topo, self.available
        cores = sorted({topo.core_of[c] for c in cpus if c in avail})
        out = []
        for core in cores:
            members = topo.core_cpus[core]
            if not all(c in avail for c in members):
                continue
            if filter_exclusive and any(self._pcpu_exclusive(c) or self._numa_exclusive(c) for c in members):
                continue
            out.extend(members)
        return out

    def _free_cpus_in(self, cpus: Iterable[int], filter_exclusive: bool, numa_level: bool) -> list[int]:
        """Available CPUs ordered core by core; with ``filter_exclusive`` one per core and no exclusive ones."""
        topo, avail = self.topo, self.available
        by_core: dict[int, list[int]] = {}
        for c in cpus:
            if c not in avail:
                continue
            if filter_exclusive and (self._pcpu_exclusive(c) or (numa_level and self._numa_exclusive(c))):
                continue
            by_core.setdefault(topo.core_of[c], []).append(c)
        out = []
        for core in sorted(by_core, key=self._core_key):
            members = sorted(by_core[core])
            out.extend(members[:1] if filter_exclusive else members)
        return out

    def spread(self, cpus: list[int]) -> list[int]:
        """First CPU of every core, then the second ones, ... (core order kept)."""
        by_core: dict[int, list[int]] = {}
        for c in cpus:
            by_core.setdefault(self.topo.core_of[c], []).append(c)
        out, level = [], 0
        groups = list(by_core.values())
        while len(out) < len(cpus):
            for g in groups:
                if level < len(g):
                    out.append(g[level])
            level += 1
        return out

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        """Every available CPU, cores ordered for the final fallback (see the reference's freeCPUs)."""
        topo, avail = self.topo, self.available
        used_sockets = {topo.socket_of[c] for c in self.result}
        socket_free = {s: self._free_in(cpus) for s, cpus in topo.socket_cpus.items()}
        node_free = {n: self._free_in(cpus) for n, cpus in topo.node_cpus.items()}
        by_core: dict[int, list[int]] = {}
        for c in sorted(avail):
            if filter_exclusive and (self._pcpu_exclusive(c) or self._numa_exclusive(c)):
                continue
            by_core.setdefault(topo.core_of[c], []).append(c)

        def key(core: int) -> tuple:
            first = topo.core_cpus[core][0]
            socket, node = topo.socket_of[first], topo.node_of[first]
            ref = sum(self.refs.get(c, 0) for c in topo.core_cpus[core]) if self.max_ref > 1 else 0
            return (socket not in used_sockets, self._direction(socket_free[socket]),
                    self._direction(node_free[node]), len(by_core[core]), socket, ref, core)

        out = []
        for core in sorted(by_core, key=key):
            out.extend(by_core[core])
        return out


def take_cpus(topo: CPUTopology, max_ref_count: int, available: Iterable[int],
              allocated: Mapping[int, tuple[int, str]], n: int, bind_policy: str, exclusive_policy: str,
              strategy: str) -> list[int]:
    """``n`` CPUs out of ``available`` (sorted); AllocationError with Koordinator's message otherwise.

    ``allocated``: cpu → (reference count, exclusive policy) of the CPUs already given to pods.
    """
    acc = _Accumulator(topo, max_ref_count, available, allocated, n, exclusive_policy, strategy)
    if acc.satisfied:
        return []
    if acc.need > len(acc.available):
        raise AllocationError(NOT_ENOUGH)
    full = bind_policy == numa.CPU_BIND_POLICY_FULL_PCPUS
    per_core = topo.cpus_per_core
    if full or per_core == 1:
        if acc.need <= topo.cpus_per_node:
            for filter_exclusive in (True, False):
                for node in acc._sorted_nodes():
                    cpus = acc._free_cores(topo.node_cpus[node], filter_exclusive)
                    if len(cpus) >= acc.need:
                        acc.take(cpus[:acc.need])
                        return sorted(acc.result)
        if acc.need <= topo.cpus_per_socket:
            for socket in acc._sorted_sockets():
                cpus = acc._free_cores(topo.socket_cpus[socket], True)
                if len(cpus) >= acc.need:
                    acc.take(cpus[:acc.need])
                    return sorted(acc.result)
        # Spill over sockets: whole sockets' free cores first (largest first), then core by core
        # from the smallest remaining ones.
        per_socket = [(s, acc._free_cores(topo.socket_cpus[s], False)) for s in sorted(topo.socket_cpus)]
        per_socket.sort(key=lambda sc: (-len(sc[1]), sc[0]))
        aside = []
        for _, cpus in per_socket:
            if acc.satisfied:
                break
            if cpus and acc.need >= len(cpus):
                acc.take(cpus)
            else:
                aside.append(cpus)
        if acc.need >= per_core:
            for cpus in sorted(aside, key=len):
                for i in range(0, len(cpus), per_core):
                    if acc.need < per_core:
                        break
                    acc.take(cpus[i:i + per_core])
        if acc.satisfied:
            return sorted(acc.result)
    if not full:
        if acc.need <= topo.cpus_per_node:
            for filter_exclusive in (True, False):
                for node in acc._sorted_nodes():
                    cpus = acc._free_cpus_in(topo.node_cpus[node], filter_exclusive, True)
                    if len(cpus) >= acc.need:
                        acc.take(acc.spread(cpus)[:acc.need])
                        return sorted(acc.result)
        if acc.need <= topo.cpus_per_socket:
            for filter_exclusive in (True, False):
                for socket in acc._sorted_sockets():
                    cpus = acc._free_cpus_in(topo.socket_cpus[socket], filter_exclusive, False)
                    if len(cpus) >= acc.need:
                        acc.take(acc.spread(cpus)[:acc.need])
                        return sorted(acc.result)
    for filter_exclusive in (True, False):
        for c in acc.spread(acc.free_cpus(filter_exclusive)):
            if acc.satisfied:
                break
            acc.take([c])
        if acc.satisfied:
            return sorted(acc.result)
    raise AllocationError(FAILED)


def filter_required(topo: CPUTopology, available: set[int], required_policy: str) -> set[int]:
    """Available CPUs a required bind policy may use: whole free cores (FullPCPUs) or one per core (Spread)."""
    if required_policy == numa.CPU_BIND_POLICY_FULL_PCPUS:
        return {c for c in available if all(m in available for m in topo.core_cpus[topo.core_of[c]])}
    if required_policy == numa.CPU_BIND_POLICY_SPREAD_BY_PCPUS:
        firsts: dict[int, int] = {}
        for c in sorted(available):
            firsts.setdefault(topo.core_of[c], c)
        return set(firsts.values())
    return set(available)


def check_required(topo: CPUTopology, cpus: list[int], required_policy: str) -> None:
    """After allocation: FullPCPUs must cover whole cores, SpreadByPCPUs one CPU per core."""
    if required_policy == numa.CPU_BIND_POLICY_FULL_PCPUS:
        chosen = set(cpus)
        ok = all(all(m in chosen for m in topo.core_cpus[topo.core_of[c]]) for c in cpus)
    elif required_policy == numa.CPU_BIND_POLICY_SPREAD_BY_PCPUS:
        ok = len({topo.core_of[c] for c in cpus}) == len(cpus)
    else:
        return
    if not ok:
        raise AllocationError(f"insufficient CPUs to satisfy required cpu bind policy {required_policy}")


def allocate_cpus(topo: CPUTopology, available: set[int], allocated: Mapping[int, tuple[int, str]], n: int,
                  bind_policy: str, required_policy: str, exclusive_policy: str, strategy: str,
                  numa_cpus: Mapping[int, int] | None = None, max_ref_count: int = 1,
                  preferred: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """The pod's cpuset: ``n`` CPUs, per NUMA node when ``numa_cpus`` (node → milli-cpu) is given.

    ``preferred`` (the CPUs of the reservation the pod uses) are taken first: all of the pod's
    CPUs from them when they suffice, else all of them and the rest from the other CPUs.
    """
    available = filter_required(topo, available, required_policy)
    if len(available) < n:
        raise AllocationError(NOT_ENOUGH)
    first = available & set(preferred)
    if first and not numa_cpus:
        k = min(n, len(first))
        result = take_cpus(topo, max_ref_count, first, allocated, k, bind_policy, exclusive_policy, strategy)
        if k < n:
            result += take_cpus(topo, max_ref_count, available - first, allocated, n - k, bind_policy,
                                exclusive_policy, strategy)
        result = sorted(result)
    elif numa_cpus:
        result = []
        for node in sorted(numa_cpus):
            in_node = {c for c in available if topo.node_of.get(c) == node}
            k = min(len(in_node), numa_cpus[node] // 1000)
            result.extend(take_cpus(topo, max_ref_count, in_node, allocated, k, bind_policy, exclusive_policy,
                                    strategy))
        if len(result) < n:
            raise AllocationError(NOT_ENOUGH)
        result = sorted(result[:n]) if len(result) > n else sorted(result)
    else:
        result = take_cpus(topo, max_ref_count, available, allocated, n, bind_policy, exclusive_policy, strategy)
    check_required(topo, result, required_policy)
    return result
