"""Reservation-aware preemption (Reservation PostFilter with ``enablePreemption``, reference §2.3.7).

An owner pod that matches reservations but finds their room taken by lower-priority owners (a shared,
``allocateOnce: false`` reservation; a Restricted one) may evict some of them. It reuses kube's evaluator
(``helper/preemption.py``): candidate sizing, the per-node victim selection with reprieve, PDBs,
picking the node, deleting victims and nominating. What differs:

* only nodes with reservations the pod matches are tried (no walk over the cluster);
* victims are owner pods assigned to those matched reservations, of lower priority than the preemptor
  and not labelled ``scheduling.koordinator.sh/disable-preemptible: "true"``;
* the trial's fit is the Reservation Filter with Koordinator's "preemptible" accounting, which the
  plugin's RemovePod/AddPod keep (a victim's room goes back to its reservation);
* no candidate → ``node(s) preemption failed due to insufficient resources``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from koordinator_roles.scheduler.framework.interfaces import NodeStatusReader, PostFilterResult
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE, CycleState, Status
from koordinator_roles.scheduler.framework.types import PodInfo
from koordinator_roles.scheduler.plugins.helper.preemption import (Candidate, DefaultPreemption, dry_run_preemption,
                                                                     pick_one_node_for_preemption,
                                                                     pod_eligible_to_preempt_others,
                                                                     potential_nodes, preemption_allowed)

if TYPE_CHECKING:
    from koordinator_roles.scheduler.plugins.reservation.plugin import Reservation

log = logging.getLogger("koordinator.scheduler.reservation")

LABEL_DISABLE_PREEMPTIBLE = "scheduling.koordinator.sh/disable-preemptible"
MSG_PREEMPTION_FAILED = "node(s) preemption failed due to insufficient resources"


def preemptible(victim: PodInfo) -> bool:
    """Not protected by ``scheduling.koordinator.sh/disable-preemptible: "true"``."""
    return (victim.labels or {}).get(LABEL_DISABLE_PREEMPTIBLE) != "true"


class ReservationPreemption(DefaultPreemption):
    """kube's evaluator narrowed to the owner pods of the reservations the preemptor matches."""

    def __init__(self, plugin: "Reservation", handle: Any) -> None:
        args = plugin.args
        super().__init__({"minCandidateNodesPercentage": args.min_candidate_nodes_percentage,
                          "minCandidateNodesAbsolute": args.min_candidate_nodes_absolute}, handle)
        self.plugin = plugin
        # Pod uids of the owners in the preemptor's matched reservations, set for the duration of one call
        # (PostFilter runs on the scheduling thread only).
        self._pool: frozenset[str] = frozenset()

    def can_preempt(self, victim: PodInfo, preemptor: PodInfo) -> bool:  # type: ignore[override]
        return victim.uid in self._pool and preemption_allowed(victim, preemptor) and preemptible(victim)

    def preempt_in_reservations(self, state: CycleState, pod: PodInfo, st: Any,
                                statuses: NodeStatusReader) -> tuple[PostFilterResult | None, Status | None]:
        """Find victims inside the matched reservations, evict them and return the node to nominate."""
        best, status = self.find_candidate(state, pod, st, statuses)
        if best is None:
            return None, status
        log.info("preempting in reservations pod=%s node=%s victims=%s", pod.key, best.name,
                 [v.key for v in best.victims])
        status = self.prepare_candidate(best, pod)
        if status is not None:
            return None, status
        return PostFilterResult(best.name), Status()

    def find_candidate(self, state: CycleState, pod: PodInfo, st: Any,
                       statuses: NodeStatusReader) -> tuple[Candidate | None, Status | None]:
        """The dry run over the nodes of the matched reservations: the node and its victims, or why none."""
        pool: set[str] = set()
        for infos in st.matched.values():
            for info in infos:
                pool.update(info.assigned)
        self._pool = frozenset(pool)
        try:
            return self._find(state, pod, st, statuses)
        finally:
            self._pool = frozenset()

    def _find(self, state: CycleState, pod: PodInfo, st: Any,
              statuses: NodeStatusReader) -> tuple[Candidate | None, Status | None]:
        snapshot = self.handle.snapshot()
        nominated = (pod.pod.get("status") or {}).get("nominatedNodeName") or ""
        ok, msg = pod_eligible_to_preempt_others(pod, snapshot.get(nominated) if nominated else None,
                                                 statuses.node_status(nominated) if nominated else None,
                                                 self.can_preempt)
        if not ok:
            return None, Status(UNSCHEDULABLE, msg)
        if not self._pool:
            return None, Status(UNSCHEDULABLE, MSG_PREEMPTION_FAILED)
        nodes = [ni for ni in (snapshot.get(name) for name in sorted(st.matched)) if ni is not None]
        potential = potential_nodes(nodes, statuses)
        if not potential:
            return None, Status(UNSCHEDULABLE, MSG_PREEMPTION_FAILED)
        offset, num = self.get_offset_and_num_candidates(len(potential))
        candidates, _, errors = dry_run_preemption(self.handle.framework, state, pod, potential, self.pdbs(),
                                                   offset, num, can_preempt=self.can_preempt)
        if not candidates:
            if errors:
                return None, Status.error(", ".join(errors))
            return None, Status(UNSCHEDULABLE, MSG_PREEMPTION_FAILED)
        return pick_one_node_for_preemption(candidates), None
