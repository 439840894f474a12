"""LoadAwareScheduling (reference §2.1): args, estimator, assign cache, Filter, Score, batch vs per-node.

Units inside the plugin: cpu in milli-cores, other resources in whole units (bytes for memory).
Every expected number below is worked out by hand in the comment next to it.
"""

from __future__ import annotations

import json
import random
from datetime import datetime, timezone

import numpy as np
import pytest

from koordinator.runtime.informer import DeletedFinalStateUnknown
from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.interfaces import ClusterEvent
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE, CycleState
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins import loadaware
from koordinator_roles.scheduler.plugins.loadaware.args import parse_args
from koordinator_roles.scheduler.plugins.loadaware.estimator import DefaultEstimator

GI = 1024 ** 3
MI = 1024 ** 2
T0 = 1_700_000_000.0


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_node(name="n1", cpu="100", memory="100Gi", annotations=None):
    return {"metadata": {"name": name, "annotations": dict(annotations or {})},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}}


def make_pod(name="p", ns="default", requests=None, limits=None, labels=None, annotations=None, node_name="",
             scheduled_at=None, initialized_at=None, owner_kind=None, phase="Pending", uid=None):
    meta = {"name": name, "namespace": ns, "uid": uid or f"uid-{ns}-{name}", "labels": dict(labels or {}),
            "annotations": dict(annotations or {})}
    if owner_kind:
        meta["ownerReferences"] = [{"kind": owner_kind, "name": "owner", "apiVersion": "apps/v1", "uid": "o"}]
    resources = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    conditions = []
    if scheduled_at is not None:
        conditions.append({"type": "PodScheduled", "status": "True", "lastTransitionTime": rfc3339(scheduled_at)})
    if initialized_at is not None:
        conditions.append({"type": "Initialized", "status": "True", "lastTransitionTime": rfc3339(initialized_at)})
    spec = {"containers": [{"name": "c", "resources": resources}], "schedulerName": "koord-scheduler"}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "conditions": conditions}}


def make_metric(node="n1", update=T0 - 10, cpu=None, memory=None, pods=(), agg=(), system=None,
                report_interval=None, with_node_metric=True):
    """pods: (ns, name, cpu, memory, priority); agg: (duration, type, cpu, memory)."""
    status = {}
    if update is not None:
        status["updateTime"] = rfc3339(update)
    if with_node_metric:
        usage = {}
        if cpu is not None:
            usage["cpu"] = cpu
        if memory is not None:
            usage["memory"] = memory
        nm = {"nodeUsage": {"resources": usage}}
        if system:
            nm["systemUsage"] = {"resources": dict(system)}
        if agg:
            nm["aggregatedNodeUsages"] = [
                {"duration": d, "usage": {t: {"resources": {k: v for k, v in (("cpu", c), ("memory", m)) if v}}}}
                for d, t, c, m in agg]
        status["nodeMetric"] = nm
    status["podsMetric"] = [
        {"namespace": ns, "name": n, "priority": prio,
         "podUsage": {"resources": {k: v for k, v in (("cpu", c), ("memory", m)) if v}}}
        for ns, n, c, m, prio in pods]
    spec = {}
    if report_interval is not None:
        spec["metricCollectPolicy"] = {"reportIntervalSeconds": report_interval}
    return {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node},
            "spec": spec, "status": status}


class Env:
    """A plugin over an in-memory snapshot with an injected clock."""

    def __init__(self, args=None, nodes=None, now=T0):
        self.clock = Clock(now)
        self.snap = Snapshot([NodeInfo(n) for n in (nodes or [make_node()])])
        self.handle = PluginHandle(snapshot_source=lambda: self.snap)
        self.plugin = loadaware.new(dict(args or {}), self.handle, now=self.clock)
        self.cache = self.plugin.cache

    def cycle(self, pod):
        pi = PodInfo(pod)
        state = CycleState()
        self.plugin.pre_filter(state, pi, self.snap)
        return pi, state

    def filter_batch(self, pod):
        pi, state = self.cycle(pod)
        rows = self.snap.all_rows()
        res = self.plugin.filter_nodes(state, pi, self.snap, rows)
        out = {}
        for i, row in enumerate(rows):
            name = self.snap.node_infos[row].name
            if res.passed[i]:
                out[name] = None
            else:
                reasons = [f.reason for f in res.failures if f.mask[i]]
                codes = {f.code for f in res.failures if f.mask[i]}
                assert codes == {UNSCHEDULABLE}
                out[name] = reasons
        return out

    def filter_one(self, pod, name="n1"):
        """Batch and per-node verdicts, checked to agree; the reason or None."""
        batch = self.filter_batch(pod)[name]
        pi, state = self.cycle(pod)
        status = self.plugin.filter(state, pi, self.snap.get(name))
        single = None if status is None else status.reasons
        if status is not None:
            assert status.code == UNSCHEDULABLE
        assert batch == single
        return None if single is None else single[0]

    def score_one(self, pod, name="n1"):
        pi, state = self.cycle(pod)
        row = self.snap.index[name]
        batch = int(self.plugin.score_nodes(state, pi, self.snap, np.array([row]))[0])
        single = self.plugin.score(state, pi, self.snap.get(name))
        assert batch == single
        return batch


def pod_cpu(cpu="1", memory=None, **kw):
    req = {"cpu": cpu}
    if memory:
        req["memory"] = memory
    return make_pod(requests=req, **kw)


# -- args ----------------------------------------------------------------------------------------------

def test_default_args():
    a = parse_args({})
    assert a.filter_expired_node_metrics is True
    assert a.node_metric_expiration_seconds == 180
    assert a.enable_schedule_when_node_metrics_expired is False
    assert a.resource_weights == {"cpu": 1, "memory": 1}
    assert a.usage_thresholds == {"cpu": 65, "memory": 95}
    assert a.estimated_scaling_factors == {"cpu": 85, "memory": 70}
    assert a.estimator == "defaultEstimator"
    assert a.prod_usage_thresholds == {}
    assert a.estimated_seconds_after_pod_scheduled is None
    assert a.resources == ("cpu", "memory")


def test_defaults_follow_koordinator_rules_not_merge():
    # Only the dominant weight set: resourceWeights stay empty (not {cpu:1, memory:1}).
    assert parse_args({"dominantResourceWeight": 10}).resource_weights == {}
    # An explicit empty usageThresholds map takes the default; a non-empty one replaces it.
    assert parse_args({"usageThresholds": {}}).usage_thresholds == {"cpu": 65, "memory": 95}
    assert parse_args({"usageThresholds": {"memory": 80}}).usage_thresholds == {"memory": 80}
    # Missing cpu/memory factors are filled with 85/70.
    assert parse_args({"estimatedScalingFactors": {"cpu": 50, "nvidia.com/gpu": 100}}).estimated_scaling_factors \
        == {"cpu": 50, "memory": 70, "nvidia.com/gpu": 100}
    # The resource vector is sorted and includes every named resource.
    a = parse_args({"supportedResources": ["ephemeral-storage"], "prodUsageThresholds": {"a/b": 5}})
    assert a.resources == ("a/b", "cpu", "ephemeral-storage", "memory")
    agg = parse_args({"aggregated": {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95",
                                     "usageAggregatedDuration": "5m"}}).aggregated
    assert agg.filter_enabled and agg.usage_aggregated_duration == 300.0


@pytest.mark.parametrize("args,prefix", [
    ({"nodeMetricExpirationSeconds": 0}, "nodeMetricExpirationSeconds: "),
    ({"resourceWeights": {"cpu": 0}}, "resourceWeights.cpu: "),
    ({"resourceWeights": {"cpu": 101}}, "resourceWeights.cpu: "),
    ({"resourceWeights": {"nvidia.com/gpu": 1}}, "resourceWeights.nvidia.com/gpu: "),
    ({"usageThresholds": {"cpu": 101}}, "usageThresholds.cpu: "),
    ({"usageThresholds": {"cpu": -1}}, "usageThresholds.cpu: "),
    ({"prodUsageThresholds": {"memory": 200}}, "prodUsageThresholds.memory: "),
    ({"estimatedScalingFactors": {"cpu": 0}}, "estimatedScalingFactors.cpu: "),
    ({"dominantResourceWeight": 101}, "dominantResourceWeight: "),
    ({"aggregated": {"usageAggregationType": "p42"}}, "aggregated.usageAggregationType: "),
    ({"aggregated": {"usageThresholds": {"cpu": 101}}}, "aggregated.usageThresholds.cpu: "),
    ({"aggregated": {"scoreAggregatedDuration": "5 minutes"}}, "aggregated.scoreAggregatedDuration: "),
    ({"estimator": "magic"}, "estimator: "),
    ({"estimatedSecondsAfterPodScheduled": -5}, "estimatedSecondsAfterPodScheduled: "),
])
def test_arg_validation(args, prefix):
    with pytest.raises(ValueError) as e:
        loadaware.new(args, None)
    assert str(e.value).startswith(prefix), str(e.value)


def test_weight_key_must_be_a_scaling_factor_key_after_filling():
    # gpu listed in factors: allowed.
    a = parse_args({"resourceWeights": {"nvidia.com/gpu": 1}, "estimatedScalingFactors": {"nvidia.com/gpu": 50}})
    assert a.resource_weights == {"nvidia.com/gpu": 1}


# -- estimator -------------------------------------------------------------------------------------------

def est(pod, **args):
    return DefaultEstimator(parse_args(args)).estimate_pod(pod)


def test_estimator_requests_limits_and_cap():
    # cpu 1 core = 1000m * 85% = 850; memory 1Gi * 70% = 751619276.8 -> 751619277.
    assert est(make_pod(requests={"cpu": "1", "memory": "1Gi"})) == {"cpu": 850, "memory": 751619277}
    # Limits above requests are used: 2000m * 85% = 1700; 2Gi * 70% = 1503238553.6 -> 1503238554.
    assert est(make_pod(requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "2", "memory": "2Gi"})) \
        == {"cpu": 1700, "memory": 1503238554}
    # Request 4 > limit 2: q = 4000 -> 3400, capped at the limit 2000.
    assert est(make_pod(requests={"cpu": "4"}, limits={"cpu": "2"}))["cpu"] == 2000
    # Go rounds half away from zero: 10m * 85% = 8.5 -> 9 (Python's round would give 8).
    assert est(make_pod(requests={"cpu": "10m"}))["cpu"] == 9


def test_estimator_zero_requests_defaults_are_unscaled():
    # 250m and 200Mi, not 250*85% / 200Mi*70%.
    assert est(make_pod()) == {"cpu": 250, "memory": 200 * MI}
    batch = {"koordinator.sh/priority-class": "koord-batch"}
    assert est(make_pod(labels=batch)) == {"cpu": 250, "memory": 200 * MI}


def test_estimator_priority_class_translation():
    batch = make_pod(labels={"koordinator.sh/priority-class": "koord-batch"},
                     requests={"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "4Gi"})
    # batch-cpu 2000 (milli-cores as units) * 85% = 1700; 4Gi * 70% = 3006477107.2 -> 3006477107.
    assert est(batch) == {"cpu": 1700, "memory": 3006477107}
    # A batch pod's native cpu request is not what it uses: batch-cpu is missing -> 250m default.
    assert est(make_pod(labels={"koordinator.sh/priority-class": "koord-batch"}, requests={"cpu": "8"})) \
        == {"cpu": 250, "memory": 200 * MI}
    mid_labels = {"koordinator.sh/priority-class": "koord-mid"}
    # Mid pods without mid-cpu/mid-memory estimate to 0 (no 250m/200Mi default).
    assert est(make_pod(labels=mid_labels, requests={"cpu": "8"})) == {"cpu": 0, "memory": 0}
    # mid-cpu 1000 * 85% = 850.
    assert est(make_pod(labels=mid_labels, requests={"kubernetes.io/mid-cpu": "1000"}))["cpu"] == 850
    # Free pods have no translated name: everything 0.
    assert est(make_pod(labels={"koordinator.sh/priority-class": "koord-free"},
                        requests={"cpu": "1", "memory": "1Gi"})) == {"cpu": 0, "memory": 0}


def test_estimator_pod_annotations_need_allow_customize():
    pod = make_pod(requests={"cpu": "1", "memory": "1Gi"},
                   annotations={"scheduling.koordinator.sh/load-estimated-scaling-factors": '{"cpu": 50}'})
    assert est(pod)["cpu"] == 850                                   # ignored: 1000 * 85%
    custom = est(pod, allowCustomizeEstimation=True)
    assert custom == {"cpu": 500, "memory": 751619277}             # cpu 1000 * 50%, memory merged default 70%


def test_estimate_node_raw_allocatable():
    e = DefaultEstimator(parse_args({}))
    node = make_node(cpu="100", memory="100Gi",
                     annotations={"node.koordinator.sh/raw-allocatable": '{"cpu": "50"}'})
    ni = NodeInfo(node)
    assert e.estimate_node(node, ni.allocatable)["cpu"] == 50000
    assert e.estimate_node(node, ni.allocatable)["memory"] == 100 * GI
    # Filter uses it: usage 30 cores + 850m of 50 cores = 61.7% -> 62 <= 65 passes; 33 cores -> 67.7% fails.
    env = Env(nodes=[node])
    env.cache.on_node_metric_add(make_metric(cpu="30"))
    assert env.filter_one(pod_cpu()) is None
    env.cache.on_node_metric_update(None, make_metric(cpu="33"))
    assert env.filter_one(pod_cpu()) == "node(s) cpu usage exceed threshold"


# -- Filter ------------------------------------------------------------------------------------------------

def test_filter_rounding_quirk():
    env = Env()
    # Request-less pod: +250m. 65150m + 250m = 65400 of 100000 = 65.4% -> 65, not > 65: passes.
    env.cache.on_node_metric_add(make_metric(cpu="65150m"))
    assert env.filter_one(make_pod()) is None
    # 65350m + 250m = 65.6% -> 66 > 65: fails.
    env.cache.on_node_metric_update(None, make_metric(cpu="65350m"))
    assert env.filter_one(make_pod()) == "node(s) cpu usage exceed threshold"


def test_filter_cpu_checked_before_memory_and_memory_threshold():
    env = Env()
    # cpu 70% and memory 99%: both over; cpu (sorted first) wins.
    env.cache.on_node_metric_add(make_metric(cpu="70", memory="99Gi"))
    assert env.filter_one(make_pod()) == "node(s) cpu usage exceed threshold"
    # memory 94Gi + 200Mi (request-less default) = 94.2% -> 94 <= 95 passes; 95Gi + 200Mi = 95.2 -> 95 passes;
    # 95.5Gi + 200Mi = 95.7% -> 96 fails.
    env.cache.on_node_metric_update(None, make_metric(cpu="1", memory="95Gi"))
    assert env.filter_one(make_pod()) is None
    env.cache.on_node_metric_update(None, make_metric(cpu="1", memory="97792Mi"))
    assert env.filter_one(make_pod()) == "node(s) memory usage exceed threshold"


def test_filter_thresholds_replace_not_merge():
    env = Env({"usageThresholds": {"memory": 80}})
    # cpu 99% is not checked any more (cpu not listed); memory 79Gi + 200Mi = 79.2% -> 79 passes.
    env.cache.on_node_metric_add(make_metric(cpu="99", memory="79Gi"))
    assert env.filter_one(make_pod()) is None
    env.cache.on_node_metric_update(None, make_metric(cpu="99", memory="81Gi"))
    assert env.filter_one(make_pod()) == "node(s) memory usage exceed threshold"
    # All thresholds zero: always passes.
    env2 = Env({"usageThresholds": {"cpu": 0}})
    env2.cache.on_node_metric_add(make_metric(cpu="99", memory="99Gi"))
    assert env2.filter_one(make_pod()) is None


def test_filter_node_annotation_overrides():
    ann = {"scheduling.koordinator.sh/usage-thresholds": json.dumps({"usageThresholds": {"memory": 50}})}
    env = Env(nodes=[make_node("n1", annotations=ann), make_node("n2")])
    for n in ("n1", "n2"):
        env.cache.on_node_metric_add(make_metric(node=n, cpu="90", memory="60Gi"))
    # n1: cpu disabled by the annotation; memory 60Gi+200Mi = 60.2% -> 60 > 50 fails.
    # n2: args thresholds: cpu 90.25% > 65 fails.
    result = env.filter_batch(make_pod())
    assert result == {"n1": ["node(s) memory usage exceed threshold"], "n2": ["node(s) cpu usage exceed threshold"]}
    assert env.filter_one(make_pod(), "n1") == "node(s) memory usage exceed threshold"
    # An unparsable annotation means plugin args.
    bad = {"scheduling.koordinator.sh/usage-thresholds": "{not json"}
    env2 = Env(nodes=[make_node("n1", annotations=bad)])
    env2.cache.on_node_metric_add(make_metric(cpu="90", memory="1Gi"))
    assert env2.filter_one(make_pod()) == "node(s) cpu usage exceed threshold"


def test_filter_expired_metrics():
    # updateTime exactly 180 s ago: expired (now - updateTime >= 180).
    metric = make_metric(cpu="99", update=T0 - 180)
    env = Env()
    env.cache.on_node_metric_add(metric)
    assert env.filter_one(make_pod()) == "node(s) nodeMetric expired"
    assert env.score_one(make_pod()) == 0
    env = Env({"enableScheduleWhenNodeMetricsExpired": True})
    env.cache.on_node_metric_add(metric)
    assert env.filter_one(make_pod()) is None                        # passes despite 99% cpu
    env = Env({"filterExpiredNodeMetrics": False})
    env.cache.on_node_metric_add(metric)
    assert env.filter_one(make_pod()) == "node(s) cpu usage exceed threshold"
    assert env.score_one(make_pod()) == 0                            # Score ignores filterExpiredNodeMetrics
    # Missing updateTime counts as expired; 179 s is not expired.
    env = Env()
    env.cache.on_node_metric_add(make_metric(cpu="1", update=None))
    assert env.filter_one(make_pod()) == "node(s) nodeMetric expired"
    env.cache.on_node_metric_update(None, make_metric(cpu="1", update=T0 - 179))
    assert env.filter_one(make_pod()) is None
    # The clock moves on: the same metric expires without any event.
    env.clock.t = T0 + 1
    assert env.filter_one(make_pod()) == "node(s) nodeMetric expired"


def test_filter_passes_without_metric_or_node_metric_and_for_daemonsets():
    env = Env()
    assert env.filter_one(make_pod()) is None                        # no NodeMetric: not penalised
    # A pod just placed there whose estimate alone (90 of 100 cores) would exceed the threshold: with
    # status.nodeMetric nil the usage is not checked at all.
    env.cache.on_pod_add(pod_cpu("90", name="big", node_name="n1", scheduled_at=T0 - 5, phase="Running"))
    env.cache.on_node_metric_add(make_metric(with_node_metric=False))
    assert env.filter_one(make_pod()) is None                        # status.nodeMetric nil
    assert env.score_one(pod_cpu()) == 0
    env.cache.on_node_metric_update(None, make_metric(cpu="99"))
    assert env.filter_one(make_pod(owner_kind="DaemonSet")) is None
    assert env.filter_one(make_pod(owner_kind="ReplicaSet")) == "node(s) cpu usage exceed threshold"
    env.cache.on_node_metric_delete(DeletedFinalStateUnknown("n1", make_metric(cpu="99")))
    assert env.filter_one(make_pod()) is None


def prod_setup(args):
    env = Env(args)
    # Pod A: prod (Burstable, no labels -> koord-prod) 10 cores requested, scheduled long before the metric.
    a = pod_cpu("10", name="a", node_name="n1", scheduled_at=T0 - 1000, phase="Running")
    # Pod B: batch, reported as batch.
    b = make_pod(name="b", node_name="n1", labels={"koordinator.sh/priority-class": "koord-batch"},
                 requests={"kubernetes.io/batch-cpu": "4000"}, scheduled_at=T0 - 1000, phase="Running")
    env.cache.on_pod_add(a)
    env.cache.on_pod_add(b)
    env.cache.on_node_metric_add(make_metric(cpu="70", system={"cpu": "10"}, pods=[
        ("default", "a", "20", None, "koord-prod"), ("default", "b", "40", None, "koord-batch")]))
    return env


def test_prod_thresholds_and_include_sys():
    env = prod_setup({"prodUsageThresholds": {"cpu": 30}})
    # Prod pod: prod usage 20000 (pod a) + 850 = 20.85% -> 21 <= 30 passes (node usage 70% is ignored).
    assert env.filter_one(pod_cpu()) is None
    # A batch pod uses usageThresholds: 70000 + 250 (no batch-cpu request) = 70.25% -> 70 > 65.
    batch = make_pod(labels={"koordinator.sh/priority-class": "koord-batch"})
    assert env.filter_one(batch) == "node(s) cpu usage exceed threshold"
    env = prod_setup({"prodUsageThresholds": {"cpu": 30}, "prodUsageIncludeSys": True})
    # + system 10000: 30850 = 30.85% -> 31 > 30.
    assert env.filter_one(pod_cpu()) == "node(s) cpu usage exceed threshold"


def test_prod_delta_for_pod_reported_as_non_prod():
    env = prod_setup({"prodUsageThresholds": {"cpu": 30}})
    # Pod c is prod by spec but the metric reports it as batch: its estimate (5 cores * 85% = 4250) counts
    # fully in prodDelta: 20000 + 4250 + 850 = 25100 -> 25 passes; with 10 cores (8500): 29350 -> 29 passes;
    # with 12 cores (10200): 31050 -> 31 fails.
    c = pod_cpu("12", name="c", node_name="n1", scheduled_at=T0 - 1000, phase="Running")
    env.cache.on_pod_add(c)
    env.cache.on_node_metric_update(None, make_metric(cpu="70", pods=[
        ("default", "a", "20", None, "koord-prod"), ("default", "b", "40", None, "koord-batch"),
        ("default", "c", "1", None, "koord-batch")]))
    assert env.filter_one(pod_cpu()) == "node(s) cpu usage exceed threshold"


def test_aggregated_filter_and_longest_duration():
    agg = [("5m0s", "p95", "50", None), ("10m0s", "p95", "62", None)]
    env = Env({"aggregated": {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95"}})
    env.cache.on_node_metric_add(make_metric(cpu="10", agg=agg))
    # duration 0 = longest (10m): 62000 + 850 = 62.85% -> 63 > 60.
    assert env.filter_one(pod_cpu()) == "node(s) cpu aggregated usage exceed threshold"
    env = Env({"aggregated": {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95",
                              "usageAggregatedDuration": "5m"}})
    env.cache.on_node_metric_add(make_metric(cpu="10", agg=agg))
    assert env.filter_one(pod_cpu()) is None                         # 50.85% -> 51
    # A window absent from the metric (1h): no base, only estimates of assigned pods (none): passes.
    env = Env({"aggregated": {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p95",
                              "usageAggregatedDuration": "1h"}})
    env.cache.on_node_metric_add(make_metric(cpu="99", agg=agg))
    assert env.filter_one(pod_cpu()) is None
    # ...but then the assigned pods' full estimates count: 70 cores * 85% = 59500 + 850 = 60.35% -> 60 passes,
    # 71 cores -> 60350 + 850 = 61.2% -> 61 fails.
    env.cache.on_pod_add(pod_cpu("71", name="big", node_name="n1", scheduled_at=T0 - 1000))
    assert env.filter_one(pod_cpu()) == "node(s) cpu aggregated usage exceed threshold"
    # No aggregated usage at all and duration 0: falls back to nodeUsage 10% -> passes.
    env = Env({"aggregated": {"usageThresholds": {"cpu": 60}, "usageAggregationType": "p99"}})
    env.cache.on_node_metric_add(make_metric(cpu="10", agg=agg))
    assert env.filter_one(pod_cpu()) is None


def test_aggregated_node_annotation_override():
    ann = {"scheduling.koordinator.sh/usage-thresholds": json.dumps({"aggregatedUsage": {
        "usageThresholds": {"cpu": 55}, "usageAggregationType": "p95", "usageAggregatedDuration": "5m"}})}
    env = Env(nodes=[make_node(annotations=ann)])
    env.cache.on_node_metric_add(make_metric(cpu="10", agg=[("5m0s", "p95", "56", None)]))
    # 56000 + 850 = 56.85% -> 57 > 55.
    assert env.filter_one(pod_cpu()) == "node(s) cpu aggregated usage exceed threshold"


def test_reserved_pod_counted_until_reported():
    env = Env()
    env.cache.on_node_metric_add(make_metric(cpu="62", update=T0 - 10))
    incoming = pod_cpu()
    assert env.filter_one(incoming) is None                           # 62000 + 850 -> 63
    # Reserve a 4-core pod (estimate 3400) at T0: 62000 + 3400 + 850 = 66.25% -> 66 > 65.
    big = pod_cpu("4", name="big")
    pi, state = env.cycle(big)
    env.plugin.reserve(state, pi, "n1")
    assert env.filter_one(incoming) == "node(s) cpu usage exceed threshold"
    env.plugin.unreserve(state, pi, "n1")
    assert env.filter_one(incoming) is None
    env.plugin.reserve(state, pi, "n1")
    env.handle.forget_handlers[0](pi, "n1")                           # ForgetPod undoes it too
    assert env.filter_one(incoming) is None
    env.plugin.reserve(state, pi, "n1")
    # The metric reports it (usage 1 core) at T0+100 with a 60 s interval: T0 < T0+100-60, so no estimate:
    # 64000 + 850 = 64.85% -> 65 passes.
    env.clock.t = T0 + 110
    env.cache.on_node_metric_update(None, make_metric(cpu="64", update=T0 + 100, report_interval=60,
                                                      pods=[("default", "big", "1", None, "koord-prod")]))
    assert env.filter_one(incoming) is None
    # With a 120 s report interval it is still inside the window (T0 > T0+100-120 = T0-20), so it counts:
    # delta max(0, 3400 - 1000) = 2400 -> 64000 + 2400 + 850 = 67.25% -> 67 fails.
    env.cache.on_node_metric_update(None, make_metric(cpu="64", update=T0 + 100, report_interval=120,
                                                      pods=[("default", "big", "1", None, "koord-prod")]))
    assert env.filter_one(incoming) == "node(s) cpu usage exceed threshold"


def test_estimated_seconds_after_scheduled_and_initialized():
    metric = make_metric(cpu="64", update=T0 + 100, report_interval=60,
                         pods=[("default", "big", "1", None, "koord-prod")])
    incoming = pod_cpu()
    # Scheduled at T0, metric at T0+100: outside the interval; estimatedSecondsAfterPodScheduled 300 keeps it
    # estimated until T0+300 > T0+100: delta 3400-1000 = 2400 -> 64000+2400+850 = 67.25% -> 67 fails.
    for args, pod_kw, expect in [
        ({}, {}, None),
        ({"estimatedSecondsAfterPodScheduled": 300}, {}, "node(s) cpu usage exceed threshold"),
        ({"estimatedSecondsAfterPodScheduled": 50}, {}, None),             # deadline T0+50 < T0+100
        # Initialized at T0+50 + 100 s = T0+150 > T0+100: estimated (takes precedence over 50 s after scheduled).
        ({"estimatedSecondsAfterPodScheduled": 50, "estimatedSecondsAfterInitialized": 100},
         {"initialized_at": T0 + 50}, "node(s) cpu usage exceed threshold"),
        # Per-pod annotation wins when allowed: 0 s after scheduled disables the 300 s of the args.
        ({"estimatedSecondsAfterPodScheduled": 300, "allowCustomizeEstimation": True},
         {"annotations": {"scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled": "0"}}, None),
        ({"allowCustomizeEstimation": True},
         {"annotations": {"scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled": "300"}},
         "node(s) cpu usage exceed threshold"),
    ]:
        env = Env(args, now=T0 + 110)
        env.cache.on_pod_add(pod_cpu("4", name="big", node_name="n1", scheduled_at=T0, phase="Running", **pod_kw))
        env.cache.on_node_metric_add(metric)
        assert env.filter_one(incoming) == expect, args


def test_informer_events_move_terminate_and_delete():
    env = Env(nodes=[make_node("n1"), make_node("n2")])
    for n in ("n1", "n2"):
        env.cache.on_node_metric_add(make_metric(node=n, cpu="60"))
    big = pod_cpu("8", name="big", node_name="n1", scheduled_at=T0 - 5, phase="Running")
    env.cache.on_pod_add(big)
    # n1: 60000 + 6800 + 850 = 67.65% -> 68 fails; n2: 60.85 -> 61 passes.
    assert env.filter_batch(pod_cpu()) == {"n1": ["node(s) cpu usage exceed threshold"], "n2": None}
    moved = pod_cpu("8", name="big", node_name="n2", scheduled_at=T0 - 5, phase="Running")
    env.cache.on_pod_update(big, moved)
    assert env.filter_batch(pod_cpu()) == {"n1": None, "n2": ["node(s) cpu usage exceed threshold"]}
    done = pod_cpu("8", name="big", node_name="n2", scheduled_at=T0 - 5, phase="Succeeded")
    env.cache.on_pod_update(moved, done)
    assert env.filter_batch(pod_cpu()) == {"n1": None, "n2": None}
    env.cache.on_pod_update(done, moved)                                  # back (not realistic, but re-added)
    env.cache.on_pod_delete(DeletedFinalStateUnknown("default/big", moved))
    assert env.filter_batch(pod_cpu()) == {"n1": None, "n2": None}
    # Reserve pods are never assigned.
    env.cache.on_pod_add(pod_cpu("80", name="r", node_name="n1",
                                 annotations={"scheduling.koordinator.sh/reserve-pod": "true"}))
    assert env.filter_batch(pod_cpu())["n1"] is None


class FakeInformer:
    def __init__(self):
        self.handlers = []

    def add_handler(self, on_add=None, on_update=None, on_delete=None, **_):
        self.handlers.append((on_add, on_update, on_delete))


class FakeFactory:
    def __init__(self):
        self.by_kind = {}

    def informer(self, kind, **_):
        return self.by_kind.setdefault(kind, FakeInformer())


def test_informer_wiring_and_events():
    snap = Snapshot([NodeInfo(make_node())])
    factory = FakeFactory()
    handle = PluginHandle(snapshot_source=lambda: snap, informers=factory)
    plugin = loadaware.new({}, handle, now=Clock())
    (m_add, m_update, m_delete), = factory.by_kind["NodeMetric"].handlers
    (p_add, p_update, p_delete), = factory.by_kind["Pod"].handlers
    m_add(make_metric(cpu="60"))
    p_add(pod_cpu("8", name="big", node_name="n1", scheduled_at=T0 - 5))
    pi = PodInfo(pod_cpu())
    state = CycleState()
    plugin.pre_filter(state, pi, snap)
    assert not plugin.filter_nodes(state, pi, snap, snap.all_rows()).passed[0]
    p_delete(pod_cpu("8", name="big", node_name="n1"))
    assert plugin.filter_nodes(state, pi, snap, snap.all_rows()).passed[0]
    m_update(None, make_metric(cpu="99"))
    assert not plugin.filter_nodes(state, pi, snap, snap.all_rows()).passed[0]
    m_delete(make_metric())
    assert plugin.filter_nodes(state, pi, snap, snap.all_rows()).passed[0]
    assert set(plugin.events_to_register()) == {ClusterEvent("Pod", "Delete"), ClusterEvent("NodeMetric", "Add"),
                                                ClusterEvent("NodeMetric", "Update"),
                                                ClusterEvent("NodeMetric", "Delete")}
    assert plugin.name == loadaware.NAME == "LoadAwareScheduling"


def test_update_args_keeps_assign_cache():
    env = Env()
    env.cache.on_node_metric_add(make_metric(cpu="50"))
    big = pod_cpu("10", name="big")
    pi, state = env.cycle(big)
    env.plugin.reserve(state, pi, "n1")
    # 50000 + 8500 + 850 = 59.35% -> 59 <= 65.
    assert env.filter_one(pod_cpu()) is None
    env.plugin.update_args({"usageThresholds": {"cpu": 55}})
    assert env.filter_one(pod_cpu()) == "node(s) cpu usage exceed threshold"
    # New scaling factor 50%: 50000 + 5000 + 500 = 55.5% -> 56 > 55 still fails; 40%: 54.4 -> 54 passes.
    env.plugin.update_args({"usageThresholds": {"cpu": 55}, "estimatedScalingFactors": {"cpu": 40}})
    assert env.filter_one(pod_cpu()) is None
    with pytest.raises(ValueError):
        env.plugin.update_args({"usageThresholds": {"cpu": 500}})
    assert env.plugin.args.usage_thresholds == {"cpu": 55}


def test_rows_refresh_on_node_change_and_dirty_nodes():
    env = Env(nodes=[make_node("n1"), make_node("n2")])
    for n in ("n1", "n2"):
        env.cache.on_node_metric_add(make_metric(node=n, cpu="60"))
    assert env.filter_batch(pod_cpu()) == {"n1": None, "n2": None}
    # A node update (new object) with a tighter annotation reaches the rows without a layout change.
    ann = {"scheduling.koordinator.sh/usage-thresholds": json.dumps({"usageThresholds": {"cpu": 50}})}
    ni = NodeInfo(make_node("n2", annotations=ann))
    layout = env.snap.layout_version
    env.snap.update_node(ni)
    assert env.snap.layout_version == layout
    assert env.filter_batch(pod_cpu()) == {"n1": None, "n2": ["node(s) cpu usage exceed threshold"]}
    # A cache event on n1 only refreshes n1.
    env.cache.on_node_metric_update(None, make_metric(node="n1", cpu="70"))
    assert env.filter_batch(pod_cpu()) == {"n1": ["node(s) cpu usage exceed threshold"],
                                           "n2": ["node(s) cpu usage exceed threshold"]}


# -- Score -------------------------------------------------------------------------------------------------

def score_env(args=None):
    env = Env(args)
    env.cache.on_node_metric_add(make_metric(cpu="30", memory="40Gi"))
    return env


# Incoming pod: 1 core / 1Gi -> estimate 850m / 751619277 bytes.
# cpu: used 30850 of 100000 -> (69150 * 100) // 100000 = 69.
# memory: used 42949672960 + 751619277 = 43701292237 of 107374182400 -> 63672890163 * 100 // 107374182400 = 59.
@pytest.mark.parametrize("args,expected", [
    ({}, 64),                                                     # (69 + 59) // 2
    ({"resourceWeights": {"cpu": 3, "memory": 1}}, 66),           # (207 + 59) // 4 = 266 // 4
    ({"resourceWeights": {"cpu": 1, "memory": 1}, "dominantResourceWeight": 2}, 61),  # (69+59+59*2) // 4 = 246//4
    ({"dominantResourceWeight": 2}, 59),                          # weights not defaulted: (59*2) // 2
    ({"dominantResourceWeight": 1}, 59),                          # weights not defaulted: (0 + 59*1) // 1
    ({"resourceWeights": {"cpu": 1}, "dominantResourceWeight": 1}, 64),  # (69 + min(69,59)) // 2 = 128 // 2
])
def test_score_formula(args, expected):
    env = score_env(args)
    assert env.score_one(pod_cpu("1", "1Gi")) == expected


def test_score_zero_cases_and_over_capacity():
    env = Env()
    assert env.score_one(pod_cpu("1", "1Gi")) == 0                    # no metric
    env.cache.on_node_metric_add(make_metric(cpu="100", memory="10Gi"))
    # cpu over capacity -> 0; memory (107374182400 - 10737418240 - 751619277) * 100 // 107374182400 = 89.
    assert env.score_one(pod_cpu("1", "1Gi")) == 44                   # (0 + 89) // 2


def test_score_prod_usage_and_aggregated():
    env = prod_setup({"scoreAccordingProdUsage": True, "resourceWeights": {"cpu": 1}})
    # Prod pod scored on prod usage: 20000 + 850 -> 79150 * 100 // 100000 = 79.
    assert env.score_one(pod_cpu()) == 79
    # A batch pod on node usage: 70000 + 250 -> 29.
    assert env.score_one(make_pod(labels={"koordinator.sh/priority-class": "koord-batch"})) == 29
    env = Env({"resourceWeights": {"cpu": 1}, "aggregated": {"scoreAggregationType": "p95"}})
    env.cache.on_node_metric_add(make_metric(cpu="10", agg=[("5m0s", "p95", "40", None)]))
    # p95 longest window: 40000 + 850 -> 59150 * 100 // 100000 = 59.
    assert env.score_one(pod_cpu()) == 59


# -- batch vs per-node on random-ish inputs ------------------------------------------------------------------

def test_batch_and_per_node_agree_random():
    rng = random.Random(7)
    args = {"prodUsageThresholds": {"cpu": 40, "memory": 80}, "dominantResourceWeight": 3,
            "resourceWeights": {"cpu": 2, "memory": 1},
            "aggregated": {"usageThresholds": {"cpu": 70}, "usageAggregationType": "p95",
                           "scoreAggregationType": "p90"},
            "estimatedSecondsAfterPodScheduled": 120}
    nodes = []
    for i in range(60):
        ann = {}
        r = rng.random()
        if r < 0.2:
            ann["scheduling.koordinator.sh/usage-thresholds"] = json.dumps(
                {"usageThresholds": {"cpu": rng.randint(30, 90)}})
        elif r < 0.3:
            ann["scheduling.koordinator.sh/usage-thresholds"] = json.dumps(
                {"prodUsageThresholds": {"memory": rng.randint(10, 90)}})
        elif r < 0.35:
            ann["node.koordinator.sh/raw-allocatable"] = json.dumps({"cpu": str(rng.randint(10, 60))})
        nodes.append(make_node(f"n{i}", cpu=str(rng.choice([16, 32, 64, 96])),
                               memory=f"{rng.choice([64, 128, 256])}Gi", annotations=ann))
    for flag in (False, True):
        env = Env(dict(args, enableScheduleWhenNodeMetricsExpired=flag), nodes=nodes)
        for i in range(60):
            if rng.random() < 0.1:
                continue                                             # no NodeMetric
            pods = []
            for j in range(rng.randint(0, 4)):
                name = f"p{i}-{j}"
                prod = rng.random() < 0.6
                labels = {} if prod else {"koordinator.sh/priority-class": "koord-batch"}
                req = {"cpu": f"{rng.randint(1, 8)}", "memory": f"{rng.randint(1, 16)}Gi"} if prod else \
                    {"kubernetes.io/batch-cpu": str(rng.randint(500, 4000)),
                     "kubernetes.io/batch-memory": f"{rng.randint(1, 8)}Gi"}
                env.cache.on_pod_add(make_pod(name=name, node_name=f"n{i}", labels=labels, requests=req,
                                              scheduled_at=T0 - rng.choice([5, 100, 1000]), phase="Running"))
                if rng.random() < 0.7:
                    pods.append(("default", name, f"{rng.randint(100, 6000)}m", f"{rng.randint(1, 12)}Gi",
                                 "koord-prod" if prod and rng.random() < 0.8 else "koord-batch"))
            env.cache.on_node_metric_add(make_metric(
                node=f"n{i}", update=T0 - rng.choice([10, 30, 200]), cpu=f"{rng.randint(1, 60)}",
                memory=f"{rng.randint(1, 60)}Gi", pods=pods, system={"cpu": "1"},
                with_node_metric=rng.random() > 0.05,
                agg=[("5m0s", "p95", f"{rng.randint(1, 60)}", "1Gi"), ("10m0s", "p90", f"{rng.randint(1, 60)}", None)]))
        outcomes = set()
        # Consecutive cycles as the scheduler runs them: each pod reserved on a node that passed, pods
        # of a class seen before (the rows keep per-class results and refresh the rows that changed),
        # metrics expiring as the clock moves on, a NodeMetric update in between.
        requests, labels = {}, {}
        for k in range(18):
            if k % 3 != 2:
                requests = {"cpu": f"{rng.randint(1, 8)}", "memory": f"{rng.randint(1, 8)}Gi"}
                labels = {} if k % 2 else {"koordinator.sh/priority-class": "koord-batch"}
            if k == 8:
                env.clock.t += 160
            if k == 11:
                env.cache.on_node_metric_update(None, make_metric(node="n3", update=env.clock.t - 5, cpu="55"))
            pod = make_pod(name=f"in{k}", requests=requests, labels=labels)
            pi, state = env.cycle(pod)
            rows = env.snap.all_rows()
            batch = env.plugin.filter_nodes(state, pi, env.snap, rows)
            scores = env.plugin.score_nodes(state, pi, env.snap, rows)
            for i, row in enumerate(rows):
                ni = env.snap.node_infos[row]
                st = env.plugin.filter(state, pi, ni)
                reasons = [f.reason for f in batch.failures if f.mask[i]]
                assert (st is None) == bool(batch.passed[i])
                assert reasons == ([] if st is None else st.reasons)
                assert len(reasons) <= 1
                outcomes.add(reasons[0] if reasons else None)
                assert int(scores[i]) == env.plugin.score(state, pi, ni)
                assert 0 <= scores[i] <= 100
            # Subsets of rows give the same answers as the full batch.
            sub = rows[::3] if k % 2 else rows[::7]      # gathered from the full result / computed on the subset
            sub_res = env.plugin.filter_nodes(state, pi, env.snap, sub)
            step = 3 if k % 2 else 7
            assert (sub_res.passed == batch.passed[::step]).all()
            expected = [f.reason for f in batch.failures if f.mask[::step].any()]
            assert [f.reason for f in sub_res.failures] == expected
            assert (env.plugin.score_nodes(state, pi, env.snap, sub) == scores[::step]).all()
            passing = [env.snap.node_infos[row].name for i, row in enumerate(rows) if batch.passed[i]]
            if passing:
                env.plugin.reserve(state, pi, rng.choice(passing))
        # The inputs exercise passing and several failure kinds.
        assert None in outcomes and len(outcomes) >= 3, outcomes


def test_room_boundary_matches_koordinator_formula():
    # Filter compares the estimate with a precomputed room; the boundary must be exactly where
    # round(total / allocatable * 100) > threshold flips, for large and small allocatables.
    from koordinator_roles.scheduler.plugins.loadaware.args import go_round
    from koordinator_roles.scheduler.plugins.loadaware.rows import failing_total
    rng = random.Random(3)
    thr = [rng.randint(1, 100) for _ in range(300)] + [65, 65]
    alloc = [rng.choice([rng.randint(1, 1000), rng.randint(1, 10 ** 6), rng.randint(1, 10 ** 13)])
             for _ in range(300)] + [100000, 3]
    for t, a in zip(thr, alloc):
        lim = failing_total(t, a)
        assert go_round(lim / a * 100) > t
        assert go_round((lim - 1) / a * 100) <= t
    # 65% of 100000 cores-milli: 65.5% is the first failing value (65499 -> 65, 65500 -> 66).
    assert failing_total(65, 100000) == 65500
