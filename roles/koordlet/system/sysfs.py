"""Readers for sysfs (under :attr:`HostPaths.sys_root`): CPU topology and NUMA nodes.

Sources: ``devices/system/cpu/cpuN/topology/{core_id,physical_package_id}``,
``devices/system/node/nodeN/{cpulist,meminfo}`` and
``devices/system/node/nodeN/hugepages/hugepages-<size>kB/nr_hugepages``.
"""

from __future__ import annotations

import os
import re

from koordinator_roles.koordlet.system.cpuset import parse_cpuset
from koordinator_roles.koordlet.system.errors import SystemFileError
from koordinator_roles.koordlet.system.fileio import read_bytes, read_int, read_text
from koordinator_roles.koordlet.system.paths import HostPaths
from koordinator_roles.koordlet.system.procfs import parse_meminfo

_CPU_DIR = re.compile(r"cpu(\d+)$")
_NODE_DIR = re.compile(r"node(\d+)$")

HUGEPAGE_2MI_KB = 2048
HUGEPAGE_1GI_KB = 1048576


def parse_cpulist(text: str, path: str = "cpulist") -> list[int]:
    """A kernel CPU list (``0-3,8,10-11``) → sorted CPU ids; SystemFileError naming the path when malformed."""
    try:
        return parse_cpuset(text.strip(), path)
    except ValueError as err:
        raise SystemFileError(path, str(err).removeprefix(f"{path}: ")) from None


def _numbered_dirs(parent: str, pattern: re.Pattern) -> list[int]:
    try:
        names = os.listdir(parent)
    except FileNotFoundError:
        return []
    except OSError as err:
        raise SystemFileError(parent, f"cannot list: {err.strerror or err}") from None
    ids = []
    for name in names:
        m = pattern.match(name)
        if m and os.path.isdir(os.path.join(parent, name)):
            ids.append(int(m.group(1)))
    return sorted(ids)


def cpu_topology(paths: HostPaths) -> list[dict]:
    """[{"id", "core", "socket"}] sorted by id for CPUs with a ``topology`` dir (offline CPUs have none).

    An empty list when sysfs has no CPU dirs (the caller falls back to /proc/cpuinfo).
    """
    base = paths.sys("devices", "system", "cpu")
    out = []
    for cpu in _numbered_dirs(base, _CPU_DIR):
        topo = f"{base}/cpu{cpu}/topology"
        if not os.path.isdir(topo):
            continue
        out.append({"id": cpu, "core": read_int(f"{topo}/core_id"),
                    "socket": read_int(f"{topo}/physical_package_id")})
    return out


def numa_node_ids(paths: HostPaths) -> list[int]:
    """NUMA node ids from ``devices/system/node/nodeN`` (empty when the kernel shows none)."""
    return _numbered_dirs(paths.sys("devices", "system", "node"), _NODE_DIR)


def numa_cpulist(paths: HostPaths, node: int) -> list[int]:
    """CPUs of a NUMA node."""
    path = paths.sys("devices", "system", "node", f"node{node}", "cpulist")
    return parse_cpulist(read_text(path), path)


def numa_meminfo(paths: HostPaths, node: int) -> dict[str, int]:
    """A NUMA node's meminfo as {key: kB} (the ``Node N`` prefix dropped)."""
    path = paths.sys("devices", "system", "node", f"node{node}", "meminfo")
    return parse_meminfo(read_bytes(path), path)


def numa_hugepages(paths: HostPaths, node: int, size_kb: int) -> int:
    """Configured huge pages of one size on a NUMA node; 0 when the size is not supported."""
    path = paths.sys("devices", "system", "node", f"node{node}", "hugepages", f"hugepages-{size_kb}kB",
                     "nr_hugepages")
    if not os.path.exists(path):
        return 0
    return read_int(path)
