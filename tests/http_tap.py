"""An HTTP-aware TCP proxy for chaos checks: it records which requests one client made, and can hold some.

``HttpTap(port).start()`` listens on 127.0.0.1 (``.port``, ``.url``) and forwards each connection to the
server. It reads the plain-HTTP/1.1 request lines going up and the status lines coming back (one request
at a time per connection, as Python's http.client sends them), so :attr:`requests` holds
``(time_sent, method, path, status)`` for every request the client behind it made — the one source of
"who wrote what" when several processes share a server and the objects carry no writer identity.

``hold`` (a predicate on ``(method, path)``) lets such a request's bytes stop at the proxy: the client
waits for an answer that never comes and the server never sees the request (it is dropped, never sent
late, when the client goes away). Used to freeze a process between two API calls before killing it.
"""

from __future__ import annotations

import json
import re
import select
import socket
import time
from typing import Callable

from tests.tcp_proxy import TcpProxy

_POLL = 0.05
_REQUEST = re.compile(rb"(GET|POST|PUT|PATCH|DELETE|HEAD|OPTIONS) (\S+) HTTP/1\.[01]\r\n")
_STATUS = re.compile(rb"HTTP/1\.[01] (\d{3}) ")

WRITES = ("POST", "PUT", "PATCH", "DELETE")


class Request:
    """One request seen by the tap; ``status`` is None until the answer's status line passes."""

    __slots__ = ("sent", "method", "path", "status", "held", "name")

    def __init__(self, sent: float, method: str, path: str, held: bool, name: str | None = None) -> None:
        self.sent, self.method, self.path, self.status, self.held = sent, method, path, None, held
        self.name = name   # a create's metadata.name, from its JSON body (None when not read whole)

    @property
    def object(self) -> str:
        """The object's path: a create's collection path plus the name it creates; ``/status`` dropped."""
        path = self.path.split("?", 1)[0]
        if path.endswith("/status"):
            path = path[: -len("/status")]
        return f"{path}/{self.name}" if self.method == "POST" and self.name else path

    @property
    def ok_write(self) -> bool:
        """A write the server acknowledged (2xx)."""
        return self.method in WRITES and self.status is not None and 200 <= self.status < 300

    def __repr__(self) -> str:
        return f"{self.method} {self.path} -> {self.status}{' (held)' if self.held else ''} @{self.sent:.3f}"


class HttpTap(TcpProxy):
    """Forward 127.0.0.1:<ephemeral> to ``127.0.0.1:target_port``, recording requests; hold those ``hold`` picks.

    The listener, threads and shutdown are :class:`~tests.tcp_proxy.TcpProxy`'s; only a connection's relay differs.
    """

    def __init__(self, target_port: int, hold: Callable[[str, str], bool] | None = None) -> None:
        super().__init__(target_port)
        self.hold = hold
        self._requests: list[Request] = []

    @property
    def requests(self) -> list[Request]:
        with self._lock:
            return list(self._requests)

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        pending: list[Request] = []   # sent, not yet answered, in order (no pipelining)
        held = False
        try:
            upstream = socket.create_connection(self.target, timeout=5)
            if not self._track(upstream):
                return
            while not self._stopping.is_set():
                ready, _, _ = select.select([client, upstream], [], [], _POLL)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    if sock is client:
                        if held:
                            continue   # the held request and anything after it never reach the server
                        for m in _REQUEST.finditer(data):
                            method, path = m.group(1).decode(), m.group(2).decode()
                            held = bool(self.hold and self.hold(method, path))
                            name = _created_name(data[m.end():]) if method == "POST" else None
                            req = Request(time.time(), method, path, held, name)
                            with self._lock:
                                self._requests.append(req)
                            pending.append(req)
                        if not held:
                            upstream.sendall(data)
                    else:
                        # The answer to the oldest open request starts a read: the next request is
                        # only sent once this answer has been read whole.
                        m = _STATUS.match(data)
                        if m and pending:
                            pending.pop(0).status = int(m.group(1))
                        client.sendall(data)
        except (OSError, ValueError):
            return
        finally:
            self._release(client, upstream)


def _created_name(rest: bytes) -> str | None:
    """metadata.name of a JSON request body that came in the same read as its headers."""
    _, sep, body = rest.partition(b"\r\n\r\n")
    if not sep or not body.startswith(b"{"):
        return None
    try:
        obj = json.loads(body)
    except ValueError:
        return None
    name = (obj.get("metadata") or {}).get("name") if isinstance(obj, dict) else None
    return name if isinstance(name, str) else None

