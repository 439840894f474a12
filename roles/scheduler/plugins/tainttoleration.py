"""TaintToleration: NoSchedule/NoExecute taints a pod does not tolerate exclude the node; untolerated
PreferNoSchedule taints lower its score (kube-scheduler's ``tainttoleration`` plugin).

The taint matching itself (kube's ``TolerationsTolerateTaint`` and ``FindMatchingUntoleratedTaint``)
lives in :mod:`koordinator.apis.taints`, shared with the workload controllers.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from koordinator.apis.taints import find_untolerated_taint, tolerates
from koordinator_roles.scheduler.framework.interfaces import (BatchFilterResult, ClusterEvent, EnqueueExtensions, Failure,
                                                              FilterPlugin, PreScorePlugin, ScorePlugin)
from koordinator_roles.scheduler.framework.rowmemo import NodeMemo
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo, pod_key
from koordinator_roles.scheduler.plugins.helper.normalize import default_normalize_score

NAME = "TaintToleration"

_PRE_SCORE_KEY = "PreScore" + NAME
# Results of (tolerations, taint list) pairs; a ReplicaSet's pods share tolerations and nodes
# rarely change taints, so most pods are answered from here.
_CACHE_SIGNATURES = 64


def untolerated_reason(taint: Mapping[str, Any]) -> str:
    return f"node(s) had untolerated taint {{{taint.get('key', '')}: {taint.get('value', '') or ''}}}"


def _tolerations(pod: Mapping[str, Any]) -> list:
    return list((pod.get("spec") or {}).get("tolerations") or ())


def _signature(pod: Mapping[str, Any]) -> tuple:
    return tuple(sorted((t.get("key") or "", t.get("operator") or "", t.get("value") or "", t.get("effect") or "")
                        for t in _tolerations(pod)))


def _prefer_tolerations(pod: Mapping[str, Any]) -> list:
    # Only tolerations that can tolerate a PreferNoSchedule taint take part in scoring.
    return [t for t in _tolerations(pod) if (t.get("effect") or "") in ("", "PreferNoSchedule")]


def count_intolerable_prefer_no_schedule(taints: Iterable[Mapping[str, Any]], tolerations: list) -> int:
    return sum(1 for t in taints if t.get("effect") == "PreferNoSchedule" and not tolerates(tolerations, t))


class TaintToleration(FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    """Filter on NoSchedule/NoExecute taints, score on PreferNoSchedule ones."""

    name = NAME

    def __init__(self, handle: Any = None) -> None:
        self.handle = handle
        # Verdicts per (tolerations, row), recomputed only for nodes that changed: the pods of a
        # ReplicaSet share tolerations.
        self._rows = NodeMemo(keys=_CACHE_SIGNATURES)
        self._reasons: list[str | None] = [None]  # verdict code -> reason; 0 passes
        self._codes: dict[str, int] = {}

    def _verdict(self, tolerations: list, node: NodeInfo) -> int:
        taint = find_untolerated_taint(node.taints, tolerations) if node.taints else None
        if taint is None:
            return 0
        reason = untolerated_reason(taint)
        code = self._codes.get(reason)
        if code is None:
            code = self._codes[reason] = len(self._reasons)
            self._reasons.append(reason)
        return code

    # -- Filter --------------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        taint = find_untolerated_taint(node.taints, pod.cached("tainttoleration.tolerations", _tolerations))
        if taint is None:
            return None
        return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, untolerated_reason(taint))

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        if not snapshot.tainted_rows or not snapshot.has_taints[rows].any():
            return BatchFilterResult.all_pass(len(rows))
        tolerations = pod.cached("tainttoleration.tolerations", _tolerations)
        sig = pod.cached("tainttoleration.signature", _signature)
        verdicts = self._rows.values(snapshot, sig, lambda ni: self._verdict(tolerations, ni), np.int64)[rows]
        passed = verdicts == 0
        failures = [Failure(UNSCHEDULABLE_AND_UNRESOLVABLE, self._reasons[code], verdicts == code)
                    for code in np.unique(verdicts[~passed]).tolist()]
        return BatchFilterResult(passed, failures)

    # -- Score ---------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        state.write(_PRE_SCORE_KEY, pod.cached("tainttoleration.prefer", _prefer_tolerations))
        return None

    def _prefer(self, state: CycleState, pod: PodInfo) -> list:
        tolerations = state.read(_PRE_SCORE_KEY)
        return tolerations if tolerations is not None else pod.cached("tainttoleration.prefer", _prefer_tolerations)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return count_intolerable_prefer_no_schedule(node.taints, self._prefer(state, pod))

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(rows), dtype=np.int64)
        if not snapshot.prefer_no_schedule_rows:
            return scores
        with_prefer = np.flatnonzero(snapshot.has_prefer_no_schedule[rows])
        if len(with_prefer):
            tolerations = self._prefer(state, pod)
            infos = snapshot.node_infos
            for i in with_prefer.tolist():
                scores[i] = count_intolerable_prefer_no_schedule(infos[rows[i]].taints, tolerations)
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray,
                        scores: np.ndarray) -> Status | None:
        default_normalize_score(scores, reverse=True)
        return None

    # -- events --------------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add", _node_change_hint), ClusterEvent("Node", "Update", _node_change_hint),
                ClusterEvent("Pod", "Update", _pod_toleration_hint)]


def _node_taints(node: Mapping[str, Any] | None) -> list:
    return list(((node or {}).get("spec") or {}).get("taints") or ())


def _node_change_hint(pod: dict, old: Any, new: Any) -> bool:
    """A node event helps only when it turns an untolerated node into a tolerated one."""
    if new is None:
        return False
    tolerations = _tolerations(pod)
    was_untolerated = old is None or find_untolerated_taint(_node_taints(old), tolerations) is not None
    return was_untolerated and find_untolerated_taint(_node_taints(new), tolerations) is None


def _pod_toleration_hint(pod: dict, old: Any, new: Any) -> bool:
    """Only the rejected pod's own update (new tolerations) can change this plugin's verdict."""
    if new is None:
        return False
    return _identity(new) == _identity(pod)


def _identity(pod: Mapping[str, Any]) -> str:
    return (pod.get("metadata") or {}).get("uid") or pod_key(pod)


def new(args: dict | None, handle: Any) -> TaintToleration:
    """Registry factory (the plugin has no args)."""
    return TaintToleration(handle)
