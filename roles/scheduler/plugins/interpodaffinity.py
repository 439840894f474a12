"""InterPodAffinity: pod (anti-)affinity between the incoming pod and the pods already placed
(kube-scheduler's ``interpodaffinity`` plugin).

PreFilter counts, per topology pair (key, value), the existing pods matching the incoming pod's
required terms and the existing pods whose required anti-affinity matches the incoming pod;
Filter is then a few dict lookups per node. PreScore sums preferred terms (both directions) and
existing pods' required affinity (``hardPodAffinityWeight``) per topology pair.

A pod's terms are parsed once and kept on its PodInfo. A pod without affinity, in a cluster where
no pod has required anti-affinity (or none with preferences to score), costs one attribute check.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

import numpy as np

from koordinator.apis.selectors import LabelSelector, label_selector_from_dict
from koordinator_roles.scheduler.framework.interfaces import (MAX_NODE_SCORE, BatchFilterResult, ClusterEvent,
                                                              EnqueueExtensions, Failure, FilterPlugin, PreFilterExtensions,
                                                              PreFilterPlugin, PreScorePlugin, ScorePlugin)
from koordinator_roles.scheduler.framework.status import (UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState,
                                                          Status)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.helper.podmatch import NodeMatchCounter, merge_label_keys

NAME = "InterPodAffinity"

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
_TERMS_KEY = NAME + ".terms"
_NOTHING = LabelSelector.nothing()

# Filter outcomes, most specific first.
_FIT, _AFFINITY, _ANTI_AFFINITY, _EXISTING = 0, 1, 2, 3
_FAILURES = {
    _AFFINITY: (UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH),
    _ANTI_AFFINITY: (UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH),
    _EXISTING: (UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH),
}

Counts = dict[str, dict[str, int]]  # topology key -> topology value -> count


# -- terms ------------------------------------------------------------------------------------------

class AffinityTerm:
    """A parsed PodAffinityTerm (kube's ``framework.AffinityTerm``).

    ``namespaces`` is the explicit list, or the owning pod's namespace when neither a list nor a
    namespaceSelector is given; ``ns_selector`` is matched against namespace labels (nil: nothing,
    ``{}``: every namespace).
    """

    __slots__ = ("namespaces", "ns_selector", "selector", "topology_key", "key")

    def __init__(self, namespaces: frozenset[str], ns_selector: LabelSelector, selector: LabelSelector,
                 topology_key: str) -> None:
        self.namespaces = namespaces
        self.ns_selector = ns_selector
        self.selector = selector
        self.topology_key = topology_key
        self.key = ("ipa", namespaces, ns_selector, selector)  # what the matched pods depend on

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None) -> bool:
        if namespace in self.namespaces or self.ns_selector.matches(ns_labels):
            return self.selector.matches(labels)
        return False

    def matches_pod(self, p: PodInfo, ns_labels: Mapping[str, str] | None = None) -> bool:
        return self.matches(p.namespace, p.labels, ns_labels)

    def __repr__(self) -> str:
        return f"AffinityTerm({self.topology_key}, ns={sorted(self.namespaces)}, selector={self.selector!r})"


def parse_term(raw: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    """One PodAffinityTerm of a pod in ``namespace`` with ``labels`` (raises ValueError when invalid)."""
    # What the API server does at pod creation (KEP-3633); repeating it is harmless.
    selector = merge_label_keys(label_selector_from_dict(raw.get("labelSelector")), labels,
                                raw.get("matchLabelKeys") or (), raw.get("mismatchLabelKeys") or ())
    names = list(raw.get("namespaces") or ())
    ns_raw = raw.get("namespaceSelector")
    namespaces = frozenset(names) if (names or ns_raw is not None) else frozenset((namespace,))
    return AffinityTerm(namespaces, label_selector_from_dict(ns_raw), selector, raw.get("topologyKey") or "")


class PodTerms:
    """A pod's required and preferred (anti-)affinity terms; ``error`` when one cannot be parsed."""

    __slots__ = ("required_affinity", "required_anti", "preferred_affinity", "preferred_anti", "error")

    def __init__(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        namespace, labels = meta.get("namespace", ""), meta.get("labels") or {}
        affinity = (pod.get("spec") or {}).get("affinity") or {}
        pa = affinity.get("podAffinity") or {}
        paa = affinity.get("podAntiAffinity") or {}
        self.error = ""
        try:
            self.required_affinity = [parse_term(t, namespace, labels)
                                      for t in pa.get("requiredDuringSchedulingIgnoredDuringExecution") or ()]
            self.required_anti = [parse_term(t, namespace, labels)
                                  for t in paa.get("requiredDuringSchedulingIgnoredDuringExecution") or ()]
            self.preferred_affinity = [(int(w.get("weight") or 0),
                                        parse_term(w.get("podAffinityTerm") or {}, namespace, labels))
                                       for w in pa.get("preferredDuringSchedulingIgnoredDuringExecution") or ()]
            self.preferred_anti = [(int(w.get("weight") or 0),
                                    parse_term(w.get("podAffinityTerm") or {}, namespace, labels))
                                   for w in paa.get("preferredDuringSchedulingIgnoredDuringExecution") or ()]
        except (ValueError, TypeError) as e:
            self.required_affinity, self.required_anti = [], []
            self.preferred_affinity, self.preferred_anti = [], []
            self.error = str(e)


def pod_terms(p: PodInfo) -> PodTerms:
    """The pod's parsed terms, computed once per PodInfo."""
    return p.cached(_TERMS_KEY, PodTerms)


def _matches_all(terms: list[AffinityTerm], namespace: str, labels: Mapping[str, str]) -> bool:
    """podMatchesAllAffinityTerms: false for no terms."""
    if not terms:
        return False
    for t in terms:
        if not t.matches(namespace, labels, None):
            return False
    return True


def _bump(counts: Counts, labels: Mapping[str, str], key: str, delta: int) -> None:
    value = labels.get(key)
    if value is None or not delta:
        return
    values = counts.setdefault(key, {})
    n = values.get(value, 0) + delta
    if n:
        values[value] = n
    else:
        # Zero entries are dropped so that "no matching pod anywhere" is an empty dict.
        del values[value]
        if not values:
            del counts[key]


def _positive(counts: Counts, key: str, value: str) -> bool:
    values = counts.get(key)
    return values is not None and values.get(value, 0) > 0


# -- cycle state ------------------------------------------------------------------------------------

class PreFilterState:
    """Counts per topology pair for Filter, and the incoming pod's (namespace-merged) terms."""

    __slots__ = ("affinity_terms", "anti_terms", "existing", "affinity", "anti", "self_match", "ns_labels",
                 "namespace", "labels")

    def __init__(self, pod: PodInfo, affinity_terms: list[AffinityTerm], anti_terms: list[AffinityTerm],
                 ns_labels: Mapping[str, str]) -> None:
        self.affinity_terms = affinity_terms
        self.anti_terms = anti_terms
        self.namespace = pod.namespace
        self.labels = pod.labels
        self.ns_labels = ns_labels
        self.self_match = _matches_all(affinity_terms, pod.namespace, pod.labels)
        self.existing: Counts = {}
        self.affinity: Counts = {}
        self.anti: Counts = {}

    def update_with_pod(self, other: PodInfo, node: NodeInfo, delta: int) -> None:
        labels = node.labels
        for t in pod_terms(other).required_anti:
            if t.matches(self.namespace, self.labels, self.ns_labels):
                _bump(self.existing, labels, t.topology_key, delta)
        if _matches_all(self.affinity_terms, other.namespace, other.labels):
            for t in self.affinity_terms:
                _bump(self.affinity, labels, t.topology_key, delta)
        for t in self.anti_terms:
            if t.matches_pod(other):
                _bump(self.anti, labels, t.topology_key, delta)

    def check(self, labels: Mapping[str, str]) -> int:
        """_FIT or the first rule the node breaks (affinity, anti-affinity, existing anti-affinity)."""
        if self.affinity_terms:
            pods_exist = True
            affinity = self.affinity
            for t in self.affinity_terms:
                value = labels.get(t.topology_key)
                if value is None:
                    return _AFFINITY  # every topology key must exist on the node
                if not _positive(affinity, t.topology_key, value):
                    pods_exist = False
            # The first pod of a group with affinity to itself may go anywhere that has the keys.
            if not pods_exist and not (not affinity and self.self_match):
                return _AFFINITY
        if self.anti:
            for t in self.anti_terms:
                value = labels.get(t.topology_key)
                if value is not None and _positive(self.anti, t.topology_key, value):
                    return _ANTI_AFFINITY
        if self.existing:
            for key, values in self.existing.items():
                value = labels.get(key)
                if value is not None and values.get(value, 0) > 0:
                    return _EXISTING
        return _FIT

    def clone(self) -> "PreFilterState":
        out = PreFilterState.__new__(PreFilterState)
        out.affinity_terms, out.anti_terms = self.affinity_terms, self.anti_terms
        out.namespace, out.labels, out.ns_labels, out.self_match = (self.namespace, self.labels, self.ns_labels,
                                                                    self.self_match)
        out.existing = {k: dict(v) for k, v in self.existing.items()}
        out.affinity = {k: dict(v) for k, v in self.affinity.items()}
        out.anti = {k: dict(v) for k, v in self.anti.items()}
        return out


class PreScoreState:
    """Score per topology key and value; a node scores the sum over the pairs it belongs to."""

    __slots__ = ("topology_score",)

    def __init__(self) -> None:
        self.topology_score: Counts = {}

    def add(self, labels: Mapping[str, str], key: str, amount: int) -> None:
        value = labels.get(key)
        if value is None:
            return
        values = self.topology_score.setdefault(key, {})
        values[value] = values.get(value, 0) + amount

    def score(self, labels: Mapping[str, str]) -> int:
        total = 0
        for key, values in self.topology_score.items():
            value = labels.get(key)
            if value is not None:
                total += values.get(value, 0)
        return total

    def clone(self) -> "PreScoreState":
        return self


# -- the plugin -------------------------------------------------------------------------------------

class InterPodAffinity(PreFilterPlugin, PreFilterExtensions, FilterPlugin, PreScorePlugin, ScorePlugin,
                       EnqueueExtensions):
    """kube-scheduler's InterPodAffinity."""

    name = NAME

    def __init__(self, args: dict, handle: Any) -> None:
        self.handle = handle
        self.hard_pod_affinity_weight = args["hardPodAffinityWeight"]
        self.ignore_preferred_terms_of_existing_pods = args["ignorePreferredTermsOfExistingPods"]
        self.counter = NodeMatchCounter()
        self._namespaces = None
        informers = getattr(handle, "informers", None)
        if informers is not None:
            try:
                self._namespaces = informers.informer("Namespace")
            except Exception:  # no Namespace kind known: behave as with an empty namespace list
                self._namespaces = None

    # -- namespaces -----------------------------------------------------------------------------------

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        """The namespace's labels (GetNamespaceLabelsSnapshot); empty when unknown."""
        if self._namespaces is None:
            return {}
        ns = self._namespaces.store.get(namespace)
        return ((ns or {}).get("metadata") or {}).get("labels") or {}

    def merge_namespaces(self, terms: list[AffinityTerm]) -> list[AffinityTerm]:
        """Fold a namespaceSelector into the namespace list (mergeAffinityTermNamespacesIfNotEmpty)."""
        if not any(not t.ns_selector.empty and not t.ns_selector.match_nothing for t in terms):
            return terms
        all_ns = self._namespaces.store.list() if self._namespaces is not None else []
        out = []
        for t in terms:
            sel = t.ns_selector
            if sel.empty or sel.match_nothing:
                out.append(t)
                continue
            names = {(ns.get("metadata") or {}).get("name", "") for ns in all_ns
                     if sel.matches((ns.get("metadata") or {}).get("labels") or {})}
            out.append(AffinityTerm(t.namespaces | names, _NOTHING, t.selector, t.topology_key))
        return out

    # -- PreFilter ------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Any):
        with_anti = snapshot.have_pods_with_required_anti_affinity
        if not pod.has_affinity and not with_anti:
            return None, Status.skip()
        terms = pod_terms(pod)
        if terms.error:
            return None, Status.unresolvable(f"parsing pod: {terms.error}")
        if not terms.required_affinity and not terms.required_anti and not with_anti:
            return None, Status.skip()
        s = PreFilterState(pod, self.merge_namespaces(terms.required_affinity),
                           self.merge_namespaces(terms.required_anti), self.namespace_labels(pod.namespace))
        for ni in with_anti:
            labels = ni.labels
            for existing in ni.pods_with_required_anti_affinity:
                for t in pod_terms(existing).required_anti:
                    if t.matches(pod.namespace, pod.labels, s.ns_labels):
                        _bump(s.existing, labels, t.topology_key, 1)
        if not s.existing and not s.affinity_terms and not s.anti_terms:
            return None, Status.skip()
        if s.affinity_terms or s.anti_terms:
            self._count_incoming(s, snapshot.node_infos)
        state.write(_PRE_FILTER_KEY, s)
        return None, None

    def _count_incoming(self, s: PreFilterState, node_infos: Iterable[NodeInfo]) -> None:
        count = self.counter.count
        aff = s.affinity_terms
        aff_table = self.counter.table(("ipa-all", tuple(t.key for t in aff))) if aff else None

        def aff_pred(p: PodInfo) -> bool:
            return _matches_all(aff, p.namespace, p.labels)

        anti = [(t, self.counter.table(t.key), t.matches_pod) for t in s.anti_terms]
        for ni in node_infos:
            if not ni.pods:
                continue
            labels = ni.labels
            if aff_table is not None:
                n = count(aff_table, ni, aff_pred)
                if n:
                    for t in aff:
                        _bump(s.affinity, labels, t.topology_key, n)
            for t, table, pred in anti:
                n = count(table, ni, pred)
                if n:
                    _bump(s.anti, labels, t.topology_key, n)

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        s: PreFilterState | None = state.read(_PRE_FILTER_KEY)
        if s is not None and node is not None:
            s.update_with_pod(to_add, node, 1)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status | None:
        s: PreFilterState | None = state.read(_PRE_FILTER_KEY)
        if s is not None and node is not None:
            s.update_with_pod(to_remove, node, -1)
        return None

    # -- Filter ---------------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s: PreFilterState | None = state.read(_PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{_PRE_FILTER_KEY}" from cycleState: not found')
        outcome = s.check(node.labels)
        if outcome == _FIT:
            return None
        code, reason = _FAILURES[outcome]
        return Status(code, reason)

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        s: PreFilterState | None = state.read(_PRE_FILTER_KEY)
        if s is None:
            raise RuntimeError(f'reading "{_PRE_FILTER_KEY}" from cycleState: not found')
        infos = snapshot.node_infos
        check = s.check
        outcomes = np.fromiter((check(infos[r].labels) for r in rows), dtype=np.int64, count=len(rows))
        failures = []
        for outcome, (code, reason) in _FAILURES.items():
            mask = outcomes == outcome
            if mask.any():
                failures.append(Failure(code, reason, mask))
        return BatchFilterResult(outcomes == _FIT, failures)

    # -- Score ----------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        if len(rows) == 0:
            return Status.skip()
        if not pod.has_affinity and (self.ignore_preferred_terms_of_existing_pods
                                     or not snapshot.have_pods_with_affinity):
            return Status.skip()
        terms = pod_terms(pod)
        if terms.error:
            return Status.error(f"parsing pod: {terms.error}")
        has_constraints = bool(terms.preferred_affinity or terms.preferred_anti)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status.skip()
        s = PreScoreState()
        ns_labels = self.namespace_labels(pod.namespace)
        if has_constraints:
            preferred = [(w, t) for w, t in zip([w for w, _ in terms.preferred_affinity],
                                               self.merge_namespaces([t for _, t in terms.preferred_affinity]))]
            preferred += [(-w, t) for w, t in zip([w for w, _ in terms.preferred_anti],
                                                 self.merge_namespaces([t for _, t in terms.preferred_anti]))]
            self._score_incoming_terms(s, preferred, snapshot.node_infos)
        hard_weight = self.hard_pod_affinity_weight
        namespace, labels = pod.namespace, pod.labels
        for ni in snapshot.have_pods_with_affinity:
            node_labels = ni.labels
            if not node_labels:
                continue
            for existing in ni.pods_with_affinity:
                et = pod_terms(existing)
                if hard_weight > 0:
                    for t in et.required_affinity:
                        if t.matches(namespace, labels, ns_labels):
                            s.add(node_labels, t.topology_key, hard_weight)
                for w, t in et.preferred_affinity:
                    if t.matches(namespace, labels, ns_labels):
                        s.add(node_labels, t.topology_key, w)
                for w, t in et.preferred_anti:
                    if t.matches(namespace, labels, ns_labels):
                        s.add(node_labels, t.topology_key, -w)
        if not s.topology_score:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, s)
        return None

    def _score_incoming_terms(self, s: PreScoreState, weighted: list[tuple[int, AffinityTerm]],
                              node_infos: Iterable[NodeInfo]) -> None:
        count = self.counter.count
        prepared = [(w, t, self.counter.table(t.key), t.matches_pod) for w, t in weighted]
        for ni in node_infos:
            labels = ni.labels
            if not labels or not ni.pods:
                continue
            for w, t, table, pred in prepared:
                if t.topology_key not in labels:
                    continue
                n = count(table, ni, pred)
                if n:
                    s.add(labels, t.topology_key, w * n)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        s: PreScoreState | None = state.read(_PRE_SCORE_KEY)
        return 0 if s is None else s.score(node.labels)

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        s: PreScoreState | None = state.read(_PRE_SCORE_KEY)
        if s is None:
            return np.zeros(len(rows), dtype=np.int64)
        infos = snapshot.node_infos
        return np.fromiter((s.score(infos[r].labels) for r in rows), dtype=np.int64, count=len(rows))

    def normalize_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray,
                        scores: np.ndarray) -> Status | None:
        s: PreScoreState | None = state.read(_PRE_SCORE_KEY)
        if s is None or not s.topology_score or len(scores) == 0:
            return None
        lo, hi = int(scores.min()), int(scores.max())
        diff = hi - lo
        if diff > 0:
            scores[:] = (float(MAX_NODE_SCORE) * ((scores - lo) / float(diff))).astype(np.int64)
        else:
            scores[:] = 0
        return None

    # -- events ---------------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Add", self._pod_hint),
            ClusterEvent("Pod", "Update", self._pod_hint),
            ClusterEvent("Pod", "Delete", self._pod_hint),
            ClusterEvent("Node", "Add", self._node_hint),
            ClusterEvent("Node", "Update", self._node_hint),
        ]

    @staticmethod
    def _pod_hint(pod: Mapping[str, Any], old: Any, new: Any) -> bool:
        """Queue when a scheduled pod starts matching the affinity, stops matching the anti-affinity,
        or a pod with required anti-affinity goes away (isSchedulableAfterPodChange)."""
        def scheduled(obj: Any) -> bool:
            return isinstance(obj, Mapping) and bool((obj.get("spec") or {}).get("nodeName"))

        def ns_labels(obj: Mapping[str, Any]) -> tuple[str, Mapping[str, str]]:
            meta = obj.get("metadata") or {}
            return meta.get("namespace", ""), meta.get("labels") or {}

        for obj in (old, new):
            if obj is not None and not isinstance(obj, Mapping):
                return True  # a tombstone or unknown shape: cannot tell
        # Unscheduled pods count nowhere; a binding (unscheduled -> scheduled) reads as an add.
        old = old if scheduled(old) else None
        new = new if scheduled(new) else None
        if old is None and new is None:
            return False
        terms = PodTerms(pod)
        affinity, anti = terms.required_affinity, terms.required_anti
        if old is not None and new is not None:
            if not _matches_all(affinity, *ns_labels(old)) and _matches_all(affinity, *ns_labels(new)):
                return True
            return _matches_all(anti, *ns_labels(old)) and not _matches_all(anti, *ns_labels(new))
        if new is not None:
            return _matches_all(affinity, *ns_labels(new))
        return _matches_all(anti, *ns_labels(old)) or bool(PodTerms(old).required_anti)

    @staticmethod
    def _node_hint(pod: Mapping[str, Any], old: Any, new: Any) -> bool:
        """Queue on a new node, or when a node's labels change: the pod's topology keys, or any key an
        existing pod's anti-affinity uses, may now have other values."""
        if not isinstance(new, Mapping):
            return False
        if not isinstance(old, Mapping):
            return True
        return ((old.get("metadata") or {}).get("labels") or {}) != ((new.get("metadata") or {}).get("labels") or {})


# -- args -------------------------------------------------------------------------------------------

def validate_args(args: Mapping[str, Any] | None) -> dict:
    """InterPodAffinityArgs with kube's defaults, checked like ValidateInterPodAffinityArgs."""
    args = dict(args or {})
    unknown = sorted(set(args) - {"hardPodAffinityWeight", "ignorePreferredTermsOfExistingPods", "apiVersion",
                                  "kind"})
    if unknown:
        raise ValueError(f"{unknown[0]}: Invalid value: unknown field")
    weight = args.get("hardPodAffinityWeight")
    if weight is None:
        weight = 1
    if not isinstance(weight, int) or isinstance(weight, bool):
        raise ValueError(f"hardPodAffinityWeight: Invalid value: {weight!r}: must be an integer")
    if not 0 <= weight <= 100:
        raise ValueError(f"hardPodAffinityWeight: Invalid value: {weight}: not in valid range [0, 100]")
    ignore = args.get("ignorePreferredTermsOfExistingPods")
    if ignore is None:
        ignore = False
    if not isinstance(ignore, bool):
        raise ValueError(f"ignorePreferredTermsOfExistingPods: Invalid value: {ignore!r}: must be a boolean")
    return {"hardPodAffinityWeight": weight, "ignorePreferredTermsOfExistingPods": ignore}


def new(args: dict, handle: Any) -> InterPodAffinity:
    """Registry factory."""
    return InterPodAffinity(validate_args(args), handle)
