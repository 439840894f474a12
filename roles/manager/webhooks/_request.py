"""Reading AdmissionReview requests: the operation, the decoded objects, which resource."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

CREATE, UPDATE, DELETE, CONNECT = "CREATE", "UPDATE", "DELETE", "CONNECT"


class BadObject(ValueError):
    """The request's object (or oldObject) is not a JSON object (answered 400, like a decode error)."""


def operation(request: Obj) -> str:
    return str(request.get("operation") or "")


def obj(request: Obj, which: str = "object") -> Obj | None:
    """``request[which]`` as a dict; None when absent; :class:`BadObject` when it is not an object."""
    value = request.get(which)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise BadObject(f"{which}: cannot decode {type(value).__name__} into an object")
    return value


def object_and_old(request: Obj) -> tuple[Obj, Obj | None]:
    """The request's object (required) and, for an UPDATE, its oldObject; :class:`BadObject` otherwise."""
    new = obj(request)
    if new is None:
        raise BadObject("there is no content to decode")
    return new, obj(request, "oldObject") if operation(request) == UPDATE else None


def ignored(request: Obj, resource: str) -> bool:
    """A subresource, or another resource than ``resource``: not ours to judge (allowed)."""
    res = request.get("resource") or {}
    if request.get("subResource"):
        return True
    return bool(res.get("resource")) and res.get("resource") != resource


def meta(o: Obj | None) -> Obj:
    return ((o or {}).get("metadata")) or {}


def labels(o: Obj | None) -> dict[str, str]:
    return meta(o).get("labels") or {}


def annotations(o: Obj | None) -> dict[str, str]:
    return meta(o).get("annotations") or {}


def name(o: Obj | None) -> str:
    return meta(o).get("name") or ""
