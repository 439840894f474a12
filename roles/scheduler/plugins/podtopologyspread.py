"""PodTopologySpread: spread matching pods evenly over topology domains (kube-scheduler's ``podtopologyspread``).

Hard constraints (``whenUnsatisfiable: DoNotSchedule``) are checked in Filter against per-domain
counts computed once in PreFilter; soft ones (``ScheduleAnyway``) and the cluster's default
constraints are scored. Pods without constraints of a kind return Skip at once, which is the
common case and must stay cheap.

Existing pods are counted per node through :class:`~koordinator_roles.scheduler.plugins.helper.podmatch.NodeMatchCounter`
(shared with InterPodAffinity), so the replicas of one workload do not rescan every pod of the cluster.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping

import numpy as np

from koordinator.apis import selectors
from koordinator.apis.selectors import LabelSelector, Requirement, label_selector_from_dict
from koordinator_roles.scheduler.framework.interfaces import (MAX_NODE_SCORE, BatchFilterResult, ClusterEvent,
                                                              EnqueueExtensions, Failure, FilterPlugin, PreFilterExtensions,
                                                              PreFilterPlugin, PreScorePlugin, ScorePlugin)
from koordinator_roles.scheduler.framework.status import (UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState,
                                                          Status)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.helper.podmatch import NodeMatchCounter, merge_label_keys
from koordinator_roles.scheduler.plugins.helper.requirednodeaffinity import RequiredNodeAffinity
from koordinator.apis.taints import find_untolerated_taint

NAME = "PodTopologySpread"

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_ZONE = "topology.kubernetes.io/zone"
HONOR = "Honor"
IGNORE = "Ignore"

# kube-scheduler's systemDefaultConstraints.
SYSTEM_DEFAULT_CONSTRAINTS = (
    {"topologyKey": LABEL_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
)

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME
_PARSED_KEY = NAME + ".constraints"


# -- matching pods ----------------------------------------------------------------------------------

def _is_terminating(p: PodInfo) -> bool:
    return bool((p.pod.get("metadata") or {}).get("deletionTimestamp"))


def spread_predicate(selector: LabelSelector, namespace: str) -> Callable[[PodInfo], bool]:
    """kube's countPodsMatchSelector test: same namespace, not terminating, labels selected."""
    def match(p: PodInfo) -> bool:
        return p.namespace == namespace and selector.matches(p.labels) and not _is_terminating(p)
    return match


def _int_field(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# -- constraints ------------------------------------------------------------------------------------

class Constraint:
    """A parsed topology spread constraint (kube's internal ``topologySpreadConstraint``)."""

    __slots__ = ("max_skew", "topology_key", "selector", "min_domains", "honor_affinity", "honor_taints")

    def __init__(self, max_skew: int, topology_key: str, selector: LabelSelector, min_domains: int = 1,
                 honor_affinity: bool = True, honor_taints: bool = False) -> None:
        self.max_skew = max_skew
        self.topology_key = topology_key
        self.selector = selector
        self.min_domains = min_domains
        self.honor_affinity = honor_affinity
        self.honor_taints = honor_taints

    def includes_node(self, pod: PodInfo, ni: NodeInfo, affinity: RequiredNodeAffinity) -> bool:
        """nodeAffinityPolicy/nodeTaintsPolicy: whether the node's domain counts at all."""
        if self.honor_affinity and not affinity.matches(ni):
            return False
        if self.honor_taints and find_untolerated_taint(ni.taints, list(pod.spec.get("tolerations") or ())):
            return False
        return True

    def __repr__(self) -> str:
        return f"Constraint({self.topology_key}, maxSkew={self.max_skew}, selector={self.selector!r})"


def parse_constraints(raw: Iterable[Mapping[str, Any]], labels: Mapping[str, str],
                      action: str) -> list[Constraint]:
    """The constraints with ``whenUnsatisfiable == action`` (``filterTopologySpreadConstraints``)."""
    out = []
    for c in raw:
        if c.get("whenUnsatisfiable") != action:
            continue
        selector = label_selector_from_dict(c.get("labelSelector"))
        if c.get("matchLabelKeys"):
            selector = merge_label_keys(selector, labels, c["matchLabelKeys"], match_operator=selectors.EQUALS)
        min_domains = c.get("minDomains")
        out.append(Constraint(
            max_skew=int(c.get("maxSkew") or 0),
            topology_key=c.get("topologyKey") or "",
            selector=selector,
            min_domains=1 if min_domains is None else int(min_domains),
            honor_affinity=(c.get("nodeAffinityPolicy") or HONOR) == HONOR,
            honor_taints=(c.get("nodeTaintsPolicy") or IGNORE) == HONOR,
        ))
    return out


class _PodConstraints:
    """A pod's own constraints, parsed once per pod."""

    __slots__ = ("has_any", "hard", "soft", "error")

    def __init__(self, pod: Mapping[str, Any]) -> None:
        raw = list((pod.get("spec") or {}).get("topologySpreadConstraints") or ())
        labels = (pod.get("metadata") or {}).get("labels") or {}
        self.has_any = bool(raw)
        self.error = ""
        try:
            self.hard = parse_constraints(raw, labels, DO_NOT_SCHEDULE)
            self.soft = parse_constraints(raw, labels, SCHEDULE_ANYWAY)
        except ValueError as e:
            self.hard, self.soft, self.error = [], [], str(e)


def _node_has_all_keys(labels: Mapping[str, str], constraints: list[Constraint]) -> bool:
    for c in constraints:
        if c.topology_key not in labels:
            return False
    return True


# -- cycle state ------------------------------------------------------------------------------------

class PreFilterState:
    """Matching pods per topology value, one dict per hard constraint.

    ``domains`` is fixed at PreFilter (kube: AddPod/RemovePod do not change the number of
    domains); the minimum is recomputed lazily after preemption's add/remove.
    """

    __slots__ = ("constraints", "counts", "domains", "_mins", "self_match")

    def __init__(self, constraints: list[Constraint], counts: list[dict[str, int]], self_match: list[int]) -> None:
        self.constraints = constraints
        self.counts = counts
        self.domains = [len(c) for c in counts]
        self.self_match = self_match
        self._mins: list[int | None] = [None] * len(constraints)

    def min_match(self, i: int) -> int:
        """The global minimum for constraint ``i``, 0 while fewer than minDomains domains exist."""
        if self.domains[i] < self.constraints[i].min_domains:
            return 0
        m = self._mins[i]
        if m is None:
            counts = self.counts[i]
            m = self._mins[i] = min(counts.values()) if counts else 0
        return m

    def update(self, i: int, value: str, delta: int) -> None:
        counts = self.counts[i]
        counts[value] = counts.get(value, 0) + delta
        self._mins[i] = None

    def clone(self) -> "PreFilterState":
        out = PreFilterState.__new__(PreFilterState)
        out.constraints = self.constraints
        out.counts = [dict(c) for c in self.counts]
        out.domains = list(self.domains)
        out.self_match = self.self_match
        out._mins = list(self._mins)
        return out


class PreScoreState:
    """Soft constraints, their per-value counts, the nodes left unscored and each constraint's weight."""

    __slots__ = ("constraints", "ignored", "counts", "weights", "namespace", "tables", "predicates")

    def __init__(self, constraints: list[Constraint], namespace: str, counter: NodeMatchCounter) -> None:
        self.constraints = constraints
        self.ignored: set[str] = set()
        self.counts: list[dict[str, int]] = [{} for _ in constraints]
        self.weights: list[float] = []
        self.namespace = namespace
        self.tables = [counter.table(("spread", namespace, c.selector)) for c in constraints]
        self.predicates = [spread_predicate(c.selector, namespace) for c in constraints]

    def clone(self) -> "PreScoreState":
        return self


# -- the plugin -------------------------------------------------------------------------------------

class PodTopologySpread(PreFilterPlugin, PreFilterExtensions, FilterPlugin, PreScorePlugin, ScorePlugin,
                        EnqueueExtensions):
    """kube-scheduler's PodTopologySpread (Filter on hard constraints, Score on soft and default ones)."""

    name = NAME

    def __init__(self, args: dict, handle: Any) -> None:
        self.handle = handle
        self.system_defaulted = args["defaultingType"] == SYSTEM_DEFAULTING
        raw = list(SYSTEM_DEFAULT_CONSTRAINTS) if self.system_defaulted else list(args["defaultConstraints"])
        self.default_constraints = raw
        self._default_hard = any(c.get("whenUnsatisfiable") == DO_NOT_SCHEDULE for c in raw)
        self._default_soft = any(c.get("whenUnsatisfiable") == SCHEDULE_ANYWAY for c in raw)
        self.counter = NodeMatchCounter()
        self._listers: dict[str, Any] = {}
        informers = getattr(handle, "informers", None)
        if informers is not None and raw:
            # Asked for here so that they sync before the first cycle.
            for kind in ("Service", "ReplicationController", "ReplicaSet", "StatefulSet"):
                try:
                    self._listers[kind] = informers.informer(kind)
                except Exception:  # a kind this cluster/runtime does not know (ReplicationController)
                    continue

    # -- constraints of a pod ---------------------------------------------------------------------

    def _own(self, pod: PodInfo) -> _PodConstraints:
        return pod.cached(_PARSED_KEY, _PodConstraints)

    def default_selector(self, pod: PodInfo) -> LabelSelector:
        """Selectors of the Services, RCs, ReplicaSets and StatefulSets owning/selecting the pod (DefaultSelector)."""
        if not self._listers:
            return LabelSelector.everything()
        labels = pod.labels
        label_set: dict[str, str] = {}
        services = self._listers.get("Service")
        if services is not None:
            for svc in services.store.by_index("namespace", pod.namespace):
                sel = (svc.get("spec") or {}).get("selector")
                if sel is None:
                    continue  # a nil selector selects nothing
                if all(labels.get(k) == v for k, v in sel.items()):
                    label_set.update(sel)
        reqs = [Requirement(k, selectors.EQUALS, [v]) for k, v in label_set.items()]
        owner = next((r for r in (pod.pod.get("metadata") or {}).get("ownerReferences") or ()
                      if r.get("controller")), None)
        if owner is not None:
            kind, api_version = owner.get("kind"), owner.get("apiVersion") or ""
            group = api_version.split("/")[0] if "/" in api_version else ""
            lister = None
            if (kind, group) in (("ReplicationController", ""), ("ReplicaSet", "apps"), ("StatefulSet", "apps")):
                lister = self._listers.get(kind)
            obj = lister.store.get(f"{pod.namespace}/{owner.get('name', '')}") if lister is not None else None
            if obj is not None:
                sel = (obj.get("spec") or {}).get("selector")
                if kind == "ReplicationController":
                    label_set.update(sel or {})
                    reqs = [Requirement(k, selectors.EQUALS, [v]) for k, v in label_set.items()]
                elif sel is not None:
                    try:
                        reqs.extend(label_selector_from_dict(sel).requirements)
                    except ValueError:
                        pass
        return LabelSelector(reqs) if reqs else LabelSelector.everything()

    def _default_constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        constraints = parse_constraints(self.default_constraints, pod.labels, action)
        if not constraints:
            return []
        selector = self.default_selector(pod)
        if selector.empty:
            return []
        for c in constraints:
            c.selector = selector
        return constraints

    # -- PreFilter ------------------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Any):
        own = self._own(pod)
        if own.has_any:
            if own.error:
                return None, Status.error(f"obtaining pod's hard topology spread constraints: {own.error}")
            constraints = own.hard
        elif self._default_hard:
            constraints = self._default_constraints(pod, DO_NOT_SCHEDULE)
        else:
            constraints = []
        if not constraints:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, self._pre_filter_state(pod, constraints, snapshot.node_infos))
        return None, None

    def _pre_filter_state(self, pod: PodInfo, constraints: list[Constraint],
                          node_infos: Iterable[NodeInfo]) -> PreFilterState:
        affinity = RequiredNodeAffinity(pod.pod)
        need_policy = [(c.honor_affinity and not affinity.empty) or c.honor_taints for c in constraints]
        predicates = [spread_predicate(c.selector, pod.namespace) for c in constraints]
        tables = [self.counter.table(("spread", pod.namespace, c.selector)) for c in constraints]
        count_pods = self.counter.count
        counts: list[dict[str, int]] = [{} for _ in constraints]
        for ni in node_infos:
            labels = ni.labels
            if not _node_has_all_keys(labels, constraints):
                continue
            for i, c in enumerate(constraints):
                if need_policy[i] and not c.includes_node(pod, ni, affinity):
                    continue
                value = labels[c.topology_key]
                n = count_pods(tables[i], ni, predicates[i]) if not c.selector.empty else 0
                d = counts[i]
                d[value] = d.get(value, 0) + n
        self_match = [1 if c.selector.matches(pod.labels) else 0 for c in constraints]
        return PreFilterState(constraints, counts, self_match)

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        self._update_with_pod(state, pod, to_add, node, 1)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status | None:
        self._update_with_pod(state, pod, to_remove, node, -1)
        return None

    def _update_with_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo, delta: int) -> None:
        s: PreFilterState | None = state.read(_PRE_FILTER_KEY)
        if s is None or other.namespace != pod.namespace or node is None:
            return
        labels = node.labels
        if not _node_has_all_keys(labels, s.constraints):
            return
        affinity = RequiredNodeAffinity(pod.pod)
        for i, c in enumerate(s.constraints):
            if not c.selector.matches(other.labels):
                continue
            if not c.includes_node(pod, node, affinity):
                continue
            s.update(i, labels[c.topology_key], delta)

    # -- Filter ---------------------------------------------------------------------------------------

    def _state(self, state: CycleState) -> PreFilterState | Status:
        s = state.read(_PRE_FILTER_KEY)
        if s is None:
            return Status.error(f'reading "{_PRE_FILTER_KEY}" from cycleState: not found')
        return s

    @staticmethod
    def _check(s: PreFilterState, labels: Mapping[str, str]) -> int:
        """0 if the node fits, else the failure code."""
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                return UNSCHEDULABLE_AND_UNRESOLVABLE
            if s.counts[i].get(value, 0) + s.self_match[i] - s.min_match(i) > c.max_skew:
                return UNSCHEDULABLE
        return 0

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s = self._state(state)
        if isinstance(s, Status):
            return s
        code = self._check(s, node.labels)
        if code == UNSCHEDULABLE_AND_UNRESOLVABLE:
            return Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
        if code == UNSCHEDULABLE:
            return Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)
        return None

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        s = self._state(state)
        if isinstance(s, Status):
            raise RuntimeError(s.message())
        infos = snapshot.node_infos
        check = self._check
        codes = np.fromiter((check(s, infos[r].labels) for r in rows), dtype=np.int64, count=len(rows))
        failures = []
        missing = codes == UNSCHEDULABLE_AND_UNRESOLVABLE
        if missing.any():
            failures.append(Failure(UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_NODE_LABEL_NOT_MATCH, missing))
        skewed = codes == UNSCHEDULABLE
        if skewed.any():
            failures.append(Failure(UNSCHEDULABLE, ERR_REASON_CONSTRAINTS_NOT_MATCH, skewed))
        return BatchFilterResult(codes == 0, failures)

    # -- Score ----------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        own = self._own(pod)
        if own.has_any:
            if own.error:
                return Status.error(f"obtaining pod's soft topology spread constraints: {own.error}")
            constraints = own.soft
        elif self._default_soft:
            constraints = self._default_constraints(pod, SCHEDULE_ANYWAY)
        else:
            constraints = []
        if not constraints or len(snapshot) == 0:
            return Status.skip()
        # System defaults do not require every key, so zone-less nodes still get hostname spreading.
        require_all = own.has_any or not self.system_defaulted
        s = PreScoreState(constraints, pod.namespace, self.counter)
        infos = snapshot.node_infos
        sizes = [0] * len(constraints)
        for r in rows:
            ni = infos[r]
            labels = ni.labels
            if require_all and not _node_has_all_keys(labels, constraints):
                s.ignored.add(ni.name)
                continue
            for i, c in enumerate(constraints):
                if c.topology_key == LABEL_HOSTNAME:
                    continue  # per-node counts come in Score
                value = labels.get(c.topology_key, "")
                if value not in s.counts[i]:
                    s.counts[i][value] = 0
                    sizes[i] += 1
        for i, c in enumerate(constraints):
            size = len(rows) - len(s.ignored) if c.topology_key == LABEL_HOSTNAME else sizes[i]
            s.weights.append(math.log(size + 2))

        affinity = RequiredNodeAffinity(pod.pod)
        need_policy = [(c.honor_affinity and not affinity.empty) or c.honor_taints for c in constraints]
        predicates, tables = s.predicates, s.tables
        count_pods = self.counter.count
        if all(c.topology_key == LABEL_HOSTNAME for c in constraints):
            infos = ()  # every count is per node, taken in Score
        for ni in infos:
            labels = ni.labels
            if require_all and not _node_has_all_keys(labels, constraints):
                continue
            for i, c in enumerate(constraints):
                counts = s.counts[i]
                value = labels.get(c.topology_key, "")
                if value not in counts or c.topology_key == LABEL_HOSTNAME:
                    continue
                if need_policy[i] and not c.includes_node(pod, ni, affinity):
                    continue
                if not c.selector.empty:
                    counts[value] += count_pods(tables[i], ni, predicates[i])
        state.write(_PRE_SCORE_KEY, s)
        return None

    def _score_one(self, s: PreScoreState, ni: NodeInfo) -> int:
        if ni.name in s.ignored:
            return 0
        labels = ni.labels
        total = 0.0
        for i, c in enumerate(s.constraints):
            value = labels.get(c.topology_key)
            if value is None:
                continue
            if c.topology_key == LABEL_HOSTNAME:
                cnt = 0 if c.selector.empty else NodeMatchCounter.count(s.tables[i], ni, s.predicates[i])
            else:
                cnt = s.counts[i].get(value, 0)
            total += cnt * s.weights[i] + (c.max_skew - 1)
        # Go's math.Round: half away from zero (scores are never negative).
        return int(math.floor(total + 0.5))

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        s: PreScoreState | None = state.read(_PRE_SCORE_KEY)
        return 0 if s is None else self._score_one(s, node)

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        s: PreScoreState | None = state.read(_PRE_SCORE_KEY)
        if s is None:
            return np.zeros(len(rows), dtype=np.int64)
        infos = snapshot.node_infos
        return np.fromiter((self._score_one(s, infos[r]) for r in rows), dtype=np.int64, count=len(rows))

    def normalize_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray,
                        scores: np.ndarray) -> Status | None:
        s: PreScoreState | None = state.read(_PRE_SCORE_KEY)
        if s is None or len(scores) == 0:
            return None
        if s.ignored:
            infos = snapshot.node_infos
            valid = np.fromiter((infos[r].name not in s.ignored for r in rows), dtype=bool, count=len(rows))
        else:
            valid = np.ones(len(scores), dtype=bool)
        if not valid.any():
            scores[:] = 0
            return None
        lo = int(scores[valid].min())
        hi = int(scores[valid].max())
        if hi == 0:
            out = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        else:
            out = MAX_NODE_SCORE * (hi + lo - scores.astype(np.int64)) // hi
        out[~valid] = 0
        scores[:] = out
        return None

    # -- events ---------------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Add", self._pod_hint),
            ClusterEvent("Pod", "Update", self._pod_hint),
            ClusterEvent("Pod", "Delete", self._pod_hint),
            ClusterEvent("Node", "Add", self._node_hint),
            ClusterEvent("Node", "Update", self._node_hint),
            ClusterEvent("Node", "Delete", self._node_hint),
        ]

    def _constraints_for_hints(self, pod: Mapping[str, Any]) -> list[Constraint]:
        own = _PodConstraints(pod)
        return own.hard + own.soft

    def _pod_hint(self, pod: Mapping[str, Any], old: Any, new: Any) -> bool:
        """A scheduled pod of the namespace that matches (or matched) a constraint's selector and changed."""
        constraints = self._constraints_for_hints(pod)
        if not constraints:
            return True  # only default constraints: their selectors are not cheap to know here
        namespace = (pod.get("metadata") or {}).get("namespace", "")

        def matching(obj: Any) -> bool:
            if not isinstance(obj, Mapping):
                return False
            meta = obj.get("metadata") or {}
            if not (obj.get("spec") or {}).get("nodeName") or meta.get("namespace", "") != namespace:
                return False
            labels = meta.get("labels") or {}
            return any(c.selector.matches(labels) for c in constraints)

        if not (matching(old) or matching(new)):
            return False
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            return ((old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels")
                    or (old.get("spec") or {}).get("nodeName") != (new.get("spec") or {}).get("nodeName"))
        return True

    def _node_hint(self, pod: Mapping[str, Any], old: Any, new: Any) -> bool:
        """A node that carries (or carried) one of the constraints' topology keys."""
        constraints = self._constraints_for_hints(pod)
        keys = {c.topology_key for c in constraints} or {LABEL_ZONE, LABEL_HOSTNAME}

        def labels_of(obj: Any) -> Mapping[str, str]:
            return ((obj.get("metadata") or {}).get("labels") or {}) if isinstance(obj, Mapping) else {}

        old_l, new_l = labels_of(old), labels_of(new)
        if isinstance(old, Mapping) and isinstance(new, Mapping):
            if any(old_l.get(k) != new_l.get(k) for k in keys):
                return True
            return (old.get("spec") or {}).get("taints") != (new.get("spec") or {}).get("taints")
        return any(k in old_l or k in new_l for k in keys)


# -- args -------------------------------------------------------------------------------------------

def _go_quote(v: Any) -> str:
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def validate_args(args: Mapping[str, Any] | None) -> dict:
    """PodTopologySpreadArgs with kube's v1 defaults, checked like ValidatePodTopologySpreadArgs."""
    args = dict(args or {})
    unknown = sorted(set(args) - {"defaultConstraints", "defaultingType", "apiVersion", "kind"})
    if unknown:
        raise ValueError(f"{unknown[0]}: Invalid value: unknown field")
    defaulting = args.get("defaultingType")
    if defaulting is None or defaulting == "":
        defaulting = SYSTEM_DEFAULTING
    constraints = args.get("defaultConstraints")
    if constraints is None:
        constraints = []
    errs: list[str] = []
    if not isinstance(constraints, list):
        raise ValueError("defaultConstraints: Invalid value: must be a list")
    if not isinstance(defaulting, str) or defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        errs.append(f"defaultingType: Unsupported value: {_go_quote(defaulting)}: supported values: "
                    f'"{SYSTEM_DEFAULTING}", "{LIST_DEFAULTING}"')
    elif defaulting == SYSTEM_DEFAULTING and constraints:
        errs.append(f"defaultingType: Invalid value: {_go_quote(defaulting)}: when .defaultConstraints are not empty")
    seen: list[tuple[str, str]] = []
    for i, c in enumerate(constraints):
        p = f"defaultConstraints[{i}]"
        if not isinstance(c, Mapping):
            errs.append(f"{p}: Invalid value: must be an object")
            continue
        skew = c.get("maxSkew")
        if not _int_field(skew) or skew <= 0:
            errs.append(f"{p}.maxSkew: Invalid value: {skew}: not in valid range (0, inf)")
        key = c.get("topologyKey")
        if not key:
            errs.append(f"{p}.topologyKey: Required value: can not be empty")
        elif not isinstance(key, str):
            errs.append(f"{p}.topologyKey: Invalid value: must be a string")
        else:
            try:
                label_selector_from_dict({"matchExpressions": [{"key": key, "operator": "Exists"}]})
            except ValueError as e:
                msg = str(e)
                errs.append(f"{p}.topologyKey" + msg[len("key"):] if msg.startswith("key:")
                            else f"{p}.topologyKey: {msg}")
        when = c.get("whenUnsatisfiable")
        if not when:
            errs.append(f"{p}.whenUnsatisfiable: Required value: can not be empty")
        elif when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            errs.append(f"{p}.whenUnsatisfiable: Unsupported value: {_go_quote(when)}: supported values: "
                        f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"')
        if c.get("labelSelector") is not None:
            errs.append(f"{p}.labelSelector: Forbidden: constraint must not define a selector, "
                        "as they deduced for each pod")
        min_domains = c.get("minDomains")
        if min_domains is not None and (not _int_field(min_domains) or min_domains <= 0):
            errs.append(f"{p}.minDomains: Invalid value: {min_domains}: must be greater than 0")
        pair = (key, when)
        if pair in seen:
            errs.append(f"defaultConstraints[{i}]: Duplicate value: \"{{{key}, {when}}}\"")
        seen.append(pair)
    if errs:
        raise ValueError(", ".join(errs))
    return {"defaultingType": defaulting, "defaultConstraints": [dict(c) for c in constraints]}


def new(args: dict, handle: Any) -> PodTopologySpread:
    """Registry factory."""
    return PodTopologySpread(validate_args(args), handle)
