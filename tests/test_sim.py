"""Simulated nodes: the fake kernel tree's formats, the usage profiles, and the simulator as a kubelet."""

from __future__ import annotations

import math
import queue
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator.runtime.informer import InformerFactory
from koordinator.sim import profiles, tree
from koordinator.sim.profiles import ProfileError, Ramp, Sine, Square, Steady, UsageModel, parse_curve
from koordinator.sim.simulator import NodeSimulator, container_id
from koordinator.sim.tree import CgroupStats, CpuTimes, Memory, NodeTree, Topology, TreeError
from tests.waiting import wait_until

GI, MI = 1 << 30, 1 << 20
T0 = 1_700_000_000.0


# -- independent parsers of the kernel formats (as a koordlet would read them) -------------------------

def read(path: Path) -> str:
    return path.read_text(encoding="ascii")


def parse_proc_stat(text: str) -> dict[str, list[int]]:
    """{"cpu": [user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice], "cpu0": ...}"""
    out = {}
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0].startswith("cpu"):
            out[fields[0]] = [int(f) for f in fields[1:]]
    return out


def busy(ticks: list[int]) -> int:
    """user + nice + system + irq + softirq (what the koordlet counts as used)."""
    return ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6]


def parse_meminfo(text: str, prefix: str = "") -> dict[str, int]:
    """Values in kB (``Node N `` prefix stripped for NUMA meminfo)."""
    out = {}
    for line in text.splitlines():
        assert line.startswith(prefix), line
        key, _, rest = line[len(prefix):].partition(":")
        parts = rest.split()
        assert len(parts) in (1, 2) and (len(parts) == 1 or parts[1] == "kB"), line
        out[key.strip()] = int(parts[0])
    return out


def parse_flat_keyed(text: str) -> dict[str, int]:
    out = {}
    for line in text.splitlines():
        key, value = line.split()
        out[key] = int(value)
    return out


class FakeClock:
    def __init__(self, now: float = T0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# -- topology and /proc, /sys formats ---------------------------------------------------------------

def test_topology_numbers_cpus_like_linux():
    topo = Topology.for_cpus(32)
    assert (topo.sockets, topo.cores_per_socket, topo.threads_per_core, topo.numa_nodes) == (2, 8, 2, 2)
    assert topo.place(0) == (0, 0, 0) and topo.place(8) == (0, 1, 0) and topo.place(16) == (0, 0, 1)
    assert tree.cpulist(topo.cpus_of_numa(0)) == "0-7,16-23" and tree.cpulist(topo.siblings(3)) == "3,19"
    assert Topology.for_cpus(4) == Topology(1, 2, 2)
    assert Topology.for_cpus(6) == Topology(1, 3, 2)
    assert Topology.for_cpus(1) == Topology(1, 1, 1)
    assert tree.cpulist([5, 0, 1, 2]) == "0-2,5"
    assert tree.split_even(10, 3) == [4, 3, 3] and tree.split_even(3 * 4096 + 5, 2, 4096) == [2 * 4096 + 5, 4096]


def test_static_files_of_a_new_tree(tmp_path):
    t = NodeTree(tmp_path, "n1", Topology(2, 2, 2), 16 * GI)
    t.create(boot_time=T0)
    sysfs = tmp_path / "n1/sys/devices/system"
    assert read(sysfs / "cpu/online") == "0-7\n"
    assert read(sysfs / "cpu/cpu5/topology/core_id") == "1\n"
    assert read(sysfs / "cpu/cpu5/topology/physical_package_id") == "0\n"
    assert read(sysfs / "cpu/cpu6/topology/physical_package_id") == "1\n"
    assert read(sysfs / "node/node1/cpulist") == "2-3,6-7\n"
    assert read(sysfs / "node/node0/hugepages/hugepages-2048kB/nr_hugepages") == "0\n"
    numa = parse_meminfo(read(sysfs / "node/node1/meminfo"), "Node 1 ")
    assert numa["MemTotal"] == 8 * GI // 1024 and numa["MemFree"] == numa["MemTotal"]
    cpuinfo = read(tmp_path / "n1/proc/cpuinfo")
    assert cpuinfo.count("processor\t:") == 8
    assert cpuinfo.count(f"model name\t: {tree.DEFAULT_MODEL}\n") == 8 and "vendor_id\t: GenuineIntel" in cpuinfo
    stat = parse_proc_stat(read(tmp_path / "n1/proc/stat"))
    assert set(stat) == {"cpu", *(f"cpu{i}" for i in range(8))} and all(len(v) == 10 for v in stat.values())
    assert f"btime {int(T0)}\n" in read(tmp_path / "n1/proc/stat")
    assert read(tmp_path / "n1/cgroup/cgroup.controllers").split() == tree.V2_CONTROLLERS.split()
    for rel in ("kubepods.slice", "kubepods.slice/kubepods-burstable.slice", "kubepods.slice/kubepods-besteffort.slice"):
        assert parse_flat_keyed(read(tmp_path / "n1/cgroup" / rel / "cpu.stat"))["usage_usec"] == 0


def test_proc_stat_cpu_line_is_the_sum_converted_once():
    per_cpu = [CpuTimes(user=15_000_000, idle=1_000_000_000), CpuTimes(user=15_000_000, system=9_999_999)]
    stat = parse_proc_stat(tree.format_proc_stat(per_cpu, boot_time=1))
    assert stat["cpu0"][:4] == [1, 0, 0, 100] and stat["cpu1"][:4] == [1, 0, 0, 0]
    assert stat["cpu"][:4] == [3, 0, 0, 100]  # 30 ms of user time is 3 ticks, not 1 + 1


def test_meminfo_available_is_total_minus_used():
    info = parse_meminfo(tree.format_meminfo(Memory(total=8 * GI, used=3 * GI, cache=GI)))
    assert info["MemTotal"] == 8 * GI // 1024
    assert info["MemAvailable"] == 5 * GI // 1024 and info["MemFree"] == 4 * GI // 1024
    assert info["Cached"] == GI // 1024 and info["Active(file)"] + info["Inactive(file)"] == GI // 1024
    assert info["Active(anon)"] + info["Inactive(anon)"] == 3 * GI // 1024
    over = parse_meminfo(tree.format_meminfo(Memory(total=GI, used=2 * GI)))
    assert over["MemFree"] == 0 and over["MemAvailable"] == 0


# -- cgroup names and files ----------------------------------------------------------------------------

UID = "6e3e2f1c-0d4b-4bb2-9a53-1b2c3d4e5f60"
CID = "containerd://" + "ab" * 32


@pytest.mark.parametrize("driver, qos, pod, container", [
    ("systemd", "Guaranteed", f"kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice",
     f"kubepods.slice/kubepods-pod{UID.replace('-', '_')}.slice/cri-containerd-{'ab' * 32}.scope"),
    ("systemd", "Burstable",
     f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice",
     f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID.replace('-', '_')}.slice/"
     f"cri-containerd-{'ab' * 32}.scope"),
    ("systemd", "BestEffort",
     f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID.replace('-', '_')}.slice", None),
    ("cgroupfs", "Guaranteed", f"kubepods/pod{UID}", f"kubepods/pod{UID}/{'ab' * 32}"),
    ("cgroupfs", "Burstable", f"kubepods/burstable/pod{UID}", f"kubepods/burstable/pod{UID}/{'ab' * 32}"),
    ("cgroupfs", "BestEffort", f"kubepods/besteffort/pod{UID}", None),
])
def test_cgroup_directory_names_are_the_kubelets(driver, qos, pod, container):
    assert tree.pod_dir(driver, qos, UID) == pod
    if container:
        assert tree.container_dir(driver, qos, UID, CID) == container
    with pytest.raises(ValueError, match="'abc'"):
        tree.container_dir(driver, qos, UID, "abc")


def test_v2_cgroup_files(tmp_path):
    t = NodeTree(tmp_path, "n", Topology(2, 1, 1), 4 * GI)
    t.create(T0)
    rel = tree.pod_dir("systemd", "Burstable", UID)
    stats = CgroupStats(usage_ns=1_500_000_999, user_ns=1_200_000_000, system_ns=300_000_999, nr_periods=10,
                        nr_throttled=4, throttled_ns=2_000_000, anon=100 * MI, file=3 * 4096,
                        cpu_quota_us=50_000, memory_limit=GI, cpus="0-1", mems="0-1")
    t.add_cgroups(rel, [(rel, stats)])
    d = tmp_path / "n/cgroup" / rel
    assert parse_flat_keyed(read(d / "cpu.stat")) == {
        "usage_usec": 1_500_000, "user_usec": 1_200_000, "system_usec": 300_000, "nr_periods": 10,
        "nr_throttled": 4, "throttled_usec": 2000, "nr_bursts": 0, "burst_usec": 0}
    mem = parse_flat_keyed(read(d / "memory.stat"))
    assert mem["anon"] == 100 * MI and mem["file"] == 3 * 4096
    assert mem["active_anon"] + mem["inactive_anon"] + mem["unevictable"] == 100 * MI
    assert mem["active_file"] + mem["inactive_file"] == 3 * 4096
    assert read(d / "memory.current") == f"{100 * MI + 3 * 4096}\n"
    assert read(d / "memory.max") == f"{GI}\n" and read(d / "cpu.max") == "50000 100000\n"
    numa = {line.split()[0]: {kv.split("=")[0]: int(kv.split("=")[1]) for kv in line.split()[1:]}
            for line in read(d / "memory.numa_stat").splitlines()}
    assert numa["anon"] == {"N0": 50 * MI, "N1": 50 * MI} and sum(numa["file"].values()) == 3 * 4096
    t.write_cgroup(rel, CgroupStats())
    assert read(d / "cpu.max") == "max 100000\n" and read(d / "memory.max") == "max\n"
    assert not list(d.glob(".*")), "no temporary files are left behind"


def test_v1_cgroup_files(tmp_path):
    t = NodeTree(tmp_path, "n", Topology(1, 1, 1), 4 * GI, cgroup_version=1, driver="cgroupfs")
    t.create(T0)
    assert not (tmp_path / "n/cgroup/cgroup.controllers").exists()
    rel = tree.pod_dir("cgroupfs", "Guaranteed", UID)
    crel = tree.container_dir("cgroupfs", "Guaranteed", UID, CID)
    stats = CgroupStats(usage_ns=2_500_000_000, user_ns=2_000_000_000, system_ns=500_000_000, nr_periods=7,
                        nr_throttled=3, throttled_ns=123, anon=64 * MI, file=MI, cpu_quota_us=100_000,
                        memory_limit=GI, leaf=True)
    t.add_cgroups(rel, [(rel, CgroupStats(anon=64 * MI, file=MI)), (crel, stats)])
    root = tmp_path / "n/cgroup"
    assert read(root / "cpuacct" / crel / "cpuacct.usage") == "2500000000\n"
    assert parse_flat_keyed(read(root / "cpuacct" / crel / "cpuacct.stat")) == {"user": 200, "system": 50}
    assert parse_flat_keyed(read(root / "cpu" / crel / "cpu.stat")) == {
        "nr_periods": 7, "nr_throttled": 3, "throttled_time": 123}
    assert read(root / "cpu" / crel / "cpu.cfs_quota_us") == "100000\n"
    assert read(root / "memory" / crel / "memory.limit_in_bytes") == f"{GI}\n"
    assert read(root / "memory" / rel / "memory.limit_in_bytes") == f"{tree.V1_UNLIMITED}\n"
    assert read(root / "memory" / crel / "memory.usage_in_bytes") == f"{65 * MI}\n"
    for where, local in ((crel, 64 * MI), (rel, 0)):
        mem = parse_flat_keyed(read(root / "memory" / where / "memory.stat"))
        assert mem["total_active_anon"] + mem["total_inactive_anon"] + mem["total_unevictable"] == 64 * MI
        assert mem["total_rss"] == 64 * MI and mem["total_cache"] == MI
        assert mem["active_anon"] + mem["inactive_anon"] == local
    first = read(root / "memory" / crel / "memory.numa_stat").splitlines()[0]
    assert first == f"total={65 * MI // 4096} N0={65 * MI // 4096}"
    t.remove_cgroup(rel)
    for subsystem in tree.V1_SUBSYSTEMS:
        assert not (root / subsystem / rel).exists()
        assert [p.name for p in (root / subsystem / "kubepods").iterdir() if p.name.startswith(".")] == []


def test_a_tree_that_is_not_ours_is_left_alone(tmp_path):
    (tmp_path / "n1").mkdir()
    (tmp_path / "n1" / "precious").write_text("keep me")
    t = NodeTree(tmp_path, "n1", Topology(), GI)
    with pytest.raises(TreeError, match=r"n1: not empty and not a simulated node tree"):
        t.create(T0)
    assert (tmp_path / "n1" / "precious").read_text() == "keep me"
    ours = NodeTree(tmp_path, "n2", Topology(1, 1, 1), GI)
    ours.create(T0)
    (tmp_path / "n2/cgroup/stale").mkdir()
    ours.create(T0 + 5)  # a restart: our own tree is rebuilt
    assert not (tmp_path / "n2/cgroup/stale").exists()
    assert f"btime {int(T0) + 5}" in read(tmp_path / "n2/proc/stat")
    with pytest.raises(ValueError, match="'a/b'"):
        NodeTree(tmp_path, "a/b", Topology(), GI)


# -- profiles ---------------------------------------------------------------------------------------

def test_profile_grammar():
    assert parse_curve("500m", "cpu") == Steady(500.0)
    assert parse_curve("2", "cpu") == Steady(2000.0)
    assert parse_curve("1Gi", "memory") == Steady(float(GI))
    sine = parse_curve("sine(min=200m, max=800m, period=60s)", "cpu")
    assert sine == Sine(200.0, 800.0, 60.0)
    assert sine(0) == pytest.approx(500) and sine(15) == pytest.approx(800) and sine(45) == pytest.approx(200)
    assert parse_curve("sine(min=1Gi,max=2Gi,period=1m,phase=15s)", "memory")(0) == pytest.approx(2 * GI)
    ramp = parse_curve("ramp(from=0, to=2, duration=10s, delay=5s)", "cpu")
    assert ramp == Ramp(0.0, 2000.0, 10.0, 5.0)
    assert (ramp(0), ramp(5), ramp(10), ramp(15), ramp(100)) == (0, 0, 1000, 2000, 2000)
    square = parse_curve("square(low=100m,high=1,period=10s,duty=0.3)", "cpu")
    assert square == Square(100.0, 1000.0, 10.0, 0.3)
    assert (square(0), square(2.9), square(3), square(12)) == (1000, 1000, 100, 1000)


@pytest.mark.parametrize("text, needle", [
    ("", "empty"),
    ("lots", "'lots' is not a quantity"),
    ("-1", "negative"),
    ("sin(min=1,max=2,period=1s)", "unknown function 'sin'"),
    ("sine(min=1,max=2)", "missing period"),
    ("sine(min=3,max=2,period=1s)", "min is greater than max"),
    ("sine(min=1,max=2,period=0s)", "period must be positive"),
    ("sine(min=1,max=2,period=soon)", "period: 'soon' is not a duration"),
    ("sine(min=1,max=2,period=1s,speed=3)", "unknown argument 'speed'"),
    ("sine(min=1,min=2,max=3,period=1s)", "'min' given twice"),
    ("sine(min=1,max=2,period=1s", "cannot parse"),
    ("ramp(from=1,to=x,duration=1s)", "to: 'x' is not a quantity"),
    ("square(low=1,high=2,period=1s,duty=1.5)", "duty must be between 0 and 1"),
    ("square(low 1)", "is not key=value"),
])
def test_profile_grammar_errors(text, needle):
    with pytest.raises(ValueError) as err:
        parse_curve(text, "cpu")
    assert needle in str(err.value)


def pod_spec(containers: list[dict], annotations: dict | None = None, name: str = "p", node: str | None = None) -> dict:
    spec: dict = {"containers": containers}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations or {}}, "spec": spec}


def container(name: str, requests: dict | None = None, limits: dict | None = None) -> dict:
    resources = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": "nginx:1.27", "resources": resources}


def test_pod_profile_defaults_split_and_limits():
    pod = pod_spec([container("a", {"cpu": "1", "memory": "1Gi"}), container("b", {"cpu": "500m"}, {"cpu": "1"}),
                    container("c")])
    usage = UsageModel.for_pod(pod).at(0)
    assert [(u.name, u.cpu, u.memory) for u in usage] == [("a", 500, GI / 2), ("b", 250, 0), ("c", 0, 0)]
    # An annotated figure is shared by requests, each share capped by the container's limit.
    pod["metadata"]["annotations"] = {profiles.ANNOTATION_CPU: "3", profiles.ANNOTATION_MEMORY: "2Gi",
                                      profiles.ANNOTATION_PAGE_CACHE: "1Gi"}
    usage = UsageModel.for_pod(pod).at(0)
    assert [(u.cpu_demand, u.cpu) for u in usage] == [(2000, 2000), (1000, 1000), (0, 0)]
    assert [(u.memory, u.page_cache) for u in usage] == [(2 * GI, GI), (0, 0), (0, 0)]
    pod["metadata"]["annotations"][profiles.ANNOTATION_CPU] = "6"
    assert [(u.cpu_demand, u.cpu) for u in UsageModel.for_pod(pod).at(0)] == [(4000, 4000), (2000, 1000), (0, 0)]
    # Memory and page cache together stay within the limit.
    capped = pod_spec([container("m", {"memory": "1Gi"}, {"memory": "1Gi"})],
                      {profiles.ANNOTATION_MEMORY: "768Mi", profiles.ANNOTATION_PAGE_CACHE: "512Mi"})
    assert [(u.memory, u.page_cache) for u in UsageModel.for_pod(capped).at(0)] == [(768 * MI, 256 * MI)]
    # No requests: limits share, then an even split.
    even = pod_spec([container("x"), container("y")], {profiles.ANNOTATION_CPU: "1"})
    assert [u.cpu for u in UsageModel.for_pod(even).at(0)] == [500, 500]


def test_bad_annotations_fall_back_and_name_annotation_and_value():
    pod = pod_spec([container("a", {"cpu": "1"})], {profiles.ANNOTATION_CPU: "sine(min=1)",
                                                     profiles.ANNOTATION_MEMORY: "300Mi",
                                                     profiles.ANNOTATION_DURATION: "forever"})
    profile = profiles.pod_profile(pod)
    assert profile.cpu is None and profile.memory == Steady(300.0 * MI) and profile.duration is None
    messages = sorted(str(e) for e in profile.errors)
    assert messages == [
        "annotation sim.koordinator.sh/cpu='sine(min=1)': sine(): missing max, period; using the default",
        "annotation sim.koordinator.sh/duration='forever': 'forever' is not a duration (want e.g. 90s, 5m, 1h30m); "
        "the pod runs until deleted"]
    assert all(isinstance(e, ProfileError) for e in profile.errors)
    assert [u.cpu for u in UsageModel.for_pod(pod, profile).at(0)] == [500]
    assert profiles.pod_profile(pod_spec([], {profiles.ANNOTATION_DURATION: "1m30s"})).duration == 90
    assert profiles.pod_profile(pod_spec([], {profiles.ANNOTATION_DURATION: "0s"})).errors


def test_system_usage_annotation():
    def node(value):
        return {"metadata": {"name": "n", "annotations": {profiles.ANNOTATION_SYSTEM_USAGE: value}}}

    default, error = profiles.system_profile(None)
    assert error is None and default.cpu(0) == 250 and default.memory(0) == GI and default.page_cache(0) == 0
    parsed, error = profiles.system_profile(node("cpu=sine(min=1,max=3,period=1m), memory=2Gi,page-cache=512Mi"))
    assert error is None and parsed.cpu(15) == pytest.approx(3000)
    assert parsed.memory(0) == 2 * GI and parsed.page_cache(0) == 512 * MI
    only_cpu, _ = profiles.system_profile(node("cpu=1"))
    assert only_cpu.cpu(0) == 1000 and only_cpu.memory(0) == GI
    for bad, needle in (("cpu=lots", "cpu: 'lots' is not a quantity"), ("gpu=1", "'gpu=1': want cpu="),
                        ("cpu=1,cpu=2", "cpu given twice"), ("cpu=sine(min=1", "unbalanced")):
        parsed, error = profiles.system_profile(node(bad))
        assert parsed == profiles.SystemProfile()
        assert error is not None and needle in str(error) and f"sim.koordinator.sh/system-usage={bad!r}" in str(error)


# -- the simulator against the embedded API server -----------------------------------------------------

class Sim:
    """A NodeSimulator on its own informers with a fake clock; ticks only when the test says so."""

    def __init__(self, client: Client, root: Path, nodes: list[str], **kwargs) -> None:
        self.clock = FakeClock()
        self.informers = InformerFactory(client)
        self.sim = NodeSimulator(client, self.informers, root, nodes, clock=self.clock, interval=3600, **kwargs)
        self.sim.start()
        self.informers.start()
        assert self.sim.wait_for_sync(20), "the simulator should create its trees once the informers synced"

    def tick(self, seconds: float = 0.0) -> None:
        self.clock.now += seconds
        self.sim.tick()

    def stop(self) -> None:
        assert self.sim.stop(10)
        self.informers.stop(5)


@pytest.fixture
def node_names(client):
    """Unique node names (the session's server is shared); the Nodes are deleted afterwards."""
    names = [f"sim-{uuid.uuid4().hex[:8]}" for _ in range(2)]
    yield names
    for name in names:
        try:
            client.delete("Node", name)
        except NotFound:
            pass


def create_node(client: Client, name: str, cpu: str = "4", memory: str = "8Gi", annotations: dict | None = None) -> None:
    client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "annotations": annotations or {}},
                   "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                              "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}})


def running(client: Client, name: str, namespace: str) -> dict | None:
    pod = client.get("Pod", name, namespace)
    return pod if (pod.get("status") or {}).get("phase") == "Running" else None


@pytest.fixture
def sim_factory(client, tmp_path):
    sims: list[Sim] = []

    def make(nodes, **kwargs) -> Sim:
        sim = Sim(client, tmp_path / "nodes", nodes, **kwargs)
        sims.append(sim)
        return sim

    yield make
    for sim in sims:
        sim.stop()


def test_a_bound_pod_runs_and_its_usage_is_exact(client, namespace, node_names, sim_factory, tmp_path):
    node, other = node_names
    create_node(client, node, cpu="4", memory="8Gi")
    sim = sim_factory([node])
    pod = pod_spec([container("app", {"cpu": "1", "memory": "512Mi"}, {"memory": "1Gi"}),
                    container("sidecar", {"cpu": "1", "memory": "512Mi"})],
                   {profiles.ANNOTATION_CPU: "500m", profiles.ANNOTATION_MEMORY: "256Mi"}, name="web", node=node)
    created = client.create(pod, namespace=namespace)
    stranger = client.create(pod_spec([container("x")], name="elsewhere", node=other), namespace=namespace)
    uid = created["metadata"]["uid"]

    live = wait_until(lambda: running(client, "web", namespace), message="the pod is Running")
    status = live["status"]
    assert status["qosClass"] == "Burstable" and status["hostIP"] == "127.0.0.1" and status["podIP"].startswith("10.")
    assert status["startTime"] == "2023-11-14T22:13:20Z"  # the fake clock's T0
    assert {c["type"]: c["status"] for c in status["conditions"]} == {
        "PodReadyToStartContainers": "True", "Initialized": "True", "Ready": "True", "ContainersReady": "True",
        "PodScheduled": "True"}
    by_name = {c["name"]: c for c in status["containerStatuses"]}
    assert set(by_name) == {"app", "sidecar"}
    for name, c in by_name.items():
        assert c["containerID"] == container_id(uid, name)
        assert len(c["containerID"]) == len("containerd://") + 64
        assert c["ready"] and c["started"] and c["restartCount"] == 0 and c["image"] == "nginx:1.27"
        assert c["state"]["running"]["startedAt"] == status["startTime"] and c["imageID"].startswith("nginx@sha256:")
    assert container_id(uid, "app") == container_id(uid, "app") != container_id(uid, "sidecar")

    cg = tmp_path / "nodes" / node / "cgroup"
    pod_dir = cg / tree.pod_dir("systemd", "Burstable", uid)
    app_dir = cg / tree.container_dir("systemd", "Burstable", uid, container_id(uid, "app"))
    assert pod_dir.is_dir() and app_dir.is_dir()
    proc = tmp_path / "nodes" / node / "proc"
    stat0 = parse_proc_stat(read(proc / "stat"))

    sim.tick(1.0)
    assert parse_flat_keyed(read(pod_dir / "cpu.stat"))["usage_usec"] == 500_000
    assert parse_flat_keyed(read(app_dir / "cpu.stat"))["usage_usec"] == 250_000
    stat1 = parse_proc_stat(read(proc / "stat"))
    sim.tick(1.0)
    cpu = parse_flat_keyed(read(pod_dir / "cpu.stat"))
    assert cpu["usage_usec"] == 1_000_000 and cpu["user_usec"] + cpu["system_usec"] == 1_000_000
    assert cpu["nr_periods"] == 0  # no CPU limit on every container: no quota on the pod
    assert read(pod_dir / "cpu.max") == "max 100000\n" and read(app_dir / "memory.max") == f"{GI}\n"
    stat2 = parse_proc_stat(read(proc / "stat"))
    # (500m of the pod + 250m of the system) × 100 ticks per second, over 4 CPUs.
    assert busy(stat1["cpu"]) - busy(stat0["cpu"]) == 75 and busy(stat2["cpu"]) - busy(stat1["cpu"]) == 75
    assert stat2["cpu"][3] - stat1["cpu"][3] == 4 * 100 - 75
    # Spread evenly: 375 ms of each CPU; every column is rounded down on its own, as the kernel does.
    assert all(36 <= busy(stat2[f"cpu{i}"]) <= 38 for i in range(4)), stat2

    mem = parse_flat_keyed(read(pod_dir / "memory.stat"))
    assert mem["anon"] == 256 * MI and mem["active_anon"] + mem["inactive_anon"] + mem["unevictable"] == 256 * MI
    assert int(read(pod_dir / "memory.current")) == 256 * MI
    assert parse_flat_keyed(read(app_dir / "memory.stat"))["anon"] == 128 * MI
    burstable = cg / "kubepods.slice/kubepods-burstable.slice"
    assert parse_flat_keyed(read(burstable / "cpu.stat"))["usage_usec"] == 1_000_000
    assert parse_flat_keyed(read(cg / "kubepods.slice/memory.stat"))["anon"] == 256 * MI
    meminfo = parse_meminfo(read(proc / "meminfo"))
    assert meminfo["MemTotal"] == 8 * GI // 1024
    assert meminfo["MemAvailable"] == (8 * GI - GI - 256 * MI) // 1024  # minus the system's 1Gi and the pod
    numa = [parse_meminfo(read(tmp_path / "nodes" / node / f"sys/devices/system/node/node{i}/meminfo"), f"Node {i} ")
            for i in range(1)]
    assert numa[0]["MemTotal"] - numa[0]["MemFree"] == (GI + 256 * MI) // 1024

    # The pod of a node this simulator does not simulate is left alone.
    sim.sim.sync()
    untouched = client.get("Pod", "elsewhere", namespace)["status"]
    assert untouched.get("phase") in (None, "Pending") and "containerStatuses" not in untouched
    assert stranger["metadata"]["uid"] not in str(list(cg.rglob("*pod*")))

    # Deleted: its directories go, the QoS directory keeps the CPU it used.
    client.delete("Pod", "web", namespace)
    wait_until(lambda: not pod_dir.exists(), message="the deleted pod's cgroup directory is removed")
    sim.tick(1.0)
    assert parse_flat_keyed(read(burstable / "cpu.stat"))["usage_usec"] == 1_000_000
    assert parse_meminfo(read(proc / "meminfo"))["MemAvailable"] == 7 * GI // 1024


def test_cgroup_v1_cgroupfs_and_throttling(client, namespace, node_names, sim_factory, tmp_path):
    node = node_names[0]
    create_node(client, node, cpu="2", memory="4Gi")
    sim = sim_factory([node], cgroup_version=1, cgroup_driver="cgroupfs")
    pod = pod_spec([container("main", {"cpu": "500m", "memory": "256Mi"}, {"cpu": "500m", "memory": "256Mi"})],
                   {profiles.ANNOTATION_CPU: "1", profiles.ANNOTATION_MEMORY: "128Mi"}, name="busy", node=node)
    uid = client.create(pod, namespace=namespace)["metadata"]["uid"]
    wait_until(lambda: running(client, "busy", namespace), message="the pod is Running")
    cg = tmp_path / "nodes" / node / "cgroup"
    rel = tree.pod_dir("cgroupfs", "Guaranteed", uid)
    crel = tree.container_dir("cgroupfs", "Guaranteed", uid, container_id(uid, "main"))
    assert rel == f"kubepods/pod{uid}" and (cg / "cpuacct" / crel).is_dir()
    sim.tick(1.0)
    sim.tick(1.0)
    # It wants a whole CPU, its limit is 500m: it gets 500m and half its periods are throttled.
    assert read(cg / "cpuacct" / crel / "cpuacct.usage") == f"{1_000_000_000}\n"
    assert read(cg / "cpuacct" / rel / "cpuacct.usage") == f"{1_000_000_000}\n"
    assert parse_flat_keyed(read(cg / "cpu" / crel / "cpu.stat")) == {
        "nr_periods": 20, "nr_throttled": 10, "throttled_time": 1_000_000_000}
    assert read(cg / "cpu" / crel / "cpu.cfs_quota_us") == "50000\n"
    assert read(cg / "cpu" / rel / "cpu.cfs_quota_us") == "50000\n"
    mem = parse_flat_keyed(read(cg / "memory" / crel / "memory.stat"))
    assert mem["total_active_anon"] + mem["total_inactive_anon"] + mem["total_unevictable"] == 128 * MI
    assert read(cg / "memory" / crel / "memory.usage_in_bytes") == f"{128 * MI}\n"
    assert read(cg / "memory" / crel / "memory.limit_in_bytes") == f"{256 * MI}\n"
    assert parse_flat_keyed(read(cg / "cpuacct/kubepods/cpuacct.stat"))["user"] == 80  # 4/5 of 100 ticks
    stat = parse_proc_stat(read(tmp_path / "nodes" / node / "proc/stat"))
    assert busy(stat["cpu"]) == 2 * (50 + 25)


def test_a_pod_with_a_duration_succeeds_and_its_directories_go(client, namespace, node_names, sim_factory,
                                                               tmp_path):
    node = node_names[0]
    sim = sim_factory([node])  # no Node object: 32 CPUs, 128Gi
    pod = pod_spec([container("job", {"cpu": "1"})], {profiles.ANNOTATION_DURATION: "5s"}, name="job", node=node)
    uid = client.create(pod, namespace=namespace)["metadata"]["uid"]
    wait_until(lambda: running(client, "job", namespace), message="the pod is Running")
    pod_dir = tmp_path / "nodes" / node / "cgroup" / tree.pod_dir("systemd", "Burstable", uid)
    assert len(list((tmp_path / "nodes" / node / "sys/devices/system/cpu").glob("cpu[0-9]*"))) == 32
    sim.tick(4.0)
    assert parse_flat_keyed(read(pod_dir / "cpu.stat"))["usage_usec"] == 2_000_000
    assert (client.get("Pod", "job", namespace)["status"]["phase"]) == "Running"
    sim.tick(2.0)
    status = client.get("Pod", "job", namespace)["status"]
    assert status["phase"] == "Succeeded"
    (c,) = status["containerStatuses"]
    assert c["state"]["terminated"]["exitCode"] == 0 and c["state"]["terminated"]["reason"] == "Completed"
    assert c["state"]["terminated"]["finishedAt"] == "2023-11-14T22:13:25Z" and not c["ready"]
    assert {x["type"]: x["status"] for x in status["conditions"]}["Ready"] == "False"
    assert not pod_dir.exists()
    sim.tick(1.0)  # nothing more happens to a finished pod
    assert client.get("Pod", "job", namespace)["status"]["phase"] == "Succeeded" and not pod_dir.exists()


def test_a_pod_with_an_exit_code_fails_when_its_duration_ends(client, namespace, node_names, sim_factory, tmp_path):
    node = node_names[0]
    sim = sim_factory([node])
    pod = pod_spec([container("job", {"cpu": "1"})], {profiles.ANNOTATION_DURATION: "3s",
                                                       profiles.ANNOTATION_EXIT_CODE: "3"}, name="crash", node=node)
    uid = client.create(pod, namespace=namespace)["metadata"]["uid"]
    wait_until(lambda: running(client, "crash", namespace), message="the pod is Running")
    sim.tick(2.0)
    assert client.get("Pod", "crash", namespace)["status"]["phase"] == "Running"
    sim.tick(2.0)
    status = client.get("Pod", "crash", namespace)["status"]
    assert status["phase"] == "Failed"
    (c,) = status["containerStatuses"]
    assert c["state"]["terminated"]["exitCode"] == 3 and c["state"]["terminated"]["reason"] == "Error"
    assert {x["type"]: x.get("reason") for x in status["conditions"]}["Ready"] == "PodFailed"
    assert not (tmp_path / "nodes" / node / "cgroup" / tree.pod_dir("systemd", "Burstable", uid)).exists()


def test_exit_code_annotation_is_validated():
    assert profiles.pod_profile(pod_spec([], {profiles.ANNOTATION_EXIT_CODE: "137"})).exit_code == 137
    assert profiles.pod_profile(pod_spec([], {})).exit_code == 0
    for bad, needle in (("boom", "'boom' is not an integer"), ("256", "must be from 0 to 255"),
                        ("-1", "must be from 0 to 255")):
        profile = profiles.pod_profile(pod_spec([], {profiles.ANNOTATION_EXIT_CODE: bad}))
        (error,) = profile.errors
        assert profile.exit_code == 0 and str(error) == (
            f"annotation sim.koordinator.sh/exit-code={bad!r}: {needle}; the pod exits with 0")


def test_a_bad_annotation_gives_the_default_and_a_warning_event(client, namespace, node_names, sim_factory,
                                                               tmp_path):
    node = node_names[0]
    create_node(client, node, annotations={profiles.ANNOTATION_SYSTEM_USAGE: "cpu=1,memory=2Gi"})
    sim = sim_factory([node])
    pod = pod_spec([container("c", {"cpu": "400m"})], {profiles.ANNOTATION_CPU: "lots"}, name="odd", node=node)
    uid = client.create(pod, namespace=namespace)["metadata"]["uid"]
    wait_until(lambda: running(client, "odd", namespace), message="the pod runs anyway")

    def events() -> list[dict]:
        return [e for e in client.list("Event", namespace)["items"]
                if e.get("reason") == profiles.REASON_INVALID and e["involvedObject"].get("name") == "odd"]

    (event,) = wait_until(events, message="a Warning event about the annotation")
    assert event["type"] == "Warning" and event["involvedObject"]["uid"] == uid
    assert "sim.koordinator.sh/cpu='lots'" in event["message"] and "using the default" in event["message"]
    sim.tick(1.0)
    pod_dir = tmp_path / "nodes" / node / "cgroup" / tree.pod_dir("systemd", "Burstable", uid)
    assert parse_flat_keyed(read(pod_dir / "cpu.stat"))["usage_usec"] == 200_000  # 50 % of the request
    stat = parse_proc_stat(read(tmp_path / "nodes" / node / "proc/stat"))
    assert busy(stat["cpu"]) == 120  # the pod's 200m and the node annotation's 1 CPU
    assert parse_meminfo(read(tmp_path / "nodes" / node / "proc/meminfo"))["MemAvailable"] == 6 * GI // 1024


def test_a_changed_annotation_changes_the_usage(client, namespace, node_names, sim_factory, tmp_path):
    node = node_names[0]
    sim = sim_factory([node])
    pod = pod_spec([container("c")], {profiles.ANNOTATION_CPU: "500m"}, name="dial", node=node)
    uid = client.create(pod, namespace=namespace)["metadata"]["uid"]
    wait_until(lambda: running(client, "dial", namespace), message="the pod is Running")
    pod_dir = tmp_path / "nodes" / node / "cgroup" / tree.pod_dir("systemd", "BestEffort", uid)
    sim.tick(1.0)
    assert parse_flat_keyed(read(pod_dir / "cpu.stat"))["usage_usec"] == 500_000
    client.patch("Pod", "dial", {"metadata": {"annotations": {profiles.ANNOTATION_CPU: "2",
                                                              profiles.ANNOTATION_MEMORY: "64Mi"}}},
                 namespace=namespace)
    store = sim.informers.informer("Pod").store
    wait_until(lambda: store.get(f"{namespace}/dial")["metadata"]["annotations"][profiles.ANNOTATION_CPU] == "2",
               message="the informer sees the new annotation")
    sim.tick(1.0)
    assert parse_flat_keyed(read(pod_dir / "cpu.stat"))["usage_usec"] == 2_500_000
    assert parse_flat_keyed(read(pod_dir / "memory.stat"))["anon"] == 64 * MI


def test_terminating_pods_are_deleted_with_grace_zero(fresh_apiserver, tmp_path):
    fresh_apiserver.start("--pod-deletion", "graceful")
    client = Client.from_kubeconfig(str(fresh_apiserver.kubeconfig), qps=0)
    sim = None
    try:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "work"}})
        sim = Sim(client, tmp_path / "nodes", ["n1"])
        uid = client.create(pod_spec([container("c")], name="p", node="n1"), namespace="work")["metadata"]["uid"]
        wait_until(lambda: running(client, "p", "work"), message="the pod is Running")
        pod_dir = tmp_path / "nodes/n1/cgroup" / tree.pod_dir("systemd", "BestEffort", uid)
        assert pod_dir.is_dir()
        client.delete("Pod", "p", "work")

        def gone() -> bool:
            try:
                client.get("Pod", "p", "work")
                return False
            except NotFound:
                return True

        wait_until(gone, message="the simulator deletes the terminating pod with grace 0")
        assert not pod_dir.exists()
    finally:
        if sim is not None:
            sim.stop()
        client.close()


def test_restart_rebuilds_the_tree_and_adopts_running_pods(client, namespace, node_names, tmp_path):
    node = node_names[0]
    first = Sim(client, tmp_path / "nodes", [node])
    try:
        uid = client.create(pod_spec([container("c", {"cpu": "1"})], name="keep", node=node),
                            namespace=namespace)["metadata"]["uid"]
        started = wait_until(lambda: running(client, "keep", namespace))["status"]["startTime"]
        first.tick(3.0)
    finally:
        first.stop()
    second = Sim(client, tmp_path / "nodes", [node])
    try:
        pod_dir = tmp_path / "nodes" / node / "cgroup" / tree.pod_dir("systemd", "Burstable", uid)
        wait_until(pod_dir.is_dir, message="the running pod is adopted")
        assert parse_flat_keyed(read(pod_dir / "cpu.stat"))["usage_usec"] == 0  # a reboot: counters from 0
        second.tick(1.0)
        assert parse_flat_keyed(read(pod_dir / "cpu.stat"))["usage_usec"] == 500_000
        assert client.get("Pod", "keep", namespace)["status"]["startTime"] == started
    finally:
        second.stop()


def test_simulator_rejects_bad_arguments(client, tmp_path):
    factory = InformerFactory(client)
    for kwargs, needle in (({"nodes": []}, "no nodes"), ({"nodes": ["a", "a"]}, "named twice: a"),
                           ({"nodes": ["a"], "cgroup_version": 3}, "cgroup version 3"),
                           ({"nodes": ["a"], "cgroup_driver": "x"}, "cgroup driver 'x'"),
                           ({"nodes": ["a"], "interval": 0}, "tick interval 0")):
        nodes = kwargs.pop("nodes")
        with pytest.raises(ValueError, match=needle):
            NodeSimulator(client, factory, tmp_path, nodes, **kwargs)
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "data").write_text("x")
    sim = NodeSimulator(client, factory, tmp_path, ["busy"])
    with pytest.raises(TreeError, match="busy: not empty"):
        sim.start()


# -- the subcommand ------------------------------------------------------------------------------------

def test_simulate_nodes_command_starts_and_stops_on_sigterm(apiserver, tmp_path):
    root = tmp_path / "trees"
    proc = subprocess.Popen([sys.executable, "-m", "koordinator", "simulate-nodes", "--kubeconfig",
                             str(apiserver.kubeconfig), "--root", str(root), "--nodes", "cmd-a,cmd-b",
                             "--tick", "100ms", "--cgroup-version", "1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True).start()
    try:
        seen = []
        while True:
            line = lines.get(timeout=60)
            seen.append(line)
            if "ready" in line:
                break
        assert seen[0].startswith("koordinator simulate-nodes: simulating 2 node(s) under")
        assert "cgroup v1, systemd driver, tick 100ms" in seen[0]
        assert seen[-1].strip() == "koordinator simulate-nodes: ready: cmd-a, cmd-b"
        for node in ("cmd-a", "cmd-b"):
            assert (root / node / "proc/stat").is_file() and (root / node / "cgroup/cpu/kubepods.slice").is_dir()

        def ticking() -> bool:
            return busy(parse_proc_stat(read(root / "cmd-a/proc/stat"))["cpu"]) > 0

        wait_until(ticking, 30, message="the system usage advances /proc/stat")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("argv, needle", [
    (["--nodes", "A"], "argument --nodes: invalid node name 'A'"),
    (["--nodes", "a,,b"], "argument --nodes: invalid node list 'a,,b'"),
    (["--nodes", "a,a"], "a named twice"),
    (["--nodes", "a", "--cgroup-version", "3"], "argument --cgroup-version: invalid choice: 3"),
    (["--nodes", "a", "--cgroup-driver", "docker"], "argument --cgroup-driver: invalid choice: 'docker'"),
    (["--nodes", "a", "--tick", "0s"], "argument --tick: invalid tick '0s'"),
    (["--nodes", "a", "--tick", "soon"], "argument --tick: invalid duration 'soon'"),
])
def test_simulate_nodes_bad_flags(argv, needle, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "koordinator", "simulate-nodes", "--root", str(tmp_path), *argv],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr


def test_simulate_nodes_without_a_cluster_or_with_a_foreign_root(apiserver, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "koordinator", "simulate-nodes", "--kubeconfig",
                           str(tmp_path / "missing"), "--root", str(tmp_path), "--nodes", "a"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr == (f"koordinator simulate-nodes: error: --kubeconfig "
                                                    f"{tmp_path / 'missing'}: no such file\n")
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "mine").write_text("x")
    proc = subprocess.run([sys.executable, "-m", "koordinator", "simulate-nodes", "--kubeconfig",
                           str(apiserver.kubeconfig), "--root", str(tmp_path), "--nodes", "a"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "not a simulated node tree" in proc.stderr and proc.stderr.count("\n") == 1
    assert (tmp_path / "a" / "mine").read_text() == "x"


def test_sim_package_imports_no_role():
    code = ("import sys, koordinator.sim.simulator, koordinator.sim.command; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('roles', 'koordinator_roles')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_integer_accounting_has_no_drift():
    """Per-CPU shares grow monotonically and always sum to the total."""
    from koordinator.sim.simulator import _share

    for n in (1, 3, 32):
        previous = [0] * n
        for total in range(0, 200, 7):
            shares = [_share(total, i, n) for i in range(n)]
            assert sum(shares) == total and all(a >= b for a, b in zip(shares, previous))
            previous = shares
    assert math.isclose(Sine(0, 2, 4)(1), 2)
