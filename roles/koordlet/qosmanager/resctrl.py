"""ResctrlReconcile (reference A.7.7): L3 cache ways and memory bandwidth per QoS group (Intel RDT / AMD QoS).

Every ``--reconcile-interval-seconds`` (gate ``RdtResctrl``, on by default), under
``<sys-root>/fs/resctrl`` (resctrl mounted there):

- the groups ``LSR`` (LSE and LSR pods), ``LS`` and ``BE`` are created when missing;
- each group's ``schemata`` gets, from NodeSLO ``resourceQOSStrategy.<class>.resctrlQOS``:
  ``L3:<id>=<mask>;...`` for every L3 cache id, the mask covering ways
  [ceil(ways × catRangeStartPercent/100), ceil(ways × catRangeEndPercent/100)) of
  ``info/L3/cbm_mask``; and ``MB:<id>=<value>;...`` from mbaPercent (Intel: rounded up to a multiple
  of 10; AMD: 100 → 2048 "unlimited", else int(160 × percent/100));
- the threads of pods whose class has ``resctrlQOS.enable: true`` and that lack the
  ``node.koordinator.sh/resctrl`` annotation (a runtime hook places those) are appended to the
  group's ``tasks`` when not there yet: the tasks of every cgroup under the pod's dir (its containers
  and the sandbox), read from ``tasks`` (v1, cpu hierarchy) or ``cgroup.threads`` (v2).

Left out, as in Koordinator's reconciler: moving tasks back to the root group when a class is
disabled (the schemata of a disabled class reverts to the whole cache and bandwidth instead, the
NodeSLO merge giving it the "none" values), and mounting resctrl (the node must have it mounted).

Without resctrl (no ``schemata`` at the root) the strategy logs one line and does nothing; without L3
CAT or MBA (no ``info/L3`` / ``info/MB``) that line is left out of the schemata, logged once. A
percent range that is invalid (start < 0, end > 100, end ≤ start; mba outside (0, 100]) leaves that
line out for the group, with one warning.
"""

from __future__ import annotations

import logging
import math
import os
from typing import Any, Mapping

from koordinator.apis.extension import QOS_BE, QOS_LS, QOS_LSE, QOS_LSR, qos_class_with_default
from koordinator.apis.nodeslo_defaults import QOS_CLASS_FIELDS
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.qosmanager import helpers
from koordinator_roles.koordlet.qosmanager.framework import Strategy
from koordinator_roles.koordlet.qosmanager.kernel import FeatureLog
from koordinator_roles.koordlet.system.resources import HOST_FILES

log = logging.getLogger("koordinator.koordlet.qosmanager.resctrl")

NAME = "ResctrlReconcile"
ANNOTATION_RESCTRL = "node.koordinator.sh/resctrl"
GROUPS = (QOS_LSR, QOS_LS, QOS_BE)       # directory names = the class whose config they take
_GROUP_OF = {QOS_LSE: QOS_LSR, QOS_LSR: QOS_LSR, QOS_LS: QOS_LS, QOS_BE: QOS_BE}
AMD_MBA_UNLIMITED = 2048
AMD_MBA_MAX_GBPS = 160      # 25 GB/s × 8 × 0.8 per CCD


class InvalidRange(ValueError):
    """A resctrlQOS percent the schemata cannot express; the message names the values."""


def l3_mask(cbm: int, start: int, end: int) -> str:
    """The hex CBM (no 0x) for ways [ceil(ways × start/100), ceil(ways × end/100)) of ``cbm``."""
    if start < 0 or end > 100 or end <= start:
        raise InvalidRange(f"catRangeStartPercent={start} catRangeEndPercent={end}: want 0 <= start < end <= 100")
    if cbm <= 0 or cbm & (cbm + 1):
        raise InvalidRange(f"cbm_mask {cbm:x} is not contiguous from bit 0")
    ways = cbm.bit_length()
    first, last = math.ceil(ways * start / 100), math.ceil(ways * end / 100)
    return format((1 << last) - (1 << first), "x")


def mba_value(percent: int, amd: bool) -> int:
    """The ``MB:`` value for ``percent`` (0, 100]: Intel a multiple of 10 rounded up, AMD in Gbps (2048 = all)."""
    if not 0 < percent <= 100:
        raise InvalidRange(f"mbaPercent={percent}: want (0, 100]")
    if amd:
        return AMD_MBA_UNLIMITED if percent == 100 else int(AMD_MBA_MAX_GBPS * percent / 100)
    return math.ceil(percent / 10) * 10


def _ids(schemata: str, resource: str) -> list[str]:
    """The domain ids of one resource's line in a schemata text (``L3:0=fff;1=fff`` → ``["0", "1"]``)."""
    for line in schemata.splitlines():
        name, _, rest = line.strip().partition(":")
        if name == resource:
            return [part.split("=", 1)[0] for part in rest.split(";") if "=" in part]
    return []


class ResctrlReconcile(Strategy):
    """The resctrl reconciler; :meth:`schemata` is its pure part."""

    name = NAME

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.features = FeatureLog(log, NAME)
        self._warned: set[str] = set()

    @property
    def interval(self) -> float:
        return self.ctx.options.reconcile_interval

    def enabled(self) -> bool:
        return bool(self.ctx.gates.get("RdtResctrl")) and self.interval > 0

    @property
    def root(self) -> str:
        return os.path.join(self.ctx.sys_root, "fs", "resctrl")

    def _read(self, *parts: str) -> str | None:
        try:
            with open(os.path.join(self.root, *parts), encoding="ascii") as f:
                return f.read()
        except OSError:
            return None

    def _amd(self) -> bool:
        vendor = str((self.ctx.cache.get_kv(kinds.KV_NODE_CPU_INFO) or {}).get("vendor") or "")
        return "AMD" in vendor.upper()

    def schemata(self, cfg: Mapping[str, Any], group: str, cbm: int | None, l3_ids: list[str],
                 mb_ids: list[str], amd: bool) -> str:
        """The group's schemata text (L3 and/or MB lines); a line with an invalid range is left out (warned)."""
        lines = []
        try:
            if cbm is not None and l3_ids and cfg.get("catRangeStartPercent") is not None \
                    and cfg.get("catRangeEndPercent") is not None:
                mask = l3_mask(cbm, int(cfg["catRangeStartPercent"]), int(cfg["catRangeEndPercent"]))
                lines.append("L3:" + ";".join(f"{i}={mask}" for i in l3_ids))
        except (InvalidRange, TypeError, ValueError) as err:
            self._warn(f"{group} L3: {err}")
        try:
            if mb_ids and cfg.get("mbaPercent") is not None:
                value = mba_value(int(cfg["mbaPercent"]), amd)
                lines.append("MB:" + ";".join(f"{i}={value}" for i in mb_ids))
        except (InvalidRange, TypeError, ValueError) as err:
            self._warn(f"{group} MB: {err}")
        return "\n".join(lines)

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s: resctrlQOS of group %s; line left out", NAME, message)

    def run_once(self) -> None:
        if not self.features.supported("resctrl", os.path.join(self.root, "schemata")):
            return
        root_schemata = self._read("schemata") or ""
        cbm = None
        l3_ids: list[str] = []
        if self.features.supported("L3 CAT", os.path.join(self.root, "info", "L3", "cbm_mask")):
            try:
                cbm = int((self._read("info", "L3", "cbm_mask") or "").strip(), 16)
                l3_ids = _ids(root_schemata, "L3")
            except ValueError:
                self._warn("root: info/L3/cbm_mask unreadable")
        mb_ids = _ids(root_schemata, "MB") if self.features.supported(
            "MBA", os.path.join(self.root, "info", "MB")) else []
        strategy = (self.ctx.states.node_slo() or {}).get("resourceQOSStrategy") or {}
        amd = self._amd()
        res = HOST_FILES["resctrl.schemata"]
        for group in GROUPS:
            cfg = ((strategy.get(QOS_CLASS_FIELDS[group]) or {}).get("resctrlQOS")) or {}
            text = self.schemata(cfg, group, cbm, l3_ids, mb_ids, amd)
            if not text:
                continue
            gdir = os.path.join(self.root, group)
            if not os.path.isdir(gdir):
                os.makedirs(gdir, exist_ok=True)     # the kernel fills in the group's files
                log.info("%s: created resctrl group %s", NAME, gdir)
            self.ctx.executor.update_file(res, os.path.join(gdir, "schemata"), text, NAME,
                                          f"resctrlQOS of {QOS_CLASS_FIELDS[group]}")
        self.add_tasks(strategy)

    # -- tasks ---------------------------------------------------------------------------------------

    def add_tasks(self, strategy: Mapping[str, Any]) -> None:
        """Append the threads of the enabled classes' pods to their group's ``tasks``."""
        new: dict[str, list[int]] = {g: [] for g in GROUPS}
        known: dict[str, set[int]] = {}
        for meta in self.ctx.states.pods():
            pod = meta.pod
            group = _GROUP_OF.get(qos_class_with_default(pod))
            if group is None or helpers._annotations(pod).get(ANNOTATION_RESCTRL):
                continue
            if (pod.get("status") or {}).get("phase") not in ("Pending", "Running"):
                continue
            cfg = (strategy.get(QOS_CLASS_FIELDS[group]) or {}).get("resctrlQOS") or {}
            if cfg.get("enable") is not True or not os.path.isdir(os.path.join(self.root, group)):
                continue
            if group not in known:
                known[group] = {int(t) for t in (self._read(group, "tasks") or "").split() if t.isdigit()}
            for tid in self.pod_threads(meta.cgroup_dir):
                if tid not in known[group]:
                    known[group].add(tid)
                    new[group].append(tid)
        res = HOST_FILES["resctrl.tasks"]
        for group, tids in new.items():
            if tids:
                self.ctx.executor.append_file(res, os.path.join(self.root, group, "tasks"), tids, NAME,
                                              f"threads of {QOS_CLASS_FIELDS[group]} pods")

    def pod_threads(self, pod_dir: str) -> list[int]:
        """Thread ids of every cgroup below the pod's (containers, sandbox), in directory order."""
        layout = self.ctx.layout
        filename = "tasks" if layout.version == 1 else "cgroup.threads"
        base = os.path.dirname(layout.path("cpu", pod_dir, filename))
        out: list[int] = []
        for top, dirs, files in os.walk(base):
            dirs.sort()
            if top == base or filename not in files:
                continue
            try:
                with open(os.path.join(top, filename), encoding="ascii") as f:
                    out += [int(t) for t in f.read().split() if t.isdigit()]
            except OSError:
                continue      # the container went away meanwhile
        return out
