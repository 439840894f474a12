"""Pod helpers the upstream plugins share: selection (namespaces, labelSelector, the evictor's Filter),
ordering, owners, ages and the guarded eviction call."""

from __future__ import annotations

import time
from typing import Any, Callable, Iterable, Mapping

from koordinator.apis.selectors import LabelSelector
from koordinator.apis.timestamps import parse_time
from koordinator_roles.descheduler.framework.interfaces import EvictOptions, Handle, Obj

from .args import Namespaces


def meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``metadata`` (empty when absent)."""
    return obj.get("metadata") or {}


def spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``spec`` (empty when absent)."""
    return obj.get("spec") or {}


def status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """``status`` (empty when absent)."""
    return obj.get("status") or {}


def node_name(obj: Mapping[str, Any]) -> str:
    """``metadata.name``."""
    return meta(obj).get("name", "")


class PodSelection:
    """Which pods a plugin looks at: its namespaces/labelSelector args AND the evictor's ``filter``.

    Upstream builds the same predicate with ``podutil.NewOptions().WithFilter(evictor.Filter)
    .WithNamespaces(..).WithoutNamespaces(..).WithLabelSelector(..)``; the cheap checks go first so the
    evictor's filter chain only sees pods the plugin could act on.
    """

    def __init__(self, handle: Handle, namespaces: Namespaces = Namespaces(),
                 label_selector: LabelSelector | None = None) -> None:
        self.handle = handle
        self.namespaces = namespaces
        self.label_selector = label_selector

    def in_scope(self, pod: Mapping[str, Any]) -> bool:
        """Namespaces and labelSelector only (pods counted but never evicted by this plugin fail it too)."""
        m = meta(pod)
        if not self.namespaces.allows(m.get("namespace", "")):
            return False
        return self.label_selector is None or self.label_selector.matches(m.get("labels") or {})

    def __call__(self, pod: Obj) -> bool:
        return self.in_scope(pod) and self.handle.evictor.filter(pod)

    def pods_on(self, node: str, extra: Callable[[Obj], bool] | None = None) -> list[Obj]:
        """The node's pods passing this selection and, when given, ``extra`` (checked first: it is cheaper)."""
        if extra is None:
            return self.handle.pods_on_node(node, self)
        return self.handle.pods_on_node(node, lambda p: extra(p) and self(p))


def watch_pods(handle: Handle) -> None:
    """Ask for the Pod informer at construction so the factory syncs it before the first round."""
    if getattr(handle, "informers", None) is not None:
        handle.informers.informer("Pod")


def evict(handle: Handle, pod: Obj, plugin: str, reason: str) -> bool:
    """PreEvictionFilter, then ``evictor.evict`` with the plugin's name and reason; True when evicted."""
    evictor = handle.evictor
    if not evictor.pre_eviction_filter(pod):
        return False
    return evictor.evict(pod, EvictOptions(plugin_name=plugin, reason=reason))


def owner_refs(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod's owner references."""
    return list(meta(pod).get("ownerReferences") or ())


def has_excluded_owner(pod: Mapping[str, Any], kinds: Iterable[str]) -> bool:
    """Some owner reference has one of ``kinds``."""
    kinds = set(kinds)
    return bool(kinds) and any(ref.get("kind") in kinds for ref in owner_refs(pod))


def creation_time(pod: Mapping[str, Any]) -> float:
    """Creation time in epoch seconds (a pod without one counts as created now)."""
    t = parse_time(meta(pod).get("creationTimestamp"))
    return time.time() if t is None else t


def pod_priority(pod: Mapping[str, Any]) -> int:
    """``spec.priority`` (0 when unset)."""
    p = spec(pod).get("priority")
    return p if isinstance(p, int) else 0


def sort_oldest_first(pods: list[Obj]) -> None:
    """``SortPodsBasedOnAge``: oldest first, so limits cut the youngest."""
    pods.sort(key=creation_time)


def sort_priority_low_to_high(pods: list[Obj]) -> None:
    """``SortPodsBasedOnPriorityLowToHigh``: pods without a priority first, then ascending priority."""
    pods.sort(key=lambda p: (spec(p).get("priority") is not None, pod_priority(p)))


def container_statuses(pod: Mapping[str, Any], including_init: bool) -> list[Mapping[str, Any]]:
    """Container statuses, init containers' appended when asked."""
    st = status(pod)
    out = list(st.get("containerStatuses") or ())
    if including_init:
        out += list(st.get("initContainerStatuses") or ())
    return out


def waiting_reasons(pod: Mapping[str, Any], including_init: bool = False) -> set[str]:
    """Reasons of the containers waiting (``CrashLoopBackOff``, ``ContainerCreating`` ...)."""
    return {((cs.get("state") or {}).get("waiting") or {}).get("reason", "")
            for cs in container_statuses(pod, including_init)} - {""}
