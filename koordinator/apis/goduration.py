"""Go ``time.Duration`` strings: ``time.ParseDuration`` and ``Duration.String`` (``"5m"`` <-> ``"5m0s"``).

Koordinator's configuration and its CRDs (NodeMetric aggregation windows) carry durations in this
form; every role reads or writes them.
"""

from __future__ import annotations

import re
from fractions import Fraction

_GO_DURATION_UNITS = {"ns": 1, "us": 10**3, "µs": 10**3, "μs": 10**3, "ms": 10**6, "s": 10**9, "m": 60 * 10**9,
                      "h": 3600 * 10**9}
_GO_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_go_duration(text: str) -> int:
    """Nanoseconds of a Go duration string (``time.ParseDuration``); ValueError naming the text."""
    s = text
    sign = 1
    if s[:1] in ("+", "-"):
        sign, s = (-1 if s[0] == "-" else 1), s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = Fraction(0), 0
    while pos < len(s):
        m = _GO_DURATION_PART.match(s, pos)
        if m is None:
            raise ValueError(f"invalid duration {text!r}")
        total += Fraction(m.group(1)) * _GO_DURATION_UNITS[m.group(2)]
        pos = m.end()
    return sign * int(total)


def format_go_duration(ns: int) -> str:
    """``time.Duration.String``: 300s -> ``"5m0s"``, 1.5s -> ``"1.5s"``, 0 -> ``"0s"``."""
    if ns == 0:
        return "0s"
    sign, u = ("-", -ns) if ns < 0 else ("", ns)
    if u < 10**9:
        if u < 10**3:
            return f"{sign}{u}ns"
        unit, scale = ("µs", 10**3) if u < 10**6 else ("ms", 10**6)
        return f"{sign}{_fixed(u, scale)}{unit}"
    secs, frac = divmod(u, 10**9)
    hours, rest = divmod(secs, 3600)
    minutes, secs = divmod(rest, 60)
    seconds = f"{_fixed(secs * 10**9 + frac, 10**9)}s"
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}"
    if minutes:
        return f"{sign}{minutes}m{seconds}"
    return f"{sign}{seconds}"


def _fixed(value: int, scale: int) -> str:
    whole, rest = divmod(value, scale)
    if not rest:
        return str(whole)
    digits = str(rest).rjust(len(str(scale)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
