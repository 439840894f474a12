"""The koordlet's GPU discovery: :mod:`koordinator.devices.nvml` (shared with the device daemon), logged
under the koordlet's Device reporter, whose consequence of no NVML is "no Device reported"."""

from __future__ import annotations

import logging
from typing import Any

from koordinator.devices.nvml import GPU, GPUInventory, load_nvml, pci_location, sysfs_bus_id
from koordinator.devices.nvml import discover_gpus as _discover

__all__ = ["GPU", "GPUInventory", "discover_gpus", "load_nvml", "pci_location", "sysfs_bus_id"]

log = logging.getLogger("koordinator.koordlet.statesinformer.device")


def discover_gpus(nvml: Any = None, *, sys_root: str = "/sys") -> GPUInventory | None:
    """The node's GPUs through NVML (None: NVML unavailable), as :func:`koordinator.devices.nvml.discover_gpus`."""
    return _discover(nvml, sys_root=sys_root, logger=log, consequence="no Device reported")
