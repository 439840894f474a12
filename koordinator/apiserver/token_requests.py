"""``serviceaccounts/token`` (authentication.k8s.io/v1 TokenRequest) and SelfSubjectReview.

Neither is stored: a TokenRequest answers with a token signed for the ServiceAccount (see
``authentication.ServiceAccountTokens``), a SelfSubjectReview with the requesting user.
"""

from __future__ import annotations

import datetime
from typing import Any

from koordinator.apiserver import errors
from koordinator.apiserver.authentication import BOUND_KINDS, ServiceAccountTokens
from koordinator.apiserver.http import Response
from koordinator.apiserver.objects import now_rfc3339
from koordinator.apiserver.store import Store, object_key

Obj = dict[str, Any]

GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"
DEFAULT_EXPIRATION_S = 3600
MIN_EXPIRATION_S = 600
MAX_EXPIRATION_S = 1 << 32


def _spec(name: str, body: Any, default_audiences: list[str]) -> Obj:
    """The TokenRequest's spec with defaults filled in; 400/422 naming the field on bad input."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body of a serviceaccounts/token request must be an "
                                 "authentication.k8s.io/v1 TokenRequest")
    spec = body.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise errors.invalid("TokenRequest", GROUP, name, [
            errors.invalid_value("spec", spec, "must be an object")])
    causes = []
    audiences = spec.get("audiences")
    if audiences is not None and not (isinstance(audiences, list) and all(isinstance(a, str) for a in audiences)):
        causes.append(errors.invalid_value("spec.audiences", audiences, "must be a list of strings"))
        audiences = None
    seconds = spec.get("expirationSeconds", DEFAULT_EXPIRATION_S)
    if seconds is None:
        seconds = DEFAULT_EXPIRATION_S
    if isinstance(seconds, bool) or not isinstance(seconds, int):
        causes.append(errors.invalid_value("spec.expirationSeconds", seconds, "must be an integer"))
    elif seconds < MIN_EXPIRATION_S:
        causes.append(errors.invalid_value("spec.expirationSeconds", seconds,
                                           "may not specify a duration less than 10 minutes"))
    elif seconds > MAX_EXPIRATION_S:
        causes.append(errors.invalid_value("spec.expirationSeconds", seconds,
                                           "may not specify a duration larger than 2^32 seconds"))
    ref = spec.get("boundObjectRef")
    if ref is not None:
        if not isinstance(ref, dict):
            causes.append(errors.invalid_value("spec.boundObjectRef", ref, "must be an object"))
        else:
            if ref.get("kind") not in BOUND_KINDS:
                causes.append(errors.not_supported("spec.boundObjectRef.kind", ref.get("kind"), list(BOUND_KINDS)))
            if ref.get("apiVersion") not in (None, "", "v1"):
                causes.append(errors.not_supported("spec.boundObjectRef.apiVersion", ref.get("apiVersion"), ["v1"]))
            if not isinstance(ref.get("name"), str) or not ref.get("name"):
                causes.append(errors.required("spec.boundObjectRef.name"))
    if causes:
        raise errors.invalid("TokenRequest", GROUP, name, causes)
    return {"audiences": list(audiences) if audiences else list(default_audiences),
            "expirationSeconds": seconds, "boundObjectRef": ref}


def _bound(store: Store, namespace: str, ref: Obj) -> Obj:
    """The bound object's name and uid; 404 when it is missing, 409 when its uid is not the given one."""
    storage = BOUND_KINDS[ref["kind"]]
    entry = store.get(storage, object_key(namespace, ref["name"]))
    if entry is None:
        raise errors.not_found(storage, ref["name"])
    uid = (entry.obj().get("metadata") or {}).get("uid", "")
    if ref.get("uid") and ref["uid"] != uid:
        raise errors.conflict(storage, ref["name"], f"the UID in the bound object reference ({ref['uid']}) does "
                              f"not match the UID in record. The object might have been deleted and then recreated")
    return {"kind": ref["kind"], "name": ref["name"], "uid": uid}


def create_token(tokens: ServiceAccountTokens, store: Store, namespace: str, name: str, body: Any) -> Response:
    """Answer a ``POST .../serviceaccounts/NAME/token``: 201 with the TokenRequest and its token."""
    spec = _spec(name, body, tokens.audiences)
    entry = store.get("serviceaccounts", object_key(namespace, name))
    if entry is None:
        raise errors.not_found("serviceaccounts", name)
    uid = (entry.obj().get("metadata") or {}).get("uid", "")
    bound = _bound(store, namespace, spec["boundObjectRef"]) if spec["boundObjectRef"] else None
    token, exp = tokens.issue(namespace, name, uid, spec["audiences"], spec["expirationSeconds"], bound)
    if bound is not None:
        spec["boundObjectRef"] = {**spec["boundObjectRef"], "apiVersion": "v1", "uid": bound["uid"]}
    expires = datetime.datetime.fromtimestamp(exp, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Response.json(201, {
        "kind": "TokenRequest", "apiVersion": API_VERSION,
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": now_rfc3339()},
        "spec": spec, "status": {"token": token, "expirationTimestamp": expires}})


def self_subject_review(user: Obj) -> Response:
    """Answer a ``POST /apis/authentication.k8s.io/v1/selfsubjectreviews``: who the caller is."""
    info = {k: user[k] for k in ("username", "uid", "groups", "extra") if user.get(k)}
    return Response.json(201, {"kind": "SelfSubjectReview", "apiVersion": API_VERSION,
                               "metadata": {"creationTimestamp": None}, "status": {"userInfo": info}})
