"""Prediction models: one CPU and one memory decaying histogram per UID (reference A.9.2).

UIDs: a pod's UID, ``__node__`` for the node, ``__node-<priority class>__`` for the sum of the pods of
one priority class (``__node-__`` for pods of no class) and ``__node-sys__`` for the system (node
minus every pod). A model's :meth:`Model.result` gives the percentiles the reclaimable calculation
reads: cpu in milli-cores, memory in bytes, both truncated as Koordinator does.
"""

from __future__ import annotations

import math
from typing import Any

from koordinator.apis import extension
from koordinator_roles.koordlet.prediction.histogram import CheckpointError, DecayingHistogram, ExponentialOptions

# The VPA's MinSampleWeight is 0.1 and the epsilon 0.001 of it: old samples added with the minimal
# weight are still kept.
EPSILON = 0.001 * 0.1
BUCKET_GROWTH = 0.05

# CPU in cores from 0.025 to 1024; memory in bytes from 5 MiB to 2 TiB; buckets 5 % wider each.
CPU_OPTIONS = ExponentialOptions(1024.0, 0.025, 1.0 + BUCKET_GROWTH, EPSILON)
MEMORY_OPTIONS = ExponentialOptions(float(1 << 41), float(5 << 20), 1.0 + BUCKET_GROWTH, EPSILON)

NODE_UID = "__node__"
SYSTEM_ITEM = "sys"
# Every class a priority model exists for, the "no class" one included (Koordinator's KnownPriorityClasses).
KNOWN_PRIORITY_CLASSES = (*extension.PRIORITY_CLASSES, extension.PRIORITY_NONE)

# Result keys and their percentile.
PERCENTILES = {"p60": 0.6, "p90": 0.9, "p95": 0.95, "p98": 0.98, "max": 1.0}

CHECKPOINT_VERSION = 1


def node_item_uid(item: str) -> str:
    """UID of a node-level item: a priority class (``koord-prod`` …, ``""``) or ``sys``."""
    return f"__node-{item}__"


SYSTEM_UID = node_item_uid(SYSTEM_ITEM)


def node_item_uids() -> list[str]:
    """The UIDs of the node-level models other than ``__node__``: the system and every priority class."""
    return [SYSTEM_UID, *(node_item_uid(c) for c in KNOWN_PRIORITY_CLASSES)]


class Model:
    """The CPU (cores) and memory (bytes) histograms of one UID, with its bookkeeping times."""

    __slots__ = ("cpu", "memory", "last_updated", "last_checkpointed")

    def __init__(self, cpu_half_life: float, memory_half_life: float) -> None:
        self.cpu = DecayingHistogram(CPU_OPTIONS, cpu_half_life)
        self.memory = DecayingHistogram(MEMORY_OPTIONS, memory_half_life)
        self.last_updated = 0.0
        self.last_checkpointed = 0.0  # never: checkpointed first

    def add_sample(self, cpu_cores: float, memory_bytes: float, timestamp: float) -> None:
        """One training sample, weight 1, at ``timestamp``."""
        self.cpu.add_sample(cpu_cores, 1.0, timestamp)
        self.memory.add_sample(memory_bytes, 1.0, timestamp)
        self.last_updated = timestamp

    def result(self) -> dict[str, dict[str, int]]:
        """``{"p60"|"p90"|"p95"|"p98"|"max": {"cpu": milli, "memory": bytes}}``."""
        return {key: {extension.CPU: int(self.cpu.percentile(p) * 1000.0),
                      extension.MEMORY: int(self.memory.percentile(p))}
                for key, p in PERCENTILES.items()}

    def to_checkpoint(self, uid: str, saved_at: float) -> dict[str, Any]:
        """The JSON document of this model's checkpoint file."""
        return {"version": CHECKPOINT_VERSION, "uid": uid, "lastUpdated": self.last_updated, "savedAt": saved_at,
                "cpu": self.cpu.to_checkpoint(), "memory": self.memory.to_checkpoint()}

    @classmethod
    def from_checkpoint(cls, data: Any, cpu_half_life: float, memory_half_life: float) -> Model:
        """A model from :meth:`to_checkpoint`'s document; :class:`CheckpointError` names what is wrong."""
        if not isinstance(data, dict):
            raise CheckpointError(f"checkpoint must be a JSON object, got {type(data).__name__}")
        if data.get("version") != CHECKPOINT_VERSION:
            raise CheckpointError(f"version: expected {CHECKPOINT_VERSION}, got {data.get('version')!r}")
        model = cls(cpu_half_life, memory_half_life)
        for name in ("lastUpdated", "savedAt"):
            value = data.get(name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise CheckpointError(f"{name}: must be a finite number, got {value!r}")
        for name, hist in (("cpu", model.cpu), ("memory", model.memory)):
            try:
                hist.load_checkpoint(data.get(name))
            except CheckpointError as err:
                raise CheckpointError(f"{name}: {err}") from None
        model.last_updated = float(data["lastUpdated"])
        # Written at savedAt: not due again before checkpoint_interval from then.
        model.last_checkpointed = float(data["savedAt"])
        return model
