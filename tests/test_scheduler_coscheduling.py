"""Coscheduling (gang scheduling) in the running scheduler, against the embedded API server."""

from __future__ import annotations

import pytest

import threading

from koordinator.runtime.client import Client
from koordinator_roles.scheduler.framework.interfaces import PreBindPlugin, ReservePlugin
from koordinator_roles.scheduler.framework.registry import Registry
from koordinator_roles.scheduler.framework.runtime import WaitingPod
from koordinator_roles.scheduler.framework.status import WAIT, Status
from koordinator_roles.scheduler.plugins import in_tree_registry
from koordinator_roles.scheduler.framework.types import PodInfo
from koordinator_roles.scheduler.plugins.coscheduling.args import parse_args
from koordinator_roles.scheduler.plugins.coscheduling.controller import next_status
from koordinator_roles.scheduler.plugins.coscheduling.plugin import Coscheduling
from tests.scheduler_harness import NS, InProcessScheduler, condition, node, pod
from tests.waiting import wait_until

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
podInitialBackoffSeconds: 1
podMaxBackoffSeconds: 1
profiles:
- schedulerName: koord-scheduler
  plugins:
    preEnqueue: {enabled: [{name: Coscheduling}]}
    preFilter: {enabled: [{name: Coscheduling}]}
    postFilter: {enabled: [{name: Coscheduling}]}
    preScore: {enabled: [{name: Coscheduling}]}
    score: {enabled: [{name: Coscheduling, weight: 1}]}
    reserve: {enabled: [{name: Coscheduling}]}
    permit: {enabled: [{name: Coscheduling}]}
    preBind: {enabled: [{name: Coscheduling}]}
    postBind: {enabled: [{name: Coscheduling}]}
"""

GANG = "gang.scheduling.koordinator.sh/"
BIND_GROUP = "internal.scheduling.koordinator.sh/bind-gang-group-id"
BIND_COUNT = "internal.scheduling.koordinator.sh/bind-gang-member-count"


@pytest.fixture
def config(tmp_path):
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(CONFIG)
    return path


def gang_pod(name: str, gang: str, min_available: str, cpu: str = "1", **extra: str) -> dict:
    annotations = {GANG + "name": gang, GANG + "min-available": min_available,
                   **{GANG + k.replace("_", "-"): v for k, v in extra.items()}}
    return pod(name, NS, cpu=cpu, annotations=annotations)


def bound_to(api: Client, name: str) -> str:
    return (api.get("Pod", name, NS).get("spec") or {}).get("nodeName") or ""


def message(api: Client, name: str) -> str:
    cond = condition(api.get("Pod", name, NS))
    return cond["message"] if cond and cond.get("reason") == "Unschedulable" else ""


def plugin_of(sched: InProcessScheduler) -> Coscheduling:
    return sched.parts.frameworks["koord-scheduler"].plugins["Coscheduling"]


def test_gang_waits_for_room_for_all_members_then_binds_together(fresh_crd_server, scheduler_api, config):
    scheduler_api.create(node("n1", cpu="2"))
    names = ["g-0", "g-1", "g-2"]
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config)):
        for name in names:
            scheduler_api.create(gang_pod(name, "g", "3"))
        # Room for two: two members are placed and wait at Permit, the third does not fit, and the Strict
        # gang rejects the waiting ones; every member gets a FailedScheduling saying why.
        wait_until(lambda: all(message(scheduler_api, n) for n in names), message="every member unschedulable")
        wait_until(lambda: any(message(scheduler_api, n).startswith(
            'GangGroup "sched/g" gets rejected due to member Pod "sched/g-') for n in names),
            message="a waiting member rejected with the gang's message")
        wait_until(lambda: any(message(scheduler_api, n).startswith("0/1 nodes are available: 1 Insufficient cpu.")
                               for n in names), message="the member that did not fit")
        rejected = next(message(scheduler_api, n) for n in names if message(scheduler_api, n).startswith("GangGroup"))
        assert 'is unschedulable with reason "0/1 nodes are available: 1 Insufficient cpu.' in rejected
        assert rejected.endswith("alreadyWaitForBound: 2")
        assert not any(bound_to(scheduler_api, n) for n in names)
        # Room for the third: the whole gang binds, annotated as one gang group of 3 members.
        scheduler_api.create(node("n2", cpu="2"))
        wait_until(lambda: all(bound_to(scheduler_api, n) for n in names), timeout=30, message="all bound")
        for n in names:
            annotations = scheduler_api.get("Pod", n, NS)["metadata"]["annotations"]
            assert annotations["internal.scheduling.koordinator.sh/bind-gang-group-id"] == "sched/g"
            assert annotations["internal.scheduling.koordinator.sh/bind-gang-member-count"] == "3"


def test_room_freed_by_deleting_a_blocking_pod(fresh_crd_server, scheduler_api, config):
    scheduler_api.create(node("n1", cpu="3"))
    scheduler_api.create(pod("blocker", NS, cpu="1", spec={"nodeName": "n1"}))
    names = ["h-0", "h-1", "h-2"]
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config)) as sched:
        for name in names:
            scheduler_api.create(gang_pod(name, "h", "3"))
        wait_until(lambda: all(message(scheduler_api, n) for n in names), message="every member unschedulable")
        assert not any(bound_to(scheduler_api, n) for n in names)
        scheduler_api.delete("Pod", "blocker", NS)
        wait_until(lambda: all(bound_to(scheduler_api, n) for n in names), timeout=30, message="all bound")
        # The scheduler records a member as bound when its binding cycle ends, a moment after the API shows it.
        gang = wait_until(lambda: (g := plugin_of(sched).gang_of("sched/h")) is not None
                          and sorted(g.bound) == [f"sched/{n}" for n in names] and g, message="the gang's bound members")
        assert gang.group_info.once_resource_satisfied


def test_strict_gang_with_an_impossible_member_is_released_as_a_whole(fresh_crd_server, scheduler_api, config):
    scheduler_api.create(node("n1", cpu="4"))
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config)) as sched:
        scheduler_api.create(gang_pod("t-0", "t", "2", waiting_time="2s"))
        scheduler_api.create(gang_pod("t-1", "t", "2", cpu="64", waiting_time="2s"))
        # Released while waiting at Permit, or (when t-1 went first) failed at once with the round's message.
        wait_until(lambda: 'GangGroup "sched/t" gets rejected due to member Pod "sched/t-1" is unschedulable'
                   in message(scheduler_api, "t-0"), message="the placeable member released with the gang")
        wait_until(lambda: message(scheduler_api, "t-1").startswith("0/1 nodes are available: 1 Insufficient cpu."),
                   message="the impossible member's reason")
        assert not bound_to(scheduler_api, "t-0") and not bound_to(scheduler_api, "t-1")
        gang = plugin_of(sched).gang_of("sched/t")
        assert gang.wait_time == 2.0 and gang.mode == "Strict"
        fwk = sched.parts.frameworks["koord-scheduler"]
        wait_until(lambda: not fwk.waiting_pods and not gang.waiting, message="nothing left waiting")


def test_non_strict_gang_keeps_members_until_the_round_ends(fresh_crd_server, scheduler_api, config):
    scheduler_api.create(node("n1", cpu="1"))
    names = ["ns-0", "ns-1"]
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config)):
        for name in names:
            scheduler_api.create(gang_pod(name, "ns", "2", mode="NonStrict"))
        # NonStrict: the failing member does not reject its siblings; the waiting one is released when
        # no member is left to try in the round.
        wait_until(lambda: any(message(scheduler_api, n) == "all pending pods is already been attempted"
                               for n in names), message="the waiting member released at the end of the round")
        wait_until(lambda: any(message(scheduler_api, n).startswith("0/1 nodes are available: 1 Insufficient cpu.")
                               for n in names), message="the member that did not fit")
        assert not any(message(scheduler_api, n).startswith("GangGroup") for n in names)
        assert not any(bound_to(scheduler_api, n) for n in names)
        scheduler_api.create(node("n2", cpu="1"))
        wait_until(lambda: all(bound_to(scheduler_api, n) for n in names), timeout=30, message="both bound")


def test_pod_group_gang_and_its_status(fresh_crd_server, scheduler_api, config):
    scheduler_api.create(node("n1", cpu="4"))
    owner = [{"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u-1"}]
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config)) as sched:
        scheduler_api.create({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                              "metadata": {"name": "pg", "namespace": NS},
                              "spec": {"minMember": 2, "scheduleTimeoutSeconds": 30}})
        wait_until(lambda: (scheduler_api.get("PodGroup", "pg", NS).get("status") or {}).get("phase") == "Pending",
                   message="PodGroup Pending")
        names = ["pg-0", "pg-1"]
        for name in names:
            body = pod(name, NS, cpu="1", labels={"pod-group.scheduling.sigs.k8s.io": "pg"})
            body["metadata"]["ownerReferences"] = owner
            scheduler_api.create(body)
        wait_until(lambda: all(bound_to(scheduler_api, n) for n in names), message="both bound")
        gang = plugin_of(sched).gang_of("sched/pg")
        assert gang.gang_from == "GangFromPodGroupCrd" and gang.min_required == 2 and gang.wait_time == 30.0
        status = wait_until(lambda: (lambda s: s if s.get("phase") == "Scheduled" else None)(
            scheduler_api.get("PodGroup", "pg", NS).get("status") or {}), message="PodGroup Scheduled")
        assert status["scheduled"] == 2 and status["occupiedBy"] == "sched/train"
        for name in names:
            p = scheduler_api.get("Pod", name, NS)
            p["status"] = {"phase": "Running"}
            scheduler_api.update_status(p)
        status = wait_until(lambda: (lambda s: s if s.get("phase") == "Running" else None)(
            scheduler_api.get("PodGroup", "pg", NS).get("status") or {}), message="PodGroup Running")
        assert status["running"] == 2


def test_member_of_a_missing_pod_group_waits(fresh_crd_server, scheduler_api, config):
    scheduler_api.create(node("n1", cpu="4"))
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config)) as sched:
        scheduler_api.create(pod("orphan", NS, labels={"pod-group.scheduling.sigs.k8s.io": "nope"}))
        plugin = plugin_of(sched)
        wait_until(lambda: plugin.gang_of("sched/nope") is not None, message="gang created from the pod")
        wait_until(lambda: sched.parts.queue.pending_pods()["gated"] == 1, message="pod gated")
        status = plugin.pre_enqueue(PodInfo(scheduler_api.get("Pod", "orphan", NS)))
        assert status.message() == "gang has not init, gangName: sched/nope, podName: sched/orphan"


def test_bad_min_available_leaves_the_gang_uninitialised(fresh_crd_server, scheduler_api, config):
    scheduler_api.create(node("n1", cpu="4"))
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config)) as sched:
        scheduler_api.create(gang_pod("bad-0", "bad", "two", cpu="100m"))
        scheduler_api.create(gang_pod("bad-1", "bad", "two", cpu="100m"))
        wait_until(lambda: sched.parts.queue.pending_pods()["gated"] == 2, message="both gated")
        plugin = plugin_of(sched)
        gang = plugin.gang_of("sched/bad")
        assert gang is not None and not gang.has_init
        status = plugin.pre_enqueue(PodInfo(scheduler_api.get("Pod", "bad-0", NS)))
        assert status.message() == "gang has not init, gangName: sched/bad, podName: sched/bad-0"
        assert not bound_to(scheduler_api, "bad-0")
        # A plain pod is not held back by the broken gang.
        scheduler_api.create(pod("plain", NS, cpu="100m"))
        wait_until(lambda: bound_to(scheduler_api, "plain"), message="plain pod bound")



class FailOneBinding(ReservePlugin, PreBindPlugin):
    """Fails the first binding of pod ``g-0`` and holds its siblings' PreBind until that failure was undone.

    Listed before Coscheduling: its PreBind runs before Coscheduling's, its Unreserve after Coscheduling's
    (Unreserve runs in reverse), so the siblings write their annotations only after g-0's Unreserve rejected
    the gang group.
    """

    name = "FailOneBinding"

    def __init__(self) -> None:
        self.undone = threading.Event()
        self.failed = False

    def reserve(self, state, pod, node_name):
        return None

    def unreserve(self, state, pod, node_name):
        if pod.name == "g-0":
            self.undone.set()

    def pre_bind(self, state, pod, node_name, modified):
        if pod.name == "g-0" and not self.failed:
            self.failed = True
            return Status.error("injected binding failure")
        if pod.name != "g-0" and not self.undone.wait(30):
            return Status.error("g-0's binding failure was never undone")
        return None


def test_a_members_failed_binding_leaves_its_siblings_annotated(fresh_crd_server, scheduler_api, tmp_path):
    gate = FailOneBinding()
    registry = in_tree_registry().merge(Registry({FailOneBinding.name: lambda args, handle: gate}))
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.replace("reserve: {enabled: [{name: Coscheduling}]}",
                                     "reserve: {enabled: [{name: FailOneBinding}, {name: Coscheduling}]}")
                      .replace("preBind: {enabled: [{name: Coscheduling}]}",
                               "preBind: {enabled: [{name: FailOneBinding}, {name: Coscheduling}]}"))
    scheduler_api.create(node("n1", cpu="4"))
    names = ["g-0", "g-1", "g-2"]
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config), registry=registry):
        for name in names:
            scheduler_api.create(gang_pod(name, "g", "3"))
        # g-0 is retried after its failure and bound with the gang already placed.
        wait_until(lambda: all(bound_to(scheduler_api, n) for n in names), timeout=30, message="all bound")
        assert gate.failed
        for n in names:
            annotations = scheduler_api.get("Pod", n, NS)["metadata"].get("annotations") or {}
            assert annotations.get(BIND_GROUP) == "sched/g", (n, annotations)
            assert annotations.get(BIND_COUNT) == "3", (n, annotations)


# -- without the server ------------------------------------------------------------------------------------

def _pod(pod_name: str, uid: str, **annotations: str) -> dict:
    return {"metadata": {"name": pod_name, "namespace": NS, "uid": uid,
                         "annotations": {GANG + k.replace("_", "-"): v for k, v in annotations.items()}},
            "spec": {"schedulerName": "koord-scheduler"}}


class _Framework:
    def __init__(self) -> None:
        self.waiting_pods: dict[str, WaitingPod] = {}


class _Handle:
    scheduler_name = "koord-scheduler"
    informers = None
    client = None

    def __init__(self) -> None:
        self.framework = _Framework()


def test_permit_waits_the_gangs_time_and_a_timeout_releases_the_whole_gang():
    handle = _Handle()
    plugin = Coscheduling(parse_args({}), handle)
    pods = [_pod(f"t-{i}", f"u{i}", name="t", min_available="3", waiting_time="2s") for i in range(3)]
    for p in pods:
        plugin.on_pod_add(p)
    infos = [PodInfo(p).with_node("n1") for p in pods]
    for info in infos[:2]:
        status, timeout = plugin.permit(None, info, "n1")
        assert status.code == WAIT and timeout == 2.0
    # The framework parks them; the first one's (shortened) wait runs out.
    handle.framework.waiting_pods = {"u0": WaitingPod(infos[0], {"Coscheduling": 0.01}),
                                     "u1": WaitingPod(infos[1], {"Coscheduling": 60})}
    timed_out = handle.framework.waiting_pods["u0"].wait()
    assert timed_out.message() == "rejected due to timeout after waiting 0.01s at plugin Coscheduling"
    plugin.unreserve(None, infos[0], "n1")  # as the binding cycle does after a Permit failure
    status = handle.framework.waiting_pods["u1"].wait()
    assert status.message() == 'Gang "sched/t" gets rejected due to Pod "t-0" in Unreserve'
    assert sorted(plugin.gang_of("sched/t").pending) == ["sched/t-0", "sched/t-2"]


def test_permit_allows_the_group_once_enough_members_wait():
    handle = _Handle()
    plugin = Coscheduling(parse_args({}), handle)
    pods = [_pod(f"a-{i}", f"u{i}", name="a", min_available="2") for i in range(2)]
    for p in pods:
        plugin.on_pod_add(p)
    infos = [PodInfo(p).with_node("n1") for p in pods]
    status, timeout = plugin.permit(None, infos[0], "n1")
    assert status.code == WAIT and timeout == 600.0
    handle.framework.waiting_pods = {"u0": WaitingPod(infos[0], {"Coscheduling": timeout})}
    assert plugin.permit(None, infos[1], "n1") == (None, 0.0)
    assert handle.framework.waiting_pods["u0"].wait() is None
    modified = {"metadata": {"annotations": {}}}
    plugin.pre_bind(None, infos[1], "n1", modified)
    assert modified["metadata"]["annotations"]["scheduling.koordinator.sh/bind-gang-member-count"] == "2"


def test_pre_enqueue_lets_one_representative_in():
    plugin = Coscheduling(parse_args({}), _Handle())
    pods = [_pod(f"r-{i}", f"u{i}", name="r", min_available="3") for i in range(3)]
    plugin.on_pod_add(pods[0])
    assert plugin.pre_enqueue(PodInfo(pods[0])).message() == (
        "gangGroup [sched/r] basic check: memberGangs [sched/r] child pod not collect enough, current gang: "
        "sched/r, podName: sched/r-0")
    for p in pods[1:]:
        plugin.on_pod_add(p)
    assert plugin.pre_enqueue(PodInfo(pods[1])) is None
    assert plugin.pre_enqueue(PodInfo(pods[0])).message() == (
        "representative pod sched/r-1 of gangGroupID sched/r already exists")
    other = _pod("x", "ux", name="missing-gang-is-created", min_available="1")
    del other["metadata"]["annotations"][GANG + "name"]
    assert plugin.pre_enqueue(PodInfo(other)) is None  # not a gang pod


@pytest.mark.parametrize("args, error", [
    ({"defaultTimeout": "-1s"}, "defaultTimeout: Invalid value"),
    ({"defaultTimeout": "soon"}, "defaultTimeout: Invalid value"),
    ({"controllerWorkers": 0}, "controllerWorkers: Invalid value: 0"),
    ({"defaultMatchPolicy": "sometimes"}, "defaultMatchPolicy: Unsupported value: 'sometimes'"),
    ({"enablePreemption": True}, "enablePreemption: Unsupported value: true"),
])
def test_args_validation_names_the_field(args, error):
    with pytest.raises(ValueError, match=error):
        parse_args(args)


def test_args_defaults():
    args = parse_args({"defaultTimeout": "30s"})
    assert (args.default_timeout, args.controller_workers, args.default_match_policy) == (30.0, 1, "once-satisfied")
    assert parse_args(None).default_timeout == 600.0


def test_pod_group_phases():
    pg = {"spec": {"minMember": 2}, "status": {}}
    owned = {"metadata": {"namespace": NS, "ownerReferences": [{"name": "job"}]}, "status": {"phase": "Pending"}}
    assert next_status(pg, [], 0)["phase"] == "Pending"
    pg["status"] = {"phase": "Pending"}
    assert next_status(pg, [owned], 0) == {"phase": "Pending"}
    status = next_status(pg, [owned, owned], 0)
    assert status == {"phase": "PreScheduling", "occupiedBy": "sched/job"}
    pg["status"] = status
    status = next_status(pg, [owned, owned], 1)
    assert status["phase"] == "Scheduling" and status["scheduleStartTime"] and status["scheduled"] == 1
    pg["status"] = status
    running = {**owned, "status": {"phase": "Running"}}
    assert next_status(pg, [running, running], 2)["phase"] == "Running"
    done = {**owned, "status": {"phase": "Succeeded"}}
    assert next_status(pg, [done, done], 2)["phase"] == "Finished"
    failed = {**owned, "status": {"phase": "Failed"}}
    assert next_status(pg, [failed, running], 2)["phase"] == "Failed"
    assert next_status(pg, [], 0)["phase"] == "Pending"


def _allowed_trio(handle: _Handle, plugin: Coscheduling) -> list[PodInfo]:
    """Three members of gang "b" (min 3): two wait at Permit, the third's Permit allows the group."""
    pods = [_pod(f"b-{i}", f"u{i}", name="b", min_available="3") for i in range(3)]
    for p in pods:
        plugin.on_pod_add(p)
    infos = [PodInfo(p).with_node("n1") for p in pods]
    assert plugin.before_pre_filter(None, infos[0]) == (None, None)  # opens the group's round
    for info in infos[:2]:
        status, timeout = plugin.permit(None, info, "n1")
        assert status.code == WAIT
        handle.framework.waiting_pods[info.uid] = WaitingPod(info, {"Coscheduling": timeout})
    assert plugin.permit(None, infos[2], "n1") == (None, 0.0)
    assert all(handle.framework.waiting_pods[i.uid].wait() is None for i in infos[:2])
    return infos


def _bind_annotations(plugin: Coscheduling, info: PodInfo) -> dict:
    modified = {"metadata": {"annotations": {}}}
    assert plugin.pre_bind(None, info, "n1", modified) is None
    return modified["metadata"]["annotations"]


def test_members_allowed_together_keep_their_annotation_whatever_the_group_does_meanwhile():
    # Allowed members bind asynchronously: before their PreBind runs, the scheduling thread may start a new
    # round of the group (a scale-up member), fail that member (PostFilter rejects the group) and a sibling's
    # binding may fail (Unreserve rejects the group). None of it undoes what was allowed together.
    handle = _Handle()
    plugin = Coscheduling(parse_args({}), handle)
    infos = _allowed_trio(handle, plugin)
    handle.framework.waiting_pods.clear()  # the framework drops allowed pods from its waiting map
    late = PodInfo(_pod("b-3", "u3", name="b", min_available="3"))
    plugin.on_pod_add(late.pod)
    assert plugin.before_pre_filter(None, late) == (None, None)  # a new round of the same group
    plugin.after_post_filter(None, late, None, None)  # the late member fits nowhere: the Strict group is rejected
    plugin.unreserve(None, infos[2], "n1")  # b-2's binding failed
    for info in infos[:2]:
        annotations = _bind_annotations(plugin, info)
        assert (annotations[BIND_GROUP], annotations[BIND_COUNT]) == ("sched/b", "3"), info.key
        assert annotations["scheduling.koordinator.sh/bind-gang-group-id"] == "sched/b"
        plugin.post_bind(None, info, "n1")
    # b-2 is retried alone once the gang is satisfied: it still belongs to the group allowed together.
    assert plugin.permit(None, infos[2], "n1") == (None, 0.0)
    assert _bind_annotations(plugin, infos[2])[BIND_COUNT] == "3"
    # The late member was never allowed with the others: it binds as a plain pod, without the annotations.
    assert plugin.permit(None, late.with_node("n1"), "n1") == (None, 0.0)
    stale = {"metadata": {"annotations": {BIND_GROUP: "x", BIND_COUNT: "9"}}}
    plugin.pre_bind(None, late, "n1", stale)
    assert stale["metadata"]["annotations"] == {}


def test_a_member_allowed_alone_gets_no_gang_annotation():
    handle = _Handle()
    plugin = Coscheduling(parse_args({}), handle)
    solo = _pod("s-0", "s0", name="s", min_available="1")
    plugin.on_pod_add(solo)
    info = PodInfo(solo).with_node("n1")
    assert plugin.permit(None, info, "n1") == (None, 0.0)
    assert _bind_annotations(plugin, info) == {}
