"""Plugin registry: name → factory ``factory(args: dict, handle) -> Plugin`` (kube's ``runtime.Registry``).

``args`` is the plugin's ``pluginConfig`` args with defaults applied and validated
(:mod:`koordinator_roles.scheduler.config`); a factory may still raise ValueError naming a bad field, which
the configuration loader reports as ``profiles[i].pluginConfig[j].args.<field>``.
"""

from __future__ import annotations

from typing import Any, Callable

from koordinator_roles.scheduler.framework.interfaces import Plugin

Factory = Callable[[dict, Any], Plugin]


class Registry:
    """Factories by plugin name; registering a name twice is an error."""

    def __init__(self, factories: dict[str, Factory] | None = None) -> None:
        self._factories: dict[str, Factory] = {}
        for name, factory in (factories or {}).items():
            self.register(name, factory)

    def register(self, name: str, factory: Factory) -> None:
        if name in self._factories:
            raise ValueError(f"a plugin named {name} already exists")
        self._factories[name] = factory

    def merge(self, other: "Registry") -> "Registry":
        out = Registry(dict(self._factories))
        for name, factory in other._factories.items():
            out.register(name, factory)
        return out

    def get(self, name: str) -> Factory | None:
        return self._factories.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._factories

    def names(self) -> list[str]:
        return sorted(self._factories)
