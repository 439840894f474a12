"""Keeping one cluster-scoped object named after the node current: created if missing, updated when
the desired content differs, retried on conflicts. The NodeResourceTopology and Device reporters
share it; the NodeMetric reporter writes a status subresource and has its own loop."""

from __future__ import annotations

import logging
from typing import Any, Callable

from koordinator.runtime import errors
from koordinator_roles.koordlet.statesinformer.problems import TaskProblem

Obj = dict[str, Any]

CONFLICT_ATTEMPTS = 3


def owner_reference(node: Obj) -> Obj:
    """The Node as the controlling owner (the object goes when the Node does)."""
    md = node.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "Node", "name": md.get("name", ""), "uid": md.get("uid", ""),
            "controller": True, "blockOwnerDeletion": True}


def sync_node_object(client: Any, kind: Any, name: str, *, new: Callable[[], Obj],
                     merge: Callable[[Obj], Obj], problems: TaskProblem, what: str, log: logging.Logger,
                     detail: str = "") -> bool:
    """Create ``new()`` when ``name`` does not exist, else write ``merge(current)`` if it differs from
    ``current``; True when something was written. Failures go to ``problems`` (logged once)."""
    for _ in range(CONFLICT_ATTEMPTS):
        try:
            current = client.get(kind, name)
        except errors.NotFound:
            try:
                client.create(new())
            except errors.AlreadyExists:
                return False  # created meanwhile: the next round updates it
            except errors.ApiError as err:
                problems.problem(f"creating {what} {name} failed: {err}")
                return False
            problems.ok()
            log.info("created %s %s%s", what, name, detail)
            return True
        except errors.ApiError as err:
            problems.problem(f"reading {what} {name} failed: {err}")
            return False
        updated = merge(current)
        if updated == current:
            problems.ok()
            return False
        try:
            client.update(updated)
        except errors.Conflict:
            continue
        except errors.ApiError as err:
            problems.problem(f"updating {what} {name} failed: {err}")
            return False
        problems.ok()
        log.info("updated %s %s%s", what, name, detail)
        return True
    problems.problem(f"updating {what} {name}: still conflicting after {CONFLICT_ATTEMPTS} attempts")
    return False
