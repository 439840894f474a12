"""ClusterColocationProfile matching and mutation, shared by the pod and Reservation mutating webhooks.

Both webhooks (reference B.6.1, B.6.5) keep the profiles whose selectors match, sort them by
name, skip some by ``probability`` and apply the rest in Koordinator's order a–j: labels,
annotations, labelKeysMapping, annotationKeysMapping, labelSuffixes, schedulerName, qosClass,
priorityClassName (+ priority and preemptionPolicy of the PriorityClass), koordinatorPriority,
patch (strategic merge of the whole object). They differ only in what a selector is matched
against and in which pod spec the scheduling fields land (the Pod's own, or a Reservation's
``spec.template.spec``), so those are parameters here.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from koordinator.apis import extension
from koordinator.apis.selectors import SelectorError, label_selector_from_dict
from koordinator_roles.manager.webhooks import _request as rq
from koordinator_roles.manager.webhooks.listers import Listers
from koordinator_roles.manager.webhooks.smp import PatchError, strategic_merge

Obj = dict[str, Any]

ANNOTATION_SKIP_UPDATE_RESOURCES = "config.koordinator.sh/skip-update-resources"


class MutationError(Exception):
    """Mutation failed; the admission is answered with ``code`` and the message."""

    def __init__(self, message: str, code: int = 500) -> None:
        super().__init__(message)
        self.code = code


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """Empty selector -> every object; an unparseable one counts as matched (Koordinator's rule)."""
    try:
        sel = label_selector_from_dict(selector, nil_matches_nothing=False)
    except (SelectorError, TypeError, AttributeError, ValueError):
        return True
    return sel.matches(labels)


def matched_profiles(profiles: Iterable[Obj], matches: Callable[[Obj], bool]) -> list[Obj]:
    """The profiles ``matches`` accepts, sorted by name (the order they are applied in)."""
    return sorted((p for p in profiles if matches(p)), key=rq.name)


def probability_percent(profile: Obj) -> int:
    """``probability`` scaled against 100 (``intstr.GetScaledValueFromIntOrPercent``, rounding down)."""
    value = (profile.get("spec") or {}).get("probability")
    if value is None:
        return 100
    if isinstance(value, bool):
        raise MutationError(f"invalid value for IntOrString: invalid type: {value!r} is neither int nor string")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if not value.endswith("%"):
            raise MutationError("invalid value for IntOrString: invalid type: string is not a percentage")
        try:
            percent = int(value[:-1])
        except ValueError:
            raise MutationError(f'invalid value "{value}": strconv.Atoi: parsing "{value[:-1]}": invalid syntax') from None
        return percent * 100 // 100
    raise MutationError(f"invalid value for IntOrString: invalid type: {type(value).__name__}")


def should_skip(profile: Obj, rng: random.Random) -> bool:
    """Skip when the percent is 0, or not 100 and a draw in [0, 99] exceeds it."""
    percent = probability_percent(profile)
    return percent == 0 or (percent != 100 and rng.randrange(100) > percent)


def apply_metadata(md: Obj, spec: Mapping[str, Any]) -> None:
    """Steps a–e, g and i of one profile on ``md`` (the object's metadata), in place."""
    if spec.get("labels"):
        md["labels"] = {**(md.get("labels") or {}), **spec["labels"]}
    if spec.get("annotations"):
        md["annotations"] = {**(md.get("annotations") or {}), **spec["annotations"]}
    if spec.get("labelKeysMapping"):
        current = dict(md.get("labels") or {})
        for old, new in spec["labelKeysMapping"].items():
            current[new] = current.get(old, "")
        md["labels"] = current
    if spec.get("annotationKeysMapping"):
        current = dict(md.get("annotations") or {})
        for old, new in spec["annotationKeysMapping"].items():
            current[new] = current.get(old, "")
        md["annotations"] = current
    if spec.get("labelSuffixes"):
        current = dict(md.get("labels") or {})
        for key, suffix in spec["labelSuffixes"].items():
            if key in current:
                current[key] = current[key] + suffix
        md["labels"] = current
    if spec.get("qosClass"):
        md["labels"] = {**(md.get("labels") or {}), extension.LABEL_POD_QOS: spec["qosClass"]}
    if spec.get("koordinatorPriority") is not None:
        md["labels"] = {**(md.get("labels") or {}), extension.LABEL_POD_PRIORITY: str(int(spec["koordinatorPriority"]))}


def apply_scheduling(pod_spec: Obj, spec: Mapping[str, Any], listers: Listers) -> None:
    """Steps f and h on a pod spec: schedulerName, and priorityClassName with the PriorityClass's priority
    and preemptionPolicy; a missing PriorityClass fails the admission with the API's NotFound text."""
    if spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec["schedulerName"]
    if spec.get("priorityClassName"):
        name = spec["priorityClassName"]
        pc = listers.priority_class(name)
        if pc is None:
            raise MutationError(f'priorityclasses.scheduling.k8s.io "{name}" not found')
        pod_spec["priorityClassName"] = name
        pod_spec["priority"] = int(pc.get("value") or 0)
        if pc.get("preemptionPolicy"):
            pod_spec["preemptionPolicy"] = pc["preemptionPolicy"]
        else:
            pod_spec.pop("preemptionPolicy", None)


def apply_patch(obj: Obj, profile: Obj) -> None:
    """Step j: the profile's ``patch`` as a strategic merge patch of the whole object, in place."""
    patch = (profile.get("spec") or {}).get("patch")
    if patch is None:
        return
    try:
        patched = strategic_merge(obj, patch)
    except PatchError as exc:
        raise MutationError(f"profile {rq.name(profile)}: patch: {exc}") from None
    obj.clear()
    obj.update(patched)


def apply_profile(obj: Obj, profile: Obj, listers: Listers, pod_spec: Callable[[Obj], Obj | None]) -> None:
    """One profile on ``obj``: metadata steps on its metadata, scheduling steps on ``pod_spec(obj)`` (skipped
    when that is None), then the patch. The steps touch disjoint fields, so grouping them keeps a–j's result."""
    spec = profile.get("spec") or {}
    apply_metadata(obj.setdefault("metadata", {}), spec)
    target = pod_spec(obj)
    if target is not None:
        apply_scheduling(target, spec, listers)
    apply_patch(obj, profile)
