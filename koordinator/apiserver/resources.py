"""The kinds the embedded API server serves: built-in ones and those registered by CRDs.

A ``ResourceType`` carries everything the request handlers need to know about one
group/version/resource: naming for discovery, scope, which subresources exist, how
``generation`` and ``status`` behave, and which fields a field selector may use.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from koordinator.apiserver import conversions

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


_INVOLVED_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


def _event_fields(obj: Obj) -> dict[str, str]:
    """Selectable fields of a stored (core/v1) Event under both APIs' labels.

    core/v1 and events.k8s.io/v1 share the stored objects and so this extractor; each
    ResourceType admits only its own labels (``field_labels``), as kube's field label
    conversion for events.k8s.io/v1 does (``regarding.*`` -> ``involvedObject.*``,
    ``reportingController`` -> ``reportingComponent``).
    """
    inv = obj.get("involvedObject") or {}
    source = obj.get("source") or {}
    fields = {"reason": _str(obj.get("reason")), "reportingComponent": _str(obj.get("reportingComponent")),
              "reportingController": _str(obj.get("reportingComponent")), "source": _str(source.get("component")),
              "type": _str(obj.get("type"))}
    for name in _INVOLVED_FIELDS:
        fields[f"involvedObject.{name}"] = fields[f"regarding.{name}"] = _str(inv.get(name))
    return fields


_CORE_EVENT_LABELS = frozenset({*(f"involvedObject.{n}" for n in _INVOLVED_FIELDS), "reason", "reportingComponent",
                                "source", "type"})
_EVENTS_V1_LABELS = frozenset({*(f"regarding.{n}" for n in _INVOLVED_FIELDS), "reason", "reportingController", "type"})


def _replicas_fields(obj: Obj) -> dict[str, str]:
    return {"status.replicas": _str(_get(obj, "status", "replicas") or 0)}


def _csr_fields(obj: Obj) -> dict[str, str]:
    return {"spec.signerName": _str(_get(obj, "spec", "signerName"))}


def _resource_slice_fields(obj: Obj) -> dict[str, str]:
    return {"spec.nodeName": _str(_get(obj, "spec", "nodeName")), "spec.driver": _str(_get(obj, "spec", "driver"))}


def _pv_fields(obj: Obj) -> dict[str, str]:
    return {"name": _str(_get(obj, "metadata", "name"))}


def _pvc_fields(obj: Obj) -> dict[str, str]:
    return {"name": _str(_get(obj, "metadata", "name"))}


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
    # Subresources beyond the object itself: "status", "scale", "binding", "eviction", "token".
    subresources: tuple[str, ...] = ()
    # Spec changes bump metadata.generation (a status write never does).
    tracks_generation: bool = False
    extra_fields: FieldsFn | None = None
    # CRD-backed kinds: the processing schema, printer columns, scale paths.
    crd: Any = None
    list_kind: str = ""
    # A version served as another view of a kind stored elsewhere (events.k8s.io/v1 Event is
    # stored as core/v1 Event): where its objects live and how they convert.
    stored_as: str = ""
    view: conversions.View | None = None
    # The field selector labels this version admits, when ``extra_fields`` (shared with the
    # stored kind) computes more than that.
    field_labels: frozenset[str] | None = None

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
        if self.stored_as:
            return self.stored_as
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
        extra = self.extra_fields({}) if self.field_labels is None else self.field_labels
        return {"metadata.name", "metadata.namespace", *extra}


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
        _r("", "v1", "events", "Event", True, short_names=["ev"], extra_fields=_event_fields,
           field_labels=_CORE_EVENT_LABELS),
        _r("", "v1", "serviceaccounts", "ServiceAccount", True, short_names=["sa"], subresources=("token",)),
        _r("", "v1", "persistentvolumes", "PersistentVolume", False, short_names=["pv"], subresources=("status",),
           extra_fields=_pv_fields),
        _r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, short_names=["pvc"],
           subresources=("status",), extra_fields=_pvc_fields),
        _r("", "v1", "replicationcontrollers", "ReplicationController", True, short_names=["rc"], categories=all_cat,
           subresources=("status", "scale"), tracks_generation=True, extra_fields=_replicas_fields),
        _r("", "v1", "resourcequotas", "ResourceQuota", True, short_names=["quota"], subresources=("status",)),
        _r("", "v1", "limitranges", "LimitRange", True, short_names=["limits"]),
        _r("", "v1", "podtemplates", "PodTemplate", True),
        # The same stored objects as core/v1 events (kube-scheduler and kcm record through this API).
        _r("events.k8s.io", "v1", "events", "Event", True, short_names=["ev"], extra_fields=_event_fields,
           field_labels=_EVENTS_V1_LABELS, stored_as="events", view=conversions.EVENTS_V1),
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
        # autoscaling/v2 is the stored form; v1 is converted (see conversions.HPA_V1). v2 comes first:
        # the first version of a storage key is the one the server's own deletions go through.
        _r("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, short_names=["hpa"],
           categories=all_cat, subresources=("status",), tracks_generation=True),
        _r("autoscaling", "v1", "horizontalpodautoscalers", "HorizontalPodAutoscaler", True, short_names=["hpa"],
           categories=all_cat, subresources=("status",), tracks_generation=True, view=conversions.HPA_V1),
        _r("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, short_names=["sc"]),
        _r("storage.k8s.io", "v1", "csidrivers", "CSIDriver", False),
        _r("storage.k8s.io", "v1", "csinodes", "CSINode", False),
        _r("storage.k8s.io", "v1", "csistoragecapacities", "CSIStorageCapacity", True),
        _r("storage.k8s.io", "v1", "volumeattachments", "VolumeAttachment", False, subresources=("status",)),
        _r("storage.k8s.io", "v1", "volumeattributesclasses", "VolumeAttributesClass", False, short_names=["vac"]),
        _r("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False, tracks_generation=True),
        _r("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False, tracks_generation=True,
           extra_fields=_resource_slice_fields),
        _r("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, subresources=("status",)),
        _r("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
        _r("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True, tracks_generation=True),
        _r("certificates.k8s.io", "v1", "certificatesigningrequests", "CertificateSigningRequest", False,
           short_names=["csr"], subresources=("status", "approval"), extra_fields=_csr_fields),
        _r("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, short_names=["netpol"],
           tracks_generation=True),
        _r("networking.k8s.io", "v1", "ingresses", "Ingress", True, short_names=["ing"], subresources=("status",),
           tracks_generation=True),
        _r("networking.k8s.io", "v1", "ingressclasses", "IngressClass", False, tracks_generation=True),
        _r("networking.k8s.io", "v1", "servicecidrs", "ServiceCIDR", False, subresources=("status",)),
        _r("networking.k8s.io", "v1", "ipaddresses", "IPAddress", False, short_names=["ip"]),
        _r("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False),
        _r("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False,
           short_names=["crd", "crds"], subresources=("status",), tracks_generation=True),
        _r("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations", "MutatingWebhookConfiguration",
           False, tracks_generation=True),
        _r("admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
           "ValidatingWebhookConfiguration", False, tracks_generation=True),
        _r("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False,
           categories=["api-extensions"], subresources=("status",), tracks_generation=True),
        _r("admissionregistration.k8s.io", "v1", "validatingadmissionpolicybindings",
           "ValidatingAdmissionPolicyBinding", False, categories=["api-extensions"], tracks_generation=True),
        _r("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short_names=["pc"]),
        _r("rbac.authorization.k8s.io", "v1", "roles", "Role", True),
        # Never stored: a POST answers with the caller's own user (kubectl auth whoami).
        _r("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview", False, verbs=["create"]),
        # Never stored: a POST answers whether a token authenticates, and as whom (token_reviews.py).
        _r("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False, verbs=["create"]),
        _r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True),
        _r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False),
        _r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False),
        # Reviews: answered by the authorizer (access_reviews.py), never stored.
        _r("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview", False,
           verbs=["create"]),
        _r("authorization.k8s.io", "v1", "selfsubjectrulesreviews", "SelfSubjectRulesReview", False,
           verbs=["create"]),
        _r("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview", False, verbs=["create"]),
        _r("authorization.k8s.io", "v1", "localsubjectaccessreviews", "LocalSubjectAccessReview", True,
           verbs=["create"]),
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
        # Views of one stored kind may come from other groups (events.k8s.io/v1 and core v1).
        self._by_storage[rt.storage_key] = [
            t for t in self._by_storage[rt.storage_key] if (t.group, t.version) != (rt.group, rt.version)
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
