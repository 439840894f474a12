"""koord-descheduler end to end on ``koordinator local`` (two simulated nodes), driven with kubectl as a user would:
LowNodeLoad enabled by editing the cluster's koord-descheduler-config ConfigMap (taken at the next start), one
node made hot by pods with high simulated CPU, the other cold; dry run first (local's own descheduler), then the
real thing by two descheduler processes electing a leader, the leader killed mid-migration: PodMigrationJobs move
the BE workload's pods through Reservations to the cold node, one at a time (a PDB), until the hot one is below its
high threshold, with one Reservation and one eviction per job."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from koordinator.apis import quantity
from koordinator.local import free_port
from koordinator.runtime.errors import NotFound
from tests.local_cluster import Cluster, running_cluster
from tests.test_local import processes_mentioning
from tests.waiting import wait_until

HOT, COLD, NS = "sim-node-0", "sim-node-1", "demo"
CONFIGMAP = "koord-descheduler-config"
HIGH_CPU = 45          # the test's LowNodeLoad thresholds (percent of the node's 32 CPUs)
WAIT = 180


def enable_low_node_load(document: dict) -> dict:
    """The shipped configuration with LowNodeLoad on, the test's thresholds, one abnormal round enough, and
    dry run on. The workload's object limiter keeps its 2 migrations per 5 minutes but with a burst of 2: with the
    default burst of 1 a second migration waits 150 s for its token."""
    profile = document["profiles"][0]
    profile["plugins"]["balance"] = {"enabled": [{"name": "LowNodeLoad"}]}
    for entry in profile["pluginConfig"]:
        if entry["name"] == "LowNodeLoad":
            entry["args"].update(lowThresholds={"cpu": 15, "memory": 55}, highThresholds={"cpu": HIGH_CPU, "memory": 80},
                                 anomalyCondition={"consecutiveAbnormalities": 1})
        if entry["name"] == "MigrationController":
            entry.setdefault("args", {})["objectLimiters"] = {"workload": {"duration": "5m", "burst": 2}}
    document["dryRun"] = True
    return document


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("local-descheduling")
    with running_cluster(base, "--nodes", "2") as first:
        cm = first.client.get("ConfigMap", CONFIGMAP, "koordinator-system")
        document = enable_low_node_load(yaml.safe_load(cm["data"][CONFIGMAP]))
        first.client.patch("ConfigMap", CONFIGMAP, {"data": {CONFIGMAP: yaml.safe_dump(document)}},
                           namespace="koordinator-system", patch_type="merge")
        first.lp.proc.send_signal(signal.SIGTERM)
        assert first.lp.finish() == 0
    with running_cluster(base, "--nodes", "2") as c:      # the edit is taken at the next start
        yield c


def descheduler_log(cluster: Cluster) -> str:
    return (cluster.lp.data_dir / "logs" / "descheduler.log").read_text()


def jobs(cluster: Cluster) -> list[dict]:
    return cluster.client.list("PodMigrationJob").get("items") or []


def node_cpu_percent(cluster: Cluster, node: str) -> float:
    usage = ((cluster.client.get("NodeMetric", node).get("status") or {}).get("nodeMetric") or {}).get("nodeUsage")
    cpu = ((usage or {}).get("resources") or {}).get("cpu")
    return 100.0 if cpu is None else quantity.milli_value(cpu) / 320.0        # of 32 CPUs


def pods_of(cluster: Cluster, app: str) -> list[dict]:
    return [p for p in cluster.client.list("Pod", NS, label_selector=f"app={app}").get("items", [])
            if not p["metadata"].get("deletionTimestamp")]


def _print_state(cluster: Cluster) -> None:
    """What the scenario saw, for a failure's report: usage, where the BE pods are, the jobs, the descheduler's log."""
    print("state:", node_cpu_percent(cluster, HOT), node_cpu_percent(cluster, COLD),
          [(p["metadata"]["name"], p["spec"].get("nodeName")) for p in pods_of(cluster, "be")],
          [(j["spec"]["podRef"]["name"], (j.get("status") or {}).get("phase"), (j.get("status") or {}).get("message"))
           for j in jobs(cluster)], descheduler_log(cluster)[-3000:], file=sys.stderr)


def test_dry_run_then_low_node_load_moves_be_pods_to_the_cold_node(cluster):
    try:
        _scenario(cluster)
    except AssertionError:
        _print_state(cluster)
        raise


def _scenario(cluster: Cluster) -> None:
    cluster.kubectl("cordon", COLD)
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}}))
    # Latency-sensitive pods pinned to the hot node: bare pods, which the MigrationController never moves.
    for i in range(2):
        cluster.apply(json.dumps({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"ls-{i}", "namespace": NS, "labels": {"app": "ls"},
                         "annotations": {"sim.koordinator.sh/cpu": "2"}},
            "spec": {"nodeName": HOT, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "main", "image": "busybox",
                                     "resources": {"requests": {"cpu": "1", "memory": "256Mi"}}}]}}))
    # A BE Deployment, placed on the hot node while the cold one is cordoned; a PDB lets one pod go at a time.
    cluster.apply(json.dumps({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "be", "namespace": NS},
        "spec": {"replicas": 4, "selector": {"matchLabels": {"app": "be"}},
                 "template": {"metadata": {"labels": {"app": "be", "koordinator.sh/qosClass": "BE"},
                                           "annotations": {"sim.koordinator.sh/cpu": "3"}},
                              "spec": {"schedulerName": "koord-scheduler", "priorityClassName": "koord-batch",
                                       "terminationGracePeriodSeconds": 0,
                                       "containers": [{"name": "main", "image": "busybox", "resources": {
                                           "requests": {"kubernetes.io/batch-cpu": "1000",
                                                        "kubernetes.io/batch-memory": "512Mi"},
                                           "limits": {"kubernetes.io/batch-cpu": "3000",
                                                      "kubernetes.io/batch-memory": "512Mi"}}}]}}}}))
    cluster.apply(json.dumps({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                              "metadata": {"name": "be", "namespace": NS},
                              "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "be"}}}}))
    wait_until(lambda: len([p for p in pods_of(cluster, "be") if (p.get("spec") or {}).get("nodeName") == HOT]) == 4,
               WAIT, "the BE pods on the hot node")
    proc = cluster.kubectl("uncordon", COLD)
    assert proc.returncode == 0, proc.stderr
    wait_until(lambda: node_cpu_percent(cluster, HOT) > HIGH_CPU, WAIT, "the hot node above its high threshold")

    # Dry run: the descheduler says what it would evict, and nothing happens.
    wait_until(lambda: f"dry run: would evict pod={NS}/" in descheduler_log(cluster), WAIT, "a dry-run eviction")
    assert jobs(cluster) == []
    assert all(p["spec"]["nodeName"] == HOT for p in pods_of(cluster, "be"))

    # The real thing, by a pair of descheduler processes electing a leader on the koord-descheduler Lease (local's
    # own, which elects none, is killed first). The leader is killed mid-migration; the other one takes over and
    # finishes the jobs without a second Reservation or eviction. BE pods move to the cold node through
    # PodMigrationJobs and Reservations until the hot node is below its high threshold, one at a time (the PDB).
    kill_local_descheduler(cluster)
    ready_floor = ReadyFloor(cluster, "be")
    with elected_deschedulers(cluster) as pair:
        running = wait_until(lambda: [j for j in jobs(cluster) if (j.get("status") or {}).get("phase") == "Running"],
                             WAIT, "a PodMigrationJob Running")
        leader = pair.kill_leader()
        wait_until(lambda: any((j.get("status") or {}).get("phase") == "Succeeded" for j in jobs(cluster)), WAIT,
                   "a PodMigrationJob Succeeded")
        wait_until(lambda: node_cpu_percent(cluster, HOT) < HIGH_CPU, WAIT, "the hot node below its high threshold")
        wait_until(lambda: all((j.get("status") or {}).get("phase") == "Succeeded" for j in jobs(cluster)), WAIT,
                   "every PodMigrationJob Succeeded")
        assert "lease acquired" in pair.log(pair.other(leader)), pair.log(pair.other(leader))[-2000:]
    assert ready_floor.stop() >= 3, "more than one BE pod unavailable at once despite the PDB (maxUnavailable 1)"
    moved = [p for p in pods_of(cluster, "be") if p["spec"].get("nodeName") == COLD]
    assert moved, "no BE pod on the cold node"
    done = jobs(cluster)
    assert running[0]["metadata"]["uid"] in {j["metadata"]["uid"] for j in done}   # the interrupted job finished
    for job in done:
        assert job["spec"]["podRef"]["name"].startswith("be-"), job["spec"]["podRef"]  # the bare LS pods stay
        assert job["status"]["nodeName"] == COLD
    pods = [j["spec"]["podRef"]["name"] for j in done]
    assert len(pods) == len(set(pods)), pods                                      # one job per pod
    # One Reservation per job (named after its UID), and no more BE pods than replicas.
    reserved = [r["metadata"]["name"] for r in cluster.client.list("Reservation").get("items", [])]
    assert sorted(reserved) == sorted(j["metadata"]["uid"] for j in done), (reserved, done)
    assert len(pods_of(cluster, "be")) == 4
    # The workload limit: of 4 replicas, at most 2 migrations per 5 minutes (MigrationController's defaults).
    assert len([n for n in pods if n.startswith("be-")]) <= 2, pods
    assert all(cluster.node_of(f"ls-{i}", NS) == HOT for i in range(2))
    proc = cluster.kubectl("get", "pmj")
    assert proc.returncode == 0 and "Succeeded" in proc.stdout, proc.stdout + proc.stderr


def kill_local_descheduler(cluster: Cluster) -> None:
    """SIGKILL ``local``'s descheduler process (``local`` reports it exited and keeps the rest running)."""
    found = [pid for pid, cmdline in processes_mentioning("--role=descheduler")
             if str(cluster.lp.data_dir) in cmdline]
    assert len(found) == 1, found
    os.kill(found[0], signal.SIGKILL)
    wait_until(lambda: not processes_mentioning(f"{cluster.lp.data_dir / 'descheduler-config.yaml'}"), 30,
               "local's descheduler gone")


class ReadyFloor:
    """The fewest Ready, non-terminating pods of ``app`` seen while it runs (sampled through the API)."""

    def __init__(self, cluster: Cluster, app: str) -> None:
        self.lowest = len(self._ready(cluster, app))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(cluster, app), daemon=True)
        self._thread.start()

    @staticmethod
    def _ready(cluster: Cluster, app: str) -> list[dict]:
        return [p for p in pods_of(cluster, app)
                if any(c.get("type") == "Ready" and c.get("status") == "True"
                       for c in (p.get("status") or {}).get("conditions") or ())]

    def _sample(self, cluster: Cluster, app: str) -> None:
        while not self._stop.wait(0.05):
            self.lowest = min(self.lowest, len(self._ready(cluster, app)))

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(10)
        return self.lowest


class DeschedulerPair:
    """Two ``koordinator --role=descheduler`` processes against ``local``'s API server, on one --config."""

    def __init__(self, cluster: Cluster, config: Path) -> None:
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}
        for name in ("a", "b"):
            self.logs[name] = _unused(config.with_name(f"descheduler-{name}.log"))
            with open(self.logs[name], "wb") as log:
                self.procs[name] = subprocess.Popen(
                    [sys.executable, "-m", "koordinator", "--role=descheduler", "--kubeconfig", cluster.kubeconfig,
                     "--config", str(config), "--metrics-addr", f"127.0.0.1:{free_port()}",
                     "--health-addr", f"127.0.0.1:{free_port()}", "--log-level", "info"],
                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)

    def log(self, name: str) -> str:
        return self.logs[name].read_text(errors="replace")

    def other(self, name: str) -> str:
        return "b" if name == "a" else "a"

    def kill_leader(self) -> str:
        """SIGKILL the one holding the Lease (its log says so); its name."""
        (leader,) = wait_until(lambda: [n for n in self.procs if "lease acquired" in self.log(n)], 30,
                               "a descheduler leading")
        self.procs[leader].kill()
        self.procs[leader].wait(10)
        return leader

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)


def _unused(path: Path) -> Path:
    """``path``, or ``path`` with a number added when it exists (each pair of a module keeps its own logs)."""
    n = 1
    while path.exists():
        path = path.with_name(f"{path.stem.rsplit('.', 1)[0]}.{n}{path.suffix}")
        n += 1
    return path


@contextmanager
def elected_deschedulers(cluster: Cluster) -> Iterator[DeschedulerPair]:
    """:class:`DeschedulerPair` on ``local``'s descheduler configuration with dry run off and leader election on
    (short lease: the survivor takes over within seconds of the leader's death); always stopped."""
    document = yaml.safe_load((cluster.lp.data_dir / "descheduler-config.yaml").read_text())
    document["dryRun"] = False
    document["leaderElection"] = {**document["leaderElection"], "leaderElect": True, "leaseDuration": "4s",
                                  "renewDeadline": "3s", "retryPeriod": "1s"}
    config = cluster.lp.data_dir / "elected-descheduler.yaml"
    config.write_text(yaml.safe_dump(document))
    pair = DeschedulerPair(cluster, config)
    try:
        yield pair
    finally:
        pair.stop()


def test_a_job_for_a_missing_pod_fails_naming_it(cluster):
    cluster.apply(json.dumps({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "PodMigrationJob",
                              "metadata": {"name": "ghost-job"},
                              "spec": {"podRef": {"namespace": NS, "name": "ghost"}, "mode": "EvictDirectly"}}))

    def failed() -> str:
        try:
            status = cluster.client.get("PodMigrationJob", "ghost-job").get("status") or {}
        except NotFound:
            return ""
        return status.get("message", "") if status.get("phase") == "Failed" else ""

    with elected_deschedulers(cluster):  # local's own descheduler was killed by the scenario
        message = wait_until(failed, WAIT, "the job Failed")
    assert "ghost" in message and "spec.podRef" in message, message
