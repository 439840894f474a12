"""The concrete :class:`~.interfaces.Handle` plugin factories receive."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from koordinator_roles.descheduler.framework.interfaces import Evictor, Obj


@dataclass
class PluginHandle:
    """Client, informers, recorder and evictor of one profile.

    Unit tests build one with what they need, e.g. ``PluginHandle(informers=factory, evictor=evictor)``.
    ``pods_on_node`` reads the Pod informer's cache (the role's wiring may replace ``pod_index`` with an index
    by ``spec.nodeName``).
    """

    client: Any = None
    informers: Any = None
    event_recorder: Any = None
    evictor: Evictor | None = None
    dry_run: bool = False
    profile_name: str = "koord-descheduler"
    node_selector: Obj | None = None
    #: node name -> its pods; None: scan the Pod informer's store.
    pod_index: Callable[[str], list[Obj]] | None = None
    #: Whether this process leads (plugins' controllers write only then); None: always.
    leader: Callable[[], bool] | None = None
    #: The runtime's metrics (workqueue metrics of plugins' controllers) and the descheduler's own
    #: (``descheduler_pods_evicted``, for evict plugins that report their evictions themselves).
    metrics: Any = None
    descheduler_metrics: Any = None

    def pods_on_node(self, node_name: str, filter: Callable[[Obj], bool] | None = None) -> list[Obj]:
        if self.pod_index is not None:
            pods = self.pod_index(node_name)
        else:
            pods = [p for p in self.informers.informer("Pod").store.list()
                    if (p.get("spec") or {}).get("nodeName") == node_name]
        return [p for p in pods if filter is None or filter(p)]
