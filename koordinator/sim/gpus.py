"""Simulated NVIDIA GPUs: what a node with GPUs shows its device daemon, its koordlet and the API.

A simulated node gets ``count`` GPUs (``--gpus-per-node``, or the Node annotation
``sim.koordinator.sh/gpus: "N"``, which wins). For each node the simulator, acting as the device
daemon and the NVIDIA device plugin would,

* writes the devices into the fake sysfs and /proc (:func:`write_files`)::

    sys/devices/pci0000:<root>/0000:<root>:00.0/<busID>/{vendor,device,class,numa_node,...}
    sys/bus/pci/devices/<busID>  -> ../../../devices/pci0000:<root>/0000:<root>:00.0/<busID>
    proc/driver/nvidia/gpus/<busID>/information   Model, GPU UUID, Bus Location, Device Minor, ...
    dev/nvidia<minor>                              an empty file standing for the device node

* keeps the ``Device`` named after the node (:func:`device_object`: type gpu, minors 0..N-1, id
  ``GPU-<stable hash>``, healthy, gpu-core 100 / gpu-memory 16Gi / gpu-memory-ratio 100, topology),
  labelled ``app.kubernetes.io/managed-by: koordinator-simulator`` so that the simulator only ever
  deletes its own;
* puts the GPU labels on the Node (:func:`node_labels`: vendor nvidia, model) and ``nvidia.com/gpu``
  = N into its capacity and allocatable, as the kubelet does for the NVIDIA device plugin.

GPU i sits on NUMA node ``i × NUMA nodes ÷ N`` (spread over the sockets, lowest first), behind a PCIe
root port of its own. Everything is a pure function of the node name and the count, so a restart
writes the same ids.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any

from koordinator.apis.device import (DEVICE_API_VERSION, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_VENDOR_NVIDIA,
                                     LABEL_GPU_DRIVER_VERSION, LABEL_GPU_MODEL, LABEL_GPU_VENDOR, NVIDIA_GPU, TYPE_GPU)

Obj = dict[str, Any]

#: Most GPUs one simulated node may have (each gets a PCI bus number of its own below 0x100).
MAX_GPUS = 16
MODEL = "Tesla V100-SXM2-16GB"
MODEL_LABEL = "Tesla-V100-SXM2-16GB"
DRIVER_VERSION = "535.104.05"
MEMORY = "16Gi"
MEMORY_BYTES = 16 << 30
NVIDIA_VENDOR_ID = "0x10de"
PCI_CLASS_3D = "0x030200"  # 3D controller, as a data-centre GPU reports itself
PCI_DEVICE_ID = "0x1db1"   # V100 SXM2 16GB
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "koordinator-simulator"


@dataclass(frozen=True)
class SimGPU:
    """One simulated GPU."""

    minor: int
    uuid: str
    bus_id: str      # sysfs spelling, "0000:1b:00.0"
    numa_node: int
    pcie_id: str     # the PCI root it hangs off, "pci0000:1a"

    @property
    def root_port(self) -> str:
        """The bridge between the root and the GPU, "0000:1a:00.0"."""
        return f"0000:{self.pcie_id[len('pci0000:'):]}:00.0"


def gpu_uuid(node: str, minor: int) -> str:
    """``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx``, the same for the same node and minor."""
    h = hashlib.sha256(f"{node}/gpu/{minor}".encode()).hexdigest()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def simulated_gpus(node: str, count: int, numa_nodes: int) -> list[SimGPU]:
    """The GPUs of ``node`` (see the module docstring); ValueError for a count out of 0..MAX_GPUS."""
    if not 0 <= count <= MAX_GPUS:
        raise ValueError(f"GPU count {count}: must be 0-{MAX_GPUS}")
    numa_nodes = max(1, numa_nodes)
    out = []
    for minor in range(count):
        root = 0x1a + minor * 0x0e  # root 0x1a, GPU 0x1b; the next root 0x28 ...: all below 0x100
        out.append(SimGPU(minor=minor, uuid=gpu_uuid(node, minor), bus_id=f"0000:{root + 1:02x}:00.0",
                          numa_node=minor * numa_nodes // count, pcie_id=f"pci0000:{root:02x}"))
    return out


def device_entry(gpu: SimGPU) -> Obj:
    """The ``spec.devices`` entry of ``gpu`` (the koordlet's Device reporter writes the same shape)."""
    return {"id": gpu.uuid, "minor": gpu.minor, "type": TYPE_GPU, "health": True,
            "resources": {GPU_CORE: "100", GPU_MEMORY: MEMORY, GPU_MEMORY_RATIO: "100"},
            "topology": {"socketID": -1, "nodeID": gpu.numa_node, "pcieID": gpu.pcie_id, "busID": gpu.bus_id}}


def device_labels() -> dict[str, str]:
    """The Device's labels: the GPU labels (the manager copies model and driver to the Node) and ours."""
    return {LABEL_GPU_VENDOR: GPU_VENDOR_NVIDIA, LABEL_GPU_MODEL: MODEL_LABEL,
            LABEL_GPU_DRIVER_VERSION: DRIVER_VERSION, LABEL_MANAGED_BY: MANAGER}


def device_object(node: Obj, gpus: list[SimGPU]) -> Obj:
    """The ``Device`` named after ``node`` (owned by it) listing ``gpus``."""
    md = node.get("metadata") or {}
    owner = {"apiVersion": "v1", "kind": "Node", "name": md.get("name", ""), "uid": md.get("uid", ""),
             "controller": True, "blockOwnerDeletion": True}
    return {"apiVersion": DEVICE_API_VERSION, "kind": "Device",
            "metadata": {"name": md.get("name", ""), "labels": device_labels(),
                         **({"ownerReferences": [owner]} if md.get("uid") else {})},
            "spec": {"devices": [device_entry(g) for g in gpus]}}


def is_ours(device: Obj | None) -> bool:
    """Whether ``device`` was written by the simulator (only those are updated or deleted)."""
    labels = ((device or {}).get("metadata") or {}).get("labels") or {}
    return labels.get(LABEL_MANAGED_BY) == MANAGER


def node_labels(count: int) -> dict[str, str | None]:
    """The GPU labels the Node must carry (None: to be removed)."""
    if count:
        return {LABEL_GPU_VENDOR: GPU_VENDOR_NVIDIA, LABEL_GPU_MODEL: MODEL_LABEL}
    return {LABEL_GPU_VENDOR: None, LABEL_GPU_MODEL: None}


def node_status_patch(node: Obj, count: int) -> Obj | None:
    """The status patch that makes ``nvidia.com/gpu`` = ``count`` in capacity and allocatable (the kubelet's
    device plugin manager); None when they already say so (or say nothing and ``count`` is 0)."""
    status = node.get("status") or {}
    want = str(count)
    patch = {}
    for field in ("capacity", "allocatable"):
        have = (status.get(field) or {}).get(NVIDIA_GPU)
        if have != want and not (have is None and count == 0):
            patch[field] = {NVIDIA_GPU: want}
    return patch or None


# -- files --------------------------------------------------------------------------------------------

def _information(gpu: SimGPU) -> str:
    """``/proc/driver/nvidia/gpus/<busID>/information`` as the NVIDIA driver writes it."""
    rows = [("Model", MODEL), ("IRQ", str(100 + gpu.minor)), ("GPU UUID", gpu.uuid),
            ("Video BIOS", "88.00.4f.00.09"), ("Bus Type", "PCIe"), ("DMA Size", "47 bits"),
            ("DMA Mask", "0x7fffffffffff"), ("Bus Location", gpu.bus_id), ("Device Minor", str(gpu.minor)),
            ("GPU Excluded", "No")]
    return "".join(f"{k + ':':<19} {v}\n" for k, v in rows)


def write_files(tree: Any, gpus: list[SimGPU]) -> None:
    """The GPUs' sysfs, /proc and /dev files in the node tree ``tree`` (a :class:`~koordinator.sim.tree.NodeTree`:
    its atomic, remembered writes); the files of GPUs no longer there are removed."""
    base = tree.base
    sys_root, proc_root = base / "sys", base / "proc"
    bus_dir = sys_root / "bus" / "pci" / "devices"
    info_dir = proc_root / "driver" / "nvidia" / "gpus"
    for gpu in gpus:
        real = sys_root / "devices" / gpu.pcie_id / gpu.root_port / gpu.bus_id
        for name, text in (("vendor", NVIDIA_VENDOR_ID), ("device", PCI_DEVICE_ID), ("class", PCI_CLASS_3D),
                           ("subsystem_vendor", NVIDIA_VENDOR_ID), ("numa_node", str(gpu.numa_node)),
                           ("local_cpulist", tree.numa_cpulist(gpu.numa_node)), ("enable", "1")):
            tree.write(real / name, text + "\n")
        bus_dir.mkdir(parents=True, exist_ok=True)
        link = bus_dir / gpu.bus_id
        target = os.path.relpath(real, bus_dir)
        if not link.is_symlink() or os.readlink(link) != target:
            if link.is_symlink() or link.exists():
                link.unlink()
            link.symlink_to(target)
        tree.write(info_dir / gpu.bus_id / "information", _information(gpu))
        tree.write(base / "dev" / f"nvidia{gpu.minor}", "")
    _remove_others(tree, gpus)


def _remove_others(tree: Any, gpus: list[SimGPU]) -> None:
    """Remove what a node with more GPUs (before its GPU annotation changed) left behind."""
    base = tree.base
    buses = {g.bus_id for g in gpus}
    roots = {g.pcie_id for g in gpus}
    minors = {f"nvidia{g.minor}" for g in gpus}
    for parent, keep in ((base / "sys" / "bus" / "pci" / "devices", buses),
                         (base / "proc" / "driver" / "nvidia" / "gpus", buses), (base / "dev", minors)):
        if parent.is_dir():
            for entry in list(parent.iterdir()):
                if entry.name not in keep and not entry.name.startswith("."):
                    tree.remove_path(entry)
    devices = base / "sys" / "devices"
    if devices.is_dir():
        for entry in list(devices.glob("pci0000:*")):
            if entry.name not in roots:
                tree.remove_path(entry)
