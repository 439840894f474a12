"""BatchResource (gate ``BatchResource``, on; reference A.8.2): cgroups of BE pods from their batch resources.

Best-effort pods request ``kubernetes.io/batch-cpu`` (milli-cores as an integer) and
``kubernetes.io/batch-memory`` instead of cpu/memory, so the kubelet gives their cgroups nothing;
the manager's webhook records them per container in ``node.koordinator.sh/extended-resource-spec``,
and this plugin turns that into cpu shares, CFS quota and memory limit (Koordinator's formulas):

- pod shares = MilliCPUToShares(Σ batch-cpu requests); container: its own request (none → 2);
- pod quota = MilliCPUToQuota(Σ batch-cpu limits), -1 when any container has no limit; container: its
  limit (none → -1); a quota > 0 is divided by the node's cpu-normalization ratio when that is > 1
  (ceil); -1 everywhere while CPUSuppress's ``cfsQuota`` policy owns the BE quota;
- pod memory limit = Σ batch-memory limits, -1 when any is missing; container: its limit (none → -1).

Only pods labelled QoS BE; no annotation → nothing.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from koordinator.apis import quantity
from koordinator.apis.extension import (ANNOTATION_EXTENDED_RESOURCE_SPEC, BATCH_CPU, BATCH_MEMORY, LABEL_POD_QOS,
                                        QOS_BE)
from koordinator_roles.koordlet.runtimehooks.facts import NodeFacts
from koordinator_roles.koordlet.runtimehooks.hooks import (PRE_CREATE_CONTAINER, PRE_RUN_POD_SANDBOX,
                                                          PRE_UPDATE_CONTAINER_RESOURCES, HookPlugin)
from koordinator_roles.koordlet.runtimehooks.protocol import (ContainerRequest, HookError, HookResponse, PodRequest,
                                                             Resources, milli_cpu_to_quota, milli_cpu_to_shares)


def extended_resource_spec(req: PodRequest) -> dict[str, dict[str, dict[str, int]]] | None:
    """``{container: {"requests"|"limits": {resource: value}}}`` from the pod's annotation; None when absent.

    Values are ``Quantity.Value()`` (batch-cpu: milli-cores). :class:`HookError` when malformed.
    """
    raw = req.annotations.get(ANNOTATION_EXTENDED_RESOURCE_SPEC)
    if not raw:
        return None
    what = f"pod {req.key}: annotation {ANNOTATION_EXTENDED_RESOURCE_SPEC}"
    try:
        spec = json.loads(raw)
    except ValueError:
        raise HookError(f"{what} is not JSON: {raw!r}", reason="InvalidExtendedResourceSpec") from None
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if containers is None:
        containers = {}
    if not isinstance(containers, dict):
        raise HookError(f"{what}: containers is not an object: {raw!r}", reason="InvalidExtendedResourceSpec")
    out: dict[str, dict[str, dict[str, int]]] = {}
    for name, entry in containers.items():
        parsed: dict[str, dict[str, int]] = {}
        for which in ("requests", "limits"):
            values = (entry or {}).get(which) if isinstance(entry, dict) else None
            try:
                parsed[which] = {k: quantity.value(v) for k, v in (values or {}).items()}
            except (ValueError, TypeError, AttributeError) as err:
                raise HookError(f"{what}: container {name} {which}: {err}",
                                reason="InvalidExtendedResourceSpec") from None
        out[name] = parsed
    return out


def _is_be(req: PodRequest) -> bool:
    return req.labels.get(LABEL_POD_QOS) == QOS_BE


def cfs_quota_disabled(node_slo: Mapping[str, Any]) -> bool:
    """CPUSuppress's ``cfsQuota`` policy sets the BE QoS dir's quota: pods and containers stay unlimited."""
    threshold = node_slo.get("resourceUsedThresholdWithBE") or {}
    return threshold.get("enable") is True and threshold.get("cpuSuppressPolicy") == "cfsQuota"


def _quota(milli_limit: int, facts: NodeFacts) -> int:
    if cfs_quota_disabled(facts.node_slo):
        return -1
    quota = milli_cpu_to_quota(milli_limit)
    ratio = facts.cpu_normalization_ratio
    if quota > 0 and ratio > 1:
        quota = math.ceil(quota / ratio)
    return quota


def pod_batch_resources(spec: Mapping[str, Mapping[str, Mapping[str, int]]], facts: NodeFacts) -> Resources:
    """The pod cgroup's values from every container's batch requests and limits."""
    requested = sum(max(c["requests"].get(BATCH_CPU, 0), 0) for c in spec.values())
    cpu_limits = [c["limits"].get(BATCH_CPU, 0) for c in spec.values()]
    memory_limits = [c["limits"].get(BATCH_MEMORY, 0) for c in spec.values()]
    cpu_limit = sum(cpu_limits) if cpu_limits and all(v > 0 for v in cpu_limits) else -1
    memory_limit = sum(memory_limits) if memory_limits and all(v > 0 for v in memory_limits) else -1
    return Resources(cpu_shares=milli_cpu_to_shares(requested), cfs_quota=_quota(cpu_limit, facts),
                     memory_limit=memory_limit)


def container_batch_resources(entry: Mapping[str, Mapping[str, int]] | None, facts: NodeFacts) -> Resources:
    """A container cgroup's values from its batch request and limits (missing: shares 2, unlimited)."""
    entry = entry or {"requests": {}, "limits": {}}
    memory = entry["limits"].get(BATCH_MEMORY, 0)
    return Resources(cpu_shares=milli_cpu_to_shares(entry["requests"].get(BATCH_CPU, 0)),
                     cfs_quota=_quota(entry["limits"].get(BATCH_CPU, 0), facts),
                     memory_limit=memory if memory > 0 else -1)


class BatchResource(HookPlugin):
    """The BatchResource plugin (see the module docstring)."""

    name = "BatchResource"
    gate = "BatchResource"
    stages = (PRE_RUN_POD_SANDBOX, PRE_CREATE_CONTAINER, PRE_UPDATE_CONTAINER_RESOURCES)

    def pod_hook(self, req: PodRequest, facts: NodeFacts) -> HookResponse | None:
        if not _is_be(req):
            return None
        spec = extended_resource_spec(req)
        if spec is None:
            return None
        return HookResponse(pod_batch_resources(spec, facts))

    def container_hook(self, req: ContainerRequest, facts: NodeFacts) -> HookResponse | None:
        if not _is_be(req.pod):
            return None
        spec = extended_resource_spec(req.pod)
        if spec is None:
            return None
        return HookResponse(container_batch_resources(spec.get(req.name), facts))
