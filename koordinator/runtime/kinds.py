"""Which kinds exist and where they live: kind ⇄ group/version/plural/namespaced.

The registry knows the built-in kinds the roles use and every Koordinator CRD (from
``schemas/``), so callers name a kind the way they would on the command line: ``"Pod"``,
``"pods"``, ``"v1/Pod"``, ``"scheduling.koordinator.sh/v1alpha1/Reservation"`` or
``"leases.coordination.k8s.io"``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from urllib.parse import quote

from koordinator.apis import schemas


@dataclass(frozen=True)
class Kind:
    """One served kind at one version."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """``plural.group``, the name RBAC and ``kubectl get`` use."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path(self, namespace: str | None = None, name: str | None = None, subresource: str | None = None) -> str:
        """The REST path of the collection, or of one object (and its subresource)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.api_version}/{self.kind}"


# A later entry answers for a bare name (``"Event"``, ``"events"``) an earlier one shares.
_BUILTIN = [
    # The same stored events as core/v1 Event, which comes later and so keeps the bare names.
    ("events.k8s.io", "v1", "Event", "events", True),
    ("", "v1", "Namespace", "namespaces", False), ("", "v1", "Node", "nodes", False),
    ("", "v1", "Pod", "pods", True), ("", "v1", "ConfigMap", "configmaps", True),
    ("", "v1", "Secret", "secrets", True), ("", "v1", "Service", "services", True),
    ("", "v1", "Endpoints", "endpoints", True), ("", "v1", "Event", "events", True),
    ("", "v1", "ServiceAccount", "serviceaccounts", True),
    ("coordination.k8s.io", "v1", "Lease", "leases", True),
    ("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True),
    ("apps", "v1", "Deployment", "deployments", True), ("apps", "v1", "DaemonSet", "daemonsets", True),
    ("apps", "v1", "ReplicaSet", "replicasets", True), ("apps", "v1", "StatefulSet", "statefulsets", True),
    ("apps", "v1", "ControllerRevision", "controllerrevisions", True),
    ("batch", "v1", "Job", "jobs", True), ("batch", "v1", "CronJob", "cronjobs", True),
    ("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False),
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", "customresourcedefinitions", False),
    ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", "mutatingwebhookconfigurations", False),
    ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration",
     "validatingwebhookconfigurations", False),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicy", "validatingadmissionpolicies", False),
    ("admissionregistration.k8s.io", "v1", "ValidatingAdmissionPolicyBinding",
     "validatingadmissionpolicybindings", False),
    ("", "v1", "PersistentVolume", "persistentvolumes", False),
    ("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True),
    ("", "v1", "ReplicationController", "replicationcontrollers", True),
    ("", "v1", "ResourceQuota", "resourcequotas", True), ("", "v1", "LimitRange", "limitranges", True),
    ("", "v1", "PodTemplate", "podtemplates", True),
    ("storage.k8s.io", "v1", "StorageClass", "storageclasses", False),
    ("storage.k8s.io", "v1", "CSIDriver", "csidrivers", False), ("storage.k8s.io", "v1", "CSINode", "csinodes", False),
    ("storage.k8s.io", "v1", "CSIStorageCapacity", "csistoragecapacities", True),
    ("storage.k8s.io", "v1", "VolumeAttachment", "volumeattachments", False),
    ("storage.k8s.io", "v1", "VolumeAttributesClass", "volumeattributesclasses", False),
    ("resource.k8s.io", "v1", "DeviceClass", "deviceclasses", False),
    ("resource.k8s.io", "v1", "ResourceSlice", "resourceslices", False),
    ("resource.k8s.io", "v1", "ResourceClaim", "resourceclaims", True),
    ("resource.k8s.io", "v1", "ResourceClaimTemplate", "resourceclaimtemplates", True),
    ("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True),
    # autoscaling/v1 first: v2 (the stored, complete form) answers for the bare kind name.
    ("autoscaling", "v1", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True),
    ("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers", True),
    ("certificates.k8s.io", "v1", "CertificateSigningRequest", "certificatesigningrequests", False),
    ("networking.k8s.io", "v1", "NetworkPolicy", "networkpolicies", True),
    ("networking.k8s.io", "v1", "Ingress", "ingresses", True),
    ("networking.k8s.io", "v1", "IngressClass", "ingressclasses", False),
    ("networking.k8s.io", "v1", "ServiceCIDR", "servicecidrs", False),
    ("networking.k8s.io", "v1", "IPAddress", "ipaddresses", False),
    ("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", False),
]


class UnknownKind(LookupError):
    """A kind reference that names nothing the registry knows."""


class KindRegistry:
    """Lookup of kinds by any of their names; thread-safe, extendable with :meth:`register`."""

    def __init__(self, kinds: list[Kind] | None = None) -> None:
        self._lock = threading.Lock()
        self._by_ref: dict[str, Kind] = {}
        self._all: list[Kind] = []
        for k in kinds if kinds is not None else default_kinds():
            self.register(k)

    def register(self, kind: Kind, *, preferred: bool = True) -> None:
        """Add a kind. ``preferred`` makes it the answer for its bare name (``"Reservation"``)."""
        with self._lock:
            self._all.append(kind)
            exact = [f"{kind.api_version}/{kind.kind}", f"{kind.api_version}/{kind.plural}"]
            loose = [kind.kind, kind.plural, kind.kind.lower(), kind.resource,
                     f"{kind.group}/{kind.kind}" if kind.group else kind.kind]
            for ref in exact:
                self._by_ref[ref] = kind
            for ref in loose:
                if preferred or ref not in self._by_ref:
                    self._by_ref[ref] = kind

    def get(self, ref: "Kind | str") -> Kind:
        if isinstance(ref, Kind):
            return ref
        kind = self._by_ref.get(ref)
        if kind is None:
            raise UnknownKind(f"unknown kind {ref!r}: not a built-in kind or a Koordinator CRD "
                              "(register it with KindRegistry.register)")
        return kind

    def for_object(self, obj: dict) -> Kind:
        """The kind of an object, from its ``apiVersion`` and ``kind``."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not api_version or not kind:
            raise UnknownKind(f"object has no apiVersion/kind (apiVersion={api_version!r}, kind={kind!r})")
        return self.get(f"{api_version}/{kind}")

    def all(self) -> list[Kind]:
        with self._lock:
            return list(self._all)


def default_kinds() -> list[Kind]:
    """The built-in kinds, then every Koordinator CRD version.

    Storage versions come last so that, registered in this order, they answer for the bare kind name.
    """
    kinds = [Kind(g, v, k, p, ns) for g, v, k, p, ns in _BUILTIN]
    crds = sorted(schemas.crd_schemas(), key=lambda s: bool(s.crd.get("storage", True)))
    for s in crds:
        kinds.append(Kind(s.group, s.version, s.kind, s.crd["plural"], s.crd.get("scope", "Namespaced") == "Namespaced"))
    return kinds
