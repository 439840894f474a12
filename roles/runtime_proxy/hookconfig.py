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

import json
import logging
import os
import threading
from dataclasses import dataclass
from typing import Callable

from koordinator.apis.runtimehooks import (FAIL, HOOK_TYPES, IGNORE, KEY_FAILURE_POLICY, KEY_REMOTE_ENDPOINT,
                                           KEY_RUNTIME_HOOKS)
from koordinator.runtime.dirwatch import DirectoryWatch
from koordinator.runtime.grpcserver import socket_path

log = logging.getLogger("koordinator.runtime_proxy.hooks")

POLICIES = (FAIL, IGNORE, "")
_KEYS = (KEY_REMOTE_ENDPOINT, KEY_FAILURE_POLICY, KEY_RUNTIME_HOOKS)


class RegistrationError(ValueError):
    """A registration file that cannot be used; the message names the file and the field."""


@dataclass(frozen=True)
class HookServer:
    """One registered hook server (one file)."""

    #: The registration file's name (``koordlet.json``): names the hook server in logs, errors and metrics.
    name: str
    #: The unix socket path the hook server listens on.
    endpoint: str
    #: ``Fail`` or ``Ignore``.
    failure_policy: str
    hooks: frozenset[str]

    @property
    def fails_closed(self) -> bool:
        """Whether a failed Pre hook fails the CRI call."""
        return self.failure_policy == FAIL


def parse(name: str, text: str) -> HookServer:
    """The :class:`HookServer` of registration file ``name`` holding ``text``; RegistrationError naming the field."""
    try:
        doc = json.loads(text)
    except ValueError as err:
        raise RegistrationError(f"{name}: not JSON: {err}") from None
    if not isinstance(doc, dict):
        raise RegistrationError(f"{name}: want a JSON object, got {type(doc).__name__}")
    endpoint = doc.get(KEY_REMOTE_ENDPOINT)
    if not isinstance(endpoint, str) or not endpoint.strip():
        raise RegistrationError(f"{name}: remote-endpoint: {endpoint!r}: want the hook server's unix socket path")
    endpoint = socket_path(endpoint.strip())
    if not endpoint.startswith("/"):
        raise RegistrationError(f"{name}: remote-endpoint: {endpoint!r}: want an absolute unix socket path")
    policy = doc.get(KEY_FAILURE_POLICY, "")
    if policy not in POLICIES:
        raise RegistrationError(f"{name}: failure-policy: {policy!r}: want Fail or Ignore")
    hooks = doc.get(KEY_RUNTIME_HOOKS)
    if not isinstance(hooks, list) or not all(isinstance(h, str) for h in hooks):
        raise RegistrationError(f"{name}: runtime-hooks: {hooks!r}: want a list of hook types")
    for index, hook in enumerate(hooks):
        if hook not in HOOK_TYPES:
            raise RegistrationError(f"{name}: runtime-hooks[{index}]: unknown hook type {hook!r} "
                                    f"(known: {', '.join(HOOK_TYPES)})")
    unknown = sorted(set(doc) - set(_KEYS))
    if unknown:
        # Koordinator ignores unknown keys; a typo would silently change the policy, so say so.
        log.warning("hook server registration %s: unknown keys %s ignored", name, ",".join(unknown))
    return HookServer(name=name, endpoint=endpoint, failure_policy=policy or IGNORE, hooks=frozenset(hooks))


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
            names = sorted(e.name for e in os.scandir(self.directory) if e.name.endswith("json") and e.is_file())
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
