"""Assembles the descheduler on a Runtime: frameworks per profile, the limiter, the loop, the reload."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from koordinator_roles.descheduler.descheduler import Descheduler
from koordinator_roles.descheduler.framework.handle import PluginHandle
from koordinator_roles.descheduler.framework.limiter import EvictionLimiter
from koordinator_roles.descheduler.framework.runtime import Framework
from koordinator_roles.descheduler.metrics import DeschedulerMetrics
from koordinator_roles.descheduler.plugins import in_tree_registry

log = logging.getLogger("koordinator.descheduler")

CONFIGMAP = "koord-descheduler-config"


@dataclass
class DeschedulerParts:
    """What :func:`build` added, for tools and tests that look inside a running descheduler."""

    config: Any
    descheduler: Descheduler
    frameworks: dict[str, Framework]
    limiter: EvictionLimiter
    metrics: DeschedulerMetrics


def build(runtime: Any, config: Any, *, config_path: str | None = None, registry: Any = None) -> DeschedulerParts:
    """Everything the descheduler role registers; ``registry`` defaults to the in-tree plugins (tests add theirs).

    The loop and the plugins' controllers run on the leader only; the plugins' informers (asked for in
    their constructors) sync before the first round.
    """
    registry = registry if registry is not None else in_tree_registry()
    informers = runtime.informers
    pods = informers.informer("Pod")
    nodes = informers.informer("Node")
    recorder = runtime.event_recorder()
    metrics = DeschedulerMetrics(runtime.metrics.registry)
    limiter = EvictionLimiter(config.max_pods_per_node, config.max_pods_per_namespace, config.max_pods_total)

    def pods_on_node(node_name: str) -> list[dict]:
        return pods.store.by_index("spec.nodeName", node_name)

    frameworks: dict[str, Framework] = {}
    for profile in config.profiles:
        # Controllers a plugin runs (MigrationController's) write only while this process leads.
        handle = PluginHandle(client=runtime.client, informers=informers, event_recorder=recorder,
                              dry_run=config.dry_run, pod_index=pods_on_node, leader=runtime.is_leader,
                              metrics=runtime.metrics, descheduler_metrics=metrics)
        frameworks[profile.name] = Framework(profile, registry, handle, limiter=limiter, metrics=metrics)

    def list_nodes(selector: str) -> list[dict]:
        return runtime.client.list("Node", label_selector=selector or None).get("items") or []

    descheduler = Descheduler(frameworks, limiter, list_cached_nodes=nodes.store.list, list_nodes=list_nodes,
                              interval=config.descheduling_interval, node_selector=config.node_selector)
    runtime.add_runnable("descheduler", descheduler.run, leader_gated=True)
    for name, fwk in frameworks.items():
        for controller in fwk.controllers():
            runtime.add_runnable(f"{name}/{controller.name}", controller.run, leader_gated=True)
    parts = DeschedulerParts(config=config, descheduler=descheduler, frameworks=frameworks, limiter=limiter,
                             metrics=metrics)
    if config_path:
        runtime.config_file(CONFIGMAP, reloader(parts, registry), path=config_path)
    return parts


def reloader(parts: DeschedulerParts, registry: Any):
    """Apply a new configuration's reloadable parts; anything else waits for a restart (logged)."""
    from koordinator_roles.descheduler import config as cfg

    def on_change(parsed: dict) -> None:
        document = next(iter(parsed.values()), None)
        if not isinstance(document, dict):
            return
        try:
            new = cfg.parse(document, registry_names=set(registry))
        except cfg.ConfigError as err:
            log.error("descheduler configuration rejected, keeping the running one err=%s", err)
            return
        old = parts.config
        if new.document == old.document:
            return  # the first load, or a change of nothing but formatting
        blocked = cfg.non_reloadable_changes(old, new)
        if blocked:
            log.warning("descheduler configuration changed in fields that need a restart; keeping the running "
                        "configuration fields=%s", ",".join(blocked))
            return
        parts.limiter.set_limits(new.max_pods_per_node, new.max_pods_per_namespace, new.max_pods_total)
        parts.descheduler.update(interval=new.descheduling_interval, node_selector=new.node_selector,
                                 dry_run=new.dry_run,
                                 profile_selectors={p.name: p.node_selector for p in new.profiles})
        parts.config = new
        log.info("descheduler configuration reloaded interval=%ss dryRun=%s", new.descheduling_interval,
                 new.dry_run)

    return on_change
