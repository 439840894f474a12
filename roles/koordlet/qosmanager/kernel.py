"""Once-only reporting of a kernel feature a strategy needs but the node lacks (its file is absent).

A reconciler runs every second: a node without, say, ``cpu.cfs_burst_us`` would log the same warning
86 400 times a day. :class:`FeatureLog` logs one line when a feature is first found missing, and one
more only if it appears and later goes missing again (a module loaded, resctrl mounted).
"""

from __future__ import annotations

import logging
import os


class FeatureLog:
    """Which features of one strategy were found missing; :meth:`supported` probes and logs once."""

    def __init__(self, log: logging.Logger, strategy: str) -> None:
        self.log = log
        self.strategy = strategy
        self._missing: set[str] = set()

    def supported(self, feature: str, path: str) -> bool:
        """Whether ``path`` exists; logs "<strategy>: <feature> not supported" once while it is absent."""
        if os.path.exists(path):
            if feature in self._missing:
                self._missing.discard(feature)
                self.log.info("%s: %s is available now (%s)", self.strategy, feature, path)
            return True
        if feature not in self._missing:
            self._missing.add(feature)
            self.log.warning("%s: %s not supported by this kernel (%s absent); skipped", self.strategy, feature,
                             path)
        return False
