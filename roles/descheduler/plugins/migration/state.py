"""What the MigrationController reads of the cluster: PMJs by pod, pods by owner, workloads' expected replicas.

Reads come from the shared informers (PodMigrationJob, Pod, Reservation) with the field indexes of reference §1.10;
owners (ReplicaSet, Deployment, ...) are read from the API server when a filter needs them.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from koordinator.apis import migration as mj

Obj = dict[str, Any]

INDEX_JOB_POD_UID = "job.pod.uid"
INDEX_JOB_POD_NAME = "job.pod.namespacedName"
INDEX_JOB_POD_NAMESPACE = "job.pod.namespace"
INDEX_POD_OWNER_UID = "pod.ownerRefUID"
#: How long a workload's expected replicas are reused before the owner is read again.
REPLICAS_CACHE_SECONDS = 2.0

#: Kinds whose ``spec.replicas`` is the expected replica count (group/version, kind).
_REPLICA_KINDS = {("apps/v1", "StatefulSet"), ("v1", "ReplicationController"), ("apps/v1", "Deployment"),
                  ("apps/v1", "ReplicaSet")}


def _add_index(informer: Any, name: str, fn: Any) -> None:
    try:
        informer.add_indexer(name, fn)
    except ValueError:
        pass  # another instance of this plugin in the process added it already


def _pod_uid(job: Obj) -> list[str]:
    uid = mj.pod_ref(job).get("uid")
    return [uid] if uid else []


def _pod_name(job: Obj) -> list[str]:
    key = mj.pod_key(job)
    return [key] if key else []


def _pod_namespace(job: Obj) -> list[str]:
    ns = mj.pod_ref(job).get("namespace")
    return [ns] if ns else []


def _owner_uids(pod: Obj) -> list[str]:
    return [r["uid"] for r in (pod.get("metadata") or {}).get("ownerReferences") or [] if r.get("uid")]


class ClusterState:
    """The informers and indexes the filters, arbitrator and controller share."""

    def __init__(self, client: Any, informers: Any) -> None:
        self.client = client
        self.jobs = informers.informer(mj.KIND)
        self.pods = informers.informer("Pod")
        self.reservations = informers.informer("Reservation")
        _add_index(self.jobs, INDEX_JOB_POD_UID, _pod_uid)
        _add_index(self.jobs, INDEX_JOB_POD_NAME, _pod_name)
        _add_index(self.jobs, INDEX_JOB_POD_NAMESPACE, _pod_namespace)
        _add_index(self.pods, INDEX_POD_OWNER_UID, _owner_uids)
        #: Jobs the arbitrator admitted (names), counted by later jobs of the same tick.
        self.passed: set[str] = set()
        self.lock = threading.Lock()
        self._replicas: dict[str, tuple[int, float]] = {}
        self._assumed: dict[str, Obj] = {}

    # -- PMJs ---------------------------------------------------------------------------------------------------
    def assume(self, job: Obj) -> None:
        """A job this process just created counts at once, before the informer delivers it (several evictions
        in one round must see each other's jobs)."""
        with self.lock:
            self._assumed[job["metadata"]["name"]] = job

    def forget(self, name: str) -> None:
        """The informer has the job now (or it is gone)."""
        with self.lock:
            self._assumed.pop(name, None)

    def _pending_assumed(self) -> list[Obj]:
        with self.lock:
            assumed = list(self._assumed.values())
        return [j for j in assumed if self.jobs.store.get(j["metadata"]["name"]) is None]

    def all_jobs(self) -> list[Obj]:
        return self.jobs.store.list() + self._pending_assumed()

    def jobs_of_pod(self, pod: Obj) -> list[Obj]:
        """Jobs naming the pod by UID or by namespace/name."""
        meta = pod.get("metadata") or {}
        found: dict[str, Obj] = {}
        if meta.get("uid"):
            for job in self.jobs.store.by_index(INDEX_JOB_POD_UID, meta["uid"]):
                found[job["metadata"]["name"]] = job
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        for job in self.jobs.store.by_index(INDEX_JOB_POD_NAME, key):
            found[job["metadata"]["name"]] = job
        for job in self._pending_assumed():
            if mj.pod_key(job) == key or (meta.get("uid") and mj.pod_ref(job).get("uid") == meta["uid"]):
                found[job["metadata"]["name"]] = job
        return list(found.values())

    def has_active_job(self, pod: Obj) -> bool:
        return any(mj.is_active(j) for j in self.jobs_of_pod(pod))

    def counts(self, job: Obj, arbitrating: bool) -> bool:
        """Whether ``job`` counts against the migration limits: active jobs, or during arbitration only the
        Running ones and those the arbitrator admitted already."""
        if not arbitrating:
            return mj.is_active(job)
        if mj.phase(job) == mj.PHASE_RUNNING:
            return True
        return mj.is_active(job) and (
            job["metadata"]["name"] in self.passed
            or ((job.get("metadata") or {}).get("annotations") or {}).get(mj.ANNOTATION_PASSED_ARBITRATION) == "true")

    def jobs_in_namespace(self, namespace: str) -> list[Obj]:
        return self.jobs.store.by_index(INDEX_JOB_POD_NAMESPACE, namespace) + [
            j for j in self._pending_assumed() if mj.pod_ref(j).get("namespace") == namespace]

    # -- pods and workloads -------------------------------------------------------------------------------------
    def pod(self, namespace: str, name: str) -> Obj | None:
        return self.pods.store.get(f"{namespace}/{name}")

    def pods_on_node(self, node_name: str) -> list[Obj]:
        return self.pods.store.by_index("spec.nodeName", node_name)

    def pods_of_owner(self, owner_uid: str) -> list[Obj]:
        return self.pods.store.by_index(INDEX_POD_OWNER_UID, owner_uid)

    def expected_replicas(self, pod: Obj) -> int:
        """The replicas the pod's controller wants (ReplicaSet → its Deployment's); ApiError/ValueError when the
        owner cannot be read."""
        ref = mj.controller_ref(pod)
        if ref is None:
            raise ValueError("pod has no controller")
        namespace = (pod.get("metadata") or {}).get("namespace")
        owner = self.client.get(f"{ref.get('apiVersion')}/{ref.get('kind')}", ref["name"], namespace)
        if ref.get("kind") == "ReplicaSet":
            parent = mj.controller_ref(owner)
            if parent is not None and parent.get("kind") == "Deployment":
                owner = self.client.get(f"{parent.get('apiVersion')}/Deployment", parent["name"], namespace)
        if (owner.get("apiVersion"), owner.get("kind")) in _REPLICA_KINDS or "replicas" in (owner.get("spec") or {}):
            replicas = (owner.get("spec") or {}).get("replicas")
            return 1 if replicas is None else int(replicas)
        scale = self.client.get(f"{ref.get('apiVersion')}/{ref.get('kind')}", ref["name"], namespace,
                                subresource="scale")
        return int((scale.get("spec") or {}).get("replicas") or 0)

    def safe_expected_replicas(self, pod: Obj) -> int | None:
        """:meth:`expected_replicas`, None when the owner cannot be read; remembered for
        :data:`REPLICAS_CACHE_SECONDS` per owner, so a round filtering many pods of one workload reads it once."""
        ref = mj.controller_ref(pod)
        key = (ref or {}).get("uid")
        now = time.monotonic()
        with self.lock:
            hit = self._replicas.get(key) if key else None
        if hit is not None and now - hit[1] < REPLICAS_CACHE_SECONDS:
            return hit[0]
        replicas = self._read_replicas(pod)
        if key and replicas is not None:
            with self.lock:
                if len(self._replicas) > 10000:
                    self._replicas.clear()
                self._replicas[key] = (replicas, now)
        return replicas

    def _read_replicas(self, pod: Obj) -> int | None:
        try:
            return self.expected_replicas(pod)
        except Exception:  # noqa: BLE001 - any failure to read the owner rejects the pod (Koordinator's rule)
            return None
