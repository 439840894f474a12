"""Prod reclaimable resources and the prod peak from the models' predictions (reference A.9.3).

Two predictors look at the same pods; the result is the per-resource minimum of their reclaimable
amounts and the maximum of their peaks:

- the *pod* predictor sums, over prod pods (priority class with default koord-prod or none) past
  their cold start, the predicted peak (p95 CPU, p98 memory, × safety margin) and what their
  requests leave above it;
- the *priority* predictor takes the node-level models of the system and of the prod classes
  against the sum of the prod pods' requests.

Amounts are ``{"cpu": milli-cores, "memory": bytes}``. Pure functions over a prediction lookup
(``uid -> model result or None``), so they are tested without any training.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

from koordinator.apis import extension
from koordinator_roles.koordlet.prediction.models import KNOWN_PRIORITY_CLASSES, SYSTEM_UID, node_item_uid

log = logging.getLogger("koordinator.koordlet.prediction")

ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"
RESOURCES = (extension.CPU, extension.MEMORY)
# Priority classes whose resources prod reclaims from.
RECLAIMABLE_CLASSES = (extension.PRIORITY_PROD, extension.PRIORITY_NONE)

Amounts = dict[str, int]
Lookup = Callable[[str], "Mapping[str, Mapping[str, int]] | None"]


class PredictionError(Exception):
    """No prediction can be given (node unknown, a model missing ...); the message says why."""


_warned: set[tuple[str, ...]] = set()


def _warn_once(key: tuple[str, ...], msg: str, *args: Any) -> None:
    """Log a warning the first time a problem is seen (reports run every minute, forever)."""
    if key in _warned:
        return
    if len(_warned) > 1000:  # bounded: old problems may warn again
        _warned.clear()
    _warned.add(key)
    log.warning(msg, *args)


def _zero() -> Amounts:
    return {r: 0 for r in RESOURCES}


def _amounts(milli: Mapping[str, int]) -> Amounts:
    """cpu in milli, memory in bytes (``Quantity.Value()``, rounded up) from milli-units."""
    return {extension.CPU: int(milli.get(extension.CPU, 0)),
            extension.MEMORY: extension.value_of_milli(int(milli.get(extension.MEMORY, 0)))}


def margin_ratio(safety_margin_percent: int) -> float:
    """``(100 + percent) / 100``: 1.1 for the default 10 %."""
    return float(100 + safety_margin_percent) / 100


def pod_request(pod: Mapping[str, Any]) -> Amounts:
    """The pod's CPU (milli) and memory (bytes) request."""
    return _amounts(extension.pod_requests(pod))


def is_prod_reclaimable(pod: Mapping[str, Any]) -> bool:
    """Pods whose request prod may reclaim: priority class with default koord-prod or none."""
    return extension.priority_class_with_default(pod) in RECLAIMABLE_CLASSES


def is_terminating(pod: Mapping[str, Any]) -> bool:
    """Being deleted (deletionTimestamp set) or finished (Succeeded/Failed)."""
    if (pod.get("metadata") or {}).get("deletionTimestamp"):
        return True
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def parse_timestamp(value: Any) -> float:
    """An RFC 3339 timestamp (``2024-05-01T10:00:00Z``) as unix seconds; ValueError when it is not one."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"not a timestamp: {value!r}")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.timestamp()


def in_cold_start(pod: Mapping[str, Any], now: float, cold_start: float) -> bool:
    """Created no more than ``cold_start`` seconds ago.

    A pod without creationTimestamp counts as old (Koordinator reads a zero time); one whose
    timestamp cannot be parsed counts as new, so that nothing is reclaimed on a guess.
    """
    raw = (pod.get("metadata") or {}).get("creationTimestamp")
    if raw is None:
        return False
    try:
        created = parse_timestamp(raw)
    except ValueError:
        _warn_once(("creationTimestamp", _pod_uid(pod), str(raw)),
                   "pod %s: metadata.creationTimestamp %r is not a timestamp; treated as in cold start",
                   _pod_key(pod), raw)
        return True
    return now - created <= cold_start


def node_allocatable(node: Mapping[str, Any] | None) -> Amounts:
    """The node's allocatable for reclaiming: annotation ``node.koordinator.sh/raw-allocatable`` (a
    JSON resource list, the allocatable before amplification) when present and valid, else
    ``status.allocatable``."""
    if node is None:
        raise PredictionError("the node is not known yet")
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RAW_ALLOCATABLE)
    if raw is not None:
        try:
            parsed = json.loads(raw)
            if not isinstance(parsed, dict):
                raise ValueError("not a JSON object")
            return _amounts(extension.resource_list(parsed))
        except (TypeError, ValueError) as err:
            _warn_once(("raw-allocatable", str(raw)),
                       "node annotation %s=%r is not a resource list (%s); using status.allocatable",
                       ANNOTATION_RAW_ALLOCATABLE, raw, err)
    allocatable = (node.get("status") or {}).get("allocatable")
    if not allocatable:
        raise PredictionError("the node has no status.allocatable")
    try:
        return _amounts(extension.resource_list(allocatable))
    except ValueError as err:
        raise PredictionError(f"node status.allocatable {allocatable!r} is not a resource list: {err}") from None


def _pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _pod_uid(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


class PodReclaimablePredictor:
    """Reclaimable from each prod pod's own prediction (``podReclaimablePredictor``)."""

    def __init__(self, lookup: Lookup, *, now: float, cold_start: float, safety_margin_percent: int) -> None:
        self._lookup = lookup
        self._now = now
        self._cold_start = cold_start
        self._ratio = margin_ratio(safety_margin_percent)
        self._seen: set[str] = set()
        self.reclaimable = _zero()
        self.unreclaimable = _zero()
        self.unpredicted = _zero()

    def add_pod(self, pod: Mapping[str, Any]) -> None:
        """Account for one pod; PredictionError for a duplicate UID or a missing prediction (its
        request is then counted as unpredicted)."""
        if not is_prod_reclaimable(pod):
            return
        uid = _pod_uid(pod)
        if uid in self._seen:
            raise PredictionError(f"pod {_pod_key(pod)} ({uid}) added twice")
        self._seen.add(uid)
        # Koordinator's order: a pod in cold start counts its request even while terminating.
        if in_cold_start(pod, self._now, self._cold_start):
            self._add_unpredicted(pod)
            return
        if is_terminating(pod):
            return
        result = self._lookup(uid)
        if result is None:
            self._add_unpredicted(pod)
            raise PredictionError(f"no prediction for pod {_pod_key(pod)} ({uid})")
        request = pod_request(pod)
        peak = {extension.CPU: int(result["p95"][extension.CPU] * self._ratio),
                extension.MEMORY: int(result["p98"][extension.MEMORY] * self._ratio)}
        for r in RESOURCES:
            self.unreclaimable[r] += peak[r]
            self.reclaimable[r] += max(request[r] - peak[r], 0)

    def _add_unpredicted(self, pod: Mapping[str, Any]) -> None:
        request = pod_request(pod)
        for r in RESOURCES:
            self.unpredicted[r] += request[r]

    def result(self, allocatable: Mapping[str, int]) -> tuple[Amounts, Amounts]:
        """(reclaimable, peak): min(max(allocatable − unreclaimable, 0), reclaimable) and
        unreclaimable + unpredicted."""
        reclaimable = {r: min(max(allocatable.get(r, 0) - self.unreclaimable[r], 0), self.reclaimable[r])
                       for r in RESOURCES}
        peak = {r: self.unreclaimable[r] + self.unpredicted[r] for r in RESOURCES}
        return reclaimable, peak


class PriorityReclaimablePredictor:
    """Reclaimable from the node-level prod and system models (``priorityReclaimablePredictor``)."""

    def __init__(self, lookup: Lookup, *, safety_margin_percent: int) -> None:
        self._lookup = lookup
        self._ratio = margin_ratio(safety_margin_percent)
        self.reclaim_request = _zero()

    def add_pod(self, pod: Mapping[str, Any]) -> None:
        """Add a prod pod's request (no cold-start rule here); terminating pods are left out."""
        if not is_prod_reclaimable(pod) or is_terminating(pod):
            return
        request = pod_request(pod)
        for r in RESOURCES:
            self.reclaim_request[r] += request[r]

    def result(self, allocatable: Mapping[str, int]) -> tuple[Amounts, Amounts]:
        """(reclaimable, peak); PredictionError when the system or a prod class model is missing."""
        used = _zero()
        uids = [SYSTEM_UID] + [node_item_uid(c) for c in KNOWN_PRIORITY_CLASSES if c in RECLAIMABLE_CLASSES]
        for uid in uids:
            result = self._lookup(uid)
            if result is None:
                raise PredictionError(f"no prediction for {uid} yet")
            used[extension.CPU] += result["p95"][extension.CPU]
            used[extension.MEMORY] += result["p98"][extension.MEMORY]
        unreclaimable = {r: int(used[r] * self._ratio) for r in RESOURCES}
        reclaimable = {r: min(max(allocatable.get(r, 0) - unreclaimable[r], 0),
                              max(self.reclaim_request[r] - unreclaimable[r], 0))
                       for r in RESOURCES}
        return reclaimable, unreclaimable


def prod_reclaimable(pods: Iterable[Mapping[str, Any]], node: Mapping[str, Any] | None, lookup: Lookup, *,
                     now: float, cold_start: float, safety_margin_percent: int) -> tuple[Amounts, Amounts]:
    """(reclaimable, peak) of the node: min of both predictors' reclaimable, max of their peaks.

    A pod the pod predictor refuses (no prediction, duplicate) is logged and left out of the
    priority predictor too, as Koordinator's min-predictor stops at the first error.
    """
    allocatable = node_allocatable(node)
    by_pod = PodReclaimablePredictor(lookup, now=now, cold_start=cold_start,
                                     safety_margin_percent=safety_margin_percent)
    by_priority = PriorityReclaimablePredictor(lookup, safety_margin_percent=safety_margin_percent)
    for pod in pods:
        try:
            by_pod.add_pod(pod)
        except PredictionError as err:
            log.debug("prediction: pod left out: %s", err)
            continue
        by_priority.add_pod(pod)
    pod_reclaimable, pod_peak = by_pod.result(allocatable)
    prio_reclaimable, prio_peak = by_priority.result(allocatable)
    reclaimable = {r: min(pod_reclaimable[r], prio_reclaimable[r]) for r in RESOURCES}
    peak = {r: max(pod_peak[r], prio_peak[r]) for r in RESOURCES}
    return reclaimable, peak
