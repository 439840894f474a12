"""The garbage collector (kube-controller-manager's ``garbagecollector``): ownerReferences honoured.

It watches every resource the server serves that can be listed, watched and deleted (found through
discovery, again every :data:`DISCOVERY_PERIOD` seconds, so kinds a CRD adds later are covered;
Events excepted, as in kube) and keeps a graph uid → node with each object's owners and dependents.
From that graph it does what kube's does:

* a dependent whose owners are all gone (by uid) is deleted, in the background unless its own
  ``orphan``/``foregroundDeletion`` finalizer says otherwise; references to owners that are gone are
  dropped from a dependent that still has a live owner;
* an owner being deleted with the ``foregroundDeletion`` finalizer gets its dependents deleted (a
  dependent with dependents of its own in the foreground too); the finalizer goes once no dependent
  with ``blockOwnerDeletion`` is left;
* an owner being deleted with the ``orphan`` finalizer is removed from its dependents'
  ``ownerReferences``, then the finalizer goes.

The graph comes from the informers; the server is asked only to confirm that an owner the graph has
not seen is really gone, and for the object about to be changed (with its resourceVersion or uid
as a precondition), so a lagging cache never deletes what still has an owner.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any

from koordinator.runtime import errors
from koordinator.runtime.controller import Result
from koordinator.runtime.kinds import Kind, UnknownKind

log = logging.getLogger("koordinator.controllers.garbagecollector")

Obj = dict[str, Any]

#: Seconds between discovery runs that look for resources to watch (kube's GC resync period).
DISCOVERY_PERIOD = 30.0
WORKERS = 4
FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"
# Events carry no ownerReferences worth collecting and would dominate the graph.
IGNORED = {("", "events"), ("events.k8s.io", "events")}
_NEEDED_VERBS = {"list", "watch", "delete"}


@dataclass
class Node:
    """One object in the graph; ``observed`` is False for an owner only known from references."""

    uid: str
    api_version: str = ""
    kind: str = ""
    namespace: str = ""
    name: str = ""
    owners: list[Obj] = field(default_factory=list)
    dependents: set[str] = field(default_factory=set)
    finalizers: tuple[str, ...] = ()
    deleting: bool = False
    observed: bool = False

    @property
    def deleting_dependents(self) -> bool:
        return self.deleting and FINALIZER_FOREGROUND in self.finalizers

    @property
    def orphaning(self) -> bool:
        return self.deleting and FINALIZER_ORPHAN in self.finalizers


def _blocks(ref: Obj) -> bool:
    return bool(ref.get("blockOwnerDeletion"))


class Graph:
    """The uid → :class:`Node` graph; every method is atomic and returns the uids to process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._nodes: dict[str, Node] = {}

    def get(self, uid: str) -> Node | None:
        """A copy of the node (dependents included), or None."""
        with self._lock:
            node = self._nodes.get(uid)
            if node is None:
                return None
            return Node(node.uid, node.api_version, node.kind, node.namespace, node.name, list(node.owners),
                        set(node.dependents), node.finalizers, node.deleting, node.observed)

    def __len__(self) -> int:
        with self._lock:
            return len(self._nodes)

    def upsert(self, obj: Obj) -> set[str]:
        """Record an added or updated object."""
        md = obj.get("metadata") or {}
        uid = md.get("uid")
        if not uid:
            return set()
        refs = [r for r in md.get("ownerReferences") or () if isinstance(r, dict) and r.get("uid")]
        todo: set[str] = set()
        with self._lock:
            node = self._nodes.get(uid)
            if node is None:
                node = self._nodes[uid] = Node(uid)
            was_deleting_dependents = node.deleting_dependents
            old_refs = {r["uid"]: r for r in node.owners}
            new_refs = {r["uid"]: r for r in refs}
            node.api_version, node.kind = obj.get("apiVersion", ""), obj.get("kind", "")
            node.namespace, node.name = md.get("namespace") or "", md.get("name", "")
            node.owners = refs
            node.finalizers = tuple(md.get("finalizers") or ())
            node.deleting = bool(md.get("deletionTimestamp"))
            node.observed = True
            for owner_uid, ref in old_refs.items():
                if new_refs.get(owner_uid) == ref:
                    continue
                owner = self._nodes.get(owner_uid)
                if owner is None:
                    continue
                if owner_uid not in new_refs:
                    self._unlink(owner, uid)
                if owner.deleting_dependents:
                    todo.add(owner_uid)  # a blocking reference went away or changed
            for owner_uid in new_refs:
                owner = self._nodes.get(owner_uid)
                if owner is None:
                    owner = self._nodes[owner_uid] = Node(owner_uid)
                owner.dependents.add(uid)
                if not owner.observed or owner.deleting_dependents:
                    todo.add(uid)  # an owner that may be gone, or that waits for its dependents
            if node.deleting and (node.orphaning or node.deleting_dependents):
                todo.add(uid)
            if node.deleting_dependents and not was_deleting_dependents:
                todo.update(node.dependents)
        return todo

    def remove(self, obj: Obj) -> set[str]:
        """Record a deleted object: its dependents lost an owner, its owners a dependent."""
        uid = (obj.get("metadata") or {}).get("uid")
        todo: set[str] = set()
        if not uid:
            return todo
        with self._lock:
            node = self._nodes.get(uid)
            if node is None:
                return todo
            for ref in node.owners:
                owner = self._nodes.get(ref["uid"])
                if owner is not None:
                    self._unlink(owner, uid)
                    if owner.deleting_dependents:
                        todo.add(owner.uid)
            todo.update(node.dependents)
            if node.dependents:
                # The dependents still name it: it stays as an owner known only from references.
                self._nodes[uid] = Node(uid, dependents=node.dependents)
            else:
                del self._nodes[uid]
        return todo

    def _unlink(self, owner: Node, dependent_uid: str) -> None:
        owner.dependents.discard(dependent_uid)
        if not owner.observed and not owner.dependents:
            del self._nodes[owner.uid]


def discover(client: Any) -> list[Kind]:
    """Every resource (preferred version of each group) that can be listed, watched and deleted."""
    lists: list[tuple[str, Obj]] = [("", client.request("GET", "/api/v1"))]
    groups = client.request("GET", "/apis") or {}
    for group in groups.get("groups") or ():
        preferred = (group.get("preferredVersion") or {}).get("groupVersion")
        if not preferred:
            continue
        try:
            lists.append((group["name"], client.request("GET", f"/apis/{preferred}")))
        except errors.NotFound:
            continue  # removed between the two requests
    found = []
    for group, doc in lists:
        version = (doc or {}).get("groupVersion", "v1").rsplit("/", 1)[-1]
        for res in (doc or {}).get("resources") or ():
            name = res.get("name", "")
            if "/" in name or (group, name) in IGNORED or not _NEEDED_VERBS <= set(res.get("verbs") or ()):
                continue
            found.append(Kind(group, version, res["kind"], name, bool(res.get("namespaced"))))
    return found


class GarbageCollector:
    """Builds the graph from one informer per deletable resource and reconciles uids on :attr:`controller`."""

    def __init__(self, runtime: Any) -> None:
        self.runtime = runtime
        self.client = runtime.client
        self.graph = Graph()
        self.controller = runtime.controller("garbagecollector", self.reconcile, workers=WORKERS)
        self._watched: set[Kind] = set()
        self._watch_lock = threading.Lock()
        self._warned: set[tuple[str, str]] = set()

    # -- discovery and informers ---------------------------------------------------------------

    def sync_resources(self) -> int:
        """Watch resources discovery lists that are not watched yet; returns how many were added."""
        added = 0
        for kind in discover(self.client):
            with self._watch_lock:
                if kind in self._watched:
                    continue
                self._watched.add(kind)
            self._register_kind(kind)
            self._watch(kind)
            added += 1
        return added

    def _register_kind(self, kind: Kind) -> None:
        try:
            known = self.client.kinds.get(f"{kind.api_version}/{kind.kind}")
        except UnknownKind:
            known = None
        if known != kind:
            # Not the bare name: a kind the server added must not change what "Pod" means elsewhere.
            self.client.kinds.register(kind, preferred=False)

    def _watch(self, kind: Kind) -> None:
        informer = self.runtime.informers.informer(kind)
        informer.add_handler(on_add=self._on_change, on_update=lambda _old, new: self._on_change(new),
                             on_delete=self._on_delete)

    def _on_change(self, obj: Obj) -> None:
        for uid in self.graph.upsert(obj):
            self.controller.enqueue(uid)

    def _on_delete(self, obj: Any) -> None:
        if not isinstance(obj, dict):
            obj = getattr(obj, "obj", None)  # DeletedFinalStateUnknown: its last known state
            if not isinstance(obj, dict):
                return
        for uid in self.graph.remove(obj):
            self.controller.enqueue(uid)

    def rediscover(self, stop: threading.Event) -> None:
        """Runnable: look for new resources (a CRD installed meanwhile) every :data:`DISCOVERY_PERIOD`."""
        while not stop.wait(DISCOVERY_PERIOD):
            try:
                added = self.sync_resources()
            except errors.ApiError as err:
                log.warning("garbage collector: discovery failed (will retry): %s", err)
                continue
            if added:
                log.info("garbage collector: watching %d more resource(s)", added)

    # -- reconcile -----------------------------------------------------------------------------

    def reconcile(self, uid: str) -> Result | None:
        """Act on one node of the graph (kube's attemptToDelete / attemptToOrphan workers); a write
        that finds the object changed meanwhile retries quietly."""
        try:
            return self._reconcile(uid)
        except errors.Conflict as err:
            log.debug("garbage collector: %s changed meanwhile, retrying: %s", uid, err)
            return Result(requeue=True)

    def _reconcile(self, uid: str) -> None:
        node = self.graph.get(uid)
        if node is None:
            return None
        if not node.observed:
            # An owner only known from references: its dependents find out whether it exists.
            for dep in node.dependents:
                self.controller.enqueue(dep)
            return None
        if node.orphaning:
            self._orphan_dependents(node)
            self._remove_finalizer(node, FINALIZER_ORPHAN)
        elif node.deleting_dependents:
            self._process_deleting_dependents(node)
        elif not node.deleting and node.owners:
            self._attempt_to_delete(node)
        return None

    def _kind(self, api_version: str, kind: str) -> Kind | None:
        try:
            return self.client.kinds.get(f"{api_version}/{kind}")
        except UnknownKind:
            return None

    def _get(self, node: Node) -> Obj | None:
        """The node's object as the server has it now (None if it is gone or another object took its name)."""
        kind = self._kind(node.api_version, node.kind)
        if kind is None:
            return None
        try:
            obj = self.client.get(kind, node.name, node.namespace or None)
        except errors.NotFound:
            return None
        return obj if (obj.get("metadata") or {}).get("uid") == node.uid else None

    def _classify(self, namespace: str, refs: list[Obj]) -> tuple[list[Obj], list[Obj], list[Obj]]:
        """The references split into solid owners, dangling ones (owner gone) and owners waiting for
        their dependents' deletion (kube's ``classifyReferences``)."""
        solid, dangling, waiting = [], [], []
        for ref in refs:
            owner = self._known_owner(namespace, ref["uid"])
            if owner is not None:
                (waiting if owner.deleting_dependents else solid).append(ref)
                continue
            state = self._owner_state(namespace, ref)
            {"solid": solid, "dangling": dangling, "waiting": waiting}[state].append(ref)
        return solid, dangling, waiting

    def _owner_state(self, namespace: str, ref: Obj) -> str:
        kind = self._kind(ref.get("apiVersion", ""), ref.get("kind", ""))
        if kind is None or (kind.namespaced and not namespace):
            # An owner we cannot look up is never presumed gone: nothing is deleted on a guess.
            key = (ref.get("apiVersion", ""), ref.get("kind", ""))
            if key not in self._warned:
                self._warned.add(key)
                log.warning("garbage collector: cannot resolve owner kind %s %s; its dependents are kept", *key)
            return "solid"
        try:
            owner = self.client.get(kind, ref.get("name", ""), namespace if kind.namespaced else None)
        except errors.NotFound:
            return "dangling"
        md = owner.get("metadata") or {}
        if md.get("uid") != ref.get("uid"):
            return "dangling"
        if md.get("deletionTimestamp") and FINALIZER_FOREGROUND in (md.get("finalizers") or ()):
            return "waiting"
        return "solid"

    def _known_owner(self, namespace: str, uid: str) -> Node | None:
        """The owner as the graph has seen it; None when only the server can tell (never seen, or in
        another namespace, where a namespaced dependent's owner cannot be)."""
        owner = self.graph.get(uid)
        if owner is None or not owner.observed or (owner.namespace and owner.namespace != namespace):
            return None
        return owner

    def _attempt_to_delete(self, node: Node) -> None:
        owners = [self._known_owner(node.namespace, r["uid"]) for r in node.owners]
        if all(o is not None and not o.deleting_dependents for o in owners):
            return  # every owner is alive in the graph: nothing to ask the server
        latest = self._get(node)
        if latest is None:
            return
        md = latest["metadata"]
        if md.get("deletionTimestamp"):
            return
        refs = [r for r in md.get("ownerReferences") or () if isinstance(r, dict) and r.get("uid")]
        if not refs:
            return
        solid, dangling, waiting = self._classify(node.namespace, refs)
        kind = self._kind(node.api_version, node.kind)
        if kind is None:
            return
        if solid:
            if not dangling and not waiting:
                return
            # A live owner keeps it; references to gone or foreground-deleting owners go, or the
            # latter would wait for this object forever.
            drop = {r["uid"] for r in dangling + waiting}
            self._patch_refs(kind, latest, [r for r in refs if r["uid"] not in drop])
            return
        if waiting and node.dependents:
            for dep_uid in node.dependents:
                dep = self.graph.get(dep_uid)
                if dep is not None and dep.deleting_dependents:
                    # A cycle: our blocking references must not wait on a dependent that waits on us.
                    self._patch_refs(kind, latest, [{**r, "blockOwnerDeletion": False} for r in refs])
                    break
            self._delete(kind, latest, "Foreground")
            return
        finalizers = md.get("finalizers") or ()
        policy = ("Orphan" if FINALIZER_ORPHAN in finalizers else
                  "Foreground" if FINALIZER_FOREGROUND in finalizers else "Background")
        self._delete(kind, latest, policy)

    def _process_deleting_dependents(self, node: Node) -> None:
        blocking = []
        for dep_uid in node.dependents:
            dep = self.graph.get(dep_uid)
            if dep is None or not dep.observed:
                continue
            if any(r["uid"] == node.uid and _blocks(r) for r in dep.owners):
                blocking.append(dep)
            if not dep.deleting:
                self.controller.enqueue(dep_uid)
        if not blocking:
            self._remove_finalizer(node, FINALIZER_FOREGROUND)

    def _orphan_dependents(self, node: Node) -> None:
        for dep_uid in node.dependents:
            dep = self.graph.get(dep_uid)
            if dep is None or not dep.observed:
                continue
            kind = self._kind(dep.api_version, dep.kind)
            latest = self._get(dep) if kind is not None else None
            if latest is None or kind is None:
                continue
            refs = latest["metadata"].get("ownerReferences") or []
            kept = [r for r in refs if r.get("uid") != node.uid]
            if len(kept) != len(refs):
                self._patch_refs(kind, latest, kept)

    # -- writes --------------------------------------------------------------------------------

    def _patch_refs(self, kind: Kind, latest: Obj, refs: list[Obj]) -> None:
        md = latest["metadata"]
        try:
            self.client.patch(kind, md["name"], {"metadata": {"ownerReferences": refs or None,
                                                              "resourceVersion": md.get("resourceVersion")}},
                              namespace=md.get("namespace"))
        except errors.NotFound:
            pass  # gone meanwhile: nothing to patch

    def _delete(self, kind: Kind, latest: Obj, policy: str) -> None:
        md = latest["metadata"]
        log.debug("garbage collector: deleting %s %s/%s (%s)", kind.kind, md.get("namespace", ""), md["name"], policy)
        try:
            self.client.delete(kind, md["name"], md.get("namespace"), propagation_policy=policy,
                               preconditions={"uid": md["uid"]})
        except (errors.NotFound, errors.Conflict):
            pass  # gone, or another object has the name now: nothing of ours to delete

    def _remove_finalizer(self, node: Node, finalizer: str) -> None:
        latest = self._get(node)
        if latest is None:
            return
        md = latest["metadata"]
        finalizers = md.get("finalizers") or []
        if finalizer not in finalizers:
            return
        kind = self._kind(node.api_version, node.kind)
        assert kind is not None  # _get resolved it
        rest = [f for f in finalizers if f != finalizer]
        try:
            self.client.patch(kind, md["name"], {"metadata": {"finalizers": rest or None,
                                                              "resourceVersion": md.get("resourceVersion")}},
                              namespace=md.get("namespace"))
        except errors.NotFound:
            pass


def register(runtime: Any) -> GarbageCollector:
    """Register the garbage collector on ``runtime``; its informers exist before the runtime starts."""
    gc = GarbageCollector(runtime)
    try:
        gc.sync_resources()
    except errors.ApiError as err:
        log.warning("garbage collector: discovery failed at start (will retry): %s", err)
    runtime.add_runnable("garbagecollector-discovery", gc.rediscover, leader_gated=True)
    return gc
