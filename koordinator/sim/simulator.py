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
  node's system usage (:mod:`koordinator.sim.profiles`);
* with ``gpus_per_node`` (or the Node annotation ``sim.koordinator.sh/gpus``) gives the node fake NVIDIA
  GPUs: files in its tree, its ``Device``, GPU labels and ``nvidia.com/gpu`` (:mod:`koordinator.sim.gpus`);
* with ``hook_config_dir`` calls the node's registered runtime hook servers before it creates a pod's
  cgroups, as koord-runtime-proxy would, and applies their answers (:mod:`koordinator.sim.hooks`).

Pod events only wake the simulator: it works level-triggered from the informer cache, so a
missed or repeated event changes nothing. API writes that fail are retried at the next sync.

Accounting: pods' CPU counts 80 % user and 20 % system time (cgroup ``user_usec``/``system_usec``
and the ``/proc/stat`` user/system columns). In ``/proc/stat`` each container's CPU time lies evenly on
the CPUs of its effective cpuset and the node's system usage evenly on all CPUs, except that the part
of the system's that does not fit on a CPU the pods keep full goes to the CPUs with room (system
processes are in no pod's cpuset): ``/proc/stat`` shows exactly the pods plus the system while they fit
the node. No CPU is ever busier than the time that passed (a warning, once, when the pods and the
system want more than that). Memory figures are whole 4 KiB pages. A pod accrues CPU
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
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi
from koordinator.runtime.errors import AlreadyExists, ApiError, Conflict, NotFound
from koordinator.runtime.events import WARNING, EventRecorder
from koordinator.runtime.informer import DeletedFinalStateUnknown
from koordinator.sim import gpus, limits, profiles, tree
from koordinator.sim.hooks import Applied, HookCaller, format_environ
from koordinator.sim.limits import LimitReader
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
OOM_EXIT_CODE = 137  # SIGKILL, as the runtime reports an OOM-killed container
BACKOFF_S, MAX_BACKOFF_S = 10.0, 300.0  # the kubelet's crash-loop back-off
#: Node annotation: how many simulated GPUs the node has (overrides ``gpus_per_node``).
ANNOTATION_GPUS = profiles.PREFIX + "gpus"
DEVICE_RECHECK_S = 60.0  # how often a GPU node's Device is read back (someone may have changed or deleted it)


def container_id(pod_uid: str, container: str, runtime: str = "containerd", restarts: int = 0) -> str:
    """``containerd://<64 hex>``, the same for the same pod UID, container name and restart count
    (a restarted container is a new container, with a new ID and cgroup)."""
    key = f"{pod_uid}/{container}" if restarts == 0 else f"{pod_uid}/{container}/{restarts}"
    return f"{runtime}://" + hashlib.sha256(key.encode()).hexdigest()


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

    def add_periods(self, dt_ns: int, demand: float, usage: float, limited: bool) -> None:
        """CFS periods while the cgroup (``limited``: it has a quota in force) wanted CPU; the share
        it did not get is the share of periods throttled."""
        if not limited or demand <= 0 or dt_ns <= 0:
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
    index: int = 0  # its place in the pod's UsageModel shapes
    started_at: float = 0.0  # this incarnation's start (a restart begins its usage afresh)
    state: str = "running"  # running | waiting (crash-loop back-off) | terminated (not restarted)
    restarts: int = 0
    restart_at: float = 0.0
    last_terminated: Obj | None = None  # status lastState.terminated
    terminated: Obj | None = None  # status state.terminated, when it stays dead
    spec_envs: dict[str, str] = field(default_factory=dict)  # the spec's literal env (hook requests)


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
    restart_policy: str = "Always"
    sandbox: Any = None  # the PodSandboxHookRequest after the hooks (None: the node has no hook servers)


@dataclass
class _Node:
    name: str
    tree: NodeTree
    started_at: float
    last: float
    system: SystemProfile
    system_raw: Any
    idle: list[int] = field(default_factory=list)
    pods: dict[str, _Pod] = field(default_factory=dict)
    done: set[str] = field(default_factory=set)  # UIDs finished or terminal: left alone
    deleting: set[str] = field(default_factory=set)
    root: _Counters = field(default_factory=lambda: _Counters(CgroupStats()))
    qos: dict[str, _Counters] = field(default_factory=dict)
    limits: LimitReader | None = None
    busy: list[int] = field(default_factory=list)  # per-CPU busy ns (pods and system)
    turn: int = 0  # rotates where per-CPU remainders land
    sorted_sets: dict[frozenset, tuple[list[int], str]] = field(default_factory=dict)
    hooks: HookCaller | None = None  # the node's registered hook servers (None: no registration directory)
    gpu_files: int | None = None  # GPUs whose files are written
    gpu_device: int | None = None  # GPUs the Device object lists (as last written or read back)
    gpu_checked: float = 0.0  # when the Device was last written or read back (monotonic)
    gpu_raw: Any = None  # the Node's GPU annotation last parsed
    gpu_count: int = 0


def _sim_annotations(pod: Obj) -> tuple:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    return tuple(sorted((k, v) for k, v in annotations.items() if k.startswith(profiles.PREFIX)))


class NodeSimulator:
    """Simulates the nodes ``nodes`` under ``root`` (see the module docstring).

    A Component: :meth:`start` registers the informer handlers and starts the loop thread
    (a sync whenever a pod of these nodes changes, a full :meth:`tick` every ``interval`` seconds);
    :meth:`stop` joins it. The informers themselves belong to ``informers`` (start them too).
    ``clock`` (unix seconds) drives every figure, so tests that inject one and call :meth:`tick`
    get exact numbers. ``gpus_per_node`` (0-16) simulated GPUs per node; ``hook_config_dir`` the
    hook-server registration directory of each node, ``{node}`` standing for its name (None: no hooks).
    """

    def __init__(self, client: Any, informers: Any, root: str | Path, nodes: Iterable[str], *,
                 cgroup_version: int = 2, cgroup_driver: str = tree.SYSTEMD, interval: float = 1.0,
                 clock: Callable[[], float] = time.time, recorder: Any = None, gpus_per_node: int = 0,
                 hook_config_dir: str | None = None) -> None:
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
        if not 0 <= gpus_per_node <= gpus.MAX_GPUS:
            raise ValueError(f"GPUs per node {gpus_per_node}: must be 0-{gpus.MAX_GPUS}")
        if hook_config_dir is not None and len(names) > 1 and "{node}" not in hook_config_dir:
            raise ValueError(f"hook server config dir {hook_config_dir!r}: must contain {{node}} (one directory "
                             "per simulated node)")
        for name in names:  # fails early on a name that cannot be a directory
            NodeTree(root, name, Topology(), 0, cgroup_version=cgroup_version, driver=cgroup_driver)
        self.client = client
        self.root = Path(root)
        self.node_names = names
        self.cgroup_version = cgroup_version
        self.cgroup_driver = cgroup_driver
        self.interval = interval
        self.clock = clock
        self.gpus_per_node = gpus_per_node
        self.hook_config_dir = hook_config_dir
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
        stopped = self._thread is None or not self._thread.is_alive()
        if stopped:
            with self._lock:
                for node in self._nodes.values():
                    if node.hooks is not None:
                        node.hooks.close()
        return stopped

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
                self._flush(node, now)

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
                self._sync_gpus(node)
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
        node = _Node(name, t, now, now, system, raw, idle=[0] * t.topology.cpus, busy=[0] * t.topology.cpus,
                     limits=LimitReader(t))
        node.qos = {q: _Counters(CgroupStats(cpus=t.all_cpus, mems=t.all_mems, percpu=self._percpu(t)))
                    for q in (tree.BURSTABLE, tree.BEST_EFFORT)}
        node.root = _Counters(CgroupStats(cpus=t.all_cpus, mems=t.all_mems, cpu_shares=cpus * 1024,
                                          percpu=self._percpu(t)))
        node.qos[tree.BEST_EFFORT].stats.cpu_shares = 2
        if self.hook_config_dir is not None:
            node.hooks = HookCaller(self.hook_config_dir.replace("{node}", name))
        log.info("node %s: %d CPUs (%d sockets, %d NUMA nodes), %d MiB, cgroup v%d/%s under %s", name, cpus,
                 t.topology.sockets, t.topology.numa_nodes, memory >> 20, self.cgroup_version, self.cgroup_driver,
                 t.base)
        return node

    def _percpu(self, t: NodeTree) -> list[int] | None:
        """A per-CPU usage list where the tree shows one (v1 ``cpuacct.usage_percpu``)."""
        return [0] * t.topology.cpus if self.cgroup_version == 1 else None

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

    # -- GPUs (the device daemon and the NVIDIA device plugin's part) ----------------------------

    def _gpu_count(self, node: _Node, obj: Obj | None) -> int:
        """The node's GPU count: its ``sim.koordinator.sh/gpus`` annotation, else ``gpus_per_node``; a bad
        annotation gives the default and a Warning event naming it."""
        raw = (((obj or {}).get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_GPUS)
        if raw == node.gpu_raw and node.gpu_files is not None:
            return node.gpu_count
        node.gpu_raw, count = raw, self.gpus_per_node
        if raw is not None:
            text = str(raw).strip()
            if text.isdigit() and int(text) <= gpus.MAX_GPUS:
                count = int(text)
            else:
                ref = {"kind": "Node", "apiVersion": "v1", "name": node.name,
                       "uid": ((obj or {}).get("metadata") or {}).get("uid")}
                self._invalid(("node", node.name, ANNOTATION_GPUS, raw), ref,
                              ProfileError(ANNOTATION_GPUS, str(raw), f"want a GPU count 0-{gpus.MAX_GPUS}; "
                                                                     f"simulating {count}"))
        node.gpu_count = count
        return count

    def _sync_gpus(self, node: _Node) -> None:
        """The node's GPU files, its Device, its GPU labels and ``nvidia.com/gpu`` as its GPU count says."""
        obj = self._node_informer.store.get(node.name)
        count = self._gpu_count(node, obj)
        if node.gpu_files != count:
            gpus.write_files(node.tree, gpus.simulated_gpus(node.name, count, node.tree.topology.numa_nodes))
            node.gpu_files = count
            log.info("node %s: %d simulated GPU(s)", node.name, count)
        if obj is None:
            return  # no Node (yet): nothing to label or own the Device
        labels = (obj.get("metadata") or {}).get("labels") or {}
        changed = {k: v for k, v in gpus.node_labels(count).items() if labels.get(k) != v}
        try:
            if changed:
                self.client.patch("Node", node.name, {"metadata": {"labels": changed}})
            status = gpus.node_status_patch(obj, count)
            if status is not None:
                self.client.patch("Node", node.name, {"status": status}, subresource="status")
        except ApiError as err:
            self._report_once(("gpu-node", node.name, type(err).__name__), logging.WARNING,
                              "node %s: cannot write its GPU labels or nvidia.com/gpu (will retry): %s", node.name,
                              err)
        if node.gpu_device == count and (count == 0 or time.monotonic() - node.gpu_checked < DEVICE_RECHECK_S):
            return  # without GPUs, checked once (a Device of ours left from a run with GPUs is deleted)
        try:
            if not self._write_device(node, obj, gpus.simulated_gpus(node.name, count,
                                                                     node.tree.topology.numa_nodes)):
                return
        except ApiError as err:
            self._report_once(("gpu-device", node.name, type(err).__name__), logging.WARNING,
                              "node %s: cannot write its Device (will retry): %s", node.name, err)
            return
        node.gpu_device, node.gpu_checked = count, time.monotonic()

    def _write_device(self, node: _Node, obj: Obj, devices: list[gpus.SimGPU]) -> bool:
        """Create, update or (no GPUs left) delete the node's Device; one written by someone else (a
        koordlet that found real GPUs) is left alone. True when the Device is as wanted (or not ours)."""
        try:
            current = self.client.get("Device", node.name)
        except NotFound:
            current = None
        if current is not None and not gpus.is_ours(current):
            self._report_once(("gpu-foreign", node.name), logging.WARNING,
                              "node %s: its Device was not written by the simulator; left alone", node.name)
            return True
        if not devices:
            if current is not None:
                try:
                    self.client.delete("Device", node.name)
                except NotFound:
                    pass
            return True
        desired = gpus.device_object(obj, devices)
        if current is None:
            try:
                self.client.create(desired)
            except AlreadyExists:
                return False  # created meanwhile: read it back at the next sync
            return True
        if (current.get("spec") == desired["spec"]
                and all(((current.get("metadata") or {}).get("labels") or {}).get(k) == v
                        for k, v in desired["metadata"]["labels"].items())):
            return True
        updated = dict(current)
        updated["spec"] = desired["spec"]
        updated["metadata"] = {**current["metadata"],
                               "labels": {**(current["metadata"].get("labels") or {}),
                                          **desired["metadata"]["labels"]}}
        self.client.update(updated)
        return True

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
            self._settle(node, state, pod, now)

    def _settle(self, node: _Node, state: _Pod, pod: Obj, now: float) -> None:
        """Write the status the pod is due (Running, or finished), and forget it once finished."""
        if state.pending == "running":
            self._write_running(state, pod, now)
        if state.end is not None and now >= state.end:
            state.pending = "succeeded"
        if state.pending == "succeeded":
            if self._write_finished(state, pod, now):
                self._remove(node, state.uid, "succeeded" if state.exit_code == 0 else "failed")
                node.done.add(state.uid)

    def _flush(self, node: _Node, now: float) -> None:
        """Status writes the tick made due (an OOM kill, a restart) go out in the same tick."""
        for state in [p for p in node.pods.values() if p.pending is not None]:
            pod = self._pod_informer.store.get(f"{state.namespace}/{state.name}")
            if pod is not None and (pod.get("metadata") or {}).get("uid") == state.uid:
                self._settle(node, state, pod, now)

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
        adopted = status.get("phase") == "Running" and status.get("startTime")
        started_at = (parse_timestamp(status.get("startTime")) or now) if adopted else now
        containers = []
        envs = _spec_envs(pod)
        for i, shape in enumerate(model.shapes):
            cid = container_id(uid, shape.name)
            containers.append(_Container(shape.name, cid, tree.container_dir(self.cgroup_driver, kube_qos, uid, cid),
                                         _Counters(self._container_stats(t, shape)), index=i, started_at=started_at,
                                         spec_envs=envs.get(shape.name, {})))
        shapes = model.shapes
        all_cpu_limits = bool(shapes) and all(s.cpu_limit is not None for s in shapes)
        all_mem_limits = bool(shapes) and all(s.memory_limit is not None for s in shapes)
        pod_stats = CgroupStats(
            cpu_quota_us=_quota(sum(s.cpu_limit or 0 for s in shapes)) if all_cpu_limits else None,
            cpu_shares=tree.milli_cpu_to_shares(sum(s.cpu_request for s in shapes)),
            memory_limit=int(sum(s.memory_limit or 0 for s in shapes)) if all_mem_limits else None,
            cpus=t.all_cpus, mems=t.all_mems, percpu=self._percpu(t))
        state = _Pod(uid, md.get("namespace", ""), md.get("name", ""), kube_qos, rel, model, _sim_annotations(pod),
                     _Counters(pod_stats), containers, started_at, now,
                     None if profile.duration is None else started_at + profile.duration,
                     pending=None if adopted else "running", exit_code=profile.exit_code,
                     restart_policy=str((pod.get("spec") or {}).get("restartPolicy") or "Always"))
        if node.hooks is not None:
            self._run_pod_hooks(node, state, pod)
        self._set_memory(node, state, now, enforce=False)  # its limit files do not exist yet
        t.add_cgroups(rel, [(rel, state.counters.stats), *((c.rel_dir, c.counters.stats) for c in containers)])
        node.pods[uid] = state
        self._update_qos_shares(node)
        log.debug("pod %s/%s started on %s (%s, %s)", state.namespace, state.name, node.name, kube_qos,
                  "adopted" if adopted else "new")
        return state

    # -- runtime hooks (what koord-runtime-proxy would ask the node's hook servers) ----------------

    def _cgroup_parent(self, state: _Pod) -> str:
        """The pod's cgroup parent as the kubelet hands it to the runtime: the slice name (systemd) or the
        absolute path (cgroupfs)."""
        if self.cgroup_driver == tree.SYSTEMD:
            return state.rel_dir.rsplit("/", 1)[-1]
        return "/" + state.rel_dir

    def _run_pod_hooks(self, node: _Node, state: _Pod, pod: Obj) -> None:
        """``PreRunPodSandbox`` then each container's ``PreCreateContainer``: the answers go into the
        cgroup stats the pod is about to be created with, and the environments into its environ files."""
        md = pod.get("metadata") or {}
        request = hookapi.PodSandboxHookRequest(
            pod_meta=hookapi.PodSandboxMetadata(name=state.name, namespace=state.namespace, uid=state.uid),
            runtime_handler="", labels=dict(md.get("labels") or {}), annotations=dict(md.get("annotations") or {}),
            cgroup_parent=self._cgroup_parent(state), resources=_hook_resources(state.counters.stats))
        applied = node.hooks.pre_run_pod_sandbox(request, f"pod {state.namespace}/{state.name}")
        _apply_resources(state.counters.stats, applied)
        state.sandbox = request
        for c in state.containers:
            self._create_container_hook(node, state, c)

    def _create_container_hook(self, node: _Node, state: _Pod, c: _Container) -> None:
        sandbox = state.sandbox
        request = hookapi.ContainerResourceHookRequest(
            pod_meta=sandbox.pod_meta, container_mata=hookapi.ContainerMetadata(name=c.name, attempt=c.restarts),
            container_resources=_hook_resources(c.counters.stats), pod_resources=sandbox.resources,
            pod_annotations=sandbox.annotations, pod_labels=sandbox.labels, pod_cgroup_parent=sandbox.cgroup_parent,
            container_envs=c.spec_envs)
        applied = node.hooks.pre_create_container(request, f"container {state.namespace}/{state.name}/{c.name}")
        _apply_resources(c.counters.stats, applied)
        path = self._environ_path(node, c)
        path.parent.mkdir(parents=True, exist_ok=True)
        tree.atomic_write_bytes(path, format_environ(applied.envs))

    @staticmethod
    def _environ_path(node: _Node, c: _Container) -> Path:
        """``<node tree>/containers/<container id without runtime>/environ``."""
        return node.tree.base / tree.CONTAINERS / c.id.partition("://")[2] / "environ"

    def _container_stats(self, t: NodeTree, shape: profiles.ContainerShape) -> CgroupStats:
        """A new container's cgroup as the kubelet creates it, with the spec's limits."""
        return CgroupStats(cpu_quota_us=_quota(shape.cpu_limit), cpu_shares=tree.milli_cpu_to_shares(shape.cpu_request),
                           memory_limit=None if shape.memory_limit is None else int(shape.memory_limit),
                           cpus=t.all_cpus, mems=t.all_mems, leaf=True, percpu=self._percpu(t))

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
        for c in state.containers:
            node.tree.remove_path(self._environ_path(node, c).parent)
        if node.limits is not None:
            node.limits.forget(state.rel_dir)
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
        ready = all(c.state == "running" for c in state.containers)

        def readiness(kind: str) -> Obj:
            if ready:
                return condition(kind)
            return {"type": kind, "status": "False", "lastTransitionTime": timestamp(now), "reason": "ContainersNotReady"}

        status = {
            "phase": "Running",
            "conditions": [condition("PodReadyToStartContainers"), condition("Initialized"), readiness("Ready"),
                           readiness("ContainersReady"),
                           {"type": "PodScheduled", "status": "True",
                            "lastTransitionTime": (scheduled or {}).get("lastTransitionTime") or ts}],
            "hostIP": HOST_IP, "hostIPs": [{"ip": HOST_IP}],
            "podIP": pod_ip(state.uid), "podIPs": [{"ip": pod_ip(state.uid)}],
            "startTime": ts,
            "qosClass": state.kube_qos,
            "containerStatuses": [self._live_status(state, c, images.get(c.name, "")) for c in state.containers],
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

    @staticmethod
    def _live_status(state: _Pod, c: _Container, image: str) -> Obj:
        """A container's status while its pod runs: running, in crash-loop back-off, or dead."""
        if c.state == "running":
            current: Obj = {"running": {"startedAt": timestamp(c.started_at)}}
        elif c.state == "waiting":
            current = {"waiting": {"reason": "CrashLoopBackOff",
                                   "message": f"back-off restarting failed container {c.name} in pod "
                                              f"{state.name}_{state.namespace}({state.uid})"}}
        else:
            current = {"terminated": c.terminated or {}}
        running = c.state == "running"
        return _container_status(c.name, c.id, image, current, ready=running, started=running,
                                 restarts=c.restarts, last={"terminated": c.last_terminated} if c.last_terminated else {})

    def _write_finished(self, state: _Pod, pod: Obj, now: float) -> bool:
        """The containers exited with the profile's exit code: Succeeded with 0, else Failed."""
        started, finished = timestamp(state.started_at), timestamp(state.end if state.end is not None else now)
        images = {c.get("name"): c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []}
        ok = state.exit_code == 0 and not any(c.terminated for c in state.containers)
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
                                  {"terminated": c.terminated or {
                                      "exitCode": state.exit_code, "reason": "Completed" if state.exit_code == 0 else "Error",
                                      "startedAt": timestamp(c.started_at), "finishedAt": finished, "containerID": c.id}},
                                  ready=False, started=False, restarts=c.restarts,
                                  last={"terminated": c.last_terminated} if c.last_terminated else {})
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

    def _memory_now(self, state: _Pod, c: _Container, now: float, pod_figures: list) -> tuple[float, float]:
        """(memory, page cache) the container wants now; a restarted one starts its profile afresh."""
        if c.started_at == state.started_at:
            return pod_figures[c.index]
        stop = min(now, state.end) if state.end is not None else now
        return state.model.memory_demand(max(0.0, stop - c.started_at))[c.index]

    def _set_memory(self, node: _Node, state: _Pod, now: float, enforce: bool = True) -> None:
        """Each running container's memory as its profile wants it; above the memory limit in force
        (the container's, else the pod's) the container is OOM-killed. Page cache is reclaimed to fit."""
        t = max(0.0, (min(now, state.end) if state.end is not None else now) - state.started_at)
        if not enforce:  # before the cgroups exist: the spec's limits, as the kubelet will write them
            for c, (memory, cache) in zip(state.containers, state.model.memory(t)):
                c.counters.stats.anon, c.counters.stats.file = _pages(memory), _pages(cache)
        else:
            figures = state.model.memory_demand(t)
            for c in state.containers:
                s = c.counters.stats
                if c.state != "running":
                    s.anon = s.file = 0
                    continue
                memory, cache = self._memory_now(state, c, now, figures)
                limit = node.limits.memory(c.rel_dir)
                if limit is not None and memory > limit:
                    self._oom(node, state, c, now, c.counters)
                    continue
                if limit is not None:
                    cache = min(cache, limit - memory)
                s.anon, s.file = _pages(memory), _pages(cache)
            self._enforce_scope(node, [state], node.limits.memory(state.rel_dir), state.counters, now)
        state.counters.stats.anon = sum(c.counters.stats.anon for c in state.containers)
        state.counters.stats.file = sum(c.counters.stats.file for c in state.containers)

    def _enforce_scope(self, node: _Node, pods: list[_Pod], limit: int | None, level: _Counters, now: float) -> None:
        """A cgroup above containers (pod, QoS class) over its memory ``limit``: reclaim page cache,
        then OOM-kill the biggest container until the rest fits, as the kernel's memcg OOM does."""
        if limit is None:
            return
        members = [(p, c) for p in pods for c in p.containers if c.state == "running"]
        anon = sum(c.counters.stats.anon for _, c in members)
        while anon > limit and members:
            p, victim = max(members, key=lambda pc: pc[1].counters.stats.anon)
            anon -= victim.counters.stats.anon
            members.remove((p, victim))
            self._oom(node, p, victim, now, level)
            p.counters.stats.anon = sum(c.counters.stats.anon for c in p.containers)
        room = limit - anon
        for p, c in members:
            c.counters.stats.file = min(c.counters.stats.file, _pages(max(0, room)))
            room -= c.counters.stats.file
        for p in pods:
            p.counters.stats.file = sum(c.counters.stats.file for c in p.containers)

    def _ancestors(self, node: _Node, state: _Pod) -> list[_Counters]:
        """The pod's cgroup and those above it (QoS class dir, kubepods), innermost first."""
        out = [state.counters]
        if state.kube_qos in node.qos:
            out.append(node.qos[state.kube_qos])
        out.append(node.root)
        return out

    def _oom(self, node: _Node, state: _Pod, c: _Container, now: float, level: _Counters) -> None:
        """The kernel kills container ``c`` (its memory over the limit of ``level``); the kubelet
        restarts it (after the crash-loop back-off) unless the pod's restartPolicy is Never."""
        # memory.events counts OOMs where the limit was hit and kills in the victim's cgroup; on v2
        # both are hierarchical (every ancestor counts them too), v1's oom_control is local.
        chain = [c.counters, *self._ancestors(node, state)]
        level.stats.oom += 1
        c.counters.stats.oom_kill += 1
        if self.cgroup_version == 2:
            for counters in chain[chain.index(level) + 1:] if level in chain else ():
                counters.stats.oom += 1
            for counters in chain[1:]:
                counters.stats.oom_kill += 1
        node.tree.write_cgroup(c.rel_dir, c.counters.stats)  # its last figures, before it goes
        c.counters.stats.anon = c.counters.stats.file = 0
        term = {"exitCode": OOM_EXIT_CODE, "reason": "OOMKilled", "startedAt": timestamp(c.started_at),
                "finishedAt": timestamp(now), "containerID": c.id}
        log.info("pod %s/%s on %s: container %s OOMKilled", state.namespace, state.name, node.name, c.name)
        if state.restart_policy == "Never":
            c.state, c.terminated = "terminated", term
            if all(x.state == "terminated" for x in state.containers):
                state.exit_code = OOM_EXIT_CODE
                state.end = now
                state.pending = "succeeded"  # the finished-pod write: Failed, with the OOMKilled status
            else:
                state.pending = "running"
            return
        c.last_terminated = term
        c.state = "waiting"
        # The kubelet restarts a crashed container at once the first time, then backs off 10s, 20s, … 5min.
        c.restart_at = now if c.restarts == 0 else now + min(MAX_BACKOFF_S, BACKOFF_S * 2 ** (c.restarts - 1))
        if c.restart_at <= now:
            self._restart(node, state, c, now)
        state.pending = "running"

    def _restart(self, node: _Node, state: _Pod, c: _Container, now: float) -> None:
        """A new incarnation of the container: new ID and cgroup (counters from 0, the spec's limits)."""
        node.tree.remove_cgroup(c.rel_dir)
        node.tree.remove_path(self._environ_path(node, c).parent)
        node.limits.forget(c.rel_dir)
        c.restarts += 1
        c.id = container_id(state.uid, c.name, restarts=c.restarts)
        c.rel_dir = tree.container_dir(self.cgroup_driver, state.kube_qos, state.uid, c.id)
        c.counters = _Counters(self._container_stats(node.tree, state.model.shapes[c.index]))
        c.started_at = now
        c.state = "running"
        if node.hooks is not None and state.sandbox is not None:
            self._create_container_hook(node, state, c)
        node.tree.add_cgroups(c.rel_dir, [(c.rel_dir, c.counters.stats)])
        state.pending = "running"

    def _cpu_plan(self, node: _Node, now: float) -> tuple[list[tuple], dict[int, bool]]:
        """What every running container gets this round (milli-cores), obeying the limit files at
        every level: a container's usage is capped by its CFS quota and its effective cpuset (its
        own ∩ pod ∩ QoS class ∩ kubepods); a pod, the Burstable and BestEffort classes and kubepods
        are capped by theirs, shared among their members in proportion to what they asked for.

        Returns per pod (pod, its window start, [[container, demand, usage, quota?, cpuset]], pod
        quota?, the level above it) and, keyed by id of the level's counters, whether the level
        (kubepods, QoS class) has a quota. The effective cpusets go to the cgroups' stats."""
        r = node.limits
        everything = frozenset(range(node.tree.topology.cpus))

        def within(rel: str, parent: frozenset) -> frozenset:
            own = r.cpus(rel)
            return (own & parent) or parent if own is not None else parent  # empty: the kernel inherits

        kp_rel = tree.kubepods_dir(self.cgroup_driver)
        kp_cpus = within(kp_rel, everything)
        levels = {id(node.root): (node.root, r.cpu(kp_rel), kp_cpus)}
        for q, counters in node.qos.items():
            rel = tree.qos_dir(self.cgroup_driver, q)
            levels[id(counters)] = (counters, r.cpu(rel), within(rel, kp_cpus))
        for counters, _, cpus in levels.values():
            counters.stats.effective_cpus = self._cpus_text(node, cpus)
        plan = []
        wants = {k: 0.0 for k in levels}  # what reaches each level after the caps below it
        for state in node.pods.values():
            stop = now if state.end is None else min(now, state.end)
            if stop <= state.accounted_to:
                continue
            start = state.accounted_to
            upper = node.qos.get(state.kube_qos, node.root)
            pod_cpus = within(state.rel_dir, levels[id(upper)][2])
            pod_quota = r.cpu(state.rel_dir)
            state.counters.stats.effective_cpus = self._cpus_text(node, pod_cpus)
            figures = state.model.cpu((stop + start) / 2 - state.started_at)
            rows = []
            for c in state.containers:
                if c.state != "running":
                    continue
                demand = (figures[c.index][0] if c.started_at == state.started_at else
                          state.model.cpu((stop + max(start, c.started_at)) / 2 - c.started_at)[c.index][0])
                cpus = within(c.rel_dir, pod_cpus)
                c.counters.stats.effective_cpus = self._cpus_text(node, cpus)
                quota = r.cpu(c.rel_dir)
                rows.append([c, demand, min(demand, limits.cap(quota, cpus)), quota is not None, cpus])
            total = sum(row[2] for row in rows)
            pod_cap = limits.cap(pod_quota, pod_cpus)
            if total > pod_cap > 0:
                for row in rows:
                    row[2] *= pod_cap / total
                total = pod_cap
            plan.append((state, start, rows, pod_quota is not None, upper))
            wants[id(upper)] += total
            if upper is not node.root:
                wants[id(node.root)] += min(total, limits.cap(levels[id(upper)][1], levels[id(upper)][2]))
        factors = {}
        for key, (counters, quota, cpus) in levels.items():
            level_cap = limits.cap(quota, cpus)
            factors[key] = level_cap / wants[key] if wants[key] > level_cap else 1.0
        for state, start, rows, _, upper in plan:
            f = factors[id(upper)] * (factors[id(node.root)] if upper is not node.root else 1.0)
            for row in rows:
                row[2] *= f
        return plan, {key: quota is not None for key, (_, quota, _) in levels.items()}

    def _sorted(self, node: _Node, cpus: frozenset) -> tuple[list[int], str]:
        """The cpuset's CPUs in order and in the kernel's list format (cached: sets seldom vary)."""
        out = node.sorted_sets.get(cpus)
        if out is None:
            if len(node.sorted_sets) > 256:
                node.sorted_sets.clear()
            out = node.sorted_sets[cpus] = (sorted(cpus), tree.cpulist(cpus))
        return out

    def _cpus_text(self, node: _Node, cpus: frozenset) -> str:
        return self._sorted(node, cpus)[1]

    def _advance(self, node: _Node, now: float) -> None:
        dt_ns = round((now - node.last) * 1e9)
        if dt_ns < 0:
            self._report_once(("clock", node.name), logging.WARNING, "node %s: the clock went back %.3fs; "
                              "counters wait for it", node.name, (node.last - now))
            return
        t = node.tree
        ncpus = t.topology.cpus
        for state in node.pods.values():  # containers whose back-off is over start again
            for c in state.containers:
                if c.state == "waiting" and now >= c.restart_at:
                    self._restart(node, state, c, now)
        plan, level_quotas = self._cpu_plan(node, now)
        node.turn += 1
        pods_add = [0] * ncpus
        level_demand: dict[int, list] = {}
        pods_ns = 0
        for state, start, rows, pod_limited, upper in plan:
            stop = now if state.end is None else min(now, state.end)
            pod_dt_ns = round((stop - start) * 1e9)
            demand_sum = usage_sum = 0.0
            pod_ns = 0
            for c, demand, usage, limited, cpus in rows:
                c_dt_ns = pod_dt_ns if c.started_at <= start else round((stop - c.started_at) * 1e9)
                ns = round(usage * c_dt_ns / 1000)
                c.counters.add_cpu(ns)
                c.counters.add_periods(c_dt_ns, demand, usage, limited)
                order = self._sorted(node, cpus)[0]
                for target in (c.counters.stats.percpu, state.counters.stats.percpu, upper.stats.percpu,
                               node.root.stats.percpu if upper is not node.root else None, pods_add):
                    if target is not None:
                        limits.spread(ns, order, node.turn, target)
                demand_sum += demand
                usage_sum += usage
                pod_ns += ns
            state.counters.add_cpu(pod_ns)
            state.counters.add_periods(pod_dt_ns, demand_sum, usage_sum, pod_limited)
            node.root.add_cpu(pod_ns)
            if upper is not node.root:
                upper.add_cpu(pod_ns)
            for level in {id(upper): upper, id(node.root): node.root}.values():
                acc = level_demand.setdefault(id(level), [level, 0.0, 0.0])
                acc[1] += demand_sum
                acc[2] += usage_sum
            pods_ns += pod_ns
            state.accounted_to = stop
        for key, (level, demand, usage) in level_demand.items():
            level.add_periods(dt_ns, demand, usage, level_quotas.get(key, False))
        for state in list(node.pods.values()):
            self._set_memory(node, state, now)
        for q, counters in node.qos.items():  # a QoS class's memory limit (e.g. the koordlet's on BestEffort)
            rel = tree.qos_dir(self.cgroup_driver, q)
            self._enforce_scope(node, [p for p in node.pods.values() if p.kube_qos == q], node.limits.memory(rel),
                                counters, now)
        self._enforce_scope(node, list(node.pods.values()), node.limits.memory(tree.kubepods_dir(self.cgroup_driver)),
                            node.root, now)
        since_boot = now - node.started_at
        if dt_ns > 0:
            system_ns = round(max(0.0, node.system.cpu((now + node.last) / 2 - node.started_at)) * dt_ns / 1000)
            # The system's processes are in no pod's cpuset: a CPU that a confined cgroup (the BE class under
            # CPU suppression) keeps busy does not clip them, they run on the CPUs with room.
            system_add, lost = limits.place_outside(system_ns, pods_add, dt_ns, node.turn)
            over = lost > 0
            for i in range(ncpus):
                add = pods_add[i] + system_add[i]
                if add > dt_ns:  # a CPU cannot be busier than the time that passed (overlapping pinned cgroups)
                    add, over = dt_ns, True
                node.busy[i] += add
                node.idle[i] += dt_ns - add
            if over:
                self._report_once(("overcommit", node.name), logging.WARNING,
                                  "node %s: pods and system want more than its CPUs; /proc/stat shows them full",
                                  node.name)
            node.last = now
        self._write(node, since_boot)

    def _write(self, node: _Node, since_boot: float) -> None:
        t = node.tree
        per_cpu = [CpuTimes(user=b * USER_SHARE[0] // USER_SHARE[1], system=b - b * USER_SHARE[0] // USER_SHARE[1],
                            idle=node.idle[i]) for i, b in enumerate(node.busy)]
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


def _spec_envs(pod: Obj) -> dict[str, dict[str, str]]:
    """Each container's literal ``env`` (``valueFrom`` needs the kubelet's resolution: left out)."""
    out = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        out[c.get("name", "")] = {e["name"]: str(e.get("value", "")) for e in c.get("env") or []
                                  if isinstance(e, dict) and e.get("name") and "valueFrom" not in e}
    return out


def _hook_resources(stats: CgroupStats) -> Any:
    """A cgroup's values as the runtime's ``LinuxContainerResources`` (quota -1: unlimited)."""
    return hookapi.LinuxContainerResources(
        cpu_period=tree.CFS_PERIOD_US, cpu_quota=-1 if stats.cpu_quota_us is None else stats.cpu_quota_us,
        cpu_shares=stats.cpu_shares, memory_limit_in_bytes=stats.memory_limit or 0, cpuset_cpus=stats.cpuset or "")


def _apply_resources(stats: CgroupStats, applied: Applied) -> None:
    """What the hooks left into the cgroup the runtime creates."""
    res = applied.resources
    stats.cpu_quota_us = None if res.cpu_quota < 0 else (res.cpu_quota or stats.cpu_quota_us)
    if res.cpu_shares > 0:
        stats.cpu_shares = res.cpu_shares
    if res.memory_limit_in_bytes > 0:
        stats.memory_limit = res.memory_limit_in_bytes
    stats.cpuset = res.cpuset_cpus or None


def _container_status(name: str, cid: str, image: str, state: Obj, *, ready: bool, started: bool = True,
                      restarts: int = 0, last: Obj | None = None) -> Obj:
    digest = hashlib.sha256(image.encode()).hexdigest()
    repo = image.rsplit(":", 1)[0] if ":" in image.rsplit("/", 1)[-1] else image
    return {"name": name, "state": state, "lastState": last or {}, "ready": ready, "restartCount": restarts,
            "image": image,
            "imageID": f"{repo}@sha256:{digest}", "containerID": cid, "started": started}
