"""The collector framework: the per-round context, shared state, counter baselines, problem logging.

A collector is an object with ``name``, ``interval`` (seconds) and ``collect(ctx)``; ``enabled()``
says whether it runs at all. Collectors run one after another in a round (node info, node, pods,
throttling, host applications, system) and append samples to the round's :class:`Round`, which the
advisor inserts into the metric cache in one call. Values one collector hands to a later one
(node usage for system usage, CPU→NUMA for NUMA usage ...) go through :class:`SharedState`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Hashable, Sequence

from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metriccache.model import Sample
from koordinator_roles.koordlet.system.cgroupfs import CgroupReader

if TYPE_CHECKING:  # pragma: no cover - typing only
    from koordinator_roles.koordlet.statesinformer import PodMeta


class Collector:
    """Base of every collector (subclasses set ``name`` and implement :meth:`collect`)."""

    name = ""
    #: seconds between runs; collectors at the advisor's collect interval run every round.
    interval = 1.0

    def enabled(self) -> bool:
        """Whether the collector runs at all (feature gates and flags decide for the optional ones)."""
        return True

    def collect(self, ctx: "Round") -> None:
        """One run: read, compute, ``ctx.add(...)`` samples, update ``ctx.state``. Must not raise for
        bad host files (log through ``ctx.problems``); anything else is caught and logged by the advisor."""
        raise NotImplementedError


@dataclass
class Usage:
    """CPU (cores) and memory (bytes) of something at a time, plus NUMA splits when known."""

    timestamp: float
    cpu: float
    memory: float
    numa_cpu: dict[int, float] | None = None          # NUMA id → cores (node only)
    numa_memory: dict[int, float] | None = None       # NUMA id → bytes


@dataclass
class SharedState:
    """What collectors tell each other across rounds (reference: koordlet's collector shared state)."""

    #: CPU id → NUMA node id, from the node-info collector.
    cpu_to_numa: dict[int, int] = field(default_factory=dict)
    #: NUMA node ids; ``numa_from_sysfs`` False means the single fallback node 0 (no NUMA dirs).
    numa_nodes: list[int] = field(default_factory=list)
    numa_from_sysfs: bool = False
    node: Usage | None = None
    pods: Usage | None = None
    host_apps: Usage | None = None


class Baselines:
    """Last value and time per key (pod UID, container ID, "node" ...) for counters turned into rates.

    ``swap`` stores the new value and returns the previous ``(value, timestamp)`` (None the first
    time: that sample only records the baseline). Keys not updated for ``ttl`` seconds are dropped
    by :meth:`prune`, so pods that are gone do not accumulate.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._last: dict[Hashable, tuple[Any, float]] = {}

    def swap(self, key: Hashable, value: Any, now: float) -> tuple[Any, float] | None:
        prev = self._last.get(key)
        self._last[key] = (value, now)
        return prev

    def forget(self, key: Hashable) -> None:
        self._last.pop(key, None)

    def prune(self, now: float) -> int:
        """Drop keys last updated more than ``ttl`` ago; returns how many."""
        limit = now - self.ttl
        stale = [k for k, (_, ts) in self._last.items() if ts < limit]
        for k in stale:
            del self._last[k]
        return len(stale)

    def __len__(self) -> int:
        return len(self._last)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._last


class WarnOncePerKey:
    """Logs a problem at warning level the first time its key (a pod UID, a path ...) shows one, at
    debug level after that; keys quiet for ``ttl`` seconds are forgotten (bounded memory)."""

    def __init__(self, logger: logging.Logger, ttl: float) -> None:
        self.log = logger
        self.ttl = ttl
        self._seen: dict[Hashable, float] = {}

    def report(self, key: Hashable, now: float, message: str, *args: Any, exc_info: bool = False) -> None:
        if key in self._seen:
            self.log.debug(message, *args, exc_info=exc_info)
        else:
            self.log.warning(message, *args, exc_info=exc_info)
        self._seen[key] = now

    def prune(self, now: float) -> None:
        limit = now - self.ttl
        for k in [k for k, ts in self._seen.items() if ts < limit]:
            del self._seen[k]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._seen


class PodView:
    """What the collectors use of one PodMeta, computed once per PodMeta object: UID, cgroup dirs,
    container list and the label dicts of its samples (shared by every sample of that pod)."""

    __slots__ = ("meta", "uid", "display", "cgroup_dir", "labels", "containers", "error")

    def __init__(self, meta: "PodMeta") -> None:
        self.meta = meta
        self.uid: str = meta.uid
        self.display = f"{meta.namespace}/{meta.name} ({self.uid})"
        self.cgroup_dir: str = meta.cgroup_dir
        self.labels = {kinds.LABEL_POD_UID: self.uid}
        #: (name, container ID, rel cgroup dir, sample labels) per container with an ID
        self.containers: list[tuple[str, str, str, dict[str, str]]] = []
        #: why the containers could not be listed (a container the layout cannot place), else None
        self.error: ValueError | None = None
        try:
            self.containers = [(name, cid, rel, {kinds.LABEL_CONTAINER_ID: cid})
                               for name, cid, rel in meta.containers()]
        except ValueError as err:
            self.error = err


class PodViews:
    """Pod views reused across rounds while the states informer hands out the same PodMeta objects
    (it replaces them when a pod changes); views of pods no longer listed are dropped each round."""

    def __init__(self) -> None:
        self._by_id: dict[int, PodView] = {}

    def refresh(self, pods: Sequence["PodMeta"]) -> list[PodView]:
        current: dict[int, PodView] = {}
        out = []
        cache = self._by_id
        for meta in pods:
            view = cache.get(id(meta))
            if view is None or view.meta is not meta:   # the view holds meta, so its id is not reused
                view = PodView(meta)
            current[id(meta)] = view
            out.append(view)
        self._by_id = current
        return out


class Round:
    """One collection round: its time, the samples gathered, per-round file memo, shared state."""

    __slots__ = ("now", "samples", "cgroups", "state", "problems", "states", "last", "_pods", "_views")

    def __init__(self, now: float, cgroups: CgroupReader, state: SharedState, problems: WarnOncePerKey,
                 states: Any, views: PodViews | None = None) -> None:
        self.now = now
        self.samples: list[Sample] = []
        self.cgroups = cgroups
        self.state = state
        self.problems = problems
        self.states = states
        #: latest values of this round for :meth:`MetricsAdvisor.last_round`.
        self.last: dict[str, Any] = {"timestamp": now}
        self._pods: list[PodView] | None = None
        self._views = views if views is not None else PodViews()

    def add(self, metric: str, value: float, labels: dict[str, str] | None = None) -> None:
        """A sample at the round's time (``labels`` may be shared between samples: it is not copied)."""
        self.samples.append(Sample(metric, float(value), self.now, labels if labels is not None else {}))

    def pods(self) -> list[PodView]:
        """The states informer's pods (as :class:`PodView`), fetched once per round."""
        if self._pods is None:
            self._pods = self._views.refresh(self.states.pods())
        return self._pods
