"""CustomResourceDefinitions: validation, Established status, and serving their kinds.

Creating a CRD registers one ``ResourceType`` per served version, at once (the real
server needs a moment; clients wait for ``Established``, which is already true when the
create returns). Objects are validated, pruned and defaulted by the version's structural
schema; deleting the CRD deletes every object of it.
"""

from __future__ import annotations

import re
from typing import Any

from koordinator.apiserver import errors
from koordinator.apis.crdschema import StructuralSchema, check_crd_schema
from koordinator.apiserver.objects import now_rfc3339
from koordinator.apiserver.resources import Registry, ResourceType, jsonpath_fields
from koordinator.apiserver.store import Store

Obj = dict[str, Any]
CRD_STORAGE = "apiextensions.k8s.io/customresourcedefinitions"
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_VERSION = re.compile(r"^v\d+((alpha|beta)\d+)?$")


class CustomResource:
    """What a served custom kind needs per version: schema, printer columns, scale paths."""

    def __init__(self, crd: Obj) -> None:
        self.crd = crd
        self._versions = {v["name"]: v for v in crd["spec"]["versions"]}
        self._schemas: dict[str, StructuralSchema] = {}

    def _version(self, version: str) -> Obj:
        return self._versions[version]

    def schema(self, version: str) -> StructuralSchema | None:
        if version not in self._schemas:
            raw = ((self._version(version).get("schema") or {}).get("openAPIV3Schema"))
            if raw is None:
                return None
            self._schemas[version] = StructuralSchema(raw)
        return self._schemas[version]

    def process(self, version: str, obj: Obj):
        schema = self.schema(version)
        if schema is None:
            from types import SimpleNamespace

            return SimpleNamespace(obj=obj, unknown_fields=[], causes=[])
        status_sub = "status" in (self._version(version).get("subresources") or {})
        return schema.process(obj, status_subresource=status_sub)

    def unknown_fields(self, version: str, part: Obj) -> list[str]:
        """Paths of the fields in ``part`` (some top-level fields of an object) the schema does not know."""
        schema = self.schema(version)
        return schema.process(part).unknown_fields if schema is not None else []

    def printer_columns(self, version: str) -> list[Obj] | None:
        return self._version(version).get("additionalPrinterColumns")

    def scale_paths(self, version: str) -> tuple[str, str, str]:
        scale = (self._version(version).get("subresources") or {}).get("scale") or {}
        return (scale.get("specReplicasPath", ".spec.replicas"), scale.get("statusReplicasPath", ".status.replicas"),
                scale.get("labelSelectorPath", ""))


class CrdManager:
    """Keeps the server's registry in step with the stored CRDs."""

    def __init__(self, store: Store, registry: Registry) -> None:
        self.store = store
        self.registry = registry

    def load_stored(self) -> None:
        for entry in list(self.store.items(CRD_STORAGE).values()):
            self.register(entry.obj())

    def validate(self, crd: Obj, old: Obj | None) -> list[dict[str, str]]:
        causes: list[dict[str, str]] = []
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group = spec.get("group") or ""
        plural = names.get("plural") or ""
        if not group:
            causes.append(errors.required("spec.group"))
        elif "." not in group:
            causes.append(errors.invalid_value("spec.group", group, "should be a domain with at least one dot"))
        if not plural:
            causes.append(errors.required("spec.names.plural"))
        elif not _DNS_LABEL.match(plural):
            causes.append(errors.invalid_value("spec.names.plural", plural,
                                               "a lowercase RFC 1123 label must consist of lower case alphanumeric "
                                               "characters or '-', and must start and end with an alphanumeric "
                                               "character"))
        if not names.get("kind"):
            causes.append(errors.required("spec.names.kind"))
        name = crd["metadata"].get("name", "")
        if plural and group and name != f"{plural}.{group}":
            causes.append(errors.invalid_value("metadata.name", name, "must be spec.names.plural+\".\"+spec.group"))
        scope = spec.get("scope")
        if scope not in ("Namespaced", "Cluster"):
            causes.append(errors.not_supported("spec.scope", scope, ["Cluster", "Namespaced"]) if scope
                          else errors.required("spec.scope"))
        versions = spec.get("versions") or []
        if not versions:
            causes.append(errors.required("spec.versions", "must have exactly one version marked as storage version"))
        storage = [v for v in versions if isinstance(v, dict) and v.get("storage")]
        if versions and len(storage) != 1:
            causes.append(errors.invalid_value("spec.versions", len(storage),
                                               "must have exactly one version marked as storage version"))
        for i, v in enumerate(versions):
            if not isinstance(v, dict):
                causes.append(errors.invalid_value(f"spec.versions[{i}]", v, "must be an object"))
                continue
            if not v.get("name") or not _VERSION.match(str(v.get("name"))):
                causes.append(errors.invalid_value(f"spec.versions[{i}].name", v.get("name"),
                                                   "a DNS-1035 label of the form vN, vNalphaM or vNbetaM"))
            schema = (v.get("schema") or {}).get("openAPIV3Schema")
            if schema is None:
                causes.append(errors.required(f"spec.versions[{i}].schema.openAPIV3Schema",
                                              "schemas are required"))
            else:
                causes += check_crd_schema(schema, f"spec.versions[{i}].schema.openAPIV3Schema")
        if group and plural and self.registry.get(group, (versions[0] or {}).get("name", "") if versions else "",
                                                      plural) is not None:
            existing = self.registry.get(group, versions[0].get("name", ""), plural)
            if existing is not None and existing.builtin:
                causes.append(errors.invalid_value("metadata.name", name, "conflicts with a built-in resource"))
        if old is not None:
            old_spec = old.get("spec") or {}
            if old_spec.get("group") != group:
                causes.append(errors.invalid_value("spec.group", group, "field is immutable"))
            if (old_spec.get("names") or {}).get("plural") != plural:
                causes.append(errors.invalid_value("spec.names.plural", plural, "field is immutable"))
        return causes

    def prepare(self, crd: Obj) -> None:
        """Defaults and the status a healthy CRD reports (NamesAccepted, Established)."""
        spec = crd["spec"]
        names = spec["names"]
        names.setdefault("singular", names["kind"].lower())
        names.setdefault("listKind", names["kind"] + "List")
        spec.setdefault("conversion", {"strategy": "None"})
        now = now_rfc3339()
        crd["status"] = {
            "acceptedNames": {k: names[k] for k in ("plural", "singular", "kind", "listKind", "shortNames",
                                                      "categories") if k in names},
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                 "message": "no conflicts found", "lastTransitionTime": now},
                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                 "message": "the initial names have been accepted", "lastTransitionTime": now},
            ],
            "storedVersions": [v["name"] for v in spec["versions"] if v.get("storage")],
        }

    def register(self, crd: Obj) -> None:
        """Serve (or re-serve, after an update) every served version of ``crd``."""
        spec = crd["spec"]
        names = spec["names"]
        group, plural = spec["group"], names["plural"]
        self.registry.remove_group_resource(group, plural)
        custom = CustomResource(crd)
        for v in spec["versions"]:
            if not v.get("served", True):
                continue
            subresources = tuple(k for k in ("status", "scale") if k in (v.get("subresources") or {}))
            selectable = [f["jsonPath"] for f in v.get("selectableFields") or [] if f.get("jsonPath")]
            rt = ResourceType(
                group=group, version=v["name"], plural=plural, kind=names["kind"],
                namespaced=spec.get("scope") == "Namespaced", singular=names.get("singular", names["kind"].lower()),
                short_names=list(names.get("shortNames") or []), categories=list(names.get("categories") or []),
                subresources=subresources, tracks_generation=True,
                extra_fields=jsonpath_fields(selectable) if selectable else None, crd=custom,
                list_kind=names.get("listKind", names["kind"] + "List"),
            )
            self.registry.add(rt)
        storage_key = f"{group}/{plural}"
        types = self.registry.versions_of(storage_key)
        if types:
            self.store.register(storage_key, types[0].selectable_fields)

    def removed(self, crd: Obj) -> None:
        """The CRD is gone: so are its objects and its kinds."""
        spec = crd["spec"]
        storage_key = f"{spec['group']}/{spec['names']['plural']}"
        for key in list(self.store.items(storage_key)):
            self.store.remove(storage_key, key)
        self.registry.remove_group_resource(spec["group"], spec["names"]["plural"])
