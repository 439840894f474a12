"""batch/v1: Job and CronJob."""

from __future__ import annotations

from koordinator.apiserver.errors import not_supported, required
from koordinator.apiserver.validation.causes import Causes, Obj, as_dict, as_str, invalid, nonnegative, one_of
from koordinator.apiserver.validation.meta import validate_object_meta
from koordinator.apiserver.validation.podspec import selector_mismatch, validate_label_selector, validate_pod_template


def _validate_job_spec(spec: Obj, path: str) -> Causes:
    causes: Causes = []
    for fld in ("parallelism", "completions", "activeDeadlineSeconds", "backoffLimit"):
        causes.extend(nonnegative(spec.get(fld), f"{path}.{fld}"))
    tmpl = spec.get("template")
    if spec.get("manualSelector") is True:
        sel = spec.get("selector")
        if sel is None:
            causes.append(required(f"{path}.selector", ""))
        else:
            sel_errs = validate_label_selector(sel, f"{path}.selector")
            causes.extend(sel_errs)
            if not sel_errs:
                causes.extend(selector_mismatch(sel, tmpl, f"{path}.template"))
    causes.extend(validate_pod_template(tmpl, f"{path}.template"))
    restart = as_str(as_dict(as_dict(tmpl).get("spec")).get("restartPolicy"))
    if restart not in ("OnFailure", "Never"):
        causes.append(not_supported(f"{path}.template.spec.restartPolicy", restart, ["OnFailure", "Never"]))
    return causes


def validate_job(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    causes.extend(_validate_job_spec(as_dict(obj.get("spec")), "spec"))
    return causes


def validate_cronjob(obj: Obj, old: Obj | None) -> Causes:
    causes = validate_object_meta(obj)
    name = as_str(as_dict(obj.get("metadata")).get("name"))
    if len(name) > 52:
        causes.append(invalid("metadata.name", name, "must be no more than 52 characters"))
    spec = as_dict(obj.get("spec"))
    if not as_str(spec.get("schedule")):
        causes.append(required("spec.schedule", ""))
    causes.extend(one_of(spec.get("concurrencyPolicy"), "spec.concurrencyPolicy", ["Allow", "Forbid", "Replace"]))
    for fld in ("startingDeadlineSeconds", "successfulJobsHistoryLimit", "failedJobsHistoryLimit"):
        causes.extend(nonnegative(spec.get(fld), f"spec.{fld}"))
    causes.extend(_validate_job_spec(as_dict(as_dict(spec.get("jobTemplate")).get("spec")), "spec.jobTemplate.spec"))
    return causes
