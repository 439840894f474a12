"""RemovePodsViolatingNodeAffinity (Deschedule): evict pods whose node no longer satisfies their node affinity.

``requiredDuringSchedulingIgnoredDuringExecution``: a pod with required node affinity whose node stops
matching it (nodeSelector included) is evicted when some other node fits it.
``preferredDuringSchedulingIgnoredDuringExecution``: a pod is evicted when another node that fits it
scores higher on its preferred terms than its current node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator.apis.selectors import LabelSelector
from koordinator_roles.descheduler.framework.interfaces import DeschedulePlugin, Handle, Obj, Status
from koordinator_roles.descheduler.framework.nodefit import (NodeFit, matches_node_selector, preferred_node_affinity,
                                                             preferred_score, required_node_affinity)

from .args import ArgsReader, Namespaces
from .podutil import PodSelection, evict, node_name, watch_pods

NAME = "RemovePodsViolatingNodeAffinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


@dataclass(frozen=True)
class NodeAffinityArgs:
    """``RemovePodsViolatingNodeAffinityArgs``: nodeAffinityType (required, no default), namespaces, labelSelector."""

    node_affinity_type: tuple[str, ...]
    namespaces: Namespaces = Namespaces()
    label_selector: LabelSelector | None = None


def parse_args(raw: Mapping[str, Any] | None) -> NodeAffinityArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("nodeAffinityType", "namespaces", "labelSelector"))
    types = r.strings("nodeAffinityType")
    if not types:
        raise r.error("nodeAffinityType", "nodeAffinityType needs to be set")
    r.one_of("nodeAffinityType", types, (REQUIRED, PREFERRED), what="nodeAffinityType")
    args = NodeAffinityArgs(tuple(dict.fromkeys(types)), r.namespaces(), r.label_selector())
    r.finish()
    return args


class RemovePodsViolatingNodeAffinity(DeschedulePlugin):
    """Evicts pods violating the configured kinds of node affinity, node by node."""

    name = NAME

    def __init__(self, args: NodeAffinityArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.selection = PodSelection(handle, args.namespaces, args.label_selector)
        watch_pods(handle)

    def deschedule(self, nodes: list[Obj]) -> Status | None:
        """One Deschedule round over the profile's ready nodes."""
        fit = NodeFit(self.handle, nodes)
        for affinity_type in self.args.node_affinity_type:
            for node in nodes:
                if affinity_type == REQUIRED:
                    self._required(node, fit)
                else:
                    self._preferred(node, fit)
        return None

    def _required(self, node: Obj, fit: NodeFit) -> None:
        name = node_name(node)

        def violates(pod: Obj) -> bool:
            """Has required node affinity that this node no longer satisfies."""
            return required_node_affinity(pod) is not None and not matches_node_selector(pod, node)

        for pod in self.selection.pods_on(name, violates):
            if self.handle.evictor.node_limit_exceeded(name):
                return
            if fit.fits_other_node(pod):
                evict(self.handle, pod, NAME, f"pod does not match the required node affinity of node {name}")

    def _preferred(self, node: Obj, fit: NodeFit) -> None:
        name = node_name(node)
        for pod in self.selection.pods_on(name, lambda p: bool(preferred_node_affinity(p))):
            if self.handle.evictor.node_limit_exceeded(name):
                return
            current = preferred_score(pod, node)
            if any(preferred_score(pod, other) > current and fit.fits(pod, other)
                   for other in fit.nodes if node_name(other) != name):
                evict(self.handle, pod, NAME, f"a node other than {name} better satisfies the preferred node affinity")


def new(args: Mapping[str, Any] | None, handle: Handle) -> RemovePodsViolatingNodeAffinity:
    """Factory for the registry."""
    return RemovePodsViolatingNodeAffinity(parse_args(args), handle)
