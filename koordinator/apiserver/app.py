"""The embedded API server's routing core: the request entry point, and the wiring of its parts.

``ApiServer.handle`` routes a request to the verb handlers (``reads``, ``creates``, ``updates``,
``deletes``, ``subresources``), and ``ApiServer`` is the ``writer.ObjectWriter`` those handlers and
the server's helpers (server-side apply, pod binding and eviction, namespace lifecycle) write
through. Everything runs on one event-loop thread, so handlers read and write the store without
locks. A response leaves only once the writes it depends on are committed (see
``store.Store.commit``).
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any, Callable

from koordinator.apiserver import (access_reviews, admission, authorization, deletion, discovery, errors,
                                   issuer_discovery, rbac_escalation, token_requests, token_reviews, webhooks)
from koordinator.apiserver.authentication import Authenticator, ServiceAccountTokens, StaticTokens
from koordinator.apiserver.crds import CrdManager
from koordinator.apiserver.creates import Creator
from koordinator.apiserver.deletes import Deleter
from koordinator.apiserver.encoding import Presenter, decode
from koordinator.apiserver.http import HttpConnection, Request, Response
from koordinator.apiserver.namespaces import NamespaceLifecycle
from koordinator.apiserver.options import Options
from koordinator.apiserver.pods import PodSubresources
from koordinator.apiserver.processing import ObjectProcessor
from koordinator.apiserver.rbac_escalation import EscalationCheck
from koordinator.apiserver.reads import Reader
from koordinator.apiserver.resources import Registry, ResourceType
from koordinator.apiserver.routes import Route, method_not_allowed, openapi_document, parse_route, resource_of
from koordinator.apiserver.store import Entry, Store, object_key
from koordinator.apiserver.stored_objects import StoredObjects
from koordinator.apiserver.subresources import connect_steps, scale
from koordinator.apiserver.updates import Updater
from koordinator.apiserver.write_driver import WriteDriver
from koordinator.apiserver.writer import Steps, WriteResult, retrying, run_steps
from koordinator.apis.selectors import SelectorError

log = logging.getLogger("koordinator.apiserver")

Obj = dict[str, Any]

ANONYMOUS = {"username": "system:anonymous", "groups": ["system:unauthenticated"]}

# The checks behind /healthz/NAME, /livez/NAME and /readyz/NAME (kube-apiserver's that apply here:
# the storage is local, so "etcd" always passes); any other name is 404, as in kube.
HEALTH_CHECKS = {"healthz": ("ping", "log", "etcd"), "livez": ("ping", "log", "etcd"),
                 "readyz": ("ping", "log", "etcd", "informer-sync", "shutdown")}


def _read_only(method: str) -> None:
    """A path kube serves through GET-only go-restful routes answers other methods with a 405."""
    if method not in ("GET", "HEAD"):
        raise method_not_allowed()


class ApiServer:
    """The API: owns the registry and the store; ``handle`` serves one HTTP request."""

    def __init__(self, store: Store, options: Options | None = None) -> None:
        self.store = store
        self.options = options or Options()
        self.registry = Registry()
        self._commit_scheduled = False
        self._post_commit_hooks: list[Callable[[], None]] = []
        self.webhooks = webhooks.Webhooks(store)
        # Answers the access reviews (the embedding server installs its --authorization-mode's one).
        self.authorizer: Any = authorization.AlwaysAllow()
        # Signs and checks ServiceAccount tokens; the embedded server points it at its data dir.
        self.service_account_tokens = ServiceAccountTokens(
            os.path.dirname(os.path.abspath(store.path)) if store.path != ":memory:" else None, store)
        # Checks TokenReviews' tokens (the embedding server installs its own chain, static tokens included).
        self.authenticator = Authenticator(StaticTokens(set(), {}), self.service_account_tokens)
        # Who sent the request being dispatched (AdmissionReview userInfo).
        self._user: dict[str, Any] = ANONYMOUS
        # RBAC's escalation prevention (the embedding server installs it with the RBAC authorizer).
        self.escalation: EscalationCheck | None = None
        self.presenter = Presenter(self.registry)
        self.crds = CrdManager(store, self.registry)
        self.pods = PodSubresources(self)
        self.namespaces = NamespaceLifecycle(self)
        self.stored = StoredObjects(store, self.pods, self.crds, self.webhooks, self.namespaces)
        self.reader = Reader(store, self.options, self.presenter)
        processor = ObjectProcessor(store, self.crds)
        self.creator = Creator(self, processor, self.webhooks, self.crds, self.namespaces)
        self.updater = Updater(self, processor, self.webhooks)
        self.deleter = Deleter(self, self.webhooks, self.pods, self.namespaces, self.presenter)
        self.driver = WriteDriver(store, self.webhooks, self.presenter, self.schedule_commit)
        for rt in self.registry.all():
            store.register(rt.storage_key, rt.selectable_fields)
        self.crds.load_stored()
        self._bootstrap()

    @property
    def loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the server runs on (set by the HTTP server once it runs)."""
        return self.driver.loop

    @loop.setter
    def loop(self, loop: asyncio.AbstractEventLoop | None) -> None:
        self.driver.loop = loop

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
        """Commit the pending writes once the loop is free (one commit per batch of requests)."""
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

    # -- the ObjectWriter the handlers and helpers write through ---------------

    def get(self, rt: ResourceType, key: str, name: str) -> Entry:
        """The stored entry of ``key``; 404 naming ``name`` when there is none."""
        return self.reader.get(rt, key, name)

    def put(self, rt: ResourceType, obj: Obj) -> Entry:
        """Store ``obj`` (already validated) and run the server's derived-state hooks."""
        return self.stored.put(rt, obj)

    def remove(self, rt: ResourceType, key: str) -> Entry:
        """Remove ``key`` and run the server's derived-state hooks."""
        return self.stored.remove(rt, key)

    def create_steps(self, rt: ResourceType, namespace: str | None, obj: Any, query: dict[str, str],
                     admit: bool = False) -> Steps:
        """Steps of creating ``obj`` (see ``creates.Creator``)."""
        return self.creator.steps(rt, namespace, obj, query, admit)

    def update_steps(self, rt: ResourceType, entry: Entry, old: Obj, obj: Obj, sub: str | None,
                     query: dict[str, str], admit: bool = False) -> Steps:
        """Steps of replacing ``entry`` by ``obj`` (see ``updates.Updater``)."""
        return self.updater.update_steps(rt, entry, old, obj, sub, query, admit)

    def check_escalation(self, rt: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Forbidden when the client writing a role or binding would grant more than it holds.

        Called by the write steps before their first admission step, that is while the request is
        being dispatched, so ``_user`` is its sender."""
        if self.escalation is not None and rt.group == rbac_escalation.RBAC_GROUP:
            self.escalation.check(rt.kind, obj, old, self._user)

    def create_object(self, rt: ResourceType, namespace: str | None, obj: Any,
                      query: dict[str, str] | None = None) -> WriteResult:
        """Create ``obj`` as the server itself (no admission webhooks)."""
        return run_steps(self.creator.steps(rt, namespace, obj, query or {}))

    def update_object(self, rt: ResourceType, key: str, name: str, obj: Any, sub: str | None,
                      query: dict[str, str], *, check_rv: bool = True) -> WriteResult:
        """Replace an object as the server itself (no admission webhooks)."""
        return run_steps(self.updater.put_steps(rt, key, name, obj, sub, query, check_rv=check_rv))

    def delete_object(self, rt: ResourceType, key: str, name: str, options: Any,
                      query: dict[str, str]) -> WriteResult:
        """Delete an object as the server itself (no admission webhooks)."""
        return run_steps(self.deleter.steps(rt, key, name, options, query))

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
        """The response to ``req``, or None when it is answered later (a watch, a write awaiting webhooks)."""
        path = req.path.rstrip("/") or "/"
        # Which methods each path takes follows kube-apiserver's handlers: the health checks and
        # the aggregator's /apis answer whatever the method (their handlers never look at it), the
        # go-restful routes (/version, /api, issuer discovery) are GET-only.
        if path in ("/healthz", "/livez", "/readyz") or path.startswith(("/healthz/", "/livez/", "/readyz/")):
            endpoint, _, check = path[1:].partition("/")
            if check and check not in HEALTH_CHECKS[endpoint]:
                raise errors.not_found_path()
            return Response(200, b"ok", "text/plain; charset=utf-8")
        if path == "/version":
            _read_only(req.method)
            return Response.json(200, discovery.KUBE_VERSION)
        if path == "/api":
            _read_only(req.method)
            return Response.json(200, discovery.api_versions(self.options.server_address))
        if path == "/apis":
            return Response.json(200, discovery.api_group_list(self.registry))
        if path == issuer_discovery.CONFIGURATION_PATH:
            _read_only(req.method)
            return issuer_discovery.configuration(self.service_account_tokens, self.options.server_address)
        if path == issuer_discovery.JWKS_PATH:
            _read_only(req.method)
            return issuer_discovery.key_set(self.service_account_tokens)
        if path == "/openapi/v3":
            return Response.json(200, discovery.openapi_v3_index(self.registry))
        if path.startswith("/openapi/v3/"):
            return openapi_document(self.registry, path[len("/openapi/v3/"):])
        if path == "/openapi/v2":
            # kubectl reads this only for kinds the v3 documents lack (to validate them client
            # side): a valid, empty swagger document makes it fall through to the REST mapping,
            # which then reports the kind as unknown just as with a real server.
            return Response(200, b"", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
        route = parse_route(path, self.registry, req.method)
        if isinstance(route, Response):
            return route
        return self._serve(req, conn, route)

    def _write(self, req: Request, conn: HttpConnection, rt: ResourceType, steps: Steps,
               code: int = 200) -> Response | None:
        return self.driver.write(req, conn, rt, steps, code, self._user)

    def _serve(self, req: Request, conn: HttpConnection, route: Route) -> Response | None:
        rt = resource_of(route, self.registry)
        method = req.method
        if rt.group == access_reviews.GROUP:
            return access_reviews.serve(self.authorizer, req, rt, route, self._user)
        if rt.group == token_reviews.GROUP and rt.plural == "tokenreviews":
            return token_reviews.serve(self.authenticator, req, rt, route)
        if rt.group == "authentication.k8s.io" and rt.plural == "selfsubjectreviews":
            if method != "POST" or route.name is not None:
                raise errors.method_not_allowed(method, rt.plural)
            return token_requests.self_subject_review(self._user)
        if rt.group == "" and rt.plural == "bindings":
            if method != "POST" or route.name is not None or route.namespace is None:
                raise errors.method_not_allowed(method, rt.plural)
            body = decode(req, None)
            pod_name = ((body.get("metadata") or {}) if isinstance(body, dict) else {}).get("name")
            if not pod_name:
                raise errors.invalid("Binding", "", "", [errors.required("metadata.name")])
            namespace = route.namespace
            return self._write(req, conn, rt, connect_steps(
                self.webhooks, req, rt, None, namespace, pod_name, body,
                {"group": "", "version": "v1", "kind": "Binding"},
                lambda b: self.pods.bind(namespace, pod_name, b, req.query)))
        if route.name is None:
            if method == "GET":
                if req.query.get("watch") in ("1", "true"):
                    self.reader.watch(req, conn, rt, route.namespace)
                    return None
                return self.reader.list(req, rt, route.namespace)
            if method == "POST":
                if rt.namespaced and route.namespace is None:
                    raise errors.method_not_allowed("POST", rt.plural)
                body = decode(req, rt)
                return self._write(req, conn, rt, self.creator.steps(rt, route.namespace, body, req.query, admit=True),
                                   201)
            if method == "DELETE":
                return self._write(req, conn, rt, self.deleter.collection_steps(req, rt, route.namespace))
            raise errors.method_not_allowed(method, rt.plural)
        key = object_key(route.namespace if rt.namespaced else None, route.name)
        if route.sub in ("binding", "eviction"):
            if method != "POST":
                raise errors.method_not_allowed(method, f"{rt.plural}/{route.sub}")
            body = decode(req, None)
            namespace, name = route.namespace, route.name
            if route.sub == "binding":
                kind, perform = {"group": "", "version": "v1", "kind": "Binding"}, self.pods.bind
            else:
                kind, perform = {"group": "policy", "version": "v1", "kind": "Eviction"}, self.pods.evict
            return self._write(req, conn, rt, connect_steps(
                self.webhooks, req, rt, route.sub, namespace, name, body, kind,
                lambda b: perform(namespace, name, b, req.query)))
        if route.sub == "token":
            if method != "POST":
                raise errors.method_not_allowed(method, f"{rt.plural}/token")
            namespace, name = route.namespace or "", route.name
            return self._write(req, conn, rt, connect_steps(
                self.webhooks, req, rt, "token", namespace, name, decode(req, None),
                {"group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest"},
                lambda b: token_requests.create_token(self.service_account_tokens, self.store, namespace, name, b)))
        if route.sub == "scale":
            return scale(self, req, rt, key, route)
        if method == "GET":
            return self.reader.get_response(req, rt, key, route.name)
        name = route.name
        if method in ("PUT", "POST") and (method == "PUT" or route.sub == "finalize"):
            sub = route.sub if method == "PUT" else "finalize"
            # Each attempt decodes the body afresh: an attempt modifies the object it works on.
            return self._write(req, conn, rt, retrying(
                lambda: self.updater.put_steps(rt, key, name, decode(req, rt), sub, req.query, admit=True)))
        if method == "PATCH":
            return self._write(req, conn, rt, retrying(
                lambda: self.updater.patch_steps(req, rt, route, key, True)))
        if method == "DELETE":
            options = deletion.delete_options(decode(req, None) if req.body.strip() else None, req.query)
            return self._write(req, conn, rt, retrying(
                lambda: self.deleter.steps(rt, key, name, options, req.query, admit=True)))
        raise errors.method_not_allowed(method, rt.plural)
