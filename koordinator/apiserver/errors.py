"""Kubernetes ``Status`` failures raised by the embedded API server.

Every non-2xx answer is a ``meta.k8s.io/v1 Status`` object whose ``reason`` clients key on
(client-go's ``errors.Is*``, our runtime's typed exceptions), so the reason/code pairs here
follow the real server exactly.
"""

from __future__ import annotations

from typing import Any

# Re-exported: the server's modules build causes through this module.
from koordinator.apis.field_causes import cause, required  # noqa: F401


class StatusError(Exception):
    """A failure answered as a Kubernetes Status object."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.headers = headers or {}

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            status["details"] = self.details
        return status


def invalid_value(field: str, value: Any, detail: str) -> dict[str, str]:
    return cause("FieldValueInvalid", field, f"Invalid value: {format_value(value)}: {detail}")


def not_supported(field: str, value: Any, supported: list[str]) -> dict[str, str]:
    choices = ", ".join(f'"{s}"' for s in supported)
    return cause("FieldValueNotSupported", field, f"Unsupported value: {format_value(value)}: supported values: {choices}")


def forbidden_field(field: str, detail: str) -> dict[str, str]:
    return cause("FieldValueForbidden", field, f"Forbidden: {detail}")


def duplicate(field: str, value: Any) -> dict[str, str]:
    return cause("FieldValueDuplicate", field, f"Duplicate value: {format_value(value)}")


def too_long(field: str, limit: int) -> dict[str, str]:
    return cause("FieldValueTooLong", field, f"Too long: may not be more than {limit} bytes")


def format_value(value: Any) -> str:
    """Render a value the way apimachinery's field.Error does (Go %q for strings, %v otherwise)."""
    if isinstance(value, str):
        escaped = value.replace("\\", "\\\\").replace('"', '\\"')
        return f'"{escaped}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (dict, list)):
        return '"' + type(value).__name__.replace("dict", "object").replace("list", "array") + '"'
    return str(value)


def qualified_kind(kind: str, group: str) -> str:
    return f"{kind}.{group}" if group else kind


def invalid(kind: str, group: str, name: str, causes: list[dict[str, str]]) -> StatusError:
    """422 Invalid: ``<Kind>[.<group>] "<name>" is invalid: <field>: <message>[, ...]``."""
    texts = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    summary = texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"
    return StatusError(
        422,
        "Invalid",
        f'{qualified_kind(kind, group)} "{name}" is invalid: {summary}',
        {"name": name, "group": group, "kind": kind, "causes": causes},
    )


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def cannot_handle(kind: str, version: str, detail: str) -> StatusError:
    """400 for a body the server cannot decode into the kind (the real server's wording)."""
    return bad_request(f'{kind} in version "{version}" cannot be handled as a {kind}: {detail}')


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


def forbidden(resource: str, name: str, detail: str, group: str = "", kind: str | None = None) -> StatusError:
    target = f'{resource}.{group} "{name}"' if group else f'{resource} "{name}"'
    if not name:
        target = f"{resource}.{group}" if group else resource
    return StatusError(
        403,
        "Forbidden",
        f"{target} is forbidden: {detail}",
        {"name": name, "group": group, "kind": kind or resource},
    )


def not_found(resource: str, name: str, group: str = "") -> StatusError:
    qualified = f"{resource}.{group}" if group else resource
    return StatusError(
        404, "NotFound", f'{qualified} "{name}" not found', {"name": name, "group": group, "kind": resource}
    )


def not_found_path() -> StatusError:
    return StatusError(404, "NotFound", "the server could not find the requested resource", {})


def method_not_allowed(verb: str, resource: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed", f"{verb} is not supported on resources of kind {resource!r}")


def not_acceptable(accept: str) -> StatusError:
    return StatusError(406, "NotAcceptable", f"only the following media types are accepted: application/json, application/yaml, got {accept}")


def already_exists(resource: str, name: str, group: str = "") -> StatusError:
    qualified = f"{resource}.{group}" if group else resource
    return StatusError(
        409, "AlreadyExists", f'{qualified} "{name}" already exists', {"name": name, "group": group, "kind": resource}
    )


def conflict(resource: str, name: str, detail: str, group: str = "") -> StatusError:
    qualified = f"{resource}.{group}" if group else resource
    return StatusError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": {detail}',
        {"name": name, "group": group, "kind": resource},
    )


STALE_OBJECT = "the object has been modified; please apply your changes to the latest version and try again"


def expired(message: str) -> StatusError:
    return StatusError(410, "Expired", message)


def too_large(message: str = "Request entity too large") -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", message)


def unsupported_media_type(content_type: str) -> StatusError:
    return StatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml (got {content_type!r})")


def too_many_requests(message: str, retry_after: int, causes: list[dict[str, str]] | None = None) -> StatusError:
    """429; ``retry_after`` 0 sends no Retry-After (the answer is final, e.g. a budget that allows no disruption)."""
    details: dict[str, Any] = {"retryAfterSeconds": retry_after} if retry_after > 0 else {}
    if causes:
        details["causes"] = causes
    return StatusError(429, "TooManyRequests", message, details,
                       {"Retry-After": str(retry_after)} if retry_after > 0 else None)


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", f"Internal error occurred: {message}")


def timeout(message: str) -> StatusError:
    return StatusError(504, "Timeout", message)
