"""Pure helpers of the Job controller: conditions, completion indexes, pod predicates, pod-failure backoff.

They follow kube-controller-manager's ``pkg/controller/job`` (``indexed_job_utils.go``,
``backoff_utils.go``, ``job_controller.go``) and never call the API.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

from koordinator.controllers.podcontrol import now_rfc3339, parse_time, pod_phase

Obj = dict[str, Any]

TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
COMPLETION_INDEX_ANNOTATION = "batch.kubernetes.io/job-completion-index"
COMPLETION_INDEX_LABEL = COMPLETION_INDEX_ANNOTATION
COMPLETION_INDEX_ENV = "JOB_COMPLETION_INDEX"
#: ``spec.managedBy`` of the Jobs this controller syncs (absent means the same).
JOB_CONTROLLER_NAME = "kubernetes.io/job-controller"
UNKNOWN_INDEX = -1
# names.MaxGeneratedNameLength: 63 less the 5 random characters the server appends.
MAX_GENERATED_NAME_LENGTH = 58

COMPLETE = "Complete"
FAILED = "Failed"
FAILURE_TARGET = "FailureTarget"
SUCCESS_CRITERIA_MET = "SuccessCriteriaMet"
SUSPENDED = "Suspended"
REASON_COMPLETIONS_REACHED = "CompletionsReached"
MESSAGE_COMPLETIONS_REACHED = "Reached expected number of succeeded pods"
REASON_BACKOFF_LIMIT = "BackoffLimitExceeded"
MESSAGE_BACKOFF_LIMIT = "Job has reached the specified backoff limit"
REASON_DEADLINE = "DeadlineExceeded"
MESSAGE_DEADLINE = "Job was active longer than specified deadline"


# -- conditions ---------------------------------------------------------------------------------------

def new_condition(ctype: str, status: str, reason: str, message: str) -> Obj:
    now = now_rfc3339()
    return {"type": ctype, "status": status, "lastProbeTime": now, "lastTransitionTime": now,
            "reason": reason, "message": message}


def find_condition(job: Obj, ctype: str) -> Obj | None:
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") == ctype:
            return cond
    return None


def is_finished(job: Obj) -> bool:
    """``IsJobFinished``: a Complete or Failed condition with status True."""
    return any(c.get("type") in (COMPLETE, FAILED) and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or ())


def finish_time(job: Obj) -> float | None:
    """When the Job finished: its Complete/Failed condition's lastTransitionTime."""
    for cond in (job.get("status") or {}).get("conditions") or ():
        if cond.get("type") in (COMPLETE, FAILED) and cond.get("status") == "True":
            return parse_time(cond.get("lastTransitionTime"))
    return None


def ensure_condition(conditions: list[Obj], ctype: str, status: str, reason: str, message: str) -> bool:
    """``ensureJobConditionStatus`` in place: update or append (never append a False one); True if changed."""
    for i, cond in enumerate(conditions):
        if cond.get("type") == ctype:
            if cond.get("status") != status or cond.get("reason") != reason or cond.get("message") != message:
                conditions[i] = new_condition(ctype, status, reason, message)
                return True
            return False
    if status != "False":
        conditions.append(new_condition(ctype, status, reason, message))
        return True
    return False


# -- spec accessors ---------------------------------------------------------------------------------------

def spec(job: Obj) -> Obj:
    return job.get("spec") or {}


def is_indexed(job: Obj) -> bool:
    return spec(job).get("completionMode") == "Indexed"


def is_suspended(job: Obj) -> bool:
    return bool(spec(job).get("suspend"))


def only_replace_failed_pods(job: Obj) -> bool:
    s = spec(job)
    return s.get("podReplacementPolicy") == "Failed" or s.get("podFailurePolicy") is not None


def completions(job: Obj) -> int | None:
    value = spec(job).get("completions")
    return None if value is None else int(value)


# -- pods -----------------------------------------------------------------------------------------------

def has_tracking_finalizer(pod: Obj) -> bool:
    return TRACKING_FINALIZER in ((pod.get("metadata") or {}).get("finalizers") or ())


def is_terminating_pod(pod: Obj) -> bool:
    """Being deleted and not yet Succeeded or Failed."""
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) and pod_phase(pod) not in ("Succeeded", "Failed")


def is_pod_failed(pod: Obj, job: Obj) -> bool:
    """Failed, or (unless only failed pods are replaced) deleted before it succeeded: an orphan that
    never reaches Failed still counts."""
    if pod_phase(pod) == "Failed":
        return True
    if only_replace_failed_pods(job):
        return False
    return bool((pod.get("metadata") or {}).get("deletionTimestamp")) and pod_phase(pod) != "Succeeded"


def completion_index(pod: Obj) -> int:
    """The pod's completion index annotation, or :data:`UNKNOWN_INDEX`."""
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(COMPLETION_INDEX_ANNOTATION)
    if raw is None:
        return UNKNOWN_INDEX
    try:
        value = int(raw)
    except (TypeError, ValueError):
        return UNKNOWN_INDEX
    return value if value >= 0 and str(value) == str(raw).strip() else UNKNOWN_INDEX


def generate_name_with_index(job_name: str, index: int) -> str:
    """``podGenerateNameWithIndex``: ``<job>-<index>-``, the job name cut to fit."""
    suffix = f"-{index}-"
    prefix = job_name + suffix
    if len(prefix) > MAX_GENERATED_NAME_LENGTH:
        prefix = job_name[:MAX_GENERATED_NAME_LENGTH - len(suffix)] + suffix
    return prefix


def add_completion_index_env(template_spec: Obj) -> None:
    """Every container (and init container) gets ``JOB_COMPLETION_INDEX`` from the index annotation."""
    for key in ("initContainers", "containers"):
        for container in template_spec.get(key) or ():
            env = container.setdefault("env", [])
            if any(e.get("name") == COMPLETION_INDEX_ENV for e in env):
                continue
            env.append({"name": COMPLETION_INDEX_ENV, "valueFrom": {"fieldRef": {
                "fieldPath": f"metadata.annotations['{COMPLETION_INDEX_ANNOTATION}']"}}})


def finished_time(pod: Obj) -> float:
    """``getFinishedTime``: the last container finish, else the Ready=False transition, else the
    deletion timestamp, else the creation time."""
    status = pod.get("status") or {}
    finishes = []
    for c in status.get("containerStatuses") or ():
        terminated = (c.get("state") or {}).get("terminated")
        if not terminated:
            finishes = []
            break
        t = parse_time(terminated.get("finishedAt"))
        if t is not None:
            finishes.append(t)
    if finishes:
        return max(finishes)
    for cond in status.get("conditions") or ():
        if cond.get("type") == "Ready" and cond.get("status") == "False":
            t = parse_time(cond.get("lastTransitionTime"))
            if t is not None:
                return t
    md = pod.get("metadata") or {}
    return parse_time(md.get("deletionTimestamp")) or parse_time(md.get("creationTimestamp")) or time.time()


def restart_count_exceeds(job: Obj, pods: Iterable[Obj]) -> bool:
    """``pastBackoffLimitOnFailure``: with restartPolicy OnFailure, container restarts count as failures."""
    template_spec = (spec(job).get("template") or {}).get("spec") or {}
    if template_spec.get("restartPolicy") != "OnFailure":
        return False
    total = 0
    for pod in pods:
        if pod_phase(pod) in ("Running", "Pending"):
            status = pod.get("status") or {}
            for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
                total += int(c.get("restartCount") or 0)
    limit = int(spec(job).get("backoffLimit", 6))
    return total > 0 if limit == 0 else total >= limit


# -- completed indexes ("1,3-5") -------------------------------------------------------------------------

def parse_indexes(text: str | None, limit: int) -> set[int]:
    """The indexes below ``limit`` of a ``completedIndexes`` string; malformed parts are skipped."""
    out: set[int] = set()
    for part in (text or "").split(","):
        part = part.strip()
        if not part:
            continue
        first, _, last = part.partition("-")
        try:
            lo, hi = int(first), int(last) if last else int(first)
        except ValueError:
            continue
        out.update(range(max(lo, 0), min(hi, limit - 1) + 1))
    return out


def format_indexes(indexes: Iterable[int]) -> str:
    """Sorted indexes as kube writes intervals: ``{0, 1, 2, 4, 6, 7}`` → ``"0-2,4,6,7"`` (a run of
    two is written as two indexes)."""
    runs: list[list[int]] = []
    for ix in sorted(set(indexes)):
        if runs and ix == runs[-1][1] + 1:
            runs[-1][1] = ix
        else:
            runs.append([ix, ix])
    parts = [str(a) if a == b else f"{a},{b}" if b == a + 1 else f"{a}-{b}" for a, b in runs]
    return ",".join(parts)


# -- pod-failure backoff ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class BackoffRecord:
    """Failures since the last success and when the last of them happened (kube's ``backoffRecord``)."""

    key: str
    failures: int = 0
    last_failure: float | None = None

    def remaining(self, base: float, cap: float, now: float | None = None) -> float:
        """Seconds before another pod may be created: ``base`` doubled per failure after the first, capped."""
        if self.failures == 0 or self.last_failure is None:
            return 0.0
        backoff = base
        for _ in range(self.failures - 1):
            backoff *= 2
            if backoff >= cap:
                backoff = cap
                break
        elapsed = (time.time() if now is None else now) - self.last_failure
        return 0.0 if backoff < elapsed else backoff - elapsed


class BackoffStore:
    """The records of all Jobs, kept in memory as kube keeps them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, BackoffRecord] = {}

    def new_record(self, key: str, succeeded: list[Obj], failed: list[Obj]) -> BackoffRecord:
        """The record after these newly finished pods (not stored until :meth:`update`)."""
        with self._lock:
            old = self._records.get(key) or BackoffRecord(key)
        if not failed:
            return BackoffRecord(key) if succeeded else old
        failed_times = sorted(finished_time(p) for p in failed)
        if not succeeded:
            return BackoffRecord(key, old.failures + len(failed_times), failed_times[-1])
        last_success = max(finished_time(p) for p in succeeded)
        after = [t for t in failed_times if t > last_success]
        return BackoffRecord(key, len(after), after[-1] if after else None)

    def update(self, record: BackoffRecord) -> None:
        with self._lock:
            self._records[record.key] = record

    def remove(self, key: str) -> None:
        with self._lock:
            self._records.pop(key, None)
