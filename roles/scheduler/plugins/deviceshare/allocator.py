"""The default device allocation loop and the device/node scorer (reference scheduler.md §2.6.5-2.6.6).

The scorer is Least/MostAllocated over the weighted resources a device (or a node's devices
together) has: LeastAllocated spreads fractional pods to the emptiest device, MostAllocated packs
them onto the fullest device that still fits.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import AbstractSet, Mapping

from koordinator.apis import device as dev
from koordinator_roles.scheduler.plugins.deviceshare.request import DeviceRequest, PodDeviceRequests, fill_gpu_memory

MAX_SCORE = 100

# type -> ((minor, resources given), ...), the shape DeviceCache.assume takes.
Allocation = dict[str, tuple[tuple[int, Mapping[str, int]], ...]]


@dataclass(frozen=True)
class Scorer:
    """``weights`` (resource -> weight) and the strategy: ``most`` = MostAllocated, else LeastAllocated."""

    weights: Mapping[str, int]
    most: bool = False

    def score(self, request: Mapping[str, int], total: Mapping[str, int], free: Mapping[str, int]) -> int:
        """Weighted Least/MostAllocated score of giving ``request`` from ``free`` out of ``total`` (0..100)."""
        score = weight_sum = 0
        for name, weight in self.weights.items():
            capacity = total.get(name, 0)
            if capacity <= 0:
                continue
            available = free.get(name, 0)
            requested = request.get(name, 0)
            if capacity >= available:
                requested += capacity - available
            if self.most:
                part = min(requested, capacity) * MAX_SCORE // capacity
            else:
                part = (capacity - requested) * MAX_SCORE // capacity if requested <= capacity else 0
            score += weight * part
            weight_sum += weight
        return score // weight_sum if weight_sum else 0


def _fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    return all(v <= free.get(name, 0) for name, v in request.items())


def allocate_type(request: DeviceRequest, total: Mapping[int, Mapping[str, int]],
                  free: Mapping[int, Mapping[str, int]], scorer: Scorer,
                  preferred: AbstractSet[int] = frozenset()) -> tuple[tuple[int, Mapping[str, int]], ...] | None:
    """``request.count`` devices of one type: ``preferred`` minors first (a matched reservation's), then best
    scored (ties: lowest minor); None if too few fit.

    A GPU allocation records gpu-memory and gpu-memory-ratio both, completed against each device.
    """
    candidates = []
    for minor, available in free.items():
        if not any(v > 0 for v in available.values()):
            continue  # unhealthy (no resources) or fully used
        device_total = total.get(minor, {})
        wanted: Mapping[str, int] | None = request.per_device
        if request.type == dev.TYPE_GPU:
            wanted = fill_gpu_memory(request.per_device, device_total)
        if wanted is None or not _fits(wanted, available):
            continue
        candidates.append((minor not in preferred, -scorer.score(request.per_device, device_total, available), minor,
                           wanted))
    if len(candidates) < request.count:
        return None
    candidates.sort(key=lambda c: c[:3])
    return tuple((minor, wanted) for _, _, minor, wanted in candidates[:request.count])


def allocate(requests: PodDeviceRequests, total: Mapping[str, Mapping[int, Mapping[str, int]]],
             free: Mapping[str, Mapping[int, Mapping[str, int]]], scorer: Scorer,
             preferred: Mapping[str, AbstractSet[int]] | None = None) -> tuple[Allocation | None, str]:
    """Every requested type's devices, or (None, the reason: ``Insufficient <type> devices``);
    ``preferred[type]``: minors taken first."""
    out: Allocation = {}
    for request in requests.by_type:
        chosen = allocate_type(request, total.get(request.type, {}), free.get(request.type, {}), scorer,
                               (preferred or {}).get(request.type, frozenset()))
        if chosen is None:
            return None, f"Insufficient {request.type} devices"
        out[request.type] = chosen
    return out, ""


def score_node(requests: PodDeviceRequests, total: Mapping[str, Mapping[int, Mapping[str, int]]],
               free: Mapping[str, Mapping[int, Mapping[str, int]]], scorer: Scorer) -> int:
    """Σ over requested types of the scorer on the node-wide sums of total and free (may exceed 100)."""
    score = 0
    for request in requests.by_type:
        score += scorer.score(request.per_device, _sum(total.get(request.type, {})), _sum(free.get(request.type, {})))
    return score


def _sum(by_minor: Mapping[int, Mapping[str, int]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for resources in by_minor.values():
        for name, v in resources.items():
            out[name] = out.get(name, 0) + v
    return out
