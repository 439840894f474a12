"""GPUDeviceResource and RDMADeviceResource: node extended resources from the node's Device CR.

GPU: Σ resources of healthy ``gpu`` devices, plus ``koordinator.sh/gpu`` = Σ gpu-core (and
``koordinator.sh/gpu.shared`` = 100 × healthy GPUs when EnableSyncGPUSharedResource is on);
GPU model/driver labels of the Device copied to the node. RDMA: Σ ``koordinator.sh/rdma`` of
healthy ``rdma`` devices. No Device → the plugin's resources are reset. Unlike batch/mid, a
resource without a quantity is left on the node (only resets remove).
"""

from __future__ import annotations

from typing import Any, Mapping

from koordinator.apis import extension as ext
from koordinator.apis import quantity
from koordinator.apis.device import (GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_SHARED, KOORD_GPU,
                                     LABEL_GPU_DRIVER_VERSION, LABEL_GPU_MODEL, RDMA)

from . import framework as fw
from .framework import NodeResource, PluginError

GPU_NAME = "GPUDeviceResource"
RDMA_NAME = "RDMADeviceResource"

RESOURCE_GPU = KOORD_GPU
RESOURCE_GPU_SHARED = GPU_SHARED
RESOURCE_GPU_CORE = GPU_CORE
RESOURCE_GPU_MEMORY = GPU_MEMORY
RESOURCE_GPU_MEMORY_RATIO = GPU_MEMORY_RATIO
RESOURCE_RDMA = RDMA
GPU_RESOURCES = (RESOURCE_GPU, RESOURCE_GPU_CORE, RESOURCE_GPU_MEMORY, RESOURCE_GPU_MEMORY_RATIO)
RDMA_RESOURCES = (RESOURCE_RDMA,)
GPU_LABELS = (LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION)

RESET_GPU_MESSAGE = "reset node gpu resources"
UPDATE_GPU_MESSAGE = "node gpu resources from device"
RESET_RDMA_MESSAGE = "reset node rdma resources"
UPDATE_RDMA_MESSAGE = "node rdma resources from device"


def _healthy(device: Mapping[str, Any], kind: str) -> list[Mapping[str, Any]]:
    return [d for d in ((device.get("spec") or {}).get("devices") or [])
            if d.get("type") == kind and d.get("health") is True]


def _sum(devices: list[Mapping[str, Any]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for i, d in enumerate(devices):
        try:
            total = ext.add(total, ext.resource_list(d.get("resources")))
        except (quantity.QuantityError, ValueError) as err:
            raise PluginError(f"device spec.devices[{i}].resources: {err}") from err
    return total


def calculate_gpu(device: Mapping[str, Any] | None, nr: NodeResource, *, gpu_shared: bool = False) -> None:
    if device is None:
        for name in GPU_RESOURCES:
            nr.reset(name, RESET_GPU_MESSAGE)
        return
    healthy = _healthy(device, "gpu")
    total = _sum(healthy)
    total[RESOURCE_GPU] = total.get(RESOURCE_GPU_CORE, 0)
    if gpu_shared:
        total[RESOURCE_GPU_SHARED] = len(healthy) * 100 * 1000
    for name in sorted(total):
        nr.set_quantity(name, ext.value_of_milli(total[name]), UPDATE_GPU_MESSAGE)
    labels = (device.get("metadata") or {}).get("labels") or {}
    for key in GPU_LABELS:
        if key in labels:
            nr.labels[key] = labels[key]


def calculate_rdma(device: Mapping[str, Any] | None, nr: NodeResource) -> None:
    if device is None:
        for name in RDMA_RESOURCES:
            nr.reset(name, RESET_RDMA_MESSAGE)
        return
    total = _sum(_healthy(device, "rdma"))
    if RESOURCE_RDMA in total:
        nr.set_quantity(RESOURCE_RDMA, ext.value_of_milli(total[RESOURCE_RDMA]), UPDATE_RDMA_MESSAGE)


def need_sync_meta(old_node: Mapping[str, Any], new_node: Mapping[str, Any]) -> bool:
    old, new = fw.node_labels(old_node), fw.node_labels(new_node)
    return any(old.get(key, "") != new.get(key, "") for key in GPU_LABELS)
