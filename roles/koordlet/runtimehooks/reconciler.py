"""Reconciler mode (reference A.8.1 mode 3): the hook plugins' answers applied to existing cgroups.

One round (:meth:`Reconciler.reconcile_once`) runs on every change of the pods, the NodeSLO or the Node
(states informer callbacks) and every ``--reconcile-interval-seconds``:

1. the round's :class:`~.facts.NodeFacts`; plugins whose node lacks what they need are skipped (one
   log line when that starts, one when it ends);
2. the Kube-QoS dirs, each running pod and its containers, the NodeSLO host applications: every
   enabled plugin answers (in name order, as Koordinator sorts a stage's hooks; a later plugin's
   field wins);
3. clean-up: pod cgroups still on disk whose pod terminated or is gone get the plugins' "dangling"
   values (GroupIdentity: the QoS dir's bvt), and the executor forgets the cached values of pod
   cgroups that are gone, so a cgroup recreated at the same path is written again;
4. everything is written in one leveled batch (QoS dirs, pods, containers) through the resource executor.

A pod whose hooks fail (a malformed ``scheduling.koordinator.sh/resource-status`` ...) is skipped, the
others are done, and a Warning Event goes to the pod once per distinct problem.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.resourceexecutor.executor import CgroupUpdate
from koordinator_roles.koordlet.runtimehooks.facts import NodeFacts, node_facts
from koordinator_roles.koordlet.runtimehooks.hooks import HookPlugin, HostContext
from koordinator_roles.koordlet.runtimehooks.protocol import (HookError, PodRequest, Resources, container_requests,
                                                             pod_request)
from koordinator_roles.koordlet.system.cgroup import (BEST_EFFORT, BURSTABLE, GUARANTEED, SYSTEMD,
                                                      host_application_dir)
from koordinator_roles.koordlet.system.resources import CPU_CFS_QUOTA, CPU_SHARES, CPUSET_CPUS, MEMORY_LIMIT

log = logging.getLogger("koordinator.koordlet.runtimehooks")

OWNER = "RuntimeHooks"
KUBE_QOS_CLASSES = (GUARANTEED, BURSTABLE, BEST_EFFORT)
TERMINATED_PHASES = ("Succeeded", "Failed")
# Resources field -> logical (v1) cgroup setting of the resource executor.
_FIELDS = (("cpu_shares", CPU_SHARES), ("cfs_quota", CPU_CFS_QUOTA), ("cpuset", CPUSET_CPUS),
           ("memory_limit", MEMORY_LIMIT), ("cpu_bvt", "cpu.bvt_warp_ns"))
_SYSTEMD_POD = re.compile(r"^kubepods-(?:burstable-|besteffort-)?pod.+\.slice$")


@dataclass
class RoundResult:
    """What one round did (for tests and logs)."""

    pods: int = 0
    skipped: dict[str, str] = field(default_factory=dict)      # "ns/name" -> why
    dangling: list[str] = field(default_factory=list)          # pod cgroup dirs cleaned
    updates: int = 0


def cgroup_updates(rel_dir: str, answers: Iterable[tuple[str, Resources | None]], what: str) -> list[CgroupUpdate]:
    """One update per field set by any answer; the last plugin setting a field wins and owns it."""
    chosen: dict[str, tuple[Any, str]] = {}
    for plugin, res in answers:
        if res is None:
            continue
        for attr, setting in _FIELDS:
            value = getattr(res, attr)
            if value is None or (attr == "cpuset" and value == ""):
                continue      # "" is the CRI's "no cpuset": nothing to write in reconciler mode
            chosen[setting] = (value, plugin)
    return [CgroupUpdate(setting, rel_dir, value, f"{OWNER}/{plugin}", f"reconcile {what}")
            for setting, (value, plugin) in chosen.items()]


class Reconciler:
    """Applies the hook plugins to the node's cgroups (see the module docstring).

    ``plugins`` are the enabled ones (their gate on); ``states`` the states informer; ``cache`` the metric
    cache (CPU topology, for the shared pools); ``events`` returns the event recorder (or None).
    """

    def __init__(self, states: Any, executor: Any, plugins: Iterable[HookPlugin], *, cache: Any = None,
                 interval: float = 1.0, events: Callable[[], Any] | None = None, proc_root: str = "/proc") -> None:
        self.states = states
        self.executor = executor
        self.layout = executor.layout
        self.plugins = sorted(plugins, key=lambda p: p.name)
        self.cache = cache
        self.interval = interval
        self.events = events
        self.host = HostContext(executor=executor, proc_root=proc_root)
        self._lock = threading.Lock()
        self._problems: dict[str, str] = {}      # plugin -> system problem logged
        self._reported: dict[str, str] = {}      # pod uid -> hook problem an event was sent for
        self._pod_dirs: set[str] = set()         # pod cgroups handled last round (running or dangling)

    # -- inputs --------------------------------------------------------------------------------------

    def facts(self, pods: list[Mapping[str, Any]]) -> NodeFacts:
        """The round's node facts from the states informer and the metric cache."""
        processors = ((self.cache.get_kv(kinds.KV_NODE_CPU_INFO) or {}).get("cpus") or []) if self.cache else []
        return node_facts(self.states.node(), self.states.node_slo(), processors, pods)

    def usable_plugins(self) -> list[HookPlugin]:
        """The enabled plugins this node can apply now (a change either way is logged once)."""
        out = []
        for plugin in self.plugins:
            problem = plugin.system_problem(self.host)
            if problem != self._problems.get(plugin.name):
                if problem:
                    log.info("runtime hook %s skipped: %s", plugin.name, problem)
                else:
                    log.info("runtime hook %s applies again", plugin.name)
            if problem:
                self._problems[plugin.name] = problem
                continue
            self._problems.pop(plugin.name, None)
            out.append(plugin)
        return out

    # -- one round -----------------------------------------------------------------------------------

    def reconcile_once(self) -> RoundResult:
        """One reconcile round (see the module docstring); never raises for one pod's problem."""
        with self._lock:
            return self._reconcile()

    def _reconcile(self) -> RoundResult:
        metas = [m for m in self.states.pods() if (m.pod.get("status") or {}).get("phase") not in TERMINATED_PHASES]
        facts = self.facts([m.pod for m in metas])
        plugins = [p for p in self.usable_plugins() if p.reconcile]
        for plugin in plugins:
            plugin.prepare(self.host, facts)
        result = RoundResult(pods=len(metas))
        qos_level = []
        for kube_qos in KUBE_QOS_CLASSES:
            answers = [(p.name, p.kube_qos_hook(kube_qos, facts)) for p in plugins]
            qos_level += cgroup_updates(self.layout.qos_dir(kube_qos), answers, f"kube QoS {kube_qos}")
        pod_level: list[CgroupUpdate] = []
        container_level: list[CgroupUpdate] = []
        active: set[str] = set()
        ok_uids: set[str] = set()
        for meta in metas:
            active.add(meta.cgroup_dir)
            req = pod_request(meta.pod, meta.cgroup_dir)
            try:
                pods, containers = self._pod_updates(req, meta.containers(), plugins, facts)
            except HookError as err:
                result.skipped[req.key] = str(err)
                self._report(meta.pod, req, err)
                continue
            ok_uids.add(req.uid)
            pod_level += pods
            container_level += containers
        running = {m.uid for m in metas}
        for uid in [u for u in self._reported if u in ok_uids or u not in running]:
            del self._reported[uid]       # fixed or gone: a new problem is reported again
        pod_level += self._host_app_updates(plugins, facts)
        dangling = self._dangling(active)
        for kube_qos, rel in dangling:
            answers = [(p.name, p.dangling_pod_hook(kube_qos, facts)) for p in plugins]
            pod_level += cgroup_updates(rel, answers, "pod cgroup of a terminated pod")
        result.dangling = [rel for _, rel in dangling]
        current = active | set(result.dangling)
        for gone in self._pod_dirs - current:
            self.executor.invalidate(gone)
        self._pod_dirs = current
        levels = [qos_level, pod_level, container_level]
        result.updates = sum(len(level) for level in levels)
        if result.updates:
            self.executor.leveled_update_batch(levels)
        return result

    def _pod_updates(self, req: PodRequest, containers: list[tuple[str, str, str]], plugins: list[HookPlugin],
                     facts: NodeFacts) -> tuple[list[CgroupUpdate], list[CgroupUpdate]]:
        """The pod's and its containers' updates; HookError when the pod cannot be handled."""
        answers = []
        for p in plugins:
            resp = p.pod_hook(req, facts)
            answers.append((p.name, resp.resources if resp else None))
        pods = cgroup_updates(req.cgroup_parent, answers, f"pod {req.key}")
        ctrs: list[CgroupUpdate] = []
        for creq in container_requests(req, containers):
            answers = []
            for p in plugins:
                resp = p.container_hook(creq, facts)
                answers.append((p.name, resp.resources if resp else None))
            ctrs += cgroup_updates(creq.cgroup_dir, answers, f"container {req.key}/{creq.name}")
        return pods, ctrs

    def _host_app_updates(self, plugins: list[HookPlugin], facts: NodeFacts) -> list[CgroupUpdate]:
        """The NodeSLO host applications' updates; an application whose cgroup cannot be placed is skipped."""
        out: list[CgroupUpdate] = []
        apps = self.states.host_applications() if hasattr(self.states, "host_applications") else []
        for app in apps:
            try:
                rel = host_application_dir(app, self.layout)
            except ValueError as err:
                log.debug("runtime hooks: %s", err)
                continue
            answers = [(p.name, p.host_app_hook(app, facts)) for p in plugins]
            out += cgroup_updates(rel, answers, f"host application {app.get('name')}")
        return out

    def _report(self, pod: Mapping[str, Any], req: PodRequest, err: HookError) -> None:
        message = str(err)
        if self._reported.get(req.uid) == message:
            log.debug("runtime hooks: pod %s skipped again: %s", req.key, message)
            return
        self._reported[req.uid] = message
        log.warning("runtime hooks: pod %s skipped: %s", req.key, message)
        recorder = self.events() if self.events is not None else None
        if recorder is None:
            return
        md = pod.get("metadata") or {}
        ref = {"kind": "Pod", "apiVersion": "v1", "namespace": md.get("namespace"), "name": md.get("name"),
               "uid": md.get("uid")}
        recorder.event(ref, "Warning", err.reason, message)

    def _dangling(self, active: set[str]) -> list[tuple[str, str]]:
        """``(kube QoS, rel dir)`` of pod cgroups on disk (cpu hierarchy) that no running pod owns."""
        out = []
        for kube_qos in KUBE_QOS_CLASSES:
            qos_dir = self.layout.qos_dir(kube_qos)
            base = os.path.dirname(self.layout.path("cpu", qos_dir, "x"))
            try:
                names = sorted(e.name for e in os.scandir(base) if e.is_dir())
            except OSError:
                continue
            for name in names:
                pod_like = _SYSTEMD_POD.match(name) if self.layout.driver == SYSTEMD else name.startswith("pod")
                rel = f"{qos_dir}/{name}"
                if pod_like and rel not in active:
                    out.append((kube_qos, rel))
        return out

    # -- on a Runtime --------------------------------------------------------------------------------

    def _on_change(self) -> None:
        # A states callback (informer or kubelet thread): apply now, as Koordinator's pod callbacks do;
        # before the first sync a partial pod list would make running pods look dangling.
        if hasattr(self.states, "has_synced") and not self.states.has_synced():
            return
        try:
            self.reconcile_once()
        except Exception:  # noqa: BLE001 - the callback thread belongs to the informer
            log.exception("runtime hooks: reconcile on change failed")

    def run(self, stop: threading.Event) -> None:
        """Rounds every ``interval`` once the states informer has synced, until ``stop`` (a runtime runnable)."""
        while hasattr(self.states, "has_synced") and not self.states.has_synced():
            if stop.wait(0.1):
                return
        last_error = None
        while not stop.is_set():
            try:
                self.reconcile_once()
                last_error = None
            except Exception as err:  # noqa: BLE001 - one bad round must not end the loop
                msg = f"{type(err).__name__}: {err}"
                if msg != last_error:
                    log.warning("runtime hooks: reconcile round failed: %s", msg, exc_info=True)
                last_error = msg
            if stop.wait(self.interval):
                return

    def register(self, runtime: Any) -> None:
        """The interval runnable on ``runtime`` and the states callbacks (pods, NodeSLO, Node)."""
        from koordinator_roles.koordlet.statesinformer.states import NODE, NODESLO, PODS

        for kind in (PODS, NODESLO, NODE):
            self.states.register_callback(kind, "runtime-hooks", self._on_change)
        if self.interval > 0:      # 0 switches the timer off (Koordinator's interval flags): changes only
            runtime.add_runnable("runtime-hooks-reconciler", self.run)
        log.info("runtime hooks (reconciler mode): %s, every %gs",
                 ",".join(p.name for p in self.plugins) or "none", self.interval)
