"""The MigrationController's throughput through the embedded API server (second half of bench_descheduler).

``koordinator apiserver`` and ``koordinator --role=descheduler`` run as processes (plus
``koordinator --role=scheduler`` in ReservationFirst mode, which schedules the Reservations) on
127.0.0.1, in a temporary directory; all are stopped on every way out (``try/finally``, Ctrl-C too).

The cluster, created through the API before the descheduler starts: one Node per 10 jobs (at least
4; 32 cpu each), one ReplicaSet (20 replicas) per 10 jobs and its 20 pods, bound round-robin to the
nodes, Running and Ready (status written as a kubelet would). The jobs name 10 of each ReplicaSet's 20
pods, so the per-workload limits (``maxMigratingPerWorkload`` / ``maxUnavailablePerWorkload`` 10)
never hold a job back while ``ExpectedReplicas`` still accepts the pods (a limit equal to the replica
count would forbid them). One warm-up job (a pod of its own ReplicaSet) must succeed first: it proves
the descheduler's informers are synced and its controllers run, so start-up is not measured.

Then ``jobs`` PodMigrationJobs are created as fast as 8 client threads can; a watch on
PodMigrationJobs records when each reaches a terminal phase. Reported: ``seconds`` (from the first
create until the last job is terminal), ``jobs_per_second`` (succeeded / seconds), ``succeeded``,
``failed`` (with their reasons), and the CPU seconds (``/proc/<pid>/stat`` utime+stime) of the
descheduler (and API server, scheduler) over the same span. ``ok``: every job Succeeded.

The descheduler's configuration is the shipped koord-descheduler-config with its limits opened up:
``maxMigratingPerNode: 0`` (no per-node limit), ``objectLimiters: {}`` (no per-workload rate window),
``evictQPS: 10000`` / ``evictBurst: 10000``, ``maxConcurrentReconciles: 2`` (the role's reconcile
workers; a small machine gains nothing from more), ``defaultJobMode`` = the measured mode,
``leaderElect: false`` (one replica: no Lease wait) and ``clientConnection`` qps/burst 10000 (so the
API client's rate limiter does not set the pace). The arbitration interval stays at its 0.5 s default.

Modes: ``EvictDirectly`` (the job evicts the pod through the Eviction API; the server deletes it at
once). ``ReservationFirst``: the job creates a Reservation, the scheduler places it on another node,
the pod is evicted, and this script plays the ReplicaSet controller and the kubelet: it watches the
pods, creates each evicted pod's replacement (same owner, ``schedulerName: koord-scheduler``) and
marks it Running/Ready once bound (the scheduler binds it into the Reservation); the job succeeds when
the replacement is Ready. The scheduler runs the shipped koord-scheduler configuration (no leader
election, client limits opened up: see ``scheduler_config``).

A stuck job would only end at its 5-minute TTL: the wait stops after ``STALL_SECONDS`` without progress
(``ok`` false, ``unfinished_jobs`` describes each one).
"""

from __future__ import annotations

import http.client
import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import yaml
from benchhttp import KeepAliveApi

ROOT = Path(__file__).resolve().parents[1]
NS = "bench-migration"
MODES = ("EvictDirectly", "ReservationFirst")
PMJ_PATH = "/apis/scheduling.koordinator.sh/v1alpha1/podmigrationjobs"
PODS_PATH = f"/api/v1/namespaces/{NS}/pods"
TERMINAL = ("Succeeded", "Failed", "Aborted")
JOBS_PER_SET, REPLICAS = 10, 20
POD_REQUESTS = {"cpu": "100m", "memory": "128Mi"}
#: The measured wait ends when no job has finished for this long (a stuck job would only end at its 5m TTL).
STALL_SECONDS = 30.0


# -- configurations ------------------------------------------------------------------------------------------------

def _shipped(path: Path, key: str) -> dict:
    return yaml.safe_load(yaml.safe_load(path.read_text())["data"][key])


def descheduler_config(mode: str) -> str:
    """The shipped DeschedulerConfiguration with the MigrationController's limits opened up (module docstring)."""
    doc = _shipped(ROOT / "manifests" / "config" / "koord-descheduler-config.yaml", "koord-descheduler-config")
    doc["leaderElection"] = {"leaderElect": False}
    doc["clientConnection"] = {"qps": 10000, "burst": 10000}
    for entry in doc["profiles"][0]["pluginConfig"]:
        if entry["name"] == "MigrationController":
            entry["args"].update({
                "defaultJobMode": mode, "maxConcurrentReconciles": 2, "maxMigratingPerNode": 0,
                "maxMigratingPerWorkload": JOBS_PER_SET, "maxUnavailablePerWorkload": JOBS_PER_SET,
                "objectLimiters": {}, "evictQPS": "10000", "evictBurst": 10000})
    return yaml.safe_dump(doc, sort_keys=False)


def scheduler_config() -> str:
    """The shipped koord-scheduler configuration, one replica, client limits opened up."""
    doc = _shipped(ROOT / "manifests" / "config" / "koord-scheduler-config.yaml", "koord-scheduler-config")
    doc["leaderElection"] = {"leaderElect": False}
    doc["clientConnection"] = {"qps": 10000, "burst": 10000}
    return yaml.safe_dump(doc, sort_keys=False)


# -- objects -------------------------------------------------------------------------------------------------------

def node_obj(i: int) -> dict:
    name = f"node-{i:04d}"
    alloc = {"cpu": "32", "memory": "128Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "spec": {}, "status": {"capacity": alloc, "allocatable": alloc,
                                   "conditions": [{"type": "Ready", "status": "True"}]}}


def replica_set_obj(name: str) -> dict:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": REPLICAS, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "pause"}]}}}}


def pod_obj(name: str, rs: dict, node: str = "") -> dict:
    """A pod as the ReplicaSet controller creates it (bound to ``node`` when given)."""
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"],
           "uid": rs["metadata"]["uid"], "controller": True}
    spec: dict = {"schedulerName": "koord-scheduler",
                  "containers": [{"name": "c", "image": "pause",
                                  "resources": {"requests": dict(POD_REQUESTS), "limits": dict(POD_REQUESTS)}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "labels": {"app": rs["metadata"]["name"]},
                         "ownerReferences": [ref]}, "spec": spec}


def running_ready(pod: dict) -> dict:
    """``pod`` with the status a kubelet reports for a started, ready container."""
    return {**pod, "status": {**(pod.get("status") or {}), "phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"}, {"type": "Initialized", "status": "True"},
        {"type": "ContainersReady", "status": "True"}, {"type": "Ready", "status": "True"}]}}


def job_obj(name: str, pod: str, mode: str) -> dict:
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob",
            "metadata": {"name": name}, "spec": {"mode": mode, "podRef": {"namespace": NS, "name": pod}}}


# -- plumbing ------------------------------------------------------------------------------------------------------

class Api(KeepAliveApi):
    """Raw JSON calls on one keep-alive connection per thread."""

    def create_ready_pod(self, pod: dict) -> dict:
        created = self.call("POST", PODS_PATH, pod)
        return self.call("PUT", f"{PODS_PATH}/{pod['metadata']['name']}/status", running_ready(created))


class Watch:
    """A watch from ``rv`` on ``path``; ``handle(event_type, obj)`` runs on the watch's own thread."""

    def __init__(self, port: int, path: str, rv: str, handle) -> None:
        self.handle = handle
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
        self.conn.request("GET", f"{path}?watch=1&resourceVersion={rv}&allowWatchBookmarks=false")
        self.resp = self.conn.getresponse()
        self.error: BaseException | None = None
        self.closed = False
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        try:
            for line in self.resp:
                event = orjson.loads(line)
                self.handle(event["type"], event["object"])
        except Exception as exc:  # noqa: BLE001 - http.client raises odd errors when the socket is shut under it
            if not self.closed:
                self.error = exc  # the server went away

    def close(self) -> None:
        self.closed = True
        # Shut the socket down first: close() alone waits for the reader thread's blocked read.
        try:
            if self.conn.sock is not None:
                self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


class JobTracker:
    """Terminal phases of the measured jobs, with the time each was first seen terminal."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.done: dict[str, tuple[str, str, float]] = {}  # name -> (phase, reason, monotonic time)
        self.final: dict[str, dict] = {}  # name -> the job as first seen terminal
        self.lock = threading.Lock()
        self.all_done = threading.Event()

    def handle(self, kind: str, job: dict) -> None:
        name = job["metadata"]["name"]
        status = job.get("status") or {}
        if name not in self.names or name in self.done or status.get("phase") not in TERMINAL:
            return
        with self.lock:
            self.done[name] = (status["phase"], status.get("reason") or "", time.monotonic())
            self.final[name] = job
            if len(self.done) == len(self.names):
                self.all_done.set()


class WorkloadPlayer:
    """Plays the ReplicaSet controller and the kubelet for ReservationFirst: an evicted pod of a job gets a
    replacement (same owner, unbound, koord-scheduler); a replacement is marked Running/Ready once bound."""

    def __init__(self, api: Api, owners: dict[str, dict]) -> None:
        self.api = api
        self.owners = owners  # evicted pod name -> its ReplicaSet
        self.readied: set[str] = set()
        self.errors: list[str] = []
        self.work: queue.Queue = queue.Queue()
        self.pool = ThreadPoolExecutor(4)

    def handle(self, kind: str, pod: dict) -> None:
        name = pod["metadata"]["name"]
        if kind == "DELETED" and name in self.owners:
            self.pool.submit(self._do, "POST", PODS_PATH, pod_obj(f"{name}-r", self.owners[name]))
        elif (kind == "MODIFIED" and name.endswith("-r") and (pod.get("spec") or {}).get("nodeName")
              and name not in self.readied):
            self.readied.add(name)
            self.pool.submit(self._do, "PUT", f"{PODS_PATH}/{name}/status", running_ready(pod))

    def _do(self, method: str, path: str, body: dict) -> None:
        try:
            self.api.call(method, path, body)
        except Exception as exc:  # noqa: BLE001 - reported in the result, the run goes on
            self.errors.append(str(exc)[:200])

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a live process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_apiserver(workdir: Path) -> tuple[subprocess.Popen, int]:
    proc = subprocess.Popen([sys.executable, "-m", "koordinator", "apiserver", "--data-dir", str(workdir / "data"),
                             "--host", "127.0.0.1", "--port", "0", "--crd-dir", str(ROOT / "manifests" / "crds")],
                            stdout=subprocess.PIPE, stderr=open(workdir / "apiserver.log", "w"), text=True, cwd=ROOT)
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            log = (workdir / "apiserver.log").read_text()[-2000:]
            raise RuntimeError(f"apiserver exited with {proc.wait()}: {log}")
        if "serving at" in line:
            proc.stdout.readline()  # the kubeconfig line
            return proc, int(line.strip().rsplit(":", 1)[1])


def start_role(workdir: Path, role: str, config_text: str) -> subprocess.Popen:
    config = workdir / f"{role}.yaml"
    config.write_text(config_text)
    return subprocess.Popen([sys.executable, "-m", "koordinator", f"--role={role}",
                             "--kubeconfig", str(workdir / "data" / "kubeconfig"), "--config", str(config),
                             "--metrics-addr", "0", "--health-addr", "0", "--log-level", "warning"],
                            stdout=open(workdir / f"{role}.log", "w"), stderr=subprocess.STDOUT, cwd=ROOT)


def stop(proc: subprocess.Popen | None) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


# -- the measurement -----------------------------------------------------------------------------------------------

def build_cluster(api: Api, jobs: int, mode: str) -> tuple[list[str], dict[str, dict]]:
    """Nodes, ReplicaSets and Ready pods; returns the measured pods' names (job order) and every pod's owner."""
    nodes = [node_obj(i) for i in range(max(4, -(-jobs // JOBS_PER_SET)))]
    api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: api.call("POST", "/api/v1/nodes", n), nodes))
        sets = list(pool.map(lambda i: api.call("POST", f"/apis/apps/v1/namespaces/{NS}/replicasets",
                                                replica_set_obj(f"rs-{i:04d}")),
                             range(1 + -(-jobs // JOBS_PER_SET))))  # the first one is the warm-up's
        pods, owners, measured = [], {}, []
        for s, rs in enumerate(sets):
            for r in range(REPLICAS):
                name = f"{rs['metadata']['name']}-{r:02d}"
                pods.append(pod_obj(name, rs, nodes[(s * REPLICAS + r) % len(nodes)]["metadata"]["name"]))
                owners[name] = rs
                if s and r < JOBS_PER_SET:
                    measured.append(name)
        list(pool.map(api.create_ready_pod, pods))
    return measured[:jobs], owners


def run_mode(jobs: int, mode: str, workdir: Path, timeout: float) -> dict:
    """One measured run of ``jobs`` PodMigrationJobs in ``mode``, in processes of its own (module docstring)."""
    t0 = time.monotonic()
    server, port = start_apiserver(workdir)
    descheduler = scheduler = None
    watches: list[Watch] = []
    player: WorkloadPlayer | None = None
    try:
        api = Api(port)
        measured, owners = build_cluster(api, jobs, mode)
        setup = time.monotonic() - t0
        if mode == "ReservationFirst":
            scheduler = start_role(workdir, "scheduler", scheduler_config())
            player = WorkloadPlayer(api, {"rs-0000-00": owners["rs-0000-00"], **{n: owners[n] for n in measured}})
            rv = api.call("GET", f"{PODS_PATH}?limit=1")["metadata"]["resourceVersion"]
            watches.append(Watch(port, PODS_PATH, rv, player.handle))
        descheduler = start_role(workdir, "descheduler", descheduler_config(mode))
        names = [f"bench-{i:05d}" for i in range(jobs)]
        warmup = JobTracker({"warmup"})
        tracker = JobTracker(set(names))
        rv = api.call("GET", f"{PMJ_PATH}?limit=1")["metadata"]["resourceVersion"]

        def on_job(kind: str, obj: dict) -> None:
            warmup.handle(kind, obj)
            tracker.handle(kind, obj)

        watches.append(Watch(port, PMJ_PATH, rv, on_job))
        t1 = time.monotonic()
        api.call("POST", PMJ_PATH, job_obj("warmup", "rs-0000-00", mode))
        if _wait(warmup.all_done, descheduler, scheduler, 120) != "finished":
            raise RuntimeError(f"the warm-up job did not finish: {_logs(workdir)}")
        if warmup.done["warmup"][0] != "Succeeded":
            raise RuntimeError(f"the warm-up job ended {warmup.done['warmup']}: {_logs(workdir)}")
        warm = time.monotonic() - t1
        procs = {"descheduler": descheduler, "apiserver": server, **({"scheduler": scheduler} if scheduler else {})}
        cpu0 = {k: cpu_seconds(p.pid) for k, p in procs.items()}
        start = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda n, p: api.call("POST", PMJ_PATH, job_obj(n, p, mode)), names, measured))
        created = time.monotonic() - start
        stopped = _wait(tracker.all_done, descheduler, scheduler, timeout, tracker)
        cpu = {f"{k}_cpu_seconds": round(cpu_seconds(p.pid) - cpu0[k], 2) for k, p in procs.items()
               if p.poll() is None}
        with tracker.lock:
            done = dict(tracker.done)
        end = max((t for _, _, t in done.values()), default=start)
        phases = Counter(phase for phase, _, _ in done.values())
        succeeded = phases["Succeeded"]
        # A Succeeded job must have moved its pod the mode's way: evicted (EvictDirectly), or replaced by the
        # pod that bound its Reservation (ReservationFirst: status.podRef names the replacement).
        if mode == "ReservationFirst":
            wrong = [n for n, j in tracker.final.items() if done[n][0] == "Succeeded"
                     and not ((j["status"].get("podRef") or {}).get("name", "").endswith("-r")
                              and (j["status"].get("message") or "").startswith("Bind Pod"))]
        else:
            wrong = [n for n, j in tracker.final.items() if done[n][0] == "Succeeded"
                     and not (j["status"].get("message") or "").endswith("has been evicted")]
        seconds = end - start
        result = {"mode": mode, "jobs": jobs, "succeeded": succeeded, "failed": len(done) - succeeded,
                  "failed_reasons": dict(Counter(f"{p}/{r}" for p, r, _ in done.values() if p != "Succeeded")),
                  "unfinished": jobs - len(done), "stopped": stopped,
                  "create_seconds": round(created, 2), "seconds": round(seconds, 2),
                  "jobs_per_second": round(succeeded / seconds, 1) if seconds > 0 else None, **cpu,
                  "nodes": max(4, -(-jobs // JOBS_PER_SET)), "pods": len(owners),
                  "setup_seconds": round(setup, 2), "warmup_seconds": round(warm, 2),
                  "succeeded_not_as_the_mode_says": len(wrong),
                  "ok": succeeded == jobs and not wrong and descheduler.poll() is None}
        if player is not None:
            result["workload_player_errors"] = player.errors[:5]
        if not result["ok"]:
            result["unfinished_jobs"] = [_where(api, api.call("GET", f"{PMJ_PATH}/{n}"))
                                         for n in names if n not in done][:5]
            result["log_tail"] = _logs(workdir)
        return result
    finally:
        for w in watches:
            w.close()
        if player is not None:
            player.close()
        for proc in (descheduler, scheduler, server):
            stop(proc)


def _wait(event: threading.Event, descheduler, scheduler, timeout: float, tracker: JobTracker | None = None) -> str:
    """Wait for ``event`` while the role processes live; "finished", or why the wait ended: timeout, a role
    exited, or (with ``tracker``) no job finished for ``STALL_SECONDS`` (stuck jobs would only end at their TTL)."""
    deadline = time.monotonic() + timeout
    seen, progress = -1, time.monotonic()
    while not event.wait(0.05):
        now = time.monotonic()
        if now > deadline:
            return f"timeout after {timeout:g}s"
        for name, p in (("descheduler", descheduler), ("scheduler", scheduler)):
            if p is not None and p.poll() is not None:
                return f"{name} exited with {p.returncode}"
        if tracker is not None:
            if len(tracker.done) != seen:
                seen, progress = len(tracker.done), now
            elif now - progress > STALL_SECONDS:
                return f"stalled: no job finished for {STALL_SECONDS:g}s"
    return "finished"


def _where(api: Api, job: dict) -> dict:
    """Where an unfinished job stands: its phase and last condition, its Reservation, its pod's replacement."""
    status = job.get("status") or {}
    last = (status.get("conditions") or [{}])[-1]
    pod = (job["spec"].get("podRef") or {}).get("name", "")
    out = {"name": job["metadata"]["name"], "pod": pod, "phase": status.get("phase"),
           "condition": f'{last.get("type")}={last.get("status")} {last.get("reason")}: {last.get("message")}'}
    ref = (job["spec"].get("reservationOptions") or {}).get("reservationRef") or {}
    for what, path in (("reservation", f"/apis/scheduling.koordinator.sh/v1alpha1/reservations/{ref.get('name')}"),
                       ("replacement", f"{PODS_PATH}/{pod}-r")):
        try:
            obj = api.call("GET", path)
        except RuntimeError as exc:
            out[what] = str(exc)[:120]
            continue
        annotations = obj["metadata"].get("annotations") or {}
        out[what] = {"node": (obj.get("status") or {}).get("nodeName") or (obj.get("spec") or {}).get("nodeName"),
                     "phase": (obj.get("status") or {}).get("phase"),
                     **{k: v for k, v in (obj.get("status") or {}).items() if k == "currentOwners"},
                     **{k: v for k, v in annotations.items() if "reservation" in k}}
    # Which Reservation each replacement of the same ReplicaSet took (None: scheduled outside any).
    rs = pod.rsplit("-", 1)[0]
    pods = api.call("GET", f"{PODS_PATH}?labelSelector=app%3D{rs}")["items"]
    out["replacements_of_the_workload"] = {
        p["metadata"]["name"]: orjson.loads(a)["name"][:8] if (a := (p["metadata"].get("annotations") or {}).get(
            "scheduling.koordinator.sh/reservation-allocated")) else None
        for p in pods if p["metadata"]["name"].endswith("-r")}
    return out


def _logs(workdir: Path) -> str:
    return " | ".join(f"{p.name}: {p.read_text()[-1500:]}" for p in sorted(workdir.glob("*.log"))
                      if p.stat().st_size)


def bench_migration(jobs: int = 200, modes: tuple[str, ...] = ("EvictDirectly",), timeout: float = 300.0) -> dict:
    """Each mode in a fresh cluster; the section of the JSON document (``ok``: every job of every mode Succeeded)."""
    runs = {}
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="bench-migration-") as tmp:
            try:
                runs[mode] = run_mode(jobs, mode, Path(tmp), timeout)
            except RuntimeError as exc:
                runs[mode] = {"mode": mode, "jobs": jobs, "ok": False, "error": str(exc)[:4000]}
    return {"benchmark": "descheduler-migration-throughput", "jobs": jobs, "cpu_count": os.cpu_count(),
            "modes": runs, "ok": all(r["ok"] for r in runs.values())}
