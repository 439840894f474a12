"""RemovePodsViolatingNodeTaints (Deschedule): evict pods that do not tolerate their node's NoSchedule taints.

Only ``NoSchedule`` taints count (``PreferNoSchedule`` too with ``includePreferNoSchedule``);
``excludedTaints`` entries (``key`` or ``key=value``) are ignored, and when ``includedTaints`` is set
only the taints it names count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator.apis.selectors import LabelSelector
from koordinator.apis.taints import NO_SCHEDULE, PREFER_NO_SCHEDULE, tolerates
from koordinator_roles.descheduler.framework.interfaces import DeschedulePlugin, Handle, Obj, Status

from .args import ArgsReader, Namespaces
from .podutil import PodSelection, evict, node_name, spec, watch_pods

NAME = "RemovePodsViolatingNodeTaints"


@dataclass(frozen=True)
class NodeTaintsArgs:
    """``RemovePodsViolatingNodeTaintsArgs`` (every field optional)."""

    namespaces: Namespaces = Namespaces()
    label_selector: LabelSelector | None = None
    include_prefer_no_schedule: bool = False
    excluded_taints: tuple[str, ...] = ()
    included_taints: tuple[str, ...] = ()


def parse_args(raw: Mapping[str, Any] | None) -> NodeTaintsArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("namespaces", "labelSelector", "includePreferNoSchedule", "excludedTaints",
                               "includedTaints"))
    args = NodeTaintsArgs(r.namespaces(), r.label_selector(), r.bool("includePreferNoSchedule"),
                          r.strings("excludedTaints"), r.strings("includedTaints"))
    r.finish()
    return args


def _taint_in(taint: Mapping[str, Any], entries: tuple[str, ...]) -> bool:
    """A ``key`` entry matches any value of the key; ``key=value`` only that value."""
    key, value = taint.get("key") or "", taint.get("value") or ""
    for entry in entries:
        k, sep, v = entry.partition("=")
        if k == key and (not sep or v == value):
            return True
    return False


class RemovePodsViolatingNodeTaints(DeschedulePlugin):
    """Evicts, node by node, the pods that do not tolerate one of the node's counted taints."""

    name = NAME

    def __init__(self, args: NodeTaintsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.selection = PodSelection(handle, args.namespaces, args.label_selector)
        self.effects = (NO_SCHEDULE, PREFER_NO_SCHEDULE) if args.include_prefer_no_schedule else (NO_SCHEDULE,)
        watch_pods(handle)

    def counted(self, taint: Mapping[str, Any]) -> bool:
        """Whether this taint is one the plugin enforces."""
        if taint.get("effect") not in self.effects:
            return False
        if self.args.excluded_taints and _taint_in(taint, self.args.excluded_taints):
            return False
        return not self.args.included_taints or _taint_in(taint, self.args.included_taints)

    def deschedule(self, nodes: list[Obj]) -> Status | None:
        """One Deschedule round over the profile's ready nodes."""
        for node in nodes:
            taints = [t for t in spec(node).get("taints") or () if self.counted(t)]
            if not taints:
                continue  # nothing to enforce: skip listing the node's pods
            name = node_name(node)
            for pod in self.selection.pods_on(name):
                if self.handle.evictor.node_limit_exceeded(name):
                    break
                tolerations = spec(pod).get("tolerations")
                untolerated = next((t for t in taints if not tolerates(tolerations, t)), None)
                if untolerated is not None:
                    evict(self.handle, pod, NAME,
                          f"pod does not tolerate taint {untolerated.get('key', '')}={untolerated.get('value', '')}:"
                          f"{untolerated.get('effect')} of node {name}")
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> RemovePodsViolatingNodeTaints:
    """Factory for the registry."""
    return RemovePodsViolatingNodeTaints(parse_args(args), handle)
