"""Resource-name classes the scheduler's resource plugins agree on (k8s ``pkg/apis/core/v1/helper``).

kube-scheduler keeps cpu, memory, ephemeral-storage and pods as fields of its ``Resource`` and every
other name it counts as a "scalar" resource: extended resources (``nvidia.com/gpu``), hugepages,
``kubernetes.io/``-prefixed names (``kubernetes.io/batch-cpu``) and attachable volumes. Names of no
class (``storage``) are not counted at all.
"""

from __future__ import annotations

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"
_FIELDS = (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)


def is_prefixed_native_resource(name: str) -> bool:
    return "kubernetes.io/" in name


def is_native_resource(name: str) -> bool:
    return "/" not in name or is_prefixed_native_resource(name)


def is_extended_resource_name(name: str) -> bool:
    """A domain-prefixed name outside kubernetes.io (``nvidia.com/gpu``): what ignoredResources may name."""
    return not is_native_resource(name) and not name.startswith("requests.")


def is_scalar_resource_name(name: str) -> bool:
    """A name kube-scheduler counts besides cpu/memory/ephemeral-storage/pods."""
    return (is_extended_resource_name(name) or name.startswith("hugepages-") or is_prefixed_native_resource(name)
            or name.startswith("attachable-volumes-"))


def counted_resource_names(amounts: dict[str, int]) -> list[str]:
    """The names with an amount above 0 that kube's ``Resource`` keeps: cpu, memory, ephemeral-storage,
    then the scalar resources (sorted), as Koordinator's score-only plugins list a pod's requests."""
    names = [n for n in (CPU, MEMORY, EPHEMERAL_STORAGE) if amounts.get(n, 0) > 0]
    names += sorted(n for n, v in amounts.items() if v > 0 and n not in _FIELDS and is_scalar_resource_name(n))
    return names
