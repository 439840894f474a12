"""coordination.k8s.io/v1: Lease."""

from __future__ import annotations

from koordinator.apiserver.validation.causes import NEGATIVE, Causes, Obj, as_dict, as_int, invalid
from koordinator.apiserver.validation.meta import validate_object_meta


def validate_lease(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    duration = as_int(spec.get("leaseDurationSeconds"))
    if duration is not None and duration <= 0:
        causes.append(invalid("spec.leaseDurationSeconds", duration, "must be greater than 0"))
    transitions = as_int(spec.get("leaseTransitions"))
    if transitions is not None and transitions < 0:
        causes.append(invalid("spec.leaseTransitions", transitions, NEGATIVE))
    return causes
