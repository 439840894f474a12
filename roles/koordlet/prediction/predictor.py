"""The peak predictor: trains usage models from the metric cache and predicts prod reclaimable
resources (reference A.9).

Every training interval each pod's p90 CPU and memory over the last interval becomes one sample
of its model, and the node, each priority class and the system (node minus every pod) get theirs.
Models not updated for ``model_expiration`` are dropped; models are checkpointed to one JSON file
each (a few per round, oldest first) and restored at start, so a restart keeps what was learnt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from koordinator.apis import extension
from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.prediction import reclaimable
from koordinator_roles.koordlet.prediction.checkpoint import CheckpointStore
from koordinator_roles.koordlet.prediction.histogram import CheckpointError
from koordinator_roles.koordlet.prediction.models import (
    KNOWN_PRIORITY_CLASSES, NODE_UID, SYSTEM_UID, Model, node_item_uid, node_item_uids,
)
from koordinator_roles.koordlet.prediction.reclaimable import Amounts, PredictionError

if TYPE_CHECKING:  # pragma: no cover - types only
    from koordinator_roles.koordlet.metriccache import MetricCache
    from koordinator_roles.koordlet.statesinformer import StatesInformer

log = logging.getLogger("koordinator.koordlet.prediction")

# Koordinator runs model GC and checkpointing every minute, whatever the training interval.
MAINTENANCE_INTERVAL = 60.0
# How often run() looks again for the states informer's first sync.
SYNC_POLL = 0.5
P90 = "p90"


class PeakPredictor:
    """Peak prediction of one node (see module doc). Thread-safe: ``run`` trains on its own thread
    while the NodeMetric reporter calls :meth:`prod_reclaimable`."""

    def __init__(self, cache: MetricCache, states: StatesInformer, *, checkpoint_dir: str | None,
                 training_interval: float = 60.0, cold_start: float = 24 * 3600.0,
                 safety_margin_percent: int = 10, cpu_half_life: float = 12 * 3600.0,
                 memory_half_life: float = 24 * 3600.0, model_expiration: float = 1800.0,
                 checkpoint_interval: float = 600.0, checkpoint_max_per_step: int = 12,
                 clock: Callable[[], float] = time.time) -> None:
        for name, value in (("training_interval", training_interval), ("cpu_half_life", cpu_half_life),
                            ("memory_half_life", memory_half_life), ("model_expiration", model_expiration)):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value!r}")
        if checkpoint_max_per_step < 1:
            raise ValueError(f"checkpoint_max_per_step must be at least 1, got {checkpoint_max_per_step!r}")
        self.cache = cache
        self.states = states
        self.training_interval = float(training_interval)
        self.cold_start = float(cold_start)
        self.safety_margin_percent = int(safety_margin_percent)
        self.cpu_half_life = float(cpu_half_life)
        self.memory_half_life = float(memory_half_life)
        self.model_expiration = float(model_expiration)
        self.checkpoint_interval = float(checkpoint_interval)
        self.checkpoint_max_per_step = int(checkpoint_max_per_step)
        self.clock = clock
        self._store = CheckpointStore(checkpoint_dir) if checkpoint_dir else None
        self._lock = threading.Lock()
        self._models: dict[str, Model] = {}
        self._restored = False
        self._trained = False
        self._warned: set[str] = set()

    # -- state ------------------------------------------------------------------------------------

    def has_synced(self) -> bool:
        """A training round has completed."""
        return self._trained

    def model_uids(self) -> list[str]:
        """UIDs of the models held, sorted."""
        with self._lock:
            return sorted(self._models)

    def prediction(self, uid: str) -> dict[str, dict[str, int]] | None:
        """``{"p60"|"p90"|"p95"|"p98"|"max": {"cpu": milli, "memory": bytes}}`` of a model, or None."""
        with self._lock:
            model = self._models.get(uid)
            return model.result() if model is not None else None

    def _states_synced(self) -> bool:
        fn = getattr(self.states, "has_synced", None)
        return bool(fn()) if callable(fn) else True

    def _warn_once(self, key: str, msg: str, *args: Any) -> None:
        if key in self._warned:
            log.debug(msg, *args)
            return
        if len(self._warned) > 1000:
            self._warned.clear()
        self._warned.add(key)
        log.warning(msg, *args)

    # -- training ---------------------------------------------------------------------------------

    def _update(self, uid: str, cpu: float, memory: float, now: float) -> None:
        model = self._models.get(uid)
        if model is None:
            model = self._models[uid] = Model(self.cpu_half_life, self.memory_half_life)
        model.add_sample(cpu, memory, now)

    @staticmethod
    def _p90(series: Any) -> float | None:
        if series is None or len(series) == 0:
            return None
        try:
            return float(series.aggregate(P90))
        except ValueError:
            return None

    def train_once(self) -> None:
        """One training round (skipped until the states informer has synced; restores checkpoints
        first if that was not done yet)."""
        if not self._states_synced():
            log.debug("prediction: states not synced yet, training skipped")
            return
        if not self._restored:
            self.restore()
        now = self.clock()
        start = now - self.training_interval
        try:
            cpu_by_pod = self.cache.query_by(kinds.POD_CPU_USAGE, kinds.LABEL_POD_UID, start, now)
            mem_by_pod = self.cache.query_by(kinds.POD_MEMORY_USAGE, kinds.LABEL_POD_UID, start, now)
            node_cpu = self._p90(self.cache.query(kinds.NODE_CPU_USAGE, start, now))
            node_mem = self._p90(self.cache.query(kinds.NODE_MEMORY_USAGE, start, now))
        except Exception as err:  # the metric cache's own errors; never kill the training loop
            self._warn_once(f"query:{type(err).__name__}", "prediction: metric cache query failed, round skipped: %s",
                            err)
            return
        samples: list[tuple[str, float, float]] = []
        by_class: dict[str, list[float]] = {}
        all_pods = [0.0, 0.0]
        for meta in self.states.pods():
            pod = meta.pod
            uid = str(getattr(meta, "uid", "") or (pod.get("metadata") or {}).get("uid") or "")
            cpu = self._p90(cpu_by_pod.get(uid))
            mem = self._p90(mem_by_pod.get(uid))
            if cpu is None or mem is None:
                log.debug("prediction: no usage of pod %s in the last %.0fs, not sampled", uid, self.training_interval)
                continue
            samples.append((uid, cpu, mem))
            sums = by_class.setdefault(extension.priority_class_with_default(pod), [0.0, 0.0])
            sums[0] += cpu
            sums[1] += mem
            all_pods[0] += cpu
            all_pods[1] += mem
        with self._lock:
            for uid, cpu, mem in samples:
                self._update(uid, cpu, mem, now)
            if node_cpu is not None and node_mem is not None:
                self._update(NODE_UID, node_cpu, node_mem, now)
                # The system: what the node uses beyond every pod.
                self._update(SYSTEM_UID, max(node_cpu - all_pods[0], 0.0), max(node_mem - all_pods[1], 0.0), now)
            else:
                self._warn_once("node-usage", "prediction: no node usage in the last %.0fs; node and system "
                                "models not sampled", self.training_interval)
            for cls in KNOWN_PRIORITY_CLASSES:
                cpu, mem = by_class.get(cls, (0.0, 0.0))
                self._update(node_item_uid(cls), cpu, mem, now)
        self._trained = True
        log.debug("prediction: trained %d pod models", len(samples))

    # -- model GC and checkpoints -----------------------------------------------------------------

    def gc_once(self) -> list[str]:
        """Drop models not updated for ``model_expiration`` and their checkpoints; returns their UIDs."""
        if not self._trained:
            return []
        now = self.clock()
        with self._lock:
            expired = [uid for uid, m in self._models.items() if now - m.last_updated > self.model_expiration]
            for uid in expired:
                del self._models[uid]
        for uid in expired:
            log.debug("prediction: model %s expired", uid)
            if self._store is not None:
                self._store.remove(uid)
        return expired

    def checkpoint_once(self) -> int:
        """Checkpoint up to ``checkpoint_max_per_step`` models not checkpointed within
        ``checkpoint_interval``, least recently checkpointed first; returns how many were written."""
        if self._store is None or not self._trained:
            return 0
        now = self.clock()
        docs: list[tuple[str, Model, dict]] = []
        with self._lock:
            due = sorted(self._models.items(), key=lambda item: item[1].last_checkpointed)
            for uid, model in due:
                if len(docs) >= self.checkpoint_max_per_step or now - model.last_checkpointed < self.checkpoint_interval:
                    break
                docs.append((uid, model, model.to_checkpoint(uid, now)))
        written = 0
        for uid, model, doc in docs:
            try:
                self._store.save(uid, doc)
                written += 1
            except (OSError, ValueError) as err:
                self._warn_once(f"save:{type(err).__name__}", "prediction: cannot write checkpoint %s: %s",
                                self._store.path(uid), err)
            # Also after a failure: the next models get their turn instead of retrying this one forever.
            model.last_checkpointed = now
        return written

    def restore(self) -> int:
        """Load the checkpoints of known UIDs (pods on the node, the node and node-level items);
        unknown, unreadable or corrupt files are removed with a warning. Returns how many loaded."""
        self._restored = True
        if self._store is None:
            return 0
        known = {m.uid if getattr(m, "uid", None) else (m.pod.get("metadata") or {}).get("uid")
                 for m in self.states.pods()}
        if self.states.node() is not None:
            known.add(NODE_UID)
        known.update(node_item_uids())
        restored: dict[str, Model] = {}
        for uid, path, doc in self._store.scan():
            if isinstance(doc, Exception):
                log.warning("prediction: removing unreadable checkpoint %s: %s", path, doc)
                self._store.remove_file(path)
                continue
            if uid not in known:
                log.warning("prediction: removing checkpoint %s of unknown model %r", path, uid)
                self._store.remove_file(path)
                continue
            try:
                if not isinstance(doc, dict) or doc.get("uid") != uid:
                    raise CheckpointError(f"uid: expected {uid!r}, got "
                                          f"{doc.get('uid') if isinstance(doc, dict) else None!r}")
                restored[uid] = Model.from_checkpoint(doc, self.cpu_half_life, self.memory_half_life)
            except CheckpointError as err:
                log.warning("prediction: removing corrupt checkpoint %s: %s", path, err)
                self._store.remove_file(path)
        with self._lock:
            for uid, model in restored.items():
                self._models.setdefault(uid, model)
        if restored:
            log.info("prediction: restored %d models from %s", len(restored), self._store.directory)
        return len(restored)

    # -- the loop ---------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Wait for the states informer, restore checkpoints, then train every training interval
        (GC and checkpoints every minute) until ``stop`` is set."""
        while not self._states_synced():
            if stop.wait(SYNC_POLL):
                return
        self._guarded(self.restore)
        last_maintenance: float | None = None
        # The first round after one interval, as Koordinator's ticker: at start there is no usage yet.
        while not stop.wait(self.training_interval):
            self._guarded(self.train_once)
            now = self.clock()
            if last_maintenance is None or now - last_maintenance >= MAINTENANCE_INTERVAL:
                last_maintenance = now
                self._guarded(self.gc_once)
                self._guarded(self.checkpoint_once)

    @staticmethod
    def _guarded(fn: Callable[[], Any]) -> None:
        try:
            fn()
        except Exception:  # a bug in one round must not end prediction for good
            log.exception("prediction: %s failed", getattr(fn, "__name__", fn))

    # -- results ----------------------------------------------------------------------------------

    def prod_reclaimable(self) -> tuple[Amounts, Amounts]:
        """(reclaimable, peak) of prod resources as ``{"cpu": milli, "memory": bytes}`` (A.9.3);
        PredictionError when the node or a node-level model is not known yet."""
        node = self.states.node()
        pods = [m.pod for m in self.states.pods()]
        cache: dict[str, Mapping[str, Mapping[str, int]] | None] = {}

        def lookup(uid: str) -> Mapping[str, Mapping[str, int]] | None:
            if uid not in cache:
                cache[uid] = self.prediction(uid)
            return cache[uid]

        return reclaimable.prod_reclaimable(pods, node, lookup, now=self.clock(), cold_start=self.cold_start,
                                            safety_margin_percent=self.safety_margin_percent)


__all__ = ["PeakPredictor", "PredictionError"]
