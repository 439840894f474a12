"""DefaultBinder: binds the pod to the chosen node through the API (``pods/binding``), with the annotations
DefaultPreBind left for the Binding."""

from __future__ import annotations

from typing import Any

from koordinator_roles.scheduler.framework.interfaces import BindPlugin
from koordinator_roles.scheduler.framework.status import BINDING_ANNOTATIONS, CycleState, Status
from koordinator_roles.scheduler.framework.types import PodInfo

NAME = "DefaultBinder"


class DefaultBinder(BindPlugin):
    """POSTs a Binding; an API failure is an Error status carrying the error text."""

    name = NAME

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        uid = (pod.pod.get("metadata") or {}).get("uid")
        try:
            self.handle.client.bind(pod.name, pod.namespace, node_name, uid=uid,
                                    annotations=state.read(BINDING_ANNOTATIONS))
        except Exception as e:  # noqa: BLE001 - any API failure fails the binding cycle
            return Status.error(str(e) or type(e).__name__, NAME)
        return None


def new(args: dict | None, handle: Any) -> DefaultBinder:
    """Registry factory (the plugin has no args)."""
    return DefaultBinder(handle)
