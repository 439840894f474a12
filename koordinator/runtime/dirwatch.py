"""Watch one directory for changes: inotify (watchdog), a debounce, and a periodic re-check.

Used by the mounted-ConfigMap sources (:class:`~koordinator.runtime.configsource.FileConfigSource`)
and by the runtime proxy's hook-server registrations: both re-read a whole directory when anything
in it changes. The recipe (reference runtime.md §4.3): a non-recursive watch on the *directory*
(never on a file, never following symlinks), because the kubelet updates a ConfigMap volume by
swapping its ``..data`` symlink and nothing happens to the files a consumer reads. Any change arms
a short trailing debounce; a steady stream of events cannot postpone the re-read for more than
``max(1s, 5 × debounce)``. A periodic re-check covers missed events, an overflowed inotify queue or
a replaced directory (whose old inode's watch sees nothing: the watch is re-armed on the new one).
Without inotify (an exotic filesystem, the per-user watch limit reached) it polls every 5 s.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any, Callable

log = logging.getLogger("koordinator.runtime.dirwatch")

# What watchdog reports when a file is only read (our own re-reads included): not a change.
_READ_ONLY_EVENTS = frozenset({"opened", "closed_no_write"})


class DirectoryWatch:
    """Calls ``on_change()`` on its own thread after changes in ``directory`` and every ``recheck`` seconds.

    ``name`` names its threads (``name`` and ``name-watch``). ``watch`` False: no inotify, the periodic
    re-check only. ``on_change`` exceptions are logged and
    the watch goes on. :meth:`start` and :meth:`stop` are the owner's (a Runtime component's) calls.
    """

    def __init__(self, directory: str, on_change: Callable[[], None], *, name: str, debounce: float = 0.2,
                 recheck: float | None = 60.0, watch: bool = True) -> None:
        self.directory = directory
        self.on_change = on_change
        self.name = name
        self.debounce = max(float(debounce), 0.0)
        self.recheck = float(recheck) if recheck and recheck > 0 else None
        self.watch = watch
        self._cond = threading.Condition()
        self._due: float | None = None      # when the debounced call is due
        self._first: float | None = None    # first event of the pending burst (caps the debounce)
        self._stopping = False
        self._worker: threading.Thread | None = None
        self._observer: Any = None
        self._watched_inode: int | None = None

    @property
    def watching(self) -> bool:
        """Whether an inotify or polling observer runs (False with ``watch=False``)."""
        return self._observer is not None

    def start(self) -> None:
        """Start the watch (if ``watch``) and the worker; the caller reads the directory itself first."""
        if self._worker is not None:
            return
        self.arm()
        self._worker = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._worker.start()

    def arm(self) -> None:
        """Start only the watch, before the owner's first read (so no change falls between the two)."""
        if self.watch and self._observer is None:
            self._start_observer()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop watching; joins both threads within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._stop_observer(timeout)
        if self._worker is not None:
            self._worker.join(max(deadline - time.monotonic(), 0.0))

    # -- watching -------------------------------------------------------------------------

    def _start_observer(self) -> None:
        from watchdog.observers import Observer
        from watchdog.observers.polling import PollingObserver

        try:
            observer = Observer()
            self._schedule(observer)
            observer.start()
        except OSError as err:
            log.warning("cannot watch %s with inotify (%s), polling every 5s instead", self.directory, err)
            observer = PollingObserver(timeout=5.0)
            self._schedule(observer)
            observer.start()
        observer.name = f"{self.name}-watch"
        self._observer = observer

    def _schedule(self, observer: Any) -> None:
        from watchdog.events import FileSystemEventHandler

        watch = self

        class _Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type not in _READ_ONLY_EVENTS:
                    watch.changed()

        observer.unschedule_all()
        observer.schedule(_Handler(), self.directory, recursive=False)
        self._watched_inode = os.stat(self.directory).st_ino

    def _stop_observer(self, timeout: float) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            if observer.is_alive():
                observer.join(timeout)

    def _check_watch(self) -> None:
        """Re-arm the watch if the directory was replaced (the old inode's watch sees nothing)."""
        if self._observer is None:
            return
        try:
            inode = os.stat(self.directory).st_ino
        except OSError:
            return  # gone for now; the next re-check looks again
        if inode != self._watched_inode:
            log.info("watched directory replaced, watching the new one path=%s", self.directory)
            try:
                self._schedule(self._observer)
            except Exception as err:  # noqa: BLE001 - the re-check keeps reading either way
                log.warning("cannot re-arm the watch on %s: %s", self.directory, err)

    def changed(self) -> None:
        """A change in the directory (called on the observer's thread; also usable by the owner)."""
        with self._cond:
            now = time.monotonic()
            if self._first is None:
                self._first = now
            self._due = min(now + self.debounce, self._first + max(1.0, 5 * self.debounce))
            self._cond.notify()

    def _run(self) -> None:
        next_check = time.monotonic() + self.recheck if self.recheck else None
        while True:
            with self._cond:
                while not self._stopping:
                    now = time.monotonic()
                    wake = min((t for t in (self._due, next_check) if t is not None), default=None)
                    if wake is not None and now >= wake:
                        break
                    self._cond.wait(None if wake is None else wake - now)
                if self._stopping:
                    return
                now = time.monotonic()
                periodic = next_check is not None and now >= next_check
                if self._due is not None and now >= self._due:
                    self._due = self._first = None
            if periodic and self.recheck:
                next_check = time.monotonic() + self.recheck
            # Cheap (one stat), and a directory moved away reports itself through the old watch.
            self._check_watch()
            try:
                self.on_change()
            except Exception:  # noqa: BLE001 - keep watching whatever happened
                log.exception("re-reading %s failed", self.directory)
