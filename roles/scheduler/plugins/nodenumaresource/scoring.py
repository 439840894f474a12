"""LeastAllocated / MostAllocated scores (reference §2.2.7), per node and over snapshot rows.

LeastAllocated: ``Σ w·((cap − req)·100 // cap) // Σw`` (0 when req > cap); MostAllocated:
``Σ w·(min(req, cap)·100 // cap) // Σw``; a zero capacity scores 0. Extended (scalar) resources
the pod does not request are left out, weight included, as kube's resource allocation scorer does.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from koordinator_roles.scheduler.plugins.nodenumaresource.args import MOST_ALLOCATED

_NATIVE = ("cpu", "memory", "ephemeral-storage")


def counted(resources: Sequence[tuple[str, int]], pod_requests: Mapping[str, int]) -> list[tuple[str, int]]:
    """The weighted resources that take part for this pod."""
    return [(name, w) for name, w in resources if name in _NATIVE or pod_requests.get(name, 0) > 0]


def score_one(kind: str, resources: Sequence[tuple[str, int]], allocatable: Mapping[str, int],
              requested: Mapping[str, int]) -> int:
    """One node's (or NUMA set's) score; ``requested`` already includes the pod."""
    total = weights = 0
    for name, w in resources:
        cap, req = allocatable.get(name, 0), requested.get(name, 0)
        weights += w
        if cap <= 0:
            continue
        if kind == MOST_ALLOCATED:
            total += w * (min(req, cap) * 100 // cap)
        elif req <= cap:
            total += w * ((cap - req) * 100 // cap)
    return total // weights if weights else 0


def score_rows(kind: str, resources: Sequence[tuple[str, int]], snapshot: Any, rows: np.ndarray,
               pod_requests: Mapping[str, int]) -> np.ndarray:
    """:func:`score_one` over snapshot rows at once (node-level allocatable and requested)."""
    names = [name for name, _ in resources]
    if names and set(names) <= {"cpu", "memory"} and len(set(names)) == len(names):
        return _score_cpu_memory(kind, resources, snapshot, rows, pod_requests)
    n = len(rows)
    total = np.zeros(n, dtype=np.int64)
    weights = 0
    for name, w in resources:
        weights += w
        col = snapshot.column(name)
        if col is None:
            continue
        cap = snapshot.take(snapshot.allocatable[:, col], rows)
        req = snapshot.take(snapshot.requested[:, col], rows) + pod_requests.get(name, 0)
        safe = np.where(cap > 0, cap, 1)
        if kind == MOST_ALLOCATED:
            part = np.minimum(req, cap) * 100 // safe
        else:
            part = np.where(req <= cap, (cap - req) * 100 // safe, 0)
        total += w * np.where(cap > 0, part, 0)
    return total // weights if weights else total


def _score_cpu_memory(kind: str, resources: Sequence[tuple[str, int]], snapshot: Any, rows: np.ndarray,
                      pod_requests: Mapping[str, int]) -> np.ndarray:
    """The common case (cpu and/or memory only) over the snapshot's row-major cpu/memory pairs: one gather."""
    weights = dict(resources)
    w = np.array([weights.get("cpu", 0), weights.get("memory", 0)], dtype=np.int64)
    cap = snapshot.take(snapshot.cpu_memory_allocatable, rows)
    req = snapshot.take(snapshot.cpu_memory_requested, rows) + np.array(
        [pod_requests.get("cpu", 0), pod_requests.get("memory", 0)], dtype=np.int64)
    # A zero capacity scores 0 in both formulas once the divisor is made safe.
    safe = np.maximum(cap, 1)
    if kind == MOST_ALLOCATED:
        part = np.minimum(req, cap) * 100 // safe
    else:
        part = np.maximum(cap - req, 0) * 100 // safe
    return part @ w // int(w.sum())
