"""Device vocabulary shared by the scheduler (DeviceShare), the koordlet (Device reporting, GPU hooks) and the
manager (device resources on the Node): resource names, labels and the ``device-allocated`` annotation.

``scheduling.koordinator.sh/device-allocated`` is what DeviceShare writes on a pod at PreBind and what the
koordlet reads to give containers their devices::

    {"gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu-core": "50", ...}, "id": "GPU-..."}],
     "rdma": [{"minor": 1, "resources": {"koordinator.sh/rdma": "1"}, "extension": {"vfs": [...]}}]}
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

DEVICE_API_VERSION = "scheduling.koordinator.sh/v1alpha1"

# Resource names (reference scheduler.md §2.6.2).
GPU_CORE = "koordinator.sh/gpu-core"
GPU_MEMORY = "koordinator.sh/gpu-memory"
GPU_MEMORY_RATIO = "koordinator.sh/gpu-memory-ratio"
GPU_SHARED = "koordinator.sh/gpu.shared"
KOORD_GPU = "koordinator.sh/gpu"           # deprecated combined form: 100 = one whole GPU
RDMA = "koordinator.sh/rdma"
FPGA = "koordinator.sh/fpga"
NVIDIA_GPU = "nvidia.com/gpu"
AMD_GPU = "amd.com/gpu"
HYGON_DCU = "dcu.com/gpu"
NPU_CORE = "huawei.com/npu-core"
NPU_CPU = "huawei.com/npu-cpu"
NPU_DVPP = "huawei.com/npu-dvpp"

# Device types (Device spec.devices[].type and the keys of device-allocated).
TYPE_GPU = "gpu"
TYPE_RDMA = "rdma"
TYPE_FPGA = "fpga"

# Node labels describing its GPUs.
LABEL_GPU_VENDOR = "node.koordinator.sh/gpu-vendor"
LABEL_GPU_MODEL = "node.koordinator.sh/gpu-model"
LABEL_GPU_DRIVER_VERSION = "node.koordinator.sh/gpu-driver-version"
LABEL_GPU_ISOLATION_PROVIDER = "koordinator.sh/gpu-isolation-provider"
GPU_VENDOR_NVIDIA = "nvidia"

ANNOTATION_DEVICE_ALLOCATED = "scheduling.koordinator.sh/device-allocated"

# Container environment the koordlet's GPU hook sets (reference koordlet-manager.md A.8.2 "GPU env").
ENV_NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


class DeviceAllocationError(ValueError):
    """A malformed ``device-allocated`` annotation; the message names the annotation and the bad part."""


@dataclass(frozen=True)
class DeviceAllocation:
    """One device given to a pod: its minor, the share of it (resource name -> quantity string) and its id."""

    minor: int
    resources: Mapping[str, str] = field(default_factory=dict)
    id: str = ""
    extension: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"minor": self.minor, "resources": dict(self.resources)}
        if self.id:
            out["id"] = self.id
        if self.extension:
            out["extension"] = dict(self.extension)
        return out


def parse_device_allocated(raw: str | None) -> dict[str, list[DeviceAllocation]]:
    """The pod's allocations by device type ({} when the annotation is absent or empty)."""
    if not raw:
        return {}
    where = f"annotation {ANNOTATION_DEVICE_ALLOCATED}"
    try:
        data = json.loads(raw)
    except ValueError as err:
        raise DeviceAllocationError(f"{where}: invalid JSON {raw!r}: {err}") from None
    if not isinstance(data, dict):
        raise DeviceAllocationError(f"{where}: must be an object of device type -> list, got {raw!r}")
    out: dict[str, list[DeviceAllocation]] = {}
    for kind, entries in data.items():
        if entries is None:
            continue
        if not isinstance(entries, list):
            raise DeviceAllocationError(f"{where}: {kind!r} must be a list, got {entries!r}")
        allocations = []
        for i, entry in enumerate(entries):
            minor = entry.get("minor") if isinstance(entry, dict) else None
            if not isinstance(minor, int) or isinstance(minor, bool) or minor < 0:
                raise DeviceAllocationError(f"{where}: {kind}[{i}].minor must be a non-negative integer, "
                                            f"got {entry!r}")
            resources = entry.get("resources") or {}
            if not isinstance(resources, dict):
                raise DeviceAllocationError(f"{where}: {kind}[{i}].resources must be an object, got {resources!r}")
            extension = entry.get("extension") or {}
            allocations.append(DeviceAllocation(minor, {str(k): str(v) for k, v in resources.items()},
                                                str(entry.get("id") or ""),
                                                extension if isinstance(extension, dict) else {}))
        out[str(kind)] = allocations
    return out


def format_device_allocated(allocations: Mapping[str, list[DeviceAllocation]]) -> str:
    """The annotation value for ``allocations`` (types with no device left out), compact JSON."""
    return json.dumps({kind: [a.to_json() for a in items] for kind, items in allocations.items() if items},
                      separators=(",", ":"), sort_keys=True)
