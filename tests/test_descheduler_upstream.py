"""The upstream descheduler plugins (sigs.k8s.io/descheduler semantics) through koord-descheduler's framework.

Plugins get a real :class:`PluginHandle`; its evictor is a small recording :class:`Evictor` (the
framework boundary: the real one applies Filter plugins, limits and an Evict plugin). Pods and nodes are
plain dicts served by ``pod_index``; the last tests read pods from informers of the embedded API server.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest

from koordinator.apis.selectors import parse_label_selector
from koordinator.runtime.client import Client
from koordinator.runtime.informer import InformerFactory
from koordinator_roles.descheduler.framework.handle import PluginHandle
from koordinator_roles.descheduler.framework.nodefit import NOT_FIT_MESSAGE, fits_any_other_ready_node
from koordinator_roles.descheduler.plugins import defaultevictor
from koordinator_roles.descheduler.plugins.upstream import (FACTORIES, duplicates, failedpods, highnodeutilization,
                                                            interpodantiaffinity, lownodeutilization, nodeaffinity,
                                                            nodetaints, podlifetime, topologyspread, toomanyrestarts)
from tests import descheduler_fixtures as fixtures
from tests.descheduler_fixtures import Obj, RecordingEvictor, ago, informers, pod_index  # noqa: F401  (fixture)
from tests.waiting import wait_until


def node(name: str, labels: dict | None = None, **kwargs: Any) -> Obj:
    return fixtures.node(name, labels=labels, **kwargs)


def pod(name: str, node_name: str, *, owner: tuple[str, str] | None = ("ReplicaSet", "rs"), created: float = 3600,
        **kwargs: Any) -> Obj:
    return fixtures.pod(name, node_name, owner=owner, created=created, **kwargs)


def handle_for(pods: list[Obj], evictor: RecordingEvictor | None = None) -> PluginHandle:
    return PluginHandle(evictor=evictor or RecordingEvictor(), pod_index=pod_index(pods))


def run(module, args: dict | None, pods: list[Obj], nodes: list[Obj],
        evictor: RecordingEvictor | None = None) -> RecordingEvictor:
    """Build the plugin through its registry factory, run one round, return the evictor's record."""
    h = handle_for(pods, evictor)
    plugin = module.new(args, h)
    if hasattr(plugin, "deschedule"):
        assert plugin.deschedule(nodes) is None
    else:
        assert plugin.balance(nodes) is None
    return h.evictor


# -- registry and args validation ------------------------------------------------------------------------------

_VALID_ARGS = {"RemovePodsViolatingNodeAffinity": {"nodeAffinityType": [nodeaffinity.REQUIRED]},
               "RemovePodsHavingTooManyRestarts": {"podRestartThreshold": 1},
               "PodLifeTime": {"maxPodLifeTimeSeconds": 60},
               "LowNodeUtilization": {"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}},
               "HighNodeUtilization": {"thresholds": {"cpu": 20}}}


def test_registry_names_are_upstreams():
    assert set(FACTORIES) == {
        "RemovePodsViolatingNodeAffinity", "RemovePodsViolatingNodeTaints", "RemovePodsViolatingInterPodAntiAffinity",
        "RemoveDuplicates", "RemovePodsHavingTooManyRestarts", "RemoveFailedPods", "PodLifeTime",
        "RemovePodsViolatingTopologySpreadConstraint", "LowNodeUtilization", "HighNodeUtilization"}
    for name, factory in FACTORIES.items():
        assert factory(_VALID_ARGS.get(name), handle_for([])).name == name
    assert nodetaints.new(None, handle_for([])).name == "RemovePodsViolatingNodeTaints"


@pytest.mark.parametrize("module,args,message", [
    (nodeaffinity, {}, "RemovePodsViolatingNodeAffinity args: nodeAffinityType: nodeAffinityType needs to be set"),
    (nodeaffinity, {"nodeAffinityType": ["requiredDuringExecution"]},
     "nodeAffinityType: 'requiredDuringExecution': nodeAffinityType must be one of "
     "[preferredDuringSchedulingIgnoredDuringExecution requiredDuringSchedulingIgnoredDuringExecution]"),
    (nodetaints, {"namespaces": {"include": ["a"], "exclude": ["b"]}},
     "RemovePodsViolatingNodeTaints args: namespaces: only one of Include/Exclude namespaces can be set"),
    (nodetaints, {"namespaces": {"include": "a"}}, "namespaces.include: must be a list of strings, got 'a'"),
    (nodetaints, {"includePreferNoSchedule": "yes"}, "includePreferNoSchedule: must be a boolean, got 'yes'"),
    (nodetaints, {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bogus"}]}},
     "labelSelector: failed to get label selectors from strategy's params"),
    (nodetaints, {"excludedTaint": ["x"]}, "RemovePodsViolatingNodeTaints args: unknown field 'excludedTaint'"),
    (toomanyrestarts, {}, "RemovePodsHavingTooManyRestarts args: podRestartThreshold: invalid "
                          "PodsHavingTooManyRestarts threshold 0 (must be at least 1)"),
    (toomanyrestarts, {"podRestartThreshold": "5"}, "podRestartThreshold: must be an integer, got '5'"),
    (toomanyrestarts, {"podRestartThreshold": 5, "states": ["Pending"]},
     "states: 'Pending': states must be one of [CrashLoopBackOff Running]"),
    (podlifetime, {}, "PodLifeTime args: maxPodLifeTimeSeconds: MaxPodLifeTimeSeconds not set"),
    (podlifetime, {"maxPodLifeTimeSeconds": -1}, "maxPodLifeTimeSeconds: must be at least 0, got -1"),
    (podlifetime, {"maxPodLifeTimeSeconds": 60, "states": ["Failed"]},
     "states: 'Failed': states must be one of [ContainerCreating Pending PodInitializing Running]"),
    (failedpods, {"minPodLifetimeSeconds": -5}, "RemoveFailedPods args: minPodLifetimeSeconds: must be at least 0"),
    (failedpods, {"exitCodes": ["1"]}, "exitCodes: must be a list of integers, got ['1']"),
    (duplicates, {"excludeOwnerKinds": "ReplicaSet"}, "RemoveDuplicates args: excludeOwnerKinds: must be a list"),
    (duplicates, {"labelSelector": {}}, "RemoveDuplicates args: unknown field 'labelSelector'"),
    (topologyspread, {"constraints": ["Never"]},
     "constraints: 'Never': constraints must be one of [DoNotSchedule ScheduleAnyway]"),
    (interpodantiaffinity, [], "RemovePodsViolatingInterPodAntiAffinity args: must be an object, got list"),
])
def test_args_validation_names_the_field(module, args, message):
    with pytest.raises(ValueError) as e:
        module.parse_args(args)
    assert message in str(e.value)


def test_args_defaults():
    assert topologyspread.parse_args(None) == topologyspread.TopologySpreadArgs()
    assert topologyspread.parse_args({"includeSoftConstraints": True}).constraints == ("DoNotSchedule",
                                                                                       "ScheduleAnyway")
    a = failedpods.parse_args({})
    assert (a.min_pod_lifetime_seconds, a.reasons, a.including_init_containers) == (None, (), False)
    assert nodetaints.parse_args({"apiVersion": "descheduler/v1alpha2", "kind": "X"}) == nodetaints.NodeTaintsArgs()
    t = toomanyrestarts.parse_args({"podRestartThreshold": 3})
    assert (t.including_init_containers, t.states) == (False, ())


# -- RemovePodsViolatingNodeAffinity ---------------------------------------------------------------------------

def _required(key: str, *values: str) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": key, "operator": "In", "values": list(values)}]}]}}}


REQ = {"nodeAffinityType": ["requiredDuringSchedulingIgnoredDuringExecution"]}


def test_node_affinity_required_evicts_when_another_node_fits():
    nodes = [node("n1", {"disk": "hdd"}), node("n2", {"disk": "ssd"})]
    pods = [pod("violator", "n1", affinity=_required("disk", "ssd")),
            pod("fine", "n2", affinity=_required("disk", "ssd")),
            pod("no-affinity", "n1"),
            pod("selector-only", "n1", nodeSelector={"disk": "ssd"})]
    ev = run(nodeaffinity, REQ, pods, nodes)
    assert ev.names == ["violator"]
    name, opts = ev.evicted[0]
    assert opts.plugin_name == "RemovePodsViolatingNodeAffinity" and "node affinity" in opts.reason


@pytest.mark.parametrize("other", [
    node("n2", {"disk": "ssd"}, cpu="50m"),  # too small
    node("n2", {"disk": "ssd"}, unschedulable=True),
    node("n2", {"disk": "ssd"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}]),
    node("n2", {"disk": "hdd"}),
])
def test_node_affinity_required_keeps_pods_that_fit_nowhere_else(other):
    ev = run(nodeaffinity, REQ, [pod("violator", "n1", affinity=_required("disk", "ssd"))],
             [node("n1", {"disk": "hdd"}), other])
    assert ev.names == []


def test_node_affinity_counts_what_the_other_node_already_runs():
    nodes = [node("n1", {"disk": "hdd"}), node("n2", {"disk": "ssd"}, cpu="1")]
    pods = [pod("violator", "n1", cpu="600m", affinity=_required("disk", "ssd")), pod("big", "n2", cpu="500m")]
    assert run(nodeaffinity, REQ, pods, nodes).names == []


def test_node_affinity_namespaces_label_selector_and_evictor_filter():
    nodes = [node("n1"), node("n2", {"disk": "ssd"})]
    aff = _required("disk", "ssd")
    pods = [pod("a", "n1", ns="skip", affinity=aff), pod("b", "n1", labels={"app": "x"}, affinity=aff),
            pod("c", "n1", labels={"app": "y"}, affinity=aff), pod("d", "n1", labels={"app": "x"}, affinity=aff)]
    args = {**REQ, "namespaces": {"exclude": ["skip"]}, "labelSelector": {"matchLabels": {"app": "x"}}}
    ev = run(nodeaffinity, args, pods, nodes, RecordingEvictor(refuse=lambda p: p["metadata"]["name"] == "d"))
    assert ev.names == ["b"]


def test_node_affinity_preferred_moves_to_a_better_node():
    pref = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}}]}}
    nodes = [node("n1", {"zone": "b"}), node("n2", {"zone": "a"})]
    pods = [pod("p1", "n1", affinity=pref), pod("p2", "n2", affinity=pref)]
    args = {"nodeAffinityType": ["preferredDuringSchedulingIgnoredDuringExecution"]}
    assert run(nodeaffinity, args, pods, nodes).names == ["p1"]
    assert run(nodeaffinity, REQ, pods, nodes).names == []  # required mode ignores preferences


def test_node_affinity_respects_the_node_limit():
    nodes = [node("n1"), node("n2", {"disk": "ssd"})]
    pods = [pod(f"p{i}", "n1", affinity=_required("disk", "ssd")) for i in range(4)]
    assert len(run(nodeaffinity, REQ, pods, nodes, RecordingEvictor(node_limit=2)).names) == 2


# -- RemovePodsViolatingNodeTaints -----------------------------------------------------------------------------

def _taint(key: str, value: str = "", effect: str = "NoSchedule") -> dict:
    return {"key": key, "value": value, "effect": effect}


def test_node_taints_evicts_pods_not_tolerating_no_schedule():
    nodes = [node("n1", taints=[_taint("dedicated", "gpu")]), node("n2")]
    pods = [pod("intolerant", "n1"),
            pod("tolerant", "n1", tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu"}]),
            pod("exists", "n1", tolerations=[{"operator": "Exists"}]),
            pod("elsewhere", "n2")]
    ev = run(nodetaints, {}, pods, nodes)
    assert ev.names == ["intolerant"]
    assert "dedicated=gpu:NoSchedule" in ev.evicted[0][1].reason


def test_node_taints_prefer_no_schedule_only_when_included():
    nodes = [node("n1", taints=[_taint("soft", effect="PreferNoSchedule"), _taint("x", effect="NoExecute")])]
    pods = [pod("p", "n1")]
    assert run(nodetaints, {}, pods, nodes).names == []
    assert run(nodetaints, {"includePreferNoSchedule": True}, pods, nodes).names == ["p"]


def test_node_taints_excluded_and_included_taints():
    nodes = [node("n1", taints=[_taint("a", "1")]), node("n2", taints=[_taint("b", "2")])]
    pods = [pod("p1", "n1"), pod("p2", "n2")]
    assert run(nodetaints, {"excludedTaints": ["a"]}, pods, nodes).names == ["p2"]
    assert run(nodetaints, {"excludedTaints": ["a=1", "b=3"]}, pods, nodes).names == ["p2"]
    assert run(nodetaints, {"includedTaints": ["b=2"]}, pods, nodes).names == ["p2"]
    assert run(nodetaints, {"includedTaints": ["b=9"]}, pods, nodes).names == []


def test_node_taints_pre_eviction_filter_and_node_limit():
    nodes = [node("n1", taints=[_taint("a")])]
    pods = [pod(f"p{i}", "n1") for i in range(5)]
    ev = run(nodetaints, {}, pods, nodes, RecordingEvictor(pre_refuse=lambda p: p["metadata"]["name"] == "p0",
                                                           node_limit=2))
    assert ev.names == ["p1", "p2"]


# -- RemovePodsViolatingInterPodAntiAffinity -------------------------------------------------------------------

def _anti(key: str = "kubernetes.io/hostname", **labels: str) -> dict:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": labels}, "topologyKey": key}]}}


def test_inter_pod_anti_affinity_evicts_lowest_priority_once():
    nodes = [node("n1", {"kubernetes.io/hostname": "n1"}), node("n2", {"kubernetes.io/hostname": "n2"})]
    pods = [pod("high", "n1", labels={"app": "db"}, priority=100, affinity=_anti(app="db")),
            pod("low", "n1", labels={"app": "db"}, priority=1, affinity=_anti(app="db")),
            pod("alone", "n2", labels={"app": "db"}, affinity=_anti(app="db"))]
    ev = run(interpodantiaffinity, {}, pods, nodes)
    # Once "low" is gone, "high" no longer violates anything.
    assert ev.names == ["low"]


def test_inter_pod_anti_affinity_topology_domains_and_namespaces():
    nodes = [node("n1", {"zone": "a"}), node("n2", {"zone": "a"}), node("n3", {"zone": "b"})]
    pods = [pod("web", "n1", affinity=_anti("zone", app="cache")),
            pod("cache", "n2", labels={"app": "cache"}),
            pod("web-b", "n3", affinity=_anti("zone", app="cache")),
            pod("other-ns", "n3", ns="other", labels={"app": "cache"})]
    assert run(interpodantiaffinity, {}, pods, nodes).names == ["web"]
    # The term's namespaces widen the match to "other".
    pods[2]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
        "namespaces"] = ["other"]
    assert run(interpodantiaffinity, {}, pods, nodes).names == ["web", "web-b"]


def test_inter_pod_anti_affinity_ignores_finished_pods_and_refused_pods():
    nodes = [node("n1", {"h": "1"})]
    pods = [pod("web", "n1", affinity=_anti("h", app="x")), pod("done", "n1", labels={"app": "x"},
                                                                phase="Succeeded")]
    assert run(interpodantiaffinity, {}, pods, nodes).names == []
    pods[1]["status"]["phase"] = "Running"
    assert run(interpodantiaffinity, {}, pods, nodes, RecordingEvictor(refuse=lambda p: True)).names == []
    assert run(interpodantiaffinity, {"namespaces": {"include": ["other"]}}, pods, nodes).names == []


# -- RemoveDuplicates ------------------------------------------------------------------------------------------

def test_remove_duplicates_spreads_to_the_upper_average():
    nodes = [node("n1"), node("n2")]
    pods = [pod(f"p{i}", "n1", created=100 - i) for i in range(3)] + [pod("other-image", "n1", image="app:2")]
    ev = run(duplicates, {}, pods, nodes)
    # 3 pods of rs/app:1 over 2 nodes: each keeps ceil(3/2) = 2; the youngest duplicate goes.
    assert ev.names == ["p2"]
    assert ev.evicted[0][1].plugin_name == "RemoveDuplicates"


def test_remove_duplicates_needs_a_second_feasible_node_and_honours_exclusions():
    pods = [pod(f"p{i}", "n1") for i in range(3)]
    assert run(duplicates, {}, pods, [node("n1"), node("n2", taints=[_taint("t")])]).names == []
    assert run(duplicates, {}, pods, [node("n1"), node("n2", unschedulable=True)]).names == []
    assert run(duplicates, {"excludeOwnerKinds": ["ReplicaSet"]}, pods, [node("n1"), node("n2")]).names == []
    assert run(duplicates, {"namespaces": {"exclude": ["default"]}}, pods, [node("n1"), node("n2")]).names == []
    bare = [pod(f"b{i}", "n1", owner=None) for i in range(3)]
    assert run(duplicates, {}, bare, [node("n1"), node("n2")]).names == []


def test_remove_duplicates_counts_pods_on_every_node():
    nodes = [node("n1"), node("n2"), node("n3")]
    pods = [pod(f"a{i}", "n1", created=100 - i) for i in range(4)] + [pod("b0", "n2"), pod("b1", "n2")]
    # 6 pods over 3 nodes: 2 per node, n1 gives 2 of its 3 duplicates... keeps a0, a1.
    assert run(duplicates, {}, pods, nodes).names == ["a2", "a3"]


def test_remove_duplicates_respects_the_node_limit():
    pods = [pod(f"p{i}", "n1", created=100 - i) for i in range(8)]
    ev = run(duplicates, {}, pods, [node("n1"), node("n2")], RecordingEvictor(node_limit=1))
    assert ev.names == ["p4"]


# -- RemovePodsHavingTooManyRestarts ---------------------------------------------------------------------------

def _restarting(name: str, counts: list[int], init: list[int] = (), waiting: str = "", phase: str = "Running"):
    p = pod(name, "n1", phase=phase)
    state = {"waiting": {"reason": waiting}} if waiting else {"running": {}}
    p["status"]["containerStatuses"] = [{"name": f"c{i}", "restartCount": c, "state": state}
                                        for i, c in enumerate(counts)]
    p["status"]["initContainerStatuses"] = [{"name": f"i{i}", "restartCount": c, "state": {}}
                                            for i, c in enumerate(init)]
    return p


def test_too_many_restarts_sums_containers():
    pods = [_restarting("sum", [3, 3]), _restarting("few", [5]), _restarting("init", [2], init=[10])]
    ev = run(toomanyrestarts, {"podRestartThreshold": 6}, pods, [node("n1")])
    assert ev.names == ["sum"]
    assert ev.evicted[0][1].reason == "pod restarted 6 times (threshold 6)"
    ev = run(toomanyrestarts, {"podRestartThreshold": 6, "includingInitContainers": True}, pods, [node("n1")])
    assert ev.names == ["sum", "init"]


def test_too_many_restarts_states():
    pods = [_restarting("crash", [9], waiting="CrashLoopBackOff", phase="Running"),
            _restarting("pending", [9], phase="Pending")]
    assert run(toomanyrestarts, {"podRestartThreshold": 1, "states": ["CrashLoopBackOff"]}, pods,
               [node("n1")]).names == ["crash"]
    assert run(toomanyrestarts, {"podRestartThreshold": 1, "states": ["Running"]}, pods,
               [node("n1")]).names == ["crash"]
    assert run(toomanyrestarts, {"podRestartThreshold": 1}, pods, [node("n1")]).names == ["crash", "pending"]


# -- RemoveFailedPods ------------------------------------------------------------------------------------------

def _failed(name: str, reason: str = "", container_reason: str = "", exit_code: int = 1, created: float = 3600,
            owner=("ReplicaSet", "rs"), init_reason: str = "") -> Obj:
    p = pod(name, "n1", phase="Failed", created=created, owner=owner)
    if reason:
        p["status"]["reason"] = reason
    p["status"]["containerStatuses"] = [{"name": "c", "state": {"terminated": {"reason": container_reason,
                                                                               "exitCode": exit_code}}}]
    if init_reason:
        p["status"]["initContainerStatuses"] = [{"name": "i", "state": {"waiting": {"reason": init_reason}}}]
    return p


def test_failed_pods_only_failed_phase():
    pods = [_failed("failed"), pod("running", "n1")]
    ev = run(failedpods, {}, pods, [node("n1")])
    assert ev.names == ["failed"]
    assert ev.evicted[0][1].plugin_name == "RemoveFailedPods"


def test_failed_pods_reasons_exit_codes_age_and_owners():
    pods = [_failed("evicted", reason="Evicted"), _failed("oom", container_reason="OOMKilled", exit_code=137),
            _failed("young", reason="Evicted", created=10), _failed("job", reason="Evicted", owner=("Job", "j")),
            _failed("init", init_reason="CreateContainerConfigError")]
    n = [node("n1")]
    assert run(failedpods, {"reasons": ["Evicted"]}, pods, n).names == ["evicted", "young", "job"]
    assert run(failedpods, {"reasons": ["OOMKilled"]}, pods, n).names == ["oom"]
    assert run(failedpods, {"exitCodes": [137]}, pods, n).names == ["oom"]
    assert run(failedpods, {"reasons": ["Evicted"], "minPodLifetimeSeconds": 600,
                            "excludeOwnerKinds": ["Job"]}, pods, n).names == ["evicted"]
    assert run(failedpods, {"reasons": ["CreateContainerConfigError"]}, pods, n).names == []
    assert run(failedpods, {"reasons": ["CreateContainerConfigError"], "includingInitContainers": True},
               pods, n).names == ["init"]


def test_failed_pods_clock_is_injectable():
    p = _failed("f", created=100)
    created = time.time() - 100
    h = handle_for([p])
    plugin = failedpods.RemoveFailedPods(failedpods.parse_args({"minPodLifetimeSeconds": 500}), h,
                                         clock=lambda: created + 1000)
    plugin.deschedule([node("n1")])
    assert h.evictor.names == ["f"]


# -- PodLifeTime -----------------------------------------------------------------------------------------------

def test_pod_lifetime_evicts_old_pods_oldest_first_within_limits():
    nodes = [node("n1"), node("n2")]
    pods = [pod("young", "n1", created=60), pod("old", "n1", created=7200), pod("older", "n1", created=9000),
            pod("old2", "n2", created=8000)]
    assert run(podlifetime, {"maxPodLifeTimeSeconds": 3600}, pods, nodes).names == ["older", "old2", "old"]
    ev = run(podlifetime, {"maxPodLifeTimeSeconds": 3600}, pods, nodes, RecordingEvictor(node_limit=1))
    assert ev.names == ["older", "old2"]
    assert "maxPodLifeTimeSeconds 3600" in ev.evicted[0][1].reason


def test_pod_lifetime_states_and_label_selector():
    creating = pod("creating", "n1", phase="Pending", created=7200, labels={"team": "a"})
    creating["status"]["containerStatuses"] = [{"name": "c", "state": {"waiting": {"reason": "ContainerCreating"}}}]
    pods = [creating, pod("running", "n1", created=7200, labels={"team": "b"})]
    n = [node("n1")]
    assert run(podlifetime, {"maxPodLifeTimeSeconds": 60, "states": ["ContainerCreating"]}, pods, n).names == [
        "creating"]
    assert run(podlifetime, {"maxPodLifeTimeSeconds": 60, "states": ["Running"]}, pods, n).names == ["running"]
    assert run(podlifetime, {"maxPodLifeTimeSeconds": 60, "labelSelector": {"matchExpressions": [
        {"key": "team", "operator": "NotIn", "values": ["a"]}]}}, pods, n).names == ["running"]


# -- RemovePodsViolatingTopologySpreadConstraint ---------------------------------------------------------------

def _spread(max_skew: int = 1, when: str = "DoNotSchedule", key: str = "zone") -> list:
    return [{"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when,
             "labelSelector": {"matchLabels": {"app": "web"}}}]


def _zoned_nodes() -> list[Obj]:
    return [node("a1", {"zone": "a"}), node("b1", {"zone": "b"})]


def test_topology_spread_moves_half_the_excess_to_the_small_domain():
    pods = [pod(f"w{i}", "a1", labels={"app": "web"}, topologySpreadConstraints=_spread(), priority=i)
            for i in range(4)]
    ev = run(topologyspread, {}, pods, _zoned_nodes())
    # 4 vs 0 with maxSkew 1: ideal 2 per zone, so 2 pods move; the lowest priorities go first.
    assert sorted(ev.names) == ["w0", "w1"]
    assert ev.evicted[0][1].plugin_name == "RemovePodsViolatingTopologySpreadConstraint"


def test_topology_spread_balanced_soft_and_other_selectors_are_left_alone():
    nodes = _zoned_nodes()
    balanced = [pod("w0", "a1", labels={"app": "web"}, topologySpreadConstraints=_spread()),
                pod("w1", "a1", labels={"app": "web"}, topologySpreadConstraints=_spread()),
                pod("w2", "b1", labels={"app": "web"}, topologySpreadConstraints=_spread())]
    assert run(topologyspread, {}, balanced, nodes).names == []
    soft = [pod(f"s{i}", "a1", labels={"app": "web"}, topologySpreadConstraints=_spread(when="ScheduleAnyway"))
            for i in range(4)]
    assert run(topologyspread, {}, soft, nodes).names == []
    assert len(run(topologyspread, {"constraints": ["DoNotSchedule", "ScheduleAnyway"]}, soft, nodes).names) == 2
    unlabelled = [pod(f"u{i}", "a1", topologySpreadConstraints=_spread()) for i in range(4)]
    assert run(topologyspread, {}, unlabelled, nodes).names == []


def test_topology_spread_node_fit_and_unevictable_pods():
    nodes = [node("a1", {"zone": "a"}), node("b1", {"zone": "b"}, taints=[_taint("t")])]
    pods = [pod(f"w{i}", "a1", labels={"app": "web"}, topologySpreadConstraints=_spread()) for i in range(4)]
    assert run(topologyspread, {}, pods, nodes).names == []
    assert len(run(topologyspread, {"topologyBalanceNodeFit": False}, pods, nodes).names) == 2
    # Pods the evictor refuses are kept first: the movable ones are picked instead.
    ev = run(topologyspread, {}, pods, _zoned_nodes(),
             RecordingEvictor(refuse=lambda p: p["metadata"]["name"] in ("w2", "w3")))
    assert sorted(ev.names) == ["w0", "w1"]


def test_topology_spread_respects_the_node_limit():
    pods = [pod(f"w{i}", "a1", labels={"app": "web"}, topologySpreadConstraints=_spread()) for i in range(6)]
    assert len(run(topologyspread, {}, pods, _zoned_nodes(), RecordingEvictor(node_limit=2)).names) == 2


def test_topology_spread_three_zones_and_max_skew():
    nodes = [node("a1", {"zone": "a"}), node("b1", {"zone": "b"}), node("c1", {"zone": "c"})]
    pods = [pod(f"w{i}", "a1", labels={"app": "web"}, topologySpreadConstraints=_spread(max_skew=2))
            for i in range(6)]
    # 6/0/0, ideal 2: a gives 2 to c and 2 to b in two steps (each min(ceil(6-2), 2, ceil((6-2)/2)) ...).
    ev = run(topologyspread, {}, pods, nodes)
    assert len(ev.names) == 3  # 6-0 skew 6 → move 2 (halfSkew 2); then 4-0 → move 1: 3/2/1 within maxSkew 2


# -- through the embedded API server's informers ---------------------------------------------------------------

def _server_pod(name: str, ns: str, node_name: str, **spec: Any) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": {"app": "db"}},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "app:1"}], **spec}}


def test_node_taints_and_anti_affinity_read_pods_from_the_informer_cache(client, namespace, informers):  # noqa: F811
    n1, n2 = f"n1-{uuid.uuid4().hex[:6]}", f"n2-{uuid.uuid4().hex[:6]}"
    client.create(_server_pod("intolerant", namespace, n1))
    client.create(_server_pod("tolerant", namespace, n1, tolerations=[{"key": "gpu", "operator": "Exists"}]))
    client.create(_server_pod("db-a", namespace, n2, affinity=_anti(app="db")))
    client.create(_server_pod("db-b", namespace, n2, affinity=_anti(app="db")))
    evictor = RecordingEvictor()
    handle = PluginHandle(informers=informers, evictor=evictor)
    taints = nodetaints.new({"namespaces": {"include": [namespace]}}, handle)
    anti = interpodantiaffinity.new({"namespaces": {"include": [namespace]}}, handle)
    informers.start()
    assert informers.wait_for_sync(20)
    wait_until(lambda: len(handle.pods_on_node(n1)) == 2 and len(handle.pods_on_node(n2)) == 2,
               message="pods in the informer cache")
    nodes = [node(n1, {"kubernetes.io/hostname": n1}, taints=[_taint("gpu", "true")]),
             node(n2, {"kubernetes.io/hostname": n2})]
    taints.deschedule(nodes)
    assert evictor.names == ["intolerant"]
    anti.deschedule(nodes)
    # Equal priorities: one of the two goes, and then the other no longer violates anything.
    assert evictor.names[0] == "intolerant" and len(evictor.names) == 2 and evictor.names[1] in ("db-a", "db-b")


# -- LowNodeUtilization / HighNodeUtilization (requests-based) -------------------------------------------------

def _loaded(node_name: str, count: int, cpu: str = "500m", prefix: str = "") -> list[Obj]:
    return [pod(f"{prefix or node_name}-{i}", node_name, cpu=cpu, priority=i) for i in range(count)]


@pytest.mark.parametrize("module,args,message", [
    (lownodeutilization, {"thresholds": {"cpu": 90}, "targetThresholds": {"cpu": 80}},
     "LowNodeUtilization args: thresholds.cpu: 90 is above targetThresholds.cpu 80"),
    (lownodeutilization, {"targetThresholds": {"cpu": 80}}, "thresholds: no resource threshold is configured"),
    (lownodeutilization, {"thresholds": {"cpu": 10}, "targetThresholds": {"memory": 80}},
     "thresholds: thresholds and targetThresholds configured different resources"),
    (lownodeutilization, {"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 180}},
     "targetThresholds.cpu: 180 threshold not in [0, 100] range"),
    (lownodeutilization, {"thresholds": {"cpu": "10"}, "targetThresholds": {"cpu": 80}},
     "thresholds.cpu: must be a number, got '10'"),
    (lownodeutilization, {"thresholds": {"cpu": 10}, "targetThresholds": {"cpu": 80},
                          "evictableNamespaces": {"include": ["a"]}},
     "evictableNamespaces: only Exclude namespaces can be set, inclusion is not supported"),
    (highnodeutilization, {}, "HighNodeUtilization args: thresholds: no resource threshold is configured"),
    (highnodeutilization, {"thresholds": {"cpu": 20}, "numberOfNodes": -1}, "numberOfNodes: must be at least 0"),
])
def test_node_utilization_args_validation(module, args, message):
    with pytest.raises(ValueError) as e:
        module.parse_args(args)
    assert message in str(e.value)


def test_node_utilization_defaults_unnamed_resources():
    a = lownodeutilization.parse_args({"thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 50}})
    assert a.thresholds == {"cpu": 20, "memory": 100, "pods": 100} and a.target_thresholds["pods"] == 100
    d = lownodeutilization.parse_args({"thresholds": {"cpu": 5}, "targetThresholds": {"cpu": 5},
                                       "useDeviationThresholds": True})
    assert d.thresholds["memory"] == 0 and d.target_thresholds["pods"] == 0
    assert highnodeutilization.parse_args({"thresholds": {"cpu": 20}}).thresholds["memory"] == 100


LNU = {"thresholds": {"cpu": 20, "pods": 20}, "targetThresholds": {"cpu": 50, "pods": 50}}


def test_low_node_utilization_moves_down_to_the_target():
    nodes = [node("n1"), node("n2"), node("n3")]
    pods = _loaded("n1", 6) + _loaded("n3", 1, cpu="1")
    ev = run(lownodeutilization, LNU, pods, nodes)
    # n1 is at 75% cpu, n2 (0%) is under-utilized, n3 (25%) neither: n1 gives pods until it is at 50%.
    assert ev.names == ["n1-0", "n1-1"]
    assert ev.evicted[0][1].reason == "node n1 is above targetThresholds"


def test_low_node_utilization_stops_when_the_room_is_used_up():
    nodes = [node("n1"), node("n2", cpu="1")]
    ev = run(lownodeutilization, LNU, _loaded("n1", 8), nodes)
    # n2 can take 50% of 1 cpu = 500m: one pod.
    assert ev.names == ["n1-0"]


@pytest.mark.parametrize("args,nodes", [
    ({**LNU, "numberOfNodes": 1}, [node("n1"), node("n2")]),      # one under-utilized node is not more than 1
    (LNU, [node("n1"), node("n2", unschedulable=True)]),            # an unschedulable node is no destination
    ({**LNU, "evictableNamespaces": {"exclude": ["default"]}}, [node("n1"), node("n2")]),
])
def test_low_node_utilization_does_nothing(args, nodes):
    assert run(lownodeutilization, args, _loaded("n1", 6), nodes).names == []


def test_low_node_utilization_all_under_utilized_or_none_over():
    assert run(lownodeutilization, LNU, _loaded("n1", 1), [node("n1"), node("n2")]).names == []
    assert run(lownodeutilization, LNU, _loaded("n1", 3), [node("n1"), node("n2")]).names == []


def test_low_node_utilization_deviation_thresholds():
    nodes = [node("n1"), node("n2"), node("n3")]
    pods = _loaded("n1", 6) + _loaded("n3", 1, cpu="1")
    band = {"cpu": 10, "memory": 10, "pods": 10}  # unnamed resources would get a band of 0 and no room at all
    args = {"thresholds": band, "targetThresholds": band, "useDeviationThresholds": True}
    ev = run(lownodeutilization, args, pods, nodes)
    # Average cpu 33%: n2 (0%) is below 23%, n1 (75%) above 43%; n3 is in the band.
    assert ev.names and all(n.startswith("n1-") for n in ev.names)


def test_high_node_utilization_empties_under_utilized_nodes():
    nodes = [node("n1"), node("n2"), node("n3")]
    pods = _loaded("n1", 1) + _loaded("n2", 4) + _loaded("n3", 5)
    ev = run(highnodeutilization, {"thresholds": {"cpu": 20}}, pods, nodes)
    assert ev.names == ["n1-0"]
    assert ev.evicted[0][1].plugin_name == "HighNodeUtilization"
    full = _loaded("n1", 1) + _loaded("n2", 8)
    assert run(highnodeutilization, {"thresholds": {"cpu": 20}}, full, nodes[:2]).names == []
    assert run(highnodeutilization, {"thresholds": {"cpu": 20}}, _loaded("n1", 1), nodes[:2]).names == []
    assert run(highnodeutilization, {"thresholds": {"cpu": 20}, "numberOfNodes": 1}, pods, nodes).names == []
    assert run(highnodeutilization, {"thresholds": {"cpu": 20}, "evictableNamespaces": {"exclude": ["default"]}},
               pods, nodes).names == []


# -- DefaultEvictor: nodeFit, minReplicas, minPodAge, ignorePodsWithoutPDB ------------------------------------

@pytest.mark.parametrize("args, message", [
    ({"minPodAge": "soon"}, "minPodAge: Invalid value: 'soon': must be a duration string"),
    ({"minPodAge": 300}, "minPodAge: Invalid value: 300: must be a duration string"),
    ({"minPodAge": "-1m"}, "minPodAge: Invalid value: '-1m': must be greater than or equal to 0"),
    ({"minReplicas": -1}, "minReplicas: Invalid value: -1: must be greater than or equal to 0"),
    ({"minReplicas": "2"}, "minReplicas: Invalid value: '2': must be an integer"),
    ({"minReplicas": True}, "minReplicas: Invalid value: True: must be an integer"),
    ({"nodeSelector": "a==b==c"}, "nodeSelector: Invalid value: 'a==b==c': found '==', expected"),
    ({"nodeSelector": {"pool": "a"}}, "nodeSelector: Invalid value: {'pool': 'a'}: must be a label selector string"),
    ({"nodeFit": "yes"}, "nodeFit: Invalid value: 'yes': must be true or false"),
    ({"ignorePodsWithoutPDB": 1}, "ignorePodsWithoutPDB: Invalid value: 1: must be true or false"),
])
def test_default_evictor_new_args_errors_name_the_field(args, message):
    with pytest.raises(ValueError) as info:
        defaultevictor.DefaultEvictorArgs.parse(args)
    assert str(info.value).startswith(message), str(info.value)


def test_default_evictor_new_args_values_and_the_informers_they_need():  # noqa: F811
    a = defaultevictor.DefaultEvictorArgs.parse({"minPodAge": "5m", "minReplicas": 3, "nodeSelector": "pool in (a,b)",
                                                 "nodeFit": True, "ignorePodsWithoutPDB": True})
    assert (a.min_pod_age, a.min_replicas, a.node_selector, a.node_fit, a.ignore_pods_without_pdb) == \
        (300.0, 3, "pool in (a,b)", True, True)
    assert defaultevictor.DefaultEvictorArgs.parse({}).min_pod_age is None
    # minReplicas 0 or 1 checks nothing (upstream), so it needs no informer; the others read the caches.
    assert defaultevictor.new({"minReplicas": 1}, PluginHandle()).why_not(pod("p", "n1")) is None
    for args in ({"nodeFit": True}, {"minReplicas": 2}, {"ignorePodsWithoutPDB": True}):
        with pytest.raises(ValueError, match="informer"):
            defaultevictor.new(args, PluginHandle())


def test_pod_covered_by_pdb():
    web = pod("w", "n1", ns="a", labels={"app": "web"})

    def pdb(ns: str, selector: Any) -> Obj:
        return {"metadata": {"name": "b", "namespace": ns}, "spec": {"selector": selector}}
    assert defaultevictor.covered_by_pdb(web, [pdb("a", {"matchLabels": {"app": "web"}})])
    assert defaultevictor.covered_by_pdb(web, [pdb("a", {})])  # policy/v1: an empty selector selects every pod
    assert not defaultevictor.covered_by_pdb(web, [])
    assert not defaultevictor.covered_by_pdb(web, [pdb("b", {"matchLabels": {"app": "web"}})])  # other namespace
    assert not defaultevictor.covered_by_pdb(web, [pdb("a", None)])  # no selector: selects nothing
    assert not defaultevictor.covered_by_pdb(web, [pdb("a", {"matchLabels": {"app": "db"}})])
    bad = pdb("a", {"matchExpressions": [{"key": "app", "operator": "Near"}]})
    assert defaultevictor.covered_by_pdb(web, [bad, pdb("a", {"matchLabels": {"app": "web"}})])
    assert not defaultevictor.covered_by_pdb(web, [bad])


def test_min_pod_age_counts_from_the_start_time():
    now = time.time()
    started = {**pod("p", "n1"), "status": {"phase": "Running", "startTime": ago(120)}}
    assert defaultevictor.old_enough(started, 60, now) and not defaultevictor.old_enough(started, 600, now)
    assert not defaultevictor.old_enough(pod("p", "n1"), 0, now)  # not started: never old enough (upstream)
    e = defaultevictor.new({"minPodAge": "1m"}, PluginHandle())
    assert e.why_not(started) is None
    e.clock = lambda: now - 100
    assert e.why_not(started) == "pod age is not older than MinPodAge: 1m0s seconds"


def test_fits_any_other_ready_node_among_the_selected_ones():
    big = pod("big", "n1", cpu="3")
    pods = [big, pod("busy", "n2", cpu="2")]
    h = handle_for(pods)
    n2 = node("n2", {"pool": "a"})
    n3 = node("n3", {"pool": "b"})
    unready = {**node("n4", {"pool": "a"}), "status": {**node("n4")["status"],
                                                       "conditions": [{"type": "Ready", "status": "False"}]}}
    assert not fits_any_other_ready_node(big, h, [node("n1"), n2])  # n1 is its own; n2 has 2 of 4 cpus left
    assert fits_any_other_ready_node(big, h, [node("n1"), n2, n3])
    assert not fits_any_other_ready_node(big, h, [n2, n3, unready], parse_label_selector("pool=a"))
    assert fits_any_other_ready_node(big, h, [n2, n3, unready], parse_label_selector("pool!=a"))


def _node_on_server(name: str, cpu: str, labels: dict | None = None, ready: bool = True) -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {}, "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
                                   "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def _started_pod(api: Client, name: str, ns: str, app: str, owner: str, cpu: str = "500m",
                 started: float = 7200) -> Obj:
    body = {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app}, "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": owner, "uid": f"uid-{owner}",
                 "controller": True}]},
            "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "app:1",
                                                       "resources": {"requests": {"cpu": cpu}}}]}}
    created = api.create(body)
    return api.update_status({**created, "status": {"phase": "Running", "startTime": ago(started)}})


def test_default_evictor_reads_owner_pods_pdbs_and_nodes_from_the_informers(fresh_apiserver):  # noqa: F811
    fresh_apiserver.start()
    api = Client.from_kubeconfig(str(fresh_apiserver.kubeconfig), qps=0)
    factory = InformerFactory(api)
    try:
        ns = "evict"
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        api.create(_node_on_server("n1", "4"))  # the pods' node
        api.create(_node_on_server("n2", "1", {"pool": "a"}))  # room for 500m, not for 2 cpus
        api.create(_node_on_server("n3", "8"))  # room for anything, outside the pool
        api.create(_node_on_server("n4", "8", {"pool": "a"}, ready=False))
        api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                    "metadata": {"name": "web", "namespace": ns},
                    "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}}})
        pods = [_started_pod(api, "web-0", ns, "web", "web"), _started_pod(api, "web-1", ns, "web", "web"),
                _started_pod(api, "web-big", ns, "web", "web", cpu="2"),
                _started_pod(api, "solo", ns, "web", "solo"),
                _started_pod(api, "young-0", ns, "web", "young", started=5),
                _started_pod(api, "young-1", ns, "web", "young", started=5),
                _started_pod(api, "free-0", ns, "free", "free"), _started_pod(api, "free-1", ns, "free", "free")]
        handle = PluginHandle(client=api, informers=factory)
        e = defaultevictor.new({"minReplicas": 2, "minPodAge": "1h", "ignorePodsWithoutPDB": True, "nodeFit": True,
                                "nodeSelector": "pool=a"}, handle)
        factory.start()
        assert factory.wait_for_sync(20)
        wait_until(lambda: len(handle.pods_on_node("n1")) == len(pods), message="pods cached")
        cached = {p["metadata"]["name"]: p for p in handle.pods_on_node("n1")}
        assert {name: e.why_not(p) for name, p in cached.items()} == {
            "web-0": None, "web-1": None, "web-big": None,
            "solo": "owner has 1 replicas which is less than minReplicas of 2",
            "young-0": "pod age is not older than MinPodAge: 1h0m0s seconds",
            "young-1": "pod age is not older than MinPodAge: 1h0m0s seconds",
            "free-0": "no PodDisruptionBudget found for pod", "free-1": "no PodDisruptionBudget found for pod"}
        # nodeFit: only the ready nodes of the pool count (n2); web-big fits n3, which is not in it.
        assert e.pre_eviction_filter(cached["web-0"])
        assert e.why_not_now(cached["web-big"]) == NOT_FIT_MESSAGE and not e.pre_eviction_filter(cached["web-big"])
        n3 = api.get("Node", "n3")
        api.update({**n3, "metadata": {**n3["metadata"], "labels": {"pool": "a"}}})
        wait_until(lambda: e.pre_eviction_filter(cached["web-big"]), message="n3 joins the pool in the cache")
        # The budget gone, no pod of the namespace is covered any more.
        api.delete("PodDisruptionBudget", "web", ns)
        wait_until(lambda: e.why_not(cached["web-0"]) == "no PodDisruptionBudget found for pod",
                   message="the PDB gone from the cache")
    finally:
        factory.stop(5)
        api.close()

