"""A pod's device requests: validation of the accepted combinations and the per-device split (§2.6.2).

Amounts here are whole units: gpu-core, gpu-memory-ratio, koordinator.sh/gpu, rdma and fpga are
percent of one device (100 = one whole device), gpu-memory is bytes, vendor ``*/gpu`` counts devices.

Validation runs per device type (GPU resources, rdma, fpga), so a pod may ask for GPUs and RDMA
together. NPU requests (``huawei.com/npu-*``) need shared-resource templates, which this build
does not implement: they are rejected with a message saying so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from koordinator.apis import device as dev
from koordinator.apis import extension

GPU_VENDOR_WHOLE = (dev.NVIDIA_GPU, dev.AMD_GPU, dev.HYGON_DCU)
GPU_RESOURCES = frozenset({dev.GPU_CORE, dev.GPU_MEMORY, dev.GPU_MEMORY_RATIO, dev.GPU_SHARED, dev.KOORD_GPU,
                           *GPU_VENDOR_WHOLE})
NPU_RESOURCES = frozenset({dev.NPU_CORE, dev.NPU_CPU, dev.NPU_DVPP})
#: Every resource name that makes a pod a DeviceShare pod (the PreFilter Skip test).
DEVICE_RESOURCES = frozenset({*GPU_RESOURCES, *NPU_RESOURCES, dev.RDMA, dev.FPGA})

# The GPU resource sets accepted without gpu.shared (after dropping zero requests).
_GPU_COMBINATIONS = frozenset({
    frozenset({dev.NVIDIA_GPU}), frozenset({dev.AMD_GPU}), frozenset({dev.HYGON_DCU}), frozenset({dev.KOORD_GPU}),
    frozenset({dev.GPU_MEMORY}), frozenset({dev.GPU_MEMORY_RATIO}),
    frozenset({dev.GPU_CORE, dev.GPU_MEMORY}), frozenset({dev.GPU_CORE, dev.GPU_MEMORY_RATIO}),
})
# With gpu.shared: the same sharing forms as above (not the whole-device ones).
_SHARED_COMBINATIONS = frozenset({
    frozenset({dev.GPU_MEMORY}), frozenset({dev.GPU_MEMORY_RATIO}),
    frozenset({dev.GPU_CORE, dev.GPU_MEMORY}), frozenset({dev.GPU_CORE, dev.GPU_MEMORY_RATIO}),
})
# Values above 100 must be whole devices (multiples of 100).
_PERCENTAGES = (dev.GPU_CORE, dev.GPU_MEMORY_RATIO, dev.KOORD_GPU, dev.FPGA, dev.RDMA)


class DeviceRequestError(ValueError):
    """An invalid device request; the message names the resource(s) and value(s)."""


@dataclass(frozen=True)
class DeviceRequest:
    """What one device type needs: ``count`` devices each giving ``per_device`` (resource -> amount)."""

    type: str
    per_device: Mapping[str, int]
    count: int
    shared: bool  # a fraction of a device (GPU sharing), not whole devices


@dataclass(frozen=True)
class PodDeviceRequests:
    """A DeviceShare pod's requests by device type, GPU first (the allocation order)."""

    by_type: tuple[DeviceRequest, ...]

    def get(self, kind: str) -> DeviceRequest | None:
        return next((r for r in self.by_type if r.type == kind), None)

    @property
    def gpu_shared(self) -> bool:
        gpu = self.get(dev.TYPE_GPU)
        return gpu is not None and gpu.shared


def _describe(values: Mapping[str, int]) -> str:
    return "[" + ", ".join(f"{k}={v}" for k, v in sorted(values.items())) + "]"


def _check_percentages(values: Mapping[str, int]) -> None:
    # With gpu.shared the multiple-of-gpu.shared rule replaces this one for gpu-core / gpu-memory-ratio.
    names = _PERCENTAGES[2:] if values.get(dev.GPU_SHARED) else _PERCENTAGES
    for name in names:
        v = values.get(name, 0)
        if v > 100 and v % 100:
            raise DeviceRequestError(f"invalid device request {name}={v}: a request above 100 must be a "
                                     "multiple of 100 (whole devices)")


def _gpu(values: Mapping[str, int]) -> DeviceRequest | None:
    gpu = {k: v for k, v in values.items() if k in GPU_RESOURCES}
    if not gpu:
        return None
    names = frozenset(gpu)
    shared = gpu.pop(dev.GPU_SHARED, 0)
    rest = frozenset(gpu)
    if shared:
        if rest not in _SHARED_COMBINATIONS:
            raise DeviceRequestError(f"invalid GPU request combination {_describe(values)}: with "
                                     f"{dev.GPU_SHARED} ask for {dev.GPU_MEMORY} or {dev.GPU_MEMORY_RATIO}, "
                                     f"optionally with {dev.GPU_CORE}")
        for name in (dev.GPU_CORE, dev.GPU_MEMORY_RATIO):
            v = gpu.get(name)
            if v is not None and (v % shared or v > 100 * shared):
                raise DeviceRequestError(f"invalid GPU request {name}={v} with {dev.GPU_SHARED}={shared}: must be "
                                         f"a multiple of {dev.GPU_SHARED} and at most 100 x {dev.GPU_SHARED}")
    elif names not in _GPU_COMBINATIONS:
        raise DeviceRequestError(f"invalid GPU request combination {_describe(gpu)}: accepted are one of "
                                 f"{', '.join(GPU_VENDOR_WHOLE)}, {dev.KOORD_GPU}; or {dev.GPU_MEMORY}, "
                                 f"{dev.GPU_MEMORY_RATIO}, {dev.GPU_CORE}+{dev.GPU_MEMORY}, "
                                 f"{dev.GPU_CORE}+{dev.GPU_MEMORY_RATIO}")
    # Normalise the whole-device and combined forms to gpu-core + gpu-memory-ratio.
    for name in GPU_VENDOR_WHOLE:
        if name in gpu:
            n = gpu.pop(name)
            gpu = {dev.GPU_CORE: 100 * n, dev.GPU_MEMORY_RATIO: 100 * n}
    if dev.KOORD_GPU in gpu:
        x = gpu.pop(dev.KOORD_GPU)
        gpu = {dev.GPU_CORE: x, dev.GPU_MEMORY_RATIO: x}
    ratio = gpu.get(dev.GPU_MEMORY_RATIO, 0)
    if shared:
        count = shared
    elif ratio > 100 and ratio % 100 == 0:
        count = ratio // 100
    else:
        count = 1
    per_device = {k: v // count for k, v in gpu.items()}
    is_shared = per_device.get(dev.GPU_MEMORY_RATIO, 0) < 100 or set(per_device) == {dev.GPU_MEMORY}
    return DeviceRequest(dev.TYPE_GPU, per_device, count, is_shared)


def _whole_or_percent(kind: str, name: str, v: int) -> DeviceRequest:
    count = v // 100 if v > 100 else 1
    return DeviceRequest(kind, {name: v // count}, count, v < 100)


def parse_requests(requests: Mapping[str, int]) -> PodDeviceRequests | None:
    """The device requests in ``requests`` (a pod's requests in milli-units), None when it has none.

    Raises :class:`DeviceRequestError` for a negative value, an unsupported combination, a bad
    percentage (gpu-core 101) or an NPU request.
    """
    values: dict[str, int] = {}
    for name, milli in requests.items():
        if name not in DEVICE_RESOURCES:
            continue
        v = extension.value_of_milli(milli)
        if v < 0:
            raise DeviceRequestError(f"invalid device request {name}={v}: must not be negative")
        if v:
            values[name] = v
    if not values:
        return None
    npu = sorted(set(values) & NPU_RESOURCES)
    if npu:
        raise DeviceRequestError(f"device request {', '.join(npu)} is not supported: NPU sharing needs GPU shared "
                                 "resource templates, which this build does not implement")
    _check_percentages(values)
    out = []
    gpu = _gpu(values)
    if gpu is not None:
        out.append(gpu)
    for kind, name in ((dev.TYPE_RDMA, dev.RDMA), (dev.TYPE_FPGA, dev.FPGA)):
        if name in values:
            out.append(_whole_or_percent(kind, name, values[name]))
    return PodDeviceRequests(tuple(out))


def fill_gpu_memory(request: Mapping[str, int], total: Mapping[str, int]) -> dict[str, int] | None:
    """``request`` completed against one device's ``total`` (Koordinator's fillGPUTotalMem).

    Ratio only: gpu-memory = floor(ratio x total memory / 100); memory only: gpu-memory-ratio =
    floor(memory / total memory x 100); both: unchanged. None when the device reports no memory.
    """
    has_ratio, has_memory = dev.GPU_MEMORY_RATIO in request, dev.GPU_MEMORY in request
    if has_ratio == has_memory:
        return dict(request)
    total_memory = total.get(dev.GPU_MEMORY, 0)
    if total_memory <= 0:
        return None
    out = dict(request)
    if has_ratio:
        out[dev.GPU_MEMORY] = request[dev.GPU_MEMORY_RATIO] * total_memory // 100
    else:
        out[dev.GPU_MEMORY_RATIO] = request[dev.GPU_MEMORY] * 100 // total_memory
    return out
