"""The per-node anomaly detector and its expiring cache (reference §1.6.4 step 5).

A node is only treated as overloaded after it was seen over the high thresholds in more than
``consecutiveAbnormalities`` consecutive rounds: one hot metric sample must not move pods.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Iterable

from .args import AnomalyCondition

OK = "ok"
ANOMALY = "anomaly"


class AnomalyDetector:
    """ok/anomaly state machine with consecutive counters; an anomaly ends after ``timeout`` or enough normal
    rounds."""

    def __init__(self, condition: AnomalyCondition, clock: Callable[[], float] = time.time) -> None:
        self.condition = condition
        self._clock = clock
        self._state = OK
        self.consecutive_abnormalities = 0
        self.consecutive_normalities = 0
        self.abnormalities = 0
        self.normalities = 0
        self._expires_at: float | None = None

    @property
    def state(self) -> str:
        """The current state; an expired anomaly reads (and becomes) ok."""
        if self._state == ANOMALY and self._expires_at is not None and self._clock() >= self._expires_at:
            self._to(OK)
        return self._state

    def mark(self, normal: bool) -> str:
        """Record one round's observation and return the resulting state."""
        state = self.state
        if normal:
            self.normalities += 1
            self.consecutive_normalities += 1
            self.consecutive_abnormalities = 0
            if state == ANOMALY and self.consecutive_normalities > self.condition.consecutive_normalities:
                self._to(OK)
        else:
            self.abnormalities += 1
            self.consecutive_abnormalities += 1
            self.consecutive_normalities = 0
            if state == OK and self.consecutive_abnormalities > self.condition.consecutive_abnormalities:
                self._to(ANOMALY)
                self._expires_at = self._clock() + self.condition.timeout_s
        return self._state

    def reset(self) -> None:
        """Back to ok; a detector already ok keeps its counters (as Koordinator's does)."""
        if self._state != OK:
            self._to(OK)

    def _to(self, state: str) -> None:
        self._state = state
        self.consecutive_abnormalities = self.consecutive_normalities = 0
        self.abnormalities = self.normalities = 0
        self._expires_at = None


class DetectorCache:
    """Detectors by node name; an entry not stored again within ``ttl_s`` is forgotten."""

    def __init__(self, ttl_s: float, clock: Callable[[], float] = time.time) -> None:
        self.ttl_s = ttl_s
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[AnomalyDetector, float]] = {}

    def get(self, node: str) -> AnomalyDetector | None:
        with self._lock:
            entry = self._entries.get(node)
            if entry is None:
                return None
            if self._clock() >= entry[1]:
                del self._entries[node]
                return None
            return entry[0]

    def put(self, node: str, detector: AnomalyDetector) -> None:
        with self._lock:
            self._entries[node] = (detector, self._clock() + self.ttl_s)

    def cleanup(self) -> None:
        """Drop every expired entry (called once per round, so the map cannot grow with departed nodes)."""
        now = self._clock()
        with self._lock:
            for node in [n for n, (_, exp) in self._entries.items() if now >= exp]:
                del self._entries[node]

    def reset(self, nodes: Iterable[str]) -> None:
        """Set the detectors of ``nodes`` that exist back to ok."""
        for node in nodes:
            detector = self.get(node)
            if detector is not None:
                detector.reset()

    def mark_normal(self, nodes: Iterable[str]) -> None:
        for node in nodes:
            detector = self.get(node)
            if detector is not None:
                detector.mark(True)

    def real_abnormal(self, nodes: list[str], condition: AnomalyCondition | None) -> list[str]:
        """The nodes that are abnormal after this round's observation (all of them when no debounce applies)."""
        if condition is None or condition.consecutive_abnormalities == 1:
            return list(nodes)
        out = []
        for node in nodes:
            detector = self.get(node) or AnomalyDetector(condition, self._clock)
            if detector.mark(False) == ANOMALY:
                out.append(node)
            self.put(node, detector)
        return out
