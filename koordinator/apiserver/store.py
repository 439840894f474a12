"""Object storage for the embedded API server.

SQLite (WAL) is the durable copy; every live object is also held in memory as its
serialised JSON bytes plus the labels and selectable fields that list/watch filters need,
so GET and LIST never touch SQLite or re-encode anything. One global revision counter backs
``resourceVersion`` (like etcd's revision): every write takes the next number.

Writes are grouped: they run inside one open transaction, and ``commit()`` (called by the
server once per event-loop iteration) makes them durable, then releases the watch events
and the responses that waited for durability. A client never hears of a write, and no
watcher sees it, before it is on disk.
"""

from __future__ import annotations

import os
import sqlite3
from collections import deque
from typing import Any, Callable, Iterable, Protocol

import orjson

from koordinator.apiserver import errors

Obj = dict[str, Any]
FieldsFn = Callable[[Obj], dict[str, str]]

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"


class Entry:
    """One stored object version: its JSON bytes and what selectors look at."""

    __slots__ = ("key", "rv", "raw", "labels", "fields")

    def __init__(self, key: str, rv: int, raw: bytes, labels: dict[str, str], fields: dict[str, str]) -> None:
        self.key = key
        self.rv = rv
        self.raw = raw
        self.labels = labels
        self.fields = fields

    def obj(self) -> Obj:
        """A fresh, mutable copy of the object."""
        return orjson.loads(self.raw)


class Event:
    """A change to one object, kept in the history window and fanned out to watchers."""

    __slots__ = ("rv", "storage", "type", "new", "old")

    def __init__(self, rv: int, storage: str, type_: str, new: Entry, old: Entry | None) -> None:
        self.rv = rv
        self.storage = storage
        self.type = type_
        self.new = new
        self.old = old


class Watcher(Protocol):
    storage: str
    start_rv: int

    def deliver(self, event: Event) -> None: ...


def object_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


class Store:
    """Durable, revisioned object store with a bounded in-memory history for watches."""

    def __init__(self, path: str, *, history_size: int = 50_000, history_bytes: int = 128 << 20,
                 synchronous: str = "FULL") -> None:
        self.path = path
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(f"PRAGMA synchronous={synchronous}")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS objects (resource TEXT NOT NULL, key TEXT NOT NULL, rv INTEGER NOT NULL,"
            " data BLOB NOT NULL, PRIMARY KEY (resource, key)) WITHOUT ROWID"
        )
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
        row = self._db.execute("SELECT v FROM meta WHERE k='revision'").fetchone()
        self.rev: int = row[0] if row else 0
        self._tables: dict[str, dict[str, Entry]] = {}
        self._sorted: dict[str, list[str]] = {}
        self._fields_fns: dict[str, FieldsFn] = {}
        self._watchers: dict[str, set[Watcher]] = {}
        self._history: deque[Event] = deque()
        self._history_bytes = 0
        self.history_size = history_size
        self.history_bytes_limit = history_bytes
        # Watches from a revision at or after this one can be served from history.
        self.compacted: int = self.rev
        self._in_tx = False
        self._pending: list[Event] = []
        self._after_commit: list[Callable[[], None]] = []
        self._rows: dict[str, list[tuple[str, bytes]]] = {}
        for resource, key, data in self._db.execute("SELECT resource, key, data FROM objects"):
            self._rows.setdefault(resource, []).append((key, data))

    # -- resources -----------------------------------------------------------------

    def register(self, storage: str, fields_fn: FieldsFn) -> None:
        """Declare a resource; objects of it loaded from disk are indexed now."""
        self._fields_fns[storage] = fields_fn
        table = self._tables.setdefault(storage, {})
        for key, data in self._rows.pop(storage, []):
            raw = bytes(data)
            obj = orjson.loads(raw)
            rv = int(obj["metadata"]["resourceVersion"])
            table[key] = Entry(key, rv, raw, (obj.get("metadata") or {}).get("labels") or {}, fields_fn(obj))
        self._sorted.pop(storage, None)

    def stored_rows(self, storage: str) -> list[Obj]:
        """Objects on disk for a resource not registered yet (CRDs are read before the registry exists)."""
        return [orjson.loads(bytes(d)) for _, d in self._rows.get(storage, [])]

    def unregistered(self) -> list[str]:
        return list(self._rows)

    # -- reads ---------------------------------------------------------------------

    def get(self, storage: str, key: str) -> Entry | None:
        return self._tables.get(storage, {}).get(key)

    def items(self, storage: str) -> dict[str, Entry]:
        return self._tables.get(storage, {})

    def sorted_entries(self, storage: str, table: dict[str, Entry] | None = None) -> list[Entry]:
        """Entries in key order (etcd's order: namespace, then name)."""
        if table is not None:
            return [table[k] for k in sorted(table)]
        keys = self._sorted.get(storage)
        current = self._tables.get(storage, {})
        if keys is None:
            keys = sorted(current)
            self._sorted[storage] = keys
        return [current[k] for k in keys]

    def snapshot_at(self, storage: str, rv: int) -> dict[str, Entry]:
        """The resource's objects as they were at revision ``rv`` (for continue tokens and Exact lists)."""
        current = self._tables.get(storage, {})
        if rv >= self.rev:
            return current
        if rv < self.compacted:
            raise errors.expired(f"too old resource version: {rv} ({self.compacted})")
        state = dict(current)
        for ev in reversed(self._history):
            if ev.rv <= rv:
                break
            if ev.storage != storage:
                continue
            if ev.old is None:
                state.pop(ev.new.key, None)
            else:
                state[ev.old.key] = ev.old
        return state

    def events_after(self, rv: int) -> Iterable[Event]:
        """History events newer than ``rv``, oldest first; 410 if some were compacted away."""
        if rv < self.compacted:
            raise errors.expired(f"too old resource version: {rv} ({self.compacted})")
        newer: list[Event] = []
        for ev in reversed(self._history):
            if ev.rv <= rv:
                break
            newer.append(ev)
        newer.reverse()
        return newer

    # -- writes --------------------------------------------------------------------

    def _begin(self) -> None:
        if not self._in_tx:
            self._db.execute("BEGIN")
            self._in_tx = True

    def put(self, storage: str, key: str, obj: Obj) -> Entry:
        """Create or replace ``key``; sets ``metadata.resourceVersion`` on ``obj`` and returns the entry."""
        self._begin()
        self.rev += 1
        rv = self.rev
        obj["metadata"]["resourceVersion"] = str(rv)
        raw = orjson.dumps(obj)
        table = self._tables.setdefault(storage, {})
        old = table.get(key)
        entry = Entry(key, rv, raw, obj["metadata"].get("labels") or {}, self._fields_fns[storage](obj))
        self._db.execute("INSERT OR REPLACE INTO objects (resource, key, rv, data) VALUES (?, ?, ?, ?)",
                         (storage, key, rv, raw))
        table[key] = entry
        if old is None:
            self._sorted.pop(storage, None)
        self._record(Event(rv, storage, MODIFIED if old else ADDED, entry, old))
        return entry

    def remove(self, storage: str, key: str) -> Entry:
        """Delete ``key``; the DELETED event carries the last state with the deletion's revision."""
        self._begin()
        table = self._tables[storage]
        old = table.pop(key)
        self._sorted.pop(storage, None)
        self.rev += 1
        obj = old.obj()
        obj["metadata"]["resourceVersion"] = str(self.rev)
        gone = Entry(key, self.rev, orjson.dumps(obj), old.labels, old.fields)
        self._db.execute("DELETE FROM objects WHERE resource = ? AND key = ?", (storage, key))
        self._record(Event(self.rev, storage, DELETED, gone, old))
        return gone

    def _record(self, ev: Event) -> None:
        self._pending.append(ev)
        self._history.append(ev)
        self._history_bytes += len(ev.new.raw)
        while self._history and (
            len(self._history) > self.history_size or self._history_bytes > self.history_bytes_limit
        ):
            dropped = self._history.popleft()
            self._history_bytes -= len(dropped.new.raw)
            self.compacted = dropped.rv

    def compact(self) -> None:
        """Forget all history: watches from any earlier revision get 410 Expired."""
        self._history.clear()
        self._history_bytes = 0
        self.compacted = self.rev

    @property
    def dirty(self) -> bool:
        return self._in_tx

    def after_commit(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` once everything written so far is durable (now, if nothing is pending)."""
        if self._in_tx:
            self._after_commit.append(fn)
        else:
            fn()

    def commit(self) -> None:
        """Make pending writes durable, then deliver their events and the waiting callbacks."""
        if not self._in_tx:
            return
        self._db.execute("INSERT OR REPLACE INTO meta (k, v) VALUES ('revision', ?)", (self.rev,))
        self._db.execute("COMMIT")
        self._in_tx = False
        pending, self._pending = self._pending, []
        callbacks, self._after_commit = self._after_commit, []
        for ev in pending:
            for w in list(self._watchers.get(ev.storage, ())):
                if ev.rv > w.start_rv:
                    w.deliver(ev)
        for fn in callbacks:
            fn()

    # -- watchers ------------------------------------------------------------------

    def add_watcher(self, w: Watcher) -> None:
        self._watchers.setdefault(w.storage, set()).add(w)

    def remove_watcher(self, w: Watcher) -> None:
        self._watchers.get(w.storage, set()).discard(w)

    def watcher_count(self) -> int:
        return sum(len(s) for s in self._watchers.values())

    def close(self) -> None:
        if self._in_tx:
            self.commit()
        self._db.close()
