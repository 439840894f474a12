"""CPU sets as Linux and the kubelet write them (``0-3,8,10-11``), and kubelet's topology-aware pick.

:func:`take_by_topology` chooses ``n`` CPUs the way the kubelet's static CPU manager packs them
(``takeByTopologyNUMAPacked``): whole sockets first when ``n`` covers one, then whole physical
cores, then single threads from the sockets and cores with the fewest free CPUs, lowest ids first.
The koordlet uses it for a node reservation given as a CPU count.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

# The CPU-list format is shared with the scheduler: one implementation, re-exported here.
from koordinator.apis.cpuset import format_cpuset, parse_cpuset  # noqa: F401


def take_by_topology(topology: Sequence[Mapping[str, int]], available: Iterable[int], n: int) -> list[int]:
    """``n`` CPUs out of ``available`` packed by topology (see the module docstring).

    ``topology`` is the CPU list of the KV node info (``{"id", "core", "socket", ...}`` per CPU).
    ValueError when fewer than ``n`` CPUs are available.
    """
    free = set(available)
    if n <= 0:
        return []
    if n > len(free):
        raise ValueError(f"cannot take {n} CPUs: only {len(free)} available")
    socket_of = {c["id"]: c["socket"] for c in topology}
    core_of = {c["id"]: (c["socket"], c["core"]) for c in topology}
    socket_cpus: dict[int, list[int]] = {}
    core_cpus: dict[tuple[int, int], list[int]] = {}
    for c in topology:
        socket_cpus.setdefault(c["socket"], []).append(c["id"])
        core_cpus.setdefault((c["socket"], c["core"]), []).append(c["id"])
    taken: list[int] = []

    def take(cpus: Iterable[int]) -> None:
        for cpu in cpus:
            free.discard(cpu)
            taken.append(cpu)

    def need() -> int:
        return n - len(taken)

    # 1. whole sockets
    for socket in sorted(socket_cpus):
        cpus = socket_cpus[socket]
        if need() >= len(cpus) and all(c in free for c in cpus):
            take(sorted(cpus))

    def free_in_socket(socket: int) -> int:
        return sum(1 for c in socket_cpus.get(socket, ()) if c in free)

    # 2. whole cores, from the sockets with the fewest free CPUs
    cores = sorted((key for key, cpus in core_cpus.items() if all(c in free for c in cpus)),
                   key=lambda key: (free_in_socket(key[0]), key[0], key[1]))
    for key in cores:
        cpus = core_cpus[key]
        if need() >= len(cpus) and all(c in free for c in cpus):
            take(sorted(cpus))

    # 3. single threads: fill the fullest sockets and cores first
    if need() > 0:
        def free_in_core(cpu: int) -> int:
            return sum(1 for c in core_cpus.get(core_of.get(cpu, (-1, -1)), ()) if c in free)

        rest = sorted(free, key=lambda c: (free_in_socket(socket_of.get(c, -1)), socket_of.get(c, -1),
                                           free_in_core(c), core_of.get(c, (-1, -1)), c))
        take(rest[:need()])
    return sorted(taken)
