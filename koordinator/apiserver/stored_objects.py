"""Storing and removing objects, with the state the server derives from them kept in step.

Every write of the server goes through here: pods and budgets refresh PodDisruptionBudget status,
CRDs (un)register their kinds, webhook configurations reset the webhook index, and a terminating
namespace goes once its last object does.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver import webhooks
from koordinator.apiserver.crds import CrdManager
from koordinator.apiserver.namespaces import NamespaceLifecycle
from koordinator.apiserver.pods import PodSubresources
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import Entry, Store, object_key

Obj = dict[str, Any]


class StoredObjects:
    """``put`` and ``remove`` of validated objects, and the derived-state hooks they trigger."""

    def __init__(self, store: Store, pods: PodSubresources, crds: CrdManager, hooks: webhooks.Webhooks,
                 namespaces: NamespaceLifecycle) -> None:
        self.store = store
        self.pods = pods
        self.crds = crds
        self.webhooks = hooks
        self.namespaces = namespaces

    def put(self, rt: ResourceType, obj: Obj) -> Entry:
        """Store ``obj`` (already validated) and run the server's derived-state hooks."""
        md = obj["metadata"]
        key = object_key(md.get("namespace") if rt.namespaced else None, md["name"])
        if rt.view is not None:
            obj = rt.view.to_storage(obj)
        entry = self.store.put(rt.storage_key, key, obj)
        self.pods.object_written(rt, obj)
        if rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io":
            self.crds.register(obj)
        elif rt.group == webhooks.GROUP:
            self.webhooks.invalidate()
        return entry

    def remove(self, rt: ResourceType, key: str) -> Entry:
        """Remove ``key`` and run the server's derived-state hooks."""
        entry = self.store.remove(rt.storage_key, key)
        obj = entry.obj()
        self.pods.object_written(rt, obj)
        if rt.plural == "customresourcedefinitions" and rt.group == "apiextensions.k8s.io":
            self.crds.removed(obj)
        elif rt.group == webhooks.GROUP:
            self.webhooks.invalidate()
        ns = obj["metadata"].get("namespace")
        if ns:
            self.namespaces.finalize_if_empty(ns)
        return entry
