"""The device daemon's scan: NVIDIA GPUs (NVML), other accelerators (PCI sysfs) and RDMA devices, as the
device infos document's entries (:class:`~koordinator.devices.xpu.XPUDeviceInfo`).

* NVIDIA GPU: vendor ``nvidia``, NVML's model, UUID and minor; ``koordinator.sh/gpu-core`` 100 and
  ``koordinator.sh/gpu-memory`` (its memory, binary SI) — the resources the koordlet's NVML path gives
  it; topology from sysfs (NUMA node, PCI root, bus id) and its NVLink peers as one ``p2pLinks`` entry
  ``{"peerMinor": "1,2,3", "type": "NVLink"}`` (PCIe-only neighbours are not links).
* Other accelerator (:data:`koordinator.devices.pci.VENDORS`): sysfs knows neither model name nor
  memory: model ``<vendor>-<device id>`` ("huawei-d801"), UUID ``<vendor>-<bus id>``, minor = its
  rank among that vendor's devices by bus id, ``gpu-core`` 100.
* RDMA device: ``"type": "rdma"``, UUID = bus id, model = the RDMA device name (``mlx5_0``), minor =
  its rank, ``koordinator.sh/rdma`` 100.

No NVML (no library, no driver) with no other device: an empty list and the one info line
:func:`koordinator.devices.nvml.discover_gpus` logs. NVIDIA PCI functions seen without NVML are said
once at info: they are not reported (their UUIDs and minors come from NVML).
"""

from __future__ import annotations

import logging
from typing import Any

from koordinator.apis.device import GPU_CORE, GPU_MEMORY, GPU_VENDOR_NVIDIA, RDMA
from koordinator.apis.quantity import BINARY_SI, format_quantity
from koordinator.devices import nvml as nvml_discovery
from koordinator.devices import pci
from koordinator.devices.xpu import TYPE_RDMA, P2PLink, Status, Topology, XPUDeviceInfo

log = logging.getLogger("koordinator.device_daemon.discovery")

#: What the daemon does without NVML, in the info line.
NO_NVML = "no NVIDIA GPU in the device infos"


def nvidia_infos(inventory: nvml_discovery.GPUInventory) -> list[XPUDeviceInfo]:
    """The entries of NVML's GPUs, by minor."""
    out = []
    for gpu in sorted(inventory.gpus, key=lambda g: g.minor):
        nvlink = sorted(minor for minor, kind in gpu.links.items() if kind == nvml_discovery.NVLINK)
        links = (P2PLink(peer_minor=",".join(str(m) for m in nvlink), type=nvml_discovery.NVLINK),) if nvlink else ()
        out.append(XPUDeviceInfo(
            vendor=GPU_VENDOR_NVIDIA, model=gpu.name or inventory.model, uuid=gpu.uuid, minor=str(gpu.minor),
            resources={GPU_CORE: "100", GPU_MEMORY: format_quantity(gpu.memory_total, BINARY_SI)},
            topology=Topology(node_id=str(gpu.numa_node), pcie_id=gpu.pcie_id, bus_id=gpu.bus_id, p2p_links=links),
            status=Status(healthy=gpu.health)))
    return out


def accelerator_infos(devices: list[pci.PCIDevice]) -> list[XPUDeviceInfo]:
    """The entries of the known non-NVIDIA accelerators among ``devices``."""
    out, ranks = [], {}
    for vendor, dev in pci.accelerators(devices):
        minor = ranks.get(vendor, 0)
        ranks[vendor] = minor + 1
        out.append(XPUDeviceInfo(
            vendor=vendor, model=f"{vendor}-{dev.device:04x}", uuid=f"{vendor}-{dev.bus_id}", minor=str(minor),
            resources={GPU_CORE: "100"},
            topology=Topology(node_id=str(dev.numa_node), pcie_id=dev.pcie_id, bus_id=dev.bus_id),
            status=Status(healthy=True)))
    return out


def rdma_infos(devices: list[pci.RDMADevice]) -> list[XPUDeviceInfo]:
    """The entries of the RDMA devices."""
    return [XPUDeviceInfo(
        type=TYPE_RDMA, vendor=pci.RDMA_VENDORS.get(d.pci.vendor, f"{d.pci.vendor:04x}"), model=d.name,
        uuid=d.pci.bus_id, minor=str(rank), resources={RDMA: "100"},
        topology=Topology(node_id=str(d.pci.numa_node), pcie_id=d.pci.pcie_id, bus_id=d.pci.bus_id),
        status=Status(healthy=True)) for rank, d in enumerate(devices)]


def scan(sys_root: str = "/sys", nvml: Any = None) -> tuple[list[XPUDeviceInfo], nvml_discovery.GPUInventory | None]:
    """:func:`discover`'s entries plus NVML's inventory (None: no NVML), for a caller that also wants the
    driver version and the whole GPU-to-GPU link matrix."""
    pci_devices = pci.scan_pci(sys_root)
    inventory = nvml_discovery.discover_gpus(nvml, sys_root=sys_root, links=True, logger=log, consequence=NO_NVML)
    infos: list[XPUDeviceInfo] = []
    if inventory is not None:
        infos += nvidia_infos(inventory)
    elif seen := pci.nvidia_gpus(pci_devices):
        log.info("%d NVIDIA GPU(s) on the PCI bus (%s) but no NVML: not in the device infos", len(seen),
                 ",".join(d.bus_id for d in seen))
    infos += accelerator_infos(pci_devices)
    infos += rdma_infos(pci.scan_rdma(sys_root))
    return infos, inventory


def discover(sys_root: str = "/sys", nvml: Any = None) -> list[XPUDeviceInfo]:
    """Every device of the host at ``sys_root``: NVIDIA GPUs, then other accelerators, then RDMA devices.

    ``nvml``: the NVML module (None: ``pynvml``, imported now). Problems with one device are logged and
    leave that device out; nothing here raises for a host without devices.
    """
    return scan(sys_root, nvml)[0]
