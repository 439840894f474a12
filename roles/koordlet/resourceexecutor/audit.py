"""The audit log of node changes (reference A.10): JSON lines under ``<run-dir>/audit/``, bounded by size.

One line per change: ``{"time", "file", "old", "new", "owner", "reason"}`` (``owner``: the strategy or
hook that asked). When ``audit.log`` passes ``max_bytes / (backups + 1)`` it is renamed to
``audit.log.1`` (older ones shift up, the oldest is dropped), so the whole log stays under
``max_bytes`` on disk (Koordinator's ``--audit-max-disk-space-mb``, 16 MiB).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import Any, Callable

log = logging.getLogger("koordinator.koordlet.audit")

AUDIT_FILE = "audit.log"


class AuditLog:
    """Append-only JSON-lines log with size rotation; thread-safe. A failing disk is logged once, never raised."""

    def __init__(self, directory: str, *, max_bytes: int = 16 << 20, backups: int = 3,
                 clock: Callable[[], float] = time.time) -> None:
        if max_bytes <= 0:
            raise ValueError(f"audit log max bytes {max_bytes}: must be positive")
        self.directory = directory
        self.path = os.path.join(directory, AUDIT_FILE)
        self.backups = max(0, backups)
        self.file_limit = max(1, max_bytes // (self.backups + 1))
        self.clock = clock
        self._lock = threading.Lock()
        self._failed = False

    def record(self, file: str, old: str | None, new: str, owner: str, reason: str, **extra: Any) -> None:
        """Append one change."""
        entry = {"time": _iso(self.clock()), "file": file, "old": old, "new": new, "owner": owner,
                 "reason": reason, **extra}
        line = json.dumps(entry, sort_keys=False) + "\n"
        with self._lock:
            try:
                os.makedirs(self.directory, exist_ok=True)
                try:
                    size = os.path.getsize(self.path)
                except FileNotFoundError:
                    size = 0
                if size and size + len(line) > self.file_limit:
                    self._rotate()
                with open(self.path, "a", encoding="utf-8") as f:
                    f.write(line)
                self._failed = False
            except OSError as err:
                # The audit log must never stop enforcement: say so once until it works again.
                if not self._failed:
                    log.warning("audit log %s: cannot write: %s", self.path, err)
                self._failed = True

    def _rotate(self) -> None:
        if self.backups == 0:
            os.remove(self.path)
            return
        for i in range(self.backups, 0, -1):
            src = self.path if i == 1 else f"{self.path}.{i - 1}"
            if os.path.exists(src):
                os.replace(src, f"{self.path}.{i}")


def _iso(ts: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(ts)) + f".{int(ts * 1000) % 1000:03d}Z"
