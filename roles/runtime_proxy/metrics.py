"""The runtime proxy's Prometheus metric families, on the Runtime's registry (Koordinator's proxy has none).

=================================================  =========================  ===================================
family                                             labels                     what
=================================================  =========================  ===================================
``koord_runtime_proxy_cri_requests_total``         method, code               CRI calls answered (gRPC code)
``koord_runtime_proxy_cri_request_duration_seconds``  method                  time in the proxy + backend
``koord_runtime_proxy_hook_calls_total``           hook_server, hook, result  ``ok``; ``failed_ignored`` (the
                                                                              call went on unchanged); ``failed``
                                                                              (policy Fail: the call failed)
``koord_runtime_proxy_hook_servers``               (none)                     registered hook servers
=================================================  =========================  ===================================
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

OK = "ok"
FAILED_IGNORED = "failed_ignored"
FAILED = "failed"

_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 1.0, 5.0)


@dataclass
class ProxyMetrics:
    """The families above, registered on ``registry``."""

    requests: Counter
    duration: Histogram
    hook_calls: Counter
    hook_servers: Gauge

    @classmethod
    def register(cls, registry: CollectorRegistry) -> "ProxyMetrics":
        return cls(
            requests=Counter("koord_runtime_proxy_cri_requests", "CRI calls answered by the runtime proxy",
                             ["method", "code"], registry=registry),
            duration=Histogram("koord_runtime_proxy_cri_request_duration_seconds",
                               "Time a CRI call spends in the runtime proxy and its backend", ["method"],
                               buckets=_BUCKETS, registry=registry),
            hook_calls=Counter("koord_runtime_proxy_hook_calls", "Hook server calls by result",
                               ["hook_server", "hook", "result"], registry=registry),
            hook_servers=Gauge("koord_runtime_proxy_hook_servers", "Hook servers registered", registry=registry))
