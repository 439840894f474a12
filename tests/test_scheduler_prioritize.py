"""The Score phase of a cycle (Framework.prioritize): PreScore skips, per-node and batch Score plugins,
NormalizeScore, the range check naming the offending plugin, and the weighted sum with reloaded weights."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.interfaces import PreScorePlugin, ScorePlugin
from koordinator_roles.scheduler.framework.registry import Registry
from koordinator_roles.scheduler.framework.runtime import FilterError, Framework
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import SKIP, CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo

POD = PodInfo({"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}})


class RowScore(ScorePlugin):
    """Batch scores from a table indexed by row."""

    def __init__(self, name: str, table: list[int]) -> None:
        self.name = name
        self.table = np.array(table, dtype=np.int64)

    def score(self, state, pod, node):
        raise AssertionError("the batch path is expected")

    def score_nodes(self, state, pod, snapshot, rows):
        return self.table[rows]


class NodeScore(ScorePlugin, PreScorePlugin):
    """Per-node scores (no batch method) doubled by NormalizeScore; PreScore may ask to be skipped."""

    name = "NodeScore"

    def __init__(self) -> None:
        self.skip = False

    def pre_score(self, state, pod, snapshot, rows):
        return Status(SKIP) if self.skip else None

    def score(self, state, pod, node: NodeInfo) -> int:
        return int(node.name[1:])

    def normalize_score(self, state, pod, snapshot, rows, scores):
        scores *= 2
        return None


def profile(weights: dict[str, int]) -> SimpleNamespace:
    names = list(weights)

    def plugins_at(point, ok):
        if point not in ("score", "preScore"):
            return []
        return [SimpleNamespace(name=n, weight=weights[n]) for n in names if ok(n, point)]

    return SimpleNamespace(scheduler_name="koord-scheduler", percentage_of_nodes_to_score=None, index=0,
                           all_plugin_names=lambda: names, plugin_args={}, plugin_config_index={},
                           plugins_at=plugins_at)


def setup(a: list[int], b: list[int], weights: dict[str, int]):
    snapshot = Snapshot([NodeInfo({"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "4"}}})
                         for i in range(len(a))])
    plugins = {"A": RowScore("A", a), "B": RowScore("B", b), "NodeScore": NodeScore()}
    registry = Registry({name: (lambda p: lambda args, handle: p)(p) for name, p in plugins.items()})
    fwk = Framework(profile(weights), registry, PluginHandle(snapshot_source=lambda: snapshot))
    return fwk, plugins, snapshot


def test_weighted_sum_of_batch_per_node_and_normalized_scores():
    fwk, plugins, snapshot = setup([10, 20, 30, 40], [100, 0, 50, 1], {"A": 2, "B": 1, "NodeScore": 3})
    rows = np.array([3, 1, 2], dtype=np.int64)
    got_rows, total = fwk.prioritize(CycleState(), POD, snapshot, rows)
    assert got_rows.tolist() == [3, 1, 2]
    # A*2 + B + (row*2)*3
    assert total.tolist() == [40 * 2 + 1 + 18, 20 * 2 + 0 + 6, 30 * 2 + 50 + 12]
    # A PreScore skip leaves the plugin out of the sum (and of the next cycles only when it skips again).
    plugins["NodeScore"].skip = True
    _, total = fwk.prioritize(CycleState(), POD, snapshot, rows)
    assert total.tolist() == [81, 40, 110]
    plugins["NodeScore"].skip = False
    _, total = fwk.prioritize(CycleState(), POD, snapshot, rows)
    assert total.tolist() == [99, 46, 122]


def test_reloaded_weights_apply_to_the_next_cycle():
    fwk, _, snapshot = setup([10, 20], [1, 2], {"A": 1, "B": 1, "NodeScore": 1})
    rows = np.array([0, 1], dtype=np.int64)
    assert fwk.prioritize(CycleState(), POD, snapshot, rows)[1].tolist() == [11, 24]
    fwk.reload(profile({"A": 5, "B": 1, "NodeScore": 1}), None)
    assert fwk.prioritize(CycleState(), POD, snapshot, rows)[1].tolist() == [51, 104]


@pytest.mark.parametrize("a, b, culprit, value", [
    ([10, 101], [0, 0], "A", 101),
    ([10, 20], [0, -1], "B", -1),
    ([10, 200], [-5, 0], "A", 200),          # the first plugin in order is the one named
])
def test_out_of_range_score_names_the_plugin(a, b, culprit, value):
    fwk, _, snapshot = setup(a, b, {"A": 1, "B": 1, "NodeScore": 1})
    with pytest.raises(FilterError) as err:
        fwk.prioritize(CycleState(), POD, snapshot, np.array([0, 1], dtype=np.int64))
    assert err.value.status.message() == (f"plugin {culprit!r} returns an invalid score {value}, it should in "
                                          f"the range of [0, 100] after normalizing")
    assert err.value.status.plugin == culprit
