#!/usr/bin/env python3
"""Benchmark the koordlet's collection and metric cache; prints one JSON document.

- ``rounds``: a node tree written by the node simulator's writer (cgroup v2, systemd driver, 16
  CPUs, 2 NUMA nodes) with N pods of 2 containers; the metrics advisor collects into a metric cache
  file. Per round: CPU seconds (``time.process_time``) of ``collect_once`` — every collector and
  the cache insert — median and p90 over the steady rounds (the first two are baselines).
- ``hour``: one hour of rounds at 1 s for 100 pods (node, NUMA, pod and container samples with
  explicit timestamps) inserted into a metric cache file, then its size and the process's peak RSS.

Every case runs in a fresh process of its own, so its ``rss_mb`` (peak RSS) is that case's alone,
not the peak of the cases before it.

- ``enforce``: the whole koordlet per 1 s round (advisor, every QoS strategy, resource executor,
  hook reconciler) and ``reaction``, LS usage spike → narrowed BE cpuset; see
  :mod:`bench_koordlet_enforce`.

Targets (issue 7): < 20 ms CPU per 1 s round at 100 pods, RSS < 120 MB, metric cache size bounded.
Targets (issue 17): the whole koordlet ≤ 30 ms CPU per round at 100 pods; reaction ≤ 1.5 s (median).
``ok`` is true when every case with a target met it.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from koordinator.sim.simulator import container_id  # noqa: E402
from koordinator.sim.tree import CgroupStats, CpuTimes, Memory, NodeTree, Topology  # noqa: E402
from koordinator_roles.koordlet.metriccache import MetricCache, Sample  # noqa: E402
from koordinator_roles.koordlet.metriccache import kinds  # noqa: E402
from koordinator_roles.koordlet.metricsadvisor import MetricsAdvisor  # noqa: E402
from koordinator_roles.koordlet.statesinformer.states import pod_meta  # noqa: E402
from koordinator_roles.koordlet.system.cgroup import detect_layout  # noqa: E402
from koordinator_roles.koordlet.system.paths import HostPaths  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_koordlet_enforce import bench_reaction, bench_round  # noqa: E402

GiB = 1 << 30
MiB = 1 << 20


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class States:
    """What the advisor asks of the states informer: the pods (built once, as the informer does)."""

    def __init__(self, pods: list) -> None:
        self._pods = pods

    def pods(self) -> list:
        return self._pods

    def host_applications(self) -> list:
        return []

    def node_metric_spec(self) -> dict:
        return {"metricCollectPolicy": {"nodeMemoryCollectPolicy": "usageWithoutPageCache"}}


def rss_mb() -> float:
    """This process's peak RSS so far (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def in_own_process(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` in a freshly spawned interpreter: ru_maxrss is a process's peak over its whole
    life, so cases sharing one process would each report the largest case run before them."""
    # spawn, not fork: a forked child starts with (and counts) the parent's pages.
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args).result()


def bench_rounds(n_pods: int, rounds: int, workdir: Path) -> dict:
    topo = Topology.for_cpus(16)
    tree = NodeTree(workdir, f"bench-{n_pods}", topo, 64 * GiB)
    tree.create(boot_time=time.time())
    layout = detect_layout(str(tree.cgroup_root))
    pods, dirs = [], []
    for i in range(n_pods):
        uid = f"00000000-0000-0000-0000-{i:012d}"
        statuses = [{"name": f"c{j}", "containerID": container_id(uid, f"c{j}")} for j in range(2)]
        pod = {"metadata": {"uid": uid, "namespace": "bench", "name": f"pod-{i}"},
               "status": {"qosClass": "Burstable", "phase": "Running", "containerStatuses": statuses}}
        meta = pod_meta(pod, layout)
        pods.append(meta)
        dirs.append((meta.cgroup_dir, [d for _, _, d in meta.containers()]))
    cache = MetricCache(str(workdir / f"metrics-{n_pods}.db"))
    clock = Clock(time.time())
    advisor = MetricsAdvisor(HostPaths(str(tree.proc_root), str(tree.sys_root), str(tree.cgroup_root)), layout,
                             cache, States(pods), clock=clock)
    cpu_ns = 0
    times = []
    for r in range(rounds):
        cpu_ns += 250_000_000  # every container uses 250m
        stats = CgroupStats(usage_ns=cpu_ns, user_ns=cpu_ns, nr_periods=r * 10, anon=64 * MiB, file=16 * MiB, leaf=True)
        pod_stats = CgroupStats(usage_ns=2 * cpu_ns, user_ns=2 * cpu_ns, nr_periods=r * 10, anon=128 * MiB,
                                file=32 * MiB)
        for pod_dir, containers in dirs:
            tree.write_cgroup(pod_dir, pod_stats)
            for d in containers:
                tree.write_cgroup(d, stats)
        busy = n_pods * 2 * cpu_ns // 16
        tree.write_proc([CpuTimes(user=busy, idle=r * 10**9)] * 16,
                        Memory(64 * GiB, used=n_pods * 128 * MiB + GiB, cache=GiB),
                        [Memory(32 * GiB, used=n_pods * 64 * MiB, cache=GiB // 2)] * 2)
        clock.now += 1.0
        started = time.process_time()
        advisor.collect_once()
        times.append(time.process_time() - started)
    steady = sorted(times[2:])
    stats = cache.stats()
    cache.close()
    return {"pods": n_pods, "rounds": rounds,
            "cpu_ms_per_round_median": round(statistics.median(steady) * 1000, 2),
            "cpu_ms_per_round_p90": round(steady[int(len(steady) * 0.9) - 1] * 1000, 2),
            "samples_per_round": stats["points"] // max(rounds - 2, 1), "rss_mb": round(rss_mb(), 1)}


def bench_hour(n_pods: int, seconds: int, workdir: Path) -> dict:
    start = time.time() - seconds
    clock = Clock(start)
    cache = MetricCache(str(workdir / "hour.db"), clock=clock)
    pod_labels = [{"pod_uid": f"uid-{i}"} for i in range(n_pods)]
    container_labels = [{"container_id": f"containerd://{i:064x}"} for i in range(2 * n_pods)]
    started = time.process_time()
    for s in range(seconds):
        t = start + s
        batch = [Sample(kinds.NODE_CPU_USAGE, 4.0 + (s % 7) / 10, t), Sample(kinds.NODE_MEMORY_USAGE, 20 * GiB, t)]
        batch += [Sample(kinds.NODE_NUMA_CPU_USAGE, 2.0, t, {"numa_node_id": str(n)}) for n in (0, 1)]
        for labels in pod_labels:
            batch.append(Sample(kinds.POD_CPU_USAGE, 0.5, t, labels))
            batch.append(Sample(kinds.POD_MEMORY_USAGE, 128 * MiB, t, labels))
            batch.append(Sample(kinds.POD_CPU_THROTTLED, 0.0, t, labels))
        for labels in container_labels:
            batch.append(Sample(kinds.CONTAINER_CPU_USAGE, 0.25, t, labels))
            batch.append(Sample(kinds.CONTAINER_MEMORY_USAGE, 64 * MiB, t, labels))
        cache.insert(batch)
        clock.now = t
        if s % 60 == 59:
            cache.gc()
    insert_cpu = time.process_time() - started
    stats = cache.stats()
    query_started = time.process_time()
    cache.query_by(kinds.POD_CPU_USAGE, "pod_uid", clock.now - 300, clock.now)
    node = cache.query(kinds.NODE_CPU_USAGE, clock.now - 1800, clock.now)
    for agg in ("avg", "p50", "p90", "p95", "p99"):
        node.aggregate(agg)
    query_cpu = time.process_time() - query_started
    cache.close()
    return {"pods": n_pods, "seconds": seconds, "points": stats["points"], "series": stats["series"],
            "db_mb": round(stats["bytes"] / MiB, 1), "insert_cpu_ms_per_round": round(insert_cpu / seconds * 1000, 3),
            "report_queries_cpu_ms": round(query_cpu * 1000, 1), "rss_mb": round(rss_mb(), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pods", default="100,500", help="comma separated pod counts for the round benchmark")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--hour-seconds", type=int, default=3600, help="seconds of samples for the cache benchmark")
    parser.add_argument("--reaction-pods", type=int, default=100, help="pods of the spike reaction case (0: skip)")
    args = parser.parse_args()
    out: dict = {"rounds": [], "hour": None, "enforce": [], "reaction": None}
    with tempfile.TemporaryDirectory(prefix="bench-koordlet-") as d:
        for n in (int(x) for x in args.pods.split(",") if x):
            out["rounds"].append(in_own_process(bench_rounds, n, args.rounds, Path(d)))
        if args.hour_seconds:
            out["hour"] = in_own_process(bench_hour, 100, args.hour_seconds, Path(d))
        for n in (int(x) for x in args.pods.split(",") if x):
            out["enforce"].append(in_own_process(bench_round, n, args.rounds, Path(d)))
        if args.reaction_pods:
            out["reaction"] = in_own_process(bench_reaction, args.reaction_pods, Path(d))
    out["ok"] = all(case["ok"] for case in out["enforce"] + [out["reaction"]] if case and "ok" in case)
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
