"""koord-descheduler's FragmentationAware balance plugin (reference §1.8): args, the imbalance (population std of
requested/allocatable per resource), the pick by gain, one eviction per node per round, nodeFit, dry run.

Plugins get a real :class:`PluginHandle` whose pods come from ``pod_index``; the evictor is a small recording
one (the framework boundary), or the framework's own :class:`EvictorProxy` where the framework's dry run matters.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from koordinator.runtime.componentconfig import default_plugin_args
from koordinator_roles.descheduler.framework.evictor import EvictorProxy
from koordinator_roles.descheduler.framework.handle import PluginHandle
from koordinator_roles.descheduler.framework.limiter import EvictionLimiter
from koordinator_roles.descheduler.plugins import in_tree_registry
from koordinator_roles.descheduler.plugins.fragmentationaware import NAME, parse_args
from koordinator_roles.descheduler.plugins.fragmentationaware.imbalance import fractions, imbalance, std
from tests import descheduler_fixtures as fixtures
from tests.descheduler_fixtures import Obj, RecordingEvictor, RecordingEvictPlugin, node, pod_index


def pod(name: str, node_name: str, cpu: str = "0", memory: str = "0", **kwargs: Any) -> Obj:
    return fixtures.pod(name, node_name, cpu=cpu, memory=memory, **kwargs)


def skewed(node_name: str, prefix: str = "") -> list[Obj]:
    """cpu 3.5/4 (0.875), memory 2Gi/8Gi (0.25): std 0.3125. Without ``a``: 0.0625 (gain 0.25); without ``b``:
    0.1875 (gain 0.125); without ``c``: 0.375 (worse)."""
    return [pod(f"{prefix}a", node_name, cpu="2"), pod(f"{prefix}b", node_name, cpu="1"),
            pod(f"{prefix}c", node_name, cpu="500m", memory="2Gi")]


def run(args: dict | None, pods: list[Obj], nodes: list[Obj], evictor: Any = None, dry_run: bool = False):
    """Build the plugin through the registry, run one round; (evictor, plugin)."""
    handle = PluginHandle(evictor=evictor or RecordingEvictor(), dry_run=dry_run, pod_index=pod_index(pods))
    plugin = in_tree_registry()[NAME](args, handle)
    assert plugin.balance(nodes) is None
    return handle.evictor, plugin


# -- args ------------------------------------------------------------------------------------------------------

def test_args_defaults_match_the_schema_and_the_configuration_defaulting():
    a = parse_args(None)
    assert (a.paused, a.dry_run, a.node_fit) == (False, False, True)
    assert a.resources == ("cpu", "memory")
    assert (a.imbalance_threshold, a.min_improvement_threshold) == (0.15, 0.02)
    assert a.scope.node_selector is None and a.scope.pod_selectors == [] and a.scope.include_namespaces is None
    # The role's configuration defaults the args with the same schema.
    defaulted = default_plugin_args("koord-descheduler-config", NAME, {})
    assert defaulted["imbalanceThreshold"] == 0.15 and defaulted["resources"] == ["cpu", "memory"]
    assert parse_args(defaulted) == a


def test_args_given_values_are_kept():
    a = parse_args({"apiVersion": "descheduler/v1alpha2", "kind": "FragmentationAwareArgs", "paused": True,
                    "dryRun": True, "nodeFit": False, "resources": ["cpu", "nvidia.com/gpu"],
                    "imbalanceThreshold": 0.3, "minImprovementThreshold": 0, "evictableNamespaces": {"exclude": ["k"]},
                    "nodeSelector": {"matchLabels": {"pool": "a"}},
                    "podSelectors": [{"name": "web", "selector": {"matchLabels": {"app": "web"}}}]})
    assert (a.paused, a.dry_run, a.node_fit, a.resources) == (True, True, False, ("cpu", "nvidia.com/gpu"))
    assert (a.imbalance_threshold, a.min_improvement_threshold) == (0.3, 0.0)
    assert a.scope.exclude_namespaces == {"k"} and a.scope.nodes([node("x", labels={"pool": "a"}), node("y")])[0][
        "metadata"]["name"] == "x"
    assert a.scope.selects(pod("p", "x", labels={"app": "web"})) and not a.scope.selects(pod("p", "x"))


@pytest.mark.parametrize("raw,message", [
    ({"imbalanceThreshold": -0.1}, "imbalanceThreshold: Invalid value: -0.1"),
    ({"minImprovementThreshold": -1}, "minImprovementThreshold: Invalid value: -1"),
    ({"imbalanceThreshold": math.inf}, "imbalanceThreshold: Invalid value: inf: must be a finite number"),
    ({"resources": []}, "resources: Required value"),
    ({"resources": ["cpu", "cpu"]}, 'resources[1]: Duplicate value: "cpu"'),
    ({"resources": ["cpu", ""]}, 'resources[1]: Invalid value: "": must not be empty'),
    ({"resources": "cpu"}, "resources: Invalid value"),
    ({"nodeFit": "yes"}, "nodeFit: Invalid value"),
    ({"evictableNamespaces": {"include": ["a"], "exclude": ["b"]}}, "evictableNamespaces: Too many: 2"),
    ({"nodeSelector": {"matchExpressions": [{"key": "k", "operator": "Bad"}]}}, "nodeSelector"),
    ({"podSelectors": [{"selector": {"matchExpressions": [{"key": "k", "operator": "In"}]}}]},
     "podSelectors[0].selector"),
    ({"kind": "LowNodeLoadArgs"}, "kind: Unsupported value"),
])
def test_args_validation_names_field_and_value(raw, message):
    with pytest.raises(ValueError) as err:
        parse_args(raw)
    assert message in str(err.value)


# -- the imbalance ----------------------------------------------------------------------------------------------

def test_imbalance_is_the_population_std_of_requested_fractions():
    alloc = {"cpu": 4000, "memory": 8000, "gpu": 0}
    assert fractions({"cpu": 3000, "memory": 2000}, alloc, ("cpu", "memory", "gpu")) == [0.75, 0.25]
    assert imbalance({"cpu": 3000, "memory": 2000}, alloc, ("cpu", "memory", "gpu")) == pytest.approx(0.25)
    # Three resources: population (not sample) deviation.
    assert std([0.0, 0.5, 1.0]) == pytest.approx(math.sqrt(1 / 6))
    assert std([]) == 0.0 and imbalance({}, {}, ("cpu",)) == 0.0


# -- the pick -------------------------------------------------------------------------------------------------

def test_evicts_the_pod_with_the_largest_gain_once_per_node_with_the_reason():
    nodes = [node("n1"), node("n2"), node("n3")]
    pods = skewed("n1") + skewed("n2", prefix="m") + [pod("bal", "n3", cpu="1", memory="2Gi")]
    evictor, plugin = run({}, pods, nodes)
    # One eviction per node per round although b would help as well; n3 is balanced (std 0).
    assert evictor.names == ["a", "ma"]
    options = evictor.evicted[0][1]
    assert options.plugin_name == NAME
    assert options.reason == "fragmentation reduction: stdBefore=0.3125 stdAfter=0.0625 gain=0.2500"
    assert [c.gain for c in plugin.last_round] == [pytest.approx(0.25)] * 2


def test_thresholds_gate_the_node_and_the_gain():
    nodes = [node("n1"), node("n2")]
    assert run({"imbalanceThreshold": 0.32}, skewed("n1"), nodes)[0].names == []  # std 0.3125 is not above
    assert run({"imbalanceThreshold": 0.31}, skewed("n1"), nodes)[0].names == ["a"]
    assert run({"minImprovementThreshold": 0.25}, skewed("n1"), nodes)[0].names == []  # gain must exceed it
    assert run({"minImprovementThreshold": 0.2}, skewed("n1"), nodes)[0].names == ["a"]


def test_resources_without_allocatable_are_skipped_and_terminal_pods_do_not_count():
    nodes = [node("n1"), node("n2")]
    pods = skewed("n1") + [pod("done", "n1", cpu="0", memory="6Gi", phase="Succeeded")]
    evictor, _ = run({"resources": ["cpu", "memory", "example.com/gpu"]}, pods, nodes)
    assert evictor.evicted[0][1].reason == "fragmentation reduction: stdBefore=0.3125 stdAfter=0.0625 gain=0.2500"
    # Only cpu counted: 0.875 alone has std 0 — nothing to balance.
    assert run({"resources": ["cpu"]}, skewed("n1"), nodes)[0].names == []


def test_unevictable_pods_are_passed_over_for_the_next_best():
    nodes = [node("n1"), node("n2")]
    assert run({}, skewed("n1"), nodes, RecordingEvictor(refuse=lambda p: p["metadata"]["name"] == "a"))[0].names \
        == ["b"]
    pods = skewed("n1")
    pods[0]["metadata"]["namespace"] = "kube-system"
    assert run({"evictableNamespaces": {"exclude": ["kube-system"]}}, pods, nodes)[0].names == ["b"]
    pods = skewed("n1")
    pods[1]["metadata"]["labels"] = {"tier": "batch"}
    assert run({"podSelectors": [{"selector": {"matchLabels": {"tier": "batch"}}}]}, pods, nodes)[0].names == ["b"]


def test_pre_eviction_filter_and_node_limit_stop_the_node():
    nodes = [node("n1"), node("n2"), node("spare")]
    pods = skewed("n1") + skewed("n2", prefix="m")
    evictor, plugin = run({}, pods, nodes, RecordingEvictor(pre_refuse=lambda p: p["metadata"]["name"] == "a"))
    assert evictor.names == ["ma"] and len(plugin.last_round) == 1
    assert run({}, pods, nodes, RecordingEvictor(full_nodes=("n2",)))[0].names == ["a"]


def test_node_fit_requires_room_on_another_candidate_node():
    # n2 has 1.5 cpu free: a (2 cpu) fits nowhere else, b (1 cpu) does.
    nodes = [node("n1"), node("n2", labels={"pool": "x"})]
    pods = skewed("n1") + [pod("filler", "n2", cpu="2500m", memory="5Gi")]
    assert run({}, pods, nodes)[0].names == ["b"]
    assert run({"nodeFit": False}, pods, nodes)[0].names == ["a"]
    # n2 outside the plugin's nodeSelector is no candidate: nothing fits anywhere, nothing is evicted.
    assert run({"nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "DoesNotExist"}]}},
               pods, nodes)[0].names == []
    # A cordoned target does not count either.
    nodes[1]["spec"]["unschedulable"] = True
    assert run({}, pods, nodes)[0].names == []


def test_paused_and_dry_run_evict_nothing():
    nodes = [node("n1"), node("n2")]
    evictor, plugin = run({"paused": True}, skewed("n1"), nodes)
    assert evictor.names == [] and plugin.last_round == []
    evictor, plugin = run({"dryRun": True}, skewed("n1"), nodes)
    assert evictor.names == [] and [c.pod["metadata"]["name"] for c in plugin.last_round] == ["a"]


@pytest.mark.parametrize("dry_run", [False, True])
def test_through_the_framework_evictor_its_dry_run_changes_nothing(dry_run):
    proxy = EvictorProxy(limiter=EvictionLimiter(max_per_node=1), dry_run=dry_run)
    recorder = RecordingEvictPlugin()
    proxy.evict_plugins.append(recorder)
    nodes = [node("n1"), node("n2")]
    _, plugin = run({}, skewed("n1"), nodes, proxy, dry_run=dry_run)
    assert [c.pod["metadata"]["name"] for c in plugin.last_round] == ["a"]
    assert recorder.evicted == ([] if dry_run else ["a"])
    # The framework's per-node limit is now reached on n1: the next round skips it.
    _, plugin = run({}, skewed("n1"), nodes, proxy, dry_run=dry_run)
    assert plugin.last_round == []
