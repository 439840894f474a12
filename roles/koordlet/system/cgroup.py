"""The kubelet's cgroup layout (reference A.3.1): QoS, pod and container directories, v1 and v2.

Directories are *relative* to the cgroup root (and, on v1, to the subsystem mount):
:meth:`CgroupLayout.path` turns one into an absolute file path. Kubernetes QoS names are the pod's
``status.qosClass`` values: ``Guaranteed``, ``Burstable``, ``BestEffort``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Mapping

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

SYSTEMD = "systemd"
CGROUPFS = "cgroupfs"

# Container runtimes as they prefix container IDs ("containerd://<hash>") and, with the systemd
# driver, the scope unit name each runtime gives the container's cgroup.
_SYSTEMD_SCOPE_PREFIX = {
    "docker": "docker-",
    "containerd": "cri-containerd-",
    "cri-o": "crio-",
    "pouch": "pouch-",
}

# Host-application cgroupPath.base values (NodeSLO hostApplications[].cgroupPath.base) → QoS dir.
_HOST_APP_BASES = {
    "": None,               # unset: the cgroup root
    "CgroupRoot": None,
    "Kubepods": GUARANTEED,
    "KubepodsBurstable": BURSTABLE,
    "KubepodsBesteffort": BEST_EFFORT,
}


def parse_container_id(container_id: str) -> tuple[str, str]:
    """``"containerd://abc"`` → ``("containerd", "abc")``; ValueError naming the value when malformed."""
    runtime, sep, cid = container_id.partition("://")
    if not sep or not runtime or not cid or "/" in cid:
        raise ValueError(f"invalid container ID {container_id!r}: want <runtime>://<id>")
    return runtime, cid


@dataclass(frozen=True)
class CgroupLayout:
    """Where the kubelet puts pods and containers for one cgroup version and driver."""

    version: int          # 1 or 2
    driver: str           # "systemd" or "cgroupfs"
    cgroup_root: str

    def __post_init__(self) -> None:
        if self.version not in (1, 2):
            raise ValueError(f"invalid cgroup version {self.version!r}: want 1 or 2")
        if self.driver not in (SYSTEMD, CGROUPFS):
            raise ValueError(f"invalid cgroup driver {self.driver!r}: want systemd or cgroupfs")

    # -- directories -------------------------------------------------------------------------------

    def qos_dir(self, kube_qos: str) -> str:
        """Relative QoS dir: Guaranteed pods live in the kubepods root itself."""
        if self.driver == SYSTEMD:
            if kube_qos == GUARANTEED:
                return "kubepods.slice"
            if kube_qos == BURSTABLE:
                return "kubepods.slice/kubepods-burstable.slice"
            if kube_qos == BEST_EFFORT:
                return "kubepods.slice/kubepods-besteffort.slice"
        else:
            if kube_qos == GUARANTEED:
                return "kubepods"
            if kube_qos == BURSTABLE:
                return "kubepods/burstable"
            if kube_qos == BEST_EFFORT:
                return "kubepods/besteffort"
        raise ValueError(f"invalid Kubernetes QoS class {kube_qos!r}: want Guaranteed, Burstable or BestEffort")

    def pod_dir(self, kube_qos: str, pod_uid: str) -> str:
        """Relative pod dir, e.g. ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid_>.slice``."""
        if not pod_uid or "/" in pod_uid:
            raise ValueError(f"invalid pod UID {pod_uid!r}")
        parent = self.qos_dir(kube_qos)
        if self.driver == CGROUPFS:
            return f"{parent}/pod{pod_uid}"
        # systemd unit names use "-" as the hierarchy separator, so the kubelet escapes the UID's dashes.
        uid = pod_uid.replace("-", "_")
        if kube_qos == GUARANTEED:
            return f"{parent}/kubepods-pod{uid}.slice"
        return f"{parent}/kubepods-{kube_qos.lower()}-pod{uid}.slice"

    def container_dir(self, kube_qos: str, pod_uid: str, container_id: str) -> str:
        """Relative container dir from a ``runtime://id`` container ID (ValueError when unusable)."""
        runtime, cid = parse_container_id(container_id)
        pod = self.pod_dir(kube_qos, pod_uid)
        if self.driver == CGROUPFS:
            return f"{pod}/{cid}"
        prefix = _SYSTEMD_SCOPE_PREFIX.get(runtime)
        if prefix is None:
            raise ValueError(f"invalid container ID {container_id!r}: unknown runtime {runtime!r} "
                             f"(known: {', '.join(sorted(_SYSTEMD_SCOPE_PREFIX))})")
        return f"{pod}/{prefix}{cid}.scope"

    def path(self, subsystem: str, rel_dir: str, filename: str) -> str:
        """Absolute path of a cgroup file; ``subsystem`` (cpu, cpuacct, memory, cpuset ...) is ignored on v2."""
        root = self.cgroup_root.rstrip("/")
        if self.version == 1:
            root = f"{root}/{subsystem}"
        rel_dir = rel_dir.strip("/")
        if rel_dir:
            return f"{root}/{rel_dir}/{filename}"
        return f"{root}/{filename}"


def detect_layout(cgroup_root: str, driver: str | None = None) -> CgroupLayout:
    """The layout under ``cgroup_root``: v2 when ``cgroup.controllers`` is there, else v1.

    The driver comes from which kubepods dir exists (``kubepods.slice`` → systemd, ``kubepods`` →
    cgroupfs; on v1 looked for under ``cpu/`` then ``memory/``), falling back to systemd; an explicit
    ``driver`` (not ``auto``) wins.
    """
    version = 2 if os.path.isfile(os.path.join(cgroup_root, "cgroup.controllers")) else 1
    if driver in (None, "", "auto"):
        bases = [cgroup_root] if version == 2 else [os.path.join(cgroup_root, s) for s in ("cpu", "memory")]
        driver = SYSTEMD
        for base in bases:
            if os.path.isdir(os.path.join(base, "kubepods.slice")):
                driver = SYSTEMD
                break
            if os.path.isdir(os.path.join(base, "kubepods")):
                driver = CGROUPFS
                break
    return CgroupLayout(version=version, driver=driver, cgroup_root=cgroup_root)


def host_application_dir(app: Mapping[str, Any], layout: CgroupLayout) -> str:
    """Relative cgroup dir of a NodeSLO host application (reference A.3.1).

    No ``cgroupPath``: ``host-latency-sensitive/<name>`` for LSE/LSR/LS, ``host-best-effort/<name>``
    for BE, ``<name>`` otherwise. With one: ``<base dir>/<parentDir>/<relativePath>``, base one of
    CgroupRoot (default), Kubepods, KubepodsBurstable, KubepodsBesteffort. ValueError naming the
    field when the application is unusable.
    """
    name = app.get("name")
    if not isinstance(name, str) or not name.strip("/"):
        raise ValueError(f"host application {app!r}: name missing or empty")
    cgroup_path = app.get("cgroupPath")
    if not cgroup_path:
        qos = app.get("qos") or ""
        if qos in ("LSE", "LSR", "LS"):
            return f"host-latency-sensitive/{name.strip('/')}"
        if qos == "BE":
            return f"host-best-effort/{name.strip('/')}"
        return name.strip("/")
    if not isinstance(cgroup_path, Mapping):
        raise ValueError(f"host application {name!r}: cgroupPath {cgroup_path!r} is not an object")
    base = cgroup_path.get("base") or ""
    if base not in _HOST_APP_BASES:
        raise ValueError(f"host application {name!r}: unknown cgroupPath.base {base!r} "
                         f"(want CgroupRoot, Kubepods, KubepodsBurstable or KubepodsBesteffort)")
    qos = _HOST_APP_BASES[base]
    parts = [layout.qos_dir(qos) if qos else "",
             str(cgroup_path.get("parentDir") or ""), str(cgroup_path.get("relativePath") or "")]
    rel = "/".join(p.strip("/") for p in parts if p.strip("/"))
    if not rel:
        raise ValueError(f"host application {name!r}: cgroupPath {dict(cgroup_path)!r} names the cgroup root")
    return rel
