"""A profile's framework: its plugin instances, its evictor proxy, and running its extension points.

Construction follows koord-descheduler (reference descheduler §1.3): only plugins enabled at some
extension point are built, each once even when enabled at several points; an enabled name must be
registered, implement the point and appear once per point; exactly one evict plugin per profile. All
problems are reported together as a :class:`~koordinator_roles.descheduler.config.ConfigError` whose
messages name the document's fields (``profiles[0].plugins.balance.enabled[0].name: ...``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from koordinator_roles.descheduler.config import ConfigError, PluginRef, Profile
from koordinator_roles.descheduler.framework.evictor import EvictorProxy
from koordinator_roles.descheduler.framework.interfaces import ControllerProvider, Obj, Status
from koordinator_roles.descheduler.framework.limiter import EvictionLimiter

log = logging.getLogger("koordinator.descheduler")

Factory = Callable[[dict, Any], Any]
#: The method a plugin must have to serve each extension point.
METHODS = {"deschedule": "deschedule", "balance": "balance", "evict": "evict", "filter": "filter"}


class Framework:
    """The plugins of one profile, wired to ``handle`` (whose ``evictor`` becomes this profile's proxy).

    ``registry``: plugin name -> factory ``(args, handle) -> plugin``.
    """

    def __init__(self, profile: Profile, registry: Mapping[str, Factory], handle: Any, *,
                 limiter: EvictionLimiter | None = None, metrics: Any = None) -> None:
        self.profile = profile
        self.name = profile.name
        self.handle = handle
        self.evictor = EvictorProxy(limiter=limiter or EvictionLimiter(), dry_run=bool(handle.dry_run),
                                    recorder=handle.event_recorder, metrics=metrics, profile_name=profile.name)
        handle.evictor = self.evictor
        handle.profile_name = profile.name
        handle.node_selector = profile.node_selector
        errors: list[str] = []
        refs = {point: self._checked_refs(point, registry, errors) for point in METHODS}
        self.plugins: dict[str, Any] = {}
        if not errors:
            for name in dict.fromkeys(r.name for point_refs in refs.values() for r in point_refs):
                try:
                    self.plugins[name] = registry[name](profile.plugin_args.get(name, {}), handle)
                except ValueError as exc:
                    errors.append(profile.args_error(name, exc))
        if not errors:
            for point in METHODS:
                for ref in refs[point]:
                    if not hasattr(self.plugins[ref.name], METHODS[point]):
                        errors.append(f'{ref.path}: Invalid value: "{ref.name}": does not extend the {point} '
                                      "extension point")
        evict = [r.name for r in refs["evict"]]
        path = f"profiles[{profile.index}].plugins.evict"
        if not evict:
            errors.append(f"{path}: Required value: no evict plugin is enabled")
        elif len(evict) > 1:
            errors.append(f"{path}: Invalid value: {json.dumps(evict)}: only one evict plugin can be enabled")
        if errors:
            raise ConfigError(errors)
        self.deschedule_plugins = [self.plugins[r.name] for r in refs["deschedule"]]
        self.balance_plugins = [self.plugins[r.name] for r in refs["balance"]]
        self.evictor.evict_plugins = [self.plugins[r.name] for r in refs["evict"]]
        self.evictor.filter_plugins = [self.plugins[r.name] for r in refs["filter"]]

    def _checked_refs(self, point: str, registry: Mapping[str, Factory], errors: list[str]) -> list[PluginRef]:
        seen: set[str] = set()
        for ref in self.profile.plugins[point]:
            if ref.name not in registry:
                what = f'"{ref.name}" (a default plugin)' if ref.default else f'"{ref.name}"'
                errors.append(f"{ref.path}: Unsupported value: {what}: not implemented in this build")
            elif ref.name in seen:
                errors.append(f'{ref.path}: Duplicate value: "{ref.name}"')
            seen.add(ref.name)
        return list(self.profile.plugins[point])

    # -- running ---------------------------------------------------------------------------------

    def run_deschedule_plugins(self, nodes: list[Obj]) -> list[str]:
        """Every deschedule plugin with ``nodes``; the errors of all of them (each still runs)."""
        return self._run("deschedule", self.deschedule_plugins, nodes)

    def run_balance_plugins(self, nodes: list[Obj]) -> list[str]:
        """Every balance plugin with ``nodes``; the errors of all of them (each still runs)."""
        return self._run("balance", self.balance_plugins, nodes)

    def _run(self, point: str, plugins: list[Any], nodes: list[Obj]) -> list[str]:
        errors: list[str] = []
        for plugin in plugins:
            name = getattr(plugin, "name", "") or type(plugin).__name__
            self.evictor.current_plugin = name
            try:
                status = getattr(plugin, point)(nodes)
            except Exception as err:  # noqa: BLE001 — one plugin's bug must not stop the others
                log.exception("descheduler plugin failed profile=%s plugin=%s point=%s", self.name, name, point)
                status = Status(error=f"{type(err).__name__}: {err}")
            finally:
                self.evictor.current_plugin = ""
            if status is not None and not status.ok:
                errors.append(f"{name}: {status.error}")
        return errors

    def controllers(self) -> list[Any]:
        """The background controllers of this profile's plugins (:class:`ControllerProvider`)."""
        out: list[Any] = []
        for plugin in self.plugins.values():
            if isinstance(plugin, ControllerProvider) or callable(getattr(plugin, "new_controllers", None)):
                out += plugin.new_controllers()
        return out
