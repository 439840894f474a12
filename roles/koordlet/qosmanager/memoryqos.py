"""CgroupReconcile — memory QoS (reference A.7.10): memory.min/low/high and the Anolis memcg knobs.

Every ``--reconcile-interval-seconds`` (gate ``CgroupReconcile``, off by default), from NodeSLO
``resourceQOSStrategy.<class>.memoryQOS`` (LSE/LSR → lsrClass, LS → lsClass, BE → beClass, SYSTEM →
systemClass; no QoS label: from the Kubernetes QoS), overridden per pod by the
``koordinator.sh/memoryQOS`` annotation (policy ``none``: off; ``auto``: Koordinator's class defaults
under the pod's fields; else the node's config under the pod's fields). A class whose memoryQOS is not
enabled gets the "none" values (no protection, no throttling, kernel-default watermarks): switching it
off restores the node.

- pod dir: memory.min = request × minLimitPercent/100, memory.low = request × lowLimitPercent/100 (low
  raised to min when 0 < low < min), wmark_ratio, wmark_scale_factor (= wmarkScalePermill),
  wmark_min_adj, priority, use_priority_oom (= priorityEnable), oom.group (= oomKillGroup);
- container dirs: min and low from the container's request; memory.high = "max" when
  throttlingPercent is 0, else request + (limit − request) × throttlingPercent/100 rounded down to a
  page (no limit: the node's allocatable memory in its place), raised to min when below it;
- QoS dirs: min and low summed over their pods (the kubepods root, also the Guaranteed dir, over all
  pods), priority / use_priority_oom / oom.group of lsrClass, lsClass, beClass.

The request of a BE pod or container is its ``kubernetes.io/batch-memory``; of others the Kubernetes
memory request (pod: max(Σ containers, largest init container) + overhead). Writes are leveled
(kubepods, QoS dirs, pods, containers), min/low/high mergeable, so a child never exceeds its parent.

A file the kernel lacks (memory.min/low/high on v1 without Anolis, the wmark/priority files on
upstream kernels) is left out, all of them named in one log line; with none there, nothing is done.
A NodeSLO value outside its range (percents [0, 100], wmarkRatio [0, 100], wmarkScalePermill [1, 1000],
wmarkMinAdj [-25, 50], priority [0, 12], the switches {0, 1}) is ignored (not written) with one warning,
as Koordinator's executor refuses it.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Mapping

from koordinator.apis import quantity
from koordinator.apis.extension import (BATCH_MEMORY, KUBE_BEST_EFFORT, KUBE_BURSTABLE, KUBE_GUARANTEED, QOS_BE,
                                        QOS_LSE, QOS_LSR, QOS_LS, qos_class_with_default)
from koordinator.apis.nodeslo_defaults import QOS_CLASS_FIELDS, default_memory_qos, none_memory_qos
from koordinator.apis.slo_merge import merge_config
from koordinator_roles.koordlet.qosmanager import helpers
from koordinator_roles.koordlet.qosmanager.framework import Strategy
from koordinator_roles.koordlet.resourceexecutor.executor import CgroupUpdate
from koordinator_roles.koordlet.system.cgroup import BEST_EFFORT, BURSTABLE, GUARANTEED

log = logging.getLogger("koordinator.koordlet.qosmanager.memoryqos")

NAME = "CgroupReconcile"
ANNOTATION_MEMORY_QOS = "koordinator.sh/memoryQOS"
PAGE_SIZE = 4096
UNLIMITED = -1      # the registry writes "max" (v2) / -1 (v1) for it

MIN, LOW, HIGH = "memory.min", "memory.low", "memory.high"
#: (file, memoryQOS field, lowest, highest), in Koordinator's updater order after min/low/high.
KNOBS = (("memory.wmark_ratio", "wmarkRatio", 0, 100), ("memory.wmark_scale_factor", "wmarkScalePermill", 1, 1000),
         ("memory.wmark_min_adj", "wmarkMinAdj", -25, 50), ("memory.priority", "priority", 0, 12),
         ("memory.use_priority_oom", "priorityEnable", 0, 1), ("memory.oom.group", "oomKillGroup", 0, 1))
QOS_DIR_KNOBS = ("memory.priority", "memory.use_priority_oom", "memory.oom.group")
PERCENTS = ("minLimitPercent", "lowLimitPercent", "throttlingPercent")
ALL_FILES = (MIN, LOW, HIGH) + tuple(k[0] for k in KNOBS)
_KUBE_QOS_CLASS = {KUBE_GUARANTEED: QOS_LSR, KUBE_BURSTABLE: QOS_LS, KUBE_BEST_EFFORT: QOS_BE}


def _mem(value: Any) -> int:
    return quantity.value(value) if value is not None else 0


def container_memory(container: Mapping[str, Any], be: bool) -> tuple[int, int]:
    """(request, limit) in bytes: batch-memory for BE, else memory; request 0 and limit -1 when unset."""
    res = container.get("resources") or {}
    key = BATCH_MEMORY if be else "memory"
    req = (res.get("requests") or {}).get(key)
    lim = (res.get("limits") or {}).get(key)
    return _mem(req), (_mem(lim) if lim is not None else -1)


def pod_memory_request(pod: Mapping[str, Any], be: bool) -> int:
    """The pod's memory request in bytes (BE: Σ batch-memory; else max(Σ containers, max init) + overhead)."""
    spec = pod.get("spec") or {}
    total = sum(container_memory(c, be)[0] for c in spec.get("containers") or [])
    if be:
        return total
    init = max((container_memory(c, False)[0] for c in spec.get("initContainers") or []), default=0)
    return max(total, init) + _mem((spec.get("overhead") or {}).get("memory"))


class CgroupReconcile(Strategy):
    """Memory QoS on the pod, container and QoS cgroups; :meth:`pod_config` and :meth:`plan` are pure."""

    name = NAME

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._warned: set[tuple[str, str]] = set()
        self._missing_logged: frozenset[str] | None = None

    @property
    def interval(self) -> float:
        return self.ctx.options.reconcile_interval

    def enabled(self) -> bool:
        return bool(self.ctx.gates.get("CgroupReconcile")) and self.interval > 0

    # -- configuration -------------------------------------------------------------------------------

    def class_config(self, strategy: Mapping[str, Any], qos: str) -> dict[str, Any]:
        """The memoryQOS of QoS class ``qos`` (LSE uses lsrClass); "none" values unless enabled."""
        field = QOS_CLASS_FIELDS.get(QOS_LSR if qos == QOS_LSE else qos)
        cfg = dict(((strategy.get(field) or {}) if field else {}).get("memoryQOS") or {})
        return self._effective(cfg)

    def pod_config(self, strategy: Mapping[str, Any], pod: Mapping[str, Any]) -> dict[str, Any]:
        """The pod's memoryQOS: its class's, overridden by the ``koordinator.sh/memoryQOS`` annotation."""
        qos = qos_class_with_default(pod)
        override = helpers._json_annotation(pod, ANNOTATION_MEMORY_QOS)
        if not override:
            return self.class_config(strategy, qos)
        policy = override.pop("policy", "") or ""
        if policy == "none":
            return self._effective({"enable": False})
        if policy == "auto":
            base = {"enable": True, **(default_memory_qos(QOS_LSR if qos == QOS_LSE else qos)
                                       or none_memory_qos())}
        else:
            field = QOS_CLASS_FIELDS.get(QOS_LSR if qos == QOS_LSE else qos)
            base = dict(((strategy.get(field) or {}) if field else {}).get("memoryQOS") or {})
        return self._effective(merge_config(base, override))

    def _effective(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        if cfg.get("enable") is not True:
            return {"enable": False, **none_memory_qos()}
        out = dict(cfg)
        for key in PERCENTS:
            out[key] = self._checked(out, key, 0, 100)
        for _file, key, lo, hi in KNOBS:
            out[key] = self._checked(out, key, lo, hi)
        return out

    def _checked(self, cfg: Mapping[str, Any], key: str, lo: int, hi: int) -> int | None:
        value = cfg.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            if (key, repr(value)) not in self._warned:
                self._warned.add((key, repr(value)))
                log.warning("memoryQOS.%s=%r is not an integer in [%d, %d]; not written", key, value, lo, hi)
            return None
        return value

    # -- one round -----------------------------------------------------------------------------------

    def run_once(self) -> None:
        states = self.ctx.states
        node = states.node()
        if node is None:
            return
        supported = self._supported_files()
        if not supported:
            return
        strategy = (states.node_slo() or {}).get("resourceQOSStrategy") or {}
        levels = self.plan(strategy, node, states.pods())
        self.ctx.executor.leveled_update_batch(
            [[u for u in level if u.resource in supported] for level in levels])

    def _supported_files(self) -> set[str]:
        root = self.ctx.layout.qos_dir(GUARANTEED)
        present = {f for f in ALL_FILES if os.path.exists(self.ctx.executor.path(f, root))}
        missing = frozenset(ALL_FILES) - present
        if missing != self._missing_logged:
            if missing:
                what = "memory QoS" if not present else "these memory QoS files"
                log.warning("%s: %s not supported by this kernel (%s absent under %s); skipped", NAME, what,
                            ", ".join(sorted(missing)), self.ctx.executor.path(MIN, root).rsplit("/", 1)[0])
            self._missing_logged = missing
        return present

    def plan(self, strategy: Mapping[str, Any], node: Mapping[str, Any], metas: list[Any]) -> list[list[CgroupUpdate]]:
        """The leveled updates: [kubepods], [Burstable, BestEffort dirs], [pods], [containers]."""
        layout = self.ctx.layout
        allocatable = _mem(((node.get("status") or {}).get("allocatable") or {}).get("memory"))
        sums = {q: [0, 0] for q in (GUARANTEED, BURSTABLE, BEST_EFFORT)}
        pods: list[CgroupUpdate] = []
        containers: list[CgroupUpdate] = []
        for meta in metas:
            cfg = self.pod_config(strategy, meta.pod)
            be = qos_class_with_default(meta.pod) == QOS_BE
            reason = f"memoryQOS of {meta.namespace}/{meta.name}"
            req = pod_memory_request(meta.pod, be)
            pmin, plow = _protection(req, cfg)
            kube = meta.kube_qos if meta.kube_qos in sums else BURSTABLE
            sums[kube][0] += pmin or 0     # a percent ignored as invalid protects nothing
            sums[kube][1] += plow or 0
            pods += _updates(meta.cgroup_dir, cfg, reason, pmin, plow, None, [k[0] for k in KNOBS])
            specs = {c.get("name"): c for c in (meta.pod.get("spec") or {}).get("containers") or []}
            for cname, _cid, rel in meta.containers():
                creq, climit = container_memory(specs.get(cname) or {}, be)
                cmin, clow = _protection(creq, cfg)
                high = _high(creq, climit, allocatable, cfg, cmin)
                containers += _updates(rel, cfg, f"{reason} container {cname}", cmin, clow, high, [])
        qos_levels: list[list[CgroupUpdate]] = [[], []]
        for kube in (GUARANTEED, BURSTABLE, BEST_EFFORT):
            cfg = self.class_config(strategy, _KUBE_QOS_CLASS[kube])
            qmin, qlow = sums[kube]
            if kube == GUARANTEED:     # the kubepods root is every pod's ancestor
                qmin, qlow = (sum(s[0] for s in sums.values()), sum(s[1] for s in sums.values()))
            qos_levels[0 if kube == GUARANTEED else 1] += _updates(
                layout.qos_dir(kube), cfg, f"memoryQOS of QoS {kube}", qmin, qlow, None, QOS_DIR_KNOBS)
        return [qos_levels[0], qos_levels[1], pods, containers]


def _protection(req: int, cfg: Mapping[str, Any]) -> tuple[int | None, int | None]:
    min_pct, low_pct = cfg.get("minLimitPercent"), cfg.get("lowLimitPercent")
    mn = req * min_pct // 100 if min_pct is not None else None
    lo = req * low_pct // 100 if low_pct is not None else None
    if mn is not None and lo is not None and 0 < lo < mn:
        lo = mn
    return mn, lo


def _high(req: int, limit: int, allocatable: int, cfg: Mapping[str, Any], mn: int | None) -> int | None:
    pct = cfg.get("throttlingPercent")
    if pct is None:
        return None
    if pct == 0:
        return UNLIMITED
    ceiling = limit if limit > 0 else allocatable
    high = (req + (ceiling - req) * pct // 100) // PAGE_SIZE * PAGE_SIZE
    if mn is not None and 0 < high < mn:
        high = mn
    return high


def _updates(rel: str, cfg: Mapping[str, Any], reason: str, mn: int | None, lo: int | None, high: int | None,
             knobs: Any) -> list[CgroupUpdate]:
    out = []
    for name, value in ((MIN, mn), (LOW, lo), (HIGH, high)):
        if value is not None:
            out.append(CgroupUpdate(name, rel, value, NAME, reason))
    fields = {f: k for f, k, _lo, _hi in KNOBS}
    for name in knobs:
        value = cfg.get(fields[name])
        if value is not None:
            out.append(CgroupUpdate(name, rel, value, NAME, reason))
    return out
