"""CustomPriority (koord-descheduler balance plugin, reference §1.8): args, BestEffort, DrainNode, autoCordon.

The plugin gets a real :class:`PluginHandle`; most tests serve pods from dicts through ``pod_index`` and record
evictions with a small :class:`Evictor`. The autoCordon tests patch nodes of the embedded API server and read
pods from its informers; the framework dry-run test goes through the real :class:`EvictorProxy`.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from koordinator_roles.descheduler.framework.evictor import EvictorProxy
from koordinator_roles.descheduler.framework.handle import PluginHandle
from koordinator_roles.descheduler.framework.limiter import EvictionLimiter
from koordinator_roles.descheduler.plugins import in_tree_registry
from koordinator_roles.descheduler.plugins.custompriority import CustomPriority, new
from koordinator_roles.descheduler.plugins.custompriority.args import parse_args
from tests import descheduler_fixtures as fixtures
from tests.descheduler_fixtures import (Obj, RecordingEvictor, RecordingEvictPlugin, informers,  # noqa: F401  (fixture)
                                        pod_index)
from tests.waiting import wait_until

ORDER = [{"name": "ondemand", "nodeSelector": {"matchLabels": {"pool": "ondemand"}}},
         {"name": "reserved", "nodeSelector": {"matchLabels": {"pool": "reserved"}}},
         {"name": "spot", "nodeSelector": {"matchLabels": {"pool": "spot"}}}]


def node(name: str, pool: str, **kwargs: Any) -> Obj:
    return fixtures.node(name, labels={"pool": pool}, **kwargs)


def pod(name: str, node_name: str, cpu: str = "100m", memory: str = "128Mi", labels: dict | None = None,
        **kwargs: Any) -> Obj:
    return fixtures.pod(name, node_name, cpu=cpu, memory=memory, labels=labels or {"app": "web"}, **kwargs)


def run(args: Obj, pods: list[Obj], nodes: list[Obj], evictor: RecordingEvictor | None = None,
        **handle: Any) -> tuple[RecordingEvictor, CustomPriority]:
    evictor = evictor or RecordingEvictor()
    plugin = new({"evictionOrder": ORDER, **args}, PluginHandle(evictor=evictor, pod_index=pod_index(pods), **handle))
    assert plugin.balance(nodes) is None
    return evictor, plugin


# -- args ----------------------------------------------------------------------------------------------------------

def test_args_defaults_and_values():
    a = parse_args({"evictionOrder": ORDER[:2]})
    assert (a.paused, a.dry_run, a.node_fit, a.mode, a.auto_cordon) == (False, False, True, "BestEffort", False)
    assert a.include_namespaces is None and a.exclude_namespaces is None and a.node_selector is None
    assert [lv.name for lv in a.eviction_order] == ["ondemand", "reserved"] and a.pod_selectors == []
    b = parse_args({"apiVersion": "descheduler/v1alpha2", "kind": "CustomPriorityArgs", "evictionOrder": [
        {**ORDER[0], "keepThreshold": {"cpu": 60}, "rejectThreshold": {"cpu": 90.5}}, ORDER[1]],
        "mode": "DrainNode", "autoCordon": True, "dryRun": True, "paused": True, "nodeFit": False,
        "evictableNamespaces": {"exclude": ["kube-system"]}, "nodeSelector": {"matchLabels": {"zone": "a"}},
        "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}, {"name": "none"}]})
    assert (b.paused, b.dry_run, b.node_fit, b.mode, b.auto_cordon) == (True, True, False, "DrainNode", True)
    assert b.exclude_namespaces == ["kube-system"] and b.node_selector.matches({"zone": "a"})
    assert b.eviction_order[0].keep_threshold == {"cpu": 60.0} and b.eviction_order[0].reject_threshold == {"cpu": 90.5}
    assert [s.name for s in b.pod_selectors] == ["web"]  # an entry without a selector is ignored


BAD = {"name": "x", "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "Near"}]}}


@pytest.mark.parametrize("args,expected", [
    ({}, ["evictionOrder: Required value"]),
    ({"evictionOrder": ORDER[:1]}, ["evictionOrder: Invalid value: 1", "at least 2 items"]),
    ({"evictionOrder": [{"name": "Spot", "nodeSelector": {}}, ORDER[0]]},
     ['evictionOrder[0].name: Invalid value: "Spot"', "should match"]),
    ({"evictionOrder": [{"name": "", "nodeSelector": {}}, ORDER[0]]}, ["evictionOrder[0].name: Invalid value"]),
    ({"evictionOrder": [ORDER[0], {"name": "ondemand", "nodeSelector": {}}]},
     ['evictionOrder[1].name: Duplicate value: "ondemand"']),
    ({"evictionOrder": [ORDER[0], {"name": "spot"}]}, ["evictionOrder[1].nodeSelector: Required value"]),
    ({"evictionOrder": [{**ORDER[0], "keepThreshold": {"cpu": 120}}, ORDER[1]]},
     ["evictionOrder[0].keepThreshold.cpu: Invalid value: 120", "less than or equal to 100"]),
    ({"evictionOrder": [ORDER[0], {**ORDER[1], "rejectThreshold": {"memory": -1}}]},
     ["evictionOrder[1].rejectThreshold.memory: Invalid value: -1", "greater than or equal to 0"]),
    ({"evictionOrder": [BAD, ORDER[0]]},
     ['evictionOrder[0].nodeSelector: Invalid value: {"matchExpressions"', '"Near" is not a valid']),
    ({"evictionOrder": ORDER, "mode": "Drain"}, ['mode: Unsupported value: "Drain"']),
    ({"evictionOrder": ORDER, "autoCordon": "yes"}, ['autoCordon: Invalid value: "string"', "boolean"]),
    ({"evictionOrder": ORDER, "evictableNamespaces": {"include": ["a"], "exclude": ["b"]}},
     ["evictableNamespaces: Too many"]),
    ({"evictionOrder": ORDER, "nodeSelector": {"matchLabels": {"bad key!": "x"}}},
     ["nodeSelector: Invalid value", "bad key!"]),
    ({"evictionOrder": ORDER, "podSelectors": [{"selector": {"matchLabels": {"app": "no spaces"}}}]},
     ["podSelectors[0].selector: Invalid value", "no spaces"]),
])
def test_args_errors_name_the_field_and_value(args, expected):
    with pytest.raises(ValueError) as err:
        parse_args(args)
    for words in expected:
        assert words in str(err.value), str(err.value)


def test_registry_builds_the_plugin_and_rejects_bad_args():
    factory = in_tree_registry()["CustomPriority"]
    plugin = factory({"evictionOrder": ORDER}, PluginHandle(evictor=RecordingEvictor()))
    assert isinstance(plugin, CustomPriority) and plugin.name == "CustomPriority"
    with pytest.raises(ValueError, match="mode"):
        factory({"evictionOrder": ORDER, "mode": "x"}, PluginHandle(evictor=RecordingEvictor()))


# -- BestEffort ----------------------------------------------------------------------------------------------------

def test_best_effort_evicts_smallest_first_while_the_cheaper_nodes_have_room():
    nodes = [node("od", "ondemand"), node("sp", "spot", cpu="1")]
    pods = [pod("b-500", "od", cpu="500m"), pod("a-300", "od", cpu="300m"), pod("c-400", "od", cpu="400m"),
            # equal cpu: memory decides, then namespace, then name
            pod("z-mem-small", "od", cpu="50m", memory="64Mi"), pod("y-mem-big", "od", cpu="50m", memory="1Gi"),
            pod("x", "od", cpu="50m", memory="64Mi", ns="aaa"),
            pod("done", "od", cpu="10m", phase="Succeeded")]  # terminated pods are neither moved nor counted
    ev, plugin = run({}, pods, nodes)
    # 1 cpu on spot: 50+50+50 → 850m left; 300 → 550; 400 → 150; 500 does not fit.
    assert ev.names == ["x", "z-mem-small", "y-mem-big", "a-300", "c-400"]
    assert {o.reason for _, o in ev.evicted} == {"evicting from ondemand priority resource to lower priority resource"}
    assert {o.plugin_name for _, o in ev.evicted} == {"CustomPriority"} and plugin.last_round_evictions == 5


def test_best_effort_counts_what_the_targets_already_run_and_levels_go_expensive_first():
    nodes = [node("rs", "reserved", cpu="2"), node("od", "ondemand"), node("sp", "spot", cpu="2"),
             node("other", "none")]  # matches no level: neither source nor target
    pods = [pod("od-1", "od", cpu="1"), pod("od-2", "od", cpu="1500m"),
            pod("rs-1", "rs", cpu="1"), pod("sp-1", "sp", cpu="1"), pod("ot-1", "other", cpu="10m")]
    ev, _ = run({}, pods, nodes)
    # ondemand first: reserved has 1 cpu free (first cheaper level) → od-1; od-2 fits neither (spot: 1 free).
    # reserved next: rs-1 (1 cpu) moves to spot's free 1 cpu.
    assert ev.names == ["od-1", "rs-1"]
    assert ev.evicted[1][1].reason == "evicting from reserved priority resource to lower priority resource"


def test_best_effort_node_fit_checks_taints_selectors_and_cordons_of_targets():
    taint = {"key": "spot", "value": "true", "effect": "NoSchedule"}
    nodes = [node("od", "ondemand"), node("sp-tainted", "spot", taints=[taint]),
             node("sp-cordoned", "spot", unschedulable=True)]
    pods = [pod("plain", "od"), pod("tolerant", "od", tolerations=[{"key": "spot", "operator": "Exists"}]),
            pod("pinned", "od", nodeSelector={"pool": "ondemand"})]
    ev, _ = run({}, pods, nodes)
    assert ev.names == ["tolerant"]
    ev, _ = run({"nodeFit": False}, pods, nodes)  # room alone decides
    assert sorted(ev.names) == ["pinned", "plain", "tolerant"]


def test_best_effort_pod_and_node_filters():
    nodes = [node("od", "ondemand"), node("od-b", "ondemand"), node("sp", "spot")]
    for n in nodes[1:]:
        n["metadata"]["labels"]["zone"] = "b"
    nodes[0]["metadata"]["labels"]["zone"] = "a"
    pods = [pod("web", "od"), pod("db", "od", labels={"app": "db"}), pod("sys", "od", ns="kube-system"),
            pod("refused", "od"), pod("web-b", "od-b")]
    ev, _ = run({"evictableNamespaces": {"exclude": ["kube-system"]},
                 "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}],
                 "nodeSelector": {"matchLabels": {"zone": "a"}}},
                pods, nodes, RecordingEvictor(refuse=lambda p: p["metadata"]["name"] == "refused"))
    # nodeSelector zone=a leaves no spot node (zone b): nothing to move to.
    assert ev.names == []
    nodes[2]["metadata"]["labels"]["zone"] = "a"
    ev, _ = run({"evictableNamespaces": {"include": ["default"]},
                 "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}],
                 "nodeSelector": {"matchLabels": {"zone": "a"}}},
                pods, nodes, RecordingEvictor(refuse=lambda p: p["metadata"]["name"] == "refused"))
    assert ev.names == ["web"]


def test_paused_and_dry_run_evict_nothing():
    nodes = [node("od", "ondemand"), node("sp", "spot")]
    pods = [pod("a", "od"), pod("b", "od")]
    ev, plugin = run({"paused": True}, pods, nodes)
    assert ev.calls == 0 and plugin.last_round_evictions == 0
    for mode in ("BestEffort", "DrainNode"):
        ev, plugin = run({"dryRun": True, "mode": mode}, pods, nodes)
        assert ev.calls == 0 and plugin.last_round_evictions == 2


# -- DrainNode -----------------------------------------------------------------------------------------------------

def test_drain_node_is_all_or_nothing_with_a_ledger_across_nodes():
    nodes = [node("od-1", "ondemand"), node("od-2", "ondemand"), node("od-3", "ondemand"),
             node("rs", "reserved", cpu="2"), node("sp", "spot", cpu="2")]
    pods = [pod("od1-a", "od-1", cpu="1500m"), pod("od1-b", "od-1", cpu="1500m"),  # 3 cpu: fits rs + sp
            pod("od2-a", "od-2", cpu="1"),  # the room od-1 will use is gone: does not fit
            pod("od3-a", "od-3", cpu="300m"), pod("od3-b", "od-3", cpu="3"),  # 3 cpu never fits: none move
            pod("rs-a", "rs", cpu="100m")]
    ev, plugin = run({"mode": "DrainNode"}, pods, nodes)
    # od-1 drains (1500m → rs leaving 400m; 1500m → sp leaving 500m); od-2's 1 cpu no longer fits;
    # od-3 cannot move od3-b, so od3-a stays too; then reserved → spot: rs-a (100m) fits sp's 500m.
    assert ev.names == ["od1-a", "od1-b", "rs-a"]
    assert [o.reason for _, o in ev.evicted] == ["drain node od-1 (sourcePriority=ondemand)"] * 2 + [
        "drain node rs (sourcePriority=reserved)"]
    assert plugin.last_round_evictions == 3


def test_drain_node_moves_only_evictable_pods_and_stops_a_node_at_a_failed_eviction():
    nodes = [node("od-1", "ondemand"), node("od-2", "ondemand"), node("sp", "spot", cpu="2")]
    pods = [pod("ds", "od-1", cpu="3"),  # refused by the evictor's filter (a DaemonSet pod): not planned
            pod("a", "od-1", cpu="200m"), pod("b", "od-1", cpu="300m"),
            pod("c", "od-2", cpu="500m"), pod("d", "od-2", cpu="600m")]
    ev = RecordingEvictor(refuse=lambda p: p["metadata"]["name"] == "ds", fail=lambda p: p["metadata"]["name"] == "c")
    run({"mode": "DrainNode"}, pods, nodes, ev)
    # od-1 drains a, b; od-2 fails at c (the smaller, first) and d is not tried.
    assert ev.names == ["a", "b"] and ev.calls == 3


# -- autoCordon against the embedded API server --------------------------------------------------------------------

def _cluster(client, namespace, informers, evictor, **args: Any):  # noqa: F811
    """Nodes od (3 pods) and sp on the server, pods in the informer cache, a DrainNode plugin with autoCordon."""
    suffix = uuid.uuid4().hex[:6]
    od, sp = node(f"od-{suffix}", "ondemand"), node(f"sp-{suffix}", "spot")
    for n in (od, sp):
        client.create(n)
    for i, cpu in enumerate(("100m", "200m", "300m")):
        client.create(pod(f"p{i}", od["metadata"]["name"], cpu=cpu, ns=namespace))
    handle = PluginHandle(client=client, informers=informers, evictor=evictor, **args.pop("handle", {}))
    plugin = new({"evictionOrder": ORDER, "mode": "DrainNode", "autoCordon": True,
                  "evictableNamespaces": {"include": [namespace]}, **args}, handle)
    informers.start()  # the plugin asked for the Pod informer
    assert informers.wait_for_sync(20)
    wait_until(lambda: len(handle.pods_on_node(od["metadata"]["name"])) == 3, message="pods in the informer cache")
    return plugin, od, sp


def _unschedulable(client, name: str) -> bool:
    return bool(client.get("Node", name).get("spec", {}).get("unschedulable"))


def test_auto_cordon_cordons_the_drained_node_before_evicting(client, namespace, informers):  # noqa: F811
    seen: list[bool] = []
    ev = RecordingEvictor(on_evict=lambda p: seen.append(_unschedulable(client, p["spec"]["nodeName"])))
    plugin, od, sp = _cluster(client, namespace, informers, ev)
    plugin.balance([od, sp])
    assert ev.names == ["p0", "p1", "p2"] and seen == [True, True, True]
    assert _unschedulable(client, od["metadata"]["name"]) and not _unschedulable(client, sp["metadata"]["name"])


def test_a_failed_eviction_uncordons_the_node(client, namespace, informers):  # noqa: F811
    seen: list[bool] = []
    ev = RecordingEvictor(fail=lambda p: p["metadata"]["name"] == "p1",
                          on_evict=lambda p: seen.append(_unschedulable(client, p["spec"]["nodeName"])))
    plugin, od, sp = _cluster(client, namespace, informers, ev)
    plugin.balance([od, sp])
    assert ev.names == ["p0"] and ev.calls == 2 and seen == [True, True]  # p2 is not tried
    assert not _unschedulable(client, od["metadata"]["name"])


def test_a_node_cordoned_before_stays_cordoned_after_a_failed_eviction(client, namespace, informers):  # noqa: F811
    ev = RecordingEvictor(fail=lambda p: True)
    plugin, od, sp = _cluster(client, namespace, informers, ev)
    client.patch("Node", od["metadata"]["name"], {"spec": {"unschedulable": True}})
    od["spec"]["unschedulable"] = True
    plugin.balance([od, sp])
    assert ev.calls == 1 and _unschedulable(client, od["metadata"]["name"])


@pytest.mark.parametrize("plugin_dry_run", [True, False])
def test_dry_run_neither_cordons_nor_evicts(client, namespace, informers, plugin_dry_run):  # noqa: F811
    proxy = EvictorProxy(limiter=EvictionLimiter(), dry_run=not plugin_dry_run)
    recorder = RecordingEvictPlugin()
    proxy.evict_plugins.append(recorder)
    plugin, od, sp = _cluster(client, namespace, informers, proxy, dryRun=plugin_dry_run,
                              handle={"dry_run": not plugin_dry_run})
    plugin.balance([od, sp])
    assert recorder.evicted == [] and plugin.last_round_evictions == 3
    assert not _unschedulable(client, od["metadata"]["name"])
