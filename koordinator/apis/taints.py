"""Taints and tolerations (core/v1 helpers), shared by the scheduler and the workload controllers.

:func:`toleration_tolerates` is kube's ``Toleration.ToleratesTaint``, :func:`tolerates`
``TolerationsTolerateTaint`` and :func:`find_untolerated_taint` ``FindMatchingUntoleratedTaint``.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

NO_SCHEDULE = "NoSchedule"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
NO_EXECUTE = "NoExecute"


def toleration_tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """One toleration against one taint.

    An empty effect matches every effect; an empty key with ``Exists`` matches every key;
    ``Equal`` (or no operator) also needs equal values.
    """
    effect = toleration.get("effect") or ""
    if effect and effect != (taint.get("effect") or ""):
        return False
    key = toleration.get("key") or ""
    if key and key != (taint.get("key") or ""):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    if operator == "Equal":
        return (toleration.get("value") or "") == (taint.get("value") or "")
    return False


def tolerates(tolerations: Iterable[Mapping[str, Any]] | None, taint: Mapping[str, Any]) -> bool:
    """Whether any of ``tolerations`` tolerates ``taint``."""
    return any(toleration_tolerates(t, taint) for t in tolerations or ())


def find_untolerated_taint(taints: Iterable[Mapping[str, Any]] | None,
                           tolerations: Iterable[Mapping[str, Any]] | None,
                           effects: tuple[str, ...] = (NO_SCHEDULE, NO_EXECUTE)) -> Mapping[str, Any] | None:
    """The first taint with one of ``effects`` that no toleration tolerates, or None."""
    tolerations = list(tolerations or ())
    for taint in taints or ():
        if taint.get("effect") in effects and not tolerates(tolerations, taint):
            return taint
    return None
