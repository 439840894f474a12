"""policy/v1: PodDisruptionBudget."""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.errors import not_supported
from koordinator.apiserver.validation.apps import not_more_than_100_percent, positive_int_or_percent
from koordinator.apiserver.validation.causes import Causes, Obj, as_dict, invalid_rendered
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import validate_label_selector


def _validate_int_or_percent(value: Any, path: str) -> Causes:
    """Both checks on one field, as PodDisruptionBudget applies them."""
    if value is None:
        return []
    return positive_int_or_percent(value, path) + not_more_than_100_percent(value, path)


def validate_pdb(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        ptr = "(*intstr.IntOrString)(0xc000000000)"
        sel = "(*v1.LabelSelector)(0xc000000000)" if spec.get("selector") is not None else "(*v1.LabelSelector)(nil)"
        rendered = (f"policy.PodDisruptionBudgetSpec{{MinAvailable:{ptr}, Selector:{sel}, MaxUnavailable:{ptr}, "
                    f"UnhealthyPodEvictionPolicy:(*policy.UnhealthyPodEvictionPolicyType)(nil)}}")
        causes.append(invalid_rendered("spec", rendered, "minAvailable and maxUnavailable cannot be both set"))
    causes.extend(_validate_int_or_percent(min_available, "spec.minAvailable"))
    causes.extend(_validate_int_or_percent(max_unavailable, "spec.maxUnavailable"))
    causes.extend(validate_label_selector(spec.get("selector"), "spec.selector"))
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in ("AlwaysAllow", "IfHealthyBudget"):
        causes.append(not_supported("spec.unhealthyPodEvictionPolicy", policy, ["AlwaysAllow", "IfHealthyBudget"]))
    return causes
