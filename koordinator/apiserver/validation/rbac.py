"""rbac.authorization.k8s.io/v1: Role, ClusterRole, RoleBinding, ClusterRoleBinding."""

from __future__ import annotations

from koordinator.apiserver.errors import not_supported, required
from koordinator.apiserver.validation.causes import (
    Causes,
    Obj,
    as_dict,
    as_list,
    as_str,
    go_quote,
    invalid,
    invalid_rendered,
)
from koordinator.apiserver.validation.formats import name_is_dns_subdomain, name_is_path_segment
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import validate_label_selector


def _validate_policy_rules(obj: Obj, namespaced: bool) -> Causes:
    causes: Causes = []
    for i, rule in enumerate(as_dict(r) for r in as_list(obj.get("rules"))):
        path = f"rules[{i}]"
        if not as_list(rule.get("verbs")):
            causes.append(required(f"{path}.verbs", "verbs must contain at least one value"))
        urls = as_list(rule.get("nonResourceURLs"))
        if urls:
            rendered = "[]string{" + ", ".join(go_quote(as_str(u)) for u in urls) + "}"
            if namespaced:
                causes.append(invalid_rendered(f"{path}.nonResourceURLs", rendered,
                                               "namespaced rules cannot apply to non-resource URLs"))
            if as_list(rule.get("apiGroups")) or as_list(rule.get("resources")) or as_list(rule.get("resourceNames")):
                causes.append(invalid_rendered(f"{path}.nonResourceURLs", rendered,
                                               "rules cannot apply to both regular resources and non-resource URLs"))
            continue
        if not as_list(rule.get("apiGroups")):
            causes.append(required(f"{path}.apiGroups", "resource rules must supply at least one api group"))
        if not as_list(rule.get("resources")):
            causes.append(required(f"{path}.resources", "resource rules must supply at least one resource"))
    return causes


def validate_role(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj, name_is_path_segment) + _validate_policy_rules(obj, namespaced=True)


def _validate_aggregation_rule(obj: Obj) -> Causes:
    """kube's ``ValidateClusterRole`` on ``aggregationRule``: at least one selector, each a valid
    LabelSelector; one that is not also fails ``LabelSelectorAsSelector`` (its nil result prints as "null")."""
    rule = obj.get("aggregationRule")
    if rule is None:
        return []
    path = "aggregationRule.clusterRoleSelectors"
    selectors = as_list(as_dict(rule).get("clusterRoleSelectors"))
    if not selectors:
        return [required(path, "at least one clusterRoleSelector required if aggregationRule is non-nil")]
    causes: Causes = []
    for i, selector in enumerate(selectors):
        found = validate_label_selector(as_dict(selector), f"{path}[{i}]")
        causes.extend(found)
        if found:
            causes.append(invalid(f"{path}[{i}]", None, "invalid label selector."))
    return causes


def validate_cluster_role(obj: Obj, old: Obj | None) -> Causes:
    return (validate_object_meta(obj, name_is_path_segment) + _validate_policy_rules(obj, namespaced=False)
            + _validate_aggregation_rule(obj))


_RBAC_GROUP = "rbac.authorization.k8s.io"


def _validate_binding(obj: Obj, namespaced: bool) -> Causes:
    causes = validate_object_meta(obj, name_is_path_segment)
    ref = as_dict(obj.get("roleRef"))
    if as_str(ref.get("apiGroup")) != _RBAC_GROUP:
        causes.append(not_supported("roleRef.apiGroup", as_str(ref.get("apiGroup")), [_RBAC_GROUP]))
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if as_str(ref.get("kind")) not in kinds:
        causes.append(not_supported("roleRef.kind", as_str(ref.get("kind")), kinds))
    ref_name = as_str(ref.get("name"))
    if not ref_name:
        causes.append(required("roleRef.name", ""))
    else:
        causes.extend(invalid("roleRef.name", ref_name, m) for m in name_is_path_segment(ref_name, False))
    for i, subject in enumerate(as_dict(s) for s in as_list(obj.get("subjects"))):
        path = f"subjects[{i}]"
        name, kind, group = as_str(subject.get("name")), as_str(subject.get("kind")), as_str(subject.get("apiGroup"))
        if not name:
            causes.append(required(f"{path}.name", ""))
        if kind == "ServiceAccount":
            if name:
                causes.extend(invalid(f"{path}.name", name, m) for m in name_is_dns_subdomain(name, False))
            if group:
                causes.append(not_supported(f"{path}.apiGroup", group, [""]))
            if not namespaced and not as_str(subject.get("namespace")):
                causes.append(required(f"{path}.namespace", ""))
        elif kind in ("User", "Group"):
            if group != _RBAC_GROUP:
                causes.append(not_supported(f"{path}.apiGroup", group, [_RBAC_GROUP]))
        else:
            causes.append(not_supported(f"{path}.kind", kind, ["ServiceAccount", "User", "Group"]))
    return causes


def validate_role_binding(obj: Obj, old: Obj | None) -> Causes:
    return _validate_binding(obj, namespaced=True)


def validate_cluster_role_binding(obj: Obj, old: Obj | None) -> Causes:
    return _validate_binding(obj, namespaced=False)
