"""GPUEnvInject (gate ``GPUEnvInject``, off as in Koordinator; reference A.8.2 "GPU env").

At ``PreCreateContainer`` a container of a pod that DeviceShare gave GPUs (annotation
``scheduling.koordinator.sh/device-allocated``, list ``gpu``) gets ``NVIDIA_VISIBLE_DEVICES`` = the
comma-joined minors, in the annotation's order, so the NVIDIA container runtime exposes exactly those
devices. Pods without GPUs are left alone.

Only a new container can take an environment variable, so the plugin serves the proxy/NRI stage and
not the reconciler (``reconcile`` False). A malformed annotation raises :class:`~.protocol.HookError`
naming it: the hook server skips the plugin for that pod (plugin failure policy Ignore) or fails the
call (Fail).

Not in this build: the HAMi-core variables (``CUDA_DEVICE_MEMORY_LIMIT``, ``CUDA_DEVICE_SM_LIMIT``,
``LD_PRELOAD``) and their mounts: the hook protocol here carries no mounts.
"""

from __future__ import annotations

from koordinator.apis.device import (ANNOTATION_DEVICE_ALLOCATED, ENV_NVIDIA_VISIBLE_DEVICES, TYPE_GPU,
                                     DeviceAllocationError, parse_device_allocated)
from koordinator_roles.koordlet.runtimehooks.facts import NodeFacts
from koordinator_roles.koordlet.runtimehooks.hooks import PRE_CREATE_CONTAINER, HookPlugin
from koordinator_roles.koordlet.runtimehooks.protocol import ContainerRequest, HookError, HookResponse, PodRequest

REASON = "InvalidDeviceAllocated"


def visible_devices(req: PodRequest) -> str | None:
    """``NVIDIA_VISIBLE_DEVICES`` for the pod's containers: its GPU minors comma-joined; None without GPUs."""
    try:
        allocations = parse_device_allocated(req.annotations.get(ANNOTATION_DEVICE_ALLOCATED))
    except DeviceAllocationError as err:
        raise HookError(f"pod {req.key}: {err}", reason=REASON) from None
    gpus = allocations.get(TYPE_GPU) or []
    if not gpus:
        return None
    return ",".join(str(gpu.minor) for gpu in gpus)


class GPUEnvInject(HookPlugin):
    """The GPUEnvInject plugin (see the module docstring)."""

    name = "GPUEnvInject"
    gate = "GPUEnvInject"
    stages = (PRE_CREATE_CONTAINER,)
    reconcile = False

    def container_hook(self, req: ContainerRequest, facts: NodeFacts) -> HookResponse | None:
        devices = visible_devices(req.pod)
        if devices is None:
            return None
        return HookResponse(envs={ENV_NVIDIA_VISIBLE_DEVICES: devices})
