"""The descheduling loop (reference descheduler §1.3 "Run loop"): rounds of every profile's plugins."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from koordinator.apis.selectors import LabelSelector, label_selector_from_dict
from koordinator_roles.descheduler.framework.interfaces import Obj
from koordinator_roles.descheduler.framework.limiter import EvictionLimiter
from koordinator_roles.descheduler.framework.runtime import Framework

log = logging.getLogger("koordinator.descheduler")

TOO_FEW_NODES = ("the cluster size is 0 or 1 meaning eviction causes service disruption or degradation, "
                 "so the descheduling round is skipped")


def node_ready(node: Obj) -> bool:
    """Ready unless a ``Ready`` condition says otherwise (unschedulable nodes count as ready)."""
    for condition in (node.get("status") or {}).get("conditions") or []:
        if condition.get("type") == "Ready" and condition.get("status") != "True":
            return False
    return True


def _selector(selector: dict | None) -> LabelSelector | None:
    return None if selector is None else label_selector_from_dict(selector)


class Descheduler:
    """Runs a round every ``interval`` seconds (non-sliding: the period starts with the round); one
    round only with interval 0.

    A round: the ready nodes matching the global ``nodeSelector`` (from the Node informer's cache, or
    from the API server when the cache has none); with fewer than two, the round is skipped. Then the
    limiter is reset (its limits are per round), every profile's deschedule plugins run on the nodes
    matching the profile's selector, then every profile's balance plugins. The first profile with an
    error ends the round (its plugins still all ran). ``interval``, ``node_selector`` and ``dry_run``
    may change between rounds (:meth:`update`).
    """

    def __init__(self, frameworks: dict[str, Framework], limiter: EvictionLimiter, *,
                 list_cached_nodes: Callable[[], list[Obj]], list_nodes: Callable[[str], list[Obj]] | None = None,
                 interval: float = 0.0, node_selector: dict | None = None) -> None:
        self.frameworks = frameworks
        self.limiter = limiter
        self._list_cached_nodes = list_cached_nodes
        self._list_nodes = list_nodes
        self.interval = interval
        self._node_selector = _selector(node_selector)
        self._profile_selectors = {name: _selector(f.profile.node_selector) for name, f in frameworks.items()}
        self._lock = threading.Lock()  # one round at a time
        #: Rounds run so far, and the errors of the last one (for tests and tools).
        self.rounds = 0
        self.last_errors: list[str] = []

    def update(self, *, interval: float, node_selector: dict | None, dry_run: bool,
               profile_selectors: dict[str, dict | None] | None = None) -> None:
        """Settings of a reloaded configuration, used from the next round on (``profile_selectors``:
        profile name -> its nodeSelector)."""
        self.interval = interval
        self._node_selector = _selector(node_selector)
        for name, selector in (profile_selectors or {}).items():
            if name in self.frameworks:
                self._profile_selectors[name] = _selector(selector)
                self.frameworks[name].handle.node_selector = selector
        for fwk in self.frameworks.values():
            fwk.evictor.dry_run = dry_run
            fwk.handle.dry_run = dry_run

    def run(self, stop: threading.Event) -> None:
        """The runnable: rounds until ``stop`` (only one round with interval 0)."""
        while not stop.is_set():
            started = time.monotonic()
            self.run_once()
            if self.interval <= 0:
                log.info("deschedulingInterval is 0: one descheduling round done, the loop stops")
                return
            stop.wait(max(0.0, started + self.interval - time.monotonic()))

    def run_once(self) -> list[str]:
        """One round; returns its errors (also logged)."""
        with self._lock:
            try:
                errors = self._round()
            except Exception as err:  # noqa: BLE001 — the API unreachable: this round fails, the loop goes on
                log.debug("descheduling round failed", exc_info=True)
                errors = [f"{type(err).__name__}: {err}"]
            self.last_errors = errors
            self.rounds += 1
        for error in errors:
            log.error("descheduling round: %s", error)
        return errors

    def ready_nodes(self) -> list[Obj]:
        """The nodes of this round: matching the global selector, and ready."""
        selector = self._node_selector
        nodes = [n for n in self._list_cached_nodes() if selector is None or selector.matches(_labels(n))]
        if not nodes and self._list_nodes is not None:
            nodes = self._list_nodes(str(selector) if selector is not None else "")
        return [n for n in nodes if node_ready(n)]

    def _round(self) -> list[str]:
        nodes = self.ready_nodes()
        if len(nodes) <= 1:
            return [TOO_FEW_NODES]
        self.limiter.reset()
        for point in ("deschedule", "balance"):
            for name, fwk in self.frameworks.items():
                selector = self._profile_selectors.get(name)
                mine = nodes if selector is None else [n for n in nodes if selector.matches(_labels(n))]
                run = fwk.run_deschedule_plugins if point == "deschedule" else fwk.run_balance_plugins
                errors = run(mine)
                if errors:
                    return [f"profile {name}: {point}: {e}" for e in errors]
        log.debug("descheduling round done evicted=%d", self.limiter.total_evicted())
        return []


def _labels(obj: Obj) -> dict[str, Any]:
    return (obj.get("metadata") or {}).get("labels") or {}
