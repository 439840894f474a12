"""NodeAffinity: ``spec.nodeSelector`` and required node affinity filter nodes; preferred node affinity
scores them (kube-scheduler's ``nodeaffinity`` plugin, with ``NodeAffinityArgs.addedAffinity``).

Matching labels in Python for 5,000 nodes per pod is the expensive part, so verdicts and scores are
kept per selector signature in a :class:`~koordinator_roles.scheduler.framework.rowmemo.NodeMemo`: the pods of
one ReplicaSet share a signature, and a row is matched again only when its node object changed.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np
import orjson

from koordinator.apis.selectors import node_selector_term_matches
from koordinator_roles.scheduler.framework.interfaces import (BatchFilterResult, ClusterEvent, EnqueueExtensions, Failure,
                                                              FilterPlugin, PreFilterPlugin, PreFilterResult, PreScorePlugin,
                                                              ScorePlugin)
from koordinator_roles.scheduler.framework.rowmemo import NodeMemo
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.helper.normalize import default_normalize_score
from koordinator_roles.scheduler.plugins.helper.requirednodeaffinity import OBJECT_NAME_FIELD, RequiredNodeAffinity

NAME = "NodeAffinity"
ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME

# Verdict codes kept in the filter cache.
_PASS, _FAIL_POD, _FAIL_ENFORCED = 0, 1, 2


# -- pod terms ------------------------------------------------------------------------------------------

def _node_affinity(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}


class _Required(RequiredNodeAffinity):
    """The pod's required node affinity with its ``signature``: the key of the kept verdicts."""

    __slots__ = ("signature",)

    def __init__(self, pod: Mapping[str, Any]) -> None:
        super().__init__(pod)
        self.signature = orjson.dumps([self.selector, self.terms], option=orjson.OPT_SORT_KEYS)


class _Preferred:
    """Weighted preferred terms: a node scores the sum of the weights of the terms it matches."""

    __slots__ = ("terms", "signature")

    def __init__(self, terms: list | None) -> None:
        self.terms = [(int(t.get("weight") or 0), t.get("preference") or {}) for t in terms or ()
                      if int(t.get("weight") or 0) != 0]
        self.signature = orjson.dumps(self.terms, option=orjson.OPT_SORT_KEYS)

    def score(self, node: NodeInfo) -> int:
        fields = {OBJECT_NAME_FIELD: node.name}
        return sum(w for w, term in self.terms if node_selector_term_matches(term, node.labels, fields))


def _required_of(pod: Mapping[str, Any]) -> _Required:
    return _Required(pod)


def _preferred_of(pod: Mapping[str, Any]) -> _Preferred | None:
    terms = _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")
    return None if terms is None else _Preferred(terms)


def _node_names_of(terms: list) -> set[str] | None:
    """Nodes named by ``matchFields metadata.name In`` in every term, or None when a term names none."""
    names: set[str] = set()
    for term in terms:
        term_names: set[str] | None = None
        for req in term.get("matchFields") or ():
            if req.get("key") == OBJECT_NAME_FIELD and req.get("operator") == "In":
                values = set(req.get("values") or ())
                term_names = values if term_names is None else term_names & values
        if term_names is None:
            return None  # terms are ORed: this one admits nodes by other means
        names |= term_names
    return names


class NodeAffinity(PreFilterPlugin, FilterPlugin, PreScorePlugin, ScorePlugin, EnqueueExtensions):
    """Filter on required node affinity/selector, score on preferred node affinity."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        self.handle = handle
        added = (args or {}).get("addedAffinity") or {}
        required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
        self._added_terms: list | None = None if required is None else list(required.get("nodeSelectorTerms") or ())
        preferred = added.get("preferredDuringSchedulingIgnoredDuringExecution")
        self._added_preferred = _Preferred(preferred) if preferred else None
        self._filter_cache = NodeMemo()
        self._score_cache = NodeMemo()

    # -- Filter --------------------------------------------------------------------------------------

    def _added_matches(self, node: NodeInfo) -> bool:
        if self._added_terms is None:
            return True
        fields = {OBJECT_NAME_FIELD: node.name}
        return any(node_selector_term_matches(t, node.labels, fields) for t in self._added_terms)

    def _verdict(self, required: _Required, node: NodeInfo) -> int:
        if not self._added_matches(node):
            return _FAIL_ENFORCED
        return _PASS if required.matches(node) else _FAIL_POD

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Any) -> tuple[PreFilterResult | None, Status | None]:
        required: _Required = pod.cached("nodeaffinity.required", _required_of)
        if required.empty and self._added_terms is None:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, required)
        if not required.terms:
            return None, None
        names = _node_names_of(required.terms)
        if names is None:
            return None, None
        if not names:
            return None, Status(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        return PreFilterResult(names), None

    def _required(self, state: CycleState, pod: PodInfo) -> _Required:
        required = state.read(_PRE_FILTER_KEY)
        return required if required is not None else pod.cached("nodeaffinity.required", _required_of)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        verdict = self._verdict(self._required(state, pod), node)
        if verdict == _PASS:
            return None
        return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED if verdict == _FAIL_ENFORCED
                      else ERR_REASON_POD)

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        required = self._required(state, pod)
        if required.empty and self._added_terms is None:
            return BatchFilterResult.all_pass(len(rows))
        verdicts = self._filter_cache.values(snapshot, required.signature,
                                             lambda ni: self._verdict(required, ni), np.int8)[rows]
        passed = verdicts == _PASS
        if passed.all():
            return BatchFilterResult(passed)
        failures = []
        enforced = verdicts == _FAIL_ENFORCED
        if enforced.any():
            failures.append(Failure(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_ENFORCED, enforced))
        mismatch = verdicts == _FAIL_POD
        if mismatch.any():
            failures.append(Failure(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_POD, mismatch))
        return BatchFilterResult(passed, failures)

    # -- Score ---------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        preferred = pod.cached("nodeaffinity.preferred", _preferred_of)
        if preferred is None and self._added_preferred is None:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, preferred)
        return None

    def _node_score(self, preferred: _Preferred | None, node: NodeInfo) -> int:
        total = self._added_preferred.score(node) if self._added_preferred is not None else 0
        return total + (preferred.score(node) if preferred is not None else 0)

    def _preferred(self, state: CycleState, pod: PodInfo) -> _Preferred | None:
        if _PRE_SCORE_KEY in state:
            return state.read(_PRE_SCORE_KEY)
        return pod.cached("nodeaffinity.preferred", _preferred_of)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        return self._node_score(self._preferred(state, pod), node)

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        preferred = self._preferred(state, pod)
        if (preferred is None or not preferred.terms) and self._added_preferred is None:
            return np.zeros(len(rows), dtype=np.int64)
        key = preferred.signature if preferred is not None else b""
        values = self._score_cache.values(snapshot, key, lambda ni: self._node_score(preferred, ni), np.int64)
        return values[rows].copy()

    def normalize_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray,
                        scores: np.ndarray) -> Status | None:
        default_normalize_score(scores, reverse=False)
        return None

    # -- events --------------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add", self._node_hint), ClusterEvent("Node", "Update", self._node_hint)]

    def _node_hint(self, pod: dict, old: Any, new: Any) -> bool:
        """Helps when the (new) node matches the pod's required affinity and did not before."""
        if new is None:
            return False
        required = _Required(pod)
        new_info = NodeInfo(new)
        if not self._added_matches(new_info) or not required.matches(new_info):
            return False
        return old is None or not required.matches(NodeInfo(old))


def validate_args(args: Mapping[str, Any]) -> None:
    """ValueError naming the field when ``addedAffinity`` is malformed."""
    added = args.get("addedAffinity")
    if added is None:
        return
    if not isinstance(added, Mapping):
        raise ValueError("addedAffinity: must be an object")
    required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None and not isinstance(required.get("nodeSelectorTerms", []), list):
        raise ValueError("addedAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
                         "must be a list")
    for i, term in enumerate(added.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
        weight = term.get("weight")
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            raise ValueError(f"addedAffinity.preferredDuringSchedulingIgnoredDuringExecution[{i}].weight: "
                             f"Invalid value: {weight!r}: must be in the range 1-100")


def new(args: dict | None, handle: Any) -> NodeAffinity:
    """Registry factory; ``args`` is NodeAffinityArgs (``addedAffinity``)."""
    validate_args(args or {})
    return NodeAffinity(args, handle)
