"""Reservation: schedule Reservations as reserve pods and let their owner pods use the reserved room (§2.3).

Ordinary pods pay nothing while no Reservation is Available: BeforePreFilter returns at once and
PreFilter/PreScore Skip. A pod that matches reservations (owners, affinity, exact-match) gets, for
this cycle only, snapshot rows of those nodes with the reserve pods taken out (the rows are
refreshed from the scheduler cache next cycle), so NodeResourcesFit sees the reserved room as free;
this plugin's Filter then checks that one reservation's room (Aligned/Restricted) is enough, Score
prefers nodes with a suitable reservation, Reserve assigns the pod to the nominated reservation and
PreBind writes ``reservation-allocated`` on it. Reserve pods are bound by :meth:`Reservation.bind`
(the Reservation's status), never by DefaultBinder.

Preemption: RemovePod/AddPod keep Koordinator's "preemptible" accounting for any dry run (an evicted
owner's room goes back to its reservation, usable only by pods that match it), and with
``enablePreemption`` PostFilter evicts lower-priority owners inside the matched reservations
(``preemption.py``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from koordinator.apis import quantity
from koordinator.apis import reservation as rv
from koordinator.apis.timestamps import now_rfc3339
from koordinator.runtime.errors import ApiError, Conflict, NotFound
from koordinator_roles.scheduler.framework import interfaces as fi
from koordinator_roles.scheduler.framework.status import (SKIP, SUCCESS, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                          CycleState, Status)
from koordinator_roles.scheduler.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.helper.reservationstate import STATE_KEY
from koordinator_roles.scheduler.plugins.reservation.args import ReservationArgs, parse_args
from koordinator_roles.scheduler.plugins.reservation.cache import ReservationCache, ReservationInfo
from koordinator_roles.scheduler.plugins.reservation.reservepods import ReservePodSource

log = logging.getLogger("koordinator.scheduler.reservation")

NAME = "Reservation"

MSG_AFFINITY = "node(s) no reservations match reservation affinity"
MSG_NODE_NAME = "node(s) didn't match the nodeName specified by reservation"
MSG_POLICY_CONFLICT = "node(s) reservation allocate policy conflict"
MSG_NONE_FITS = "node(s) no reservation(s) to meet the requirements"
MSG_NOT_ACTIVE = "reservation is not active"
PREFERRED_SCORE = 1000


@dataclass
class _State:
    """What BeforePreFilter found for the pod, shared by the later extension points of the cycle."""

    reserve_pod: bool = False
    reservation_name: str = ""        # reserve pods: the Reservation they stand for
    has_affinity: bool = False
    affinity_name: str = ""
    ignored: bool = False
    requests: dict[str, int] = field(default_factory=dict)
    # node -> reservations the pod may use there / reservations with owners it may not use
    matched: dict[str, list[ReservationInfo]] = field(default_factory=dict)
    unmatched: dict[str, list[ReservationInfo]] = field(default_factory=dict)
    # node -> reservation uid -> the room put back into this cycle's NodeInfo for the pod
    restored: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    nominated: dict[str, ReservationInfo | None] = field(default_factory=dict)
    preferred_node: str = ""
    assumed: ReservationInfo | None = None
    # Preemption's dry runs (RemovePod/AddPod): node -> reservation uid -> requests / number of the owner
    # pods taken out of it (Koordinator's ``preemptibleInRRs``); their room goes back to that reservation.
    preemptible: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)
    preemptible_pods: dict[str, dict[str, int]] = field(default_factory=dict)

    def clone(self) -> "_State":
        out = _State(**self.__dict__)
        out.nominated = dict(self.nominated)
        out.preemptible = {n: {u: dict(r) for u, r in by_r.items()} for n, by_r in self.preemptible.items()}
        out.preemptible_pods = {n: dict(c) for n, c in self.preemptible_pods.items()}
        return out

    def preempted(self, node_name: str, uid: str) -> dict[str, int]:
        """Requests of the owner pods the dry run took out of reservation ``uid`` on the node."""
        return (self.preemptible.get(node_name) or {}).get(uid) or {}


def _display(name: str, milli: int) -> int:
    # Koordinator prints cpu in milli-cores and everything else in whole units.
    return milli if name == CPU else -(-milli // 1000)


class Reservation(fi.PreFilterTransformer, fi.PreFilterPlugin, fi.PreFilterExtensions, fi.FilterPlugin,
                  fi.PostFilterPlugin, fi.PreScorePlugin, fi.ScorePlugin, fi.ReservePlugin, fi.PreBindPlugin,
                  fi.BindPlugin, fi.ReservationNominator, fi.ReservationScorePlugin, fi.ControllerProvider):
    """Koordinator's Reservation plugin (reference §2.3)."""

    name = NAME

    def __init__(self, args: dict | None, handle: Any) -> None:
        self.handle = handle
        self.args: ReservationArgs = parse_args(args)
        self.cache = ReservationCache()
        self.reservation_informer: Any = None
        self.reserve_pods: ReservePodSource | None = None
        self._restore_plugins: list[Any] | None = None
        self._controllers: list[Any] = []
        self._preemption: Any = None
        if self.args.enable_preemption:
            from koordinator_roles.scheduler.plugins.reservation.preemption import ReservationPreemption

            self._preemption = ReservationPreemption(self, handle)
        # Snapshot rows this plugin rewrote in the last cycle: (node, original NodeInfo, the rewritten one).
        self._rewritten: list[tuple[str, NodeInfo, NodeInfo]] = []
        informers = getattr(handle, "informers", None)
        if informers is not None:
            self.reservation_informer = informers.informer("Reservation")
            self.reservation_informer.add_handler(self.cache.add_reservation, self.cache.update_reservation,
                                                  self.cache.delete_reservation)
            self.pod_informer = informers.informer("Pod")
            self.pod_informer.add_handler(self.cache.add_pod, self.cache.update_pod, self.cache.delete_pod)
            self.node_informer = informers.informer("Node")
            self.reserve_pods = ReservePodSource(self.reservation_informer, self.cache.allocated_of)
            self.cache.on_allocated_change = self.reserve_pods.refresh

    # -- helpers ---------------------------------------------------------------------------------------

    def _restorers(self) -> list[Any]:
        if self._restore_plugins is None:
            fwk = getattr(self.handle, "framework", None)
            plugins = getattr(fwk, "plugins", {}) or {}
            self._restore_plugins = [p for p in plugins.values()
                                     if p is not self and isinstance(p, fi.ReservationRestorePlugin)]
        return self._restore_plugins

    def _other_plugins(self, kind: type) -> list[Any]:
        fwk = getattr(self.handle, "framework", None)
        plugins = getattr(fwk, "plugins", {}) or {}
        return [p for p in plugins.values() if p is not self and isinstance(p, kind)]

    # -- BeforePreFilter: matching and restoring --------------------------------------------------------

    def _put_back_rows(self) -> None:
        """Rows still as the last cycle rewrote them (no scheduler cache refreshed them) get their originals."""
        snapshot = self.handle.snapshot()
        for name, original, rewritten in self._rewritten:
            if snapshot.get(name) is rewritten:
                snapshot.update_node(original)
        self._rewritten = []

    def before_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PodInfo | None, Status | None]:
        if self._rewritten:
            self._put_back_rows()
        obj = pod.pod
        if rv.is_reserve_pod(obj):
            state.write(STATE_KEY, _State(reserve_pod=True, reservation_name=rv.reservation_name_of(obj)))
            return None, None
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if (rv.ANNOTATION_RESERVATION_AFFINITY not in annotations and not self.cache.has_matchable()):
            return None, None  # the common case: nothing to match, no state, PreFilter skips
        try:
            affinity = rv.parse_reservation_affinity(obj)
            exact = rv.parse_exact_match(obj)
        except rv.ReservationError as e:
            return None, Status(UNSCHEDULABLE_AND_UNRESOLVABLE, str(e))
        st = _State(has_affinity=affinity is not None, affinity_name=affinity.name if affinity else "",
                    ignored=rv.is_reservation_ignored(obj), requests=dict(pod.requests))
        match_affinity = affinity or rv.ReservationAffinity()
        restorers = self._restorers()
        for plugin in restorers:
            status = plugin.pre_restore_reservation(state, pod)
            if status is not None and status.code != SUCCESS:
                return None, status
        try:
            status = self._match_and_restore(state, pod, st, match_affinity, exact, restorers)
        finally:
            if self._rewritten and self.reserve_pods is not None:
                # This cycle's rows differ from the cache: the next cycle takes fresh copies of these nodes.
                self.reserve_pods.mark_dirty([name for name, _, _ in self._rewritten])
        if status is not None:
            return None, status
        state.write(STATE_KEY, st)
        return None, None

    def _match_and_restore(self, state: CycleState, pod: PodInfo, st: _State, affinity: rv.ReservationAffinity,
                           exact: list[str], restorers: list[Any]) -> Status | None:
        """Sort each node's matchable reservations into matched/unmatched for the pod; on nodes with matched
        ones, take their reserve pods out of this cycle's NodeInfo (their room becomes free for the pod)."""
        obj = pod.pod
        snapshot = self.handle.snapshot()
        for node_name, infos in self.cache.matchable_by_node().items():
            ni = snapshot.get(node_name)
            if ni is None:
                continue
            matched: list[ReservationInfo] = []
            unmatched: list[ReservationInfo] = []
            for info in infos:
                if st.ignored or (info.owners is not None and info.owners.matches(obj)
                                  and affinity.matches(info.obj, ni.labels)
                                  and rv.exact_match_ok(exact, st.requests, info.allocatable)):
                    matched.append(info)
                elif info.assigned:
                    unmatched.append(info)
            if not matched:
                if unmatched:
                    st.unmatched[node_name] = unmatched
                continue
            if restorers:
                # Consumed (allocateOnce) reservations are not matchable but still hold owners' resources.
                seen = {i.uid for i in infos}
                unmatched += [i for i in self.cache.on_node(node_name) if i.uid not in seen and i.assigned]
            st.matched[node_name] = matched
            st.unmatched[node_name] = unmatched
            clone = ni.clone()
            restored: dict[str, dict[str, int]] = {}
            for info in matched:
                reserve_pod = clone.remove_pod(info.uid)
                restored[info.uid] = dict(reserve_pod.requests) if reserve_pod is not None else {}
            st.restored[node_name] = restored
            for plugin in restorers:
                _, status = plugin.restore_reservation(state, pod, matched, unmatched, clone)
                if status is not None and status.code != SUCCESS:
                    return status.with_plugin(plugin.name)
            snapshot.update_node(clone)
            self._rewritten.append((node_name, ni, clone))
        return None

    # -- PreFilter -----------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Any) -> tuple[fi.PreFilterResult | None, Status | None]:
        st: _State | None = state.read(STATE_KEY)
        if st is None:
            return None, Status.skip()
        if st.reserve_pod:
            return None, self._check_reservation(st.reservation_name)
        if st.has_affinity:
            if not st.matched:
                return None, Status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_AFFINITY)
            return fi.PreFilterResult(set(st.matched)), None
        if not st.matched and not st.unmatched:
            return None, Status.skip()
        return None, None

    # -- PreFilter extensions: preemption's dry runs -------------------------------------------------------

    def pre_filter_extensions(self) -> fi.PreFilterExtensions:
        return self

    def _dry_run_change(self, state: CycleState, other: PodInfo, node: NodeInfo, sign: int) -> None:
        """An owner pod taken out of (sign +1) or put back into (-1) its reservation by a dry run."""
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.reserve_pod:
            return
        uid = self.cache.reservation_of_pod(other.uid)
        info = self.cache.get(uid) if uid else None
        if info is None or info.node_name != node.name:
            return
        acc = st.preemptible.setdefault(node.name, {}).setdefault(uid, {})
        for name, v in other.requests.items():
            acc[name] = acc.get(name, 0) + sign * v
        counts = st.preemptible_pods.setdefault(node.name, {})
        counts[uid] = counts.get(uid, 0) + sign

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status | None:
        self._dry_run_change(state, to_remove, node, +1)
        return None

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        self._dry_run_change(state, to_add, node, -1)
        return None

    # -- PostFilter: reservation-aware preemption ----------------------------------------------------------

    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: Any) -> tuple[fi.PostFilterResult | None, Status | None]:
        st: _State | None = state.read(STATE_KEY)
        if self._preemption is None or st is None or st.reserve_pod or st.ignored or not st.matched:
            return None, Status(UNSCHEDULABLE)  # nothing in a reservation to preempt for this pod
        return self._preemption.preempt_in_reservations(state, pod, st, statuses)

    def _check_reservation(self, name: str) -> Status | None:
        store = getattr(self.reservation_informer, "store", None)
        r = store.get(name) if store is not None else None
        if r is None:
            info = self.cache.get_by_name(name)
            r = info.obj if info is not None else None
        if r is None:
            return Status.error(f"reservation {name!r} not found")
        try:
            rv.validate(r)
        except rv.ReservationError as e:
            return Status.error(f"reservation {name!r} is invalid: {e}")
        return None

    # -- Filter ----------------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        st: _State | None = state.read(STATE_KEY)
        if st is None:
            return None
        if st.reserve_pod:
            return self._filter_reserve_pod(pod, node.name)
        return self._filter_node(st, pod, node, state)

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> fi.BatchFilterResult:
        st: _State | None = state.read(STATE_KEY)
        if st is None:
            return fi.BatchFilterResult.all_pass(len(rows))
        if st.reserve_pod:
            pinned = ((pod.pod.get("metadata") or {}).get("annotations") or {}).get(rv.ANNOTATION_RESERVATION_NODE)
            # Only nodes holding reservations can conflict; the pinned node is one comparison over the rows.
            result = self._per_node(rows, snapshot, self.cache.available_nodes(),
                                    lambda ni: self._filter_reserve_pod(pod, ni.name, check_node=False))
            if pinned:
                other = rows != snapshot.index.get(pinned, -1)
                if other.any():
                    result = fi.BatchFilterResult(result.passed & ~other, [
                        *result.failures, fi.Failure(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_NODE_NAME, other)])
            return result
        if not st.matched and not st.has_affinity:
            return fi.BatchFilterResult.all_pass(len(rows))
        names = None if st.has_affinity else set(st.matched)
        return self._per_node(rows, snapshot, names, lambda ni: self._filter_node(st, pod, ni, state))

    @staticmethod
    def _per_node(rows: np.ndarray, snapshot: Any, names: set[str] | None, check: Any) -> fi.BatchFilterResult:
        """Run ``check`` on the rows of ``names`` (every row when None); the others pass."""
        if names is None:
            targets = list(range(len(rows)))
        else:
            wanted = np.array(sorted(snapshot.index[n] for n in names if n in snapshot.index), dtype=np.int64)
            targets = np.flatnonzero(np.isin(rows, wanted)).tolist() if len(wanted) else []
        if not targets:
            return fi.BatchFilterResult.all_pass(len(rows))
        passed = np.ones(len(rows), dtype=bool)
        groups: dict[tuple[int, str], list[int]] = {}
        infos = snapshot.node_infos
        for i in targets:
            status = check(infos[int(rows[i])])
            if status is not None and status.code != SUCCESS:
                passed[i] = False
                for reason in status.reasons or [""]:
                    groups.setdefault((status.code, reason), []).append(i)
        failures = []
        for (code, reason), idx in groups.items():
            mask = np.zeros(len(rows), dtype=bool)
            mask[idx] = True
            failures.append(fi.Failure(code, reason, mask))
        return fi.BatchFilterResult(passed, failures)

    def _filter_reserve_pod(self, pod: PodInfo, node_name: str, check_node: bool = True) -> Status | None:
        annotations = (pod.pod.get("metadata") or {}).get("annotations") or {}
        pinned = annotations.get(rv.ANNOTATION_RESERVATION_NODE)
        if check_node and pinned and pinned != node_name:
            return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_NODE_NAME)
        info = self.cache.get_by_name(rv.reservation_name_of(pod.pod))
        policy = info.policy if info is not None else rv.POLICY_DEFAULT
        for other in self.cache.on_node(node_name):
            if (policy == rv.POLICY_DEFAULT) != (other.policy == rv.POLICY_DEFAULT):
                return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_POLICY_CONFLICT)
        return None

    def _fits_node(self, st: _State, node: NodeInfo, room: dict[str, int], tried: str = "") -> list[str]:
        """Node fit counting ``room`` (reservation ``tried``'s restored amount) as free, the other matched
        reservations' room as used (``fitsNode``). Owner pods a preemption dry run took out of reservations
        other than ``tried`` free room only inside those reservations: it stays used for this pod."""
        reasons: list[str] = []
        if len(node.pods) + 1 > node.allowed_pods:
            reasons.append("Too many pods")
        restored = st.restored.get(node.name) or {}
        preempted = [amounts for uid, amounts in (st.preemptible.get(node.name) or {}).items() if uid != tried]
        for name, request in st.requests.items():
            if request <= 0 or name == "pods" or (name not in (CPU, MEMORY, EPHEMERAL_STORAGE)
                                                   and self.args.ignores(name)):
                continue
            used = node.requested.get(name, 0) - room.get(name, 0)
            for amounts in restored.values():
                used += amounts.get(name, 0)
            for amounts in preempted:
                used += amounts.get(name, 0)
            if request > node.allocatable.get(name, 0) - used:
                reasons.append(f"Insufficient {name}")
        return reasons

    def _fits_reservation(self, st: _State, info: ReservationInfo, detailed: bool) -> list[str]:
        """Restricted policy: the pod's restricted requests within the reservation's room (``fitsReservation``);
        owners a preemption dry run took out (``preemptibleInRR``) do not count as used."""
        reasons: list[str] = []
        preempted = st.preempted(info.node_name, info.uid)
        allocated = {k: v - preempted.get(k, 0) for k, v in info.allocated.items()}
        for name in rv.restricted_resources(info.obj, info.allocatable):
            request = st.requests.get(name, 0)
            if request <= 0 or self.args.ignores(name):
                continue
            capacity = info.allocatable.get(name, 0) - info.reserved.get(name, 0)
            used = max(0, allocated.get(name, 0))
            if request > capacity - used:
                if detailed:
                    reasons.append(f"Reservation(s) Insufficient {name}, requested: {_display(name, request)}, "
                                   f"used: {_display(name, used)}, capacity: {_display(name, capacity)}")
                else:
                    reasons.append(f"Reservation(s) Insufficient {name}")
        pods = info.allocatable.get("pods", 0) // 1000
        assigned = len(info.assigned) - (st.preemptible_pods.get(info.node_name) or {}).get(info.uid, 0)
        if pods and assigned + 1 > pods:
            reasons.append("Reservation(s) Too many pods")
        return reasons

    def _reservation_reasons(self, state: CycleState | None, st: _State, pod: PodInfo, node: NodeInfo,
                             info: ReservationInfo) -> tuple[list[str], list[str]]:
        """(node reasons, reservation reasons) why ``info`` cannot take the pod on ``node``; both empty: it can."""
        room = (st.restored.get(node.name) or {}).get(info.uid, {})
        node_reasons = self._fits_node(st, node, room, info.uid)
        if node_reasons:
            return node_reasons, []
        if info.policy == rv.POLICY_RESTRICTED:
            reasons = self._fits_reservation(st, info, detailed=bool(st.affinity_name))
            if reasons:
                return [], reasons
        if state is not None:
            for plugin in self._other_plugins(fi.ReservationFilterPlugin):
                status = plugin.filter_reservation(state, pod, info, node.name)
                if status is not None and status.code != SUCCESS:
                    return [], status.reasons or [f"rejected by {plugin.name}"]
        return [], []

    def _candidates(self, st: _State, node_name: str) -> list[ReservationInfo]:
        matched = st.matched.get(node_name) or []
        if st.affinity_name:
            return [r for r in matched if r.name == st.affinity_name]
        if st.has_affinity:
            return matched
        # Reservations sharing no resource with the pod cannot help it.
        return [r for r in matched if any(st.requests.get(k, 0) > 0 for k in r.allocatable)]

    def _filter_node(self, st: _State, pod: PodInfo, node: NodeInfo, state: CycleState | None = None) -> Status | None:
        if node.name not in st.matched:
            if st.has_affinity:
                return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_AFFINITY)
            if st.preemptible.get(node.name):
                # A dry run took owners out of reservations the pod cannot use: their room is not free for it.
                reasons = self._fits_node(st, node, {})
                return Status(UNSCHEDULABLE, *reasons) if reasons else None
            return None
        if st.ignored:
            return None
        node_reasons: list[str] = []
        reasons: list[str] = []
        for info in self._candidates(st, node.name):
            by_node, by_reservation = self._reservation_reasons(state, st, pod, node, info)
            if not by_node and not by_reservation:
                return None
            node_reasons = node_reasons or by_node
            reasons += [r for r in by_reservation if r not in reasons]
        if st.has_affinity:
            out = [f"{r} by node" for r in node_reasons] + reasons
            return Status(UNSCHEDULABLE, *(out or [MSG_NONE_FITS]))
        if node_reasons:
            return Status(UNSCHEDULABLE, *node_reasons)
        alone = self._fits_node(st, node, {})
        if alone:
            return Status(UNSCHEDULABLE, *alone)
        return None  # no reservation fits, but the node's free room does

    # -- PreScore / Score / nomination -----------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.reserve_pod or st.ignored or not st.matched:
            return Status.skip()
        names = sorted(n for n in st.matched if n in snapshot.index)
        present = np.isin(np.array([snapshot.index[n] for n in names], dtype=np.int64), rows)
        best_order, preferred = 0, ""
        for node_name, feasible in zip(names, present.tolist()):
            if not feasible:
                continue
            self.nominate_reservation(state, pod, node_name)
            for r in st.matched[node_name]:
                if r.order and (best_order == 0 or r.order < best_order):
                    best_order, preferred = r.order, node_name
        st.preferred_node = preferred
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.reserve_pod:
            return 0
        if st.preferred_node and node.name == st.preferred_node:
            return PREFERRED_SCORE
        info = st.nominated.get(node.name)
        return self.score_reservation(state, pod, info, node.name) if info is not None else 0

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(rows), dtype=np.int64)
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.reserve_pod or not st.matched:
            return scores
        wanted = {snapshot.index[n]: n for n in st.matched if n in snapshot.index}
        for i, row in enumerate(rows.tolist()):
            if row in wanted:
                scores[i] = self.score(state, pod, snapshot.node_infos[row])
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray,
                        scores: np.ndarray) -> Status | None:
        top = int(scores.max()) if len(scores) else 0
        if top > 0:
            scores[:] = scores * fi.MAX_NODE_SCORE // top
        return None

    def score_reservation(self, state: CycleState, pod: PodInfo, reservation: Any, node_name: str) -> int:
        """MostAllocated over the reservation: fuller reservations first (0..100)."""
        info: ReservationInfo = reservation
        allocated = info.allocated
        st: _State | None = state.read(STATE_KEY) if state is not None else None
        preempted = st.preempted(info.node_name, info.uid) if st is not None else {}
        if preempted:
            allocated = {k: v - preempted.get(k, 0) for k, v in allocated.items()}
        total, count = 0, 0
        for name, capacity in info.allocatable.items():
            if capacity <= 0:
                continue
            count += 1
            requested = pod.requests.get(name, 0) + allocated.get(name, 0)
            if requested <= capacity:
                total += requested * fi.MAX_NODE_SCORE // capacity
        return total // count if count else 0

    def nominate_reservation(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Any, Status | None]:
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.reserve_pod or st.ignored:
            return None, None
        if node_name in st.nominated:
            return st.nominated[node_name], None
        node = self.handle.snapshot().get(node_name)
        candidates = self._candidates(st, node_name) if node is not None else []
        fitting = [r for r in candidates if self._reservation_reasons(state, st, pod, node, r) == ([], [])]
        chosen: ReservationInfo | None = None
        if len(fitting) == 1:
            chosen = fitting[0]
        elif fitting:
            ordered = [r for r in fitting if r.order]
            if ordered:
                chosen = min(ordered, key=lambda r: r.order)
            else:
                scorers = [self, *self._other_plugins(fi.ReservationScorePlugin)]
                best = -1
                for r in sorted(fitting, key=lambda r: r.name):
                    total = sum(p.score_reservation(state, pod, r, node_name) for p in scorers)
                    if total > best:
                        chosen, best = r, total
        st.nominated[node_name] = chosen
        return chosen, None

    # -- Reserve / Unreserve -----------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.reserve_pod or st.ignored:
            return None
        info, _ = self.nominate_reservation(state, pod, node_name)
        if info is None:
            return Status(UNSCHEDULABLE, MSG_AFFINITY) if st.has_affinity else None
        self.cache.assume_pod(info.uid, pod.uid, pod.key, dict(pod.requests))
        st.assumed = info
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.assumed is None:
            return
        self.cache.forget_pod(st.assumed.uid, pod.uid)
        self._remove_allocated_annotation(pod, st.assumed.uid)
        st.assumed = None

    def _remove_allocated_annotation(self, pod: PodInfo, uid: str) -> None:
        """A failed binding may leave the annotation patched on a pod that stays unbound: take it off again."""
        store = getattr(getattr(self, "pod_informer", None), "store", None)
        current = store.get(pod.key) if store is not None else None
        if current is None or (current.get("spec") or {}).get("nodeName") \
                or (rv.allocated_reservation(current) or ("", ""))[1] != uid:
            return
        patch = {"metadata": {"annotations": {rv.ANNOTATION_RESERVATION_ALLOCATED: None}}}
        try:
            self.handle.client.patch("Pod", pod.name, patch, namespace=pod.namespace, patch_type="merge")
        except ApiError as e:
            log.warning("removing reservation-allocated failed pod=%s err=%s", pod.key, e)

    # -- PreBind / Bind --------------------------------------------------------------------------------

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, modified: dict) -> Status | None:
        st: _State | None = state.read(STATE_KEY)
        if st is None or st.reserve_pod:
            return None
        if st.assumed is None:
            return Status(UNSCHEDULABLE, MSG_AFFINITY) if st.has_affinity and not st.ignored else None
        modified["metadata"]["annotations"][rv.ANNOTATION_RESERVATION_ALLOCATED] = rv.allocated_annotation(
            st.assumed.name, st.assumed.uid)
        return None

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        if not rv.is_reserve_pod(pod.pod):
            return Status(SKIP)
        name = rv.reservation_name_of(pod.pod)
        client = self.handle.client
        for _ in range(5):
            try:
                r = client.get(rv.KIND, name)
            except NotFound:
                return Status.error(f"reservation {name!r} not found")
            except ApiError as e:
                return Status.error(f"getting reservation {name!r}: {e}")
            if rv.phase(r) == rv.PHASE_FAILED:
                return Status.error(MSG_NOT_ACTIVE)
            status = r.get("status") or {}
            now = now_rfc3339()
            conditions = rv.with_condition(status.get("conditions"), rv.CONDITION_SCHEDULED, "True",
                                           rv.REASON_SCHEDULED, "Reservation is scheduled", now)
            conditions = rv.with_condition(conditions, rv.CONDITION_READY, "True", rv.REASON_AVAILABLE,
                                           "Reservation is available", now)
            new = {**r, "status": {**status, "nodeName": node_name, "phase": rv.PHASE_AVAILABLE,
                                   "allocatable": _allocatable_after_bind(r), "conditions": conditions}}
            try:
                client.update_status(new)
            except Conflict:
                continue
            except ApiError as e:
                return Status.error(f"updating reservation {name!r}: {e}")
            recorder = getattr(self.handle, "event_recorder", None)
            if recorder is not None:
                recorder.event(r, "Normal", "Scheduled", f"Successfully assigned reservation {name} to {node_name}")
            return None
        return Status.error(f"updating reservation {name!r}: too many conflicts")

    # -- failures of reserve pods (called by the scheduler instead of a pod status patch) ---------------------

    def report_scheduling_failure(self, pod: dict, reason: str, message: str) -> bool:
        """Write ``Scheduled=False`` with the message on the Reservation of a reserve pod; False for other pods."""
        if not rv.is_reserve_pod(pod):
            return False
        name = rv.reservation_name_of(pod)
        client = self.handle.client
        try:
            r = client.get(rv.KIND, name)
        except ApiError:
            return True
        if rv.phase(r) != rv.PHASE_PENDING:
            return True
        old = rv.condition(r, rv.CONDITION_SCHEDULED)
        if old is not None and old.get("status") == "False" and old.get("reason") == reason \
                and old.get("message") == message:
            return True
        status = r.get("status") or {}
        conditions = rv.with_condition(status.get("conditions"), rv.CONDITION_SCHEDULED, "False", reason, message,
                                       now_rfc3339())
        try:
            client.patch(rv.KIND, name, {"status": {"conditions": conditions}}, patch_type="merge",
                         subresource="status")
        except ApiError as e:
            log.warning("updating reservation status failed reservation=%s err=%s", name, e)
        recorder = getattr(self.handle, "event_recorder", None)
        if recorder is not None:
            recorder.event(r, "Warning", "FailedScheduling", message)
        return True

    # -- controller ------------------------------------------------------------------------------------------

    def new_controllers(self) -> list[Any]:
        from koordinator_roles.scheduler.plugins.reservation.controller import ReservationController

        if self.reservation_informer is None:
            return []
        if not self._controllers:
            self._controllers = [ReservationController(self)]
        return self._controllers


def _allocatable_after_bind(r: dict) -> dict:
    """Template requests as quantities, or the ``reservation-resize-allocatable`` annotation's resources."""
    raw = ((r.get("metadata") or {}).get("annotations") or {}).get(rv.ANNOTATION_RESERVATION_RESIZE_ALLOCATABLE)
    if raw:
        try:
            data = json.loads(raw)
            if isinstance(data, dict) and isinstance(data.get("resources"), dict):
                return dict(data["resources"])
        except ValueError:
            pass
    total: dict[str, int] = rv.template_requests(r)
    return {k: quantity.format_quantity(Fraction(v, 1000), _quantity_format(k)) for k, v in sorted(total.items())}


def _quantity_format(name: str) -> str:
    """Byte amounts print as the API server prints them (``4Gi``), others in decimal SI (``500m``)."""
    binary = name in ("memory", "ephemeral-storage") or name.startswith("hugepages-") or name.endswith("memory")
    return quantity.BINARY_SI if binary else quantity.DECIMAL_SI


def new(args: dict | None, handle: Any) -> Reservation:
    """Registry factory."""
    return Reservation(args, handle)
