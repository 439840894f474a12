"""DeviceShare: whole and fractional GPU, RDMA and FPGA allocation from the nodes' Device objects (§2.6).

Pods without device requests cost one set test: PreFilter and PreScore return Skip, and Score
(when enabled without PreScore) returns zeros without looking at any node. For device pods the
work is per node that has a Device object; nodes without one pass the Filter (Koordinator's
behaviour: NodeResourcesFit still checks the node's device allocatable). AddPod/RemovePod keep
preemption's dry runs honest: a victim's devices count as free in the cycle state of the trial.

Reservations (frameworkext hooks): a reserve pod's devices are allocated like any pod's and written
on its Reservation at PreBind (PreBindReservation); the cache then counts them as held by the
Reservation. For an owner pod, RestoreReservation records each matched reservation's remaining devices
on the node; Filter passes when one reservation can give the devices (Restricted: only from its own,
Aligned: its own first, then free ones) or the free devices can; FilterReservation answers for one
reservation; Reserve takes them from the nominated reservation first.

Not in this build: shared-resource templates, GPU partitions, topology scopes, joint allocation,
VFs, the device-allocate-hint annotation, NUMA alignment with NodeNUMAResource, ResizePod, and
rewriting a Reservation's allocatable to the devices it got.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koordinator.apis import device as dev
from koordinator.apis import quantity
from koordinator.apis import reservation as rv
from koordinator_roles.scheduler.framework.interfaces import (BatchFilterResult, ClusterEvent, EnqueueExtensions, Failure,
                                                              FilterPlugin, ForgetPodHandler, PreBindPlugin,
                                                              PreFilterExtensions, PreFilterPlugin,
                                                              PreFilterResult, PreScorePlugin, ReservationFilterPlugin,
                                                              ReservationPreBindPlugin, ReservationRestorePlugin,
                                                              ReservationScorePlugin, ReservePlugin, ScorePlugin)
from koordinator_roles.scheduler.framework.status import SKIP, CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.deviceshare.allocator import Allocation, Scorer, allocate, score_node
from koordinator_roles.scheduler.plugins.deviceshare.args import DeviceShareArgs, parse_args
from koordinator_roles.scheduler.plugins.deviceshare.request import (DEVICE_RESOURCES, DeviceRequestError,
                                                                     PodDeviceRequests, parse_requests)
from koordinator_roles.scheduler.plugins.deviceshare.state import ByMinor, DeviceCache, NodeDevices
from koordinator_roles.scheduler.plugins.helper.normalize import default_normalize_score
from koordinator_roles.scheduler.plugins.helper.reservationstate import nominated_reservation

NAME = "DeviceShare"
_STATE_KEY = "PreFilter" + NAME
_RESULT_KEY = "Reserve" + NAME
_CACHE_KEY = NAME + "/requests"
_RESTORE_KEY = "RestoreReservation" + NAME

HAMI_CORE = "HAMi-core"
HAMI_CORE_MISSING = "GPUIsolationProviderHAMICore not found on the node"


@dataclass
class _PodState:
    """The incoming pod's parsed requests, and the devices preemption's dry runs give back per node.

    ``released[node][type][minor]`` is added to the node's free amounts: the allocations of victims
    removed by RemovePod (AddPod takes them away again). A victim allocated inside a reservation gives the
    part on the reservation's devices back to that reservation: ``released_rr[node][reservation uid]``
    when the pod matched it (else that part is not free for the pod at all).
    """

    requests: PodDeviceRequests
    released: dict[str, ByMinor] = field(default_factory=dict)
    released_rr: dict[str, dict[str, ByMinor]] = field(default_factory=dict)

    def clone(self) -> "_PodState":
        return _PodState(self.requests, copy.deepcopy(self.released), copy.deepcopy(self.released_rr))


@dataclass(frozen=True)
class _Reserved:
    """What Reserve gave the pod on ``node``."""

    node: str
    devices: Allocation

    def clone(self) -> "_Reserved":
        return self


@dataclass(frozen=True)
class _Restored:
    """RestoreReservation's result: node -> matched reservation uid -> (its remaining devices, allocate policy).
    Written once in BeforePreFilter and only read afterwards."""

    by_node: dict[str, dict[str, tuple[ByMinor, str]]]

    def clone(self) -> "_Restored":
        return self


def _add_to(target: ByMinor, kind: str, minor: int, name: str, v: int) -> None:
    if v:
        acc = target.setdefault(kind, {}).setdefault(minor, {})
        acc[name] = acc.get(name, 0) + v


def _merge(free: ByMinor, extra: ByMinor) -> ByMinor:
    """``free`` plus a reservation's remaining devices (a new mapping; the inputs are left as they are)."""
    out = {kind: {minor: dict(r) for minor, r in by_minor.items()} for kind, by_minor in free.items()}
    for kind, by_minor in extra.items():
        target = out.setdefault(kind, {})
        for minor, resources in by_minor.items():
            acc = target.setdefault(minor, {})
            for name, v in resources.items():
                acc[name] = acc.get(name, 0) + v
    return out


def _add_released(ctx: "_PodState | None", node_name: str, free: ByMinor) -> None:
    """Add the devices preemption's dry run freed on the node to ``free`` (a copy from the cache)."""
    released = ctx.released.get(node_name) if ctx is not None else None
    for kind, by_minor in (released or {}).items():
        free_kind = free.get(kind, {})
        for minor, resources in by_minor.items():
            if minor in free_kind:
                acc = free_kind[minor]
                for name, v in resources.items():
                    acc[name] = acc.get(name, 0) + v


def _with_released(ctx: "_PodState | None", node_name: str, uid: str, remaining: ByMinor) -> ByMinor:
    """A reservation's remaining devices plus what preemption's dry run gave back to it."""
    back = (ctx.released_rr.get(node_name) or {}).get(uid) if ctx is not None else None
    return _merge(remaining, back) if back else remaining


def _parse(pod: PodInfo) -> tuple[PodDeviceRequests | None, str]:
    """The pod's device requests, parsed once per pod (kept on the PodInfo); (None, error) when invalid."""
    def compute(_: dict) -> tuple[PodDeviceRequests | None, str]:
        try:
            return parse_requests(pod.requests), ""
        except DeviceRequestError as err:
            return None, str(err)

    return pod.cached(_CACHE_KEY, compute)


def _format(name: str, v: int) -> str:
    # gpu-memory in binary units ("8Gi"), as Koordinator writes it; percentages and counts as plain numbers.
    return quantity.format_quantity(v, quantity.BINARY_SI if name == dev.GPU_MEMORY else quantity.DECIMAL_SI)


class DeviceShare(PreFilterPlugin, PreFilterExtensions, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin, PreBindPlugin,
                  EnqueueExtensions, ForgetPodHandler, ReservationRestorePlugin, ReservationFilterPlugin,
                  ReservationScorePlugin, ReservationPreBindPlugin):
    """Koordinator's DeviceShare plugin (reference scheduler.md §2.6)."""

    name = NAME

    def __init__(self, args: dict | None, handle: Any) -> None:
        self.handle = handle
        self._lock = threading.Lock()
        self.args: DeviceShareArgs = parse_args(args)
        self.scorer = Scorer(dict(self.args.resource_weights), self.args.most_allocated)
        self.cache = DeviceCache()
        if handle is None:
            return
        add_forget = getattr(handle, "add_forget_handler", None)
        if add_forget is not None:
            add_forget(self.forget_pod)
        informers = getattr(handle, "informers", None)
        if informers is not None:
            informers.informer("Device").add_handler(on_add=self.cache.on_device,
                                                     on_update=self.cache.on_device_update,
                                                     on_delete=self.cache.on_device_delete)
            informers.informer("Pod").add_handler(on_add=self.cache.on_pod, on_update=self.cache.on_pod_update,
                                                  on_delete=self.cache.on_pod_delete)
            informers.informer("Reservation").add_handler(on_add=self.cache.on_reservation,
                                                          on_update=self.cache.on_reservation_update,
                                                          on_delete=self.cache.on_reservation_delete)

    def update_args(self, args: dict | None) -> None:
        """Hot reload: validate and swap the args (ValueError keeps the old ones); device state is kept."""
        parsed = parse_args(args)
        with self._lock:
            self.args, self.scorer = parsed, Scorer(dict(parsed.resource_weights), parsed.most_allocated)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Device", "Add"), ClusterEvent("Device", "Update"), ClusterEvent("Pod", "Delete")]

    # -- the incoming pod --------------------------------------------------------------------------------

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def _release(self, state: CycleState, other: PodInfo, node: NodeInfo, sign: int) -> None:
        ctx: _PodState | None = state.read(_STATE_KEY)
        if ctx is None:
            return
        allocation = self.cache.pod_allocation(other.uid)
        if allocation is None or allocation.node != node.name:
            return
        r_uid = allocation.reservation
        held = self.cache.holding(r_uid, node.name) if r_uid else None
        restored: _Restored | None = state.read(_RESTORE_KEY)
        usable = held is not None and restored is not None and r_uid in (restored.by_node.get(node.name) or {})
        to_free = ctx.released.setdefault(node.name, {})
        to_rr = ctx.released_rr.setdefault(node.name, {}).setdefault(r_uid, {}) if usable else {}
        for kind, items in allocation.devices.items():
            held_kind = (held or {}).get(kind, {})
            for minor, resources in items:
                held_here = held_kind.get(minor) or {}
                for name, v in resources.items():
                    inside = min(v, held_here.get(name, 0))  # approximately: its use of the reserved devices
                    _add_to(to_free, kind, minor, name, sign * (v - inside))
                    if usable:
                        _add_to(to_rr, kind, minor, name, sign * inside)

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status | None:
        """Preemption's dry run removed a victim: its devices count as free on that node."""
        self._release(state, to_remove, node, +1)
        return None

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        """Preemption's dry run put a pod back: its devices are used again."""
        self._release(state, to_add, node, -1)
        return None

    def _requests(self, state: CycleState, pod: PodInfo) -> PodDeviceRequests | None:
        ctx = state.read(_STATE_KEY)
        if ctx is not None:
            return ctx.requests
        if DEVICE_RESOURCES.isdisjoint(pod.requests):
            return None
        return _parse(pod)[0]

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Any) -> tuple[PreFilterResult | None,
                                                                                    Status | None]:
        if DEVICE_RESOURCES.isdisjoint(pod.requests):
            return None, Status(SKIP)
        requests, error = _parse(pod)
        if error:
            return None, Status.unresolvable(error, plugin=NAME)
        if requests is None:  # only zero amounts
            return None, Status(SKIP)
        state.write(_STATE_KEY, _PodState(requests))
        return None, None

    # -- Filter ------------------------------------------------------------------------------------------

    def _node_checks(self, pod: PodInfo, requests: PodDeviceRequests, node_labels: Any,
                     devices: NodeDevices) -> Status | None:
        """The GPU-sharing checks of one node: isolation provider and models that cannot share."""
        if not requests.gpu_shared:
            return None
        provider = pod.labels.get(dev.LABEL_GPU_ISOLATION_PROVIDER)
        if provider:
            have = node_labels.get(dev.LABEL_GPU_ISOLATION_PROVIDER) or devices.labels.get(
                dev.LABEL_GPU_ISOLATION_PROVIDER)
            if have != provider:
                # Koordinator answers Error (aborting the cycle); Unresolvable lets other nodes be tried.
                message = HAMI_CORE_MISSING if provider == HAMI_CORE else \
                    f"GPU isolation provider {provider!r} not found on the node"
                return Status.unresolvable(message, plugin=NAME)
        unsupported = self.args.gpu_share_unsupported_models
        if unsupported:
            vendor = node_labels.get(dev.LABEL_GPU_VENDOR) or devices.labels.get(dev.LABEL_GPU_VENDOR, "")
            model = node_labels.get(dev.LABEL_GPU_MODEL) or devices.labels.get(dev.LABEL_GPU_MODEL, "")
            if (vendor, model) in unsupported:
                return Status.unresolvable(f'model "{model}" of vendor "{vendor}" does not support GPU Share',
                                           plugin=NAME)
        return None

    def _filter_one(self, state: CycleState, pod: PodInfo, requests: PodDeviceRequests,
                    node: NodeInfo) -> Status | None:
        view = self.cache.node_view(node.name)
        if view is None:
            return None  # no Device object: nothing to allocate from, the node passes (Koordinator's rule)
        devices, free = view
        ctx: _PodState | None = state.read(_STATE_KEY)
        _add_released(ctx, node.name, free)
        status = self._node_checks(pod, requests, node.labels, devices)
        if status is not None:
            return status
        restored: _Restored | None = state.read(_RESTORE_KEY)
        for uid, (remaining, policy) in ((restored.by_node.get(node.name) or {}).items() if restored else ()):
            remaining = _with_released(ctx, node.name, uid, remaining)
            if self._allocate_with(requests, devices.total, free, remaining, policy)[0] is not None:
                return None  # a matched reservation can give the devices
        allocation, reason = allocate(requests, devices.total, free, self.scorer)
        return None if allocation is not None else Status.unschedulable(reason, plugin=NAME)

    def _allocate_with(self, requests: PodDeviceRequests, total: ByMinor, free: ByMinor, remaining: ByMinor,
                       policy: str) -> tuple[Any, str]:
        """Allocate within a reservation: Restricted only from its remaining devices, otherwise from its
        devices first and then the free ones."""
        if policy == rv.POLICY_RESTRICTED:
            return allocate(requests, total, remaining, self.scorer)
        preferred = {kind: {m for m, r in by_minor.items() if any(v > 0 for v in r.values())}
                     for kind, by_minor in remaining.items()}
        return allocate(requests, total, _merge(free, remaining), self.scorer, preferred)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        requests = self._requests(state, pod)
        if requests is None:
            return None
        return self._filter_one(state, pod, requests, node)

    def _device_positions(self, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        """Positions in ``rows`` of the nodes that have a Device object."""
        with self.cache.lock:
            names = list(self.cache.nodes)
        index = snapshot.index
        device_rows = np.fromiter((index[n] for n in names if n in index), dtype=np.int64)
        if not len(device_rows):
            return device_rows
        return np.flatnonzero(np.isin(rows, device_rows))

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        requests = self._requests(state, pod)
        if requests is None:
            return BatchFilterResult.all_pass(len(rows))
        positions = self._device_positions(snapshot, rows)
        if not len(positions):
            return BatchFilterResult.all_pass(len(rows))
        passed = np.ones(len(rows), dtype=bool)
        masks: dict[tuple[int, str], np.ndarray] = {}
        infos = snapshot.node_infos
        for i in positions.tolist():
            status = self._filter_one(state, pod, requests, infos[int(rows[i])])
            if status is None:
                continue
            passed[i] = False
            for reason in status.reasons:
                mask = masks.get((status.code, reason))
                if mask is None:
                    mask = masks[(status.code, reason)] = np.zeros(len(rows), dtype=bool)
                mask[i] = True
        if passed.all():
            return BatchFilterResult.all_pass(len(rows))
        return BatchFilterResult(passed, [Failure(code, reason, mask) for (code, reason), mask in masks.items()])

    # -- Score -------------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        if self._requests(state, pod) is None:
            return Status(SKIP)
        return None

    def _score_one(self, requests: PodDeviceRequests, node_name: str) -> int:
        view = self.cache.node_view(node_name)
        if view is None:
            return 0
        devices, free = view
        return score_node(requests, devices.total, free, self.scorer)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        requests = self._requests(state, pod)
        return 0 if requests is None else self._score_one(requests, node.name)

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        scores = np.zeros(len(rows), dtype=np.int64)
        requests = self._requests(state, pod)
        if requests is None:
            return scores
        infos = snapshot.node_infos
        for i in self._device_positions(snapshot, rows).tolist():
            scores[i] = self._score_one(requests, infos[int(rows[i])].name)
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray,
                        scores: np.ndarray) -> Status | None:
        default_normalize_score(scores, reverse=False)
        return None

    # -- Reserve / Unreserve / PreBind ---------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        requests = self._requests(state, pod)
        if requests is None:
            return None
        reservation = nominated_reservation(state, node_name)
        r_uid = getattr(reservation, "uid", "") or ""
        with self.cache.lock:  # the allocation and its accounting in one step
            view = self.cache.node_view(node_name)
            if view is None:
                return None
            devices, free = view
            remaining = self.cache.reservation_remaining(r_uid, node_name) if r_uid else None
            if remaining is not None:
                allocation, reason = self._allocate_with(requests, devices.total, free, remaining,
                                                         getattr(reservation, "policy", ""))
            else:
                allocation, reason = allocate(requests, devices.total, free, self.scorer)
            if allocation is None:
                return Status.unschedulable(reason, plugin=NAME)
            self.cache.assume(pod.uid, node_name, allocation, reservation=r_uid,
                              holding=rv.is_reserve_pod(pod.pod))
        state.write(_RESULT_KEY, _Reserved(node_name, allocation))
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        if state.read(_RESULT_KEY) is not None:
            self.cache.forget(pod.uid)
            state.delete(_RESULT_KEY)

    def forget_pod(self, pod: PodInfo, node_name: str) -> None:
        self.cache.forget(pod.uid)

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, modified: dict) -> Status | None:
        reserved: _Reserved | None = state.read(_RESULT_KEY)
        if reserved is None or rv.is_reserve_pod(pod.pod):
            return None  # a reserve pod's devices go on its Reservation (PreBindReservation)
        self._write_allocated(reserved, modified)
        return None

    def pre_bind_reservation(self, state: CycleState, reservation: dict, node_name: str) -> Status | None:
        """The devices the reserve pod got are written on the Reservation (``device-allocated``)."""
        reserved: _Reserved | None = state.read(_RESULT_KEY)
        if reserved is None:
            return None
        self._write_allocated(reserved, reservation)
        return None

    def _write_allocated(self, reserved: "_Reserved", modified: dict) -> None:
        with self.cache.lock:
            devices = self.cache.nodes.get(reserved.node)
            ids = devices.ids if devices is not None else {}
        annotation = {kind: [dev.DeviceAllocation(minor, {name: _format(name, v) for name, v in resources.items()},
                                                  ids.get(kind, {}).get(minor, ""))
                             for minor, resources in items]
                      for kind, items in reserved.devices.items()}
        meta = modified.setdefault("metadata", {})
        annotations = meta.get("annotations")
        if annotations is None:
            annotations = meta["annotations"] = {}
        annotations[dev.ANNOTATION_DEVICE_ALLOCATED] = dev.format_device_allocated(annotation)

    # -- Reservations (frameworkext ReservationRestorePlugin / ReservationFilterPlugin / ReservationScorePlugin)

    def restore_reservation(self, state: CycleState, pod: PodInfo, matched: list, unmatched: list,
                            node: NodeInfo) -> tuple[Any, Status | None]:
        """Record the remaining devices of each matched reservation on this node (owner pods with device
        requests only; the others cost one set test)."""
        if DEVICE_RESOURCES.isdisjoint(pod.requests):
            return None, None
        found: dict[str, tuple[ByMinor, str]] = {}
        for info in matched:
            uid = getattr(info, "uid", "")
            remaining = self.cache.reservation_remaining(uid, node.name) if uid else None
            if remaining is not None:
                found[uid] = (remaining, getattr(info, "policy", ""))
        if found:
            restored: _Restored | None = state.read(_RESTORE_KEY)
            if restored is None:
                restored = _Restored({})
                state.write(_RESTORE_KEY, restored)
            restored.by_node[node.name] = found
        return None, None

    def _reservation_devices(self, state: CycleState, reservation: Any, node_name: str) -> tuple[ByMinor, str] | None:
        restored: _Restored | None = state.read(_RESTORE_KEY)
        if restored is None:
            return None
        return (restored.by_node.get(node_name) or {}).get(getattr(reservation, "uid", ""))

    def filter_reservation(self, state: CycleState, pod: PodInfo, reservation: Any, node_name: str) -> Status | None:
        """Can this reservation (its devices, plus the free ones unless Restricted) give the pod its devices?"""
        requests = self._requests(state, pod)
        held = self._reservation_devices(state, reservation, node_name) if requests is not None else None
        if held is None:
            return None  # it reserves no devices: the node's free devices are Filter's business
        ctx: _PodState | None = state.read(_STATE_KEY)
        view = self.cache.node_view(node_name)
        if view is None:
            return None
        devices, free = view
        _add_released(ctx, node_name, free)
        remaining = _with_released(ctx, node_name, getattr(reservation, "uid", ""), held[0])
        allocation, reason = self._allocate_with(requests, devices.total, free, remaining, held[1])
        return None if allocation is not None else Status.unschedulable(reason, plugin=NAME)

    def score_reservation(self, state: CycleState, pod: PodInfo, reservation: Any, node_name: str) -> int:
        """The device scorer on the reservation's own devices (0 when it reserves none)."""
        requests = self._requests(state, pod)
        held = self._reservation_devices(state, reservation, node_name) if requests is not None else None
        view = self.cache.node_view(node_name) if held is not None else None
        if view is None:
            return 0
        # The scorer over the reservation's devices only: their totals against what is left of them.
        totals = view[0].total
        total = {kind: {m: totals.get(kind, {}).get(m, {}) for m in by_minor} for kind, by_minor in held[0].items()}
        return min(100, score_node(requests, total, held[0], self.scorer))


def new(args: dict | None, handle: Any) -> DeviceShare:
    """Registry factory."""
    return DeviceShare(args, handle)
