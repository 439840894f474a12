"""The NUMA topology manager (reference §2.2.6): hints, merge, admission and the per-NUMA split.

NUMA node sets are bitmasks (bit i = NUMA node i). For each requested resource present in the
NUMA zones, every non-empty subset of NUMA nodes is a hint when every node in it has the
resource and the request fits in what those nodes have left; hints of the minimal size are
preferred (all of them under Restricted). Hints of the resources are merged as the kubelet does
and the best one is admitted according to the policy.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Mapping

from koordinator.apis import numa
from koordinator_roles.scheduler.plugins.nodenumaresource.accumulator import AllocationError

INSUFFICIENT_NUMA = "node(s) Insufficient NUMA Node resources"


@dataclass(frozen=True)
class Hint:
    """A NUMA node set and whether it is preferred; ``score`` breaks ties between equal widths."""

    mask: int
    preferred: bool
    score: int = 0

    @property
    def width(self) -> int:
        return bin(self.mask).count("1")


def mask_nodes(mask: int) -> list[int]:
    out, i = [], 0
    while mask >> i:
        if (mask >> i) & 1:
            out.append(i)
        i += 1
    return out


def _mask_of(nodes: list[int]) -> int:
    m = 0
    for n in nodes:
        m |= 1 << n
    return m


def generate_hints(numa_nodes: list[int], allocatable: Mapping[int, Mapping[str, int]],
                   used: Mapping[int, Mapping[str, int]], request: Mapping[str, int], policy: str,
                   exclusive_required: bool, single: set[int], shared: set[int],
                   cpu_fits: Callable[[list[int]], bool] | None,
                   score: Callable[[dict[str, int], dict[str, int]], int]) -> dict[str, list[Hint]]:
    """Per requested resource, the NUMA masks that can hold it (empty list: none can)."""
    out: dict[str, list[Hint]] = {}
    subsets = [list(c) for k in range(1, len(numa_nodes) + 1) for c in itertools.combinations(numa_nodes, k)]
    for res, amount in request.items():
        if amount <= 0 or not any(res in allocatable.get(n, {}) for n in numa_nodes):
            continue
        feasible: list[tuple[list[int], int]] = []
        for nodes in subsets:
            if any(allocatable.get(n, {}).get(res, 0) <= 0 for n in nodes):
                continue
            total = sum(allocatable[n][res] for n in nodes)
            taken = sum(used.get(n, {}).get(res, 0) for n in nodes)
            if total - taken < amount:
                continue
            if res == "cpu" and cpu_fits is not None and not cpu_fits(nodes):
                continue
            alloc = {r: sum(allocatable.get(n, {}).get(r, 0) for n in nodes) for r in request}
            req = {r: sum(used.get(n, {}).get(r, 0) for n in nodes) for r in request}
            feasible.append((nodes, score(alloc, req)))
        min_width = min((len(n) for n, _ in feasible), default=0)
        hints = []
        for nodes, s in feasible:
            preferred = len(nodes) == min_width or policy == numa.NUMA_POLICY_RESTRICTED
            if exclusive_required and preferred:
                if len(nodes) > 1 and any(n in single for n in nodes):
                    preferred = False
                elif len(nodes) == 1 and nodes[0] in shared:
                    preferred = False
            hints.append(Hint(_mask_of(nodes), preferred, s))
        out[res] = hints
    return out


def merge_hints(numa_nodes: list[int], hints: Mapping[str, list[Hint]]) -> Hint:
    """The best merged hint (kubelet's merge); the all-nodes non-preferred hint when nothing merges.

    A combination of one hint per resource merges into the AND of their masks, and is dropped when
    that is narrower than one of them. So a surviving combination has the same mask M for every
    resource: the candidates are the masks every resource has a hint for, preferred when each of
    those hints is, scored by their sum. (Same result as the cartesian product, in linear time.)
    """
    default = _mask_of(numa_nodes)
    lists = list(hints.values())
    if not lists:
        return Hint(default, True)
    by_mask: dict[int, tuple[bool, int, int]] = {}  # mask -> (all preferred, score sum, resources seen)
    for hs in lists:
        for h in hs:
            preferred, score, seen = by_mask.get(h.mask, (True, 0, 0))
            by_mask[h.mask] = (preferred and h.preferred, score + h.score, seen + 1)
    best: Hint | None = None
    for mask, (preferred, score, seen) in by_mask.items():
        if seen != len(lists) or mask & default != mask:
            continue
        cand = Hint(mask, preferred, score)
        if best is None or _better(cand, best):
            best = cand
    return best if best is not None else Hint(default, False)


def _better(a: Hint, b: Hint) -> bool:
    if a.preferred != b.preferred:
        return a.preferred
    if a.width != b.width:
        return a.width < b.width
    return a.score > b.score


def admit(policy: str, hints: Mapping[str, list[Hint]], best: Hint) -> str:
    """"" when the policy admits ``best``, else the reason."""
    if policy == numa.NUMA_POLICY_BEST_EFFORT or policy == numa.NUMA_POLICY_NONE:
        return ""
    for res, hs in hints.items():
        if not hs:
            return f"Unsatisfied NUMA {res}"
    if not best.preferred:
        return INSUFFICIENT_NUMA
    if policy == numa.NUMA_POLICY_SINGLE_NUMA_NODE and best.width != 1:
        return INSUFFICIENT_NUMA
    return ""


def split_request(nodes: list[int], allocatable: Mapping[int, Mapping[str, int]],
                  used: Mapping[int, Mapping[str, int]], request: Mapping[str, int],
                  granule: Mapping[str, int] | None = None,
                  available_override: Mapping[str, Mapping[int, int]] | None = None) -> dict[int, dict[str, int]]:
    """Spread each resource of ``request`` over ``nodes`` as evenly as availability allows.

    Nodes are visited by ascending availability, each asked for ``remaining / nodes left`` (in
    whole ``granule`` units, e.g. whole CPUs or cores for a cpuset); AllocationError
    "Insufficient NUMA <resource>" on shortage.
    """
    granule = granule or {}
    out: dict[int, dict[str, int]] = {n: {} for n in nodes}
    for res, amount in request.items():
        if amount <= 0 or not any(res in allocatable.get(n, {}) for n in nodes):
            continue
        unit = granule.get(res, 1)
        override = (available_override or {}).get(res)

        def avail(n: int) -> int:
            free = allocatable.get(n, {}).get(res, 0) - used.get(n, {}).get(res, 0)
            if override is not None:
                free = min(free, override.get(n, 0))
            return max(0, free) // unit * unit

        order = sorted(nodes, key=lambda n: (avail(n), n))
        remaining = -(-amount // unit) * unit if unit > 1 else amount
        for i, n in enumerate(order):
            left = len(order) - i
            want = remaining if left == 1 else (remaining // left) // unit * unit
            if left > 1 and want == 0 and remaining > 0:
                want = min(unit, remaining)
            take = min(want, avail(n)) if left > 1 else remaining
            if left == 1 and take > avail(n):
                raise AllocationError(f"Insufficient NUMA {res}")
            if take > 0:
                out[n][res] = take
            remaining -= take
        if remaining > 0:
            raise AllocationError(f"Insufficient NUMA {res}")
    return {n: r for n, r in out.items() if r}
