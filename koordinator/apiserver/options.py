"""Behaviour switches of the embedded API server (its command-line flags)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Options:
    """Behaviour switches of the server (CLI flags)."""

    pod_deletion: str = "immediate"  # or "graceful": bound pods wait for a grace-0 delete, like a kubelet's
    bookmark_interval: float = 60.0
    min_request_timeout: float = 1800.0
    max_watch_backlog: int = 16 << 20
    server_address: str = "127.0.0.1:6443"
