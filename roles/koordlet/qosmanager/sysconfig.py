"""SystemConfig (reference A.7.9): node sysctls from NodeSLO ``systemStrategy``.

Every ``--reconcile-interval-seconds`` (gate ``SystemConfig``, off by default), each value only when
the NodeSLO sets it:

- ``<proc-root>/sys/vm/min_free_kbytes`` = capacity memory (kB) × minFreeKbytesFactor / 10000, skipped
  outside [10240, 10485760] kB (Koordinator's bounds: a wrong factor must not starve or waste memory);
- ``<proc-root>/sys/vm/watermark_scale_factor`` = watermarkScaleFactor, skipped outside [10, 400];
- ``<sys-root>/kernel/mm/memcg_reaper/reap_background`` = memcgReapBackGround, 0 or 1 (Anolis).

A value out of range is skipped with one warning per value. A file the kernel lacks is skipped with one
log line. When a field is removed from the NodeSLO, the value found before the first write is put back
once (Koordinator leaves its last value; we restore so that switching a tuning off really undoes it;
the original is remembered in memory only, so a koordlet restart in between keeps the tuned value).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Mapping

from koordinator.apis import quantity
from koordinator_roles.koordlet.qosmanager.framework import Strategy
from koordinator_roles.koordlet.qosmanager.kernel import FeatureLog
from koordinator_roles.koordlet.system.resources import HOST_FILES, InvalidValue

log = logging.getLogger("koordinator.koordlet.qosmanager.sysconfig")

NAME = "SystemConfigReconcile"
MIN_FREE_KBYTES, WATERMARK_SCALE_FACTOR, REAP_BACKGROUND = (
    "vm.min_free_kbytes", "vm.watermark_scale_factor", "memcg_reaper.reap_background")


class SystemConfig(Strategy):
    """The SystemConfig reconciler; :meth:`desired` is its pure part."""

    name = NAME

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self.features = FeatureLog(log, NAME)
        self.original: dict[str, str] = {}      # setting -> value before our first write
        self._warned: set[tuple[str, str]] = set()

    @property
    def interval(self) -> float:
        return self.ctx.options.reconcile_interval

    def enabled(self) -> bool:
        return bool(self.ctx.gates.get("SystemConfig")) and self.interval > 0

    def paths(self) -> dict[str, str]:
        """Setting → file under ``--proc-root`` / ``--sys-root``."""
        proc, sys = self.ctx.proc_root, self.ctx.sys_root
        return {MIN_FREE_KBYTES: os.path.join(proc, "sys/vm/min_free_kbytes"),
                WATERMARK_SCALE_FACTOR: os.path.join(proc, "sys/vm/watermark_scale_factor"),
                REAP_BACKGROUND: os.path.join(sys, "kernel/mm/memcg_reaper/reap_background")}

    def desired(self, strategy: Mapping[str, Any], node: Mapping[str, Any]) -> dict[str, int]:
        """The values to write (settings the NodeSLO leaves unset, or sets out of range, are absent)."""
        out: dict[str, int] = {}
        factor = strategy.get("minFreeKbytesFactor")
        if factor is not None:
            capacity = ((node.get("status") or {}).get("capacity") or {}).get("memory")
            if isinstance(factor, int) and not isinstance(factor, bool) and capacity is not None:
                out[MIN_FREE_KBYTES] = quantity.value(capacity) // 1024 * factor // 10000
            else:
                self._warn("minFreeKbytesFactor", factor, "not an integer, or the node has no memory capacity")
        for key, setting in (("watermarkScaleFactor", WATERMARK_SCALE_FACTOR), ("memcgReapBackGround", REAP_BACKGROUND)):
            value = strategy.get(key)
            if value is not None:
                out[setting] = value
        for setting, value in list(out.items()):
            try:
                HOST_FILES[setting].validate(value)
            except InvalidValue as err:
                self._warn(setting, value, str(err))
                del out[setting]
        return out

    def _warn(self, key: str, value: Any, why: str) -> None:
        if (key, repr(value)) not in self._warned:
            self._warned.add((key, repr(value)))
            log.warning("systemStrategy %s=%r skipped: %s", key, value, why)

    def run_once(self) -> None:
        node = self.ctx.states.node()
        if node is None:
            return
        strategy = (self.ctx.states.node_slo() or {}).get("systemStrategy") or {}
        want = self.desired(strategy, node)
        executor = self.ctx.executor
        for setting, path in self.paths().items():
            if setting not in want and setting not in self.original:
                continue
            if not self.features.supported(setting, path):
                continue
            res = HOST_FILES[setting]
            if setting in want:
                if setting not in self.original:
                    with open(path, encoding="ascii") as f:
                        self.original[setting] = f.read().strip()
                executor.update_file(res, path, want[setting], NAME, f"systemStrategy sets {setting}")
            else:
                # The kernel's own value may lie outside the bounds we impose on tuning (a small VM's
                # min_free_kbytes under 10240): put it back as it was, checked only as an integer.
                res = dataclasses.replace(res, check=_any_int)
                executor.update_file(res, path, self.original.pop(setting), NAME,
                                     f"systemStrategy no longer sets {setting}: restore")


def _any_int(name: str, value: object) -> str:
    try:
        return str(int(str(value).strip()))
    except ValueError:
        raise InvalidValue(f"{name}: invalid value {value!r}: not an integer") from None
