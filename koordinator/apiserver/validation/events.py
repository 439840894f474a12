"""events.k8s.io/v1 Event (validated as its core/v1 form, as kube does, plus its own rules)."""

from __future__ import annotations

from koordinator.apiserver.errors import required
from koordinator.apiserver.validation.causes import Causes, Obj, as_dict, as_int, as_str, invalid
from koordinator.apiserver.validation.core import validate_event


# -- events.k8s.io/v1 -------------------------------------------------------------------------


def validate_events_v1(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateEventCreate`` for ``events.k8s.io/v1``: the legacy rules plus the strict ones.

    Paths are those of the stored (core) form, as kube reports them.
    """
    from koordinator.apiserver.conversions import EVENTS_V1

    core = EVENTS_V1.to_storage(obj)
    # The legacy checks name the reporting field as the request's API does.
    causes = [{**c, "field": "reportingController"} if c["field"] == "reportingComponent" else c
              for c in validate_event(core, None)]
    if old is not None:
        return causes
    if not core.get("eventTime"):
        causes.append(required("eventTime", ""))
    series = core.get("series")
    if series is not None:
        count = as_int(as_dict(series).get("count"))
        if count is None or count < 2:
            causes.append(invalid("series.count", "", "should be at least 2"))
        if not as_dict(series).get("lastObservedTime"):
            causes.append(required("series.lastObservedTime", ""))
    if core.get("type") not in ("Normal", "Warning"):
        causes.append(invalid("type", "", f"has invalid value: {as_str(core.get('type'))}"))
    for fld in ("firstTimestamp", "lastTimestamp"):
        if core.get(fld):
            causes.append(invalid(fld, "", "needs to be unset"))
    if core.get("count"):
        causes.append(invalid("count", "", "needs to be unset"))
    if as_dict(core.get("source")).get("component") or as_dict(core.get("source")).get("host"):
        causes.append(invalid("source", "", "needs to be unset"))
    return causes
