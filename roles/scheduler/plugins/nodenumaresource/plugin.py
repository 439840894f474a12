"""NodeNUMAResource: cpusets for LSE/LSR prod pods and NUMA-aware placement (reference §2.2).

Cost for ordinary pods: the pod's facts are derived once (cached on the PodInfo); when the pod
asks for no cpuset and no NUMA policy and no node in the cluster has a cpu-bind-policy, a NUMA
policy or an amplification ratio (sets kept up to date by the Node and NodeResourceTopology
informers), PreFilter returns Skip. Otherwise ``filter_nodes`` looks only at those special
nodes' rows, and Score is the vectorised node-level Least/MostAllocated (kept per request class
across cycles) with a per-row pass for special nodes only. Pods binding CPUs fail nodes without a
CPU topology in one vector operation; per node they cost a trial allocation only where Koordinator
makes one (a required bind policy, a NUMA policy).

Allocations (cpusets, NUMA amounts) live in an :class:`~.allocation.AllocationStore` fed by the
Pod and Reservation informers (``resource-status`` annotations) and by Reserve/Unreserve/ForgetPod.
"""

from __future__ import annotations

import logging
import math
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from koordinator.apis import extension, numa
from koordinator.apis import reservation as rv
from koordinator.apis.numa import AnnotationError
from koordinator.runtime.informer import DeletedFinalStateUnknown
from koordinator_roles.scheduler.framework.interfaces import (BatchFilterResult, ClusterEvent, EnqueueExtensions,
                                                              Failure, FilterPlugin, ForgetPodHandler, PreBindPlugin,
                                                              PreFilterExtensions, PreFilterPlugin, PreFilterResult,
                                                              PreScorePlugin, ReservationFilterPlugin,
                                                              ReservationRestorePlugin, ReservePlugin, ScorePlugin)
from koordinator_roles.scheduler.framework.rowmemo import ClassMemo
from koordinator_roles.scheduler.framework.status import (UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState,
                                                          Status)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins.helper.reservationstate import nominated_reservation
from koordinator_roles.scheduler.plugins.nodenumaresource import scoring
from koordinator_roles.scheduler.plugins.nodenumaresource.accumulator import AllocationError, allocate_cpus, filter_required
from koordinator_roles.scheduler.plugins.nodenumaresource.allocation import AllocationStore, AllocationView, PodAllocation
from koordinator_roles.scheduler.plugins.nodenumaresource.args import NodeNUMAResourceArgs, parse_args
from koordinator_roles.scheduler.plugins.nodenumaresource.topology import (NodeTopology, TopologyOptions,
                                                                           node_is_special, parse_nrt, topology_options)
from koordinator_roles.scheduler.plugins.nodenumaresource.topologymanager import (admit, generate_hints, mask_nodes,
                                                                                  merge_hints, split_request)

log = logging.getLogger("koordinator.scheduler.nodenumaresource")

NAME = "NodeNUMAResource"
_STATE_KEY = "PreFilter" + NAME

MSG_NOT_INTEGER = "the requested CPUs must be integer"
MSG_POLICY_MISMATCH = "node(s) NUMA Topology policy not match"
MSG_INVALID_TOPOLOGY = "node(s) invalid CPU Topology"
MSG_BIND_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
MSG_NOT_MULTIPLE = "node(s) requested cpus not multiple cpus per core"
MSG_INVALID_RATIO = "node(s) invalid CPU amplification ratio"
MSG_AMPLIFIED = "Insufficient amplified cpu"
_BIND_POLICIES = (numa.CPU_BIND_POLICY_FULL_PCPUS, numa.CPU_BIND_POLICY_SPREAD_BY_PCPUS)
_NODE_REQUIRED = {numa.NODE_CPU_BIND_POLICY_FULL_PCPUS_ONLY: numa.CPU_BIND_POLICY_FULL_PCPUS,
                  numa.NODE_CPU_BIND_POLICY_SPREAD_BY_PCPUS: numa.CPU_BIND_POLICY_SPREAD_BY_PCPUS}


@dataclass(frozen=True)
class PodContext:
    """What the plugin derives from a pod once (PreFilter §2.2.3)."""

    error: Status | None = None
    zero: bool = False
    requests: dict = field(default_factory=dict)
    cpu_milli: int = 0
    num_cpus: int = 0
    integer_cpus: bool = True
    request_cpu_bind: bool = False
    required_policy: str = ""
    preferred_policy: str = ""
    exclusive_policy: str = ""
    spec: numa.ResourceSpec = numa.ResourceSpec()
    numa_policy: str = ""
    numa_exclusive: str = ""


@dataclass
class Plan:
    """One node's decision for the pod: whether it binds CPUs, under which policies."""

    numa_policy: str
    request_bind: bool
    required: str  # the required bind policy on this node ("" = none)
    node_forced: bool  # the node's cpu-bind-policy forced it
    bind_policy: str  # the policy the accumulator uses


@dataclass
class Result:
    """A trial (or reserved) allocation."""

    cpus: list[int]
    numa: dict[int, dict[str, int]]
    nodes: list[int]  # the NUMA nodes of the chosen affinity ([] = none)


class _State:
    """Cycle state: the pod context, preemption's changes per node, what Reserve allocated."""

    def __init__(self, ctx: PodContext, skip: bool = False) -> None:
        self.ctx = ctx
        self.skip = skip
        self.removed: dict[str, set[str]] = {}
        self.added: dict[str, list[PodAllocation]] = {}
        self.reserved: dict[str, tuple[PodAllocation, Plan]] = {}
        # node -> matched reservation uid -> (its CPUs, its allocate policy), from RestoreReservation
        self.reservations: dict[str, dict[str, tuple[frozenset[int], str]]] = {}

    def clone(self) -> "_State":
        out = _State(self.ctx, self.skip)
        out.removed = {k: set(v) for k, v in self.removed.items()}
        out.added = {k: list(v) for k, v in self.added.items()}
        out.reserved = dict(self.reserved)
        out.reservations = {k: dict(v) for k, v in self.reservations.items()}
        return out


def _status(code: int, reason: str) -> Status:
    return Status(code, reason, plugin=NAME)


def pod_context(pod: dict, args: NodeNUMAResourceArgs, requests: dict) -> PodContext:
    """PreFilter's per-pod facts; ``error`` is an UnschedulableAndUnresolvable status for bad annotations."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    try:
        spec = numa.parse_resource_spec(annotations)
        topo_spec = numa.parse_numa_topology_spec(annotations)
    except AnnotationError as e:
        return PodContext(error=_status(UNSCHEDULABLE_AND_UNRESOLVABLE, str(e)))
    if not any(requests.values()):
        return PodContext(zero=True)
    cpu = requests.get("cpu", 0)
    ctx = dict(requests=requests, cpu_milli=cpu, num_cpus=cpu // 1000, integer_cpus=cpu % 1000 == 0, spec=spec,
               numa_policy=topo_spec.numa_topology_policy,
               numa_exclusive=topo_spec.single_numa_node_exclusive)
    if topo_spec.numa_topology_policy and not topo_spec.single_numa_node_exclusive:
        ctx["numa_exclusive"] = numa.NUMA_EXCLUSIVE_REQUIRED
    labels = (pod.get("metadata") or {}).get("labels") or {}
    allowed = (labels.get(extension.LABEL_POD_QOS) in (extension.QOS_LSE, extension.QOS_LSR)
               and extension.priority_class_with_default(pod) == extension.PRIORITY_PROD)
    if allowed:
        default = args.default_cpu_bind_policy
        preferred = spec.preferred_cpu_bind_policy
        if preferred in ("", numa.CPU_BIND_POLICY_DEFAULT):
            preferred = default
        required = spec.required_cpu_bind_policy
        if required == numa.CPU_BIND_POLICY_DEFAULT:
            required = default
        effective = required or preferred
        if effective in _BIND_POLICIES:
            if cpu % 1000 != 0:
                return PodContext(error=_status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_NOT_INTEGER))
            if cpu > 0:
                ctx.update(request_cpu_bind=True, required_policy=required if required in _BIND_POLICIES else "",
                           preferred_policy=effective, exclusive_policy=spec.preferred_cpu_exclusive_policy)
    return PodContext(**ctx)


class NodeNUMAResource(PreFilterPlugin, PreFilterExtensions, FilterPlugin, PreScorePlugin, ScorePlugin, ReservePlugin,
                       PreBindPlugin, EnqueueExtensions, ForgetPodHandler, ReservationRestorePlugin,
                       ReservationFilterPlugin):
    """Koordinator's NodeNUMAResource plugin (reference §2.2)."""

    name = NAME

    def __init__(self, args: dict | None, handle: Any) -> None:
        self.args = parse_args(args)
        self.handle = handle
        self.store = AllocationStore()
        self._lock = threading.Lock()
        self._nrt: dict[str, NodeTopology] = {}
        self._special_nodes: set[str] = set()  # Node objects with bind/NUMA policy or amplification
        self._special_nrt: set[str] = set()  # NRTs with a NUMA policy or kubelet full-pcpus-only
        self._options_cache: dict[str, tuple[Any, Any, TopologyOptions]] = {}
        self._valid_topology: set[str] = set()  # NRTs with a usable CPU topology
        self._annotated_nodes: set[str] = set()  # Nodes with reserved / system-QoS CPU annotations
        self._special_version = 0  # bumped when one of the node-name sets changes membership
        self._masks: dict[str, tuple[Any, int, int, np.ndarray]] = {}  # set -> (snapshot, layout, version, mask)
        self._generation = 0
        # Node-level scores per pod request class, refreshed only on the rows written since (like NodeResourcesFit).
        self._score_memo = ClassMemo(self._score_class, lambda snapshot, row, key: None)
        if handle is None:
            return
        add_forget = getattr(handle, "add_forget_handler", None)
        if add_forget is not None:
            add_forget(self.forget_pod)
        informers = getattr(handle, "informers", None)
        if informers is not None:
            informers.informer("Pod").add_handler(on_add=self.on_pod, on_update=lambda old, new: self.on_pod(new),
                                                  on_delete=self.on_pod_delete)
            informers.informer("Node").add_handler(on_add=self.on_node, on_update=lambda old, new: self.on_node(new),
                                                   on_delete=self.on_node_delete)
            informers.informer("NodeResourceTopology").add_handler(
                on_add=self.on_nrt, on_update=lambda old, new: self.on_nrt(new), on_delete=self.on_nrt_delete)
            informers.informer("Reservation").add_handler(
                on_add=self.on_reservation, on_update=lambda old, new: self.on_reservation(new),
                on_delete=self.on_reservation_delete)

    def update_args(self, args: dict | None) -> None:
        """Hot reload: validate (ValueError keeps the old args) and swap; allocations are kept."""
        parsed = parse_args(args)
        self.args = parsed
        self._generation += 1  # pod contexts cached under the old args are not reused
        self._score_memo = ClassMemo(self._score_class, lambda snapshot, row, key: None)

    # -- informer feeds ---------------------------------------------------------------------------------

    def on_pod(self, pod: dict) -> None:
        """Load a bound pod's resource-status into the allocation state (drop it when terminated)."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        node_name = (pod.get("spec") or {}).get("nodeName") or ""
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self.store.remove(uid)
            return
        if not node_name:
            return
        annotations = meta.get("annotations") or {}
        if numa.ANNOTATION_RESOURCE_STATUS not in annotations:
            return
        try:
            status = numa.parse_resource_status(annotations)
            spec = numa.parse_resource_spec(annotations)
        except AnnotationError as err:
            # Nothing the scheduler can account for; the pod keeps whatever the node gave it.
            log.warning("pod %s/%s on %s: %s", meta.get("namespace", ""), meta.get("name", ""), node_name, err)
            return
        if status.empty:
            return
        self.store.add(node_name, PodAllocation(
            uid, frozenset(status.cpuset), spec.preferred_cpu_exclusive_policy,
            {r.node: dict(r.resources) for r in status.numa_node_resources}))

    def on_pod_delete(self, obj: Any) -> None:
        pod = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        meta = (pod or {}).get("metadata") or {}
        self.store.remove(meta.get("uid") or f"{meta.get('namespace', '')}/{meta.get('name', '')}")

    def on_reservation(self, reservation: dict) -> None:
        """A scheduled Reservation holds the cpuset its reserve pod got (resource-status on the Reservation)."""
        self.on_pod(rv.reserve_pod(reservation))

    def on_reservation_delete(self, obj: Any) -> None:
        reservation = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        uid = ((reservation or {}).get("metadata") or {}).get("uid") or \
            ((reservation or {}).get("metadata") or {}).get("name", "")
        self.store.remove(uid)

    def on_node(self, node: dict) -> None:
        name = (node.get("metadata") or {}).get("name", "")
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        annotated = numa.ANNOTATION_NODE_RESERVATION in annotations or numa.ANNOTATION_SYSTEM_QOS_RESOURCE in annotations
        with self._lock:
            self._mark_special(self._special_nodes, name, node_is_special(node))
            self._mark_special(self._annotated_nodes, name, annotated)

    def on_node_delete(self, obj: Any) -> None:
        node = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        name = ((node or {}).get("metadata") or {}).get("name", "")
        with self._lock:
            self._mark_special(self._special_nodes, name, False)
            self._mark_special(self._annotated_nodes, name, False)

    def on_nrt(self, obj: dict) -> None:
        name = (obj.get("metadata") or {}).get("name", "")
        parsed = parse_nrt(obj)
        with self._lock:
            self._nrt[name] = parsed
            self._mark_special(self._special_nrt, name, parsed.special)
            self._mark_special(self._valid_topology, name, parsed.topology.valid and not parsed.error)

    def on_nrt_delete(self, obj: Any) -> None:
        nrt = obj.obj if isinstance(obj, DeletedFinalStateUnknown) else obj
        name = ((nrt or {}).get("metadata") or {}).get("name", "")
        with self._lock:
            self._nrt.pop(name, None)
            self._mark_special(self._special_nrt, name, False)
            self._mark_special(self._valid_topology, name, False)

    def _mark_special(self, names: set[str], name: str, special: bool) -> None:
        """Add or drop ``name`` (caller holds the lock), bumping the version when membership changes."""
        if special and name not in names:
            names.add(name)
            self._special_version += 1
        elif not special and name in names:
            names.discard(name)
            self._special_version += 1

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("NodeResourceTopology", "Add"), ClusterEvent("NodeResourceTopology", "Update"),
                ClusterEvent("Node", "Add"), ClusterEvent("Node", "Update"), ClusterEvent("Pod", "Delete")]

    # -- per-node inputs ----------------------------------------------------------------------------

    def options(self, node: NodeInfo) -> TopologyOptions:
        """The node's TopologyOptions, re-derived only when its Node or NRT object changed."""
        with self._lock:
            nrt = self._nrt.get(node.name)
            cached = self._options_cache.get(node.name)
            if cached is not None and cached[0] is node.node and cached[1] is nrt:
                return cached[2]
        opts = topology_options(node.node, nrt)
        with self._lock:
            self._options_cache[node.name] = (node.node, nrt, opts)
        return opts

    def special_names(self) -> set[str]:
        with self._lock:
            if not self._special_nodes and not self._special_nrt:
                return set()
            return self._special_nodes | self._special_nrt

    def _view(self, st: _State, node_name: str) -> AllocationView:
        return self.store.view(node_name, st.removed.get(node_name, ()), st.added.get(node_name, ()))

    # -- the pod --------------------------------------------------------------------------------------

    def context(self, pod: PodInfo) -> PodContext:
        args, gen = self.args, self._generation
        return pod.cached(f"{NAME}/{gen}", lambda p: pod_context(p, args, pod.requests))

    def _state(self, state: CycleState, pod: PodInfo) -> _State:
        st = state.read(_STATE_KEY)
        if st is None:
            ctx = self.context(pod)
            st = _State(ctx, skip=ctx.zero or ctx.error is not None)
        return st

    def pre_filter(self, state: CycleState, pod: PodInfo, snapshot: Any) -> tuple[PreFilterResult | None,
                                                                                    Status | None]:
        ctx = self.context(pod)
        if ctx.error is not None:
            return None, ctx.error
        if ctx.zero:
            state.write(_STATE_KEY, _State(ctx, skip=True))
            return None, Status.skip()
        st = state.read(_STATE_KEY)
        if st is None or st.ctx != ctx:  # RestoreReservation may have written it already
            state.write(_STATE_KEY, _State(ctx))
        if not ctx.request_cpu_bind and not ctx.numa_policy and not self.special_names():
            return None, Status.skip()
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        st = state.read(_STATE_KEY)
        if st is None or st.skip:
            return None
        annotations = (to_add.pod.get("metadata") or {}).get("annotations") or {}
        try:
            status = numa.parse_resource_status(annotations)
            spec = numa.parse_resource_spec(annotations)
        except AnnotationError:
            return None
        if not status.empty:
            st.added.setdefault(node.name, []).append(PodAllocation(
                to_add.uid, frozenset(status.cpuset), spec.preferred_cpu_exclusive_policy,
                {r.node: dict(r.resources) for r in status.numa_node_resources}))
        st.removed.get(node.name, set()).discard(to_add.uid)
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status | None:
        st = state.read(_STATE_KEY)
        if st is None or st.skip:
            return None
        st.removed.setdefault(node.name, set()).add(to_remove.uid)
        if node.name in st.added:
            st.added[node.name] = [a for a in st.added[node.name] if a.uid != to_remove.uid]
        return None

    # -- planning one node ------------------------------------------------------------------------------

    def _plan(self, ctx: PodContext, opts: TopologyOptions) -> tuple[Plan | None, Status | None]:
        node_policy = opts.numa_policy
        if node_policy and ctx.numa_policy and node_policy != ctx.numa_policy:
            return None, _status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_POLICY_MISMATCH)
        policy = node_policy or ctx.numa_policy
        forced = bool(opts.bind_policy) and ctx.cpu_milli > 0
        request_bind = ctx.request_cpu_bind or forced
        required = _NODE_REQUIRED.get(opts.bind_policy, "") or ctx.required_policy
        if forced and not ctx.request_cpu_bind and not ctx.integer_cpus:
            return None, _status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_NOT_INTEGER)
        bind_policy = required or ctx.preferred_policy
        return Plan(policy, request_bind, required if request_bind else "", forced and not ctx.request_cpu_bind,
                    bind_policy), None

    def _allocate(self, st: _State, plan: Plan, node: NodeInfo, opts: TopologyOptions, view: AllocationView,
                  preferred: frozenset[int] = frozenset(),
                  only: frozenset[int] | None = None) -> tuple[Result | None, Status | None]:
        """Trial allocation on ``node``: NUMA admission (if a policy), then the cpuset.

        ``preferred``: CPUs taken first (the reservation the pod uses); ``only``: the CPUs it may use at all
        (a Restricted reservation).
        """
        ctx = st.ctx
        topo = opts.topology
        n = ctx.num_cpus
        available = view.available_cpus(topo, opts.reserved_cpus) if plan.request_bind else set()
        if only is not None:
            available &= only
        strategy = opts.numa_strategy or self.args.default_numa_strategy
        split: dict[int, dict[str, int]] | None = None
        nodes: list[int] = []
        if plan.numa_policy:
            allocatable = opts.numa_allocatable()
            used = view.numa_used(topo)
            numa_nodes = sorted(allocatable)
            request = {r: v for r, v in ctx.requests.items()
                       if v > 0 and any(r in allocatable[i] for i in numa_nodes)}
            if plan.request_bind:
                request["cpu"] = n * 1000
            usable = filter_required(topo, available, plan.required) if plan.request_bind else set()

            def cpu_fits(sel: list[int]) -> bool:
                return sum(1 for c in usable if topo.node_of.get(c) in sel) >= n

            weights = scoring.counted(self.args.scoring_strategy.resources, ctx.requests)
            kind = self.args.numa_scoring_strategy.type

            def score(alloc: dict, req: dict) -> int:
                return scoring.score_one(kind, weights, alloc,
                                         {r: req.get(r, 0) + ctx.requests.get(r, 0) for r in alloc})

            single, shared = view.numa_states()
            hints = generate_hints(numa_nodes, allocatable, used, request, plan.numa_policy,
                                   ctx.numa_exclusive == numa.NUMA_EXCLUSIVE_REQUIRED, single, shared,
                                   cpu_fits if plan.request_bind else None, score)
            best = merge_hints(numa_nodes, hints)
            reason = admit(plan.numa_policy, hints, best)
            if reason:
                return None, _status(UNSCHEDULABLE, reason)
            nodes = mask_nodes(best.mask)
            granule, override = {}, None
            if plan.request_bind:
                per = topo.cpus_per_core if plan.bind_policy == numa.CPU_BIND_POLICY_FULL_PCPUS else 1
                granule["cpu"] = 1000 * max(per, 1)
                override = {"cpu": {i: 1000 * sum(1 for c in usable if topo.node_of.get(c) == i) for i in nodes}}
            try:
                split = split_request(nodes, allocatable, used, request, granule, override)
            except AllocationError as e:
                if plan.numa_policy != numa.NUMA_POLICY_BEST_EFFORT:
                    return None, _status(UNSCHEDULABLE, str(e))
                split, nodes = None, []
        cpus: list[int] = []
        if plan.request_bind:
            numa_cpus = {i: r.get("cpu", 0) for i, r in split.items()} if split else None
            try:
                cpus = allocate_cpus(topo, available, view.details, n, plan.bind_policy, plan.required,
                                     ctx.exclusive_policy, strategy, numa_cpus, preferred=preferred)
            except AllocationError as e:
                return None, _status(UNSCHEDULABLE, str(e))
        return Result(cpus, split or {}, nodes), None

    # -- Filter -------------------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        st = self._state(state, pod)
        if st.skip:
            return None
        ctx = st.ctx
        opts = self.options(node)
        plan, status = self._plan(ctx, opts)
        if status is not None:
            return status
        view = None
        if opts.ratio_error and ctx.cpu_milli > 0:
            return _status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_INVALID_RATIO)
        if opts.cpu_ratio > 1 and ctx.cpu_milli > 0:
            view = self._view(st, node.name)
            if not self._amplified_fits(ctx, plan, node, opts, view):
                return _status(UNSCHEDULABLE, MSG_AMPLIFIED)
        if plan.request_bind:
            topo = opts.topology
            if opts.error or not topo.valid:
                reason = f"{MSG_INVALID_TOPOLOGY}: {opts.error}" if opts.error else MSG_INVALID_TOPOLOGY
                return _status(UNSCHEDULABLE_AND_UNRESOLVABLE, reason)
            node_required = _NODE_REQUIRED.get(opts.bind_policy, "")
            if node_required and ctx.required_policy and ctx.required_policy != node_required:
                return _status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_BIND_CONFLICT)
            if plan.required == numa.CPU_BIND_POLICY_FULL_PCPUS and ctx.num_cpus % max(topo.cpus_per_core, 1):
                return _status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_NOT_MULTIPLE)
            if plan.required and not plan.numa_policy:
                _, status = self._allocate(st, plan, node, opts, view or self._view(st, node.name))
                return status
        if plan.numa_policy in (numa.NUMA_POLICY_RESTRICTED, numa.NUMA_POLICY_SINGLE_NUMA_NODE):
            _, status = self._allocate(st, plan, node, opts, view or self._view(st, node.name))
            return status
        return None

    def _amplified_fits(self, ctx: PodContext, plan: Plan, node: NodeInfo, opts: TopologyOptions,
                        view: AllocationView) -> bool:
        r = opts.cpu_ratio
        pod_req = math.ceil(ctx.cpu_milli * r) if plan.request_bind else ctx.cpu_milli
        cpuset_milli = 1000 * view.cpuset_count
        node_req = node.requested.get("cpu", 0)
        if node_req >= cpuset_milli > 0:
            node_req = node_req - cpuset_milli + math.ceil(cpuset_milli * r)
        return pod_req <= node.allocatable.get("cpu", 0) - node_req

    def _mask(self, snapshot: Any, which: str) -> np.ndarray:
        """A boolean array over every snapshot row: the node is in the set ``which`` names.

        Sets: "special" (see :meth:`special_names`), "valid" (a NodeResourceTopology with a usable
        CPU topology), "annotated" (a Node with reserved/system-QoS CPU annotations). Cached until the
        snapshot's layout or one of the sets changes.
        """
        with self._lock:
            version = self._special_version
            if which == "special":
                names = self._special_nodes | self._special_nrt
            elif which == "valid":
                names = set(self._valid_topology)
            else:
                names = set(self._annotated_nodes)
        cached = self._masks.get(which)
        if cached is None or cached[0] is not snapshot or cached[1] != snapshot.layout_version or cached[2] != version:
            mask = np.zeros(len(snapshot), dtype=bool)
            index = snapshot.index
            mask[[index[n] for n in names if n in index]] = True
            cached = self._masks[which] = (snapshot, snapshot.layout_version, version, mask)
        return cached[3]

    def _partition(self, st: _State, snapshot: Any, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions in ``rows`` needing the per-node path, positions with no usable CPU topology).

        Ordinary pods: only special nodes need a look. Pods binding CPUs without a NUMA policy of their
        own: special and annotated nodes per node, nodes without a topology fail (or score 0) at once,
        and the others need a trial allocation only when the bind policy is required. Pods with a NUMA
        policy: every node.
        """
        ctx = st.ctx
        none = np.zeros(0, dtype=np.int64)
        if ctx.numa_policy:
            return np.arange(len(rows)), none
        if not ctx.request_cpu_bind:
            if not self.special_names():
                return none, none
            return np.flatnonzero(snapshot.take(self._mask(snapshot, "special"), rows)), none
        special = snapshot.take(self._mask(snapshot, "special"), rows) | \
            snapshot.take(self._mask(snapshot, "annotated"), rows)
        valid = snapshot.take(self._mask(snapshot, "valid"), rows)
        per_node = special | valid if ctx.required_policy else special
        return np.flatnonzero(per_node), np.flatnonzero(~valid & ~special)

    def filter_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> BatchFilterResult:
        st = self._state(state, pod)
        if st.skip:
            return BatchFilterResult.all_pass(len(rows))
        positions, invalid = self._partition(st, snapshot, rows)
        if not len(positions) and not len(invalid):
            return BatchFilterResult.all_pass(len(rows))
        passed = np.ones(len(rows), dtype=bool)
        reasons: dict[tuple[int, str], list[int]] = {}
        if len(invalid):
            passed[invalid] = False
            reasons[(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_INVALID_TOPOLOGY)] = invalid.tolist()
        infos = snapshot.node_infos
        for pos in positions.tolist():
            status = self.filter(state, pod, infos[int(rows[pos])])
            if status is not None and not status.is_success():
                passed[pos] = False
                reasons.setdefault((status.code, status.message()), []).append(pos)
        failures = []
        for (code, reason), where in reasons.items():
            mask = np.zeros(len(rows), dtype=bool)
            mask[where] = True
            failures.append(Failure(code, reason, mask))
        return BatchFilterResult(passed, failures, all_passed=not failures)

    # -- Score ----------------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> Status | None:
        st = self._state(state, pod)
        if st.skip:
            return Status.skip()
        return None

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        st = self._state(state, pod)
        if st.skip:
            return 0
        ctx = st.ctx
        opts = self.options(node)
        plan, status = self._plan(ctx, opts)
        if status is not None:
            return 0
        if plan.request_bind and (opts.error or not opts.topology.valid):
            return 0
        strategy = self.args.scoring_strategy
        weights = scoring.counted(strategy.resources, ctx.requests)
        view = self._view(st, node.name)
        if not plan.numa_policy:
            requested = dict(node.requested)
            if opts.cpu_ratio > 1 and ctx.cpu_milli > 0:
                cpuset_milli = 1000 * view.cpuset_count
                requested["cpu"] = (requested.get("cpu", 0) - cpuset_milli
                                    + math.ceil(cpuset_milli * opts.cpu_ratio))
            total = {r: requested.get(r, 0) + ctx.requests.get(r, 0) for r, _ in weights}
            return scoring.score_one(strategy.type, weights, node.allocatable, total)
        result, status = self._allocate(st, plan, node, opts, view)
        if status is not None or result is None:
            return 0
        allocatable = opts.numa_allocatable()
        used = view.numa_used(opts.topology)
        nodes = result.nodes or sorted(allocatable)
        alloc = {r: sum(allocatable.get(i, {}).get(r, 0) for i in nodes) for r, _ in weights}
        req = {r: sum(used.get(i, {}).get(r, 0) for i in nodes) for r, _ in weights}
        if result.cpus:
            req["cpu"] = math.ceil(1000 * view.cpuset_count * max(opts.cpu_ratio, 1.0))
        total = {r: req.get(r, 0) + ctx.requests.get(r, 0) for r in alloc}
        return scoring.score_one(strategy.type, weights, alloc, total)

    def _score_class(self, snapshot: Any, rows: np.ndarray, key: tuple) -> np.ndarray:
        """Node-level scores of pods requesting ``key`` ((resource, amount) of the weighted resources)."""
        strategy = self.args.scoring_strategy
        requests = dict(key)
        return scoring.score_rows(strategy.type, scoring.counted(strategy.resources, requests), snapshot, rows,
                                  requests)

    def score_nodes(self, state: CycleState, pod: PodInfo, snapshot: Any, rows: np.ndarray) -> np.ndarray:
        st = self._state(state, pod)
        if st.skip:
            return np.zeros(len(rows), dtype=np.int64)
        names = {name for name, _ in self.args.scoring_strategy.resources}
        key = tuple(sorted((k, v) for k, v in st.ctx.requests.items() if k in names))
        scores = self._score_memo.take(snapshot, key, rows)
        positions, invalid = self._partition(st, snapshot, rows)
        scores[invalid] = 0
        infos = snapshot.node_infos
        for pos in positions.tolist():
            scores[pos] = self.score(state, pod, infos[int(rows[pos])])
        return scores

    # -- Reservations (frameworkext ReservationRestorePlugin / ReservationFilterPlugin) ----------------------

    def pre_restore_reservation(self, state: CycleState, pod: PodInfo) -> Status | None:
        """Runs before PreFilter: create the cycle state so that RestoreReservation can fill it."""
        ctx = self.context(pod)
        if ctx.error is None and not ctx.zero and state.read(_STATE_KEY) is None:
            state.write(_STATE_KEY, _State(ctx))
        return None

    def restore_reservation(self, state: CycleState, pod: PodInfo, matched: list, unmatched: list,
                            node: NodeInfo) -> tuple[Any, Status | None]:
        """The CPUs and NUMA amounts held by reservations the pod matches are free for it on this node."""
        st = state.read(_STATE_KEY)
        if st is None:
            return None, None
        for info in matched:
            found = self.store.get(getattr(info, "uid", ""))
            if found is None or found[0] != node.name:
                continue
            alloc = found[1]
            st.removed.setdefault(node.name, set()).add(alloc.uid)
            st.reservations.setdefault(node.name, {})[alloc.uid] = (alloc.cpus, getattr(info, "policy", ""))
        return None, None

    def filter_reservation(self, state: CycleState, pod: PodInfo, reservation: Any, node_name: str) -> Status | None:
        """A Restricted reservation holding a cpuset must hold enough of it for the pod's cpuset."""
        st = state.read(_STATE_KEY)
        if st is None or st.skip:
            return None
        uid = getattr(reservation, "uid", "")
        held = (st.reservations.get(node_name) or {}).get(uid)
        if held is None or not held[0] or held[1] != rv.POLICY_RESTRICTED:
            return None
        node = self._node_info(node_name)
        if node is None:
            return None
        opts = self.options(node)
        plan, status = self._plan(st.ctx, opts)
        if status is not None or not plan.request_bind:
            return status
        if opts.error or not opts.topology.valid:
            return _status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_INVALID_TOPOLOGY)
        others = {u for u in st.reservations.get(node_name, {}) if u != uid}
        view = self.store.view(node_name, st.removed.get(node_name, set()) - others, st.added.get(node_name, ()))
        _, status = self._allocate(st, plan, node, opts, view, preferred=held[0], only=held[0])
        return status

    # -- Reserve / Unreserve / PreBind ----------------------------------------------------------------------

    def _node_info(self, node_name: str) -> NodeInfo | None:
        snapshot = self.handle.snapshot() if self.handle is not None else None
        return snapshot.get(node_name) if snapshot is not None else None

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        st = self._state(state, pod)
        if st.skip:
            return None
        node = self._node_info(node_name)
        if node is None:
            return None
        return self.reserve_on(state, st, pod, node)

    def reserve_on(self, state: CycleState, st: _State, pod: PodInfo, node: NodeInfo) -> Status | None:
        """Allocate on ``node`` and record it (Reserve with the NodeInfo at hand)."""
        ctx = st.ctx
        if not ctx.request_cpu_bind and not ctx.numa_policy and node.name not in self.special_names():
            return None  # an ordinary pod on an ordinary node: nothing to allocate
        opts = self.options(node)
        plan, status = self._plan(ctx, opts)
        if status is not None:
            return status
        if not plan.request_bind and not plan.numa_policy:
            return None
        if plan.request_bind and (opts.error or not opts.topology.valid):
            return _status(UNSCHEDULABLE_AND_UNRESOLVABLE, MSG_INVALID_TOPOLOGY)
        # Only the reservation nominated for the pod gives its CPUs back; the other matched ones keep theirs.
        nominated = _nominated_uid(state, node.name)
        held = st.reservations.get(node.name) or {}
        removed = st.removed.get(node.name, set()) - {uid for uid in held if uid != nominated}
        view = self.store.view(node.name, removed, st.added.get(node.name, ()))
        cpus, policy = held.get(nominated, (frozenset(), ""))
        only = cpus if cpus and policy == rv.POLICY_RESTRICTED else None
        result, status = self._allocate(st, plan, node, opts, view, preferred=cpus, only=only)
        if status is not None:
            return status
        alloc = PodAllocation(pod.uid, frozenset(result.cpus), st.ctx.exclusive_policy if result.cpus else "",
                              result.numa)
        if not alloc.cpus and not alloc.numa:
            return None
        self.store.add(node.name, alloc)
        st.reserved[node.name] = (alloc, plan)
        state.write(_STATE_KEY, st)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        st = state.read(_STATE_KEY)
        if st is not None and st.reserved.pop(node_name, None) is not None:
            self.store.remove(pod.uid)

    def forget_pod(self, pod: PodInfo, node_name: str) -> None:
        self.store.remove(pod.uid)

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, modified: dict) -> Status | None:
        st = state.read(_STATE_KEY)
        reserved = st.reserved.get(node_name) if st is not None else None
        if reserved is None:
            return None
        alloc, plan = reserved
        meta = modified.setdefault("metadata", {})
        annotations = meta.get("annotations")
        if annotations is None:
            annotations = meta["annotations"] = {}
        spec = st.ctx.spec
        if plan.request_bind and not spec.required_cpu_bind_policy and not spec.preferred_cpu_bind_policy:
            if plan.node_forced:
                spec = numa.ResourceSpec(plan.required, "", spec.preferred_cpu_exclusive_policy)
            else:
                spec = numa.ResourceSpec("", plan.bind_policy, spec.preferred_cpu_exclusive_policy)
            annotations[numa.ANNOTATION_RESOURCE_SPEC] = numa.format_resource_spec(spec)
        status = numa.ResourceStatus(tuple(sorted(alloc.cpus)), tuple(
            numa.NUMANodeResource(i, dict(r)) for i, r in sorted(alloc.numa.items())))
        annotations[numa.ANNOTATION_RESOURCE_STATUS] = numa.format_resource_status(status)
        return None


def _nominated_uid(state: CycleState, node_name: str) -> str:
    """UID of the reservation nominated for the pod on ``node_name`` ("" = none)."""
    return getattr(nominated_reservation(state, node_name), "uid", "") or ""


def new(args: dict | None, handle: Any) -> NodeNUMAResource:
    """Registry factory: ``new(args, handle)``."""
    return NodeNUMAResource(args, handle)
