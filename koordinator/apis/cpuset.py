"""CPU lists as Linux, the kubelet and Koordinator's annotations write them: ``"0-3,8,10-11"``.

The one shared implementation: the koordlet, the scheduler's NodeNUMAResource plugin and the
node simulator all read and write cpusets through these two functions.
"""

from __future__ import annotations

from typing import Iterable


def parse_cpuset(text: str, what: str = "cpuset") -> list[int]:
    """``"0-3,8"`` → ``[0, 1, 2, 3, 8]``; ValueError naming ``what`` and the text when malformed."""
    if not isinstance(text, str):
        raise ValueError(f"{what}: {text!r} is not a CPU list string")
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            first = int(lo)
            last = int(hi) if sep else first
        except ValueError:
            raise ValueError(f"{what}: invalid CPU list {text!r}") from None
        if first < 0 or last < first:
            raise ValueError(f"{what}: invalid CPU range {part!r} in {text!r}")
        cpus.update(range(first, last + 1))
    return sorted(cpus)


def format_cpuset(cpus: Iterable[int]) -> str:
    """Sorted ranges: ``[0, 1, 2, 3, 8]`` → ``"0-3,8"``; ``""`` when empty."""
    ids = sorted(set(cpus))
    parts = []
    i = 0
    while i < len(ids):
        j = i
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[i]) if i == j else f"{ids[i]}-{ids[j]}")
        i = j + 1
    return ",".join(parts)
