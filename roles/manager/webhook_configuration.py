"""The MutatingWebhookConfiguration and ValidatingWebhookConfiguration that route to koord-manager.

``manifests/webhooks.yaml`` is these objects for the default feature gates (a test keeps the two
equal); ``koordinator local`` creates them for its manager. The manager itself only patches their
``caBundle`` (:mod:`koordinator_roles.manager.certs`), as Koordinator's does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Obj = dict[str, Any]

MUTATING_NAME = "koordinator-mutating-webhook-configuration"
VALIDATING_NAME = "koordinator-validating-webhook-configuration"
SERVICE_NAME = "koordinator-webhook-service"
SERVICE_NAMESPACE = "koordinator-system"

# Pod webhooks skip namespaces labelled control-plane (koordinator-system: the manager never waits
# on itself) and kube-system, so that an unavailable manager cannot block system pods.
_POD_NAMESPACES = {"matchExpressions": [
    {"key": "control-plane", "operator": "DoesNotExist"},
    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]},
]}

# (configuration, webhook name, path, group, resource, operations, gate, extra fields)
_WEBHOOKS: list[tuple[str, str, str, str, str, list[str], str, Obj]] = [
    ("mutating", "mpod-create.koordinator.sh", "/mutate-pod", "", "pods", ["CREATE"], "PodMutatingWebhook",
     {"namespaceSelector": _POD_NAMESPACES}),
    ("mutating", "mpod-update.koordinator.sh", "/mutate-pod", "", "pods", ["UPDATE"], "PodMutatingWebhook",
     {"namespaceSelector": _POD_NAMESPACES,
      "objectSelector": {"matchExpressions": [
          {"key": "pod.koordinator.sh/mutating-update", "operator": "In", "values": ["true"]}]}}),
    ("mutating", "melasticquota.koordinator.sh", "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
     "scheduling.sigs.k8s.io", "elasticquotas", ["CREATE"], "ElasticQuotaMutatingWebhook", {}),
    ("validating", "vpod.koordinator.sh", "/validate-pod", "", "pods", ["CREATE", "UPDATE"],
     "PodValidatingWebhook", {"namespaceSelector": _POD_NAMESPACES}),
    ("validating", "velasticquota.koordinator.sh", "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
     "scheduling.sigs.k8s.io", "elasticquotas", ["CREATE", "UPDATE", "DELETE"], "ElasticQuotaValidatingWebhook", {}),
    ("validating", "vconfigmap.koordinator.sh", "/validate-configmap", "", "configmaps",
     ["CREATE", "UPDATE", "DELETE"], "ConfigMapValidatingWebhook",
     # The handler only judges slo-controller-config; the selector keeps every other namespace's
     # ConfigMaps independent of the manager.
     {"namespaceSelector": {"matchExpressions": [
         {"key": "kubernetes.io/metadata.name", "operator": "In", "values": [SERVICE_NAMESPACE]}]}}),
    ("mutating", "mreservation-create.koordinator.sh", "/mutate-reservation", "scheduling.koordinator.sh", "reservations",
     ["CREATE"], "ReservationMutatingWebhook", {}),
]

# Reservations are cluster-scoped: their rule must say so, or the API server never calls the webhook.
_CLUSTER_SCOPED = {"reservations"}


def webhook_paths() -> dict[str, str]:
    """path -> the feature gate that serves it."""
    return {path: gate for _, _, path, _, _, _, gate, _ in _WEBHOOKS}


def webhook_configurations(gates: Mapping[str, bool], *, service: Mapping[str, Any] | None = None) -> list[Obj]:
    """Both configurations with an entry for every webhook whose gate is on in ``gates``.

    ``service`` replaces the default Service reference (name, namespace, port).
    """
    svc = {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE, "port": 443, **(service or {})}
    entries: dict[str, list[Obj]] = {"mutating": [], "validating": []}
    for which, name, path, group, resource, operations, gate, extra in _WEBHOOKS:
        if not gates.get(gate):
            continue
        webhook: Obj = {
            "name": name,
            "clientConfig": {"service": {"name": svc["name"], "namespace": svc["namespace"], "path": path,
                                         "port": svc["port"]}},
            "rules": [{"apiGroups": [group], "apiVersions": ["v1alpha1" if group else "v1"],
                       "operations": operations, "resources": [resource],
                       "scope": "Cluster" if resource in _CLUSTER_SCOPED else "Namespaced"}],
            **extra,
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }
        entries[which].append(webhook)
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
         "metadata": {"name": MUTATING_NAME, "labels": {"koord-app": "koord-manager"}}, "webhooks": entries["mutating"]},
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": VALIDATING_NAME, "labels": {"koord-app": "koord-manager"}},
         "webhooks": entries["validating"]},
    ]
