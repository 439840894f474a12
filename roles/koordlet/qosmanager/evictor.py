"""Eviction execution (reference A.7.5, Koordinator ``qosmanager/framework/evictor.go`` and ``helpers/evict``).

The triggers (:mod:`.cpuevict`, :mod:`.memoryevict`) decide; this module acts. A decision is a list
of :class:`EvictTask`: a feature, a *target* (what is counted: ``cpu-used``, ``batch-cpu-request`` ...),
a demand in that target's unit and the victims in order, each with what it would release.
:meth:`Evictor.execute` walks the tasks in order:

- a task whose target already has enough released (by an earlier task) is skipped;
- a pod handled by an earlier task is not tried twice; a pod evicted in the last two minutes
  (Koordinator's evicted-pod cache) counts as released without a new call;
- a pod's releases are the maximum over the tasks naming it, per target, so a pod in two tasks is
  not counted twice;
- the eviction is a ``pods/eviction`` POST with the pod's UID as precondition. The API server
  enforces PodDisruptionBudgets: a 429 means this victim is skipped (logged, ``EvictPodFail``
  event) and the next one is tried.

Safety net: whatever a trigger hands over, a pod that is not of BE class
(:func:`~.evictpods.is_be_class`) is never evicted; it is logged as a bug.

Rate limits: each strategy has its cool-down (CPU 20 s, memory 4 s, reference A.2.5) after a round
that evicted something. On top of Koordinator, a pod whose eviction failed is not tried again
before a per-pod back-off (5 s doubling to 5 min), so a PodDisruptionBudget that forbids it does not
cost an API call and an event every second.

Koordinator by default kills the containers through the CRI (``--only-evict-by-api=false``); this
build has no CRI client and always uses the eviction API (what ``--only-evict-by-api=true`` does).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from koordinator.runtime import errors
from koordinator_roles.koordlet.qosmanager.evictpods import WarnOnce, is_be_class, pod_key, pod_uid
from koordinator_roles.koordlet.qosmanager.framework import Strategy

log = logging.getLogger("koordinator.koordlet.qosmanager")

EVICT_POD_SUCCESS = "EvictPodSuccess"
EVICT_POD_FAIL = "EvictPodFail"
EVICTED_CACHE_SECONDS = 120.0   # Koordinator's expire cache default (pkg/util/cache)
FAIL_BACKOFF_BASE = 5.0
FAIL_BACKOFF_CAP = 300.0


def reason_for(feature: str) -> str:
    """Koordinator's eviction reason string."""
    return f"trigger by koordlet feature {feature}"


@dataclass(frozen=True)
class Victim:
    """A pod a task may evict and what evicting it releases, per target (target → amount)."""

    pod: Mapping[str, Any]
    releases: Mapping[str, float]

    @property
    def uid(self) -> str:
        return pod_uid(self.pod)

    @property
    def key(self) -> str:
        return pod_key(self.pod)


@dataclass
class EvictTask:
    """One trigger's decision: release ``demand`` of ``target`` by evicting ``victims`` in order."""

    feature: str
    target: str
    demand: float
    victims: list[Victim] = field(default_factory=list)
    message: str = ""

    @property
    def reason(self) -> str:
        return reason_for(self.feature)


@dataclass
class ExecutionResult:
    """What :meth:`Evictor.execute` did: pods newly evicted (``ns/name``), failures, and the released totals."""

    evicted: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    released: dict[str, float] = field(default_factory=dict)


class Evictor:
    """Evicts pods through the API (``client.evict``) and records Koordinator's events.

    ``events`` returns the event recorder (or None); ``clock`` gives seconds (monotonic is enough).
    Thread-safe: the CPU and memory strategies run on their own threads and share one evictor, as
    they share Koordinator's evicted-pod cache.
    """

    def __init__(self, client: Any, events: Callable[[], Any] | None = None, *,
                 clock: Callable[[], float] = time.monotonic, evicted_ttl: float = EVICTED_CACHE_SECONDS,
                 fail_backoff_base: float = FAIL_BACKOFF_BASE, fail_backoff_cap: float = FAIL_BACKOFF_CAP) -> None:
        self.client = client
        self.events = events
        self.clock = clock
        self.evicted_ttl = evicted_ttl
        self.fail_backoff_base = fail_backoff_base
        self.fail_backoff_cap = fail_backoff_cap
        self._lock = threading.Lock()
        self._evicted: dict[str, float] = {}          # uid -> expiry
        self._failures: dict[str, tuple[int, float]] = {}   # uid -> (failures in a row, next try)

    # -- the caches ------------------------------------------------------------------------------

    def recently_evicted(self, uid: str) -> bool:
        """Whether ``uid`` was evicted within the evicted-cache TTL."""
        now = self.clock()
        with self._lock:
            expiry = self._evicted.get(uid)
            if expiry is None:
                return False
            if expiry <= now:
                del self._evicted[uid]
                return False
            return True

    def backing_off(self, uid: str) -> float:
        """Seconds until ``uid`` may be tried again after a failed eviction (0: now)."""
        with self._lock:
            entry = self._failures.get(uid)
        if entry is None:
            return 0.0
        return max(entry[1] - self.clock(), 0.0)

    def _mark_evicted(self, uid: str) -> None:
        now = self.clock()
        with self._lock:
            self._failures.pop(uid, None)
            self._evicted[uid] = now + self.evicted_ttl
            # The cache holds at most the pods of a few minutes; drop what expired on the way.
            for k in [k for k, t in self._evicted.items() if t <= now]:
                del self._evicted[k]

    def _mark_failed(self, uid: str) -> float:
        now = self.clock()
        with self._lock:
            n = self._failures.get(uid, (0, 0.0))[0] + 1
            delay = min(self.fail_backoff_base * 2 ** (n - 1), self.fail_backoff_cap)
            self._failures[uid] = (n, now + delay)
            return delay

    # -- execution -------------------------------------------------------------------------------

    def execute(self, tasks: Sequence[EvictTask]) -> ExecutionResult:
        """Run ``tasks`` in order (see the module docstring); what was evicted and released."""
        result = ExecutionResult()
        released = result.released
        releases = _merged_releases(tasks)
        handled: set[str] = set()
        for task in tasks:
            if released.get(task.target, 0.0) >= task.demand:
                log.debug("evict task %s: %s already released %.0f >= %.0f", task.feature, task.target,
                          released.get(task.target, 0.0), task.demand)
                continue
            for victim in task.victims:
                if released.get(task.target, 0.0) >= task.demand:
                    break
                uid = victim.uid
                if not uid or uid in handled:
                    continue
                handled.add(uid)
                if self._evict_one(task, victim, result):
                    for target, amount in releases.get(uid, victim.releases).items():
                        released[target] = released.get(target, 0.0) + amount
            if released.get(task.target, 0.0) < task.demand:
                log.info("evict task %s: released %.0f of %.0f %s; no more victims", task.feature,
                         released.get(task.target, 0.0), task.demand, task.target)
        return result

    def _evict_one(self, task: EvictTask, victim: Victim, result: ExecutionResult) -> bool:
        """True when the pod counts as released (evicted now, recently, or already gone)."""
        pod, uid, key = victim.pod, victim.uid, victim.key
        if not is_be_class(pod):
            log.error("evict task %s chose pod %s which is not of BE class; refused", task.feature, key)
            return False
        if self.recently_evicted(uid):
            log.debug("pod %s already evicted; counted as released", key)
            return True
        wait = self.backing_off(uid)
        if wait > 0:
            log.debug("pod %s: last eviction failed, next try in %.1fs", key, wait)
            return False
        if self.client is None:
            log.error("evict pod %s: no API client to evict with; reason: %s", key, task.reason)
            return False
        ns, name = (pod.get("metadata") or {}).get("namespace", ""), (pod.get("metadata") or {}).get("name", "")
        message = f"evict Pod:{key}, reason: {task.reason}, message: {task.message}"
        try:
            self.client.evict(name, ns, delete_options={"preconditions": {"uid": uid}})
        except errors.NotFound:
            # Gone already (deleted, or evicted by someone else): what it used is free.
            log.info("pod %s already gone; counted as released, reason: %s", key, task.reason)
            self._mark_evicted(uid)
            return True
        except errors.ApiError as err:
            delay = self._mark_failed(uid)
            why = "a PodDisruptionBudget forbids it" if isinstance(err, errors.TooManyRequests) else str(err)
            log.warning("evict pod %s failed (%s); trying the next victim, this one again in %.0fs, reason: %s",
                        key, why, delay, task.reason)
            self._event(pod, EVICT_POD_FAIL, f"{message}, error {err}")
            result.failed.append(key)
            return False
        self._mark_evicted(uid)
        log.info("evict pod %s success, reason: %s, message: %s", key, task.reason, task.message)
        self._event(pod, EVICT_POD_SUCCESS, message)
        result.evicted.append(key)
        return True

    def _event(self, pod: Mapping[str, Any], reason: str, message: str) -> None:
        recorder = self.events() if self.events is not None else None
        if recorder is None:
            return
        md = pod.get("metadata") or {}
        ref = {"kind": "Pod", "apiVersion": "v1", "namespace": md.get("namespace"), "name": md.get("name"),
               "uid": md.get("uid")}
        recorder.event(ref, "Warning", reason, message)


def _merged_releases(tasks: Sequence[EvictTask]) -> dict[str, dict[str, float]]:
    """Per pod UID, the maximum release per target over every task naming it."""
    out: dict[str, dict[str, float]] = {}
    for task in tasks:
        for victim in task.victims:
            merged = out.setdefault(victim.uid, {})
            for target, amount in victim.releases.items():
                merged[target] = max(merged.get(target, 0.0), amount)
    return out


_shared_lock = threading.Lock()


def shared_evictor(ctx: Any) -> Evictor:
    """The one :class:`Evictor` of a QoS context (CPU and memory eviction share its caches)."""
    with _shared_lock:
        evictor = getattr(ctx, "_evictor", None)
        if evictor is None:
            evictor = Evictor(ctx.client, ctx.events, clock=ctx.clock)
            ctx._evictor = evictor
        return evictor


class EvictStrategy(Strategy):
    """What the CPU and memory eviction strategies share: their gates (:attr:`features`, any one on
    runs the strategy), the cool-down after a round that evicted (counted from koordlet start too, as
    Koordinator does: nothing is evicted in the first ``cool_time`` seconds) and the node's one
    :class:`Evictor`. A subclass gives :attr:`interval`, :attr:`cool_time` and :meth:`decide`."""

    features: tuple[str, ...] = ()

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.last_evict = ctx.clock()
        self.warn = WarnOnce(f"qos strategy {self.name}")

    @property
    def cool_time(self) -> float:
        raise NotImplementedError

    @property
    def collect_interval(self) -> float:
        return self.ctx.options.collect_interval

    def enabled(self) -> bool:
        return self.interval > 0 and any(self.ctx.gates.get(f) for f in self.features)

    def decide(self, now: float) -> list[EvictTask]:
        """The tasks of every enabled trigger, in Koordinator's order, from the current figures."""
        raise NotImplementedError

    def run_once(self) -> None:
        now = self.ctx.clock()
        if now - self.last_evict < self.cool_time:
            return
        tasks = self.decide(now)
        if tasks and shared_evictor(self.ctx).execute(tasks).evicted:
            self.last_evict = now
