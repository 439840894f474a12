"""Rate limiters: a token bucket with golang.org/x/time/rate semantics and client-go's per-item
workqueue limiters (reference runtime.md §1.3).

Per-item limiters share one interface: ``when(item) -> float`` (seconds to wait before the item
may be retried; each call counts as one more failure / reserves one token), ``forget(item)``
(the item succeeded: reset its state) and ``num_requeues(item) -> int``.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Callable, Hashable


class TokenBucket:
    """Token bucket refilled at ``qps`` tokens per second holding at most ``burst`` tokens.

    Like golang.org/x/time/rate, :meth:`reserve` always takes a token, letting the balance go
    negative; the returned delay is how long the caller must wait before acting. A storm of
    reservations therefore spaces callers out at ``1/qps``. ``qps <= 0`` means unlimited.
    Thread-safe.
    """

    def __init__(self, qps: float, burst: int, *, clock: Callable[[], float] = time.monotonic):
        qps = float(qps)
        if math.isnan(qps):
            raise ValueError(f"qps must be a number, got {qps!r}")
        self.qps = qps
        self.burst = int(burst)
        self.unlimited = qps <= 0 or math.isinf(qps)
        if not self.unlimited and self.burst < 1:
            raise ValueError(f"burst must be >= 1 when qps > 0, got {burst!r}")
        self._clock = clock
        self._lock = threading.Lock()
        self._tokens = float(self.burst)
        self._last = clock()

    def _advance(self, now: float) -> float:
        """Tokens available at ``now`` (caller holds the lock)."""
        last = self._last
        if now < last:  # a clock that went backwards refills nothing
            last = now
        tokens = self._tokens + (now - last) * self.qps
        return tokens if tokens < self.burst else float(self.burst)

    def reserve(self) -> float:
        """Take one token; return the seconds to wait before acting (0.0 if one was available)."""
        if self.unlimited:
            return 0.0
        with self._lock:
            now = self._clock()
            tokens = self._advance(now) - 1.0
            self._last = now
            self._tokens = tokens
        return -tokens / self.qps if tokens < 0 else 0.0

    def try_take(self) -> bool:
        """Take a token only if one is available now (x/time/rate ``Allow``)."""
        if self.unlimited:
            return True
        with self._lock:
            now = self._clock()
            tokens = self._advance(now)
            if tokens < 1.0:
                return False
            self._last = now
            self._tokens = tokens - 1.0
        return True

    def _cancel(self) -> None:
        """Give back a reserved token that was never used (approximates x/time/rate's Cancel)."""
        with self._lock:
            now = self._clock()
            self._tokens = min(float(self.burst), self._advance(now) + 1.0)
            self._last = now

    def wait(self, stop: threading.Event | None = None) -> bool:
        """Block until a token is ours; False (token returned) if ``stop`` was set first."""
        if stop is not None and stop.is_set():
            return False
        delay = self.reserve()
        if delay <= 0:
            return True
        if stop is None:
            time.sleep(delay)
            return True
        if stop.wait(delay):
            self._cancel()
            return False
        return True


class ItemExponentialRateLimiter:
    """Per-item exponential backoff: ``base * 2**failures`` seconds, capped at ``cap``.

    client-go's ``ItemExponentialFailureRateLimiter`` (defaults 5 ms .. 1000 s for controllers).
    """

    def __init__(self, base: float = 0.005, cap: float = 1000.0):
        if not base > 0:
            raise ValueError(f"base must be > 0 seconds, got {base!r}")
        if not cap >= base:
            raise ValueError(f"cap must be >= base ({base!r}), got {cap!r}")
        self.base = float(base)
        self.cap = float(cap)
        self._failures: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def when(self, item: Hashable) -> float:
        with self._lock:
            exp = self._failures.get(item, 0)
            self._failures[item] = exp + 1
        # 2**exp overflows a float only far beyond any cap; clamp the exponent anyway.
        if exp >= 1024:
            return self.cap
        backoff = self.base * (2.0 ** exp)
        return backoff if backoff < self.cap else self.cap

    def forget(self, item: Hashable) -> None:
        with self._lock:
            self._failures.pop(item, None)

    def num_requeues(self, item: Hashable) -> int:
        with self._lock:
            return self._failures.get(item, 0)


class BucketRateLimiter:
    """Overall (not per-item) limit: every ``when`` reserves a token from a shared bucket."""

    def __init__(self, bucket: TokenBucket):
        self.bucket = bucket

    def when(self, item: Hashable) -> float:
        return self.bucket.reserve()

    def forget(self, item: Hashable) -> None:
        pass

    def num_requeues(self, item: Hashable) -> int:
        return 0


class MaxOfRateLimiter:
    """The longest delay of several limiters; every limiter sees every call."""

    def __init__(self, *limiters):
        if not limiters:
            raise ValueError("MaxOfRateLimiter needs at least one limiter")
        self.limiters = limiters

    def when(self, item: Hashable) -> float:
        return max(limiter.when(item) for limiter in self.limiters)

    def forget(self, item: Hashable) -> None:
        for limiter in self.limiters:
            limiter.forget(item)

    def num_requeues(self, item: Hashable) -> int:
        return max(limiter.num_requeues(item) for limiter in self.limiters)


def default_controller_rate_limiter() -> MaxOfRateLimiter:
    """client-go's ``DefaultControllerRateLimiter``: max(per-item 5 ms..1000 s, bucket 10 qps burst 100)."""
    return MaxOfRateLimiter(
        ItemExponentialRateLimiter(0.005, 1000.0),
        BucketRateLimiter(TokenBucket(10.0, 100)),
    )
