"""authorization.k8s.io/v1 reviews: ask the server's authorizer instead of storing anything.

SelfSubjectAccessReview (``kubectl auth can-i``) answers for the requesting user,
SubjectAccessReview and LocalSubjectAccessReview for a given user and groups, and
SelfSubjectRulesReview (``kubectl auth can-i --list``) lists the rules bound to the requester.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver import errors
from koordinator.apiserver.authorization import Attributes, Decision
from koordinator.apiserver.encoding import decode
from koordinator.apiserver.http import Request, Response
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.routes import Route

Obj = dict[str, Any]

GROUP = "authorization.k8s.io"


def _attributes(kind: str, spec: Obj, user: str, groups: list[str]) -> Attributes:
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (res is None) == (non is None):
        raise errors.invalid(kind, GROUP, "", [errors.invalid_value(
            "spec.resourceAttributes", res,
            "exactly one of nonResourceAttributes or resourceAttributes must be specified")])
    if non is not None:
        return Attributes(user, tuple(groups), non.get("verb") or "", False, path=non.get("path") or "")
    return Attributes(user, tuple(groups), res.get("verb") or "", True, res.get("group") or "",
                      res.get("version") or "", res.get("resource") or "", res.get("subresource") or "",
                      res.get("namespace") or "", res.get("name") or "")


def _answer(rt: ResourceType, body: Obj, spec: Obj, status: Obj) -> Response:
    meta = dict(body.get("metadata") or {})
    meta.setdefault("creationTimestamp", None)
    return Response.json(201, {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": meta, "spec": spec,
                               "status": status})


def _status(decision: Decision) -> Obj:
    status: Obj = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return status


def serve(authorizer: Any, req: Request, rt: ResourceType, route: Route, user: dict[str, Any]) -> Response:
    """Answer a POST of one of the review kinds for ``user`` (the requester)."""
    if req.method != "POST" or route.name is not None:
        raise errors.method_not_allowed(req.method, rt.plural)
    body = decode(req, rt)
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of a {rt.kind} must be an object")
    spec = body.get("spec") or {}
    if not isinstance(spec, dict):
        raise errors.invalid(rt.kind, GROUP, "", [errors.invalid_value("spec", spec, "must be an object")])
    username, groups = user.get("username", ""), list(user.get("groups") or [])
    if rt.kind == "SelfSubjectRulesReview":
        namespace = spec.get("namespace") or ""
        rules, problems = authorizer.rules_for(username, groups, namespace)
        resource_rules = [{k: r[k] for k in ("verbs", "apiGroups", "resources", "resourceNames") if r.get(k)}
                          for r in rules if not r.get("nonResourceURLs")]
        non_resource = [{"verbs": r.get("verbs") or [], "nonResourceURLs": r["nonResourceURLs"]}
                        for r in rules if r.get("nonResourceURLs")]
        status: Obj = {"resourceRules": resource_rules, "nonResourceRules": non_resource, "incomplete": bool(problems)}
        if problems:
            status["evaluationError"] = "; ".join(problems)
        return _answer(rt, body, spec, status)
    if rt.kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
        username, groups = spec.get("user") or "", list(spec.get("groups") or [])
        if not username and not groups:
            raise errors.invalid(rt.kind, GROUP, "", [errors.invalid_value(
                "spec.user", username, "at least one of user or group must be specified")])
    attrs = _attributes(rt.kind, spec, username, groups)
    if rt.kind == "LocalSubjectAccessReview" and (not attrs.resource_request or attrs.namespace != route.namespace):
        raise errors.invalid(rt.kind, GROUP, "", [errors.invalid_value(
            "spec.resourceAttributes.namespace", attrs.namespace, "must match metadata.namespace")])
    return _answer(rt, body, spec, _status(authorizer.authorize(attrs)))
