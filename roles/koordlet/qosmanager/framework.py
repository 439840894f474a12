"""The QoS manager's framework (reference A.7): strategies, each on its own interval, as runtime runnables.

A strategy is one enforcement loop (CPUSuppress, CPUEvict, MemoryEvict, CPUBurst ...). To add one:

1. subclass :class:`Strategy`: set ``name`` (Koordinator's strategy name), implement :meth:`Strategy.enabled`
   (the feature gate(s) and the interval, checked once at start, as Koordinator's ``Enabled()``) and
   :meth:`Strategy.run_once` (one round: read the inputs from ``ctx``, act through ``ctx.executor``);
2. give the constructor the signature ``Cls(ctx: QOSContext)`` and read its interval from
   ``ctx.options`` (:class:`QOSOptions`);
3. add the class to :data:`koordinator_roles.koordlet.qosmanager.STRATEGIES`.

The NodeSLO switch (``resourceUsedThresholdWithBE.enable``) is *not* part of :meth:`Strategy.enabled`:
it changes at run time and a strategy switched off by it may have to undo what it did (CPUSuppress
restores the BE cpuset and quota), so each strategy reads it every round (:func:`threshold_enabled`).

:class:`QOSManager` adds one runnable per enabled strategy (``qos-<name>``); the Runtime starts and
stops the threads. A round that raises is logged (once per distinct message, then at debug) and
counted in ``koordlet_qos_strategy_rounds_total{strategy,result}``; the loop goes on.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

log = logging.getLogger("koordinator.koordlet.qosmanager")


@dataclass
class QOSOptions:
    """The QoS manager's flags (reference A.2.5), in seconds; Koordinator's defaults."""

    cpu_suppress_interval: float = 1.0
    cpu_evict_interval: float = 1.0
    memory_evict_interval: float = 1.0
    memory_evict_cool_time: float = 4.0
    cpu_evict_cool_time: float = 20.0
    reconcile_interval: float = 1.0
    only_evict_by_api: bool = False
    #: ``--collect-res-used-interval``: usage queries look back 2× this (and 2× the strategy interval).
    collect_interval: float = 1.0


@dataclass
class QOSContext:
    """Everything a strategy may use; built once by the koordlet's ``register``.

    - ``states``: the :class:`~koordinator_roles.koordlet.statesinformer.StatesInformer` (node, pods,
      merged NodeSLO spec, host applications);
    - ``cache``: the :class:`~koordinator_roles.koordlet.metriccache.MetricCache` (usage series);
    - ``executor``: the :class:`~koordinator_roles.koordlet.resourceexecutor.ResourceExecutor`: every
      cgroup write goes through it (validated, cached, audited, counted);
    - ``layout``: the :class:`~koordinator_roles.koordlet.system.cgroup.CgroupLayout`;
    - ``gates``: the resolved feature gates (name → bool);
    - ``options``: :class:`QOSOptions`;
    - ``client``: the runtime's API client (eviction), ``events``: a callable returning the event
      recorder (created on first use), both None in unit tests that do not need them;
    - ``metrics``: a prometheus ``CollectorRegistry`` or None;
    - ``clock``: wall-clock seconds (metric cache timestamps are unix seconds); tests replace it.
    """

    states: Any
    cache: Any
    executor: Any
    layout: Any
    gates: Mapping[str, bool]
    options: QOSOptions = field(default_factory=QOSOptions)
    node_name: str = ""
    client: Any = None
    events: Callable[[], Any] | None = None
    metrics: Any = None
    clock: Callable[[], float] = time.time
    #: ``--proc-root`` and ``--sys-root``: sysctls (SystemConfig) and resctrl (``<sys-root>/fs/resctrl``).
    proc_root: str = "/proc"
    sys_root: str = "/sys"

    def __post_init__(self) -> None:
        # koordlet_qos_strategy_rounds_total{strategy,result}: one counter for all strategies.
        self._rounds = None
        if self.metrics is not None:
            from prometheus_client import Counter

            self._rounds = Counter("koordlet_qos_strategy_rounds", "QoS manager strategy rounds by result",
                                   ["strategy", "result"], registry=self.metrics)

    def count_round(self, strategy: str, result: str) -> None:
        """Count one round of ``strategy`` (``ok`` or ``error``)."""
        if self._rounds is not None:
            self._rounds.labels(strategy=strategy, result=result).inc()


class Strategy:
    """One QoS strategy. Subclasses set :attr:`name` and implement :meth:`enabled` and :meth:`run_once`."""

    #: Koordinator's strategy name (logs, metrics, the runnable ``qos-<name>``).
    name: str = ""

    def __init__(self, ctx: QOSContext) -> None:
        self.ctx = ctx

    @property
    def interval(self) -> float:
        """Seconds between rounds; subclasses return their flag from ``ctx.options``."""
        raise NotImplementedError

    def enabled(self) -> bool:
        """Whether the strategy runs at all (its feature gate(s) and a positive interval); read once at start."""
        raise NotImplementedError

    def run_once(self) -> None:
        """One round. May raise: the loop logs, counts and goes on at the next interval."""
        raise NotImplementedError

    def run(self, stop: threading.Event) -> None:
        """Rounds until ``stop`` is set: the first at once, then every :attr:`interval` (Koordinator's
        ``wait.Until``). A runtime runnable; never call it from another thread of your own."""
        last_error = None
        while not stop.is_set():
            try:
                self.run_once()
                self.ctx.count_round(self.name, "ok")
                last_error = None
            except Exception as err:  # noqa: BLE001 - one bad round must not end the loop
                self.ctx.count_round(self.name, "error")
                msg = f"{type(err).__name__}: {err}"
                # A lasting failure would log every second: log it once, then at debug until it changes.
                if msg != last_error:
                    log.warning("qos strategy %s: round failed: %s", self.name, msg, exc_info=True)
                else:
                    log.debug("qos strategy %s: round failed again: %s", self.name, msg)
                last_error = msg
            if stop.wait(self.interval):
                return


def threshold_enabled(node_slo: Mapping[str, Any] | None) -> bool:
    """NodeSLO ``resourceUsedThresholdWithBE.enable`` (reference A.2.8): anything but ``true`` is off."""
    if not node_slo:
        return False
    threshold = node_slo.get("resourceUsedThresholdWithBE")
    return isinstance(threshold, Mapping) and threshold.get("enable") is True


class QOSManager:
    """The strategies of one koordlet; :meth:`register` puts the enabled ones on a Runtime."""

    def __init__(self, ctx: QOSContext, strategies: list[Strategy]) -> None:
        self.ctx = ctx
        self.strategies = list(strategies)

    def get(self, name: str) -> Strategy | None:
        """The strategy called ``name`` (tests, tools)."""
        return next((s for s in self.strategies if s.name == name), None)

    def enabled(self) -> list[Strategy]:
        """The strategies that will run (gate on, interval positive)."""
        return [s for s in self.strategies if s.enabled()]

    def _after_sync(self, strategy: Strategy) -> Callable[[threading.Event], None]:
        """``strategy.run`` once the states informer has synced (a partial pod list would mislead it)."""
        def run(stop: threading.Event) -> None:
            has_synced = getattr(self.ctx.states, "has_synced", None)
            while has_synced is not None and not has_synced():
                if stop.wait(0.1):
                    return
            strategy.run(stop)
        return run

    def register(self, runtime: Any) -> list[str]:
        """Add one runnable per enabled strategy; the names of those added."""
        names = []
        for strategy in self.strategies:
            if not strategy.enabled():
                log.info("qos strategy %s disabled (feature gate off or interval 0)", strategy.name)
                continue
            runtime.add_runnable(f"qos-{strategy.name}", self._after_sync(strategy))
            names.append(strategy.name)
        log.info("qos manager strategies running: %s", ",".join(names) or "none")
        return names

