"""RemoveDuplicates (Balance): spread pods of one owner running the same images across the nodes.

On each node, a pod whose (namespace, owner kind, owner name, image) keys equal those of an earlier
pod there is a duplicate. For every owner, with ``n`` pods in all and ``t`` nodes that could run them
(schedulable, matching the nodeSelector/required affinity, tolerating NoSchedule taints), each node
keeps at most ``ceil(n / t)`` of them; the extra duplicates are evicted. Owners that fit fewer than two
nodes are left alone. Pods without owners, or with an owner of an ``excludeOwnerKinds`` kind, are ignored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, Handle, Obj, Status
from koordinator_roles.descheduler.framework.nodefit import (is_unschedulable, matches_node_selector,
                                                             tolerates_no_schedule_taints)

from .args import ArgsReader, Namespaces
from .podutil import PodSelection, creation_time, evict, has_excluded_owner, meta, node_name, owner_refs, spec, \
    watch_pods

NAME = "RemoveDuplicates"


@dataclass(frozen=True)
class RemoveDuplicatesArgs:
    """``RemoveDuplicatesArgs``: namespaces, excludeOwnerKinds."""

    namespaces: Namespaces = Namespaces()
    exclude_owner_kinds: tuple[str, ...] = ()


def parse_args(raw: Mapping[str, Any] | None) -> RemoveDuplicatesArgs:
    """The plugin's args with upstream defaults; ValueError naming the field when invalid."""
    r = ArgsReader(NAME, raw, ("namespaces", "excludeOwnerKinds"))
    args = RemoveDuplicatesArgs(r.namespaces(), r.strings("excludeOwnerKinds"))
    r.finish()
    return args


def duplicate_keys(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """Sorted ``namespace/kind/name/image`` for every owner reference × container."""
    ns = meta(pod).get("namespace", "")
    images = [c.get("image", "") for c in spec(pod).get("containers") or ()]
    return tuple(sorted(f"{ns}/{ref.get('kind', '')}/{ref.get('name', '')}/{image}"
                        for ref in owner_refs(pod) for image in images))


class RemoveDuplicates(BalancePlugin):
    """Evicts the duplicates above each owner's fair share per node."""

    name = NAME

    def __init__(self, args: RemoveDuplicatesArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        self.selection = PodSelection(handle, args.namespaces)
        watch_pods(handle)

    def _candidate(self, pod: Obj) -> bool:
        return bool(owner_refs(pod)) and not has_excluded_owner(pod, self.args.exclude_owner_kinds)

    def balance(self, nodes: list[Obj]) -> Status | None:
        # owner key -> pods counted in all; owner key -> node -> duplicates there (the first pod excluded).
        """One Balance round over the profile's ready nodes."""
        occurrences: dict[tuple[str, ...], int] = {}
        duplicates: dict[tuple[str, ...], dict[str, list[Obj]]] = {}
        for node in nodes:
            name = node_name(node)
            pods = self.selection.pods_on(name, self._candidate)
            pods.sort(key=creation_time)  # the oldest pod of an owner stays
            seen: set[tuple[str, ...]] = set()
            for pod in pods:
                key = duplicate_keys(pod)
                if not key:
                    continue
                occurrences[key] = occurrences.get(key, 0) + 1
                if key in seen:
                    duplicates.setdefault(key, {}).setdefault(name, []).append(pod)
                else:
                    seen.add(key)
        for key, per_node in duplicates.items():
            sample = next(iter(per_node.values()))[0]
            targets = [n for n in nodes if not is_unschedulable(n) and matches_node_selector(sample, n)
                       and tolerates_no_schedule_taints(sample, n)]
            if len(targets) < 2:
                continue  # nowhere else to spread them
            upper_avg = math.ceil(occurrences[key] / len(targets))
            for name, pods in per_node.items():
                # ``pods`` excludes the node's first pod of the owner, hence the +1 / -1.
                if len(pods) + 1 <= upper_avg:
                    continue
                for pod in pods[upper_avg - 1:]:
                    if self.handle.evictor.node_limit_exceeded(name):
                        break
                    evict(self.handle, pod, NAME, f"pod is a duplicate of its owner on node {name} "
                                                  f"(more than {upper_avg} there)")
        return None


def new(args: Mapping[str, Any] | None, handle: Handle) -> RemoveDuplicates:
    """Factory for the registry."""
    return RemoveDuplicates(parse_args(args), handle)
