"""ElasticQuota: hierarchical elastic quotas — PreFilter quota checks, quota-scoped preemption, used accounting.

Reference §2.4 / §3.2. The quota tree (:mod:`.tree`) is fed by the ElasticQuota, Pod and Node informers and
by Reserve/Unreserve; the controllers (:mod:`.controllers`) create the built-in quotas, write the status
annotations and revoke over-used quotas.
"""

from __future__ import annotations

import logging
from typing import Any

from koordinator.apis import quota as q
from koordinator_roles.scheduler.framework.interfaces import (ClusterEvent, ControllerProvider, EnqueueExtensions,
                                                              ForgetPodHandler, NodeStatusReader, PostFilterPlugin,
                                                              PostFilterResult, PreFilterExtensions, PreFilterPlugin,
                                                              PreFilterResult, ReservePlugin)
from koordinator_roles.scheduler.framework.status import CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.helper.preemption import DefaultPreemption
from koordinator_roles.scheduler.plugins.elasticquota import tree as t
from koordinator_roles.scheduler.plugins.elasticquota.args import ElasticQuotaArgs, parse_args

log = logging.getLogger("koordinator.scheduler.elasticquota")

NAME = "ElasticQuota"
_STATE_KEY = "PreFilter" + NAME


class QuotaState:
    """What PreFilter saw of the pod's quota; preemption dry runs change ``used`` with AddPod/RemovePod."""

    __slots__ = ("quota", "request", "used", "np_used", "limit", "non_preemptible")

    def __init__(self, quota: str, request: t.Res, used: t.Res, np_used: t.Res, limit: t.Res,
                 non_preemptible: bool) -> None:
        self.quota, self.request, self.used, self.np_used = quota, request, used, np_used
        self.limit, self.non_preemptible = limit, non_preemptible

    def clone(self) -> "QuotaState":
        return QuotaState(self.quota, self.request, dict(self.used), dict(self.np_used), self.limit,
                          self.non_preemptible)

    def fits(self) -> bool:
        return not t.exceeded(t.add(self.used, self.request), self.limit)


def _spec_changed(old: Any, new: Any) -> bool:
    """An ElasticQuota change that can change runtimes (not the status this plugin writes itself)."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return True
    om, nm = old.get("metadata") or {}, new.get("metadata") or {}
    keys = (q.ANNOTATION_SHARED_WEIGHT, q.ANNOTATION_NAMESPACES)
    return (old.get("spec") != new.get("spec") or om.get("labels") != nm.get("labels")
            or any((om.get("annotations") or {}).get(k) != (nm.get("annotations") or {}).get(k) for k in keys))


class _Preemption(DefaultPreemption):
    """The upstream evaluator with Koordinator's victim rules: same quota, lower priority, preemptible."""

    def __init__(self, plugin: "ElasticQuota", handle: Any) -> None:
        super().__init__({}, handle)
        self.plugin = plugin

    def can_preempt(self, victim: PodInfo, preemptor: PodInfo) -> bool:  # type: ignore[override]
        return self.plugin.can_preempt(victim, preemptor)

    def fits(self, state: CycleState, pod: PodInfo) -> bool:  # type: ignore[override]
        qs: QuotaState | None = state.read(_STATE_KEY)
        return qs is None or qs.fits()


class ElasticQuota(PreFilterPlugin, PreFilterExtensions, PostFilterPlugin, ReservePlugin, EnqueueExtensions,
                   ForgetPodHandler, ControllerProvider):
    """Koordinator's ElasticQuota plugin."""

    name = NAME

    def __init__(self, args: dict | None, handle: Any) -> None:
        self.args: ElasticQuotaArgs = parse_args(args)
        self.handle = handle
        self.manager = t.GroupQuotaManager(enable_min_quota_scale=self.args.enable_min_quota_scale,
                                           system_max=self.args.system_quota_group_max,
                                           default_max=self.args.default_quota_group_max)
        self.quota_informer = None
        self._preemption: _Preemption | None = None
        if handle is None:
            return
        add_forget = getattr(handle, "add_forget_handler", None)
        if add_forget is not None:
            add_forget(self.forget_pod)
        informers = getattr(handle, "informers", None)
        if informers is not None:
            self.quota_informer = informers.informer("ElasticQuota")
            self.quota_informer.add_handler(on_add=self.manager.update_quota,
                                            on_update=lambda old, new: self.manager.update_quota(new),
                                            on_delete=self._on_quota_delete)
            informers.informer("Pod").add_handler(on_add=self.manager.on_pod,
                                                  on_update=lambda old, new: self.manager.on_pod(new),
                                                  on_delete=self._on_pod_delete)
            informers.informer("Node").add_handler(on_add=self._on_node,
                                                   on_update=lambda old, new: self._on_node(new),
                                                   on_delete=self._on_node_delete)
        self._preemption = _Preemption(self, handle)

    # -- informer handlers ----------------------------------------------------------------------------

    def _on_quota_delete(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)
        self.manager.delete_quota((obj.get("metadata") or {}).get("name", ""))

    def _on_pod_delete(self, obj: Any) -> None:
        self.manager.on_pod_delete(getattr(obj, "obj", obj))

    def _on_node(self, node: dict) -> None:
        self.manager.update_node((node.get("metadata") or {}).get("name", ""),
                                 (node.get("status") or {}).get("allocatable"))

    def _on_node_delete(self, obj: Any) -> None:
        obj = getattr(obj, "obj", obj)
        self.manager.delete_node((obj.get("metadata") or {}).get("name", ""))

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add"), ClusterEvent("Node", "Update"),
                ClusterEvent("ElasticQuota", "Add"), ClusterEvent("ElasticQuota", "Delete"),
                ClusterEvent("ElasticQuota", "Update", hint=lambda pod, old, new: _spec_changed(old, new))]

    # -- PreFilter ------------------------------------------------------------------------------------

    def limit_of(self, info: t.QuotaInfo) -> t.Res:
        """What the pod's quota is checked against. The default and system quotas: nothing (reference §8.9:
        Koordinator reads a runtime it never stores for them, so their pods always pass)."""
        if info.name in t.SPECIAL_QUOTAS:
            return {}
        return info.runtime if self.args.enable_runtime_quota else info.max

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Any) -> tuple[PreFilterResult | None,
                                                                                    Status | None]:
        mgr = self.manager
        with mgr.lock:
            if pod.uid not in mgr.pods:
                # The queue may hand the pod out before this plugin's informer handler has seen it: its
                # request belongs to its quota's request either way.
                mgr.on_pod(pod.pod)
            mgr.refresh()
            name = mgr.quota_name_of_pod(pod.pod)
            info = mgr.quotas[name]
            request = t.mask(t.from_milli(pod.requests), info.max)
            limit = dict(self.limit_of(info))
            used = dict(info.used)
            non_preemptible = q.is_non_preemptible(pod.pod)
            state.write(_STATE_KEY, QuotaState(name, request, used, dict(info.np_used), limit, non_preemptible))
            dims = t.exceeded(t.add(used, request), limit)
            if dims:
                return None, Status.unschedulable(
                    f"Insufficient quotas, quotaName: {name}, runtime: {t.print_resource_list(limit)}, "
                    f"used: {t.print_resource_list(used)}, pod's request: {t.print_resource_list(request)}, "
                    f"exceedDimensions: [{' '.join(dims)}]", plugin=NAME)
            if non_preemptible:
                dims = t.exceeded(t.add(info.np_used, request), info.min)
                if dims:
                    return None, Status.unschedulable(
                        f"Insufficient non-preemptible quotas, quotaName: {name}, "
                        f"min: {t.print_resource_list(info.min)}, "
                        f"nonPreemptibleUsed: {t.print_resource_list(info.np_used)}, "
                        f"pod's request: {t.print_resource_list(request)}, exceedDimensions: [{' '.join(dims)}]",
                        plugin=NAME)
            if self.args.enable_check_parent_quota and name not in t.SPECIAL_QUOTAS:
                topo = [name]
                for parent in mgr.ancestors(name):
                    pinfo = mgr.quotas[parent]
                    topo = [parent, *topo]
                    plimit = pinfo.runtime if self.args.enable_runtime_quota else pinfo.max
                    dims = t.exceeded(t.add(pinfo.used, request), plimit)
                    if dims:
                        return None, Status.unschedulable(
                            f"Insufficient quotas, quotaNameTopo: [{' '.join(topo)}], "
                            f"runtime: {t.print_resource_list(plimit)}, used: {t.print_resource_list(pinfo.used)}, "
                            f"pod's request: {t.print_resource_list(request)}, exceedDimensions: [{' '.join(dims)}]",
                            plugin=NAME)
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions:
        return self

    def _request_in(self, quota_name: str, other: PodInfo) -> t.Res | None:
        """``other``'s request as counted in ``quota_name``, or None when it belongs to another quota."""
        mgr = self.manager
        with mgr.lock:
            entry = mgr.pods.get(other.uid)
            if entry is not None:
                return entry.request if entry.quota == quota_name else None
            if mgr.quota_name_of_pod(other.pod) != quota_name:
                return None
            return t.mask(t.from_milli(other.requests), mgr.quotas[quota_name].max)

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        qs: QuotaState | None = state.read(_STATE_KEY)
        if qs is not None:
            req = self._request_in(qs.quota, to_add)
            if req is not None:
                t.add_into(qs.used, req)
                if q.is_non_preemptible(to_add.pod):
                    t.add_into(qs.np_used, req)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status | None:
        qs: QuotaState | None = state.read(_STATE_KEY)
        if qs is not None:
            req = self._request_in(qs.quota, to_remove)
            if req is not None:
                t.add_into(qs.used, req, -1)
                if q.is_non_preemptible(to_remove.pod):
                    t.add_into(qs.np_used, req, -1)
        return None

    # -- PostFilter -----------------------------------------------------------------------------------

    def can_preempt(self, victim: PodInfo, preemptor: PodInfo) -> bool:
        """Koordinator's rule: same quota, lower priority, preemptible, and (by default) not in the default
        quota. And the take-back of lent min: a preemptor whose quota stays within its min with the pod may
        take a preemptible pod of a quota of the same tree that uses more than its min (it borrowed what the
        preemptor's quota lent), whatever the priorities."""
        if q.is_non_preemptible(victim.pod):
            return False
        mgr = self.manager
        with mgr.lock:
            entry = mgr.pods.get(victim.uid)
            victim_quota = entry.quota if entry is not None else mgr.quota_name_of_pod(victim.pod)
            preemptor_quota = mgr.quota_name_of_pod(preemptor.pod)
            if victim_quota == q.DEFAULT_QUOTA and self.args.disable_default_quota_preemption:
                return False
            if victim_quota == preemptor_quota:
                return victim.priority < preemptor.priority
            return self._takes_back(mgr, preemptor_quota, victim_quota, preemptor)

    @staticmethod
    def _takes_back(mgr: Any, preemptor_quota: str, victim_quota: str, preemptor: PodInfo) -> bool:
        if preemptor_quota in t.SPECIAL_QUOTAS or victim_quota in t.SPECIAL_QUOTAS:
            return False
        mine, theirs = mgr.quotas.get(preemptor_quota), mgr.quotas.get(victim_quota)
        if mine is None or theirs is None or mgr.topology(preemptor_quota)[0] != mgr.topology(victim_quota)[0]:
            return False
        request = t.mask(t.from_milli(preemptor.requests), mine.max)
        within_min = not t.exceeded(t.add(mine.used, request), mine.auto_scale_min or mine.min)
        borrowing = bool(t.exceeded(theirs.used, theirs.auto_scale_min or theirs.min))
        return within_min and borrowing

    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: NodeStatusReader) -> tuple[PostFilterResult | None, Status | None]:
        qs: QuotaState | None = state.read(_STATE_KEY)
        if self._preemption is None or qs is None:
            return None, Status.unschedulable()
        if qs.quota == q.DEFAULT_QUOTA and self.args.disable_default_quota_preemption:
            # Its victims could only be default-quota pods, which are never victims: no dry run, and no
            # second "preemption:" reason beside DefaultPreemption's (Koordinator runs it and adds one).
            return None, Status.unschedulable()
        result, status = self._preemption.preempt(state, pod, statuses)
        if status is not None and status.reasons and status.message():
            return result, Status(status.code, "preemption: " + status.message(), plugin=NAME)
        return result, status

    # -- Reserve --------------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.manager.reserve(pod.pod, pod.uid)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.manager.unreserve(pod.uid)

    def forget_pod(self, pod: PodInfo, node_name: str) -> None:
        self.manager.unreserve(pod.uid)

    # -- controllers ----------------------------------------------------------------------------------

    def new_controllers(self) -> list[Any]:
        from koordinator_roles.scheduler.plugins.elasticquota.controllers import (BuiltinQuotaController,
                                                                                 QuotaOverUsedRevokeController,
                                                                                 QuotaStatusController)

        if self.handle is None or getattr(self.handle, "client", None) is None:
            return []
        out: list[Any] = [BuiltinQuotaController(self), QuotaStatusController(self)]
        if self.args.monitor_all_quotas and self.args.enable_runtime_quota:
            out.append(QuotaOverUsedRevokeController(self))
        return out


def new(args: dict | None, handle: Any) -> ElasticQuota:
    """Registry factory."""
    return ElasticQuota(args, handle)
