"""The per-cycle snapshot: every node's NodeInfo plus the same facts as numpy arrays, one row per node.

The scheduling thread owns the snapshot; the cache refreshes it at the start of each cycle,
copying only the nodes that changed (:meth:`SchedulerCache.update_snapshot`). Plugins read rows
through ``rows`` index arrays (``np.ndarray[int]``) so that a filter or score runs over all
candidate nodes in a few vector operations instead of a Python loop per node.

Row order is stable while ``layout_version`` is unchanged; plugins that keep arrays of their own
aligned with the rows (LoadAwareScheduling) rebuild them when it changes. Columns of the resource
matrices are resource names (``column``); a resource first seen on a node or pod adds a column
(``columns_version`` changes).

Caches that keep per-row values across cycles learn which rows changed from two feeds kept here
(read through :mod:`koordinator_roles.scheduler.framework.rowchanges`): every rewrite of a row
(``write_seq``, ``rows_written_since``) and every replaced node object (``node_version``,
``nodes_changed_since``).
"""

from __future__ import annotations

from typing import Iterable

import numpy as np

from koordinator_roles.scheduler.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, PODS, NodeInfo

_INT64_MAX = np.iinfo(np.int64).max
_BASE_COLUMNS = (CPU, MEMORY, EPHEMERAL_STORAGE)


def _clamp(v: int) -> int:
    return v if v < _INT64_MAX else int(_INT64_MAX)


class Snapshot:
    """Nodes of one scheduling cycle: ``node_infos[row]`` and row-aligned arrays.

    - ``allocatable``/``requested``/``free``: (nodes × columns) int64, milli-units, ``column(name)`` picks
      one (cpu is column 0, memory column 1; ``cpu_memory_allocatable``/``cpu_memory_requested`` hold
      those two row-major);
    - ``non_zero_requested``: (nodes × 2) cpu and memory with kube's defaults for request-less pods;
    - ``pod_count``/``allowed_pods``: pods on the node and ``status.allocatable.pods``;
    - ``unschedulable``: ``spec.unschedulable``; ``has_taints``: any NoSchedule/NoExecute taint;
      ``has_prefer_no_schedule``: any PreferNoSchedule taint (``unschedulable_rows``, ``tainted_rows``,
      ``prefer_no_schedule_rows``: how many rows have each);
    - ``node_versions``: changes when the row's node object was replaced (plugins' per-node caches).
    """

    def __init__(self, node_infos: Iterable[NodeInfo] = ()) -> None:
        self.node_infos: list[NodeInfo] = []
        self.index: dict[str, int] = {}
        self.columns: dict[str, int] = {name: i for i, name in enumerate(_BASE_COLUMNS)}
        self.layout_version = 0
        self.columns_version = 0
        self.have_pods_with_affinity: list[NodeInfo] = []
        self.have_pods_with_required_anti_affinity: list[NodeInfo] = []
        self._node_version_counter = 0
        # Rows written since ``_log_start`` (the value of ``write_seq`` then), for per-row caches.
        self.write_seq = 0
        self._log_start = 0
        self._write_log: list[int] = []
        self._all_rows: np.ndarray | None = None
        self._allocate(0)
        self.set_nodes(list(node_infos))

    # -- reading ---------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self.node_infos)

    def get(self, name: str) -> NodeInfo | None:
        row = self.index.get(name)
        return None if row is None else self.node_infos[row]

    @property
    def node_version(self) -> int:
        """The highest value in ``node_versions``: rows above a version seen earlier have new node objects."""
        return self._node_version_counter

    def rows_written_since(self, seq: int) -> list[int] | None:
        """Rows rewritten since ``write_seq`` was ``seq`` (repeats possible); None when that is too far
        back to tell (the log is bounded): the caller recomputes every row."""
        if seq < self._log_start:
            return None
        return self._write_log[seq - self._log_start:]

    def nodes_changed_since(self, version: int) -> list[int]:
        """Rows whose node object was replaced after ``node_version`` was ``version`` (same layout).

        Versions only grow, so these are the rows stamped above ``version``; unlike
        :meth:`rows_written_since` it never loses track, and pods placed on a node do not count.
        """
        if version == self._node_version_counter:
            return []
        return np.flatnonzero(self.node_versions > version).tolist()

    def column(self, resource: str) -> int | None:
        return self.columns.get(resource)

    def all_rows(self) -> np.ndarray:
        """Every row in order; the same array object until the layout changes (see :meth:`take`)."""
        if self._all_rows is None or len(self._all_rows) != len(self.node_infos):
            self._all_rows = np.arange(len(self.node_infos), dtype=np.int64)
        return self._all_rows

    def take(self, array: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``array[rows]``, without the copy when ``rows`` is :meth:`all_rows` (filters over every node).

        ``ndarray.take`` is several times faster than fancy indexing for small gathers.
        """
        return array if rows is self._all_rows else array.take(rows, axis=0)

    def names(self, rows: Iterable[int]) -> list[str]:
        infos = self.node_infos
        return [infos[r].name for r in rows]

    # -- writing (the cache) ---------------------------------------------------------------------

    def set_nodes(self, node_infos: list[NodeInfo]) -> None:
        """Replace every row (nodes added or removed): a new layout."""
        self.node_infos = list(node_infos)
        self.index = {ni.name: i for i, ni in enumerate(self.node_infos)}
        for ni in self.node_infos:
            self._ensure_columns(ni)
        self._allocate(len(self.node_infos))
        for row, ni in enumerate(self.node_infos):
            self._write_row(row, ni)
        self.layout_version += 1
        self._all_rows = None
        self._refresh_affinity_lists()

    def update_node(self, ni: NodeInfo) -> None:
        """Replace the row of a node already present (same layout)."""
        row = self.index[ni.name]
        self.node_infos[row] = ni
        if self._ensure_columns(ni):
            self._grow_columns()
        self._write_row(row, ni)

    def refresh_affinity_lists(self) -> None:
        self._refresh_affinity_lists()

    def _refresh_affinity_lists(self) -> None:
        self.have_pods_with_affinity = [ni for ni in self.node_infos if ni.pods_with_affinity]
        self.have_pods_with_required_anti_affinity = [ni for ni in self.node_infos
                                                      if ni.pods_with_required_anti_affinity]

    def _ensure_columns(self, ni: NodeInfo) -> bool:
        added = False
        for name in (*ni.allocatable, *ni.requested):
            if name != PODS and name not in self.columns:
                self.columns[name] = len(self.columns)
                added = True
        return added

    def _allocate(self, n: int) -> None:
        width = len(self.columns)
        # Column-major: filters compare one resource over every node (a contiguous column).
        self.allocatable = np.zeros((n, width), dtype=np.int64, order="F")
        self.requested = np.zeros((n, width), dtype=np.int64, order="F")
        self.free = np.zeros((n, width), dtype=np.int64, order="F")
        # Row-major cpu/memory pairs: scores gather a few hundred rows of both at once.
        self.cpu_memory_allocatable = np.zeros((n, 2), dtype=np.int64)
        self.cpu_memory_requested = np.zeros((n, 2), dtype=np.int64)
        self.non_zero_requested = np.zeros((n, 2), dtype=np.int64)
        self.pod_count = np.zeros(n, dtype=np.int64)
        self.allowed_pods = np.zeros(n, dtype=np.int64)
        self.unschedulable = np.zeros(n, dtype=bool)
        self.has_taints = np.zeros(n, dtype=bool)
        self.has_prefer_no_schedule = np.zeros(n, dtype=bool)
        # How many rows have each flag: plugins skip looking at rows when none has it.
        self.unschedulable_rows = self.tainted_rows = self.prefer_no_schedule_rows = 0
        # Bumped when a row's node object (labels, taints, images) is replaced, so that plugin caches
        # compare one array instead of scanning every NodeInfo.
        self.node_versions = np.zeros(n, dtype=np.int64)
        self._row_nodes: list = [None] * n
        self.columns_version += 1

    def _grow_columns(self) -> None:
        width = len(self.columns)
        extra = width - self.allocatable.shape[1]
        if extra > 0:
            pad = np.zeros((self.allocatable.shape[0], extra), dtype=np.int64)
            self.allocatable = np.asfortranarray(np.hstack([self.allocatable, pad]))
            self.requested = np.asfortranarray(np.hstack([self.requested, pad]))
            self.free = np.asfortranarray(np.hstack([self.free, pad]))
            self.columns_version += 1

    def _write_row(self, row: int, ni: NodeInfo) -> None:
        if len(self._write_log) >= 4 * len(self.node_infos) + 64:
            self._log_start, self._write_log = self.write_seq, []
        self._write_log.append(row)
        self.write_seq += 1
        if self._row_nodes[row] is not ni.node:
            self._row_nodes[row] = ni.node
            self._node_version_counter += 1
            self.node_versions[row] = self._node_version_counter
        cols = self.columns
        alloc_row = self.allocatable[row]
        req_row = self.requested[row]
        alloc_row[:] = 0
        req_row[:] = 0
        for name, v in ni.allocatable.items():
            if name != PODS:
                alloc_row[cols[name]] = _clamp(v)
        for name, v in ni.requested.items():
            if name != PODS:
                req_row[cols[name]] = _clamp(v)
        self.free[row] = alloc_row - req_row
        self.cpu_memory_allocatable[row] = alloc_row[:2]
        self.cpu_memory_requested[row] = req_row[:2]
        self.non_zero_requested[row, 0] = ni.non_zero_cpu
        self.non_zero_requested[row, 1] = _clamp(ni.non_zero_memory)
        self.pod_count[row] = len(ni.pods)
        self.allowed_pods[row] = ni.allowed_pods
        effects = {t.get("effect") for t in ni.taints}
        unschedulable = bool(ni.unschedulable)
        tainted = bool(effects & {"NoSchedule", "NoExecute"})
        prefer = "PreferNoSchedule" in effects
        self.unschedulable_rows += unschedulable - bool(self.unschedulable[row])
        self.tainted_rows += tainted - bool(self.has_taints[row])
        self.prefer_no_schedule_rows += prefer - bool(self.has_prefer_no_schedule[row])
        self.unschedulable[row] = unschedulable
        self.has_taints[row] = tainted
        self.has_prefer_no_schedule[row] = prefer
