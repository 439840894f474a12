"""Row-aligned arrays of everything Filter and Score need per node, and the vectorised rules over them.

``NodeRows`` has two base halves, refreshed independently:

- node-derived (thresholds with the node's annotation override, allocatable from EstimateNode):
  rewritten when the node object of a row changes;
- cache-derived (found / has-nodeMetric flags, updateTime, existing load per mode): rewritten for
  the rows whose node the assign cache marked dirty.

``derive``/``derive_row`` turn them into pod-independent arrays, per kind of incoming pod (index
0: not prod, 1: prod), so that ``filter_rows``/``score_rows`` evaluate reference §2.1.5/§2.1.6 for a
pod with a handful of vector operations over any subset of rows. Matrices are resource-major
(resources × nodes): numpy reduces badly over a short last axis, so per-resource rows are combined
with a Python loop over the few resources instead. The per-node Filter/Score build a one-row
``NodeRows`` and call the same functions.

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

from roles.scheduler.framework.status import UNSCHEDULABLE
from roles.scheduler.plugins.loadaware.args import LoadAwareArgs, go_round
from roles.scheduler.plugins.loadaware.assign_cache import PodAssignCache
from roles.scheduler.plugins.loadaware.estimator import DefaultEstimator
from roles.scheduler.plugins.loadaware.thresholds import node_profile

REASON_EXPIRED = "node(s) nodeMetric expired"
NEVER = 1 << 62  # a room no estimate reaches: the resource is not checked on that node


def usage_reason(resource: str, aggregated: bool) -> str:
    if aggregated:
        return f"node(s) {resource} aggregated usage exceed threshold"
    return f"node(s) {resource} usage exceed threshold"


def go_round_array(x: np.ndarray) -> np.ndarray:
    """Go's math.Round (half away from zero) element-wise, as int64."""
    a = np.abs(x)
    r = np.floor(a)
    r += (a - r) >= 0.5
    return (np.sign(x) * r).astype(np.int64)


def failing_total_array(thr: np.ndarray, alloc: np.ndarray) -> np.ndarray:
    """Smallest integer total with ``go_round(total / alloc * 100) > thr`` (element-wise; alloc > 0)."""
    t = np.maximum(thr, 0)
    # The real boundary: total / alloc * 100 >= thr + 0.5  <=>  total >= (2 thr + 1) alloc / 200.
    limit = -((-(2 * t + 1) * alloc) // 200)

    def fails(total: np.ndarray) -> np.ndarray:
        return go_round_array(total / alloc * 100) > t

    for _ in range(2):  # float rounding in Koordinator's formula can move the boundary by a unit
        limit = np.where(fails(limit - 1), limit - 1, limit)
    for _ in range(2):
        limit = np.where(fails(limit), limit, limit + 1)
    return limit


@functools.lru_cache(maxsize=4096)  # thresholds and allocatables repeat across nodes and cycles
def failing_total(thr: int, alloc: int) -> int:
    """Scalar twin of :func:`failing_total_array` (same float operations, so the same boundary)."""
    t = max(thr, 0)
    limit = -((-(2 * t + 1) * alloc) // 200)

    def fails(total: int) -> bool:
        return go_round(float(total) / float(alloc) * 100) > t

    for _ in range(2):
        if fails(limit - 1):
            limit -= 1
    for _ in range(2):
        if not fails(limit):
            limit += 1
    return limit


class NodeRows:
    """Per-row arrays (see module docstring); matrices are (resources × rows)."""

    def __init__(self, n: int, args: LoadAwareArgs) -> None:
        w = len(args.resources)
        self.args = args
        self.resources = args.resources
        self.width = w
        self.n = n
        self.names: list[str] = [""] * n
        # node-derived
        self.thr_usage = np.zeros((w, n), dtype=np.int64)
        self.thr_prod = np.zeros((w, n), dtype=np.int64)
        self.thr_agg = np.zeros((w, n), dtype=np.int64)
        self.has_prod = np.zeros(n, dtype=bool)
        self.is_agg = np.zeros(n, dtype=bool)
        self.agg_keys: list[tuple[str, float] | None] = [None] * n
        self.alloc = np.zeros((w, n), dtype=np.int64)
        # cache-derived
        self.found = np.zeros(n, dtype=bool)
        self.has_nm = np.zeros(n, dtype=bool)
        self.update_time = np.full(n, np.nan)
        self.ex_node = np.zeros((w, n), dtype=np.int64)
        self.ex_prod = np.zeros((w, n), dtype=np.int64)
        self.ex_fagg = np.zeros((w, n), dtype=np.int64)
        self.ex_sagg = np.zeros((w, n), dtype=np.int64)
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
        # The base halves again as Python values per row, for derive_row: reading numpy scalars and
        # columns back costs more than the arithmetic on a row.
        self._node_py: list[tuple | None] = [None] * n
        self._cache_py: list[tuple | None] = [None] * n
        # What derive_row last wrote of a row besides room/free (a Reserve changes neither): unchanged
        # values are not written again.
        self._flags_py: list[tuple | None] = [None] * n
        # Per pod class, arrays over every row kept across cycles (see memo()).
        self._memo: OrderedDict[tuple, np.ndarray] = OrderedDict()
        # When metrics expire (updateTime + expiration; no updateTime: -inf, always expired): per kind
        # of pod, on the rows where Filter checks it (else +inf); and on the rows Score counts (else
        # +inf). With lower bounds of each, so that a cycle before the first expiry looks at neither.
        self.expire_check = [np.full(n, np.inf) for _ in range(2)]
        self.expire_valid = np.full(n, np.inf)
        self._min_expire_check = [np.inf, np.inf]
        self._min_expire_valid = np.inf

    def _vec(self, amounts: Mapping[str, int]) -> list[int]:
        return [int(amounts.get(name, 0)) for name in self.resources]

    # -- base halves -------------------------------------------------------------------------------

    def fill_node(self, row: int, name: str, node: Mapping[str, Any] | None, allocatable_milli: Mapping[str, int],
                  estimator: DefaultEstimator) -> None:
        """Node-derived half of ``row``."""
        profile = node_profile(node, self.args)
        agg = profile.aggregated
        thr_usage, thr_prod = self._vec(profile.usage), self._vec(profile.prod)
        thr_agg = self._vec(agg.thresholds) if agg is not None else [0] * self.width
        alloc = self._vec(estimator.estimate_node(node, allocatable_milli))
        # "prod thresholds non-empty" is about the map, not its values (all-zero then passes).
        has_prod, is_agg = bool(profile.prod), agg is not None
        self.names[row] = name
        self.thr_usage[:, row] = thr_usage
        self.thr_prod[:, row] = thr_prod
        self.has_prod[row] = has_prod
        self.is_agg[row] = is_agg
        self.agg_keys[row] = None if agg is None else (agg.aggregation_type, agg.duration)
        self.thr_agg[:, row] = thr_agg
        self.alloc[:, row] = alloc
        self._node_py[row] = (thr_usage, thr_prod, thr_agg, has_prod, is_agg, alloc)

    def fill_cache(self, row: int, cache: PodAssignCache) -> None:
        """Cache-derived half of ``row``; the caller holds ``cache.lock``."""
        n = cache.get(self.names[row])
        if n is None or n.metric is None:
            zero = [0] * self.width
            found, has_nm, ut = False, False, None
            ex_node = ex_prod = ex_fagg = ex_sagg = zero
        else:
            found, has_nm, ut = True, n.has_node_metric, n.update_time
            ex_node, ex_prod = n.existing(False), n.existing(True)
            key = self.agg_keys[row]
            ex_fagg = n.existing(False, key[0], key[1]) if key is not None else [0] * self.width
            agg = self.args.aggregated
            ex_sagg = (n.existing(False, agg.score_aggregation_type, agg.score_aggregated_duration)
                       if agg.score_enabled else [0] * self.width)
        self.found[row] = found
        self.has_nm[row] = has_nm
        self.update_time[row] = np.nan if ut is None else ut
        self.ex_node[:, row] = ex_node
        self.ex_prod[:, row] = ex_prod
        self.ex_fagg[:, row] = ex_fagg
        self.ex_sagg[:, row] = ex_sagg
        self._cache_py[row] = (found, has_nm, ut, ex_node, ex_prod, ex_fagg, ex_sagg)

    # -- derived arrays ----------------------------------------------------------------------------

    def _score_existing(self, v: int) -> np.ndarray:
        if v == 1 and self.args.score_according_prod_usage:
            return self.ex_prod
        if self.args.aggregated.score_enabled:
            return self.ex_sagg
        return self.ex_node

    def derive(self) -> None:
        """Recompute every derived array from the base arrays (vectorised; after a rebuild).

        Filter needs, per row and resource, the ``room`` left before the rounded usage percentage
        exceeds the threshold: the pod fails there iff its estimate >= room. The boundary is found
        in integers, then nudged to agree exactly with Koordinator's float formula
        ``round(total / allocatable * 100) > threshold``.
        """
        self._memo.clear()
        self._flags_py = [None] * self.n
        args = self.args
        alloc = self.alloc
        has_alloc = alloc > 0
        self.safe_alloc = np.where(has_alloc, alloc, 1)
        ut = self.update_time
        expire_at = np.where(np.isnan(ut), -np.inf, ut + args.node_metric_expiration_seconds)
        self.valid = self.found & self.has_nm
        for v in (0, 1):
            prod_mode = self.has_prod & bool(v)
            is_agg = self.is_agg & ~prod_mode
            thr = np.where(prod_mode, self.thr_prod, np.where(is_agg, self.thr_agg, self.thr_usage))
            existing = np.where(prod_mode, self.ex_prod, np.where(is_agg, self.ex_fagg, self.ex_node))
            active = thr > 0
            limit = failing_total_array(thr, self.safe_alloc)
            check_expired = active.any(axis=0) & self.found
            check_usage = check_expired & self.has_nm
            # Rows whose usage is not checked get NEVER too, so Filter needs no mask for them.
            self.room[v][...] = np.where(active & has_alloc & check_usage, limit - existing, NEVER)
            self.agg_reason[v] = is_agg
            self.free[v][...] = np.where(has_alloc, alloc - self._score_existing(v), -1)
            self.expire_check[v] = np.where(check_expired, expire_at, np.inf)
            self._min_expire_check[v] = float(self.expire_check[v].min()) if self.n else np.inf
        self.expire_valid = np.where(self.valid, expire_at, np.inf)
        self._min_expire_valid = float(self.expire_valid.min()) if self.n else np.inf

    def derive_row(self, row: int) -> None:
        """:meth:`derive` for one row, in plain Python (cheap for the few rows a cycle refreshes)."""
        args = self.args
        thr_usage, thr_prod, thr_agg, has_prod, is_agg, alloc = self._node_py[row]
        found, has_nm, ut, ex_node, ex_prod, ex_fagg, ex_sagg = self._cache_py[row]
        expire = -np.inf if ut is None else ut + args.node_metric_expiration_seconds
        valid = found and has_nm
        safe_alloc = [a if a > 0 else 1 for a in alloc]
        score_prod = args.score_according_prod_usage
        per_kind = []
        for v in (0, 1):
            if v == 1 and not has_prod and not score_prod:
                room, active, free = per_kind[0]  # a prod pod is held and scored like any other here
            else:
                prod_mode = has_prod and v == 1
                if prod_mode:
                    thr, existing = thr_prod, ex_prod
                elif is_agg:
                    thr, existing = thr_agg, ex_fagg
                else:
                    thr, existing = thr_usage, ex_node
                active = any(t > 0 for t in thr)
                if active and found and has_nm:
                    room = [failing_total(t, a) - e if t > 0 and a > 0 else NEVER
                            for t, a, e in zip(thr, alloc, existing)]
                else:
                    room = [NEVER] * len(thr)
                score_existing = (ex_prod if v == 1 and score_prod else
                                  ex_sagg if args.aggregated.score_enabled else ex_node)
                free = [a - e if a > 0 else -1 for a, e in zip(alloc, score_existing)]
            per_kind.append((room, active, free))
        self._counts[:, row] = per_kind[0][0] + per_kind[1][0] + per_kind[0][2] + per_kind[1][2]
        agg = (is_agg, is_agg and not has_prod)
        checked = (per_kind[0][1] and found, per_kind[1][1] and found)
        flags = (expire, valid, safe_alloc, agg, checked)
        if flags != self._flags_py[row]:
            self._flags_py[row] = flags
            self.valid[row] = valid
            self.expire_valid[row] = expire if valid else np.inf
            self.safe_alloc[:, row] = safe_alloc
            for v in (0, 1):
                self.agg_reason[v][row] = agg[v]
                self.expire_check[v][row] = expire if checked[v] else np.inf
        # (the bounds only go down here; expired_for_* raise them to the truth when reached)
        if valid:
            self._min_expire_valid = min(self._min_expire_valid, expire)
        for v in (0, 1):
            if checked[v]:
                self._min_expire_check[v] = min(self._min_expire_check[v], expire)
        dom = args.dominant_resource_weight
        for (kind, v, estimate), values in self._memo.items():
            room, _, free = per_kind[v]
            if kind == _FAILURE:
                first = next((r for r, (rm, e) in enumerate(zip(room, estimate)) if rm <= e), -1)
                values[row] = -1 if first < 0 else 2 * first + agg[v]
            else:
                values[row] = least_used_score(free, safe_alloc, estimate, self.weights, dom) if valid else 0

    def is_all(self, idx: np.ndarray) -> bool:
        return len(idx) == self.n and (self.n == 0 or bool((idx == self._arange).all()))

    def memo(self, kind: str, v: int, estimate: tuple[int, ...]) -> np.ndarray:
        """Filter's failure codes (``"failure"``, see :func:`_failure_codes`) or Score's scores before
        expiry (``"score"``) on every row, for one class of pod (prod or not, its estimate); callers
        must not modify the array.

        Pods of one workload share their class, and between two cycles only the rows derive_row
        refreshes change (the node the previous pod went to): it updates them here too.
        """
        key = (kind, v, estimate)
        values = self._memo.get(key)
        if values is None:
            if len(self._memo) >= MEMO_CLASSES:
                self._memo.popitem(last=False)
            values = self._memo[key] = (_failure_codes if kind == _FAILURE else _scores)(self, v, estimate)
        else:
            self._memo.move_to_end(key)
        return values

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


def filter_rows(rows: NodeRows, idx: np.ndarray, pod: PodContext, now: float) -> tuple[np.ndarray, list]:
    """(passed, [(code, reason, mask)]) for ``rows`` at ``idx`` (reference §2.1.5)."""
    k = len(idx)
    if pod.daemonset or k == 0:
        return np.ones(k, dtype=bool), []
    args = rows.args
    full = rows.is_all(idx)
    v = 1 if pod.prod else 0
    codes = rows.memo(_FAILURE, v, tuple(pod.estimate or [0] * rows.width))
    codes = codes if full else codes[idx]
    failures: list = []
    passed = None
    expired = rows.expired_for_filter(v, now) if args.filter_expired_node_metrics else None
    if expired is not None:
        expired = expired if full else expired[idx]
        if expired.any():
            if not args.enable_schedule_when_node_metrics_expired:
                passed = ~expired
                failures.append((UNSCHEDULABLE, REASON_EXPIRED, expired))
            codes = np.where(expired, -1, codes)  # their usage is not checked
    failing = codes >= 0
    if not failing.any():
        return (np.ones(k, dtype=bool) if passed is None else passed), failures
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
    scores = rows.memo(_SCORE, 1 if pod.prod else 0, tuple(pod.estimate))
    total = scores.copy() if full else scores[idx]
    expired = rows.expired_for_score(now)
    if expired is not None:
        total[expired if full else expired[idx]] = 0
    return total
