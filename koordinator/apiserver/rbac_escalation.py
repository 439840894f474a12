"""RBAC privilege-escalation prevention, as kube-apiserver's RBAC storage enforces it.

Write access to Roles and bindings must not be a way to more access: a user may create or change a
Role/ClusterRole only with rules it holds itself (where the role applies), and bind a role only
when it holds that role's rules, unless

* it is in ``system:masters``,
* it may ``escalate`` the role (``escalate`` on ``roles``/``clusterroles``, for a role write), or
  ``bind`` it (``bind`` on the referenced ``roles``/``clusterroles`` by name, for a binding write).

As in kube, an update that changes only ``ownerReferences`` or ``finalizers`` (the garbage
collector's) is not checked, and a ClusterRole with an ``aggregationRule`` (before or after the
write) needs full authority: its rules come from roles yet to be written. The refusal is kube's
Forbidden, listing the rules the user lacks in kube's compact form.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from koordinator.apiserver import errors
from koordinator.apiserver.authorization import (
    MASTERS, Attributes, api_group_matches, non_resource_url_matches, resource_matches, resource_name_matches,
    verb_matches,
)

Obj = dict[str, Any]
RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_KINDS = {"Role": "roles", "ClusterRole": "clusterroles"}
BINDING_KINDS = {"RoleBinding": "rolebindings", "ClusterRoleBinding": "clusterrolebindings"}
#: What a ClusterRole with an aggregationRule may come to hold (kube's "fullAuthority").
FULL_AUTHORITY = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                  {"verbs": ["*"], "nonResourceURLs": ["*"]}]

#: (user, groups, namespace) -> (rules, resolution errors): the authorizer's ``rules_for``.
RulesFor = Callable[[str, Iterable[str], str], tuple[list[Obj], list[str]]]
#: Attributes -> allowed: the authorizer's decision on one request.
Authorize = Callable[[Attributes], bool]


def _strings(value: Any) -> list[str]:
    """The strings of a list; anything else is left for validation, which runs after this check, to refuse."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _rules(value: Any) -> list[Obj]:
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def _atoms(rule: Obj) -> Iterable[Obj]:
    """A rule broken into rules of one verb, group, resource (or URL) and name each (kube's BreakdownRule)."""
    verbs = _strings(rule.get("verbs"))
    for group in _strings(rule.get("apiGroups")):
        for resource in _strings(rule.get("resources")):
            for verb in verbs:
                names: list[str | None] = [*_strings(rule.get("resourceNames"))] or [None]
                for name in names:
                    atom = {"apiGroups": [group], "resources": [resource], "verbs": [verb]}
                    if name is not None:
                        atom["resourceNames"] = [name]
                    yield atom
    for url in _strings(rule.get("nonResourceURLs")):
        for verb in verbs:
            yield {"nonResourceURLs": [url], "verbs": [verb]}


def _covers(owner: Obj, atom: Obj) -> bool:
    """Whether ``owner`` grants everything ``atom`` (one verb/group/resource/name or URL) grants."""
    verb = atom["verbs"][0]
    if not verb_matches(owner, verb):
        return False
    if "nonResourceURLs" in atom:
        return non_resource_url_matches(owner, atom["nonResourceURLs"][0])
    group, resource = atom["apiGroups"][0], atom["resources"][0]
    if not api_group_matches(owner, group):
        return False
    # A wildcard asked for must be held as a wildcard: matching "*" literally does exactly that.
    name, _, sub = resource.partition("/")
    if not (resource_matches(owner, resource, "") or (sub and resource_matches(owner, name, sub))):
        return False
    names = atom.get("resourceNames")
    if names is None:
        return not owner.get("resourceNames")
    return resource_name_matches(owner, names[0])


def missing_rules(owner_rules: list[Obj], wanted: list[Obj]) -> list[Obj]:
    """The parts of ``wanted`` that no rule of ``owner_rules`` covers, one per verb/resource/name."""
    missing = []
    for rule in wanted:
        for atom in _atoms(rule):
            if not any(_covers(owner, atom) for owner in owner_rules) and atom not in missing:
                missing.append(atom)
    return missing


def _go_quote(value: str) -> str:
    """A string as Go's %q prints it."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _go_strings(values: list[str]) -> str:
    """A []string as Go's %q prints it: ["a" "b"]."""
    return "[" + " ".join(_go_quote(v) for v in values) + "]"


def compact_string(rule: Obj) -> str:
    """kube's ``CompactString`` of a PolicyRule."""
    parts = [f"{label}:{_go_strings(rule[key])}" for key, label in (
        ("apiGroups", "APIGroups"), ("resources", "Resources"), ("nonResourceURLs", "NonResourceURLs"),
        ("resourceNames", "ResourceNames"), ("verbs", "Verbs")) if rule.get(key)]
    return "{" + ", ".join(parts) + "}"


def _compact(atoms: list[Obj]) -> list[Obj]:
    """Atoms that differ only in their verb, merged (kube's CompactRules), in first-seen order."""
    merged: dict[tuple, Obj] = {}
    for atom in atoms:
        key = tuple((k, tuple(v)) for k, v in sorted(atom.items()) if k != "verbs")
        if key in merged:
            merged[key]["verbs"].append(atom["verbs"][0])
        else:
            merged[key] = {**atom, "verbs": list(atom["verbs"])}
    return list(merged.values())


# Fields the garbage collector changes and the server sets: an update changing nothing else is not checked.
_GC_AND_SERVER_FIELDS = ("ownerReferences", "finalizers", "resourceVersion", "managedFields", "generation")


def only_gc_fields_changed(obj: Obj, old: Obj | None) -> bool:
    """kube's IsOnlyMutatingGCFields: ``obj`` equals ``old`` but for ownerReferences and finalizers."""
    if old is None:
        return False

    def rest(o: Obj) -> Obj:
        md = {k: v for k, v in (o.get("metadata") or {}).items() if k not in _GC_AND_SERVER_FIELDS}
        return {**o, "metadata": md}

    return rest(obj) == rest(old)


class EscalationCheck:
    """Refuses role and binding writes that would grant their writer more than it holds."""

    def __init__(self, rules_for: RulesFor, authorize: Authorize,
                 role_rules: Callable[[Obj, str], list[Obj] | None]) -> None:
        self.rules_for = rules_for
        self.authorize = authorize
        # (roleRef, binding namespace) -> the referenced role's rules (aggregation applied), None if absent.
        self.role_rules = role_rules

    def check(self, kind: str, obj: Obj, old: Obj | None, user: dict[str, Any]) -> None:
        """Raise Forbidden if ``user`` may not write ``obj`` (``old``: the stored object of an update)."""
        if kind not in ROLE_KINDS and kind not in BINDING_KINDS:
            return
        name = user.get("username", "")
        groups = list(user.get("groups") or [])
        if MASTERS in groups or only_gc_fields_changed(obj, old):
            return
        namespaced = kind in ("Role", "RoleBinding")
        namespace = (obj.get("metadata") or {}).get("namespace", "") if namespaced else ""
        object_name = (obj.get("metadata") or {}).get("name", "")
        if kind in ROLE_KINDS:
            resource = ROLE_KINDS[kind]
            if self._allowed(name, groups, "escalate", resource, namespace, object_name):
                return
            self._confirm(name, groups, namespace, _rules(obj.get("rules")), resource, object_name)
            if kind == "ClusterRole" and (obj.get("aggregationRule") is not None
                                          or (old or {}).get("aggregationRule") is not None):
                held, _ = self.rules_for(name, groups, "")
                if missing_rules(held, FULL_AUTHORITY):
                    raise errors.forbidden(resource, object_name,
                                           "must have cluster-admin privileges to use the aggregationRule",
                                           RBAC_GROUP)
            return
        resource = BINDING_KINDS[kind]
        raw_ref = obj.get("roleRef") if isinstance(obj.get("roleRef"), dict) else {}
        # Only well-typed kind and name: the rest is validation's to refuse, after this check.
        ref = {k: raw_ref[k] for k in ("apiGroup", "kind", "name") if isinstance(raw_ref.get(k), str)}
        ref_resource = ROLE_KINDS.get(ref.get("kind", ""), "")
        if ref_resource and self._allowed(name, groups, "bind", ref_resource, namespace, ref.get("name", "")):
            return
        wanted = self.role_rules(ref, namespace)
        if wanted is None:
            # kube resolves the role before comparing: a missing one is the refusal's reason.
            missing = f'{ref_resource or ref.get("kind", "")}.{RBAC_GROUP} {_go_quote(ref.get("name", ""))}'
            raise errors.forbidden(resource, object_name, f"{missing} not found", RBAC_GROUP)
        self._confirm(name, groups, namespace, wanted, resource, object_name)

    def _confirm(self, user: str, groups: list[str], namespace: str, wanted: list[Obj], resource: str,
                 object_name: str) -> None:
        """kube's ConfirmNoEscalation: Forbidden listing what ``wanted`` has beyond the user's rules."""
        held, problems = self.rules_for(user, groups, namespace)
        missing = missing_rules(held, wanted)
        if not missing:
            return
        message = (f"user {_go_quote(user)} (groups={_go_strings(groups)}) is attempting to grant RBAC permissions "
                   "not currently held:\n" + "\n".join(compact_string(r) for r in _compact(missing)))
        if problems:
            message += "; resolution errors: [" + " ".join(problems) + "]"
        raise errors.forbidden(resource, object_name, message, RBAC_GROUP)

    def _allowed(self, user: str, groups: list[str], verb: str, resource: str, namespace: str, name: str) -> bool:
        attrs = Attributes(user, tuple(groups), verb, True, RBAC_GROUP, "v1", resource, "", namespace, name)
        return self.authorize(attrs)
