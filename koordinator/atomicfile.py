"""Replacing a file's content atomically: readers (a kubelet's device plugin, a webhook server reloading its
certificate, kubectl reading a kubeconfig) see the old file or the new one, never a part-written one.

A plain module of the ``koordinator`` package that imports nothing of the project, so that every layer
(device discovery included, which may import neither the runtime nor a role) can share it.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

__all__ = ["write_atomic"]

_TRIES = 100


def write_atomic(path: str | Path, data: bytes | str, mode: int | None = 0o644, *, sync: bool = False) -> None:
    """Write ``data`` to ``path`` through a hidden temporary file in the same directory, renamed over it.

    ``str`` data is written as UTF-8. ``mode`` is the file's permission bits whatever the umask (0600 for
    keys and credentials); None leaves them as ``open()`` would create them (0666 less the umask).
    ``sync`` flushes the data to disk before the rename, so that a crash cannot leave an empty file
    behind the new name. The directory must exist. On any failure the temporary file is removed and the
    old file, if any, stays as it was.
    """
    if isinstance(data, str):
        data = data.encode("utf-8")
    fd, tmp = _create_temp(os.fspath(path), 0o666 if mode is None else 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _create_temp(path: str, perm: int) -> tuple[int, str]:
    # tempfile.mkstemp always creates 0600; a file meant to follow the umask needs its own O_EXCL create.
    directory, name = os.path.split(path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(_TRIES):
        tmp = os.path.join(directory or ".", f".{name}.{secrets.token_hex(4)}")
        try:
            return os.open(tmp, flags, perm), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"{directory or '.'}: no free temporary name for {name} after {_TRIES} tries")
