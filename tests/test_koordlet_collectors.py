"""koordlet metrics advisor (reference A.4): collectors over fake proc/sys/cgroup trees under tmp_path, for
cgroup v1 and v2 with the systemd and cgroupfs drivers, with hand-computed CPU and memory figures.

Every test builds its own minimal tree with :class:`Tree`, drives an injected clock, calls
``collect_once`` and reads the samples back from the real metric cache (in memory).
"""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from koordinator_roles.koordlet.metriccache import kinds
from koordinator_roles.koordlet.metriccache.store import MetricCache
from koordinator_roles.koordlet.metricsadvisor import MetricsAdvisor
from koordinator_roles.koordlet.metricsadvisor.framework import Baselines, WarnOncePerKey
from koordinator_roles.koordlet.system import CgroupLayout, HostPaths, detect_layout, host_application_dir, procfs
from tests.waiting import wait_until

MiB = 1 << 20
GiB = 1 << 30
TICKS = procfs.clock_ticks()
PAGE = procfs.page_size()

LAYOUTS = [(1, "cgroupfs"), (1, "systemd"), (2, "systemd"), (2, "cgroupfs")]
LAYOUT_IDS = [f"v{v}-{d}" for v, d in LAYOUTS]


def write(path: Path | str, content: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)


class Tree:
    """A fake host: /proc, /sys and a cgroup hierarchy in the real kernel file formats."""

    def __init__(self, root: Path, version: int, driver: str) -> None:
        self.root = root
        self.paths = HostPaths(proc_root=str(root / "proc"), sys_root=str(root / "sys"),
                               cgroup_root=str(root / "cgroup"))
        self.layout = CgroupLayout(version, driver, str(root / "cgroup"))
        kubepods = "kubepods.slice" if driver == "systemd" else "kubepods"
        if version == 2:
            write(root / "cgroup" / "cgroup.controllers", "cpuset cpu io memory pids\n")
            (root / "cgroup" / kubepods).mkdir(parents=True)
        else:
            for subsystem in ("cpu", "cpuacct", "memory"):
                (root / "cgroup" / subsystem / kubepods).mkdir(parents=True)

    # -- /proc and /sys

    def proc_stat(self, cpus: list[tuple[int, int, int, int, int, int, int]]) -> None:
        """Per-CPU (user, nice, system, idle, iowait, irq, softirq); the "cpu" line is their sum."""
        total = [sum(c[i] for c in cpus) for i in range(7)]
        lines = ["cpu  " + " ".join(map(str, total)) + " 0 0 0"]
        lines += [f"cpu{i} " + " ".join(map(str, c)) + " 0 0 0" for i, c in enumerate(cpus)]
        write(self.root / "proc" / "stat", "\n".join(lines) + "\nintr 1 2 3\nctxt 42\nbtime 1700000000\n")

    def meminfo(self, total_kb: int, free_kb: int, available_kb: int) -> None:
        write(self.root / "proc" / "meminfo",
              f"MemTotal:       {total_kb} kB\nMemFree:        {free_kb} kB\nMemAvailable:   {available_kb} kB\n"
              "Buffers:           1024 kB\nCached:          204800 kB\nActive(file):    102400 kB\n"
              "Inactive(file):   51200 kB\nSReclaimable:     10240 kB\n")

    def cpuinfo(self, n: int, model: str = "Test CPU @ 2.00GHz") -> None:
        write(self.root / "proc" / "cpuinfo", "".join(
            f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: {model}\n\n" for i in range(n)))

    def cpu_topology(self, cpus: list[tuple[int, int, int]]) -> None:
        """(cpu id, core id, socket id) per CPU."""
        for cpu, core, socket in cpus:
            base = self.root / "sys" / "devices" / "system" / "cpu" / f"cpu{cpu}" / "topology"
            write(base / "core_id", f"{core}\n")
            write(base / "physical_package_id", f"{socket}\n")

    def numa_node(self, node: int, cpulist: str, meminfo_kb: dict[str, int], hugepages_2m: int = 0) -> None:
        base = self.root / "sys" / "devices" / "system" / "node" / f"node{node}"
        write(base / "cpulist", cpulist + "\n")
        write(base / "meminfo", "".join(f"Node {node} {k + ':':<16}{v:>10} kB\n" for k, v in meminfo_kb.items()))
        write(base / "hugepages" / "hugepages-2048kB" / "nr_hugepages", f"{hugepages_2m}\n")

    # -- cgroups

    def file(self, subsystem: str, rel_dir: str, name: str) -> Path:
        return Path(self.layout.path(subsystem, rel_dir, name))

    def cgroup(self, rel_dir: str, *, cpu_ns: int, anon: tuple[int, int, int] = (0, 0, 0),
               files: tuple[int, int] = (0, 0), periods: int = 0, throttled: int = 0,
               numa: dict[int, int] | None = None, current: int | None = None) -> None:
        """Usage of one cgroup: cumulative CPU ns, memory.stat (inactive_anon, active_anon, unevictable)
        and (active_file, inactive_file), throttling counters, NUMA bytes, memory.current/usage_in_bytes."""
        ia, aa, unevictable = anon
        af, if_ = files
        current = current if current is not None else ia + aa + unevictable + af + if_
        if self.layout.version == 1:
            write(self.file("cpuacct", rel_dir, "cpuacct.usage"), f"{cpu_ns}\n")
            write(self.file("cpu", rel_dir, "cpu.stat"),
                  f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time {throttled * 1000}\n")
            # non-hierarchical decoys first: the reader must take the total_* keys
            write(self.file("memory", rel_dir, "memory.stat"),
                  f"cache 1\nrss 2\ninactive_anon 3\nactive_anon 4\ninactive_file 5\nactive_file 6\n"
                  f"unevictable 7\ntotal_cache {af + if_}\ntotal_rss {ia + aa}\ntotal_inactive_anon {ia}\n"
                  f"total_active_anon {aa}\ntotal_inactive_file {if_}\ntotal_active_file {af}\n"
                  f"total_unevictable {unevictable}\n")
            write(self.file("memory", rel_dir, "memory.usage_in_bytes"), f"{current}\n")
            if numa is not None:
                pages = {n: b // PAGE for n, b in numa.items()}
                nodes = " ".join(f"N{n}={p}" for n, p in sorted(pages.items()))
                write(self.file("memory", rel_dir, "memory.numa_stat"),
                      f"total={sum(pages.values())} {nodes}\nfile=0 {nodes}\n")
        else:
            write(self.file("cpu", rel_dir, "cpu.stat"),
                  f"usage_usec {cpu_ns // 1000}\nuser_usec {cpu_ns // 2000}\nsystem_usec {cpu_ns // 2000}\n"
                  f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_usec {throttled * 100}\n")
            write(self.file("memory", rel_dir, "memory.stat"),
                  f"anon {ia + aa}\nfile {af + if_}\nkernel_stack 4096\ninactive_anon {ia}\nactive_anon {aa}\n"
                  f"inactive_file {if_}\nactive_file {af}\nunevictable {unevictable}\n")
            write(self.file("memory", rel_dir, "memory.current"), f"{current}\n")
            if numa is not None:
                # split each node's bytes between the anon and file lines: the reader adds them up
                write(self.file("memory", rel_dir, "memory.numa_stat"),
                      "anon " + " ".join(f"N{n}={b // 2}" for n, b in sorted(numa.items())) + "\n"
                      "file " + " ".join(f"N{n}={b - b // 2}" for n, b in sorted(numa.items())) + "\n"
                      "kernel_stack " + " ".join(f"N{n}=4096" for n in sorted(numa)) + "\n")


@dataclass
class FakePod:
    """What the advisor needs of a statesinformer PodMeta."""

    layout: CgroupLayout
    uid: str
    kube_qos: str
    container_ids: list[tuple[str, str]] = field(default_factory=list)   # (name, "runtime://id")
    namespace: str = "default"
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"pod-{self.uid[:4]}"

    @property
    def cgroup_dir(self) -> str:
        return self.layout.pod_dir(self.kube_qos, self.uid)

    def container_dir(self, container_id: str) -> str:
        return self.layout.container_dir(self.kube_qos, self.uid, container_id)

    def containers(self) -> list[tuple[str, str, str]]:
        return [(n, cid, self.container_dir(cid)) for n, cid in self.container_ids]


class FakeStates:
    def __init__(self, pods=(), apps=(), memory_policy: str | None = None) -> None:
        self.pod_list = list(pods)
        self.apps = list(apps)
        self.memory_policy = memory_policy

    def pods(self):
        return self.pod_list

    def host_applications(self):
        return self.apps

    def node_metric_spec(self):
        policy = {"nodeMemoryCollectPolicy": self.memory_policy} if self.memory_policy else {}
        return {"metricCollectPolicy": policy}


class Clock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class CountingCache:
    """The real cache, counting insert calls."""

    def __init__(self, cache: MetricCache) -> None:
        self.cache = cache
        self.inserts: list[int] = []

    def insert(self, samples):
        samples = list(samples)
        self.inserts.append(len(samples))
        self.cache.insert(samples)

    def __getattr__(self, name):
        return getattr(self.cache, name)


def values(cache, metric: str, at: float, **labels: str) -> list[float]:
    """The values of ``metric`` stored with timestamp ``at`` (exactly)."""
    return cache.query(metric, at, at, **labels).values


def one(cache, metric: str, at: float, **labels: str) -> float:
    got = values(cache, metric, at, **labels)
    assert len(got) == 1, f"{metric} {labels} at {at}: {got}"
    return got[0]


# -- the standard scene: 4 CPUs on 2 NUMA nodes, three pods, one host application ------------------

POD_A = "a1b2c3d4-0000-4000-8000-00000000000a"      # Burstable, two containers
POD_B = "b1b2c3d4-0000-4000-8000-00000000000b"      # Guaranteed, one container
POD_C = "c1b2c3d4-0000-4000-8000-00000000000c"      # BestEffort, no containers
CID_A1 = "containerd://" + "a1" * 32
CID_A2 = "docker://" + "a2" * 32
CID_B1 = "cri-o://" + "b1" * 32

CPU_BASE = (1000, 0, 500, 10000, 50, 10, 40)


def cpu_round(delta: list[tuple[int, int, int, int, int, int, int]]):
    return [tuple(b + d for b, d in zip(CPU_BASE, dc)) for dc in delta]


@dataclass
class Scene:
    tree: Tree
    clock: Clock
    cache: CountingCache
    states: FakeStates
    advisor: MetricsAdvisor
    pods: dict[str, FakePod]


def make_scene(tmp_path: Path, version: int, driver: str, **advisor_kw) -> Scene:
    tree = Tree(tmp_path, version, driver)
    tree.cpuinfo(4)
    tree.cpu_topology([(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)])
    tree.numa_node(0, "0-1", {"MemTotal": 8388608, "MemFree": 4194304, "Active(file)": 524288,
                              "Inactive(file)": 524288, "SReclaimable": 262144}, hugepages_2m=8)
    tree.numa_node(1, "2-3", {"MemTotal": 8388608, "MemFree": 6291456, "Active(file)": 0,
                              "Inactive(file)": 0, "SReclaimable": 0})
    tree.meminfo(total_kb=16777216, free_kb=8388608, available_kb=12582912)
    tree.proc_stat(cpu_round([(0,) * 7] * 4))
    layout = tree.layout
    pods = {
        POD_A: FakePod(layout, POD_A, "Burstable", [("app", CID_A1), ("sidecar", CID_A2)]),
        POD_B: FakePod(layout, POD_B, "Guaranteed", [("main", CID_B1)]),
        POD_C: FakePod(layout, POD_C, "BestEffort", []),
    }
    pa, pb, pc = pods[POD_A], pods[POD_B], pods[POD_C]
    tree.cgroup(pa.cgroup_dir, cpu_ns=10_000_000_000, anon=(100 * MiB, 200 * MiB, 4 * MiB),
                files=(50 * MiB, 30 * MiB), periods=100, throttled=10, numa={0: 256 * MiB, 1: 128 * MiB})
    tree.cgroup(pa.container_dir(CID_A1), cpu_ns=4_000_000_000, anon=(60 * MiB, 100 * MiB, 0),
                files=(10 * MiB, 0), periods=100, throttled=8)
    tree.cgroup(pa.container_dir(CID_A2), cpu_ns=5_000_000_000, anon=(40 * MiB, 100 * MiB, 4 * MiB),
                periods=50, throttled=0)
    tree.cgroup(pb.cgroup_dir, cpu_ns=1_000_000_000, anon=(0, 64 * MiB, 0), periods=10, throttled=0,
                numa={0: 64 * MiB})
    tree.cgroup(pb.container_dir(CID_B1), cpu_ns=900_000_000, anon=(0, 60 * MiB, 0), periods=10, throttled=0)
    tree.cgroup(pc.cgroup_dir, cpu_ns=0, anon=(0, 0, 0), numa={0: 0})
    app = {"name": "agent", "qos": "LS", "priority": "koord-prod"}
    tree.cgroup(host_application_dir(app, layout), cpu_ns=2_000_000_000, anon=(16 * MiB, 16 * MiB, 0),
                files=(8 * MiB, 8 * MiB), current=50 * MiB)
    states = FakeStates(pods.values(), [app])
    clock = Clock(1000.0)
    cache = CountingCache(MetricCache(None))
    advisor = MetricsAdvisor(tree.paths, layout, cache, states, clock=clock, **advisor_kw)
    return Scene(tree, clock, cache, states, advisor, pods)


def second_round(scene: Scene) -> None:
    """Usage after 2 s (the expectations below are computed by hand from these deltas)."""
    tree, pods = scene.tree, scene.pods
    pa, pb, pc = pods[POD_A], pods[POD_B], pods[POD_C]
    # busy ticks (user+nice+system+irq+softirq): cpu0 +300, cpu1 +200, cpu2 +150, cpu3 +50; idle/iowait ignored
    tree.proc_stat(cpu_round([(300, 0, 0, 500, 10, 0, 0), (0, 0, 200, 700, 0, 0, 0),
                              (100, 50, 0, 0, 0, 0, 0), (0, 0, 0, 100, 100, 20, 30)]))
    tree.cgroup(pa.cgroup_dir, cpu_ns=13_000_000_000, anon=(100 * MiB, 200 * MiB, 4 * MiB),
                files=(50 * MiB, 30 * MiB), periods=120, throttled=15, numa={0: 256 * MiB, 1: 128 * MiB})
    tree.cgroup(pa.container_dir(CID_A1), cpu_ns=5_000_000_000, anon=(60 * MiB, 100 * MiB, 0),
                files=(10 * MiB, 0), periods=120, throttled=12)
    tree.cgroup(pa.container_dir(CID_A2), cpu_ns=7_000_000_000, anon=(40 * MiB, 100 * MiB, 4 * MiB),
                periods=50, throttled=0)
    tree.cgroup(pb.cgroup_dir, cpu_ns=1_500_000_000, anon=(0, 64 * MiB, 0), periods=20, throttled=0,
                numa={0: 64 * MiB})
    tree.cgroup(pb.container_dir(CID_B1), cpu_ns=1_300_000_000, anon=(0, 60 * MiB, 0), periods=20, throttled=0)
    tree.cgroup(pc.cgroup_dir, cpu_ns=0, anon=(0, 0, 0), numa={0: 0})
    tree.cgroup(host_application_dir(scene.states.apps[0], tree.layout), cpu_ns=2_200_000_000,
                anon=(16 * MiB, 16 * MiB, 0), files=(8 * MiB, 8 * MiB), current=50 * MiB)
    scene.clock.now = 1002.0


# Hand-computed expectations for second_round (Δt = 2 s).
NODE_CPU = (300 + 200 + 150 + 50) / (2 * TICKS)                # 3.5 cores at CLK_TCK 100
NUMA_CPU = {0: (300 + 200) / (2 * TICKS), 1: (150 + 50) / (2 * TICKS)}
NODE_MEMORY = (16777216 - 12582912) * 1024                     # MemTotal − MemAvailable = 4 GiB
NODE_MEMORY_WITH_CACHE = (16777216 - 8388608) * 1024           # MemTotal − MemFree = 8 GiB
NUMA_MEMORY = {0: (8388608 - (4194304 + 524288 + 524288 + 262144)) * 1024, 1: (8388608 - 6291456) * 1024}
POD_A_CPU, POD_B_CPU, POD_C_CPU = 3e9 / 2e9, 0.5e9 / 2e9, 0.0
POD_A_MEMORY, POD_B_MEMORY = (100 + 200 + 4) * MiB, 64 * MiB
APP_CPU, APP_MEMORY = 0.2e9 / 2e9, 32 * MiB


@pytest.mark.parametrize("version, driver", LAYOUTS, ids=LAYOUT_IDS)
def test_collect_hand_computed(tmp_path, version, driver):
    scene = make_scene(tmp_path, version, driver)
    cache = scene.cache
    scene.advisor.collect_once()
    # the first round only records baselines: no usage sample at all, but node facts are stored
    for metric in (kinds.NODE_CPU_USAGE, kinds.NODE_MEMORY_USAGE, kinds.POD_CPU_USAGE, kinds.POD_MEMORY_USAGE,
                   kinds.CONTAINER_CPU_USAGE, kinds.POD_CPU_THROTTLED, kinds.SYS_CPU_USAGE,
                   kinds.HOST_APPLICATION_CPU_USAGE):
        assert values(cache, metric, 1000.0) == [], metric
    assert cache.get_kv(kinds.KV_NODE_CPU_INFO)["total_cpus"] == 4
    assert scene.advisor.has_synced()

    second_round(scene)
    scene.advisor.collect_once()
    at = 1002.0
    assert one(cache, kinds.NODE_CPU_USAGE, at) == pytest.approx(NODE_CPU)
    assert one(cache, kinds.NODE_MEMORY_USAGE, at) == NODE_MEMORY == 4 * GiB
    assert one(cache, kinds.NODE_MEMORY_USAGE_WITH_PAGE_CACHE, at) == NODE_MEMORY_WITH_CACHE
    for node in (0, 1):
        assert one(cache, kinds.NODE_NUMA_CPU_USAGE, at, numa_node_id=str(node)) == pytest.approx(NUMA_CPU[node])
        assert one(cache, kinds.NODE_NUMA_MEMORY_USAGE, at, numa_node_id=str(node)) == NUMA_MEMORY[node]

    assert one(cache, kinds.POD_CPU_USAGE, at, pod_uid=POD_A) == pytest.approx(1.5)
    assert one(cache, kinds.POD_CPU_USAGE, at, pod_uid=POD_B) == pytest.approx(0.25)
    assert one(cache, kinds.POD_CPU_USAGE, at, pod_uid=POD_C) == 0.0
    assert one(cache, kinds.POD_MEMORY_USAGE, at, pod_uid=POD_A) == POD_A_MEMORY
    assert one(cache, kinds.POD_MEMORY_USAGE, at, pod_uid=POD_B) == POD_B_MEMORY
    assert one(cache, kinds.CONTAINER_CPU_USAGE, at, container_id=CID_A1) == pytest.approx(0.5)
    assert one(cache, kinds.CONTAINER_CPU_USAGE, at, container_id=CID_A2) == pytest.approx(1.0)
    assert one(cache, kinds.CONTAINER_CPU_USAGE, at, container_id=CID_B1) == pytest.approx(0.2)
    assert one(cache, kinds.CONTAINER_MEMORY_USAGE, at, container_id=CID_A1) == 160 * MiB
    assert one(cache, kinds.CONTAINER_MEMORY_USAGE, at, container_id=CID_A2) == 144 * MiB
    assert one(cache, kinds.CONTAINER_MEMORY_USAGE, at, container_id=CID_B1) == 60 * MiB

    # throttling: Δnr_throttled / Δnr_periods, 0 when no period passed
    assert one(cache, kinds.POD_CPU_THROTTLED, at, pod_uid=POD_A) == pytest.approx(5 / 20)
    assert one(cache, kinds.POD_CPU_THROTTLED, at, pod_uid=POD_B) == 0.0
    assert one(cache, kinds.POD_CPU_THROTTLED, at, pod_uid=POD_C) == 0.0
    assert one(cache, kinds.CONTAINER_CPU_THROTTLED, at, container_id=CID_A1) == pytest.approx(4 / 20)
    assert one(cache, kinds.CONTAINER_CPU_THROTTLED, at, container_id=CID_A2) == 0.0

    assert one(cache, kinds.HOST_APPLICATION_CPU_USAGE, at, host_app_name="agent") == pytest.approx(APP_CPU)
    assert one(cache, kinds.HOST_APPLICATION_MEMORY_USAGE, at, host_app_name="agent") == APP_MEMORY
    assert one(cache, kinds.HOST_APPLICATION_MEMORY_USAGE_WITH_PAGE_CACHE, at, host_app_name="agent") == 50 * MiB

    # system = node − pods − host applications (clamped at 0); NUMA memory without host apps,
    # NUMA CPU split by the node's NUMA CPU shares
    sys_cpu = NODE_CPU - (POD_A_CPU + POD_B_CPU + POD_C_CPU) - APP_CPU
    assert one(cache, kinds.SYS_CPU_USAGE, at) == pytest.approx(sys_cpu)
    assert one(cache, kinds.SYS_MEMORY_USAGE, at) == NODE_MEMORY - POD_A_MEMORY - POD_B_MEMORY - APP_MEMORY
    assert one(cache, kinds.SYS_NUMA_MEMORY_USAGE, at, numa_node_id="0") == NUMA_MEMORY[0] - 256 * MiB - 64 * MiB
    assert one(cache, kinds.SYS_NUMA_MEMORY_USAGE, at, numa_node_id="1") == NUMA_MEMORY[1] - 128 * MiB
    numa_total = NUMA_CPU[0] + NUMA_CPU[1]
    for node in (0, 1):
        assert one(cache, kinds.SYS_NUMA_CPU_USAGE, at, numa_node_id=str(node)) == pytest.approx(
            sys_cpu * NUMA_CPU[node] / numa_total)

    # one insert per round; last_round mirrors the stored figures
    assert len(cache.inserts) == 1
    last = scene.advisor.last_round()
    assert last["timestamp"] == at
    assert last["node"]["cpu"] == pytest.approx(NODE_CPU)
    assert last["pods"][POD_A] == {"cpu": pytest.approx(1.5), "memory": POD_A_MEMORY, "throttled": 0.25}
    assert last["containers"][CID_A1]["pod_uid"] == POD_A
    assert last["system"]["cpu"] == pytest.approx(sys_cpu)
    assert last["host_applications"]["agent"]["memory_with_page_cache"] == 50 * MiB


def test_system_usage_clamped_at_zero(tmp_path):
    scene = make_scene(tmp_path, 2, "systemd")
    scene.advisor.collect_once()
    second_round(scene)
    # a busier pod than the node: system CPU is 0, not negative
    pa = scene.pods[POD_A]
    scene.tree.cgroup(pa.cgroup_dir, cpu_ns=30_000_000_000, anon=(100 * MiB, 200 * MiB, 4 * MiB),
                      periods=120, throttled=15, numa={0: 256 * MiB, 1: 128 * MiB})
    scene.advisor.collect_once()
    assert one(scene.cache, kinds.SYS_CPU_USAGE, 1002.0) == 0.0
    assert one(scene.cache, kinds.SYS_NUMA_CPU_USAGE, 1002.0, numa_node_id="0") == 0.0


def test_host_app_memory_policy_with_page_cache(tmp_path):
    scene = make_scene(tmp_path, 1, "cgroupfs")
    scene.states.memory_policy = "usageWithPageCache"
    scene.advisor.collect_once()
    second_round(scene)
    scene.advisor.collect_once()
    # the host application's share of system memory is memory.usage_in_bytes (50 MiB), not memory.stat
    assert one(scene.cache, kinds.SYS_MEMORY_USAGE, 1002.0) == NODE_MEMORY - POD_A_MEMORY - POD_B_MEMORY - 50 * MiB


@pytest.mark.parametrize("version, driver", [(1, "systemd"), (2, "cgroupfs")])
def test_counter_reset_starts_new_baseline(tmp_path, version, driver):
    scene = make_scene(tmp_path, version, driver)
    scene.advisor.collect_once()
    second_round(scene)
    scene.advisor.collect_once()
    pa = scene.pods[POD_A]
    tree = scene.tree
    # the pod's cgroup was recreated: its counters start again from a small value
    tree.cgroup(pa.cgroup_dir, cpu_ns=1_000_000_000, anon=(1 * MiB, 0, 0), periods=3, throttled=1,
                numa={0: MiB})
    scene.clock.now = 1004.0
    scene.advisor.collect_once()
    assert values(scene.cache, kinds.POD_CPU_USAGE, 1004.0, pod_uid=POD_A) == []
    assert values(scene.cache, kinds.POD_MEMORY_USAGE, 1004.0, pod_uid=POD_A) == []
    assert values(scene.cache, kinds.POD_CPU_THROTTLED, 1004.0, pod_uid=POD_A) == []
    # unchanged pod B keeps reporting (0.0 cores: no CPU used since the last round)
    assert one(scene.cache, kinds.POD_CPU_USAGE, 1004.0, pod_uid=POD_B) == 0.0
    # the next round measures from the new baseline
    tree.cgroup(pa.cgroup_dir, cpu_ns=2_000_000_000, anon=(1 * MiB, 0, 0), periods=13, throttled=6,
                numa={0: MiB})
    scene.clock.now = 1005.0
    scene.advisor.collect_once()
    assert one(scene.cache, kinds.POD_CPU_USAGE, 1005.0, pod_uid=POD_A) == pytest.approx(1.0)
    assert one(scene.cache, kinds.POD_MEMORY_USAGE, 1005.0, pod_uid=POD_A) == 1 * MiB
    assert one(scene.cache, kinds.POD_CPU_THROTTLED, 1005.0, pod_uid=POD_A) == pytest.approx(0.5)


def test_node_counter_reset(tmp_path):
    scene = make_scene(tmp_path, 2, "systemd")
    scene.advisor.collect_once()
    second_round(scene)
    scene.advisor.collect_once()
    scene.tree.proc_stat([(1, 0, 1, 0, 0, 0, 0)] * 4)       # e.g. a restored snapshot: ticks went backwards
    scene.clock.now = 1003.0
    scene.advisor.collect_once()
    assert values(scene.cache, kinds.NODE_CPU_USAGE, 1003.0) == []
    scene.tree.proc_stat([(101, 0, 1, 0, 0, 0, 0)] * 4)
    scene.clock.now = 1004.0
    scene.advisor.collect_once()
    assert one(scene.cache, kinds.NODE_CPU_USAGE, 1004.0) == pytest.approx(400 / TICKS)


@pytest.mark.parametrize("version, driver", LAYOUTS, ids=LAYOUT_IDS)
def test_missing_files_skip_pod_and_warn_once(tmp_path, caplog, version, driver):
    scene = make_scene(tmp_path, version, driver)
    pc = scene.pods[POD_C]
    missing = scene.tree.file("memory", pc.cgroup_dir, "memory.stat")
    missing.unlink()
    # container A2's cgroup is gone entirely (container restarting): only it is skipped
    a2_cpu = scene.tree.file("cpuacct" if version == 1 else "cpu", scene.pods[POD_A].container_dir(CID_A2),
                             "cpuacct.usage" if version == 1 else "cpu.stat")
    a2_cpu.unlink()
    caplog.set_level(logging.DEBUG, logger="koordinator.koordlet.metricsadvisor")
    scene.advisor.collect_once()
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any(str(missing) in w and POD_C in w for w in warnings), warnings
    assert any(str(a2_cpu) in w and CID_A2 in w for w in warnings), warnings

    caplog.clear()
    second_round(scene)
    missing.unlink()
    a2_cpu.unlink()
    scene.advisor.collect_once()
    # still skipped, but logged at debug level only this time
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and POD_C in r.getMessage()]
    assert any(str(missing) in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
    at = 1002.0
    assert values(scene.cache, kinds.POD_CPU_USAGE, at, pod_uid=POD_C) == []
    assert values(scene.cache, kinds.CONTAINER_CPU_USAGE, at, container_id=CID_A2) == []
    assert one(scene.cache, kinds.POD_CPU_USAGE, at, pod_uid=POD_A) == pytest.approx(1.5)
    assert one(scene.cache, kinds.CONTAINER_CPU_USAGE, at, container_id=CID_A1) == pytest.approx(0.5)
    assert one(scene.cache, kinds.NODE_CPU_USAGE, at) == pytest.approx(NODE_CPU)


@pytest.mark.parametrize("version, driver", LAYOUTS, ids=LAYOUT_IDS)
def test_garbage_files_skip_pod(tmp_path, caplog, version, driver):
    scene = make_scene(tmp_path, version, driver)
    scene.advisor.collect_once()
    second_round(scene)
    pb = scene.pods[POD_B]
    if version == 1:
        bad = scene.tree.file("cpuacct", pb.cgroup_dir, "cpuacct.usage")
        write(bad, "not-a-number\n")
    else:
        bad = scene.tree.file("cpu", pb.cgroup_dir, "cpu.stat")
        write(bad, "usage_usec 12x\nnr_periods 1\nnr_throttled 0\n")
    bad_memory = scene.tree.file("memory", scene.pods[POD_C].cgroup_dir, "memory.stat")
    write(bad_memory, "\x00\x01garbage")
    caplog.set_level(logging.WARNING, logger="koordinator.koordlet.metricsadvisor")
    scene.advisor.collect_once()
    warnings = " | ".join(r.getMessage() for r in caplog.records)
    assert str(bad) in warnings and str(bad_memory) in warnings
    at = 1002.0
    assert values(scene.cache, kinds.POD_CPU_USAGE, at, pod_uid=POD_B) == []
    assert values(scene.cache, kinds.POD_MEMORY_USAGE, at, pod_uid=POD_C) == []
    assert one(scene.cache, kinds.POD_CPU_USAGE, at, pod_uid=POD_A) == pytest.approx(1.5)
    # a skipped pod's containers are skipped with it (as Koordinator does); other pods' are not
    assert values(scene.cache, kinds.CONTAINER_CPU_USAGE, at, container_id=CID_B1) == []
    assert one(scene.cache, kinds.CONTAINER_CPU_USAGE, at, container_id=CID_A2) == pytest.approx(1.0)
    # system usage only subtracts the pods that were measured
    assert one(scene.cache, kinds.SYS_CPU_USAGE, at) == pytest.approx(NODE_CPU - POD_A_CPU - APP_CPU)


def test_bad_proc_files_and_failing_states_never_raise(tmp_path, caplog):
    scene = make_scene(tmp_path, 2, "systemd")

    class Broken(FakeStates):
        def pods(self):
            raise RuntimeError("informer exploded")

        def host_applications(self):
            return [{"qos": "LS"}, "not-a-dict", {"name": "x", "cgroupPath": {"base": "Nope"}}]

    scene.advisor.states = Broken()
    write(tmp_path / "proc" / "stat", "garbage\n")
    (tmp_path / "proc" / "meminfo").unlink()
    caplog.set_level(logging.WARNING, logger="koordinator.koordlet.metricsadvisor")
    scene.advisor.collect_once()
    scene.clock.now += 1
    scene.advisor.collect_once()
    text = " | ".join(r.getMessage() for r in caplog.records)
    assert str(tmp_path / "proc" / "stat") in text
    assert "informer exploded" in text
    assert "unknown cgroupPath.base 'Nope'" in text and "name missing" in text
    assert scene.advisor.has_synced()


def test_unknown_runtime_container_is_skipped_not_fatal(tmp_path, caplog):
    scene = make_scene(tmp_path, 2, "systemd")
    pa = scene.pods[POD_A]
    pa.container_ids.append(("odd", "rkt://deadbeef"))
    caplog.set_level(logging.WARNING, logger="koordinator.koordlet.metricsadvisor")
    scene.advisor.collect_once()
    assert "unknown runtime 'rkt'" in " ".join(r.getMessage() for r in caplog.records)
    second_round(scene)
    scene.advisor.collect_once()
    assert one(scene.cache, kinds.POD_CPU_USAGE, 1002.0, pod_uid=POD_B) == pytest.approx(0.25)


def test_changed_pod_object_is_seen(tmp_path):
    """Per-pod facts are reused while the informer hands out the same PodMeta; a new object (the pod
    changed: a container started) is looked at afresh."""
    scene = make_scene(tmp_path, 2, "cgroupfs")
    pc = scene.pods[POD_C]
    scene.advisor.collect_once()
    cid = "containerd://" + "c1" * 32
    started = FakePod(pc.layout, POD_C, "BestEffort", [("late", cid)])
    scene.tree.cgroup(started.container_dir(cid), cpu_ns=0)
    scene.states.pod_list = [scene.pods[POD_A], scene.pods[POD_B], started]
    scene.clock.now = 1001.0
    scene.advisor.collect_once()
    scene.tree.cgroup(started.container_dir(cid), cpu_ns=500_000_000)
    scene.clock.now = 1002.0
    scene.advisor.collect_once()
    assert one(scene.cache, kinds.CONTAINER_CPU_USAGE, 1002.0, container_id=cid) == pytest.approx(0.5)


def test_baselines_dropped_after_20_intervals(tmp_path):
    scene = make_scene(tmp_path, 2, "systemd", collect_interval=1.0)
    scene.advisor.collect_once()
    pod_baselines = scene.advisor.collectors[2].baselines
    assert ("pod", POD_C) in pod_baselines and ("container", CID_B1) in pod_baselines
    scene.states.pod_list = [scene.pods[POD_A]]           # B and C are gone
    scene.clock.now = 1020.0
    scene.advisor.collect_once()
    assert ("pod", POD_C) in pod_baselines                # 20 s: still kept
    scene.clock.now = 1021.0
    scene.advisor.collect_once()
    assert ("pod", POD_C) not in pod_baselines and ("container", CID_B1) not in pod_baselines
    assert ("pod", POD_A) in pod_baselines
    assert len(pod_baselines) == 3                        # pod A and its two containers


def test_baselines_and_problem_log_units():
    b = Baselines(ttl=10)
    assert b.swap("k", 1, 100.0) is None
    assert b.swap("k", 5, 101.0) == (1, 100.0)
    assert b.prune(111.0) == 0 and b.prune(111.5) == 1 and len(b) == 0
    records = []

    class Rec(logging.Handler):
        def emit(self, record):
            records.append((record.levelno, record.getMessage()))

    logger = logging.getLogger("koordinator.koordlet.test-problems")
    logger.addHandler(Rec())
    logger.setLevel(logging.DEBUG)
    problems = WarnOncePerKey(logger, ttl=5)
    problems.report("pod1", 0.0, "bad %s", "x")
    problems.report("pod1", 1.0, "bad %s", "y")
    problems.prune(7.0)
    problems.report("pod1", 7.0, "bad %s", "z")
    assert records == [(logging.WARNING, "bad x"), (logging.DEBUG, "bad y"), (logging.WARNING, "bad z")]


def test_system_usage_outdated_rule(tmp_path):
    scene = make_scene(tmp_path, 2, "systemd", sys_outdated=10.0)
    scene.advisor.collect_once()
    second_round(scene)
    scene.advisor.collect_once()
    # /proc/stat becomes unreadable: the last node usage (t=1002) is used while younger than 10 s
    (tmp_path / "proc" / "stat").unlink()
    scene.clock.now = 1012.0
    scene.advisor.collect_once()
    assert values(scene.cache, kinds.NODE_CPU_USAGE, 1012.0) == []
    assert len(values(scene.cache, kinds.SYS_CPU_USAGE, 1012.0)) == 1
    scene.clock.now = 1012.5
    scene.advisor.collect_once()
    assert values(scene.cache, kinds.SYS_CPU_USAGE, 1012.5) == []
    assert values(scene.cache, kinds.SYS_NUMA_MEMORY_USAGE, 1012.5, numa_node_id="0") == []


def test_system_usage_needs_host_application_usage(tmp_path, caplog):
    """No host-application figure (its collector failed from the start) means no system usage, not
    node − pods with the host applications counted as zero."""
    scene = make_scene(tmp_path, 2, "systemd")
    apps = scene.states.apps

    def failing_host_applications():
        raise RuntimeError("NodeSLO unreadable")

    scene.states.host_applications = failing_host_applications
    scene.advisor.collect_once()
    second_round(scene)
    with caplog.at_level(logging.DEBUG, logger="koordinator.koordlet"):
        scene.advisor.collect_once()
    # node and pod usage are there, so only the missing host-application input stops the system figure
    assert one(scene.cache, kinds.NODE_CPU_USAGE, 1002.0) == pytest.approx(NODE_CPU)
    assert one(scene.cache, kinds.POD_CPU_USAGE, 1002.0, pod_uid=POD_A) == pytest.approx(POD_A_CPU)
    for metric in (kinds.SYS_CPU_USAGE, kinds.SYS_MEMORY_USAGE):
        assert values(scene.cache, metric, 1002.0) == [], metric
    assert values(scene.cache, kinds.SYS_NUMA_MEMORY_USAGE, 1002.0, numa_node_id="0") == []
    assert values(scene.cache, kinds.SYS_NUMA_CPU_USAGE, 1002.0, numa_node_id="0") == []
    assert "system" not in scene.advisor.last_round()
    assert "host-application usage not collected" in caplog.text

    # once the host applications are readable again, their first round is a CPU baseline (sum 0
    # cores, as Koordinator's collector reports it) and system usage is reported again
    del scene.states.host_applications
    assert scene.states.host_applications() == apps
    scene.clock.now = 1003.0
    scene.tree.proc_stat(cpu_round([(400, 0, 0, 500, 10, 0, 0), (0, 0, 300, 700, 0, 0, 0),
                                    (150, 50, 0, 0, 0, 0, 0), (0, 0, 50, 100, 100, 20, 30)]))
    scene.advisor.collect_once()
    assert len(values(scene.cache, kinds.SYS_CPU_USAGE, 1003.0)) == 1
    assert one(scene.cache, kinds.SYS_MEMORY_USAGE, 1003.0) == NODE_MEMORY - POD_A_MEMORY - POD_B_MEMORY


def test_node_info_kv(tmp_path):
    scene = make_scene(tmp_path, 1, "systemd")
    scene.advisor.collect_once()
    cpu_info = scene.cache.get_kv(kinds.KV_NODE_CPU_INFO)
    assert cpu_info == {
        "model": "Test CPU @ 2.00GHz", "vendor": "GenuineIntel",
        "cpus": [{"id": 0, "core": 0, "socket": 0, "node": 0}, {"id": 1, "core": 1, "socket": 0, "node": 0},
                 {"id": 2, "core": 0, "socket": 1, "node": 1}, {"id": 3, "core": 1, "socket": 1, "node": 1}],
        "total_cpus": 4, "total_cores": 4, "total_sockets": 2, "total_numa_nodes": 2,
    }
    assert scene.cache.get_kv(kinds.KV_NODE_NUMA_INFO) == {"nodes": [
        {"id": 0, "cpus": [0, 1], "mem_total": 8388608 * 1024, "mem_free": 4194304 * 1024,
         "hugepages_2Mi": 8, "hugepages_1Gi": 0},
        {"id": 1, "cpus": [2, 3], "mem_total": 8388608 * 1024, "mem_free": 6291456 * 1024,
         "hugepages_2Mi": 0, "hugepages_1Gi": 0},
    ]}


def test_node_info_interval(tmp_path):
    scene = make_scene(tmp_path, 2, "systemd", node_info_interval=60.0)
    scene.advisor.collect_once()
    scene.tree.cpuinfo(4, model="Changed CPU")
    scene.clock.now = 1030.0
    scene.advisor.collect_once()
    assert scene.cache.get_kv(kinds.KV_NODE_CPU_INFO)["model"] == "Test CPU @ 2.00GHz"
    scene.clock.now = 1060.0
    scene.advisor.collect_once()
    assert scene.cache.get_kv(kinds.KV_NODE_CPU_INFO)["model"] == "Changed CPU"


def test_node_without_numa_dirs_is_one_node(tmp_path):
    tree = Tree(tmp_path, 2, "systemd")
    tree.cpuinfo(2)      # no sysfs at all: topology from /proc/cpuinfo, one NUMA node 0
    tree.meminfo(total_kb=4194304, free_kb=1048576, available_kb=2097152)
    tree.proc_stat([(10, 0, 10, 100, 0, 0, 0)] * 2)
    clock = Clock()
    cache = MetricCache(None)
    advisor = MetricsAdvisor(tree.paths, tree.layout, cache, FakeStates(), clock=clock)
    advisor.collect_once()
    assert cache.get_kv(kinds.KV_NODE_CPU_INFO)["cpus"] == [
        {"id": 0, "core": 0, "socket": 0, "node": 0}, {"id": 1, "core": 1, "socket": 0, "node": 0}]
    assert cache.get_kv(kinds.KV_NODE_NUMA_INFO) == {"nodes": [
        {"id": 0, "cpus": [0, 1], "mem_total": 4194304 * 1024, "mem_free": 1048576 * 1024,
         "hugepages_2Mi": 0, "hugepages_1Gi": 0}]}
    tree.proc_stat([(60, 0, 10, 100, 0, 0, 0), (10, 0, 60, 100, 0, 0, 0)])
    clock.now += 1
    advisor.collect_once()
    assert one(cache, kinds.NODE_CPU_USAGE, clock.now) == pytest.approx(100 / TICKS)
    assert one(cache, kinds.NODE_NUMA_CPU_USAGE, clock.now, numa_node_id="0") == pytest.approx(100 / TICKS)
    # the fallback node's memory comes from /proc/meminfo with the NUMA formula
    available = 1048576 + 102400 + 51200 + 10240
    assert one(cache, kinds.NODE_NUMA_MEMORY_USAGE, clock.now, numa_node_id="0") == (4194304 - available) * 1024
    # no pods: system usage is the node's
    assert one(cache, kinds.SYS_CPU_USAGE, clock.now) == pytest.approx(100 / TICKS)


def test_detect_layout_on_generated_trees(tmp_path):
    for i, (version, driver) in enumerate(LAYOUTS):
        tree = Tree(tmp_path / str(i), version, driver)
        assert detect_layout(tree.paths.cgroup_root) == tree.layout


def test_run_loop_until_stopped(tmp_path):
    scene = make_scene(tmp_path, 2, "systemd", collect_interval=0.01)
    ticking = Clock(1000.0)

    def clock():
        ticking.now += 0.01
        return ticking.now

    scene.advisor.clock = clock
    stop = threading.Event()
    thread = threading.Thread(target=scene.advisor.run, args=(stop,), daemon=True)
    thread.start()
    try:
        wait_until(lambda: len(scene.cache.inserts) >= 3, message="three rounds with samples")
    finally:
        stop.set()
        thread.join(5)
    assert not thread.is_alive()
    assert scene.advisor.has_synced()


def test_real_proc_node_usage_is_plausible():
    """This machine's /proc: node CPU and memory within physical bounds (pods skipped: no states)."""
    paths = HostPaths()
    if not os.path.exists(paths.proc("stat")):
        pytest.skip("no /proc/stat")
    cache = MetricCache(None)
    advisor = MetricsAdvisor(paths, detect_layout("/sys/fs/cgroup"), cache, FakeStates())
    advisor.collect_once()
    threading.Event().wait(0.5)        # let some CPU ticks accrue (not a synchronisation)
    advisor.collect_once()
    last = advisor.last_round()
    assert 0 <= last["node"]["cpu"] <= os.cpu_count()
    mem_total = procfs.read_meminfo(paths)["MemTotal"] * 1024
    assert 0 < last["node"]["memory"] <= mem_total
    ts = last["timestamp"]
    assert one(cache, kinds.NODE_CPU_USAGE, ts) == pytest.approx(last["node"]["cpu"])
    info = cache.get_kv(kinds.KV_NODE_CPU_INFO)
    assert info["total_cpus"] >= 1 and len(info["cpus"]) == info["total_cpus"]


# -- BE resource collector (reference A.4.4) ---------------------------------------------------------

POD_D = "d1b2c3d4-0000-4000-8000-00000000000d"      # BE (BestEffort), two containers
CID_D1 = "containerd://" + "d1" * 32
CID_D2 = "containerd://" + "d2" * 32


def be_pod_spec(qos: str, *batch_cpu: str) -> dict:
    return {"metadata": {"labels": {"koordinator.sh/qosClass": qos}},
            "spec": {"containers": [{"name": f"c{i}", "resources": {"requests": {"kubernetes.io/batch-cpu": q}}}
                                    for i, q in enumerate(batch_cpu)]}}


def be_scene(tmp_path: Path, version: int, driver: str) -> tuple[Scene, str]:
    """The standard scene plus a BE pod (two containers) with cpusets and a CFS quota on the BE QoS dir."""
    scene = make_scene(tmp_path, version, driver)
    tree, layout = scene.tree, scene.tree.layout
    be = FakePod(layout, POD_D, "BestEffort", [("w1", CID_D1), ("w2", CID_D2)])
    be.pod = be_pod_spec("BE", "2000", "1000")            # 3000m
    scene.pods[POD_A].pod = be_pod_spec("LS", "5000")     # batch-cpu of a non-BE pod: not counted
    scene.pods[POD_C].pod = be_pod_spec("BE", "-5", "500")  # negative requests are left out: 500m
    scene.states.pod_list.append(be)
    qos = layout.qos_dir("BestEffort")
    tree.cgroup(qos, cpu_ns=50_000_000_000)
    tree.cgroup(be.cgroup_dir, cpu_ns=0)
    for cid in (CID_D1, CID_D2):
        tree.cgroup(be.container_dir(cid), cpu_ns=0)
    if version == 1:
        write(tree.file("cpuset", qos, "cpuset.cpus"), "0-3\n")
        write(tree.file("cpu", qos, "cpu.cfs_quota_us"), "150000\n")
        write(tree.file("cpu", qos, "cpu.cfs_period_us"), "100000\n")
    else:
        # v2: an empty own list is the parent's; the effective file says what it is
        write(tree.file("cpuset", qos, "cpuset.cpus"), "\n")
        write(tree.file("cpuset", qos, "cpuset.cpus.effective"), "0-3\n")
        write(tree.file("cpu", qos, "cpu.max"), "150000 100000\n")
    # the suppress strategy narrows bottom-up: one container already has 2 CPUs
    write(tree.file("cpuset", be.container_dir(CID_D1), "cpuset.cpus"), "1-2\n")
    write(tree.file("cpuset", be.container_dir(CID_D2), "cpuset.cpus"), "0-3\n")
    return scene, qos


def be_values(scene: Scene, at: float) -> dict[str, float]:
    return {alloc: one(scene.cache, kinds.NODE_BE, at, be_resource="cpu", be_allocation=alloc)
            for alloc in ("usage", "request", "real-limit")}


@pytest.mark.parametrize("version, driver", LAYOUTS, ids=LAYOUT_IDS)
def test_be_resource_collector_hand_computed(tmp_path, version, driver):
    scene, qos = be_scene(tmp_path, version, driver)
    scene.advisor.collect_once()
    # First round: usage 0 (baseline only); request 3000 + 500; limit min(2 CPUs, 150000/100000) = 1500.
    assert be_values(scene, 1000.0) == {"usage": 0, "request": 3500, "real-limit": 1500}
    # 3 s of CPU time in 2 s = 1500m; quota lifted: the limit is the smallest cpuset, 2 CPUs.
    scene.tree.cgroup(qos, cpu_ns=53_000_000_000)
    if version == 1:
        write(scene.tree.file("cpu", qos, "cpu.cfs_quota_us"), "-1\n")
    else:
        write(scene.tree.file("cpu", qos, "cpu.max"), "max 100000\n")
    scene.clock.now = 1002.0
    scene.advisor.collect_once()
    assert be_values(scene, 1002.0) == {"usage": 1500, "request": 3500, "real-limit": 2000}
    assert scene.advisor.last_round()["be_cpu"] == {"usage": 1500, "request": 3500, "real-limit": 2000}


def test_be_resource_collector_writes_nothing_without_the_qos_files(tmp_path, caplog):
    scene, qos = be_scene(tmp_path, 2, "systemd")
    os.remove(scene.tree.file("cpu", qos, "cpu.max"))
    with caplog.at_level(logging.WARNING):
        scene.advisor.collect_once()
    assert values(scene.cache, kinds.NODE_BE, 1000.0) == []
    assert any("BE resource collection skipped" in r.getMessage() and "cpu.max" in r.getMessage()
               for r in caplog.records)
    # the other collectors went on
    second_round(scene)
    scene.advisor.collect_once()
    assert one(scene.cache, kinds.NODE_MEMORY_USAGE, 1002.0) == NODE_MEMORY
    assert values(scene.cache, kinds.NODE_BE, 1002.0) == []


def test_be_resource_units():
    from koordinator_roles.koordlet.metricsadvisor.beresource import (be_pod_request_milli, real_limit_milli,
                                                                       usage_milli)
    assert real_limit_milli(4, -1, 100000) == 4000
    assert real_limit_milli(4, 250000, 100000) == 2500
    assert real_limit_milli(2, 250000, 100000) == 2000
    assert usage_milli(1_999_999, 0.001) == 1999          # int(), not rounding
    assert usage_milli(-5, 1.0) == 0 and usage_milli(5, 0) == 0
    assert be_pod_request_milli(be_pod_spec("BE", "1k", "250")) == 1250
    assert be_pod_request_milli(be_pod_spec("LS", "1000")) == 0
    assert be_pod_request_milli(None) == 0
