"""ElasticQuota: the runtime computation worked by hand (reference §3.2), the tree manager, PreFilter and args."""

from __future__ import annotations

import json

import pytest

from koordinator.apis import quota as q
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE, CycleState
from koordinator_roles.scheduler.framework.types import PodInfo
from koordinator_roles.scheduler.plugins.elasticquota import tree as t
from koordinator_roles.scheduler.plugins.elasticquota.args import parse_args
from koordinator_roles.scheduler.plugins.elasticquota.plugin import ElasticQuota

S = t.Share


# -- distribute: one parent, one dimension ------------------------------------------------------------

def test_idle_min_is_lent_and_the_rest_shared_by_weight():
    # total 10 cpu (milli). a and b each get their min 2; 6 left, weights 1:3 -> 1.5 and 4.5.
    assert t.distribute(10000, [S("a", 8000, 2000, 1), S("b", 8000, 2000, 3)]) == {"a": 3500, "b": 6500}
    # Equal weights: 3 each on top of the mins.
    assert t.distribute(10000, [S("a", 8000, 2000, 5), S("b", 8000, 2000, 5)]) == {"a": 5000, "b": 5000}
    # c requests 1 of its min 4 and lends the rest: b, the only borrower, gets 2 + (10 - 1 - 2) = 9.
    assert t.distribute(10000, [S("b", 10000, 2000, 1), S("c", 1000, 4000, 1)]) == {"b": 9000, "c": 1000}


def test_what_a_borrower_cannot_use_goes_to_the_others():
    # Round 1: 6 left, 3 each -> a 5 > its request 3: clamped, 2 surplus; round 2: b gets the 2 -> 7.
    assert t.distribute(10000, [S("a", 3000, 2000, 1), S("b", 9000, 2000, 1)]) == {"a": 3000, "b": 7000}


def test_non_lending_quota_keeps_its_min():
    # c lends nothing: it keeps its min 4 although it requests 0; b gets 2 + (10 - 4 - 2) = 6.
    assert t.distribute(10000, [S("b", 10000, 2000, 1), S("c", 0, 4000, 1, allow_lent=False)]) == \
        {"b": 6000, "c": 4000}


def test_hamilton_rounding_of_whole_units():
    # 10 GPUs, three equal borrowers: 3 each and the leftover unit to the smallest name (all remainders 1).
    assert t.distribute(10, [S("c", 10, 0, 1), S("b", 10, 0, 1), S("a", 10, 0, 1)]) == {"a": 4, "b": 3, "c": 3}
    # Weights 1:2:4 (W = 7): 10/7, 20/7, 40/7 -> floors 1, 2, 5 (8), remainders 3, 6, 5: the 2 leftover units
    # go to b (6) and c (5).
    assert t.distribute(10, [S("a", 10, 0, 1), S("b", 10, 0, 2), S("c", 10, 0, 4)]) == {"a": 1, "b": 3, "c": 6}


def test_weight_zero_borrowers_get_nothing_beyond_min():
    # Quirk §8.10: what only a weight-0 borrower could take stays unallocated.
    assert t.distribute(100, [S("a", 15, 0, 1), S("z", 80, 10, 0)]) == {"a": 15, "z": 10}


def test_min_scaling():
    # Σ min cpu 8 > total 6: each min scaled to floor(6 * 4 / 8) = 3; memory is not over-committed.
    scaled = t.scale_mins({"cpu": 6000, "memory": 100}, {"a": {"cpu": 4000, "memory": 10},
                                                         "b": {"cpu": 4000, "memory": 20}})
    assert scaled == {"a": {"cpu": 3000, "memory": 10}, "b": {"cpu": 3000, "memory": 20}}
    # Uneven: total 10, mins 3 and 9 (Σ 12): floor(10*3/12) = 2, floor(10*9/12) = 7.
    assert t.scale_mins({"cpu": 10}, {"a": {"cpu": 3}, "b": {"cpu": 9}}) == {"a": {"cpu": 2}, "b": {"cpu": 7}}


# -- the tree manager ---------------------------------------------------------------------------------

def eq(name: str, mn: dict, mx: dict, *, parent: str = "", is_parent: bool = False, lend: bool = True,
       weight: dict | None = None, namespace: str = "team-ns", namespaces: list | None = None) -> dict:
    labels = {q.LABEL_PARENT: parent}
    if is_parent:
        labels[q.LABEL_IS_PARENT] = "true"
    if not lend:
        labels[q.LABEL_ALLOW_LENT_RESOURCE] = "false"
    annotations = {}
    if weight is not None:
        annotations[q.ANNOTATION_SHARED_WEIGHT] = json.dumps(weight)
    if namespaces is not None:
        annotations[q.ANNOTATION_NAMESPACES] = json.dumps(namespaces)
    return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
            "metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations},
            "spec": {"min": mn, "max": mx}}


def mkpod(name: str, cpu: str, *, quota: str | None = None, node: str = "", namespace: str = "work",
          non_preemptible: bool = False, priority: int = 0) -> dict:
    labels = {}
    if quota:
        labels[q.LABEL_QUOTA_NAME] = quota
    if non_preemptible:
        labels[q.LABEL_PREEMPTIBLE] = "false"
    return {"metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "labels": labels},
            "spec": {"nodeName": node, "priority": priority,
                     "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": "Pending"}}


def team_tree(mgr: t.GroupQuotaManager, **kw) -> None:
    mgr.update_node("n1", {"cpu": "8", "memory": "32Gi"})
    mgr.update_node("n2", {"cpu": "8", "memory": "32Gi"})
    mgr.update_quota(eq("team", {"cpu": "8"}, {"cpu": "16"}, is_parent=True))
    mgr.update_quota(eq("a", {"cpu": "4"}, {"cpu": "12"}, parent="team", weight={"cpu": "1"}))
    mgr.update_quota(eq("b", {"cpu": "4"}, {"cpu": "16"}, parent="team", weight={"cpu": "1"}))


def test_request_propagation_borrowing_and_used():
    mgr = t.GroupQuotaManager()
    team_tree(mgr)
    for i in range(3):
        mgr.on_pod(mkpod(f"b{i}", "4", quota="b", node="n1" if i < 2 else ""))
    mgr.refresh()
    team, a, b = (mgr.quotas[n] for n in ("team", "a", "b"))
    # b requests 12 (a nothing): team requests 12 of the 16 in the cluster, gets 8 (min) + 4 borrowed;
    # inside the team a lends all of its idle min, so b runs 4 (min) + 8.
    assert (b.child_request, b.request, team.child_request) == ({"cpu": 12000}, {"cpu": 12000}, {"cpu": 12000})
    assert (team.runtime, a.runtime, b.runtime) == ({"cpu": 12000}, {"cpu": 0}, {"cpu": 12000})
    assert (b.used, team.used, mgr.quotas[q.ROOT_QUOTA].used) == ({"cpu": 8000},) * 3
    assert mgr.total == {"cpu": 16000, "memory": 2 * 32 * 1024 ** 3}
    # a asks for 8: both borrow; 8 left after the mins, weights 1:1 -> 4 each.
    for i in range(2):
        mgr.on_pod(mkpod(f"a{i}", "4", quota="a"))
    mgr.refresh()
    assert (team.runtime, a.runtime, b.runtime) == ({"cpu": 16000}, {"cpu": 8000}, {"cpu": 8000})
    # The scheduler reserves a0 on a node: used goes up at once; unreserve undoes it.
    mgr.reserve(mkpod("a0", "4", quota="a", node="n2"), "uid-a0")
    mgr.refresh()
    assert a.used == {"cpu": 4000} and team.used == {"cpu": 12000}
    mgr.unreserve("uid-a0")
    mgr.refresh()
    assert a.used == {"cpu": 0} and team.used == {"cpu": 8000}
    # A finished pod stops counting.
    done = mkpod("b0", "4", quota="b", node="n1")
    done["status"]["phase"] = "Succeeded"
    mgr.on_pod(done)
    mgr.refresh()
    assert b.used == {"cpu": 4000} and b.request == {"cpu": 8000}


def test_non_lending_quota_requests_its_min_and_system_default_used_leave_the_total():
    mgr = t.GroupQuotaManager()
    mgr.update_node("n1", {"cpu": "10"})
    mgr.update_quota(eq("keep", {"cpu": "4"}, {"cpu": "10"}, lend=False))
    mgr.update_quota(eq("busy", {"cpu": "2"}, {"cpu": "10"}))
    mgr.on_pod(mkpod("x", "10", quota="busy"))
    mgr.on_pod(mkpod("sys", "1", quota=q.SYSTEM_QUOTA, node="n1"))
    mgr.refresh()
    keep, busy = mgr.quotas["keep"], mgr.quotas["busy"]
    # total 10 - 1 used by the system quota = 9; keep holds its 4 (its request is its min), busy gets 5.
    assert mgr.total == {"cpu": 9000}
    assert keep.request == {"cpu": 4000} and keep.runtime == {"cpu": 4000}
    assert busy.runtime == {"cpu": 5000}


def test_min_scaling_in_the_tree_and_without_it():
    def runtimes(scale: bool) -> tuple:
        mgr = t.GroupQuotaManager(enable_min_quota_scale=scale)
        mgr.update_node("n1", {"cpu": "6"})
        mgr.update_quota(eq("a", {"cpu": "4"}, {"cpu": "10"}))
        mgr.update_quota(eq("b", {"cpu": "4"}, {"cpu": "10"}))
        mgr.on_pod(mkpod("pa", "10", quota="a"))
        mgr.on_pod(mkpod("pb", "10", quota="b"))
        mgr.refresh()
        return mgr.quotas["a"].runtime["cpu"], mgr.quotas["b"].runtime["cpu"], mgr.quotas["a"].auto_scale_min
    # Σ min 8 > 6: mins scaled to 3 each and nothing is left to share.
    assert runtimes(True) == (3000, 3000, {"cpu": 3000})
    # Unscaled, both mins are given in full: 8 of a 6-cpu cluster (quirk §8.10).
    assert runtimes(False) == (4000, 4000, {"cpu": 4000})


def test_pod_to_quota_resolution():
    mgr = t.GroupQuotaManager()
    mgr.update_quota(eq("work", {}, {"cpu": "4"}, namespace="work"))
    mgr.update_quota(eq("listed", {}, {"cpu": "4"}, namespace="other", namespaces=["svc"]))
    assert mgr.quota_name_of_pod(mkpod("p", "1", quota="listed")) == "listed"
    assert mgr.quota_name_of_pod(mkpod("p", "1", quota="missing")) == q.DEFAULT_QUOTA
    assert mgr.quota_name_of_pod(mkpod("p", "1")) == "work"
    assert mgr.quota_name_of_pod(mkpod("p", "1", namespace="svc")) == "listed"
    assert mgr.quota_name_of_pod(mkpod("p", "1", namespace="elsewhere")) == q.DEFAULT_QUOTA
    # A quota appearing later takes over the pods of its namespace.
    mgr.on_pod(mkpod("late", "1", namespace="new"))
    assert mgr.pods["uid-late"].quota == q.DEFAULT_QUOTA
    mgr.update_quota(eq("new", {}, {"cpu": "4"}, namespace="new"))
    assert mgr.pods["uid-late"].quota == "new"


# -- PreFilter messages ---------------------------------------------------------------------------------

def plugin_with_tree(**args) -> ElasticQuota:
    plugin = ElasticQuota(args, None)
    team_tree(plugin.manager)
    return plugin


def prefilter(plugin: ElasticQuota, pod: dict):
    plugin.manager.on_pod(pod)  # the informer has seen the pending pod before it is scheduled
    state = CycleState()
    _, status = plugin.pre_filter(state, PodInfo(pod), None)
    return state, status


def test_prefilter_messages():
    plugin = plugin_with_tree()
    mgr = plugin.manager
    for i in range(2):
        mgr.on_pod(mkpod(f"b{i}", "4", quota="b", node="n1"))
    for i in range(2):
        mgr.on_pod(mkpod(f"a{i}", "4", quota="a", node="n2"))
    _, status = prefilter(plugin, mkpod("a2", "4", quota="a"))
    assert status.code == UNSCHEDULABLE
    # a requests 12 and b 8: team gets its max 16, 8 beyond the mins shared 1:1, so a runs 4 + 4 = 8.
    assert status.message() == ("Insufficient quotas, quotaName: a, runtime: cpu:8, used: cpu:8, "
                                "pod's request: cpu:4, exceedDimensions: [cpu]")
    _, status = prefilter(plugin, mkpod("small", "0", quota="a"))
    assert status is None
    # Non-preemptible pods must fit inside min.
    plugin = plugin_with_tree()
    plugin.manager.on_pod(mkpod("np0", "3", quota="a", node="n1", non_preemptible=True))
    _, status = prefilter(plugin, mkpod("np1", "2", quota="a", non_preemptible=True))
    assert status.message() == ("Insufficient non-preemptible quotas, quotaName: a, min: cpu:4, "
                                "nonPreemptibleUsed: cpu:3, pod's request: cpu:2, exceedDimensions: [cpu]")
    _, status = prefilter(plugin, mkpod("p1", "2", quota="a"))
    assert status is None


def test_prefilter_parent_check_and_default_quota():
    plugin = plugin_with_tree(enableCheckParentQuota=True, enableRuntimeQuota=False)
    mgr = plugin.manager
    # Against max (runtime off): a's max is 12, but team's max 16 is already used by 8 + 8.
    for i in range(2):
        mgr.on_pod(mkpod(f"b{i}", "4", quota="b", node="n1"))
    for i in range(2):
        mgr.on_pod(mkpod(f"a{i}", "4", quota="a", node="n2"))
    _, status = prefilter(plugin, mkpod("a2", "4", quota="a"))
    assert status.message() == ("Insufficient quotas, quotaNameTopo: [team a], runtime: cpu:16, used: cpu:16, "
                                "pod's request: cpu:4, exceedDimensions: [cpu]")
    # Pods of the default quota always pass (reference §8.9).
    plugin = ElasticQuota({"defaultQuotaGroupMax": {"cpu": "1"}}, None)
    _, status = prefilter(plugin, mkpod("d", "4", namespace="nowhere"))
    assert status is None


def test_preemption_dry_run_state_counts_only_same_quota_pods():
    plugin = plugin_with_tree()
    mgr = plugin.manager
    for i in range(2):
        mgr.on_pod(mkpod(f"a{i}", "4", quota="a", node="n2", priority=1))
    mgr.on_pod(mkpod("b0", "4", quota="b", node="n1"))
    mgr.on_pod(mkpod("b1", "4", quota="b", node="n1"))
    high = PodInfo(mkpod("hi", "4", quota="a", priority=10))
    state, status = prefilter(plugin, high.pod)
    assert status is not None  # a: request 12, runtime 4 + 8 * 1/2 = 8, used 8
    plugin.remove_pod(state, high, PodInfo(mgr.pods["uid-b0"].pod), None)
    assert not state.read("PreFilterElasticQuota").fits()
    plugin.remove_pod(state, high, PodInfo(mgr.pods["uid-a0"].pod), None)
    assert state.read("PreFilterElasticQuota").fits()
    victim, other = PodInfo(mgr.pods["uid-a1"].pod), PodInfo(mgr.pods["uid-b0"].pod)
    assert plugin.can_preempt(victim, high) and not plugin.can_preempt(other, high)
    assert not plugin.can_preempt(high, victim)


# -- args ---------------------------------------------------------------------------------------------

def test_args_defaults():
    args = parse_args({})
    assert (args.delay_evict_time, args.revoke_pod_interval, args.quota_group_namespace) == (120.0, 1.0,
                                                                                            "koordinator-system")
    assert args.default_quota_group_max == {"cpu": "1844674407370955161", "memory": "1844674407370955161"}
    assert (args.monitor_all_quotas, args.enable_check_parent_quota, args.enable_runtime_quota,
            args.enable_min_quota_scale, args.disable_default_quota_preemption) == (False, False, True, True, True)
    assert parse_args({"delayEvictTime": "1m30s"}).delay_evict_time == 90.0


@pytest.mark.parametrize("args, error", [
    ({"delayEvictTime": "-1s"}, "delayEvictTime: Invalid value: '-1s': must be non-negative"),
    ({"revokePodInterval": "soon"}, "revokePodInterval: Invalid value: 'soon'"),
    ({"defaultQuotaGroupMax": {"cpu": "-2"}}, "defaultQuotaGroupMax.cpu: Invalid value: '-2'"),
    ({"systemQuotaGroupMax": {"memory": "lots"}}, "systemQuotaGroupMax.memory: Invalid value: 'lots'"),
    ({"monitorAllQuotas": "yes"}, "monitorAllQuotas: Invalid value: 'yes': must be a boolean"),
    ({"hookPlugins": [{"key": "k", "factoryKey": "f"}]}, "hookPlugins[0].factoryKey: Not found: 'f'"),
])
def test_args_validation_names_the_field(args, error):
    with pytest.raises(ValueError) as info:
        parse_args(args)
    assert str(info.value).startswith(error)


def test_args_errors_in_the_configuration_name_the_path(tmp_path):
    import koordinator_roles.scheduler as scheduler_role
    from koordinator_roles.scheduler.framework.handle import PluginHandle
    from koordinator_roles.scheduler.framework.runtime import Framework
    from koordinator_roles.scheduler.plugins import in_tree_registry

    path = tmp_path / "config.yaml"
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "profiles:\n- schedulerName: koord-scheduler\n"
                    "  plugins: {preFilter: {enabled: [{name: ElasticQuota}]}}\n"
                    "  pluginConfig:\n  - name: NodeResourcesFit\n  - name: ElasticQuota\n"
                    "    args: {hookPlugins: [{key: k, factoryKey: f}]}\n")
    config = scheduler_role.load_configuration(str(path))
    with pytest.raises(ValueError) as info:
        Framework(config.profiles[0], in_tree_registry(), PluginHandle())
    assert "profiles[0].pluginConfig[1].args.hookPlugins[0].factoryKey: Not found" in str(info.value)
    path.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                    "profiles:\n- schedulerName: koord-scheduler\n"
                    "  pluginConfig:\n  - name: ElasticQuota\n    args: {delayEvictTime: -5s}\n")
    with pytest.raises(ValueError) as info:
        scheduler_role.load_configuration(str(path))
    assert "profiles[0].pluginConfig[0].args.delayEvictTime" in str(info.value)
