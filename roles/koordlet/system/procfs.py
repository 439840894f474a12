"""Readers for ``/proc`` (under :attr:`HostPaths.proc_root`): CPU ticks, meminfo, cpuinfo (reference A.4.1)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from koordinator_roles.koordlet.system.errors import SystemFileError
from koordinator_roles.koordlet.system.fileio import _show, read_bytes, read_text
from koordinator_roles.koordlet.system.paths import HostPaths

_DEFAULT_CLK_TCK = 100
_DEFAULT_PAGE_SIZE = 4096


def clock_ticks() -> int:
    """USER_HZ (``CLK_TCK``): /proc/stat counts CPU time in 1/CLK_TCK seconds (100 on Linux)."""
    try:
        value = os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return _DEFAULT_CLK_TCK
    return value if value > 0 else _DEFAULT_CLK_TCK


def page_size() -> int:
    """Bytes per page (v1 ``memory.numa_stat`` counts pages)."""
    try:
        value = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return _DEFAULT_PAGE_SIZE
    return value if value > 0 else _DEFAULT_PAGE_SIZE


@dataclass(frozen=True)
class CPUTicks:
    """Busy CPU ticks from /proc/stat: user + nice + system + irq + softirq (idle and iowait excluded)."""

    total: int
    per_cpu: dict[int, int] = field(default_factory=dict)


def _busy_ticks(line: bytes, path: str) -> int:
    fields = line.split()
    if len(fields) <= 7:
        raise SystemFileError(path, f"cpu line has {len(fields)} fields, want more than 7: {_show(line)}")
    try:
        return int(fields[1]) + int(fields[2]) + int(fields[3]) + int(fields[6]) + int(fields[7])
    except ValueError:
        raise SystemFileError(path, f"cpu line has a non-integer field: {_show(line)}") from None


def parse_cpu_ticks(data: bytes, path: str) -> CPUTicks:
    """The ``cpu`` and ``cpuN`` lines of /proc/stat content (they come first, before intr & co)."""
    if not data.startswith(b"cpu "):
        first = data.split(b"\n", 1)[0]
        raise SystemFileError(path, f"first line is not the 'cpu' total: {_show(first)}")
    total = 0
    per_cpu: dict[int, int] = {}
    start = 0
    size = len(data)
    while start < size:
        end = data.find(b"\n", start)
        if end < 0:
            end = size
        if not data.startswith(b"cpu", start):
            break
        line = data[start:end]
        if start == 0:
            total = _busy_ticks(line, path)
        else:
            label = line.split(None, 1)[0]
            try:
                cpu = int(label[3:])
            except ValueError:
                raise SystemFileError(path, f"bad per-CPU label {_show(label)}") from None
            per_cpu[cpu] = _busy_ticks(line, path)
        start = end + 1
    return CPUTicks(total=total, per_cpu=per_cpu)


def read_cpu_ticks(paths: HostPaths) -> CPUTicks:
    """Busy ticks of the node and of each CPU from ``<proc>/stat``."""
    path = paths.proc("stat")
    return parse_cpu_ticks(read_bytes(path), path)


def parse_meminfo(data: bytes, path: str) -> dict[str, int]:
    """``Key: value [kB]`` lines → {key: value} (kB for sizes). NUMA ``Node N `` prefixes are dropped."""
    out: dict[str, int] = {}
    for line in data.split(b"\n"):
        key, sep, rest = line.partition(b":")
        if not sep:
            continue
        if key.startswith(b"Node "):     # sysfs nodeN/meminfo: "Node 0 MemTotal:  123 kB"
            key = key.split(None, 2)[-1]
        value = rest.split()
        if not value:
            continue
        try:
            out[key.strip().decode()] = int(value[0])
        except ValueError:
            raise SystemFileError(path, f"{key.decode(errors='replace')!r} is not an integer: {_show(rest)}") from None
    return out


def read_meminfo(paths: HostPaths) -> dict[str, int]:
    """``<proc>/meminfo`` as {key: kB}."""
    path = paths.proc("meminfo")
    return parse_meminfo(read_bytes(path), path)


def _need(info: dict[str, int], keys: tuple[str, ...], path: str) -> list[int]:
    missing = [k for k in keys if k not in info]
    if missing:
        raise SystemFileError(path, f"missing {', '.join(missing)}")
    return [info[k] for k in keys]


def node_memory_usage(meminfo: dict[str, int], path: str = "meminfo") -> tuple[int, int]:
    """(used, used with page cache) in bytes: (MemTotal − MemAvailable)·1024 and (MemTotal − MemFree)·1024."""
    total, available, free = _need(meminfo, ("MemTotal", "MemAvailable", "MemFree"), path)
    return max(total - available, 0) * 1024, max(total - free, 0) * 1024


def numa_memory_usage(meminfo: dict[str, int], path: str = "meminfo") -> int:
    """NUMA node used bytes: max(0, MemTotal − (MemFree + Active(file) + Inactive(file) + SReclaimable))·1024."""
    total, free = _need(meminfo, ("MemTotal", "MemFree"), path)
    available = free + meminfo.get("Active(file)", 0) + meminfo.get("Inactive(file)", 0) + meminfo.get("SReclaimable", 0)
    return max(total - available, 0) * 1024


def read_cpuinfo(paths: HostPaths) -> dict:
    """``<proc>/cpuinfo``: {"model", "vendor", "processors": [{"id", "socket", "core"}]} (socket/core None
    where the architecture does not say)."""
    path = paths.proc("cpuinfo")
    model = vendor = ""
    processors: list[dict] = []
    current: dict | None = None
    for line in read_text(path).splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "processor":
            try:
                current = {"id": int(value), "socket": None, "core": None}
            except ValueError:
                raise SystemFileError(path, f"processor is not an integer: {value!r}") from None
            processors.append(current)
        elif key == "model name" and not model:
            model = value
        elif key == "vendor_id" and not vendor:
            vendor = value
        elif key in ("physical id", "core id") and current is not None:
            try:
                current["socket" if key == "physical id" else "core"] = int(value)
            except ValueError:
                raise SystemFileError(path, f"{key} is not an integer: {value!r}") from None
    return {"model": model, "vendor": vendor, "processors": processors}
