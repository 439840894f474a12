"""``DefaultEvictor``: upstream sigs.k8s.io/descheduler's evictability filters, evicting through policy/v1.

Filter (reference descheduler §1.9; a pod is evictable when every check passes):

* the annotation ``descheduler.alpha.kubernetes.io/evict`` makes any pod evictable, skipping the rest;
* mirror pods (``kubernetes.io/config.mirror``) and static pods (``kubernetes.io/config.source`` file/http)
  never are, nor terminating pods (``deletionTimestamp``);
* a pod without ownerReferences only when ``evictFailedBarePods`` and it has failed;
* DaemonSet pods only with ``evictDaemonSetPods``;
* without ``evictSystemCriticalPods``: no pod of priority >= 2000000000, nor of priority >= the
  ``priorityThreshold`` (a value, or a PriorityClass name resolved at construction);
* pods with emptyDir/hostPath volumes only with ``evictLocalStoragePods``; with ``ignorePvcPods`` none
  with a PersistentVolumeClaim;
* with ``labelSelector``, only pods it matches;
* with ``minReplicas`` > 1, only pods whose (single) owner has at least that many pods in the Pod cache
  (counted by the owner's UID);
* with ``minPodAge``, only pods started (``status.startTime``, as upstream) at least that long ago;
* with ``ignorePodsWithoutPDB``, only pods some PodDisruptionBudget of their namespace selects.

PreEvictionFilter: with ``nodeFit``, the pod must fit a ready node other than its own (node selector and
required affinity, NoSchedule taints, requests, unschedulable: the framework's ``nodefit``) among those
``nodeSelector`` (a label selector string, e.g. ``pool=a,zone!=b``) matches.
Pods, nodes and PodDisruptionBudgets are read from the handle's informers (asked for at construction).

Evict POSTs a policy/v1 Eviction (a PodDisruptionBudget's refusal is a 429, reported with its text).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from koordinator.apis.goduration import format_go_duration, parse_go_duration
from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict, parse_label_selector
from koordinator.apis.timestamps import parse_time
from koordinator.runtime.errors import ApiError, NotFound, TooManyRequests
from koordinator_roles.descheduler.framework.interfaces import EvictOptions, EvictPlugin, FilterPlugin, Obj
from koordinator_roles.descheduler.framework.nodefit import NOT_FIT_MESSAGE, fits_any_other_ready_node

NAME = "DefaultEvictor"
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SOURCE_ANNOTATION = "kubernetes.io/config.source"
SYSTEM_CRITICAL_PRIORITY = 2000000000
#: The Pod informer index of pods by owner UID (upstream's "metadata.ownerReferences" indexer, for minReplicas).
OWNER_UID_INDEX = "metadata.ownerReferences"

log = logging.getLogger("koordinator.descheduler")

#: The boolean args and their attributes (spelled out: "PDB" does not snake-case letter by letter).
_BOOL_ARGS = {"evictLocalStoragePods": "evict_local_storage_pods", "evictDaemonSetPods": "evict_daemon_set_pods",
              "evictSystemCriticalPods": "evict_system_critical_pods", "ignorePvcPods": "ignore_pvc_pods",
              "evictFailedBarePods": "evict_failed_bare_pods", "nodeFit": "node_fit",
              "ignorePodsWithoutPDB": "ignore_pods_without_pdb"}
_OTHER_ARGS = ("labelSelector", "priorityThreshold", "nodeSelector", "minReplicas", "minPodAge")


class EvictionError(Exception):
    """An eviction the API server refused; the text says why (the evictor proxy puts it in the Event)."""


@dataclass
class DefaultEvictorArgs:
    """Upstream DefaultEvictorArgs; all default to false/unset (``min_pod_age`` in seconds)."""

    evict_local_storage_pods: bool = False
    evict_daemon_set_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    evict_failed_bare_pods: bool = False
    label_selector: dict | None = None
    priority_threshold: dict | None = None
    node_fit: bool = False
    node_selector: str = ""
    min_replicas: int = 0
    min_pod_age: float | None = None
    ignore_pods_without_pdb: bool = False

    @classmethod
    def parse(cls, args: dict | None) -> "DefaultEvictorArgs":
        """Check and convert the args; ValueError naming the field and the value."""
        args = dict(args or {})
        args.pop("apiVersion", None)
        args.pop("kind", None)
        out = cls()
        for key, value in args.items():
            if key in _BOOL_ARGS:
                if not isinstance(value, bool):
                    raise ValueError(f"{key}: Invalid value: {value!r}: must be true or false")
                setattr(out, _BOOL_ARGS[key], value)
            elif key == "labelSelector":
                if value is not None:
                    try:
                        label_selector_from_dict(value)
                    except (SelectorError, AttributeError) as err:
                        raise ValueError(f"labelSelector: Invalid value: {value!r}: {err}") from None
                out.label_selector = value
            elif key == "priorityThreshold":
                out.priority_threshold = _priority_threshold(value)
            elif key == "nodeSelector":
                out.node_selector = _node_selector(value)
            elif key == "minReplicas":
                out.min_replicas = _min_replicas(value)
            elif key == "minPodAge":
                out.min_pod_age = _min_pod_age(value)
            else:
                known = ", ".join((*_BOOL_ARGS, *_OTHER_ARGS))
                raise ValueError(f"{key}: unknown field of DefaultEvictorArgs (known: {known})")
        if out.priority_threshold and out.evict_system_critical_pods:
            log.warning("DefaultEvictor: priorityThreshold is ignored with evictSystemCriticalPods")
        if out.min_replicas == 1:
            log.info("DefaultEvictor: minReplicas must be greater than 1 to check for min pods during eviction; "
                     "it is ignored")
        return out


def _priority_threshold(value: Any) -> dict | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"name", "value"}:
        raise ValueError(f"priorityThreshold: Invalid value: {value!r}: want {{name: CLASS}} or {{value: N}}")
    if value.get("name") and value.get("value") is not None:
        raise ValueError("priorityThreshold: Invalid value: only one of priorityThreshold.name and "
                         "priorityThreshold.value can be set")
    if value.get("value") is not None and (isinstance(value["value"], bool) or not isinstance(value["value"], int)):
        raise ValueError(f"priorityThreshold.value: Invalid value: {value['value']!r}: must be an integer")
    return value if (value.get("name") or value.get("value") is not None) else None


def _node_selector(value: Any) -> str:
    if value is None or value == "":
        return ""
    if not isinstance(value, str):
        raise ValueError(f"nodeSelector: Invalid value: {value!r}: must be a label selector string like \"a=b,c!=d\"")
    try:
        parse_label_selector(value)
    except SelectorError as err:
        raise ValueError(f"nodeSelector: Invalid value: {value!r}: {err}") from None
    return value


def _min_replicas(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"minReplicas: Invalid value: {value!r}: must be an integer")
    if value < 0:
        raise ValueError(f"minReplicas: Invalid value: {value}: must be greater than or equal to 0")
    return value


def _min_pod_age(value: Any) -> float | None:
    if value is None:
        return None
    bad = f"minPodAge: Invalid value: {value!r}: must be a duration string like \"5m\""
    if not isinstance(value, str):
        raise ValueError(bad)
    try:
        ns = parse_go_duration(value)
    except ValueError:
        raise ValueError(bad) from None
    if ns < 0:
        raise ValueError(f"minPodAge: Invalid value: {value!r}: must be greater than or equal to 0")
    return ns / 1e9


def owner_uids(pod: Mapping[str, Any]) -> list[str]:
    """Index function: the UIDs of the pod's owners (upstream's ``metadata.ownerReferences`` pod index)."""
    return [r["uid"] for r in (pod.get("metadata") or {}).get("ownerReferences") or () if r.get("uid")]


def covered_by_pdb(pod: Mapping[str, Any], pdbs: Iterable[Mapping[str, Any]]) -> bool:
    """``IsPodCoveredByPDB``: some PodDisruptionBudget of the pod's namespace selects its labels (a budget with
    no selector selects nothing; one with an invalid selector is skipped)."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    for pdb in pdbs:
        if (pdb.get("metadata") or {}).get("namespace") != meta.get("namespace"):
            continue
        try:
            selector = label_selector_from_dict((pdb.get("spec") or {}).get("selector"))
        except (SelectorError, AttributeError, TypeError):
            continue
        if selector.matches(labels):
            return True
    return False


def old_enough(pod: Mapping[str, Any], min_age: float, now: float) -> bool:
    """Upstream's minPodAge check: the pod has started (``status.startTime``) at least ``min_age`` seconds ago."""
    started = parse_time((pod.get("status") or {}).get("startTime"))
    return started is not None and now - started >= min_age


def _has_local_storage(pod: Obj) -> bool:
    return any("emptyDir" in v or "hostPath" in v for v in (pod.get("spec") or {}).get("volumes") or [])


def _has_pvc(pod: Obj) -> bool:
    return any("persistentVolumeClaim" in v for v in (pod.get("spec") or {}).get("volumes") or [])


class DefaultEvictor(EvictPlugin, FilterPlugin):
    """Filter with upstream's checks; evict with the Eviction API."""

    name = NAME

    def __init__(self, args: DefaultEvictorArgs, handle: Any, threshold: int | None,
                 clock: Callable[[], float] = time.time) -> None:
        self.args = args
        self.handle = handle
        self.threshold = threshold
        self.clock = clock
        self._selector = label_selector_from_dict(args.label_selector) if args.label_selector else None
        self._node_selector: LabelSelector | None = (parse_label_selector(args.node_selector)
                                                     if args.node_selector else None)
        self._pods = self._nodes = self._pdbs = None
        # Ask for the informers now, so the factory syncs their caches before the first round.
        informers = getattr(handle, "informers", None)
        if args.node_fit or args.min_replicas > 1 or args.ignore_pods_without_pdb:
            if informers is None:
                raise ValueError("DefaultEvictor: nodeFit, minReplicas and ignorePodsWithoutPDB read the informer "
                                 "caches, and this handle has no informers")
        if args.node_fit:
            self._nodes = informers.informer("Node")
            if getattr(handle, "pod_index", None) is None:
                informers.informer("Pod")
        if args.min_replicas > 1:
            self._pods = informers.informer("Pod")
            try:
                self._pods.add_indexer(OWNER_UID_INDEX, owner_uids)
            except ValueError:
                pass  # another DefaultEvictor of this process added it already
        if args.ignore_pods_without_pdb:
            self._pdbs = informers.informer("PodDisruptionBudget")

    def why_not(self, pod: Obj) -> str | None:
        """Why ``pod`` may not be evicted, or None if it may."""
        meta = pod.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        if EVICT_ANNOTATION in annotations:
            return None
        if MIRROR_ANNOTATION in annotations:
            return "pod is a mirror pod"
        if annotations.get(SOURCE_ANNOTATION) in ("file", "http"):
            return "pod is a static pod"
        if meta.get("deletionTimestamp"):
            return "pod is terminating"
        owners = meta.get("ownerReferences") or []
        if not owners and not (self.args.evict_failed_bare_pods and (pod.get("status") or {}).get("phase") == "Failed"):
            return "pod does not have any ownerRefs"
        if not self.args.evict_daemon_set_pods and any(o.get("kind") == "DaemonSet" for o in owners):
            return "pod is related to daemonset and descheduler is not configured with evictDaemonSetPods"
        if not self.args.evict_system_critical_pods:
            priority = (pod.get("spec") or {}).get("priority") or 0
            if priority >= SYSTEM_CRITICAL_PRIORITY:
                return "pod has system critical priority"
            if self.threshold is not None and priority >= self.threshold:
                return "pod has higher priority than specified priority class threshold"
        if not self.args.evict_local_storage_pods and _has_local_storage(pod):
            return "pod has local storage and descheduler is not configured with evictLocalStoragePods"
        if self.args.ignore_pvc_pods and _has_pvc(pod):
            return "pod has a PVC and descheduler is configured to ignore PVC pods"
        if self._selector is not None and not self._selector.matches(meta.get("labels") or {}):
            return "pod labels do not match the labelSelector filter in the policy parameter"
        if self._pods is not None and len(owners) == 1:
            # Upstream skips pods with several owners here (which owner's replicas would count is unclear).
            count = len(self._pods.store.by_index(OWNER_UID_INDEX, owners[0].get("uid") or ""))
            if count < self.args.min_replicas:
                return f"owner has {count} replicas which is less than minReplicas of {self.args.min_replicas}"
        if self.args.min_pod_age is not None and not old_enough(pod, self.args.min_pod_age, self.clock()):
            # Upstream's wording, "seconds" after a Go duration included.
            age = format_go_duration(round(self.args.min_pod_age * 1e9))
            return f"pod age is not older than MinPodAge: {age} seconds"
        if self._pdbs is not None and not covered_by_pdb(
                pod, self._pdbs.store.by_index("namespace", meta.get("namespace") or "")):
            return "no PodDisruptionBudget found for pod"
        return None

    def why_not_now(self, pod: Obj) -> str | None:
        """Why ``pod`` may not be evicted just now (PreEvictionFilter: ``nodeFit``), or None if it may."""
        if self._nodes is None:
            return None
        if not fits_any_other_ready_node(pod, self.handle, self._nodes.store.list(), self._node_selector):
            return NOT_FIT_MESSAGE
        return None

    def filter(self, pod: Obj) -> bool:
        reason = self.why_not(pod)
        if reason is not None:
            meta = pod.get("metadata") or {}
            log.debug("pod is not evictable pod=%s/%s reason=%s", meta.get("namespace"), meta.get("name"), reason)
        return reason is None

    def pre_eviction_filter(self, pod: Obj) -> bool:
        reason = self.why_not_now(pod)
        if reason is not None:
            meta = pod.get("metadata") or {}
            log.info("%s pod=%s/%s", reason, meta.get("namespace"), meta.get("name"))
        return reason is None

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        meta = pod.get("metadata") or {}
        name, namespace = meta.get("name", ""), meta.get("namespace", "")
        try:
            self.handle.client.evict(name, namespace, delete_options=options.delete_options)
        except TooManyRequests as err:
            raise EvictionError(f"error when evicting pod (ignoring) \"{namespace}/{name}\": {err}") from None
        except NotFound:
            raise EvictionError(f"pod not found when evicting \"{namespace}/{name}\"") from None
        except ApiError as err:
            raise EvictionError(f"error when evicting pod \"{namespace}/{name}\": {err}") from None
        return True


def eviction_supported(client: Any) -> bool:
    """Whether the API server serves pods/eviction (discovery of the core group)."""
    resources = client.request("GET", "/api/v1").get("resources") or []
    return any(r.get("name") == "pods/eviction" for r in resources)


def new(args: dict, handle: Any) -> DefaultEvictor:
    """The plugin factory (args: upstream DefaultEvictorArgs)."""
    parsed = DefaultEvictorArgs.parse(args)
    threshold = None
    pt = parsed.priority_threshold
    if pt is not None and not parsed.evict_system_critical_pods:
        if pt.get("value") is not None:
            threshold = int(pt["value"])
        elif handle.client is not None:
            try:
                threshold = int(handle.client.get("PriorityClass", pt["name"])["value"])
            except NotFound:
                raise ValueError(f"priorityThreshold.name: Not found: PriorityClass {pt['name']!r}") from None
    if handle.client is not None and not eviction_supported(handle.client):
        raise ValueError("the API server does not serve pods/eviction (policy/v1 Eviction), which DefaultEvictor "
                         "evicts with")
    return DefaultEvictor(parsed, handle, threshold)
