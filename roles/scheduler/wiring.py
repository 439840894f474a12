"""Assembles the scheduler on a Runtime: frameworks per profile, queue, cache, informer handlers, reload."""

from __future__ import annotations

import logging
from typing import Any

from koordinator_roles.scheduler import explain
from koordinator_roles.scheduler.cache import SchedulerCache
from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.interfaces import ControllerProvider
from koordinator_roles.scheduler.framework.runtime import Framework
from koordinator_roles.scheduler.framework.types import PodInfo
from koordinator_roles.scheduler.metrics import SchedulerMetrics
from koordinator_roles.scheduler.plugins import in_tree_registry
from koordinator_roles.scheduler.queue import SchedulingQueue
from koordinator_roles.scheduler.scheduler import Scheduler, is_terminal

log = logging.getLogger("koordinator.scheduler")

# Node fields whose change may make a rejected pod schedulable (kube's NodeUpdate hints, coarsely).
_NODE_FIELDS = (("metadata", "labels"), ("metadata", "annotations"), ("spec", "taints"),
                ("spec", "unschedulable"), ("status", "allocatable"), ("status", "images"))


def _node_changed(old: dict, new: dict) -> bool:
    return any((old.get(a) or {}).get(b) != (new.get(a) or {}).get(b) for a, b in _NODE_FIELDS)


def build(runtime: Any, config: Any, *, debug_scores: int = 0, config_path: str | None = None,
          registry: Any = None) -> Any:
    """Everything the scheduler role registers; ``registry`` defaults to the in-tree plugins (tests add theirs)."""
    from koordinator_roles.scheduler import SchedulerParts

    registry = registry or in_tree_registry()
    informers = runtime.informers
    metrics = SchedulerMetrics(runtime.metrics.registry)
    recorder = runtime.event_recorder()
    cache = SchedulerCache()
    holder: dict[str, Scheduler] = {}
    frameworks: dict[str, Framework] = {}
    handles: list[PluginHandle] = []
    for profile in config.profiles:
        handle = PluginHandle(snapshot_source=lambda: holder["scheduler"].snapshot, client=runtime.client,
                              informers=informers, event_recorder=recorder, nominator=None,
                              scheduler_name=profile.scheduler_name, parallelism=config.parallelism)
        handles.append(handle)
        frameworks[profile.scheduler_name] = Framework(
            profile, registry, handle, percentage_of_nodes_to_score=config.percentage_of_nodes_to_score)
    first = next(iter(frameworks.values()))

    def pre_enqueue(pod: PodInfo):
        fwk = frameworks.get(pod.scheduler_name)
        return None if fwk is None else fwk.run_pre_enqueue(pod)

    def events_for_plugin(name: str):
        for fwk in frameworks.values():
            if name in fwk.plugins:
                return fwk.events_for_plugin(name)
        return []

    queue = SchedulingQueue(first.queue_sort_key(), pre_enqueue=pre_enqueue,
                            initial_backoff=config.pod_initial_backoff_seconds,
                            max_backoff=config.pod_max_backoff_seconds, metrics=metrics,
                            events_for_plugin=events_for_plugin)
    for handle in handles:
        handle.nominator = queue.nominator
    pods = informers.informer("Pod")
    nodes = informers.informer("Node")
    sources = _extra_pod_sources(frameworks)
    scheduler = Scheduler(frameworks=frameworks, cache=cache, queue=queue, client=runtime.client,
                          pod_lookup=_pod_lookup(pods.store.get, sources), recorder=recorder, metrics=metrics,
                          binders=config.parallelism, debug_scores=debug_scores,
                          write_explanations=_gate_on(runtime, explain.GATE))
    holder["scheduler"] = scheduler
    registrations = _wire_informers(informers, pods, nodes, cache, queue, frameworks, sources,
                                    scheduler.explanations)
    # Plugins keep caches of their own (devices, quotas, reservations, NUMA topology) fed by informer handlers:
    # no pod is scheduled before every handler has seen the initial objects, or it could be placed without them.
    scheduler.ready = lambda: all(r.has_synced() for r in registrations) and informers.handlers_synced()
    runtime.add_runnable("scheduling-queue", queue.run)
    runtime.add_runnable("scheduler-cache", cache.run)
    runtime.add_controller(scheduler)
    _add_plugin_controllers(runtime, frameworks)
    if config_path:
        runtime.config_file("koord-scheduler-config", _reloader(config, frameworks, queue, registry), path=config_path)
    return SchedulerParts(config=config, scheduler=scheduler, queue=queue, cache=cache, frameworks=frameworks)


def _gate_on(runtime: Any, gate: str) -> bool:
    """Whether ``--feature-gates`` turned ``gate`` on (a runtime without options: off)."""
    options = getattr(runtime, "options", None)
    return bool(options is not None and options.feature_enabled(gate))


def _extra_pod_sources(frameworks: dict[str, Framework]) -> list[Any]:
    """Pods that exist only inside the scheduler (Reservation's reserve pods): plugins expose them as
    ``reserve_pods`` with ``add_handler(on_add, on_update, on_delete)``, ``get(key)`` and ``attach_cache``."""
    sources: list[Any] = []
    for fwk in frameworks.values():
        for plugin in fwk.plugins.values():
            source = getattr(plugin, "reserve_pods", None)
            if source is not None and all(source is not s for s in sources):
                sources.append(source)
    return sources


def _pod_lookup(store_get: Any, sources: list[Any]) -> Any:
    """The pod by key: the Pod informer's, else a reserve pod (only consulted when the informer has none)."""
    if not sources:
        return store_get

    def lookup(key: str) -> dict | None:
        pod = store_get(key)
        if pod is None:
            for source in sources:
                pod = source.get(key)
                if pod is not None:
                    break
        return pod

    return lookup


def _add_plugin_controllers(runtime: Any, frameworks: dict[str, Framework]) -> None:
    """The background controllers of plugins that have some (:class:`ControllerProvider`: quota status,
    PodGroup status), once per plugin instance, on the leader only (they write status)."""
    seen: set[int] = set()
    for fwk in frameworks.values():
        for name, plugin in fwk.plugins.items():
            if id(plugin) in seen or not isinstance(plugin, ControllerProvider):
                continue
            seen.add(id(plugin))
            for controller in plugin.new_controllers():
                runtime.add_runnable(f"{name}/{controller.name}", controller.run, leader_gated=True)


def _wire_informers(informers: Any, pods: Any, nodes: Any, cache: SchedulerCache, queue: SchedulingQueue,
                    frameworks: dict[str, Framework], sources: list[Any] = (),
                    explanations: explain.ExplanationRecorder | None = None) -> list[Any]:
    ours = set(frameworks)

    def responsible(pod: dict) -> bool:
        return ((pod.get("spec") or {}).get("schedulerName") or "default-scheduler") in ours

    def assigned(pod: dict) -> bool:
        return bool((pod.get("spec") or {}).get("nodeName"))

    def reject_waiting(pod: dict) -> None:
        uid = (pod.get("metadata") or {}).get("uid")
        for fwk in frameworks.values():
            waiting = fwk.get_waiting_pod(uid) if uid else None
            if waiting is not None:
                waiting.reject("", "pod deleted")

    def on_pod_add(pod: dict) -> None:
        if is_terminal(pod):
            return
        if assigned(pod):
            cache.add_pod(pod)
            queue.assigned_pod_added(pod)
        elif responsible(pod):
            queue.add(pod)

    def on_pod_update(old: dict, new: dict) -> None:
        if assigned(new):
            if not assigned(old) and responsible(old):
                queue.delete(old)
            if is_terminal(new):
                if not is_terminal(old):
                    on_pod_delete(old)
                return
            cache.update_pod(old, new)
            queue.assigned_pod_updated(old, new)
        elif responsible(new):
            if is_terminal(new):
                queue.delete(new)
            elif not cache.is_assumed((new.get("metadata") or {}).get("uid", "")):
                queue.update(old, new)
        elif responsible(old):
            queue.delete(old)  # another scheduler's now

    def on_pod_delete(pod: Any) -> None:
        pod = getattr(pod, "obj", pod)
        if explanations is not None:
            meta = pod.get("metadata") or {}
            explanations.forget(f"{meta.get('namespace')}/{meta.get('name')}")
        if assigned(pod):
            cache.remove_pod(pod)
            queue.assigned_pod_deleted(pod)
        elif responsible(pod):
            queue.delete(pod)
            reject_waiting(pod)

    def on_node_add(node: dict) -> None:
        cache.add_node(node)
        queue.move_all_to_active_or_backoff(("Node", "Add"), None, node)

    def on_node_update(old: dict, new: dict) -> None:
        cache.update_node(new)
        if _node_changed(old, new):
            queue.move_all_to_active_or_backoff(("Node", "Update"), old, new)

    def on_node_delete(node: Any) -> None:
        cache.remove_node(getattr(node, "obj", node))

    registrations = [pods.add_handler(on_pod_add, on_pod_update, on_pod_delete),
                     nodes.add_handler(on_node_add, on_node_update, on_node_delete)]
    for source in sources:
        # Reserve pods take the same paths as pods: Pending ones are queued, Available ones occupy their node.
        source.attach_cache(cache)
        registrations.append(source.add_handler(on_pod_add, on_pod_update, on_pod_delete))
    # Other kinds plugins react to (NodeMetric for LoadAwareScheduling, PDBs, ...): only queue moves.
    kinds = {e.kind for fwk in frameworks.values() for name in fwk.plugins for e in fwk.events_for_plugin(name)}
    for kind in sorted(kinds - {"*", "Pod", "Node"}):
        informer = informers.informer(kind)

        def mover(action: str, kind: str = kind):
            return lambda *objs: queue.move_all_to_active_or_backoff(
                (kind, action), objs[0] if len(objs) == 2 else None, objs[-1])

        registrations.append(informer.add_handler(mover("Add"), mover("Update"), mover("Delete")))
    return registrations


def _reloader(config: Any, frameworks: dict[str, Framework], queue: SchedulingQueue, registry: Any):
    """Apply a new configuration's reloadable parts; anything else waits for a restart (logged)."""
    from koordinator_roles.scheduler import config as cfg
    from koordinator_roles.scheduler.plugins import NOT_IMPLEMENTED

    current = {"config": config}

    def on_change(parsed: dict) -> None:
        document = next(iter(parsed.values()), None)
        if not isinstance(document, dict):
            return
        try:
            new = cfg.parse(document, registry_names=set(registry.names()), not_implemented=NOT_IMPLEMENTED)
        except cfg.ConfigError as err:
            log.error("scheduler configuration rejected, keeping the running one err=%s", err)
            return
        old = current["config"]
        blocked = cfg.non_reloadable_changes(old, new)
        if blocked:
            log.warning("scheduler configuration changed in fields that need a restart; keeping the running "
                        "configuration fields=%s", ",".join(blocked))
            return
        try:
            for profile in new.profiles:
                frameworks[profile.scheduler_name].check_reload(profile)
        except ValueError as err:
            log.error("scheduler configuration rejected, keeping the running one err=%s", err)
            return
        for profile in new.profiles:
            frameworks[profile.scheduler_name].reload(profile, new.percentage_of_nodes_to_score)
        queue.set_backoff(new.pod_initial_backoff_seconds, new.pod_max_backoff_seconds)
        queue.reset_event_registrations()
        current["config"] = new
        # New thresholds or weights may admit pods rejected under the old ones.
        queue.move_all_to_active_or_backoff(("*", "*"))
        log.info("scheduler configuration reloaded")

    return on_change
