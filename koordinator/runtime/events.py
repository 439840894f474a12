"""Kubernetes Events (core/v1) with client-go ``tools/record`` semantics (reference runtime.md §3.8).

:meth:`EventRecorder.event` never blocks: it puts the event on a bounded queue (full -> dropped and
counted) and one worker thread writes it. Before writing, the worker runs client-go's
``EventCorrelator``:

* **aggregation of similar events**: events about one object with the same type and reason but
  different messages; once ``similar_max`` distinct messages were seen within ``similar_window``
  seconds of each other, further ones become a single event whose message is
  ``"(combined from similar events): <msg>"``;
* **de-duplication of identical events**: the first one is POSTed (``count: 1``), repeats PATCH the
  same object's ``count`` and ``lastTimestamp`` (a 404 on that patch creates the event anew);
* **spam filter**: a token bucket per source + involved object (``burst`` events, then one per
  ``refill_period`` seconds); events over it are dropped and counted.

A write that fails for lack of a server (connection failure, 429, 5xx) is tried ``retries`` times in
all, ``retry_interval`` apart (the first wait randomised, as client-go does, so that clients do not
retry in lockstep after an outage); the queue waits meanwhile. Any other refusal drops the event
with a log line. Dropped events are counted in ``koordinator_events_dropped_total{reason}`` with
reason ``queue_full``, ``spam`` or ``retries_exhausted``.

Events are written to the involved object's namespace, ``default`` for cluster-scoped objects.
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import time
from collections import OrderedDict, deque
from datetime import datetime, timezone
from typing import Any, Callable

from koordinator.runtime.errors import ApiError, ConnectionFailed, NotFound
from koordinator.runtime.metrics import RuntimeMetrics
from koordinator.runtime.ratelimit import TokenBucket

log = logging.getLogger("koordinator.runtime.events")

Obj = dict[str, Any]

NORMAL = "Normal"
WARNING = "Warning"
EVENT_TYPES = (NORMAL, WARNING)

#: Entries kept per correlation cache (client-go ``maxLruCacheEntries``).
LRU_SIZE = 4096
#: Longest message written; the events.k8s.io API refuses longer notes, so keep core/v1 the same.
MAX_MESSAGE = 1024
COMBINED_PREFIX = "(combined from similar events): "


class _LRU(OrderedDict):
    """A dict that forgets its least recently used entry beyond ``size`` entries (not thread-safe)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def lookup(self, key: str) -> Any:
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value

    def put(self, key: str, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.size:
            self.popitem(last=False)


def _timestamp(t: float) -> str:
    """metav1.Time: RFC 3339, whole seconds, UTC."""
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def object_reference(obj: Obj) -> Obj:
    """The ``involvedObject`` for ``obj``: an object (with ``metadata``) or already a reference."""
    if not isinstance(obj, dict):
        raise TypeError(f"event: the involved object must be a dict, got {type(obj).__name__}")
    md = obj.get("metadata")
    if isinstance(md, dict):
        ref = {"kind": obj.get("kind"), "namespace": md.get("namespace"), "name": md.get("name"),
               "uid": md.get("uid"), "apiVersion": obj.get("apiVersion"),
               "resourceVersion": md.get("resourceVersion")}
    else:
        fields = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        ref = {k: obj.get(k) for k in fields}
    ref = {k: v for k, v in ref.items() if v}
    if not ref.get("name"):
        raise ValueError("event: the involved object has no name (metadata.name)")
    if not ref.get("kind"):
        raise ValueError(f"event: the involved object {ref['name']!r} has no kind")
    return ref


def _join(*parts: Any) -> str:
    # client-go joins with "" too; a separator that cannot occur in names keeps keys unambiguous.
    return "\x00".join("" if p is None else str(p) for p in parts)


class EventRecorder:
    """Write core/v1 Events for ``component`` (``source.component``, ``reportingComponent``).

    ``host`` goes into ``source.host`` (kubelets put their node name there); ``reportingInstance``
    is ``host`` or, without one, this machine's hostname. Defaults are client-go's.
    """

    def __init__(self, client: Any, component: str, *, host: str | None = None,
                 metrics: RuntimeMetrics | None = None, queue_size: int = 1000, retries: int = 12,
                 retry_interval: float = 10.0, burst: int = 25, refill_period: float = 300.0,
                 similar_max: int = 10, similar_window: float = 600.0, request_timeout: float = 10.0,
                 clock: Callable[[], float] = time.time) -> None:
        if not component:
            raise ValueError("EventRecorder: component must not be empty")
        if queue_size < 1 or retries < 1 or similar_max < 1:
            raise ValueError("EventRecorder: queue_size, retries and similar_max must be >= 1")
        self.client = client
        self.component = component
        self.host = host
        self.metrics = metrics or RuntimeMetrics()
        self.queue_size = queue_size
        self.retries = retries
        self.retry_interval = retry_interval
        self.burst = burst
        self.refill_period = refill_period
        self.similar_max = similar_max
        self.similar_window = similar_window
        self.request_timeout = request_timeout
        self._clock = clock
        self._source: Obj = {"component": component, **({"host": host} if host else {})}
        self._instance = host or socket.gethostname()

        self._queue: deque[tuple[Obj, str, str, str, float]] = deque()
        self._cond = threading.Condition()
        self._stopping = False   # no new events; the worker drains and exits
        self._abort = threading.Event()   # stop's deadline passed: give up on what is left
        self._thread: threading.Thread | None = None
        self._last_ns = 0

        # Worker-thread state only (correlation runs on one thread, as in client-go).
        self._aggregates = _LRU(LRU_SIZE)    # aggregate key -> (set of messages, last seen)
        self._observed = _LRU(LRU_SIZE)      # event key -> {count, firstTimestamp, name, resourceVersion}
        self._spam = _LRU(LRU_SIZE)          # source+object -> TokenBucket

    # -- producer side -----------------------------------------------------------------

    def event(self, obj: Obj, type: str, reason: str, message: str) -> None:
        """Record an event about ``obj`` (an object or an ObjectReference). Never blocks.

        ``type`` must be ``Normal`` or ``Warning`` (ValueError otherwise).
        """
        if type not in EVENT_TYPES:
            raise ValueError(f"event type {type!r}: must be one of {', '.join(EVENT_TYPES)}")
        if not reason:
            raise ValueError("event reason must not be empty")
        ref = object_reference(obj)
        message = str(message)
        if len(message) > MAX_MESSAGE:
            message = message[:MAX_MESSAGE - 3] + "..."
        with self._cond:
            if self._stopping:
                log.debug("event after stop, not recorded reason=%s object=%s", reason, ref.get("name"))
                return
            if len(self._queue) >= self.queue_size:
                self.metrics.events_dropped_total.labels("queue_full").inc()
                log.warning("event queue full, dropping event reason=%s object=%s/%s", reason,
                            ref.get("namespace", ""), ref["name"])
                return
            self._queue.append((ref, type, reason, message, self._clock()))
            self._cond.notify()

    def eventf(self, obj: Obj, type: str, reason: str, fmt: str, *args: Any) -> None:
        """:meth:`event` with a %-format message (client-go ``Eventf``)."""
        self.event(obj, type, reason, fmt % args if args else fmt)

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Start the writer thread (events recorded before start wait in the queue)."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"event-recorder-{self.component}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop taking events and write what is queued, giving up at ``timeout`` seconds."""
        deadline = time.monotonic() + max(timeout, 0.0)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is None:
            return
        # Most of the budget for draining; the rest to abandon retries and exit.
        self._thread.join(max(timeout, 0.0) * 0.8)
        if self._thread.is_alive():
            self._abort.set()
            with self._cond:
                self._cond.notify_all()
            self._thread.join(max(deadline - time.monotonic(), 0.0))
        if self._thread.is_alive():
            log.warning("event recorder did not stop within %.1fs (a write is still in flight)", timeout)
        with self._cond:
            left = len(self._queue)
            self._queue.clear()
        if left:
            log.warning("event recorder stopped with %d events unwritten", left)

    def pending(self) -> int:
        """Events queued and not yet taken by the writer."""
        with self._cond:
            return len(self._queue)

    # -- worker ---------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue and not self._stopping:
                    self._cond.wait()
                if not self._queue or self._abort.is_set():
                    return
                item = self._queue.popleft()
            try:
                self._record(*item)
            except Exception:  # noqa: BLE001 - a bug here must not kill the writer
                log.exception("event recorder: unexpected error writing an event")

    def _make_event(self, ref: Obj, type: str, reason: str, message: str, t: float) -> Obj:
        return {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": self._event_name(ref["name"], t), "namespace": ref.get("namespace") or "default"},
            "involvedObject": ref, "reason": reason, "message": message, "type": type,
            "firstTimestamp": _timestamp(t), "lastTimestamp": _timestamp(t), "count": 1,
            "source": self._source, "reportingComponent": self.component, "reportingInstance": self._instance,
        }

    def _event_name(self, object_name: str, t: float) -> str:
        # client-go: "<name>.<hex UnixNano>"; kept strictly increasing so two events never collide.
        ns = max(int(t * 1e9), time.time_ns(), self._last_ns + 1)
        self._last_ns = ns
        return f"{object_name}.{ns:x}"

    def _record(self, ref: Obj, type: str, reason: str, message: str, t: float) -> None:
        event, key = self._aggregate(self._make_event(ref, type, reason, message, t), t)
        event, is_repeat = self._observe(event, key)
        if not self._allow(ref):
            self.metrics.events_dropped_total.labels("spam").inc()
            log.debug("event dropped by the spam filter reason=%s object=%s", reason, ref["name"])
            return
        for attempt in range(1, self.retries + 1):
            try:
                written = self._write(event, is_repeat)
            except ApiError as err:
                if not _retryable(err):
                    level = logging.DEBUG if err.reason == "AlreadyExists" else logging.ERROR
                    log.log(level, "server rejected event reason=%s object=%s (not retrying): %s",
                            reason, ref["name"], err)
                    return
                if attempt >= self.retries:
                    self.metrics.events_dropped_total.labels("retries_exhausted").inc()
                    log.error("unable to write event reason=%s object=%s after %d tries: %s",
                              reason, ref["name"], attempt, err)
                    return
                delay = self.retry_interval * (random.random() if attempt == 1 else 1.0)
                log.debug("event write failed, retrying in %.2fs attempt=%d: %s", delay, attempt, err)
                if self._abort.wait(delay):
                    return
                continue
            self._update_state(written, key)
            return

    def _write(self, event: Obj, is_repeat: bool) -> Obj:
        md = event["metadata"]
        if is_repeat:
            patch = {"count": event["count"], "lastTimestamp": event["lastTimestamp"], "message": event["message"]}
            try:
                return self.client.patch("Event", md["name"], patch, namespace=md["namespace"],
                                         patch_type="merge", timeout=self.request_timeout)
            except NotFound:
                pass  # deleted meanwhile (events expire): write it anew
        body = dict(event, metadata={k: v for k, v in md.items() if k != "resourceVersion"})
        return self.client.create(body, timeout=self.request_timeout)

    # -- correlation (client-go EventCorrelator) --------------------------------------

    def _aggregate(self, event: Obj, now: float) -> tuple[Obj, str]:
        """EventAggregate: the event itself, or the combined event once too many similar ones were seen."""
        ref = event["involvedObject"]
        aggregate_key = _join(self._source.get("component"), self._source.get("host"), ref.get("kind"),
                              ref.get("namespace"), ref.get("name"), ref.get("uid"), ref.get("apiVersion"),
                              event["type"], event["reason"], event["reportingComponent"],
                              event["reportingInstance"])
        record = self._aggregates.lookup(aggregate_key)
        if record is None or now - record[1] > self.similar_window:
            record = (set(), now)
        messages = record[0]
        messages.add(event["message"])
        self._aggregates.put(aggregate_key, (messages, now))
        if len(messages) < self.similar_max:
            return event, self._event_key(event)
        messages.pop()  # as client-go's PopAny: keep the set below the limit
        combined = dict(event, message=COMBINED_PREFIX + event["message"])
        combined["metadata"] = dict(event["metadata"], name=self._event_name(ref["name"], now))
        return combined, aggregate_key

    @staticmethod
    def _event_key(event: Obj) -> str:
        ref, source = event["involvedObject"], event["source"]
        return _join(source.get("component"), source.get("host"), ref.get("kind"), ref.get("namespace"),
                     ref.get("name"), ref.get("fieldPath"), ref.get("uid"), ref.get("apiVersion"), event["type"],
                     event["reason"], event["message"])

    def _observe(self, event: Obj, key: str) -> tuple[Obj, bool]:
        """eventObserve: a repeat of an event already written becomes an update of that object."""
        last = self._observed.lookup(key)
        if last is not None and last["count"] > 0:
            event = dict(event, count=last["count"] + 1, firstTimestamp=last["firstTimestamp"])
            event["metadata"] = dict(event["metadata"], name=last["name"])
            if last.get("resourceVersion"):
                event["metadata"]["resourceVersion"] = last["resourceVersion"]
            repeat = True
        else:
            repeat = False
        self._observed.put(key, {"count": event["count"], "firstTimestamp": event["firstTimestamp"],
                                 "name": event["metadata"]["name"],
                                 "resourceVersion": event["metadata"].get("resourceVersion")})
        return event, repeat

    def _update_state(self, written: Any, key: str) -> None:
        """UpdateState: remember the server's name/resourceVersion/count for the next repeat."""
        if not isinstance(written, dict):
            return
        md = written.get("metadata") or {}
        self._observed.put(key, {"count": int(written.get("count") or 1),
                                 "firstTimestamp": written.get("firstTimestamp"), "name": md.get("name"),
                                 "resourceVersion": md.get("resourceVersion")})

    def _allow(self, ref: Obj) -> bool:
        """EventSourceObjectSpamFilter: a token bucket per source and involved object."""
        key = _join(self._source.get("component"), self._source.get("host"), ref.get("kind"),
                    ref.get("namespace"), ref.get("name"), ref.get("uid"), ref.get("apiVersion"))
        bucket = self._spam.lookup(key)
        if bucket is None:
            qps = 1.0 / self.refill_period if self.refill_period > 0 else 0.0
            bucket = TokenBucket(qps, self.burst)
            self._spam.put(key, bucket)
        return bucket.try_take()


def _retryable(err: ApiError) -> bool:
    """Worth another try: no server answered, or it was overloaded or failing."""
    return isinstance(err, ConnectionFailed) or err.status == 429 or err.status >= 500
