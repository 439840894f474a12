"""Which snapshot rows changed since a reader last looked: the snapshot's two change feeds.

The snapshot (:mod:`koordinator_roles.scheduler.framework.snapshot`) records two kinds of change. A reader keeps
the feed's counter as its *mark* and later asks for the rows changed since that mark:

- :data:`ROW_WRITES`: every rewrite of a row by the cache (``write_seq``, ``rows_written_since``) —
  a pod assumed, bound or deleted, a node updated. Values derived from requested or free resources
  follow this feed (:class:`~koordinator_roles.scheduler.framework.rowmemo.ClassMemo`).
- :data:`NODE_OBJECTS`: rows whose Node object was replaced (``node_version``,
  ``nodes_changed_since``) — labels, taints, images. Values derived from the Node alone follow this
  feed, so the pod placed on some node every cycle costs them nothing
  (:class:`~koordinator_roles.scheduler.framework.rowmemo.NodeMemo`, :class:`ChangeCursor`).

A mark holds only within one snapshot object and one layout (the feed's ``layout``): rows keep their
order only while the layout is unchanged.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Hashable


class ChangeFeed(ABC):
    """One kind of row change in a snapshot: a mark to keep, and the rows changed since a mark."""

    @abstractmethod
    def mark(self, snapshot: Any) -> int:
        """The counter to keep now."""

    @abstractmethod
    def since(self, snapshot: Any, mark: int) -> list[int] | None:
        """Rows changed since ``mark`` (repeats possible); None when that cannot be told: every row."""

    @abstractmethod
    def layout(self, snapshot: Any) -> Hashable:
        """What must stay equal for marks (and rows) to keep their meaning."""


class _RowWrites(ChangeFeed):
    """Every rewrite of a row (the snapshot keeps a bounded log of them)."""

    def mark(self, snapshot: Any) -> int:
        return snapshot.write_seq

    def since(self, snapshot: Any, mark: int) -> list[int] | None:
        return snapshot.rows_written_since(mark)

    def layout(self, snapshot: Any) -> Hashable:
        # New columns reallocate the resource matrices that values of this feed are computed from.
        return snapshot.layout_version, snapshot.columns_version

    def __repr__(self) -> str:
        return "ROW_WRITES"


class _NodeObjects(ChangeFeed):
    """Rows whose Node object was replaced (per-row version stamps, never lost)."""

    def mark(self, snapshot: Any) -> int:
        return snapshot.node_version

    def since(self, snapshot: Any, mark: int) -> list[int] | None:
        return snapshot.nodes_changed_since(mark)

    def layout(self, snapshot: Any) -> Hashable:
        return snapshot.layout_version

    def __repr__(self) -> str:
        return "NODE_OBJECTS"


ROW_WRITES: ChangeFeed = _RowWrites()
NODE_OBJECTS: ChangeFeed = _NodeObjects()


class ChangeCursor:
    """Where one reader stands in a feed: :meth:`advance` tells the rows changed since its last call.

    For readers that keep one structure over every row (ImageLocality's image index); per-key
    arrays use :class:`~koordinator_roles.scheduler.framework.rowmemo.RowMemo`, which keeps a mark per key.
    """

    def __init__(self, feed: ChangeFeed = NODE_OBJECTS) -> None:
        self.feed = feed
        self._snapshot: Any = None  # held, so that its id is not reused by another snapshot
        self._layout: Hashable = None
        self._mark = 0

    def advance(self, snapshot: Any) -> list[int] | None:
        """Rows changed since the last call; None the first time, for another snapshot or layout, or
        when the feed lost track: then every row is to be read again."""
        feed = self.feed
        layout = feed.layout(snapshot)
        mark = feed.mark(snapshot)
        if snapshot is not self._snapshot or layout != self._layout:
            self._snapshot, self._layout, self._mark = snapshot, layout, mark
            return None
        if mark == self._mark:
            return []
        changed = feed.since(snapshot, self._mark)
        self._mark = mark
        return changed
