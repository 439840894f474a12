"""koord-manager's SLO controllers, running as a role against the embedded API server.

The manager runs in this process on a Runtime (what ``koordinator --role=manager`` builds), with
the webhook server off; the test drives it through the API like a user: Nodes, the
slo-controller-config ConfigMap, NodeMetric status (what a koordlet reports) and pods.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Iterator

import pytest

from koordinator.apis import quantity
from koordinator.runtime.client import Client
from koordinator.runtime.errors import Conflict, NotFound
from tests.manager_harness import SYSTEM_NAMESPACE, InProcessManager
from tests.waiting import wait_until

SLO_CONFIG = "slo-controller-config"
GiB = 1 << 30


@pytest.fixture(scope="module")
def manager(crd_server, crd_client, tmp_path_factory) -> Iterator[InProcessManager]:
    m = InProcessManager(crd_server.kubeconfig, tmp_path_factory.mktemp("certs")).start()
    try:
        yield m
    finally:
        m.stop()


@pytest.fixture
def clean_config(crd_client) -> Iterator[None]:
    yield
    try:
        crd_client.delete("ConfigMap", SLO_CONFIG, SYSTEM_NAMESPACE)
    except NotFound:
        pass


def make_node(crd_client: Client, name: str, *, labels: dict | None = None, cpu: str = "10", memory: str = "20Gi",
              annotations: dict | None = None) -> dict:
    crd_client.create({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
                "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                           "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}})
    return crd_client.get("Node", name)


def set_config(crd_client: Client, data: dict[str, dict]) -> None:
    body = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in data.items()}
    try:
        current = crd_client.get("ConfigMap", SLO_CONFIG, SYSTEM_NAMESPACE)
    except NotFound:
        crd_client.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": SLO_CONFIG, "namespace": SYSTEM_NAMESPACE}, "data": body})
        return
    current["data"] = body
    crd_client.update(current)


def get_or_none(crd_client: Client, kind: str, name: str, namespace: str | None = None) -> dict | None:
    try:
        return crd_client.get(kind, name, namespace)
    except NotFound:
        return None


def spec_of(crd_client: Client, kind: str, name: str) -> dict | None:
    obj = get_or_none(crd_client, kind, name)
    return obj.get("spec") if obj else None


def test_nodeslo_and_nodemetric_follow_nodes_and_the_config(manager, crd_client, clean_config):
    make_node(crd_client, "slo-a", labels={"pool": "a"})
    make_node(crd_client, "slo-b")
    # Defaults (no ConfigMap): Koordinator's threshold and burst defaults, empty QoS strategy.
    slo = wait_until(lambda: spec_of(crd_client, "NodeSLO", "slo-a"), message="NodeSLO for slo-a")
    assert slo["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65
    assert slo["resourceUsedThresholdWithBE"]["enable"] is False
    assert slo["cpuBurstStrategy"]["policy"] == "none"
    assert slo["resourceQOSStrategy"] == {}
    metric = wait_until(lambda: spec_of(crd_client, "NodeMetric", "slo-b"), message="NodeMetric for slo-b")
    assert metric["metricCollectPolicy"]["aggregateDurationSeconds"] == 300
    assert metric["metricCollectPolicy"]["reportIntervalSeconds"] == 60

    # Cluster strategy plus a node strategy for pool=a.
    set_config(crd_client, {
        "resource-threshold-config": {
            "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
            "nodeStrategies": [{"name": "pool-a", "nodeSelector": {"matchLabels": {"pool": "a"}},
                                "cpuSuppressThresholdPercent": 50}]},
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30},
    })

    def thresholds() -> tuple | None:
        a, b = spec_of(crd_client, "NodeSLO", "slo-a"), spec_of(crd_client, "NodeSLO", "slo-b")
        got = (a["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"],
               b["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"])
        return got if got == (50, 60) else None

    wait_until(thresholds, message="NodeSLOs follow the ConfigMap")
    assert spec_of(crd_client, "NodeSLO", "slo-a")["resourceUsedThresholdWithBE"]["enable"] is True
    wait_until(lambda: spec_of(crd_client, "NodeMetric", "slo-a")["metricCollectPolicy"]["reportIntervalSeconds"] == 30,
               message="NodeMetric follows colocation-config")

    # A node label change moves the node to the cluster strategy.
    crd_client.patch("Node", "slo-a", {"metadata": {"labels": {"pool": "b"}}})
    wait_until(lambda: spec_of(crd_client, "NodeSLO", "slo-a")["resourceUsedThresholdWithBE"][
        "cpuSuppressThresholdPercent"] == 60, message="relabelled node gets the cluster strategy")

    # A bad key: reported on the ConfigMap, the last good value of that key stays in force,
    # while a good key changed in the same edit applies.
    set_config(crd_client, {
        "resource-threshold-config": {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 400}},
        "cpu-burst-config": {"clusterStrategy": {"policy": "auto"}},
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30},
    })
    wait_until(lambda: spec_of(crd_client, "NodeSLO", "slo-b")["cpuBurstStrategy"]["policy"] == "auto",
               message="the good key applies")
    assert spec_of(crd_client, "NodeSLO", "slo-b")["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 60

    def warning() -> dict | None:
        events = crd_client.list("Event", SYSTEM_NAMESPACE).get("items") or []
        return next((e for e in events if e["involvedObject"].get("name") == SLO_CONFIG and e["type"] == "Warning"
                     and "cpuSuppressThresholdPercent" in e["message"]), None)

    event = wait_until(warning, message="a Warning Event names the bad field")
    assert "resource-threshold-config" in event["message"]

    # Invalid JSON too.
    set_config(crd_client, {"resource-threshold-config": "{not json", "cpu-burst-config": {"clusterStrategy": {}}})
    wait_until(lambda: spec_of(crd_client, "NodeSLO", "slo-b")["cpuBurstStrategy"]["policy"] == "none",
               message="cpu-burst-config back to defaults")
    assert spec_of(crd_client, "NodeSLO", "slo-b")["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 60

    # Someone overwrites the NodeSLO: the manager puts its spec back.
    slo_b = crd_client.get("NodeSLO", "slo-b")
    slo_b["spec"]["cpuBurstStrategy"]["policy"] = "cpuBurstOnly"
    crd_client.update(slo_b)
    wait_until(lambda: spec_of(crd_client, "NodeSLO", "slo-b")["cpuBurstStrategy"]["policy"] == "none",
               message="NodeSLO restored")

    # The node goes: so do its NodeSLO and NodeMetric.
    crd_client.delete("Node", "slo-b")
    wait_until(lambda: get_or_none(crd_client, "NodeSLO", "slo-b") is None and get_or_none(crd_client, "NodeMetric", "slo-b") is None,
               message="NodeSLO and NodeMetric deleted with the node")
    crd_client.delete("Node", "slo-a")


def _now(offset: float = 0.0) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


def report_metric(crd_client: Client, node: str, *, system: dict, pods: list[dict], age: float = 0.0) -> None:
    """Write NodeMetric status as a koordlet would (retrying if the manager wrote the object meanwhile)."""
    def write() -> bool:
        nm = get_or_none(crd_client, "NodeMetric", node)
        if nm is None:
            return False
        nm["status"] = {"updateTime": _now(-age),
                        "nodeMetric": {"nodeUsage": {"resources": system}, "systemUsage": {"resources": system}},
                        "podsMetric": pods}
        try:
            crd_client.update_status(nm)
        except Conflict:
            return False
        return True

    wait_until(write, message=f"NodeMetric {node} status written")


def running_pod(crd_client: Client, namespace: str, name: str, node: str, *, cpu: str, memory: str,
                labels: dict | None = None, priority_class: str | None = None) -> None:
    spec: dict = {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": {
        "requests": {"cpu": cpu, "memory": memory}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    crd_client.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                               "labels": labels or {}}, "spec": spec})
    pod = crd_client.get("Pod", name, namespace)
    pod["status"] = {"phase": "Running"}
    crd_client.update_status(pod)


def allocatable(crd_client: Client, node: str) -> dict:
    return (crd_client.get("Node", node).get("status") or {}).get("allocatable") or {}


def batch(crd_client: Client, node: str) -> tuple[int, int] | None:
    alloc = allocatable(crd_client, node)
    if "kubernetes.io/batch-cpu" not in alloc:
        return None
    return quantity.value(alloc["kubernetes.io/batch-cpu"]), quantity.value(alloc["kubernetes.io/batch-memory"])


def test_batch_resources_on_node_status(manager, crd_client, clean_config):
    ns = "batch-calc"
    crd_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    make_node(crd_client, "calc-1", cpu="10", memory="20Gi")
    set_config(crd_client, {"colocation-config": {
        "enable": True, "cpuReclaimThresholdPercent": 60, "memoryReclaimThresholdPercent": 50,
        "degradeTimeMinutes": 15, "resourceDiffThreshold": 0.1}})
    running_pod(crd_client, ns, "ls-1", "calc-1", cpu="3", memory="5Gi", labels={"koordinator.sh/qosClass": "LS"})
    running_pod(crd_client, ns, "be-1", "calc-1", cpu="4", memory="4Gi", labels={"koordinator.sh/qosClass": "BE"})
    wait_until(lambda: get_or_none(crd_client, "NodeMetric", "calc-1"), message="NodeMetric created")
    # Hand-computed (policy "usage"): margin = 10 x 40% = 4 cores, 20Gi x 50% = 10Gi; system 1 core/2Gi;
    # HP usage = ls-1's 2 cores/4Gi (be-1 is batch and ignored). batch-cpu = 10-4-1-2 = 3 cores = 3000
    # (milli-cores as a plain integer); batch-memory = 20-10-2-4 = 4Gi.
    report_metric(crd_client, "calc-1", system={"cpu": "1", "memory": "2Gi"}, pods=[
        {"namespace": ns, "name": "ls-1", "podUsage": {"resources": {"cpu": "2", "memory": "4Gi"}}},
        {"namespace": ns, "name": "be-1", "podUsage": {"resources": {"cpu": "3", "memory": "3Gi"}}},
    ])
    assert wait_until(lambda: batch(crd_client, "calc-1") == (3000, 4 * GiB) and batch(crd_client, "calc-1"),
                      message="batch resources from usage") == (3000, 4 * GiB)

    # A pod without a metric adds its request to HP usage: 1 core / 1Gi more -> 2000, 3Gi.
    running_pod(crd_client, ns, "ls-2", "calc-1", cpu="1", memory="1Gi", labels={"koordinator.sh/qosClass": "LS"})
    wait_until(lambda: batch(crd_client, "calc-1") == (2000, 3 * GiB), message="a pod without metric counts its request")

    # The memory "request" policy: 20 - 10 - reserved 0 - HP requests (ls-1 5Gi + ls-2 1Gi) = 4Gi.
    set_config(crd_client, {"colocation-config": {
        "enable": True, "cpuReclaimThresholdPercent": 60, "memoryReclaimThresholdPercent": 50,
        "memoryCalculatePolicy": "request"}})
    wait_until(lambda: batch(crd_client, "calc-1") == (2000, 4 * GiB), message="memoryCalculatePolicy request")

    # A NodeMetric older than degradeTimeMinutes: batch resources are removed.
    report_metric(crd_client, "calc-1", system={"cpu": "1", "memory": "2Gi"}, pods=[], age=16 * 60)
    wait_until(lambda: batch(crd_client, "calc-1") is None, message="stale NodeMetric removes batch resources")

    # Fresh again, then colocation off: removed too.
    report_metric(crd_client, "calc-1", system={"cpu": "1", "memory": "2Gi"}, pods=[])
    wait_until(lambda: batch(crd_client, "calc-1") is not None, message="batch resources back")
    set_config(crd_client, {"colocation-config": {"enable": False}})
    wait_until(lambda: batch(crd_client, "calc-1") is None, message="disabled colocation removes batch resources")
    crd_client.delete("Node", "calc-1")


def test_batch_resources_respect_the_diff_threshold(manager, crd_client, clean_config):
    make_node(crd_client, "calc-2", cpu="10", memory="20Gi")
    set_config(crd_client, {"colocation-config": {
        "enable": True, "cpuReclaimThresholdPercent": 100, "memoryReclaimThresholdPercent": 100,
        "resourceDiffThreshold": 0.5, "updateTimeThresholdSeconds": 3600}})
    wait_until(lambda: get_or_none(crd_client, "NodeMetric", "calc-2"), message="NodeMetric created")
    report_metric(crd_client, "calc-2", system={"cpu": "2", "memory": "4Gi"}, pods=[])
    # 10 - 0 - 2 = 8 cores; 20 - 4 = 16Gi.
    wait_until(lambda: batch(crd_client, "calc-2") == (8000, 16 * GiB), message="initial batch resources")
    # 8 -> 6 cores is a 25% change, under the 50% threshold: not written on its own (the exact
    # rule is unit-tested in test_manager_noderesource)...
    report_metric(crd_client, "calc-2", system={"cpu": "4", "memory": "4Gi"}, pods=[])
    metrics = manager.runtime.informers.informer("NodeMetric")
    wait_until(lambda: ((metrics.store.get("calc-2") or {}).get("status") or {}).get("nodeMetric", {}).get(
        "systemUsage", {}).get("resources", {}).get("cpu") == "4", message="the manager sees the new usage")
    assert batch(crd_client, "calc-2") == (8000, 16 * GiB)
    # ...but it goes along with a large change: memory 16Gi -> 6Gi (62%) writes both.
    report_metric(crd_client, "calc-2", system={"cpu": "4", "memory": "14Gi"}, pods=[])
    wait_until(lambda: batch(crd_client, "calc-2") == (6000, 6 * GiB), message="a large change is written")
    crd_client.delete("Node", "calc-2")
