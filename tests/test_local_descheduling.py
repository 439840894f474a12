"""koord-descheduler end to end on ``koordinator local`` (two simulated nodes), driven with kubectl as a user would:
LowNodeLoad enabled by editing the cluster's koord-descheduler-config ConfigMap (taken at the next start), one
node made hot by pods with high simulated CPU, the other cold; dry run first, then the real thing: PodMigrationJobs
move the BE workload's pods through Reservations to the cold node until the hot one is below its high threshold."""

from __future__ import annotations

import json
import signal
import sys
from collections.abc import Iterator

import pytest
import yaml

from koordinator.apis import quantity
from koordinator.runtime.errors import NotFound
from tests.local_cluster import Cluster, running_cluster
from tests.waiting import wait_until

HOT, COLD, NS = "sim-node-0", "sim-node-1", "demo"
CONFIGMAP = "koord-descheduler-config"
HIGH_CPU = 45          # the test's LowNodeLoad thresholds (percent of the node's 32 CPUs)
WAIT = 180


def enable_low_node_load(document: dict) -> dict:
    """The shipped configuration with LowNodeLoad on, the test's thresholds, one abnormal round enough, and
    dry run on."""
    profile = document["profiles"][0]
    profile["plugins"]["balance"] = {"enabled": [{"name": "LowNodeLoad"}]}
    for entry in profile["pluginConfig"]:
        if entry["name"] == "LowNodeLoad":
            entry["args"].update(lowThresholds={"cpu": 15, "memory": 55}, highThresholds={"cpu": HIGH_CPU, "memory": 80},
                                 anomalyCondition={"consecutiveAbnormalities": 1})
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

    # The real thing (dryRun is reloaded while running): BE pods move to the cold node through
    # PodMigrationJobs and Reservations until the hot node is below its high threshold.
    path = cluster.lp.data_dir / "descheduler-config.yaml"
    document = yaml.safe_load(path.read_text())
    document["dryRun"] = False
    path.write_text(yaml.safe_dump(document))
    wait_until(lambda: any((j.get("status") or {}).get("phase") == "Succeeded" for j in jobs(cluster)), WAIT,
               "a PodMigrationJob Succeeded")
    wait_until(lambda: node_cpu_percent(cluster, HOT) < HIGH_CPU, WAIT, "the hot node below its high threshold")
    moved = [p for p in pods_of(cluster, "be") if p["spec"].get("nodeName") == COLD]
    assert moved, "no BE pod on the cold node"
    done = [j for j in jobs(cluster) if (j.get("status") or {}).get("phase") == "Succeeded"]
    for job in done:
        assert job["spec"]["podRef"]["name"].startswith("be-"), job["spec"]["podRef"]  # the bare LS pods stay
        assert job["status"]["nodeName"] == COLD
    pods = [j["spec"]["podRef"]["name"] for j in jobs(cluster)]
    assert len(pods) == len(set(pods)), pods                                      # one job per pod
    # The workload limit: of 4 replicas, at most 2 migrations per 5 minutes (MigrationController's defaults).
    assert len([n for n in pods if n.startswith("be-")]) <= 2, pods
    assert all(cluster.node_of(f"ls-{i}", NS) == HOT for i in range(2))
    proc = cluster.kubectl("get", "pmj")
    assert proc.returncode == 0 and "Succeeded" in proc.stdout, proc.stdout + proc.stderr


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

    message = wait_until(failed, WAIT, "the job Failed")
    assert "ghost" in message and "spec.podRef" in message, message
