"""Request paths: ``/api/v1/...`` and ``/apis/GROUP/VERSION/...`` to the resource they name."""

from __future__ import annotations

from dataclasses import dataclass

from koordinator.apiserver import discovery, errors
from koordinator.apiserver.http import Response
from koordinator.apiserver.resources import Registry, ResourceType


@dataclass
class Route:
    """The resource a request path names: group/version/plural, namespace, object name, subresource."""

    group: str
    version: str
    plural: str
    namespace: str | None
    name: str | None
    sub: str | None


def method_not_allowed() -> errors.StatusError:
    """kube-apiserver's 405 for a non-GET request to a path only GET routes serve (/version, /api, ...)."""
    return errors.StatusError(405, "MethodNotAllowed", "the server does not allow this method on the requested "
                              "resource", {})


def parse_route(path: str, registry: Registry, method: str = "GET") -> Route | Response:
    """The route of a resource path, or the discovery document a group or group/version path asks for.

    ``method`` matters for discovery documents only: kube-aggregator serves ``/apis/GROUP`` to any
    method (its handler never looks), and so does apiextensions a CRD group/version's list, but a
    built-in group/version's list is a GET-only go-restful route: other methods get a 405.
    """
    parts = [p for p in path.split("/") if p]
    if not parts or parts[0] not in ("api", "apis"):
        raise errors.not_found_path()
    if parts[0] == "api":
        if len(parts) < 2 or parts[1] != "v1":
            raise errors.not_found_path()
        group, version, rest = "", "v1", parts[2:]
    else:
        if len(parts) == 2:
            doc = discovery.api_group(registry, parts[1])
            if doc is None:
                raise errors.not_found_path()
            return Response.json(200, doc)
        group, version, rest = parts[1], parts[2], parts[3:]
    if not rest:
        doc = discovery.api_resource_list(registry, group, version)
        if doc is None:
            raise errors.not_found_path()
        if method not in ("GET", "HEAD") and any(
                rt.builtin for rt in registry.all() if rt.group == group and rt.version == version):
            raise method_not_allowed()
        return Response.json(200, doc)
    namespace = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        if group == "" and len(rest) == 3 and rest[2] in ("status", "finalize"):
            return Route(group, version, "namespaces", None, rest[1], rest[2])
        namespace, rest = rest[1], rest[2:]
    if len(rest) > 3:
        raise errors.not_found_path()
    plural = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    return Route(group, version, plural, namespace, name, sub)


def resource_of(route: Route, registry: Registry) -> ResourceType:
    """The served kind ``route`` names; 404 when it is not served (or not with that scope or subresource)."""
    rt = registry.get(route.group, route.version, route.plural)
    if rt is None or (route.namespace is not None and not rt.namespaced):
        raise errors.not_found_path()
    if route.sub is not None and route.sub not in rt.subresources and not (
            rt.plural == "namespaces" and route.sub == "finalize"):
        raise errors.not_found_path()
    return rt


def openapi_document(registry: Registry, gv_path: str) -> Response:
    """``/openapi/v3/api/v1`` or ``/openapi/v3/apis/GROUP/VERSION``."""
    parts = gv_path.split("/")
    if parts[0] == "api" and len(parts) == 2:
        doc = discovery.openapi_v3_document(registry, "", parts[1])
    elif parts[0] == "apis" and len(parts) == 3:
        doc = discovery.openapi_v3_document(registry, parts[1], parts[2])
    else:
        doc = None
    if doc is None:
        raise errors.not_found_path()
    return Response.json(200, doc)
