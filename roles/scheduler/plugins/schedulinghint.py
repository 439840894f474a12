"""SchedulingHint (Koordinator's ``pkg/scheduler/plugins/schedulinghint``): node hints from a pod annotation.

- BeforePreFilter parses ``internal.scheduling.koordinator.sh/scheduling-hint`` (or the deprecated
  ``scheduling.koordinator.sh/scheduling-hint``) and stores it in the CycleState for every plugin
  (:mod:`koordinator_roles.scheduler.plugins.helper.schedulinghint`); a malformed annotation makes
  the pod UnschedulableAndUnresolvable, naming the annotation and its value.
- PreFilter: ``nodeNames`` restricts the pod to those nodes (a PreFilterResult).
- PreferNodes: the first ``maxHintNodes`` of ``preferredNodeNames`` are tried in order with the
  full Filter; the first feasible one is taken outright (the framework, see ``find_nodes_that_fit``).

A pod without the annotation costs two dict lookups per cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator_roles.scheduler.framework.interfaces import (ClusterEvent, EnqueueExtensions, PreferNodesPlugin,
                                                              PreFilterPlugin, PreFilterResult, PreFilterTransformer)
from koordinator_roles.scheduler.framework.status import CycleState, Status
from koordinator_roles.scheduler.framework.types import PodInfo
from koordinator_roles.scheduler.plugins.helper.schedulinghint import (STATE_KEY, SchedulingHintError,
                                                                       hint_from_state, parse_scheduling_hint)

NAME = "SchedulingHint"
DEFAULT_MAX_HINT_NODES = 100


@dataclass(frozen=True)
class SchedulingHintArgs:
    """SchedulingHintArgs: ``maxHintNodes`` (default 100, must be > 0)."""

    max_hint_nodes: int = DEFAULT_MAX_HINT_NODES


def parse_args(args: Mapping[str, Any] | None) -> SchedulingHintArgs:
    """Defaults and Koordinator's validation; a ValueError names the field."""
    raw = (args or {}).get("maxHintNodes")
    if raw is None:
        return SchedulingHintArgs()
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise ValueError(f"maxHintNodes: Invalid value: {raw!r}: must be an integer")
    if raw <= 0:
        raise ValueError(f"maxHintNodes: Invalid value: {raw}: must be greater than 0")
    return SchedulingHintArgs(max_hint_nodes=raw)


class SchedulingHint(PreFilterPlugin, PreFilterTransformer, PreferNodesPlugin, EnqueueExtensions):
    """Restrict (``nodeNames``) or prefer (``preferredNodeNames``) nodes named by the pod's hint."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        self.args = parse_args(args)
        self.handle = handle

    def update_args(self, args: Mapping[str, Any] | None) -> None:
        """Hot reload: ``maxHintNodes`` applies from the next cycle."""
        self.args = parse_args(args)

    def before_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PodInfo | None, Status | None]:
        annotations = (pod.pod.get("metadata") or {}).get("annotations")
        try:
            hint = parse_scheduling_hint(annotations)
        except SchedulingHintError as err:
            return None, Status.unresolvable(str(err))
        if hint is not None:
            state.write(STATE_KEY, hint)
        return None, None

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Any) -> tuple[PreFilterResult | None, Status | None]:
        hint = hint_from_state(state)
        if hint is None or not hint.node_names:
            return None, Status.skip()
        return PreFilterResult(set(hint.node_names)), None

    def prefer_nodes(self, state: CycleState, pod: PodInfo) -> list[str]:
        hint = hint_from_state(state)
        if hint is None or not hint.preferred_node_names:
            return []
        return list(hint.preferred_node_names[:self.args.max_hint_nodes])


    def events_to_register(self) -> list[ClusterEvent]:
        # A pod this plugin rejected waits for one of its hinted nodes to appear; a malformed annotation
        # waits for the pod's own update, which requeues it anyway.
        return [ClusterEvent("Node", "Add", _hinted_node_added)]


def _hinted_node_added(pod: dict, old: Any, new: Any) -> bool:
    try:
        hint = parse_scheduling_hint((pod.get("metadata") or {}).get("annotations"))
    except SchedulingHintError:
        return False
    name = ((new or {}).get("metadata") or {}).get("name")
    return hint is not None and name in hint.node_names


def new(args: dict | None, handle: Any) -> SchedulingHint:
    """Registry factory; ``args`` is SchedulingHintArgs."""
    return SchedulingHint(args, handle)
