"""kube-scheduler's basic in-tree plugins on in-memory snapshots: each filter's batch form agrees with
its per-node form, and scores match numbers worked out by hand from kube's formulas."""

from __future__ import annotations

import numpy as np
import pytest

from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.interfaces import PreFilterResult
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import (ERROR, SKIP, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                          CycleState)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo
from koordinator_roles.scheduler.plugins import (defaultbinder, imagelocality, nodeaffinity, nodename, nodeports,
                                                 noderesources, nodeunschedulable, queuesort, schedulinggates,
                                                 tainttoleration)

GI = 1024 ** 3
MI = 1024 ** 2


# -- builders ---------------------------------------------------------------------------------------

def make_node(name, cpu="4", memory="10Gi", pods="110", labels=None, taints=None, unschedulable=False,
              extra=None, images=None, rv="1"):
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    node = {"metadata": {"name": name, "labels": labels or {}, "resourceVersion": rv},
            "spec": {"taints": taints or [], "unschedulable": unschedulable},
            "status": {"allocatable": allocatable, "images": images or []}}
    return NodeInfo(node)


def container(cpu=None, memory=None, extra=None, ports=None, image="busybox", restart_policy=None):
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    c = {"name": "c", "image": image, "resources": {"requests": requests} if requests else {}}
    if ports:
        c["ports"] = ports
    if restart_policy:
        c["restartPolicy"] = restart_policy
    return c


def make_pod(name="p", containers=None, init=None, overhead=None, uid=None, **spec):
    s = {"containers": containers if containers is not None else [container()], **spec}
    if init:
        s["initContainers"] = init
    if overhead:
        s["overhead"] = overhead
    return PodInfo({"metadata": {"name": name, "namespace": "default", "uid": uid or f"uid-{name}"}, "spec": s})


def with_pods(ni, *pods):
    for p in pods:
        ni.add_pod(p)
    return ni


def run_filter(plugin, pod, snap, state=None):
    """Batch and per-node filter; asserts that they agree and returns {node name: reasons or None}."""
    state = state or CycleState()
    if hasattr(plugin, "pre_filter"):
        _, status = plugin.pre_filter(state, pod, snap)
        if status is not None and status.code == SKIP:
            return {ni.name: None for ni in snap.node_infos}
    rows = snap.all_rows()
    batch = plugin.filter_nodes(state, pod, snap, rows)
    out = {}
    for i, row in enumerate(rows.tolist()):
        ni = snap.node_infos[row]
        single = plugin.filter(state, pod, ni)
        assert bool(batch.passed[i]) == (single is None), ni.name
        if single is None:
            out[ni.name] = None
            continue
        batch_reasons = [f.reason for f in batch.failures if f.mask[i]]
        assert batch_reasons == single.reasons, ni.name
        codes = {f.code for f in batch.failures if f.mask[i]}
        assert codes == {single.code}, ni.name
        out[ni.name] = (single.code, single.reasons)
    return out


def run_score(plugin, pod, snap, rows=None, state=None):
    """PreScore, batch score (checked against the per-node score) and normalize; None when skipped."""
    state = state or CycleState()
    rows = snap.all_rows() if rows is None else rows
    if hasattr(plugin, "pre_score"):
        status = plugin.pre_score(state, pod, snap, rows)
        if status is not None and status.code == SKIP:
            return None
    scores = plugin.score_nodes(state, pod, snap, rows)
    assert scores.dtype == np.int64
    single = [plugin.score(state, pod, snap.node_infos[r]) for r in rows.tolist()]
    assert scores.tolist() == single
    if hasattr(plugin, "normalize_score"):
        assert plugin.normalize_score(state, pod, snap, rows, scores) is None
    return scores.tolist()


# -- PrioritySort / SchedulingGates --------------------------------------------------------------------

def test_priority_sort_orders_by_priority_then_timestamp():
    plugin = queuesort.new({}, None)
    a = QueuedPodInfo(make_pod("a", priority=10), now=5.0)
    b = QueuedPodInfo(make_pod("b", priority=100), now=9.0)
    c = QueuedPodInfo(make_pod("c", priority=10), now=1.0)
    ordered = sorted([a, b, c], key=plugin.sort_key)
    assert [q.pod_info.name for q in ordered] == ["b", "c", "a"]
    assert plugin.less(c, a) and not plugin.less(a, c)
    assert queuesort.NAME == "PrioritySort"


def test_scheduling_gates_message_and_hint():
    plugin = schedulinggates.new({}, None)
    assert plugin.pre_enqueue(make_pod()) is None
    gated = make_pod(schedulingGates=[{"name": "foo"}, {"name": "bar"}])
    status = plugin.pre_enqueue(gated)
    assert status.code == UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ["waiting for scheduling gates: [foo bar]"]
    (event,) = plugin.events_to_register()
    assert event.kind == "Pod" and event.action == "Update"
    ungated = {"metadata": gated.pod["metadata"], "spec": {"containers": []}}
    assert event.hint(gated.pod, gated.pod, ungated)
    assert not event.hint(gated.pod, gated.pod, gated.pod)
    other = {"metadata": {"name": "o", "namespace": "default", "uid": "x"}, "spec": {}}
    assert not event.hint(gated.pod, other, other)


# -- NodeResourcesFit: Filter -------------------------------------------------------------------------

def fit(args=None):
    return noderesources.new(args or {}, PluginHandle())


def test_fit_counts_init_containers_sidecars_and_overhead():
    snap = Snapshot([make_node("n2", cpu="2"), make_node("n4", cpu="4")])
    # Regular init containers run one at a time: the largest one (3 cpu) beats the containers' sum (1).
    pod = make_pod(containers=[container(cpu="1")], init=[container(cpu="3")])
    assert pod.requests["cpu"] == 3000
    result = run_filter(fit(), pod, snap)
    assert result == {"n2": (UNSCHEDULABLE, ["Insufficient cpu"]), "n4": None}
    # A sidecar (restartPolicy Always) adds to the containers and runs beside later init containers.
    sidecar = make_pod(containers=[container(cpu="1")],
                       init=[container(cpu="1", restart_policy="Always"), container(cpu="2500m")])
    assert sidecar.requests["cpu"] == 3500
    assert run_filter(fit(), sidecar, snap)["n4"] is None
    # Overhead is added on top: 3.5 + 0.6 cpu no longer fits 4.
    heavy = make_pod(containers=[container(cpu="1")],
                     init=[container(cpu="1", restart_policy="Always"), container(cpu="2500m")],
                     overhead={"cpu": "600m"})
    assert run_filter(fit(), heavy, snap)["n4"] == (UNSCHEDULABLE, ["Insufficient cpu"])


def test_fit_reasons_in_kube_order_and_too_many_pods():
    full = with_pods(make_node("full", cpu="1", memory="1Gi", pods="1", extra={"example.com/gpu": "1"}),
                     make_pod("old", containers=[container(cpu="500m", memory="512Mi")]))
    roomy = make_node("roomy", cpu="8", memory="16Gi", extra={"example.com/gpu": "2"})
    snap = Snapshot([full, roomy])
    pod = make_pod(containers=[container(cpu="1", memory="1Gi", extra={"example.com/gpu": "2",
                                                                       "ephemeral-storage": "1Gi"})])
    result = run_filter(fit(), pod, snap)
    assert result["full"] == (UNSCHEDULABLE, ["Too many pods", "Insufficient cpu", "Insufficient memory",
                                              "Insufficient ephemeral-storage", "Insufficient example.com/gpu"])
    assert result["roomy"] == (UNSCHEDULABLE, ["Insufficient ephemeral-storage"])
    # A pod without requests still needs a pod slot.
    assert run_filter(fit(), make_pod(), snap) == {"full": (UNSCHEDULABLE, ["Too many pods"]), "roomy": None}


def test_fit_extended_resources_missing_node_has_zero():
    batch = make_node("batch", extra={"kubernetes.io/batch-cpu": "4000", "kubernetes.io/batch-memory": "8Gi"})
    plain = make_node("plain")
    snap = Snapshot([batch, plain])
    pod = make_pod(containers=[container(extra={"kubernetes.io/batch-cpu": "1000",
                                                "kubernetes.io/batch-memory": "1Gi"})])
    assert run_filter(fit(), pod, snap) == {
        "batch": None,
        "plain": (UNSCHEDULABLE, ["Insufficient kubernetes.io/batch-cpu", "Insufficient kubernetes.io/batch-memory"]),
    }
    # Used batch resources count against the node.
    with_pods(batch, make_pod("hog", containers=[container(extra={"kubernetes.io/batch-cpu": "3500"})]))
    snap = Snapshot([batch, plain])
    assert run_filter(fit(), pod, snap)["batch"] == (UNSCHEDULABLE, ["Insufficient kubernetes.io/batch-cpu"])


def test_fit_ignored_resources_and_groups():
    snap = Snapshot([make_node("n")])
    pod = make_pod(containers=[container(extra={"example.com/foo": "1", "vendor.io/bar": "2",
                                                "kubernetes.io/batch-cpu": "1"})])
    assert run_filter(fit(), pod, snap)["n"] == (UNSCHEDULABLE, [
        "Insufficient example.com/foo", "Insufficient kubernetes.io/batch-cpu", "Insufficient vendor.io/bar"])
    # kubernetes.io/ names are not extended resources: kube never ignores them.
    args = {"ignoredResources": ["example.com/foo", "kubernetes.io/batch-cpu"], "ignoredResourceGroups": ["vendor.io"]}
    assert run_filter(fit(args), pod, snap)["n"] == (UNSCHEDULABLE, ["Insufficient kubernetes.io/batch-cpu"])


def test_fit_batch_filter_follows_rows_subset():
    nodes = [make_node(f"n{i}", cpu=str(i + 1)) for i in range(5)]
    snap = Snapshot(nodes)
    plugin = fit()
    state = CycleState()
    pod = make_pod(containers=[container(cpu="3")])
    plugin.pre_filter(state, pod, snap)
    rows = np.array([4, 0, 2], dtype=np.int64)
    result = plugin.filter_nodes(state, pod, snap, rows)
    assert result.passed.tolist() == [True, False, True]
    assert [(f.reason, f.mask.tolist()) for f in result.failures] == [("Insufficient cpu", [False, True, False])]


def test_fit_args_validation():
    with pytest.raises(ValueError, match=r"^scoringStrategy\.type: Unsupported value"):
        fit({"scoringStrategy": {"type": "Spread"}})
    with pytest.raises(ValueError, match=r"^scoringStrategy\.resources\[1\]\.weight: .*not in valid range"):
        fit({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1},
                                                                          {"name": "memory", "weight": 101}]}})
    with pytest.raises(ValueError, match=r"^scoringStrategy\.requestedToCapacityRatio\.shape: Required"):
        fit({"scoringStrategy": {"type": "RequestedToCapacityRatio"}})
    with pytest.raises(ValueError, match=r"^scoringStrategy\.requestedToCapacityRatio\.shape\[1\]\.utilization"):
        fit({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
            "shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]}}})
    with pytest.raises(ValueError, match=r"^scoringStrategy\.requestedToCapacityRatio\.shape\[0\]\.score"):
        fit({"scoringStrategy": {"type": "RequestedToCapacityRatio", "requestedToCapacityRatio": {
            "shape": [{"utilization": 50, "score": 11}]}}})
    with pytest.raises(ValueError, match=r"^ignoredResourceGroups\[0\]: .*can't contain '/'"):
        fit({"ignoredResourceGroups": ["a/b"]})
    # Weight 0 (unset) defaults to 1; no resources default to cpu and memory.
    assert fit({"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu"}]}}).resources == [("cpu", 1)]
    assert fit({}).resources == [("cpu", 1), ("memory", 1)]


# -- NodeResourcesFit: Score --------------------------------------------------------------------------

def scoring_snapshot():
    # Node: 4 cpu, 10Gi; existing pod 1 cpu / 2Gi. Incoming pod 500m / 1Gi → cpu 1500/4000, memory 3/10.
    ni = with_pods(make_node("n", cpu="4", memory="10Gi"),
                   make_pod("old", containers=[container(cpu="1", memory="2Gi")]))
    empty = make_node("empty", cpu="0", memory="0")
    return Snapshot([ni, empty]), make_pod(containers=[container(cpu="500m", memory="1Gi")])


def strategy(kind, resources=None, shape=None):
    s = {"type": kind}
    if resources:
        s["resources"] = resources
    if shape:
        s["requestedToCapacityRatio"] = {"shape": shape}
    return fit({"scoringStrategy": s})


def test_least_allocated_scores():
    snap, pod = scoring_snapshot()
    # cpu (4000-1500)*100/4000 = 62, memory 70 → 66; a node without capacity scores 0.
    assert run_score(strategy("LeastAllocated"), pod, snap) == [66, 0]
    weighted = strategy("LeastAllocated", [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1}])
    assert run_score(weighted, pod, snap) == [(2 * 62 + 70) // 3, 0]


def test_most_allocated_scores():
    snap, pod = scoring_snapshot()
    # cpu 1500*100/4000 = 37, memory 30 → 33.
    assert run_score(strategy("MostAllocated"), pod, snap) == [33, 0]


def test_requested_to_capacity_ratio_scores():
    snap, pod = scoring_snapshot()
    rising = strategy("RequestedToCapacityRatio", shape=[{"utilization": 0, "score": 0},
                                                        {"utilization": 100, "score": 10}])
    # Shape scores ×10: cpu 37, memory 30 → round(33.5) = 34.
    assert run_score(rising, pod, snap) == [34, 0]
    falling = strategy("RequestedToCapacityRatio", shape=[{"utilization": 0, "score": 10},
                                                         {"utilization": 70, "score": 0}])
    # cpu: 100 + trunc(-100*37/70) = 48; memory: 100 + trunc(-100*30/70) = 58 → 53.
    assert run_score(falling, pod, snap) == [53, 0]


def test_fit_score_uses_non_zero_requests():
    # Request-less pods count as 100m / 200Mi when scoring.
    ni = with_pods(make_node("n", cpu="1", memory="1000Mi"), make_pod("old"))
    snap = Snapshot([ni])
    assert ni.non_zero_cpu == 100
    # cpu 200/1000 → 80; memory 400Mi/1000Mi → 60.
    assert run_score(fit(), make_pod(), snap) == [70]


def test_fit_score_extended_resources_skipped_when_not_requested_or_missing():
    batch = with_pods(make_node("batch", extra={"kubernetes.io/batch-cpu": "4000"}),
                      make_pod("old", containers=[container(cpu="1", memory="2Gi",
                                                            extra={"kubernetes.io/batch-cpu": "1000"})]))
    plain = with_pods(make_node("plain"), make_pod("old2", containers=[container(cpu="1", memory="2Gi")]))
    snap = Snapshot([batch, plain])
    plugin = strategy("MostAllocated", [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                                        {"name": "kubernetes.io/batch-cpu", "weight": 1}])
    pod = make_pod(containers=[container(cpu="500m", memory="1Gi", extra={"kubernetes.io/batch-cpu": "1000"})])
    # batch: cpu 37, memory 30, batch-cpu 2000/4000 → 50 → 117/3 = 39; plain lacks batch-cpu: (37+30)/2 = 33.
    assert run_score(plugin, pod, snap) == [39, 33]
    # A pod not asking for batch-cpu is scored on cpu and memory only, everywhere.
    no_batch = make_pod(containers=[container(cpu="500m", memory="1Gi")])
    assert run_score(plugin, no_batch, snap) == [33, 33]


# -- NodeResourcesBalancedAllocation ------------------------------------------------------------------

def test_balanced_allocation_scores_and_skip():
    plugin = noderesources.FACTORIES["NodeResourcesBalancedAllocation"]({}, PluginHandle())
    assert plugin.name == noderesources.BALANCED_ALLOCATION_NAME
    ni = with_pods(make_node("n", cpu="4", memory="10Gi"),
                   make_pod("old", containers=[container(cpu="1", memory="2Gi")]))
    over = make_node("over", cpu="1", memory="10Gi")
    snap = Snapshot([ni, over])
    pod = make_pod(containers=[container(cpu="1", memory="1Gi")])
    # n: cpu 0.5, memory 0.3 → std 0.1 → 90; over: cpu capped at 1, memory 0.1 → std 0.45 → 55.
    assert run_score(plugin, pod, snap) == [90, 55]
    # Plain requests, not kube's non-zero defaults; best-effort pods are skipped.
    assert run_score(plugin, make_pod(), snap) is None


def test_balanced_allocation_three_resources_std():
    plugin = noderesources.new_balanced_allocation(
        {"resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                       {"name": "ephemeral-storage", "weight": 1}]}, PluginHandle())
    snap = Snapshot([make_node("n", cpu="10", memory="10Gi", extra={"ephemeral-storage": "10Gi"})])
    pod = make_pod(containers=[container(cpu="2", memory="4Gi", extra={"ephemeral-storage": "6Gi"})])
    fractions = [0.2, 0.4, 0.6]
    mean = sum(fractions) / 3
    std = (sum((f - mean) ** 2 for f in fractions) / 3) ** 0.5
    assert run_score(plugin, pod, snap) == [int((1 - std) * 100)] == [83]


# -- NodeName / NodeUnschedulable -------------------------------------------------------------------

def test_node_name_filter():
    snap = Snapshot([make_node("a"), make_node("b")])
    plugin = nodename.new({}, None)
    reason = (UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) didn't match the requested node name"])
    assert run_filter(plugin, make_pod(nodeName="b"), snap) == {"a": reason, "b": None}
    assert run_filter(plugin, make_pod(nodeName="zzz"), snap) == {"a": reason, "b": reason}
    _, status = plugin.pre_filter(CycleState(), make_pod(), snap)
    assert status.code == SKIP


def test_node_unschedulable_filter_and_toleration():
    snap = Snapshot([make_node("cordoned", unschedulable=True), make_node("ok")])
    plugin = nodeunschedulable.new({}, None)
    assert run_filter(plugin, make_pod(), snap) == {
        "cordoned": (UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) were unschedulable"]), "ok": None}
    tolerant = make_pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                      "effect": "NoSchedule"}])
    assert run_filter(plugin, tolerant, snap) == {"cordoned": None, "ok": None}
    wrong_effect = make_pod(tolerations=[{"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
                                          "effect": "NoExecute"}])
    assert run_filter(plugin, wrong_effect, snap)["cordoned"] is not None
    add, _ = plugin.events_to_register()
    assert add.hint(make_pod().pod, None, make_node("x").node)
    assert not add.hint(make_pod().pod, None, make_node("x", unschedulable=True).node)


# -- TaintToleration ------------------------------------------------------------------------------------

@pytest.mark.parametrize("toleration,taint,expected", [
    ({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
     {"key": "k", "value": "v", "effect": "NoSchedule"}, True),
    ({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"}, True),  # empty effect: all
    ({"key": "k", "operator": "Equal", "value": "x"}, {"key": "k", "value": "v", "effect": "NoSchedule"}, False),
    ({"key": "k", "operator": "Exists"}, {"key": "k", "value": "anything", "effect": "NoSchedule"}, True),
    ({"key": "k", "operator": "Exists", "effect": "NoExecute"}, {"key": "k", "effect": "NoSchedule"}, False),
    ({"operator": "Exists"}, {"key": "whatever", "value": "v", "effect": "NoExecute"}, True),  # tolerates all
    ({"operator": "Exists", "effect": "NoSchedule"}, {"key": "a", "effect": "PreferNoSchedule"}, False),
    ({"key": "other", "operator": "Exists"}, {"key": "k", "effect": "NoSchedule"}, False),
])
def test_toleration_matching(toleration, taint, expected):
    assert tainttoleration.tolerates([toleration], taint) is expected


def test_taint_filter_messages_and_effects():
    snap = Snapshot([
        make_node("clean"),
        make_node("gpu", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]),
        make_node("evict", taints=[{"key": "maintenance", "effect": "NoExecute"}]),
        make_node("soft", taints=[{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]),
    ])
    plugin = tainttoleration.new({}, None)
    result = run_filter(plugin, make_pod(), snap)
    assert result == {
        "clean": None,
        "gpu": (UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) had untolerated taint {dedicated: gpu}"]),
        "evict": (UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) had untolerated taint {maintenance: }"]),
        "soft": None,  # PreferNoSchedule only affects the score
    }
    tolerant = make_pod(tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"},
                                     {"key": "maintenance", "operator": "Exists", "effect": "NoExecute"}])
    assert set(v for v in run_filter(plugin, tolerant, snap).values()) == {None}
    # The cache is keyed by tolerations: a second pod with other tolerations is judged afresh.
    assert run_filter(plugin, make_pod("again"), snap)["gpu"] is not None


def test_taint_score_prefer_no_schedule_normalised_reversed():
    prefer = [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "value": "1", "effect": "PreferNoSchedule"}]
    snap = Snapshot([make_node("zero"), make_node("one", taints=prefer[:1]), make_node("two", taints=prefer)])
    plugin = tainttoleration.new({}, None)
    assert run_score(plugin, make_pod(), snap) == [100, 50, 0]
    # Tolerating "a" (empty effect = all effects) leaves one untolerated taint on "two".
    assert run_score(plugin, make_pod(tolerations=[{"key": "a", "operator": "Exists"}]), snap) == [100, 100, 0]
    # A NoSchedule-only toleration does not count for PreferNoSchedule taints.
    all_tolerated = make_pod(tolerations=[{"operator": "Exists"}])
    assert run_score(plugin, all_tolerated, snap) == [100, 100, 100]
    assert run_score(plugin, make_pod(tolerations=[{"operator": "Exists", "effect": "NoSchedule"}]),
                     snap) == [100, 50, 0]


def test_taint_node_hint():
    plugin = tainttoleration.new({}, None)
    node_event = plugin.events_to_register()[1]
    tainted = make_node("n", taints=[{"key": "k", "effect": "NoSchedule"}]).node
    clean = make_node("n").node
    pod = make_pod().pod
    assert node_event.hint(pod, tainted, clean)
    assert not node_event.hint(pod, clean, tainted)
    assert not node_event.hint(pod, clean, clean)


# -- NodeAffinity ---------------------------------------------------------------------------------------

def affinity(required=None, preferred=None):
    na = {}
    if required is not None:
        na["requiredDuringSchedulingIgnoredDuringExecution"] = {"nodeSelectorTerms": required}
    if preferred is not None:
        na["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    return {"nodeAffinity": na}


def zone_snapshot():
    return Snapshot([make_node("a", labels={"zone": "z1", "disk": "ssd"}),
                     make_node("b", labels={"zone": "z2", "disk": "ssd"}),
                     make_node("c", labels={"zone": "z3"})])


MISMATCH = (UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) didn't match Pod's node affinity/selector"])


def test_node_affinity_skip_and_node_selector():
    snap = zone_snapshot()
    plugin = nodeaffinity.new({}, PluginHandle())
    _, status = plugin.pre_filter(CycleState(), make_pod(), snap)
    assert status.code == SKIP
    assert plugin.pre_score(CycleState(), make_pod(), snap, snap.all_rows()).code == SKIP
    assert run_filter(plugin, make_pod(nodeSelector={"disk": "ssd", "zone": "z2"}), snap) == {
        "a": MISMATCH, "b": None, "c": MISMATCH}


def test_node_affinity_required_terms_are_ored_and_anded_with_selector():
    snap = zone_snapshot()
    plugin = nodeaffinity.new({}, PluginHandle())
    terms = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]},
             {"matchExpressions": [{"key": "disk", "operator": "DoesNotExist"}]}]
    assert run_filter(plugin, make_pod(affinity=affinity(terms)), snap) == {"a": None, "b": MISMATCH, "c": None}
    both = make_pod(affinity=affinity(terms), nodeSelector={"disk": "ssd"})
    assert run_filter(plugin, both, snap) == {"a": None, "b": MISMATCH, "c": MISMATCH}
    not_in = [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z1", "z2"]}]}]
    assert run_filter(plugin, make_pod(affinity=affinity(not_in)), snap) == {"a": MISMATCH, "b": MISMATCH, "c": None}
    # Required affinity with no terms matches nothing.
    assert list(run_filter(plugin, make_pod(affinity=affinity([])), snap).values()) == [MISMATCH] * 3


def test_node_affinity_match_fields_prefilter_result_and_conflict():
    snap = zone_snapshot()
    plugin = nodeaffinity.new({}, PluginHandle())
    terms = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["b"]}]},
             {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["c"]}]}]
    pod = make_pod(affinity=affinity(terms))
    result, status = plugin.pre_filter(CycleState(), pod, snap)
    assert status is None and result == PreFilterResult({"b", "c"})
    assert run_filter(plugin, pod, snap) == {"a": MISMATCH, "b": None, "c": None}
    # A term without a metadata.name requirement lets every node through PreFilter.
    mixed = make_pod(affinity=affinity(terms + [{"matchExpressions": [{"key": "zone", "operator": "Exists"}]}]))
    assert plugin.pre_filter(CycleState(), mixed, snap) == (None, None)
    conflict = make_pod(affinity=affinity([{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": ["a"]},
        {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]))
    _, status = plugin.pre_filter(CycleState(), conflict, snap)
    assert status.code == UNSCHEDULABLE_AND_UNRESOLVABLE and status.reasons == ["pod affinity terms conflict"]


def test_node_affinity_preferred_scores_normalised():
    snap = zone_snapshot()
    plugin = nodeaffinity.new({}, PluginHandle())
    preferred = [{"weight": 2, "preference": {"matchExpressions": [{"key": "disk", "operator": "In",
                                                                    "values": ["ssd"]}]}},
                 {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In",
                                                                    "values": ["z1"]}]}}]
    # Raw 7, 2, 0 → 100, 200//7 = 28, 0.
    assert run_score(plugin, make_pod(affinity=affinity(preferred=preferred)), snap) == [100, 28, 0]
    # No matching node at all: every score stays 0.
    none = [{"weight": 3, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]
    assert run_score(plugin, make_pod(affinity=affinity(preferred=none)), snap) == [0, 0, 0]


def test_node_affinity_cache_sees_label_changes():
    snap = zone_snapshot()
    plugin = nodeaffinity.new({}, PluginHandle())
    pod = make_pod(nodeSelector={"zone": "z3"})
    assert run_filter(plugin, pod, snap)["a"] == MISMATCH
    relabelled = make_node("a", labels={"zone": "z3"}, rv="2")
    snap.update_node(relabelled)
    # A new pod of the same "ReplicaSet" (same signature) sees the new labels.
    assert run_filter(plugin, make_pod("p2", nodeSelector={"zone": "z3"}), snap) == {
        "a": None, "b": MISMATCH, "c": None}
    # A new layout (node removed) also resets the cache.
    snap.set_nodes([snap.node_infos[1]])
    assert run_filter(plugin, make_pod("p3", nodeSelector={"zone": "z3"}), snap) == {"b": MISMATCH}


def test_node_affinity_added_affinity():
    snap = zone_snapshot()
    args = {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "disk", "operator": "Exists"}]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}}]}}
    plugin = nodeaffinity.new(args, PluginHandle())
    enforced = (UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) didn't match scheduler-enforced node affinity"])
    assert run_filter(plugin, make_pod(), snap) == {"a": None, "b": None, "c": enforced}
    assert run_score(plugin, make_pod(), snap) == [0, 100, 0]
    with pytest.raises(ValueError, match=r"^addedAffinity\.preferredDuringSchedulingIgnoredDuringExecution\[0\]"):
        nodeaffinity.new({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 0, "preference": {}}]}}, PluginHandle())


def test_node_affinity_node_hint():
    plugin = nodeaffinity.new({}, PluginHandle())
    add, _ = plugin.events_to_register()
    pod = make_pod(nodeSelector={"zone": "z1"}).pod
    assert add.hint(pod, None, make_node("x", labels={"zone": "z1"}).node)
    assert not add.hint(pod, None, make_node("x", labels={"zone": "z2"}).node)
    assert not add.hint(pod, make_node("x", labels={"zone": "z1"}).node, make_node("x", labels={"zone": "z1"}).node)


# -- NodePorts -----------------------------------------------------------------------------------------

def port(host_port, protocol=None, host_ip=None):
    p = {"containerPort": 80, "hostPort": host_port}
    if protocol:
        p["protocol"] = protocol
    if host_ip:
        p["hostIP"] = host_ip
    return p


def test_node_ports_conflicts():
    used = with_pods(make_node("used"), make_pod("web", containers=[container(ports=[port(80), port(
        8080, host_ip="10.0.0.1")])]))
    snap = Snapshot([used, make_node("free")])
    plugin = nodeports.new({}, None)
    conflict = (UNSCHEDULABLE, ["node(s) didn't have free ports for the requested pod ports"])

    def verdict(*ports):
        return run_filter(plugin, make_pod("p", containers=[container(ports=list(ports))]), snap)

    assert verdict(port(80, host_ip="10.0.0.9")) == {"used": conflict, "free": None}  # 0.0.0.0 is taken
    assert verdict(port(80, protocol="UDP")) == {"used": None, "free": None}
    assert verdict(port(8080, host_ip="10.0.0.2")) == {"used": None, "free": None}
    assert verdict(port(8080, host_ip="10.0.0.1")) == {"used": conflict, "free": None}
    assert verdict(port(8080)) == {"used": conflict, "free": None}  # 0.0.0.0 clashes with any IP
    assert verdict(port(9090)) == {"used": None, "free": None}
    _, status = plugin.pre_filter(CycleState(), make_pod(), snap)
    assert status.code == SKIP


def test_node_ports_delete_hint():
    plugin = nodeports.new({}, None)
    delete = plugin.events_to_register()[0]
    wants = make_pod("p", containers=[container(ports=[port(80)])]).pod
    holder = make_pod("h", containers=[container(ports=[port(80)])], nodeName="n").pod
    other = make_pod("o", containers=[container(ports=[port(81)])], nodeName="n").pod
    assert delete.hint(wants, holder, None)
    assert not delete.hint(wants, other, None)


# -- ImageLocality -----------------------------------------------------------------------------------

def test_image_locality_scores():
    nginx = [{"names": ["docker.io/library/nginx:1.25", "nginx:latest"], "sizeBytes": 500 * MI}]
    small = [{"names": ["tiny:1"], "sizeBytes": 10 * MI}]
    snap = Snapshot([make_node("a", images=nginx), make_node("b", images=nginx), make_node("c", images=small)])
    plugin = imagelocality.new({}, PluginHandle(snapshot_source=lambda: snap))
    pod = make_pod(containers=[container(image="nginx")])  # normalised to nginx:latest
    scaled = int(500 * MI * (2 / 3))
    expected = 100 * (scaled - 23 * MI) // (1000 * MI - 23 * MI)
    assert expected == 31
    assert run_score(plugin, pod, snap) == [31, 31, 0]
    # A small image stays below the 23 MiB floor.
    assert run_score(plugin, make_pod(containers=[container(image="tiny:1")]), snap) == [0, 0, 0]
    # Two containers double the ceiling.
    two = make_pod(containers=[container(image="nginx"), container(image="tiny:1")])
    assert run_score(plugin, two, snap) == [100 * (scaled - 23 * MI) // (2000 * MI - 23 * MI)] * 2 + [0]
    # The index follows node updates.
    snap.update_node(make_node("c", images=nginx, rv="2"))
    assert run_score(plugin, pod, snap) == [100 * (500 * MI - 23 * MI) // (977 * MI)] * 3
    assert imagelocality.normalized_image_name("reg:5000/app") == "reg:5000/app:latest"
    assert imagelocality.normalized_image_name("app@sha256:abc") == "app@sha256:abc"


# -- DefaultBinder ---------------------------------------------------------------------------------------

class FakeClient:
    def __init__(self, error=None):
        self.calls = []
        self.error = error

    def bind(self, name, namespace, node_name, *, uid=None, **kw):
        self.calls.append((name, namespace, node_name, uid))
        if self.error:
            raise self.error


def test_default_binder_binds_and_reports_errors():
    client = FakeClient()
    plugin = defaultbinder.new({}, PluginHandle(client=client))
    assert plugin.bind(CycleState(), make_pod("p", uid="u1"), "n1") is None
    assert client.calls == [("p", "default", "n1", "u1")]
    failing = defaultbinder.new({}, PluginHandle(client=FakeClient(RuntimeError('pods "p" not found'))))
    status = failing.bind(CycleState(), make_pod("p"), "n1")
    assert status.code == ERROR and status.reasons == ['pods "p" not found']


# -- EnqueueExtensions -------------------------------------------------------------------------------

def test_fit_events():
    plugin = fit()
    delete, add, update = plugin.events_to_register()
    assert (delete.kind, delete.action) == ("Pod", "Delete")
    assert delete.hint({}, {"spec": {"nodeName": "n"}}, None)
    assert not delete.hint({}, {"spec": {}}, None)
    pod = make_pod(containers=[container(cpu="3")]).pod
    assert add.hint(pod, None, make_node("big", cpu="4").node)
    assert not add.hint(pod, None, make_node("small", cpu="2").node)
    assert update.hint(pod, make_node("n", cpu="2").node, make_node("n", cpu="4").node)
    assert not update.hint(pod, make_node("n", cpu="4").node, make_node("n", cpu="4", labels={"x": "y"}).node)


def test_every_module_exposes_name_and_factory():
    names = {m.NAME for m in (queuesort, schedulinggates, noderesources, nodename, nodeunschedulable,
                              nodeaffinity, tainttoleration, nodeports, imagelocality, defaultbinder)}
    assert names == {"PrioritySort", "SchedulingGates", "NodeResourcesFit", "NodeName", "NodeUnschedulable",
                     "NodeAffinity", "TaintToleration", "NodePorts", "ImageLocality", "DefaultBinder"}
    for m in (queuesort, schedulinggates, noderesources, nodename, nodeunschedulable, nodeaffinity,
              tainttoleration, nodeports, imagelocality, defaultbinder):
        assert m.new({}, PluginHandle()).name == m.NAME


def test_snapshot_flag_counts_follow_node_updates():
    # Filters and TaintToleration's score skip the rows when no node has the flag: the counts must
    # follow cordons, taints and their removal, including on a row rewritten with the same flags.
    import random

    rng = random.Random(5)
    effects = ["NoSchedule", "NoExecute", "PreferNoSchedule"]
    snapshot = Snapshot([make_node(f"n{i}") for i in range(8)])
    unschedulable = nodeunschedulable.NodeUnschedulable()
    pod = make_pod("p")
    for step in range(200):
        name = f"n{rng.randrange(8)}"
        taints = [{"key": "k", "effect": e} for e in effects if rng.random() < 0.3]
        snapshot.update_node(make_node(name, taints=taints, unschedulable=rng.random() < 0.3, rv=str(step)))
        assert snapshot.unschedulable_rows == int(snapshot.unschedulable.sum())
        assert snapshot.tainted_rows == int(snapshot.has_taints.sum())
        assert snapshot.prefer_no_schedule_rows == int(snapshot.has_prefer_no_schedule.sum())
        rows = snapshot.all_rows()
        result = unschedulable.filter_nodes(None, pod, snapshot, rows)
        assert result.passed.tolist() == (~snapshot.unschedulable).tolist()
