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

AllRows = Callable[[Any, Hashable], np.ndarray]
OneRow = Callable[[Any, int, Hashable], int]


class ClassMemo:
    """``values(snapshot, key)``: the array ``all_rows(snapshot, key)`` kept current row by row.

    A class is kept from the second time it is asked for (a pod unlike any other would pay for
    every row instead of its candidates); ``values`` returns None the first time. ``one_row`` must
    give exactly what ``all_rows`` gives for that row. The scheduling thread owns the memo.
    """

    def __init__(self, all_rows: AllRows, one_row: OneRow, classes: int = 8) -> None:
        self._all_rows = all_rows
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
            entry = self._entries[key] = [self._all_rows(snapshot, key), snapshot.write_seq]
            return entry[0]
        self._entries.move_to_end(key)
        if entry[1] != snapshot.write_seq:
            changed = snapshot.rows_written_since(entry[1])
            if changed is None:
                entry[0] = self._all_rows(snapshot, key)
            else:
                values, one_row = entry[0], self._one_row
                for row in set(changed):
                    values[row] = one_row(snapshot, row, key)
            entry[1] = snapshot.write_seq
        return entry[0]
