"""ScaleDownBinPack: ranks every eligible pod globally (0 = delete first) by how cheaply its node empties
(reference §1.8).

* ``CalculateOnly`` (default): merge-patches ``controller.kubernetes.io/pod-deletion-cost`` = rank on eligible
  pods, so a ReplicaSet scaling down removes them in that order, and ``2147483647`` (never first) on pods
  in scope that the evictor refuses; nothing is written in the framework's dry run.
* ``EvictDirectly``: evicts in rank order until ``maxPodsToEvict`` evictions succeed.
"""

from __future__ import annotations

import logging
from typing import Any

from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, EvictOptions, Handle, Obj, Status
from koordinator_roles.descheduler.framework.podscope import not_terminated, pod_key

from .args import CALCULATE_ONLY, ScaleDownBinPackArgs, parse_args
from .ranking import NodePlan, plan_node, rank

NAME = "ScaleDownBinPack"
DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
#: The cost of pods that must not be picked (math.MaxInt32).
NEVER = 2147483647
EVICT_REASON = "scale-down binpack"

log = logging.getLogger(__name__)


class ScaleDownBinPack(BalancePlugin):
    """Balance plugin; ``last_ranking`` keeps the last round's ordered node plans (for logs and tests)."""

    name = NAME

    def __init__(self, args: ScaleDownBinPackArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.last_ranking: list[NodePlan] = []

    def plans(self, nodes: list[Obj]) -> list[NodePlan]:
        """The selected nodes with eligible pods, in the order they should be emptied."""
        plans = []
        for node in self.args.scope.nodes(nodes):
            pods = self.handle.pods_on_node((node.get("metadata") or {}).get("name", ""), not_terminated)
            plan = plan_node(node, pods, self.args.scope.selects, self.handle.evictor.filter,
                             self.args.resource_weights)
            if plan is not None:
                plans.append(plan)
        return rank(plans)

    def balance(self, nodes: list[Obj]) -> Status | None:
        self.last_ranking = []
        if self.args.paused:
            return None
        self.last_ranking = plans = self.plans(nodes)
        ordered = [pod for plan in plans for pod in plan.eligible]
        if self.args.strategy == CALCULATE_ONLY:
            costs = [(pod, str(i)) for i, pod in enumerate(ordered)]
            costs += [(pod, str(NEVER)) for plan in plans for pod in plan.skipped]
            return self._write_costs(costs)
        evicted = 0
        for pod in ordered:
            if evicted >= self.args.max_pods_to_evict:
                break
            if self.handle.evictor.evict(pod, EvictOptions(plugin_name=NAME, reason=EVICT_REASON)):
                evicted += 1
        return None

    def _write_costs(self, costs: list[tuple[Obj, str]]) -> Status | None:
        """Patch each pod whose deletion cost differs; one pod's failure does not stop the others."""
        failed = []
        for pod, cost in costs:
            meta = pod.get("metadata") or {}
            if (meta.get("annotations") or {}).get(DELETION_COST) == cost:
                continue  # already ranked so: spare the API server a write
            if self.handle.dry_run:
                log.info("ScaleDownBinPack dry run: would set %s=%s on pod %s", DELETION_COST, cost, pod_key(pod))
                continue
            try:
                self.handle.client.patch("Pod", meta.get("name", ""), {"metadata": {"annotations": {
                    DELETION_COST: cost}}}, namespace=meta.get("namespace"), patch_type="merge")
            except Exception as err:  # noqa: BLE001 — a vanished pod must not stop the ranking of the rest
                log.warning("ScaleDownBinPack: patching %s of pod %s failed: %s", DELETION_COST, pod_key(pod), err)
                failed.append(pod_key(pod))
        if failed:
            return Status(f"{NAME}: failed to set {DELETION_COST} on {len(failed)} pod(s): {', '.join(failed)}")
        return None


def new(args: dict[str, Any] | None, handle: Handle) -> ScaleDownBinPack:
    """Registry factory: parse and validate ``args`` (ValueError naming the field), build the plugin."""
    return ScaleDownBinPack(parse_args(args), handle)
