"""Built-in admission the roles rely on, as kube-apiserver's plugins do it.

- NamespaceLifecycle: no new objects in a missing or terminating namespace; the
  immortal namespaces cannot be deleted.
- Priority: a pod's ``priorityClassName`` resolves to ``spec.priority`` and
  ``spec.preemptionPolicy``; no class name means the globalDefault class (or 0); an unknown
  class is refused with Kubernetes' message. Only one PriorityClass may be globalDefault,
  and ``system-`` names are reserved.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver import errors
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import Store

Obj = dict[str, Any]

IMMORTAL_NAMESPACES = ("default", "kube-system", "kube-public")
SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}


def check_namespace(store: Store, rt: ResourceType, namespace: str | None, name: str) -> None:
    """NamespaceLifecycle for a create of ``rt`` in ``namespace``."""
    if not rt.namespaced or namespace is None:
        return
    entry = store.get("namespaces", namespace)
    if entry is None:
        raise errors.not_found("namespaces", namespace)
    if entry.fields.get("status.phase") == "Terminating":
        raise errors.forbidden(
            rt.qualified(), name, f"unable to create new content in namespace {namespace} because it is being terminated",
            kind=rt.plural,
        )


def check_namespace_delete(name: str) -> None:
    if name in IMMORTAL_NAMESPACES:
        raise errors.forbidden("namespaces", name, "this namespace may not be deleted")


def _priority_classes(store: Store) -> list[Obj]:
    return [e.obj() for e in store.items("scheduling.k8s.io/priorityclasses").values()]


def resolve_pod_priority(store: Store, pod: Obj) -> None:
    """The Priority admission plugin, on pod create."""
    spec = pod.setdefault("spec", {})
    name = (pod.get("metadata") or {}).get("name") or (pod.get("metadata") or {}).get("generateName", "")
    class_name = spec.get("priorityClassName")
    pc: Obj | None = None
    if class_name:
        entry = store.get("scheduling.k8s.io/priorityclasses", class_name)
        if entry is None:
            raise errors.forbidden("pods", name, f"no PriorityClass with name {class_name} was found")
        pc = entry.obj()
    else:
        defaults = [p for p in _priority_classes(store) if p.get("globalDefault")]
        if defaults:
            # Kubernetes picks the lowest value if several claim the default.
            pc = min(defaults, key=lambda p: p.get("value", 0))
            spec["priorityClassName"] = pc["metadata"]["name"]
    priority = int(pc.get("value", 0)) if pc else 0
    if "priority" in spec and spec["priority"] is not None and spec["priority"] != priority:
        raise errors.forbidden(
            "pods", name,
            f"the integer value of priority ({spec['priority']}) must not be provided in pod spec; "
            f"priority admission controller computed {priority} from the given PriorityClass name",
        )
    spec["priority"] = priority
    policy = (pc or {}).get("preemptionPolicy") or "PreemptLowerPriority"
    spec["preemptionPolicy"] = policy


def check_priority_class(store: Store, pc: Obj) -> None:
    """Only one PriorityClass may be the global default (field rules are in validation.scheduling)."""
    name = pc["metadata"].get("name", "")
    if not pc.get("globalDefault"):
        return
    for other in _priority_classes(store):
        if other["metadata"]["name"] != name and other.get("globalDefault"):
            raise errors.forbidden(
                "priorityclasses.scheduling.k8s.io", name,
                f"PriorityClass {other['metadata']['name']} is already marked as default. Only one default can exist",
                group="scheduling.k8s.io")
