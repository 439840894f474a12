"""koordlet states informer: NodeSLO/NodeMetric spec merges, PodMeta, the informer against the embedded
API server, and pods from a kubelet ``/pods/`` endpoint (a tiny HTTP server on 127.0.0.1)."""

from __future__ import annotations

import copy
import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import pytest

from koordinator.apis.nodeslo_defaults import default_node_slo_spec
from koordinator.runtime.client import Client
from koordinator.runtime.errors import AlreadyExists
from koordinator.runtime.informer import InformerFactory
from koordinator_roles.koordlet.statesinformer.kubelet import KubeletClient, KubeletError, parse_kubelet_addr, poll_pods
from koordinator_roles.koordlet.statesinformer.nodemetric_spec import aggregate_durations, merge_node_metric_spec
from koordinator_roles.koordlet.statesinformer.nodeslo import merge_node_slo_spec
from koordinator_roles.koordlet.statesinformer.states import PodMeta, StatesInformer, pod_meta
from koordinator_roles.koordlet.system.cgroup import CgroupLayout
from tests.waiting import wait_until

NS = "koordlet"
SLO = "slo.koordinator.sh/v1alpha1"
LAYOUT = CgroupLayout(version=2, driver="systemd", cgroup_root="/sys/fs/cgroup")

NONE_CPU = {"enable": False, "groupIdentity": 0, "schedIdle": 0, "coreExpeller": False}
NONE_RESCTRL = {"enable": False, "catRangeStartPercent": 0, "catRangeEndPercent": 100, "mbaPercent": 100}
NONE_MEMORY = {"enable": False, "minLimitPercent": 0, "lowLimitPercent": 0, "throttlingPercent": 0, "wmarkRatio": 0,
               "wmarkScalePermill": 50, "wmarkMinAdj": 0, "priorityEnable": 0, "priority": 0, "oomKillGroup": 0}


# -- helpers shared with test_koordlet_reporter -------------------------------------------------------


class FakeKubelet:
    """A kubelet stand-in on 127.0.0.1: serves ``/pods/`` and ``/configz`` from attributes, counts requests.

    ``pods`` is a list (served as a PodList), or an int HTTP status to fail with.
    """

    def __init__(self) -> None:
        self.pods: Any = []
        self.configz: Any = {"kubeletconfig": {}}
        self.requests: list[tuple[str, str | None]] = []  # (path, Authorization)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake.requests.append((self.path, self.headers.get("Authorization")))
                body = fake.pods if self.path == "/pods/" else fake.configz if self.path == "/configz" else 404
                if isinstance(body, int):
                    self.send_response(body)
                    self.end_headers()
                    return
                if self.path == "/pods/":
                    body = {"kind": "PodList", "apiVersion": "v1", "items": body}
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "FakeKubelet":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(5)

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if p == path)


def make_node(client: Client, name: str, *, labels: dict | None = None, annotations: dict | None = None,
              capacity: dict | None = None, allocatable: dict | None = None) -> dict:
    capacity = capacity or {"cpu": "8", "memory": "16Gi", "pods": "110"}
    return client.create({"apiVersion": "v1", "kind": "Node",
                          "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
                          "status": {"capacity": capacity, "allocatable": allocatable or dict(capacity)}})


def make_pod(client: Client, name: str, node: str, *, labels: dict | None = None, annotations: dict | None = None,
             requests: dict | None = None, limits: dict | None = None, phase: str | None = None,
             container_id: str | None = None) -> dict:
    resources: dict = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    pod = client.create({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": name, "namespace": NS, "labels": labels or {},
                                      "annotations": annotations or {}},
                         "spec": {"nodeName": node, "containers": [{"name": "main", "image": "busybox",
                                                                    "resources": resources}]}})
    if phase or container_id:
        pod["status"] = {**(pod.get("status") or {}), "phase": phase or "Running"}
        if container_id:
            pod["status"]["containerStatuses"] = [{"name": "main", "containerID": container_id, "ready": True,
                                                   "restartCount": 0, "image": "busybox", "imageID": "",
                                                   "state": {"running": {}}}]
        pod = client.update_status(pod)
    return pod


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


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


# -- NodeSLO merge (A.6.2) -------------------------------------------------------------------------


def test_nodeslo_defaults_when_nothing_is_configured():
    merged = merge_node_slo_spec(None)
    assert merge_node_slo_spec({}) == merged
    # What the manager writes without any ConfigMap key (resourceQOSStrategy {}) changes nothing.
    manager_default = {"resourceUsedThresholdWithBE": {"enable": False, "cpuSuppressThresholdPercent": 65,
                                                       "cpuSuppressPolicy": "cpuset", "memoryEvictThresholdPercent": 70,
                                                       "cpuEvictPolicy": "evictByRealLimit"},
                       "resourceQOSStrategy": {}, "cpuBurstStrategy": {"policy": "none", "cpuBurstPercent": 1000,
                                                                        "cfsQuotaBurstPercent": 300,
                                                                        "cfsQuotaBurstPeriodSeconds": -1,
                                                                        "sharePoolThresholdPercent": 50},
                       "systemStrategy": {"totalNetworkBandwidth": "0"}, "extensions": {}}
    assert merge_node_slo_spec(manager_default) == merged
    assert merged["resourceUsedThresholdWithBE"] == manager_default["resourceUsedThresholdWithBE"]
    assert merged["cpuBurstStrategy"] == manager_default["cpuBurstStrategy"]
    assert merged["systemStrategy"] == {"totalNetworkBandwidth": "0"}
    assert "hostApplications" not in merged and merged["extensions"] == {}
    qos = merged["resourceQOSStrategy"]
    assert qos["policies"] == {"cpuPolicy": "groupIdentity", "netQOSPolicy": "tc"}
    # Every feature is disabled by default, so LSR/LS/BE carry the "none" values ...
    for cls in ("lsrClass", "lsClass", "beClass"):
        assert qos[cls]["cpuQOS"] == NONE_CPU
        assert qos[cls]["resctrlQOS"] == NONE_RESCTRL
        assert qos[cls]["memoryQOS"] == NONE_MEMORY
        assert qos[cls]["blkioQOS"] == {"enable": False}
        assert qos[cls]["networkQOS"] == {"enable": False, "ingressRequest": 0, "ingressLimit": 0,
                                          "egressRequest": 0, "egressLimit": 0}
    # ... while SYSTEM keeps its own defaults and cgroupRoot only has blkio.
    assert qos["systemClass"]["cpuQOS"] == {"enable": False, "groupIdentity": 0, "schedIdle": 0,
                                            "coreExpeller": False}
    assert qos["systemClass"]["memoryQOS"]["wmarkScalePermill"] == 50
    assert qos["cgroupRoot"] == {"blkioQOS": {"enable": False}}
    # the defaults themselves are untouched by merging
    assert default_node_slo_spec()["resourceQOSStrategy"]["beClass"]["cpuQOS"]["groupIdentity"] == -1


def test_nodeslo_enabled_features_keep_class_defaults_and_overrides():
    spec = {
        "resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 0},
        "resourceQOSStrategy": {
            "lsrClass": {"cpuQOS": {"enable": True}, "resctrlQOS": {"enable": True}},
            "lsClass": {"cpuQOS": {"enable": False, "groupIdentity": 2}},
            "beClass": {"memoryQOS": {"enable": True, "wmarkRatio": 80},
                        "resctrlQOS": {"enable": True, "catRangeEndPercent": 50},
                        "blkioQOS": {"enable": True, "blocks": [{"name": "/dev/vda", "type": "device"}]}},
            "policies": {"cpuPolicy": "coreSched"},
        },
        "cpuBurstStrategy": {"policy": "auto", "cfsQuotaBurstPeriodSeconds": 0},
        "systemStrategy": {"minFreeKbytesFactor": 100, "schedFeatures": {"ID_ABSOLUTE_EXPELLER": True}},
        "extensions": {"vendor": {"a": 1}},
        "hostApplications": [{"name": "nginx", "qos": "LS", "priority": "koord-prod"}],
    }
    frozen = copy.deepcopy(spec)
    merged = merge_node_slo_spec(spec)
    assert spec == frozen
    assert merged["resourceUsedThresholdWithBE"] == {
        "enable": True, "cpuSuppressThresholdPercent": 0,  # explicit 0 overrides
        "cpuSuppressPolicy": "cpuset", "memoryEvictThresholdPercent": 70, "cpuEvictPolicy": "evictByRealLimit"}
    qos = merged["resourceQOSStrategy"]
    assert qos["policies"] == {"cpuPolicy": "coreSched", "netQOSPolicy": "tc"}
    assert qos["lsrClass"]["cpuQOS"] == {"enable": True, "groupIdentity": 2, "schedIdle": 0, "coreExpeller": True}
    assert qos["lsrClass"]["resctrlQOS"] == {"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 100,
                                             "mbaPercent": 100}
    assert qos["lsrClass"]["memoryQOS"] == NONE_MEMORY
    assert qos["lsClass"]["cpuQOS"] == NONE_CPU  # disabled: the override's values are reset to none
    assert qos["beClass"]["memoryQOS"] == {"enable": True, "minLimitPercent": 0, "lowLimitPercent": 0,
                                           "throttlingPercent": 0, "wmarkRatio": 80, "wmarkScalePermill": 20,
                                           "wmarkMinAdj": 50, "priorityEnable": 0, "priority": 0, "oomKillGroup": 0}
    assert qos["beClass"]["resctrlQOS"] == {"enable": True, "catRangeStartPercent": 0, "catRangeEndPercent": 50,
                                            "mbaPercent": 100}
    assert qos["beClass"]["blkioQOS"] == {"enable": True, "blocks": [{"name": "/dev/vda", "type": "device"}]}
    assert qos["beClass"]["cpuQOS"] == NONE_CPU
    assert merged["cpuBurstStrategy"] == {"policy": "auto", "cpuBurstPercent": 1000, "cfsQuotaBurstPercent": 300,
                                          "cfsQuotaBurstPeriodSeconds": 0, "sharePoolThresholdPercent": 50}
    assert merged["systemStrategy"] == {"totalNetworkBandwidth": "0", "minFreeKbytesFactor": 100,
                                        "schedFeatures": {"ID_ABSOLUTE_EXPELLER": True}}
    assert merged["extensions"] == {"vendor": {"a": 1}}
    assert merged["hostApplications"] == frozen["hostApplications"]


def test_nodeslo_bad_strategy_type_keeps_defaults(caplog):
    merged = merge_node_slo_spec({"cpuBurstStrategy": "auto"})
    assert merged["cpuBurstStrategy"] == merge_node_slo_spec(None)["cpuBurstStrategy"]
    assert "spec.cpuBurstStrategy" in caplog.text


# -- NodeMetric spec (A.6.3) -----------------------------------------------------------------------


def test_node_metric_spec_defaults_and_minimums():
    assert merge_node_metric_spec(None) == {"metricCollectPolicy": {
        "aggregateDurationSeconds": 300, "reportIntervalSeconds": 60,
        "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "nodeMemoryCollectPolicy": "usageWithoutPageCache"}}
    policy = merge_node_metric_spec({"metricCollectPolicy": {
        "aggregateDurationSeconds": 20, "reportIntervalSeconds": 10, "nodeAggregatePolicy": {"durations": []},
        "nodeMemoryCollectPolicy": "usageWithPageCache"}})["metricCollectPolicy"]
    assert policy == {"aggregateDurationSeconds": 60, "reportIntervalSeconds": 30,
                      "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
                      "nodeMemoryCollectPolicy": "usageWithPageCache"}
    policy = merge_node_metric_spec({"metricCollectPolicy": {
        "aggregateDurationSeconds": 600, "nodeAggregatePolicy": {"durations": ["1m", "1h"]}}})["metricCollectPolicy"]
    assert policy["aggregateDurationSeconds"] == 600 and policy["reportIntervalSeconds"] == 60
    assert aggregate_durations(policy) == [("1m", 60.0), ("1h", 3600.0)]


def test_aggregate_durations_skip_bad_entries(caplog):
    policy = {"nodeAggregatePolicy": {"durations": ["5m", "soon", "-1m", 7]}}
    assert aggregate_durations(policy) == [("5m", 300.0)]
    assert "'soon'" in caplog.text and "'-1m'" in caplog.text


# -- PodMeta ---------------------------------------------------------------------------------------


def test_pod_meta_cgroup_dirs_and_containers():
    pod = {"metadata": {"name": "p", "namespace": "ns", "uid": "1-2-3"},
           "spec": {"containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}]},
           "status": {"qosClass": "Burstable", "containerStatuses": [
               {"name": "a", "containerID": "containerd://aaa"}, {"name": "b"},
               {"name": "c", "containerID": "weird://ccc"}]}}
    meta = pod_meta(pod, LAYOUT)
    assert (meta.uid, meta.namespace, meta.name, meta.kube_qos) == ("1-2-3", "ns", "p", "Burstable")
    assert meta.cgroup_dir == "kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1_2_3.slice"
    # b has no container ID yet; c's runtime is unknown to the systemd layout: both left out
    assert meta.containers() == [("a", "containerd://aaa", meta.cgroup_dir + "/cri-containerd-aaa.scope")]
    cgroupfs = pod_meta(pod, CgroupLayout(version=1, driver="cgroupfs", cgroup_root="/x"))
    assert cgroupfs.cgroup_dir == "kubepods/burstable/pod1-2-3"
    assert cgroupfs.containers() == [("a", "containerd://aaa", "kubepods/burstable/pod1-2-3/aaa"),
                                     ("c", "weird://ccc", "kubepods/burstable/pod1-2-3/ccc")]
    with pytest.raises(ValueError, match="ns/q: no metadata.uid"):
        pod_meta({"metadata": {"name": "q", "namespace": "ns"}}, LAYOUT)
    assert PodMeta(pod=pod, cgroup_dir="x").containers() == [("a", "containerd://aaa", ""),
                                                             ("c", "weird://ccc", "")]


# -- against the API server ------------------------------------------------------------------------


class Counter:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def __call__(self) -> None:
        with self.lock:
            self.n += 1


def test_states_follow_node_pods_nodeslo_and_nodemetric(api, informers):
    node = unique("states")
    other = unique("other")
    make_node(api, node, labels={"pool": "a"})
    running = make_pod(api, unique("run"), node, requests={"cpu": "100m"}, container_id="containerd://c1")
    done = make_pod(api, unique("done"), node, phase="Succeeded")
    make_pod(api, unique("elsewhere"), other)
    api.create({"apiVersion": SLO, "kind": "NodeSLO", "metadata": {"name": node},
                "spec": {"resourceQOSStrategy": {"beClass": {"cpuQOS": {"enable": True}}},
                         "hostApplications": [{"name": "nginx", "qos": "LS"}]}})
    states = StatesInformer(informers, node, LAYOUT)
    counters = {kind: Counter() for kind in ("node", "pods", "nodeslo", "nodemetric")}
    for kind, counter in counters.items():
        states.register_callback(kind, "test", counter)
    with pytest.raises(ValueError, match="unknown states callback kind"):
        states.register_callback("pod", "x", lambda: None)
    assert not states.has_synced()
    informers.start()
    wait_until(states.has_synced, message="states synced")

    assert states.node()["metadata"]["labels"] == {"pool": "a"}
    pods = states.pods()
    assert [p.name for p in pods] == [running["metadata"]["name"]]  # terminated and foreign pods left out
    assert pods[0].cgroup_dir == LAYOUT.pod_dir("Burstable", running["metadata"]["uid"])
    assert pods[0].containers()[0][1] == "containerd://c1"
    assert states.node_slo()["resourceQOSStrategy"]["beClass"]["cpuQOS"] == {
        "enable": True, "groupIdentity": -1, "schedIdle": 0, "coreExpeller": False}
    assert states.host_applications() == [{"name": "nginx", "qos": "LS"}]
    assert states.node_metric() is None
    assert states.node_metric_spec() == merge_node_metric_spec(None)
    wait_until(lambda: all(counters[k].n == 1 for k in ("node", "pods", "nodeslo")), message="initial callbacks")
    assert counters["nodemetric"].n == 0

    # Node: a status-only change fires nothing, a label change fires once.
    current = api.get("Node", node)
    current["status"]["allocatable"]["cpu"] = "7"
    api.update_status(current)
    current = api.get("Node", node)
    current["metadata"]["labels"]["pool"] = "b"
    api.update(current)
    wait_until(lambda: counters["node"].n == 2, message="node callback")
    wait_until(lambda: states.node()["metadata"]["labels"] == {"pool": "b"})
    assert counters["node"].n == 2

    # Pods: a new pod shows up, a finished one goes.
    second = make_pod(api, unique("second"), node)
    wait_until(lambda: len(states.pods()) == 2, message="second pod")
    assert counters["pods"].n >= 2
    second["status"] = {**(second.get("status") or {}), "phase": "Failed"}
    api.update_status(second)
    wait_until(lambda: [p.name for p in states.pods()] == [running["metadata"]["name"]], message="pod finished")
    del done

    # NodeSLO: changed, then deleted (defaults again).
    slo = api.get("NodeSLO", node)
    slo["spec"]["resourceQOSStrategy"]["beClass"]["cpuQOS"]["enable"] = False
    api.update(slo)
    wait_until(lambda: states.node_slo()["resourceQOSStrategy"]["beClass"]["cpuQOS"] == NONE_CPU)
    api.delete("NodeSLO", node)
    wait_until(lambda: states.host_applications() == [], message="NodeSLO deleted")
    assert states.node_slo() == merge_node_slo_spec(None)
    assert counters["nodeslo"].n == 3

    # NodeMetric: seen, then its spec changes.
    api.create({"apiVersion": SLO, "kind": "NodeMetric", "metadata": {"name": node},
                "spec": {"metricCollectPolicy": {"reportIntervalSeconds": 45}}})
    wait_until(lambda: states.node_metric() is not None, message="NodeMetric seen")
    assert states.node_metric_spec()["metricCollectPolicy"]["reportIntervalSeconds"] == 45
    nm = api.get("NodeMetric", node)
    nm["spec"]["metricCollectPolicy"]["reportIntervalSeconds"] = 5
    api.update(nm)
    wait_until(lambda: counters["nodemetric"].n == 2, message="nodemetric callbacks")
    assert states.node_metric_spec()["metricCollectPolicy"]["reportIntervalSeconds"] == 30  # floor


def test_callbacks_are_coalesced_and_isolated(api, informers):
    node = unique("coalesce")
    make_node(api, node)
    states = StatesInformer(informers, node, LAYOUT)
    started, release = threading.Event(), threading.Event()
    runs = []

    def slow() -> None:
        runs.append(1)
        started.set()
        release.wait(10)

    def broken() -> None:
        raise RuntimeError("consumer bug")

    states.register_callback("node", "broken", broken)
    states.register_callback("node", "slow", slow)
    informers.start()
    wait_until(started.is_set, message="first callback run")
    # Three label changes while the first run blocks the delivery thread ...
    for i in range(3):
        current = api.get("Node", node)
        current["metadata"]["labels"] = {"round": str(i)}
        api.update(current)
    # ... and a direct fire from another thread while it runs: absorbed into one pending run.
    other = threading.Thread(target=states._callbacks["node"].fire)
    other.start()
    other.join(5)
    assert runs == [1]
    release.set()
    wait_until(lambda: states.node()["metadata"]["labels"] == {"round": "2"})
    wait_until(lambda: len(runs) >= 2)
    assert len(runs) <= 5  # 1 + the pending run + at most one per queued event, never more


def test_states_require_a_node_name(informers):
    with pytest.raises(ValueError, match="--node-name"):
        StatesInformer(informers, "", LAYOUT)


# -- kubelet ---------------------------------------------------------------------------------------


def kubelet_pod(name: str, uid: str, phase: str = "Running", qos: str = "BestEffort") -> dict:
    return {"metadata": {"name": name, "namespace": "default", "uid": uid},
            "spec": {"containers": [{"name": "c"}]}, "status": {"phase": phase, "qosClass": qos}}


def test_kubelet_addr_parsing():
    assert parse_kubelet_addr("https://10.0.0.1:10250/") == "https://10.0.0.1:10250"
    assert parse_kubelet_addr("http://node:10255") == "http://node:10255"
    for bad in ("10.0.0.1:10250", "ftp://x", "https://x:port", "https://x:10250/pods"):
        with pytest.raises(ValueError, match="--kubelet-addr"):
            parse_kubelet_addr(bad)


def test_kubelet_token_only_over_https(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    assert KubeletClient("https://127.0.0.1:10250", token_path=str(token))._token() == "s3cret"
    assert KubeletClient("http://127.0.0.1:10255", token_path=str(token))._token() is None
    assert KubeletClient("https://127.0.0.1:10250", token_path=str(tmp_path / "missing"))._token() is None


def test_kubelet_client_errors_name_the_url():
    with FakeKubelet() as kubelet:
        client = KubeletClient(kubelet.url, timeout=2)
        kubelet.pods = 500
        with pytest.raises(KubeletError, match=r"GET http://127\.0\.0\.1:\d+/pods/: HTTP 500"):
            client.pods()
        kubelet.configz = {"nothing": 1}
        with pytest.raises(KubeletError, match="no kubeletconfig"):
            client.configz()
        kubelet.configz = {"kubeletconfig": {"cpuManagerPolicy": "static"}}
        assert client.configz() == {"cpuManagerPolicy": "static"}
    with pytest.raises(KubeletError, match="GET http://127.0.0.1:1/pods/"):
        KubeletClient("http://127.0.0.1:1", timeout=2).pods()


def test_pods_from_the_kubelet_keep_the_previous_list_on_errors(api, informers, caplog):
    node = unique("kubelet")
    make_node(api, node)
    with FakeKubelet() as kubelet:
        kubelet.pods = [kubelet_pod("a", "uid-a"), kubelet_pod("done", "uid-d", phase="Succeeded"),
                        kubelet_pod("b", "uid-b", qos="Guaranteed")]
        states = StatesInformer(informers, node, LAYOUT, kubelet=KubeletClient(kubelet.url, timeout=2),
                                kubelet_sync_interval=0.02)
        calls = Counter()
        states.register_callback("pods", "test", calls)
        informers.start()
        stop = threading.Event()
        loop = threading.Thread(target=states.run, args=(stop,))
        loop.start()
        try:
            wait_until(states.has_synced, message="kubelet pods synced")
            assert [(p.name, p.cgroup_dir) for p in states.pods()] == [
                ("a", "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-poduid_a.slice"),
                ("b", "kubepods.slice/kubepods-poduid_b.slice")]
            assert calls.n == 1
            # The same list again: no callback. An error, then an empty list: the previous pods stay.
            seen = kubelet.count("/pods/")
            wait_until(lambda: kubelet.count("/pods/") >= seen + 2)
            for answer in (503, []):
                kubelet.pods = answer
                seen = kubelet.count("/pods/")
                wait_until(lambda: kubelet.count("/pods/") >= seen + 3)
                assert [p.name for p in states.pods()] == ["a", "b"]
            assert calls.n == 1
            assert caplog.text.count("HTTP 503") == 1  # logged once, not every round
            kubelet.pods = [kubelet_pod("c", "uid-c")]
            wait_until(lambda: [p.name for p in states.pods()] == ["c"], message="new pod list")
            assert calls.n == 2
            assert all(auth is None for _, auth in kubelet.requests)  # no token over plain HTTP
        finally:
            stop.set()
            loop.join(5)
        assert not loop.is_alive()


def test_poll_pods_survives_a_consumer_bug(caplog):
    with FakeKubelet() as kubelet:
        kubelet.pods = [kubelet_pod("a", "uid-a")]
        stop = threading.Event()
        seen = []

        def consume(pods):
            seen.append(pods)
            if len(seen) == 1:
                raise RuntimeError("boom")
            stop.set()

        poll_pods(KubeletClient(kubelet.url, timeout=2), consume, stop, 0.01)
        assert len(seen) == 2 and "handling the kubelet pod list failed" in caplog.text
