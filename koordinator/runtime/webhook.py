"""The TLS admission webhook server: AdmissionReview in, AdmissionReview out, as controller-runtime serves it.

A role registers one handler per path (``register("/validate-pod", fn)``); the API server POSTs an
``AdmissionReview`` (``admission.k8s.io/v1``, or ``v1beta1`` answered in kind) and gets back the
handler's verdict as the review's ``response``. Mutating handlers return the whole mutated object
(``AdmissionResponse.patched``) and the server turns it into the RFC 6902 JSON patch the API
server applies (:func:`json_patch`).

The serving certificate is read from ``<cert_dir>/tls.crt`` and ``<cert_dir>/tls.key`` (the file
names controller-runtime uses) and re-read when they change on disk, so a rotated certificate is
served to new connections without a restart. A half-written rotation (the certificate replaced, the
key not yet) keeps the previous certificate until the pair matches again.

Metrics, when given a registry, carry controller-runtime's names:
``controller_runtime_webhook_requests_total{webhook,code}``,
``controller_runtime_webhook_latency_seconds{webhook}`` and
``controller_runtime_webhook_requests_in_flight{webhook}``.
"""

from __future__ import annotations

import base64
import copy
import datetime
import logging
import os
import socket
import ssl
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import orjson
from cryptography import x509
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from koordinator.runtime.servers import ServingThread

log = logging.getLogger("koordinator.runtime.webhook")

__all__ = ["AdmissionResponse", "Handler", "WebhookServer", "allowed", "denied", "errored", "json_patch"]

CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
#: Bodies past this are refused with 413 (kube-apiserver's own request limit is 3 MiB per object).
MAX_BODY = 32 << 20
#: A client must finish the TLS handshake within this many seconds.
HANDSHAKE_TIMEOUT = 10.0
#: An idle keep-alive connection is closed after this many seconds.
IDLE_TIMEOUT = 90.0
_API_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")


# -- responses ------------------------------------------------------------------------------


@dataclass
class AdmissionResponse:
    """A handler's verdict.

    ``code`` 0 means 200 when allowed and 403 when denied; ``reason`` empty means ``Forbidden``
    for a plain denial (code 0 or 403) and no reason otherwise (an :func:`errored` response, as
    controller-runtime sends it). ``patched`` is, for mutating handlers, the whole object after
    mutation: the server answers with the JSON patch from the request's ``object`` to it.
    """

    allowed: bool = True
    message: str = ""
    code: int = 0
    reason: str = ""
    patched: dict | None = None
    warnings: list[str] = field(default_factory=list)


Handler = Callable[[dict], AdmissionResponse]


def allowed(message: str = "", warnings: list[str] | None = None) -> AdmissionResponse:
    """Admit the request (``message`` goes to ``status.message``)."""
    return AdmissionResponse(allowed=True, message=message, warnings=list(warnings or []))


def denied(message: str, code: int = 403, reason: str = "Forbidden") -> AdmissionResponse:
    """Reject the request; the API server answers its client with ``code`` and ``message``."""
    return AdmissionResponse(allowed=False, message=message, code=code, reason=reason)


def errored(code: int, message: str) -> AdmissionResponse:
    """Reject because the request could not be processed (400 undecodable object, 500 internal failure)."""
    return AdmissionResponse(allowed=False, message=message, code=code)


def _status(resp: AdmissionResponse) -> dict:
    if resp.allowed:
        status: dict[str, Any] = {"code": resp.code or 200}
        if resp.reason:
            status["reason"] = resp.reason
    else:
        code = resp.code or 403
        status = {"code": code}
        reason = resp.reason or ("Forbidden" if code == 403 else "")
        if reason:
            status["reason"] = reason
    if resp.message:
        status["message"] = resp.message
    return status


# -- JSON patch -----------------------------------------------------------------------------


def _escape(key: str) -> str:
    # RFC 6901: "~" first, or the "~1" written for "/" would be escaped again.
    return key.replace("~", "~0").replace("/", "~1")


def _same(a: Any, b: Any) -> bool:
    """JSON equality: 1 == 1.0, but true != 1 and "1" != 1."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(v, b[k]) for k, v in a.items())
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def json_patch(old: Any, new: Any) -> list[dict]:
    """The RFC 6902 operations (``add``/``remove``/``replace``) that turn ``old`` into ``new``.

    Objects are compared key by key and recursed into; arrays element-wise when their lengths
    match, by trailing ``add``/``remove`` when one is a prefix of the other, and replaced whole
    otherwise. Keys are escaped per RFC 6901 (``~`` -> ``~0``, ``/`` -> ``~1``). Values in the
    operations are copies: editing ``new`` afterwards does not change them.
    """
    ops: list[dict] = []
    _diff(old, new, "", ops)
    return ops


def _diff(old: Any, new: Any, path: str, ops: list[dict]) -> None:
    if isinstance(old, dict) and isinstance(new, dict):
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": f"{path}/{_escape(key)}"})
        for key, value in new.items():
            child = f"{path}/{_escape(key)}"
            if key not in old:
                ops.append({"op": "add", "path": child, "value": copy.deepcopy(value)})
            else:
                _diff(old[key], value, child, ops)
        return
    if isinstance(old, list) and isinstance(new, list):
        common = min(len(old), len(new))
        if len(old) == len(new) or all(_same(old[i], new[i]) for i in range(common)):
            for i in range(common):
                _diff(old[i], new[i], f"{path}/{i}", ops)
            for i in range(common, len(new)):
                ops.append({"op": "add", "path": f"{path}/{i}", "value": copy.deepcopy(new[i])})
            # From the end, so each index is still valid when its turn comes.
            for i in range(len(old) - 1, common - 1, -1):
                ops.append({"op": "remove", "path": f"{path}/{i}"})
            return
    if not _same(old, new):
        ops.append({"op": "replace", "path": path, "value": copy.deepcopy(new)})


# -- certificates ---------------------------------------------------------------------------


class _Certificates:
    """The serving certificate, re-loaded when its files change on disk."""

    def __init__(self, cert_dir: str, name: str) -> None:
        self.cert_path = os.path.join(cert_dir, CERT_FILE)
        self.key_path = os.path.join(cert_dir, KEY_FILE)
        self._name = name
        self._lock = threading.Lock()
        self._context: ssl.SSLContext | None = None
        self._loaded: tuple | None = None      # the files' signature the context was built from
        self._failed: tuple | None = None      # the last signature that failed to load (logged once)
        self.not_after: datetime.datetime | None = None
        self.error: str | None = None

    def _signature(self) -> tuple:
        sig = []
        for path in (self.cert_path, self.key_path):
            st = os.stat(path)
            sig.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(sig)

    def load(self) -> None:
        """First load: raises FileNotFoundError / ssl.SSLError naming the files."""
        for path in (self.cert_path, self.key_path):
            if not os.path.exists(path):
                raise FileNotFoundError(f"{self._name}: serving certificate file {path} does not exist")
        with self._lock:
            sig = self._signature()
            try:
                self._build(sig)
            except (ssl.SSLError, ValueError) as err:
                raise ssl.SSLError(f"{self._name}: cannot load {self.cert_path} / {self.key_path}: {err}") from None

    def context(self) -> ssl.SSLContext:
        """The current context, rebuilt first if the files changed (and load)."""
        with self._lock:
            try:
                sig = self._signature()
            except OSError as err:
                # Mid-rotation (a file briefly missing) or removed: keep serving what we have.
                self.error = f"{err}"
                assert self._context is not None
                return self._context
            if sig != self._loaded and sig != self._failed:
                try:
                    self._build(sig)
                    log.info("reloaded serving certificate name=%s cert=%s not_after=%s", self._name,
                             self.cert_path, self.not_after)
                except (OSError, ssl.SSLError, ValueError) as err:
                    # A rotation writes the two files one after the other: the pair matches again soon.
                    self._failed = sig
                    self.error = f"cannot load {self.cert_path} / {self.key_path}: {err}"
                    log.warning("keeping the previous serving certificate name=%s: %s", self._name, self.error)
            assert self._context is not None
            return self._context

    def _build(self, sig: tuple) -> None:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.cert_path, self.key_path)
        ctx.set_alpn_protocols(["http/1.1"])
        with open(self.cert_path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
        self._context = ctx
        self._loaded = sig
        self._failed = None
        self.not_after = cert.not_valid_after_utc
        self.error = None


# -- metrics --------------------------------------------------------------------------------


class _Metrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests_total = Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.", ("webhook", "code"), registry=registry)
        self.latency_seconds = Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests", ("webhook",), registry=registry)
        self.in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.", ("webhook",), registry=registry)


# One set of families per registry: several servers (or restarts) on one registry share them.
_METRICS: "weakref.WeakKeyDictionary[CollectorRegistry, _Metrics]" = weakref.WeakKeyDictionary()
_METRICS_LOCK = threading.Lock()


def _metrics_for(registry: CollectorRegistry) -> _Metrics:
    with _METRICS_LOCK:
        m = _METRICS.get(registry)
        if m is None:
            m = _METRICS[registry] = _Metrics(registry)
        return m


# -- the server -----------------------------------------------------------------------------


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr: tuple[str, int], handler: type, owner: "WebhookServer") -> None:
        self.owner = owner
        self.connections: dict[Any, threading.Thread] = {}
        self.conn_lock = threading.Lock()
        super().__init__(addr, handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = self.socket.accept()
        try:
            ctx = self.owner._certs.context()
            # The handshake happens on the connection's own thread: a slow client must not stall accept().
            return ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr
        except Exception as err:
            sock.close()
            raise OSError(f"cannot start TLS: {err}") from err

    def process_request(self, request: Any, client_address: Any) -> None:
        thread = threading.Thread(target=self.process_request_thread, args=(request, client_address),
                                  name=f"{self.owner.name}-conn", daemon=True)
        with self.conn_lock:
            self.connections[request] = thread
        thread.start()

    def shutdown_request(self, request: Any) -> None:
        with self.conn_lock:
            self.connections.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Failed handshakes (a client that does not trust us, a probe) and dropped connections.
        log.debug("connection from %s failed", client_address, exc_info=True)


class _Server6(_Server):
    address_family = socket.AF_INET6


class WebhookServer(ServingThread):
    """HTTPS server for admission webhooks; see the module docstring.

    ``addr`` is ``HOST:PORT``, ``:PORT`` (all interfaces) or ``[V6]:PORT``; port 0 picks a free
    port (see :attr:`address`). Handlers may be registered before or after :meth:`start`.
    """

    def __init__(self, addr: str, cert_dir: str, *, registry: CollectorRegistry | None = None,
                 name: str = "webhook-server") -> None:
        super().__init__(addr, name, what="webhook address")
        self.cert_dir = cert_dir
        self._certs = _Certificates(cert_dir, name)
        self._handlers: dict[str, tuple[Handler, bool]] = {}
        self._metrics = _metrics_for(registry) if registry is not None else None

    def register(self, path: str, handler: Handler, *, mutating: bool = False) -> None:
        """Serve ``handler`` on ``path`` (``/validate-pod``); ``mutating`` handlers may return ``patched``."""
        if not isinstance(path, str) or not path.startswith("/"):
            raise ValueError(f"webhook path {path!r}: must start with '/'")
        if not callable(handler):
            raise TypeError(f"webhook handler for {path}: {handler!r} is not callable")
        if path in self._handlers:
            raise ValueError(f"webhook path {path} is already registered")
        self._handlers[path] = (handler, mutating)
        log.debug("registered webhook path=%s mutating=%s", path, mutating)

    @property
    def paths(self) -> list[str]:
        return sorted(self._handlers)

    @property
    def url(self) -> str:
        """``https://HOST:PORT`` of the bound socket (an all-interfaces bind gives the loopback address)."""
        host, port = self.local_address()
        return f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"

    def start(self) -> None:
        """Load the certificate (FileNotFoundError naming a missing file), bind and serve in a thread."""
        if self._server is not None:
            raise RuntimeError(f"{self.name} already started")
        self._certs.load()
        handler = self._handler_class()
        self._listen(lambda addr, v6: (_Server6 if v6 else _Server)(addr, handler, self))
        log.info("serving webhooks name=%s addr=%s:%d cert_dir=%s paths=%s", self.name, *self.address,
                 self.cert_dir, ",".join(self.paths))

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, let in-flight requests answer, close idle connections and join every thread."""
        deadline = time.monotonic() + timeout
        server, thread = self._close(timeout)
        if server is None:
            return
        with server.conn_lock:
            connections = list(server.connections.items())
        for sock, _ in connections:
            try:
                # Read side only: a request being handled still gets its answer, an idle one sees EOF.
                socket.socket.shutdown(sock, socket.SHUT_RD)
            except OSError:
                pass
        for _, conn_thread in connections:
            conn_thread.join(max(0.0, deadline - time.monotonic()))
        if thread is not None:
            thread.join(max(0.0, deadline - time.monotonic()))
        log.debug("stopped name=%s", self.name)

    def ready(self) -> str | None:
        """None when serving TLS with a loaded, unexpired certificate (checked by a handshake), else why not."""
        if self._server is None:
            return f"{self.name} is not started"
        try:
            self._certs.context()
        except Exception as err:  # a broken check is a failing check
            return f"serving certificate: {err}"
        not_after = self._certs.not_after
        if not_after is not None and not_after <= datetime.datetime.now(datetime.timezone.utc):
            return f"serving certificate {self._certs.cert_path} expired at {not_after.isoformat()}"
        client = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        client.check_hostname = False
        client.verify_mode = ssl.CERT_NONE
        host, port = self.local_address()
        try:
            with socket.create_connection((host, port), timeout=2.0) as raw:
                with client.wrap_socket(raw) as tls:
                    tls.do_handshake()
        except (OSError, ssl.SSLError) as err:
            return f"TLS handshake with {host}:{port} failed: {err}"
        return None

    # -- requests --------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class RequestHandler(BaseHTTPRequestHandler):
            server_version = "koordinator-webhook"
            protocol_version = "HTTP/1.1"
            timeout = IDLE_TIMEOUT

            def setup(self) -> None:
                self.request.settimeout(HANDSHAKE_TIMEOUT)
                self.request.do_handshake()
                super().setup()

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                owner._serve(self, "POST")

            def do_GET(self) -> None:  # noqa: N802
                owner._serve(self, "GET")

            def do_PUT(self) -> None:  # noqa: N802
                owner._serve(self, "PUT")

            def do_DELETE(self) -> None:  # noqa: N802
                owner._serve(self, "DELETE")

            def do_PATCH(self) -> None:  # noqa: N802
                owner._serve(self, "PATCH")

            def do_HEAD(self) -> None:  # noqa: N802
                owner._serve(self, "HEAD")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                log.debug("%s %s", self.address_string(), format % args)

        return RequestHandler

    def _serve(self, req: BaseHTTPRequestHandler, method: str) -> None:
        path = urlsplit(req.path).path
        entry = self._handlers.get(path)
        try:
            if entry is None:
                self._drain(req)
                self._reply(req, 404, f"404 page not found: {path}\n".encode(), "text/plain; charset=utf-8",
                            method == "HEAD")
                return
            m = self._metrics
            start = time.perf_counter()
            if m is not None:
                m.in_flight.labels(path).inc()
            code = 500
            try:
                code = self._admit(req, method, path, *entry)
            finally:
                if m is not None:
                    m.in_flight.labels(path).dec()
                    m.latency_seconds.labels(path).observe(time.perf_counter() - start)
                    m.requests_total.labels(path, str(code)).inc()
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, TimeoutError):
            req.close_connection = True

    def _admit(self, req: BaseHTTPRequestHandler, method: str, path: str, handler: Handler, mutating: bool) -> int:
        """Answer one request on a registered path; returns the HTTP status sent."""
        api_version = _API_VERSIONS[0]
        if method != "POST":
            self._drain(req)
            body = orjson.dumps(_review(api_version, "", errored(405, f"method {method} not allowed, use POST")))
            return self._reply(req, 405, body, "application/json", method == "HEAD", allow="POST")
        try:
            length = int(req.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length < 0 or length > MAX_BODY:
            req.close_connection = True
            code = 413 if length > MAX_BODY else 400
            message = f"request body too large: {length} bytes" if code == 413 else "invalid Content-Length"
            return self._reply(req, code, orjson.dumps(_review(api_version, "", errored(code, message))),
                               "application/json")
        raw = req.rfile.read(length) if length else b""
        content_type = (req.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if content_type != "application/json":
            message = f"contentType={req.headers.get('Content-Type') or ''}, expected application/json"
            log.debug("webhook %s: %s", path, message)
            return self._reply(req, 415, orjson.dumps(_review(api_version, "", errored(415, message))),
                               "application/json")
        if not raw:
            return self._reply(req, 400, orjson.dumps(_review(api_version, "", errored(400, "request body is empty"))),
                               "application/json")
        try:
            review = orjson.loads(raw)
        except orjson.JSONDecodeError as err:
            message = f"unable to decode the request: {err}"
            return self._reply(req, 400, orjson.dumps(_review(api_version, "", errored(400, message))),
                               "application/json")
        problem = _check_review(review)
        if problem:
            if isinstance(review, dict) and review.get("apiVersion") in _API_VERSIONS:
                api_version = review["apiVersion"]
            return self._reply(req, 400, orjson.dumps(_review(api_version, _uid(review), errored(400, problem))),
                               "application/json")
        api_version = review["apiVersion"]
        request = review["request"]
        resp = self._call(path, handler, request)
        patch = None
        if resp.patched is not None and resp.allowed:
            if not mutating:
                log.debug("webhook %s: a validating handler returned a patched object; ignored", path)
            elif request.get("object") is not None:
                try:
                    patch = json_patch(request["object"], resp.patched)
                except Exception as err:  # an unserialisable object from the handler
                    log.error("webhook %s: cannot compute the patch: %s", path, err, exc_info=True)
                    resp = errored(500, f"cannot compute the patch: {err}")
        try:
            body = orjson.dumps(_review(api_version, str(request.get("uid") or ""), resp, patch))
        except TypeError as err:
            log.error("webhook %s: cannot encode the response: %s", path, err)
            body = orjson.dumps(_review(api_version, str(request.get("uid") or ""),
                                        errored(500, f"cannot encode the response: {err}")))
        log.debug("admission path=%s uid=%s op=%s %s/%s allowed=%s patch_ops=%d", path, request.get("uid"),
                  request.get("operation"), request.get("namespace") or "", request.get("name") or "",
                  resp.allowed, len(patch or ()))
        return self._reply(req, 200, body, "application/json")

    def _call(self, path: str, handler: Handler, request: dict) -> AdmissionResponse:
        try:
            resp = handler(request)
        except Exception as err:
            log.error("webhook %s: handler failed uid=%s: %s", path, request.get("uid"), err, exc_info=True)
            return errored(500, str(err) or type(err).__name__)
        if not isinstance(resp, AdmissionResponse):
            log.error("webhook %s: handler returned %r, not an AdmissionResponse", path, type(resp).__name__)
            return errored(500, f"webhook handler returned {type(resp).__name__}, not an AdmissionResponse")
        return resp

    @staticmethod
    def _drain(req: BaseHTTPRequestHandler) -> None:
        """Read an unused body so the keep-alive connection stays in step (or close it)."""
        try:
            length = int(req.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if 0 <= length <= MAX_BODY:
            if length:
                req.rfile.read(length)
        else:
            req.close_connection = True

    @staticmethod
    def _reply(req: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str, head: bool = False,
               allow: str | None = None) -> int:
        req.send_response(status)
        req.send_header("Content-Type", content_type)
        req.send_header("Content-Length", str(len(body)))
        req.send_header("X-Content-Type-Options", "nosniff")
        if allow:
            req.send_header("Allow", allow)
        req.end_headers()
        if not head:
            req.wfile.write(body)
        return status


def _uid(review: Any) -> str:
    if isinstance(review, dict) and isinstance(review.get("request"), dict):
        return str(review["request"].get("uid") or "")
    return ""


def _check_review(review: Any) -> str | None:
    """Why ``review`` is not an AdmissionReview with a request, or None."""
    if not isinstance(review, dict):
        return f"unable to decode the request: expected a JSON object, got {type(review).__name__}"
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if kind != "AdmissionReview" or api_version not in _API_VERSIONS:
        return (f"unable to decode the request: expected an AdmissionReview of {' or '.join(_API_VERSIONS)}, "
                f"got kind={kind!r} apiVersion={api_version!r}")
    if not isinstance(review.get("request"), dict):
        return "got an empty AdmissionRequest"
    return None


def _review(api_version: str, uid: str, resp: AdmissionResponse, patch: list[dict] | None = None) -> dict:
    response: dict[str, Any] = {"uid": uid, "allowed": bool(resp.allowed), "status": _status(resp)}
    if patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(orjson.dumps(patch)).decode("ascii")
    if resp.warnings:
        response["warnings"] = [str(w) for w in resp.warnings]
    return {"apiVersion": api_version, "kind": "AdmissionReview", "response": response}
