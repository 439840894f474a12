"""``/mutate-pod``: ClusterColocationProfiles, batch/mid resource translation, extended-resource-spec.

On CREATE (UPDATE and the rest pass untouched), in this order (reference B.6.1):

1. every ClusterColocationProfile whose ``namespaceSelector`` matches the pod's Namespace and whose
   ``selector`` matches the pod, sorted by name, is applied unless its ``probability`` skips it:
   labels, annotations, labelKeysMapping, annotationKeysMapping, labelSuffixes, schedulerName,
   qosClass, priorityClassName (+ priority and preemptionPolicy from the PriorityClass),
   koordinatorPriority, patch (strategic merge) — a later profile overrides an earlier one;
2. if at least one profile matched (even when all were skipped by probability), no matched profile
   carries ``config.koordinator.sh/skip-update-resources`` and the gate
   ``ColocationProfileSkipMutatingResources`` is off: cpu/memory requests and limits of a
   koord-batch / koord-mid pod become ``kubernetes.io/{batch,mid}-{cpu,memory}`` (cpu as its milli
   value: ``500m`` -> ``500``), an extended limit without request gets request = limit, and
   ``spec.overhead`` is renamed the same way;
3. unless ``DisableExtendedResourceSpec``: the batch resources of every container are written to
   the annotation ``node.koordinator.sh/extended-resource-spec`` (when they differ from it).

A selector that cannot be evaluated counts as matched, as in Koordinator; that includes a
namespace selector when the pod's Namespace cannot be found (the listers already retried the API
server for it). A missing PriorityClass fails the admission (500) with the API's NotFound text.
"""

from __future__ import annotations

import copy
import json
import logging
import random
from collections.abc import Mapping
from typing import Any

from koordinator.apis import extension, quantity
from koordinator.runtime.webhook import AdmissionResponse, allowed, errored
from koordinator_roles.manager.webhooks import _request as rq
from koordinator_roles.manager.webhooks import colocation_profiles as profiles_
from koordinator_roles.manager.webhooks.colocation_profiles import (ANNOTATION_SKIP_UPDATE_RESOURCES, MutationError,
                                                                    probability_percent, should_skip)
from koordinator_roles.manager.webhooks.listers import Listers

log = logging.getLogger("koordinator.manager.webhooks.pod")

Obj = dict[str, Any]

__all__ = ["ANNOTATION_SKIP_UPDATE_RESOURCES", "MutationError", "PodMutatingHandler", "apply_profile",
           "probability_percent", "should_skip", "translate_resources", "set_extended_resource_spec"]

GATE_SKIP_RESOURCES = "ColocationProfileSkipMutatingResources"
GATE_DISABLE_EXTENDED_SPEC = "DisableExtendedResourceSpec"
EXTENDED_SPEC_RESOURCES = (extension.BATCH_CPU, extension.BATCH_MEMORY)


class PodMutatingHandler:
    """The ``/mutate-pod`` handler; ``rng`` decides probabilities (``rng.randrange(100)``)."""

    def __init__(self, listers: Listers, gates: Mapping[str, bool] | None = None,
                 rng: random.Random | None = None) -> None:
        self.listers = listers
        self.gates = dict(gates or {})
        self.rng = rng or random.Random()

    def __call__(self, request: Obj) -> AdmissionResponse:
        if rq.ignored(request, "pods"):
            return allowed()
        try:
            original = rq.obj(request)
        except rq.BadObject as exc:
            return errored(400, str(exc))
        if original is None or rq.operation(request) != rq.CREATE:
            return allowed()
        pod = copy.deepcopy(original)
        md = pod.setdefault("metadata", {})
        namespace_empty = not md.get("namespace")
        if namespace_empty:
            md["namespace"] = request.get("namespace") or ""
        try:
            self.mutate(pod)
        except MutationError as exc:
            log.error("failed to mutate pod %s/%s: %s", md.get("namespace"), md.get("name"), exc)
            return errored(exc.code, str(exc))
        if namespace_empty:
            md.pop("namespace", None)  # the webhook must not change the namespace
        if not md and "metadata" not in original:
            pod.pop("metadata", None)
        return allowed() if pod == original else AdmissionResponse(patched=pod)

    def mutate(self, pod: Obj) -> None:
        """Apply the profiles, the resource translation and the extended-resource-spec in place."""
        self.apply_colocation_profiles(pod)
        if not self.gates.get(GATE_DISABLE_EXTENDED_SPEC, False):
            set_extended_resource_spec(pod)

    def apply_colocation_profiles(self, pod: Obj) -> None:
        profiles = self.listers.colocation_profiles()
        if not profiles:
            return
        matched = profiles_.matched_profiles(profiles, lambda p: self._matches(p, pod))
        if not matched:
            return
        skip_resources = False
        for profile in matched:
            if ANNOTATION_SKIP_UPDATE_RESOURCES in rq.annotations(profile):
                skip_resources = True
            if should_skip(profile, self.rng):
                log.debug("skip profile %s for pod %s by probability", rq.name(profile), rq.name(pod))
                continue
            apply_profile(pod, profile, self.listers)
        if not skip_resources and not self.gates.get(GATE_SKIP_RESOURCES, False):
            translate_resources(pod)

    def _matches(self, profile: Obj, pod: Obj) -> bool:
        spec = profile.get("spec") or {}
        ns_selector = spec.get("namespaceSelector")
        if ns_selector is not None:
            namespace = self.listers.namespace(rq.meta(pod).get("namespace") or "")
            # A missing namespace is an evaluation error, which Koordinator counts as a match.
            if namespace is not None and not profiles_.selector_matches(ns_selector, rq.labels(namespace)):
                return False
        selector = spec.get("selector")
        if selector is not None and not profiles_.selector_matches(selector, rq.labels(pod)):
            return False
        return True


def apply_profile(pod: Obj, profile: Obj, listers: Listers) -> None:
    """Koordinator's mutation order a–j for one profile on a pod (its own spec takes the scheduling fields)."""
    profiles_.apply_profile(pod, profile, listers, lambda obj: obj.setdefault("spec", {}))


def translate_resources(pod: Obj) -> None:
    """Rename cpu/memory to the batch/mid extended resources of the pod's priority class."""
    names = extension.RESOURCE_NAME_MAP.get(extension.priority_class_with_default(pod))
    if not names:
        return  # prod, none and free pods keep cpu/memory
    spec = pod.get("spec") or {}
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            resources = container.get("resources")
            if not isinstance(resources, dict):
                continue
            for which in ("requests", "limits"):
                if isinstance(resources.get(which), dict):
                    _rename(resources[which], names)
            limits = resources.get("limits") or {}
            for ext in names.values():
                if ext in limits and ext not in (resources.get("requests") or {}):
                    resources.setdefault("requests", {})
                    if resources["requests"] is None:
                        resources["requests"] = {}
                    resources["requests"][ext] = limits[ext]
    if isinstance(spec.get("overhead"), dict):
        _rename(spec["overhead"], names)


def _rename(resources: dict, names: Mapping[str, str]) -> None:
    for native, ext in names.items():
        if native not in resources:
            continue
        raw = resources.pop(native)
        try:
            if native == extension.CPU:
                # Batch/mid cpu is stored as milli-cores in a plain integer quantity.
                resources[ext] = quantity.format_quantity(quantity.milli_value(raw))
            else:
                resources[ext] = quantity.canonical(raw)
        except quantity.QuantityError as exc:
            raise MutationError(f"{native}: {raw!r}: {exc}", code=400) from None


def extended_resource_spec(pod: Obj) -> Obj:
    """``{"containers": {name: {"limits": {...}, "requests": {...}}}}`` over batch resources ({} if none)."""
    containers: dict[str, Obj] = {}
    for container in (pod.get("spec") or {}).get("containers") or []:
        resources = container.get("resources") or {}
        entry: Obj = {}
        for which in ("limits", "requests"):
            found = {n: quantity.canonical(q) for n, q in (resources.get(which) or {}).items()
                     if n in EXTENDED_SPEC_RESOURCES}
            if found:
                entry[which] = found
        if entry:
            containers[container.get("name", "")] = entry
    return {"containers": containers} if containers else {}


def _normalise_spec(raw: Any) -> Obj:
    """A parsed annotation in the form :func:`extended_resource_spec` builds (for comparing)."""
    if not isinstance(raw, dict):
        return {}
    out: dict[str, Obj] = {}
    for cname, entry in (raw.get("containers") or {}).items():
        norm: Obj = {}
        for which in ("limits", "requests"):
            values = (entry or {}).get(which) or {}
            if values:
                norm[which] = {n: quantity.canonical(q) for n, q in values.items()}
        out[cname] = norm
    return {"containers": out} if out else {}


def set_extended_resource_spec(pod: Obj) -> None:
    """Write the annotation when the pod's batch resources differ from it (absent == empty)."""
    spec = extended_resource_spec(pod)
    md = pod.setdefault("metadata", {})
    current_raw = (md.get("annotations") or {}).get(extension.ANNOTATION_EXTENDED_RESOURCE_SPEC)
    current: Obj = {}
    if current_raw is not None:
        try:
            current = _normalise_spec(json.loads(current_raw))
        except (ValueError, TypeError, AttributeError, quantity.QuantityError) as exc:
            raise MutationError(f"failed to get current extended resource spec, err: {exc}") from None
    if current == spec:
        return
    md["annotations"] = {**(md.get("annotations") or {}),
                         extension.ANNOTATION_EXTENDED_RESOURCE_SPEC: json.dumps(spec, sort_keys=True,
                                                                                 separators=(",", ":"))}
