"""What the simulated kernel enforces: the limits written into a node's cgroup tree.

The simulator writes a pod's limits when it creates its cgroups (the kubelet's part); the koordlet
(or anybody) may rewrite them afterwards. :class:`LimitReader` reads them back every tick so the
simulated usage obeys whatever the files say now: the CFS quota (``cpu.cfs_quota_us`` /
``cpu.cfs_period_us`` on v1, ``cpu.max`` on v2), the cpuset (``cpuset.cpus``) and the memory limit
(``memory.limit_in_bytes`` / ``memory.max``).

A file is parsed again only when its (mtime, size, inode) changed, so a tick costs one ``stat``
per file. A missing, unreadable or malformed file means "no limit": the kernel would have refused
a malformed write, so what is on disk and unparsable cannot be in force. A file that held a value and
is found empty keeps that value for one more look: on these plain files a reader can fall between a
writer's truncation and its write, which a real cgroup file never shows.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable

from koordinator.sim import tree

#: v1 memory limits at or above this are "unlimited" (the kernel rounds huge values to PAGE_COUNTER_MAX).
_V1_HUGE = 1 << 62


@dataclass(frozen=True)
class Limits:
    """One cgroup's limits: ``cpu`` in milli-cores (CFS quota / period), ``cpus`` its own
    ``cpuset.cpus`` (None: inherited from the parent), ``memory`` bytes; None means no limit."""

    cpu: float | None = None
    cpus: frozenset[int] | None = None
    memory: int | None = None


def parse_cpulist(text: str, ncpus: int) -> frozenset[int] | None:
    """``0-2,5`` -> {0, 1, 2, 5}, restricted to the node's CPUs; None when empty or malformed."""
    text = text.strip()
    if not text:
        return None
    out: set[int] = set()
    try:
        for part in text.split(","):
            lo, sep, hi = part.partition("-")
            a, b = int(lo), int(hi) if sep else int(lo)
            if a < 0 or b < a:
                return None
            out.update(range(a, min(b, ncpus - 1) + 1))
    except ValueError:
        return None
    return frozenset(out) or None  # only CPUs the node lacks: the kernel refuses that, so no limit


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def parse_v1_quota(text: str) -> int | None:
    """``cpu.cfs_quota_us``: µs per period, None for -1 (unlimited) or garbage."""
    value = _int(text)
    return value if value is not None and value > 0 else None


def parse_v1_period(text: str) -> int | None:
    value = _int(text)
    return value if value is not None and value > 0 else None


def parse_cpu_max(text: str) -> float | None:
    """``cpu.max`` (``$MAX $PERIOD``, ``max`` unlimited) -> milli-cores."""
    fields = text.split()
    if not fields or fields[0] == "max" or len(fields) > 2:
        return None
    quota = _int(fields[0])
    period = _int(fields[1]) if len(fields) == 2 else tree.CFS_PERIOD_US
    if quota is None or period is None or quota <= 0 or period <= 0:
        return None
    return quota * 1000 / period


def parse_memory_limit(text: str) -> int | None:
    """``memory.limit_in_bytes`` / ``memory.max`` -> bytes (None: ``max``, huge, or garbage)."""
    value = _int(text)
    if value is None or value <= 0 or value >= _V1_HUGE:
        return None
    return value


class LimitReader:
    """Reads the limit files of one node tree, each parsed only after it changed (see the module
    docstring). Not thread-safe: the simulator's thread owns it."""

    def __init__(self, node_tree: tree.NodeTree) -> None:
        self.tree = node_tree
        self.ncpus = node_tree.topology.cpus
        self._cache: dict[str, tuple[tuple[int, int, int], Any]] = {}
        self._paths: dict[tuple[str, str, str], str] = {}
        self._emptied: set[str] = set()  # files seen empty once after holding a value (see _read)
        self.parses = 0  # files parsed (not merely stat'ed): for tests and benchmarks

    def _read(self, path: str, parse: Callable[[str], Any]) -> Any:
        try:
            st = os.stat(path)
        except OSError:
            self._cache.pop(path, None)
            return None
        key = (st.st_mtime_ns, st.st_size, st.st_ino)
        hit = self._cache.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        if st.st_size == 0 and hit is not None and hit[1] is not None and path not in self._emptied:
            # A writer between its O_TRUNC and its write() (the koordlet writes "echo v > file"-style, as a
            # cgroup wants): a real cgroup file is never seen empty then. Keep the value in force for this
            # look; an empty file is believed when it is still empty at the next one.
            self._emptied.add(path)
            return hit[1]
        self._emptied.discard(path)
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                value = parse(f.read(4096))
        except OSError:
            value = None
        self.parses += 1
        self._cache[path] = (key, value)
        return value

    def _path(self, subsystem: str, rel: str, name: str) -> str:
        # Joined once per file: pathlib on every tick would cost more than the stat itself.
        key = (subsystem, rel, name)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = os.fspath(self.tree.cgroup_path(subsystem, rel, name))
        return path

    def cpu(self, rel: str) -> float | None:
        """The CFS quota of ``rel`` in milli-cores (None: unlimited)."""
        if self.tree.version == 2:
            return self._read(self._path("", rel, "cpu.max"), parse_cpu_max)
        quota = self._read(self._path("cpu", rel, "cpu.cfs_quota_us"), parse_v1_quota)
        if quota is None:
            return None  # the period only matters under a quota: one stat less per cgroup
        period = self._read(self._path("cpu", rel, "cpu.cfs_period_us"), parse_v1_period) or tree.CFS_PERIOD_US
        return quota * 1000 / period

    def cpus(self, rel: str) -> frozenset[int] | None:
        """The cgroup's own ``cpuset.cpus`` (None: empty, i.e. inherited, missing or malformed)."""
        sub = "" if self.tree.version == 2 else "cpuset"
        return self._read(self._path(sub, rel, "cpuset.cpus"), lambda t: parse_cpulist(t, self.ncpus))

    def memory(self, rel: str) -> int | None:
        if self.tree.version == 2:
            return self._read(self._path("", rel, "memory.max"), parse_memory_limit)
        return self._read(self._path("memory", rel, "memory.limit_in_bytes"), parse_memory_limit)

    def limits(self, rel: str) -> Limits:
        return Limits(self.cpu(rel), self.cpus(rel), self.memory(rel))

    def forget(self, rel: str) -> None:
        """Drop cached entries under ``rel`` (a removed cgroup) so the cache stays bounded."""
        marker = os.sep + rel + os.sep
        for path in [p for p in self._cache if marker in p]:
            del self._cache[path]
            self._emptied.discard(path)
        for key in [k for k in self._paths if k[1] == rel or k[1].startswith(rel + "/")]:
            del self._paths[key]


def cap(milli: float | None, cpus: frozenset[int]) -> float:
    """The most CPU a cgroup can use: its quota, and one core per CPU of its effective cpuset."""
    limit = len(cpus) * 1000.0
    return limit if milli is None else min(milli, limit)


def spread(total: int, cpus: list[int], start: int, into: list[int]) -> None:
    """Add ``total`` ns evenly over ``cpus`` (the remainder from position ``start``, rotating so
    no CPU is favoured over time) into the per-CPU list ``into``."""
    k = len(cpus)
    base, rest = divmod(total, k)
    for j, cpu in enumerate(cpus):
        into[cpu] += base + (1 if (j - start) % k < rest else 0)


def place_outside(total: int, busy: list[int], span: int, start: int) -> tuple[list[int], int]:
    """Place ``total`` ns of work that no cpuset confines (the node's system processes) on CPUs that
    already carry ``busy`` ns each in a period of ``span`` ns: evenly while every CPU has room, and
    what does not fit on a CPU (one saturated by a cgroup confined to a few CPUs) on the CPUs with
    room left, in proportion to that room, as the kernel's load balancer would. Returns the per-CPU
    additions and the ns that fit nowhere (0 unless the node as a whole is full)."""
    n = len(busy)
    add = [0] * n
    spread(total, list(range(n)), start, add)
    excess = 0
    for i in range(n):
        room = max(0, span - busy[i])
        if add[i] > room:
            excess += add[i] - room
            add[i] = room
    if excess == 0:
        return add, 0
    rooms = [max(0, span - busy[i] - add[i]) for i in range(n)]
    free = sum(rooms)
    moved = min(excess, free)
    if moved > 0:
        given = 0
        for i in range(n):  # floor shares never exceed a CPU's room ...
            share = moved * rooms[i] // free
            add[i] += share
            rooms[i] -= share
            given += share
        for j in range(n):  # ... and the few ns of rounding left go where room is left
            i = (start + j) % n
            step = min(rooms[i], moved - given)
            add[i] += step
            given += step
    return add, excess - moved
