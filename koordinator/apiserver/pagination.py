"""List pagination: the ``limit`` parameter and ``continue`` tokens (list resourceVersion + last key)."""

from __future__ import annotations

import base64

import orjson

from koordinator.apiserver import errors


def parse_limit(value: str) -> int:
    """The ``limit`` query parameter; 0 means no limit."""
    if not value:
        return 0
    try:
        limit = int(value)
    except ValueError:
        raise errors.bad_request(f"invalid limit: {value!r}") from None
    return max(limit, 0)


def encode_continue(rv: int, key: str) -> str:
    """The token that resumes a list at revision ``rv`` after ``key``."""
    return base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key})).decode()


def decode_continue(token: str, compacted: int) -> tuple[int, str]:
    """(revision, last key) of ``token``; 410 when the revision is older than the store keeps."""
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        rv, start = int(data["rv"]), str(data["start"])
    except Exception:
        raise errors.bad_request(f"continue key is not valid: {token!r}") from None
    if rv < compacted:
        raise errors.expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a "
            "new list without the continue parameter.")
    return rv, start
