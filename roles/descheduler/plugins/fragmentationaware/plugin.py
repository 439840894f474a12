"""FragmentationAware: one eviction per imbalanced node per round, the pod whose removal lowers the node's
imbalance most (reference §1.8).

For each node (the profile's ready nodes the args' ``nodeSelector`` matches) whose imbalance exceeds
``imbalanceThreshold``, every evictable pod (namespaces, pod selectors, the evictor's Filter) is scored
``gain = imbalance before − imbalance without the pod``; the best pod is evicted if its gain exceeds
``minImprovementThreshold`` and, with ``nodeFit``, another candidate node could take it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from koordinator.apis.extension import pod_requests
from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, EvictOptions, Handle, Obj, Status
from koordinator_roles.descheduler.framework.nodefit import NodeFit
from koordinator_roles.descheduler.framework.podscope import allocatable, node_name, not_terminated, pod_key

from .args import FragmentationAwareArgs, parse_args
from .imbalance import imbalance, without

NAME = "FragmentationAware"

log = logging.getLogger(__name__)


@dataclass
class Choice:
    """The pod picked on a node and the imbalance before/after its eviction."""

    pod: Obj
    std_before: float
    std_after: float

    @property
    def gain(self) -> float:
        return self.std_before - self.std_after

    def reason(self) -> str:
        return (f"fragmentation reduction: stdBefore={self.std_before:.4f} stdAfter={self.std_after:.4f} "
                f"gain={self.gain:.4f}")


class FragmentationAware(BalancePlugin):
    """Balance plugin; ``last_round`` lists the pods evicted (or, in dry run, chosen) in the last round."""

    name = NAME

    def __init__(self, args: FragmentationAwareArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.last_round: list[Choice] = []

    def evictable(self, pod: Obj) -> bool:
        """In the args' scope and allowed by the evictor's Filter plugins."""
        return self.args.scope.selects(pod) and self.handle.evictor.filter(pod)

    def choose(self, node: Obj, fit: NodeFit | None) -> Choice | None:
        """The pod whose eviction lowers ``node``'s imbalance most, or None (balanced enough, or no pod helps
        by more than ``minImprovementThreshold``, or none fits elsewhere)."""
        alloc = allocatable(node)
        pods = self.handle.pods_on_node(node_name(node), not_terminated)
        requests = [pod_requests(p) for p in pods]
        requested: dict[str, int] = {}
        for req in requests:
            for r, v in req.items():
                requested[r] = requested.get(r, 0) + v
        before = imbalance(requested, alloc, self.args.resources)
        if before <= self.args.imbalance_threshold:
            return None
        best: Choice | None = None
        # Sorted so that equal gains resolve the same way every round.
        for pod, req in sorted(zip(pods, requests), key=lambda pr: pod_key(pr[0])):
            after = imbalance(without(requested, req), alloc, self.args.resources)
            if before - after <= self.args.min_improvement_threshold:
                continue
            if best is not None and before - after <= best.gain:
                continue
            if not self.evictable(pod):
                continue
            if fit is not None and not fit.fits_other_node(pod):
                continue
            best = Choice(pod, before, after)
        return best

    def balance(self, nodes: list[Obj]) -> Status | None:
        """At most one eviction per imbalanced node; failures are logged, the round goes on."""
        self.last_round = []
        if self.args.paused:
            return None
        candidates = self.args.scope.nodes(nodes)
        fit = NodeFit(self.handle, candidates) if self.args.node_fit else None
        evictor = self.handle.evictor
        for node in candidates:
            name = node_name(node)
            if evictor.node_limit_exceeded(name):
                continue
            choice = self.choose(node, fit)
            if choice is None:
                continue
            if not evictor.pre_eviction_filter(choice.pod):
                log.info("FragmentationAware: pod %s on %s refused by PreEvictionFilter", pod_key(choice.pod), name)
                continue
            if self.args.dry_run:
                log.info("FragmentationAware dry run: would evict pod %s from %s: %s", pod_key(choice.pod), name,
                         choice.reason())
            elif not evictor.evict(choice.pod, EvictOptions(plugin_name=NAME, reason=choice.reason())):
                continue
            self.last_round.append(choice)
        return None


def new(args: dict[str, Any] | None, handle: Handle) -> FragmentationAware:
    """Registry factory: parse and validate ``args`` (ValueError naming the field), build the plugin."""
    return FragmentationAware(parse_args(args), handle)
