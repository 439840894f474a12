"""CPUSuppress (reference A.7.2): keep best-effort pods within what the latency-sensitive ones leave.

Every ``--cpu-suppress-interval-seconds`` (gate ``BECPUSuppress``, on by default), with NodeSLO
``resourceUsedThresholdWithBE.enable: true``:

    suppress (milli) = capacity × cpuSuppressThresholdPercent% − non-BE pod usage − non-BE host-app usage
                       − max(node usage − all pods − all host apps, 0, node reserved)

raised to capacity × cpuSuppressMinPercent% when that is set. Policy ``cpuset`` (default) shrinks or
grows the BE cpuset (QoS dir, pods, containers) to ceil(suppress) CPUs (at least 2, growing by at
most 10% of the CPUs per round, never LSE-pinned, reserved or exclusive system-QoS CPUs), policy
``cfsQuota`` sets the BE QoS dir's CFS quota (at least 2000, changes under 1% of the node ignored,
growth at most 10% of the node per round). The policy not in use, or both when the NodeSLO switch is
off, is restored once: the BE cpuset back to every usable CPU, the quota back to unlimited.

A NodeSLO percent out of [0, 100] or not an integer is ignored (threshold: default 65; minimum: unset),
with a warning once per value: the manager's ConfigMap validation refuses such values, so one that
arrives anyway is not trusted.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any, Mapping

from koordinator.apis.extension import QOS_LSE, QOS_LSR, qos_class
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.qosmanager import helpers
from koordinator_roles.koordlet.qosmanager.cpupick import be_suppress_cpus
from koordinator_roles.koordlet.qosmanager.framework import Strategy, threshold_enabled
from koordinator_roles.koordlet.resourceexecutor.executor import CgroupUpdate
from koordinator_roles.koordlet.system.cgroup import BEST_EFFORT
from koordinator_roles.koordlet.system.cpuset import format_cpuset, parse_cpuset
from koordinator_roles.koordlet.system.resources import CFS_BASE_PERIOD, CPU_CFS_QUOTA, CPUSET_CPUS

log = logging.getLogger("koordinator.koordlet.qosmanager.cpusuppress")

NAME = "CPUSuppress"
POLICY_CPUSET = "cpuset"
POLICY_CFS_QUOTA = "cfsQuota"
DEFAULT_THRESHOLD_PERCENT = 65
BE_MIN_CPUSET_CORES = 2
BE_MIN_QUOTA = 2000
MAX_INCREASE_RATIO = 0.1      # per round, of the node's CPUs
MIN_QUOTA_DELTA_RATIO = 0.01  # quota changes smaller than this share of the node are skipped
_USING, _RECOVERED = "using", "recovered"


class CPUSuppress(Strategy):
    """The CPUSuppress strategy; :meth:`suppress_milli` and :meth:`be_cpuset` are its pure parts."""

    name = NAME

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        # Per policy: "using" or "recovered"; absent = unknown (restored once at the first round).
        self.status: dict[str, str] = {}
        self._warned: set[tuple[str, Any]] = set()

    @property
    def interval(self) -> float:
        return self.ctx.options.cpu_suppress_interval

    def enabled(self) -> bool:
        return bool(self.ctx.gates.get("BECPUSuppress")) and self.interval > 0

    # -- one round -----------------------------------------------------------------------------------

    def run_once(self) -> None:
        states = self.ctx.states
        node = states.node()
        if node is None:
            return
        slo = states.node_slo()
        if not threshold_enabled(slo):
            self.recover_cfs_quota()
            self.recover_cpuset(node)
            return
        threshold = slo.get("resourceUsedThresholdWithBE") or {}
        suppress = self.suppress_milli(node, threshold)
        if suppress is None:
            return
        if threshold.get("cpuSuppressPolicy") == POLICY_CFS_QUOTA:
            self.adjust_by_cfs_quota(suppress, node)
            self.status[POLICY_CFS_QUOTA] = _USING
            self.recover_cpuset(node)
        else:  # cpuset, and anything unknown (as Koordinator)
            self.adjust_by_cpuset(suppress, node)
            self.status[POLICY_CPUSET] = _USING
            self.recover_cfs_quota()

    # -- the budget ----------------------------------------------------------------------------------

    def _percent(self, threshold: Mapping[str, Any], key: str, default: int | None) -> int | None:
        value = threshold.get(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 100:
            if (key, repr(value)) not in self._warned:
                self._warned.add((key, repr(value)))
                log.warning("NodeSLO resourceUsedThresholdWithBE.%s=%r is not an integer in [0, 100]; "
                            "using %s", key, value, default if default is not None else "none")
            return default
        return value

    def suppress_milli(self, node: Mapping[str, Any], threshold: Mapping[str, Any]) -> float | None:
        """The BE budget in milli-cores (may be negative), None when the node usage is not known yet."""
        ctx = self.ctx
        now = ctx.clock()
        window = 2 * max(self.interval, ctx.options.collect_interval)
        node_series = ctx.cache.query(kinds.NODE_CPU_USAGE, now - window, now)
        if not node_series:
            log.debug("cpu suppress: no node CPU usage in the last %.0fs; skipped", window)
            return None
        node_used = node_series.aggregate("last") * 1000
        pod_used = {uid: s.aggregate("last") * 1000 for uid, s in
                    ctx.cache.query_by(kinds.POD_CPU_USAGE, kinds.LABEL_POD_UID, now - window, now).items() if s}
        app_used = {name: s.aggregate("last") * 1000 for name, s in
                    ctx.cache.query_by(kinds.HOST_APPLICATION_CPU_USAGE, kinds.LABEL_HOST_APP_NAME,
                                       now - window, now).items() if s}
        pods = [p.pod for p in ctx.states.pods()]
        non_be_pods, non_be_apps, system = helpers.calculate_filter_pods_used(
            node_used, helpers.node_reserved_milli_cpu(node), pods, pod_used, ctx.states.host_applications(),
            app_used, helpers.is_non_be_pod, helpers.is_non_be_host_app)
        capacity = helpers.node_capacity_milli_cpu(node)
        percent = self._percent(threshold, "cpuSuppressThresholdPercent", DEFAULT_THRESHOLD_PERCENT)
        suppress = capacity * percent / 100 - non_be_pods - non_be_apps - system
        min_percent = self._percent(threshold, "cpuSuppressMinPercent", None)
        if min_percent is not None:
            suppress = max(suppress, capacity * min_percent / 100)
        log.debug("cpu suppress: capacity=%dm threshold=%d%% nonBE pods=%.0fm host apps=%.0fm system=%.0fm "
                  "-> BE %.0fm", capacity, percent, non_be_pods, non_be_apps, system, suppress)
        return suppress

    # -- cpuset policy -------------------------------------------------------------------------------

    def _processors(self) -> list[Mapping[str, int]]:
        info = self.ctx.cache.get_kv(kinds.KV_NODE_CPU_INFO) or {}
        return list(info.get("cpus") or [])

    def _unusable(self, node: Mapping[str, Any]) -> set[int]:
        return helpers.node_reserved_cpus(node) | helpers.system_qos_exclusive_cpus(node)

    def be_cpuset(self, suppress_milli: float, node: Mapping[str, Any], old: list[int]) -> list[int]:
        """The BE CPUs for a budget (pick order, A.7.2 adjustByCPUSet); empty when they cannot be chosen."""
        processors = self._processors()
        unusable = self._unusable(node)
        lsr: set[int] = set()
        lse: set[int] = set()
        for meta in self.ctx.states.pods():
            qos = qos_class(meta.pod)
            if qos == QOS_LSR:
                lsr |= helpers.pod_cpuset(meta.pod)
            elif qos == QOS_LSE:
                lse |= helpers.pod_cpuset(meta.pod)
        lsr_cpus, ls_cpus = [], []
        for p in processors:
            if p["id"] in unusable or p["id"] in lse:
                continue
            (lsr_cpus if p["id"] in lsr else ls_cpus).append(p)
        cpus = max(math.ceil(suppress_milli / 1000), BE_MIN_CPUSET_CORES)
        max_increase = math.ceil(len(processors) * MAX_INCREASE_RATIO)
        if cpus - len(old) > max_increase:
            cpus = len(old) + max_increase
        pool = len(lsr_cpus) + len(ls_cpus)
        lsr_num = cpus * len(lsr_cpus) // pool if pool else 0
        return be_suppress_cpus(lsr_num, lsr_cpus) + be_suppress_cpus(cpus - lsr_num, ls_cpus)

    def adjust_by_cpuset(self, suppress_milli: float, node: Mapping[str, Any]) -> None:
        """Shrink or grow the BE cpuset to the budget (QoS dir, pods, containers; kubelet none policy)."""
        qos_dir = self.ctx.layout.qos_dir(BEST_EFFORT)
        current = self.ctx.executor.read(CPUSET_CPUS, qos_dir)
        old = parse_cpuset(current) if current else []
        cpus = self.be_cpuset(suppress_milli, node, old)
        if not cpus:
            log.warning("cpu suppress: no BE cpuset for %.0fm (too few usable CPUs); left as it is", suppress_milli)
            return
        self._apply_cpuset(cpus, f"suppress BE to {suppress_milli:.0f}m")

    def recover_cpuset(self, node: Mapping[str, Any]) -> None:
        """Once after the cpuset policy stops: BE cpuset back to all CPUs but LSE, reserved and exclusive ones."""
        if self.status.get(POLICY_CPUSET) == _RECOVERED:
            return
        processors = [p["id"] for p in self._processors()]
        if not processors:
            return      # CPU topology not collected yet: try again next round
        lse: set[int] = set()
        for meta in self.ctx.states.pods():
            if qos_class(meta.pod) == QOS_LSE:
                lse |= helpers.pod_cpuset(meta.pod)
        cpus = [c for c in processors if c not in lse and c not in self._unusable(node)]
        if cpus:
            self._apply_cpuset(cpus, "recover BE cpuset (suppress off or cfsQuota policy)")
        self.status[POLICY_CPUSET] = _RECOVERED

    def _apply_cpuset(self, cpus: list[int], reason: str) -> None:
        value = format_cpuset(cpus)
        levels = [[CgroupUpdate(CPUSET_CPUS, rel, value, NAME, reason) for rel in level]
                  for level in self._be_cpuset_dirs()]
        self.ctx.executor.leveled_update_batch(levels)

    def _be_cpuset_dirs(self) -> list[list[str]]:
        """The BE QoS dir, its pod dirs, their container dirs, as they are on disk (cpuset hierarchy)."""
        layout = self.ctx.layout
        qos_dir = layout.qos_dir(BEST_EFFORT)
        base = os.path.dirname(layout.path("cpuset", qos_dir, "x"))
        levels = [[qos_dir], [], []]
        for pod in _subdirs(base):
            levels[1].append(f"{qos_dir}/{pod}")
            levels[2].extend(f"{qos_dir}/{pod}/{c}" for c in _subdirs(os.path.join(base, pod)))
        return levels

    # -- cfsQuota policy -----------------------------------------------------------------------------

    def adjust_by_cfs_quota(self, suppress_milli: float, node: Mapping[str, Any]) -> None:
        """Set the BE QoS dir's CFS quota to the budget (A.7.2 adjustByCfsQuota)."""
        qos_dir = self.ctx.layout.qos_dir(BEST_EFFORT)
        new = max(int(suppress_milli * CFS_BASE_PERIOD / 1000), BE_MIN_QUOTA)
        text = self.ctx.executor.read(CPU_CFS_QUOTA, qos_dir)
        if text is None:
            return      # missing or unreadable: logged by the executor
        current = int(text)
        cores = math.ceil(helpers.node_capacity_milli_cpu(node) / 1000)
        min_delta = cores * CFS_BASE_PERIOD * MIN_QUOTA_DELTA_RATIO
        if abs(new - current) < min_delta and new != BE_MIN_QUOTA:
            return
        max_increase = cores * CFS_BASE_PERIOD * MAX_INCREASE_RATIO
        if new - current > max_increase and current != -1:
            new = int(current + max_increase)
        self.ctx.executor.update(CgroupUpdate(CPU_CFS_QUOTA, qos_dir, new, NAME,
                                              f"suppress BE to {suppress_milli:.0f}m"))

    def recover_cfs_quota(self) -> None:
        """Once after the cfsQuota policy stops: the BE QoS dir's quota back to unlimited."""
        if self.status.get(POLICY_CFS_QUOTA) == _RECOVERED:
            return
        result = self.ctx.executor.update(CgroupUpdate(CPU_CFS_QUOTA, self.ctx.layout.qos_dir(BEST_EFFORT), -1,
                                                       NAME, "recover BE quota (suppress off or cpuset policy)"))
        if result.value in ("written", "unchanged"):
            self.status[POLICY_CFS_QUOTA] = _RECOVERED


def _subdirs(path: str) -> list[str]:
    """Sorted child directories (hidden ones, e.g. a tree being built, left out); empty when unreadable."""
    try:
        with os.scandir(path) as it:
            return sorted(e.name for e in it if e.is_dir(follow_symlinks=False) and not e.name.startswith("."))
    except OSError:
        return []
