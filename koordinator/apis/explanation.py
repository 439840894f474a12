"""ScheduleExplanation (``scheduling.koordinator.sh/v1alpha1``): names the scheduler and ``explain`` share.

The scheduler writes one per pod (same namespace and name) when its :data:`GATE` feature gate is on;
the status follows the reference schema, and :data:`DETAILS_ANNOTATION` holds what the schema has no
field for, as JSON:

- a schedulable pod: ``{"chosenNode": N, "plugins": [{"name", "weight"}], "nodes": [{"name", "total",
  "scores": {plugin: normalised score}}]}``, the chosen node first, then the next best;
- an unschedulable one: ``{"failedNodeCounts": [n, ...]}``, how many nodes each ``nodeFailedDetails``
  entry rejected (its ``failedNodes`` lists at most :data:`MAX_FAILED_NODES` of them).
"""

from __future__ import annotations

GROUP_VERSION = "scheduling.koordinator.sh/v1alpha1"
KIND = "ScheduleExplanation"
#: The scheduler's feature gate (default off) that makes it write ScheduleExplanation objects.
GATE = "ScheduleExplanation"
DETAILS_ANNOTATION = "scheduling.koordinator.sh/explanation-details"
#: Node names kept per (plugin, reason) in ``failedNodes``.
MAX_FAILED_NODES = 100
