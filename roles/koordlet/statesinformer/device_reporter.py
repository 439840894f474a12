"""The ``Device`` object of this node (reference A.6.5; gate ``Accelerators``).

GPUs are discovered once through NVML (:mod:`.nvml`); every ``node-topology-sync-interval`` the
Device named after the node (``scheduling.koordinator.sh/v1alpha1``, owned by the Node) is created
if missing and updated when its devices or GPU labels differ. Each GPU is an entry of type ``gpu``
with ``koordinator.sh/gpu-core`` 100, ``gpu-memory`` (bytes), ``gpu-memory-ratio`` 100 and its
topology (socket -1, NUMA node, PCI root, bus id); the labels carry the vendor, model and driver
version. Without NVML (or without GPUs) nothing is reported. The GPU list also goes to the metric
cache (KV ``gpu_devices``) so GPU usage can be reported per device.
"""

from __future__ import annotations

import copy
import logging
import re
import threading
from typing import Any, Callable

from koordinator.apis import quantity
from koordinator.apis.device import (DEVICE_API_VERSION, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_VENDOR_NVIDIA,
                                     LABEL_GPU_DRIVER_VERSION, LABEL_GPU_MODEL, LABEL_GPU_VENDOR)
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.statesinformer.nvml import GPUInventory, discover_gpus
from koordinator_roles.koordlet.statesinformer.nodeobject import owner_reference, sync_node_object
from koordinator_roles.koordlet.statesinformer.problems import TaskProblem

log = logging.getLogger("koordinator.koordlet.statesinformer.device")

Obj = dict[str, Any]

#: A Device labelled as managed by someone else (the node simulator, acting as the device daemon) is left alone.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
_GPU_LABELS = (LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION)

_LABEL_INVALID = re.compile(r"[^A-Za-z0-9._-]+")


def label_value(text: str) -> str:
    """``text`` made a valid label value: other characters become ``-``, at most 63, alphanumeric ends
    ("NVIDIA H100 80GB HBM3" → "NVIDIA-H100-80GB-HBM3")."""
    value = _LABEL_INVALID.sub("-", text)[:63]
    return value.strip("-_.")


def gpu_devices(inventory: GPUInventory) -> list[Obj]:
    """``spec.devices`` entries for the GPUs, sorted by minor."""
    out = []
    for gpu in sorted(inventory.gpus, key=lambda g: g.minor):
        out.append({
            "id": gpu.uuid,
            "minor": gpu.minor,
            "type": "gpu",
            "health": gpu.health,
            "resources": {
                GPU_CORE: "100",
                GPU_MEMORY: quantity.format_quantity(gpu.memory_total, quantity.BINARY_SI),
                GPU_MEMORY_RATIO: "100",
            },
            "topology": {"socketID": -1, "nodeID": gpu.numa_node, "pcieID": gpu.pcie_id, "busID": gpu.bus_id},
        })
    return out


def gpu_labels(inventory: GPUInventory) -> Obj:
    labels = {LABEL_GPU_VENDOR: GPU_VENDOR_NVIDIA}
    if label_value(inventory.model):
        labels[LABEL_GPU_MODEL] = label_value(inventory.model)
    if label_value(inventory.driver_version):
        labels[LABEL_GPU_DRIVER_VERSION] = label_value(inventory.driver_version)
    return labels


class DeviceReporter:
    """Reports the node's GPUs as its ``Device`` (see the module docstring).

    ``nvml`` is the NVML module handed to ``discover`` (None: import ``pynvml`` then); ``sys_root``
    is where PCI devices are looked up; ``cache`` (optional) receives the GPU list under KV
    ``gpu_devices``.
    """

    def __init__(self, client: Any, states: Any, cache: Any = None, *, nvml: Any = None, sys_root: str = "/sys",
                 interval: float = 3.0,
                 discover: Callable[..., GPUInventory | None] = discover_gpus) -> None:
        self.client = client
        self.states = states
        self.cache = cache
        self.nvml = nvml
        self.sys_root = sys_root
        self.interval = interval
        self._discover = discover
        self._inventory: GPUInventory | None = None
        self._discovered = False
        self._problems = TaskProblem(log, "Device report")
        self._foreign: str | None = None  # who manages the Device when it is not us (logged once)

    def inventory(self) -> GPUInventory | None:
        """The GPUs, discovered on the first call (None: NVML unavailable)."""
        if not self._discovered:
            self._discovered = True
            self._inventory = self._discover(self.nvml, sys_root=self.sys_root)
            if self._inventory is not None:
                log.info("GPUs discovered count=%d model=%r driver=%r", len(self._inventory.gpus),
                         self._inventory.model, self._inventory.driver_version)
                if self.cache is not None:
                    self.cache.set_kv(kinds.KV_GPU_DEVICES, [{"minor": g.minor, "uuid": g.uuid}
                                                            for g in self._inventory.gpus])
        return self._inventory

    def run(self, stop: threading.Event) -> None:
        """Report at once, then every ``interval`` until ``stop``; returns when there is no NVML."""
        while not stop.is_set():
            try:
                self.sync_once()
            except Exception:  # the next round may succeed; never end the loop
                log.exception("Device report failed")
            if self._discovered and self._inventory is None:
                return  # nothing will ever be reported
            stop.wait(self.interval)

    def sync_once(self) -> bool:
        """Create or update the Device if needed; True when something was written."""
        inventory = self.inventory()
        node = self.states.node()
        if inventory is None or not inventory.gpus or node is None:
            return False
        devices, labels = gpu_devices(inventory), gpu_labels(inventory)
        name = self.states.node_name

        def new() -> Obj:
            return {"apiVersion": DEVICE_API_VERSION, "kind": "Device",
                    "metadata": {"name": name, "labels": labels, "ownerReferences": [owner_reference(node)]},
                    "spec": {"devices": devices}}

        def merge(current: Obj) -> Obj:
            manager = ((current.get("metadata") or {}).get("labels") or {}).get(LABEL_MANAGED_BY)
            if manager:
                if self._foreign != manager:
                    self._foreign = manager
                    log.info("Device %s is managed by %s: not updated", name, manager)
                return current
            self._foreign = None
            updated = copy.deepcopy(current)
            md = updated.setdefault("metadata", {})
            md["labels"] = {**(md.get("labels") or {}), **labels}
            updated.setdefault("spec", {})["devices"] = devices
            return updated

        return sync_node_object(self.client, "Device", name, new=new, merge=merge, problems=self._problems,
                                what="Device", log=log, detail=f" gpus={len(devices)}")
