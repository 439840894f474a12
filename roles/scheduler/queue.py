"""The scheduling queue (kube-scheduler's ``PriorityQueue``) and the nominator.

Where a pending pod waits:

- **activeQ**: a heap ordered by the QueueSort key (PrioritySort: higher priority first, then
  the earlier queue timestamp); ``pop()`` takes its head.
- **backoffQ**: a heap ordered by backoff expiry; pods move to activeQ when their backoff
  (``initial × 2^(attempts-1)``, capped at ``max``, counted from the last attempt) is over.
- **unschedulable**: pods rejected by plugins; they leave only when a cluster event that one of
  their rejecting plugins registered (``EnqueueExtensions``) fires and its hint agrees, when they
  are updated, activated, or after ``unschedulable_timeout`` without any of these.
- **gated**: pods a PreEnqueue plugin rejected; re-checked when they are updated, when an event
  their gating plugin registered fires, and after ``unschedulable_timeout``.

A popped pod is *in flight* until it comes back through ``add_unschedulable_if_not_present`` or
``done(uid)`` is called (after binding). Events observed meanwhile are remembered, so that a pod
whose rejection an event may already have lifted goes to backoffQ rather than waiting for the
next event in unschedulable (kube's in-flight events with queueing hints).

Every method is thread-safe: informer handler threads add/update/delete while the scheduling
thread pops. Plugin callbacks (PreEnqueue, queueing hints) run under the queue lock, as in kube;
they must not call back into the queue.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from koordinator_roles.scheduler.framework.interfaces import ClusterEvent
from koordinator_roles.scheduler.framework.status import Status
from koordinator_roles.scheduler.framework.types import PodInfo, QueuedPodInfo
from koordinator_roles.scheduler.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"

# Event labels of scheduler_queue_incoming_pods_total (kube's names).
POD_ADD = "PodAdd"
POD_UPDATE = "PodUpdate"
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
FORCE_ACTIVATE = "ForceActivate"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
ASSIGNED_POD_ADD = "AssignedPodAdd"
ASSIGNED_POD_UPDATE = "AssignedPodUpdate"
ASSIGNED_POD_DELETE = "AssignedPodDelete"
WILDCARD_EVENT = "WildCardEvent"

WILDCARD = "*"

# The parking index key of pods rejected without a plugin name: every event may help them.
_ANY_PLUGIN = ""

Obj = dict[str, Any]


def _uid(pod: Mapping[str, Any]) -> str:
    """The pod's identity as PodInfo computes it (uid, else namespace/name)."""
    meta = pod.get("metadata") or {}
    return meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _status_nominated_node(pod: Mapping[str, Any]) -> str:
    return (pod.get("status") or {}).get("nominatedNodeName") or ""


def _pod_updated(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    """Whether an update may change the scheduling outcome (kube's isPodUpdated, on the fields that matter).

    Status, resourceVersion and managedFields change all the time without touching scheduling.
    """
    if old is None:
        return True
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    return (old.get("spec") != new.get("spec") or om.get("labels") != nm.get("labels")
            or om.get("annotations") != nm.get("annotations"))


def backoff_duration(attempts: int, initial: float, maximum: float) -> float:
    """kube's calculateBackoffDuration: initial × 2^(attempts-1), capped at maximum."""
    duration = initial
    for _ in range(1, attempts):
        if duration > maximum - duration:
            return maximum
        duration += duration
    return min(duration, maximum)


# -- nominator -------------------------------------------------------------------------------------------

class Nominator:
    """Pods nominated to nodes by preemption, so that later pods leave room for them (kube's PodNominator).

    A pod's nomination comes from preemption (``add_nominated_pod(pi, node)``) or from its
    ``status.nominatedNodeName``; it goes when the pod is deleted or bound.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_node: dict[str, list[PodInfo]] = {}
        self._node_of: dict[str, str] = {}

    def add_nominated_pod(self, pod_info: PodInfo, node_name: str = "") -> None:
        """Nominate the pod to ``node_name``, or to its status.nominatedNodeName when that is empty.

        Any earlier nomination of the pod is dropped first, so a pod is never nominated twice.
        """
        with self._lock:
            self._add_locked(pod_info, node_name)

    def delete_nominated_pod_if_exists(self, pod: Mapping[str, Any]) -> None:
        with self._lock:
            self._delete_locked(_uid(pod))

    def update_nominated_pod(self, old_pod: Mapping[str, Any] | None, new_pod_info: PodInfo) -> None:
        """Swap in the new pod version, keeping an in-memory nomination the update does not know of yet.

        Preemption nominates in memory before the status patch reaches the informer; an update
        arriving in between carries no nominatedNodeName and must not undo the nomination.
        """
        with self._lock:
            keep = ""
            old_uid = _uid(old_pod) if old_pod is not None else new_pod_info.uid
            if (old_pod is None or not _status_nominated_node(old_pod)) \
                    and not _status_nominated_node(new_pod_info.pod):
                keep = self._node_of.get(old_uid, "")
            self._delete_locked(old_uid)
            self._add_locked(new_pod_info, keep)

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        """A copy of the pods nominated to the node."""
        with self._lock:
            return list(self._by_node.get(node_name, ()))

    def add_from_status_if_absent(self, pod_info: PodInfo) -> None:
        """Nominate the pod to its status.nominatedNodeName unless an in-memory nomination exists.

        A requeued pod gets back the nomination recorded in its status (dropped when it was
        assumed), while a fresher in-memory one from this cycle's preemption wins.
        """
        if not _status_nominated_node(pod_info.pod):
            return
        with self._lock:
            if pod_info.uid not in self._node_of:
                self._add_locked(pod_info, "")

    def nominated_node_names(self) -> list[str]:
        """The nodes that have pods nominated to them."""
        with self._lock:
            return list(self._by_node)

    def nominated_node_name(self, pod: Mapping[str, Any]) -> str:
        """The node the pod is nominated to: the in-memory nomination, else its status'."""
        with self._lock:
            return self._node_of.get(_uid(pod)) or _status_nominated_node(pod)

    def __len__(self) -> int:
        with self._lock:
            return len(self._node_of)

    def _add_locked(self, pi: PodInfo, node_name: str) -> None:
        self._delete_locked(pi.uid)
        node = node_name or _status_nominated_node(pi.pod)
        # A pod that already has a node needs no room held for it.
        if not node or pi.node_name:
            return
        self._node_of[pi.uid] = node
        self._by_node.setdefault(node, []).append(pi)

    def _delete_locked(self, uid: str) -> None:
        node = self._node_of.pop(uid, None)
        if node is None:
            return
        pods = [p for p in self._by_node.get(node, ()) if p.uid != uid]
        if pods:
            self._by_node[node] = pods
        else:
            self._by_node.pop(node, None)


# -- heaps -----------------------------------------------------------------------------------------------

class _Heap:
    """A binary heap of QueuedPodInfos keyed by uid, with lazy deletion (removal and re-keying are O(1))."""

    __slots__ = ("_heap", "_entries", "_counter")

    def __init__(self) -> None:
        self._heap: list[list] = []
        self._entries: dict[str, list] = {}
        self._counter = itertools.count()

    def push(self, qpi: QueuedPodInfo, key: tuple) -> None:
        uid = qpi.pod_info.uid
        old = self._entries.get(uid)
        if old is not None:
            old[-1] = None
        # seq keeps ties stable (first in, first out); the counter makes every entry unique so that
        # tuples never compare the QueuedPodInfos themselves.
        entry = [key, qpi.seq, next(self._counter), qpi]
        self._entries[uid] = entry
        heapq.heappush(self._heap, entry)
        if len(self._heap) > 2 * len(self._entries) + 64:
            self._compact()

    def remove(self, uid: str) -> QueuedPodInfo | None:
        entry = self._entries.pop(uid, None)
        if entry is None:
            return None
        qpi, entry[-1] = entry[-1], None
        return qpi

    def get(self, uid: str) -> QueuedPodInfo | None:
        entry = self._entries.get(uid)
        return None if entry is None else entry[-1]

    def peek(self) -> QueuedPodInfo | None:
        heap = self._heap
        while heap and heap[0][-1] is None:
            heapq.heappop(heap)
        return heap[0][-1] if heap else None

    def pop(self) -> QueuedPodInfo | None:
        qpi = self.peek()
        if qpi is not None:
            heapq.heappop(self._heap)
            del self._entries[qpi.pod_info.uid]
        return qpi

    def items(self) -> list[QueuedPodInfo]:
        return [e[-1] for e in self._entries.values()]

    def _compact(self) -> None:
        self._heap = [e for e in self._heap if e[-1] is not None]
        heapq.heapify(self._heap)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, uid: str) -> bool:
        return uid in self._entries


class _InFlight:
    """A popped pod: where the event log stood when it was popped, and what happened to it since."""

    __slots__ = ("start", "latest", "deleted")

    def __init__(self, start: int) -> None:
        self.start = start
        self.latest: Obj | None = None
        self.deleted = False


# -- the queue --------------------------------------------------------------------------------------------

class SchedulingQueue:
    """kube-scheduler's PriorityQueue: activeQ, backoffQ, unschedulable and gated pods, one for all profiles.

    ``sort_key(qpi)`` orders activeQ (smaller first); ``pre_enqueue(pod_info)`` gates pods (a
    rejecting Status should name its plugin, whose registered events then re-check the pod);
    ``events_for_plugin(name)`` gives the ClusterEvents a plugin registered (None: every plugin
    registered every event). ``clock`` is the queue's notion of time (timestamps, backoff,
    timeouts); waiting in ``pop`` and ``run`` uses real time.
    """

    #: How often run() moves pods whose backoff is over, and looks for long-unschedulable pods (kube's).
    BACKOFF_FLUSH_INTERVAL = 1.0
    UNSCHEDULABLE_FLUSH_INTERVAL = 30.0

    def __init__(self, sort_key: Callable[[QueuedPodInfo], tuple], *,
                 pre_enqueue: Callable[[PodInfo], Status | None] | None = None,
                 initial_backoff: float = 1.0, max_backoff: float = 10.0,
                 unschedulable_timeout: float = 300.0, clock: Callable[[], float] = time.monotonic,
                 metrics: SchedulerMetrics | None = None,
                 events_for_plugin: Callable[[str], list[ClusterEvent]] | None = None) -> None:
        self.sort_key = sort_key
        self.pre_enqueue = pre_enqueue
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.unschedulable_timeout = unschedulable_timeout
        self.clock = clock
        self.metrics = metrics
        self.events_for_plugin = events_for_plugin
        self.nominator = Nominator()
        # RLock: a plugin callback that (wrongly) re-enters must not deadlock the scheduler.
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._active = _Heap()
        self._backoff = _Heap()
        self._unschedulable: dict[str, QueuedPodInfo] = {}
        self._gated: dict[str, QueuedPodInfo] = {}
        self._gated_checked: dict[str, float] = {}
        # Parked (unschedulable or gated) pods by rejecting plugin, so an event visits only the pods
        # it may help; _parked_plugins remembers the keys a pod was indexed under.
        self._by_plugin: dict[str, set[str]] = {}
        self._parked_plugins: dict[str, tuple[str, ...]] = {}
        self._in_flight: dict[str, _InFlight] = {}
        self._events: list[tuple] = []  # (kind, action, old, new, target_uid) while pods are in flight
        self._events_base = 0  # absolute index of _events[0]
        self._matching_cache: dict[tuple[str, str, str], tuple[ClusterEvent, ...]] = {}
        self._seq = itertools.count()
        self._closed = False
        #: Incremented by every pop(); what add_unschedulable_if_not_present's pod_scheduling_cycle refers to.
        self.scheduling_cycle = 0
        #: The scheduling cycle current when the last move request (cluster event) arrived.
        self.move_request_cycle = -1
        self._update_gauges()

    # -- adding, updating, deleting pending pods ---------------------------------------------------------

    def add(self, pod: Obj) -> None:
        """A new pending pod: to activeQ, or aside as gated when PreEnqueue rejects it."""
        uid = _uid(pod)
        with self._lock:
            existing = self._find(uid)
            if existing is not None or uid in self._in_flight:
                # A repeated add (informer resync, relist) is an update of what we hold.
                self.update(existing.pod if existing is not None else None, pod)
                return
            pi = PodInfo(pod)
            qpi = QueuedPodInfo(pi, self.clock())
            qpi.seq = next(self._seq)
            if _status_nominated_node(pod):
                self.nominator.add_nominated_pod(pi, "")
            if self._move_to_active(qpi, POD_ADD):
                self._cond.notify()
            self._update_gauges()

    def update(self, old: Obj | None, new: Obj) -> None:
        """A pending pod changed: updated in place; an unschedulable or gated pod whose spec, labels or
        annotations changed gets another chance; a pod the queue does not hold is added."""
        uid = _uid(new)
        with self._lock:
            pi = PodInfo(new)
            self.nominator.update_nominated_pod(old, pi)
            flight = self._in_flight.get(uid)
            if flight is not None:
                # Requeued with the latest version; a relevant change counts as an event for it.
                flight.latest = new
                if _pod_updated(old, new):
                    self._events.append(("Pod", "Update", old, new, uid))
                return
            qpi = self._active.get(uid)
            if qpi is not None:
                qpi.pod_info = pi
                self._active.push(qpi, self.sort_key(qpi))
                return
            qpi = self._backoff.get(uid)
            if qpi is not None:
                qpi.pod_info = pi
                return
            qpi = self._unschedulable.get(uid) or self._gated.get(uid)
            if qpi is not None:
                qpi.pod_info = pi
                if not _pod_updated(old, new):
                    return
                self._unpark(uid)
                if self._requeue(qpi, POD_UPDATE) == ACTIVE:
                    self._cond.notify()
                self._update_gauges()
                return
            self.add(new)

    def delete(self, pod: Obj) -> None:
        """The pod is gone (deleted, or bound and no longer pending)."""
        uid = _uid(pod)
        with self._lock:
            self.nominator.delete_nominated_pod_if_exists(pod)
            flight = self._in_flight.get(uid)
            if flight is not None:
                flight.deleted = True
                self._trim_events()
            if self._active.remove(uid) is None and self._backoff.remove(uid) is None:
                self._unpark(uid)
            self._update_gauges()

    def activate(self, pods: Iterable[Obj] | Mapping[str, Obj]) -> None:
        """Move the pods (a list, or kube's {key: pod} map) straight to activeQ, skipping backoff.

        Plugins use this to pull in pods they know became schedulable (Coscheduling's gang
        members). An in-flight pod is marked so that, if it fails, it comes back to backoffQ.
        """
        if isinstance(pods, Mapping):
            pods = [pods] if "metadata" in pods else list(pods.values())
        with self._lock:
            moved = False
            for pod in pods:
                uid = _uid(pod)
                if uid in self._in_flight:
                    self._events.append((WILDCARD, WILDCARD, None, None, uid))
                    continue
                qpi = self._backoff.remove(uid)
                if qpi is None:
                    qpi = self._unschedulable.get(uid) or self._gated.get(uid)
                    if qpi is None:
                        continue
                    self._unpark(uid)
                self.nominator.add_from_status_if_absent(qpi.pod_info)
                moved = self._move_to_active(qpi, FORCE_ACTIVATE) or moved
            if moved:
                self._cond.notify_all()
            self._update_gauges()

    # -- the scheduling thread ---------------------------------------------------------------------------

    def pop(self, timeout: float | None = None) -> QueuedPodInfo | None:
        """The head of activeQ, waiting up to ``timeout`` seconds (None: forever) for one.

        None on timeout or when the queue is closed. The pod is in flight afterwards; its attempt
        count and the scheduling cycle grow by one.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._closed:
                    return None
                qpi = self._active.pop()
                if qpi is None and self._flush_backoff_locked():
                    qpi = self._active.pop()
                if qpi is not None:
                    break
                wait = None if deadline is None else deadline - time.monotonic()
                if wait is not None and wait <= 0:
                    return None
                head = self._backoff.peek()
                if head is not None:
                    # Wake when the first backoff ends rather than at the next flush tick.
                    until = min(max(head.backoff_expiry - self.clock(), 0.001), self.BACKOFF_FLUSH_INTERVAL)
                    wait = until if wait is None else min(wait, until)
                self._cond.wait(wait)
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = self.clock()
            self.scheduling_cycle += 1
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            self._in_flight[qpi.pod_info.uid] = _InFlight(self._events_base + len(self._events))
            self._update_gauges()
            return qpi

    def pop_pod(self, pod: Obj) -> QueuedPodInfo | None:
        """Take this pod out of whichever queue holds it, in flight as after ``pop()`` (Koordinator's NextPod:
        Coscheduling pulls a gang's members into the cycle one after the other); None if it is not held."""
        uid = _uid(pod)
        with self._lock:
            if self._closed or uid in self._in_flight:
                return None
            qpi = self._active.remove(uid) or self._backoff.remove(uid) or self._unpark(uid)
            if qpi is None:
                return None
            qpi.gated = False
            qpi.attempts += 1
            if qpi.initial_attempt_timestamp is None:
                qpi.initial_attempt_timestamp = self.clock()
            self.scheduling_cycle += 1
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            self._in_flight[uid] = _InFlight(self._events_base + len(self._events))
            self._update_gauges()
            return qpi

    def add_unschedulable_if_not_present(self, qpi: QueuedPodInfo, pod_scheduling_cycle: int) -> bool:
        """Put back a pod whose attempt failed; False when the queue already holds it or it was deleted.

        ``qpi.unschedulable_plugins`` / ``pending_plugins`` name the plugins that rejected it.
        It goes to backoffQ (not unschedulable) when none did (an error), when an event one of them
        registered fired while it was in flight, or — for a pod not popped from this queue — when
        a move request arrived since ``pod_scheduling_cycle``. This also ends its flight (done).
        """
        uid = qpi.pod_info.uid
        with self._lock:
            flight = self._in_flight.pop(uid, None)
            try:
                if flight is not None:
                    if flight.deleted:
                        return False
                    if flight.latest is not None:
                        qpi.pod_info = PodInfo(flight.latest)
                if self._find(uid) is not None:
                    return False
                qpi.timestamp = self.clock()
                qpi.gated = False
                if not qpi.unschedulable_plugins and not qpi.pending_plugins:
                    retry = True
                elif flight is not None:
                    retry = self._events_help(qpi, flight.start)
                else:
                    retry = self.move_request_cycle >= pod_scheduling_cycle
                if retry:
                    if self._requeue(qpi, SCHEDULE_ATTEMPT_FAILURE) == ACTIVE:
                        self._cond.notify()
                else:
                    self._park(qpi, UNSCHEDULABLE, SCHEDULE_ATTEMPT_FAILURE)
                self.nominator.add_from_status_if_absent(qpi.pod_info)
                return True
            finally:
                self._trim_events()
                self._update_gauges()

    def done(self, uid: str) -> None:
        """The pod's scheduling (and binding) is over: stop tracking events for it."""
        with self._lock:
            if self._in_flight.pop(uid, None) is not None:
                self._trim_events()

    # -- cluster events -------------------------------------------------------------------------------

    def move_all_to_active_or_backoff(self, event: tuple[str, str], old: Any = None, new: Any = None, *,
                                      label: str | None = None) -> int:
        """A cluster event (kind, action): requeue the parked pods it may help; the number moved.

        A pod moves when one of its rejecting plugins registered a matching ClusterEvent whose
        hint (if any) agrees, or when it has no rejecting plugin; a still backing-off pod goes to
        backoffQ. A (``"*"``, ``"*"``) event moves everything. Gated pods are re-checked.
        """
        kind, action = event
        label = label or (WILDCARD_EVENT if kind == WILDCARD else f"{kind}{action}")
        with self._lock:
            self.move_request_cycle = self.scheduling_cycle
            if self._in_flight:
                self._events.append((kind, action, old, new, None))
                if len(self._events) > 1024:
                    self._trim_events()
            if not self._by_plugin:
                return 0
            if kind == WILDCARD:
                candidates = list(self._parked_plugins)
            else:
                candidates = set()
                for plugin, uids in self._by_plugin.items():
                    if plugin == _ANY_PLUGIN or self._matching(plugin, kind, action):
                        candidates.update(uids)
            helped = []
            for uid in candidates:
                qpi = self._unschedulable.get(uid) or self._gated.get(uid)
                if qpi is not None and (kind == WILDCARD or self._event_helps(qpi, kind, action, old, new)):
                    helped.append(qpi)
            return self._requeue_parked(helped, label)

    def assigned_pod_added(self, pod: Obj) -> None:
        """A pod was bound (or appeared bound): its nomination and flight end; pods waiting on pods may fit now.

        Ending the flight here keeps the in-flight bookkeeping bounded even if a done() is missed.
        """
        self.nominator.delete_nominated_pod_if_exists(pod)
        self.done(_uid(pod))
        self.move_all_to_active_or_backoff(("Pod", "Add"), None, pod, label=ASSIGNED_POD_ADD)

    def assigned_pod_updated(self, old: Obj | None, new: Obj) -> None:
        """A bound pod changed (labels, resources): may help pods rejected by affinity-style plugins."""
        self.nominator.delete_nominated_pod_if_exists(new)
        self.move_all_to_active_or_backoff(("Pod", "Update"), old, new, label=ASSIGNED_POD_UPDATE)

    def assigned_pod_deleted(self, pod: Obj) -> None:
        """A bound pod went away: its resources are free."""
        self.move_all_to_active_or_backoff(("Pod", "Delete"), pod, None, label=ASSIGNED_POD_DELETE)

    # -- periodic flushes ------------------------------------------------------------------------------

    def flush_backoff_completed(self) -> int:
        """Move pods whose backoff is over to activeQ; the number moved."""
        with self._lock:
            n = self._flush_backoff_locked()
            if n:
                self._cond.notify_all()
            self._update_gauges()
            return n

    def flush_unschedulable_left_over(self) -> int:
        """Requeue pods parked for more than ``unschedulable_timeout``; the number that left."""
        with self._lock:
            now = self.clock()
            stale = [q for q in self._unschedulable.values() if now - q.timestamp > self.unschedulable_timeout]
            stale += [q for uid, q in self._gated.items()
                      if now - self._gated_checked.get(uid, q.timestamp) > self.unschedulable_timeout]
            return self._requeue_parked(stale, UNSCHEDULABLE_TIMEOUT)

    def _requeue_parked(self, parked: list[QueuedPodInfo], label: str) -> int:
        """Unpark and requeue pods (lock held); the number that left the parked sets for active or backoff."""
        moved = 0
        to_active = False
        for qpi in parked:
            self._unpark(qpi.pod_info.uid)
            where = self._requeue(qpi, label)
            if where != GATED:
                moved += 1
            to_active = to_active or where == ACTIVE
        if to_active:
            self._cond.notify_all()
        self._update_gauges()
        return moved

    def run(self, stop_event: threading.Event) -> None:
        """The flush loop, a Runtime runnable: backoffQ every second, unschedulable pods every 30 s."""
        last_unschedulable = time.monotonic()
        while not stop_event.wait(self.BACKOFF_FLUSH_INTERVAL):
            try:
                self.flush_backoff_completed()
                if time.monotonic() - last_unschedulable >= self.UNSCHEDULABLE_FLUSH_INTERVAL:
                    last_unschedulable = time.monotonic()
                    self.flush_unschedulable_left_over()
            except Exception:  # a failing plugin callback must not stop the flushing for good
                log.exception("scheduling queue flush failed")

    def close(self) -> None:
        """Wake every pop() waiter; pop() returns None from now on."""
        with self._lock:
            self._closed = True
            self._cond.notify_all()

    def set_backoff(self, initial: float, maximum: float) -> None:
        """New backoff bounds (configuration reload); pods already backing off keep their expiry."""
        with self._lock:
            self.initial_backoff = initial
            self.max_backoff = maximum

    def reset_event_registrations(self) -> None:
        """Forget the cached plugin → events lookups (after a configuration reload changed the plugins)."""
        with self._lock:
            self._matching_cache.clear()

    # -- reading ---------------------------------------------------------------------------------------

    def pending_pods(self) -> dict[str, int]:
        """How many pods wait where: active, backoff, unschedulable, gated (in-flight pods excluded)."""
        with self._lock:
            return self._counts()

    def pods(self) -> list[Obj]:
        """Every pending pod the queue holds (for debugging endpoints)."""
        with self._lock:
            qpis = (self._active.items() + self._backoff.items() + list(self._unschedulable.values())
                    + list(self._gated.values()))
            return [q.pod for q in qpis]

    def has(self, uid: str) -> bool:
        """Whether the pod waits in one of the queues (in-flight pods do not)."""
        with self._lock:
            return self._find(uid) is not None

    def in_flight(self, uid: str) -> bool:
        """Whether the pod was popped and has not come back or been marked done."""
        with self._lock:
            return uid in self._in_flight

    def backoff_time(self, qpi: QueuedPodInfo) -> float:
        """When the pod's backoff ends, on the queue clock."""
        return qpi.timestamp + backoff_duration(qpi.attempts, self.initial_backoff, self.max_backoff)

    def __len__(self) -> int:
        with self._lock:
            return len(self._active) + len(self._backoff) + len(self._unschedulable) + len(self._gated)

    # -- internals (lock held) --------------------------------------------------------------------------

    def _find(self, uid: str) -> QueuedPodInfo | None:
        return (self._active.get(uid) or self._backoff.get(uid) or self._unschedulable.get(uid)
                or self._gated.get(uid))

    def _counts(self) -> dict[str, int]:
        return {ACTIVE: len(self._active), BACKOFF: len(self._backoff),
                UNSCHEDULABLE: len(self._unschedulable), GATED: len(self._gated)}

    def _update_gauges(self) -> None:
        if self.metrics is not None:
            self.metrics.set_pending(self._counts())

    def _incoming(self, queue: str, event: str) -> None:
        if self.metrics is not None:
            self.metrics.incoming(queue, event)

    def _move_to_active(self, qpi: QueuedPodInfo, event: str) -> bool:
        """activeQ if PreEnqueue lets the pod in (True), else aside as gated (kube's moveToActiveQ)."""
        status = self._run_pre_enqueue(qpi.pod_info)
        if status is not None:
            qpi.gated = True
            qpi.unschedulable_plugins = {status.plugin} if status.plugin else set()
            self._park(qpi, GATED, event)
            return False
        if qpi.gated:
            qpi.gated = False
            qpi.unschedulable_plugins = set()
        self._active.push(qpi, self.sort_key(qpi))
        self._incoming(ACTIVE, event)
        return True

    def _run_pre_enqueue(self, pi: PodInfo) -> Status | None:
        if self.pre_enqueue is None:
            return None
        try:
            status = self.pre_enqueue(pi)
        except Exception as e:  # kube treats a PreEnqueue error as "not yet": the pod stays gated
            log.exception("PreEnqueue failed pod=%s", pi.key)
            return Status.error(f"PreEnqueue failed: {e}")
        if status is None or status.is_success():
            return None
        return status

    def _requeue(self, qpi: QueuedPodInfo, event: str) -> str:
        """backoffQ while the pod is backing off, else activeQ (through PreEnqueue); where it went."""
        if not qpi.gated:
            expiry = self.backoff_time(qpi)
            if expiry > self.clock():
                qpi.backoff_expiry = expiry
                self._backoff.push(qpi, (expiry,))
                self._incoming(BACKOFF, event)
                return BACKOFF
        return ACTIVE if self._move_to_active(qpi, event) else GATED

    def _flush_backoff_locked(self) -> int:
        now = self.clock()
        n = 0
        while True:
            head = self._backoff.peek()
            if head is None or head.backoff_expiry > now:
                return n
            self._backoff.pop()
            if self._move_to_active(head, BACKOFF_COMPLETE):
                n += 1

    def _park(self, qpi: QueuedPodInfo, where: str, event: str) -> None:
        uid = qpi.pod_info.uid
        if where == GATED:
            self._gated[uid] = qpi
            self._gated_checked[uid] = self.clock()
        else:
            self._unschedulable[uid] = qpi
        plugins = tuple(qpi.unschedulable_plugins | qpi.pending_plugins) or (_ANY_PLUGIN,)
        self._parked_plugins[uid] = plugins
        for p in plugins:
            self._by_plugin.setdefault(p, set()).add(uid)
        self._incoming(where, event)

    def _unpark(self, uid: str) -> QueuedPodInfo | None:
        qpi = self._unschedulable.pop(uid, None)
        if qpi is None:
            qpi = self._gated.pop(uid, None)
            self._gated_checked.pop(uid, None)
        for p in self._parked_plugins.pop(uid, ()):
            uids = self._by_plugin.get(p)
            if uids is not None:
                uids.discard(uid)
                if not uids:
                    del self._by_plugin[p]
        return qpi

    def _matching(self, plugin: str, kind: str, action: str) -> tuple[ClusterEvent, ...]:
        """The ClusterEvents ``plugin`` registered that match (kind, action); cached (registrations are static)."""
        key = (plugin, kind, action)
        found = self._matching_cache.get(key)
        if found is None:
            if self.events_for_plugin is None:
                found = (ClusterEvent(WILDCARD),)
            else:
                try:
                    registered = self.events_for_plugin(plugin) or ()
                except Exception:
                    log.exception("events_for_plugin failed plugin=%s", plugin)
                    registered = (ClusterEvent(WILDCARD),)
                found = tuple(ce for ce in registered if ce.matches(kind, action))
            self._matching_cache[key] = found
        return found

    def _event_helps(self, qpi: QueuedPodInfo, kind: str, action: str, old: Any, new: Any) -> bool:
        plugins = qpi.unschedulable_plugins | qpi.pending_plugins
        if not plugins:
            return True
        for plugin in plugins:
            for ce in self._matching(plugin, kind, action):
                if ce.hint is None:
                    return True
                try:
                    if ce.hint(qpi.pod, old, new):
                        return True
                except Exception:  # kube requeues when a hint fails: waiting forever is worse
                    log.exception("queueing hint failed plugin=%s pod=%s", plugin, qpi.pod_info.key)
                    return True
        return False

    def _events_help(self, qpi: QueuedPodInfo, start: int) -> bool:
        """Whether an event recorded since ``start`` may lift the pod's rejection."""
        uid = qpi.pod_info.uid
        for kind, action, old, new, target in self._events[max(start - self._events_base, 0):]:
            if target is not None:
                if target == uid:
                    return True
                continue
            if kind == WILDCARD or self._event_helps(qpi, kind, action, old, new):
                return True
        return False

    def _trim_events(self) -> None:
        # A deleted in-flight pod will not be requeued, so the events are of no use to it.
        starts = [f.start for f in self._in_flight.values() if not f.deleted]
        if not starts:
            self._events_base += len(self._events)
            self._events.clear()
        elif len(self._events) > 1024:
            start = min(starts)
            drop = start - self._events_base
            if drop > 0:
                del self._events[:drop]
                self._events_base = start
