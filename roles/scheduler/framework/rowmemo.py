"""Per-key arrays over every snapshot row, kept across scheduling cycles and refreshed row by row.

Replicas of one workload ask a plugin the same question cycle after cycle (their requests, selectors
and tolerations are equal), and between two cycles only a few rows change. :class:`RowMemo` keeps one
array per key with the mark of a change feed (:mod:`koordinator_roles.scheduler.framework.rowchanges`) and
recomputes only the rows changed since, so a cycle costs a gather instead of a pass over every node.

Which feed is the one difference between its two forms:

- :class:`ClassMemo` follows every row write: scores computed from requested and free resources
  (NodeResourcesFit, NodeResourcesBalancedAllocation), vectorised over rows;
- :class:`NodeMemo` follows replaced node objects only: verdicts and scores computed from a node's
  labels or taints (NodeAffinity, TaintToleration), one Python call per node, so that the pod placed
  every cycle does not cost them a row.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable

import numpy as np

from koordinator_roles.scheduler.framework.rowchanges import NODE_OBJECTS, ROW_WRITES, ChangeFeed
from koordinator_roles.scheduler.framework.types import NodeInfo

Compute = Callable[[Any, np.ndarray, Hashable], np.ndarray]
OneRow = Callable[[Any, int, Hashable], Any]


class RowMemo:
    """Arrays ``compute(snapshot, every row, key)`` for up to ``keys`` keys, kept current from ``feed``.

    ``one_row(snapshot, row, key)`` is a cheaper form of ``compute`` for one row and must give exactly
    the same value, or None to have ``compute`` run on that row. With ``keep_first_ask`` False a key
    is kept from the second time it is asked for (a pod unlike any other would pay for every row
    instead of its candidates) and :meth:`lookup` returns None the first time. The least recently
    used key is dropped first. The scheduling thread owns the memo.
    """

    def __init__(self, feed: ChangeFeed, keys: int, keep_first_ask: bool) -> None:
        self._feed = feed
        self._keys = keys
        self._keep_first_ask = keep_first_ask
        self._entries: OrderedDict[Hashable, list] = OrderedDict()  # key -> [values, mark]
        self._seen: OrderedDict[Hashable, None] = OrderedDict()
        self._snapshot: Any = None
        self._layout: Hashable = None

    def lookup(self, snapshot: Any, key: Hashable, compute: Compute, one_row: OneRow) -> np.ndarray | None:
        """The key's array over every row of ``snapshot`` (callers must not modify it), or None."""
        feed = self._feed
        layout = feed.layout(snapshot)
        if snapshot is not self._snapshot or layout != self._layout:
            # Another snapshot or new rows: nothing kept applies (held, so its id is not reused).
            self._entries.clear()
            self._snapshot, self._layout = snapshot, layout
        entry = self._entries.get(key)
        if entry is None:
            if not self._keep_first_ask and key not in self._seen:
                self._seen[key] = None
                if len(self._seen) > 4 * self._keys:
                    self._seen.popitem(last=False)
                return None
            if len(self._entries) >= self._keys:
                self._entries.popitem(last=False)
            entry = self._entries[key] = [compute(snapshot, snapshot.all_rows(), key), feed.mark(snapshot)]
            return entry[0]
        self._entries.move_to_end(key)
        mark = feed.mark(snapshot)
        if entry[1] != mark:
            changed = feed.since(snapshot, entry[1])
            if changed is None:
                entry[0] = compute(snapshot, snapshot.all_rows(), key)
            else:
                values = entry[0]
                for row in set(changed):
                    value = one_row(snapshot, row, key)
                    if value is None:
                        value = compute(snapshot, np.array([row], dtype=np.int64), key)[0]
                    values[row] = value
            entry[1] = mark
        return entry[0]


class ClassMemo(RowMemo):
    """Per pod class arrays that follow every row write: values from a row's requested/free resources.

    ``values(snapshot, key)`` returns None the first time a class is asked for (see :class:`RowMemo`);
    :meth:`take` then computes the rows asked for alone.
    """

    def __init__(self, compute: Compute, one_row: OneRow, classes: int = 8) -> None:
        super().__init__(ROW_WRITES, classes, keep_first_ask=False)
        self._compute = compute
        self._one_row = one_row

    def values(self, snapshot: Any, key: Hashable) -> np.ndarray | None:
        """The class's array over every row of ``snapshot`` (callers must not modify it), or None."""
        return self.lookup(snapshot, key, self._compute, self._one_row)

    def take(self, snapshot: Any, key: Hashable, rows: np.ndarray) -> np.ndarray:
        """The class's values at ``rows``: from the kept array, or computed for ``rows`` alone the first time."""
        kept = self.values(snapshot, key)
        return self._compute(snapshot, rows, key) if kept is None else kept.take(rows)


class NodeMemo(RowMemo):
    """Per-key arrays of ``per_node(node_info)`` that follow replaced node objects only.

    For values that depend on the Node object alone (labels, taints): placing or removing pods never
    recomputes a row. A key is kept from the first ask, as every row is needed anyway.
    """

    def __init__(self, keys: int = 128) -> None:
        super().__init__(NODE_OBJECTS, keys, keep_first_ask=True)

    def values(self, snapshot: Any, key: Hashable, per_node: Callable[[NodeInfo], Any], dtype: Any) -> np.ndarray:
        """An array over every snapshot row (index it with ``rows``; callers must not modify it).

        ``per_node`` must give the same value for every NodeInfo of one key: the key names what it
        computes (a selector's or tolerations' signature).
        """
        def compute(snap: Any, rows: np.ndarray, _key: Hashable) -> np.ndarray:
            infos = snap.node_infos
            return np.fromiter((per_node(infos[r]) for r in rows.tolist()), dtype=dtype, count=len(rows))

        def one_row(snap: Any, row: int, _key: Hashable) -> Any:
            return per_node(snap.node_infos[row])

        return self.lookup(snapshot, key, compute, one_row)
