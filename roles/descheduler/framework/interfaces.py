"""The descheduler's plugin API (koord-descheduler's framework, reference descheduler §1.3).

A plugin is a class with ``name`` (its registry name) implementing one or more of the extension points
below, built by a factory ``factory(args: dict, handle: Handle) -> plugin`` from the registry
(``koordinator_roles.descheduler.plugins``). Per profile, every round, the framework calls every
enabled Deschedule plugin, then (after all profiles' deschedule plugins) every Balance plugin, with
the profile's ready nodes. Plugins never delete pods themselves: they ask ``handle.evictor`` — which
applies the enabled Filter plugins, the global eviction limiter and dry run, then calls the profile's
single Evict plugin (MigrationController: "evict" = create a PodMigrationJob; DefaultEvictor: the
policy/v1 Eviction API).

Objects are plain dicts (Node, Pod, NodeMetric ...) as the API server returns them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

Obj = dict[str, Any]


@dataclass
class Status:
    """A plugin's result: ``None`` from a plugin means success; a Status carries the error text."""

    error: str = ""

    @property
    def ok(self) -> bool:
        return not self.error


@dataclass
class EvictOptions:
    """Why and by whom a pod is evicted (filled from the calling plugin when empty), and the DeleteOptions."""

    plugin_name: str = ""
    reason: str = ""
    delete_options: Obj | None = None
    #: Extra labels/annotations an evict plugin may put on what it creates (PMJ ``koordinator.sh/evict-trigger`` ...).
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


class Evictor(Protocol):
    """What plugins evict through (the framework's evictor proxy, §1.3)."""

    def filter(self, pod: Obj) -> bool:
        """AND of every enabled Filter plugin's ``filter``: may this pod be evicted at all?"""

    def pre_eviction_filter(self, pod: Obj) -> bool:
        """AND of every enabled Filter plugin's ``pre_eviction_filter`` (checked just before evicting)."""

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        """Limiter check, then (unless dry run) the Evict plugin; True when the pod is (being) evicted."""

    def node_limit_exceeded(self, node_name: str) -> bool:
        """The global per-node eviction limit is reached for this round."""

    def namespace_limit_exceeded(self, namespace: str) -> bool: ...


class Handle(Protocol):
    """What plugin factories receive.

    - ``client``: :class:`koordinator.runtime.client.Client`; ``informers``: the shared informer factory
      (``informers.informer("Pod")`` ...; ask in the constructor so caches sync before the first round);
    - ``event_recorder``: ``event(obj, type, reason, message)``;
    - ``evictor``: :class:`Evictor`; ``dry_run``: the configuration's ``dryRun``;
    - ``pods_on_node(node_name, filter=None)``: the node's pods from the informer cache (index by
      ``spec.nodeName``), optionally filtered;
    - ``profile_name``; ``node_selector``: the profile's LabelSelector dict or None;
    - ``leader``: a callable returning whether this instance is the leader (controllers write only then).
    """

    client: Any
    informers: Any
    event_recorder: Any
    evictor: Evictor
    dry_run: bool
    profile_name: str
    node_selector: Obj | None

    def pods_on_node(self, node_name: str, filter: Callable[[Obj], bool] | None = None) -> list[Obj]: ...


class Plugin:
    """Base of every descheduler plugin."""

    name = ""


class DeschedulePlugin(Plugin):
    def deschedule(self, nodes: list[Obj]) -> Status | None:
        raise NotImplementedError


class BalancePlugin(Plugin):
    def balance(self, nodes: list[Obj]) -> Status | None:
        raise NotImplementedError


class EvictPlugin(Plugin):
    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        raise NotImplementedError


class FilterPlugin(Plugin):
    def filter(self, pod: Obj) -> bool:
        raise NotImplementedError

    def pre_eviction_filter(self, pod: Obj) -> bool:
        return True


class ControllerProvider:
    """Plugins with background work (MigrationController's reconciler, arbitrator, scavenger) return it here:
    objects with ``name`` and ``run(stop: threading.Event)``; the role runs them on the leader only."""

    def new_controllers(self) -> list[Any]:
        return []
