"""What the Deployment controller computes, as kube's ``deploymentutil``: fenceposts, conditions,
status, revision and replica annotations, proportional scaling. Pure functions of plain objects.
"""

from __future__ import annotations

import math
from typing import Any

from koordinator.controllers.history import semantic
from koordinator.controllers.podcontrol import condition, now_rfc3339, parse_time, scaled_value

Obj = dict[str, Any]

POD_TEMPLATE_HASH = "pod-template-hash"
REVISION = "deployment.kubernetes.io/revision"
REVISION_HISTORY = "deployment.kubernetes.io/revision-history"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
_NOT_COPIED = {"kubectl.kubernetes.io/last-applied-configuration", REVISION, REVISION_HISTORY, DESIRED_REPLICAS,
               MAX_REPLICAS, "deprecated.deployment.rollback.to"}
MAX_REV_HISTORY_CHARS = 2000
MAX_INT32 = 2**31 - 1

# Condition reasons.
NEW_RS_CREATED = "NewReplicaSetCreated"
FOUND_NEW_RS = "FoundNewReplicaSet"
RS_UPDATED = "ReplicaSetUpdated"
NEW_RS_AVAILABLE = "NewReplicaSetAvailable"
TIMED_OUT = "ProgressDeadlineExceeded"
PAUSED = "DeploymentPaused"
RESUMED = "DeploymentResumed"
FAILED_RS_CREATE = "FailedRSCreate"


def replicas_of(obj: Obj | None) -> int:
    if obj is None:
        return 0
    value = (obj.get("spec") or {}).get("replicas")
    return 1 if value is None else int(value)


def status_count(obj: Obj | None, field: str) -> int:
    return int(((obj or {}).get("status") or {}).get(field) or 0)


def annotation(obj: Obj, key: str) -> str | None:
    return ((obj.get("metadata") or {}).get("annotations") or {}).get(key)


def revision_of(obj: Obj) -> int:
    try:
        return int(annotation(obj, REVISION) or 0)
    except ValueError:
        return 0


def is_rolling(d: Obj) -> bool:
    return ((d["spec"].get("strategy") or {}).get("type") or "RollingUpdate") == "RollingUpdate"


def _rolling(d: Obj) -> Obj:
    return (d["spec"].get("strategy") or {}).get("rollingUpdate") or {}


def resolve_fenceposts(surge_value: Any, unavailable_value: Any, desired: int) -> tuple[int, int]:
    """(surge, unavailable) for ``desired`` replicas: surge rounds up, unavailable down; never both 0."""
    surge = scaled_value(surge_value, desired, True)
    unavailable = scaled_value(unavailable_value, desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_surge(d: Obj) -> int:
    if not is_rolling(d):
        return 0
    r = _rolling(d)
    return resolve_fenceposts(r.get("maxSurge", "25%"), r.get("maxUnavailable", "25%"), replicas_of(d))[0]


def max_unavailable(d: Obj) -> int:
    if not is_rolling(d) or replicas_of(d) == 0:
        return 0
    r = _rolling(d)
    unavailable = resolve_fenceposts(r.get("maxSurge", "25%"), r.get("maxUnavailable", "25%"), replicas_of(d))[1]
    return min(unavailable, replicas_of(d))


def has_progress_deadline(d: Obj) -> bool:
    pds = d["spec"].get("progressDeadlineSeconds")
    return pds is not None and pds != MAX_INT32


def equal_ignore_hash(a: Obj | None, b: Obj | None) -> bool:
    """Two pod templates equal but for the ``pod-template-hash`` label."""
    a, b = semantic(a or {}), semantic(b or {})
    for t in (a, b):
        labels = (t.get("metadata") or {}).get("labels")
        if labels:
            labels.pop(POD_TEMPLATE_HASH, None)
    return a == b


def created_at(obj: Obj) -> str:
    return obj["metadata"].get("creationTimestamp") or ""


def by_creation(rss: list[Obj]) -> list[Obj]:
    return sorted(rss, key=lambda r: (created_at(r), r["metadata"]["name"]))


def active(rss: list[Obj | None]) -> list[Obj]:
    return [r for r in rss if r is not None and replicas_of(r) > 0]


def total_replicas(rss: list[Obj | None]) -> int:
    return sum(replicas_of(r) for r in rss if r is not None)


def total_status(rss: list[Obj | None], field: str) -> int:
    return sum(status_count(r, field) for r in rss if r is not None)


def new_condition(ctype: str, status: str, reason: str, message: str) -> Obj:
    now = now_rfc3339()
    return {"type": ctype, "status": status, "lastUpdateTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}


def set_condition(status: Obj, cond: Obj) -> None:
    """``SetDeploymentCondition``: no change for the same status and reason; the transition time
    kept while the status stays."""
    conditions = status.get("conditions") or []
    current = condition(conditions, cond["type"])
    if current is not None and current.get("status") == cond["status"] and current.get("reason") == cond["reason"]:
        return
    if current is not None and current.get("status") == cond["status"]:
        cond = {**cond, "lastTransitionTime": current.get("lastTransitionTime")}
    status["conditions"] = [c for c in conditions if c.get("type") != cond["type"]] + [cond]


def remove_condition(status: Obj, ctype: str) -> None:
    status["conditions"] = [c for c in status.get("conditions") or [] if c.get("type") != ctype]


def deployment_complete(d: Obj, status: Obj) -> bool:
    want = replicas_of(d)
    return (int(status.get("updatedReplicas") or 0) == want and int(status.get("replicas") or 0) == want
            and int(status.get("availableReplicas") or 0) == want
            and int(status.get("observedGeneration") or 0) >= int(d["metadata"].get("generation") or 0))


def deployment_progressing(d: Obj, new: Obj) -> bool:
    old = d.get("status") or {}

    def g(s: Obj, k: str) -> int:
        return int(s.get(k) or 0)

    return (g(new, "updatedReplicas") > g(old, "updatedReplicas")
            or g(new, "replicas") - g(new, "updatedReplicas") < g(old, "replicas") - g(old, "updatedReplicas")
            or g(new, "readyReplicas") > g(old, "readyReplicas")
            or g(new, "availableReplicas") > g(old, "availableReplicas"))


def deployment_timed_out(d: Obj, status: Obj, now: float) -> bool:
    if not has_progress_deadline(d):
        return False
    cond = condition(status.get("conditions"), "Progressing")
    if cond is None:
        return False
    if cond.get("reason") == NEW_RS_AVAILABLE:
        return False
    if cond.get("reason") == TIMED_OUT:
        return True
    since = parse_time(cond.get("lastUpdateTime"))
    return since is not None and since + int(d["spec"]["progressDeadlineSeconds"]) < now


def calculate_status(all_rss: list[Obj | None], new_rs: Obj | None, d: Obj) -> Obj:
    """The Deployment's status from its ReplicaSets, with the Available condition."""
    available = total_status(all_rss, "availableReplicas")
    old = d.get("status") or {}
    status: Obj = {
        "observedGeneration": d["metadata"].get("generation", 0),
        "replicas": total_status(all_rss, "replicas"),
        "updatedReplicas": status_count(new_rs, "replicas"),
        "readyReplicas": total_status(all_rss, "readyReplicas"),
        "availableReplicas": available,
        "unavailableReplicas": max(total_replicas(all_rss) - available, 0),
        "conditions": [dict(c) for c in old.get("conditions") or ()],
    }
    if old.get("collisionCount") is not None:
        status["collisionCount"] = old["collisionCount"]
    if available >= replicas_of(d) - max_unavailable(d):
        set_condition(status, new_condition("Available", "True", "MinimumReplicasAvailable",
                                            "Deployment has minimum availability."))
    else:
        set_condition(status, new_condition("Available", "False", "MinimumReplicasUnavailable",
                                            "Deployment does not have minimum availability."))
    return status


def new_rs_replicas(d: Obj, all_rss: list[Obj | None], new_rs: Obj) -> int:
    """How big the new ReplicaSet may be now (``NewRSNewReplicas``)."""
    if not is_rolling(d):
        return replicas_of(d)
    current = total_replicas(all_rss)
    max_total = replicas_of(d) + max_surge(d)
    if current >= max_total:
        return replicas_of(new_rs)
    scale_up = min(max_total - current, replicas_of(d) - replicas_of(new_rs))
    return replicas_of(new_rs) + scale_up


def set_new_rs_annotations(d: Obj, rs: Obj, new_revision: int, exists: bool) -> bool:
    """Copy the Deployment's annotations and set the revision ones on ``rs`` (in place); True if changed."""
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for k, v in (d["metadata"].get("annotations") or {}).items():
        if k in _NOT_COPIED or annotations.get(k) == v:
            continue
        annotations[k] = v
        changed = True
    old_text = annotations.get(REVISION)
    try:
        old_revision = int(old_text) if old_text else 0
    except ValueError:
        return False
    if old_revision < new_revision:
        annotations[REVISION] = str(new_revision)
        changed = True
        if old_text:
            # Rolling back to this ReplicaSet: keep the revisions it had.
            history = annotations.get(REVISION_HISTORY) or ""
            revisions = [r for r in history.split(",") if r] + [old_text]
            while len(",".join(revisions)) > MAX_REV_HISTORY_CHARS and len(revisions) > 1:
                revisions.pop(0)
            annotations[REVISION_HISTORY] = ",".join(revisions)
    if not exists and set_replicas_annotations(rs, replicas_of(d), replicas_of(d) + max_surge(d)):
        changed = True
    return changed


def set_replicas_annotations(rs: Obj, desired: int, maximum: int) -> bool:
    annotations = rs["metadata"].setdefault("annotations", {})
    changed = False
    for key, value in ((DESIRED_REPLICAS, str(desired)), (MAX_REPLICAS, str(maximum))):
        if annotations.get(key) != value:
            annotations[key] = value
            changed = True
    return changed


def int_annotation(rs: Obj, key: str) -> int | None:
    try:
        text = annotation(rs, key)
        return int(text) if text is not None else None
    except ValueError:
        return None


def rs_fraction(rs: Obj, d: Obj) -> int:
    """How many replicas ``rs`` gains (or loses) in a proportional scale (``getReplicaSetFraction``)."""
    if replicas_of(d) == 0:
        return -replicas_of(rs)
    d_max = replicas_of(d) + max_surge(d)
    before = int_annotation(rs, MAX_REPLICAS)
    if not before:
        before = status_count(d, "replicas") or 1
    exact = replicas_of(rs) * d_max / before
    rounded = int(math.floor(abs(exact) + 0.5)) * (1 if exact >= 0 else -1)
    return rounded - replicas_of(rs)


def proportion(rs: Obj, d: Obj, to_add: int, added: int) -> int:
    if replicas_of(rs) == 0 or to_add == 0 or to_add == added:
        return 0
    fraction = rs_fraction(rs, d)
    allowed = to_add - added
    return min(fraction, allowed) if to_add > 0 else max(fraction, allowed)
