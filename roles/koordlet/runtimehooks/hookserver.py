"""Proxy mode (reference A.8.1 mode 1): the hook plugins answering koord-runtime-proxy over gRPC.

The koordlet serves ``runtime.v1alpha1.RuntimeHookService`` on ``--runtime-hooks-addr`` (a unix socket)
and registers it for the proxy by writing ``koordlet.json`` into ``--runtime-hooks-config-path``::

    {"remote-endpoint": <--runtime-hooks-host-endpoint>, "failure-policy": <--runtime-hooks-failure-policy>,
     "runtime-hooks": [the stages the enabled plugins serve, minus --runtime-hooks-disable-stages]}

The same plugins as reconciler mode answer (:class:`~.reconciler.Reconciler` supplies them and the
node facts), with requests built from the CRI's instead of from pod objects:

- ``PreRunPodSandbox``: the pod's cgroup values. The kubelet creates the pod cgroup before it asks
  for the sandbox, so the koordlet writes them there at once (through the resource executor, like
  NRI mode), and answers the cgroup parent unchanged;
- ``PreCreateContainer`` / ``PreUpdateContainerResources``: the container's resources, answered whole
  (the request's, with what the plugins set on top: the proxy's merge takes an empty cpuset or an
  ``oom_score_adj`` of 0 literally) and the environment when a plugin adds to it. Extended values a
  CRI request cannot carry (``cpu.bvt_warp_ns``) are left to the reconciler's next round.

A plugin that cannot handle a pod (a malformed annotation) is skipped and logged with
``--runtime-hooks-plugin-failure-policy`` Ignore, or fails the call (``INVALID_ARGUMENT``, naming the
plugin and the pod) with Fail. The hooks that no plugin serves answer empty.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

import grpc

from koordinator.apis.extension import KUBE_BEST_EFFORT, KUBE_BURSTABLE, KUBE_GUARANTEED
from koordinator.apis.runtimehooks import (FAIL, HOOK_TYPES, IGNORE, KEY_FAILURE_POLICY, KEY_REMOTE_ENDPOINT,
                                           KEY_RUNTIME_HOOKS)
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2_grpc as hookgrpc
from koordinator.runtime.grpcserver import serve_unix, stop_server
from koordinator_roles.koordlet.runtimehooks.hooks import (PRE_CREATE_CONTAINER, PRE_RUN_POD_SANDBOX,
                                                          PRE_UPDATE_CONTAINER_RESOURCES, HookPlugin)
from koordinator_roles.koordlet.runtimehooks.protocol import (ContainerRequest, HookError, HookResponse, PodRequest,
                                                             Resources)
from koordinator_roles.koordlet.runtimehooks.reconciler import cgroup_updates

log = logging.getLogger("koordinator.koordlet.runtimehooks.server")

#: Every stage, in Koordinator's order (the order of the registration file's list).
STAGES = HOOK_TYPES
REGISTRATION_FILE = "koordlet.json"
OWNER = "RuntimeHooks"


def kube_qos_of(cgroup_parent: str) -> str:
    """The Kubernetes QoS class the kubelet's cgroup parent names (both drivers)."""
    if "besteffort" in cgroup_parent:
        return KUBE_BEST_EFFORT
    if "burstable" in cgroup_parent:
        return KUBE_BURSTABLE
    return KUBE_GUARANTEED


def cgroup_dir(cgroup_parent: str) -> str:
    """A CRI cgroup parent as a dir relative to the cgroup root.

    cgroupfs: ``/kubepods/burstable/pod<uid>`` → ``kubepods/burstable/pod<uid>``; systemd: the slice
    name expanded as systemd nests slices, ``kubepods-burstable-pod<uid>.slice`` →
    ``kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod<uid>.slice``.
    """
    if cgroup_parent.endswith(".slice") and "/" not in cgroup_parent:
        parts = cgroup_parent[:-len(".slice")].split("-")
        return "/".join("-".join(parts[:i + 1]) + ".slice" for i in range(len(parts)))
    return cgroup_parent.strip("/")


def stages_served(plugins: list[HookPlugin], disabled: list[str]) -> list[str]:
    """The stages at least one plugin serves, minus ``disabled``, in Koordinator's order."""
    served = {stage for p in plugins for stage in p.stages}
    return [s for s in STAGES if s in served and s not in disabled]


def registration(endpoint: str, failure_policy: str, stages: list[str]) -> dict[str, Any]:
    """The ``koordlet.json`` document."""
    return {KEY_REMOTE_ENDPOINT: endpoint, KEY_FAILURE_POLICY: failure_policy, KEY_RUNTIME_HOOKS: stages}


def _resources(res: hookapi.LinuxContainerResources) -> Resources:
    """The plugin-side view of a request's resources."""
    return Resources(cpu_shares=res.cpu_shares, cfs_quota=res.cpu_quota, cpuset=res.cpuset_cpus,
                     memory_limit=res.memory_limit_in_bytes)


def _apply(res: hookapi.LinuxContainerResources, answer: Resources) -> None:
    if answer.cpu_shares is not None:
        res.cpu_shares = answer.cpu_shares
    if answer.cfs_quota is not None:
        res.cpu_quota = answer.cfs_quota
    if answer.cpuset is not None:
        res.cpuset_cpus = answer.cpuset
    if answer.memory_limit is not None:
        res.memory_limit_in_bytes = answer.memory_limit


class HookServer(hookgrpc.RuntimeHookServiceServicer):
    """The gRPC hook server (a Runtime component; see the module docstring).

    ``reconciler`` supplies the plugins, the node facts and the resource executor; ``addr`` is the socket
    to listen on, ``config_dir`` where ``koordlet.json`` goes, naming ``host_endpoint`` (the socket as
    the proxy on the host sees it).
    """

    def __init__(self, reconciler: Any, *, addr: str, config_dir: str, host_endpoint: str,
                 failure_policy: str = IGNORE, plugin_failure_policy: str = IGNORE,
                 disabled_stages: list[str] | None = None) -> None:
        self.reconciler = reconciler
        self.addr = addr
        self.config_dir = config_dir
        self.host_endpoint = host_endpoint or addr
        self.failure_policy = failure_policy
        self.plugin_failure_policy = plugin_failure_policy
        self.disabled_stages = list(disabled_stages or [])
        self._server: grpc.Server | None = None

    # -- answering -------------------------------------------------------------------------------

    def _run(self, stage: str, hook: Any, request: Any, context: grpc.ServicerContext) -> list[HookResponse]:
        """Every usable plugin's answer to ``hook(request, facts)``, by plugin name; aborts with policy Fail."""
        if stage in self.disabled_stages:
            return []
        facts = self.reconciler.facts([m.pod for m in self.reconciler.states.pods()])
        answers = []
        for plugin in self.reconciler.usable_plugins():
            if stage not in plugin.stages:
                continue
            try:
                answer = hook(plugin)(request, facts)
            except HookError as err:
                if self.plugin_failure_policy == FAIL:
                    context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"runtime hook {plugin.name}: {err}")
                log.warning("runtime hook %s skipped at %s: %s", plugin.name, stage, err)
                continue
            if answer is not None:
                answers.append((plugin.name, answer))
        return answers

    def PreRunPodSandboxHook(self, request: hookapi.PodSandboxHookRequest,
                             context: grpc.ServicerContext) -> hookapi.PodSandboxHookResponse:
        md = request.pod_meta
        req = PodRequest(uid=md.uid, namespace=md.namespace, name=md.name, labels=dict(request.labels),
                         annotations=dict(request.annotations), cgroup_parent=cgroup_dir(request.cgroup_parent),
                         kube_qos=kube_qos_of(request.cgroup_parent), resources=_resources(request.resources))
        answers = self._run(PRE_RUN_POD_SANDBOX, lambda p: p.pod_hook, req, context)
        response = hookapi.PodSandboxHookResponse()
        merged = HookResponse()
        for _, answer in answers:
            merged = merged.merged(answer)
        if not merged.resources.is_empty():
            _apply(response.resources, merged.resources)
            self._write_pod_cgroup(req, answers)
        if merged.cgroup_parent:
            response.cgroup_parent = merged.cgroup_parent
        return response

    def _write_pod_cgroup(self, req: PodRequest, answers: list[tuple[str, HookResponse]]) -> None:
        """The pod-level values into the pod cgroup the kubelet already made (skipped when it does not exist)."""
        executor = self.reconciler.executor
        if not req.cgroup_parent or not os.path.isdir(os.path.dirname(executor.layout.path("cpu", req.cgroup_parent,
                                                                                            "x"))):
            return
        updates = cgroup_updates(req.cgroup_parent, [(name, a.resources) for name, a in answers], f"pod {req.key}")
        if updates:
            executor.update_batch(updates)

    def _container(self, stage: str, request: hookapi.ContainerResourceHookRequest,
                   context: grpc.ServicerContext) -> hookapi.ContainerResourceHookResponse:
        md, cmd = request.pod_meta, request.container_mata
        pod = PodRequest(uid=md.uid, namespace=md.namespace, name=md.name, labels=dict(request.pod_labels),
                         annotations=dict(request.pod_annotations),
                         cgroup_parent=cgroup_dir(request.pod_cgroup_parent),
                         kube_qos=kube_qos_of(request.pod_cgroup_parent),
                         resources=_resources(request.pod_resources))
        req = ContainerRequest(pod=pod, name=cmd.name, container_id=cmd.id,
                               cgroup_dir=f"{pod.cgroup_parent}/{cmd.id}" if cmd.id else "",
                               resources=_resources(request.container_resources),
                               annotations=dict(request.container_annotations), envs=dict(request.container_envs))
        answers = self._run(stage, lambda p: p.container_hook, req, context)
        response = hookapi.ContainerResourceHookResponse()
        if not answers:
            return response
        response.container_resources.CopyFrom(request.container_resources)
        envs: dict[str, str] = {}
        for _, answer in answers:
            _apply(response.container_resources, answer.resources)
            envs.update(answer.envs)
            if answer.cgroup_parent:
                response.pod_cgroup_parent = answer.cgroup_parent
        if envs:
            response.container_envs.update({**request.container_envs, **envs})
        return response

    def PreCreateContainerHook(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._container(PRE_CREATE_CONTAINER, request, context)

    def PreUpdateContainerResourcesHook(self, request: Any, context: grpc.ServicerContext) -> Any:
        return self._container(PRE_UPDATE_CONTAINER_RESOURCES, request, context)

    def PreStartContainerHook(self, request: Any, context: grpc.ServicerContext) -> Any:
        return hookapi.ContainerResourceHookResponse()

    def PostStartContainerHook(self, request: Any, context: grpc.ServicerContext) -> Any:
        return hookapi.ContainerResourceHookResponse()

    def PostStopContainerHook(self, request: Any, context: grpc.ServicerContext) -> Any:
        return hookapi.ContainerResourceHookResponse()

    def PostStopPodSandboxHook(self, request: Any, context: grpc.ServicerContext) -> Any:
        return hookapi.PodSandboxHookResponse()

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Listen on ``addr`` and write the registration (OSError naming the path when either fails)."""
        self._server = serve_unix(self.addr, "--runtime-hooks-addr",
                                  lambda server: hookgrpc.add_RuntimeHookServiceServicer_to_server(self, server),
                                  max_workers=8, name="runtime-hooks")
        self._register()

    def _register(self) -> None:
        stages = stages_served(self.reconciler.plugins, self.disabled_stages)
        doc = registration(self.host_endpoint, self.failure_policy, stages)
        path = os.path.join(self.config_dir, REGISTRATION_FILE)
        try:
            os.makedirs(self.config_dir, mode=0o755, exist_ok=True)
            tmp = f"{path}.tmp"      # not *json: the proxy never reads a half-written file
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(doc, f, indent=2)
                f.write("\n")
            os.replace(tmp, path)
        except OSError as err:
            raise OSError(f"--runtime-hooks-config-path {self.config_dir}: cannot write {REGISTRATION_FILE}: "
                          f"{err.strerror or err}") from None
        log.info("runtime hook server on %s, registered in %s: failure-policy=%s hooks=%s", self.addr, path,
                 self.failure_policy, ",".join(stages) or "none")

    def stop(self, timeout: float) -> bool:
        server, self._server = self._server, None
        stop_server(server, self.addr, timeout)
        return True
