"""Node usage from NodeMetrics, allocatable and thresholds as amounts (reference §1.6.4 steps 2–3).

Amounts are integers in the units the reference computes with: milli-cores for ``cpu``, whole units
(``Quantity.Value()``: bytes, pods, devices) for everything else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from koordinator.apis import extension, quantity
from koordinator.apis.timestamps import parse_time

CPU = "cpu"
MEMORY = "memory"
PODS = "pods"
ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"

Obj = dict[str, Any]
Amounts = dict[str, int]

# Metric quantities repeat a lot across 50,000 pods ("100m", "512Mi"); parse each text once.
_PARSED: dict[tuple[bool | None, Any], int] = {}


def amount(resource: str, q: Any) -> int:
    """One quantity in the plugin's units (milli for cpu, whole units otherwise)."""
    cpu = resource == CPU
    key = (cpu, q)
    try:
        return _PARSED[key]
    except KeyError:
        pass
    except TypeError:  # unhashable: not a quantity the parser takes either
        return 0
    try:
        v = quantity.milli_value(q) if cpu else quantity.value(q)
    except (ValueError, TypeError):
        v = 0
    if len(_PARSED) < 100_000:
        _PARSED[key] = v
    return v


def milli(q: Any) -> int:
    """``Quantity.MilliValue()`` of a quantity (0 when it is not one), memoized like :func:`amount`."""
    key = (None, q)
    try:
        return _PARSED[key]
    except KeyError:
        pass
    except TypeError:
        return 0
    try:
        v = quantity.milli_value(q)
    except (ValueError, TypeError):
        v = 0
    if len(_PARSED) < 100_000:
        _PARSED[key] = v
    return v


def amounts(raw: Mapping[str, Any] | None, names: Iterable[str] | None = None) -> Amounts:
    """A ResourceList in the plugin's units; with ``names``, only those (absent ones are left out)."""
    raw = raw or {}
    if names is None:
        out = {}
        for r, q in raw.items():
            try:
                v = _PARSED.get((r == CPU, q))
            except TypeError:
                v = 0
            out[r] = v if v is not None else amount(r, q)
        return out
    return {r: amount(r, raw[r]) for r in names if r in raw}


def node_allocatable(node: Obj) -> Amounts:
    """``node.koordinator.sh/raw-allocatable`` (JSON ResourceList) when present and parseable, else
    ``status.allocatable``: with CPU normalization/amplification the raw amounts are the real capacity."""
    raw = ((node.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RAW_ALLOCATABLE)
    if raw:
        try:
            parsed = json.loads(raw)
            if isinstance(parsed, dict):
                return amounts(parsed)
        except ValueError:
            pass
    return amounts((node.get("status") or {}).get("allocatable"))


def metric_is_fresh(metric: Obj | None, now: float, expiration_seconds: int) -> bool:
    """A NodeMetric usable this round: it has ``status.nodeMetric`` and ``now − updateTime`` is below the limit."""
    if not metric:
        return False
    status = metric.get("status") or {}
    if status.get("nodeMetric") is None:
        return False
    updated = parse_time(status.get("updateTime"))
    return updated is not None and now - updated < expiration_seconds


def is_prod(pod: Obj) -> bool:
    """The pod's Koordinator priority class, defaulted from QoS, is koord-prod."""
    return extension.priority_class_with_default(pod) == extension.PRIORITY_PROD


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


@dataclass
class NodeUsage:
    """One node this round: its usage (node and prod), allocatable, pods and per-pod metrics."""

    node: Obj
    name: str
    allocatable: Amounts
    usage: Amounts
    prod_usage: Amounts
    pods: list[Obj]
    prod_pods: list[Obj]
    #: ``namespace/name`` -> the pod's usage (every podsMetric entry, in the plugin's units).
    pod_metrics: dict[str, Amounts] = field(default_factory=dict)

    @property
    def unschedulable(self) -> bool:
        return bool((self.node.get("spec") or {}).get("unschedulable"))


def node_usage(node: Obj, metric: Obj, pods: list[Obj], resources: list[str]) -> NodeUsage:
    """Usage per resource = systemUsage + Σ every podsMetric entry (host applications excluded, pods gone from
    the node still counted); prod usage = Σ the metrics of the node's prod pods; ``pods`` = the pod counts."""
    status = metric.get("status") or {}
    system = (status.get("nodeMetric") or {}).get("systemUsage")
    pod_metrics: dict[str, Amounts] = {}
    for entry in status.get("podsMetric") or ():
        key = f"{entry.get('namespace', '')}/{entry.get('name', '')}"
        pod_metrics[key] = amounts(_resource_map(entry.get("podUsage")))
    prod_pods = [p for p in pods if is_prod(p)]
    usage: Amounts = {}
    prod_usage: Amounts = {}
    system_amounts = amounts(_resource_map(system), resources)
    prod_keys = [pod_key(p) for p in prod_pods]
    for r in resources:
        total = system_amounts.get(r, 0)
        for m in pod_metrics.values():
            total += m.get(r, 0)
        usage[r] = total
        prod = 0
        for k in prod_keys:
            m = pod_metrics.get(k)
            if m is not None:
                prod += m.get(r, 0)
        prod_usage[r] = prod
    usage[PODS] = len(pods)
    prod_usage[PODS] = len(prod_pods)
    return NodeUsage(node=node, name=(node.get("metadata") or {}).get("name", ""),
                     allocatable=node_allocatable(node), usage=usage, prod_usage=prod_usage, pods=pods,
                     prod_pods=prod_pods, pod_metrics=pod_metrics)


def _resource_map(raw: Any) -> Mapping[str, Any]:
    """The ResourceList of a NodeMetric ResourceMap (``{"resources": {...}, "devices": [...]}``)."""
    if not isinstance(raw, dict):
        return {}
    resources = raw.get("resources")
    return resources if isinstance(resources, dict) else {}


def collect(nodes: list[Obj], metric_of: Callable[[str], Obj | None], pods_of: Callable[[str], list[Obj]],
            resources: list[str], now: float, expiration_seconds: int) -> dict[str, NodeUsage]:
    """Usage of every node with a fresh NodeMetric (the others are left out of the round entirely)."""
    out: dict[str, NodeUsage] = {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name", "")
        metric = metric_of(name)
        if not metric_is_fresh(metric, now, expiration_seconds):
            continue
        out[name] = node_usage(node, metric, pods_of(name), resources)
    return out
