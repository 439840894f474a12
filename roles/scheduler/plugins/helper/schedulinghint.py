"""The scheduling hint of a pod (Koordinator's ``apis/extension`` SchedulingHint), shared by plugins.

A pod may carry the annotation ``internal.scheduling.koordinator.sh/scheduling-hint`` (or the
deprecated ``scheduling.koordinator.sh/scheduling-hint``) with JSON::

    {"nodeNames": ["n1"], "preferredNodeNames": ["n2", "n3"],
     "extensions": {"DeviceShare": {...}, "NodeNUMAResource": {...}}}

The SchedulingHint plugin parses it once per cycle (in BeforePreFilter) and writes the result to the
CycleState under :data:`STATE_KEY`; other plugins read it with :func:`hint_from_state` (e.g.
Reservation's candidate nodes, DeviceShare / NodeNUMAResource reproducing a recorded allocation
from their ``extensions`` entry) instead of parsing the annotation again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping

ANNOTATION_SCHEDULING_HINT = "internal.scheduling.koordinator.sh/scheduling-hint"
DEPRECATED_ANNOTATION_SCHEDULING_HINT = "scheduling.koordinator.sh/scheduling-hint"

#: CycleState key of the parsed :class:`SchedulingHint` (absent: the pod has no hint, or the
#: SchedulingHint plugin is not enabled).
STATE_KEY = "SchedulingHint/hint"


class SchedulingHintError(ValueError):
    """The annotation is not a valid hint; the message names the annotation and its value."""


@dataclass(frozen=True)
class SchedulingHint:
    """A parsed hint. Read-only: it is shared by every plugin of the cycle (and by cloned states)."""

    node_names: tuple[str, ...] = ()
    preferred_node_names: tuple[str, ...] = ()
    extensions: Mapping[str, Any] = field(default_factory=dict)
    annotation: str = ANNOTATION_SCHEDULING_HINT

    def extension(self, plugin: str) -> Any:
        """The ``extensions`` entry of ``plugin`` (None when absent)."""
        return self.extensions.get(plugin)

    def clone(self) -> "SchedulingHint":
        # Immutable: preemption's cloned CycleState may share it.
        return self


def _names(raw: Any, key: str, fail: Any) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(n, str) for n in raw):
        fail(f"{key} must be a list of node names")
    return tuple(raw)


def parse_scheduling_hint(annotations: Mapping[str, str] | None) -> SchedulingHint | None:
    """The pod's hint (the current annotation first, then the deprecated one), None without either.

    Raises :class:`SchedulingHintError` naming the annotation and its value when it is not a JSON
    object of the documented form.
    """
    if not annotations:
        return None
    key = ANNOTATION_SCHEDULING_HINT
    raw = annotations.get(key)
    if raw is None:
        key = DEPRECATED_ANNOTATION_SCHEDULING_HINT
        raw = annotations.get(key)
        if raw is None:
            return None

    def fail(why: str) -> None:
        raise SchedulingHintError(f"invalid annotation {key}: {raw!r}: {why}")

    try:
        data = json.loads(raw)
    except (TypeError, ValueError) as err:
        fail(f"not valid JSON: {err}")
    if not isinstance(data, dict):
        fail("must be a JSON object")
    extensions = data.get("extensions")
    if extensions is None:
        extensions = {}
    elif not isinstance(extensions, dict):
        fail("extensions must be an object keyed by plugin name")
    return SchedulingHint(node_names=_names(data.get("nodeNames"), "nodeNames", fail),
                          preferred_node_names=_names(data.get("preferredNodeNames"), "preferredNodeNames", fail),
                          extensions=extensions, annotation=key)


def hint_from_state(state: Any) -> SchedulingHint | None:
    """The hint the SchedulingHint plugin stored for this cycle, or None."""
    return state.read(STATE_KEY)
