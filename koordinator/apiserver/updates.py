"""The update verbs: PUT (of an object or its status/approval/finalize subresource) and PATCH."""

from __future__ import annotations

from typing import Any

import orjson

from koordinator.apiserver import apply, errors, patch
from koordinator.apiserver.encoding import APPLY_PATCH, JSON_PATCH, MERGE_PATCH, PATCH_TYPES, STRATEGIC_PATCH, served
from koordinator.apiserver.http import Request
from koordinator.apiserver.objects import load_yaml, meta, spec_part
from koordinator.apiserver.processing import ObjectProcessor
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.routes import Route
from koordinator.apiserver.store import Entry
from koordinator.apiserver.webhooks import Webhooks
from koordinator.apiserver.writer import ObjectWriter, Stale, Steps

Obj = dict[str, Any]


def waits_for_grace(rt: ResourceType, obj: Obj) -> bool:
    """A gracefully deleted pod stays until its (simulated) kubelet deletes it with grace 0."""
    return rt.group == "" and rt.plural == "pods" and int(obj["metadata"].get("deletionGracePeriodSeconds") or 0) > 0


def _dropped_on_update(rt: ResourceType, obj: Obj, sub: str | None) -> Obj:
    """The part of a custom object's update body the write drops: the rest on a ``status`` update,
    ``status`` on an update of the main resource (the stored status is kept)."""
    if rt.crd is None:
        return {}
    if sub == "status":
        return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata", "status")}
    if sub is None and rt.has_status and "status" in obj:
        return {"status": obj["status"]}
    return {}


class Updater:
    """Replaces and patches objects: what each subresource may change, admission, finalization."""

    def __init__(self, writer: ObjectWriter, processor: ObjectProcessor, hooks: Webhooks) -> None:
        self.writer = writer
        self.processor = processor
        self.webhooks = hooks

    def put_steps(self, rt: ResourceType, key: str, name: str, obj: Any, sub: str | None,
                  query: dict[str, str], *, check_rv: bool = True, admit: bool = False) -> Steps:
        """Steps of a PUT: ``obj`` replaces the object (or the part ``sub`` covers)."""
        self.processor.check_kind(rt, obj)
        entry = self.writer.get(rt, key, name)
        md = meta(obj)
        if md.get("name") and md["name"] != name:
            raise errors.bad_request(f"the name of the object ({md['name']}) does not match the name on the URL "
                                     f"({name})")
        if check_rv and md.get("resourceVersion") and md["resourceVersion"] != str(entry.rv):
            raise errors.conflict(rt.plural, name, errors.STALE_OBJECT, rt.group)
        old = served(rt, entry)
        if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
            raise errors.conflict(rt.plural, name, f"Precondition failed: UID in precondition: {md['uid']}, UID in "
                                  f"object meta: {old['metadata']['uid']}", rt.group)
        return (yield from self.update_steps(rt, entry, old, obj, sub, query, admit))

    def update_steps(self, rt: ResourceType, entry: Entry, old: Obj, obj: Obj, sub: str | None,
                     query: dict[str, str], admit: bool = False) -> Steps:
        """Steps of replacing ``entry`` (served as ``old``) by ``obj``; result ``(200, entry or object, warnings)``."""
        store = self.writer.store
        md = meta(obj)
        old_md = old["metadata"]
        name = old_md["name"]
        warnings: list[str] = []
        if admit:
            # Before admission, on the object as the client made it (kube's RBAC storage does the same).
            self.writer.check_escalation(rt, obj, old)
        call = self.webhooks.admission_call(admit, True, "UPDATE", rt, sub, name, old_md.get("namespace"), obj, old,
                                            query)
        if call is not None:
            # Webhooks see the object as sent (defaulted); what the subresource may change is kept after.
            warnings = self.processor.process(rt, obj, old, query, validate=False)
            obj = self.processor.mutated(rt, (yield call))
            md = obj["metadata"]
        dropped_unknown = self.processor.unknown_fields_of(rt, _dropped_on_update(rt, obj, sub))
        if sub == "status":
            new = dict(old)
            new["status"] = obj.get("status")
            if new["status"] is None:
                new.pop("status")
            new["metadata"] = dict(old_md)
            obj = new
            md = obj["metadata"]
        elif sub == "approval":
            # A CertificateSigningRequest's approval changes its conditions and nothing else.
            new = dict(old)
            new["status"] = {**(old.get("status") or {}),
                             "conditions": ((obj.get("status") or {}) if isinstance(obj.get("status"), dict)
                                            else {}).get("conditions")}
            if new["status"]["conditions"] is None:
                new["status"].pop("conditions")
            new["metadata"] = dict(old_md)
            obj = new
            md = obj["metadata"]
        elif sub == "finalize":
            new = dict(old)
            new["spec"] = {**(old.get("spec") or {}), "finalizers": (obj.get("spec") or {}).get("finalizers") or []}
            obj = new
            md = obj["metadata"] = dict(old_md)
        elif rt.has_status:
            if "status" in old:
                obj["status"] = old["status"]
            else:
                obj.pop("status", None)
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            if k in old_md:
                md[k] = old_md[k]
            else:
                md.pop(k, None)
        md["name"] = old_md["name"]
        if rt.namespaced:
            md["namespace"] = old_md["namespace"]
        else:
            md.pop("namespace", None)
        md["resourceVersion"] = old_md["resourceVersion"]
        warnings += self.processor.process(rt, obj, old, query, dropped_unknown=dropped_unknown)
        md = obj["metadata"]  # schema processing may have rebuilt the object
        if old_md.get("deletionTimestamp"):
            added = set(md.get("finalizers") or []) - set(old_md.get("finalizers") or [])
            if added:
                raise errors.invalid(rt.kind, rt.group, old_md["name"], [errors.forbidden_field(
                    "metadata.finalizers", "no new finalizers can be added if the object is being deleted, found "
                    f"new finalizers {sorted(added)}")])
        if rt.tracks_generation and sub is None and spec_part(obj) != spec_part(old):
            md["generation"] = int(old_md.get("generation", 1)) + 1
        validating = self.webhooks.admission_call(admit, False, "UPDATE", rt, sub, name, old_md.get("namespace"), obj,
                                                  old, query)
        if validating is not None:
            yield validating
        if (call or validating) and store.get(rt.storage_key, entry.key) is not entry:
            raise Stale(rt, name)  # written meanwhile: start over from the current object
        if obj == old:
            return 200, entry, warnings
        if query.get("dryRun") == "All":
            return 200, obj, warnings
        if old_md.get("deletionTimestamp") and not md.get("finalizers") and not waits_for_grace(rt, obj):
            self.writer.put(rt, obj)
            return 200, self.writer.remove(rt, entry.key), warnings
        return 200, self.writer.put(rt, obj), warnings

    def patch_steps(self, req: Request, rt: ResourceType, route: Route, key: str, admit: bool) -> Steps:
        """Steps of a PATCH: JSON patch, merge patch, strategic merge patch or server-side apply."""
        ctype = req.header("content-type").split(";")[0].strip().lower()
        if ctype not in PATCH_TYPES:
            raise errors.unsupported_media_type(ctype)
        if ctype == STRATEGIC_PATCH and not rt.builtin:
            raise errors.unsupported_media_type(ctype)
        try:
            body = load_yaml(req.body) if ctype == APPLY_PATCH else orjson.loads(req.body or b"null")
        except Exception as exc:
            raise errors.bad_request(f"the patch could not be decoded: {str(exc).splitlines()[0]}") from None
        if ctype == APPLY_PATCH:
            return (yield from apply.server_side_apply(self.writer, req, rt, route, key, body, admit))
        entry = self.writer.get(rt, key, route.name or "")
        old = served(rt, entry)
        if ctype == JSON_PATCH:
            if not isinstance(body, list):
                raise errors.bad_request("json patch must be a JSON array of operations")
            patched = patch.apply_json_patch(old, body)
        else:
            if not isinstance(body, dict):
                raise errors.bad_request("the patch must be a JSON object")
            if ctype == MERGE_PATCH:
                patched = patch.apply_merge_patch(old, body)
            else:
                patched = patch.apply_strategic_merge_patch(old, body, rt.group, rt.kind)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patched document is not an object")
        # Types first: a patch may have replaced metadata with a non-object.
        self.processor.check_kind(rt, patched)
        patched_rv = (patched.get("metadata") or {}).get("resourceVersion")
        if patched_rv and patched_rv != str(entry.rv):
            raise errors.conflict(rt.plural, route.name or "", errors.STALE_OBJECT, rt.group)
        if (patched.get("metadata") or {}).get("name", route.name) != route.name:
            raise errors.bad_request("metadata.name: Invalid value: the name of a patched object cannot change")
        return (yield from self.update_steps(rt, entry, old, patched, route.sub, req.query, admit))
