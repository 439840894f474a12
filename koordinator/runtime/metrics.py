"""Every Prometheus metric family the runtime exports, on one registry per Runtime.

Names and labels follow client-go / controller-runtime (reference runtime.md §1.6), so existing
dashboards and alerts work unchanged. ``prometheus_client.disable_created_metrics()`` is called
at import so the exposition carries no ``*_created`` series, as the Go libraries do.

Attributes of :class:`RuntimeMetrics` (attribute -> exposed family, labels):

workqueue (labels ``name``, ``controller``; ``controller`` defaults to the queue name):
    ``workqueue_depth``                              -> workqueue_depth (gauge)
    ``workqueue_adds_total``                         -> workqueue_adds_total (counter)
    ``workqueue_queue_duration_seconds``             -> workqueue_queue_duration_seconds (histogram)
    ``workqueue_work_duration_seconds``              -> workqueue_work_duration_seconds (histogram)
    ``workqueue_unfinished_work_seconds``            -> workqueue_unfinished_work_seconds (gauge)
    ``workqueue_longest_running_processor_seconds``  -> workqueue_longest_running_processor_seconds (gauge)
    ``workqueue_retries_total``                      -> workqueue_retries_total (counter)

controller (label ``controller``):
    ``reconcile_total``                  -> controller_runtime_reconcile_total{controller,result}
                                            (result: success|error|requeue|requeue_after)
    ``reconcile_errors_total``           -> controller_runtime_reconcile_errors_total
    ``reconcile_panics_total``           -> controller_runtime_reconcile_panics_total
    ``terminal_reconcile_errors_total``  -> controller_runtime_terminal_reconcile_errors_total
    ``reconcile_time_seconds``           -> controller_runtime_reconcile_time_seconds (histogram)
    ``max_concurrent_reconciles``        -> controller_runtime_max_concurrent_reconciles (gauge)
    ``active_workers``                   -> controller_runtime_active_workers (gauge)

leader election (label ``name``):
    ``leader_election_master_status``    -> leader_election_master_status (gauge 1/0)
    ``leader_election_slowpath_total``   -> leader_election_slowpath_total (counter)

client:
    ``rest_client_requests_total``            -> rest_client_requests_total{code,method,host}
    ``rest_client_request_duration_seconds``  -> rest_client_request_duration_seconds{verb,host}

config sources (label ``source``):
    ``config_reloads_total``             -> koordinator_config_reloads_total{source,result}
                                            (result: success|error)
    ``config_last_reload_successful``    -> koordinator_config_last_reload_successful (gauge 1/0)

events:
    ``events_dropped_total``             -> koordinator_events_dropped_total{reason}
                                            (reason: spam|queue_full|retries_exhausted)
"""

from __future__ import annotations

import prometheus_client
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Go's client_golang emits no *_created series; match its exposition.
prometheus_client.disable_created_metrics()

#: client-go workqueue buckets: ExponentialBuckets(10e-9, 10, 12) = 1e-8 .. 1e3 seconds.
WORKQUEUE_BUCKETS = tuple(10.0 ** e for e in range(-8, 4))

#: controller-runtime's reconcile-time buckets (40 explicit bounds, 5 ms .. 60 s; 41 with +Inf).
RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8,
    0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25,
    30, 40, 50, 60,
)

#: client-go's rest_client_request_duration_seconds buckets.
REST_CLIENT_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

_WQ_LABELS = ("name", "controller")


class RuntimeMetrics:
    """All runtime metric families on one prometheus ``CollectorRegistry`` (one per Runtime).

    ``registry=None`` creates a new private registry, so several runtimes (or tests) in one
    process never collide on metric names. Attribute names are listed in the module docstring.
    """

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        r = self.registry

        # workqueue (client-go util/workqueue/metrics.go, controller-runtime labels)
        self.workqueue_depth = Gauge(
            "workqueue_depth", "Current depth of workqueue", _WQ_LABELS, registry=r)
        self.workqueue_adds_total = Counter(
            "workqueue_adds_total", "Total number of adds handled by workqueue", _WQ_LABELS,
            registry=r)
        self.workqueue_queue_duration_seconds = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            _WQ_LABELS, buckets=WORKQUEUE_BUCKETS, registry=r)
        self.workqueue_work_duration_seconds = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            _WQ_LABELS, buckets=WORKQUEUE_BUCKETS, registry=r)
        self.workqueue_unfinished_work_seconds = Gauge(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been "
            "observed by work_duration. Large values indicate stuck threads. One can deduce "
            "the number of stuck threads by observing the rate at which this increases.",
            _WQ_LABELS, registry=r)
        self.workqueue_longest_running_processor_seconds = Gauge(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running.",
            _WQ_LABELS, registry=r)
        self.workqueue_retries_total = Counter(
            "workqueue_retries_total", "Total number of retries handled by workqueue",
            _WQ_LABELS, registry=r)

        # controller (controller-runtime pkg/internal/controller/metrics)
        self.reconcile_total = Counter(
            "controller_runtime_reconcile_total", "Total number of reconciliations per controller",
            ("controller", "result"), registry=r)
        self.reconcile_errors_total = Counter(
            "controller_runtime_reconcile_errors_total",
            "Total number of reconciliation errors per controller", ("controller",), registry=r)
        self.terminal_reconcile_errors_total = Counter(
            "controller_runtime_terminal_reconcile_errors_total",
            "Total number of terminal reconciliation errors per controller", ("controller",),
            registry=r)
        self.reconcile_panics_total = Counter(
            "controller_runtime_reconcile_panics_total",
            "Total number of reconciliation panics per controller", ("controller",), registry=r)
        self.reconcile_time_seconds = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller", ("controller",),
            buckets=RECONCILE_TIME_BUCKETS, registry=r)
        self.max_concurrent_reconciles = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller", ("controller",), registry=r)
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller", ("controller",), registry=r)

        # leader election (client-go tools/leaderelection/metrics.go)
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease.",
            ("name",), registry=r)
        self.leader_election_slowpath_total = Counter(
            "leader_election_slowpath_total",
            "Total number of slow path exercised in renewing leader leases. 'name' is the "
            "string used to identify the lease.", ("name",), registry=r)

        # client (client-go tools/metrics via component-base)
        self.rest_client_requests_total = Counter(
            "rest_client_requests_total",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ("code", "method", "host"), registry=r)
        self.rest_client_request_duration_seconds = Histogram(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host.",
            ("verb", "host"), buckets=REST_CLIENT_BUCKETS, registry=r)

        # config sources
        self.config_reloads_total = Counter(
            "koordinator_config_reloads_total",
            "Configuration reload attempts, partitioned by source and result (success|error).",
            ("source", "result"), registry=r)
        self.config_last_reload_successful = Gauge(
            "koordinator_config_last_reload_successful",
            "Whether the last configuration reload of a source succeeded (1) or failed (0).",
            ("source",), registry=r)

        # events
        self.events_dropped_total = Counter(
            "koordinator_events_dropped_total",
            "Events not written to the API server, by reason (spam|queue_full|retries_exhausted).",
            ("reason",), registry=r)

    def exposition(self) -> bytes:
        """The registry in the Prometheus text format (what ``/metrics`` serves)."""
        return prometheus_client.generate_latest(self.registry)
