"""apps/v1: Deployment, ReplicaSet, DaemonSet, StatefulSet, ControllerRevision."""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.errors import cause, forbidden_field, required
from koordinator.apiserver.validation.causes import (
    IMMUTABLE,
    Causes,
    Obj,
    as_dict,
    as_int,
    as_list,
    as_str,
    go_quote,
    int_or_string,
    invalid,
    invalid_rendered,
    label_selector_string,
    nonnegative,
)
from koordinator.apiserver.validation.core_resources import semantic
from koordinator.apiserver.validation.formats import PERCENT_MSG, PERCENT_RE
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import (
    restart_always,
    selector_mismatch,
    validate_label_selector,
    validate_pod_template,
)


def _selector_and_template(spec: Obj, path: str, kind: str) -> Causes:
    """Selector checks shared by Deployment and ReplicaSet plus the template match."""
    causes: Causes = []
    sel = spec.get("selector")
    sel_errs: Causes = []
    if sel is None:
        causes.append(required(f"{path}.selector", ""))
    else:
        sel_errs = validate_label_selector(sel, f"{path}.selector")
        causes.extend(sel_errs)
        if not as_dict(as_dict(sel).get("matchLabels")) and not as_list(as_dict(sel).get("matchExpressions")):
            causes.append(invalid_rendered(f"{path}.selector", label_selector_string(sel),
                                           "empty selector is invalid for deployment"))
    if sel_errs:
        causes.append(invalid_rendered(f"{path}.selector", label_selector_string(sel), "invalid label selector"))
    else:
        causes.extend(_template_for_replicas(spec, sel, f"{path}.template", kind))
    return causes


def _template_for_replicas(spec: Obj, sel: Any, path: str, kind: str) -> Causes:
    """``ValidatePodTemplateSpecForReplicaSet``."""
    tmpl = spec.get("template")
    causes: Causes = []
    # An empty (non-nil) selector selects everything, so there is nothing to mismatch.
    if sel is None or as_dict(sel).get("matchLabels") or as_list(as_dict(sel).get("matchExpressions")):
        causes.extend(selector_mismatch(sel, tmpl, path))
    causes.extend(validate_pod_template(tmpl, path))
    causes.extend(restart_always(tmpl, path))
    if as_dict(as_dict(tmpl).get("spec")).get("activeDeadlineSeconds") is not None:
        causes.append(forbidden_field(f"{path}.spec.activeDeadlineSeconds",
                                      "activeDeadlineSeconds in ReplicaSet is not Supported"))
    return causes


def positive_int_or_percent(value: Any, path: str) -> Causes:
    """``ValidatePositiveIntOrPercent``: a non-negative int or an ``N%`` string."""
    if isinstance(value, str):
        return [] if PERCENT_RE.fullmatch(value) else [invalid_rendered(path, value, PERCENT_MSG)]
    return nonnegative(value, path)


def not_more_than_100_percent(value: Any, path: str) -> Causes:
    """``IsNotMoreThan100Percent`` (IntOrString prints unquoted, through its String method)."""
    if isinstance(value, str) and PERCENT_RE.fullmatch(value) and int(value[:-1]) > 100:
        return [invalid_rendered(path, value, "must not be greater than 100%")]
    return []


def _int_or_percent_value(value: Any) -> int:
    if isinstance(value, str):
        return int(value[:-1]) if PERCENT_RE.fullmatch(value) else 0
    return as_int(value) or 0


def _validate_deployment_strategy(strategy: Any, path: str) -> Causes:
    strategy = as_dict(strategy)
    stype = as_str(strategy.get("type"))
    rolling = strategy.get("rollingUpdate")
    if stype == "Recreate":
        if rolling is not None:
            return [forbidden_field(f"{path}.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'")]
        return []
    if stype == "RollingUpdate":
        if rolling is None:
            return [required(f"{path}.rollingUpdate", "this should be defaulted and never be nil")]
        rolling = as_dict(rolling)
        rpath = f"{path}.rollingUpdate"
        unavailable, surge = rolling.get("maxUnavailable", 0), rolling.get("maxSurge", 0)
        causes = positive_int_or_percent(unavailable, f"{rpath}.maxUnavailable")
        causes.extend(positive_int_or_percent(surge, f"{rpath}.maxSurge"))
        if not _int_or_percent_value(unavailable) and not _int_or_percent_value(surge):
            causes.append(invalid_rendered(f"{rpath}.maxUnavailable", int_or_string(unavailable),
                                           "may not be 0 when `maxSurge` is 0"))
        causes.extend(not_more_than_100_percent(unavailable, f"{rpath}.maxUnavailable"))
        return causes
    rendered = (f"apps.DeploymentStrategy{{Type:{go_quote(stype)}, RollingUpdate:(*apps.RollingUpdateDeployment)"
                f"({'0xc000000000' if rolling is not None else 'nil'})}}")
    return [cause("FieldValueNotSupported", path,
                  f'Unsupported value: {rendered}: supported values: "Recreate", "RollingUpdate"')]


def validate_deployment(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(nonnegative(spec.get("replicas"), "spec.replicas"))
    causes.extend(_selector_and_template(spec, "spec", "Deployment"))
    causes.extend(_validate_deployment_strategy(spec.get("strategy"), "spec.strategy"))
    causes.extend(nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    causes.extend(nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    deadline = as_int(spec.get("progressDeadlineSeconds"))
    if deadline is not None:
        causes.extend(nonnegative(deadline, "spec.progressDeadlineSeconds"))
        if deadline <= (as_int(spec.get("minReadySeconds")) or 0):
            causes.append(invalid("spec.progressDeadlineSeconds", deadline, "must be greater than minReadySeconds"))
    causes.extend(_selector_immutable(spec, old))
    return causes


def _selector_immutable(spec: Obj, old: Obj | None) -> Causes:
    if old is None:
        return []
    old_sel = as_dict(as_dict(old).get("spec")).get("selector")
    if semantic(spec.get("selector")) != semantic(old_sel):
        return [invalid_rendered("spec.selector", label_selector_string(spec.get("selector")), IMMUTABLE)]
    return []


def validate_replicaset(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    causes.extend(nonnegative(spec.get("replicas"), "spec.replicas"))
    causes.extend(nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    causes.extend(_selector_and_template(spec, "spec", "ReplicaSet"))
    causes.extend(_selector_immutable(spec, old))
    return causes


def _validate_rolling_update_daemonset(rolling: Obj, path: str) -> Causes:
    unavailable, surge = rolling.get("maxUnavailable", 0), rolling.get("maxSurge", 0)
    causes = positive_int_or_percent(unavailable, f"{path}.maxUnavailable")
    causes.extend(positive_int_or_percent(surge, f"{path}.maxSurge"))
    causes.extend(not_more_than_100_percent(unavailable, f"{path}.maxUnavailable"))
    causes.extend(not_more_than_100_percent(surge, f"{path}.maxSurge"))
    has_unavailable, has_surge = _int_or_percent_value(unavailable) != 0, _int_or_percent_value(surge) != 0
    if has_unavailable and has_surge:
        causes.append(invalid_rendered(f"{path}.maxSurge", int_or_string(surge),
                                       "may not be set when maxUnavailable is non-zero"))
    elif not has_unavailable and not has_surge:
        causes.append(required(f"{path}.maxUnavailable", "cannot be 0 when maxSurge is 0"))
    return causes


def validate_daemonset(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    sel = spec.get("selector")
    sel_errs = validate_label_selector(sel, "spec.selector")
    causes.extend(sel_errs)
    tmpl = spec.get("template")
    if not sel_errs:
        causes.extend(selector_mismatch(sel, tmpl, "spec.template"))
    if (sel is not None and not as_dict(as_dict(sel).get("matchLabels"))
        and not as_list(as_dict(sel).get("matchExpressions"))):
        causes.append(invalid_rendered("spec.selector", label_selector_string(sel),
                                       "empty selector is invalid for daemonset"))
    causes.extend(validate_pod_template(tmpl, "spec.template"))
    causes.extend(restart_always(tmpl, "spec.template"))
    deadline = as_dict(as_dict(tmpl).get("spec")).get("activeDeadlineSeconds")
    if deadline is not None:
        causes.append(invalid("spec.template.spec.activeDeadlineSeconds", deadline,
                              "activeDeadlineSeconds in DaemonSet is not Supported"))
    causes.extend(nonnegative(spec.get("minReadySeconds"), "spec.minReadySeconds"))
    strategy = as_dict(spec.get("updateStrategy"))
    stype = as_str(strategy.get("type"))
    if stype == "RollingUpdate":
        rolling = strategy.get("rollingUpdate")
        if rolling is None:
            causes.append(required("spec.updateStrategy.rollingUpdate", ""))
        else:
            causes.extend(_validate_rolling_update_daemonset(as_dict(rolling), "spec.updateStrategy.rollingUpdate"))
    elif stype != "OnDelete":
        causes.append(cause("FieldValueNotSupported", "spec.updateStrategy",
                            f"Unsupported value: apps.DaemonSetUpdateStrategy{{Type:{go_quote(stype)}, "
                            f"RollingUpdate:(*apps.RollingUpdateDaemonSet)(nil)}}: supported values: "
                            f'"RollingUpdate", "OnDelete"'))
    causes.extend(nonnegative(spec.get("revisionHistoryLimit"), "spec.revisionHistoryLimit"))
    causes.extend(_selector_immutable(spec, old))
    return causes


def validate_statefulset(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    spec = as_dict(obj.get("spec"))
    policy = as_str(spec.get("podManagementPolicy"))
    if not policy:
        causes.append(required("spec.podManagementPolicy", ""))
    elif policy not in ("OrderedReady", "Parallel"):
        causes.append(invalid("spec.podManagementPolicy", policy, "must be 'OrderedReady' or 'Parallel'"))
    stype = as_str(as_dict(spec.get("updateStrategy")).get("type"))
    if not stype:
        causes.append(required("spec.updateStrategy", ""))
    elif stype not in ("RollingUpdate", "OnDelete"):
        rendered = f"apps.StatefulSetUpdateStrategy{{Type:{go_quote(stype)}}}"
        causes.append(invalid_rendered("spec.updateStrategy", rendered, "must be 'RollingUpdate' or 'OnDelete'"))
    causes.extend(nonnegative(spec.get("replicas"), "spec.replicas"))
    sel = spec.get("selector")
    sel_errs: Causes = []
    if sel is None:
        causes.append(required("spec.selector", ""))
    else:
        sel_errs = validate_label_selector(sel, "spec.selector")
        causes.extend(sel_errs)
        if not as_dict(as_dict(sel).get("matchLabels")) and not as_list(as_dict(sel).get("matchExpressions")):
            causes.append(invalid_rendered("spec.selector", label_selector_string(sel),
                                           "empty selector is not valid for statefulset."))
    tmpl = spec.get("template")
    if not sel_errs and (sel is None or as_dict(sel).get("matchLabels")
                         or as_list(as_dict(sel).get("matchExpressions"))):
        causes.extend(selector_mismatch(sel, tmpl, "spec.template"))
    causes.extend(validate_pod_template(tmpl, "spec.template"))
    causes.extend(restart_always(tmpl, "spec.template"))
    deadline = as_dict(as_dict(tmpl).get("spec")).get("activeDeadlineSeconds")
    if deadline is not None:
        causes.append(invalid("spec.template.spec.activeDeadlineSeconds", deadline, "must not be specified"))
    causes.extend(_selector_immutable(spec, old))
    return causes


def validate_controller_revision(obj: Obj, old: Obj | None) -> Causes:
    """``ValidateControllerRevisionCreate``/``Update``: revision >= 0; data is set once."""
    causes = validate_object_meta(obj)
    if "data" not in obj or obj.get("data") is None:
        causes.append(required("data", "data is mandatory"))
    causes.extend(nonnegative(obj.get("revision"), "revision"))
    if old is not None and semantic(obj.get("data")) != semantic(old.get("data")):
        causes.append(invalid_rendered("data", "runtime.RawExtension{...}", IMMUTABLE))
    return causes
