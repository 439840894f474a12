"""The global eviction limiter (reference descheduler §1.4): per node, per namespace and in total, per round."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from koordinator_roles.descheduler.framework.interfaces import Obj


@dataclass
class EvictionLimiter:
    """Counts the evictions of the current round against the optional limits (None: unlimited).

    ``allow_evict`` only asks; ``done`` counts an eviction that happened. The loop calls :meth:`reset`
    at the start of every round: the ``maxNoOfPodsToEvict*`` limits are per round. Thread-safe: plugins
    may evict from several threads.
    """

    max_per_node: int | None = None
    max_per_namespace: int | None = None
    max_total: int | None = None
    _nodes: dict[str, int] = field(default_factory=dict, repr=False)
    _namespaces: dict[str, int] = field(default_factory=dict, repr=False)
    _total: int = field(default=0, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def allow_evict(self, pod: Obj) -> bool:
        """Whether one more eviction of this pod stays within every limit (counts nothing)."""
        return self.refusal(pod) is None

    def refusal(self, pod: Obj) -> str | None:
        """The limit one more eviction of this pod would exceed (``maxNoOfPodsToEvictPerNode (2)``), or None."""
        node = (pod.get("spec") or {}).get("nodeName") or ""
        namespace = (pod.get("metadata") or {}).get("namespace") or ""
        with self._lock:
            if node and self.max_per_node is not None and self._nodes.get(node, 0) + 1 > self.max_per_node:
                return f"maxNoOfPodsToEvictPerNode ({self.max_per_node})"
            if self.max_per_namespace is not None and self._namespaces.get(namespace, 0) + 1 > self.max_per_namespace:
                return f"maxNoOfPodsToEvictPerNamespace ({self.max_per_namespace})"
            if self.max_total is not None and self._total + 1 > self.max_total:
                return f"maxNoOfPodsToEvictTotal ({self.max_total})"
            return None

    def done(self, pod: Obj) -> None:
        """Count an eviction of ``pod``."""
        node = (pod.get("spec") or {}).get("nodeName") or ""
        namespace = (pod.get("metadata") or {}).get("namespace") or ""
        with self._lock:
            if node:
                self._nodes[node] = self._nodes.get(node, 0) + 1
            self._namespaces[namespace] = self._namespaces.get(namespace, 0) + 1
            self._total += 1

    def node_limit_exceeded(self, node_name: str) -> bool:
        """The node's limit is reached (Koordinator compares with equality)."""
        with self._lock:
            return self.max_per_node is not None and self._nodes.get(node_name, 0) == self.max_per_node

    def namespace_limit_exceeded(self, namespace: str) -> bool:
        with self._lock:
            return self.max_per_namespace is not None and self._namespaces.get(namespace, 0) == self.max_per_namespace

    def total_evicted(self) -> int:
        with self._lock:
            return self._total

    def reset(self) -> None:
        """Forget every count (start of a round)."""
        with self._lock:
            self._nodes.clear()
            self._namespaces.clear()
            self._total = 0

    def set_limits(self, per_node: int | None, per_namespace: int | None, total: int | None) -> None:
        """New limits (a reloaded configuration); the counts of the round stay."""
        with self._lock:
            self.max_per_node, self.max_per_namespace, self.max_total = per_node, per_namespace, total
