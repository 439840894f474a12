"""Benchmark helpers for the metric cache (used by ``scripts/bench_koordlet.py``).

``bench()`` simulates collector rounds of a node with ``pods`` pods (``containers`` each) at one
round per second with explicit timestamps, runs gc every minute of simulated time as the koordlet
does, and times inserts and a NodeMetric-style report. Returns plain JSON-able figures.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile
import time

from . import kinds
from .model import Sample
from .store import MetricCache

T0 = 1_700_000_000.0


def synthetic_round(pods: int, containers: int, ts: float) -> list[Sample]:
    """One collector round: node, NUMA, system, and per pod/container CPU and memory."""
    phase = ts % 60
    out = [
        Sample(kinds.NODE_CPU_USAGE, 10.0 + phase / 10, ts),
        Sample(kinds.NODE_MEMORY_USAGE, 64e9 + phase * 1e6, ts),
        Sample(kinds.NODE_MEMORY_USAGE_WITH_PAGE_CACHE, 80e9 + phase * 1e6, ts),
        Sample(kinds.SYS_CPU_USAGE, 0.5, ts),
        Sample(kinds.SYS_MEMORY_USAGE, 2e9, ts),
    ]
    for numa in ("0", "1"):
        out.append(Sample(kinds.NODE_NUMA_CPU_USAGE, 5.0 + phase / 20, ts, {"numa_node_id": numa}))
        out.append(Sample(kinds.NODE_NUMA_MEMORY_USAGE, 32e9, ts, {"numa_node_id": numa}))
    for p in range(pods):
        uid = f"00000000-0000-0000-0000-{p:012d}"
        out.append(Sample(kinds.POD_CPU_USAGE, 0.1 + (p % 10) / 100 + phase / 1000, ts, {"pod_uid": uid}))
        out.append(Sample(kinds.POD_MEMORY_USAGE, 2e8 + p * 4096 + phase * 1024, ts, {"pod_uid": uid}))
        for c in range(containers):
            cid = f"containerd://{p * containers + c:064x}"
            out.append(Sample(kinds.CONTAINER_CPU_USAGE, 0.05 + phase / 2000, ts, {"container_id": cid}))
            out.append(Sample(kinds.CONTAINER_MEMORY_USAGE, 1e8 + p * 2048, ts, {"container_id": cid}))
    return out


def report_query(cache: MetricCache, now: float, aggregate_seconds: float = 300,
                 durations: tuple[float, ...] = (300, 600, 1800)) -> dict:
    """What the NodeMetric reporter asks each report: node/system avg over the aggregate window,
    every pod's cpu/memory avg (query_by), node cpu/memory percentiles per duration."""
    start = now - aggregate_seconds
    out: dict = {"node": {}, "pods": {}, "aggregated": []}
    for name, kind in (("cpu", kinds.NODE_CPU_USAGE), ("memory", kinds.NODE_MEMORY_USAGE)):
        out["node"][name] = cache.query(kind, start, now).aggregate("avg")
    for name, kind in (("cpu", kinds.POD_CPU_USAGE), ("memory", kinds.POD_MEMORY_USAGE)):
        for uid, series in cache.query_by(kind, kinds.LABEL_POD_UID, start, now).items():
            out["pods"].setdefault(uid, {})[name] = series.aggregate("avg")
    for d in durations:
        entry = {}
        for name, kind in (("cpu", kinds.NODE_CPU_USAGE), ("memory", kinds.NODE_MEMORY_USAGE)):
            s = cache.query(kind, now - d, now)
            if s.time_range() >= d / 2:
                entry[name] = dict(s.percentiles(["p50", "p90", "p95", "p99"]), avg=s.aggregate("avg"))
        out["aggregated"].append(entry)
    return out


def _rss_mib() -> float:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def bench(pods: int = 100, containers: int = 2, rounds: int = 3600, directory: str | None = None,
          max_bytes: int = 100 << 20, retention_seconds: float = 12 * 3600, gc_every: int = 60) -> dict:
    """Simulate ``rounds`` one-second collector rounds; returns insert CPU (ms per round and per
    point), gc CPU, report wall time, database stats and RSS. ``directory`` None → a temp dir
    (removed afterwards)."""
    own_dir = directory is None
    directory = directory or tempfile.mkdtemp(prefix="koordlet-metriccache-bench-")
    now = [T0]
    cache = MetricCache(os.path.join(directory, "metrics.db"), retention_seconds=retention_seconds,
                        max_bytes=max_bytes, clock=lambda: now[0])
    try:
        insert_cpu = gc_cpu = 0.0
        gc_max = 0.0
        points = 0
        build = 0.0
        for r in range(rounds):
            ts = T0 + r
            now[0] = ts
            b = time.process_time()
            samples = synthetic_round(pods, containers, ts)
            a = time.process_time()
            cache.insert(samples)
            insert_cpu += time.process_time() - a
            build += a - b
            points += len(samples)
            if gc_every and (r + 1) % gc_every == 0:
                a = time.process_time()
                cache.gc()
                dt = time.process_time() - a
                gc_cpu += dt
                gc_max = max(gc_max, dt)
        report_times = []
        for _ in range(5):
            a = time.perf_counter()
            report = report_query(cache, now[0])
            report_times.append(time.perf_counter() - a)
        stats = cache.stats()
        return {
            "pods": pods, "containers_per_pod": containers, "rounds": rounds,
            "points_per_round": points // max(rounds, 1),
            "insert_cpu_ms_per_round": 1000 * insert_cpu / max(rounds, 1),
            "insert_cpu_us_per_point": 1e6 * insert_cpu / max(points, 1),
            "sample_build_cpu_ms_per_round": 1000 * build / max(rounds, 1),
            "gc_cpu_ms_total": 1000 * gc_cpu, "gc_cpu_ms_max": 1000 * gc_max,
            "report_ms_min": 1000 * min(report_times), "report_ms_median": 1000 * sorted(report_times)[2],
            "report_pods": len(report["pods"]),
            "db": stats, "bytes_per_point": stats["used_bytes"] / max(stats["points"], 1),
            "file_bytes": os.path.getsize(cache.path),
            "rss_mib": _rss_mib(),
        }
    finally:
        cache.close()
        if own_dir:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover - manual runs
    import json
    import sys

    args = [int(a) for a in sys.argv[1:]]
    print(json.dumps(bench(*args), indent=2))
