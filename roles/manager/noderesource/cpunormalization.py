"""CPUNormalization: the node annotation ``node.koordinator.sh/cpu-normalization-ratio``.

The ratio comes from ``ratioModel[cpuModel]`` of the node's merged cpu-normalization-config,
picked by the hyper-threading/turbo state the koordlet reports in the NodeResourceTopology
annotation ``node.koordinator.sh/cpu-basic-info``. Disabled → "1.00". Any failure is a plugin
error: the annotation is left as it is and batch-cpu is not scaled this round.
"""

from __future__ import annotations

import json
import math
from typing import Any, Mapping

from . import framework as fw
from .framework import NodeResource, PluginError

NAME = "CPUNormalization"
DEFAULT_RATIO = "1.00"
MIN_RATIO, MAX_RATIO = 1.0, 5.0
RATIO_EPSILON = 0.01

_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_FALSE = ("0", "f", "F", "FALSE", "false", "False")


def parse_go_bool(text: str) -> bool:
    """Go's ``strconv.ParseBool``."""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ValueError(f"invalid syntax: {text!r}")


def ratio_of(annotations: Mapping[str, Any]) -> float | None:
    """The ratio annotation as a float; None when absent; ValueError when unparseable."""
    raw = annotations.get(fw.ANNOTATION_CPU_NORMALIZATION_RATIO)
    if raw is None:
        return None
    try:
        return float(raw)
    except (TypeError, ValueError) as err:
        raise ValueError(f"annotation {fw.ANNOTATION_CPU_NORMALIZATION_RATIO}: invalid ratio {raw!r}") from err


def _ratio_from_model(info: Mapping[str, Any], strategy: Mapping[str, Any]) -> float:
    model = info.get("cpuModel", "")
    ht, turbo = bool(info.get("hyperThreadEnabled")), bool(info.get("turboEnabled"))
    if ht and turbo:
        field = "hyperThreadTurboEnabledRatio"
    elif ht:
        field = "hyperThreadEnabledRatio"
    elif turbo:
        field = "turboEnabledRatio"
    else:
        field = "baseRatio"
    ratio = ((strategy.get("ratioModel") or {}).get(model) or {}).get(field)
    if ratio is None:
        ratio = strategy.get("defaultRatio")
    if ratio is None:
        raise PluginError(f"no ratio for CPU {model!r} ({field}) and no defaultRatio")
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)):
        raise PluginError(f"ratioModel[{model!r}].{field}: expected a number, got {ratio!r}")
    return float(ratio)


def calculate(normalization: Mapping[str, Any] | None, node: Mapping[str, Any],
              nrt: Mapping[str, Any] | None, nr: NodeResource) -> None:
    """Put the ratio annotation ("%.2f") into ``nr``; raises PluginError to skip the update."""
    if normalization is None:
        raise PluginError("cpu-normalization-config is not available")
    label = fw.node_labels(node).get(fw.LABEL_CPU_NORMALIZATION_ENABLED)
    if label is not None:
        try:
            enabled = parse_go_bool(label)
        except ValueError as err:
            raise PluginError(f"node label {fw.LABEL_CPU_NORMALIZATION_ENABLED}: {err}") from err
    else:
        enabled = normalization.get("enable") is True
    if not enabled:
        nr.annotations[fw.ANNOTATION_CPU_NORMALIZATION_RATIO] = DEFAULT_RATIO
        return
    if nrt is None:
        raise PluginError("NodeResourceTopology not found")
    raw = ((nrt.get("metadata") or {}).get("annotations") or {}).get(fw.ANNOTATION_CPU_BASIC_INFO)
    if not raw:
        raise PluginError("CPUBasicInfo is missing")
    try:
        info = json.loads(raw)
    except ValueError as err:
        raise PluginError(f"failed to parse CPUBasicInfo: {err}") from err
    if not isinstance(info, dict):
        raise PluginError(f"failed to parse CPUBasicInfo: {raw!r}")
    ratio = _ratio_from_model(info, normalization)
    if not (MIN_RATIO <= ratio <= MAX_RATIO) or math.isnan(ratio):
        raise PluginError(f"ratio {ratio} is outside [{MIN_RATIO}, {MAX_RATIO}]")
    nr.annotations[fw.ANNOTATION_CPU_NORMALIZATION_RATIO] = "%.2f" % ratio


def need_sync_meta(old_node: Mapping[str, Any], new_node: Mapping[str, Any]) -> bool:
    """Annotation created/removed, or the ratio moved by at least 0.01."""
    try:
        old = ratio_of(fw.node_annotations(old_node))
    except ValueError:
        return True
    try:
        new = ratio_of(fw.node_annotations(new_node))
    except ValueError:
        return False
    if old is None and new is None:
        return False
    if old is None or new is None:
        return True
    return abs(new - old) >= RATIO_EPSILON
