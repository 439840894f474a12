"""Discovery documents (``/api``, ``/apis``, per group-version lists) and the OpenAPI v3 index.

Legacy discovery is enough for kubectl and client-go: they ask for aggregated discovery
first and fall back to these documents when the answer's Content-Type is plain JSON.

The OpenAPI v3 documents are deliberately small: kubectl reads them only to learn whether
the server validates fields itself (a ``fieldValidation`` query parameter on each kind's
PATCH operation, tagged with ``x-kubernetes-group-version-kind``). Answering yes makes
kubectl send ``fieldValidation=Strict`` and leave validation to this server, which knows
every CRD's schema, instead of downloading full schemas to validate client-side.
"""

from __future__ import annotations

import hashlib
from typing import Any

from koordinator.apiserver.resources import Registry, ResourceType

KUBE_VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-koordinator", "gitCommit": "koordinator",
                "gitTreeState": "clean", "buildDate": "2026-11-01T00:00:00Z", "goVersion": "n/a",
                "compiler": "python", "platform": "linux/amd64"}


def version_order_key(version: str) -> tuple[int, int, int]:
    """Kubernetes version priority: GA > beta > alpha, higher numbers first (as a sort key, ascending)."""
    import re

    m = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if not m:
        return (3, 0, 0)
    major = int(m.group(1))
    stage = {"alpha": 2, "beta": 1, None: 0}[m.group(2)]
    minor = int(m.group(3) or 0)
    return (stage, -major, -minor)


def api_versions(server_address: str) -> dict[str, Any]:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_entry(name: str, versions: list[str]) -> dict[str, Any]:
    ordered = sorted(versions, key=version_order_key)
    gvs = [{"groupVersion": f"{name}/{v}", "version": v} for v in ordered]
    return {"name": name, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list(registry: Registry) -> dict[str, Any]:
    groups = registry.group_versions()
    return {"kind": "APIGroupList", "apiVersion": "v1",
            "groups": [_group_entry(g, vs) for g, vs in groups.items() if g]}


def api_group(registry: Registry, group: str) -> dict[str, Any] | None:
    versions = registry.group_versions().get(group)
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_entry(group, versions)}


def _resource_entries(rt: ResourceType) -> list[dict[str, Any]]:
    main: dict[str, Any] = {"name": rt.plural, "singularName": rt.singular, "namespaced": rt.namespaced,
                            "kind": rt.kind, "verbs": rt.verbs}
    if rt.short_names:
        main["shortNames"] = rt.short_names
    if rt.categories:
        main["categories"] = rt.categories
    out = [main]
    for sub in rt.subresources:
        if sub == "status":
            out.append({"name": f"{rt.plural}/status", "singularName": "", "namespaced": rt.namespaced,
                        "kind": rt.kind, "verbs": ["get", "patch", "update"]})
        elif sub == "scale":
            out.append({"name": f"{rt.plural}/scale", "singularName": "", "namespaced": rt.namespaced,
                        "group": "autoscaling", "version": "v1", "kind": "Scale",
                        "verbs": ["get", "patch", "update"]})
        elif sub == "binding":
            out.append({"name": f"{rt.plural}/binding", "singularName": "", "namespaced": rt.namespaced,
                        "kind": "Binding", "verbs": ["create"]})
        elif sub == "approval":
            out.append({"name": f"{rt.plural}/approval", "singularName": "", "namespaced": rt.namespaced,
                        "kind": rt.kind, "verbs": ["get", "patch", "update"]})
        elif sub == "token":
            out.append({"name": f"{rt.plural}/token", "singularName": "", "namespaced": rt.namespaced,
                        "group": "authentication.k8s.io", "version": "v1", "kind": "TokenRequest",
                        "verbs": ["create"]})
        elif sub == "eviction":
            out.append({"name": f"{rt.plural}/eviction", "singularName": "", "namespaced": rt.namespaced,
                        "group": "policy", "version": "v1", "kind": "Eviction", "verbs": ["create"]})
    return out


def api_resource_list(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = [rt for rt in registry.all() if rt.group == group and rt.version == version]
    if not types:
        return None
    resources = [e for rt in sorted(types, key=lambda t: t.plural) for e in _resource_entries(rt)]
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def openapi_v3_index(registry: Registry) -> dict[str, Any]:
    paths: dict[str, Any] = {}
    for group, versions in registry.group_versions().items():
        for version in versions:
            doc_path = _gv_path(group, version)
            digest = hashlib.sha256(repr(sorted(
                (rt.plural, rt.kind) for rt in registry.all() if rt.group == group and rt.version == version
            )).encode()).hexdigest()[:16].upper()
            paths[doc_path] = {"serverRelativeURL": f"/openapi/v3/{doc_path}?hash={digest}"}
    return {"paths": paths}


_QUERY_PARAMS = ["dryRun", "fieldManager", "fieldValidation", "force"]


def openapi_v3_document(registry: Registry, group: str, version: str) -> dict[str, Any] | None:
    types = [rt for rt in registry.all() if rt.group == group and rt.version == version]
    if not types:
        return None
    params = [{"name": p, "in": "query", "schema": {"type": "string"}, "uniqueItems": True} for p in _QUERY_PARAMS]
    paths: dict[str, Any] = {}
    base = "/" + _gv_path(group, version)
    for rt in types:
        gvk = {"group": group, "version": version, "kind": rt.kind}
        item = (f"{base}/namespaces/{{namespace}}/{rt.plural}/{{name}}" if rt.namespaced
                else f"{base}/{rt.plural}/{{name}}")
        op = {"operationId": f"patch{rt.kind}", "parameters": params, "x-kubernetes-action": "patch",
              "x-kubernetes-group-version-kind": gvk, "responses": {"200": {"description": "OK"}}}
        paths[item] = {"patch": op,
                       "put": {**op, "operationId": f"replace{rt.kind}", "x-kubernetes-action": "put"}}
        collection = item.rsplit("/", 1)[0]
        paths[collection] = {"post": {**op, "operationId": f"create{rt.kind}", "x-kubernetes-action": "post"}}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes", "version": KUBE_VERSION["gitVersion"]},
            "paths": paths, "components": {}}
