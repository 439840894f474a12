"""PodInfo, NodeInfo and QueuedPodInfo: the scheduler's views over plain pod and node dicts.

Amounts are **milli-units for every resource** (``koordinator.apis.extension.resource_list``):
cpu 500m → 500, memory 1Ki → 1,024,000, ``kubernetes.io/batch-cpu: "4000"`` → 4,000,000. One unit
for all resources keeps the per-node arrays of :mod:`.snapshot` a single integer matrix; ratios
(fit, usage percentages, scores) are unchanged by the common factor.
"""

from __future__ import annotations

import time
from typing import Any, Iterable, Mapping

from koordinator.apis import extension

Obj = dict[str, Any]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# kube-scheduler's defaults for a container without a cpu/memory request, used for scoring
# (NonZeroRequested) so that request-less pods still spread.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST_MILLI = 200 * 1024 * 1024 * 1000


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


def _non_zero(pod: Mapping[str, Any]) -> tuple[int, int]:
    """cpu and memory requests with kube's defaults for containers that set none (GetNonzeroRequests)."""
    spec = pod.get("spec") or {}

    def one(container: Mapping[str, Any]) -> tuple[int, int]:
        requests = (container.get("resources") or {}).get("requests") or {}
        cpu = extension.resource_list({CPU: requests[CPU]})[CPU] if CPU in requests else DEFAULT_MILLI_CPU_REQUEST
        mem = extension.resource_list({MEMORY: requests[MEMORY]})[MEMORY] if MEMORY in requests \
            else DEFAULT_MEMORY_REQUEST_MILLI
        return cpu, mem

    cpu = mem = 0
    side_cpu = side_mem = 0
    init_cpu = init_mem = 0
    for c in spec.get("containers") or []:
        a, b = one(c)
        cpu, mem = cpu + a, mem + b
    for c in spec.get("initContainers") or []:
        a, b = one(c)
        if c.get("restartPolicy") == "Always":
            side_cpu, side_mem = side_cpu + a, side_mem + b
            cpu, mem = cpu + a, mem + b
        else:
            init_cpu, init_mem = max(init_cpu, a + side_cpu), max(init_mem, b + side_mem)
    cpu, mem = max(cpu, init_cpu), max(mem, init_mem)
    overhead = extension.resource_list(spec.get("overhead"))
    return cpu + overhead.get(CPU, 0), mem + overhead.get(MEMORY, 0)


class PodInfo:
    """A pod and what the scheduler derives from it once (requests, ports, affinity presence).

    ``pod`` is the informer's dict: never mutate it; plugins that change a pod (PreBind) work on
    a deep copy.
    """

    __slots__ = ("pod", "key", "uid", "namespace", "name", "labels", "priority", "requests",
                 "non_zero_cpu", "non_zero_memory", "host_ports", "has_affinity", "has_required_anti_affinity",
                 "node_name", "scheduler_name", "_cache")

    def __init__(self, pod: Obj) -> None:
        meta = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        self.pod = pod
        self.namespace = meta.get("namespace", "")
        self.name = meta.get("name", "")
        self.key = f"{self.namespace}/{self.name}"
        self.uid = meta.get("uid") or self.key
        self.labels: Mapping[str, str] = meta.get("labels") or {}
        self.priority = int(spec.get("priority") or 0)
        self.requests: dict[str, int] = extension.pod_requests(pod)
        self.non_zero_cpu, self.non_zero_memory = _non_zero(pod)
        ports = []
        for c in spec.get("containers") or []:
            for p in c.get("ports") or []:
                if p.get("hostPort"):
                    ports.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", int(p["hostPort"])))
        for c in spec.get("initContainers") or []:
            if c.get("restartPolicy") == "Always":
                for p in c.get("ports") or []:
                    if p.get("hostPort"):
                        ports.append((p.get("hostIP") or "0.0.0.0", p.get("protocol") or "TCP", int(p["hostPort"])))
        self.host_ports: list[tuple[str, str, int]] = ports
        affinity = spec.get("affinity") or {}
        self.has_affinity = bool(affinity.get("podAffinity") or affinity.get("podAntiAffinity"))
        self.has_required_anti_affinity = bool(
            (affinity.get("podAntiAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"))
        self.node_name: str = spec.get("nodeName") or ""
        self.scheduler_name: str = spec.get("schedulerName") or "default-scheduler"
        self._cache: dict[str, Any] | None = None

    def cached(self, key: str, compute: Any) -> Any:
        """A value derived from the pod once and kept with it (parsed affinity terms, estimates...)."""
        if self._cache is None:
            self._cache = {}
        try:
            return self._cache[key]
        except KeyError:
            value = self._cache[key] = compute(self.pod)
            return value

    def with_node(self, node_name: str) -> "PodInfo":
        """A copy for the pod assumed on ``node_name`` (spec.nodeName set), sharing everything derived."""
        out = PodInfo.__new__(PodInfo)
        for slot in PodInfo.__slots__:
            setattr(out, slot, getattr(self, slot))
        pod = dict(self.pod)
        pod["spec"] = dict(self.pod.get("spec") or {}, nodeName=node_name)
        out.pod, out.node_name = pod, node_name
        out._cache = dict(self._cache) if self._cache else None
        return out

    @property
    def spec(self) -> Mapping[str, Any]:
        return self.pod.get("spec") or {}

    @property
    def owner_kinds(self) -> list[str]:
        return [r.get("kind", "") for r in (self.pod.get("metadata") or {}).get("ownerReferences") or ()]

    def __repr__(self) -> str:
        return f"PodInfo({self.key})"


class QueuedPodInfo:
    """A pod waiting in the scheduling queue, with the queue's bookkeeping (``framework.QueuedPodInfo``)."""

    __slots__ = ("pod_info", "timestamp", "attempts", "initial_attempt_timestamp", "unschedulable_plugins",
                 "pending_plugins", "gated", "backoff_expiry", "seq")

    def __init__(self, pod_info: PodInfo, now: float | None = None) -> None:
        self.pod_info = pod_info
        self.timestamp = time.monotonic() if now is None else now  # when it (re-)entered the queue
        self.attempts = 0
        self.initial_attempt_timestamp: float | None = None
        self.unschedulable_plugins: set[str] = set()
        self.pending_plugins: set[str] = set()
        self.gated = False
        self.backoff_expiry = 0.0
        self.seq = 0

    @property
    def pod(self) -> Obj:
        return self.pod_info.pod

    def __repr__(self) -> str:
        return f"QueuedPodInfo({self.pod_info.key}, attempts={self.attempts})"


class NodeInfo:
    """A node, the pods on it (bound or assumed) and their summed requests (``framework.NodeInfo``).

    ``generation`` grows on every change so that a snapshot copies only the nodes that changed.
    """

    __slots__ = ("node", "name", "labels", "taints", "unschedulable", "allocatable", "pods", "requested",
                 "non_zero_cpu", "non_zero_memory", "used_ports", "pods_with_affinity",
                 "pods_with_required_anti_affinity", "image_sizes", "generation")

    def __init__(self, node: Obj | None = None, name: str = "") -> None:
        self.node: Obj | None = None
        self.name = name
        self.labels: Mapping[str, str] = {}
        self.taints: list[Obj] = []
        self.unschedulable = False
        self.allocatable: dict[str, int] = {}
        self.image_sizes: dict[str, int] = {}
        self.pods: dict[str, PodInfo] = {}  # by uid, in arrival order
        self.requested: dict[str, int] = {}
        self.non_zero_cpu = 0
        self.non_zero_memory = 0
        self.used_ports: dict[tuple[str, int], set[str]] = {}  # (protocol, port) -> host IPs
        self.pods_with_affinity: list[PodInfo] = []
        self.pods_with_required_anti_affinity: list[PodInfo] = []
        self.generation = 0
        if node is not None:
            self.set_node(node)

    def set_node(self, node: Obj) -> None:
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}
        self.node = node
        self.name = meta.get("name", self.name)
        self.labels = meta.get("labels") or {}
        self.taints = list(spec.get("taints") or [])
        self.unschedulable = bool(spec.get("unschedulable"))
        self.allocatable = extension.resource_list(status.get("allocatable"))
        sizes: dict[str, int] = {}
        for image in status.get("images") or []:
            for name in image.get("names") or []:
                sizes[name] = int(image.get("sizeBytes") or 0)
        self.image_sizes = sizes

    @property
    def allowed_pods(self) -> int:
        return self.allocatable.get(PODS, 0) // 1000

    def add_pod(self, pi: PodInfo) -> None:
        self.pods[pi.uid] = pi
        requested = self.requested
        for k, v in pi.requests.items():
            requested[k] = requested.get(k, 0) + v
        self.non_zero_cpu += pi.non_zero_cpu
        self.non_zero_memory += pi.non_zero_memory
        for ip, protocol, port in pi.host_ports:
            self.used_ports.setdefault((protocol, port), set()).add(ip)
        if pi.has_affinity:
            self.pods_with_affinity.append(pi)
        if pi.has_required_anti_affinity:
            self.pods_with_required_anti_affinity.append(pi)
        self.generation += 1

    def remove_pod(self, uid: str) -> PodInfo | None:
        pi = self.pods.pop(uid, None)
        if pi is None:
            return None
        requested = self.requested
        for k, v in pi.requests.items():
            left = requested.get(k, 0) - v
            if left:
                requested[k] = left
            else:
                requested.pop(k, None)
        self.non_zero_cpu -= pi.non_zero_cpu
        self.non_zero_memory -= pi.non_zero_memory
        for ip, protocol, port in pi.host_ports:
            ips = self.used_ports.get((protocol, port))
            if ips is not None:
                ips.discard(ip)
                if not ips:
                    del self.used_ports[(protocol, port)]
        if pi.has_affinity:
            self.pods_with_affinity = [p for p in self.pods_with_affinity if p.uid != uid]
        if pi.has_required_anti_affinity:
            self.pods_with_required_anti_affinity = [p for p in self.pods_with_required_anti_affinity if p.uid != uid]
        self.generation += 1
        return pi

    def clone(self) -> "NodeInfo":
        """An independent copy (pods shared, containers copied): what snapshots and preemption change."""
        out = NodeInfo.__new__(NodeInfo)
        out.node, out.name, out.labels, out.taints = self.node, self.name, self.labels, self.taints
        out.unschedulable, out.allocatable, out.image_sizes = self.unschedulable, self.allocatable, self.image_sizes
        out.pods = dict(self.pods)
        out.requested = dict(self.requested)
        out.non_zero_cpu, out.non_zero_memory = self.non_zero_cpu, self.non_zero_memory
        out.used_ports = {k: set(v) for k, v in self.used_ports.items()}
        out.pods_with_affinity = list(self.pods_with_affinity)
        out.pods_with_required_anti_affinity = list(self.pods_with_required_anti_affinity)
        out.generation = self.generation
        return out

    def pod_infos(self) -> Iterable[PodInfo]:
        return self.pods.values()

    def __repr__(self) -> str:
        return f"NodeInfo({self.name}, pods={len(self.pods)})"
