"""The simulated kubelet's container runtime calling runtime hooks, as koord-runtime-proxy does on a real node.

When a node has a hook-server registration directory (``--hook-server-config-dir``; ``koordinator local``
passes each koordlet's ``hookserver.d``), the simulator, before it starts a pod, asks every registered hook
server that serves the stage:

* ``PreRunPodSandbox`` with the pod's metadata, labels, annotations, cgroup parent (as the kubelet names
  it) and pod-level resources;
* ``PreCreateContainer`` for each container, with the container's resources (from its spec, as the
  kubelet computes them) and environment (its spec's literal ``env``);

and applies the answers the way a runtime would: resources merged by the proxy's rule (fields > 0 win,
a cpu quota of -1 means unlimited, the cpuset always taken) into the cgroup the simulator creates, the
environment recorded in ``<node tree>/containers/<container id>/environ`` (``KEY=VALUE`` entries
separated by NUL bytes, as ``/proc/<pid>/environ``: simulated containers have no processes).

Registration files are read from the directory at each pod start (the format is Koordinator's, parsed
by :mod:`koordinator.apis.runtimehooks`). A simulated pod always starts: a hook server that is down or
fails is logged once (until it answers again) and the call goes on unchanged, whatever its failure policy.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

import grpc

from koordinator.apis.runtimehooks import HookServer, RegistrationError, parse_registration, registration_files
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi
from koordinator.grpcapi.runtime.resources import merge_response
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2_grpc as hookgrpc

log = logging.getLogger("koordinator.sim.hooks")

PRE_RUN_POD_SANDBOX = "PreRunPodSandbox"
PRE_CREATE_CONTAINER = "PreCreateContainer"
#: How long one hook call may take (the proxy's CRI calls have the kubelet's deadline; ours starts pods
#: from the simulator's loop, so it is short).
DEFAULT_TIMEOUT = 2.0


@dataclass
class Applied:
    """What the hooks left for one sandbox or container: its resources (the hook API's message),
    environment and cgroup parent."""

    resources: Any
    envs: dict[str, str] = field(default_factory=dict)
    cgroup_parent: str = ""


class HookCaller:
    """Calls the hook servers registered in one node's ``directory`` (see the module docstring).

    Thread-safe; :meth:`close` closes the gRPC channels.
    """

    def __init__(self, directory: str, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.directory = directory
        self.timeout = timeout
        self._lock = threading.Lock()
        self._channels: dict[str, tuple[grpc.Channel, hookgrpc.RuntimeHookServiceStub]] = {}
        self._failing: dict[tuple[str, str], str] = {}   # (server, hook) -> its last failure (logged once)
        self._bad_files: dict[str, str] = {}             # file -> the problem logged

    def servers(self, hook: str) -> list[HookServer]:
        """The hook servers registered for ``hook`` now, by file name; unusable files logged once."""
        try:
            names = registration_files(self.directory)
        except FileNotFoundError:
            return []
        except OSError as err:
            self._log_file(self.directory, f"cannot list hook server registrations: {err}")
            return []
        out = []
        for name in names:
            path = f"{self.directory}/{name}"
            try:
                with open(path, encoding="utf-8") as f:
                    server = parse_registration(name, f.read())
            except (OSError, UnicodeDecodeError) as err:
                self._log_file(path, f"cannot be read: {err}")
                continue
            except RegistrationError as err:
                self._log_file(path, f"invalid hook server registration {self.directory}/{err}")
                continue
            self._bad_files.pop(path, None)
            if hook in server.hooks:
                out.append(server)
        return out

    def _log_file(self, path: str, problem: str) -> None:
        with self._lock:
            if self._bad_files.get(path) == problem:
                return
            self._bad_files[path] = problem
        log.warning("%s", problem if problem.startswith("invalid") else f"{path}: {problem}")

    def _stub(self, endpoint: str) -> hookgrpc.RuntimeHookServiceStub:
        with self._lock:
            entry = self._channels.get(endpoint)
            if entry is None:
                channel = grpc.insecure_channel(f"unix://{endpoint}")
                entry = self._channels[endpoint] = (channel, hookgrpc.RuntimeHookServiceStub(channel))
            return entry[1]

    def _call(self, server: HookServer, hook: str, request: Any, what: str) -> Any | None:
        """``server``'s answer, None when it failed (logged once per server and hook until it answers)."""
        key = (server.name, hook)
        try:
            answer = getattr(self._stub(server.endpoint), f"{hook}Hook")(request, timeout=self.timeout)
        except grpc.RpcError as err:
            problem = f"{err.code().name}: {err.details() or ''}"
            with self._lock:
                first = key not in self._failing
                self._failing[key] = problem
                # A fresh channel next time: a failed one backs off its reconnects for up to two minutes,
                # and a restarted koordlet would be skipped meanwhile.
                dropped = self._channels.pop(server.endpoint, None)
            if dropped is not None:
                dropped[0].close()
            if first:
                log.warning("hook server %s (%s) failed %s for %s; the simulated runtime goes on without it "
                            "(failure policy %s): %s", server.name, server.endpoint, hook, what,
                            server.failure_policy, problem)
            return None
        with self._lock:
            if self._failing.pop(key, None) is not None:
                log.info("hook server %s answers %s again", server.name, hook)
        return answer

    def pre_run_pod_sandbox(self, request: Any, what: str) -> Applied:
        """The sandbox's resources and cgroup parent after every hook server's ``PreRunPodSandbox``."""
        for server in self.servers(PRE_RUN_POD_SANDBOX):
            answer = self._call(server, PRE_RUN_POD_SANDBOX, request, what)
            if answer is None:
                continue
            if answer.HasField("resources"):
                request.resources.CopyFrom(merge_response(request.resources, answer.resources))
            if answer.cgroup_parent:
                request.cgroup_parent = answer.cgroup_parent
            for key, value in answer.labels.items():
                request.labels[key] = value
            for key, value in answer.annotations.items():
                request.annotations[key] = value
        return Applied(resources=request.resources, cgroup_parent=request.cgroup_parent)

    def pre_create_container(self, request: Any, what: str) -> Applied:
        """The container's resources and environment after every hook server's ``PreCreateContainer``."""
        for server in self.servers(PRE_CREATE_CONTAINER):
            answer = self._call(server, PRE_CREATE_CONTAINER, request, what)
            if answer is None:
                continue
            if answer.HasField("container_resources"):
                request.container_resources.CopyFrom(merge_response(request.container_resources,
                                                                     answer.container_resources))
            if answer.container_envs:
                # A hook server answers the whole environment (the request's plus its own).
                request.container_envs.clear()
                request.container_envs.update(answer.container_envs)
            for key, value in answer.container_annotations.items():
                request.container_annotations[key] = value
            if answer.pod_cgroup_parent:
                request.pod_cgroup_parent = answer.pod_cgroup_parent
        return Applied(resources=request.container_resources, envs=dict(request.container_envs),
                       cgroup_parent=request.pod_cgroup_parent)

    def close(self) -> None:
        """Close every channel."""
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
        for channel, _ in channels:
            channel.close()


def format_environ(envs: dict[str, str]) -> bytes:
    """``KEY=VALUE`` entries each ended by a NUL byte (``/proc/<pid>/environ``), in the given order."""
    return b"".join(f"{k}={v}".encode() + b"\0" for k, v in envs.items())


def parse_environ(data: bytes) -> dict[str, str]:
    """The inverse of :func:`format_environ`."""
    out = {}
    for entry in data.split(b"\0"):
        if entry:
            key, _, value = entry.decode().partition("=")
            out[key] = value
    return out
