"""What the console reads on the node itself: ``/proc``, the koordlet's cgroup tree and its run dir.

Everything here is plain file reading with the kernel's and the koordlet's documented formats, so the
console works beside a real koordlet as well as over a simulated node of ``koordinator local``
(``DATA_DIR/nodes/<node>/{proc,cgroup}`` and ``DATA_DIR/koordlet/<node>``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Under the koordlet's ``--run-dir``: the resource executor's audit log (JSON lines, rotated by size).
AUDIT_LOG = os.path.join("audit", "audit.log")
#: Under the run dir in ``koordinator local`` (the koordlet's ``--runtime-hooks-config-path``): the hook
#: server's registration for a runtime proxy.
HOOK_CONFIG_DIR = "hookserver.d"
#: The runtime hook plugins of the koordlet (the ``owner`` of the cgroup writes they make).
HOOK_PLUGINS = ("BatchResource", "CPUNormalization", "CPUSetAllocator", "GPUEnvInject", "GroupIdentity")
#: How much of the audit log's end is read per refresh (lines are ~300 bytes).
AUDIT_TAIL_BYTES = 64 << 10


class SourceError(Exception):
    """A node-local source given on the command line cannot be used (the message names the flag and path)."""


def check_dir(flag: str, path: str | None) -> None:
    """SourceError unless ``path`` (the value of ``flag``) is a readable directory; None is fine (not given)."""
    if path is None:
        return
    if not os.path.isdir(path):
        raise SourceError(f"{flag}: Invalid value: {path!r}: not a directory")
    if not os.access(path, os.R_OK | os.X_OK):
        raise SourceError(f"{flag}: Invalid value: {path!r}: not readable")


# -- /proc ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CpuTicks:
    busy: int
    total: int
    cpus: int


def read_cpu_ticks(proc_root: str) -> CpuTicks:
    """The aggregate ``cpu`` line of ``/proc/stat`` (busy = all but idle and iowait) and the CPU count."""
    busy = total = cpus = 0
    with open(os.path.join(proc_root, "stat"), encoding="utf-8") as f:
        for line in f:
            fields = line.split()
            if not fields:
                continue
            if fields[0] == "cpu":
                values = [int(v) for v in fields[1:9]]
                total = sum(values)
                busy = total - values[3] - (values[4] if len(values) > 4 else 0)
            elif fields[0].startswith("cpu") and fields[0][3:].isdigit():
                cpus += 1
    return CpuTicks(busy, total, cpus)


def read_memory(proc_root: str) -> tuple[int, int]:
    """``(total, used)`` bytes from ``/proc/meminfo`` (used = MemTotal - MemAvailable, as the koordlet counts)."""
    values: dict[str, int] = {}
    with open(os.path.join(proc_root, "meminfo"), encoding="utf-8") as f:
        for line in f:
            name, _, rest = line.partition(":")
            parts = rest.split()
            if parts:
                values[name] = int(parts[0]) * 1024
    total = values.get("MemTotal", 0)
    return total, max(0, total - values.get("MemAvailable", values.get("MemFree", 0)))


class CpuMeter:
    """Cores in use between two calls of :meth:`sample`, from ``/proc/stat`` deltas (None on the first call)."""

    def __init__(self, proc_root: str) -> None:
        self.proc_root = proc_root
        self._last: CpuTicks | None = None

    def sample(self) -> float | None:
        now = read_cpu_ticks(self.proc_root)
        last, self._last = self._last, now
        if last is None or now.total <= last.total:
            return None
        return (now.busy - last.busy) / (now.total - last.total) * max(1, now.cpus)


# -- cgroups ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BEState:
    """The BestEffort QoS cgroup's CPU limits in force: its cpuset and CFS quota (None: unlimited)."""

    cpuset: str | None
    cpus: int | None
    quota_cores: float | None
    path: str


def _cpuset_count(text: str) -> int:
    count = 0
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def be_state(cgroup_root: str) -> BEState | None:
    """The BE cgroup's state under ``cgroup_root`` (v2 or v1, systemd or cgroupfs naming), None when absent."""
    v2 = os.path.exists(os.path.join(cgroup_root, "cgroup.controllers"))
    for kubepods, be in (("kubepods.slice", "kubepods-besteffort.slice"), ("kubepods", "besteffort")):
        rel = os.path.join(kubepods, be)
        cpuset_dir = os.path.join(cgroup_root, rel) if v2 else os.path.join(cgroup_root, "cpuset", rel)
        cpu_dir = os.path.join(cgroup_root, rel) if v2 else os.path.join(cgroup_root, "cpu", rel)
        if not os.path.isdir(cpuset_dir) and not os.path.isdir(cpu_dir):
            continue
        cpuset = _read(os.path.join(cpuset_dir, "cpuset.cpus"))
        quota: float | None = None
        if v2:
            text = _read(os.path.join(cpu_dir, "cpu.max"))
            if text and not text.startswith("max"):
                q, _, period = text.partition(" ")
                quota = int(q) / int(period or "100000")
        else:
            q_text = _read(os.path.join(cpu_dir, "cpu.cfs_quota_us"))
            p_text = _read(os.path.join(cpu_dir, "cpu.cfs_period_us")) or "100000"
            if q_text and int(q_text) > 0:
                quota = int(q_text) / int(p_text)
        return BEState(cpuset=cpuset or None, cpus=_cpuset_count(cpuset) if cpuset else None, quota_cores=quota,
                       path=cpuset_dir)
    return None


# -- the koordlet's run dir ---------------------------------------------------------------------------

def audit_tail(run_dir: str, limit: int = 200) -> list[dict[str, Any]]:
    """The last ``limit`` entries of the executor's audit log, oldest first ([] without one)."""
    path = os.path.join(run_dir, AUDIT_LOG)
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - AUDIT_TAIL_BYTES))
            data = f.read()
    except OSError:
        return []
    lines = data.decode("utf-8", "replace").splitlines()
    if size > AUDIT_TAIL_BYTES and lines:
        lines = lines[1:]  # the first one is cut
    entries = []
    for line in lines[-limit:]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line being written
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


@dataclass(frozen=True)
class HookActivity:
    """One runtime hook plugin's cgroup writes in the audit log's tail."""

    plugin: str
    writes: int
    last: str
    last_file: str


def hook_activity(entries: list[dict[str, Any]]) -> list[HookActivity]:
    """The runtime hook plugins' writes among ``entries`` (audit log lines), by plugin."""
    by_plugin: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        if e.get("owner") in HOOK_PLUGINS:
            by_plugin.setdefault(str(e["owner"]), []).append(e)
    return [HookActivity(p, len(es), str(es[-1].get("time", "")), str(es[-1].get("file", "")))
            for p, es in sorted(by_plugin.items())]


def hook_registration(run_dir: str) -> dict[str, Any] | None:
    """The hook server's registration for a runtime proxy under ``run_dir/hookserver.d`` (None without one)."""
    folder = Path(run_dir) / HOOK_CONFIG_DIR
    try:
        files = sorted(folder.glob("*.json"))
    except OSError:
        return None
    for path in files:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            return doc
    return None


class NodeLocal:
    """The node-local sources the flags name (each optional); ``clock`` is for the sparkline's timestamps."""

    def __init__(self, *, proc_root: str | None = None, cgroup_root: str | None = None, run_dir: str | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        check_dir("--proc-root", proc_root)
        check_dir("--cgroup-root", cgroup_root)
        check_dir("--run-dir", run_dir)
        self.proc_root = proc_root
        self.cgroup_root = cgroup_root
        self.run_dir = run_dir
        self.clock = clock
        self.meter = CpuMeter(proc_root) if proc_root else None
