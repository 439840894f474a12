#!/usr/bin/env python3
"""Benchmark the scheduler; prints one JSON document.

Shaped like kube-scheduler's scheduler_perf SchedulingBasic: nodes of 4 cpu / 32Gi / 110 pods,
pods requesting 100m / 500Mi; "init" pods already on the nodes, then the measured pods.

Two measurements per case:

- ``algorithm``: the scheduler's own scheduling cycle (``Scheduler.schedule_one``: snapshot update,
  PreFilter, Filter, Score, select, assume, Reserve, Permit) driven from the real scheduling queue,
  in process; the binding cycles it hands to the binders are not run (no API calls) — pods per second;
- ``end_to_end``: ``koordinator apiserver`` and ``koordinator --role=scheduler`` as processes,
  nodes and every pod created first, then the scheduler started; ``pods_per_second`` is the
  bound pods over the time from the scheduler's start until the last is bound (a watch sees
  the bindings), ``measured_phase_pods_per_second`` over the time from the first binding to the last.
  It ends once every measured pod is bound or reported Unschedulable (or after ``--timeout``).

Each measurement says whether it is what it claims: ``ok`` is true only when every measured pod
was placed (bound, end to end); the document's ``ok`` and the exit status sum them up.

Cases: 500 nodes / 1,000 pods and 5,000 nodes / 10,000 pods, each without and with
LoadAwareScheduling (NodeMetrics present for every node); and ``quota-gang`` (end to end only):
5,000 nodes, 10,000 pods in 1,000 ElasticQuotas (10 pods each, every quota large enough), half of
them in 500 gangs of 10 (``gang.scheduling.koordinator.sh/*`` annotations), with ElasticQuota and
Coscheduling enabled as Koordinator's default configuration does. Its figure is compared with the
plain 5,000-node case of the same run: ``ratio_to_plain`` (target ≥ 0.7). And ``full-profile`` (end to
end only): the same 5,000 nodes / 10,000 plain pods under the shipped koord-scheduler configuration
(every plugin of Koordinator's default profile: Reservation, NodeNUMAResource, DeviceShare,
LoadAwareScheduling, Coscheduling, ElasticQuota, ...), every node with a NodeMetric and a
NodeResourceTopology as koordlets report them; target ≥ 285 pods/s (kube-scheduler's plain throughput
at that size on this machine), the plain case's figure reported beside it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
from benchhttp import KeepAliveApi

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

NS = "bench"


def node_obj(i: int) -> dict:
    name = f"node-{i:05d}"
    alloc = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": alloc, "allocatable": alloc, "conditions": [{"type": "Ready", "status": "True"}]}}


#: What every pod requests (and is limited to), SchedulingBasic's.
POD_RESOURCES = {"cpu": "100m", "memory": "500Mi"}


def pod_obj(name: str, node: str | None = None, resources: dict | None = None) -> dict:
    resources = resources or POD_RESOURCES
    spec: dict = {"schedulerName": "koord-scheduler",
                  "containers": [{"name": "pause", "image": "registry.k8s.io/pause:3.10",
                                  "resources": {"requests": dict(resources), "limits": dict(resources)}}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


def node_metric(i: int, cpu_milli: int, mem_gi: int) -> tuple[dict, dict]:
    name = f"node-{i:05d}"
    obj = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": name},
           "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 60}}}
    status = {"updateTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "nodeMetric": {"nodeUsage": {"resources": {"cpu": f"{cpu_milli}m", "memory": f"{mem_gi}Gi"}}}}
    return obj, status


CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
clientConnection: {{qps: 5000, burst: 5000}}
profiles:
- schedulerName: koord-scheduler
  plugins:
{plugins}
"""
WITHOUT_LOADAWARE = """    filter: {disabled: [{name: LoadAwareScheduling}]}
    score: {disabled: [{name: LoadAwareScheduling}]}
    reserve: {disabled: [{name: LoadAwareScheduling}]}"""
WITH_LOADAWARE = """    filter: {enabled: [{name: LoadAwareScheduling}]}
    score: {enabled: [{name: LoadAwareScheduling, weight: 1}]}
    reserve: {enabled: [{name: LoadAwareScheduling}]}"""


QUOTA_GANG = """    preEnqueue: {enabled: [{name: Coscheduling}]}
    preFilter: {enabled: [{name: Coscheduling}, {name: ElasticQuota}]}
    filter: {disabled: [{name: LoadAwareScheduling}]}
    postFilter: {disabled: [{name: "*"}], enabled: [{name: Coscheduling}, {name: ElasticQuota}, {name: DefaultPreemption}]}
    preScore: {enabled: [{name: Coscheduling}]}
    score: {disabled: [{name: LoadAwareScheduling}], enabled: [{name: Coscheduling, weight: 1}]}
    reserve: {disabled: [{name: LoadAwareScheduling}], enabled: [{name: Coscheduling}, {name: ElasticQuota}]}
    permit: {enabled: [{name: Coscheduling}]}
    preBind: {enabled: [{name: Coscheduling}]}
    postBind: {enabled: [{name: Coscheduling}]}"""
#: quota+gang case: quotas, gangs, gang size (the pods of a gang share a quota).
QUOTAS, GANGS, GANG_SIZE = 1000, 500, 10


#: Workloads of the end-to-end cases besides the plain one (same nodes and pod sizes).
QUOTA_GANG_MODE, FULL_PROFILE_MODE = "quota-gang", "full-profile"
SHIPPED_CONFIG = ROOT / "manifests" / "config" / "koord-scheduler-config.yaml"


def full_profile_config() -> str:
    """The shipped koord-scheduler configuration (every plugin of Koordinator's default profile), with the
    bench's leader election and client settings."""
    import yaml

    configmap = yaml.safe_load(SHIPPED_CONFIG.read_text())
    document = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    document["leaderElection"] = {"leaderElect": False}
    document["clientConnection"] = {"qps": 5000, "burst": 5000}
    return yaml.safe_dump(document, sort_keys=False)


def config_text(loadaware: bool, mode: str = "plain") -> str:
    if mode == QUOTA_GANG_MODE:
        return CONFIG.format(plugins=QUOTA_GANG)
    if mode == FULL_PROFILE_MODE:
        return full_profile_config()
    return CONFIG.format(plugins=WITH_LOADAWARE if loadaware else WITHOUT_LOADAWARE)


def topology_obj(i: int) -> dict:
    """Node ``i``'s NodeResourceTopology as the koordlet reports it: one socket and NUMA node, 2 cores × 2 threads."""
    cpus = [{"id": c, "core": c % 2, "socket": 0, "node": 0} for c in range(4)]
    return {"apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
            "metadata": {"name": f"node-{i:05d}",
                         "annotations": {"node.koordinator.sh/cpu-topology": json.dumps({"detail": cpus})}},
            "topologyPolicies": ["None"],
            "zones": [{"name": "node-0", "type": "Node",
                       "resources": [{"name": "cpu", "capacity": "4", "allocatable": "4", "available": "4"},
                                     {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi",
                                      "available": "32Gi"}]}]}


def quota_obj(i: int) -> dict:
    """An ElasticQuota under the root with room for its pods (a tenth of a 4-cpu node each)."""
    room = {"cpu": "4", "memory": "16Gi"}
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": f"q-{i:04d}", "namespace": NS}, "spec": {"min": room, "max": room}}


def quota_gang_pod(i: int) -> dict:
    """Pod ``i`` of the quota+gang case: its quota label, and the gang annotations for the first half."""
    pod = pod_obj(f"pod-{i}")
    group = i // GANG_SIZE
    pod["metadata"]["labels"] = {"quota.scheduling.koordinator.sh/name": f"q-{group % QUOTAS:04d}"}
    if group < GANGS:
        pod["metadata"]["annotations"] = {"gang.scheduling.koordinator.sh/name": f"gang-{group:04d}",
                                          "gang.scheduling.koordinator.sh/min-available": str(GANG_SIZE)}
    return pod


# -- algorithm only -------------------------------------------------------------------------------

def bench_algorithm(nodes: int, init_pods: int, pods: int, loadaware: bool,
                    pod_resources: dict | None = None) -> dict:
    """The scheduling thread's work per pod, as ``Scheduler._schedule_loop`` does it: pop the queue's
    head, ``schedule_one``, ``done``. ``ok``: every measured pod was assumed onto a node."""
    import yaml

    from koordinator.runtime.runtime import freeze_long_lived_objects
    from koordinator_roles.scheduler import config as cfg
    from koordinator_roles.scheduler.cache import SchedulerCache
    from koordinator_roles.scheduler.framework.handle import PluginHandle
    from koordinator_roles.scheduler.framework.runtime import Framework
    from koordinator_roles.scheduler.plugins import NOT_IMPLEMENTED, in_tree_registry
    from koordinator_roles.scheduler.queue import SchedulingQueue
    from koordinator_roles.scheduler.scheduler import Scheduler

    registry = in_tree_registry()
    config = cfg.parse(yaml.safe_load(config_text(loadaware)), registry_names=set(registry.names()),
                       not_implemented=NOT_IMPLEMENTED)
    cache = SchedulerCache()
    holder: dict = {}
    handle = PluginHandle(snapshot_source=lambda: holder["s"].snapshot)
    fwk = Framework(config.profiles[0], registry, handle)
    queue = SchedulingQueue(fwk.queue_sort_key(), pre_enqueue=fwk.run_pre_enqueue,
                            events_for_plugin=fwk.events_for_plugin)
    handle.nominator = queue.nominator
    # What the pod informer's store holds: schedule_one looks the pod up there before its cycle.
    store: dict[str, dict] = {}
    # The binders are never started: the binding cycles (API calls) queue up unrun.
    sched = Scheduler(frameworks={fwk.profile_name: fwk}, cache=cache, queue=queue, client=None,
                      pod_lookup=store.get)
    holder["s"] = sched
    for i in range(nodes):
        cache.add_node(node_obj(i))
    la = fwk.plugin("LoadAwareScheduling")
    if loadaware and la is not None:
        for i in range(nodes):
            obj, status = node_metric(i, 400 + (i * 37) % 2000, 4 + i % 16)
            la.cache.on_node_metric_add({**obj, "status": status})
    uid = 0

    def make(name: str, node: str | None = None) -> dict:
        nonlocal uid
        uid += 1
        p = pod_obj(name, node, pod_resources)
        p["metadata"]["uid"] = f"uid-{uid}"
        return p

    for i in range(init_pods):
        cache.add_pod(make(f"init-{i}", f"node-{i % nodes:05d}"))
    # As the informer delivers them: the API server fills in status.phase and status.qosClass.
    todo = [{**make(f"pod-{i}"), "status": {"phase": "Pending", "qosClass": "Guaranteed"}} for i in range(pods)]
    for pod in todo:
        store[f"{NS}/{pod['metadata']['name']}"] = pod
        queue.add(pod)
    freeze_long_lived_objects()  # as the scheduler process does once its caches synced
    start = time.perf_counter()
    attempted = 0
    # One attempt per pod: a rejected pod is parked as unschedulable (nothing here would move it back).
    for _ in range(pods):
        qpi = queue.pop(timeout=0)
        if qpi is None:
            break
        attempted += 1
        try:
            sched.schedule_one(qpi)
        finally:
            queue.done(qpi.pod_info.uid)
    elapsed = time.perf_counter() - start
    scheduled = sum(1 for pod in todo if cache.is_assumed(pod["metadata"]["uid"]))
    # pods_per_second counts scheduling cycles: a rejected pod's cycle is work done too, and ok says
    # whether the figure is the one for placing every pod.
    return {"pods": pods, "attempted": attempted, "scheduled": scheduled, "ok": scheduled == pods,
            "seconds": round(elapsed, 3), "pods_per_second": round(attempted / elapsed, 1) if elapsed > 0 else None}


# -- end to end -----------------------------------------------------------------------------------

class Api(KeepAliveApi):
    def __init__(self, port: int) -> None:
        super().__init__(port, timeout=300)

    def create_all(self, path_of, objs: list[dict], threads: int = 8) -> None:
        def create(obj: dict) -> None:
            status, data = self.request("POST", path_of(obj), obj)
            if status >= 300:
                raise RuntimeError(f"creating {obj['kind']} {obj['metadata']['name']}: {status} {data[:300]!r}")

        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(create, objs))


class BindWatch:
    """Follows the namespace's measured pods: which got a nodeName (with the time of the first and
    last binding) and which the scheduler reported Unschedulable and are still unbound."""

    def __init__(self, port: int, rv: str, wanted: set[str]) -> None:
        self.wanted = wanted
        self.bound: set[str] = set()
        self.unschedulable: set[str] = set()
        self.first = self.last = 0.0
        self._lock = threading.Lock()
        self.settled = threading.Event()    # every wanted pod is bound or reported Unschedulable
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
        self.conn.request("GET", f"/api/v1/namespaces/{NS}/pods?watch=1&resourceVersion={rv}")
        self.resp = self.conn.getresponse()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        for line in self.resp:
            event = orjson.loads(line)
            obj = event["object"]
            name = (obj.get("metadata") or {}).get("name")
            if name not in self.wanted or name in self.bound:
                continue
            with self._lock:
                if (obj.get("spec") or {}).get("nodeName"):
                    now = time.monotonic()
                    self.first = self.first or now
                    self.last = now
                    self.bound.add(name)
                    self.unschedulable.discard(name)
                elif any(c.get("type") == "PodScheduled" and c.get("status") == "False"
                         and c.get("reason") == "Unschedulable"
                         for c in (obj.get("status") or {}).get("conditions") or []):
                    # Nothing in the benchmark changes the cluster, so a pod rejected for want of room
                    # stays unbound; waiting for it would only end at the timeout.
                    self.unschedulable.add(name)
                if len(self.bound) + len(self.unschedulable) == len(self.wanted):
                    self.settled.set()
                    if len(self.bound) == len(self.wanted):
                        return

    def counts(self) -> tuple[int, int]:
        """(bound, reported unschedulable) now."""
        with self._lock:
            return len(self.bound), len(self.unschedulable)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far (Linux /proc), to show which side is saturated."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return round((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 2)


def bench_end_to_end(nodes: int, init_pods: int, pods: int, loadaware: bool, workdir: Path,
                     pod_resources: dict | None = None, timeout: float = 600.0, mode: str = "plain") -> dict:
    """Scheduler and API server as processes; ``ok`` only when every measured pod was bound and the
    scheduler was still running. Ends when every pod is bound or reported Unschedulable, when the
    scheduler exits, or after ``timeout`` seconds (``stopped`` says which).

    ``mode``: "plain"; ``QUOTA_GANG_MODE`` (quotas and gangs); ``FULL_PROFILE_MODE`` (the shipped
    configuration, with a NodeMetric and a NodeResourceTopology per node as koordlets report them)."""
    loadaware = loadaware or mode == FULL_PROFILE_MODE
    server = subprocess.Popen([sys.executable, "-m", "koordinator", "apiserver", "--data-dir", str(workdir / "data"),
                               "--port", "0", "--crd-dir", str(ROOT / "manifests" / "crds")],
                              stdout=subprocess.PIPE, text=True, cwd=ROOT)
    scheduler = None
    try:
        url = ""
        while not url:
            line = server.stdout.readline()
            if not line:
                raise RuntimeError("apiserver exited")
            if "serving at" in line:
                url = line.strip().rsplit(" ", 1)[1]
                server.stdout.readline()
        port = int(url.rsplit(":", 1)[1])
        api = Api(port)
        api.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
        api.create_all(lambda o: "/api/v1/nodes", [node_obj(i) for i in range(nodes)])
        if loadaware:
            def metric(i: int) -> None:
                obj, status = node_metric(i, 400 + (i * 37) % 2000, 4 + i % 16)
                created = api.call("POST", "/apis/slo.koordinator.sh/v1alpha1/nodemetrics", obj)
                created["status"] = status
                api.request("PUT", f"/apis/slo.koordinator.sh/v1alpha1/nodemetrics/{obj['metadata']['name']}/status",
                            created)
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(metric, range(nodes)))
        if mode == FULL_PROFILE_MODE:
            api.create_all(lambda o: "/apis/topology.node.k8s.io/v1alpha1/noderesourcetopologies",
                           [topology_obj(i) for i in range(nodes)])
        api.create_all(lambda o: f"/api/v1/namespaces/{NS}/pods",
                       [pod_obj(f"init-{i}", f"node-{i % nodes:05d}", pod_resources) for i in range(init_pods)])
        names = {f"pod-{i}" for i in range(pods)}
        if mode == QUOTA_GANG_MODE:
            api.create_all(lambda o: f"/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{NS}/elasticquotas",
                           [quota_obj(i) for i in range(QUOTAS)])
            measured = [quota_gang_pod(i) for i in range(pods)]
        else:
            measured = [pod_obj(n, None, pod_resources) for n in sorted(names)]
        api.create_all(lambda o: f"/api/v1/namespaces/{NS}/pods", measured)
        rv = api.call("GET", f"/api/v1/namespaces/{NS}/pods?limit=1")["metadata"]["resourceVersion"]
        watch = BindWatch(port, rv, names)
        config = workdir / "scheduler.yaml"
        config.write_text(config_text(loadaware, mode))
        log = open(workdir / "scheduler.log", "w")
        started = time.monotonic()
        scheduler = subprocess.Popen([sys.executable, "-m", "koordinator", "--role=scheduler",
                                      "--kubeconfig", str(workdir / "data" / "kubeconfig"), "--config", str(config),
                                      "--metrics-addr", "0", "--health-addr", "0", "--log-level", "warning"],
                                     stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
        deadline = time.monotonic() + timeout
        stopped = "settled"
        while not watch.settled.wait(0.2):
            if scheduler.poll() is not None:
                stopped = f"scheduler exited with {scheduler.returncode}"
                break
            if time.monotonic() > deadline:
                stopped = f"timeout after {timeout:g}s"
                break
        cpu = {"scheduler_cpu_seconds": cpu_seconds(scheduler.pid), "apiserver_cpu_seconds": cpu_seconds(server.pid)}
        bound, unschedulable = watch.counts()
        end, first = watch.last, watch.first
        ok = bound == pods and scheduler.poll() is None
        result = {"pods": pods, "bound": bound, "unschedulable": unschedulable, "ok": ok, "stopped": stopped,
                  "seconds_from_scheduler_start": round(end - started, 2) if end else None,
                  "pods_per_second": round(bound / (end - started), 1) if end else 0.0,
                  "measured_phase_seconds": round(end - first, 2) if end else None,
                  "measured_phase_pods_per_second": round(bound / (end - first), 1) if end and end > first else None,
                  **cpu}
        if not ok:
            result["scheduler_log_tail"] = (workdir / "scheduler.log").read_text()[-2000:]
        return result
    finally:
        for proc in (scheduler, server):
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()


CASES = {"500n-1000p": (500, 500, 1000), "5000n-10000p": (5000, 1000, 10000)}
#: End to end only; compared with the plain case named here (run first when not asked for).
COMPARED_CASES, COMPARED_BASE = (QUOTA_GANG_MODE, FULL_PROFILE_MODE), "5000n-10000p"
TARGET_QUOTA_GANG_RATIO = 0.7
#: kube-scheduler v1.35's plain throughput at 5,000 nodes / 10,000 pods, measured on this machine.
TARGET_FULL_PROFILE_PODS_PER_SECOND = 285.0


def compile_bytecode() -> None:
    """Compile our packages to bytecode first, as ``pip install`` of the image's wheel does.

    Where PYTHONDONTWRITEBYTECODE is set (the image sets it, and so do some CI machines) a
    process started from an uncompiled source tree compiles every module it imports, ~0.4 s
    of the scheduler's start that a deployed scheduler does not pay.
    """
    import compileall

    for package in ("koordinator", "roles"):
        compileall.compile_dir(str(ROOT / package), quiet=1)


def compared_case(mode: str, plain: dict | None, timeout: float, repeat: int = 1) -> dict:
    """The ``mode`` workload end to end at the base case's size, with the plain case's figure beside it.

    With ``repeat`` > 1 the plain and the ``mode`` runs alternate ``repeat`` times more and the figures are
    medians: on a small shared machine one run of each varies by ±15 %. Targets: quota+gang at least
    ``TARGET_QUOTA_GANG_RATIO`` of plain; the full profile at least ``TARGET_FULL_PROFILE_PODS_PER_SECOND``
    (kube-scheduler's plain throughput at this size on this machine).
    """
    nodes, init, pods = CASES[COMPARED_BASE]

    def run(run_mode: str) -> dict:
        with tempfile.TemporaryDirectory(prefix="bench-sched-") as tmp:
            return bench_end_to_end(nodes, init, pods, False, Path(tmp), timeout=timeout, mode=run_mode)

    base_runs = [r for r in [((plain or {}).get("end_to_end"))] if r]
    runs: list[dict] = []
    for i in range(repeat):
        runs.append(run(mode))
        if i < repeat - 1 or not base_runs:
            base_runs.append(run("plain"))
    result = sorted(runs, key=lambda r: r["pods_per_second"])[len(runs) // 2]     # the median run
    base = statistics.median(r["pods_per_second"] for r in base_runs) if base_runs else None
    ratio = round(result["pods_per_second"] / base, 3) if base else None
    entry = {"nodes": nodes, "init_pods": init, "pods": pods, "end_to_end": {**result, "ok": all(r["ok"] for r in runs)},
             "runs_pods_per_second": [r["pods_per_second"] for r in runs],
             "plain_runs_pods_per_second": [r["pods_per_second"] for r in base_runs],
             "plain_pods_per_second": base, "ratio_to_plain": ratio}
    if mode == QUOTA_GANG_MODE:
        entry.update(quotas=QUOTAS, gangs=GANGS, gang_size=GANG_SIZE,
                     target={"ratio_to_plain": TARGET_QUOTA_GANG_RATIO,
                             "met": ratio is not None and ratio >= TARGET_QUOTA_GANG_RATIO})
    else:
        entry["target"] = {"pods_per_second": TARGET_FULL_PROFILE_PODS_PER_SECOND,
                           "met": result["pods_per_second"] >= TARGET_FULL_PROFILE_PODS_PER_SECOND}
    return entry


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    names = [*CASES, *COMPARED_CASES]
    parser.add_argument("--cases", default=",".join(names), help="comma separated: " + ", ".join(names))
    parser.add_argument("--skip-end-to-end", action="store_true")
    parser.add_argument("--loadaware", choices=["both", "on", "off"], default="both")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds an end-to-end case may wait for its pods to be bound")
    parser.add_argument("--repeat", type=int, default=1,
                        help="quota-gang, full-profile: alternate each with the plain case this many times, "
                             "compare medians")
    args = parser.parse_args()
    modes = {"both": [False, True], "on": [True], "off": [False]}[args.loadaware]
    out: dict = {"cpu_count": os.cpu_count(), "ok": True, "cases": {}}
    if not args.skip_end_to_end:
        compile_bytecode()
    cases = args.cases.split(",")
    for unknown in set(cases) - set(names):
        parser.error(f"--cases: unknown case {unknown!r} (known: {', '.join(names)})")
    compared = [c for c in cases if c in COMPARED_CASES]
    if compared and not args.skip_end_to_end and COMPARED_BASE not in cases:
        cases.insert(cases.index(compared[0]), COMPARED_BASE)   # the figure they are compared with
    for case in cases:
        if case in COMPARED_CASES:
            if not args.skip_end_to_end:
                out["cases"][case] = entry = compared_case(case, out["cases"].get(COMPARED_BASE), args.timeout,
                                                           args.repeat)
                out["ok"] = out["ok"] and entry["end_to_end"]["ok"] and entry["target"]["met"]
                print(json.dumps({case: entry}), file=sys.stderr)
            continue
        nodes, init, pods = CASES[case]
        for loadaware in modes:
            key = f"{case}{'-loadaware' if loadaware else ''}"
            entry = {"nodes": nodes, "init_pods": init, "pods": pods, "loadaware": loadaware,
                     "algorithm": bench_algorithm(nodes, init, pods, loadaware)}
            if not args.skip_end_to_end:
                with tempfile.TemporaryDirectory(prefix="bench-sched-") as tmp:
                    entry["end_to_end"] = bench_end_to_end(nodes, init, pods, loadaware, Path(tmp),
                                                           timeout=args.timeout)
            out["cases"][key] = entry
            out["ok"] = out["ok"] and all(m["ok"] for m in (entry["algorithm"], entry.get("end_to_end")) if m)
            print(json.dumps({key: entry}), file=sys.stderr)
    print(json.dumps(out, indent=2))
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
