"""A small HTTP/1.1 server on asyncio protocols, built for the API server's traffic shape.

Keep-alive connections carrying many small JSON requests, plus long-lived chunked watch
streams. Requests on one connection are answered in order; a handler answers either with
``respond`` (one response) or by opening a chunked stream. Malformed or oversized requests
get a 400/413 Status and the connection is closed; they can never crash the server.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from typing import Any, Callable
from urllib.parse import parse_qs, unquote, urlsplit

import orjson

from koordinator.apiserver import errors

log = logging.getLogger("koordinator.apiserver.http")

MAX_HEAD = 64 * 1024
REASONS = {
    200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 400: "Bad Request", 401: "Unauthorized",
    403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable", 409: "Conflict",
    410: "Gone", 413: "Request Entity Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Entity",
    429: "Too Many Requests", 431: "Request Header Fields Too Large", 500: "Internal Server Error",
    503: "Service Unavailable", 504: "Gateway Timeout",
}


class Request:
    """One parsed HTTP request."""

    __slots__ = ("method", "path", "query", "headers", "body", "repeated")

    def __init__(self, method: str, target: str, headers: dict[str, str], body: bytes,
                 repeated: dict[str, list[str]] | None = None) -> None:
        self.method = method
        parts = urlsplit(target)
        self.path = unquote(parts.path)
        self.query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        self.headers = headers
        self.body = body
        # Every value of a header sent more than once (``headers`` keeps the last one).
        self.repeated = repeated or {}

    def header(self, name: str, default: str = "") -> str:
        return self.headers.get(name, default)

    def header_values(self, name: str) -> list[str]:
        """All values of header ``name`` (lower case), in the order sent; [] when absent."""
        if name in self.repeated:
            return list(self.repeated[name])
        return [self.headers[name]] if name in self.headers else []


class Response:
    """A complete response: status, extra headers, body bytes."""

    __slots__ = ("status", "headers", "body", "content_type")

    def __init__(self, status: int, body: bytes, content_type: str = "application/json",
                 headers: dict[str, str] | None = None) -> None:
        self.status = status
        self.body = body
        self.content_type = content_type
        self.headers = headers or {}

    @classmethod
    def json(cls, status: int, obj: Any, headers: dict[str, str] | None = None) -> "Response":
        return cls(status, orjson.dumps(obj), headers=headers)

    @classmethod
    def error(cls, err: errors.StatusError) -> "Response":
        return cls(err.code, orjson.dumps(err.to_status()), headers=dict(err.headers))


Handler = Callable[[Request, "HttpConnection"], None]


class HttpConnection(asyncio.Protocol):
    """One client connection: parses requests and writes responses or a chunked stream."""

    def __init__(self, handler: Handler, max_body: int, on_close: Callable[["HttpConnection"], None]) -> None:
        self._handler = handler
        self._max_body = max_body
        self._on_close = on_close
        self._buf = bytearray()
        self._busy = False
        self._keep_alive = True
        self._streaming = False
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.stream_closed: Callable[[], None] | None = None

    # -- asyncio.Protocol ------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        # Watches may buffer a lot for a slow reader before we close them; see write_chunk.
        self.transport.set_write_buffer_limits(high=1 << 20)  # type: ignore[union-attr]

    def data_received(self, data: bytes) -> None:
        self._buf += data
        if not self._busy:
            self._next()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.stream_closed is not None:
            cb, self.stream_closed = self.stream_closed, None
            cb()
        self._on_close(self)

    # -- request parsing -------------------------------------------------------

    def _next(self) -> None:
        while not self._busy and not self.closed:
            end = self._buf.find(b"\r\n\r\n")
            if end < 0:
                if len(self._buf) > MAX_HEAD:
                    self._fail(431, errors.bad_request("request header too large"))
                return
            try:
                head = bytes(self._buf[:end]).decode("latin-1")
                lines = head.split("\r\n")
                method, target, version = lines[0].split(" ")
                if not version.startswith("HTTP/1."):
                    raise ValueError(version)
                headers: dict[str, str] = {}
                repeated: dict[str, list[str]] = {}
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    if not _:
                        raise ValueError(line)
                    name, value = name.strip().lower(), value.strip()
                    if name in headers:
                        # Impersonate-Group may come several times, each value meaning one group.
                        repeated.setdefault(name, [headers[name]]).append(value)
                    headers[name] = value
            except ValueError:
                self._fail(400, errors.bad_request("malformed HTTP request"))
                return
            chunked = "chunked" in headers.get("transfer-encoding", "").lower()
            body_start = end + 4
            if chunked:
                parsed = self._dechunk(body_start)
                if parsed is None:
                    return
                body, consumed = parsed
            else:
                try:
                    length = int(headers.get("content-length", "0"))
                    if length < 0:
                        raise ValueError(length)
                except ValueError:
                    self._fail(400, errors.bad_request("invalid Content-Length"))
                    return
                if length > self._max_body:
                    self._fail(413, errors.too_large())
                    return
                if len(self._buf) < body_start + length:
                    return
                body = bytes(self._buf[body_start:body_start + length])
                consumed = body_start + length
            del self._buf[:consumed]
            conn = headers.get("connection", "").lower()
            self._keep_alive = conn != "close" and (version == "HTTP/1.1" or conn == "keep-alive")
            self._busy = True
            try:
                request = Request(method, target, headers, body, repeated)
            except ValueError:
                self._busy = False
                self._fail(400, errors.bad_request("malformed request target"))
                return
            try:
                self._handler(request, self)
            except errors.StatusError as err:
                self.respond(Response.error(err))
            except Exception as exc:  # a handler bug must cost one request, not the server
                log.exception("request failed: %s %s", method, target)
                self.respond(Response.error(errors.internal(str(exc))))

    def _dechunk(self, pos: int) -> tuple[bytes, int] | None:
        body = bytearray()
        buf = self._buf
        while True:
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                return None
            try:
                size = int(bytes(buf[pos:line_end]).split(b";")[0], 16)
            except ValueError:
                self._fail(400, errors.bad_request("malformed chunked body"))
                return None
            if len(body) + size > self._max_body:
                self._fail(413, errors.too_large())
                return None
            start = line_end + 2
            if len(buf) < start + size + 2:
                return None
            if size == 0:
                trailer_end = buf.find(b"\r\n", start)
                if trailer_end < 0:
                    return None
                return bytes(body), trailer_end + 2
            body += buf[start:start + size]
            pos = start + size + 2

    def _fail(self, status: int, err: errors.StatusError) -> None:
        self._keep_alive = False
        self._busy = True
        body = orjson.dumps(err.to_status())
        self._write_head(status, "application/json", {}, len(body))
        if self.transport is not None:
            self.transport.write(body)
            self.transport.close()

    # -- responses -------------------------------------------------------------

    def _write_head(self, status: int, content_type: str, headers: dict[str, str], length: int | None) -> None:
        if self.transport is None or self.closed:
            return
        parts = [f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\nContent-Type: {content_type}\r\n"]
        for k, v in headers.items():
            parts.append(f"{k}: {v}\r\n")
        parts.append("Transfer-Encoding: chunked\r\n" if length is None else f"Content-Length: {length}\r\n")
        if not self._keep_alive:
            parts.append("Connection: close\r\n")
        parts.append("\r\n")
        self.transport.write("".join(parts).encode("latin-1"))

    def respond(self, resp: Response) -> None:
        """Send a complete response and go on with the next request on this connection."""
        if self.closed or self.transport is None:
            return
        self._write_head(resp.status, resp.content_type, resp.headers, len(resp.body))
        self.transport.write(resp.body)
        self._done()

    def _done(self) -> None:
        self._busy = False
        if not self._keep_alive:
            if self.transport is not None:
                self.transport.close()
            return
        if self._buf:
            self._next()

    def start_stream(self, status: int, headers: dict[str, str], on_close: Callable[[], None]) -> None:
        """Begin a chunked response; ``on_close`` runs if the client goes away first."""
        self._streaming = True
        self.stream_closed = on_close
        self._write_head(status, "application/json", headers, None)

    def write_chunk(self, data: bytes) -> bool:
        """Send one chunk; False when the connection is gone or the client is too slow to keep."""
        if self.closed or self.transport is None:
            return False
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))
        return True

    def buffered(self) -> int:
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def end_stream(self) -> None:
        """Finish the chunked response; the connection carries on with the next request."""
        if not self._streaming:
            return
        self._streaming = False
        self.stream_closed = None
        if self.closed or self.transport is None:
            return
        self.transport.write(b"0\r\n\r\n")
        self._done()

    def abort(self) -> None:
        """Drop the connection (a watcher that fell too far behind)."""
        self.stream_closed = None
        if self.transport is not None:
            # abort() drops our backlog; a zero linger makes the kernel drop its own send buffer
            # too (reset instead of a slow drain to a reader that cannot keep up).
            sock = self.transport.get_extra_info("socket")
            if sock is not None:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                except OSError:
                    pass
            self.transport.abort()


class HttpServer:
    """Listens on one address and hands every request to ``handler`` on the event loop."""

    def __init__(self, handler: Handler, *, max_body: int = 3 * 1024 * 1024) -> None:
        self._handler = handler
        self._max_body = max_body
        self._server: asyncio.base_events.Server | None = None
        self.connections: set[HttpConnection] = set()

    async def start(self, host: str, port: int, ssl_context: Any = None) -> int:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: self._track(HttpConnection(self._handler, self._max_body, self.connections.discard)),
            host, port, ssl=ssl_context, reuse_address=True, backlog=1024,
        )
        return self._server.sockets[0].getsockname()[1]

    def _track(self, conn: HttpConnection) -> HttpConnection:
        self.connections.add(conn)
        return conn

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for conn in list(self.connections):
                if conn.transport is not None:
                    conn.transport.close()
            await self._server.wait_closed()
