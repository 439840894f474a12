"""SchedulingGates: a pod with ``spec.schedulingGates`` stays out of the active queue until they are removed."""

from __future__ import annotations

from typing import Any, Mapping

from koordinator_roles.scheduler.framework.interfaces import ClusterEvent, EnqueueExtensions, PreEnqueuePlugin
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE_AND_UNRESOLVABLE, Status
from koordinator_roles.scheduler.framework.types import PodInfo, pod_key

NAME = "SchedulingGates"


def _gate_names(pod: Mapping[str, Any]) -> list[str]:
    return [g.get("name", "") for g in (pod.get("spec") or {}).get("schedulingGates") or ()]


class SchedulingGates(PreEnqueuePlugin, EnqueueExtensions):
    """PreEnqueue gate: "waiting for scheduling gates: [a b]" while any gate is left."""

    name = NAME

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        gates = _gate_names(pod.pod)
        if not gates:
            return None
        # Go's %v of a []string: "[a b]".
        return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, f"waiting for scheduling gates: [{' '.join(gates)}]")

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Update", _gates_removed_hint)]


def _identity(pod: Mapping[str, Any]) -> str:
    return (pod.get("metadata") or {}).get("uid") or pod_key(pod)


def _gates_removed_hint(pod: dict, old: Any, new: Any) -> bool:
    """Only the gated pod's own update, once its gates are all gone, can let it in."""
    return new is not None and _identity(new) == _identity(pod) and not _gate_names(new)


def new(args: dict | None, handle: Any) -> SchedulingGates:
    """Registry factory (the plugin has no args)."""
    return SchedulingGates()
