"""gRPC servers on unix sockets, as the node agents serve them (the runtime proxy's CRI, the koordlet's hooks).

:func:`serve_unix` makes the socket's directory (0755), removes a stale socket a previous run left
(anything else at the path is an error), binds and starts the server. Every failure is an OSError
naming the flag and the path, which the CLI reports as one line.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc

#: sun_path is 108 bytes with the terminating NUL.
MAX_SOCKET_PATH = 107


def socket_path(endpoint: str) -> str:
    """``unix:///run/x.sock`` or ``/run/x.sock`` -> ``/run/x.sock``."""
    return endpoint[len("unix://"):] if endpoint.startswith("unix://") else endpoint


def prepare_socket(path: str, flag: str) -> None:
    """Make ``path`` bindable: its directory created (0755), a stale socket removed; OSError naming ``flag``."""
    if len(os.fsencode(path)) > MAX_SOCKET_PATH:
        raise OSError(f"{flag} {path}: {len(os.fsencode(path))} bytes, a unix socket path may have at most "
                      f"{MAX_SOCKET_PATH}")
    directory = os.path.dirname(path) or "."
    try:
        os.makedirs(directory, mode=0o755, exist_ok=True)
    except FileExistsError:
        raise OSError(f"{flag} {path}: cannot create {directory}: a file that is not a directory is in the "
                      "way") from None
    except OSError as err:
        raise OSError(f"{flag} {path}: cannot create {directory}: {err.strerror or err}") from None
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:
        raise OSError(f"{flag} {path}: {err.strerror or err}") from None
    if not stat.S_ISSOCK(mode):
        raise OSError(f"{flag} {path}: exists and is not a socket")
    os.unlink(path)


def serve_unix(path: str, flag: str, register: Callable[[grpc.Server], None], *, max_workers: int,
               name: str, options: Sequence[tuple[str, Any]] = ()) -> grpc.Server:
    """A started server on unix socket ``path``; ``register(server)`` adds its services first."""
    prepare_socket(path, flag)
    server = grpc.server(ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name), options=list(options))
    register(server)
    try:
        bound = server.add_insecure_port(f"unix://{path}")
    except RuntimeError as err:      # grpcio raises where older releases returned 0
        bound, reason = 0, str(err)
    else:
        reason = "bind failed"
    if not bound:
        server.stop(None)
        raise OSError(f"{flag} {path}: cannot listen: {reason}")
    server.start()
    return server


def stop_server(server: grpc.Server | None, path: str, timeout: float) -> None:
    """Stop ``server`` (in-flight calls get up to ``timeout``, at most 5 s) and remove its socket."""
    if server is None:
        return
    server.stop(min(timeout, 5.0)).wait(timeout)
    try:
        os.unlink(path)
    except OSError:
        pass
