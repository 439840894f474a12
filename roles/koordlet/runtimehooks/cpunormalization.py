"""CPUNormalization (gate ``CPUNormalization``, off; reference A.8.2): scale LS CFS quotas by the node's ratio.

On a node whose CPUs are faster than the cluster's reference (``node.koordinator.sh/cpu-normalization-ratio``
> 1, set by the manager), a CPU limit buys more work, so the CFS quota of LS pods (and of pods without
a QoS label that the scheduler did not pin) is divided by the ratio: quota' = ceil(quota / ratio).

The quota scaled is the one the kubelet gives the cgroup from the pod spec (the request's resources),
never the one on disk: the reconciler runs every interval and must not divide twice.
"""

from __future__ import annotations

import math

from koordinator.apis.extension import LABEL_POD_QOS, QOS_LS, QOS_NONE
from koordinator_roles.koordlet.runtimehooks.facts import NodeFacts, resource_status_cpuset
from koordinator_roles.koordlet.runtimehooks.hooks import (PRE_CREATE_CONTAINER, PRE_RUN_POD_SANDBOX,
                                                          PRE_UPDATE_CONTAINER_RESOURCES, HookPlugin)
from koordinator_roles.koordlet.runtimehooks.protocol import (ContainerRequest, HookResponse, PodRequest,
                                                             Resources)


def normalized_quota(quota: int | None, ratio: float) -> int | None:
    """ceil(quota / ratio) for a limited quota and a ratio > 1, the quota itself for another ratio (so a
    removed ratio restores the kubelet's value); None for an unlimited or unknown quota."""
    if quota is None or quota <= 0:
        return None
    return math.ceil(quota / ratio) if ratio > 1 else quota


def _applies(req: PodRequest) -> bool:
    qos = req.labels.get(LABEL_POD_QOS, QOS_NONE)
    if qos == QOS_LS:
        return True
    return qos == QOS_NONE and not resource_status_cpuset(req.key, req.annotations)


class CPUNormalization(HookPlugin):
    """The CPUNormalization plugin (see the module docstring)."""

    name = "CPUNormalization"
    gate = "CPUNormalization"
    stages = (PRE_RUN_POD_SANDBOX, PRE_CREATE_CONTAINER, PRE_UPDATE_CONTAINER_RESOURCES)

    def pod_hook(self, req: PodRequest, facts: NodeFacts) -> HookResponse | None:
        if not _applies(req):
            return None
        quota = normalized_quota(req.resources.cfs_quota, facts.cpu_normalization_ratio)
        return None if quota is None else HookResponse(Resources(cfs_quota=quota))

    def container_hook(self, req: ContainerRequest, facts: NodeFacts) -> HookResponse | None:
        if not _applies(req.pod):
            return None
        quota = normalized_quota(req.resources.cfs_quota, facts.cpu_normalization_ratio)
        return None if quota is None else HookResponse(Resources(cfs_quota=quota))
