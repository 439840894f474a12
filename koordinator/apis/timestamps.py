"""Timestamps as the Kubernetes API writes them (RFC 3339, UTC, whole seconds)."""

from __future__ import annotations

from datetime import datetime, timezone


def now_rfc3339() -> str:
    """The current time as the API writes it (``2026-11-27T05:26:56Z``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp, or None (absent or malformed)."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
