"""The scheduling queue (kube's PriorityQueue semantics), the nominator and the scheduler metrics."""

from __future__ import annotations

import threading

import pytest
from prometheus_client import CollectorRegistry

from koordinator_roles.scheduler.framework.interfaces import ClusterEvent
from koordinator_roles.scheduler.framework.status import Status
from koordinator_roles.scheduler.framework.types import PodInfo, QueuedPodInfo
from koordinator_roles.scheduler.metrics import SchedulerMetrics
from koordinator_roles.scheduler.queue import SchedulingQueue, backoff_duration

WAIT = 10.0  # generous bound for cross-thread waits; never reached when the code works


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def step(self, seconds: float) -> None:
        self.now += seconds


def priority_sort(qpi: QueuedPodInfo) -> tuple:
    return (-qpi.pod_info.priority, qpi.timestamp)


def pod(name: str, priority: int = 0, *, gates: list[str] | None = None, labels: dict | None = None,
        nominated: str = "", node: str = "") -> dict:
    spec: dict = {"containers": [{"name": "c"}], "priority": priority}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if node:
        spec["nodeName"] = node
    out = {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {}},
           "spec": spec, "status": {}}
    if nominated:
        out["status"]["nominatedNodeName"] = nominated
    return out


REGISTERED = {
    "NodeResourcesFit": [ClusterEvent("Node", "Add"), ClusterEvent("Pod", "Delete")],
    "InterPodAffinity": [ClusterEvent("Pod", "Add")],
    "SchedulingGates": [ClusterEvent("Pod", "Update")],
    "Silent": [],
}


def make_queue(clock: FakeClock | None = None, **kw) -> SchedulingQueue:
    kw.setdefault("events_for_plugin", lambda name: REGISTERED.get(name, []))
    return SchedulingQueue(priority_sort, clock=clock or FakeClock(), **kw)


def fail(q: SchedulingQueue, qpi: QueuedPodInfo, *plugins: str, cycle: int | None = None) -> bool:
    qpi.unschedulable_plugins = set(plugins)
    return q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle if cycle is None else cycle)


def names(q: SchedulingQueue) -> list[str]:
    out = []
    while True:
        qpi = q.pop(timeout=0)
        if qpi is None:
            return out
        out.append(qpi.pod_info.name)


# -- ordering ----------------------------------------------------------------------------------------------

def test_pop_orders_by_priority_then_queue_time():
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("low-early", 1))
    clock.step(1)
    q.add(pod("high-late", 100))
    clock.step(1)
    q.add(pod("low-late", 1))
    q.add(pod("mid", 50))
    assert names(q) == ["high-late", "mid", "low-early", "low-late"]


def test_equal_keys_pop_first_in_first_out():
    q = make_queue()  # the fake clock does not move: every timestamp is equal
    for i in range(20):
        q.add(pod(f"p{i:02d}"))
    assert names(q) == [f"p{i:02d}" for i in range(20)]


def test_pop_counts_attempts_and_cycles():
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    qpi = q.pop(timeout=0)
    assert qpi.attempts == 1 and qpi.initial_attempt_timestamp == clock.now and q.scheduling_cycle == 1
    assert q.in_flight("uid-a") and not q.has("uid-a") and len(q) == 0
    first = qpi.initial_attempt_timestamp
    fail(q, qpi)  # an error: straight to backoff
    clock.step(1)
    qpi = q.pop(timeout=0)
    assert qpi.attempts == 2 and qpi.initial_attempt_timestamp == first and q.scheduling_cycle == 2


def test_update_in_active_queue_reorders():
    q = make_queue()
    q.add(pod("a", 1))
    q.add(pod("b", 2))
    q.update(pod("a", 1), pod("a", 3))
    assert names(q) == ["a", "b"]


# -- backoff -----------------------------------------------------------------------------------------------

def test_backoff_duration_doubles_up_to_the_cap():
    assert [backoff_duration(n, 1.0, 10.0) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]
    assert backoff_duration(0, 1.0, 10.0) == 1
    assert backoff_duration(3, 0.5, 60.0) == 2


def test_backoff_counts_from_the_last_attempt():
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    for attempt, expected in enumerate([1, 2, 4, 8, 10, 10], start=1):
        qpi = q.pop(timeout=0)
        assert qpi.attempts == attempt
        clock.step(0.5)  # the attempt takes time; backoff starts when it fails
        fail(q, qpi)
        assert q.pending_pods()["backoff"] == 1
        clock.step(expected - 0.01)
        assert q.flush_backoff_completed() == 0
        assert q.pop(timeout=0) is None
        clock.step(0.01)
        assert q.flush_backoff_completed() == 1
        assert q.pending_pods() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}


def test_pop_takes_completed_backoff_when_active_is_empty():
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    fail(q, q.pop(timeout=0))
    clock.step(1)
    assert q.pop(timeout=0).pod_info.name == "a"


# -- cluster events ------------------------------------------------------------------------------------------

def test_events_move_only_pods_whose_plugins_registered_them():
    clock = FakeClock()
    q = make_queue(clock)
    for name in ("fit", "affinity", "silent", "error"):
        q.add(pod(name))
    fit, affinity, silent, error = (q.pop(timeout=0) for _ in range(4))
    fail(q, fit, "NodeResourcesFit")
    fail(q, affinity, "InterPodAffinity")
    fail(q, silent, "Silent")
    fail(q, error)  # no plugin: an error, backoff right away
    assert q.pending_pods() == {"active": 0, "backoff": 1, "unschedulable": 3, "gated": 0}
    clock.step(20)
    assert q.move_all_to_active_or_backoff(("Node", "Update")) == 0
    assert q.move_all_to_active_or_backoff(("Node", "Add")) == 1
    assert q.pending_pods()["unschedulable"] == 2
    assert q.move_all_to_active_or_backoff(("Pod", "Add")) == 1
    assert sorted(names(q)) == ["affinity", "error", "fit"]
    assert q.has("uid-silent")
    assert q.move_all_to_active_or_backoff(("*", "*")) == 1  # a wildcard event moves everything
    assert names(q) == ["silent"]


def test_pods_still_backing_off_go_to_backoff_queue():
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    fail(q, q.pop(timeout=0), "NodeResourcesFit")
    clock.step(0.5)
    q.move_all_to_active_or_backoff(("Node", "Add"))
    assert q.pending_pods()["backoff"] == 1
    clock.step(0.5)
    q.flush_backoff_completed()
    assert q.pending_pods()["active"] == 1


def test_hints_decide_for_each_pod():
    seen = []

    def only_big_nodes(p, old, new):
        seen.append((p["metadata"]["name"], old, new["metadata"]["name"]))
        return new["metadata"]["labels"].get("size") == "big"

    registered = {"NodeAffinity": [ClusterEvent("Node", "Add", hint=only_big_nodes)]}
    clock = FakeClock()
    q = make_queue(clock, events_for_plugin=lambda n: registered.get(n, []))
    q.add(pod("a"))
    fail(q, q.pop(timeout=0), "NodeAffinity")
    clock.step(60)
    small = {"metadata": {"name": "n1", "labels": {"size": "small"}}}
    big = {"metadata": {"name": "n2", "labels": {"size": "big"}}}
    assert q.move_all_to_active_or_backoff(("Node", "Add"), None, small) == 0
    assert q.pending_pods()["unschedulable"] == 1
    assert q.move_all_to_active_or_backoff(("Node", "Add"), None, big) == 1
    assert seen == [("a", None, "n1"), ("a", None, "n2")]
    assert names(q) == ["a"]


def test_a_failing_hint_requeues():
    def broken(p, old, new):
        raise RuntimeError("boom")

    q = make_queue(events_for_plugin=lambda n: [ClusterEvent("Node", "*", hint=broken)])
    q.add(pod("a"))
    fail(q, q.pop(timeout=0), "X")
    assert q.move_all_to_active_or_backoff(("Node", "Update")) == 1


def test_registrations_are_cached_until_reset():
    registered = {"P": []}
    q = make_queue(events_for_plugin=lambda n: registered[n])
    q.add(pod("a"))
    fail(q, q.pop(timeout=0), "P")
    assert q.move_all_to_active_or_backoff(("Node", "Add")) == 0
    registered["P"] = [ClusterEvent("Node")]
    assert q.move_all_to_active_or_backoff(("Node", "Add")) == 0
    q.reset_event_registrations()
    assert q.move_all_to_active_or_backoff(("Node", "Add")) == 1


def test_without_registrations_every_event_moves():
    q = SchedulingQueue(priority_sort, clock=FakeClock())
    q.add(pod("a"))
    fail(q, q.pop(timeout=0), "Anything")
    assert q.move_all_to_active_or_backoff(("NodeMetric", "Update")) == 1


def test_assigned_pod_events():
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    q.add(pod("b"))
    a, b = q.pop(timeout=0), q.pop(timeout=0)
    fail(q, a, "InterPodAffinity")
    fail(q, b, "NodeResourcesFit")
    clock.step(60)
    q.assigned_pod_added(pod("other", node="n1"))
    assert names(q) == ["a"]
    q.assigned_pod_deleted(pod("other", node="n1"))
    assert names(q) == ["b"]


# -- the in-flight / move-request rules ------------------------------------------------------------------------

def test_relevant_event_during_the_attempt_sends_the_pod_to_backoff():
    q = make_queue()
    q.add(pod("a"))
    qpi = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(("Node", "Add"))
    fail(q, qpi, "NodeResourcesFit")
    assert q.pending_pods()["backoff"] == 1 and not q.in_flight("uid-a")


def test_irrelevant_event_during_the_attempt_leaves_the_pod_unschedulable():
    q = make_queue()
    q.add(pod("a"))
    qpi = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(("Node", "Delete"))
    assert q.move_request_cycle == q.scheduling_cycle
    fail(q, qpi, "NodeResourcesFit")
    assert q.pending_pods()["unschedulable"] == 1


def test_events_before_the_attempt_do_not_count():
    q = make_queue()
    q.add(pod("a"))
    q.add(pod("b"))
    a = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(("Node", "Add"))  # while a is in flight, before b's attempt
    b = q.pop(timeout=0)
    fail(q, b, "NodeResourcesFit")
    fail(q, a, "NodeResourcesFit")
    assert q.pending_pods() == {"active": 0, "backoff": 1, "unschedulable": 1, "gated": 0}
    assert q.has("uid-b") and q.has("uid-a")
    assert q.move_all_to_active_or_backoff(("Node", "Add")) == 1  # only b was unschedulable


def test_hints_apply_to_in_flight_events():
    registered = {"P": [ClusterEvent("Node", "Add", hint=lambda p, old, new: new == "good")]}
    q = make_queue(events_for_plugin=lambda n: registered.get(n, []))
    q.add(pod("a"))
    qpi = q.pop(timeout=0)
    q.move_all_to_active_or_backoff(("Node", "Add"), None, "bad")
    fail(q, qpi, "P")
    assert q.pending_pods()["unschedulable"] == 1


def test_move_request_cycle_rule_for_pods_not_popped_here():
    q = make_queue()
    for name in ("a", "b", "c"):
        q.add(pod(name))
    for _ in range(3):
        q.done(q.pop(timeout=0).pod_info.uid)
    assert q.scheduling_cycle == 3
    q.move_all_to_active_or_backoff(("Node", "Delete"))  # irrelevant, but a move request at cycle 3
    early = QueuedPodInfo(PodInfo(pod("early")))
    late = QueuedPodInfo(PodInfo(pod("late")))
    assert fail(q, early, "NodeResourcesFit", cycle=3)
    assert q.pending_pods()["backoff"] == 1
    assert fail(q, late, "NodeResourcesFit", cycle=4)
    assert q.pending_pods()["unschedulable"] == 1


def test_add_unschedulable_skips_pods_already_queued_or_deleted():
    q = make_queue()
    q.add(pod("a"))
    qpi = q.pop(timeout=0)
    q.add(pod("a"))  # the informer re-adds it while in flight: remembered, not queued twice
    assert len(q) == 0
    q.delete(pod("a"))
    assert not fail(q, qpi, "NodeResourcesFit")
    assert len(q) == 0 and not q.in_flight("uid-a")
    q.add(pod("b"))
    assert not fail(q, QueuedPodInfo(PodInfo(pod("b"))), "X")
    assert q.pending_pods()["active"] == 1


def test_update_while_in_flight_requeues_the_latest_version():
    q = make_queue()
    q.add(pod("a", labels={"v": "1"}))
    qpi = q.pop(timeout=0)
    q.update(pod("a", labels={"v": "1"}), pod("a", labels={"v": "2"}))
    fail(q, qpi, "NodeResourcesFit")
    assert q.pending_pods()["backoff"] == 1  # its own update may have lifted the rejection
    assert qpi.pod_info.labels == {"v": "2"}


# -- updates, deletes, activate ----------------------------------------------------------------------------

def test_update_of_an_unschedulable_pod():
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    fail(q, q.pop(timeout=0), "Silent")
    status_only = pod("a")
    status_only["status"] = {"conditions": [{"type": "PodScheduled", "status": "False"}]}
    q.update(pod("a"), status_only)
    assert q.pending_pods()["unschedulable"] == 1
    q.update(status_only, pod("a", labels={"x": "y"}))
    assert q.pending_pods()["backoff"] == 1  # still backing off from its attempt
    clock.step(1)
    q.flush_backoff_completed()
    assert q.pop(timeout=0).pod_info.labels == {"x": "y"}


def test_update_of_an_unknown_pod_adds_it():
    q = make_queue()
    q.update(None, pod("a"))
    assert names(q) == ["a"]


def test_delete_removes_from_every_queue():
    clock = FakeClock()
    q = make_queue(clock, pre_enqueue=lambda pi: Status.unschedulable("gated", plugin="SchedulingGates")
                   if pi.spec.get("schedulingGates") else None)
    q.add(pod("active"))
    q.add(pod("backoff"))
    q.add(pod("unsched"))
    q.add(pod("gated", gates=["g"]))
    for _ in range(2):
        qpi = q.pop(timeout=0)
        fail(q, qpi) if qpi.pod_info.name == "backoff" else fail(q, qpi, "Silent")
    q.add(pod("active"))
    assert q.pending_pods() == {"active": 1, "backoff": 1, "unschedulable": 1, "gated": 1}
    for name in ("active", "backoff", "unsched", "gated"):
        q.delete(pod(name))
    assert len(q) == 0 and q.pending_pods() == {"active": 0, "backoff": 0, "unschedulable": 0, "gated": 0}


def test_activate_skips_backoff_and_unschedulable():
    q = make_queue()
    q.add(pod("a"))
    q.add(pod("b"))
    a, b = q.pop(timeout=0), q.pop(timeout=0)
    fail(q, a, "Silent")
    fail(q, b)
    q.activate([pod("a"), pod("b"), pod("unknown")])
    assert q.pending_pods()["active"] == 2 and len(q) == 2
    assert sorted(names(q)) == ["a", "b"]


def test_activate_of_an_in_flight_pod_sends_it_to_backoff_on_failure():
    q = make_queue()
    q.add(pod("a"))
    qpi = q.pop(timeout=0)
    q.activate({"default/a": pod("a")})
    fail(q, qpi, "Silent")
    assert q.pending_pods()["backoff"] == 1


# -- gated pods ------------------------------------------------------------------------------------------------

class Gates:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, pi: PodInfo) -> Status | None:
        self.calls += 1
        if pi.spec.get("schedulingGates"):
            return Status.unschedulable("waiting for scheduling gates", plugin="SchedulingGates")
        return None


def test_gated_pods_wait_aside_until_updated():
    gates = Gates()
    q = make_queue(pre_enqueue=gates)
    q.add(pod("g", gates=["example.com/wait"]))
    q.add(pod("free"))
    assert q.pending_pods() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 1}
    assert names(q) == ["free"]
    q.update(pod("g", gates=["example.com/wait"]), pod("g", gates=["example.com/wait", "other"]))
    assert q.pending_pods()["gated"] == 1
    q.update(pod("g", gates=["example.com/wait"]), pod("g"))
    assert q.pending_pods()["gated"] == 0
    qpi = q.pop(timeout=0)
    assert qpi.pod_info.name == "g" and qpi.attempts == 1


def test_gated_pods_are_rechecked_on_their_plugins_events_only():
    allowed = set()

    def pre_enqueue(pi):
        return None if pi.name in allowed else Status.unschedulable("not yet", plugin="SchedulingGates")

    q = make_queue(pre_enqueue=pre_enqueue)
    q.add(pod("g"))
    assert q.pending_pods()["gated"] == 1
    allowed.add("g")
    assert q.move_all_to_active_or_backoff(("Node", "Add")) == 0
    assert q.pending_pods()["gated"] == 1
    assert q.move_all_to_active_or_backoff(("Pod", "Update")) == 1
    assert names(q) == ["g"]


def test_pre_enqueue_runs_again_when_a_pod_returns_to_active():
    blocked = set()

    def pre_enqueue(pi):
        return Status.unschedulable("blocked", plugin="SchedulingGates") if pi.name in blocked else None

    clock = FakeClock()
    q = make_queue(clock, pre_enqueue=pre_enqueue)
    q.add(pod("a"))
    fail(q, q.pop(timeout=0))
    blocked.add("a")
    clock.step(1)
    q.flush_backoff_completed()
    assert q.pending_pods()["gated"] == 1


def test_gated_pods_are_rechecked_after_the_timeout():
    gates = Gates()
    clock = FakeClock()
    q = make_queue(clock, pre_enqueue=gates)
    q.add(pod("g", gates=["x"]))
    calls = gates.calls
    clock.step(301)
    q.flush_unschedulable_left_over()
    assert gates.calls == calls + 1 and q.pending_pods()["gated"] == 1


# -- unschedulable timeout -------------------------------------------------------------------------------------

def test_unschedulable_pods_are_flushed_after_five_minutes():
    clock = FakeClock()
    q = make_queue(clock)
    q.add(pod("a"))
    fail(q, q.pop(timeout=0), "Silent")
    clock.step(299)
    assert q.flush_unschedulable_left_over() == 0
    assert q.pending_pods()["unschedulable"] == 1
    clock.step(2)
    assert q.flush_unschedulable_left_over() == 1
    assert names(q) == ["a"]


# -- blocking, closing, the flush loop --------------------------------------------------------------------

def test_pop_blocks_until_another_thread_adds():
    q = make_queue()
    got = []
    started = threading.Event()

    def consumer():
        started.set()
        got.append(q.pop())  # no timeout: only the add's notification can end the wait

    t = threading.Thread(target=consumer, daemon=True)
    t.start()
    try:
        assert started.wait(WAIT)
        q.add(pod("a"))
        t.join(WAIT)
        assert not t.is_alive()
    finally:
        q.close()
    assert got[0] is not None and got[0].pod_info.name == "a"


def test_pop_times_out_empty():
    assert make_queue().pop(timeout=0.01) is None


def test_close_wakes_waiters():
    q = make_queue()
    got = []
    t = threading.Thread(target=lambda: got.append(q.pop()))
    t.start()
    q.close()
    t.join(WAIT)
    assert not t.is_alive() and got == [None]
    q.add(pod("a"))
    assert q.pop(timeout=0) is None


class GaugeWatch:
    """A metrics stand-in that signals when the queue reports a given count."""

    def __init__(self, queue: str, count: int) -> None:
        self.want = (queue, count)
        self.reached = threading.Event()

    def set_pending(self, counts):
        if counts.get(self.want[0]) == self.want[1]:
            self.reached.set()

    def incoming(self, queue, event):
        pass


def test_run_flushes_backoff_until_stopped():
    clock = FakeClock()
    watch = GaugeWatch("active", 1)
    q = make_queue(clock, metrics=watch)
    q.BACKOFF_FLUSH_INTERVAL = 0.01
    q.add(pod("a"))
    fail(q, q.pop(timeout=0))
    watch.reached.clear()
    clock.step(1)
    stop = threading.Event()
    t = threading.Thread(target=q.run, args=(stop,))
    t.start()
    try:
        assert watch.reached.wait(WAIT)
    finally:
        stop.set()
        t.join(WAIT)
    assert not t.is_alive()
    assert q.pending_pods()["active"] == 1


def test_concurrent_adds_and_pops_lose_nothing():
    q = make_queue()
    popped = []

    def consumer():
        while True:
            qpi = q.pop(timeout=WAIT)
            if qpi is None:
                return
            popped.append(qpi.pod_info.name)
            q.done(qpi.pod_info.uid)

    t = threading.Thread(target=consumer)
    t.start()
    producers = [threading.Thread(target=lambda k=k: [q.add(pod(f"p{k}-{i}")) for i in range(200)])
                 for k in range(4)]
    for p in producers:
        p.start()
    for p in producers:
        p.join(WAIT)
    q.close()
    t.join(WAIT)
    # Anything not popped before close is still queued; nothing is lost or duplicated.
    assert len(popped) == len(set(popped))
    assert len(popped) + len(q) == 800


# -- nominator ----------------------------------------------------------------------------------------------

def test_nominator_follows_status_and_preemption():
    q = make_queue()
    nom = q.nominator
    q.add(pod("a", nominated="n1"))
    assert [p.name for p in nom.nominated_pods_for_node("n1")] == ["a"]
    assert nom.nominated_node_name(pod("a")) == "n1"
    # Preemption nominates in memory; an update without the status field keeps it.
    nom.add_nominated_pod(PodInfo(pod("b")), "n2")
    q.update(pod("b"), pod("b", labels={"x": "1"}))
    assert [p.name for p in nom.nominated_pods_for_node("n2")] == ["b"]
    assert nom.nominated_pods_for_node("n2")[0].labels == {"x": "1"}
    # The status moving elsewhere moves the nomination.
    q.update(pod("a", nominated="n1"), pod("a", nominated="n3"))
    assert nom.nominated_pods_for_node("n1") == [] and len(nom.nominated_pods_for_node("n3")) == 1
    # A copy: changing it changes nothing inside.
    nom.nominated_pods_for_node("n3").clear()
    assert len(nom.nominated_pods_for_node("n3")) == 1
    q.delete(pod("a"))
    assert nom.nominated_pods_for_node("n3") == []
    q.assigned_pod_added(pod("b", node="n2"))
    assert nom.nominated_pods_for_node("n2") == [] and len(nom) == 0


def test_nominator_ignores_bound_pods_and_never_duplicates():
    q = make_queue()
    nom = q.nominator
    nom.add_nominated_pod(PodInfo(pod("a", node="n9")), "n1")
    assert nom.nominated_pods_for_node("n1") == []
    pi = PodInfo(pod("b"))
    nom.add_nominated_pod(pi, "n1")
    nom.add_nominated_pod(pi, "n1")
    nom.add_nominated_pod(pi, "n2")
    assert nom.nominated_pods_for_node("n1") == [] and nom.nominated_pods_for_node("n2") == [pi]


def test_failed_attempt_keeps_the_preemption_nomination():
    q = make_queue()
    q.add(pod("a", nominated="old"))
    q.add(pod("b", nominated="n2"))
    a, b = q.pop(timeout=0), q.pop(timeout=0)
    q.nominator.add_nominated_pod(a.pod_info, "n1")  # PostFilter (preemption) ran
    fail(q, a, "NodeResourcesFit")
    assert q.nominator.nominated_node_name(pod("a")) == "n1"
    q.nominator.delete_nominated_pod_if_exists(b.pod)  # assumed, then binding failed
    fail(q, b, "NodeResourcesFit")
    assert q.nominator.nominated_node_name(pod("b")) == "n2"
    assert sorted(q.nominator.nominated_node_names()) == ["n1", "n2"]


def test_set_backoff():
    clock = FakeClock()
    q = make_queue(clock)
    q.set_backoff(5, 50)
    q.add(pod("a"))
    fail(q, q.pop(timeout=0))
    clock.step(4.9)
    assert q.flush_backoff_completed() == 0
    clock.step(0.1)
    assert q.flush_backoff_completed() == 1


# -- metrics ------------------------------------------------------------------------------------------------

def test_metrics_have_kube_scheduler_names_labels_and_buckets():
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    m.observe_attempt("scheduled", "default-scheduler", 0.003)
    m.observe_sli(1, 0.5)
    m.observe_sli(20, 0.5)
    m.incoming("active", "PodAdd")
    m.observe_extension_point("Filter", "Success", "default-scheduler", 0.0002)
    m.preemption(3)
    text = m.exposition().decode()
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0' in text
    assert ('scheduler_scheduling_attempt_duration_seconds_bucket{le="16.384",profile="default-scheduler",'
            'result="scheduled"} 1.0') in text
    assert 'scheduler_pod_scheduling_sli_duration_seconds_bucket{attempts="15+",le="5242.88"} 1.0' in text
    assert 'scheduler_pod_scheduling_sli_duration_seconds_count{attempts="1"} 1.0' in text
    assert 'scheduler_queue_incoming_pods_total{event="PodAdd",queue="active"} 1.0' in text
    assert "scheduler_preemption_attempts_total 1.0" in text
    assert 'scheduler_preemption_victims_bucket{le="4.0"} 1.0' in text
    assert 'scheduler_preemption_victims_bucket{le="64.0"} 1.0' in text
    assert ('scheduler_framework_extension_point_duration_seconds_bucket{extension_point="Filter",'
            'le="0.2048",profile="default-scheduler",status="Success"} 1.0') in text
    for queue in ("active", "backoff", "unschedulable", "gated"):
        assert f'scheduler_pending_pods{{queue="{queue}"}} 0.0' in text
    assert "_created" not in text
    bounds = [line for line in text.splitlines()
              if line.startswith("scheduler_scheduling_attempt_duration_seconds_bucket")]
    assert len(bounds) == 16  # 15 buckets and +Inf


def test_queue_keeps_pending_gauges_and_incoming_counters():
    registry = CollectorRegistry()
    m = SchedulerMetrics(registry)
    q = make_queue(metrics=m, pre_enqueue=Gates())
    q.add(pod("a"))
    q.add(pod("b"))
    q.add(pod("g", gates=["x"]))
    fail(q, q.pop(timeout=0), "Silent")

    def value(name, **labels):
        return registry.get_sample_value(name, labels)

    assert value("scheduler_pending_pods", queue="active") == 1
    assert value("scheduler_pending_pods", queue="unschedulable") == 1
    assert value("scheduler_pending_pods", queue="gated") == 1
    assert value("scheduler_queue_incoming_pods_total", queue="active", event="PodAdd") == 2
    assert value("scheduler_queue_incoming_pods_total", queue="gated", event="PodAdd") == 1
    assert value("scheduler_queue_incoming_pods_total", queue="unschedulable",
                 event="ScheduleAttemptFailure") == 1


@pytest.mark.parametrize("attempts,label", [(1, "1"), (14, "14"), (15, "15+"), (99, "15+")])
def test_sli_attempts_label(attempts, label):
    registry = CollectorRegistry()
    SchedulerMetrics(registry).observe_sli(attempts, 1.0)
    assert registry.get_sample_value("scheduler_pod_scheduling_sli_duration_seconds_count",
                                     {"attempts": label}) == 1
