#!/usr/bin/env python3
"""Run the device daemon's discovery once on this host (real /sys, real NVML) and print, as one JSON
object on stdout, the device infos document it would write and a summary of what NVML said.

    PYTHONPATH=. python3 scripts/device_check_nvml.py [--sys-root /sys] [--output FILE]

Needs only the repository on PYTHONPATH and nvidia-ml-py (without it, or without a driver, the
document is an empty list and the summary says why: that is the answer on a host without GPUs, exit
0). The discovery logs go to stderr. ``summary.heavy_modules`` lists any of kubernetes/grpc/urllib3
the discovery pulled in (must be empty: the daemon's discovery path stays light).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from koordinator.devices import discovery, xpu  # noqa: E402  (after the path above)

HEAVY = ("kubernetes", "grpc", "urllib3", "koordinator.runtime", "koordinator_roles")


def summary(infos: list[xpu.XPUDeviceInfo], inventory) -> dict:
    """What a reader checks first: NVML's view (model, memory, NUMA node, links) and counts by kind."""
    kinds: dict[str, int] = {}
    for info in infos:
        key = info.type or info.vendor
        kinds[key] = kinds.get(key, 0) + 1
    out = {"nvml": inventory is not None, "devices": len(infos), "by_kind": kinds}
    if inventory is not None:
        out["driver_version"] = inventory.driver_version
        out["gpus"] = [{"minor": g.minor, "uuid": g.uuid, "model": g.name, "memory_bytes": g.memory_total,
                        "memory_gib": round(g.memory_total / (1 << 30), 1), "numa_node": g.numa_node,
                        "bus_id": g.bus_id, "pcie_id": g.pcie_id,
                        "links": {str(peer): kind for peer, kind in sorted(g.links.items())}}
                       for g in inventory.gpus]
    out["heavy_modules"] = sorted(m for m in sys.modules if m.split(".")[0] in HEAVY or m in HEAVY)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sys-root", default="/sys", help="the host's /sys (default: /sys)")
    parser.add_argument("--output", default="", help="also write the document here (atomically, as the daemon)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(name)s: %(message)s")
    infos, inventory = discovery.scan(args.sys_root)
    if args.output:
        xpu.write_document(args.output, infos)
    print(json.dumps({"document": [i.to_dict() for i in infos], "summary": summary(infos, inventory)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
