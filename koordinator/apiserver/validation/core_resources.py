"""Resource names and quantities (``pkg/apis/core/helper`` semantics): requests, limits,
hugepages, extended resources; and the Semantic.DeepEqual normal form that compares them.
"""

from __future__ import annotations

from typing import Any, Callable

from koordinator.apis import quantity as qty
from koordinator.apiserver.errors import forbidden_field, not_supported, required
from koordinator.apiserver.validation.causes import NEGATIVE, Causes, as_dict, invalid, invalid_rendered
from koordinator.apiserver.validation.formats import is_qualified_name


_STANDARD_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "resourcequotas", "services",
    "replicationcontrollers", "secrets", "persistentvolumeclaims", "configmaps", "services.nodeports",
    "services.loadbalancers", "requests.storage", "storage",
})
_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
_INTEGER_RESOURCES = frozenset({
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})
POD_LEVEL_RESOURCES = ["cpu", "hugepages-", "memory"]


def is_hugepage_resource(name: str) -> bool:
    """``hugepages-<size>``."""
    return name.startswith("hugepages-")


def is_native_resource(name: str) -> bool:
    """Unprefixed, or in the ``kubernetes.io/`` namespace (Koordinator's batch-cpu etc.)."""
    return "/" not in name or "kubernetes.io/" in name


def is_extended_resource(name: str) -> bool:
    """A fully-qualified, non-native resource such as ``nvidia.com/gpu``."""
    if is_native_resource(name) or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def is_overcommit_allowed(name: str) -> bool:
    """Native non-hugepage resources may have requests below limits."""
    return is_native_resource(name) and not is_hugepage_resource(name)


def _is_standard_resource(name: str) -> bool:
    return name in _STANDARD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-"))


def validate_resource_name(name: str, path: str) -> Causes:
    msgs = is_qualified_name(name)
    if msgs:
        return [invalid(path, name, m) for m in msgs]
    if "/" not in name and not _is_standard_resource(name):
        return [invalid(path, name, "must be a standard resource type or fully qualified")]
    return []


def validate_container_resource_name(name: str, path: str) -> Causes:
    causes = validate_resource_name(name, path)
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not is_hugepage_resource(name):
            causes.append(invalid(path, name, "must be a standard resource for containers"))
    elif not is_native_resource(name) and not is_extended_resource(name):
        causes.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return causes


def validate_pod_resource_name(name: str, path: str) -> Causes:
    causes = validate_resource_name(name, path)
    if causes:
        return causes
    if name not in ("cpu", "memory") and not is_hugepage_resource(name):
        return [not_supported(path, name, POD_LEVEL_RESOURCES)]
    return []


def quantity(raw: Any) -> qty.ParsedQuantity | None:
    try:
        return qty.parse(raw)
    except qty.QuantityError:
        return None


def validate_quantity_value(name: str, q: qty.ParsedQuantity, path: str) -> Causes:
    """``ValidateResourceQuantityValue``: non-negative, whole for integer resources."""
    causes: Causes = []
    if q.value < 0:
        causes.append(invalid(path, q.string, NEGATIVE))
    if name in _INTEGER_RESOURCES or is_extended_resource(name):
        if qty.milli_value(q.value) % 1000:
            causes.append(invalid_rendered(path, q.string, "must be an integer"))
    return causes


def validate_resource_requirements(res: Any, path: str, name_fn: Callable[[str, str], Causes]) -> Causes:
    """``validateResourceRequirements`` for container (or pod-level) resources."""
    res = as_dict(res)
    limits, requests = as_dict(res.get("limits")), as_dict(res.get("requests"))
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    causes: Causes = []
    lim_cpu_mem = req_cpu_mem = lim_huge = req_huge = False
    for name, raw in limits.items():
        fp = f"{lim_path}[{name}]"
        causes.extend(name_fn(name, fp))
        q = quantity(raw)
        if q is not None:
            causes.extend(validate_quantity_value(name, q, fp))
        lim_huge = lim_huge or is_hugepage_resource(name)
        lim_cpu_mem = lim_cpu_mem or name in ("cpu", "memory")
    for name, raw in requests.items():
        fp = f"{req_path}[{name}]"
        causes.extend(name_fn(name, fp))
        q = quantity(raw)
        if q is not None:
            causes.extend(validate_quantity_value(name, q, fp))
        if name in limits:
            lim = quantity(limits[name])
            if q is not None and lim is not None:
                if q.value != lim.value and not is_overcommit_allowed(name):
                    causes.append(invalid(req_path, q.string, f"must be equal to {name} limit of {lim.string}"))
                elif q.value > lim.value:
                    causes.append(invalid(req_path, q.string,
                                          f"must be less than or equal to {name} limit of {lim.string}"))
        elif not is_overcommit_allowed(name):
            causes.append(required(lim_path, "Limit must be set for non overcommitable resources"))
        req_huge = req_huge or is_hugepage_resource(name)
        req_cpu_mem = req_cpu_mem or name in ("cpu", "memory")
    if not lim_cpu_mem and not req_cpu_mem and (lim_huge or req_huge):
        causes.append(forbidden_field(path, "HugePages require cpu or memory"))
    return causes


def semantic(value: Any, key: str = "") -> Any:
    """A normal form for Semantic.DeepEqual: empty means absent, quantities compare by value."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if key in ("limits", "requests", "overhead") and not isinstance(v, (dict, list)):
                q = quantity(v)
                norm: Any = q.value if q is not None else v
            else:
                norm = semantic(v, k)
            if norm is not None and norm != {} and norm != []:
                out[k] = norm
        return out
    if isinstance(value, list):
        return [semantic(v, key) for v in value]
    return value
