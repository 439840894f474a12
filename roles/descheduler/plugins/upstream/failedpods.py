"""RemoveFailedPods (Deschedule): evict pods in phase ``Failed`` so their controllers recreate them elsewhere.

Optional narrowing: ``minPodLifetimeSeconds`` (only pods at least this old), ``reasons`` (the pod's
``status.reason`` or a container's waiting/terminated reason, init containers too with
``includingInitContainers``), ``exitCodes`` (a terminated container's exit code) and
``excludeOwnerKinds`` (pods owned by such a kind are kept).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from koordinator.apis.selectors import LabelSelector
from koordinator_roles.descheduler.framework.interfaces import DeschedulePlugin, Handle, Obj, Status

from .args import ArgsReader, Namespaces
from .podutil import (PodSelection, container_statuses, creation_time, evict, has_excluded_owner, node_name,
                      status, watch_pods)

NAME = "RemoveFailedPods"


@dataclass(frozen=True)
class RemoveFailedPodsArgs:
    """``RemoveFailedPodsArgs`` (every field optional; upstream sets no defaults)."""

    namespaces: Namespaces = Namespaces()
    label_selector: LabelSelector | None = None
    exclude_owner_kinds: tuple[str, ...] = ()
    min_pod_lifetime_seconds: int | None = None
    reasons: tuple[str, ...] = ()
    exit_codes: tuple[int, ...] = ()
    including_init_containers: bool = False


def parse_args(raw: Mapping[str, Any] | None) -> RemoveFailedPodsArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("namespaces", "labelSelector", "excludeOwnerKinds", "minPodLifetimeSeconds",
                               "reasons", "exitCodes", "includingInitContainers"))
    args = RemoveFailedPodsArgs(r.namespaces(), r.label_selector(), r.strings("excludeOwnerKinds"),
                                r.int("minPodLifetimeSeconds", None, minimum=0), r.strings("reasons"),
                                r.ints("exitCodes"), r.bool("includingInitContainers"))
    r.finish()
    return args


def failure_reasons(pod: Mapping[str, Any], including_init: bool) -> set[str]:
    """``status.reason`` plus every container's waiting and terminated reason."""
    reasons = {status(pod).get("reason") or ""}
    for cs in container_statuses(pod, including_init):
        state = cs.get("state") or {}
        reasons.add((state.get("waiting") or {}).get("reason") or "")
        reasons.add((state.get("terminated") or {}).get("reason") or "")
    return reasons - {""}


def exit_codes(pod: Mapping[str, Any], including_init: bool) -> set[int]:
    """Exit codes of the pod's terminated containers."""
    out = set()
    for cs in container_statuses(pod, including_init):
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated is not None:
            out.add(int(terminated.get("exitCode") or 0))
    return out


class RemoveFailedPods(DeschedulePlugin):
    """Evicts failed pods matching the configured reasons/exit codes/age."""

    name = NAME

    def __init__(self, args: RemoveFailedPodsArgs, handle: Handle, clock: Callable[[], float] = time.time) -> None:
        self.args = args
        self.handle = handle
        self.clock = clock
        self.selection = PodSelection(handle, args.namespaces, args.label_selector)
        watch_pods(handle)

    def evictable_failure(self, pod: Obj) -> bool:
        """Failed, and passing every configured narrowing (upstream ``validateCanEvict``)."""
        a = self.args
        if status(pod).get("phase") != "Failed":
            return False
        if has_excluded_owner(pod, a.exclude_owner_kinds):
            return False
        if a.min_pod_lifetime_seconds is not None and \
                self.clock() - creation_time(pod) < a.min_pod_lifetime_seconds:
            return False
        if a.reasons and not failure_reasons(pod, a.including_init_containers) & set(a.reasons):
            return False
        if a.exit_codes and not exit_codes(pod, a.including_init_containers) & set(a.exit_codes):
            return False
        return True

    def deschedule(self, nodes: list[Obj]) -> Status | None:
        """One Deschedule round over the profile's ready nodes."""
        for node in nodes:
            name = node_name(node)
            for pod in self.selection.pods_on(name, self.evictable_failure):
                if self.handle.evictor.node_limit_exceeded(name):
                    break
                reasons = sorted(failure_reasons(pod, self.args.including_init_containers))
                evict(self.handle, pod, NAME, "pod failed" + (f" ({', '.join(reasons)})" if reasons else ""))
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> RemoveFailedPods:
    """Factory for the registry."""
    return RemoveFailedPods(parse_args(args), handle)
