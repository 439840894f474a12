"""The Job controller (kube-controller-manager's ``job`` controller) and, beside it, TTL after finished.

A batch/v1 Job runs pods from its template until ``completions`` of them succeeded (or, without
``completions``, until one succeeded and none is left running), at most ``parallelism`` at a time:

* ``NonIndexed`` and ``Indexed`` completion modes: an Indexed pod carries its index in the
  ``batch.kubernetes.io/job-completion-index`` annotation and label, ``JOB_COMPLETION_INDEX`` in its
  environment, hostname ``<job>-<index>`` and generateName ``<job>-<index>-``; ``status.completedIndexes``
  lists the indexes done;
* finished pods are tracked as kube does: every pod gets the ``batch.kubernetes.io/job-tracking``
  finalizer; a finished (or deleted) pod goes into ``status.uncountedTerminatedPods``, loses the
  finalizer, then counts in ``succeeded``/``failed`` — nothing is counted twice or lost when pods
  disappear or the controller restarts;
* more than ``backoffLimit`` failures (or container restarts with restartPolicy OnFailure), or
  running longer than ``activeDeadlineSeconds``, fails the Job: the ``FailureTarget`` condition,
  the active pods deleted, then ``Failed`` (reason ``BackoffLimitExceeded``/``DeadlineExceeded``)
  and a Warning event; success is ``SuccessCriteriaMet`` then ``Complete`` and the ``Completed`` event;
* a failed pod is replaced only after kube's exponential backoff: :data:`POD_FAILURE_BACKOFF`
  (10 s) doubled per consecutive failure, at most :data:`MAX_POD_FAILURE_BACKOFF` (6 min);
* ``suspend`` deletes the active pods (``Suspended`` condition, ``Suspended``/``Resumed`` events;
  resuming restarts the deadline's clock);
* pods whose Job is gone or finished lose the tracking finalizer;
* ``ttlSecondsAfterFinished`` (:mod:`koordinator.controllers.ttlafterfinished`): the finished Job is
  deleted in the foreground that long after it finished.

Not implemented: ``podFailurePolicy``, ``successPolicy``, ``backoffLimitPerIndex`` (such Jobs run
with the global backoff limit). The three module settings (seconds) are what tests shorten.
"""

from __future__ import annotations

import copy
import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from koordinator.controllers import jobutil as ju
from koordinator.controllers.podcontrol import (CONTROLLER_UID_INDEX, Expectations, PodControl, controller_ref,
                                                controller_uid_index, deletion_rank_key, ensure_index,
                                                fresh_owner_check, is_pod_active, is_pod_ready, is_terminating,
                                                now_rfc3339, object_key, owner_reference, parse_time,
                                                pod_from_template, pod_phase, selector_matches, separate_recorder,
                                                slow_start_batch)
from koordinator.runtime import errors
from koordinator.runtime.controller import Result

log = logging.getLogger("koordinator.controllers.job")

Obj = dict[str, Any]
COMPONENT = "job-controller"
WORKERS = 5
#: kube's DefaultJobPodFailureBackOff and MaxJobPodFailureBackOff, in seconds.
POD_FAILURE_BACKOFF = 10.0
MAX_POD_FAILURE_BACKOFF = 360.0
#: Pod events and status changes sync a Job at most once per this many seconds (kube's syncJobBatchPeriod).
SYNC_BATCH_PERIOD = 1.0
MAX_UNCOUNTED_PODS = 500
MAX_POD_CREATE_DELETE_PER_SYNC = 500


@dataclass
class _SyncContext:
    """What one sync knows (kube's ``syncJobCtx``)."""

    job: Obj
    pods: list[Obj]
    active_pods: list[Obj]
    ready: int
    terminating: int
    uncounted_succeeded: set[str]
    uncounted_failed: set[str]
    expected_rm_finalizers: set[str]
    succeeded: int = 0
    failed: int = 0
    finished_condition: Obj | None = None
    prev_succeeded_indexes: set[int] = field(default_factory=set)
    succeeded_indexes: set[int] = field(default_factory=set)
    backoff: ju.BackoffRecord | None = None


class _FinalizerExpectations:
    """Pod uids whose tracking finalizer this controller removed and whose removal it has not seen yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._uids: dict[str, set[str]] = {}

    def expect(self, key: str, uids: list[str]) -> None:
        with self._lock:
            self._uids.setdefault(key, set()).update(uids)

    def observed(self, key: str, uid: str) -> None:
        with self._lock:
            pending = self._uids.get(key)
            if pending is not None:
                pending.discard(uid)
                if not pending:
                    del self._uids[key]

    def get(self, key: str) -> set[str]:
        with self._lock:
            return set(self._uids.get(key, ()))

    def forget(self, key: str) -> None:
        with self._lock:
            self._uids.pop(key, None)


class _JobGone(Exception):
    """The Job was deleted while it was being synced."""


def _managed_elsewhere(job: Obj) -> bool:
    managed_by = ju.spec(job).get("managedBy")
    return managed_by is not None and managed_by != ju.JOB_CONTROLLER_NAME


class JobController:
    """Syncs Jobs (key ``namespace/name``) and removes the tracking finalizer of orphaned pods."""

    def __init__(self, runtime: Any) -> None:
        self.client = runtime.client
        self.jobs = runtime.informers.informer("Job")
        self.pods = runtime.informers.informer("Pod")
        ensure_index(self.pods, CONTROLLER_UID_INDEX, controller_uid_index)
        self.recorder = separate_recorder(runtime, COMPONENT)
        self.pod_control = PodControl(self.client, self.recorder)
        self.expectations = Expectations()
        self.finalizer_expectations = _FinalizerExpectations()
        self.backoff = ju.BackoffStore()
        self.controller = runtime.controller("job", self.sync, workers=WORKERS)
        self.orphans = runtime.controller("job-orphan-pods", self.sync_orphan_pod, workers=1)
        self.jobs.add_handler(on_add=self._add_job, on_update=self._update_job, on_delete=self._delete_job)
        self.pods.add_handler(on_add=self._add_pod, on_update=self._update_pod,
                              on_delete=lambda pod: self._delete_pod(pod, final=True))

    # -- event handlers ----------------------------------------------------------------------------

    def _enqueue_batched(self, key: str, delay: float | None = None) -> None:
        self.controller.queue.add_after(key, max(delay or 0.0, SYNC_BATCH_PERIOD))

    def _add_job(self, job: Obj) -> None:
        if not _managed_elsewhere(job):
            self.controller.enqueue(object_key(job))

    def _update_job(self, old: Obj, new: Obj) -> None:
        if _managed_elsewhere(new):
            return
        key = object_key(new)
        if old["metadata"].get("generation") == new["metadata"].get("generation"):
            self._enqueue_batched(key)
        else:
            self.controller.enqueue(key)
        if ju.is_finished(new):
            self._cleanup_pod_finalizers(new)
        start = parse_time((new.get("status") or {}).get("startTime"))
        deadline = ju.spec(new).get("activeDeadlineSeconds")
        if start is not None and deadline is not None and ju.spec(old).get("activeDeadlineSeconds") != deadline:
            self.controller.queue.add_after(key, max(start + int(deadline) - time.time(), 0.0))

    def _delete_job(self, job: Any) -> None:
        if not isinstance(job, dict):
            job = getattr(job, "obj", None)
            if not isinstance(job, dict):
                return
        self.controller.enqueue(object_key(job))
        self._cleanup_pod_finalizers(job)

    def _cleanup_pod_finalizers(self, job: Obj) -> None:
        for pod in self.pods.store.by_index(CONTROLLER_UID_INDEX, job["metadata"].get("uid", "")):
            if ju.has_tracking_finalizer(pod):
                self.orphans.enqueue(object_key(pod))

    def _resolve(self, namespace: str, ref: Obj | None) -> Obj | None:
        """The cached Job a controllerRef names (same uid), or None."""
        if ref is None or ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
            return None
        job = self.jobs.store.get(f"{namespace}/{ref.get('name')}")
        if job is None or job["metadata"].get("uid") != ref.get("uid"):
            return None
        return job

    def _matching_jobs(self, pod: Obj) -> list[Obj]:
        md = pod.get("metadata") or {}
        return [j for j in self.jobs.store.by_index("namespace", md.get("namespace", ""))
                if selector_matches(ju.spec(j).get("selector"), md.get("labels"))]

    def _add_pod(self, pod: Obj) -> None:
        if is_terminating(pod):
            self._delete_pod(pod, final=False)  # seen for the first time already terminating
            return
        ns = pod["metadata"].get("namespace", "")
        ref = controller_ref(pod)
        if ref is not None:
            job = self._resolve(ns, ref)
            if job is None or ju.is_finished(job):
                if ju.has_tracking_finalizer(pod):
                    self.orphans.enqueue(object_key(pod))
                return
            key = object_key(job)
            self.expectations.creation_observed(key)
            self._enqueue_batched(key)
            return
        if ju.has_tracking_finalizer(pod):
            self.orphans.enqueue(object_key(pod))
        for job in self._matching_jobs(pod):
            self._enqueue_batched(object_key(job))

    def _update_pod(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return
        if is_terminating(new):
            self._delete_pod(new, final=False)
            return
        ns = new["metadata"].get("namespace", "")
        removed = not ju.has_tracking_finalizer(new)
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        if old_ref is not None and old_ref != new_ref:
            job = self._resolve(ns, old_ref)
            if job is not None:
                if removed:
                    self.finalizer_expectations.observed(object_key(job), new["metadata"]["uid"])
                self._enqueue_batched(object_key(job))
        if new_ref is not None:
            job = self._resolve(ns, new_ref)
            if job is None or ju.is_finished(job):
                if not removed:
                    self.orphans.enqueue(object_key(new))
                return
            if removed:
                self.finalizer_expectations.observed(object_key(job), new["metadata"]["uid"])
            self._enqueue_batched(object_key(job))
            return
        if not removed:
            self.orphans.enqueue(object_key(new))
        if old["metadata"].get("labels") != new["metadata"].get("labels") or old_ref != new_ref:
            for job in self._matching_jobs(new):
                self._enqueue_batched(object_key(job))

    def _delete_pod(self, pod: Any, final: bool) -> None:
        if not isinstance(pod, dict):
            pod = getattr(pod, "obj", None)
            if not isinstance(pod, dict):
                return
            final = True
        ns = pod["metadata"].get("namespace", "")
        has_finalizer = ju.has_tracking_finalizer(pod)
        ref = controller_ref(pod)
        job = self._resolve(ns, ref)
        if job is None or ju.is_finished(job):
            if has_finalizer and not final:
                self.orphans.enqueue(object_key(pod))
            return
        key = object_key(job)
        self.expectations.deletion_observed(key, object_key(pod))
        if final or not has_finalizer:
            self.finalizer_expectations.observed(key, pod["metadata"]["uid"])
        self._enqueue_batched(key)

    # -- orphan pods ---------------------------------------------------------------------------------

    def sync_orphan_pod(self, key: str) -> None:
        """Remove the tracking finalizer of a pod no unfinished Job of ours controls."""
        pod = self.pods.store.get(key)
        if pod is None or not ju.has_tracking_finalizer(pod):
            return None
        ref = controller_ref(pod)
        if ref is not None:
            if ref.get("kind") != "Job" or ref.get("apiVersion") != "batch/v1":
                return None  # another kind of controller's pod: not our finalizer to take
            job = self._resolve(pod["metadata"].get("namespace", ""), ref)
            if job is not None and (_managed_elsewhere(job) or not ju.is_finished(job)):
                return None  # adopted meanwhile, or another controller's Job
        self._remove_finalizer(pod)
        return None

    def _remove_finalizer(self, pod: Obj) -> None:
        md = pod["metadata"]
        rest = [f for f in md.get("finalizers") or () if f != ju.TRACKING_FINALIZER]
        try:
            self.client.patch("Pod", md["name"], {"metadata": {"finalizers": rest or None,
                                                              "resourceVersion": md.get("resourceVersion")}},
                              namespace=md["namespace"])
        except errors.NotFound:
            pass
        except errors.Conflict:
            # Changed meanwhile: retry against the current pod.
            fresh = self.client.get("Pod", md["name"], md["namespace"])
            if fresh["metadata"].get("uid") == md.get("uid") and ju.has_tracking_finalizer(fresh):
                self._remove_finalizer(fresh)

    # -- sync ------------------------------------------------------------------------------------------

    def sync(self, key: str) -> Result | None:
        """kube's ``syncJob``; a write that lost a race (the Job changed or went meanwhile) retries quietly."""
        try:
            return self._sync(key)
        except errors.Conflict as err:
            log.debug("job %s changed meanwhile, syncing again: %s", key, err)
            return Result(requeue=True)
        except _JobGone:
            return None  # its deletion event syncs it once more, to forget it

    def _sync(self, key: str) -> None:
        shared = self.jobs.store.get(key)
        if shared is None:
            self.expectations.forget(key)
            self.finalizer_expectations.forget(key)
            self.backoff.remove(key)
            return None
        if _managed_elsewhere(shared):
            return None
        if ju.is_finished(shared):
            self.backoff.remove(key)
            return None
        mode = ju.spec(shared).get("completionMode")
        if mode not in (None, "NonIndexed", "Indexed"):
            self.recorder.event(shared, "Warning", "UnknownCompletionMode",
                                "Skipped Job sync because completion mode is unknown")
            return None
        job = copy.deepcopy(shared)
        status = job.setdefault("status", {})
        uncounted = status.get("uncountedTerminatedPods") or {}
        status["uncountedTerminatedPods"] = {k: list(v) for k, v in uncounted.items() if v}
        satisfied = self.expectations.satisfied(key)
        pods = self._pods_for_job(job)
        active_pods = [p for p in pods if is_pod_active(p)]
        ctx = _SyncContext(job, pods, active_pods, sum(1 for p in active_pods if is_pod_ready(p)),
                           sum(1 for p in pods if ju.is_terminating_pod(p)),
                           set(uncounted.get("succeeded") or ()), set(uncounted.get("failed") or ()),
                           self.finalizer_expectations.get(key))
        active = len(active_pods)
        new_succeeded, new_failed = self._new_finished_pods(ctx)
        ctx.succeeded = int(status.get("succeeded") or 0) + len(new_succeeded) + len(ctx.uncounted_succeeded)
        ctx.failed = int(status.get("failed") or 0) + len(new_failed) + len(ctx.uncounted_failed)
        if not status.get("startTime") and not ju.is_suspended(job):
            status["startTime"] = now_rfc3339()
        ctx.backoff = self.backoff.new_record(key, new_succeeded, new_failed)
        spec = ju.spec(job)
        backoff_limit = int(spec.get("backoffLimit", 6))
        met = ju.find_condition(job, ju.SUCCESS_CRITERIA_MET)
        ctx.finished_condition = met if met is not None and met.get("status") == "True" else None
        if ctx.finished_condition is None:
            target = ju.find_condition(job, ju.FAILURE_TARGET)
            if target is not None and target.get("status") == "True":
                ctx.finished_condition = ju.new_condition(ju.FAILED, "True", target.get("reason", ""),
                                                          target.get("message", ""))
        if ctx.finished_condition is None:
            if ctx.failed > backoff_limit or ju.restart_count_exceeds(job, pods):
                ctx.finished_condition = ju.new_condition(ju.FAILURE_TARGET, "True", ju.REASON_BACKOFF_LIMIT,
                                                          ju.MESSAGE_BACKOFF_LIMIT)
            elif self._past_active_deadline(job):
                ctx.finished_condition = ju.new_condition(ju.FAILURE_TARGET, "True", ju.REASON_DEADLINE,
                                                          ju.MESSAGE_DEADLINE)
            elif spec.get("activeDeadlineSeconds") is not None and not ju.is_suspended(job):
                started = parse_time(status.get("startTime")) or time.time()
                self.controller.queue.add_after(key, max(started + int(spec["activeDeadlineSeconds"]) - time.time(),
                                                         0.0))
        if ju.is_indexed(job):
            n = ju.completions(job) or 0
            ctx.prev_succeeded_indexes = ju.parse_indexes(status.get("completedIndexes"), n)
            ctx.succeeded_indexes = ctx.prev_succeeded_indexes | {
                ju.completion_index(p) for p in pods
                if pod_phase(p) == "Succeeded" and ju.has_tracking_finalizer(p)
                and 0 <= ju.completion_index(p) < n}
            ctx.succeeded = len(ctx.succeeded_indexes)
        suspend_changed = False
        manage_error: Exception | None = None
        if ctx.finished_condition is not None:
            deleted_ready, deleted, manage_error = self._delete_pods(job, ctx.active_pods, remove_finalizer=False)
            if deleted != active or not satisfied:
                ctx.finished_condition = None  # pods or finalizers may remain that the cache does not show yet
            active -= deleted
            ctx.terminating += deleted
            ctx.ready -= deleted_ready
        else:
            managed = False
            if satisfied and not is_terminating(job):
                active, manage_error = self._manage(job, ctx, key)
                managed = True
            n = ju.completions(job)
            complete = (ctx.succeeded > 0 and active == 0) if n is None else (ctx.succeeded >= n and active == 0)
            if complete:
                ctx.finished_condition = ju.new_condition(ju.SUCCESS_CRITERIA_MET, "True",
                                                          ju.REASON_COMPLETIONS_REACHED, ju.MESSAGE_COMPLETIONS_REACHED)
            elif managed:
                suspend_changed = self._suspend_conditions(job)
        needs_update = (suspend_changed or active != int(status.get("active") or 0)
                        or ctx.ready != status.get("ready") or ctx.terminating != status.get("terminating"))
        status["active"], status["ready"], status["terminating"] = active, ctx.ready, ctx.terminating
        self._track_status(ctx, key, needs_update)
        if manage_error is not None:
            raise manage_error
        return None

    def _past_active_deadline(self, job: Obj) -> bool:
        deadline = ju.spec(job).get("activeDeadlineSeconds")
        started = parse_time((job.get("status") or {}).get("startTime"))
        if deadline is None or started is None or ju.is_suspended(job):
            return False
        return time.time() - started >= int(deadline)

    def _suspend_conditions(self, job: Obj) -> bool:
        conditions = job["status"].setdefault("conditions", [])
        if ju.is_suspended(job):
            changed = ju.ensure_condition(conditions, ju.SUSPENDED, "True", "JobSuspended", "Job suspended")
            if changed:
                self.recorder.event(job, "Normal", "Suspended", "Job suspended")
        else:
            changed = ju.ensure_condition(conditions, ju.SUSPENDED, "False", "JobResumed", "Job resumed")
            if changed:
                self.recorder.event(job, "Normal", "Resumed", "Job resumed")
                # The deadline counts from the resumption, as for a Job created suspended.
                job["status"]["startTime"] = now_rfc3339()
        if not conditions:
            job["status"].pop("conditions")
        return changed

    # -- pods of a job -------------------------------------------------------------------------------

    def _pods_for_job(self, job: Obj) -> list[Obj]:
        """The pods the Job controls after adopting matching orphans (with the tracking finalizer) and
        releasing owned pods that stopped matching (kube's ``getPodsForJob``)."""
        md = job["metadata"]
        selector = ju.spec(job).get("selector")
        owned = self.pods.store.by_index(CONTROLLER_UID_INDEX, md["uid"])
        orphans = [p for p in self.pods.store.by_index("namespace", md["namespace"])
                   if controller_ref(p) is None and not is_terminating(p)
                   and selector_matches(selector, (p.get("metadata") or {}).get("labels"))]
        claimed = []
        deleting = is_terminating(job)
        for pod in owned:
            if selector_matches(selector, pod["metadata"].get("labels")):
                claimed.append(pod)
            elif not deleting:
                self._patch_owner(pod, [r for r in pod["metadata"].get("ownerReferences") or ()
                                        if r.get("uid") != md["uid"]], None)
        if orphans and not deleting:
            try:
                fresh_owner_check(self.client, job)()
            except Exception as err:  # gone, replaced or being deleted: adopt nothing
                log.debug("job %s/%s: not adopting: %s", md["namespace"], md["name"], err)
                return claimed
            for pod in orphans:
                refs = [*(pod["metadata"].get("ownerReferences") or ()), owner_reference(job)]
                finalizers = list(pod["metadata"].get("finalizers") or ())
                if ju.TRACKING_FINALIZER not in finalizers:
                    finalizers.append(ju.TRACKING_FINALIZER)
                adopted = self._patch_owner(pod, refs, finalizers)
                if adopted is not None:
                    claimed.append(adopted)
        return claimed

    def _patch_owner(self, pod: Obj, refs: list[Obj], finalizers: list[str] | None) -> Obj | None:
        md = pod["metadata"]
        body: Obj = {"metadata": {"ownerReferences": refs or None, "resourceVersion": md.get("resourceVersion")}}
        if finalizers is not None:
            body["metadata"]["finalizers"] = finalizers
        try:
            return self.client.patch("Pod", md["name"], body, namespace=md["namespace"])
        except (errors.NotFound, errors.Conflict):
            return None  # gone or changed: the next sync looks again

    def _new_finished_pods(self, ctx: _SyncContext) -> tuple[list[Obj], list[Obj]]:
        """Finished pods not yet counted: they still have the finalizer and are in no uncounted list."""
        succeeded, failed = [], []
        n = ju.completions(ctx.job) or 0
        for pod in ctx.pods:
            uid = pod["metadata"]["uid"]
            if not ju.has_tracking_finalizer(pod) or uid in ctx.expected_rm_finalizers:
                continue
            if ju.is_indexed(ctx.job) and not 0 <= ju.completion_index(pod) < n:
                continue
            if pod_phase(pod) == "Succeeded" and uid not in ctx.uncounted_succeeded:
                succeeded.append(pod)
            elif ju.is_pod_failed(pod, ctx.job) and uid not in ctx.uncounted_failed:
                failed.append(pod)
        return succeeded, failed

    # -- manage -----------------------------------------------------------------------------------------

    def _manage(self, job: Obj, ctx: _SyncContext, key: str) -> tuple[int, Exception | None]:
        """kube's ``manageJob``: delete surplus (or, suspended, all) active pods, else create the missing."""
        active = len(ctx.active_pods)
        spec = ju.spec(job)
        parallelism = int(spec.get("parallelism", 1))
        if ju.is_suspended(job):
            to_delete = self._pods_for_removal(job, ctx.active_pods, active)
            self.expectations.expect(key, deletions=[object_key(p) for p in to_delete])
            ready, removed, err = self._delete_pods(job, to_delete, remove_finalizer=True)
            ctx.terminating += removed
            ctx.ready -= ready
            return active - removed, err
        n = ju.completions(job)
        if n is None:
            want = active if ctx.succeeded > 0 else parallelism
        else:
            want = max(min(n - ctx.succeeded, parallelism), 0)
        surplus = max(active - want, 0)
        to_delete = self._pods_for_removal(job, ctx.active_pods, surplus)[:MAX_POD_CREATE_DELETE_PER_SYNC]
        if to_delete:
            self.expectations.expect(key, deletions=[object_key(p) for p in to_delete])
            ready, removed, err = self._delete_pods(job, to_delete, remove_finalizer=True)
            ctx.terminating += removed
            ctx.ready -= ready
            return active - removed, err
        terminating = ctx.terminating if ju.only_replace_failed_pods(job) else 0
        diff = want - terminating - active
        if diff <= 0:
            return active, None
        assert ctx.backoff is not None
        remaining = ctx.backoff.remaining(POD_FAILURE_BACKOFF, MAX_POD_FAILURE_BACKOFF)
        if remaining > 0:
            self._enqueue_batched(key, remaining)
            return active, None
        diff = min(diff, MAX_POD_CREATE_DELETE_PER_SYNC)
        indexes: list[int] = []
        if ju.is_indexed(job):
            indexes = self._first_pending_indexes(ctx, diff, n or 0)
            diff = len(indexes)
            if diff == 0:
                return active, None
        self.expectations.expect(key, adds=diff)
        template = copy.deepcopy(spec.get("template") or {})
        tspec = template.setdefault("spec", {})
        if ju.is_indexed(job):
            ju.add_completion_index_env(tspec)
        tmeta = template.setdefault("metadata", {})
        finalizers = list(tmeta.get("finalizers") or ())
        if ju.TRACKING_FINALIZER not in finalizers:
            finalizers.append(ju.TRACKING_FINALIZER)
        tmeta["finalizers"] = finalizers
        next_index = iter(indexes) if indexes else itertools.repeat(ju.UNKNOWN_INDEX)
        attempted = [0]

        def create_one() -> None:
            index = next(next_index)
            attempted[0] += 1
            pod = pod_from_template(template, job)
            if index != ju.UNKNOWN_INDEX:
                pmd = pod["metadata"]
                pmd.setdefault("annotations", {})[ju.COMPLETION_INDEX_ANNOTATION] = str(index)
                pmd["labels"][ju.COMPLETION_INDEX_LABEL] = str(index)
                pmd["generateName"] = ju.generate_name_with_index(job["metadata"]["name"], index)
                pod["spec"]["hostname"] = f"{job['metadata']['name']}-{index}"
            try:
                self.pod_control.create(pod, job)
            except Exception:
                self.expectations.creation_observed(key)  # the informer will never see this one
                raise

        created, err = slow_start_batch(diff, create_one)
        for _ in range(diff - attempted[0]):
            self.expectations.creation_observed(key)  # skipped after a failed batch
        if err is not None and _namespace_terminating(err):
            err = None
        return active + created, err

    def _first_pending_indexes(self, ctx: _SyncContext, count: int, n: int) -> list[int]:
        busy = set(ctx.succeeded_indexes)
        busy.update(ju.completion_index(p) for p in ctx.active_pods)
        if ju.only_replace_failed_pods(ctx.job):
            busy.update(ju.completion_index(p) for p in ctx.pods if ju.is_terminating_pod(p))
        return [i for i in range(n) if i not in busy][:count]

    def _pods_for_removal(self, job: Obj, pods: list[Obj], at_least: int) -> list[Obj]:
        """kube's ``activePodsForRemoval``: for an Indexed Job, pods with a bad index or a duplicated one
        first; then the ones least far along (unassigned, pending, not ready, newest)."""
        now = time.time()
        remove: list[Obj] = []
        left = list(pods)
        if ju.is_indexed(job):
            n = ju.completions(job) or 0
            by_index: dict[int, list[Obj]] = {}
            left = []
            for pod in pods:
                ix = ju.completion_index(pod)
                if not 0 <= ix < n:
                    remove.append(pod)
                else:
                    by_index.setdefault(ix, []).append(pod)
            for group in by_index.values():
                group.sort(key=lambda p: deletion_rank_key(p, 0, now))
                remove.extend(group[:-1])
                left.append(group[-1])
        if len(remove) < at_least:
            left.sort(key=lambda p: deletion_rank_key(p, 0, now))
            remove.extend(left[:at_least - len(remove)])
        return remove

    def _delete_pods(self, job: Obj, pods: list[Obj], *, remove_finalizer: bool) -> tuple[int, int, Exception | None]:
        """Delete ``pods`` (``deleteJobPods`` takes the finalizer off first; ``deleteActivePods`` leaves it
        for the status tracking to remove once counted). Returns ready deleted, deleted, first error."""
        key = object_key(job)
        deleted = ready = 0
        first: Exception | None = None
        for pod in pods:
            try:
                if remove_finalizer and ju.has_tracking_finalizer(pod):
                    self._remove_finalizer(pod)
                self.pod_control.delete(pod, job)
            except Exception as err:
                self.expectations.deletion_observed(key, object_key(pod))
                if not isinstance(err, errors.NotFound):
                    first = first or err
                    continue
            deleted += 1
            if is_pod_ready(pod):
                ready += 1
        return ready, deleted, first

    # -- status tracking ------------------------------------------------------------------------------

    def _track_status(self, ctx: _SyncContext, key: str, needs_flush: bool) -> None:
        """kube's ``trackJobStatusAndRemoveFinalizers``: finished pods into uncountedTerminatedPods,
        their finalizers off, then into the counters; the finished conditions once all is counted."""
        job = ctx.job
        status = job["status"]
        indexed = ju.is_indexed(job)
        n = ju.completions(job) or 0
        pods = sorted(ctx.pods, key=ju.completion_index) if indexed else ctx.pods
        with_finalizer = {p["metadata"]["uid"] for p in pods
                          if ju.has_tracking_finalizer(p) and p["metadata"]["uid"] not in ctx.expected_rm_finalizers}
        if _clean_uncounted(status, with_finalizer):
            needs_flush = True
        uncounted = status["uncountedTerminatedPods"]
        to_remove: list[Obj] = []
        new_indexes: list[int] = []
        reached_max = False
        cond = ctx.finished_condition
        finished_failure = cond is not None and cond["type"] != ju.SUCCESS_CRITERIA_MET
        for pod in pods:
            uid = pod["metadata"]["uid"]
            if not ju.has_tracking_finalizer(pod) or uid in ctx.expected_rm_finalizers:
                continue
            failed = ju.is_pod_failed(pod, job)
            if not (is_terminating(job) or ctx.finished_condition is not None or pod_phase(pod) == "Succeeded"
                    or failed):
                continue
            to_remove.append(pod)
            ix = ju.completion_index(pod)
            if pod_phase(pod) == "Succeeded" and uid not in ctx.uncounted_failed:
                if indexed:
                    if 0 <= ix < n and ix not in ctx.prev_succeeded_indexes:
                        new_indexes.append(ix)
                        needs_flush = True
                elif uid not in ctx.uncounted_succeeded:
                    uncounted.setdefault("succeeded", []).append(uid)
                    needs_flush = True
            elif failed or finished_failure:
                if uid not in ctx.uncounted_failed and (not indexed or 0 <= ix < n):
                    uncounted.setdefault("failed", []).append(uid)
                    needs_flush = True
            if len(new_indexes) + len(uncounted.get("succeeded", ())) + len(uncounted.get("failed", ())) \
                    >= MAX_UNCOUNTED_PODS:
                reached_max = True  # the rest waits for the next sync, so the status stays small
                break
        if indexed:
            # An index counts once however many of its pods succeed, so no uncounted list is needed.
            ctx.succeeded_indexes |= set(new_indexes)
            text = ju.format_indexes(ctx.succeeded_indexes)
            if text != (status.get("completedIndexes") or ""):
                needs_flush = True
            status["completedIndexes"] = text
            status["succeeded"] = len(ctx.succeeded_indexes)
        conditions = status.setdefault("conditions", [])
        if ctx.finished_condition is not None and ctx.finished_condition["type"] == ju.FAILURE_TARGET:
            conditions.append(ctx.finished_condition)
            needs_flush = True
            ctx.finished_condition = ju.new_condition(ju.FAILED, "True", ctx.finished_condition["reason"],
                                                      ctx.finished_condition["message"])
        if ctx.finished_condition is not None and ctx.finished_condition["type"] == ju.SUCCESS_CRITERIA_MET:
            if ju.find_condition(job, ju.SUCCESS_CRITERIA_MET) is None:
                conditions.append(ctx.finished_condition)
                needs_flush = True
            ctx.finished_condition = ju.new_condition(ju.COMPLETE, "True", ctx.finished_condition["reason"],
                                                      ctx.finished_condition["message"])
        job, needs_flush = self._flush_and_remove_finalizers(ctx, key, to_remove, with_finalizer, needs_flush)
        ctx.job = job
        finished = not reached_max and self._enact_finished(ctx)
        if finished or needs_flush:
            ctx.job = self._update_status(ctx.job)
        if finished:
            self._record_finished(ctx.job, ctx.finished_condition)

    def _flush_and_remove_finalizers(self, ctx: _SyncContext, key: str, to_remove: list[Obj],
                                     with_finalizer: set[str], needs_flush: bool) -> tuple[Obj, bool]:
        job = ctx.job
        if needs_flush:
            job = self._update_status(job)
            assert ctx.backoff is not None
            self.backoff.update(ctx.backoff)
            needs_flush = False
        first: Exception | None = None
        if to_remove:
            self.finalizer_expectations.expect(key, [p["metadata"]["uid"] for p in to_remove])
            for pod in to_remove:
                try:
                    self._remove_finalizer(pod)
                    with_finalizer.discard(pod["metadata"]["uid"])
                except Exception as err:
                    self.finalizer_expectations.observed(key, pod["metadata"]["uid"])
                    first = first or err
        if _clean_uncounted(job["status"], with_finalizer):
            needs_flush = True
        if first is not None:
            if needs_flush:
                self._update_status(job)
            raise first
        return job, needs_flush

    def _enact_finished(self, ctx: _SyncContext) -> bool:
        cond = ctx.finished_condition
        if cond is None:
            return False
        status = ctx.job["status"]
        pending = status.get("uncountedTerminatedPods") or {}
        if pending.get("succeeded") or pending.get("failed") or ctx.terminating > 0:
            return False  # counted pods and terminating ones first: the terminal condition is final
        conditions = status.setdefault("conditions", [])
        ju.ensure_condition(conditions, cond["type"], cond["status"], cond["reason"], cond["message"])
        if cond["type"] == ju.COMPLETE:
            status["completionTime"] = next(c["lastTransitionTime"] for c in conditions if c["type"] == ju.COMPLETE)
        return True

    def _record_finished(self, job: Obj, cond: Obj | None) -> None:
        assert cond is not None
        if cond["type"] == ju.COMPLETE:
            n = ju.completions(job)
            if n is not None and int((job.get("status") or {}).get("succeeded") or 0) > n:
                self.recorder.event(job, "Warning", "TooManySucceededPods",
                                    "Too many succeeded pods running after completion count reached")
            self.recorder.event(job, "Normal", "Completed", "Job completed")
        else:
            self.recorder.event(job, "Warning", cond["reason"], cond["message"])

    def _update_status(self, job: Obj) -> Obj:
        body = {**job, "status": _wire_status(job.get("status") or {})}
        try:
            updated = self.client.update_status(body)
        except errors.NotFound:
            raise _JobGone() from None
        # Carry on with what the server stored (new resourceVersion) and our working status.
        return {**updated, "status": job.get("status") or {}}


def _clean_uncounted(status: Obj, with_finalizer: set[str]) -> bool:
    """Move uncounted pods whose finalizer is gone into the counters; True if anything moved."""
    uncounted = status.setdefault("uncountedTerminatedPods", {})
    changed = False
    for which, counter in (("succeeded", "succeeded"), ("failed", "failed")):
        uids = uncounted.get(which) or []
        keep = [u for u in uids if u in with_finalizer]
        if len(keep) != len(uids):
            changed = True
            status[counter] = int(status.get(counter) or 0) + len(uids) - len(keep)
            if keep:
                uncounted[which] = keep
            else:
                uncounted.pop(which, None)
    return changed


def _wire_status(status: Obj) -> Obj:
    """The status as kube serialises it: zero counters and empty lists omitted, ``ready`` and
    ``terminating`` and ``uncountedTerminatedPods`` always present."""
    out = {k: v for k, v in status.items() if v not in (None, "", [])}
    for counter in ("active", "succeeded", "failed"):
        if not out.get(counter):
            out.pop(counter, None)
    out["ready"] = int(status.get("ready") or 0)
    out["terminating"] = int(status.get("terminating") or 0)
    out["uncountedTerminatedPods"] = {k: v for k, v in (status.get("uncountedTerminatedPods") or {}).items() if v}
    return out


def _namespace_terminating(err: Exception) -> bool:
    return isinstance(err, errors.Forbidden) and "because it is being terminated" in str(err)


def register(runtime: Any) -> JobController:
    """Register the Job controller and the TTL-after-finished controller on ``runtime``."""
    from koordinator.controllers import ttlafterfinished

    controller = JobController(runtime)
    ttlafterfinished.register(runtime)
    return controller
