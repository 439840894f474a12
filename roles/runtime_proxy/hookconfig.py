"""Hook-server registrations: one JSON file per hook server in ``--hook-server-config-dir``.

Koordinator's format (the koordlet writes ``koordlet.json``)::

    {"remote-endpoint": "/var/run/koordlet/koordlet.sock",
     "failure-policy": "Ignore",
     "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer", "PreUpdateContainerResources"]}

Only files whose name ends in ``json`` count, as in Koordinator. ``failure-policy`` is ``Fail``,
``Ignore`` or empty (= Ignore). :class:`HookRegistry` re-reads the directory when anything in it
changes (inotify, :class:`~koordinator.runtime.dirwatch.DirectoryWatch`) and every minute. A file
that cannot be used is logged once, with its path and the offending field, and the registration it
had before (if any) stays in force, so a half-written edit never drops a working hook server; the
other files are unaffected. A file that is removed unregisters its hook server.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

from koordinator.apis.runtimehooks import (POLICIES, HookServer, RegistrationError, parse_registration,
                                           registration_files)
from koordinator.runtime.dirwatch import DirectoryWatch

log = logging.getLogger("koordinator.runtime_proxy.hooks")

# The file format is shared with the node simulator (its stand-in runtime calls the same hook servers).
__all__ = ["POLICIES", "HookRegistry", "HookServer", "RegistrationError", "parse"]


def parse(name: str, text: str) -> HookServer:
    """The :class:`HookServer` of registration file ``name`` holding ``text``; RegistrationError naming the field."""
    server = parse_registration(name, text)
    if server.unknown_keys:
        # Koordinator ignores unknown keys; a typo would silently change the policy, so say so.
        log.warning("hook server registration %s: unknown keys %s ignored", name, ",".join(server.unknown_keys))
    return server


class HookRegistry:
    """The hook servers registered in ``directory`` (see the module docstring); a Runtime component.

    ``on_change(servers)`` is called after every re-read that changed the registrations (on the
    watch's thread). :meth:`servers` is safe from any thread.
    """

    def __init__(self, directory: str, *, on_change: Callable[[list[HookServer]], None] | None = None,
                 recheck: float = 60.0, debounce: float = 0.1) -> None:
        self.directory = os.path.abspath(directory)
        self.on_change = on_change
        self._lock = threading.Lock()
        self._servers: dict[str, HookServer] = {}
        self._read: dict[str, tuple[int, int, int]] = {}     # file -> (inode, mtime_ns, size) last read
        self._problems: dict[str, str] = {}                 # file -> problem logged
        self._watch = DirectoryWatch(self.directory, self.reload, name="hookserver-config", recheck=recheck,
                                     debounce=debounce)

    def servers(self) -> list[HookServer]:
        """The registered hook servers, by file name."""
        with self._lock:
            return [self._servers[k] for k in sorted(self._servers)]

    def problems(self) -> dict[str, str]:
        """File -> why it is not (or no longer) used as written."""
        with self._lock:
            return dict(self._problems)

    def start(self) -> None:
        """Create the directory (0755) if missing, read it, then watch it (OSError naming the directory)."""
        try:
            os.makedirs(self.directory, mode=0o755, exist_ok=True)
        except OSError as err:
            raise OSError(f"hook server config dir {self.directory}: {err.strerror or err}") from None
        self._watch.arm()
        self.reload()
        self._watch.start()

    def stop(self, timeout: float) -> bool:
        self._watch.stop(timeout)
        return True

    def reload(self) -> None:
        """Re-read the directory: new and changed files parsed, removed ones unregistered."""
        try:
            names = registration_files(self.directory)
        except OSError as err:
            log.warning("cannot list hook server config dir %s: %s", self.directory, err)
            return
        changed = False
        with self._lock:
            for gone in set(self._read) - set(names):
                del self._read[gone]
                self._problems.pop(gone, None)
                if self._servers.pop(gone, None) is not None:
                    log.info("hook server unregistered file=%s", os.path.join(self.directory, gone))
                    changed = True
        for name in names:
            changed |= self._load(name)
        if changed and self.on_change is not None:
            self.on_change(self.servers())

    def _load(self, name: str) -> bool:
        path = os.path.join(self.directory, name)
        try:
            st = os.stat(path)
        except OSError:
            return False      # removed since the listing: the next re-read unregisters it
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            if self._read.get(name) == stamp:
                return False
        try:
            with open(path, encoding="utf-8") as f:
                server = parse(name, f.read())
        except (OSError, UnicodeDecodeError) as err:
            return self._reject(name, stamp, f"{path}: cannot be read: {err}")
        except RegistrationError as err:
            return self._reject(name, stamp, os.path.join(self.directory, str(err)))
        with self._lock:
            self._read[name] = stamp
            self._problems.pop(name, None)
            if self._servers.get(name) == server:
                return False
            self._servers[name] = server
        log.info("hook server registered file=%s endpoint=%s failure-policy=%s hooks=%s", path, server.endpoint,
                 server.failure_policy, ",".join(sorted(server.hooks)))
        return True

    def _reject(self, name: str, stamp: tuple[int, int, int], problem: str) -> bool:
        with self._lock:
            self._read[name] = stamp      # not read again until it changes
            if self._problems.get(name) == problem:
                return False
            self._problems[name] = problem
            kept = name in self._servers
        log.error("invalid hook server registration %s%s", problem,
                  "; its previous registration stays in force" if kept else "")
        return False
