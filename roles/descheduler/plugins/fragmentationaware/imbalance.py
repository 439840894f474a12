"""A node's imbalance: how unevenly its resources are requested (reference §1.8).

For each configured resource with a non-zero allocatable, the fraction requested
(``Σ requests / allocatable``); the imbalance is the population standard deviation of those fractions.
A node with cpu 90 % and memory 10 % requested has imbalance 0.4: its free memory is stranded.
"""

from __future__ import annotations

import math
from typing import Iterable, Mapping


def fractions(requested: Mapping[str, int], allocatable: Mapping[str, int], resources: Iterable[str]) -> list[float]:
    """Requested/allocatable per resource, skipping resources the node does not offer."""
    return [requested.get(r, 0) / allocatable[r] for r in resources if allocatable.get(r, 0) > 0]


def std(values: list[float]) -> float:
    """Population standard deviation (0 for no values)."""
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def imbalance(requested: Mapping[str, int], allocatable: Mapping[str, int], resources: Iterable[str]) -> float:
    """The node's imbalance given what its pods request."""
    return std(fractions(requested, allocatable, resources))


def without(requested: Mapping[str, int], pod: Mapping[str, int]) -> dict[str, int]:
    """``requested`` minus one pod's requests."""
    out = dict(requested)
    for r, v in pod.items():
        out[r] = out.get(r, 0) - v
    return out
