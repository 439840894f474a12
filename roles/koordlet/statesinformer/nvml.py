"""GPU discovery through NVML (``nvidia-ml-py``, module ``pynvml``), imported only when asked for.

:func:`discover_gpus` takes an NVML module (the real ``pynvml`` by default; tests pass a stand-in
object with the same functions) and returns what the Device reporter needs. Without the library,
or when ``nvmlInit`` fails (no driver, no GPU), there is nothing to report: it returns None and logs
that once at info level, which is the normal case on a machine without NVIDIA GPUs.
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("koordinator.koordlet.statesinformer.device")


@dataclass(frozen=True)
class GPU:
    """One GPU as NVML and sysfs describe it."""

    uuid: str
    minor: int
    memory_total: int          # bytes
    bus_id: str                # PCI address as sysfs spells it, e.g. "0000:3b:00.0"
    numa_node: int
    pcie_id: str               # the PCI root the GPU hangs off, e.g. "pci0000:3a"
    health: bool = True


@dataclass(frozen=True)
class GPUInventory:
    """Every GPU of the node plus the model and driver version NVML reports."""

    gpus: list[GPU] = field(default_factory=list)
    model: str = ""
    driver_version: str = ""


def _text(value: Any) -> str:
    # nvidia-ml-py returns str; older releases returned bytes.
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def load_nvml() -> Any | None:
    """The ``pynvml`` module, or None (logged at info) when nvidia-ml-py is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        log.info("nvidia-ml-py (pynvml) is not installed: no GPU discovery, no Device reported")
        return None


def sysfs_bus_id(nvml_bus_id: str) -> str:
    """NVML's ``00000000:3B:00.0`` → sysfs ``0000:3b:00.0`` (4-digit domain, lower case)."""
    bus = nvml_bus_id.strip().lower()
    domain, sep, rest = bus.partition(":")
    if not sep:
        return bus
    return f"{domain[-4:].rjust(4, '0')}:{rest}"


def pci_location(sys_root: str, bus_id: str) -> tuple[int, str]:
    """(NUMA node, PCI root) of a PCI device from sysfs; (0, "") when sysfs does not say.

    A NUMA node of -1 (a machine without NUMA) counts as node 0.
    """
    dev = os.path.join(sys_root, "bus", "pci", "devices", bus_id)
    numa = 0
    try:
        with open(os.path.join(dev, "numa_node"), encoding="ascii") as f:
            numa = max(int(f.read().strip()), 0)
    except (OSError, ValueError):
        pass
    pcie = ""
    try:
        for part in os.path.realpath(dev).split(os.sep):
            if part.startswith("pci") and ":" in part:
                pcie = part
                break
    except OSError:
        pass
    return numa, pcie


def discover_gpus(nvml: Any = None, *, sys_root: str = "/sys") -> GPUInventory | None:
    """The node's GPUs; None when NVML is unavailable (see the module docstring).

    ``nvml`` is the NVML module to use (default: ``pynvml``, imported now). A GPU NVML fails to
    describe is left out with a warning naming its index.
    """
    if nvml is None:
        nvml = load_nvml()
        if nvml is None:
            return None
    try:
        nvml.nvmlInit()
    except Exception as err:  # pynvml raises NVMLError subclasses, or OSError when libnvidia-ml is missing
        log.info("NVML is not available (%s): no GPU discovery, no Device reported", err)
        return None
    try:
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception as err:
            log.warning("NVML: cannot read the driver version: %s", err)
            driver = ""
        count = int(nvml.nvmlDeviceGetCount())
        gpus, model = [], ""
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
                minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
                memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
                bus_id = sysfs_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId))
                name = _text(nvml.nvmlDeviceGetName(handle))
            except Exception as err:
                log.warning("NVML: GPU index %d left out: %s", index, err)
                continue
            numa, pcie = pci_location(sys_root, bus_id)
            gpus.append(GPU(uuid=uuid, minor=minor, memory_total=memory, bus_id=bus_id, numa_node=numa,
                            pcie_id=pcie))
            model = model or name
        gpus.sort(key=lambda g: g.minor)
        return GPUInventory(gpus=gpus, model=model, driver_version=driver)
    except Exception as err:
        log.warning("NVML: GPU discovery failed: %s", err)
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # nothing useful to do about a failed shutdown
            pass
