"""NVIDIA GPU discovery through NVML (``nvidia-ml-py``, module ``pynvml``), imported only when asked for.

:func:`discover_gpus` takes an NVML module (the real ``pynvml`` by default; tests pass a stand-in
object with the same functions) and returns the GPUs. Without the library, or when ``nvmlInit`` fails
(no driver, no GPU), there is nothing to report: it returns None and logs that once at info level,
which is the normal case on a machine without NVIDIA GPUs. An NVML error about one GPU leaves that GPU
out (one warning naming its index); one about the whole scan ends it (one warning, None).

With ``links=True`` it also reads the GPU-to-GPU topology: for every pair, the closest common PCI
ancestor (``nvmlDeviceGetTopologyCommonAncestor``, as ``nvidia-smi topo -m`` shows it) and whether
they talk over NVLink (``nvmlDeviceGetP2PStatus`` with the NVLink capability).
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("koordinator.devices.nvml")

#: Link kinds, closest first: nvidia-smi's names for the common ancestor levels, and NVLink.
NVLINK = "NVLink"
_ANCESTOR_NAMES = {0: "SELF", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
#: pynvml's NVML_P2P_CAPS_INDEX_NVLINK and NVML_P2P_STATUS_OK (used when a stand-in lacks them).
_P2P_CAPS_INDEX_NVLINK = 2
_P2P_STATUS_OK = 0


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
    name: str = ""             # NVML's product name, "NVIDIA H100 80GB HBM3"
    #: peer minor -> link kind (NVLINK, or the common ancestor: "PIX" ... "SYS"); empty unless asked for.
    links: dict[int, str] = field(default_factory=dict, compare=False, hash=False)


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


def load_nvml(logger: logging.Logger = log, consequence: str = "no NVIDIA GPU discovered") -> Any | None:
    """The ``pynvml`` module, or None (logged at info) when nvidia-ml-py is not installed."""
    try:
        return importlib.import_module("pynvml")
    except ImportError:
        logger.info("nvidia-ml-py (pynvml) is not installed: no GPU discovery, %s", consequence)
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


def _link(nvml: Any, a: Any, b: Any) -> str:
    """The link kind between two GPU handles (NVLINK first; else the common ancestor's name)."""
    try:
        caps = getattr(nvml, "NVML_P2P_CAPS_INDEX_NVLINK", _P2P_CAPS_INDEX_NVLINK)
        if nvml.nvmlDeviceGetP2PStatus(a, b, caps) == getattr(nvml, "NVML_P2P_STATUS_OK", _P2P_STATUS_OK):
            return NVLINK
    except Exception:  # a binding without P2P status, or a board that does not say: the PCI ancestor alone
        pass
    level = int(nvml.nvmlDeviceGetTopologyCommonAncestor(a, b))
    return _ANCESTOR_NAMES.get(level, f"LEVEL{level}")


def _with_links(nvml: Any, found: list[tuple[Any, GPU]], logger: logging.Logger) -> list[GPU]:
    """``found``'s GPUs with their ``links`` filled in; a pair NVML cannot describe is left out (one warning)."""
    out = []
    for handle, gpu in found:
        for peer_handle, peer in found:
            if peer is gpu:
                continue
            try:
                gpu.links[peer.minor] = _link(nvml, handle, peer_handle)
            except Exception as err:  # NVMLError_NotSupported on some boards: the pair stays unknown
                logger.warning("NVML: topology of GPU minor %d to minor %d unknown: %s", gpu.minor, peer.minor, err)
        out.append(gpu)
    return out


def discover_gpus(nvml: Any = None, *, sys_root: str = "/sys", links: bool = False,
                  logger: logging.Logger = log, consequence: str = "no NVIDIA GPU discovered") -> GPUInventory | None:
    """The node's GPUs; None when NVML is unavailable (see the module docstring).

    ``nvml`` is the NVML module to use (default: ``pynvml``, imported now). A GPU NVML fails to
    describe is left out with a warning naming its index. ``logger`` and ``consequence`` (what the
    caller does without NVML, said in the info line) let a caller log under its own name.
    """
    if nvml is None:
        nvml = load_nvml(logger, consequence)
        if nvml is None:
            return None
    try:
        nvml.nvmlInit()
    except Exception as err:  # pynvml raises NVMLError subclasses, or OSError when libnvidia-ml is missing
        logger.info("NVML is not available (%s): no GPU discovery, %s", err, consequence)
        return None
    try:
        try:
            driver = _text(nvml.nvmlSystemGetDriverVersion())
        except Exception as err:
            logger.warning("NVML: cannot read the driver version: %s", err)
            driver = ""
        count = int(nvml.nvmlDeviceGetCount())
        found: list[tuple[Any, GPU]] = []
        model = ""
        for index in range(count):
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
                uuid = _text(nvml.nvmlDeviceGetUUID(handle))
                minor = int(nvml.nvmlDeviceGetMinorNumber(handle))
                memory = int(nvml.nvmlDeviceGetMemoryInfo(handle).total)
                bus_id = sysfs_bus_id(_text(nvml.nvmlDeviceGetPciInfo(handle).busId))
                name = _text(nvml.nvmlDeviceGetName(handle))
            except Exception as err:
                logger.warning("NVML: GPU index %d left out: %s", index, err)
                continue
            numa, pcie = pci_location(sys_root, bus_id)
            found.append((handle, GPU(uuid=uuid, minor=minor, memory_total=memory, bus_id=bus_id, numa_node=numa,
                                      pcie_id=pcie, name=name)))
            model = model or name
        gpus = _with_links(nvml, found, logger) if links else [gpu for _, gpu in found]
        gpus.sort(key=lambda g: g.minor)
        return GPUInventory(gpus=gpus, model=model, driver_version=driver)
    except Exception as err:
        logger.warning("NVML: GPU discovery failed: %s", err)
        return None
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # nothing useful to do about a failed shutdown
            pass
