"""Would a pod fit a node? The descheduler's ``NodeFit`` checks, shared by the plugins (upstream wrappers,
LowNodeLoad, DefaultEvictor's and MigrationController's ``nodeFit``) so a pod is not evicted when no other
node could take it.

A node fits a pod when it is schedulable, matches the pod's nodeSelector and required node affinity,
has no NoSchedule taint the pod does not tolerate, and has room for the pod's requests (allocatable
minus what the node's non-terminated pods request, the pod count included).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Protocol

from koordinator.apis.extension import pod_requests, resource_list
from koordinator.apis.selectors import LabelSelector, node_selector_term_matches
from koordinator.apis.taints import NO_SCHEDULE, find_untolerated_taint

Obj = dict[str, Any]

OBJECT_NAME_FIELD = "metadata.name"
TERMINAL_PHASES = ("Succeeded", "Failed")
#: Why an evictor's ``nodeFit`` keeps a pod (upstream's wording).
NOT_FIT_MESSAGE = ("pod does not fit on any other node because of nodeSelector(s), Taint(s), or nodes marked as "
                   "unschedulable")


class PodsOnNode(Protocol):
    """What :class:`NodeFit` reads a node's pods from (a plugin handle, or the MigrationController's state)."""

    def pods_on_node(self, node_name: str) -> list[Obj]: ...


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("spec") or {}


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("status") or {}


def _name(obj: Mapping[str, Any]) -> str:
    return _meta(obj).get("name", "")


def node_labels(node: Mapping[str, Any]) -> Mapping[str, str]:
    """The node's labels (empty when none)."""
    return _meta(node).get("labels") or {}


def node_ready(node: Mapping[str, Any]) -> bool:
    """Ready unless a ``Ready`` condition says otherwise (the descheduler's notion of a ready node)."""
    for condition in _status(node).get("conditions") or ():
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return False
    return True


def ready_nodes(nodes: Iterable[Obj], selector: LabelSelector | None = None) -> list[Obj]:
    """``ReadyNodes``: the ready nodes among ``nodes`` that ``selector`` (None: every node) matches."""
    return [n for n in nodes if node_ready(n) and (selector is None or selector.matches(node_labels(n)))]


def required_node_affinity(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The pod's ``requiredDuringSchedulingIgnoredDuringExecution`` node selector, or None."""
    return (((_spec(pod).get("affinity") or {}).get("nodeAffinity") or {})
            .get("requiredDuringSchedulingIgnoredDuringExecution"))


def preferred_node_affinity(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod's ``preferredDuringSchedulingIgnoredDuringExecution`` node affinity terms."""
    return list((((_spec(pod).get("affinity") or {}).get("nodeAffinity") or {})
                 .get("preferredDuringSchedulingIgnoredDuringExecution")) or ())


def matches_node_labels(pod: Mapping[str, Any], labels: Mapping[str, str], name: str) -> bool:
    """``PodMatchNodeSelector`` against a node given by its labels and name: the nodeSelector and, when set,
    any one required node selector term."""
    for k, v in (_spec(pod).get("nodeSelector") or {}).items():
        if labels.get(k) != v:
            return False
    required = required_node_affinity(pod)
    if required is None:
        return True
    fields = {OBJECT_NAME_FIELD: name}
    return any(node_selector_term_matches(t, labels, fields) for t in required.get("nodeSelectorTerms") or ())


def matches_node_selector(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """``PodMatchNodeSelector``: the nodeSelector and, when set, any one required node selector term."""
    return matches_node_labels(pod, node_labels(node), _name(node))


def preferred_score(pod: Mapping[str, Any], node: Mapping[str, Any]) -> int:
    """Sum of the weights of the pod's preferred node affinity terms the node matches."""
    labels = node_labels(node)
    fields = {OBJECT_NAME_FIELD: _name(node)}
    return sum(int(t.get("weight") or 0) for t in preferred_node_affinity(pod)
               if node_selector_term_matches(t.get("preference"), labels, fields))


def tolerates_no_schedule_taints(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """The pod tolerates every NoSchedule taint of the node."""
    return find_untolerated_taint(_spec(node).get("taints"), _spec(pod).get("tolerations"), (NO_SCHEDULE,)) is None


def is_unschedulable(node: Mapping[str, Any]) -> bool:
    """``spec.unschedulable`` (cordoned)."""
    return bool(_spec(node).get("unschedulable"))


class NodeFit:
    """NodeFit over one round's nodes; each node's requested resources are summed once, on first use.

    ``source`` gives each node's pods (``pods_on_node(name)``): a plugin handle or any object with that method.
    """

    def __init__(self, source: PodsOnNode, nodes: Iterable[Obj]) -> None:
        self.handle = source
        self.nodes = list(nodes)
        self._requested: dict[str, tuple[dict[str, int], int]] = {}

    def _usage(self, name: str) -> tuple[dict[str, int], int]:
        usage = self._requested.get(name)
        if usage is None:
            total: dict[str, int] = {}
            count = 0
            for p in self.handle.pods_on_node(name):
                if _status(p).get("phase") in TERMINAL_PHASES:
                    continue
                count += 1
                for r, v in pod_requests(p).items():
                    total[r] = total.get(r, 0) + v
            usage = self._requested[name] = (total, count)
        return usage

    def fits_resources(self, pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
        """Requests and pod count fit the node's allocatable minus what its pods request."""
        allocatable = resource_list(_status(node).get("allocatable"))
        used, count = self._usage(_name(node))
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
        current = _spec(pod).get("nodeName")
        return any(self.fits(pod, n) for n in self.nodes if _name(n) != current)


def fits_any_other_ready_node(pod: Mapping[str, Any], source: PodsOnNode, nodes: Iterable[Obj],
                              selector: LabelSelector | None = None) -> bool:
    """The evictors' ``nodeFit``: ``pod`` fits some ready node other than its own among ``nodes`` that
    ``selector`` matches (each call sums the candidate nodes' requests afresh: the cache moves between calls)."""
    return NodeFit(source, ready_nodes(nodes, selector)).fits_other_node(pod)
