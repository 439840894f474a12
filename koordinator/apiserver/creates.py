"""The create verb (POST to a collection): name generation, server-set metadata, admission, storage."""

from __future__ import annotations

from typing import Any

from koordinator.apiserver import admission, errors
from koordinator.apiserver.crds import CrdManager
from koordinator.apiserver.namespaces import NamespaceLifecycle
from koordinator.apiserver.objects import generate_name, meta, new_uid, now_rfc3339
from koordinator.apiserver.processing import ObjectProcessor
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import object_key
from koordinator.apiserver.webhooks import Webhooks
from koordinator.apiserver.writer import ObjectWriter, Steps

Obj = dict[str, Any]

# Metadata only the server sets: a client's values are dropped.
SERVER_SET_META = ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation",
                   "selfLink")


def reset_status_on_create(rt: ResourceType, obj: Obj) -> None:
    """Drop (or reset) the status a client sent with a new object."""
    # Status is the server's and the controllers' to write, except a kubelet registering its Node.
    if rt.group == "" and rt.plural == "pods":
        obj["status"] = {}
    elif rt.group == "" and rt.plural == "namespaces":
        obj["status"] = {"phase": "Active"}
    elif rt.has_status and not (rt.group == "" and rt.plural == "nodes"):
        obj.pop("status", None)


def _dropped_on_create(rt: ResourceType, obj: Obj) -> Obj:
    """The part of a new custom object that ``reset_status_on_create`` drops: its ``status``."""
    if rt.crd is not None and rt.has_status and "status" in obj:
        return {"status": obj["status"]}
    return {}


class Creator:
    """Creates objects: defaulting and validation around the admission webhooks, then storage."""

    def __init__(self, writer: ObjectWriter, processor: ObjectProcessor, hooks: Webhooks, crds: CrdManager,
                 namespaces: NamespaceLifecycle) -> None:
        self.writer = writer
        self.processor = processor
        self.webhooks = hooks
        self.crds = crds
        self.namespaces = namespaces

    def steps(self, rt: ResourceType, namespace: str | None, obj: Any, query: dict[str, str],
              admit: bool = False) -> Steps:
        """Steps of creating ``obj``; result ``(201, entry or dry-run object, warnings)``."""
        store = self.writer.store
        self.processor.check_kind(rt, obj)
        md = meta(obj)
        if rt.namespaced:
            if md.get("namespace") and namespace and md["namespace"] != namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent "
                                         "on the request")
            md["namespace"] = namespace
        else:
            md.pop("namespace", None)
        # The storage layer refuses this, so a dry run, which never reaches storage, does not.
        if md.get("resourceVersion") and query.get("dryRun") != "All":
            raise errors.bad_request("resourceVersion should not be set on objects to be created")
        for k in SERVER_SET_META:
            md.pop(k, None)
        if not md.get("name") and md.get("generateName"):
            md["name"] = generate_name(md["generateName"])
        name = md.get("name") or ""
        admission.check_namespace(store, rt, namespace, name)
        if admit:
            self.writer.check_escalation(rt, obj, None)
        dropped_unknown = self.processor.unknown_fields_of(rt, _dropped_on_create(rt, obj))
        reset_status_on_create(rt, obj)
        stamp = {"uid": new_uid(), "creationTimestamp": now_rfc3339()}
        if rt.tracks_generation:
            stamp["generation"] = 1
        md.update(stamp)
        call = self.webhooks.admission_call(admit, True, "CREATE", rt, None, name, namespace, obj, None, query)
        if call is None:
            warnings = self.processor.process(rt, obj, None, query, dropped_unknown=dropped_unknown)
            if rt.plural == "pods" and rt.group == "":
                admission.resolve_pod_priority(store, obj)
        else:
            # Defaulting and the in-tree mutating plugins come before the webhooks, validation after.
            warnings = self.processor.process(rt, obj, None, query, validate=False, dropped_unknown=dropped_unknown)
            if rt.plural == "pods" and rt.group == "":
                admission.resolve_pod_priority(store, obj)
            obj = self.processor.mutated(rt, (yield call))
            md = obj["metadata"]
            for k in SERVER_SET_META:
                md.pop(k, None)
            md.update(stamp)
            md["name"] = name
            if rt.namespaced:
                md["namespace"] = namespace
            else:
                md.pop("namespace", None)
            reset_status_on_create(rt, obj)
            warnings += self.processor.process(rt, obj, None, query)
        if rt.plural == "customresourcedefinitions":
            self.crds.prepare(obj)
        key = object_key(namespace if rt.namespaced else None, name)
        if store.get(rt.storage_key, key) is not None:
            raise errors.already_exists(rt.plural, name, rt.group)
        call = self.webhooks.admission_call(admit, False, "CREATE", rt, None, name, namespace, obj, None, query)
        if call is not None:
            yield call
            # Other writes went on meanwhile.
            admission.check_namespace(store, rt, namespace, name)
            if store.get(rt.storage_key, key) is not None:
                raise errors.already_exists(rt.plural, name, rt.group)
        if query.get("dryRun") == "All":
            return 201, obj, warnings
        entry = self.writer.put(rt, obj)
        if rt.plural == "namespaces" and rt.group == "":
            self.namespaces.created(name)
        return 201, entry, warnings
