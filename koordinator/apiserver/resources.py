"""The kinds the embedded API server serves: built-in ones and those registered by CRDs.

A ``ResourceType`` carries everything the request handlers need to know about one
group/version/resource: naming for discovery, scope, which subresources exist, how
``generation`` and ``status`` behave, and which fields a field selector may use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

Obj = dict[str, Any]
FieldsFn = Callable[[Obj], dict[str, str]]

STANDARD_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]


def _get(obj: Obj, *path: str) -> Any:
    cur: Any = obj
    for p in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(p)
    return cur


def _str(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _pod_fields(obj: Obj) -> dict[str, str]:
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    return {
        "spec.nodeName": _str(spec.get("nodeName")),
        "spec.restartPolicy": _str(spec.get("restartPolicy")),
        "spec.schedulerName": _str(spec.get("schedulerName")),
        "spec.serviceAccountName": _str(spec.get("serviceAccountName")),
        "spec.hostNetwork": "true" if spec.get("hostNetwork") else "false",
        "status.phase": _str(status.get("phase")),
        "status.podIP": _str(status.get("podIP")),
        "status.nominatedNodeName": _str(status.get("nominatedNodeName")),
    }


def _event_fields(obj: Obj) -> dict[str, str]:
    inv = obj.get("involvedObject") or {}
    source = obj.get("source") or {}
    return {
        "involvedObject.kind": _str(inv.get("kind")),
        "involvedObject.namespace": _str(inv.get("namespace")),
        "involvedObject.name": _str(inv.get("name")),
        "involvedObject.uid": _str(inv.get("uid")),
        "involvedObject.apiVersion": _str(inv.get("apiVersion")),
        "involvedObject.resourceVersion": _str(inv.get("resourceVersion")),
        "involvedObject.fieldPath": _str(inv.get("fieldPath")),
        "reason": _str(obj.get("reason")),
        "reportingComponent": _str(obj.get("reportingComponent")),
        "source": _str(source.get("component")),
        "type": _str(obj.get("type")),
    }


def _node_fields(obj: Obj) -> dict[str, str]:
    return {"spec.unschedulable": "true" if _get(obj, "spec", "unschedulable") else "false"}


def _namespace_fields(obj: Obj) -> dict[str, str]:
    return {"status.phase": _str(_get(obj, "status", "phase"))}


def _secret_fields(obj: Obj) -> dict[str, str]:
    return {"type": _str(obj.get("type"))}


def jsonpath_fields(paths: list[str]) -> FieldsFn:
    """Field extractor for a CRD's ``selectableFields`` (simple ``.a.b`` JSON paths)."""
    split = [(p.lstrip("."), tuple(p.lstrip(".").split("."))) for p in paths]

    def fields(obj: Obj) -> dict[str, str]:
        return {name: _str(_get(obj, *parts)) for name, parts in split}

    return fields


@dataclass
class ResourceType:
    """One served group/version/resource."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    singular: str = ""
    short_names: list[str] = field(default_factory=list)
    categories: list[str] = field(default_factory=list)
    verbs: list[str] = field(default_factory=lambda: list(STANDARD_VERBS))
    # Subresources beyond the object itself: "status", "scale", "binding", "eviction".
    subresources: tuple[str, ...] = ()
    # Spec changes bump metadata.generation (a status write never does).
    tracks_generation: bool = False
    extra_fields: FieldsFn | None = None
    # CRD-backed kinds: the processing schema, printer columns, scale paths.
    crd: Any = None
    list_kind: str = ""

    def __post_init__(self) -> None:
        if not self.singular:
            self.singular = self.kind.lower()
        if not self.list_kind:
            self.list_kind = self.kind + "List"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def storage_key(self) -> str:
        """Stable name of this resource's rows in storage (version-independent)."""
        return f"{self.group}/{self.plural}" if self.group else self.plural

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources

    @property
    def builtin(self) -> bool:
        return self.crd is None

    def qualified(self) -> str:
        """``pods`` or ``reservations.scheduling.koordinator.sh`` as error messages name it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        meta = obj.get("metadata") or {}
        fields = {"metadata.name": meta.get("name", ""), "metadata.namespace": meta.get("namespace", "") or ""}
        if self.extra_fields is not None:
            fields.update(self.extra_fields(obj))
        return fields

    def field_names(self) -> set[str]:
        if self.extra_fields is None:
            return {"metadata.name", "metadata.namespace"}
        return {"metadata.name", "metadata.namespace", *self.extra_fields({})}


def _r(group: str, version: str, plural: str, kind: str, namespaced: bool, **kw: Any) -> ResourceType:
    return ResourceType(group=group, version=version, plural=plural, kind=kind, namespaced=namespaced, **kw)


def builtin_types() -> list[ResourceType]:
    """Kinds served without any CRD, as in a plain kube-apiserver (stored; no controllers)."""
    all_cat = ["all"]
    return [
        _r("", "v1", "namespaces", "Namespace", False, short_names=["ns"], subresources=("status",),
           extra_fields=_namespace_fields),
        _r("", "v1", "nodes", "Node", False, short_names=["no"], subresources=("status",), extra_fields=_node_fields),
        _r("", "v1", "pods", "Pod", True, short_names=["po"], categories=all_cat,
           subresources=("status", "binding", "eviction"), tracks_generation=True, extra_fields=_pod_fields),
        # The legacy way to bind a pod (the Python client's create_namespaced_binding): POST only.
        _r("", "v1", "bindings", "Binding", True, verbs=["create"]),
        _r("", "v1", "configmaps", "ConfigMap", True, short_names=["cm"]),
        _r("", "v1", "secrets", "Secret", True, extra_fields=_secret_fields),
        _r("", "v1", "services", "Service", True, short_names=["svc"], categories=all_cat, subresources=("status",)),
        _r("", "v1", "endpoints", "Endpoints", True, short_names=["ep"]),
        _r("", "v1", "events", "Event", True, short_names=["ev"], extra_fields=_event_fields),
        _r("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=["sa"]),
        _r("coordination.k8s.io", "v1", "leases", "Lease", True),
        _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, short_names=["pdb"],
           subresources=("status",), tracks_generation=True),
        _r("apps", "v1", "deployments", "Deployment", True, short_names=["deploy"], categories=all_cat,
           subresources=("status", "scale"), tracks_generation=True),
        _r("apps", "v1", "daemonsets", "DaemonSet", True, short_names=["ds"], categories=all_cat,
           subresources=("status",), tracks_generation=True),
        _r("apps", "v1", "replicasets", "ReplicaSet", True, short_names=["rs"], categories=all_cat,
           subresources=("status", "scale"), tracks_generation=True),
        _r("apps", "v1", "statefulsets", "StatefulSet", True, short_names=["sts"], categories=all_cat,
           subresources=("status", "scale"), tracks_generation=True),
        _r("apps", "v1", "controllerrevisions", "ControllerRevision", True),
        _r("batch", "v1", "jobs", "Job", True, categories=all_cat, subresources=("status",), tracks_generation=True),
        _r("batch", "v1", "cronjobs", "CronJob", True, short_names=["cj"], categories=all_cat,
           subresources=("status",), tracks_generation=True),
        _r("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
           short_names=["crd", "crds"], subresources=("status",), tracks_generation=True),
        _r("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
           False, tracks_generation=True),
        _r("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
           "ValidatingWebhookConfiguration", False, tracks_generation=True),
        _r("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=["pc"]),
        _r("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
        _r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
        _r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
        _r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    ]


class Registry:
    """Lookup of served resources by group/version/plural and by group/kind."""

    def __init__(self) -> None:
        self._by_path: dict[tuple[str, str, str], ResourceType] = {}
        self._by_storage: dict[str, list[ResourceType]] = {}
        self._aliases: dict[tuple[str, str], ResourceType] = {}
        for rt in builtin_types():
            self.add(rt)

    def add(self, rt: ResourceType) -> None:
        self._by_path[(rt.group, rt.version, rt.plural)] = rt
        self._by_storage.setdefault(rt.storage_key, [])
        self._by_storage[rt.storage_key] = [
            t for t in self._by_storage[rt.storage_key] if t.version != rt.version
        ] + [rt]

    def remove_group_resource(self, group: str, plural: str) -> None:
        for key in [k for k in self._by_path if k[0] == group and k[2] == plural]:
            del self._by_path[key]
        self._by_storage.pop(f"{group}/{plural}" if group else plural, None)

    def get(self, group: str, version: str, plural: str) -> ResourceType | None:
        return self._by_path.get((group, version, plural))

    def versions_of(self, storage_key: str) -> list[ResourceType]:
        return self._by_storage.get(storage_key, [])

    def find_kind(self, group: str, kind: str) -> ResourceType | None:
        for rt in self._by_path.values():
            if rt.group == group and rt.kind == kind:
                return rt
        return None

    def all(self) -> list[ResourceType]:
        return list(self._by_path.values())

    def group_versions(self) -> dict[str, list[str]]:
        """group -> served versions (core group is ``""``)."""
        out: dict[str, list[str]] = {}
        for rt in self._by_path.values():
            versions = out.setdefault(rt.group, [])
            if rt.version not in versions:
                versions.append(rt.version)
        return out
