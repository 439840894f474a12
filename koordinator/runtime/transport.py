"""A lean HTTP/1.1 client transport: keep-alive sockets, TLS, HTTP proxies, streamed bodies.

Why not urllib3 or http.client: every component is a Python process whose hot path is API calls
(a scheduler sends a binding and an Event per pod), and their generality costs 0.4–0.7 ms of CPU
per request, three to four times what this transport needs: headers parsed with the C
``readline`` of a buffered socket file, no URL re-parsing per request, one lock around a list of
idle connections.

What it speaks is what an API server answers: ``Content-Length`` or chunked bodies (watches stream
chunked), ``Connection: close``, bodies read to EOF, 1xx interim answers skipped. No
``Accept-Encoding`` is sent, so answers are never compressed. Proxies: ``http://`` proxies (a
``CONNECT`` tunnel for ``https`` servers, absolute-form requests for ``http`` ones).
"""

from __future__ import annotations

import base64
import select
import socket
import ssl
import threading
from collections.abc import Iterator
from typing import BinaryIO
from urllib.parse import unquote, urlparse

_MAX_LINE = 65536
_MAX_HEADERS = 200
_NO_BODY_METHODS = frozenset({"HEAD"})


class TransportError(OSError):
    """The exchange failed after the request may have reached the server."""


class ConnectError(TransportError):
    """No connection could be opened: the request certainly did not reach the server."""


class _Conn:
    """One connection: the socket and a buffered reader over it."""

    __slots__ = ("sock", "rfile", "reused")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.rfile: BinaryIO = sock.makefile("rb", buffering=65536)
        self.reused = False

    def close(self) -> None:
        try:
            self.rfile.close()
        finally:
            self.sock.close()

    def dropped(self) -> bool:
        """True when the peer closed (or sent something unasked) while the connection sat idle."""
        try:
            readable, _, _ = select.select([self.sock], [], [], 0)
        except (OSError, ValueError):
            return True
        return bool(readable)


class Response:
    """An answer: ``status``, ``headers`` (lower-case names) and ``body`` (unless streamed)."""

    def __init__(self, transport: "Transport", conn: _Conn, status: int, headers: dict[str, str],
                 length: int | None, chunked: bool, keep_alive: bool) -> None:
        self.status = status
        self.headers = headers
        self.body = b""
        self._transport = transport
        self._conn: _Conn | None = conn
        self._length = length
        self._chunked = chunked
        self._keep_alive = keep_alive
        self._lock = threading.Lock()

    def read(self) -> bytes:
        """The whole body; the connection goes back to the pool when it can be reused."""
        self.body = b"".join(self.iter_chunks())
        return self.body

    def iter_chunks(self, size: int = 65536) -> Iterator[bytes]:
        """The body as it arrives (each chunk of a chunked body as soon as it is complete)."""
        conn = self._conn
        if conn is None:
            return
        rfile = conn.rfile
        done = False
        try:
            if self._chunked:
                while True:
                    line = rfile.readline(_MAX_LINE)
                    if not line.endswith(b"\n"):
                        raise TransportError("connection closed inside a chunked body")
                    try:
                        n = int(line.split(b";", 1)[0].strip(), 16)
                    except ValueError:
                        raise TransportError(f"bad chunk size line {line[:40]!r}") from None
                    if n == 0:
                        while rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                            pass  # trailers
                        break
                    data = rfile.read(n)
                    if len(data) < n or rfile.read(2) not in (b"\r\n",):
                        raise TransportError("connection closed inside a chunk")
                    yield data
            elif self._length is not None:
                left = self._length
                while left > 0:
                    data = rfile.read1(min(left, size))
                    if not data:
                        raise TransportError(f"connection closed with {left} bytes of the body missing")
                    left -= len(data)
                    yield data
            else:
                while True:
                    data = rfile.read1(size)
                    if not data:
                        break
                    yield data
                self._keep_alive = False
            done = True
        except (OSError, ValueError) as err:
            if isinstance(err, TransportError):
                raise
            raise TransportError(str(err) or type(err).__name__) from None
        finally:
            self._finish(done)

    def _finish(self, complete: bool) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is None:
            return
        if complete and self._keep_alive:
            self._transport._release(conn)
        else:
            conn.close()

    def close(self) -> None:
        """End the exchange from any thread: a reader blocked on the body returns (with an error)."""
        with self._lock:
            conn, self._conn = self._conn, None
        if conn is None:
            return
        try:
            conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()


class Transport:
    """Requests to one server (``scheme://host:port``), over a pool of keep-alive connections.

    Thread-safe. ``ssl_context`` is required for ``https``; ``server_hostname`` overrides the name
    checked against the server's certificate (kubeconfig ``tls-server-name``).
    """

    def __init__(self, url: str, *, ssl_context: ssl.SSLContext | None = None,
                 server_hostname: str | None = None, proxy: str | None = None,
                 proxy_headers: dict[str, str] | None = None, pool_size: int = 64) -> None:
        parsed = urlparse(url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"server URL {url!r}: want http://HOST[:PORT] or https://HOST[:PORT]")
        self.scheme = parsed.scheme
        self.host = parsed.hostname
        self.port = parsed.port or (443 if self.scheme == "https" else 80)
        self.base_path = parsed.path.rstrip("/")
        if self.scheme == "https" and ssl_context is None:
            raise ValueError("an https server needs an ssl_context")
        self.ssl_context = ssl_context
        self.server_hostname = server_hostname or self.host
        default_port = self.port == (443 if self.scheme == "https" else 80)
        host_header = f"[{self.host}]" if ":" in self.host else self.host
        self.host_header = host_header if default_port else f"{host_header}:{self.port}"
        self._proxy = _proxy_target(proxy) if proxy else None
        self._proxy_headers = dict(proxy_headers or {})
        if self._proxy and self._proxy[2]:
            self._proxy_headers.setdefault("Proxy-Authorization", self._proxy[2])
        self._pool_size = pool_size
        self._idle: list[_Conn] = []
        self._lock = threading.Lock()
        self._closed = False

    # -- connections -----------------------------------------------------------------------

    def _acquire(self, connect_timeout: float) -> _Conn:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if conn.dropped():
                    conn.close()
                    continue
                conn.reused = True
                return conn
        return self._connect(connect_timeout)

    def _release(self, conn: _Conn) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._pool_size:
                self._idle.append(conn)
                return
        conn.close()

    def _connect(self, timeout: float) -> _Conn:
        target = (self._proxy[0], self._proxy[1]) if self._proxy else (self.host, self.port)
        try:
            sock = socket.create_connection(target, timeout=timeout)
        except OSError as err:
            where = f"proxy {target[0]}:{target[1]}" if self._proxy else f"{target[0]}:{target[1]}"
            raise ConnectError(f"cannot connect to {where}: {err.strerror or err}") from None
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._proxy and self.scheme == "https":
                self._tunnel(sock)
            if self.scheme == "https":
                assert self.ssl_context is not None
                sock = self.ssl_context.wrap_socket(sock, server_hostname=self.server_hostname)
        except ConnectError:
            sock.close()
            raise
        except (OSError, ssl.SSLError) as err:
            sock.close()
            raise ConnectError(f"cannot connect to {self.host}:{self.port}: {err}") from None
        return _Conn(sock)

    def _tunnel(self, sock: socket.socket) -> None:
        lines = [f"CONNECT {self.host}:{self.port} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        lines += [f"{k}: {v}" for k, v in self._proxy_headers.items()]
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        rfile = sock.makefile("rb", buffering=0)
        try:
            status_line = rfile.readline(_MAX_LINE)
            while rfile.readline(_MAX_LINE) not in (b"\r\n", b"\n", b""):
                pass
        finally:
            rfile.close()
        parts = status_line.split(None, 2)
        if len(parts) < 2 or parts[1] != b"200":
            raise ConnectError(f"proxy refused CONNECT {self.host}:{self.port}: "
                               f"{status_line.decode('latin-1', 'replace').strip() or 'no answer'}")

    def close(self) -> None:
        """Close the idle connections (responses still streaming close when they end)."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # -- requests --------------------------------------------------------------------------

    def request(self, method: str, target: str, headers: dict[str, str], body: bytes | None = None, *,
                connect_timeout: float = 10.0, read_timeout: float | None = 30.0,
                stream: bool = False) -> Response:
        """Send one request (``target``: path and query); the answer, its body read unless ``stream``.

        A kept-alive connection the server closed meanwhile is replaced once, transparently: the
        server had not seen the request.
        """
        if self._proxy and self.scheme == "http":
            target = f"http://{self.host_header}{self.base_path}{target}"
        else:
            target = self.base_path + target
        head = [f"{method} {target} HTTP/1.1\r\nHost: {self.host_header}\r\n"]
        for name, value in headers.items():
            head.append(f"{name}: {value}\r\n")
        if self._proxy and self.scheme == "http":
            for name, value in self._proxy_headers.items():
                head.append(f"{name}: {value}\r\n")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            head.append(f"Content-Length: {len(body or b'')}\r\n")
        head.append("\r\n")
        data = "".join(head).encode("latin-1") + (body or b"")
        for attempt in (0, 1):
            conn = self._acquire(connect_timeout)
            try:
                conn.sock.settimeout(read_timeout)
                conn.sock.sendall(data)
                response = self._read_head(conn, method)
            except _StaleConnection:
                conn.close()
                if attempt == 0:
                    continue
                raise TransportError("the server closed the connection without answering") from None
            except (OSError, ValueError) as err:
                conn.close()
                if conn.reused and attempt == 0 and isinstance(err, (BrokenPipeError, ConnectionResetError)):
                    continue
                if isinstance(err, TransportError):
                    raise
                if isinstance(err, (TimeoutError, socket.timeout)):
                    raise TransportError(f"no answer within {read_timeout:g}s") from None
                raise TransportError(str(err) or type(err).__name__) from None
            if not stream:
                response.read()
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _read_head(self, conn: _Conn, method: str) -> Response:
        rfile = conn.rfile
        while True:
            line = rfile.readline(_MAX_LINE)
            if not line:
                if conn.reused:
                    raise _StaleConnection()
                raise TransportError("the server closed the connection without answering")
            parts = line.split(None, 2)
            if len(parts) < 2 or not parts[0].startswith(b"HTTP/"):
                raise TransportError(f"not an HTTP answer: {line[:80]!r}")
            try:
                status = int(parts[1])
            except ValueError:
                raise TransportError(f"bad status line {line[:80]!r}") from None
            headers: dict[str, str] = {}
            for _ in range(_MAX_HEADERS):
                h = rfile.readline(_MAX_LINE)
                if h in (b"\r\n", b"\n"):
                    break
                if not h:
                    raise TransportError("connection closed inside the answer's headers")
                name, sep, value = h.partition(b":")
                if not sep:
                    raise TransportError(f"bad header line {h[:80]!r}")
                key = name.strip().lower().decode("latin-1")
                text = value.strip().decode("latin-1")
                headers[key] = f"{headers[key]}, {text}" if key in headers else text
            else:
                raise TransportError(f"more than {_MAX_HEADERS} header lines")
            if 100 <= status < 200:
                continue  # interim answer (100 Continue, 102 Processing): the real one follows
            break
        version_11 = parts[0] == b"HTTP/1.1"
        connection = headers.get("connection", "").lower()
        keep_alive = (version_11 and "close" not in connection) or "keep-alive" in connection
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        length: int | None = None
        if method in _NO_BODY_METHODS or status in (204, 304):
            length = 0
        elif not chunked and "content-length" in headers:
            try:
                length = int(headers["content-length"].split(",")[0])
            except ValueError:
                raise TransportError(f"bad Content-Length {headers['content-length']!r}") from None
        elif not chunked:
            keep_alive = False  # body ends at EOF
        return Response(self, conn, status, headers, length, chunked, keep_alive)


class _StaleConnection(Exception):
    """A reused connection was closed by the server before it answered."""


def _proxy_target(proxy: str) -> tuple[str, int, str | None]:
    """(host, port, Proxy-Authorization value or None) of an ``http://[user:pass@]host:port`` proxy."""
    parsed = urlparse(proxy if "://" in proxy else f"http://{proxy}")
    if parsed.scheme != "http" or not parsed.hostname:
        raise ValueError(f"proxy {proxy!r}: only http:// proxies are supported")
    auth = None
    if parsed.username is not None:
        token = f"{unquote(parsed.username)}:{unquote(parsed.password or '')}".encode()
        auth = "Basic " + base64.b64encode(token).decode("ascii")
    return parsed.hostname, parsed.port or 80, auth
