"""The scheduler cache: nodes and the pods on them, including pods assumed but not yet seen bound.

Informer handlers add, update and remove nodes and bound pods; the scheduling cycle assumes a
pod on its chosen node right after Reserve so the next cycle already counts it, long before the
informer shows the binding. The binding cycle then marks it finished; the informer's bound pod
confirms it (replacing the assumed copy, possibly on another node if someone else bound it);
an assumed pod never confirmed within ``assumed_ttl`` of finishing its binding is expired.

Events may arrive out of order across informers: a pod before its node (a placeholder NodeInfo
without a node holds it), a node deleted before its pods (the NodeInfo stays until its last pod
goes). :meth:`update_snapshot` copies only what changed since the last call into the
scheduling thread's :class:`Snapshot`.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Callable

from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo

log = logging.getLogger("koordinator.scheduler.cache")

DEFAULT_ASSUMED_TTL = 30.0


@dataclass
class _PodState:
    pod: PodInfo
    node_name: str
    assumed: bool = False
    binding_finished: bool = False
    deadline: float | None = None


class SchedulerCache:
    """Thread-safe: informer threads write, the scheduling thread assumes and snapshots, binders finish."""

    def __init__(self, *, assumed_ttl: float = DEFAULT_ASSUMED_TTL, clock: Callable[[], float] = time.monotonic,
                 on_expired: Callable[[PodInfo, str], None] | None = None) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        self._dirty: set[str] = set()
        self._layout_changed = True
        self._assumed_ttl = assumed_ttl
        self._clock = clock
        self._on_expired = on_expired

    # -- nodes ---------------------------------------------------------------------------------------

    def add_node(self, node: dict) -> None:
        name = node["metadata"]["name"]
        with self._lock:
            ni = self._nodes.get(name)
            if ni is None:
                ni = self._nodes[name] = NodeInfo(name=name)
            if ni.node is None:
                self._layout_changed = True
            ni.set_node(node)
            ni.generation += 1
            self._dirty.add(name)

    update_node = add_node

    def remove_node(self, node: dict) -> None:
        name = node["metadata"]["name"]
        with self._lock:
            ni = self._nodes.get(name)
            if ni is None:
                return
            if ni.pods:
                # Pods still point at it: keep them accounted until they go (kube does the same).
                ni.node = None
            else:
                del self._nodes[name]
            self._layout_changed = True
            self._dirty.discard(name)

    # -- bound pods (from the informer) --------------------------------------------------------------

    def add_pod(self, pod: dict) -> None:
        pi = PodInfo(pod)
        with self._lock:
            state = self._pods.get(pi.uid)
            if state is not None:
                if state.assumed:
                    # The binding is confirmed: the informer's object replaces the assumed copy.
                    self._remove_from_node(state.pod, state.node_name)
                    state.assumed = False
                    state.deadline = None
                else:
                    self._remove_from_node(state.pod, state.node_name)
                state.pod, state.node_name = pi, pi.node_name
            else:
                self._pods[pi.uid] = _PodState(pi, pi.node_name)
            self._add_to_node(pi, pi.node_name)

    def update_pod(self, old: dict, new: dict) -> None:
        self.add_pod(new)

    def remove_pod(self, pod: dict) -> None:
        uid = (pod.get("metadata") or {}).get("uid")
        with self._lock:
            state = self._pods.pop(uid, None) if uid else None
            if state is not None:
                self._remove_from_node(state.pod, state.node_name)

    # -- assumed pods (from the scheduling and binding cycles) ----------------------------------------

    def assume_pod(self, pod: PodInfo, node_name: str) -> None:
        with self._lock:
            if pod.uid in self._pods:
                raise ValueError(f"pod {pod.key} (uid {pod.uid}) is already in the cache")
            self._pods[pod.uid] = _PodState(pod, node_name, assumed=True)
            self._add_to_node(pod, node_name)

    def finish_binding(self, pod: PodInfo) -> None:
        with self._lock:
            state = self._pods.get(pod.uid)
            if state is not None and state.assumed:
                state.binding_finished = True
                state.deadline = self._clock() + self._assumed_ttl

    def forget_pod(self, pod: PodInfo) -> None:
        with self._lock:
            state = self._pods.get(pod.uid)
            if state is not None and state.assumed:
                del self._pods[pod.uid]
                self._remove_from_node(state.pod, state.node_name)

    def is_assumed(self, uid: str) -> bool:
        with self._lock:
            state = self._pods.get(uid)
            return state is not None and state.assumed

    def cleanup_expired(self) -> list[PodInfo]:
        """Drop assumed pods whose binding finished ``assumed_ttl`` ago without the informer confirming it."""
        now = self._clock()
        expired: list[tuple[PodInfo, str]] = []
        with self._lock:
            for uid, state in list(self._pods.items()):
                if state.assumed and state.binding_finished and state.deadline is not None and state.deadline <= now:
                    del self._pods[uid]
                    self._remove_from_node(state.pod, state.node_name)
                    expired.append((state.pod, state.node_name))
        for pod, node_name in expired:
            log.warning("assumed pod expired pod=%s node=%s", pod.key, node_name)
            if self._on_expired is not None:
                self._on_expired(pod, node_name)
        return [p for p, _ in expired]

    def run(self, stop: threading.Event, period: float = 1.0) -> None:
        """The expiry loop (a Runtime runnable)."""
        while not stop.wait(period):
            self.cleanup_expired()

    # -- snapshot --------------------------------------------------------------------------------------

    def update_snapshot(self, snapshot: Snapshot) -> None:
        """Bring ``snapshot`` up to date: changed nodes are cloned in; a changed node set rebuilds the layout."""
        with self._lock:
            if self._layout_changed:
                snapshot.set_nodes([ni.clone() for ni in self._nodes.values() if ni.node is not None])
                self._layout_changed = False
                self._dirty.clear()
                return
            if not self._dirty:
                return
            affinity_changed = False
            for name in self._dirty:
                ni = self._nodes.get(name)
                if ni is None or ni.node is None:
                    continue
                old = snapshot.get(name)
                clone = ni.clone()
                # The snapshot's affinity lists hold NodeInfos: they must point at the new clone.
                affinity_changed = affinity_changed or old is None or _has_affinity(old) or _has_affinity(clone)
                snapshot.update_node(clone)
            self._dirty.clear()
        if affinity_changed:
            snapshot.refresh_affinity_lists()

    def mark_dirty(self, node_names) -> None:
        """Copy these nodes into the snapshot again at the next :meth:`update_snapshot` (a plugin rewrote their
        rows for one cycle only: Reservation's restore of reserved room for owner pods)."""
        with self._lock:
            self._dirty.update(n for n in node_names if n in self._nodes)

    def dump(self) -> dict:
        """Nodes and pods as the cache sees them (debugging, tests)."""
        with self._lock:
            return {name: sorted(p.key for p in ni.pods.values()) for name, ni in self._nodes.items()}

    # -- internals -------------------------------------------------------------------------------------

    def _add_to_node(self, pod: PodInfo, node_name: str) -> None:
        ni = self._nodes.get(node_name)
        if ni is None:
            ni = self._nodes[node_name] = NodeInfo(name=node_name)
        ni.add_pod(pod)
        self._dirty.add(node_name)

    def _remove_from_node(self, pod: PodInfo, node_name: str) -> None:
        ni = self._nodes.get(node_name)
        if ni is None:
            return
        ni.remove_pod(pod.uid)
        self._dirty.add(node_name)
        if ni.node is None and not ni.pods:
            del self._nodes[node_name]


def _has_affinity(ni: NodeInfo) -> bool:
    return bool(ni.pods_with_affinity or ni.pods_with_required_anti_affinity)
