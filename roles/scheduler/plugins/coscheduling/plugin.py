"""Koordinator's Coscheduling plugin: all-or-nothing scheduling of gangs and gang groups.

How a gang group gets scheduled (Koordinator's design, which has no gang-aware QueueSort):

* PreEnqueue lets exactly one pending pod of a gang group into activeQ, the *representative*, once
  every gang of the group is initialised and has collected ``min`` children.
* When it pops, BeforePreFilter opens the one global scheduling context for its group; the
  scheduler then asks :meth:`Coscheduling.next_pod` before every pop, which hands out the other
  pending members one after the other, so the group is scheduled back-to-back.
* Each placed member waits at Permit; when every gang of the group has enough waiting (per its
  match policy) members, they are all allowed to bind. A Strict gang whose member fails
  (PostFilter) or is unreserved (a Permit timeout, a bind failure) rejects every waiting member of
  the group; when no member is left to try, the waiting ones are rejected too and the group retries
  with backoff through its (new) representative.
* The members allowed together are recorded per member at the moment of the allow (see
  :class:`BindingRounds`): their binding cycles run after the scheduling thread has moved on, and
  whatever the group does meanwhile (a new round, a rejection, a sibling's Unreserve) must not
  change what their PreBind writes.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Collection, Iterable

from koordinator.apis.gostrings import go_quote
from koordinator_roles.scheduler.framework.interfaces import (ClusterEvent, ControllerProvider, EnqueueExtensions,
                                                               NextPodPlugin, PermitPlugin, PostBindPlugin,
                                                               PostFilterPlugin, PostFilterResult,
                                                               PostFilterTransformer, PreBindPlugin,
                                                               PreEnqueuePlugin, PreFilterPlugin,
                                                               PreFilterTransformer, PreScorePlugin, ReservePlugin,
                                                               ScorePlugin)
from koordinator_roles.scheduler.framework.status import (UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, WAIT,
                                                          Status)
from koordinator_roles.scheduler.framework.types import PodInfo
from koordinator_roles.scheduler.plugins.coscheduling.args import CoschedulingArgs, parse_args
from koordinator_roles.scheduler.plugins.coscheduling.gang import (FROM_POD_GROUP, LABEL_POD_GROUP, MODE_STRICT, Gang,
                                                                   GangGroupInfo, from_pod_group, gang_id_of,
                                                                   gang_name_of, pod_key, pod_uid)

log = logging.getLogger("koordinator.scheduler.coscheduling")

NAME = "Coscheduling"

BIND_GANG_GROUP_ID = "internal.scheduling.koordinator.sh/bind-gang-group-id"
BIND_GANG_MEMBER_COUNT = "internal.scheduling.koordinator.sh/bind-gang-member-count"
DEPRECATED_BIND_GANG_GROUP_ID = "scheduling.koordinator.sh/bind-gang-group-id"
DEPRECATED_BIND_GANG_MEMBER_COUNT = "scheduling.koordinator.sh/bind-gang-member-count"

REASON_ALL_ATTEMPTED = "all pending pods is already been attempted"
REASON_GANG_IS_NIL = "gang is nil, may be already deleted"


def _go_list(items: Iterable[str]) -> str:
    """Go's %v of a []string: ``[a b]``."""
    return "[" + " ".join(items) + "]"


class BindingRounds:
    """Which pods were allowed at Permit together, per member: what PreBind writes on each of them.

    Koordinator records the gang group's binding members when the group is allowed and PreBind reads
    them in each member's binding cycle, which runs on a binder thread after the scheduling thread has
    gone on. Kept on the group, a new round or a rejection of the group cleared the record before
    the members' PreBind read it; here each member keeps the (immutable) set it was allowed with.

    A member keeps its set until it is bound or deleted. One whose binding failed keeps it for its retry
    when that retry is allowed alone (Koordinator records the members only when none are recorded); a
    later round allowing several members together gives each of them that round's set.
    Not thread-safe by itself: the plugin's lock guards every use.
    """

    def __init__(self) -> None:
        self._members: dict[str, frozenset[str]] = {}  # pod uid -> uids of its allow round
        self._binding: set[str] = set()  # allowed, binding cycle not over (neither bound nor unreserved)

    def allow(self, uids: Iterable[str]) -> frozenset[str]:
        """Record one allow: ``uids`` are the group's waiting pods; those already allowed and still in
        their binding cycle belong to their own round. The new round's members are returned."""
        members = frozenset(u for u in uids if u not in self._binding)
        for uid in members:
            if len(members) > 1 or uid not in self._members:
                self._members[uid] = members
        self._binding |= members
        return members

    def members_of(self, uid: str) -> frozenset[str]:
        """The members of the round the pod was allowed in (empty: not allowed with a gang)."""
        return self._members.get(uid, frozenset())

    def unreserved(self, uid: str) -> None:
        """The pod's binding cycle failed: a later allow may take it into a new round."""
        self._binding.discard(uid)

    def forget(self, uid: str) -> None:
        """The pod is bound or gone: nothing to write on it any more."""
        self._binding.discard(uid)
        self._members.pop(uid, None)


class SchedulingContext:
    """The one gang group being scheduled (Koordinator's GangSchedulingContext)."""

    def __init__(self, first_pod: dict, gang: Gang) -> None:
        self.first_pod = first_pod
        self.first_gang_id = gang.id
        self.gang_group = list(gang.gang_group)
        self.gang_group_id = gang.gang_group_id
        self.attempted: set[str] = {pod_key(first_pod)}
        self.failed_message = ""


class Coscheduling(PreEnqueuePlugin, PreFilterPlugin, PreFilterTransformer, PostFilterPlugin,
                   PostFilterTransformer, PreScorePlugin, ScorePlugin, ReservePlugin, PermitPlugin, PreBindPlugin,
                   PostBindPlugin, NextPodPlugin, EnqueueExtensions, ControllerProvider):
    name = NAME

    def __init__(self, args: CoschedulingArgs, handle: Any = None) -> None:
        self.args = args
        self.handle = handle
        self._lock = threading.RLock()
        self.gangs: dict[str, Gang] = {}
        self._groups: dict[str, GangGroupInfo] = {}
        self._pod_gang: dict[str, str] = {}  # pod key -> gang id
        self._rounds = BindingRounds()
        self.context: SchedulingContext | None = None
        self._queue: Any = None
        self._controller: Any = None
        self._pods_informer: Any = None
        self._pg_informer: Any = None
        informers = getattr(handle, "informers", None)
        if informers is not None:
            self._pg_informer = informers.informer("PodGroup")
            self._pg_informer.add_handler(on_add=self.on_pod_group_add, on_update=self.on_pod_group_update,
                                          on_delete=self.on_pod_group_delete)
            self._pods_informer = informers.informer("Pod")
            self._pods_informer.add_handler(on_add=self.on_pod_add, on_update=self.on_pod_update,
                                            on_delete=self.on_pod_delete)

    # -- wiring ----------------------------------------------------------------------------------------

    def bind_scheduling_queue(self, queue: Any) -> None:
        """The scheduler hands its queue over: gang members are activated in it."""
        self._queue = queue

    def new_controllers(self) -> list[Any]:
        from koordinator_roles.scheduler.plugins.coscheduling.controller import PodGroupController

        if self.handle is None or getattr(self.handle, "client", None) is None or self._pg_informer is None:
            return []
        if self._controller is None:
            self._controller = PodGroupController(self, self.handle.client, self._pg_informer, self._pods_informer,
                                                  workers=self.args.controller_workers)
        return [self._controller]

    def events_to_register(self) -> list[ClusterEvent]:
        # Not Pod Update: every binding is one, and each would re-check every gated gang member. The
        # plugin activates members itself when their gang grows or a round ends; these events are the
        # ones that can make a rejected gang fit.
        return [ClusterEvent("Pod", "Add"), ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add"),
                ClusterEvent("Node", "Update"), ClusterEvent("PodGroup", "*")]

    def _activate(self, pods: list[dict]) -> None:
        if pods and self._queue is not None:
            self._queue.activate(pods)

    def _notify_controller(self, pg_keys: Iterable[str]) -> None:
        # Only gangs of a PodGroup have a status to write: annotation gangs would only churn the queue.
        if self._controller is not None:
            for key in pg_keys:
                if self._pg_informer.store.get(key) is not None:
                    self._controller.enqueue(key)

    # -- the gang cache --------------------------------------------------------------------------------

    def _group_info(self, gang: Gang) -> None:
        """Give the gang the shared info of its (possibly new) group."""
        info = self._groups.get(gang.gang_group_id)
        if info is None:
            info = self._groups[gang.gang_group_id] = GangGroupInfo(gang.gang_group_id)
        if info is not gang.group_info:
            info.once_resource_satisfied = info.once_resource_satisfied or gang.group_info.once_resource_satisfied
            gang.group_info = info

    def _gang(self, gang_id: str, create: bool = False) -> Gang | None:
        gang = self.gangs.get(gang_id)
        if gang is None and create:
            gang = self.gangs[gang_id] = Gang(gang_id)
            self._group_info(gang)
        return gang

    def _ready_pods(self, gang: Gang) -> list[dict]:
        """The group's pending pods, when the gang has collected its min: to activate in the queue."""
        if not gang.has_init or len(gang.children) < gang.min_required:
            return []
        pods = []
        for gid in gang.gang_group:
            g = self.gangs.get(gid)
            if g is not None:
                pods += list(g.pending.values())
        return pods

    def on_pod_add(self, pod: dict) -> None:
        self._on_pod(None, pod)

    def on_pod_update(self, old: dict, new: dict) -> None:
        self._on_pod(old, new)

    def _on_pod(self, old: dict | None, pod: dict) -> None:
        key = pod_key(pod)
        gang_id = gang_id_of(pod)
        activate: list[dict] = []
        pgs: list[str] = []
        with self._lock:
            if (pod.get("spec") or {}).get("nodeName"):
                # Bound (maybe by a binding cycle that reported a failure): its PreBind is behind it.
                self._rounds.forget(pod_uid(pod))
            previous = self._pod_gang.get(key)
            if previous and previous != gang_id:
                self._remove_child(previous, key)
                pgs.append(previous)
            if not gang_id:
                self._pod_gang.pop(key, None)
            else:
                gang = self._gang(gang_id, create=True)
                assert gang is not None
                if from_pod_group(pod):
                    gang.gang_from = FROM_POD_GROUP
                elif not gang.has_init:
                    if gang.try_init_by_pod(pod, self.args):
                        self._group_info(gang)
                gang.set_child(pod)
                self._pod_gang[key] = gang_id
                if old is None:
                    activate = self._ready_pods(gang)
                pgs.append(gang_id)
        self._activate(activate)
        self._notify_controller(pgs)

    def on_pod_delete(self, pod: Any) -> None:
        pod = getattr(pod, "obj", pod)
        key = pod_key(pod)
        activate: list[dict] = []
        with self._lock:
            self._rounds.forget(pod_uid(pod))
            gang_id = self._pod_gang.pop(key, None) or gang_id_of(pod)
            if gang_id:
                gang = self.gangs.get(gang_id)
                was_rep = gang is not None and gang.group_info.representative == key
                self._remove_child(gang_id, key)
                if was_rep and gang is not None and gang.id in self.gangs:
                    activate = self._ready_pods(gang)
        self._activate(activate)
        if gang_id:
            self._notify_controller([gang_id])

    def _remove_child(self, gang_id: str, key: str) -> None:
        gang = self.gangs.get(gang_id)
        if gang is None:
            return
        gang.delete_child(key)
        # An annotation gang lives as long as its pods.
        if not gang.children and gang.gang_from != FROM_POD_GROUP:
            del self.gangs[gang_id]

    def on_pod_group_add(self, pg: dict) -> None:
        self._on_pod_group(pg)

    def on_pod_group_update(self, old: dict, new: dict) -> None:
        self._on_pod_group(new)

    def _on_pod_group(self, pg: dict) -> None:
        meta = pg.get("metadata") or {}
        gang_id = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        with self._lock:
            gang = self._gang(gang_id, create=True)
            assert gang is not None
            gang.init_by_pod_group(pg, self.args)
            self._group_info(gang)
            activate = self._ready_pods(gang)
        self._activate(activate)
        self._notify_controller([gang_id])

    def on_pod_group_delete(self, pg: Any) -> None:
        pg = getattr(pg, "obj", pg)
        meta = pg.get("metadata") or {}
        gang_id = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        with self._lock:
            gang = self.gangs.get(gang_id)
            if gang is None:
                return
            if gang.children:
                gang.has_init, gang.pod_group = False, None
            else:
                del self.gangs[gang_id]

    # -- reading (controller, tests) -------------------------------------------------------------------

    def gang_of(self, gang_id: str) -> Gang | None:
        with self._lock:
            return self.gangs.get(gang_id)

    def children_of(self, gang_id: str) -> tuple[list[str], int]:
        """The keys of the gang's children and how many are bound (the PodGroup controller's view)."""
        with self._lock:
            gang = self.gangs.get(gang_id)
            if gang is None:
                return [], 0
            return sorted(gang.children), len(gang.bound)

    # -- PreEnqueue ------------------------------------------------------------------------------------

    def _basic_check(self, gang: Gang, pod: PodInfo) -> str:
        missing, not_init, short = [], [], False
        for gid in gang.gang_group:
            g = self.gangs.get(gid)
            if g is None:
                missing.append(gid)
            elif not g.has_init:
                not_init.append(gid)
            elif len(g.children) < g.min_required:
                short = True
        parts = []
        if missing:
            parts.append(f"memberGangs {_go_list(missing)} doesn't exists")
        if not_init:
            parts.append(f"memberGangs {_go_list(not_init)} has not init")
        if short:
            parts.append(f"memberGangs {_go_list(gang.gang_group)} child pod not collect enough")
        if not parts:
            return ""
        return (f"gangGroup {_go_list(gang.gang_group)} basic check: {', '.join(parts)}, current gang: {gang.id}, "
                f"podName: {pod.key}")

    def _gang_checks(self, pod: PodInfo) -> tuple[Gang | None, str, bool]:
        """Checks 1-4 (shared by PreEnqueue and BeforePreFilter): (gang, failure message, pass-at-once)."""
        gang_name = gang_name_of(pod.pod)
        if not gang_name:
            return None, "", True
        gang_id = f"{pod.namespace}/{gang_name}"
        gang = self.gangs.get(gang_id)
        if gang is None:
            return None, f"can't find gang, gangName: {gang_id}, podName: {pod.key}", False
        if not gang.has_init:
            return gang, f"gang has not init, gangName: {gang.id}, podName: {pod.key}", False
        if gang.once_satisfied():
            return gang, "", True
        return gang, self._basic_check(gang, pod), False

    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        with self._lock:
            gang, message, done = self._gang_checks(pod)
            if done:
                return None
            if message:
                if gang is not None and gang.group_info.representative == pod.key:
                    gang.group_info.representative = ""
                return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, message)
            assert gang is not None
            ctx = self.context
            if ctx is not None and ctx.gang_group_id == gang.gang_group_id and pod.key not in ctx.attempted:
                return Status(UNSCHEDULABLE_AND_UNRESOLVABLE,
                              f"gangGroup {gang.gang_group_id} is scheduling and this pod has not been attempted")
            if pod.key not in gang.pending:
                return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, f"pod {pod.key} is not exists in gangCache")
            info = gang.group_info
            if not info.representative or info.representative == pod.key:
                info.representative = pod.key
                return None
            return Status(UNSCHEDULABLE_AND_UNRESOLVABLE, f"representative pod {info.representative} of gangGroupID "
                                                          f"{gang.gang_group_id} already exists")

    # -- BeforePreFilter / PreFilter -------------------------------------------------------------------

    def before_pre_filter(self, state: Any, pod: PodInfo) -> tuple[PodInfo | None, Status | None]:
        activate: list[dict] = []
        try:
            with self._lock:
                gang, message, done = self._gang_checks(pod)
                if done:
                    return None, None
                if message:
                    return None, Status(UNSCHEDULABLE_AND_UNRESOLVABLE, message)
                assert gang is not None
                ctx = self.context
                if ctx is not None and ctx.gang_group_id != gang.gang_group_id:
                    # Another group's round was left unfinished: close it, its untried members go back.
                    activate = self._clear_context_locked("another gang group started scheduling")
                    ctx = None
                if ctx is None:
                    self.context = SchedulingContext(pod.pod, gang)
                    gang.group_info.representative = ""
                    return None, None
                ctx.attempted.add(pod.key)
                if ctx.failed_message:
                    return None, Status(UNSCHEDULABLE, ctx.failed_message)
                return None, None
        finally:
            self._activate(activate)

    def pre_filter(self, state: Any, pod: PodInfo, snapshot: Any):
        # Network-topology planning is the only PreFilter work and it is not built: nothing to filter.
        return None, Status.skip()

    # -- NextPod ---------------------------------------------------------------------------------------

    def next_pod(self, unavailable: Collection[str] = ()) -> dict | None:
        activate: list[dict] = []
        try:
            with self._lock:
                ctx = self.context
                if ctx is None:
                    return None
                if ctx.first_gang_id not in self.gangs:
                    self._reject_group_locked(ctx.gang_group, REASON_GANG_IS_NIL)
                    activate = self._clear_context_locked(REASON_GANG_IS_NIL)
                    return None
                later = False
                for gid in sorted(ctx.gang_group):
                    gang = self.gangs.get(gid)
                    if gang is None:
                        continue
                    for key in sorted(gang.pending):
                        pod = gang.pending[key]
                        if key in ctx.attempted or not self._schedulable_here(pod):
                            continue
                        if key in unavailable:
                            later = True      # not in the queue yet: the round goes on without it for now
                            continue
                        ctx.attempted.add(key)
                        return pod
                if later:
                    return None
                self._reject_group_locked(ctx.gang_group, REASON_ALL_ATTEMPTED)
                activate = self._clear_context_locked(REASON_ALL_ATTEMPTED)
                return None
        finally:
            self._activate(activate)

    def _schedulable_here(self, pod: dict) -> bool:
        spec = pod.get("spec") or {}
        if spec.get("schedulingGates") or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return False
        name = getattr(self.handle, "scheduler_name", None)
        return name is None or (spec.get("schedulerName") or "default-scheduler") == name

    def _clear_context_locked(self, reason: str) -> list[dict]:
        """Close the round; the group's pending pods it did not try are returned for activation."""
        ctx, self.context = self.context, None
        if ctx is None:
            return []
        log.debug("gang scheduling context cleared group=%s reason=%s", ctx.gang_group_id, reason)
        pods = []
        for gid in ctx.gang_group:
            gang = self.gangs.get(gid)
            if gang is not None:
                pods += [p for k, p in gang.pending.items() if k not in ctx.attempted]
        return pods

    def _reject_group_locked(self, gang_group: Iterable[str], message: str) -> int:
        """Reject every pod of the group waiting at Permit; how many there were."""
        group = set(gang_group)
        for gid in group:
            gang = self.gangs.get(gid)
            if gang is not None:
                gang.group_info.waiting_gangs.clear()
        fwk = getattr(self.handle, "framework", None)
        waiting = list(getattr(fwk, "waiting_pods", {}).values()) if fwk is not None else []
        n = 0
        for wp in waiting:
            if gang_id_of(wp.pod.pod) in group:
                wp.reject(NAME, message)
                n += 1
        return n

    # -- PostFilter ------------------------------------------------------------------------------------

    def post_filter(self, state: Any, pod: PodInfo, statuses: Any):
        # enablePreemption is off (job-level preemption is not built): nothing to nominate.
        return PostFilterResult(), Status(UNSCHEDULABLE)

    def after_post_filter(self, state: Any, pod: PodInfo, statuses: Any, status: Status | None) -> None:
        with self._lock:
            gang_id = gang_id_of(pod.pod)
            if not gang_id:
                return
            gang = self.gangs.get(gang_id)
            if gang is None or gang.once_satisfied():
                return
            ctx = self.context
            waiting = sum(len(g.waiting) for g in (self.gangs.get(x) for x in gang.gang_group) if g is not None)
            message = (f"GangGroup {go_quote(gang.gang_group_id)} gets rejected due to member Pod "
                       f"{go_quote(pod.key)} is unschedulable with reason {go_quote(self._reason(statuses, status))}, "
                       f"alreadyWaitForBound: {waiting}")
            if ctx is not None and ctx.gang_group_id == gang.gang_group_id and not ctx.failed_message:
                ctx.failed_message = message
            if gang.mode == MODE_STRICT:
                failed = ctx.failed_message if ctx is not None and ctx.failed_message else message
                self._reject_group_locked(gang.gang_group, failed)
                log.info("Gang %s gets rejected due to pod is unschedulable pod=%s", go_quote(gang.id), pod.key)

    def _reason(self, statuses: Any, status: Status | None) -> str:
        render = getattr(statuses, "fit_error_message", None)
        if render is None:
            return status.message() if status is not None else ""
        try:
            n = len(self.handle.snapshot())
        except Exception:
            n = len(list(statuses.node_names()))
        message = render(n)
        extra = status.message() if status is not None else ""
        return f"{message} {extra}" if extra and not getattr(statuses, "post_filter_msg", "") else message

    # -- Score (network topology only) -----------------------------------------------------------------

    def pre_score(self, state: Any, pod: PodInfo, snapshot: Any, rows: Any) -> Status | None:
        return Status.skip()

    def score(self, state: Any, pod: PodInfo, node: Any) -> int:
        return 0

    # -- Reserve / Permit / Unreserve ------------------------------------------------------------------

    def reserve(self, state: Any, pod: PodInfo, node_name: str) -> Status | None:
        return None

    def permit(self, state: Any, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        activate: list[dict] = []
        try:
            with self._lock:
                gang_id = gang_id_of(pod.pod)
                if not gang_id:
                    return None, 0.0
                gang = self.gangs.get(gang_id)
                if gang is None:
                    return Status(UNSCHEDULABLE, "Gang not found"), 0.0
                gang.add_waiting(pod.pod)
                for gid in gang.gang_group:
                    g = self.gangs.get(gid)
                    if g is None or not g.valid_for_permit():
                        gang.group_info.waiting_gangs.add(gang.id)
                        return Status(WAIT, f"gang {gang.id} is waiting for its gang group"), gang.wait_time
                self._allow_group_locked(gang, pod)
                ctx = self.context
                if ctx is not None and ctx.gang_group_id == gang.gang_group_id:
                    activate = self._clear_context_locked("gang is already succeed")
                return None, 0.0
        finally:
            self._activate(activate)

    def _allow_group_locked(self, gang: Gang, pod: PodInfo) -> None:
        group = set(gang.gang_group)
        uids = [pod.uid]
        for gid in group:
            g = self.gangs.get(gid)
            if g is not None:
                uids += [pod_uid(p) for p in g.waiting.values()]
        self._rounds.allow(uids)
        gang.group_info.waiting_gangs.clear()
        fwk = getattr(self.handle, "framework", None)
        for wp in list(getattr(fwk, "waiting_pods", {}).values()) if fwk is not None else []:
            if gang_id_of(wp.pod.pod) in group:
                wp.allow(NAME)

    def unreserve(self, state: Any, pod: PodInfo, node_name: str) -> None:
        with self._lock:
            gang_id = gang_id_of(pod.pod)
            gang = self.gangs.get(gang_id) if gang_id else None
            if gang is None:
                return
            gang.del_waiting(pod.pod)
            self._rounds.unreserved(pod.uid)
            if gang.once_satisfied() or gang.mode != MODE_STRICT:
                return
            self._reject_group_locked(gang.gang_group,
                                      f"Gang {go_quote(gang.id)} gets rejected due to Pod {go_quote(pod.name)} "
                                      f"in Unreserve")

    # -- PreBind / PostBind ----------------------------------------------------------------------------

    def pre_bind(self, state: Any, pod: PodInfo, node_name: str, modified: dict) -> Status | None:
        with self._lock:
            gang_id = gang_id_of(pod.pod)
            gang = self.gangs.get(gang_id) if gang_id else None
            members = self._rounds.members_of(pod.uid) if gang is not None else frozenset()
            group_id = gang.gang_group_id if gang is not None else ""
        annotations = modified.setdefault("metadata", {}).setdefault("annotations", {})
        if len(members) > 1 and pod.uid in members:
            for key in (BIND_GANG_GROUP_ID, DEPRECATED_BIND_GANG_GROUP_ID):
                annotations[key] = group_id
            for key in (BIND_GANG_MEMBER_COUNT, DEPRECATED_BIND_GANG_MEMBER_COUNT):
                annotations[key] = str(len(members))
        else:
            for key in (BIND_GANG_GROUP_ID, DEPRECATED_BIND_GANG_GROUP_ID, BIND_GANG_MEMBER_COUNT,
                        DEPRECATED_BIND_GANG_MEMBER_COUNT):
                annotations.pop(key, None)
        return None

    def post_bind(self, state: Any, pod: PodInfo, node_name: str) -> None:
        activate: list[dict] = []
        with self._lock:
            gang_id = gang_id_of(pod.pod)
            gang = self.gangs.get(gang_id) if gang_id else None
            self._rounds.forget(pod.uid)
            if gang is None:
                return
            gang.add_bound(pod.pod)
            if gang.once_satisfied():
                # Later members (replacements, scale-up) are plain pods now: let the gated ones in.
                activate = self._ready_pods(gang)
        self._activate(activate)
        self._notify_controller([gang_id])


def new(args: dict | None, handle: Any) -> Coscheduling:
    """Registry factory: validates CoschedulingArgs (ValueError naming the field)."""
    return Coscheduling(parse_args(args), handle)


__all__ = ["NAME", "Coscheduling", "new", "LABEL_POD_GROUP"]
