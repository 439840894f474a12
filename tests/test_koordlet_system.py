"""koordlet host access: HostPaths, the kubelet's cgroup layout (reference A.3.1), and the proc, sysfs and
cgroup readers (A.3.2, A.4.1, A.4.2), on small files written under tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from koordinator_roles.koordlet.system import CgroupLayout, HostPaths, SystemFileError, detect_layout, host_application_dir
from koordinator_roles.koordlet.system import procfs, sysfs
from koordinator_roles.koordlet.system.cgroup import parse_container_id
from koordinator_roles.koordlet.system.cgroupfs import CgroupReader, parse_numa_stat_v1, parse_numa_stat_v2
from koordinator_roles.koordlet.system.fileio import read_bytes

UID = "0b6f3a1c-2d4e-4f5a-8b9c-112233445566"
UID_ = UID.replace("-", "_")


def write(path: Path | str, content: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content)
    return path


# -- HostPaths ---------------------------------------------------------------------------------------


def test_host_paths_join_under_roots():
    paths = HostPaths(proc_root="/host/proc/", sys_root="/host/sys", cgroup_root="/host/cgroup")
    assert paths.proc("stat") == "/host/proc/stat"
    assert paths.proc() == "/host/proc"
    assert paths.sys("devices", "system", "node") == "/host/sys/devices/system/node"
    # a leading slash in a part does not escape the root
    assert paths.sys("/devices/") == "/host/sys/devices"
    assert HostPaths().proc("meminfo") == "/proc/meminfo"


# -- CgroupLayout ------------------------------------------------------------------------------------


@pytest.mark.parametrize("driver, qos, expected", [
    ("systemd", "Guaranteed", "kubepods.slice"),
    ("systemd", "Burstable", "kubepods.slice/kubepods-burstable.slice"),
    ("systemd", "BestEffort", "kubepods.slice/kubepods-besteffort.slice"),
    ("cgroupfs", "Guaranteed", "kubepods"),
    ("cgroupfs", "Burstable", "kubepods/burstable"),
    ("cgroupfs", "BestEffort", "kubepods/besteffort"),
])
def test_qos_dirs(driver, qos, expected):
    assert CgroupLayout(2, driver, "/cg").qos_dir(qos) == expected
    assert CgroupLayout(1, driver, "/cg").qos_dir(qos) == expected


@pytest.mark.parametrize("driver, qos, expected", [
    ("systemd", "Guaranteed", f"kubepods.slice/kubepods-pod{UID_}.slice"),
    ("systemd", "Burstable", f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice"),
    ("systemd", "BestEffort", f"kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UID_}.slice"),
    ("cgroupfs", "Guaranteed", f"kubepods/pod{UID}"),
    ("cgroupfs", "Burstable", f"kubepods/burstable/pod{UID}"),
    ("cgroupfs", "BestEffort", f"kubepods/besteffort/pod{UID}"),
])
def test_pod_dirs(driver, qos, expected):
    assert CgroupLayout(1, driver, "/cg").pod_dir(qos, UID) == expected


@pytest.mark.parametrize("container_id, scope", [
    ("docker://abc123", "docker-abc123.scope"),
    ("containerd://abc123", "cri-containerd-abc123.scope"),
    ("cri-o://abc123", "crio-abc123.scope"),
    ("pouch://abc123", "pouch-abc123.scope"),
])
def test_container_dirs_per_runtime(container_id, scope):
    systemd = CgroupLayout(2, "systemd", "/cg")
    assert systemd.container_dir("Burstable", UID, container_id) == (
        f"kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/{scope}")
    cgroupfs = CgroupLayout(1, "cgroupfs", "/cg")
    assert cgroupfs.container_dir("Burstable", UID, container_id) == f"kubepods/burstable/pod{UID}/abc123"


def test_layout_rejects_bad_input():
    layout = CgroupLayout(2, "systemd", "/cg")
    with pytest.raises(ValueError, match="'Gold'"):
        layout.qos_dir("Gold")
    with pytest.raises(ValueError, match="unknown runtime 'rkt'"):
        layout.container_dir("Burstable", UID, "rkt://abc")
    with pytest.raises(ValueError, match="'abc'"):
        layout.container_dir("Burstable", UID, "abc")
    with pytest.raises(ValueError, match="invalid pod UID"):
        layout.pod_dir("Burstable", "")
    with pytest.raises(ValueError, match="cgroup version"):
        CgroupLayout(3, "systemd", "/cg")
    with pytest.raises(ValueError, match="cgroup driver"):
        CgroupLayout(2, "upstart", "/cg")
    assert parse_container_id("containerd://x1") == ("containerd", "x1")


def test_layout_paths_v1_and_v2():
    v1 = CgroupLayout(1, "cgroupfs", "/host/cgroup/")
    assert v1.path("cpuacct", "kubepods/podx", "cpuacct.usage") == "/host/cgroup/cpuacct/kubepods/podx/cpuacct.usage"
    assert v1.path("memory", "", "memory.stat") == "/host/cgroup/memory/memory.stat"
    v2 = CgroupLayout(2, "systemd", "/host/cgroup")
    assert v2.path("cpuacct", "kubepods.slice", "cpu.stat") == "/host/cgroup/kubepods.slice/cpu.stat"
    assert v2.path("memory", "", "memory.stat") == "/host/cgroup/memory.stat"


@pytest.mark.parametrize("version, driver", [(1, "cgroupfs"), (1, "systemd"), (2, "systemd"), (2, "cgroupfs")])
def test_detect_layout_each_layout(tmp_path, version, driver):
    root = tmp_path / "cgroup"
    kubepods = "kubepods.slice" if driver == "systemd" else "kubepods"
    if version == 2:
        write(root / "cgroup.controllers", "cpuset cpu io memory pids\n")
        (root / kubepods).mkdir()
    else:
        (root / "cpu" / kubepods).mkdir(parents=True)
        (root / "memory" / kubepods).mkdir(parents=True)
    layout = detect_layout(str(root))
    assert (layout.version, layout.driver, layout.cgroup_root) == (version, driver, str(root))
    # an explicit driver wins over what is on disk; "auto" means detect
    other = "cgroupfs" if driver == "systemd" else "systemd"
    assert detect_layout(str(root), other).driver == other
    assert detect_layout(str(root), "auto").driver == driver


def test_detect_layout_falls_back_to_systemd(tmp_path):
    layout = detect_layout(str(tmp_path))
    assert (layout.version, layout.driver) == (1, "systemd")
    write(tmp_path / "cgroup.controllers", "cpu memory\n")
    assert (detect_layout(str(tmp_path)).version, detect_layout(str(tmp_path)).driver) == (2, "systemd")


def test_detect_layout_v1_memory_only(tmp_path):
    (tmp_path / "memory" / "kubepods").mkdir(parents=True)
    assert detect_layout(str(tmp_path)).driver == "cgroupfs"


# -- host application dirs (A.3.1) --------------------------------------------------------------------


@pytest.mark.parametrize("app, systemd, cgroupfs", [
    ({"name": "nginx", "qos": "LS"}, "host-latency-sensitive/nginx", "host-latency-sensitive/nginx"),
    ({"name": "nginx", "qos": "LSR"}, "host-latency-sensitive/nginx", "host-latency-sensitive/nginx"),
    ({"name": "nginx", "qos": "LSE"}, "host-latency-sensitive/nginx", "host-latency-sensitive/nginx"),
    ({"name": "batch", "qos": "BE"}, "host-best-effort/batch", "host-best-effort/batch"),
    ({"name": "sys", "qos": "SYSTEM"}, "sys", "sys"),
    ({"name": "plain"}, "plain", "plain"),
    ({"name": "a", "cgroupPath": {"base": "CgroupRoot", "parentDir": "system.slice", "relativePath": "a.service"}},
     "system.slice/a.service", "system.slice/a.service"),
    ({"name": "a", "cgroupPath": {"parentDir": "p/", "relativePath": "/r"}}, "p/r", "p/r"),
    ({"name": "a", "cgroupPath": {"base": "Kubepods", "relativePath": "a"}}, "kubepods.slice/a", "kubepods/a"),
    ({"name": "a", "cgroupPath": {"base": "KubepodsBurstable", "parentDir": "x", "relativePath": "a"}},
     "kubepods.slice/kubepods-burstable.slice/x/a", "kubepods/burstable/x/a"),
    ({"name": "a", "cgroupPath": {"base": "KubepodsBesteffort", "relativePath": "a"}},
     "kubepods.slice/kubepods-besteffort.slice/a", "kubepods/besteffort/a"),
])
def test_host_application_dir(app, systemd, cgroupfs):
    assert host_application_dir(app, CgroupLayout(2, "systemd", "/cg")) == systemd
    assert host_application_dir(app, CgroupLayout(1, "cgroupfs", "/cg")) == cgroupfs


def test_host_application_dir_bad_input():
    layout = CgroupLayout(2, "systemd", "/cg")
    with pytest.raises(ValueError, match="name missing"):
        host_application_dir({"qos": "LS"}, layout)
    with pytest.raises(ValueError, match="unknown cgroupPath.base 'Elsewhere'"):
        host_application_dir({"name": "a", "cgroupPath": {"base": "Elsewhere", "relativePath": "a"}}, layout)
    with pytest.raises(ValueError, match="not an object"):
        host_application_dir({"name": "a", "cgroupPath": "x/y"}, layout)


# -- file reading -------------------------------------------------------------------------------------


def test_read_bytes_missing_and_large(tmp_path):
    with pytest.raises(SystemFileError, match="no such file") as err:
        read_bytes(str(tmp_path / "nope"))
    assert str(tmp_path / "nope") in str(err.value)
    assert isinstance(err.value, OSError)
    big = write(tmp_path / "big", "x" * 200_000)
    assert len(read_bytes(str(big))) == 200_000
    with pytest.raises(SystemFileError, match="cannot"):
        read_bytes(str(tmp_path))        # a directory


# -- procfs -------------------------------------------------------------------------------------------

PROC_STAT = """cpu  400 10 200 9000 50 5 15 0 0 0
cpu0 300 10 100 4000 20 3 7 0 0 0
cpu1 100 0 100 5000 30 2 8 0 0 0
intr 12345 1 2 3
ctxt 999
btime 1700000000
"""


def test_proc_stat_busy_ticks(tmp_path):
    write(tmp_path / "proc" / "stat", PROC_STAT)
    ticks = procfs.read_cpu_ticks(HostPaths(proc_root=str(tmp_path / "proc")))
    # user + nice + system + irq + softirq; idle and iowait excluded
    assert ticks.total == 400 + 10 + 200 + 5 + 15
    assert ticks.per_cpu == {0: 300 + 10 + 100 + 3 + 7, 1: 100 + 0 + 100 + 2 + 8}


@pytest.mark.parametrize("content, problem", [
    ("intr 1 2 3\n", "first line"),
    ("cpu  1 2 3 4 5 6\n", "fields"),
    ("cpu  1 2 x 4 5 6 7 8\n", "non-integer"),
    ("cpu  1 2 3 4 5 6 7 8\ncpuX 1 2 3 4 5 6 7 8\n", "label"),
    ("", "first line"),
])
def test_proc_stat_garbage(tmp_path, content, problem):
    path = write(tmp_path / "stat", content)
    with pytest.raises(SystemFileError, match=problem) as err:
        procfs.parse_cpu_ticks(path.read_bytes(), str(path))
    assert str(path) in str(err.value)


MEMINFO = """MemTotal:       16384000 kB
MemFree:         4096000 kB
MemAvailable:   10240000 kB
Buffers:          100000 kB
Cached:          5000000 kB
HugePages_Total:       0
"""


def test_meminfo_and_node_memory(tmp_path):
    write(tmp_path / "proc" / "meminfo", MEMINFO)
    info = procfs.read_meminfo(HostPaths(proc_root=str(tmp_path / "proc")))
    assert info["MemTotal"] == 16384000 and info["HugePages_Total"] == 0
    used, with_cache = procfs.node_memory_usage(info)
    assert used == (16384000 - 10240000) * 1024
    assert with_cache == (16384000 - 4096000) * 1024


def test_meminfo_garbage_and_missing_keys(tmp_path):
    path = write(tmp_path / "meminfo", "MemTotal: lots kB\n")
    with pytest.raises(SystemFileError, match="MemTotal") as err:
        procfs.parse_meminfo(path.read_bytes(), str(path))
    assert str(path) in str(err.value)
    with pytest.raises(SystemFileError, match="missing MemAvailable"):
        procfs.node_memory_usage({"MemTotal": 1, "MemFree": 1}, "/proc/meminfo")


def test_numa_memory_usage_formula():
    info = {"MemTotal": 1000, "MemFree": 300, "Active(file)": 100, "Inactive(file)": 50, "SReclaimable": 25}
    assert procfs.numa_memory_usage(info) == (1000 - 475) * 1024
    assert procfs.numa_memory_usage({"MemTotal": 10, "MemFree": 20}) == 0


def test_cpuinfo(tmp_path):
    write(tmp_path / "proc" / "cpuinfo",
          "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon X\nphysical id\t: 0\ncore id\t: 0\n\n"
          "processor\t: 1\nvendor_id\t: GenuineIntel\nmodel name\t: Xeon X\nphysical id\t: 1\ncore id\t: 3\n\n")
    info = procfs.read_cpuinfo(HostPaths(proc_root=str(tmp_path / "proc")))
    assert info == {"model": "Xeon X", "vendor": "GenuineIntel",
                    "processors": [{"id": 0, "socket": 0, "core": 0}, {"id": 1, "socket": 1, "core": 3}]}
    write(tmp_path / "proc" / "cpuinfo", "processor : 0\nBogoMIPS : 50\n")    # arm64: no model/ids
    info = procfs.read_cpuinfo(HostPaths(proc_root=str(tmp_path / "proc")))
    assert info == {"model": "", "vendor": "", "processors": [{"id": 0, "socket": None, "core": None}]}


def test_clock_ticks_and_page_size_positive():
    assert procfs.clock_ticks() > 0
    assert procfs.page_size() > 0


# -- sysfs --------------------------------------------------------------------------------------------


def test_parse_cpulist():
    assert sysfs.parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert sysfs.parse_cpulist("") == []
    with pytest.raises(SystemFileError, match="cpulist.*'a-b'"):
        sysfs.parse_cpulist("a-b", "/sys/x/cpulist")
    with pytest.raises(SystemFileError, match="invalid CPU range"):
        sysfs.parse_cpulist("5-2")


def test_sysfs_topology_and_numa(tmp_path):
    sys_root = tmp_path / "sys"
    for cpu, core, socket in [(0, 0, 0), (1, 1, 0), (2, 0, 1), (3, 1, 1)]:
        write(sys_root / f"devices/system/cpu/cpu{cpu}/topology/core_id", f"{core}\n")
        write(sys_root / f"devices/system/cpu/cpu{cpu}/topology/physical_package_id", f"{socket}\n")
    (sys_root / "devices/system/cpu/cpu4").mkdir()          # offline: no topology dir
    write(sys_root / "devices/system/cpu/online", "0-3\n")
    for node, cpus in [(0, "0-1"), (1, "2-3")]:
        write(sys_root / f"devices/system/node/node{node}/cpulist", cpus + "\n")
        write(sys_root / f"devices/system/node/node{node}/meminfo",
              f"Node {node} MemTotal:       8000 kB\nNode {node} MemFree:        2000 kB\n"
              f"Node {node} Active(file):    500 kB\nNode {node} HugePages_Total:     4\n")
    write(sys_root / "devices/system/node/node1/hugepages/hugepages-2048kB/nr_hugepages", "16\n")
    write(sys_root / "devices/system/node/node1/hugepages/hugepages-1048576kB/nr_hugepages", "1\n")
    paths = HostPaths(sys_root=str(sys_root))
    assert sysfs.cpu_topology(paths) == [{"id": 0, "core": 0, "socket": 0}, {"id": 1, "core": 1, "socket": 0},
                                         {"id": 2, "core": 0, "socket": 1}, {"id": 3, "core": 1, "socket": 1}]
    assert sysfs.numa_node_ids(paths) == [0, 1]
    assert sysfs.numa_cpulist(paths, 1) == [2, 3]
    assert sysfs.numa_meminfo(paths, 0) == {"MemTotal": 8000, "MemFree": 2000, "Active(file)": 500,
                                            "HugePages_Total": 4}
    assert sysfs.numa_hugepages(paths, 1, sysfs.HUGEPAGE_2MI_KB) == 16
    assert sysfs.numa_hugepages(paths, 1, sysfs.HUGEPAGE_1GI_KB) == 1
    assert sysfs.numa_hugepages(paths, 0, sysfs.HUGEPAGE_2MI_KB) == 0


def test_sysfs_empty_and_garbage(tmp_path):
    paths = HostPaths(sys_root=str(tmp_path / "sys"))
    assert sysfs.cpu_topology(paths) == []
    assert sysfs.numa_node_ids(paths) == []
    write(tmp_path / "sys/devices/system/cpu/cpu0/topology/core_id", "zero\n")
    write(tmp_path / "sys/devices/system/cpu/cpu0/topology/physical_package_id", "0\n")
    with pytest.raises(SystemFileError, match="core_id: not an integer"):
        sysfs.cpu_topology(paths)


# -- cgroup readers -----------------------------------------------------------------------------------

V1_MEMORY_STAT = """cache 1
rss 2
inactive_anon 3
active_anon 4
inactive_file 5
active_file 6
unevictable 7
total_cache 1000
total_rss 2000
total_inactive_anon 100
total_active_anon 200
total_inactive_file 300
total_active_file 400
total_unevictable 50
"""

V2_MEMORY_STAT = """anon 300
file 700
kernel_stack 16
inactive_anon 100
active_anon 200
inactive_file 300
active_file 400
unevictable 50
"""


def v1_layout(tmp_path) -> CgroupLayout:
    return CgroupLayout(1, "cgroupfs", str(tmp_path / "cg"))


def v2_layout(tmp_path) -> CgroupLayout:
    return CgroupLayout(2, "systemd", str(tmp_path / "cg"))


def test_cgroup_reader_v1(tmp_path):
    layout = v1_layout(tmp_path)
    d = "kubepods/burstable/podx"
    write(layout.path("cpuacct", d, "cpuacct.usage"), "123456789\n")
    write(layout.path("cpu", d, "cpu.stat"), "nr_periods 40\nnr_throttled 10\nthrottled_time 5000\n")
    write(layout.path("memory", d, "memory.stat"), V1_MEMORY_STAT)
    write(layout.path("memory", d, "memory.usage_in_bytes"), "4096000\n")
    write(layout.path("memory", d, "memory.numa_stat"),
          "total=30 N0=10 N1=20\nfile=5 N0=1 N1=4\nanon=25 N0=9 N1=16\nhierarchical_total=30 N0=10 N1=20\n")
    reader = CgroupReader(layout, page_size=4096)
    assert reader.cpu_usage_ns(d) == 123456789
    assert reader.cpu_throttling(d) == (40, 10)
    # total_* keys: usage = inactive_anon + active_anon + unevictable; + active_file + inactive_file
    assert reader.memory_usage(d) == (100 + 200 + 50, 100 + 200 + 50 + 400 + 300)
    assert reader.memory_current(d) == 4096000
    assert reader.memory_numa(d) == {0: 10 * 4096, 1: 20 * 4096}


def test_cgroup_reader_v2(tmp_path):
    layout = v2_layout(tmp_path)
    d = "kubepods.slice"
    write(layout.path("cpu", d, "cpu.stat"),
          "usage_usec 2500\nuser_usec 2000\nsystem_usec 500\nnr_periods 8\nnr_throttled 2\nthrottled_usec 77\n")
    write(layout.path("memory", d, "memory.stat"), V2_MEMORY_STAT)
    write(layout.path("memory", d, "memory.current"), "999\n")
    write(layout.path("memory", d, "memory.numa_stat"),
          "anon N0=1000 N1=2000\nfile N0=30 N1=40\nkernel_stack N0=5 N1=6\n")
    reader = CgroupReader(layout)
    assert reader.cpu_usage_ns(d) == 2_500_000
    assert reader.cpu_throttling(d) == (8, 2)
    assert reader.memory_usage(d) == (350, 1050)
    assert reader.memory_current(d) == 999
    assert reader.memory_numa(d) == {0: 1030, 1: 2040}


def test_cgroup_reader_reads_each_file_once_per_round(tmp_path):
    layout = v2_layout(tmp_path)
    write(layout.path("cpu", "a", "cpu.stat"), "usage_usec 10\nnr_periods 1\nnr_throttled 0\n")
    reads: list[str] = []

    def counting_read(path: str) -> bytes:
        reads.append(path)
        return read_bytes(path)

    reader = CgroupReader(layout, read=counting_read)
    assert reader.cpu_usage_ns("a") == 10_000
    assert reader.cpu_throttling("a") == (1, 0)
    with pytest.raises(SystemFileError):
        reader.memory_usage("a")
    with pytest.raises(SystemFileError):
        reader.memory_usage("a")
    assert len(reads) == 2                     # cpu.stat once, the missing memory.stat once
    reader.begin_round()
    write(layout.path("cpu", "a", "cpu.stat"), "usage_usec 20\nnr_periods 1\nnr_throttled 0\n")
    assert reader.cpu_usage_ns("a") == 20_000
    assert len(reads) == 3


def test_cgroup_reader_v2_without_throttling_lines(tmp_path):
    """No cpu controller in the subtree: cpu.stat has usage only; usage works, throttling says why not."""
    layout = v2_layout(tmp_path)
    write(layout.path("cpu", "x", "cpu.stat"), "usage_usec 7\nuser_usec 5\nsystem_usec 2\n")
    reader = CgroupReader(layout)
    assert reader.cpu_usage_ns("x") == 7000
    with pytest.raises(SystemFileError, match="no 'nr_periods' line"):
        reader.cpu_throttling("x")
    write(layout.path("cpu", "y", "cpu.stat"), "usage_usec 1\nnr_periods 2\nnr_throttled x\n")
    assert reader.cpu_usage_ns("y") == 1000
    with pytest.raises(SystemFileError, match="'nr_throttled' is not an integer"):
        reader.cpu_throttling("y")


@pytest.mark.parametrize("version, filename, content, problem", [
    (1, "cpuacct.usage", "garbage\n", "not an integer: 'garbage'"),
    (1, "cpuacct.usage", "", "not an integer"),
    (2, "cpu.stat", "usage_usec lots\n", "'usage_usec' is not an integer"),
    (2, "cpu.stat", "user_usec 1\n", "no 'usage_usec' line"),
])
def test_cgroup_reader_cpu_garbage(tmp_path, version, filename, content, problem):
    layout = v1_layout(tmp_path) if version == 1 else v2_layout(tmp_path)
    path = write(layout.path("cpuacct" if version == 1 else "cpu", "x", filename), content)
    with pytest.raises(SystemFileError, match=problem) as err:
        CgroupReader(layout).cpu_usage_ns("x")
    assert str(path) in str(err.value)


def test_cgroup_reader_memory_garbage_and_missing(tmp_path):
    layout = v1_layout(tmp_path)
    with pytest.raises(SystemFileError, match="no such file") as err:
        CgroupReader(layout).memory_usage("gone")
    assert layout.path("memory", "gone", "memory.stat") in str(err.value)
    write(layout.path("memory", "x", "memory.stat"), V2_MEMORY_STAT)     # v2 keys in a v1 tree
    with pytest.raises(SystemFileError, match="no 'total_inactive_anon' line"):
        CgroupReader(layout).memory_usage("x")
    write(layout.path("cpu", "x", "cpu.stat"), "nr_periods 1\n")
    with pytest.raises(SystemFileError, match="nr_throttled"):
        CgroupReader(layout).cpu_throttling("x")


def test_numa_stat_parsers_reject_garbage():
    assert parse_numa_stat_v1(b"total=2 N0=2\n", "p", 4096) == {0: 8192}
    with pytest.raises(SystemFileError, match="total="):
        parse_numa_stat_v1(b"file=1 N0=1\n", "p", 4096)
    with pytest.raises(SystemFileError, match="bad NUMA field"):
        parse_numa_stat_v1(b"total=1 N0=x\n", "p", 4096)
    with pytest.raises(SystemFileError, match="no 'anon' or 'file' line"):
        parse_numa_stat_v2(b"kernel N0=1\n", "p")
    with pytest.raises(SystemFileError, match="bad NUMA field"):
        parse_numa_stat_v2(b"anon X0=1\n", "p")
