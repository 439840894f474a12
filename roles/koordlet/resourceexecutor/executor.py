"""The resource executor (reference A.10, A.3.2): every cgroup write of the koordlet goes through here.

For each :class:`CgroupUpdate` it

- maps the logical (v1) setting to the file of the node's cgroup version (:mod:`..system.resources`);
- validates the value (an invalid one is refused naming the file and the value, nothing is written);
- writes only when the value changed: a cache per file path skips a write whose value was written
  less than ``force_update_seconds`` ago (Koordinator's ``--resource-force-update-seconds``, 60 s),
  and a file that already holds the value is not rewritten;
- records each real change in the :class:`~.audit.AuditLog` (file, old, new, owner, reason);
- counts ``koordlet_resource_writes_total{resource,result}`` (results in :class:`Result`).

A missing file, or one the kernel refuses (EINVAL, EACCES, EPERM, EROFS ...), is logged once per file
(again only after it worked in between) and counted; the other updates of a batch go on; nothing raises.

:meth:`ResourceExecutor.leveled_update_batch` orders updates of a hierarchy (QoS dir, pods, containers):
mergeable settings (cpusets: union; CFS quota and memory protections: max) are first widened top-down,
then set to their final value bottom-up, so a child never exceeds its parent at any moment.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from koordinator_roles.koordlet.resourceexecutor.audit import AuditLog
from koordinator_roles.koordlet.system.cgroup import CgroupLayout
from koordinator_roles.koordlet.system.cpuset import format_cpuset, parse_cpuset
from koordinator_roles.koordlet.system.resources import InvalidValue, Resource, resource

log = logging.getLogger("koordinator.koordlet.resourceexecutor")


class Result(str, enum.Enum):
    """What happened to one update (the ``result`` label of the writes counter)."""

    WRITTEN = "written"
    UNCHANGED = "unchanged"    # cached, or the file already held the value
    INVALID = "invalid"        # refused by validation, nothing written
    MISSING = "missing"        # the file (or its cgroup) does not exist
    REFUSED = "refused"        # the kernel said no (EINVAL, EACCES, EPERM, EROFS, EBUSY)
    ERROR = "error"            # any other I/O error


_REFUSED_ERRNOS = {errno.EINVAL, errno.EACCES, errno.EPERM, errno.EROFS, errno.EBUSY}


@dataclass(frozen=True)
class CgroupUpdate:
    """Set ``resource`` (logical v1 name, e.g. ``cpuset.cpus``) of the cgroup ``rel_dir`` to ``value``.

    ``owner`` is the strategy or hook asking, ``reason`` why; both go to the audit log.
    """

    resource: str
    rel_dir: str
    value: Any
    owner: str
    reason: str = ""


class HostFiles:
    """Plain file access to cgroup files. Never creates a file: a cgroup file that is not there is an error."""

    def read(self, path: str) -> str:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()

    def append(self, path: str, text: str) -> None:
        """One ``write()`` of ``text`` appended to ``path`` (resctrl ``tasks``: each write adds a task)."""
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)

    def write(self, path: str, text: str) -> None:
        # O_TRUNC without O_CREAT, as a shell's "echo v > file": cgroup files exist or the cgroup is gone
        # (kernfs ignores the truncation; a fake tree's regular file needs it); one write() call, as the
        # kernel parses each write separately.
        fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
        try:
            os.write(fd, text.encode("ascii"))
        finally:
            os.close(fd)


class ResourceExecutor:
    """Validated, cached, audited, counted cgroup writes for one node (thread-safe)."""

    def __init__(self, layout: CgroupLayout, *, files: HostFiles | None = None, audit: AuditLog | None = None,
                 force_update_seconds: float = 60.0, metrics: Any = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.layout = layout
        self.files = files or HostFiles()
        self.audit = audit
        self.force_update_seconds = force_update_seconds
        self.clock = clock
        self._lock = threading.RLock()
        self._cache: dict[str, tuple[str, float]] = {}     # path -> (canonical v1 value, when written)
        self._reported: dict[str, str] = {}                # path -> problem logged (once per file)
        self._writes = None
        if metrics is not None:
            from prometheus_client import Counter

            self._writes = Counter("koordlet_resource_writes", "cgroup writes of the resource executor by result",
                                   ["resource", "result"], registry=metrics)

    # -- paths and reads -----------------------------------------------------------------------------

    def path(self, name: str, rel_dir: str, *, for_read: bool = False) -> str:
        """Absolute path of setting ``name`` in cgroup ``rel_dir`` on this node's cgroup version."""
        res = resource(name)
        subsystem, filename = res.file(self.layout.version)
        if for_read and self.layout.version == 2 and res.v2_read_file:
            filename = res.v2_read_file
        return self.layout.path(subsystem, rel_dir, filename)

    def read(self, name: str, rel_dir: str) -> str | None:
        """The setting's current value as canonical v1 text (``-1`` for unlimited quota); on v2 cpusets the
        effective set. None when the file is missing or unreadable (logged once per file)."""
        res = resource(name)
        try:
            return self._read_effective(res, rel_dir)
        except (OSError, ValueError) as err:
            self._report(self.path(name, rel_dir, for_read=True), "read", f"cannot read: {err}")
            return None

    def _read_effective(self, res: Resource, rel_dir: str) -> str:
        version = self.layout.version
        if version == 2 and res.v2_read_file:
            # v2: an empty cpuset.cpus means "the parent's"; what the tasks get is the .effective file.
            own = res.from_file(version, self.files.read(self.path(res.name, rel_dir)))
            if own:
                return own
            return res.from_file(version, self.files.read(self.path(res.name, rel_dir, for_read=True)))
        return res.from_file(version, self.files.read(self.path(res.name, rel_dir)))

    # -- writes --------------------------------------------------------------------------------------

    def update(self, update: CgroupUpdate, *, force: bool = False) -> Result:
        """Apply one update (see the module docstring); never raises for file or value problems."""
        res, target, path = self._prepare(update)
        if res is None:
            return self._count(update.resource, Result.INVALID)
        return self._write(res, update, target, path, force=force)

    def update_batch(self, updates: Iterable[CgroupUpdate], *, force: bool = False) -> list[Result]:
        """Apply each update in order; a failed one does not stop the others."""
        return [self.update(u, force=force) for u in updates]

    def leveled_update_batch(self, levels: Sequence[Sequence[CgroupUpdate]]) -> list[list[Result]]:
        """Apply updates of a hierarchy, ``levels[0]`` the top (e.g. QoS dir, then pods, then containers).

        Mergeable settings get their merged value (cpuset union, max of quota/memory protection with -1
        as unlimited) top-down first, then their final value bottom-up; others are written top-down.
        The result of each update is that of its final write.
        """
        results: list[list[Result | None]] = [[None] * len(level) for level in levels]
        pending: list[tuple[int, int, Resource, str, str]] = []
        for i, level in enumerate(levels):
            for j, u in enumerate(level):
                res, target, path = self._prepare(u)
                if res is None:
                    results[i][j] = self._count(u.resource, Result.INVALID)
                    continue
                if res.merge is None:
                    results[i][j] = self._write(res, u, target, path)
                    continue
                try:
                    current = self._read_effective(res, u.rel_dir)
                except (OSError, ValueError):
                    current = ""      # unreadable: the final write will report it
                merged = _merge(res.merge, current, target)
                if merged == target:      # only widening: the final value can go top-down at once
                    results[i][j] = self._write(res, u, target, path)
                    continue
                self._write(res, u, merged, path, phase="widen before children")
                pending.append((i, j, res, target, path))
        for i, j, res, target, path in reversed(pending):
            results[i][j] = self._write(res, levels[i][j], target, path)
        return [[r if r is not None else Result.ERROR for r in level] for level in results]

    def update_file(self, res: Resource, path: str, value: Any, owner: str, reason: str = "") -> Result:
        """Apply one value to a host file outside the cgroup tree (a sysctl under ``--proc-root``, a resctrl
        ``schemata``): the same validation, cache, audit, counting and once-per-file reporting as
        :meth:`update`; ``res`` is one of :data:`~..system.resources.HOST_FILES`."""
        update = CgroupUpdate(res.name, path, value, owner, reason)
        try:
            target = res.validate(value)
        except InvalidValue as err:
            log.warning("resource executor: %s refused for %s (owner %s): %s", res.name, path, owner, err)
            return self._count(res.name, Result.INVALID)
        return self._write(res, update, target, path)

    def append_file(self, res: Resource, path: str, values: Sequence[Any], owner: str, reason: str = "") -> Result:
        """Append each value to ``path`` in its own ``write()`` (resctrl ``tasks`` takes one task id per write;
        a task that exited meanwhile is refused alone, the others still go in). Not cached: the file is a
        set the kernel keeps. Audited as one change listing the values; WRITTEN when at least one went in."""
        texts = []
        for value in values:
            try:
                texts.append(res.validate(value))
            except InvalidValue as err:
                log.warning("resource executor: %s refused for %s (owner %s): %s", res.name, path, owner, err)
        if not texts:
            return self._count(res.name, Result.UNCHANGED)
        written = []
        for text in texts:
            try:
                self.files.append(path, text + "\n")    # one id per line, as the kernel lists them
            except FileNotFoundError:
                self._report(path, "missing", "no such file (group gone or not supported)")
                return self._count(res.name, Result.MISSING)
            except OSError as err:
                # ESRCH/EINVAL: the task exited between listing and writing; nothing to report per file.
                log.debug("resource executor: %s: append of %s failed: %s", path, text, err.strerror or err)
                continue
            written.append(text)
        if not written:
            return self._count(res.name, Result.REFUSED)
        log.debug("resource executor: %s += %s by %s: %s", path, ",".join(written), owner, reason)
        if self.audit is not None:
            self.audit.record(path, None, ",".join(written), owner, reason)
        return self._count(res.name, Result.WRITTEN)

    def invalidate(self, rel_dir: str | None = None) -> None:
        """Forget cached values (all, or those under ``rel_dir``), e.g. after a cgroup was recreated."""
        with self._lock:
            if rel_dir is None:
                self._cache.clear()
                return
            marker = "/" + rel_dir.strip("/") + "/"
            for path in [p for p in self._cache if marker in p]:
                del self._cache[path]

    # -- internals -----------------------------------------------------------------------------------

    def _prepare(self, update: CgroupUpdate) -> tuple[Resource | None, str, str]:
        """(resource, canonical v1 target, path) or (None, "", "") after logging an invalid update."""
        try:
            res = resource(update.resource)
            path = self.path(update.resource, update.rel_dir)
            target = res.validate(update.value)
        except InvalidValue as err:
            where = update.rel_dir or "/"
            log.warning("resource executor: %s refused for cgroup %s (owner %s): %s", update.resource, where,
                        update.owner, err)
            return None, "", ""
        return res, target, path

    def _write(self, res: Resource, update: CgroupUpdate, target: str, path: str, *, force: bool = False,
               phase: str = "") -> Result:
        with self._lock:
            cached = self._cache.get(path)
            now = self.clock()
            if (not force and cached is not None and cached[0] == target
                    and now - cached[1] < self.force_update_seconds):
                return self._count(res.name, Result.UNCHANGED)
            version = self.layout.version
            try:
                raw = self.files.read(path)
            except FileNotFoundError:
                self._report(path, "missing", "no such file (cgroup gone or setting not supported)")
                return self._count(res.name, Result.MISSING)
            except OSError as err:
                raw = None   # write-only or unreadable: write blind
                log.debug("resource executor: %s: cannot read before writing: %s", path, err)
            old = raw.strip() if raw is not None else None
            if raw is not None:
                try:
                    if res.from_file(version, raw) == target:
                        self._cache[path] = (target, now)
                        return self._count(res.name, Result.UNCHANGED)
                except ValueError:
                    pass    # unparsable content: overwrite it
            text = res.to_file(version, target, raw)
            try:
                self.files.write(path, text)
            except FileNotFoundError:
                self._report(path, "missing", "no such file (cgroup gone or setting not supported)")
                return self._count(res.name, Result.MISSING)
            except OSError as err:
                result = Result.REFUSED if err.errno in _REFUSED_ERRNOS else Result.ERROR
                self._report(path, result.value, f"write of {text!r} failed: {err.strerror or err}")
                self._cache.pop(path, None)
                return self._count(res.name, result)
            self._cache[path] = (target, now)
            if self._reported.pop(path, None) is not None:
                log.info("resource executor: %s writable again", path)
        reason = update.reason + (f" ({phase})" if phase else "")
        log.debug("resource executor: %s %r -> %r by %s: %s", path, old, text, update.owner, reason)
        if self.audit is not None:
            self.audit.record(path, old, text, update.owner, reason)
        return self._count(res.name, Result.WRITTEN)

    def _report(self, path: str, kind: str, message: str) -> None:
        with self._lock:
            if self._reported.get(path) == kind:
                log.debug("resource executor: %s: %s", path, message)
                return
            self._reported[path] = kind
        log.warning("resource executor: %s: %s (logged once until it changes)", path, message)

    def _count(self, name: str, result: Result) -> Result:
        if self._writes is not None:
            self._writes.labels(resource=name, result=result.value).inc()
        return result


def _merge(how: str, current: str, target: str) -> str:
    """The value that contains both ``current`` and ``target`` (A.3.2 mergeable updaters)."""
    if not current:
        return target
    if how == "union":
        return format_cpuset(set(parse_cpuset(current)) | set(parse_cpuset(target)))
    cur, new = int(current), int(target)
    if cur == -1 or new == -1:
        return "-1"
    return str(max(cur, new))
