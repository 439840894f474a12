"""PodLifeTime (Deschedule): evict pods older than ``maxPodLifeTimeSeconds``, oldest first.

With ``states``, only pods in one of them: the phase (``Pending``/``Running``) or a container waiting
with reason ``PodInitializing``/``ContainerCreating``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from koordinator.apis.selectors import LabelSelector
from koordinator_roles.descheduler.framework.interfaces import DeschedulePlugin, Handle, Obj, Status

from .args import ArgsReader, Namespaces
from .podutil import (PodSelection, creation_time, evict, node_name, sort_oldest_first, spec, status,
                      waiting_reasons, watch_pods)

NAME = "PodLifeTime"
ALLOWED_STATES = ("Running", "Pending", "PodInitializing", "ContainerCreating")


@dataclass(frozen=True)
class PodLifeTimeArgs:
    """``PodLifeTimeArgs``; ``maxPodLifeTimeSeconds`` is required (no default)."""

    max_pod_lifetime_seconds: int
    states: tuple[str, ...] = ()
    namespaces: Namespaces = Namespaces()
    label_selector: LabelSelector | None = None


def parse_args(raw: Mapping[str, Any] | None) -> PodLifeTimeArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("maxPodLifeTimeSeconds", "states", "namespaces", "labelSelector"))
    max_life = r.int("maxPodLifeTimeSeconds", None, minimum=0)
    if max_life is None:
        raise r.error("maxPodLifeTimeSeconds", "MaxPodLifeTimeSeconds not set")
    namespaces, selector = r.namespaces(), r.label_selector()
    states = r.strings("states")
    r.one_of("states", states, ALLOWED_STATES)
    args = PodLifeTimeArgs(max_life, states, namespaces, selector)
    r.finish()
    return args


class PodLifeTime(DeschedulePlugin):
    """Evicts pods that lived longer than the limit."""

    name = NAME

    def __init__(self, args: PodLifeTimeArgs, handle: Handle, clock: Callable[[], float] = time.time) -> None:
        self.args = args
        self.handle = handle
        self.clock = clock
        self.selection = PodSelection(handle, args.namespaces, args.label_selector)
        watch_pods(handle)

    def too_old(self, pod: Obj) -> bool:
        """Older than the limit, in one of ``states`` when they are set."""
        if self.clock() - creation_time(pod) <= self.args.max_pod_lifetime_seconds:
            return False
        if not self.args.states:
            return True
        states = set(self.args.states)
        return status(pod).get("phase") in states or bool(waiting_reasons(pod) & states)

    def deschedule(self, nodes: list[Obj]) -> Status | None:
        """One Deschedule round over the profile's ready nodes."""
        pods: list[Obj] = []
        for node in nodes:
            pods += self.selection.pods_on(node_name(node), self.too_old)
        sort_oldest_first(pods)  # across nodes: limits cut the youngest
        for pod in pods:
            name = spec(pod).get("nodeName", "")
            if self.handle.evictor.node_limit_exceeded(name):
                continue
            age = int(self.clock() - creation_time(pod))
            evict(self.handle, pod, NAME, f"pod lived {age}s, longer than maxPodLifeTimeSeconds "
                                          f"{self.args.max_pod_lifetime_seconds}")
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> PodLifeTime:
    """Factory for the registry."""
    return PodLifeTime(parse_args(args), handle)
