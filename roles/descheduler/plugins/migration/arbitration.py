"""The arbitrator (reference §1.7.4): admits pending PodMigrationJobs one tick at a time, in order, within limits.

New jobs wait here; every ``arbitrationArgs.interval`` the waiting jobs are sorted — Koordinator's stable sorts
applied in turn, so the last is the primary key: newest first; by the pod's eviction order (missing pods first,
lower priority, lower eviction cost); jobs of pods of one batch ``Job`` pulled together to the place of its first;
then descending by how many jobs of that ``Job``'s pods are migrating already (so a Job half moved is finished
first) — and each is checked with the pod marked as arbitrating: a job whose pod may never migrate fails
(``ForbiddenMigratePod``), one held back by a migration limit keeps waiting, the others get
``descheduler.koordinator.sh/passed-arbitration: "true"`` — the update that starts their reconciliation — and
count against the limits for the jobs after them.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Mapping

from koordinator.apis import migration as mj
from koordinator.runtime.errors import Conflict, NotFound
from koordinator_roles.descheduler.plugins.migration.filter import MigrationFilter
from koordinator_roles.descheduler.plugins.migration.state import INDEX_JOB_POD_UID, ClusterState

log = logging.getLogger("koordinator.descheduler.migration")

Obj = dict[str, Any]


def _eviction_cost(pod: Obj) -> int:
    try:
        return int(((pod.get("metadata") or {}).get("annotations") or {}).get(mj.ANNOTATION_EVICTION_COST, 0))
    except ValueError:
        return 0


def sort_key(job: Obj, pod: Obj | None) -> tuple:
    """Ascending order of admission."""
    created = -(mj.created_at(job) or 0.0)  # newer first
    if pod is None:
        return (0, 0, 0, created)
    return (1, (pod.get("spec") or {}).get("priority") or 0, _eviction_cost(pod), created)


def batch_job_uid(pod: Obj | None) -> str | None:
    """The UID of the batch ``Job`` controlling ``pod`` (None: no pod, or another kind of controller)."""
    ref = mj.controller_ref(pod) if pod is not None else None
    if ref is None or ref.get("kind") != "Job":
        return None
    return ref.get("uid") or None


def _name(job: Obj) -> str:
    return job["metadata"]["name"]


def group_by_controller(jobs: list[Obj], pods: Mapping[str, Obj | None]) -> list[Obj]:
    """``SortJobsByController``: jobs of pods of one batch ``Job`` move up to the place of that Job's first job
    (in their order); the other jobs keep theirs. ``pods``: job name → its pod (None when missing)."""
    first: dict[str, int] = {}
    rank: dict[str, int] = {}
    for i, job in enumerate(jobs):
        owner = batch_job_uid(pods.get(_name(job)))
        rank[_name(job)] = first.setdefault(owner, i) if owner is not None else i
    return sorted(jobs, key=lambda j: rank[_name(j)])  # stable: ties keep their order


def sort_by_migrating_num(jobs: list[Obj], pods: Mapping[str, Obj | None],
                          migrating_of: Callable[[str], int]) -> list[Obj]:
    """``SortJobsByMigratingNum``: descending by ``migrating_of(uid of the pod's batch Job)``; jobs of pods no
    batch ``Job`` owns count 0. Stable, so it is the primary key over the earlier sorts."""
    counts: dict[str, int] = {}

    def count(job: Obj) -> int:
        owner = batch_job_uid(pods.get(_name(job)))
        if owner is None:
            return 0
        if owner not in counts:
            counts[owner] = migrating_of(owner)
        return counts[owner]
    return sorted(jobs, key=lambda j: -count(j))


def is_migrating(job: Obj) -> bool:
    """What ``SortJobsByMigratingNum`` counts: a job that passed arbitration or is Running."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    return annotations.get(mj.ANNOTATION_PASSED_ARBITRATION) == "true" or mj.phase(job) == mj.PHASE_RUNNING


class Arbitrator:
    """Waiting jobs (by name) and the tick that admits them; ``name`` and ``run(stop)`` for the role."""

    name = "MigrationController/arbitrator"

    def __init__(self, client: Any, state: ClusterState, filters: MigrationFilter, interval: float,
                 recorder: Any = None) -> None:
        self.client = client
        self.state = state
        self.filters = filters
        self.interval = interval
        self.recorder = recorder
        self._waiting: dict[str, Obj] = {}
        self._lock = threading.Lock()

    def add(self, job: Obj) -> None:
        with self._lock:
            self._waiting[job["metadata"]["name"]] = job

    def remove(self, name: str) -> None:
        with self._lock:
            self._waiting.pop(name, None)

    def waiting(self) -> list[str]:
        with self._lock:
            return sorted(self._waiting)

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.tick()
            except Exception:  # noqa: BLE001 - one bad tick must not end arbitration
                log.exception("arbitration tick failed")
            stop.wait(self.interval)

    def tick(self) -> None:
        with self._lock:
            jobs = list(self._waiting.values())
        pods = {}
        for job in jobs:
            ref = mj.pod_ref(job)
            pods[job["metadata"]["name"]] = self.state.pod(ref.get("namespace", ""), ref.get("name", ""))
        jobs.sort(key=lambda j: sort_key(j, pods[j["metadata"]["name"]]))
        jobs = group_by_controller(jobs, pods)
        jobs = sort_by_migrating_num(jobs, pods, self._migrating_of_batch_job)
        for job in jobs:
            name = job["metadata"]["name"]
            current = self.state.jobs.store.get(name)
            if current is None or not mj.is_active(current):
                self.remove(name)
                continue
            pod = pods[name]
            if pod is not None and not MigrationFilter.evict_annotated(pod):
                why = self.filters.rejection(pod)
                if why is not None:
                    self._forbid(current, pod, why)
                    continue
                if self.filters.throttled(pod, arbitrating=True):
                    continue
            self._admit(current)

    def _migrating_of_batch_job(self, owner_uid: str) -> int:
        """Migrating jobs of the pods the batch Job ``owner_uid`` owns (pods by owner UID, jobs by pod UID)."""
        total = 0
        for pod in self.state.pods_of_owner(owner_uid):
            uid = (pod.get("metadata") or {}).get("uid")
            if uid:
                total += sum(1 for j in self.state.jobs.store.by_index(INDEX_JOB_POD_UID, uid) if is_migrating(j))
        return total

    def _admit(self, job: Obj) -> None:
        name = job["metadata"]["name"]
        patch = {"metadata": {"annotations": {mj.ANNOTATION_PASSED_ARBITRATION: "true"}}}
        try:
            self.client.patch(mj.KIND, name, patch)
        except NotFound:
            self.remove(name)
            return
        with self.state.lock:
            self.state.passed.add(name)
        self.remove(name)

    def _forbid(self, job: Obj, pod: Obj, why: str) -> None:
        name = job["metadata"]["name"]
        key = mj.pod_key(job)
        message = f'Pod "{key}" is forbidden to migrate because it does not meet the requirements: {why}'
        status = dict(job.get("status") or {})
        status.update(phase=mj.PHASE_FAILED, reason=mj.REASON_FORBIDDEN_MIGRATE_POD, message=message)
        try:
            self.client.update_status({**job, "status": status})
        except (Conflict, NotFound):
            return  # changed meanwhile: looked at again next tick
        if self.recorder is not None:
            self.recorder.event(job, "Warning", mj.REASON_FORBIDDEN_MIGRATE_POD, message)
        self.remove(name)
