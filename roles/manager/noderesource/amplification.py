"""ResourceAmplification: the node annotation ``node.koordinator.sh/resource-amplification-ratio``.

ratios = resourceAmplificationRatio when the node's strategy is enabled; the cpu ratio becomes
(configured cpu ratio, or 1) × the node's current cpu-normalization ratio and is kept only when
> 1; every ratio must be ≥ 1. The annotation is a JSON map (Go float formatting, sorted keys) or
deleted when there is nothing to amplify, when the plugin fails, and on reset.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from . import cpunormalization
from . import framework as fw
from .framework import NodeResource, PluginError

NAME = "ResourceAmplification"


def reset(nr: NodeResource) -> None:
    nr.annotations[fw.ANNOTATION_AMPLIFICATION_RATIO] = None


def calculate(amplification: Mapping[str, Any] | None, node: Mapping[str, Any], nr: NodeResource) -> None:
    """Put the annotation (or its deletion) into ``nr``; raises PluginError on bad ratios."""
    if amplification is None:
        raise PluginError("resource-amplification-config is not available")
    ratios: dict[str, float] = {}
    if amplification.get("enable") is True:
        for name, value in (amplification.get("resourceAmplificationRatio") or {}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise PluginError(f"resourceAmplificationRatio[{name!r}]: expected a number, got {value!r}")
            ratios[name] = float(value)
    cpu = ratios.get("cpu", 0.0)
    final = cpu if cpu > 0 else 1.0
    try:
        # The ratio on the node as it is now (written by CPUNormalization in an earlier round).
        normalization = cpunormalization.ratio_of(fw.node_annotations(node))
    except ValueError as err:
        raise PluginError(f"failed to get cpu normalization ratio: {err}") from err
    if normalization is not None and normalization > 0:
        final *= normalization
    if final > 1:
        ratios["cpu"] = final
    for name, value in ratios.items():
        if value < 1:
            raise PluginError(f"ratio with resource type {name} and value {fw.go_float(value)} is invalid")
    if not ratios:
        nr.annotations[fw.ANNOTATION_AMPLIFICATION_RATIO] = None
        return
    body = ",".join(f"{json.dumps(name)}:{fw.go_float(ratios[name])}" for name in sorted(ratios))
    nr.annotations[fw.ANNOTATION_AMPLIFICATION_RATIO] = "{" + body + "}"


def need_sync_meta(old_node: Mapping[str, Any], new_node: Mapping[str, Any]) -> bool:
    old = fw.node_annotations(old_node).get(fw.ANNOTATION_AMPLIFICATION_RATIO) or ""
    new = fw.node_annotations(new_node).get(fw.ANNOTATION_AMPLIFICATION_RATIO) or ""
    return old != new
