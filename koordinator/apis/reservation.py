"""Reservation (``scheduling.koordinator.sh/v1alpha1``): keys, phases, owner matching, affinity, reserve pods.

A Reservation reserves node resources ahead of time. The scheduler turns it into a fake
*reserve pod* (:func:`reserve_pod`) that goes through the normal scheduling cycle; once it is
Available its owner pods (:class:`OwnerMatcher`) may consume the reserved room. Pods may insist
on a reservation with the ``reservation-affinity`` annotation (:func:`parse_reservation_affinity`).
Everything here is pure logic over plain dicts, shared by the scheduler plugin and its controller.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

from koordinator.apis import extension
from koordinator.apis.goduration import parse_go_duration
from koordinator.apis.selectors import SelectorError, label_selector_from_dict, node_selector_term_matches
from koordinator.apis.taints import tolerates
from koordinator.apis.timestamps import parse_time

GROUP_VERSION = "scheduling.koordinator.sh/v1alpha1"
KIND = "Reservation"

# -- annotation and label keys (apis/extension/reservation.go) -----------------------------------------
ANNOTATION_RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"
ANNOTATION_RESERVATION_NAME = "scheduling.koordinator.sh/reservation-name"
ANNOTATION_RESERVATION_NODE = "scheduling.koordinator.sh/reservation-node"
ANNOTATION_IS_PRE_ALLOCATION = "scheduling.koordinator.sh/is-pre-allocation"
ANNOTATION_RESERVATION_ALLOCATED = "scheduling.koordinator.sh/reservation-allocated"
ANNOTATION_RESERVATION_AFFINITY = "scheduling.koordinator.sh/reservation-affinity"
ANNOTATION_EXACT_MATCH_RESERVATION = "scheduling.koordinator.sh/exact-match-reservation"
ANNOTATION_RESERVATION_RESIZE_ALLOCATABLE = "scheduling.koordinator.sh/reservation-resize-allocatable"
ANNOTATION_RESERVATION_RESTRICTED_OPTIONS = "scheduling.koordinator.sh/reservation-restricted-options"
ANNOTATION_NODE_RESERVATION = "node.koordinator.sh/reservation"
LABEL_RESERVATION_IGNORED = "scheduling.koordinator.sh/reservation-ignored"
LABEL_RESERVATION_ORDER = "scheduling.koordinator.sh/reservation-order"

# -- phases and conditions ------------------------------------------------------------------------------
PHASE_PENDING = "Pending"
PHASE_AVAILABLE = "Available"
PHASE_SUCCEEDED = "Succeeded"
PHASE_WAITING = "Waiting"
PHASE_FAILED = "Failed"
TERMINAL_PHASES = (PHASE_SUCCEEDED, PHASE_FAILED)

CONDITION_SCHEDULED = "Scheduled"
CONDITION_READY = "Ready"
REASON_SCHEDULED = "Scheduled"
REASON_UNSCHEDULABLE = "Unschedulable"
REASON_AVAILABLE = "Available"
REASON_SUCCEEDED = "Succeeded"
REASON_EXPIRED = "Expired"

POLICY_DEFAULT = ""
POLICY_ALIGNED = "Aligned"
POLICY_RESTRICTED = "Restricted"

#: Reserve pods cannot be preempted by ordinary pods unless their template sets a priority.
MAX_INT32 = 2**31 - 1
DEFAULT_TTL_SECONDS = 24 * 3600.0
DEFAULT_NAMESPACE = "default"
DEFAULT_SCHEDULER_NAME = "default-scheduler"


class ReservationError(ValueError):
    """A Reservation or a pod's reservation annotation is malformed; the message names the field."""


# -- plain accessors ------------------------------------------------------------------------------------

def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def spec_of(r: Mapping[str, Any]) -> Mapping[str, Any]:
    return r.get("spec") or {}


def status_of(r: Mapping[str, Any]) -> Mapping[str, Any]:
    return r.get("status") or {}


def phase(r: Mapping[str, Any]) -> str:
    return status_of(r).get("phase") or PHASE_PENDING


def is_available(r: Mapping[str, Any]) -> bool:
    """Scheduled and usable by owners: phase Available with a node."""
    return phase(r) == PHASE_AVAILABLE and bool(status_of(r).get("nodeName"))


def is_terminal(r: Mapping[str, Any]) -> bool:
    return phase(r) in TERMINAL_PHASES


def allocate_once(r: Mapping[str, Any]) -> bool:
    value = spec_of(r).get("allocateOnce")
    return True if value is None else bool(value)


def allocate_policy(r: Mapping[str, Any]) -> str:
    return spec_of(r).get("allocatePolicy") or POLICY_DEFAULT


def template_requests(r: Mapping[str, Any]) -> dict[str, int]:
    """What the template's containers request (milli-units, as the scheduler counts)."""
    template = spec_of(r).get("template") or {}
    return extension.pod_requests({"spec": template.get("spec") or {}})


def allocatable(r: Mapping[str, Any]) -> dict[str, int]:
    """``status.allocatable`` once Available, else the template's requests (ReservationInfo.Allocatable)."""
    if is_available(r) and status_of(r).get("allocatable"):
        return extension.resource_list(status_of(r).get("allocatable"))
    return template_requests(r)


def order(r: Mapping[str, Any]) -> int:
    """The ``reservation-order`` label (0: none or not a positive integer)."""
    raw = (_meta(r).get("labels") or {}).get(LABEL_RESERVATION_ORDER)
    try:
        value = int(raw) if raw is not None else 0
    except (TypeError, ValueError):
        return 0
    return value if value > 0 else 0


def expiry_time(r: Mapping[str, Any]) -> float | None:
    """When the reservation expires (epoch seconds): ``spec.expires``, else creation + ``ttl`` (24h by
    default; 0 never expires by TTL); None when it never expires."""
    spec = spec_of(r)
    if spec.get("expires"):
        return parse_time(spec["expires"])
    ttl = ttl_seconds(r)
    created = parse_time(_meta(r).get("creationTimestamp"))
    if not ttl or created is None:
        return None
    return created + ttl


def ttl_seconds(r: Mapping[str, Any]) -> float:
    raw = spec_of(r).get("ttl")
    if raw is None or raw == "":
        return DEFAULT_TTL_SECONDS
    try:
        return parse_go_duration(str(raw)) / 1e9
    except ValueError as e:
        raise ReservationError(f"spec.ttl: Invalid value: {raw!r}: {e}") from None


def validate(r: Mapping[str, Any]) -> None:
    """What the scheduler needs of a Reservation it schedules: a template, at least one owner, ttl or expires.

    Raises :class:`ReservationError` naming the field.
    """
    spec = spec_of(r)
    if not spec.get("template"):
        raise ReservationError("spec.template: Required value: the reservation needs a pod template")
    if not spec.get("owners"):
        raise ReservationError("spec.owners: Required value: the reservation needs at least one owner")
    OwnerMatcher.parse(spec.get("owners"))
    if spec.get("expires") is None and spec.get("ttl") in (None, ""):
        raise ReservationError("spec.ttl: Required value: one of spec.ttl or spec.expires must be set")
    ttl_seconds(r)


# -- owners ------------------------------------------------------------------------------------------------

_OBJECT_FIELDS = ("uid", "name", "namespace", "apiVersion", "kind")
_CONTROLLER_FIELDS = ("uid", "name", "kind", "apiVersion")


@dataclass(frozen=True)
class _Owner:
    obj: Mapping[str, Any] | None
    controller: Mapping[str, Any] | None
    selector: Any


class OwnerMatcher:
    """``spec.owners``: entries are ORed; inside one entry ``object``, ``controller`` and ``labelSelector``
    are ANDed; an empty entry matches every pod."""

    def __init__(self, owners: list[_Owner]) -> None:
        self.owners = owners

    @classmethod
    def parse(cls, raw: Any) -> "OwnerMatcher":
        """Raises :class:`ReservationError` naming ``spec.owners[i]...`` for malformed entries."""
        if raw is None:
            raw = []
        if not isinstance(raw, list):
            raise ReservationError(f"spec.owners: Invalid value: {raw!r}: must be a list")
        owners: list[_Owner] = []
        for i, entry in enumerate(raw):
            path = f"spec.owners[{i}]"
            if not isinstance(entry, Mapping):
                raise ReservationError(f"{path}: Invalid value: {entry!r}: must be an object")
            obj = entry.get("object")
            ctrl = entry.get("controller")
            for name, value in (("object", obj), ("controller", ctrl)):
                if value is not None and not isinstance(value, Mapping):
                    raise ReservationError(f"{path}.{name}: Invalid value: {value!r}: must be an object")
            selector = None
            if entry.get("labelSelector") is not None:
                try:
                    selector = label_selector_from_dict(entry["labelSelector"])
                except SelectorError as e:
                    raise ReservationError(f"{path}.labelSelector: Invalid value: {entry['labelSelector']!r}: "
                                           f"{e}") from None
            owners.append(_Owner(obj, ctrl, selector))
        return cls(owners)

    def matches(self, pod: Mapping[str, Any]) -> bool:
        meta = _meta(pod)
        for owner in self.owners:
            if owner.obj is not None and not _object_matches(owner.obj, pod):
                continue
            if owner.controller is not None and not _controller_matches(owner.controller, meta):
                continue
            if owner.selector is not None and not owner.selector.matches(meta.get("labels") or {}):
                continue
            return True
        return False


def _object_matches(ref: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    meta = _meta(pod)
    actual = {"uid": meta.get("uid"), "name": meta.get("name"), "namespace": meta.get("namespace"),
              "apiVersion": pod.get("apiVersion") or "v1", "kind": pod.get("kind") or "Pod"}
    return all(not ref.get(k) or ref.get(k) == actual[k] for k in _OBJECT_FIELDS)


def _controller_matches(ref: Mapping[str, Any], meta: Mapping[str, Any]) -> bool:
    if ref.get("namespace") and ref["namespace"] != meta.get("namespace"):
        return False
    for owner_ref in meta.get("ownerReferences") or ():
        if all(not ref.get(k) or ref.get(k) == owner_ref.get(k) for k in _CONTROLLER_FIELDS) and \
                (ref.get("controller") is None or bool(ref["controller"]) == bool(owner_ref.get("controller"))):
            return True
    return False


# -- what pods say about reservations ---------------------------------------------------------------------

@dataclass
class ReservationAffinity:
    """The parsed ``reservation-affinity`` annotation: the pod MUST use a matching reservation."""

    name: str = ""
    selector: Mapping[str, str] = field(default_factory=dict)
    terms: list[Mapping[str, Any]] = field(default_factory=list)
    tolerations: list[Mapping[str, Any]] = field(default_factory=list)

    def matches(self, r: Mapping[str, Any], node_labels: Mapping[str, str] | None = None) -> bool:
        """Name, label selector and selector terms against the reservation's labels (merged over the
        node's), and its NoSchedule/NoExecute taints against the tolerations."""
        if self.name:
            return _meta(r).get("name") == self.name
        spec = spec_of(r)
        if spec.get("unschedulable") and not tolerates(self.tolerations, _UNSCHEDULABLE_TAINT):
            return False
        if _meta(r).get("deletionTimestamp"):
            return False
        for taint in spec.get("taints") or ():
            if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(self.tolerations, taint):
                return False
        labels = {**(node_labels or {}), **(_meta(r).get("labels") or {})}
        if any(labels.get(k) != v for k, v in self.selector.items()):
            return False
        if self.terms and not any(node_selector_term_matches(t, labels) for t in self.terms):
            return False
        return True


_UNSCHEDULABLE_TAINT = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def _bad_annotation(key: str, raw: str, detail: str) -> ReservationError:
    return ReservationError(f"invalid annotation {key}={raw!r}: {detail}")


def parse_reservation_affinity(pod: Mapping[str, Any]) -> ReservationAffinity | None:
    """The pod's ``reservation-affinity`` (None when absent); :class:`ReservationError` naming the annotation
    and its value when it is not the expected JSON object."""
    raw = (_meta(pod).get("annotations") or {}).get(ANNOTATION_RESERVATION_AFFINITY)
    if raw is None:
        return None
    key = ANNOTATION_RESERVATION_AFFINITY
    try:
        data = json.loads(raw)
    except (TypeError, ValueError) as e:
        raise _bad_annotation(key, raw, f"not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise _bad_annotation(key, raw, "must be a JSON object")
    name = data.get("name") or ""
    selector = data.get("reservationSelector") or {}
    required = data.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    tolerations = data.get("tolerations") or []
    if not isinstance(name, str):
        raise _bad_annotation(key, raw, "name must be a string")
    if not isinstance(selector, dict) or not all(isinstance(v, str) for v in selector.values()):
        raise _bad_annotation(key, raw, "reservationSelector must be a map of strings")
    if not isinstance(required, dict):
        raise _bad_annotation(key, raw, "requiredDuringSchedulingIgnoredDuringExecution must be an object")
    terms = required.get("reservationSelectorTerms") or []
    if not isinstance(terms, list) or not all(isinstance(t, dict) for t in terms):
        raise _bad_annotation(key, raw, "reservationSelectorTerms must be a list of objects")
    if not isinstance(tolerations, list) or not all(isinstance(t, dict) for t in tolerations):
        raise _bad_annotation(key, raw, "tolerations must be a list of objects")
    return ReservationAffinity(name=name, selector=selector, terms=terms, tolerations=tolerations)


def parse_exact_match(pod: Mapping[str, Any]) -> list[str]:
    """Resource names of the ``exact-match-reservation`` annotation ([] when absent)."""
    raw = (_meta(pod).get("annotations") or {}).get(ANNOTATION_EXACT_MATCH_RESERVATION)
    if raw is None:
        return []
    key = ANNOTATION_EXACT_MATCH_RESERVATION
    try:
        data = json.loads(raw)
    except (TypeError, ValueError) as e:
        raise _bad_annotation(key, raw, f"not valid JSON: {e}") from None
    names = data.get("resourceNames") if isinstance(data, dict) else None
    if names is None:
        names = []
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise _bad_annotation(key, raw, "resourceNames must be a list of strings")
    return names


def exact_match_ok(names: list[str], requests: Mapping[str, int], allocatable_: Mapping[str, int]) -> bool:
    """For each listed resource the pod request equals the reservation's allocatable (absent in both: ok)."""
    for name in names:
        if (name in requests) != (name in allocatable_):
            return False
        if name in requests and requests[name] != allocatable_[name]:
            return False
    return True


def is_reservation_ignored(pod: Mapping[str, Any]) -> bool:
    return (_meta(pod).get("labels") or {}).get(LABEL_RESERVATION_IGNORED) == "true"


def allocated_annotation(name: str, uid: str) -> str:
    """The ``reservation-allocated`` value PreBind puts on an owner pod."""
    return json.dumps({"name": name, "uid": uid}, separators=(",", ":"))


def allocated_reservation(pod: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, uid) of the reservation the pod allocated from, or None (absent or unreadable)."""
    raw = (_meta(pod).get("annotations") or {}).get(ANNOTATION_RESERVATION_ALLOCATED)
    if not raw:
        return None
    try:
        data = json.loads(raw)
    except (TypeError, ValueError):
        return None
    if not isinstance(data, dict) or not data.get("uid"):
        return None
    return str(data.get("name") or ""), str(data["uid"])


def restricted_resources(r: Mapping[str, Any], alloc: Mapping[str, int]) -> list[str]:
    """The resource names a Restricted reservation limits: its allocatable, optionally narrowed by the
    ``reservation-restricted-options`` annotation ``{"resources": [...]}``."""
    names = sorted(alloc)
    raw = (_meta(r).get("annotations") or {}).get(ANNOTATION_RESERVATION_RESTRICTED_OPTIONS)
    if raw:
        try:
            wanted = (json.loads(raw) or {}).get("resources")
        except (TypeError, ValueError, AttributeError):
            wanted = None
        if isinstance(wanted, list) and wanted:
            names = [n for n in names if n in wanted]
    return names


# -- reserve pods ------------------------------------------------------------------------------------------

def is_reserve_pod(pod: Mapping[str, Any]) -> bool:
    return (_meta(pod).get("annotations") or {}).get(ANNOTATION_RESERVE_POD) == "true"


def reservation_name_of(pod: Mapping[str, Any]) -> str:
    """The Reservation a reserve pod stands for ("" for other pods)."""
    return (_meta(pod).get("annotations") or {}).get(ANNOTATION_RESERVATION_NAME) or ""


def _quantity(milli: int) -> str:
    return f"{milli}m" if milli % 1000 else str(milli // 1000)


def reserve_pod(r: Mapping[str, Any], requests: Mapping[str, int] | None = None) -> dict:
    """The fake pod that stands for ``r`` in the scheduler (NewReservePod).

    Name = the Reservation's UID, namespace = the template's or ``default``; the Reservation's labels and
    annotations over the template's, plus the reserve-pod annotations; priority = template priority, else
    label ``koordinator.sh/priority``, else MaxInt32; ``spec.nodeName`` = ``status.nodeName``; a terminal
    Reservation gives a pod of the same phase. ``requests`` (milli-units) replaces the container requests
    (the room still reserved once Available).
    """
    meta = _meta(r)
    spec = spec_of(r)
    template = spec.get("template") or {}
    tmeta = template.get("metadata") or {}
    tspec = dict(template.get("spec") or {})
    labels = {**(tmeta.get("labels") or {}), **(meta.get("labels") or {})}
    annotations = {**(tmeta.get("annotations") or {}), **(meta.get("annotations") or {}),
                   ANNOTATION_RESERVE_POD: "true", ANNOTATION_RESERVATION_NAME: meta.get("name", "")}
    if spec.get("preAllocation"):
        annotations[ANNOTATION_IS_PRE_ALLOCATION] = "true"
    if tspec.get("nodeName"):
        annotations[ANNOTATION_RESERVATION_NODE] = tspec["nodeName"]
    tspec.pop("nodeName", None)
    status = status_of(r)
    if status.get("nodeName"):
        tspec["nodeName"] = status["nodeName"]
    if tspec.get("priority") is None:
        sub = extension.sub_priority({"metadata": {"labels": labels}})
        tspec["priority"] = sub if sub is not None else MAX_INT32
    tspec["schedulerName"] = tspec.get("schedulerName") or DEFAULT_SCHEDULER_NAME
    if requests is not None:
        containers = [{"name": "reserved", "resources": {
            "requests": {k: _quantity(v) for k, v in sorted(requests.items())}}}]
        tspec["containers"] = containers
        tspec.pop("initContainers", None)
        tspec.pop("overhead", None)
    pod_phase = phase(r) if is_terminal(r) else PHASE_PENDING
    pod_meta = {"name": meta.get("uid") or meta.get("name", ""),
                "namespace": tmeta.get("namespace") or DEFAULT_NAMESPACE,
                "uid": meta.get("uid") or meta.get("name", ""), "labels": labels, "annotations": annotations,
                "creationTimestamp": meta.get("creationTimestamp"),
                "resourceVersion": meta.get("resourceVersion")}
    if meta.get("deletionTimestamp"):
        pod_meta["deletionTimestamp"] = meta["deletionTimestamp"]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": tspec,
            "status": {"phase": "Running" if pod_phase == PHASE_PENDING and status.get("nodeName") else
                       ("Pending" if pod_phase == PHASE_PENDING else pod_phase)}}


# -- status ------------------------------------------------------------------------------------------------

def with_condition(conditions: list[Mapping[str, Any]] | None, ctype: str, status: str, reason: str,
                   message: str, now: str) -> list[dict]:
    """``conditions`` with the one of ``ctype`` replaced (transition time kept when the status is the same)."""
    out: list[dict] = []
    found = False
    for c in conditions or ():
        if c.get("type") == ctype:
            found = True
            transition = c.get("lastTransitionTime") if c.get("status") == status else now
            out.append({"type": ctype, "status": status, "reason": reason, "message": message,
                        "lastProbeTime": now, "lastTransitionTime": transition or now})
        else:
            out.append(dict(c))
    if not found:
        out.append({"type": ctype, "status": status, "reason": reason, "message": message,
                    "lastProbeTime": now, "lastTransitionTime": now})
    return out


def condition(r: Mapping[str, Any], ctype: str) -> Mapping[str, Any] | None:
    return next((c for c in status_of(r).get("conditions") or () if c.get("type") == ctype), None)
