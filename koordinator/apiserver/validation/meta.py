"""ObjectMeta validation (``ValidateObjectMeta``): names, labels, annotations, owner references,
finalizers; also the validator of kinds that have nothing but metadata to check.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.errors import required, too_long
from koordinator.apiserver.validation.causes import (
    Causes,
    NameFn,
    Obj,
    as_dict,
    as_list,
    as_str,
    go_quote,
    invalid,
    invalid_rendered,
    nonnegative,
)
from koordinator.apiserver.validation.formats import is_label_value, is_qualified_name, name_is_dns_subdomain


_TOTAL_ANNOTATION_SIZE = 256 * 1024
STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})


def validate_labels(labels: Any, path: str) -> Causes:
    """``ValidateLabels``: qualified-name keys, label values; errors sit on ``path`` itself."""
    causes: Causes = []
    for key, val in as_dict(labels).items():
        causes.extend(invalid(path, key, m) for m in is_qualified_name(str(key)))
        if isinstance(val, str):
            causes.extend(invalid(path, val, m) for m in is_label_value(val))
    return causes


def validate_annotations(annotations: Any, path: str) -> Causes:
    """``ValidateAnnotations``: case-insensitive qualified keys and the 256 KiB total."""
    causes: Causes = []
    total = 0
    for key, val in as_dict(annotations).items():
        key = str(key)
        causes.extend(invalid(path, key, m) for m in is_qualified_name(key.lower()))
        total += len(key) + (len(val) if isinstance(val, str) else 0)
    if total * 4 > _TOTAL_ANNOTATION_SIZE:
        # Only pay for exact byte counting when the character count could exceed the limit.
        size = sum(len(str(k).encode()) + len(as_str(v).encode()) for k, v in as_dict(annotations).items())
        if size > _TOTAL_ANNOTATION_SIZE:
            causes.append(too_long(path, _TOTAL_ANNOTATION_SIZE))
    return causes


def _validate_owner_references(refs: Any, path: str) -> Causes:
    causes: Causes = []
    controller = ""
    for ref in (as_dict(r) for r in as_list(refs)):
        api_version = as_str(ref.get("apiVersion"))
        version = api_version.rsplit("/", 1)[-1] if api_version else ""
        if not version:
            causes.append(invalid(f"{path}.apiVersion", api_version, "version must not be empty"))
        for fld in ("kind", "name", "uid"):
            if not as_str(ref.get(fld)):
                causes.append(invalid(f"{path}.{fld}", as_str(ref.get(fld)), "must not be empty"))
        if ref.get("controller") is True:
            current = f"{as_str(ref.get('kind'))}/{as_str(ref.get('name'))}"
            if controller:
                causes.append(invalid_rendered(path, "[]v1.OwnerReference{...}", (
                    f'Only one reference can have Controller set to true. Found "true" in references for '
                    f"{controller} and {current}")))
            else:
                controller = current
    return causes


def _validate_finalizers(finalizers: Any, path: str, kube: bool) -> Causes:
    causes: Causes = []
    items = [f for f in as_list(finalizers) if isinstance(f, str)]
    for f in items:
        causes.extend(invalid(path, f, m) for m in is_qualified_name(f))
    if "orphan" in items and "foregroundDeletion" in items:
        causes.append(invalid_rendered(path, "[]string{" + ", ".join(go_quote(f) for f in items) + "}",
                                       "finalizer orphan and foregroundDeletion cannot be both set"))
    if kube:
        for i, f in enumerate(items):
            if "/" not in f and f not in STANDARD_FINALIZERS:
                causes.append(invalid(f"{path}[{i}]", f,
                                      "name is neither a standard finalizer name nor is it fully qualified"))
    return causes


def validate_object_meta(obj: Obj, name_fn: NameFn = name_is_dns_subdomain, kube: bool = True,
                         path: str = "metadata") -> Causes:
    """``ValidateObjectMeta``: name/generateName, labels, annotations, owners, finalizers.

    ``kube`` adds core's extra finalizer rule (unqualified names must be standard), which
    custom resources do not get. Namespace presence is the caller's business.
    """
    md = as_dict(obj.get("metadata"))
    causes: Causes = []
    generate = as_str(md.get("generateName"))
    if generate:
        causes.extend(invalid(f"{path}.generateName", generate, m) for m in name_fn(generate, True))
    name = as_str(md.get("name"))
    if not name:
        causes.append(required(f"{path}.name", "name or generateName is required"))
    else:
        causes.extend(invalid(f"{path}.name", name, m) for m in name_fn(name, False))
    causes.extend(nonnegative(md.get("generation"), f"{path}.generation"))
    causes.extend(validate_labels(md.get("labels"), f"{path}.labels"))
    causes.extend(validate_annotations(md.get("annotations"), f"{path}.annotations"))
    causes.extend(_validate_owner_references(md.get("ownerReferences"), f"{path}.ownerReferences"))
    causes.extend(_validate_finalizers(md.get("finalizers"), f"{path}.finalizers", kube))
    return causes


def validate_generic(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj, kube=False)


def validate_core_generic(obj: Obj, old: Obj | None) -> Causes:
    return validate_object_meta(obj)
