"""Shared informers: one reflector and one cache per resource, any number of handlers.

The reflector's thread updates the cache and queues a notification for every handler in the
order changes arrived, so one object's updates are never seen out of order. Each handler has
its own unbounded queue and thread: a slow handler never holds back the cache or the others.
A handler added after the informer started first gets an ``on_add`` for every cached object.

Handlers receive the cached dicts and must not mutate them. ``on_delete`` may receive a
:class:`DeletedFinalStateUnknown` for an object deleted while the watch was down (found by the
relist), carrying the last state the cache knew.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from koordinator.runtime.kinds import Kind
from koordinator.runtime.reflector import READ_TIMEOUT_MARGIN, Reflector, strip_managed_fields
from koordinator.runtime.store import IndexFunc, Indexer, namespace_index, node_name_index, object_key

log = logging.getLogger("koordinator.runtime.informer")

Obj = dict[str, Any]

__all__ = ["DeletedFinalStateUnknown", "HandlerRegistration", "InformerFactory", "SharedInformer", "object_key"]


@dataclass(frozen=True)
class DeletedFinalStateUnknown:
    """An object that disappeared while the watch was down: its key and the last state cached."""

    key: str
    obj: Obj


_ADD, _UPDATE, _DELETE, _SYNCED = 0, 1, 2, 3


class HandlerRegistration:
    """One handler's queue and thread; :meth:`has_synced` once it has processed the initial objects."""

    def __init__(self, informer: "SharedInformer", on_add: Callable | None, on_update: Callable | None,
                 on_delete: Callable | None, resync: float) -> None:
        if resync and resync < 1.0:
            raise ValueError(f"resync {resync}: must be 0 (off) or at least 1 second")
        self._informer = informer
        self._on_add, self._on_update, self._on_delete = on_add, on_update, on_delete
        self.resync = resync
        self._cond = threading.Condition(threading.Lock())
        self._pending: collections.deque = collections.deque()
        self._stopped = False
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None

    def has_synced(self) -> bool:
        return self._synced.is_set()

    def _push(self, note: tuple) -> None:
        with self._cond:
            self._pending.append(note)
            self._cond.notify()

    def _start(self, name: str) -> None:
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify()

    def _join(self, timeout: float) -> None:
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def _run(self) -> None:
        next_resync = time.monotonic() + self.resync if self.resync else None
        while True:
            with self._cond:
                while not self._pending and not self._stopped:
                    wait = None if next_resync is None else next_resync - time.monotonic()
                    if wait is not None and wait <= 0:
                        break
                    self._cond.wait(wait)
                if self._stopped:
                    return
                batch, self._pending = self._pending, collections.deque()
            for note in batch:
                self._dispatch(note)
            if next_resync is not None and time.monotonic() >= next_resync:
                # A resync replays the cache as updates with old == new (level-triggered self-healing).
                for obj in self._informer.store.list():
                    self._dispatch((_UPDATE, obj, obj))
                next_resync = time.monotonic() + self.resync

    def _dispatch(self, note: tuple) -> None:
        op = note[0]
        try:
            if op == _ADD:
                if self._on_add:
                    self._on_add(note[1])
            elif op == _UPDATE:
                if self._on_update:
                    self._on_update(note[1], note[2])
            elif op == _DELETE:
                if self._on_delete:
                    self._on_delete(note[1])
            else:
                self._synced.set()
        except Exception:  # a handler's bug must not stop delivery to it or to anyone else
            log.exception("event handler failed resource=%s", self._informer.reflector.description)


class SharedInformer:
    """A cache of one resource kept current by a reflector, with event handlers."""

    def __init__(self, client: Any, kind: Kind | str, *, namespace: str | None = None,
                 label_selector: str | None = None, field_selector: str | None = None,
                 indexers: dict[str, IndexFunc] | None = None,
                 transform: Callable[[Obj], Obj] | None = strip_managed_fields,
                 read_timeout_margin: float = READ_TIMEOUT_MARGIN, min_watch_timeout: int = 300) -> None:
        self.kind = client.kinds.get(kind)
        default_indexers: dict[str, IndexFunc] = {"namespace": namespace_index}
        if self.kind.kind == "Pod" and not self.kind.group:
            default_indexers["spec.nodeName"] = node_name_index
        self.store = Indexer({**default_indexers, **(indexers or {})})
        self.reflector = Reflector(client, self.kind, self, namespace=namespace, label_selector=label_selector,
                                   field_selector=field_selector, transform=transform,
                                   read_timeout_margin=read_timeout_margin, min_watch_timeout=min_watch_timeout)
        self._handlers: list[HandlerRegistration] = []
        # Held while the cache changes and handlers are notified, and while a handler is added, so
        # a late handler's initial adds and the live stream neither overlap nor leave a gap.
        self._lock = threading.RLock()
        self._synced = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- handlers --------------------------------------------------------------------------

    def add_handler(self, on_add: Callable[[Obj], None] | None = None,
                    on_update: Callable[[Obj, Obj], None] | None = None,
                    on_delete: Callable[[Any], None] | None = None, *, resync: float = 0) -> HandlerRegistration:
        """Register handlers; ``resync`` (seconds, ≥ 1) replays the cache to this handler periodically."""
        reg = HandlerRegistration(self, on_add, on_update, on_delete, resync)
        with self._lock:
            if self._synced.is_set():
                for obj in self.store.list():
                    reg._push((_ADD, obj))
                reg._push((_SYNCED,))
            self._handlers = [*self._handlers, reg]
            if self._thread is not None:
                reg._start(f"informer-{self.kind.plural}-handler-{len(self._handlers)}")
        return reg

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        self.store.add_indexer(name, fn)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self.reflector.run, args=(self._stop,),
                                            name=f"reflector-{self.kind.plural}", daemon=True)
            for i, reg in enumerate(self._handlers, 1):
                reg._start(f"informer-{self.kind.plural}-handler-{i}")
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self.reflector.interrupt()
        for reg in self._handlers:
            reg._stop()
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        for reg in self._handlers:
            reg._join(max(0.0, deadline - time.monotonic()))

    def has_synced(self) -> bool:
        """The initial list is in the cache."""
        return self._synced.is_set()

    def handlers_synced(self) -> bool:
        """The initial list is in the cache and every handler registered so far has processed it."""
        return self._synced.is_set() and all(reg.has_synced() for reg in self._handlers)

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    # -- the reflector's sink ----------------------------------------------------------------

    def replace(self, items: list[Obj], resource_version: str) -> None:
        new = {object_key(o): o for o in items}
        with self._lock:
            old = self.store.replace(new)
            handlers = self._handlers
            first = not self._synced.is_set()
            for key, obj in new.items():
                prev = old.get(key)
                if prev is None:
                    note: tuple = (_ADD, obj)
                elif _rv(prev) != _rv(obj):
                    note = (_UPDATE, prev, obj)
                else:
                    continue
                for reg in handlers:
                    reg._push(note)
            for key, prev in old.items():
                if key not in new:
                    note = (_DELETE, DeletedFinalStateUnknown(key, prev))
                    for reg in handlers:
                        reg._push(note)
            if first:
                for reg in handlers:
                    reg._push((_SYNCED,))
                self._synced.set()

    def apply(self, event_type: str, obj: Obj) -> None:
        key = object_key(obj)
        with self._lock:
            if event_type == "DELETED":
                self.store.delete(key)
                note: tuple = (_DELETE, obj)
            else:
                prev = self.store.put(key, obj)
                note = (_ADD, obj) if prev is None else (_UPDATE, prev, obj)
            for reg in self._handlers:
                reg._push(note)


def _rv(obj: Obj) -> str | None:
    return (obj.get("metadata") or {}).get("resourceVersion")


class InformerFactory:
    """One :class:`SharedInformer` per (kind, namespace, selectors) for the whole process."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._lock = threading.Lock()
        self._informers: dict[tuple, SharedInformer] = {}
        self._started = False

    def informer(self, kind: Kind | str, *, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None) -> SharedInformer:
        """The shared informer for this view; created on first use, started at once if the factory runs."""
        k = self.client.kinds.get(kind)
        key = (k, namespace or None, label_selector or None, field_selector or None)
        with self._lock:
            inf = self._informers.get(key)
            if inf is None:
                inf = SharedInformer(self.client, k, namespace=namespace, label_selector=label_selector,
                                     field_selector=field_selector)
                self._informers[key] = inf
                if self._started:
                    inf.start()
            return inf

    def informers(self) -> list[SharedInformer]:
        with self._lock:
            return list(self._informers.values())

    def start(self) -> None:
        with self._lock:
            self._started = True
            informers = list(self._informers.values())
        for inf in informers:
            inf.start()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        for inf in self.informers():
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not inf.wait_for_sync(left):
                return False
        return True

    def handlers_synced(self) -> bool:
        """Every informer's initial list is in its cache and through all its handlers (client-go's
        WaitForHandlersSync): a consumer acting on one informer's objects may need what others' handlers built."""
        return all(inf.handlers_synced() for inf in self.informers())

    def unsynced(self) -> list[str]:
        """Descriptions of the informers still waiting for their initial list (for /readyz)."""
        return [inf.reflector.description for inf in self.informers() if not inf.has_synced()]

    def stop(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        for inf in self.informers():
            inf.stop(max(0.0, deadline - time.monotonic()))
