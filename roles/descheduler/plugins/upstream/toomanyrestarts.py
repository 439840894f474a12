"""RemovePodsHavingTooManyRestarts (Deschedule): evict pods whose containers restarted too often.

The restart counts of the pod's containers are summed (init containers too with
``includingInitContainers``); a pod at or above ``podRestartThreshold`` is evicted. With ``states``,
only pods in one of them count: the pod phase ``Running`` or a container waiting in ``CrashLoopBackOff``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator.apis.selectors import LabelSelector
from koordinator_roles.descheduler.framework.interfaces import DeschedulePlugin, Handle, Obj, Status

from .args import ArgsReader, Namespaces
from .podutil import PodSelection, container_statuses, evict, node_name, status, waiting_reasons, watch_pods

NAME = "RemovePodsHavingTooManyRestarts"
ALLOWED_STATES = ("Running", "CrashLoopBackOff")


@dataclass(frozen=True)
class TooManyRestartsArgs:
    """``RemovePodsHavingTooManyRestartsArgs``; ``podRestartThreshold`` has no default and must be ≥ 1."""

    pod_restart_threshold: int
    including_init_containers: bool = False
    states: tuple[str, ...] = ()
    namespaces: Namespaces = Namespaces()
    label_selector: LabelSelector | None = None


def parse_args(raw: Mapping[str, Any] | None) -> TooManyRestartsArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("podRestartThreshold", "includingInitContainers", "states", "namespaces",
                               "labelSelector"))
    namespaces, selector = r.namespaces(), r.label_selector()
    threshold = r.int("podRestartThreshold", 0)
    if threshold < 1:
        raise r.error("podRestartThreshold", f"invalid PodsHavingTooManyRestarts threshold {threshold} "
                                             "(must be at least 1)")
    states = r.strings("states")
    r.one_of("states", states, ALLOWED_STATES)
    args = TooManyRestartsArgs(threshold, r.bool("includingInitContainers"), states, namespaces, selector)
    r.finish()
    return args


def restarts(pod: Mapping[str, Any], including_init: bool) -> int:
    """Σ restartCount over the pod's container statuses (and init container statuses when asked)."""
    return sum(int(cs.get("restartCount") or 0) for cs in container_statuses(pod, including_init))


class RemovePodsHavingTooManyRestarts(DeschedulePlugin):
    """Evicts pods whose restart count reached the threshold."""

    name = NAME

    def __init__(self, args: TooManyRestartsArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.selection = PodSelection(handle, args.namespaces, args.label_selector)
        watch_pods(handle)

    def too_many(self, pod: Obj) -> bool:
        """Restarts at or above the threshold, in one of ``states`` when they are set."""
        if restarts(pod, self.args.including_init_containers) < self.args.pod_restart_threshold:
            return False
        if not self.args.states:
            return True
        states = set(self.args.states)
        return status(pod).get("phase") in states or bool(
            waiting_reasons(pod, self.args.including_init_containers) & states)

    def deschedule(self, nodes: list[Obj]) -> Status | None:
        """One Deschedule round over the profile's ready nodes."""
        for node in nodes:
            name = node_name(node)
            for pod in self.selection.pods_on(name, self.too_many):
                if self.handle.evictor.node_limit_exceeded(name):
                    break
                count = restarts(pod, self.args.including_init_containers)
                evict(self.handle, pod, NAME, f"pod restarted {count} times "
                                              f"(threshold {self.args.pod_restart_threshold})")
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> RemovePodsHavingTooManyRestarts:
    """Factory for the registry."""
    return RemovePodsHavingTooManyRestarts(parse_args(args), handle)
