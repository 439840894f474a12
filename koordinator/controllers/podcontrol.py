"""What every pod-owning controller needs: owner references, pods from templates, pod states.

The predicates follow kube-controller-manager's ``controller_utils`` and ``podutil``: a pod is
*active* until it has Succeeded or Failed or is being deleted; *ready* when its Ready condition is
True; *available* when it has been ready for ``minReadySeconds``.
"""

from __future__ import annotations

import copy
from datetime import datetime, timezone
from typing import Any

Obj = dict[str, Any]

# Pods (and ControllerRevisions) indexed by the uid of their controller's ownerReference.
CONTROLLER_UID_INDEX = "controller-uid"


def now_rfc3339() -> str:
    """The current time as the API writes it (``2026-11-27T05:26:56Z``)."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(value: str | None) -> float | None:
    """Seconds since the epoch of an RFC 3339 timestamp, or None."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def owner_reference(owner: Obj, *, controller: bool = True, block_owner_deletion: bool = True) -> Obj:
    """The ownerReference a controller puts on what it creates for ``owner``."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"], "uid": meta["uid"],
            "controller": controller, "blockOwnerDeletion": block_owner_deletion}


def controller_ref(obj: Obj) -> Obj | None:
    """The ownerReference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def controller_uid_index(obj: Obj) -> list[str]:
    """Index function for :data:`CONTROLLER_UID_INDEX`."""
    ref = controller_ref(obj)
    return [ref["uid"]] if ref is not None and ref.get("uid") else []


def pod_from_template(template: Obj, owner: Obj, *, name: str | None = None,
                      extra_labels: dict[str, str] | None = None) -> Obj:
    """A new Pod from ``owner``'s pod template, owned by it (``generateName`` ``<owner>-`` unless ``name``)."""
    tmeta = template.get("metadata") or {}
    meta: Obj = {"namespace": owner["metadata"].get("namespace"),
                 "labels": {**(tmeta.get("labels") or {}), **(extra_labels or {})},
                 "ownerReferences": [owner_reference(owner)]}
    if tmeta.get("annotations"):
        meta["annotations"] = dict(tmeta["annotations"])
    if tmeta.get("finalizers"):
        meta["finalizers"] = list(tmeta["finalizers"])
    if name is not None:
        meta["name"] = name
    else:
        meta["generateName"] = f"{owner['metadata']['name']}-"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template.get("spec") or {})}


def is_terminating(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def pod_phase(pod: Obj) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def is_pod_active(pod: Obj) -> bool:
    """Not Succeeded, not Failed, not being deleted."""
    return pod_phase(pod) not in ("Succeeded", "Failed") and not is_terminating(pod)


def ready_condition(pod: Obj) -> Obj | None:
    for cond in (pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond
    return None


def is_pod_ready(pod: Obj) -> bool:
    cond = ready_condition(pod)
    return cond is not None and cond.get("status") == "True"


def is_pod_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """Ready, and for at least ``min_ready_seconds`` (by the Ready condition's lastTransitionTime)."""
    if not is_pod_ready(pod):
        return False
    if min_ready_seconds <= 0:
        return True
    since = parse_time((ready_condition(pod) or {}).get("lastTransitionTime"))
    return since is not None and since + min_ready_seconds <= now
