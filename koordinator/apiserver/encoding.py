"""Request bodies in, objects out: decoding, served versions, tables, warnings and write responses."""

from __future__ import annotations

from typing import Any

import orjson

from koordinator.apiserver import errors, protobuf, tables
from koordinator.apiserver.http import Request, Response
from koordinator.apiserver.objects import load_yaml
from koordinator.apiserver.resources import Registry, ResourceType
from koordinator.apiserver.store import Entry

Obj = dict[str, Any]

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
PATCH_TYPES = (JSON_PATCH, MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH)


def decode(req: Request, rt: ResourceType | None) -> Any:
    """The request body (JSON, YAML or protobuf) as a plain value; errors name ``rt``'s kind when given."""
    ctype = req.header("content-type", "application/json").split(";")[0].strip().lower()
    if ctype.startswith("application/vnd.kubernetes.protobuf"):
        # client-go typed clients (most kubectl create generators) send built-in kinds so.
        return protobuf.decode(req.body, rt.kind if rt else None, rt.version if rt else None)
    try:
        if ctype in ("application/yaml", "application/x-yaml", "text/yaml", APPLY_PATCH):
            body = load_yaml(req.body)
        else:
            body = orjson.loads(req.body or b"null")
    except Exception as exc:
        detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if rt is not None:
            raise errors.cannot_handle(rt.kind, rt.version, detail) from None
        raise errors.bad_request(f"the request body could not be decoded: {detail}") from None
    return body


def served(rt: ResourceType, entry: Entry) -> Obj:
    """The object of ``entry`` as ``rt`` serves it (converted when ``rt`` is a view of another form)."""
    obj = entry.obj()
    return rt.view.from_storage(obj) if rt.view is not None else obj


def wants_table(req: Request) -> bool:
    """Whether the client asked for a server-side Table (``kubectl get``)."""
    accept = req.header("accept")
    return "as=Table" in accept


def check_accept(req: Request) -> None:
    """406 unless the client accepts JSON (or YAML, or anything)."""
    accept = req.header("accept")
    if accept and "json" not in accept and "*/*" not in accept and "yaml" not in accept:
        raise errors.not_acceptable(accept)


def warning_headers(warnings: list[str]) -> dict[str, str]:
    """The ``Warning`` header carrying ``warnings`` (each once)."""
    if not warnings:
        return {}
    # RFC 7234 warn-text is a quoted-string: quotes and backslashes inside are escaped.
    return {"Warning": ", ".join(
        '299 - "' + w.replace("\\", "\\\\").replace('"', '\\"') + '"' for w in dict.fromkeys(warnings))}


class Presenter:
    """Renders stored objects for a request: the version asked for, a Table, a write's result."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    def present(self, rt: ResourceType, entry: Entry) -> bytes:
        """The stored bytes, relabelled if the client asked for another served version."""
        if rt.view is not None:
            return orjson.dumps(rt.view.from_storage(entry.obj()))
        versions = self.registry.versions_of(rt.storage_key)
        # Objects are always stored in the form of the one version that is not a converted view.
        if len(versions) < 2 or all(t.view is not None for t in versions if t is not rt):
            return entry.raw
        obj = entry.obj()
        if obj.get("apiVersion") == rt.api_version:
            return entry.raw
        obj["apiVersion"] = rt.api_version
        return orjson.dumps(obj)

    @staticmethod
    def table(req: Request, rt: ResourceType, objs: list[Obj], list_meta: Obj) -> Obj:
        """``objs`` as a meta.k8s.io Table with the kind's (or the CRD's) columns."""
        columns = (rt.crd.printer_columns(rt.version) or []) if rt.crd is not None else None
        include = req.query.get("includeObject", "Metadata")
        return tables.to_table(rt.group, rt.kind, objs, printer_columns=columns, include_object=include,
                               list_meta=list_meta)

    def respond_entry(self, req: Request, rt: ResourceType, entry: Entry) -> Response:
        """A GET of one object: the object, or its Table row."""
        check_accept(req)
        if wants_table(req):
            return Response.json(200, self.table(req, rt, [served(rt, entry)], {"resourceVersion": str(entry.rv)}))
        return Response(200, self.present(rt, entry))

    def respond_object(self, req: Request, rt: ResourceType, result: tuple[int, Any, list[str]] | Any,
                       code: int = 200) -> Response:
        """The response to a write: its status, the object written and the write's warnings."""
        status, body, warnings = result if isinstance(result, tuple) else (code, result, [])
        headers = warning_headers(warnings)
        if isinstance(body, Entry):
            return Response(status, self.present(rt, body), headers=headers)
        if rt.view is not None and isinstance(body, dict) and body.get("apiVersion") == rt.view.storage_api_version:
            body = rt.view.from_storage(body)  # e.g. a dry-run delete answers with the stored object
        return Response.json(status, body, headers=headers)

    def write_response(self, req: Request, rt: ResourceType, result: Any, code: int,
                       warnings: list[str]) -> Response:
        """The response to a finished write, with the warnings its webhook calls returned."""
        if isinstance(result, Response):
            result.headers.update(warning_headers(warnings))
            return result
        if warnings:
            status, body, own = result if isinstance(result, tuple) else (code, result, [])
            result = (status, body, own + warnings)
        return self.respond_object(req, rt, result, code)
