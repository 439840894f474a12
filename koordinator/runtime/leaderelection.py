"""Leader election over a ``coordination.k8s.io/v1`` Lease, with client-go's semantics.

Candidates share one Lease; the holder renews it every ``retry_period``. The rules that make it
safe (reference runtime.md §1.4):

- **Take-over only after a full lease duration observed locally.** A candidate remembers the
  Lease record (its ``spec``) and the time *on its own monotonic clock* when it last saw the record
  change; it may take a Lease held by someone else only once the record's ``leaseDurationSeconds``
  have passed since then. ``renewTime`` written in the Lease is never compared with our clock, so
  clock skew between machines does not matter.
- **Optimistic concurrency decides races.** Every write is a PUT carrying the resourceVersion of
  the Lease read before it (or a create when there is none); a 409 means someone else wrote first
  and we try again next round.
- **A leader that cannot renew steps down before anyone may take over.** If ``renew_deadline``
  passes since the *start* of the last successful renewal, leadership is lost:
  ``on_stopped_leading`` runs (it must stop leader-gated work) and :meth:`LeaderElector.run`
  returns. Each request's timeout is bounded by the time left to that deadline and, while leading,
  a request still running at the deadline is abandoned (client-side throttling and retry backoff
  included), so a server that hangs or refuses cannot keep us past it. Another candidate waits at
  least ``lease_duration`` after our last successful write, leaving ``lease_duration -
  renew_deadline`` for the gated work to stop.
- **Release on a clean stop, after the work has stopped.** When ``stop`` is set while leading,
  ``on_stopped_leading`` runs first (in a helper thread while this thread keeps renewing, so a
  slow drain cannot let the Lease expire under still-running work); only when it has returned is
  the Lease released (``holderIdentity: ""``, ``leaseDurationSeconds: 1``, transitions kept), and
  a standby takes over at its next retry. client-go releases before the callback; we do not.

Callback contract (it differs from client-go on purpose):

- ``on_started_leading()`` runs in the thread that called :meth:`run`, right after the Lease was
  acquired; it must start the gated work and return promptly (renewals wait for it).
- ``on_stopped_leading()`` is called exactly once for each ``on_started_leading()`` — when
  leadership is lost, when ``stop`` is set while leading, or when :meth:`run` exits through an
  unexpected error while leading. It is **not** called when :meth:`run` ends without ever having
  led (client-go calls it on every exit); calling "stop the gated work" when nothing was started
  is therefore never needed. It must return only once the gated work has stopped. On a requested
  stop it runs in a helper thread (``leader-election-stop-<name>``), otherwise in the run thread.
  After :meth:`run` returns, :attr:`LeaderElector.lost_leadership` tells a loss (kube components
  exit non-zero) from a requested stop.
- ``on_new_leader(identity)`` is called (in the :meth:`run` thread) whenever the observed holder
  changes to a different non-empty identity, ours included.

Exceptions raised by callbacks are logged and otherwise ignored, except that a failing
``on_stopped_leading`` prevents the release (the gated work may still be running).
"""

from __future__ import annotations

import copy
import datetime
import logging
import math
import random
import threading
import time
from typing import Any, Callable

from koordinator.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
from koordinator.runtime.metrics import RuntimeMetrics

log = logging.getLogger("koordinator.runtime.leaderelection")

#: client-go's JitterFactor: renew_deadline must exceed retry_period by this factor.
JITTER_FACTOR = 1.2

Obj = dict[str, Any]


def micro_time(when: float | None = None) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with exactly 6 fractional digits."""
    moment = datetime.datetime.fromtimestamp(time.time() if when is None else when, datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """One candidate in the election for Lease ``namespace/name`` (see the module docstring)."""

    def __init__(self, client: Any, *, namespace: str, name: str, identity: str, lease_duration: float = 15.0,
                 renew_deadline: float = 10.0, retry_period: float = 2.0,
                 on_started_leading: Callable[[], None], on_stopped_leading: Callable[[], None],
                 on_new_leader: Callable[[str], None] | None = None, release_on_cancel: bool = True,
                 metrics: RuntimeMetrics | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        if not identity:
            raise ValueError(f"leader election identity must be non-empty, got {identity!r}")
        if not namespace:
            raise ValueError(f"leader election namespace must be non-empty, got {namespace!r}")
        if not name:
            raise ValueError(f"leader election name (the Lease name) must be non-empty, got {name!r}")
        if not retry_period > 0:
            raise ValueError(f"leader election retry_period must be > 0, got {retry_period}")
        if not lease_duration > renew_deadline:
            raise ValueError(f"leader election lease_duration ({lease_duration}) must be greater than "
                             f"renew_deadline ({renew_deadline})")
        if not renew_deadline > JITTER_FACTOR * retry_period:
            raise ValueError(f"leader election renew_deadline ({renew_deadline}) must be greater than "
                             f"{JITTER_FACTOR} x retry_period ({retry_period}) = {JITTER_FACTOR * retry_period:g}")
        if not callable(on_started_leading) or not callable(on_stopped_leading):
            raise ValueError("leader election on_started_leading and on_stopped_leading must be callables")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = float(lease_duration)
        self.renew_deadline = float(renew_deadline)
        self.retry_period = float(retry_period)
        self.release_on_cancel = release_on_cancel
        self.metrics = metrics or RuntimeMetrics()
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._clock = clock
        # The Lease stores whole seconds; round up so others never wait less than we promise.
        self._lease_seconds = max(1, math.ceil(self.lease_duration))

        self._leader = False
        self.leader_identity: str | None = None
        #: True when the last :meth:`run` ended because renewal failed (not because stop was set).
        self.lost_leadership = False
        self._lease: Obj | None = None            # the last Lease read or written (its resourceVersion)
        self._observed_record: Obj | None = None  # its spec, as last seen changing
        self._observed_time = 0.0                 # local clock when the record was last seen changing
        self._renewed_at = 0.0                    # local clock at the start of the last successful write
        self._status = self.metrics.leader_election_master_status.labels(name)
        self._slowpath = self.metrics.leader_election_slowpath_total.labels(name)
        self._status.set(0)

    # -- public -------------------------------------------------------------------------

    def is_leader(self) -> bool:
        """Whether this candidate currently holds the Lease (and its gated work may run)."""
        return self._leader

    def run(self, stop: threading.Event) -> None:
        """Campaign until ``stop`` is set or leadership is lost; blocks (run it in its own thread)."""
        self.lost_leadership = False
        started = False
        try:
            if not self._acquire(stop):
                return
            if stop.is_set():
                # Acquired while shutting down: never start the work, hand the Lease straight back.
                if self.release_on_cancel:
                    self._release()
                return
            self._set_leader(True)
            log.info("lease acquired name=%s/%s identity=%s", self.namespace, self.name, self.identity)
            started = True
            self._callback("on_started_leading", self._on_started)
            if self._renew(stop):
                started = False
                self._stop_while_holding()
            else:
                started = False
                self._set_leader(False)
                self.lost_leadership = True
                log.info("lease lost name=%s/%s identity=%s: not renewed within renew_deadline=%gs",
                         self.namespace, self.name, self.identity, self.renew_deadline)
                self._callback("on_stopped_leading", self._on_stopped)
        finally:
            if started:  # an unexpected error escaped while leading: the work must not outlive us
                self._set_leader(False)
                self._callback("on_stopped_leading", self._on_stopped)
            self._set_leader(False)

    # -- loops --------------------------------------------------------------------------

    def _acquire(self, stop: threading.Event) -> bool:
        """Try every retry_period (x1.0..1.2 jitter) until the Lease is ours; False if stopped first."""
        log.info("attempting to acquire lease name=%s/%s identity=%s", self.namespace, self.name, self.identity)
        while not stop.is_set():
            began = self._clock()
            if self._try_acquire_or_renew(began + self.renew_deadline):
                self._renewed_at = began
                return True
            if stop.wait(self.retry_period * random.uniform(1.0, JITTER_FACTOR)):
                return False
        return False

    def _renew(self, until: threading.Event) -> bool:
        """Renew every retry_period until ``until`` is set (True) or the renew deadline passes (False)."""
        while True:
            if until.wait(self.retry_period):
                return True
            deadline = self._renewed_at + self.renew_deadline
            while True:
                began = self._clock()
                if began >= deadline:
                    return False
                if self._try_acquire_or_renew(deadline):
                    self._renewed_at = began
                    break
                pause = min(self.retry_period, deadline - self._clock())
                if pause > 0 and until.wait(pause):
                    return True

    def _stop_while_holding(self) -> None:
        """``stop`` was set while leading: stop the gated work (keeping the Lease fresh), then release."""
        done = threading.Event()
        outcome = {"ok": False}

        def stop_work() -> None:
            try:
                outcome["ok"] = self._callback("on_stopped_leading", self._on_stopped)
            finally:
                done.set()

        stopper = threading.Thread(target=stop_work, name=f"leader-election-stop-{self.name}", daemon=True)
        stopper.start()
        held = self._renew(done)
        if not held:
            self._set_leader(False)
            self.lost_leadership = True
            log.error("lease lost name=%s/%s identity=%s while leader-gated work was still stopping",
                      self.namespace, self.name, self.identity)
        stopper.join()
        if held and outcome["ok"] and self.release_on_cancel:
            self._release()
        self._set_leader(False)

    # -- one attempt --------------------------------------------------------------------

    def _try_acquire_or_renew(self, deadline: float) -> bool:
        """One round of client-go's tryAcquireOrRenew; every request ends by ``deadline`` (local clock)."""
        try:
            return self._attempt(deadline)
        except (Conflict, AlreadyExists) as err:
            log.debug("lease write lost a race name=%s/%s: %s", self.namespace, self.name, err)
        except _DeadlinePassed:
            log.debug("lease attempt out of time name=%s/%s", self.namespace, self.name)
        except ApiError as err:
            log.warning("lease request failed name=%s/%s identity=%s: %s", self.namespace, self.name,
                        self.identity, err)
        return False

    def _attempt(self, deadline: float) -> bool:
        def call(method: Callable[..., Obj], *args: Any) -> Obj:
            return self._request(deadline, method, *args)

        # Fast path: we lead and our view is current, so PUT on the cached resourceVersion.
        if self._leader and self._lease is not None and self._clock() < self._observed_time + self.lease_duration:
            lease = copy.deepcopy(self._lease)
            spec = lease.setdefault("spec", {})
            spec.update(holderIdentity=self.identity, leaseDurationSeconds=self._lease_seconds,
                        renewTime=micro_time())
            try:
                self._observe(call(self.client.update, lease))
                return True
            except ApiError as err:
                log.debug("optimistic lease renewal failed name=%s/%s, taking the slow path: %s",
                          self.namespace, self.name, err)
            self._slowpath.inc()

        try:
            current = call(self.client.get, "Lease", self.name, self.namespace)
        except NotFound:
            now = micro_time()
            fresh = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                     "metadata": {"name": self.name, "namespace": self.namespace},
                     "spec": {"holderIdentity": self.identity, "leaseDurationSeconds": self._lease_seconds,
                              "acquireTime": now, "renewTime": now, "leaseTransitions": 0}}
            self._observe(call(self.client.create, fresh))
            return True

        spec = current.get("spec") or {}
        self._lease = current
        if spec != self._observed_record:
            self._observed_record = copy.deepcopy(spec)
            self._observed_time = self._clock()
        holder = spec.get("holderIdentity") or ""
        self._report(holder)
        duration = spec.get("leaseDurationSeconds")
        if not isinstance(duration, (int, float)) or duration <= 0:
            duration = self.lease_duration
        if holder and holder != self.identity and self._observed_time + duration > self._clock():
            return False

        now = micro_time()
        new_spec = dict(spec, holderIdentity=self.identity, leaseDurationSeconds=self._lease_seconds, renewTime=now)
        if holder == self.identity:
            new_spec.setdefault("acquireTime", now)
            new_spec.setdefault("leaseTransitions", 0)
        else:
            new_spec["acquireTime"] = now
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        self._observe(call(self.client.update, dict(current, spec=new_spec)))
        return True

    def _request(self, deadline: float, method: Callable[..., Obj], *args: Any) -> Obj:
        """``method(*args, timeout=...)``, given up (:class:`_DeadlinePassed`) at ``deadline``.

        While leading, the deadline is what keeps two leaders from acting at once, so it must hold
        whatever the client does below the request timeout (client-side throttling, retry backoff
        after refused connections): the call runs in a helper thread that is abandoned at the
        deadline. It ends by itself soon after, its request timeout being the same deadline.
        """
        remaining = deadline - self._clock()
        if remaining <= 0:
            raise _DeadlinePassed()
        if not self._leader:
            return method(*args, timeout=remaining)
        outcome: dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                outcome["value"] = method(*args, timeout=remaining)
            except BaseException as err:  # handed to the waiting thread
                outcome["error"] = err
            finally:
                done.set()

        threading.Thread(target=call, name=f"leader-election-request-{self.name}", daemon=True).start()
        if not done.wait(remaining):
            raise _DeadlinePassed()
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    def _release(self) -> None:
        """Hand the Lease back: empty holder, 1 s duration, transitions kept (our resourceVersion only)."""
        if self._lease is None:
            return
        lease = copy.deepcopy(self._lease)
        spec = lease.setdefault("spec", {})
        if spec.get("holderIdentity") != self.identity:
            return
        now = micro_time()
        spec.update(holderIdentity="", leaseDurationSeconds=1, acquireTime=now, renewTime=now)
        try:
            self._observe(self.client.update(lease, timeout=self.renew_deadline))
            log.info("lease released name=%s/%s identity=%s", self.namespace, self.name, self.identity)
        except ApiError as err:
            log.warning("lease release failed name=%s/%s identity=%s (it will expire instead): %s",
                        self.namespace, self.name, self.identity, err)

    # -- bookkeeping --------------------------------------------------------------------

    def _observe(self, lease: Obj) -> None:
        """Remember a Lease we just wrote successfully: a record change seen now."""
        self._lease = lease
        spec = lease.get("spec") or {}
        self._observed_record = copy.deepcopy(spec)
        self._observed_time = self._clock()
        self._report(spec.get("holderIdentity") or "")

    def _report(self, holder: str) -> None:
        if holder == (self.leader_identity or ""):
            return
        self.leader_identity = holder or None
        if not holder:
            return
        if holder != self.identity:
            log.info("new leader observed name=%s/%s leader=%s", self.namespace, self.name, holder)
        if self._on_new_leader is not None:
            self._callback("on_new_leader", self._on_new_leader, holder)

    def _set_leader(self, leader: bool) -> None:
        self._leader = leader
        self._status.set(1 if leader else 0)

    def _callback(self, what: str, fn: Callable[..., None], *args: Any) -> bool:
        try:
            fn(*args)
            return True
        except Exception:
            log.exception("leader election callback %s failed name=%s/%s", what, self.namespace, self.name)
            return False


class _DeadlinePassed(Exception):
    """No time left for another request in this attempt."""
