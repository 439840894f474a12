"""A threaded TCP proxy for tests that need a network partition between a client and a server.

``TcpProxy(port).start()`` listens on 127.0.0.1 (``.port``) and forwards each connection to
``target_host:port``. ``block()`` stops moving bytes in both directions and holds new connections
without connecting them upstream, so requests hang as they would behind a partition (what is
already in flight stays in the socket buffers and moves on after ``unblock()``). ``stop()`` closes
everything and joins every thread the proxy started.
"""

from __future__ import annotations

import select
import socket
import threading

_POLL = 0.05


class TcpProxy:
    """Forward 127.0.0.1:<ephemeral> to ``target_host:target_port``; partition it on demand."""

    def __init__(self, target_port: int, target_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(("127.0.0.1", 0))
        self._listener.listen(128)
        self.port = self._listener.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._sockets: set[socket.socket] = set()

    def __enter__(self) -> "TcpProxy":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "TcpProxy":
        self._spawn(self._accept_loop, "tcp-proxy-accept")
        return self

    def block(self) -> None:
        """Partition: no byte moves either way and new connections are held, until :meth:`unblock`."""
        self._open.clear()

    def unblock(self) -> None:
        self._open.set()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the listener and every connection; join all threads."""
        self._stopping.set()
        self._open.set()
        with self._lock:
            sockets = list(self._sockets) + [self._listener]
            self._sockets.clear()
            threads = list(self._threads)
        for sock in sockets:
            _close(sock)
        for thread in threads:
            thread.join(timeout)

    # -- threads ---------------------------------------------------------------------------

    def _spawn(self, target, name: str, *args: object) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            if self._stopping.is_set():
                return
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._stopping.is_set():
                _close(sock)
                return False
            self._sockets.add(sock)
            return True

    def _accept_loop(self) -> None:
        while not self._stopping.is_set():
            try:
                ready, _, _ = select.select([self._listener], [], [], _POLL)
                if not ready:
                    continue
                conn, _ = self._listener.accept()
            except (OSError, ValueError):
                return
            if self._track(conn):
                self._spawn(self._serve, f"tcp-proxy-conn-{conn.fileno()}", conn)

    def _serve(self, client: socket.socket) -> None:
        upstream = None
        try:
            # A connection accepted during a partition is held, not refused: its request hangs.
            while not self._open.wait(_POLL):
                if self._stopping.is_set():
                    return
            if self._stopping.is_set():
                return
            upstream = socket.create_connection(self.target, timeout=5)
            if not self._track(upstream):
                return
            peers = {client: upstream, upstream: client}
            while not self._stopping.is_set():
                if not self._open.is_set():
                    self._open.wait(_POLL)
                    continue
                ready, _, _ = select.select(list(peers), [], [], _POLL)
                for sock in ready:
                    if not self._open.is_set():
                        break
                    data = sock.recv(65536)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):
            return
        finally:
            self._release(client, upstream)

    def _release(self, client: socket.socket, upstream: socket.socket | None) -> None:
        """Forget and close a connection's two sockets (``upstream`` None: never connected)."""
        with self._lock:
            self._sockets.discard(client)
            if upstream is not None:
                self._sockets.discard(upstream)
        _close(client)
        if upstream is not None:
            _close(upstream)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
