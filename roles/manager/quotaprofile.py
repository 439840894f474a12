"""The ``quotaprofile`` controller: one root ElasticQuota per ElasticQuotaProfile (reference B.7).

An ElasticQuotaProfile (``quota.koordinator.sh/v1alpha1``, namespaced) names a quota
(``spec.quotaName``) and selects nodes (``spec.nodeSelector``). The controller keeps the
ElasticQuota ``<namespace>/<quotaName>``:

* ``spec.min`` = Σ ``status.allocatable`` of the selected nodes × ``spec.resourceRatio`` for each
  resource key (annotation ``quota.scheduling.koordinator.sh/resource-keys`` on the profile, a
  JSON list, default ``["cpu", "memory"]``; 0 for a key no node has); ``spec.max`` =
  4611686018427387 (MaxInt64 / 2000) for each key;
* labels: ``profile`` = the profile's name, every ``spec.quotaLabels`` entry, ``tree-id``,
  ``is-root`` = "true"; annotations ``total-resource`` / ``unschedulable-resource``: JSON of the
  total and of the part on nodes that are ``spec.unschedulable`` or not Ready (both × ratio).

The tree id is the profile's ``quota.scheduling.koordinator.sh/tree-id`` label; a profile without
one gets the decimal FNV-1a 64 hash of ``"<namespace>/<name>"``, written back to the profile.

The quota is written only when its labels, annotations or spec differ from that; every profile
is looked at again every 10 s (2 s after a failed write), and at once when the profile, a node
it may select (labels, allocatable, schedulability, readiness) or its quota changes.

Departures from Koordinator, each visible as a Warning Event on the profile naming the field
and value (Koordinator logs or silently falls back):

* a ``nodeSelector`` that is not a valid label selector, a ``resourceRatio`` that is not a number,
  a ``resource-keys`` annotation that is not a JSON list of names, or an empty ``quotaName`` leave
  everything as it is (no tree id written, no quota created or changed) until the profile is
  fixed (Koordinator: an error requeue for the selector, ratio 1 for the ratio, the default keys
  for the annotation);
* a ``resourceRatio`` that is a number outside (0, 1] is applied as 1, as in Koordinator, with a
  Warning Event saying so.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import threading
from decimal import Decimal
from typing import Any

from koordinator.apis import quantity, selectors
from koordinator.apis.quota import (ANNOTATION_RESOURCE_KEYS, ANNOTATION_TOTAL_RESOURCE,
                                    ANNOTATION_UNSCHEDULABLE_RESOURCE, LABEL_IS_ROOT, LABEL_PROFILE, LABEL_TREE_ID)
from koordinator.runtime import errors
from koordinator.runtime.controller import Result
from koordinator_roles.manager.webhooks import fielderrors as fe

log = logging.getLogger("koordinator.manager.quotaprofile")

Obj = dict[str, Any]

NAME = "quotaprofile"
QUOTA_API_VERSION = "scheduling.sigs.k8s.io/v1alpha1"


DEFAULT_RESOURCE_KEYS = ("cpu", "memory")
#: Go's ``math.MaxInt64 / 2000``: the max of every key of a profile's quota.
QUOTA_MAX = str((2**63 - 1) // 2000)

RESYNC_SECONDS = 10.0
RETRY_SECONDS = 2.0

REASON_CREATE_FAILED = "CreateQuotaFailed"
REASON_UPDATE_FAILED = "UpdateQuotaFailed"
REASON_INVALID_PROFILE = "InvalidQuotaProfile"
REASON_RATIO_IGNORED = "ResourceRatioIgnored"

_FNV64_OFFSET = 0xCBF29CE484222325
_FNV64_PRIME = 0x100000001B3
# strconv.ParseFloat's decimal syntax (hex floats and underscores are not accepted here).
_FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_FLOAT_SPECIAL = {"inf", "+inf", "-inf", "infinity", "+infinity", "-infinity", "nan"}


class InvalidProfile(ValueError):
    """A profile field the controller cannot act on; the text names the field and its value."""


def tree_id(namespace: str, name: str) -> str:
    """The decimal FNV-1a 64-bit hash of ``"<namespace>/<name>"`` (Go's ``hash/fnv`` New64a)."""
    h = _FNV64_OFFSET
    for byte in f"{namespace}/{name}".encode():
        h ^= byte
        h = (h * _FNV64_PRIME) & 0xFFFFFFFFFFFFFFFF
    return str(h)


def parse_ratio(raw: Any) -> float | None:
    """``spec.resourceRatio`` as strconv.ParseFloat reads it; None when absent. Raises InvalidProfile."""
    if raw is None:
        return None
    text = raw if isinstance(raw, str) else None
    if text is None or not (_FLOAT_RE.match(text) or text.lower() in _FLOAT_SPECIAL):
        raise InvalidProfile(str(fe.invalid("spec.resourceRatio", raw, "must be a number in (0, 1]")))
    try:
        return float(text)
    except (ValueError, OverflowError):
        raise InvalidProfile(str(fe.invalid("spec.resourceRatio", raw, "must be a number in (0, 1]"))) from None


def effective_ratio(ratio: float | None) -> float | None:
    """The ratio applied: None (no scaling) when absent, 1.0 when outside (0, 1] (Koordinator's rule)."""
    if ratio is None:
        return None
    return ratio if 0 < ratio <= 1.0 else 1.0


def node_selector(profile: Obj) -> selectors.LabelSelector:
    """``spec.nodeSelector`` (absent: selects no node, as LabelSelectorAsSelector(nil)). Raises InvalidProfile."""
    raw = (profile.get("spec") or {}).get("nodeSelector")
    if raw is not None and not isinstance(raw, dict):
        raise InvalidProfile(str(fe.invalid("spec.nodeSelector", raw, "must be a label selector")))
    try:
        return selectors.label_selector_from_dict(raw)
    except (selectors.SelectorError, AttributeError, TypeError) as exc:
        raise InvalidProfile(str(fe.invalid("spec.nodeSelector", raw, str(exc)))) from None


def resource_keys(profile: Obj) -> list[str]:
    """The resource-keys annotation (JSON list of names) or cpu, memory. Raises InvalidProfile."""
    annotations = (profile.get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(ANNOTATION_RESOURCE_KEYS)
    if raw is None:
        return list(DEFAULT_RESOURCE_KEYS)
    path = f"metadata.annotations[{ANNOTATION_RESOURCE_KEYS}]"
    try:
        keys = json.loads(raw)
    except (ValueError, TypeError) as exc:
        raise InvalidProfile(str(fe.invalid(path, raw, f"must be a JSON list of resource names: {exc}"))) from None
    if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
        raise InvalidProfile(str(fe.invalid(path, raw, "must be a JSON list of resource names")))
    return list(dict.fromkeys(keys))


def _node_ready(node: Obj) -> bool:
    for cond in (node.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def node_unschedulable(node: Obj) -> bool:
    """``spec.unschedulable`` or not Ready (no Ready condition counts as not Ready)."""
    return bool((node.get("spec") or {}).get("unschedulable")) or not _node_ready(node)


class _Sum:
    """quotav1.Add over ResourceLists: exact values, each keeping the format of its first non-zero term."""

    def __init__(self) -> None:
        self.values: dict[str, Decimal] = {}
        self.formats: dict[str, str] = {}

    def add(self, resources: Obj | None, node_name: str) -> None:
        for key, raw in (resources or {}).items():
            try:
                parsed = quantity.parse(raw)
            except quantity.QuantityError as exc:
                log.warning("node %s: allocatable %s=%r is not a quantity (%s); left out", node_name, key, raw, exc)
                continue
            current = self.values.get(key)
            if current is None or current == 0:
                self.formats[key] = parsed.format
            self.values[key] = (current or Decimal(0)) + parsed.value

    def scaled(self, ratio: float | None) -> dict[str, str]:
        """Canonical texts, × ratio as Koordinator multiplies (cpu in milli, memory bytes, others units)."""
        out: dict[str, str] = {}
        for key, total in self.values.items():
            if ratio is None:
                out[key] = quantity.format_quantity(total, self.formats[key])
            elif key == "cpu":
                milli = int(float(quantity.milli_value(total)) * ratio)
                out[key] = quantity.format_quantity(Decimal(milli) / 1000, quantity.DECIMAL_SI)
            elif key == "memory":
                out[key] = quantity.format_quantity(int(float(quantity.value(total)) * ratio), quantity.BINARY_SI)
            else:
                out[key] = quantity.format_quantity(int(float(quantity.value(total)) * ratio), quantity.DECIMAL_SI)
        return out


def _go_json(resources: dict[str, str]) -> str:
    """json.Marshal of a ResourceList: sorted keys, no spaces."""
    return json.dumps(resources, sort_keys=True, separators=(",", ":"))


def desired_quota(profile: Obj, nodes: list[Obj], current: Obj | None, tree: str) -> Obj:
    """The ElasticQuota the profile asks for, built on ``current`` (its other labels, annotations and
    spec fields are kept). Raises InvalidProfile for bad profile input."""
    meta = profile.get("metadata") or {}
    spec = profile.get("spec") or {}
    quota_name = spec.get("quotaName")
    if not isinstance(quota_name, str) or not quota_name:
        raise InvalidProfile(str(fe.required("spec.quotaName", "the name of the quota to keep")))
    selector = node_selector(profile)
    raw_ratio = spec.get("resourceRatio")
    ratio = effective_ratio(parse_ratio(raw_ratio))
    keys = resource_keys(profile)

    total, unschedulable = _Sum(), _Sum()
    for node in sorted(nodes, key=lambda n: (n.get("metadata") or {}).get("name", "")):
        if not selector.matches((node.get("metadata") or {}).get("labels") or {}):
            continue
        name = (node.get("metadata") or {}).get("name", "")
        allocatable = (node.get("status") or {}).get("allocatable")
        total.add(allocatable, name)
        if node_unschedulable(node):
            unschedulable.add(allocatable, name)
    totals = total.scaled(ratio)
    unschedulables = unschedulable.scaled(ratio)

    quota = copy.deepcopy(current) if current is not None else {
        "apiVersion": QUOTA_API_VERSION, "kind": "ElasticQuota",
        "metadata": {"name": quota_name, "namespace": meta.get("namespace", "")}}
    quota_meta = quota.setdefault("metadata", {})
    labels = quota_meta.get("labels") or {}
    labels[LABEL_PROFILE] = meta.get("name", "")
    for k, v in (spec.get("quotaLabels") or {}).items():
        labels[k] = v
    labels[LABEL_TREE_ID] = tree
    labels[LABEL_IS_ROOT] = "true"
    quota_meta["labels"] = labels
    annotations = quota_meta.get("annotations") or {}
    annotations[ANNOTATION_TOTAL_RESOURCE] = _go_json(totals)
    annotations[ANNOTATION_UNSCHEDULABLE_RESOURCE] = _go_json(unschedulables)
    quota_meta["annotations"] = annotations
    quota_spec = quota.get("spec") or {}
    quota_spec["min"] = {k: totals.get(k, "0") for k in keys}
    quota_spec["max"] = {k: QUOTA_MAX for k in keys}
    quota["spec"] = quota_spec
    return quota


def _canonical_spec(spec: Any) -> Any:
    if not isinstance(spec, dict):
        return spec
    out = dict(spec)
    for field in ("min", "max"):
        resources = spec.get(field)
        if isinstance(resources, dict):
            try:
                out[field] = {k: quantity.canonical(v) for k, v in resources.items()}
            except quantity.QuantityError:
                pass
    return out


def quota_differs(current: Obj, wanted: Obj) -> bool:
    """Labels, annotations or spec (quantities compared by value) differ."""
    cm, wm = current.get("metadata") or {}, wanted.get("metadata") or {}
    return ((cm.get("labels") or {}) != (wm.get("labels") or {})
            or (cm.get("annotations") or {}) != (wm.get("annotations") or {})
            or _canonical_spec(current.get("spec") or {}) != _canonical_spec(wanted.get("spec") or {}))


def _meta(obj: Obj | None) -> Obj:
    return (obj or {}).get("metadata") or {}


def _node_relevant_change(old: Obj | None, new: Obj) -> bool:
    if old is None:
        return True
    return (_meta(old).get("labels") != _meta(new).get("labels")
            or (old.get("status") or {}).get("allocatable") != (new.get("status") or {}).get("allocatable")
            or node_unschedulable(old) != node_unschedulable(new))


def _content_changed(old: Obj | None, new: Obj) -> bool:
    if old is None:
        return True
    return (_meta(old).get("labels") != _meta(new).get("labels")
            or _meta(old).get("annotations") != _meta(new).get("annotations")
            or old.get("spec") != new.get("spec"))


class QuotaProfileController:
    """The leader-gated ``quotaprofile`` controller, keyed ``<namespace>/<profile name>``."""

    def __init__(self, runtime: Any, *, resync_seconds: float = RESYNC_SECONDS) -> None:
        self.client = runtime.client
        self.recorder = runtime.event_recorder()
        self.resync_seconds = resync_seconds
        informers = runtime.informers
        self.profiles = informers.informer("ElasticQuotaProfile")
        self.nodes = informers.informer("Node")
        self.quotas = informers.informer("ElasticQuota")
        self._lock = threading.Lock()
        # key -> (profile resourceVersion, message) of the last Warning for bad input: not repeated every resync.
        self._reported: dict[str, tuple[str, str]] = {}
        self.controller = runtime.controller(NAME, self.reconcile)
        c = self.controller
        c.watch(self.profiles, predicate=_content_changed)
        c.watch(self.nodes, map_func=self._profiles_selecting, predicate=_node_relevant_change)
        c.watch(self.quotas, map_func=self._profile_of_quota, predicate=_content_changed)

    # -- event mapping ---------------------------------------------------------------------------

    def _profiles_selecting(self, node: Obj) -> list[str]:
        labels = _meta(node).get("labels") or {}
        keys = []
        for profile in self.profiles.store.list():
            try:
                if node_selector(profile).matches(labels):
                    keys.append(f"{_meta(profile).get('namespace')}/{_meta(profile).get('name')}")
            except InvalidProfile:
                continue
        return keys

    def _profile_of_quota(self, quota: Obj) -> list[str]:
        profile = (_meta(quota).get("labels") or {}).get(LABEL_PROFILE)
        if not profile:
            return []
        key = f"{_meta(quota).get('namespace')}/{profile}"
        return [key] if self.profiles.store.get(key) is not None else []

    # -- reconcile -------------------------------------------------------------------------------

    def reconcile(self, key: str) -> Result | None:
        profile = self.profiles.store.get(key)
        if profile is None:
            with self._lock:
                self._reported.pop(key, None)
            return None
        meta = _meta(profile)
        namespace, name = meta.get("namespace", ""), meta.get("name", "")
        labels = meta.get("labels") or {}
        tree = labels.get(LABEL_TREE_ID) or tree_id(namespace, name)
        quota_name = (profile.get("spec") or {}).get("quotaName") or ""
        current = self.quotas.store.get(f"{namespace}/{quota_name}") if quota_name else None
        try:
            wanted = desired_quota(profile, self.nodes.store.list(), current, tree)
        except InvalidProfile as exc:
            self._report(key, profile, REASON_INVALID_PROFILE, str(exc))
            return Result(requeue_after=self.resync_seconds)
        self._note_ratio(key, profile)

        if not labels.get(LABEL_TREE_ID):
            # Written back first, as Koordinator does: a failure retries with backoff before the quota is touched.
            self.client.patch("ElasticQuotaProfile", name, {"metadata": {"labels": {LABEL_TREE_ID: tree}}},
                              namespace=namespace)
            log.info("profile %s: tree id %s written", key, tree)

        if current is None:
            try:
                self.client.create(wanted)
            except errors.AlreadyExists:
                return Result(requeue=True)  # our cache is behind: look again with the stored quota
            except errors.ApiError as exc:
                self.recorder.event(profile, "Warning", REASON_CREATE_FAILED, f"failed to create quota, err: {exc}")
                log.error("profile %s: failed to create quota %s/%s: %s", key, namespace, quota_name, exc)
                return Result(requeue_after=RETRY_SECONDS)
            log.info("profile %s: created quota %s/%s min=%s", key, namespace, quota_name, wanted["spec"]["min"])
        elif quota_differs(current, wanted):
            try:
                self.client.update(wanted)
            except errors.Conflict:
                return Result(requeue=True)
            except errors.ApiError as exc:
                self.recorder.event(profile, "Warning", REASON_UPDATE_FAILED, f"failed to update quota, err: {exc}")
                log.error("profile %s: failed to update quota %s/%s: %s", key, namespace, quota_name, exc)
                return Result(requeue_after=RETRY_SECONDS)
            log.info("profile %s: updated quota %s/%s min=%s", key, namespace, quota_name, wanted["spec"]["min"])
        return Result(requeue_after=self.resync_seconds)

    def _note_ratio(self, key: str, profile: Obj) -> None:
        raw = (profile.get("spec") or {}).get("resourceRatio")
        ratio = parse_ratio(raw)
        if ratio is not None and effective_ratio(ratio) != ratio:  # NaN too
            message = str(fe.invalid("spec.resourceRatio", raw, "must be in (0, 1]: using 1"))
            self._report(key, profile, REASON_RATIO_IGNORED, message)
        else:
            with self._lock:
                self._reported.pop(key, None)

    def _report(self, key: str, profile: Obj, reason: str, message: str) -> None:
        version = _meta(profile).get("resourceVersion", "")
        with self._lock:
            if self._reported.get(key) == (version, message):
                return
            self._reported[key] = (version, message)
        log.warning("profile %s: %s", key, message)
        self.recorder.event(profile, "Warning", reason, message)


def add_quotaprofile_controller(runtime: Any) -> QuotaProfileController:
    """Register the ``quotaprofile`` controller on ``runtime``."""
    return QuotaProfileController(runtime)
