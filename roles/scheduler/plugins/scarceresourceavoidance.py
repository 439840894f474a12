"""ScarceResourceAvoidance (Koordinator's ``scarceresourceavoidance``): keep ordinary pods off GPU nodes.

Score-only. With ``resources`` the scarce resource names::

    nodeNames = cpu, memory, and every other counted resource with allocatable > 0 on the node
    podNames  = the pod's requested names (cpu, memory, ephemeral-storage, scalars; amounts > 0)
    diff      = nodeNames - podNames          (what the node offers that the pod does not use)
    inter     = diff ∩ resources              (the scarce resources the pod would sit beside)
    score     = 100 if |diff| == 0 or |inter| == 0 else (|diff| - |inter|) * 100 // |diff|

Vectorised over snapshot rows: counts of allocatable columns above 0. When no node has any scarce
resource the pod does not ask for (the common cluster without GPUs) every node scores 100, so
PreScore returns Skip (a constant never changes the choice) and the pod costs nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from koordinator_roles.scheduler.framework.interfaces import MAX_NODE_SCORE, PreScorePlugin, ScorePlugin
from koordinator_roles.scheduler.framework.status import CycleState, Status
from koordinator_roles.scheduler.framework.types import CPU, EPHEMERAL_STORAGE, MEMORY, NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.helper.resourcenames import counted_resource_names, is_scalar_resource_name

NAME = "ScarceResourceAvoidance"
_PRE_SCORE_KEY = "PreScore" + NAME
_ALWAYS = (CPU, MEMORY)  # a node always "has" them, whatever its allocatable says


@dataclass(frozen=True)
class ScarceResourceAvoidanceArgs:
    """ScarceResourceAvoidanceArgs: ``resources``, the scarce resource names (no default)."""

    resources: tuple[str, ...] = ()


def parse_args(args: Mapping[str, Any] | None) -> ScarceResourceAvoidanceArgs:
    """Validate ``resources``; a ValueError names the field (``resources[1]``)."""
    raw = (args or {}).get("resources")
    if raw is None:
        return ScarceResourceAvoidanceArgs()
    if not isinstance(raw, list):
        raise ValueError(f"resources: Invalid value: {raw!r}: must be a list of resource names")
    for i, name in enumerate(raw):
        if not isinstance(name, str) or not name:
            raise ValueError(f"resources[{i}]: Invalid value: {name!r}: must be a resource name")
    return ScarceResourceAvoidanceArgs(tuple(dict.fromkeys(raw)))


class _Plan:
    """PreScore's result: which columns to count, for one pod."""

    __slots__ = ("pod_common_fixed", "common_cols", "scarce_fixed", "scarce_cols")

    def __init__(self, pod_common_fixed: int, common_cols: list[int], scarce_fixed: int,
                 scarce_cols: list[int]) -> None:
        self.pod_common_fixed = pod_common_fixed  # pod names among cpu/memory (always on the node)
        self.common_cols = common_cols            # other pod names: counted where the node has them
        self.scarce_fixed = scarce_fixed          # scarce cpu/memory the pod does not request
        self.scarce_cols = scarce_cols            # other scarce names the pod does not request

    def clone(self) -> "_Plan":
        return self


class ScarceResourceAvoidance(PreScorePlugin, ScorePlugin):
    """Lower the score of nodes with scarce resources the pod does not request."""

    name = NAME

    def __init__(self, args: Mapping[str, Any] | None = None, handle: Any = None) -> None:
        self.args = parse_args(args)
        self.handle = handle
        # (snapshot, its column layout, the counted columns): recomputed when either changes.
        self._counted: tuple[Any, Any, list[int]] = (None, None, [])

    def update_args(self, args: Mapping[str, Any] | None) -> None:
        """Hot reload: the new scarce names apply from the next cycle."""
        self.args = parse_args(args)

    def _counted_columns(self, snapshot: Any) -> list[int]:
        """Snapshot columns a node lists when allocatable > 0 (ephemeral-storage and scalar resources)."""
        cached_snapshot, version, cols = self._counted
        if cached_snapshot is not snapshot or version != (snapshot.columns_version, len(snapshot.columns)):
            cols = [c for name, c in snapshot.columns.items()
                    if name == EPHEMERAL_STORAGE or (name not in _ALWAYS and is_scalar_resource_name(name))]
            self._counted = (snapshot, (snapshot.columns_version, len(snapshot.columns)), cols)
        return cols

    def _counts(self, name: str, snapshot: Any) -> int | None:
        """The column of a counted name (None: not counted, or no node has it)."""
        if name != EPHEMERAL_STORAGE and not is_scalar_resource_name(name):
            return None
        return snapshot.column(name)

    def _plan(self, pod: PodInfo, snapshot: Any) -> _Plan | None:
        pod_names = counted_resource_names(pod.requests)
        scarce_fixed, scarce_cols = 0, []
        for name in self.args.resources:
            if name in pod_names:
                continue
            if name in _ALWAYS:
                scarce_fixed += 1
            else:
                col = self._counts(name, snapshot)
                if col is not None:
                    scarce_cols.append(col)
        if not scarce_fixed and not scarce_cols:
            return None  # |inter| == 0 on every node
        common_fixed, common_cols = 0, []
        for name in pod_names:
            if name in _ALWAYS:
                common_fixed += 1
            else:
                col = self._counts(name, snapshot)
                if col is not None:
                    common_cols.append(col)
        return _Plan(common_fixed, common_cols, scarce_fixed, scarce_cols)

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        if not self.args.resources:
            return Status.skip()
        plan = self._plan(pod, snapshot)
        if plan is None:
            return Status.skip()
        state.write(_PRE_SCORE_KEY, plan)
        return None

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        plan = state.read(_PRE_SCORE_KEY) or self._plan(pod, snapshot)
        n = len(rows)
        if plan is None:
            return np.full(n, MAX_NODE_SCORE, dtype=np.int64)
        alloc = snapshot.allocatable

        def present(cols: list[int]) -> np.ndarray:
            if not cols:
                return np.zeros(n, dtype=np.int64)
            return (alloc[np.ix_(rows, cols)] > 0).sum(axis=1)

        node_names = len(_ALWAYS) + present(self._counted_columns(snapshot))
        diff = node_names - (plan.pod_common_fixed + present(plan.common_cols))
        inter = plan.scarce_fixed + present(plan.scarce_cols)
        scores = (diff - inter) * MAX_NODE_SCORE // np.maximum(diff, 1)
        return np.where((diff == 0) | (inter == 0), MAX_NODE_SCORE, scores).astype(np.int64)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        """The per-node form of :meth:`score_nodes`, straight from the definition."""
        node_names = set(_ALWAYS) | {n for n, v in node.allocatable.items()
                                     if v > 0 and (n == EPHEMERAL_STORAGE or is_scalar_resource_name(n))}
        diff = node_names - set(counted_resource_names(pod.requests))
        inter = diff & set(self.args.resources)
        if not diff or not inter:
            return MAX_NODE_SCORE
        return (len(diff) - len(inter)) * MAX_NODE_SCORE // len(diff)


def new(args: dict | None, handle: Any) -> ScarceResourceAvoidance:
    """Registry factory; ``args`` is ScarceResourceAvoidanceArgs."""
    return ScarceResourceAvoidance(args, handle)
