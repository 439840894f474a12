"""Request handling of the embedded API server: routing, the REST verbs, list/watch.

Everything runs on one event-loop thread, so handlers read and write the store without
locks. A response leaves only once the writes it depends on are committed (see
``store.Store.commit``).
"""

from __future__ import annotations

import asyncio
import base64
import logging
import random
from dataclasses import dataclass
from typing import Any, Callable, Generator

import orjson

from koordinator.apiserver import (admission, builtin_defaults, builtin_validation, deletion, discovery, errors, patch,
                                   protobuf, tables, webhooks)
from koordinator.apiserver.http import HttpConnection, Request, Response
from koordinator.apiserver.objects import generate_name, meta, new_uid, now_rfc3339, spec_part, load_yaml
from koordinator.apiserver.resources import Registry, ResourceType
from koordinator.apiserver.store import Entry, Store, object_key
from koordinator.apiserver.watch import WatchStream
from koordinator.apis.selectors import SelectorError, parse_field_selector, parse_label_selector

log = logging.getLogger("koordinator.apiserver")

Obj = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)

# Fields of ObjectMeta; anything else under metadata is an unknown field.
OBJECT_META_FIELDS = {
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields",
}
SERVER_SET_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                   "selfLink")
# A write that saw its object change while webhooks were called starts over (GuaranteedUpdate's retry).
MAX_WRITE_ATTEMPTS = 5
ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}

# A write in steps: a generator that yields the webhook calls it needs (``webhooks.Call``), is sent
# back their outcome (the mutated object, or None), and returns the write's result.
Steps = Generator[webhooks.Call, Any, Any]


@dataclass
class Options:
    """Behaviour switches of the server (CLI flags)."""

    pod_deletion: str = "immediate"  # or "graceful": bound pods wait for a grace-0 delete, like a kubelet's
    bookmark_interval: float = 60.0
    min_request_timeout: float = 1800.0
    max_watch_backlog: int = 16 << 20
    server_address: str = "127.0.0.1:6443"


@dataclass
class Route:
    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    sub: str | None


class _Stale(Exception):
    """The object changed while the write waited for webhooks: the write starts over."""

    def __init__(self, rt: ResourceType, name: str) -> None:
        super().__init__(name)
        self.rt = rt
        self.name = name


class _AdmittedWrites:
    """The server as ``apply.server_side_apply`` sees it on a client request: its create and update
    return write steps that call admission webhooks (see ``ApiServer._write``)."""

    def __init__(self, app: "ApiServer") -> None:
        self._app = app
        self.store = app.store

    def create_object(self, rt: ResourceType, namespace: str | None, obj: Any,
                      query: dict[str, str] | None = None) -> Steps:
        return self._app._create_steps(rt, namespace, obj, query or {}, admit=True)

    def _apply_update(self, rt: ResourceType, entry: Entry, old: Obj, obj: Obj, sub: str | None,
                      query: dict[str, str]) -> Steps:
        return self._app._update_steps(rt, entry, old, obj, sub, query, admit=True)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._app, name)


class ApiServer:
    """The API: owns the registry and the store; ``handle`` serves one HTTP request."""

    def __init__(self, store: Store, options: Options | None = None) -> None:
        self.store = store
        self.options = options or Options()
        self.registry = Registry()
        self.loop: asyncio.AbstractEventLoop | None = None
        self._commit_scheduled = False
        self._post_commit_hooks: list[Callable[[], None]] = []
        self.webhooks = webhooks.Webhooks(store)
        # Who sent the request being dispatched (AdmissionReview userInfo).
        self._user: dict[str, Any] = ANONYMOUS
        self._pending_writes: set[asyncio.Task] = set()
        # Imported here: these modules call back into the server.
        from koordinator.apiserver import crds, pods

        self.crds = crds.CrdManager(self)
        self.pods = pods.PodSubresources(self)
        for rt in self.registry.all():
            store.register(rt.storage_key, rt.selectable_fields)
        self.crds.load_stored()
        self._bootstrap()

    # -- bootstrap -------------------------------------------------------------

    def _bootstrap(self) -> None:
        """Objects a fresh cluster has: the system namespaces and priority classes."""
        ns_rt = self.registry.get("", "v1", "namespaces")
        for name in ("default", "kube-system", "kube-public", "kube-node-lease"):
            if self.store.get("namespaces", name) is None:
                self.create_object(ns_rt, None, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        pc_rt = self.registry.get("scheduling.k8s.io", "v1", "priorityclasses")
        for name, value in admission.SYSTEM_PRIORITY_CLASSES.items():
            if self.store.get(pc_rt.storage_key, name) is None:
                self.create_object(pc_rt, None, {
                    "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                    "value": value, "description": "Used for system critical pods that must not be moved from their current node.",
                })
        self.store.commit()

    # -- commit scheduling -----------------------------------------------------

    def schedule_commit(self) -> None:
        if self.store.dirty and not self._commit_scheduled and self.loop is not None:
            self._commit_scheduled = True
            self.loop.call_soon(self._commit)

    def _commit(self) -> None:
        self._commit_scheduled = False
        # Controllers the server stands in for (PDB status) react to this batch of writes;
        # their own writes join the same commit.
        hooks, self._post_commit_hooks = self._post_commit_hooks, []
        for hook in hooks:
            try:
                hook()
            except Exception:  # a derived-status bug must never lose the user's writes
                log.exception("post-write hook failed")
        self.store.commit()

    def after_writes(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` before the current batch commits (once per batch per hook)."""
        if hook not in self._post_commit_hooks:
            self._post_commit_hooks.append(hook)

    # -- HTTP entry point ------------------------------------------------------

    def handle(self, req: Request, conn: HttpConnection, user: dict[str, Any] | None = None) -> None:
        """Serve one request; ``user`` is the authenticated user (AdmissionReview userInfo)."""
        self._user = user or ANONYMOUS
        try:
            result = self.dispatch(req, conn)
        except errors.StatusError as err:
            result = Response.error(err)
        except SelectorError as err:
            result = Response.error(errors.bad_request(str(err)))
        if result is not None:
            self.store.after_commit(lambda: conn.respond(result))
        self.schedule_commit()

    def dispatch(self, req: Request, conn: HttpConnection) -> Response | None:
        path = req.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(("/healthz/", "/livez/", "/readyz/")):
            return Response(200, b"ok", "text/plain; charset=utf-8")
        if path == "/version":
            return Response.json(200, discovery.KUBE_VERSION)
        if path == "/api":
            return Response.json(200, discovery.api_versions(self.options.server_address))
        if path == "/apis":
            return Response.json(200, discovery.api_group_list(self.registry))
        if path == "/openapi/v3":
            return Response.json(200, discovery.openapi_v3_index(self.registry))
        if path.startswith("/openapi/v3/"):
            return self._openapi_doc(path[len("/openapi/v3/"):])
        if path == "/openapi/v2":
            # kubectl reads this only for kinds the v3 documents lack (to validate them client
            # side): a valid, empty swagger document makes it fall through to the REST mapping,
            # which then reports the kind as unknown just as with a real server.
            return Response(200, b"", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        route = self._route(path)
        if isinstance(route, Response):
            return route
        return self._serve(req, conn, route)

    def _openapi_doc(self, gv_path: str) -> Response:
        parts = gv_path.split("/")
        if parts[0] == "api" and len(parts) == 2:
            doc = discovery.openapi_v3_document(self.registry, "", parts[1])
        elif parts[0] == "apis" and len(parts) == 3:
            doc = discovery.openapi_v3_document(self.registry, parts[1], parts[2])
        else:
            doc = None
        if doc is None:
            raise errors.not_found_path()
        return Response.json(200, doc)

    def _route(self, path: str) -> Route | Response:
        parts = [p for p in path.split("/") if p]
        if not parts or parts[0] not in ("api", "apis"):
            raise errors.not_found_path()
        if parts[0] == "api":
            if len(parts) < 2 or parts[1] != "v1":
                raise errors.not_found_path()
            group, version, rest = "", "v1", parts[2:]
        else:
            if len(parts) == 2:
                doc = discovery.api_group(self.registry, parts[1])
                if doc is None:
                    raise errors.not_found_path()
                return Response.json(200, doc)
            group, version, rest = parts[1], parts[2], parts[3:]
        if not rest:
            doc = discovery.api_resource_list(self.registry, group, version)
            if doc is None:
                raise errors.not_found_path()
            return Response.json(200, doc)
        namespace = None
        if rest[0] == "namespaces" and len(rest) >= 3:
            if group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"):
                return Route(group, version, "namespaces", None, rest[1], rest[2])
            namespace, rest = rest[1], rest[2:]
        if len(rest) > 3:
            raise errors.not_found_path()
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        return Route(group, version, plural, namespace, name, sub)

    def resource(self, route: Route) -> ResourceType:
        rt = self.registry.get(route.group, route.version, route.plural)
        if rt is None or (route.namespace is not None and not rt.namespaced):
            raise errors.not_found_path()
        if route.sub is not None and route.sub not in rt.subresources and not (
                rt.plural == "namespaces" and route.sub == "finalize"):
            raise errors.not_found_path()
        return rt

    def _serve(self, req: Request, conn: HttpConnection, route: Route) -> Response | None:
        rt = self.resource(route)
        method = req.method
        if rt.group == "" and rt.plural == "bindings":
            if method != "POST" or route.name is not None or route.namespace is None:
                raise errors.method_not_allowed(method, rt.plural)
            body = self.decode(req, None)
            pod_name = ((body.get("metadata") or {}) if isinstance(body, dict) else {}).get("name")
            if not pod_name:
                raise errors.invalid("Binding", "", "", [errors.required("metadata.name")])
            namespace = route.namespace
            return self._write(req, conn, rt, self._connect_steps(
                req, rt, None, namespace, pod_name, body, {"group": "", "version": "v1", "kind": "Binding"},
                lambda b: self.pods.bind(namespace, pod_name, b, req.query)))
        if route.name is None:
            if method == "GET":
                if req.query.get("watch") in ("1", "true"):
                    self.watch(req, conn, rt, route.namespace)
                    return None
                return self.list(req, rt, route.namespace)
            if method == "POST":
                if rt.namespaced and route.namespace is None:
                    raise errors.method_not_allowed("POST", rt.plural)
                body = self.decode(req, rt)
                return self._write(req, conn, rt, self._create_steps(rt, route.namespace, body, req.query, admit=True),
                                   201)
            if method == "DELETE":
                return self._write(req, conn, rt, self._delete_collection_steps(req, rt, route.namespace))
            raise errors.method_not_allowed(method, rt.plural)
        key = object_key(route.namespace if rt.namespaced else None, route.name)
        if route.sub in ("binding", "eviction"):
            if method != "POST":
                raise errors.method_not_allowed(method, f"{rt.plural}/{route.sub}")
            body = self.decode(req, None)
            namespace, name = route.namespace, route.name
            if route.sub == "binding":
                kind, perform = {"group": "", "version": "v1", "kind": "Binding"}, self.pods.bind
            else:
                kind, perform = {"group": "policy", "version": "v1", "kind": "Eviction"}, self.pods.evict
            return self._write(req, conn, rt, self._connect_steps(
                req, rt, route.sub, namespace, name, body, kind, lambda b: perform(namespace, name, b, req.query)))
        if route.sub == "scale":
            return self.scale(req, rt, key, route)
        if method == "GET":
            entry = self._get(rt, key, route.name)
            return self._respond_entry(req, rt, entry)
        name = route.name
        if method in ("PUT", "POST") and (method == "PUT" or route.sub == "finalize"):
            sub = route.sub if method == "PUT" else "finalize"
            # Each attempt decodes the body afresh: an attempt modifies the object it works on.
            return self._write(req, conn, rt, self._retrying(
                lambda: self._put_steps(rt, key, name, self.decode(req, rt), sub, req.query, admit=True)))
        if method == "PATCH":
            return self._write(req, conn, rt, self._retrying(lambda: self._patch_steps(req, rt, route, key, True)))
        if method == "DELETE":
            options = deletion.delete_options(self.decode(req, None) if req.body.strip() else None, req.query)
            return self._write(req, conn, rt, self._retrying(
                lambda: self._delete_steps(rt, key, name, options, req.query, admit=True)))
        raise errors.method_not_allowed(method, rt.plural)

    # -- encoding --------------------------------------------------------------

    def decode(self, req: Request, rt: ResourceType | None) -> Any:
        ctype = req.header("content-type", "application/json").split(";")[0].strip().lower()
        if ctype.startswith("application/vnd.kubernetes.protobuf"):
            # client-go typed clients (most kubectl create generators) send built-in kinds so.
            return protobuf.decode(req.body, rt.kind if rt else None, rt.version if rt else None)
        try:
            if ctype in ("application/yaml", "application/x-yaml", "text/yaml", APPLY_PATCH):
                body = load_yaml(req.body)
            else:
                body = orjson.loads(req.body or b"null")
        except Exception as exc:
            detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            if rt is not None:
                raise errors.cannot_handle(rt.kind, rt.version, detail) from None
            raise errors.bad_request(f"the request body could not be decoded: {detail}") from None
        return body

    def present(self, rt: ResourceType, entry: Entry) -> bytes:
        """The stored bytes, relabelled if the client asked for another served version."""
        if rt.view is not None:
            return orjson.dumps(rt.view.from_storage(entry.obj()))
        versions = self.registry.versions_of(rt.storage_key)
        # Objects are always stored in the form of the one version that is not a converted view.
        if len(versions) < 2 or all(t.view is not None for t in versions if t is not rt):
            return entry.raw
        obj = entry.obj()
        if obj.get("apiVersion") == rt.api_version:
            return entry.raw
        obj["apiVersion"] = rt.api_version
        return orjson.dumps(obj)

    @staticmethod
    def served(rt: ResourceType, entry: Entry) -> Obj:
        """The object of ``entry`` as ``rt`` serves it (converted when ``rt`` is a view of another form)."""
        obj = entry.obj()
        return rt.view.from_storage(obj) if rt.view is not None else obj

    @staticmethod
    def wants_table(req: Request) -> bool:
        accept = req.header("accept")
        return "as=Table" in accept

    def _check_accept(self, req: Request) -> None:
        accept = req.header("accept")
        if accept and "json" not in accept and "*/*" not in accept and "yaml" not in accept:
            raise errors.not_acceptable(accept)

    def _respond_entry(self, req: Request, rt: ResourceType, entry: Entry) -> Response:
        self._check_accept(req)
        if self.wants_table(req):
            return Response.json(200, self._table(req, rt, [self.served(rt, entry)],
                                                  {"resourceVersion": str(entry.rv)}))
        return Response(200, self.present(rt, entry))

    @staticmethod
    def _warning_headers(warnings: list[str]) -> dict[str, str]:
        if not warnings:
            return {}
        # RFC 7234 warn-text is a quoted-string: quotes and backslashes inside are escaped.
        return {"Warning": ", ".join(
            '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"' for w in dict.fromkeys(warnings))}

    def _respond_object(self, req: Request, rt: ResourceType, result: tuple[int, Any, list[str]] | Any,
                        code: int = 200) -> Response:
        status, body, warnings = result if isinstance(result, tuple) else (code, result, [])
        headers = self._warning_headers(warnings)
        if isinstance(body, Entry):
            return Response(status, self.present(rt, body), headers=headers)
        if rt.view is not None and isinstance(body, dict) and body.get("apiVersion") == rt.view.storage_api_version:
            body = rt.view.from_storage(body)  # e.g. a dry-run delete answers with the stored object
        return Response.json(status, body, headers=headers)

    def _table(self, req: Request, rt: ResourceType, objs: list[Obj], list_meta: Obj) -> Obj:
        columns = (rt.crd.printer_columns(rt.version) or []) if rt.crd is not None else None
        include = req.query.get("includeObject", "Metadata")
        return tables.to_table(rt.group, rt.kind, objs, printer_columns=columns, include_object=include,
                               list_meta=list_meta)

    # -- reads -----------------------------------------------------------------

    def _get(self, rt: ResourceType, key: str, name: str) -> Entry:
        entry = self.store.get(rt.storage_key, key)
        if entry is None:
            raise errors.not_found(rt.plural, name, rt.group)
        return entry

    def _selectors(self, req: Request, rt: ResourceType):
        labels = parse_label_selector(req.query["labelSelector"]) if req.query.get("labelSelector") else None
        fields = None
        if req.query.get("fieldSelector"):
            fields = parse_field_selector(req.query["fieldSelector"])
            known = rt.field_names()
            for name in fields.fields():
                if name not in known:
                    raise errors.bad_request(f'field label not supported: {name}')
        return labels, fields

    def _filter(self, entries: list[Entry], namespace: str | None, labels, fields) -> list[Entry]:
        if namespace is not None:
            entries = [e for e in entries if e.fields.get("metadata.namespace") == namespace]
        if labels is not None:
            entries = [e for e in entries if labels.matches(e.labels)]
        if fields is not None:
            entries = [e for e in entries if fields.matches(e.fields)]
        return entries

    def _parse_rv(self, value: str, what: str = "resourceVersion") -> int:
        try:
            rv = int(value)
            if rv < 0:
                raise ValueError
            return rv
        except ValueError:
            raise errors.bad_request(f"invalid {what}: {value!r}") from None

    def list(self, req: Request, rt: ResourceType, namespace: str | None) -> Response:
        self._check_accept(req)
        labels, fields = self._selectors(req, rt)
        rv_param = req.query.get("resourceVersion", "")
        token = req.query.get("continue", "")
        limit = self._parse_limit(req.query.get("limit", ""))
        start_after = None
        if token:
            list_rv, start_after = self._decode_continue(token)
            table = self.store.snapshot_at(rt.storage_key, list_rv)
            entries = self.store.sorted_entries(rt.storage_key, table if list_rv < self.store.rev else None)
        else:
            list_rv = self.store.rev
            if rv_param not in ("", "0"):
                wanted = self._parse_rv(rv_param)
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
            import bisect

            keys = [e.key for e in entries]
            entries = entries[bisect.bisect_right(keys, start_after):]
        entries = self._filter(entries, namespace, labels, fields)
        list_meta: Obj = {"resourceVersion": str(list_rv)}
        if limit and len(entries) > limit:
            remaining = len(entries) - limit
            entries = entries[:limit]
            list_meta["continue"] = self._encode_continue(list_rv, entries[-1].key)
            list_meta["remainingItemCount"] = remaining
        if self.wants_table(req):
            return Response.json(200, self._table(req, rt, [self.served(rt, e) for e in entries], list_meta))
        head = b'{"kind":"%s","apiVersion":"%s","metadata":%s,"items":[' % (
            rt.list_kind.encode(), rt.api_version.encode(), orjson.dumps(list_meta))
        return Response(200, head + b",".join(self.present(rt, e) for e in entries) + b"]}")

    @staticmethod
    def _parse_limit(value: str) -> int:
        if not value:
            return 0
        try:
            limit = int(value)
        except ValueError:
            raise errors.bad_request(f"invalid limit: {value!r}") from None
        return max(limit, 0)

    @staticmethod
    def _encode_continue(rv: int, key: str) -> str:
        return base64.urlsafe_b64encode(orjson.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": key})).decode()

    def _decode_continue(self, token: str) -> tuple[int, str]:
        try:
            data = orjson.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
            rv, start = int(data["rv"]), str(data["start"])
        except Exception:
            raise errors.bad_request(f"continue key is not valid: {token!r}") from None
        if rv < self.store.compacted:
            raise errors.expired(
                "The provided continue parameter is too old to display a consistent list result. You can start a "
                "new list without the continue parameter.")
        return rv, start

    def watch(self, req: Request, conn: HttpConnection, rt: ResourceType, namespace: str | None) -> None:
        labels, fields = self._selectors(req, rt)
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
        table = self.wants_table(req)

        def encode(entry: Entry) -> bytes:
            if table:
                return orjson.dumps(self._table(req, rt, [self.served(rt, entry)],
                                                {"resourceVersion": str(entry.rv)}))
            return self.present(rt, entry)

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
            start = self._parse_rv(rv_param)
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

    # -- writes ----------------------------------------------------------------
    #
    # Client writes run as steps (see ``Steps``): they yield where admission webhooks must be
    # called, and only when some webhook matches. ``_write`` drives them: to the end at once when
    # nothing is called (the usual case, no extra cost), else on a task of the event loop that
    # awaits the calls (made on worker threads) and continues the write after each. The server's
    # own writes (bootstrap, namespace cleanup, eviction's delete) run with ``admit=False`` and
    # never yield (``_run``).

    def _write(self, req: Request, conn: HttpConnection, rt: ResourceType, steps: Steps,
               code: int = 200) -> Response | None:
        """Run a client write: its response now, or None when it continues after webhook calls."""
        try:
            call = next(steps)
        except StopIteration as done:
            return self._write_response(req, rt, done.value, code, [])
        assert self.loop is not None
        task = self.loop.create_task(self._write_async(req, conn, rt, steps, call, code, self._user))
        self._pending_writes.add(task)
        task.add_done_callback(self._pending_writes.discard)
        return None

    async def _write_async(self, req: Request, conn: HttpConnection, rt: ResourceType, steps: Steps,
                           call: webhooks.Call, code: int, user: dict[str, Any]) -> None:
        warnings: list[str] = []
        try:
            while True:
                try:
                    outcome = await self.webhooks.run(call, user)
                finally:
                    warnings += call.warnings
                # Back on the loop: the write goes on, and may need more calls.
                call = steps.send(outcome)
        except StopIteration as done:
            try:
                resp = self._write_response(req, rt, done.value, code, warnings)
            except errors.StatusError as err:
                resp = Response.error(err)
        except errors.StatusError as err:
            resp = Response.error(err)
            resp.headers.update(self._warning_headers(warnings))
        except SelectorError as err:
            resp = Response.error(errors.bad_request(str(err)))
        except Exception as exc:  # a bug must cost this request only
            log.exception("request failed: %s %s", req.method, req.path)
            resp = Response.error(errors.internal(str(exc)))
        finally:
            steps.close()
        self.store.after_commit(lambda: conn.respond(resp))
        self.schedule_commit()

    def _write_response(self, req: Request, rt: ResourceType, result: Any, code: int,
                        warnings: list[str]) -> Response:
        if isinstance(result, Response):
            result.headers.update(self._warning_headers(warnings))
            return result
        if warnings:
            status, body, own = result if isinstance(result, tuple) else (code, result, [])
            result = (status, body, own + warnings)
        return self._respond_object(req, rt, result, code)

    @staticmethod
    def _run(steps: Steps) -> Any:
        """The result of a write that calls no webhooks (``admit=False``)."""
        try:
            next(steps)
        except StopIteration as done:
            return done.value
        steps.close()
        raise RuntimeError("a write of the server's own asked for admission webhooks")

    def _retrying(self, attempt: Callable[[], Steps]) -> Steps:
        """Steps of ``attempt()``, started over while the object changes under a webhook call."""
        for n in range(MAX_WRITE_ATTEMPTS):
            try:
                return (yield from attempt())
            except _Stale as stale:
                if n == MAX_WRITE_ATTEMPTS - 1:
                    raise errors.conflict(stale.rt.plural, stale.name, errors.STALE_OBJECT, stale.rt.group) from None
        raise AssertionError("unreachable")

    def _webhook_call(self, admit: bool, mutating: bool, operation: str, rt: ResourceType, sub: str | None,
                      name: str, namespace: str | None, obj: Obj | None, old: Obj | None, query: dict[str, str],
                      options: Obj | None = None, kind: Obj | None = None) -> webhooks.Call | None:
        """The webhooks this write must call now, or None (internal write, or none matches)."""
        if not admit:
            return None
        if rt.group == "" and rt.plural == "namespaces":
            namespace = name  # kube names the namespace itself as the request's namespace
        hooks = self.webhooks.match(mutating, operation, rt, sub or "", namespace or "", obj, old)
        if not hooks:
            return None
        if options is None:
            options = {"kind": "CreateOptions" if operation == "CREATE" else "UpdateOptions",
                       "apiVersion": "meta.k8s.io/v1"}
            if query.get("fieldManager"):
                options["fieldManager"] = query["fieldManager"]
            if query.get("dryRun") == "All":
                options["dryRun"] = ["All"]
        dry_run = query.get("dryRun") == "All" or options.get("dryRun") == ["All"]
        attrs = webhooks.Attributes(
            operation, rt.group, rt.version, rt.plural, sub or "",
            kind or {"group": rt.group, "version": rt.version, "kind": rt.kind},
            name, namespace or "", obj, old, options, dry_run)
        return webhooks.Call(mutating, hooks, attrs)

    def put(self, rt: ResourceType, obj: Obj) -> Entry:
        """Store ``obj`` (already validated) and run the server's derived-state hooks."""
        md = obj["metadata"]
        key = object_key(md.get("namespace") if rt.namespaced else None, md["name"])
        if rt.view is not None:
            obj = rt.view.to_storage(obj)
        entry = self.store.put(rt.storage_key, key, obj)
        self.pods.object_written(rt, obj)
        if rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io":
            self.crds.register(obj)
        elif rt.group == webhooks.GROUP:
            self.webhooks.invalidate()
        return entry

    def remove(self, rt: ResourceType, key: str) -> Entry:
        entry = self.store.remove(rt.storage_key, key)
        obj = entry.obj()
        self.pods.object_written(rt, obj)
        if rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io":
            self.crds.removed(obj)
        elif rt.group == webhooks.GROUP:
            self.webhooks.invalidate()
        ns = obj["metadata"].get("namespace")
        if ns:
            self._finalize_namespace_if_empty(ns)
        return entry

    def _check_kind(self, rt: ResourceType, obj: Any) -> None:
        if not isinstance(obj, dict):
            raise errors.cannot_handle(rt.kind, rt.version, "the request body must be an object")
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if kind is not None and kind != rt.kind:
            raise errors.bad_request(
                f'{kind} in version "{rt.version}" cannot be handled as a {rt.kind}: no kind "{kind}" is registered '
                f'for version "{rt.api_version}" in scheme "pkg/api/legacyscheme/scheme.go:30"')
        if api_version is not None and api_version != rt.api_version:
            raise errors.bad_request(
                f'the API version in the data ({api_version}) does not match the expected API version '
                f'({rt.api_version})')
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.api_version
        if obj.get("metadata", {}) is None:
            obj["metadata"] = {}  # Go decodes "metadata: null" as an empty ObjectMeta
        md = obj.get("metadata", {})
        if not isinstance(md, dict):
            raise errors.cannot_handle(rt.kind, rt.version, "json: cannot unmarshal into Go struct field "
                                       f"{rt.kind}.metadata of type v1.ObjectMeta")
        detail = builtin_validation.check_metadata_types(rt.kind, rt.version, obj, builtin=rt.builtin)
        if detail:
            raise errors.cannot_handle(rt.kind, rt.version, detail)

    def _process(self, rt: ResourceType, obj: Obj, old: Obj | None, query: dict[str, str],
                 validate: bool = True) -> list[str]:
        """Defaulting, schema processing and validation; returns warnings. Raises 400/422.

        ``validate=False`` stops after defaulting (what mutating webhooks are shown).
        """
        strictness = query.get("fieldValidation", "Warn")
        if strictness not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(
                f'fieldValidation must be one of "Ignore", "Warn", or "Strict", got {strictness!r}')
        unknown_meta = [k for k in obj["metadata"] if k not in OBJECT_META_FIELDS]
        for k in unknown_meta:
            del obj["metadata"][k]
        unknown = [f"metadata.{k}" for k in unknown_meta]
        causes: list[dict[str, str]] = []
        if rt.crd is not None:
            result = rt.crd.process(rt.version, obj)
            obj.clear()
            obj.update(result.obj)
            unknown += result.unknown_fields
            causes += result.causes
        else:
            builtin_defaults.apply_defaults(rt.group, rt.kind, obj, create=old is None)
        warnings: list[str] = []
        if unknown:
            if strictness == "Strict":
                raise errors.cannot_handle(rt.kind, rt.version, "strict decoding error: " + ", ".join(
                    f'unknown field "{f}"' for f in unknown))
            if strictness == "Warn":
                warnings = [f'unknown field "{f}"' for f in unknown]
        if not validate:
            return warnings
        causes += builtin_validation.validate(rt.group, rt.kind, obj, old)
        if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
            causes += self.crds.validate(obj, old)
        if causes:
            raise errors.invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)
        if rt.group == "scheduling.k8s.io" and rt.kind == "PriorityClass":
            admission.check_priority_class(self.store, obj)
        return warnings

    def _mutated(self, rt: ResourceType, obj: Any) -> Obj:
        """A mutating webhook's result, checked to still be this kind of object."""
        self._check_kind(rt, obj)
        meta(obj)
        return obj

    def create_object(self, rt: ResourceType, namespace: str | None, obj: Any,
                      query: dict[str, str] | None = None) -> tuple[int, Any, list[str]]:
        """Create ``obj`` as the server itself (no admission webhooks)."""
        return self._run(self._create_steps(rt, namespace, obj, query or {}))

    def _create_steps(self, rt: ResourceType, namespace: str | None, obj: Any, query: dict[str, str],
                      admit: bool = False) -> Steps:
        self._check_kind(rt, obj)
        md = meta(obj)
        if rt.namespaced:
            if md.get("namespace") and namespace and md["namespace"] != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                         "on the request")
            md["namespace"] = namespace
        else:
            md.pop("namespace", None)
        # The storage layer refuses this, so a dry run, which never reaches storage, does not.
        if md.get("resourceVersion") and query.get("dryRun") != "All":
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        for k in SERVER_SET_META:
            md.pop(k, None)
        if not md.get("name") and md.get("generateName"):
            md["name"] = generate_name(md["generateName"])
        name = md.get("name") or ""
        admission.check_namespace(self.store, rt, namespace, name)
        self._reset_status_on_create(rt, obj)
        stamp = {"uid": new_uid(), "creationTimestamp": now_rfc3339()}
        if rt.tracks_generation:
            stamp["generation"] = 1
        md.update(stamp)
        call = self._webhook_call(admit, True, "CREATE", rt, None, name, namespace, obj, None, query)
        if call is None:
            warnings = self._process(rt, obj, None, query)
            if rt.plural == "pods" and rt.group == "":
                admission.resolve_pod_priority(self.store, obj)
        else:
            # Defaulting and the in-tree mutating plugins come before the webhooks, validation after.
            warnings = self._process(rt, obj, None, query, validate=False)
            if rt.plural == "pods" and rt.group == "":
                admission.resolve_pod_priority(self.store, obj)
            obj = self._mutated(rt, (yield call))
            md = obj["metadata"]
            for k in SERVER_SET_META:
                md.pop(k, None)
            md.update(stamp)
            md["name"] = name
            if rt.namespaced:
                md["namespace"] = namespace
            else:
                md.pop("namespace", None)
            self._reset_status_on_create(rt, obj)
            warnings += self._process(rt, obj, None, query)
        if rt.plural == "customresourcedefinitions":
            self.crds.prepare(obj)
        key = object_key(namespace if rt.namespaced else None, name)
        if self.store.get(rt.storage_key, key) is not None:
            raise errors.already_exists(rt.plural, name, rt.group)
        call = self._webhook_call(admit, False, "CREATE", rt, None, name, namespace, obj, None, query)
        if call is not None:
            yield call
            # Other writes went on meanwhile.
            admission.check_namespace(self.store, rt, namespace, name)
            if self.store.get(rt.storage_key, key) is not None:
                raise errors.already_exists(rt.plural, name, rt.group)
        if query.get("dryRun") == "All":
            return 201, obj, warnings
        entry = self.put(rt, obj)
        if rt.plural == "namespaces" and rt.group == "":
            self._namespace_created(name)
        return 201, entry, warnings

    @staticmethod
    def _reset_status_on_create(rt: ResourceType, obj: Obj) -> None:
        # Status is the server's and the controllers' to write, except a kubelet registering its Node.
        if rt.group == "" and rt.plural == "pods":
            obj["status"] = {}
        elif rt.group == "" and rt.plural == "namespaces":
            obj["status"] = {"phase": "Active"}
        elif rt.has_status and not (rt.group == "" and rt.plural == "nodes"):
            obj.pop("status", None)

    def _namespace_created(self, name: str) -> None:
        """Stand in for the service-account controller: every namespace gets a ``default`` ServiceAccount."""
        sa_rt = self.registry.get("", "v1", "serviceaccounts")
        if self.store.get(sa_rt.storage_key, f"{name}/default") is None:
            self.put(sa_rt, {"apiVersion": "v1", "kind": "ServiceAccount",
                             "metadata": {"name": "default", "namespace": name, "uid": new_uid(),
                                          "creationTimestamp": now_rfc3339()}})

    def update_object(self, rt: ResourceType, key: str, name: str, obj: Any, sub: str | None,
                      query: dict[str, str], *, check_rv: bool = True) -> tuple[int, Any, list[str]]:
        """Replace an object as the server itself (no admission webhooks)."""
        return self._run(self._put_steps(rt, key, name, obj, sub, query, check_rv=check_rv))

    def _put_steps(self, rt: ResourceType, key: str, name: str, obj: Any, sub: str | None,
                   query: dict[str, str], *, check_rv: bool = True, admit: bool = False) -> Steps:
        self._check_kind(rt, obj)
        entry = self._get(rt, key, name)
        md = meta(obj)
        if md.get("name") and md["name"] != name:
            raise errors.bad_request(f"the name of the object ({md['name']}) does not match the name on the URL "
                                     f"({name})")
        if check_rv and md.get("resourceVersion") and md["resourceVersion"] != str(entry.rv):
            raise errors.conflict(rt.plural, name, errors.STALE_OBJECT, rt.group)
        old = self.served(rt, entry)
        if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
            raise errors.conflict(rt.plural, name, f"Precondition failed: UID in precondition: {md['uid']}, UID in "
                                  f"object meta: {old['metadata']['uid']}", rt.group)
        return (yield from self._update_steps(rt, entry, old, obj, sub, query, admit))

    def _apply_update(self, rt: ResourceType, entry: Entry, old: Obj, obj: Obj, sub: str | None,
                      query: dict[str, str]) -> tuple[int, Any, list[str]]:
        """Update ``entry`` to ``obj`` as the server itself (no admission webhooks)."""
        return self._run(self._update_steps(rt, entry, old, obj, sub, query))

    def _update_steps(self, rt: ResourceType, entry: Entry, old: Obj, obj: Obj, sub: str | None,
                      query: dict[str, str], admit: bool = False) -> Steps:
        md = meta(obj)
        old_md = old["metadata"]
        name = old_md["name"]
        warnings: list[str] = []
        call = self._webhook_call(admit, True, "UPDATE", rt, sub, name, old_md.get("namespace"), obj, old, query)
        if call is not None:
            # Webhooks see the object as sent (defaulted); what the subresource may change is kept after.
            warnings = self._process(rt, obj, old, query, validate=False)
            obj = self._mutated(rt, (yield call))
            md = obj["metadata"]
        if sub == "status":
            new = dict(old)
            new["status"] = obj.get("status")
            if new["status"] is None:
                new.pop("status")
            new["metadata"] = dict(old_md)
            obj = new
            md = obj["metadata"]
        elif sub == "approval":
            # A CertificateSigningRequest's approval changes its conditions and nothing else.
            new = dict(old)
            new["status"] = {**(old.get("status") or {}),
                             "conditions": ((obj.get("status") or {}) if isinstance(obj.get("status"), dict)
                                            else {}).get("conditions")}
            if new["status"]["conditions"] is None:
                new["status"].pop("conditions")
            new["metadata"] = dict(old_md)
            obj = new
            md = obj["metadata"]
        elif sub == "finalize":
            new = dict(old)
            new["spec"] = {**(old.get("spec") or {}), "finalizers": (obj.get("spec") or {}).get("finalizers") or []}
            obj = new
            md = obj["metadata"] = dict(old_md)
        elif rt.has_status:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if k in old_md:
                md[k] = old_md[k]
            else:
                md.pop(k, None)
        md["name"] = old_md["name"]
        if rt.namespaced:
            md["namespace"] = old_md["namespace"]
        else:
            md.pop("namespace", None)
        md["resourceVersion"] = old_md["resourceVersion"]
        warnings += self._process(rt, obj, old, query)
        md = obj["metadata"]  # schema processing may have rebuilt the object
        if old_md.get("deletionTimestamp"):
            added = set(md.get("finalizers") or []) - set(old_md.get("finalizers") or [])
            if added:
                raise errors.invalid(rt.kind, rt.group, old_md["name"], [errors.forbidden_field(
                    "metadata.finalizers", "no new finalizers can be added if the object is being deleted, found "
                    f"new finalizers {sorted(added)}")])
        if rt.tracks_generation and sub is None and spec_part(obj) != spec_part(old):
            md["generation"] = int(old_md.get("generation", 1)) + 1
        validating = self._webhook_call(admit, False, "UPDATE", rt, sub, name, old_md.get("namespace"), obj, old,
                                        query)
        if validating is not None:
            yield validating
        if (call or validating) and self.store.get(rt.storage_key, entry.key) is not entry:
            raise _Stale(rt, name)  # written meanwhile: start over from the current object
        if obj == old:
            return 200, entry, warnings
        if query.get("dryRun") == "All":
            return 200, obj, warnings
        if old_md.get("deletionTimestamp") and not md.get("finalizers") and not self._waits_for_grace(rt, obj):
            self.put(rt, obj)
            return 200, self.remove(rt, entry.key), warnings
        return 200, self.put(rt, obj), warnings

    def _patch_steps(self, req: Request, rt: ResourceType, route: Route, key: str, admit: bool) -> Steps:
        ctype = req.header("content-type").split(";")[0].strip().lower()
        if ctype not in PATCH_TYPES:
            raise errors.unsupported_media_type(ctype)
        if ctype == STRATEGIC_PATCH and not rt.builtin:
            raise errors.unsupported_media_type(ctype)
        try:
            body = load_yaml(req.body) if ctype == APPLY_PATCH else orjson.loads(req.body or b"null")
        except Exception as exc:
            raise errors.bad_request(f"the patch could not be decoded: {str(exc).splitlines()[0]}") from None
        if ctype == APPLY_PATCH:
            from koordinator.apiserver import apply

            return (yield from apply.server_side_apply(_AdmittedWrites(self) if admit else self, req, rt, route, key,
                                                       body))
        entry = self._get(rt, key, route.name or "")
        old = self.served(rt, entry)
        if ctype == JSON_PATCH:
            if not isinstance(body, list):
                raise errors.bad_request("json patch must be a JSON array of operations")
            patched = patch.apply_json_patch(old, body)
        else:
            if not isinstance(body, dict):
                raise errors.bad_request("the patch must be a JSON object")
            if ctype == MERGE_PATCH:
                patched = patch.apply_merge_patch(old, body)
            else:
                patched = patch.apply_strategic_merge_patch(old, body, rt.group, rt.kind)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patched document is not an object")
        patched_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if patched_rv and patched_rv != str(entry.rv):
            raise errors.conflict(rt.plural, route.name or "", errors.STALE_OBJECT, rt.group)
        self._check_kind(rt, patched)
        if (patched.get("metadata") or {}).get("name", route.name) != route.name:
            raise errors.bad_request("metadata.name: Invalid value: the name of a patched object cannot change")
        return (yield from self._update_steps(rt, entry, old, patched, route.sub, req.query, admit))

    def _connect_steps(self, req: Request, rt: ResourceType, sub: str | None, namespace: str | None, name: str,
                       body: Any, kind: Obj, perform: Callable[[Any], Response]) -> Steps:
        """A pods/binding, pods/eviction or bindings POST: webhooks see the body (CREATE), then it is done."""
        if isinstance(body, dict):
            call = self._webhook_call(True, True, "CREATE", rt, sub, name, namespace, body, None, req.query,
                                      kind=kind)
            if call is not None:
                body = yield call
            call = self._webhook_call(True, False, "CREATE", rt, sub, name, namespace, body, None, req.query,
                                      kind=kind)
            if call is not None:
                yield call
        return perform(body)

    @staticmethod
    def _waits_for_grace(rt: ResourceType, obj: Obj) -> bool:
        """A gracefully deleted pod stays until its (simulated) kubelet deletes it with grace 0."""
        return rt.group == "" and rt.plural == "pods" and int(obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0

    def delete_object(self, rt: ResourceType, key: str, name: str, options: Any,
                      query: dict[str, str]) -> tuple[int, Any, list[str]]:
        """Delete an object as the server itself (no admission webhooks)."""
        return self._run(self._delete_steps(rt, key, name, options, query))

    def _delete_steps(self, rt: ResourceType, key: str, name: str, options: Any, query: dict[str, str],
                      admit: bool = False) -> Steps:
        if not isinstance(options, dict):
            raise errors.bad_request("DeleteOptions must be an object")
        deletion.validate(options)
        entry = self._get(rt, key, name)
        old = entry.obj()
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise errors.conflict(rt.plural, name, f"Precondition failed: UID in precondition: {pre['uid']}, UID in "
                                  f"object meta: {old['metadata']['uid']}", rt.group)
        if pre.get("resourceVersion") and pre["resourceVersion"] != str(entry.rv):
            raise errors.conflict(rt.plural, name, f"Precondition failed: ResourceVersion in precondition: "
                                  f"{pre['resourceVersion']}, ResourceVersion in object meta: {entry.rv}", rt.group)
        is_namespace = rt.group == "" and rt.plural == "namespaces"
        if is_namespace:
            admission.check_namespace_delete(name)
        if admit:
            delete_options = {**options, "kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
            if query.get("dryRun") == "All":
                delete_options["dryRun"] = ["All"]
            called = False
            for mutating in (True, False):
                # Mutating webhooks registered for DELETE are called too; they may not patch.
                call = self._webhook_call(True, mutating, "DELETE", rt, None, name, old["metadata"].get("namespace"),
                                          None, old, query, options=delete_options)
                if call is not None:
                    called = True
                    yield call
            if called and self.store.get(rt.storage_key, key) is not entry:
                raise _Stale(rt, name)
        if query.get("dryRun") == "All" or options.get("dryRun") == ["All"]:
            return 200, old, []
        md = old["metadata"]
        if is_namespace:
            if not md.get("deletionTimestamp"):
                md["deletionTimestamp"] = now_rfc3339()
                old["status"] = {"phase": "Terminating"}
                self.put(rt, old)
                self._terminate_namespace(name)
            current = self.store.get(rt.storage_key, key)
            return (202, current, []) if current is not None else (200, old, [])
        grace = 0
        if rt.group == "" and rt.plural == "pods":
            grace = self.pods.deletion_grace(old, options.get("gracePeriodSeconds", query.get("gracePeriodSeconds")))
        pending_grace = int(md.get("deletionGracePeriodSeconds") or 0)
        if md.get("deletionTimestamp") and pending_grace > 0 and grace >= pending_grace:
            return 202, entry, []  # a graceful deletion in progress keeps its finalizers and deadline
        # The propagation policy is recorded as the orphan/foregroundDeletion finalizer the garbage
        # collector acts on; Background needs none.
        finalizers = deletion.deletion_finalizers(rt.group, rt.plural, md.get("finalizers"), options)
        if finalizers is not None:
            if finalizers:
                md["finalizers"] = finalizers
            else:
                md.pop("finalizers", None)
        if not md.get("finalizers") and grace == 0:
            return 200, self.remove(rt, key), []
        if md.get("deletionTimestamp") and finalizers is None and grace >= pending_grace:
            return 202, entry, []
        if not md.get("deletionTimestamp") and rt.tracks_generation and md.get("generation"):
            md["generation"] = int(md["generation"]) + 1  # kube bumps it when an object starts terminating
        if not md.get("deletionTimestamp") or grace < pending_grace:
            md["deletionTimestamp"] = self.pods.deletion_time(grace)
        md["deletionGracePeriodSeconds"] = grace
        return 202, self.put(rt, old), []

    def _delete_collection_steps(self, req: Request, rt: ResourceType, namespace: str | None) -> Steps:
        labels, fields = self._selectors(req, rt)
        options = deletion.delete_options(self.decode(req, None) if req.body.strip() else None, req.query)
        deletion.validate(options)  # before anything is deleted
        deleted = []
        for e in self._filter(self.store.sorted_entries(rt.storage_key), namespace, labels, fields):
            name = e.fields["metadata.name"]
            key = e.key
            try:
                _, result, _ = yield from self._retrying(
                    lambda: self._delete_steps(rt, key, name, options, req.query, admit=True))
            except errors.StatusError as err:
                if err.code == 404:  # deleted by someone else while webhooks were called
                    continue
                raise
            deleted.append(result if isinstance(result, Entry) else None)
        items = b",".join(self.present(rt, e) for e in deleted if isinstance(e, Entry))
        head = b'{"kind":"%s","apiVersion":"%s","metadata":{"resourceVersion":"%d"},"items":[' % (
            rt.list_kind.encode(), rt.api_version.encode(), self.store.rev)
        return Response(200, head + items + b"]}")

    # -- namespaces ------------------------------------------------------------

    def _terminate_namespace(self, name: str) -> None:
        """Stand in for the namespace controller: delete the namespace's content, then the namespace."""
        for rt in self.registry.all():
            if not rt.namespaced or self.registry.versions_of(rt.storage_key)[0] is not rt:
                continue
            for e in list(self.store.items(rt.storage_key).values()):
                if e.fields.get("metadata.namespace") == name and e.key in self.store.items(rt.storage_key):
                    # Everything goes, so nothing is orphaned whatever the kind's default (kube's
                    # namespace controller deletes in the background too).
                    self.delete_object(rt, e.key, e.fields["metadata.name"],
                                       {"gracePeriodSeconds": 0, "propagationPolicy": deletion.BACKGROUND}, {})
        self._finalize_namespace_if_empty(name)

    def _finalize_namespace_if_empty(self, name: str) -> None:
        entry = self.store.get("namespaces", name)
        if entry is None or entry.fields.get("status.phase") != "Terminating":
            return
        for rt in self.registry.all():
            if rt.namespaced and any(e.fields.get("metadata.namespace") == name
                                     for e in self.store.items(rt.storage_key).values()):
                return
        self.store.remove("namespaces", name)

    # -- scale -----------------------------------------------------------------

    def scale(self, req: Request, rt: ResourceType, key: str, route: Route) -> Response:
        entry = self._get(rt, key, route.name or "")
        obj = entry.obj()
        spec_path, status_path, selector_path = (
            rt.crd.scale_paths(rt.version) if rt.crd is not None
            else (".spec.replicas", ".status.replicas", ".status.selector"))

        def read(path: str) -> Any:
            cur: Any = obj
            for p in path.lstrip(".").split("."):
                cur = cur.get(p) if isinstance(cur, dict) else None
            return cur

        def scale_obj(o: Obj) -> Obj:
            nonlocal obj
            obj = o
            sel = read(selector_path) if selector_path else None
            if isinstance(sel, dict):
                sel = ",".join(f"{k}={v}" for k, v in (sel.get("matchLabels") or {}).items())
            return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                    "metadata": {k: o["metadata"][k] for k in ("name", "namespace", "uid", "resourceVersion",
                                                                "creationTimestamp") if k in o["metadata"]},
                    "spec": {"replicas": read(spec_path) or 0},
                    "status": {"replicas": read(status_path) or 0, **({"selector": sel} if sel else {})}}

        if req.method == "GET":
            return Response.json(200, scale_obj(obj))
        if req.method in ("PUT", "PATCH"):
            body = self.decode(req, None)
            if req.method == "PATCH":
                body = patch.apply_merge_patch(scale_obj(obj), body) if isinstance(body, dict) else \
                    patch.apply_json_patch(scale_obj(obj), body)
            replicas = (body.get("spec") or {}).get("replicas") if isinstance(body, dict) else None
            if not isinstance(replicas, int) or replicas < 0:
                raise errors.invalid("Scale", "autoscaling", route.name or "", [
                    errors.invalid_value("spec.replicas", replicas, "must be greater than or equal to 0")])
            new = entry.obj()
            cur = new
            parts = spec_path.lstrip(".").split(".")
            for p in parts[:-1]:
                cur = cur.setdefault(p, {})
            cur[parts[-1]] = replicas
            _, result, _ = self._apply_update(rt, entry, entry.obj(), new, None, req.query)
            stored = result.obj() if isinstance(result, Entry) else result
            return Response.json(200, scale_obj(stored))
        raise errors.method_not_allowed(req.method, f"{rt.plural}/scale")
