"""ImageLocality: prefer nodes that already hold the pod's container images (kube-scheduler's plugin).

Score = 100 × (clamp(Σ scaled sizes, 23 MiB, 1000 MiB × containers) − 23 MiB) / (max − 23 MiB),
where each image present on the node counts ``size × (nodes having it / all nodes)`` so that an
image everywhere does not pull every pod to the same nodes.
"""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from koordinator_roles.scheduler.framework.interfaces import MAX_NODE_SCORE, ScorePlugin
from koordinator_roles.scheduler.framework.rowchanges import NODE_OBJECTS, ChangeCursor
from koordinator_roles.scheduler.framework.status import CycleState
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


def normalized_image_name(name: str) -> str:
    """The name as the runtime reports it: ``:latest`` added when no tag is given."""
    if name.rfind(":") <= name.rfind("/"):
        name += ":latest"
    return name


def _pod_images(pod: Mapping[str, Any]) -> tuple[list[str], int]:
    spec = pod.get("spec") or {}
    containers = list(spec.get("initContainers") or ()) + list(spec.get("containers") or ())
    return [normalized_image_name(c.get("image") or "") for c in containers], len(containers)


def calculate_priority(sum_scores: np.ndarray, num_containers: int) -> np.ndarray:
    """kube's ``calculatePriority`` over an array of summed image scores."""
    max_threshold = MAX_CONTAINER_THRESHOLD * num_containers
    clipped = np.clip(sum_scores, MIN_THRESHOLD, max(max_threshold, MIN_THRESHOLD))
    if max_threshold <= MIN_THRESHOLD:
        return np.zeros(len(sum_scores), dtype=np.int64)
    return MAX_NODE_SCORE * (clipped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


class _ImageIndex:
    """image name → {row: size} over a snapshot, kept up to date for rows whose node changed."""

    def __init__(self) -> None:
        self.cursor = ChangeCursor(NODE_OBJECTS)  # images are part of the node object
        self.rows_by_image: dict[str, dict[int, int]] = {}
        self.images_by_row: dict[int, dict[str, int]] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def holders(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(rows, sizes) of the nodes holding ``name``, as arrays built once per change."""
        arrays = self._arrays.get(name)
        if arrays is None:
            by_row = self.rows_by_image.get(name)
            if not by_row:
                return None
            arrays = self._arrays[name] = (np.fromiter(by_row.keys(), dtype=np.int64, count=len(by_row)),
                                           np.fromiter(by_row.values(), dtype=np.float64, count=len(by_row)))
        return arrays

    def sync(self, snapshot: Any) -> None:
        """Bring the index up to date with ``snapshot``: the rows whose node changed are read again."""
        changed = self.cursor.advance(snapshot)
        infos = snapshot.node_infos
        if changed is None:
            self.rows_by_image, self.images_by_row, self._arrays = {}, {}, {}
        for row in range(len(infos)) if changed is None else changed:
            for name in self.images_by_row.pop(row, {}):
                self._arrays.pop(name, None)
                holders = self.rows_by_image.get(name)
                if holders is not None:
                    holders.pop(row, None)
                    if not holders:
                        del self.rows_by_image[name]
            sizes = infos[row].image_sizes
            if sizes:
                self.images_by_row[row] = dict(sizes)
                for name, size in sizes.items():
                    self._arrays.pop(name, None)
                    self.rows_by_image.setdefault(name, {})[row] = size


class ImageLocality(ScorePlugin):
    """Score plugin; nodes without the pod's images score 0 without any per-node work."""

    name = NAME

    def __init__(self, handle: Any = None) -> None:
        self.handle = handle
        self._index = _ImageIndex()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        snapshot = self.handle.snapshot()
        images, n_containers = pod.cached(NAME, _pod_images)
        total = len(snapshot) or 1
        s = 0
        for name in images:
            size = node.image_sizes.get(name)
            if size is not None:
                having = sum(1 for ni in snapshot.node_infos if name in ni.image_sizes)
                s += int(size * (having / total))
        return int(calculate_priority(np.array([s], dtype=np.int64), n_containers)[0])

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        images, n_containers = pod.cached(NAME, _pod_images)
        self._index.sync(snapshot)
        total = len(snapshot)
        full: np.ndarray | None = None
        for name in images:
            held = self._index.holders(name)
            if held is None:
                continue
            if full is None:
                full = np.zeros(total, dtype=np.int64)
            held_rows, sizes = held
            # int64(float64(size) * spread), as kube truncates each image's scaled score.
            full[held_rows] += (sizes * (len(held_rows) / total)).astype(np.int64)
        if full is None:
            return np.zeros(len(rows), dtype=np.int64)
        return calculate_priority(full[rows], n_containers)


def new(args: dict | None, handle: Any) -> ImageLocality:
    """Registry factory (the plugin has no args)."""
    return ImageLocality(handle)
