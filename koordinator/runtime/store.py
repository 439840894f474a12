"""A thread-safe object cache with named indexes (client-go's ThreadSafeStore/Indexer).

Keys are ``namespace/name`` (``name`` for cluster-scoped objects). An index function maps an
object to the values it is filed under; :meth:`Indexer.by_index` answers "every pod on node X"
without a scan. Objects handed out are the cached dicts themselves: callers must not mutate them.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Iterable

Obj = dict[str, Any]
IndexFunc = Callable[[Obj], Iterable[str]]


def object_key(obj: Obj) -> str:
    """``namespace/name``, or ``name`` for a cluster-scoped object."""
    md = obj.get("metadata") or {}
    ns = md.get("namespace")
    return f"{ns}/{md.get('name', '')}" if ns else md.get("name", "")


def namespace_index(obj: Obj) -> list[str]:
    ns = (obj.get("metadata") or {}).get("namespace")
    return [ns] if ns else []


def node_name_index(obj: Obj) -> list[str]:
    """Pods by ``spec.nodeName`` (unscheduled pods are filed under nothing)."""
    node = (obj.get("spec") or {}).get("nodeName")
    return [node] if node else []


class Indexer:
    """key → object plus named indexes; every method is atomic with respect to the others."""

    def __init__(self, indexers: dict[str, IndexFunc] | None = None) -> None:
        self._lock = threading.Lock()
        self._items: dict[str, Obj] = {}
        self._indexers: dict[str, IndexFunc] = dict(indexers or {})
        # index name → value → keys; key → index name → values it is filed under (for removal).
        self._indices: dict[str, dict[str, set[str]]] = {name: {} for name in self._indexers}
        self._filed: dict[str, dict[str, tuple[str, ...]]] = {}

    # -- writes (the informer's) ----------------------------------------------------------

    def add_indexer(self, name: str, fn: IndexFunc) -> None:
        """Add an index; existing objects are filed into it at once."""
        with self._lock:
            if name in self._indexers:
                raise ValueError(f"indexer {name!r} already exists")
            self._indexers[name] = fn
            self._indices[name] = {}
            for key, obj in self._items.items():
                self._file(name, fn, key, obj)

    def put(self, key: str, obj: Obj) -> Obj | None:
        """Add or replace; returns the previous object."""
        with self._lock:
            old = self._items.get(key)
            if old is not None:
                self._unfile(key)
            self._items[key] = obj
            for name, fn in self._indexers.items():
                self._file(name, fn, key, obj)
            return old

    def delete(self, key: str) -> Obj | None:
        """Remove; returns the removed object (None if absent)."""
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._unfile(key)
            return old

    def replace(self, items: dict[str, Obj]) -> dict[str, Obj]:
        """Swap in a whole new content atomically; returns the previous content."""
        with self._lock:
            old = self._items
            self._items = dict(items)
            self._indices = {name: {} for name in self._indexers}
            self._filed = {}
            for key, obj in self._items.items():
                for name, fn in self._indexers.items():
                    self._file(name, fn, key, obj)
            return old

    def _file(self, name: str, fn: IndexFunc, key: str, obj: Obj) -> None:
        values = tuple(fn(obj))
        if not values:
            return
        self._filed.setdefault(key, {})[name] = values
        index = self._indices[name]
        for v in values:
            index.setdefault(v, set()).add(key)

    def _unfile(self, key: str) -> None:
        for name, values in self._filed.pop(key, {}).items():
            index = self._indices[name]
            for v in values:
                keys = index.get(v)
                if keys is not None:
                    keys.discard(key)
                    if not keys:
                        del index[v]

    # -- reads -----------------------------------------------------------------------------

    def get(self, key: str) -> Obj | None:
        return self._items.get(key)

    def __contains__(self, key: str) -> bool:
        return key in self._items

    def __len__(self) -> int:
        return len(self._items)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._items)

    def list(self) -> list[Obj]:
        with self._lock:
            return list(self._items.values())

    def by_index(self, name: str, value: str) -> list[Obj]:
        """Objects filed under ``value`` in index ``name`` (KeyError for an unknown index)."""
        with self._lock:
            if name not in self._indices:
                raise KeyError(f"no index named {name!r} (have: {', '.join(sorted(self._indices)) or 'none'})")
            return [self._items[k] for k in self._indices[name].get(value, ())]

    def index_values(self, name: str) -> list[str]:
        with self._lock:
            return list(self._indices[name])
