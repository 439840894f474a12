"""The device infos document: Koordinator's ``XPUDeviceInfo`` JSON array (reference §2.3).

The device daemon writes it (:func:`write_document`: 2-space indented JSON, temp file + rename, mode
0644); the koordlet reads every regular file of its ``--xpu-device-infos-dir`` (:func:`read_dir`) and
concatenates them. One entry::

    {"vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "uuid": "GPU-…", "minor": "0",
     "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi"},
     "topology": {"p2pLinks": [{"peerMinor": "1,2,3", "type": "NVLink"}], "socketID": "-1",
                  "nodeID": "1", "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"},
     "status": {"healthy": true}}

This build adds one optional key, ``"type": "rdma"``, for RDMA devices (absent: an accelerator, which
is all Koordinator's schema describes); Koordinator's koordlet ignores keys it does not know.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from koordinator.atomicfile import write_atomic

#: The koordlet's ``--xpu-device-infos-dir`` and the device daemon's ``--prints-output-file`` defaults.
DEFAULT_DIR = "/var/run/koordlet/xpu-device-infos"
DEFAULT_FILE = DEFAULT_DIR + "/ic-device"
TYPE_RDMA = "rdma"


class DocumentError(ValueError):
    """A device infos document that does not follow the schema; the message names the field and value."""


@dataclass(frozen=True)
class P2PLink:
    """GPUs this one talks to directly: ``peer_minor`` "1,2,3" over ``type`` ("NVLink", "HCCS" …)."""

    peer_minor: str
    type: str


@dataclass(frozen=True)
class Topology:
    """Where a device sits: NUMA node, PCI root and bus id (strings, as in the document)."""

    node_id: str = ""
    pcie_id: str = ""
    bus_id: str = ""
    socket_id: str = "-1"
    p2p_links: tuple[P2PLink, ...] = ()
    must_honor_partition: bool = False


@dataclass(frozen=True)
class Status:
    """A device's health; ``err_code``/``err_message`` say why it is unhealthy."""

    healthy: bool = True
    err_code: str = ""
    err_message: str = ""


@dataclass(frozen=True)
class XPUDeviceInfo:
    """One entry of the document (see the module docstring)."""

    vendor: str
    model: str
    uuid: str
    minor: str
    resources: dict[str, str] = field(default_factory=dict, hash=False)
    topology: Topology | None = None
    status: Status | None = None
    #: "" for an accelerator; TYPE_RDMA for an RDMA device (this build's addition).
    type: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The entry as JSON data (empty optional parts left out, as Go's ``omitempty`` does)."""
        out: dict[str, Any] = {}
        if self.type:
            out["type"] = self.type
        out.update(vendor=self.vendor, model=self.model, uuid=self.uuid, minor=self.minor)
        if self.resources:
            out["resources"] = dict(self.resources)
        if self.topology is not None:
            t = self.topology
            topo: dict[str, Any] = {}
            if t.p2p_links:
                topo["p2pLinks"] = [{"peerMinor": link.peer_minor, "type": link.type} for link in t.p2p_links]
            if t.must_honor_partition:
                topo["mustHonorPartition"] = True
            topo.update(socketID=t.socket_id, nodeID=t.node_id, pcieID=t.pcie_id, busID=t.bus_id)
            out["topology"] = topo
        if self.status is not None:
            s = self.status
            out["status"] = {"healthy": s.healthy, **({"errCode": s.err_code} if s.err_code else {}),
                             **({"errMessage": s.err_message} if s.err_message else {})}
        return out


def to_json(infos: list[XPUDeviceInfo]) -> str:
    """The document's text: a 2-space indented JSON array, newline-terminated."""
    return json.dumps([i.to_dict() for i in infos], indent=2) + "\n"


def _str(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key, "")
    if not isinstance(value, str):
        raise DocumentError(f"{where}.{key}: Invalid value: {json.dumps(value)}: must be a string")
    return value


def parse_entry(entry: Any, where: str) -> XPUDeviceInfo:
    """One entry; ``where`` names it in errors ("FILE[2]")."""
    if not isinstance(entry, dict):
        raise DocumentError(f"{where}: Invalid value: {json.dumps(entry)[:80]}: must be an object")
    minor = _str(entry, "minor", where)
    if minor and not minor.isdigit():
        raise DocumentError(f"{where}.minor: Invalid value: {json.dumps(minor)}: must be a decimal integer")
    resources = entry.get("resources") or {}
    if not isinstance(resources, dict) or not all(isinstance(v, str) for v in resources.values()):
        raise DocumentError(f"{where}.resources: Invalid value: {json.dumps(resources)[:80]}: "
                            "must map names to quantity strings")
    topology = None
    raw_topo = entry.get("topology")
    if raw_topo is not None:
        if not isinstance(raw_topo, dict):
            raise DocumentError(f"{where}.topology: Invalid value: {json.dumps(raw_topo)[:80]}: must be an object")
        links = []
        for n, link in enumerate(raw_topo.get("p2pLinks") or []):
            if not isinstance(link, dict):
                raise DocumentError(f"{where}.topology.p2pLinks[{n}]: Invalid value: {json.dumps(link)[:80]}: "
                                    "must be an object")
            links.append(P2PLink(peer_minor=_str(link, "peerMinor", f"{where}.topology.p2pLinks[{n}]"),
                                 type=_str(link, "type", f"{where}.topology.p2pLinks[{n}]")))
        topology = Topology(node_id=_str(raw_topo, "nodeID", f"{where}.topology"),
                            pcie_id=_str(raw_topo, "pcieID", f"{where}.topology"),
                            bus_id=_str(raw_topo, "busID", f"{where}.topology"),
                            socket_id=_str(raw_topo, "socketID", f"{where}.topology") or "-1",
                            p2p_links=tuple(links), must_honor_partition=bool(raw_topo.get("mustHonorPartition")))
    status = None
    raw_status = entry.get("status")
    if raw_status is not None:
        if not isinstance(raw_status, dict):
            raise DocumentError(f"{where}.status: Invalid value: {json.dumps(raw_status)[:80]}: must be an object")
        status = Status(healthy=bool(raw_status.get("healthy", False)),
                        err_code=_str(raw_status, "errCode", f"{where}.status"),
                        err_message=_str(raw_status, "errMessage", f"{where}.status"))
    return XPUDeviceInfo(vendor=_str(entry, "vendor", where), model=_str(entry, "model", where),
                         uuid=_str(entry, "uuid", where), minor=minor, resources=dict(resources),
                         topology=topology, status=status, type=_str(entry, "type", where))


def parse_document(text: str, source: str) -> list[XPUDeviceInfo]:
    """The entries of a document's text; DocumentError naming ``source`` and the bad field."""
    try:
        data = json.loads(text)
    except ValueError as err:
        raise DocumentError(f"{source}: not JSON: {err}") from None
    if not isinstance(data, list):
        raise DocumentError(f"{source}: Invalid value: {json.dumps(data)[:80]}: must be a JSON array")
    return [parse_entry(entry, f"{source}[{n}]") for n, entry in enumerate(data)]


def read_dir(path: str) -> list[XPUDeviceInfo]:
    """Every regular file of ``path`` (in name order; hidden temp files of a writer skipped), concatenated.

    A missing directory holds no device; an unreadable or malformed file raises DocumentError (or
    OSError) naming it: the caller keeps what it reported before rather than half a list.
    """
    try:
        names = sorted(os.listdir(path))
    except FileNotFoundError:
        return []
    out: list[XPUDeviceInfo] = []
    for name in names:
        full = os.path.join(path, name)
        if name.startswith(".") or not os.path.isfile(full):
            continue
        with open(full, encoding="utf-8") as f:
            out.extend(parse_document(f.read(), full))
    return out


def write_document(path: str, infos: list[XPUDeviceInfo]) -> None:
    """Write the document to ``path`` atomically (a hidden temp file in the same directory, renamed), 0644."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    write_atomic(path, to_json(infos), 0o644)
