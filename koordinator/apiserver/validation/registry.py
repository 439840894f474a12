"""Which validator each built-in kind has, and ``validate``, the one entry point the server calls.

Kinds without a validator of their own (custom resources included) get ObjectMeta validation.
"""

from __future__ import annotations

from typing import Callable

from koordinator.apiserver.validation.admissionregistration import (
    validate_admission_policy,
    validate_admission_policy_binding,
    validate_mutating_webhooks,
    validate_validating_webhooks,
)
from koordinator.apiserver.validation.apps import (
    validate_controller_revision,
    validate_daemonset,
    validate_deployment,
    validate_replicaset,
    validate_statefulset,
)
from koordinator.apiserver.validation.autoscaling import validate_hpa
from koordinator.apiserver.validation.batch import validate_cronjob, validate_job
from koordinator.apiserver.validation.causes import Causes, Obj
from koordinator.apiserver.validation.certificates import validate_csr
from koordinator.apiserver.validation.coordination import validate_lease
from koordinator.apiserver.validation.core import (
    validate_configmap,
    validate_event,
    validate_limit_range,
    validate_namespace,
    validate_node,
    validate_persistent_volume,
    validate_pod_template_kind,
    validate_pvc,
    validate_replication_controller,
    validate_resource_quota,
    validate_secret,
    validate_service,
    validate_service_account,
)
from koordinator.apiserver.validation.discovery import validate_endpoint_slice
from koordinator.apiserver.validation.events import validate_events_v1
from koordinator.apiserver.validation.meta import validate_core_generic, validate_generic
from koordinator.apiserver.validation.networking import (
    validate_ingress,
    validate_ingress_class,
    validate_ip_address,
    validate_network_policy,
    validate_service_cidr,
)
from koordinator.apiserver.validation.node import validate_runtime_class
from koordinator.apiserver.validation.pod import validate_pod
from koordinator.apiserver.validation.policy import validate_pdb
from koordinator.apiserver.validation.rbac import (
    validate_cluster_role,
    validate_cluster_role_binding,
    validate_role,
    validate_role_binding,
)
from koordinator.apiserver.validation.resource import (
    validate_device_class,
    validate_resource_claim,
    validate_resource_claim_template,
    validate_resource_slice,
)
from koordinator.apiserver.validation.scheduling import validate_priority_class
from koordinator.apiserver.validation.storage import (
    validate_csi_driver,
    validate_csi_node,
    validate_csi_storage_capacity,
    validate_storage_class,
    validate_volume_attachment,
    validate_volume_attributes_class,
)


Validator = Callable[[Obj, "Obj | None"], Causes]

VALIDATORS: dict[tuple[str, str], Validator] = {
    ("", "Pod"): validate_pod,
    ("", "Node"): validate_node,
    ("", "Namespace"): validate_namespace,
    ("", "ConfigMap"): validate_configmap,
    ("", "Secret"): validate_secret,
    ("", "Service"): validate_service,
    ("", "ServiceAccount"): validate_service_account,
    ("", "Endpoints"): validate_core_generic,
    ("", "Event"): validate_event,
    ("apps", "Deployment"): validate_deployment,
    ("apps", "DaemonSet"): validate_daemonset,
    ("apps", "ReplicaSet"): validate_replicaset,
    ("apps", "StatefulSet"): validate_statefulset,
    ("batch", "Job"): validate_job,
    ("batch", "CronJob"): validate_cronjob,
    ("scheduling.k8s.io", "PriorityClass"): validate_priority_class,
    ("coordination.k8s.io", "Lease"): validate_lease,
    ("policy", "PodDisruptionBudget"): validate_pdb,
    ("rbac.authorization.k8s.io", "Role"): validate_role,
    ("rbac.authorization.k8s.io", "ClusterRole"): validate_cluster_role,
    ("rbac.authorization.k8s.io", "RoleBinding"): validate_role_binding,
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"): validate_cluster_role_binding,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): validate_core_generic,
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"): validate_mutating_webhooks,
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"): validate_validating_webhooks,
    ("", "PersistentVolume"): validate_persistent_volume,
    ("", "PersistentVolumeClaim"): validate_pvc,
    ("", "ReplicationController"): validate_replication_controller,
    ("", "PodTemplate"): validate_pod_template_kind,
    ("", "ResourceQuota"): validate_resource_quota,
    ("", "LimitRange"): validate_limit_range,
    ("apps", "ControllerRevision"): validate_controller_revision,
    ("storage.k8s.io", "StorageClass"): validate_storage_class,
    ("storage.k8s.io", "CSIDriver"): validate_csi_driver,
    ("storage.k8s.io", "CSINode"): validate_csi_node,
    ("storage.k8s.io", "CSIStorageCapacity"): validate_csi_storage_capacity,
    ("storage.k8s.io", "VolumeAttachment"): validate_volume_attachment,
    ("storage.k8s.io", "VolumeAttributesClass"): validate_volume_attributes_class,
    ("resource.k8s.io", "DeviceClass"): validate_device_class,
    ("resource.k8s.io", "ResourceSlice"): validate_resource_slice,
    ("resource.k8s.io", "ResourceClaim"): validate_resource_claim,
    ("resource.k8s.io", "ResourceClaimTemplate"): validate_resource_claim_template,
    ("events.k8s.io", "Event"): validate_events_v1,
    ("discovery.k8s.io", "EndpointSlice"): validate_endpoint_slice,
    ("autoscaling", "HorizontalPodAutoscaler"): validate_hpa,
    ("certificates.k8s.io", "CertificateSigningRequest"): validate_csr,
    ("networking.k8s.io", "NetworkPolicy"): validate_network_policy,
    ("networking.k8s.io", "Ingress"): validate_ingress,
    ("networking.k8s.io", "IngressClass"): validate_ingress_class,
    ("networking.k8s.io", "ServiceCIDR"): validate_service_cidr,
    ("networking.k8s.io", "IPAddress"): validate_ip_address,
    ("node.k8s.io", "RuntimeClass"): validate_runtime_class,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"): validate_admission_policy,
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"): validate_admission_policy_binding,
}

# Create-only virtual kinds: never stored, so the server does not validate their metadata.
_UNVALIDATED_KINDS = frozenset({
    "TokenReview", "SubjectAccessReview", "SelfSubjectAccessReview", "LocalSubjectAccessReview",
    "SelfSubjectRulesReview", "SelfSubjectReview", "Binding", "Eviction", "Scale", "DeleteOptions", "Status",
})


def validate(group: str, kind: str, obj: Obj, old: Obj | None = None) -> Causes:
    """All validation causes for ``obj`` (an update when ``old`` is given), deduplicated.

    Kinds without a specific validator, custom resources included, get ObjectMeta
    validation. Identical causes are reported once, as the server's aggregate message does.
    """
    if kind in _UNVALIDATED_KINDS:
        return []
    validator = VALIDATORS.get((group, kind), validate_generic)
    causes = validator(obj, old)
    if len(causes) < 2:
        return causes
    seen: set[tuple[str, str]] = set()
    unique: Causes = []
    for c in causes:
        key = (c["field"], c["message"])
        if key not in seen:
            seen.add(key)
            unique.append(c)
    return unique
