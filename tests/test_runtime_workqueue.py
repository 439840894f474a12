"""WorkQueue and rate limiters: client-go semantics (reference runtime.md §1.3)."""

from __future__ import annotations

import random
import threading
import time

import pytest

from koordinator.runtime.metrics import RECONCILE_TIME_BUCKETS, WORKQUEUE_BUCKETS, RuntimeMetrics
from koordinator.runtime.ratelimit import (
    BucketRateLimiter,
    ItemExponentialRateLimiter,
    MaxOfRateLimiter,
    TokenBucket,
    default_controller_rate_limiter,
)
from koordinator.runtime.workqueue import WorkQueue
from tests.waiting import wait_until

WAIT = 10.0  # generous: a loaded 2-core CI machine


def sample(q: WorkQueue, metric: str, **extra):
    labels = {"name": q.name, "controller": q.controller, **extra}
    return q.metrics.registry.get_sample_value(metric, labels)


class FakeClock:
    def __init__(self, now=1000.0):
        self.now = now

    def __call__(self):
        return self.now


@pytest.fixture
def queues():
    made = []

    def make(name="q", **kw):
        q = WorkQueue(name, **kw)
        made.append(q)
        return q

    yield make
    for q in made:
        q.shut_down()


# -- basic semantics ------------------------------------------------------------------------------


def test_dedupe_while_queued(queues):
    q = queues()
    for key in ("a", "a", "b", "a", "b"):
        q.add(key)
    assert q.len() == 2 and len(q) == 2
    assert q.get(timeout=1) == ("a", False)
    assert q.get(timeout=1) == ("b", False)
    assert q.get(timeout=0) == (None, False)
    assert sample(q, "workqueue_adds_total") == 2


def test_readd_while_processing_runs_once_more_after_done(queues):
    q = queues()
    q.add("a")
    key, _ = q.get(timeout=1)
    for _ in range(5):
        q.add("a")
    # Not handed out while being processed ...
    assert q.len() == 0
    assert q.get(timeout=0) == (None, False)
    q.done("a")
    # ... the five adds collapse into one more run.
    assert q.len() == 1
    assert q.get(timeout=1) == ("a", False)
    q.done("a")
    assert q.get(timeout=0) == (None, False)


def test_done_of_unknown_key_is_noop(queues):
    q = queues()
    q.add("a")
    q.done("a")  # queued but never handed out
    assert q.len() == 1
    q.done("zzz")
    assert q.get(timeout=1) == ("a", False)


def test_get_timeout_returns_none_not_shutdown(queues):
    q = queues()
    t0 = time.monotonic()
    assert q.get(timeout=0.05) == (None, False)
    assert time.monotonic() - t0 >= 0.05


def test_blocked_get_wakes_on_add(queues):
    q = queues()
    got = []
    started = threading.Event()

    def getter():
        started.set()
        got.append(q.get())

    t = threading.Thread(target=getter, daemon=True)
    t.start()
    assert started.wait(WAIT)
    q.add("x")
    t.join(WAIT)
    assert got == [("x", False)]


def test_no_concurrent_processing_of_one_key(queues):
    """Producers hammer adds on a few keys while consumers process; never two at once per key."""
    q = queues()
    keys = [f"k{i}" for i in range(4)]
    inflight = dict.fromkeys(keys, 0)
    violations = []
    processed = [0]
    lock = threading.Lock()

    def producer(seed):
        rnd = random.Random(seed)
        for _ in range(3000):
            q.add(rnd.choice(keys))

    def consumer():
        while True:
            key, shutdown = q.get(timeout=WAIT)
            if shutdown:
                return
            if key is None:
                violations.append("consumer starved")
                return
            with lock:
                inflight[key] += 1
                if inflight[key] > 1:
                    violations.append(key)
                processed[0] += 1
            time.sleep(0)  # let other threads run while this key is in flight
            with lock:
                inflight[key] -= 1
            q.done(key)

    producers = [threading.Thread(target=producer, args=(i,), daemon=True) for i in range(3)]
    consumers = [threading.Thread(target=consumer, daemon=True) for _ in range(6)]
    for t in consumers + producers:
        t.start()
    for t in producers:
        t.join(WAIT * 3)
    # Keys queued before shutdown are still handed out (client-go), so consumers finish them.
    assert q.shut_down_with_drain(WAIT)
    for t in consumers:
        t.join(WAIT)
    assert not any(t.is_alive() for t in consumers)
    assert violations == []
    assert processed[0] >= len(keys)
    assert q.len() == 0


# -- delayed adds ---------------------------------------------------------------------------------


def test_add_after_delays_at_least_the_delay(queues):
    q = queues()
    t0 = time.monotonic()
    q.add_after("a", 0.05)
    assert q.get(timeout=0) == (None, False)
    key, shutdown = q.get(timeout=WAIT)
    assert (key, shutdown) == ("a", False)
    assert time.monotonic() - t0 >= 0.05
    assert sample(q, "workqueue_retries_total") == 1
    assert sample(q, "workqueue_adds_total") == 1


def test_add_after_earlier_time_wins(queues):
    q = queues()
    q.add_after("a", 60)
    q.add_after("a", 0.02)  # earlier: replaces the 60 s wait
    assert q.get(timeout=WAIT) == ("a", False)


def test_add_after_later_time_does_not_postpone(queues):
    q = queues()
    q.add_after("a", 0.02)
    q.add_after("a", 60)  # later: ignored, keeps 20 ms
    assert q.get(timeout=WAIT) == ("a", False)
    q.done("a")
    # The ignored 60 s add left nothing behind.
    assert q.get(timeout=0.1) == (None, False)


def test_add_after_non_positive_is_immediate_and_not_a_retry(queues):
    q = queues()
    q.add_after("a", 0)
    q.add_after("b", -1)
    assert q.len() == 2
    assert sample(q, "workqueue_retries_total") == 0


def test_delayed_key_already_queued_is_deduped(queues):
    q = queues()
    q.add("a")
    q.add_after("a", 0.01)
    q.add_after("z", 0.03)  # fires after "a": once it is queued, "a" has fired too
    assert wait_until(lambda: q.len() == 2)
    assert [q.get(timeout=1)[0], q.get(timeout=1)[0]] == ["a", "z"]
    assert sample(q, "workqueue_adds_total") == 2


def test_one_named_delay_thread_stopped_on_shutdown():
    q = WorkQueue("delaythr")
    name = "workqueue-delaythr-delay"
    assert name not in {t.name for t in threading.enumerate()}
    for i in range(20):
        q.add_after(f"k{i}", 30 + i)
    threads = [t for t in threading.enumerate() if t.name == name]
    assert len(threads) == 1 and threads[0].daemon
    q.shut_down()
    assert not threads[0].is_alive()


def test_add_rate_limited_backs_off_per_item(queues):
    q = queues(rate_limiter=ItemExponentialRateLimiter(0.04, 10))
    t0 = time.monotonic()
    assert q.add_rate_limited("a") == pytest.approx(0.04)
    assert q.get(timeout=WAIT) == ("a", False)
    assert time.monotonic() - t0 >= 0.04
    q.done("a")
    t1 = time.monotonic()
    assert q.add_rate_limited("a") == pytest.approx(0.08)
    assert q.get(timeout=WAIT) == ("a", False)
    assert time.monotonic() - t1 >= 0.08
    q.done("a")
    assert q.num_requeues("a") == 2
    q.forget("a")
    assert q.num_requeues("a") == 0
    assert q.add_rate_limited("a") == pytest.approx(0.04)
    assert sample(q, "workqueue_retries_total") == 3


# -- rate limiters --------------------------------------------------------------------------------


def test_exponential_limiter_sequence_cap_and_forget():
    rl = ItemExponentialRateLimiter()  # 5 ms .. 1000 s
    delays = [rl.when("a") for _ in range(20)]
    assert delays[:5] == pytest.approx([0.005, 0.01, 0.02, 0.04, 0.08])
    assert all(b == pytest.approx(2 * a) or b == 1000.0 for a, b in zip(delays, delays[1:]))
    # 5 ms * 2**18 = 1310 s > 1000 s: capped from the 19th failure on.
    assert delays[17] == pytest.approx(0.005 * 2 ** 17)
    assert delays[18] == 1000.0 and delays[19] == 1000.0
    assert rl.num_requeues("a") == 20
    assert rl.when("b") == pytest.approx(0.005)  # per item
    rl.forget("a")
    assert rl.num_requeues("a") == 0
    assert rl.when("a") == pytest.approx(0.005)
    for _ in range(5000):  # no overflow, however many failures
        rl.when("c")
    assert rl.when("c") == 1000.0


def test_exponential_limiter_rejects_bad_parameters():
    with pytest.raises(ValueError, match="base"):
        ItemExponentialRateLimiter(base=0)
    with pytest.raises(ValueError, match="cap"):
        ItemExponentialRateLimiter(base=1, cap=0.5)


def test_token_bucket_burst_then_qps():
    clock = FakeClock()
    tb = TokenBucket(10, 100, clock=clock)
    assert [tb.reserve() for _ in range(100)] == [0.0] * 100
    # Reservations beyond the burst queue up 1/qps apart (the balance goes negative).
    assert [tb.reserve() for _ in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert not tb.try_take()
    clock.now += 0.3  # repays the debt exactly
    assert tb.reserve() == pytest.approx(0.1)
    clock.now += 100  # refills to the burst, never beyond
    assert [tb.reserve() for _ in range(100)] == [0.0] * 100
    assert tb.reserve() == pytest.approx(0.1)


def test_token_bucket_try_take_does_not_borrow():
    clock = FakeClock()
    tb = TokenBucket(2, 2, clock=clock)
    assert tb.try_take() and tb.try_take()
    assert not tb.try_take()
    assert not tb.try_take()
    clock.now += 0.5
    assert tb.try_take()
    assert not tb.try_take()


def test_token_bucket_unlimited_and_validation():
    for qps in (0, -1, float("inf")):
        tb = TokenBucket(qps, 0)
        assert all(tb.reserve() == 0.0 for _ in range(1000))
        assert tb.try_take() and tb.wait()
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(5, 0)


def test_token_bucket_wait_blocks_and_honours_stop():
    tb = TokenBucket(20, 1)
    assert tb.wait()
    t0 = time.monotonic()
    assert tb.wait()  # the second token comes 50 ms later
    assert time.monotonic() - t0 >= 0.04
    stop = threading.Event()
    stop.set()
    assert tb.wait(stop) is False
    slow = TokenBucket(0.01, 1)
    assert slow.wait()
    stop2 = threading.Event()
    threading.Timer(0.05, stop2.set).start()
    t0 = time.monotonic()
    assert slow.wait(stop2) is False  # would be 100 s
    assert time.monotonic() - t0 < WAIT


def test_max_of_and_default_controller_limiter():
    rl = default_controller_rate_limiter()
    # The first 100 retries fit the bucket's burst: per-item backoff decides.
    assert [rl.when(f"k{i}") for i in range(100)] == pytest.approx([0.005] * 100)
    # Then the 10 qps bucket dominates (reservations queue up ~100 ms apart).
    d1, d2 = rl.when("x"), rl.when("y")
    assert 0.09 <= d1 <= 0.1 + 1e-9 and d2 > d1
    assert rl.num_requeues("k0") == 1
    rl.forget("k0")
    assert rl.num_requeues("k0") == 0

    clock = FakeClock()
    m = MaxOfRateLimiter(ItemExponentialRateLimiter(1, 100),
                         BucketRateLimiter(TokenBucket(1, 1, clock=clock)))
    assert m.when("a") == 1  # item limiter: 1 s; bucket: 0
    assert m.when("b") == 1  # item limiter: 1 s; bucket: 1 s
    assert m.when("a") == 2
    with pytest.raises(ValueError):
        MaxOfRateLimiter()


# -- shutdown -------------------------------------------------------------------------------------


def test_shutdown_wakes_getters_and_drops_adds(queues):
    q = queues()
    results = []
    waiting = threading.Event()

    def getter():
        waiting.set()
        results.append(q.get())

    threads = [threading.Thread(target=getter, daemon=True) for _ in range(3)]
    for t in threads:
        t.start()
    assert waiting.wait(WAIT)
    q.shut_down()
    for t in threads:
        t.join(WAIT)
    assert results == [(None, True)] * 3
    assert q.shutting_down
    q.add("a")
    q.add_after("b", 0.01)
    assert q.add_rate_limited("c") is None
    assert q.len() == 0
    assert q.get(timeout=0) == (None, True)
    assert sample(q, "workqueue_adds_total") == 0
    assert sample(q, "workqueue_retries_total") == 0


def test_shutdown_still_hands_out_queued_keys(queues):
    q = queues()
    q.add("a")
    q.add("b")
    q.add_after("later", 60)
    q.shut_down()
    assert q.get(timeout=1) == ("a", False)
    assert q.get(timeout=1) == ("b", False)
    assert q.get(timeout=1) == (None, True)  # the delayed key was dropped


def test_shutdown_with_drain_waits_for_in_flight(queues):
    q = queues()
    q.add("a")
    q.add("b")
    assert q.get(timeout=1)[0] == "a"
    assert q.get(timeout=1)[0] == "b"
    result = []
    t = threading.Thread(target=lambda: result.append(q.shut_down_with_drain(WAIT)), daemon=True)
    t.start()
    assert wait_until(lambda: q.shutting_down)
    q.done("a")
    t.join(0.1)
    assert t.is_alive() and result == []  # "b" still in flight
    q.done("b")
    t.join(WAIT)
    assert result == [True]


def test_shutdown_with_drain_times_out(queues):
    q = queues()
    q.add("a")
    q.get(timeout=1)
    t0 = time.monotonic()
    assert q.shut_down_with_drain(0.1) is False
    assert time.monotonic() - t0 >= 0.1
    q.done("a")
    assert q.shut_down_with_drain(0) is True


# -- metrics --------------------------------------------------------------------------------------


def test_metrics_values_and_labels():
    metrics = RuntimeMetrics()
    q = WorkQueue("pods", metrics=metrics, controller="podctl")
    other = WorkQueue("nodes", metrics=metrics)  # controller label defaults to the name
    try:
        labels = {"name": "pods", "controller": "podctl"}
        get = metrics.registry.get_sample_value
        for key in ("a", "b", "a"):
            q.add(key)
        other.add("n1")
        assert get("workqueue_depth", labels) == 2
        assert get("workqueue_adds_total", labels) == 2
        assert get("workqueue_depth", {"name": "nodes", "controller": "nodes"}) == 1
        assert get("workqueue_unfinished_work_seconds", labels) == 0
        key, _ = q.get(timeout=1)
        assert get("workqueue_depth", labels) == 1
        assert get("workqueue_queue_duration_seconds_count", labels) == 1
        assert wait_until(lambda: get("workqueue_longest_running_processor_seconds", labels) > 0)
        assert get("workqueue_unfinished_work_seconds", labels) > 0
        # Re-adding a key in flight counts an add and raises the depth (client-go counts dirty keys).
        q.add("a")
        assert get("workqueue_adds_total", labels) == 3
        assert get("workqueue_depth", labels) == 2
        q.done(key)
        assert get("workqueue_work_duration_seconds_count", labels) == 1
        assert get("workqueue_work_duration_seconds_sum", labels) > 0
        assert get("workqueue_unfinished_work_seconds", labels) == 0
        assert get("workqueue_longest_running_processor_seconds", labels) == 0
        assert get("workqueue_retries_total", labels) == 0
        q.add_after("c", 0.01)
        assert get("workqueue_retries_total", labels) == 1
        # Buckets: 1e-8 .. 1e3 s, x10 (12 bounds + Inf).
        assert get("workqueue_queue_duration_seconds_bucket", {**labels, "le": "1e-08"}) is not None
        assert get("workqueue_queue_duration_seconds_bucket", {**labels, "le": "1000.0"}) == 1
        assert len(WORKQUEUE_BUCKETS) == 12
        text = metrics.exposition().decode()
        assert "workqueue_adds_total{" in text and "_created" not in text
    finally:
        q.shut_down()
        other.shut_down()


def test_metric_families_present():
    m = RuntimeMetrics()
    names = {f.name for f in m.registry.collect()}
    # prometheus_client reports counters without their _total suffix.
    expected = {
        "workqueue_depth", "workqueue_adds", "workqueue_queue_duration_seconds",
        "workqueue_work_duration_seconds", "workqueue_unfinished_work_seconds",
        "workqueue_longest_running_processor_seconds", "workqueue_retries",
        "controller_runtime_reconcile", "controller_runtime_reconcile_errors",
        "controller_runtime_reconcile_panics", "controller_runtime_terminal_reconcile_errors",
        "controller_runtime_reconcile_time_seconds", "controller_runtime_max_concurrent_reconciles",
        "controller_runtime_active_workers", "leader_election_master_status",
        "leader_election_slowpath", "rest_client_requests", "rest_client_request_duration_seconds",
        "koordinator_config_reloads", "koordinator_config_last_reload_successful",
        "koordinator_events_dropped",
    }
    assert expected <= names
    assert len(RECONCILE_TIME_BUCKETS) == 40 and RECONCILE_TIME_BUCKETS[0] == 0.005
    assert RECONCILE_TIME_BUCKETS[-1] == 60
    # Two RuntimeMetrics never collide (private registries).
    RuntimeMetrics().leader_election_master_status.labels("x").set(1)
    assert m.registry.get_sample_value("leader_election_master_status", {"name": "x"}) is None
