"""The Deployment controller (kube-controller-manager's ``deployment`` controller).

A Deployment owns one ReplicaSet per distinct pod template, named ``<deployment>-<hash>`` where
the hash (also the ``pod-template-hash`` label on the ReplicaSet, its selector and its pods) is
:func:`~koordinator.controllers.history.template_hash` of the template and
``status.collisionCount``. The ReplicaSet whose template equals the Deployment's (ignoring that
label) is the *new* one; the others are *old*. Each sync:

* claims ReplicaSets (adopts matching orphans, releases those that stopped matching);
* on a paused Deployment, or a change of ``spec.replicas`` alone (a *scaling event*, also through
  the scale subresource), scales the active ReplicaSets proportionally and stops there;
* otherwise rolls out: ``RollingUpdate`` scales the new ReplicaSet up to at most
  ``replicas + maxSurge`` pods in all (surge rounds up) and old ones down while at least
  ``replicas - maxUnavailable`` stay available (unavailable rounds down); ``Recreate`` scales old
  ones to 0, waits for their pods to be gone, then scales the new one up;
* keeps the annotations kubectl reads (``deployment.kubernetes.io/revision``, ``revision-history``,
  ``desired-replicas``, ``max-replicas`` and the Deployment's own, e.g. ``kubernetes.io/change-cause``),
  deletes old ReplicaSets beyond ``revisionHistoryLimit``, and writes status with the
  ``Available`` and ``Progressing`` conditions (``progressDeadlineSeconds`` included) and the
  ``ScalingReplicaSet`` events, in kube's words.

``kubectl rollout status/history/undo/restart/pause/resume`` work on what it writes.
"""

from __future__ import annotations

import copy
import logging
import time
from typing import Any

from koordinator.controllers.deploymentutil import (DESIRED_REPLICAS, FAILED_RS_CREATE, FOUND_NEW_RS, MAX_REPLICAS,
                                                    NEW_RS_AVAILABLE, NEW_RS_CREATED, PAUSED, POD_TEMPLATE_HASH,
                                                    RESUMED, REVISION, RS_UPDATED, TIMED_OUT, annotation,
                                                    created_at, int_annotation, status_count, active, by_creation,
                                                    calculate_status, deployment_complete, deployment_progressing,
                                                    deployment_timed_out, equal_ignore_hash, has_progress_deadline,
                                                    is_rolling, max_surge, max_unavailable, new_condition,
                                                    new_rs_replicas, proportion, remove_condition, replicas_of, revision_of,
                                                    set_condition, set_new_rs_annotations, set_replicas_annotations,
                                                    total_replicas, total_status)
from koordinator.controllers.history import template_hash
from koordinator.controllers.podcontrol import (CONTROLLER_UID_INDEX, ControllerRefManager, OwnedPodRouter,
                                                condition, controller_ref, controller_uid_index, ensure_index,
                                                error_text, fresh_owner_check, is_terminating, now_rfc3339,
                                                owner_reference, parse_time, selector_matches, separate_recorder,
                                                update_status)
from koordinator.runtime import errors
from koordinator.runtime.controller import Result

log = logging.getLogger("koordinator.controllers.deployment")

Obj = dict[str, Any]
COMPONENT = "deployment-controller"
WORKERS = 4



# -- the controller -----------------------------------------------------------------------------

class DeploymentController:
    """Reconciles Deployments (see the module docstring)."""

    def __init__(self, runtime: Any) -> None:
        self.client = runtime.client
        self.recorder = separate_recorder(runtime, COMPONENT)
        self.deployments = runtime.informers.informer("Deployment")
        self.replicasets = runtime.informers.informer("ReplicaSet")
        self.pods = runtime.informers.informer("Pod")
        ensure_index(self.replicasets, CONTROLLER_UID_INDEX, controller_uid_index)
        ensure_index(self.pods, CONTROLLER_UID_INDEX, controller_uid_index)
        self.controller = runtime.controller("deployment", self.reconcile, workers=WORKERS)
        self.controller.watch(self.deployments)
        self.router = OwnedPodRouter(self.replicasets, self.deployments, "Deployment", self.controller.enqueue)
        # A Recreate rollout waits for the old pods to be gone: their deletion is news.
        self.pods.add_handler(on_delete=self._on_pod_delete)

    def _on_pod_delete(self, pod: Any) -> None:
        if not isinstance(pod, dict):
            pod = getattr(pod, "obj", None)
            if not isinstance(pod, dict):
                return
        ns = pod["metadata"].get("namespace", "")
        ref = controller_ref(pod)
        if ref is None or ref.get("kind") != "ReplicaSet":
            return
        rs = self.replicasets.store.get(f"{ns}/{ref.get('name')}")
        if rs is None:
            return
        d = self.router.resolve(ns, controller_ref(rs))
        if d is not None and not is_rolling(d):
            self.controller.enqueue(f"{ns}/{d['metadata']['name']}")

    # -- sync --------------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result | None:
        cached = self.deployments.store.get(key)
        if cached is None:
            return None
        d = copy.deepcopy(cached)
        selector = d["spec"].get("selector") or {}
        if not (selector.get("matchLabels") or selector.get("matchExpressions")):
            self.recorder.event(d, "Warning", "SelectingAll",
                                "This deployment is selecting all pods. A non-empty selector is required.")
            if (d.get("status") or {}).get("observedGeneration") != d["metadata"].get("generation"):
                update_status(self.client, d, {**(d.get("status") or {}),
                                               "observedGeneration": d["metadata"].get("generation")})
            return None
        rs_list = self._claim_replicasets(d)
        if is_terminating(d):
            return self._sync_status_only(d, rs_list)
        d = self._check_paused_conditions(d)
        if d["spec"].get("paused"):
            return self._sync(d, rs_list)
        if self._is_scaling_event(d, rs_list):
            return self._sync(d, rs_list)
        if is_rolling(d):
            return self._rollout_rolling(d, rs_list)
        return self._rollout_recreate(d, rs_list)

    def _claim_replicasets(self, d: Obj) -> list[Obj]:
        selector = d["spec"].get("selector")
        candidates = self.replicasets.store.by_index("namespace", d["metadata"]["namespace"])
        manager = ControllerRefManager(self.client, d, "ReplicaSet",
                                       lambda rs: selector_matches(selector, rs["metadata"].get("labels")),
                                       fresh_owner_check(self.client, d))
        return [copy.deepcopy(rs) for rs in manager.claim(candidates)]

    def _write_status(self, d: Obj, status: Obj) -> Obj:
        try:
            return update_status(self.client, d, status)
        except errors.NotFound:
            return d

    def _check_paused_conditions(self, d: Obj) -> Obj:
        if not has_progress_deadline(d):
            return d
        status = copy.deepcopy(d.get("status") or {})
        cond = condition(status.get("conditions"), "Progressing")
        if cond is not None and cond.get("reason") == TIMED_OUT:
            return d
        paused_exists = cond is not None and cond.get("reason") == PAUSED
        if d["spec"].get("paused") and not paused_exists:
            set_condition(status, new_condition("Progressing", "Unknown", PAUSED, "Deployment is paused"))
        elif not d["spec"].get("paused") and paused_exists:
            set_condition(status, new_condition("Progressing", "Unknown", RESUMED, "Deployment is resumed"))
        else:
            return d
        return self._write_status(d, status)

    # -- the ReplicaSets ---------------------------------------------------------------------

    def _split(self, d: Obj, rs_list: list[Obj]) -> tuple[Obj | None, list[Obj]]:
        new_rs = next((rs for rs in by_creation(rs_list) if equal_ignore_hash(rs["spec"].get("template"),
                                                                              d["spec"].get("template"))), None)
        return new_rs, [rs for rs in rs_list if rs is not new_rs]

    def _get_all(self, d: Obj, rs_list: list[Obj], create: bool) -> tuple[Obj, Obj | None, list[Obj]]:
        """(deployment, new ReplicaSet, old ReplicaSets), syncing the revision annotations
        (``getAllReplicaSetsAndSyncRevision``); creates the new one when ``create``."""
        existing, old = self._split(d, rs_list)
        new_revision = max((revision_of(rs) for rs in old), default=0) + 1
        if existing is not None:
            rs = copy.deepcopy(existing)
            changed = set_new_rs_annotations(d, rs, new_revision, True)
            min_ready = d["spec"].get("minReadySeconds") or 0
            if changed or (rs["spec"].get("minReadySeconds") or 0) != min_ready:
                rs["spec"]["minReadySeconds"] = min_ready
                updated = self.client.update(rs)
                existing.clear()
                existing.update(updated)  # later steps of this sync see what is stored
                return d, existing, old
            d = self._set_deployment_revision(d, annotation(rs, REVISION) or "")
            status = copy.deepcopy(d.get("status") or {})
            if has_progress_deadline(d) and condition(status.get("conditions"), "Progressing") is None:
                set_condition(status, new_condition("Progressing", "True", FOUND_NEW_RS,
                                                    f'Found new replica set "{rs["metadata"]["name"]}"'))
                d = self._write_status(d, status)
            return d, rs, old
        if not create:
            return d, None, old
        return self._create_new_rs(d, old, new_revision)

    def _create_new_rs(self, d: Obj, old: list[Obj], new_revision: int) -> tuple[Obj, Obj | None, list[Obj]]:
        status = copy.deepcopy(d.get("status") or {})
        collision = status.get("collisionCount")
        template = copy.deepcopy(d["spec"]["template"])
        hash_ = template_hash(template, collision)
        template.setdefault("metadata", {})
        template["metadata"]["labels"] = {**(template["metadata"].get("labels") or {}), POD_TEMPLATE_HASH: hash_}
        selector = copy.deepcopy(d["spec"]["selector"])
        selector["matchLabels"] = {**(selector.get("matchLabels") or {}), POD_TEMPLATE_HASH: hash_}
        name = f"{d['metadata']['name']}-{hash_}"
        rs: Obj = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                   "metadata": {"name": name, "namespace": d["metadata"]["namespace"],
                                "labels": dict(template["metadata"]["labels"]),
                                "ownerReferences": [owner_reference(d)]},
                   "spec": {"replicas": 0, "minReadySeconds": d["spec"].get("minReadySeconds") or 0,
                            "selector": selector, "template": template}}
        rs["spec"]["replicas"] = new_rs_replicas(d, [*old, rs], rs)
        set_new_rs_annotations(d, rs, new_revision, False)
        already_exists = False
        try:
            created = self.client.create(rs)
        except errors.AlreadyExists:
            already_exists = True
            try:
                found = self.client.get("ReplicaSet", name, d["metadata"]["namespace"])
            except errors.NotFound:
                raise errors.Conflict(409, "Conflict", f"replica set {name} vanished while being created") from None
            ref = controller_ref(found)
            if ref is not None and ref.get("uid") == d["metadata"]["uid"] and \
                    equal_ignore_hash(d["spec"]["template"], found["spec"].get("template")):
                created = found
            else:
                # A different template hashed to this name: a new collision count names another.
                status["collisionCount"] = int(collision or 0) + 1
                self._write_status(d, status)
                raise errors.Conflict(409, "AlreadyExists", f"hash collision on replica set {name}") from None
        except errors.ApiError as err:
            if isinstance(err, errors.Forbidden) and "because it is being terminated" in err.message:
                raise
            msg = f'Failed to create new replica set "{name}": {error_text(err)}'
            if has_progress_deadline(d):
                set_condition(status, new_condition("Progressing", "False", FAILED_RS_CREATE, msg))
                try:
                    self._write_status(d, status)
                except errors.ApiError:
                    pass  # the event below says it; the retry tries again
            self.recorder.event(d, "Warning", FAILED_RS_CREATE, msg)
            raise
        replicas = replicas_of(created)
        if not already_exists and replicas > 0:
            self.recorder.event(d, "Normal", "ScalingReplicaSet",
                                f"Scaled up replica set {name} from 0 to {replicas}")
        d = self._set_deployment_revision(d, str(new_revision))
        if not already_exists and has_progress_deadline(d):
            status = copy.deepcopy(d.get("status") or {})
            set_condition(status, new_condition("Progressing", "True", NEW_RS_CREATED,
                                                f'Created new replica set "{name}"'))
            d = self._write_status(d, status)
        return d, created, old

    def _set_deployment_revision(self, d: Obj, revision: str) -> Obj:
        """kube writes the revision on the Deployment with its status; this server keeps metadata
        out of status writes, so it is a metadata patch (no spec change: no new generation)."""
        if not revision or annotation(d, REVISION) == revision:
            return d
        meta = d["metadata"]
        try:
            patched = self.client.patch("Deployment", meta["name"], {"metadata": {"annotations": {REVISION: revision}}},
                                        namespace=meta["namespace"])
        except errors.NotFound:
            return d
        d = copy.deepcopy(d)
        d["metadata"]["annotations"] = patched["metadata"].get("annotations") or {}
        d["metadata"]["resourceVersion"] = patched["metadata"]["resourceVersion"]
        return d

    def _scale_rs(self, d: Obj, rs: Obj, new_scale: int, operation: str | None = None) -> tuple[bool, Obj]:
        """Set ``rs``'s size and replica annotations; the ScalingReplicaSet event when the size changed."""
        old_scale = replicas_of(rs)
        size_changed = old_scale != new_scale
        annotations_changed = (annotation(rs, DESIRED_REPLICAS) != str(replicas_of(d))
                               or annotation(rs, MAX_REPLICAS) != str(replicas_of(d) + max_surge(d)))
        if not size_changed and not annotations_changed:
            return False, rs
        body = copy.deepcopy(rs)
        body["spec"]["replicas"] = new_scale
        set_replicas_annotations(body, replicas_of(d), replicas_of(d) + max_surge(d))
        updated = self.client.update(body)
        if size_changed:
            operation = operation or ("up" if old_scale < new_scale else "down")
            self.recorder.event(d, "Normal", "ScalingReplicaSet", f"Scaled {operation} replica set "
                                f"{rs['metadata']['name']} from {old_scale} to {new_scale}")
        rs.clear()
        rs.update(updated)
        return size_changed, rs

    def _scale_rs_and_record(self, d: Obj, rs: Obj, new_scale: int) -> bool:
        if replicas_of(rs) == new_scale:
            return False
        return self._scale_rs(d, rs, new_scale)[0]

    # -- scaling (paused, or spec.replicas changed) --------------------------------------------

    def _is_scaling_event(self, d: Obj, rs_list: list[Obj]) -> bool:
        d2, new_rs, old = self._get_all(d, rs_list, False)
        for rs in active([*old, new_rs]):
            desired = int_annotation(rs, DESIRED_REPLICAS)
            if desired is not None and desired != replicas_of(d2):
                return True
        return False

    def _sync(self, d: Obj, rs_list: list[Obj]) -> Result | None:
        d, new_rs, old = self._get_all(d, rs_list, False)
        self._scale(d, new_rs, old)
        if d["spec"].get("paused"):
            self._cleanup(d, old)
        return self._sync_deployment_status(d, [*old, new_rs], new_rs)

    def _scale(self, d: Obj, new_rs: Obj | None, old: list[Obj]) -> None:
        target = self._active_or_latest(new_rs, old)
        if target is not None:
            if replicas_of(target) != replicas_of(d):
                self._scale_rs_and_record(d, target, replicas_of(d))
            return
        if self._is_saturated(d, new_rs):
            for rs in active(old):
                self._scale_rs_and_record(d, rs, 0)
            return
        if not is_rolling(d):
            return
        all_rss = active([*old, new_rs])
        allowed = replicas_of(d) + max_surge(d) if replicas_of(d) > 0 else 0
        to_add = allowed - total_replicas(all_rss)
        operation = None
        if to_add != 0:
            # Larger first; on a tie the newer first when scaling up, the older first when scaling down.
            all_rss = by_creation(all_rss)
            if to_add > 0:
                all_rss.reverse()
            all_rss.sort(key=lambda r: -replicas_of(r))
            operation = "up" if to_add > 0 else "down"
        added = 0
        sizes: dict[str, int] = {}
        for rs in all_rss:
            if to_add != 0:
                p = proportion(rs, d, to_add, added)
                sizes[rs["metadata"]["name"]] = replicas_of(rs) + p
                added += p
            else:
                sizes[rs["metadata"]["name"]] = replicas_of(rs)
        for i, rs in enumerate(all_rss):
            name = rs["metadata"]["name"]
            if i == 0 and to_add != 0:
                sizes[name] = max(sizes[name] + to_add - added, 0)
            self._scale_rs(d, rs, sizes[name], operation)

    @staticmethod
    def _active_or_latest(new_rs: Obj | None, old: list[Obj]) -> Obj | None:
        if new_rs is None and not old:
            return None
        newest_first = list(reversed(by_creation(old)))
        live = active([*newest_first, new_rs])
        if not live:
            return new_rs if new_rs is not None else newest_first[0]
        if len(live) == 1:
            return live[0]
        return None

    @staticmethod
    def _is_saturated(d: Obj, rs: Obj | None) -> bool:
        if rs is None:
            return False
        return (replicas_of(rs) == replicas_of(d) and int_annotation(rs, DESIRED_REPLICAS) == replicas_of(d)
                and status_count(rs, "availableReplicas") == replicas_of(d))

    # -- rollouts ----------------------------------------------------------------------------

    def _rollout_rolling(self, d: Obj, rs_list: list[Obj]) -> Result | None:
        d, new_rs, old = self._get_all(d, rs_list, True)
        assert new_rs is not None
        all_rss: list[Obj | None] = [*old, new_rs]
        if self._reconcile_new_rs(d, all_rss, new_rs):
            return self._sync_rollout_status(d, all_rss, new_rs)
        if self._reconcile_old_rss(d, all_rss, active(old), new_rs):
            return self._sync_rollout_status(d, all_rss, new_rs)
        if deployment_complete(d, d.get("status") or {}):
            self._cleanup(d, old)
        return self._sync_rollout_status(d, all_rss, new_rs)

    def _reconcile_new_rs(self, d: Obj, all_rss: list[Obj | None], new_rs: Obj) -> bool:
        want = replicas_of(d)
        if replicas_of(new_rs) == want:
            return False
        if replicas_of(new_rs) > want:
            return self._scale_rs_and_record(d, new_rs, want)
        return self._scale_rs_and_record(d, new_rs, new_rs_replicas(d, all_rss, new_rs))

    def _reconcile_old_rss(self, d: Obj, all_rss: list[Obj | None], old: list[Obj], new_rs: Obj) -> bool:
        if total_replicas(old) == 0:
            return False
        min_available = replicas_of(d) - max_unavailable(d)
        new_unavailable = replicas_of(new_rs) - status_count(new_rs, "availableReplicas")
        max_scaled_down = total_replicas(all_rss) - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        cleaned = self._cleanup_unhealthy(d, old, max_scaled_down)
        scaled = self._scale_down_old_for_rolling([*old, new_rs], old, d)
        return cleaned + scaled > 0

    def _cleanup_unhealthy(self, d: Obj, old: list[Obj], max_cleanup: int) -> int:
        """Scale old ReplicaSets down by their unavailable pods first: they serve nothing."""
        total = 0
        for rs in by_creation(old):
            if total >= max_cleanup:
                break
            # A status that still counts pods from before a scale-down says more are available than
            # asked for: nothing unhealthy to clean (kube refuses such a "scale down" upwards too).
            if replicas_of(rs) == 0 or status_count(rs, "availableReplicas") >= replicas_of(rs):
                continue
            count = min(max_cleanup - total, replicas_of(rs) - status_count(rs, "availableReplicas"))
            self._scale_rs_and_record(d, rs, replicas_of(rs) - count)
            total += count
        return total

    def _scale_down_old_for_rolling(self, all_rss: list[Obj], old: list[Obj], d: Obj) -> int:
        min_available = replicas_of(d) - max_unavailable(d)
        available = total_status(all_rss, "availableReplicas")
        if available <= min_available:
            return 0
        total, to_scale = 0, available - min_available
        for rs in by_creation(old):
            if total >= to_scale:
                break
            if replicas_of(rs) == 0:
                continue
            count = min(replicas_of(rs), to_scale - total)
            self._scale_rs_and_record(d, rs, replicas_of(rs) - count)
            total += count
        return total

    def _rollout_recreate(self, d: Obj, rs_list: list[Obj]) -> Result | None:
        d, new_rs, old = self._get_all(d, rs_list, False)
        all_rss: list[Obj | None] = [*old, new_rs]
        scaled_down = False
        for rs in active(old):
            scaled_down |= self._scale_rs_and_record(d, rs, 0)
        if scaled_down or self._old_pods_running(new_rs, old):
            return self._sync_rollout_status(d, all_rss, new_rs)
        if new_rs is None:
            d, new_rs, old = self._get_all(d, rs_list, True)
            all_rss = [*old, new_rs]
        assert new_rs is not None
        self._scale_rs_and_record(d, new_rs, replicas_of(d))
        if deployment_complete(d, d.get("status") or {}):
            self._cleanup(d, old)
        return self._sync_rollout_status(d, all_rss, new_rs)

    def _old_pods_running(self, new_rs: Obj | None, old: list[Obj]) -> bool:
        if total_status(old, "replicas") > 0:
            return True
        for rs in old:
            if new_rs is not None and rs["metadata"]["uid"] == new_rs["metadata"]["uid"]:
                continue
            for pod in self.pods.store.by_index(CONTROLLER_UID_INDEX, rs["metadata"]["uid"]):
                if ((pod.get("status") or {}).get("phase") or "Pending") not in ("Failed", "Succeeded"):
                    return True
        return False

    def _cleanup(self, d: Obj, old: list[Obj]) -> None:
        """Delete the oldest unused ReplicaSets beyond ``revisionHistoryLimit``."""
        limit = d["spec"].get("revisionHistoryLimit")
        if limit is None:
            return
        alive = [rs for rs in old if not is_terminating(rs)]
        diff = len(alive) - int(limit)
        if diff <= 0:
            return
        for rs in sorted(alive, key=lambda r: (revision_of(r), created_at(r)))[:diff]:
            if (status_count(rs, "replicas") != 0 or replicas_of(rs) != 0
                    or int(rs["metadata"].get("generation") or 0) > status_count(rs, "observedGeneration")):
                continue
            try:
                self.client.delete("ReplicaSet", rs["metadata"]["name"], rs["metadata"]["namespace"])
            except errors.NotFound:
                pass

    # -- status -----------------------------------------------------------------------------

    def _sync_status_only(self, d: Obj, rs_list: list[Obj]) -> Result | None:
        d, new_rs, old = self._get_all(d, rs_list, False)
        return self._sync_deployment_status(d, [*old, new_rs], new_rs)

    def _sync_deployment_status(self, d: Obj, all_rss: list[Obj | None], new_rs: Obj | None) -> Result | None:
        status = calculate_status(all_rss, new_rs, d)
        if status != (d.get("status") or {}):
            self._write_status(d, status)
        return None

    def _sync_rollout_status(self, d: Obj, all_rss: list[Obj | None], new_rs: Obj | None) -> Result | None:
        now = time.time()
        status = calculate_status(all_rss, new_rs, d)
        if not has_progress_deadline(d):
            remove_condition(status, "Progressing")
        current = condition((d.get("status") or {}).get("conditions"), "Progressing")
        complete = (status["replicas"] == status["updatedReplicas"] and current is not None
                    and current.get("reason") == NEW_RS_AVAILABLE)
        name = new_rs["metadata"]["name"] if new_rs is not None else ""
        if has_progress_deadline(d) and not complete:
            if deployment_complete(d, status):
                msg = f'ReplicaSet "{name}" has successfully progressed.' if new_rs else \
                    "Deployment has successfully progressed."
                set_condition(status, new_condition("Progressing", "True", NEW_RS_AVAILABLE, msg))
            elif deployment_progressing(d, status):
                msg = f'ReplicaSet "{name}" is progressing.' if new_rs else "Deployment is progressing."
                cond = new_condition("Progressing", "True", RS_UPDATED, msg)
                if current is not None:
                    if current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime")
                    remove_condition(status, "Progressing")
                set_condition(status, cond)
            elif deployment_timed_out(d, status, now):
                msg = f'ReplicaSet "{name}" has timed out progressing.' if new_rs else \
                    "Deployment has timed out progressing."
                set_condition(status, new_condition("Progressing", "False", TIMED_OUT, msg))
        failure = self._replica_failure(all_rss, new_rs)
        if failure is not None:
            set_condition(status, failure)
        else:
            remove_condition(status, "ReplicaFailure")
        if status != (d.get("status") or {}):
            d = self._write_status(d, status)
        return self._requeue_stuck(d, status, now)

    @staticmethod
    def _replica_failure(all_rss: list[Obj | None], new_rs: Obj | None) -> Obj | None:
        """The new ReplicaSet's ReplicaFailure condition (else an old one's), as the Deployment's."""
        ordered = ([new_rs] if new_rs is not None else []) + [r for r in all_rss if r is not None and r is not new_rs]
        for rs in ordered:
            cond = condition((rs.get("status") or {}).get("conditions"), "ReplicaFailure")
            if cond is not None:
                return {"type": "ReplicaFailure", "status": cond.get("status", "True"),
                        "lastUpdateTime": cond.get("lastTransitionTime") or now_rfc3339(),
                        "lastTransitionTime": cond.get("lastTransitionTime") or now_rfc3339(),
                        "reason": cond.get("reason", ""), "message": cond.get("message", "")}
        return None

    @staticmethod
    def _requeue_stuck(d: Obj, status: Obj, now: float) -> Result | None:
        """Look again when the progress deadline would pass (``requeueStuckDeployment``)."""
        cond = condition(status.get("conditions"), "Progressing")
        if cond is None or not has_progress_deadline(d) or deployment_complete(d, status):
            return None
        if cond.get("reason") in (TIMED_OUT, NEW_RS_AVAILABLE):
            return None
        since = parse_time(cond.get("lastUpdateTime"))
        if since is None:
            return None
        after = since + int(d["spec"]["progressDeadlineSeconds"]) - now
        return Result(requeue_after=max(after, 0.0) + 1.0)


def register(runtime: Any) -> DeploymentController:
    """Add the Deployment controller to ``runtime``."""
    return DeploymentController(runtime)

