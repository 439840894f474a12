"""The per-node "pod assign cache": assigned pods, the node's NodeMetric and derived load accumulators.

Fed by the Pod and NodeMetric informers (their handler threads) and by Reserve/Unreserve/ForgetPod
(the scheduling threads), so every access holds ``lock``. Each change records the node name in
a dirty set that the plugin drains to refresh only those rows of its arrays.

Vectors are plain lists of ints aligned with the args' resource vector, in LoadAware units
(cpu milli, others whole units): the accumulators change a few entries at a time, where Python
lists beat numpy's per-call overhead.
"""

from __future__ import annotations

import threading
import time
from datetime import datetime
from typing import Any, Callable, Iterable, Mapping

from koordinator.apis import extension
from koordinator_roles.scheduler.plugins.loadaware.args import LoadAwareArgs, parse_go_duration, to_units
from koordinator_roles.scheduler.plugins.loadaware.estimator import (ANNOTATION_SECONDS_AFTER_INITIALIZED,
                                                                     ANNOTATION_SECONDS_AFTER_POD_SCHEDULED, DefaultEstimator,
                                                                     custom_seconds)

ANNOTATION_RESERVE_POD = "scheduling.koordinator.sh/reserve-pod"
DEFAULT_REPORT_INTERVAL = 60.0
_NEG_INF = float("-inf")

Vec = list[int]


_UNKNOWN = object()  # "not computed by the caller"

def parse_time(value: Any) -> float | None:
    """An RFC 3339 timestamp as epoch seconds (None when absent or unparsable)."""
    if not value:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    try:
        text = str(value)
        if text.endswith("Z"):
            text = text[:-1] + "+00:00"
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None


def _condition(pod: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == kind:
            return c
    return None


def is_terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_reserve_pod(pod: Mapping[str, Any]) -> bool:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RESERVE_POD) == "true"


def _unwrap(obj: Any) -> Any:
    """The object of a delete notification (DeletedFinalStateUnknown carries the last known state)."""
    inner = getattr(obj, "obj", None)
    return inner if inner is not None and not isinstance(obj, dict) else obj


class AssignedPod:
    """One pod on a node: when it landed, its estimate (None if all zero) and its estimation deadline."""

    __slots__ = ("pod", "uid", "key", "timestamp", "estimated", "deadline", "prod")

    def __init__(self, pod: Mapping[str, Any], timestamp: float, estimated: Vec | None, deadline: float | None,
                 prod: bool) -> None:
        meta = pod.get("metadata") or {}
        self.pod = pod
        self.key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        self.uid = meta.get("uid") or self.key
        self.timestamp = timestamp
        self.estimated = estimated
        self.deadline = deadline
        self.prod = prod


class NodeLoad:
    """Everything known about one node's load (Koordinator's assign-cache ``nodeInfo``)."""

    __slots__ = ("pods", "metric", "has_node_metric", "update_time", "report_interval", "pod_usages", "prod_pods",
                 "node_usage", "agg_usages", "prod_usage", "node_delta", "prod_delta", "node_estimated")

    def __init__(self, width: int) -> None:
        self.pods: dict[str, AssignedPod] = {}
        self.metric: Mapping[str, Any] | None = None
        self.has_node_metric = False
        self.update_time: float | None = None
        self.report_interval = DEFAULT_REPORT_INTERVAL
        self.pod_usages: dict[str, Vec] = {}
        self.prod_pods: set[str] = set()
        self.node_usage: Vec | None = None
        self.agg_usages: dict[tuple[str, float], Vec] = {}
        self.prod_usage = [0] * width
        self.node_delta = [0] * width
        self.prod_delta = [0] * width
        self.node_estimated = [0] * width

    # -- accumulators (reference §2.1.3: removal is the exact inverse of addition) ----------------

    def _should_estimate(self, p: AssignedPod, usage: Vec | None) -> bool:
        ut = _NEG_INF if self.update_time is None else self.update_time
        return (usage is None or ut - self.report_interval < p.timestamp
                or (p.deadline is not None and p.deadline > ut))

    def _apply(self, p: AssignedPod, sign: int) -> None:
        u = self.pod_usages.get(p.key)
        active_prod = p.prod and p.key in self.prod_pods
        if active_prod and u is not None:
            _add(self.prod_usage, u, sign)
        e = p.estimated
        if e is None:
            return
        should = self._should_estimate(p, u)
        if should:
            _add_delta(self.node_delta, e, u, sign)
        _add(self.node_estimated, e, sign)
        if not p.prod:
            return
        if not active_prod and u is not None:
            u, should = None, True
        if should:
            _add_delta(self.prod_delta, e, u, sign)

    def add_pod(self, p: AssignedPod) -> None:
        self._apply(p, 1)

    def load_key(self) -> tuple:
        """What the existing-load lookups depend on besides the NodeMetric (compared to skip refreshes)."""
        return (*self.prod_usage, *self.node_delta, *self.prod_delta, *self.node_estimated)

    def remove_pod(self, p: AssignedPod) -> None:
        self._apply(p, -1)

    # -- the "existing load" lookup ------------------------------------------------------------

    def aggregated(self, agg_type: str, duration: float) -> Vec | None:
        vec = self.agg_usages.get((agg_type, duration))
        if vec is None and duration == 0:
            vec = self.node_usage
        return vec

    def existing(self, prod: bool, agg_type: str = "", duration: float = 0.0) -> Vec:
        """Load already on the node plus what assigned-but-unreported pods will add."""
        if prod:
            return [a + b for a, b in zip(self.prod_usage, self.prod_delta)]
        base = self.aggregated(agg_type, duration) if agg_type else self.node_usage
        if base is not None:
            return [a + b for a, b in zip(base, self.node_delta)]
        return list(self.node_estimated)


def _add(acc: Vec, v: Vec, sign: int) -> None:
    for i, x in enumerate(v):
        if x:
            acc[i] += sign * x


def _add_delta(acc: Vec, e: Vec, u: Vec | None, sign: int) -> None:
    if u is None:
        _add(acc, e, sign)
        return
    for i, (x, y) in enumerate(zip(e, u)):
        if x > y:
            acc[i] += sign * (x - y)


class PodAssignCache:
    """Thread-safe per-node load state; see the module docstring."""

    def __init__(self, args: LoadAwareArgs, estimator: DefaultEstimator,
                 now: Callable[[], float] = time.time) -> None:
        self.lock = threading.RLock()
        self.now = now
        self._nodes: dict[str, NodeLoad] = {}
        self._pod_nodes: dict[str, str] = {}  # uid -> node, to move pods whose nodeName changed
        self._dirty: set[str] = set()
        self._all_dirty = True
        self._configure(args, estimator)

    def _configure(self, args: LoadAwareArgs, estimator: DefaultEstimator) -> None:
        self.args = args
        self.estimator = estimator
        self.resources = args.resources
        self._index = {name: i for i, name in enumerate(self.resources)}

    def reconfigure(self, args: LoadAwareArgs, estimator: DefaultEstimator) -> None:
        """New args (hot reload): re-estimate every pod and re-read every NodeMetric, keeping assign times."""
        with self.lock:
            self._configure(args, estimator)
            old, self._nodes = self._nodes, {}
            for name, n in old.items():
                load = self._node(name)
                for p in n.pods.values():
                    load.pods[p.uid] = self._assigned(p.pod, p.timestamp)
                if n.metric is not None:
                    self._set_metric(load, n.metric)
            self._all_dirty = True

    # -- vectors ------------------------------------------------------------------------------------

    def to_vec(self, amounts: Mapping[str, int]) -> Vec:
        """A LoadAware-unit map as a vector (resources outside the vector are dropped)."""
        v = [0] * len(self.resources)
        index = self._index
        for name, amount in amounts.items():
            i = index.get(name)
            if i is not None:
                v[i] = amount
        return v

    def _usage_vec(self, resource_map: Mapping[str, Any] | None) -> Vec | None:
        resources = (resource_map or {}).get("resources")
        if not resources:
            return None
        milli = extension.resource_list(resources)
        return self.to_vec({name: to_units(name, amount) for name, amount in milli.items()})

    def estimate_vec(self, pod: Mapping[str, Any]) -> Vec | None:
        """The estimator's result as a vector; None when all zero."""
        v = self.to_vec(self.estimator.estimate_pod(pod))
        return v if any(v) else None

    # -- pods ----------------------------------------------------------------------------------------

    def _deadline(self, pod: Mapping[str, Any], timestamp: float) -> float | None:
        after_scheduled = after_initialized = -1
        if self.args.allow_customize_estimation:
            after_scheduled = custom_seconds(pod, ANNOTATION_SECONDS_AFTER_POD_SCHEDULED)
            after_initialized = custom_seconds(pod, ANNOTATION_SECONDS_AFTER_INITIALIZED)
        if after_scheduled < 0 and self.args.estimated_seconds_after_pod_scheduled is not None:
            after_scheduled = self.args.estimated_seconds_after_pod_scheduled
        if after_initialized < 0 and self.args.estimated_seconds_after_initialized is not None:
            after_initialized = self.args.estimated_seconds_after_initialized
        if after_initialized > 0:
            c = _condition(pod, "Initialized")
            if c is not None and c.get("status") == "True":
                t = parse_time(c.get("lastTransitionTime"))
                if t is not None:
                    return t + after_initialized
        if after_scheduled > 0:
            return timestamp + after_scheduled
        return None

    def _assigned(self, pod: Mapping[str, Any], timestamp: float | None = None, *, estimate: Any = _UNKNOWN,
                  prod: bool | None = None) -> AssignedPod:
        if timestamp is None:
            c = _condition(pod, "PodScheduled")
            t = parse_time(c.get("lastTransitionTime")) if c is not None and c.get("status") == "True" else None
            timestamp = t if t is not None else self.now()
        if estimate is not _UNKNOWN:
            # A vector with every entry 0 counts as no estimate, as for estimate_vec.
            estimated = estimate if estimate is not None and any(estimate) else None
        else:
            try:
                estimated = self.estimate_vec(pod)
            except Exception:  # an unparsable quantity: Koordinator keeps the pod without an estimate
                estimated = None
        if prod is None:
            prod = extension.priority_class_with_default(pod) == extension.PRIORITY_PROD
        return AssignedPod(pod, timestamp, estimated, self._deadline(pod, timestamp), prod)

    def _node(self, name: str) -> NodeLoad:
        n = self._nodes.get(name)
        if n is None:
            n = self._nodes[name] = NodeLoad(len(self.resources))
        return n

    def _put_pod(self, node_name: str, p: AssignedPod) -> None:
        prev = self._pod_nodes.get(p.uid)
        if prev is not None and prev != node_name:
            self._drop_pod(prev, p.uid)
        n = self._node(node_name)
        old = n.pods.get(p.uid)
        n.pods[p.uid] = p
        self._pod_nodes[p.uid] = node_name
        if n.metric is not None:
            before = n.load_key()
            if old is not None:
                n.remove_pod(old)
            n.add_pod(p)
            if old is not None and n.load_key() == before:
                # The same load (e.g. the binding of a pod assumed at Reserve): no row to refresh.
                return
        self._dirty.add(node_name)

    def _drop_pod(self, node_name: str, uid: str) -> None:
        n = self._nodes.get(node_name)
        if self._pod_nodes.get(uid) == node_name:
            del self._pod_nodes[uid]
        if n is None:
            return
        old = n.pods.pop(uid, None)
        if old is not None and n.metric is not None:
            n.remove_pod(old)
        self._cleanup(node_name, n)
        self._dirty.add(node_name)

    def _cleanup(self, name: str, n: NodeLoad) -> None:
        if n.metric is None and not n.pods:
            self._nodes.pop(name, None)

    def assign(self, node_name: str, pod: Mapping[str, Any], *, estimate: Any = _UNKNOWN,
               prod: bool | None = None) -> None:
        """Add or refresh ``pod`` on ``node_name`` (Reserve, informer add/update).

        Reserve passes the ``estimate`` vector (None: estimation error) and ``prod`` it already computed.
        """
        if not node_name or is_terminated(pod) or is_reserve_pod(pod):
            return
        p = self._assigned(pod, estimate=estimate, prod=prod)
        with self.lock:
            self._put_pod(node_name, p)

    def unassign(self, node_name: str, pod: Mapping[str, Any]) -> None:
        """Remove ``pod`` from ``node_name`` (Unreserve, ForgetPod, informer delete)."""
        if not node_name:
            return
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        with self.lock:
            self._drop_pod(node_name, uid)

    def on_pod_add(self, pod: Mapping[str, Any]) -> None:
        self.assign((pod.get("spec") or {}).get("nodeName") or "", pod)

    def on_pod_update(self, old: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> None:
        """Re-assign on spec/condition changes, drop when terminated, move when nodeName changes."""
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        with self.lock:
            prev = self._pod_nodes.get(uid)
            if prev is not None and prev != node_name:
                self._drop_pod(prev, uid)  # no ghost load on the node it left
            if not node_name:
                return
            n = self._nodes.get(node_name)
            cached = n.pods.get(uid) if n is not None else None
            if cached is not None:
                if is_terminated(pod):
                    self._drop_pod(node_name, uid)
                    return
                if cached.pod.get("spec") == pod.get("spec"):
                    if ((cached.pod.get("status") or {}).get("conditions")
                            == (pod.get("status") or {}).get("conditions")):
                        return
                    # Same spec (e.g. the binding of a pod assumed at Reserve): same estimate; the
                    # conditions only move its timestamp and estimation deadline.
                    estimate, prod = cached.estimated, cached.prod
                    self.assign(node_name, pod, estimate=estimate, prod=prod)
                    return
        self.assign(node_name, pod)

    def on_pod_delete(self, obj: Any) -> None:
        pod = _unwrap(obj)
        if isinstance(pod, Mapping):
            self.unassign((pod.get("spec") or {}).get("nodeName") or "", pod)

    # -- node metrics -------------------------------------------------------------------------------

    def _set_metric(self, n: NodeLoad, metric: Mapping[str, Any]) -> None:
        spec = metric.get("spec") or {}
        status = metric.get("status") or {}
        policy = spec.get("metricCollectPolicy") or spec.get("collectPolicy") or {}
        interval = policy.get("reportIntervalSeconds")
        info = status.get("nodeMetric")
        width = len(self.resources)
        n.metric = metric
        n.has_node_metric = info is not None
        n.report_interval = DEFAULT_REPORT_INTERVAL if interval is None else float(interval)
        n.update_time = parse_time(status.get("updateTime"))
        n.node_usage = None
        n.agg_usages = {}
        n.prod_usage = [0] * width
        if info is not None:
            n.node_usage = self._usage_vec(info.get("nodeUsage")) or [0] * width
            longest: dict[str, float] = {}
            for entry in info.get("aggregatedNodeUsages") or ():
                try:
                    d = parse_go_duration(entry.get("duration"))
                except ValueError:
                    continue
                for agg_type, usage in (entry.get("usage") or {}).items():
                    vec = self._usage_vec(usage)
                    if vec is None:
                        continue
                    n.agg_usages[(agg_type, d)] = vec
                    if d > longest.get(agg_type, 0.0):
                        longest[agg_type] = d
            for agg_type, d in longest.items():
                n.agg_usages[(agg_type, 0.0)] = n.agg_usages[(agg_type, d)]
            if self.args.prod_usage_include_sys:
                _add(n.prod_usage, self._usage_vec(info.get("systemUsage")) or [0] * width, 1)
        n.pod_usages = {}
        n.prod_pods = set()
        for pm in status.get("podsMetric") or ():
            if not pm:
                continue
            vec = self._usage_vec(pm.get("podUsage"))
            if vec is None:
                continue
            key = f"{pm.get('namespace', '')}/{pm.get('name', '')}"
            n.pod_usages[key] = vec
            if pm.get("priority") == extension.PRIORITY_PROD:
                n.prod_pods.add(key)
        n.node_delta = [0] * width
        n.prod_delta = [0] * width
        n.node_estimated = [0] * width
        for p in n.pods.values():
            n.add_pod(p)

    def set_node_metric(self, metric: Mapping[str, Any]) -> None:
        name = (metric.get("metadata") or {}).get("name") or ""
        if not name:
            return
        with self.lock:
            self._set_metric(self._node(name), metric)
            self._dirty.add(name)

    def on_node_metric_add(self, metric: Mapping[str, Any]) -> None:
        self.set_node_metric(metric)

    def on_node_metric_update(self, old: Mapping[str, Any] | None, metric: Mapping[str, Any]) -> None:
        self.set_node_metric(metric)

    def on_node_metric_delete(self, obj: Any) -> None:
        metric = _unwrap(obj)
        if not isinstance(metric, Mapping):
            return
        name = (metric.get("metadata") or {}).get("name") or ""
        with self.lock:
            n = self._nodes.get(name)
            if n is None:
                return
            n.metric = None
            n.has_node_metric = False
            self._cleanup(name, n)
            self._dirty.add(name)

    # -- reading ---------------------------------------------------------------------------------------

    def get(self, name: str) -> NodeLoad | None:
        """The node's state (hold ``lock`` while reading it)."""
        return self._nodes.get(name)

    def take_dirty(self) -> tuple[bool, set[str]]:
        """(everything changed, names changed) since the last call; hold ``lock``."""
        all_dirty, dirty = self._all_dirty, self._dirty
        self._all_dirty, self._dirty = False, set()
        return all_dirty, dirty

    def existing(self, name: str, prod: bool, agg_type: str = "", duration: float = 0.0) -> Vec | None:
        """Existing load of a node, or None ("not found": no entry or no NodeMetric)."""
        with self.lock:
            n = self._nodes.get(name)
            if n is None or n.metric is None:
                return None
            return n.existing(prod, agg_type, duration)

    def pods_on_node(self, name: str) -> list[AssignedPod]:
        with self.lock:
            n = self._nodes.get(name)
            return list(n.pods.values()) if n is not None else []

    def node_names(self) -> Iterable[str]:
        with self.lock:
            return list(self._nodes)
