"""The PodGroup status controller: phase, counts and times of ``scheduling.sigs.k8s.io/v1alpha1`` PodGroups.

Phases: "" → Pending → PreScheduling (once ``minMember`` pods exist) → Scheduling / Scheduled (by the
number of bound members) → Running / Failed / Finished (by the members' phases); back to Pending
when every pod is gone. One step per sync; the status update re-queues the PodGroup for the next.
The status is written through the API only when it changed.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from koordinator.apis.timestamps import now_rfc3339
from koordinator.runtime.errors import ApiError, NotFound

log = logging.getLogger("koordinator.scheduler.coscheduling")

PENDING = "Pending"
PRE_SCHEDULING = "PreScheduling"
SCHEDULING = "Scheduling"
SCHEDULED = "Scheduled"
RUNNING = "Running"
FAILED = "Failed"
FINISHED = "Finished"

RESYNC_SECONDS = 30.0


def _occupied_by(pod: dict) -> str:
    meta = pod.get("metadata") or {}
    refs = sorted(f"{meta.get('namespace', '')}/{r.get('name', '')}" for r in meta.get("ownerReferences") or ())
    return ",".join(refs)


def next_status(pg: dict, pods: list[dict], bound: int) -> dict:
    """The PodGroup's status after one sync step, given its member pods and how many of them are bound."""
    old = pg.get("status") or {}
    status = dict(old)
    min_member = int((pg.get("spec") or {}).get("minMember") or 0)
    phase = old.get("phase") or ""
    if phase == "":
        status["phase"] = PENDING
    elif phase == PENDING:
        if min_member > 0 and len(pods) >= min_member:
            status["phase"] = PRE_SCHEDULING
            occupied = _occupied_by(pods[0])
            if occupied:
                status["occupiedBy"] = occupied
    elif not pods:
        status["phase"] = PENDING
    else:
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        running, succeeded, failed = phases.count("Running"), phases.count("Succeeded"), phases.count("Failed")
        status.update(running=running, succeeded=succeeded, failed=failed, scheduled=bound)
        if bound < min_member:
            status["phase"] = SCHEDULING
            if not status.get("scheduleStartTime"):
                status["scheduleStartTime"] = now_rfc3339()
        else:
            status["phase"] = SCHEDULED
        if status["phase"] == SCHEDULED and succeeded + running >= min_member:
            status["phase"] = RUNNING
        if failed > 0 and failed + running + succeeded >= min_member:
            status["phase"] = FAILED
        if succeeded >= min_member:
            status["phase"] = FINISHED
    return status


class PodGroupController:
    """Syncs PodGroup status from the gang cache; a runnable on the leader (``run(stop)``)."""

    name = "podgroup-controller"

    def __init__(self, plugin: Any, client: Any, pg_informer: Any, pod_informer: Any, *, workers: int = 1) -> None:
        self.plugin = plugin
        self.client = client
        self.pg_informer = pg_informer
        self.pod_informer = pod_informer
        self.workers = max(1, workers)
        self._cond = threading.Condition()
        self._dirty: list[str] = []
        self._queued: set[str] = set()
        self._processing: set[str] = set()

    def enqueue(self, key: str) -> None:
        """A PodGroup (``ns/name``) to sync."""
        with self._cond:
            if key not in self._queued:
                self._queued.add(key)
                self._dirty.append(key)
                self._cond.notify()

    def _take(self, stop: threading.Event) -> str | None:
        with self._cond:
            while not stop.is_set():
                for i, key in enumerate(self._dirty):
                    if key not in self._processing:
                        del self._dirty[i]
                        self._queued.discard(key)
                        self._processing.add(key)
                        return key
                self._cond.wait(0.5)
            return None

    def _done(self, key: str) -> None:
        with self._cond:
            self._processing.discard(key)
            self._cond.notify()

    def run(self, stop: threading.Event) -> None:
        # The plugin's informer handlers enqueue PodGroups and the PodGroups of changed member pods.
        for pg in self.pg_informer.store.list():
            self.enqueue(_key(pg))
        threads = [threading.Thread(target=self._worker, args=(stop,), name=f"podgroup-controller-{i}", daemon=True)
                   for i in range(self.workers)]
        for t in threads:
            t.start()
        while not stop.wait(RESYNC_SECONDS):
            for pg in self.pg_informer.store.list():
                self.enqueue(_key(pg))
        with self._cond:
            self._cond.notify_all()
        for t in threads:
            t.join(5)

    def _worker(self, stop: threading.Event) -> None:
        while True:
            key = self._take(stop)
            if key is None:
                return
            try:
                self.sync(key)
            except Exception:
                log.exception("podgroup sync failed podgroup=%s", key)
            finally:
                self._done(key)

    def sync(self, key: str) -> None:
        pg = self.pg_informer.store.get(key)
        if pg is None:
            return
        children, bound = self.plugin.children_of(key)
        pods = [p for p in (self.pod_informer.store.get(k) for k in children) if p is not None]
        status = next_status(pg, pods, bound)
        if status == (pg.get("status") or {}):
            return
        updated = {**pg, "status": status}
        try:
            # Koordinator's PodGroup CRD has no status subresource: status is written with the object.
            self.client.update(updated)
        except NotFound:
            return      # deleted meanwhile
        except ApiError as err:  # a conflict brings the newer PodGroup through the informer; else the resync
            log.warning("updating podgroup status failed podgroup=%s err=%s", key, err)


def _key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
