"""Metric cache of the koordlet: aggregations, label queries, retention, restart, bad input."""

from __future__ import annotations

import glob
import logging
import math
import os
import random
import sqlite3
import threading

import pytest

from koordinator_roles.koordlet.metriccache import EmptySeriesError, MetricCache, MetricCacheError, Sample, Series
from koordinator_roles.koordlet.metriccache import aggregate as agg
from koordinator_roles.koordlet.metriccache import kinds
from tests.waiting import wait_until

T0 = 1_700_000_000.0


class Clock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def node_cpu(value: float, ts: float) -> Sample:
    return Sample(kinds.NODE_CPU_USAGE, value, ts)


def pod_cpu(uid: str, value: float, ts: float) -> Sample:
    return Sample(kinds.POD_CPU_USAGE, value, ts, {"pod_uid": uid})


@pytest.fixture
def cache(tmp_path):
    c = MetricCache(str(tmp_path / "metrics.db"), clock=Clock())
    yield c
    c.close()


# ---------------------------------------------------------------- pure aggregations


def test_percentile_nearest_rank_floor_reference_examples():
    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0]   # n = 9, sorted 1..9
    assert agg.percentile_index(9, 0.9) == 7
    assert agg.percentile_index(9, 0.5) == 3
    assert agg.percentile(values, 0.9) == 8.0
    assert agg.percentile(values, 0.5) == 4.0
    assert agg.percentile(values, 0.95) == 8.0   # int(8.55) - 1 = 7
    assert agg.percentile(values, 0.99) == 8.0   # int(8.91) - 1 = 7
    assert agg.percentiles(values, [0.5, 0.9]) == [4.0, 8.0]
    # index clamped at 0: one point, or p small enough that int(n*p) == 0
    assert agg.percentile([42.0], 0.5) == 42.0
    assert agg.percentile([3.0, 1.0], 0.5) == 1.0   # int(1.0) - 1 = 0
    assert agg.percentile(list(map(float, range(100))), 0.99) == 98.0
    assert agg.percentile(list(map(float, range(10))), 0.9) == 8.0


def test_series_aggregations():
    s = Series([10.0, 11.0, 12.0, 13.0], [1.0, 2.0, 3.0, 6.0])
    assert len(s) == 4
    assert s.aggregate("avg") == 3.0
    assert s.aggregate("p50") == 2.0
    assert s.aggregate("P90") == 3.0            # koordlet's own spelling is accepted
    assert s.aggregate("last") == 6.0
    assert s.aggregate("count") == 4
    assert s.time_range() == 3.0
    assert s.percentiles(["p50", "p90", "p95", "p99"]) == {"p50": 2.0, "p90": 3.0, "p95": 3.0, "p99": 3.0}
    with pytest.raises(ValueError, match="median"):
        s.aggregate("median")


def test_last_is_value_with_greatest_timestamp():
    assert agg.last([3.0, 1.0, 2.0], [30.0, 10.0, 20.0]) == 30.0
    assert agg.aggregate("last", [5.0, 9.0, 7.0], [1.0, 2.0, 3.0]) == 2.0


def test_empty_series():
    s = Series()
    assert len(s) == 0 and not s
    assert s.aggregate("count") == 0
    assert s.time_range() == 0.0
    for kind in ("avg", "p50", "p90", "p95", "p99", "last"):
        with pytest.raises(EmptySeriesError):
            s.aggregate(kind)
    assert issubclass(EmptySeriesError, ValueError)
    assert Series([5.0], [1.0]).time_range() == 0.0


# ---------------------------------------------------------------- insert and query


def test_insert_query_and_aggregate(cache):
    cache.insert([node_cpu(float(v), T0 + i) for i, v in enumerate([5, 1, 9, 3, 7, 2, 8, 4, 6])])
    s = cache.query(kinds.NODE_CPU_USAGE, T0, T0 + 8)
    assert s.timestamps == [T0 + i for i in range(9)]
    assert s.values == [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.0, 4.0, 6.0]
    assert s.aggregate("p90") == 8.0 and s.aggregate("p50") == 4.0
    assert s.aggregate("avg") == 5.0 and s.aggregate("last") == 6.0 and s.aggregate("count") == 9
    assert s.time_range() == 8.0
    # window bounds are inclusive; outside the data → empty series
    assert cache.query(kinds.NODE_CPU_USAGE, T0 + 2, T0 + 4).values == [9.0, 3.0, 7.0]
    assert len(cache.query(kinds.NODE_CPU_USAGE, T0 + 100, T0 + 200)) == 0
    assert len(cache.query(kinds.NODE_MEMORY_USAGE, T0, T0 + 8)) == 0


def test_rounds_one_timestamp_per_call(cache):
    # the collector shape: one call per round, every pod at the round's timestamp
    for r in range(10):
        cache.insert([node_cpu(1.0 + r, T0 + r)] + [pod_cpu(f"p{i}", i + r / 10, T0 + r) for i in range(5)])
    by = cache.query_by(kinds.POD_CPU_USAGE, "pod_uid", T0 + 5, T0 + 9)
    assert sorted(by) == [f"p{i}" for i in range(5)]
    assert by["p3"].timestamps == [T0 + r for r in range(5, 10)]
    assert by["p3"].values == pytest.approx([3 + r / 10 for r in range(5, 10)])
    assert cache.query(kinds.POD_CPU_USAGE, T0, T0 + 9, pod_uid="p2").values == pytest.approx(
        [2 + r / 10 for r in range(10)])
    assert cache.query(kinds.POD_CPU_USAGE, T0, T0 + 9, pod_uid="nope").values == []
    # no labels: every pod's points merged, sorted by timestamp
    merged = cache.query(kinds.POD_CPU_USAGE, T0, T0 + 1)
    assert merged.timestamps == [T0] * 5 + [T0 + 1] * 5
    assert sorted(merged.values[:5]) == [0.0, 1.0, 2.0, 3.0, 4.0]


def test_pod_churn_changes_series_set(cache):
    # pods come and go between rounds, and a collector may walk them in any order
    for r in range(6):
        uids = ["a", "b"] if r < 3 else ["c", "b"]
        if r % 2:
            uids.reverse()
        cache.insert([pod_cpu(u, float(r), T0 + r) for u in uids])
    by = cache.query_by(kinds.POD_CPU_USAGE, "pod_uid", T0, T0 + 5)
    assert by["a"].values == [0.0, 1.0, 2.0]
    assert by["b"].values == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert by["c"].timestamps == [T0 + 3, T0 + 4, T0 + 5]
    assert cache.stats()["layouts"] == 2       # the set, not the order, names a layout


def test_points_with_their_own_timestamps_in_one_call(cache):
    # a whole series back-filled in one call, out of order, with sub-second timestamps
    pts = [(T0 + i * 0.5, float(i)) for i in range(60)]
    random.Random(1).shuffle(pts)
    cache.insert(node_cpu(v, t) for t, v in pts)
    s = cache.query(kinds.NODE_CPU_USAGE, T0 + 3, T0 + 12.5)
    assert s.timestamps == [T0 + i * 0.5 for i in range(6, 26)]
    assert s.values == [float(i) for i in range(6, 26)]
    assert cache.stats()["points"] == 60


def test_labels_subset_on_multi_label_kind(cache):
    def gpu(minor, uuid, v, ts):
        return Sample(kinds.NODE_GPU_CORE_USAGE, v, ts, {"gpu_minor": minor, "gpu_device_uuid": uuid})

    cache.insert([gpu("0", "GPU-a", 10.0, T0), gpu("1", "GPU-b", 20.0, T0)])
    cache.insert([gpu("0", "GPU-a", 30.0, T0 + 1), gpu("1", "GPU-b", 40.0, T0 + 1)])
    assert cache.query(kinds.NODE_GPU_CORE_USAGE, T0, T0 + 1, gpu_minor="1").values == [20.0, 40.0]
    assert cache.query(kinds.NODE_GPU_CORE_USAGE, T0, T0 + 1, gpu_minor="1",
                       gpu_device_uuid="GPU-b").values == [20.0, 40.0]
    assert cache.query(kinds.NODE_GPU_CORE_USAGE, T0, T0 + 1, gpu_minor="1",
                       gpu_device_uuid="GPU-a").values == []
    assert cache.query(kinds.NODE_GPU_CORE_USAGE, T0, T0 + 1).aggregate("count") == 4
    by = cache.query_by(kinds.NODE_GPU_CORE_USAGE, "gpu_device_uuid", T0, T0 + 1)
    assert {k: v.values for k, v in by.items()} == {"GPU-a": [10.0, 30.0], "GPU-b": [20.0, 40.0]}


def test_non_string_label_values_are_compared_as_strings(cache):
    cache.insert([Sample(kinds.NODE_NUMA_CPU_USAGE, 1.5, T0, {"numa_node_id": 0})])
    assert cache.query(kinds.NODE_NUMA_CPU_USAGE, T0, T0, numa_node_id="0").values == [1.5]
    assert cache.query(kinds.NODE_NUMA_CPU_USAGE, T0, T0, numa_node_id=0).values == [1.5]


def test_same_series_set_at_same_millisecond_is_replaced(cache):
    cache.insert([node_cpu(1.0, T0)])
    cache.insert([node_cpu(2.0, T0)])
    assert cache.query(kinds.NODE_CPU_USAGE, T0 - 1, T0 + 1).values == [2.0]
    # within one call too, and next to the same series at other times
    cache.insert([node_cpu(3.0, T0 + 5), node_cpu(4.0, T0 + 5)])
    cache.insert([node_cpu(5.0, T0 + 6), node_cpu(6.0, T0 + 7), node_cpu(7.0, T0 + 6)])
    cache.insert([node_cpu(8.0, T0 + 8), node_cpu(9.0, T0 + 8)])
    s = cache.query(kinds.NODE_CPU_USAGE, T0 - 1, T0 + 10)
    assert s.timestamps == [T0, T0 + 5, T0 + 6, T0 + 7, T0 + 8]
    assert s.values == [2.0, 4.0, 7.0, 6.0, 9.0]


def test_big_round_replaced_without_leaking_its_blob(cache):
    # 100 pods: the value array is stored out of line; replacing it must free the old one
    for v in (1.0, 2.0, 3.0):
        cache.insert([pod_cpu(f"p{i}", v + i, T0) for i in range(100)])
    assert cache.stats()["blobs"] == 1 and cache.stats()["points"] == 100
    by = cache.query_by(kinds.POD_CPU_USAGE, "pod_uid", T0, T0)
    assert by["p7"].values == [10.0]


def test_exact_values_round_trip(cache):
    values = [0.1, 1e-9, 123456789012.0, 2 ** 53 + 0.0, -3.25]
    cache.insert([Sample(kinds.POD_MEMORY_USAGE, v, T0 + i, {"pod_uid": "u"}) for i, v in enumerate(values)])
    assert cache.query(kinds.POD_MEMORY_USAGE, T0, T0 + 10).values == values


# ---------------------------------------------------------------- bad input


@pytest.mark.parametrize("sample, words", [
    (Sample("node_cpu_usagee", 1.0, T0), ["node_cpu_usagee"]),
    (Sample(kinds.POD_CPU_USAGE, 1.0, T0), ["pod_cpu_usage", "pod_uid"]),
    (Sample(kinds.POD_CPU_USAGE, 1.0, T0, {"uid": "x"}), ["pod_cpu_usage", "uid"]),
    (Sample(kinds.POD_CPU_USAGE, 1.0, T0, {"pod_uid": "x", "extra": "y"}), ["pod_cpu_usage", "extra"]),
    (Sample(kinds.NODE_CPU_USAGE, 1.0, T0, {"pod_uid": "x"}), ["node_cpu_usage", "pod_uid"]),
    (Sample(kinds.NODE_GPU_CORE_USAGE, 1.0, T0, {"gpu_minor": "0"}), ["node_gpu_core_usage", "gpu_device_uuid"]),
    (Sample(kinds.NODE_CPU_USAGE, float("nan"), T0), ["nan", "node_cpu_usage"]),
    (Sample(kinds.NODE_CPU_USAGE, float("inf"), T0), ["inf", "node_cpu_usage"]),
    (Sample(kinds.NODE_CPU_USAGE, "lots", T0), ["lots"]),
    (Sample(kinds.NODE_CPU_USAGE, 1.0, float("nan")), ["nan"]),
    (Sample(kinds.NODE_CPU_USAGE, 1.0, None), ["None"]),
    (("node_cpu_usage", 1.0, T0), ["node_cpu_usage"]),
])
def test_bad_samples_refuse_the_whole_batch(cache, sample, words):
    good = [node_cpu(1.0, T0 - 1), pod_cpu("ok", 1.0, T0 - 1)]
    with pytest.raises(MetricCacheError) as err:
        cache.insert(good + [sample])
    for w in words:
        assert w in str(err.value)
    assert cache.stats()["points"] == 0 and cache.stats()["series"] == 0
    # the cache is still usable and its mirrors were rolled back with the transaction
    cache.insert(good)
    assert cache.query(kinds.POD_CPU_USAGE, T0 - 1, T0, pod_uid="ok").values == [1.0]
    assert cache.stats()["series"] == 2


def test_bad_queries(cache):
    with pytest.raises(MetricCacheError, match="pod_cpu_usage.*container_id"):
        cache.query(kinds.POD_CPU_USAGE, T0, T0 + 1, container_id="x")
    with pytest.raises(MetricCacheError, match="no_such_kind"):
        cache.query("no_such_kind", T0, T0 + 1)
    with pytest.raises(MetricCacheError, match="node_cpu_usage.*pod_uid"):
        cache.query_by(kinds.NODE_CPU_USAGE, "pod_uid", T0, T0 + 1)
    with pytest.raises(MetricCacheError, match="no_such_kind"):
        cache.query_by("no_such_kind", "pod_uid", T0, T0 + 1)


def test_kv(cache):
    assert cache.get_kv(kinds.KV_NODE_CPU_INFO) is None
    assert cache.get_kv(kinds.KV_NODE_CPU_INFO, {}) == {}
    info = {"model": "x", "cpus": [{"id": 0, "core": 0, "socket": 0, "node": 0}], "total_cpus": 1}
    cache.set_kv(kinds.KV_NODE_CPU_INFO, info)
    assert cache.get_kv(kinds.KV_NODE_CPU_INFO) == info
    cache.set_kv(kinds.KV_NODE_CPU_INFO, [1, 2])
    assert cache.get_kv(kinds.KV_NODE_CPU_INFO) == [1, 2]
    with pytest.raises(MetricCacheError, match="gpu_devices"):
        cache.set_kv(kinds.KV_GPU_DEVICES, {"x": object()})
    with pytest.raises(MetricCacheError, match="gpu_devices"):
        cache.set_kv(kinds.KV_GPU_DEVICES, math.nan)


def test_kinds_table_is_consistent():
    assert kinds.LABELS[kinds.NODE_CPU_USAGE] == ()
    assert kinds.LABELS[kinds.NODE_NUMA_MEMORY_USAGE] == ("numa_node_id",)
    assert kinds.LABELS[kinds.CONTAINER_CPU_THROTTLED] == ("container_id",)
    assert kinds.LABELS[kinds.HOST_APPLICATION_MEMORY_USAGE_WITH_PAGE_CACHE] == ("host_app_name",)
    assert kinds.LABELS[kinds.NODE_GPU_MEMORY_TOTAL] == ("gpu_minor", "gpu_device_uuid")
    for name, props in kinds.LABELS.items():
        assert len(set(props)) == len(props), name


# ---------------------------------------------------------------- bounds


def test_retention_by_time_and_empty_series_dropped(tmp_path):
    clock = Clock(T0)
    c = MetricCache(str(tmp_path / "metrics.db"), retention_seconds=100, clock=clock)
    for r in range(200):
        uids = ["old"] if r < 50 else ["new"]
        c.insert([node_cpu(float(r), T0 + r)] + [pod_cpu(u, float(r), T0 + r) for u in uids])
    clock.now = T0 + 199
    assert c.gc() == 99 * 2                        # rounds before T0+99 (cutoff) dropped
    s = c.query(kinds.NODE_CPU_USAGE, T0, T0 + 1000)
    assert s.timestamps[0] == T0 + 99 and s.timestamps[-1] == T0 + 199
    assert c.query(kinds.POD_CPU_USAGE, T0, T0 + 1000, pod_uid="old").values == []
    assert c.stats()["series"] == 2                # pod "old" is gone, from the file ...
    assert "old" not in {k[0] for k in c._series[kinds.POD_CPU_USAGE]}   # ... and from memory
    assert c.gc() == 0
    # a series that reappears after its deletion gets a new id and works
    c.insert([pod_cpu("old", 7.0, T0 + 200)])
    assert c.query(kinds.POD_CPU_USAGE, T0, T0 + 1000, pod_uid="old").values == [7.0]
    clock.now = T0 + 10_000
    c.gc()
    assert c.stats()["points"] == 0 and c.stats()["series"] == 0 and c.stats()["layouts"] == 0
    c.close()


def test_retention_by_size_keeps_newest(tmp_path):
    max_bytes = 512 << 10
    c = MetricCache(str(tmp_path / "metrics.db"), max_bytes=max_bytes, clock=Clock(T0 + 10_000))
    r = 0
    rng = random.Random(7)
    while c.stats()["used_bytes"] <= max_bytes * 1.5:
        c.insert([pod_cpu(f"pod-{i}", rng.random(), T0 + r) for i in range(100)]
                 + [node_cpu(rng.random(), T0 + r)])
        r += 1
    before = c.stats()
    dropped = c.gc()
    after = c.stats()
    assert dropped > 0 and after["points"] == before["points"] - dropped
    assert after["used_bytes"] <= max_bytes
    assert after["bytes"] <= max_bytes                # free pages beyond the bound went back
    assert os.path.getsize(c.path) <= max_bytes
    newest = T0 + r - 1
    assert len(c.query_by(kinds.POD_CPU_USAGE, "pod_uid", newest, newest)) == 100
    assert c.query(kinds.NODE_CPU_USAGE, T0, newest).timestamps[-1] == newest
    assert c.query(kinds.NODE_CPU_USAGE, T0, T0 + 10).values == []   # oldest gone
    # it keeps being bounded while writing goes on
    for _ in range(3):
        for _ in range(r // 2):
            c.insert([pod_cpu(f"pod-{i}", rng.random(), T0 + r) for i in range(100)])
            r += 1
        c.gc()
        assert c.stats()["used_bytes"] <= max_bytes
    c.close()


def test_run_gc_loops_until_stopped(tmp_path):
    clock = Clock(T0)
    c = MetricCache(None, retention_seconds=10, clock=clock)
    c.insert([node_cpu(1.0, T0 - 100), node_cpu(2.0, T0)])
    stop = threading.Event()
    t = threading.Thread(target=c.run_gc, args=(stop, 0.01))
    t.start()
    try:
        wait_until(lambda: c.stats()["points"] == 1, 5, "gc of the expired point")
    finally:
        stop.set()
        t.join(5)
    assert not t.is_alive()
    c.close()


# ---------------------------------------------------------------- durability


def test_restart_keeps_history_and_kv(tmp_path):
    path = str(tmp_path / "run" / "koordlet" / "metrics.db")     # directories created
    c = MetricCache(path)
    c.insert([node_cpu(1.0, T0), pod_cpu("a", 2.0, T0)])
    c.set_kv(kinds.KV_NODE_NUMA_INFO, {"nodes": [{"id": 0, "cpus": [0, 1]}]})
    c.close()
    c = MetricCache(path)
    assert c.query(kinds.NODE_CPU_USAGE, T0, T0).values == [1.0]
    assert c.get_kv(kinds.KV_NODE_NUMA_INFO) == {"nodes": [{"id": 0, "cpus": [0, 1]}]}
    c.insert([node_cpu(3.0, T0 + 1), pod_cpu("a", 4.0, T0 + 1)])
    assert c.query(kinds.POD_CPU_USAGE, T0, T0 + 1, pod_uid="a").values == [2.0, 4.0]
    assert c.stats()["series"] == 2 and c.stats()["layouts"] == 2     # nothing duplicated
    c.close()


def test_restart_after_crash_without_close(tmp_path):
    # a koordlet killed without close(): the WAL still holds the last commits
    path = str(tmp_path / "metrics.db")
    c = MetricCache(path)
    c.insert([node_cpu(float(i), T0 + i) for i in range(5)])
    c.set_kv("k", 1)
    c2 = MetricCache(path)                # a new process opening the same file meanwhile
    assert c2.query(kinds.NODE_CPU_USAGE, T0, T0 + 10).values == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert c2.get_kv("k") == 1
    c2.close()
    c.close()


def test_in_memory_cache():
    c = MetricCache(None)
    c.insert([node_cpu(1.0, T0)])
    c.set_kv("k", "v")
    assert c.query(kinds.NODE_CPU_USAGE, T0, T0).values == [1.0] and c.get_kv("k") == "v"
    c.close()


def test_closed_cache_refuses(tmp_path):
    c = MetricCache(str(tmp_path / "metrics.db"))
    c.close()
    c.close()
    for call in (lambda: c.insert([node_cpu(1.0, T0)]), lambda: c.query(kinds.NODE_CPU_USAGE, 0, 1),
                 lambda: c.get_kv("k"), c.gc, c.stats):
        with pytest.raises(MetricCacheError, match="closed"):
            call()


def _aside(tmp_path):
    return glob.glob(str(tmp_path / "metrics.db.corrupt-*"))


def test_garbage_file_is_moved_aside(tmp_path, caplog):
    path = tmp_path / "metrics.db"
    garbage = b"this is not a database\n" * 400
    path.write_bytes(garbage)
    with caplog.at_level(logging.WARNING, logger="koordinator.koordlet.metriccache"):
        c = MetricCache(str(path))
    aside = [p for p in _aside(tmp_path) if not p.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and open(aside[0], "rb").read() == garbage
    assert any(str(path) in r.getMessage() and aside[0] in r.getMessage() for r in caplog.records)
    c.insert([node_cpu(1.0, T0)])
    assert c.query(kinds.NODE_CPU_USAGE, T0, T0).values == [1.0]
    c.close()


def test_truncated_file_is_moved_aside(tmp_path, caplog):
    path = str(tmp_path / "metrics.db")
    c = MetricCache(path)
    for r in range(300):
        c.insert([pod_cpu(f"pod-{i}", float(i), T0 + r) for i in range(50)])
    c.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        f.truncate(size // 2)
    with caplog.at_level(logging.WARNING, logger="koordinator.koordlet.metriccache"):
        c = MetricCache(path)
    assert len(_aside(tmp_path)) == 1
    assert "moved it to" in caplog.text
    assert c.stats()["points"] == 0
    c.close()


def test_foreign_sqlite_database_is_moved_aside(tmp_path):
    path = str(tmp_path / "metrics.db")
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE something (x)")
    db.commit()
    db.close()
    c = MetricCache(path)
    assert len(_aside(tmp_path)) == 1
    c.insert([node_cpu(1.0, T0)])
    c.close()


def test_unusable_path_is_a_clear_error(tmp_path):
    d = tmp_path / "adir"
    d.mkdir()
    with pytest.raises(MetricCacheError, match="adir"):
        MetricCache(str(d))
    f = tmp_path / "afile"
    f.write_text("x")
    with pytest.raises(MetricCacheError, match="afile"):
        MetricCache(str(f / "metrics.db"))


# ---------------------------------------------------------------- threads


def test_concurrent_insert_query_gc(tmp_path):
    c = MetricCache(str(tmp_path / "metrics.db"), clock=Clock(T0 + 100))
    errors: list[BaseException] = []
    rounds = 150

    def writer(w: int) -> None:
        try:
            for r in range(rounds):
                c.insert([pod_cpu(f"w{w}-p{i}", float(r), T0 + r) for i in range(20)])
        except BaseException as exc:    # noqa: BLE001 - reported below
            errors.append(exc)

    def reader(done: threading.Event) -> None:
        try:
            while not done.is_set():
                for s in c.query_by(kinds.POD_CPU_USAGE, "pod_uid", T0, T0 + rounds).values():
                    assert s.timestamps == sorted(s.timestamps)
                c.query(kinds.POD_CPU_USAGE, T0, T0 + rounds, pod_uid="w0-p0")
                c.stats()
                c.gc()
        except BaseException as exc:    # noqa: BLE001
            errors.append(exc)

    done = threading.Event()
    writers = [threading.Thread(target=writer, args=(w,)) for w in range(4)]
    readers = [threading.Thread(target=reader, args=(done,)) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join(60)
    done.set()
    for t in readers:
        t.join(60)
    assert errors == []
    by = c.query_by(kinds.POD_CPU_USAGE, "pod_uid", T0, T0 + rounds)
    assert len(by) == 80
    assert all(s.values == [float(r) for r in range(rounds)] for s in by.values())
    c.close()


def test_corruption_found_while_running_moves_the_file_aside(tmp_path, caplog):
    path = str(tmp_path / "metrics.db")
    c = MetricCache(path, cache_kib=64)
    for r in range(400):
        c.insert([pod_cpu(f"pod-{i}", float(i), T0 + r) for i in range(50)] + [node_cpu(1.0, T0 + r)])
    c._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    size = os.path.getsize(path)
    with open(path, "r+b") as f:            # scribble over the middle of the file
        f.seek(size // 3)
        f.write(b"\xff" * (size // 3))
    with caplog.at_level(logging.WARNING, logger="koordinator.koordlet.metriccache"):
        with pytest.raises(MetricCacheError, match="malformed|not a database"):
            for _ in range(3):
                c.query_by(kinds.POD_CPU_USAGE, "pod_uid", T0, T0 + 400)
                c.query(kinds.NODE_CPU_USAGE, T0, T0 + 400)
    assert len(_aside(tmp_path)) >= 1 and "moved it to" in caplog.text
    c.insert([node_cpu(2.0, T0 + 500)])     # a fresh file took its place
    assert c.query(kinds.NODE_CPU_USAGE, T0, T0 + 1000).values == [2.0]
    c.close()


def test_bench_smoke():
    from koordinator_roles.koordlet.metriccache.bench import bench

    r = bench(pods=3, containers=2, rounds=5, gc_every=2)
    assert r["points_per_round"] == 9 + 3 * 6 and r["db"]["points"] == 5 * r["points_per_round"]
    assert r["report_pods"] == 3


def test_retention_of_a_round_with_its_own_timestamps():
    clock = Clock(T0)
    c = MetricCache(None, retention_seconds=100, clock=clock)
    c.insert([node_cpu(1.0, T0 + 1), node_cpu(2.0, T0 + 5)])    # one row spanning 4 s
    clock.now = T0 + 103                 # cutoff T0 + 3: the row still holds a live point
    assert c.gc() == 0
    assert c.query(kinds.NODE_CPU_USAGE, T0 + 3, T0 + 10).values == [2.0]
    clock.now = T0 + 106
    assert c.gc() == 2
    assert c.stats()["points"] == 0
    c.close()


def test_pod_churn_keeps_memory_bounded(tmp_path):
    # a batch node: a different pod set every round; the in-memory layout caches stay small,
    # queries still find old rounds, and gc removes what expired from file and memory
    clock = Clock(T0)
    c = MetricCache(str(tmp_path / "metrics.db"), retention_seconds=150, clock=clock)
    for r in range(300):
        c.insert([pod_cpu(f"pod-{r + i}", float(r), T0 + r) for i in range(5)])
    assert len(c._layouts) <= 64 and all(len(v) <= 4 for v in c._recent.values())
    assert c.stats()["layouts"] == 300 and c.stats()["series"] == 304
    by = c.query_by(kinds.POD_CPU_USAGE, "pod_uid", T0, T0 + 300)
    assert len(by) == 304
    assert by["pod-4"].timestamps == [T0 + r for r in range(5)]
    assert by["pod-150"].values == [float(r) for r in range(146, 151)]
    clock.now = T0 + 299
    c.gc()                                  # cutoff T0+149: rounds 0..148 go
    assert c.stats()["layouts"] == 151 and c.stats()["series"] == 155
    assert sum(len(v) for v in c._series.values()) == 155
    assert c.query(kinds.POD_CPU_USAGE, T0, T0 + 300, pod_uid="pod-152").values == [149.0, 150.0, 151.0, 152.0]
    c.close()
