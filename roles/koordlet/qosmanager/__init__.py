"""The koordlet's QoS manager (reference A.7): strategies that enforce the NodeSLO on the node's cgroups.

- :mod:`.framework`: :class:`Strategy` (the interface), :class:`QOSContext`, :class:`QOSOptions`,
  :class:`QOSManager` (one runtime runnable per enabled strategy), :func:`threshold_enabled`;
- :mod:`.helpers`: shared helpers of reference A.7.1 (node reserved, non-BE usage, BE cpuset);
- :mod:`.cpusuppress`: CPUSuppress (A.7.2), both policies;
- :mod:`.cpuevict`, :mod:`.memoryevict` (A.7.3, A.7.4): the eviction triggers, pure decisions over
  :mod:`.evictpods` and :mod:`.allocatableevict`, executed by :mod:`.evictor` (A.7.5).

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

    return [CPUSuppress, CPUEvict, MemoryEvict]


def build(ctx: QOSContext) -> QOSManager:
    """A :class:`QOSManager` holding one instance of every strategy class on ``ctx``."""
    return QOSManager(ctx, [cls(ctx) for cls in strategy_classes()])
