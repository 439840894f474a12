"""The metrics advisor: runs the collectors every round and stores their samples in the metric cache."""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from koordinator_roles.koordlet.metricsadvisor.beresource import BEResourceCollector
from koordinator_roles.koordlet.metricsadvisor.framework import Baselines, Collector, PodViews, Round, SharedState, WarnOncePerKey
from koordinator_roles.koordlet.metricsadvisor.hostapplication import HostApplicationCollector
from koordinator_roles.koordlet.metricsadvisor.nodeinfo import NodeInfoCollector
from koordinator_roles.koordlet.metricsadvisor.noderesource import NodeResourceCollector
from koordinator_roles.koordlet.metricsadvisor.podresource import PodResourceCollector, PodThrottledCollector
from koordinator_roles.koordlet.metricsadvisor.systemresource import SystemResourceCollector
from koordinator_roles.koordlet.system import procfs
from koordinator_roles.koordlet.system.cgroup import CgroupLayout
from koordinator_roles.koordlet.system.cgroupfs import CgroupReader
from koordinator_roles.koordlet.system.paths import HostPaths

if TYPE_CHECKING:  # pragma: no cover - typing only
    from koordinator_roles.koordlet.metriccache import MetricCache
    from koordinator_roles.koordlet.statesinformer import StatesInformer

log = logging.getLogger("koordinator.koordlet.metricsadvisor")

#: Baselines and "already warned" marks of things not seen for this many intervals are dropped.
EXPIRE_INTERVALS = 20


class MetricsAdvisor:
    """Collects node, pod, container, host-application and system usage every ``collect_interval``
    seconds and node facts every ``node_info_interval`` (reference A.4).

    Collectors, in round order: NodeInfo (its own interval), NodeResource, PodResource,
    PodThrottled, BEResource, HostApplication, SystemResource. A round never raises: bad host files are logged
    (warning once per pod or path, debug afterwards) and skipped; all samples of a round go into the
    cache in one ``insert``.
    """

    def __init__(self, paths: HostPaths, layout: CgroupLayout, cache: "MetricCache", states: "StatesInformer",
                 *, collect_interval: float = 1.0, node_info_interval: float = 60.0,
                 sys_outdated: float = 10.0, clock: Callable[[], float] = time.time,
                 on_round: Callable[[float], None] | None = None) -> None:
        if collect_interval <= 0:
            raise ValueError(f"invalid collect interval {collect_interval!r}: must be positive")
        self.paths = paths
        self.layout = layout
        self.cache = cache
        self.states = states
        self.collect_interval = collect_interval
        self.node_info_interval = node_info_interval
        self.clock = clock
        self.on_round = on_round  # gets each round's duration in seconds (the Prometheus histogram)
        ttl = collect_interval * EXPIRE_INTERVALS
        self._baselines: list[Baselines] = []

        def baselines() -> Baselines:
            b = Baselines(ttl)
            self._baselines.append(b)
            return b

        self._problems = WarnOncePerKey(log, ttl)
        self._state = SharedState()
        self._views = PodViews()
        self._reader = CgroupReader(layout, page_size=procfs.page_size())
        self.collectors: list[Collector] = [
            NodeInfoCollector(paths, cache, node_info_interval),
            NodeResourceCollector(paths, baselines()),
            PodResourceCollector(baselines()),
            PodThrottledCollector(baselines()),
            BEResourceCollector(layout, baselines()),
            HostApplicationCollector(layout, baselines()),
            SystemResourceCollector(sys_outdated),
        ]
        for c in self.collectors[1:]:
            c.interval = collect_interval
        self._next_due: dict[str, float] = {}
        self._lock = threading.Lock()       # one round at a time (run loop vs a direct call)
        self._rounds = 0
        self._last: dict[str, Any] = {}

    # -- rounds ------------------------------------------------------------------------------------

    def _due(self, collector: Collector, now: float) -> bool:
        """Collectors at the collect interval run every round; slower ones when their time came."""
        if collector.interval <= self.collect_interval:
            return True
        due = self._next_due.get(collector.name)
        # (a clock stepped back by more than an interval must not postpone the collector for that long)
        if due is not None and now < due and due - now <= collector.interval:
            return False
        self._next_due[collector.name] = now + collector.interval
        return True

    def collect_once(self) -> None:
        """One round of every enabled collector; never raises."""
        with self._lock:
            now = self.clock()
            self._reader.begin_round()
            ctx = Round(now, self._reader, self._state, self._problems, self.states, self._views)
            for collector in self.collectors:
                try:
                    if collector.enabled() and self._due(collector, now):
                        collector.collect(ctx)
                except Exception as err:  # noqa: BLE001 - a collector bug must not stop the others
                    self._problems.report(("collector", collector.name, type(err).__name__), now,
                                          "collector %s failed: %s", collector.name, err, exc_info=True)
            if ctx.samples:
                try:
                    self.cache.insert(ctx.samples)
                except Exception as err:  # noqa: BLE001 - keep collecting; the cache logs its own state
                    self._problems.report(("insert", type(err).__name__), now,
                                          "storing %d samples failed: %s", len(ctx.samples), err)
            for b in self._baselines:
                b.prune(now)
            self._problems.prune(now)
            self._reader.begin_round()      # do not keep file contents between rounds
            self._last = ctx.last
            self._rounds += 1
            log.debug("round at %.3f: %d samples", now, len(ctx.samples))

    def run(self, stop: threading.Event) -> None:
        """The collection loop for a runnable: a round every ``collect_interval`` until ``stop`` is set."""
        log.info("metrics advisor started: every %.3gs (node info every %.3gs), cgroup v%d %s under %s",
                 self.collect_interval, self.node_info_interval, self.layout.version, self.layout.driver,
                 self.layout.cgroup_root)
        while not stop.is_set():
            started = time.monotonic()
            self.collect_once()
            took = time.monotonic() - started
            if self.on_round is not None:
                self.on_round(took)
            stop.wait(max(self.collect_interval - took, 0.0))

    # -- status ------------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """True once every collector has run (the first round is done)."""
        return self._rounds > 0

    def last_round(self) -> dict:
        """Latest values for Prometheus: {"timestamp", "node", "numa", "pods": {uid: {cpu, memory,
        throttled}}, "containers": {id: {...}}, "host_applications": {name: {...}}, "system",
        "system_numa"} (keys only where the round produced values). Do not mutate."""
        return self._last
