"""Field validation of built-in kinds, with kube-apiserver's field paths and messages.

``validate(group, kind, obj, old)`` returns every cause (not just the first), in the order
the real server reports them, ready for :func:`koordinator.apiserver.errors.invalid`. Kinds
without a validator of their own (custom resources included) get ObjectMeta validation.

Decode-stage failures are separate, because the real server answers them with a 400
before any validation runs: :func:`check_metadata_types` (non-string label/annotation
values, malformed quantities in built-in kinds) returns the detail text for
``errors.cannot_handle``. ``validate`` assumes that check passed: quantities it cannot parse
are skipped rather than reported twice.

Messages follow kube-apiserver v1.36 (``k8s.io/apimachinery`` field errors, the
``content`` package's format messages, ``pkg/apis/*/validation``). Values that Go prints
with ``%#v`` (maps, structs) are rendered the same way where that is deterministic;
pointer addresses, which Go prints as ``0xc...``, are rendered as ``0xc000000000``.

One module per API group (``core``, ``apps``, ``batch``, ``policy``, ``rbac``, ``storage``,
``resource``, ``networking``, ``admissionregistration``, ...), the pod spec all workloads share
in ``podspec``, and the shared helpers in ``causes`` (field errors, Go rendering), ``formats``
(names, labels, ports), ``meta`` (ObjectMeta), ``core_resources`` (resource names and
quantities) and ``decoding`` (the 400s). This package exports what the rest of the server and
its tests use.
"""

from koordinator.apiserver.validation.causes import go_string_map
from koordinator.apiserver.validation.decoding import check_metadata_types, check_quantities, rfc3339_error
from koordinator.apiserver.validation.formats import (
    is_dns1123_label,
    is_dns1123_subdomain,
    is_label_value,
    is_qualified_name,
    name_is_dns_label,
    name_is_dns_subdomain,
    name_is_path_segment,
)
from koordinator.apiserver.validation.podspec import selector_matches
from koordinator.apiserver.validation.registry import VALIDATORS, validate

__all__ = [
    "VALIDATORS", "check_metadata_types", "check_quantities", "go_string_map", "is_dns1123_label",
    "is_dns1123_subdomain", "is_label_value", "is_qualified_name", "name_is_dns_label", "name_is_dns_subdomain",
    "name_is_path_segment", "rfc3339_error", "selector_matches", "validate",
]
