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
from koordinator.apis.selectors import SelectorError, label_selector_from_dict
from koordinator.runtime.webhook import AdmissionResponse, allowed, errored
from koordinator_roles.manager.webhooks import _request as rq
from koordinator_roles.manager.webhooks.listers import Listers
from koordinator_roles.manager.webhooks.smp import PatchError, strategic_merge

log = logging.getLogger("koordinator.manager.webhooks.pod")

Obj = dict[str, Any]

ANNOTATION_SKIP_UPDATE_RESOURCES = "config.koordinator.sh/skip-update-resources"
GATE_SKIP_RESOURCES = "ColocationProfileSkipMutatingResources"
GATE_DISABLE_EXTENDED_SPEC = "DisableExtendedResourceSpec"
EXTENDED_SPEC_RESOURCES = (extension.BATCH_CPU, extension.BATCH_MEMORY)


class MutationError(Exception):
    """Mutation failed; the admission is answered with ``code`` and the message."""

    def __init__(self, message: str, code: int = 500) -> None:
        super().__init__(message)
        self.code = code


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
        matched = [p for p in profiles if self._matches(p, pod)]
        if not matched:
            return
        matched.sort(key=rq.name)
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
            if namespace is not None and not _selector_matches(ns_selector, rq.labels(namespace)):
                return False
        selector = spec.get("selector")
        if selector is not None and not _selector_matches(selector, rq.labels(pod)):
            return False
        return True


def _selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """Empty selector -> every object; an unparseable one counts as matched (Koordinator's rule)."""
    try:
        sel = label_selector_from_dict(selector, nil_matches_nothing=False)
    except (SelectorError, TypeError, AttributeError, ValueError):
        return True
    return sel.matches(labels)


def probability_percent(profile: Obj) -> int:
    """``probability`` scaled against 100 (``intstr.GetScaledValueFromIntOrPercent``, rounding down)."""
    value = (profile.get("spec") or {}).get("probability")
    if value is None:
        return 100
    if isinstance(value, bool):
        raise MutationError(f"invalid value for IntOrString: invalid type: {value!r} is neither int nor string")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        if not value.endswith("%"):
            raise MutationError("invalid value for IntOrString: invalid type: string is not a percentage")
        try:
            percent = int(value[:-1])
        except ValueError:
            raise MutationError(f'invalid value "{value}": strconv.Atoi: parsing "{value[:-1]}": invalid syntax') from None
        return percent * 100 // 100
    raise MutationError(f"invalid value for IntOrString: invalid type: {type(value).__name__}")


def should_skip(profile: Obj, rng: random.Random) -> bool:
    """Skip when the percent is 0, or not 100 and a draw in [0, 99] exceeds it."""
    percent = probability_percent(profile)
    return percent == 0 or (percent != 100 and rng.randrange(100) > percent)


def apply_profile(pod: Obj, profile: Obj, listers: Listers) -> None:
    """Koordinator's mutation order a–j for one profile."""
    spec = profile.get("spec") or {}
    md = pod.setdefault("metadata", {})
    pod_spec = pod.setdefault("spec", {})

    if spec.get("labels"):
        md["labels"] = {**(md.get("labels") or {}), **spec["labels"]}
    if spec.get("annotations"):
        md["annotations"] = {**(md.get("annotations") or {}), **spec["annotations"]}
    if spec.get("labelKeysMapping"):
        current = dict(md.get("labels") or {})
        for old, new in spec["labelKeysMapping"].items():
            current[new] = current.get(old, "")
        md["labels"] = current
    if spec.get("annotationKeysMapping"):
        current = dict(md.get("annotations") or {})
        for old, new in spec["annotationKeysMapping"].items():
            current[new] = current.get(old, "")
        md["annotations"] = current
    if spec.get("labelSuffixes"):
        current = dict(md.get("labels") or {})
        for key, suffix in spec["labelSuffixes"].items():
            if key in current:
                current[key] = current[key] + suffix
        md["labels"] = current
    if spec.get("schedulerName"):
        pod_spec["schedulerName"] = spec["schedulerName"]
    if spec.get("qosClass"):
        md["labels"] = {**(md.get("labels") or {}), extension.LABEL_POD_QOS: spec["qosClass"]}
    if spec.get("priorityClassName"):
        name = spec["priorityClassName"]
        pc = listers.priority_class(name)
        if pc is None:
            raise MutationError(f'priorityclasses.scheduling.k8s.io "{name}" not found')
        pod_spec["priorityClassName"] = name
        pod_spec["priority"] = int(pc.get("value") or 0)
        if pc.get("preemptionPolicy"):
            pod_spec["preemptionPolicy"] = pc["preemptionPolicy"]
        else:
            pod_spec.pop("preemptionPolicy", None)
    if spec.get("koordinatorPriority") is not None:
        md["labels"] = {**(md.get("labels") or {}), extension.LABEL_POD_PRIORITY: str(int(spec["koordinatorPriority"]))}
    if spec.get("patch") is not None:
        try:
            patched = strategic_merge(pod, spec["patch"])
        except PatchError as exc:
            raise MutationError(f"profile {rq.name(profile)}: patch: {exc}") from None
        pod.clear()
        pod.update(patched)


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
