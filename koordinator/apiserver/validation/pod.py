"""core/v1 Pod create and update validation (which spec fields may change, resize rules)."""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.errors import forbidden_field, required
from koordinator.apiserver.validation.causes import Causes, Obj, as_dict, as_int, as_list, as_str, invalid
from koordinator.apiserver.validation.core_resources import semantic
from koordinator.apiserver.validation.formats import inclusive_range_error
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import validate_pod_spec, validate_tolerations


_UPDATABLE_POD_FIELDS = ",".join([
    "`spec.containers[*].image`",
    "`spec.initContainers[*].image`",
    "`spec.activeDeadlineSeconds`",
    "`spec.tolerations` (only additions to existing tolerations)",
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
])


def validate_pod(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(validate_pod_spec(spec, "spec", is_pod=True))
    for list_name in ("containers", "initContainers"):
        for i, ctr in enumerate(as_dict(c) for c in as_list(spec.get(list_name))):
            image = as_str(ctr.get("image"))
            if image != image.strip():
                causes.append(invalid(f"spec.{list_name}[{i}].image", image,
                                      "must not have leading or trailing whitespace"))
    if old is None:
        if as_list(spec.get("ephemeralContainers")):
            causes.append(forbidden_field("spec.ephemeralContainers", "cannot be set on create"))
        if as_str(spec.get("nodeName")) and as_list(spec.get("schedulingGates")):
            causes.append(forbidden_field("spec.nodeName", "cannot be set until all schedulingGates have been cleared"))
    else:
        causes.extend(_validate_pod_update(spec, as_dict(as_dict(old).get("spec"))))
    return causes


def _validate_container_updates(new: Any, old: Any, path: str) -> tuple[Causes, bool]:
    new_items, old_items = as_list(new), as_list(old)
    if len(new_items) != len(old_items):
        return [forbidden_field(path, "pod updates may not add or remove containers")], True
    causes: Causes = []
    for i, ctr in enumerate(as_dict(c) for c in new_items):
        if not as_str(ctr.get("image")):
            causes.append(required(f"{path}[{i}].image", ""))
    return causes, False


def _toleration_key(tol: Any) -> Any:
    t = dict(as_dict(tol))
    t.pop("tolerationSeconds", None)
    return semantic(t)


def _go_field(name: str) -> str:
    return name[:1].upper() + name[1:]


def _spec_diff(old: Obj, new: Obj) -> str:
    """A cmp.Diff-shaped summary of the changed top-level PodSpec fields (approximate)."""
    lines = ["  core.PodSpec{"]
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            if key in old:
                lines.append(f"- \t{_go_field(key)}: {old[key]!r},")
            if key in new:
                lines.append(f"+ \t{_go_field(key)}: {new[key]!r},")
    lines.append("  }")
    return "\n".join(lines)


def _validate_pod_update(spec: Obj, old_spec: Obj) -> Causes:
    """``ValidatePodUpdate``'s mutability rules (status is not looked at)."""
    causes: Causes = []
    errs, stop = _validate_container_updates(spec.get("containers"), old_spec.get("containers"), "spec.containers")
    causes.extend(errs)
    if stop:
        return causes
    errs, stop = _validate_container_updates(spec.get("initContainers"), old_spec.get("initContainers"),
                                             "spec.initContainers")
    causes.extend(errs)
    if stop:
        return causes
    new_deadline = as_int(spec.get("activeDeadlineSeconds"))
    old_deadline = as_int(old_spec.get("activeDeadlineSeconds"))
    if new_deadline is not None:
        if new_deadline < 0 or new_deadline > 2**31 - 1:
            causes.append(invalid("spec.activeDeadlineSeconds", new_deadline, inclusive_range_error(0, 2**31 - 1)))
            return causes
        if old_deadline is not None and old_deadline < new_deadline:
            causes.append(invalid("spec.activeDeadlineSeconds", new_deadline,
                                  "must be less than or equal to previous value"))
            return causes
    elif old_deadline is not None:
        causes.append(invalid("spec.activeDeadlineSeconds", None,
                              "must not update from a positive integer to nil value"))
    new_tols = [_toleration_key(t) for t in as_list(spec.get("tolerations"))]
    for old_tol in as_list(old_spec.get("tolerations")):
        if _toleration_key(old_tol) not in new_tols:
            causes.append(forbidden_field("spec.tolerations",
                                          "existing toleration can not be modified except its tolerationSeconds"))
            break
    else:
        # Only reached when every old toleration survived; Go re-validates the new list then.
        causes.extend(validate_tolerations(spec.get("tolerations"), "spec.tolerations"))
    new_gates = as_list(spec.get("schedulingGates"))
    if new_gates:
        old_names = {as_str(as_dict(g).get("name")) for g in as_list(old_spec.get("schedulingGates"))}
        added: dict[str, int] = {}
        for i, gate in enumerate(as_dict(g) for g in new_gates):
            added[as_str(gate.get("name"))] = i
        for name, i in added.items():
            if name not in old_names:
                causes.append(forbidden_field(f"spec.schedulingGates[{i}].name",
                                              f"only deletion is allowed, but found new scheduling gate '{name}'"))

    new_norm, old_norm = semantic(spec), semantic(old_spec)
    if new_norm == old_norm:
        return causes
    munged = dict(new_norm)
    for list_name in ("containers", "initContainers"):
        if list_name in munged:
            old_list = old_norm.get(list_name, [])
            merged = []
            for i, ctr in enumerate(munged[list_name]):
                ctr = dict(ctr) if isinstance(ctr, dict) else ctr
                if isinstance(ctr, dict) and i < len(old_list) and isinstance(old_list[i], dict):
                    if "image" in old_list[i]:
                        ctr["image"] = old_list[i]["image"]
                    else:
                        ctr.pop("image", None)
                merged.append(ctr)
            munged[list_name] = merged
    for fld in ("activeDeadlineSeconds", "schedulingGates", "tolerations"):
        if fld in old_norm:
            munged[fld] = old_norm[fld]
        else:
            munged.pop(fld, None)
    old_grace = as_int(old_spec.get("terminationGracePeriodSeconds"))
    if old_grace is not None and old_grace < 0 and as_int(munged.get("terminationGracePeriodSeconds")) == 1:
        munged["terminationGracePeriodSeconds"] = old_norm.get("terminationGracePeriodSeconds")
    if old_norm.get("schedulingGates"):
        # Gated pods may gain nodeSelector entries and node affinity while still gated.
        for fld in ("nodeSelector",):
            if fld in old_norm or fld in munged:
                old_sel, new_sel = old_norm.get(fld, {}), munged.get(fld, {})
                if all(new_sel.get(k) == v for k, v in old_sel.items()):
                    munged[fld] = old_sel
                    if not old_sel:
                        munged.pop(fld, None)
    if munged != old_norm:
        causes.append(forbidden_field("spec", f"pod updates may not change fields other than {_UPDATABLE_POD_FIELDS}\n"
                                      f"{_spec_diff(old_norm, munged)}"))
    return causes
