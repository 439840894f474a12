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
def server(crd_server):
    return crd_server


@pytest.fixture(scope="module")
def api(crd_client):
    return crd_client


@pytest.fixture(scope="module")
def manager(server, api, tmp_path_factory) -> Iterator[InProcessManager]:
    m = InProcessManager(server.kubeconfig, tmp_path_factory.mktemp("certs")).start()
    try:
        yield m
    finally:
        m.stop()


@pytest.fixture
def clean_config(api) -> Iterator[None]:
    yield
    try:
        api.delete("ConfigMap", SLO_CONFIG, SYSTEM_NAMESPACE)
    except NotFound:
        pass


def make_node(api: Client, name: str, *, labels: dict | None = None, cpu: str = "10", memory: str = "20Gi",
              annotations: dict | None = None) -> dict:
    api.create({"apiVersion": "v1", "kind": "Node",
                "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
                "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                           "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}})
    return api.get("Node", name)


def set_config(api: Client, data: dict[str, dict]) -> None:
    body = {k: json.dumps(v) if not isinstance(v, str) else v for k, v in data.items()}
    try:
        current = api.get("ConfigMap", SLO_CONFIG, SYSTEM_NAMESPACE)
    except NotFound:
        api.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": SLO_CONFIG, "namespace": SYSTEM_NAMESPACE}, "data": body})
        return
    current["data"] = body
    api.update(current)


def get_or_none(api: Client, kind: str, name: str, namespace: str | None = None) -> dict | None:
    try:
        return api.get(kind, name, namespace)
    except NotFound:
        return None


def spec_of(api: Client, kind: str, name: str) -> dict | None:
    obj = get_or_none(api, kind, name)
    return obj.get("spec") if obj else None


def test_nodeslo_and_nodemetric_follow_nodes_and_the_config(manager, api, clean_config):
    make_node(api, "slo-a", labels={"pool": "a"})
    make_node(api, "slo-b")
    # Defaults (no ConfigMap): Koordinator's threshold and burst defaults, empty QoS strategy.
    slo = wait_until(lambda: spec_of(api, "NodeSLO", "slo-a"), message="NodeSLO for slo-a")
    assert slo["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 65
    assert slo["resourceUsedThresholdWithBE"]["enable"] is False
    assert slo["cpuBurstStrategy"]["policy"] == "none"
    assert slo["resourceQOSStrategy"] == {}
    metric = wait_until(lambda: spec_of(api, "NodeMetric", "slo-b"), message="NodeMetric for slo-b")
    assert metric["metricCollectPolicy"]["aggregateDurationSeconds"] == 300
    assert metric["metricCollectPolicy"]["reportIntervalSeconds"] == 60

    # Cluster strategy plus a node strategy for pool=a.
    set_config(api, {
        "resource-threshold-config": {
            "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
            "nodeStrategies": [{"name": "pool-a", "nodeSelector": {"matchLabels": {"pool": "a"}},
                                "cpuSuppressThresholdPercent": 50}]},
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30},
    })

    def thresholds() -> tuple | None:
        a, b = spec_of(api, "NodeSLO", "slo-a"), spec_of(api, "NodeSLO", "slo-b")
        got = (a["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"],
               b["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"])
        return got if got == (50, 60) else None

    wait_until(thresholds, message="NodeSLOs follow the ConfigMap")
    assert spec_of(api, "NodeSLO", "slo-a")["resourceUsedThresholdWithBE"]["enable"] is True
    wait_until(lambda: spec_of(api, "NodeMetric", "slo-a")["metricCollectPolicy"]["reportIntervalSeconds"] == 30,
               message="NodeMetric follows colocation-config")

    # A node label change moves the node to the cluster strategy.
    api.patch("Node", "slo-a", {"metadata": {"labels": {"pool": "b"}}})
    wait_until(lambda: spec_of(api, "NodeSLO", "slo-a")["resourceUsedThresholdWithBE"][
        "cpuSuppressThresholdPercent"] == 60, message="relabelled node gets the cluster strategy")

    # A bad key: reported on the ConfigMap, the last good value of that key stays in force,
    # while a good key changed in the same edit applies.
    set_config(api, {
        "resource-threshold-config": {"clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 400}},
        "cpu-burst-config": {"clusterStrategy": {"policy": "auto"}},
        "colocation-config": {"enable": True, "metricReportIntervalSeconds": 30},
    })
    wait_until(lambda: spec_of(api, "NodeSLO", "slo-b")["cpuBurstStrategy"]["policy"] == "auto",
               message="the good key applies")
    assert spec_of(api, "NodeSLO", "slo-b")["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 60

    def warning() -> dict | None:
        events = api.list("Event", SYSTEM_NAMESPACE).get("items") or []
        return next((e for e in events if e["involvedObject"].get("name") == SLO_CONFIG and e["type"] == "Warning"
                     and "cpuSuppressThresholdPercent" in e["message"]), None)

    event = wait_until(warning, message="a Warning Event names the bad field")
    assert "resource-threshold-config" in event["message"]

    # Invalid JSON too.
    set_config(api, {"resource-threshold-config": "{not json", "cpu-burst-config": {"clusterStrategy": {}}})
    wait_until(lambda: spec_of(api, "NodeSLO", "slo-b")["cpuBurstStrategy"]["policy"] == "none",
               message="cpu-burst-config back to defaults")
    assert spec_of(api, "NodeSLO", "slo-b")["resourceUsedThresholdWithBE"]["cpuSuppressThresholdPercent"] == 60

    # Someone overwrites the NodeSLO: the manager puts its spec back.
    slo_b = api.get("NodeSLO", "slo-b")
    slo_b["spec"]["cpuBurstStrategy"]["policy"] = "cpuBurstOnly"
    api.update(slo_b)
    wait_until(lambda: spec_of(api, "NodeSLO", "slo-b")["cpuBurstStrategy"]["policy"] == "none",
               message="NodeSLO restored")

    # The node goes: so do its NodeSLO and NodeMetric.
    api.delete("Node", "slo-b")
    wait_until(lambda: get_or_none(api, "NodeSLO", "slo-b") is None and get_or_none(api, "NodeMetric", "slo-b") is None,
               message="NodeSLO and NodeMetric deleted with the node")
    api.delete("Node", "slo-a")


def _now(offset: float = 0.0) -> str:
    return (datetime.now(timezone.utc) + timedelta(seconds=offset)).strftime("%Y-%m-%dT%H:%M:%SZ")


def report_metric(api: Client, node: str, *, system: dict, pods: list[dict], age: float = 0.0) -> None:
    """Write NodeMetric status as a koordlet would (retrying if the manager wrote the object meanwhile)."""
    def write() -> bool:
        nm = get_or_none(api, "NodeMetric", node)
        if nm is None:
            return False
        nm["status"] = {"updateTime": _now(-age),
                        "nodeMetric": {"nodeUsage": {"resources": system}, "systemUsage": {"resources": system}},
                        "podsMetric": pods}
        try:
            api.update_status(nm)
        except Conflict:
            return False
        return True

    wait_until(write, message=f"NodeMetric {node} status written")


def running_pod(api: Client, namespace: str, name: str, node: str, *, cpu: str, memory: str,
                labels: dict | None = None, priority_class: str | None = None) -> None:
    spec: dict = {"nodeName": node, "containers": [{"name": "c", "image": "busybox", "resources": {
        "requests": {"cpu": cpu, "memory": memory}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                               "labels": labels or {}}, "spec": spec})
    pod = api.get("Pod", name, namespace)
    pod["status"] = {"phase": "Running"}
    api.update_status(pod)


def allocatable(api: Client, node: str) -> dict:
    return (api.get("Node", node).get("status") or {}).get("allocatable") or {}


def batch(api: Client, node: str) -> tuple[int, int] | None:
    alloc = allocatable(api, node)
    if "kubernetes.io/batch-cpu" not in alloc:
        return None
    return quantity.value(alloc["kubernetes.io/batch-cpu"]), quantity.value(alloc["kubernetes.io/batch-memory"])


def test_batch_resources_on_node_status(manager, api, clean_config):
    ns = "batch-calc"
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    make_node(api, "calc-1", cpu="10", memory="20Gi")
    set_config(api, {"colocation-config": {
        "enable": True, "cpuReclaimThresholdPercent": 60, "memoryReclaimThresholdPercent": 50,
        "degradeTimeMinutes": 15, "resourceDiffThreshold": 0.1}})
    running_pod(api, ns, "ls-1", "calc-1", cpu="3", memory="5Gi", labels={"koordinator.sh/qosClass": "LS"})
    running_pod(api, ns, "be-1", "calc-1", cpu="4", memory="4Gi", labels={"koordinator.sh/qosClass": "BE"})
    wait_until(lambda: get_or_none(api, "NodeMetric", "calc-1"), message="NodeMetric created")
    # Hand-computed (policy "usage"): margin = 10 x 40% = 4 cores, 20Gi x 50% = 10Gi; system 1 core/2Gi;
    # HP usage = ls-1's 2 cores/4Gi (be-1 is batch and ignored). batch-cpu = 10-4-1-2 = 3 cores = 3000
    # (milli-cores as a plain integer); batch-memory = 20-10-2-4 = 4Gi.
    report_metric(api, "calc-1", system={"cpu": "1", "memory": "2Gi"}, pods=[
        {"namespace": ns, "name": "ls-1", "podUsage": {"resources": {"cpu": "2", "memory": "4Gi"}}},
        {"namespace": ns, "name": "be-1", "podUsage": {"resources": {"cpu": "3", "memory": "3Gi"}}},
    ])
    assert wait_until(lambda: batch(api, "calc-1") == (3000, 4 * GiB) and batch(api, "calc-1"),
                      message="batch resources from usage") == (3000, 4 * GiB)

    # A pod without a metric adds its request to HP usage: 1 core / 1Gi more -> 2000, 3Gi.
    running_pod(api, ns, "ls-2", "calc-1", cpu="1", memory="1Gi", labels={"koordinator.sh/qosClass": "LS"})
    wait_until(lambda: batch(api, "calc-1") == (2000, 3 * GiB), message="a pod without metric counts its request")

    # The memory "request" policy: 20 - 10 - reserved 0 - HP requests (ls-1 5Gi + ls-2 1Gi) = 4Gi.
    set_config(api, {"colocation-config": {
        "enable": True, "cpuReclaimThresholdPercent": 60, "memoryReclaimThresholdPercent": 50,
        "memoryCalculatePolicy": "request"}})
    wait_until(lambda: batch(api, "calc-1") == (2000, 4 * GiB), message="memoryCalculatePolicy request")

    # A NodeMetric older than degradeTimeMinutes: batch resources are removed.
    report_metric(api, "calc-1", system={"cpu": "1", "memory": "2Gi"}, pods=[], age=16 * 60)
    wait_until(lambda: batch(api, "calc-1") is None, message="stale NodeMetric removes batch resources")

    # Fresh again, then colocation off: removed too.
    report_metric(api, "calc-1", system={"cpu": "1", "memory": "2Gi"}, pods=[])
    wait_until(lambda: batch(api, "calc-1") is not None, message="batch resources back")
    set_config(api, {"colocation-config": {"enable": False}})
    wait_until(lambda: batch(api, "calc-1") is None, message="disabled colocation removes batch resources")
    api.delete("Node", "calc-1")


def test_batch_resources_respect_the_diff_threshold(manager, api, clean_config):
    make_node(api, "calc-2", cpu="10", memory="20Gi")
    set_config(api, {"colocation-config": {
        "enable": True, "cpuReclaimThresholdPercent": 100, "memoryReclaimThresholdPercent": 100,
        "resourceDiffThreshold": 0.5, "updateTimeThresholdSeconds": 3600}})
    wait_until(lambda: get_or_none(api, "NodeMetric", "calc-2"), message="NodeMetric created")
    report_metric(api, "calc-2", system={"cpu": "2", "memory": "4Gi"}, pods=[])
    # 10 - 0 - 2 = 8 cores; 20 - 4 = 16Gi.
    wait_until(lambda: batch(api, "calc-2") == (8000, 16 * GiB), message="initial batch resources")
    # 8 -> 6 cores is a 25% change, under the 50% threshold: not written on its own (the exact
    # rule is unit-tested in test_manager_noderesource)...
    report_metric(api, "calc-2", system={"cpu": "4", "memory": "4Gi"}, pods=[])
    metrics = manager.runtime.informers.informer("NodeMetric")
    wait_until(lambda: ((metrics.store.get("calc-2") or {}).get("status") or {}).get("nodeMetric", {}).get(
        "systemUsage", {}).get("resources", {}).get("cpu") == "4", message="the manager sees the new usage")
    assert batch(api, "calc-2") == (8000, 16 * GiB)
    # ...but it goes along with a large change: memory 16Gi -> 6Gi (62%) writes both.
    report_metric(api, "calc-2", system={"cpu": "4", "memory": "14Gi"}, pods=[])
    wait_until(lambda: batch(api, "calc-2") == (6000, 6 * GiB), message="a large change is written")
    api.delete("Node", "calc-2")
