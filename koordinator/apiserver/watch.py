"""Watch streams: newline-delimited JSON events over a chunked HTTP response.

A stream filters each stored change through its namespace and selectors the way the real
server does: an object that stops matching arrives as DELETED, one that starts matching as
ADDED. Events produced in one event-loop iteration go out as one chunk. A client that
reads too slowly to keep up is disconnected once its unsent backlog passes a bound, so
writers are never held back by it; it re-watches from its last revision (or relists on 410).
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import orjson

from koordinator.apiserver.http import HttpConnection
from koordinator.apiserver.store import ADDED, DELETED, MODIFIED, Entry, Event, Store
from koordinator.apis.selectors import FieldSelector, LabelSelector

INITIAL_EVENTS_END = "k8s.io/initial-events-end"


class WatchStream:
    """One client's watch on one resource."""

    def __init__(
        self,
        store: Store,
        conn: HttpConnection,
        storage: str,
        *,
        namespace: str | None,
        labels: LabelSelector | None,
        fields: FieldSelector | None,
        start_rv: int,
        encode: Callable[[Entry], bytes],
        bookmark_object: Callable[[int, dict[str, str] | None], Any] | None,
        bookmark_interval: float,
        timeout: float,
        max_backlog: int,
    ) -> None:
        self.store = store
        self.conn = conn
        self.storage = storage
        self.namespace = namespace
        self.labels = labels
        self.fields = fields
        self.start_rv = start_rv
        self.last_rv = start_rv
        self._encode = encode
        self._bookmark_object = bookmark_object
        self._bookmark_interval = bookmark_interval
        self._timeout = timeout
        self._max_backlog = max_backlog
        self._pending: list[bytes] = []
        self._flush_scheduled = False
        self._timers: list[asyncio.TimerHandle] = []
        self.active = False

    # -- filtering -------------------------------------------------------------

    def matches(self, entry: Entry) -> bool:
        if self.namespace is not None and entry.fields.get("metadata.namespace") != self.namespace:
            return False
        if self.labels is not None and not self.labels.matches(entry.labels):
            return False
        if self.fields is not None and not self.fields.matches(entry.fields):
            return False
        return True

    def deliver(self, ev: Event) -> None:
        """Translate one stored change into what this watcher sees (if anything)."""
        if ev.type == ADDED:
            if self.matches(ev.new):
                self._send(ADDED, ev.new)
        elif ev.type == MODIFIED:
            now = self.matches(ev.new)
            before = ev.old is not None and self.matches(ev.old)
            if now and before:
                self._send(MODIFIED, ev.new)
            elif now:
                self._send(ADDED, ev.new)
            elif before:
                self._send(DELETED, ev.new)
        elif ev.type == DELETED:
            if ev.old is not None and self.matches(ev.old):
                self._send(DELETED, ev.new)
        self.last_rv = ev.rv

    # -- output ----------------------------------------------------------------

    def _send(self, type_: str, entry: Entry) -> None:
        self._pending.append(b'{"type":"%s","object":%s}\n' % (type_.encode(), self._encode(entry)))
        if not self._flush_scheduled and self.active:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        if not self._pending or not self.active:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        if not self.conn.write_chunk(data):
            self.stop()
            return
        if self.conn.buffered() > self._max_backlog:
            self.stop(abort=True)

    def send_bookmark(self, annotations: dict[str, str] | None = None) -> None:
        if self._bookmark_object is None:
            return
        obj = self._bookmark_object(self.last_rv, annotations)
        self._pending.append(b'{"type":"BOOKMARK","object":%s}\n' % orjson.dumps(obj))
        if not self._flush_scheduled and self.active:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def send_error(self, status: dict[str, Any]) -> None:
        self._pending.append(b'{"type":"ERROR","object":%s}\n' % orjson.dumps(status))

    # -- lifecycle -------------------------------------------------------------

    def start(self, initial: list[Entry], replay: list[Event], initial_events_end: bool) -> None:
        """Open the stream: initial ADDED events (or replayed history), then live changes."""
        loop = asyncio.get_running_loop()
        self.conn.start_stream(200, {}, self.stop)
        self.active = True
        for entry in initial:
            if self.matches(entry):
                self._send(ADDED, entry)
        for ev in replay:
            self.deliver(ev)
        if initial_events_end:
            self.send_bookmark({INITIAL_EVENTS_END: "true"})
        self.store.add_watcher(self)
        self._flush_scheduled = True
        loop.call_soon(self._flush)
        if self._bookmark_object is not None and self._bookmark_interval > 0:
            self._timers.append(loop.call_later(self._bookmark_interval, self._periodic_bookmark))
        self._timers.append(loop.call_later(self._timeout, self._expire))

    def _periodic_bookmark(self) -> None:
        if not self.active:
            return
        self.send_bookmark()
        self._timers.append(asyncio.get_running_loop().call_later(self._bookmark_interval, self._periodic_bookmark))

    def _expire(self) -> None:
        if not self.active:
            return
        if self._bookmark_object is not None:
            self.send_bookmark()
        self._flush()
        self.stop(end=True)

    def stop(self, abort: bool = False, end: bool = False) -> None:
        if not self.active:
            return
        self.active = False
        self.store.remove_watcher(self)
        for t in self._timers:
            t.cancel()
        if abort:
            self.conn.abort()
        elif end:
            self.conn.end_stream()
