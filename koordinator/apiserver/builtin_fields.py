"""Unknown-field pruning for the built-in kinds, at every depth.

kube-apiserver decodes a request body into Go structs, so a field the kind does not have is dropped
wherever it sits (``spec.replicas`` of a Service, ``spec.template.spec.containers[0].imagePullPolicyx``
of a Deployment) and reported to ``fieldValidation``. The field tables are those the protobuf decoder
uses (``protobuf_schema``), completed by ``JSON_ONLY_FIELDS``: fields of those messages that the
protobuf tables do not decode (no field number recorded) but that a JSON body may carry; they are
kept as sent, without looking inside.

``tests/test_apiserver_builtin_fields.py`` checks the tables against the field lists of the
``kubernetes`` client's models, so that no field the API has is dropped.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from koordinator.apiserver import protobuf_schema
from koordinator.apiserver.protobuf_schema import Field

#: message -> JSON fields without a protobuf field number in ``protobuf_schema``, kept as sent.
JSON_ONLY_FIELDS: dict[str, frozenset[str]] = {msg: frozenset(names.split()) for msg, names in {
    "ObjectMeta": "managedFields",
    "DeleteOptions": "apiVersion kind",
    # The in-tree cloud and legacy volume plugins.
    "VolumeSource": "awsElasticBlockStore azureDisk azureFile cephfs cinder fc flexVolume flocker gcePersistentDisk "
                    "glusterfs iscsi photonPersistentDisk portworxVolume quobyte rbd scaleIO storageos vsphereVolume",
    "VolumeProjection": "podCertificate",
    "VolumeMount": "bindMountOptions",
    "VolumeMountStatus": "volumeStatus",
    "ConfigMapVolumeSource": "defaultUser",
    "SecretVolumeSource": "defaultUser",
    "DownwardAPIVolumeSource": "defaultUser",
    "ProjectedVolumeSource": "defaultUser",
    "DownwardAPIVolumeFile": "user",
    "KeyToPath": "user",
    "ServiceAccountTokenProjection": "user",
    "ClusterTrustBundleProjection": "user",
    "EmptyDirVolumeSource": "mode",
    "GRPCAction": "mode",
    "HTTPGetAction": "protocol",
    "PodSpec": "evictionResponders schedulingGroup",
    "PodStatus": "allocatedResources extendedResourceClaimStatus nodeAllocatableResourceClaimStatuses "
                 "resourceClaimStatuses resources volumeHealth",
    "ContainerStatus": "allocatedResourcesStatus user",
    "NodeSpec": "configSource podPreemptionPolicy",
    "NodeStatus": "config declaredFeatures features runtimeHandlers",
    "NodeSystemInfo": "runningInUserNamespace swap",
    "PersistentVolumeClaimStatus": "allocatedResourceStatuses allocatedResources conditions "
                                   "currentVolumeAttributesClassName healthStatus modifyVolumeStatus",
    "JobSpec": "scheduling",
    "ResourceAttributes": "fieldSelector labelSelector",
    "SubjectAccessReviewSpec": "extra",
    "SelfSubjectAccessReview": "status",
    "SelfSubjectRulesReview": "status",
    "SubjectAccessReview": "status",
    "TokenRequestSpec": "attestations",
    "Device": "nodeAllocatableResources",
    "DeviceAttribute": "bools ints strings versions",
    "DeviceCounterConsumption": "compatibilityGroups",
    "DeviceRequestAllocationResult": "skipNodeOperations",
    "DeviceSubRequest": "derivedAttributes",
    "ExactDeviceRequest": "derivedAttributes",
    "ResourceSliceSpec": "partitionTypeAttribute skipNodeOperations",
}.items()}

_TOP_LEVEL = frozenset({"apiVersion", "kind", "metadata"})


@lru_cache(maxsize=None)
def fields_of(message: str) -> dict[str, Field | None]:
    """JSON name -> field of ``message`` (inline members flattened); None for a field kept as sent."""
    out: dict[str, Field | None] = dict.fromkeys(JSON_ONLY_FIELDS.get(message, ()))
    for fld in protobuf_schema.MESSAGES[message].values():
        if fld.inline:
            out.update(fields_of(fld.type))
        else:
            out[fld.name] = fld
    return out


def covers(api_version: str, kind: str) -> bool:
    """Whether the field tables cover this built-in kind (others are stored with nested fields as sent)."""
    return protobuf_schema.message_for(api_version, kind) is not None


def prune_unknown(api_version: str, kind: str, obj: dict[str, Any]) -> list[str]:
    """Drop from ``obj`` (in place) every field its kind does not have; their paths, as kube names them
    (``spec.template.spec.containers[0].foo``). A kind the tables do not cover is left alone."""
    message = protobuf_schema.message_for(api_version, kind)
    if message is None:
        return []
    unknown: list[str] = []
    known = fields_of(message)
    for name in list(obj):
        if name in _TOP_LEVEL:
            continue
        if name not in known:
            del obj[name]
            unknown.append(name)
        else:
            _prune_value(known[name], obj[name], name, unknown)
    if isinstance(obj.get("metadata"), dict):
        _prune_message("ObjectMeta", obj["metadata"], "metadata", unknown)
    return unknown


def _prune_message(message: str, value: dict[str, Any], path: str, unknown: list[str]) -> None:
    known = fields_of(message)
    for name in list(value):
        if name not in known:
            del value[name]
            unknown.append(f"{path}.{name}")
        else:
            _prune_value(known[name], value[name], f"{path}.{name}", unknown)


def _prune_value(fld: Field | None, value: Any, path: str, unknown: list[str]) -> None:
    # A wrongly typed value is left for validation to name; scalars have nothing below them.
    if fld is None or fld.type in protobuf_schema.SCALARS:
        return
    if fld.map_value:
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, dict):
                    _prune_message(fld.type, item, f"{path}[{key}]", unknown)
    elif fld.repeated:
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _prune_message(fld.type, item, f"{path}[{i}]", unknown)
    elif isinstance(value, dict):
        _prune_message(fld.type, value, path, unknown)

