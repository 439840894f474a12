"""Object limiters (reference §1.7.7): per-workload / per-namespace migration-rate token buckets.

After each eviction the pod's key (controller UID for ``workload``, namespace for ``namespace``) consumes a token
of a bucket refilled at ``maxMigrating / duration`` per second; a key whose bucket has no whole token left is
"exceeded" (no new PMJ, and a running PMJ waits). Buckets idle for 1.5 × duration are forgotten.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable

from koordinator.apis import migration as mj
from koordinator_roles.descheduler.plugins.migration.args import MigrationControllerArgs

Obj = dict[str, Any]


class _Bucket:
    def __init__(self, rate: float, burst: int, now: float) -> None:
        self.rate, self.burst, self.tokens, self.last, self.touched = rate, burst, float(burst), now, now

    def available(self, now: float) -> float:
        return min(self.burst, self.tokens + (now - self.last) * self.rate)

    def take(self, now: float) -> None:
        self.tokens, self.last, self.touched = self.available(now) - 1.0, now, now


class ObjectLimiters:
    """The configured limiters; ``replicas(pod)`` gives a workload's expected replicas (None: unknown)."""

    def __init__(self, args: MigrationControllerArgs, replicas: Callable[[Obj], int | None],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.args = args
        self.replicas = replicas
        self.clock = clock
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(kind: str, pod: Obj) -> str | None:
        if kind == "workload":
            ref = mj.controller_ref(pod)
            return ref.get("uid") if ref else None
        return (pod.get("metadata") or {}).get("namespace")

    def _max_migrating(self, kind: str, spec: Any, pod: Obj) -> int:
        if kind == "workload":
            replicas = self.replicas(pod)
            if not replicas:
                return 0
            configured = spec.max_migrating if spec.max_migrating is not None else self.args.max_migrating_per_workload
            return mj.max_per_workload(replicas, configured)
        return spec.max_migrating if isinstance(spec.max_migrating, int) else 0

    def _expire(self, now: float) -> None:
        for key in [k for k, b in self._buckets.items()
                    if now - b.touched > 1.5 * self.args.object_limiters[k[0]].duration_seconds]:
            del self._buckets[key]

    def exceeded(self, pod: Obj) -> bool:
        """A limiter of the pod's workload or namespace has less than one token."""
        now = self.clock()
        with self._lock:
            self._expire(now)
            for kind, spec in self.args.object_limiters.items():
                key = self._key(kind, pod)
                bucket = self._buckets.get((kind, key)) if key and spec.duration_seconds > 0 else None
                if bucket is not None and bucket.available(now) - 1.0 < 0:
                    return True
        return False

    def track(self, pod: Obj) -> None:
        """Count one eviction of the pod against its limiters."""
        now = self.clock()
        with self._lock:
            for kind, spec in self.args.object_limiters.items():
                key = self._key(kind, pod)
                if not key or spec.duration_seconds <= 0:
                    continue
                max_migrating = self._max_migrating(kind, spec, pod)
                if max_migrating <= 0:
                    continue
                rate, burst = max_migrating / spec.duration_seconds, spec.burst or 1
                bucket = self._buckets.get((kind, key))
                if bucket is None:
                    bucket = self._buckets[(kind, key)] = _Bucket(rate, burst, now)
                else:
                    bucket.tokens, bucket.last = bucket.available(now), now
                    bucket.rate, bucket.burst = rate, burst
                bucket.take(now)
