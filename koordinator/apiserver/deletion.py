"""DeleteOptions and deletion propagation, as kube-apiserver's generic registry store does them.

A DELETE says what happens to the object's dependents (objects whose ``ownerReferences`` name it)
with ``propagationPolicy`` (or the legacy ``orphanDependents``), in the body or, when the body is
empty, as query parameters:

* ``Background``: the object goes at once (unless other finalizers hold it); the garbage collector
  deletes the dependents afterwards;
* ``Foreground``: the object gets a ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer
  and stays until the garbage collector has deleted the dependents that block it and removed the
  finalizer;
* ``Orphan``: the ``orphan`` finalizer; the garbage collector removes the object from the
  dependents' ``ownerReferences``, then the finalizer.

Without either option the object's own ``orphan``/``foregroundDeletion`` finalizer decides, then
the kind's default (:func:`default_policy`). The garbage collector itself is a controller
(``koordinator controllers``); this module only records the intent.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver import errors

Obj = dict[str, Any]

FOREGROUND = "Foreground"
BACKGROUND = "Background"
ORPHAN = "Orphan"
POLICIES = (FOREGROUND, BACKGROUND, ORPHAN)
FINALIZER_ORPHAN = "orphan"
FINALIZER_FOREGROUND = "foregroundDeletion"
# A kind whose registry does not take part in garbage collection: options never add finalizers.
UNSUPPORTED = "Unsupported"

# (group, plural) -> the default when a DELETE names no policy; every other kind deletes its
# dependents in the background. Jobs and core/v1 ReplicationControllers orphan them for backward
# compatibility (kubectl always sends Background explicitly); Events take no part.
_DEFAULTS = {
    ("batch", "jobs"): ORPHAN,
    ("", "replicationcontrollers"): ORPHAN,
    ("", "events"): UNSUPPORTED,
    ("events.k8s.io", "events"): UNSUPPORTED,
}


def default_policy(group: str, plural: str) -> str:
    """What a DELETE of this resource does to dependents when it does not say (``rest.GarbageCollectionPolicy``)."""
    return _DEFAULTS.get((group, plural), BACKGROUND)


def delete_options(body: Any, query: dict[str, str]) -> Obj:
    """The DeleteOptions of a request: the body's, or the query parameters' when the body is empty."""
    if body is None or body == {} or body == b"":
        options: Obj = {}
        if "propagationPolicy" in query:
            options["propagationPolicy"] = query["propagationPolicy"]
        if "orphanDependents" in query:
            raw = query["orphanDependents"].lower()
            if raw not in ("true", "false", "1", "0"):
                raise errors.bad_request(f'orphanDependents: invalid value {query["orphanDependents"]!r}: '
                                         "must be true or false")
            options["orphanDependents"] = raw in ("true", "1")
        if "gracePeriodSeconds" in query:
            options["gracePeriodSeconds"] = query["gracePeriodSeconds"]
        if query.get("dryRun"):
            options["dryRun"] = [query["dryRun"]]
        return options
    if not isinstance(body, dict):
        raise errors.bad_request("DeleteOptions must be an object")
    return body


def validate(options: Obj) -> None:
    """``ValidateDeleteOptions``: 422 naming the bad field and value, 400 for a value of the wrong type."""
    policy = options.get("propagationPolicy")
    orphan = options.get("orphanDependents")
    kind = options.get("kind")
    if kind is not None and kind != "DeleteOptions":
        # Deleting on the strength of a body that is some other object would ignore what it says.
        raise errors.bad_request(f"kind: Invalid value: {kind!r}: the request body must be a DeleteOptions")
    dry_run = options.get("dryRun")
    if dry_run is not None and not (isinstance(dry_run, list) and all(isinstance(v, str) for v in dry_run)):
        # A malformed dryRun must not fall through to a real delete.
        raise errors.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.dryRun of type []string")
    grace = options.get("gracePeriodSeconds")
    if grace is not None and (isinstance(grace, bool) or not isinstance(grace, (int, str))
                              or (isinstance(grace, str) and not grace.lstrip("-").isdigit())):
        # Query parameters arrive as strings; a JSON body's value must be a number.
        raise errors.bad_request(f"gracePeriodSeconds: Invalid value: {grace!r}: must be an integer")
    if policy is not None and not isinstance(policy, str):
        raise errors.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.propagationPolicy of "
                                 "type v1.DeletionPropagation")
    if orphan is not None and not isinstance(orphan, bool):
        raise errors.bad_request("json: cannot unmarshal into Go struct field DeleteOptions.orphanDependents of "
                                 "type bool")
    causes = []
    if orphan is not None and policy is not None:
        causes.append(errors.invalid_value("propagationPolicy", policy,
                                           "orphanDependents and deletionPropagation cannot be both set"))
    if policy is not None and policy not in POLICIES:
        causes.append(errors.not_supported("propagationPolicy", policy, [*POLICIES, "nil"]))
    if isinstance(dry_run, list):
        causes.extend(errors.not_supported("dryRun", v, ["All"]) for v in dry_run if v != "All")
    if causes:
        raise errors.invalid("DeleteOptions", "meta.k8s.io", "", causes)


def _should_orphan(default: str, finalizers: list[str], options: Obj) -> bool:
    if default == UNSUPPORTED:
        return False
    if options.get("orphanDependents") is not None:
        return bool(options["orphanDependents"])
    policy = options.get("propagationPolicy")
    if policy is not None:
        return policy == ORPHAN
    # The object's own finalizer says what a bare delete does.
    for f in finalizers:
        if f == FINALIZER_ORPHAN:
            return True
        if f == FINALIZER_FOREGROUND:
            return False
    return default == ORPHAN


def _should_delete_dependents(default: str, finalizers: list[str], options: Obj) -> bool:
    if default == UNSUPPORTED or options.get("orphanDependents") is not None:
        return False
    policy = options.get("propagationPolicy")
    if policy is not None:
        return policy == FOREGROUND
    return FINALIZER_FOREGROUND in finalizers


def deletion_finalizers(group: str, plural: str, finalizers: list[str] | None, options: Obj) -> list[str] | None:
    """The object's finalizers once this delete has recorded its policy, or None when they stay as they are."""
    current = list(finalizers or [])
    default = default_policy(group, plural)
    orphan = _should_orphan(default, current, options)
    foreground = _should_delete_dependents(default, current, options)
    wanted = [f for f in current if f not in (FINALIZER_ORPHAN, FINALIZER_FOREGROUND)]
    if orphan:
        wanted.append(FINALIZER_ORPHAN)
    if foreground:
        wanted.append(FINALIZER_FOREGROUND)
    return None if set(wanted) == set(current) else wanted
