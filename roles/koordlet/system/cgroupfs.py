"""Readers for cgroup files of pods, containers and host applications (reference A.3.2, A.4.2, A.4.3).

:class:`CgroupReader` reads each file at most once per collection round (the CPU usage and the
throttling counters of a v2 cgroup both come from ``cpu.stat``): call :meth:`CgroupReader.begin_round`
at the start of every round. Every failure is a :class:`SystemFileError` naming the path.
"""

from __future__ import annotations

from typing import Callable

from koordinator_roles.koordlet.system.cgroup import CgroupLayout
from koordinator_roles.koordlet.system.cpuset import parse_cpuset
from koordinator_roles.koordlet.system.errors import SystemFileError
from koordinator_roles.koordlet.system.fileio import _show, keyed_ints, line_patterns, read_bytes

# memory.stat keys: usage = the first three, page cache = the last two (v1 hierarchical totals
# carry a "total_" prefix).
_MEMORY_KEYS = (b"inactive_anon", b"active_anon", b"unevictable", b"active_file", b"inactive_file")
_V2_MEMORY = line_patterns(_MEMORY_KEYS)
_V1_MEMORY = line_patterns(tuple(b"total_" + k for k in _MEMORY_KEYS))
_USAGE_USEC = line_patterns((b"usage_usec",))
_THROTTLING = line_patterns((b"nr_periods", b"nr_throttled"))
_V2_CPU = line_patterns((b"usage_usec", b"nr_periods", b"nr_throttled"))

# Path strings are cached per (subsystem, dir, file); the cache is simply dropped when it grows past
# this many entries (pod churn), which keeps it bounded without bookkeeping.
_PATH_CACHE_MAX = 20000


def parse_numa_stat_v1(data: bytes, path: str, page_size: int) -> dict[int, int]:
    """v1 ``memory.numa_stat``: the first line ``total=… N0=… N1=…`` counts pages → {node: bytes}."""
    first = data.split(b"\n", 1)[0]
    fields = first.split()
    if not fields or not fields[0].startswith(b"total="):
        raise SystemFileError(path, f"first line is not 'total=...': {_show(first)}")
    return _numa_fields(fields[1:], path, page_size)


def parse_numa_stat_v2(data: bytes, path: str) -> dict[int, int]:
    """v2 ``memory.numa_stat``: ``anon N0=… `` plus ``file N0=…`` lines in bytes → {node: bytes}."""
    data = b"\n" + data
    out: dict[int, int] = {}
    found = False
    for pattern in (b"\nanon ", b"\nfile "):
        i = data.find(pattern)
        if i < 0:
            continue
        found = True
        end = data.find(b"\n", i + 1)
        line = data[i + len(pattern):end] if end >= 0 else data[i + len(pattern):]
        for node, value in _numa_fields(line.split(), path, 1).items():
            out[node] = out.get(node, 0) + value
    if not found:
        raise SystemFileError(path, "no 'anon' or 'file' line")
    return out


def _numa_fields(fields: list[bytes], path: str, unit: int) -> dict[int, int]:
    out: dict[int, int] = {}
    for f in fields:
        key, sep, value = f.partition(b"=")
        if not sep or not key.startswith(b"N"):
            raise SystemFileError(path, f"bad NUMA field {_show(f)}")
        try:
            out[int(key[1:])] = int(value) * unit
        except ValueError:
            raise SystemFileError(path, f"bad NUMA field {_show(f)}") from None
    return out


class CgroupReader:
    """Parsed cgroup values for one layout, each file read at most once per round."""

    def __init__(self, layout: CgroupLayout, *, page_size: int = 4096,
                 read: Callable[[str], bytes] = read_bytes) -> None:
        self.layout = layout
        self.page_size = page_size
        self._read = read
        self._memo: dict[str, bytes | SystemFileError] = {}
        self._paths: dict[tuple[str, str, str], str] = {}
        # v2 cpu.stat parsed once per round: rel dir → (usage ns, (nr_periods, nr_throttled) or the error)
        self._cpu_v2: dict[str, tuple[int, tuple[int, int] | SystemFileError]] = {}
        self._memory_patterns = _V2_MEMORY if layout.version == 2 else _V1_MEMORY

    def begin_round(self) -> None:
        """Forget the previous round's file contents."""
        self._memo.clear()
        self._cpu_v2.clear()

    def path(self, subsystem: str, rel_dir: str, filename: str) -> str:
        """:meth:`CgroupLayout.path`, cached."""
        key = (subsystem, rel_dir, filename)
        path = self._paths.get(key)
        if path is None:
            if len(self._paths) >= _PATH_CACHE_MAX:
                self._paths.clear()
            path = self._paths[key] = self.layout.path(subsystem, rel_dir, filename)
        return path

    def _file(self, path: str) -> bytes:
        cached = self._memo.get(path)
        if cached is None:
            try:
                cached = self._read(path)
            except SystemFileError as err:
                cached = err
            self._memo[path] = cached
        if isinstance(cached, SystemFileError):
            raise cached
        return cached

    # -- CPU ---------------------------------------------------------------------------------------

    def _cpu_stat_v2(self, rel_dir: str) -> tuple[int, tuple[int, int] | SystemFileError]:
        """v2 ``cpu.stat`` → (usage ns, throttling counters or why they are missing), memoized per round."""
        parsed = self._cpu_v2.get(rel_dir)
        if parsed is None:
            path = self.path("cpu", rel_dir, "cpu.stat")
            data = self._file(path)
            try:
                usage, periods, throttled = keyed_ints(data, _V2_CPU, path)
                parsed = (usage * 1000, (periods, throttled))
            except SystemFileError:
                # usage alone may still be fine (no cpu controller → no nr_* lines); else this raises
                usage = keyed_ints(data, _USAGE_USEC, path)[0]
                try:
                    periods, throttled = keyed_ints(data, _THROTTLING, path)
                    parsed = (usage * 1000, (periods, throttled))
                except SystemFileError as err:
                    parsed = (usage * 1000, err)
            self._cpu_v2[rel_dir] = parsed
        return parsed

    def cpu_usage_ns(self, rel_dir: str) -> int:
        """Cumulative CPU time in ns: v1 ``cpuacct.usage``; v2 ``cpu.stat`` usage_usec × 1000."""
        if self.layout.version == 2:
            return self._cpu_stat_v2(rel_dir)[0]
        path = self.path("cpuacct", rel_dir, "cpuacct.usage")
        data = self._file(path)
        try:
            return int(data)
        except ValueError:
            raise SystemFileError(path, f"not an integer: {_show(data)}") from None

    def cpu_throttling(self, rel_dir: str) -> tuple[int, int]:
        """(nr_periods, nr_throttled) from ``cpu.stat`` (v1 in the cpu subsystem)."""
        if self.layout.version == 2:
            counters = self._cpu_stat_v2(rel_dir)[1]
            if isinstance(counters, SystemFileError):
                raise counters
            return counters
        path = self.path("cpu", rel_dir, "cpu.stat")
        periods, throttled = keyed_ints(self._file(path), _THROTTLING, path)
        return periods, throttled

    def cpu_quota(self, rel_dir: str) -> tuple[int, int]:
        """(CFS quota, period) in µs, quota -1 when unlimited: v1 ``cpu.cfs_quota_us`` and
        ``cpu.cfs_period_us``, v2 ``cpu.max`` (``max 100000`` or ``<quota> <period>``)."""
        if self.layout.version == 2:
            path = self.path("cpu", rel_dir, "cpu.max")
            data = self._file(path)
            parts = data.split()
            try:
                if len(parts) != 2:
                    raise ValueError
                return (-1 if parts[0] == b"max" else int(parts[0])), int(parts[1])
            except ValueError:
                raise SystemFileError(path, f"not '<quota|max> <period>': {_show(data)}") from None
        return self._int("cpu", rel_dir, "cpu.cfs_quota_us"), self._int("cpu", rel_dir, "cpu.cfs_period_us")

    def cpuset_cpus(self, rel_dir: str) -> list[int]:
        """The CPUs of ``cpuset.cpus``; on v2 an empty own list means the parent's, so the
        ``cpuset.cpus.effective`` list is read then (what the tasks actually get)."""
        path = self.path("cpuset", rel_dir, "cpuset.cpus")
        cpus = self._cpus(path)
        if not cpus and self.layout.version == 2:
            cpus = self._cpus(self.path("cpuset", rel_dir, "cpuset.cpus.effective"))
        return cpus

    def _cpus(self, path: str) -> list[int]:
        data = self._file(path)
        try:
            return parse_cpuset(data.decode("ascii").strip(), path)
        except (UnicodeDecodeError, ValueError):
            raise SystemFileError(path, f"not a CPU list: {_show(data)}") from None

    def _int(self, subsystem: str, rel_dir: str, filename: str) -> int:
        path = self.path(subsystem, rel_dir, filename)
        data = self._file(path)
        try:
            return int(data)
        except ValueError:
            raise SystemFileError(path, f"not an integer: {_show(data)}") from None

    # -- memory ------------------------------------------------------------------------------------

    def memory_usage(self, rel_dir: str) -> tuple[int, int]:
        """(usage, usage with page cache) in bytes from ``memory.stat``.

        usage = inactive_anon + active_anon + unevictable; with page cache add active_file +
        inactive_file (v1 reads the ``total_*`` keys).
        """
        path = self.path("memory", rel_dir, "memory.stat")
        inactive_anon, active_anon, unevictable, active_file, inactive_file = keyed_ints(
            self._file(path), self._memory_patterns, path)
        usage = inactive_anon + active_anon + unevictable
        return usage, usage + active_file + inactive_file

    def memory_current(self, rel_dir: str) -> int:
        """Charged memory in bytes, page cache included: v1 ``memory.usage_in_bytes``, v2 ``memory.current``."""
        name = "memory.usage_in_bytes" if self.layout.version == 1 else "memory.current"
        path = self.path("memory", rel_dir, name)
        data = self._file(path)
        try:
            return int(data)
        except ValueError:
            raise SystemFileError(path, f"not an integer: {_show(data)}") from None

    def memory_numa(self, rel_dir: str) -> dict[int, int]:
        """Memory per NUMA node in bytes from ``memory.numa_stat`` (v1 pages × page size, v2 anon + file)."""
        path = self.path("memory", rel_dir, "memory.numa_stat")
        data = self._file(path)
        if self.layout.version == 1:
            return parse_numa_stat_v1(data, path, self.page_size)
        return parse_numa_stat_v2(data, path)
