"""The StatefulSet controller (kube-controller-manager's ``statefulset`` controller).

Pods are named ``<set>-<ordinal>`` and carry ``statefulset.kubernetes.io/pod-name``,
``apps.kubernetes.io/pod-index`` and ``controller-revision-hash`` (the name of their template's
ControllerRevision); ``hostname`` is the pod name and ``subdomain`` the set's ``serviceName``.
Each ``volumeClaimTemplates`` entry becomes a PersistentVolumeClaim ``<template>-<set>-<ordinal>``
mounted by the pod, created before it (a server that serves no PersistentVolumeClaims gets a
``FailedCreate`` event on the set, and the pod is created without its claim).

``OrderedReady`` (the default) creates ordinal N only once 0..N-1 are Running and Ready, and scales
down from the highest ordinal, one pod at a time, each only when all others are healthy;
``Parallel`` creates and deletes without waiting. ``RollingUpdate`` replaces pods whose revision
is not the update revision from the highest ordinal down to ``partition``, one at a time, each
after the previous is healthy again; ``OnDelete`` replaces only pods someone deleted. Status:
``replicas``, ``readyReplicas``, ``currentReplicas``, ``updatedReplicas``, ``availableReplicas``,
``currentRevision``, ``updateRevision``, ``observedGeneration``, ``collisionCount``.
"""

from __future__ import annotations

import copy
import logging
import re
import threading
import time
from typing import Any

from koordinator.controllers.history import (CONTROLLER_REVISION_HASH, RevisionHistory, equal_revisions,
                                             revision_number, template_of_revision)
from koordinator.controllers.podcontrol import (ControllerRefManager, OwnedPodRouter, error_text, fresh_owner_check,
                                                is_pod_available, is_pod_ready, is_terminating, parse_time,
                                                pod_from_template, pod_phase, ready_condition, selector_matches,
                                                separate_recorder, update_status)
from koordinator.runtime import errors
from koordinator.runtime.controller import Result
from koordinator.runtime.kinds import Kind, UnknownKind

log = logging.getLogger("koordinator.controllers.statefulset")

Obj = dict[str, Any]
COMPONENT = "statefulset-controller"
WORKERS = 2
POD_NAME_LABEL = "statefulset.kubernetes.io/pod-name"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
PVC_KIND = Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True)
# How long the answer to "does the server serve PersistentVolumeClaims?" is trusted.
DISCOVERY_TTL = 30.0


def ordinal_of(set_name: str, pod: Obj) -> int:
    """The ordinal in ``<set>-<ordinal>``, or -1 for a name that is not one of the set's."""
    m = re.fullmatch(re.escape(set_name) + r"-(\d+)", pod["metadata"].get("name", ""))
    return int(m.group(1)) if m else -1


def pod_revision(pod: Obj) -> str:
    return (pod["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH, "")


def is_created(pod: Obj) -> bool:
    return bool((pod.get("metadata") or {}).get("uid"))


def is_running_and_ready(pod: Obj) -> bool:
    return pod_phase(pod) == "Running" and is_pod_ready(pod)


def is_healthy(pod: Obj) -> bool:
    return is_running_and_ready(pod) and not is_terminating(pod)


def claim_name(template: Obj, set_name: str, ordinal: int) -> str:
    return f"{template['metadata']['name']}-{set_name}-{ordinal}"


def new_pod(sts: Obj, template: Obj, ordinal: int, revision: str) -> Obj:
    """``newStatefulSetPod`` with its revision: identity, storage, ownerReference."""
    name = f"{sts['metadata']['name']}-{ordinal}"
    pod = pod_from_template(template, sts, name=name, extra_labels={
        POD_NAME_LABEL: name, POD_INDEX_LABEL: str(ordinal), CONTROLLER_REVISION_HASH: revision})
    spec = pod["spec"]
    spec["hostname"] = name
    if sts["spec"].get("serviceName"):
        spec["subdomain"] = sts["spec"]["serviceName"]
    claims = sts["spec"].get("volumeClaimTemplates") or []
    if claims:
        volumes = {v.get("name"): v for v in spec.get("volumes") or ()}
        for claim in claims:
            cname = claim["metadata"]["name"]
            volumes[cname] = {"name": cname, "persistentVolumeClaim": {
                "claimName": claim_name(claim, sts["metadata"]["name"], ordinal)}}
        spec["volumes"] = list(volumes.values())
    return pod


def apply_revision(sts: Obj, revision: Obj) -> Obj:
    """The set with the template ``revision`` recorded (``ApplyRevision``)."""
    out = copy.deepcopy(sts)
    out["spec"]["template"] = template_of_revision(revision)
    return out


class StatefulSetController:
    """Reconciles StatefulSets (see the module docstring)."""

    def __init__(self, runtime: Any) -> None:
        self.client = runtime.client
        try:
            self.client.kinds.get("v1/PersistentVolumeClaim")
        except UnknownKind:
            self.client.kinds.register(PVC_KIND)
        self.recorder = separate_recorder(runtime, COMPONENT)
        self.history = RevisionHistory(runtime)
        self.sets = runtime.informers.informer("StatefulSet")
        self.pods = runtime.informers.informer("Pod")
        self.controller = runtime.controller("statefulset", self.reconcile, workers=WORKERS)
        self.controller.watch(self.sets)
        self.router = OwnedPodRouter(self.pods, self.sets, "StatefulSet", self.controller.enqueue)
        self._pvc_lock = threading.Lock()
        self._pvc_checked: tuple[float, bool] = (-DISCOVERY_TTL, False)

    # -- sync --------------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result | None:
        cached = self.sets.store.get(key)
        if cached is None:
            return None
        sts = copy.deepcopy(cached)
        selector = sts["spec"].get("selector") or {}
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            self.recorder.event(sts, "Warning", "SelectingAll",
                                "This statefulset is selecting all pods. A non-empty selector is required.")
            return None
        pods = self._claim_pods(sts)
        revisions = self.history.claim(sts)
        current, update, collision = self._revisions(sts, revisions)
        status, wait = self._update(sts, current, update, collision, pods)
        self._write_status(sts, status)
        self._truncate_history(sts, pods, revisions, current, update)
        return Result(requeue_after=wait) if wait is not None else None

    def _claim_pods(self, sts: Obj) -> list[Obj]:
        selector = sts["spec"].get("selector")
        name = sts["metadata"]["name"]
        manager = ControllerRefManager(
            self.client, sts, "Pod",
            lambda p: selector_matches(selector, p["metadata"].get("labels")) and ordinal_of(name, p) >= 0,
            fresh_owner_check(self.client, sts))
        return manager.claim(self.pods.store.by_index("namespace", sts["metadata"]["namespace"]))

    def _revisions(self, sts: Obj, revisions: list[Obj]) -> tuple[Obj, Obj, int]:
        """(current revision, update revision, collision count): ``getStatefulSetRevisions``."""
        collision = int((sts.get("status") or {}).get("collisionCount") or 0)
        number = revision_number(revisions[-1]) + 1 if revisions else 1
        wanted = self.history.new_revision(sts, number, collision)
        equal = equal_revisions(revisions, wanted)
        if equal and equal[-1] is revisions[-1]:
            update = revisions[-1]
        elif equal:
            update = self.history.renumber(equal[-1], number)  # a rollback: the old revision comes first again
        else:
            update, collision = self.history.create(sts, wanted, collision)
        current_name = (sts.get("status") or {}).get("currentRevision")
        current = next((r for r in revisions if r["metadata"]["name"] == current_name), None)
        if current is None or current["metadata"]["name"] == update["metadata"]["name"]:
            current = update
        return current, update, collision

    def _update(self, sts: Obj, current: Obj, update: Obj, collision: int,
                pods: list[Obj]) -> tuple[Obj, float | None]:
        """Create, delete and replace pods one step (``updateStatefulSet``); the status it leaves."""
        name = sts["metadata"]["name"]
        current_set, update_set = apply_revision(sts, current), apply_revision(sts, update)
        current_name, update_name = current["metadata"]["name"], update["metadata"]["name"]
        min_ready = int(sts["spec"].get("minReadySeconds") or 0)
        now = time.time()
        status: Obj = {"observedGeneration": sts["metadata"].get("generation", 0), "replicas": 0,
                       "readyReplicas": 0, "currentReplicas": 0, "updatedReplicas": 0, "availableReplicas": 0,
                       "currentRevision": current_name, "updateRevision": update_name, "collisionCount": collision}
        count = int(sts["spec"].get("replicas", 1))
        replicas: list[Obj | None] = [None] * count
        condemned: list[Obj] = []
        wait: list[float] = []
        for pod in pods:
            status["replicas"] += 1
            if is_running_and_ready(pod):
                status["readyReplicas"] += 1
                if is_pod_available(pod, min_ready, now):
                    status["availableReplicas"] += 1
                else:
                    since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime")) or now
                    wait.append(since + min_ready - now + 0.05)
            if not is_terminating(pod):
                if pod_revision(pod) == current_name:
                    status["currentReplicas"] += 1
                if pod_revision(pod) == update_name:
                    status["updatedReplicas"] += 1
            ordinal = ordinal_of(name, pod)
            if 0 <= ordinal < count:
                replicas[ordinal] = pod
            elif ordinal >= count:
                condemned.append(pod)
        condemned.sort(key=lambda p: ordinal_of(name, p))
        first_unhealthy = next((p for p in [*[r for r in replicas if r is not None], *reversed(condemned)]
                                if not is_healthy(p)), None)
        soonest = min(wait) if wait else None
        if is_terminating(sts):
            return status, soonest
        monotonic = (sts["spec"].get("podManagementPolicy") or "OrderedReady") != "Parallel"
        strategy = sts["spec"].get("updateStrategy") or {}
        rolling = (strategy.get("type") or "RollingUpdate") == "RollingUpdate"
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0) if rolling else 0

        def versioned(ordinal: int) -> Obj:
            # Below the partition pods keep the current revision (newVersionedStatefulSetPod).
            if rolling and ordinal < partition:
                return new_pod(current_set, current_set["spec"]["template"], ordinal, current_name)
            return new_pod(update_set, update_set["spec"]["template"], ordinal, update_name)

        def count_revision(pod: Obj, delta: int) -> None:
            if pod_revision(pod) == current_name:
                status["currentReplicas"] += delta
            if pod_revision(pod) == update_name:
                status["updatedReplicas"] += delta

        for ordinal in range(count):
            pod = replicas[ordinal]
            if pod is not None and pod_phase(pod) == "Failed" and not is_terminating(pod):
                self._delete_pod(sts, pod)
                status["replicas"] -= 1
                count_revision(pod, -1)
                pod = None
            if pod is None:
                pod = versioned(ordinal)
                if self._create_pod(sts, pod, ordinal):
                    status["replicas"] += 1
                    count_revision(pod, 1)
                replicas[ordinal] = pod
                if monotonic:
                    return status, soonest
                continue
            if monotonic and (is_terminating(pod) or not is_running_and_ready(pod)):
                return status, soonest
            if monotonic and not is_pod_available(pod, min_ready, now):
                return status, soonest
            self._ensure_identity(sts, pod, ordinal)
        for pod in reversed(condemned):
            if is_terminating(pod):
                if monotonic:
                    return status, soonest
                continue
            if monotonic and not is_running_and_ready(pod) and pod is not first_unhealthy:
                return status, soonest
            self._delete_pod(sts, pod)
            count_revision(pod, -1)
            if monotonic:
                return status, soonest
        if not rolling:
            return status, soonest
        for ordinal in range(count - 1, partition - 1, -1):
            pod = replicas[ordinal]
            if pod is None or not is_created(pod):
                return status, soonest
            if pod_revision(pod) != update_name and not is_terminating(pod):
                self._delete_pod(sts, pod)
                count_revision(pod, -1)
                return status, soonest
            if not is_healthy(pod):
                return status, soonest
        return status, soonest

    # -- pods and claims -------------------------------------------------------------------------

    def _create_pod(self, sts: Obj, pod: Obj, ordinal: int) -> bool:
        self._create_claims(sts, pod, ordinal)
        name = pod["metadata"]["name"]
        try:
            self.client.create(pod)
        except errors.AlreadyExists:
            return False  # the cache is behind: the next sync sees it
        except Exception as err:
            self.recorder.event(sts, "Warning", "FailedCreate",
                                f"create Pod {name} in StatefulSet {sts['metadata']['name']} failed error: "
                                f"{error_text(err)}")
            raise
        self.recorder.event(sts, "Normal", "SuccessfulCreate",
                            f"create Pod {name} in StatefulSet {sts['metadata']['name']} successful")
        return True

    def _delete_pod(self, sts: Obj, pod: Obj) -> None:
        meta = pod["metadata"]
        try:
            self.client.delete("Pod", meta["name"], meta["namespace"], preconditions={"uid": meta.get("uid")})
        except errors.NotFound:
            return
        except Exception as err:
            self.recorder.event(sts, "Warning", "FailedDelete",
                                f"delete Pod {meta['name']} in StatefulSet {sts['metadata']['name']} failed error: "
                                f"{error_text(err)}")
            raise
        self.recorder.event(sts, "Normal", "SuccessfulDelete",
                            f"delete Pod {meta['name']} in StatefulSet {sts['metadata']['name']} successful")

    def _ensure_identity(self, sts: Obj, pod: Obj, ordinal: int) -> None:
        """Put back the identity labels if someone removed them (``updateStatefulPod``)."""
        name = pod["metadata"]["name"]
        labels = pod["metadata"].get("labels") or {}
        if labels.get(POD_NAME_LABEL) == name and labels.get(POD_INDEX_LABEL) == str(ordinal):
            return
        try:
            self.client.patch("Pod", name, {"metadata": {"labels": {POD_NAME_LABEL: name,
                                                                    POD_INDEX_LABEL: str(ordinal)}}},
                              namespace=pod["metadata"]["namespace"])
        except errors.NotFound:
            pass

    def _pvcs_served(self) -> bool:
        with self._pvc_lock:
            checked_at, served = self._pvc_checked
            if time.monotonic() - checked_at < DISCOVERY_TTL:
                return served
        try:
            resources = self.client.request("GET", "/api/v1").get("resources") or []
            served = any(r.get("name") == "persistentvolumeclaims" for r in resources)
        except errors.ApiError:
            served = False
        with self._pvc_lock:
            self._pvc_checked = (time.monotonic(), served)
        return served

    def _create_claims(self, sts: Obj, pod: Obj, ordinal: int) -> None:
        templates = sts["spec"].get("volumeClaimTemplates") or []
        if not templates:
            return
        set_name, ns, pod_name = sts["metadata"]["name"], sts["metadata"]["namespace"], pod["metadata"]["name"]
        served = self._pvcs_served()
        for template in templates:
            cname = claim_name(template, set_name, ordinal)
            if not served:
                self.recorder.event(sts, "Warning", "FailedCreate",
                                    f"create Claim {cname} for Pod {pod_name} in StatefulSet {set_name} failed "
                                    "error: the server does not serve persistentvolumeclaims")
                continue
            try:
                self.client.get(PVC_KIND, cname, ns)
                continue
            except errors.NotFound:
                pass
            labels = {**((template.get("metadata") or {}).get("labels") or {}),
                      **((sts["spec"].get("selector") or {}).get("matchLabels") or {})}
            claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                     "metadata": {"name": cname, "namespace": ns, "labels": labels},
                     "spec": copy.deepcopy(template.get("spec") or {})}
            if (template.get("metadata") or {}).get("annotations"):
                claim["metadata"]["annotations"] = dict(template["metadata"]["annotations"])
            try:
                self.client.create(claim)
            except errors.AlreadyExists:
                continue
            except Exception as err:
                self.recorder.event(sts, "Warning", "FailedCreate",
                                    f"create Claim {cname} for Pod {pod_name} in StatefulSet {set_name} failed "
                                    f"error: {error_text(err)}")
                raise
            self.recorder.event(sts, "Normal", "SuccessfulCreate",
                                f"create Claim {cname} Pod {pod_name} in StatefulSet {set_name} success")

    # -- status and history --------------------------------------------------------------------

    def _write_status(self, sts: Obj, status: Obj) -> None:
        strategy = sts["spec"].get("updateStrategy") or {}
        if (strategy.get("type") or "RollingUpdate") == "RollingUpdate" and \
                status["updatedReplicas"] == status["replicas"] and status["readyReplicas"] == status["replicas"]:
            # completeRollingUpdate: the update revision has become the current one.
            status["currentRevision"] = status["updateRevision"]
            status["currentReplicas"] = status["updatedReplicas"]
        old = sts.get("status") or {}
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        if all(old.get(k) == v or (not old.get(k) and not v) for k, v in status.items()):
            return
        try:
            update_status(self.client, sts, status)
        except errors.NotFound:
            pass

    def _truncate_history(self, sts: Obj, pods: list[Obj], revisions: list[Obj], current: Obj, update: Obj) -> None:
        live = {current["metadata"]["name"], update["metadata"]["name"], *(pod_revision(p) for p in pods)}
        history = [r for r in revisions if r["metadata"]["name"] not in live]
        limit = sts["spec"].get("revisionHistoryLimit")
        limit = 10 if limit is None else int(limit)
        for revision in history[:max(len(history) - limit, 0)]:
            self.history.delete(revision)


def register(runtime: Any) -> StatefulSetController:
    """Add the StatefulSet controller to ``runtime``."""
    return StatefulSetController(runtime)
