"""TTL after finished (kube-controller-manager's ``ttl-after-finished`` controller).

A Job with ``spec.ttlSecondsAfterFinished`` is deleted that many seconds after it finished (its
Complete or Failed condition's lastTransitionTime), in the foreground so its pods go first, with
the Job's uid as a precondition. The Job is read afresh from the server before it is deleted, so
a TTL changed at the last moment is honoured. Registered with the Job controller.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from koordinator.controllers import jobutil as ju
from koordinator.controllers.podcontrol import is_terminating, object_key
from koordinator.runtime import errors
from koordinator.runtime.controller import Result

log = logging.getLogger("koordinator.controllers.ttlafterfinished")

Obj = dict[str, Any]


def needs_cleanup(job: Obj) -> bool:
    return ju.spec(job).get("ttlSecondsAfterFinished") is not None and ju.is_finished(job) and not is_terminating(job)


def expires_at(job: Obj) -> float | None:
    """When the Job's TTL runs out (None when it has none or has not finished)."""
    finished = ju.finish_time(job)
    ttl = ju.spec(job).get("ttlSecondsAfterFinished")
    if finished is None or ttl is None:
        return None
    return finished + int(ttl)


class TTLAfterFinished:
    """Deletes finished Jobs whose TTL ran out; keys are ``namespace/name``."""

    def __init__(self, runtime: Any) -> None:
        self.client = runtime.client
        self.jobs = runtime.informers.informer("Job")
        self.controller = runtime.controller("ttl-after-finished", self.reconcile, workers=2)
        self.controller.watch(self.jobs, predicate=lambda _old, new: needs_cleanup(new))

    def reconcile(self, key: str) -> Result | None:
        job = self.jobs.store.get(key)
        if job is None or not needs_cleanup(job):
            return None
        left = self._left(job)
        if left is not None and left > 0:
            return Result(requeue_after=left)
        md = job["metadata"]
        try:
            fresh = self.client.get("Job", md["name"], md["namespace"])
        except errors.NotFound:
            return None
        if fresh["metadata"].get("uid") != md.get("uid") or not needs_cleanup(fresh):
            return None
        left = self._left(fresh)
        if left is not None and left > 0:
            return Result(requeue_after=left)
        log.debug("deleting expired job %s", object_key(fresh))
        try:
            self.client.delete("Job", md["name"], md["namespace"], propagation_policy="Foreground",
                               preconditions={"uid": md["uid"]})
        except (errors.NotFound, errors.Conflict):
            pass  # gone, or another Job of that name by now
        return None

    @staticmethod
    def _left(job: Obj) -> float | None:
        at = expires_at(job)
        return None if at is None else at - time.time()


def register(runtime: Any) -> TTLAfterFinished:
    """Register the controller on ``runtime``."""
    return TTLAfterFinished(runtime)
