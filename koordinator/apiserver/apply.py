"""Server-side apply (``application/apply-patch+yaml``), enough for ``kubectl apply --server-side``.

The applied configuration creates the object when absent, and otherwise is merged into it
(strategic merge for built-in kinds, JSON merge for custom ones). The field manager's
ownership is recorded in ``metadata.managedFields`` as the set of fields it applied.

Known gaps against the real server, on purpose for now: no conflict detection between
managers (``force`` is accepted and changes nothing), and fields a manager stops applying
are not removed.
"""

from __future__ import annotations

from typing import Any

import orjson

from koordinator.apiserver import errors, patch, validation
from koordinator.apiserver.encoding import served
from koordinator.apiserver.http import Request
from koordinator.apiserver.objects import now_rfc3339
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.routes import Route
from koordinator.apiserver.writer import ObjectWriter, Steps

Obj = dict[str, Any]


def fields_v1(value: Any) -> Obj:
    """The FieldsV1 set of what ``value`` sets: ``{"f:spec": {"f:replicas": {}}}``."""
    if not isinstance(value, dict):
        return {}
    return {f"f:{k}": fields_v1(v) for k, v in value.items() if k not in ("apiVersion", "kind")}


def _managed_entry(manager: str, api_version: str, applied: Obj, subresource: str | None) -> Obj:
    applied_meta = {k: v for k, v in (applied.get("metadata") or {}).items() if k in ("labels", "annotations")}
    body = {k: v for k, v in applied.items() if k != "metadata"}
    if applied_meta:
        body["metadata"] = applied_meta
    entry = {"manager": manager, "operation": "Apply", "apiVersion": api_version, "time": now_rfc3339(),
             "fieldsType": "FieldsV1", "fieldsV1": fields_v1(body)}
    if subresource:
        entry["subresource"] = subresource
    return entry


def server_side_apply(writer: ObjectWriter, req: Request, rt: ResourceType, route: Route, key: str,
                      applied: Any, admit: bool) -> Steps:
    """Steps of applying ``applied`` to the object at ``key``: a create when absent, else a merge.

    ``admit``: the create or update calls admission webhooks (a client's request).
    """
    manager = req.query.get("fieldManager")
    if not manager:
        raise errors.bad_request("PATCH, application/apply-patch+yaml requests require fieldManager to be set")
    if not isinstance(applied, dict):
        raise errors.bad_request("the applied configuration must be an object")
    try:
        orjson.dumps(applied)
    except TypeError as exc:  # a YAML alias that contains itself, a non-string key: no JSON object
        raise errors.bad_request(f"the patch could not be decoded: {exc}") from None
    for field, want in (("kind", rt.kind), ("apiVersion", rt.api_version)):
        # An applied configuration names its type (kubectl always sends both); another type's would
        # otherwise be merged in and stamp its kind on the stored object.
        got = applied.get(field)
        if got is None:
            raise errors.bad_request(f"{field}: Required value: the applied configuration must set {field}")
        if got != want:
            raise errors.bad_request(f"{field}: Invalid value: {got!r}: the applied configuration must be a "
                                     f"{rt.kind} of {rt.api_version}")
    md = applied.get("metadata") or {}
    if not isinstance(md, dict):
        raise errors.cannot_handle(rt.kind, rt.version, "json: cannot unmarshal into Go struct field "
                                   f"{rt.kind}.metadata of type v1.ObjectMeta")
    if md.get("name") and md["name"] != route.name:
        raise errors.bad_request(f"the name of the object ({md['name']}) does not match the name on the URL "
                                 f"({route.name})")
    entry = writer.store.get(rt.storage_key, key)
    managed = _managed_entry(manager, rt.api_version, applied, route.sub)
    if entry is None:
        if route.sub:
            raise errors.not_found(rt.plural, route.name or "", rt.group)
        obj = {**applied, "metadata": {**md, "name": route.name}}
        obj["metadata"]["managedFields"] = [managed]
        return (yield from writer.create_steps(rt, route.namespace, obj, req.query, admit=admit))
    old = served(rt, entry)
    clean = {**applied, "metadata": {k: v for k, v in md.items() if k not in ("managedFields", "resourceVersion")}}
    if rt.builtin:
        merged = patch.apply_strategic_merge_patch(old, clean, rt.group, rt.kind)
    else:
        merged = patch.apply_merge_patch(old, clean)
    fields = [m for m in old["metadata"].get("managedFields") or []
              if not (m.get("manager") == manager and m.get("operation") == "Apply"
                      and m.get("subresource") == managed.get("subresource"))]
    merged["metadata"]["managedFields"] = fields + [managed]
    detail = validation.check_metadata_types(rt.kind, rt.version, merged, builtin=rt.builtin)
    if detail:  # the merge may put ill-typed values into the object (creates check this themselves)
        raise errors.cannot_handle(rt.kind, rt.version, detail)
    return (yield from writer.update_steps(rt, entry, old, merged, route.sub, req.query, admit=admit))
