#!/usr/bin/env python3
"""Benchmark the shared runtime; prints one JSON document.

Against a ``koordinator apiserver`` process holding N realistic pods (created, bound and given
a running status, as a kubelet would report it):

- ``informer_sync_s``: a fresh process's informer from start to synced (list of N pods, cache, indexes);
- ``cache_rss_mb``: that process's RSS once synced, and the growth the cache caused;
- ``watch_events_per_s``: events handled by an informer with one handler, measured on a backlog: the
  informer process is stopped (SIGSTOP) while pods are updated, then resumed, and the rate is
  taken from its first to its last handled event;
- ``workqueue_ops_per_s``: add + get + done cycles per second on one thread, metrics on.

The informer measurements run in child processes so their memory and CPU are their own.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time

import orjson

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_apiserver import Client as RawClient, create_pods, rss_mb  # noqa: E402

NAMESPACE = "bench"


def running_status(i: int) -> dict:
    """What a kubelet reports for a running pod (conditions, IPs, container state)."""
    t = "2026-11-23T10:00:00Z"
    return {"status": {
        "phase": "Running", "hostIP": f"10.0.{i // 250 % 250}.{i % 250}", "podIP": f"172.16.{i // 250 % 250}.{i % 250}",
        "podIPs": [{"ip": f"172.16.{i // 250 % 250}.{i % 250}"}], "qosClass": "Burstable", "startTime": t,
        "conditions": [{"type": c, "status": "True", "lastTransitionTime": t, "lastProbeTime": None}
                       for c in ("Initialized", "Ready", "ContainersReady", "PodScheduled")],
        "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "started": True,
                               "image": "registry.example.com/team/service:1.4.2",
                               "imageID": "registry.example.com/team/service@sha256:" + "ab" * 32,
                               "containerID": f"containerd://{i:064x}",
                               "state": {"running": {"startedAt": t}}}],
    }}


def merge_patch(client: RawClient, path: str, patch: dict) -> None:
    client.conn.request("PATCH", path, body=orjson.dumps(patch),
                        headers={"Content-Type": "application/merge-patch+json"})
    resp = client.conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"PATCH {path}: {resp.status} {body[:200]!r}")


def in_threads(fn, count: int, threads: int = 8) -> None:
    """Run ``fn(range)`` over ``count`` items split across ``threads``; re-raise the first failure."""
    failures: list[BaseException] = []

    def run(indexes: range) -> None:
        try:
            fn(indexes)
        except BaseException as err:  # noqa: BLE001 - reported by the caller
            failures.append(err)

    workers = [threading.Thread(target=run, args=(range(t, count, threads),)) for t in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if failures:
        raise SystemExit(f"benchmark setup failed: {failures[0]}")


def populate(port: int, count: int, threads: int = 8) -> None:
    c = RawClient(port)
    c.call("POST", "/api/v1/namespaces", orjson.dumps({"metadata": {"name": NAMESPACE}}))
    create_pods(port, NAMESPACE, 0, count, threads)

    def finish(indexes: range) -> None:
        cl = RawClient(port)
        for i in indexes:
            base = f"/api/v1/namespaces/{NAMESPACE}/pods/pod-{i:06d}"
            status, body = cl.call("POST", base + "/binding", orjson.dumps({
                "apiVersion": "v1", "kind": "Binding", "metadata": {"name": f"pod-{i:06d}"},
                "target": {"kind": "Node", "name": f"node-{i % 100}"}}))
            if status != 201:
                raise RuntimeError(f"binding failed: {status} {body[:200]!r}")
            merge_patch(cl, base + "/status", running_status(i))

    in_threads(finish, count, threads)


# -- child processes ---------------------------------------------------------------------------


def child_sync(kubeconfig: str) -> None:
    from koordinator.runtime.client import Client
    from koordinator.runtime.informer import SharedInformer

    client = Client.from_kubeconfig(kubeconfig, qps=0)
    client.request("GET", "/version")
    gc.collect()
    before = rss_mb(os.getpid())
    informer = SharedInformer(client, "Pod", namespace=NAMESPACE)
    started = time.perf_counter()
    informer.start()
    informer.wait_for_sync(300)
    elapsed = time.perf_counter() - started
    gc.collect()
    after = rss_mb(os.getpid())
    print(json.dumps({"sync_s": elapsed, "rss_before_mb": before, "rss_after_mb": after,
                      "objects": len(informer.store)}), flush=True)
    informer.stop(5)


def child_watch(kubeconfig: str, expected: int) -> None:
    from koordinator.runtime.client import Client
    from koordinator.runtime.informer import SharedInformer

    client = Client.from_kubeconfig(kubeconfig, qps=0)
    informer = SharedInformer(client, "Pod", namespace=NAMESPACE)
    times: list[float] = []
    done = threading.Event()

    def on_update(old: dict, new: dict) -> None:
        times.append(time.perf_counter())
        if len(times) >= expected:
            done.set()

    informer.add_handler(on_update=on_update)
    informer.start()
    informer.wait_for_sync(300)
    print("ready", flush=True)
    done.wait(120)
    span = times[-1] - times[0] if len(times) > 1 else 0.0
    print(json.dumps({"events": len(times), "span_s": span}), flush=True)
    informer.stop(5)


# -- phases --------------------------------------------------------------------------------------


def measure_sync(kubeconfig: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--child", "sync", "--kubeconfig", kubeconfig],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def measure_watch(port: int, kubeconfig: str, updates: int) -> dict:
    child = subprocess.Popen([sys.executable, __file__, "--child", "watch", "--kubeconfig", kubeconfig,
                              "--expected", str(updates)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("watch child did not sync")
        child.send_signal(signal.SIGSTOP)

        def touch(indexes: range) -> None:
            cl = RawClient(port)
            for n, i in enumerate(indexes):
                merge_patch(cl, f"/api/v1/namespaces/{NAMESPACE}/pods/pod-{i:06d}",
                            {"metadata": {"labels": {"bench-round": str(n)}}})

        in_threads(touch, updates)
        child.send_signal(signal.SIGCONT)
        result = json.loads(child.stdout.readline())
        child.wait(60)
        return result
    finally:
        if child.poll() is None:
            child.send_signal(signal.SIGCONT)
            child.kill()
            child.wait()


def measure_workqueue(cycles: int) -> float:
    from koordinator.runtime.metrics import RuntimeMetrics
    from koordinator.runtime.workqueue import WorkQueue

    queue = WorkQueue("bench", metrics=RuntimeMetrics())
    keys = [f"ns/pod-{i}" for i in range(1000)]
    started = time.perf_counter()
    for n in range(cycles):
        key = keys[n % 1000]
        queue.add(key)
        item, _ = queue.get()
        queue.done(item)
    elapsed = time.perf_counter() - started
    queue.shut_down()
    return cycles / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pods", type=int, default=10_000)
    parser.add_argument("--updates", type=int, default=5_000, help="backlogged watch events to handle")
    parser.add_argument("--queue-cycles", type=int, default=300_000)
    parser.add_argument("--child", choices=("sync", "watch"), help=argparse.SUPPRESS)
    parser.add_argument("--kubeconfig", help=argparse.SUPPRESS)
    parser.add_argument("--expected", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "sync":
        child_sync(args.kubeconfig)
        return 0
    if args.child == "watch":
        child_watch(args.kubeconfig, args.expected)
        return 0

    data_dir = tempfile.mkdtemp(prefix="bench-runtime-")
    server = subprocess.Popen([sys.executable, "-m", "koordinator", "apiserver", "--data-dir", data_dir,
                               "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline().strip().rsplit(":", 1)[1])
        kubeconfig = os.path.join(data_dir, "kubeconfig")
        t0 = time.perf_counter()
        populate(port, args.pods)
        setup_s = time.perf_counter() - t0
        sync = measure_sync(kubeconfig)
        watch = measure_watch(port, kubeconfig, min(args.updates, args.pods))
        queue = measure_workqueue(args.queue_cycles)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    result = {
        "pods": args.pods,
        "setup_s": round(setup_s, 1),
        "informer_sync_s": round(sync["sync_s"], 3),
        "cached_objects": sync["objects"],
        "cache_rss_mb": round(sync["rss_after_mb"], 1),
        "cache_rss_growth_mb": round(sync["rss_after_mb"] - sync["rss_before_mb"], 1),
        "watch_events_handled": watch["events"],
        "watch_events_per_s": round(watch["events"] / watch["span_s"]) if watch["span_s"] else None,
        "workqueue_ops_per_s": round(queue),
        "targets": {"informer_sync_s": 3.0, "watch_events_per_s": 5000, "workqueue_ops_per_s": 50000,
                    "cache_rss_mb": 150},
    }
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
