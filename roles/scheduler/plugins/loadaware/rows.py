"""Row-aligned arrays of everything Filter and Score need per node, and the vectorised rules over them.

``NodeRows`` has two base halves per row, kept as Python values and refreshed independently:

- node-derived, a shared :class:`_RowPlan` (thresholds with the node's annotation override,
  allocatable from EstimateNode): rewritten when the node object of a row changes;
- cache-derived (found / has-nodeMetric flags, updateTime, existing load per mode): rewritten for
  the rows whose node the assign cache marked dirty.

``derive``/``derive_row`` turn them into pod-independent arrays, per kind of incoming pod (index
0: not prod, 1: prod), so that ``filter_rows``/``score_rows`` evaluate reference §2.1.5/§2.1.6 for a
pod with a handful of vector operations over any subset of rows. Both compute a row with the same
scalar code; ``derive`` writes every row at once. Matrices are resource-major (resources × nodes):
numpy reduces badly over a short last axis, so per-resource rows are combined with a Python loop
over the few resources instead. The per-node Filter/Score build a one-row ``NodeRows`` and call the
same functions.

What depends on the pod only through its class (prod or not, its estimate) is kept per class over
every row (:meth:`NodeRows.memo`): replicas of one workload share it, and ``derive_row`` updates
the few rows a cycle refreshes, so a cycle reads the kept arrays instead of recomputing them.
Metric expiry depends on the time, so it is applied per call, skipped while ``now`` is before the
earliest expiry.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from typing import Any, Mapping

import numpy as np

from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE
from koordinator_roles.scheduler.plugins.loadaware.args import LoadAwareArgs, go_round
from koordinator_roles.scheduler.plugins.loadaware.assign_cache import PodAssignCache
from koordinator_roles.scheduler.plugins.loadaware.estimator import DefaultEstimator
from koordinator_roles.scheduler.plugins.loadaware.thresholds import ANNOTATION_USAGE_THRESHOLDS, node_profile

REASON_EXPIRED = "node(s) nodeMetric expired"
NEVER = 1 << 62  # a room no estimate reaches: the resource is not checked on that node


def usage_reason(resource: str, aggregated: bool) -> str:
    if aggregated:
        return f"node(s) {resource} aggregated usage exceed threshold"
    return f"node(s) {resource} usage exceed threshold"


@functools.lru_cache(maxsize=4096)  # thresholds and allocatables repeat across nodes
def failing_total(thr: int, alloc: int) -> int:
    """Smallest integer total with ``go_round(total / alloc * 100) > thr`` (alloc > 0).

    The boundary is found in integers, then nudged to agree exactly with Koordinator's float
    formula ``round(total / allocatable * 100) > threshold``.
    """
    t = max(thr, 0)
    # The real boundary: total / alloc * 100 >= thr + 0.5  <=>  total >= (2 thr + 1) alloc / 200.
    limit = -((-(2 * t + 1) * alloc) // 200)

    def fails(total: int) -> bool:
        return go_round(float(total) / float(alloc) * 100) > t

    for _ in range(2):  # float rounding in Koordinator's formula can move the boundary by a unit
        if fails(limit - 1):
            limit -= 1
    for _ in range(2):
        if not fails(limit):
            limit += 1
    return limit


class _RowPlan:
    """What a row's node implies, computed once per distinct (thresholds, allocatable): rows of
    identical nodes share one plan, so building rows and comparing them is cheap.

    ``kinds[v]`` (v: 0 not prod, 1 prod; the same object when a prod pod is treated like any other)
    is ``(limits, existing, active, score_existing)``: per resource the smallest failing total
    (None: not checked), which existing-load vector Filter and Score compare with (an index into
    the row's ``(node, prod, filter-aggregated, score-aggregated)`` vectors), and whether any
    threshold is active.
    """

    __slots__ = ("alloc", "safe_alloc", "agg_key", "agg_reason", "kinds", "needed")

    def __init__(self, args: LoadAwareArgs, resources: tuple[str, ...], profile: Any, alloc: list[int]) -> None:
        agg = profile.aggregated
        is_agg = agg is not None
        # "prod thresholds non-empty" is about the map, not its values (all-zero then passes).
        has_prod = bool(profile.prod)
        score_prod = args.score_according_prod_usage
        score_default = _EX_SAGG if args.aggregated.score_enabled else _EX_NODE
        self.alloc = alloc
        self.safe_alloc = [a if a > 0 else 1 for a in alloc]
        self.agg_key = (agg.aggregation_type, agg.duration) if is_agg else None
        self.agg_reason = (is_agg, is_agg and not has_prod)
        kinds = []
        for v in (0, 1):
            if v == 1 and not has_prod and not score_prod:
                kinds.append(kinds[0])  # a prod pod is held and scored like any other here
                continue
            if has_prod and v == 1:
                thresholds, existing = profile.prod, _EX_PROD
            elif is_agg:
                thresholds, existing = agg.thresholds, _EX_FAGG
            else:
                thresholds, existing = profile.usage, _EX_NODE
            thr = [int(thresholds.get(name, 0)) for name in resources]
            limits = [failing_total(t, a) if t > 0 and a > 0 else None for t, a in zip(thr, alloc)]
            kinds.append((limits, existing, any(t > 0 for t in thr),
                          _EX_PROD if v == 1 and score_prod else score_default))
        self.kinds = tuple(kinds)
        self.needed = {k[1] for k in kinds} | {k[3] for k in kinds}


_EX_NODE, _EX_PROD, _EX_FAGG, _EX_SAGG = range(4)  # a row's existing-load vectors


class NodeRows:
    """Per-row arrays (see module docstring); matrices are (resources × rows)."""

    def __init__(self, n: int, args: LoadAwareArgs) -> None:
        w = len(args.resources)
        self.args = args
        self.resources = args.resources
        self.width = w
        self.n = n
        self.names: list[str] = [""] * n
        # The base halves as Python values per row: the node's plan, and (found, has NodeMetric,
        # updateTime, existing-load vectors) from the assign cache.
        self._plans: list[_RowPlan | None] = [None] * n
        self._plan_cache: dict[tuple, _RowPlan] = {}
        self._loads: list[tuple | None] = [None] * n
        self._zero = [0] * w
        self._nevers = [NEVER] * w
        # derived
        self.valid = np.zeros(n, dtype=bool)      # found and status.nodeMetric present
        # room and free of both kinds of pod in one matrix, so derive_row writes a row's column once.
        self._counts = np.zeros((4 * w, n), dtype=np.int64)
        self.room = [self._counts[0:w], self._counts[w:2 * w]]
        self.free = [self._counts[2 * w:3 * w], self._counts[3 * w:4 * w]]  # allocatable - existing; -1: none
        for room in self.room:
            room.fill(NEVER)
        self.agg_reason = [np.zeros(n, dtype=bool) for _ in range(2)]
        self.safe_alloc = np.ones((w, n), dtype=np.int64)
        self.weights = [int(args.resource_weights.get(name, 0)) for name in args.resources]
        self._arange = np.arange(n, dtype=np.int64)
        # What derive_row last wrote of a row besides room/free (a Reserve changes neither): unchanged
        # values are not written again.
        self._flags: list[tuple | None] = [None] * n
        # Per pod class, arrays over every row kept across cycles (see memo()).
        self._memo: OrderedDict[tuple, np.ndarray] = OrderedDict()
        # When metrics expire (updateTime + expiration; no updateTime: -inf, always expired): per kind
        # of pod, on the rows where Filter checks it (else +inf); and on the rows Score counts (else
        # +inf). With lower bounds of each, so that a cycle before the first expiry looks at neither.
        self.expire_check = [np.full(n, np.inf) for _ in range(2)]
        self.expire_valid = np.full(n, np.inf)
        self._min_expire_check = [np.inf, np.inf]
        self._min_expire_valid = np.inf

    # -- base halves -------------------------------------------------------------------------------

    def fill_node(self, row: int, name: str, node: Mapping[str, Any] | None, allocatable_milli: Mapping[str, int],
                  estimator: DefaultEstimator) -> None:
        """Node-derived half of ``row``."""
        estimated = estimator.estimate_node(node, allocatable_milli)
        alloc = [int(estimated.get(r, 0)) for r in self.resources]
        raw = (((node or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_USAGE_THRESHOLDS)
        key = (raw or None, *alloc)
        plan = self._plan_cache.get(key)
        if plan is None:
            plan = self._plan_cache[key] = _RowPlan(self.args, self.resources, node_profile(node, self.args), alloc)
        self.names[row] = name
        self._plans[row] = plan

    def fill_cache(self, row: int, cache: PodAssignCache) -> None:
        """Cache-derived half of ``row``; the caller holds ``cache.lock``."""
        n = cache.get(self.names[row])
        if n is None or n.metric is None:
            zero = self._zero
            self._loads[row] = (False, False, None, (zero, zero, zero, zero))
            return
        plan = self._plans[row]
        needed = plan.needed
        ex_node = n.existing(False) if _EX_NODE in needed else None
        ex_prod = n.existing(True) if _EX_PROD in needed else None
        key = plan.agg_key
        ex_fagg = n.existing(False, key[0], key[1]) if _EX_FAGG in needed else None
        agg = self.args.aggregated
        ex_sagg = (n.existing(False, agg.score_aggregation_type, agg.score_aggregated_duration)
                   if _EX_SAGG in needed else None)
        self._loads[row] = (True, n.has_node_metric, n.update_time, (ex_node, ex_prod, ex_fagg, ex_sagg))

    # -- derived arrays ----------------------------------------------------------------------------

    def _row_values(self, row: int) -> tuple[list[int], tuple]:
        """(room and free of both kinds of pod, flags) of ``row``, from its base halves.

        Filter needs, per resource, the ``room`` left before the rounded usage percentage exceeds
        the threshold: the pod fails there iff its estimate >= room (the plan's limit, see
        :func:`failing_total`, minus the existing load). Rows whose usage is not checked get NEVER,
        so Filter needs no mask for them.
        """
        plan = self._plans[row]
        found, has_nm, ut, existing = self._loads[row]
        valid = found and has_nm
        kind0, kind1 = plan.kinds
        per_kind = []
        for limits, ex, active, score_ex in (kind0,) if kind1 is kind0 else (kind0, kind1):
            if active and valid:
                room = [NEVER if limit is None else limit - e for limit, e in zip(limits, existing[ex])]
            else:
                room = self._nevers
            per_kind.append(room)
            per_kind.append([a - e if a > 0 else -1 for a, e in zip(plan.alloc, existing[score_ex])])
        if kind1 is kind0:
            counts = per_kind[0] + per_kind[0] + per_kind[1] + per_kind[1]
        else:
            counts = per_kind[0] + per_kind[2] + per_kind[1] + per_kind[3]
        expire = -np.inf if ut is None else ut + self.args.node_metric_expiration_seconds
        return counts, (plan, expire, valid, kind0[2] and found, kind1[2] and found)

    def derive(self) -> None:
        """Recompute every derived array from the base halves (after a rebuild)."""
        self._memo.clear()
        n, w = self.n, self.width
        values = [self._row_values(row) for row in range(n)]
        if not n:
            return
        self._counts[...] = np.array([counts for counts, _ in values], dtype=np.int64).reshape(n, 4 * w).T
        self._flags = flags = [f for _, f in values]
        plans = [f[0] for f in flags]
        expire = np.array([f[1] for f in flags], dtype=np.float64)
        self.valid = np.array([f[2] for f in flags], dtype=bool)
        self.safe_alloc = np.array([p.safe_alloc for p in plans], dtype=np.int64).reshape(n, w).T.copy()
        for v in (0, 1):
            self.agg_reason[v] = np.array([p.agg_reason[v] for p in plans], dtype=bool)
            checked = np.array([f[3 + v] for f in flags], dtype=bool)
            self.expire_check[v] = np.where(checked, expire, np.inf)
            self._min_expire_check[v] = float(self.expire_check[v].min())
        self.expire_valid = np.where(self.valid, expire, np.inf)
        self._min_expire_valid = float(self.expire_valid.min())

    def derive_row(self, row: int) -> None:
        """:meth:`derive` for one row (the few rows a cycle refreshes), updating the kept memos too."""
        counts, flags = self._row_values(row)
        self._counts[:, row] = counts
        plan, expire, valid, checked0, checked1 = flags
        if flags != self._flags[row]:
            self._flags[row] = flags
            self.valid[row] = valid
            self.expire_valid[row] = expire if valid else np.inf
            self.safe_alloc[:, row] = plan.safe_alloc
            for v, checked in ((0, checked0), (1, checked1)):
                self.agg_reason[v][row] = plan.agg_reason[v]
                self.expire_check[v][row] = expire if checked else np.inf
        # (the bounds only go down here; expired_for_* raise them to the truth when reached)
        if valid and expire < self._min_expire_valid:
            self._min_expire_valid = expire
        for v, checked in ((0, checked0), (1, checked1)):
            if checked and expire < self._min_expire_check[v]:
                self._min_expire_check[v] = expire
        if not self._memo:
            return
        w = self.width
        dom = self.args.dominant_resource_weight
        for (kind, v, estimate), kept in self._memo.items():
            values = kept.values
            if kind == _FAILURE:
                room = counts[v * w:(v + 1) * w]
                code = -1
                for r in range(w):
                    if room[r] <= estimate[r]:
                        code = 2 * r + plan.agg_reason[v]
                        break
                kept.failing += (code >= 0) - (values.item(row) >= 0)
                values[row] = code
            else:
                values[row] = (least_used_score(counts[(2 + v) * w:(3 + v) * w], plan.safe_alloc, estimate,
                                                self.weights, dom) if valid else 0)

    def is_all(self, idx: np.ndarray) -> bool:
        return len(idx) == self.n and (self.n == 0 or bool((idx == self._arange).all()))

    def memo(self, kind: str, v: int, estimate: tuple[int, ...]) -> "_Kept":
        """Filter's failure codes (``"failure"``, see :func:`_failure_codes`) or Score's scores before
        expiry (``"score"``) on every row, for one class of pod (prod or not, its estimate); callers
        must not modify the array.

        Pods of one workload share their class, and between two cycles only the rows derive_row
        refreshes change (the node the previous pod went to): it updates them here too.
        """
        key = (kind, v, estimate)
        kept = self._memo.get(key)
        if kept is None:
            if len(self._memo) >= MEMO_CLASSES:
                self._memo.popitem(last=False)
            if kind == _FAILURE:
                codes = _failure_codes(self, v, estimate)
                kept = _Kept(codes, int(np.count_nonzero(codes >= 0)))
            else:
                kept = _Kept(_scores(self, v, estimate), 0)
            self._memo[key] = kept
        else:
            self._memo.move_to_end(key)
        return kept

    def expired_for_filter(self, v: int, now: float) -> np.ndarray | None:
        """Rows whose NodeMetric Filter sees as expired at ``now`` (None: none)."""
        if now < self._min_expire_check[v]:
            return None
        # The bound only ever went down between rebuilds: raise it to the truth before comparing.
        self._min_expire_check[v] = bound = float(self.expire_check[v].min()) if self.n else np.inf
        return None if now < bound else self.expire_check[v] <= now

    def expired_for_score(self, now: float) -> np.ndarray | None:
        """Rows Score counts whose NodeMetric expired at ``now`` (None: none)."""
        if now < self._min_expire_valid:
            return None
        self._min_expire_valid = bound = float(self.expire_valid.min()) if self.n else np.inf
        return None if now < bound else self.expire_valid <= now


_FAILURE, _SCORE = "failure", "score"
MEMO_CLASSES = 8  # pod classes whose arrays NodeRows keeps


class _Kept:
    """One pod class's array over every row (:meth:`NodeRows.memo`) and, for Filter's failure
    codes, how many rows fail: a class that fails nowhere skips looking at the rows."""

    __slots__ = ("values", "failing")

    def __init__(self, values: np.ndarray, failing: int) -> None:
        self.values = values
        self.failing = failing


class PodContext:
    """What Filter/Score need from the incoming pod: its estimate (None = estimation error) and class."""

    __slots__ = ("estimate", "prod", "daemonset")

    def __init__(self, estimate: list[int] | None, prod: bool, daemonset: bool) -> None:
        self.estimate = estimate
        self.prod = prod
        self.daemonset = daemonset


def least_used_score(free: list[int], capacity: list[int], estimate: tuple[int, ...], weights: list[int],
                     dominant_weight: int) -> int:
    """Score of one row (reference §2.1.6): weighted leastUsed per resource, plus the dominant one."""
    total = 0
    dominant = None
    for f, c, e, w in zip(free, capacity, estimate, weights):
        # leastUsed = (capacity - used) * 100 // capacity, 0 when over capacity or no capacity (free -1).
        least = max((f - e) * 100 // c, 0)
        total += w * least
        if dominant_weight:
            dominant = least if dominant is None else min(dominant, least)
    if dominant_weight and dominant is not None:
        total += min(100, dominant) * dominant_weight
    return total // (sum(weights) + dominant_weight)


def _failure_codes(rows: NodeRows, v: int, estimate: tuple[int, ...]) -> np.ndarray:
    """Filter's usage check on every row: -1 where the pod fits, else ``2 * r + aggregated`` for the
    first resource ``r`` (sorted order) whose room the estimate reaches, which names the failure."""
    room = rows.room[v]
    codes = np.full(rows.n, -1, dtype=np.int64)
    for r in range(rows.width - 1, -1, -1):
        # Rows whose usage is not checked have room NEVER (see derive), which no estimate reaches.
        codes[room[r] <= estimate[r]] = 2 * r
    codes[(codes >= 0) & rows.agg_reason[v]] += 1
    return codes


def _scores(rows: NodeRows, v: int, estimate: tuple[int, ...]) -> np.ndarray:
    """:func:`least_used_score` on every row (vectorised), 0 where the NodeMetric is missing."""
    weights = rows.weights
    dom = rows.args.dominant_resource_weight
    free, cap = rows.free[v], rows.safe_alloc
    total = np.zeros(rows.n, dtype=np.int64)
    dominant = None
    for r in range(rows.width):
        least = np.maximum((free[r] - estimate[r]) * 100 // cap[r], 0)
        if weights[r]:
            total += weights[r] * least
        if dom:
            dominant = least if dominant is None else np.minimum(dominant, least)
    if dom and dominant is not None:
        total += np.minimum(100, dominant) * dom
    total //= sum(weights) + dom
    total[~rows.valid] = 0
    return total


def filter_rows(rows: NodeRows, idx: np.ndarray, pod: PodContext, now: float) -> tuple[np.ndarray | None, list]:
    """(passed, [(code, reason, mask)]) for ``rows`` at ``idx`` (reference §2.1.5); passed None:
    every row passed."""
    k = len(idx)
    if pod.daemonset or k == 0:
        return None, []
    args = rows.args
    v = 1 if pod.prod else 0
    kept = rows.memo(_FAILURE, v, tuple(pod.estimate or [0] * rows.width))
    expired = rows.expired_for_filter(v, now) if args.filter_expired_node_metrics else None
    if expired is None and not kept.failing:
        return None, []
    full = rows.is_all(idx)
    codes = kept.values if full else kept.values[idx]
    failures: list = []
    passed = None
    if expired is not None:
        expired = expired if full else expired[idx]
        if expired.any():
            if not args.enable_schedule_when_node_metrics_expired:
                passed = ~expired
                failures.append((UNSCHEDULABLE, REASON_EXPIRED, expired))
            codes = np.where(expired, -1, codes)  # their usage is not checked
    failing = codes >= 0
    if not failing.any():
        return passed, failures
    passed = ~failing if passed is None else passed & ~failing
    for c in np.unique(codes[failing]).tolist():
        failures.append((UNSCHEDULABLE, usage_reason(rows.resources[c // 2], bool(c % 2)), codes == c))
    return passed, failures


def score_rows(rows: NodeRows, idx: np.ndarray, pod: PodContext, now: float) -> np.ndarray:
    """Scores 0..100 for ``rows`` at ``idx`` (reference §2.1.6)."""
    k = len(idx)
    if k == 0 or sum(rows.weights) + rows.args.dominant_resource_weight <= 0 or pod.estimate is None:
        return np.zeros(k, dtype=np.int64)
    full = rows.is_all(idx)
    scores = rows.memo(_SCORE, 1 if pod.prod else 0, tuple(pod.estimate)).values
    total = scores.copy() if full else scores[idx]
    expired = rows.expired_for_score(now)
    if expired is not None:
        total[expired if full else expired[idx]] = 0
    return total
