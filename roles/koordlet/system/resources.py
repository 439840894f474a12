"""The cgroup resource registry (reference A.3.2): logical (v1) name → v1 subsystem/file, v2 file, valid values.

The one place that knows which file a setting lives in on each cgroup version and what the kernel
accepts there. Writers (:mod:`koordinator_roles.koordlet.resourceexecutor`) go through
:meth:`Resource.to_file` (validate, then format for the version); readers use :meth:`Resource.from_file`.

Values are given in the v1 form: ``cpu.cfs_quota_us`` -1 for unlimited (v2 writes ``max <period>``),
``cpu.shares`` (v2 converts to ``cpu.weight`` with the kubelet formula), ``memory.limit_in_bytes`` -1
for unlimited (v2 writes ``max``), cpusets as CPU lists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable

from koordinator_roles.koordlet.system.cpuset import format_cpuset, parse_cpuset

CFS_BASE_PERIOD = 100_000
CFS_MIN_QUOTA = 1000
SHARES_MIN, SHARES_MAX = 2, 262144
WEIGHT_MIN, WEIGHT_MAX = 1, 10000
#: v1 memory limits at or above this are "unlimited" (PAGE_COUNTER_MAX rounded to pages).
V1_MEMORY_UNLIMITED = 0x7FFFFFFFFFFFF000


class InvalidValue(ValueError):
    """A value the kernel would refuse for a file; the message names the file and the value."""


def shares_to_weight(shares: int) -> int:
    """kubelet: ``1 + (shares - 2) * 9999 / 262142`` clamped to [1, 10000] (integer division)."""
    return min(max(1 + (shares - 2) * 9999 // 262142, WEIGHT_MIN), WEIGHT_MAX)


def weight_to_shares(weight: int) -> int:
    """kubelet: ``(weight - 1) * 262142 / 9999 + 2`` clamped to [2, 262144]."""
    return min(max((weight - 1) * 262142 // 9999 + 2, SHARES_MIN), SHARES_MAX)


def _int(name: str, value: object) -> int:
    if isinstance(value, bool):
        raise InvalidValue(f"{name}: invalid value {value!r}: not an integer")
    try:
        return int(str(value).strip())
    except ValueError:
        raise InvalidValue(f"{name}: invalid value {value!r}: not an integer") from None


def _range(lo: int, hi: int | None) -> Callable[[str, object], str]:
    def check(name: str, value: object) -> str:
        n = _int(name, value)
        if n < lo or (hi is not None and n > hi):
            want = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
            raise InvalidValue(f"{name}: invalid value {value!r}: must be in {want}")
        return str(n)
    return check


def _cfs_quota(name: str, value: object) -> str:
    n = _int(name, value)
    if n != -1 and n < CFS_MIN_QUOTA:
        raise InvalidValue(f"{name}: invalid value {value!r}: must be -1 (unlimited) or >= {CFS_MIN_QUOTA}")
    return str(n)


def _cpus(name: str, value: object) -> str:
    try:
        cpus = parse_cpuset(value if isinstance(value, str) else format_cpuset(value), name)  # type: ignore[arg-type]
    except (TypeError, ValueError) as err:
        raise InvalidValue(f"{name}: invalid value {value!r}: {err}") from None
    if not cpus:
        raise InvalidValue(f"{name}: invalid value {value!r}: an empty CPU list leaves the tasks nowhere to run")
    return format_cpuset(cpus)


def _memory_limit(name: str, value: object) -> str:
    n = _int(name, value)
    if n < -1:
        raise InvalidValue(f"{name}: invalid value {value!r}: must be -1 (unlimited) or >= 0")
    return str(-1 if n >= V1_MEMORY_UNLIMITED else n)


@dataclass(frozen=True)
class Resource:
    """One cgroup setting: where it lives on v1 and v2 and how its values are checked and converted."""

    name: str                 # logical name = the v1 file name
    subsystem: str            # v1 subsystem directory
    v2_file: str | None       # None: not available on v2
    check: Callable[[str, object], str]   # canonical v1 text, or InvalidValue
    #: v1 canonical text → v2 file text (None: the same text); gets the current v2 content too.
    to_v2: Callable[[str, str | None], str] | None = None
    #: v2 file text → v1 canonical text (None: the same text).
    from_v2: Callable[[str], str] | None = None
    #: read from this v2 file instead of ``v2_file`` (cpuset.cpus.effective).
    v2_read_file: str | None = None
    #: mergeable in leveled batches (A.3.2): "union" (cpusets) or "max" (quota, memory protections).
    merge: str | None = None
    #: file text → canonical text, on both versions (resctrl ``schemata``: the kernel pads each line).
    read_canonical: Callable[[str], str] | None = None

    def file(self, version: int) -> tuple[str, str]:
        """``(subsystem, filename)`` on ``version`` (subsystem ignored on v2); InvalidValue when absent."""
        if version == 1:
            return self.subsystem, self.name
        if self.v2_file is None:
            raise InvalidValue(f"{self.name}: not available on cgroup v2")
        return "", self.v2_file

    def validate(self, value: object) -> str:
        """The canonical v1 text of ``value``; InvalidValue naming the file and the value."""
        return self.check(self.name, value)

    def to_file(self, version: int, value: object, current: str | None = None) -> str:
        """What to write into the file on ``version`` (validated); ``current``: the file's content now."""
        text = self.validate(value)
        if version == 2 and self.to_v2 is not None:
            return self.to_v2(text, current)
        return text

    def from_file(self, version: int, text: str) -> str:
        """The canonical v1 text of a file's content on ``version``."""
        text = text.strip()
        if self.read_canonical is not None:
            return self.read_canonical(text)
        if version == 2 and self.from_v2 is not None:
            return self.from_v2(text)
        if self.name == "cpuset.cpus":
            return format_cpuset(parse_cpuset(text, self.name))
        return text


def _quota_to_v2(text: str, current: str | None) -> str:
    # cpu.max holds "<quota|max> <period>": keep the period that is there.
    period = str(CFS_BASE_PERIOD)
    if current:
        parts = current.split()
        if len(parts) == 2 and parts[1].isdigit():
            period = parts[1]
    return f"{'max' if text == '-1' else text} {period}"


def _quota_from_v2(text: str) -> str:
    first = text.split()[0] if text.split() else ""
    return "-1" if first == "max" else first


def _period_to_v2(text: str, current: str | None) -> str:
    quota = "max"
    if current and current.split():
        quota = current.split()[0]
    return f"{quota} {text}"


def _period_from_v2(text: str) -> str:
    parts = text.split()
    return parts[1] if len(parts) == 2 else str(CFS_BASE_PERIOD)


def _max_to_v2(text: str, current: str | None) -> str:
    return "max" if text == "-1" else text


def _max_from_v2(text: str) -> str:
    return "-1" if text == "max" else text


#: memory.high "unlimited": MaxInt64 on v1 (Anolis parses it with "max" as the only keyword, so "-1" is
#: refused there), "max" on v2; -1 and anything at or above the v1 limit ceiling mean it.
MEMORY_HIGH_UNLIMITED = "9223372036854775807"


def _memory_high(name: str, value: object) -> str:
    if str(value).strip() == "max":
        return MEMORY_HIGH_UNLIMITED
    n = _int(name, value)
    if n < -1:
        raise InvalidValue(f"{name}: invalid value {value!r}: must be -1 (unlimited) or >= 0")
    return MEMORY_HIGH_UNLIMITED if n == -1 or n >= V1_MEMORY_UNLIMITED else str(n)


def _high_to_v2(text: str, current: str | None) -> str:
    return "max" if text == MEMORY_HIGH_UNLIMITED else text


def _high_canonical(text: str) -> str:
    # v1 shows unlimited page-rounded (9223372036854771712), v2 as "max": both are the one canonical value.
    try:
        return _memory_high("memory.high", text)
    except InvalidValue:
        return text


_DEVICE_RE = re.compile(r"^\d+:\d+$")


def _device_value(lo: int, hi: int | None) -> Callable[[str, object], str]:
    """blkio per-device files (reference A.7.8): ``"<major:minor> <value>"``, the value in [lo, hi]."""
    check = _range(lo, hi)

    def device_value(name: str, value: object) -> str:
        parts = str(value).split()
        if len(parts) != 2 or not _DEVICE_RE.match(parts[0]):
            raise InvalidValue(f"{name}: invalid value {value!r}: want '<major:minor> <value>'")
        return f"{parts[0]} {check(name, parts[1])}"
    return device_value


def _device_params(name: str, value: object) -> str:
    """blkio.cost.qos / blkio.cost.model: ``"<major:minor> key=value ..."``."""
    parts = str(value).split()
    if len(parts) < 2 or not _DEVICE_RE.match(parts[0]) or not all(re.match(r"^[a-z]+=\w+$", p) for p in parts[1:]):
        raise InvalidValue(f"{name}: invalid value {value!r}: want '<major:minor> key=value ...'")
    return " ".join(parts)


_CPUMAX_RE = re.compile(r"^(max|\d+) \d+$")


def _cpus_from_v2(text: str) -> str:
    return format_cpuset(parse_cpuset(text, "cpuset.cpus"))


_REGISTRY = [
    Resource("cpu.shares", "cpu", "cpu.weight", _range(SHARES_MIN, SHARES_MAX),
             to_v2=lambda t, _c: str(shares_to_weight(int(t))),
             from_v2=lambda t: str(weight_to_shares(int(t)))),
    Resource("cpu.cfs_quota_us", "cpu", "cpu.max", _cfs_quota, to_v2=_quota_to_v2, from_v2=_quota_from_v2,
             merge="max"),
    Resource("cpu.cfs_period_us", "cpu", "cpu.max", _range(1000, 1_000_000), to_v2=_period_to_v2,
             from_v2=_period_from_v2),
    Resource("cpu.cfs_burst_us", "cpu", "cpu.max.burst", _range(0, 100 * 10 * 100000)),
    Resource("cpu.bvt_warp_ns", "cpu", "cpu.bvt_warp_ns", _range(-1, 2)),
    Resource("cpu.idle", "cpu", "cpu.idle", _range(0, 1)),
    Resource("cpuset.cpus", "cpuset", "cpuset.cpus", _cpus, from_v2=_cpus_from_v2,
             v2_read_file="cpuset.cpus.effective", merge="union"),
    Resource("cpuset.mems", "cpuset", "cpuset.mems", _cpus, from_v2=_cpus_from_v2,
             v2_read_file="cpuset.mems.effective", merge="union"),
    Resource("memory.limit_in_bytes", "memory", "memory.max", _memory_limit, to_v2=_max_to_v2,
             from_v2=_max_from_v2),
    Resource("memory.min", "memory", "memory.min", _range(0, None), merge="max"),
    Resource("memory.low", "memory", "memory.low", _range(0, None), merge="max"),
    Resource("memory.high", "memory", "memory.high", _memory_high, to_v2=_high_to_v2, read_canonical=_high_canonical,
             merge="max"),
    Resource("memory.wmark_ratio", "memory", "memory.wmark_ratio", _range(0, 100)),
    Resource("memory.wmark_scale_factor", "memory", "memory.wmark_scale_factor", _range(1, 1000)),
    Resource("memory.wmark_min_adj", "memory", "memory.wmark_min_adj", _range(-25, 50)),
    Resource("memory.priority", "memory", "memory.priority", _range(0, 12)),
    Resource("memory.use_priority_oom", "memory", "memory.use_priority_oom", _range(0, 1)),
    Resource("memory.oom.group", "memory", "memory.oom.group", _range(0, 1)),
    Resource("blkio.throttle.read_iops_device", "blkio", None, _device_value(0, None)),
    Resource("blkio.throttle.read_bps_device", "blkio", None, _device_value(0, None)),
    Resource("blkio.throttle.write_iops_device", "blkio", None, _device_value(0, None)),
    Resource("blkio.throttle.write_bps_device", "blkio", None, _device_value(0, None)),
    Resource("blkio.cost.weight", "blkio", None, _device_value(1, 100)),
    Resource("blkio.cost.qos", "blkio", None, _device_params),
    Resource("blkio.cost.model", "blkio", None, _device_params),
    Resource("net_cls.classid", "net_cls", "net_cls.classid", _range(0, 0xFFFFFFFF)),
]

#: Every registered resource by logical name.
RESOURCES: dict[str, Resource] = {r.name: r for r in _REGISTRY}


def _schemata(name: str, value: object) -> str:
    # resctrl takes "<resource>:<id>=<value>;..." lines; an empty or malformed line would be refused by the
    # kernel with EINVAL and leave last_cmd_status as the only trace, so refuse it here, naming it.
    text = str(value).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines or not all(_SCHEMATA_RE.match(line) for line in lines):
        raise InvalidValue(f"{name}: invalid value {value!r}: want lines of <L3|MB>:<id>=<value>;...")
    return "\n".join(lines)


_SCHEMATA_RE = re.compile(r"^(L3|L3CODE|L3DATA|L2|MB):\d+=[0-9a-fA-F]+(;\d+=[0-9a-fA-F]+)*$")

#: Host files outside the cgroup tree written through the executor (``update_file`` / ``append_file``):
#: sysctls (reference A.7.9, with the ranges Koordinator accepts) and resctrl group files (A.7.7).
HOST_FILES: dict[str, Resource] = {r.name: r for r in [
    Resource("vm.min_free_kbytes", "", None, _range(10240, 10485760)),
    Resource("vm.watermark_scale_factor", "", None, _range(10, 400)),
    Resource("memcg_reaper.reap_background", "", None, _range(0, 1)),
    Resource("resctrl.schemata", "", None, _schemata,
             read_canonical=lambda t: "\n".join(line.strip() for line in t.splitlines() if line.strip())),
    Resource("resctrl.tasks", "", None, _range(1, None)),
]}

CPU_SHARES = "cpu.shares"
CPU_CFS_QUOTA = "cpu.cfs_quota_us"
CPU_CFS_PERIOD = "cpu.cfs_period_us"
CPUSET_CPUS = "cpuset.cpus"
MEMORY_LIMIT = "memory.limit_in_bytes"


def resource(name: str) -> Resource:
    """The registered resource ``name``; InvalidValue naming it when unknown."""
    try:
        return RESOURCES[name]
    except KeyError:
        raise InvalidValue(f"unknown cgroup resource {name!r} (known: {', '.join(sorted(RESOURCES))})") from None


def valid_cpu_max(text: str) -> bool:
    """Whether ``text`` is a well-formed v2 ``cpu.max`` (``max 100000`` or ``<quota> <period>``)."""
    return bool(_CPUMAX_RE.match(text.strip()))
