"""Peak prediction (reference A.9): histograms, models, training from the metric cache, prod
reclaimable/peak vectors computed by hand, model GC and checkpoints."""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from koordinator_roles.koordlet.metriccache import MetricCache, Sample
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.prediction import PeakPredictor, PredictionError
from koordinator_roles.koordlet.prediction.histogram import CheckpointError, DecayingHistogram, ExponentialOptions
from koordinator_roles.koordlet.prediction.models import CPU_OPTIONS, MEMORY_OPTIONS, Model
from koordinator_roles.koordlet.prediction import reclaimable

GiB = 1 << 30
MiB = 1 << 20
T0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
OLD = "2023-11-01T00:00:00Z"  # two weeks before T0: past the 24 h cold start


# -- hand formulas (A.9.2), independent of the implementation ---------------------------------------

def bucket_end(value: float, first: float, ratio: float = 1.05) -> float:
    """End of the exponential bucket holding value: first × (ratio^(i+1) − 1)/(ratio − 1)."""
    i = 0 if value < first else math.floor(math.log(value * (ratio - 1) / first + 1) / math.log(ratio))
    return first * (ratio ** (i + 1) - 1) / (ratio - 1)


def cpu_milli(cores: float) -> int:
    """A single-sample model's percentile of cpu usage, as milli (truncated)."""
    return int(bucket_end(cores, 0.025) * 1000)


def mem_bytes(value: float) -> int:
    return int(bucket_end(value, 5 * MiB))


# -- test doubles ------------------------------------------------------------------------------------

class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@dataclass
class Meta:
    pod: dict

    @property
    def uid(self) -> str:
        return self.pod["metadata"]["uid"]


class States:
    """Stand-in for the StatesInformer: pods() and node()."""

    def __init__(self, pods: list[dict], node: dict | None, synced: bool = True) -> None:
        self.pod_list = pods
        self.node_obj = node
        self.synced = synced

    def pods(self) -> list[Meta]:
        return [Meta(p) for p in self.pod_list]

    def node(self) -> dict | None:
        return self.node_obj

    def has_synced(self) -> bool:
        return self.synced


def make_pod(uid: str, cpu: str, memory: str, *, priority: str | None = None, created: str = OLD,
             deleting: bool = False, qos: str | None = None) -> dict:
    labels = {}
    if priority:
        labels["koordinator.sh/priority-class"] = priority
    if qos:
        labels["koordinator.sh/qosClass"] = qos
    meta = {"name": uid, "namespace": "default", "uid": uid, "labels": labels, "creationTimestamp": created}
    if deleting:
        meta["deletionTimestamp"] = "2023-11-14T22:00:00Z"
    return {"metadata": meta,
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
            "status": {"phase": "Running"}}


def make_node(cpu: str = "8", memory: str = "16Gi", raw: str | None = None) -> dict:
    annotations = {} if raw is None else {"node.koordinator.sh/raw-allocatable": raw}
    return {"metadata": {"name": "n1", "annotations": annotations},
            "status": {"allocatable": {"cpu": cpu, "memory": memory}, "capacity": {"cpu": cpu, "memory": memory}}}


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def feed(cache: MetricCache, now: float, pods: dict[str, tuple[float, float]], node: tuple[float, float] | None) -> None:
    """Constant usage over the last training window (three points)."""
    samples = []
    for ts in (now - 40, now - 20, now - 1):
        for uid, (cpu, mem) in pods.items():
            samples.append(Sample(kinds.POD_CPU_USAGE, cpu, ts, {kinds.LABEL_POD_UID: uid}))
            samples.append(Sample(kinds.POD_MEMORY_USAGE, mem, ts, {kinds.LABEL_POD_UID: uid}))
        if node is not None:
            samples.append(Sample(kinds.NODE_CPU_USAGE, node[0], ts))
            samples.append(Sample(kinds.NODE_MEMORY_USAGE, node[1], ts))
    cache.insert(samples)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def cache(clock):
    c = MetricCache(None, clock=clock)
    yield c
    c.close()


# Two prod pods past cold start (A: koord-prod label; B: no label, Burstable → LS → prod) and a batch pod.
POD_A = make_pod("pod-a", "1", "2Gi", priority="koord-prod")
POD_B = make_pod("pod-b", "2", "4Gi")
POD_C = make_pod("pod-c", "1", "1Gi", priority="koord-batch")
USAGE = {"pod-a": (0.5, 1 * GiB), "pod-b": (1.0, 2 * GiB), "pod-c": (0.2, 512 * MiB)}
NODE_USAGE = (2.0, 4 * GiB)


# -- histogram ---------------------------------------------------------------------------------------

def test_bucket_geometry():
    def num_buckets(max_value, first, ratio=1.05):
        return math.ceil(math.log(max_value * (ratio - 1) / first + 1) / math.log(ratio)) + 1

    assert CPU_OPTIONS.num_buckets == num_buckets(1024, 0.025) == 158
    assert MEMORY_OPTIONS.num_buckets == num_buckets(2 ** 41, 5 * MiB) == 205
    assert CPU_OPTIONS.epsilon == pytest.approx(0.0001)
    for i in (1, 2, 10, 157):
        assert CPU_OPTIONS.bucket_start(i) == pytest.approx(0.025 * (1.05 ** i - 1) / 0.05)
        assert MEMORY_OPTIONS.bucket_start(i) == pytest.approx(5 * MiB * (1.05 ** i - 1) / 0.05)
    assert CPU_OPTIONS.bucket_start(0) == 0.0
    assert CPU_OPTIONS.bucket_start(1) == pytest.approx(0.025)
    assert CPU_OPTIONS.bucket_start(2) == pytest.approx(0.05125)
    assert CPU_OPTIONS.find_bucket(0.0) == 0
    assert CPU_OPTIONS.find_bucket(0.024) == 0
    assert CPU_OPTIONS.find_bucket(0.026) == 1
    assert CPU_OPTIONS.find_bucket(0.05) == 1 and CPU_OPTIONS.find_bucket(0.052) == 2
    assert CPU_OPTIONS.find_bucket(0.5) == 14
    assert CPU_OPTIONS.find_bucket(1e9) == 157  # past the max: the open last bucket
    # the last bucket start covers max_value
    assert CPU_OPTIONS.bucket_start(157) >= 1024 > CPU_OPTIONS.bucket_start(156)
    with pytest.raises(IndexError):
        CPU_OPTIONS.bucket_start(158)
    with pytest.raises(ValueError):
        ExponentialOptions(10, 1, 1.0, 1e-4)


def test_percentile_on_known_weights():
    # ratio 2, first 1: buckets start 0, 1, 3, 7, 15, 31, 63, 127 (8 buckets for max 100).
    opts = ExponentialOptions(100, 1, 2, 1e-4)
    assert opts.num_buckets == 8
    assert [opts.bucket_start(i) for i in range(8)] == [0, 1, 3, 7, 15, 31, 63, 127]
    h = DecayingHistogram(opts, 3600)
    assert h.is_empty() and h.percentile(0.5) == 0.0
    # all at one timestamp: the decay factor is the same for every sample
    t = 36000.0 * 1000
    h.add_sample(0.5, 1, t)   # bucket 0
    h.add_sample(2, 1, t)     # bucket 1
    h.add_sample(5, 2, t)     # bucket 2
    h.add_sample(20, 6, t)    # bucket 4; total 10
    assert h.percentile(0.1) == 1     # weight 1 reached in bucket 0 → its end
    assert h.percentile(0.2) == 3
    assert h.percentile(0.4) == 7
    assert h.percentile(0.41) == 31   # bucket 3 is empty; bucket 4 holds the rest
    assert h.percentile(1.0) == 31
    h.add_sample(1000, 10, t)         # past max → last bucket, which has no end
    assert h.percentile(1.0) == 127
    assert h.percentile(0.5) == 31    # 10 of 20 reached in bucket 4


def test_decay_halves_after_one_half_life():
    half = 3600.0
    h = DecayingHistogram(CPU_OPTIONS, half)
    t = 1000 * half
    h.add_sample(0.1, 1, t)
    h.add_sample(1.0, 1, t + half)
    w = h.bucket_weights()
    old, new = w[CPU_OPTIONS.find_bucket(0.1)], w[CPU_OPTIONS.find_bucket(1.0)]
    assert new / old == pytest.approx(2.0)
    assert h.total_weight == pytest.approx(old + new)
    # the newer sample holds 2/3 of the weight: p0.3 is the old bucket's end, p0.5 the new one's
    assert h.percentile(0.3) == pytest.approx(bucket_end(0.1, 0.025))
    assert h.percentile(0.5) == pytest.approx(bucket_end(1.0, 0.025))


def test_reference_shift_keeps_percentiles():
    half = 3600.0
    h = DecayingHistogram(CPU_OPTIONS, half)
    t = T0
    # the first sample moves the reference to the sample's time rounded to whole half-lives
    h.add_sample(0.1, 1, t)
    assert h.reference_timestamp == math.floor(t / half + 0.5) * half
    for i, v in enumerate((0.3, 0.7, 2.0)):
        h.add_sample(v, 1, t + (i + 1) * 600)
    before = {p: h.percentile(p) for p in (0.1, 0.3, 0.6, 0.9, 1.0)}
    weights = h.bucket_weights()
    h.shift_reference(h.reference_timestamp + 5 * half)
    assert {p: h.percentile(p) for p in before} == before
    after = h.bucket_weights()
    assert set(after) == set(weights)
    for b in weights:
        assert after[b] == pytest.approx(weights[b] / 32)
    # a sample more than 100 half-lives later renormalises: old samples decay to nothing
    late = h.reference_timestamp + 101 * half
    h.add_sample(5.0, 1, late)
    assert h.reference_timestamp == math.floor(late / half + 0.5) * half
    assert h.percentile(0.01) == pytest.approx(bucket_end(5.0, 0.025))
    assert list(h.bucket_weights()) == [CPU_OPTIONS.find_bucket(5.0)]


def test_histogram_checkpoint_round_trip():
    h = DecayingHistogram(MEMORY_OPTIONS, 24 * 3600)
    for i, v in enumerate((100 * MiB, 1 * GiB, 3 * GiB, 1 * GiB)):
        h.add_sample(v, 1, T0 + i * 60)
    doc = json.loads(json.dumps(h.to_checkpoint()))
    assert set(doc) == {"ref", "total", "buckets"} and len(doc["buckets"]) == 3  # sparse
    back = DecayingHistogram(MEMORY_OPTIONS, 24 * 3600)
    back.load_checkpoint(doc)
    assert back.reference_timestamp == h.reference_timestamp
    assert back.total_weight == h.total_weight
    assert back.bucket_weights() == h.bucket_weights()
    for p in (0.5, 0.9, 0.95, 0.98, 1.0):
        assert back.percentile(p) == h.percentile(p)
    # decay continues as before
    h.add_sample(2 * GiB, 1, T0 + 7200)
    back.add_sample(2 * GiB, 1, T0 + 7200)
    assert back.bucket_weights() == h.bucket_weights()


@pytest.mark.parametrize("doc, field", [
    ([], "object"),
    ({"ref": "x", "total": 1, "buckets": []}, "ref"),
    ({"ref": 0, "total": -1, "buckets": []}, "total"),
    ({"ref": 0, "total": 1, "buckets": {}}, "buckets"),
    ({"ref": 0, "total": 1, "buckets": [[999, 1.0]]}, "buckets[0]"),
    ({"ref": 0, "total": 1, "buckets": [[1, float("nan")]]}, "buckets[0]"),
    ({"ref": 0, "total": 1, "buckets": [["1", 1.0]]}, "buckets[0]"),
])
def test_histogram_checkpoint_rejects_garbage(doc, field):
    h = DecayingHistogram(CPU_OPTIONS, 3600)
    h.add_sample(1.0, 1, T0)
    kept = h.bucket_weights()
    with pytest.raises(CheckpointError, match=field.replace("[", r"\[").replace("]", r"\]")):
        h.load_checkpoint(doc)
    assert h.bucket_weights() == kept  # unchanged


def test_model_result_keys_and_units():
    m = Model(12 * 3600, 24 * 3600)
    m.add_sample(0.5, 1 * GiB, T0)
    r = m.result()
    assert set(r) == {"p60", "p90", "p95", "p98", "max"}
    assert r["p95"] == {"cpu": 539, "memory": 1097586419}  # ends of buckets 14 and 49
    assert r["p95"]["cpu"] == cpu_milli(0.5) and r["p98"]["memory"] == mem_bytes(GiB)
    assert m.last_updated == T0
    back = Model.from_checkpoint(json.loads(json.dumps(m.to_checkpoint("u", T0 + 5))), 12 * 3600, 24 * 3600)
    assert back.result() == r and back.last_updated == T0 and back.last_checkpointed == T0 + 5
    with pytest.raises(CheckpointError, match="version"):
        Model.from_checkpoint({"version": 99}, 1, 1)
    with pytest.raises(CheckpointError, match="memory"):
        doc = m.to_checkpoint("u", T0)
        doc["memory"] = {"ref": 0}
        Model.from_checkpoint(doc, 1, 1)


# -- training and prod reclaimable ---------------------------------------------------------------------

def trained(cache, clock, pods, node=None, usage=USAGE, node_usage=NODE_USAGE, **kw) -> PeakPredictor:
    states = States(pods, node if node is not None else make_node())
    p = PeakPredictor(cache, states, checkpoint_dir=kw.pop("checkpoint_dir", None), clock=clock, **kw)
    feed(cache, clock.now, {u: usage[u] for u in usage}, node_usage)
    p.train_once()
    return p


def expected_two_pods(alloc_cpu: int, alloc_mem: int) -> tuple[dict, dict]:
    """A.9.3 by hand for POD_A, POD_B (prod), POD_C (batch) at USAGE / NODE_USAGE, margin 10 %."""
    s = 1.1
    # pod predictor
    peak_a = (int(cpu_milli(0.5) * s), int(mem_bytes(1 * GiB) * s))
    peak_b = (int(cpu_milli(1.0) * s), int(mem_bytes(2 * GiB) * s))
    assert peak_a == (592, 1207345060)  # 539 × 1.1, 1097586419 × 1.1
    unrec = (peak_a[0] + peak_b[0], peak_a[1] + peak_b[1])
    rec = (1000 - peak_a[0] + 2000 - peak_b[0], 2 * GiB - peak_a[1] + 4 * GiB - peak_b[1])
    pod_result = (min(max(alloc_cpu - unrec[0], 0), rec[0]), min(max(alloc_mem - unrec[1], 0), rec[1]))
    pod_peak = unrec
    # priority predictor: sys = node − all pods; prod class = a + b; none class = 0 → first bucket's end
    sys_cpu, sys_mem = 2.0 - (0.5 + 1.0 + 0.2), 4 * GiB - (1 * GiB + 2 * GiB + 512 * MiB)
    used_cpu = cpu_milli(sys_cpu) + cpu_milli(1.5) + 25
    used_mem = mem_bytes(sys_mem) + mem_bytes(3 * GiB) + 5 * MiB
    prio_unrec = (int(used_cpu * s), int(used_mem * s))
    request = (3000, 6 * GiB)
    prio_result = tuple(min(max(a - u, 0), max(r - u, 0))
                        for a, u, r in zip((alloc_cpu, alloc_mem), prio_unrec, request))
    result = {"cpu": min(pod_result[0], prio_result[0]), "memory": min(pod_result[1], prio_result[1])}
    peak = {"cpu": max(pod_peak[0], prio_unrec[0]), "memory": max(pod_peak[1], prio_unrec[1])}
    return result, peak


def test_training_models(cache, clock):
    p = trained(cache, clock, [POD_A, POD_B, POD_C])
    assert p.has_synced()
    assert p.model_uids() == sorted(["pod-a", "pod-b", "pod-c", "__node__", "__node-sys__", "__node-koord-prod__",
                                     "__node-koord-mid__", "__node-koord-batch__", "__node-koord-free__",
                                     "__node-__"])
    assert p.prediction("pod-a")["p95"] == {"cpu": 539, "memory": 1097586419}
    assert p.prediction("__node-koord-prod__")["p95"]["cpu"] == cpu_milli(1.5)
    assert p.prediction("__node-koord-batch__")["p98"]["memory"] == mem_bytes(512 * MiB)
    assert p.prediction("__node-sys__")["p95"]["cpu"] == cpu_milli(0.3)
    # an empty class is sampled as 0: the end of the first bucket
    assert p.prediction("__node-koord-mid__")["max"] == {"cpu": 25, "memory": 5 * MiB}
    assert p.prediction("__node__")["p90"]["cpu"] == cpu_milli(2.0)


def test_training_uses_p90_of_the_window(cache, clock):
    states = States([POD_A], make_node())
    p = PeakPredictor(cache, states, checkpoint_dir=None, clock=clock)
    # ten points 0.1 … 1.0 cores in the window, one old point outside: p90 = 9th smallest = 0.9
    samples = [Sample(kinds.POD_CPU_USAGE, 0.1 * (i + 1), clock.now - 50 + i, {"pod_uid": "pod-a"}) for i in range(10)]
    samples.append(Sample(kinds.POD_CPU_USAGE, 50.0, clock.now - 600, {"pod_uid": "pod-a"}))
    samples.append(Sample(kinds.POD_MEMORY_USAGE, GiB, clock.now - 5, {"pod_uid": "pod-a"}))
    cache.insert(samples)
    p.train_once()
    assert p.prediction("pod-a")["max"]["cpu"] == cpu_milli(0.9)
    # no node usage: node and system models not sampled, so no prediction yet
    assert p.prediction("__node__") is None and p.prediction("__node-sys__") is None
    with pytest.raises(PredictionError, match="__node-sys__"):
        p.prod_reclaimable()


def test_prod_reclaimable_two_prod_pods(cache, clock):
    p = trained(cache, clock, [POD_A, POD_B, POD_C])
    result, peak = p.prod_reclaimable()
    exp_result, exp_peak = expected_two_pods(8000, 16 * GiB)
    assert (result, peak) == (exp_result, exp_peak)
    # pod predictor: reclaimable 408 + 862 = 1270 milli, peak 592 + 1138 = 1730; priority predictor:
    # (sys 314 + prod 1558 + none 25) × 1.1 = 2086 unreclaimable, 3000 − 2086 = 914 reclaimable
    assert result["cpu"] == 914 and peak["cpu"] == 2086


def test_prod_reclaimable_node_allocatable_limits(cache, clock):
    # allocatable 2.5 cores: pod predictor min(2500 − 1730, 1270) = 770, priority min(2500 − 2086, 914) = 414
    p = trained(cache, clock, [POD_A, POD_B, POD_C], node=make_node(cpu="2500m"))
    result, peak = p.prod_reclaimable()
    assert (result, peak) == expected_two_pods(2500, 16 * GiB)
    assert result["cpu"] == 414 and peak["cpu"] == 2086


def test_raw_allocatable_annotation(cache, clock, caplog):
    raw = json.dumps({"cpu": "2", "memory": "4Gi"})
    p = trained(cache, clock, [POD_A, POD_B, POD_C], node=make_node(raw=raw))
    assert p.prod_reclaimable() == expected_two_pods(2000, 4 * GiB)
    assert reclaimable.node_allocatable(make_node(raw=raw)) == {"cpu": 2000, "memory": 4 * GiB}
    # a bad annotation: warning naming it, status.allocatable used
    caplog.set_level(logging.WARNING, logger="koordinator.koordlet.prediction")
    p.states.node_obj = make_node(raw="{not json")
    assert p.prod_reclaimable() == expected_two_pods(8000, 16 * GiB)
    assert "node.koordinator.sh/raw-allocatable" in caplog.text and "{not json" in caplog.text


def test_cold_start_pod_request_is_unpredicted(cache, clock):
    young = make_pod("pod-d", "500m", "512Mi", priority="koord-prod", created=iso(clock.now - 3600))
    usage = dict(USAGE, **{"pod-d": (0.0, 0.0)})
    node_usage = NODE_USAGE
    p = trained(cache, clock, [POD_A, POD_B, POD_C, young], usage=usage, node_usage=node_usage)
    assert p.prediction("pod-d") is not None  # trained, but not trusted during cold start
    result, peak = p.prod_reclaimable()
    # pod predictor: D adds nothing reclaimable, its request goes into the peak
    by_pod = reclaimable.PodReclaimablePredictor(p.prediction, now=clock.now, cold_start=24 * 3600,
                                                 safety_margin_percent=10)
    for pod in (POD_A, POD_B, POD_C, young):
        by_pod.add_pod(pod)
    assert by_pod.unpredicted == {"cpu": 500, "memory": 512 * MiB}
    assert by_pod.unreclaimable == {"cpu": 1730, "memory": 1207345060 + int(mem_bytes(2 * GiB) * 1.1)}
    assert by_pod.result({"cpu": 8000, "memory": 16 * GiB})[1]["cpu"] == 1730 + 500
    # combined: pod predictor min(8000 − 1730, 1270) = 1270 < priority min(8000 − 2086, 3500 − 2086) = 1414;
    # peaks: pod 1730 + 500 = 2230 > priority 2086
    assert result["cpu"] == 1270 and peak["cpu"] == 2230
    # the priority predictor has no cold-start rule: D's request counts
    by_prio = reclaimable.PriorityReclaimablePredictor(p.prediction, safety_margin_percent=10)
    by_prio.add_pod(young)
    assert by_prio.reclaim_request == {"cpu": 500, "memory": 512 * MiB}


def test_terminating_pod_ignored(cache, clock):
    gone = make_pod("pod-e", "4", "8Gi", priority="koord-prod", deleting=True)
    usage = dict(USAGE, **{"pod-e": (3.0, 7 * GiB)})
    p = trained(cache, clock, [POD_A, POD_B, POD_C], usage=usage)
    base = p.prod_reclaimable()
    p.states.pod_list = [POD_A, POD_B, POD_C, gone]
    # neither predictor counts it: no request, no peak (node-level models unchanged)
    assert p.prod_reclaimable() == base
    finished = make_pod("pod-f", "4", "8Gi", priority="koord-prod")
    finished["status"]["phase"] = "Succeeded"
    p.states.pod_list = [POD_A, POD_B, POD_C, finished]
    assert p.prod_reclaimable() == base


def test_missing_prediction_counts_request_as_unpredicted(cache, clock):
    p = trained(cache, clock, [POD_A, POD_B, POD_C])
    base_result, base_peak = p.prod_reclaimable()
    unknown = make_pod("pod-x", "3", "2Gi", priority="koord-prod")  # past cold start, never trained
    by_pod = reclaimable.PodReclaimablePredictor(p.prediction, now=clock.now, cold_start=24 * 3600,
                                                 safety_margin_percent=10)
    with pytest.raises(PredictionError, match="pod-x"):
        by_pod.add_pod(unknown)
    assert by_pod.unpredicted == {"cpu": 3000, "memory": 2 * GiB}
    # duplicate UID is refused too
    by_pod.add_pod(POD_A)
    with pytest.raises(PredictionError, match="twice"):
        by_pod.add_pod(POD_A)
    # in the combined result the pod's request raises the pod peak and is left out of the priority
    # predictor's reclaim request (Koordinator's min-predictor stops at the first error)
    p.states.pod_list = [POD_A, POD_B, POD_C, unknown]
    result, peak = p.prod_reclaimable()
    assert result == base_result
    assert peak == {"cpu": max(base_peak["cpu"], 1730 + 3000),
                    "memory": max(base_peak["memory"], 1207345060 + int(mem_bytes(2 * GiB) * 1.1) + 2 * GiB)}


def test_priority_predictor_by_hand():
    results = {
        "__node-sys__": {"p95": {"cpu": 300, "memory": 0}, "p98": {"cpu": 0, "memory": 1 * GiB}},
        "__node-koord-prod__": {"p95": {"cpu": 1000, "memory": 0}, "p98": {"cpu": 0, "memory": 2 * GiB}},
        "__node-__": {"p95": {"cpu": 0, "memory": 0}, "p98": {"cpu": 0, "memory": 0}},
        # batch usage does not count
        "__node-koord-batch__": {"p95": {"cpu": 5000, "memory": 0}, "p98": {"cpu": 0, "memory": 9 * GiB}},
    }
    prio = reclaimable.PriorityReclaimablePredictor(results.get, safety_margin_percent=10)
    prio.add_pod(make_pod("a", "2", "4Gi", priority="koord-prod"))
    prio.add_pod(make_pod("b", "1", "1Gi", qos="LS"))  # no priority: LS → prod by default
    prio.add_pod(make_pod("c", "8", "8Gi", priority="koord-batch"))  # not prod: skipped
    prio.add_pod(make_pod("d", "1", "1Gi", priority="koord-mid"))  # mid: not reclaimed from
    assert prio.reclaim_request == {"cpu": 3000, "memory": 5 * GiB}
    # unreclaimable = (300 + 1000) × 1.1 = 1430 milli; (1 + 2) GiB × 1.1
    rec, peak = prio.result({"cpu": 4000, "memory": 16 * GiB})
    assert peak == {"cpu": 1430, "memory": int(3 * GiB * 1.1)}
    assert rec == {"cpu": 3000 - 1430, "memory": 5 * GiB - int(3 * GiB * 1.1)}
    # allocatable binds: min(2000 − 1430, 1570)
    assert prio.result({"cpu": 2000, "memory": 3 * GiB})[0] == {"cpu": 570, "memory": 0}
    del results["__node-__"]
    with pytest.raises(PredictionError, match="__node-__"):
        prio.result({"cpu": 4000, "memory": 16 * GiB})


def test_combined_min_and_max():
    results = {
        "pod-a": {"p95": {"cpu": 100, "memory": 0}, "p98": {"cpu": 0, "memory": 1 * GiB}},
        "__node-sys__": {"p95": {"cpu": 2000, "memory": 0}, "p98": {"cpu": 0, "memory": 0}},
        "__node-koord-prod__": {"p95": {"cpu": 100, "memory": 0}, "p98": {"cpu": 0, "memory": 1 * GiB}},
        "__node-__": {"p95": {"cpu": 0, "memory": 0}, "p98": {"cpu": 0, "memory": 0}},
    }
    pod = make_pod("pod-a", "4", "4Gi", priority="koord-prod")
    node = make_node(cpu="16", memory="32Gi")
    result, peak = reclaimable.prod_reclaimable([pod], node, results.get, now=T0, cold_start=86400,
                                                safety_margin_percent=0)
    # pod: cpu 4000 − 100 = 3900, memory 4 − 1 = 3 GiB; priority: cpu 4000 − 2100 = 1900, memory 3 GiB
    assert result == {"cpu": 1900, "memory": 3 * GiB}
    # peaks: pod 100 / 1 GiB, priority 2100 / 1 GiB
    assert peak == {"cpu": 2100, "memory": 1 * GiB}


def test_not_ready_errors(cache, clock):
    states = States([POD_A], None)
    p = PeakPredictor(cache, states, checkpoint_dir=None, clock=clock)
    with pytest.raises(PredictionError, match="node"):
        p.prod_reclaimable()
    states.node_obj = make_node()
    with pytest.raises(PredictionError):  # nothing trained yet
        p.prod_reclaimable()
    states.synced = False
    feed(cache, clock.now, USAGE, NODE_USAGE)
    p.train_once()  # skipped until the states have synced
    assert p.model_uids() == [] and not p.has_synced()
    with pytest.raises(PredictionError, match="status.allocatable"):
        reclaimable.node_allocatable({"metadata": {}, "status": {}})


def test_bad_creation_timestamp_counts_as_cold_start(caplog):
    pod = make_pod("p", "1", "1Gi", created="yesterday")
    assert reclaimable.in_cold_start(pod, T0, 86400)
    assert "creationTimestamp" in caplog.text and "yesterday" in caplog.text
    del pod["metadata"]["creationTimestamp"]
    assert not reclaimable.in_cold_start(pod, T0, 86400)
    assert reclaimable.in_cold_start(make_pod("q", "1", "1Gi", created=iso(T0 - 86400)), T0, 86400)
    assert not reclaimable.in_cold_start(make_pod("q", "1", "1Gi", created=iso(T0 - 86401)), T0, 86400)


# -- GC and checkpoints -----------------------------------------------------------------------------

def test_gc_after_expiration(cache, clock, tmp_path):
    ckpt = tmp_path / "ckpt"
    p = trained(cache, clock, [POD_A, POD_B, POD_C], checkpoint_dir=str(ckpt))
    assert p.checkpoint_once() == 10
    assert (ckpt / "pod-b.json").is_file()
    p.states.pod_list = [POD_A, POD_C]  # B is gone: its model is no longer updated
    for _ in range(3):
        clock.now += 600
        feed(cache, clock.now, {u: USAGE[u] for u in ("pod-a", "pod-c")}, NODE_USAGE)
        p.train_once()
        assert p.gc_once() == []  # 600, 1200, 1800 s: not past the 30 min expiration
    clock.now += 1
    assert p.gc_once() == ["pod-b"]
    assert "pod-b" not in p.model_uids() and "pod-a" in p.model_uids()
    assert not (ckpt / "pod-b.json").exists()


def test_checkpoint_restore_across_instances(cache, clock, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    p1 = trained(cache, clock, [POD_A, POD_B, POD_C], checkpoint_dir=ckpt)
    clock.now += 60
    feed(cache, clock.now, {"pod-a": (2.0, 3 * GiB), "pod-b": (0.1, GiB), "pod-c": (0.2, GiB)}, (4.0, 8 * GiB))
    p1.train_once()
    assert p1.checkpoint_once() == 10
    assert not [n for n in os.listdir(ckpt) if n.endswith(".tmp")]
    doc = json.loads((tmp_path / "ckpt" / "pod-a.json").read_text())
    assert doc["uid"] == "pod-a" and doc["lastUpdated"] == clock.now and doc["savedAt"] == clock.now
    expected = p1.prod_reclaimable()
    # a new predictor (a restarted koordlet) restores every model before any training
    p2 = PeakPredictor(cache, States([POD_A, POD_B, POD_C], make_node()), checkpoint_dir=ckpt, clock=clock)
    assert p2.restore() == 10
    assert p2.model_uids() == p1.model_uids()
    for uid in p1.model_uids():
        assert p2.prediction(uid) == p1.prediction(uid)
    assert p2.prod_reclaimable() == expected
    # restored models were just saved: not due for another checkpoint_interval
    p2.train_once()
    assert p2.checkpoint_once() == 0


def test_checkpoint_rounds_oldest_first(cache, clock, tmp_path):
    ckpt = tmp_path / "ckpt"
    p = trained(cache, clock, [POD_A, POD_B, POD_C], checkpoint_dir=str(ckpt), checkpoint_max_per_step=3)
    written = []
    for _ in range(4):
        before = set(os.listdir(ckpt)) if ckpt.exists() else set()
        written.append(p.checkpoint_once())
        written_now = set(os.listdir(ckpt)) - before
        assert len(written_now) == written[-1]
        if len(written) == 1:
            first_round = written_now
        clock.now += 10
    assert written == [3, 3, 3, 1] and len(os.listdir(ckpt)) == 10
    assert p.checkpoint_once() == 0  # every model checkpointed within the interval
    # 600 s after the first round only its three models are due again
    clock.now = T0 + 600
    mtimes = {n: (ckpt / n).stat().st_mtime_ns for n in os.listdir(ckpt)}
    for n in first_round:
        os.utime(ckpt / n, ns=(0, 0))
    assert p.checkpoint_once() == 3
    rewritten = {n for n in os.listdir(ckpt) if (ckpt / n).stat().st_mtime_ns != 0 and n in first_round}
    assert rewritten == first_round
    assert all((ckpt / n).stat().st_mtime_ns == mtimes[n] for n in mtimes if n not in first_round)


def test_restore_removes_unknown_and_corrupt_files(cache, clock, tmp_path, caplog):
    ckpt = tmp_path / "ckpt"
    p1 = trained(cache, clock, [POD_A, POD_B, POD_C], checkpoint_dir=str(ckpt))
    p1.checkpoint_once()
    (ckpt / "pod-a.json").write_text("{not json")                          # corrupt JSON
    doc = json.loads((ckpt / "pod-b.json").read_text())
    doc["cpu"]["buckets"] = "garbage"
    (ckpt / "pod-b.json").write_text(json.dumps(doc))                      # wrong structure
    (ckpt / "__node__.json").write_text(json.dumps(dict(doc, uid="pod-b")))  # uid does not match the name
    (ckpt / "old-pod.json").write_text((ckpt / "pod-c.json").read_text().replace("pod-c", "old-pod"))  # unknown
    (ckpt / "stray.txt").write_text("x")
    (ckpt / "pod-c.json.tmp").write_text("half")
    caplog.set_level(logging.WARNING, logger="koordinator.koordlet.prediction")
    p2 = PeakPredictor(cache, States([POD_A, POD_B, POD_C], make_node()), checkpoint_dir=str(ckpt), clock=clock)
    assert p2.restore() == 7  # pod-c, sys and the 5 class models; pod-a, pod-b, __node__ refused
    for name in ("pod-a.json", "pod-b.json", "__node__.json", "old-pod.json", "stray.txt", "pod-c.json.tmp"):
        assert not (ckpt / name).exists(), name
    for name in ("pod-a.json", "pod-b.json", "__node__.json", "old-pod.json", "stray.txt"):
        assert str(ckpt / name) in caplog.text
    assert "buckets" in caplog.text
    assert sorted(os.listdir(ckpt)) == sorted(f"{u}.json" for u in p2.model_uids())
    # training goes on normally afterwards
    feed(cache, clock.now, USAGE, NODE_USAGE)
    p2.train_once()
    assert "pod-a" in p2.model_uids()


def test_missing_checkpoint_dir_and_unwritable(cache, clock, tmp_path, caplog):
    p = trained(cache, clock, [POD_A], checkpoint_dir=str(tmp_path / "not-yet"),
                usage={"pod-a": USAGE["pod-a"]})
    assert p.restore() == 0  # a missing directory is just empty
    assert p.checkpoint_once() == 8  # created on first save
    blocker = tmp_path / "file"
    blocker.write_text("x")
    q = trained(cache, clock, [POD_A], checkpoint_dir=str(blocker / "sub"), usage={"pod-a": USAGE["pod-a"]})
    caplog.set_level(logging.WARNING, logger="koordinator.koordlet.prediction")
    assert q.checkpoint_once() == 0
    assert str(blocker / "sub") in caplog.text
    assert q.checkpoint_once() == 0  # not retried within the interval
    assert q.prediction("pod-a") is not None


def test_run_one_round(cache, clock, tmp_path):
    class OneRound(threading.Event):
        """The first wait (one training interval) passes; the second stops the loop."""

        waits = 0

        def wait(self, timeout=None):
            self.waits += 1
            if self.waits > 1:
                self.set()
            return self.is_set()

    ckpt = tmp_path / "ckpt"
    states = States([POD_A, POD_B, POD_C], make_node())
    p = PeakPredictor(cache, states, checkpoint_dir=str(ckpt), clock=clock)
    feed(cache, clock.now, USAGE, NODE_USAGE)
    p.run(OneRound())
    assert p.has_synced() and len(os.listdir(ckpt)) == 10
    assert p.prod_reclaimable() == expected_two_pods(8000, 16 * GiB)
    # not synced: run returns when stopped while waiting, without training
    states.synced = False
    q = PeakPredictor(cache, states, checkpoint_dir=None, clock=clock)
    q.run(OneRound())
    assert not q.has_synced()


def test_constructor_validation(cache):
    with pytest.raises(ValueError, match="training_interval"):
        PeakPredictor(cache, States([], None), checkpoint_dir=None, training_interval=0)
    with pytest.raises(ValueError, match="checkpoint_max_per_step"):
        PeakPredictor(cache, States([], None), checkpoint_dir=None, checkpoint_max_per_step=0)
