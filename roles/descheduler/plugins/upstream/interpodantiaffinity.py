"""RemovePodsViolatingInterPodAntiAffinity (Deschedule): evict pods whose required pod anti-affinity is violated.

A pod violates its anti-affinity when another running pod, in one of the term's namespaces (default:
the pod's own) and matching the term's labelSelector, runs on a node in the same topology domain
(same value of ``topologyKey``). On each node the lowest-priority pods are evicted first, and an
evicted pod stops counting against the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict
from koordinator_roles.descheduler.framework.interfaces import DeschedulePlugin, Handle, Obj, Status
from koordinator_roles.descheduler.framework.nodefit import TERMINAL_PHASES, node_labels

from .args import ArgsReader, Namespaces
from .podutil import PodSelection, evict, meta, node_name, sort_priority_low_to_high, spec, status, watch_pods

NAME = "RemovePodsViolatingInterPodAntiAffinity"


@dataclass(frozen=True)
class InterPodAntiAffinityArgs:
    """``RemovePodsViolatingInterPodAntiAffinityArgs``: namespaces, labelSelector."""

    namespaces: Namespaces = Namespaces()
    label_selector: LabelSelector | None = None


def parse_args(raw: Mapping[str, Any] | None) -> InterPodAntiAffinityArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("namespaces", "labelSelector"))
    args = InterPodAntiAffinityArgs(r.namespaces(), r.label_selector())
    r.finish()
    return args


def _terms(pod: Mapping[str, Any]) -> list[tuple[frozenset[str], LabelSelector, str]]:
    """(namespaces, selector, topologyKey) of each required anti-affinity term; invalid selectors are skipped."""
    anti = (spec(pod).get("affinity") or {}).get("podAntiAffinity") or {}
    out = []
    for term in anti.get("requiredDuringSchedulingIgnoredDuringExecution") or ():
        try:
            selector = label_selector_from_dict(term.get("labelSelector"))
        except SelectorError:
            continue
        namespaces = frozenset(term.get("namespaces") or ()) or frozenset({meta(pod).get("namespace", "")})
        out.append((namespaces, selector, term.get("topologyKey") or ""))
    return out


def _same_domain(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None, key: str) -> bool:
    if a is None or b is None:
        return False
    if node_name(a) == node_name(b):
        return True
    va, vb = node_labels(a).get(key), node_labels(b).get(key)
    return va is not None and va == vb


class RemovePodsViolatingInterPodAntiAffinity(DeschedulePlugin):
    """Evicts pods whose required pod anti-affinity another pod violates."""

    name = NAME

    def __init__(self, args: InterPodAntiAffinityArgs, handle: Handle) -> None:
        self.handle = handle
        self.selection = PodSelection(handle, args.namespaces, args.label_selector)
        watch_pods(handle)

    def deschedule(self, nodes: list[Obj]) -> Status | None:
        """One Deschedule round over the profile's ready nodes."""
        node_map = {node_name(n): n for n in nodes}
        running = lambda p: status(p).get("phase") not in TERMINAL_PHASES  # noqa: E731
        by_node = {name: self.handle.pods_on_node(name, running) for name in node_map}
        by_namespace: dict[str, list[Obj]] = {}
        for pods in by_node.values():
            for p in pods:
                by_namespace.setdefault(meta(p).get("namespace", ""), []).append(p)
        evicted: set[int] = set()
        for name, pods in by_node.items():
            pods = list(pods)
            sort_priority_low_to_high(pods)
            for pod in pods:
                if self.handle.evictor.node_limit_exceeded(name):
                    break
                terms = _terms(pod)
                if not terms or not self._violated(pod, terms, by_namespace, node_map, evicted):
                    continue
                if self.selection(pod) and evict(self.handle, pod, NAME, "pod violates its required inter-pod "
                                                                          "anti-affinity"):
                    # An evicted pod no longer counts against the pods checked after it.
                    evicted.add(id(pod))
        return None

    @staticmethod
    def _violated(pod: Obj, terms: list, by_namespace: Mapping[str, list[Obj]], node_map: Mapping[str, Obj],
                  evicted: set[int]) -> bool:
        own_node = node_map.get(spec(pod).get("nodeName", ""))
        own_name = meta(pod).get("name")
        for namespaces, selector, key in terms:
            for ns in namespaces:
                for other in by_namespace.get(ns, ()):
                    if id(other) in evicted or other is pod:
                        continue
                    if meta(other).get("name") == own_name and meta(other).get("namespace") == meta(pod).get(
                            "namespace"):
                        continue
                    if not selector.matches(meta(other).get("labels") or {}):
                        continue
                    if _same_domain(own_node, node_map.get(spec(other).get("nodeName", "")), key):
                        return True
        return False


def new(args: Mapping[str, Any] | None, handle: Handle) -> RemovePodsViolatingInterPodAntiAffinity:
    """Factory for the registry."""
    return RemovePodsViolatingInterPodAntiAffinity(parse_args(args), handle)
