"""The gang cache: one :class:`Gang` per ``<namespace>/<name>``, built from PodGroups and pod labels/annotations.

A pod joins a gang through (first match wins) the label ``pod-group.scheduling.sigs.k8s.io`` (a PodGroup
CR), the deprecated label ``pod-group.scheduling.sigs.k8s.io/name`` or the annotation
``gang.scheduling.koordinator.sh/name``. The gangs of one gang group share a :class:`GangGroupInfo`
(the once-satisfied flag, the representative pod, the gangs waiting at Permit).

Not thread-safe by itself: :class:`~.plugin.Coscheduling` holds its lock around every use.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Mapping

from koordinator.apis.goduration import parse_go_duration
from koordinator.apis.timestamps import parse_time
from koordinator.apis.gang import (ANNOTATION_GROUPS, ANNOTATION_MATCH_POLICY, ANNOTATION_MIN, ANNOTATION_MODE,
                                   ANNOTATION_NAME, ANNOTATION_TOTAL, ANNOTATION_WAITING_TIME, LABEL_LIGHTWEIGHT_MIN,
                                   LABEL_LIGHTWEIGHT_NAME, LABEL_MATCH_POLICY, LABEL_POD_GROUP)
from koordinator_roles.scheduler.plugins.coscheduling.args import MATCH_POLICIES, CoschedulingArgs

log = logging.getLogger("koordinator.scheduler.coscheduling")

Obj = dict[str, Any]

MODE_STRICT = "Strict"
MODE_NON_STRICT = "NonStrict"

FROM_POD_GROUP = "GangFromPodGroupCrd"
FROM_ANNOTATION = "GangFromPodAnnotation"


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def pod_uid(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return meta.get("uid") or pod_key(pod)


def gang_name_of(pod: Mapping[str, Any]) -> str:
    """The pod's gang name (without namespace), "" for a pod of no gang."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    return (labels.get(LABEL_POD_GROUP) or labels.get(LABEL_LIGHTWEIGHT_NAME)
            or annotations.get(ANNOTATION_NAME) or "")


def gang_id_of(pod: Mapping[str, Any]) -> str:
    name = gang_name_of(pod)
    if not name:
        return ""
    return f"{(pod.get('metadata') or {}).get('namespace', '')}/{name}"


def from_pod_group(pod: Mapping[str, Any]) -> bool:
    return bool(((pod.get("metadata") or {}).get("labels") or {}).get(LABEL_POD_GROUP))


def _positive_duration(text: Any) -> float:
    """Seconds of a Go duration string; 0 when missing, invalid, zero or negative."""
    if not text:
        return 0.0
    try:
        seconds = parse_go_duration(str(text)) / 1e9
    except ValueError:
        return 0.0
    return seconds if seconds > 0 else 0.0


def _atoi(text: Any) -> int | None:
    """Go's strconv.Atoi: an optional sign and decimal digits, else None."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text
    s = str(text) if text is not None else ""
    body = s[1:] if s[:1] in "+-" else s
    if not body or not body.isascii() or not body.isdigit():
        return None
    return int(s)


def _groups(namespace_gang_id: str, raw: Any) -> list[str]:
    """``groups`` annotation: a JSON list of gang ids; empty or unparsable → just the gang itself."""
    if raw:
        try:
            value = json.loads(raw)
        except (TypeError, ValueError):
            log.warning("invalid gang groups annotation gang=%s value=%r", namespace_gang_id, raw)
            value = None
        if isinstance(value, list) and value and all(isinstance(v, str) and v for v in value):
            return list(dict.fromkeys(value))
    return [namespace_gang_id]


class GangGroupInfo:
    """State shared by the gangs of one gang group."""

    def __init__(self, group_id: str) -> None:
        self.group_id = group_id
        self.once_resource_satisfied = False
        self.representative = ""  # pod key of the one pod of the group let into activeQ
        self.waiting_gangs: set[str] = set()


class Gang:
    """One gang: its parameters and its children by ``ns/name``."""

    def __init__(self, gang_id: str) -> None:
        self.id = gang_id
        self.namespace, _, self.gang_name = gang_id.partition("/")
        self.wait_time = 0.0
        self.create_time = time.time()
        self.mode = MODE_STRICT
        self.min_required = 0
        self.total = 0
        self.gang_group = [gang_id]
        self.gang_group_id = gang_id
        self.match_policy = ""
        self.gang_from = FROM_ANNOTATION
        self.has_init = False
        self.pod_group: Obj | None = None
        self.children: dict[str, Obj] = {}
        self.pending: dict[str, Obj] = {}
        self.waiting: dict[str, Obj] = {}
        self.bound: dict[str, Obj] = {}
        self.group_info = GangGroupInfo(gang_id)

    # -- initialisation ------------------------------------------------------------------------------

    def _set_group(self, groups: list[str]) -> None:
        self.gang_group = groups
        self.gang_group_id = ",".join(sorted(groups))

    def _set_common(self, annotations: Mapping[str, Any], args: CoschedulingArgs) -> None:
        mode = annotations.get(ANNOTATION_MODE)
        self.mode = mode if mode in (MODE_STRICT, MODE_NON_STRICT) else MODE_STRICT
        policy = annotations.get(ANNOTATION_MATCH_POLICY) or annotations.get(LABEL_MATCH_POLICY)
        self.match_policy = policy if policy in MATCH_POLICIES else args.default_match_policy
        total = _atoi(annotations.get(ANNOTATION_TOTAL))
        self.total = total if total is not None and total >= self.min_required else self.min_required
        self._set_group(_groups(self.id, annotations.get(ANNOTATION_GROUPS)))

    def try_init_by_pod(self, pod: Mapping[str, Any], args: CoschedulingArgs) -> bool:
        """Initialise from the first pod's labels/annotations; False (left un-initialised) without a min."""
        meta = pod.get("metadata") or {}
        labels = meta.get("labels") or {}
        annotations = meta.get("annotations") or {}
        raw = labels.get(LABEL_LIGHTWEIGHT_MIN)
        if raw is None:
            raw = annotations.get(ANNOTATION_MIN)
        minimum = _atoi(raw)
        if minimum is None:
            log.error("gang min-available of pod is missing or not a number gang=%s pod=%s value=%r",
                      self.id, pod_key(pod), raw)
            return False
        self.gang_from = FROM_ANNOTATION
        self.min_required = minimum
        self.wait_time = _positive_duration(annotations.get(ANNOTATION_WAITING_TIME)) or args.default_timeout
        self.create_time = parse_time(meta.get("creationTimestamp")) or time.time()
        self._set_common({**labels, **annotations}, args)
        self.has_init = True
        return True

    def init_by_pod_group(self, pg: Mapping[str, Any], args: CoschedulingArgs) -> None:
        meta = pg.get("metadata") or {}
        spec = pg.get("spec") or {}
        self.gang_from = FROM_POD_GROUP
        self.pod_group = dict(pg)
        self.min_required = int(spec.get("minMember") or 0)
        timeout = spec.get("scheduleTimeoutSeconds")
        self.wait_time = float(timeout) if isinstance(timeout, int) and timeout > 0 else args.default_timeout
        self.create_time = parse_time(meta.get("creationTimestamp")) or time.time()
        self._set_common(meta.get("annotations") or {}, args)
        self.has_init = True

    # -- children ------------------------------------------------------------------------------------

    def set_child(self, pod: Obj) -> None:
        key = pod_key(pod)
        self.children[key] = pod
        if (pod.get("spec") or {}).get("nodeName"):
            self.pending.pop(key, None)
            self.waiting.pop(key, None)
            self.bound[key] = pod
            self.group_info.once_resource_satisfied = True
        elif key in self.waiting:
            self.waiting[key] = pod
        else:
            self.pending[key] = pod

    def delete_child(self, key: str) -> None:
        for d in (self.children, self.pending, self.waiting, self.bound):
            d.pop(key, None)
        if self.group_info.representative == key:
            self.group_info.representative = ""

    def add_waiting(self, pod: Obj) -> None:
        key = pod_key(pod)
        self.pending.pop(key, None)
        self.waiting[key] = self.children.get(key, pod)

    def del_waiting(self, pod: Obj) -> None:
        key = pod_key(pod)
        if self.waiting.pop(key, None) is not None and key in self.children and key not in self.bound:
            self.pending[key] = self.children[key]

    def add_bound(self, pod: Obj) -> None:
        key = pod_key(pod)
        self.pending.pop(key, None)
        self.waiting.pop(key, None)
        self.bound[key] = self.children.get(key, pod)
        self.group_info.once_resource_satisfied = True

    # -- checks --------------------------------------------------------------------------------------

    def valid_for_permit(self) -> bool:
        if not self.has_init:
            return False
        waiting = len(self.waiting)
        if self.match_policy == "only-waiting":
            return waiting >= self.min_required
        if self.match_policy == "waiting-and-running":
            return waiting + len(self.bound) >= self.min_required
        return waiting >= self.min_required or self.group_info.once_resource_satisfied

    def once_satisfied(self) -> bool:
        """``once-satisfied`` policy and the group was placed once: members behave like plain pods."""
        return self.match_policy == "once-satisfied" and self.group_info.once_resource_satisfied
