"""admissionregistration.k8s.io/v1: webhook configurations, ValidatingAdmissionPolicy
and its bindings.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.errors import duplicate, not_supported, required
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
from koordinator.apiserver.validation.formats import inclusive_range_error, is_dns1123_subdomain
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import validate_label_selector


_WEBHOOK_OPERATIONS = ["*", "CONNECT", "CREATE", "DELETE", "UPDATE"]
_WEBHOOK_SCOPES = ["*", "Cluster", "Namespaced"]
_REVIEW_VERSIONS = ["v1", "v1beta1"]


def _validate_wildcard_list(values: Any, path: str, what: str) -> Causes:
    values = [as_str(v) for v in as_list(values)]
    if not values:
        return [required(path, "")]
    if len(values) > 1 and "*" in values:
        return [invalid_rendered(path, _go_string_slice(values), f"if '*' is present, must not specify other {what}")]
    return []


def _go_string_slice(values: list[str]) -> str:
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def _validate_webhook_rule(rule: Obj, path: str) -> Causes:
    causes = _validate_wildcard_list(rule.get("operations"), f"{path}.operations", "operations")
    for i, op in enumerate(as_list(rule.get("operations"))):
        if as_str(op) not in _WEBHOOK_OPERATIONS:
            causes.append(not_supported(f"{path}.operations[{i}]", as_str(op), _WEBHOOK_OPERATIONS))
    causes += _validate_wildcard_list(rule.get("apiGroups"), f"{path}.apiGroups", "API groups")
    causes += _validate_wildcard_list(rule.get("apiVersions"), f"{path}.apiVersions", "API versions")
    for i, version in enumerate(as_list(rule.get("apiVersions"))):
        if not as_str(version):
            causes.append(required(f"{path}.apiVersions[{i}]", "version must not be empty"))
    resources = [as_str(r) for r in as_list(rule.get("resources"))]
    if not resources:
        causes.append(required(f"{path}.resources", ""))
    for i, res in enumerate(resources):
        if not res:
            causes.append(required(f"{path}.resources[{i}]", ""))
    if len(resources) > 1 and "*/*" in resources:
        causes.append(invalid_rendered(f"{path}.resources", _go_string_slice(resources),
                                       "if '*/*' is present, must not specify other resources"))
    if rule.get("scope") is not None and as_str(rule.get("scope")) not in _WEBHOOK_SCOPES:
        causes.append(not_supported(f"{path}.scope", as_str(rule.get("scope")), _WEBHOOK_SCOPES))
    return causes


def _validate_webhook_client_config(cc: Any, path: str) -> Causes:
    cc = as_dict(cc)
    url, service = cc.get("url"), cc.get("service")
    if (url is None) == (service is None):
        return [required(path, "exactly one of url or service is required")]
    if url is not None:
        from urllib.parse import urlsplit

        upath = f"{path}.url"
        try:
            parts = urlsplit(as_str(url))
        except ValueError as exc:
            return [invalid(upath, as_str(url), f"must be a valid URL: {exc}")]
        causes = []
        if parts.scheme != "https":
            causes.append(invalid(upath, parts.scheme, "'https' is the only allowed URL scheme"))
        if not parts.hostname:
            causes.append(invalid(upath, parts.netloc, "host must be specified"))
        if parts.username is not None:
            causes.append(invalid(upath, parts.netloc.rpartition("@")[0],
                                  "user information is not permitted in the URL"))
        if parts.fragment:
            causes.append(invalid(upath, parts.fragment, "fragments are not permitted in the URL"))
        if parts.query:
            causes.append(invalid(upath, parts.query, "query parameters are not permitted in the URL"))
        return causes
    service = as_dict(service)
    spath = f"{path}.service"
    causes = []
    if not as_str(service.get("name")):
        causes.append(required(f"{spath}.name", "service name is required"))
    if not as_str(service.get("namespace")):
        causes.append(required(f"{spath}.namespace", "service namespace is required"))
    port = service.get("port", 443)
    if not isinstance(port, int) or not 1 <= port <= 65535:
        causes.append(invalid(f"{spath}.port", port, "port is not valid: " + inclusive_range_error(1, 65535)))
    svc_path = as_str(service.get("path"))
    if svc_path and not svc_path.startswith("/"):
        causes.append(invalid(f"{spath}.path", svc_path, "must start with a '/'"))
    return causes


def _validate_webhook(hook: Obj, path: str, mutating: bool) -> Causes:
    name = as_str(hook.get("name"))
    if not name:
        causes = [required(f"{path}.name", "")]
    else:
        causes = [invalid(f"{path}.name", name, m) for m in is_dns1123_subdomain(name)]
        if len(name.split(".")) < 3:
            causes.append(invalid(f"{path}.name", name, "should be a domain with at least three segments separated "
                                  "by dots"))
    for i, rule in enumerate(as_list(hook.get("rules"))):
        causes += _validate_webhook_rule(as_dict(rule), f"{path}.rules[{i}]")
    for fld, allowed in (("failurePolicy", ["Fail", "Ignore"]), ("matchPolicy", ["Equivalent", "Exact"])):
        if hook.get(fld) is not None and as_str(hook.get(fld)) not in allowed:
            causes.append(not_supported(f"{path}.{fld}", as_str(hook.get(fld)), allowed))
    side_effects = hook.get("sideEffects")
    if side_effects is None or side_effects == "":
        causes.append(required(f"{path}.sideEffects", "must specify one of None, NoneOnDryRun"))
    elif as_str(side_effects) not in ("None", "NoneOnDryRun"):
        causes.append(not_supported(f"{path}.sideEffects", as_str(side_effects), ["None", "NoneOnDryRun"]))
    timeout = hook.get("timeoutSeconds")
    if timeout is not None and (not isinstance(timeout, int) or not 1 <= timeout <= 30):
        causes.append(invalid(f"{path}.timeoutSeconds", timeout, "the timeout value must be between 1 and 30 seconds"))
    causes += validate_label_selector(hook.get("namespaceSelector"), f"{path}.namespaceSelector")
    causes += validate_label_selector(hook.get("objectSelector"), f"{path}.objectSelector")
    versions = [as_str(v) for v in as_list(hook.get("admissionReviewVersions"))]
    if not versions:
        causes.append(required(f"{path}.admissionReviewVersions", "must specify one of v1, v1beta1"))
    elif not set(versions) & set(_REVIEW_VERSIONS):
        causes.append(invalid_rendered(f"{path}.admissionReviewVersions", _go_string_slice(versions),
                                       "must include at least one of v1, v1beta1"))
    causes += _validate_webhook_client_config(hook.get("clientConfig"), f"{path}.clientConfig")
    policy = hook.get("reinvocationPolicy")
    if mutating and policy is not None and as_str(policy) not in ("IfNeeded", "Never"):
        causes.append(not_supported(f"{path}.reinvocationPolicy", as_str(policy), ["IfNeeded", "Never"]))
    return causes


def _validate_webhook_configuration(obj: Obj, mutating: bool) -> Causes:
    causes = validate_object_meta(obj)
    seen: set[str] = set()
    for i, hook in enumerate(as_list(obj.get("webhooks"))):
        hook = as_dict(hook)
        causes += _validate_webhook(hook, f"webhooks[{i}]", mutating)
        name = as_str(hook.get("name"))
        if name and name in seen:
            causes.append(duplicate(f"webhooks[{i}].name", name))
        seen.add(name)
    return causes


def validate_mutating_webhooks(obj: Obj, old: Obj | None) -> Causes:
    return _validate_webhook_configuration(obj, True)


def validate_validating_webhooks(obj: Obj, old: Obj | None) -> Causes:
    return _validate_webhook_configuration(obj, False)


# -- admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy(Binding) -------------------------

_FAILURE_POLICIES = ["Fail", "Ignore"]
_VALIDATION_ACTIONS = ["Audit", "Deny", "Warn"]


def _validate_match_resources(match: Any, path: str, require_rules: bool) -> Causes:
    match = as_dict(match)
    causes: Causes = []
    rules = as_list(match.get("resourceRules"))
    if require_rules and not rules:
        causes.append(required(f"{path}.resourceRules", ""))
    for i, rule in enumerate(as_dict(r) for r in rules):
        causes.extend(_validate_webhook_rule(rule, f"{path}.resourceRules[{i}]"))
    for i, rule in enumerate(as_dict(r) for r in as_list(match.get("excludeResourceRules"))):
        causes.extend(_validate_webhook_rule(rule, f"{path}.excludeResourceRules[{i}]"))
    policy = match.get("matchPolicy")
    if policy is not None and policy not in ("Equivalent", "Exact"):
        causes.append(not_supported(f"{path}.matchPolicy", policy, ["Equivalent", "Exact"]))
    causes.extend(validate_label_selector(match.get("namespaceSelector"), f"{path}.namespaceSelector"))
    causes.extend(validate_label_selector(match.get("objectSelector"), f"{path}.objectSelector"))
    return causes


def validate_admission_policy(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    if not as_list(spec.get("validations")) and not as_list(spec.get("auditAnnotations")):
        causes.append(required("spec.validations", "validations or auditAnnotations must contain at least one item"))
    for i, rule in enumerate(as_dict(v) for v in as_list(spec.get("validations"))):
        if not as_str(rule.get("expression")):
            causes.append(required(f"spec.validations[{i}].expression", ""))
    policy = spec.get("failurePolicy")
    if policy is not None and policy not in _FAILURE_POLICIES:
        causes.append(not_supported("spec.failurePolicy", policy, _FAILURE_POLICIES))
    if spec.get("matchConstraints") is None:
        causes.append(required("spec.matchConstraints", ""))
    else:
        causes.extend(_validate_match_resources(spec["matchConstraints"], "spec.matchConstraints", True))
    param = spec.get("paramKind")
    if param is not None:
        for part in ("apiVersion", "kind"):
            if not as_str(as_dict(param).get(part)):
                causes.append(required(f"spec.paramKind.{part}", ""))
    return causes


def validate_admission_policy_binding(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    if not as_str(spec.get("policyName")):
        causes.append(required("spec.policyName", ""))
    actions = as_list(spec.get("validationActions"))
    if not actions:
        causes.append(required("spec.validationActions", "at least one validation action is required"))
    seen: set[str] = set()
    for i, action in enumerate(actions):
        if action not in _VALIDATION_ACTIONS:
            causes.append(not_supported(f"spec.validationActions[{i}]", action, _VALIDATION_ACTIONS))
        if action in seen:
            causes.append(duplicate(f"spec.validationActions[{i}]", action))
        seen.add(action)
    if "Deny" in seen and "Warn" in seen:
        causes.append(invalid_rendered("spec.validationActions", "[]admissionregistration.ValidationAction{...}",
                                       "must not contain both Deny and Warn (repeating the same validation failure "
                                       "information in the API response and headers serves no purpose)"))
    if spec.get("matchResources") is not None:
        causes.extend(_validate_match_resources(spec["matchResources"], "spec.matchResources", False))
    return causes
