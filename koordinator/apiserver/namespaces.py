"""Namespace lifecycle the server does itself, standing in for kube-controller-manager's controllers.

A new namespace gets its ``default`` ServiceAccount (the service-account controller); a deleted one
has its content deleted, and goes once it is empty (the namespace controller).
"""

from __future__ import annotations

from koordinator.apiserver import deletion
from koordinator.apiserver.objects import new_uid, now_rfc3339
from koordinator.apiserver.writer import ObjectWriter


class NamespaceLifecycle:
    """The service-account and namespace controllers' work, on the server's own writes."""

    def __init__(self, writer: ObjectWriter) -> None:
        self.writer = writer

    def created(self, name: str) -> None:
        """Stand in for the service-account controller: every namespace gets a ``default`` ServiceAccount."""
        sa_rt = self.writer.registry.get("", "v1", "serviceaccounts")
        if self.writer.store.get(sa_rt.storage_key, f"{name}/default") is None:
            self.writer.put(sa_rt, {"apiVersion": "v1", "kind": "ServiceAccount",
                                    "metadata": {"name": "default", "namespace": name, "uid": new_uid(),
                                                 "creationTimestamp": now_rfc3339()}})

    def terminate(self, name: str) -> None:
        """Stand in for the namespace controller: delete the namespace's content, then the namespace."""
        registry, store = self.writer.registry, self.writer.store
        for rt in registry.all():
            if not rt.namespaced or registry.versions_of(rt.storage_key)[0] is not rt:
                continue
            for e in list(store.items(rt.storage_key).values()):
                if e.fields.get("metadata.namespace") == name and e.key in store.items(rt.storage_key):
                    # Everything goes, so nothing is orphaned whatever the kind's default (kube's
                    # namespace controller deletes in the background too).
                    self.writer.delete_object(rt, e.key, e.fields["metadata.name"],
                                              {"gracePeriodSeconds": 0, "propagationPolicy": deletion.BACKGROUND}, {})
        self.finalize_if_empty(name)

    def finalize_if_empty(self, name: str) -> None:
        """Remove the terminating namespace ``name`` once nothing is left in it."""
        store = self.writer.store
        entry = store.get("namespaces", name)
        if entry is None or entry.fields.get("status.phase") != "Terminating":
            return
        for rt in self.writer.registry.all():
            if rt.namespaced and any(e.fields.get("metadata.namespace") == name
                                     for e in store.items(rt.storage_key).values()):
                return
        store.remove("namespaces", name)
