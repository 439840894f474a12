"""What every pod-owning controller needs: owner references, pods from templates, pod states.

The predicates follow kube-controller-manager's ``controller_utils`` and ``podutil``: a pod is
*active* until it has Succeeded or Failed or is being deleted; *ready* when its Ready condition is
True; *available* when it has been ready for ``minReadySeconds``.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from koordinator.apis.timestamps import now_rfc3339, parse_time  # noqa: F401  (shared by the controllers)
from koordinator.apis.selectors import label_selector_from_dict
from koordinator.runtime import errors

Obj = dict[str, Any]

# Pods (and ControllerRevisions) indexed by the uid of their controller's ownerReference.
CONTROLLER_UID_INDEX = "controller-uid"


def owner_reference(owner: Obj, *, controller: bool = True, block_owner_deletion: bool = True) -> Obj:
    """The ownerReference a controller puts on what it creates for ``owner``."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": controller, "blockOwnerDeletion": block_owner_deletion}


def controller_ref(obj: Obj) -> Obj | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def controller_uid_index(obj: Obj) -> list[str]:
    """Index function for :data:`CONTROLLER_UID_INDEX`."""
    ref = controller_ref(obj)
    return [ref["uid"]] if ref is not None and ref.get("uid") else []


def pod_from_template(template: Obj, owner: Obj, *, name: str | None = None,
                      extra_labels: dict[str, str] | None = None) -> Obj:
    """A new Pod from ``owner``'s pod template, owned by it (``generateName`` ``<owner>-`` unless ``name``)."""
    tmeta = template.get("metadata") or {}
    meta: Obj = {"namespace": owner["metadata"].get("namespace"),
                 "labels": {**(tmeta.get("labels") or {}), **(extra_labels or {})},
                 "ownerReferences": [owner_reference(owner)]}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if name is not None:
        meta["name"] = name
    else:
        meta["generateName"] = f"{owner['metadata']['name']}-"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})}


def is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def pod_phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_pod_active(pod: Obj) -> bool:
    """Not Succeeded, not Failed, not being deleted."""
    return pod_phase(pod) not in ("Succeeded", "Failed") and not is_terminating(pod)


def ready_condition(pod: Obj) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond
    return None


def is_pod_ready(pod: Obj) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_pod_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """Ready, and for at least ``min_ready_seconds`` (by the Ready condition's lastTransitionTime)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))
    return since is not None and since + min_ready_seconds <= now


# -- what the apps/v1 controllers share --------------------------------------------------------------


#: How long a controller trusts its expectations before it acts anyway (kube's ExpectationsTimeout).
EXPECTATIONS_TIMEOUT = 300.0
#: The most pods one sync creates or deletes (kube's BurstReplicas).
BURST_REPLICAS = 500
#: Annotation whose value orders pods for scale-down (lower goes first).
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"


def ensure_index(informer: Any, name: str, fn: Callable[[Obj], list[str]]) -> None:
    """Add an index to a shared informer unless another controller already added it."""
    try:
        informer.add_indexer(name, fn)
    except ValueError:
        pass  # the informer is shared: the first controller's index serves everyone


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else meta.get("name", "")


class Expectations:
    """kube's ControllerExpectations: creations and deletions a controller asked for and has not
    yet seen in its informer, so that a lagging cache never makes it create or delete twice.

    Deletions are tracked by pod key (UIDTrackingControllerExpectations), so a pod that disappears
    on its own is not mistaken for one this controller deleted.
    """

    def __init__(self, timeout: float = EXPECTATIONS_TIMEOUT) -> None:
        self.timeout = timeout
        self._lock = threading.Lock()
        # controller key -> [adds, deletion keys, timestamp]
        self._records: dict[str, list[Any]] = {}

    def expect(self, key: str, adds: int = 0, deletions: Iterable[str] = ()) -> None:
        """Record ``adds`` creations and the keys of the pods about to be deleted (replacing any record)."""
        with self._lock:
            self._records[key] = [adds, set(deletions), time.monotonic()]

    def creation_observed(self, key: str) -> None:
        with self._lock:
            rec = self._records.get(key)
            if rec is not None and rec[0] > 0:
                rec[0] -= 1

    def deletion_observed(self, key: str, pod_key: str) -> None:
        with self._lock:
            rec = self._records.get(key)
            if rec is not None:
                rec[1].discard(pod_key)

    def satisfied(self, key: str) -> bool:
        """True when nothing is pending, the record expired or there is no record."""
        with self._lock:
            rec = self._records.get(key)
            if rec is None:
                return True
            return (rec[0] <= 0 and not rec[1]) or time.monotonic() - rec[2] > self.timeout

    def forget(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)


def slow_start_batch(count: int, fn: Callable[[], None], initial_batch_size: int = 1) -> tuple[int, Exception | None]:
    """Call ``fn`` ``count`` times in batches of doubling size (1, 2, 4, ...), stopping after the
    first batch with a failure, so that a template the server refuses costs one call, not ``count``.

    Returns how many calls succeeded and the first error. The calls run on the caller's (worker)
    thread, one after another: the controller's workers give the parallelism across objects.
    """
    remaining = count
    successes = 0
    batch = min(remaining, initial_batch_size)
    while batch > 0:
        errs: list[Exception] = []
        for _ in range(batch):
            try:
                fn()
            except Exception as err:  # collected: the batch reports its first failure
                errs.append(err)
        successes += batch - len(errs)
        if errs:
            return successes, errs[0]
        remaining -= batch
        batch = min(2 * batch, remaining)
    return successes, None


def error_text(err: Exception) -> str:
    """An API error as kube's controllers print it in events (the server's message, no HTTP code)."""
    if isinstance(err, errors.ApiError):
        return err.message
    return str(err)


class PodControl:
    """Creates and deletes pods for a controller, with kube's events on the owner
    (``SuccessfulCreate``/``FailedCreate``/``SuccessfulDelete``/``FailedDelete``)."""

    def __init__(self, client: Any, recorder: Any) -> None:
        self.client = client
        self.recorder = recorder

    def create(self, pod: Obj, owner: Obj) -> Obj:
        try:
            created = self.client.create(pod)
        except Exception as err:
            if not _namespace_terminating(err):
                self.recorder.event(owner, "Warning", "FailedCreate", f"Error creating: {error_text(err)}")
            raise
        self.recorder.event(owner, "Normal", "SuccessfulCreate", f"Created pod: {created['metadata']['name']}")
        return created

    def delete(self, pod: Obj, owner: Obj) -> None:
        meta = pod["metadata"]
        try:
            self.client.delete("Pod", meta["name"], meta["namespace"], preconditions={"uid": meta.get("uid")}
                               if meta.get("uid") else None)
        except errors.NotFound:
            return  # already gone: what we wanted
        except Exception as err:
            self.recorder.event(owner, "Warning", "FailedDelete", f"Error deleting: {error_text(err)}")
            raise
        self.recorder.event(owner, "Normal", "SuccessfulDelete", f"Deleted pod: {meta['name']}")


def _namespace_terminating(err: Exception) -> bool:
    return isinstance(err, errors.Forbidden) and "because it is being terminated" in str(err)


class ControllerRefManager:
    """kube's ``BaseControllerRefManager.ClaimObject``: adopt matching orphans, release owned
    objects that no longer match, ignore those another controller owns.

    ``can_adopt()`` is called at most once, before the first adoption (kube re-reads the owner
    from the server there, so that an owner being deleted adopts nothing).
    """

    def __init__(self, client: Any, owner: Obj, kind: str, matches: Callable[[Obj], bool],
                 can_adopt: Callable[[], None]) -> None:
        self.client = client
        self.owner = owner
        self.kind = kind
        self.matches = matches
        self._can_adopt = can_adopt
        self._adopt_checked: Exception | None | bool = False

    def claim(self, objs: Iterable[Obj]) -> list[Obj]:
        """The objects the owner controls after adoption and release."""
        uid = self.owner["metadata"]["uid"]
        owner_deleting = is_terminating(self.owner)
        claimed: list[Obj] = []
        for obj in objs:
            ref = controller_ref(obj)
            if ref is not None:
                if ref.get("uid") != uid:
                    continue
                if self.matches(obj):
                    claimed.append(obj)
                elif not owner_deleting:
                    self._release(obj)
                continue
            if owner_deleting or is_terminating(obj) or not self.matches(obj):
                continue
            adopted = self._adopt(obj)
            if adopted is not None:
                claimed.append(adopted)
        return claimed

    def _adopt(self, obj: Obj) -> Obj | None:
        if self._adopt_checked is False:
            try:
                self._can_adopt()
                self._adopt_checked = None
            except Exception as err:
                self._adopt_checked = err
        if self._adopt_checked is not None:
            return None
        meta = obj["metadata"]
        # A strategic merge by uid (kube's ownerRefControllerPatch): adopting twice is harmless and
        # other owners' references stay, whatever our cached copy says.
        patch = {"metadata": {"uid": meta.get("uid"), "ownerReferences": [owner_reference(self.owner)]}}
        try:
            return self.client.patch(self.kind, meta["name"], patch, namespace=meta.get("namespace"),
                                     patch_type="strategic")
        except errors.NotFound:
            return None  # gone: nothing to adopt

    def _release(self, obj: Obj) -> None:
        meta = obj["metadata"]
        patch = {"metadata": {"uid": meta.get("uid"), "ownerReferences": [
            {"$patch": "delete", "uid": self.owner["metadata"]["uid"]}]}}
        try:
            self.client.patch(self.kind, meta["name"], patch, namespace=meta.get("namespace"),
                              patch_type="strategic")
        except (errors.NotFound, errors.Invalid):
            pass  # gone, or already released (kube ignores both)


def fresh_owner_check(client: Any, owner: Obj) -> Callable[[], None]:
    """kube's ``RecheckDeletionTimestamp``: re-read the owner; raise if it is gone, replaced or being deleted."""
    def check() -> None:
        meta = owner["metadata"]
        fresh = client.get(owner["kind"], meta["name"], meta.get("namespace"))
        if fresh["metadata"].get("uid") != meta.get("uid"):
            raise errors.NotFound(404, "NotFound", f"original {owner['kind']} {meta['name']} is gone: "
                                                   f"got uid {fresh['metadata'].get('uid')}, wanted {meta.get('uid')}")
        if is_terminating(fresh):
            raise RuntimeError(f"{owner['kind']} {meta['name']} has just been deleted")
    return check


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """An ``IntOrString`` (``3`` or ``"25%"``) against ``total``, as ``GetScaledValueFromIntOrPercent``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    text = str(value)
    if text.endswith("%"):
        pct = int(text[:-1])
        exact = pct * total / 100
        return int(math.ceil(exact)) if round_up else int(math.floor(exact))
    return int(text)


def selector_matches(selector: Obj | None, labels: dict[str, str] | None) -> bool:
    """A metav1.LabelSelector against labels (a nil or empty selector matches nothing here, as
    the workload controllers treat it)."""
    if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
        return False
    try:
        return label_selector_from_dict(selector).matches(labels or {})
    except ValueError:
        return False


def condition(conditions: list[Obj] | None, ctype: str) -> Obj | None:
    for cond in conditions or ():
        if cond.get("type") == ctype:
            return cond
    return None


def pod_ready_time(pod: Obj) -> float | None:
    if not is_pod_ready(pod):
        return None
    return parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))


def _log2_bucket(t: float | None, now: float) -> int:
    # kube compares durations by their integer log2 (LogarithmicScaleDown), so pods created at
    # nearly the same time count as equally old and the other criteria decide.
    if t is None:
        return -1
    d = max(now - t, 0.0)
    return int(math.log2(d * 1e9)) if d > 0 else 0


def deletion_rank_key(pod: Obj, rank: int, now: float) -> tuple:
    """Sort key (ascending = deleted first) of kube's ``ActivePodsWithRanks``:
    unassigned < assigned; Pending < Unknown < Running; not ready < ready; lower
    pod-deletion-cost first; more pods of the owner's family on the same node first; ready for
    less time first; more container restarts first; newer first."""
    spec = pod.get("spec") or {}
    meta = pod.get("metadata") or {}
    phase_order = {"Pending": 0, "Unknown": 1, "Running": 2}.get(pod_phase(pod), 0)
    try:
        cost = int((meta.get("annotations") or {}).get(POD_DELETION_COST, "0"))
    except ValueError:
        cost = 0
    ready = is_pod_ready(pod)
    ready_bucket = _log2_bucket(pod_ready_time(pod), now) if ready else 0
    restarts = max((c.get("restartCount") or 0 for c in (pod.get("status") or {}).get("containerStatuses") or ()),
                   default=0)
    created = parse_time(meta.get("creationTimestamp"))
    return (1 if spec.get("nodeName") else 0, phase_order, 1 if ready else 0, cost, -rank, ready_bucket, -restarts,
            _log2_bucket(created, now) if created is not None else -1)


class OwnedPodRouter:
    """Routes pod events to the workload that controls the pod, as kube's ``addPod``/``updatePod``/
    ``deletePod`` handlers do: the owner by controllerRef (lowering its expectations when the event
    is a creation or a deletion it asked for), or, for an orphan, every workload whose selector
    matches it (one of them may adopt it).

    The expectations are lowered before the key is queued, in the same handler, so a reconcile
    never sees a pod in the cache whose creation is still expected.
    """

    def __init__(self, pods: Any, owners: Any, kind: str, enqueue: Callable[[str], None],
                 expectations: Expectations | None = None) -> None:
        self.owners = owners
        self.kind = kind
        self.enqueue = enqueue
        self.expectations = expectations
        pods.add_handler(on_add=self._on_add, on_update=self._on_update, on_delete=self._on_delete)

    def resolve(self, namespace: str, ref: Obj | None) -> Obj | None:
        """The cached owner ``ref`` names, if it is of our kind and has the uid the reference records."""
        if ref is None or ref.get("kind") != self.kind:
            return None
        owner = self.owners.store.get(f"{namespace}/{ref.get('name')}")
        if owner is None or owner["metadata"].get("uid") != ref.get("uid"):
            return None
        return owner

    def matching_owners(self, pod: Obj) -> list[str]:
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        return [object_key(o) for o in self.owners.store.by_index("namespace", meta.get("namespace", ""))
                if selector_matches((o.get("spec") or {}).get("selector"), labels)]

    def _on_add(self, pod: Obj) -> None:
        if is_terminating(pod):
            self._on_delete(pod)
            return
        ns = pod["metadata"].get("namespace", "")
        ref = controller_ref(pod)
        if ref is not None:
            owner = self.resolve(ns, ref)
            if owner is not None:
                key = object_key(owner)
                if self.expectations is not None:
                    self.expectations.creation_observed(key)
                self.enqueue(key)
            return
        for key in self.matching_owners(pod):
            self.enqueue(key)

    def _on_update(self, old: Obj, new: Obj) -> None:
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return  # a resync: the owners' own resync covers it
        ns = new["metadata"].get("namespace", "")
        old_ref, new_ref = controller_ref(old), controller_ref(new)
        labels_changed = (old["metadata"].get("labels") or {}) != (new["metadata"].get("labels") or {})
        if old_ref is not None and (new_ref is None or old_ref.get("uid") != new_ref.get("uid")):
            owner = self.resolve(ns, old_ref)
            if owner is not None:
                self.enqueue(object_key(owner))
        if new_ref is not None:
            owner = self.resolve(ns, new_ref)
            if owner is not None:
                self.enqueue(object_key(owner))
            return
        if labels_changed or old_ref is not None:
            for key in self.matching_owners(new):
                self.enqueue(key)

    def _on_delete(self, pod: Any) -> None:
        if not isinstance(pod, dict):
            pod = getattr(pod, "obj", None)  # DeletedFinalStateUnknown
            if not isinstance(pod, dict):
                return
        ns = pod["metadata"].get("namespace", "")
        owner = self.resolve(ns, controller_ref(pod))
        if owner is None:
            return
        key = object_key(owner)
        if self.expectations is not None:
            self.expectations.deletion_observed(key, object_key(pod))
        self.enqueue(key)


def separate_recorder(runtime: Any, component: str) -> Any:
    """An event recorder whose ``source.component`` is ``component`` (``kubectl describe`` shows it
    in "From", as kube-controller-manager's ``deployment-controller``), started and stopped with
    the runtime."""
    from koordinator.runtime.events import EventRecorder

    recorder = EventRecorder(runtime.client, component, metrics=runtime.metrics)
    runtime.add_component(recorder)
    return recorder


def update_status(client: Any, obj: Obj, status: Obj, attempts: int = 3) -> Obj:
    """Write ``status`` on ``obj`` through its status subresource; on a Conflict re-read and retry
    (status is derived, so the newest object takes it as it is)."""
    current = obj
    for attempt in range(attempts):
        body = {**current, "status": status}
        try:
            return client.update_status(body)
        except errors.Conflict:
            if attempt == attempts - 1:
                raise
            meta = current["metadata"]
            current = client.get(current["kind"], meta["name"], meta.get("namespace"))
            if current["metadata"].get("uid") != meta.get("uid"):
                raise
            status = {**status, "observedGeneration": min(status.get("observedGeneration", 0),
                                                          current["metadata"].get("generation", 0))}
    raise AssertionError("unreachable")
