"""koordlet reporters against the embedded API server: NodeMetric status (hand-computed aggregates from
a real in-memory metric cache), NodeResourceTopology and Device (from a stand-in NVML module)."""

from __future__ import annotations

import json
import logging
import os
import threading
import types
from typing import Any, Iterator

import pytest

from koordinator.runtime.client import Client
from koordinator.runtime.errors import AlreadyExists, NotFound
from koordinator.runtime.informer import InformerFactory
from koordinator_roles.koordlet.metriccache import MetricCache, Sample
from koordinator_roles.koordlet.metriccache import kinds as k
from koordinator_roles.koordlet.system.cpuset import format_cpuset, parse_cpuset, take_by_topology
from koordinator_roles.koordlet.statesinformer.device_reporter import DeviceReporter, label_value
from koordinator_roles.koordlet.statesinformer.kubelet import KubeletClient
from koordinator_roles.koordlet.statesinformer.nodemetric_reporter import NodeMetricReporter, cpu_quantity, memory_quantity
from koordinator_roles.koordlet.statesinformer.nrt_reporter import NodeTopologyReporter, topology_policies
from koordinator_roles.koordlet.statesinformer.nvml import discover_gpus, sysfs_bus_id
from koordinator_roles.koordlet.statesinformer.states import StatesInformer
from tests.test_koordlet_states import LAYOUT, NS, SLO, FakeKubelet, make_node, make_pod, unique
from tests.waiting import wait_until

GiB = 1 << 30
MiB = 1 << 20
NOW = 1_000_000.0


@pytest.fixture(scope="module")
def api(crd_client: Client) -> Client:
    try:
        crd_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    except AlreadyExists:
        pass
    return crd_client


@pytest.fixture
def informers(api: Client) -> Iterator[InformerFactory]:
    factory = InformerFactory(api)
    try:
        yield factory
    finally:
        factory.stop(5)


@pytest.fixture
def cache() -> Iterator[MetricCache]:
    c = MetricCache(None, clock=lambda: NOW)
    try:
        yield c
    finally:
        c.close()


def started_states(informers: InformerFactory, node: str, **kwargs: Any) -> StatesInformer:
    states = StatesInformer(informers, node, LAYOUT, **kwargs)
    informers.start()
    wait_until(states.has_synced, message="states synced")
    return states


def series(metric: str, times: list[float], values: list[float], **labels: str) -> list[Sample]:
    return [Sample(metric, v, NOW + t, labels) for t, v in zip(times, values)]


class Predictor:
    def __init__(self, result: Any) -> None:
        self.result = result

    def prod_reclaimable(self):
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


# -- units -----------------------------------------------------------------------------------------


def test_quantities_as_koordinator_writes_them():
    assert cpu_quantity(1.5) == "1500m" and cpu_quantity(2.0) == "2" and cpu_quantity(0.33333) == "333m"
    assert cpu_quantity(0.0009) == "0"  # int(cores * 1000) truncates
    assert memory_quantity(5.5 * GiB) == "5632Mi" and memory_quantity(GiB) == "1Gi"
    assert memory_quantity(1000000.7) == "1000000"


def test_cpusets_and_take_by_topology():
    assert parse_cpuset("0-3, 8,10-11") == [0, 1, 2, 3, 8, 10, 11] and parse_cpuset("") == []
    assert format_cpuset([11, 0, 1, 2, 8, 10, 3]) == "0-3,8,10-11" and format_cpuset([]) == ""
    for bad in ("a", "3-1", "-1"):
        with pytest.raises(ValueError, match="reservedCPUs"):
            parse_cpuset(bad, "reservedCPUs")
    # 2 sockets x 2 cores x 2 threads; threads of a core are (2i, 2i+1)
    topo = [{"id": i, "core": i // 2, "socket": i // 4} for i in range(8)]
    everything = set(range(8))
    assert take_by_topology(topo, everything, 2) == [0, 1]               # one whole core
    assert take_by_topology(topo, everything, 5) == [0, 1, 2, 3, 4]      # a socket, then one thread
    assert take_by_topology(topo, everything - {0}, 1) == [1]            # fill the half-used core first
    assert take_by_topology(topo, everything - {0}, 2) == [2, 3]         # a whole core before single threads
    assert take_by_topology(topo, everything, 0) == []
    with pytest.raises(ValueError, match="only 8 available"):
        take_by_topology(topo, everything, 9)


# -- NodeMetric ------------------------------------------------------------------------------------


def fill_cache(cache: MetricCache, uids: dict[str, str]) -> None:
    recent = [-270.0 + 30 * i for i in range(10)]          # 10 points in the last 5 minutes
    older = [-585.0 + 30 * i for i in range(10)]           # 10 more, 5 to 10 minutes ago
    samples = []
    samples += series(k.NODE_CPU_USAGE, older + recent, [1.0] * 10 + [float(i) for i in range(1, 11)])
    samples += series(k.NODE_MEMORY_USAGE, older + recent, [GiB] * 10 + [i * GiB for i in range(1, 11)])
    samples += series(k.NODE_MEMORY_USAGE_WITH_PAGE_CACHE, recent, [20 * GiB] * 10)
    samples += series(k.SYS_CPU_USAGE, recent, [0.5] * 10)
    samples += series(k.SYS_MEMORY_USAGE, recent, [512 * MiB] * 10)
    samples += series(k.NODE_NUMA_CPU_USAGE, recent, [2.0] * 10, numa_node_id="0")
    samples += series(k.NODE_NUMA_CPU_USAGE, recent, [1.0] * 10, numa_node_id="1")
    samples += series(k.NODE_NUMA_MEMORY_USAGE, recent, [GiB] * 10, numa_node_id="0")
    samples += series(k.NODE_NUMA_MEMORY_USAGE, recent, [3 * GiB] * 10, numa_node_id="1")
    samples += series(k.SYS_NUMA_CPU_USAGE, recent, [0.25] * 10, numa_node_id="0")
    samples += series(k.SYS_NUMA_MEMORY_USAGE, recent, [256 * MiB] * 10, numa_node_id="0")
    samples += series(k.POD_CPU_USAGE, [-60, -30, 0], [0.2, 0.4, 0.4], pod_uid=uids["ls"])
    samples += series(k.POD_MEMORY_USAGE, [-60, -30, 0], [100 * MiB] * 3, pod_uid=uids["ls"])
    samples += series(k.POD_CPU_USAGE, [-30, 0], [1.5, 1.5], pod_uid=uids["be"])
    samples += series(k.POD_MEMORY_USAGE, [-30, 0], [GiB, GiB], pod_uid=uids["be"])
    samples += series(k.POD_CPU_USAGE, [-30, 0], [1.0, 1.0], pod_uid=uids["nomem"])  # no memory: left out
    samples += series(k.POD_CPU_USAGE, [0], [9.0], pod_uid="dangling")
    samples += series(k.POD_MEMORY_USAGE, [0], [9.0], pod_uid="dangling")
    samples += series(k.POD_CPU_USAGE, [-400], [7.0], pod_uid=uids["ls"])  # outside the 300 s window
    samples += series(k.HOST_APPLICATION_CPU_USAGE, [-10], [0.1], host_app_name="nginx")
    samples += series(k.HOST_APPLICATION_MEMORY_USAGE, [-10], [50 * MiB], host_app_name="nginx")
    cache.insert(samples)


def rm(cpu: str, memory: str) -> dict:
    return {"resources": {"cpu": cpu, "memory": memory}}


def expected_status(names: dict[str, str]) -> dict:
    five = {"avg": rm("5500m", "5632Mi"), "p50": rm("5", "5Gi"), "p90": rm("9", "9Gi"), "p95": rm("9", "9Gi"),
            "p99": rm("9", "9Gi")}
    ten = {"avg": rm("3250m", "3328Mi"), "p50": rm("1", "1Gi"), "p90": rm("8", "8Gi"), "p95": rm("9", "9Gi"),
           "p99": rm("9", "9Gi")}
    system = {agg: rm("500m", "512Mi") for agg in ("avg", "p50", "p90", "p95", "p99")}
    return {
        "updateTime": "1970-01-12T13:46:40Z",
        "nodeMetric": {
            "nodeUsage": rm("5500m", "5632Mi"),
            "aggregatedNodeUsages": [{"duration": "5m0s", "usage": five}, {"duration": "10m0s", "usage": ten},
                                     {"duration": "30m0s"}],  # 30m: the samples span < 15 min (cold start)
            "systemUsage": rm("500m", "512Mi"),
            "aggregatedSystemUsages": [{"duration": "5m0s", "usage": system}, {"duration": "10m0s"},
                                       {"duration": "30m0s"}],
            "numaUsages": [{"numaNodeID": 0, "nodeUsage": rm("2", "1Gi"), "systemUsage": rm("250m", "256Mi")},
                           {"numaNodeID": 1, "nodeUsage": rm("1", "3Gi")}],
        },
        "podsMetric": sorted([
            {"namespace": NS, "name": names["ls"], "podUsage": rm("333m", "100Mi"), "priority": "koord-prod",
             "qos": "LS"},
            {"namespace": NS, "name": names["be"], "podUsage": rm("1500m", "1Gi"), "priority": "koord-batch",
             "qos": "BE"},
        ], key=lambda p: p["name"]),
        "hostApplicationMetric": [{"name": "nginx", "usage": rm("100m", "50Mi"), "priority": "koord-prod",
                                   "qos": "LS"}],
        "prodReclaimableMetric": {"resource": rm("1500m", "2Gi")},
        "prodPeakMetric": {"resource": rm("2500m", "3Gi")},
    }


def test_node_metric_status_hand_computed(api, informers, cache, crd_server):
    node = unique("metric")
    make_node(api, node)
    pods = {"ls": make_pod(api, unique("ls"), node, requests={"cpu": "100m"}),
            "be": make_pod(api, unique("be"), node, labels={"koordinator.sh/qosClass": "BE"}),
            "nomem": make_pod(api, unique("nomem"), node)}
    uids = {key: p["metadata"]["uid"] for key, p in pods.items()}
    names = {key: p["metadata"]["name"] for key, p in pods.items()}
    api.create({"apiVersion": SLO, "kind": "NodeSLO", "metadata": {"name": node},
                "spec": {"hostApplications": [{"name": "nginx", "priority": "koord-prod", "qos": "LS"},
                                              {"name": "idle", "qos": "BE"}]}})
    fill_cache(cache, uids)
    states = started_states(informers, node)
    wait_until(lambda: len(states.pods()) == 3 and states.host_applications(), message="pods and NodeSLO")
    predictor = Predictor(({"cpu": 1500, "memory": 2 * GiB}, {"cpu": 2500, "memory": 3 * GiB}))
    reporter = NodeMetricReporter(api, states, cache, predictor=predictor, clock=lambda: NOW)

    # Nothing is reported (nor created) before the NodeMetric exists.
    assert reporter.sync_once() is False
    with pytest.raises(NotFound):
        api.get("NodeMetric", node)

    api.create({"apiVersion": SLO, "kind": "NodeMetric", "metadata": {"name": node}, "spec": {"metricCollectPolicy": {
        "aggregateDurationSeconds": 300, "reportIntervalSeconds": 60,
        "nodeAggregatePolicy": {"durations": ["5m", "10m", "30m"]}}}})
    wait_until(lambda: states.node_metric() is not None, message="NodeMetric seen")
    assert reporter.report_interval() == 60
    assert reporter.sync_once() is True
    want = expected_status(names)
    assert api.get("NodeMetric", node)["status"] == want
    kubectl = json.loads(crd_server.kubectl("get", "nodemetric", node, "-o", "json").stdout)
    assert kubectl["status"] == want
    assert kubectl["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 60  # the spec is not touched

    # Memory with page cache, and a predictor that is not ready: the whole status is replaced.
    nm = api.get("NodeMetric", node)
    nm["spec"]["metricCollectPolicy"]["nodeMemoryCollectPolicy"] = "usageWithPageCache"
    api.update(nm)
    wait_until(lambda: states.node_metric_spec()["metricCollectPolicy"]["nodeMemoryCollectPolicy"]
               == "usageWithPageCache")
    reporter.predictor = Predictor(RuntimeError("models are still warming up"))
    status = reporter.collect()
    assert status["nodeMetric"]["nodeUsage"] == rm("5500m", "20Gi")
    usages = status["nodeMetric"]["aggregatedNodeUsages"]
    assert usages[0]["usage"]["p90"] == rm("9", "20Gi")
    assert usages[1] == {"duration": "10m0s"}  # page-cache samples span 270 s of 600: cold start
    assert "podsMetric" not in status  # no pod page-cache samples
    assert "prodReclaimableMetric" not in status and "prodPeakMetric" not in status


def test_node_metric_conflict_is_retried_with_a_fresh_read(api, informers, cache):
    node = unique("conflict")
    make_node(api, node)
    api.create({"apiVersion": SLO, "kind": "NodeMetric", "metadata": {"name": node}, "spec": {}})
    states = started_states(informers, node)
    wait_until(lambda: states.node_metric() is not None)
    cache.insert(series(k.NODE_CPU_USAGE, [0], [2.0]) + series(k.NODE_MEMORY_USAGE, [0], [GiB]))
    informers.stop(5)  # the cached NodeMetric now stays at its old resourceVersion
    nm = api.get("NodeMetric", node)
    nm["spec"] = {"metricCollectPolicy": {"reportIntervalSeconds": 90}}
    api.update(nm)

    calls = []

    class Recording:
        kinds = api.kinds

        def __getattr__(self, name):
            return getattr(api, name)

        def update_status(self, obj):
            calls.append(obj["metadata"]["resourceVersion"])
            return api.update_status(obj)

    reporter = NodeMetricReporter(Recording(), states, cache, clock=lambda: NOW)
    assert reporter.sync_once() is True
    assert len(calls) == 2 and calls[0] != calls[1]  # the stale write conflicted, the fresh one went through
    stored = api.get("NodeMetric", node)
    assert stored["status"]["nodeMetric"]["nodeUsage"] == rm("2", "1Gi")
    assert stored["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] == 90


def test_node_metric_writes_are_rate_limited(api, informers, cache):
    node = unique("ratelimit")
    make_node(api, node)
    api.create({"apiVersion": SLO, "kind": "NodeMetric", "metadata": {"name": node}, "spec": {}})
    states = started_states(informers, node)
    wait_until(lambda: states.node_metric() is not None)
    reporter = NodeMetricReporter(api, states, cache, clock=lambda: NOW)
    # burst 2 at 0.1 qps: the third report within 10 s is skipped
    assert [reporter.sync_once(), reporter.sync_once(), reporter.sync_once()] == [True, True, False]
    status = api.get("NodeMetric", node)["status"]
    assert status["nodeMetric"]["nodeUsage"] == {} and "podsMetric" not in status


def test_node_metric_report_loop_and_interval(api, informers, cache):
    node = unique("loop")
    make_node(api, node)
    api.create({"apiVersion": SLO, "kind": "NodeMetric", "metadata": {"name": node},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 5}}})
    states = started_states(informers, node)
    wait_until(lambda: states.node_metric() is not None)
    assert NodeMetricReporter(api, states, cache).report_interval() == 30  # the spec's 5 s is below the floor
    with pytest.raises(ValueError, match="--report-interval"):
        NodeMetricReporter(api, states, cache, report_interval=0)
    cache.insert(series(k.NODE_CPU_USAGE, [0], [1.0]) + series(k.NODE_MEMORY_USAGE, [0], [GiB]))
    reporter = NodeMetricReporter(api, states, cache, report_interval=0.05, clock=lambda: NOW)
    assert reporter.report_interval() == 0.05
    assert reporter._bucket.qps == 20  # an explicit interval raises the write rate to match
    stop = threading.Event()
    loop = threading.Thread(target=reporter.run, args=(stop,))
    loop.start()
    try:
        wait_until(lambda: (api.get("NodeMetric", node).get("status") or {}).get("updateTime"),
                   message="status reported by the loop")
    finally:
        stop.set()
        loop.join(5)
    assert not loop.is_alive()


def test_node_metric_first_report_waits_for_the_first_window_not_an_interval(api, informers, cache):
    """A fresh koordlet reports once its cache holds node usage, long before its 60 s interval is over."""
    node = unique("first")
    make_node(api, node)
    api.create({"apiVersion": SLO, "kind": "NodeMetric", "metadata": {"name": node}, "spec": {}})
    states = started_states(informers, node)
    wait_until(lambda: states.node_metric() is not None)
    queried = threading.Event()

    class Watched:
        def __getattr__(self, name):
            return getattr(cache, name)

        def query(self, *args, **kwargs):
            queried.set()
            return cache.query(*args, **kwargs)

    reporter = NodeMetricReporter(api, states, Watched(), clock=lambda: NOW)
    assert reporter.report_interval() == 60
    assert not reporter.first_window_ready()
    stop = threading.Event()
    loop = threading.Thread(target=reporter.run, args=(stop,))
    loop.start()
    try:
        assert queried.wait(10), "the reporter looks for its first window"
        assert not (api.get("NodeMetric", node).get("status") or {}), "nothing to report yet: nothing reported"
        cache.insert(series(k.NODE_CPU_USAGE, [-1, 0], [2.0, 2.0]) + series(k.NODE_MEMORY_USAGE, [0], [GiB]))
        status = wait_until(lambda: api.get("NodeMetric", node).get("status"), 10,
                            message="the first report, well within the interval")
        assert status["nodeMetric"]["nodeUsage"] == rm("2", "1Gi")
    finally:
        stop.set()
        loop.join(5)
    assert not loop.is_alive()


def test_node_metric_gpu_usage(api, informers, cache):
    node = unique("gpu")
    make_node(api, node)
    states = started_states(informers, node)
    cache.set_kv(k.KV_GPU_DEVICES, [{"minor": 1, "uuid": "GPU-b"}, {"minor": 0, "uuid": "GPU-a"}, {"bad": 1}])
    labels_a = {"gpu_minor": "0", "gpu_device_uuid": "GPU-a"}
    cache.insert(series(k.NODE_GPU_CORE_USAGE, [0], [42.7], **labels_a)
                 + series(k.NODE_GPU_MEMORY_USAGE, [0], [4 * GiB], **labels_a)
                 + series(k.NODE_GPU_MEMORY_TOTAL, [0], [16 * GiB], **labels_a))
    status = NodeMetricReporter(api, states, cache, gpu=True, clock=lambda: NOW).collect()
    assert status["nodeMetric"]["nodeUsage"] == {"devices": [{
        "id": "GPU-a", "minor": 0, "type": "gpu", "health": True,
        "resources": {"koordinator.sh/gpu-core": "42", "koordinator.sh/gpu-memory": "4Gi",
                      "koordinator.sh/gpu-memory-ratio": "25"}}]}
    assert "devices" not in NodeMetricReporter(api, states, cache, clock=lambda: NOW).collect()["nodeMetric"]["nodeUsage"]


# -- NodeResourceTopology --------------------------------------------------------------------------

CPU_INFO = {"model": "Test CPU", "vendor": "GenuineIntel", "total_cpus": 8, "total_cores": 4, "total_sockets": 2,
            "total_numa_nodes": 2,
            "cpus": [{"id": i, "core": i // 2, "socket": i // 4, "node": i // 4} for i in range(8)]}
NUMA_INFO = {"nodes": [
    {"id": 0, "cpus": [0, 1, 2, 3], "mem_total": 8 * GiB, "mem_free": GiB, "hugepages_2Mi": 512, "hugepages_1Gi": 0},
    {"id": 1, "cpus": [4, 5, 6, 7], "mem_total": 8 * GiB, "mem_free": GiB, "hugepages_2Mi": 0, "hugepages_1Gi": 0}]}


def res(name: str, capacity: str, allocatable: str | None = None) -> dict:
    allocatable = allocatable or capacity
    return {"name": name, "capacity": capacity, "allocatable": allocatable, "available": allocatable}


def test_nrt_created_with_owner_zones_and_annotations_then_updated_only_on_change(api, informers, cache):
    node_name = unique("nrt")
    node = make_node(api, node_name, labels={"node.koordinator.sh/enable-numa-reservation": "true"},
                     annotations={"node.koordinator.sh/reservation": json.dumps({"resources": {"cpu": "2"}}),
                                  "node.koordinator.sh/system-qos-resource": json.dumps({"cpuset": "7"})},
                     capacity={"cpu": "8", "memory": "16Gi", "pods": "110"},
                     allocatable={"cpu": "7", "memory": "15Gi", "pods": "110"})
    rs = "scheduling.koordinator.sh/resource-status"
    make_pod(api, unique("lse"), node_name, labels={"koordinator.sh/qosClass": "LSE"},
             annotations={rs: json.dumps({"cpuset": "4-5"})})
    make_pod(api, unique("lsr"), node_name, labels={"koordinator.sh/qosClass": "LSR"},
             annotations={rs: json.dumps({"cpuset": "2"})})
    states = started_states(informers, node_name)
    wait_until(lambda: len(states.pods()) == 2)
    reporter = NodeTopologyReporter(api, states, cache)
    assert reporter.sync_once() is False  # no node info in the metric cache yet
    with pytest.raises(NotFound):
        api.get("NodeResourceTopology", node_name)
    cache.set_kv(k.KV_NODE_CPU_INFO, CPU_INFO)
    cache.set_kv(k.KV_NODE_NUMA_INFO, NUMA_INFO)

    assert reporter.sync_once() is True
    nrt = api.get("NodeResourceTopology", node_name)
    md = nrt["metadata"]
    assert md["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": node_name,
                                      "uid": node["metadata"]["uid"], "controller": True,
                                      "blockOwnerDeletion": True}]
    assert md["labels"] == {"app.kubernetes.io/managed-by": "Koordinator",
                            "node.koordinator.sh/enable-numa-reservation": "true"}
    assert nrt["topologyPolicies"] == ["None"]
    # kubelet reserves 1 CPU and 1Gi: half of each (rounded up) comes off every zone's allocatable
    assert nrt["zones"] == [
        {"name": "node-0", "type": "Node", "resources": [res("cpu", "4", "3500m"), res("memory", "7Gi", "6656Mi")]},
        {"name": "node-1", "type": "Node", "resources": [res("cpu", "4", "3500m"), res("memory", "8Gi", "7680Mi")]}]
    ann = md["annotations"]
    assert json.loads(ann["node.koordinator.sh/cpu-basic-info"]) == {
        "cpuModel": "Test CPU", "hyperThreadEnabled": True, "vendorID": "GenuineIntel"}
    assert json.loads(ann["node.koordinator.sh/cpu-topology"]) == {"detail": [
        {"id": i, "core": i // 2, "socket": i // 4, "node": i // 4} for i in range(8)]}
    # reserved by count: one whole core (0-1); system QoS holds 7 exclusively
    assert ann["node.koordinator.sh/reservation"] == '{"reservedCPUs":"0-1"}'
    assert ann["node.koordinator.sh/system-qos-resource"] == '{"cpuset": "7"}'
    # LS pool: minus every pod cpuset (4-5, 2), reserved 0-1 and system 7; BE pool: minus LSE's 4-5 only
    assert json.loads(ann["node.koordinator.sh/cpu-shared-pools"]) == [
        {"socket": 0, "node": 0, "cpuset": "3"}, {"socket": 1, "node": 1, "cpuset": "6"}]
    assert json.loads(ann["node.koordinator.sh/be-cpu-shared-pools"]) == [
        {"socket": 0, "node": 0, "cpuset": "2-3"}, {"socket": 1, "node": 1, "cpuset": "6"}]
    assert "kubelet.koordinator.sh/cpu-manager-policy" not in ann

    # Unchanged: no write at all.
    rv = md["resourceVersion"]
    assert reporter.sync_once() is False
    assert api.get("NodeResourceTopology", node_name)["metadata"]["resourceVersion"] == rv

    # The manager's NUMA batch resources and foreign annotations survive our updates.
    nrt["zones"][0]["resources"].append(res("kubernetes.io/batch-cpu", "2000"))
    nrt["metadata"]["annotations"]["someone/else"] = "x"
    api.update(nrt)
    assert reporter.sync_once() is False
    current = api.get("Node", node_name)
    del current["metadata"]["labels"]["node.koordinator.sh/enable-numa-reservation"]
    del current["metadata"]["annotations"]["node.koordinator.sh/system-qos-resource"]
    api.update(current)
    wait_until(lambda: not states.node()["metadata"]["labels"], message="node change seen")
    assert reporter.sync_once() is True
    nrt = api.get("NodeResourceTopology", node_name)
    assert nrt["zones"][0]["resources"] == [res("cpu", "4"), res("kubernetes.io/batch-cpu", "2000"),
                                            res("memory", "7Gi")]
    assert nrt["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "Koordinator"}
    ann = nrt["metadata"]["annotations"]
    assert ann["someone/else"] == "x" and "node.koordinator.sh/system-qos-resource" not in ann
    assert json.loads(ann["node.koordinator.sh/cpu-shared-pools"]) == [
        {"socket": 0, "node": 0, "cpuset": "3"}, {"socket": 1, "node": 1, "cpuset": "6-7"}]


def test_nrt_with_kubelet_configz_and_hugepages(api, informers, cache, caplog):
    node_name = unique("nrt-kubelet")
    make_node(api, node_name, annotations={"node.koordinator.sh/reservation": "{not json",
                                           "node.koordinator.sh/system-qos-resource": "[7]"})
    bad_pod = make_pod(api, unique("bad"), node_name,
                       annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset": "x-y"}'})
    cache.set_kv(k.KV_NODE_CPU_INFO, CPU_INFO)
    cache.set_kv(k.KV_NODE_NUMA_INFO, NUMA_INFO)
    with FakeKubelet() as kubelet:
        kubelet.configz = {"kubeletconfig": {"cpuManagerPolicy": "static", "topologyManagerPolicy": "single-numa-node",
                                             "topologyManagerScope": "pod", "kubeReserved": {"cpu": "500m"},
                                             "systemReserved": {"cpu": "1"}}}
        states = started_states(informers, node_name)
        wait_until(lambda: len(states.pods()) == 1)
        reporter = NodeTopologyReporter(api, states, cache, kubelet=KubeletClient(kubelet.url, timeout=2),
                                        hugepages=True)
        assert reporter.sync_once() is True
        nrt = api.get("NodeResourceTopology", node_name)
        assert nrt["topologyPolicies"] == ["SingleNUMANodePodLevel"]
        ann = nrt["metadata"]["annotations"]
        # 1.5 reserved CPUs round up to 2: one whole core
        assert json.loads(ann["kubelet.koordinator.sh/cpu-manager-policy"]) == {"policy": "static",
                                                                                "reservedCPUs": "0-1"}
        assert ann["node.koordinator.sh/reservation"] == "{}"  # unreadable annotation: nothing reserved
        # bad annotations are reported (naming them) and ignored
        assert "node annotation node.koordinator.sh/reservation: Expecting property name" in caplog.text
        assert "node annotation node.koordinator.sh/system-qos-resource: expected a JSON object" in caplog.text
        assert (f"pod {NS}/{bad_pod['metadata']['name']}: annotation scheduling.koordinator.sh/resource-status "
                "cpuset: invalid CPU list 'x-y'") in caplog.text
        assert json.loads(ann["node.koordinator.sh/cpu-shared-pools"]) == [
            {"socket": 0, "node": 0, "cpuset": "0-3"}, {"socket": 1, "node": 1, "cpuset": "4-7"}]
        assert nrt["zones"][0]["resources"] == [res("cpu", "4"), res("hugepages-1Gi", "0"),
                                                res("hugepages-2Mi", "1Gi"), res("memory", "7Gi")]
        # the kubelet going away drops only what it told us
        kubelet.configz = 500
        assert reporter.sync_once() is True
        nrt = api.get("NodeResourceTopology", node_name)
        assert nrt["topologyPolicies"] == ["None"]
        assert "kubelet.koordinator.sh/cpu-manager-policy" not in nrt["metadata"]["annotations"]
        assert caplog.text.count("kubelet configuration unavailable") == 1
        assert reporter.sync_once() is False
        assert caplog.text.count("kubelet configuration unavailable") == 1


def test_topology_policy_names():
    assert topology_policies(None) == ["None"]
    assert topology_policies({"topologyManagerPolicy": "none"}) == ["None"]
    assert topology_policies({"topologyManagerPolicy": "restricted"}) == ["RestrictedContainerLevel"]
    assert topology_policies({"topologyManagerPolicy": "best-effort", "topologyManagerScope": "pod"}) == [
        "BestEffortPodLevel"]


def test_nrt_run_loop_stops(api, informers, cache):
    node_name = unique("nrt-loop")
    make_node(api, node_name)
    cache.set_kv(k.KV_NODE_CPU_INFO, CPU_INFO)
    cache.set_kv(k.KV_NODE_NUMA_INFO, NUMA_INFO)
    states = started_states(informers, node_name)
    reporter = NodeTopologyReporter(api, states, cache, interval=0.05)
    stop = threading.Event()
    loop = threading.Thread(target=reporter.run, args=(stop,))
    loop.start()
    try:
        wait_until(lambda: _exists(api, "NodeResourceTopology", node_name), message="NRT created by the loop")
    finally:
        stop.set()
        loop.join(5)
    assert not loop.is_alive()


def _exists(api: Client, kind: str, name: str) -> bool:
    try:
        api.get(kind, name)
        return True
    except NotFound:
        return False


# -- Device ----------------------------------------------------------------------------------------


class NVMLError(Exception):
    pass


def fake_nvml(gpus: list[dict], *, init_error: Exception | None = None) -> types.SimpleNamespace:
    """The lowest-level fake: a stand-in for the ``pynvml`` module with the functions discovery calls."""
    state = {"init": 0, "shutdown": 0}

    def init():
        if init_error is not None:
            raise init_error
        state["init"] += 1

    def shutdown():
        state["shutdown"] += 1

    return types.SimpleNamespace(
        state=state, nvmlInit=init, nvmlShutdown=shutdown,
        nvmlSystemGetDriverVersion=lambda: b"535.104.05",
        nvmlDeviceGetCount=lambda: len(gpus),
        nvmlDeviceGetHandleByIndex=lambda i: gpus[i],
        nvmlDeviceGetUUID=lambda h: h["uuid"],
        nvmlDeviceGetMinorNumber=lambda h: h["minor"],
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(total=h["memory"], used=0, free=h["memory"]),
        nvmlDeviceGetPciInfo=lambda h: types.SimpleNamespace(busId=h["bus"]),
        nvmlDeviceGetName=lambda h: h["name"],
    )


def pci_tree(root: str) -> None:
    """sysfs PCI devices: 0000:3b:00.0 under root pci0000:3a on NUMA node 1; 0000:86:00.0 with numa_node -1."""
    for bus, parent, numa in (("0000:3b:00.0", "pci0000:3a/0000:3a:00.0", "1"), ("0000:86:00.0", "pci0000:85", "-1")):
        real = os.path.join(root, "devices", parent, bus)
        os.makedirs(real)
        with open(os.path.join(real, "numa_node"), "w") as f:
            f.write(numa + "\n")
        link_dir = os.path.join(root, "bus", "pci", "devices")
        os.makedirs(link_dir, exist_ok=True)
        os.symlink(real, os.path.join(link_dir, bus))


GPUS = [
    {"uuid": "GPU-bbb", "minor": 1, "memory": 80 * GiB, "bus": "00000000:86:00.0", "name": "NVIDIA H100 80GB HBM3"},
    {"uuid": "GPU-aaa", "minor": 0, "memory": 80 * GiB, "bus": "00000000:3B:00.0", "name": "NVIDIA H100 80GB HBM3"},
]


def test_no_device_without_nvml(api, informers, cache, caplog):
    caplog.set_level(logging.INFO, logger="koordinator.koordlet")
    node_name = unique("nogpu")
    make_node(api, node_name)
    states = started_states(informers, node_name)
    # nvidia-ml-py is not installed here: the real import path finds nothing
    reporter = DeviceReporter(api, states, cache)
    stop = threading.Event()
    reporter.run(stop)  # returns at once: nothing will ever be reported
    assert reporter.inventory() is None
    assert "no Device reported" in caplog.text
    # a library whose init fails (no driver) is the same, and is shut down cleanly
    broken = DeviceReporter(api, states, cache, nvml=fake_nvml(GPUS, init_error=NVMLError("Driver Not Loaded")))
    assert broken.sync_once() is False
    assert "Driver Not Loaded" in caplog.text
    assert not _exists(api, "Device", node_name)
    assert cache.get_kv(k.KV_GPU_DEVICES) is None
    assert caplog.text.count("ERROR") == 0


def test_device_built_from_nvml(api, informers, cache, tmp_path):
    sys_root = str(tmp_path / "sys")
    pci_tree(sys_root)
    node_name = unique("gpu-node")
    node = make_node(api, node_name)
    states = started_states(informers, node_name)
    nvml = fake_nvml(GPUS)
    reporter = DeviceReporter(api, states, cache, nvml=nvml, sys_root=sys_root)
    assert reporter.sync_once() is True
    assert nvml.state == {"init": 1, "shutdown": 1}
    device = api.get("Device", node_name)
    assert device["metadata"]["labels"] == {"node.koordinator.sh/gpu-vendor": "nvidia",
                                            "node.koordinator.sh/gpu-model": "NVIDIA-H100-80GB-HBM3",
                                            "node.koordinator.sh/gpu-driver-version": "535.104.05"}
    assert device["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    gpu = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi",
           "koordinator.sh/gpu-memory-ratio": "100"}
    assert device["spec"]["devices"] == [
        {"id": "GPU-aaa", "minor": 0, "type": "gpu", "health": True, "resources": gpu,
         "topology": {"socketID": -1, "nodeID": 1, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"}},
        {"id": "GPU-bbb", "minor": 1, "type": "gpu", "health": True, "resources": gpu,
         "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:85", "busID": "0000:86:00.0"}}]
    assert cache.get_kv(k.KV_GPU_DEVICES) == [{"minor": 0, "uuid": "GPU-aaa"}, {"minor": 1, "uuid": "GPU-bbb"}]
    # unchanged: no write, and NVML is not asked again
    rv = device["metadata"]["resourceVersion"]
    assert reporter.sync_once() is False
    assert api.get("Device", node_name)["metadata"]["resourceVersion"] == rv
    assert nvml.state["init"] == 1
    # someone else changed the devices: put back
    device["spec"]["devices"] = device["spec"]["devices"][:1]
    api.update(device)
    assert reporter.sync_once() is True
    assert len(api.get("Device", node_name)["spec"]["devices"]) == 2


def test_nvml_discovery_details(tmp_path, caplog):
    assert sysfs_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert label_value("NVIDIA A100-SXM4 (80GB)") == "NVIDIA-A100-SXM4-80GB"
    flaky = dict(GPUS[0])
    nvml = fake_nvml([flaky, GPUS[1]])
    nvml.nvmlDeviceGetUUID = lambda h: (_ for _ in ()).throw(NVMLError("GPU is lost")) if h is flaky else h["uuid"]
    inventory = discover_gpus(nvml, sys_root=str(tmp_path))
    assert [g.uuid for g in inventory.gpus] == ["GPU-aaa"]  # the lost GPU is left out ...
    assert inventory.gpus[0].numa_node == 0 and inventory.gpus[0].pcie_id == ""  # ... and sysfs knows nothing
    assert "GPU index 0 left out: GPU is lost" in caplog.text
    assert nvml.state["shutdown"] == 1
