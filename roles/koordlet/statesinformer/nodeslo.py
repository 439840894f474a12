"""The koordlet-side NodeSLO merge (reference A.6.2).

The manager writes only what ``slo-controller-config`` says (``resourceQOSStrategy`` is ``{}``
without a ``resource-qos-config`` key); the koordlet deep-merges each strategy onto its built-in
defaults (:func:`koordinator.apis.nodeslo_defaults.default_node_slo_spec`), then, for LSR, LS and
BE, replaces the values of a cpuQOS / resctrlQOS / memoryQOS that is explicitly disabled by the
"none" values, so a disabled feature is also reset on the node.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from koordinator.apis.nodeslo_defaults import (QOS_CLASS_FIELDS, default_node_slo_spec, none_cpu_qos,
                                               none_memory_qos, none_resctrl_qos)
from koordinator.apis.slo_merge import merge_config

log = logging.getLogger("koordinator.koordlet.statesinformer")

Obj = dict[str, Any]

MERGED_STRATEGIES = ("resourceUsedThresholdWithBE", "resourceQOSStrategy", "cpuBurstStrategy", "systemStrategy")
_NONE_IF_DISABLED = (("cpuQOS", none_cpu_qos), ("resctrlQOS", none_resctrl_qos), ("memoryQOS", none_memory_qos))


def merge_node_slo_spec(spec: Obj | None) -> Obj:
    """A NodeSLO ``spec`` (None: no NodeSLO) merged onto the koordlet defaults; a new dict.

    ``hostApplications`` is taken as it is (absent when the NodeSLO has none). A strategy that is
    not an object (the API server's schema forbids it) is ignored with a warning naming it.
    """
    spec = spec or {}
    merged = default_node_slo_spec()
    for name in MERGED_STRATEGIES:
        override = spec.get(name)
        if override is None:
            continue
        if not isinstance(override, dict):
            log.warning("NodeSLO spec.%s: expected an object, got %r; using the defaults", name, override)
            continue
        merged[name] = merge_config(merged[name], override)
    merged["extensions"] = _merge_extensions(merged["extensions"], spec.get("extensions"))
    _none_if_disabled(merged["resourceQOSStrategy"])
    apps = spec.get("hostApplications")
    if apps:
        merged["hostApplications"] = copy.deepcopy(apps)
    return merged


def _merge_extensions(defaults: Obj, extensions: Any) -> Obj:
    """Per extension key: merged onto its default when there is one, else taken as it is."""
    out = copy.deepcopy(defaults)
    if not isinstance(extensions, dict):
        return out
    for key, value in extensions.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_config(out[key], value)
        elif value is not None:
            out[key] = copy.deepcopy(value)
    return out


def _none_if_disabled(strategy: Obj) -> None:
    for qos in ("LSR", "LS", "BE"):
        cls = strategy.get(QOS_CLASS_FIELDS[qos])
        if not isinstance(cls, dict):
            continue
        for field, none in _NONE_IF_DISABLED:
            cfg = cls.get(field)
            if isinstance(cfg, dict) and cfg.get("enable") is False:
                cls[field] = {"enable": False, **none()}
