"""Why a pod fits no node: per-node filter statuses, kept as row masks until someone asks per node.

The batch filters reject thousands of nodes with a handful of reasons; the diagnosis stores
(plugin, code, reason, rows) groups and only builds per-node :class:`Status` objects when
PostFilter (preemption) asks for them. :meth:`fit_error_message` renders kube-scheduler's text:
``0/5 nodes are available: 2 Insufficient cpu, 3 node(s) had untolerated taint {a: b}. preemption: ...``.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Iterable

import numpy as np

from koordinator_roles.scheduler.framework.status import UNSCHEDULABLE_AND_UNRESOLVABLE, Status

if TYPE_CHECKING:
    from koordinator_roles.scheduler.framework.snapshot import Snapshot


class Diagnosis:
    """Filter failures of one cycle (``framework.Diagnosis``), readable as a NodeStatusReader."""

    def __init__(self, snapshot: "Snapshot") -> None:
        self._snapshot = snapshot
        self._groups: list[tuple[str, int, str, np.ndarray]] = []  # plugin, code, reason, rows
        self._statuses: dict[int, Status] = {}
        self._materialised: dict[str, Status] | None = None
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.pre_filter_msg = ""
        self.post_filter_msg = ""
        # PreFilter rejected the pod: every node has this status (kube's AbsentNodesStatus).
        self.all_nodes_status: Status | None = None

    def add_group(self, plugin: str, code: int, reason: str, rows: np.ndarray) -> None:
        if len(rows):
            self._groups.append((plugin, code, reason, rows))
            self.unschedulable_plugins.add(plugin)
            self._materialised = None

    def add(self, plugin: str, row: int, status: Status) -> None:
        status.with_plugin(plugin)
        self._statuses[row] = status
        self.unschedulable_plugins.add(plugin)
        self._materialised = None

    def is_empty(self) -> bool:
        return not self._groups and not self._statuses

    def groups(self) -> list[tuple[str, int, str, np.ndarray]]:
        """The batch filters' verdicts: (plugin, code, reason, rows) (for ``koordinator explain``)."""
        return self._groups

    def node_statuses(self) -> Iterable[tuple[int, Status]]:
        """The per-node filters' verdicts: (row, status with its plugin)."""
        return self._statuses.items()

    def reason_counts(self) -> Counter:
        counts: Counter = Counter()
        for _, _, reason, rows in self._groups:
            counts[reason] += len(rows)
        for status in self._statuses.values():
            for reason in status.reasons:
                counts[reason] += 1
        return counts

    # -- NodeStatusReader --------------------------------------------------------------------------

    def _statuses_by_name(self) -> dict[str, Status]:
        if self._materialised is None:
            infos = self._snapshot.node_infos
            out: dict[str, Status] = {}
            for plugin, code, reason, rows in self._groups:
                for row in rows.tolist():
                    name = infos[row].name
                    status = out.get(name)
                    if status is None:
                        out[name] = Status(code, reason, plugin=plugin)
                    else:
                        status.reasons.append(reason)
                        if code == UNSCHEDULABLE_AND_UNRESOLVABLE:
                            status.code = code
            for row, status in self._statuses.items():
                out[infos[row].name] = status
            self._materialised = out
        return self._materialised

    def node_status(self, node_name: str) -> Status | None:
        status = self._statuses_by_name().get(node_name)
        if status is None and self.all_nodes_status is not None:
            return self.all_nodes_status
        return status

    def node_names(self) -> Iterable[str]:
        if self.all_nodes_status is not None:
            return [ni.name for ni in self._snapshot.node_infos]
        return list(self._statuses_by_name())

    def unresolvable(self, node_name: str) -> bool:
        status = self.node_status(node_name)
        return status is not None and status.code == UNSCHEDULABLE_AND_UNRESOLVABLE

    # -- messages ----------------------------------------------------------------------------------

    def fit_error_message(self, num_all_nodes: int) -> str:
        """kube-scheduler's ``FitError.Error()``."""
        msg = f"0/{num_all_nodes} nodes are available:"
        if self.pre_filter_msg:
            msg += f" {self.pre_filter_msg}."
        else:
            parts = sorted(f"{n} {reason}" for reason, n in self.reason_counts().items())
            if parts:
                msg += f" {', '.join(parts)}."
        if self.post_filter_msg:
            msg += f" {self.post_filter_msg}"
        return msg
