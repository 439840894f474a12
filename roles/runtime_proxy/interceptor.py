"""The hooked CRI calls: hook requests built from the CRI's, answers merged back, metadata kept.

==========================  ==========================================================================
CRI call                    what happens around the backend call
==========================  ==========================================================================
RunPodSandbox               PreRunPodSandbox: labels and annotations overlaid, cgroup parent replaced
                            when the answer has one; the pod is remembered under the returned ID
StopPodSandbox              PostStopPodSandbox after it (answer unused); the pod is forgotten
CreateContainer             PreCreateContainer: annotations overlaid, resources merged (hook-response
                            rule, :mod:`.resources`), the pod's cgroup parent replaced when given, the
                            environment replaced when the answer has one; the container is remembered
StartContainer              PreStartContainer before, PostStartContainer after (answers unused)
StopContainer               PostStopContainer after it (answer unused); the container is forgotten
UpdateContainerResources    the request's resources merged into the remembered ones (update-request
                            rule), then PreUpdateContainerResources as for CreateContainer; the request
                            carries the merged resources and annotations
RemoveContainer /           forwarded; what is remembered of the container or pod is forgotten
RemovePodSandbox
==========================  ==========================================================================

A pod labelled ``--runtime-hook-server-key=--runtime-hook-server-val`` (the koordlet's own) never
goes through hook servers, so a hook server with policy Fail can always be (re)started. A call the
proxy cannot build a hook request for (a container whose pod the backend does not know) goes
through unchanged, with a log line, as in Koordinator.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi
from koordinator_roles.runtime_proxy.dispatcher import Dispatcher
from koordinator.grpcapi.runtime.resources import merge_response, merge_update, to_cri, to_hook
from koordinator_roles.runtime_proxy.store import ContainerInfo, MetadataStore, PodInfo, pod_info

log = logging.getLogger("koordinator.runtime_proxy")

#: CRI method -> the Interceptor method handling it.
HOOKED_METHODS = {
    "RunPodSandbox": "run_pod_sandbox",
    "StopPodSandbox": "stop_pod_sandbox",
    "RemovePodSandbox": "remove_pod_sandbox",
    "CreateContainer": "create_container",
    "StartContainer": "start_container",
    "StopContainer": "stop_container",
    "RemoveContainer": "remove_container",
    "UpdateContainerResources": "update_container_resources",
}


def _replace_map(target: Any, values: Any) -> None:
    target.clear()
    target.update(values)


class Interceptor:
    """Handles the hooked CRI calls against ``backend`` (a ``RuntimeServiceStub``); see the module docstring.

    Every method takes the CRI request and the call's ``timeout`` (seconds left, None for none) and
    returns the backend's response; backend errors (``grpc.RpcError``) and
    :class:`~.dispatcher.HookFailed` propagate to the server, which answers with their status.
    """

    def __init__(self, backend: Any, store: MetadataStore, dispatcher: Dispatcher, *,
                 skip_label: tuple[str, str]) -> None:
        self.backend = backend
        self.store = store
        self.dispatcher = dispatcher
        self.skip_label = skip_label

    def _skips(self, labels: Any) -> bool:
        key, value = self.skip_label
        return labels.get(key) == value

    def handler(self, method: str) -> Callable[[Any, float | None], Any]:
        return getattr(self, HOOKED_METHODS[method])

    # -- pods ------------------------------------------------------------------------------------

    def run_pod_sandbox(self, request: cri.RunPodSandboxRequest, timeout: float | None) -> Any:
        config = request.config
        servers = [] if self._skips(config.labels) else self.dispatcher.servers_for("PreRunPodSandbox")
        if servers:
            md = config.metadata
            hook_request = hookapi.PodSandboxHookRequest(
                pod_meta=hookapi.PodSandboxMetadata(name=md.name, uid=md.uid, namespace=md.namespace,
                                                    attempt=md.attempt),
                runtime_handler=request.runtime_handler, labels=config.labels, annotations=config.annotations,
                cgroup_parent=config.linux.cgroup_parent)
            answered = False
            for server in servers:
                answer = self.dispatcher.call(server, "PreRunPodSandbox", hook_request, timeout)
                if answer is None:
                    continue
                answered = True
                hook_request.labels.update(answer.labels)
                hook_request.annotations.update(answer.annotations)
                if answer.cgroup_parent:
                    hook_request.cgroup_parent = answer.cgroup_parent
            if answered:
                _replace_map(config.labels, hook_request.labels)
                _replace_map(config.annotations, hook_request.annotations)
                if hook_request.cgroup_parent:
                    config.linux.cgroup_parent = hook_request.cgroup_parent
        response = self.backend.RunPodSandbox(request, timeout=timeout)
        self.store.put_pod(pod_info(response.pod_sandbox_id, config, request.runtime_handler))
        return response

    def stop_pod_sandbox(self, request: cri.StopPodSandboxRequest, timeout: float | None) -> Any:
        pod = self.store.pod(request.pod_sandbox_id)
        try:
            response = self.backend.StopPodSandbox(request, timeout=timeout)
            if pod is not None and not self._skips(pod.labels):
                hook_request = hookapi.PodSandboxHookRequest(
                    pod_meta=pod.meta, runtime_handler=pod.runtime_handler, labels=pod.labels,
                    annotations=pod.annotations, cgroup_parent=pod.cgroup_parent)
                self._post("PostStopPodSandbox", hook_request, timeout)
            return response
        finally:
            self.store.delete_pod(request.pod_sandbox_id)

    def remove_pod_sandbox(self, request: cri.RemovePodSandboxRequest, timeout: float | None) -> Any:
        response = self.backend.RemovePodSandbox(request, timeout=timeout)
        self.store.delete_pod(request.pod_sandbox_id)
        return response

    # -- containers ------------------------------------------------------------------------------

    def _container_request(self, pod: PodInfo, meta: hookapi.ContainerMetadata, annotations: Any,
                           resources: hookapi.LinuxContainerResources | None, envs: Any,
                           cgroup_parent: str) -> hookapi.ContainerResourceHookRequest:
        hook_request = hookapi.ContainerResourceHookRequest(
            pod_meta=pod.meta, container_mata=meta, container_annotations=annotations, pod_annotations=pod.annotations,
            pod_labels=pod.labels, pod_cgroup_parent=cgroup_parent, container_envs=envs)
        if resources is not None:
            hook_request.container_resources.CopyFrom(resources)
        return hook_request

    def _pre_container(self, hook: str, hook_request: hookapi.ContainerResourceHookRequest,
                       timeout: float | None) -> bool:
        """Ask every server registered for ``hook``, merging each answer into ``hook_request``; True if any answered."""
        answered = False
        for server in self.dispatcher.servers_for(hook):
            answer = self.dispatcher.call(server, hook, hook_request, timeout)
            if answer is None:
                continue
            answered = True
            hook_request.container_annotations.update(answer.container_annotations)
            if answer.HasField("container_resources"):
                hook_request.container_resources.CopyFrom(
                    merge_response(hook_request.container_resources, answer.container_resources))
            if answer.pod_cgroup_parent:
                hook_request.pod_cgroup_parent = answer.pod_cgroup_parent
            if answer.container_envs:
                _replace_map(hook_request.container_envs, answer.container_envs)
        return answered

    def create_container(self, request: cri.CreateContainerRequest, timeout: float | None) -> Any:
        config = request.config
        pod = self.store.pod(request.pod_sandbox_id)
        if pod is None and request.HasField("sandbox_config"):
            pod = pod_info(request.pod_sandbox_id, request.sandbox_config)
        envs = {kv.key: kv.value for kv in config.envs}
        meta = hookapi.ContainerMetadata(name=config.metadata.name, attempt=config.metadata.attempt)
        resources = to_hook(config.linux.resources)
        annotations = dict(config.annotations)
        if pod is None:
            log.info("CreateContainer %s: sandbox %s unknown and no sandbox config: no hooks", meta.name,
                     request.pod_sandbox_id)
        elif not self._skips(pod.labels) and self.dispatcher.servers_for("PreCreateContainer"):
            cgroup_parent = request.sandbox_config.linux.cgroup_parent or pod.cgroup_parent
            hook_request = self._container_request(pod, meta, annotations, resources, envs, cgroup_parent)
            if self._pre_container("PreCreateContainer", hook_request, timeout):
                annotations, envs = dict(hook_request.container_annotations), dict(hook_request.container_envs)
                resources = hook_request.container_resources
                _replace_map(config.annotations, annotations)
                config.linux.resources.CopyFrom(to_cri(resources))
                if hook_request.pod_cgroup_parent:
                    request.sandbox_config.linux.cgroup_parent = hook_request.pod_cgroup_parent
                _set_envs(config, envs)
        response = self.backend.CreateContainer(request, timeout=timeout)
        if pod is not None:
            if self.store.pod(pod.sandbox_id) is None:
                self.store.put_pod(pod)
            meta.id = response.container_id
            self.store.put_container(ContainerInfo(container_id=response.container_id, sandbox_id=pod.sandbox_id,
                                                   meta=meta, annotations=annotations, resources=resources,
                                                   envs=envs))
        return response

    def _known(self, container_id: str) -> tuple[ContainerInfo, PodInfo] | None:
        found = self.store.container(container_id, self.backend)
        if found is None:
            log.info("container %s unknown: no hooks", container_id)
            return None
        return None if self._skips(found[1].labels) else found

    def _stored_request(self, info: ContainerInfo, pod: PodInfo) -> hookapi.ContainerResourceHookRequest:
        return self._container_request(pod, info.meta, info.annotations, info.resources, info.envs,
                                       pod.cgroup_parent)

    def start_container(self, request: cri.StartContainerRequest, timeout: float | None) -> Any:
        pre, post = self.dispatcher.servers_for("PreStartContainer"), self.dispatcher.servers_for("PostStartContainer")
        found = self._known(request.container_id) if pre or post else None
        hook_request = self._stored_request(*found) if found is not None else None
        if hook_request is not None:
            for server in pre:
                self.dispatcher.call(server, "PreStartContainer", hook_request, timeout)
        response = self.backend.StartContainer(request, timeout=timeout)
        if hook_request is not None:
            self._post("PostStartContainer", hook_request, timeout)
        return response

    def stop_container(self, request: cri.StopContainerRequest, timeout: float | None) -> Any:
        found = self._known(request.container_id) if self.dispatcher.servers_for("PostStopContainer") else None
        try:
            response = self.backend.StopContainer(request, timeout=timeout)
            if found is not None:
                self._post("PostStopContainer", self._stored_request(*found), timeout)
            return response
        finally:
            self.store.delete_container(request.container_id)

    def remove_container(self, request: cri.RemoveContainerRequest, timeout: float | None) -> Any:
        response = self.backend.RemoveContainer(request, timeout=timeout)
        self.store.delete_container(request.container_id)
        return response

    def update_container_resources(self, request: cri.UpdateContainerResourcesRequest, timeout: float | None) -> Any:
        found = self._known(request.container_id)
        if found is None or not self.dispatcher.servers_for("PreUpdateContainerResources"):
            response = self.backend.UpdateContainerResources(request, timeout=timeout)
            if found is not None:
                self._remember_update(found[0], request)
            return response
        info, pod = found
        incoming = to_hook(request.linux)
        # After a restart the store has no resources: the request's are the best base there is.
        resources = merge_update(info.resources, incoming) if info.resources is not None else incoming
        annotations = {**info.annotations, **request.annotations}
        hook_request = self._container_request(pod, info.meta, annotations, resources, info.envs, pod.cgroup_parent)
        if self._pre_container("PreUpdateContainerResources", hook_request, timeout):
            request.linux.CopyFrom(to_cri(hook_request.container_resources))
            _replace_map(request.annotations, hook_request.container_annotations)
        else:
            request.linux.CopyFrom(to_cri(resources))
            _replace_map(request.annotations, annotations)
        response = self.backend.UpdateContainerResources(request, timeout=timeout)
        self._remember_update(info, request)
        return response

    def _remember_update(self, info: ContainerInfo, request: cri.UpdateContainerResourcesRequest) -> None:
        incoming = to_hook(request.linux)
        info.resources = merge_update(info.resources, incoming) if info.resources is not None else incoming
        info.annotations = {**info.annotations, **request.annotations}

    def _post(self, hook: str, hook_request: Any, timeout: float | None) -> None:
        """A Post hook: its answers and failures change nothing (the backend call already happened)."""
        for server in self.dispatcher.servers_for(hook):
            try:
                self.dispatcher.call(server, hook, hook_request, timeout)
            except Exception as err:  # noqa: BLE001 - HookFailed included: too late to fail the call
                log.info("post hook %s of %s failed after the call: %s", hook, server.name, err)


def _set_envs(config: cri.ContainerConfig, envs: dict[str, str]) -> None:
    """``config.envs`` as ``envs``: the kubelet's order for the names it had, new names after them."""
    order = dict.fromkeys(kv.key for kv in config.envs if kv.key in envs)
    order.update(dict.fromkeys(envs))
    del config.envs[:]
    for key in order:
        config.envs.add(key=key, value=envs[key])
