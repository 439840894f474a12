"""What the proxy remembers of pods and containers between CRI calls, and how it recovers it.

The kubelet names a container only by its ID in StartContainer, StopContainer and
UpdateContainerResources, but a hook server needs the pod's metadata, labels and annotations and
the container's annotations, resources and environment. The proxy keeps them from RunPodSandbox and
CreateContainer (in memory, keyed by the IDs the backend returned). After a restart it rebuilds
them from the backend (:meth:`MetadataStore.rebuild`): ListPodSandbox and ListContainers give
metadata, labels and annotations, and a verbose PodSandboxStatus gives the pod's cgroup parent where
the runtime reports its config (containerd does). A container the store does not know (created
while the proxy was down, or before a rebuild finished) is looked up in the backend on first use
(:meth:`MetadataStore.container`).
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi

log = logging.getLogger("koordinator.runtime_proxy.store")


@dataclass
class PodInfo:
    """A sandbox as hook requests need it."""

    sandbox_id: str
    meta: hookapi.PodSandboxMetadata
    runtime_handler: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    cgroup_parent: str = ""


@dataclass
class ContainerInfo:
    """A container as hook requests need it; ``resources`` None when unknown (rebuilt after a restart)."""

    container_id: str
    sandbox_id: str
    meta: hookapi.ContainerMetadata
    annotations: dict[str, str] = field(default_factory=dict)
    resources: hookapi.LinuxContainerResources | None = None
    envs: dict[str, str] = field(default_factory=dict)


def pod_info(sandbox_id: str, config: cri.PodSandboxConfig, runtime_handler: str = "") -> PodInfo:
    """The :class:`PodInfo` of a sandbox created from ``config``."""
    md = config.metadata
    return PodInfo(sandbox_id=sandbox_id,
                   meta=hookapi.PodSandboxMetadata(name=md.name, uid=md.uid, namespace=md.namespace,
                                                   attempt=md.attempt),
                   runtime_handler=runtime_handler, labels=dict(config.labels),
                   annotations=dict(config.annotations), cgroup_parent=config.linux.cgroup_parent)


class MetadataStore:
    """Pods by sandbox ID and containers by container ID; thread-safe (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pods: dict[str, PodInfo] = {}
        self._containers: dict[str, ContainerInfo] = {}

    def __len__(self) -> int:
        with self._lock:
            return len(self._pods) + len(self._containers)

    def put_pod(self, info: PodInfo) -> None:
        with self._lock:
            self._pods[info.sandbox_id] = info

    def put_container(self, info: ContainerInfo) -> None:
        with self._lock:
            self._containers[info.container_id] = info

    def pod(self, sandbox_id: str) -> PodInfo | None:
        with self._lock:
            return self._pods.get(sandbox_id)

    def delete_pod(self, sandbox_id: str) -> None:
        """Forget a sandbox and whatever containers of it are still known."""
        with self._lock:
            self._pods.pop(sandbox_id, None)
            for cid in [c for c, info in self._containers.items() if info.sandbox_id == sandbox_id]:
                del self._containers[cid]

    def delete_container(self, container_id: str) -> None:
        with self._lock:
            self._containers.pop(container_id, None)

    def container(self, container_id: str, backend: Any = None) -> tuple[ContainerInfo, PodInfo] | None:
        """The container and its pod; looked up in ``backend`` (a RuntimeService stub) when unknown."""
        with self._lock:
            info = self._containers.get(container_id)
            pod = self._pods.get(info.sandbox_id) if info is not None else None
        if info is not None and pod is not None:
            return info, pod
        if backend is None:
            return None
        try:
            listed = backend.ListContainers(cri.ListContainersRequest(
                filter=cri.ContainerFilter(id=container_id)), timeout=10).containers
        except Exception as err:  # noqa: BLE001 - the call goes on without hooks
            log.info("container %s unknown to the backend: %s", container_id, err)
            return None
        if not listed:
            return None
        container = listed[0]
        pod = self.pod(container.pod_sandbox_id) or self._load_pod(backend, container.pod_sandbox_id)
        if pod is None:
            return None
        info = _container_info(container)
        self.put_container(info)
        return info, pod

    def _load_pod(self, backend: Any, sandbox_id: str) -> PodInfo | None:
        try:
            items = backend.ListPodSandbox(cri.ListPodSandboxRequest(
                filter=cri.PodSandboxFilter(id=sandbox_id)), timeout=10).items
        except Exception as err:  # noqa: BLE001
            log.info("sandbox %s unknown to the backend: %s", sandbox_id, err)
            return None
        if not items:
            return None
        pod = _pod_info(items[0], _cgroup_parent(backend, sandbox_id))
        self.put_pod(pod)
        return pod

    def rebuild(self, backend: Any, timeout: float = 30.0) -> tuple[int, int]:
        """Fill the store from the backend's sandboxes and containers; ``(pods, containers)`` added.

        Entries already known are kept (they carry more than a listing gives). Raises the backend's
        error if it cannot list.
        """
        sandboxes = backend.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=timeout).items
        containers = backend.ListContainers(cri.ListContainersRequest(), timeout=timeout).containers
        pods = containers_added = 0
        for sandbox in sandboxes:
            if self.pod(sandbox.id) is None:
                self.put_pod(_pod_info(sandbox, _cgroup_parent(backend, sandbox.id)))
                pods += 1
        with self._lock:
            for container in containers:
                if container.pod_sandbox_id in self._pods and container.id not in self._containers:
                    self._containers[container.id] = _container_info(container)
                    containers_added += 1
        return pods, containers_added


def _pod_info(sandbox: cri.PodSandbox, cgroup_parent: str) -> PodInfo:
    md = sandbox.metadata
    return PodInfo(sandbox_id=sandbox.id,
                   meta=hookapi.PodSandboxMetadata(name=md.name, uid=md.uid, namespace=md.namespace,
                                                   attempt=md.attempt),
                   runtime_handler=sandbox.runtime_handler, labels=dict(sandbox.labels),
                   annotations=dict(sandbox.annotations), cgroup_parent=cgroup_parent)


def _container_info(container: cri.Container) -> ContainerInfo:
    return ContainerInfo(container_id=container.id, sandbox_id=container.pod_sandbox_id,
                         meta=hookapi.ContainerMetadata(name=container.metadata.name,
                                                        attempt=container.metadata.attempt, id=container.id),
                         annotations=dict(container.annotations))


def _cgroup_parent(backend: Any, sandbox_id: str) -> str:
    """The sandbox's cgroup parent from the runtime's verbose status (containerd: ``info.config``); "" if unknown."""
    try:
        status = backend.PodSandboxStatus(cri.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id, verbose=True),
                                          timeout=10)
        info = json.loads(status.info.get("info", "{}"))
    except Exception as err:  # noqa: BLE001 - a pod without its cgroup parent is still a pod
        log.debug("no verbose status for sandbox %s: %s", sandbox_id, err)
        return ""
    linux = ((info.get("config") or {}).get("linux") or {}) if isinstance(info, dict) else {}
    return str(linux.get("cgroup_parent") or "")
