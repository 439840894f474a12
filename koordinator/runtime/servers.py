"""The metrics and probe HTTP server of a role: ``/metrics``, ``/healthz``, ``/livez``, ``/readyz``.

One :class:`ProbeServer` serves Prometheus metrics when given a registry, and the probes when
given check dicts, so the Runtime runs one server per distinct address (``--metrics-addr`` and
``--health-addr`` equal -> one server with both). The probes answer as the Kubernetes API server's
do: ``200 ok``, or ``500`` with one ``[+]name ok`` / ``[-]name failed: reason`` line per check;
``?verbose`` lists every check on success too; ``?exclude=name`` skips a check; ``/readyz/<name>``
runs one check.

A check is ``Callable[[], str | None]``: ``None`` (or ``""``) means healthy, a string is the
reason it is not; an exception counts as a failure with the exception as the reason.

:func:`probe` is the matching client, used by ``koordinator local`` to watch its children.
"""

from __future__ import annotations

import http.client
import logging
import socket
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import choose_encoder

from koordinator.runtime.options import parse_addr

log = logging.getLogger("koordinator.runtime.servers")

Check = Callable[[], "str | None"]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # A restarted role must be able to bind its port again at once (TIME_WAIT sockets).
    allow_reuse_address = True


class _Server6(_Server):
    address_family = socket.AF_INET6


class ServingThread:
    """A ``ThreadingHTTPServer`` bound to ``addr`` and served on a thread of its own.

    The part :class:`ProbeServer` and :class:`koordinator.runtime.webhook.WebhookServer` share:
    the address syntax, the bind and its error, the bound address, the shutdown.
    """

    def __init__(self, addr: str, name: str, *, what: str = "address") -> None:
        parsed = parse_addr(addr)
        if parsed is None:
            raise ValueError(f"invalid {what} {addr!r}: 0 means disabled, there is nothing to serve")
        self._bind = parsed
        self.name = name
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def address(self) -> tuple[str, int]:
        """The bound (host, port); only valid after :meth:`start`."""
        if self._server is None:
            raise RuntimeError(f"{self.name} is not started")
        host, port = self._server.server_address[:2]
        return str(host), int(port)

    def local_address(self) -> tuple[str, int]:
        """Where a client on this machine reaches the server (an all-interfaces bind gives loopback)."""
        host, port = self.address
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        return host, port

    def _listen(self, make: Callable[[tuple[str, int], bool], ThreadingHTTPServer]) -> None:
        """Bind with ``make((host, port), ipv6)`` (OSError naming the address) and serve in a daemon thread."""
        if self._server is not None:
            raise RuntimeError(f"{self.name} already started")
        host, port = self._bind
        try:
            server = make((host, port), ":" in host)
        except OSError as err:
            raise OSError(err.errno, f"{self.name}: cannot listen on {host}:{port}: {err.strerror or err}") from err
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name=f"{self.name}-{self.address[1]}", daemon=True)
        self._thread.start()

    def _close(self, timeout: float) -> tuple[Any, threading.Thread | None]:
        """Stop accepting and close the socket; returns the (server, thread) for the caller to finish."""
        server, thread = self._server, self._thread
        if server is not None:
            if thread is not None and thread.is_alive():
                # shutdown() waits for serve_forever to return; it returns within one poll interval.
                done = threading.Thread(target=server.shutdown, name=f"{self.name}-shutdown", daemon=True)
                done.start()
                done.join(timeout)
            server.server_close()
        self._server = None
        self._thread = None
        return server, thread


class ProbeServer(ServingThread):
    """HTTP server for ``/metrics`` (if ``registry``) and ``/healthz``, ``/livez``, ``/readyz`` (if any checks dict).

    ``addr`` is ``HOST:PORT``, ``:PORT`` (all interfaces) or ``[V6]:PORT``; port 0 picks a free
    port (see :attr:`address` after :meth:`start`). The check dicts are read on every request, so
    checks added to them (or with :meth:`add_health_check`) after start take effect at once.
    """

    def __init__(self, addr: str, *, registry: CollectorRegistry | None = None,
                 health_checks: dict[str, Check] | None = None, ready_checks: dict[str, Check] | None = None,
                 name: str = "probe-server") -> None:
        super().__init__(addr, name)
        self.registry = registry
        self.serve_probes = health_checks is not None or ready_checks is not None
        self.health_checks: dict[str, Check] = health_checks if health_checks is not None else {}
        self.ready_checks: dict[str, Check] = ready_checks if ready_checks is not None else {}

    def add_health_check(self, name: str, fn: Check) -> None:
        """Add a liveness check (it also counts for readiness, as in Kubernetes)."""
        self.serve_probes = True
        self.health_checks[name] = fn

    def add_ready_check(self, name: str, fn: Check) -> None:
        self.serve_probes = True
        self.ready_checks[name] = fn

    @property
    def url(self) -> str:
        """``http://HOST:PORT`` of the bound socket (an all-interfaces bind gives 127.0.0.1)."""
        host, port = self.local_address()
        return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"

    def start(self) -> None:
        """Bind (OSError if the address is taken) and serve in a daemon thread."""
        handler = self._handler_class()
        self._listen(lambda addr, v6: (_Server6 if v6 else _Server)(addr, handler))
        log.info("serving name=%s addr=%s:%d metrics=%s probes=%s", self.name, *self.address,
                 self.registry is not None, self.serve_probes)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, close the socket and join the serving thread (in-flight requests are not awaited)."""
        server, thread = self._close(timeout)
        if server is None:
            return
        if thread is not None:
            thread.join(timeout)
        log.debug("stopped name=%s", self.name)

    # -- requests ------------------------------------------------------------------------

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        owner = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "koordinator"

            def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
                owner._dispatch(self, head=False)

            def do_HEAD(self) -> None:  # noqa: N802
                owner._dispatch(self, head=True)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                log.debug("%s %s", self.address_string(), format % args)

        return Handler

    def _dispatch(self, req: BaseHTTPRequestHandler, *, head: bool) -> None:
        url = urlsplit(req.path)
        path = url.path.rstrip("/") or "/"
        query = parse_qs(url.query, keep_blank_values=True)
        try:
            if path == "/metrics" and self.registry is not None:
                encoder, content_type = choose_encoder(req.headers.get("Accept", ""))
                self._reply(req, 200, encoder(self.registry), content_type, head)
                return
            if self.serve_probes:
                endpoint, _, single = path.lstrip("/").partition("/")
                if endpoint in ("healthz", "livez", "readyz"):
                    checks = dict(self.health_checks)
                    if endpoint == "readyz":
                        checks.update(self.ready_checks)
                    status, body = run_checks(endpoint, checks, single=single or None,
                                              verbose="verbose" in query, exclude=query.get("exclude", []))
                    self._reply(req, status, body.encode(), "text/plain; charset=utf-8", head)
                    return
            self._reply(req, 404, f"404 page not found: {path}\n".encode(), "text/plain; charset=utf-8", head)
        except (BrokenPipeError, ConnectionResetError):
            pass

    @staticmethod
    def _reply(req: BaseHTTPRequestHandler, status: int, body: bytes, content_type: str, head: bool) -> None:
        req.send_response(status)
        req.send_header("Content-Type", content_type)
        req.send_header("Content-Length", str(len(body)))
        req.send_header("X-Content-Type-Options", "nosniff")
        req.end_headers()
        if not head:
            req.wfile.write(body)


def run_checks(endpoint: str, checks: Mapping[str, Check], *, single: str | None = None, verbose: bool = False,
               exclude: list[str] | tuple[str, ...] = ()) -> tuple[int, str]:
    """Run ``checks`` and format the answer as kube-apiserver does; returns (HTTP status, body)."""
    if single is not None:
        if single not in checks:
            return 404, f"404 page not found: no {endpoint} check named {single!r}\n"
        reason = _run(single, checks[single])
        return (200, "ok") if reason is None else (500, f"internal server error: {reason}\n")
    lines, failed = [], False
    for name in sorted(checks):
        if name in exclude:
            lines.append(f"[+]{name} excluded: ok")
            continue
        reason = _run(name, checks[name])
        if reason is None:
            lines.append(f"[+]{name} ok")
        else:
            failed = True
            lines.append(f"[-]{name} failed: {reason}")
    if failed:
        log.info("%s check failed: %s", endpoint, "; ".join(line for line in lines if line.startswith("[-]")))
        return 500, "\n".join(lines + [f"{endpoint} check failed"]) + "\n"
    if verbose:
        return 200, "\n".join(lines + [f"{endpoint} check passed"]) + "\n"
    return 200, "ok"


def _run(name: str, check: Check) -> str | None:
    try:
        reason = check()
    except Exception as err:  # a broken check is a failing check, never a broken server
        log.debug("check %s raised", name, exc_info=True)
        return f"{type(err).__name__}: {err}"
    return str(reason) if reason else None


def probe(url_or_addr: str, path: str = "/readyz", *, timeout: float = 2.0) -> tuple[int, str]:
    """GET ``path`` from a probe server (``http://HOST:PORT`` or ``HOST:PORT``); returns (status, body).

    Raises OSError when nothing answers (connection refused, timeout).
    """
    target = url_or_addr.split("://", 1)[-1].rstrip("/")
    parsed = parse_addr(target)
    if parsed is None:
        raise ValueError(f"invalid address {url_or_addr!r}: nothing to probe")
    host, port = parsed
    conn = http.client.HTTPConnection(host or "127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        return resp.status, resp.read().decode("utf-8", "replace")
    except http.client.HTTPException as err:
        raise OSError(f"{target}{path}: {err}") from err
    finally:
        conn.close()
