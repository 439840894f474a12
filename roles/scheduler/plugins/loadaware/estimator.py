"""The defaultEstimator: how much a pod will use before koordlet reports it, and what a node offers.

Quirks kept on purpose (reference §8.3): a request-less pod is estimated at 250m / 200Mi
*unscaled*; koord-mid pods without mid-cpu/mid-memory requests estimate to 0; koord-free pods
have no translated resource name, so everything estimates to 0.
"""

from __future__ import annotations

import json
from typing import Any, Mapping

from koordinator.apis import extension
from koordinator_roles.scheduler.plugins.loadaware.args import CPU, LoadAwareArgs, go_round, to_units

ANNOTATION_SCALING_FACTORS = "scheduling.koordinator.sh/load-estimated-scaling-factors"
ANNOTATION_SECONDS_AFTER_POD_SCHEDULED = "scheduling.koordinator.sh/load-estimated-seconds-after-pod-scheduled"
ANNOTATION_SECONDS_AFTER_INITIALIZED = "scheduling.koordinator.sh/load-estimated-seconds-after-initialized"
ANNOTATION_RAW_ALLOCATABLE = "node.koordinator.sh/raw-allocatable"

DEFAULT_MILLI_CPU_REQUEST = 250
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

_DEFAULT_CPU_NAMES = (extension.CPU, extension.BATCH_CPU)
_DEFAULT_MEMORY_NAMES = (extension.MEMORY, extension.BATCH_MEMORY)


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def translate_resource(name: str, priority_class: str) -> str:
    """The resource a pod of this priority class really requests for ``name`` ("" = none)."""
    if priority_class in (extension.PRIORITY_PROD, extension.PRIORITY_NONE):
        return name
    return extension.RESOURCE_NAME_MAP.get(priority_class, {}).get(name, "")


def custom_seconds(pod: Mapping[str, Any], annotation: str) -> int:
    """A per-pod estimation period from its annotation; -1 when absent or not an integer."""
    raw = _annotations(pod).get(annotation)
    if raw is None:
        return -1
    try:
        return int(str(raw).strip())
    except ValueError:
        return -1


class DefaultEstimator:
    """Koordinator's ``defaultEstimator`` over validated args."""

    name = "defaultEstimator"

    def __init__(self, args: LoadAwareArgs) -> None:
        self.args = args

    def scaling_factors(self, pod: Mapping[str, Any]) -> dict[str, int]:
        factors = dict(self.args.estimated_scaling_factors)
        if self.args.allow_customize_estimation:
            raw = _annotations(pod).get(ANNOTATION_SCALING_FACTORS)
            if raw:
                try:
                    custom = json.loads(raw)
                except ValueError:
                    custom = None
                if isinstance(custom, dict):
                    for k, v in custom.items():
                        if isinstance(v, int) and not isinstance(v, bool):
                            factors[str(k)] = v
        return factors

    def estimate_pod(self, pod: Mapping[str, Any], priority_class: str | None = None,
                     requests: Mapping[str, int] | None = None) -> dict[str, int]:
        """Estimated usage per scaling-factor resource, in LoadAware units (cpu milli, others Value()).

        ``priority_class`` and ``requests`` (:func:`extension.pod_requests`): when the caller already has them.
        """
        pc = extension.priority_class_with_default(pod) if priority_class is None else priority_class
        if requests is None:
            requests = extension.pod_requests(pod)
        limits = extension.pod_limits(pod)
        out: dict[str, int] = {}
        for name, factor in self.scaling_factors(pod).items():
            real = translate_resource(name, pc)
            req = requests.get(real, 0) if real else 0
            lim = limits.get(real, 0) if real else 0
            # cpu counts milli-cores; batch/mid cpu already count milli-cores as whole units (Value()).
            if real == CPU:
                req_u, lim_u = req, lim
            else:
                req_u, lim_u = extension.value_of_milli(req), extension.value_of_milli(lim)
            q = lim_u if lim_u > req_u else req_u
            if q == 0:
                if real in _DEFAULT_CPU_NAMES:
                    out[name] = DEFAULT_MILLI_CPU_REQUEST
                elif real in _DEFAULT_MEMORY_NAMES:
                    out[name] = DEFAULT_MEMORY_REQUEST
                else:
                    out[name] = 0
                continue
            e = go_round(q * factor / 100)
            if lim_u > 0 and e > lim_u:
                e = lim_u
            out[name] = e
        return out

    def estimate_node(self, node: Mapping[str, Any] | None, allocatable_milli: Mapping[str, int]) -> dict[str, int]:
        """Allocatable for load purposes: ``allocatable`` with ``raw-allocatable`` entries over it."""
        alloc = dict(allocatable_milli)
        raw = _annotations(node or {}).get(ANNOTATION_RAW_ALLOCATABLE)
        if raw:
            try:
                parsed = json.loads(raw)
                raw_alloc = extension.resource_list(parsed) if isinstance(parsed, dict) else {}
            except Exception:  # a bad annotation means "no override", as in Koordinator
                raw_alloc = {}
            if raw_alloc and any(alloc.get(k) != v for k, v in raw_alloc.items()):
                alloc.update(raw_alloc)
        return {name: to_units(name, v) for name, v in alloc.items()}
