"""The one module that speaks HTTP to an API server.

Connection settings (kubeconfig, in-cluster service account, TLS, client certificates, exec and
token refresh, proxies) come from :mod:`koordinator.runtime.kubeconfig`; the wire is our lean
keep-alive transport (:mod:`koordinator.runtime.transport`); above that: objects stay plain dicts decoded with orjson (the generated model
classes cost seconds of CPU per thousand pods), errors are typed by the Status reason
(:mod:`koordinator.runtime.errors`), requests are throttled client-side (QPS/burst) and retried
with ``tenacity`` on connection failures, 429 with Retry-After, and 5xx only (a 500 or a
connection lost after sending only for reads: the write may have been applied).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Iterator
from urllib.parse import urlencode, urlparse

import orjson
import tenacity

from koordinator.runtime.errors import ApiError, ConnectionFailed, from_status
from koordinator.runtime.kinds import Kind, KindRegistry
from koordinator.runtime.kubeconfig import ClusterConfig, ConfigError
from koordinator.runtime.kubeconfig import load as load_configuration
from koordinator.runtime.metrics import RuntimeMetrics
from koordinator.runtime.ratelimit import TokenBucket
from koordinator.runtime.transport import ConnectError, Response, Transport

log = logging.getLogger("koordinator.runtime.client")

Obj = dict[str, Any]

DEFAULT_TIMEOUT = 30.0
PATCH_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "json": "application/json-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "apply": "application/apply-patch+yaml",
}
# Worth another try whatever the verb: the server (or a proxy) refused before doing anything.
_RETRY_ANY_VERB = {502, 503, 504}
# A 500 or a broken connection after the request went out may mean it was applied: retry reads only.
_IDEMPOTENT = {"GET", "HEAD"}


class _NotSent(ConnectionFailed):
    """The connection could not be opened: the request never reached the server."""


class WatchStream:
    """One watch response: iterate for ``(type, object)``; :meth:`close` from any thread ends it.

    An ``ERROR`` event is raised as its typed error (a 410 as :class:`~koordinator.runtime.errors.Gone`);
    a broken connection or a read timeout as :class:`ConnectionFailed`. The server closing the stream
    ends the iteration normally.
    """

    def __init__(self, response: Response, description: str) -> None:
        self._response = response
        self._description = description
        self._closed = threading.Event()

    def __iter__(self) -> Iterator[tuple[str, Obj]]:
        pending = b""
        try:
            for chunk in self._response.iter_chunks():
                if not chunk:
                    continue
                pending += chunk
                if b"\n" not in chunk:
                    continue
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    # Nothing more after close(), even what was already received.
                    if self._closed.is_set():
                        return
                    if line.strip():
                        yield self._event(line)
            if pending.strip() and not self._closed.is_set():
                yield self._event(pending)
        except (OSError, ValueError) as err:
            if self._closed.is_set():
                return
            raise ConnectionFailed(f"watch {self._description}: {err}") from None
        finally:
            self.close()

    def _event(self, line: bytes) -> tuple[str, Obj]:
        try:
            event = orjson.loads(line)
            kind, obj = event["type"], event["object"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise ConnectionFailed(f"watch {self._description}: undecodable event {line[:200]!r}") from None
        if kind == "ERROR":
            raise from_status(int(obj.get("code") or 500), obj)
        return kind, obj

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        # Shuts the socket down: a reader stuck in recv() returns; plain close() would not do that.
        self._response.close()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()


#: Idle connections kept open to the API server per client: every informer's watch holds one for
#: minutes and workers (a scheduler's binders) send requests at once; a smaller pool would open and
#: discard a connection per request once exhausted.
POOL_SIZE = 64


class Client:
    """A Kubernetes API client over plain dict objects. Thread-safe; share one per process."""

    def __init__(self, configuration: ClusterConfig, *, kinds: KindRegistry | None = None,
                 qps: float = 20.0, burst: int = 30, metrics: RuntimeMetrics | None = None,
                 user_agent: str = "koordinator", max_attempts: int = 5) -> None:
        self._transport = _transport(configuration)
        self._config = configuration
        self._host = configuration.host.rstrip("/")
        self._host_label = urlparse(self._host).netloc or self._host
        self._bucket = TokenBucket(qps, burst)
        self._user_agent = user_agent
        self._max_attempts = max_attempts
        self.kinds = kinds or KindRegistry()
        self.metrics = metrics or RuntimeMetrics()
        self._requests_total = self.metrics.rest_client_requests_total
        self._duration = self.metrics.rest_client_request_duration_seconds

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None = None, *, context: str | None = None, **kwargs: Any) -> "Client":
        """A client for the cluster of ``kubeconfig`` (see :func:`load_configuration` for the fallbacks)."""
        return cls(load_configuration(kubeconfig, context=context), **kwargs)

    def with_limits(self, qps: float, burst: int) -> "Client":
        """Another client for the same cluster with its own throttle (e.g. leader election, which
        must never wait behind a busy controller's requests)."""
        return Client(self._config, kinds=self.kinds, qps=qps, burst=burst, metrics=self.metrics,
                      user_agent=self._user_agent, max_attempts=self._max_attempts)

    @property
    def host(self) -> str:
        return self._host

    def close(self) -> None:
        self._transport.close()

    # -- verbs ---------------------------------------------------------------------------

    def get(self, kind: Kind | str, name: str, namespace: str | None = None, *,
            subresource: str | None = None, timeout: float | None = None) -> Obj:
        k = self.kinds.get(kind)
        return self.request("GET", k.path(self._ns(k, namespace), name, subresource), timeout=timeout)

    def list(self, kind: Kind | str, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None, limit: int | None = None, continue_: str | None = None,
             resource_version: str | None = None, timeout: float | None = None) -> Obj:
        """One LIST call: the List object (``items`` and ``metadata.resourceVersion``/``continue``)."""
        k = self.kinds.get(kind)
        query = _query(labelSelector=label_selector, fieldSelector=field_selector, limit=limit,
                       resourceVersion=resource_version, **{"continue": continue_})
        return self.request("GET", k.path(namespace if k.namespaced else None), query=query, timeout=timeout)

    def watch(self, kind: Kind | str, namespace: str | None = None, *, resource_version: str | None,
              label_selector: str | None = None, field_selector: str | None = None,
              timeout_seconds: int | None = None, allow_bookmarks: bool = True,
              read_timeout: float | None = None) -> WatchStream:
        """Open a watch. Without ``read_timeout`` a silent connection is given up after the server's
        deadline (or a bookmark period) plus a margin, so a dead peer never blocks a reader forever."""
        k = self.kinds.get(kind)
        query = _query(watch="true", resourceVersion=resource_version, labelSelector=label_selector,
                       fieldSelector=field_selector, timeoutSeconds=timeout_seconds,
                       allowWatchBookmarks="true" if allow_bookmarks else None)
        if read_timeout is None:
            read_timeout = max(timeout_seconds or 0, 60) + 10
        path = k.path(namespace if k.namespaced else None)
        response = self._send("GET", path, query, None, None, 10.0, read_timeout, stream=True)
        if response.status != 200:
            raise self._error(response, response.read())
        return WatchStream(response, f"{k.resource} at resourceVersion {resource_version}")

    def create(self, obj: Obj, *, namespace: str | None = None, timeout: float | None = None) -> Obj:
        k = self.kinds.for_object(obj)
        ns = self._ns(k, namespace or (obj.get("metadata") or {}).get("namespace"))
        return self.request("POST", k.path(ns), body=obj, timeout=timeout)

    def update(self, obj: Obj, *, timeout: float | None = None) -> Obj:
        """PUT the whole object; its ``metadata.resourceVersion`` makes a stale write a Conflict."""
        return self._put(obj, None, timeout)

    def update_status(self, obj: Obj, *, timeout: float | None = None) -> Obj:
        return self._put(obj, "status", timeout)

    def patch(self, kind: Kind | str, name: str, patch: Any, *, namespace: str | None = None,
              patch_type: str = "merge", subresource: str | None = None, field_manager: str | None = None,
              force: bool | None = None, timeout: float | None = None) -> Obj:
        """PATCH with ``patch_type`` ``merge`` (RFC 7386), ``json`` (RFC 6902), ``strategic`` (built-in
        kinds only) or ``apply`` (server-side apply; needs ``field_manager``)."""
        if patch_type not in PATCH_CONTENT_TYPES:
            raise ValueError(f"patch_type {patch_type!r}: must be one of {', '.join(PATCH_CONTENT_TYPES)}")
        if patch_type == "apply" and not field_manager:
            raise ValueError("patch_type 'apply' needs field_manager")
        k = self.kinds.get(kind)
        query = _query(fieldManager=field_manager, force="true" if force else None)
        return self.request("PATCH", k.path(self._ns(k, namespace), name, subresource), query=query, body=patch,
                            content_type=PATCH_CONTENT_TYPES[patch_type], timeout=timeout)

    def delete(self, kind: Kind | str, name: str, namespace: str | None = None, *,
               propagation_policy: str | None = None, grace_period_seconds: int | None = None,
               preconditions: Obj | None = None, timeout: float | None = None) -> Obj | None:
        k = self.kinds.get(kind)
        options: Obj = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = preconditions
        return self.request("DELETE", k.path(self._ns(k, namespace), name), body=options, timeout=timeout)

    def evict(self, name: str, namespace: str, *, delete_options: Obj | None = None,
              timeout: float | None = None) -> None:
        """POST pods/eviction: a PodDisruptionBudget that forbids it raises TooManyRequests."""
        body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction",
                     "metadata": {"name": name, "namespace": namespace}}
        if delete_options:
            body["deleteOptions"] = delete_options
        self.request("POST", self.kinds.get("Pod").path(namespace, name, "eviction"), body=body, timeout=timeout)

    def bind(self, name: str, namespace: str, node_name: str, *, uid: str | None = None,
             annotations: dict[str, str] | None = None, timeout: float | None = None) -> None:
        """POST pods/binding: assign the pod to ``node_name`` (Conflict if it is already bound)."""
        metadata: Obj = {"name": name, "namespace": namespace}
        if uid:
            metadata["uid"] = uid
        if annotations:
            metadata["annotations"] = annotations
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        self.request("POST", self.kinds.get("Pod").path(namespace, name, "binding"), body=body, timeout=timeout)

    # -- transport ------------------------------------------------------------------------

    def request(self, method: str, path: str, *, query: dict[str, str] | None = None, body: Any = None,
                content_type: str = "application/json", timeout: float | None = None) -> Any:
        """One API call with throttling and retries: the decoded JSON answer (text if it is not JSON).

        ``timeout`` bounds each attempt and, when given, the whole call including retries.
        """
        data = body if body is None or isinstance(body, bytes) else orjson.dumps(body)
        per_try = timeout or DEFAULT_TIMEOUT
        started = time.monotonic()
        try:
            return self._once(method, path, query, data, content_type, per_try)
        except Exception as err:
            # The common case pays for one attempt; the retry machinery is built only on a failure.
            if self._max_attempts < 2 or not _retryable(method, err):
                raise
            first = err
        delay = _delay(first, 1)
        if timeout and time.monotonic() - started + delay >= timeout:
            raise first
        log.debug("retrying method=%s path=%s attempt=1 error=%s", method, path, first)
        time.sleep(delay)
        stop = tenacity.stop_after_attempt(self._max_attempts - 1)
        if timeout:
            stop = stop | tenacity.stop_after_delay(max(timeout - (time.monotonic() - started), 0.0))
        retrying = tenacity.Retrying(
            stop=stop, reraise=True,
            wait=lambda rs: _delay(rs.outcome.exception() if rs.outcome else None, rs.attempt_number + 1),
            retry=tenacity.retry_if_exception(lambda e: _retryable(method, e)),
            before_sleep=lambda rs: log.debug("retrying method=%s path=%s attempt=%d error=%s", method, path,
                                              rs.attempt_number + 1, rs.outcome.exception() if rs.outcome else None))
        return retrying(self._once, method, path, query, data, content_type, per_try)

    def _once(self, method: str, path: str, query: dict[str, str] | None, data: bytes | None,
              content_type: str, timeout: float) -> Any:
        response = self._send(method, path, query, data, content_type, min(timeout, 10.0), timeout)
        payload = response.body
        if 200 <= response.status < 300:
            if not payload:
                return None
            if "json" in (response.headers.get("content-type") or "json"):
                return orjson.loads(payload)
            return payload.decode("utf-8", "replace")
        raise self._error(response, payload)

    def _send(self, method: str, path: str, query: dict[str, str] | None, data: bytes | None,
              content_type: str | None, connect_timeout: float, read_timeout: float, *,
              stream: bool = False) -> Response:
        self._bucket.wait()
        target = path + ("?" + urlencode(query) if query else "")
        headers = {"Accept": "application/json", "User-Agent": self._user_agent}
        if data is not None and content_type:
            headers["Content-Type"] = content_type
        auth = self._config.authorization()
        if auth:
            headers["Authorization"] = auth
        started = time.perf_counter()
        try:
            response = self._transport.request(method, target, headers, data, connect_timeout=connect_timeout,
                                               read_timeout=read_timeout, stream=stream)
        except ConnectError as err:
            self._requests_total.labels("<error>", method, self._host_label).inc()
            raise _NotSent(f"{method} {self._host}{path}: {err}") from None
        except OSError as err:
            self._requests_total.labels("<error>", method, self._host_label).inc()
            raise ConnectionFailed(f"{method} {self._host}{path}: {err}") from None
        self._duration.labels(method, self._host_label).observe(time.perf_counter() - started)
        self._requests_total.labels(str(response.status), method, self._host_label).inc()
        return response

    @staticmethod
    def _error(response: Response, payload: bytes) -> ApiError:
        try:
            body: Any = orjson.loads(payload) if payload else None
        except orjson.JSONDecodeError:
            body = payload.decode("utf-8", "replace").strip()
        retry_after = response.headers.get("retry-after")
        try:
            seconds = float(retry_after) if retry_after else None
        except ValueError:
            seconds = None
        return from_status(response.status, body, retry_after=seconds)

    def _put(self, obj: Obj, subresource: str | None, timeout: float | None) -> Obj:
        k = self.kinds.for_object(obj)
        md = obj.get("metadata") or {}
        if not md.get("name"):
            raise ValueError(f"{k.kind}: metadata.name is required for an update")
        return self.request("PUT", k.path(self._ns(k, md.get("namespace")), md["name"], subresource), body=obj,
                            timeout=timeout)

    @staticmethod
    def _ns(kind: Kind, namespace: str | None) -> str | None:
        if not kind.namespaced:
            return None
        if not namespace:
            raise ValueError(f"{kind.kind} is namespaced: metadata.namespace (or namespace=) is required")
        return namespace


def _query(**params: Any) -> dict[str, str]:
    return {k: str(v) for k, v in params.items() if v is not None and v != ""}


def _retryable(method: str, err: BaseException) -> bool:
    if isinstance(err, _NotSent):
        return True
    if isinstance(err, ConnectionFailed):
        return method in _IDEMPOTENT
    if not isinstance(err, ApiError):
        return False
    if err.status == 429:
        # Throttling says when to come back; a 429 without Retry-After is an answer (an eviction a
        # PodDisruptionBudget forbids), not a reason to hammer the server, as in client-go.
        return err.retry_after is not None
    return err.status in _RETRY_ANY_VERB or (err.status >= 500 and method in _IDEMPOTENT)


def _delay(err: BaseException | None, attempt: int) -> float:
    """Before attempt ``attempt + 1``: the server's Retry-After when it sent one (capped), else
    exponential backoff from 100 ms to 2 s with up to 100 ms of jitter."""
    if isinstance(err, ApiError) and err.retry_after is not None:
        return min(max(err.retry_after, 0.0), 10.0)
    return min(0.1 * 2 ** (attempt - 1), 2.0) + random.uniform(0.0, 0.1)


def _transport(cfg: ClusterConfig) -> Transport:
    """The transport for a configuration: its TLS settings and proxy."""
    if cfg.proxy and not cfg.proxy.startswith("http://"):
        raise ConfigError(f"proxy {cfg.proxy}: only http:// proxies are supported; list the server in NO_PROXY "
                          f"to reach it directly")
    try:
        return Transport(cfg.host, ssl_context=cfg.ssl_context(), server_hostname=cfg.tls_server_name,
                         proxy=cfg.proxy, pool_size=POOL_SIZE)
    except ValueError as err:
        raise ConfigError(str(err)) from None
