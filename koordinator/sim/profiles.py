"""Usage profiles of simulated pods and nodes, from annotations with the prefix ``sim.koordinator.sh/``.

Pod annotations (each optional):

==================================  ==============================================================
``sim.koordinator.sh/cpu``          the pod's CPU demand (a profile, in cores: ``500m``, ``2``)
``sim.koordinator.sh/memory``       its memory (anonymous, not reclaimable: ``1Gi``)
``sim.koordinator.sh/page-cache``   its page cache (reclaimable; default 0)
``sim.koordinator.sh/duration``     a Go duration (``5m``, ``90s``): the pod succeeds after running that long
``sim.koordinator.sh/exit-code``    ``0`` to ``255``: how the containers exit when the duration ends; not 0 makes
                                    the pod Failed (terminated, reason ``Error``); default 0
==================================  ==============================================================

A profile is a quantity (steady) or one of these functions of the time ``t`` since the pod
started (levels are quantities, times Go durations, ``duty`` a fraction)::

    sine(min=200m, max=800m, period=60s[, phase=0s])   mid + amplitude × sin(2π (t + phase) / period)
    ramp(from=0, to=2, duration=5m[, delay=0s])        from, then linearly to ``to`` over ``duration``
                                                       after ``delay``; ``to`` afterwards
    square(low=100m, high=1, period=30s[, duty=0.5])   ``high`` for duty × period, then ``low``

Without ``cpu``/``memory`` annotations a pod uses 50 % of its containers' requests (0 without
requests). The pod's figure is shared among its containers in proportion to their requests of
that resource (their limits when none has a request; evenly when none has either) and each
container's share is capped by its limit: a container never uses more than its limit (the CPU it
wanted beyond it counts as throttling). A bad annotation never stops a pod: that resource falls
back to the default and the error names the annotation and the value.

Node annotation ``sim.koordinator.sh/system-usage``: ``cpu=500m,memory=2Gi[,page-cache=1Gi]``
(each value a profile as above, ``t`` counted from the simulator's start) — what runs outside
the pods (system daemons); default ``cpu=250m,memory=1Gi,page-cache=0``.
"""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Callable

from koordinator.apis import quantity
from koordinator.runtime.options import parse_duration

PREFIX = "sim.koordinator.sh/"
ANNOTATION_CPU = PREFIX + "cpu"
ANNOTATION_MEMORY = PREFIX + "memory"
ANNOTATION_PAGE_CACHE = PREFIX + "page-cache"
ANNOTATION_DURATION = PREFIX + "duration"
ANNOTATION_EXIT_CODE = PREFIX + "exit-code"
ANNOTATION_SYSTEM_USAGE = PREFIX + "system-usage"
#: Event reason for an annotation the simulator cannot use.
REASON_INVALID = "InvalidSimulationProfile"

DEFAULT_SYSTEM_CPU = 250.0  # milli-cores
DEFAULT_SYSTEM_MEMORY = float(1 << 30)
DEFAULT_SHARE = 0.5  # of the requests, without an annotation

CPU, MEMORY = "cpu", "memory"

_CALL = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*\((.*)\)\s*\Z", re.S)


class ProfileError(ValueError):
    """An annotation the simulator cannot use; the message names the annotation and its value."""

    def __init__(self, annotation: str, value: str, problem: str) -> None:
        self.annotation = annotation
        self.value = value
        self.problem = problem
        super().__init__(f"annotation {annotation}={value!r}: {problem}")


# -- values ----------------------------------------------------------------------------------------

def parse_amount(text: str, unit: str) -> float:
    """A quantity as milli-cores (``unit`` "cpu") or bytes ("memory"); ValueError if bad or negative."""
    try:
        amount: Decimal = quantity.parse_quantity(text.strip())
    except ValueError as err:
        raise ValueError(f"{text.strip()!r} is not a quantity ({err})") from None
    if amount < 0:
        raise ValueError(f"{text.strip()!r} is negative")
    return float(amount * 1000) if unit == CPU else float(amount)


def parse_go_duration(text: str) -> float:
    """A Go duration (``90s``, ``1m30s``, ``500ms``) or plain seconds, as seconds; ValueError if bad."""
    try:
        return parse_duration(text)
    except argparse.ArgumentTypeError:
        raise ValueError(f"{text.strip()!r} is not a duration (want e.g. 90s, 5m, 1h30m)") from None


# -- curves --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Steady:
    """A constant figure."""

    value: float

    def __call__(self, t: float) -> float:
        return self.value


@dataclass(frozen=True)
class Sine:
    """Between ``low`` and ``high`` with period ``period`` seconds; the middle at t = −phase."""

    low: float
    high: float
    period: float
    phase: float = 0.0

    def __call__(self, t: float) -> float:
        mid, amp = (self.low + self.high) / 2, (self.high - self.low) / 2
        return mid + amp * math.sin(2 * math.pi * (t + self.phase) / self.period)


@dataclass(frozen=True)
class Ramp:
    """``start`` until ``delay``, then linearly to ``end`` over ``duration`` seconds, then ``end``."""

    start: float
    end: float
    duration: float
    delay: float = 0.0

    def __call__(self, t: float) -> float:
        if t <= self.delay:
            return self.start
        if self.duration <= 0 or t >= self.delay + self.duration:
            return self.end
        return self.start + (self.end - self.start) * (t - self.delay) / self.duration


@dataclass(frozen=True)
class Square:
    """``high`` for the first ``duty`` of every period, ``low`` for the rest."""

    low: float
    high: float
    period: float
    duty: float = 0.5

    def __call__(self, t: float) -> float:
        return self.high if (t % self.period) < self.duty * self.period else self.low


Curve = Callable[[float], float]

# function name -> (required args, optional args with defaults, kind of each arg)
_LEVEL, _TIME, _FRACTION = "level", "time", "fraction"
_FUNCTIONS: dict[str, tuple[tuple[str, ...], dict[str, str], dict[str, str]]] = {
    "sine": (("min", "max", "period"), {"phase": "0s"},
             {"min": _LEVEL, "max": _LEVEL, "period": _TIME, "phase": _TIME}),
    "ramp": (("from", "to", "duration"), {"delay": "0s"},
             {"from": _LEVEL, "to": _LEVEL, "duration": _TIME, "delay": _TIME}),
    "square": (("low", "high", "period"), {"duty": "0.5"},
               {"low": _LEVEL, "high": _LEVEL, "period": _TIME, "duty": _FRACTION}),
}
GRAMMAR = ("a quantity, or sine(min=Q,max=Q,period=D[,phase=D]), ramp(from=Q,to=Q,duration=D[,delay=D]) "
           "or square(low=Q,high=Q,period=D[,duty=F])")


def split_top_level(text: str, sep: str = ",") -> list[str]:
    """Split on ``sep`` outside parentheses: ``cpu=sine(min=1,max=2,period=1m),memory=1Gi`` -> 2 parts."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("unbalanced ')'")
        elif ch == sep and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError("unbalanced '('")
    parts.append(text[start:])
    return parts


def parse_curve(text: str, unit: str) -> Curve:
    """A profile (see the module docstring) of ``unit`` "cpu" (milli-cores) or "memory" (bytes).

    ValueError names what is wrong (without the annotation: :func:`pod_profile` adds it).
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"empty; want {GRAMMAR}")
    call = _CALL.match(text)
    if call is None:
        if "(" in text or ")" in text:
            raise ValueError(f"cannot parse; want {GRAMMAR}")
        return Steady(parse_amount(text, unit))
    name, body = call.group(1), call.group(2)
    if name not in _FUNCTIONS:
        raise ValueError(f"unknown function {name!r}; want {GRAMMAR}")
    required, optional, kinds = _FUNCTIONS[name]
    args: dict[str, str] = {}
    for part in split_top_level(body) if body.strip() else []:
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or not key:
            raise ValueError(f"{name}(): argument {part.strip()!r} is not key=value")
        if key not in kinds:
            raise ValueError(f"{name}(): unknown argument {key!r} (arguments: {', '.join(kinds)})")
        if key in args:
            raise ValueError(f"{name}(): argument {key!r} given twice")
        args[key] = value.strip()
    missing = [k for k in required if k not in args]
    if missing:
        raise ValueError(f"{name}(): missing {', '.join(missing)}")
    values: dict[str, float] = {}
    for key, kind in kinds.items():
        raw = args.get(key, optional.get(key))
        assert raw is not None
        try:
            if kind == _LEVEL:
                values[key] = parse_amount(raw, unit)
            elif kind == _TIME:
                values[key] = parse_go_duration(raw)
            else:
                values[key] = float(raw)
        except ValueError as err:
            raise ValueError(f"{name}(): {key}: {err}") from None
    if name == "sine":
        if values["min"] > values["max"]:
            raise ValueError("sine(): min is greater than max")
        if values["period"] <= 0:
            raise ValueError("sine(): period must be positive")
        return Sine(values["min"], values["max"], values["period"], values["phase"])
    if name == "ramp":
        return Ramp(values["from"], values["to"], values["duration"], values["delay"])
    if values["period"] <= 0:
        raise ValueError("square(): period must be positive")
    if not 0 < values["duty"] < 1:
        raise ValueError("square(): duty must be between 0 and 1 (exclusive)")
    return Square(values["low"], values["high"], values["period"], values["duty"])


# -- pods ------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PodProfile:
    """A pod's parsed annotations: None means the default; ``errors`` the annotations ignored."""

    cpu: Curve | None = None
    memory: Curve | None = None
    page_cache: Curve | None = None
    duration: float | None = None
    errors: tuple[ProfileError, ...] = ()
    exit_code: int = 0


def pod_profile(pod: Mapping[str, Any]) -> PodProfile:
    """Parse a pod's ``sim.koordinator.sh/*`` annotations; never raises (see ``errors``)."""
    annotations = ((pod.get("metadata") or {}).get("annotations")) or {}
    errors: list[ProfileError] = []
    curves: dict[str, Curve | None] = {}
    for key, annotation, unit in (("cpu", ANNOTATION_CPU, CPU), ("memory", ANNOTATION_MEMORY, MEMORY),
                                  ("page_cache", ANNOTATION_PAGE_CACHE, MEMORY)):
        raw = annotations.get(annotation)
        curves[key] = None
        if raw is None:
            continue
        try:
            curves[key] = parse_curve(raw, unit)
        except ValueError as err:
            errors.append(ProfileError(annotation, str(raw), f"{err}; using the default"))
    duration = None
    raw = annotations.get(ANNOTATION_DURATION)
    if raw is not None:
        try:
            duration = parse_go_duration(str(raw))
            if duration <= 0:
                raise ValueError("must be positive")
        except ValueError as err:
            duration = None
            errors.append(ProfileError(ANNOTATION_DURATION, str(raw), f"{err}; the pod runs until deleted"))
    exit_code = 0
    raw = annotations.get(ANNOTATION_EXIT_CODE)
    if raw is not None:
        try:
            exit_code = parse_exit_code(str(raw))
        except ValueError as err:
            errors.append(ProfileError(ANNOTATION_EXIT_CODE, str(raw), f"{err}; the pod exits with 0"))
    return PodProfile(curves["cpu"], curves["memory"], curves["page_cache"], duration, tuple(errors), exit_code)


def parse_exit_code(text: str) -> int:
    """A process exit status, ``0`` to ``255``; ValueError if it is not one."""
    try:
        value = int(text.strip(), 10)
    except ValueError:
        raise ValueError(f"{text.strip()!r} is not an integer") from None
    if not 0 <= value <= 255:
        raise ValueError("must be from 0 to 255")
    return value


@dataclass(frozen=True)
class ContainerShape:
    """What the usage split needs of one container (milli-cores and bytes; None = no limit)."""

    name: str
    cpu_request: float
    cpu_limit: float | None
    memory_request: float
    memory_limit: float | None


def _amounts(container: Mapping[str, Any], which: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for name, unit in (("cpu", CPU), ("memory", MEMORY)):
        raw = ((container.get("resources") or {}).get(which) or {}).get(name)
        if raw is None:
            continue
        try:
            out[name] = parse_amount(str(raw), unit)
        except ValueError:
            pass  # the API server validates resources; an odd value is treated as absent
    return out


def container_shapes(pod: Mapping[str, Any]) -> list[ContainerShape]:
    shapes = []
    for c in (pod.get("spec") or {}).get("containers") or []:
        req, lim = _amounts(c, "requests"), _amounts(c, "limits")
        # As the API server defaults them: a limit without a request requests the limit.
        shapes.append(ContainerShape(str(c.get("name", "")), req.get("cpu", lim.get("cpu", 0.0)), lim.get("cpu"),
                                     req.get("memory", lim.get("memory", 0.0)), lim.get("memory")))
    return shapes


@dataclass
class ContainerUsage:
    """One container's figures at a moment: CPU demand and usage (milli-cores, usage ≤ limit),
    memory and page cache (bytes; memory + page cache ≤ limit)."""

    name: str
    cpu_demand: float = 0.0
    cpu: float = 0.0
    memory: float = 0.0
    page_cache: float = 0.0


@dataclass
class UsageModel:
    """A pod's profile applied to its containers (built once per pod; evaluated every tick)."""

    shapes: list[ContainerShape]
    profile: PodProfile = field(default_factory=PodProfile)

    @classmethod
    def for_pod(cls, pod: Mapping[str, Any], profile: PodProfile | None = None) -> "UsageModel":
        return cls(container_shapes(pod), profile if profile is not None else pod_profile(pod))

    def _weights(self, resource: str) -> list[float]:
        if resource == CPU:
            requests = [s.cpu_request for s in self.shapes]
            limits = [s.cpu_limit or 0.0 for s in self.shapes]
        else:
            requests = [s.memory_request for s in self.shapes]
            limits = [s.memory_limit or 0.0 for s in self.shapes]
        for weights in (requests, limits):
            if sum(weights) > 0:
                return [w / sum(weights) for w in weights]
        return [1.0 / len(self.shapes)] * len(self.shapes) if self.shapes else []

    def _demands(self, curve: Curve | None, resource: str, t: float) -> list[float]:
        if curve is None:
            if resource == CPU:
                return [DEFAULT_SHARE * s.cpu_request for s in self.shapes]
            return [DEFAULT_SHARE * s.memory_request for s in self.shapes]
        total = max(0.0, curve(t))
        return [total * w for w in self._weights(resource)]

    def cpu(self, t: float) -> list[tuple[float, float]]:
        """(demand, usage) in milli-cores per container at ``t`` seconds after the start."""
        out = []
        for shape, demand in zip(self.shapes, self._demands(self.profile.cpu, CPU, t)):
            usage = demand if shape.cpu_limit is None else min(demand, shape.cpu_limit)
            out.append((demand, usage))
        return out

    def memory_demand(self, t: float) -> list[tuple[float, float]]:
        """(memory, page cache) in bytes per container at ``t`` as the profile wants them, limits
        ignored (the simulator compares them with the limits in force, and OOM-kills)."""
        memory = self._demands(self.profile.memory, MEMORY, t)
        cache = ([0.0] * len(self.shapes) if self.profile.page_cache is None
                 else [max(0.0, self.profile.page_cache(t)) * w for w in self._weights(MEMORY)])
        return list(zip(memory, cache))

    def memory(self, t: float) -> list[tuple[float, float]]:
        """(memory, page cache) in bytes per container at ``t``, together within the spec's limit."""
        out = []
        for shape, (m, c) in zip(self.shapes, self.memory_demand(t)):
            if shape.memory_limit is not None:
                m = min(m, shape.memory_limit)
                c = min(c, shape.memory_limit - m)
            out.append((m, c))
        return out

    def at(self, t: float) -> list[ContainerUsage]:
        """Every figure of every container at ``t`` (for tests and tools)."""
        return [ContainerUsage(s.name, d, u, m, c)
                for s, (d, u), (m, c) in zip(self.shapes, self.cpu(t), self.memory(t))]


# -- nodes -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SystemProfile:
    """What a node runs outside its pods: CPU (milli-cores), memory and page cache (bytes)."""

    cpu: Curve = Steady(DEFAULT_SYSTEM_CPU)
    memory: Curve = Steady(DEFAULT_SYSTEM_MEMORY)
    page_cache: Curve = Steady(0.0)


def system_profile(node: Mapping[str, Any] | None) -> tuple[SystemProfile, ProfileError | None]:
    """The node's ``system-usage`` annotation; a bad one gives the defaults and the error."""
    annotations = (((node or {}).get("metadata") or {}).get("annotations")) or {}
    raw = annotations.get(ANNOTATION_SYSTEM_USAGE)
    if raw is None:
        return SystemProfile(), None
    units = {"cpu": CPU, "memory": MEMORY, "page-cache": MEMORY}
    curves: dict[str, Curve] = {}
    try:
        for part in split_top_level(str(raw)):
            if not part.strip():
                continue
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq or key not in units:
                raise ValueError(f"{part.strip()!r}: want cpu=…, memory=… or page-cache=…")
            if key in curves:
                raise ValueError(f"{key} given twice")
            try:
                curves[key] = parse_curve(value, units[key])
            except ValueError as err:
                raise ValueError(f"{key}: {err}") from None
    except ValueError as err:
        return SystemProfile(), ProfileError(ANNOTATION_SYSTEM_USAGE, str(raw), f"{err}; using the defaults")
    default = SystemProfile()
    return SystemProfile(curves.get("cpu", default.cpu), curves.get("memory", default.memory),
                         curves.get("page-cache", default.page_cache)), None
