"""`koordinator local`: the API server, simulated nodes and roles as supervised child processes."""

from __future__ import annotations

import io
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

import koordinator_roles as roles
from koordinator import defaults, local
from koordinator.local import ChildProcess, LocalCluster, LocalConfig, stop_children
from koordinator.runtime.client import Client
from koordinator_roles.koordlet.local import REPORT_INTERVAL
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """(pid, cmdline) of every live process whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
        if text in cmdline and state != "Z":
            found.append((int(entry), cmdline))
    return found


class LocalProcess:
    """`koordinator local` as a subprocess; its stdout lines arrive on a queue."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.data_dir = data_dir
        self.proc = subprocess.Popen([sys.executable, "-m", "koordinator", "local", "--data-dir", str(data_dir),
                                      "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=data_dir.parent)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def expect(self, needle: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {needle!r} within {timeout}s; got:\n" + "\n".join(self.lines))
            if line is None:
                raise AssertionError(f"exited ({self.proc.wait()}) before {needle!r}; got:\n" + "\n".join(self.lines)
                                     + "\nstderr:\n" + (self.proc.stderr.read() if self.proc.stderr else ""))
            self.lines.append(line)
            if needle in line:
                return line

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        while True:  # drain what is left
            line = self._queue.get(timeout=10)
            if line is None:
                break
            self.lines.append(line)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid, _ in processes_mentioning(str(self.data_dir)):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def kubectl(kubeconfig: str, cache: Path, *args: str) -> str:
    proc = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", str(cache), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_local_comes_up_kubectl_sees_the_nodes_and_ctrl_c_leaves_nothing(tmp_path):
    data = tmp_path / "kdata"
    lp = LocalProcess(data, "--nodes", "3")
    try:
        kubeconfig = lp.expect("export KUBECONFIG=").split("=", 1)[1]
        assert kubeconfig == str(data / "kubeconfig")
        lp.expect("koordinator local: up")
        out = "\n".join(lp.lines)
        assert "apiserver      ready" in out
        assert "nodes          ready                3 simulated: sim-node-0, sim-node-1, sim-node-2" in out
        assert f"simulator      ready                {data / 'nodes'}" in out
        for i in range(3):
            assert (data / "nodes" / f"sim-node-{i}" / "proc" / "stat").is_file()
            assert (data / "nodes" / f"sim-node-{i}" / "cgroup" / "kubepods.slice").is_dir()
        for role in roles.ROLE_PACKAGES:
            if not roles.is_implemented(role):
                assert any(line.startswith(role) and "not implemented yet" in line for line in lp.lines)
        assert any(line.startswith("runtime-proxy") and "not started" in line and "needs a kubelet and containerd"
                   in line for line in lp.lines), out
        if roles.is_implemented("descheduler"):  # started, unless this build lacks a plugin its config enables
            assert any(line.startswith("descheduler") and (" ready " in line or "lacks the plugin" in line)
                       for line in lp.lines), out
        assert kubectl(kubeconfig, tmp_path / "cache", "get", "nodes", "-o", "name").split() == [
            "node/sim-node-0", "node/sim-node-1", "node/sim-node-2"]
        table = kubectl(kubeconfig, tmp_path / "cache", "get", "nodes")
        assert table.count(" Ready ") == 3, table
        assert "nodeslos.slo.koordinator.sh" in kubectl(kubeconfig, tmp_path / "cache", "get", "crd", "-o", "name")
        assert "koordinator-system" in kubectl(kubeconfig, tmp_path / "cache", "get", "namespaces")
        assert processes_mentioning(str(data)), "the children should be running"
        lp.proc.send_signal(signal.SIGINT)
        assert lp.finish() == 0, "\n".join(lp.lines)
        assert any(line.startswith("apiserver") and "stopped" in line for line in lp.lines)
        assert any(line.startswith("simulator") and "stopped" in line and "exit code 0" in line for line in lp.lines)
        assert wait_until(lambda: not processes_mentioning(str(data)), 10), processes_mentioning(str(data))
        assert (data / "logs" / "apiserver.log").read_text().count("serving at") == 1

        # Same data dir again, fewer nodes: the kept nodes are the same objects, the extra one is gone.
        client = None
        lp = LocalProcess(data, "--nodes", "2")
        lp.expect("koordinator local: up")
        client = Client.from_kubeconfig(kubeconfig)
        names = sorted(n["metadata"]["name"] for n in client.list("Node")["items"])
        assert names == ["sim-node-0", "sim-node-1"]
        node = client.get("Node", "sim-node-0")
        assert node["metadata"]["labels"][local.SIMULATED_LABEL] == "true"
        assert node["status"]["allocatable"]["cpu"] == "32"
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
        client.close()
        lp.proc.send_signal(signal.SIGTERM)
        assert lp.finish() == 0
        assert wait_until(lambda: not processes_mentioning(str(data)), 10)
    finally:
        lp.kill()




# -- one running cluster, shared by the end-to-end cases below (in file order: the first one is the
# -- first thing done after `up`, the last one stops the cluster) -----------------------------------

@dataclass
class Cluster:
    lp: LocalProcess
    data: Path
    kubeconfig: str
    cache: Path
    client: Client
    started: float   # time.monotonic() just before `koordinator local` was started
    up_after: float  # seconds from that start to its `up` line

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, "--cache-dir", str(self.cache), *args],
                              input=input, capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("local")
    data = base / "kdata"
    started = time.monotonic()
    lp = LocalProcess(data, "--nodes", "2")
    client = None
    try:
        kubeconfig = lp.expect("export KUBECONFIG=").split("=", 1)[1]
        lp.expect("koordinator local: up")
        up_after = time.monotonic() - started
        client = Client.from_kubeconfig(kubeconfig)
        yield Cluster(lp, data, kubeconfig, base / "cache", client, started, up_after)
        # Every role runs as its own ServiceAccount: none may have been refused anything.
        from tests.local_cluster import forbidden_lines  # here: tests.local_cluster imports this module

        refused = forbidden_lines(data)
        assert not refused, "requests refused by RBAC:\n" + "\n".join(refused[:20])
    finally:
        if client is not None:
            client.close()
        if lp.proc.poll() is None:
            lp.proc.send_signal(signal.SIGTERM)
            lp.finish()
        lp.kill()


# Koordinator's docs' BE pod (docs/user-manuals/cpu-evict.md), as written there.
DOCS_BE_POD = """
apiVersion: v1
kind: Pod
metadata:
  name: be-pod-demo
  labels:
    koordinator.sh/qosClass: 'BE' # Specify Pod QoS level as BE
spec:
  containers:
    - args:
        - '-c'
        - '4'
        - '--vm'
        - '1'
      command:
        - stress
      image: polinux/stress
      imagePullPolicy: Always
      name: stress
      resources:
        limits:
          kubernetes.io/batch-cpu: 4k
          kubernetes.io/batch-memory: 4Gi
        requests:
          kubernetes.io/batch-cpu: 4k
          kubernetes.io/batch-memory: 4Gi
  restartPolicy: Always
  schedulerName: default-scheduler
  # priorityClassName is required when ColocationProfile feature is enabled (default)
  priorityClassName: koord-batch
"""
PLAIN_POD = """
apiVersion: v1
kind: Pod
metadata: {name: first, namespace: default}
spec:
  containers:
  - {name: main, image: nginx, resources: {requests: {cpu: 500m, memory: 256Mi}}}
"""


def bound(client: Client, name: str, namespace: str = "default") -> dict | None:
    pod = client.get("Pod", name, namespace)
    return pod if pod["spec"].get("nodeName") else None


def test_right_after_up_kubectl_create_succeeds_and_a_docs_be_pod_is_bound_within_15s(cluster):
    """What a newcomer types first: both creates pass the manager's webhooks, both pods are bound, the BE one
    (batch resources, koord-batch) within 15 s of `koordinator local` starting."""
    for manifest in (PLAIN_POD, DOCS_BE_POD):
        proc = cluster.kubectl("create", "-f", "-", input=manifest)
        assert proc.returncode == 0, proc.stderr
    be = wait_until(lambda: bound(cluster.client, "be-pod-demo"), max(0.1, cluster.started + 15 - time.monotonic()),
                    message="the BE pod bound within 15 s of the start")
    be_after = time.monotonic() - cluster.started
    print(f"\nkoordinator local: up after {cluster.up_after:.1f}s, BE pod bound after {be_after:.1f}s")
    node = cluster.client.get("Node", be["spec"]["nodeName"])
    assert int(node["status"]["allocatable"]["kubernetes.io/batch-cpu"]) >= 4000
    assert be["spec"]["priority"] == 5000 and be["metadata"]["labels"]["koordinator.sh/qosClass"] == "BE"
    first = wait_until(lambda: bound(cluster.client, "first"), message="the plain pod bound")
    assert first["spec"]["schedulerName"] == "default-scheduler"
    assert wait_until(lambda: cluster.client.get("Pod", "first", "default")["status"].get("phase") == "Running",
                      message="the simulator runs the pod")


def test_kubectl_run_without_a_scheduler_name_is_bound(cluster):
    proc = cluster.kubectl("run", "x", "--image=nginx")
    assert proc.returncode == 0, proc.stderr
    pod = wait_until(lambda: bound(cluster.client, "x"), message="pod x bound by the default-scheduler profile")
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert pod["spec"]["nodeName"].startswith(local.NODE_PREFIX)


def test_a_deployment_rolls_out_updates_and_is_deleted_with_its_pods(cluster):
    """The Quick start's Deployment: pods on simulated nodes, `kubectl rollout status` as on a cluster."""
    proc = cluster.kubectl("create", "deployment", "web", "--image=nginx", "--replicas=3")
    assert proc.returncode == 0, proc.stderr
    for update in ((), ("set", "image", "deployment/web", "nginx=nginx:1.27")):
        if update:
            proc = cluster.kubectl(*update)
            assert proc.returncode == 0, proc.stderr
        proc = cluster.kubectl("rollout", "status", "deployment/web", "--timeout=60s")
        assert proc.returncode == 0 and "successfully rolled out" in proc.stdout, proc.stdout + proc.stderr
    pods = cluster.client.list("Pod", "default", label_selector="app=web")["items"]
    assert len(pods) == 3 and all(p["status"].get("phase") == "Running" for p in pods)
    assert {p["spec"]["containers"][0]["image"] for p in pods} == {"nginx:1.27"}
    assert all(p["spec"]["nodeName"].startswith(local.NODE_PREFIX) for p in pods)
    replica_sets = cluster.client.list("ReplicaSet", "default", label_selector="app=web")["items"]
    assert sorted(rs["spec"]["replicas"] for rs in replica_sets) == [0, 3]

    proc = cluster.kubectl("delete", "deployment", "web")
    assert proc.returncode == 0, proc.stderr
    wait_until(lambda: not cluster.client.list("ReplicaSet", "default", label_selector="app=web")["items"]
               and not cluster.client.list("Pod", "default", label_selector="app=web")["items"],
               30, message="the garbage collector removes the ReplicaSets and pods of deployment web")


JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: batch4, namespace: default}
spec:
  completions: 4
  parallelism: 2
  template:
    metadata: {annotations: {sim.koordinator.sh/duration: 1s}}
    spec:
      restartPolicy: Never
      containers: [{name: main, image: busybox}]
"""


def test_a_job_completes_on_the_simulated_nodes(cluster):
    proc = cluster.kubectl("create", "-f", "-", input=JOB)
    assert proc.returncode == 0, proc.stderr
    proc = cluster.kubectl("wait", "--for=condition=complete", "job/batch4", "--timeout=60s")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    job = cluster.client.get("Job", "batch4", "default")
    assert job["status"]["succeeded"] == 4 and not job["status"].get("active")
    pods = cluster.client.list("Pod", "default", label_selector="batch.kubernetes.io/job-name=batch4")["items"]
    assert len(pods) == 4 and all(p["status"]["phase"] == "Succeeded" for p in pods)
    assert all(p["spec"]["nodeName"].startswith(local.NODE_PREFIX) for p in pods)


def test_status_lines_and_the_installed_defaults(cluster):
    lines = cluster.lp.lines
    for name in ["controllers", "manager", "scheduler", "koordlet/sim-node-0", "koordlet/sim-node-1"]:
        line = next((x for x in lines if re.match(rf"{re.escape(name)} +ready ", x)), None)
        assert line is not None, f"no ready line for {name}:\n" + "\n".join(lines)
        assert re.search(r"pid \d+, metrics http://127\.0\.0\.1:\d+, health http://127\.0\.0\.1:\d+$", line), line
    assert lines.index(next(x for x in lines if x.startswith("koordinator local: up"))) > max(
        i for i, x in enumerate(lines) if re.match(r"\S+ +ready ", x)), "up comes after every component is ready"
    # What `kubectl apply -k manifests` installs, from the package: ConfigMaps and PriorityClasses.
    for obj in defaults.objects():
        meta = obj["metadata"]
        stored = cluster.client.get(obj["kind"], meta["name"], meta.get("namespace"))
        if obj["kind"] == "ConfigMap":
            assert stored["data"] == obj["data"]
        else:
            assert stored["value"] == obj["value"]
    colocation = json.loads(cluster.client.get("ConfigMap", "slo-controller-config", local.SYSTEM_NAMESPACE)
                            ["data"]["colocation-config"])
    assert colocation["enable"] is True
    config = yaml.safe_load((cluster.data / "scheduler-config.yaml").read_text())
    assert [p["schedulerName"] for p in config["profiles"]] == ["koord-scheduler", "default-scheduler"]


def test_the_data_dir_is_locked_against_a_second_local_and_an_apiserver(cluster):
    pid = cluster.lp.proc.pid
    for argv in (["local", "--port", "0"], ["apiserver", "--port", "0"]):
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "koordinator", *argv, "--data-dir", str(cluster.data)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1, (argv, proc.stdout, proc.stderr)
        assert f"data dir {cluster.data} is in use by pid {pid}" in proc.stdout + proc.stderr, (argv, proc.stdout,
                                                                                                 proc.stderr)
        assert time.monotonic() - started < 30
    assert cluster.lp.proc.poll() is None
    assert cluster.client.get("Node", "sim-node-0")


PROFILE = """
apiVersion: config.koordinator.sh/v1alpha1
kind: ClusterColocationProfile
metadata: {name: colocation-profile-example}
spec:
  namespaceSelector: {matchLabels: {koordinator.sh/enable-colocation: "true"}}
  selector: {matchLabels: {koordinator.sh/enable-colocation: "true"}}
  qosClass: BE
  priorityClassName: koord-batch
  koordinatorPriority: 1000
"""
POD = """
apiVersion: v1
kind: Pod
metadata: {name: batch, namespace: colo, labels: {koordinator.sh/enable-colocation: "true"}}
spec:
  containers:
  - {name: main, image: nginx, resources: {requests: {cpu: 500m, memory: 1Gi}}}
"""


def test_local_runs_the_manager_and_a_profile_mutates_a_kubectl_pod(cluster):
    """The README's walk-through: NodeSLO per node, and a ClusterColocationProfile applied by kubectl."""
    client = cluster.client
    wait_until(lambda: len(client.list("NodeSLO")["items"]) == 2, message="a NodeSLO per simulated node")
    for args in (("create", "namespace", "colo"), ("label", "namespace", "colo", "koordinator.sh/enable-colocation=true")):
        proc = cluster.kubectl(*args)
        assert proc.returncode == 0, proc.stderr
    proc = cluster.kubectl("apply", "-f", "-", input=PROFILE)
    assert proc.returncode == 0, proc.stderr

    def mutated() -> dict | None:
        # The manager's caches may lag the profile by a moment: retry the create until it shows.
        try:
            client.delete("Pod", "batch", "colo")
        except Exception:
            pass
        proc = cluster.kubectl("apply", "-f", "-", input=POD)
        assert proc.returncode == 0, proc.stderr
        pod = client.get("Pod", "batch", "colo")
        return pod if pod["metadata"]["labels"].get("koordinator.sh/qosClass") == "BE" else None

    pod = wait_until(mutated, message="the profile mutates the pod")
    assert pod["spec"]["priorityClassName"] == "koord-batch" and pod["spec"]["priority"] == 5000
    assert pod["spec"]["containers"][0]["resources"]["requests"]["kubernetes.io/batch-cpu"] == "500"


def test_sighup_stops_everything_and_a_restart_keeps_what_the_user_changed(cluster):
    """The last shared case: closing the terminal stops the tree (exit 0, no child left); a restart on the
    same data dir creates only the defaults that are missing."""
    client = cluster.client
    cm = client.get("ConfigMap", "slo-controller-config", local.SYSTEM_NAMESPACE)
    edited = cm["data"]["colocation-config"].replace('"cpuReclaimThresholdPercent": 60', '"cpuReclaimThresholdPercent": 55')
    assert edited != cm["data"]["colocation-config"]
    cm["data"]["colocation-config"] = edited
    client.update(cm)
    client.delete("PriorityClass", "koord-free")
    assert processes_mentioning(str(cluster.data))
    cluster.lp.proc.send_signal(signal.SIGHUP)
    assert cluster.lp.finish() == 0, "\n".join(cluster.lp.lines)
    assert wait_until(lambda: not processes_mentioning(str(cluster.data)), 10), processes_mentioning(str(cluster.data))

    # Again, read by hand this time so that the terminal can go away under it.
    proc = subprocess.Popen([sys.executable, "-m", "koordinator", "local", "--data-dir", str(cluster.data), "--port",
                             "0", "--nodes", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = []
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if line.startswith("koordinator local: up"):
                break
        assert lines and lines[-1].startswith("koordinator local: up"), lines
        assert any(x.startswith("defaults ") and f"(1 created, {len(defaults.objects()) - 1} kept as they were)" in x for x in lines), lines
        restarted = Client.from_kubeconfig(cluster.kubeconfig)
        try:
            kept = restarted.get("ConfigMap", "slo-controller-config", local.SYSTEM_NAMESPACE)
            assert kept["data"]["colocation-config"] == edited
            assert restarted.get("PriorityClass", "koord-free")["value"] == 3000
        finally:
            restarted.close()
        proc.stdout.close()  # the terminal is gone: every later status line fails to print
        proc.send_signal(signal.SIGHUP)
        assert proc.wait(60) == 0, proc.stderr.read() if proc.stderr else ""
        assert wait_until(lambda: not processes_mentioning(str(cluster.data)), 10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid, _ in processes_mentioning(str(cluster.data)):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


# -- units ---------------------------------------------------------------------------------------------

def test_local_defaults_are_the_manifests():
    """The package ships, byte for byte, the ConfigMaps and PriorityClasses that `kubectl apply -k manifests`
    installs (manifests/kustomization.yaml's config/*.yaml and priorityclasses.yaml), so that an installed
    `koordinator local` installs the same defaults."""
    manifests = REPO / "manifests"
    resources = yaml.safe_load((manifests / "kustomization.yaml").read_text())["resources"]
    installed = [r for r in resources if r.startswith(f"{defaults.CONFIG_DIR}/") or r == defaults.PRIORITY_CLASSES]
    assert "config/slo-controller-config.yaml" in installed and "priorityclasses.yaml" in installed
    shipped = defaults.files()
    assert sorted(shipped) == sorted(installed)
    for path in installed:
        assert shipped[path] == (manifests / path).read_text(), \
            f"koordinator/defaults/{path} differs from manifests/{path}: copy one onto the other"


def test_the_scheduler_config_serves_both_names_with_the_default_plugins():
    from koordinator_roles.scheduler import config as cfg
    from koordinator_roles.scheduler.local import scheduler_config
    from koordinator_roles.scheduler.plugins import NOT_IMPLEMENTED, in_tree_registry

    kwargs = dict(registry_names=set(in_tree_registry().names()), not_implemented=NOT_IMPLEMENTED)
    parsed = cfg.parse(scheduler_config(), **kwargs)
    default = cfg.default_configuration(**kwargs).profiles[0]
    assert [p.scheduler_name for p in parsed.profiles] == ["koord-scheduler", "default-scheduler"]
    assert parsed.leader_election["leaderElect"] is False
    for profile in parsed.profiles:
        for point in cfg.POINTS:
            assert profile.plugins_at(point, cfg.known_implements) == default.plugins_at(point, cfg.known_implements)
        assert "LoadAwareScheduling" in [p.name for p in profile.plugins_at("filter", cfg.known_implements)]


def test_data_dir_lock(tmp_path):
    from koordinator.apiserver.server import DataDirInUse, DataDirLock

    # A lock file left by a process that is gone blocks nothing: only a live flock does.
    (tmp_path / "lock").write_text("999999999\n")
    held = DataDirLock(str(tmp_path)).acquire()
    try:
        with pytest.raises(DataDirInUse, match=f"data dir {tmp_path} is in use by pid {os.getpid()}"):
            DataDirLock(str(tmp_path)).acquire()
        # The holder's own descriptor, handed down as local hands it to its API server, is accepted.
        assert held.fd is not None
        inherited = DataDirLock(str(tmp_path)).acquire(os.dup(held.fd))
        inherited.release()
        # A descriptor of another file is not taken for the lock.
        with open(tmp_path / "other", "w") as other, pytest.raises(DataDirInUse):
            DataDirLock(str(tmp_path)).acquire(other.fileno())
    finally:
        held.release()
    DataDirLock(str(tmp_path)).acquire().release()


def test_status_board_survives_a_lost_terminal_and_throttles_details():
    out = io.StringIO()
    board = local.StatusBoard(out, detail_interval=3600)
    board.set("manager", "not ready", "waiting for caches: a, b")
    board.set("manager", "not ready", "waiting for caches: b")  # same state, new detail: not yet
    board.set("manager", "ready", "pid 1")
    assert out.getvalue().splitlines() == ["manager        not ready            waiting for caches: a, b",
                                           "manager        ready                pid 1"]
    out.close()
    board.say("koordinator local: stopping")  # a closed output must not raise into the shutdown
    board.set("manager", "stopped", "exit code 0")


def test_long_not_ready_details_are_cut_at_a_list_separator():
    caches = ", ".join(f"kind{i}.example.io" for i in range(60))
    short = local.shorten(f"informer-sync failed: waiting for caches: {caches}")
    assert len(short) < 140 and short.startswith("informer-sync failed: waiting for caches: kind0.example.io, ")
    assert short.endswith(" more)")
    shown = short.split(": ", 2)[2].split(", … ")[0].split(", ")
    assert short.endswith(f"({60 - len(shown)} more)")
    assert local.shorten("informer-sync failed: nodes") == "informer-sync failed: nodes"


def test_local_exits_1_when_the_apiserver_dies(tmp_path):
    data = tmp_path / "kdata"
    lp = LocalProcess(data, "--nodes", "1")
    try:
        ready = lp.expect("apiserver      ready")
        pid = int(ready.rsplit("(pid ", 1)[1].rstrip(")"))
        lp.expect("koordinator local: up")
        os.kill(pid, signal.SIGKILL)
        assert lp.finish() == 1
        assert any(line.startswith("apiserver") and "exited (code -9)" in line for line in lp.lines), lp.lines
        assert wait_until(lambda: not processes_mentioning(str(data)), 10)
    finally:
        lp.kill()


def test_local_reports_an_apiserver_that_cannot_start(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "koordinator", "local", "--data-dir", str(tmp_path / "d"),
                               "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    last = [line for line in proc.stdout.splitlines() if line.startswith("apiserver")][-1]
    assert "exited (code 1)" in last and f"cannot listen on 127.0.0.1:{port}" in last
    assert not processes_mentioning(str(tmp_path / "d"))


def test_local_flags():
    for argv, needle in ((["--nodes", "-1"], "--nodes"), (["--port", "70000"], "--port"),
                         (["--shutdown-timeout", "soon"], "--shutdown-timeout"),
                         (["--ready-timeout", "soon"], "--ready-timeout")):
        proc = subprocess.run([sys.executable, "-m", "koordinator", "local", *argv], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr


# -- supervision, with stand-in children ----------------------------------------------------------------

def python_child(tmp_path: Path, name: str, code: str, **kwargs) -> ChildProcess:
    return ChildProcess(name, [sys.executable, "-c", textwrap.dedent(code)], tmp_path / "logs" / f"{name}.log",
                        **kwargs)


def test_child_output_goes_to_its_log_and_sigterm_stops_it(tmp_path):
    lines: list[str] = []
    child = python_child(tmp_path, "talker", """
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))
        print("hello from the child", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
        while True:
            time.sleep(1)
    """, on_line=lines.append)
    child.start()
    assert wait_until(lambda: "to stderr" in lines and "hello from the child" in lines, 30), lines
    assert child.poll() is None
    assert stop_children([child], 30) == {"talker": 3}
    log_text = (tmp_path / "logs" / "talker.log").read_text()
    assert "hello from the child" in log_text and "to stderr" in log_text
    assert child.last_line in ("hello from the child", "to stderr")


def test_a_child_ignoring_sigterm_is_killed_with_its_group(tmp_path):
    marker = f"grandchild-{os.getpid()}-{time.monotonic_ns()}"
    child = python_child(tmp_path, "stubborn", f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(600)", "{marker}"])
        print("ready", flush=True)
        while True:
            time.sleep(1)
    """)
    ready = threading.Event()
    child.on_line = lambda line: ready.set() if line == "ready" else None
    child.start()
    assert ready.wait(30)
    assert wait_until(lambda: processes_mentioning(marker), 10)
    codes = stop_children([child], 0.5)
    assert codes == {"stubborn": -signal.SIGKILL}
    assert wait_until(lambda: not processes_mentioning(marker), 10), "the grandchild survived"


def test_hurry_cuts_the_grace_period(tmp_path):
    child = python_child(tmp_path, "slow", """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(600)
    """)
    ready = threading.Event()
    child.on_line = lambda line: ready.set() if line == "ready" else None
    child.start()
    assert ready.wait(30)
    hurry = threading.Event()
    hurry.set()
    started = time.monotonic()
    assert stop_children([child], 60, hurry) == {"slow": -signal.SIGKILL}
    assert time.monotonic() - started < 30


PROBED_ROLE = """
    import os, signal, sys, threading
    from koordinator.runtime.servers import ProbeServer
    state = sys.argv[2]
    def ready():
        text = open(state).read().strip() if os.path.exists(state) else "starting"
        return None if text == "ok" else text
    server = ProbeServer(sys.argv[1], health_checks={}, ready_checks={"work": ready})
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    while not stop.wait(0.05):
        if os.path.exists(state) and open(state).read().strip() == "die":
            print("fatal: told to die", flush=True)
            sys.exit(4)
    server.stop(5)
"""


def test_role_status_lines_follow_the_child(tmp_path):
    """starting -> ready -> not ready (with the failing check) -> exited (code, last line); one line per change."""
    out = io.StringIO()
    cluster = LocalCluster(LocalConfig(data_dir=tmp_path, out=out))
    health = f"127.0.0.1:{local.free_port()}"
    state = tmp_path / "state"
    child = ChildProcess("manager", [sys.executable, "-c", textwrap.dedent(PROBED_ROLE), health, str(state)],
                         tmp_path / "logs" / "manager.log")
    child.start()
    role = local._Role("manager", child, health)
    try:
        def last_state():
            cluster._check_role(role)
            return out.getvalue().splitlines()[-1] if out.getvalue() else ""

        assert wait_until(lambda: "not ready" in last_state() and "work failed: starting" in last_state(), 30), \
            out.getvalue()
        state.write_text("ok")
        assert wait_until(lambda: " ready " in last_state(), 30), out.getvalue()
        state.write_text("disk full")
        assert wait_until(lambda: "work failed: disk full" in last_state(), 30), out.getvalue()
        lines_before = len(out.getvalue().splitlines())
        cluster._check_role(role)
        cluster._check_role(role)
        assert len(out.getvalue().splitlines()) == lines_before, "unchanged state must not print again"
        state.write_text("die")
        assert wait_until(lambda: "exited (code 4)" in last_state(), 30), out.getvalue()
        assert "fatal: told to die" in last_state() and "manager.log" in last_state()
        assert role.exited
    finally:
        if child.poll() is None:
            stop_children([child], 10)


def test_local_runs_an_implemented_role_and_stops_it_before_the_apiserver(tmp_path, monkeypatch):
    """With a role package present, `local` starts it, sees it ready, and stops it first."""
    pytest.importorskip("koordinator.runtime.runtime")
    fake = tmp_path / "fake_roles" / "scheduler"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(textwrap.dedent("""
        def register(runtime, options):
            runtime.add_runnable("idle", lambda stop: stop.wait())
    """))
    monkeypatch.setattr(roles, "__path__", [*roles.__path__, str(tmp_path / "fake_roles")])
    wrapper = ("import sys, roles; roles.__path__.append(sys.argv.pop(1)); "
               "from koordinator.cli import main; sys.exit(main(sys.argv[1:]))")
    out = io.StringIO()
    data = tmp_path / "kdata"
    missing = next((r for r in roles.ROLE_PACKAGES if not roles.is_implemented(r)), None)
    config = LocalConfig(data_dir=data, nodes=1, port=0, roles=["scheduler", *([missing] if missing else [])], out=out,
                         shutdown_timeout=20, poll_interval=0.1, controllers=False,
                         command=[sys.executable, "-c", wrapper, str(tmp_path / "fake_roles")])
    cluster = LocalCluster(config)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(cluster.run()), daemon=True)
    runner.start()
    try:
        assert wait_until(lambda: any(line.startswith("scheduler") and " ready " in line
                                      for line in out.getvalue().splitlines()), 90), out.getvalue()
        if missing:
            assert f"{missing:<14} not implemented yet" in out.getvalue()
        cmd = next(cmd for _, cmd in processes_mentioning(str(data)) if "--role=scheduler" in cmd)
        assert f"--kubeconfig {data / 'kubeconfig'}" in cmd and "--metrics-addr 127.0.0.1:" in cmd
        assert f"--config {data / 'scheduler-config.yaml'}" in cmd
        assert wait_until(lambda: "koordinator local: up" in out.getvalue(), 30), out.getvalue()
    finally:
        cluster.request_stop()
        runner.join(60)
    assert result == [0], out.getvalue()
    lines = out.getvalue().splitlines()
    stopped = [line.split()[0] for line in lines if "stopped" in line]
    assert stopped == ["scheduler", "simulator", "apiserver"], lines
    assert "exit code 0" in next(line for line in lines if line.startswith("scheduler") and "stopped" in line)
    assert wait_until(lambda: not processes_mentioning(str(data)), 10)


FAKE_KOORDLET = """
    import os
    from dataclasses import dataclass

    @dataclass
    class Options:
        proc_root: str
        sys_root: str
        cgroup_root: str
        run_dir: str
        report_interval: str

    def add_flags(parser):
        for flag in ("--proc-root", "--sys-root", "--cgroup-root", "--run-dir", "--report-interval"):
            parser.add_argument(flag, required=True)

    def register(runtime, options):
        # The simulator's tree exists before any koordlet starts.
        own = options.role_options
        stat = os.path.join(own.proc_root, "stat")
        assert os.path.isfile(stat), stat
        assert os.path.isdir(os.path.join(own.cgroup_root, "cpuacct", "kubepods")), own
        assert os.path.isdir(os.path.join(own.sys_root, "devices", "system", "cpu"))
        runtime.add_runnable("idle", lambda stop: stop.wait())
"""


def test_local_runs_one_koordlet_per_simulated_node_over_its_tree(tmp_path):
    """The simulator starts before the roles; each koordlet gets its node's tree and run directory, and a
    status line of its own; the pods of a simulated node become Running."""
    pytest.importorskip("koordinator.runtime.runtime")
    fake = tmp_path / "fake_roles" / "koordlet"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(textwrap.dedent(FAKE_KOORDLET))
    # In the children, ahead of the real package: this test is about local's wiring only (local itself
    # asks the real package's local_setup which flags each koordlet gets).
    wrapper = ("import sys, roles; roles.__path__.insert(0, sys.argv.pop(1)); "
               "from koordinator.cli import main; sys.exit(main(sys.argv[1:]))")
    out = io.StringIO()
    data = tmp_path / "kdata"
    config = LocalConfig(data_dir=data, nodes=2, port=0, roles=["koordlet"], out=out, shutdown_timeout=20,
                         poll_interval=0.1, command=[sys.executable, "-c", wrapper, str(tmp_path / "fake_roles")],
                         cgroup_version=1, cgroup_driver="cgroupfs", controllers=False)
    cluster = LocalCluster(config)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(cluster.run()), daemon=True)
    runner.start()
    try:
        def ready(name: str) -> bool:
            lines = out.getvalue().splitlines()
            assert not any(line.startswith(name + " ") and "exited" in line for line in lines), out.getvalue()
            return any(line.startswith(name + " ") and " ready " in line for line in lines)

        assert wait_until(lambda: ready("koordlet/sim-node-0") and ready("koordlet/sim-node-1"), 90), out.getvalue()
        lines = out.getvalue().splitlines()
        assert [line.split()[0] for line in lines if " ready " in line or "starting" in line].index("simulator") < \
            [line.split()[0] for line in lines].index("koordlet/sim-node-0")
        for node in ("sim-node-0", "sim-node-1"):
            cmd = next(cmd for _, cmd in processes_mentioning(str(data)) if f"--node-name {node}" in cmd)
            tree = data / "nodes" / node
            assert "--role=koordlet" in cmd
            assert (f"--proc-root {tree / 'proc'} --sys-root {tree / 'sys'} --cgroup-root {tree / 'cgroup'} "
                    f"--run-dir {data / 'koordlet' / node} --report-interval {REPORT_INTERVAL}") in cmd
            assert (data / "logs" / f"koordlet-{node}.log").is_file()
            assert (tree / "cgroup" / "cpuacct" / "kubepods").is_dir()  # v1, cgroupfs as asked
        sim = next(cmd for _, cmd in processes_mentioning(str(data)) if "simulate-nodes" in cmd)
        assert "--nodes sim-node-0,sim-node-1" in sim and "--cgroup-version 1 --cgroup-driver cgroupfs" in sim

        client = Client.from_kubeconfig(str(data / "kubeconfig"))
        try:
            client.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                           "spec": {"nodeName": "sim-node-1", "containers": [{"name": "c", "image": "nginx"}]}})
            pod = wait_until(lambda: (p := client.get("Pod", "p", "default"))["status"].get("phase") == "Running"
                             and p, 30, message="the simulator runs the pod")
            assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
        finally:
            client.close()
    finally:
        cluster.request_stop()
        runner.join(60)
    assert result == [0], out.getvalue()
    stopped = [line.split()[0] for line in out.getvalue().splitlines() if "stopped" in line]
    assert stopped[-2:] == ["simulator", "apiserver"] and sorted(stopped[:-2]) == [
        "koordlet/sim-node-0", "koordlet/sim-node-1"], out.getvalue()
    assert wait_until(lambda: not processes_mentioning(str(data)), 10)
