"""DefaultPreemption: victim selection, node choice, eligibility, the failure message and the API side effects."""

from __future__ import annotations

import random
from types import SimpleNamespace
from typing import Any

import pytest

from koordinator.runtime.errors import AlreadyExists, NotFound
from koordinator.runtime.client import Client
from koordinator.runtime.events import EventRecorder
from koordinator.runtime.informer import InformerFactory
from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.interfaces import FilterPlugin, PreFilterExtensions, PreFilterPlugin
from koordinator_roles.scheduler.framework.registry import Registry
from koordinator_roles.scheduler.framework.runtime import Framework
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import (SUCCESS, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState,
                                                          Status)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins import defaultpreemption as dp
from koordinator_roles.scheduler.plugins import nodeports, tainttoleration
from tests.waiting import wait_until

# -- builders ----------------------------------------------------------------------------------------


def make_node(name: str, cpu: str = "4") -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}}}


def make_pod(name: str, priority: int = 0, cpu: str = "1", *, ns: str = "default", node: str = "",
             labels: dict | None = None, start: str | None = None, **spec: Any) -> dict:
    pod: dict = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "labels": labels or {}},
                 "spec": {"priority": priority, "schedulerName": "koord-scheduler",
                          "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}],
                          **spec},
                 "status": {}}
    if node:
        pod["spec"]["nodeName"] = node
    if start:
        pod["status"]["startTime"] = start
    return pod


class CpuFit(PreFilterPlugin, FilterPlugin, PreFilterExtensions):
    """Test-local filter: cpu requests must fit; counts the PreFilter extension calls preemption makes."""

    name = "CpuFit"

    def __init__(self) -> None:
        self.added: list[str] = []
        self.removed: list[str] = []

    def pre_filter(self, state, pod, snapshot):
        return None, None

    def pre_filter_extensions(self):
        return self

    def add_pod(self, state, pod, to_add, node):
        self.added.append(to_add.name)

    def remove_pod(self, state, pod, to_remove, node):
        self.removed.append(to_remove.name)

    def filter(self, state, pod, node: NodeInfo):
        free = node.allocatable.get("cpu", 0) - node.requested.get("cpu", 0)
        if pod.requests.get("cpu", 0) > free:
            return Status.unschedulable("Insufficient cpu")
        return None


class Nominations:
    """Test-local nominator with the queue's Nominator API (the queue is another helper's)."""

    def __init__(self) -> None:
        self.by_node: dict[str, list[PodInfo]] = {}

    def add_nominated_pod(self, pi: PodInfo, node_name: str) -> None:
        self.by_node.setdefault(node_name, []).append(pi)

    def delete_nominated_pod_if_exists(self, pod: dict) -> None:
        uid = pod["metadata"]["uid"]
        for name in list(self.by_node):
            self.by_node[name] = [p for p in self.by_node[name] if p.uid != uid]

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return list(self.by_node.get(node_name, []))

    def nominated_node_names(self) -> list[str]:
        return [n for n, ps in self.by_node.items() if ps]

    def nominated_node_name(self, pod: dict) -> str:
        uid = pod["metadata"]["uid"]
        return next((n for n, ps in self.by_node.items() if any(p.uid == uid for p in ps)), "")


def make_profile(names: list[str], args: dict | None = None) -> SimpleNamespace:
    """The slice of a configuration profile the Framework reads."""
    points = {"preFilter": names, "filter": names, "postFilter": names}

    def plugins_at(point, ok):
        return [SimpleNamespace(name=n, weight=1) for n in points.get(point, []) if ok(n, point)]

    return SimpleNamespace(scheduler_name="koord-scheduler", percentage_of_nodes_to_score=None, index=0,
                           all_plugin_names=lambda: list(names), plugin_args=args or {},
                           plugin_config_index={}, plugins_at=plugins_at)


class Cluster:
    """Nodes with pods, a real Framework (CpuFit + DefaultPreemption) and the plugin under test."""

    def __init__(self, layout: dict[str, list[dict]], *, cpu: str = "4", args: dict | None = None,
                 client: Any = None, informers: Any = None, recorder: Any = None,
                 plugins: tuple = (), taints: dict[str, list[dict]] | None = None) -> None:
        infos = []
        for name, pods in layout.items():
            node = make_node(name, cpu)
            if taints and name in taints:
                node["spec"] = {"taints": taints[name]}
            ni = NodeInfo(node)
            for p in pods:
                p["spec"]["nodeName"] = name
                ni.add_pod(PodInfo(p))
            infos.append(ni)
        self.snapshot = Snapshot(infos)
        self.nominator = Nominations()
        self.handle = PluginHandle(snapshot_source=lambda: self.snapshot, client=client, informers=informers,
                                   event_recorder=recorder, nominator=self.nominator)
        self.fit = CpuFit()
        registry = Registry({"CpuFit": lambda a, h: self.fit, dp.NAME: dp.new,
                             **{m.NAME: m.new for m in plugins}})
        self.framework = Framework(make_profile(["CpuFit", *(m.NAME for m in plugins), dp.NAME],
                                                {dp.NAME: {"minCandidateNodesPercentage": 10,
                                                           "minCandidateNodesAbsolute": 100, **(args or {})}}),
                                   registry, self.handle)
        self.plugin: dp.DefaultPreemption = self.framework.plugin(dp.NAME)  # type: ignore[assignment]

    def diagnose(self, pod: PodInfo, state: CycleState | None = None) -> Diagnosis:
        """Run PreFilter and Filter on every node as the scheduler does, giving PostFilter its diagnosis."""
        state = CycleState() if state is None else state
        _, pre_result, st = self.framework.run_pre_filter(state, pod, self.snapshot)
        assert st is None
        diag = Diagnosis(self.snapshot)
        assert len(self.framework.find_nodes_that_fit(state, pod, self.snapshot, pre_result, diag)) == 0
        return diag

    def victims(self, pod: PodInfo, node: str, pdbs=()) -> tuple[list[str], int, Status | None]:
        ni = self.snapshot.get(node).clone()
        victims, n, st = dp.select_victims_on_node(self.framework, CycleState(), pod, ni, list(pdbs), now=2e9)
        return [v.name for v in victims], n, st

    def preempt(self, pod: PodInfo):
        state = CycleState()
        diag = self.diagnose(pod, state)
        return self.plugin.post_filter(state, pod, diag)


def pdb(name: str, labels: dict, allowed: int, ns: str = "default", disrupted: tuple = ()) -> dict:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name, "namespace": ns},
            "spec": {"selector": {"matchLabels": labels}},
            "status": {"disruptionsAllowed": allowed, "disruptedPods": {p: "2024-01-01T00:00:00Z" for p in disrupted}}}


# -- victims on one node ---------------------------------------------------------------------------


def test_only_lower_priority_pods_are_victims_and_the_least_important_go():
    c = Cluster({"n1": [make_pod("low", 1, "2"), make_pod("mid", 5, "2"), make_pod("same", 10, "0")]})
    preemptor = PodInfo(make_pod("p", 10, "2"))
    names, violations, st = c.victims(preemptor, "n1")
    assert st is None and violations == 0
    # mid is reprieved first (more important) and fits; low must go. "same" is never touched.
    assert names == ["low"]
    assert sorted(c.fit.removed) == ["low", "low", "mid"]  # both removed, low removed again after its reprieve
    assert c.fit.added == ["mid", "low"]


def test_reprieve_keeps_the_longest_running_of_equal_priority():
    c = Cluster({"n1": [make_pod("young", 1, "2", start="2024-06-01T00:00:00Z"),
                        make_pod("old", 1, "2", start="2024-01-01T00:00:00Z")]})
    names, _, st = c.victims(PodInfo(make_pod("p", 10, "2")), "n1")
    assert st is None and names == ["young"]


def test_victims_are_listed_most_important_first():
    c = Cluster({"n1": [make_pod("a", 1, "2"), make_pod("b", 3, "2"), make_pod("c", 2, "2")]}, cpu="6")
    names, _, st = c.victims(PodInfo(make_pod("p", 10, "6")), "n1")
    assert st is None and names == ["b", "c", "a"]


def test_no_lower_priority_pod_means_no_victims():
    c = Cluster({"n1": [make_pod("high", 20, "4")]})
    names, _, st = c.victims(PodInfo(make_pod("p", 10, "2")), "n1")
    assert names == [] and st.code == UNSCHEDULABLE_AND_UNRESOLVABLE
    assert st.reasons == ["No preemption victims found for incoming pod"]


def test_node_that_cannot_fit_even_when_emptied_returns_the_filter_status():
    c = Cluster({"n1": [make_pod("low", 1, "1"), make_pod("high", 20, "3")]})
    names, _, st = c.victims(PodInfo(make_pod("p", 10, "2")), "n1")
    assert names == [] and st.code == UNSCHEDULABLE and st.reasons == ["Insufficient cpu"]


def test_pdb_protected_pods_are_reprieved_first():
    # Without a PDB the lower-priority "guarded" pod would be the victim.
    layout = {"n1": [make_pod("guarded", 1, "2", labels={"app": "db"}), make_pod("other", 2, "2")]}
    c = Cluster(layout)
    preemptor = PodInfo(make_pod("p", 10, "2"))
    assert c.victims(preemptor, "n1")[:2] == (["guarded"], 0)
    names, violations, st = c.victims(preemptor, "n1", [pdb("db", {"app": "db"}, 0)])
    assert st is None and names == ["other"] and violations == 0


def test_evicting_a_protected_pod_counts_a_violation():
    c = Cluster({"n1": [make_pod("guarded", 1, "2", labels={"app": "db"}), make_pod("other", 2, "2")]})
    names, violations, st = c.victims(PodInfo(make_pod("p", 10, "4")), "n1", [pdb("db", {"app": "db"}, 0)])
    assert st is None and names == ["other", "guarded"] and violations == 1


def test_filter_pods_with_pdb_violation_budget_namespace_and_disrupted_pods():
    pods = [PodInfo(make_pod(n, 1, labels={"app": "a"})) for n in ("p1", "p2", "p3")]
    pods.append(PodInfo(make_pod("elsewhere", 1, ns="other", labels={"app": "a"})))
    pods.append(PodInfo(make_pod("unlabelled", 1)))
    violating, fine = dp.filter_pods_with_pdb_violation(pods, [pdb("a", {"app": "a"}, 1)])
    assert [p.name for p in violating] == ["p2", "p3"]
    assert [p.name for p in fine] == ["p1", "elsewhere", "unlabelled"]
    # A pod the API server already counted as disrupted does not consume the budget.
    violating, _ = dp.filter_pods_with_pdb_violation(pods, [pdb("a", {"app": "a"}, 1, disrupted=("p1",))])
    assert [p.name for p in violating] == ["p3"]
    # An empty selector matches nothing.
    empty = pdb("e", {}, 0)
    assert dp.filter_pods_with_pdb_violation(pods, [empty])[0] == []


# -- choosing a node ---------------------------------------------------------------------------------


def cand(name: str, *victims: tuple[int, str | None], pdb_violations: int = 0) -> dp.Candidate:
    pods = [PodInfo(make_pod(f"{name}-v{i}", prio, start=start)) for i, (prio, start) in enumerate(victims)]
    pods.sort(key=lambda p: dp.importance_key(p, 2e9))
    return dp.Candidate(name, pods, pdb_violations)


T1, T2 = "2024-01-01T00:00:00Z", "2024-02-01T00:00:00Z"


@pytest.mark.parametrize("candidates, expected", [
    # 1. fewest PDB violations, even with a more important victim
    ([cand("a", (1, T1), pdb_violations=1), cand("b", (5, T1))], "b"),
    # 2. lowest highest-priority victim
    ([cand("a", (5, T1)), cand("b", (3, T1), (3, T1))], "b"),
    # 3. smallest sum of priorities (shifted: two victims at -5 cost more than one)
    ([cand("a", (3, T1), (2, T1)), cand("b", (3, T1), (1, T1))], "b"),
    ([cand("a", (-5, T1), (-5, T1)), cand("b", (-5, T1))], "b"),
    # 5. latest earliest start among the most important victims
    ([cand("a", (3, T1), (1, T2)), cand("b", (3, T2), (1, T1))], "b"),
    # 6. complete tie: the first
    ([cand("a", (3, T1)), cand("b", (3, T1))], "a"),
    ([cand("b", (3, T1)), cand("a", (3, T1))], "b"),
])
def test_pick_one_node_for_preemption(candidates, expected):
    assert dp.pick_one_node_for_preemption(candidates, now=2e9).name == expected


def test_pick_one_node_prefers_fewer_victims_at_equal_sum():
    # Shifted sums tie across different counts only at the int32 extremes: one victim at MaxInt32
    # against MaxInt32 plus MinInt32.
    top, bottom = 2 ** 31 - 1, -(2 ** 31)
    one = dp.Candidate("one", [PodInfo(make_pod("o1", top))])
    two = dp.Candidate("two", [PodInfo(make_pod("t1", top)), PodInfo(make_pod("t2", bottom))])
    assert dp.pick_one_node_for_preemption([two, one], now=2e9).name == "one"
    assert dp.pick_one_node_for_preemption([], now=2e9) is None


@pytest.mark.parametrize("nodes, pct, absolute, expected", [
    (1000, 10, 100, 100), (5000, 10, 100, 500), (50, 10, 100, 50), (1000, 0, 1, 1), (10, 100, 0, 10),
])
def test_calculate_num_candidates(nodes, pct, absolute, expected):
    assert dp.calculate_num_candidates(nodes, pct, absolute) == expected


def test_dry_run_starts_at_the_offset_and_stops_after_enough_candidates():
    layout = {f"n{i}": [make_pod(f"v{i}", 1, "4")] for i in range(5)}
    c = Cluster(layout)
    preemptor = PodInfo(make_pod("p", 10, "2"))
    nodes = c.snapshot.node_infos
    found, statuses, errors = dp.dry_run_preemption(c.framework, CycleState(), preemptor, nodes, [], 3, 2)
    assert [x.name for x in found] == ["n3", "n4"] and not statuses and not errors
    found, _, _ = dp.dry_run_preemption(c.framework, CycleState(), preemptor, nodes, [], 4, 2)
    assert [x.name for x in found] == ["n4", "n0"]
    # The snapshot's NodeInfos are untouched by the dry run.
    assert all(len(ni.pods) == 1 for ni in nodes)


def test_dry_run_goes_on_until_a_candidate_without_pdb_violation():
    layout = {"n0": [make_pod("g0", 1, "4", labels={"app": "db"})],
              "n1": [make_pod("g1", 1, "4", labels={"app": "db"})],
              "n2": [make_pod("free", 1, "4")]}
    c = Cluster(layout)
    found, _, _ = dp.dry_run_preemption(c.framework, CycleState(), PodInfo(make_pod("p", 10, "2")),
                                        c.snapshot.node_infos, [pdb("db", {"app": "db"}, 0)], 0, 1)
    # Non-violating candidates first; violating ones kept up to the wanted number.
    assert [(x.name, x.num_pdb_violations) for x in found] == [("n2", 0), ("n0", 1)]


# -- the plugin: eligibility, candidates, messages -----------------------------------------------------


def test_preemption_policy_never_is_not_eligible():
    c = Cluster({"n1": [make_pod("low", 1, "4")]})
    result, st = c.preempt(PodInfo(make_pod("p", 10, "2", preemptionPolicy="Never")))
    assert result is None and st.code == UNSCHEDULABLE
    assert st.reasons == ["preemption: not eligible due to preemptionPolicy=Never."]


def test_nominated_pod_waits_for_terminating_victims():
    victim = make_pod("low", 1, "4")
    victim["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    victim["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                       "reason": "PreemptionByScheduler"}]
    c = Cluster({"n1": [victim]})
    p = make_pod("p", 10, "2")
    p["status"]["nominatedNodeName"] = "n1"
    result, st = c.preempt(PodInfo(p))
    assert result is None and st.reasons == ["preemption: not eligible due to a terminating pod on the nominated node."]
    # The same pod terminating for another reason (no scheduler DisruptionTarget) does not block.
    ok, _ = dp.pod_eligible_to_preempt_others(PodInfo(p), NodeInfo(make_node("x")), None)
    assert ok
    # Nor does it when the nominated node became unresolvable for the pod.
    ok, _ = dp.pod_eligible_to_preempt_others(PodInfo(p), c.snapshot.get("n1"),
                                              Status.unresolvable("node(s) were unschedulable"))
    assert ok


def test_unresolvable_nodes_are_not_candidates():
    c = Cluster({"n1": [make_pod("low1", 1, "4")], "n2": [make_pod("low2", 5, "4")]})
    preemptor = PodInfo(make_pod("p", 10, "2"))
    diag = c.diagnose(preemptor)
    # Normally n1 (cheapest victim) wins ...
    result, st = c.plugin.post_filter(CycleState(), preemptor, diag)
    assert result.nominated_node_name == "n1" and st.code == SUCCESS
    # ... but not when some filter said n1 can never work for this pod.
    c2 = Cluster({"n1": [make_pod("low1", 1, "4")], "n2": [make_pod("low2", 5, "4")]})
    diag = Diagnosis(c2.snapshot)
    diag.add("NodeAffinity", 0, Status.unresolvable("node(s) didn't match Pod's node affinity/selector"))
    diag.add("CpuFit", 1, Status.unschedulable("Insufficient cpu"))
    result, st = c2.plugin.post_filter(CycleState(), preemptor, diag)
    assert result.nominated_node_name == "n2" and st.code == SUCCESS


def test_with_real_filters_ports_are_freed_and_tainted_nodes_skipped():
    def with_port(name: str, priority: int) -> dict:
        pod = make_pod(name, priority, "1")
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
        return pod

    layout = {"tainted": [with_port("cheapest", 0)], "busy": [with_port("vip", 100)], "n1": [with_port("low", 1)]}
    c = Cluster(layout, plugins=(tainttoleration, nodeports),
                taints={"tainted": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]})
    preemptor = PodInfo(with_port("p", 10))
    result, st = c.preempt(preemptor)
    assert st.code == SUCCESS and result.nominated_node_name == "n1"
    # Without n1 nothing helps: the tainted node is not tried (TaintToleration runs first, as in kube's
    # default order, and rules it out for good), the busy one has no victims.
    c = Cluster({k: v for k, v in layout.items() if k != "n1"}, plugins=(tainttoleration, nodeports),
                taints={"tainted": [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]})
    result, st = c.preempt(preemptor)
    assert st.reasons == ["preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
                          "1 Preemption is not helpful for scheduling."]


def test_failure_message_counts_every_node():
    c = Cluster({"n1": [make_pod("low1", 1, "4")],        # unresolvable: absent from the dry run
                 "n2": [make_pod("high", 20, "4")],       # nothing to evict
                 "n3": [make_pod("big", 20, "3"), make_pod("small", 1, "1")]})  # evicting is not enough
    preemptor = PodInfo(make_pod("p", 10, "2"))
    diag = Diagnosis(c.snapshot)
    diag.add("NodeAffinity", 0, Status.unresolvable("node(s) didn't match Pod's node affinity/selector"))
    diag.add("CpuFit", 1, Status.unschedulable("Insufficient cpu"))
    diag.add("CpuFit", 2, Status.unschedulable("Insufficient cpu"))
    result, st = c.plugin.post_filter(CycleState(), preemptor, diag)
    assert st.code == UNSCHEDULABLE and result is not None and result.nominated_node_name == ""
    assert st.reasons == ["preemption: 0/3 nodes are available: 1 Insufficient cpu, "
                          "1 No preemption victims found for incoming pod, "
                          "1 Preemption is not helpful for scheduling."]


def test_failure_message_when_no_node_is_worth_trying():
    assert dp.fit_error_message(12, {}, dp.MSG_NOT_HELPFUL) == \
        "0/12 nodes are available: 12 Preemption is not helpful for scheduling."
    # Reasons sort as strings, as kube does ("10 ..." before "2 ...").
    statuses = {f"n{i}": Status.unschedulable("Insufficient cpu") for i in range(10)}
    statuses.update({"x": Status.unresolvable("No preemption victims found for incoming pod"),
                     "y": Status.unresolvable("No preemption victims found for incoming pod")})
    assert dp.fit_error_message(12, statuses, dp.MSG_NOT_HELPFUL) == \
        "0/12 nodes are available: 10 Insufficient cpu, 2 No preemption victims found for incoming pod."


def test_random_offset_spreads_preemption_over_equal_nodes():
    layout = {f"n{i}": [make_pod(f"v{i}", 1, "4")] for i in range(4)}
    c = Cluster(layout, args={"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1})
    c.plugin.rand = random.Random(7)
    preemptor = PodInfo(make_pod("p", 10, "2"))
    chosen = set()
    for _ in range(30):
        result, st = c.plugin.preempt(CycleState(), preemptor, c.diagnose(preemptor))
        assert st.code == SUCCESS
        chosen.add(result.nominated_node_name)
    assert len(chosen) > 1


@pytest.mark.parametrize("args, message", [
    ({"minCandidateNodesPercentage": 101, "minCandidateNodesAbsolute": 1},
     "minCandidateNodesPercentage: Invalid value: 101: not in valid range [0, 100]"),
    ({"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": -1},
     "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"),
    ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0},
     "minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute"),
])
def test_bad_args(args, message):
    with pytest.raises(ValueError) as err:
        dp.new(args, PluginHandle())
    assert str(err.value).startswith(message)


# -- API side effects (embedded API server) ------------------------------------------------------------


def _priority_class(client, value: int) -> str:
    """The server's priority admission wants a PriorityClass name instead of a literal priority."""
    name = f"preemption-test-{value}"
    try:
        client.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                       "value": value})
    except AlreadyExists:
        pass
    return name


def _create(client, pod: dict, node: str = "") -> dict:
    """Create ``pod`` (bound to ``node`` when given) with its priority through a PriorityClass."""
    spec = {k: v for k, v in pod["spec"].items() if k != "priority"}
    spec["priorityClassName"] = _priority_class(client, pod["spec"]["priority"])
    if node:
        spec["nodeName"] = node
    meta = {k: v for k, v in pod["metadata"].items() if k != "uid"}
    return client.create({**pod, "metadata": meta, "spec": spec})



def test_preemption_deletes_victims_records_events_and_clears_nominations(client, namespace):
    # Real objects, so victims carry the API's uids and the patches/deletes hit the server.
    low = _create(client, make_pod("low", 1, "2", ns=namespace), "n1")
    mid = _create(client, make_pod("mid", 5, "2", ns=namespace), "n1")
    nominated = _create(client, make_pod("waiting-low", 2, "1", ns=namespace))
    nominated = client.patch("Pod", "waiting-low", {"status": {"nominatedNodeName": "n1"}}, namespace=namespace,
                             subresource="status")
    recorder = EventRecorder(client, "koord-scheduler")
    recorder.start()
    try:
        c = Cluster({"n1": [low, mid]}, client=client, recorder=recorder)
        c.nominator.add_nominated_pod(PodInfo(nominated), "n1")
        preemptor = PodInfo(make_pod("boss", 10, "2", ns=namespace))
        result, st = c.preempt(preemptor)
        assert st.code == SUCCESS and result.nominated_node_name == "n1"

        with pytest.raises(NotFound):
            client.get("Pod", "low", namespace)
        assert client.get("Pod", "mid", namespace)["metadata"]["uid"] == mid["metadata"]["uid"]
        assert "nominatedNodeName" not in client.get("Pod", "waiting-low", namespace).get("status", {})
        assert c.nominator.nominated_pods_for_node("n1") == []

        def preempted_event():
            items = client.list("Event", namespace)["items"]
            return [e for e in items if e["reason"] == "Preempted" and e["involvedObject"]["name"] == "low"]

        event = wait_until(preempted_event, message="the Preempted event")[0]
        assert event["message"] == f"Preempted by pod {preemptor.uid} on node n1"
        assert event["type"] == "Normal"
    finally:
        recorder.stop(5)


def test_victim_already_gone_is_not_an_error(client, namespace):
    ghost = make_pod("ghost", 1, "4", ns=namespace)  # never created: delete answers NotFound
    c = Cluster({"n1": [ghost]}, client=client)
    result, st = c.preempt(PodInfo(make_pod("p", 10, "2", ns=namespace)))
    assert st.code == SUCCESS and result.nominated_node_name == "n1"


def test_victim_being_deleted_is_left_alone(client, namespace):
    victim = _create(client, make_pod("dying", 1, "4", ns=namespace), "n1")
    seen = {**victim, "metadata": {**victim["metadata"], "deletionTimestamp": "2024-01-01T00:00:00Z"}}
    c = Cluster({"n1": [seen]}, client=client)
    result, st = c.preempt(PodInfo(make_pod("p", 10, "2", ns=namespace)))
    assert st.code == SUCCESS and result.nominated_node_name == "n1"
    assert client.get("Pod", "dying", namespace)["metadata"]["name"] == "dying"  # no second delete


def test_waiting_victim_is_rejected_instead_of_deleted(client, namespace):
    # An assumed pod waiting at Permit is not in the API as bound; kube rejects it rather than deleting.
    c = Cluster({"n1": [make_pod("held", 1, "4", ns=namespace)]}, client=client)
    held = c.snapshot.get("n1").pods["uid-held"]
    rejected: list[tuple[str, str]] = []
    c.framework.waiting_pods[held.uid] = SimpleNamespace(reject=lambda plugin, msg: rejected.append((plugin, msg)))
    result, st = c.preempt(PodInfo(make_pod("p", 10, "2", ns=namespace)))
    assert st.code == SUCCESS and rejected == [("DefaultPreemption", "preempted")]


def test_pdbs_come_from_the_informer(client, namespace):
    protected = _create(client, make_pod("guarded", 1, "2", ns=namespace, labels={"app": "db"}), "n1")
    other = _create(client, make_pod("other", 2, "2", ns=namespace), "n1")
    client.create(pdb("db", {"app": "db"}, 0, ns=namespace) | {"status": {}})
    client.patch("PodDisruptionBudget", "db", {"status": {"disruptionsAllowed": 0, "currentHealthy": 1,
                                                          "desiredHealthy": 1, "expectedPods": 1}},
                 namespace=namespace, subresource="status")
    factory = InformerFactory(client)
    c = Cluster({"n1": [protected, other]}, client=client, informers=factory)
    factory.start()
    try:
        assert factory.wait_for_sync(20)
        wait_until(lambda: any(p["metadata"]["namespace"] == namespace for p in c.plugin.pdbs()), message="pdb")
        result, st = c.preempt(PodInfo(make_pod("p", 10, "2", ns=namespace)))
        assert st.code == SUCCESS
        with pytest.raises(NotFound):
            client.get("Pod", "other", namespace)
        assert client.get("Pod", "guarded", namespace)["metadata"]["name"] == "guarded"
    finally:
        factory.stop()


def test_victims_are_marked_disruption_target_and_the_preemptor_then_waits(fresh_apiserver):
    # With graceful deletion the victim stays, terminating, until its kubelet confirms.
    fresh_apiserver.start("--pod-deletion", "graceful")
    client = Client.from_kubeconfig(str(fresh_apiserver.kubeconfig), qps=0)
    try:
        victim = _create(client, make_pod("low", 1, "4"), "n1")
        c = Cluster({"n1": [victim]}, client=client)
        preemptor = make_pod("boss", 10, "2")
        result, st = c.preempt(PodInfo(preemptor))
        assert st.code == SUCCESS and result.nominated_node_name == "n1"

        terminating = client.get("Pod", "low", "default")
        assert terminating["metadata"].get("deletionTimestamp")
        (cond,) = [x for x in terminating["status"]["conditions"] if x["type"] == "DisruptionTarget"]
        assert (cond["status"], cond["reason"], cond["message"]) == \
            ("True", "PreemptionByScheduler", "koord-scheduler: preempting to accommodate a higher priority pod")

        # Next cycle: the nominated preemptor sees its victim terminating and does not evict more.
        later = Cluster({"n1": [terminating]}, client=client)
        preemptor["status"]["nominatedNodeName"] = "n1"
        result, st = later.preempt(PodInfo(preemptor))
        assert result is None and st.code == UNSCHEDULABLE
        assert st.reasons == ["preemption: not eligible due to a terminating pod on the nominated node."]
    finally:
        client.close()
