"""NodeResourcesFitPlus, ScarceResourceAvoidance (reference §2.7, §2.8) and SchedulingHint (§2.9, §1.2 PreferNodes).

Formulas are checked on hand-built snapshots (the arithmetic beside each expected number; amounts
in the plugins are the scheduler's milli-units, which leave every ratio unchanged), the batch form
against the per-node form, and SchedulingHint both on a Framework and in the running scheduler
against the embedded API server.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.interfaces import BatchFilterResult, Failure, FilterPlugin
from koordinator_roles.scheduler.framework.registry import Registry
from koordinator_roles.scheduler.framework.runtime import Framework
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import (SKIP, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState,
                                                          Status)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins import NOT_IMPLEMENTED, in_tree_registry
from koordinator_roles.scheduler.plugins import noderesourcesfitplus as fitplus
from koordinator_roles.scheduler.plugins import scarceresourceavoidance as scarce
from koordinator_roles.scheduler.plugins import schedulinghint as sh
from koordinator_roles.scheduler.plugins.helper.schedulinghint import (ANNOTATION_SCHEDULING_HINT,
                                                                       DEPRECATED_ANNOTATION_SCHEDULING_HINT, STATE_KEY,
                                                                       hint_from_state)
from tests.scheduler_harness import NS, InProcessScheduler, condition, node, pod
from tests.test_scheduler_preemption import make_profile
from tests.waiting import wait_until

MI = 1024 * 1024
GI = 1024 * MI
GPU = "nvidia.com/gpu"


def make_node(name: str, pods: tuple = (), **allocatable: str) -> NodeInfo:
    alloc = {"pods": "110", **allocatable}
    ni = NodeInfo({"metadata": {"name": name}, "status": {"allocatable": alloc}})
    for i, p in enumerate(pods):
        p = json.loads(json.dumps(p))
        p["metadata"]["uid"] = f"{name}-{i}"
        p["spec"]["nodeName"] = name
        ni.add_pod(PodInfo(p))
    return ni


def make_pod(*containers: dict, init: tuple = (), overhead: dict | None = None, annotations: dict | None = None,
             name: str = "p") -> dict:
    spec: dict = {"containers": [{"name": f"c{i}", "resources": {"requests": dict(r)}}
                                 for i, r in enumerate(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"i{i}", **c} for i, c in enumerate(init)]
    if overhead:
        spec["overhead"] = overhead
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                         "annotations": annotations or {}}, "spec": spec}


def scores(plugin, pod_obj: dict, snapshot: Snapshot) -> tuple[int | None, list[int], list[int]]:
    """(PreScore's code or None, batch scores, per-node scores) over every row."""
    pi, state, rows = PodInfo(pod_obj), CycleState(), snapshot.all_rows()
    status = plugin.pre_score(state, pi, snapshot, rows)
    batch = plugin.score_nodes(state, pi, snapshot, rows).tolist()
    per_node = [plugin.score(state, pi, snapshot.node_infos[r]) for r in rows.tolist()]
    return (None if status is None else status.code), batch, per_node


# -- NodeResourcesFitPlus: args ------------------------------------------------------------------------

def test_fitplus_args_parse_and_errors_name_the_field():
    args = fitplus.parse_args({"resources": {"cpu": {"type": "LeastAllocated", "weight": 1},
                                             GPU: {"type": "MostAllocated", "weight": 3}}})
    assert args.resources[GPU] == fitplus.ResourceStrategy("MostAllocated", 3)
    assert fitplus.parse_args(None).resources == {}
    for bad, error in [
        ({"resources": ["cpu"]}, "resources: Invalid value"),
        ({"resources": {"cpu": {"weight": 1}}}, 'resources[cpu].type: Unsupported value: None: supported values: '
                                                '"LeastAllocated", "MostAllocated"'),
        ({"resources": {"cpu": {"type": "Balanced", "weight": 1}}}, "resources[cpu].type: Unsupported value: 'Balanced'"),
        ({"resources": {GPU: {"type": "MostAllocated", "weight": -1}}}, f"resources[{GPU}].weight: Invalid value: -1"),
        ({"resources": {"cpu": 3}}, "resources[cpu]: Invalid value: 3"),
    ]:
        with pytest.raises(ValueError) as info:
            fitplus.parse_args(bad)
        assert str(info.value).startswith(error), str(info.value)


# -- NodeResourcesFitPlus: the pod's request ---------------------------------------------------------------

def test_fitplus_pod_request_defaults_and_init_containers_in_order():
    p = make_pod({"cpu": "200m"}, {"memory": "0"},
                 init=({"resources": {"requests": {"cpu": "500m", "memory": "100Mi"}}},
                       {"restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                       {"resources": {"requests": {"cpu": "1"}}}),
                 overhead={"cpu": "10m"})
    got = fitplus.pod_score_request(p)
    # containers: cpu 200m + 100m (missing -> default) = 300m; memory 200Mi (missing) + 0 (explicit 0 stays 0).
    # init in order: regular 500m/100Mi -> max: 500m/200Mi; sidecar 50m/200Mi (default) -> adds: 550m/400Mi;
    # regular 1/200Mi -> max: 1000m/400Mi; overhead +10m -> 1010m.
    assert got["cpu"] == 1010
    assert got["memory"] == 400 * MI * 1000


# -- NodeResourcesFitPlus: scores ------------------------------------------------------------------------

def fitplus_snapshot() -> Snapshot:
    placed = (make_pod({"cpu": "1", "memory": "2Gi", GPU: "4"}),
              make_pod({}))  # request-less: counts 100m / 200Mi on the node ("non-zero" requested)
    return Snapshot([make_node("n1", placed, cpu="4", memory="8Gi", **{GPU: "8"}),
                     make_node("n2", cpu="8", memory="16Gi")])


def test_fitplus_scores_each_resource_with_its_strategy_and_weight():
    plugin = fitplus.new({"resources": {"cpu": {"type": "LeastAllocated", "weight": 1},
                                        GPU: {"type": "MostAllocated", "weight": 3}}}, PluginHandle())
    snapshot = fitplus_snapshot()
    code, batch, per_node = scores(plugin, make_pod({"cpu": "1", "memory": "1Gi", GPU: "2"}), snapshot)
    # memory is requested but not listed: not scored.
    # n1: cpu Least (4000 - (1000 + 100 + 1000)) * 100 // 4000 = 47; gpu Most (4 + 2) * 100 // 8 = 75
    #     -> (47 * 1 + 75 * 3) // 4 = 68
    # n2: cpu Least (8000 - 1000) * 100 // 8000 = 87; gpu capacity 0 -> 0 (its weight still counts) -> 87 // 4 = 21
    assert code is None
    assert batch == per_node == [68, 21]


def test_fitplus_pod_without_cpu_request_is_not_scored_on_cpu():
    plugin = fitplus.new({"resources": {"cpu": {"type": "LeastAllocated", "weight": 1},
                                        GPU: {"type": "MostAllocated", "weight": 3}}}, PluginHandle())
    _, batch, per_node = scores(plugin, make_pod({GPU: "1"}), fitplus_snapshot())
    # Only gpu: n1 (4 + 1) * 100 // 8 = 62; n2 0.
    assert batch == per_node == [62, 0]


def test_fitplus_uses_its_own_init_container_rule_and_overhead():
    plugin = fitplus.new({"resources": {"cpu": {"type": "MostAllocated", "weight": 1},
                                        "memory": {"type": "LeastAllocated", "weight": 1}}}, PluginHandle())
    p = make_pod({"cpu": "200m"}, {"memory": "0"},
                 init=({"resources": {"requests": {"cpu": "500m", "memory": "100Mi"}}},
                       {"restartPolicy": "Always", "resources": {"requests": {"cpu": "50m"}}},
                       {"resources": {"requests": {"cpu": "1"}}}),
                 overhead={"cpu": "10m"})
    snapshot = Snapshot([make_node("n3", cpu="2", memory="4Gi")])
    _, batch, per_node = scores(plugin, p, snapshot)
    # pod side 1010m / 400Mi (test above). cpu Most: 1010 * 100 // 2000 = 50;
    # memory Least: (4096 - 400) * 100 // 4096 = 90 (in Mi) -> (50 + 90) // 2 = 70.
    assert batch == per_node == [70]


def test_fitplus_skips_pods_requesting_none_of_its_resources():
    plugin = fitplus.new({"resources": {GPU: {"type": "MostAllocated", "weight": 1}}}, PluginHandle())
    code, batch, _ = scores(plugin, make_pod({"cpu": "100m", "memory": "500Mi"}), fitplus_snapshot())
    # Koordinator scores 100 on every node: the same constant everywhere, so Skip chooses the same node.
    assert code == SKIP
    assert batch == [100, 100]
    code, _, _ = scores(fitplus.new({}, PluginHandle()), make_pod({"cpu": "1"}), fitplus_snapshot())
    assert code == SKIP


def test_fitplus_huge_amounts_do_not_overflow():
    plugin = fitplus.new({"resources": {"ephemeral-storage": {"type": "MostAllocated", "weight": 1}}}, PluginHandle())
    snapshot = Snapshot([make_node("big", cpu="4", memory="8Gi", **{"ephemeral-storage": "4Pi"})])
    _, batch, per_node = scores(plugin, make_pod({"ephemeral-storage": "2Pi"}), snapshot)
    # 2Pi of 4Pi: 50, although 4Pi in milli-units (4.5e18) times 100 exceeds int64.
    assert batch == per_node == [50]


# -- ScarceResourceAvoidance --------------------------------------------------------------------------------

def scarce_snapshot() -> Snapshot:
    return Snapshot([
        make_node("g1", cpu="32", memory="128Gi", **{"ephemeral-storage": "100Gi", GPU: "8", "kubernetes.io/batch-cpu": "1000"}),
        make_node("c1", cpu="32", memory="128Gi"),
        make_node("g0", cpu="32", memory="128Gi", **{GPU: "0"}),  # gpu allocatable 0: not listed
    ])


def test_scarce_args_and_errors_name_the_field():
    assert scarce.parse_args({"resources": [GPU, GPU]}).resources == (GPU,)
    assert scarce.parse_args({}).resources == ()
    for bad, error in [({"resources": GPU}, "resources: Invalid value"),
                       ({"resources": [GPU, ""]}, "resources[1]: Invalid value: ''"),
                       ({"resources": [GPU, 5]}, "resources[1]: Invalid value: 5")]:
        with pytest.raises(ValueError) as info:
            scarce.parse_args(bad)
        assert str(info.value).startswith(error), str(info.value)


@pytest.mark.parametrize("requests, scarce_names, expected", [
    # g1 lists cpu, memory, ephemeral-storage, gpu, batch-cpu (5); c1 and g0 only cpu, memory.
    # cpu+memory pod on g1: diff {eph, gpu, batch-cpu} = 3, inter {gpu} = 1 -> (3 - 1) * 100 // 3 = 66.
    ({"cpu": "1", "memory": "1Gi"}, [GPU], [66, 100, 100]),
    # A gpu pod wastes no scarce resource: inter 0 -> 100 everywhere.
    ({"cpu": "1", "memory": "1Gi", GPU: "1"}, [GPU], [100, 100, 100]),
    # A pod requesting nothing: g1 diff 5, inter 1 -> 80; c1 diff {cpu, memory}, inter 0 -> 100.
    ({}, [GPU], [80, 100, 100]),
    # cpu listed as scarce too: g1 diff 5, inter {cpu, gpu} 2 -> 60; c1/g0 diff 2, inter {cpu} -> 50.
    ({}, ["cpu", GPU], [60, 50, 50]),
    # A pod with ephemeral-storage: g1 diff {gpu, batch-cpu} = 2, inter 1 -> 50.
    ({"cpu": "1", "memory": "1Gi", "ephemeral-storage": "1Gi"}, [GPU], [50, 100, 100]),
])
def test_scarce_scores(requests, scarce_names, expected):
    plugin = scarce.new({"resources": scarce_names}, PluginHandle())
    code, batch, per_node = scores(plugin, make_pod(requests), scarce_snapshot())
    assert batch == per_node == expected
    assert code == (SKIP if expected == [100, 100, 100] else None)


def test_scarce_skips_when_no_node_has_a_scarce_resource():
    plugin = scarce.new({"resources": [GPU, "example.com/fpga"]}, PluginHandle())
    snapshot = Snapshot([make_node("c1", cpu="4", memory="8Gi"), make_node("c2", cpu="4", memory="8Gi")])
    code, batch, per_node = scores(plugin, make_pod({"cpu": "1"}), snapshot)
    assert code == SKIP
    assert batch == per_node == [100, 100]
    assert scores(scarce.new({}, PluginHandle()), make_pod({}), scarce_snapshot())[0] == SKIP


def test_scarce_follows_new_nodes_and_new_args():
    plugin = scarce.new({"resources": [GPU]}, PluginHandle())
    snapshot = Snapshot([make_node("c1", cpu="4", memory="8Gi")])
    assert scores(plugin, make_pod({"cpu": "1"}), snapshot)[0] == SKIP
    # A gpu node joins (a new column): the same plugin and snapshot object now score it.
    snapshot.set_nodes([make_node("c1", cpu="4", memory="8Gi"), make_node("g1", cpu="4", memory="8Gi",
                                                                          **{GPU: "2"})])
    code, batch, per_node = scores(plugin, make_pod({"cpu": "1"}), snapshot)
    # g1: diff {memory, gpu} (the pod requests cpu only), inter {gpu} -> (2 - 1) * 100 // 2 = 50.
    assert code is None and batch == per_node == [100, 50]
    plugin.update_args({"resources": ["example.com/fpga"]})
    assert scores(plugin, make_pod({"cpu": "1"}), snapshot)[0] == SKIP


# -- SchedulingHint: args and the annotation -------------------------------------------------------------

def test_schedulinghint_args():
    assert sh.parse_args(None).max_hint_nodes == 100
    assert sh.parse_args({"maxHintNodes": 3}).max_hint_nodes == 3
    for bad, error in [({"maxHintNodes": 0}, "maxHintNodes: Invalid value: 0: must be greater than 0"),
                       ({"maxHintNodes": "2"}, "maxHintNodes: Invalid value: '2'")]:
        with pytest.raises(ValueError) as info:
            sh.parse_args(bad)
        assert str(info.value).startswith(error), str(info.value)


def hint_pod(hint, key: str = ANNOTATION_SCHEDULING_HINT) -> PodInfo:
    value = hint if isinstance(hint, str) else json.dumps(hint)
    return PodInfo(make_pod({"cpu": "100m"}, annotations={key: value}))


def test_hint_is_stored_in_the_cycle_state_with_its_extensions():
    plugin = sh.new({}, PluginHandle())
    state = CycleState()
    hint = {"nodeNames": ["a", "b"], "preferredNodeNames": ["b"], "extensions": {"DeviceShare": {"gpu": [0]}}}
    changed, status = plugin.before_pre_filter(state, hint_pod(hint))
    assert changed is None and status is None
    stored = hint_from_state(state)
    assert state.read(STATE_KEY) is stored
    assert stored.node_names == ("a", "b") and stored.preferred_node_names == ("b",)
    assert stored.extension("DeviceShare") == {"gpu": [0]} and stored.extension("NodeNUMAResource") is None
    result, status = plugin.pre_filter(state, hint_pod(hint), Snapshot())
    assert status is None and result.node_names == {"a", "b"}
    # The deprecated annotation still works; the current one wins when both are set.
    state = CycleState()
    plugin.before_pre_filter(state, hint_pod({"nodeNames": ["old"]}, DEPRECATED_ANNOTATION_SCHEDULING_HINT))
    assert hint_from_state(state).node_names == ("old",)
    both = PodInfo(make_pod({}, annotations={DEPRECATED_ANNOTATION_SCHEDULING_HINT: '{"nodeNames": ["old"]}',
                                             ANNOTATION_SCHEDULING_HINT: '{"nodeNames": ["new"]}'}))
    state = CycleState()
    plugin.before_pre_filter(state, both)
    assert hint_from_state(state).node_names == ("new",)


def test_pods_without_hint_or_node_names_skip_prefilter():
    plugin = sh.new({}, PluginHandle())
    for p in (PodInfo(make_pod({"cpu": "100m"})), hint_pod({"preferredNodeNames": ["x"]}), hint_pod({"nodeNames": []})):
        state = CycleState()
        assert plugin.before_pre_filter(state, p) == (None, None)
        result, status = plugin.pre_filter(state, p, Snapshot())
        assert result is None and status.code == SKIP


@pytest.mark.parametrize("value, why", [
    ("{not json", "not valid JSON"),
    ('["n1"]', "must be a JSON object"),
    ('{"nodeNames": "n1"}', "nodeNames must be a list of node names"),
    ('{"preferredNodeNames": [1]}', "preferredNodeNames must be a list of node names"),
    ('{"extensions": []}', "extensions must be an object keyed by plugin name"),
])
def test_malformed_hint_is_unresolvable_naming_annotation_and_value(value, why):
    status = sh.new({}, PluginHandle()).before_pre_filter(CycleState(), hint_pod(value))[1]
    assert status.code == UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message().startswith(f"invalid annotation {ANNOTATION_SCHEDULING_HINT}: {value!r}: {why}")


def test_only_a_hinted_node_being_added_requeues_a_rejected_pod():
    [event] = sh.new({}, PluginHandle()).events_to_register()
    assert (event.kind, event.action) == ("Node", "Add")
    hinted = hint_pod({"nodeNames": ["n9"]}).pod
    assert event.hint(hinted, None, {"metadata": {"name": "n9"}})
    assert not event.hint(hinted, None, {"metadata": {"name": "n1"}})
    assert not event.hint(hint_pod("{broken").pod, None, {"metadata": {"name": "n9"}})


# -- SchedulingHint: PreferNodes in the framework's search ---------------------------------------------------

class MaskFilter(FilterPlugin):
    """Passes the nodes named in ``feasible``; counts the nodes it was asked about."""

    name = "MaskFilter"

    def __init__(self) -> None:
        self.feasible: set[str] = set()
        self.asked = 0

    def filter(self, state, pod, node: NodeInfo):
        self.asked += 1
        return None if node.name in self.feasible else Status(UNSCHEDULABLE, "masked")

    def filter_nodes(self, state, pod, snapshot, rows):
        self.asked += len(rows)
        passed = np.array([snapshot.node_infos[r].name in self.feasible for r in rows.tolist()], dtype=bool)
        return BatchFilterResult(passed, [Failure(UNSCHEDULABLE, "masked", ~passed)])


def hint_framework(n: int, args: dict | None = None) -> tuple[Framework, MaskFilter, Snapshot]:
    snapshot = Snapshot([make_node(f"n{i}", cpu="4") for i in range(n)])
    mask = MaskFilter()
    registry = Registry({"MaskFilter": lambda a, h: mask, "SchedulingHint": sh.new})
    fwk = Framework(make_profile(["SchedulingHint", "MaskFilter"], {"SchedulingHint": args or {}}), registry,
                    PluginHandle(snapshot_source=lambda: snapshot))
    return fwk, mask, snapshot


def search(fwk: Framework, snapshot: Snapshot, p: PodInfo) -> list[str]:
    state = CycleState()
    p, result, status = fwk.run_pre_filter(state, p, snapshot)
    assert status is None, status
    rows = fwk.find_nodes_that_fit(state, p, snapshot, result, Diagnosis(snapshot))
    return snapshot.names(rows.tolist())


def test_first_feasible_preferred_node_wins_outright():
    fwk, mask, snapshot = hint_framework(10)
    mask.feasible = {f"n{i}" for i in range(10)} - {"n7"}
    # "ghost" is not a node, n7 fails its filter: n3 is taken without searching the others.
    mask.asked = 0
    assert search(fwk, snapshot, hint_pod({"preferredNodeNames": ["ghost", "n7", "n3", "n1"]})) == ["n3"]
    assert mask.asked == 2  # n7 and n3, through the full (per-node) Filter
    # No preferred node passes: the usual search over every node.
    assert len(search(fwk, snapshot, hint_pod({"preferredNodeNames": ["n7"]}))) == 9


def test_preferred_nodes_are_limited_to_max_hint_nodes_and_to_the_prefilter_result():
    fwk, mask, snapshot = hint_framework(10, {"maxHintNodes": 1})
    mask.feasible = {"n2", "n5", "n6"}
    # Only the first preferred node (n0) is tried; it fails, so the search finds all feasible nodes.
    assert sorted(search(fwk, snapshot, hint_pod({"preferredNodeNames": ["n0", "n5"]}))) == ["n2", "n5", "n6"]
    fwk, mask, snapshot = hint_framework(10)
    mask.feasible = {"n2", "n5", "n6"}
    # n2 is feasible but outside nodeNames: n6 is the first preferred node within the PreFilter result.
    assert search(fwk, snapshot, hint_pod({"nodeNames": ["n5", "n6"], "preferredNodeNames": ["n2", "n6"]})) == ["n6"]
    # nodeNames alone restricts the search.
    assert sorted(search(fwk, snapshot, hint_pod({"nodeNames": ["n5", "n6", "n7"]}))) == ["n5", "n6"]


# -- registration and configuration -------------------------------------------------------------------------

def test_plugins_are_registered():
    names = set(in_tree_registry().names())
    for name in ("NodeResourcesFitPlus", "ScarceResourceAvoidance", "SchedulingHint"):
        assert name in names and name not in NOT_IMPLEMENTED


CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: koord-scheduler
  plugins:
    multiPoint:
      enabled:
      - {{name: SchedulingHint}}
      - {{name: NodeResourcesFitPlus, weight: 2}}
      - {{name: ScarceResourceAvoidance, weight: 2}}
  pluginConfig:
  - name: SchedulingHint
    args: {hint}
  - name: NodeResourcesFitPlus
    args: {{resources: {{cpu: {{type: LeastAllocated, weight: 1}}}}}}
  - name: ScarceResourceAvoidance
    args: {{resources: [nvidia.com/gpu]}}
"""


def test_bad_args_in_the_configuration_name_the_path(tmp_path):
    import koordinator_roles.scheduler as scheduler_role

    path = tmp_path / "config.yaml"
    # The schema allows an entry without type; the plugin does not.
    path.write_text(CONFIG.format(hint='{maxHintNodes: 2}').replace("type: LeastAllocated, ", ""))
    config = scheduler_role.load_configuration(str(path))
    with pytest.raises(ValueError) as info:
        Framework(config.profiles[0], in_tree_registry(), PluginHandle())
    assert "profiles[0].pluginConfig[1].args.resources[cpu].type: Unsupported value: None" in str(info.value)
    # The schema's own checks name the path too (maxHintNodes minimum 1).
    path.write_text(CONFIG.format(hint='{maxHintNodes: 0}'))
    with pytest.raises(ValueError) as info:
        scheduler_role.load_configuration(str(path))
    assert "profiles[0].pluginConfig[0].args.maxHintNodes" in str(info.value)


# -- SchedulingHint in the running scheduler ----------------------------------------------------------------

def bound_to(api, name: str) -> str:
    return (api.get("Pod", name, NS).get("spec") or {}).get("nodeName") or ""


def test_hints_in_the_running_scheduler(fresh_crd_server, scheduler_api, tmp_path):
    api = scheduler_api
    # big would win every score (least allocated); small cannot take 1500m.
    api.create(node("small", cpu="1"))
    api.create(node("big", cpu="16", memory="32Gi"))
    api.create(node("mid", cpu="2"))
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(CONFIG.format(hint="{maxHintNodes: 2}"))
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(path)):
        hint = {"preferredNodeNames": ["small", "mid", "big"]}
        api.create(pod("preferred", NS, cpu="1500m",
                       annotations={ANNOTATION_SCHEDULING_HINT: json.dumps(hint)}))
        # small is tried first and fails; mid fits and wins over the better-scoring big.
        assert wait_until(lambda: bound_to(api, "preferred"), message="preferred bound") == "mid"

        api.create(pod("restricted", NS, annotations={ANNOTATION_SCHEDULING_HINT: '{"nodeNames": ["small"]}'}))
        assert wait_until(lambda: bound_to(api, "restricted"), message="restricted bound") == "small"

        api.create(pod("plain", NS))
        assert wait_until(lambda: bound_to(api, "plain"), message="plain bound") == "big"

        api.create(pod("broken", NS, annotations={ANNOTATION_SCHEDULING_HINT: "{nodeNames: small}"}))
        message = wait_until(lambda: (condition(api.get("Pod", "broken", NS)) or {}).get("message"),
                             message="broken is reported unschedulable")
        assert f"invalid annotation {ANNOTATION_SCHEDULING_HINT}: '{{nodeNames: small}}': not valid JSON" in message
        assert bound_to(api, "broken") == ""
