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
* with ``labelSelector``, only pods it matches.

Evict POSTs a policy/v1 Eviction (a PodDisruptionBudget's refusal is a 429, reported with its text).
Left out: ``nodeFit``, ``minReplicas``, ``minPodAge`` and ``ignorePodsWithoutPDB`` (upstream args this
build does not implement: setting them is an error naming them).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from koordinator.apis.selectors import SelectorError, label_selector_from_dict
from koordinator.runtime.errors import ApiError, NotFound, TooManyRequests
from koordinator_roles.descheduler.framework.interfaces import EvictOptions, EvictPlugin, FilterPlugin, Obj

NAME = "DefaultEvictor"
EVICT_ANNOTATION = "descheduler.alpha.kubernetes.io/evict"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
SOURCE_ANNOTATION = "kubernetes.io/config.source"
SYSTEM_CRITICAL_PRIORITY = 2000000000

log = logging.getLogger("koordinator.descheduler")

_BOOL_ARGS = ("evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods", "ignorePvcPods",
              "evictFailedBarePods")
_NOT_IMPLEMENTED = ("nodeFit", "minReplicas", "minPodAge", "ignorePodsWithoutPDB")


class EvictionError(Exception):
    """An eviction the API server refused; the text says why (the evictor proxy puts it in the Event)."""


@dataclass
class DefaultEvictorArgs:
    """Upstream DefaultEvictorArgs (the subset this build implements); all default to false/unset."""

    evict_local_storage_pods: bool = False
    evict_daemon_set_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    evict_failed_bare_pods: bool = False
    label_selector: dict | None = None
    priority_threshold: dict | None = None

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
                setattr(out, _snake(key), value)
            elif key == "labelSelector":
                if value is not None:
                    try:
                        label_selector_from_dict(value)
                    except (SelectorError, AttributeError) as err:
                        raise ValueError(f"labelSelector: Invalid value: {value!r}: {err}") from None
                out.label_selector = value
            elif key == "priorityThreshold":
                out.priority_threshold = _priority_threshold(value)
            elif key in _NOT_IMPLEMENTED:
                raise ValueError(f"{key}: Unsupported value: {value!r}: not implemented in this build")
            else:
                known = ", ".join((*_BOOL_ARGS, "labelSelector", "priorityThreshold"))
                raise ValueError(f"{key}: unknown field of DefaultEvictorArgs (known: {known})")
        if out.priority_threshold and out.evict_system_critical_pods:
            log.warning("DefaultEvictor: priorityThreshold is ignored with evictSystemCriticalPods")
        return out


def _snake(key: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in key)


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


def _has_local_storage(pod: Obj) -> bool:
    return any("emptyDir" in v or "hostPath" in v for v in (pod.get("spec") or {}).get("volumes") or [])


def _has_pvc(pod: Obj) -> bool:
    return any("persistentVolumeClaim" in v for v in (pod.get("spec") or {}).get("volumes") or [])


class DefaultEvictor(EvictPlugin, FilterPlugin):
    """Filter with upstream's checks; evict with the Eviction API."""

    name = NAME

    def __init__(self, args: DefaultEvictorArgs, handle: Any, threshold: int | None) -> None:
        self.args = args
        self.handle = handle
        self.threshold = threshold
        self._selector = label_selector_from_dict(args.label_selector) if args.label_selector else None

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
        return None

    def filter(self, pod: Obj) -> bool:
        reason = self.why_not(pod)
        if reason is not None:
            meta = pod.get("metadata") or {}
            log.debug("pod is not evictable pod=%s/%s reason=%s", meta.get("namespace"), meta.get("name"), reason)
        return reason is None

    def pre_eviction_filter(self, pod: Obj) -> bool:
        return True  # upstream checks nodeFit here, which this build does not implement

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
