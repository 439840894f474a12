"""CPUBurst's per-container token bucket (reference A.7.6, ``cfsQuotaBurstPeriodSeconds`` ≥ 0).

A container may keep its CFS quota raised above its limit only while it has tokens: running above
100 % of its limit spends them, running below 60 % earns them back. The bucket holds
``period × (cfsQuotaBurstPercent − 100)`` percent-seconds either way; it starts at a random level in
[0, 0.5) of that (so containers started together do not all stop bursting at once), is rebuilt when
its capacity changes and forgotten after 2 × period without a check.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass
class Bucket:
    """One container's tokens."""

    capacity: float
    tokens: float
    last: float           # time of the last check (seconds)


class BurstLimiter:
    """Token buckets by container ID; :meth:`allow` is called once per round per container."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self.buckets: dict[str, Bucket] = {}

    def allow(self, key: str, now: float, period_s: int, burst_percent: int, usage_percent: float) -> bool:
        """Whether the container ``key`` may stay above its limit, after accounting ``usage_percent``."""
        capacity = float(period_s * (burst_percent - 100))
        bucket = self.buckets.get(key)
        if bucket is None or bucket.capacity != capacity:
            bucket = self.buckets[key] = Bucket(capacity, self.rng.random() * 0.5 * capacity, now)
        seconds = int(now - bucket.last)      # whole seconds, as Koordinator
        if seconds > 0:
            if usage_percent >= 100:
                bucket.tokens -= (usage_percent - 100) * seconds
            elif usage_percent < 60:
                bucket.tokens += (100 - usage_percent) * seconds
            bucket.tokens = min(max(bucket.tokens, -capacity), capacity)
            bucket.last = now
        return bucket.tokens > 0

    def expire(self, now: float, period_s: int) -> None:
        """Forget buckets not checked for 2 × period (containers gone or no longer bursting)."""
        for key in [k for k, b in self.buckets.items() if now - b.last > 2 * max(period_s, 1)]:
            del self.buckets[key]
