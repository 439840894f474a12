"""LoadAwareScheduling: keep nodes under usage thresholds (NodeMetric + estimates) and prefer idle nodes.

The plugin keeps a :class:`~.rows.NodeRows` aligned with the snapshot's rows. It is rebuilt when
the snapshot layout (or the args) change; otherwise only rows whose node object changed, or whose
node the assign cache marked dirty, are rewritten, so a cycle costs a few vector operations.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

import numpy as np

from koordinator.apis import extension
from koordinator_roles.scheduler.framework.interfaces import (BatchFilterResult, ClusterEvent, EnqueueExtensions, Failure,
                                                              FilterPlugin, ForgetPodHandler, PreFilterPlugin, PreFilterResult,
                                                              ReservePlugin, ScorePlugin)
from koordinator_roles.scheduler.framework.status import CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.loadaware.args import LoadAwareArgs, parse_args
from koordinator_roles.scheduler.plugins.loadaware.assign_cache import PodAssignCache
from koordinator_roles.scheduler.plugins.loadaware.estimator import DefaultEstimator
from koordinator_roles.scheduler.plugins.loadaware.rows import NodeRows, PodContext, filter_rows, score_rows

NAME = "LoadAwareScheduling"
_STATE_KEY = "PreFilter" + NAME


class LoadAwareScheduling(PreFilterPlugin, FilterPlugin, ScorePlugin, ReservePlugin, EnqueueExtensions,
                          ForgetPodHandler):
    """Koordinator's LoadAwareScheduling plugin (reference §2.1)."""

    name = NAME

    def __init__(self, args: dict | None, handle: Any, now: Callable[[], float] | None = None) -> None:
        self.handle = handle
        self.now = now or time.time
        self._args_lock = threading.Lock()
        self.args: LoadAwareArgs = parse_args(args)
        self.estimator = DefaultEstimator(self.args)
        self._generation = 0
        self.cache = PodAssignCache(self.args, self.estimator, now=lambda: self.now())
        self._rows: NodeRows | None = None
        self._rows_key: tuple | None = None
        self._rows_snapshot: Any = None
        self._rows_node_version = 0
        if handle is not None:
            add_forget = getattr(handle, "add_forget_handler", None)
            if add_forget is not None:
                add_forget(self.forget_pod)
            informers = getattr(handle, "informers", None)
            if informers is not None:
                informers.informer("Pod").add_handler(on_add=self.cache.on_pod_add,
                                                      on_update=self.cache.on_pod_update,
                                                      on_delete=self.cache.on_pod_delete)
                informers.informer("NodeMetric").add_handler(on_add=self.cache.on_node_metric_add,
                                                             on_update=self.cache.on_node_metric_update,
                                                             on_delete=self.cache.on_node_metric_delete)

    # -- configuration -------------------------------------------------------------------------------

    def update_args(self, args: dict | None) -> None:
        """Hot reload: validate and swap args (ValueError leaves the old ones), keeping the assign cache."""
        parsed = parse_args(args)
        with self._args_lock:
            self.args = parsed
            self.estimator = DefaultEstimator(parsed)
            self.cache.reconfigure(parsed, self.estimator)
            self._generation += 1
            self._rows_key = None

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("NodeMetric", "Add"),
                ClusterEvent("NodeMetric", "Update"), ClusterEvent("NodeMetric", "Delete")]

    # -- the incoming pod ------------------------------------------------------------------------------

    def _pod_context(self, pod: PodInfo) -> PodContext:
        gen, cache, estimator = self._generation, self.cache, self.estimator

        def compute(p: dict) -> PodContext:
            pc = extension.priority_class_with_default(p)
            try:
                estimate = cache.to_vec(estimator.estimate_pod(p, pc, pod.requests))
            except Exception:  # an estimation error: Filter adds nothing, Score gives 0
                estimate = None
            prod = pc == extension.PRIORITY_PROD
            daemonset = "DaemonSet" in pod.owner_kinds
            return PodContext(estimate, prod, daemonset)

        return pod.cached(f"{NAME}/{gen}", compute)

    def _context(self, state: CycleState, pod: PodInfo) -> PodContext:
        ctx = state.read(_STATE_KEY)
        if ctx is None:
            ctx = self._pod_context(pod)
        return ctx

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Any) -> tuple[PreFilterResult | None,
                                                                                    Status | None]:
        state.write(_STATE_KEY, self._pod_context(pod))
        return None, None

    # -- rows ------------------------------------------------------------------------------------------

    def _sync(self, snapshot: Any) -> NodeRows:
        """The row arrays for ``snapshot``, refreshed as cheaply as its changes allow."""
        # The snapshot itself is part of the key (held, so its id cannot be reused by another one).
        key = (snapshot.layout_version, self._generation)
        infos = snapshot.node_infos
        rows = self._rows
        if rows is None or key != self._rows_key or snapshot is not self._rows_snapshot:
            rows = NodeRows(len(infos), self.args)
            for i, ni in enumerate(infos):
                rows.fill_node(i, ni.name, ni.node, ni.allocatable, self.estimator)
            with self.cache.lock:
                self.cache.take_dirty()
                for i in range(rows.n):
                    rows.fill_cache(i, self.cache)
            rows.derive()
            self._rows, self._rows_key, self._rows_snapshot = rows, key, snapshot
            self._rows_node_version = snapshot.node_version
            return rows
        # Only rows with new node objects (the NODE_OBJECTS feed): pods come through the assign cache.
        changed = snapshot.nodes_changed_since(self._rows_node_version)
        self._rows_node_version = snapshot.node_version
        for i in changed:
            ni = infos[i]
            rows.fill_node(i, ni.name, ni.node, ni.allocatable, self.estimator)
        with self.cache.lock:
            all_dirty, dirty = self.cache.take_dirty()
            if all_dirty:
                for i in range(rows.n):
                    rows.fill_cache(i, self.cache)
                rows.derive()
                return rows
            index = snapshot.index
            todo = set(changed)
            for name in dirty:
                i = index.get(name)
                if i is not None:
                    todo.add(i)
            for i in todo:
                rows.fill_cache(i, self.cache)
            for i in todo:
                rows.derive_row(i)
        return rows

    def _single_row(self, node: NodeInfo) -> NodeRows:
        rows = NodeRows(1, self.args)
        rows.fill_node(0, node.name, node.node, node.allocatable, self.estimator)
        with self.cache.lock:
            rows.fill_cache(0, self.cache)
        rows.derive_row(0)
        return rows

    # -- Filter -----------------------------------------------------------------------------------------

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        ctx = self._context(state, pod)
        if ctx.daemonset:
            return BatchFilterResult.all_pass(len(rows))
        node_rows = self._sync(snapshot)
        passed, failures = filter_rows(node_rows, np.asarray(rows, dtype=np.int64), ctx, self.now())
        if passed is None:
            return BatchFilterResult.all_pass(len(rows))
        return BatchFilterResult(passed, [Failure(code, reason, mask) for code, reason, mask in failures])

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        ctx = self._context(state, pod)
        if ctx.daemonset:
            return None
        passed, failures = filter_rows(self._single_row(node), np.zeros(1, dtype=np.int64), ctx, self.now())
        if passed is None or passed[0]:
            return None
        code, reason, _ = failures[0]
        return Status(code, reason, plugin=NAME)

    # -- Score ------------------------------------------------------------------------------------------

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        ctx = self._context(state, pod)
        node_rows = self._sync(snapshot)
        return score_rows(node_rows, np.asarray(rows, dtype=np.int64), ctx, self.now())

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        ctx = self._context(state, pod)
        return int(score_rows(self._single_row(node), np.zeros(1, dtype=np.int64), ctx, self.now())[0])

    # -- Reserve ----------------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        ctx = self._context(state, pod)
        self.cache.assign(node_name, pod.pod, estimate=ctx.estimate, prod=ctx.prod)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.cache.unassign(node_name, pod.pod)

    def forget_pod(self, pod: PodInfo, node_name: str) -> None:
        self.cache.unassign(node_name, pod.pod)


def new(args: dict | None, handle: Any, *, now: Callable[[], float] | None = None) -> LoadAwareScheduling:
    """Registry factory: ``new(args, handle)``; ``now`` (epoch seconds) is for tests."""
    return LoadAwareScheduling(args, handle, now=now)
