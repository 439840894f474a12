"""The default RBAC policy an RBAC-authorizing server creates at start (kube's RBAC bootstrap).

Only what kubectl and our components' roles rely on: cluster-admin for ``system:masters``,
discovery and the public info endpoints, self access reviews, ``system:auth-delegator``
(TokenReviews and SubjectAccessReviews, bound to nobody), ServiceAccount issuer discovery for
every ServiceAccount, and the aggregating user-facing roles admin / edit / view with the rules of kube's ``system:aggregate-to-*`` roles (trimmed to
the kinds this server serves). Existing objects are left alone, as kube leaves roles an admin
changed.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

RBAC = "rbac.authorization.k8s.io"
BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]


def _rule(groups: list[str], resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": groups, "resources": resources, "verbs": verbs}


def _role(name: str, rules: list[Obj] | None = None, labels: dict[str, str] | None = None,
          aggregate: str | None = None) -> Obj:
    obj: Obj = {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                "metadata": {"name": name, "labels": {**BOOTSTRAP_LABELS, **(labels or {})},
                             "annotations": dict(AUTOUPDATE)},
                "rules": rules or []}
    if aggregate:
        selector = {"matchLabels": {f"{RBAC}/aggregate-to-{aggregate}": "true"}}
        obj["aggregationRule"] = {"clusterRoleSelectors": [selector]}
    return obj


def _binding(name: str, role: str, groups: list[str]) -> Obj:
    return {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(BOOTSTRAP_LABELS), "annotations": dict(AUTOUPDATE)},
            "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": RBAC, "kind": "Group", "name": g} for g in groups]}


_VIEW_RULES = [
    _rule([""], ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
                 "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                 "services/status"], READ),
    _rule([""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
                 "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"], READ),
    _rule([""], ["namespaces"], READ),
    _rule(["discovery.k8s.io"], ["endpointslices"], READ),
    _rule(["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                     "deployments/status", "replicasets", "replicasets/scale", "replicasets/status", "statefulsets",
                     "statefulsets/scale", "statefulsets/status"], READ),
    _rule(["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"], READ),
    _rule(["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"], READ),
    _rule(["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"], READ),
    _rule(["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"], READ),
]

_EDIT_RULES = [
    _rule([""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"], READ),
    _rule([""], ["serviceaccounts"], ["impersonate"]),
    _rule([""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"], WRITE),
    _rule([""], ["pods/eviction"], ["create"]),
    _rule([""], ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                 "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"], WRITE),
    _rule([""], ["serviceaccounts/token"], ["create"]),
    _rule(["apps"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
                     "replicasets/scale", "statefulsets", "statefulsets/scale"], WRITE),
    _rule(["autoscaling"], ["horizontalpodautoscalers"], WRITE),
    _rule(["batch"], ["cronjobs", "jobs"], WRITE),
    _rule(["networking.k8s.io"], ["ingresses", "networkpolicies"], WRITE),
    _rule(["policy"], ["poddisruptionbudgets"], WRITE),
]

_ADMIN_RULES = [
    _rule(["authorization.k8s.io"], ["localsubjectaccessreviews"], ["create"]),
    _rule([RBAC], ["rolebindings", "roles"], WRITE + READ),
]

_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz",
                   "/version", "/version/"]
_PUBLIC_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]
_ISSUER_DISCOVERY_URLS = ["/.well-known/openid-configuration", "/.well-known/openid-configuration/",
                          "/openid/v1/jwks", "/openid/v1/jwks/"]


def cluster_roles() -> list[Obj]:
    """The bootstrap ClusterRoles."""
    agg = f"{RBAC}/aggregate-to-"
    return [
        _role("cluster-admin", [_rule(["*"], ["*"], ["*"]), {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
        _role("admin", aggregate="admin"),
        _role("edit", labels={f"{agg}admin": "true"}, aggregate="edit"),
        _role("view", labels={f"{agg}edit": "true"}, aggregate="view"),
        _role("system:aggregate-to-admin", _ADMIN_RULES, labels={f"{agg}admin": "true"}),
        _role("system:aggregate-to-edit", _EDIT_RULES, labels={f"{agg}edit": "true"}),
        _role("system:aggregate-to-view", _VIEW_RULES, labels={f"{agg}view": "true"}),
        _role("system:discovery", [{"nonResourceURLs": _DISCOVERY_URLS, "verbs": ["get"]}]),
        _role("system:public-info-viewer", [{"nonResourceURLs": _PUBLIC_URLS, "verbs": ["get"]}]),
        _role("system:basic-user", [
            _rule(["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], ["create"]),
            _rule(["authentication.k8s.io"], ["selfsubjectreviews"], ["create"]),
        ]),
        # For proxies and extension servers that delegate authentication and authorization here
        # (kube binds it to nobody by default).
        _role("system:auth-delegator", [
            _rule(["authentication.k8s.io"], ["tokenreviews"], ["create"]),
            _rule(["authorization.k8s.io"], ["subjectaccessreviews"], ["create"]),
        ]),
        _role("system:service-account-issuer-discovery",
              [{"nonResourceURLs": _ISSUER_DISCOVERY_URLS, "verbs": ["get"]}]),
    ]


def cluster_role_bindings() -> list[Obj]:
    """The bootstrap ClusterRoleBindings."""
    return [
        _binding("cluster-admin", "cluster-admin", ["system:masters"]),
        _binding("system:discovery", "system:discovery", ["system:authenticated"]),
        _binding("system:basic-user", "system:basic-user", ["system:authenticated"]),
        _binding("system:public-info-viewer", "system:public-info-viewer",
                 ["system:authenticated", "system:unauthenticated"]),
        _binding("system:service-account-issuer-discovery", "system:service-account-issuer-discovery",
                 ["system:serviceaccounts"]),
    ]


def ensure_policy(api: Any) -> int:
    """Create the bootstrap roles and bindings that are absent; returns how many were created."""
    created = 0
    for plural, objs in (("clusterroles", cluster_roles()), ("clusterrolebindings", cluster_role_bindings())):
        rt = api.registry.get(RBAC, "v1", plural)
        for obj in objs:
            if api.store.get(rt.storage_key, obj["metadata"]["name"]) is None:
                api.create_object(rt, None, obj)
                created += 1
    api.store.commit()
    return created
