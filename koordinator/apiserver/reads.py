"""The read verbs: GET of one object, LIST (selectors, pagination, resourceVersion) and WATCH."""

from __future__ import annotations

import bisect
import random
from typing import Any

import orjson

from koordinator.apiserver import errors
from koordinator.apiserver.encoding import Presenter, check_accept, served, wants_table
from koordinator.apiserver.http import HttpConnection, Request, Response
from koordinator.apiserver.options import Options
from koordinator.apiserver.pagination import decode_continue, encode_continue, parse_limit
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import Entry, Store
from koordinator.apiserver.watch import WatchStream
from koordinator.apis.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector

Obj = dict[str, Any]


def parse_rv(value: str, what: str = "resourceVersion") -> int:
    """A resourceVersion query parameter; 400 unless a non-negative integer."""
    try:
        rv = int(value)
        if rv < 0:
            raise ValueError
        return rv
    except ValueError:
        raise errors.bad_request(f"invalid {what}: {value!r}") from None


def filter_entries(entries: list[Entry], namespace: str | None, labels: LabelSelector | None,
                   fields: FieldSelector | None) -> list[Entry]:
    """The entries in ``namespace`` (all when None) that match both selectors."""
    if namespace is not None:
        entries = [e for e in entries if e.fields.get("metadata.namespace") == namespace]
    if labels is not None:
        entries = [e for e in entries if labels.matches(e.labels)]
    if fields is not None:
        entries = [e for e in entries if fields.matches(e.fields)]
    return entries


def selectors(req: Request, rt: ResourceType) -> tuple[LabelSelector | None, FieldSelector | None]:
    """The request's label and field selectors; 400 for a field ``rt`` cannot be selected by."""
    labels = parse_label_selector(req.query["labelSelector"]) if req.query.get("labelSelector") else None
    fields = None
    if req.query.get("fieldSelector"):
        fields = parse_field_selector(req.query["fieldSelector"])
        known = rt.field_names()
        for name in fields.fields():
            if name not in known:
                raise errors.bad_request(f'field label not supported: {name}')
    return labels, fields


class Reader:
    """Serves GET, LIST and WATCH from the store."""

    def __init__(self, store: Store, options: Options, presenter: Presenter) -> None:
        self.store = store
        self.options = options
        self.presenter = presenter

    def get(self, rt: ResourceType, key: str, name: str) -> Entry:
        """The stored entry of ``key``; 404 naming ``name`` when there is none."""
        entry = self.store.get(rt.storage_key, key)
        if entry is None:
            raise errors.not_found(rt.plural, name, rt.group)
        return entry

    def get_response(self, req: Request, rt: ResourceType, key: str, name: str) -> Response:
        """GET of one object."""
        return self.presenter.respond_entry(req, rt, self.get(rt, key, name))

    def list(self, req: Request, rt: ResourceType, namespace: str | None) -> Response:
        """LIST, at the current revision, an exact one, or where a ``continue`` token left off."""
        check_accept(req)
        labels, fields = selectors(req, rt)
        rv_param = req.query.get("resourceVersion", "")
        token = req.query.get("continue", "")
        limit = parse_limit(req.query.get("limit", ""))
        start_after = None
        if token:
            list_rv, start_after = decode_continue(token, self.store.compacted)
            table = self.store.snapshot_at(rt.storage_key, list_rv)
            entries = self.store.sorted_entries(rt.storage_key, table if list_rv < self.store.rev else None)
        else:
            list_rv = self.store.rev
            if rv_param not in ("", "0"):
                wanted = parse_rv(rv_param)
                if wanted > self.store.rev:
                    raise errors.StatusError(504, "Timeout",
                                             f"Too large resource version: {wanted}, current: {self.store.rev}",
                                             {"causes": [{"reason": "ResourceVersionTooLarge",
                                                          "message": "Too large resource version"}],
                                              "retryAfterSeconds": 1})
                if req.query.get("resourceVersionMatch") == "Exact":
                    list_rv = wanted
                    entries = self.store.sorted_entries(rt.storage_key, self.store.snapshot_at(rt.storage_key, wanted))
                else:
                    entries = self.store.sorted_entries(rt.storage_key)
            else:
                entries = self.store.sorted_entries(rt.storage_key)
        if start_after is not None:
            keys = [e.key for e in entries]
            entries = entries[bisect.bisect_right(keys, start_after):]
        entries = filter_entries(entries, namespace, labels, fields)
        list_meta: Obj = {"resourceVersion": str(list_rv)}
        if limit and len(entries) > limit:
            remaining = len(entries) - limit
            entries = entries[:limit]
            list_meta["continue"] = encode_continue(list_rv, entries[-1].key)
            list_meta["remainingItemCount"] = remaining
        if wants_table(req):
            return Response.json(200, self.presenter.table(req, rt, [served(rt, e) for e in entries], list_meta))
        head = b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[' % (
            rt.list_kind.encode(), rt.api_version.encode(), orjson.dumps(list_meta))
        return Response(200, head + b",".join(self.presenter.present(rt, e) for e in entries) + b"]}")

    def watch(self, req: Request, conn: HttpConnection, rt: ResourceType, namespace: str | None) -> None:
        """WATCH: streams events from the requested revision once the current batch is committed."""
        labels, fields = selectors(req, rt)
        rv_param = req.query.get("resourceVersion", "")
        timeout_param = req.query.get("timeoutSeconds")
        if timeout_param:
            try:
                timeout = float(int(timeout_param))
            except ValueError:
                raise errors.bad_request(f"invalid timeoutSeconds: {timeout_param!r}") from None
        else:
            base = self.options.min_request_timeout
            timeout = random.uniform(base, 2 * base)
        bookmarks = req.query.get("allowWatchBookmarks") in ("1", "true")
        send_initial = req.query.get("sendInitialEvents") in ("1", "true")
        table = wants_table(req)

        def encode(entry: Entry) -> bytes:
            if table:
                return orjson.dumps(self.presenter.table(req, rt, [served(rt, entry)],
                                                         {"resourceVersion": str(entry.rv)}))
            return self.presenter.present(rt, entry)

        def bookmark(rv: int, annotations: dict[str, str] | None) -> Obj:
            md: Obj = {"resourceVersion": str(rv)}
            if annotations:
                md["annotations"] = annotations
            return {"kind": rt.kind, "apiVersion": rt.api_version, "metadata": md}

        initial: list[Entry] = []
        replay: list = []
        error_status = None
        if rv_param in ("", "0") or send_initial:
            start_rv = self.store.rev
            initial = self.store.sorted_entries(rt.storage_key)
        else:
            start = parse_rv(rv_param)
            start_rv = max(start, self.store.rev)
            try:
                replay = [ev for ev in self.store.events_after(start) if ev.storage == rt.storage_key]
            except errors.StatusError as err:
                error_status = err.to_status()
        stream = WatchStream(
            self.store, conn, rt.storage_key, namespace=namespace, labels=labels, fields=fields,
            start_rv=start_rv, encode=encode, bookmark_object=bookmark if bookmarks else None,
            bookmark_interval=self.options.bookmark_interval, timeout=timeout,
            max_backlog=self.options.max_watch_backlog,
        )

        def begin() -> None:
            if error_status is not None:
                # Like the real server: 200, then one ERROR event (410 Expired), then the end.
                conn.start_stream(200, {}, lambda: None)
                stream.conn.write_chunk(b'{"type":"ERROR","object":%s}\n' % orjson.dumps(error_status))
                conn.end_stream()
                return
            stream.start(initial, replay, send_initial and bookmarks)

        self.store.after_commit(begin)
