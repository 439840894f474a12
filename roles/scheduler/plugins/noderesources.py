"""NodeResourcesFit and NodeResourcesBalancedAllocation (kube-scheduler's ``noderesources`` plugins).

Fit filters nodes without room for the pod's requests ("Too many pods", "Insufficient <resource>")
and scores them with a strategy (LeastAllocated, MostAllocated, RequestedToCapacityRatio);
BalancedAllocation prefers nodes whose requested fractions of the configured resources are
close to each other. Both work on the snapshot's (nodes × resources) matrices, several rows at
a time; amounts are milli-units for every resource, which leaves every ratio unchanged.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from koordinator_roles.scheduler.framework.rowmemo import ClassMemo
from koordinator_roles.scheduler.framework.interfaces import (MAX_NODE_SCORE, BatchFilterResult, ClusterEvent,
                                                              EnqueueExtensions, Failure, FilterPlugin, PreFilterPlugin,
                                                              PreFilterResult, PreScorePlugin, ScorePlugin)
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE, CycleState, Status
from koordinator_roles.scheduler.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.helper.resourcenames import is_extended_resource_name, is_scalar_resource_name

NAME = "NodeResourcesFit"
BALANCED_ALLOCATION_NAME = "NodeResourcesBalancedAllocation"

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
_STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
DEFAULT_RESOURCES = ({"name": CPU, "weight": 1}, {"name": MEMORY, "weight": 1})
# RequestedToCapacityRatio shapes score 0..10; the scheduler's range is 0..100.
MAX_CUSTOM_PRIORITY_SCORE = 10
_MAX_UTILIZATION = 100
_TOO_MANY_PODS = "Too many pods"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
_BALANCED_PRE_SCORE_KEY = "PreScore" + BALANCED_ALLOCATION_NAME
_INT64_MAX = np.iinfo(np.int64).max


# -- args -------------------------------------------------------------------------------------------------

def _resource_specs(raw: Any, path: str) -> list[tuple[str, int]]:
    if raw is None or raw == []:
        raw = list(DEFAULT_RESOURCES)
    if not isinstance(raw, list):
        raise ValueError(f"{path}: must be a list")
    specs = []
    for i, item in enumerate(raw):
        if not isinstance(item, Mapping) or not item.get("name"):
            raise ValueError(f"{path}[{i}].name: Required value")
        name = str(item["name"])
        weight = item.get("weight")
        weight = 1 if weight in (None, 0) else weight
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ValueError(f"{path}[{i}].weight: Invalid value: {weight!r}: resource weight of {name} "
                             f"not in valid range [1, 100]")
        specs.append((name, weight))
    return specs


def _shape(raw: Any, path: str) -> list[tuple[int, int]]:
    if not raw:
        raise ValueError(f"{path}: Required value: at least one point must be specified")
    points = []
    for i, p in enumerate(raw):
        u, s = int(p.get("utilization", 0)), int(p.get("score", 0))
        if not 0 <= u <= _MAX_UTILIZATION:
            raise ValueError(f"{path}[{i}].utilization: Invalid value: {u}: not in valid range [0, 100]")
        if not 0 <= s <= MAX_CUSTOM_PRIORITY_SCORE:
            raise ValueError(f"{path}[{i}].score: Invalid value: {s}: not in valid range [0, 10]")
        if points and points[-1][0] >= u:
            raise ValueError(f"{path}[{i}].utilization: Invalid value: {u}: "
                             f"utilization values must be sorted in increasing order")
        points.append((u, s * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)))
    return points


def parse_fit_args(args: Mapping[str, Any] | None) -> dict[str, Any]:
    """NodeResourcesFitArgs (defaults already applied by the loader) checked as kube validates them."""
    args = args or {}
    ignored = list(args.get("ignoredResources") or ())
    groups = list(args.get("ignoredResourceGroups") or ())
    for i, g in enumerate(groups):
        if "/" in g:
            raise ValueError(f"ignoredResourceGroups[{i}]: Invalid value: {g!r}: resource group name can't contain '/'")
    strategy = args.get("scoringStrategy")
    if strategy is None:
        strategy = {"type": LEAST_ALLOCATED}
    kind = strategy.get("type") or ""
    if kind not in _STRATEGIES:
        raise ValueError(f'scoringStrategy.type: Unsupported value: "{kind}": supported values: '
                         + ", ".join(f'"{s}"' for s in _STRATEGIES))
    resources = _resource_specs(strategy.get("resources"), "scoringStrategy.resources")
    shape = None
    if kind == REQUESTED_TO_CAPACITY_RATIO:
        shape = _shape((strategy.get("requestedToCapacityRatio") or {}).get("shape"),
                       "scoringStrategy.requestedToCapacityRatio.shape")
    return {"ignored": frozenset(ignored), "groups": frozenset(groups), "type": kind, "resources": resources,
            "shape": shape}


# -- arithmetic helpers -----------------------------------------------------------------------------------

def _mul_div(a: np.ndarray, k: int, b: np.ndarray) -> np.ndarray:
    """a × k // b without int64 overflow (huge allocatables fall back to exact Python integers)."""
    if not len(a) or int(np.abs(a).max()) <= _INT64_MAX // k:
        return a * k // b
    return (a.astype(object) * k // b.astype(object)).astype(np.int64)


def broken_linear(shape: Sequence[tuple[int, int]], p: np.ndarray) -> np.ndarray:
    """kube's ``BuildBrokenLinearFunction`` over an array (integer maths, Go's truncating division)."""
    us = np.array([u for u, _ in shape], dtype=np.int64)
    ss = np.array([s for _, s in shape], dtype=np.int64)
    i = np.searchsorted(us, p, side="left")  # first point with p <= utilization
    out = np.where(i == 0, ss[0], ss[-1]).astype(np.int64)
    mid = (i > 0) & (i < len(us))
    if mid.any():
        j = i[mid]
        num = (ss[j] - ss[j - 1]) * (p[mid] - us[j - 1])
        den = us[j] - us[j - 1]
        out[mid] = ss[j - 1] + np.sign(num) * (np.abs(num) // den)
    return out


def _allocatable_requested(snapshot: Any, rows: np.ndarray, name: str, pod_request: int,
                           non_zero: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Allocatable and (node's requested + pod's request) of one resource, or None to skip the resource.

    ``non_zero``: cpu and memory use the node's NonZeroRequested (kube's defaults for request-less
    pods), as NodeResourcesFit scores; BalancedAllocation uses the plain requests.
    """
    if name in (CPU, MEMORY):
        col = snapshot.column(name)
        alloc = snapshot.allocatable[rows, col]
        if non_zero:
            used = snapshot.non_zero_requested[rows, 0 if name == CPU else 1]
        else:
            used = snapshot.requested[rows, col]
    elif name == EPHEMERAL_STORAGE:
        col = snapshot.column(name)
        alloc, used = snapshot.allocatable[rows, col], snapshot.requested[rows, col]
    elif is_scalar_resource_name(name):
        # A scalar resource the pod does not ask for, or the node lacks, takes no part in the score.
        col = snapshot.column(name)
        if pod_request == 0 or col is None:
            return None
        alloc, used = snapshot.allocatable[rows, col], snapshot.requested[rows, col]
    else:
        return None
    return alloc, used + pod_request


def _node_allocatable_requested(node: NodeInfo, name: str, pod_request: int,
                                non_zero: bool) -> tuple[int, int] | None:
    """The per-node form of :func:`_allocatable_requested`."""
    if name in (CPU, MEMORY):
        if non_zero:
            used = node.non_zero_cpu if name == CPU else node.non_zero_memory
        else:
            used = node.requested.get(name, 0)
        return node.allocatable.get(name, 0), used + pod_request
    if name == EPHEMERAL_STORAGE:
        return node.allocatable.get(name, 0), node.requested.get(name, 0) + pod_request
    if is_scalar_resource_name(name):
        if pod_request == 0 or name not in node.allocatable:
            return None
        return node.allocatable[name], node.requested.get(name, 0) + pod_request
    return None


def _stack(snapshot: Any, rows: np.ndarray, resources: Sequence[tuple[str, int]], pod_requests: Sequence[int],
           non_zero: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(allocatable, requested, weights) as (resources × rows) matrices; skipped resources have 0 allocatable."""
    n = len(rows)
    allocs, reqs, weights = [], [], []
    for (name, weight), pod_request in zip(resources, pod_requests):
        pair = _allocatable_requested(snapshot, rows, name, pod_request, non_zero)
        if pair is None:
            continue
        allocs.append(pair[0])
        reqs.append(pair[1])
        weights.append(weight)
    if not allocs:
        return np.zeros((0, n), dtype=np.int64), np.zeros((0, n), dtype=np.int64), np.zeros(0, dtype=np.int64)
    return np.vstack(allocs), np.vstack(reqs), np.array(weights, dtype=np.int64)


# -- scoring strategies (resources × rows → rows) -----------------------------------------------------------

def _weighted(scores: np.ndarray, counted: np.ndarray, weights: np.ndarray, rounded: bool = False) -> np.ndarray:
    w = weights[:, None]
    node_score = (np.where(counted, scores, 0) * w).sum(axis=0)
    weight_sum = (counted * w).sum(axis=0)
    safe = np.maximum(weight_sum, 1)
    if rounded:  # Go's math.Round of a positive ratio: half away from zero
        result = (2 * node_score + safe) // (2 * safe)
    else:
        result = node_score // safe
    return np.where(weight_sum > 0, result, 0).astype(np.int64)


def _row_op(fn: Any, alloc: np.ndarray, req: np.ndarray) -> np.ndarray:
    return np.vstack([fn(alloc[i], req[i]) for i in range(alloc.shape[0])]) if alloc.shape[0] else alloc


def least_allocated(alloc: np.ndarray, req: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ w × (capacity − requested) × 100 / capacity ÷ Σ w, over resources with capacity."""
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    free = np.where(req > alloc, 0, alloc - req)
    scores = _row_op(lambda a, f: _mul_div(f, MAX_NODE_SCORE, a), safe, free)
    return _weighted(scores, valid, weights)


def most_allocated(alloc: np.ndarray, req: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σ w × min(requested, capacity) × 100 / capacity ÷ Σ w, over resources with capacity."""
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    used = np.maximum(np.minimum(req, alloc), 0)
    scores = _row_op(lambda a, u: _mul_div(u, MAX_NODE_SCORE, a), safe, used)
    return _weighted(scores, valid, weights)


def requested_to_capacity_ratio(alloc: np.ndarray, req: np.ndarray, weights: np.ndarray,
                                shape: Sequence[tuple[int, int]]) -> np.ndarray:
    """Shape(utilization %) per resource, weighted mean over resources scoring above 0, rounded."""
    valid = alloc > 0
    safe = np.where(valid, alloc, 1)
    util = _row_op(lambda a, r: np.where(r > a, _MAX_UTILIZATION, _mul_div(np.maximum(r, 0), _MAX_UTILIZATION, a)),
                   safe, req)
    scores = np.vstack([broken_linear(shape, u) for u in util]) if len(util) else util
    return _weighted(scores, valid & (scores > 0), weights, rounded=True)


def balanced_allocation(alloc: np.ndarray, req: np.ndarray) -> np.ndarray:
    """(1 − standard deviation of the requested fractions) × 100, fractions capped at 1 (kube 1.35)."""
    n = alloc.shape[1]
    total = np.zeros(n)
    count = np.zeros(n, dtype=np.int64)
    first = np.zeros(n)
    second = np.zeros(n)
    fractions = []
    for a, r in zip(alloc, req):
        valid = a > 0
        f = np.where(valid, np.minimum(r / np.where(valid, a, 1), 1.0), 0.0)
        fractions.append((valid, f))
        total += f
        first = np.where(valid & (count == 0), f, first)
        second = np.where(valid & (count == 1), f, second)
        count += valid
    std = np.zeros(n)
    two = count == 2
    std[two] = np.abs((first[two] - second[two]) / 2)
    more = count > 2
    if more.any():
        mean = total / np.maximum(count, 1)
        acc = np.zeros(n)
        for valid, f in fractions:
            acc += np.where(valid, (f - mean) * (f - mean), 0.0)
        std[more] = np.sqrt(acc[more] / count[more])
    return np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)


# Fast paths for the common profile (cpu and memory only, every node with both): a handful of numpy
# operations over (rows × 2) instead of the general per-resource loops above; same integer results.

def _least_allocated_cpu_memory(snapshot: Any, rows: np.ndarray, resources: Sequence[tuple[str, int]],
                                requests: Sequence[int]) -> np.ndarray | None:
    cols = [0 if n == CPU else 1 for n, _ in resources]
    alloc = snapshot.take(snapshot.cpu_memory_allocatable, rows)
    if not len(rows) or alloc.min() <= 0 or alloc.max() > _INT64_MAX // MAX_NODE_SCORE:
        return None
    req = snapshot.take(snapshot.non_zero_requested, rows) + np.array([requests[cols.index(0)] if 0 in cols else 0,
                                                                       requests[cols.index(1)] if 1 in cols else 0])
    scores = np.maximum(alloc - req, 0) * MAX_NODE_SCORE // alloc
    weights = np.zeros(2, dtype=np.int64)
    for c, (_, w) in zip(cols, resources):
        weights[c] += w
    return scores @ weights // int(weights.sum())


def _balanced_cpu_memory(snapshot: Any, rows: np.ndarray, resources: Sequence[tuple[str, int]],
                         requests: Sequence[int]) -> np.ndarray | None:
    alloc = snapshot.take(snapshot.cpu_memory_allocatable, rows)
    if not len(rows) or alloc.min() <= 0:
        return None
    pod = np.zeros(2, dtype=np.int64)
    for (name, _), amount in zip(resources, requests):
        pod[0 if name == CPU else 1] = amount
    fractions = np.minimum((snapshot.take(snapshot.cpu_memory_requested, rows) + pod) / alloc, 1.0)
    std = np.abs((fractions[:, 0] - fractions[:, 1]) / 2)
    return np.trunc((1 - std) * MAX_NODE_SCORE).astype(np.int64)


def _cpu_memory_pair(resources: Sequence[tuple[str, int]], requests: Sequence[int]) -> tuple[int, int]:
    """The pod's ``requests`` (aligned with ``resources``, cpu and memory only) as (cpu, memory)."""
    pair = [0, 0]
    for (name, _), amount in zip(resources, requests):
        pair[0 if name == CPU else 1] = amount
    return pair[0], pair[1]


_SCALAR_LIMIT = _INT64_MAX // (4 * MAX_NODE_SCORE)  # below it, Python ints and int64 agree on these formulas


def _least_allocated_cpu_memory_row(snapshot: Any, row: int, weights: tuple[int, int],
                                    requests: tuple[int, int]) -> int | None:
    """:func:`_least_allocated_cpu_memory` for one row in plain Python (None: outside its fast path)."""
    a_cpu, a_mem = snapshot.cpu_memory_allocatable[row].tolist()
    r_cpu, r_mem = snapshot.non_zero_requested[row].tolist()
    r_cpu += requests[0]
    r_mem += requests[1]
    if min(a_cpu, a_mem) <= 0 or max(a_cpu, a_mem, r_cpu, r_mem) > _SCALAR_LIMIT:
        return None
    s_cpu = max(a_cpu - r_cpu, 0) * MAX_NODE_SCORE // a_cpu
    s_mem = max(a_mem - r_mem, 0) * MAX_NODE_SCORE // a_mem
    return (s_cpu * weights[0] + s_mem * weights[1]) // (weights[0] + weights[1])


def _balanced_cpu_memory_row(snapshot: Any, row: int, requests: tuple[int, int]) -> int | None:
    """:func:`_balanced_cpu_memory` for one row in plain Python, with the same float operations."""
    a_cpu, a_mem = snapshot.cpu_memory_allocatable[row].tolist()
    r_cpu, r_mem = snapshot.cpu_memory_requested[row].tolist()
    r_cpu += requests[0]
    r_mem += requests[1]
    if min(a_cpu, a_mem) <= 0 or max(r_cpu, r_mem) > _SCALAR_LIMIT:
        return None
    f_cpu = min(float(r_cpu) / float(a_cpu), 1.0)
    f_mem = min(float(r_mem) / float(a_mem), 1.0)
    std = abs((f_cpu - f_mem) / 2)
    return math.trunc((1 - std) * MAX_NODE_SCORE)


# -- NodeResourcesFit ----------------------------------------------------------------------------------

class _FitRequest:
    """The pod's request as Filter checks it: [(resource, amount)] in kube's reason order."""

    __slots__ = ("checks",)

    def __init__(self, checks: list[tuple[str, int]]) -> None:
        self.checks = checks

    def clone(self) -> "_FitRequest":
        return self


def fit_checks(requests: Mapping[str, int], ignored: frozenset = frozenset(),
               groups: frozenset = frozenset()) -> list[tuple[str, int]]:
    """Resources to check, in kube's order: cpu, memory, ephemeral-storage, then scalar resources (sorted)."""
    checks = [(name, requests[name]) for name in (CPU, MEMORY, EPHEMERAL_STORAGE) if requests.get(name, 0) > 0]
    for name in sorted(requests):
        amount = requests[name]
        if amount <= 0 or name in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS) or not is_scalar_resource_name(name):
            continue
        if is_extended_resource_name(name) and (name in ignored or name.split("/", 1)[0] in groups):
            continue
        checks.append((name, amount))
    return checks


def insufficient_resources(checks: Sequence[tuple[str, int]], node: NodeInfo) -> list[str]:
    """The reasons a node cannot take the pod (per-node form of the batch filter)."""
    reasons = []
    if len(node.pods) + 1 > node.allowed_pods:
        reasons.append(_TOO_MANY_PODS)
    for name, amount in checks:
        if amount > node.allocatable.get(name, 0) - node.requested.get(name, 0):
            reasons.append(f"Insufficient {name}")
    return reasons


class NodeResourcesFit(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    """Filter on free resources and pod slots; score with the configured strategy."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        parsed = parse_fit_args(args)
        self.handle = handle
        self.ignored: frozenset = parsed["ignored"]
        self.ignored_groups: frozenset = parsed["groups"]
        self.strategy: str = parsed["type"]
        self.resources: list[tuple[str, int]] = parsed["resources"]
        self.shape: list[tuple[int, int]] | None = parsed["shape"]
        self._cpu_memory_only = bool(self.resources) and all(n in (CPU, MEMORY) for n, _ in self.resources)
        self._scores_memo: ClassMemo | None = None
        if self.strategy == LEAST_ALLOCATED and self._cpu_memory_only:
            weights = [0, 0]
            for name, weight in self.resources:
                weights[0 if name == CPU else 1] += weight
            self._pair_weights = (weights[0], weights[1])
            self._scores_memo = ClassMemo(self._scores, lambda snapshot, row, key: _least_allocated_cpu_memory_row(
                snapshot, row, self._pair_weights, _cpu_memory_pair(self.resources, key)))
        # Per-pod cache key: the checks depend on this instance's ignored resources.
        self._cache_key = f"noderesources.fit:{sorted(self.ignored)}:{sorted(self.ignored_groups)}"

    # -- PreFilter / Filter --------------------------------------------------------------------------

    def _compute(self, pod: PodInfo) -> _FitRequest:
        return pod.cached(self._cache_key, lambda _: _FitRequest(fit_checks(pod.requests, self.ignored,
                                                                                 self.ignored_groups)))

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Any) -> tuple[PreFilterResult | None, Status | None]:
        state.write(_PRE_FILTER_KEY, self._compute(pod))
        return None, None

    def _request(self, state: CycleState, pod: PodInfo) -> _FitRequest:
        req = state.read(_PRE_FILTER_KEY)
        return req if req is not None else self._compute(pod)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        reasons = insufficient_resources(self._request(state, pod).checks, node)
        return Status(UNSCHEDULABLE, *reasons) if reasons else None

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        checks = self._request(state, pod).checks
        take = snapshot.take
        failed = take(snapshot.pod_count, rows) >= take(snapshot.allowed_pods, rows)
        failures = [Failure(UNSCHEDULABLE, _TOO_MANY_PODS, failed.copy())] if failed.any() else []
        for name, amount in checks:
            col = snapshot.column(name)
            if col is None:
                short = np.ones(len(rows), dtype=bool)
            else:
                short = take(snapshot.free[:, col], rows) < amount
            if short.any():
                failures.append(Failure(UNSCHEDULABLE, f"Insufficient {name}", short))
                failed = failed | short
        if not failures:
            return BatchFilterResult.all_pass(len(rows))
        return BatchFilterResult(~failed, failures)

    # -- PreScore / Score ----------------------------------------------------------------------------

    def _score_requests(self, pod: PodInfo) -> list[int]:
        # Scoring counts request-less containers at kube's defaults for cpu and memory.
        out = []
        for name, _ in self.resources:
            if name == CPU:
                out.append(pod.non_zero_cpu)
            elif name == MEMORY:
                out.append(pod.non_zero_memory)
            else:
                out.append(pod.requests.get(name, 0))
        return out

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        state.write(_PRE_SCORE_KEY, self._score_requests(pod))
        return None

    def _strategy_scores(self, alloc: np.ndarray, req: np.ndarray, weights: np.ndarray) -> np.ndarray:
        if self.strategy == MOST_ALLOCATED:
            return most_allocated(alloc, req, weights)
        if self.strategy == REQUESTED_TO_CAPACITY_RATIO:
            return requested_to_capacity_ratio(alloc, req, weights, self.shape or [])
        return least_allocated(alloc, req, weights)

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        requests = state.read(_PRE_SCORE_KEY)
        if requests is None:
            requests = self._score_requests(pod)
        if self._scores_memo is not None:
            return self._scores_memo.take(snapshot, tuple(requests), rows)
        return self._scores(snapshot, rows, requests)

    def _scores(self, snapshot: Any, rows: np.ndarray, requests: Sequence[int]) -> np.ndarray:
        if self.strategy == LEAST_ALLOCATED and self._cpu_memory_only:
            fast = _least_allocated_cpu_memory(snapshot, rows, self.resources, requests)
            if fast is not None:
                return fast
        alloc, req, weights = _stack(snapshot, rows, self.resources, requests, non_zero=True)
        if not len(weights):
            return np.zeros(len(rows), dtype=np.int64)
        return self._strategy_scores(alloc, req, weights)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        requests = state.read(_PRE_SCORE_KEY)
        if requests is None:
            requests = self._score_requests(pod)
        allocs, reqs, weights = [], [], []
        for (name, weight), pod_request in zip(self.resources, requests):
            pair = _node_allocatable_requested(node, name, pod_request, non_zero=True)
            if pair is not None:
                allocs.append([pair[0]])
                reqs.append([pair[1]])
                weights.append(weight)
        if not weights:
            return 0
        return int(self._strategy_scores(np.array(allocs, dtype=np.int64), np.array(reqs, dtype=np.int64),
                                         np.array(weights, dtype=np.int64))[0])

    # -- events --------------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete", _scheduled_pod_deleted_hint),
                ClusterEvent("Node", "Add", self._node_hint), ClusterEvent("Node", "Update", self._node_hint)]

    def _node_hint(self, pod: dict, old: Any, new: Any) -> bool:
        """Helps when the pod fits the (empty) new node and, for an update, a resource it needs grew."""
        if new is None:
            return False
        pi = PodInfo(pod)
        checks = fit_checks(pi.requests, self.ignored, self.ignored_groups)
        new_node = NodeInfo(new)
        if insufficient_resources(checks, new_node):
            return False
        if old is None:
            return True
        old_node = NodeInfo(old)
        if new_node.allowed_pods > old_node.allowed_pods:
            return True
        return any(new_node.allocatable.get(n, 0) > old_node.allocatable.get(n, 0) for n, _ in checks)


def _scheduled_pod_deleted_hint(pod: dict, old: Any, new: Any) -> bool:
    """Only the deletion of a pod that held resources on a node frees any."""
    return old is not None and bool((old.get("spec") or {}).get("nodeName"))


# -- NodeResourcesBalancedAllocation ------------------------------------------------------------------

class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin):
    """Score plugin favouring nodes whose requested fractions of the resources are balanced."""

    name = BALANCED_ALLOCATION_NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        self.handle = handle
        self.resources = _resource_specs((args or {}).get("resources"), "resources")
        self._cpu_memory_only = len(self.resources) == 2 and all(n in (CPU, MEMORY) for n, _ in self.resources)
        self._scores_memo: ClassMemo | None = None
        if self._cpu_memory_only:
            self._scores_memo = ClassMemo(self._scores, lambda snapshot, row, key: _balanced_cpu_memory_row(
                snapshot, row, _cpu_memory_pair(self.resources, key)))

    def _requests(self, pod: PodInfo) -> list[int]:
        return [pod.requests.get(name, 0) for name, _ in self.resources]

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        requests = self._requests(pod)
        if not any(requests):
            # kube skips best-effort pods so that they do not all pile onto one node (#129138).
            return Status.skip()
        state.write(_BALANCED_PRE_SCORE_KEY, requests)
        return None

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        requests = state.read(_BALANCED_PRE_SCORE_KEY)
        if requests is None:
            requests = self._requests(pod)
            if not any(requests):
                return np.zeros(len(rows), dtype=np.int64)
        if self._scores_memo is not None:
            return self._scores_memo.take(snapshot, tuple(requests), rows)
        return self._scores(snapshot, rows, requests)

    def _scores(self, snapshot: Any, rows: np.ndarray, requests: Sequence[int]) -> np.ndarray:
        if self._cpu_memory_only:
            fast = _balanced_cpu_memory(snapshot, rows, self.resources, requests)
            if fast is not None:
                return fast
        alloc, req, _ = _stack(snapshot, rows, self.resources, requests, non_zero=False)
        if not alloc.shape[0]:
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        return balanced_allocation(alloc, req)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        requests = state.read(_BALANCED_PRE_SCORE_KEY)
        if requests is None:
            requests = self._requests(pod)
            if not any(requests):
                return 0
        allocs, reqs = [], []
        for (name, _), pod_request in zip(self.resources, requests):
            pair = _node_allocatable_requested(node, name, pod_request, non_zero=False)
            if pair is not None:
                allocs.append([pair[0]])
                reqs.append([pair[1]])
        if not allocs:
            return MAX_NODE_SCORE
        return int(balanced_allocation(np.array(allocs, dtype=np.int64), np.array(reqs, dtype=np.int64))[0])


def new(args: dict | None, handle: Any) -> NodeResourcesFit:
    """Registry factory of NodeResourcesFit; ``args`` is NodeResourcesFitArgs."""
    return NodeResourcesFit(args, handle)


def new_balanced_allocation(args: dict | None, handle: Any) -> NodeResourcesBalancedAllocation:
    """Registry factory of NodeResourcesBalancedAllocation; ``args``: ``resources`` (default cpu and memory)."""
    return NodeResourcesBalancedAllocation(args, handle)



# Both plugins of this module, for the registry (koordinator_roles.scheduler.plugins reads FACTORIES).
FACTORIES = {NAME: new, BALANCED_ALLOCATION_NAME: new_balanced_allocation}
