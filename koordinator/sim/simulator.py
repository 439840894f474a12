"""NodeSimulator: the kubelet and the kernel of simulated nodes.

For each node name it is given, the simulator

* keeps a fake node tree (:class:`~koordinator.sim.tree.NodeTree`) under ``<root>/<node>``,
  created afresh at start (a reboot: counters from 0) with the node's CPUs and memory from the
  Node's ``status.capacity`` (32 CPUs and 128Gi when the Node does not exist);
* acts as the kubelet of the pods bound to the node: marks them Running through ``pods/status``
  (conditions, IPs, ``containerStatuses`` with ``containerd://<64 hex>`` IDs derived from the pod
  UID and container name, so they are stable across restarts), creates their cgroup directories,
  deletes pods that are terminating with grace period 0, marks pods with a
  ``sim.koordinator.sh/duration`` Succeeded once they ran that long (Failed, with the container's
  exit code, when ``sim.koordinator.sh/exit-code`` is not 0), and removes the directories of
  pods that are gone or finished;
* on every tick advances each running container's CPU counters by its usage × elapsed time
  (and throttling when its profile wants more than its limit), sets its memory files, and
  rewrites the node's ``/proc/stat``, ``/proc/meminfo`` and NUMA ``meminfo`` as the pods plus the
  node's system usage (:mod:`koordinator.sim.profiles`).

Pod events only wake the simulator: it works level-triggered from the informer cache, so a
missed or repeated event changes nothing. API writes that fail are retried at the next sync.

Accounting: pods' CPU counts 80 % user and 20 % system time (cgroup ``user_usec``/``system_usec``
and the ``/proc/stat`` user/system columns); the node's CPU time is spread evenly over its CPUs
and never exceeds CPUs × elapsed time. Memory figures are whole 4 KiB pages. A pod accrues CPU
from the moment the simulator started it (or adopted it, after a restart) until now, or until
its duration ends.
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from koordinator.apis.extension import kube_qos_class
from koordinator.runtime.errors import ApiError, Conflict, NotFound
from koordinator.runtime.events import WARNING, EventRecorder
from koordinator.runtime.informer import DeletedFinalStateUnknown
from koordinator.sim import profiles, tree
from koordinator.sim.profiles import PodProfile, ProfileError, SystemProfile, UsageModel
from koordinator.sim.tree import CgroupStats, CpuTimes, Memory, NodeTree, Topology

log = logging.getLogger("koordinator.sim.simulator")

Obj = dict[str, Any]

DEFAULT_CPUS = 32
DEFAULT_MEMORY = 128 << 30
HOST_IP = "127.0.0.1"
COMPONENT = "koordinator-simulator"
USER_SHARE = (4, 5)  # user part of CPU time: 4/5
PERIOD_NS = tree.CFS_PERIOD_US * 1000


def container_id(pod_uid: str, container: str, runtime: str = "containerd") -> str:
    """``containerd://<64 hex>``, the same for the same pod UID and container name."""
    return f"{runtime}://" + hashlib.sha256(f"{pod_uid}/{container}".encode()).hexdigest()


def pod_ip(pod_uid: str) -> str:
    """A stable address in 10.244.0.0/16 for the pod."""
    h = hashlib.sha256(pod_uid.encode()).digest()
    return f"10.244.{h[0]}.{h[1] % 254 + 1}"


def timestamp(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_timestamp(text: Any) -> float | None:
    try:
        return datetime.strptime(str(text), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def _share(total: int, i: int, n: int) -> int:
    """CPU ``i``'s part of ``total`` spread evenly over ``n`` CPUs (grows monotonically with ``total``)."""
    return total // n + (1 if i < total % n else 0)


def _pages(nbytes: float) -> int:
    return int(max(0.0, nbytes)) // tree.PAGE_SIZE * tree.PAGE_SIZE


def _quota(milli: float | None) -> int | None:
    if milli is None:
        return None
    return max(1000, int(milli) * tree.CFS_PERIOD_US // 1000)


@dataclass
class _Counters:
    """One cgroup's accumulating figures (CgroupStats) plus the fractions not yet shown."""

    stats: CgroupStats
    period_ns: int = 0
    throttled: float = 0.0

    def add_cpu(self, ns: int) -> None:
        user = ns * USER_SHARE[0] // USER_SHARE[1]
        self.stats.usage_ns += ns
        self.stats.user_ns += user
        self.stats.system_ns += ns - user

    def add_periods(self, dt_ns: int, demand: float, usage: float) -> None:
        """CFS periods while the cgroup (which has a quota) wanted CPU; the share it did not get
        is the share of periods throttled."""
        if self.stats.cpu_quota_us is None or demand <= 0:
            return
        before = self.stats.nr_periods
        self.period_ns += dt_ns
        self.stats.nr_periods = self.period_ns // PERIOD_NS
        short = max(0.0, 1.0 - usage / demand)
        self.throttled += short * (self.stats.nr_periods - before)
        self.stats.nr_throttled = int(self.throttled)
        self.stats.throttled_ns += round(short * dt_ns)


@dataclass
class _Container:
    name: str
    id: str
    rel_dir: str
    counters: _Counters


@dataclass
class _Pod:
    uid: str
    namespace: str
    name: str
    kube_qos: str
    rel_dir: str
    model: UsageModel
    sim_annotations: tuple
    counters: _Counters
    containers: list[_Container]
    started_at: float
    accounted_to: float
    end: float | None
    pending: str | None = None  # a status write still to do: "running" or "succeeded"
    exit_code: int = 0  # how the containers exit when ``end`` comes (not 0: the pod Fails)


@dataclass
class _Node:
    name: str
    tree: NodeTree
    started_at: float
    last: float
    system: SystemProfile
    system_raw: Any
    user_ns: int = 0
    system_ns: int = 0
    idle: list[int] = field(default_factory=list)
    pods: dict[str, _Pod] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)  # UIDs finished or terminal: left alone
    deleting: set[str] = field(default_factory=set)
    root: _Counters = field(default_factory=lambda: _Counters(CgroupStats()))
    qos: dict[str, _Counters] = field(default_factory=dict)


def _sim_annotations(pod: Obj) -> tuple:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return tuple(sorted((k, v) for k, v in annotations.items() if k.startswith(profiles.PREFIX)))


class NodeSimulator:
    """Simulates the nodes ``nodes`` under ``root`` (see the module docstring).

    A Component: :meth:`start` registers the informer handlers and starts the loop thread
    (a sync whenever a pod of these nodes changes, a full :meth:`tick` every ``interval`` seconds);
    :meth:`stop` joins it. The informers themselves belong to ``informers`` (start them too).
    ``clock`` (unix seconds) drives every figure, so tests that inject one and call :meth:`tick`
    get exact numbers.
    """

    def __init__(self, client: Any, informers: Any, root: str | Path, nodes: Iterable[str], *,
                 cgroup_version: int = 2, cgroup_driver: str = tree.SYSTEMD, interval: float = 1.0,
                 clock: Callable[[], float] = time.time, recorder: Any = None) -> None:
        names = [n for n in nodes]
        if not names:
            raise ValueError("no nodes to simulate")
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"nodes named twice: {', '.join(duplicates)}")
        if cgroup_version not in (1, 2):
            raise ValueError(f"cgroup version {cgroup_version!r}: must be 1 or 2")
        if cgroup_driver not in tree.DRIVERS:
            raise ValueError(f"cgroup driver {cgroup_driver!r}: must be systemd or cgroupfs")
        if interval <= 0:
            raise ValueError(f"tick interval {interval}: must be positive")
        for name in names:  # fails early on a name that cannot be a directory
            NodeTree(root, name, Topology(), 0, cgroup_version=cgroup_version, driver=cgroup_driver)
        self.client = client
        self.root = Path(root)
        self.node_names = names
        self.cgroup_version = cgroup_version
        self.cgroup_driver = cgroup_driver
        self.interval = interval
        self.clock = clock
        self._pod_informer = informers.informer("Pod")
        self._node_informer = informers.informer("Node")
        self._own_recorder = recorder is None
        self.recorder = recorder if recorder is not None else EventRecorder(client, COMPONENT)
        self._wanted = frozenset(names)
        self._nodes: dict[str, _Node] = {}
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._synced = threading.Event()
        self._thread: threading.Thread | None = None
        self._registered = False
        self._reported: set[tuple] = set()

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Check every node directory (TreeError if one is not ours), then start the loop."""
        for name in self.node_names:
            NodeTree(self.root, name, Topology(), 0, cgroup_version=self.cgroup_version,
                     driver=self.cgroup_driver).check()
        if not self._registered:
            self._registered = True
            self._pod_informer.add_handler(self._on_pod, self._on_pod_update, self._on_pod_delete)
            self._node_informer.add_handler(self._on_node, lambda old, new: self._on_node(new), self._on_node)
        if self._own_recorder:
            self.recorder.start()
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="node-simulator", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> bool:
        """Stop the loop (the tree stays as it is); True if it ended within ``timeout``."""
        self._stop.set()
        self._wake.set()
        deadline = time.monotonic() + timeout
        if self._thread is not None:
            self._thread.join(timeout)
        if self._own_recorder:
            self.recorder.stop(max(0.0, deadline - time.monotonic()))
        return self._thread is None or not self._thread.is_alive()

    def has_synced(self) -> bool:
        """Every node's tree exists (the informers had synced)."""
        return self._synced.is_set()

    def wait_for_sync(self, timeout: float | None = None) -> bool:
        return self._synced.wait(timeout)

    def tree(self, node: str) -> NodeTree:
        """The tree of ``node`` (KeyError before it was created)."""
        with self._lock:
            return self._nodes[node].tree

    def _run(self) -> None:
        next_tick = time.monotonic()
        while not self._stop.is_set():
            wait = max(0.0, next_tick - time.monotonic())
            if not self._synced.is_set():
                wait = min(wait, 0.05)  # the trees appear as soon as the informers have synced
            self._wake.wait(wait)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                if time.monotonic() >= next_tick:
                    next_tick = max(next_tick + self.interval, time.monotonic())
                    self.tick()
                else:
                    self.sync()
            except Exception as err:  # a full disk or a bug must not end the simulation
                self._report_once(("loop", type(err).__name__, str(err)), logging.ERROR,
                                  "simulation round failed: %s", err, exc_info=True)

    # -- informer handlers: they only wake the loop ---------------------------------------------

    def _mine(self, pod: Any) -> bool:
        if isinstance(pod, DeletedFinalStateUnknown):
            pod = pod.obj
        return ((pod or {}).get("spec") or {}).get("nodeName") in self._wanted

    def _on_pod(self, pod: Obj) -> None:
        if self._mine(pod):
            self._wake.set()

    def _on_pod_update(self, old: Obj, new: Obj) -> None:
        if self._mine(old) or self._mine(new):
            self._wake.set()

    def _on_pod_delete(self, pod: Any) -> None:
        if self._mine(pod):
            self._wake.set()

    def _on_node(self, node: Any) -> None:
        if isinstance(node, DeletedFinalStateUnknown):
            node = node.obj
        if ((node or {}).get("metadata") or {}).get("name") in self._wanted:
            self._wake.set()

    # -- one round ----------------------------------------------------------------------------

    def tick(self) -> None:
        """Sync pods with the API, then advance every counter to ``clock()`` and rewrite the files."""
        with self._lock:
            self.sync()
            now = self.clock()
            for node in self._nodes.values():
                self._advance(node, now)

    def sync(self) -> None:
        """Create missing node trees; start, finish, delete and forget pods as the cache says."""
        with self._lock:
            if not (self._pod_informer.has_synced() and self._node_informer.has_synced()):
                return
            now = self.clock()
            for name in self.node_names:
                node = self._nodes.get(name)
                if node is None:
                    node = self._nodes[name] = self._create_node(name, now)
                self._refresh_system(node)
                self._sync_node(node, now)
            self._synced.set()

    # -- nodes --------------------------------------------------------------------------------

    def _create_node(self, name: str, now: float) -> _Node:
        obj = self._node_informer.store.get(name)
        capacity = ((obj or {}).get("status") or {}).get("capacity") or {}
        cpus, memory = DEFAULT_CPUS, DEFAULT_MEMORY
        try:
            if "cpu" in capacity:
                cpus = max(1, math.ceil(profiles.parse_amount(str(capacity["cpu"]), profiles.CPU) / 1000))
            if "memory" in capacity:
                memory = int(profiles.parse_amount(str(capacity["memory"]), profiles.MEMORY))
        except ValueError as err:
            log.warning("node %s: unusable capacity %s (%s); simulating %d CPUs and %d bytes",
                        name, capacity, err, cpus, memory)
        t = NodeTree(self.root, name, Topology.for_cpus(cpus), memory, cgroup_version=self.cgroup_version,
                     driver=self.cgroup_driver)
        t.create(boot_time=now)
        system, raw = SystemProfile(), None
        node = _Node(name, t, now, now, system, raw, idle=[0] * t.topology.cpus)
        node.qos = {q: _Counters(CgroupStats(cpus=t.all_cpus, mems=t.all_mems))
                    for q in (tree.BURSTABLE, tree.BEST_EFFORT)}
        node.root = _Counters(CgroupStats(cpus=t.all_cpus, mems=t.all_mems, cpu_shares=cpus * 1024))
        node.qos[tree.BEST_EFFORT].stats.cpu_shares = 2
        log.info("node %s: %d CPUs (%d sockets, %d NUMA nodes), %d MiB, cgroup v%d/%s under %s", name, cpus,
                 t.topology.sockets, t.topology.numa_nodes, memory >> 20, self.cgroup_version, self.cgroup_driver,
                 t.base)
        return node

    def _refresh_system(self, node: _Node) -> None:
        obj = self._node_informer.store.get(node.name)
        raw = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(profiles.ANNOTATION_SYSTEM_USAGE)
        if raw == node.system_raw:
            return
        node.system_raw = raw
        node.system, error = profiles.system_profile(obj)
        if error is not None:
            ref = {"kind": "Node", "apiVersion": "v1", "name": node.name,
                   "uid": ((obj or {}).get("metadata") or {}).get("uid")}
            self._invalid(("node", node.name, raw), ref, error)

    # -- pods ---------------------------------------------------------------------------------

    def _sync_node(self, node: _Node, now: float) -> None:
        current = {(p.get("metadata") or {}).get("uid"): p
                   for p in self._pod_informer.store.by_index("spec.nodeName", node.name)}
        for uid in [u for u in node.pods if u not in current]:
            self._remove(node, uid, "deleted")
        node.done &= current.keys()
        node.deleting &= current.keys()
        for uid, pod in current.items():
            if not uid or uid in node.done:
                continue
            md = pod.get("metadata") or {}
            phase = (pod.get("status") or {}).get("phase")
            if md.get("deletionTimestamp"):
                self._remove(node, uid, "terminating")
                if uid not in node.deleting:
                    self._delete_now(node, pod)
                continue
            if phase in ("Succeeded", "Failed"):
                self._remove(node, uid, phase.lower())
                node.done.add(uid)
                continue
            state = node.pods.get(uid)
            if state is None:
                state = self._start(node, pod, now)
            elif _sim_annotations(pod) != state.sim_annotations:
                self._reprofile(state, pod)
            if state.pending == "running":
                self._write_running(state, pod, now)
            if state.end is not None and now >= state.end:
                state.pending = "succeeded"
            if state.pending == "succeeded":
                if self._write_finished(state, pod, now):
                    self._remove(node, uid, "succeeded" if state.exit_code == 0 else "failed")
                    node.done.add(uid)

    def _profile(self, pod: Obj, uid: str) -> PodProfile:
        profile = profiles.pod_profile(pod)
        ref = {"kind": "Pod", "apiVersion": "v1", "namespace": pod["metadata"].get("namespace"),
               "name": pod["metadata"].get("name"), "uid": uid}
        for error in profile.errors:
            self._invalid(("pod", uid, error.annotation, error.value), ref, error)
        return profile

    def _invalid(self, key: tuple, ref: Obj, error: ProfileError) -> None:
        """Log and record a Warning event once per object and bad value."""
        if key in self._reported:
            return
        self._remember(key)
        log.warning("%s %s: %s", ref["kind"], "/".join(p for p in (ref.get("namespace"), ref["name"]) if p), error)
        try:
            self.recorder.event(ref, WARNING, profiles.REASON_INVALID, str(error))
        except (TypeError, ValueError) as err:
            log.warning("cannot record event for %s: %s", ref.get("name"), err)

    def _start(self, node: _Node, pod: Obj, now: float) -> _Pod:
        md, status = pod["metadata"], pod.get("status") or {}
        uid = md["uid"]
        profile = self._profile(pod, uid)
        model = UsageModel.for_pod(pod, profile)
        kube_qos = kube_qos_class(pod)
        rel = tree.pod_dir(self.cgroup_driver, kube_qos, uid)
        t = node.tree
        containers = []
        for shape in model.shapes:
            cid = container_id(uid, shape.name)
            stats = CgroupStats(cpu_quota_us=_quota(shape.cpu_limit), cpu_shares=tree.milli_cpu_to_shares(shape.cpu_request),
                                memory_limit=None if shape.memory_limit is None else int(shape.memory_limit),
                                cpus=t.all_cpus, mems=t.all_mems, leaf=True)
            containers.append(_Container(shape.name, cid, tree.container_dir(self.cgroup_driver, kube_qos, uid, cid),
                                         _Counters(stats)))
        shapes = model.shapes
        all_cpu_limits = bool(shapes) and all(s.cpu_limit is not None for s in shapes)
        all_mem_limits = bool(shapes) and all(s.memory_limit is not None for s in shapes)
        pod_stats = CgroupStats(
            cpu_quota_us=_quota(sum(s.cpu_limit or 0 for s in shapes)) if all_cpu_limits else None,
            cpu_shares=tree.milli_cpu_to_shares(sum(s.cpu_request for s in shapes)),
            memory_limit=int(sum(s.memory_limit or 0 for s in shapes)) if all_mem_limits else None,
            cpus=t.all_cpus, mems=t.all_mems)
        adopted = status.get("phase") == "Running" and status.get("startTime")
        started_at = (parse_timestamp(status.get("startTime")) or now) if adopted else now
        state = _Pod(uid, md.get("namespace", ""), md.get("name", ""), kube_qos, rel, model, _sim_annotations(pod),
                     _Counters(pod_stats), containers, started_at, now,
                     None if profile.duration is None else started_at + profile.duration,
                     pending=None if adopted else "running", exit_code=profile.exit_code)
        self._set_memory(state, now)
        t.add_cgroups(rel, [(rel, state.counters.stats), *((c.rel_dir, c.counters.stats) for c in containers)])
        node.pods[uid] = state
        self._update_qos_shares(node)
        log.debug("pod %s/%s started on %s (%s, %s)", state.namespace, state.name, node.name, kube_qos,
                  "adopted" if adopted else "new")
        return state

    def _reprofile(self, state: _Pod, pod: Obj) -> None:
        profile = self._profile(pod, state.uid)
        state.model = UsageModel(state.model.shapes, profile)
        state.sim_annotations = _sim_annotations(pod)
        state.end = None if profile.duration is None else state.started_at + profile.duration
        state.exit_code = profile.exit_code

    def _remove(self, node: _Node, uid: str, why: str) -> None:
        state = node.pods.pop(uid, None)
        if state is None:
            return
        node.tree.remove_cgroup(state.rel_dir)
        self._update_qos_shares(node)
        self._forget(uid)
        log.debug("pod %s/%s on %s: %s, cgroups removed", state.namespace, state.name, node.name, why)

    def _update_qos_shares(self, node: _Node) -> None:
        """The kubelet sets the Burstable QoS dir's shares to the sum of its pods' CPU requests."""
        total = sum(s.cpu_request for p in node.pods.values() if p.kube_qos == tree.BURSTABLE for s in p.model.shapes)
        node.qos[tree.BURSTABLE].stats.cpu_shares = tree.milli_cpu_to_shares(total)

    # -- API writes -------------------------------------------------------------------------------

    def _patch_status(self, state: _Pod, status: Obj, what: str) -> bool:
        try:
            self.client.patch("Pod", state.name, {"status": status}, namespace=state.namespace, subresource="status")
            return True
        except NotFound:
            return True  # gone: the next sync forgets it
        except ApiError as err:
            self._report_once(("status", state.uid, what, type(err).__name__), logging.WARNING,
                              "pod %s/%s: cannot write status %s (will retry): %s", state.namespace, state.name,
                              what, err)
            return False

    def _write_running(self, state: _Pod, pod: Obj, now: float) -> None:
        ts = timestamp(state.started_at)
        spec = pod.get("spec") or {}
        scheduled = next((c for c in (pod.get("status") or {}).get("conditions") or []
                          if c.get("type") == "PodScheduled"), None)

        def condition(kind: str) -> Obj:
            return {"type": kind, "status": "True", "lastTransitionTime": ts}

        images = {c.get("name"): c.get("image", "") for c in spec.get("containers") or []}
        status = {
            "phase": "Running",
            "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), condition("Ready"),
                           condition("ContainersReady"),
                           {"type": "PodScheduled", "status": "True",
                            "lastTransitionTime": (scheduled or {}).get("lastTransitionTime") or ts}],
            "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}],
            "podIP": pod_ip(state.uid), "podIPs": [{"ip": pod_ip(state.uid)}],
            "startTime": ts,
            "qosClass": state.kube_qos,
            "containerStatuses": [_container_status(c.name, c.id, images.get(c.name, ""), {"running": {"startedAt": ts}},
                                                    ready=True) for c in state.containers],
        }
        init = [_container_status(c.get("name", ""), container_id(state.uid, c.get("name", "")), c.get("image", ""),
                                  {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts,
                                                  "finishedAt": ts,
                                                  "containerID": container_id(state.uid, c.get("name", ""))}},
                                  ready=True, started=False)
                for c in spec.get("initContainers") or []]
        if init:
            status["initContainerStatuses"] = init
        if self._patch_status(state, status, "Running"):
            state.pending = None

    def _write_finished(self, state: _Pod, pod: Obj, now: float) -> bool:
        """The containers exited with the profile's exit code: Succeeded with 0, else Failed."""
        started, finished = timestamp(state.started_at), timestamp(state.end if state.end is not None else now)
        images = {c.get("name"): c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []}
        ok = state.exit_code == 0
        phase = "Succeeded" if ok else "Failed"

        def condition(kind: str, value: str) -> Obj:
            c = {"type": kind, "status": value, "lastTransitionTime": finished}
            if value == "False":
                c["reason"] = "PodCompleted" if ok else "PodFailed"
            elif kind == "Initialized" and ok:
                c["reason"] = "PodCompleted"  # the kubelet says so only when everything succeeded
            return c

        status = {
            "phase": phase,
            "conditions": [condition("PodReadyToStartContainers", "False"), condition("Initialized", "True"),
                           condition("Ready", "False"), condition("ContainersReady", "False"),
                           {"type": "PodScheduled", "status": "True", "lastTransitionTime": started}],
            "containerStatuses": [
                _container_status(c.name, c.id, images.get(c.name, ""),
                                  {"terminated": {"exitCode": state.exit_code, "reason": "Completed" if ok else "Error",
                                                  "startedAt": started, "finishedAt": finished, "containerID": c.id}},
                                  ready=False, started=False)
                for c in state.containers],
        }
        return self._patch_status(state, status, phase)

    def _delete_now(self, node: _Node, pod: Obj) -> None:
        md = pod["metadata"]
        try:
            self.client.delete("Pod", md["name"], md.get("namespace"), grace_period_seconds=0,
                               preconditions={"uid": md["uid"]})
            node.deleting.add(md["uid"])
        except (NotFound, Conflict):
            node.deleting.add(md["uid"])  # gone, or another pod of that name by now
        except ApiError as err:
            self._report_once(("delete", md["uid"], type(err).__name__), logging.WARNING,
                              "pod %s/%s: cannot delete the terminating pod (will retry): %s",
                              md.get("namespace"), md.get("name"), err)

    # -- counters ---------------------------------------------------------------------------------

    def _set_memory(self, state: _Pod, now: float) -> None:
        t = max(0.0, (min(now, state.end) if state.end is not None else now) - state.started_at)
        anon_total = file_total = 0
        for c, (memory, cache) in zip(state.containers, state.model.memory(t)):
            c.counters.stats.anon, c.counters.stats.file = _pages(memory), _pages(cache)
            anon_total += c.counters.stats.anon
            file_total += c.counters.stats.file
        state.counters.stats.anon, state.counters.stats.file = anon_total, file_total

    def _advance(self, node: _Node, now: float) -> None:
        dt_ns = round((now - node.last) * 1e9)
        if dt_ns < 0:
            self._report_once(("clock", node.name), logging.WARNING, "node %s: the clock went back %.3fs; "
                              "counters wait for it", node.name, (node.last - now))
            return
        t = node.tree
        pods_ns = 0
        for state in node.pods.values():
            stop = now if state.end is None else min(now, state.end)
            if stop > state.accounted_to:
                pod_dt_ns = round((stop - state.accounted_to) * 1e9)
                mid = (stop + state.accounted_to) / 2 - state.started_at
                demand_sum = usage_sum = 0.0
                pod_ns = 0
                for c, (demand, usage) in zip(state.containers, state.model.cpu(mid)):
                    ns = round(usage * pod_dt_ns / 1000)
                    c.counters.add_cpu(ns)
                    c.counters.add_periods(pod_dt_ns, demand, usage)
                    demand_sum += demand
                    usage_sum += usage
                    pod_ns += ns
                state.counters.add_cpu(pod_ns)
                state.counters.add_periods(pod_dt_ns, demand_sum, usage_sum)
                node.root.add_cpu(pod_ns)
                if state.kube_qos in node.qos:
                    node.qos[state.kube_qos].add_cpu(pod_ns)
                pods_ns += pod_ns
                state.accounted_to = stop
            self._set_memory(state, now)
        since_boot = now - node.started_at
        if dt_ns > 0:
            system_ns = round(max(0.0, node.system.cpu((now + node.last) / 2 - node.started_at)) * dt_ns / 1000)
            cpus = t.topology.cpus
            busy = min(pods_ns + system_ns, cpus * dt_ns)
            if busy < pods_ns + system_ns:
                self._report_once(("overcommit", node.name), logging.WARNING,
                                  "node %s: pods and system want more than its %d CPUs; /proc/stat shows them full",
                                  node.name, cpus)
            user = busy * USER_SHARE[0] // USER_SHARE[1]
            old = [_share(node.user_ns, i, cpus) + _share(node.system_ns, i, cpus) for i in range(cpus)]
            node.user_ns += user
            node.system_ns += busy - user
            for i in range(cpus):
                now_busy = _share(node.user_ns, i, cpus) + _share(node.system_ns, i, cpus)
                node.idle[i] += max(0, dt_ns - (now_busy - old[i]))
            node.last = now
        self._write(node, since_boot)

    def _write(self, node: _Node, since_boot: float) -> None:
        t = node.tree
        cpus = t.topology.cpus
        per_cpu = [CpuTimes(user=_share(node.user_ns, i, cpus), system=_share(node.system_ns, i, cpus), idle=node.idle[i])
                   for i in range(cpus)]
        pods_anon = sum(p.counters.stats.anon for p in node.pods.values())
        pods_file = sum(p.counters.stats.file for p in node.pods.values())
        used = _pages(node.system.memory(since_boot)) + pods_anon
        cache = _pages(node.system.page_cache(since_boot)) + pods_file
        numa = t.topology.numa_nodes
        numa_mem = [Memory(total, u, c) for total, u, c in zip(t.numa_totals, tree.split_even(used, numa, 1024),
                                                               tree.split_even(cache, numa, 1024))]
        t.write_proc(per_cpu, Memory(t.mem_total, used, cache), numa_mem,
                     processes=1000 + 3 * len(node.pods), running=1 + len(node.pods))
        for qos, counters in node.qos.items():
            members = [p for p in node.pods.values() if p.kube_qos == qos]
            counters.stats.anon = sum(p.counters.stats.anon for p in members)
            counters.stats.file = sum(p.counters.stats.file for p in members)
        node.root.stats.anon, node.root.stats.file = pods_anon, pods_file
        t.write_cgroup(tree.kubepods_dir(self.cgroup_driver), node.root.stats)
        for qos, counters in node.qos.items():
            t.write_cgroup(tree.qos_dir(self.cgroup_driver, qos), counters.stats)
        for state in node.pods.values():
            t.write_cgroup(state.rel_dir, state.counters.stats)
            for c in state.containers:
                t.write_cgroup(c.rel_dir, c.counters.stats)

    # -- reporting ----------------------------------------------------------------------------

    def _remember(self, key: tuple) -> None:
        if len(self._reported) > 10_000:  # bounded: forget, at worst a repeated warning
            self._reported.clear()
        self._reported.add(key)

    def _forget(self, uid: str) -> None:
        self._reported = {k for k in self._reported if uid not in k}

    def _report_once(self, key: tuple, level: int, fmt: str, *args: Any, exc_info: bool = False) -> None:
        if key in self._reported:
            log.debug(fmt, *args)
            return
        self._remember(key)
        log.log(level, fmt, *args, exc_info=exc_info)


def _container_status(name: str, cid: str, image: str, state: Obj, *, ready: bool, started: bool = True) -> Obj:
    digest = hashlib.sha256(image.encode()).hexdigest()
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return {"name": name, "state": state, "lastState": {}, "ready": ready, "restartCount": 0, "image": image,
            "imageID": f"{repo}@sha256:{digest}", "containerID": cid, "started": started}
