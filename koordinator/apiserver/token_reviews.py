"""``POST /apis/authentication.k8s.io/v1/tokenreviews``: check a token as the server would (TokenReview).

Nothing is stored: the answer is the review with ``status`` filled in by the server's own
authenticator chain (static tokens, then ServiceAccount tokens), as kube-apiserver's TokenReview
REST does. The caller needs ``create tokenreviews`` (the bootstrap ClusterRole
``system:auth-delegator`` grants it); the reviewed token's own rights play no part.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver import errors
from koordinator.apiserver.authentication import Authenticator
from koordinator.apiserver.encoding import decode
from koordinator.apiserver.http import Request, Response
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.routes import Route

Obj = dict[str, Any]

GROUP = "authentication.k8s.io"
API_VERSION = f"{GROUP}/v1"


def _spec(body: Any) -> Obj:
    """The review's spec; 400 naming what is wrong, in kube's wording where kube has one."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body of a TokenReview must be an authentication.k8s.io/v1 TokenReview object")
    spec = body.get("spec")
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise errors.bad_request(f"spec: must be an object, got {errors.format_value(spec)}")
    token = spec.get("token")
    if token is not None and not isinstance(token, str):
        raise errors.bad_request(f"spec.token: must be a string, got {errors.format_value(token)}")
    if not token:
        raise errors.bad_request("token is required for TokenReview in authentication")
    audiences = spec.get("audiences")
    if audiences is not None and not (isinstance(audiences, list) and all(isinstance(a, str) for a in audiences)):
        raise errors.bad_request(f"spec.audiences: must be a list of strings, got {errors.format_value(audiences)}")
    return spec


def serve(authenticator: Authenticator, req: Request, rt: ResourceType, route: Route) -> Response:
    """Answer a TokenReview: 201 with ``status`` (authenticated, user, audiences, error)."""
    if req.method != "POST" or route.name is not None:
        raise errors.method_not_allowed(req.method, rt.plural)
    body = decode(req, rt)
    spec = _spec(body)
    result = authenticator.review(spec["token"], list(spec.get("audiences") or []))
    # kube's TokenReviewStatus: "user" is always there ({} when refused), the rest only when set.
    status: Obj = {"user": {}}
    if result.user is not None:
        status = {"authenticated": True,
                  "user": {k: result.user[k] for k in ("username", "uid", "groups", "extra") if result.user.get(k)}}
        if result.audiences:
            status["audiences"] = list(result.audiences)
    if result.error:
        status["error"] = result.error
    meta = dict(body.get("metadata") or {}) if isinstance(body.get("metadata"), dict) else {}
    meta.setdefault("creationTimestamp", None)
    return Response.json(201, {"kind": "TokenReview", "apiVersion": API_VERSION, "metadata": meta, "spec": spec,
                               "status": status})
