"""ClusterRole aggregation (kube-controller-manager's ``clusterrole-aggregation`` controller).

A ClusterRole with ``aggregationRule.clusterRoleSelectors`` gets, as its ``rules``, the union of
the rules of every other ClusterRole a selector matches: selector by selector in their order, the
roles each matches by name, a rule kept only the first time it appears (compared as kube's
semantic equality does, so an absent list and an empty one are the same). The role is written
only when that list differs from what it holds, with an update carrying the cached
resourceVersion: a stale cache is a Conflict and a retry, and a role deleted meanwhile is never
recreated (kube applies instead, which can). Chains such as view → edit → admin converge because
the write to ``view`` is itself a ClusterRole change that requeues ``edit``, and so on.

Keys are aggregating ClusterRoles' names. A change to any ClusterRole queues the role itself when
it aggregates, and every aggregating role one of whose selectors matches its old or new labels
(kube queues every aggregating role on every change; the result is the same). A selector the API
server would refuse (one stored before it validated them) is a terminal error naming the role:
retrying cannot fix it, editing the role queues it again.

The API server's RBAC authorizer computes aggregation itself at check time, so this controller
changes what ``kubectl get clusterrole admin -o yaml`` shows, not what anyone may do.
It needs ``list``, ``watch``, ``update`` and ``escalate`` on ``clusterroles.rbac.authorization.k8s.io``
(the API server refuses a role with rules its writer does not hold, unless it may escalate); it reads
only its cache. kube's role for it also grants ``get`` and ``patch`` (its apply).
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict
from koordinator.runtime import errors
from koordinator.runtime.controller import Result, TerminalError
from koordinator.runtime.kinds import Kind, UnknownKind

log = logging.getLogger("koordinator.controllers.clusterroleaggregation")

Obj = dict[str, Any]
NAME = "clusterrole-aggregation"
WORKERS = 2
CLUSTER_ROLE = Kind("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", False)
# Index of the informer's cache: aggregating ClusterRoles are filed under this value.
AGGREGATING_INDEX = "aggregating"
_AGGREGATING = "true"
# PolicyRule's fields; anything else in a stored rule is not part of its identity.
_RULE_FIELDS = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")


def is_aggregating(role: Obj) -> bool:
    """Whether the role has an aggregationRule (kube acts on a non-nil one, even without selectors)."""
    return isinstance(role.get("aggregationRule"), dict)


def _aggregating_index(role: Obj) -> list[str]:
    return [_AGGREGATING] if is_aggregating(role) else []


def _name(role: Obj) -> str:
    return (role.get("metadata") or {}).get("name", "")


def _labels(role: Obj) -> dict[str, str]:
    return (role.get("metadata") or {}).get("labels") or {}


def _selector_dicts(role: Obj) -> list[Any]:
    selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors")
    return selectors if isinstance(selectors, list) else []


def selectors_of(role: Obj) -> list[LabelSelector]:
    """The role's clusterRoleSelectors, in order; SelectorError names the first invalid one."""
    parsed = []
    for i, sel in enumerate(_selector_dicts(role)):
        try:
            parsed.append(label_selector_from_dict(sel if isinstance(sel, dict) else {}))
        except SelectorError as err:
            raise SelectorError(f"aggregationRule.clusterRoleSelectors[{i}]: {err}") from None
    return parsed


def _rule_identity(rule: Any) -> tuple:
    """What semantic equality compares: each field's list, an absent or null one equal to []."""
    rule = rule if isinstance(rule, dict) else {}
    return tuple(tuple(rule.get(f) or ()) for f in _RULE_FIELDS)


def rules_equal(a: list[Any] | None, b: list[Any] | None) -> bool:
    """Two rule lists as kube's ``equality.Semantic.DeepEqual`` compares them (order matters)."""
    return [_rule_identity(r) for r in a or ()] == [_rule_identity(r) for r in b or ()]


def aggregated_rules(role: Obj, roles: list[Obj]) -> list[Obj]:
    """The rules ``role`` aggregates from ``roles`` (kube's ``syncClusterRole``): per selector, the
    matching roles by name, itself excluded, each rule once in first-seen order."""
    name = _name(role)
    by_name = sorted(roles, key=_name)
    rules: list[Obj] = []
    seen: set[tuple] = set()
    for selector in selectors_of(role):
        for other in by_name:
            if _name(other) == name or not selector.matches(_labels(other)):
                continue
            for rule in other.get("rules") or ():
                identity = _rule_identity(rule)
                if identity not in seen:
                    seen.add(identity)
                    rules.append(copy.deepcopy(rule))
    return rules


class ClusterRoleAggregation:
    """Keeps aggregating ClusterRoles' ``rules`` current (see the module docstring)."""

    def __init__(self, runtime: Any) -> None:
        self.client = runtime.client
        try:
            self.client.kinds.get(f"{CLUSTER_ROLE.api_version}/{CLUSTER_ROLE.kind}")
        except UnknownKind:
            self.client.kinds.register(CLUSTER_ROLE)
        self.roles = runtime.informers.informer(CLUSTER_ROLE)
        try:
            self.roles.add_indexer(AGGREGATING_INDEX, _aggregating_index)
        except ValueError:
            pass  # the informer is shared: the index is already there
        self.controller = runtime.controller(NAME, self.reconcile, workers=WORKERS)
        self.controller.watch(self.roles, map_func=self.affected)

    def affected(self, role: Obj) -> list[str]:
        """The aggregating roles whose rules may depend on this state of ``role``: itself when it
        aggregates, and those with a selector matching its labels."""
        name, labels = _name(role), _labels(role)
        keys = [name] if is_aggregating(role) else []
        for aggregator in self.roles.store.by_index(AGGREGATING_INDEX, _AGGREGATING):
            other = _name(aggregator)
            if other == name:
                continue
            try:
                selectors = selectors_of(aggregator)
            except SelectorError:
                continue  # its own reconcile reports it
            if any(s.matches(labels) for s in selectors):
                keys.append(other)
        return keys

    def reconcile(self, key: str) -> Result | None:
        role = self.roles.store.get(key)
        if role is None or not is_aggregating(role):
            return None
        try:
            rules = aggregated_rules(role, self.roles.store.list())
        except SelectorError as err:
            raise TerminalError(f"ClusterRole {key}: {err}") from None
        if rules_equal(rules, role.get("rules")):
            return None
        updated = copy.deepcopy(role)
        updated["rules"] = rules
        log.debug("updating the rules of ClusterRole %s (%d rules)", key, len(rules))
        try:
            self.client.update(updated)
        except errors.NotFound:
            pass  # deleted meanwhile: nothing to aggregate into
        return None


def register(runtime: Any) -> ClusterRoleAggregation:
    """Register the controller on ``runtime``."""
    return ClusterRoleAggregation(runtime)
