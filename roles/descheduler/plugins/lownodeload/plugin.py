"""LowNodeLoad: the balance plugin moving pods off nodes whose real usage stays high (reference §1.6).

Inputs: the profile's ready nodes (from the framework), NodeMetrics (a shared informer), the pods of each
node (``handle.pods_on_node``). Output: evictions through ``handle.evictor`` — with MigrationController as
the evict plugin, PodMigrationJobs.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable

from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, Handle, Status

from .args import LowNodeLoadArgs, parse_args
from .balance import RoundContext, run_pool
from .detector import DetectorCache
from .usage import Obj

NAME = "LowNodeLoad"

log = logging.getLogger(__name__)

_TERMINAL_PHASES = ("Succeeded", "Failed")


def _not_terminated(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") not in _TERMINAL_PHASES


class LowNodeLoad(BalancePlugin):
    """Balance plugin; ``clock`` (seconds since the epoch) is injectable for tests."""

    name = NAME

    def __init__(self, args: LowNodeLoadArgs, handle: Handle, clock: Callable[[], float] = time.time) -> None:
        self.args = args
        self.handle = handle
        self.clock = clock
        # Asked for now so the role's informer factory lists NodeMetrics before the first round.
        self._metrics = handle.informers.informer("NodeMetric") if handle.informers is not None else None
        self.node_detectors = DetectorCache(args.detector_cache_timeout_s, clock)
        self.prod_detectors = DetectorCache(args.detector_cache_timeout_s, clock)
        self._include = set(args.include_namespaces or ())
        self._exclude = set(args.exclude_namespaces or ())
        #: Pods evicted (or, in dry run, selected) in the last round, for logs and the benchmark.
        self.last_round_evictions = 0

    # -- filters ---------------------------------------------------------------------------------

    def pod_filter(self, pod: Obj) -> bool:
        """Namespaces, pod selectors, then the evictor's filters (MigrationController/DefaultEvictor)."""
        meta = pod.get("metadata") or {}
        ns = meta.get("namespace", "")
        if self._exclude and ns in self._exclude:
            return False
        if self._include and ns not in self._include:
            return False
        selectors = self.args.pod_selectors
        if selectors:
            labels = meta.get("labels") or {}
            if not any(s.selector.matches(labels) for s in selectors):
                return False
        return self.handle.evictor.filter(pod)

    def _metric_of(self, node_name: str) -> Obj | None:
        return self._metrics.store.get(node_name) if self._metrics is not None else None

    def _pods_of(self, node_name: str) -> list[Obj]:
        return self.handle.pods_on_node(node_name, _not_terminated)

    # -- the extension point ---------------------------------------------------------------------

    def balance(self, nodes: list[Obj]) -> Status | None:
        """Every node pool in order; a pool's errors are logged and the round goes on (always success)."""
        self.last_round_evictions = 0
        if self.args.paused:
            return None
        self.node_detectors.cleanup()
        self.prod_detectors.cleanup()
        ctx = RoundContext(
            plugin_name=NAME, evictor=self.handle.evictor, pod_filter=self.pod_filter, metric_of=self._metric_of,
            pods_of=self._pods_of, node_detectors=self.node_detectors, prod_detectors=self.prod_detectors,
            now=self.clock(), expiration_seconds=self.args.node_metric_expiration_seconds,
            number_of_nodes=self.args.number_of_nodes, node_fit=self.args.node_fit, dry_run=self.args.dry_run)
        processed: set[str] = set()
        for pool in self.args.node_pools:
            if pool.node_selector is None:
                # A pool without a selector sees every node, including those an earlier pool handled.
                pool_nodes = nodes
            else:
                pool_nodes = [n for n in nodes if _name(n) not in processed
                              and pool.node_selector.matches((n.get("metadata") or {}).get("labels"))]
            try:
                sources, evicted = run_pool(ctx, pool, pool_nodes)
            except Exception:  # one pool's failure must not stop the others (Koordinator logs and goes on)
                log.exception("LowNodeLoad: node pool %s failed", pool.name)
                continue
            self.last_round_evictions += evicted
            processed.update(sources)
        return None


def _name(node: Obj) -> str:
    return (node.get("metadata") or {}).get("name", "")


def new(args: dict[str, Any] | None, handle: Handle) -> LowNodeLoad:
    """Registry factory: parse and validate ``args`` (ValueError naming the field), build the plugin."""
    return LowNodeLoad(parse_args(args), handle)
