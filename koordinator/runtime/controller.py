"""A controller: a work queue of keys, N worker threads and controller-runtime's reconcile
contract (reference runtime.md §1.5).

After ``reconcile(key)``:

- it raised :class:`TerminalError` → counted as an error and a terminal error, the key's backoff
  is forgotten and it is **not** requeued;
- it raised any other exception → counted as an error, requeued with the rate limiter
  (per-key exponential backoff 5 ms .. 1000 s combined with a 10 qps / burst 100 bucket); the
  error is logged once per failure with the key, the attempt number and the next delay (the
  traceback at debug level);
- it returned ``Result(requeue_after=d)`` with ``d > 0`` → backoff forgotten, key added after ``d``;
- it returned ``Result(requeue=True)`` → rate-limited requeue;
- otherwise (``None`` or an empty ``Result``) → backoff forgotten (success).

Python has no panics. Ordinary exceptions (``Exception`` subclasses) are reconcile *errors*;
``controller_runtime_reconcile_panics_total`` counts only ``BaseException``s that are not
``Exception``s (``SystemExit``, ``KeyboardInterrupt``, ``GeneratorExit`` raised inside a
reconcile), which are recovered like Go panics with ``RecoverPanic``: counted as a panic and an
error, logged with the traceback, requeued, and the worker keeps running.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from time import monotonic
from typing import Callable, Iterable

from .metrics import RuntimeMetrics
from .workqueue import WorkQueue

log = logging.getLogger("koordinator.runtime.controller")


@dataclass(frozen=True)
class Result:
    """What a reconcile asks for: nothing (done), a rate-limited retry, or a retry after a delay."""

    requeue: bool = False
    requeue_after: float | None = None


class TerminalError(Exception):
    """Raised by a reconcile for an error retrying cannot fix: counted, logged, not requeued."""


MapFunc = Callable[[dict], Iterable[str]]
Predicate = Callable[["dict | None", dict], bool]


def _object_key(obj: dict) -> str:
    """``namespace/name`` for namespaced objects, ``name`` otherwise (the informer's key)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = meta.get("name", "")
    return f"{namespace}/{name}" if namespace else name


class Controller:
    """Reconciles keys from its :attr:`queue` with ``workers`` threads.

    A key is never reconciled by two workers at once (the queue guarantees it). ``leader_gated``
    tells the Runtime to start this controller only while it holds the leader lease.
    """

    def __init__(self, name: str, reconcile: Callable[[str], Result | None], *, workers: int = 1,
                 rate_limiter=None, metrics: RuntimeMetrics | None = None, leader_gated: bool = True):
        if not name or not isinstance(name, str):
            raise ValueError(f"controller name must be a non-empty string, got {name!r}")
        if not callable(reconcile):
            raise TypeError(f"controller {name}: reconcile must be callable, got {reconcile!r}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"controller {name}: workers must be an integer >= 1, got {workers!r}")
        self.name = name
        self.reconciler = reconcile
        self.workers = workers
        self.leader_gated = bool(leader_gated)
        self.metrics = metrics if metrics is not None else RuntimeMetrics()
        self.queue = WorkQueue(name, rate_limiter=rate_limiter, metrics=self.metrics, controller=name)

        self._threads: list[threading.Thread] = []
        self._started = False
        self._stopping = threading.Event()
        self._lock = threading.Lock()

        m = self.metrics
        self._m_success = m.reconcile_total.labels(name, "success")
        self._m_error = m.reconcile_total.labels(name, "error")
        self._m_requeue = m.reconcile_total.labels(name, "requeue")
        self._m_requeue_after = m.reconcile_total.labels(name, "requeue_after")
        self._m_errors = m.reconcile_errors_total.labels(name)
        self._m_terminal = m.terminal_reconcile_errors_total.labels(name)
        self._m_panics = m.reconcile_panics_total.labels(name)
        self._m_time = m.reconcile_time_seconds.labels(name)
        self._m_active = m.active_workers.labels(name)
        m.max_concurrent_reconciles.labels(name).set(workers)
        self._m_active.set(0)

    # -- inputs -------------------------------------------------------------------------------

    def enqueue(self, key: str) -> None:
        """Ask for ``key`` to be reconciled (deduplicated while queued)."""
        self.queue.add(key)

    def watch(self, informer, map_func: MapFunc | None = None,
              predicate: Predicate | None = None) -> None:
        """Enqueue keys for the events of a SharedInformer.

        ``map_func(obj)`` turns an object into the keys to reconcile (default: the object's own
        key, ``namespace/name`` or ``name``); on an update both the old and the new object are
        mapped, so a key the object no longer maps to is reconciled too. ``predicate(old, new)``
        filters events: ``(None, obj)`` for adds, ``(old, new)`` for updates and ``(None, obj)``
        for deletes (a deleted object has no newer state to compare against). A delete seen
        only as a tombstone (``.key``/``.obj``) is mapped through its last known object, or its
        key by default.
        """
        queue = self.queue
        name = self.name

        def keys_of(obj) -> Iterable[str]:
            if map_func is None:
                return (_object_key(obj),)
            return map_func(obj) or ()

        def on_add(obj):
            try:
                if predicate is not None and not predicate(None, obj):
                    return
                for key in keys_of(obj):
                    queue.add(key)
            except Exception:
                log.exception("watch add handler failed controller=%s", name)

        def on_update(old, new):
            try:
                if predicate is not None and not predicate(old, new):
                    return
                if map_func is None:
                    queue.add(_object_key(new))
                    return
                for key in set(keys_of(old)).union(keys_of(new)):
                    queue.add(key)
            except Exception:
                log.exception("watch update handler failed controller=%s", name)

        def on_delete(obj):
            try:
                if not isinstance(obj, dict) and hasattr(obj, "key") and hasattr(obj, "obj"):
                    last = obj.obj  # DeletedFinalStateUnknown tombstone
                    if not isinstance(last, dict):
                        if map_func is None:
                            queue.add(obj.key)
                        return  # nothing a mapper or predicate could look at
                    if map_func is None:
                        if predicate is None or predicate(None, last):
                            queue.add(obj.key)
                        return
                    obj = last
                if predicate is not None and not predicate(None, obj):
                    return
                for key in keys_of(obj):
                    queue.add(key)
            except Exception:
                log.exception("watch delete handler failed controller=%s", name)

        informer.add_handler(on_add=on_add, on_update=on_update, on_delete=on_delete)

    # -- lifecycle ----------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker threads (once)."""
        with self._lock:
            if self._stopping.is_set():
                raise RuntimeError(f"controller {self.name} was stopped; create a new one")
            if self._started:
                return
            self._started = True
            for i in range(self.workers):
                t = threading.Thread(target=self._worker, name=f"controller-{self.name}-{i}",
                                     daemon=True)
                self._threads.append(t)
                t.start()
        log.info("controller started name=%s workers=%d", self.name, self.workers)

    def stop(self, timeout: float | None = None) -> bool:
        """Stop taking keys, let in-flight reconciles finish, join the workers.

        Keys still queued are not reconciled. Returns True if everything finished within
        ``timeout`` seconds (None: wait as long as it takes).
        """
        deadline = None if timeout is None else monotonic() + timeout
        self._stopping.set()
        drained = self.queue.shut_down_with_drain(timeout)
        current = threading.current_thread()
        for t in self._threads:
            if t is not current:  # a reconcile may stop its own controller
                t.join(None if deadline is None else max(0.0, deadline - monotonic()))
        alive = [t.name for t in self._threads if t.is_alive()]
        if alive or not drained:
            log.warning("controller stop timed out name=%s busy_workers=%s timeout=%s",
                        self.name, alive, timeout)
            return False
        if self._started:
            log.info("controller stopped name=%s", self.name)
        return True

    # -- workers ------------------------------------------------------------------------------

    def _worker(self) -> None:
        queue = self.queue
        stopping = self._stopping
        while True:
            key, shutdown = queue.get()
            if shutdown:
                return
            if stopping.is_set():
                queue.done(key)  # stopping: in-flight work finishes, queued work does not start
                return
            try:
                self._reconcile_one(key)
            finally:
                queue.done(key)

    def _reconcile_one(self, key: str) -> None:
        queue = self.queue
        self._m_active.inc()
        start = monotonic()
        try:
            if log.isEnabledFor(logging.DEBUG):
                log.debug("reconciling controller=%s key=%s", self.name, key)
            try:
                result = self.reconciler(key)
            except TerminalError as e:
                self._m_terminal.inc()
                self._m_errors.inc()
                self._m_error.inc()
                queue.forget(key)
                log.error("reconcile failed terminally, not requeued controller=%s key=%s error=%s",
                          self.name, key, e)
                log.debug("reconcile traceback controller=%s key=%s", self.name, key, exc_info=True)
                return
            except Exception as e:
                self._m_errors.inc()
                self._m_error.inc()
                self._requeue_after_error(key, f"{type(e).__name__}: {e}")
                log.debug("reconcile traceback controller=%s key=%s", self.name, key, exc_info=True)
                return
            except BaseException as e:
                # Recovered like a Go panic under RecoverPanic: a worker must not die silently.
                self._m_panics.inc()
                self._m_errors.inc()
                self._m_error.inc()
                self._requeue_after_error(key, f"panic {e!r}", exc_info=True)
                return

            if result is None:
                pass
            elif not isinstance(result, Result):
                self._m_errors.inc()
                self._m_error.inc()
                self._requeue_after_error(
                    key, f"reconcile returned {type(result).__name__} {result!r}, want Result or None")
                return
            elif result.requeue_after is not None and result.requeue_after > 0:
                queue.forget(key)
                queue.add_after(key, result.requeue_after)
                self._m_requeue_after.inc()
                return
            elif result.requeue:
                queue.add_rate_limited(key)
                self._m_requeue.inc()
                return
            queue.forget(key)
            self._m_success.inc()
        finally:
            self._m_time.observe(monotonic() - start)
            self._m_active.dec()

    def _requeue_after_error(self, key: str, error: str, exc_info: bool = False) -> None:
        delay = self.queue.add_rate_limited(key)
        if delay is None:
            log.error("reconcile failed controller=%s key=%s error=%s (shutting down, not requeued)",
                      self.name, key, error, exc_info=exc_info)
            return
        log.error("reconcile failed controller=%s key=%s attempt=%d retry_in=%.3fs error=%s",
                  self.name, key, self.queue.num_requeues(key), delay, error, exc_info=exc_info)
