"""scheduling.k8s.io/v1: PriorityClass."""

from __future__ import annotations

from koordinator.apiserver.errors import forbidden_field
from koordinator.apiserver.validation.causes import IMMUTABLE, Causes, Obj, as_dict, as_int, as_str, invalid, one_of
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import PREEMPTION_POLICIES


_SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
HIGHEST_USER_DEFINABLE_PRIORITY = 1000000000


def validate_priority_class(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    name = as_str(as_dict(obj.get("metadata")).get("name"))
    value = as_int(obj.get("value")) or 0
    if name.startswith("system-"):
        reason = ""
        if name not in _SYSTEM_PRIORITY_CLASSES:
            reason = f"{name} is not a known system priority class"
        elif value != _SYSTEM_PRIORITY_CLASSES[name]:
            reason = f"value of {name} PriorityClass must be {_SYSTEM_PRIORITY_CLASSES[name]}"
        elif obj.get("globalDefault") is True:
            reason = f"globalDefault of {name} PriorityClass must be false"
        if reason:
            causes.append(forbidden_field("metadata.name", "priority class names with 'system-' prefix are reserved "
                                                           f"for system use only. error: {reason}"))
    elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
        causes.append(forbidden_field("value", f"maximum allowed value of a user defined priority is "
                                               f"{HIGHEST_USER_DEFINABLE_PRIORITY}"))
    if obj.get("preemptionPolicy") is not None:
        causes.extend(one_of(obj.get("preemptionPolicy"), "preemptionPolicy", PREEMPTION_POLICIES))
    if old is not None:
        if (as_int(as_dict(old).get("value")) or 0) != value:
            causes.append(forbidden_field("value", "may not be changed in an update."))
        if obj.get("preemptionPolicy") != as_dict(old).get("preemptionPolicy"):
            causes.append(invalid("preemptionPolicy", obj.get("preemptionPolicy"), IMMUTABLE))
    return causes
