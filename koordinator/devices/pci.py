"""Accelerators and RDMA devices from sysfs: ``/sys/bus/pci/devices`` and ``/sys/class/infiniband``.

An accelerator is a PCI function whose class is a 3D/display controller (``0x03xx``), a co-processor
(``0x0b40``) or a processing accelerator (``0x12xx``), from a vendor in :data:`VENDORS` (Koordinator's
vendor names; Huawei's PCIe bridges ``0x1710``/``0x1711`` excepted). NVIDIA functions are counted but
not described here: NVML does that (:mod:`.nvml`). An RDMA device is an entry of
``/sys/class/infiniband`` whose ``device`` link leads to a PCI function.

A sysfs file that cannot be read leaves that one device out with one warning naming the file; a
missing directory means no such device.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

log = logging.getLogger("koordinator.devices.pci")

VENDOR_NVIDIA = 0x10DE
#: PCI vendor id -> Koordinator's vendor name in the device infos document.
VENDORS = {0x19E5: "huawei", 0xCABC: "cambricon", 0x1D22: "kunlun", 0x9999: "metax"}
#: Huawei PCIe bridges (not NPUs).
_EXCLUDED = {(0x19E5, 0x1710), (0x19E5, 0x1711)}
#: RDMA NIC vendors by PCI vendor id (others are named by their id).
RDMA_VENDORS = {0x15B3: "mellanox", 0x8086: "intel", 0x14E4: "broadcom", 0x1DD8: "pensando", 0x19E5: "huawei"}


@dataclass(frozen=True)
class PCIDevice:
    """One PCI function as sysfs shows it."""

    bus_id: str        # "0000:3b:00.0"
    vendor: int
    device: int
    pci_class: int     # 24 bits: base class, subclass, programming interface
    numa_node: int     # -1 (no NUMA) counts as 0
    pcie_id: str       # the PCI root, "pci0000:3a"; "" when the path does not say


@dataclass(frozen=True)
class RDMADevice:
    """An RDMA device (``mlx5_0``) and the PCI function behind it."""

    name: str
    pci: PCIDevice


def is_accelerator_class(pci_class: int) -> bool:
    """3D/display controllers, co-processors and processing accelerators."""
    base, sub = pci_class >> 16, (pci_class >> 8) & 0xFF
    return base == 0x03 or base == 0x12 or (base == 0x0B and sub == 0x40)


def _read(path: str) -> str:
    with open(path, encoding="ascii") as f:
        return f.read().strip()


def _hex(path: str) -> int:
    text = _read(path)
    try:
        return int(text, 16)
    except ValueError:
        raise ValueError(f"{path}: Invalid value: {text!r}: not a hexadecimal id") from None


def read_pci_device(dev_dir: str) -> PCIDevice:
    """The function at ``dev_dir`` (``…/bus/pci/devices/<bus id>``); OSError/ValueError naming the file."""
    bus_id = os.path.basename(dev_dir.rstrip(os.sep))
    vendor = _hex(os.path.join(dev_dir, "vendor"))
    device = _hex(os.path.join(dev_dir, "device"))
    pci_class = _hex(os.path.join(dev_dir, "class"))
    numa = 0
    numa_path = os.path.join(dev_dir, "numa_node")
    if os.path.exists(numa_path):
        text = _read(numa_path)
        try:
            numa = max(int(text), 0)
        except ValueError:
            raise ValueError(f"{numa_path}: Invalid value: {text!r}: not a NUMA node number") from None
    pcie = next((p for p in os.path.realpath(dev_dir).split(os.sep) if p.startswith("pci") and ":" in p), "")
    return PCIDevice(bus_id=bus_id, vendor=vendor, device=device, pci_class=pci_class, numa_node=numa,
                     pcie_id=pcie)


def _problem(what: str, err: Exception) -> str:
    if isinstance(err, OSError) and err.filename:
        return f"sysfs {err.filename}: cannot read ({err.strerror or err}): {what} left out"
    return f"sysfs {err}: {what} left out"


def scan_pci(sys_root: str) -> list[PCIDevice]:
    """Every PCI function under ``sys_root/bus/pci/devices``, by bus id; unreadable ones left out (logged)."""
    base = os.path.join(sys_root, "bus", "pci", "devices")
    try:
        names = sorted(os.listdir(base))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        try:
            out.append(read_pci_device(os.path.join(base, name)))
        except (OSError, ValueError) as err:
            log.warning("%s", _problem(f"PCI device {name}", err))
    return out


def accelerators(devices: list[PCIDevice]) -> list[tuple[str, PCIDevice]]:
    """(vendor name, device) of the known non-NVIDIA accelerators among ``devices``, by bus id."""
    return [(VENDORS[d.vendor], d) for d in devices
            if d.vendor in VENDORS and (d.vendor, d.device) not in _EXCLUDED and is_accelerator_class(d.pci_class)]


def nvidia_gpus(devices: list[PCIDevice]) -> list[PCIDevice]:
    """The NVIDIA display/3D functions (described by NVML, only counted here)."""
    return [d for d in devices if d.vendor == VENDOR_NVIDIA and d.pci_class >> 16 == 0x03]


def scan_rdma(sys_root: str) -> list[RDMADevice]:
    """The RDMA devices of ``sys_root/class/infiniband`` with their PCI function, by name."""
    base = os.path.join(sys_root, "class", "infiniband")
    try:
        names = sorted(os.listdir(base))
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        link = os.path.join(base, name, "device")
        if not os.path.exists(link):
            log.info("RDMA device %s has no PCI device (%s missing): left out", name, link)
            continue
        try:
            out.append(RDMADevice(name=name, pci=read_pci_device(os.path.realpath(link))))
        except (OSError, ValueError) as err:
            log.warning("%s", _problem(f"RDMA device {name}", err))
    return out
