"""Reserve pods: the Reservation informer seen as a stream of pods, for the scheduler's queue and cache.

The scheduler wiring registers its ordinary pod handlers here (``add_handler``) and looks pods up
through :meth:`ReservePodSource.get` when they are not in the Pod informer. So a Pending
Reservation becomes an unassigned pod that the queue schedules; an Available one an assigned pod
that the scheduler cache counts on its node (it consumes capacity for everyone); a Succeeded,
Failed or deleted one goes away, freeing its room.

While Available, the reserve pod requests what is still free inside the reservation
(allocatable − allocated): the owner pods assigned to it are in the cache as pods themselves, so
node capacity is never counted twice (Koordinator trims that double count in every cycle instead).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable

from koordinator.apis import reservation as rv

Handler = Callable[..., None]


class ReservePodSource:
    """Reserve pods keyed like pods (``namespace/name``), kept current from the Reservation informer."""

    def __init__(self, informer: Any, allocated_of: Callable[[str], dict[str, int]]) -> None:
        self._informer = informer
        self._allocated_of = allocated_of
        self._lock = threading.RLock()
        self._pods: dict[str, dict] = {}           # key -> reserve pod
        self._keys: dict[str, str] = {}            # reservation uid -> key
        self._reservations: dict[str, dict] = {}   # reservation uid -> the Reservation
        self._handlers: list[tuple[Handler | None, Handler | None, Handler | None]] = []
        self._scheduler_cache: Any = None

    # -- the scheduler's side ----------------------------------------------------------------------

    def add_handler(self, on_add: Handler | None = None, on_update: Handler | None = None,
                    on_delete: Handler | None = None) -> Any:
        """Deliver reserve pods to these pod handlers; returns the informer registration (``has_synced``)."""
        with self._lock:
            self._handlers.append((on_add, on_update, on_delete))
            first = len(self._handlers) == 1
        if not first:
            return _AlwaysSynced()
        return self._informer.add_handler(self._on_add, self._on_update, self._on_delete)

    def attach_cache(self, cache: Any) -> None:
        """The scheduler cache, so that nodes whose snapshot row a cycle rewrote are refreshed next cycle."""
        self._scheduler_cache = cache

    def mark_dirty(self, node_names: Iterable[str]) -> None:
        cache = self._scheduler_cache
        if cache is not None:
            cache.mark_dirty(node_names)

    def get(self, key: str) -> dict | None:
        return self._pods.get(key)

    # -- informer events ---------------------------------------------------------------------------

    def _build(self, r: dict) -> dict:
        uid = (r.get("metadata") or {}).get("uid", "")
        if rv.is_available(r):
            remaining = {k: max(0, v - self._allocated_of(uid).get(k, 0)) for k, v in rv.allocatable(r).items()}
            return rv.reserve_pod(r, remaining)
        return rv.reserve_pod(r)

    def _on_add(self, r: dict) -> None:
        with self._lock:
            pod = self._build(r)
            uid = pod["metadata"]["uid"]
            key = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
            self._pods[key], self._keys[uid], self._reservations[uid] = pod, key, r
            for on_add, _, _ in self._handlers:
                if on_add is not None:
                    on_add(pod)

    def _on_update(self, old_r: dict, new_r: dict) -> None:
        with self._lock:
            uid = (new_r.get("metadata") or {}).get("uid", "")
            old = self._pods.get(self._keys.get(uid, ""))
            if old is None:
                self._on_add(new_r)
                return
            self._replace(uid, new_r, old)

    def _replace(self, uid: str, r: dict, old: dict) -> None:
        pod = self._build(r)
        key = self._keys[uid]
        self._pods[key], self._reservations[uid] = pod, r
        for _, on_update, _ in self._handlers:
            if on_update is not None:
                on_update(old, pod)

    def _on_delete(self, r: Any) -> None:
        r = getattr(r, "obj", r)
        with self._lock:
            uid = (r.get("metadata") or {}).get("uid", "")
            key = self._keys.pop(uid, None)
            self._reservations.pop(uid, None)
            pod = self._pods.pop(key, None) if key else None
            if pod is None:
                return
            for _, _, on_delete in self._handlers:
                if on_delete is not None:
                    on_delete(pod)

    def refresh(self, uid: str) -> None:
        """The reservation's owners changed: re-emit its reserve pod with the new remaining room."""
        with self._lock:
            r = self._reservations.get(uid)
            old = self._pods.get(self._keys.get(uid, ""))
            if r is None or old is None or not rv.is_available(r):
                return
            self._replace(uid, r, old)


class _AlwaysSynced:
    def has_synced(self) -> bool:
        return True
