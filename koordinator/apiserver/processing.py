"""What happens to an object's content before it is stored: kind check, defaulting, schema, validation.

kube-apiserver decodes a request body strictly (``fieldValidation``), defaults it, runs a custom
kind's structural schema (pruning, defaulting) and validates it; so does ``ObjectProcessor``.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver import admission, builtin_defaults, builtin_fields, errors, validation
from koordinator.apiserver.crds import CrdManager
from koordinator.apiserver.objects import meta
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import Store

Obj = dict[str, Any]

# Fields of ObjectMeta; anything else under metadata is an unknown field.
OBJECT_META_FIELDS = {
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields",
}


class ObjectProcessor:
    """Checks, defaults and validates the objects of write requests."""

    def __init__(self, store: Store, crds: CrdManager) -> None:
        self.store = store
        self.crds = crds

    def check_kind(self, rt: ResourceType, obj: Any) -> None:
        """400 unless ``obj`` is an object of ``rt``'s kind and version (which it is then stamped with)."""
        if not isinstance(obj, dict):
            raise errors.cannot_handle(rt.kind, rt.version, "the request body must be an object")
        kind = obj.get("kind")
        api_version = obj.get("apiVersion")
        if kind is not None and kind != rt.kind:
            raise errors.bad_request(
                f'{kind} in version "{rt.version}" cannot be handled as a {rt.kind}: no kind "{kind}" is registered '
                f'for version "{rt.api_version}" in scheme "pkg/api/legacyscheme/scheme.go:30"')
        if api_version is not None and api_version != rt.api_version:
            raise errors.bad_request(
                f'the API version in the data ({api_version}) does not match the expected API version '
                f'({rt.api_version})')
        obj["kind"] = rt.kind
        obj["apiVersion"] = rt.api_version
        if obj.get("metadata", {}) is None:
            obj["metadata"] = {}  # Go decodes "metadata: null" as an empty ObjectMeta
        md = obj.get("metadata", {})
        if not isinstance(md, dict):
            raise errors.cannot_handle(rt.kind, rt.version, "json: cannot unmarshal into Go struct field "
                                       f"{rt.kind}.metadata of type v1.ObjectMeta")
        detail = validation.check_metadata_types(rt.kind, rt.version, obj, builtin=rt.builtin)
        if detail:
            raise errors.cannot_handle(rt.kind, rt.version, detail)

    @staticmethod
    def unknown_fields_of(rt: ResourceType, part: Obj) -> list[str]:
        """Unknown fields in ``part``: top-level fields of a request body that the write then drops.

        kube-apiserver decodes the whole body strictly before its strategy drops what the request
        may not change (``status`` on a create, or on an update of the main resource; the rest on
        a ``status`` update), so ``fieldValidation`` names unknown fields there too.
        """
        if rt.crd is None or not part:
            return []
        return rt.crd.unknown_fields(rt.version, part)

    def process(self, rt: ResourceType, obj: Obj, old: Obj | None, query: dict[str, str],
                validate: bool = True, dropped_unknown: list[str] | None = None) -> list[str]:
        """Defaulting, schema processing and validation; returns warnings. Raises 400/422.

        ``validate=False`` stops after defaulting (what mutating webhooks are shown).
        ``dropped_unknown``: unknown fields of the parts of the request body already dropped
        (see ``unknown_fields_of``), reported with the object's own.
        """
        strictness = query.get("fieldValidation", "Warn")
        if strictness not in ("Strict", "Warn", "Ignore"):
            raise errors.bad_request(
                f'fieldValidation must be one of "Ignore", "Warn", or "Strict", got {strictness!r}')
        unknown_meta = [k for k in obj["metadata"] if k not in OBJECT_META_FIELDS]
        for k in unknown_meta:
            del obj["metadata"][k]
        unknown = [f"metadata.{k}" for k in unknown_meta]
        causes: list[dict[str, str]] = []
        if rt.crd is not None:
            result = rt.crd.process(rt.version, obj)
            obj.clear()
            obj.update(result.obj)
            unknown += result.unknown_fields
            causes += result.causes
        else:
            # Like kube-apiserver's typed decoder: a value of the wrong JSON type is a 400, and the fields
            # the kind does not have are dropped at any depth (else a merge patch could store e.g. a "spec"
            # in a ConfigMap or a "spec.replicas" in a Service).
            try:
                unknown += builtin_fields.decode(rt.api_version, rt.kind, obj)
            except builtin_fields.TypeMismatch as err:
                raise errors.cannot_handle(rt.kind, rt.version, str(err)) from None
            builtin_defaults.apply_defaults(rt.group, rt.kind, obj, create=old is None)
        if dropped_unknown:
            unknown += dropped_unknown
        warnings: list[str] = []
        if unknown:
            if strictness == "Strict":
                raise errors.cannot_handle(rt.kind, rt.version, "strict decoding error: " + ", ".join(
                    f'unknown field "{f}"' for f in unknown))
            if strictness == "Warn":
                warnings = [f'unknown field "{f}"' for f in unknown]
        if not validate:
            return warnings
        causes += validation.validate(rt.group, rt.kind, obj, old)
        if rt.group == "apiextensions.k8s.io" and rt.plural == "customresourcedefinitions":
            causes += self.crds.validate(obj, old)
        if causes:
            raise errors.invalid(rt.kind, rt.group, obj["metadata"].get("name", ""), causes)
        if rt.group == "scheduling.k8s.io" and rt.kind == "PriorityClass":
            admission.check_priority_class(self.store, obj)
        return warnings

    def mutated(self, rt: ResourceType, obj: Any) -> Obj:
        """A mutating webhook's result, checked to still be this kind of object."""
        self.check_kind(rt, obj)
        meta(obj)
        return obj
