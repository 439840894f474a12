"""CustomPriority: the balance plugin moving pods from expensive node pools to cheaper ones (reference §1.8).

Each node (after ``nodeSelector``) belongs to the first ``evictionOrder`` level whose selector matches it;
nodes matching none take no part. Levels are processed from the most expensive (first) to the cheapest; the
nodes of every cheaper level are the targets of a level's nodes. Targets are tried cheaper-level-first in the
configured order, by node name within a level.

* BestEffort: per source node, its evictable pods smallest first (cpu request, memory request, namespace,
  name); a pod is evicted when it fits a target's remaining room (and, with ``nodeFit``, NodeFit).
* DrainNode: all evictable pods of a source node are planned onto the targets first (first fit on a copy of
  the room ledger); only when every one fits is the node (with ``autoCordon``) cordoned and all evicted. A
  failed eviction uncordons the node (if this plugin cordoned it) and stops that node.

Placements of evicted pods are committed to the round's ledger, so later pods and nodes see the room used.
Dry run (``dryRun`` or the framework's) cordons nothing; ``dryRun`` also evicts nothing (it logs the plan).
"""

from __future__ import annotations

import logging
from typing import Any

from koordinator.apis.extension import pod_requests
from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, EvictOptions, Handle, Obj, Status
from koordinator_roles.descheduler.framework.nodefit import TERMINAL_PHASES, is_unschedulable, node_labels

from .args import DRAIN_NODE, CustomPriorityArgs, parse_args
from .ledger import Ledger, node_name

NAME = "CustomPriority"

log = logging.getLogger(__name__)


def best_effort_reason(level: str) -> str:
    """The eviction reason of BestEffort mode."""
    return f"evicting from {level} priority resource to lower priority resource"


def drain_reason(node: str, level: str) -> str:
    """The eviction reason of DrainNode mode."""
    return f"drain node {node} (sourcePriority={level})"


def pod_order_key(pod: Obj) -> tuple[int, int, str, str]:
    """Smallest first: cpu request, memory request, then namespace and name."""
    req = pod_requests(pod)
    meta = pod.get("metadata") or {}
    return req.get("cpu", 0), req.get("memory", 0), meta.get("namespace", ""), meta.get("name", "")


def _pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


class CustomPriority(BalancePlugin):
    """Balance plugin; see the module docstring."""

    name = NAME

    def __init__(self, args: CustomPriorityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        # Asked for now so the role's informer factory lists pods before the first round (pods_on_node reads it).
        if getattr(handle, "informers", None) is not None:
            handle.informers.informer("Pod")
        self._include = set(args.include_namespaces or ())
        self._exclude = set(args.exclude_namespaces or ())
        #: Pods evicted (in dryRun: planned) in the last round.
        self.last_round_evictions = 0

    # -- inputs ----------------------------------------------------------------------------------

    def pod_filter(self, pod: Obj) -> bool:
        """Non-terminated, namespaces, pod selectors, then the evictor's filters."""
        if (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
            return False
        meta = pod.get("metadata") or {}
        ns = meta.get("namespace", "")
        if (self._exclude and ns in self._exclude) or (self._include and ns not in self._include):
            return False
        if self.args.pod_selectors:
            labels = meta.get("labels") or {}
            if not any(s.selector.matches(labels) for s in self.args.pod_selectors):
                return False
        return self.handle.evictor.filter(pod)

    def _candidates(self, node: Obj) -> list[Obj]:
        return sorted(self.handle.pods_on_node(node_name(node), self.pod_filter), key=pod_order_key)

    def _levels(self, nodes: list[Obj]) -> list[list[Obj]]:
        """The nodes of each priority level (first matching level wins), by name."""
        levels: list[list[Obj]] = [[] for _ in self.args.eviction_order]
        for node in nodes:
            labels = node_labels(node)
            if self.args.node_selector is not None and not self.args.node_selector.matches(labels):
                continue
            for i, level in enumerate(self.args.eviction_order):
                if level.node_selector.matches(labels):
                    levels[i].append(node)
                    break
        return [sorted(group, key=node_name) for group in levels]

    @property
    def _dry_run(self) -> bool:
        return self.args.dry_run or bool(getattr(self.handle, "dry_run", False))

    # -- the extension point ---------------------------------------------------------------------

    def balance(self, nodes: list[Obj]) -> Status | None:
        """One round over every level with nodes and cheaper targets; errors are logged, the round goes on."""
        self.last_round_evictions = 0
        if self.args.paused:
            return None
        levels = self._levels(nodes)
        ledger = Ledger(lambda name: self.handle.pods_on_node(name), self.args.node_fit)
        for i, sources in enumerate(levels):
            targets = [n for cheaper in levels[i + 1:] for n in cheaper]
            if not sources or not targets:
                continue
            level = self.args.eviction_order[i].name
            for source in sources:
                try:
                    if self.args.mode == DRAIN_NODE:
                        self.last_round_evictions += self._drain(source, level, targets, ledger)
                    else:
                        self.last_round_evictions += self._best_effort(source, level, targets, ledger)
                except Exception:  # one node's failure must not stop the round
                    log.exception("CustomPriority: node %s failed", node_name(source))
        return None

    def _evict(self, pod: Obj, reason: str) -> bool:
        if self.args.dry_run:
            log.info("CustomPriority dry run: would evict pod=%s reason=%s", _pod_key(pod), reason)
            return True
        return self.handle.evictor.evict(pod, EvictOptions(plugin_name=NAME, reason=reason))

    def _best_effort(self, source: Obj, level: str, targets: list[Obj], ledger: Ledger) -> int:
        evicted = 0
        reason = best_effort_reason(level)
        for pod in self._candidates(source):
            if self.handle.evictor.node_limit_exceeded(node_name(source)):
                break
            target = ledger.first_fit(pod, targets)
            if target is None or not self.handle.evictor.pre_eviction_filter(pod):
                continue
            if self._evict(pod, reason):
                ledger.place(pod, target)
                evicted += 1
        return evicted

    def _drain(self, source: Obj, level: str, targets: list[Obj], ledger: Ledger) -> int:
        name = node_name(source)
        pods = self._candidates(source)
        if not pods:
            return 0
        plan = ledger.fork()
        placements: list[tuple[Obj, Obj]] = []
        for pod in pods:
            target = plan.first_fit(pod, targets)
            if target is None or not self.handle.evictor.pre_eviction_filter(pod):
                log.info("CustomPriority: not draining node %s: pod %s cannot move", name, _pod_key(pod))
                return 0
            plan.place(pod, target)
            placements.append((pod, target))
        cordoned = False
        if self.args.auto_cordon and not self._dry_run and not is_unschedulable(source):
            self._set_unschedulable(name, True)
            cordoned = True
        reason = drain_reason(name, level)
        evicted = 0
        for pod, target in placements:
            try:
                ok = self._evict(pod, reason)
            except Exception:  # a raising evictor is a failed eviction too: the node must not stay cordoned
                log.exception("CustomPriority: evicting pod %s failed", _pod_key(pod))
                ok = False
            if not ok:
                log.info("CustomPriority: draining node %s stopped: pod %s was not evicted", name, _pod_key(pod))
                if cordoned:
                    self._set_unschedulable(name, False)
                break
            ledger.place(pod, target)
            evicted += 1
        return evicted

    def _set_unschedulable(self, node: str, value: bool) -> None:
        """Cordon (True) or uncordon (False) through a merge patch of ``spec.unschedulable``."""
        self.handle.client.patch("Node", node, {"spec": {"unschedulable": value}})
        log.info("CustomPriority: %s node %s", "cordoned" if value else "uncordoned", node)


def new(args: dict[str, Any] | None, handle: Handle) -> CustomPriority:
    """Registry factory: parse and validate ``args`` (ValueError naming the field), build the plugin."""
    return CustomPriority(parse_args(args), handle)
