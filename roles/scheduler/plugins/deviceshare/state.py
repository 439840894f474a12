"""Per-node device state: totals from the Device objects, usage from pods' device-allocated annotations.

``total[type][minor]`` is a device's resources (whole units; an unhealthy device has none, so it is
never chosen); ``used[type][minor]`` sums the allocations of the pods on the node: assigned pods
from their ``scheduling.koordinator.sh/device-allocated`` annotation (Pod informer) and pods the
scheduler assumed (Reserve) until the informer shows them bound, or Unreserve / ForgetPod drop them.
Informer threads and the scheduling thread share it under one lock.

Reservations that reserve devices hold them like pods (keyed by the Reservation's uid, from its
``device-allocated`` annotation, written when its reserve pod was bound). Owner pods allocated
inside a reservation (``reservation-allocated``) take their devices out of its holding: the part of
a holding its owners use (``overlap``) is counted once, so ``free = total - used + overlap`` and a
reservation's remaining devices are its holding minus that overlap.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import device as dev
from koordinator.apis import quantity
from koordinator.apis import reservation as rv

log = logging.getLogger(__name__)

Resources = dict[str, int]
# type -> minor -> resources
ByMinor = dict[str, dict[int, Resources]]


def _resources(raw: Mapping[str, Any] | None) -> Resources:
    """Whole-unit amounts of a ResourceList (``Quantity.Value()``); QuantityError on a bad quantity."""
    return {str(name): quantity.value(q) for name, q in (raw or {}).items()}


@dataclass
class NodeDevices:
    """One node's Device object, digested: totals and ids by type and minor, and its labels."""

    total: ByMinor = field(default_factory=dict)
    ids: dict[str, dict[int, str]] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_device(cls, obj: Mapping[str, Any]) -> "NodeDevices":
        out = cls(labels=dict(((obj.get("metadata") or {}).get("labels")) or {}))
        name = (obj.get("metadata") or {}).get("name", "")
        for i, d in enumerate(((obj.get("spec") or {}).get("devices")) or []):
            kind, minor = d.get("type"), d.get("minor")
            if not isinstance(kind, str) or not isinstance(minor, int) or isinstance(minor, bool):
                log.warning("Device %s spec.devices[%d] has no type or integer minor, ignored", name, i)
                continue
            try:
                resources = _resources(d.get("resources")) if d.get("health") is True else {}
            except (quantity.QuantityError, ValueError) as err:
                log.warning("Device %s spec.devices[%d].resources: %s; device ignored", name, i, err)
                resources = {}
            out.total.setdefault(kind, {})[minor] = resources
            out.ids.setdefault(kind, {})[minor] = str(d.get("id") or "")
        return out


@dataclass(frozen=True)
class PodAllocation:
    """A pod's devices on a node: type -> [(minor, resources)], and whether it is only assumed."""

    node: str
    devices: Mapping[str, tuple[tuple[int, Mapping[str, int]], ...]]
    assumed: bool
    reservation: str = ""      # owner pods: uid of the reservation they allocated from
    holding: bool = False      # the devices a Reservation holds (its reserve pod's allocation)


def allocation_from_annotation(raw: str) -> dict[str, tuple[tuple[int, Mapping[str, int]], ...]]:
    """A device-allocated annotation as whole-unit amounts; DeviceAllocationError / QuantityError if bad."""
    out = {}
    for kind, items in dev.parse_device_allocated(raw).items():
        out[kind] = tuple((a.minor, _resources(a.resources)) for a in items)
    return out


def _pod_meta(pod: Mapping[str, Any]) -> tuple[str, str, str]:
    meta = pod.get("metadata") or {}
    uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
    return uid, (pod.get("spec") or {}).get("nodeName") or "", (meta.get("annotations") or {}).get(
        dev.ANNOTATION_DEVICE_ALLOCATED) or ""


class DeviceCache:
    """Every node's devices and their usage (see the module docstring)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.nodes: dict[str, NodeDevices] = {}
        self._used: dict[str, ByMinor] = {}
        self._pods: dict[str, PodAllocation] = {}
        # reservation uid -> its owner pods' uids; the overlap of each holding with its owners, and per node
        self._owners: dict[str, set[str]] = {}
        self._overlap_of: dict[str, tuple[str, ByMinor]] = {}
        self._overlap: dict[str, ByMinor] = {}

    # -- Device informer ------------------------------------------------------------------------------

    def on_device(self, obj: Mapping[str, Any]) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        devices = NodeDevices.from_device(obj)
        with self.lock:
            self.nodes[name] = devices

    def on_device_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.on_device(new)

    def on_device_delete(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)
        with self.lock:
            self.nodes.pop((obj.get("metadata") or {}).get("name", ""), None)

    # -- Pod informer ---------------------------------------------------------------------------------

    def on_pod(self, pod: Mapping[str, Any]) -> None:
        """An added or updated pod: count its annotated devices while it is assigned and not finished."""
        uid, node, raw = _pod_meta(pod)
        if not raw:
            # Only drop a confirmed entry: an assumed pod's annotation may not have arrived yet.
            if uid in self._pods:
                with self.lock:
                    current = self._pods.get(uid)
                    if current is not None and not current.assumed:
                        self._remove(uid)
            return
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")
        with self.lock:
            if not node or finished:
                self._remove(uid)
                return
            try:
                devices = allocation_from_annotation(raw)
            except (dev.DeviceAllocationError, quantity.QuantityError, ValueError) as err:
                log.warning("pod %s ignored by DeviceShare: %s", uid, err)
                return
            allocated = rv.allocated_reservation(pod)
            self._remove(uid)
            self._add(uid, PodAllocation(node, devices, assumed=False, reservation=allocated[1] if allocated else ""))

    def on_pod_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.on_pod(new)

    def on_pod_delete(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)
        uid = _pod_meta(obj)[0]
        if uid in self._pods:
            with self.lock:
                self._remove(uid)

    # -- Reservation informer -----------------------------------------------------------------------------

    def on_reservation(self, r: Mapping[str, Any]) -> None:
        """A Reservation holds the devices in its device-allocated annotation while scheduled and active."""
        uid = (r.get("metadata") or {}).get("uid") or (r.get("metadata") or {}).get("name", "")
        raw = ((r.get("metadata") or {}).get("annotations") or {}).get(dev.ANNOTATION_DEVICE_ALLOCATED) or ""
        node = rv.status_of(r).get("nodeName") or ""
        with self.lock:
            current = self._pods.get(uid)
            if rv.is_terminal(r) or (not raw and current is not None and not current.assumed):
                self._remove(uid)
                return
            if not raw or not node:
                return  # not bound yet: an allocation assumed by the scheduler stays until it is
            try:
                devices = allocation_from_annotation(raw)
            except (dev.DeviceAllocationError, quantity.QuantityError, ValueError) as err:
                log.warning("reservation %s ignored by DeviceShare: %s", uid, err)
                return
            self._remove(uid)
            self._add(uid, PodAllocation(node, devices, assumed=False, holding=True))

    def on_reservation_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.on_reservation(new)

    def on_reservation_delete(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)
        meta = obj.get("metadata") or {}
        with self.lock:
            self._remove(meta.get("uid") or meta.get("name", ""))

    # -- the scheduler's assumed pods -------------------------------------------------------------------

    def assume(self, uid: str, node: str, devices: Mapping[str, tuple[tuple[int, Mapping[str, int]], ...]],
               reservation: str = "", holding: bool = False) -> None:
        """Reserve: ``reservation`` = the one the pod allocates from; ``holding``: the pod is a reserve pod."""
        with self.lock:
            self._remove(uid)
            self._add(uid, PodAllocation(node, dict(devices), assumed=True, reservation=reservation,
                                         holding=holding))

    def forget(self, uid: str) -> None:
        """Drop an assumed pod (Unreserve, ForgetPod); a pod the informer confirmed stays."""
        with self.lock:
            current = self._pods.get(uid)
            if current is not None and current.assumed:
                self._remove(uid)

    # -- reading ------------------------------------------------------------------------------------------

    def node_view(self, node: str) -> tuple[NodeDevices, ByMinor] | None:
        """The node's devices and a copy of its free amounts (total - used, per type and minor), or None."""
        with self.lock:
            devices = self.nodes.get(node)
            if devices is None:
                return None
            used = self._used.get(node, {})
            overlap = self._overlap.get(node, {})
            free: ByMinor = {}
            for kind, minors in devices.total.items():
                used_kind = used.get(kind, {})
                overlap_kind = overlap.get(kind, {})
                free[kind] = {minor: _plus(_minus(total, used_kind.get(minor)), overlap_kind.get(minor))
                              for minor, total in minors.items()}
            return devices, free

    def holding(self, uid: str, node: str) -> ByMinor | None:
        """The devices reservation ``uid`` holds on ``node`` (None: holds none)."""
        with self.lock:
            alloc = self._pods.get(uid)
            if alloc is None or not alloc.holding or alloc.node != node:
                return None
            out: ByMinor = {}
            _accumulate(out, alloc.devices.items(), +1)
            return out

    def reservation_remaining(self, uid: str, node: str) -> ByMinor | None:
        """The devices reservation ``uid`` holds on ``node`` that its owners do not use (None: holds none)."""
        with self.lock:
            holding = self._pods.get(uid)
            if holding is None or not holding.holding or holding.node != node:
                return None
            overlap = (self._overlap_of.get(uid) or ("", {}))[1]
            out: ByMinor = {}
            for kind, items in holding.devices.items():
                by_minor = out.setdefault(kind, {})
                overlap_kind = overlap.get(kind, {})
                for minor, resources in items:
                    left = _minus(resources, overlap_kind.get(minor))
                    acc = by_minor.setdefault(minor, {})
                    for name, v in left.items():
                        acc[name] = acc.get(name, 0) + v
            return out

    def pod_allocation(self, uid: str) -> PodAllocation | None:
        with self.lock:
            return self._pods.get(uid)

    # -- bookkeeping (lock held) ----------------------------------------------------------------------

    def _add(self, uid: str, alloc: PodAllocation) -> None:
        self._pods[uid] = alloc
        _accumulate(self._used.setdefault(alloc.node, {}), alloc.devices.items(), +1)
        if alloc.reservation:
            self._owners.setdefault(alloc.reservation, set()).add(uid)
            self._recompute_overlap(alloc.reservation)
        elif alloc.holding:
            self._recompute_overlap(uid)

    def _remove(self, uid: str) -> None:
        alloc = self._pods.pop(uid, None)
        if alloc is None:
            return
        _accumulate(self._used.get(alloc.node, {}), alloc.devices.items(), -1)
        if alloc.reservation:
            owners = self._owners.get(alloc.reservation)
            if owners is not None:
                owners.discard(uid)
                if not owners:
                    del self._owners[alloc.reservation]
            self._recompute_overlap(alloc.reservation)
        elif alloc.holding:
            self._recompute_overlap(uid)

    def _recompute_overlap(self, r_uid: str) -> None:
        """Per minor and resource, min(held, Σ owners' use on the holding's node): the part counted twice."""
        old = self._overlap_of.pop(r_uid, None)
        if old is not None:
            _accumulate(self._overlap.get(old[0], {}), _items(old[1]), -1)
        holding = self._pods.get(r_uid)
        owners = self._owners.get(r_uid)
        if holding is None or not holding.holding or not owners:
            return
        used: ByMinor = {}
        for owner in owners:
            alloc = self._pods.get(owner)
            if alloc is not None and alloc.node == holding.node:
                _accumulate(used, alloc.devices.items(), +1)
        overlap: ByMinor = {}
        for kind, items in holding.devices.items():
            used_kind = used.get(kind, {})
            for minor, resources in items:
                owners_use = used_kind.get(minor) or {}
                both = {name: min(v, owners_use.get(name, 0)) for name, v in resources.items()}
                both = {name: v for name, v in both.items() if v > 0}
                if both:
                    overlap.setdefault(kind, {})[minor] = both
        if overlap:
            self._overlap_of[r_uid] = (holding.node, overlap)
            _accumulate(self._overlap.setdefault(holding.node, {}), _items(overlap), +1)


def _items(by_minor: ByMinor) -> list[tuple[str, tuple[tuple[int, Mapping[str, int]], ...]]]:
    return [(kind, tuple(minors.items())) for kind, minors in by_minor.items()]


def _accumulate(target: ByMinor, items: Any, sign: int) -> None:
    """Add (sign +1) or take away (-1) ``(type, ((minor, resources), ...))`` items; zeros are dropped."""
    for kind, entries in items:
        by_minor = target.setdefault(kind, {})
        for minor, resources in entries:
            acc = by_minor.setdefault(minor, {})
            for name, v in resources.items():
                left = acc.get(name, 0) + sign * v
                if left:
                    acc[name] = left
                else:
                    acc.pop(name, None)
            if not acc:
                del by_minor[minor]


def _plus(free: Resources, back: Mapping[str, int] | None) -> Resources:
    if not back:
        return free
    return {name: v + back.get(name, 0) for name, v in free.items()}


def _minus(total: Mapping[str, int], used: Mapping[str, int] | None) -> Resources:
    if not used:
        return dict(total)
    return {name: v - used.get(name, 0) for name, v in total.items()}
