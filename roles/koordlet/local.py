"""The koordlet in ``koordinator local``: one per simulated node, over that node's simulated host."""

from __future__ import annotations

import hashlib
import logging
import tempfile
from pathlib import Path
from typing import Any

from koordinator_roles import LocalContext, LocalSetup

log = logging.getLogger("koordinator.koordlet")

# The koordlets' --report-interval. The NodeMetric spec cannot ask for less than 30 s (the koordlet's
# floor protects a big cluster's API server from every node writing its status often); a few
# simulated nodes can afford it, and the demo's batch resources then follow usage within seconds.
REPORT_INTERVAL = "5s"
#: Under ``local``'s data directory: ``RUN_DIR/<node>`` is each koordlet's ``--run-dir``.
RUN_DIRS = "koordlet"


def hook_socket(data_dir: Path, node: str) -> str:
    """The node's hook server socket: under the temp dir, because a data dir's path can be longer than a
    unix socket path may be (107 bytes)."""
    digest = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]
    return str(Path(tempfile.gettempdir()) / f"koordinator-local-{digest}" / f"{node}.sock")


def local_setup(context: LocalContext) -> LocalSetup:
    """The koordlet's part of ``koordinator local`` (the role contract, :mod:`roles`): one instance per
    simulated node over its trees, and, with a manager to create the NodeMetrics, ``up`` only once every
    node has reported one."""
    node_flags = {
        node.name: ["--proc-root", str(node.proc_root), "--sys-root", str(node.sys_root),
                    "--cgroup-root", str(node.cgroup_root), "--run-dir", str(context.data_dir / RUN_DIRS / node.name),
                    "--report-interval", REPORT_INTERVAL,
                    # No runtime proxy in a local cluster: the hook server listens, registered in the data dir.
                    "--runtime-hooks-addr", hook_socket(context.data_dir, node.name),
                    "--runtime-hooks-config-path", str(context.data_dir / RUN_DIRS / node.name / "hookserver.d"),
                    # Gate Accelerators: the node's own device infos, never the host's /var/run (no device
                    # daemon runs locally: the simulator keeps the simulated GPUs' Devices itself).
                    "--xpu-device-infos-dir", str(context.data_dir / RUN_DIRS / node.name / "xpu-device-infos")]
        for node in context.nodes}
    checks = {}
    if "manager" in context.roles and context.nodes:
        names = [node.name for node in context.nodes]
        checks["nodemetrics"] = lambda: node_metrics_missing(context.client, names)
    return LocalSetup(node_flags=node_flags, ready_checks=checks)


def node_metrics_missing(client: Any, nodes: list[str]) -> str | None:
    """Why a pod may not be schedulable yet: ``nodes`` without a first NodeMetric report (while a
    NodeMetric has no updateTime, LoadAwareScheduling filters its node out as expired). None once every
    one has reported."""
    try:
        items = client.list("NodeMetric").get("items") or []
    except Exception as err:  # the API server's death is noticed by local; anything else: look again
        log.debug("listing NodeMetrics failed: %s", err)
        return f"cannot list NodeMetrics: {err}"
    reported = {m["metadata"]["name"] for m in items if (m.get("status") or {}).get("updateTime")}
    missing = [n for n in nodes if n not in reported]
    if missing:
        shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
        return f"no report yet from {shown}"
    return None
