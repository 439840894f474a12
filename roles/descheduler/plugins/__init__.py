"""The descheduler plugins this build registers, by name (koord-descheduler's registry, §1.5).

Each module (or subpackage) under ``koordinator_roles.descheduler.plugins`` exposes ``NAME`` and
``new(args, handle)``; :data:`_MODULES` maps the registry name to it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

# name -> module under koordinator_roles.descheduler.plugins exposing NAME and new(args, handle)
_MODULES = {
    "DefaultEvictor": "defaultevictor",
    "LowNodeLoad": "lownodeload",
    "FragmentationAware": "fragmentationaware",
    "ScaleDownBinPack": "scaledownbinpack",
    "CustomPriority": "custompriority",
    "MigrationController": "migration",
    # sigs.k8s.io/descheduler's plugins (upstream.FACTORIES)
    **{name: "upstream" for name in (
        "RemovePodsViolatingNodeAffinity", "RemovePodsViolatingNodeTaints", "RemovePodsViolatingInterPodAntiAffinity",
        "RemoveDuplicates", "RemovePodsHavingTooManyRestarts", "RemoveFailedPods", "PodLifeTime",
        "RemovePodsViolatingTopologySpreadConstraint", "LowNodeUtilization", "HighNodeUtilization")},
}

Factory = Callable[[dict, Any], Any]


def in_tree_registry() -> dict[str, Factory]:
    """Every implemented plugin's factory, by registry name."""
    out: dict[str, Factory] = {}
    for name, module_name in _MODULES.items():
        module = importlib.import_module(f"koordinator_roles.descheduler.plugins.{module_name}")
        factories = getattr(module, "FACTORIES", None)
        out[name] = factories[name] if factories is not None else module.new
    return out
