"""First-fit search over target nodes by headroom, in O(log n) per query instead of a scan.

LowNodeLoad tries every candidate pod against the target nodes *in order* and takes the first one that
stays under its high thresholds with the pod's usage added; accepted pods stay reserved on that target.
With thousands of candidates and targets filling up, a plain scan re-checks every full target for every
later pod (quadratic). This tree keeps, per subtree, the largest headroom of each resource, so subtrees
where no target has room for the pod in some resource are skipped — the result is exactly the first
fitting target in order.
"""

from __future__ import annotations

from typing import Callable

_NONE = -(1 << 62)  # headroom of the padding leaves: nothing fits there


class FirstFit:
    """Targets ``0..n-1`` with a headroom vector each (one entry per resource, same order everywhere)."""

    def __init__(self, headrooms: list[list[int]], width: int) -> None:
        self.n = len(headrooms)
        self.width = width
        size = 1
        while size < max(self.n, 1):
            size *= 2
        self.size = size
        # maxes[j][k]: the largest headroom of resource j among the targets under tree node k.
        self.maxes = [[_NONE] * (2 * size) for _ in range(width)]
        for j in range(width):
            m = self.maxes[j]
            for i, h in enumerate(headrooms):
                m[size + i] = h[j]
            for k in range(size - 1, 0, -1):
                a, b = m[2 * k], m[2 * k + 1]
                m[k] = a if a > b else b

    def first(self, need: list[int], accept: Callable[[int], bool]) -> int | None:
        """The first target in order with headroom ≥ ``need`` in every resource that ``accept`` takes."""
        maxes = self.maxes
        pairs = [(maxes[j], need[j]) for j in range(self.width)]
        size = self.size
        stack = [1]
        pop, push = stack.pop, stack.append
        while stack:
            k = pop()
            for m, v in pairs:
                if m[k] < v:
                    break
            else:
                if k < size:
                    push(2 * k + 1)
                    push(2 * k)
                    continue
                i = k - size
                if i < self.n and accept(i):
                    return i
        return None

    def set(self, i: int, headroom: list[int]) -> None:
        """Target ``i``'s headroom changed (a pod was reserved on it)."""
        k0 = self.size + i
        for j in range(self.width):
            m = self.maxes[j]
            k = k0
            m[k] = headroom[j]
            k //= 2
            while k:
                a, b = m[2 * k], m[2 * k + 1]
                best = a if a > b else b
                if m[k] == best:
                    break
                m[k] = best
                k //= 2
