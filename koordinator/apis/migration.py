"""PodMigrationJob (``scheduling.koordinator.sh/v1alpha1``, short name ``pmj``): keys, phases, conditions and helpers.

Shared by the descheduler's MigrationController and anything else that reads PMJs (reference descheduler §1.7,
CRD §4.6). Objects are plain dicts as the API server returns them.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

from koordinator.apis.goduration import parse_go_duration
from koordinator.apis.timestamps import now_rfc3339, parse_time

GROUP_VERSION = "scheduling.koordinator.sh/v1alpha1"
KIND = "PodMigrationJob"

# -- phases / modes --------------------------------------------------------------------------------------------
PHASE_PENDING = "Pending"
PHASE_RUNNING = "Running"
PHASE_SUCCEEDED = "Succeeded"
PHASE_FAILED = "Failed"
PHASE_ABORTED = "Aborted"
ACTIVE_PHASES = ("", PHASE_PENDING, PHASE_RUNNING)
TERMINAL_PHASES = (PHASE_SUCCEEDED, PHASE_FAILED, PHASE_ABORTED)

MODE_RESERVATION_FIRST = "ReservationFirst"
MODE_EVICT_DIRECTLY = "EvictDirectly"
MODES = (MODE_RESERVATION_FIRST, MODE_EVICT_DIRECTLY)

# -- conditions ------------------------------------------------------------------------------------------------
COND_RESERVATION_CREATED = "ReservationCreated"
COND_RESERVATION_SCHEDULED = "ReservationScheduled"
COND_PREEMPTION = "Preemption"
COND_EVICTION = "Eviction"
COND_POD_SCHEDULED = "PodScheduled"
COND_POD_BOUND_RESERVATION = "PodBoundReservation"
COND_BOUND_POD_READY = "BoundPodReady"
COND_RESERVATION_BOUND = "ReservationBound"

STATUS_COMPLETE = "Complete"

REASON_TIMEOUT = "Timeout"
REASON_FAILED_CREATE_RESERVATION = "FailedCreateReservation"
REASON_RESERVATION_EXPIRED = "ReservationExpired"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_FORBIDDEN_MIGRATE_POD = "ForbiddenMigratePod"
REASON_MISSING_POD = "MissingPod"
REASON_MISSING_RESERVATION = "MissingReservation"
REASON_EVICTING = "Evicting"
REASON_FAILED_EVICT = "FailedEvict"
REASON_EVICT_COMPLETE = "EvictComplete"
REASON_WAIT_FOR_POD_BIND_RESERVATION = "WaitForPodBindReservation"
REASON_WAIT_FOR_BOUND_POD_READY = "WaitForBoundPodReady"
REASON_INVALID_POD_REF = "InvalidPodRef"

# -- keys ------------------------------------------------------------------------------------------------------
ANNOTATION_EVICT_REASON = "koordinator.sh/evict-reason"
ANNOTATION_EVICT_TRIGGER = "koordinator.sh/evict-trigger"
ANNOTATION_JOB_CREATED_BY = "koordinator.sh/job-created-by"
ANNOTATION_PASSED_ARBITRATION = "descheduler.koordinator.sh/passed-arbitration"
ANNOTATION_POD_ARBITRATING = "descheduler.koordinator.sh/pod-arbitrating"
ANNOTATION_EVICT = "descheduler.alpha.kubernetes.io/evict"
ANNOTATION_EVICTION_COST = "scheduling.koordinator.sh/eviction-cost"
ANNOTATION_SOFT_EVICTION = "scheduling.koordinator.sh/soft-eviction"
LABEL_EVICT_POLICY = "koordinator.sh/evict-policy"
LABEL_CREATED_BY = "app.kubernetes.io/created-by"
CREATED_BY_DESCHEDULER = "koord-descheduler"

#: The eviction cost that means "never evict".
EVICTION_COST_NEVER = "2147483647"
#: Priority at and above which a pod is system critical.
SYSTEM_CRITICAL_PRIORITY = 2000000000


def spec_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return job.get("spec") or {}


def status_of(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return job.get("status") or {}


def phase(job: Mapping[str, Any]) -> str:
    return status_of(job).get("phase") or ""


def is_active(job: Mapping[str, Any]) -> bool:
    """Pending (or no phase yet) or Running: the job still holds its pod."""
    return phase(job) in ACTIVE_PHASES


def pod_ref(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return spec_of(job).get("podRef") or {}


def pod_key(job: Mapping[str, Any]) -> str:
    """``namespace/name`` of the job's pod ("" without a name)."""
    ref = pod_ref(job)
    return f"{ref.get('namespace') or ''}/{ref['name']}" if ref.get("name") else ""


def reservation_ref(job: Mapping[str, Any]) -> Mapping[str, Any]:
    return (spec_of(job).get("reservationOptions") or {}).get("reservationRef") or {}


def reservation_name(job: Mapping[str, Any]) -> str:
    """The Reservation a ReservationFirst job creates is named after the job's UID, so every controller instance
    (a new leader included) derives the same name and can never create a second one."""
    template = (spec_of(job).get("reservationOptions") or {}).get("template") or {}
    return ((template.get("metadata") or {}).get("name") or (job.get("metadata") or {}).get("uid") or "")


def mode(job: Mapping[str, Any], default: str) -> str:
    return spec_of(job).get("mode") or default


def ttl_seconds(job: Mapping[str, Any]) -> float:
    """``spec.ttl`` in seconds (0 when unset); a malformed value raises ValueError naming ``spec.ttl``."""
    raw = spec_of(job).get("ttl")
    if not raw:
        return 0.0
    try:
        return parse_go_duration(str(raw)) / 1e9
    except ValueError as exc:
        raise ValueError(f"spec.ttl: Invalid value: {raw!r}: {exc}") from None


def created_at(obj: Mapping[str, Any]) -> float | None:
    return parse_time((obj.get("metadata") or {}).get("creationTimestamp"))


def condition(job: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    return next((c for c in status_of(job).get("conditions") or [] if c.get("type") == type_), None)


def set_condition(status: dict[str, Any], type_: str, cond_status: str, reason: str = "", message: str = "") -> bool:
    """Put a condition into ``status`` (a mutable status dict); True when something changed.

    Conditions are keyed by type; ``lastTransitionTime`` is kept while the status is unchanged. Every written
    condition is copied to the job's top-level ``status``/``reason``/``message`` (Koordinator's rule)."""
    conditions = status.setdefault("conditions", [])
    old = next((c for c in conditions if c.get("type") == type_), None)
    if old is not None and (old.get("status"), old.get("reason", ""), old.get("message", "")) == \
            (cond_status, reason, message):
        return False
    now = now_rfc3339()
    new = {"type": type_, "status": cond_status, "reason": reason, "message": message, "lastProbeTime": now,
           "lastTransitionTime": old["lastTransitionTime"] if old and old.get("status") == cond_status
           and old.get("lastTransitionTime") else now}
    if old is None:
        conditions.append(new)
    else:
        conditions[conditions.index(old)] = new
    status["status"], status["reason"], status["message"] = type_, reason, message
    return True


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference with ``controller: true``, if any."""
    return next((r for r in (obj.get("metadata") or {}).get("ownerReferences") or [] if r.get("controller")), None)


def parse_int_or_percent(value: Any, field: str) -> int | str | None:
    """An int-or-percent argument (``2`` or ``"10%"``); ValueError naming ``field`` and the value otherwise."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValueError(f"{field}: Invalid value: {value!r}: must be an integer or a percentage")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{field}: Invalid value: {value}: must be greater than or equal to 0")
        return value
    if isinstance(value, str):
        text = value[:-1] if value.endswith("%") else value
        if text.isdigit():
            return value if value.endswith("%") else int(text)
    raise ValueError(f"{field}: Invalid value: {value!r}: must be an integer or a percentage like \"10%\"")


def scaled_value(value: int | str, total: int, round_up: bool = False) -> int:
    """An int-or-percent scaled against ``total`` (intstr.GetScaledValueFromIntOrPercent)."""
    if isinstance(value, int):
        return value
    exact = int(value[:-1]) * total / 100
    return math.ceil(exact) if round_up else math.floor(exact)


def max_per_workload(replicas: int, configured: int | str | None) -> int:
    """GetMaxMigrating / GetMaxUnavailable: the workload limit for ``replicas`` expected replicas.

    A configured value is scaled (rounded down; 0 becomes 1); unset: >10 replicas → 10%, 4..10 → 2, else 1;
    always capped at ``replicas``."""
    limit = 0
    if configured is not None:
        limit = scaled_value(configured, replicas) or 1
    if limit == 0:
        limit = replicas // 10 if replicas > 10 else 2 if replicas >= 4 else 1
    return min(limit, replicas)
