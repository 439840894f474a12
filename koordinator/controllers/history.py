"""Hashes and ControllerRevisions, as kube-controller-manager names and stores them.

* :func:`template_hash` is ``controller.ComputeHash`` (the Deployment's ``pod-template-hash``):
  FNV-1a over the template and the collision count, printed in kube's "safe" alphabet (no vowels,
  no look-alike digits), so names such as ``web-5d4f8c9b7`` never spell words.
* :func:`revision_hash` is ``history.HashControllerRevision`` (FNV-1 over the revision's data
  and the collision count), the ``controller-revision-hash`` of DaemonSet and StatefulSet pods.
* :class:`RevisionHistory` lists, creates, renumbers and deletes a set's ControllerRevisions.

Go hashes its in-memory structs; we hash the canonical JSON instead, which is equally stable
across restarts and versions of this program (the hash values differ from kube's, the scheme not).
"""

from __future__ import annotations

import copy
from typing import Any

import orjson

from koordinator.controllers.podcontrol import (CONTROLLER_UID_INDEX, ControllerRefManager, controller_uid_index,
                                                ensure_index, fresh_owner_check, owner_reference, selector_matches)
from koordinator.runtime import errors

Obj = dict[str, Any]

SAFE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
CONTROLLER_REVISION_HASH = "controller-revision-hash"
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def safe_encode(text: str) -> str:
    """``rand.SafeEncodeString``: every character mapped into :data:`SAFE_ALPHABET`."""
    return "".join(SAFE_ALPHABET[b % len(SAFE_ALPHABET)] for b in text.encode())


def fnv32(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
        h ^= b
    return h


def fnv32a(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h ^= b
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
    return h


def canonical_json(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


def semantic(value: Any) -> Any:
    """``value`` without nulls and empty maps or lists, which Go's typed objects cannot tell from
    absent fields (``creationTimestamp: null`` in what ``kubectl rollout undo`` sends, say)."""
    if isinstance(value, dict):
        out = {k: semantic(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v is not None and v != {} and v != []}
    if isinstance(value, list):
        return [semantic(v) for v in value]
    return value


def template_hash(template: Obj, collision_count: int | None) -> str:
    """The ``pod-template-hash`` of a Deployment's template."""
    data = canonical_json(semantic(template))
    if collision_count is not None:
        data += int(collision_count & 0xFFFFFFFF).to_bytes(4, "little") + b"\0\0\0\0"
    return safe_encode(str(fnv32a(data)))


def revision_hash(data: Any, collision_count: int | None) -> str:
    """The hash of a ControllerRevision's ``data`` (its name is ``<set>-<hash>``)."""
    raw = canonical_json(data)
    if collision_count is not None:
        raw += str(collision_count).encode()
    return safe_encode(str(fnv32(raw)))


def revision_name(prefix: str, hash_: str) -> str:
    """``ControllerRevisionName``: names stay under 253 characters."""
    if len(prefix) > 223:
        prefix = prefix[:223]
    return f"{prefix}-{hash_}"


def template_patch(workload: Obj) -> Obj:
    """What DaemonSet and StatefulSet revisions store: the template, as a strategic merge patch that replaces it."""
    template = copy.deepcopy((workload.get("spec") or {}).get("template") or {})
    template["$patch"] = "replace"
    return {"spec": {"template": template}}


def template_of_revision(revision: Obj) -> Obj:
    """The pod template a revision made with :func:`template_patch` holds."""
    template = copy.deepcopy((((revision.get("data") or {}).get("spec") or {}).get("template")) or {})
    template.pop("$patch", None)
    return template


def revision_number(revision: Obj) -> int:
    return int(revision.get("revision") or 0)


def sort_revisions(revisions: list[Obj]) -> list[Obj]:
    """Oldest first: by revision number, then creation time, then name (``history.SortControllerRevisions``)."""
    return sorted(revisions, key=lambda r: (revision_number(r), r["metadata"].get("creationTimestamp") or "",
                                            r["metadata"]["name"]))


class RevisionHistory:
    """One workload kind's ControllerRevisions, from the shared informer."""

    def __init__(self, runtime: Any) -> None:
        self.client = runtime.client
        self.informer = runtime.informers.informer("ControllerRevision")
        ensure_index(self.informer, CONTROLLER_UID_INDEX, controller_uid_index)

    def claim(self, workload: Obj) -> list[Obj]:
        """The revisions ``workload`` controls (adopting orphans its selector matches), oldest first."""
        meta = workload["metadata"]
        selector = (workload.get("spec") or {}).get("selector")
        candidates = [r for r in self.informer.store.by_index("namespace", meta["namespace"])]
        manager = ControllerRefManager(self.client, workload, "ControllerRevision",
                                       lambda r: selector_matches(selector, (r["metadata"].get("labels") or {})),
                                       fresh_owner_check(self.client, workload))
        return sort_revisions(manager.claim(candidates))

    def new_revision(self, workload: Obj, number: int, collision_count: int | None,
                     extra_labels: dict[str, str] | None = None) -> Obj:
        """An unsaved revision of ``workload``'s current template (``NewControllerRevision``)."""
        template = (workload.get("spec") or {}).get("template") or {}
        labels = {**((template.get("metadata") or {}).get("labels") or {}), **(extra_labels or {})}
        data = template_patch(workload)
        hash_ = revision_hash(data, collision_count)
        labels[CONTROLLER_REVISION_HASH] = hash_
        return {"apiVersion": "apps/v1", "kind": "ControllerRevision",
                "metadata": {"name": revision_name(workload["metadata"]["name"], hash_),
                             "namespace": workload["metadata"]["namespace"], "labels": labels,
                             "ownerReferences": [owner_reference(workload)]},
                "data": data, "revision": number}

    def create(self, workload: Obj, revision: Obj, collision_count: int) -> tuple[Obj, int]:
        """Create ``revision``; on a name taken by different data bump the collision count and
        retry. Returns the stored revision and the collision count that named it."""
        while True:
            hash_ = revision_hash(revision["data"], collision_count)
            body = copy.deepcopy(revision)
            body["metadata"]["name"] = revision_name(workload["metadata"]["name"], hash_)
            body["metadata"]["labels"][CONTROLLER_REVISION_HASH] = hash_
            try:
                return self.client.create(body), collision_count
            except errors.AlreadyExists:
                existing = self.client.get("ControllerRevision", body["metadata"]["name"],
                                           workload["metadata"]["namespace"])
                if existing.get("data") == body["data"]:
                    return existing, collision_count
                collision_count += 1

    def renumber(self, revision: Obj, number: int) -> Obj:
        if revision_number(revision) == number:
            return revision
        meta = revision["metadata"]
        return self.client.patch("ControllerRevision", meta["name"], {"revision": number},
                                 namespace=meta["namespace"])

    def delete(self, revision: Obj) -> None:
        meta = revision["metadata"]
        try:
            self.client.delete("ControllerRevision", meta["name"], meta["namespace"])
        except errors.NotFound:
            pass


def equal_revisions(revisions: list[Obj], wanted: Obj) -> list[Obj]:
    """The revisions whose data equals ``wanted``'s (``FindEqualRevisions``), oldest first."""
    return [r for r in revisions if r.get("data") == wanted.get("data")]
