"""The PodMigrationJob reconciler (reference §1.7.5): the state machine that moves one pod.

Every reconcile reads the job from the API server and resumes from its status, and every write carries the
job's resourceVersion, so a second controller instance (a new leader) continues where the first stopped and a
stale writer gets a Conflict (retried) instead of repeating a step. The Reservation is named after the job's UID
and looked up before it is created; the eviction intent (condition ``Eviction=False/Evicting``) is written
before the pod is evicted, and evictions carry the pod's UID as a precondition: a job never creates two
Reservations nor evicts a pod other than its own.

Deviations from Koordinator: jobs created by another descheduler process (annotation
``koordinator.sh/job-created-by``) are *not* abandoned — a new leader must finish the migrations its predecessor
started; an eviction refused for now (a PodDisruptionBudget's 429, or the ``evictQPS`` limiter) is retried every
3 s instead of with an ever longer exponential backoff.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from koordinator.apis import migration as mj
from koordinator.apis import reservation as rv
from koordinator.runtime.controller import Result
from koordinator.runtime.errors import AlreadyExists, NotFound, TooManyRequests
from koordinator_roles.descheduler.plugins.migration.args import MigrationControllerArgs
from koordinator_roles.descheduler.plugins.migration.evictor import EvictionError, EvictorInterpreter, reason_of
from koordinator_roles.descheduler.plugins.migration.filter import is_pod_ready
from koordinator_roles.descheduler.plugins.migration.limiter import ObjectLimiters
from koordinator_roles.descheduler.plugins.migration.reservation import build_reservation
from koordinator_roles.descheduler.plugins.migration.state import ClusterState

log = logging.getLogger("koordinator.descheduler.migration")

Obj = dict[str, Any]

#: Koordinator's requeue interval while waiting on something.
REQUEUE_SECONDS = 3.0
WAIT = Result(requeue_after=REQUEUE_SECONDS)


class _Done(Exception):
    """The job reached a state where this reconcile stops (terminal phase written, or waiting)."""

    def __init__(self, result: Result | None = None) -> None:
        super().__init__()
        self.result = result


class MigrationReconciler:
    """``reconcile(name)`` for one PodMigrationJob."""

    def __init__(self, client: Any, state: ClusterState, args: MigrationControllerArgs, limiters: ObjectLimiters,
                 evictor: EvictorInterpreter, recorder: Any = None, clock: Any = time.time,
                 metrics: Any = None) -> None:
        self.client = client
        self.state = state
        self.args = args
        self.limiters = limiters
        self.evictor = evictor
        self.recorder = recorder
        self.clock = clock
        #: ``evicted(pod, strategy, result)`` (the role's DeschedulerMetrics: ``descheduler_pods_evicted``), or None.
        self.metrics = metrics

    # -- plumbing -----------------------------------------------------------------------------------------------
    def _event(self, obj: Obj, type_: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(obj, type_, reason, message)

    def _count(self, pod: Obj, trigger: str, result: str) -> None:
        if self.metrics is not None:
            self.metrics.evicted(pod, trigger, result)

    def _write_status(self, job: Obj) -> Obj:
        return self.client.update_status(job)

    def _condition(self, job: Obj, type_: str, status: str, reason: str = "", message: str = "") -> Obj:
        st = job.setdefault("status", {})
        if mj.set_condition(st, type_, status, reason, message):
            return self._write_status(job)
        return job

    def _finish(self, job: Obj, phase: str, reason: str, message: str, status: str | None = None) -> None:
        st = job.setdefault("status", {})
        st["phase"] = phase
        st["reason"] = reason
        st["message"] = message
        if status is not None:
            st["status"] = status
        self._write_status(job)
        self._event(job, "Normal" if phase == mj.PHASE_SUCCEEDED else "Warning",
                    reason or "Complete", message)
        raise _Done()

    def _fail(self, job: Obj, reason: str, message: str) -> None:
        self._finish(job, mj.PHASE_FAILED, reason, message)

    def _get_pod(self, namespace: str, name: str) -> Obj | None:
        if not namespace or not name:
            return None
        try:
            return self.client.get("Pod", name, namespace)
        except NotFound:
            return None

    def _get_reservation(self, name: str) -> Obj | None:
        try:
            return self.client.get(rv.KIND, name)
        except NotFound:
            return None

    def delete_reservation(self, job: Obj) -> None:
        """Best effort: the job's Reservation (by reference, else by its derived name); NotFound is fine."""
        name = mj.reservation_ref(job).get("name") or (
            mj.reservation_name(job) if mj.mode(job, self.args.default_job_mode) == mj.MODE_RESERVATION_FIRST
            else "")
        if name:
            try:
                self.client.delete(rv.KIND, name)
            except NotFound:
                pass

    # -- reconcile ----------------------------------------------------------------------------------------------
    def reconcile(self, name: str) -> Result | None:
        try:
            job = self.client.get(mj.KIND, name)
        except NotFound:
            return None
        try:
            return self.do_migrate(job)
        except _Done as done:
            return done.result

    def do_migrate(self, job: Obj) -> Result | None:
        spec = mj.spec_of(job)
        if spec.get("paused") or mj.phase(job) not in mj.ACTIVE_PHASES:
            return None
        self._check_ttl(job)
        if mj.phase(job) in ("", mj.PHASE_PENDING):
            job = self._start(job)
        ref = mj.pod_ref(job)
        pod = self._get_pod(ref.get("namespace", ""), ref.get("name", ""))
        if pod is not None and ref.get("uid") and pod["metadata"].get("uid") != ref["uid"]:
            pod = None  # a new pod of the same name is not ours
        annotations = (job.get("metadata") or {}).get("annotations") or {}
        if (pod is not None and mj.ANNOTATION_EVICT not in annotations and mj.condition(job, mj.COND_EVICTION) is None
                and self.limiters.exceeded(pod)):
            return WAIT
        if mj.mode(job, self.args.default_job_mode) == mj.MODE_EVICT_DIRECTLY:
            job = self._evict_pod(job, pod)
            self._finish(job, mj.PHASE_SUCCEEDED, "", f'Pod "{mj.pod_key(job)}" has been evicted',
                         status=mj.STATUS_COMPLETE)
        return self._reservation_first(job, pod)

    def _check_ttl(self, job: Obj) -> None:
        try:
            ttl = mj.ttl_seconds(job)
        except ValueError as exc:
            self._fail(job, mj.REASON_TIMEOUT, str(exc))
        created = mj.created_at(job)
        if ttl > 0 and created is not None and self.clock() - created >= ttl:
            self.delete_reservation(job)
            self._fail(job, mj.REASON_TIMEOUT, "Abort job caused by timeout")

    def _start(self, job: Obj) -> Obj:
        """Pending → Running: the pod must exist; its UID is pinned in ``spec.podRef``."""
        ref = mj.pod_ref(job)
        if not ref.get("namespace") or not ref.get("name"):
            self._fail(job, mj.REASON_INVALID_POD_REF,
                       f"spec.podRef: Invalid value: {dict(ref)!r}: namespace and name are required")
        pod = self._get_pod(ref["namespace"], ref["name"])
        if pod is None or (ref.get("uid") and pod["metadata"].get("uid") != ref["uid"]):
            what = f'Pod "{ref["namespace"]}/{ref["name"]}"' + (f' with uid {ref["uid"]}' if ref.get("uid") else "")
            self._fail(job, mj.REASON_MISSING_POD, f"Abort job caused by missing {what} named by spec.podRef")
        if not ref.get("uid"):
            job["spec"]["podRef"]["uid"] = pod["metadata"]["uid"]
            job = self.client.update(job)
        job.setdefault("status", {})["phase"] = mj.PHASE_RUNNING
        return self._write_status(job)

    # -- eviction -----------------------------------------------------------------------------------------------
    def _evict_pod(self, job: Obj, pod: Obj | None) -> Obj:
        """Returns the job once its pod is gone; raises _Done while waiting (or when the job failed)."""
        cond = mj.condition(job, mj.COND_EVICTION)
        if cond is not None and cond.get("status") == "True":
            return job
        if pod is None:
            if cond is None:
                self._fail(job, mj.REASON_MISSING_POD,
                           f'Abort job caused by missing Pod "{mj.pod_key(job)}" named by spec.podRef')
            job = self._condition(job, mj.COND_EVICTION, "True", mj.REASON_EVICT_COMPLETE,
                                  f'Pod "{mj.pod_key(job)}" has been evicted')
            self._event(job, "Normal", mj.REASON_EVICT_COMPLETE, f'Pod "{mj.pod_key(job)}" has been evicted')
            return job
        if pod["metadata"].get("deletionTimestamp"):
            raise _Done(WAIT)
        if mj.reservation_ref(job):
            r = self._get_reservation(mj.reservation_ref(job)["name"])
            if r is not None and rv.phase(r) == rv.PHASE_SUCCEEDED:
                self._fail(job, mj.REASON_FORBIDDEN_MIGRATE_POD,
                           f'Reservation "{r["metadata"]["name"]}" was bound by another Pod')
        policy = self.evictor.policy(pod, job)
        if cond is not None and cond.get("reason") == mj.REASON_EVICTING and policy == "SoftEviction":
            raise _Done(WAIT)  # another agent acts on the annotation
        reason, trigger = reason_of(job)
        node = (pod.get("spec") or {}).get("nodeName", "")
        message = f'Pod "{mj.pod_key(job)}" evicted from node "{node}" by the reason "{reason}"'
        # Intent first: a leader taking over after this point knows the eviction was started.
        job = self._condition(job, mj.COND_EVICTION, "False", mj.REASON_EVICTING, message)
        try:
            self.evictor.evict(pod, job)
            self._count(pod, trigger, "success")
        except (EvictionError, TooManyRequests) as exc:
            self._count(pod, trigger, "error")
            # A disruption budget or the eviction rate limit says "not now": retry at the requeue interval
            # rather than with an exponential backoff that would grow long while the budget is exhausted.
            self._event(job, "Warning", mj.REASON_EVICTING,
                        f'Failed evict Pod "{mj.pod_key(job)}" caused by {exc}')
            raise _Done(WAIT) from None
        except Exception as exc:
            self._count(pod, trigger, "error")
            self._event(job, "Warning", mj.REASON_EVICTING,
                        f'Failed evict Pod "{mj.pod_key(job)}" caused by {exc}')
            raise
        self.limiters.track(pod)
        self._event(pod, "Normal", "Descheduled", f'Pod evicted from node "{node}" by the reason "{reason}"')
        raise _Done(WAIT)

    # -- ReservationFirst ---------------------------------------------------------------------------------------
    def _reservation_first(self, job: Obj, pod: Obj | None) -> Result | None:
        ref = mj.reservation_ref(job)
        if not ref:
            return self._create_reservation(job, pod)
        job = self._condition(job, mj.COND_RESERVATION_CREATED, "True")
        r = self._get_reservation(ref["name"])
        if r is None:
            self._fail(job, mj.REASON_MISSING_RESERVATION, f'Reservation "{ref["name"]}" is missing')
        if rv.LABEL_RESERVATION_ORDER not in ((r.get("metadata") or {}).get("labels") or {}):
            r = self.client.patch(rv.KIND, ref["name"], {"metadata": {"labels": {
                rv.LABEL_RESERVATION_ORDER: str(int(self.clock() * 1000))}}})
        scheduled = rv.condition(r, rv.CONDITION_SCHEDULED) or {}
        ours = mj.condition(job, mj.COND_RESERVATION_SCHEDULED)
        if (ours is None or ours.get("status") == "False") and scheduled.get("reason") == rv.REASON_UNSCHEDULABLE:
            if mj.set_condition(job.setdefault("status", {}), mj.COND_RESERVATION_SCHEDULED, "False",
                                mj.REASON_UNSCHEDULABLE, scheduled.get("message", "")):
                job = self._write_status(job)
                self._event(job, "Warning", mj.REASON_UNSCHEDULABLE, scheduled.get("message", ""))
        if rv.phase(r) in ("", rv.PHASE_PENDING):
            return WAIT
        ready = rv.condition(r, rv.CONDITION_READY) or {}
        if rv.phase(r) == rv.PHASE_FAILED and ready.get("reason") == rv.REASON_EXPIRED:
            self._fail(job, mj.REASON_RESERVATION_EXPIRED, f'Reservation "{ref["name"]}" expired')
        node = rv.status_of(r).get("nodeName") or ""
        if not node or not (scheduled.get("reason") == rv.REASON_SCHEDULED and scheduled.get("status") == "True"):
            self._fail(job, mj.REASON_UNSCHEDULABLE, scheduled.get("message") or
                       f'Reservation "{ref["name"]}" is not scheduled')
        if not mj.status_of(job).get("nodeName"):
            if pod is not None and (pod.get("spec") or {}).get("nodeName") == node:
                self._fail(job, mj.REASON_FORBIDDEN_MIGRATE_POD,
                           f'Scheduler assignes the Reservation "{ref["name"]}" on the same node "{node}" as the Pod')
            job["status"]["nodeName"] = node
            mj.set_condition(job["status"], mj.COND_RESERVATION_SCHEDULED, "True")
            job = self._write_status(job)
            self._event(job, "Normal", mj.COND_RESERVATION_SCHEDULED,
                        f'Reservation "{ref["name"]}" scheduled to node "{node}"')
        if self._owned_by_the_pod(job, r):
            self._wait_pending_pod(job, pod, r, node)
        job = self._evict_pod(job, pod)
        owners = rv.status_of(r).get("currentOwners") or []
        if not owners:
            job = self._condition(job, mj.COND_POD_BOUND_RESERVATION, "False", mj.REASON_WAIT_FOR_POD_BIND_RESERVATION,
                                  f'Wait for a Pod to bind Reservation "{ref["name"]}"')
            return WAIT
        bound = owners[0]
        if mj.status_of(job).get("podRef") != bound:
            job["status"]["podRef"] = bound
        job = self._condition(job, mj.COND_RESERVATION_BOUND, "True")
        new_pod = self.state.pod(bound.get("namespace", ""), bound.get("name", "")) or self._get_pod(
            bound.get("namespace", ""), bound.get("name", ""))
        bound_key = f'{bound.get("namespace")}/{bound.get("name")}'
        if new_pod is not None and not is_pod_ready(new_pod):
            job = self._condition(job, mj.COND_BOUND_POD_READY, "False", mj.REASON_WAIT_FOR_BOUND_POD_READY,
                                  f'Wait for Pod "{bound_key}" to be ready')
            return WAIT
        mj.set_condition(job["status"], mj.COND_BOUND_POD_READY, "True")
        mj.set_condition(job["status"], mj.COND_POD_BOUND_RESERVATION, "True")
        self._finish(job, mj.PHASE_SUCCEEDED, "", f'Bind Pod "{bound_key}" in Reservation "{ref["name"]}"',
                     status=mj.STATUS_COMPLETE)
        return None

    @staticmethod
    def _owned_by_the_pod(job: Obj, r: Obj) -> bool:
        """The Reservation was made for the (then unscheduled) pod itself: an ``object`` owner with its UID."""
        uid = mj.pod_ref(job).get("uid")
        return bool(uid) and any(
            (o.get("object") or {}).get("uid") == uid and not o.get("controller") and not o.get("labelSelector")
            for o in rv.spec_of(r).get("owners") or [])

    def _wait_pending_pod(self, job: Obj, pod: Obj | None, r: Obj, node: str) -> None:
        """An unscheduled pod is not evicted: it owns the Reservation and is scheduled into it."""
        key = mj.pod_key(job)
        if pod is None:
            self._fail(job, mj.REASON_MISSING_POD, f'Abort job caused by missing Pod "{key}" named by spec.podRef')
        if rv.phase(r) == rv.PHASE_SUCCEEDED and not any(
                o.get("uid") == pod["metadata"].get("uid") for o in rv.status_of(r).get("currentOwners") or []):
            self._fail(job, mj.REASON_FORBIDDEN_MIGRATE_POD,
                       f'Reservation "{r["metadata"]["name"]}" was bound by another Pod')
        scheduled = next((c for c in (pod.get("status") or {}).get("conditions") or []
                          if c.get("type") == "PodScheduled"), {})
        if scheduled.get("status") != "True":
            self._condition(job, mj.COND_POD_SCHEDULED, "False", mj.REASON_UNSCHEDULABLE,
                            scheduled.get("message", ""))
            raise _Done(WAIT)
        mj.set_condition(job["status"], mj.COND_POD_SCHEDULED, "True")
        self._finish(job, mj.PHASE_SUCCEEDED, "", f'Assign Pod "{key}" to node "{node}"', status=mj.STATUS_COMPLETE)

    def _create_reservation(self, job: Obj, pod: Obj | None) -> Result | None:
        """Find or create the job's Reservation (its name comes from the job), then record the reference."""
        name = mj.reservation_name(job)
        r = self._get_reservation(name)
        if r is None:
            if pod is None:
                self._fail(job, mj.REASON_MISSING_POD,
                           f'Abort job caused by missing Pod "{mj.pod_key(job)}" named by spec.podRef')
            try:
                r = self.client.create(build_reservation(job, pod))
            except AlreadyExists:
                r = self._get_reservation(name)
            except Exception as exc:
                self._condition(job, mj.COND_RESERVATION_CREATED, "False", mj.REASON_FAILED_CREATE_RESERVATION,
                                str(exc))
                raise
            if r is None:
                return Result(requeue=True)
        job = copy.deepcopy(job)
        options = job["spec"].setdefault("reservationOptions", {})
        options["reservationRef"] = {"kind": rv.KIND, "apiVersion": rv.GROUP_VERSION.split("/")[1],
                                     "name": r["metadata"]["name"], "uid": r["metadata"].get("uid")}
        job = self.client.update(job)
        self._event(job, "Normal", mj.COND_RESERVATION_CREATED, f'Reservation "{name}" created')
        return Result(requeue_after=0.01)
