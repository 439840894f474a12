"""Authorization of API requests: request attributes, the AlwaysAllow and RBAC authorizers, 403s.

The request attributes are what kube-apiserver's ``RequestInfoFactory`` derives from a request
(verb, API group, resource, subresource, namespace, name, or the path of a non-resource URL), and
the RBAC authorizer evaluates Roles, ClusterRoles (aggregation included), RoleBindings and
ClusterRoleBindings as kube's ``rbac`` authorizer does. It reads them from the server's store
through an index that is rebuilt only after one of them changed (the store tells it through the
same watcher interface that watches use), so a request costs a few dict lookups and a scan of the
rules bound to its user.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from koordinator.apiserver import errors
from koordinator.apiserver.store import Event, Store
from koordinator.apis.selectors import SelectorError, label_selector_from_dict

Obj = dict[str, Any]

MODES = ("AlwaysAllow", "RBAC")
MASTERS = "system:masters"
RBAC_GROUP = "rbac.authorization.k8s.io"

# Storage keys of the four RBAC kinds (see ResourceType.storage_key).
ROLES, ROLE_BINDINGS = f"{RBAC_GROUP}/roles", f"{RBAC_GROUP}/rolebindings"
CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS = f"{RBAC_GROUP}/clusterroles", f"{RBAC_GROUP}/clusterrolebindings"
RBAC_STORAGE = (ROLES, ROLE_BINDINGS, CLUSTER_ROLES, CLUSTER_ROLE_BINDINGS)

_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                 "DELETE": "delete"}
# /api/v1/watch/pods and /api/v1/proxy/...: the verb is in the path (kube's "special verbs").
_SPECIAL_VERBS = ("proxy", "watch")
# /api/v1/namespaces/NAME/status is the namespace's subresource, not a resource inside it.
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True)
class Attributes:
    """What one request asks to do, as an authorizer sees it (kube's ``authorizer.Attributes``)."""

    user: str
    groups: tuple[str, ...]
    verb: str
    resource_request: bool
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    def for_user(self, user: str, groups: Iterable[str]) -> Attributes:
        """The same request made by another user."""
        return Attributes(user, tuple(groups), self.verb, self.resource_request, self.api_group, self.api_version,
                          self.resource, self.subresource, self.namespace, self.name, self.path)


def request_attributes(method: str, path: str, query: dict[str, str], user: str = "",
                       groups: Iterable[str] = ()) -> Attributes:
    """The attributes of a request, derived from its method, path and query as kube-apiserver does."""
    groups = tuple(groups)
    parts = [p for p in path.split("/") if p]
    method = method.upper()
    # A non-resource request's verb is its method in lower case (HEAD reads as a get).
    non_resource = Attributes(user, groups, "get" if method in ("GET", "HEAD") else method.lower(), False, path=path)
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return non_resource
    rest = parts[1:]
    group = ""
    if parts[0] == "apis":
        if len(rest) < 3:
            return non_resource
        group, rest = rest[0], rest[1:]
    version, rest = rest[0], rest[1:]
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return non_resource
        verb, rest = rest[0], rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces":
        if len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if query.get("watch") in ("1", "true") else "list"
        # A list narrowed to one name by metadata.name is authorised as that object's (kube does so too).
        name = _exact_name(query.get("fieldSelector", ""))
    elif not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user, groups, verb, True, group, version, resource, subresource, namespace, name, path)


def _exact_name(field_selector: str) -> str:
    for term in field_selector.split(","):
        key, sep, value = term.partition("=")
        value = value.lstrip("=")  # "==" means "=" too
        if sep and key.strip() == "metadata.name" and not key.endswith("!") and value and "/" not in value:
            return value
    return ""


# -- rule matching (kube's rbac/v1 helpers) ---------------------------------------


def verb_matches(rule: Obj, verb: str) -> bool:
    verbs = rule.get("verbs") or ()
    return "*" in verbs or verb in verbs


def api_group_matches(rule: Obj, group: str) -> bool:
    groups = rule.get("apiGroups") or ()
    return "*" in groups or group in groups


def resource_matches(rule: Obj, resource: str, subresource: str) -> bool:
    """``pods``, ``pods/status``, ``*`` and ``*/status`` as kube matches them."""
    combined = f"{resource}/{subresource}" if subresource else resource
    for candidate in rule.get("resources") or ():
        if candidate == "*" or candidate == combined:
            return True
        if subresource and candidate == f"*/{subresource}":
            return True
    return False


def resource_name_matches(rule: Obj, name: str) -> bool:
    names = rule.get("resourceNames") or ()
    return not names or name in names


def non_resource_url_matches(rule: Obj, path: str) -> bool:
    """An exact path, ``*``, or a prefix ending with ``*``."""
    for url in rule.get("nonResourceURLs") or ():
        if url == "*" or url == path or (url.endswith("*") and path.startswith(url[:-1])):
            return True
    return False


def rule_allows(attrs: Attributes, rule: Obj) -> bool:
    """Whether one PolicyRule grants the request."""
    if not verb_matches(rule, attrs.verb):
        return False
    if attrs.resource_request:
        return (api_group_matches(rule, attrs.api_group) and resource_matches(rule, attrs.resource, attrs.subresource)
                and resource_name_matches(rule, attrs.name))
    return non_resource_url_matches(rule, attrs.path)


# -- authorizers --------------------------------------------------------------------


@dataclass
class Decision:
    """An authorizer's answer: allowed or not, and why (kube's reason string)."""

    allowed: bool
    reason: str = ""


class AlwaysAllow:
    """Every request is allowed (``--authorization-mode=AlwaysAllow``)."""

    mode = "AlwaysAllow"

    def authorize(self, attrs: Attributes) -> Decision:
        return Decision(True)

    def rules_for(self, user: str, groups: Iterable[str], namespace: str) -> tuple[list[Obj], list[str]]:
        return [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                {"verbs": ["*"], "nonResourceURLs": ["*"]}], []


def _subject_keys(subject: Obj, binding_namespace: str) -> str | None:
    """The index key a binding subject stands for: ``u:NAME`` or ``g:NAME``; None for one matching nobody."""
    kind, name = subject.get("kind"), subject.get("name") or ""
    if kind == "User":
        return f"u:{name}"
    if kind == "Group":
        return f"g:{name}"
    if kind == "ServiceAccount":
        namespace = subject.get("namespace") or binding_namespace
        return f"u:system:serviceaccount:{namespace}:{name}" if namespace and name else None
    return None


_RULE_FIELDS = ("verbs", "apiGroups", "resources", "resourceNames", "nonResourceURLs")


def _clean_rules(rules: Any) -> list[Obj]:
    """A role's rules with only well-typed fields: an object stored before the server checked types must
    not make authorization fail for everyone bound to it."""
    if not isinstance(rules, list):
        return []
    return [{k: [x for x in r[k] if isinstance(x, str)] for k in _RULE_FIELDS if isinstance(r.get(k), list)}
            for r in rules if isinstance(r, dict)]


def _dicts(value: Any) -> list[Obj]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _ref(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


class _Index:
    """The RBAC objects of one store state, arranged for lookups by subject."""

    def __init__(self, store: Store) -> None:
        self.cluster_roles: dict[str, Obj] = {name: e.obj() for name, e in store.items(CLUSTER_ROLES).items()}
        self.roles: dict[str, Obj] = {key: e.obj() for key, e in store.items(ROLES).items()}
        self.cluster_rules: dict[str, list[Obj]] = {
            name: self._aggregated(name, set()) for name in self.cluster_roles}
        # subject key -> [(binding description, roleRef)] of ClusterRoleBindings
        self.cluster_bindings: dict[str, list[tuple[str, Obj]]] = {}
        for name, e in store.items(CLUSTER_ROLE_BINDINGS).items():
            obj = e.obj()
            for subject in _dicts(obj.get("subjects")):
                key = _subject_keys(subject, "")
                if key:
                    self.cluster_bindings.setdefault(key, []).append(
                        (f"ClusterRoleBinding {name}", _ref(obj.get("roleRef"))))
        # (namespace, subject key) -> [(binding description, roleRef)] of RoleBindings
        self.bindings: dict[tuple[str, str], list[tuple[str, Obj]]] = {}
        for e in store.items(ROLE_BINDINGS).values():
            obj = e.obj()
            ns = obj["metadata"].get("namespace", "")
            for subject in _dicts(obj.get("subjects")):
                key = _subject_keys(subject, ns)
                if key:
                    self.bindings.setdefault((ns, key), []).append(
                        (f"RoleBinding {ns}/{obj['metadata']['name']}", _ref(obj.get("roleRef"))))

    def _aggregated(self, name: str, seen: set[str]) -> list[Obj]:
        """A ClusterRole's rules; an aggregating one's are those of the ClusterRoles its selectors match.

        kube's aggregation controller writes these into the role; here they are computed (nested
        aggregation follows the selected roles' own aggregation, a cycle contributes nothing).
        """
        role = self.cluster_roles[name]
        agg = role.get("aggregationRule")
        if not isinstance(agg, dict) or not agg.get("clusterRoleSelectors"):
            return _clean_rules(role.get("rules"))
        seen = seen | {name}
        selectors = []
        for sel in _dicts(agg.get("clusterRoleSelectors")):
            try:
                selectors.append(label_selector_from_dict(sel))
            except SelectorError:
                continue
        rules: list[Obj] = []
        for other in sorted(self.cluster_roles):
            if other in seen:
                continue
            labels = self.cluster_roles[other]["metadata"].get("labels") or {}
            if any(s.matches(labels) for s in selectors):
                for rule in self._aggregated(other, seen):
                    if rule not in rules:
                        rules.append(rule)
        return rules

    def role_rules(self, ref: Obj, namespace: str) -> tuple[list[Obj] | None, str]:
        """The rules a roleRef names, or None and kube's not-found message."""
        kind, name = ref.get("kind"), ref.get("name", "")
        if not isinstance(name, str):
            return None, f"roleRef name {name!r} is not a string"
        if kind == "ClusterRole":
            rules = self.cluster_rules.get(name)
            return rules, "" if rules is not None else f'clusterrole.{RBAC_GROUP} "{name}" not found'
        if kind == "Role" and namespace:
            role = self.roles.get(f"{namespace}/{name}")
            if role is not None:
                return _clean_rules(role.get("rules")), ""
            return None, f'role.{RBAC_GROUP} "{name}" not found'
        return None, f'unknown roleRef kind "{kind}"'


class _Invalidator:
    """A store watcher on one RBAC resource: any committed change marks the index stale."""

    start_rv = 0

    def __init__(self, storage: str, owner: RbacAuthorizer) -> None:
        self.storage = storage
        self.owner = owner

    def deliver(self, event: Event) -> None:
        self.owner.invalidate()


class RbacAuthorizer:
    """kube's RBAC authorizer over the server's own store (``--authorization-mode=RBAC``)."""

    mode = "RBAC"

    def __init__(self, store: Store) -> None:
        self.store = store
        self._index: _Index | None = None
        # (user, groups, namespace) -> (rules, errors): what a user's bindings grant in a namespace.
        self._rules_cache: dict[tuple[str, tuple[str, ...], str], tuple[list[Obj], list[str]]] = {}
        self.rebuilds = 0
        for storage in RBAC_STORAGE:
            store.add_watcher(_Invalidator(storage, self))

    def invalidate(self) -> None:
        """Forget the index (an RBAC object changed); the next request rebuilds it."""
        self._index = None
        self._rules_cache.clear()

    def _current(self) -> _Index:
        if self._index is None:
            self._index = _Index(self.store)
            self.rebuilds += 1
        return self._index

    def _bound(self, user: str, groups: tuple[str, ...], namespace: str) -> Iterator[tuple[str, Obj, str]]:
        index = self._current()
        keys = [f"u:{user}", *(f"g:{g}" for g in groups)]
        for key in keys:
            for source, ref in index.cluster_bindings.get(key, ()):
                yield source, ref, ""
        if namespace:
            for key in keys:
                for source, ref in index.bindings.get((namespace, key), ()):
                    yield source, ref, namespace

    def rules_for(self, user: str, groups: Iterable[str], namespace: str) -> tuple[list[Obj], list[str]]:
        """The rules bound to a user in ``namespace`` ("" for cluster scope), and the bindings' errors."""
        groups = tuple(groups)
        cache_key = (user, groups, namespace)
        cached = self._rules_cache.get(cache_key)
        if cached is not None:
            return cached
        index = self._current()
        rules: list[Obj] = []
        problems: list[str] = []
        for _source, ref, ns in self._bound(user, groups, namespace):
            found, problem = index.role_rules(ref, ns)
            if found is None:
                problems.append(problem)
            else:
                rules.extend(found)
        if len(self._rules_cache) > 4096:
            self._rules_cache.clear()
        self._rules_cache[cache_key] = (rules, problems)
        return rules, problems

    def role_ref_rules(self, ref: Obj, namespace: str) -> list[Obj] | None:
        """The rules a binding's roleRef names (aggregation applied), None when the role does not exist."""
        return self._current().role_rules(ref, namespace)[0]

    def authorize(self, attrs: Attributes) -> Decision:
        """Allowed when ``system:masters`` or a bound rule grants the request."""
        if MASTERS in attrs.groups:
            return Decision(True)
        rules, problems = self.rules_for(attrs.user, attrs.groups, attrs.namespace)
        for rule in rules:
            if rule_allows(attrs, rule):
                return Decision(True)
        reason = ""
        if problems:
            reason = "RBAC: " + (problems[0] if len(problems) == 1 else "[" + ", ".join(problems) + "]")
        return Decision(False, reason)


def new_authorizer(mode: str, store: Store) -> AlwaysAllow | RbacAuthorizer:
    """The authorizer of ``--authorization-mode``."""
    if mode == "RBAC":
        return RbacAuthorizer(store)
    if mode == "AlwaysAllow":
        return AlwaysAllow()
    raise ValueError(f'--authorization-mode: Unsupported value: "{mode}": supported values: '
                     + ", ".join(f'"{m}"' for m in MODES))


# -- denial ------------------------------------------------------------------------


def forbidden_message(attrs: Attributes) -> str:
    """kube-apiserver's wording of what was refused."""
    if not attrs.resource_request:
        return f'User "{attrs.user}" cannot {attrs.verb} path "{attrs.path}"'
    resource = f"{attrs.resource}/{attrs.subresource}" if attrs.subresource else attrs.resource
    if attrs.namespace:
        return (f'User "{attrs.user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" '
                f'in the namespace "{attrs.namespace}"')
    return (f'User "{attrs.user}" cannot {attrs.verb} resource "{resource}" in API group "{attrs.api_group}" '
            "at the cluster scope")


def forbidden(attrs: Attributes, reason: str = "") -> errors.StatusError:
    """The 403 Status kube-apiserver answers a refused request with."""
    detail = forbidden_message(attrs) + (f": {reason}" if reason else "")
    if not attrs.resource_request or not attrs.resource:
        return errors.StatusError(403, "Forbidden", f"forbidden: {detail}", {})
    err = errors.forbidden(attrs.resource, attrs.name, detail, attrs.api_group)
    # kube's StatusDetails omit the empty fields.
    err.details = {k: v for k, v in (err.details or {}).items() if v}
    return err

