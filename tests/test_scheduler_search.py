"""The feasible-node search of a scheduling cycle (kube-scheduler's findNodesThatPassFilters): how many
nodes it keeps (adaptive percentageOfNodesToScore), from which node it starts, where the next cycle
starts, and that stopping early in big clusters changes none of that."""

from __future__ import annotations

import random

import numpy as np
import pytest

from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.interfaces import BatchFilterResult, Failure, FilterPlugin
from koordinator_roles.scheduler.framework.registry import Registry
from koordinator_roles.scheduler.framework.runtime import Framework, num_feasible_nodes_to_find
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE, CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from tests.test_scheduler_preemption import make_profile


class MaskFilter(FilterPlugin):
    """Passes the nodes whose row is True in ``mask``; records which rows it was asked about."""

    name = "MaskFilter"

    def __init__(self) -> None:
        self.mask = np.zeros(0, dtype=bool)
        self.asked = 0

    def filter(self, state, pod, node: NodeInfo) -> Status | None:
        raise AssertionError("the batch path is expected")

    def filter_nodes(self, state, pod, snapshot, rows: np.ndarray) -> BatchFilterResult:
        self.asked += len(rows)
        passed = self.mask[rows]
        return BatchFilterResult(passed, [Failure(UNSCHEDULABLE, "node(s) masked out", ~passed)])


def framework(n: int) -> tuple[Framework, MaskFilter, Snapshot]:
    nodes = [NodeInfo({"metadata": {"name": f"n{i:04d}"}, "status": {"allocatable": {"cpu": "4"}}})
             for i in range(n)]
    snapshot = Snapshot(nodes)
    plugin = MaskFilter()
    fwk = Framework(make_profile(["MaskFilter"]), Registry({"MaskFilter": lambda args, handle: plugin}),
                    PluginHandle(snapshot_source=lambda: snapshot))
    return fwk, plugin, snapshot


def reference(mask: np.ndarray, start: int, want: int) -> tuple[list[int], int]:
    """kube's sequential semantics: nodes in order from ``start``, stop at the ``want``-th feasible one."""
    n = len(mask)
    found: list[int] = []
    for k in range(n):
        row = (start + k) % n
        if mask[row]:
            found.append(row)
            if len(found) == want:
                return found, (start + k + 1) % n
    return found, start % n


POD = PodInfo({"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}})


@pytest.mark.parametrize("n", [50, 300, 1000, 5000])
@pytest.mark.parametrize("density", [1.0, 0.9, 0.3, 0.02, 0.0])
def test_search_matches_kube_semantics_over_consecutive_cycles(n, density):
    fwk, plugin, snapshot = framework(n)
    rng = random.Random(n * 1000 + int(density * 100))
    want = num_feasible_nodes_to_find(None, n)
    start = 0
    for cycle in range(6):
        plugin.mask = np.array([rng.random() < density for _ in range(n)], dtype=bool)
        fwk.next_start_node_index = start
        diagnosis = Diagnosis(snapshot)
        got = fwk.find_nodes_that_fit(CycleState(), POD, snapshot, None, diagnosis)
        expected, next_start = reference(plugin.mask, start, want)
        assert got.tolist() == expected, f"cycle {cycle}"
        assert fwk.next_start_node_index == next_start, f"cycle {cycle}"
        start = next_start + rng.randrange(n)  # and from anywhere, wrapping around the end


def test_big_cluster_stops_after_enough_feasible_nodes():
    fwk, plugin, snapshot = framework(5000)
    plugin.mask = np.ones(5000, dtype=bool)
    want = num_feasible_nodes_to_find(None, 5000)
    assert want == 500
    fwk.next_start_node_index = 4800
    got = fwk.find_nodes_that_fit(CycleState(), POD, snapshot, None, Diagnosis(snapshot))
    assert got.tolist() == list(range(4800, 5000)) + list(range(0, 300))
    # A quarter more than needed is looked at, not the 5,000 nodes.
    assert plugin.asked == 625
    assert fwk.next_start_node_index == 300


def test_unschedulable_pod_is_diagnosed_on_every_node():
    fwk, plugin, snapshot = framework(5000)
    plugin.mask = np.zeros(5000, dtype=bool)
    plugin.mask[[10, 4000]] = True
    fwk.next_start_node_index = 4990
    diagnosis = Diagnosis(snapshot)
    got = fwk.find_nodes_that_fit(CycleState(), POD, snapshot, None, diagnosis)
    assert got.tolist() == [10, 4000]
    assert plugin.asked == 5000
    assert fwk.next_start_node_index == 4990
    assert diagnosis.reason_counts() == {"node(s) masked out": 4998}
