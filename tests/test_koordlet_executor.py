"""The koordlet's resource executor (reference A.10, A.3.2) on fake node trees: v1/v2, systemd/cgroupfs."""

from __future__ import annotations

import errno
import json
import logging
import os

import pytest
from prometheus_client import CollectorRegistry

from koordinator.sim.tree import CgroupStats, NodeTree, Topology
from koordinator_roles.koordlet.resourceexecutor import AuditLog, CgroupUpdate, HostFiles, ResourceExecutor, Result
from koordinator_roles.koordlet.system.cgroup import CgroupLayout
from koordinator_roles.koordlet.system.cpuset import parse_cpuset
from koordinator_roles.koordlet.system.resources import InvalidValue, resource

LAYOUTS = [(1, "systemd"), (1, "cgroupfs"), (2, "systemd"), (2, "cgroupfs")]
UID = "11111111-2222-3333-4444-555555555555"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class RecordingFiles(HostFiles):
    """Real files, every write recorded; optionally emulating the v1 kernel's cpuset rule (EINVAL when a
    cgroup's cpus would not be inside its parent's, or a parent's would no longer cover a child's)."""

    def __init__(self, kernel_cpuset_rule: bool = False, refuse: dict[str, int] | None = None) -> None:
        self.writes: list[tuple[str, str]] = []
        self.kernel_cpuset_rule = kernel_cpuset_rule
        self.refuse = refuse or {}

    def write(self, path: str, text: str) -> None:
        for suffix, code in self.refuse.items():
            if path.endswith(suffix):
                raise OSError(code, os.strerror(code), path)
        if self.kernel_cpuset_rule and path.endswith("/cpuset.cpus"):
            new = set(parse_cpuset(text))
            parent = os.path.join(os.path.dirname(os.path.dirname(path)), "cpuset.cpus")
            if os.path.exists(parent) and not new <= set(parse_cpuset(self.read(parent).strip())):
                raise OSError(errno.EINVAL, "Invalid argument", path)
            here = os.path.dirname(path)
            for child in os.scandir(here):
                f = os.path.join(child.path, "cpuset.cpus")
                if child.is_dir() and os.path.exists(f) and not set(parse_cpuset(self.read(f).strip())) <= new:
                    raise OSError(errno.EBUSY, "Device or resource busy", path)
        super().write(path, text)
        self.writes.append((path, text))


def make_tree(tmp_path, version, driver) -> tuple[NodeTree, CgroupLayout]:
    tree = NodeTree(tmp_path, "n1", Topology(2, 8, 2), 64 << 30, cgroup_version=version, driver=driver)
    tree.create(boot_time=0)
    layout = CgroupLayout(version, driver, str(tree.cgroup_root))
    return tree, layout


def be_pod(tree: NodeTree, layout: CgroupLayout, cpus: str = "0-31") -> tuple[str, str, str]:
    qos = layout.qos_dir("BestEffort")
    pod = layout.pod_dir("BestEffort", UID)
    ctr = layout.container_dir("BestEffort", UID, "containerd://abc")
    tree.add_cgroups(pod, [(pod, CgroupStats(cpus=cpus, mems="0-1")),
                           (ctr, CgroupStats(cpus=cpus, mems="0-1", leaf=True))])
    return qos, pod, ctr


def read(path) -> str:
    with open(path) as f:
        return f.read().strip()


# -- the registry ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version, driver", LAYOUTS)
def test_mapping_v1_v2(tmp_path, version, driver):
    _, layout = make_tree(tmp_path, version, driver)
    ex = ResourceExecutor(layout)
    root = layout.cgroup_root
    qos = "kubepods.slice/kubepods-besteffort.slice" if driver == "systemd" else "kubepods/besteffort"
    if version == 1:
        assert ex.path("cpu.cfs_quota_us", qos) == f"{root}/cpu/{qos}/cpu.cfs_quota_us"
        assert ex.path("cpuset.cpus", qos) == f"{root}/cpuset/{qos}/cpuset.cpus"
        assert ex.path("cpu.shares", qos) == f"{root}/cpu/{qos}/cpu.shares"
        assert ex.path("memory.limit_in_bytes", qos) == f"{root}/memory/{qos}/memory.limit_in_bytes"
    else:
        assert ex.path("cpu.cfs_quota_us", qos) == f"{root}/{qos}/cpu.max"
        assert ex.path("cpuset.cpus", qos) == f"{root}/{qos}/cpuset.cpus"
        assert ex.path("cpuset.cpus", qos, for_read=True) == f"{root}/{qos}/cpuset.cpus.effective"
        assert ex.path("cpu.shares", qos) == f"{root}/{qos}/cpu.weight"
        assert ex.path("memory.limit_in_bytes", qos) == f"{root}/{qos}/memory.max"


def test_v2_conversions():
    quota = resource("cpu.cfs_quota_us")
    assert quota.to_file(2, -1, "50000 100000") == "max 100000"
    assert quota.to_file(2, 20000, "max 50000") == "20000 50000"     # the period in the file is kept
    assert quota.to_file(2, 20000, None) == "20000 100000"
    assert quota.from_file(2, "max 100000\n") == "-1"
    assert quota.to_file(1, -1) == "-1"
    # kubelet: 1 + (1024 - 2) * 9999 // 262142 = 39; back: (39 - 1) * 262142 // 9999 + 2 = 998
    assert resource("cpu.shares").to_file(2, 1024) == "39"
    assert resource("cpu.shares").from_file(2, "39") == "998"
    assert resource("memory.limit_in_bytes").to_file(2, -1) == "max"
    assert resource("memory.limit_in_bytes").from_file(1, "9223372036854771712") == "9223372036854771712"
    assert resource("cpuset.cpus").validate("3,0-2,8") == "0-3,8"


@pytest.mark.parametrize("name, value, words", [
    ("cpu.cfs_quota_us", 500, ["cpu.cfs_quota_us", "500", "-1", "1000"]),
    ("cpu.cfs_quota_us", "abc", ["cpu.cfs_quota_us", "'abc'", "not an integer"]),
    ("cpu.shares", 1, ["cpu.shares", "1", "[2, 262144]"]),
    ("cpu.shares", 262145, ["cpu.shares", "262145"]),
    ("cpuset.cpus", "3-1", ["cpuset.cpus", "'3-1'"]),
    ("cpuset.cpus", "x", ["cpuset.cpus", "'x'"]),
    ("cpuset.cpus", "", ["cpuset.cpus", "empty"]),
    ("memory.wmark_ratio", 101, ["memory.wmark_ratio", "101", "[0, 100]"]),
    ("memory.min", -5, ["memory.min", "-5"]),
])
def test_validation_errors_name_file_and_value(name, value, words):
    with pytest.raises(InvalidValue) as err:
        resource(name).validate(value)
    for word in words:
        assert word in str(err.value)


def test_unknown_resource_named():
    with pytest.raises(InvalidValue, match="unknown cgroup resource 'cpu.nope'"):
        resource("cpu.nope")


# -- writes ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version, driver", LAYOUTS)
def test_write_formats_and_invalid_values(tmp_path, version, driver, caplog):
    _, layout = make_tree(tmp_path, version, driver)
    reg = CollectorRegistry()
    ex = ResourceExecutor(layout, metrics=reg)
    qos = layout.qos_dir("BestEffort")
    assert ex.update(CgroupUpdate("cpu.cfs_quota_us", qos, 50000, "test")) is Result.WRITTEN
    assert read(ex.path("cpu.cfs_quota_us", qos)) == ("50000" if version == 1 else "50000 100000")
    assert ex.read("cpu.cfs_quota_us", qos) == "50000"
    assert ex.update(CgroupUpdate("cpu.cfs_quota_us", qos, -1, "test")) is Result.WRITTEN
    assert read(ex.path("cpu.cfs_quota_us", qos)) == ("-1" if version == 1 else "max 100000")
    with caplog.at_level(logging.WARNING):
        assert ex.update(CgroupUpdate("cpu.cfs_quota_us", qos, 999, "test")) is Result.INVALID
    assert "cpu.cfs_quota_us" in caplog.text and "999" in caplog.text
    assert read(ex.path("cpu.cfs_quota_us", qos)) == ("-1" if version == 1 else "max 100000")
    assert reg.get_sample_value("koordlet_resource_writes_total",
                                {"resource": "cpu.cfs_quota_us", "result": "written"}) == 2
    assert reg.get_sample_value("koordlet_resource_writes_total",
                                {"resource": "cpu.cfs_quota_us", "result": "invalid"}) == 1


def test_write_if_changed_with_expiring_cache(tmp_path):
    _, layout = make_tree(tmp_path, 1, "cgroupfs")
    files = RecordingFiles()
    clock = Clock()
    ex = ResourceExecutor(layout, files=files, clock=clock, force_update_seconds=60)
    qos = layout.qos_dir("BestEffort")
    path = ex.path("cpu.cfs_quota_us", qos)
    u = CgroupUpdate("cpu.cfs_quota_us", qos, 30000, "test")
    assert ex.update(u) is Result.WRITTEN
    assert ex.update(u) is Result.UNCHANGED
    assert len(files.writes) == 1
    # someone else changes the file: within the cache period the executor trusts its cache ...
    with open(path, "w") as f:
        f.write("-1\n")
    clock.now += 59
    assert ex.update(u) is Result.UNCHANGED
    assert read(path) == "-1"
    # ... after it, the value is applied again
    clock.now += 2
    assert ex.update(u) is Result.WRITTEN
    assert read(path) == "30000"
    assert len(files.writes) == 2
    # a file that already holds the value is not rewritten (cache empty)
    ex.invalidate()
    assert ex.update(u) is Result.UNCHANGED
    assert len(files.writes) == 2


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_leveled_cpuset_narrow_children_first_widen_parent_first(tmp_path, driver):
    tree, layout = make_tree(tmp_path, 1, driver)
    qos, pod, ctr = be_pod(tree, layout)
    files = RecordingFiles(kernel_cpuset_rule=True)
    ex = ResourceExecutor(layout, files=files)
    path = {rel: ex.path("cpuset.cpus", rel) for rel in (qos, pod, ctr)}

    def levels(value):
        return [[CgroupUpdate("cpuset.cpus", rel, value, "test", "narrow")] for rel in (qos, pod, ctr)]

    # the fake kernel refuses the naive top-down narrowing of the parent
    assert ex.update(CgroupUpdate("cpuset.cpus", qos, "0-3", "test")) is Result.REFUSED
    assert read(path[qos]) == "0-31"
    # narrowing: container, then pod, then QoS dir
    assert ex.leveled_update_batch(levels("0-3")) == [[Result.WRITTEN]] * 3
    assert files.writes == [(path[ctr], "0-3"), (path[pod], "0-3"), (path[qos], "0-3")]
    # widening: QoS dir, then pod, then container (the union first is the final value here)
    files.writes.clear()
    assert ex.leveled_update_batch(levels("0-7")) == [[Result.WRITTEN]] * 3
    assert files.writes == [(path[qos], "0-7"), (path[pod], "0-7"), (path[ctr], "0-7")]
    # moving to a disjoint set: the parent gets the union first, then children, then the parent's final
    files.writes.clear()
    assert ex.leveled_update_batch(levels("8-11")) == [[Result.WRITTEN]] * 3
    assert files.writes == [(path[qos], "0-11"), (path[pod], "0-11"), (path[ctr], "0-11"),
                            (path[ctr], "8-11"), (path[pod], "8-11"), (path[qos], "8-11")]
    assert read(path[qos]) == read(path[pod]) == read(path[ctr]) == "8-11"


def test_leveled_v2_reads_effective_cpuset_for_the_union(tmp_path):
    tree, layout = make_tree(tmp_path, 2, "systemd")
    qos, pod, ctr = be_pod(tree, layout)
    files = RecordingFiles()
    ex = ResourceExecutor(layout, files=files)
    # v2 cpuset.cpus is empty (inherit): the effective set 0-31 is what the union starts from
    assert ex.read("cpuset.cpus", qos) == "0-31"
    ex.leveled_update_batch([[CgroupUpdate("cpuset.cpus", r, "0-3", "t")] for r in (qos, pod, ctr)])
    assert [p for p, v in files.writes if v == "0-31"] == [ex.path("cpuset.cpus", r) for r in (qos, pod, ctr)]
    assert [(p, v) for p, v in files.writes if v == "0-3"] == [
        (ex.path("cpuset.cpus", r), "0-3") for r in (ctr, pod, qos)]


def test_leveled_quota_parent_raised_first(tmp_path):
    tree, layout = make_tree(tmp_path, 1, "cgroupfs")
    qos, pod, _ = be_pod(tree, layout)
    files = RecordingFiles()
    ex = ResourceExecutor(layout, files=files)
    ex.update_batch([CgroupUpdate("cpu.cfs_quota_us", qos, 100000, "t"),
                     CgroupUpdate("cpu.cfs_quota_us", pod, 50000, "t")])
    files.writes.clear()
    ex.leveled_update_batch([[CgroupUpdate("cpu.cfs_quota_us", qos, 300000, "t")],
                             [CgroupUpdate("cpu.cfs_quota_us", pod, 200000, "t")]])
    # parent raised to max(old, new) = its final value first, then the child
    assert [v for _, v in files.writes] == ["300000", "200000"]


# -- audit and failures ----------------------------------------------------------------------------


def test_audit_lines_and_rotation(tmp_path):
    _, layout = make_tree(tmp_path / "t", 2, "systemd")
    audit = AuditLog(str(tmp_path / "audit"), max_bytes=4000, backups=1, clock=lambda: 1700000000.5)
    ex = ResourceExecutor(layout, audit=audit)
    qos = layout.qos_dir("BestEffort")
    ex.update(CgroupUpdate("cpu.cfs_quota_us", qos, 40000, "CPUSuppress", "suppress BE to 400m"))
    lines = (tmp_path / "audit" / "audit.log").read_text().splitlines()
    entry = json.loads(lines[0])
    assert entry == {"time": "2023-11-14T22:13:20.500Z", "file": ex.path("cpu.cfs_quota_us", qos),
                     "old": "max 100000", "new": "40000 100000", "owner": "CPUSuppress",
                     "reason": "suppress BE to 400m"}
    for quota in range(2000, 60000, 1000):
        ex.update(CgroupUpdate("cpu.cfs_quota_us", qos, quota, "CPUSuppress", "x" * 20))
    names = sorted(os.listdir(tmp_path / "audit"))
    assert names == ["audit.log", "audit.log.1"]
    total = sum(os.path.getsize(tmp_path / "audit" / n) for n in names)
    assert total <= 4000


@pytest.mark.parametrize("version, driver", LAYOUTS)
def test_missing_and_refused_logged_once_counted_others_go_on(tmp_path, version, driver, caplog):
    tree, layout = make_tree(tmp_path, version, driver)
    qos, pod, ctr = be_pod(tree, layout)
    reg = CollectorRegistry()
    quota_file = "cpu.cfs_quota_us" if version == 1 else "cpu.max"
    files = RecordingFiles(refuse={f"{os.path.basename(pod)}/{quota_file}": errno.EROFS})
    ex = ResourceExecutor(layout, files=files, metrics=reg)
    os.remove(ex.path("cpu.cfs_quota_us", ctr))
    batch = [CgroupUpdate("cpu.cfs_quota_us", ctr, 20000, "t"),
             CgroupUpdate("cpu.cfs_quota_us", pod, 20000, "t"),
             CgroupUpdate("cpu.cfs_quota_us", qos, 20000, "t")]
    with caplog.at_level(logging.WARNING, logger="koordinator.koordlet.resourceexecutor"):
        for i in range(3):
            assert ex.update_batch([CgroupUpdate(u.resource, u.rel_dir, 20000 + i * 1000, "t") for u in batch]) == [
                Result.MISSING, Result.REFUSED, Result.WRITTEN]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len([w for w in warnings if ex.path("cpu.cfs_quota_us", ctr) in w]) == 1
    assert len([w for w in warnings if ex.path("cpu.cfs_quota_us", pod) in w]) == 1
    assert read(ex.path("cpu.cfs_quota_us", qos)) == ("22000" if version == 1 else "22000 100000")
    value = reg.get_sample_value
    assert value("koordlet_resource_writes_total", {"resource": "cpu.cfs_quota_us", "result": "missing"}) == 3
    assert value("koordlet_resource_writes_total", {"resource": "cpu.cfs_quota_us", "result": "refused"}) == 3
    assert value("koordlet_resource_writes_total", {"resource": "cpu.cfs_quota_us", "result": "written"}) == 3
