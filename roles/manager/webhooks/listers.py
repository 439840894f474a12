"""Read-only views of the cluster the admission handlers decide with.

The handlers never call the API server themselves: they get a :class:`Listers`, which answers
from informer caches in the manager (:class:`InformerListers`) or from plain lists in tests and
tools (:class:`StaticListers`). Every object handed out is the cached dict: callers must not
mutate it (the handlers deep-copy what they change).
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Protocol

from koordinator.apis.quota import LABEL_QUOTA_NAME

log = logging.getLogger("koordinator.manager.webhooks")

Obj = dict[str, Any]

QUOTA_NAME_INDEX = "label.quotaName"

# What the handlers read; ConfigMaps are left out by default (the cm webhook validates the
# object in the request and never needs another ConfigMap).
DEFAULT_KINDS = ("Namespace", "PriorityClass", "ClusterColocationProfile", "ElasticQuota", "Pod", "Node")


class Listers(Protocol):
    """Cached, read-only views as plain dicts."""

    def namespace(self, name: str) -> Obj | None: ...

    def priority_class(self, name: str) -> Obj | None: ...

    def colocation_profiles(self) -> list[Obj]: ...

    def elastic_quotas(self) -> list[Obj]: ...

    def pods(self, namespace: str | None = None) -> list[Obj]: ...

    def pods_with_label(self, key: str, value: str) -> list[Obj]: ...

    def nodes(self) -> list[Obj]: ...

    def configmap(self, namespace: str, name: str) -> Obj | None: ...


def _labels(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _namespace(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("namespace") or ""


def _quota_name_index(pod: Obj) -> list[str]:
    value = _labels(pod).get(LABEL_QUOTA_NAME)
    return [value] if value else []


class InformerListers:
    """:class:`Listers` over a :class:`koordinator.runtime.informer.InformerFactory`.

    Creating it creates (does not start) one cluster-wide informer per kind in ``kinds``; the
    runtime starts the factory and waits for the caches to sync before serving. Pods get an extra
    index on the ``quota.scheduling.koordinator.sh/name`` label (quota deletion asks "which pods
    are bound to this quota" on every request).

    A Namespace or PriorityClass missing from the cache is read from the API server once before
    it is reported missing: a pod created right after its namespace (or a profile's priority
    class) would otherwise race the informer and be mutated by the wrong rules.
    """

    def __init__(self, factory: Any, *, kinds: Iterable[str] = DEFAULT_KINDS) -> None:
        self._factory = factory
        self._informers = {kind: factory.informer(kind) for kind in kinds}
        pods = self._informers.get("Pod")
        if pods is not None:
            try:
                pods.add_indexer(QUOTA_NAME_INDEX, _quota_name_index)
            except ValueError:  # another InformerListers over the same factory added it
                pass

    def _store(self, kind: str) -> Any:
        informer = self._informers.get(kind)
        if informer is None:
            raise LookupError(f"InformerListers was created without the {kind} informer (kinds={sorted(self._informers)})")
        return informer.store

    def _get_live(self, kind: str, name: str, namespace: str | None = None) -> Obj | None:
        from koordinator.runtime.errors import NotFound

        try:
            return self._factory.client.get(kind, name, namespace)
        except NotFound:
            return None

    def namespace(self, name: str) -> Obj | None:
        return self._store("Namespace").get(name) or self._get_live("Namespace", name)

    def priority_class(self, name: str) -> Obj | None:
        return self._store("PriorityClass").get(name) or self._get_live("PriorityClass", name)

    def colocation_profiles(self) -> list[Obj]:
        return self._store("ClusterColocationProfile").list()

    def elastic_quotas(self) -> list[Obj]:
        return self._store("ElasticQuota").list()

    def pods(self, namespace: str | None = None) -> list[Obj]:
        store = self._store("Pod")
        return store.by_index("namespace", namespace) if namespace else store.list()

    def pods_with_label(self, key: str, value: str) -> list[Obj]:
        store = self._store("Pod")
        if key == LABEL_QUOTA_NAME:
            return store.by_index(QUOTA_NAME_INDEX, value)
        return [p for p in store.list() if _labels(p).get(key) == value]

    def nodes(self) -> list[Obj]:
        return self._store("Node").list()

    def configmap(self, namespace: str, name: str) -> Obj | None:
        if "ConfigMap" in self._informers:
            return self._store("ConfigMap").get(f"{namespace}/{name}")
        return self._get_live("ConfigMap", name, namespace)


class StaticListers:
    """:class:`Listers` over fixed lists of objects (unit tests, offline tools)."""

    def __init__(self, *, namespaces: Iterable[Obj] = (), priority_classes: Iterable[Obj] = (),
                 colocation_profiles: Iterable[Obj] = (), elastic_quotas: Iterable[Obj] = (),
                 pods: Iterable[Obj] = (), nodes: Iterable[Obj] = (), configmaps: Iterable[Obj] = ()) -> None:
        self._namespaces = {o["metadata"]["name"]: o for o in namespaces}
        self._priority_classes = {o["metadata"]["name"]: o for o in priority_classes}
        self._profiles = list(colocation_profiles)
        self._quotas = list(elastic_quotas)
        self._pods = list(pods)
        self._nodes = list(nodes)
        self._configmaps = {(_namespace(o), o["metadata"]["name"]): o for o in configmaps}

    def namespace(self, name: str) -> Obj | None:
        return self._namespaces.get(name)

    def priority_class(self, name: str) -> Obj | None:
        return self._priority_classes.get(name)

    def colocation_profiles(self) -> list[Obj]:
        return list(self._profiles)

    def elastic_quotas(self) -> list[Obj]:
        return list(self._quotas)

    def pods(self, namespace: str | None = None) -> list[Obj]:
        return [p for p in self._pods if namespace is None or _namespace(p) == namespace]

    def pods_with_label(self, key: str, value: str) -> list[Obj]:
        return [p for p in self._pods if _labels(p).get(key) == value]

    def nodes(self) -> list[Obj]:
        return list(self._nodes)

    def configmap(self, namespace: str, name: str) -> Obj | None:
        return self._configmaps.get((namespace, name))
