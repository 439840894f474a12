"""The concrete :class:`~.interfaces.Handle` given to plugin factories."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.types import PodInfo


class _NoNominator:
    """Nominations when no queue exists (unit tests of a single plugin)."""

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return []

    def nominated_node_names(self) -> list[str]:
        return []


@dataclass
class PluginHandle:
    """What plugins reach: the snapshot of the current cycle, the API, informers and the profile's framework.

    Unit tests build one with just a snapshot: ``PluginHandle(snapshot_source=lambda: snap)``.
    """

    snapshot_source: Callable[[], Snapshot] = Snapshot
    client: Any = None
    informers: Any = None
    event_recorder: Any = None
    framework: Any = None
    nominator: Any = field(default_factory=_NoNominator)
    scheduler_name: str = "koord-scheduler"
    parallelism: int = 16
    forget_handlers: list[Callable[[PodInfo, str], None]] = field(default_factory=list)

    def snapshot(self) -> Snapshot:
        return self.snapshot_source()

    def add_forget_handler(self, fn: Callable[[PodInfo, str], None]) -> None:
        self.forget_handlers.append(fn)
