"""The ElasticQuota tree the quota webhooks check against (reference B.6.3, B.6.4).

Koordinator keeps this tree in memory, fed by an informer; here it is rebuilt for each request
from the listers' cached quotas (a few hundred objects at most), so every replica decides from
the same informer state and nothing can drift. The consequence: two creations racing each other
are each checked against the cache without the other, where Koordinator's single process would
serialise them (and still race across its replicas).

Every check returns the error text Koordinator returns (None when it passes); the handlers turn
it into a 400 answer. Two texts carry a parenthesised detail after Koordinator's words, naming the
fields and values involved: min > max (``spec.min[key]`` and ``spec.max[key]``) and the min sums
(the quota, its parent or children, and the per-resource sum against the limit).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable

from koordinator.apis import quantity
from koordinator.apis.quota import (ANNOTATION_MAX_STRICT_CHECK_KEYS, ANNOTATION_NAMESPACES, ANNOTATION_SHARED_WEIGHT,
                                    DEFAULT_QUOTA, LABEL_ALLOW_FORCE_UPDATE, LABEL_IS_PARENT, LABEL_IS_ROOT,
                                    LABEL_PARENT, LABEL_PREEMPTIBLE, LABEL_QUOTA_NAME, LABEL_TREE_ID, ROOT_QUOTA,
                                    SYSTEM_QUOTA)
from koordinator_roles.manager.webhooks import _request as rq
from koordinator_roles.manager.webhooks.listers import Listers

Obj = dict[str, Any]


GATE_ENABLE_UPDATE_RESOURCE_KEY = "ElasticQuotaEnableUpdateResourceKey"
GATE_DISABLE_DEFAULT_QUOTA = "DisableDefaultQuota"
GATE_PARENT_SUBMIT_POD = "SupportParentQuotaSubmitPod"


class QuotaError(ValueError):
    """A quota that cannot be admitted; the text is Koordinator's."""


def parent_name(quota: Obj) -> str:
    """The parent label, or the root quota when it is empty (the root itself has no parent)."""
    parent = rq.labels(quota).get(LABEL_PARENT, "")
    if not parent and rq.name(quota) != ROOT_QUOTA:
        return ROOT_QUOTA
    return parent


def annotation_namespaces(quota: Obj) -> list[str]:
    """The JSON list in the namespaces annotation; an unparsable value binds nothing."""
    raw = rq.annotations(quota).get(ANNOTATION_NAMESPACES, "")
    if not raw:
        return []
    try:
        value = json.loads(raw)
    except ValueError:
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def resource_list(raw: Any) -> dict[str, Decimal]:
    """A ResourceList as exact values; :class:`QuotaError` naming a bad quantity."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise QuotaError(f"resource list must be an object, got {type(raw).__name__}")
    out: dict[str, Decimal] = {}
    for key, value in raw.items():
        try:
            out[key] = quantity.parse_quantity(value)
        except quantity.QuantityError as exc:
            raise QuotaError(f"{key}: {json.dumps(value)}: {exc}") from None
    return out


def _fmt(value: Decimal) -> str:
    return quantity.format_quantity(value)


def _names(keys: Iterable[str]) -> str:
    return "[" + " ".join(sorted(keys)) + "]"


def _exceeds(total: Mapping[str, Decimal], limit: Mapping[str, Decimal]) -> bool:
    """Not "≤ completely": some resource of ``total`` above ``limit`` (absent counts as 0)."""
    return any(v - limit.get(k, Decimal(0)) > 0 for k, v in total.items())


def _first_excess(total: Mapping[str, Decimal], limit: Mapping[str, Decimal]) -> str:
    """The first resource (by name) where ``total`` is above ``limit``."""
    return min(k for k, v in total.items() if v - limit.get(k, Decimal(0)) > 0)


@dataclass
class QuotaInfo:
    """What the tree checks need of one quota."""

    name: str
    parent: str
    is_parent: bool
    tree_id: str
    is_tree_root: bool
    allow_force_update: bool
    min: dict[str, Decimal] = field(default_factory=dict)
    max: dict[str, Decimal] = field(default_factory=dict)

    @classmethod
    def from_quota(cls, quota: Obj) -> "QuotaInfo":
        labels = rq.labels(quota)
        spec = quota.get("spec") or {}
        return cls(name=rq.name(quota), parent=parent_name(quota), is_parent=labels.get(LABEL_IS_PARENT) == "true",
                   tree_id=labels.get(LABEL_TREE_ID, ""), is_tree_root=labels.get(LABEL_IS_ROOT) == "true",
                   allow_force_update=labels.get(LABEL_ALLOW_FORCE_UPDATE) == "true",
                   min=resource_list(spec.get("min")), max=resource_list(spec.get("max")))


def _cached_info(quota: Obj) -> QuotaInfo | None:
    try:
        return QuotaInfo.from_quota(quota)
    except QuotaError:
        return None  # an object the server accepted but we cannot read: leave it out of the tree


class QuotaTopology:
    """Quota infos by name, children by parent name (the root always present), namespace bindings."""

    def __init__(self, listers: Listers | None = None) -> None:
        self.listers = listers
        self.infos: dict[str, QuotaInfo] = {}
        self.children: dict[str, set[str]] = {ROOT_QUOTA: set()}
        self.namespace_to_quota: dict[str, str] = {}
        self.objects: dict[str, Obj] = {}

    @classmethod
    def build(cls, quotas: Iterable[Obj], listers: Listers | None = None) -> "QuotaTopology":
        topology = cls(listers)
        for quota in sorted(quotas, key=lambda q: (rq.meta(q).get("creationTimestamp") or "", rq.name(q))):
            info = _cached_info(quota)
            if info is None:
                continue
            topology.infos[info.name] = info
            topology.objects[info.name] = quota
            topology.children.setdefault(info.name, set())
            topology.children.setdefault(info.parent, set()).add(info.name)
            for ns in annotation_namespaces(quota):
                topology.namespace_to_quota[ns] = info.name
        return topology

    # -- mutating --------------------------------------------------------------------------

    def fill_defaults(self, quota: Obj) -> None:
        """``fillQuotaDefaultInformation``: parent, tree id from the parent, shared weight (in place)."""
        if rq.name(quota) == ROOT_QUOTA:
            return
        md = quota.setdefault("metadata", {})
        labels = md.get("labels") or {}
        annotations = md.get("annotations") or {}
        if not labels.get(LABEL_PARENT):
            labels[LABEL_PARENT] = ROOT_QUOTA
        if not labels.get(LABEL_TREE_ID) and labels[LABEL_PARENT] != ROOT_QUOTA:
            parent = self.infos.get(labels[LABEL_PARENT])
            if parent is None:
                raise QuotaError(f"fill quota {rq.name(quota)} failed, parent not exist")
            if parent.tree_id:
                labels[LABEL_TREE_ID] = parent.tree_id
        spec_max = (quota.get("spec") or {}).get("max")
        if not annotations.get(ANNOTATION_SHARED_WEIGHT):
            annotations[ANNOTATION_SHARED_WEIGHT] = _resource_list_json(spec_max)
        else:
            try:
                weight = json.loads(annotations[ANNOTATION_SHARED_WEIGHT])
                if weight is None:
                    weight = {}
                if not isinstance(weight, dict):
                    raise ValueError("json: cannot unmarshal into Go value of type v1.ResourceList")
                resource_list(weight)
            except (ValueError, QuotaError) as exc:
                raise QuotaError(f"fillDefaultQuotaInfo unmarshal sharedWeight failed:{exc}") from None
            maximum = spec_max or {}
            fixed = {k: v for k, v in weight.items() if k in maximum}
            for k, v in maximum.items():
                fixed.setdefault(k, v)
            if fixed.keys() != weight.keys():
                annotations[ANNOTATION_SHARED_WEIGHT] = _resource_list_json(fixed)
        md["labels"] = labels
        md["annotations"] = annotations

    # -- validating --------------------------------------------------------------------------

    def validate_add(self, quota: Obj, gates: Mapping[str, bool]) -> str | None:
        name = rq.name(quota)
        if name in self.infos:
            return f"AddQuota quota already exist:{name}"
        for ns in annotation_namespaces(quota):
            if ns in self.namespace_to_quota:
                return (f"AddQuota quota {name}'s annotation namespace {ns} is already bound to quota "
                        f"{self.namespace_to_quota[ns]}")
        return self._self_item(quota) or self._topology(None, QuotaInfo.from_quota(quota), [], gates)

    def validate_update(self, old: Obj | None, new: Obj, gates: Mapping[str, bool]) -> str | None:
        if old is not None and _tree_fields(old) == _tree_fields(new):
            return None
        name = rq.name(new)
        if name in (SYSTEM_QUOTA, ROOT_QUOTA):
            return f"invalid quota {name}"
        for ns in annotation_namespaces(new):
            bound = self.namespace_to_quota.get(ns)
            if bound is not None and bound != name:
                return f"UpdadteQuota, quota {name} update namespaces, but namespace {ns} is already bound to quota {bound}"
        cached = self.infos.get(name)
        if cached is None:
            return f"UpdateQuota quota not exist in quotaInfoMap:{name}"
        return self._self_item(new) or self._topology(
            cached, QuotaInfo.from_quota(new), annotation_namespaces(old) if old is not None else [], gates)

    def validate_delete(self, quota: Obj) -> str | None:
        name = rq.name(quota)
        if name in (SYSTEM_QUOTA, ROOT_QUOTA, DEFAULT_QUOTA):
            return f"can not delete quotaGroup :{name}"
        if name not in self.infos:
            return f"not found quota:{name}"
        children = self.children.get(name, set())
        if children:
            return f"delete quota failed, quota {name} has {len(children)} child quotas"
        pods = self._sorted_pods(self.listers.pods_with_label(LABEL_QUOTA_NAME, name)) if self.listers else []
        if pods:
            shown = [rq.name(p) for p in pods] if len(pods) <= 2 else [rq.name(pods[0]), rq.name(pods[1]), "..."]
            return f"delete quota failed, quota {name} has {len(pods)} child pods: {', '.join(shown)}"
        return None

    def validate_pod(self, pod: Obj, old: Obj | None, op: str, gates: Mapping[str, bool]) -> str | None:
        """The pod checks: preemptible label immutable on UPDATE; no pod in a parent quota."""
        if op == rq.UPDATE and old is not None:
            if rq.labels(old).get(LABEL_PREEMPTIBLE, "") != rq.labels(pod).get(LABEL_PREEMPTIBLE, ""):
                return "Preemptible label is forbidden modify now."
        if gates.get(GATE_PARENT_SUBMIT_POD, False):
            return None
        quota = self.quota_name_of_pod(pod, gates)
        if quota not in self.infos:
            quota = DEFAULT_QUOTA
        if quota in ("", DEFAULT_QUOTA):
            return None
        if self.infos[quota].is_parent:
            return f"pod can not be linked to a parentQuotaGroup,quota:{quota}, pod:{rq.name(pod)}"
        return None

    def quota_name_of_pod(self, pod: Obj, gates: Mapping[str, bool]) -> str:
        """Label, else (with default quotas) the quota named like the namespace, a quota listing it, the default."""
        name = rq.labels(pod).get(LABEL_QUOTA_NAME, "")
        if gates.get(GATE_DISABLE_DEFAULT_QUOTA, False) or name:
            return name
        namespace = rq.meta(pod).get("namespace") or ""
        for quota in self.objects.values():
            if rq.name(quota) == namespace and rq.meta(quota).get("namespace") == namespace:
                return namespace
        for quota_name, obj in self.objects.items():
            if namespace in annotation_namespaces(obj):
                return quota_name
        return DEFAULT_QUOTA

    # -- the checks ----------------------------------------------------------------------------

    def _self_item(self, quota: Obj) -> str | None:
        name = rq.name(quota)
        spec = quota.get("spec") or {}
        try:
            maximum = resource_list(spec.get("max"))
            minimum = resource_list(spec.get("min"))
        except QuotaError as exc:
            return str(exc)
        negative = [k for k, v in maximum.items() if v < 0]
        if negative:
            return f"{name} quota.Spec.Max's value < 0, in dimensions :{_names(negative)}"
        negative = [k for k, v in minimum.items() if v < 0]
        if negative:
            return f"{name} quota.Spec.Min's value < 0, in dimensions :{_names(negative)}"
        raw_weight = rq.annotations(quota).get(ANNOTATION_SHARED_WEIGHT, "")
        if raw_weight:
            try:
                weight = json.loads(raw_weight)
                weight = resource_list(weight if weight is not None else {})
            except ValueError as exc:
                return str(exc)
            negative = [k for k, v in weight.items() if v < 0]
            if negative:
                return f"{name} quota.Annotation[{ANNOTATION_SHARED_WEIGHT}]'s value < 0, in dimension :{_names(negative)}"
        for key in sorted(minimum):
            if key not in maximum:
                return f"resourceKey {key} of quota {name} is included in min, which is not included in max"
            if maximum[key] < minimum[key]:
                return (f"resourceKey {key} of quota {name} min {_fmt(minimum[key])} > max {_fmt(maximum[key])} "
                        f"(spec.min[{key}]: {_fmt(minimum[key])} > spec.max[{key}]: {_fmt(maximum[key])})")
        raw_keys = rq.annotations(quota).get(ANNOTATION_MAX_STRICT_CHECK_KEYS, "")
        if raw_keys:
            try:
                keys = json.loads(raw_keys)
                if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
                    raise ValueError("json: cannot unmarshal into Go value of type []v1.ResourceName")
            except ValueError as exc:
                return f"{name} quota.Annotation[{ANNOTATION_MAX_STRICT_CHECK_KEYS}]'s value is invalid: {exc}"
            try:
                used = resource_list(((quota.get("status") or {}).get("used")))
            except QuotaError as exc:
                return str(exc)
            for key in keys:
                if key not in used:
                    continue  # never counted yet: nothing to compare
                if key not in maximum:
                    return (f"resourceKey {key} of quota {name} is included in used, which is not included in max "
                            "but should check max >= used")
                if maximum[key] < used[key]:
                    return f"resourceKey {key} of quota {name} max {_fmt(maximum[key])} < used {_fmt(used[key])}"
        return None

    def _topology(self, old: QuotaInfo | None, new: QuotaInfo, old_namespaces: list[str],
                  gates: Mapping[str, bool]) -> str | None:
        if new.name == ROOT_QUOTA:
            return None
        msg = self._is_parent_change(old, new, old_namespaces) or self._tree_id(old, new)
        if msg:
            return msg
        if new.parent == ROOT_QUOTA and not new.is_parent:
            return None
        msg = self._parent_exists(new)
        if msg:
            return msg
        msg = self._keys(new, gates.get(GATE_ENABLE_UPDATE_RESOURCE_KEY, False))
        if msg:
            return f"failed to check sub and parent group quotaKey, err: {msg}"
        return self._min_sums(new)

    def _is_parent_change(self, old: QuotaInfo | None, new: QuotaInfo, old_namespaces: list[str]) -> str | None:
        if old is None or old.is_parent == new.is_parent:
            return None
        if self.children.get(old.name) and not new.is_parent:
            return f"quota has children, isParent is forbidden to modify as false, quotaName:{old.name}"
        if new.is_parent and self._has_bound_pods(old.name, old_namespaces):
            return f"quota has bound pods, isParent is forbidden to modify as true, quotaName: {old.name}"
        return None

    def _has_bound_pods(self, name: str, namespaces: list[str]) -> bool:
        if self.listers is None:
            return False
        if self.listers.pods_with_label(LABEL_QUOTA_NAME, name) or self.listers.pods(name):
            return True
        return any(self.listers.pods(ns) for ns in namespaces)

    def _tree_id(self, old: QuotaInfo | None, new: QuotaInfo) -> str | None:
        if old is not None and old.tree_id != new.tree_id:
            return f"{new.name} tree id changed [{old.tree_id}] vs [{new.tree_id}]"
        if new.parent != ROOT_QUOTA:
            parent = self.infos.get(new.parent)
            if parent is not None and parent.tree_id != new.tree_id:
                return (f"{new.name} tree id is different from parent {parent.name}, "
                        f"[{new.tree_id}] vs [{parent.tree_id}]")
        for child_name in sorted(self.children.get(new.name, ())):
            child = self.infos.get(child_name)
            if child is not None and child.tree_id != new.tree_id:
                return f"{new.name} tree id is different from child {child.name}, [{new.tree_id}] vs [{child.tree_id}]"
        return None

    def _parent_exists(self, new: QuotaInfo) -> str | None:
        if new.parent == ROOT_QUOTA:
            return None
        parent = self.infos.get(new.parent)
        if parent is None:
            return f"{new.name} has parentName {new.parent} but not find parentInfo in quotaInfoMap"
        if new.parent not in self.children:
            return f"{new.name} has parentName {new.parent} but not find parentInfo in quotaHierarchyInfo"
        if not parent.is_parent:
            return f"{new.name} has parentName {new.parent} but the parentQuotaInfo's IsParent is false"
        return None

    def _keys(self, new: QuotaInfo, enable_update_key: bool) -> str | None:
        prefix = "checkSubAndParentGroupQuotaKey failed: "
        if new.parent != ROOT_QUOTA:
            parent = self.infos[new.parent]
            if enable_update_key:
                if not new.max.keys() <= parent.max.keys():
                    return f"{prefix}{new.name}'s max keys are not all included in {new.parent}'s"
            elif new.max.keys() != parent.max.keys():
                # (Koordinator names the parent first here.)
                return f"{prefix}{new.parent}'s max keys are not the same with {new.name}'s"
            if not new.min.keys() <= parent.min.keys():
                return f"{prefix}{new.name}'s min keys are not all included in {new.parent}'s"
        for child_name in sorted(self.children.get(new.name, ())):
            if child_name == new.name:
                continue
            child = self.infos.get(child_name)
            if child is None:
                return f"internal error: quotaInfoMap and quotaTree information out of sync, losed :{child_name}"
            if enable_update_key:
                if not child.max.keys() <= new.max.keys():
                    return f"{prefix}{child_name}'s max keys are not all included in {new.name}'s"
            elif child.max.keys() != new.max.keys():
                return f"{prefix}{child_name}'s max keys are not the same with {new.name}'s"
            if not child.min.keys() <= new.min.keys():
                return f"{prefix}{child_name}'s min keys are not all included in {new.name}'s"
        return None

    def _min_sums(self, new: QuotaInfo) -> str | None:
        if new.allow_force_update or new.is_tree_root:
            return None
        if new.parent != ROOT_QUOTA:
            total = self._children_min(new.parent, skip=new.name)
            for k, v in new.min.items():
                total[k] = total.get(k, Decimal(0)) + v
            parent_min = self.infos[new.parent].min
            if _exceeds(total, parent_min):
                key = _first_excess(total, parent_min)
                return (f"checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: {new.parent} "
                        f"(quota {new.name} spec.min[{key}]: {_fmt(new.min.get(key, Decimal(0)))}, "
                        f"children of {new.parent} would sum to {_fmt(total[key])} > {new.parent} "
                        f"spec.min[{key}]: {_fmt(parent_min.get(key, Decimal(0)))})")
        if self.children.get(new.name):
            children = self._children_min(new.name)
            if _exceeds(children, new.min):
                key = _first_excess(children, new.min)
                names = " ".join(sorted(c for c in self.children[new.name] if c in self.infos))
                return (f"checkMinQuotaSum all children's MinQuota > current MinQuota, current: {new.name} "
                        f"(children [{names}] spec.min[{key}] sum to {_fmt(children[key])} > {new.name} "
                        f"spec.min[{key}]: {_fmt(new.min.get(key, Decimal(0)))})")
        return None

    def _children_min(self, parent: str, skip: str = "") -> dict[str, Decimal]:
        total: dict[str, Decimal] = {}
        for child_name in self.children.get(parent, ()):
            if child_name == skip or child_name not in self.infos:
                continue
            for k, v in self.infos[child_name].min.items():
                total[k] = total.get(k, Decimal(0)) + v
        return total

    @staticmethod
    def _sorted_pods(pods: list[Obj]) -> list[Obj]:
        return sorted(pods, key=lambda p: (rq.meta(p).get("namespace") or "", rq.name(p)))


def _tree_fields(quota: Obj) -> tuple:
    """What an UPDATE must change to be checked at all (``quotaFieldsCopy``)."""
    labels = rq.labels(quota)
    return (labels.get(LABEL_PARENT, ""), labels.get(LABEL_IS_PARENT, ""), labels.get(LABEL_TREE_ID, ""),
            rq.annotations(quota).get(ANNOTATION_NAMESPACES, ""), _normal_spec(quota.get("spec") or {}))


def _normal_spec(spec: Obj) -> str:
    def norm(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v
    return json.dumps(norm(spec), sort_keys=True, default=str)


def _resource_list_json(raw: Any) -> str:
    """``json.Marshal`` of a ResourceList: keys sorted, canonical quantities, ``null`` when absent."""
    if raw is None:
        return "null"
    return json.dumps({k: quantity.canonical(v) for k, v in raw.items()}, sort_keys=True, separators=(",", ":"))
