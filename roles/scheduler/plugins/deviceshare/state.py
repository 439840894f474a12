"""Per-node device state: totals from the Device objects, usage from pods' device-allocated annotations.

``total[type][minor]`` is a device's resources (whole units; an unhealthy device has none, so it is
never chosen); ``used[type][minor]`` sums the allocations of the pods on the node: assigned pods
from their ``scheduling.koordinator.sh/device-allocated`` annotation (Pod informer) and pods the
scheduler assumed (Reserve) until the informer shows them bound, or Unreserve / ForgetPod drop them.
Informer threads and the scheduling thread share it under one lock.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import device as dev
from koordinator.apis import quantity

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
            self._remove(uid)
            self._add(uid, PodAllocation(node, devices, assumed=False))

    def on_pod_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> None:
        self.on_pod(new)

    def on_pod_delete(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)
        uid = _pod_meta(obj)[0]
        if uid in self._pods:
            with self.lock:
                self._remove(uid)

    # -- the scheduler's assumed pods -------------------------------------------------------------------

    def assume(self, uid: str, node: str, devices: Mapping[str, tuple[tuple[int, Mapping[str, int]], ...]]) -> None:
        with self.lock:
            self._remove(uid)
            self._add(uid, PodAllocation(node, dict(devices), assumed=True))

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
            free: ByMinor = {}
            for kind, minors in devices.total.items():
                used_kind = used.get(kind, {})
                free[kind] = {minor: _minus(total, used_kind.get(minor)) for minor, total in minors.items()}
            return devices, free

    def pod_allocation(self, uid: str) -> PodAllocation | None:
        with self.lock:
            return self._pods.get(uid)

    # -- bookkeeping (lock held) ----------------------------------------------------------------------

    def _add(self, uid: str, alloc: PodAllocation) -> None:
        self._pods[uid] = alloc
        used = self._used.setdefault(alloc.node, {})
        for kind, items in alloc.devices.items():
            by_minor = used.setdefault(kind, {})
            for minor, resources in items:
                acc = by_minor.setdefault(minor, {})
                for name, v in resources.items():
                    acc[name] = acc.get(name, 0) + v

    def _remove(self, uid: str) -> None:
        alloc = self._pods.pop(uid, None)
        if alloc is None:
            return
        used = self._used.get(alloc.node, {})
        for kind, items in alloc.devices.items():
            by_minor = used.get(kind, {})
            for minor, resources in items:
                acc = by_minor.get(minor)
                if acc is None:
                    continue
                for name, v in resources.items():
                    left = acc.get(name, 0) - v
                    if left:
                        acc[name] = left
                    else:
                        acc.pop(name, None)
                if not acc:
                    del by_minor[minor]


def _minus(total: Mapping[str, int], used: Mapping[str, int] | None) -> Resources:
    if not used:
        return dict(total)
    return {name: v - used.get(name, 0) for name, v in total.items()}
