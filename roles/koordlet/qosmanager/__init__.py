"""The koordlet's QoS manager (reference A.7): strategies that enforce the NodeSLO on the node's cgroups.

- :mod:`.framework`: :class:`Strategy` (the interface), :class:`QOSContext`, :class:`QOSOptions`,
  :class:`QOSManager` (one runtime runnable per enabled strategy), :func:`threshold_enabled`;
- :mod:`.helpers`: shared helpers of reference A.7.1 (node reserved, non-BE usage, BE cpuset);
- :mod:`.cpusuppress`: CPUSuppress (A.7.2), both policies;
- :mod:`.cpuevict`, :mod:`.memoryevict` (A.7.3, A.7.4): the eviction triggers, pure decisions over
  :mod:`.evictpods` and :mod:`.allocatableevict`, executed by :mod:`.evictor` (A.7.5);
- :mod:`.cpuburst` (A.7.6, with :mod:`.burstlimiter`), :mod:`.resctrl` (A.7.7), :mod:`.blkio` (A.7.8), :mod:`.memoryqos`
  (CgroupReconcile, A.7.10), :mod:`.sysconfig` (A.7.9): the reconcilers; :mod:`.kernel` logs once
  what the node's kernel lacks.

A new strategy is added to :func:`strategy_classes` (see :mod:`.framework` for the contract).
"""

from __future__ import annotations

from koordinator_roles.koordlet.qosmanager.framework import (QOSContext, QOSManager, QOSOptions, Strategy,
                                                             threshold_enabled)

__all__ = ["QOSContext", "QOSManager", "QOSOptions", "Strategy", "build", "strategy_classes",
           "threshold_enabled"]


def strategy_classes() -> list[type[Strategy]]:
    """Every strategy of this build, in Koordinator's registry order (A.7); each decides if it runs.

    Imported here, not at module level, so that importing the package stays cheap.
    """
    from koordinator_roles.koordlet.qosmanager.cpuevict import CPUEvict
    from koordinator_roles.koordlet.qosmanager.cpusuppress import CPUSuppress
    from koordinator_roles.koordlet.qosmanager.memoryevict import MemoryEvict
    from koordinator_roles.koordlet.qosmanager.cpuburst import CPUBurst
    from koordinator_roles.koordlet.qosmanager.resctrl import ResctrlReconcile
    from koordinator_roles.koordlet.qosmanager.memoryqos import CgroupReconcile
    from koordinator_roles.koordlet.qosmanager.sysconfig import SystemConfig
    from koordinator_roles.koordlet.qosmanager.blkio import BlkIOReconcile

    return [CPUSuppress, CPUEvict, MemoryEvict, CPUBurst, ResctrlReconcile, BlkIOReconcile, CgroupReconcile,
            SystemConfig]


def build(ctx: QOSContext) -> QOSManager:
    """A :class:`QOSManager` holding one instance of every strategy class on ``ctx``."""
    return QOSManager(ctx, [cls(ctx) for cls in strategy_classes()])
