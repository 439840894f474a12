"""The manager's SLO controllers: one NodeMetric and one NodeSLO per Node, batch/mid resources on Nodes.

Each is a leader-gated :class:`~koordinator.runtime.controller.Controller` keyed by node name,
fed by shared informers and by :class:`~koordinator_roles.manager.sloconfig_cache.SLOConfigCache` (a change of
``slo-controller-config`` re-queues every node). The derivations are pure functions
(:mod:`koordinator_roles.manager.nodemetric`, :mod:`koordinator_roles.manager.nodeslo`, :mod:`koordinator_roles.manager.noderesource`);
this module only reads the caches and writes the results.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from koordinator.apis import schemas
from koordinator.runtime import errors
from koordinator.runtime.controller import Controller, Result
from koordinator_roles.manager import noderesource
from koordinator_roles.manager.nodemetric import node_metric_spec
from koordinator_roles.manager.nodeslo import node_slo_spec
from koordinator_roles.manager.sloconfig import colocation_strategy, cpu_normalization_strategy, resource_amplification_strategy
from koordinator_roles.manager.sloconfig_cache import SLOConfigCache

log = logging.getLogger("koordinator.manager")

Obj = dict[str, Any]
SLO_API_VERSION = "slo.koordinator.sh/v1alpha1"
CONFLICT_RETRIES = 5


def _name(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def _labels_or_allocatable_changed(old: Obj | None, new: Obj) -> bool:
    if old is None:
        return True
    return ((old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels")
            or (old.get("metadata") or {}).get("annotations") != (new.get("metadata") or {}).get("annotations")
            or (old.get("status") or {}).get("allocatable") != (new.get("status") or {}).get("allocatable"))


def _spec_changed(old: Obj | None, new: Obj) -> bool:
    return old is None or old.get("spec") != new.get("spec")


class _PerNodeSpec:
    """Keeps one cluster-scoped object per Node (same name) whose spec derives from the node and the config."""

    def __init__(self, runtime: Any, config: SLOConfigCache, *, controller: str, kind: str, derive: Any) -> None:
        self.client = runtime.client
        self.config = config
        self.kind = kind
        self.derive = derive
        self.nodes = runtime.informers.informer("Node")
        self.objects = runtime.informers.informer(kind)
        self.controller = runtime.controller(controller, self.reconcile)
        self.controller.watch(self.nodes, predicate=lambda old, new: old is None or _labels_or_allocatable_changed(old, new))
        # Someone editing or deleting our object gets it put back.
        self.controller.watch(self.objects, predicate=lambda old, new: old is None or _spec_changed(old, new))
        config.on_change(self.enqueue_all)

    def enqueue_all(self) -> None:
        for key in self.nodes.store.keys():
            self.controller.enqueue(key)

    def reconcile(self, name: str) -> Result | None:
        node = self.nodes.store.get(name)
        current = self.objects.store.get(name)
        if node is None:
            if current is not None:
                try:
                    self.client.delete(self.kind, name)
                except errors.NotFound:
                    pass
            return None
        spec = self.derive(self.config.current(), node, copy.deepcopy((current or {}).get("spec")))
        obj = {"apiVersion": SLO_API_VERSION, "kind": self.kind, "metadata": {"name": name}, "spec": spec}
        if current is None:
            try:
                self.client.create(obj)
            except errors.AlreadyExists:
                return Result(requeue=True)  # our cache is behind: look again with the stored object
            log.info("created %s name=%s", self.kind, name)
            return None
        # The server defaults some fields (e.g. networkQOS limits): compare like with like.
        if current.get("spec") == schemas.with_defaults(obj).get("spec"):
            return None
        updated = copy.deepcopy(current)
        updated["spec"] = spec
        self.client.update(updated)  # a Conflict raises and requeues with backoff
        log.info("updated %s spec name=%s", self.kind, name)
        return None


def add_nodemetric_controller(runtime: Any, config: SLOConfigCache) -> Controller:
    """NodeMetric per Node: spec.metricCollectPolicy from colocation-config; deleted with its node."""
    return _PerNodeSpec(runtime, config, controller="nodemetric", kind="NodeMetric", derive=node_metric_spec).controller


def add_nodeslo_controller(runtime: Any, config: SLOConfigCache) -> Controller:
    """NodeSLO per Node: the strategies of slo-controller-config that select the node."""
    return _PerNodeSpec(runtime, config, controller="nodeslo", kind="NodeSLO", derive=node_slo_spec).controller


class NodeResourceController:
    """batch-cpu/batch-memory and mid-cpu/mid-memory on Node status (and the ratio annotations)."""

    def __init__(self, runtime: Any, config: SLOConfigCache, *, plugins: Iterable[str] = noderesource.PLUGINS,
                 gpu_shared: bool = False) -> None:
        self.client = runtime.client
        self.config = config
        self.plugins = tuple(plugins)
        self.gpu_shared = gpu_shared  # gate EnableSyncGPUSharedResource
        informers = runtime.informers
        self.nodes = informers.informer("Node")
        self.pods = informers.informer("Pod")
        self.node_metrics = informers.informer("NodeMetric")
        self.topologies = informers.informer("NodeResourceTopology")
        self.devices = informers.informer("Device")
        self._lock = threading.Lock()
        self._last_status_update: dict[str, float] = {}
        self.controller = runtime.controller("noderesource", self.reconcile)
        c = self.controller
        c.watch(self.nodes)
        c.watch(self.node_metrics, predicate=self._metric_status_changed)
        c.watch(self.pods, map_func=self._pod_node, predicate=self._pod_changed)
        c.watch(self.topologies)
        c.watch(self.devices)
        config.on_change(self.enqueue_all)

    @staticmethod
    def _metric_status_changed(old: Obj | None, new: Obj) -> bool:
        return old is None or old.get("status") != new.get("status")

    @staticmethod
    def _pod_node(pod: Obj) -> list[str]:
        node = (pod.get("spec") or {}).get("nodeName")
        return [node] if node else []

    @staticmethod
    def _pod_changed(old: Obj | None, new: Obj) -> bool:
        # Requests, priority and phase decide what a pod takes from batch/mid; label churn does not.
        if old is None:
            return True
        return (old.get("spec") != new.get("spec")
                or (old.get("status") or {}).get("phase") != (new.get("status") or {}).get("phase")
                or (old.get("metadata") or {}).get("labels") != (new.get("metadata") or {}).get("labels"))

    def enqueue_all(self) -> None:
        for key in self.nodes.store.keys():
            self.controller.enqueue(key)

    def reconcile(self, name: str) -> Result | None:
        node = self.nodes.store.get(name)
        if node is None:
            with self._lock:
                self._last_status_update.pop(name, None)
            return None
        cfg = self.config.current()
        strategy = colocation_strategy(cfg, node)
        now = time.time()
        enabled = bool(cfg.colocation_cluster_enabled() and strategy.get("enable"))
        nr = noderesource.calculate(
            colocation_enabled=enabled, strategy=strategy,
            normalization=cpu_normalization_strategy(cfg, node),
            amplification=resource_amplification_strategy(cfg, node),
            node=node, pods=self.pods.store.by_index("spec.nodeName", name),
            node_metric=self.node_metrics.store.get(name), nrt=self.topologies.store.get(name),
            device=self.devices.store.get(name), now=now, plugins=self.plugins, gpu_shared=self.gpu_shared)
        prepared = noderesource.prepare(node, nr)
        with self._lock:
            last = self._last_status_update.get(name)
        if noderesource.needs_status_sync(node, prepared, strategy, last, now):
            self._write_status(name, nr)
            with self._lock:
                self._last_status_update[name] = time.time()
        if noderesource.needs_meta_sync(node, prepared):
            self._write_meta(name, nr)
        # Time alone changes the answer (a NodeMetric going stale, the forced refresh): look again.
        return Result(requeue_after=float(strategy.get("updateTimeThresholdSeconds") or 300))

    def _write_status(self, name: str, nr: Any) -> None:
        for attempt in range(CONFLICT_RETRIES):
            fresh = self.client.get("Node", name)
            updated = noderesource.prepare(fresh, nr)
            if updated.get("status") == fresh.get("status"):
                return
            try:
                self.client.update_status(updated)
                log.info("updated node resources node=%s", name)
                return
            except errors.Conflict:
                if attempt == CONFLICT_RETRIES - 1:
                    raise

    def _write_meta(self, name: str, nr: Any) -> None:
        fresh = self.client.get("Node", name)
        updated = noderesource.prepare(fresh, nr)
        patch: Obj = {}
        for field in ("labels", "annotations"):
            before = (fresh.get("metadata") or {}).get(field) or {}
            after = (updated.get("metadata") or {}).get(field) or {}
            diff = {k: v for k, v in after.items() if before.get(k) != v}
            diff.update({k: None for k in before if k not in after})
            if diff:
                patch[field] = diff
        if patch:
            self.client.patch("Node", name, {"metadata": patch}, patch_type="merge")
            log.info("patched node metadata node=%s keys=%s", name, sorted(k for f in patch.values() for k in f))
