"""The scheduler: one scheduling thread (pop, filter, score, assume, reserve, permit) and binder threads.

``schedule_one`` is kube-scheduler's scheduling cycle; the binding cycle (wait on Permit,
PreBind, Bind, PostBind) runs on a pool of binder threads so the API round-trips never hold the
next pod back. Any failure after Reserve unreserves, forgets the assumed pod and hands the pod to
:meth:`Scheduler.handle_failure`, which re-queues it, writes the PodScheduled=False condition
and a FailedScheduling Event as kube-scheduler does.
"""

from __future__ import annotations

import logging
import queue as stdqueue
import threading
import time
from datetime import datetime, timezone
from typing import Any, Callable

from koordinator.apis.reservation import is_reserve_pod
from koordinator.runtime.errors import ApiError, NotFound
from koordinator_roles.scheduler import explain
from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
from koordinator_roles.scheduler.framework.interfaces import NextPodPlugin
from koordinator_roles.scheduler.framework.runtime import FilterError, Framework
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import ERROR, SUCCESS, UNSCHEDULABLE, WAIT, CycleState, Status
from koordinator_roles.scheduler.framework.types import PodInfo, QueuedPodInfo

log = logging.getLogger("koordinator.scheduler")

NO_NODES_AVAILABLE = "no nodes available to schedule pods"


class FitError(Exception):
    """No node fits the pod: the diagnosis renders kube's "0/N nodes are available: ..." message."""

    def __init__(self, pod: PodInfo, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis
        super().__init__(diagnosis.fit_error_message(num_all_nodes))


def _now_rfc3339() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def is_terminal(pod: dict) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


class Scheduler:
    """Runs the scheduling and binding cycles of every profile; started and stopped by the Runtime."""

    leader_gated = True

    def __init__(self, *, frameworks: dict[str, Framework], cache: Any, queue: Any, client: Any,
                 pod_lookup: Callable[[str], dict | None], recorder: Any = None, metrics: Any = None,
                 binders: int = 16, debug_scores: int = 0, explanations: explain.ExplanationRecorder | None = None,
                 write_explanations: bool = False) -> None:
        self.frameworks = frameworks
        self.cache = cache
        self.queue = queue
        self.client = client
        self.pod_lookup = pod_lookup
        self.recorder = recorder
        self.metrics = metrics
        self.snapshot = Snapshot()
        # Set by the wiring: True once the informer handlers delivered the initial objects.
        self.ready: Callable[[], bool] = lambda: True
        self.debug_scores = debug_scores
        # The last cycle's diagnosis per pod (`koordinator explain`); written as ScheduleExplanation objects
        # with the ScheduleExplanation feature gate (write_explanations).
        self.explanations = explanations if explanations is not None else explain.ExplanationRecorder()
        self.write_explanations = write_explanations
        self._binders = binders
        self._tasks: stdqueue.SimpleQueue = stdqueue.SimpleQueue()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._idle = threading.Condition()
        self._in_flight = 0
        self.name = "scheduler"
        # Koordinator's NextPod: plugins (Coscheduling) that pull specific pods into the next cycle; plugins
        # that move pods in the queue get it here.
        self._next_pod_plugins: list[Any] = []
        # Koordinator's error handler filters: plugins whose pods are not real Pods (Reservation's reserve pods)
        # record a failure themselves (``report_scheduling_failure(pod, reason, message)`` returns True).
        self._failure_reporters: list[Callable[[dict, str, str], bool]] = []
        for fwk in frameworks.values():
            for plugin in getattr(fwk, "plugins", {}).values():
                if isinstance(plugin, NextPodPlugin) and plugin not in self._next_pod_plugins:
                    self._next_pod_plugins.append(plugin)
                reporter = getattr(plugin, "report_scheduling_failure", None)
                if reporter is not None and reporter not in self._failure_reporters:
                    self._failure_reporters.append(reporter)
                bind_queue = getattr(plugin, "bind_scheduling_queue", None)
                if bind_queue is not None:
                    bind_queue(queue)

    # -- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self._threads = [threading.Thread(target=self._schedule_loop, name="scheduler", daemon=True)]
        self._threads += [threading.Thread(target=self._binder_loop, name=f"scheduler-binder-{i}", daemon=True)
                          for i in range(self._binders)]
        for t in self._threads:
            t.start()

    def stop(self, timeout: float) -> bool:
        self._stop.set()
        self.queue.close()
        for _ in range(self._binders):
            self._tasks.put(None)
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    @property
    def thread(self) -> threading.Thread | None:
        alive = [t for t in self._threads if t.is_alive()]
        return alive[0] if alive else None

    def wait_idle(self, timeout: float) -> bool:
        """True once no binding or failure task is in flight (tests, benchmarks)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._in_flight == 0, timeout)

    def _schedule_loop(self) -> None:
        # Scheduling with a half-filled cache would place pods on nodes that look empty.
        while not self.ready():
            if self._stop.wait(0.05):
                return
        while not self._stop.is_set():
            qpi = self._next_pod() or self.queue.pop(timeout=0.5)
            if qpi is None:
                continue
            try:
                self.schedule_one(qpi)
            except Exception:
                log.exception("scheduling cycle crashed pod=%s", qpi.pod_info.key)
                self._submit(self._requeue_after_error, qpi, self.queue.scheduling_cycle)
            finally:
                self.queue.done(qpi.pod_info.uid)

    def _next_pod(self) -> QueuedPodInfo | None:
        """The pod a NextPod plugin wants scheduled now, taken out of the queue (None: pop as usual). A pod the
        queue does not hold yet (its informer event is still on the way) or has in flight is reported back
        as unavailable, so the plugin offers another one and tries it again later."""
        for plugin in self._next_pod_plugins:
            unavailable: set[str] = set()
            while True:
                pod = plugin.next_pod(unavailable)
                if pod is None:
                    break
                qpi = self.queue.pop_pod(pod)
                if qpi is not None:
                    return qpi
                md = pod.get("metadata") or {}
                unavailable.add(f"{md.get('namespace')}/{md.get('name')}")
        return None

    def _binder_loop(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None:
                return
            fn, args = task
            try:
                fn(*args)
            except Exception:
                log.exception("binder task failed")
            finally:
                with self._idle:
                    self._in_flight -= 1
                    if self._in_flight == 0:
                        self._idle.notify_all()

    def _submit(self, fn: Callable, *args: Any) -> None:
        with self._idle:
            self._in_flight += 1
        self._tasks.put((fn, args))

    # -- scheduling cycle --------------------------------------------------------------------------------

    def schedule_one(self, qpi: QueuedPodInfo) -> None:
        pi = qpi.pod_info
        fwk = self.frameworks.get(pi.scheduler_name)
        if fwk is None:
            return
        current = self.pod_lookup(pi.key)
        if current is None or (current.get("metadata") or {}).get("uid") != pi.pod["metadata"].get("uid") \
                or (current.get("metadata") or {}).get("deletionTimestamp") or (current.get("spec") or {}).get(
                "nodeName") or self.cache.is_assumed(pi.uid):
            return  # deleted, replaced, being deleted or already handled meanwhile
        start = time.perf_counter()
        cycle = self.queue.scheduling_cycle
        state = CycleState()
        self.cache.update_snapshot(self.snapshot)
        snapshot = self.snapshot
        try:
            row = self._schedule_pod(fwk, state, pi, snapshot)
        except FitError as err:
            nominated: str | None = None
            diagnosis = err.diagnosis
            if fwk.has_post_filter():
                result, status = fwk.run_post_filter(state, pi, diagnosis)
                if status.code == ERROR:
                    log.error("post filter failed pod=%s err=%s", pi.key, status.message())
                if status.code != SUCCESS:
                    diagnosis.post_filter_msg = status.message()
                if result is not None:
                    nominated = result.nominated_node_name
            qpi.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
            qpi.pending_plugins = set(diagnosis.pending_plugins)
            message = diagnosis.fit_error_message(err.num_all_nodes)
            self._failure(fwk, qpi, Status(UNSCHEDULABLE, message), cycle, start, nominated=nominated,
                          diagnosis=diagnosis, num_nodes=err.num_all_nodes)
            return
        except NoNodesError:
            qpi.unschedulable_plugins = set()
            self._failure(fwk, qpi, Status(UNSCHEDULABLE, NO_NODES_AVAILABLE), cycle, start)
            return
        except FilterError as err:
            self._failure(fwk, qpi, err.status, cycle, start)
            return
        node_name = snapshot.node_infos[row].name
        status = fwk.run_reservation_nominate(state, pi, node_name) or fwk.run_resize_pod(state, pi, node_name)
        if status is not None:
            self._failure(fwk, qpi, status, cycle, start)
            return
        assumed = pi.with_node(node_name)
        self.cache.assume_pod(assumed, node_name)
        status = fwk.run_reserve(state, assumed, node_name)
        if status is not None:
            self._undo(fwk, state, assumed, node_name)
            self._failure(fwk, qpi, status, cycle, start)
            return
        status = fwk.run_permit(state, assumed, node_name)
        if status is not None and status.code != WAIT:
            self._undo(fwk, state, assumed, node_name)
            self._failure(fwk, qpi, status, cycle, start)
            return
        nominator = getattr(self.queue, "nominator", None)
        if nominator is not None:
            nominator.delete_nominated_pod_if_exists(pi.pod)
        self._explain(pi.pod, explain.success_explanation(pi.pod, row, snapshot, fwk.last_scores))
        self._submit(self._binding_cycle, fwk, state, qpi, assumed, node_name, cycle, start)

    def _schedule_pod(self, fwk: Framework, state: CycleState, pi: PodInfo, snapshot: Snapshot) -> int:
        if len(snapshot) == 0:
            raise NoNodesError()
        diagnosis = Diagnosis(snapshot)
        fwk.last_scores = None  # one feasible node is not scored: no scores of an earlier pod in the explanation
        pod, pre_result, status = fwk.run_pre_filter(state, pi, snapshot)
        if status is not None:
            if not status.is_rejected():
                raise FilterError(status)
            diagnosis.pre_filter_msg = status.message()
            diagnosis.all_nodes_status = status
            if status.plugin:
                diagnosis.unschedulable_plugins.add(status.plugin)
            raise FitError(pi, len(snapshot), diagnosis)
        feasible = fwk.find_nodes_that_fit(state, pod, snapshot, pre_result, diagnosis)
        if len(feasible) == 0:
            raise FitError(pi, len(snapshot), diagnosis)
        if len(feasible) == 1:
            return int(feasible[0])
        rows, totals = fwk.prioritize(state, pod, snapshot, feasible)
        if self.debug_scores:
            top = sorted(zip(totals.tolist(), snapshot.names(rows)), reverse=True)[:self.debug_scores]
            log.info("scores pod=%s top=%s", pi.key, ", ".join(f"{n}={s}" for s, n in top))
        return fwk.select_host(rows, totals)

    def _undo(self, fwk: Framework, state: CycleState, assumed: PodInfo, node_name: str) -> None:
        fwk.run_unreserve(state, assumed, node_name)
        self.cache.forget_pod(assumed)
        for handler in fwk.handle.forget_handlers:
            try:
                handler(assumed, node_name)
            except Exception:
                log.exception("forget handler failed pod=%s", assumed.key)

    # -- binding cycle (binder threads) -------------------------------------------------------------

    def _binding_cycle(self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: PodInfo,
                       node_name: str, cycle: int, start: float) -> None:
        status = fwk.wait_on_permit(assumed)
        if status is None:
            status = self._check_still_ours(fwk, assumed)
        if status is None:
            status = fwk.run_pre_bind(state, assumed, node_name, _editable_metadata(assumed.pod))
        if status is None:
            status = fwk.run_bind(state, assumed, node_name)
            if status is not None and status.code != SUCCESS:
                status = Status(status.code if status.code != SUCCESS else ERROR,
                                f"binding rejected: {status.message()}", plugin=status.plugin)
        if status is not None:
            self._undo(fwk, state, assumed, node_name)
            # The freed room may let other pods in (kube moves pods as for an assigned pod's deletion).
            self.queue.move_all_to_active_or_backoff(("Pod", "Delete"), assumed.pod, None)
            self._failure(fwk, qpi, status, cycle, start, on_binder=True)
            return
        self.cache.finish_binding(assumed)
        elapsed = time.perf_counter() - start
        if self.metrics is not None:
            self.metrics.observe_attempt("scheduled", fwk.profile_name, elapsed)
            if qpi.initial_attempt_timestamp is not None:
                self.metrics.observe_sli(qpi.attempts, time.monotonic() - qpi.initial_attempt_timestamp)
        # A reserve pod is no Pod: its Bind plugin recorded the event on the Reservation.
        if self.recorder is not None and not is_reserve_pod(assumed.pod):
            self.recorder.event(assumed.pod, "Normal", "Scheduled",
                                f"Successfully assigned {assumed.key} to {node_name}")
        fwk.run_post_bind(state, assumed, node_name)

    def _check_still_ours(self, fwk: Framework, pod: PodInfo) -> Status | None:
        """Koordinator's DynamicSchedulerCheck: the pod may have changed scheduler or be going away meanwhile."""
        current = self.pod_lookup(pod.key)
        if current is None or (current.get("metadata") or {}).get("uid") != pod.pod["metadata"].get("uid"):
            return Status.error("pod is being deleted")
        if ((current.get("spec") or {}).get("schedulerName") or "default-scheduler") != fwk.profile_name:
            return Status.error("schedulerName unmatched")
        if (current.get("metadata") or {}).get("deletionTimestamp"):
            return Status.error("pod is being deleted")
        return None

    # -- failures --------------------------------------------------------------------------------------

    def _failure(self, fwk: Framework, qpi: QueuedPodInfo, status: Status, cycle: int, start: float,
                 nominated: str | None = None, *, on_binder: bool = False, diagnosis: Diagnosis | None = None,
                 num_nodes: int = 0) -> None:
        """Re-queue at once (in memory), then write the condition and Event: on this thread if it is a
        binder already (``on_binder``), else on a binder thread so the scheduling thread does no API call.

        ``nominated``: the node PostFilter nominated the pod to; "" clears a nomination; None leaves it.
        ``diagnosis``: the filters' verdicts of a FitError (on the scheduling thread: it reads the snapshot).
        """
        self._requeue(qpi, status, cycle, nominated)
        self._record_attempt(fwk, status, start)
        self._explain(qpi.pod_info.pod, explain.failure_explanation(
            qpi.pod_info.pod, status.message(), diagnosis=diagnosis, snapshot=self.snapshot if diagnosis else None,
            num_nodes=num_nodes, nominated_node=nominated))
        if on_binder:
            self._report_failure(qpi, status, nominated)
        else:
            self._submit(self._report_failure, qpi, status, nominated)

    def _explain(self, pod: dict, explanation: explain.CycleExplanation) -> None:
        """Keep the cycle's explanation; with the gate on, write it (on a binder thread) when it changed."""
        if not explanation.name:
            return
        self.explanations.record(explanation)
        # A reserve pod is no Pod: the ScheduleExplanation's name and owner would point at nothing.
        if self.write_explanations and not is_reserve_pod(pod) and self.explanations.claim_write(explanation):
            self._submit(self._write_explanation, explanation)

    def _write_explanation(self, explanation: explain.CycleExplanation) -> None:
        try:
            explain.write_explanation(self.client, explanation)
        except ApiError as err:
            self.explanations.unclaim_write(explanation)
            log.warning("writing the ScheduleExplanation failed pod=%s err=%s", explanation.key, err)

    def _record_attempt(self, fwk: Framework, status: Status, start: float) -> None:
        if self.metrics is not None:
            result = "unschedulable" if status.is_rejected() else "error"
            self.metrics.observe_attempt(result, fwk.profile_name, time.perf_counter() - start)

    def _requeue(self, qpi: QueuedPodInfo, status: Status, cycle: int, nominated: str | None) -> None:
        pi = qpi.pod_info
        current = self.pod_lookup(pi.key)
        if current is None or (current.get("metadata") or {}).get("uid") != pi.pod["metadata"].get("uid"):
            log.debug("pod gone, not re-queued pod=%s", pi.key)
            return
        if (current.get("spec") or {}).get("nodeName"):
            log.debug("pod already assigned, not re-queued pod=%s", pi.key)
            return
        if not status.is_rejected():
            qpi.unschedulable_plugins = set()
        if current is not pi.pod:
            qpi.pod_info = PodInfo(current)
        nominator = getattr(self.queue, "nominator", None)
        if nominator is not None and nominated is not None:
            if nominated:
                nominator.add_nominated_pod(qpi.pod_info, nominated)
            else:
                nominator.delete_nominated_pod_if_exists(qpi.pod_info.pod)
        self.queue.add_unschedulable_if_not_present(qpi, cycle)

    def _requeue_after_error(self, qpi: QueuedPodInfo, cycle: int) -> None:
        status = Status.error("internal error in the scheduling cycle")
        self._requeue(qpi, status, cycle, None)
        self._report_failure(qpi, status, None)

    def _report_failure(self, qpi: QueuedPodInfo, status: Status, nominated: str | None) -> None:
        pod = self.pod_lookup(qpi.pod_info.key)
        if pod is None or (pod.get("spec") or {}).get("nodeName"):
            return
        reason = "Unschedulable" if status.is_rejected() else "SchedulerError"
        message = status.message()
        log.info("unable to schedule pod pod=%s reason=%s err=%s", qpi.pod_info.key, reason, message)
        if any(report(pod, reason, message) for report in self._failure_reporters):
            return
        if self.recorder is not None:
            self.recorder.event(pod, "Warning", "FailedScheduling", message)
        self._update_pod_status(pod, reason, message, nominated)

    def _update_pod_status(self, pod: dict, reason: str, message: str, nominated: str | None) -> None:
        status = pod.get("status") or {}
        old = next((c for c in status.get("conditions") or [] if c.get("type") == "PodScheduled"), None)
        nominated_changed = nominated is not None and (status.get("nominatedNodeName") or "") != nominated
        if old is not None and old.get("status") == "False" and old.get("reason") == reason and \
                old.get("message") == message and not nominated_changed:
            return
        now = _now_rfc3339()
        condition = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                     "lastProbeTime": None,
                     "lastTransitionTime": old.get("lastTransitionTime") if old and old.get("status") == "False"
                     else now}
        patch: dict = {"status": {"conditions": [condition]}}
        if nominated_changed:
            patch["status"]["nominatedNodeName"] = nominated or None
        meta = pod["metadata"]
        try:
            self.client.patch("Pod", meta["name"], patch, namespace=meta.get("namespace"), patch_type="strategic",
                              subresource="status")
        except NotFound:
            pass
        except ApiError as err:
            log.warning("updating pod status failed pod=%s/%s err=%s", meta.get("namespace"), meta["name"], err)


class NoNodesError(Exception):
    """The snapshot has no nodes."""


def _editable_metadata(pod: dict) -> dict:
    """A copy of the pod whose labels and annotations PreBind plugins may change (DefaultPreBind patches them)."""
    meta = pod.get("metadata") or {}
    return {**pod, "metadata": {**meta, "labels": dict(meta.get("labels") or {}),
                                "annotations": dict(meta.get("annotations") or {})}}
