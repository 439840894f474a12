"""The DaemonSet controller (kube-controller-manager's ``daemonset`` controller).

One pod per eligible node: a node is eligible when the template's ``nodeSelector`` and required
node affinity match it and it has no NoSchedule/NoExecute taint the pod does not tolerate (a pod
already there stays while only NoSchedule taints are untolerated). Each pod is created with a
required node affinity on ``metadata.name`` for its node (the scheduler binds it there), the
tolerations kube's DaemonSet controller adds (not-ready, unreachable, disk/memory/pid pressure,
unschedulable, and network-unavailable for host-network pods) and the ``controller-revision-hash``
label of the template's ControllerRevision.

Updates: ``RollingUpdate`` replaces old pods while at most ``maxUnavailable`` nodes lack an
available pod, or with ``maxSurge`` starts the new pod beside the old one and deletes the old once
the new is available; ``OnDelete`` replaces only pods someone deleted. Failed pods are deleted
(with a per-node backoff) and recreated. Status: ``desiredNumberScheduled``,
``currentNumberScheduled``, ``numberReady``, ``numberAvailable``, ``updatedNumberScheduled``,
``numberMisscheduled``, ``numberUnavailable``, ``observedGeneration``, ``collisionCount``.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any

from koordinator.apis.selectors import node_selector_term_matches
from koordinator.apis.taints import NO_EXECUTE, NO_SCHEDULE, find_untolerated_taint
from koordinator.controllers.history import (CONTROLLER_REVISION_HASH, RevisionHistory, revision_number,
                                             template_hash, template_patch)
from koordinator.controllers.podcontrol import (CONTROLLER_UID_INDEX, ControllerRefManager, Expectations,
                                                OwnedPodRouter, PodControl, controller_uid_index, ensure_index,
                                                fresh_owner_check, is_pod_available, is_pod_ready, is_terminating,
                                                object_key, owner_reference, parse_time, pod_from_template,
                                                pod_phase, ready_condition, scaled_value, selector_matches,
                                                separate_recorder, slow_start_batch, update_status)
from koordinator.runtime import errors
from koordinator.runtime.controller import Result

log = logging.getLogger("koordinator.controllers.daemonset")

Obj = dict[str, Any]
COMPONENT = "daemonset-controller"
WORKERS = 2
OBJECT_NAME_FIELD = "metadata.name"
FAILED_BACKOFF_START, FAILED_BACKOFF_MAX = 1.0, 900.0

_TAINTS_TOLERATED = [
    ("node.kubernetes.io/not-ready", NO_EXECUTE), ("node.kubernetes.io/unreachable", NO_EXECUTE),
    ("node.kubernetes.io/disk-pressure", NO_SCHEDULE), ("node.kubernetes.io/memory-pressure", NO_SCHEDULE),
    ("node.kubernetes.io/pid-pressure", NO_SCHEDULE), ("node.kubernetes.io/unschedulable", NO_SCHEDULE),
]
NETWORK_UNAVAILABLE = "node.kubernetes.io/network-unavailable"


# -- pure helpers ------------------------------------------------------------------------------

def add_daemon_tolerations(spec: Obj) -> None:
    """``AddOrUpdateDaemonPodTolerations``: what lets a daemon pod run on troubled nodes."""
    wanted = [{"key": k, "operator": "Exists", "effect": e} for k, e in _TAINTS_TOLERATED]
    if spec.get("hostNetwork"):
        wanted.append({"key": NETWORK_UNAVAILABLE, "operator": "Exists", "effect": NO_SCHEDULE})
    tolerations = list(spec.get("tolerations") or [])
    for tol in wanted:
        tolerations = [t for t in tolerations if not (t.get("key") == tol["key"] and t.get("effect") == tol["effect"])]
        tolerations.append(tol)
    spec["tolerations"] = tolerations


def with_node_affinity(spec: Obj, node_name: str) -> None:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: the required terms become "this node" only."""
    term = {"matchFields": [{"key": OBJECT_NAME_FIELD, "operator": "In", "values": [node_name]}]}
    if not isinstance(spec.get("affinity"), dict):
        spec["affinity"] = {}
    affinity = spec["affinity"]
    node_affinity = affinity.setdefault("nodeAffinity", {})
    required = node_affinity.setdefault("requiredDuringSchedulingIgnoredDuringExecution", {})
    required["nodeSelectorTerms"] = [term]


def target_node(pod: Obj) -> str | None:
    """``GetTargetNodeName``: the node the pod is bound to, or the one its affinity names."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    for term in terms:
        for field in term.get("matchFields") or ():
            if field.get("key") == OBJECT_NAME_FIELD and field.get("operator") == "In" and \
                    len(field.get("values") or ()) == 1:
                return field["values"][0]
    return None


def required_affinity_matches(spec: Obj, node: Obj) -> bool:
    """The pod's ``nodeSelector`` and required node affinity against ``node``."""
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if required is None:
        return True
    fields = {OBJECT_NAME_FIELD: node["metadata"]["name"]}
    return any(node_selector_term_matches(t, labels, fields) for t in required.get("nodeSelectorTerms") or ())


def should_run(node: Obj, ds: Obj) -> tuple[bool, bool]:
    """(should run a daemon pod there, should keep running one there): ``NodeShouldRunDaemonPod``."""
    spec = copy.deepcopy(((ds.get("spec") or {}).get("template") or {}).get("spec") or {})
    if spec.get("nodeName") and spec["nodeName"] != node["metadata"]["name"]:
        return False, False
    add_daemon_tolerations(spec)
    if not required_affinity_matches(spec, node):
        return False, False
    taints = (node.get("spec") or {}).get("taints") or []
    if find_untolerated_taint(taints, spec.get("tolerations")) is not None:
        return False, find_untolerated_taint(taints, spec.get("tolerations"), (NO_EXECUTE,)) is None
    return True, True


def _by_age(pods: list[Obj]) -> list[Obj]:
    # podByCreationTimestampAndPhase: Running before others... oldest first.
    return sorted(pods, key=lambda p: (0 if pod_phase(p) == "Running" else 1,
                                       p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))


def updated_pods_on_node(pods: list[Obj], hash_: str) -> tuple[Obj | None, Obj | None, bool]:
    """(new pod, old pod, ok): ``findUpdatedPodsOnNode`` (not ok when a node has two of one kind)."""
    new = old = None
    for pod in pods:
        if is_terminating(pod):
            continue
        if (pod["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH) == hash_:
            if new is not None:
                return None, None, False
            new = pod
        else:
            if old is not None:
                return None, None, False
            old = pod
    return new, old, True


class DaemonSetController:
    """Reconciles DaemonSets (see the module docstring)."""

    def __init__(self, runtime: Any) -> None:
        self.client = runtime.client
        self.recorder = separate_recorder(runtime, COMPONENT)
        self.pod_control = PodControl(self.client, self.recorder)
        self.expectations = Expectations()
        self.history = RevisionHistory(runtime)
        self.daemonsets = runtime.informers.informer("DaemonSet")
        self.pods = runtime.informers.informer("Pod")
        self.nodes = runtime.informers.informer("Node")
        ensure_index(self.pods, CONTROLLER_UID_INDEX, controller_uid_index)
        self.controller = runtime.controller("daemonset", self.reconcile, workers=WORKERS)
        self.controller.watch(self.daemonsets)
        self.router = OwnedPodRouter(self.pods, self.daemonsets, "DaemonSet", self.controller.enqueue,
                                     self.expectations)
        self.nodes.add_handler(on_add=lambda n: self._enqueue_all(),
                               on_update=self._on_node_update, on_delete=lambda n: self._enqueue_all())
        self._backoff_lock = threading.Lock()
        self._failed_backoff: dict[str, tuple[float, float]] = {}  # ds/node -> (delay, not before)

    def _enqueue_all(self) -> None:
        for key in self.daemonsets.store.keys():
            self.controller.enqueue(key)

    def _on_node_update(self, old: Obj, new: Obj) -> None:
        def relevant(n: Obj) -> tuple:
            return ((n["metadata"].get("labels") or {}), (n.get("spec") or {}).get("taints"),
                    (n.get("spec") or {}).get("unschedulable"))

        if relevant(old) != relevant(new):
            self._enqueue_all()

    # -- sync --------------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result | None:
        cached = self.daemonsets.store.get(key)
        if cached is None:
            self.expectations.forget(key)
            return None
        ds = copy.deepcopy(cached)
        selector = ds["spec"].get("selector") or {}
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            self.recorder.event(ds, "Warning", "SelectingAll",
                                "This daemon set is selecting all pods. A non-empty selector is required.")
            return None
        if is_terminating(ds):
            return None
        nodes = self.nodes.store.list()
        cur, old = self._construct_history(ds)
        hash_ = (cur["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH) or ""
        requeue: float | None = None
        if self.expectations.satisfied(key):
            requeue = self._manage(ds, key, nodes, hash_)
            if (ds["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate" \
                    and self.expectations.satisfied(key):
                self._rolling_update(ds, key, nodes, hash_)
            self._cleanup_history(ds, old)
        wait = self._update_status(ds, nodes, hash_)
        waits = [w for w in (requeue, wait) if w is not None]
        return Result(requeue_after=min(waits)) if waits else None

    def _node_to_pods(self, ds: Obj) -> dict[str, list[Obj]]:
        selector = ds["spec"].get("selector")
        candidates = [p for p in self.pods.store.by_index("namespace", ds["metadata"]["namespace"])
                      if not (is_terminating(p) and pod_phase(p) in ("Succeeded", "Failed"))]
        manager = ControllerRefManager(self.client, ds, "Pod",
                                       lambda p: selector_matches(selector, p["metadata"].get("labels")),
                                       fresh_owner_check(self.client, ds))
        out: dict[str, list[Obj]] = {}
        for pod in manager.claim(candidates):
            node = target_node(pod)
            if node:
                out.setdefault(node, []).append(pod)
        return out

    def _manage(self, ds: Obj, key: str, nodes: list[Obj], hash_: str) -> float | None:
        node_pods = self._node_to_pods(ds)
        surge = self._max_surge(ds, nodes) > 0 if self._rolling(ds) else False
        to_create: list[str] = []
        to_delete: list[Obj] = []
        requeue: float | None = None
        now = time.time()
        for node in nodes:
            name = node["metadata"]["name"]
            run, keep = should_run(node, ds)
            pods = node_pods.get(name, [])
            if run and not pods:
                to_create.append(name)
            elif keep:
                running = []
                for pod in pods:
                    if is_terminating(pod):
                        continue
                    if pod_phase(pod) == "Failed":
                        wait = self._failed_pod_wait(key, name, now)
                        if wait > 0:
                            requeue = wait if requeue is None else min(requeue, wait)
                            continue
                        self.recorder.event(ds, "Warning", "FailedDaemonPod",
                                            f"Found failed daemon pod {pod['metadata']['namespace']}/"
                                            f"{pod['metadata']['name']} on node {name}, will try to kill it")
                        to_delete.append(pod)
                    else:
                        running.append(pod)
                to_delete.extend(self._excess(ds, running, hash_, surge, now))
            elif pods:
                to_delete.extend(p for p in pods if not is_terminating(p))
        self._sync_nodes(ds, key, to_delete, to_create, hash_)
        return requeue

    @staticmethod
    def _excess(ds: Obj, running: list[Obj], hash_: str, surge: bool, now: float) -> list[Obj]:
        """Daemon pods beyond one per node (two while a surge replaces an old pod)."""
        if len(running) <= 1:
            return []
        ordered = _by_age(running)
        if not surge:
            return ordered[1:]
        delete: list[Obj] = []
        oldest_new = oldest_old = None
        for pod in ordered:
            if (pod["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH) == hash_:
                if oldest_new is None:
                    oldest_new = pod
                    continue
            elif oldest_old is None:
                oldest_old = pod
                continue
            delete.append(pod)
        if oldest_new is not None and oldest_old is not None:
            min_ready = int(ds["spec"].get("minReadySeconds") or 0)
            if not is_pod_ready(oldest_old) or is_pod_available(oldest_new, min_ready, now):
                delete.append(oldest_old)
        return delete

    def _failed_pod_wait(self, key: str, node: str, now: float) -> float:
        """0 when a failed pod on ``node`` may be deleted now (and the backoff doubles), else the wait."""
        bkey = f"{key}/{node}"
        with self._backoff_lock:
            delay, not_before = self._failed_backoff.get(bkey, (0.0, 0.0))
            if now < not_before:
                return not_before - now
            delay = min(max(delay * 2, FAILED_BACKOFF_START), FAILED_BACKOFF_MAX)
            self._failed_backoff[bkey] = (delay, now + delay)
            return 0.0

    def _sync_nodes(self, ds: Obj, key: str, to_delete: list[Obj], to_create: list[str], hash_: str) -> None:
        if not to_delete and not to_create:
            return
        self.expectations.expect(key, adds=len(to_create), deletions=[object_key(p) for p in to_delete])
        template = copy.deepcopy(ds["spec"].get("template") or {})
        add_daemon_tolerations(template.setdefault("spec", {}))
        pending = list(to_create)

        def create() -> None:
            node = pending.pop(0)
            pod = pod_from_template(template, ds, extra_labels={CONTROLLER_REVISION_HASH: hash_})
            with_node_affinity(pod["spec"], node)
            self.pod_control.create(pod, ds)

        done, err = slow_start_batch(len(to_create), create)
        for _ in range(len(to_create) - done):
            self.expectations.creation_observed(key)
        errs: list[Exception] = [err] if err is not None else []
        for pod in to_delete:
            try:
                self.pod_control.delete(pod, ds)
            except Exception as e:
                self.expectations.deletion_observed(key, object_key(pod))
                errs.append(e)
        if errs:
            raise errs[0]

    # -- rolling update ------------------------------------------------------------------------

    @staticmethod
    def _rolling(ds: Obj) -> bool:
        return (ds["spec"].get("updateStrategy") or {}).get("type", "RollingUpdate") == "RollingUpdate"

    @staticmethod
    def _desired(ds: Obj, nodes: list[Obj]) -> int:
        return sum(1 for n in nodes if should_run(n, ds)[0])

    def _surge_and_unavailable(self, ds: Obj, nodes: list[Obj]) -> tuple[int, int]:
        rolling = (ds["spec"].get("updateStrategy") or {}).get("rollingUpdate") or {}
        desired = self._desired(ds, nodes)
        surge = scaled_value(rolling.get("maxSurge", 0), desired, True)
        unavailable = scaled_value(rolling.get("maxUnavailable", 1), desired, True)
        if desired > 0 and surge == 0 and unavailable == 0:
            unavailable = 1
        return surge, unavailable

    def _max_surge(self, ds: Obj, nodes: list[Obj]) -> int:
        return self._surge_and_unavailable(ds, nodes)[0]

    def _rolling_update(self, ds: Obj, key: str, nodes: list[Obj], hash_: str) -> None:
        node_pods = self._node_to_pods(ds)
        surge, unavailable = self._surge_and_unavailable(ds, nodes)
        min_ready = int(ds["spec"].get("minReadySeconds") or 0)
        now = time.time()
        if surge == 0:
            num_unavailable = 0
            replace: list[Obj] = []
            candidates: list[Obj] = []
            for node in sorted(node_pods):
                new, old, ok = updated_pods_on_node(node_pods[node], hash_)
                if not ok or (old is None) == (new is None):
                    num_unavailable += 1
                elif new is not None:
                    if not is_pod_available(new, min_ready, now):
                        num_unavailable += 1
                elif not is_pod_available(old, min_ready, now):
                    replace.append(old)
                elif num_unavailable < unavailable:
                    candidates.append(old)
            room = min(max(unavailable - num_unavailable, 0), len(candidates))
            self._sync_nodes(ds, key, replace + candidates[:room], [], hash_)
            return
        num_surge = 0
        old_to_delete: list[Obj] = []
        allowed_nodes: list[str] = []
        candidate_nodes: list[str] = []
        for node in sorted(node_pods):
            new, old, ok = updated_pods_on_node(node_pods[node], hash_)
            if not ok:
                num_surge += 1
            elif old is None:
                continue
            elif new is None:
                if not is_pod_available(old, min_ready, now):
                    allowed_nodes.append(node)
                elif num_surge < surge:
                    candidate_nodes.append(node)
            elif not is_pod_available(new, min_ready, now):
                num_surge += 1
            else:
                old_to_delete.append(old)
        room = min(max(surge - num_surge, 0), len(candidate_nodes))
        self._sync_nodes(ds, key, old_to_delete, allowed_nodes + candidate_nodes[:room], hash_)

    # -- history -------------------------------------------------------------------------------

    def _construct_history(self, ds: Obj) -> tuple[Obj, list[Obj]]:
        """(current revision, old revisions), creating or renumbering the current one."""
        revisions = self.history.claim(ds)
        wanted = template_patch(ds)
        current = [r for r in revisions if r.get("data") == wanted]
        old = [r for r in revisions if r.get("data") != wanted]
        number = max((revision_number(r) for r in old), default=0) + 1
        if not current:
            return self._snapshot(ds, number), old
        # Duplicates (a race of two syncs): keep the highest, point its pods at it, drop the rest.
        current.sort(key=revision_number)
        keep = current[-1]
        for dup in current[:-1]:
            self._relabel_pods(ds, dup, keep)
            self.history.delete(dup)
        if revision_number(keep) < number:
            keep = self.history.renumber(keep, number)
        return keep, old

    def _relabel_pods(self, ds: Obj, dup: Obj, keep: Obj) -> None:
        dup_hash = (dup["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH)
        keep_hash = (keep["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH)
        for pod in self.pods.store.by_index(CONTROLLER_UID_INDEX, ds["metadata"]["uid"]):
            if (pod["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH) == dup_hash:
                try:
                    self.client.patch("Pod", pod["metadata"]["name"], {"metadata": {"labels": {
                        CONTROLLER_REVISION_HASH: keep_hash}}}, namespace=pod["metadata"]["namespace"])
                except errors.NotFound:
                    pass

    def _snapshot(self, ds: Obj, number: int) -> Obj:
        collision = (ds.get("status") or {}).get("collisionCount")
        hash_ = template_hash(ds["spec"].get("template") or {}, collision)
        meta = ds["metadata"]
        revision = {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                    "metadata": {"name": f"{meta['name']}-{hash_}", "namespace": meta["namespace"],
                                 "labels": {**((ds["spec"].get("template") or {}).get("metadata") or {}).get(
                                     "labels", {}), CONTROLLER_REVISION_HASH: hash_},
                                 "ownerReferences": [owner_reference(ds)]},
                    "data": template_patch(ds), "revision": number}
        if meta.get("annotations"):
            revision["metadata"]["annotations"] = dict(meta["annotations"])
        try:
            return self.client.create(revision)
        except errors.AlreadyExists:
            existing = self.client.get("ControllerRevision", revision["metadata"]["name"], meta["namespace"])
            if existing.get("data") == revision["data"]:
                return existing
            fresh = self.client.get("DaemonSet", meta["name"], meta["namespace"])
            if (fresh.get("status") or {}).get("collisionCount") == collision:
                status = dict(fresh.get("status") or {})
                status["collisionCount"] = int(collision or 0) + 1
                update_status(self.client, fresh, status)
            raise

    def _cleanup_history(self, ds: Obj, old: list[Obj]) -> None:
        limit = ds["spec"].get("revisionHistoryLimit")
        limit = 10 if limit is None else int(limit)
        to_kill = len(old) - limit
        if to_kill <= 0:
            return
        live = {(p["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH)
                for pods in self._node_to_pods(ds).values() for p in pods}
        for revision in sorted(old, key=revision_number):
            if to_kill <= 0:
                break
            if (revision["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH) in live:
                continue
            self.history.delete(revision)
            to_kill -= 1

    # -- status ------------------------------------------------------------------------------

    def _update_status(self, ds: Obj, nodes: list[Obj], hash_: str) -> float | None:
        node_pods = self._node_to_pods(ds)
        min_ready = int(ds["spec"].get("minReadySeconds") or 0)
        now = time.time()
        desired = current = ready = available = updated = misscheduled = 0
        wait: float | None = None
        for node in nodes:
            run, _ = should_run(node, ds)
            pods = node_pods.get(node["metadata"]["name"], [])
            if run:
                desired += 1
                if not pods:
                    continue
                current += 1
                pod = _by_age(pods)[0]
                if is_pod_ready(pod):
                    ready += 1
                    if is_pod_available(pod, min_ready, now):
                        available += 1
                    elif min_ready > 0:
                        since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime")) or now
                        left = since + min_ready - now + 0.05
                        wait = left if wait is None else min(wait, left)
                if (pod["metadata"].get("labels") or {}).get(CONTROLLER_REVISION_HASH) == hash_:
                    updated += 1
            elif pods:
                misscheduled += 1
        status: Obj = {"currentNumberScheduled": current, "numberMisscheduled": misscheduled,
                       "desiredNumberScheduled": desired, "numberReady": ready,
                       "observedGeneration": ds["metadata"].get("generation", 0),
                       "updatedNumberScheduled": updated, "numberAvailable": available,
                       "numberUnavailable": desired - available}
        old = ds.get("status") or {}
        if old.get("collisionCount") is not None:
            status["collisionCount"] = old["collisionCount"]
        if old.get("conditions"):
            status["conditions"] = old["conditions"]
        if any((old.get(k) or 0) != (v or 0) for k, v in status.items() if k != "conditions"):
            try:
                update_status(self.client, ds, status)
            except errors.NotFound:
                pass
        return wait


def register(runtime: Any) -> DaemonSetController:
    """Add the DaemonSet controller to ``runtime``."""
    return DaemonSetController(runtime)
