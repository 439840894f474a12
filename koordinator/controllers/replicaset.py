"""The ReplicaSet controller (kube-controller-manager's ``replicaset`` controller).

A ReplicaSet keeps ``spec.replicas`` active pods matching its selector: it adopts matching
orphans and releases pods whose labels stopped matching (controllerRef), creates missing pods in
slow-start batches and deletes surplus ones in kube's order (unassigned before assigned, Pending
before Running, not ready before ready, lower ``pod-deletion-cost`` first, pods doubled up on a
node first, newer first). Expectations keep a lagging cache from creating or deleting twice.
Status: ``replicas``, ``fullyLabeledReplicas``, ``readyReplicas``, ``availableReplicas`` (ready
for ``minReadySeconds``), ``observedGeneration`` and the ``ReplicaFailure`` condition; events
``SuccessfulCreate``/``FailedCreate``/``SuccessfulDelete``/``FailedDelete`` as kube writes them.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from koordinator.controllers.podcontrol import (BURST_REPLICAS, CONTROLLER_UID_INDEX, ControllerRefManager,
                                                Expectations, OwnedPodRouter, PodControl, condition,
                                                controller_ref, controller_uid_index, deletion_rank_key,
                                                ensure_index, error_text, fresh_owner_check, is_pod_active,
                                                is_pod_available, is_pod_ready, is_terminating, now_rfc3339,
                                                object_key, parse_time, pod_from_template, ready_condition,
                                                selector_matches, separate_recorder, slow_start_batch, update_status)
from koordinator.runtime import errors
from koordinator.runtime.controller import Result

log = logging.getLogger("koordinator.controllers.replicaset")

Obj = dict[str, Any]
COMPONENT = "replicaset-controller"
WORKERS = 4


def _spec(obj: Obj) -> Obj:
    return obj.get("spec") or {}


def fully_labeled(pod: Obj, template_labels: dict[str, str]) -> bool:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in template_labels.items())


def pods_to_delete(pods: list[Obj], related: list[Obj], diff: int, now: float) -> list[Obj]:
    """The ``diff`` pods to delete first (kube's ``getPodsToDelete``): ranked by how many pods of
    the same family (``related``: the pods of every ReplicaSet with the same owner) share their node."""
    if diff >= len(pods):
        return list(pods)
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            node = (pod.get("spec") or {}).get("nodeName") or ""
            on_node[node] = on_node.get(node, 0) + 1
    def rank(pod: Obj) -> int:
        return on_node.get((pod.get("spec") or {}).get("nodeName") or "", 0)

    ranked = sorted(pods, key=lambda p: deletion_rank_key(p, rank(p), now))
    return ranked[:diff]


def calculate_status(rs: Obj, pods: list[Obj], manage_error: Exception | None, diff: int, now: float) -> Obj:
    """The ReplicaSet's status from its claimed active pods (``calculateStatus``)."""
    spec = _spec(rs)
    template_labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    min_ready = int(spec.get("minReadySeconds") or 0)
    status = dict(rs.get("status") or {})
    conditions = [dict(c) for c in status.get("conditions") or ()]
    failure = condition(conditions, "ReplicaFailure")
    if manage_error is not None and failure is None:
        conditions.append({"type": "ReplicaFailure", "status": "True",
                           "reason": "FailedCreate" if diff < 0 else "FailedDelete",
                           "message": error_text(manage_error), "lastTransitionTime": now_rfc3339()})
    elif manage_error is None and failure is not None:
        conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
    new: Obj = {
        "replicas": len(pods),
        "fullyLabeledReplicas": sum(1 for p in pods if fully_labeled(p, template_labels)),
        "readyReplicas": sum(1 for p in pods if is_pod_ready(p)),
        "availableReplicas": sum(1 for p in pods if is_pod_available(p, min_ready, now)),
        "observedGeneration": rs["metadata"].get("generation", 0),
    }
    if conditions:
        new["conditions"] = conditions
    return new


def _next_availability(pods: list[Obj], min_ready: int, now: float) -> float | None:
    """Seconds until the first ready-but-not-yet-available pod becomes available."""
    waits = []
    for pod in pods:
        if is_pod_ready(pod) and not is_pod_available(pod, min_ready, now):
            since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))
            if since is not None:
                waits.append(max(since + min_ready - now, 0.0) + 0.05)
    return min(waits) if waits else None


class ReplicaSetController:
    """Reconciles ReplicaSets (see the module docstring)."""

    def __init__(self, runtime: Any) -> None:
        self.client = runtime.client
        self.recorder = separate_recorder(runtime, COMPONENT)
        self.pod_control = PodControl(self.client, self.recorder)
        self.expectations = Expectations()
        self.replicasets = runtime.informers.informer("ReplicaSet")
        self.pods = runtime.informers.informer("Pod")
        ensure_index(self.pods, CONTROLLER_UID_INDEX, controller_uid_index)
        self.controller = runtime.controller("replicaset", self.reconcile, workers=WORKERS)
        self.controller.watch(self.replicasets)
        self.router = OwnedPodRouter(self.pods, self.replicasets, "ReplicaSet", self.controller.enqueue,
                                     self.expectations)

    # -- reconcile ----------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result | None:
        rs = self.replicasets.store.get(key)
        if rs is None:
            self.expectations.forget(key)
            return None
        now = time.time()
        needs_sync = self.expectations.satisfied(key)
        selector = _spec(rs).get("selector")
        namespace = rs["metadata"]["namespace"]
        active = [p for p in self.pods.store.by_index("namespace", namespace) if is_pod_active(p)]
        manager = ControllerRefManager(self.client, rs, "Pod",
                                       lambda p: selector_matches(selector, p["metadata"].get("labels")),
                                       fresh_owner_check(self.client, rs))
        pods = manager.claim(active)
        manage_error: Exception | None = None
        diff = len(pods) - int(_spec(rs).get("replicas", 1))
        if needs_sync and not is_terminating(rs):
            manage_error = self.manage_replicas(rs, key, pods, diff, now)
        status = calculate_status(rs, pods, manage_error, diff, now)
        if _status_changed(rs.get("status") or {}, status):
            try:
                update_status(self.client, rs, status)
            except errors.NotFound:
                return None
        if manage_error is not None:
            raise manage_error
        min_ready = int(_spec(rs).get("minReadySeconds") or 0)
        if min_ready > 0:
            wait = _next_availability(pods, min_ready, now)
            if wait is not None:
                return Result(requeue_after=wait)
        return None

    def manage_replicas(self, rs: Obj, key: str, pods: list[Obj], diff: int, now: float) -> Exception | None:
        """Create or delete pods to reach ``spec.replicas``; the first error, if any."""
        if diff < 0:
            count = min(-diff, BURST_REPLICAS)
            self.expectations.expect(key, adds=count)
            template = _spec(rs).get("template") or {}

            def create() -> None:
                self.pod_control.create(pod_from_template(template, rs), rs)

            done, err = slow_start_batch(count, create)
            for _ in range(count - done):
                self.expectations.creation_observed(key)
            return err
        if diff > 0:
            count = min(diff, BURST_REPLICAS)
            victims = pods_to_delete(pods, self._related_pods(rs, pods), count, now)
            self.expectations.expect(key, deletions=[object_key(p) for p in victims])
            failures: list[Exception] = []
            for pod in victims:
                try:
                    self.pod_control.delete(pod, rs)
                except Exception as err:
                    self.expectations.deletion_observed(key, object_key(pod))
                    failures.append(err)
            return failures[0] if failures else None
        return None

    def _related_pods(self, rs: Obj, own: list[Obj]) -> list[Obj]:
        """The pods of every ReplicaSet controlled by the same owner as ``rs`` (a Deployment's family)."""
        owner = controller_ref(rs)
        if owner is None:
            return own
        related: list[Obj] = []
        for other in self.replicasets.store.by_index("namespace", rs["metadata"]["namespace"]):
            ref = controller_ref(other)
            if ref is not None and ref.get("uid") == owner.get("uid"):
                related.extend(self.pods.store.by_index(CONTROLLER_UID_INDEX, other["metadata"]["uid"]))
        return related


def _status_changed(old: Obj, new: Obj) -> bool:
    keys = ("replicas", "fullyLabeledReplicas", "readyReplicas", "availableReplicas", "observedGeneration")
    if any((old.get(k) or 0) != (new.get(k) or 0) for k in keys):
        return True
    return (old.get("conditions") or []) != (new.get("conditions") or [])


def register(runtime: Any) -> ReplicaSetController:
    """Add the ReplicaSet controller to ``runtime``."""
    return ReplicaSetController(runtime)
