"""The console's snapshots: what one refresh shows, read from the API and the node-local sources.

A :class:`Collector` owns the API client, the node-local sources and the short in-memory usage history
(the sparklines); :meth:`Collector.node` and :meth:`Collector.cluster` each return a plain dataclass that
:mod:`koordinator.console.render` draws. Nothing here draws or prints.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from koordinator.apis import quantity
from koordinator.apis.extension import (BATCH_CPU, BATCH_MEMORY, QOS_CLASSES, kube_qos_class, pod_limits,
                                        pod_requests, priority_class_with_default, qos_class_with_default)
from koordinator.console import sources
from koordinator.runtime.errors import ApiError, ConnectionFailed, NotFound

#: Samples kept per node for the sparklines (one per refresh).
HISTORY = 60
#: Recent evictions, audit lines and pending pods shown.
EVICTIONS, AUDIT_LINES, PENDING = 8, 8, 20
#: The QoS classes in the order the node view groups pods (unlabelled pods count by their Kubernetes QoS).
QOS_ORDER = ("SYSTEM", "LSE", "LSR", "LS", "BE")
#: NodeSLO fields of ``resourceUsedThresholdWithBE`` shown as the thresholds in force.
THRESHOLD_FIELDS = ("enable", "cpuSuppressThresholdPercent", "cpuSuppressPolicy", "cpuEvictBESatisfactionLowerPercent",
                    "cpuEvictBESatisfactionUpperPercent", "cpuEvictThresholdPercent", "memoryEvictThresholdPercent",
                    "memoryEvictLowerPercent", "cpuEvictPolicy")


class ConsoleError(Exception):
    """What stops the console, as one line (API unreachable, node not found, unreadable source)."""


# -- rows --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PodRow:
    """A pod with its usage (NodeMetric ``podsMetric``; None when not reported), requests and limits."""

    namespace: str
    name: str
    qos: str
    kube_qos: str
    priority: str
    phase: str
    node: str
    cpu_usage: int | None  # millicores
    memory_usage: int | None  # bytes
    cpu_request: int
    memory_request: int
    cpu_limit: int
    memory_limit: int

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class EventRow:
    time: str
    object: str
    reason: str
    message: str
    count: int


@dataclass(frozen=True)
class NodeSnapshot:
    """One refresh of the node view."""

    node: str
    ready: bool
    cpu_allocatable: int  # millicores
    memory_allocatable: int  # bytes
    batch_cpu: int  # millicores (kubernetes.io/batch-cpu)
    batch_memory: int  # bytes
    cpu_usage: int | None  # millicores
    memory_usage: int | None  # bytes
    usage_source: str
    cpu_history: list[float]
    memory_history: list[float]
    metric_time: str
    pods: list[PodRow]
    be: sources.BEState | None
    be_reason: str
    thresholds: dict[str, Any] | None
    evictions: list[EventRow]
    audit: list[dict[str, Any]]
    hooks: list[sources.HookActivity]
    hook_registration: dict[str, Any] | None
    notes: list[str] = field(default_factory=list)

    def pods_by_qos(self) -> list[tuple[str, list[PodRow]]]:
        """The pods grouped by QoS class in :data:`QOS_ORDER` (empty classes left out)."""
        groups: dict[str, list[PodRow]] = {}
        for p in self.pods:
            groups.setdefault(p.qos or "none", []).append(p)
        order = [q for q in QOS_ORDER if q in groups] + sorted(q for q in groups if q not in QOS_ORDER)
        return [(q, sorted(groups[q], key=lambda p: p.key)) for q in order]


@dataclass(frozen=True)
class NodeRow:
    name: str
    ready: bool
    cpu_usage: int | None
    cpu_allocatable: int
    memory_usage: int | None
    memory_allocatable: int
    batch_cpu: int
    batch_memory: int
    pods: int
    cpu_history: list[float]


@dataclass(frozen=True)
class ClusterSnapshot:
    """One refresh of the cluster view."""

    nodes: list[NodeRow]
    pending: list[tuple[str, str]]  # (namespace/name, the scheduler's reason)
    quotas: list[dict[str, str]]
    gangs: list[dict[str, str]]
    reservations: list[dict[str, str]]
    migrations: list[dict[str, str]]
    evictions: list[EventRow]
    notes: list[str] = field(default_factory=list)


# -- helpers -------------------------------------------------------------------------------------------

def _milli(raw: Any) -> int:
    try:
        return quantity.milli_value(raw) if raw not in (None, "") else 0
    except ValueError:
        return 0


def _value(raw: Any) -> int:
    try:
        return quantity.value(raw) if raw not in (None, "") else 0
    except ValueError:
        return 0


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return obj.get("metadata") or {}


def _ready(node: Mapping[str, Any]) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def _usage(resources: Mapping[str, Any] | None) -> tuple[int | None, int | None]:
    res = (resources or {}).get("resources") or {}
    return (_milli(res["cpu"]) if "cpu" in res else None, _value(res["memory"]) if "memory" in res else None)


def _resources(obj: Mapping[str, Any] | None) -> str:
    """``cpu=2 memory=4Gi`` of a ResourceList (cpu and memory first)."""
    items = sorted((obj or {}).items(), key=lambda kv: (kv[0] not in ("cpu", "memory"), kv[0]))
    return " ".join(f"{k}={v}" for k, v in items) or "-"


def pod_row(pod: Mapping[str, Any], usage: Mapping[str, tuple[int | None, int | None]]) -> PodRow:
    """A :class:`PodRow` of ``pod``; ``usage`` maps ``namespace/name`` to its reported (cpu, memory)."""
    md = _meta(pod)
    key = f"{md.get('namespace', '')}/{md.get('name', '')}"
    cpu, memory = usage.get(key, (None, None))
    requests, limits = pod_requests(pod), pod_limits(pod)
    qos = qos_class_with_default(pod)
    return PodRow(namespace=md.get("namespace", ""), name=md.get("name", ""), qos=qos if qos in QOS_CLASSES else "",
                  kube_qos=kube_qos_class(pod), priority=priority_class_with_default(pod),
                  phase=(pod.get("status") or {}).get("phase", ""), node=(pod.get("spec") or {}).get("nodeName", ""),
                  cpu_usage=cpu, memory_usage=memory, cpu_request=requests.get("cpu", 0),
                  memory_request=requests.get("memory", 0) // 1000, cpu_limit=limits.get("cpu", 0),
                  memory_limit=limits.get("memory", 0) // 1000)


def pods_metric_usage(metric: Mapping[str, Any] | None) -> dict[str, tuple[int | None, int | None]]:
    """``namespace/name`` -> (millicores, bytes) from a NodeMetric's ``status.podsMetric``."""
    out = {}
    for entry in ((metric or {}).get("status") or {}).get("podsMetric") or []:
        out[f"{entry.get('namespace', '')}/{entry.get('name', '')}"] = _usage(entry.get("podUsage"))
    return out


def eviction_events(events: Iterable[Mapping[str, Any]], *, node: str | None = None,
                    pods_on_node: set[str] | None = None) -> list[EventRow]:
    """The newest eviction events (reason containing ``Evict``), for ``node`` when given: those its koordlet
    reported (``source.host``) or about a pod that is on it."""
    rows = []
    for e in events:
        reason = e.get("reason") or ""
        if "evict" not in reason.lower():
            continue
        obj = e.get("involvedObject") or {}
        key = f"{obj.get('namespace', '')}/{obj.get('name', '')}"
        if node is not None:
            host = (e.get("source") or {}).get("host") or e.get("reportingInstance") or ""
            if host != node and key not in (pods_on_node or set()):
                continue
        when = e.get("lastTimestamp") or e.get("eventTime") or _meta(e).get("creationTimestamp") or ""
        rows.append(EventRow(str(when), key, reason, (e.get("message") or "").strip(), int(e.get("count") or 1)))
    rows.sort(key=lambda r: r.time, reverse=True)
    return rows[:EVICTIONS]


def unschedulable_reason(pod: Mapping[str, Any]) -> str:
    """The scheduler's reason a pending pod is not placed (its PodScheduled condition), or why it waits."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") != "True":
            return (cond.get("message") or cond.get("reason") or "").strip() or "not scheduled yet"
    return "not scheduled yet"


# -- the collector ---------------------------------------------------------------------------------------

class Collector:
    """Builds snapshots from ``client`` (a :class:`koordinator.runtime.client.Client`) and ``local`` (the
    node-local sources, for the node view); keeps the usage history between refreshes."""

    def __init__(self, client: Any, *, node: str | None = None, local: sources.NodeLocal | None = None,
                 history: int = HISTORY) -> None:
        self.client = client
        self.node_name = node
        self.local = local or sources.NodeLocal()
        self.history_len = history
        self._cpu: dict[str, deque[float]] = {}
        self._memory: dict[str, deque[float]] = {}

    # -- API access, with the errors as one line --------------------------------------------------

    def _call(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ConnectionFailed as err:
            raise ConsoleError(f"cannot reach the API server at {self.client.host}: {err}") from None

    def _list(self, kind: str, notes: list[str] | None = None) -> list[dict[str, Any]]:
        """Every object of ``kind``; a kind the server does not serve (no CRD) is a note, not an error."""
        try:
            return self._call(self.client.list, kind).get("items") or []
        except (NotFound, LookupError):
            if notes is not None:
                notes.append(f"{kind}: not served by this API server (CRD not installed)")
            return []
        except ApiError as err:
            if notes is not None:
                notes.append(f"{kind}: {err}")
            return []

    def _get(self, kind: str, name: str) -> dict[str, Any] | None:
        try:
            return self._call(self.client.get, kind, name)
        except (NotFound, LookupError):
            return None

    def _remember(self, node: str, cpu: float | None, memory: float | None) -> tuple[list[float], list[float]]:
        cpu_h = self._cpu.setdefault(node, deque(maxlen=self.history_len))
        mem_h = self._memory.setdefault(node, deque(maxlen=self.history_len))
        if cpu is not None:
            cpu_h.append(cpu)
        if memory is not None:
            mem_h.append(memory)
        return list(cpu_h), list(mem_h)

    # -- node view ------------------------------------------------------------------------------------

    def node(self) -> NodeSnapshot:
        """The node view of ``node`` (ConsoleError when the API server is unreachable or the node unknown)."""
        name = self.node_name
        if not name:
            raise ConsoleError("--node-name: Required value: the node view needs a node")
        node = self._get("Node", name)
        if node is None:
            raise ConsoleError(f"node {name!r} not found at {self.client.host}")
        notes: list[str] = []
        alloc = (node.get("status") or {}).get("allocatable") or {}
        metric = self._get("NodeMetric", name)
        node_cpu, node_memory = _usage(((metric or {}).get("status") or {}).get("nodeMetric", {}).get("nodeUsage"))
        source = "NodeMetric (averaged)" if metric else "none"
        if metric is None:
            notes.append(f"no NodeMetric for {name} yet: no usage reported")
        local = self.local
        if local.proc_root:
            try:
                cores = local.meter.sample() if local.meter else None
                _, used = sources.read_memory(local.proc_root)
            except (OSError, ValueError) as err:
                notes.append(f"--proc-root {local.proc_root}: {err}")
            else:
                node_memory = used
                if cores is not None:
                    node_cpu, source = round(cores * 1000), "/proc (live)"
        cpu_h, mem_h = self._remember(name, None if node_cpu is None else node_cpu / 1000,
                                      None if node_memory is None else float(node_memory))
        usage = pods_metric_usage(metric)
        pods = [pod_row(p, usage) for p in self._call(self.client.list, "Pod",
                                                        field_selector=f"spec.nodeName={name}").get("items") or []
                if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        slo = self._get("NodeSLO", name)
        thresholds = None
        if slo is not None:
            strategy = (slo.get("spec") or {}).get("resourceUsedThresholdWithBE") or {}
            thresholds = {k: strategy[k] for k in THRESHOLD_FIELDS if k in strategy}
        audit = sources.audit_tail(local.run_dir) if local.run_dir else []
        suppress = [e for e in audit if e.get("owner") == "CPUSuppress"]
        be = sources.be_state(local.cgroup_root) if local.cgroup_root else None
        if local.cgroup_root and be is None:
            notes.append(f"--cgroup-root {local.cgroup_root}: no BestEffort QoS cgroup")
        events = self._list("Event", notes)
        return NodeSnapshot(
            node=name, ready=_ready(node), cpu_allocatable=_milli(alloc.get("cpu")),
            memory_allocatable=_value(alloc.get("memory")), batch_cpu=_value(alloc.get(BATCH_CPU)),
            batch_memory=_value(alloc.get(BATCH_MEMORY)), cpu_usage=node_cpu, memory_usage=node_memory,
            usage_source=source, cpu_history=cpu_h, memory_history=mem_h,
            metric_time=str(((metric or {}).get("status") or {}).get("updateTime") or ""), pods=pods, be=be,
            be_reason=str(suppress[-1].get("reason", "")) if suppress else "", thresholds=thresholds,
            evictions=eviction_events(events, node=name, pods_on_node={p.key for p in pods}),
            audit=audit[-AUDIT_LINES:], hooks=sources.hook_activity(audit),
            hook_registration=sources.hook_registration(local.run_dir) if local.run_dir else None, notes=notes)

    # -- cluster view --------------------------------------------------------------------------------

    def cluster(self) -> ClusterSnapshot:
        """The cluster view (ConsoleError when the API server is unreachable)."""
        notes: list[str] = []
        nodes = self._list("Node")
        metrics = {_meta(m).get("name", ""): m for m in self._list("NodeMetric", notes)}
        pods = self._list("Pod")
        per_node: dict[str, int] = {}
        pending = []
        for p in pods:
            spec, status = p.get("spec") or {}, p.get("status") or {}
            if status.get("phase") in ("Succeeded", "Failed"):
                continue
            if spec.get("nodeName"):
                per_node[spec["nodeName"]] = per_node.get(spec["nodeName"], 0) + 1
            elif not _meta(p).get("deletionTimestamp"):
                pending.append((f"{_meta(p).get('namespace', '')}/{_meta(p).get('name', '')}", unschedulable_reason(p)))
        rows = []
        for n in sorted(nodes, key=lambda n: _meta(n).get("name", "")):
            name = _meta(n).get("name", "")
            alloc = (n.get("status") or {}).get("allocatable") or {}
            cpu, memory = _usage(((metrics.get(name) or {}).get("status") or {}).get("nodeMetric", {}).get("nodeUsage"))
            if self.node_name != name:  # the node view keeps the node's own (live) history
                self._remember(name, None if cpu is None else cpu / 1000, None if memory is None else float(memory))
            rows.append(NodeRow(name=name, ready=_ready(n), cpu_usage=cpu, cpu_allocatable=_milli(alloc.get("cpu")),
                                memory_usage=memory, memory_allocatable=_value(alloc.get("memory")),
                                batch_cpu=_value(alloc.get(BATCH_CPU)), batch_memory=_value(alloc.get(BATCH_MEMORY)),
                                pods=per_node.get(name, 0), cpu_history=list(self._cpu.get(name, ()))))
        return ClusterSnapshot(nodes=rows, pending=sorted(pending)[:PENDING],
                               quotas=[_quota(q) for q in self._list("ElasticQuota", notes)],
                               gangs=[_gang(g) for g in self._list("PodGroup", notes)],
                               reservations=[_reservation(r) for r in self._list("Reservation", notes)],
                               migrations=[_migration(m) for m in self._list("PodMigrationJob", notes)],
                               evictions=eviction_events(self._list("Event", notes)), notes=notes)


def _key(obj: Mapping[str, Any]) -> str:
    md = _meta(obj)
    return f"{md['namespace']}/{md.get('name', '')}" if md.get("namespace") else md.get("name", "")


def _quota(q: Mapping[str, Any]) -> dict[str, str]:
    spec, status = q.get("spec") or {}, q.get("status") or {}
    return {"name": _key(q), "min": _resources(spec.get("min")), "max": _resources(spec.get("max")),
            "used": _resources(status.get("used"))}


def _gang(g: Mapping[str, Any]) -> dict[str, str]:
    spec, status = g.get("spec") or {}, g.get("status") or {}
    return {"name": _key(g), "minMember": str(spec.get("minMember", "-")), "phase": str(status.get("phase", "-")),
            "scheduled": str(status.get("scheduled", 0)), "running": str(status.get("running", 0))}


def _reservation(r: Mapping[str, Any]) -> dict[str, str]:
    status = r.get("status") or {}
    return {"name": _key(r), "phase": str(status.get("phase", "Pending")), "node": str(status.get("nodeName", "-")),
            "allocatable": _resources(status.get("allocatable")), "allocated": _resources(status.get("allocated"))}


def _migration(m: Mapping[str, Any]) -> dict[str, str]:
    spec, status = m.get("spec") or {}, m.get("status") or {}
    ref = spec.get("podRef") or {}
    return {"name": _key(m), "pod": f"{ref.get('namespace', '')}/{ref.get('name', '')}",
            "phase": str(status.get("phase", "Pending")),
            "reason": str(status.get("reason") or status.get("message") or "")}
