"""``koordinator simulate-nodes``: run a :class:`~koordinator.sim.simulator.NodeSimulator` until SIGTERM/SIGINT.

Prints ``koordinator simulate-nodes: ready: <nodes>`` once every node's tree exists (``koordinator
local`` waits for that line before it starts the koordlets). Imports nothing heavy until it runs,
because the top-level parser is built for every ``koordinator`` subcommand.
"""

from __future__ import annotations

import argparse
import logging
import re
import signal
import sys
import threading
from typing import Any

from koordinator.runtime.options import format_duration, parse_duration

log = logging.getLogger("koordinator.sim.command")

PROG = "koordinator simulate-nodes"
_NODE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def node_names(value: str) -> list[str]:
    """``a,b,c`` -> ``["a", "b", "c"]``: each a valid Node name, none twice."""
    names = [n.strip() for n in value.split(",")]
    if not value.strip() or any(not n for n in names):
        raise argparse.ArgumentTypeError(f"invalid node list {value!r}: want names separated by commas")
    for n in names:
        if len(n) > 253 or not _NODE_NAME.match(n):
            raise argparse.ArgumentTypeError(f"invalid node name {n!r} in {value!r}: must be a lowercase DNS "
                                             "subdomain (a-z, 0-9, '-', '.')")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise argparse.ArgumentTypeError(f"invalid node list {value!r}: {', '.join(twice)} named twice")
    return names


def tick_interval(value: str) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"invalid tick {value!r}: must be positive")
    return seconds


def gpu_count(value: str) -> int:
    """``--gpus-per-node``: 0-16 (each simulated GPU needs a PCI bus number of its own)."""
    from koordinator.sim.gpus import MAX_GPUS

    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid GPU count {value!r}: not an integer") from None
    if not 0 <= n <= MAX_GPUS:
        raise argparse.ArgumentTypeError(f"invalid GPU count {n}: must be 0-{MAX_GPUS}")
    return n


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add ``simulate-nodes`` to the ``koordinator`` parser."""
    p = sub.add_parser(
        "simulate-nodes",
        help="simulate nodes: fake /proc, /sys and cgroup trees and a kubelet for their pods",
        description="Simulate nodes for koordlets: keep ROOT/<node>/{proc,sys,cgroup} in the kernel's formats, "
                    "mark pods bound to the nodes Running and account their usage (annotations "
                    "sim.koordinator.sh/cpu, /memory, /page-cache, /duration; node annotation "
                    "sim.koordinator.sh/system-usage). See koordinator/sim/__init__.py.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--kubeconfig", default=None, metavar="PATH",
                   help="the cluster (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)")
    p.add_argument("--root", required=True, metavar="DIR", help="directory holding one tree per node")
    p.add_argument("--nodes", required=True, type=node_names, metavar="A,B,C", help="names of the nodes to simulate")
    p.add_argument("--cgroup-version", type=int, choices=(1, 2), default=2, help="cgroup hierarchy to write")
    p.add_argument("--cgroup-driver", choices=("systemd", "cgroupfs"), default="systemd",
                   help="how the kubelet names cgroup directories")
    p.add_argument("--tick", type=tick_interval, default="1s", metavar="DURATION",
                   help="how often counters advance and files are rewritten (1s, 500ms, or seconds)")
    p.add_argument("--gpus-per-node", type=gpu_count, default=0, metavar="N",
                   help="simulated NVIDIA GPUs per node (sysfs, /proc/driver/nvidia, the Device object, GPU labels, "
                        "nvidia.com/gpu); the Node annotation sim.koordinator.sh/gpus overrides it per node")
    p.add_argument("--hook-server-config-dir", default=None, metavar="DIR",
                   help="where each node's runtime hook servers register (koord-runtime-proxy's "
                        "--hook-server-config-dir; {node} stands for the node name): the simulated runtime calls "
                        "their PreRunPodSandbox and PreCreateContainer hooks before it starts a pod")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    return p


def run(args: argparse.Namespace) -> int:
    """Entry point of ``koordinator simulate-nodes``."""
    from koordinator.runtime.client import Client, ConfigError
    from koordinator.runtime.informer import InformerFactory
    from koordinator.sim.simulator import NodeSimulator
    from koordinator.sim.tree import TreeError

    stop = threading.Event()
    handlers: dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, lambda *_: stop.set())
    try:
        try:
            client = Client.from_kubeconfig(args.kubeconfig, qps=50, burst=100, user_agent="koordinator/simulate-nodes")
        except ConfigError as err:
            sys.stderr.write(f"{PROG}: error: {err}\n")
            return 1
        informers = InformerFactory(client)
        try:
            sim = NodeSimulator(client, informers, args.root, args.nodes, cgroup_version=args.cgroup_version,
                                cgroup_driver=args.cgroup_driver, interval=args.tick,
                                gpus_per_node=args.gpus_per_node, hook_config_dir=args.hook_server_config_dir)
            sim.start()
        except (TreeError, ValueError, OSError) as err:
            sys.stderr.write(f"{PROG}: error: {err}\n")
            client.close()
            return 1
        try:
            informers.start()
            print(f"{PROG}: simulating {len(args.nodes)} node(s) under {args.root} (cgroup v{args.cgroup_version}, "
                  f"{args.cgroup_driver} driver, tick {format_duration(args.tick)})", flush=True)
            while not stop.wait(0.05):
                if sim.has_synced():
                    print(f"{PROG}: ready: {', '.join(args.nodes)}", flush=True)
                    break
            stop.wait()
            log.info("stopping")
        finally:
            sim.stop(10.0)
            informers.stop(5.0)
            client.close()
        return 0
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
