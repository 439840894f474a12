"""The lean HTTP transport: framing, keep-alive, TLS and proxies, against real sockets."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from koordinator.runtime.client import Client, ConfigError, load_configuration
from koordinator.runtime.errors import ConnectionFailed
from koordinator.runtime.transport import ConnectError, Transport, TransportError


class RawServer:
    """A TCP server on 127.0.0.1 whose ``handle(conn, request_head)`` answers with raw bytes.

    Each accepted connection is served on its own thread until ``handle`` returns False or the peer
    closes; ``heads`` records every request head received.
    """

    def __init__(self, handle: Callable[[socket.socket, bytes], bool]) -> None:
        self.handle = handle
        self.heads: list[bytes] = []
        self.connections = 0
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port = self._sock.getsockname()[1]
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._accept = threading.Thread(target=self._loop, daemon=True)
        self._accept.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            self._threads.append(t)
            t.start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    try:
                        data = conn.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n")[1:]:
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                self.heads.append(head)
                if not self.handle(conn, head):
                    return

    def stop(self) -> None:
        self._stop.set()
        try:
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes accept(); close() alone would not
        except OSError:
            pass
        self._sock.close()
        self._accept.join(5)
        for t in self._threads:
            t.join(5)


@pytest.fixture
def raw_server() -> Iterator[Callable[[Callable[[socket.socket, bytes], bool]], RawServer]]:
    servers: list[RawServer] = []

    def start(handle: Callable[[socket.socket, bytes], bool]) -> RawServer:
        servers.append(RawServer(handle))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def _ok(body: bytes, extra: bytes = b"") -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body), extra, body)


def test_content_length_chunked_and_interim_answers(raw_server):
    answers = [
        _ok(b'{"a":1}'),
        b"HTTP/1.1 100 Continue\r\n\r\n" + _ok(b"{}"),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n",
        b"HTTP/1.1 204 No Content\r\n\r\n",
    ]

    def handle(conn, head):
        conn.sendall(answers.pop(0))
        return True

    server = raw_server(handle)
    t = Transport(f"http://127.0.0.1:{server.port}")
    try:
        r = t.request("GET", "/x?y=1", {"Accept": "application/json"})
        assert (r.status, r.body, r.headers["content-type"]) == (200, b'{"a":1}', "application/json")
        assert t.request("POST", "/p", {}, b"{}").body == b"{}"
        assert t.request("GET", "/c", {}).body == b"abcde"
        r = t.request("DELETE", "/d", {})
        assert (r.status, r.body) == (204, b"")
    finally:
        t.close()
    assert server.connections == 1, "every answer was framed, so one kept-alive connection served them all"
    assert server.heads[0].startswith(b"GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert b"Content-Length: 2" in server.heads[1]


def test_connection_close_and_body_to_eof_open_a_new_connection(raw_server):
    answers = [b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok",
               b"HTTP/1.0 200 OK\r\n\r\nuntil eof"]

    def handle(conn, head):
        conn.sendall(answers.pop(0))
        return False  # close after each answer

    server = raw_server(handle)
    t = Transport(f"http://127.0.0.1:{server.port}")
    try:
        assert t.request("GET", "/1", {}).body == b"ok"
        assert t.request("GET", "/2", {}).body == b"until eof"
    finally:
        t.close()
    assert server.connections == 2


def test_a_kept_alive_connection_closed_by_the_server_is_replaced(raw_server):
    def handle(conn, head):
        # Advertises keep-alive, then closes: the next request on it must go out on a new one.
        conn.sendall(_ok(b"{}"))
        return False

    server = raw_server(handle)
    t = Transport(f"http://127.0.0.1:{server.port}")
    try:
        for _ in range(3):
            assert t.request("POST", "/p", {}, b"{}").status == 200
    finally:
        t.close()
    assert len(server.heads) == 3, "each request reached the server exactly once"


@pytest.mark.parametrize("answer, message", [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", "bytes of the body missing"),
    (b"SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP answer"),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "bad chunk size line"),
    (b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", "bad Content-Length"),
    (b"", "closed the connection without answering"),
])
def test_broken_answers_raise_transport_errors(raw_server, answer, message):
    def handle(conn, head):
        conn.sendall(answer)
        return False

    server = raw_server(handle)
    t = Transport(f"http://127.0.0.1:{server.port}")
    try:
        with pytest.raises(TransportError, match=message):
            t.request("GET", "/", {})
    finally:
        t.close()


def test_read_timeout_and_refused_connection(raw_server):
    released = threading.Event()

    def handle(conn, head):
        released.wait(5)
        return False

    server = raw_server(handle)
    t = Transport(f"http://127.0.0.1:{server.port}")
    try:
        with pytest.raises(TransportError, match="no answer within 0.2s"):
            t.request("GET", "/", {}, read_timeout=0.2)
    finally:
        released.set()
        t.close()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError, match=f"cannot connect to 127.0.0.1:{port}"):
        Transport(f"http://127.0.0.1:{port}").request("GET", "/", {})


def test_streamed_body_and_close_from_another_thread(raw_server):
    def handle(conn, head):
        conn.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst\n\r\n")
        conn.recv(1)  # hold the stream open until the client goes away
        return False

    server = raw_server(handle)
    t = Transport(f"http://127.0.0.1:{server.port}")
    try:
        r = t.request("GET", "/watch", {}, stream=True, read_timeout=30)
        chunks = r.iter_chunks()
        assert next(chunks) == b"first\n"
        threading.Timer(0.1, r.close).start()
        with pytest.raises(TransportError):
            next(chunks)
    finally:
        t.close()


def test_http_proxy_gets_absolute_form_requests(raw_server):
    def handle(conn, head):
        conn.sendall(_ok(b"{}"))
        return True

    proxy = raw_server(handle)
    t = Transport("http://10.0.0.1:6443", proxy=f"http://user:pa%20ss@127.0.0.1:{proxy.port}")
    try:
        assert t.request("GET", "/api", {}).status == 200
    finally:
        t.close()
    head = proxy.heads[0]
    assert head.startswith(b"GET http://10.0.0.1:6443/api HTTP/1.1\r\nHost: 10.0.0.1:6443")
    assert b"Proxy-Authorization: Basic dXNlcjpwYSBzcw==" in head


def test_bad_server_urls_and_proxies_are_named():
    with pytest.raises(ValueError, match="server URL 'ftp://x'"):
        Transport("ftp://x")
    with pytest.raises(ValueError, match="needs an ssl_context"):
        Transport("https://x")
    with pytest.raises(ValueError, match="proxy 'socks5://p:1080': only http:// proxies"):
        Transport("http://x", proxy="socks5://p:1080")


class ConnectProxy(RawServer):
    """An HTTP CONNECT proxy: tunnels each connection to the host:port it asks for."""

    def __init__(self) -> None:
        self.tunnels: list[bytes] = []
        super().__init__(self._tunnel)

    def _tunnel(self, conn: socket.socket, head: bytes) -> bool:
        self.tunnels.append(head.split(b"\r\n")[0])
        host, port = head.split()[1].decode().rsplit(":", 1)
        upstream = socket.create_connection((host, int(port)))
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pipe(src: socket.socket, dst: socket.socket) -> None:
            try:
                while data := src.recv(65536):
                    dst.sendall(data)
            except OSError:
                pass
            finally:
                for s in (src, dst):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass

        back = threading.Thread(target=pipe, args=(upstream, conn), daemon=True)
        back.start()
        pipe(conn, upstream)
        back.join(5)
        upstream.close()
        return False


def test_tls_server_with_token_and_through_a_connect_proxy(tls_apiserver):
    cfg = load_configuration(str(tls_apiserver.kubeconfig))
    assert cfg.host.startswith("https://")
    c = Client(cfg, qps=0)
    try:
        c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tls"}})
        assert c.get("Namespace", "tls")["metadata"]["name"] == "tls"
        listed = c.list("Namespace")
        stream = c.watch("Namespace", resource_version=listed["metadata"]["resourceVersion"])
        try:
            c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tls2"}})
            kind, obj = next(iter(stream))
            assert (kind, obj["metadata"]["name"]) == ("ADDED", "tls2")
        finally:
            stream.close()
    finally:
        c.close()

    proxy = ConnectProxy()
    try:
        cfg = load_configuration(str(tls_apiserver.kubeconfig))
        cfg.proxy = f"http://127.0.0.1:{proxy.port}"
        c = Client(cfg, qps=0)
        try:
            assert c.get("Namespace", "tls")["metadata"]["name"] == "tls"
        finally:
            c.close()
        assert proxy.tunnels == [f"CONNECT 127.0.0.1:{tls_apiserver.port} HTTP/1.1".encode()]
    finally:
        proxy.stop()


def test_tls_server_with_an_unknown_certificate_is_refused(tls_apiserver, tmp_path):
    cfg = load_configuration(str(tls_apiserver.kubeconfig))
    cfg.ca_file = cfg.ca_data = None
    c = Client(cfg, qps=0, max_attempts=1)
    try:
        with pytest.raises(ConnectionFailed, match="CERTIFICATE_VERIFY_FAILED"):
            c.get("Namespace", "default")
    finally:
        c.close()


def test_a_socks_proxy_is_a_configuration_error(tls_apiserver):
    cfg = load_configuration(str(tls_apiserver.kubeconfig))
    cfg.proxy = "socks5://127.0.0.1:1080"
    with pytest.raises(ConfigError, match="only http:// proxies are supported"):
        Client(cfg)

