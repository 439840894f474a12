"""``MigrationController``: koord-descheduler's Evict + Filter plugin and its PodMigrationJob controllers (§1.7).

- Filter / PreEvictionFilter: :mod:`.filter` (which pods may be migrated now);
- Evict: create a PodMigrationJob (:mod:`.evict`), unless the pod's object limiter is exhausted;
- controllers (run by the role on the leader only, see :class:`ControllerProvider`): the PMJ reconciler
  (:mod:`.controller`), the arbitrator (:mod:`.arbitration`) and the scavenger (:mod:`.scavenger`).

PMJ events: a new active job waits for the arbitrator; updates (the arbitrator's ``passed-arbitration``
annotation first) are reconciled; a deleted job's Reservation is deleted. A controller that becomes leader
replays the jobs in the cache, so it resumes every unfinished migration from the jobs' status.
"""

from __future__ import annotations

import logging
import threading
import uuid
from typing import Any

from koordinator.apis import migration as mj
from koordinator.runtime.controller import Controller
from koordinator.runtime.errors import ApiError, NotFound
from koordinator_roles.descheduler.framework.interfaces import (ControllerProvider, EvictOptions, EvictPlugin,
                                                               FilterPlugin, Obj)
from koordinator_roles.descheduler.plugins.migration.arbitration import Arbitrator
from koordinator_roles.descheduler.plugins.migration.args import MigrationControllerArgs, parse_args
from koordinator_roles.descheduler.plugins.migration.controller import MigrationReconciler
from koordinator_roles.descheduler.plugins.migration.evict import create_job
from koordinator_roles.descheduler.plugins.migration.evictor import EvictorInterpreter
from koordinator_roles.descheduler.plugins.migration.filter import MigrationFilter
from koordinator_roles.descheduler.plugins.migration.limiter import ObjectLimiters
from koordinator_roles.descheduler.plugins.migration.scavenger import Scavenger
from koordinator_roles.descheduler.plugins.migration.state import ClusterState

NAME = "MigrationController"

log = logging.getLogger("koordinator.descheduler.migration")


def _passed(job: Obj) -> bool:
    return ((job.get("metadata") or {}).get("annotations") or {}).get(mj.ANNOTATION_PASSED_ARBITRATION) == "true"


class JobController:
    """The PodMigrationJob reconciler as a leader-only runnable: ``run(stop)`` reconciles until ``stop``."""

    name = NAME

    def __init__(self, plugin: "MigrationController") -> None:
        self.plugin = plugin
        self.current: Controller | None = None

    def run(self, stop: threading.Event) -> None:
        p = self.plugin
        ctrl = Controller(NAME, p.reconciler.reconcile, workers=p.args.max_concurrent_reconciles, leader_gated=False,
                          metrics=p.handle.metrics)
        ctrl.start()
        self.current = ctrl
        try:
            for job in p.state.all_jobs():  # resume what a previous leader left
                p.on_job(job)
            stop.wait()
        finally:
            self.current = None
            ctrl.stop(10)

    def enqueue(self, name: str) -> None:
        ctrl = self.current
        if ctrl is not None:
            ctrl.enqueue(name)


class MigrationController(EvictPlugin, FilterPlugin, ControllerProvider):
    """The plugin; ``handle`` needs ``client`` and ``informers`` (PMJ, Pod and Reservation informers)."""

    name = NAME
    # Creating a PodMigrationJob is not the eviction: the reconciler records the event and the metric when it
    # really evicts, so the evictor proxy must not count one here.
    reports_evictions = True

    def __init__(self, args: MigrationControllerArgs, handle: Any) -> None:
        self.args = args
        self.handle = handle
        self.client = handle.client
        recorder = getattr(handle, "event_recorder", None)
        #: Written on the jobs this instance creates (provenance only: every instance resumes every job).
        self.created_by = str(uuid.uuid4())
        self.state = ClusterState(self.client, handle.informers)
        nodes = handle.informers.informer("Node").store.list if args.node_fit else None
        self.filters = MigrationFilter(args, self.state, self._priority_threshold(), nodes)
        self.limiters = ObjectLimiters(args, self.state.safe_expected_replicas)
        self.evictor = EvictorInterpreter(self.client, args)
        self.reconciler = MigrationReconciler(self.client, self.state, args, self.limiters, self.evictor, recorder,
                                              metrics=handle.descheduler_metrics)
        self.arbitrator = Arbitrator(self.client, self.state, self.filters, args.arbitration_interval_seconds, recorder)
        self.scavenger = Scavenger(self.client, self.reconciler.delete_reservation)
        self.jobs = JobController(self)
        self.state.jobs.add_handler(on_add=self.on_job, on_update=self._on_update, on_delete=self._on_delete)
        # Beyond Koordinator (which polls every 3 s): a change of a job's pod or Reservation wakes the job at once.
        self.state.pods.add_handler(on_update=lambda old, new: self._wake_pod(new), on_delete=self._wake_pod)
        self.state.reservations.add_handler(on_update=lambda old, new: self._wake_reservation(new))

    def _priority_threshold(self) -> int | None:
        a = self.args
        if a.evict_system_critical_pods:
            return None
        if a.priority_threshold_name:
            try:
                return int(self.client.get("PriorityClass", a.priority_threshold_name)["value"])
            except NotFound:
                raise ValueError(f"priorityThreshold.name: Not found: PriorityClass "
                                 f"{a.priority_threshold_name!r}") from None
        return a.priority_threshold_value

    # -- PMJ events ---------------------------------------------------------------------------------------------
    def on_job(self, job: Obj) -> None:
        """A job seen for the first time: new active jobs wait for arbitration, the others are reconciled."""
        self.state.forget(job["metadata"]["name"])
        if mj.is_active(job) and not _passed(job) and not mj.spec_of(job).get("paused"):
            self.arbitrator.add(job)
        else:
            self.jobs.enqueue(job["metadata"]["name"])

    def _on_update(self, old: Obj, new: Obj) -> None:
        name = new["metadata"]["name"]
        if not mj.is_active(new):
            with self.state.lock:
                self.state.passed.discard(name)
            self.arbitrator.remove(name)
        if _passed(new) or not mj.is_active(new):
            self.jobs.enqueue(name)
        elif not mj.spec_of(new).get("paused"):
            self.arbitrator.add(new)  # un-paused, or not admitted yet

    def _wake_pod(self, pod: Any) -> None:
        pod = getattr(pod, "obj", pod)
        if self.jobs.current is None or not isinstance(pod, dict):
            return
        for job in self.state.jobs_of_pod(pod):
            if mj.is_active(job) and _passed(job):
                self.jobs.enqueue(job["metadata"]["name"])

    def _wake_reservation(self, reservation: Obj) -> None:
        if self.jobs.current is None:
            return
        name = reservation["metadata"]["name"]
        for job in self.state.all_jobs():
            if mj.is_active(job) and _passed(job) and mj.reservation_ref(job).get("name") == name:
                self.jobs.enqueue(job["metadata"]["name"])

    def _on_delete(self, job: Any) -> None:
        job = getattr(job, "obj", job)
        if not isinstance(job, dict):
            return
        name = job["metadata"]["name"]
        self.arbitrator.remove(name)
        self.state.forget(name)
        with self.state.lock:
            self.state.passed.discard(name)
        if self.jobs.current is not None:  # only the leader writes
            try:
                self.reconciler.delete_reservation(job)
            except ApiError as exc:
                log.warning("deleting the Reservation of deleted PodMigrationJob %s failed: %s", name, exc)

    # -- plugin API ---------------------------------------------------------------------------------------------
    def filter(self, pod: Obj) -> bool:
        return self.filters.filter(pod)

    def pre_eviction_filter(self, pod: Obj) -> bool:
        return self.filters.pre_eviction_filter(pod)

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        """Create a PodMigrationJob for the pod (dryRun: only log); False when filtered or rate limited."""
        if self.args.dry_run:
            create_job(self.client, pod, options, self.args, self.created_by)  # logs only
            return True
        if not self.filter(pod):
            return False
        if self.limiters.exceeded(pod):
            return False
        try:
            self.state.assume(create_job(self.client, pod, options, self.args, self.created_by))
        except ApiError as exc:
            meta = pod.get("metadata") or {}
            log.warning("creating a PodMigrationJob for pod %s/%s failed: %s", meta.get("namespace"),
                        meta.get("name"), exc)
            return False
        return True

    def new_controllers(self) -> list[Any]:
        return [self.jobs, self.arbitrator, self.scavenger]


def new(args: dict | None, handle: Any) -> MigrationController:
    """The registry factory: ValueError naming the field for bad args."""
    return MigrationController(parse_args(args), handle)
