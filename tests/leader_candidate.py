"""A leader-election candidate run as a real process by tests/test_runtime_leaderelection.py.

It is a :class:`~koordinator.runtime.runtime.Runtime` with ``--leader-elect`` and one leader-gated
runnable, so the tests exercise the real gating. While it leads, the runnable increments a counter
kept in a ConfigMap: read it, then PUT it back with the resourceVersion it read, so a write based
on a stale read fails (the fencing condition). Every step goes to ``--log`` as one line:

    <time.time()> <identity> start | write <N> | stop | exit <code>

``write N`` is logged only after the server accepted N. The process exits 1 when it loses the
Lease (as Kubernetes components do) and 0 on SIGTERM, releasing the Lease.

    python -m tests.leader_candidate --kubeconfig K --identity A --namespace NS --lease-name L \
        --lease-duration 3 --renew-deadline 1.5 --retry-period 0.3 --log FILE --counter-configmap CM
"""

from __future__ import annotations

import argparse
import logging
import sys
import threading
import time

from koordinator.runtime.errors import ApiError
from koordinator.runtime.options import RuntimeOptions
from koordinator.runtime.runtime import Runtime

# Every API call of the worker gives up quickly, so stopping it never waits on a dead server.
REQUEST_TIMEOUT = 0.5
WRITE_INTERVAL = 0.1


class EventLog:
    """Append-only, line-buffered log of what this candidate did (read by the test process)."""

    def __init__(self, path: str, identity: str) -> None:
        self._file = open(path, "a", encoding="utf-8")
        self._identity = identity
        self._lock = threading.Lock()

    def write(self, what: str) -> None:
        with self._lock:
            self._file.write(f"{time.time():.6f} {self._identity} {what}\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def counter_worker(runtime: Runtime, events: EventLog, namespace: str, configmap: str):
    """The leader-gated runnable: increment the ConfigMap counter until told to stop."""

    def run(stop: threading.Event) -> None:
        events.write("start")
        try:
            while not stop.is_set():
                try:
                    cm = runtime.client.get("ConfigMap", configmap, namespace, timeout=REQUEST_TIMEOUT)
                    if stop.is_set():
                        break
                    value = int((cm.get("data") or {}).get("counter", "0")) + 1
                    cm.setdefault("data", {})["counter"] = str(value)
                    runtime.client.update(cm, timeout=REQUEST_TIMEOUT)
                    events.write(f"write {value}")
                except ApiError as err:  # Conflict (fenced off), timeouts during a partition
                    logging.getLogger("leader_candidate").debug("counter write failed: %s", err)
                stop.wait(WRITE_INTERVAL)
        finally:
            events.write("stop")

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--identity", required=True)
    parser.add_argument("--namespace", required=True)
    parser.add_argument("--lease-name", required=True)
    parser.add_argument("--lease-duration", type=float, default=3.0)
    parser.add_argument("--renew-deadline", type=float, default=1.5)
    parser.add_argument("--retry-period", type=float, default=0.3)
    parser.add_argument("--log", required=True)
    parser.add_argument("--counter-configmap", required=True)
    args = parser.parse_args(argv)

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format=f"%(asctime)s {args.identity} %(name)s %(levelname)s %(message)s")
    options = RuntimeOptions.defaults(
        "manager", kubeconfig=args.kubeconfig, metrics_addr="0", health_addr="0", leader_elect=True,
        leader_elect_namespace=args.namespace, leader_elect_name=args.lease_name,
        leader_elect_identity=args.identity, leader_elect_lease_duration=args.lease_duration,
        leader_elect_renew_deadline=args.renew_deadline, leader_elect_retry_period=args.retry_period,
        graceful_shutdown_timeout=10.0)
    events = EventLog(args.log, args.identity)
    runtime = Runtime(options)
    runtime.add_runnable("counter", counter_worker(runtime, events, args.namespace, args.counter_configmap),
                         leader_gated=True)
    code = runtime.run()
    events.write(f"exit {code}")
    events.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
