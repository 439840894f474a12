"""Per-row values that follow replaced node objects (framework.rowmemo.NodeMemo, framework.rowchanges):
plugins keeping them must always answer as a fresh plugin would, whatever the cache did in between."""

from __future__ import annotations

import random

import numpy as np

from koordinator_roles.scheduler.cache import SchedulerCache
from koordinator_roles.scheduler.framework.rowchanges import NODE_OBJECTS, ROW_WRITES, ChangeCursor
from koordinator_roles.scheduler.framework.rowmemo import NodeMemo
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import CycleState
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins import imagelocality, nodeaffinity, tainttoleration


def node(rng: random.Random, name: str) -> dict:
    alloc = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    taints = [{"key": "dedicated", "value": rng.choice(["gpu", "db"]), "effect": "NoSchedule"}] if rng.random() < 0.3 else []
    images = [{"names": [f"img{i}:latest"], "sizeBytes": rng.randint(1, 900) * 1024 * 1024}
              for i in rng.sample(range(4), rng.randint(0, 3))]
    return {"metadata": {"name": name, "labels": {"zone": rng.choice(["a", "b", "c"])}},
            "spec": {"taints": taints},
            "status": {"allocatable": alloc, "capacity": alloc, "images": images}}


def pod(rng: random.Random, name: str) -> dict:
    spec: dict = {"containers": [{"name": "c", "image": f"img{rng.randrange(4)}",
                                  "resources": {"requests": {"cpu": "100m"}}}]}
    if rng.random() < 0.7:
        spec["nodeSelector"] = {"zone": rng.choice(["a", "b"])}
    if rng.random() < 0.5:
        spec["tolerations"] = [{"key": "dedicated", "value": rng.choice(["gpu", "db"]), "effect": "NoSchedule"}]
    if rng.random() < 0.5:
        spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["c"]}]}}]}}
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"}, "spec": spec}


def answers(affinity, taints, images, pi: PodInfo, snapshot: Snapshot, rows: np.ndarray) -> tuple:
    state = CycleState()
    out = []
    result, status = affinity.pre_filter(state, pi, snapshot)
    if status is None:
        out.append(affinity.filter_nodes(state, pi, snapshot, rows).passed.tolist())
    if affinity.pre_score(state, pi, snapshot, rows) is None:
        out.append(affinity.score_nodes(state, pi, snapshot, rows).tolist())
    out.append(taints.filter_nodes(state, pi, snapshot, rows).passed.tolist())
    out.append(images.score_nodes(state, pi, snapshot, rows).tolist())
    return tuple(out)


def test_kept_verdicts_and_scores_equal_a_fresh_computation_across_cycles():
    rng = random.Random(16)
    cache = SchedulerCache()
    names = [f"n{i:03d}" for i in range(60)]
    for name in names:
        cache.add_node(node(rng, name))
    snapshot = Snapshot()
    cache.update_snapshot(snapshot)
    kept = (nodeaffinity.new(None, None), tainttoleration.new(None, None), imagelocality.new(None, None))
    for cycle in range(300):
        pi = PodInfo(pod(rng, f"p{cycle}"))
        rows = snapshot.all_rows()
        fresh = (nodeaffinity.new(None, None), tainttoleration.new(None, None), imagelocality.new(None, None))
        assert answers(*kept, pi, snapshot, rows) == answers(*fresh, pi, snapshot, rows), f"cycle {cycle}"
        r = rng.random()
        if r < 0.5:
            target = rng.choice(names)
            cache.assume_pod(pi.with_node(target), target)                         # a row write, same node
        elif r < 0.85:
            cache.add_node(node(rng, rng.choice(names)))                           # a new node object
        else:
            names.append(f"extra{cycle}")
            cache.add_node(node(rng, names[-1]))                                   # a new layout
        cache.update_snapshot(snapshot)


def make_snapshot(n: int) -> Snapshot:
    alloc = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    return Snapshot([NodeInfo({"metadata": {"name": f"n{i}"}, "status": {"allocatable": alloc}}) for i in range(n)])


def replace_node(snapshot: Snapshot, row: int) -> None:
    ni = snapshot.node_infos[row]
    snapshot.update_node(NodeInfo(dict(ni.node)))


def test_node_objects_feed_ignores_rewrites_of_the_same_node():
    snapshot = make_snapshot(4)
    nodes, writes = ChangeCursor(NODE_OBJECTS), ChangeCursor(ROW_WRITES)
    assert nodes.advance(snapshot) is None and writes.advance(snapshot) is None   # first look: every row
    snapshot.update_node(snapshot.node_infos[1])                                  # same node object
    assert nodes.advance(snapshot) == [] and writes.advance(snapshot) == [1]
    replace_node(snapshot, 2)
    assert nodes.advance(snapshot) == [2] and writes.advance(snapshot) == [2]
    assert nodes.advance(snapshot) == []
    assert nodes.advance(make_snapshot(4)) is None                                # another snapshot


def test_node_memo_recomputes_only_replaced_rows():
    snapshot = make_snapshot(5)
    memo = NodeMemo(keys=2)
    calls: list[str] = []

    def per_node(ni: NodeInfo) -> int:
        calls.append(ni.name)
        return int(ni.name[1:]) * 10

    assert memo.values(snapshot, "k", per_node, np.int64).tolist() == [0, 10, 20, 30, 40]  # kept at once
    assert len(calls) == 5
    snapshot.update_node(snapshot.node_infos[3])
    replace_node(snapshot, 4)
    assert memo.values(snapshot, "k", per_node, np.int64).tolist() == [0, 10, 20, 30, 40]
    assert calls[5:] == ["n4"]
    snapshot.set_nodes(snapshot.node_infos[:3])                                   # a new layout
    assert memo.values(snapshot, "k", per_node, np.int64).tolist() == [0, 10, 20]
    assert len(calls) == 9
