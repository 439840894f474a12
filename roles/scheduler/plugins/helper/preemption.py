"""Preemption: kube-scheduler's DefaultPreemption evaluator, shared by the plugins that preempt.

The DefaultPreemption plugin (``plugins/defaultpreemption.py``) is this evaluator; ElasticQuota reuses it with
narrower victim rules through the ``can_preempt``/``fits`` hooks.

The module has two halves. The algorithm (eligibility, victim selection on one node, the dry
run over candidate nodes, picking one node, the failure message) only reads NodeInfos and calls
the profile's :class:`~koordinator_roles.scheduler.framework.interfaces.FrameworkHandle`; it is testable on
in-memory snapshots. :class:`DefaultPreemption` adds the API side: PodDisruptionBudgets from the
informer, deleting victims, events and clearing other pods' nominations.

Deviation from kube 1.35: preemption is synchronous (kube defaults to async preemption with a
PreEnqueue gate on the preemptor); victims are deleted before PostFilter returns.
"""

from __future__ import annotations

import logging
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping, Sequence

from koordinator.apis.selectors import SelectorError, label_selector_from_dict
from koordinator.apis.timestamps import now_rfc3339, parse_time
from koordinator.runtime.errors import NotFound
from koordinator_roles.scheduler.framework.interfaces import (FrameworkHandle, NodeStatusReader, PostFilterPlugin,
                                                              PostFilterResult)
from koordinator_roles.scheduler.framework.status import (ERROR, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState,
                                                          Status, is_success)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo

log = logging.getLogger(__name__)

NAME = "DefaultPreemption"

MSG_NO_VICTIMS = "No preemption victims found for incoming pod"
MSG_NOT_HELPFUL = "Preemption is not helpful for scheduling"
MSG_POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
MSG_TERMINATING = "not eligible due to a terminating pod on the nominated node."
DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

# kube shifts every priority by MaxInt32+1 before summing so that more negative-priority victims
# never look cheaper than fewer of them.
_PRIORITY_SHIFT = 2 ** 31
_INT64_MIN = -(2 ** 63)


# -- small helpers on pod dicts ----------------------------------------------------------------------

def pod_start_time(pod: Mapping[str, Any], now: float) -> float:
    """``status.startTime`` in seconds; pods not started yet (assumed, just bound) count as started ``now``."""
    started = parse_time((pod.get("status") or {}).get("startTime"))
    return now if started is None else started


def importance_key(pi: PodInfo, now: float) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then longer running (kube's MoreImportantPod)."""
    return (-pi.priority, pod_start_time(pi.pod, now))


def terminating_by_preemption(pod: Mapping[str, Any]) -> bool:
    """Being deleted because a scheduler preempted it (DisruptionTarget condition by the scheduler)."""
    if not (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == DISRUPTION_TARGET:
            return cond.get("status") == "True" and cond.get("reason") == REASON_PREEMPTION_BY_SCHEDULER
    return False


def preemption_allowed(victim: PodInfo, preemptor: PodInfo) -> bool:
    return victim.priority < preemptor.priority


# -- eligibility ---------------------------------------------------------------------------------

def pod_eligible_to_preempt_others(pod: PodInfo, nominated_node: NodeInfo | None,
                                   nominated_node_status: Status | None,
                                   can_preempt: Callable[[PodInfo, PodInfo], bool] = preemption_allowed
                                   ) -> tuple[bool, str]:
    """Whether ``pod`` may preempt, and why not.

    A pod that already preempted (it is nominated to a node where a lower-priority victim is still
    terminating) waits for that instead of evicting more, unless the nominated node has become
    unresolvable for it.
    """
    if pod.spec.get("preemptionPolicy") == "Never":
        return False, MSG_POLICY_NEVER
    if nominated_node is not None:
        if nominated_node_status is not None and nominated_node_status.code == UNSCHEDULABLE_AND_UNRESOLVABLE:
            return True, ""
        for p in nominated_node.pod_infos():
            if can_preempt(p, pod) and terminating_by_preemption(p.pod):
                return False, MSG_TERMINATING
    return True, ""


# -- PodDisruptionBudgets -----------------------------------------------------------------------

@dataclass
class _Budget:
    namespace: str
    selector: Any
    allowed: int
    disrupted: frozenset[str]


def _budgets(pdbs: Iterable[Mapping[str, Any]]) -> list[_Budget]:
    out = []
    for pdb in pdbs:
        meta = pdb.get("metadata") or {}
        try:
            selector = label_selector_from_dict((pdb.get("spec") or {}).get("selector"))
        except SelectorError:
            continue  # an invalid selector matches no pod
        if selector.empty or selector.match_nothing:
            continue  # kube: a nil or empty PDB selector matches nothing
        status = pdb.get("status") or {}
        out.append(_Budget(meta.get("namespace", ""), selector, int(status.get("disruptionsAllowed") or 0),
                           frozenset(status.get("disruptedPods") or ())))
    return out


def filter_pods_with_pdb_violation(pods: Sequence[PodInfo], pdbs: Iterable[Mapping[str, Any]]
                                   ) -> tuple[list[PodInfo], list[PodInfo]]:
    """Split ``pods`` (order kept) into those whose eviction would exceed a PDB's budget and the rest.

    Budgets are consumed in order, so with one disruption allowed the first matching pod passes
    and the second violates. A pod already listed in ``status.disruptedPods`` was counted by the
    API server and consumes nothing.
    """
    budgets = _budgets(pdbs)
    violating: list[PodInfo] = []
    fine: list[PodInfo] = []
    for pi in pods:
        violated = False
        if pi.labels and budgets:
            for b in budgets:
                if b.namespace != pi.namespace or not b.selector.matches(pi.labels):
                    continue
                if pi.name in b.disrupted:
                    continue
                b.allowed -= 1
                if b.allowed < 0:
                    violated = True
        (violating if violated else fine).append(pi)
    return violating, fine


# -- victims on one node -------------------------------------------------------------------------

def select_victims_on_node(fw: FrameworkHandle, state: CycleState, pod: PodInfo, node: NodeInfo,
                           pdbs: Sequence[Mapping[str, Any]] = (),
                           now: float | None = None, *,
                           can_preempt: Callable[[PodInfo, PodInfo], bool] = preemption_allowed,
                           fits: Callable[[CycleState, PodInfo], bool] | None = None
                           ) -> tuple[list[PodInfo], int, Status | None]:
    """The fewest lower-priority pods to evict from ``node`` so that ``pod`` fits.

    ``state`` and ``node`` are changed: pass clones. Returns (victims, most important first;
    number of victims whose eviction violates a PDB; None on success or why the node cannot help).
    ``can_preempt(victim, preemptor)`` picks the potential victims and ``fits(state, pod)`` is an extra
    check beside the filters (ElasticQuota's quota-scoped preemption narrows both).
    """
    now = time.time() if now is None else now
    potential = [pi for pi in node.pod_infos() if can_preempt(pi, pod)]
    if not potential:
        return [], 0, Status.unresolvable(MSG_NO_VICTIMS)

    def remove(pi: PodInfo) -> Status | None:
        node.remove_pod(pi.uid)
        st = fw.run_pre_filter_remove_pod(state, pod, pi, node)
        return None if is_success(st) else Status(ERROR, *(st.reasons or ["RemovePod failed"]))

    def add(pi: PodInfo) -> Status | None:
        node.add_pod(pi)
        st = fw.run_pre_filter_add_pod(state, pod, pi, node)
        return None if is_success(st) else Status(ERROR, *(st.reasons or ["AddPod failed"]))

    for pi in potential:
        st = remove(pi)
        if st is not None:
            return [], 0, st
    # Removing every candidate is the best case: if the pod does not fit now, no subset helps.
    # (Affinity of the preemptor to a victim is deliberately not considered, as in kube.)
    st = fw.run_filter_plugins_with_nominated_pods(state, pod, node)
    if not is_success(st):
        return [], 0, st
    if fits is not None and not fits(state, pod):
        return [], 0, Status.unschedulable(MSG_NO_VICTIMS)

    potential.sort(key=lambda p: importance_key(p, now))
    violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
    victims: list[PodInfo] = []

    def reprieve(pi: PodInfo) -> tuple[bool, Status | None]:
        err = add(pi)
        if err is not None:
            return False, err
        fits_now = is_success(fw.run_filter_plugins_with_nominated_pods(state, pod, node)) and (
            fits is None or fits(state, pod))
        if not fits_now:
            err = remove(pi)
            if err is not None:
                return False, err
            victims.append(pi)
        return fits_now, None

    num_violating = 0
    # PDB-protected pods get the first chance to stay; within each group the most important first.
    for pi in violating:
        fits, err = reprieve(pi)
        if err is not None:
            return [], 0, err
        if not fits:
            num_violating += 1
    for pi in non_violating:
        _, err = reprieve(pi)
        if err is not None:
            return [], 0, err
    if violating and non_violating:
        victims.sort(key=lambda p: importance_key(p, now))
    return victims, num_violating, None


# -- candidates ----------------------------------------------------------------------------------

@dataclass
class Candidate:
    """A node the preemptor fits on once ``victims`` (most important first) are gone."""

    name: str
    victims: list[PodInfo] = field(default_factory=list)
    num_pdb_violations: int = 0


def calculate_num_candidates(num_nodes: int, min_percentage: int, min_absolute: int) -> int:
    """How many candidates the dry run should find: a percentage of the nodes, at least an absolute
    number, at most all of them."""
    n = num_nodes * min_percentage // 100
    if n < min_absolute:
        n = min_absolute
    return min(n, num_nodes)


def dry_run_preemption(fw: FrameworkHandle, state: CycleState, pod: PodInfo, potential_nodes: Sequence[NodeInfo],
                       pdbs: Sequence[Mapping[str, Any]], offset: int, num_candidates: int,
                       now: float | None = None, *,
                       can_preempt: Callable[[PodInfo, PodInfo], bool] = preemption_allowed,
                       fits: Callable[[CycleState, PodInfo], bool] | None = None
                       ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
    """Try nodes from ``offset`` (wrapping) on clones until enough candidates are found.

    The search stops once ``num_candidates`` are found and at least one of them violates no PDB.
    Returns (candidates, PDB-free ones first; why each other tried node cannot help; errors).
    """
    now = time.time() if now is None else now
    non_violating: list[Candidate] = []
    violating: list[Candidate] = []
    statuses: dict[str, Status] = {}
    errors: list[str] = []
    n = len(potential_nodes)
    for i in range(n):
        node = potential_nodes[(offset + i) % n].clone()
        victims, num_violations, st = select_victims_on_node(fw, state.clone(), pod, node, pdbs, now,
                                                             can_preempt=can_preempt, fits=fits)
        if st is None and victims:
            target = non_violating if num_violations == 0 else violating
            if len(target) < num_candidates:
                target.append(Candidate(node.name, victims, num_violations))
            if non_violating and len(non_violating) + len(violating) >= num_candidates:
                break
            continue
        if st is None:
            st = Status.error(f'expected at least one victim pod on node "{node.name}"')
        if st.code == ERROR:
            errors.append(st.message())
        statuses[node.name] = st
    return non_violating + violating, statuses, errors


def pick_one_node_for_preemption(candidates: Sequence[Candidate], now: float | None = None) -> Candidate | None:
    """The candidate whose eviction hurts least (kube's pickOneNodeForPreemption).

    In order, each criterion keeps the best candidates and the next one breaks ties: fewest PDB
    violations; lowest priority of the most important victim; smallest sum of (shifted) victim
    priorities; fewest victims; latest start among the most important victims (evict the youngest);
    then the first in ``candidates``.
    """
    if not candidates:
        return None
    now = time.time() if now is None else now

    def latest_start(c: Candidate) -> int:
        if not c.victims:
            return _INT64_MIN
        top = max(v.priority for v in c.victims)
        earliest = min(pod_start_time(v.pod, now) for v in c.victims if v.priority == top)
        return int(earliest * 1e9)

    scores: list[Callable[[Candidate], int]] = [
        lambda c: -c.num_pdb_violations,
        lambda c: -(c.victims[0].priority if c.victims else 0),
        lambda c: -sum(v.priority + _PRIORITY_SHIFT for v in c.victims),
        lambda c: -len(c.victims),
        latest_start,
    ]
    remaining = list(candidates)
    for score in scores:
        values = [score(c) for c in remaining]
        best = max(values)
        remaining = [c for c, v in zip(remaining, values) if v == best]
        if len(remaining) == 1:
            break
    return remaining[0]


# -- the failure message -------------------------------------------------------------------------

def fit_error_message(num_all_nodes: int, node_statuses: Mapping[str, Status], absent_reason: str) -> str:
    """kube's FitError text: "0/N nodes are available: <count reason>, ...." with the reasons of the
    listed nodes, every unlisted node counted under ``absent_reason``, sorted as strings."""
    counts: Counter[str] = Counter()
    for st in node_statuses.values():
        for reason in st.reasons:
            counts[reason] += 1
    absent = num_all_nodes - len(node_statuses)
    if absent > 0:
        counts[absent_reason] += absent
    parts = sorted(f"{v} {k}" for k, v in counts.items())
    msg = f"0/{num_all_nodes} nodes are available:"
    if parts:
        msg += " " + ", ".join(parts) + "."
    return msg


def potential_nodes(node_infos: Iterable[NodeInfo], statuses: NodeStatusReader) -> list[NodeInfo]:
    """Nodes that failed Filter with a resolvable reason, or that Filter never examined."""
    out = []
    for ni in node_infos:
        if statuses.unresolvable(ni.name):
            continue
        st = statuses.node_status(ni.name)
        if st is None or st.code == UNSCHEDULABLE:
            out.append(ni)
    return out


# -- the plugin ----------------------------------------------------------------------------------

def _validate(args: Mapping[str, Any]) -> tuple[int, int]:
    pct = int(args.get("minCandidateNodesPercentage", 10))
    absolute = int(args.get("minCandidateNodesAbsolute", 100))
    errs = []
    if pct < 0 or pct > 100:
        errs.append(f"minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]")
    if absolute < 0:
        errs.append(f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        errs.append("minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as "
                    "minCandidateNodesAbsolute")
        errs.append("minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as "
                    "minCandidateNodesPercentage")
    if errs:
        raise ValueError(", ".join(errs))
    return pct, absolute


class DefaultPreemption(PostFilterPlugin):
    """PostFilter: nominate the pod to the node where evicting lower-priority pods hurts least."""

    name = NAME

    def __init__(self, args: Mapping[str, Any], handle: Any) -> None:
        self.min_percentage, self.min_absolute = _validate(args)
        self.handle = handle
        self.rand = random.Random()
        # Asked for at construction so that the factory's informers sync before scheduling starts.
        informers = getattr(handle, "informers", None)
        self._pdb_informer = informers.informer("PodDisruptionBudget") if informers is not None else None

    # -- algorithm glue ----------------------------------------------------------------------------

    # Hooks for plugins that preempt within narrower rules (ElasticQuota): who may be a victim of whom,
    # and an extra check beside the filters (None: none).
    can_preempt: Callable[[PodInfo, PodInfo], bool] = staticmethod(preemption_allowed)  # type: ignore[assignment]
    fits: Callable[[CycleState, PodInfo], bool] | None = None

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """A random start (spreads preemption over the cluster) and the number of candidates to find."""
        return self.rand.randrange(num_nodes), calculate_num_candidates(num_nodes, self.min_percentage,
                                                                        self.min_absolute)

    def pdbs(self) -> list[Mapping[str, Any]]:
        if self._pdb_informer is None:
            return []
        return self._pdb_informer.store.list()

    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: NodeStatusReader) -> tuple[PostFilterResult | None, Status | None]:
        result, status = self.preempt(state, pod, statuses)
        if status is not None and status.reasons:
            msg = status.message()
            if msg:
                return result, Status(status.code, "preemption: " + msg, plugin=NAME)
        return result, status

    def preempt(self, state: CycleState, pod: PodInfo,
                statuses: NodeStatusReader) -> tuple[PostFilterResult | None, Status | None]:
        """Find victims, evict them and return the node to nominate (kube's Evaluator.Preempt)."""
        snapshot = self.handle.snapshot()
        nominated = (pod.pod.get("status") or {}).get("nominatedNodeName") or ""
        if not nominated:
            lookup = getattr(self.handle.nominator, "nominated_node_name", None)
            nominated = (lookup(pod.pod) or "") if lookup is not None else ""
        ok, msg = pod_eligible_to_preempt_others(pod, snapshot.get(nominated) if nominated else None,
                                                 statuses.node_status(nominated) if nominated else None,
                                                 self.can_preempt)
        if not ok:
            return None, Status.unschedulable(msg)

        all_nodes = snapshot.node_infos
        if not all_nodes:
            return None, Status.error("no nodes available")
        potential = potential_nodes(all_nodes, statuses)
        candidates: list[Candidate] = []
        node_statuses: dict[str, Status] = {}
        if potential:
            offset, num = self.get_offset_and_num_candidates(len(potential))
            candidates, node_statuses, errors = dry_run_preemption(self.handle.framework, state, pod, potential,
                                                                   self.pdbs(), offset, num,
                                                                   can_preempt=self.can_preempt, fits=self.fits)
            if errors and not candidates:
                return None, Status.error(", ".join(errors))
        if not candidates:
            # An empty nominated node name tells the scheduler to clear the pod's old nomination.
            return PostFilterResult(""), Status.unschedulable(
                fit_error_message(len(all_nodes), node_statuses, MSG_NOT_HELPFUL))

        best = pick_one_node_for_preemption(candidates)
        assert best is not None
        st = self.prepare_candidate(best, pod)
        if st is not None:
            return None, st
        return PostFilterResult(best.name), Status()

    # -- API side effects ---------------------------------------------------------------------------

    def prepare_candidate(self, c: Candidate, pod: PodInfo) -> Status | None:
        """Evict the victims and drop the nominations of lower-priority pods to the node."""
        for victim in c.victims:
            if (victim.pod.get("metadata") or {}).get("deletionTimestamp"):
                continue  # graceful deletion already under way
            try:
                self.preempt_pod(c, pod, victim)
            except Exception as e:  # noqa: BLE001 - any API failure aborts this attempt, as in kube
                log.warning("could not preempt victim=%s preemptor=%s node=%s: %s", victim.key, pod.key, c.name, e)
                return Status.error(str(e))
        self.clear_lower_priority_nominations(pod, c.name)
        return None

    def preempt_pod(self, c: Candidate, preemptor: PodInfo, victim: PodInfo) -> None:
        """Reject a victim waiting in Permit, else mark it DisruptionTarget and delete it; then an Event."""
        waiting = self._waiting_pod(victim.uid)
        if waiting is not None:
            reject = getattr(waiting, "preempt", None) or getattr(waiting, "reject")
            reject(NAME, "preempted")
        else:
            client = self.handle.client
            if client is None:
                return  # in-memory use (simulations, unit tests): nothing to evict through
            condition = {"type": DISRUPTION_TARGET, "status": "True", "reason": REASON_PREEMPTION_BY_SCHEDULER,
                         "message": f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod"}
            if not _has_condition(victim.pod, condition):
                try:
                    client.patch("Pod", victim.name, {"status": {"conditions": [
                        {**condition, "lastTransitionTime": now_rfc3339()}]}},
                        namespace=victim.namespace, patch_type="strategic", subresource="status")
                except NotFound:
                    return  # already gone
            try:
                client.delete("Pod", victim.name, victim.namespace)
            except NotFound:
                return
        recorder = self.handle.event_recorder
        if recorder is not None:
            recorder.event(victim.pod, "Normal", "Preempted", f"Preempted by pod {preemptor.uid} on node {c.name}")

    def clear_lower_priority_nominations(self, pod: PodInfo, node_name: str) -> None:
        """Lower-priority pods nominated to ``node_name`` may no longer fit there: send them elsewhere."""
        nominator = self.handle.nominator
        lower = [pi for pi in nominator.nominated_pods_for_node(node_name) if pi.priority < pod.priority]
        client = self.handle.client
        for pi in lower:
            forget = getattr(nominator, "delete_nominated_pod_if_exists", None)
            if forget is not None:
                forget(pi.pod)
            if client is None:
                continue
            try:
                client.patch("Pod", pi.name, {"status": {"nominatedNodeName": None}}, namespace=pi.namespace,
                             subresource="status")
            except NotFound:
                pass
            except Exception as e:  # noqa: BLE001 - not critical, as in kube
                log.warning("could not clear nominatedNodeName pod=%s: %s", pi.key, e)

    def _waiting_pod(self, uid: str) -> Any:
        for owner in (self.handle, getattr(self.handle, "framework", None)):
            get = getattr(owner, "get_waiting_pod", None)
            if get is not None:
                return get(uid)
        return None


def _has_condition(pod: Mapping[str, Any], want: Mapping[str, str]) -> bool:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == want["type"]:
            return all(cond.get(k) == v for k, v in want.items())
    return False
