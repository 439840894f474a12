"""The pure calculation behind koord-manager's noderesource controller.

The controller fetches the Node, its NodeMetric, pods, NodeResourceTopology and Device, then:

1. ``nr = calculate(...)`` — run the selected plugins in Koordinator's order
   (CPUNormalization, ResourceAmplification, MidResource, BatchResource, GPUDeviceResource,
   RDMADeviceResource) and fold their results into a :class:`NodeResource`;
2. ``new = prepare(node, nr)`` — a deep copy of the node with the results written in;
3. ``needs_status_sync(node, new, ...)`` / ``needs_meta_sync(node, new)`` — whether to
   ``UpdateStatus`` and/or merge-patch labels and annotations.

No API calls, no threads, no clocks: ``now`` is passed in (unix seconds).
"""

from __future__ import annotations

import copy
from typing import Any, Iterable, Mapping

from koordinator.apis import extension as ext

from . import amplification, batch, cpunormalization, device, mid
from . import amplification as _amplification
from . import device as _device
from . import framework as fw
from .framework import NodeResource, PluginError, Strategy, is_resource_diff

__all__ = [
    "PLUGINS", "NodeResource", "PluginError", "DISABLED_MESSAGE", "calculate", "prepare",
    "needs_status_sync", "needs_meta_sync", "is_resource_diff", "selected_plugins",
]

PLUGINS = (cpunormalization.NAME, amplification.NAME, mid.NAME, batch.NAME, device.GPU_NAME, device.RDMA_NAME)

# calculate()'s keyword arguments `amplification` and `device` shadow those modules there.
_AMPLIFICATION, _GPU, _RDMA = amplification.NAME, device.GPU_NAME, device.RDMA_NAME

DISABLED_MESSAGE = "node colocation is disabled in Config, reason: DisableInConfig"

_STATUS_RESOURCES = {
    mid.NAME: mid.RESOURCES,
    batch.NAME: batch.RESOURCES,
    device.GPU_NAME: device.GPU_RESOURCES,
    device.RDMA_NAME: device.RDMA_RESOURCES,
}


def selected_plugins(plugins: Iterable[str]) -> list[str]:
    """``plugins`` in calculation order; unknown names are an error naming them."""
    wanted = set(plugins)
    unknown = sorted(wanted - set(PLUGINS))
    if unknown:
        raise ValueError(f"unknown noderesource plugins {unknown}; known: {list(PLUGINS)}")
    return [p for p in PLUGINS if p in wanted]


def _reset(nr: NodeResource, plugin: str, message: str) -> None:
    """A plugin's reset: batch/mid resources removed, the amplification annotation deleted.

    CPUNormalization and the device plugins reset nothing (as in Koordinator).
    """
    if plugin == batch.NAME:
        batch.reset(nr, message)
    elif plugin == mid.NAME:
        mid.reset(nr, message)
    elif plugin == amplification.NAME:
        amplification.reset(nr)


def _skip(nr: NodeResource, plugin: str, error: Exception) -> None:
    """A failed plugin: its resources get no quantity (so batch/mid are removed at prepare)."""
    nr.errors[plugin] = str(error)
    if plugin in (batch.NAME, mid.NAME):
        for name in _STATUS_RESOURCES[plugin]:
            nr.resources[name] = None
            nr.resets.discard(name)
    elif plugin == amplification.NAME:
        amplification.reset(nr)


def calculate(*, colocation_enabled: bool, strategy: Mapping[str, Any] | None,
              normalization: Mapping[str, Any] | None, amplification: Mapping[str, Any] | None,
              node: Mapping[str, Any], pods: list[Mapping[str, Any]], node_metric: Mapping[str, Any] | None,
              nrt: Mapping[str, Any] | None = None, device: Mapping[str, Any] | None = None, now: float,
              plugins: Iterable[str] = PLUGINS, gpu_shared: bool = False) -> NodeResource:
    """Run the selected plugins for one node and fold their results.

    ``colocation_enabled`` false (cluster or node strategy ``enable`` not true) resets every
    plugin with :data:`DISABLED_MESSAGE`. ``strategy`` is the node's merged ColocationStrategy
    (absent fields fall back to Koordinator's defaults); ``normalization``/``amplification`` the
    node's merged cpu-normalization / resource-amplification strategies (None = config not
    available → that plugin fails). ``device`` is the node's Device CR or None (not found).
    ``gpu_shared`` is the EnableSyncGPUSharedResource feature gate. A plugin failure is recorded
    in ``nr.errors`` and its outputs skipped.
    """
    order = selected_plugins(plugins)
    nr = NodeResource()
    if not colocation_enabled:
        for plugin in order:
            _reset(nr, plugin, DISABLED_MESSAGE)
        return nr
    st = Strategy(strategy)
    for plugin in order:
        try:
            if plugin == cpunormalization.NAME:
                cpunormalization.calculate(normalization, node, nrt, nr)
            elif plugin == _AMPLIFICATION:
                _amplification.calculate(amplification, node, nr)
            elif plugin == mid.NAME:
                mid.calculate(st, node, pods, node_metric, now, nr)
            elif plugin == batch.NAME:
                batch.calculate(st, node, pods, node_metric, now, nr)
            elif plugin == _GPU:
                _device.calculate_gpu(device, nr, gpu_shared=gpu_shared)
            elif plugin == _RDMA:
                _device.calculate_rdma(device, nr)
        except (PluginError, ValueError, TypeError, AttributeError) as err:
            _skip(nr, plugin, err)
    return nr


def _scaled_batch_cpu(value: int, nr: NodeResource) -> int:
    """batch-cpu × the cpu normalization ratio of ``nr`` when it is above 1.

    Koordinator scales the milli value of the quantity in float64, truncates, and rounds the
    (then fractional) quantity up to a whole value.
    """
    try:
        ratio = cpunormalization.ratio_of(nr.annotations)
    except ValueError:
        return value
    if ratio is None or ratio <= 1.0:
        return value
    return ext.value_of_milli(fw.go_scale(value * 1000, ratio))


def _apply_meta(meta: dict, key: str, changes: Mapping[str, str | None]) -> None:
    if not changes:
        return
    target = meta.get(key)
    if target is None:
        target = meta[key] = {}
    for name, value in changes.items():
        if value is None:
            target.pop(name, None)
        else:
            target[name] = value


def prepare(node: Mapping[str, Any], nr: NodeResource) -> dict:
    """A deep copy of ``node`` with ``nr`` written in (Koordinator's Prepare step).

    Annotations/labels: set, or deleted for None. Resources in ``nr.resources``/``nr.resets``:
    removed when reset or without quantity, else capacity = allocatable = value (batch-cpu
    scaled by the normalization ratio when > 1). When batch resources were calculated, the
    origin batch allocatable is recorded and third-party batch allocations subtracted.
    """
    out = copy.deepcopy(dict(node))
    meta = out.setdefault("metadata", {})
    _apply_meta(meta, "annotations", nr.annotations)
    _apply_meta(meta, "labels", nr.labels)
    status = out.setdefault("status", {})
    capacity = status.get("capacity")
    if capacity is None:
        capacity = status["capacity"] = {}
    allocatable = status.get("allocatable")
    if allocatable is None:
        allocatable = status["allocatable"] = {}
    for name in sorted(set(nr.resources) | nr.resets):
        value = nr.resources.get(name)
        if name in nr.resets or value is None:
            capacity.pop(name, None)
            allocatable.pop(name, None)
            continue
        if name == ext.BATCH_CPU:
            value = _scaled_batch_cpu(value, nr)
        capacity[name] = allocatable[name] = fw.format_value(name, value)
    if ext.BATCH_CPU in nr.resources or ext.BATCH_CPU in nr.resets:
        batch.prepare_third_party(out)
    return out


def needs_status_sync(old_node: Mapping[str, Any], new_node: Mapping[str, Any], strategy: Mapping[str, Any] | None,
                      last_update: float | None, now: float, plugins: Iterable[str] = PLUGINS) -> bool:
    """Whether the node status must be written.

    True when there was no successful update yet, when the last one is older than
    ``updateTimeThresholdSeconds``, or when an allocatable of a selected plugin's resources
    differs by more than ``resourceDiffThreshold`` (or exists on one side only).
    """
    st = Strategy(strategy)
    if last_update is None or now > last_update + st.int("updateTimeThresholdSeconds"):
        return True
    threshold = st.float("resourceDiffThreshold")
    old = fw.node_status(old_node).get("allocatable") or {}
    new = fw.node_status(new_node).get("allocatable") or {}
    for plugin in selected_plugins(plugins):
        for name in _STATUS_RESOURCES.get(plugin, ()):
            if is_resource_diff(old, new, name, threshold):
                return True
    return False


def needs_meta_sync(old_node: Mapping[str, Any], new_node: Mapping[str, Any],
                    plugins: Iterable[str] = PLUGINS) -> bool:
    """Whether labels/annotations must be patched: the cpu-normalization ratio annotation was
    created, removed or changed by ≥ 0.01; the amplification annotation changed; a GPU label
    changed."""
    order = selected_plugins(plugins)
    if cpunormalization.NAME in order and cpunormalization.need_sync_meta(old_node, new_node):
        return True
    if amplification.NAME in order and amplification.need_sync_meta(old_node, new_node):
        return True
    return device.GPU_NAME in order and device.need_sync_meta(old_node, new_node)
