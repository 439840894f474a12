"""The delete verbs: DELETE of one object (preconditions, propagation, grace) and of a collection."""

from __future__ import annotations

from typing import Any

from koordinator.apiserver import admission, deletion, errors
from koordinator.apiserver.encoding import Presenter, decode
from koordinator.apiserver.http import Request, Response
from koordinator.apiserver.namespaces import NamespaceLifecycle
from koordinator.apiserver.objects import now_rfc3339
from koordinator.apiserver.pods import PodSubresources
from koordinator.apiserver.reads import filter_entries, selectors
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import Entry
from koordinator.apiserver.webhooks import Webhooks
from koordinator.apiserver.writer import ObjectWriter, Stale, Steps, retrying


class Deleter:
    """Deletes objects: at once, or by marking them (finalizers, graceful pod deletion, namespaces)."""

    def __init__(self, writer: ObjectWriter, hooks: Webhooks, pods: PodSubresources, namespaces: NamespaceLifecycle,
                 presenter: Presenter) -> None:
        self.writer = writer
        self.webhooks = hooks
        self.pods = pods
        self.namespaces = namespaces
        self.presenter = presenter

    def steps(self, rt: ResourceType, key: str, name: str, options: Any, query: dict[str, str],
              admit: bool = False) -> Steps:
        """Steps of deleting ``key``; result ``(200 gone or 202 marked, object, [])``."""
        store = self.writer.store
        if not isinstance(options, dict):
            raise errors.bad_request("DeleteOptions must be an object")
        deletion.validate(options)
        entry = self.writer.get(rt, key, name)
        old = entry.obj()
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != old["metadata"]["uid"]:
            raise errors.conflict(rt.plural, name, f"Precondition failed: UID in precondition: {pre['uid']}, UID in "
                                  f"object meta: {old['metadata']['uid']}", rt.group)
        if pre.get("resourceVersion") and pre["resourceVersion"] != str(entry.rv):
            raise errors.conflict(rt.plural, name, f"Precondition failed: ResourceVersion in precondition: "
                                  f"{pre['resourceVersion']}, ResourceVersion in object meta: {entry.rv}", rt.group)
        is_namespace = rt.group == "" and rt.plural == "namespaces"
        if is_namespace:
            admission.check_namespace_delete(name)
        if admit:
            delete_options = {**options, "kind": "DeleteOptions", "apiVersion": "meta.k8s.io/v1"}
            if query.get("dryRun") == "All":
                delete_options["dryRun"] = ["All"]
            called = False
            for mutating in (True, False):
                # Mutating webhooks registered for DELETE are called too; they may not patch.
                call = self.webhooks.admission_call(True, mutating, "DELETE", rt, None, name,
                                                    old["metadata"].get("namespace"), None, old, query,
                                                    options=delete_options)
                if call is not None:
                    called = True
                    yield call
            if called and store.get(rt.storage_key, key) is not entry:
                raise Stale(rt, name)
        if query.get("dryRun") == "All" or options.get("dryRun") == ["All"]:
            return 200, old, []
        md = old["metadata"]
        if is_namespace:
            if not md.get("deletionTimestamp"):
                md["deletionTimestamp"] = now_rfc3339()
                old["status"] = {"phase": "Terminating"}
                self.writer.put(rt, old)
                self.namespaces.terminate(name)
            current = store.get(rt.storage_key, key)
            return (202, current, []) if current is not None else (200, old, [])
        grace = 0
        if rt.group == "" and rt.plural == "pods":
            grace = self.pods.deletion_grace(old, options.get("gracePeriodSeconds", query.get("gracePeriodSeconds")))
        pending_grace = int(md.get("deletionGracePeriodSeconds") or 0)
        if md.get("deletionTimestamp") and pending_grace > 0 and grace >= pending_grace:
            return 202, entry, []  # a graceful deletion in progress keeps its finalizers and deadline
        # The propagation policy is recorded as the orphan/foregroundDeletion finalizer the garbage
        # collector acts on; Background needs none.
        finalizers = deletion.deletion_finalizers(rt.group, rt.plural, md.get("finalizers"), options)
        if finalizers is not None:
            if finalizers:
                md["finalizers"] = finalizers
            else:
                md.pop("finalizers", None)
        if not md.get("finalizers") and grace == 0:
            return 200, self.writer.remove(rt, key), []
        if md.get("deletionTimestamp") and finalizers is None and grace >= pending_grace:
            return 202, entry, []
        if not md.get("deletionTimestamp") and rt.tracks_generation and md.get("generation"):
            md["generation"] = int(md["generation"]) + 1  # kube bumps it when an object starts terminating
        if not md.get("deletionTimestamp") or grace < pending_grace:
            md["deletionTimestamp"] = self.pods.deletion_time(grace)
        md["deletionGracePeriodSeconds"] = grace
        return 202, self.writer.put(rt, old), []

    def collection_steps(self, req: Request, rt: ResourceType, namespace: str | None) -> Steps:
        """Steps of a DELETE of a collection: each selected object in turn, with admission; the list deleted."""
        store = self.writer.store
        labels, fields = selectors(req, rt)
        options = deletion.delete_options(decode(req, None) if req.body.strip() else None, req.query)
        deletion.validate(options)  # before anything is deleted
        deleted = []
        for e in filter_entries(store.sorted_entries(rt.storage_key), namespace, labels, fields):
            name = e.fields["metadata.name"]
            key = e.key
            try:
                _, result, _ = yield from retrying(
                    lambda: self.steps(rt, key, name, options, req.query, admit=True))
            except errors.StatusError as err:
                if err.code == 404:  # deleted by someone else while webhooks were called
                    continue
                raise
            deleted.append(result if isinstance(result, Entry) else None)
        items = b",".join(self.presenter.present(rt, e) for e in deleted if isinstance(e, Entry))
        head = b'{"kind":"%s","apiVersion":"%s","metadata":{"resourceVersion":"%d"},"items":[' % (
            rt.list_kind.encode(), rt.api_version.encode(), store.rev)
        return Response(200, head + items + b"]}")
