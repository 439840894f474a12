#!/usr/bin/env python3
"""Benchmark koord-descheduler (a LowNodeLoad round, MigrationController throughput); prints one JSON document.

Shape: ``{"lownodeload_round": {...}, "migration_throughput": {...}, "ok": ...}``; ``--part round|migration|all``
picks the parts (default all), and the top-level ``ok`` (and the exit status) is true only when every part
run is ok.

**lownodeload_round.** The cluster is built in memory and fed to the plugin through its real code paths: Nodes, Pods and
NodeMetrics sit in real informer caches (an InformerFactory whose stores are filled directly, nothing
started), pods are found through the Pod informer's ``spec.nodeName`` index as the role wires
``PluginHandle.pod_index``, and evictions go to a recording Evictor (the plugin API's boundary) that
counts them — each would be one PodMigrationJob with MigrationController.

Default shape: 5,000 nodes of 32 cpu / 128Gi / 110 pods and 50,000 pods (10 per node). A fifth of the
nodes are hot (pods using ~81% cpu), half are cold (~19%), the rest in between; thresholds low
cpu 45 / memory 55, high cpu 75 / memory 80; ``anomalyCondition.consecutiveAbnormalities: 1`` so the
single measured round acts. Pods alternate between koord-prod and koord-batch, with ReplicaSet owners.

Reported: ``cpu_seconds`` (process CPU time of ``LowNodeLoad.balance``), ``wall_seconds``,
``migrations`` (evict calls accepted), ``ok`` (cpu_seconds ≤ target and at least one migration).

**migration_throughput** (``bench_descheduler_migration``): ``--jobs`` PodMigrationJobs (default 200) through the
embedded API server, executed by a real ``koordinator --role=descheduler`` process (MigrationController with its
limits opened up), in ``--mode`` EvictDirectly, ReservationFirst (with a real ``--role=scheduler`` process
placing the Reservations and this script playing the ReplicaSet controller and the kubelet) or both (default),
each mode in a fresh cluster. Reported per mode: wall seconds from the first create until every job is terminal,
``jobs_per_second``, ``succeeded``/``failed`` (with reasons), and the CPU seconds of the descheduler (and API
server, scheduler) process over that span; ``ok`` when every job Succeeded the mode's way. No target is set for
this part: the figures are reported. See that module's docstring for the cluster and configuration.
"""

from __future__ import annotations

import argparse
import gc
import json
import signal
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "scripts"))  # bench_descheduler_migration, also when imported from elsewhere

from koordinator.runtime.client import Client  # noqa: E402
from koordinator.runtime.informer import InformerFactory  # noqa: E402
from koordinator.runtime.kubeconfig import ClusterConfig  # noqa: E402
from koordinator_roles.descheduler.framework.handle import PluginHandle  # noqa: E402
from koordinator_roles.descheduler.plugins.lownodeload import new  # noqa: E402

TARGET_CPU_SECONDS = 2.0
NS = "bench"
ARGS = {"lowThresholds": {"cpu": 45, "memory": 55}, "highThresholds": {"cpu": 75, "memory": 80},
        "anomalyCondition": {"consecutiveAbnormalities": 1}}
#: Per-pod usage (milli-cpu, GiB) by node temperature: 10 pods use ~81%, ~50% and ~19% of 32 cores.
USAGE = {"hot": (2600, 9), "warm": (1600, 6), "cold": (600, 3)}


class CountingEvictor:
    """Accepts every eviction of a non-DaemonSet pod and counts them."""

    def __init__(self) -> None:
        self.evictions = 0

    def filter(self, pod: dict) -> bool:
        return not any(o.get("kind") == "DaemonSet" for o in pod["metadata"].get("ownerReferences") or ())

    def pre_eviction_filter(self, pod: dict) -> bool:
        return True

    def evict(self, pod: dict, options) -> bool:
        self.evictions += 1
        return True

    def node_limit_exceeded(self, node_name: str) -> bool:
        return False

    def namespace_limit_exceeded(self, namespace: str) -> bool:
        return False


def temperature(i: int) -> str:
    k = i % 10
    return "hot" if k < 2 else "cold" if k < 7 else "warm"


def build(nodes: int, pods: int) -> tuple[list[dict], list[dict], list[dict]]:
    """Nodes, pods (spread evenly, round-robin) and one fresh NodeMetric per node."""
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    node_objs, pod_objs = [], []
    per_node: list[list[dict]] = [[] for _ in range(nodes)]
    for i in range(nodes):
        name = f"node-{i:05d}"
        node_objs.append({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                          "spec": {}, "status": {"allocatable": alloc, "capacity": alloc,
                                                 "conditions": [{"type": "Ready", "status": "True"}]}})
    for j in range(pods):
        i = j % nodes
        priority = "koord-prod" if j % 2 else "koord-batch"
        request = {"cpu": "2", "memory": "4Gi"}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"pod-{j:06d}", "namespace": NS, "uid": f"uid-{j}",
                            "labels": {"app": f"app-{j % 100}", "koordinator.sh/priority-class": priority},
                            "creationTimestamp": now,
                            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                                 "name": f"rs-{j % 100}", "uid": f"rs-{j % 100}"}]},
               "spec": {"nodeName": node_objs[i]["metadata"]["name"], "priority": 9000 if j % 2 else 5000,
                        "containers": [{"name": "c", "image": "pause",
                                        "resources": {"requests": request, "limits": request}}]},
               "status": {"phase": "Running", "qosClass": "Guaranteed"}}
        pod_objs.append(pod)
        per_node[i].append(pod)
    metrics = []
    for i, node in enumerate(node_objs):
        cpu, mem = USAGE[temperature(i)]
        metrics.append({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
                        "metadata": {"name": node["metadata"]["name"]},
                        "status": {"updateTime": now,
                                   "nodeMetric": {"nodeUsage": {"resources": {}},
                                                  "systemUsage": {"resources": {"cpu": "0", "memory": "0"}}},
                                   "podsMetric": [{"namespace": NS, "name": p["metadata"]["name"],
                                                   "podUsage": {"resources": {"cpu": f"{cpu}m",
                                                                              "memory": f"{mem}Gi"}}}
                                                  for p in per_node[i]]}})
    return node_objs, pod_objs, metrics


def bench(nodes: int = 5000, pods: int = 50000) -> dict:
    """One measured round; returns the JSON document."""
    node_objs, pod_objs, metrics = build(nodes, pods)
    factory = InformerFactory(Client(ClusterConfig(host="http://127.0.0.1:1")))  # caches only: never started
    factory.informer("Node").replace(node_objs, "1")
    pod_store = factory.informer("Pod")
    pod_store.replace(pod_objs, "1")
    factory.informer("NodeMetric").replace(metrics, "1")
    evictor = CountingEvictor()
    handle = PluginHandle(informers=factory, evictor=evictor,
                          pod_index=lambda n: pod_store.store.by_index("spec.nodeName", n))
    plugin = new(ARGS, handle)
    ready = factory.informer("Node").store.list()
    gc.collect()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    plugin.balance(ready)
    cpu = time.process_time() - cpu0
    wall = time.perf_counter() - wall0
    hot = sum(1 for i in range(nodes) if temperature(i) == "hot")
    return {"benchmark": "descheduler-lownodeload-round", "nodes": nodes, "pods": pods, "hot_nodes": hot,
            "cpu_seconds": round(cpu, 3), "wall_seconds": round(wall, 3), "migrations": evictor.evictions,
            "target_cpu_seconds": TARGET_CPU_SECONDS,
            "ok": cpu <= TARGET_CPU_SECONDS and evictor.evictions > 0}


def _interrupt(signum: int, frame) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    from bench_descheduler_migration import MODES, bench_migration

    # Ctrl-C and SIGTERM unwind through the ``finally`` blocks that stop the child processes (SIGINT too where
    # a non-interactive shell started this script with it ignored).
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])
    parser.add_argument("--part", choices=("round", "migration", "all"), default="all",
                        help="which measurement to run (default all)")
    parser.add_argument("--nodes", type=int, default=5000, help="round: number of nodes (default 5000)")
    parser.add_argument("--pods", type=int, default=50000, help="round: number of pods, spread evenly (default 50000)")
    parser.add_argument("--jobs", type=int, default=200, help="migration: PodMigrationJobs per mode (default 200)")
    parser.add_argument("--mode", choices=(*MODES, "both"), default="both",
                        help="migration: the jobs' mode (default both, each in a fresh cluster)")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="migration: seconds to wait for the jobs of one mode (default 300)")
    opts = parser.parse_args(argv)
    if opts.nodes < 2 or opts.pods < 0:
        parser.error("--nodes must be at least 2 and --pods not negative")
    if opts.jobs < 1:
        parser.error(f"--jobs: Invalid value: {opts.jobs}: must be at least 1")
    if opts.timeout <= 0:
        parser.error(f"--timeout: Invalid value: {opts.timeout:g}: must be greater than 0")
    result: dict = {}
    if opts.part in ("round", "all"):
        result["lownodeload_round"] = bench(opts.nodes, opts.pods)
    if opts.part in ("migration", "all"):
        modes = MODES if opts.mode == "both" else (opts.mode,)
        result["migration_throughput"] = bench_migration(opts.jobs, modes, opts.timeout)
    result["ok"] = all(part["ok"] for part in result.values())
    print(json.dumps(result, indent=2))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
