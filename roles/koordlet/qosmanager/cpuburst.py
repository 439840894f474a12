"""CPUBurst (reference A.7.6): let LS pods borrow CPU beyond their limit while the node has it to spare.

Every ``--reconcile-interval-seconds`` (gate ``CPUBurst``, on by default), from NodeSLO
``cpuBurstStrategy`` (JSON-merged per pod with the ``koordinator.sh/cpuBurst`` annotation), for the
Pending/Running pods whose QoS label is not LSR, LSE or BE:

- **cfs burst** (policy ``cpuBurstOnly`` or ``auto``): each container with a CPU limit gets
  ``cpu.cfs_burst_us`` (v2 ``cpu.max.burst``) = limit cores × cpuBurstPercent/100 × 100000, the pod
  dir the sum; any other policy writes 0 (the burst is taken back).
- **CFS quota burst** (policy ``cfsQuotaBurstOnly`` or ``auto``): each running container with a CPU
  limit has its quota scaled ×1.2 when it was throttled, ×0.8 when its token bucket
  (:mod:`.burstlimiter`) is empty or the node's share pool is overloaded, within
  [limit quota, limit quota × cfsQuotaBurstPercent/100]; the pod quota moves by the same delta. Any
  other policy resets the quota to the limit's.

The share pool is what LSE/LSR pods did not reserve: usage (node − LSE/LSR/BE pods) over capacity
(CPUs − LSE/LSR requests), averaged over min(5 × interval, 10 s); at or above
sharePoolThresholdPercent it is overloaded, from 90 % of that "cooling" (no scaling up).

A kernel without the burst file (``cpu.cfs_burst_us`` / ``cpu.max.burst``) skips the cfs burst part
with one log line; the quota part does not need it. A NodeSLO value out of its range (cpuBurstPercent
[1, 10000], cfsQuotaBurstPercent ≥ 100, cfsQuotaBurstPeriodSeconds ≥ −1, sharePoolThresholdPercent
[0, 100]) or not an integer is ignored with one warning and the default used: the manager's validation
refuses such values, so one that arrives anyway is not trusted.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from koordinator.apis import quantity
from koordinator.apis.extension import QOS_BE, QOS_LSE, QOS_LSR, qos_class
from koordinator.apis.nodeslo_defaults import DEFAULT_CPU_BURST_STRATEGY
from koordinator.apis.slo_merge import merge_config
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.qosmanager import helpers
from koordinator_roles.koordlet.qosmanager.burstlimiter import BurstLimiter
from koordinator_roles.koordlet.qosmanager.framework import Strategy
from koordinator_roles.koordlet.qosmanager.kernel import FeatureLog
from koordinator_roles.koordlet.resourceexecutor.executor import CgroupUpdate
from koordinator_roles.koordlet.system.cgroup import GUARANTEED
from koordinator_roles.koordlet.system.resources import CFS_BASE_PERIOD, CFS_MIN_QUOTA, CPU_CFS_QUOTA

log = logging.getLogger("koordinator.koordlet.qosmanager.cpuburst")

NAME = "CPUBurst"
CPU_BURST = "cpu.cfs_burst_us"
ANNOTATION_CPU_BURST = "koordinator.sh/cpuBurst"
POLICY_NONE, POLICY_CPU_BURST_ONLY, POLICY_CFS_QUOTA_BURST_ONLY, POLICY_AUTO = (
    "none", "cpuBurstOnly", "cfsQuotaBurstOnly", "auto")
SCALE_UP, SCALE_DOWN = 1.2, 0.8
COOLING_RATIO = 0.9
MAX_WINDOW = 10.0
#: NodeSLO key -> (lowest, highest or None) accepted.
_RANGES = {"cpuBurstPercent": (1, 10000), "cfsQuotaBurstPercent": (100, None),
           "cfsQuotaBurstPeriodSeconds": (-1, None), "sharePoolThresholdPercent": (0, 100)}

OVERLOAD, COOLING, IDLE, UNKNOWN = "overload", "cooling", "idle", "unknown"
UP, DOWN, REMAIN, RESET = "up", "down", "remain", "reset"


def milli_cpu_to_quota(milli: int) -> int:
    """``MilliCPUToQuota`` (A.3.2): -1 for ≤ 0, at least 1000."""
    quota = milli * CFS_BASE_PERIOD // 1000
    if quota <= 0:
        return -1
    return max(quota, CFS_MIN_QUOTA)


def container_cpu_limits(pod: Mapping[str, Any]) -> dict[str, int]:
    """Container name → CPU limit in milli-cores, for the containers that have one."""
    out = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        limit = ((c.get("resources") or {}).get("limits") or {}).get("cpu")
        if limit is not None:
            milli = quantity.milli_value(limit)
            if milli > 0:
                out[c.get("name", "")] = milli
    return out


def _running(pod: Mapping[str, Any], name: str) -> bool:
    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        if status.get("name") == name:
            return "running" in (status.get("state") or {})
    return False


class CPUBurst(Strategy):
    """The CPUBurst strategy; :meth:`node_state`, :meth:`operation` and :meth:`target_quota` are its pure parts."""

    name = NAME

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.limiter = BurstLimiter()
        self.features = FeatureLog(log, NAME)
        self._warned: set[tuple[str, str]] = set()

    @property
    def interval(self) -> float:
        return self.ctx.options.reconcile_interval

    def enabled(self) -> bool:
        return bool(self.ctx.gates.get("CPUBurst")) and self.interval > 0

    # -- configuration -------------------------------------------------------------------------------

    def config(self, node_cfg: Mapping[str, Any] | None, pod: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The effective strategy: defaults ← NodeSLO ← the pod's annotation, out-of-range values dropped."""
        cfg = merge_config(dict(DEFAULT_CPU_BURST_STRATEGY), dict(node_cfg or {}))
        if pod is not None:
            override = helpers._json_annotation(pod, ANNOTATION_CPU_BURST)
            if override:
                cfg = merge_config(cfg, override)
        for key, (lo, hi) in _RANGES.items():
            value = cfg.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= lo and (hi is None or value <= hi):
                continue
            default = DEFAULT_CPU_BURST_STRATEGY[key]
            if (key, repr(value)) not in self._warned:
                self._warned.add((key, repr(value)))
                want = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
                log.warning("cpuBurstStrategy.%s=%r is not an integer in %s; using %s", key, value, want, default)
            cfg[key] = default
        return cfg

    # -- one round -----------------------------------------------------------------------------------

    def run_once(self) -> None:
        states = self.ctx.states
        if states.node() is None:
            return
        node_cfg = (states.node_slo() or {}).get("cpuBurstStrategy")
        metas = [m for m in states.pods() if self._considered(m.pod)]
        burst_ok = self.features.supported(
            "CPU burst", self.ctx.executor.path(CPU_BURST, self.ctx.layout.qos_dir(GUARANTEED)))
        state = None
        now = self.ctx.clock()
        figures: tuple[dict[str, float], dict[str, float]] | None = None
        for meta in metas:
            cfg = self.config(node_cfg, meta.pod)
            if burst_ok:
                self.apply_cfs_burst(meta, cfg)
            if state is None:
                state = self.node_state(self.config(node_cfg))
            if figures is None:  # one query per round for every container, not one per pod
                figures = self.container_figures(now)
            self.apply_quota_burst(meta, cfg, state, now, figures)
        self.limiter.expire(now, max(self.config(node_cfg)["cfsQuotaBurstPeriodSeconds"], 1))

    @staticmethod
    def _considered(pod: Mapping[str, Any]) -> bool:
        return (qos_class(pod) not in (QOS_LSR, QOS_LSE, QOS_BE)
                and (pod.get("status") or {}).get("phase") in ("Pending", "Running"))

    # -- cfs burst -----------------------------------------------------------------------------------

    def apply_cfs_burst(self, meta: Any, cfg: Mapping[str, Any]) -> None:
        """``cpu.cfs_burst_us`` of each container and of the pod (0 when the policy does not burst)."""
        on = cfg.get("policy") in (POLICY_CPU_BURST_ONLY, POLICY_AUTO)
        limits = container_cpu_limits(meta.pod)
        total = 0
        updates = []
        for name, _cid, rel in meta.containers():
            # limit cores × percent/100 × 100000 µs = limit milli-cores × percent, exactly.
            burst = limits.get(name, 0) * cfg["cpuBurstPercent"] if on else 0
            total += burst
            updates.append(CgroupUpdate(CPU_BURST, rel, burst, NAME, f"policy {cfg.get('policy')}"))
        reason = f"policy {cfg.get('policy')}, {cfg['cpuBurstPercent']}% of the limit"
        self.ctx.executor.update_batch([CgroupUpdate(CPU_BURST, meta.cgroup_dir, total, NAME, reason), *updates])

    # -- CFS quota burst -----------------------------------------------------------------------------

    def node_state(self, cfg: Mapping[str, Any]) -> str:
        """The share pool: overload, cooling, idle, or unknown without usage metrics."""
        ctx = self.ctx
        now = ctx.clock()
        window = min(5 * self.interval, MAX_WINDOW)
        node_series = ctx.cache.query(kinds.NODE_CPU_USAGE, now - window, now)
        if not node_series:
            return UNKNOWN
        pod_used = {uid: s.aggregate("avg") for uid, s in
                    ctx.cache.query_by(kinds.POD_CPU_USAGE, kinds.LABEL_POD_UID, now - window, now).items() if s}
        cpus = len((ctx.cache.get_kv(kinds.KV_NODE_CPU_INFO) or {}).get("cpus") or [])
        if not cpus:
            cpus = helpers.node_capacity_milli_cpu(ctx.states.node()) // 1000
        share_total = float(cpus)
        share_usage = node_series.aggregate("avg")
        for meta in ctx.states.pods():
            qos = qos_class(meta.pod)
            if qos in (QOS_LSE, QOS_LSR):
                share_total -= _pod_cpu_request_milli(meta.pod) / 1000
            if qos in (QOS_LSE, QOS_LSR, QOS_BE):
                share_usage -= pod_used.get(meta.uid, 0.0)
        ratio = share_usage / share_total if share_total > 0 else 1.0
        threshold = cfg["sharePoolThresholdPercent"] / 100
        if ratio >= threshold:
            return OVERLOAD
        if ratio >= COOLING_RATIO * threshold:
            return COOLING
        return IDLE

    def operation(self, cfg: Mapping[str, Any], allowed: bool, throttled: float | None, state: str) -> str:
        """What to do with one container's quota (A.7.6), the node state applied last."""
        if cfg.get("policy") not in (POLICY_CFS_QUOTA_BURST_ONLY, POLICY_AUTO):
            return RESET
        if not allowed:
            op = DOWN
        elif throttled is None:
            op = REMAIN
        elif throttled > 0:
            op = UP
        else:
            op = REMAIN
        if state == OVERLOAD and op in (UP, REMAIN):
            return DOWN
        if state in (COOLING, UNKNOWN) and op == UP:
            return REMAIN
        return op

    @staticmethod
    def target_quota(op: str, current: int, base: int, ceil: int) -> int:
        """The new quota for ``op`` from ``current``, within [base, ceil]."""
        if op == UP:
            target = int(current * SCALE_UP)
        elif op == DOWN:
            target = int(current * SCALE_DOWN)
        elif op == RESET:
            target = base
        else:
            target = current
        return min(max(target, base), ceil)

    def container_figures(self, now: float) -> tuple[dict[str, float], dict[str, float]]:
        """(last throttled ratio, average usage in cores) of every container over the recent window."""
        window = min(5 * self.interval, MAX_WINDOW)
        return (_by_container(self.ctx, kinds.CONTAINER_CPU_THROTTLED, now - window, now, "last"),
                _by_container(self.ctx, kinds.CONTAINER_CPU_USAGE, now - window, now, "avg"))

    def apply_quota_burst(self, meta: Any, cfg: Mapping[str, Any], state: str, now: float,
                          figures: tuple[dict[str, float], dict[str, float]]) -> None:
        """Scale each running container's quota (and the pod's by the same delta); ``figures`` are
        :meth:`container_figures` of this round."""
        ctx = self.ctx
        limits = container_cpu_limits(meta.pod)
        throttled, usage = figures
        for name, cid, rel in meta.containers():
            limit = limits.get(name)
            if not limit or not _running(meta.pod, name):
                continue
            text = ctx.executor.read(CPU_CFS_QUOTA, rel)
            if text is None or int(text) <= 0:
                continue      # no quota to scale (unlimited, or the cgroup is gone)
            current = int(text)
            base = milli_cpu_to_quota(limit)
            pct = cfg["cfsQuotaBurstPercent"]
            ceil = base * pct // 100 if pct > 100 else base
            allowed = True
            period = cfg["cfsQuotaBurstPeriodSeconds"]
            if period >= 0 and cid in usage:
                allowed = self.limiter.allow(cid, now, period, pct, usage[cid] * 1000 / limit * 100)
            op = self.operation(cfg, allowed, throttled.get(cid), state)
            target = self.target_quota(op, current, base, ceil)
            if target != current:
                self._scale(meta, rel, current, target, f"{op}: node {state}, policy {cfg.get('policy')}")

    def _scale(self, meta: Any, rel: str, current: int, target: int, reason: str) -> None:
        ex = self.ctx.executor
        delta = target - current
        pod_text = ex.read(CPU_CFS_QUOTA, meta.cgroup_dir)
        pod_quota = int(pod_text) if pod_text is not None else -1
        container = CgroupUpdate(CPU_CFS_QUOTA, rel, target, NAME, reason)
        if pod_quota <= 0:            # unlimited pod: only the container moves
            ex.update(container)
            return
        pod = CgroupUpdate(CPU_CFS_QUOTA, meta.cgroup_dir, pod_quota + delta, NAME, reason)
        # The child's quota may not exceed the parent's: raise the pod first, lower it last.
        ex.update_batch([pod, container] if delta > 0 else [container, pod])


def _by_container(ctx: Any, kind: str, start: float, end: float, how: str) -> dict[str, float]:
    return {cid: s.aggregate(how) for cid, s in
            ctx.cache.query_by(kind, kinds.LABEL_CONTAINER_ID, start, end).items() if s}


def _pod_cpu_request_milli(pod: Mapping[str, Any]) -> int:
    total = 0
    for c in (pod.get("spec") or {}).get("containers") or []:
        req = ((c.get("resources") or {}).get("requests") or {}).get("cpu")
        if req is not None:
            total += quantity.milli_value(req)
    return total
