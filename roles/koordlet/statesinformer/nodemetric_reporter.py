"""NodeMetric status reporting (reference A.6.3).

Every report interval (the NodeMetric spec's ``reportIntervalSeconds``, at least 30 s, or the
``--report-interval`` override) — and once as soon as the first collection window is in, where
Koordinator first sleeps a whole interval — the reporter aggregates the metric cache over the spec's
windows and replaces the whole ``status`` of the NodeMetric named after the node:

- ``nodeMetric.nodeUsage`` / ``systemUsage``: averages over ``aggregateDurationSeconds``;
- ``nodeMetric.aggregatedNodeUsages`` / ``aggregatedSystemUsages``: avg, p50, p90, p95, p99 per window
  of ``nodeAggregatePolicy.durations``; a window whose series spans less than half of it is a cold
  start and gets its ``duration`` only;
- ``nodeMetric.numaUsages``: per NUMA node, sorted by id;
- ``podsMetric``: every pod with both CPU and memory samples, with its priority and QoS class (with
  defaults), sorted by namespace and name;
- ``hostApplicationMetric``: per NodeSLO host application, sorted by name;
- ``prodReclaimableMetric`` / ``prodPeakMetric``: from the predictor, left out while it is not ready;
- ``updateTime``: now.

CPU is written in milli-cores (``int(cores * 1000)``), memory in bytes. Nothing is written before the
NodeMetric object has been seen; writes are rate limited (token bucket, 0.1 qps, burst 2, a round
without a token is skipped; an explicit ``--report-interval`` raises the rate to match it) and retried
on conflict with the object read again.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from datetime import datetime, timezone
from decimal import Decimal
from typing import Any, Callable

from koordinator.apis import quantity
from koordinator.apis.device import GPU_CORE, GPU_MEMORY, GPU_MEMORY_RATIO
from koordinator.apis.extension import priority_class_with_default, qos_class_with_default
from koordinator.apis.goduration import format_go_duration, parse_go_duration
from koordinator.apis.nodeslo_defaults import MEMORY_POLICY_WITH_PAGE_CACHE
from koordinator.runtime import errors
from koordinator.runtime.ratelimit import TokenBucket
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metriccache.model import MetricCacheError, Series
from koordinator_roles.koordlet.statesinformer.nodemetric_spec import aggregate_durations
from koordinator_roles.koordlet.statesinformer.problems import TaskProblem

log = logging.getLogger("koordinator.koordlet.statesinformer.nodemetric")

Obj = dict[str, Any]

AGGREGATIONS = ("avg", "p50", "p90", "p95", "p99")
_PERCENTILES = AGGREGATIONS[1:]
RATE_LIMIT_QPS = 0.1
RATE_LIMIT_BURST = 2
CONFLICT_ATTEMPTS = 4
# How often a starting reporter looks whether its first collection window is in.
FIRST_REPORT_POLL_SECONDS = 0.5

# nodeMemoryCollectPolicy -> (node, pod, host application) memory kinds. usageWithHotPageCache needs
# the cold page collector, which this build does not have: it falls back to usage without page cache.
_MEMORY_KINDS = {
    MEMORY_POLICY_WITH_PAGE_CACHE: (kinds.NODE_MEMORY_USAGE_WITH_PAGE_CACHE, kinds.POD_MEMORY_USAGE_WITH_PAGE_CACHE,
                                    kinds.HOST_APPLICATION_MEMORY_USAGE_WITH_PAGE_CACHE),
}
_DEFAULT_MEMORY_KINDS = (kinds.NODE_MEMORY_USAGE, kinds.POD_MEMORY_USAGE, kinds.HOST_APPLICATION_MEMORY_USAGE)


def cpu_quantity(cores: float) -> str:
    """CPU cores as Koordinator writes them: ``NewMilliQuantity(int(cores * 1000))`` ("1500m", "2")."""
    return quantity.format_quantity(Decimal(int(cores * 1000)) / 1000)


def memory_quantity(size: float) -> str:
    """Bytes as Koordinator writes them: ``NewQuantity(int(bytes), BinarySI)`` ("1Gi", "1000000")."""
    return quantity.format_quantity(int(size), quantity.BINARY_SI)


def resource_map(cpu: float | None, memory: float | None) -> Obj:
    """A NodeMetric ``ResourceMap``: ``{"resources": {"cpu": ..., "memory": ...}}`` (absent values left out)."""
    resources: Obj = {}
    if cpu is not None:
        resources["cpu"] = cpu_quantity(cpu)
    if memory is not None:
        resources["memory"] = memory_quantity(memory)
    return {"resources": resources} if resources else {}


def format_time(ts: float) -> str:
    """``metav1.Time`` JSON: RFC 3339 in UTC, whole seconds."""
    return datetime.fromtimestamp(int(ts), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _avg(series: Series | None) -> float | None:
    return series.aggregate("avg") if series else None


class NodeMetricReporter:
    """Writes this node's NodeMetric status (see the module docstring); :meth:`run` is the loop.

    ``states`` is the :class:`~.states.StatesInformer`, ``cache`` the metric cache, ``predictor``
    anything with ``prod_reclaimable() -> (reclaimable, peak)`` (``{"cpu": milli, "memory": bytes}``
    each; any exception means "not ready"). ``report_interval`` (seconds) overrides the spec's
    interval (``--report-interval``). ``gpu`` adds GPU usage to ``nodeUsage.devices`` (gate
    ``Accelerators``). ``qps``/``burst`` size the write rate limiter: 0.1 qps, burst 2 by default; with
    ``report_interval`` the rate it asks for when that is higher.
    """

    def __init__(self, client: Any, states: Any, cache: Any, *, predictor: Any = None,
                 report_interval: float | None = None, gpu: bool = False, qps: float | None = None,
                 burst: int = RATE_LIMIT_BURST, clock: Callable[[], float] = time.time) -> None:
        if report_interval is not None and report_interval <= 0:
            raise ValueError(f"--report-interval: {report_interval!r} must be positive")
        if qps is None:
            # The limiter guards the API server from a spec asking for too many reports (the spec
            # cannot go below 30 s anyway); an explicit --report-interval is the operator's choice.
            qps = RATE_LIMIT_QPS if report_interval is None else max(RATE_LIMIT_QPS, 1.0 / report_interval)
        self.client = client
        self.states = states
        self.cache = cache
        self.predictor = predictor
        self.report_interval_override = report_interval
        self.gpu = gpu
        self.clock = clock
        self._bucket = TokenBucket(qps, burst)
        self._problems = TaskProblem(log, "NodeMetric status report")
        #: The status most recently written (for the Prometheus metrics), None before the first.
        self.last_reported: Obj | None = None
        self._prediction_problem: str | None = None

    # -- timing ------------------------------------------------------------------------------------

    def report_interval(self) -> float:
        """Seconds between reports: the override, else the spec's ``reportIntervalSeconds`` (≥ 30)."""
        if self.report_interval_override is not None:
            return self.report_interval_override
        return float(self.states.node_metric_spec()["metricCollectPolicy"]["reportIntervalSeconds"])

    def run(self, stop: threading.Event) -> None:
        """Report once the first collection window is in (at the latest after one interval), then sleep
        one interval, report, repeat until ``stop``."""
        # Koordinator sleeps a whole interval first; until a NodeMetric has an updateTime the scheduler's
        # LoadAwareScheduling filters the node out as expired and the manager computes no batch resources,
        # so a fresh node reports as soon as it has something to report.
        deadline = time.monotonic() + self.report_interval()
        while not self.first_window_ready() and time.monotonic() < deadline:
            if stop.wait(FIRST_REPORT_POLL_SECONDS):
                return
        self._sync_logged()
        while not stop.wait(self.report_interval()):
            self._sync_logged()

    def first_window_ready(self) -> bool:
        """Whether a first report has something to say: the NodeMetric is seen and the metric cache holds
        node CPU and memory usage of the current aggregation window."""
        if self.states.node_metric() is None:
            return False
        policy = self.states.node_metric_spec()["metricCollectPolicy"]
        node_mem = _MEMORY_KINDS.get(policy.get("nodeMemoryCollectPolicy"), _DEFAULT_MEMORY_KINDS)[0]
        now = self.clock()
        start = now - float(policy["aggregateDurationSeconds"])
        try:
            return bool(self.cache.query(kinds.NODE_CPU_USAGE, start, now)) and bool(
                self.cache.query(node_mem, start, now))
        except MetricCacheError:
            return False

    def _sync_logged(self) -> None:
        try:
            self.sync_once()
        except Exception:  # the next round may succeed; never end the loop
            log.exception("NodeMetric status report failed")

    # -- one round ---------------------------------------------------------------------------------

    def sync_once(self) -> bool:
        """Collect and write the status once; True when it was written."""
        current = self.states.node_metric()
        if current is None:
            log.debug("NodeMetric %s not seen yet, nothing reported", self.states.node_name)
            return False
        if not self._bucket.try_take():
            log.debug("NodeMetric status report rate limited, skipped this round")
            return False
        try:
            status = self.collect()
        except MetricCacheError as err:
            self._problems.problem(f"reading the metric cache failed: {err}")
            return False
        return self._write(current, status)

    def _write(self, current: Obj, status: Obj) -> bool:
        name = self.states.node_name
        for attempt in range(CONFLICT_ATTEMPTS):
            if attempt:
                try:
                    current = self.client.get("NodeMetric", name)
                except errors.NotFound:
                    log.debug("NodeMetric %s is gone, nothing reported", name)
                    return False
                except errors.ApiError as err:
                    self._problems.problem(f"reading NodeMetric {name} failed: {err}")
                    return False
            updated = {**current, "status": status}
            try:
                self.client.update_status(updated)
            except errors.Conflict:
                log.debug("NodeMetric %s changed meanwhile, retrying attempt=%d", name, attempt + 1)
                continue
            except errors.NotFound:
                log.debug("NodeMetric %s is gone, nothing reported", name)
                return False
            except errors.ApiError as err:
                self._problems.problem(f"updating NodeMetric {name} status failed: {err}")
                return False
            self._problems.ok()
            self.last_reported = status
            log.debug("reported NodeMetric %s status pods=%d", name, len(status.get("podsMetric") or []))
            return True
        self._problems.problem(f"updating NodeMetric {name} status: still conflicting after "
                               f"{CONFLICT_ATTEMPTS} attempts")
        return False

    # -- the status --------------------------------------------------------------------------------

    def collect(self, now: float | None = None) -> Obj:
        """The NodeMetric status at ``now`` (default: the clock) from the metric cache and the states."""
        now = self.clock() if now is None else now
        policy = self.states.node_metric_spec()["metricCollectPolicy"]
        window = float(policy["aggregateDurationSeconds"])
        start = now - window
        node_mem, pod_mem, app_mem = _MEMORY_KINDS.get(policy.get("nodeMemoryCollectPolicy"), _DEFAULT_MEMORY_KINDS)
        durations = aggregate_durations(policy)
        q = self.cache.query

        node_usage = resource_map(_avg(q(kinds.NODE_CPU_USAGE, start, now)), _avg(q(node_mem, start, now)))
        if self.gpu:
            devices = self._gpu_usage(start, now)
            if devices:
                node_usage["devices"] = devices
        node_metric: Obj = {"nodeUsage": node_usage}
        aggregated = [self._aggregated(kinds.NODE_CPU_USAGE, node_mem, text, seconds, now)
                      for text, seconds in durations]
        if aggregated:
            node_metric["aggregatedNodeUsages"] = aggregated
        system_usage = resource_map(_avg(q(kinds.SYS_CPU_USAGE, start, now)),
                                    _avg(q(kinds.SYS_MEMORY_USAGE, start, now)))
        node_metric["systemUsage"] = system_usage
        aggregated = [self._aggregated(kinds.SYS_CPU_USAGE, kinds.SYS_MEMORY_USAGE, text, seconds, now)
                      for text, seconds in durations]
        if aggregated:
            node_metric["aggregatedSystemUsages"] = aggregated
        numa = self._numa_usages(start, now)
        if numa:
            node_metric["numaUsages"] = numa

        status: Obj = {"updateTime": format_time(now), "nodeMetric": node_metric}
        pods = self._pods_metric(pod_mem, start, now)
        if pods:
            status["podsMetric"] = pods
        apps = self._host_app_metric(app_mem, start, now)
        if apps:
            status["hostApplicationMetric"] = apps
        self._prediction(status)
        return status

    def _aggregated(self, cpu_kind: str, mem_kind: str, text: str, seconds: float, now: float) -> Obj:
        entry: Obj = {"duration": format_go_duration(parse_go_duration(text))}
        cpu = self.cache.query(cpu_kind, now - seconds, now)
        mem = self.cache.query(mem_kind, now - seconds, now)
        # Cold start: a window the samples cover less than half of would misreport its percentiles.
        if not cpu or not mem or cpu.time_range() < seconds / 2 or mem.time_range() < seconds / 2:
            log.debug("%s/%s over %s: cold start, no aggregated usage", cpu_kind, mem_kind, text)
            return entry
        cpu_values = {"avg": cpu.aggregate("avg"), **cpu.percentiles(_PERCENTILES)}
        mem_values = {"avg": mem.aggregate("avg"), **mem.percentiles(_PERCENTILES)}
        entry["usage"] = {agg: resource_map(cpu_values[agg], mem_values[agg]) for agg in AGGREGATIONS}
        return entry

    def _numa_usages(self, start: float, now: float) -> list[Obj]:
        label = kinds.LABEL_NUMA_NODE_ID
        node_cpu = self.cache.query_by(kinds.NODE_NUMA_CPU_USAGE, label, start, now)
        node_mem = self.cache.query_by(kinds.NODE_NUMA_MEMORY_USAGE, label, start, now)
        sys_cpu = self.cache.query_by(kinds.SYS_NUMA_CPU_USAGE, label, start, now)
        sys_mem = self.cache.query_by(kinds.SYS_NUMA_MEMORY_USAGE, label, start, now)
        out = []
        for node_id in set(node_cpu) & set(node_mem):
            try:
                numa_id = int(node_id)
            except ValueError:
                log.debug("metric cache: NUMA node id %r is not a number, skipped", node_id)
                continue
            entry: Obj = {"numaNodeID": numa_id,
                          "nodeUsage": resource_map(_avg(node_cpu[node_id]), _avg(node_mem[node_id]))}
            if node_id in sys_cpu and node_id in sys_mem:
                entry["systemUsage"] = resource_map(_avg(sys_cpu[node_id]), _avg(sys_mem[node_id]))
            out.append(entry)
        out.sort(key=lambda e: e["numaNodeID"])
        return out

    def _pods_metric(self, mem_kind: str, start: float, now: float) -> list[Obj]:
        metas = self.states.pods()
        if not metas:
            return []
        cpu = self.cache.query_by(kinds.POD_CPU_USAGE, kinds.LABEL_POD_UID, start, now)
        mem = self.cache.query_by(mem_kind, kinds.LABEL_POD_UID, start, now)
        out = []
        for meta in metas:
            c, m = cpu.get(meta.uid), mem.get(meta.uid)
            if not c or not m:
                continue  # not collected (yet): Koordinator skips a pod whose query fails
            entry: Obj = {"namespace": meta.namespace, "name": meta.name, "podUsage": resource_map(_avg(c), _avg(m))}
            priority, qos = priority_class_with_default(meta.pod), qos_class_with_default(meta.pod)
            if priority:
                entry["priority"] = priority
            if qos:
                entry["qos"] = qos
            out.append(entry)
        out.sort(key=lambda e: (e["namespace"], e["name"]))
        return out

    def _host_app_metric(self, mem_kind: str, start: float, now: float) -> list[Obj]:
        apps = [a for a in self.states.host_applications() if isinstance(a, dict) and a.get("name")]
        if not apps:
            return []
        cpu = self.cache.query_by(kinds.HOST_APPLICATION_CPU_USAGE, kinds.LABEL_HOST_APP_NAME, start, now)
        mem = self.cache.query_by(mem_kind, kinds.LABEL_HOST_APP_NAME, start, now)
        out = []
        for app in apps:
            name = app["name"]
            c, m = cpu.get(name), mem.get(name)
            if not c or not m:
                continue
            entry: Obj = {"name": name, "usage": resource_map(_avg(c), _avg(m))}
            if app.get("priority"):
                entry["priority"] = app["priority"]
            if app.get("qos"):
                entry["qos"] = app["qos"]
            out.append(entry)
        out.sort(key=lambda e: e["name"])
        return out

    def _gpu_usage(self, start: float, now: float) -> list[Obj]:
        """GPU usage per device listed in the KV store (written by the Device reporter)."""
        devices = self.cache.get_kv(kinds.KV_GPU_DEVICES) or []
        out = []
        for dev in devices if isinstance(devices, list) else []:
            try:
                minor, uuid = str(dev["minor"]), str(dev["uuid"])
            except (KeyError, TypeError):
                continue
            labels = {kinds.LABEL_GPU_MINOR: minor, kinds.LABEL_GPU_DEVICE_UUID: uuid}
            core = _avg(self.cache.query(kinds.NODE_GPU_CORE_USAGE, start, now, **labels))
            used = _avg(self.cache.query(kinds.NODE_GPU_MEMORY_USAGE, start, now, **labels))
            total = _avg(self.cache.query(kinds.NODE_GPU_MEMORY_TOTAL, start, now, **labels))
            if core is None or used is None or not total:
                continue
            out.append({"id": uuid, "minor": int(minor), "type": "gpu", "health": True, "resources": {
                GPU_CORE: quantity.format_quantity(int(core)),
                GPU_MEMORY: memory_quantity(used),
                GPU_MEMORY_RATIO: quantity.format_quantity(int(100 * used / total)),
            }})
        out.sort(key=lambda d: d["minor"])
        return out

    def _prediction(self, status: Obj) -> None:
        if self.predictor is None:
            return
        try:
            reclaimable, peak = self.predictor.prod_reclaimable()
        except Exception as err:  # PredictionError while models warm up; anything else is logged too
            message = f"{type(err).__name__}: {err}"
            if message != self._prediction_problem:
                log.info("prod reclaimable not reported: %s", message)
                self._prediction_problem = message
            return
        self._prediction_problem = None
        status["prodReclaimableMetric"] = {"resource": _milli_resources(reclaimable)}
        status["prodPeakMetric"] = {"resource": _milli_resources(peak)}


def _milli_resources(values: Obj) -> Obj:
    """``{"cpu": milli, "memory": bytes}`` as a ResourceMap."""
    resources = {}
    if values.get("cpu") is not None:
        resources["cpu"] = quantity.format_quantity(Decimal(int(values["cpu"])) / 1000)
    if values.get("memory") is not None:
        resources["memory"] = memory_quantity(values["memory"])
    return {"resources": copy.deepcopy(resources)} if resources else {}
