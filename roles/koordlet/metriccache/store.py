"""The koordlet's metric cache: time series and a small key-value store in one SQLite file.

Storage layout (one file ``<run-dir>/metrics.db``, WAL journal, ``synchronous=NORMAL``)::

    kinds(id, metric)                        metric kind names
    series(id, metric, labels)               one per (kind, property label values); labels is
                                             canonical JSON (sorted keys), found again after a restart
    layouts(id, kind, crc, sids)             an ordered set of series ids of one kind (packed int64)
    rounds(kind, ts, layout, span, n,        the points of one kind written by one insert call:
           vals, offs, big)                  vals[i] (packed float64) belongs to series layout.sids[i];
                                             clustered by (kind, ts); arrays over 256 bytes are in
    blobs(id, vals, offs)                    <- this table instead (rounds.big)
    kv(key, value), meta(key, value)         JSON values; schema version

Why rows per round rather than per point: a collector round writes one point for each of
thousands of series. Rows keyed by (series, ts) put every point on a different B-tree page, so
one round dirtied ~3,000 pages (12 MB of WAL per round at 500 pods, 22 us per point). Here a
round is a dozen appended rows (~9-11 bytes per point on disk), and the set of series of a kind
— which rarely changes — is stored once as a layout and shared by every round with that set.

- ``ts`` is integer milliseconds (timestamps are kept at millisecond resolution). When the
  points of one kind in one insert call carry different timestamps, ``offs`` holds each point's
  offset from ``ts`` (packed int32 ms) and ``span`` the largest; a row spans under ``_SPAN_MS``.
- Bounds: :meth:`MetricCache.gc` drops rounds whose points are all older than ``now -
  retention`` and, when the used pages exceed 90% of ``max_bytes``, the oldest rounds until the
  database is under that again (so between two runs it stays under ``max_bytes`` as long as one
  gc interval writes less than 10% of it); then layouts no round uses and series no layout holds (in the file and in
  the in-memory caches); free pages beyond ``max_bytes`` go back to the file system
  (``auto_vacuum=INCREMENTAL``). The SQLite page cache is capped (``cache_size``).
- One connection guarded by a lock serves every thread (collectors insert from theirs while
  reporters query): nobody sees "database is locked".
"""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import sys
import threading
import time
import zlib
from array import array
from collections import OrderedDict
from typing import Any, Callable, Iterable

from .kinds import LABELS
from .model import MetricCacheError, Sample, Series

log = logging.getLogger("koordinator.koordlet.metriccache")

SCHEMA_VERSION = "1"

# Points of one kind in one insert call share a row when their timestamps fall in one bucket of
# this many milliseconds; queries widen their lower bound by it.
_SPAN_MS = 10_000

# gc keeps the used pages under this share of max_bytes (see _gc).
_SIZE_GC_TARGET = 0.9

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS kinds (id INTEGER PRIMARY KEY, metric TEXT NOT NULL UNIQUE)",
    "CREATE TABLE IF NOT EXISTS series (id INTEGER PRIMARY KEY, metric TEXT NOT NULL,"
    " labels TEXT NOT NULL, UNIQUE (metric, labels))",
    "CREATE TABLE IF NOT EXISTS layouts (id INTEGER PRIMARY KEY, kind INTEGER NOT NULL, crc INTEGER NOT NULL,"
    " sids BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS layouts_by_crc ON layouts (kind, crc)",
    # Clustered by (kind, ts): a query reads one contiguous range, and the rows of a kind with
    # few series (node, system) carry their values inline, so a 30-minute node query touches a
    # few dozen pages. Bigger value arrays live in `blobs`, so that they do not spread the rows
    # of the small kinds over thousands of pages (and because WITHOUT ROWID rows over ~1 KB
    # spill into mostly empty overflow pages). A repeated write of the same series set at the
    # same millisecond replaces the earlier one.
    "CREATE TABLE IF NOT EXISTS rounds (kind INTEGER NOT NULL, ts INTEGER NOT NULL, layout INTEGER NOT NULL,"
    " span INTEGER NOT NULL, n INTEGER NOT NULL, vals BLOB, offs BLOB, big INTEGER,"
    " PRIMARY KEY (kind, ts, layout)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS blobs (id INTEGER PRIMARY KEY, vals BLOB NOT NULL, offs BLOB)",
    # gc finds unused layouts through this one.
    "CREATE INDEX IF NOT EXISTS rounds_by_layout ON rounds (layout)",
    "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
)

_SELECT_ROUNDS = ("SELECT r.ts, r.layout, coalesce(r.vals, b.vals), coalesce(r.offs, b.offs)"
                  " FROM rounds r LEFT JOIN blobs b ON b.id = r.big"
                  " WHERE r.kind = ? AND r.ts BETWEEN ? AND ? ORDER BY r.ts, r.layout")

# Value arrays up to this many bytes are stored in the rounds row itself.
_INLINE_BYTES = 256

# Layouts remembered per kind for inserts, and decoded layouts kept for queries.
_RECENT_LAYOUTS = 4
_LAYOUT_CACHE = 64

# SQLite result codes meaning "this file is not a (sound) database".
_SQLITE_CORRUPT = 11
_SQLITE_NOTADB = 26

_BIG_ENDIAN = sys.byteorder == "big"

_UNSET = object()


def _pack(typecode: str, items: Iterable) -> bytes:
    a = array(typecode, items)
    if _BIG_ENDIAN:  # the file is little-endian everywhere
        a.byteswap()
    return a.tobytes()


def _unpack(typecode: str, blob: bytes) -> array:
    a = array(typecode)
    a.frombytes(blob)
    if _BIG_ENDIAN:
        a.byteswap()
    return a


def _is_corruption(exc: BaseException) -> bool:
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_CORRUPT, _SQLITE_NOTADB)
    msg = str(exc).lower()
    return "malformed" in msg or "not a database" in msg


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000.0))


class _Incompatible(Exception):
    """The file is an SQLite database, but not one of ours (or of another schema version)."""


class _Layout:
    """An ordered set of series ids of one kind (packed, 8 bytes a series)."""

    __slots__ = ("kind", "blob", "sids", "repeats")

    def __init__(self, kind: int, blob: bytes) -> None:
        self.kind = kind
        self.blob = blob
        self.sids = _unpack("q", blob)
        # a series more than once: points of one call with their own timestamps
        self.repeats = len(set(self.sids)) < len(self.sids)


class MetricCache:
    """Time series + KV store of one koordlet (see module doc).

    ``path``: the database file (parent directories are created); ``None`` keeps everything in
    memory. ``clock`` gives "now" for retention in :meth:`gc`; samples carry their own
    timestamps. ``cache_kib`` caps SQLite's page cache.
    """

    def __init__(self, path: str | None, *, retention_seconds: float = 12 * 3600,
                 max_bytes: int = 100 << 20, clock: Callable[[], float] = time.time,
                 cache_kib: int = 2000) -> None:
        if not retention_seconds > 0:
            raise MetricCacheError(f"metric cache: retention must be > 0 seconds, got {retention_seconds!r}")
        if not max_bytes > 0:
            raise MetricCacheError(f"metric cache: max_bytes must be > 0, got {max_bytes!r}")
        self.path = path
        self.retention_seconds = float(retention_seconds)
        self.max_bytes = int(max_bytes)
        self._clock = clock
        self._cache_kib = int(cache_kib)
        self._lock = threading.RLock()
        # In-memory mirrors of the small tables, dropped entry by entry when gc deletes rows, so
        # they stay as large as the live series set whatever the uptime.
        self._kinds: dict[str, int] = {}
        self._series: dict[str, dict[tuple[str, ...], int]] = {}   # metric -> label values -> id
        # Layouts: each kind's few most recent ones, to match a round's series set without a
        # query, and an LRU of decoded ones for queries — both bounded, however many pod sets
        # came and went (a batch node can see a new set every few seconds).
        self._recent: dict[int, dict[bytes, tuple[int, bool]]] = {}  # kind -> sids -> (id, repeats)
        self._layouts: OrderedDict[int, _Layout] = OrderedDict()
        self._newest: dict[int, int] = {}     # kind -> greatest round ts (ms) ever written
        self._conn: sqlite3.Connection | None = None
        # What the running insert created, to undo in the mirrors if it rolls back.
        self._created: list[tuple[str, Any, Any]] = []
        self._open()

    # ------------------------------------------------------------------ opening and recovery

    def _open(self) -> None:
        if self.path is None:
            conn = self._connect(":memory:")
            self._init_schema(conn)
            self._conn = conn
            return
        parent = os.path.dirname(os.path.abspath(self.path))
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise MetricCacheError(f"metric cache: cannot create directory {parent}: {exc}") from exc
        if os.path.isdir(self.path):
            raise MetricCacheError(f"metric cache: {self.path} is a directory, expected a database file")
        try:
            conn = self._connect(self.path)
        except sqlite3.Error as exc:
            raise MetricCacheError(f"metric cache: cannot open {self.path}: {exc}") from exc
        try:
            self._check(conn)
            self._init_schema(conn)
            self._load(conn)
        except (sqlite3.DatabaseError, _Incompatible, ValueError) as exc:
            conn.close()
            if isinstance(exc, sqlite3.DatabaseError) and not _is_corruption(exc):
                raise MetricCacheError(f"metric cache: cannot use {self.path}: {exc}") from exc
            try:
                self._move_aside(str(exc))
                conn = self._connect(self.path)
                self._init_schema(conn)
            except (OSError, sqlite3.Error) as exc2:
                raise MetricCacheError(f"metric cache: {self.path} is unusable ({exc}) and could not be"
                                       f" replaced: {exc2}") from exc2
        self._conn = conn

    def _connect(self, target: str) -> sqlite3.Connection:
        # isolation_level=None: we issue BEGIN/COMMIT ourselves (one transaction per insert).
        return sqlite3.connect(target, isolation_level=None, check_same_thread=False)

    def _check(self, conn: sqlite3.Connection) -> None:
        # quick_check reads every page once (O(file)): a torn or garbage file is found at start,
        # where moving it aside loses nothing a later failure would not.
        row = conn.execute("PRAGMA quick_check(1)").fetchone()
        if row is None or row[0] != "ok":
            raise sqlite3.DatabaseError(f"database disk image is malformed: {row[0] if row else 'no answer'}")

    def _init_schema(self, conn: sqlite3.Connection) -> None:
        conn.execute(f"PRAGMA cache_size = -{self._cache_kib}")
        conn.execute("PRAGMA temp_store = MEMORY")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and "meta" not in tables:
            raise _Incompatible(f"not a metric cache database (tables: {', '.join(sorted(tables))})")
        if not tables:
            # Must precede the first table of a new file.
            conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        if self.path is not None:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("metric cache %s: journal mode is %s, not wal", self.path, mode)
            conn.execute("PRAGMA synchronous = NORMAL")
            # The WAL file is truncated back to this size after each checkpoint.
            conn.execute("PRAGMA journal_size_limit = 8388608")
            # Checkpoint the WAL every 4 MB, or more often for a small bound: the WAL is disk
            # space beside max_bytes.
            pages = max(64, min(1000, self.max_bytes // 4096 // 8))
            conn.execute(f"PRAGMA wal_autocheckpoint = {pages}")
        conn.execute("BEGIN")
        try:
            for stmt in _SCHEMA:
                conn.execute(stmt)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta (key, value) VALUES ('schema', ?)", (SCHEMA_VERSION,))
            elif row[0] != SCHEMA_VERSION:
                raise _Incompatible(f"schema version {row[0]!r}, this koordlet writes {SCHEMA_VERSION!r}")
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise

    def _load(self, conn: sqlite3.Connection) -> None:
        self._clear_caches()
        for kid, metric in conn.execute("SELECT id, metric FROM kinds"):
            self._kinds[metric] = kid
        for sid, metric, labels_json in conn.execute("SELECT id, metric, labels FROM series"):
            props = LABELS.get(metric)
            if props is None:
                continue  # a kind this version does not know: gc removes its rounds in time
            labels = json.loads(labels_json)
            if not isinstance(labels, dict) or sorted(labels) != sorted(props):
                continue
            self._series.setdefault(metric, {})[tuple(labels[p] for p in props)] = sid

    def _clear_caches(self) -> None:
        self._kinds.clear()
        self._series.clear()
        self._layouts.clear()
        self._recent.clear()
        self._newest.clear()

    def _layout(self, conn: sqlite3.Connection, lid: int) -> _Layout | None:
        layout = self._layouts.get(lid)
        if layout is not None:
            self._layouts.move_to_end(lid)
            return layout
        row = conn.execute("SELECT kind, sids FROM layouts WHERE id = ?", (lid,)).fetchone()
        if row is None:
            return None
        layout = self._layouts[lid] = _Layout(row[0], bytes(row[1]))
        if len(self._layouts) > _LAYOUT_CACHE:
            self._layouts.popitem(last=False)
        return layout

    def _remember(self, kid: int, blob: bytes, lid: int, repeats: bool) -> None:
        recent = self._recent.setdefault(kid, {})
        recent.pop(blob, None)
        recent[blob] = (lid, repeats)
        if len(recent) > _RECENT_LAYOUTS:
            del recent[next(iter(recent))]

    def _find_layout(self, conn: sqlite3.Connection, kid: int, blob: bytes) -> tuple[int, bool] | None:
        """The layout of exactly these series: a recent one, else one stored earlier."""
        hit = self._recent.get(kid, {}).get(blob)
        if hit is not None:
            return hit
        for lid, stored in conn.execute("SELECT id, sids FROM layouts WHERE kind = ? AND crc = ?",
                                        (kid, zlib.crc32(blob))):
            if stored == blob:
                layout = _Layout(kid, blob)
                self._remember(kid, blob, lid, layout.repeats)
                return lid, layout.repeats
        return None

    def _move_aside(self, why: str) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        aside = f"{self.path}.corrupt-{stamp}"
        n = 1
        while os.path.exists(aside):
            n += 1
            aside = f"{self.path}.corrupt-{stamp}.{n}"
        os.replace(self.path, aside)
        for suffix in ("-wal", "-journal"):
            if os.path.exists(self.path + suffix):
                os.replace(self.path + suffix, aside + suffix)
        if os.path.exists(self.path + "-shm"):
            os.remove(self.path + "-shm")
        log.warning("metric cache %s is unusable (%s): moved it to %s and started an empty one",
                    self.path, why, aside)

    def _recover_runtime(self, exc: BaseException) -> None:
        """A corruption found while running: keep the bad file for inspection, start afresh."""
        if self.path is None or self._conn is None or not _is_corruption(exc):
            return
        try:
            self._conn.close()
        except sqlite3.Error:
            pass
        self._clear_caches()
        self._move_aside(str(exc))
        self._conn = self._connect(self.path)
        self._init_schema(self._conn)

    def _db(self) -> sqlite3.Connection:
        if self._conn is None:
            raise MetricCacheError("metric cache is closed")
        return self._conn

    def _failed(self, conn: sqlite3.Connection, exc: sqlite3.Error, what: str) -> MetricCacheError:
        if conn.in_transaction:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
        self._recover_runtime(exc)
        return MetricCacheError(f"metric cache: {what} failed: {exc}")

    # ------------------------------------------------------------------ writing

    @staticmethod
    def _props(metric: str) -> tuple[str, ...]:
        props = LABELS.get(metric)
        if props is None:
            raise MetricCacheError(f"unknown metric kind {metric!r}")
        return props

    def insert(self, samples: Iterable[Sample]) -> None:
        """Store samples in one transaction. Any bad sample (unknown kind, labels that are not
        exactly the kind's, NaN/inf, not a Sample) refuses the whole batch with a
        MetricCacheError naming it. Writing the same set of series of a kind at the same
        millisecond again replaces the earlier values."""
        with self._lock:
            conn = self._db()
            self._created = []
            try:
                conn.execute("BEGIN")
                groups = self._group(conn, samples)
                if groups:
                    conn.executemany("INSERT OR REPLACE INTO rounds (kind, ts, layout, span, n, vals, offs, big)"
                                     " VALUES (?, ?, ?, ?, ?, ?, ?, ?)", self._rounds(conn, groups))
                conn.execute("COMMIT")
            except BaseException as exc:
                self._undo_created()
                if isinstance(exc, sqlite3.Error):
                    raise self._failed(conn, exc, "insert") from exc
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            finally:
                self._created = []

    def _group(self, conn: sqlite3.Connection, samples: Iterable[Sample]) -> dict:
        """Validate samples and sort them into groups {(metric, bucket): [sids, ms, values]},
        creating unknown series on the way. The hot loop of every collector round: per-kind and
        per-timestamp lookups are done once per kind and timestamp, not once per sample."""
        groups: dict[tuple[str, int], list[list]] = {}
        series = self._series
        isfinite = math.isfinite
        # metric -> [props, nprops, first prop, series by key, ts, ms, 3 appenders of its group]:
        # collectors interleave kinds (a pod's cpu, then its memory ...), so each switch of
        # kind restores that kind's state instead of recomputing it.
        states: dict[str, list] = {}
        st: list = []
        cur_metric = None
        props: tuple[str, ...] = ()
        nprops = p0 = by_key = group = ms = None
        cur_ts: Any = _UNSET
        add_sid = add_ms = add_value = None
        s = None
        try:
            for s in samples:
                metric = s.metric
                if metric != cur_metric:
                    st = states.get(metric)
                    if st is None:
                        props = LABELS.get(metric)
                        if props is None:
                            raise MetricCacheError(f"unknown metric kind {metric!r} in {s!r}")
                        by_key = series.get(metric)
                        if by_key is None:
                            by_key = series[metric] = {}
                        st = states[metric] = [props, len(props), props[0] if props else None, by_key,
                                               _UNSET, None, None, None, None]
                    props, nprops, p0, by_key, cur_ts, ms, add_sid, add_ms, add_value = st
                    cur_metric = metric
                labels = s.labels
                if nprops == 1:
                    if len(labels) != 1 or p0 not in labels:
                        raise self._bad_labels(metric, props, labels, s)
                    v = labels[p0]
                    key = (v if type(v) is str else str(v),)
                elif nprops == 0:
                    if labels:
                        raise self._bad_labels(metric, props, labels, s)
                    key = ()
                else:
                    if len(labels) != nprops or any(p not in labels for p in props):
                        raise self._bad_labels(metric, props, labels, s)
                    key = tuple([str(labels[p]) for p in props])
                ts = s.timestamp
                if ts != cur_ts:
                    ms = int(round(ts * 1000.0))
                    gkey = (metric, ms // _SPAN_MS)
                    group = groups.get(gkey)
                    if group is None:
                        group = groups[gkey] = [[], [], []]
                    add_sid, add_ms, add_value = group[0].append, group[1].append, group[2].append
                    cur_ts = ts
                    st[4:] = (ts, ms, add_sid, add_ms, add_value)
                value = s.value
                if type(value) is not float:
                    value = float(value)
                if not isfinite(value):
                    raise MetricCacheError(f"refusing non-finite value {value!r} in {s!r}")
                sid = by_key.get(key)
                if sid is None:
                    sid = by_key[key] = self._create_series(conn, metric, key)
                    self._created.append(("series", metric, key))
                add_sid(sid)
                add_ms(ms)
                add_value(value)
        except (AttributeError, TypeError, ValueError, OverflowError) as exc:
            if isinstance(exc, MetricCacheError):
                raise
            raise MetricCacheError(f"bad sample {s!r}: {exc}") from None
        return groups

    @staticmethod
    def _bad_labels(metric: str, props: tuple[str, ...], labels: Any, s: Any) -> MetricCacheError:
        try:
            got = sorted(labels)
        except TypeError:
            got = labels
        return MetricCacheError(f"metric kind {metric!r} takes labels {list(props)!r}, got {got!r} in {s!r}")

    def _rounds(self, conn: sqlite3.Connection, groups: dict) -> list[tuple]:
        out = []
        for (metric, _), (sids, mss, vals) in groups.items():
            kid = self._kinds.get(metric)
            if kid is None:
                kid = self._kinds[metric] = conn.execute(
                    "INSERT INTO kinds (metric) VALUES (?)", (metric,)).lastrowid
                self._created.append(("kind", metric, None))
            t0 = min(mss)
            t1 = max(mss)
            sids_blob = _pack("q", sids)
            found = self._find_layout(conn, kid, sids_blob)
            if found is None or found[1]:
                # A layout is stored in ascending series order, so that it depends on the set
                # of series only, not on the order a collector walked its pods in (a known
                # layout matched above is therefore already in that order). A series given
                # twice at one millisecond keeps its last value.
                n = len(sids)
                order = sorted(range(n), key=lambda i: (sids[i], mss[i]))
                order = [i for j, i in enumerate(order)
                         if j + 1 == n or sids[order[j + 1]] != sids[i] or mss[order[j + 1]] != mss[i]]
                sids = [sids[i] for i in order]
                mss = [mss[i] for i in order]
                vals = [vals[i] for i in order]
                sids_blob = _pack("q", sids)
                found = self._find_layout(conn, kid, sids_blob)
                if found is None:
                    lid = conn.execute("INSERT INTO layouts (kind, crc, sids) VALUES (?, ?, ?)",
                                       (kid, zlib.crc32(sids_blob), sids_blob)).lastrowid
                    self._remember(kid, sids_blob, lid, _Layout(kid, sids_blob).repeats)
                    self._created.append(("layout", lid, (kid, sids_blob)))
                else:
                    lid = found[0]
            else:
                lid = found[0]
            offs = None if t0 == t1 else _pack("i", [m - t0 for m in mss])
            vals_blob = _pack("d", vals)
            newest = self._newest.get(kid)
            if newest is None:
                newest = conn.execute("SELECT max(ts) FROM rounds WHERE kind = ?", (kid,)).fetchone()[0]
                newest = -1 << 62 if newest is None else newest
            if t0 <= newest:
                # Perhaps a rewrite of an existing round, whose blob would be left behind.
                old = conn.execute("SELECT big FROM rounds WHERE kind = ? AND ts = ? AND layout = ?",
                                   (kid, t0, lid)).fetchone()
                if old is not None and old[0] is not None:
                    conn.execute("DELETE FROM blobs WHERE id = ?", (old[0],))
            else:
                newest = t0
            self._newest[kid] = newest
            if len(vals_blob) + (len(offs) if offs else 0) <= _INLINE_BYTES:
                out.append((kid, t0, lid, t1 - t0, len(vals), vals_blob, offs, None))
            else:
                big = conn.execute("INSERT INTO blobs (vals, offs) VALUES (?, ?)", (vals_blob, offs)).lastrowid
                out.append((kid, t0, lid, t1 - t0, len(vals), None, None, big))
        return out

    def _undo_created(self) -> None:
        """Forget the in-memory mirrors of what a rolled-back transaction created."""
        for what, a, b in reversed(self._created):
            if what == "series":
                by_key = self._series.get(a)
                if by_key is not None:
                    by_key.pop(b, None)
            elif what == "layout":
                self._layouts.pop(a, None)
                self._recent.get(b[0], {}).pop(b[1], None)
            elif what == "kind":
                self._kinds.pop(a, None)
        for metric in [m for m, by_key in self._series.items() if not by_key]:
            del self._series[metric]

    def _create_series(self, conn: sqlite3.Connection, metric: str, key: tuple[str, ...]) -> int:
        labels_json = json.dumps(dict(zip(LABELS[metric], key)), sort_keys=True, separators=(",", ":"))
        row = conn.execute("SELECT id FROM series WHERE metric = ? AND labels = ?", (metric, labels_json)).fetchone()
        if row is not None:
            return row[0]
        return conn.execute("INSERT INTO series (metric, labels) VALUES (?, ?)", (metric, labels_json)).lastrowid

    # ------------------------------------------------------------------ reading

    def _wanted(self, metric: str, labels: dict[str, Any]) -> list[tuple[tuple[str, ...], int]]:
        props = self._props(metric)
        wanted = []
        for name, value in labels.items():
            if name not in props:
                raise MetricCacheError(
                    f"metric kind {metric!r} has no label {name!r} (its labels: {list(props)!r})")
            wanted.append((props.index(name), str(value)))
        by_key = self._series.get(metric, {})
        if not wanted:
            return list(by_key.items())
        return [(k, sid) for k, sid in by_key.items() if all(k[i] == v for i, v in wanted)]

    def _collect(self, conn: sqlite3.Connection, metric: str, group_of: dict[int, Any],
                 lo: int, hi: int) -> dict[Any, Series]:
        """Points of the series in ``group_of`` (sid -> group) within [lo, hi] ms, per group."""
        kid = self._kinds.get(metric)
        if kid is None or not group_of:
            return {}
        ts_out: dict[Any, list[float]] = {}
        v_out: dict[Any, list[float]] = {}
        unsorted: set = set()
        # Groups of several series interleave their points: they are sorted at the end.
        sizes: dict[Any, int] = {}
        for g in group_of.values():
            sizes[g] = sizes.get(g, 0) + 1
        unsorted.update(g for g, n in sizes.items() if n > 1)
        # layout id -> [(position, group)] of the wanted series in it
        selections: dict[int, list[tuple[int, Any]]] = {}
        widths: dict[int, int] = {}

        def selection(lid: int) -> list[tuple[int, Any]]:
            sel = selections.get(lid)
            if sel is None:
                layout = self._layout(conn, lid)
                sel = []
                if layout is not None:
                    get = group_of.get
                    for pos, sid in enumerate(layout.sids):
                        g = get(sid)
                        if g is not None:
                            sel.append((pos, g))
                    widths[lid] = len(layout.sids)
                selections[lid] = sel
            return sel

        run_lid = None
        run_ts: list[float] = []
        run_blobs: list[bytes] = []

        def flush_run() -> None:
            # Rounds of one layout in a row, one timestamp each: values of the series at
            # position p are every width-th double of the concatenated rows (C-level slicing).
            if not run_blobs:
                return
            sel = selection(run_lid)
            width = widths[run_lid]
            mv = memoryview(b"".join(run_blobs)).cast("d")
            for pos, g in sel:
                vals = mv[pos::width].tolist()
                if _BIG_ENDIAN:
                    vals = _unpack("d", _pack("d", vals)).tolist()
                t = ts_out.get(g)
                if t is None:
                    ts_out[g] = list(run_ts)
                    v_out[g] = vals
                else:
                    t.extend(run_ts)
                    v_out[g].extend(vals)
            run_ts.clear()
            run_blobs.clear()

        last_ts = None
        for ts, lid, blob, offs in conn.execute(_SELECT_ROUNDS, (kid, lo - _SPAN_MS + 1, hi)):
            if offs is None:
                if ts < lo or not selection(lid):
                    continue
                if lid != run_lid:
                    flush_run()
                    run_lid = lid
                if ts == last_ts:
                    # Two layouts at one millisecond: a series in both has two points there.
                    unsorted.update(g for _, g in selection(lid))
                last_ts = ts
                run_ts.append(ts / 1000.0)
                run_blobs.append(blob)
                continue
            # A round whose points carry their own timestamps: point by point.
            flush_run()
            run_lid = None
            sel = selection(lid)
            if not sel:
                continue
            vals = _unpack("d", blob)
            deltas = _unpack("i", offs)
            for pos, g in sel:
                t = ts + deltas[pos]
                if lo <= t <= hi:
                    ts_out.setdefault(g, []).append(t / 1000.0)
                    v_out.setdefault(g, []).append(vals[pos])
                    unsorted.add(g)
        flush_run()
        result = {}
        for g, ts_list in ts_out.items():
            vals = v_out[g]
            if g in unsorted and any(a > b for a, b in zip(ts_list, ts_list[1:])):
                order = sorted(range(len(ts_list)), key=ts_list.__getitem__)
                ts_list = [ts_list[i] for i in order]
                vals = [vals[i] for i in order]
            result[g] = Series(ts_list, vals)
        return result

    def query(self, metric: str, start: float, end: float, **labels: str) -> Series:
        """Points of ``metric`` with ``start <= timestamp <= end`` whose labels match the given
        subset exactly; several matching series are merged into one Series (by timestamp)."""
        with self._lock:
            conn = self._db()
            group_of = {sid: 0 for _, sid in self._wanted(metric, labels)}
            try:
                return self._collect(conn, metric, group_of, _ms(start), _ms(end)).get(0) or Series()
            except sqlite3.Error as exc:
                raise self._failed(conn, exc, f"query of {metric!r}") from exc

    def query_by(self, metric: str, label: str, start: float, end: float) -> dict[str, Series]:
        """One Series per value of ``label`` (e.g. every pod's ``pod_cpu_usage`` keyed by
        ``pod_uid``) in one pass; values without points in the window are left out."""
        with self._lock:
            conn = self._db()
            props = self._props(metric)
            if label not in props:
                raise MetricCacheError(
                    f"metric kind {metric!r} has no label {label!r} (its labels: {list(props)!r})")
            i = props.index(label)
            group_of = {sid: key[i] for key, sid in self._series.get(metric, {}).items()}
            try:
                return self._collect(conn, metric, group_of, _ms(start), _ms(end))
            except sqlite3.Error as exc:
                raise self._failed(conn, exc, f"query of {metric!r} by {label!r}") from exc

    # ------------------------------------------------------------------ key-value store

    def set_kv(self, key: str, value: Any) -> None:
        """Store a JSON-able value under ``key`` (persisted with the series)."""
        try:
            text = json.dumps(value, allow_nan=False, sort_keys=True, separators=(",", ":"))
        except (TypeError, ValueError) as exc:
            raise MetricCacheError(f"metric cache: value of key {key!r} is not JSON: {exc}") from exc
        with self._lock:
            conn = self._db()
            try:
                conn.execute("INSERT OR REPLACE INTO kv (key, value) VALUES (?, ?)", (str(key), text))
            except sqlite3.Error as exc:
                raise self._failed(conn, exc, f"storing key {key!r}") from exc

    def get_kv(self, key: str, default: Any = None) -> Any:
        """The value stored under ``key``, or ``default``."""
        with self._lock:
            conn = self._db()
            try:
                row = conn.execute("SELECT value FROM kv WHERE key = ?", (str(key),)).fetchone()
            except sqlite3.Error as exc:
                raise self._failed(conn, exc, f"reading key {key!r}") from exc
        if row is None:
            return default
        return json.loads(row[0])

    # ------------------------------------------------------------------ bounds

    def _pages(self, conn: sqlite3.Connection) -> tuple[int, int, int]:
        page_size = conn.execute("PRAGMA page_size").fetchone()[0]
        page_count = conn.execute("PRAGMA page_count").fetchone()[0]
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        return page_size, page_count, free

    def _used_bytes(self, conn: sqlite3.Connection) -> int:
        page_size, page_count, free = self._pages(conn)
        return (page_count - free) * page_size

    def gc(self) -> int:
        """Drop points older than ``clock() - retention`` (a round whose points straddle the
        cutoff goes when its newest point does), then — while the used pages exceed 90% of
        ``max_bytes`` — the oldest rounds; then delete layouts and series left without points.
        Returns the number of points dropped. Cheap when nothing is due (a few page-count
        pragmas), so it can run every minute."""
        with self._lock:
            conn = self._db()
            try:
                return self._gc(conn)
            except sqlite3.Error as exc:
                raise self._failed(conn, exc, "gc") from exc

    def _delete(self, conn: sqlite3.Connection, where: str, args: list[tuple]) -> int:
        """Delete rounds (and their blobs) matching ``where`` for each args tuple; count points."""
        conn.execute("BEGIN")
        points = 0
        for a in args:
            row = conn.execute(f"SELECT sum(n) FROM rounds WHERE {where}", a).fetchone()
            if row[0]:
                points += row[0]
                conn.execute(f"DELETE FROM blobs WHERE id IN (SELECT big FROM rounds WHERE {where}"
                             " AND big IS NOT NULL)", a)
                conn.execute(f"DELETE FROM rounds WHERE {where}", a)
        conn.execute("COMMIT")
        return points

    def _gc(self, conn: sqlite3.Connection) -> int:
        kids = list(self._kinds.values())
        cutoff = _ms(self._clock() - self.retention_seconds)
        dropped = self._delete(conn, "kind = ? AND ts < ? AND ts + span < ?",
                               [(k, cutoff, cutoff) for k in kids])
        target = int(self.max_bytes * _SIZE_GC_TARGET)
        used = self._used_bytes(conn)
        rounds = 0
        # Points are spread about evenly over time, so dropping the oldest share of the time
        # span frees about that share of the pages; a few more rounds absorb uneven spreads.
        # Collecting from 90% on (not from 100%) keeps the peak between two gc runs — 90% plus
        # one interval of writes — under max_bytes, and each run drops about one interval's worth.
        while used > target and rounds < 10:
            rounds += 1
            lo = hi = None
            for k in kids:
                # Two statements: SQLite answers a lone min() or max() from the index edge.
                a = conn.execute("SELECT min(ts) FROM rounds WHERE kind = ?", (k,)).fetchone()[0]
                b = conn.execute("SELECT max(ts) FROM rounds WHERE kind = ?", (k,)).fetchone()[0]
                if a is not None:
                    lo = a if lo is None else min(lo, a)
                    hi = b if hi is None else max(hi, b)
            if lo is None or lo >= hi:
                break
            share = min(1.0, (used - target) / used * 1.1)
            # Never the newest millisecond: the latest round of every kind survives.
            cut = min(hi, lo + max(1, int((hi - lo) * share)))
            n = self._delete(conn, "kind = ? AND ts < ?", [(k, cut) for k in kids])
            dropped += n
            used = self._used_bytes(conn)
            log.debug("metric cache over %d bytes: dropped %d points before %d ms", self.max_bytes, n, cut)
        if dropped:
            self._drop_unused(conn)
        self._release_pages(conn)
        return dropped

    def _drop_unused(self, conn: sqlite3.Connection) -> None:
        """Delete layouts no round uses, then series no layout holds (file and mirrors)."""
        unused = [r[0] for r in conn.execute(
            "SELECT id FROM layouts l WHERE NOT EXISTS (SELECT 1 FROM rounds WHERE layout = l.id)")]
        if not unused:
            return  # every series is still in a layout in use
        conn.execute("BEGIN")
        conn.executemany("DELETE FROM layouts WHERE id = ?", [(lid,) for lid in unused])
        live: set[int] = set()
        for (blob,) in conn.execute("SELECT sids FROM layouts"):
            live.update(_unpack("q", blob))
        dead = {r[0] for r in conn.execute("SELECT id FROM series")} - live
        conn.executemany("DELETE FROM series WHERE id = ?", [(sid,) for sid in dead])
        conn.execute("COMMIT")
        for lid in unused:
            self._layouts.pop(lid, None)
        gone = set(unused)
        for recent in self._recent.values():
            for blob in [b for b, (lid, _) in recent.items() if lid in gone]:
                del recent[blob]
        if dead:
            for metric in list(self._series):
                by_key = self._series[metric]
                for key in [k for k, sid in by_key.items() if sid in dead]:
                    del by_key[key]
                if not by_key:
                    del self._series[metric]

    def _release_pages(self, conn: sqlite3.Connection) -> None:
        # Free pages are reused by later inserts; only give back what makes the file exceed
        # max_bytes (e.g. after retention was lowered), so the file does not shrink and regrow.
        page_size, page_count, free = self._pages(conn)
        excess = page_count * page_size - self.max_bytes
        if excess > 0 and free > 0:
            n = min(free, -(-excess // page_size))
            # executescript: through execute() the pragma frees a single page per call.
            conn.executescript(f"PRAGMA incremental_vacuum({int(n)})")
            if self.path is not None:
                # The file shrinks when the WAL is checkpointed; do it now (and empty the WAL).
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()

    def run_gc(self, stop: threading.Event, interval: float = 60.0) -> None:
        """Run :meth:`gc` now and every ``interval`` seconds until ``stop`` is set (a runnable)."""
        while not stop.is_set():
            try:
                n = self.gc()
                if n:
                    log.debug("metric cache gc dropped %d points", n)
            except MetricCacheError as exc:
                log.warning("%s", exc)
            if stop.wait(interval):
                break

    def stats(self) -> dict:
        """``points``, ``series``, ``bytes`` (database pages), plus ``used_bytes`` (pages in
        use), ``wal_bytes``, and row counts ``layouts``, ``rounds``, ``blobs``."""
        with self._lock:
            conn = self._db()
            npoints, nrounds = conn.execute("SELECT sum(n), count(*) FROM rounds").fetchone()
            series = conn.execute("SELECT count(*) FROM series").fetchone()[0]
            layouts = conn.execute("SELECT count(*) FROM layouts").fetchone()[0]
            blobs = conn.execute("SELECT count(*) FROM blobs").fetchone()[0]
            page_size, page_count, free = self._pages(conn)
        wal = 0
        if self.path is not None:
            try:
                wal = os.path.getsize(self.path + "-wal")
            except OSError:
                wal = 0
        return {"points": npoints or 0, "series": series, "bytes": page_count * page_size,
                "used_bytes": (page_count - free) * page_size, "wal_bytes": wal,
                "layouts": layouts, "rounds": nrounds, "blobs": blobs}

    def close(self) -> None:
        """Close the database (the WAL is folded into the file). Idempotent."""
        with self._lock:
            if self._conn is not None:
                try:
                    self._conn.close()
                finally:
                    self._conn = None
                    self._clear_caches()

    def __enter__(self) -> "MetricCache":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
