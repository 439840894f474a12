"""The reflector: list, then watch from the list's resourceVersion, forever (client-go semantics).

- The list is paged (500 a page); it *replaces* what the sink holds, which is how deletions missed
  while disconnected are found.
- The watch asks for bookmarks and a server timeout (``timeoutSeconds``) drawn from [5, 10] min so
  clients do not all reconnect at once. The server ends a healthy watch at that deadline, and a
  quiet one may carry nothing at all until then (kube-apiserver's periodic bookmarks are not
  promised, and do not come to every watcher), so the read timeout is sized from the watch's own
  deadline: ``timeoutSeconds`` + ``read_timeout_margin`` of silence means a dead connection, which
  is re-watched from the last resourceVersion without a relist (client-go relies on the same
  deadline). A shorter fixed timeout would cut, and warn about, every healthy quiet watch.
- 410 Gone relists. Other failures back off exponentially (0.8 s doubling to 30 s, full jitter,
  reset after 2 min of health) and then re-watch, or relist if the list itself failed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Callable, Protocol

from koordinator.runtime.errors import ApiError, ConnectionFailed, Gone
from koordinator.runtime.kinds import Kind

log = logging.getLogger("koordinator.runtime.reflector")

Obj = dict[str, Any]


class Sink(Protocol):
    """Where a reflector delivers: a whole new content, or one change."""

    def replace(self, items: list[Obj], resource_version: str) -> None: ...

    def apply(self, event_type: str, obj: Obj) -> None: ...


class Backoff:
    """Exponential backoff with jitter that resets after a quiet period (client-go's defaults)."""

    def __init__(self, initial: float = 0.8, factor: float = 2.0, cap: float = 30.0, jitter: float = 1.0,
                 reset_after: float = 120.0) -> None:
        self.initial, self.factor, self.cap, self.jitter, self.reset_after = initial, factor, cap, jitter, reset_after
        self._current = 0.0
        self._last = 0.0

    def next(self) -> float:
        now = time.monotonic()
        if self._current == 0.0 or now - self._last > self.reset_after:
            self._current = self.initial
        else:
            self._current = min(self._current * self.factor, self.cap)
        self._last = now
        return self._current * (1.0 + random.random() * self.jitter)

    def reset(self) -> None:
        self._current = 0.0


class _VeryShortWatch(Exception):
    """The server closed a watch within a second without sending anything: back off, don't spin."""


def strip_managed_fields(obj: Obj) -> Obj:
    """Drop ``metadata.managedFields``: often the largest part of an object, and no controller reads it."""
    md = obj.get("metadata")
    if md is not None:
        md.pop("managedFields", None)
    return obj


#: Silence tolerated past a watch's server-side deadline before its connection counts as dead:
#: the server's close (and the bookmark it sends ~2 s before) may be late under load or on a slow
#: network, and that is no failure.
READ_TIMEOUT_MARGIN = 30.0


class Reflector:
    """Keeps a :class:`Sink` in step with one resource (optionally one namespace and selectors).

    ``min_watch_timeout``: each watch asks the server to end it after a random 1-2x this many
    seconds; ``read_timeout_margin``: how long past that a silent connection is given up as dead.
    """

    def __init__(self, client: Any, kind: Kind, sink: Sink, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None, page_size: int = 500,
                 min_watch_timeout: int = 300, read_timeout_margin: float = READ_TIMEOUT_MARGIN,
                 transform: Callable[[Obj], Obj] | None = strip_managed_fields,
                 backoff: Backoff | None = None) -> None:
        self.client = client
        self.kind = kind
        self.sink = sink
        self.namespace = namespace
        self.label_selector = label_selector
        self.field_selector = field_selector
        self.page_size = page_size
        self.min_watch_timeout = min_watch_timeout
        self.read_timeout_margin = read_timeout_margin
        self.transform = transform
        self.backoff = backoff or Backoff()
        self.last_sync_resource_version = ""
        self._stream: Any = None
        self._stream_lock = threading.Lock()
        self._failing = False
        self.description = kind.resource + (f" in {namespace}" if namespace else "") + (
            f" labels={label_selector}" if label_selector else "") + (
            f" fields={field_selector}" if field_selector else "")

    def run(self, stop: threading.Event) -> None:
        """List and watch until ``stop`` is set (call :meth:`interrupt` too, to cut a blocked read)."""
        while not stop.is_set():
            try:
                self._list()
                self._watch(stop)
            except Gone as err:
                log.info("watch expired, relisting resource=%s reason=%s", self.description, err.message)
            except (ApiError, _VeryShortWatch) as err:
                self._failed(stop, f"list {self.description}", err)
            except Exception as err:  # a bug (ours or a sink's) must not end the cache's life
                log.exception("reflector error resource=%s", self.description)
                self._failed(stop, f"list {self.description}", err)

    def interrupt(self) -> None:
        """Close the current watch from another thread."""
        with self._stream_lock:
            if self._stream is not None:
                self._stream.close()

    # -- list ------------------------------------------------------------------------------

    def _list(self) -> None:
        items: list[Obj] = []
        cont: str | None = None
        while True:
            try:
                page = self.client.list(self.kind, self.namespace, label_selector=self.label_selector,
                                        field_selector=self.field_selector, limit=self.page_size,
                                        continue_=cont, timeout=60)
            except Gone:
                if cont is None:
                    raise
                # The continue token expired mid-list: one unpaged list instead, as client-go's pager does.
                items, cont = [], None
                page = self.client.list(self.kind, self.namespace, label_selector=self.label_selector,
                                        field_selector=self.field_selector, timeout=120)
            items.extend(page.get("items") or ())
            meta = page.get("metadata") or {}
            cont = meta.get("continue") or None
            if cont is None:
                break
        # List items carry no apiVersion/kind; watch events do. Make cached objects uniform.
        api_version, kind, transform = self.kind.api_version, self.kind.kind, self.transform
        for obj in items:
            obj.setdefault("apiVersion", api_version)
            obj.setdefault("kind", kind)
            if transform is not None:
                transform(obj)
        self.last_sync_resource_version = meta.get("resourceVersion") or ""
        self.sink.replace(items, self.last_sync_resource_version)
        self._recovered()

    # -- watch -----------------------------------------------------------------------------

    def _watch(self, stop: threading.Event) -> None:
        while not stop.is_set():
            timeout = int(self.min_watch_timeout * (1 + random.random()))
            started = time.monotonic()
            events = 0
            try:
                # Silence is normal until the server closes the watch at ``timeout``; only silence
                # beyond it (plus the margin) says the connection died.
                stream = self.client.watch(
                    self.kind, self.namespace, resource_version=self.last_sync_resource_version,
                    label_selector=self.label_selector, field_selector=self.field_selector,
                    timeout_seconds=timeout, allow_bookmarks=True,
                    read_timeout=timeout + self.read_timeout_margin)
                with self._stream_lock:
                    self._stream = stream
                if stop.is_set():
                    stream.close()
                    return
                for event_type, obj in stream:
                    events += 1
                    self._handle(event_type, obj)
                if stop.is_set():
                    return
                if events == 0 and time.monotonic() - started < 1.0:
                    raise _VeryShortWatch(f"very short watch of {self.description}: closed in under 1 s "
                                          "with no events")
                self._recovered()
            except Gone:
                raise
            except (ConnectionFailed, _VeryShortWatch, ApiError) as err:
                if stop.is_set():
                    return
                if isinstance(err, ApiError) and not isinstance(err, ConnectionFailed) and \
                        err.status not in (429, 500, 502, 503, 504):
                    raise  # e.g. 403/404: relist after the backoff in run()
                self._failed(stop, f"watch {self.description}", err)
            finally:
                with self._stream_lock:
                    self._stream = None

    def _handle(self, event_type: str, obj: Obj) -> None:
        rv = (obj.get("metadata") or {}).get("resourceVersion")
        if event_type == "BOOKMARK":
            if rv:
                self.last_sync_resource_version = rv
            return
        if event_type not in ("ADDED", "MODIFIED", "DELETED"):
            log.warning("unknown watch event type=%s resource=%s", event_type, self.description)
            return
        if self.transform is not None:
            self.transform(obj)
        self.sink.apply(event_type, obj)
        if rv:
            self.last_sync_resource_version = rv

    # -- failure bookkeeping ----------------------------------------------------------------

    def _failed(self, stop: threading.Event, what: str, err: Exception) -> None:
        delay = self.backoff.next()
        # One warning per failure streak; the retries in between are debug chatter.
        (log.debug if self._failing else log.warning)("%s failed, retrying in %.1fs: %s", what, delay, err)
        self._failing = True
        stop.wait(delay)

    def _recovered(self) -> None:
        if self._failing:
            log.info("resumed resource=%s resourceVersion=%s", self.description, self.last_sync_resource_version)
            self._failing = False
        self.backoff.reset()
