"""Would a pod fit a node? The descheduler's ``NodeFit`` checks, used before evicting a pod so it is not
evicted when no other node could take it.

A node fits a pod when it is schedulable, matches the pod's nodeSelector and required node affinity,
has no NoSchedule taint the pod does not tolerate, and has room for the pod's requests (allocatable
minus what the node's non-terminated pods request, the pod count included).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from koordinator.apis.extension import pod_requests, resource_list
from koordinator.apis.selectors import node_selector_term_matches
from koordinator.apis.taints import NO_SCHEDULE, find_untolerated_taint
from koordinator_roles.descheduler.framework.interfaces import Handle, Obj

from .podutil import meta, node_name, spec, status

OBJECT_NAME_FIELD = "metadata.name"
TERMINAL_PHASES = ("Succeeded", "Failed")


def node_labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    """The node's labels (empty when none)."""
    return meta(node).get("labels") or {}


def required_node_affinity(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's ``requiredDuringSchedulingIgnoredDuringExecution`` node selector, or None."""
    return (((spec(pod).get("affinity") or {}).get("nodeAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution"))


def preferred_node_affinity(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod's ``preferredDuringSchedulingIgnoredDuringExecution`` node affinity terms."""
    return list((((spec(pod).get("affinity") or {}).get("nodeAffinity") or {})
                 .get("preferredDuringSchedulingIgnoredDuringExecution")) or ())


def matches_node_selector(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """``PodMatchNodeSelector``: the nodeSelector and, when set, any one required node selector term."""
    labels = node_labels(node)
    for k, v in (spec(pod).get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = required_node_affinity(pod)
    if required is None:
        return True
    fields = {OBJECT_NAME_FIELD: node_name(node)}
    return any(node_selector_term_matches(t, labels, fields) for t in required.get("nodeSelectorTerms") or ())


def preferred_score(pod: Mapping[str, Any], node: Mapping[str, Any]) -> int:
    """Sum of the weights of the pod's preferred node affinity terms the node matches."""
    labels = node_labels(node)
    fields = {OBJECT_NAME_FIELD: node_name(node)}
    return sum(int(t.get("weight") or 0) for t in preferred_node_affinity(pod)
               if node_selector_term_matches(t.get("preference"), labels, fields))


def tolerates_no_schedule_taints(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The pod tolerates every NoSchedule taint of the node."""
    return find_untolerated_taint(spec(node).get("taints"), spec(pod).get("tolerations"), (NO_SCHEDULE,)) is None


def is_unschedulable(node: Mapping[str, Any]) -> bool:
    """``spec.unschedulable`` (cordoned)."""
    return bool(spec(node).get("unschedulable"))


class NodeFit:
    """NodeFit over one round's nodes; each node's requested resources are summed once, on first use."""

    def __init__(self, handle: Handle, nodes: Iterable[Obj]) -> None:
        self.handle = handle
        self.nodes = list(nodes)
        self._requested: dict[str, tuple[dict[str, int], int]] = {}

    def _usage(self, name: str) -> tuple[dict[str, int], int]:
        usage = self._requested.get(name)
        if usage is None:
            total: dict[str, int] = {}
            count = 0
            for p in self.handle.pods_on_node(name):
                if status(p).get("phase") in TERMINAL_PHASES:
                    continue
                count += 1
                for r, v in pod_requests(p).items():
                    total[r] = total.get(r, 0) + v
            usage = self._requested[name] = (total, count)
        return usage

    def fits_resources(self, pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
        """Requests and pod count fit the node's allocatable minus what its pods request."""
        allocatable = resource_list(status(node).get("allocatable"))
        used, count = self._usage(node_name(node))
        if "pods" in allocatable and count + 1 > allocatable["pods"] // 1000:
            return False
        for r, want in pod_requests(pod).items():
            if want <= 0:
                continue
            if allocatable.get(r, 0) - used.get(r, 0) < want:
                return False
        return True

    def fits(self, pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
        """Every NodeFit check of ``pod`` against ``node``."""
        return (not is_unschedulable(node) and matches_node_selector(pod, node)
                and tolerates_no_schedule_taints(pod, node) and self.fits_resources(pod, node))

    def fits_other_node(self, pod: Mapping[str, Any]) -> bool:
        """``PodFitsAnyOtherNode``: some node other than the pod's own fits it."""
        current = spec(pod).get("nodeName")
        return any(self.fits(pod, n) for n in self.nodes if node_name(n) != current)
