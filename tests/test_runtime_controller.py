"""Controller: controller-runtime's reconcile contract, workers, stop and watch (runtime.md §1.5)."""

from __future__ import annotations

import logging
import threading
import time
from types import SimpleNamespace

import pytest

from koordinator.runtime.controller import Controller, Result, TerminalError
from koordinator.runtime.metrics import RuntimeMetrics
from koordinator.runtime.ratelimit import ItemExponentialRateLimiter
from tests.waiting import wait_until

WAIT = 10.0


class Recorder:
    """A reconcile function driven by a script of per-call behaviours."""

    def __init__(self, script=None):
        self.script = list(script or [])
        self.calls = []  # (key, monotonic time)
        self.lock = threading.Lock()

    def __call__(self, key):
        with self.lock:
            self.calls.append((key, time.monotonic()))
            step = self.script.pop(0) if self.script else None
        if isinstance(step, BaseException):
            raise step
        return step


@pytest.fixture
def controllers():
    made = []

    def make(name, reconcile, **kw):
        kw.setdefault("rate_limiter", ItemExponentialRateLimiter(0.005, 0.05))
        c = Controller(name, reconcile, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.stop(WAIT)


def count(c: Controller, result: str) -> float:
    return c.metrics.registry.get_sample_value(
        "controller_runtime_reconcile_total", {"controller": c.name, "result": result})


def value(c: Controller, metric: str) -> float:
    return c.metrics.registry.get_sample_value(metric, {"controller": c.name})


def test_metrics_initialised(controllers):
    c = controllers("init", Recorder(), workers=3)
    for result in ("success", "error", "requeue", "requeue_after"):
        assert count(c, result) == 0
    assert value(c, "controller_runtime_reconcile_errors_total") == 0
    assert value(c, "controller_runtime_terminal_reconcile_errors_total") == 0
    assert value(c, "controller_runtime_reconcile_panics_total") == 0
    assert value(c, "controller_runtime_max_concurrent_reconciles") == 3
    assert value(c, "controller_runtime_active_workers") == 0
    assert c.leader_gated is True
    assert c.queue.name == "init" and c.queue.controller == "init"


def test_success(controllers):
    rec = Recorder()
    c = controllers("ok", rec)
    c.start()
    c.enqueue("ns/a")
    assert wait_until(lambda: count(c, "success") == 1)
    assert [k for k, _ in rec.calls] == ["ns/a"]
    assert value(c, "controller_runtime_reconcile_time_seconds_count") == 1
    assert wait_until(lambda: value(c, "controller_runtime_active_workers") == 0)
    assert count(c, "error") == 0
    assert c.queue.num_requeues("ns/a") == 0


def test_error_requeues_with_backoff_and_logs_each_failure(controllers, caplog):
    rec = Recorder([RuntimeError("boom 1"), ValueError("boom 2"), None])
    c = controllers("err", rec)
    with caplog.at_level(logging.ERROR, logger="koordinator.runtime.controller"):
        c.start()
        c.enqueue("ns/a")
        assert wait_until(lambda: count(c, "success") == 1)
    assert count(c, "error") == 2
    assert value(c, "controller_runtime_reconcile_errors_total") == 2
    assert value(c, "controller_runtime_terminal_reconcile_errors_total") == 0
    assert value(c, "controller_runtime_reconcile_panics_total") == 0
    times = [t for _, t in rec.calls]
    assert len(times) == 3
    # 5 ms then 10 ms of backoff (lower bounds only).
    assert times[1] - times[0] >= 0.005 and times[2] - times[1] >= 0.01
    assert c.queue.num_requeues("ns/a") == 0  # success forgets
    failures = [r.getMessage() for r in caplog.records if "reconcile failed" in r.getMessage()]
    assert len(failures) == 2
    assert "key=ns/a" in failures[0] and "attempt=1" in failures[0] and "retry_in=0.005s" in failures[0]
    assert "RuntimeError: boom 1" in failures[0]
    assert "attempt=2" in failures[1] and "retry_in=0.010s" in failures[1]


def test_terminal_error_not_requeued(controllers):
    rec = Recorder([TerminalError("bad spec")])
    c = controllers("term", rec)
    c.start()
    c.enqueue("a")
    assert wait_until(lambda: value(c, "controller_runtime_terminal_reconcile_errors_total") == 1)
    assert value(c, "controller_runtime_reconcile_errors_total") == 1
    assert count(c, "error") == 1
    assert wait_until(lambda: value(c, "controller_runtime_active_workers") == 0)
    assert c.queue.num_requeues("a") == 0
    assert c.metrics.registry.get_sample_value(
        "workqueue_retries_total", {"name": "term", "controller": "term"}) == 0
    # A fresh event reconciles it again.
    c.enqueue("a")
    assert wait_until(lambda: count(c, "success") == 1)
    assert len(rec.calls) == 2


def test_requeue_after(controllers):
    rec = Recorder([Result(requeue_after=0.05), None])
    c = controllers("after", rec)
    c.start()
    c.enqueue("a")
    assert wait_until(lambda: count(c, "success") == 1)
    assert count(c, "requeue_after") == 1
    assert rec.calls[1][1] - rec.calls[0][1] >= 0.05
    assert c.queue.num_requeues("a") == 0


def test_requeue_true_is_rate_limited(controllers):
    rec = Recorder([Result(requeue=True), Result(requeue=True), Result()])
    c = controllers("requeue", rec)
    c.start()
    c.enqueue("a")
    assert wait_until(lambda: count(c, "success") == 1)
    assert count(c, "requeue") == 2
    assert c.metrics.registry.get_sample_value(
        "workqueue_retries_total", {"name": "requeue", "controller": "requeue"}) == 2
    assert c.queue.num_requeues("a") == 0


def test_bad_return_value_is_an_error(controllers, caplog):
    rec = Recorder(["not a result", None])
    c = controllers("badret", rec)
    with caplog.at_level(logging.ERROR, logger="koordinator.runtime.controller"):
        c.start()
        c.enqueue("a")
        assert wait_until(lambda: count(c, "success") == 1)
    assert count(c, "error") == 1
    assert any("want Result or None" in r.getMessage() for r in caplog.records)


def test_base_exception_is_a_recovered_panic(controllers):
    rec = Recorder([SystemExit(3), None])
    c = controllers("panic", rec)
    c.start()
    c.enqueue("a")
    assert wait_until(lambda: count(c, "success") == 1)  # the worker survived and retried
    assert value(c, "controller_runtime_reconcile_panics_total") == 1
    assert value(c, "controller_runtime_reconcile_errors_total") == 1
    assert count(c, "error") == 1


def test_workers_run_in_parallel_but_never_the_same_key(controllers):
    keys = [f"ns/k{i}" for i in range(4)]
    barrier = threading.Barrier(4, timeout=WAIT)
    lock = threading.Lock()
    inflight = dict.fromkeys(keys, 0)
    seen_first = set()
    runs = dict.fromkeys(keys, 0)
    stats = {"max_key": 0, "max_total": 0, "total": 0, "calls": 0}
    holder = {}

    def reconcile(key):
        with lock:
            inflight[key] += 1
            stats["total"] += 1
            stats["calls"] += 1
            stats["max_key"] = max(stats["max_key"], inflight[key])
            stats["max_total"] = max(stats["max_total"], stats["total"])
            first = key not in seen_first
            seen_first.add(key)
            runs[key] += 1
            again = runs[key] < 10
        try:
            if first:
                barrier.wait()  # all four keys in flight at once, or BrokenBarrierError
            for _ in range(3 if again else 0):
                holder["c"].enqueue(key)  # re-adds while in flight collapse into one re-run
                time.sleep(0)
        finally:
            with lock:
                inflight[key] -= 1
                stats["total"] -= 1

    c = controllers("par", reconcile, workers=4)
    holder["c"] = c
    c.start()
    for key in keys:
        c.enqueue(key)
    for i in range(400):
        c.enqueue(keys[i % 4])
    assert wait_until(lambda: value(c, "controller_runtime_reconcile_time_seconds_count")
                      == count(c, "success") and count(c, "success") >= 40
                      and c.queue.len() == 0 and value(c, "controller_runtime_active_workers") == 0)
    assert count(c, "error") == 0, "barrier broke: workers did not run in parallel"
    assert stats["max_total"] == 4
    assert stats["max_key"] == 1
    assert all(n >= 10 for n in runs.values())
    names = [t.name for t in threading.enumerate() if t.name.startswith("controller-par-")]
    assert len(names) == 4


def test_stop_drains_in_flight_and_skips_queued(controllers):
    started = threading.Event()
    release = threading.Event()
    done = []

    def reconcile(key):
        started.set()
        assert release.wait(WAIT)
        done.append(key)

    c = controllers("drain", reconcile)
    c.start()
    c.enqueue("a")
    assert started.wait(WAIT)
    c.enqueue("b")  # queued behind the only worker
    result = []
    stopper = threading.Thread(target=lambda: result.append(c.stop(WAIT)), daemon=True)
    stopper.start()
    assert wait_until(lambda: c.queue.shutting_down)
    stopper.join(0.1)
    assert stopper.is_alive() and result == []  # waiting for "a"
    release.set()
    stopper.join(WAIT)
    assert result == [True]
    assert done == ["a"]  # "b" was never started
    assert not [t for t in threading.enumerate() if t.name.startswith("controller-drain-")]
    with pytest.raises(RuntimeError, match="stopped"):
        c.start()


def test_stop_times_out_on_stuck_reconcile(controllers):
    started = threading.Event()
    release = threading.Event()

    def reconcile(key):
        started.set()
        release.wait(WAIT)

    c = controllers("stuck", reconcile)
    c.start()
    c.enqueue("a")
    assert started.wait(WAIT)
    t0 = time.monotonic()
    assert c.stop(0.1) is False
    assert time.monotonic() - t0 >= 0.1
    release.set()
    assert c.stop(WAIT) is True


def test_stop_without_start():
    c = Controller("idle", Recorder())
    assert c.stop(1) is True


def test_bad_arguments():
    with pytest.raises(ValueError, match="workers"):
        Controller("x", Recorder(), workers=0)
    with pytest.raises(ValueError, match="name"):
        Controller("", Recorder())
    with pytest.raises(TypeError, match="reconcile"):
        Controller("x", None)


# -- watch ----------------------------------------------------------------------------------------


class FakeInformer:
    """Test double for the SharedInformer's handler registration (add_handler only)."""

    def __init__(self):
        self.handlers = []

    def add_handler(self, on_add=None, on_update=None, on_delete=None, *, resync=0):
        self.handlers.append(SimpleNamespace(on_add=on_add, on_update=on_update, on_delete=on_delete))

    def add(self, obj):
        for h in self.handlers:
            h.on_add(obj)

    def update(self, old, new):
        for h in self.handlers:
            h.on_update(old, new)

    def delete(self, obj):
        for h in self.handlers:
            h.on_delete(obj)


def pod(name, ns="ns", node=None, labels=None):
    obj = {"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": ns, "labels": labels or {}}, "spec": {}}
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def drain(c: Controller) -> list:
    keys = []
    while True:
        key, _ = c.queue.get(timeout=0)
        if key is None:
            return keys
        keys.append(key)
        c.queue.done(key)


def test_watch_default_map_uses_object_key():
    c = Controller("watch", Recorder())
    inf = FakeInformer()
    c.watch(inf)
    inf.add(pod("a"))
    inf.add({"metadata": {"name": "node-1"}})  # cluster-scoped
    inf.update(pod("b"), pod("b", labels={"x": "1"}))
    inf.delete(pod("c"))
    inf.delete(SimpleNamespace(key="ns/gone", obj=None))  # tombstone, object unknown
    inf.delete(SimpleNamespace(key="ns/d", obj=pod("d")))
    assert drain(c) == ["ns/a", "node-1", "ns/b", "ns/c", "ns/gone", "ns/d"]
    c.stop(1)


def test_watch_map_func_and_predicate():
    c = Controller("nodes", Recorder())
    inf = FakeInformer()
    seen = []

    def to_node(obj):
        node = obj["spec"].get("nodeName")
        return [node] if node else []

    def only_labelled(old, new):
        seen.append((old is None, new["metadata"]["name"]))
        return new["metadata"]["labels"].get("watch") == "yes"

    c.watch(inf, map_func=to_node, predicate=only_labelled)
    yes = {"watch": "yes"}
    inf.add(pod("a", node="n1", labels=yes))
    inf.add(pod("b", node="n2"))                        # filtered out
    inf.add(pod("pending", labels=yes))                 # maps to nothing
    inf.update(pod("a", node="n3", labels=yes), pod("a", node="n4", labels=yes))  # both nodes
    inf.delete(pod("a", node="n5", labels=yes))
    inf.delete(SimpleNamespace(key="ns/a", obj=pod("a", node="n6", labels=yes)))
    inf.delete(SimpleNamespace(key="ns/b", obj=pod("b", node="n7")))  # filtered out
    keys = drain(c)
    assert keys[0] == "n1"
    assert sorted(keys[1:3]) == ["n3", "n4"]
    assert keys[3:] == ["n5", "n6"]
    assert seen[0] == (True, "a") and seen[3] == (False, "a") and seen[4] == (True, "a")
    c.stop(1)


def test_watch_handler_errors_are_contained(caplog):
    c = Controller("boom", Recorder())
    inf = FakeInformer()

    def bad_map(obj):
        raise KeyError("nope")

    c.watch(inf, map_func=bad_map)
    with caplog.at_level(logging.ERROR, logger="koordinator.runtime.controller"):
        inf.add(pod("a"))  # must not raise into the informer
    assert any("watch add handler failed" in r.getMessage() for r in caplog.records)
    assert drain(c) == []
    c.stop(1)


def test_watch_feeds_running_controller():
    metrics = RuntimeMetrics()
    rec = Recorder()
    c = Controller("live", rec, metrics=metrics, workers=2, leader_gated=False)
    inf = FakeInformer()
    c.watch(inf)
    c.start()
    try:
        for i in range(20):
            inf.add(pod(f"p{i}"))
        assert wait_until(lambda: count(c, "success") == 20)
        assert sorted(k for k, _ in rec.calls) == sorted(f"ns/p{i}" for i in range(20))
        assert c.leader_gated is False
    finally:
        assert c.stop(WAIT)
