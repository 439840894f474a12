"""Host directory roots (``--proc-root``, ``--sys-root``, ``--cgroup-root``): every host path goes through here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostPaths:
    """The roots the koordlet reads the host from; a fake tree only changes these."""

    proc_root: str = "/proc"
    sys_root: str = "/sys"
    cgroup_root: str = "/sys/fs/cgroup"

    def proc(self, *parts: str) -> str:
        """A path under the proc root, e.g. ``proc("stat")``."""
        return _join(self.proc_root, parts)

    def sys(self, *parts: str) -> str:
        """A path under the sysfs root, e.g. ``sys("devices", "system", "node")``."""
        return _join(self.sys_root, parts)


def _join(root: str, parts: tuple[str, ...]) -> str:
    # Plain string joining: parts are relative by construction, and os.path.join would silently
    # drop the root if a part started with "/".
    root = root.rstrip("/") or "/"
    rest = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
    if not rest:
        return root
    return root + rest if root == "/" else root + "/" + rest
