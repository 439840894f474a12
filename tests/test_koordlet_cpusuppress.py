"""CPUSuppress (reference A.7.2) on a fake 32-CPU node (2 sockets × 8 cores × 2 threads), v1 and v2.

Expected values are worked out by hand in the comments: capacity 32 cores, threshold 65 % → 20800m.
"""

from __future__ import annotations

import json
import logging

import pytest

from koordinator.sim.tree import CgroupStats, NodeTree, Topology
from koordinator_roles.koordlet.metriccache import MetricCache, Sample, kinds
from koordinator_roles.koordlet.qosmanager import QOSContext, build
from koordinator_roles.koordlet.qosmanager.cpupick import be_suppress_cpus
from koordinator_roles.koordlet.resourceexecutor import ResourceExecutor
from koordinator_roles.koordlet.statesinformer.states import pod_meta
from koordinator_roles.koordlet.system.cgroup import CgroupLayout

NOW = 1_700_000_000.0
LAYOUTS = [(1, "systemd"), (1, "cgroupfs"), (2, "systemd"), (2, "cgroupfs")]
TOPO = Topology(2, 8, 2)


def processors():
    out = []
    for cpu in range(TOPO.cpus):
        core, socket, _ = TOPO.place(cpu)
        out.append({"id": cpu, "core": core, "socket": socket, "node": socket})
    return out


def pod(uid, qos, kube_qos, cpuset=None):
    p = {"metadata": {"uid": uid, "namespace": "default", "name": uid, "labels": {"koordinator.sh/qosClass": qos},
                      "annotations": {}},
         "status": {"qosClass": kube_qos, "phase": "Running",
                    "containerStatuses": [{"name": "c", "containerID": f"containerd://{uid}c"}]}}
    if cpuset:
        p["metadata"]["annotations"]["scheduling.koordinator.sh/resource-status"] = json.dumps({"cpuset": cpuset})
    return p


class States:
    """The states informer's reading side, set by the test."""

    def __init__(self, layout, node, pods, slo):
        self.layout, self._node, self._pods, self.slo = layout, node, pods, slo

    def node(self):
        return self._node

    def pods(self):
        return [pod_meta(p, self.layout) for p in self._pods]

    def node_slo(self):
        return self.slo

    def host_applications(self):
        return []

    def has_synced(self):
        return True


def slo(enable=True, **threshold):
    return {"resourceUsedThresholdWithBE": {"enable": enable, "cpuSuppressThresholdPercent": 65,
                                            "cpuSuppressPolicy": "cpuset", **threshold}}


class Node:
    """A fake node tree, metric cache and CPUSuppress strategy wired like the koordlet does."""

    def __init__(self, tmp_path, version, driver, pods, usage, node_annotations=None, node_used=10.0):
        self.tree = NodeTree(tmp_path, "n1", TOPO, 64 << 30, cgroup_version=version, driver=driver)
        self.tree.create(boot_time=0)
        self.layout = CgroupLayout(version, driver, str(self.tree.cgroup_root))
        for p in pods:
            if p["status"]["qosClass"] == "BestEffort":
                uid = p["metadata"]["uid"]
                pd = self.layout.pod_dir("BestEffort", uid)
                ctr = self.layout.container_dir("BestEffort", uid, f"containerd://{uid}c")
                self.tree.add_cgroups(pd, [(pd, CgroupStats(cpus="0-31", mems="0-1")),
                                           (ctr, CgroupStats(cpus="0-31", mems="0-1", leaf=True))])
        self.cache = MetricCache(None)
        self.cache.set_kv(kinds.KV_NODE_CPU_INFO, {"cpus": processors()})
        samples = [Sample(kinds.NODE_CPU_USAGE, node_used, NOW - 1)]
        samples += [Sample(kinds.POD_CPU_USAGE, v, NOW - 1, {kinds.LABEL_POD_UID: uid}) for uid, v in usage.items()]
        self.cache.insert(samples)
        node = {"metadata": {"name": "n1", "annotations": node_annotations or {}},
                "status": {"capacity": {"cpu": "32"}, "allocatable": {"cpu": "32"}}}
        self.states = States(self.layout, node, pods, slo())
        self.executor = ResourceExecutor(self.layout)
        ctx = QOSContext(states=self.states, cache=self.cache, executor=self.executor, layout=self.layout,
                         gates={"BECPUSuppress": True}, clock=lambda: NOW)
        self.manager = build(ctx)
        self.strategy = self.manager.get("CPUSuppress")

    def read(self, name, rel):
        return self.executor.read(name, rel)

    def be_dirs(self):
        return [d for level in self.strategy._be_cpuset_dirs() for d in level]


LS_PODS = [pod("ls1", "LS", "Burstable"), pod("be1", "BE", "BestEffort")]
# node 10 cores, LS 6, BE 3: system = max(10 - 9, 0, reserved 0) = 1 core;
# BE = 20800 - 6000 - 1000 = 13800m -> ceil = 14 CPUs.
LS_USAGE = {"ls1": 6.0, "be1": 3.0}


def test_pick_order_hand_computed():
    # 14 from 32: buckets socket0 (first cpu 0) then socket1 (first 8), both 16 CPUs; pairs (core, sibling)
    # round-robin: (0,16) (8,24) (1,17) (9,25) (2,18) (10,26) (3,19)
    assert be_suppress_cpus(14, processors()) == [0, 16, 8, 24, 1, 17, 9, 25, 2, 18, 10, 26, 3, 19]
    # 13: six pairs, then a single from the bucket after the last pair's (socket0): cpu 3
    assert be_suppress_cpus(13, processors()) == [0, 16, 8, 24, 1, 17, 9, 25, 2, 18, 10, 26, 3]
    assert be_suppress_cpus(33, processors()) == []


@pytest.mark.parametrize("version, driver", LAYOUTS)
def test_cpuset_policy_32_cpus(tmp_path, version, driver):
    n = Node(tmp_path, version, driver, LS_PODS, LS_USAGE)
    assert n.strategy.suppress_milli(n.states.node(), n.states.slo["resourceUsedThresholdWithBE"]) == 13800
    n.strategy.run_once()
    for rel in n.be_dirs():
        assert n.read("cpuset.cpus", rel) == "0-3,8-10,16-19,24-26", rel
    assert len(n.be_dirs()) == 3       # QoS dir, the BE pod, its container
    assert n.read("cpu.cfs_quota_us", n.layout.qos_dir("BestEffort")) == "-1"


@pytest.mark.parametrize("version, driver", LAYOUTS)
def test_cfs_quota_policy_and_switch_back(tmp_path, version, driver):
    n = Node(tmp_path, version, driver, LS_PODS, LS_USAGE)
    qos = n.layout.qos_dir("BestEffort")
    n.states.slo = slo(cpuSuppressPolicy="cfsQuota")
    n.strategy.run_once()
    # 13800m × 100000 / 1000 = 1380000; from unlimited no growth limit
    assert n.read("cpu.cfs_quota_us", qos) == "1380000"
    raw = open(n.executor.path("cpu.cfs_quota_us", qos)).read().strip()
    assert raw == ("1380000" if version == 1 else "1380000 100000")
    assert n.read("cpuset.cpus", qos) == "0-31"
    # LS (and the node) use 0.4 core less: 20800 - 5600 - 1000 = 14200m -> 1420000,
    # |Δ| = 40000 >= 1% of 32 cores (32000) -> written
    n.cache.insert([Sample(kinds.POD_CPU_USAGE, 5.6, NOW - 0.5, {kinds.LABEL_POD_UID: "ls1"}),
                    Sample(kinds.NODE_CPU_USAGE, 9.6, NOW - 0.5)])
    n.strategy.run_once()
    assert n.read("cpu.cfs_quota_us", qos) == "1420000"
    # 0.2 core more for BE (14400m): |Δ| = 20000 < 32000 -> skipped
    n.cache.insert([Sample(kinds.POD_CPU_USAGE, 5.4, NOW - 0.2, {kinds.LABEL_POD_UID: "ls1"}),
                    Sample(kinds.NODE_CPU_USAGE, 9.4, NOW - 0.2)])
    n.strategy.run_once()
    assert n.read("cpu.cfs_quota_us", qos) == "1420000"
    # back to the cpuset policy: quota restored to unlimited, cpuset applied
    n.states.slo = slo()
    n.strategy.run_once()
    assert n.read("cpu.cfs_quota_us", qos) == "-1"
    assert raw != open(n.executor.path("cpu.cfs_quota_us", qos)).read().strip()


def test_cfs_quota_growth_limited_and_minimum(tmp_path):
    n = Node(tmp_path, 1, "cgroupfs", LS_PODS, LS_USAGE)
    qos = n.layout.qos_dir("BestEffort")
    n.states.slo = slo(cpuSuppressPolicy="cfsQuota")
    with open(n.executor.path("cpu.cfs_quota_us", qos), "w") as f:
        f.write("500000\n")
    n.strategy.run_once()
    # wanted 1380000, current 500000: growth capped at 10% of 32 cores = 320000 -> 820000
    assert n.read("cpu.cfs_quota_us", qos) == "820000"
    # LS using everything: the budget is negative -> the 2000 minimum
    n.cache.insert([Sample(kinds.POD_CPU_USAGE, 30.0, NOW - 0.5, {kinds.LABEL_POD_UID: "ls1"}),
                    Sample(kinds.NODE_CPU_USAGE, 32.0, NOW - 0.5)])
    n.strategy.run_once()
    assert n.read("cpu.cfs_quota_us", qos) == "2000"


@pytest.mark.parametrize("version, driver", [(1, "systemd"), (2, "cgroupfs")])
def test_exclusive_cpus_never_given_and_restore_on_disable(tmp_path, version, driver):
    pods = [pod("lse", "LSE", "Guaranteed", "0-3"), pod("lsr", "LSR", "Guaranteed", "4-7"),
            pod("ls1", "LS", "Burstable"), pod("be1", "BE", "BestEffort")]
    usage = {"lse": 2.0, "lsr": 2.0, "ls1": 2.0, "be1": 3.0}
    n = Node(tmp_path, version, driver, pods, usage,
             node_annotations={"node.koordinator.sh/reservation": json.dumps({"reservedCPUs": "31"})})
    n.strategy.run_once()
    # non-BE 6000, system max(1000, 0, reserved 1 CPU = 1000) = 1000 -> 13800m -> 14 CPUs.
    # usable: 32 - {31} - LSE {0-3} = 27; LSR pool {4-7}, LS pool 23 -> lsrNum = 14*4//27 = 2: 4, 5;
    # LS 12: socket1 bucket (15 CPUs) pairs (8,24)..(13,29); socket0's LS CPUs 16-23 have no pairs.
    expected = "4-5,8-13,24-29"
    for rel in n.be_dirs():
        assert n.read("cpuset.cpus", rel) == expected
    # disabled: every usable CPU back (all but LSE 0-3 and reserved 31), quota unlimited
    n.states.slo = slo(enable=False)
    n.strategy.run_once()
    for rel in n.be_dirs():
        assert n.read("cpuset.cpus", rel) == "4-30"
    assert n.read("cpu.cfs_quota_us", n.layout.qos_dir("BestEffort")) == "-1"


def test_slow_scale_up(tmp_path):
    n = Node(tmp_path, 1, "cgroupfs", LS_PODS, LS_USAGE)
    qos = n.layout.qos_dir("BestEffort")
    n.strategy.adjust_by_cpuset(2000, n.states.node())          # 2 CPUs: pair (0,16)
    assert n.read("cpuset.cpus", qos) == "0,16"
    n.strategy.run_once()
    # wanted 14 from 2: growth capped at ceil(32 × 0.1) = 4 -> 6: (0,16) (8,24) (1,17)
    assert n.read("cpuset.cpus", qos) == "0-1,8,16-17,24"


def test_out_of_range_threshold_ignored_and_logged_once(tmp_path, caplog):
    n = Node(tmp_path, 2, "systemd", LS_PODS, LS_USAGE)
    n.states.slo = slo(cpuSuppressThresholdPercent=150, cpuSuppressMinPercent=-3)
    with caplog.at_level(logging.WARNING):
        n.strategy.run_once()
        n.strategy.run_once()
    warned = [r.getMessage() for r in caplog.records if "cpuSuppressThresholdPercent=150" in r.getMessage()]
    assert len(warned) == 1 and "65" in warned[0]
    assert len([r for r in caplog.records if "cpuSuppressMinPercent=-3" in r.getMessage()]) == 1
    assert n.read("cpuset.cpus", n.layout.qos_dir("BestEffort")) == "0-3,8-10,16-19,24-26"


def test_min_percent_raises_budget(tmp_path):
    n = Node(tmp_path, 1, "systemd", LS_PODS, {"ls1": 20.0, "be1": 3.0}, node_used=24.0)
    # 20800 - 20000 - 1000 = -200m; min 25% of 32000 = 8000m -> 8 CPUs: (0,16) (8,24) (1,17) (9,25)
    n.states.slo = slo(cpuSuppressMinPercent=25)
    n.strategy.run_once()
    assert n.read("cpuset.cpus", n.layout.qos_dir("BestEffort")) == "0-1,8-9,16-17,24-25"


def test_gate_off_or_interval_zero_registers_nothing(tmp_path):
    n = Node(tmp_path, 1, "systemd", LS_PODS, LS_USAGE)

    class Runtime:
        def __init__(self):
            self.names = []

        def add_runnable(self, name, fn, **kw):
            self.names.append(name)

    rt = Runtime()
    assert n.manager.register(rt) == ["CPUSuppress"] and rt.names == ["qos-CPUSuppress"]
    n.manager.ctx.gates = {"BECPUSuppress": False}
    rt = Runtime()
    assert n.manager.register(rt) == [] and rt.names == []
