"""NodeResourcesFitPlus (Koordinator's ``noderesourcefitplus``): a scoring strategy per resource.

Score-only. ``resources`` maps a resource name to ``{type: LeastAllocated|MostAllocated, weight}``
(e.g. pack GPUs, spread cpu). For every resource the pod requests (cpu, memory,
ephemeral-storage, scalar resources: amounts above 0) that ``resources`` lists::

    req   = node's requested + pod's request       (cpu/memory: kube's "non-zero" amounts, 100m / 200Mi
                                                     for a container without a request; others plain)
    Most  = min(req, cap) * 100 // cap              (0 when cap == 0)
    Least = (cap - req) * 100 // cap                (0 when req > cap or cap == 0)
    score = Σ s·w // Σ w

The pod's side follows Koordinator's own request helper: containers summed, then init containers
in order (a sidecar adds, a regular one raises the sum to its own amount), plus ``spec.overhead``.
A pod requesting none of the listed resources would score 100 everywhere: PreScore returns Skip
instead (the same constant for every node never changes the choice). Amounts are the scheduler's
milli-units, which leaves every ratio unchanged (reference §2.7, §8 item 14).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from koordinator.apis import extension
from koordinator_roles.scheduler.framework.interfaces import MAX_NODE_SCORE, PreScorePlugin, ScorePlugin
from koordinator_roles.scheduler.framework.status import CycleState, Status
from koordinator_roles.scheduler.framework.types import (CPU, DEFAULT_MEMORY_REQUEST_MILLI, DEFAULT_MILLI_CPU_REQUEST,
                                                         MEMORY, NodeInfo, PodInfo)
from koordinator_roles.scheduler.plugins.helper.resourcenames import counted_resource_names

NAME = "NodeResourcesFitPlus"
LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED)
_PRE_SCORE_KEY = "PreScore" + NAME
_POD_CACHE_KEY = "noderesourcesfitplus.podRequest"
_INT64_MAX = np.iinfo(np.int64).max


@dataclass(frozen=True)
class ResourceStrategy:
    """One entry of ``resources``: the strategy and its weight."""

    type: str
    weight: int


@dataclass(frozen=True)
class NodeResourcesFitPlusArgs:
    """NodeResourcesFitPlusArgs: ``resources`` (no defaults; an empty map scores nothing)."""

    resources: Mapping[str, ResourceStrategy]


def parse_args(args: Mapping[str, Any] | None) -> NodeResourcesFitPlusArgs:
    """Validate ``resources``; a ValueError names the field (``resources[nvidia.com/gpu].type``)."""
    raw = (args or {}).get("resources")
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        raise ValueError(f"resources: Invalid value: {raw!r}: must be a map of resource name to "
                         f"{{type, weight}}")
    out: dict[str, ResourceStrategy] = {}
    for name, spec in raw.items():
        path = f"resources[{name}]"
        if not name:
            raise ValueError(f"{path}: Invalid value: {name!r}: resource name must not be empty")
        if not isinstance(spec, Mapping):
            raise ValueError(f"{path}: Invalid value: {spec!r}: must be an object with type and weight")
        kind = spec.get("type")
        if kind not in _TYPES:
            raise ValueError(f"{path}.type: Unsupported value: {kind!r}: supported values: "
                             + ", ".join(f'"{t}"' for t in _TYPES))
        weight = spec.get("weight", 0)
        if weight is None:
            weight = 0
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 0:
            raise ValueError(f"{path}.weight: Invalid value: {weight!r}: must be an integer >= 0")
        out[str(name)] = ResourceStrategy(kind, weight)
    return NodeResourcesFitPlusArgs(out)


# -- the pod's side --------------------------------------------------------------------------------------

def _container_request(container: Mapping[str, Any]) -> dict[str, int]:
    """One container's requests, cpu/memory defaulted when the key is missing (an explicit 0 stays 0)."""
    requests = extension.resource_list((container.get("resources") or {}).get("requests"))
    requests.setdefault(CPU, DEFAULT_MILLI_CPU_REQUEST)
    requests.setdefault(MEMORY, DEFAULT_MEMORY_REQUEST_MILLI)
    return requests


def pod_score_request(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's request as this plugin scores it (Koordinator's helper, not exactly KEP-753):
    Σ containers, then init containers in order — a sidecar (restartPolicy Always) adds, a regular
    one raises each amount to its own — plus ``spec.overhead``."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        for name, v in _container_request(container).items():
            total[name] = total.get(name, 0) + v
    for container in spec.get("initContainers") or ():
        sidecar = container.get("restartPolicy") == "Always"
        for name, v in _container_request(container).items():
            current = total.get(name, 0)
            total[name] = current + v if sidecar else max(current, v)
    for name, v in extension.resource_list(spec.get("overhead")).items():
        total[name] = total.get(name, 0) + v
    return total


# -- scoring ------------------------------------------------------------------------------------------------

def _mul_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a × 100 // b without int64 overflow (exact Python integers for huge amounts); b > 0."""
    if not len(a) or int(a.max()) <= _INT64_MAX // MAX_NODE_SCORE:
        return a * MAX_NODE_SCORE // b
    return (a.astype(object) * MAX_NODE_SCORE // b.astype(object)).astype(np.int64)


def resource_scores(kind: str, cap: np.ndarray, req: np.ndarray) -> np.ndarray:
    """One resource's score per row (both strategies: 0 where cap is 0)."""
    valid = cap > 0
    safe = np.where(valid, cap, 1)
    if kind == MOST_ALLOCATED:
        scores = _mul_div(np.maximum(np.minimum(req, cap), 0), safe)
    else:
        valid &= req <= cap
        scores = _mul_div(np.maximum(cap - req, 0), safe)
    return np.where(valid, scores, 0)


class _Plan:
    """PreScore's result: [(resource, type, weight, pod request)] of the listed resources the pod asks for."""

    __slots__ = ("terms",)

    def __init__(self, terms: list[tuple[str, str, int, int]]) -> None:
        self.terms = terms

    def clone(self) -> "_Plan":
        return self


class NodeResourcesFitPlus(PreScorePlugin, ScorePlugin):
    """Score nodes per resource with that resource's own strategy and weight."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        self.args = parse_args(args)
        self.handle = handle

    def update_args(self, args: Mapping[str, Any] | None) -> None:
        """Hot reload: the new strategies apply from the next cycle."""
        self.args = parse_args(args)

    def _plan(self, pod: PodInfo) -> _Plan:
        resources = self.args.resources
        terms = []
        pod_request: dict[str, int] | None = None
        for name in counted_resource_names(pod.requests):
            strategy = resources.get(name)
            if strategy is None:
                continue
            if pod_request is None:
                pod_request = pod.cached(_POD_CACHE_KEY, pod_score_request)
            terms.append((name, strategy.type, strategy.weight, pod_request.get(name, 0)))
        return _Plan(terms)

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        if not self.args.resources:
            return Status.skip()
        plan = self._plan(pod)
        if not plan.terms:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, plan)
        return None

    def _terms(self, state: CycleState, pod: PodInfo) -> list[tuple[str, str, int, int]]:
        plan = state.read(_PRE_SCORE_KEY)
        return (plan if plan is not None else self._plan(pod)).terms

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        terms = self._terms(state, pod)
        n = len(rows)
        num = np.zeros(n, dtype=np.int64)
        den = 0
        for name, kind, weight, request in terms:
            den += weight
            col = snapshot.column(name)
            if col is None:
                continue  # no node has it: capacity 0, score 0
            cap = snapshot.take(snapshot.allocatable[:, col], rows)
            if name in (CPU, MEMORY):
                used = snapshot.take(snapshot.non_zero_requested[:, 0 if name == CPU else 1], rows)
            else:
                used = snapshot.take(snapshot.requested[:, col], rows)
            num += resource_scores(kind, cap, used + request) * weight
        if den <= 0:
            return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
        return num // den

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """The per-node form of :meth:`score_nodes`."""
        num = den = 0
        for name, kind, weight, request in self._terms(state, pod):
            den += weight
            cap = node.allocatable.get(name, 0)
            if name == CPU:
                used = node.non_zero_cpu
            elif name == MEMORY:
                used = node.non_zero_memory
            else:
                used = node.requested.get(name, 0)
            s = resource_scores(kind, np.array([cap], dtype=np.int64), np.array([used + request], dtype=np.int64))
            num += int(s[0]) * weight
        return num // den if den > 0 else MAX_NODE_SCORE


def new(args: dict | None, handle: Any) -> NodeResourcesFitPlus:
    """Registry factory; ``args`` is NodeResourcesFitPlusArgs."""
    return NodeResourcesFitPlus(args, handle)
