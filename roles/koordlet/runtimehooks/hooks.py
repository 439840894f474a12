"""The hook plugin contract (reference A.8.1): pure request → response functions behind a feature gate.

A plugin subclasses :class:`HookPlugin`, sets ``name``, ``gate`` (Koordinator's runtime-hook gate) and
``stages`` (the proxy/NRI stages it serves, for the hook server's registration file), and implements
any of

- :meth:`HookPlugin.pod_hook` (stage PreRunPodSandbox, reconciler pod level),
- :meth:`HookPlugin.container_hook` (PreCreateContainer / PreUpdateContainerResources, container level),
- :meth:`HookPlugin.kube_qos_hook` (reconciler Kube-QoS level: ``kubepods``, burstable, besteffort dirs).

Each gets the request and the round's :class:`~.facts.NodeFacts` and returns what the cgroups must
hold, ``None`` for "nothing to do"; it may raise :class:`~.protocol.HookError` for a pod it cannot
handle. Plugins never write: the reconciler (or the hook server) applies the answers.

:meth:`HookPlugin.system_problem` says why the node cannot honour the plugin at all (e.g. no
``cpu.bvt_warp_ns``); the reconciler then skips it with one log line.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from koordinator_roles.koordlet.runtimehooks.facts import NodeFacts
from koordinator_roles.koordlet.runtimehooks.protocol import ContainerRequest, HookResponse, PodRequest, Resources

PRE_RUN_POD_SANDBOX = "PreRunPodSandbox"
POST_STOP_POD_SANDBOX = "PostStopPodSandbox"
PRE_CREATE_CONTAINER = "PreCreateContainer"
PRE_START_CONTAINER = "PreStartContainer"
POST_START_CONTAINER = "PostStartContainer"
PRE_UPDATE_CONTAINER_RESOURCES = "PreUpdateContainerResources"
POST_STOP_CONTAINER = "PostStopContainer"
PRE_REMOVE_RUN_POD_SANDBOX = "PreRemoveRunPodSandbox"


@dataclass(frozen=True)
class HostContext:
    """What :meth:`HookPlugin.system_problem` and :meth:`HookPlugin.prepare` may look at: the resource
    executor (cgroup paths and writes) and the host's ``/proc`` root (sysctls)."""

    executor: Any
    proc_root: str = "/proc"


class HookPlugin:
    """One runtime hook plugin (see the module docstring)."""

    name: str = ""
    gate: str = ""
    stages: tuple[str, ...] = ()
    #: False: the plugin only answers the proxy/NRI stages (e.g. an environment, which only a new
    #: container takes) and the reconciler leaves it out.
    reconcile: bool = True

    def pod_hook(self, req: PodRequest, facts: NodeFacts) -> HookResponse | None:
        """What the pod's cgroup must hold."""
        return None

    def container_hook(self, req: ContainerRequest, facts: NodeFacts) -> HookResponse | None:
        """What the container's cgroup must hold."""
        return None

    def kube_qos_hook(self, kube_qos: str, facts: NodeFacts) -> Resources | None:
        """What the Kube-QoS dir of ``kube_qos`` (Guaranteed, Burstable, BestEffort) must hold."""
        return None

    def host_app_hook(self, app: Mapping[str, Any], facts: NodeFacts) -> Resources | None:
        """What a NodeSLO host application's cgroup must hold."""
        return None

    def dangling_pod_hook(self, kube_qos: str, facts: NodeFacts) -> Resources | None:
        """What a pod cgroup left on disk by a terminated or deleted pod must hold (clean-up)."""
        return None

    def system_problem(self, host: HostContext) -> str | None:
        """Why this node cannot apply the plugin (checked every round), None when it can."""
        return None

    def prepare(self, host: HostContext, facts: NodeFacts) -> None:
        """Node-wide switches the plugin needs before its cgroup values mean anything (e.g. sysctls)."""
