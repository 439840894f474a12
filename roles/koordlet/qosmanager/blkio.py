"""BlkIOReconcile (reference A.7.8): disk throttles and weight for best-effort pods, iocost at the root.

Every ``--reconcile-interval-seconds`` (gate ``BlkIOReconcile``, off by default), cgroup v1 only (the
blkio files have no v2 counterpart in the registry, as in Koordinator), from NodeSLO
``resourceQOSStrategy``:

- ``beClass.blkioQOS`` (when enabled): for each block of type ``device`` the BE QoS dir gets
  ``blkio.throttle.{read,write}_{iops,bps}_device`` = ``"<major:minor> <value>"`` (readIOPS,
  readBPS, writeIOPS, writeBPS; 0 = unlimited) and ``blkio.cost.weight`` = ``"<major:minor>
  <ioWeightPercent|100>"``. A block removed from the NodeSLO, or the class disabled, is reset
  (throttles 0, weight 100).
- ``cgroupRoot.blkioQOS`` (when enabled): per ``device`` block the root's ``blkio.cost.qos`` =
  ``"<dev> enable=1 ctrl=user rpct=<readLatencyPercent|95> rlat=<readLatency|3000>
  wpct=<writeLatencyPercent|95> wlat=<writeLatency|3000>"`` and ``blkio.cost.model`` = ``"<dev>
  ctrl=user rbps=... rseqiops=... rrandiops=... wbps=... wseqiops=... wrandiops=..."`` with
  ``enableUserModel``, else ``"<dev> ctrl=auto"``.

A device name (``/dev/vdb``) becomes ``major:minor`` from ``<sys-root>/class/block/<name>/dev``.

Left out: blocks of type ``volumegroup`` and ``podvolume`` (they need the node's local storage
information, LVM volume groups and PVC→volume mapping, which this build does not collect) and the
per-pod ``koordinator.sh/blkioQOS`` annotation that only such volumes use; each such block is
skipped with one warning. The root's iocost settings are not reset when removed (the kernel has no
single "off" for a model once set). A file the kernel lacks (no iocost, v2) is skipped with one log
line; a value out of range (negative, weight outside [1, 100]) is not written, with one warning.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Mapping

from koordinator_roles.koordlet.qosmanager.framework import Strategy
from koordinator_roles.koordlet.qosmanager.kernel import FeatureLog
from koordinator_roles.koordlet.resourceexecutor.executor import CgroupUpdate
from koordinator_roles.koordlet.system.cgroup import BEST_EFFORT, GUARANTEED
from koordinator_roles.koordlet.system.resources import InvalidValue, resource

log = logging.getLogger("koordinator.koordlet.qosmanager.blkio")

NAME = "BlkIOReconcile"
THROTTLES = (("blkio.throttle.read_iops_device", "readIOPS"), ("blkio.throttle.read_bps_device", "readBPS"),
             ("blkio.throttle.write_iops_device", "writeIOPS"), ("blkio.throttle.write_bps_device", "writeBPS"))
WEIGHT = "blkio.cost.weight"
COST_QOS, COST_MODEL = "blkio.cost.qos", "blkio.cost.model"
DEFAULT_WEIGHT = 100
DEFAULT_LATENCY_PERCENT, DEFAULT_LATENCY = 95, 3000
_MODEL = (("rbps", "modelReadBPS"), ("rseqiops", "modelReadSeqIOPS"), ("rrandiops", "modelReadRandIOPS"),
          ("wbps", "modelWriteBPS"), ("wseqiops", "modelWriteSeqIOPS"), ("wrandiops", "modelWriteRandIOPS"))


class BlkIOReconcile(Strategy):
    """The blkio reconciler; :meth:`be_updates` and :meth:`root_updates` are its pure parts."""

    name = NAME

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.features = FeatureLog(log, NAME)
        self.applied: set[str] = set()       # devices the BE dir was last configured for
        self._warned: set[str] = set()

    @property
    def interval(self) -> float:
        return self.ctx.options.reconcile_interval

    def enabled(self) -> bool:
        return bool(self.ctx.gates.get("BlkIOReconcile")) and self.interval > 0

    def _warn(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s: %s", NAME, message)

    def device_number(self, block: Mapping[str, Any]) -> str | None:
        """``major:minor`` of a ``device`` block; None (warned once) for other types or unknown devices."""
        name, kind = str(block.get("name") or ""), block.get("type") or "device"
        if kind != "device":
            self._warn(f"block {name!r} of type {kind}: not supported in this build (needs local storage info)")
            return None
        try:
            with open(os.path.join(self.ctx.sys_root, "class", "block", os.path.basename(name), "dev")) as f:
                return f.read().strip()
        except OSError:
            self._warn(f"block device {name!r}: not found under {self.ctx.sys_root}/class/block; skipped")
            return None

    def _devices(self, qos: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        if qos.get("enable") is not True:
            return {}
        out = {}
        for block in qos.get("blocks") or []:
            dev = self.device_number(block) if isinstance(block, Mapping) else None
            if dev:
                out[dev] = block.get("ioCfg") or {}
        return out

    def be_updates(self, qos: Mapping[str, Any]) -> list[CgroupUpdate]:
        """The BE QoS dir's throttles and weight; devices configured before but not now are reset."""
        rel = self.ctx.layout.qos_dir(BEST_EFFORT)
        devices = self._devices(qos)
        out = []
        for dev in sorted(self.applied - devices.keys()):
            out += [CgroupUpdate(f, rel, f"{dev} 0", NAME, "block removed: reset") for f, _k in THROTTLES]
            out.append(CgroupUpdate(WEIGHT, rel, f"{dev} {DEFAULT_WEIGHT}", NAME, "block removed: reset"))
        for dev, cfg in sorted(devices.items()):
            out += [CgroupUpdate(f, rel, f"{dev} {cfg.get(k) or 0}", NAME, "beClass blkioQOS") for f, k in THROTTLES]
            out.append(CgroupUpdate(WEIGHT, rel, f"{dev} {cfg.get('ioWeightPercent') or DEFAULT_WEIGHT}", NAME,
                                    "beClass blkioQOS"))
        self.applied = set(devices)
        return out

    def root_updates(self, qos: Mapping[str, Any]) -> list[CgroupUpdate]:
        """The root cgroup's iocost QoS and model for each configured device."""
        out = []
        for dev, cfg in sorted(self._devices(qos).items()):
            params = (f"{dev} enable=1 ctrl=user rpct={cfg.get('readLatencyPercent') or DEFAULT_LATENCY_PERCENT} "
                      f"rlat={cfg.get('readLatency') or DEFAULT_LATENCY} "
                      f"wpct={cfg.get('writeLatencyPercent') or DEFAULT_LATENCY_PERCENT} "
                      f"wlat={cfg.get('writeLatency') or DEFAULT_LATENCY}")
            out.append(CgroupUpdate(COST_QOS, "", params, NAME, "cgroupRoot blkioQOS"))
            if cfg.get("enableUserModel"):
                model = " ".join(f"{k}={cfg.get(f) or 0}" for k, f in _MODEL)
                out.append(CgroupUpdate(COST_MODEL, "", f"{dev} ctrl=user {model}", NAME, "cgroupRoot blkioQOS"))
            else:
                out.append(CgroupUpdate(COST_MODEL, "", f"{dev} ctrl=auto", NAME, "cgroupRoot blkioQOS"))
        return out

    def _valid(self, updates: list[CgroupUpdate]) -> list[CgroupUpdate]:
        # Checked here, not only by the executor, so that a bad NodeSLO value warns once, not every round.
        out = []
        for u in updates:
            try:
                resource(u.resource).validate(u.value)
            except InvalidValue as err:
                self._warn(f"{err}; not written")
                continue
            out.append(u)
        return out

    def run_once(self) -> None:
        layout, ex = self.ctx.layout, self.ctx.executor
        if layout.version != 1:
            self.features.supported("blkio on cgroup v2", os.path.join(layout.cgroup_root, "blkio"))
            return
        strategy = (self.ctx.states.node_slo() or {}).get("resourceQOSStrategy") or {}
        kubepods = layout.qos_dir(GUARANTEED)
        if self.features.supported("blkio throttling", ex.path(THROTTLES[0][0], kubepods)):
            updates = self.be_updates(((strategy.get("beClass") or {}).get("blkioQOS")) or {})
            if not self.features.supported("iocost weight", ex.path(WEIGHT, kubepods)):
                updates = [u for u in updates if u.resource != WEIGHT]
            ex.update_batch(self._valid(updates))
        root = ((strategy.get("cgroupRoot") or {}).get("blkioQOS")) or {}
        if root.get("enable") is True and self.features.supported("iocost", ex.path(COST_QOS, "")):
            ex.update_batch(self._valid(self.root_updates(root)))
