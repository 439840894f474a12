"""Shared pieces of the noderesource calculation: the result type, strategy access, Go-exact arithmetic.

Amounts are Python ints in **milli-units** (as :mod:`koordinator.apis.extension` returns them)
until a plugin emits its result; results are in the node's units (batch-cpu/mid-cpu milli-cores
as a plain integer, memory in bytes).

Float reproduction: where Koordinator scales a quantity by a percentage it computes
``int64(float64(x) * (float64(p) / 100.0))`` — the ratio is a float64 first, the product is
rounded to a float64, then truncated toward zero. :func:`go_scale` does exactly that with Python
floats (IEEE doubles, same rounding) and ``int()`` (truncation toward zero), so results match
bit for bit, e.g. 58 % of 100 bytes is ``int(100 * 0.58)`` = 57, not 58.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Mapping

from koordinator.apis import extension as ext
from koordinator.apis import quantity
from koordinator_roles.manager.sloconfig import DEFAULT_COLOCATION_STRATEGY

CPU = ext.CPU
MEMORY = ext.MEMORY

ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
ANNOTATION_AMPLIFICATION_RATIO = "node.koordinator.sh/resource-amplification-ratio"
ANNOTATION_ORIGIN_EXTENDED_ALLOCATABLE = "node.koordinator.sh/originExtendedAllocatable"
ANNOTATION_THIRD_PARTY_ALLOCATIONS = "node.koordinator.sh/thirdPartyAllocations"
ANNOTATION_CPU_BASIC_INFO = "node.koordinator.sh/cpu-basic-info"
LABEL_CPU_NORMALIZATION_ENABLED = "node.koordinator.sh/cpu-normalization-enabled"

# Koordinator's default ColocationStrategy fills any field the merged strategy lacks.
DEFAULT_STRATEGY = DEFAULT_COLOCATION_STRATEGY


class PluginError(Exception):
    """A plugin could not calculate; its outputs are skipped (Koordinator logs and goes on)."""


@dataclass
class NodeResource:
    """The folded result of the calculate plugins, applied to a node copy by ``prepare``.

    ``resources``: resource -> value in the node's units; a key whose value is None has no
    quantity and is removed from the node at prepare time. Resources absent from the dict are
    left untouched. ``resets``: resources explicitly reset (removed). ``annotations``/``labels``:
    a None value deletes the key, absent keys are untouched. ``messages``: resource (or plugin)
    -> human-readable reason. ``errors``: plugin -> error text for plugins that were skipped.
    """

    resources: dict[str, int | None] = field(default_factory=dict)
    resets: set[str] = field(default_factory=set)
    zone_resources: dict[str, dict[str, int]] = field(default_factory=dict)
    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    def set_quantity(self, name: str, value: int | None, message: str = "") -> None:
        self.resources[name] = value
        self.resets.discard(name)
        if message:
            self.messages[name] = message

    def reset(self, name: str, message: str) -> None:
        self.resources[name] = None
        self.resets.add(name)
        self.messages[name] = message


# -- strategy access -------------------------------------------------------------------------------

class Strategy:
    """Read access to a merged ColocationStrategy dict, falling back to Koordinator's defaults."""

    def __init__(self, raw: Mapping[str, Any] | None):
        if raw is not None and not isinstance(raw, Mapping):
            raise ValueError(f"colocation strategy: expected an object, got {raw!r}")
        self.raw = raw or {}

    def get(self, name: str) -> Any:
        value = self.raw.get(name)
        return DEFAULT_STRATEGY.get(name) if value is None else value

    def int(self, name: str) -> int:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or int(value) != value:
            raise ValueError(f"colocation strategy field {name}: expected an integer, got {value!r}")
        return int(value)

    def optional_int(self, name: str) -> int | None:
        return None if self.raw.get(name) is None else self.int(name)

    def float(self, name: str) -> float:
        value = self.get(name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"colocation strategy field {name}: expected a number, got {value!r}")
        return float(value)

    def str(self, name: str) -> str:
        value = self.get(name)
        if value is not None and not isinstance(value, str):
            raise ValueError(f"colocation strategy field {name}: expected a string, got {value!r}")
        return value or ""


# -- arithmetic --------------------------------------------------------------------------------------

def go_scale(amount: int, ratio: float) -> int:
    """``int64(float64(amount) * ratio)``: float product, truncated toward zero (see module doc)."""
    return int(float(amount) * ratio)


def percent_ratio(percent: int) -> float:
    """``float64(percent) / 100.0``."""
    return percent / 100


def scale_cpu(milli: int, percent: int) -> int:
    """CPU milli-units scaled by a percentage at milli precision (Koordinator's MultiplyMilliQuant)."""
    return go_scale(milli, percent_ratio(percent))


def scale_memory(milli: int, percent: int) -> int:
    """Memory scaled by a percentage at byte precision (MultiplyQuant), back in milli-units."""
    return go_scale(ext.value_of_milli(milli), percent_ratio(percent)) * 1000


def cpu_mem(raw: Mapping[str, Any] | None, field_path: str = "resources") -> dict[str, int]:
    """The cpu and memory of a ResourceList of quantities, in milli-units (absent = 0)."""
    if raw is not None and not isinstance(raw, Mapping):
        raise ValueError(f"{field_path}: expected a resource list, got {raw!r}")
    out = {CPU: 0, MEMORY: 0}
    for name in (CPU, MEMORY):
        q = (raw or {}).get(name)
        if q is None:
            continue
        try:
            out[name] = quantity.milli_value(q)
        except (quantity.QuantityError, ValueError, TypeError) as err:
            raise ValueError(f"{field_path}.{name}: invalid quantity {q!r}: {err}") from err
    return out


def rl_add(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {CPU: a[CPU] + b[CPU], MEMORY: a[MEMORY] + b[MEMORY]}


def rl_sub(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {CPU: a[CPU] - b[CPU], MEMORY: a[MEMORY] - b[MEMORY]}


def rl_max(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {CPU: max(a[CPU], b[CPU]), MEMORY: max(a[MEMORY], b[MEMORY])}


def rl_zero() -> dict[str, int]:
    return {CPU: 0, MEMORY: 0}


def rl_clamp(a: Mapping[str, int]) -> dict[str, int]:
    return rl_max(a, rl_zero())


# -- node readings -------------------------------------------------------------------------------------

def node_status(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return node.get("status") or {}


def node_annotations(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("annotations") or {}


def node_labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    return (node.get("metadata") or {}).get("labels") or {}


def node_capacity(node: Mapping[str, Any]) -> dict[str, int]:
    """cpu/memory of ``status.capacity`` (the base of every formula, not allocatable)."""
    return cpu_mem(node_status(node).get("capacity"), "status.capacity")


def kubelet_reserved(node: Mapping[str, Any]) -> dict[str, int]:
    """``max(capacity - allocatable, 0)`` for cpu and memory."""
    status = node_status(node)
    capacity = status.get("capacity") or {}
    allocatable = cpu_mem(status.get("allocatable"), "status.allocatable")
    out = rl_zero()
    for name in (CPU, MEMORY):
        if name in capacity:
            out[name] = max(cpu_mem(capacity, "status.capacity")[name] - allocatable[name], 0)
    return out


def cpuset_size(text: str) -> int:
    """Number of CPUs in a Linux cpuset list ("0-3,8"); ValueError when malformed."""
    cpus: set[int] = set()
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            low_text, high_text = part.split("-", 1)
            low, high = int(low_text), int(high_text)
            if low < 0 or high < low:
                raise ValueError(f"invalid cpuset range {part!r}")
            cpus.update(range(low, high + 1))
        else:
            cpu = int(part)
            if cpu < 0:
                raise ValueError(f"invalid cpu {part!r}")
            cpus.add(cpu)
    return len(cpus)


def annotation_reserved(node: Mapping[str, Any]) -> dict[str, int]:
    """cpu/memory reserved by the node annotation ``node.koordinator.sh/reservation``.

    ``reservedCPUs`` (a cpuset) replaces ``resources.cpu`` by its CPU count. A malformed
    annotation is ignored as a whole (Koordinator logs it and reserves nothing).
    """
    raw = node_annotations(node).get(ANNOTATION_NODE_RESERVATION)
    if raw is None:
        return rl_zero()
    try:
        reservation = json.loads(raw)
        if not isinstance(reservation, dict):
            return rl_zero()
        out = cpu_mem(reservation.get("resources"))
        cpus = reservation.get("reservedCPUs") or ""
        if cpus:
            out[CPU] = cpuset_size(cpus) * 1000
        return out
    except (ValueError, TypeError):
        return rl_zero()


def node_reserved(node: Mapping[str, Any]) -> dict[str, int]:
    """``max(kubelet reservation, annotation reservation)`` per resource."""
    return rl_max(kubelet_reserved(node), annotation_reserved(node))


# -- NodeMetric readings -------------------------------------------------------------------------------

def parse_time(raw: Any) -> float | None:
    """An RFC3339 timestamp as unix seconds, None when absent or unparseable."""
    if not isinstance(raw, str) or not raw:
        return None
    try:
        return datetime.fromisoformat(raw.replace("z", "Z")).timestamp()
    except ValueError:
        return None


def metric_status(node_metric: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return (node_metric or {}).get("status") or {}


def is_metric_degraded(node_metric: Mapping[str, Any] | None, strategy: Strategy, now: float) -> bool:
    """NodeMetric missing, without ``status.updateTime``, or older than ``degradeTimeMinutes``."""
    updated = parse_time(metric_status(node_metric).get("updateTime"))
    if updated is None:
        return True
    return now > updated + strategy.int("degradeTimeMinutes") * 60


def usage_of(entry: Mapping[str, Any] | None, key: str, path: str) -> dict[str, int]:
    """cpu/memory of ``entry[key].resources`` (a NodeMetric ResourceMap)."""
    resource_map = (entry or {}).get(key) or {}
    return cpu_mem(resource_map.get("resources"), f"{path}.{key}.resources")


def system_usage(node_metric: Mapping[str, Any] | None) -> dict[str, int]:
    return usage_of(metric_status(node_metric).get("nodeMetric"), "systemUsage", "status.nodeMetric")


def host_app_usage_above(node_metric: Mapping[str, Any] | None, priority_class: str) -> dict[str, int]:
    """Σ usage of host applications whose default priority value is above ``priority_class``'s."""
    floor = ext.PRIORITY_DEFAULT_VALUES[priority_class]
    total = rl_zero()
    for i, app in enumerate(metric_status(node_metric).get("hostApplicationMetric") or []):
        value = ext.PRIORITY_DEFAULT_VALUES[ext.priority_class_by_name(app.get("priority"))]
        if value > floor:
            total = rl_add(total, usage_of(app, "usage", f"status.hostApplicationMetric[{i}]"))
    return total


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_request(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's cpu/memory request (Kubernetes semantics: init containers, sidecars, overhead)."""
    req = ext.pod_requests(pod)
    return {CPU: req.get(CPU, 0), MEMORY: req.get(MEMORY, 0)}


# -- output formatting ----------------------------------------------------------------------------------

def format_value(name: str, value: int) -> str:
    """A whole-unit value as the quantity text Koordinator writes (memory BinarySI, others DecimalSI)."""
    fmt = quantity.BINARY_SI if name.endswith("memory") or name.endswith("-memory") else quantity.DECIMAL_SI
    return quantity.format_quantity(value, fmt)


def is_resource_diff(old: Mapping[str, Any], new: Mapping[str, Any], name: str, threshold: float) -> bool:
    """Koordinator's IsResourceDiff on two ResourceLists of quantities.

    Present on one side only is a diff; absent on both is not; otherwise
    ``|new - old| > old * threshold`` on milli values (float64 product), so any change from 0
    is a diff and a change of exactly ``threshold`` is not.
    """
    if (name in old) != (name in new):
        return True
    if name not in old:
        return False
    old_milli = quantity.milli_value(old[name])
    new_milli = quantity.milli_value(new[name])
    return float(abs(new_milli - old_milli)) > float(old_milli) * threshold


def go_float(value: float) -> str:
    """A float64 as Go's encoding/json writes it (shortest form, no ".0" on whole numbers)."""
    if value == int(value) and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" in text:
        # Go writes exponents with at least two digits: 1e-07, 1e+21.
        mantissa, exp = text.split("e")
        sign = exp[0] if exp[0] in "+-" else "+"
        digits = exp.lstrip("+-")
        text = f"{mantissa}e{sign}{digits.zfill(2)}"
    return text
