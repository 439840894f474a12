"""The MigrationController's filter chain (reference §1.7.2): which pods may be migrated now.

``filter(pod)`` = no active PMJ for the pod ∧ Reservation filter ∧ non-retryable filter ∧ retryable filter.
Non-retryable: namespaces, eviction cost, evictor constraints (DaemonSet/mirror/static/terminating/bare pods,
priority, local storage, PVC, label selector, and with ``nodeFit`` a fit on some ready node other than the pod's
among those ``nodeSelector`` matches) and expected replicas. Retryable: migrating limits globally, per node, per
namespace and per workload, and the unavailable limit per workload. The last two families are skipped
for pods annotated ``descheduler.alpha.kubernetes.io/evict``. ``pre_eviction_filter`` re-checks ``nodeFit`` just
before evicting.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from koordinator.apis import migration as mj
from koordinator_roles.descheduler.framework.nodefit import NOT_FIT_MESSAGE, fits_any_other_ready_node
from koordinator_roles.descheduler.plugins.migration.args import MigrationControllerArgs
from koordinator_roles.descheduler.plugins.migration.state import ClusterState

log = logging.getLogger("koordinator.descheduler.migration")

Obj = dict[str, Any]


def _meta(pod: Obj) -> Obj:
    return pod.get("metadata") or {}


def _annotations(pod: Obj) -> dict[str, str]:
    return _meta(pod).get("annotations") or {}


def is_pod_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def is_active_pod(pod: Obj) -> bool:
    """Not terminating and not finished."""
    return not _meta(pod).get("deletionTimestamp") and (pod.get("status") or {}).get("phase") not in (
        "Succeeded", "Failed")


class MigrationFilter:
    """The filters over the shared :class:`ClusterState`; ``priority_threshold`` is resolved by the plugin.

    ``nodes`` lists the cluster's nodes (the Node informer's cache) for ``nodeFit``; it is needed only then.
    """

    def __init__(self, args: MigrationControllerArgs, state: ClusterState, priority_threshold: int | None,
                 nodes: Callable[[], list[Obj]] | None = None) -> None:
        if args.node_fit and nodes is None:
            raise ValueError("nodeFit: Invalid value: true: the MigrationController has no Node lister to fit pods on")
        self.args = args
        self.state = state
        self.priority_threshold = priority_threshold
        self.nodes = nodes

    # -- the chain ----------------------------------------------------------------------------------------------
    def filter(self, pod: Obj) -> bool:
        if self.state.has_active_job(pod):
            return False
        if not self.reservation_filter(pod):
            return False
        if self.evict_annotated(pod):
            return True
        return self.non_retryable(pod) and self.retryable(pod)

    def pre_eviction_filter(self, pod: Obj) -> bool:
        # Koordinator's PreEvictionFilter is upstream DefaultEvictor's, which checks only nodeFit.
        why = self.node_fit_rejection(pod)
        if why is not None:
            meta = _meta(pod)
            log.info("%s pod=%s/%s", why, meta.get("namespace"), meta.get("name"))
        return why is None

    def node_fit_rejection(self, pod: Obj) -> str | None:
        """With ``nodeFit``: why the pod fits no other ready node (None: it fits one, or nodeFit is off)."""
        if not self.args.node_fit or self.nodes is None:
            return None
        if fits_any_other_ready_node(pod, self.state, self.nodes(), self.args.node_selector):
            return None
        return NOT_FIT_MESSAGE

    @staticmethod
    def evict_annotated(pod: Obj) -> bool:
        return mj.ANNOTATION_EVICT in _annotations(pod)

    def reservation_filter(self, pod: Obj) -> bool:
        if self.args.default_job_mode != mj.MODE_RESERVATION_FIRST:
            return True
        return (pod.get("spec") or {}).get("schedulerName", "default-scheduler") in self.args.scheduler_names

    # -- non-retryable ------------------------------------------------------------------------------------------
    def non_retryable(self, pod: Obj) -> bool:
        return self.rejection(pod) is None

    def rejection(self, pod: Obj) -> str | None:
        """Why the pod may never be migrated (None: it may)."""
        a = self.args
        namespace = _meta(pod).get("namespace", "")
        if a.namespaces_include and namespace not in a.namespaces_include:
            return f"namespace {namespace} is not included"
        if a.namespaces_exclude and namespace in a.namespaces_exclude:
            return f"namespace {namespace} is excluded"
        if _annotations(pod).get(mj.ANNOTATION_EVICTION_COST) == mj.EVICTION_COST_NEVER:
            return "eviction cost is the maximum"
        reason = self.evictor_constraint(pod)
        if reason:
            return reason
        return self.expected_replicas_rejection(pod)

    def evictor_constraint(self, pod: Obj) -> str | None:
        a = self.args
        meta, spec = _meta(pod), pod.get("spec") or {}
        annotations = meta.get("annotations") or {}
        refs = meta.get("ownerReferences") or []
        if any(r.get("kind") == "DaemonSet" for r in refs):
            return "pod is a DaemonSet pod"
        if "kubernetes.io/config.mirror" in annotations:
            return "pod is a mirror pod"
        if annotations.get("kubernetes.io/config.source", "api") != "api":
            return "pod is a static pod"
        if meta.get("deletionTimestamp"):
            return "pod is terminating"
        if not refs and not a.evict_all_bare_pods:
            if not (a.evict_failed_bare_pods and (pod.get("status") or {}).get("phase") == "Failed"):
                return "pod has no owner"
        priority = spec.get("priority")
        if not a.evict_system_critical_pods:
            if priority is not None and priority >= mj.SYSTEM_CRITICAL_PRIORITY:
                return "pod is system critical"
            if self.priority_threshold is not None and priority is not None and priority >= self.priority_threshold:
                return f"pod priority {priority} is not below the threshold {self.priority_threshold}"
        volumes = spec.get("volumes") or []
        if not a.evict_local_storage_pods and any("hostPath" in v or "emptyDir" in v for v in volumes):
            return "pod has local storage"
        if a.ignore_pvc_pods and any("persistentVolumeClaim" in v for v in volumes):
            return "pod has a PVC"
        if a.label_selector is not None and not a.label_selector.matches(meta.get("labels") or {}):
            return "pod does not match the label selector"
        # Last although Koordinator checks it before the label selector: it is the one check that looks at every
        # node, and the order only changes which reason a pod failing both gets.
        return self.node_fit_rejection(pod)

    def expected_replicas_rejection(self, pod: Obj) -> str | None:
        a = self.args
        if not a.check_expected_replicas or mj.controller_ref(pod) is None:
            return None
        replicas = self.state.safe_expected_replicas(pod)
        if replicas is None:
            return "the pod's owner cannot be read"
        if a.skip_check_expected_replicas:
            return None
        max_migrating = mj.max_per_workload(replicas, a.max_migrating_per_workload)
        max_unavailable = mj.max_per_workload(replicas, a.max_unavailable_per_workload)
        if replicas == 1 or replicas == max_migrating or replicas == max_unavailable:
            return (f"workload expects {replicas} replicas (maxMigrating {max_migrating}, "
                    f"maxUnavailable {max_unavailable})")
        return None

    # -- retryable ----------------------------------------------------------------------------------------------
    def retryable(self, pod: Obj, arbitrating: bool = False) -> bool:
        return self.throttled(pod, arbitrating) is None

    def throttled(self, pod: Obj, arbitrating: bool = False) -> str | None:
        """Which migration limit the pod is held back by now (None: none)."""
        a, st = self.args, self.state
        meta = _meta(pod)
        uid = meta.get("uid")
        key = f"{meta.get('namespace')}/{meta.get('name')}"

        def other(job: Obj) -> bool:
            ref = mj.pod_ref(job)
            return st.counts(job, arbitrating) and not (uid and ref.get("uid") == uid) and mj.pod_key(job) != key

        if a.max_migrating_globally and not a.skipped("MaxMigratingGlobally"):
            count = sum(1 for j in st.all_jobs() if other(j))
            if count >= a.max_migrating_globally:
                return f"MaxMigratingGlobally: {count} migrating"
        node = (pod.get("spec") or {}).get("nodeName")
        if a.max_migrating_per_node and node and not a.skipped("MaxMigratingPerNode"):
            count = sum(1 for p in st.pods_on_node(node) if _meta(p).get("uid") != uid
                        and any(other(j) for j in st.jobs_of_pod(p)))
            if count >= a.max_migrating_per_node:
                return f"MaxMigratingPerNode: {count} migrating on node {node}"
        if a.max_migrating_per_namespace and not a.skipped("MaxMigratingPerNamespace"):
            count = sum(1 for j in st.jobs_in_namespace(meta.get("namespace", "")) if other(j))
            if count >= a.max_migrating_per_namespace:
                return f"MaxMigratingPerNamespace: {count} migrating in namespace {meta.get('namespace')}"
        return self.workload_throttled(pod, other)

    def workload_throttled(self, pod: Obj, other: Any) -> str | None:
        a, st = self.args, self.state
        ref = mj.controller_ref(pod)
        if ref is None:
            return None
        replicas = st.safe_expected_replicas(pod)
        if replicas is None:
            return "the pod's owner cannot be read"
        namespace = _meta(pod).get("namespace")
        siblings = [p for p in st.pods_of_owner(ref.get("uid", "")) if _meta(p).get("namespace") == namespace]
        migrating = {_meta(p).get("uid") for p in siblings if any(other(j) for j in st.jobs_of_pod(p))}
        if not a.skipped("MaxMigratingPerWorkload"):
            max_migrating = mj.max_per_workload(replicas, a.max_migrating_per_workload)
            if migrating and len(migrating) >= max_migrating:
                return f"MaxMigratingPerWorkload: {len(migrating)} of {ref.get('name')} migrating (max {max_migrating})"
        if not a.skipped("MaxUnavailablePerWorkload"):
            max_unavailable = mj.max_per_workload(replicas, a.max_unavailable_per_workload)
            unavailable = {_meta(p).get("uid") for p in siblings if not (is_active_pod(p) and is_pod_ready(p))}
            unavailable |= migrating
            if len(unavailable) >= max_unavailable:
                return (f"MaxUnavailablePerWorkload: {len(unavailable)} of {ref.get('name')} unavailable "
                        f"(max {max_unavailable})")
        return None
