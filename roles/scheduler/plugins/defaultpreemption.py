"""DefaultPreemption: kube-scheduler's PostFilter that evicts lower-priority pods to make room.

The evaluator lives in :mod:`koordinator_roles.scheduler.plugins.helper.preemption` (ElasticQuota's
quota-scoped preemption reuses it); this module is the plugin's registry entry and keeps its names.
"""

from __future__ import annotations

from typing import Any

from koordinator_roles.scheduler.plugins.helper.preemption import (  # noqa: F401 - re-exported
    Candidate, DISRUPTION_TARGET, DefaultPreemption, MSG_NOT_HELPFUL, MSG_NO_VICTIMS, MSG_POLICY_NEVER,
    MSG_TERMINATING, NAME, REASON_PREEMPTION_BY_SCHEDULER, calculate_num_candidates, dry_run_preemption,
    filter_pods_with_pdb_violation, fit_error_message, importance_key, pick_one_node_for_preemption,
    pod_eligible_to_preempt_others, pod_start_time, potential_nodes, preemption_allowed,
    select_victims_on_node, terminating_by_preemption)


def new(args: dict, handle: Any) -> DefaultPreemption:
    """Registry factory."""
    return DefaultPreemption(args or {}, handle)
