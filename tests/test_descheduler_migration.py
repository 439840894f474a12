"""MigrationController: args, workload limits, Reservation template (unit); filters, arbitration, the PMJ state
machine in both modes, PDBs, missing pods and a leader handover against the embedded API server with the real
scheduler scheduling the Reservations."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Iterator

import pytest
from prometheus_client import CollectorRegistry

from koordinator.apis import migration as mj
from koordinator.apis import reservation as rv
from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator.runtime.events import EventRecorder
from koordinator.runtime.informer import InformerFactory
from koordinator_roles.descheduler.framework.handle import PluginHandle
from koordinator_roles.descheduler.metrics import DeschedulerMetrics
from koordinator_roles.descheduler.framework.interfaces import EvictOptions
from koordinator_roles.descheduler.framework.nodefit import NOT_FIT_MESSAGE
from koordinator_roles.descheduler.plugins import migration
from koordinator_roles.descheduler.plugins.migration.arbitration import (group_by_controller, is_migrating,
                                                                         sort_by_migrating_num, sort_key)
from koordinator_roles.descheduler.plugins.migration.args import parse_args
from koordinator_roles.descheduler.plugins.migration.limiter import ObjectLimiters
from koordinator_roles.descheduler.plugins.migration.reservation import build_reservation
from koordinator_roles.descheduler.plugins.migration.scavenger import Scavenger
from tests.scheduler_harness import NS, node
from tests.test_scheduler_reservation import start as start_scheduler
from tests.waiting import wait_until

# -- unit ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("replicas, configured, expected", [
    (6, "80%", 4), (6, "150%", 6), (6, 5, 5), (6, 7, 6), (6, None, 2), (50, "0%", 1), (6, 0, 1),
    (100, None, 10), (3, None, 1)])
def test_workload_limits(replicas, configured, expected):
    assert mj.max_per_workload(replicas, configured) == expected


def test_args_defaults():
    a = parse_args({})
    assert (a.max_concurrent_reconciles, a.max_migrating_per_node, a.default_job_mode, a.default_job_ttl_seconds,
            a.scheduler_names, a.evict_qps, a.evict_burst, a.eviction_policy, a.arbitration_interval_seconds) == \
        (1, 2, "ReservationFirst", 300.0, ["koord-scheduler"], 10.0, 1, "Eviction", 0.5)
    assert a.object_limiters["workload"].duration_seconds == 300.0
    assert a.max_migrating_globally is None and a.max_migrating_per_workload is None
    skipped = parse_args({"skipEvictionGates": ["LocalStorage", "BarePods", "ExpectedReplicas"],
                          "evictQPS": "0.5", "maxMigratingPerWorkload": "20%"})
    assert skipped.evict_local_storage_pods and skipped.evict_all_bare_pods and not skipped.check_expected_replicas
    assert skipped.evict_qps == 0.5 and skipped.max_migrating_per_workload == "20%"


@pytest.mark.parametrize("args, message", [
    ({"maxConcurrentReconciles": 0}, "maxConcurrentReconciles: Invalid value: 0"),
    ({"defaultJobMode": "Teleport"}, "defaultJobMode: Unsupported value: 'Teleport'"),
    ({"defaultJobTTL": "5 minutes"}, "defaultJobTTL: Invalid value: '5 minutes'"),
    ({"evictQPS": 0}, "evictQPS: Invalid value: 0"),
    ({"evictionPolicy": "Kill"}, "evictionPolicy: Unsupported value: 'Kill'"),
    ({"skipEvictionGates": ["NoSuchGate"]}, "skipEvictionGates[0]: Unsupported value: 'NoSuchGate'"),
    ({"maxMigratingPerWorkload": "ten"}, "maxMigratingPerWorkload: Invalid value: 'ten'"),
    ({"maxMigratingPerNode": -1}, "maxMigratingPerNode: Invalid value: -1"),
    ({"namespaces": {"include": ["a"], "exclude": ["b"]}}, "namespaces: Invalid value"),
    ({"objectLimiters": {"cluster": {"duration": "1m"}}}, "objectLimiters.cluster: Unsupported value"),
    ({"objectLimiters": {"workload": {"duration": "soon"}}}, "objectLimiters.workload.duration: Invalid value"),
    ({"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}, "labelSelector: Invalid value"),
    ({"nodeFit": "yes"}, "nodeFit: Invalid value: 'yes'"),
    ({"nodeSelector": "a==b==c"}, "nodeSelector: Invalid value: 'a==b==c': found '==', expected"),
    ({"nodeSelector": {"pool": "a"}}, "nodeSelector: Invalid value: {'pool': 'a'}: must be a label selector string"),
])
def test_bad_args_name_the_field(args, message):
    with pytest.raises(ValueError) as err:
        parse_args(args)
    assert message in str(err.value)


def test_node_fit_args_and_the_skip_gate():
    a = parse_args({"nodeFit": True, "nodeSelector": "pool=a,zone!=z1"})
    assert a.node_fit and a.node_selector.matches({"pool": "a"}) and not a.node_selector.matches({"pool": "b"})
    assert not parse_args({}).node_fit and parse_args({"nodeSelector": ""}).node_selector is None
    assert not parse_args({"nodeFit": True, "skipEvictionGates": ["NodeFit"]}).node_fit


def _job(name: str, created: str = "2026-01-01T00:00:00Z", phase: str = "", passed: bool = False) -> dict:
    annotations = {mj.ANNOTATION_PASSED_ARBITRATION: "true"} if passed else {}
    return {"metadata": {"name": name, "creationTimestamp": created, "annotations": annotations},
            "status": {"phase": phase} if phase else {}}


def _owned(kind: str, uid: str, priority: int = 0) -> dict:
    return {"metadata": {"ownerReferences": [{"kind": kind, "name": uid, "uid": uid, "controller": True}]},
            "spec": {"priority": priority}}


def test_arbitration_groups_batch_job_pods_at_their_first_job():
    jobs = [_job(n) for n in ("a1", "x", "b1", "a2", "y", "b2", "a3")]
    pods = {"a1": _owned("Job", "A"), "a2": _owned("Job", "A"), "a3": _owned("Job", "A"),
            "b1": _owned("Job", "B"), "b2": _owned("Job", "B"),
            "x": _owned("ReplicaSet", "X"), "y": None}  # y: the pod is missing
    names = [j["metadata"]["name"] for j in group_by_controller(jobs, pods)]
    assert names == ["a1", "a2", "a3", "x", "b1", "b2", "y"]
    # Jobs of pods with another (or no) controller keep their order.
    assert group_by_controller(jobs[1:2] + jobs[4:5], pods) == [jobs[1], jobs[4]]


def test_arbitration_sorts_by_migrating_jobs_of_the_batch_job_last_so_it_is_the_primary_key():
    # Eviction order alone (priority, then newest first) would put x first.
    jobs = [_job("x", "2026-01-01T00:00:03Z"), _job("a1", "2026-01-01T00:00:02Z"), _job("b1", "2026-01-01T00:00:01Z"),
            _job("a2", "2026-01-01T00:00:00Z")]
    pods = {"x": _owned("ReplicaSet", "X", 0), "a1": _owned("Job", "A", 5), "b1": _owned("Job", "B", 1),
            "a2": _owned("Job", "A", 9)}
    migrating = {"A": 1, "B": 3}
    ordered = sorted(jobs, key=lambda j: sort_key(j, pods[j["metadata"]["name"]]))
    assert [j["metadata"]["name"] for j in ordered] == ["x", "b1", "a1", "a2"]
    ordered = group_by_controller(ordered, pods)
    calls: list[str] = []
    ordered = sort_by_migrating_num(ordered, pods, lambda uid: calls.append(uid) or migrating[uid])
    assert [j["metadata"]["name"] for j in ordered] == ["b1", "a1", "a2", "x"]
    assert sorted(calls) == ["A", "B"]  # each Job counted once
    assert is_migrating(_job("p", passed=True)) and is_migrating(_job("r", phase="Running"))
    assert not is_migrating(_job("q", phase="Pending")) and not is_migrating(_job("s"))


def test_conditions_keep_transition_time_and_copy_to_status():
    status: dict = {}
    assert mj.set_condition(status, "Eviction", "False", "Evicting", "m1")
    first = status["conditions"][0]["lastTransitionTime"]
    assert (status["status"], status["reason"], status["message"]) == ("Eviction", "Evicting", "m1")
    assert not mj.set_condition(status, "Eviction", "False", "Evicting", "m1")
    assert mj.set_condition(status, "Eviction", "False", "Evicting", "m2")
    assert status["conditions"][0]["lastTransitionTime"] == first and len(status["conditions"]) == 1


def test_reservation_template_from_the_pod():
    rs_ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs", "uid": "rs-uid", "controller": True}
    pod = {"metadata": {"name": "p", "namespace": NS, "uid": "pu", "labels": {"app": "web"},
                        "ownerReferences": [rs_ref]},
           "spec": {"nodeName": "n1", "schedulerName": "koord-scheduler", "containers": [{"name": "c"}]}}
    job = {"metadata": {"name": "j", "uid": "job-uid"}, "spec": {"podRef": {"name": "p", "namespace": NS},
                                                               "ttl": "5m"}}
    r = build_reservation(job, pod)
    assert r["metadata"]["name"] == "job-uid"
    assert r["metadata"]["labels"][mj.LABEL_CREATED_BY] == "koord-descheduler"
    assert rv.LABEL_RESERVATION_ORDER in r["metadata"]["labels"]
    spec = r["spec"]
    assert spec["allocateOnce"] is True and spec["ttl"] == "5m"
    assert spec["owners"] == [{"controller": {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                                              "uid": "rs-uid", "controller": True, "namespace": NS}}]
    tspec = spec["template"]["spec"]
    assert "nodeName" not in tspec
    assert tspec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"] == [{"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n1"]}]}]
    assert pod["spec"]["nodeName"] == "n1"  # the pod itself is untouched
    assert rv.OwnerMatcher.parse(spec["owners"]).matches({"metadata": {"namespace": NS, "ownerReferences": [rs_ref]}})


def test_object_limiter_counts_evictions_per_workload():
    now = [0.0]
    args = parse_args({"objectLimiters": {"workload": {"duration": "1m", "maxMigrating": 1}}})
    limiters = ObjectLimiters(args, lambda pod: 10, clock=lambda: now[0])
    pod = {"metadata": {"namespace": NS, "ownerReferences": [{"uid": "w1", "controller": True}]}}
    other = {"metadata": {"namespace": NS, "ownerReferences": [{"uid": "w2", "controller": True}]}}
    assert not limiters.exceeded(pod)
    limiters.track(pod)
    assert limiters.exceeded(pod) and not limiters.exceeded(other)
    now[0] = 61.0  # one token per minute
    assert not limiters.exceeded(pod)


# -- against the API server ------------------------------------------------------------------------------------

def replica_set(api: Client, name: str, replicas: int) -> dict:
    return api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": NS},
                       "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                                "template": {"metadata": {"labels": {"app": name}},
                                             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}})


def workload_pod(api: Client, rs: dict, name: str, node_name: str = "", *, cpu: str = "1", ready: bool = True,
                 scheduler: str = "koord-scheduler") -> dict:
    """A pod as the ReplicaSet controller would create it (bound to ``node_name`` when given, then Ready)."""
    spec: dict = {"schedulerName": scheduler,
                  "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": cpu}}}]}
    if node_name:
        spec["nodeName"] = node_name
    ref = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs["metadata"]["name"],
           "uid": rs["metadata"]["uid"], "controller": True}
    pod = api.create({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": name, "namespace": NS, "labels": {"app": rs["metadata"]["name"]},
                                   "ownerReferences": [ref]}, "spec": spec})
    if node_name:
        pod = set_ready(api, pod, ready)
    return pod


def set_ready(api: Client, pod: dict, ready: bool = True) -> dict:
    pod = api.get("Pod", pod["metadata"]["name"], NS)
    conditions = [c for c in (pod.get("status") or {}).get("conditions") or [] if c.get("type") != "Ready"]
    pod["status"] = {**(pod.get("status") or {}), "phase": "Running",
                     "conditions": conditions + [{"type": "Ready", "status": "True" if ready else "False"}]}
    return api.update_status(pod)


class Descheduler:
    """A MigrationController on informers of its own, like one descheduler process; ``run()`` starts its
    controllers (as the role does on the leader), ``stop()`` ends them."""

    def __init__(self, kubeconfig, args: dict, recorder: bool = False) -> None:
        self.api = Client.from_kubeconfig(str(kubeconfig), qps=0)
        self.factory = InformerFactory(self.api)
        self.recorder = EventRecorder(self.api, "koord-descheduler") if recorder else None
        handle = PluginHandle(client=self.api, informers=self.factory, event_recorder=self.recorder)
        self.metrics = DeschedulerMetrics(CollectorRegistry())
        handle.descheduler_metrics = self.metrics  # as the role's wiring passes it
        self.plugin = migration.new(args, handle)
        self.factory.start()
        assert self.factory.wait_for_sync(20)
        if self.recorder is not None:
            self.recorder.start()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def run(self) -> "Descheduler":
        for c in self.plugin.new_controllers():
            t = threading.Thread(target=c.run, args=(self._stop,), name=f"test-{c.name}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(15)
        if self.recorder is not None:
            self.recorder.stop(5)
        self.factory.stop()
        self.api.close()

    def cached(self, pod: dict) -> dict:
        """Wait for the pod (or its latest version) in this instance's cache."""
        key = f"{NS}/{pod['metadata']['name']}"
        rv_ = pod["metadata"]["resourceVersion"]
        return wait_until(lambda: (p := self.plugin.state.pods.store.get(key)) and
                          int(p["metadata"]["resourceVersion"]) >= int(rv_) and p, message=f"{key} cached")


@contextmanager
def descheduler(kubeconfig, args: dict, *, run: bool = True, recorder: bool = False) -> Iterator[Descheduler]:
    d = Descheduler(kubeconfig, args, recorder)
    try:
        yield d.run() if run else d
    finally:
        d.stop()


def pmj(pod: dict | None = None, *, name: str, mode: str = "", ref: dict | None = None, paused: bool = False,
        ttl: str = "") -> dict:
    spec: dict = {"podRef": ref if ref is not None else {"namespace": NS, "name": pod["metadata"]["name"]}}
    if mode:
        spec["mode"] = mode
    if paused:
        spec["paused"] = True
    if ttl:
        spec["ttl"] = ttl
    return {"apiVersion": mj.GROUP_VERSION, "kind": mj.KIND, "metadata": {"name": name}, "spec": spec}


def job(api: Client, name: str) -> dict:
    return api.get(mj.KIND, name)


def phase_is(api: Client, name: str, phase: str) -> dict | None:
    j = job(api, name)
    return j if mj.phase(j) == phase else None


def gone(api: Client, kind: str, name: str, namespace: str | None = None) -> bool:
    try:
        api.get(kind, name, namespace)
        return False
    except NotFound:
        return True


def migrated_reservations(api: Client) -> list[dict]:
    return api.list(rv.KIND, label_selector=f"{mj.LABEL_CREATED_BY}=koord-descheduler")["items"]


def test_reservation_first_moves_the_pod_through_a_reservation(fresh_crd_server, scheduler_api, tmp_path):
    """web-0 on n1 → PMJ → Reservation on n2 → web-0 evicted → the ReplicaSet's new pod binds the reservation."""
    api = scheduler_api
    api.create(node("n1", cpu="4"))
    api.create(node("n2", cpu="4"))
    rs = replica_set(api, "web", 4)
    pods = [workload_pod(api, rs, f"web-{i}", "n1") for i in range(4)]
    with start_scheduler(fresh_crd_server, tmp_path), \
            descheduler(fresh_crd_server.kubeconfig, {}, run=False, recorder=True) as d:
        target = d.cached(pods[0])
        assert d.plugin.filter(target)
        assert d.plugin.evict(target, EvictOptions(plugin_name="LowNodeLoad", reason="node n1 is hot"))
        created = wait_until(lambda: d.plugin.state.jobs_of_pod(target), message="PMJ cached")[0]
        name = created["metadata"]["name"]
        annotations = created["metadata"]["annotations"]
        assert annotations[mj.ANNOTATION_EVICT_TRIGGER] == "LowNodeLoad"
        assert annotations[mj.ANNOTATION_EVICT_REASON] == "node n1 is hot"
        assert created["spec"]["podRef"]["uid"] == target["metadata"]["uid"]
        assert (created["spec"]["mode"], created["spec"]["ttl"]) == ("ReservationFirst", "5m0s")
        # A pod with an active PMJ is filtered out: never two jobs for one pod.
        assert not d.plugin.filter(target)
        d.run()
        wait_until(lambda: gone(api, "Pod", "web-0", NS), message="web-0 evicted")
        j = job(api, name)
        reservation = api.get(rv.KIND, mj.reservation_ref(j)["name"])
        assert reservation["metadata"]["name"] == j["metadata"]["uid"]
        assert rv.status_of(reservation)["nodeName"] == "n2" and j["status"]["nodeName"] == "n2"
        assert rv.phase(reservation) == rv.PHASE_AVAILABLE
        assert mj.condition(j, mj.COND_RESERVATION_SCHEDULED)["status"] == "True"
        # The ReplicaSet's replacement (created here: no workload controllers run in this test).
        workload_pod(api, rs, "web-new", cpu="1")
        waiting = wait_until(lambda: (c := mj.condition(job(api, name), mj.COND_BOUND_POD_READY)) and c, timeout=30,
                             message="PMJ waits for the bound pod")
        assert waiting["reason"] == mj.REASON_WAIT_FOR_BOUND_POD_READY
        assert api.get("Pod", "web-new", NS)["spec"]["nodeName"] == "n2"
        assert rv.phase(api.get(rv.KIND, reservation["metadata"]["name"])) == rv.PHASE_SUCCEEDED
        set_ready(api, api.get("Pod", "web-new", NS))
        done = wait_until(lambda: phase_is(api, name, mj.PHASE_SUCCEEDED), message="PMJ Succeeded")
        st = done["status"]
        assert st["status"] == "Complete"
        assert st["message"] == f'Bind Pod "{NS}/web-new" in Reservation "{reservation["metadata"]["name"]}"'
        assert st["podRef"]["name"] == "web-new"
        conds = {c["type"]: (c["status"], c["reason"]) for c in st["conditions"]}
        assert conds[mj.COND_EVICTION] == ("True", mj.REASON_EVICT_COMPLETE)
        assert conds[mj.COND_RESERVATION_BOUND][0] == conds[mj.COND_BOUND_POD_READY][0] == "True"
        assert conds[mj.COND_POD_BOUND_RESERVATION][0] == "True"
        assert len(migrated_reservations(api)) == 1
        for p in pods[1:]:
            assert not gone(api, "Pod", p["metadata"]["name"], NS)


def test_evict_directly_respects_the_disruption_budget(fresh_crd_server, scheduler_api):
    """The Eviction API (the server enforces PDBs) refuses while the budget allows no disruption."""
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    rs = replica_set(api, "db", 4)
    pods = [workload_pod(api, rs, f"db-{i}", "n1", scheduler="default-scheduler") for i in range(4)]
    api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "db", "namespace": NS},
                "spec": {"minAvailable": 4, "selector": {"matchLabels": {"app": "db"}}}})
    with descheduler(fresh_crd_server.kubeconfig, {"defaultJobMode": "EvictDirectly"}, recorder=True) as d:
        api.create(pmj(pods[0], name="evict-db-0"))
        cond = wait_until(lambda: mj.condition(job(api, "evict-db-0"), mj.COND_EVICTION), message="eviction tried")
        assert cond["reason"] == mj.REASON_EVICTING
        refused = wait_until(lambda: [e for e in api.list("Event")["items"] if e.get("reason") == "Evicting"],
                             message="Evicting warning event")
        assert "disruption budget" in refused[0]["message"], refused[0]["message"]
        assert not gone(api, "Pod", "db-0", NS)
        api.delete("PodDisruptionBudget", "db", NS)
        done = wait_until(lambda: phase_is(api, "evict-db-0", mj.PHASE_SUCCEEDED), message="PMJ Succeeded")
        assert done["status"]["message"] == f'Pod "{NS}/db-0" has been evicted'
        counted = d.metrics.pods_evicted
        assert counted.labels("success", "", NS, "n1")._value.get() == 1
        assert counted.labels("error", "", NS, "n1")._value.get() >= 1
        assert gone(api, "Pod", "db-0", NS)
        assert not migrated_reservations(api)


def test_filter_limits_and_expected_replicas(fresh_crd_server, scheduler_api):
    api = scheduler_api
    api.create(node("n1", cpu="64"))
    rs = replica_set(api, "big", 10)
    pods = [workload_pod(api, rs, f"big-{i}", "n1") for i in range(6)]
    single = replica_set(api, "single", 1)
    lonely = workload_pod(api, single, "single-0", "n1")
    bare = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": NS},
                       "spec": {"nodeName": "n1", "schedulerName": "koord-scheduler",
                                "containers": [{"name": "c", "image": "busybox"}]}})
    opts = EvictOptions(plugin_name="test", reason="test")
    # maxMigratingPerNode 2 (default): the third pod on n1 is held back.
    with descheduler(fresh_crd_server.kubeconfig, {}, run=False) as d:
        cached = [d.cached(p) for p in pods]
        assert not d.plugin.filter(d.cached(lonely))  # 1 expected replica
        assert not d.plugin.filter(d.cached(bare))  # no owner
        other_scheduler = dict(cached[5], spec={**cached[5]["spec"], "schedulerName": "default-scheduler"})
        assert not d.plugin.filter(other_scheduler)  # ReservationFirst needs koord-scheduler
        # One round evicts back to back: the jobs just created count before the informer delivers them.
        assert d.plugin.evict(cached[0], opts) and d.plugin.evict(cached[1], opts)
        assert not d.plugin.evict(cached[0], opts)  # never two jobs for one pod
        assert d.plugin.filters.throttled(cached[2]).startswith("MaxMigratingPerNode")
        assert not d.plugin.evict(cached[2], opts)
        wait_until(lambda: len(d.plugin.state.jobs.store.list()) == 2, message="2 PMJs cached")
    for j in api.list(mj.KIND)["items"]:
        api.delete(mj.KIND, j["metadata"]["name"])
    # Per workload: maxMigratingPerWorkload 3, then maxUnavailablePerWorkload counts an unready pod.
    args = {"maxMigratingPerNode": 0, "maxMigratingPerWorkload": 3, "maxUnavailablePerWorkload": 4}
    with descheduler(fresh_crd_server.kubeconfig, args, run=False) as d:
        wait_until(lambda: not d.plugin.state.all_jobs(), message="no PMJs cached")
        for p in pods[:3]:
            assert d.plugin.evict(d.cached(p), opts)
        assert not d.plugin.evict(d.cached(pods[3]), opts)
        wait_until(lambda: len(d.plugin.state.jobs.store.list()) == 3, message="3 PMJs cached")
        assert d.plugin.filters.throttled(d.cached(pods[3])).startswith("MaxMigratingPerWorkload")
        d.plugin.args.max_migrating_per_workload = 5
        assert d.plugin.filter(d.cached(pods[3]))
        set_ready(api, pods[4], ready=False)  # 3 migrating + 1 unready = maxUnavailable 4
        unready = d.cached(api.get("Pod", "big-4", NS))
        assert d.plugin.filters.throttled(d.cached(pods[3])).startswith("MaxUnavailablePerWorkload")
        assert not d.plugin.filter(unready)


def test_arbitration_admits_within_limits_and_forbids_unmigratable_pods(fresh_crd_server, scheduler_api):
    api = scheduler_api
    api.create(node("n1", cpu="64"))
    rs = replica_set(api, "app", 10)
    pods = [workload_pod(api, rs, f"app-{i}", "n1") for i in range(3)]
    single = replica_set(api, "one", 1)
    lonely = workload_pod(api, single, "one-0", "n1")
    with descheduler(fresh_crd_server.kubeconfig, {"maxMigratingPerWorkload": 5, "maxUnavailablePerWorkload": 5},
                     run=False) as d:
        for p in pods + [lonely]:
            d.cached(p)
            api.create(pmj(p, name=f"job-{p['metadata']['name']}"))
        wait_until(lambda: len(d.plugin.arbitrator.waiting()) == 4, message="4 jobs waiting")
        d.plugin.arbitrator.tick()
        admitted = [j["metadata"]["name"] for j in api.list(mj.KIND)["items"]
                    if (j["metadata"].get("annotations") or {}).get(mj.ANNOTATION_PASSED_ARBITRATION) == "true"]
        assert len(admitted) == 2  # maxMigratingPerNode 2
        assert len(d.plugin.arbitrator.waiting()) == 1
        failed = job(api, "job-one-0")
        assert (mj.phase(failed), failed["status"]["reason"]) == ("Failed", mj.REASON_FORBIDDEN_MIGRATE_POD)
        assert failed["status"]["message"].startswith(f'Pod "{NS}/one-0" is forbidden to migrate')


def test_missing_or_invalid_pod_fails_the_job_and_evicts_nothing(fresh_crd_server, scheduler_api):
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    rs = replica_set(api, "keep", 4)
    pods = [workload_pod(api, rs, f"keep-{i}", "n1") for i in range(4)]
    with descheduler(fresh_crd_server.kubeconfig, {"defaultJobMode": "EvictDirectly"}):
        api.create(pmj(name="ghost", ref={"namespace": NS, "name": "ghost"}))
        api.create(pmj(name="no-ns", ref={"name": "keep-0"}))
        failed = wait_until(lambda: phase_is(api, "ghost", mj.PHASE_FAILED), message="ghost Failed")
        assert failed["status"]["reason"] == mj.REASON_MISSING_POD
        assert failed["status"]["message"] == f'Abort job caused by missing Pod "{NS}/ghost" named by spec.podRef'
        invalid = wait_until(lambda: phase_is(api, "no-ns", mj.PHASE_FAILED), message="no-ns Failed")
        assert invalid["status"]["reason"] == mj.REASON_INVALID_POD_REF
        assert invalid["status"]["message"].startswith("spec.podRef: Invalid value")
        # A stale UID names a pod that no longer exists even though the name does.
        stale = pmj(name="stale", ref={"namespace": NS, "name": "keep-1", "uid": "not-the-uid"})
        api.create(stale)
        failed = wait_until(lambda: phase_is(api, "stale", mj.PHASE_FAILED), message="stale Failed")
        assert "with uid not-the-uid named by spec.podRef" in failed["status"]["message"]
    for p in pods:
        assert not gone(api, "Pod", p["metadata"]["name"], NS)


def test_paused_timeout_and_scavenger(fresh_crd_server, scheduler_api):
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    rs = replica_set(api, "slow", 4)
    pods = [workload_pod(api, rs, f"slow-{i}", "n1") for i in range(2)]
    with descheduler(fresh_crd_server.kubeconfig, {}, run=False) as d:
        api.create(pmj(pods[0], name="paused", paused=True))
        assert d.plugin.reconciler.reconcile("paused") is None
        assert mj.phase(job(api, "paused")) == ""
        api.create(pmj(pods[1], name="late", ttl="1m"))
        d.plugin.reconciler.clock = lambda: time.time() + 120
        d.plugin.reconciler.reconcile("late")
        late = job(api, "late")
        assert (mj.phase(late), late["status"]["reason"]) == ("Failed", mj.REASON_TIMEOUT)
        assert not gone(api, "Pod", "slow-1", NS)
        # Scavenger: ttl + 5m (late) and 30m (paused) after creation both jobs go, with their Reservations.
        api.create({"apiVersion": rv.GROUP_VERSION, "kind": rv.KIND,
                    "metadata": {"name": job(api, "late")["metadata"]["uid"]},
                    "spec": {"template": {"metadata": {"namespace": NS}, "spec": {"containers": [{"name": "c"}]}},
                             "owners": [{"object": {"name": "x", "namespace": NS}}]}})
        early = Scavenger(api, d.plugin.reconciler.delete_reservation, clock=lambda: time.time() + 400)
        assert early.scavenge() == ["late"]
        assert gone(api, rv.KIND, late["metadata"]["uid"])
        assert Scavenger(api, d.plugin.reconciler.delete_reservation,
                         clock=lambda: time.time() + 1900).scavenge() == ["paused"]


def test_soft_eviction_and_delete_policies(fresh_crd_server, scheduler_api):
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    rs = replica_set(api, "soft", 4)
    pods = [workload_pod(api, rs, f"soft-{i}", "n1") for i in range(2)]
    api.patch("Pod", "soft-1", {"metadata": {"labels": {mj.LABEL_EVICT_POLICY: "Delete"}}}, namespace=NS)
    # No object limiter: with the default one, the workload's second eviction would wait its turn (5m window).
    args = {"defaultJobMode": "EvictDirectly", "evictionPolicy": "SoftEviction", "maxMigratingPerNode": 0,
            "objectLimiters": {}}
    with descheduler(fresh_crd_server.kubeconfig, args):
        api.create(pmj(pods[0], name="soft-0"))
        api.create(pmj(pods[1], name="soft-1"))
        annotated = wait_until(lambda: (api.get("Pod", "soft-0", NS)["metadata"].get("annotations") or {}).get(
            mj.ANNOTATION_SOFT_EVICTION), message="soft eviction annotation")
        assert '"initiator"' in annotated and '"reason": "NotSet"' in annotated
        assert mj.phase(job(api, "soft-0")) == mj.PHASE_RUNNING  # waits for another agent to remove the pod
        wait_until(lambda: phase_is(api, "soft-1", mj.PHASE_SUCCEEDED), message="soft-1 deleted")
        assert gone(api, "Pod", "soft-1", NS)
        api.delete("Pod", "soft-0", NS)
        wait_until(lambda: phase_is(api, "soft-0", mj.PHASE_SUCCEEDED), message="soft-0 Succeeded")


def test_new_leader_finishes_the_migration_without_duplicates(fresh_crd_server, scheduler_api, tmp_path):
    api = scheduler_api
    api.create(node("n1", cpu="4"))
    api.create(node("n2", cpu="4"))
    rs = replica_set(api, "svc", 4)
    pods = [workload_pod(api, rs, f"svc-{i}", "n1") for i in range(4)]
    with start_scheduler(fresh_crd_server, tmp_path):
        first = Descheduler(fresh_crd_server.kubeconfig, {})
        try:
            first.cached(pods[0])
            api.create(pmj(pods[0], name="handover"))
            first.run()
            wait_until(lambda: mj.reservation_ref(job(api, "handover")), message="Reservation referenced")
        finally:
            first.stop()  # the leader goes away mid-migration
        with descheduler(fresh_crd_server.kubeconfig, {}):
            wait_until(lambda: gone(api, "Pod", "svc-0", NS), message="svc-0 evicted by the new leader")
            workload_pod(api, rs, "svc-new", cpu="1")
            wait_until(lambda: api.get("Pod", "svc-new", NS)["spec"].get("nodeName"), message="svc-new bound")
            set_ready(api, api.get("Pod", "svc-new", NS))
            done = wait_until(lambda: phase_is(api, "handover", mj.PHASE_SUCCEEDED), message="PMJ Succeeded")
        reservations = migrated_reservations(api)
        assert [r["metadata"]["name"] for r in reservations] == [done["metadata"]["uid"]]
        assert done["status"]["podRef"]["name"] == "svc-new"
        assert not gone(api, "Pod", "svc-new", NS)  # the replacement was never evicted
        for p in pods[1:]:
            assert not gone(api, "Pod", p["metadata"]["name"], NS)


def test_unscheduled_pod_is_assigned_through_its_reservation_not_evicted(fresh_crd_server, scheduler_api):
    """Reconciled step by step (no scheduler runs): the Reservation is placed and the pod bound by hand."""
    api = scheduler_api
    api.create(node("n2", cpu="8"))
    rs = replica_set(api, "late", 4)
    pending = workload_pod(api, rs, "late-0")
    pending["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "0/1 nodes are available"}]}
    pending = api.update_status(pending)
    with descheduler(fresh_crd_server.kubeconfig, {}, run=False) as d:
        api.create(pmj(pending, name="assign"))
        reconcile = d.plugin.reconciler.reconcile
        reconcile("assign")  # Pending -> Running, Reservation created and referenced
        r_name = mj.reservation_ref(job(api, "assign"))["name"]
        r = api.get(rv.KIND, r_name)
        assert r["spec"]["owners"] == [{"object": {"kind": "Pod", "namespace": NS, "name": "late-0",
                                                   "uid": pending["metadata"]["uid"]}}]
        assert "affinity" not in r["spec"]["template"]["spec"]  # not bound: no node to avoid
        r["status"] = {"phase": "Available", "nodeName": "n2", "conditions": [
            {"type": "Scheduled", "status": "True", "reason": "Scheduled"},
            {"type": "Ready", "status": "True", "reason": "Available"}]}
        api.update_status(r)
        assert reconcile("assign").requeue_after == 3.0
        waiting = job(api, "assign")
        assert (waiting["status"]["nodeName"], waiting["status"]["status"], waiting["status"]["reason"]) == \
            ("n2", mj.COND_POD_SCHEDULED, mj.REASON_UNSCHEDULABLE)
        api.bind("late-0", NS, "n2")
        bound = api.get("Pod", "late-0", NS)
        bound["status"]["conditions"] = [{"type": "PodScheduled", "status": "True"}]
        api.update_status(bound)
        reconcile("assign")
        done = job(api, "assign")
        assert mj.phase(done) == mj.PHASE_SUCCEEDED
        assert done["status"]["message"] == f'Assign Pod "{NS}/late-0" to node "n2"'
        assert not gone(api, "Pod", "late-0", NS)


def test_dry_run_creates_no_job_and_the_evict_annotation_bypasses_the_policy(fresh_crd_server, scheduler_api):
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    bare = api.create({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": "bare", "namespace": NS, "annotations": {mj.ANNOTATION_EVICT: ""}},
                       "spec": {"nodeName": "n1", "schedulerName": "koord-scheduler",
                                "volumes": [{"name": "scratch", "emptyDir": {}}],
                                "containers": [{"name": "c", "image": "busybox"}]}})
    opts = EvictOptions(plugin_name="test", reason="test")
    with descheduler(fresh_crd_server.kubeconfig, {"dryRun": True}, run=False) as d:
        pod = d.cached(bare)
        assert d.plugin.evict(pod, opts)
        assert not api.list(mj.KIND)["items"]
    with descheduler(fresh_crd_server.kubeconfig, {}, run=False) as d:
        pod = d.cached(bare)
        assert d.plugin.filters.rejection(pod) == "pod has no owner"  # without the annotation it would be refused
        assert d.plugin.filter(pod) and d.plugin.evict(pod, opts)
        assert [mj.pod_key(j) for j in api.list(mj.KIND)["items"]] == [f"{NS}/bare"]


def test_node_fit_filters_pods_no_other_ready_node_of_the_selector_can_take(fresh_crd_server, scheduler_api):
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    api.create(node("n2", cpu="500m", labels={"pool": "a"}))  # in the pool, too small
    api.create(node("n3", cpu="8"))  # roomy, outside the pool
    rs = replica_set(api, "fit", 10)
    pods = [workload_pod(api, rs, f"fit-{i}", "n1", cpu="1") for i in range(2)]
    args = {"nodeFit": True, "nodeSelector": "pool=a", "maxMigratingPerWorkload": 5, "maxUnavailablePerWorkload": 5}
    with descheduler(fresh_crd_server.kubeconfig, args, run=False) as d:
        pod = d.cached(pods[0])
        wait_until(lambda: len(d.factory.informer("Node").store.list()) == 3, message="3 nodes cached")
        assert d.plugin.filters.rejection(pod) == NOT_FIT_MESSAGE
        assert not d.plugin.filter(pod) and not d.plugin.pre_eviction_filter(pod)
        n3 = api.get("Node", "n3")
        api.update({**n3, "metadata": {**n3["metadata"], "labels": {**n3["metadata"]["labels"], "pool": "a"}}})
        wait_until(lambda: d.plugin.filter(pod), message="n3 in the pool, in the cache")
        assert d.plugin.pre_eviction_filter(pod)
    # The NodeFit gate skipped: nodeFit is off, whatever the nodes.
    with descheduler(fresh_crd_server.kubeconfig, {**args, "nodeSelector": "pool=none",
                                                   "skipEvictionGates": ["NodeFit"]}, run=False) as d:
        assert d.plugin.filter(d.cached(pods[1]))


def test_arbitration_counts_the_migrating_jobs_of_a_batch_jobs_pods(fresh_crd_server, scheduler_api):
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "uid-train", "controller": True}
    pods = [api.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"train-{i}", "namespace": NS, "ownerReferences": [ref]},
                        "spec": {"nodeName": "n1", "containers": [{"name": "c", "image": "busybox"}]}})
            for i in range(3)]

    def job_of(p: dict, name: str, passed: bool = False) -> dict:
        body = pmj(name=name, ref={"namespace": NS, "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]})
        if passed:
            body["metadata"]["annotations"] = {mj.ANNOTATION_PASSED_ARBITRATION: "true"}
        return api.create(body)
    job_of(pods[0], "passed", passed=True)
    running = job_of(pods[1], "running")
    api.update_status({**running, "status": {"phase": mj.PHASE_RUNNING}})
    job_of(pods[2], "pending")
    with descheduler(fresh_crd_server.kubeconfig, {}, run=False) as d:
        for p in pods:
            d.cached(p)
        wait_until(lambda: mj.phase(d.plugin.state.jobs.store.get("running") or {}) == mj.PHASE_RUNNING,
                   message="the running job cached")
        assert d.plugin.arbitrator._migrating_of_batch_job("uid-train") == 2
        assert d.plugin.arbitrator._migrating_of_batch_job("uid-other") == 0
