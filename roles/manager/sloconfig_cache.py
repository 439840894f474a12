"""The manager's view of ``slo-controller-config``, kept current from a ConfigMap informer.

The ConfigMap is cluster state the manager reads through the API (not a mounted file): every
change is parsed key by key (:func:`koordinator_roles.manager.sloconfig.parse_slo_controller_config`); a bad
key is reported — a Warning Event on the ConfigMap, an error log, and
``koordinator_config_reloads_total{source="<ns>/<name>",result="error"}`` — and the last good value
of that key stays in force while the other keys update. Controllers read :meth:`current` and are
told of changes through the callbacks given to :meth:`on_change`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from koordinator_roles.manager.sloconfig import ManagerConfig, parse_slo_controller_config

log = logging.getLogger("koordinator.manager.sloconfig")

Obj = dict[str, Any]


class SLOConfigCache:
    """Parses ``<namespace>/<name>`` whenever the informer sees it change; thread-safe."""

    def __init__(self, informer: Any, namespace: str, name: str, *, recorder: Any = None,
                 metrics: Any = None) -> None:
        self.namespace = namespace
        self.name = name
        self._informer = informer
        self._recorder = recorder
        self._metrics = metrics
        self._lock = threading.Lock()
        self._config: ManagerConfig | None = None
        self._seen: tuple[str, str] | None = None  # (uid, resourceVersion) last parsed; None = absent
        self._parsed_once = False
        self._listeners: list[Callable[[], None]] = []
        informer.add_handler(on_add=self._event, on_update=lambda old, new: self._event(new),
                             on_delete=lambda obj: self._event(None))

    @property
    def source(self) -> str:
        return f"{self.namespace}/{self.name}"

    def on_change(self, fn: Callable[[], None]) -> None:
        """Call ``fn()`` whenever the derived configuration changes (after the first parse)."""
        self._listeners.append(fn)

    def current(self) -> ManagerConfig:
        """The configuration in force, parsed from the informer's cache on first use."""
        with self._lock:
            if not self._parsed_once:
                self._refresh_locked(self._informer.store.get(self.source))
            assert self._config is not None
            return self._config

    def _event(self, obj: Obj | None) -> None:
        # Informer deliveries carry the object; a delete tombstone may not.
        if obj is not None and not isinstance(obj, dict):
            obj = None
        if obj is not None and (obj.get("metadata") or {}).get("name") != self.name:
            return
        with self._lock:
            changed = self._refresh_locked(obj)
        if changed:
            for fn in self._listeners:
                try:
                    fn()
                except Exception:
                    log.exception("slo-controller-config listener failed")

    def _refresh_locked(self, configmap: Obj | None) -> bool:
        md = (configmap or {}).get("metadata") or {}
        seen = (md.get("uid", ""), md.get("resourceVersion", "")) if configmap is not None else None
        if self._parsed_once and seen == self._seen:
            return False
        previous = self._config
        config, problems = parse_slo_controller_config(configmap, previous)
        self._config, self._seen, self._parsed_once = config, seen, True
        self._report(configmap, problems)
        return previous is not None and config != previous

    def _report(self, configmap: Obj | None, problems: list[Any]) -> None:
        errors = [p for p in problems if p.severity == "error"]
        for p in problems:
            level = logging.ERROR if p.severity == "error" else logging.WARNING
            log.log(level, "slo-controller-config key %s %s: %s", p.key,
                    "rejected, its last good value stays in force" if p.severity == "error" else "applied with a warning",
                    p.message)
            if self._recorder is not None and configmap is not None:
                self._recorder.event(configmap, "Warning", p.reason, f"{p.key}: {p.message}")
        if self._metrics is not None and configmap is not None:
            result = "error" if errors else "success"
            self._metrics.config_reloads_total.labels(source=self.source, result=result).inc()
            self._metrics.config_last_reload_successful.labels(source=self.source).set(0 if errors else 1)
