"""The evictor proxy every plugin of a profile evicts through (reference descheduler §1.3)."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from koordinator_roles.descheduler.framework.interfaces import EvictOptions, EvictPlugin, FilterPlugin, Obj
from koordinator_roles.descheduler.framework.limiter import EvictionLimiter

log = logging.getLogger("koordinator.descheduler")


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class EvictorProxy:
    """Filter plugins, the global limiter, dry run and the profile's evict plugin behind one object.

    ``evict`` asks the limiter, then (unless dry run) the evict plugin, and counts the eviction. It
    records ``descheduler_pods_evicted`` and an Event on the pod for every eviction (Normal
    ``Descheduled``), every failed one (Warning ``EvictionFailed``) and every one the limiter refuses
    (Normal ``EvictionRefused``) — except for an evict plugin whose ``reports_evictions`` is true
    (MigrationController: its "eviction" creates a PodMigrationJob, and the pod is evicted and reported
    later by its controller). An evict plugin fails by returning False or by raising an exception
    whose text says why.
    """

    def __init__(self, *, limiter: EvictionLimiter, dry_run: bool = False, recorder: Any = None,
                 metrics: Any = None, profile_name: str = "") -> None:
        self.limiter = limiter
        self.dry_run = dry_run
        self.recorder = recorder
        self.metrics = metrics
        self.profile_name = profile_name
        self.filter_plugins: list[FilterPlugin] = []
        self.evict_plugins: list[EvictPlugin] = []
        #: The plugin running now (the framework sets it around each call): the default ``plugin_name``.
        self.current_plugin = ""

    def filter(self, pod: Obj) -> bool:
        return all(p.filter(pod) for p in self.filter_plugins)

    def pre_eviction_filter(self, pod: Obj) -> bool:
        return all(p.pre_eviction_filter(pod) for p in self.filter_plugins)

    def node_limit_exceeded(self, node_name: str) -> bool:
        return self.limiter.node_limit_exceeded(node_name)

    def namespace_limit_exceeded(self, namespace: str) -> bool:
        return self.limiter.namespace_limit_exceeded(namespace)

    def evict(self, pod: Obj, options: EvictOptions | None = None) -> bool:
        if not self.evict_plugins:
            raise RuntimeError(f"profile {self.profile_name}: no evict plugin is enabled")
        options = options or EvictOptions()
        if not options.plugin_name or not options.reason:
            options = replace(options, plugin_name=options.plugin_name or self.current_plugin,
                              reason=options.reason or options.plugin_name or self.current_plugin)
        plugin = self.evict_plugins[0]
        reports = not getattr(plugin, "reports_evictions", False)
        node = (pod.get("spec") or {}).get("nodeName") or ""
        limit = self.limiter.refusal(pod)
        if limit is not None:
            log.info("eviction refused by the limiter pod=%s node=%s plugin=%s limit=%s", pod_key(pod), node,
                     options.plugin_name, limit)
            if reports:
                self._event(pod, "Normal", "EvictionRefused",
                            f"Not evicted from node \"{node}\": {limit} reached in this descheduling round "
                            f"(by {options.plugin_name or 'the descheduler'})")
            return False
        if self.dry_run:
            log.info("dry run: would evict pod=%s node=%s plugin=%s reason=%s", pod_key(pod), node,
                     options.plugin_name, options.reason)
            self.limiter.done(pod)
            return True
        try:
            ok, why = bool(plugin.evict(pod, options)), ""
        except Exception as err:  # noqa: BLE001 — a plugin's failure is one pod's, not the round's
            ok, why = False, str(err) or type(err).__name__
        if not ok:
            # An exception is a failure; a plain "no" is the evict plugin's own decision (MigrationController's
            # migration limits), which it reports itself.
            log.log(logging.WARNING if why or reports else logging.INFO, "not evicted pod=%s node=%s plugin=%s "
                    "why=%s", pod_key(pod), node, options.plugin_name, why or f"{plugin.name} declined")
            if reports:
                self._count(pod, options, "error")
                self._event(pod, "Warning", "EvictionFailed",
                            f"Failed to evict pod from node \"{node}\": {why or f'{plugin.name} did not evict it'}")
            return False
        self.limiter.done(pod)
        log.info("evicted pod=%s node=%s plugin=%s reason=%s", pod_key(pod), node, options.plugin_name,
                 options.reason)
        if reports:
            self._count(pod, options, "success")
            self._event(pod, "Normal", "Descheduled",
                        f"Pod evicted from node \"{node}\" by the reason \"{options.reason or 'NotSet'}\"")
        return True

    def _count(self, pod: Obj, options: EvictOptions, result: str) -> None:
        if self.metrics is not None:
            self.metrics.evicted(pod, options.plugin_name, result)

    def _event(self, pod: Obj, type: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(pod, type, reason, message)
