"""Whether a pod could be scheduled onto a target node by its requests (the descheduler's ``NodeFit``).

Checked for a candidate pod against a low node: node selector and required node affinity, NoSchedule and
NoExecute taints, the node being schedulable, and requests fitting what the node's pods leave of its
allocatable (cpu, memory, pods and every resource the pod requests).
"""

from __future__ import annotations

from typing import Callable

from koordinator.apis import extension
from koordinator.apis.taints import find_untolerated_taint
from koordinator_roles.descheduler.framework.nodefit import matches_node_labels

from .usage import CPU, MEMORY, PODS, Amounts, Obj, amounts, milli

#: Pod requests are parsed once per pod and round.
RequestsOf = Callable[[Obj], Amounts]


class TargetNode:
    """What NodeFit needs of one target node, computed once per round."""

    __slots__ = ("name", "labels", "taints", "unschedulable", "free")

    def __init__(self, node: Obj, pods: list[Obj], requests_of: RequestsOf) -> None:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        self.name: str = meta.get("name", "")
        self.labels: dict[str, str] = meta.get("labels") or {}
        self.taints = [t for t in spec.get("taints") or () if t.get("effect") in ("NoSchedule", "NoExecute")]
        self.unschedulable = bool(spec.get("unschedulable"))
        free = amounts((node.get("status") or {}).get("allocatable"))
        for pod in pods:
            for r, v in requests_of(pod).items():
                free[r] = free.get(r, 0) - v
        free[PODS] = free.get(PODS, 0) - len(pods)
        self.free: Amounts = free


def pod_requests(pod: Obj) -> Amounts:
    """The pod's effective requests in the plugin's units (milli-cpu, whole units otherwise)."""
    spec = pod.get("spec") or {}
    if spec.get("initContainers") or spec.get("overhead"):
        total = extension.pod_requests(pod)
    else:
        # The common case, with memoized quantity parsing: the sum of the containers' requests.
        total = {}
        for c in spec.get("containers") or ():
            for r, q in (((c.get("resources") or {}).get("requests")) or {}).items():
                total[r] = total.get(r, 0) + milli(q)
    return {r: v if r == CPU else extension.value_of_milli(v) for r, v in total.items()}


def fits(pod: Obj, requests: Amounts, target: TargetNode) -> bool:
    """NodeFit of ``pod`` (requests given) on ``target``."""
    if target.unschedulable:
        return False
    if not matches_node_labels(pod, target.labels, target.name):
        return False
    spec = pod.get("spec") or {}
    if target.taints and find_untolerated_taint(target.taints, spec.get("tolerations")) is not None:
        return False
    free = target.free
    for r in (CPU, MEMORY):
        if requests.get(r, 0) > free.get(r, 0):
            return False
    for r, v in requests.items():
        if r not in (CPU, MEMORY) and v > free.get(r, 0):
            return False
    return free.get(PODS, 0) > 0


def requests_cache() -> Callable[[Obj], Amounts]:
    """A per-round memo of :func:`pod_requests` by object identity (pods are informer-cache objects)."""
    memo: dict[int, tuple[Obj, Amounts]] = {}

    def requests_of(pod: Obj) -> Amounts:
        hit = memo.get(id(pod))
        if hit is not None and hit[0] is pod:
            return hit[1]
        value = pod_requests(pod)
        memo[id(pod)] = (pod, value)
        return value
    return requests_of

