"""Per pod class score arrays kept across cycles (framework.classmemo): they must always equal a fresh
computation over the rows asked for, whatever the cache did to the nodes in between."""

from __future__ import annotations

import random

import numpy as np
import pytest

from koordinator_roles.scheduler.cache import SchedulerCache
from koordinator_roles.scheduler.framework.rowmemo import ClassMemo
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import CycleState
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins import noderesources


def node(name: str, cpu: str, memory: str) -> dict:
    alloc = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"metadata": {"name": name}, "status": {"allocatable": alloc, "capacity": alloc}}


def pod(name: str, cpu: str | None, memory: str | None, node_name: str = "") -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    spec: dict = {"containers": [{"name": "c", "resources": {"requests": requests}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


PLUGINS = [
    ("fit-least", lambda: noderesources.new(None, None)),
    ("fit-weighted", lambda: noderesources.new(
        {"scoringStrategy": {"type": "LeastAllocated",
                             "resources": [{"name": "memory", "weight": 1}, {"name": "cpu", "weight": 3}]}}, None)),
    ("balanced", lambda: noderesources.new_balanced_allocation(None, None)),
]


def random_node(rng: random.Random, name: str) -> dict:
    r = rng.random()
    if r < 0.05:
        return node(name, "0", f"{rng.randint(1, 64)}Gi")          # no cpu: outside the fast paths
    if r < 0.08:
        return node(name, str(rng.randint(1, 64)), "0")
    if r < 0.1:
        return node(name, "100000000", "900Pi")                    # beyond the plain-Python limit
    return node(name, f"{rng.randint(500, 64000)}m", f"{rng.randint(1, 256)}Gi")


@pytest.mark.parametrize("label, make", PLUGINS, ids=[p[0] for p in PLUGINS])
def test_kept_scores_equal_a_fresh_computation_across_cycles(label, make):
    rng = random.Random(label)
    cache = SchedulerCache()
    names = [f"n{i:03d}" for i in range(120)]
    for name in names:
        cache.add_node(random_node(rng, name))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    plugin = make()
    classes = [("250m", "512Mi"), ("2", "4Gi"), ("100m", None), ("7", "30Gi")]
    placed: list[PodInfo] = []
    for cycle in range(400):
        cpu, memory = rng.choice(classes)
        pi = PodInfo(pod(f"p{cycle}", cpu, memory))
        n = len(snapshot)
        rows = (snapshot.all_rows() if rng.random() < 0.2 else
                np.array(sorted(rng.sample(range(n), rng.randint(1, n))), dtype=np.int64))
        state, fresh_state = CycleState(), CycleState()
        fresh = make()
        if plugin.pre_score(state, pi, snapshot, rows) is not None:
            continue
        fresh.pre_score(fresh_state, pi, snapshot, rows)
        got = plugin.score_nodes(state, pi, snapshot, rows)
        expected = fresh.score_nodes(fresh_state, pi, snapshot, rows)
        assert got.tolist() == expected.tolist(), f"cycle {cycle}"
        # What the scheduler and its informers do to the cache between two cycles.
        r = rng.random()
        if r < 0.6:
            target = rng.choice([ni.name for ni in snapshot.node_infos])
            assumed = pi.with_node(target)
            cache.assume_pod(assumed, target)
            placed.append(assumed)
        elif r < 0.75 and placed:
            cache.forget_pod(placed.pop(rng.randrange(len(placed))))
        elif r < 0.85:
            cache.add_node(random_node(rng, rng.choice(names)))      # an update of an existing node
        elif r < 0.9:
            name = f"extra{cycle}"
            names.append(name)
            cache.add_node(random_node(rng, name))                   # a new row: new layout
        else:
            cache.add_pod(pod(f"bound{cycle}", "1", "1Gi", node_name=rng.choice(names)))
        cache.update_snapshot(snapshot)
    assert plugin._scores_memo._entries, "the classes were never kept"


def make_snapshot(n: int) -> Snapshot:
    return Snapshot([NodeInfo(node(f"n{i}", "4", "8Gi")) for i in range(n)])


class Counting:
    """A memo over ``row * 10 + key`` that counts how it was computed."""

    def __init__(self) -> None:
        self.full = 0
        self.rows: list[int] = []
        self.memo = ClassMemo(self.compute, self.one_row, classes=2)

    def compute(self, snapshot, rows, key):
        self.full += 1
        return rows * 10 + key

    def one_row(self, snapshot, row, key):
        self.rows.append(row)
        return row * 10 + key


def test_kept_from_the_second_ask_and_refreshed_row_by_row():
    snapshot = make_snapshot(5)
    c = Counting()
    assert c.memo.values(snapshot, 1) is None                       # first time: the caller computes
    assert c.memo.values(snapshot, 1).tolist() == [1, 11, 21, 31, 41]
    assert c.full == 1
    ni = snapshot.node_infos[3]
    snapshot.update_node(ni)
    snapshot.update_node(ni)
    assert c.memo.values(snapshot, 1).tolist() == [1, 11, 21, 31, 41]
    assert c.rows == [3] and c.full == 1                            # one row, once
    c.memo.values(snapshot, 1)
    assert c.rows == [3]                                            # nothing written since


def test_rebuilt_after_the_log_or_the_layout_or_the_snapshot_moved_on():
    snapshot = make_snapshot(4)
    c = Counting()
    c.memo.values(snapshot, 0)
    c.memo.values(snapshot, 0)
    for _ in range(200):                                             # more writes than the log keeps
        snapshot.update_node(snapshot.node_infos[0])
    c.memo.values(snapshot, 0)
    assert c.full == 2 and c.rows == []
    snapshot.set_nodes(snapshot.node_infos + [NodeInfo(node("n4", "4", "8Gi"))])
    assert c.memo.values(snapshot, 0) is not None and c.full == 3   # kept class, new layout
    other = make_snapshot(5)
    assert c.memo.values(other, 0).tolist() == [0, 10, 20, 30, 40] and c.full == 4


def test_least_recently_used_class_is_dropped():
    snapshot = make_snapshot(3)
    c = Counting()
    for key in (1, 2, 1, 2, 3, 3):                                   # keeps 2 classes: 3 evicts 1
        c.memo.values(snapshot, key)
    assert c.full == 3
    c.memo.values(snapshot, 2)
    assert c.full == 3
    c.memo.values(snapshot, 1)                                       # seen before: rebuilt at once
    assert c.full == 4
