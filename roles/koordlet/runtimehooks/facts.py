"""Node facts the hook plugins decide from (reference A.8.1 "rules"), computed once per reconcile round.

Koordinator's plugins parse "rules" from the NodeSLO, the NodeResourceTopology annotations and the
Node; here :func:`node_facts` derives the same inputs from what the koordlet already has (merged
NodeSLO spec, Node object, CPU topology from the metric cache, the pods' ``resource-status``), so a
plugin is a pure function of (request, :class:`NodeFacts`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from koordinator.apis.extension import ANNOTATION_RESOURCE_STATUS, QOS_LSE, qos_class
from koordinator_roles.koordlet.runtimehooks.protocol import HookError
from koordinator_roles.koordlet.system.cpuset import format_cpuset, parse_cpuset

log = logging.getLogger("koordinator.koordlet.runtimehooks")

ANNOTATION_CPU_NORMALIZATION_RATIO = "node.koordinator.sh/cpu-normalization-ratio"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
ANNOTATION_SYSTEM_QOS_RESOURCE = "node.koordinator.sh/system-qos-resource"
POLICY_NONE = "none"
POLICY_STATIC = "static"


@dataclass(frozen=True)
class NodeFacts:
    """The rule inputs of every plugin for one round.

    - ``node_slo``: the merged NodeSLO spec (GroupIdentity, BatchResource's cfs-quota switch);
    - ``ls_share_pool`` / ``be_share_pool``: node CPUs minus reserved, exclusive system-QoS and
      pod-bound CPUs (LS: every bound pod's; BE: LSE pods' only), as NRT ``cpu-shared-pools``;
      ``None`` while the CPU topology is unknown;
    - ``ls_pools`` / ``be_pools``: the same per NUMA node (NUMA-aware allocations join their nodes' pools);
    - ``cpu_manager_policy``: the kubelet's (``none`` unless known to be ``static``);
    - ``system_qos_cpuset``: ``node.koordinator.sh/system-qos-resource`` cpuset ("" when none);
    - ``cpu_normalization_ratio``: node annotation, -1 when absent or invalid.
    """

    node_slo: Mapping[str, Any] = field(default_factory=dict)
    ls_share_pool: str | None = None
    be_share_pool: str | None = None
    ls_pools: Mapping[int, str] = field(default_factory=dict)
    be_pools: Mapping[int, str] = field(default_factory=dict)
    cpu_manager_policy: str = POLICY_NONE
    system_qos_cpuset: str = ""
    cpu_normalization_ratio: float = -1.0


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return ((obj or {}).get("metadata") or {}).get("annotations") or {}


def resource_status_cpuset(key: str, annotations: Mapping[str, str]) -> str:
    """The ``cpuset`` of a pod's ``scheduling.koordinator.sh/resource-status`` ("" when none).

    :class:`HookError` naming the pod and the value when the annotation is not a JSON object or its
    cpuset is not a CPU list: a hook must not guess the CPUs of a bound pod.
    """
    raw = annotations.get(ANNOTATION_RESOURCE_STATUS)
    if not raw:
        return ""
    try:
        status = json.loads(raw)
    except ValueError:
        raise HookError(f"pod {key}: annotation {ANNOTATION_RESOURCE_STATUS} is not JSON: {raw!r}",
                        reason="InvalidResourceStatus") from None
    if not isinstance(status, dict):
        raise HookError(f"pod {key}: annotation {ANNOTATION_RESOURCE_STATUS} is not a JSON object: {raw!r}",
                        reason="InvalidResourceStatus")
    cpuset = status.get("cpuset")
    if not cpuset:
        return ""
    if not isinstance(cpuset, str):
        raise HookError(f"pod {key}: annotation {ANNOTATION_RESOURCE_STATUS} cpuset {cpuset!r} is not a string",
                        reason="InvalidResourceStatus")
    try:
        return format_cpuset(parse_cpuset(cpuset, f"pod {key}: annotation {ANNOTATION_RESOURCE_STATUS} cpuset"))
    except ValueError as err:
        raise HookError(str(err), reason="InvalidResourceStatus") from None


def _json(node: Mapping[str, Any] | None, key: str) -> dict:
    raw = _annotations(node).get(key)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _cpus(value: Any) -> set[int]:
    try:
        return set(parse_cpuset(value)) if isinstance(value, str) and value else set()
    except ValueError:
        return set()


def normalization_ratio(node: Mapping[str, Any] | None) -> float:
    """``node.koordinator.sh/cpu-normalization-ratio`` as a float; -1 when absent or not a number."""
    raw = _annotations(node).get(ANNOTATION_CPU_NORMALIZATION_RATIO)
    if raw is None:
        return -1.0
    try:
        ratio = float(raw)
    except ValueError:
        return -1.0
    return ratio if ratio > 0 else -1.0


def node_facts(node: Mapping[str, Any] | None, node_slo: Mapping[str, Any], processors: Iterable[Mapping[str, Any]],
               pods: Iterable[Mapping[str, Any]], *, cpu_manager_policy: str = POLICY_NONE) -> NodeFacts:
    """The :class:`NodeFacts` of a node (see the class); a pod with a malformed ``resource-status`` binds nothing
    here (it is reported and skipped when its own hooks run)."""
    numa_of = {int(p["id"]): int(p.get("node", 0)) for p in processors if isinstance(p, Mapping) and "id" in p}
    all_cpus = set(numa_of)
    system_qos = _json(node, ANNOTATION_SYSTEM_QOS_RESOURCE)
    system_cpus = _cpus(system_qos.get("cpuset"))
    # cpusetExclusive defaults to true: exclusive system-QoS CPUs leave the shared pools.
    exclusive = set() if system_qos.get("cpusetExclusive") is False else system_cpus
    unusable = _cpus(_json(node, ANNOTATION_NODE_RESERVATION).get("reservedCPUs")) | exclusive
    bound, bound_lse = set(), set()
    for pod in pods:
        md = pod.get("metadata") or {}
        try:
            cpus = _cpus(resource_status_cpuset(f"{md.get('namespace')}/{md.get('name')}", md.get("annotations") or {}))
        except HookError:
            continue
        bound |= cpus
        if qos_class(pod) == QOS_LSE:
            bound_lse |= cpus
    ls = be = None
    ls_pools: dict[int, str] = {}
    be_pools: dict[int, str] = {}
    if all_cpus:
        ls_cpus, be_cpus = all_cpus - unusable - bound, all_cpus - unusable - bound_lse
        ls, be = format_cpuset(ls_cpus), format_cpuset(be_cpus)
        for numa in sorted(set(numa_of.values())):
            ls_pools[numa] = format_cpuset(c for c in ls_cpus if numa_of[c] == numa)
            be_pools[numa] = format_cpuset(c for c in be_cpus if numa_of[c] == numa)
    return NodeFacts(node_slo=node_slo, ls_share_pool=ls, be_share_pool=be, ls_pools=ls_pools, be_pools=be_pools,
                     cpu_manager_policy=cpu_manager_policy,
                     system_qos_cpuset=format_cpuset(system_cpus), cpu_normalization_ratio=normalization_ratio(node))
