"""Typed API errors, keyed on the ``reason`` of the Kubernetes ``Status`` a server returns.

Callers branch on the class (``except Conflict``), the way client-go callers use
``errors.IsConflict``: the reason decides first, the HTTP code only when a server sends none.
"""

from __future__ import annotations

from typing import Any


class ApiError(Exception):
    """A request the API server refused or could not answer.

    ``status`` is the HTTP code (0 when no response arrived), ``reason`` the Status reason
    (``NotFound``, ``Conflict``, ...), ``body`` the Status object when there was one and
    ``retry_after`` the server's Retry-After in seconds.
    """

    def __init__(self, status: int, reason: str, message: str, *, body: dict[str, Any] | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(f"{message} (HTTP {status}, {reason})" if status else message)
        self.status = status
        self.reason = reason
        self.message = message
        self.body = body
        self.retry_after = retry_after


class BadRequest(ApiError):
    """400: malformed request (bad selector, undecodable body)."""


class Unauthorized(ApiError):
    """401: no or a wrong bearer token / client certificate."""


class Forbidden(ApiError):
    """403: authenticated, but not allowed."""


class NotFound(ApiError):
    """404: the object (or its kind) does not exist."""


class MethodNotAllowed(ApiError):
    """405: the resource does not support the verb."""


class Conflict(ApiError):
    """409 Conflict: the object changed since it was read (stale resourceVersion)."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: create of a name that is taken."""


class Gone(ApiError):
    """410 Expired/Gone: the resourceVersion is older than the server's history."""


class UnsupportedMediaType(ApiError):
    """415: e.g. a strategic merge patch sent for a custom resource."""


class Invalid(ApiError):
    """422: the object failed validation; ``causes`` names the fields."""

    @property
    def causes(self) -> list[dict[str, Any]]:
        return list(((self.body or {}).get("details") or {}).get("causes") or [])


class TooManyRequests(ApiError):
    """429: throttled by the server (or an eviction blocked by a PodDisruptionBudget)."""


class InternalError(ApiError):
    """500."""


class ServiceUnavailable(ApiError):
    """503."""


class Timeout(ApiError):
    """504, or a Status with reason Timeout/ServerTimeout."""


class ConnectionFailed(ApiError):
    """No response: connection refused or reset, TLS failure, or a read timeout."""

    def __init__(self, message: str) -> None:
        super().__init__(0, "ConnectionFailed", message)


_BY_REASON: dict[str, type[ApiError]] = {
    "BadRequest": BadRequest, "Unauthorized": Unauthorized, "Forbidden": Forbidden, "NotFound": NotFound,
    "MethodNotAllowed": MethodNotAllowed, "Conflict": Conflict, "AlreadyExists": AlreadyExists,
    "Gone": Gone, "Expired": Gone, "UnsupportedMediaType": UnsupportedMediaType, "Invalid": Invalid,
    "TooManyRequests": TooManyRequests, "InternalError": InternalError,
    "ServiceUnavailable": ServiceUnavailable, "Timeout": Timeout, "ServerTimeout": Timeout,
}
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed, 409: Conflict,
    410: Gone, 415: UnsupportedMediaType, 422: Invalid, 429: TooManyRequests, 500: InternalError,
    503: ServiceUnavailable, 504: Timeout,
}


def from_status(status: int, body: Any, *, retry_after: float | None = None) -> ApiError:
    """The typed error for an HTTP error response (``body`` is the parsed Status, if any)."""
    status_obj = body if isinstance(body, dict) and body.get("kind") == "Status" else None
    reason = (status_obj or {}).get("reason") or ""
    message = (status_obj or {}).get("message") or (body if isinstance(body, str) and body else "") \
        or f"the server answered HTTP {status}"
    cls = _BY_REASON.get(reason) or _BY_CODE.get(status) or ApiError
    if not reason:
        reason = cls.__name__ if cls is not ApiError else "Unknown"
    return cls(status, reason, message, body=status_obj, retry_after=retry_after)
