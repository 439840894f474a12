#!/usr/bin/env python3
"""Benchmark the embedded API server; prints one JSON document.

The server runs as its own process (``koordinator apiserver``), as in production; the client
side is a lean raw-JSON HTTP/1.1 client with keep-alive so it is not the bottleneck.

Phases: 20 watchers on all pods start first; then pods are created with 1 client thread and
with 8 client threads (so every create is fanned out to 20 watchers while it is measured);
then GET latency, LIST of every pod, LIST with a label selector, and the server's RSS.
"""

from __future__ import annotations

import argparse
import http.client
import json
import selectors
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import orjson


def pod(namespace: str, i: int) -> bytes:
    """A realistic Deployment-made pod (about 1.5 KB as sent, more once defaulted)."""
    app = f"app-{i % 10}"
    return orjson.dumps({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"pod-{i:06d}", "namespace": namespace,
            "labels": {"app": app, "pod-template-hash": "7d9f8b6c5", "tier": "backend"},
            "annotations": {"koordinator.sh/qosClass": "LS", "prometheus.io/scrape": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"{app}-7d9f8b6c5",
                                 "uid": "6a1c2d1e-9a57-4c4b-8f0f-0d6b1d2f7a10", "controller": True,
                                 "blockOwnerDeletion": True}],
        },
        "spec": {
            "containers": [{
                "name": "main", "image": "registry.example.com/team/service:1.4.2",
                "args": ["--port=8080", "--log-level=info"],
                "ports": [{"containerPort": 8080, "name": "http"}],
                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "MODE", "value": "production"}],
                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"},
                              "limits": {"cpu": "1", "memory": "1Gi"}},
                "volumeMounts": [{"name": "config", "mountPath": "/etc/service"}],
                "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}, "periodSeconds": 5},
            }],
            "volumes": [{"name": "config", "configMap": {"name": "service-config"}}],
            "schedulerName": "koord-scheduler",
        },
    })


class Client:
    """Keep-alive raw HTTP client."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def call(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        self.conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        return resp.status, resp.read()


def create_pods(port: int, namespace: str, start: int, count: int, threads: int) -> float:
    """Create ``count`` pods with ``threads`` clients; returns creates per second."""
    per = [list(range(start + t, start + count, threads)) for t in range(threads)]
    failures: list[str] = []

    def work(indexes: list[int]) -> None:
        c = Client(port)
        for i in indexes:
            status, body = c.call("POST", f"/api/v1/namespaces/{namespace}/pods", pod(namespace, i))
            if status != 201:
                failures.append(f"{status} {body[:200]!r}")
                return

    workers = [threading.Thread(target=work, args=(idx,)) for idx in per]
    t0 = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    elapsed = time.perf_counter() - t0
    if failures:
        raise SystemExit(f"create failed: {failures[0]}")
    return count / elapsed


class Watchers:
    """N raw watch streams served by one selector thread that counts the events they carry."""

    def __init__(self, port: int, n: int, rv: str) -> None:
        self.sel = selectors.DefaultSelector()
        self.counts = [0] * n
        self.last_event_at = [0.0] * n
        self.socks = []
        for i in range(n):
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(f"GET /api/v1/pods?watch=true&resourceVersion={rv}&timeoutSeconds=3600 HTTP/1.1\r\n"
                      f"Host: 127.0.0.1\r\nAccept: application/json\r\n\r\n".encode())
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ, i)
            self.socks.append(s)
        self.stop = False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop:
            for key, _ in self.sel.select(0.2):
                try:
                    data = key.fileobj.recv(1 << 20)
                except BlockingIOError:
                    continue
                if not data:
                    self.sel.unregister(key.fileobj)
                    continue
                # Each event is one JSON line; '"type":"' occurs once per event line.
                n = data.count(b'{"type":"')
                if n:
                    self.counts[key.data] += n
                    self.last_event_at[key.data] = time.perf_counter()

    def wait_for(self, total: int, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if min(self.counts) >= total:
                return True
            time.sleep(0.01)
        return False

    def close(self) -> None:
        self.stop = True
        self.thread.join()
        for s in self.socks:
            s.close()


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--single", type=int, default=2000, help="pods created with 1 thread")
    parser.add_argument("--parallel", type=int, default=8000, help="pods created with 8 threads")
    parser.add_argument("--watchers", type=int, default=20)
    parser.add_argument("--gets", type=int, default=3000)
    args = parser.parse_args()
    total = args.single + args.parallel

    data_dir = tempfile.mkdtemp(prefix="bench-apiserver-")
    proc = subprocess.Popen([sys.executable, "-m", "koordinator", "apiserver", "--data-dir", data_dir, "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        port = int(line.strip().rsplit(":", 1)[1])
        c = Client(port)
        for ns in ("bench-a", "bench-b"):
            c.call("POST", "/api/v1/namespaces", orjson.dumps({"metadata": {"name": ns}}))
        status, body = c.call("GET", "/api/v1/pods?limit=1")
        rv = orjson.loads(body)["metadata"]["resourceVersion"]
        watchers = Watchers(port, args.watchers, rv)
        time.sleep(0.5)

        single = create_pods(port, "bench-a", 0, args.single, 1)
        t_parallel = time.perf_counter()
        parallel = create_pods(port, "bench-b", 0, args.parallel, 8)
        writes_done = time.perf_counter()
        kept_up = watchers.wait_for(total, 120)
        lag = max(watchers.last_event_at) - writes_done if kept_up else None
        fanout_events_per_s = args.watchers * total / (max(watchers.last_event_at) - t_parallel
                                                          + args.single / single) if kept_up else None
        watchers.close()

        names = [f"/api/v1/namespaces/bench-b/pods/pod-{i:06d}" for i in range(0, args.parallel, 7)]
        lat = []
        for i in range(args.gets):
            t = time.perf_counter()
            st, _ = c.call("GET", names[i % len(names)])
            lat.append((time.perf_counter() - t) * 1000)
            assert st == 200
        lat.sort()

        def timed_list(path: str) -> tuple[float, float, int]:
            best, best_decode, n = 1e9, 0.0, 0
            for _ in range(3):
                t = time.perf_counter()
                st, body = c.call("GET", path)
                received = time.perf_counter() - t
                items = json.loads(body)["items"]
                decoded = time.perf_counter() - t
                if received < best:
                    best, best_decode, n = received, decoded, len(items)
            return best, best_decode, n

        list_s, list_decode_s, list_n = timed_list("/api/v1/pods")
        sel_s, _, sel_n = timed_list("/api/v1/pods?labelSelector=app%3Dapp-3,tier%20in%20(backend)")
        result = {
            "pods": total,
            "watchers": args.watchers,
            "creates_per_s_1_thread": round(single, 1),
            "creates_per_s_8_threads": round(parallel, 1),
            "get_p50_ms": round(statistics.median(lat), 3),
            "get_p99_ms": round(lat[int(len(lat) * 0.99) - 1], 3),
            "list_all_s": round(list_s, 3),
            "list_all_with_json_decode_s": round(list_decode_s, 3),
            "list_all_items": list_n,
            "list_label_selector_s": round(sel_s, 3),
            "list_label_selector_items": sel_n,
            "watchers_received_every_event": kept_up,
            "watch_lag_after_last_write_s": round(lag, 3) if lag is not None else None,
            "watch_events_delivered_per_s": round(fanout_events_per_s) if fanout_events_per_s else None,
            "server_rss_mb": round(rss_mb(proc.pid), 1),
        }
        print(json.dumps(result, indent=2))
    finally:
        proc.terminate()
        proc.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
