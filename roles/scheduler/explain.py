"""Why the scheduler placed or rejected a pod: the last cycle's diagnosis, per pod, for ``koordinator explain``.

Every scheduling cycle leaves a :class:`CycleExplanation`: for a failed cycle the filter plugins'
verdicts (plugin → reason → the nodes it rejected, PreFilter rejections and the preemption outcome
included), for a successful one the chosen node and the per-plugin scores of it and the next best
nodes. :class:`ExplanationRecorder` keeps the latest one per pod in a bounded LRU; the scheduler
drops a pod's entry when the pod is deleted. The diagnosis and the score matrix already exist when
a cycle ends, so recording only reads them: names are looked up for a capped number of nodes, and the
few best columns of the score matrix are copied.

With the ``ScheduleExplanation`` feature gate on (default off) the scheduler also writes Koordinator's
ScheduleExplanation object (``scheduling.koordinator.sh/v1alpha1``; same namespace and name as the pod)
through :func:`write_explanation`; the scores (and how many nodes each failure reason hit) go into the
``DETAILS_ANNOTATION`` annotation as JSON (:mod:`koordinator.apis.explanation`) because the status
schema has no field for them. A write happens only when the diagnosis changed.
"""

from __future__ import annotations

import json
import threading
import time as _time
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from koordinator.apis.explanation import DETAILS_ANNOTATION, GATE, GROUP_VERSION, KIND, MAX_FAILED_NODES

if TYPE_CHECKING:
    from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
    from koordinator_roles.scheduler.framework.snapshot import Snapshot

__all__ = ["GATE", "CycleExplanation", "ExplanationRecorder", "failure_explanation", "success_explanation",
           "write_explanation"]

#: How many pods' explanations the scheduler keeps in memory (least recently scheduled dropped first).
DEFAULT_CAPACITY = 2048
#: Nodes beside the chosen one whose scores are kept.
NEXT_BEST = 3


@dataclass(frozen=True)
class FailedDetail:
    """One filter plugin's reason and the nodes it rejected with it (``nodeFailedDetails[]``)."""

    plugin: str
    reason: str
    nodes: tuple[str, ...]  # at most MAX_FAILED_NODES of them
    count: int  # how many nodes it rejected with this reason


@dataclass(frozen=True)
class NodeScores:
    """A node's total score and each Score plugin's normalised score (0..100, before the weight)."""

    node: str
    total: int
    scores: tuple[int, ...]  # aligned with CycleExplanation.plugins


@dataclass(frozen=True)
class CycleExplanation:
    """The outcome of one scheduling cycle of one pod."""

    namespace: str
    name: str
    uid: str
    schedulable: bool
    message: str = ""  # the failure message (the pod's PodScheduled condition), "" when schedulable
    failed: tuple[FailedDetail, ...] = ()
    #: The failure came from PreFilter (it rejects every node at once): ``failed`` has no node names.
    pre_filter: bool = False
    num_nodes: int = 0
    #: Preemption: what PostFilter said ("" when it did not run or found nothing to say), and the node it
    #: nominated ("" for none).
    preemption: str = ""
    nominated_node: str = ""
    chosen_node: str = ""
    plugins: tuple[str, ...] = ()  # Score plugins that ran
    weights: tuple[int, ...] = ()
    nodes: tuple[NodeScores, ...] = ()  # the chosen node first, then the next best
    at: float = field(default=0.0, compare=False)  # when the cycle ended (time.time())

    @property
    def time(self) -> str:
        """When the cycle ended, RFC 3339."""
        return datetime.fromtimestamp(self.at or _time.time(), timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def details_document(self) -> dict:
        """The ``DETAILS_ANNOTATION`` JSON document (:mod:`koordinator.apis.explanation`)."""
        if not self.schedulable:
            return {"failedNodeCounts": [d.count for d in self.failed]}
        return {"chosenNode": self.chosen_node,
                "plugins": [{"name": p, "weight": w} for p, w in zip(self.plugins, self.weights)],
                "nodes": [{"name": n.node, "total": n.total, "scores": dict(zip(self.plugins, n.scores))}
                          for n in self.nodes]}

    def status(self) -> dict:
        """The ScheduleExplanation status (reference §4.13), one detailedExplanation entry (no topology)."""
        details = [{"failedPlugin": d.plugin, "reason": d.reason, "failedNodes": list(d.nodes),
                    "preemptMightHelp": False} for d in self.failed]
        explanation: dict[str, Any] = {"schedulable": self.schedulable, "failedMessage": self.message,
                                       "nodeFailedDetails": details}
        if self.schedulable:
            explanation["feasibleSchedulingResult"] = [{"namespace": self.namespace, "name": self.name,
                                                        "uid": self.uid, "nodeName": self.chosen_node}]
        after_preemption = bool(self.nominated_node)
        return {"schedulable": self.schedulable, "schedulableAfterPreemption": after_preemption,
                "failedMessage": self.message,
                "detailedExplanation": [{"schedulable": self.schedulable,
                                         "schedulableAfterPreemption": after_preemption,
                                         "failedMessage": self.message, "scheduleExplanation": explanation}]}


def failure_explanation(pod: dict, message: str, *, diagnosis: "Diagnosis | None" = None,
                        snapshot: "Snapshot | None" = None, num_nodes: int = 0,
                        nominated_node: str | None = None) -> CycleExplanation:
    """A failed cycle: the diagnosis' groups as plugin → reason → nodes (names capped), or only the message
    for failures that are no filter verdict (Reserve, Permit, Bind, errors)."""
    meta = pod.get("metadata") or {}
    failed: list[FailedDetail] = []
    pre_filter = False
    preemption = ""
    if diagnosis is not None:
        preemption = diagnosis.post_filter_msg
        if diagnosis.all_nodes_status is not None:
            status = diagnosis.all_nodes_status
            pre_filter = True
            failed.append(FailedDetail(status.plugin or "PreFilter", status.message(), (), num_nodes))
        elif snapshot is not None:
            failed = _failed_details(diagnosis, snapshot)
    return CycleExplanation(namespace=meta.get("namespace") or "", name=meta.get("name") or "",
                            uid=meta.get("uid") or "", schedulable=False, message=message, failed=tuple(failed),
                            pre_filter=pre_filter, num_nodes=num_nodes, preemption=preemption,
                            nominated_node=nominated_node or "", at=_time.time())


def _failed_details(diagnosis: "Diagnosis", snapshot: "Snapshot") -> list[FailedDetail]:
    infos = snapshot.node_infos
    # (plugin, reason) -> [names (capped), count]; groups of one plugin and reason merge (chunked filtering).
    merged: dict[tuple[str, str], list] = {}
    for plugin, _code, reason, rows in diagnosis.groups():
        entry = merged.setdefault((plugin, reason), [[], 0])
        room = MAX_FAILED_NODES - len(entry[0])
        if room > 0:
            entry[0].extend(infos[r].name for r in rows[:room].tolist())
        entry[1] += len(rows)
    for row, status in diagnosis.node_statuses():
        for reason in status.reasons or [status.message()]:
            entry = merged.setdefault((status.plugin or "", reason), [[], 0])
            if len(entry[0]) < MAX_FAILED_NODES:
                entry[0].append(infos[row].name)
            entry[1] += 1
    return [FailedDetail(plugin, reason, tuple(names), count)
            for (plugin, reason), (names, count) in sorted(merged.items())]


def success_explanation(pod: dict, chosen_row: int, snapshot: "Snapshot", detail: tuple | None,
                        next_best: int = NEXT_BEST) -> CycleExplanation:
    """A successful cycle. ``detail``: the Framework's ``last_scores`` (scorers, weights, per-plugin scores
    (plugins × rows), rows, totals) or None when no scoring ran (one feasible node)."""
    meta = pod.get("metadata") or {}
    chosen = snapshot.node_infos[chosen_row].name
    plugins: tuple[str, ...] = ()
    weights: tuple[int, ...] = ()
    nodes: tuple[NodeScores, ...] = ()
    if detail is not None:
        scorers, weight_vector, stacked, rows, totals = detail
        plugins = tuple(p.name for p, _, _ in scorers)
        weights = tuple(int(w) for w in weight_vector.tolist())
        if len(rows) and stacked.shape[1] == len(rows):
            nodes = _top_nodes(chosen_row, snapshot, stacked, rows, totals, next_best)
    return CycleExplanation(namespace=meta.get("namespace") or "", name=meta.get("name") or "",
                            uid=meta.get("uid") or "", schedulable=True, chosen_node=chosen, plugins=plugins,
                            weights=weights, nodes=nodes, num_nodes=len(snapshot), at=_time.time())


def _top_nodes(chosen_row: int, snapshot: "Snapshot", stacked: np.ndarray, rows: np.ndarray,
               totals: np.ndarray, next_best: int) -> tuple[NodeScores, ...]:
    # Few numpy calls on purpose: this runs on the scheduling thread for every placed pod.
    n = len(rows)
    k = min(next_best + 1, n)
    best = np.argpartition(totals, n - k)[n - k:] if n > k else np.arange(n)
    best_rows = rows[best].tolist()
    if chosen_row not in best_rows:  # more ties for the top than kept: put the chosen one in
        best = np.append(best[1:], np.flatnonzero(rows == chosen_row)[:1])
        best_rows = rows[best].tolist()
    best_totals = totals[best].tolist()
    columns = stacked[:, best].T.tolist()
    entries = sorted(zip(best_rows, best_totals, columns), key=lambda e: (e[0] != chosen_row, -e[1]))
    infos = snapshot.node_infos
    return tuple(NodeScores(infos[row].name, int(total), tuple(scores)) for row, total, scores in entries)


class ExplanationRecorder:
    """The latest :class:`CycleExplanation` per pod key, at most ``capacity`` of them (LRU). Thread-safe:
    the scheduling thread records, binder threads record binding failures and write objects."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        if capacity < 1:
            raise ValueError(f"capacity: Invalid value: {capacity}: must be at least 1")
        self.capacity = capacity
        self._entries: OrderedDict[str, CycleExplanation] = OrderedDict()
        # key -> what was last written for it (the object's status and annotation), to skip unchanged writes.
        self._written: dict[str, tuple] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def record(self, explanation: CycleExplanation) -> None:
        key = explanation.key
        with self._lock:
            self._entries[key] = explanation
            self._entries.move_to_end(key)
            while len(self._entries) > self.capacity:
                old, _ = self._entries.popitem(last=False)
                self._written.pop(old, None)

    def get(self, key: str) -> CycleExplanation | None:
        with self._lock:
            return self._entries.get(key)

    def forget(self, key: str) -> None:
        """The pod was deleted: drop what is known about it."""
        with self._lock:
            self._entries.pop(key, None)
            self._written.pop(key, None)

    def claim_write(self, explanation: CycleExplanation) -> bool:
        """True when ``explanation`` differs from what was last written for its pod (and marks it written);
        False for a repeat of the same diagnosis, or a pod that was forgotten meanwhile."""
        fingerprint = (explanation.uid, _fingerprint(explanation))
        with self._lock:
            if explanation.key not in self._entries or self._written.get(explanation.key) == fingerprint:
                return False
            self._written[explanation.key] = fingerprint
            return True

    def unclaim_write(self, explanation: CycleExplanation) -> None:
        """The write failed: let the next cycle's try again."""
        with self._lock:
            self._written.pop(explanation.key, None)


def _fingerprint(e: CycleExplanation) -> tuple:
    # Everything but the time: the same verdict again is no news.
    return (e.schedulable, e.message, e.failed, e.preemption, e.nominated_node, e.chosen_node, e.plugins,
            e.weights, e.nodes)


def explanation_object(explanation: CycleExplanation) -> dict:
    """The ScheduleExplanation object for a pod (owned by the pod, so it goes when the pod goes)."""
    metadata: dict[str, Any] = {"name": explanation.name, "namespace": explanation.namespace,
                                "annotations": {DETAILS_ANNOTATION: json.dumps(explanation.details_document(),
                                                                               separators=(",", ":"))}}
    if explanation.uid:
        metadata["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": explanation.name,
                                        "uid": explanation.uid}]
    return {"apiVersion": GROUP_VERSION, "kind": KIND, "metadata": metadata,
            "spec": {"questionObjectKey": explanation.key}}


def write_explanation(client: Any, explanation: CycleExplanation) -> None:
    """Create or update the pod's ScheduleExplanation: spec and annotation, then status (its own subresource)."""
    from koordinator.runtime.errors import AlreadyExists, NotFound

    ns, name = explanation.namespace, explanation.name
    obj = explanation_object(explanation)
    try:
        client.create(obj)
    except AlreadyExists:
        # A pod of the same name may have come before: the owner is this one now.
        meta = {k: obj["metadata"][k] for k in ("annotations", "ownerReferences") if k in obj["metadata"]}
        client.patch(KIND, name, {"metadata": meta, "spec": obj["spec"]}, namespace=ns)
    status = {**explanation.status(), "lastUpdateTime": explanation.time}
    try:
        client.patch(KIND, name, {"status": status}, namespace=ns, subresource="status")
    except NotFound:
        pass  # deleted meanwhile (its pod went away)
