"""The scavenger (reference §1.7.5): deletes PodMigrationJobs (and their Reservations) older than their lifetime.

Lifetime: ``spec.ttl`` + 5 minutes when a TTL is set, else 30 minutes, from the job's creation, whatever its phase.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from koordinator.apis import migration as mj
from koordinator.runtime.errors import NotFound

log = logging.getLogger("koordinator.descheduler.migration")

Obj = dict[str, Any]

INTERVAL_SECONDS = 60.0
DEFAULT_LIFETIME_SECONDS = 30 * 60.0
TTL_GRACE_SECONDS = 5 * 60.0


def lifetime(job: Obj) -> float:
    try:
        ttl = mj.ttl_seconds(job)
    except ValueError:
        ttl = 0.0
    return ttl + TTL_GRACE_SECONDS if ttl > 0 else DEFAULT_LIFETIME_SECONDS


class Scavenger:
    """``scavenge()`` once, or ``run(stop)`` every minute; ``delete_reservation(job)`` removes a job's Reservation."""

    name = "MigrationController/scavenger"

    def __init__(self, client: Any, delete_reservation: Callable[[Obj], None], clock: Callable[[], float] = time.time,
                 interval: float = INTERVAL_SECONDS) -> None:
        self.client = client
        self.delete_reservation = delete_reservation
        self.clock = clock
        self.interval = interval

    def scavenge(self) -> list[str]:
        """Delete the expired jobs; returns their names. A failure deleting a Reservation ends this pass."""
        deleted = []
        now = self.clock()
        for job in self.client.list(mj.KIND).get("items") or []:
            created = mj.created_at(job)
            if created is None or now - created < lifetime(job):
                continue
            self.delete_reservation(job)
            try:
                self.client.delete(mj.KIND, job["metadata"]["name"])
            except NotFound:
                pass
            deleted.append(job["metadata"]["name"])
        return deleted

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.scavenge()
            except Exception:  # noqa: BLE001 - retried next interval
                log.exception("PodMigrationJob scavenge failed")
            stop.wait(self.interval)
