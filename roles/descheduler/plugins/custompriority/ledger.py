"""The room left on the target nodes of one round, as CustomPriority plans where evicted pods could go.

A node's room is its allocatable minus the requests of its non-terminated pods (``pods`` counts 1000 milli
per pod, as allocatable's ``pods`` does); each planned placement takes the pod's requests off it, so later
pods (and, for DrainNode, later source nodes) see the room earlier evictions will use. DrainNode plans a node
on a :meth:`Ledger.fork` and commits only the placements of pods really evicted.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping

from koordinator.apis.extension import pod_requests, resource_list
from koordinator_roles.descheduler.framework.interfaces import Obj
from koordinator_roles.descheduler.framework.nodefit import (TERMINAL_PHASES, is_unschedulable,
                                                            matches_node_selector, tolerates_no_schedule_taints)

PODS = "pods"
_ONE_POD = 1000  # milli-units
_UNLIMITED = 1 << 62


def node_name(obj: Mapping[str, Any]) -> str:
    """``metadata.name``."""
    return (obj.get("metadata") or {}).get("name", "")


def demand(pod: Mapping[str, Any]) -> dict[str, int]:
    """What a pod takes from a node's room: its requests (milli-units) and one pod."""
    out = {r: v for r, v in pod_requests(pod).items() if v > 0}
    out[PODS] = _ONE_POD
    return out


class Ledger:
    """Remaining requests per target node, computed on first use from ``pods_of(node_name)``."""

    def __init__(self, pods_of: Callable[[str], list[Obj]], node_fit: bool) -> None:
        self.pods_of = pods_of
        self.node_fit = node_fit
        self._remaining: dict[str, dict[str, int]] = {}

    def remaining(self, node: Obj) -> dict[str, int]:
        """The node's room (allocatable − requests of its non-terminated pods − planned placements)."""
        name = node_name(node)
        room = self._remaining.get(name)
        if room is None:
            room = dict(resource_list((node.get("status") or {}).get("allocatable")))
            room.setdefault(PODS, _UNLIMITED)  # no pod-count limit given: any number of pods
            for pod in self.pods_of(name):
                if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                    continue
                for r, v in demand(pod).items():
                    room[r] = room.get(r, 0) - v
            self._remaining[name] = room
        return room

    def fits(self, pod: Obj, node: Obj) -> bool:
        """The pod's requests fit the node's room; with ``node_fit`` also NodeFit's other checks
        (schedulable, nodeSelector/required affinity, NoSchedule taints)."""
        if self.node_fit and not (not is_unschedulable(node) and matches_node_selector(pod, node)
                                  and tolerates_no_schedule_taints(pod, node)):
            return False
        room = self.remaining(node)
        # A resource the node does not list (an extended resource it lacks) has no room.
        return all(room.get(r, 0) >= v for r, v in demand(pod).items())

    def first_fit(self, pod: Obj, targets: Iterable[Obj]) -> Obj | None:
        """The first target the pod fits, or None."""
        return next((t for t in targets if self.fits(pod, t)), None)

    def place(self, pod: Obj, node: Obj) -> None:
        """Take the pod's requests off the node's room."""
        room = self.remaining(node)
        for r, v in demand(pod).items():
            room[r] = room.get(r, 0) - v

    def fork(self) -> Ledger:
        """A copy to plan on; placements there do not touch this ledger."""
        copy = Ledger(self.pods_of, self.node_fit)
        copy._remaining = {name: dict(room) for name, room in self._remaining.items()}
        return copy
