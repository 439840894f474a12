"""koord-descheduler's ScaleDownBinPack balance plugin (reference §1.8): args, the evacuation score, node and pod
order, global ranks, CalculateOnly's pod-deletion-cost patches (against the embedded API server), EvictDirectly.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import pytest

from koordinator.runtime.componentconfig import default_plugin_args
from koordinator_roles.descheduler.framework.handle import PluginHandle
from koordinator_roles.descheduler.plugins import in_tree_registry
from koordinator_roles.descheduler.plugins.scaledownbinpack import NAME, parse_args
from koordinator_roles.descheduler.plugins.scaledownbinpack.plugin import DELETION_COST, EVICT_REASON, NEVER
from koordinator_roles.descheduler.plugins.scaledownbinpack.ranking import evacuation_score, weighted_share
from tests import descheduler_fixtures as fixtures
from tests.descheduler_fixtures import Obj, RecordingEvictor, ago, node, pod_index

WEB = {"podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}]}


def pod(name: str, node_name: str, cpu: str = "1", memory: str = "0", app: str = "web", age: float = 3600,
        **kwargs: Any) -> Obj:
    return fixtures.pod(name, node_name, cpu=cpu, memory=memory, labels={"app": app}, created=age, **kwargs)


def cluster() -> tuple[list[Obj], list[Obj]]:
    """n3, n5: score 0 with 1 eligible pod each (name order); n2: score 0, 4 eligible; n1: a non-target (2 cpu)
    and a skipped target stay beside 1 cpu eligible → (2+1)/1 = 3000; n4: only a non-target → ignored."""
    nodes = [node(f"n{i}") for i in range(1, 6)]
    pods = [pod("n1-e", "n1"), pod("n1-sys", "n1", cpu="2", app="system"), pod("n1-pinned", "n1"),
            pod("n2-old", "n2", age=3600), pod("n2-new-b", "n2", age=60), pod("n2-new-a", "n2", age=60),
            pod("n2-big", "n2", cpu="2", age=7200),
            pod("n3-e", "n3"), pod("n4-sys", "n4", app="system"), pod("n5-e", "n5"),
            pod("n5-done", "n5", cpu="3", phase="Succeeded")]
    return nodes, pods


ORDER = ["n3-e", "n5-e", "n2-big", "n2-new-a", "n2-new-b", "n2-old", "n1-e"]


def pinned(p: Obj) -> bool:
    return p["metadata"]["name"] == "n1-pinned"


def build(args: dict | None, pods: list[Obj], evictor: Any = None, client: Any = None, dry_run: bool = False):
    handle = PluginHandle(evictor=evictor or RecordingEvictor(refuse=pinned), client=client, dry_run=dry_run,
                          pod_index=pod_index(pods))
    return in_tree_registry()[NAME](args, handle)


# -- args ------------------------------------------------------------------------------------------------------

def test_args_defaults_match_the_schema_and_the_configuration_defaulting():
    a = parse_args(None)
    assert (a.paused, a.strategy, a.max_pods_to_evict) == (False, "CalculateOnly", 0)
    assert a.resources == ("cpu", "memory") and a.resource_weights == {"cpu": 1.0, "memory": 1.0}
    defaulted = default_plugin_args("koord-descheduler-config", NAME, {})
    assert defaulted["strategy"] == "CalculateOnly" and defaulted["resources"] == ["cpu", "memory"]
    assert parse_args(defaulted) == a
    a = parse_args({"strategy": "EvictDirectly", "maxPodsToEvict": 3, "resources": ["cpu", "memory", "gpu"],
                    "resourceWeights": {"cpu": 2.5}, "evictableNamespaces": {"include": ["web"]}})
    assert (a.strategy, a.max_pods_to_evict) == ("EvictDirectly", 3)
    assert a.resource_weights == {"cpu": 2.5, "memory": 1.0, "gpu": 1.0}
    assert a.scope.include_namespaces == {"web"}


@pytest.mark.parametrize("raw,message", [
    ({"strategy": "Evict"}, 'strategy: Unsupported value: "Evict"'),
    ({"strategy": "EvictDirectly"}, "maxPodsToEvict: Required value: must be greater than 0 when strategy is "
                                    "EvictDirectly"),
    ({"strategy": "EvictDirectly", "maxPodsToEvict": 0},
     "maxPodsToEvict: Invalid value: 0: must be greater than 0 when strategy is EvictDirectly"),
    ({"maxPodsToEvict": -1}, "maxPodsToEvict: Invalid value: -1"),
    ({"resourceWeights": {"cpu": 0}}, "resourceWeights.cpu: Invalid value: 0"),
    ({"resourceWeights": {"cpu": -2}}, "resourceWeights.cpu: Invalid value: -2"),
    ({"resourceWeights": {"cpu": math.inf}}, "resourceWeights.cpu: Invalid value: inf: must be a positive finite"),
    ({"resources": []}, "resources: Required value"),
    ({"resources": ["cpu", "cpu"]}, 'resources[1]: Duplicate value: "cpu"'),
    ({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}, "evictableNamespaces: Too many: 2"),
    ({"podSelectors": [{"selector": {"matchLabels": {"app": "-bad-"}}}]}, "podSelectors[0].selector"),
])
def test_args_validation_names_field_and_value(raw, message):
    with pytest.raises(ValueError) as err:
        parse_args(raw)
    assert message in str(err.value)


def test_calculate_only_ignores_max_pods_to_evict():
    assert parse_args({"maxPodsToEvict": 0}).max_pods_to_evict == 0


# -- score and order --------------------------------------------------------------------------------------------

def test_evacuation_score_in_milli_units():
    assert evacuation_score(0, 0) == 0
    assert evacuation_score(0.5, 0) == math.inf
    assert evacuation_score(0, 0.25) == 0
    assert evacuation_score(0.5, 0.25) == 2000
    assert evacuation_score(1, 3) == 333  # rounded down
    alloc = {"cpu": 4000, "memory": 8000, "gpu": 0}
    assert weighted_share({"cpu": 1000, "memory": 4000, "gpu": 1}, alloc, {"cpu": 2.0, "memory": 1.0, "gpu": 1.0}) \
        == pytest.approx(1.0)


def test_nodes_by_score_then_eligible_count_then_name_and_pods_by_size_age_name():
    nodes, pods = cluster()
    plugin = build(WEB, pods)
    ranking = plugin.plans(nodes)
    assert [(p.name, p.score, len(p.eligible)) for p in ranking] == [
        ("n3", 0, 1), ("n5", 0, 1), ("n2", 0, 4), ("n1", 3000, 1)]
    assert [p["metadata"]["name"] for plan in ranking for p in plan.eligible] == ORDER
    assert [p["metadata"]["name"] for p in ranking[-1].skipped] == ["n1-pinned"]


def test_resource_weights_change_pod_size():
    nodes = [node("n1")]
    pods = [pod("cpu-heavy", "n1", cpu="2"), pod("mem-heavy", "n1", cpu="0", memory="6Gi")]
    # Equal weights: 0.5 vs 0.75 → memory-heavy first; cpu weighing 2: 1.0 vs 0.75.
    assert [p["metadata"]["name"] for p in build({}, pods).plans(nodes)[0].eligible] == ["mem-heavy", "cpu-heavy"]
    assert [p["metadata"]["name"] for p in build({"resourceWeights": {"cpu": 2}}, pods).plans(nodes)[0].eligible] \
        == ["cpu-heavy", "mem-heavy"]


def test_only_non_targets_on_a_node_with_eligible_pods_scores_infinite():
    nodes = [node("n1"), node("n2")]
    pods = [pod("zero", "n1", cpu="0"), pod("sys", "n1", app="system"), pod("e", "n2")]
    assert [(p.name, p.score) for p in build(WEB, pods).plans(nodes)] == [("n2", 0), ("n1", math.inf)]


def test_node_selector_and_namespaces_scope():
    nodes, pods = cluster()
    nodes[1]["metadata"]["labels"] = {"pool": "spot"}
    args = {**WEB, "nodeSelector": {"matchLabels": {"pool": "spot"}}}
    assert [p.name for p in build(args, pods).plans(nodes)] == ["n2"]
    assert build({"evictableNamespaces": {"exclude": ["default"]}}, pods).plans(nodes) == []


# -- EvictDirectly ------------------------------------------------------------------------------------------------

def test_evict_directly_in_rank_order_up_to_max_successes():
    nodes, pods = cluster()
    evictor = RecordingEvictor(refuse=pinned, fail=lambda p: p["metadata"]["name"] == "n5-e")
    plugin = build({**WEB, "strategy": "EvictDirectly", "maxPodsToEvict": 3}, pods, evictor)
    assert plugin.balance(nodes) is None
    # n5-e's eviction fails: it does not count towards the three.
    assert evictor.names == ["n3-e", "n2-big", "n2-new-a"]
    assert {o.reason for _, o in evictor.evicted} == {EVICT_REASON} and evictor.evicted[0][1].plugin_name == NAME


def test_paused_does_nothing():
    nodes, pods = cluster()
    evictor = RecordingEvictor()
    plugin = build({"paused": True, "strategy": "EvictDirectly", "maxPodsToEvict": 5}, pods, evictor)
    assert plugin.balance(nodes) is None and evictor.names == [] and plugin.last_ranking == []


# -- CalculateOnly against the API server ------------------------------------------------------------------------

AGES = {"n2-new-a": 60, "n2-new-b": 60, "n2-big": 7200}


def _server_cluster(client, namespace: str) -> tuple[list[Obj], Callable[[], list[Obj]]]:
    """``cluster()`` created on the server; ``live()`` lists its pods as the plugin's pod index sees them."""
    nodes, pods = cluster()
    phases = {p["metadata"]["name"]: p["status"]["phase"] for p in pods}
    for p in pods:
        meta = {k: v for k, v in p["metadata"].items() if k != "creationTimestamp"}
        client.create({**p, "metadata": {**meta, "namespace": namespace}, "status": {}})

    def live() -> list[Obj]:
        out = client.list("Pod", namespace).get("items") or []
        for item in out:
            name = item["metadata"]["name"]
            # Server pods are Pending and created within the same second: keep the test's phases and ages
            # (the "newer first" rule needs ages further apart than the server's 1 s resolution).
            item["status"] = {"phase": phases[name]}
            item["metadata"]["creationTimestamp"] = ago(AGES.get(name, 3600))
        return out

    return nodes, live


def _costs(client, namespace: str) -> dict[str, str | None]:
    return {p["metadata"]["name"]: (p["metadata"].get("annotations") or {}).get(DELETION_COST)
            for p in client.list("Pod", namespace).get("items") or []}


def test_calculate_only_patches_pod_deletion_cost_on_the_server(client, namespace):
    nodes, live = _server_cluster(client, namespace)
    pods = live()
    plugin = build({**WEB, "evictableNamespaces": {"include": [namespace]}}, pods, client=client)
    assert plugin.balance(nodes) is None
    costs = _costs(client, namespace)
    assert {n: costs[n] for n in ORDER} == {n: str(i) for i, n in enumerate(ORDER)}
    assert costs["n1-pinned"] == str(NEVER) == "2147483647"
    # Non-targets, pods of ignored nodes and terminated pods are left alone.
    assert costs["n1-sys"] is None and costs["n4-sys"] is None and costs["n5-done"] is None
    # A second round with unchanged ranks writes nothing.
    versions = {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in live()}
    plugin = build({**WEB, "evictableNamespaces": {"include": [namespace]}}, live(), client=client)
    assert plugin.balance(nodes) is None
    assert {p["metadata"]["name"]: p["metadata"]["resourceVersion"] for p in live()} == versions


def test_calculate_only_in_the_framework_dry_run_writes_nothing(client, namespace):
    nodes, live = _server_cluster(client, namespace)
    plugin = build({**WEB, "evictableNamespaces": {"include": [namespace]}}, live(), client=client, dry_run=True)
    assert plugin.balance(nodes) is None
    assert [p.name for p in plugin.last_ranking] == ["n3", "n5", "n2", "n1"]
    assert set(_costs(client, namespace).values()) == {None}


def test_calculate_only_reports_pods_that_could_not_be_patched(client, namespace):
    nodes, live = _server_cluster(client, namespace)
    pods = live()
    for p in pods:
        if p["metadata"]["name"] == "n3-e":
            p["metadata"]["name"] = "gone"  # listed by the plugin's cache but no longer on the server
    status = build({**WEB, "evictableNamespaces": {"include": [namespace]}}, pods, client=client).balance(nodes)
    assert status is not None and f"{namespace}/gone" in status.error
    # The others are ranked all the same.
    assert _costs(client, namespace)["n1-e"] == str(len(ORDER) - 1)
