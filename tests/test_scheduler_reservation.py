"""Reservation: owner matching and affinity parsing (unit), and the running scheduler with real Reservations."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from koordinator.apis import reservation as rv
from koordinator.runtime.client import Client
from koordinator.runtime.errors import ApiError, NotFound
from koordinator_roles.scheduler.plugins.reservation.args import parse_args
from tests.scheduler_harness import NS, InProcessScheduler, condition, node, pod
from tests.waiting import wait_until

# -- unit: owners, affinity, reserve pods, args ---------------------------------------------------------------


def _pod(name="p", labels=None, annotations=None, owner_refs=None, uid="u1"):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "uid": uid, "labels": labels or {},
                         "annotations": annotations or {}, "ownerReferences": owner_refs or []},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}}


def test_owner_object_controller_and_label_selector():
    owners = rv.OwnerMatcher.parse([
        {"object": {"name": "p", "namespace": NS}},
        {"controller": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid",
                        "namespace": NS}, "labelSelector": {"matchLabels": {"app": "web"}}},
    ])
    assert owners.matches(_pod("p"))
    assert not owners.matches(_pod("q"))
    rs_ref = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}]
    # controller and labelSelector of one entry are ANDed
    assert owners.matches(_pod("q", labels={"app": "web"}, owner_refs=rs_ref))
    assert not owners.matches(_pod("q", labels={"app": "db"}, owner_refs=rs_ref))
    assert not owners.matches(_pod("q", labels={"app": "web"}))
    # object fields are each optional
    assert rv.OwnerMatcher.parse([{"object": {"uid": "u1"}}]).matches(_pod("anything"))
    assert rv.OwnerMatcher.parse([{}]).matches(_pod("anything"))


def test_bad_owner_names_the_field():
    with pytest.raises(rv.ReservationError, match=r"spec\.owners\[1\]\.labelSelector"):
        rv.OwnerMatcher.parse([{"object": {"name": "p"}},
                               {"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}])
    with pytest.raises(rv.ReservationError, match=r"spec\.owners: Required value"):
        rv.validate({"spec": {"template": {"spec": {}}, "owners": [], "ttl": "1h"}})


def test_reservation_affinity_parsing_and_matching():
    assert rv.parse_reservation_affinity(_pod()) is None
    aff = rv.parse_reservation_affinity(_pod(annotations={rv.ANNOTATION_RESERVATION_AFFINITY: json.dumps(
        {"reservationSelector": {"team": "a"}, "tolerations": [{"key": "k", "operator": "Exists"}]})}))
    r = {"metadata": {"name": "r", "labels": {"team": "a"}},
         "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}}
    assert aff.matches(r)
    assert not aff.matches({**r, "metadata": {"name": "r", "labels": {"team": "b"}}})
    assert not rv.ReservationAffinity().matches(r)  # the taint is not tolerated without the affinity
    assert rv.ReservationAffinity(name="r").matches(r)
    terms = rv.parse_reservation_affinity(_pod(annotations={rv.ANNOTATION_RESERVATION_AFFINITY: json.dumps(
        {"requiredDuringSchedulingIgnoredDuringExecution": {"reservationSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]}})}))
    assert terms.matches({"metadata": {"name": "r"}, "spec": {}}, node_labels={"zone": "z1"})
    assert not terms.matches({"metadata": {"name": "r"}, "spec": {}}, node_labels={"zone": "z2"})


@pytest.mark.parametrize("raw, detail", [("{not json", "not valid JSON"), ("[1]", "must be a JSON object"),
                                         ('{"name": 3}', "name must be a string"),
                                         ('{"reservationSelector": {"a": 1}}', "reservationSelector")])
def test_malformed_affinity_names_annotation_and_value(raw, detail):
    with pytest.raises(rv.ReservationError) as err:
        rv.parse_reservation_affinity(_pod(annotations={rv.ANNOTATION_RESERVATION_AFFINITY: raw}))
    assert f"invalid annotation {rv.ANNOTATION_RESERVATION_AFFINITY}={raw!r}" in str(err.value)
    assert detail in str(err.value)


def test_exact_match():
    names = rv.parse_exact_match(_pod(annotations={rv.ANNOTATION_EXACT_MATCH_RESERVATION:
                                                    '{"resourceNames": ["cpu", "memory"]}'}))
    assert rv.exact_match_ok(names, {"cpu": 1000}, {"cpu": 1000})
    assert not rv.exact_match_ok(names, {"cpu": 1000}, {"cpu": 2000})
    assert not rv.exact_match_ok(names, {"cpu": 1000, "memory": 1}, {"cpu": 1000})


def test_reserve_pod_from_a_reservation():
    r = {"metadata": {"name": "r1", "uid": "uid-1", "labels": {"l": "1"}},
         "spec": {"template": {"metadata": {"namespace": NS},
                               "spec": {"nodeName": "n1", "schedulerName": "koord-scheduler",
                                        "containers": [{"name": "c", "resources": {"requests": {"cpu": "2"}}}]}},
                  "owners": [{"object": {"name": "p"}}], "ttl": "1h"}}
    p = rv.reserve_pod(r)
    assert p["metadata"]["name"] == "uid-1" and p["metadata"]["namespace"] == NS
    assert p["metadata"]["annotations"][rv.ANNOTATION_RESERVE_POD] == "true"
    assert p["metadata"]["annotations"][rv.ANNOTATION_RESERVATION_NAME] == "r1"
    assert p["metadata"]["annotations"][rv.ANNOTATION_RESERVATION_NODE] == "n1"
    assert "nodeName" not in p["spec"] and p["spec"]["priority"] == rv.MAX_INT32
    assert p["metadata"]["labels"] == {"l": "1"}
    # labelled sub-priority, default namespace and scheduler
    r2 = {"metadata": {"name": "r2", "uid": "uid-2", "labels": {"koordinator.sh/priority": "7"}},
          "spec": {"template": {"spec": {"containers": []}}}}
    p2 = rv.reserve_pod(r2)
    assert p2["spec"]["priority"] == 7 and p2["metadata"]["namespace"] == "default"
    assert p2["spec"]["schedulerName"] == "default-scheduler"
    # Available: on its node, requesting what is left
    avail = {**r, "status": {"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "2"}}}
    p3 = rv.reserve_pod(avail, {"cpu": 1500})
    assert p3["spec"]["nodeName"] == "n1"
    assert p3["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "1500m"}
    assert rv.reserve_pod({**avail, "status": {"phase": "Failed"}})["status"]["phase"] == "Failed"


def test_expiry_time():
    r = {"metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {}}
    assert rv.expiry_time(r) == rv.expiry_time({**r, "spec": {"ttl": "24h"}})
    assert rv.expiry_time({**r, "spec": {"ttl": "0s"}}) is None
    assert rv.expiry_time({**r, "spec": {"ttl": "1h", "expires": "2026-01-01T00:00:05Z"}}) == \
        rv.expiry_time({**r, "spec": {"ttl": "5s"}})
    with pytest.raises(rv.ReservationError, match="spec.ttl"):
        rv.expiry_time({**r, "spec": {"ttl": "soon"}})


def test_args_defaults_and_validation():
    args = parse_args({})
    assert (args.gc_duration_seconds, args.gc_interval_seconds, args.resync_interval_seconds) == (86400, 60, 60)
    assert parse_args({"ignoredResourceGroups": ["example.com"]}).ignores("example.com/gpu")
    with pytest.raises(ValueError, match=r"ignoredResources\[0\]"):
        parse_args({"ignoredResources": ["cpu"]})
    with pytest.raises(ValueError, match=r"ignoredResourceGroups\[0\]"):
        parse_args({"ignoredResourceGroups": ["kubernetes.io"]})
    with pytest.raises(ValueError, match="gcIntervalSeconds"):
        parse_args({"gcIntervalSeconds": 0})
    with pytest.raises(ValueError, match="enablePreemption"):
        parse_args({"enablePreemption": "yes"})


# -- the running scheduler ---------------------------------------------------------------------------------------

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {enabled: [{name: Reservation}]}
    filter: {enabled: [{name: Reservation}]}
    preScore: {enabled: [{name: Reservation}]}
    score: {enabled: [{name: Reservation, weight: 5000}]}
    reserve: {enabled: [{name: Reservation}]}
    preBind: {enabled: [{name: Reservation}]}
    bind: {disabled: [{name: "*"}], enabled: [{name: Reservation}, {name: DefaultBinder}]}
  pluginConfig:
  - name: Reservation
    args: {gcIntervalSeconds: 1, resyncIntervalSeconds: 1}
"""


def start(server, tmp_path, args: str = "{gcIntervalSeconds: 1, resyncIntervalSeconds: 1}") -> InProcessScheduler:
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(CONFIG.replace("{gcIntervalSeconds: 1, resyncIntervalSeconds: 1}", args))
    return InProcessScheduler(server.kubeconfig, "--config", str(path))


def reservation(name: str, cpu: str, *, owners: list | None = None, node_name: str = "", ttl: str | None = "1h",
                expires: str | None = None, allocate_once: bool | None = None, labels: dict | None = None) -> dict:
    spec: dict = {"schedulerName": "koord-scheduler",
                  "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    body: dict = {"apiVersion": rv.GROUP_VERSION, "kind": rv.KIND,
                  "metadata": {"name": name, "labels": labels or {}},
                  "spec": {"template": {"metadata": {"namespace": NS}, "spec": spec},
                           "owners": owners if owners is not None else [{"object": {"name": "owner",
                                                                                    "namespace": NS}}]}}
    if ttl is not None:
        body["spec"]["ttl"] = ttl
    if expires is not None:
        body["spec"]["expires"] = expires
    if allocate_once is not None:
        body["spec"]["allocateOnce"] = allocate_once
    return body


def get_r(api: Client, name: str) -> dict:
    try:
        return api.get(rv.KIND, name)
    except NotFound:
        return {}


def phase_of(api: Client, name: str) -> str:
    return (get_r(api, name).get("status") or {}).get("phase") or ""


def bound_to(api: Client, name: str) -> str:
    return (api.get("Pod", name, NS).get("spec") or {}).get("nodeName") or ""


def unschedulable_message(api: Client, name: str) -> str | None:
    cond = condition(api.get("Pod", name, NS))
    return cond["message"] if cond and cond.get("reason") == "Unschedulable" else None


def test_reservation_without_owners_is_rejected_by_the_api_server(scheduler_api):
    with pytest.raises(ApiError) as err:
        scheduler_api.create(reservation("no-owners", "1", owners=[]))
    assert "spec.owners" in str(err.value)


def test_owner_consumes_reservation_others_cannot(fresh_crd_server, scheduler_api, tmp_path):
    """One 4-cpu node; a 3-cpu reservation for pod "owner": only 1 cpu stays free for anyone else."""
    api = scheduler_api
    api.create(node("n1", cpu="4"))
    with start(fresh_crd_server, tmp_path):
        api.create(reservation("r1", "3"))
        wait_until(lambda: phase_of(api, "r1") == "Available", message="r1 Available")
        r1 = get_r(api, "r1")
        assert r1["status"]["nodeName"] == "n1"
        assert r1["status"]["allocatable"] == {"cpu": "3"}
        conds = {c["type"]: (c["status"], c["reason"]) for c in r1["status"]["conditions"]}
        assert conds == {"Scheduled": ("True", "Scheduled"), "Ready": ("True", "Available")}
        # A non-owner pod cannot use the reserved room.
        api.create(pod("other", NS, cpu="2", memory=None))
        message = wait_until(lambda: unschedulable_message(api, "other"), message="other unschedulable")
        assert message.startswith("0/1 nodes are available: 1 Insufficient cpu."), message
        # The owner lands in the reservation (3 cpu: more than the node's free 1).
        api.create(pod("owner", NS, cpu="3", memory=None))
        wait_until(lambda: bound_to(api, "owner") == "n1", message="owner bound")
        allocated = json.loads(api.get("Pod", "owner", NS)["metadata"]["annotations"][
            rv.ANNOTATION_RESERVATION_ALLOCATED])
        assert allocated == {"name": "r1", "uid": r1["metadata"]["uid"]}
        # allocateOnce: consumed, the controller marks it Succeeded with its owner.
        wait_until(lambda: phase_of(api, "r1") == "Succeeded", message="r1 Succeeded")
        status = get_r(api, "r1")["status"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "Succeeded")
        assert [o["name"] for o in status.get("currentOwners") or []] == ["owner"]
        assert bound_to(api, "other") == ""
        # A reservation that fits nowhere stays Pending with the failure on its Scheduled condition.
        api.create(reservation("huge", "64"))

        def scheduled_false():
            c = rv.condition(get_r(api, "huge"), "Scheduled")
            return c if c and c["status"] == "False" else None

        cond = wait_until(scheduled_false, message="huge Scheduled=False")
        assert cond["reason"] == "Unschedulable"
        assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu."), cond
        assert phase_of(api, "huge") in ("", "Pending")


def test_expired_reservation_frees_its_room(fresh_crd_server, scheduler_api, tmp_path):
    api = scheduler_api
    api.create(node("n1", cpu="4"))
    expires = (datetime.now(timezone.utc) + timedelta(seconds=6)).strftime("%Y-%m-%dT%H:%M:%SZ")
    with start(fresh_crd_server, tmp_path):
        api.create(reservation("r-exp", "3", ttl=None, expires=expires))
        wait_until(lambda: phase_of(api, "r-exp") == "Available", message="r-exp Available")
        api.create(pod("other", NS, cpu="2", memory=None))
        # Rejected while the reservation holds the room, scheduled once it expired.
        wait_until(lambda: phase_of(api, "r-exp") == "Failed", timeout=30, message="r-exp Failed")
        ready = rv.condition(get_r(api, "r-exp"), "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "Expired")
        wait_until(lambda: bound_to(api, "other") == "n1", message="other bound after expiry")
        # A reservation whose node goes away fails too.
        api.create(node("n2", cpu="4"))
        api.create(reservation("r-gone", "1", node_name="n2"))
        wait_until(lambda: phase_of(api, "r-gone") == "Available", message="r-gone Available")
        api.delete("Node", "n2")
        wait_until(lambda: phase_of(api, "r-gone") == "Failed", message="r-gone Failed")
        assert rv.condition(get_r(api, "r-gone"), "Ready")["message"] == "node n2 not found"


def test_finished_reservations_are_garbage_collected(fresh_crd_server, scheduler_api, tmp_path):
    """gcDurationSeconds 0: a Reservation is deleted as soon as it is Failed (here: its 1s ttl ran out)."""
    api = scheduler_api
    api.create(node("n1", cpu="4"))
    with start(fresh_crd_server, tmp_path, "{gcIntervalSeconds: 1, gcDurationSeconds: 0}"):
        api.create(reservation("short", "1", ttl="1s"))
        wait_until(lambda: not get_r(api, "short"), message="short deleted")
        # A live one stays.
        api.create(reservation("long", "1", ttl="1h"))
        wait_until(lambda: phase_of(api, "long") == "Available", message="long Available")
        assert get_r(api, "long")


def test_affinity_names_a_reservation_and_shared_reservations(fresh_crd_server, scheduler_api, tmp_path):
    """Two 4-cpu nodes with a 3-cpu reservation each (pods labelled app=web own both, allocateOnce false)."""
    api = scheduler_api
    for name in ("n1", "n2"):
        api.create(node(name, cpu="4"))
    web = [{"labelSelector": {"matchLabels": {"app": "web"}}}]
    with start(fresh_crd_server, tmp_path):
        api.create(reservation("ra", "3", owners=web, node_name="n1", allocate_once=False))
        api.create(reservation("rb", "3", owners=web, node_name="n2", allocate_once=False))
        for name, where in (("ra", "n1"), ("rb", "n2")):
            wait_until(lambda name=name: phase_of(api, name) == "Available", message=f"{name} Available")
            assert get_r(api, name)["status"]["nodeName"] == where
        affinity = {rv.ANNOTATION_RESERVATION_AFFINITY: json.dumps({"name": "rb"})}
        api.create(pod("w1", NS, cpu="1", memory=None, labels={"app": "web"}, annotations=affinity))
        wait_until(lambda: bound_to(api, "w1") == "n2", message="w1 on rb's node")
        allocated = json.loads(api.get("Pod", "w1", NS)["metadata"]["annotations"][
            rv.ANNOTATION_RESERVATION_ALLOCATED])
        assert allocated["name"] == "rb"
        wait_until(lambda: (get_r(api, "rb").get("status") or {}).get("allocated") == {"cpu": "1"},
                   message="rb allocated")
        assert phase_of(api, "rb") == "Available"  # allocateOnce false: still open for owners
        # n2: rb (3: w1's 1 inside) leaves 1 cpu free; the owner's cpu is not counted twice.
        pin = {"nodeSelector": {"kubernetes.io/hostname": "n2"}}
        api.create(pod("x1", NS, cpu="1", memory=None, spec=pin))
        wait_until(lambda: bound_to(api, "x1") == "n2", message="x1 fits beside the reservation")
        api.create(pod("x2", NS, cpu="1", memory=None, spec=pin))
        wait_until(lambda: unschedulable_message(api, "x2"), message="x2 unschedulable")
        # Affinity to a reservation that does not exist, and a malformed annotation.
        missing = {rv.ANNOTATION_RESERVATION_AFFINITY: json.dumps({"name": "nope"})}
        api.create(pod("w2", NS, cpu="1", memory=None, labels={"app": "web"}, annotations=missing))
        message = wait_until(lambda: unschedulable_message(api, "w2"), message="w2 unschedulable")
        assert message.startswith("0/2 nodes are available: node(s) no reservations match reservation affinity."), \
            message
        bad = {rv.ANNOTATION_RESERVATION_AFFINITY: "{broken"}
        api.create(pod("w3", NS, cpu="1", memory=None, labels={"app": "web"}, annotations=bad))
        message = wait_until(lambda: unschedulable_message(api, "w3"), message="w3 unschedulable")
        assert f"invalid annotation {rv.ANNOTATION_RESERVATION_AFFINITY}='{{broken'" in message, message


# -- unit: the plugin in a real Framework over a Snapshot -----------------------------------------------------

def _profile(names: list[str], weights: dict[str, int] | None = None):
    from types import SimpleNamespace

    points = {"preFilter": names, "filter": names, "preScore": names, "score": names, "reserve": names,
              "preBind": names, "bind": names}

    def plugins_at(point, ok):
        return [SimpleNamespace(name=n, weight=(weights or {}).get(n, 1)) for n in points.get(point, [])
                if ok(n, point)]

    return SimpleNamespace(scheduler_name="koord-scheduler", percentage_of_nodes_to_score=None, index=0,
                           all_plugin_names=lambda: list(names), plugin_args={}, plugin_config_index={},
                           plugins_at=plugins_at)


def _available(name: str, node_name: str, cpu: str, *, policy: str = "", owners=None, labels=None,
               allocate_once: bool = True) -> dict:
    r = reservation(name, cpu, owners=owners or [{"object": {"name": "owner"}}], labels=labels,
                    allocate_once=allocate_once)
    r["metadata"]["uid"] = f"uid-{name}"
    if policy:
        r["spec"]["allocatePolicy"] = policy
    r["status"] = {"phase": "Available", "nodeName": node_name, "allocatable": {"cpu": cpu}}
    return r


class _Cluster:
    """Nodes (8 cpu) with Available reservations on them, a Framework with NodeResourcesFit + Reservation."""

    def __init__(self, reservations: list[dict], nodes=("n1",)) -> None:
        from koordinator_roles.scheduler.framework.handle import PluginHandle
        from koordinator_roles.scheduler.framework.runtime import Framework
        from koordinator_roles.scheduler.framework.snapshot import Snapshot
        from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
        from koordinator_roles.scheduler.plugins import in_tree_registry

        infos = {n: NodeInfo(node(n, cpu="8")) for n in nodes}
        for r in reservations:
            infos[r["status"]["nodeName"]].add_pod(PodInfo(rv.reserve_pod(r, rv.allocatable(r))))
        self.snapshot = Snapshot(list(infos.values()))
        handle = PluginHandle(snapshot_source=lambda: self.snapshot)
        self.fwk = Framework(_profile(["NodeResourcesFit", "Reservation"], {"Reservation": 5000}),
                             in_tree_registry(), handle)
        self.plugin = self.fwk.plugins["Reservation"]
        for r in reservations:
            self.plugin.cache.add_reservation(r)

    def feasible(self, p: dict):
        from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
        from koordinator_roles.scheduler.framework.status import CycleState
        from koordinator_roles.scheduler.framework.types import PodInfo

        state, pi, diagnosis = CycleState(), PodInfo(p), Diagnosis(self.snapshot)
        pi, result, status = self.fwk.run_pre_filter(state, pi, self.snapshot)
        if status is not None:
            return state, pi, [], status.message()
        rows = self.fwk.find_nodes_that_fit(state, pi, self.snapshot, result, diagnosis)
        return state, pi, rows, diagnosis.fit_error_message(len(self.snapshot))


def _owner(cpu: str, annotations=None, labels=None) -> dict:
    p = pod("owner", NS, cpu=cpu, memory=None, annotations=annotations, labels=labels)
    p["metadata"]["uid"] = "owner-uid"
    return p


def test_plain_pods_skip_the_plugin_when_no_reservation_matches():
    cluster = _Cluster([])
    state, _, rows, _ = cluster.feasible(pod("plain", NS, cpu="1", memory=None))
    assert "Reservation" in state.skip_filter_plugins and len(rows) == 1
    # A reservation the pod does not own: no restore, the reserved 6 cpu stay taken.
    cluster = _Cluster([_available("r", "n1", "6")])
    state, _, rows, message = cluster.feasible(pod("plain", NS, cpu="3", memory=None))
    assert "Reservation" in state.skip_filter_plugins and len(rows) == 0
    assert message == "0/1 nodes are available: 1 Insufficient cpu."


def test_aligned_owner_uses_reservation_and_free_room_and_is_assigned():
    cluster = _Cluster([_available("r", "n1", "4")])
    state, pi, rows, _ = cluster.feasible(_owner("6"))  # 4 reserved + 4 free
    assert len(rows) == 1
    assert cluster.fwk.run_reservation_nominate(state, pi, "n1") is None
    assert cluster.fwk.run_reserve(state, pi, "n1") is None
    info = cluster.plugin.cache.get("uid-r")
    assert info.allocated == {"cpu": 6000} and not info.matchable  # allocateOnce: consumed
    modified = {"metadata": {"annotations": {}, "labels": {}}}
    assert cluster.plugin.pre_bind(state, pi, "n1", modified) is None
    assert json.loads(modified["metadata"]["annotations"][rv.ANNOTATION_RESERVATION_ALLOCATED]) == \
        {"name": "r", "uid": "uid-r"}
    cluster.fwk.run_unreserve(state, pi, "n1")
    assert cluster.plugin.cache.get("uid-r").allocated == {}
    # Too big even with the reservation's room.
    _, _, rows, message = cluster.feasible(_owner("9"))
    assert len(rows) == 0 and "Insufficient cpu" in message


def test_restricted_reservation_limits_the_pod_to_its_room():
    cluster = _Cluster([_available("r", "n1", "4", policy="Restricted")])
    _, _, rows, _ = cluster.feasible(_owner("3"))
    assert len(rows) == 1
    # 6 > the reservation's 4; the node alone (4 free) cannot take it either.
    _, _, rows, message = cluster.feasible(_owner("6"))
    assert len(rows) == 0 and message == "0/1 nodes are available: 1 Insufficient cpu.", message
    # Named by affinity: the detailed reservation reason.
    named = {rv.ANNOTATION_RESERVATION_AFFINITY: json.dumps({"name": "r"})}
    _, _, rows, message = cluster.feasible(_owner("6", annotations=named))
    assert len(rows) == 0
    assert message == ("0/1 nodes are available: 1 Reservation(s) Insufficient cpu, requested: 6000, used: 0, "
                       "capacity: 4000."), message


def test_score_prefers_the_lowest_reservation_order_and_normalizes():
    cluster = _Cluster([_available("ra", "n1", "2", labels={rv.LABEL_RESERVATION_ORDER: "2"}),
                        _available("rb", "n2", "2", labels={rv.LABEL_RESERVATION_ORDER: "1"})],
                       nodes=("n1", "n2", "n3"))
    state, pi, rows, _ = cluster.feasible(_owner("1"))
    assert len(rows) == 3
    got_rows, totals = cluster.fwk.prioritize(state, pi, cluster.snapshot, rows)
    by_node = dict(zip(cluster.snapshot.names(got_rows), totals.tolist()))
    # NodeResourcesFit scores are small; Reservation (weight 5000): n2 preferred (100), n1's reservation
    # MostAllocated 1/2 -> 50 normalized against 1000 -> 5, n3 none.
    assert by_node["n2"] > by_node["n1"] > by_node["n3"]
    assert cluster.fwk.select_host(got_rows, totals) == cluster.snapshot.index["n2"]


def test_reserve_pod_pinned_node_and_policy_conflict():
    cluster = _Cluster([_available("old", "n2", "1")], nodes=("n1", "n2", "n3"))
    pending = reservation("new", "1", node_name="n1")
    pending["metadata"]["uid"] = "uid-new"
    cluster.plugin.cache.add_reservation(pending)
    _, _, rows, message = cluster.feasible(rv.reserve_pod(pending))
    assert cluster.snapshot.names(rows) == ["n1"]
    assert "2 node(s) didn't match the nodeName specified by reservation" in message
    restricted = reservation("strict", "1")
    restricted["metadata"]["uid"] = "uid-strict"
    restricted["spec"]["allocatePolicy"] = "Restricted"
    cluster.plugin.cache.add_reservation(restricted)
    _, _, rows, message = cluster.feasible(rv.reserve_pod(restricted))
    assert sorted(cluster.snapshot.names(rows)) == ["n1", "n3"]
    assert "1 node(s) reservation allocate policy conflict" in message


def test_cache_tracks_owner_pods_in_any_order():
    from koordinator_roles.scheduler.plugins.reservation.cache import ReservationCache

    cache = ReservationCache()
    changed: list[str] = []
    cache.on_allocated_change = changed.append
    owner = _owner("1")
    owner["spec"]["nodeName"] = "n1"
    owner["metadata"]["annotations"][rv.ANNOTATION_RESERVATION_ALLOCATED] = rv.allocated_annotation("r", "uid-r")
    cache.add_pod(owner)  # before its reservation (informers race on a restart)
    cache.add_reservation(_available("r", "n1", "4", allocate_once=False))
    assert changed == ["uid-r"]
    info = cache.get("uid-r")
    assert info.allocated == {"cpu": 1000} and info.remaining == {"cpu": 3000} and info.matchable
    cache.delete_pod(owner)
    assert cache.get("uid-r").allocated == {} and changed == ["uid-r", "uid-r"]
    # allocateOnce: an assumed owner makes it unmatchable until forgotten.
    cache.add_reservation(_available("once", "n1", "4"))
    cache.assume_pod("uid-once", "p-uid", f"{NS}/p", {"cpu": 1000})
    assert [i.name for i in cache.matchable_by_node()["n1"]] == ["r"]
    cache.forget_pod("uid-once", "p-uid")
    assert sorted(i.name for i in cache.matchable_by_node()["n1"]) == ["once", "r"]
    cache.delete_reservation(_available("r", "n1", "4"))
    assert [i.name for i in cache.matchable_by_node()["n1"]] == ["once"]


def test_cache_keeps_an_assumed_owner_while_it_binds_and_wakes_the_controller_once_bound():
    from koordinator_roles.scheduler.plugins.reservation.cache import ReservationCache

    cache = ReservationCache()
    wakes: list[None] = []
    cache.on_change = lambda: wakes.append(None)
    cache.add_reservation(_available("once", "n1", "4"))
    owner = _owner("1")
    cache.assume_pod("uid-once", owner["metadata"]["uid"], f"{NS}/{owner['metadata']['name']}", {"cpu": 1000})
    assert "n1" not in cache.matchable_by_node()
    # PreBind's annotation seen before the bind: still taken (a second owner must not get the allocateOnce room).
    owner["metadata"]["annotations"][rv.ANNOTATION_RESERVATION_ALLOCATED] = rv.allocated_annotation("once", "uid-once")
    cache.update_pod(_owner("1"), owner)
    assert "n1" not in cache.matchable_by_node() and cache.owners_of("uid-once") == [f"{NS}/{owner['metadata']['name']}"]
    # The bind seen: the assignment is the same, but the controller is woken to count the owner.
    before = len(wakes)
    bound = {**owner, "spec": {**owner["spec"], "nodeName": "n1"}}
    cache.update_pod(owner, bound)
    assert len(wakes) == before + 1 and cache.owners_of("uid-once") == [f"{NS}/{owner['metadata']['name']}"]
    # Finished: the room is given back.
    cache.update_pod(bound, {**bound, "status": {"phase": "Succeeded"}})
    assert cache.owners_of("uid-once") == []


# -- reservation-aware preemption (enablePreemption) ------------------------------------------------------------

def test_preemption_args():
    args = parse_args({"enablePreemption": True, "minCandidateNodesPercentage": 20, "minCandidateNodesAbsolute": 5})
    assert (args.enable_preemption, args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute) == \
        (True, 20, 5)
    with pytest.raises(ValueError, match=r"minCandidateNodesPercentage: Invalid value: 0"):
        parse_args({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0})
    with pytest.raises(ValueError, match=r"minCandidateNodesPercentage: Invalid value: 101"):
        parse_args({"minCandidateNodesPercentage": 101})


WEB = [{"labelSelector": {"matchLabels": {"app": "web"}}}]


def _web(name: str, cpu: str, priority: int, *, labels=None, start: str = "2026-01-01T00:00:00Z") -> dict:
    p = pod(name, NS, cpu=cpu, memory=None, priority=priority, labels={"app": "web", **(labels or {})})
    p["metadata"]["uid"] = f"uid-{name}"
    p["status"] = {"startTime": start}
    return p


class _PreemptCluster:
    """One 4-cpu node holding a shared (allocateOnce false) 4-cpu reservation with its owner pods inside, and a
    Framework of NodeResourcesFit + Reservation (PostFilter with enablePreemption)."""

    def __init__(self, owners: list[dict], policy: str = "Restricted") -> None:
        from types import SimpleNamespace

        from koordinator_roles.scheduler.framework.handle import PluginHandle
        from koordinator_roles.scheduler.framework.runtime import Framework
        from koordinator_roles.scheduler.framework.snapshot import Snapshot
        from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
        from koordinator_roles.scheduler.plugins import in_tree_registry

        r = _available("shared", "n1", "4", policy=policy, owners=WEB, allocate_once=False)
        ni = NodeInfo(node("n1", cpu="4"))
        allocated = 0
        for o in owners:
            o["spec"]["nodeName"] = "n1"
            o["metadata"]["annotations"][rv.ANNOTATION_RESERVATION_ALLOCATED] = rv.allocated_annotation(
                "shared", "uid-shared")
            ni.add_pod(PodInfo(o))
            allocated += PodInfo(o).requests.get("cpu", 0)
        # The reserve pod stands for what is still free inside the reservation (as ReservePodSource builds it).
        ni.add_pod(PodInfo(rv.reserve_pod(r, {"cpu": 4000 - allocated})))
        self.snapshot = Snapshot([ni])
        names = ["NodeResourcesFit", "Reservation"]
        profile = _profile(names, {"Reservation": 5000})
        points = {"preFilter": names, "filter": names, "postFilter": ["Reservation"], "preScore": names,
                  "score": names, "reserve": names, "preBind": names, "bind": names}
        profile.plugins_at = lambda point, ok: [SimpleNamespace(name=n, weight=1) for n in points.get(point, [])
                                                if ok(n, point)]
        profile.plugin_args = {"Reservation": {"enablePreemption": True}}
        handle = PluginHandle(snapshot_source=lambda: self.snapshot)
        self.fwk = Framework(profile, in_tree_registry(), handle)
        self.plugin = self.fwk.plugins["Reservation"]
        self.plugin.cache.add_reservation(r)
        for o in owners:
            self.plugin.cache.add_pod(o)

    def candidate(self, p: dict):
        """(victims' names or None, the status of the dry run) for pod ``p`` that failed Filter."""
        from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
        from koordinator_roles.scheduler.framework.status import CycleState
        from koordinator_roles.scheduler.framework.types import PodInfo
        from koordinator_roles.scheduler.plugins.helper.reservationstate import STATE_KEY

        state, pi, diagnosis = CycleState(), PodInfo(p), Diagnosis(self.snapshot)
        pi, result, status = self.fwk.run_pre_filter(state, pi, self.snapshot)
        assert status is None, status
        rows = self.fwk.find_nodes_that_fit(state, pi, self.snapshot, result, diagnosis)
        assert len(rows) == 0, "the preemptor must not fit before preemption"
        best, status = self.plugin._preemption.find_candidate(state, pi, state.read(STATE_KEY), diagnosis)
        victims = sorted(v.name for v in best.victims) if best is not None else None
        return victims, status, state, pi, diagnosis


def test_high_priority_owner_preempts_one_lower_owner_inside_the_reservation():
    # low-a is younger: among equals the older one is reprieved first, so low-a is the one to go.
    cluster = _PreemptCluster([_web("low-a", "2", 10, start="2026-01-02T00:00:00Z"),
                               _web("low-b", "2", 10, start="2026-01-01T00:00:00Z")])
    victims, status, state, pi, diagnosis = cluster.candidate(_web("high", "2", 100))
    assert victims == ["low-a"] and status is None
    # The whole PostFilter nominates the node (no API client here: nothing to delete).
    result, status = cluster.fwk.run_post_filter(state, pi, diagnosis)
    assert status.code == 0 and result.nominated_node_name == "n1"
    # The trial's "preemptible" bookkeeping stays in the dry run's cloned state.
    from koordinator_roles.scheduler.plugins.helper.reservationstate import STATE_KEY
    assert state.read(STATE_KEY).preemptible == {}


def test_disable_preemptible_owner_is_never_a_victim():
    protected = {"scheduling.koordinator.sh/disable-preemptible": "true"}
    # Without the label the lower-priority low-a would go; protected, low-b goes instead.
    cluster = _PreemptCluster([_web("low-a", "2", 5, labels=protected), _web("low-b", "2", 10)])
    victims, status, *_ = cluster.candidate(_web("high", "2", 100))
    assert victims == ["low-b"], victims
    # Both protected: preemption fails with Koordinator's message.
    cluster = _PreemptCluster([_web("low-a", "2", 5, labels=protected), _web("low-b", "2", 10, labels=protected)])
    victims, status, state, pi, diagnosis = cluster.candidate(_web("high", "2", 100))
    assert victims is None and status.message() == "node(s) preemption failed due to insufficient resources"
    _, status = cluster.fwk.run_post_filter(state, pi, diagnosis)
    assert "node(s) preemption failed due to insufficient resources" in status.message()


def test_equal_priority_and_non_owner_pods_are_not_victims():
    cluster = _PreemptCluster([_web("peer-a", "2", 100), _web("peer-b", "2", 100)])
    victims, status, *_ = cluster.candidate(_web("high", "2", 100))
    assert victims is None and status.message() == "node(s) preemption failed due to insufficient resources"
    # A pod the reservation does not own matches nothing: the plugin's PostFilter has nothing to do.
    from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
    from koordinator_roles.scheduler.framework.status import CycleState
    from koordinator_roles.scheduler.framework.types import PodInfo

    cluster = _PreemptCluster([_web("low-a", "2", 10), _web("low-b", "2", 10)])
    state, pi = CycleState(), PodInfo(pod("stranger", NS, cpu="2", memory=None, priority=100))
    pi, _, _ = cluster.fwk.run_pre_filter(state, pi, cluster.snapshot)
    _, status = cluster.plugin.post_filter(state, pi, Diagnosis(cluster.snapshot))
    assert status.code != 0 and not status.reasons


def test_dry_run_room_of_a_victim_goes_back_to_its_reservation_only():
    """RemovePod of an owner frees room inside its reservation: a pod that cannot use the reservation still
    does not fit the node."""
    from koordinator_roles.scheduler.framework.status import CycleState
    from koordinator_roles.scheduler.framework.types import PodInfo

    cluster = _PreemptCluster([_web("low-a", "2", 10), _web("low-b", "2", 10)])
    # The stranger has unmatched reservations on the node (with owners), so the plugin keeps its state.
    state, pi = CycleState(), PodInfo(pod("stranger", NS, cpu="2", memory=None, priority=100))
    pi, _, status = cluster.fwk.run_pre_filter(state, pi, cluster.snapshot)
    assert status is None and "Reservation" not in state.skip_filter_plugins
    node = cluster.snapshot.get("n1").clone()
    victim = next(p for p in node.pod_infos() if p.name == "low-a")
    node.remove_pod(victim.uid)
    assert cluster.fwk.run_pre_filter_remove_pod(state, pi, victim, node) is None
    status = cluster.fwk.run_filter_plugins(state, pi, node)
    assert status is not None and status.reasons == ["Insufficient cpu"], status
    assert cluster.fwk.run_pre_filter_add_pod(state, pi, victim, node) is None


PREEMPTION_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {enabled: [{name: Reservation}]}
    filter: {enabled: [{name: Reservation}]}
    postFilter: {disabled: [{name: "*"}], enabled: [{name: Reservation}]}
    preScore: {enabled: [{name: Reservation}]}
    score: {enabled: [{name: Reservation, weight: 5000}]}
    reserve: {enabled: [{name: Reservation}]}
    preBind: {enabled: [{name: Reservation}]}
    bind: {disabled: [{name: "*"}], enabled: [{name: Reservation}, {name: DefaultBinder}]}
  pluginConfig:
  - name: Reservation
    args: {enablePreemption: true, gcIntervalSeconds: 1, resyncIntervalSeconds: 1}
"""


def test_high_priority_owner_preempts_a_shared_reservation_owner(fresh_crd_server, scheduler_api, tmp_path):
    """A 4-cpu node fully held by a shared (allocateOnce false, Restricted) 4-cpu reservation with two 2-cpu
    low-priority owners inside; one of them is protected by disable-preemptible. A high-priority owner evicts
    the other one and lands in the reservation."""
    api = scheduler_api
    api.create(node("n1", cpu="4"))
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(PREEMPTION_CONFIG)
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(path)):
        r = reservation("shared", "4", owners=[{"labelSelector": {"matchLabels": {"app": "web"}}}],
                        allocate_once=False)
        r["spec"]["allocatePolicy"] = "Restricted"
        api.create(r)
        wait_until(lambda: phase_of(api, "shared") == "Available", message="shared Available")
        for name, value in (("rp-lowest", 1), ("rp-low", 10), ("rp-high", 100)):
            try:
                api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                            "metadata": {"name": name}, "value": value})
            except ApiError:
                pass  # left by an earlier test on this server

        def prio(name: str) -> dict:
            return {"priorityClassName": name}

        protected = {"app": "web", "scheduling.koordinator.sh/disable-preemptible": "true"}
        api.create(pod("low-protected", NS, cpu="2", memory=None, labels=protected, spec=prio("rp-lowest")))
        api.create(pod("low", NS, cpu="2", memory=None, labels={"app": "web"}, spec=prio("rp-low")))
        for name in ("low-protected", "low"):
            wait_until(lambda name=name: bound_to(api, name) == "n1", message=f"{name} bound")
        wait_until(lambda: (get_r(api, "shared").get("status") or {}).get("allocated") == {"cpu": "4"},
                   message="shared fully allocated")
        api.create(pod("high", NS, cpu="2", memory=None, labels={"app": "web"}, spec=prio("rp-high")))
        wait_until(lambda: bound_to(api, "high") == "n1", timeout=30, message="high bound after preemption")
        allocated = json.loads(api.get("Pod", "high", NS)["metadata"]["annotations"][
            rv.ANNOTATION_RESERVATION_ALLOCATED])
        assert allocated["name"] == "shared"
        # The unprotected lower-priority owner was the victim; the protected one (even lower) stays.
        with pytest.raises(NotFound):
            api.get("Pod", "low", NS)
        assert bound_to(api, "low-protected") == "n1"
        # Nothing left to take: an equal-priority owner cannot preempt and gets Koordinator's message.
        api.create(pod("high-2", NS, cpu="2", memory=None, labels={"app": "web"}, spec=prio("rp-high")))
        message = wait_until(lambda: unschedulable_message(api, "high-2"), message="high-2 unschedulable")
        assert "node(s) preemption failed due to insufficient resources" in message, message
