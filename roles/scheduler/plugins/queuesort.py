"""PrioritySort: the queue pops higher ``spec.priority`` first, then the pod queued earliest (kube's QueueSort)."""

from __future__ import annotations

from typing import Any

from koordinator_roles.scheduler.framework.interfaces import QueueSortPlugin
from koordinator_roles.scheduler.framework.types import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort(QueueSortPlugin):
    """Orders the active queue by (priority descending, queue timestamp ascending)."""

    name = NAME

    def sort_key(self, qpi: QueuedPodInfo) -> tuple:
        return (-qpi.pod_info.priority, qpi.timestamp)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """kube's ``Less``: whether ``a`` pops before ``b``."""
        return self.sort_key(a) < self.sort_key(b)


def new(args: dict | None, handle: Any) -> PrioritySort:
    """Registry factory (the plugin has no args)."""
    return PrioritySort()
