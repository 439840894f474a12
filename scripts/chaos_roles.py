"""Chaos cases for the roles (issue 23): what the manager, the koordlet and the scheduler guarantee when
something dies under them. ``scripts/chaos.py`` runs them; each is ``CASES[name](quick=...)`` → figures + ``ok``.

Every case starts what it needs on 127.0.0.1 (``koordinator apiserver`` with the CRDs, free ports, a temporary
directory) and stops all of it on every way out. Processes that die are killed with SIGKILL (``kill -9``).

``manager-leader-kill9``
    Two ``koordinator --role=manager --leader-elect`` processes (lease 2 s, renew deadline 1 s, retry 200 ms),
    each talking to the server through an :class:`~tests.http_tap.HttpTap` that records every request it
    makes and the answer's status — the objects carry no writer identity, the taps do. Nodes exist and a
    thread rewrites ``slo-controller-config`` every 200 ms, so the leader keeps updating NodeSLOs. The
    leader is killed with SIGKILL while it writes. Figures: ``takeover_s`` (the kill → the other's first
    acknowledged Lease write, which only acquisition makes: a standby only reads the Lease) against
    ``bound_s`` = lease duration + 2 × retry period + 0.5 s (the standby sees the last renewal up to one
    retry late and acquires on its next retry tick; 0.5 s for the round-trips on a busy machine);
    ``standby_writes`` (acknowledged writes other than the Lease and Events by the standby before it
    acquired: must be 0); ``objects_written_by_both`` (objects the two processes wrote while both lived:
    an object the old leader wrote after the new one's first write to it, or the standby wrote before it
    led: must be 0). ``objects_handed_over`` counts objects the old leader wrote and the new one wrote after
    it — one writer after the other, which is what a hand-over is.

``koordlet-apiserver-outage``
    See :func:`koordlet_apiserver_outage`.

``scheduler-kill-mid-gang``
    See :func:`scheduler_kill_mid_gang`.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from koordinator.runtime.client import Client  # noqa: E402
from koordinator.runtime.errors import NotFound  # noqa: E402
from tests.apiserver_process import ApiServerProcess  # noqa: E402
from tests.http_tap import HttpTap, Request  # noqa: E402
from tests.manager_harness import SYSTEM_NAMESPACE, manager_process  # noqa: E402

CRD_DIR = ROOT / "manifests" / "crds"
LEASE_S, RENEW_S, RETRY_S = 2.0, 1.0, 0.2


# -- shared helpers ------------------------------------------------------------------------------------------

def wait_for(pred: Callable[[], Any], timeout: float, what: str, interval: float = 0.02) -> Any:
    """``pred()``'s first truthy value; TimeoutError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = pred()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


@contextlib.contextmanager
def workdir(prefix: str) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def start_server(base: Path) -> ApiServerProcess:
    return ApiServerProcess(base / "api").start("--crd-dir", str(CRD_DIR))


def kubeconfig_via(server: ApiServerProcess, url: str, path: Path) -> Path:
    """A copy of the server's kubeconfig pointing at ``url`` (a tap in front of the server)."""
    path.write_text(server.kubeconfig.read_text().replace(server.url, url))
    return path


def stop_process(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def get_or_none(client: Client, kind: str, name: str, namespace: str | None = None) -> dict | None:
    try:
        return client.get(kind, name, namespace)
    except NotFound:
        return None


def tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


# -- manager-leader-kill9 ------------------------------------------------------------------------------------

def _node(name: str) -> dict:
    alloc = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": alloc, "allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}}


def _slo_config(percent: int) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": SYSTEM_NAMESPACE},
            "data": {"resource-threshold-config": json.dumps({"clusterStrategy": {
                "enable": True, "cpuSuppressThresholdPercent": percent, "cpuSuppressPolicy": "cpuset"}})}}


def _gated(req: Request) -> bool:
    """A write only a leader may make: anything but its Lease and Events (every replica may record events)."""
    return req.ok_write and not _is_lease(req) and "/events" not in req.path


def _is_lease(req: Request) -> bool:
    return "/leases/" in req.path or req.path.split("?", 1)[0].endswith("/leases")


def _object(req: Request) -> str:
    return req.object


class _ConfigChurn:
    """Rewrites slo-controller-config every ``period`` seconds (a new threshold each time) until stopped."""

    def __init__(self, client: Client, period: float = 0.2) -> None:
        self.client, self.period = client, period
        self.writes = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="config-churn", daemon=True)

    def start(self) -> "_ConfigChurn":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        percent = 50
        while not self._stop.wait(self.period):
            percent = 50 + (percent - 49) % 30
            try:
                cm = self.client.get("ConfigMap", "slo-controller-config", SYSTEM_NAMESPACE)
                cm["data"] = _slo_config(percent)["data"]
                self.client.update(cm)
                self.writes += 1
            except Exception as e:  # a failed write is a figure, not a crash of the case
                self.errors.append(repr(e))


def manager_leader_kill9(quick: bool = False) -> dict:
    """Kill -9 the leading manager while it writes; see the module docstring for the figures."""
    nodes = 3 if quick else 10
    load_s = 1.0 if quick else 3.0
    ids = ("manager-a", "manager-b")
    figures: dict[str, Any] = {"nodes": nodes, "lease_duration_s": LEASE_S, "retry_period_s": RETRY_S,
                               "bound_s": round(LEASE_S + 2 * RETRY_S + 0.5, 3)}
    with workdir("chaos-manager-") as base:
        server = start_server(base)
        client = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
        taps = {i: HttpTap(server.port).start() for i in ids}
        procs: dict[str, subprocess.Popen] = {}
        churn: _ConfigChurn | None = None
        try:
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}})
            client.create(_slo_config(50))
            for n in range(nodes):
                client.create(_node(f"chaos-node-{n}"))
            flags = ["--leader-elect", f"--leader-elect-lease-duration={LEASE_S}s",
                     f"--leader-elect-renew-deadline={RENEW_S}s",
                     f"--leader-elect-retry-period={int(RETRY_S * 1000)}ms",
                     "--webhook-port=0", "--webhook-host=127.0.0.1", "--log-level=info"]
            for i in ids:
                procs[i] = manager_process(kubeconfig_via(server, taps[i].url, base / f"{i}.kubeconfig"),
                                           base / f"{i}.log", *flags, f"--leader-elect-identity={i}",
                                           f"--webhook-cert-dir={base / i / 'certs'}")

            def holder() -> str | None:
                lease = get_or_none(client, "Lease", "koordinator-manager", SYSTEM_NAMESPACE)
                return ((lease or {}).get("spec") or {}).get("holderIdentity") or None

            leader = wait_for(holder, 60, "a manager to take the Lease")
            other = next(i for i in ids if i != leader)
            wait_for(lambda: all(get_or_none(client, "NodeSLO", f"chaos-node-{n}") for n in range(nodes)), 60,
                     "the leader's NodeSLOs")
            churn = _ConfigChurn(client).start()
            time.sleep(load_s)  # write load for a while: the leader updates NodeSLOs as the config changes
            before = sum(1 for r in taps[leader].requests if _gated(r))
            wait_for(lambda: sum(1 for r in taps[leader].requests if _gated(r)) > before, 20,
                     "the leader writing under load")
            killed_at = time.time()
            procs[leader].send_signal(signal.SIGKILL)
            procs[leader].wait(10)

            def acquired() -> float | None:
                return next((r.sent for r in taps[other].requests
                             if r.ok_write and _is_lease(r) and r.sent >= killed_at), None)

            acquired_at = wait_for(acquired, 30, f"{other} to take the Lease")
            figures["takeover_s"] = round(acquired_at - killed_at, 3)
            # The new leader's controllers run: a Node created now gets its NodeSLO.
            client.create(_node("chaos-node-late"))
            wait_for(lambda: get_or_none(client, "NodeSLO", "chaos-node-late"), 30, "the new leader's NodeSLO")
            time.sleep(load_s)
            churn.stop()
            figures["config_writes"] = churn.writes
            figures["config_write_errors"] = churn.errors[:3]
            stop_process(procs[other])
            figures.update(_ownership(taps[leader].requests, taps[other].requests, killed_at, acquired_at))
            figures["ok"] = (figures["takeover_s"] <= figures["bound_s"] and figures["standby_writes"] == 0
                             and figures["objects_written_by_both"] == 0 and figures["old_leader_writes"] > 0
                             and figures["new_leader_writes"] > 0)
        except Exception as e:
            figures.update(ok=False, error=repr(e), logs={i: tail(base / f"{i}.log") for i in ids})
        finally:
            if churn is not None:
                churn.stop()
            for p in procs.values():
                stop_process(p)
            for t in taps.values():
                t.stop()
            client.close()
            server.stop()
    return figures


def _ownership(old: list[Request], new: list[Request], killed_at: float, acquired_at: float) -> dict:
    """Who wrote what, from the two taps: the old leader's writes, the new one's, and the objects both wrote
    while both were alive (see the module docstring)."""
    old_w = [r for r in old if _gated(r)]
    new_w = [r for r in new if _gated(r)]
    standby = [r for r in new_w if r.sent < acquired_at]
    late = [r for r in old_w if r.sent >= killed_at]
    first_new: dict[str, float] = {}
    for r in new_w:
        first_new.setdefault(_object(r), r.sent)
    both = sorted({_object(r) for r in old_w if _object(r) in first_new and r.sent >= first_new[_object(r)]}
                  | {_object(r) for r in standby})
    old_objects = {_object(r) for r in old_w}
    return {"old_leader_writes": len(old_w), "new_leader_writes": len(new_w), "standby_writes": len(standby),
            "old_leader_writes_after_kill": len(late), "objects_written_by_both": len(both),
            "objects_written_by_both_sample": both[:5], "standby_writes_sample": [repr(r) for r in standby[:5]],
            "objects_handed_over": len(old_objects & set(first_new))}


# -- koordlet-apiserver-outage -------------------------------------------------------------------------------

KL_NODE, KL_NS, KL_CPUS = "chaos-kl", "chaos", 16
SUPPRESS_PERCENT = 60   # not the default 65: the koordlet's NodeSLO is told from its defaults
REPORT_S = 1.0


def _own_slo(slo: dict) -> bool:
    """Whether the koordlet's merged NodeSLO is still the one this case created (suppress on, 60 %)."""
    be = slo.get("resourceUsedThresholdWithBE") or {}
    return be.get("enable") is True and be.get("cpuSuppressThresholdPercent") == SUPPRESS_PERCENT


def _kl_pod(name: str, qos: str, cpu: str, requests: dict) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": KL_NS, "labels": {"koordinator.sh/qosClass": qos},
                         "annotations": {"sim.koordinator.sh/cpu": cpu, "sim.koordinator.sh/memory": "1Gi"}},
            "spec": {"nodeName": KL_NODE, "containers": [{"name": "main", "image": "stress",
                                                          "resources": {"requests": requests}}]}}


def _parse_iso(text: str) -> float:
    from datetime import datetime
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _be_cpuset_writes(audit: Path) -> list[tuple[float, str]]:
    """(time, new value) of every change of the BestEffort QoS cgroup's cpuset.cpus in the koordlet's audit log."""
    out = []
    for path in sorted(audit.glob("audit.log*")):
        for line in path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            f = entry.get("file") or ""
            if f.endswith("cpuset.cpus") and "besteffort" in f.lower() and "pod" not in Path(f).parent.name:
                out.append((_parse_iso(entry["time"]), entry["new"]))
    return sorted(out)


def _report_time(client: Client) -> float | None:
    try:
        metric = client.get("NodeMetric", KL_NODE, timeout=2)
    except Exception:
        return None
    text = ((metric or {}).get("status") or {}).get("updateTime")
    return _parse_iso(text) if text else None


def koordlet_apiserver_outage(quick: bool = False) -> dict:
    """The API server killed (-9) for ``outage_s`` (30 s; 8 s with ``quick``) under a koordlet that suppresses
    the BE cpuset; the LS pod's load is a square wave (the simulator's ``square`` profile, period a quarter
    of the outage), so the budget left to BE keeps changing while the server is away.

    Figures: ``outage_s`` (kill → the restarted server serving on the same port, same data directory);
    ``enforcement_writes_during_outage`` (changes of the BE QoS cgroup's ``cpuset.cpus`` the koordlet's audit
    log shows within the outage; must be > 0) and their ``distinct_cpusets``; ``report_after_recovery_s``
    (the server serving again → the first NodeMetric status whose ``updateTime`` is later) against
    ``report_bound_s`` = the report interval (1 s) + 2 s for the client's reconnect and the rate limiter's
    token; ``slo_kept`` (the koordlet's NodeSLO, sampled every 0.1 s through the outage, was the one it had:
    suppression on at 60 %, not the defaults). ``ok``: all three hold."""
    outage_s = 8.0 if quick else 30.0
    period = outage_s / 4
    figures: dict[str, Any] = {"outage_s_planned": outage_s, "report_interval_s": REPORT_S,
                               "report_bound_s": REPORT_S + 2.0}
    from tests.koordlet_harness import InProcessKoordlet, Simulator

    with workdir("chaos-koordlet-") as base:
        server = start_server(base)
        client = Client.from_kubeconfig(str(server.kubeconfig), qps=0, max_attempts=1)
        parts: list[Any] = []
        try:
            alloc = {"cpu": str(KL_CPUS), "memory": "64Gi", "pods": "110"}
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": KL_NS}})
            client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": KL_NODE},
                           "status": {"capacity": alloc, "allocatable": alloc,
                                      "conditions": [{"type": "Ready", "status": "True"}]}})
            client.create({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
                           "metadata": {"name": KL_NODE},
                           "spec": {"resourceUsedThresholdWithBE": {
                               "enable": True, "cpuSuppressThresholdPercent": SUPPRESS_PERCENT,
                               "cpuSuppressPolicy": "cpuset"}}})
            client.create({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
                           "metadata": {"name": KL_NODE},
                           "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 5,
                                                            "reportIntervalSeconds": 1}}})
            # LS: 1 core or 9 (square wave) → the BE budget (16 × 60 % − LS − system) swings
            # between 9 and 2 CPUs.
            client.create(_kl_pod("ls", "LS", f"square(low=1, high=9, period={period:g}s)",
                                  {"cpu": "10", "memory": "2Gi"}))
            client.create(_kl_pod("be", "BE", "4", {"kubernetes.io/batch-cpu": "4000",
                                                   "kubernetes.io/batch-memory": "1Gi"}))
            root, run = base / "nodes", base / "run"
            parts.append(Simulator(server.kubeconfig, root, [KL_NODE], interval=0.1).start())
            koordlet = InProcessKoordlet(server.kubeconfig, KL_NODE, root, run, "--report-interval", f"{REPORT_S:g}s",
                                         "--audit-log-dir", str(base / "audit"))
            parts.append(koordlet.start())
            audit = base / "audit"
            wait_for(lambda: len({v for _, v in _be_cpuset_writes(audit)}) >= 2, 60,
                     "the koordlet to suppress the BE cpuset (two sizes)")
            wait_for(lambda: _report_time(client), 60, "a NodeMetric report")

            port = server.port
            down_at = time.time()
            server.kill9()
            # The outage: the server is gone for outage_s; meanwhile the koordlet's NodeSLO is sampled.
            slo_samples = lost = 0
            while time.time() - down_at < outage_s:
                slo_samples += 1
                lost += not _own_slo(koordlet.parts.states.node_slo())
                time.sleep(0.1)
            server.start("--crd-dir", str(CRD_DIR), port=port)
            up_at = time.time()
            figures["outage_s"] = round(up_at - down_at, 3)
            seen = wait_for(lambda: (lambda t: t if t and t > up_at else None)(_report_time(client)), 30,
                            "a NodeMetric report after the outage")
            reported_at = time.time()
            figures["report_after_recovery_s"] = round(reported_at - up_at, 3)
            figures["report_update_time_after_recovery_s"] = round(seen - up_at, 3)
            during = [(t, v) for t, v in _be_cpuset_writes(audit) if down_at <= t <= up_at]
            figures["enforcement_writes_during_outage"] = len(during)
            figures["distinct_cpusets"] = len({v for _, v in during})
            figures["slo_samples_during_outage"] = slo_samples
            figures["slo_kept"] = lost == 0 and _own_slo(koordlet.parts.states.node_slo())
            figures["ok"] = (figures["enforcement_writes_during_outage"] > 0 and figures["distinct_cpusets"] >= 2
                             and figures["report_after_recovery_s"] <= figures["report_bound_s"]
                             and figures["slo_kept"])
        except Exception as e:
            figures.update(ok=False, error=repr(e))
        finally:
            for part in reversed(parts):
                with contextlib.suppress(Exception):
                    part.stop()
            client.close()
            server.stop()
    return figures


# -- scheduler-kill-mid-gang --------------------------------------------------------------------------------

SCHED_NS = "chaos-gang"
GANG = "gang.scheduling.koordinator.sh/"
SCHEDULER_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: koord-scheduler
"""


def _gang_pod(name: str, members: int, wait_s: float) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": SCHED_NS,
                         "annotations": {GANG + "name": "gang", GANG + "min-available": str(members),
                                         GANG + "waiting-time": f"{wait_s:g}s"}},
            "spec": {"schedulerName": "koord-scheduler",
                     "containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1", "memory": "128Mi"}}}]}}


def _scheduler_process(kubeconfig: Path, config: Path, log_path: Path) -> subprocess.Popen:
    with open(log_path, "a", encoding="utf-8") as out:
        return subprocess.Popen([sys.executable, "-m", "koordinator", "--role=scheduler",
                                 "--kubeconfig", str(kubeconfig), "--config", str(config),
                                 "--metrics-addr", "0", "--health-addr", "0"],
                                stdout=out, stderr=subprocess.STDOUT)


def scheduler_kill_mid_gang(quick: bool = False) -> dict:
    """A Strict gang of ``members`` (3; 5 in the full run) that needs all of them (min-available = members),
    with room for all. The first scheduler process talks through an :class:`~tests.http_tap.HttpTap` that
    lets one ``pods/binding`` through and holds every later one: the gang passed Permit as a whole, one member
    is bound and the others' bindings never reach the server. Then the scheduler is killed (-9) — the
    mid-gang state a crash between two bindings leaves — and a second scheduler process starts.

    "No partial gang stays bound": a bound pod cannot be unbound, so the new scheduler must bind the rest
    (Koordinator counts a gang's bound members toward min-available, reference scheduler.md coscheduling).
    Figures: ``members``, ``bound_at_kill`` (1), ``bound_after`` (the gang's bound members once the new
    scheduler has had the gang's waiting time and 20 s more), ``recovered_s`` (the new scheduler's start → all
    bound), ``partial`` (0 < bound_after < members: must be false)."""
    members = 3 if quick else 5
    wait_s = 3.0 if quick else 10.0
    figures: dict[str, Any] = {"members": members, "gang_waiting_time_s": wait_s}
    with workdir("chaos-gang-") as base:
        server = start_server(base)
        client = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
        lock = threading.Lock()
        passed = [0]

        def hold(method: str, path: str) -> bool:
            if method != "POST" or not path.split("?", 1)[0].endswith("/binding"):
                return False
            with lock:
                passed[0] += 1
                return passed[0] > 1

        tap = HttpTap(server.port, hold=hold).start()
        config = base / "koord-scheduler-config.yaml"
        config.write_text(SCHEDULER_CONFIG)
        procs: list[subprocess.Popen] = []
        names = [f"member-{i}" for i in range(members)]

        def bound() -> list[str]:
            return [n for n in names if (client.get("Pod", n, SCHED_NS).get("spec") or {}).get("nodeName")]

        try:
            client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SCHED_NS}})
            for i in range(2):
                alloc = {"cpu": str(members), "memory": "16Gi", "pods": "110"}
                client.create({"apiVersion": "v1", "kind": "Node",
                               "metadata": {"name": f"gang-node-{i}",
                                            "labels": {"kubernetes.io/hostname": f"gang-node-{i}"}},
                               "status": {"capacity": alloc, "allocatable": alloc,
                                          "conditions": [{"type": "Ready", "status": "True"}]}})
            procs.append(_scheduler_process(kubeconfig_via(server, tap.url, base / "first.kubeconfig"), config,
                                            base / "first.log"))
            for n in names:
                client.create(_gang_pod(n, members, wait_s))
            wait_for(lambda: bound() and any(r.held for r in tap.requests), 60,
                     "one member bound and the next binding held")
            procs[0].kill()
            procs[0].wait(10)
            figures["bound_at_kill"] = len(bound())
            restarted = time.monotonic()
            procs.append(_scheduler_process(server.kubeconfig, config, base / "second.log"))
            try:
                wait_for(lambda: len(bound()) == members, wait_s + 20, "the new scheduler to bind the rest")
                figures["recovered_s"] = round(time.monotonic() - restarted, 3)
            except TimeoutError:
                figures["recovered_s"] = None
            after = bound()
            figures["bound_after"] = len(after)
            figures["partial"] = 0 < len(after) < members
            if figures["partial"]:
                figures["evidence"] = {"bound": after, "log": tail(base / "second.log")}
            figures["ok"] = figures["bound_at_kill"] == 1 and not figures["partial"] and len(after) == members
        except Exception as e:
            figures.update(ok=False, error=repr(e), log=tail(base / "first.log"))
        finally:
            for p in procs:
                stop_process(p)
            tap.stop()
            client.close()
            server.stop()
    return figures


CASES: dict[str, Callable[..., dict]] = {
    "manager-leader-kill9": manager_leader_kill9,
    "koordlet-apiserver-outage": koordlet_apiserver_outage,
    "scheduler-kill-mid-gang": scheduler_kill_mid_gang,
}


if __name__ == "__main__":
    # ``python scripts/chaos_roles.py [--quick]``: this module's cases through the driver (one JSON document).
    sys.path.insert(0, str(ROOT / "scripts"))
    from chaos import main

    sys.exit(main([*(a for n in CASES for a in ("--case", n)), *sys.argv[1:]]))
