"""The ``Device`` object of this node (reference A.6.5; gate ``Accelerators``).

GPUs are discovered once through NVML (:mod:`.nvml`); every ``node-topology-sync-interval`` the
Device named after the node (``scheduling.koordinator.sh/v1alpha1``, owned by the Node) is created
if missing and updated when its devices or GPU labels differ. Each GPU is an entry of type ``gpu``
with ``koordinator.sh/gpu-core`` 100, ``gpu-memory`` (bytes), ``gpu-memory-ratio`` 100 and its
topology (socket -1, NUMA node, PCI root, bus id); the labels carry the vendor, model and driver
version. Without NVML (or without GPUs) nothing is reported. The GPU list also goes to the metric
cache (KV ``gpu_devices``) so GPU usage can be reported per device.

With ``--xpu-device-infos-dir`` (reference §2.5) every regular file of that directory is read each
round as a device infos document (the device daemon's, :mod:`koordinator.devices.xpu`). When it lists
at least one accelerator, those are reported instead of NVML's GPUs (:func:`xpu_devices`: type gpu,
``gpu-memory-ratio`` 100 plus its resources, a ``Healthy`` condition), the labels come from the first
one (vendor, model, and the partition policy when it has ``p2pLinks``) and its links become the
``scheduling.koordinator.sh/gpu-partitions`` annotation; RDMA entries are appended in either case. An
unreadable or malformed file is one warning, and the last good read stays in use.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
import time
from typing import Any, Callable

from koordinator.apis import quantity
from koordinator.apis.device import (DEVICE_API_VERSION, GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO, GPU_VENDOR_NVIDIA,
                                     LABEL_GPU_DRIVER_VERSION, LABEL_GPU_MODEL, LABEL_GPU_VENDOR, TYPE_GPU, TYPE_RDMA)
from koordinator.devices.xpu import DocumentError, XPUDeviceInfo, read_dir
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.statesinformer.nvml import GPUInventory, discover_gpus
from koordinator_roles.koordlet.statesinformer.nodeobject import owner_reference, sync_node_object
from koordinator_roles.koordlet.statesinformer.problems import TaskProblem

log = logging.getLogger("koordinator.koordlet.statesinformer.device")

Obj = dict[str, Any]

#: A Device labelled as managed by someone else (the node simulator, acting as the device daemon) is left alone.
LABEL_MANAGED_BY = "app.kubernetes.io/managed-by"
LABEL_GPU_PARTITION_POLICY = "node.koordinator.sh/gpu-partition-policy"
ANNOTATION_GPU_PARTITIONS = "scheduling.koordinator.sh/gpu-partitions"
#: The labels this reporter owns on the Device (one no longer wanted is removed).
_GPU_LABELS = (LABEL_GPU_VENDOR, LABEL_GPU_MODEL, LABEL_GPU_DRIVER_VERSION, LABEL_GPU_PARTITION_POLICY)

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


def _int(text: str, default: int) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def _resource_name(name: str) -> str:
    # Koordinator's koordlet: bare gpu-core / gpu-memory names are koordinator.sh/ ones.
    return f"koordinator.sh/{name}" if name in ("gpu-core", "gpu-memory") else name


def _resources(info: XPUDeviceInfo, base: dict[str, str]) -> dict[str, str]:
    out = dict(base)
    for name, value in info.resources.items():
        try:
            out[_resource_name(name)] = quantity.canonical(value)
        except (ValueError, ArithmeticError):  # QuantityError is a ValueError
            log.debug("device %s resource %s=%r is not a quantity: skipped", info.uuid, name, value)
    return out


def condition_reason(err_code: str) -> str:
    """A condition reason from a device's error code: metav1.Condition wants ``[A-Za-z][A-Za-z0-9_,:]*``, and
    vendors write "chip error" or "ECC error": words capitalised and joined ("ChipError"); "Unknown" if none."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+", err_code) if w]
    reason = "".join(w[:1].upper() + w[1:] for w in words)[:1024]
    if not reason:
        return "Unknown"
    return reason if reason[0].isalpha() else f"Error{reason}"


def _condition(info: XPUDeviceInfo) -> Obj:
    status = info.status
    if status is None or status.healthy:
        return {"type": "Healthy", "status": "True", "reason": "DeviceHealthy", "message": "device is healthy"}
    return {"type": "Healthy", "status": "False", "reason": condition_reason(status.err_code),
            "message": status.err_message or "device is unhealthy"}


def xpu_devices(infos: list[XPUDeviceInfo]) -> list[Obj]:
    """``spec.devices`` entries for the device infos (accelerators as type gpu, RDMA as rdma), sorted by
    (type, minor); conditions without ``lastTransitionTime`` (:func:`_keep_transition_times` sets it)."""
    out = []
    for info in infos:
        rdma = info.type == TYPE_RDMA
        topo = info.topology
        entry: Obj = {
            "id": info.uuid, "minor": _int(info.minor, 0), "type": TYPE_RDMA if rdma else TYPE_GPU,
            "health": info.status is None or info.status.healthy,
            "resources": _resources(info, {} if rdma else {GPU_MEMORY_RATIO: "100"}),
            "conditions": [_condition(info)],
        }
        if topo is not None:
            entry["topology"] = {"socketID": _int(topo.socket_id, -1), "nodeID": _int(topo.node_id, -1),
                                 "pcieID": topo.pcie_id, "busID": topo.bus_id}
        out.append(entry)
    out.sort(key=lambda d: (d["type"], d["minor"]))
    return out


def xpu_labels(infos: list[XPUDeviceInfo]) -> Obj:
    """The Device's labels from the first accelerator: vendor, model, and the partition policy when it has links."""
    first = infos[0]
    labels = {LABEL_GPU_VENDOR: first.vendor}
    if label_value(first.model):
        labels[LABEL_GPU_MODEL] = label_value(first.model)
    if first.topology is not None and first.topology.p2p_links:
        labels[LABEL_GPU_PARTITION_POLICY] = "Honor" if first.topology.must_honor_partition else "Prefer"
    return labels


def xpu_partitions(infos: list[XPUDeviceInfo]) -> str | None:
    """The ``gpu-partitions`` annotation: size -> the GPU groups the links make (each once), or None."""
    table: dict[int, list[Obj]] = {}
    seen: set[tuple[int, ...]] = set()
    for info in infos:
        for link in (info.topology.p2p_links if info.topology is not None else ()):
            peers = {_int(m, -1) for m in link.peer_minor.split(",") if m.strip()}
            minors = tuple(sorted(peers | {_int(info.minor, 0)}))
            if minors in seen:
                continue
            seen.add(minors)
            table.setdefault(len(minors), []).append({"minors": list(minors), "gpuLinkType": link.type,
                                                      "allocationScore": 1})
    if not table:
        return None
    return json.dumps({str(size): table[size] for size in sorted(table)}, separators=(",", ":"))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _keep_transition_times(devices: list[Obj], current: list[Obj]) -> None:
    """Give each condition the ``lastTransitionTime`` of the current Device's same condition when its status
    did not flip, else now."""
    before = {(d.get("type"), d.get("id")): {c.get("type"): c for c in d.get("conditions") or []}
              for d in current or []}
    for device in devices:
        old = before.get((device["type"], device["id"]), {})
        for cond in device.get("conditions") or []:
            prev = old.get(cond["type"])
            same = prev is not None and prev.get("status") == cond["status"] and prev.get("lastTransitionTime")
            cond["lastTransitionTime"] = prev["lastTransitionTime"] if same else _now()
        if device.get("conditions"):
            device["conditions"].sort(key=lambda c: c["type"])


class DeviceReporter:
    """Reports the node's GPUs as its ``Device`` (see the module docstring).

    ``nvml`` is the NVML module handed to ``discover`` (None: import ``pynvml`` then); ``sys_root``
    is where PCI devices are looked up; ``cache`` (optional) receives the GPU list under KV
    ``gpu_devices``; ``xpu_dir`` (empty: not read) is the device infos directory.
    """

    def __init__(self, client: Any, states: Any, cache: Any = None, *, nvml: Any = None, sys_root: str = "/sys",
                 interval: float = 3.0, xpu_dir: str = "",
                 discover: Callable[..., GPUInventory | None] = discover_gpus) -> None:
        self.client = client
        self.states = states
        self.cache = cache
        self.nvml = nvml
        self.sys_root = sys_root
        self.interval = interval
        self.xpu_dir = xpu_dir
        self._discover = discover
        self._inventory: GPUInventory | None = None
        self._discovered = False
        self._problems = TaskProblem(log, "Device report")
        self._xpu_problems = TaskProblem(log, "Device infos")
        self._xpu: list[XPUDeviceInfo] = []
        self._written = False
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

    def xpu_infos(self) -> list[XPUDeviceInfo]:
        """The device infos of ``xpu_dir``, read now; the last good read when a file is unreadable or malformed."""
        if not self.xpu_dir:
            return []
        try:
            self._xpu = read_dir(self.xpu_dir)
        except (OSError, DocumentError) as err:
            self._xpu_problems.problem(f"{err} (the last good read stays in use)")
        else:
            self._xpu_problems.ok()
        return self._xpu

    def run(self, stop: threading.Event) -> None:
        """Report at once, then every ``interval``; returns when there is no NVML and no device infos dir."""
        while not stop.is_set():
            try:
                self.sync_once()
            except Exception:  # the next round may succeed; never end the loop
                log.exception("Device report failed")
            if self._discovered and self._inventory is None and not self.xpu_dir:
                return  # nothing will ever be reported
            stop.wait(self.interval)

    def _wanted(self) -> tuple[list[Obj], Obj, Obj] | None:
        """(devices, labels, annotations) to report; None when there is nothing (and never was)."""
        infos = self.xpu_infos()
        accelerators = [i for i in infos if i.type != TYPE_RDMA]
        rdma = [i for i in infos if i.type == TYPE_RDMA]
        annotations: Obj = {}
        if accelerators:
            devices, labels = xpu_devices(accelerators), xpu_labels(accelerators)
            if partitions := xpu_partitions(accelerators):
                annotations[ANNOTATION_GPU_PARTITIONS] = partitions
        else:
            inventory = self.inventory()
            if inventory is not None and inventory.gpus:
                devices, labels = gpu_devices(inventory), gpu_labels(inventory)
            else:
                devices, labels = [], {}
        devices += xpu_devices(rdma)
        if not devices and not self._written:
            return None
        return devices, labels, annotations

    def sync_once(self) -> bool:
        """Create or update the Device if needed; True when something was written."""
        node = self.states.node()
        wanted = self._wanted()
        if wanted is None or node is None:
            return False
        devices, labels, annotations = wanted
        name = self.states.node_name

        def new() -> Obj:
            fresh = copy.deepcopy(devices)
            _keep_transition_times(fresh, [])
            md: Obj = {"name": name, "labels": labels, "ownerReferences": [owner_reference(node)]}
            if annotations:
                md["annotations"] = annotations
            return {"apiVersion": DEVICE_API_VERSION, "kind": "Device", "metadata": md, "spec": {"devices": fresh}}

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
            kept = {k: v for k, v in (md.get("labels") or {}).items() if k not in _GPU_LABELS}
            md["labels"] = {**kept, **labels}
            notes = {k: v for k, v in (md.get("annotations") or {}).items() if k != ANNOTATION_GPU_PARTITIONS}
            notes.update(annotations)
            if notes or "annotations" in md:
                md["annotations"] = notes
            fresh = copy.deepcopy(devices)
            _keep_transition_times(fresh, (current.get("spec") or {}).get("devices") or [])
            updated.setdefault("spec", {})["devices"] = fresh
            return updated

        written = sync_node_object(self.client, "Device", name, new=new, merge=merge, problems=self._problems,
                                   what="Device", log=log, detail=f" devices={len(devices)}")
        self._written = self._written or written
        return written
