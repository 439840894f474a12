"""The benchmarks' HTTP client for a local ``koordinator apiserver``: raw JSON calls, without the runtime's
client, so that the figures measure the server and the roles rather than the client's overhead.

Imported by its siblings as ``import benchhttp``: a script run as ``python scripts/<name>.py`` has scripts/
first on ``sys.path`` (the tests put it there too).
"""

from __future__ import annotations

import http.client
import threading

import orjson


class KeepAliveApi:
    """Raw JSON calls to the API server on ``127.0.0.1:port``, one keep-alive connection per calling thread
    (http.client connections are not thread-safe; a fresh connection per call would measure TCP setup)."""

    def __init__(self, port: int, timeout: float = 120.0) -> None:
        self.port = port
        self.timeout = timeout
        self.local = threading.local()

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        """``(status, body bytes)`` of one call; RuntimeError naming the call when the status is 300 or more."""
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
        conn.request(method, path, body=orjson.dumps(body) if body is not None else None,
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: {resp.status} {data[:300]!r}")
        return resp.status, data

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        """The decoded JSON answer of one call ({} when empty); errors as :meth:`request`."""
        _, data = self.request(method, path, body)
        return orjson.loads(data) if data else {}
