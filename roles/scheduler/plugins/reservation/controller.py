"""The Reservation controller (leader only): expiry, consumption, owner status and garbage collection (§3.3).

One loop over the informer's Reservations, woken by Reservation and owner-pod changes and at the
next expiry time (at the latest every ``resyncIntervalSeconds``):

- Pending/Available past ``spec.expires`` or creation + ``ttl`` → ``Failed`` with ``Ready=False,
  reason=Expired``; Available on a node that no longer exists → the same;
- Available: ``status.currentOwners``/``status.allocated`` from the pods annotated
  ``reservation-allocated``; with ``allocateOnce`` and an owner → ``Succeeded`` (``Ready=False,
  reason=Succeeded``);
- Failed/Succeeded longer than ``gcDurationSeconds`` (from the Ready transition) → deleted, every
  ``gcIntervalSeconds`` unless ``disableGarbageCollection``.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from koordinator.apis import extension
from koordinator.apis import reservation as rv
from koordinator.apis.timestamps import now_rfc3339, parse_time
from koordinator.runtime.errors import ApiError, NotFound

if TYPE_CHECKING:
    from koordinator_roles.scheduler.plugins.reservation.plugin import Reservation

log = logging.getLogger("koordinator.scheduler.reservation")


def _quantities(amounts: dict[str, int]) -> dict[str, str]:
    return {k: (f"{v}m" if v % 1000 else str(v // 1000)) for k, v in sorted(amounts.items())}


class ReservationController:
    """Keeps Reservation status in line with time, nodes and owner pods (Koordinator's reservation controller)."""

    name = "reservation-controller"

    def __init__(self, plugin: "Reservation", clock: Any = time.time) -> None:
        self.plugin = plugin
        self.client = plugin.handle.client
        self.args = plugin.args
        self.clock = clock
        self._wake = threading.Event()
        self._last_gc = 0.0
        plugin.reservation_informer.add_handler(lambda obj: self._wake.set(), lambda old, new: self._wake.set(),
                                                lambda obj: self._wake.set())
        previous = plugin.cache.on_change

        def on_change() -> None:
            previous()
            self._wake.set()

        plugin.cache.on_change = on_change

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self._wake.clear()
            try:
                wait = self.sync_once()
            except Exception:  # noqa: BLE001 - retried on the next round
                log.exception("reservation controller round failed")
                wait = 1.0
            deadline = time.monotonic() + wait
            while not stop.is_set() and not self._wake.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._wake.wait(min(left, 0.5))

    # -- one round ---------------------------------------------------------------------------------------

    def sync_once(self) -> float:
        """Reconcile every Reservation; returns seconds until the next round is due."""
        now = self.clock()
        next_due = float(self.args.resync_interval_seconds)
        gc_due = not self.args.disable_garbage_collection and now - self._last_gc >= self.args.gc_interval_seconds
        if gc_due:
            self._last_gc = now
        nodes = self.plugin.node_informer.store
        for r in self.plugin.reservation_informer.store.list():
            if (r.get("metadata") or {}).get("deletionTimestamp"):
                continue
            try:
                wait = self._sync(r, now, nodes, gc_due)
            except NotFound:
                continue
            except ApiError as e:
                log.warning("reservation sync failed reservation=%s err=%s", r["metadata"].get("name"), e)
                wait = 1.0
            if wait is not None:
                next_due = min(next_due, max(wait, 0.05))
        if not self.args.disable_garbage_collection:
            next_due = min(next_due, max(0.05, self._last_gc + self.args.gc_interval_seconds - now))
        return next_due

    def _sync(self, r: dict, now: float, nodes: Any, gc_due: bool) -> float | None:
        name = r["metadata"]["name"]
        phase = rv.phase(r)
        if phase in rv.TERMINAL_PHASES:
            if gc_due:
                self._collect(r, now, nodes)
            return None
        try:
            expires = rv.expiry_time(r)
        except rv.ReservationError:
            expires = None
        if expires is not None and now >= expires:
            self._fail(r, rv.REASON_EXPIRED, "expired")
            return None
        node_name = rv.status_of(r).get("nodeName")
        if phase == rv.PHASE_AVAILABLE and node_name and nodes.get(node_name) is None:
            self._fail(r, rv.REASON_EXPIRED, f"node {node_name} not found")
            return None
        if phase == rv.PHASE_AVAILABLE:
            self._sync_owners(r, name)
        return None if expires is None else expires - now

    def _sync_owners(self, r: dict, name: str) -> None:
        uid = r["metadata"].get("uid", "")
        info = self.plugin.cache.get(uid)
        if info is None:
            return
        # Only owners the API confirms (bound, annotated) count; pods merely assumed by the scheduler do not yet.
        pods = self.plugin.pod_informer.store
        assigned = {}
        for pod_uid, (key, requests) in info.assigned.items():
            pod = pods.get(key)
            if pod is not None and pod["metadata"].get("uid") == pod_uid and (pod.get("spec") or {}).get("nodeName") \
                    and (rv.allocated_reservation(pod) or ("", ""))[1] == uid:
                assigned[pod_uid] = (key, requests)
        owners = []
        for pod_uid, (key, _) in sorted(assigned.items(), key=lambda kv: kv[1][0]):
            namespace, _, pod_name = key.partition("/")
            owners.append({"namespace": namespace, "name": pod_name, "uid": pod_uid})
        allocated: dict[str, int] = {}
        for _, requests in assigned.values():
            allocated = extension.add(allocated, requests)
        status = r.get("status") or {}
        patch: dict[str, Any] = {}
        if (status.get("currentOwners") or []) != owners:
            patch["currentOwners"] = owners or None
        wanted_allocated = _quantities(allocated) if allocated else None
        if extension.resource_list(status.get("allocated")) != allocated:
            patch["allocated"] = wanted_allocated
        if owners and rv.allocate_once(r):
            patch["phase"] = rv.PHASE_SUCCEEDED
            patch["conditions"] = rv.with_condition(status.get("conditions"), rv.CONDITION_READY, "False",
                                                    rv.REASON_SUCCEEDED, "reservation is succeeded", now_rfc3339())
        if patch:
            self.client.patch(rv.KIND, name, {"status": patch}, patch_type="merge", subresource="status")

    def _fail(self, r: dict, reason: str, message: str) -> None:
        status = r.get("status") or {}
        conditions = rv.with_condition(status.get("conditions"), rv.CONDITION_READY, "False", reason, message,
                                       now_rfc3339())
        self.client.patch(rv.KIND, r["metadata"]["name"],
                          {"status": {"phase": rv.PHASE_FAILED, "conditions": conditions}},
                          patch_type="merge", subresource="status")

    def _collect(self, r: dict, now: float, nodes: Any) -> None:
        ready = rv.condition(r, rv.CONDITION_READY) or {}
        since = parse_time(ready.get("lastTransitionTime") or ready.get("lastProbeTime")) \
            or parse_time(r["metadata"].get("creationTimestamp")) or now
        node_name = rv.status_of(r).get("nodeName")
        node_gone = bool(node_name) and nodes.get(node_name) is None
        if now - since >= self.args.gc_duration_seconds or node_gone:
            self.client.delete(rv.KIND, r["metadata"]["name"])
