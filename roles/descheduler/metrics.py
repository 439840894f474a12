"""koord-descheduler's own metric (reference descheduler §1.10): ``descheduler_pods_evicted``."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter


class DeschedulerMetrics:
    """``descheduler_pods_evicted{result, strategy, namespace, node}`` on the runtime's registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.pods_evicted = Counter(
            "descheduler_pods_evicted",
            "Number of evicted pods, by the result, the strategy (plugin) that evicted them, namespace and node",
            ("result", "strategy", "namespace", "node"), registry=registry)

    def evicted(self, pod: dict[str, Any], strategy: str, result: str) -> None:
        """Count one eviction attempt of ``pod`` (``result``: ``success`` or ``error``)."""
        self.pods_evicted.labels(result, strategy, (pod.get("metadata") or {}).get("namespace") or "",
                                 (pod.get("spec") or {}).get("nodeName") or "").inc()
