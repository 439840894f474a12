"""kube-scheduler's Prometheus metric families, on the Runtime's registry.

Names, labels, help texts and buckets follow ``pkg/scheduler/metrics/metrics.go`` so that
existing scheduler dashboards and alerts work unchanged:

=================================================================  ===========================================
family                                                             labels / buckets
=================================================================  ===========================================
``scheduler_schedule_attempts_total`` (counter)                    result (scheduled|unschedulable|error), profile
``scheduler_scheduling_attempt_duration_seconds`` (histogram)      result, profile; 0.001 × 2^i, 15 buckets
``scheduler_pending_pods`` (gauge)                                 queue (active|backoff|unschedulable|gated)
``scheduler_pod_scheduling_sli_duration_seconds`` (histogram)      attempts ("1".."14", "15+"); 0.01 × 2^i, 20
``scheduler_queue_incoming_pods_total`` (counter)                  queue, event
``scheduler_preemption_attempts_total`` (counter)                  –
``scheduler_preemption_victims`` (histogram)                       1 × 2^i, 7 buckets
``scheduler_framework_extension_point_duration_seconds`` (hist.)   extension_point, status, profile;
                                                                   0.0001 × 2^i, 12 buckets
=================================================================  ===========================================
"""

from __future__ import annotations

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Go's client_golang emits no *_created series; match its exposition.
prometheus_client.disable_created_metrics()

QUEUES = ("active", "backoff", "unschedulable", "gated")

#: Attempts at or above this share one label value, as kube's getAttemptsLabel does (cardinality).
ATTEMPTS_LABEL_CAP = 15


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """component-base's ExponentialBuckets(start, factor, count)."""
    return tuple(start * factor ** i for i in range(count))


ATTEMPT_DURATION_BUCKETS = exponential_buckets(0.001, 2, 15)
SLI_DURATION_BUCKETS = exponential_buckets(0.01, 2, 20)
PREEMPTION_VICTIMS_BUCKETS = exponential_buckets(1, 2, 7)
EXTENSION_POINT_BUCKETS = exponential_buckets(0.0001, 2, 12)


def attempts_label(attempts: int) -> str:
    """The ``attempts`` label value of the SLI histogram ("15+" from 15 attempts on)."""
    return f"{ATTEMPTS_LABEL_CAP}+" if attempts >= ATTEMPTS_LABEL_CAP else str(attempts)


class SchedulerMetrics:
    """The scheduler's metric families on one ``CollectorRegistry`` (the Runtime's, or a private one)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry
        self.schedule_attempts_total = Counter(
            "scheduler_schedule_attempts_total",
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ("result", "profile"), registry=r)
        self.scheduling_attempt_duration_seconds = Histogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ("result", "profile"), buckets=ATTEMPT_DURATION_BUCKETS, registry=r)
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' "
            "means number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that "
            "the scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that "
            "the scheduler never attempted to schedule because they are gated.",
            ("queue",), registry=r)
        self.pod_scheduling_sli_duration_seconds = Histogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and "
            "might involve multiple scheduling attempts.",
            ("attempts",), buckets=SLI_DURATION_BUCKETS, registry=r)
        self.queue_incoming_pods_total = Counter(
            "scheduler_queue_incoming_pods_total",
            "Number of pods added to scheduling queues by event and queue type.",
            ("queue", "event"), registry=r)
        self.preemption_attempts_total = Counter(
            "scheduler_preemption_attempts_total",
            "Total preemption attempts in the cluster till now", registry=r)
        self.preemption_victims = Histogram(
            "scheduler_preemption_victims", "Number of selected preemption victims",
            buckets=PREEMPTION_VICTIMS_BUCKETS, registry=r)
        self.framework_extension_point_duration_seconds = Histogram(
            "scheduler_framework_extension_point_duration_seconds",
            "Latency for running all plugins of a specific extension point.",
            ("extension_point", "status", "profile"), buckets=EXTENSION_POINT_BUCKETS, registry=r)
        # Children resolved once: labels() takes a lock and builds a tuple on every call.
        self._pending = {q: self.pending_pods.labels(q) for q in QUEUES}
        for child in self._pending.values():
            child.set(0)

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt ended: result is scheduled, unschedulable or error."""
        self.schedule_attempts_total.labels(result, profile).inc()
        self.scheduling_attempt_duration_seconds.labels(result, profile).observe(seconds)

    def observe_sli(self, attempts: int, seconds: float) -> None:
        """A pod was scheduled ``seconds`` after it entered the queue, after ``attempts`` attempts."""
        self.pod_scheduling_sli_duration_seconds.labels(attempts_label(attempts)).observe(seconds)

    def set_pending(self, counts: dict[str, int]) -> None:
        """The queue's sizes by label (active, backoff, unschedulable, gated)."""
        for queue, n in counts.items():
            child = self._pending.get(queue)
            if child is None:
                child = self._pending[queue] = self.pending_pods.labels(queue)
            child.set(n)

    def incoming(self, queue: str, event: str) -> None:
        """A pod entered ``queue`` because of ``event`` (PodAdd, ScheduleAttemptFailure, NodeAdd, ...)."""
        self.queue_incoming_pods_total.labels(queue, event).inc()

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        """All plugins of one extension point ran; status is the code name (Success, Unschedulable, ...)."""
        self.framework_extension_point_duration_seconds.labels(point, status, profile).observe(seconds)

    def preemption(self, victims: int) -> None:
        """One preemption attempt that selected ``victims`` pods."""
        self.preemption_attempts_total.inc()
        self.preemption_victims.observe(victims)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format."""
        return prometheus_client.generate_latest(self.registry)
