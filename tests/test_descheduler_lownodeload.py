"""LowNodeLoad (koord-descheduler balance plugin, reference §1.6).

Unit tests feed nodes, pods and NodeMetrics into real informer caches (an InformerFactory whose stores are
filled with ``replace``, no server) and evict through a small recording Evictor — the plugin API's
boundary. One test runs the plugin against the embedded API server with started informers.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from koordinator.runtime.client import Client
from koordinator.runtime.informer import InformerFactory
from koordinator.runtime.kubeconfig import ClusterConfig
from koordinator_roles.descheduler.framework.handle import PluginHandle
from koordinator_roles.descheduler.plugins.lownodeload import NAME, LowNodeLoad, new
from koordinator_roles.descheduler.plugins.lownodeload.args import DEFAULT_NODE_POOL, AnomalyCondition, parse_args
from koordinator_roles.descheduler.plugins.lownodeload.detector import ANOMALY, OK, AnomalyDetector, DetectorCache
from koordinator_roles.descheduler.plugins.lownodeload.podorder import sort_pods, usage_fit_score
from koordinator_roles.descheduler.plugins.lownodeload.thresholds import node_thresholds, normalize
from koordinator_roles.descheduler.plugins.lownodeload.usage import collect
from tests import descheduler_fixtures as fixtures
from tests.waiting import wait_until

NOW = datetime(2026, 11, 27, 12, 0, 0, tzinfo=timezone.utc)
NS = "default"


def ts(offset_s: float = 0) -> str:
    return (NOW + timedelta(seconds=offset_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- object builders -------------------------------------------------------------------------------

def node(name: str, cpu: str = "4", memory: str = "3000", pods: str = "10", *, unschedulable: bool = False,
         labels: dict | None = None, annotations: dict | None = None, taints: list | None = None) -> dict:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods}
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": spec, "status": {"allocatable": alloc, "capacity": alloc}}


def pod(name: str, node_name: str, cpu: str = "400m", *, owner: str = "ReplicaSet", created: float = 0,
        labels: dict | None = None, annotations: dict | None = None, priority: int | None = None,
        namespace: str = NS, phase: str = "Running", qos: str = "Burstable") -> dict:
    spec: dict[str, Any] = {"nodeName": node_name,
                            "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels or {},
                         "annotations": annotations or {}, "creationTimestamp": ts(created),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner, "name": "o", "uid": "o"}]},
            "spec": spec, "status": {"phase": phase, "qosClass": qos}}


def metric(node_name: str, pod_usage: dict[str, dict[str, str]], *, updated: float = 0,
           system: dict | None = None, namespace: str = NS) -> dict:
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node_name},
            "status": {"updateTime": ts(updated),
                       "nodeMetric": {"nodeUsage": {"resources": {}},
                                      "systemUsage": {"resources": dict(system or {})}},
                       "podsMetric": [{"namespace": namespace, "name": n, "podUsage": {"resources": u}}
                                      for n, u in pod_usage.items()]}}


def usage_of(pods: list[dict]) -> dict[str, dict[str, str]]:
    """Pod metrics equal to the pods' cpu requests (as in Koordinator's unit test)."""
    return {p["metadata"]["name"]: {"cpu": p["spec"]["containers"][0]["resources"]["requests"]["cpu"]}
            for p in pods}


class RecordingEvictor(fixtures.RecordingEvictor):
    """The shared recording evictor with the default filters' essentials (no DaemonSet, mirror or
    system-critical pods); the evictions of ``refuse`` pods fail."""

    def __init__(self, refuse: set[str] | None = None) -> None:
        refused = refuse or set()
        super().__init__(fail=lambda p: p["metadata"]["name"] in refused)

    def filter(self, pod: dict) -> bool:
        meta = pod["metadata"]
        if any(o.get("kind") == "DaemonSet" for o in meta.get("ownerReferences") or ()):
            return False
        if "kubernetes.io/config.mirror" in (meta.get("annotations") or {}):
            return False
        return (pod["spec"].get("priority") or 0) < 2_000_000_000


def offline_informers(nodes: list[dict], pods: list[dict], metrics: list[dict]) -> InformerFactory:
    """Real informer caches, filled in memory (never started: nothing to connect to)."""
    factory = InformerFactory(Client(ClusterConfig(host="http://127.0.0.1:1")))
    factory.informer("Node").replace(nodes, "1")
    factory.informer("Pod").replace(pods, "1")
    factory.informer("NodeMetric").replace(metrics, "1")
    return factory


class Cluster:
    """Nodes, pods and metrics in informer caches, a plugin over them and a clock."""

    def __init__(self, args: dict, nodes: list[dict], pods: list[dict], metrics: list[dict],
                 evictor: RecordingEvictor | None = None) -> None:
        self.nodes = nodes
        self.now = NOW.timestamp()
        self.informers = offline_informers(nodes, pods, metrics)
        pod_store = self.informers.informer("Pod").store
        self.evictor = evictor or RecordingEvictor()
        self.handle = PluginHandle(informers=self.informers, evictor=self.evictor,
                                   pod_index=lambda n: pod_store.by_index("spec.nodeName", n))
        self.plugin = LowNodeLoad(parse_args(args), self.handle, clock=lambda: self.now)

    def round(self) -> list[str]:
        before = len(self.evictor.evicted)
        assert self.plugin.balance(self.nodes) is None
        return self.evictor.names[before:]


def worked_example(args: dict | None = None, evictor: RecordingEvictor | None = None) -> Cluster:
    """§1.6.7: n1 runs 8 pods of 400m (5 evictable), n2 one, n3 is unschedulable."""
    n1_pods = [pod(f"p{i}", "n1", created=i) for i in range(1, 6)]
    n1_pods += [pod("ds", "n1", owner="DaemonSet"),
                pod("mirror", "n1", annotations={"kubernetes.io/config.mirror": "x"}),
                pod("critical", "n1", priority=2_000_000_000)]
    n2_pods = [pod("q1", "n2")]
    nodes = [node("n1", pods="9"), node("n2"), node("n3", unschedulable=True)]
    metrics = [metric("n1", usage_of(n1_pods)), metric("n2", usage_of(n2_pods)), metric("n3", {})]
    base = {"lowThresholds": {"cpu": 30, "pods": 30}, "highThresholds": {"cpu": 50, "pods": 50},
            "anomalyCondition": {"consecutiveAbnormalities": 1}}
    return Cluster({**base, **(args or {})}, nodes, [*n1_pods, *n2_pods], metrics, evictor)


# -- the worked example and the round's gates ------------------------------------------------------

def test_worked_example_evicts_four_pods_with_reason():
    cluster = worked_example()
    evicted = cluster.round()
    # p1..p4 fit n2 under its 50% cpu (2000m); p5 would take it to 2400m. Newer pods go first.
    assert evicted == ["p4", "p3", "p2", "p1"]
    options = [o for _, o in cluster.evictor.evicted]
    assert {o.plugin_name for o in options} == {NAME}
    # The reason describes the node as it is at each eviction.
    assert [o.reason for o in options] == [
        "node is overutilized, node cpu usage(80.00%)>threshold(50.00%), node pods usage(88.89%)>threshold(50.00%)",
        "node is overutilized, node cpu usage(70.00%)>threshold(50.00%), node pods usage(77.78%)>threshold(50.00%)",
        "node is overutilized, node cpu usage(60.00%)>threshold(50.00%), node pods usage(66.67%)>threshold(50.00%)",
        "node is overutilized, node pods usage(55.56%)>threshold(50.00%)",
    ]


def test_node_fit_off_still_stops_when_the_source_is_no_longer_hot():
    cluster = worked_example({"nodeFit": False})
    assert cluster.round() == ["p5", "p4", "p3", "p2"]


def test_dry_run_evicts_nothing_but_does_the_bookkeeping():
    cluster = worked_example({"dryRun": True})
    assert cluster.round() == []
    assert cluster.evictor.attempts == []
    assert cluster.plugin.last_round_evictions == 4


def test_paused_does_nothing():
    cluster = worked_example({"paused": True})
    assert cluster.round() == []


def test_evictor_refusing_a_pod_skips_it_without_using_budget():
    cluster = worked_example(evictor=RecordingEvictor(refuse={"p3", "p2"}))
    evicted = cluster.round()
    # p3 and p2 are refused; they stay counted on n1, so p1 is still needed and nothing else is removable
    # (p5 does not fit n2). The node stays hot.
    assert evicted == ["p4", "p1"]
    assert cluster.evictor.attempts == ["p4", "p3", "p2", "p1"]


def test_pods_failing_the_filter_at_eviction_time_are_skipped():
    class ChangingMind(RecordingEvictor):
        """Lets p3 through while candidates are chosen, refuses it when its turn comes."""

        def filter(self, pod: dict) -> bool:
            if pod["metadata"]["name"] == "p3" and self.attempts:
                return False
            return super().filter(pod)

    cluster = worked_example(evictor=ChangingMind())
    assert cluster.round() == ["p4", "p2", "p1"]
    assert cluster.evictor.attempts == ["p4", "p2", "p1"]


def test_node_without_nodemetric_is_skipped():
    cluster = worked_example()
    cluster.informers.informer("NodeMetric").store.delete("n2")
    assert cluster.round() == []  # n2 was the only low node


def test_expired_nodemetric_is_skipped():
    cluster = worked_example()
    cluster.now += 180  # now − updateTime ≥ nodeMetricExpirationSeconds (180 by default)
    assert cluster.round() == []
    cluster.now -= 1
    assert len(cluster.round()) == 4


def test_nodemetric_without_node_metric_status_is_skipped():
    cluster = worked_example()
    store = cluster.informers.informer("NodeMetric").store
    stale = store.get("n1")
    store.put("n1", {**stale, "status": {"updateTime": stale["status"]["updateTime"]}})
    assert cluster.round() == []


def test_number_of_nodes_gate():
    assert worked_example({"numberOfNodes": 1}).round() == []
    assert len(worked_example({"numberOfNodes": 0}).round()) == 4


def test_evictable_namespaces_and_pod_selectors_filter_candidates():
    assert worked_example({"evictableNamespaces": {"exclude": [NS]}}).round() == []
    assert worked_example({"evictableNamespaces": {"include": ["other"]}}).round() == []
    selected = worked_example({"podSelectors": [{"name": "none", "selector": {"matchLabels": {"app": "x"}}}]})
    assert selected.round() == []
    # An entry without a selector is ignored; one matching entry is enough.
    either = worked_example({"podSelectors": [{"name": "empty"},
                                              {"name": "none", "selector": {"matchLabels": {"app": "x"}}},
                                              {"name": "all", "selector": {}}]})
    assert len(either.round()) == 4
    assert len(worked_example({"podSelectors": [{"name": "empty"}]}).round()) == 4


def test_raw_allocatable_annotation_is_the_capacity():
    cluster = worked_example()
    # n1 really has 8 cores: 3200m is 40%, under the 50% high threshold — but pods (8 > 4) stay hot.
    n1 = cluster.nodes[0]
    n1["metadata"]["annotations"]["node.koordinator.sh/raw-allocatable"] = '{"cpu": "8", "memory": "3000", "pods": "9"}'
    evicted = cluster.round()
    assert evicted == ["p4", "p3", "p2", "p1"]
    assert cluster.evictor.evicted[0][1].reason == (
        "node is overutilized, node pods usage(88.89%)>threshold(50.00%)")


def test_node_pools_in_order_and_sources_not_offered_again():
    """The default pool sees every node; a pool with a selector sees its nodes minus earlier pools' sources."""
    n1_pods = [pod(f"a{i}", "n1", created=i) for i in range(1, 9)]  # 3200m: 80%
    n3_pods = [pod(f"b{i}", "n3", created=i) for i in range(1, 7)]  # 2400m: 60%
    small = [pod("a-small", "n2"), pod("b-small", "n4")]  # 10% each
    nodes = [node("n1", labels={"pool": "a"}), node("n2", labels={"pool": "a"}),
             node("n3", labels={"pool": "b"}), node("n4", labels={"pool": "b"})]
    pods = [*n1_pods, *n3_pods, *small]
    metrics = [metric(n, usage_of([p for p in pods if p["spec"]["nodeName"] == n])) for n in ("n1", "n2", "n3", "n4")]
    strict = {"lowThresholds": {"cpu": 20}, "highThresholds": {"cpu": 50}}
    cluster = Cluster({"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 70},
                       "anomalyCondition": {"consecutiveAbnormalities": 1},
                       "nodePools": [{"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}}, **strict},
                                     {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, **strict}]},
                      nodes, pods, metrics)
    # Default pool (70%): one pod leaves n1 (3200m → 2800m). Pool b (50%): one leaves n3 (2400m → 2000m); only
    # b1..b4 fit n4 under its 2000m, b4 is the newest of them. Pool a (50%) would take more from n1, but n1
    # was a source of the default pool: pool a sees n2 only.
    assert cluster.round() == ["a8", "b4"]


# -- anomaly detection -----------------------------------------------------------------------------

def test_anomaly_needs_more_than_consecutive_abnormalities_rounds():
    cluster = worked_example({"anomalyCondition": {"consecutiveAbnormalities": 2}})
    assert cluster.round() == []
    assert cluster.round() == []
    assert len(cluster.round()) == 4  # the third consecutive hot round (strictly more than 2)
    detector = cluster.plugin.node_detectors.get("n1")
    assert detector is not None and detector.state == ANOMALY
    # Still hot (the recording evictor removes nothing): the anomaly holds, the round evicts again ...
    assert len(cluster.round()) == 4
    # ... until its timeout (1m by default) ends it; then the count starts over.
    cluster.now += 60
    assert cluster.round() == []
    assert detector.state == OK and detector.consecutive_abnormalities == 1


def test_detector_state_machine():
    t = [0.0]
    cond = AnomalyCondition(timeout_s=60, consecutive_abnormalities=5, consecutive_normalities=3)
    d = AnomalyDetector(cond, clock=lambda: t[0])
    assert [d.mark(False) for _ in range(6)] == [OK] * 5 + [ANOMALY]
    assert d.consecutive_abnormalities == 0  # counters cleared on the switch
    assert [d.mark(True) for _ in range(4)] == [ANOMALY] * 3 + [OK]
    # An anomaly ends when its timeout passes, even without normal rounds.
    for _ in range(6):
        d.mark(False)
    assert d.state == ANOMALY
    t[0] += 60
    assert d.state == OK
    # Reset of an ok detector keeps its counters.
    d.mark(False)
    d.reset()
    assert d.consecutive_abnormalities == 1


def test_detector_cache_expires_and_bypasses_with_one_abnormality():
    t = [0.0]
    cache = DetectorCache(ttl_s=300, clock=lambda: t[0])
    assert cache.real_abnormal(["a"], AnomalyCondition(60, 1, 3)) == ["a"]
    assert cache.get("a") is None  # no detector used
    cond = AnomalyCondition(60, 2, 3)
    assert cache.real_abnormal(["a"], cond) == []
    t[0] += 299
    assert cache.real_abnormal(["a"], cond) == []
    t[0] += 300  # not refreshed for a whole TTL: forgotten, counting starts over
    assert cache.real_abnormal(["a"], cond) == []
    assert cache.get("a").consecutive_abnormalities == 1


# -- thresholds ------------------------------------------------------------------------------------

def test_deviation_thresholds_around_the_mean():
    pods = [pod("a", "n1", "400m"), pod("b", "n2", "800m"), pod("c1", "n3", "1500m"), pod("c2", "n3", "2100m")]
    nodes = [node("n1"), node("n2"), node("n3")]
    metrics = [metric(n, usage_of([p for p in pods if p["spec"]["nodeName"] == n])) for n in ("n1", "n2", "n3")]
    args = parse_args({"useDeviationThresholds": True, "lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 20}})
    pool = normalize(args.node_pools[0])
    assert pool.low == {"cpu": 10, "memory": 0} and pool.high == {"cpu": 20, "memory": 0}
    usages = collect(nodes, {m["metadata"]["name"]: m for m in metrics}.get,
                     lambda n: [p for p in pods if p["spec"]["nodeName"] == n], pool.resources,
                     NOW.timestamp(), 180)
    thr = node_thresholds(pool, usages)
    # Mean cpu usage (10% + 20% + 90%) / 3 = 40%: low 30% (1200m), high 60% (2400m); memory disabled.
    assert thr["n1"].low == {"cpu": 1200, "memory": 3000} and thr["n1"].high == {"cpu": 2400, "memory": 3000}
    cluster = Cluster({"useDeviationThresholds": True, "lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 20},
                       "anomalyCondition": {"consecutiveAbnormalities": 1}}, nodes, pods, metrics)
    # c1 fits n1 (400m + 1500m ≤ 2400m), c2 fits nowhere; after c1 n3 is at 2100m, under its 2400m.
    assert cluster.round() == ["c1"]
    assert cluster.evictor.evicted[0][1].reason == "node is overutilized, node cpu usage(90.00%)>threshold(20.00%)"


def test_absolute_thresholds_truncate_and_fill_missing_resources():
    args = parse_args({"lowThresholds": {"cpu": 30}, "highThresholds": {"cpu": 50, "pods": 50},
                       "prodHighThresholds": {"cpu": 40}})
    pool = normalize(args.node_pools[0])
    # pods only in high: overwritten with 100 in both; memory always present.
    assert pool.low == {"cpu": 30, "pods": 100, "memory": 100}
    assert pool.high == {"cpu": 50, "pods": 100, "memory": 100}
    assert pool.prod_low == {"cpu": 100, "pods": 100, "memory": 100}
    # A low threshold without a high one compares against 0% (Go's zero map value).
    assert normalize(parse_args({"lowThresholds": {"cpu": 30}}).node_pools[0]).high == {"cpu": 0, "memory": 100}


def test_prod_usage_moves_prod_pods_only():
    """A node under its node thresholds but over its prod thresholds evicts prod pods to prod-low nodes."""
    prod = [pod(f"prod{i}", "n1", "1", labels={"koordinator.sh/priority-class": "koord-prod"}, created=i)
            for i in range(3)]
    batch = [pod("batch", "n1", "1", labels={"koordinator.sh/priority-class": "koord-batch"})]
    nodes = [node("n1", cpu="8"), node("n2", cpu="8")]
    metrics = [metric("n1", usage_of([*prod, *batch])), metric("n2", {})]
    cluster = Cluster({"lowThresholds": {"cpu": 60}, "highThresholds": {"cpu": 80},
                       "prodLowThresholds": {"cpu": 20}, "prodHighThresholds": {"cpu": 30},
                       "anomalyCondition": {"consecutiveAbnormalities": 1}}, nodes, [*prod, *batch], metrics)
    # n1: 4/8 cpu = 50% ≤ 60% low, prod 3/8 = 37.5% > 30%: prodHigh. n2 is both-low and takes two prod pods
    # under its 30% (2400m); the newer of the two leaves, then n1's prod usage is 25%.
    assert cluster.round() == ["prod1"]
    assert cluster.evictor.evicted[0][1].reason == "node is overutilized, prod cpu usage(37.50%)>threshold(30.00%)"


# -- pod order -------------------------------------------------------------------------------------

def test_pod_order_priority_qos_costs_and_age():
    pods = [
        pod("prod", "n", labels={"koordinator.sh/priority-class": "koord-prod"}),
        pod("batch", "n", labels={"koordinator.sh/priority-class": "koord-batch"}),
        pod("free", "n", labels={"koordinator.sh/priority-class": "koord-free"}),
        pod("batch-costly", "n", labels={"koordinator.sh/priority-class": "koord-batch"},
            annotations={"scheduling.koordinator.sh/eviction-cost": "100"}),
        pod("batch-cheap-delete", "n", labels={"koordinator.sh/priority-class": "koord-batch"},
            annotations={"controller.kubernetes.io/pod-deletion-cost": "-5"}),
        pod("batch-new", "n", labels={"koordinator.sh/priority-class": "koord-batch"}, created=10),
        pod("batch-bad-cost", "n", labels={"koordinator.sh/priority-class": "koord-batch"},
            annotations={"scheduling.koordinator.sh/eviction-cost": "x"}, created=5),
    ]
    metrics = {f"{NS}/{p['metadata']['name']}": {"cpu": 400} for p in pods}
    order = [p["metadata"]["name"] for p in sort_pods(pods, metrics, {"cpu": 800}, {"cpu": 1})]
    assert order == ["free", "batch-cheap-delete", "batch-new", "batch-bad-cost", "batch", "batch-costly", "prod"]


def test_usage_fit_prefers_the_pod_covering_the_excess():
    weights = {"cpu": 1, "memory": 1}
    excess = {"cpu": 1000}
    assert usage_fit_score({"cpu": 1000}, excess, weights) == 2.0
    assert usage_fit_score({"cpu": 2000}, excess, weights) == 1.5
    assert usage_fit_score({"cpu": 500}, excess, weights) == 0.5
    # memory is not over its threshold: weight 0, so only cpu counts.
    assert usage_fit_score({"cpu": 500, "memory": 10}, excess, weights) == 0.5
    pods = [pod("small", "n"), pod("exact", "n"), pod("big", "n"), pod("unknown", "n")]
    metrics = {f"{NS}/small": {"cpu": 500}, f"{NS}/exact": {"cpu": 1000}, f"{NS}/big": {"cpu": 2000}}
    order = [p["metadata"]["name"] for p in sort_pods(pods, metrics, excess, weights)]
    assert order == ["exact", "big", "small", "unknown"]


def test_unschedulable_and_tainted_nodes_are_not_targets():
    cluster = worked_example()
    cluster.nodes[1]["spec"]["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    assert cluster.round() == []  # n2 is still "low" but no pod fits onto it
    cluster = worked_example()
    cluster.nodes[1]["spec"]["unschedulable"] = True
    assert cluster.round() == []


# -- args ------------------------------------------------------------------------------------------

def test_args_defaults():
    args = parse_args({})
    assert (args.paused, args.dry_run, args.number_of_nodes, args.node_metric_expiration_seconds,
            args.node_fit, args.detector_cache_timeout_s) == (False, False, 0, 180, True, 300.0)
    [pool] = args.node_pools
    assert pool.name == DEFAULT_NODE_POOL
    assert pool.anomaly_condition == AnomalyCondition(60.0, 5, 3)
    assert pool.resource_weights == {"cpu": 1, "memory": 1}


def test_args_weights_and_anomaly_else_if_defaulting():
    args = parse_args({"lowThresholds": {"cpu": 10, "pods": 10}, "highThresholds": {"cpu": 20, "pods": 20},
                       "resourceWeights": {"cpu": 0, "memory": 3}})
    pool = args.node_pools[0]
    assert pool.resource_weights == {"cpu": 1, "memory": 3, "pods": 1}
    # abnormalities 0 → 5; normalities stays 0 (else-if) and is then invalid.
    with pytest.raises(ValueError, match=r"anomalyCondition.consecutiveNormalities: 0"):
        parse_args({"anomalyCondition": {"consecutiveAbnormalities": 0, "consecutiveNormalities": 0,
                                         "timeout": "1m"}})
    assert parse_args({"anomalyCondition": {"consecutiveAbnormalities": 2}}).node_pools[0].anomaly_condition == \
        AnomalyCondition(60.0, 2, 3)


def test_args_pools_inherit_top_level_values_in_both_shapes():
    v1alpha2 = {"lowThresholds": {"cpu": 10}, "highThresholds": {"cpu": 20},
                "anomalyCondition": {"consecutiveAbnormalities": 2, "consecutiveNormalities": 4, "timeout": "30s"},
                "nodePools": [{"name": "gpu", "nodeSelector": {"matchLabels": {"gpu": "true"}},
                               "highThresholds": {"cpu": 70}, "anomalyCondition": {"consecutiveNormalities": 9}}]}
    converted = {"nodePools": [{"name": DEFAULT_NODE_POOL, "lowThresholds": {"cpu": 10},
                                "highThresholds": {"cpu": 20}, "anomalyCondition": v1alpha2["anomalyCondition"]},
                               *v1alpha2["nodePools"]]}
    for raw in (v1alpha2, converted):
        default, gpu = parse_args(raw).node_pools
        assert default.name == DEFAULT_NODE_POOL and default.node_selector is None
        assert gpu.name == "gpu" and gpu.node_selector.matches({"gpu": "true"})
        assert gpu.low_thresholds == {"cpu": 10} and gpu.high_thresholds == {"cpu": 70}
        assert gpu.anomaly_condition == AnomalyCondition(30.0, 2, 9)


@pytest.mark.parametrize("raw, message", [
    ({"lowThresholds": {"cpu": 90}, "highThresholds": {"cpu": 80}},
     "lowThresholds.cpu: 90 is above highThresholds.cpu 80"),
    ({"highThresholds": {"cpu": 50}, "prodHighThresholds": {"cpu": 60}},
     "prodHighThresholds.cpu: 60 is above highThresholds.cpu 50"),
    ({"prodLowThresholds": {"memory": 60}, "prodHighThresholds": {"memory": 50.5}},
     "prodLowThresholds.memory: 60 is above prodHighThresholds.memory 50.5"),
    ({"nodePools": [{"name": "a", "lowThresholds": {"cpu": 60}, "highThresholds": {"cpu": 50}}]},
     "nodePools[0].lowThresholds.cpu: 60 is above nodePools[0].highThresholds.cpu 50"),
    ({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}, "evictableNamespaces"),
    ({"nodeMetricExpirationSeconds": 0}, "nodeMetricExpirationSeconds"),
    ({"numberOfNodes": -1}, "numberOfNodes"),
    ({"lowThresholds": {"cpu": 101}}, "lowThresholds.cpu"),
    ({"lowThresholds": {"cpu": "high"}}, "lowThresholds.cpu"),
    ({"detectorCacheTimeout": "soon"}, "detectorCacheTimeout"),
    ({"nodePools": [{"name": "a", "nodeSelector": {"matchLabels": {"bad key!": "x"}}}]}, "nodePools[0].nodeSelector"),
    ({"podSelectors": [{"name": "s", "selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}]},
     "podSelectors[0].selector"),
    ({"unknownField": 1}, "unknownField"),
])
def test_args_errors_name_the_field(raw, message):
    with pytest.raises(ValueError) as info:
        new(raw, PluginHandle(evictor=RecordingEvictor()))
    assert message in str(info.value)


# -- against the embedded API server ---------------------------------------------------------------

def test_balance_with_started_informers_against_the_api_server(crd_client: Client):
    """Nodes, pods and NodeMetrics created through the API; the plugin reads them from started informers."""
    # The server stamps creationTimestamp itself; eviction costs decide the order (p5 cheapest, p1 dearest).
    pods = [pod(f"api-p{i}", "api-n1", annotations={"scheduling.koordinator.sh/eviction-cost": str(10 * (6 - i))})
            for i in range(1, 6)]
    pods.append(pod("api-q1", "api-n2"))
    nodes = [node("api-n1", pods="9"), node("api-n2")]
    for obj in [*nodes, *pods]:
        body = {k: v for k, v in obj.items() if k != "status"}
        created = crd_client.create(body)
        if obj["kind"] == "Pod":
            created["status"] = obj["status"]
            crd_client.update_status(created)
        else:
            created["status"] = obj["status"]
            crd_client.update_status(created)
    for name, ps in (("api-n1", pods[:5]), ("api-n2", pods[5:])):
        m = metric(name, usage_of(ps))
        created = crd_client.create({k: v for k, v in m.items() if k != "status"})
        created["status"] = {**m["status"], "updateTime": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
        crd_client.update_status(created)
    factory = InformerFactory(crd_client)
    evictor = RecordingEvictor()
    handle = PluginHandle(informers=factory, evictor=evictor)
    plugin = new({"lowThresholds": {"cpu": 30, "pods": 30}, "highThresholds": {"cpu": 50, "pods": 50},
                  "anomalyCondition": {"consecutiveAbnormalities": 1}}, handle)
    factory.informer("Pod")
    factory.start()
    try:
        assert factory.wait_for_sync(30)
        wait_until(lambda: len(handle.pods_on_node("api-n1")) == 5, message="pods in the cache")
        plugin.balance(crd_client.list("Node")["items"])
    finally:
        factory.stop(5)
    # n1: 2000m of 4000m is 50% (not above), but 5 pods > 4 (50% of 9): one pod leaves, the cheapest of the
    # four that fit n2 under its 2000m (p1..p4 in name order; p5 would take n2 to 2400m).
    assert evictor.names == ["api-p4"]
    assert evictor.evicted[0][1].reason == "node is overutilized, node pods usage(55.56%)>threshold(50.00%)"


def test_first_fit_index_finds_the_same_target_as_a_scan():
    """The headroom tree returns exactly what trying the targets in order returns, reservations included."""
    import random

    from koordinator_roles.descheduler.plugins.lownodeload.firstfit import FirstFit

    rng = random.Random(7)
    headrooms = [[rng.randrange(-50, 400), rng.randrange(-50, 400)] for _ in range(37)]
    refused = {3, 11, 12}  # e.g. taints: accept() says no whatever the headroom
    tree = FirstFit([list(h) for h in headrooms], 2)
    for _ in range(300):
        need = [rng.randrange(0, 120), rng.randrange(0, 120)]
        expected = next((i for i, h in enumerate(headrooms)
                         if i not in refused and all(n <= x for n, x in zip(need, h))), None)
        got = tree.first(need, lambda i: i not in refused)
        assert got == expected
        if got is not None:
            headrooms[got] = [x - n for x, n in zip(headrooms[got], need)]
            tree.set(got, headrooms[got])


def test_args_converted_by_the_role_configuration_parse_the_same():
    """The role's config moves the top-level pool fields into ``__default_node_pool__``; same result."""
    from koordinator_roles.descheduler.config import convert_low_node_load

    raw = {"lowThresholds": {"cpu": 20, "memory": 30}, "highThresholds": {"cpu": 60, "memory": 70},
           "prodHighThresholds": {"cpu": 50}, "resourceWeights": {"cpu": 2},
           "anomalyCondition": {"consecutiveAbnormalities": 3, "timeout": "2m"},
           "nodePools": [{"name": "big", "nodeSelector": {"matchLabels": {"size": "big"}},
                          "lowThresholds": {"cpu": 10}}]}
    assert parse_args(convert_low_node_load(raw)) == parse_args(raw)


def test_benchmark_script_counts_migrations(monkeypatch):
    """scripts/bench_descheduler.py at a tiny size: one round through the plugin, evictions counted."""
    import importlib
    from pathlib import Path

    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[1] / "scripts"))
    bench = importlib.import_module("bench_descheduler")
    result = bench.bench(nodes=20, pods=200)
    # Every hot node (a fifth) is 2000m over its 75% line: one 2600m pod each moves to a cold node.
    assert result["hot_nodes"] == 4 and result["migrations"] == 4
    assert set(result) >= {"cpu_seconds", "wall_seconds", "target_cpu_seconds", "ok"}
