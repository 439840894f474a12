"""The quota tree (Koordinator's GroupQuotaManager): quotas, their pods, requests, used and runtime (reference §3.2).

Amounts are plain ints per resource name in Koordinator's quota units: ``cpu`` in milli-cores, every other
resource in whole units (``Quantity.Value()``: bytes, counts). Pods are accounted incrementally into their
own quota (``self_*`` sums); the tree-wide figures (child request, request, used, runtime) are derived from
those on :meth:`GroupQuotaManager.refresh` whenever something changed, except that a pod only becoming
assigned or unassigned (Reserve, its binding) moves ``used`` along its path without a refresh: runtimes do
not depend on used. Everything is guarded by ``lock``:
informer threads, the scheduling thread and the controllers all reach the manager.
"""

from __future__ import annotations

from collections import Counter
import functools
import json
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Iterable, Mapping

from koordinator.apis import extension, quantity
from koordinator.apis import quota as q

Res = dict[str, int]

CPU = "cpu"
_BINARY = {"memory", "ephemeral-storage", "kubernetes.io/batch-memory", "kubernetes.io/mid-memory"}


# -- resource lists -------------------------------------------------------------------------------------

def from_quantities(raw: Mapping[str, Any] | None) -> Res:
    """A ResourceList of quantities in quota units (cpu milli, others ``Value()``); bad quantities are skipped."""
    out: Res = {}
    for name, value in (raw or {}).items():
        try:
            out[name] = quantity.milli_value(value) if name == CPU else quantity.value(value)
        except (quantity.QuantityError, TypeError, ValueError):
            continue
    return out


def from_milli(amounts: Mapping[str, int]) -> Res:
    """The scheduler's milli-unit amounts (PodInfo.requests, NodeInfo allocatable) in quota units."""
    return {name: (v if name == CPU else extension.value_of_milli(v)) for name, v in amounts.items()}


def to_milli(amounts: Mapping[str, int]) -> Res:
    return {name: (v if name == CPU else v * 1000) for name, v in amounts.items()}


@functools.lru_cache(maxsize=8192)
def quantity_text(name: str, amount: int) -> str:
    """``amount`` (milli-CPU for cpu, else base units) as a Kubernetes quantity; cached: the status controller
    formats every quota's figures every second, and they repeat."""
    if name == CPU:
        return quantity.format_quantity(Decimal(amount) / 1000)
    return quantity.format_quantity(Decimal(amount), quantity.BINARY_SI if name in _BINARY else quantity.DECIMAL_SI)


def to_quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    """A ResourceList of quantity strings (what the status annotations and ``status.used`` carry)."""
    return {name: quantity_text(name, v) for name, v in sorted(amounts.items())}


def resource_list_json(amounts: Mapping[str, int]) -> str:
    return json.dumps(to_quantities(amounts), sort_keys=True, separators=(",", ":"))


def print_resource_list(amounts: Mapping[str, int]) -> str:
    """Koordinator's printResourceList: ``name:quantity`` sorted, joined by ", "; ``<empty>`` when empty."""
    if not amounts:
        return "<empty>"
    return ", ".join(sorted(f"{name}:{quantity_text(name, v)}" for name, v in amounts.items()))


def add(a: Mapping[str, int], b: Mapping[str, int]) -> Res:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0) + v
    return out


def add_into(a: Res, b: Mapping[str, int], sign: int = 1) -> None:
    for k, v in b.items():
        a[k] = a.get(k, 0) + sign * v


def mask(a: Mapping[str, int], keys: Iterable[str]) -> Res:
    keys = set(keys)
    return {k: v for k, v in a.items() if k in keys}


def exceeded(left: Mapping[str, int], limit: Mapping[str, int]) -> list[str]:
    """Dimensions present in both where ``left > limit`` (Koordinator's LessThanOrEqual on the limit's keys)."""
    return sorted(k for k, v in left.items() if k in limit and v > limit[k])


# -- the runtime distribution (one parent, one dimension) ----------------------------------------------

@dataclass
class Share:
    """One child's inputs to its parent's distribution in one dimension."""

    name: str
    request: int
    min: int
    weight: int
    allow_lent: bool = True


def distribute(total: int, children: list[Share]) -> dict[str, int]:
    """The children's runtime in one dimension (§3.2): mins first, idle min lent out, the rest by weight.

    Borrowers (request above min) share what is left in proportion to their weights, the units lost to
    flooring going one each to the largest remainders (ties: the smaller name) — Hamilton's method; what a
    borrower gets beyond its request is redistributed among the others until nobody wants more.
    """
    runtime: dict[str, int] = {}
    borrowers: list[Share] = []
    for c in children:
        if c.request > c.min:
            runtime[c.name] = c.min
            borrowers.append(c)
        else:
            runtime[c.name] = c.request if c.allow_lent else c.min
    remaining = total - sum(runtime.values())
    while remaining > 0 and borrowers:
        weight_sum = sum(c.weight for c in borrowers)
        if weight_sum <= 0:
            break
        shares = {}
        remainders = []
        for c in borrowers:
            scaled = c.weight * remaining
            shares[c.name] = scaled // weight_sum
            remainders.append((-(scaled % weight_sum), c.name))
        leftover = remaining - sum(shares.values())
        for _, name in sorted(remainders)[:leftover]:
            shares[name] += 1
        surplus = 0
        still = []
        for c in borrowers:
            value = runtime[c.name] + shares[c.name]
            if value >= c.request:
                surplus += value - c.request
                value = c.request
            else:
                still.append(c)
            runtime[c.name] = value
        borrowers = still
        remaining = surplus
    return runtime


def scale_mins(total: Mapping[str, int], mins: Mapping[str, Res]) -> dict[str, Res]:
    """Min scaling: in every dimension where Σ min exceeds ``total``, each min becomes floor(total·min/Σmin)."""
    sums: Res = {}
    for m in mins.values():
        add_into(sums, m)
    out: dict[str, Res] = {}
    for name, m in mins.items():
        scaled = dict(m)
        for k, v in m.items():
            t = total.get(k, 0)
            if sums[k] > t and sums[k] > 0:
                scaled[k] = int(float(t) * float(v) / float(sums[k]))
        out[name] = scaled
    return out


# -- quotas and pods -------------------------------------------------------------------------------------

@dataclass
class QuotaInfo:
    """One ElasticQuota: its spec and labels, its own pods' sums and the derived tree figures."""

    name: str
    namespace: str = ""
    parent: str = ""
    is_parent: bool = False
    allow_lent: bool = True
    max: Res = field(default_factory=dict)
    min: Res = field(default_factory=dict)
    shared_weight: Res = field(default_factory=dict)
    namespaces: list[str] = field(default_factory=list)
    obj: dict | None = None
    # own pods
    self_request: Res = field(default_factory=dict)
    self_used: Res = field(default_factory=dict)
    self_np_request: Res = field(default_factory=dict)
    self_np_used: Res = field(default_factory=dict)
    # derived by refresh()
    children: list[str] = field(default_factory=list)
    auto_scale_min: Res = field(default_factory=dict)
    child_request: Res = field(default_factory=dict)
    request: Res = field(default_factory=dict)
    limited_request: Res = field(default_factory=dict)
    used: Res = field(default_factory=dict)
    np_request: Res = field(default_factory=dict)
    np_used: Res = field(default_factory=dict)
    runtime: Res = field(default_factory=dict)
    guaranteed: Res = field(default_factory=dict)
    allocated: Res = field(default_factory=dict)

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> "QuotaInfo":
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        qmax = from_quantities(spec.get("max"))
        weight_raw = q.shared_weight_raw(obj)
        return cls(name=meta.get("name", ""), namespace=meta.get("namespace", ""), parent=q.parent_name(obj),
                   is_parent=q.is_parent(obj), allow_lent=q.allow_lent_resource(obj), max=qmax,
                   min=from_quantities(spec.get("min")),
                   shared_weight=from_quantities(weight_raw) if weight_raw is not None else dict(qmax),
                   namespaces=q.annotation_namespaces(obj), obj=dict(obj))

    def spec_key(self) -> tuple:
        return (self.parent, self.is_parent, self.allow_lent, sorted(self.max.items()), sorted(self.min.items()),
                sorted(self.shared_weight.items()), self.namespaces, self.namespace)


@dataclass
class PodEntry:
    uid: str
    key: str
    quota: str
    request: Res
    assigned: bool
    non_preemptible: bool
    priority: int
    pod: dict

    def contribute(self, info: QuotaInfo, sign: int) -> None:
        add_into(info.self_request, self.request, sign)
        if self.assigned:
            add_into(info.self_used, self.request, sign)
        if self.non_preemptible:
            add_into(info.self_np_request, self.request, sign)
            if self.assigned:
                add_into(info.self_np_used, self.request, sign)


def _terminated(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


SPECIAL_QUOTAS = (q.SYSTEM_QUOTA, q.DEFAULT_QUOTA)


class GroupQuotaManager:
    """The quota tree of one cluster (Koordinator's default tree; multi-tree mode is not implemented)."""

    def __init__(self, *, enable_min_quota_scale: bool = True, system_max: Mapping[str, Any] | None = None,
                 default_max: Mapping[str, Any] | None = None) -> None:
        self.lock = threading.RLock()
        self.enable_min_quota_scale = enable_min_quota_scale
        self.quotas: dict[str, QuotaInfo] = {}
        self.pods: dict[str, PodEntry] = {}
        self.pod_objs: dict[str, dict] = {}
        self.reserved: set[str] = set()
        self.nodes: dict[str, Res] = {}
        # Σ of ``nodes``, kept as they change: a refresh follows every pod change, summing 5,000 nodes each
        # time would dominate the scheduling cycle.
        self.node_total: Res = {}
        self._node_keys: Counter[str] = Counter()      # how many nodes have each resource
        self.total: Res = {}
        self.version = 0
        self._refreshed = -1
        group_max = {"cpu": str(q.DEFAULT_GROUP_MAX_VALUE), "memory": str(q.DEFAULT_GROUP_MAX_VALUE)}
        self._builtin_max = {q.SYSTEM_QUOTA: from_quantities(group_max if system_max is None else system_max),
                             q.DEFAULT_QUOTA: from_quantities(group_max if default_max is None else default_max)}
        for name in (q.ROOT_QUOTA, q.SYSTEM_QUOTA, q.DEFAULT_QUOTA):
            self.quotas[name] = self._builtin(name)

    def _builtin(self, name: str) -> QuotaInfo:
        if name == q.ROOT_QUOTA:
            return QuotaInfo(name=name, is_parent=True, allow_lent=False)
        qmax = dict(self._builtin_max.get(name) or {})
        return QuotaInfo(name=name, parent=q.ROOT_QUOTA, max=qmax, shared_weight=dict(qmax))

    def _changed(self) -> None:
        self.version += 1

    # -- quotas ----------------------------------------------------------------------------------------

    def update_quota(self, obj: Mapping[str, Any]) -> None:
        info = QuotaInfo.from_object(obj)
        if not info.name:
            return
        with self.lock:
            old = self.quotas.get(info.name)
            if info.name == q.ROOT_QUOTA:
                info.parent, info.is_parent, info.allow_lent = "", True, False
            if old is not None:
                for attr in ("self_request", "self_used", "self_np_request", "self_np_used"):
                    setattr(info, attr, getattr(old, attr))
                same = old.spec_key() == info.spec_key()
            else:
                same = False
            if same:
                # The status this scheduler writes (annotations, status.used) came back: nothing to recompute.
                old.obj = info.obj
                return
            self.quotas[info.name] = info
            self._reresolve_all()
            self._changed()

    def delete_quota(self, name: str) -> None:
        with self.lock:
            if name not in self.quotas:
                return
            if name in (q.ROOT_QUOTA, *SPECIAL_QUOTAS):
                info = self._builtin(name)
                old = self.quotas[name]
                for attr in ("self_request", "self_used", "self_np_request", "self_np_used"):
                    setattr(info, attr, getattr(old, attr))
                self.quotas[name] = info
            else:
                del self.quotas[name]
            self._reresolve_all()
            self._changed()

    def quota(self, name: str) -> QuotaInfo | None:
        with self.lock:
            return self.quotas.get(name)

    # -- nodes -----------------------------------------------------------------------------------------

    def update_node(self, name: str, allocatable_raw: Mapping[str, Any] | None) -> None:
        alloc = from_quantities(allocatable_raw)
        with self.lock:
            old = self.nodes.get(name)
            if old != alloc:
                if old is not None:
                    self._count_node(old, -1)
                self._count_node(alloc, 1)
                self.nodes[name] = alloc
                self._changed()

    def delete_node(self, name: str) -> None:
        with self.lock:
            old = self.nodes.pop(name, None)
            if old is not None:
                self._count_node(old, -1)
                self._changed()

    def _count_node(self, alloc: Res, sign: int) -> None:
        add_into(self.node_total, alloc, sign)
        self._node_keys.update({k: sign for k in alloc})
        for k in [k for k in alloc if self._node_keys[k] <= 0]:
            del self._node_keys[k]
            self.node_total.pop(k, None)

    # -- pods ------------------------------------------------------------------------------------------

    def quota_name_of_pod(self, pod: Mapping[str, Any]) -> str:
        """Label, else the quota named like the namespace (in it), else one listing the namespace, else default."""
        meta = pod.get("metadata") or {}
        with self.lock:
            name = (meta.get("labels") or {}).get(q.LABEL_QUOTA_NAME, "")
            if name:
                return name if name in self.quotas else q.DEFAULT_QUOTA
            namespace = meta.get("namespace", "")
            info = self.quotas.get(namespace)
            if info is not None and info.namespace == namespace:
                return namespace
            for qname in sorted(self.quotas):
                if namespace in self.quotas[qname].namespaces:
                    return qname
            return q.DEFAULT_QUOTA

    def _entry(self, pod: dict, assigned: bool) -> PodEntry:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        quota_name = self.quota_name_of_pod(pod)
        info = self.quotas[quota_name]
        request = mask(from_milli(extension.pod_requests(pod)), info.max)
        return PodEntry(uid=uid, key=f"{meta.get('namespace', '')}/{meta.get('name', '')}", quota=quota_name,
                        request=request, assigned=assigned, non_preemptible=q.is_non_preemptible(pod),
                        priority=int((pod.get("spec") or {}).get("priority") or 0), pod=pod)

    def _put(self, uid: str, entry: PodEntry | None) -> None:
        old = self.pods.pop(uid, None)
        if old is not None:
            info = self.quotas.get(old.quota)
            if info is not None:
                old.contribute(info, -1)
        if entry is not None:
            self.pods[uid] = entry
            entry.contribute(self.quotas[entry.quota], 1)
        if (old is not None and entry is not None and old.quota == entry.quota and old.request == entry.request
                and old.non_preemptible == entry.non_preemptible):
            if old.assigned == entry.assigned:
                return      # an update that changes nothing the tree counts (annotations, status)
            if self._refreshed == self.version and entry.quota not in SPECIAL_QUOTAS:
                # Only used changed (Reserve, a binding, Unreserve): runtimes depend on requests, mins,
                # weights and the total, not on used, so the refreshed tree stays valid with used moved
                # along the path. (A special quota's used changes the total: that takes a refresh.)
                self._shift_used(entry, 1 if entry.assigned else -1)
                return
        self._changed()

    def _shift_used(self, entry: PodEntry, sign: int) -> None:
        """Move ``entry``'s request in or out of ``used`` of its quota and every ancestor, root included."""
        name: str | None = entry.quota
        seen: set[str] = set()
        while name is not None and name not in seen and name in self.quotas:
            seen.add(name)
            info = self.quotas[name]
            add_into(info.used, entry.request, sign)
            if entry.non_preemptible:
                add_into(info.np_used, entry.request, sign)
            info.allocated = dict(info.used)
            if name != q.ROOT_QUOTA:
                info.guaranteed = {k: max(info.auto_scale_min.get(k, 0), info.used.get(k, 0)) for k in info.max}
                name = self._parent_of(name)
            else:
                name = None

    def _reresolve_all(self) -> None:
        for info in self.quotas.values():
            info.self_request, info.self_used, info.self_np_request, info.self_np_used = {}, {}, {}, {}
        old = self.pods
        self.pods = {}
        for uid, entry in old.items():
            new = self._entry(entry.pod, entry.assigned)
            self.pods[uid] = new
            new.contribute(self.quotas[new.quota], 1)

    def on_pod(self, pod: dict) -> None:
        """A pod from the informer (add or update): pending or assigned, not terminated, counts."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        with self.lock:
            if _terminated(pod):
                self.reserved.discard(uid)
                if uid in self.pods:
                    self._put(uid, None)
                return
            assigned = bool((pod.get("spec") or {}).get("nodeName")) or uid in self.reserved
            if assigned and (pod.get("spec") or {}).get("nodeName"):
                self.reserved.discard(uid)
            self._put(uid, self._entry(pod, assigned))

    def on_pod_delete(self, pod: Mapping[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        with self.lock:
            self.reserved.discard(uid)
            if uid in self.pods:
                self._put(uid, None)

    def reserve(self, pod: dict, uid: str) -> None:
        """The scheduler assumed the pod on a node: its request counts as used from now on."""
        with self.lock:
            self.reserved.add(uid)
            entry = self.pods.get(uid)
            if entry is None:
                entry = self._entry(pod, True)
                entry.uid = uid
            elif entry.assigned:
                return
            else:
                entry = PodEntry(**{**entry.__dict__, "assigned": True})
            self._put(uid, entry)

    def unreserve(self, uid: str) -> None:
        with self.lock:
            if uid not in self.reserved:
                return
            self.reserved.discard(uid)
            entry = self.pods.get(uid)
            if entry is None or not entry.assigned or (entry.pod.get("spec") or {}).get("nodeName"):
                return
            self._put(uid, PodEntry(**{**entry.__dict__, "assigned": False}))

    def pods_of(self, quota_name: str, *, assigned: bool = True) -> list[PodEntry]:
        with self.lock:
            return [e for e in self.pods.values() if e.quota == quota_name and (e.assigned or not assigned)]

    # -- the derived tree ------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Recompute requests, used and runtime of every quota if anything changed since the last time."""
        with self.lock:
            if self._refreshed == self.version:
                return
            self._refresh_locked()
            self._refreshed = self.version

    def _parent_of(self, name: str) -> str:
        """The quota's parent in the tree: the root for a missing, special or self-naming parent."""
        parent = self.quotas[name].parent
        if parent not in self.quotas or parent in SPECIAL_QUOTAS or parent == name:
            return q.ROOT_QUOTA
        return parent

    def _tree_children(self) -> dict[str, list[str]]:
        children: dict[str, list[str]] = {name: [] for name in self.quotas}
        for name in self.quotas:
            if name in (q.ROOT_QUOTA, *SPECIAL_QUOTAS):
                continue
            children[self._parent_of(name)].append(name)
        for v in children.values():
            v.sort()
        return children

    def _refresh_locked(self) -> None:
        children = self._tree_children()
        for name, info in self.quotas.items():
            info.children = children.get(name, [])
        # Bottom-up: requests and used (post-order from the root; cycles are cut by ``seen``).
        seen: set[str] = set()

        def up(name: str) -> None:
            seen.add(name)
            info = self.quotas[name]
            child_request = dict(info.self_request)
            used, np_request, np_used = dict(info.self_used), dict(info.self_np_request), dict(info.self_np_used)
            for c in info.children:
                if c in seen:
                    continue
                up(c)
                ci = self.quotas[c]
                add_into(child_request, ci.limited_request)
                add_into(used, ci.used)
                add_into(np_request, ci.np_request)
                add_into(np_used, ci.np_used)
            info.child_request = child_request
            request = dict(child_request)
            if not info.allow_lent:
                for k, v in info.min.items():
                    request[k] = max(request.get(k, 0), v)
            info.request = request
            info.limited_request = {k: (min(v, info.max[k]) if k in info.max else v) for k, v in request.items()}
            info.used, info.np_request, info.np_used = used, np_request, np_used
            info.allocated = dict(used)

        up(q.ROOT_QUOTA)
        for name in SPECIAL_QUOTAS:
            up(name)
        # The cluster total: every node's allocatable less what the system and default quotas use.
        total = dict(self.node_total)
        for name in SPECIAL_QUOTAS:
            for k, v in self.quotas[name].used.items():
                if k in total:
                    total[k] = max(0, total[k] - v)
        self.total = total
        for name in SPECIAL_QUOTAS:
            info = self.quotas[name]
            info.runtime = dict(info.max)
            info.auto_scale_min = dict(info.min)
            info.guaranteed = {k: max(info.min.get(k, 0), info.used.get(k, 0)) for k in info.max}
        root = self.quotas[q.ROOT_QUOTA]
        root.runtime = dict(total)
        root.auto_scale_min = dict(root.min)
        root.guaranteed = dict(total)
        # Top-down: each parent's runtime shared among its children.
        keys: set[str] = set()
        for name, info in self.quotas.items():
            if name not in SPECIAL_QUOTAS:
                keys.update(info.max)
        done: set[str] = set()

        def down(name: str) -> None:
            done.add(name)
            info = self.quotas[name]
            kids = [c for c in info.children if c not in done]
            if not kids:
                return
            mins = {c: dict(self.quotas[c].min) for c in kids}
            if self.enable_min_quota_scale:
                mins = scale_mins(self.total, mins)
            for c in kids:
                self.quotas[c].auto_scale_min = mins[c]
            runtimes: dict[str, Res] = {c: {} for c in kids}
            for k in sorted(keys | set(info.runtime)):
                shares = [Share(c, self.quotas[c].limited_request.get(k, 0), mins[c].get(k, 0),
                                self.quotas[c].shared_weight.get(k, 0), self.quotas[c].allow_lent) for c in kids]
                for c, v in distribute(info.runtime.get(k, 0), shares).items():
                    runtimes[c][k] = v
            for c in kids:
                ci = self.quotas[c]
                ci.runtime = mask(runtimes[c], ci.max)
                ci.guaranteed = {k: max(ci.auto_scale_min.get(k, 0), ci.used.get(k, 0)) for k in ci.max}
                down(c)

        down(q.ROOT_QUOTA)

    # -- checks ----------------------------------------------------------------------------------------

    def ancestors(self, name: str) -> list[str]:
        """The quota's parents up to (excluding) the root, nearest first."""
        out: list[str] = []
        with self.lock:
            info = self.quotas.get(name)
            while info is not None and info.parent and info.parent != q.ROOT_QUOTA and info.parent not in out:
                out.append(info.parent)
                info = self.quotas.get(info.parent)
        return out

    def topology(self, name: str) -> list[str]:
        """Root-most first down to ``name`` (excluding the root)."""
        return [*reversed(self.ancestors(name)), name]
