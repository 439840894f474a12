"""The reservation cache: every Reservation with its room, owners and the pods assigned to it, per node.

Fed by the Reservation and Pod informers (pods annotated ``reservation-allocated``) and by the
scheduling cycle (pods assumed into a reservation at Reserve, forgotten at Unreserve). Readers on
the scheduling thread get :class:`ReservationInfo` objects whose fields are replaced, never mutated
in place, so they can read them without the lock.
"""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Mapping

from koordinator.apis import extension
from koordinator.apis import reservation as rv


class ReservationInfo:
    """One Reservation as the scheduler sees it (Koordinator's ``frameworkext.ReservationInfo``).

    ``allocatable``: status.allocatable once Available, else the template's requests; ``reserved``:
    resources kept back from owners (annotation ``node.koordinator.sh/reservation``); ``assigned``:
    pod uid → (pod key, requests) of the owner pods using it; ``owners``: None when ``spec.owners``
    does not parse (such a reservation matches nobody; ``owner_error`` says why).
    """

    __slots__ = ("obj", "uid", "name", "node_name", "available", "allocatable", "reserved", "owners",
                 "owner_error", "allocate_once", "policy", "order", "assigned", "labels", "terminating")

    def __init__(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        self.obj = obj
        self.uid: str = meta.get("uid") or meta.get("name", "")
        self.name: str = meta.get("name", "")
        self.labels: Mapping[str, str] = meta.get("labels") or {}
        self.terminating = bool(meta.get("deletionTimestamp"))
        self.node_name: str = rv.status_of(obj).get("nodeName") or ""
        self.available = rv.is_available(obj)
        self.allocatable = rv.allocatable(obj)
        self.reserved = _reserved(obj)
        try:
            self.owners: rv.OwnerMatcher | None = rv.OwnerMatcher.parse(rv.spec_of(obj).get("owners"))
            self.owner_error = ""
        except rv.ReservationError as e:
            self.owners, self.owner_error = None, str(e)
        self.allocate_once = rv.allocate_once(obj)
        self.policy = rv.allocate_policy(obj)
        self.order = rv.order(obj)
        self.assigned: dict[str, tuple[str, dict[str, int]]] = {}

    @property
    def allocated(self) -> dict[str, int]:
        """Σ requests of the assigned owner pods."""
        total: dict[str, int] = {}
        for _, requests in self.assigned.values():
            for k, v in requests.items():
                total[k] = total.get(k, 0) + v
        return total

    @property
    def remaining(self) -> dict[str, int]:
        """Allocatable − reserved − allocated, per allocatable resource, never below 0."""
        allocated = self.allocated
        return {k: max(0, v - self.reserved.get(k, 0) - allocated.get(k, 0)) for k, v in self.allocatable.items()}

    @property
    def matchable(self) -> bool:
        """Owner pods may be placed into it: Available, owners parse, and not already consumed when allocateOnce."""
        return self.available and self.owners is not None and not (self.allocate_once and self.assigned)

    def __repr__(self) -> str:
        return f"ReservationInfo({self.name}, node={self.node_name}, assigned={len(self.assigned)})"


def _reserved(obj: Mapping[str, Any]) -> dict[str, int]:
    raw = ((obj.get("metadata") or {}).get("annotations") or {}).get(rv.ANNOTATION_NODE_RESERVATION)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
        return extension.resource_list(data.get("resources") or {}) if isinstance(data, dict) else {}
    except (TypeError, ValueError):
        return {}


class ReservationCache:
    """Reservations by uid, the matchable ones per node, and which pod is assigned to which reservation.

    ``on_allocated_change(uid)`` is called (outside the lock) whenever a reservation's assigned pods change,
    so the reserve pod standing for it in the scheduler cache can shrink or grow.
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._infos: dict[str, ReservationInfo] = {}
        self._by_name: dict[str, str] = {}
        self._matchable_by_node: dict[str, dict[str, ReservationInfo]] = {}
        # Pods seen with reservation-allocated before their reservation: uid -> (reservation uid, key, requests).
        self._pod_reservation: dict[str, tuple[str, str, dict[str, int]]] = {}
        self.on_allocated_change: Callable[[str], None] = lambda uid: None
        self.on_change: Callable[[], None] = lambda: None

    # -- reading -------------------------------------------------------------------------------------

    def has_matchable(self) -> bool:
        return bool(self._matchable_by_node)

    def matchable_by_node(self) -> dict[str, list[ReservationInfo]]:
        with self._lock:
            return {node: list(infos.values()) for node, infos in self._matchable_by_node.items()}

    def get(self, uid: str) -> ReservationInfo | None:
        return self._infos.get(uid)

    def get_by_name(self, name: str) -> ReservationInfo | None:
        with self._lock:
            uid = self._by_name.get(name)
            return self._infos.get(uid) if uid else None

    def on_node(self, node_name: str) -> list[ReservationInfo]:
        """Every Available reservation on the node (matchable or not)."""
        with self._lock:
            return [i for i in self._infos.values() if i.available and i.node_name == node_name]

    def available_nodes(self) -> set[str]:
        """Nodes with at least one Available reservation."""
        with self._lock:
            return {i.node_name for i in self._infos.values() if i.available}

    def allocated_of(self, uid: str) -> dict[str, int]:
        info = self._infos.get(uid)
        return info.allocated if info is not None else {}

    def reservation_of_pod(self, pod_uid: str) -> str:
        """UID of the reservation the pod is assigned to ("" = none)."""
        entry = self._pod_reservation.get(pod_uid)
        return entry[0] if entry is not None else ""

    def owners_of(self, uid: str) -> list[str]:
        """Keys of the pods assigned to the reservation."""
        info = self._infos.get(uid)
        return sorted(key for key, _ in info.assigned.values()) if info is not None else []

    # -- Reservation events ----------------------------------------------------------------------------

    def add_reservation(self, obj: dict) -> None:
        info = ReservationInfo(obj)
        with self._lock:
            old = self._infos.get(info.uid)
            if old is not None:
                info.assigned = old.assigned
            else:
                info.assigned = {pod_uid: (key, req) for pod_uid, (r_uid, key, req) in self._pod_reservation.items()
                                 if r_uid == info.uid}
            self._infos[info.uid] = info
            self._by_name[info.name] = info.uid
            self._reindex(old, info)
        if old is None and info.assigned:
            # Owner pods seen first (a restart): the reserve pod may have been built without them.
            self.on_allocated_change(info.uid)
        self.on_change()

    def update_reservation(self, old: dict, new: dict) -> None:
        self.add_reservation(new)

    def delete_reservation(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)
        meta = obj.get("metadata") or {}
        uid = meta.get("uid") or meta.get("name", "")
        with self._lock:
            old = self._infos.pop(uid, None)
            if old is not None and self._by_name.get(old.name) == uid:
                del self._by_name[old.name]
            self._reindex(old, None)
        self.on_change()

    def _reindex(self, old: ReservationInfo | None, new: ReservationInfo | None) -> None:
        if old is not None:
            bucket = self._matchable_by_node.get(old.node_name)
            if bucket is not None:
                bucket.pop(old.uid, None)
                if not bucket:
                    del self._matchable_by_node[old.node_name]
        if new is not None and new.matchable:
            self._matchable_by_node.setdefault(new.node_name, {})[new.uid] = new

    # -- pods ----------------------------------------------------------------------------------------

    def assume_pod(self, uid: str, pod_uid: str, key: str, requests: dict[str, int]) -> None:
        """The scheduling cycle placed the pod into the reservation (Reserve)."""
        self._assign(uid, pod_uid, key, requests)

    def forget_pod(self, uid: str, pod_uid: str) -> None:
        """Undo :meth:`assume_pod` (Unreserve)."""
        self._unassign(pod_uid, only=uid)

    def add_pod(self, pod: dict) -> None:
        """A pod from the informer: assigned to its reservation while bound and active.

        A pod not bound yet keeps what the scheduling cycle assumed for it: between Reserve and the bind
        (PreBind's annotation included) only Unreserve may give its room back, else a second owner could be
        placed into an allocateOnce reservation while the first is still binding. A bound owner wakes the
        listeners even when its assignment is unchanged: that is when the controller may count it as an owner.
        """
        meta = pod.get("metadata") or {}
        pod_uid = meta.get("uid", "")
        allocated = rv.allocated_reservation(pod)
        node = (pod.get("spec") or {}).get("nodeName")
        phase = (pod.get("status") or {}).get("phase")
        if phase in ("Succeeded", "Failed") or (node and allocated is None):
            if pod_uid in self._pod_reservation:
                self._unassign(pod_uid)
            return
        if not node or allocated is None:
            return
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        if not self._assign(allocated[1], pod_uid, key, extension.pod_requests(pod)):
            self.on_change()

    def update_pod(self, old: dict, new: dict) -> None:
        self.add_pod(new)

    def delete_pod(self, pod: Any) -> None:
        pod = getattr(pod, "obj", pod)
        pod_uid = (pod.get("metadata") or {}).get("uid", "")
        if pod_uid in self._pod_reservation:
            self._unassign(pod_uid)

    def _assign(self, uid: str, pod_uid: str, key: str, requests: dict[str, int]) -> bool:
        """Record the pod in the reservation; whether anything changed (listeners are told when it did)."""
        changed: list[str] = []
        with self._lock:
            previous = self._pod_reservation.get(pod_uid)
            if previous is not None and previous[0] != uid:
                changed += self._drop(pod_uid, previous[0])
            self._pod_reservation[pod_uid] = (uid, key, requests)
            info = self._infos.get(uid)
            if info is not None and info.assigned.get(pod_uid) != (key, requests):
                info.assigned = {**info.assigned, pod_uid: (key, requests)}
                self._reindex(info, info)  # allocateOnce: no longer matchable once assigned
                changed.append(uid)
        for u in changed:
            self.on_allocated_change(u)
        if changed:
            self.on_change()
        return bool(changed)

    def _unassign(self, pod_uid: str, only: str | None = None) -> None:
        with self._lock:
            previous = self._pod_reservation.get(pod_uid)
            if previous is None or (only is not None and previous[0] != only):
                return
            del self._pod_reservation[pod_uid]
            changed = self._drop(pod_uid, previous[0])
        for u in changed:
            self.on_allocated_change(u)
        if changed:
            self.on_change()

    def _drop(self, pod_uid: str, uid: str) -> list[str]:
        info = self._infos.get(uid)
        if info is None or pod_uid not in info.assigned:
            return []
        info.assigned = {k: v for k, v in info.assigned.items() if k != pod_uid}
        self._reindex(info, info)
        return [uid]
