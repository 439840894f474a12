"""Simulated nodes obey the limits written into their cgroup trees (CFS quota, cpuset, memory limit),
as the koordlet's resource executor and CPU suppression write them. Time moves only through the
simulator's tick with a fake clock; every expected figure is worked out by hand below."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordinator.sim import profiles, tree
from koordinator.sim.limits import LimitReader, parse_cpu_max, parse_cpulist, parse_memory_limit, place_outside
from koordinator.sim.simulator import container_id
from tests.test_sim import (busy, container, create_node, node_names, parse_flat_keyed, parse_proc_stat,  # noqa: F401
                            pod_spec, read, running, sim_factory)
from tests.waiting import wait_until

MI = 1 << 20
SEC = 1_000_000_000
LAYOUTS = [(1, "cgroupfs"), (1, "systemd"), (2, "cgroupfs"), (2, "systemd")]
NO_SYSTEM = {profiles.ANNOTATION_SYSTEM_USAGE: "cpu=0,memory=0"}  # so /proc/stat holds the pods alone


class Files:
    """Reads and writes one node's cgroup files the way the koordlet does (in place)."""

    def __init__(self, base: Path, version: int, driver: str) -> None:
        self.root, self.version, self.driver = base / "cgroup", version, driver

    def path(self, subsystem: str, rel: str, name: str) -> Path:
        return (self.root / rel if self.version == 2 else self.root / subsystem / rel) / name

    def write(self, subsystem: str, rel: str, name: str, text: str) -> None:
        self.path(subsystem, rel, name).write_text(text)

    def quota(self, rel: str, cores: float | None) -> None:
        if self.version == 2:
            self.write("cpu", rel, "cpu.max", f"{'max' if cores is None else int(cores * 100_000)} 100000\n")
        else:
            self.write("cpu", rel, "cpu.cfs_quota_us", f"{-1 if cores is None else int(cores * 100_000)}\n")

    def cpuset(self, rel: str, cpus: str) -> None:
        self.write("cpuset", rel, "cpuset.cpus", cpus + "\n")

    def memory(self, rel: str, limit: int) -> None:
        self.write("memory", rel, "memory.max" if self.version == 2 else "memory.limit_in_bytes", f"{limit}\n")

    def usage_ns(self, rel: str) -> int:
        if self.version == 2:
            return parse_flat_keyed(read(self.path("", rel, "cpu.stat")))["usage_usec"] * 1000
        return int(read(self.path("cpuacct", rel, "cpuacct.usage")))

    def throttling(self, rel: str) -> tuple[int, int, int]:
        """(nr_periods, nr_throttled, throttled ns)."""
        stat = parse_flat_keyed(read(self.path("cpu", rel, "cpu.stat")))
        ns = stat["throttled_usec"] * 1000 if self.version == 2 else stat["throttled_time"]
        return stat["nr_periods"], stat["nr_throttled"], ns


def start_pod(client, namespace, sim, node, name, annotations, containers, restart_policy=None):
    spec = pod_spec(containers, annotations, name=name, node=node)
    if restart_policy:
        spec["spec"]["restartPolicy"] = restart_policy
    uid = client.create(spec, namespace=namespace)["metadata"]["uid"]
    wait_until(lambda: running(client, name, namespace), message=f"{name} is Running")
    return uid


@pytest.fixture(params=LAYOUTS, ids=[f"v{v}-{d}" for v, d in LAYOUTS])
def layout(request):
    return request.param


@pytest.fixture
def env(client, namespace, node_names, sim_factory, tmp_path, layout):
    version, driver = layout
    node = node_names[0]
    create_node(client, node, cpu="8", memory="16Gi", annotations=NO_SYSTEM)
    sim = sim_factory([node], cgroup_version=version, cgroup_driver=driver)
    return sim, node, Files(tmp_path / "nodes" / node, version, driver), driver


def test_cfs_quota_caps_usage_and_shows_throttling(client, namespace, env):
    sim, node, files, driver = env
    uid = start_pod(client, namespace, sim, node, "hungry", {profiles.ANNOTATION_CPU: "4"},
                    [container("main", {"cpu": "1"})])
    pod = tree.pod_dir(driver, "Burstable", uid)
    ctr = tree.container_dir(driver, "Burstable", uid, container_id(uid, "main"))
    files.quota(ctr, 2)  # 2 cores
    sim.tick(1.0)
    # Wants 4 cores, gets 2: 2 s of CPU in 1 s, and half of its 10 periods throttled (0.5 s short).
    assert files.usage_ns(ctr) == files.usage_ns(pod) == 2 * SEC
    assert files.throttling(ctr) == (10, 5, SEC // 2)
    # Lifting the limit gives it all it wants again; no more throttling.
    files.quota(ctr, None)
    sim.tick(1.0)
    assert files.usage_ns(ctr) == (2 + 4) * SEC
    assert files.throttling(ctr) == (10, 5, SEC // 2)
    # The same at the pod level.
    files.quota(pod, 2)
    sim.tick(1.0)
    assert files.usage_ns(pod) == (2 + 4 + 2) * SEC and files.throttling(pod)[:2] == (10, 5)
    stat = parse_proc_stat(read(files.root.parent / "proc/stat"))
    assert busy(stat["cpu"]) == 800  # 8 s of CPU over the three seconds, in ticks


def test_cpuset_caps_usage_and_places_it_on_its_cpus(client, namespace, env):
    sim, node, files, driver = env
    uid = start_pod(client, namespace, sim, node, "wide", {profiles.ANNOTATION_CPU: "8"},
                    [container("main", {"cpu": "1"})])
    ctr = tree.container_dir(driver, "Burstable", uid, container_id(uid, "main"))
    files.cpuset(ctr, "1-3")
    stat0 = parse_proc_stat(read(files.root.parent / "proc/stat"))
    sim.tick(1.0)
    # Wants 8 cores, its cpuset has 3 CPUs: 3 s of CPU, all of it on CPUs 1-3 (100 ticks each).
    assert files.usage_ns(ctr) == 3 * SEC
    stat1 = parse_proc_stat(read(files.root.parent / "proc/stat"))
    per_cpu = [busy(stat1[f"cpu{i}"]) - busy(stat0[f"cpu{i}"]) for i in range(8)]
    assert per_cpu == [0, 100, 100, 100, 0, 0, 0, 0]
    if files.version == 1:
        percpu = [int(n) for n in read(files.path("cpuacct", ctr, "cpuacct.usage_percpu")).split()]
        assert percpu == [0, SEC, SEC, SEC, 0, 0, 0, 0]
        assert read(files.path("cpuset", ctr, "cpuset.effective_cpus")) == "1-3\n"
    else:
        assert read(files.path("", ctr, "cpuset.cpus.effective")) == "1-3\n"
    assert files.throttling(ctr)[0] == 0  # a cpuset is no CFS quota: no periods counted
    files.cpuset(ctr, "")  # v2: inherit again; v1 rejects empty, so "" reads as no limit too
    sim.tick(1.0)
    assert files.usage_ns(ctr) == (3 + 8) * SEC


def test_besteffort_cpuset_is_shared_by_its_pods(client, namespace, env):
    sim, node, files, driver = env
    uids = [start_pod(client, namespace, sim, node, f"be-{i}", {profiles.ANNOTATION_CPU: "3"}, [container("main")])
            for i in range(2)]
    dirs = [tree.pod_dir(driver, "BestEffort", uid) for uid in uids]
    be = tree.qos_dir(driver, "BestEffort")
    files.cpuset(be, "0-3")
    sim.tick(1.0)
    # 4 CPUs for 6 cores of demand: 2 each (in proportion to their equal demands).
    assert [files.usage_ns(d) for d in dirs] == [2 * SEC, 2 * SEC]
    assert files.usage_ns(be) == 4 * SEC
    # A quota on the class caps it further: 1 core shared by both, and the class shows throttling.
    files.quota(be, 1)
    sim.tick(1.0)
    assert [files.usage_ns(d) for d in dirs] == [(2 + 0.5) * SEC] * 2
    periods, throttled, ns = files.throttling(be)  # 1 of the 6 cores wanted: 5/6 of each period short
    assert (periods, throttled) == (10, 8) and abs(ns - 833_333_333) < 1000
    # Lifted: each gets its 3 cores again.
    files.quota(be, None)
    files.cpuset(be, "0-7")
    sim.tick(1.0)
    assert [files.usage_ns(d) for d in dirs] == [(2 + 0.5 + 3) * SEC] * 2


@pytest.mark.parametrize("layout", [(1, "cgroupfs"), (2, "systemd")], ids=["v1-cgroupfs", "v2-systemd"])
def test_system_usage_runs_beside_a_cpuset_the_pods_fill(client, namespace, node_names, sim_factory, tmp_path,
                                                         layout, caplog):
    """The koordlet's CPU suppression shrinks the BE cpuset under BE pods wanting more: they fill those
    CPUs. The node's own processes are in no cpuset, so /proc/stat must still show pods + system (not
    the system's share clipped on the full CPUs: /proc/stat below pods + system, and a warning of
    overcommit on a node with idle CPUs)."""
    version, driver = layout
    node = node_names[0]
    create_node(client, node, cpu="8", memory="16Gi", annotations={profiles.ANNOTATION_SYSTEM_USAGE: "cpu=1,memory=0"})
    sim = sim_factory([node], cgroup_version=version, cgroup_driver=driver)
    files = Files(tmp_path / "nodes" / node, version, driver)
    uids = [start_pod(client, namespace, sim, node, f"be-{i}", {profiles.ANNOTATION_CPU: "3"}, [container("main")])
            for i in range(2)]
    files.cpuset(tree.qos_dir(driver, "BestEffort"), "0-3")
    stat0 = parse_proc_stat(read(files.root.parent / "proc/stat"))
    with caplog.at_level("WARNING", logger="koordinator.sim.simulator"):
        sim.tick(1.0)
    # The pods get the 4 CPUs of their cpuset (2 cores each); the system's 1 core goes where there is room.
    assert [files.usage_ns(tree.pod_dir(driver, "BestEffort", uid)) for uid in uids] == [2 * SEC, 2 * SEC]
    stat1 = parse_proc_stat(read(files.root.parent / "proc/stat"))
    per_cpu = [busy(stat1[f"cpu{i}"]) - busy(stat0[f"cpu{i}"]) for i in range(8)]
    assert per_cpu == [100, 100, 100, 100, 25, 25, 25, 25]
    assert busy(stat1["cpu"]) - busy(stat0["cpu"]) == 500  # 4 cores of pods + 1 of system, in ticks
    assert "want more than its CPUs" not in caplog.text


def test_place_outside_fills_room_and_reports_what_fits_nowhere():
    # Even while every CPU has room (remainder rotating from ``start``).
    assert place_outside(10, [0, 0, 0, 0], 100, 1) == ([2, 3, 3, 2], 0)
    # CPUs 0-1 full: their share goes to CPUs 2-3 in proportion to the room left after the even part (60 and 20).
    assert place_outside(40, [100, 100, 30, 70], 100, 0) == ([0, 0, 25, 15], 0)
    # The whole node full: what fits nowhere comes back.
    assert place_outside(40, [100, 90, 100, 95], 100, 0) == ([0, 10, 0, 5], 25)


def test_memory_over_the_limit_oom_kills_and_restarts(client, namespace, env):
    sim, node, files, driver = env
    uid = start_pod(client, namespace, sim, node, "leaky", {profiles.ANNOTATION_MEMORY: "128Mi"},
                    [container("main", {"cpu": "1", "memory": "128Mi"}, {"memory": "256Mi"})])
    first = container_id(uid, "main")
    pod = tree.pod_dir(driver, "Burstable", uid)
    ctr = tree.container_dir(driver, "Burstable", uid, first)
    sim.tick(1.0)
    files.memory(ctr, 64 * MI)  # lowered below what it uses
    sim.tick(1.0)
    status = client.get("Pod", "leaky", namespace)["status"]
    assert status["phase"] == "Running"
    (cs,) = status["containerStatuses"]
    assert cs["restartCount"] == 1 and cs["lastState"]["terminated"]["reason"] == "OOMKilled"
    assert cs["lastState"]["terminated"]["exitCode"] == 137 and cs["lastState"]["terminated"]["containerID"] == first
    assert cs["containerID"] == container_id(uid, "main", restarts=1) != first and "running" in cs["state"]
    # The restarted container is a new cgroup (the old one is gone) with the spec's limit again.
    new = tree.container_dir(driver, "Burstable", uid, cs["containerID"])
    assert not files.path("memory", ctr, "").exists() and files.path("memory", new, "").is_dir()
    if files.version == 2:
        events = parse_flat_keyed(read(files.path("", pod, "memory.events")))
        assert (events["max"], events["oom"], events["oom_kill"]) == (1, 1, 1)  # hierarchical on v2
        assert read(files.path("", new, "memory.max")) == f"{256 * MI}\n"
    else:
        oom = parse_flat_keyed(read(files.path("memory", pod, "memory.oom_control")))
        assert oom["oom_kill"] == 0  # v1 counts the kill in the victim's (now removed) cgroup only
        assert read(files.path("memory", new, "memory.limit_in_bytes")) == f"{256 * MI}\n"
    sim.tick(1.0)
    mem = read(files.path("memory", new, "memory.current" if files.version == 2 else "memory.usage_in_bytes"))
    assert int(mem) == 128 * MI  # back to its profile, under the limit: no second kill
    assert client.get("Pod", "leaky", namespace)["status"]["containerStatuses"][0]["restartCount"] == 1
    # The pod's limit counts too: the kernel kills the biggest container of the pod.
    files.memory(pod, 100 * MI)
    sim.tick(1.0)
    (cs,) = client.get("Pod", "leaky", namespace)["status"]["containerStatuses"]
    # Second crash: the kubelet backs off 10 s before starting it again.
    assert cs["restartCount"] == 1 and cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert cs["lastState"]["terminated"]["reason"] == "OOMKilled"
    files.memory(pod, 512 * MI)
    sim.tick(10.0)
    (cs,) = client.get("Pod", "leaky", namespace)["status"]["containerStatuses"]
    assert cs["restartCount"] == 2 and "running" in cs["state"]


def test_restart_policy_never_fails_the_pod(client, namespace, env):
    sim, node, files, driver = env
    uid = start_pod(client, namespace, sim, node, "once", {profiles.ANNOTATION_MEMORY: "128Mi"},
                    [container("main", {"cpu": "1", "memory": "128Mi"}, {"memory": "256Mi"})],
                    restart_policy="Never")
    files.memory(tree.container_dir(driver, "Burstable", uid, container_id(uid, "main")), 64 * MI)
    sim.tick(1.0)
    status = client.get("Pod", "once", namespace)["status"]
    assert status["phase"] == "Failed"
    (cs,) = status["containerStatuses"]
    assert cs["state"]["terminated"]["reason"] == "OOMKilled" and cs["state"]["terminated"]["exitCode"] == 137
    assert cs["restartCount"] == 0
    assert not files.path("memory", tree.pod_dir(driver, "Burstable", uid), "").exists()


def test_malformed_limit_files_are_no_limit(client, namespace, env):
    sim, node, files, driver = env
    uid = start_pod(client, namespace, sim, node, "odd", {profiles.ANNOTATION_CPU: "4",
                                                           profiles.ANNOTATION_MEMORY: "128Mi"},
                    [container("main", {"cpu": "1", "memory": "128Mi"}, {"memory": "256Mi"})])
    ctr = tree.container_dir(driver, "Burstable", uid, container_id(uid, "main"))
    files.write("cpu", ctr, "cpu.max" if files.version == 2 else "cpu.cfs_quota_us", "lots\n")
    files.cpuset(ctr, "3-1,x")
    files.memory(ctr, 0)
    files.write("memory", ctr, "memory.max" if files.version == 2 else "memory.limit_in_bytes", "64Mi\n")
    sim.tick(1.0)
    assert files.usage_ns(ctr) == 4 * SEC
    (cs,) = client.get("Pod", "odd", namespace)["status"]["containerStatuses"]
    assert cs["restartCount"] == 0 and "running" in cs["state"]


def test_parsers():
    assert parse_cpulist("0-2,5", 8) == frozenset({0, 1, 2, 5}) and parse_cpulist("6-40", 8) == frozenset({6, 7})
    assert parse_cpulist("", 8) is None and parse_cpulist("a", 8) is None and parse_cpulist("9", 8) is None
    assert parse_cpu_max("max 100000") is None and parse_cpu_max("50000 100000") == 500
    assert parse_cpu_max("150000") == 1500 and parse_cpu_max("x 1") is None and parse_cpu_max("1 0") is None
    assert parse_memory_limit("max") is None and parse_memory_limit(f"{tree.V1_UNLIMITED}") is None
    assert parse_memory_limit("1048576\n") == MI


def test_limit_reader_parses_only_changed_files(tmp_path):
    t = tree.NodeTree(tmp_path, "n", tree.Topology.for_cpus(4), 8 << 30)
    t.create(boot_time=0)
    reader = LimitReader(t)
    rel = tree.kubepods_dir(tree.SYSTEMD)
    assert reader.cpu(rel) is None and reader.memory(rel) is None and reader.cpus(rel) is None
    parses = reader.parses
    for _ in range(5):
        reader.limits(rel)
    assert reader.parses == parses  # unchanged files: stat only
    (t.cgroup_root / rel / "cpu.max").write_text("200000 100000\n")
    assert reader.cpu(rel) == 2000 and reader.parses == parses + 1
    (t.cgroup_root / rel / "cpu.max").unlink()
    assert reader.cpu(rel) is None


def test_limit_reader_keeps_the_value_over_a_writers_truncation(tmp_path):
    """The koordlet writes a cgroup file with O_TRUNC then write(); a tick falling in between must not lift
    the limit (a real cgroup never shows the empty file), while a file that stays empty does."""
    t = tree.NodeTree(tmp_path, "n", tree.Topology.for_cpus(4), 8 << 30)
    t.create(boot_time=0)
    reader = LimitReader(t)
    rel = tree.qos_dir(tree.SYSTEMD, tree.BEST_EFFORT)
    path = t.cgroup_root / rel / "cpuset.cpus"
    path.write_text("0-1\n")
    assert reader.cpus(rel) == frozenset({0, 1})
    path.write_text("")                     # truncated, the write not done yet
    assert reader.cpus(rel) == frozenset({0, 1})
    path.write_text("2\n")                  # the write lands
    assert reader.cpus(rel) == frozenset({2})
    path.write_text("")                     # emptied for good: inherited from the parent
    assert reader.cpus(rel) == frozenset({2})
    assert reader.cpus(rel) is None
