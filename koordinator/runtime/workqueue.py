"""A work queue with client-go's semantics (reference runtime.md §1.3).

Three structures, one lock: a FIFO of keys ready to hand out, a *dirty* set (keys that need
processing) and a *processing* map (keys handed to a worker and not yet :meth:`WorkQueue.done`).

- ``add(k)``: no-op while ``k`` is dirty (dedupe while queued). A key being processed is only
  marked dirty; :meth:`~WorkQueue.done` queues it again. So one key is never handed to two
  workers at once, and N adds during processing collapse into one more run.
- ``add_after(k, d)``: ``k`` is added once ``d`` seconds have passed; a key already waiting keeps
  the *earlier* ready time. One daemon thread per queue (started on the first delayed add) drives
  a heap of ready times.
- ``add_rate_limited(k)`` = ``add_after(k, rate_limiter.when(k))``; ``forget(k)`` resets the
  per-item backoff.
- ``shut_down()`` drops further adds and wakes blocked getters. As in client-go, keys already
  queued are still handed out; ``get`` reports ``shutdown=True`` once the queue is empty.
  Keys waiting for a delayed add are dropped. ``shut_down_with_drain(timeout)`` additionally
  waits until every key handed out has been marked done.

Metrics (labels ``name`` and ``controller``) follow client-go's ``util/workqueue/metrics.go``:
depth (keys marked dirty and not yet handed out), adds (non-deduplicated adds), queue duration
(first add -> get), work duration (get -> done), retries (every add with a non-zero delay).
Depth, unfinished-work seconds and longest-running-processor seconds are computed when the
registry is scraped, so they cost nothing on the hot path and need no refresh thread.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import logging
import threading
import weakref
from time import monotonic
from typing import Hashable

from .metrics import RuntimeMetrics
from .ratelimit import default_controller_rate_limiter

log = logging.getLogger("koordinator.runtime.workqueue")

# A lost wake-up cannot happen (every change is made under the lock the delay thread waits
# on), but like client-go we re-check the heap at least this often anyway.
_HEARTBEAT = 10.0


class WorkQueue:
    """A deduplicating, delaying, rate-limited work queue (client-go ``RateLimitingInterface``).

    ``rate_limiter`` defaults to :func:`~koordinator.runtime.ratelimit.default_controller_rate_limiter`;
    ``metrics`` to a private :class:`RuntimeMetrics`; ``controller`` (the metric label) to ``name``.
    Keys are any hashable values (controllers use ``"namespace/name"`` strings). Thread-safe.
    """

    def __init__(self, name: str, *, rate_limiter=None, metrics: RuntimeMetrics | None = None,
                 controller: str | None = None):
        if not name:
            raise ValueError(f"workqueue name must be a non-empty string, got {name!r}")
        self.name = name
        self.controller = controller or name
        self.rate_limiter = rate_limiter if rate_limiter is not None else default_controller_rate_limiter()
        self.metrics = metrics if metrics is not None else RuntimeMetrics()

        self._lock = threading.Lock()
        self._not_empty = threading.Condition(self._lock)   # getters wait here
        self._drained = threading.Condition(self._lock)     # shut_down_with_drain waits here
        self._delay_wakeup = threading.Condition(self._lock)  # the delay thread waits here
        self._queue: collections.deque = collections.deque()
        self._dirty: set = set()
        self._processing: dict = {}      # key -> monotonic time handed out
        self._add_times: dict = {}       # key -> monotonic time first added (queue latency)
        self._getters = 0                # blocked getters; lets add() skip notify() when none
        self._shutting_down = False
        self._draining = False

        self._waiting: dict = {}         # key -> (ready time, seq) of its live heap entry
        self._heap: list = []            # (ready time, seq, key); stale entries skipped
        self._seq = itertools.count()
        self._delay_thread: threading.Thread | None = None

        # Labelled children bound once: the hot path never looks labels up.
        labels = (self.name, self.controller)
        m = self.metrics
        self._m_adds = m.workqueue_adds_total.labels(*labels)
        self._m_retries = m.workqueue_retries_total.labels(*labels)
        self._m_queue_duration = m.workqueue_queue_duration_seconds.labels(*labels)
        self._m_work_duration = m.workqueue_work_duration_seconds.labels(*labels)
        # Scrape-time gauges hold only a weak reference: a dropped queue reads as 0.
        ref = weakref.ref(self)
        m.workqueue_depth.labels(*labels).set_function(
            lambda: len(q._dirty) if (q := ref()) is not None else 0)
        m.workqueue_unfinished_work_seconds.labels(*labels).set_function(
            lambda: q._unfinished_work()[0] if (q := ref()) is not None else 0.0)
        m.workqueue_longest_running_processor_seconds.labels(*labels).set_function(
            lambda: q._unfinished_work()[1] if (q := ref()) is not None else 0.0)

    # -- adding -------------------------------------------------------------------------------

    def add(self, key: Hashable) -> None:
        """Mark ``key`` as needing processing (no-op if already queued or shutting down)."""
        with self._lock:
            if self._shutting_down or key in self._dirty:
                return
            self._add_locked(key)
        self._m_adds.inc()

    def _add_locked(self, key: Hashable) -> None:
        """Add a key known not to be dirty (caller holds the lock and counts the add)."""
        self._dirty.add(key)
        if key not in self._add_times:
            self._add_times[key] = monotonic()
        if key in self._processing:
            return  # done() queues it again
        self._queue.append(key)
        if self._getters:
            self._not_empty.notify()

    def add_after(self, key: Hashable, delay: float) -> None:
        """Add ``key`` after ``delay`` seconds; a key already waiting keeps the earlier time."""
        if delay <= 0:
            self.add(key)
            return
        with self._lock:
            if self._shutting_down:
                return
            ready = monotonic() + delay
            current = self._waiting.get(key)
            if current is None or ready < current[0]:
                seq = next(self._seq)
                self._waiting[key] = (ready, seq)
                heapq.heappush(self._heap, (ready, seq, key))
                if self._delay_thread is None:
                    self._delay_thread = threading.Thread(
                        target=self._delay_loop, name=f"workqueue-{self.name}-delay", daemon=True)
                    self._delay_thread.start()
                elif self._heap[0][1] == seq:
                    self._delay_wakeup.notify()  # the new entry is the earliest
        self._m_retries.inc()

    def add_rate_limited(self, key: Hashable) -> float | None:
        """Add ``key`` after the rate limiter's delay for it; return that delay.

        Returns None (and consults no limiter) when the queue is shutting down.
        """
        if self._shutting_down:
            return None
        delay = self.rate_limiter.when(key)
        self.add_after(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        """Reset the rate limiter's failure history for ``key`` (it succeeded)."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        """How many rate-limited adds ``key`` has had since it was last forgotten."""
        return self.rate_limiter.num_requeues(key)

    def _delay_loop(self) -> None:
        lock = self._lock
        heap = self._heap
        waiting = self._waiting
        adds = 0
        with lock:
            while not self._shutting_down:
                now = monotonic()
                while heap and heap[0][0] <= now:
                    _, seq, key = heapq.heappop(heap)
                    entry = waiting.get(key)
                    if entry is None or entry[1] != seq:
                        continue  # superseded by an earlier ready time
                    del waiting[key]
                    if key not in self._dirty:
                        self._add_locked(key)
                        adds += 1
                if adds:
                    # Counting under our lock is safe: metric locks never call back into us.
                    self._m_adds.inc(adds)
                    adds = 0
                timeout = min(heap[0][0] - now, _HEARTBEAT) if heap else _HEARTBEAT
                self._delay_wakeup.wait(timeout)
        log.debug("workqueue delay thread stopped name=%s", self.name)

    # -- processing ---------------------------------------------------------------------------

    def get(self, timeout: float | None = None) -> tuple[Hashable | None, bool]:
        """Block until a key is ready; return ``(key, False)``.

        Returns ``(None, True)`` once the queue is shut down and empty, and ``(None, False)``
        if ``timeout`` seconds pass first. The caller must call :meth:`done` with the key.
        """
        with self._lock:
            queue = self._queue
            if not queue:
                deadline = None if timeout is None else monotonic() + timeout
                while not queue:
                    if self._shutting_down:
                        return None, True
                    if deadline is None:
                        remaining = None
                    else:
                        remaining = deadline - monotonic()
                        if remaining <= 0:
                            return None, False
                    self._getters += 1
                    try:
                        self._not_empty.wait(remaining)
                    finally:
                        self._getters -= 1
            key = queue.popleft()
            now = monotonic()
            self._processing[key] = now
            self._dirty.discard(key)
            added = self._add_times.pop(key, None)
        if added is not None:
            self._m_queue_duration.observe(now - added)
        return key, False

    def done(self, key: Hashable) -> None:
        """Mark ``key`` as processed; if it was added meanwhile, queue it again."""
        with self._lock:
            started = self._processing.pop(key, None)
            if started is None:
                return  # not handed out: nothing to finish (client-go would double-queue)
            if key in self._dirty:
                self._queue.append(key)
                if self._getters:
                    self._not_empty.notify()
            elif self._draining and not self._processing:
                self._drained.notify_all()
        self._m_work_duration.observe(monotonic() - started)

    def _unfinished_work(self) -> tuple[float, float]:
        """(sum, max) of the seconds the keys now being processed have been running."""
        with self._lock:
            starts = list(self._processing.values())
        if not starts:
            return 0.0, 0.0
        now = monotonic()
        return sum(now - s for s in starts), now - min(starts)

    # -- state and shutdown -------------------------------------------------------------------

    def len(self) -> int:
        """Keys ready to be handed out (neither being processed nor waiting for a delay)."""
        return len(self._queue)

    __len__ = len

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def shut_down(self) -> None:
        """Drop further adds, wake blocked getters and stop the delay thread."""
        with self._lock:
            self._shut_down_locked()
        self._join_delay_thread()

    def shut_down_with_drain(self, timeout: float | None = None) -> bool:
        """Shut down, then wait until every key handed out has been marked done.

        Returns True once drained, False if ``timeout`` seconds passed first.
        """
        with self._lock:
            self._draining = True
            self._shut_down_locked()
            deadline = None if timeout is None else monotonic() + timeout
            while self._processing:
                if deadline is None:
                    self._drained.wait()
                    continue
                remaining = deadline - monotonic()
                if remaining <= 0:
                    log.warning("workqueue drain timed out name=%s in_flight=%d timeout=%s",
                                self.name, len(self._processing), timeout)
                    drained = False
                    break
                self._drained.wait(remaining)
            else:
                drained = True
        self._join_delay_thread()
        return drained

    def _shut_down_locked(self) -> None:
        if not self._shutting_down:
            log.debug("workqueue shutting down name=%s queued=%d in_flight=%d waiting=%d",
                      self.name, len(self._queue), len(self._processing), len(self._waiting))
        self._shutting_down = True
        self._heap.clear()
        self._waiting.clear()
        self._not_empty.notify_all()
        self._delay_wakeup.notify_all()

    def _join_delay_thread(self) -> None:
        thread = self._delay_thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(5.0)
