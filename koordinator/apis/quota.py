"""ElasticQuota labels, annotations and the built-in quota names (Koordinator's ``apis/extension/elastic_quota.go``).

Shared by the scheduler's ElasticQuota plugin and anything else that reads the quota tree. Pure: no API access.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

QUOTA_PREFIX = "quota.scheduling.koordinator.sh/"

SYSTEM_QUOTA = "koordinator-system-quota"
ROOT_QUOTA = "koordinator-root-quota"
DEFAULT_QUOTA = "koordinator-default-quota"
DEFAULT_QUOTA_NAMESPACE = "koordinator-system"

LABEL_QUOTA_NAME = QUOTA_PREFIX + "name"
LABEL_IS_PARENT = QUOTA_PREFIX + "is-parent"
LABEL_PARENT = QUOTA_PREFIX + "parent"
LABEL_IS_ROOT = QUOTA_PREFIX + "is-root"
LABEL_TREE_ID = QUOTA_PREFIX + "tree-id"
LABEL_ALLOW_LENT_RESOURCE = QUOTA_PREFIX + "allow-lent-resource"
LABEL_PREEMPTIBLE = QUOTA_PREFIX + "preemptible"
LABEL_ALLOW_FORCE_UPDATE = QUOTA_PREFIX + "allow-force-update"

ANNOTATION_SHARED_WEIGHT = QUOTA_PREFIX + "shared-weight"
ANNOTATION_NAMESPACES = QUOTA_PREFIX + "namespaces"
ANNOTATION_TOTAL_RESOURCE = QUOTA_PREFIX + "total-resource"
ANNOTATION_RUNTIME = QUOTA_PREFIX + "runtime"
ANNOTATION_REQUEST = QUOTA_PREFIX + "request"
ANNOTATION_CHILD_REQUEST = QUOTA_PREFIX + "child-request"
ANNOTATION_GUARANTEED = QUOTA_PREFIX + "guaranteed"
ANNOTATION_ALLOCATED = QUOTA_PREFIX + "allocated"
ANNOTATION_NON_PREEMPTIBLE_REQUEST = QUOTA_PREFIX + "non-preemptible-request"
ANNOTATION_NON_PREEMPTIBLE_USED = QUOTA_PREFIX + "non-preemptible-used"
ANNOTATION_MAX_STRICT_CHECK_KEYS = QUOTA_PREFIX + "max-strict-check-resource-keys"
# Written by the manager's ElasticQuotaProfile controller.
LABEL_PROFILE = QUOTA_PREFIX + "profile"
ANNOTATION_RESOURCE_KEYS = QUOTA_PREFIX + "resource-keys"
ANNOTATION_UNSCHEDULABLE_RESOURCE = QUOTA_PREFIX + "unschedulable-resource"

#: ``MaxInt64 / 5``: the default max of the default and system quotas (a DecimalSI quantity).
DEFAULT_GROUP_MAX_VALUE = (2 ** 63 - 1) // 5


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("labels") or {}


def annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return _meta(obj).get("annotations") or {}


def parent_name(quota: Mapping[str, Any]) -> str:
    """The parent label; empty means the root quota (the root itself has no parent)."""
    parent = labels(quota).get(LABEL_PARENT, "")
    if not parent and _meta(quota).get("name") != ROOT_QUOTA:
        return ROOT_QUOTA
    return parent


def is_parent(quota: Mapping[str, Any]) -> bool:
    return labels(quota).get(LABEL_IS_PARENT) == "true"


def allow_lent_resource(quota: Mapping[str, Any]) -> bool:
    """``allow-lent-resource`` is true unless the label says ``"false"``."""
    return labels(quota).get(LABEL_ALLOW_LENT_RESOURCE) != "false"


def annotation_namespaces(quota: Mapping[str, Any]) -> list[str]:
    """The JSON string list in the namespaces annotation; an unparsable value binds nothing."""
    raw = annotations(quota).get(ANNOTATION_NAMESPACES, "")
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def shared_weight_raw(quota: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The shared-weight annotation as a raw ResourceList (None when absent or unparsable: default = max)."""
    raw = annotations(quota).get(ANNOTATION_SHARED_WEIGHT, "")
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def is_non_preemptible(pod: Mapping[str, Any]) -> bool:
    return labels(pod).get(LABEL_PREEMPTIBLE) == "false"
