"""Per pod class arrays over every snapshot row, kept across scheduling cycles.

Replicas of one workload ask a Score plugin the same question (their requests are equal) cycle
after cycle, and between two cycles only a few rows change: the node the previous pod was
assumed on, nodes whose pods were bound or deleted. :class:`ClassMemo` keeps one array per class
and recomputes only the rows the snapshot rewrote since (``Snapshot.rows_written_since``), with a
per-row function, so a cycle costs a gather instead of a pass over every candidate.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable

import numpy as np

Compute = Callable[[Any, np.ndarray, Hashable], np.ndarray]
OneRow = Callable[[Any, int, Hashable], "int | None"]


class ClassMemo:
    """``values(snapshot, key)``: the array ``compute(snapshot, every row, key)`` kept current row by row.

    A class is kept from the second time it is asked for (a pod unlike any other would pay for
    every row instead of its candidates); ``values`` returns None the first time. ``one_row`` is
    a cheaper form of ``compute`` for one row and must give exactly the same value, or None to
    have ``compute`` run on that row. The scheduling thread owns the memo.
    """

    def __init__(self, compute: Compute, one_row: OneRow, classes: int = 8) -> None:
        self._compute = compute
        self._one_row = one_row
        self._classes = classes
        self._entries: OrderedDict[Hashable, list] = OrderedDict()  # key -> [values, write_seq]
        self._seen: OrderedDict[Hashable, None] = OrderedDict()
        self._snapshot: Any = None
        self._layout: tuple = ()

    def values(self, snapshot: Any, key: Hashable) -> np.ndarray | None:
        """The class's array over every row of ``snapshot`` (callers must not modify it), or None."""
        layout = (snapshot.layout_version, snapshot.columns_version)
        if snapshot is not self._snapshot or layout != self._layout:
            # Another snapshot or new rows: nothing kept applies (held, so its id is not reused).
            self._entries.clear()
            self._snapshot, self._layout = snapshot, layout
        entry = self._entries.get(key)
        if entry is None:
            if key not in self._seen:
                self._seen[key] = None
                if len(self._seen) > 4 * self._classes:
                    self._seen.popitem(last=False)
                return None
            if len(self._entries) >= self._classes:
                self._entries.popitem(last=False)
            entry = self._entries[key] = [self._compute(snapshot, snapshot.all_rows(), key), snapshot.write_seq]
            return entry[0]
        self._entries.move_to_end(key)
        if entry[1] != snapshot.write_seq:
            changed = snapshot.rows_written_since(entry[1])
            if changed is None:
                entry[0] = self._compute(snapshot, snapshot.all_rows(), key)
            else:
                values, one_row = entry[0], self._one_row
                for row in set(changed):
                    value = one_row(snapshot, row, key)
                    if value is None:
                        value = self._compute(snapshot, np.array([row], dtype=np.int64), key)[0]
                    values[row] = value
            entry[1] = snapshot.write_seq
        return entry[0]

    def take(self, snapshot: Any, key: Hashable, rows: np.ndarray) -> np.ndarray:
        """The class's values at ``rows``: from the kept array, or computed for ``rows`` alone the first time."""
        kept = self.values(snapshot, key)
        return self._compute(snapshot, rows, key) if kept is None else kept.take(rows)
