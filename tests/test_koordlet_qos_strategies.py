"""CPUBurst, CgroupReconcile (memory QoS), SystemConfig and ResctrlReconcile on hand-built host trees.

Each cgroup file is created with a known content, each round's result is compared with a value worked
out by hand in the comments; v1 and v2, systemd and cgroupfs where the files differ.
"""

from __future__ import annotations

import json
import logging
import os

import pytest

from koordinator_roles.koordlet.metriccache import MetricCache, Sample, kinds
from koordinator_roles.koordlet.qosmanager import QOSContext, build
from koordinator_roles.koordlet.qosmanager.resctrl import l3_mask, mba_value
from koordinator_roles.koordlet.resourceexecutor import ResourceExecutor
from koordinator_roles.koordlet.statesinformer.nodeslo import merge_node_slo_spec
from koordinator_roles.koordlet.statesinformer.states import pod_meta
from koordinator_roles.koordlet.system.cgroup import BEST_EFFORT, BURSTABLE, GUARANTEED, CgroupLayout

NOW = 1_700_000_000.0
LAYOUTS = [(1, "systemd"), (1, "cgroupfs"), (2, "systemd"), (2, "cgroupfs")]
GI = 1 << 30
MI = 1 << 20
V1_UNLIMITED = "9223372036854771712"


def pod(uid, qos, kube_qos, resources, annotations=None, phase="Running"):
    return {"metadata": {"uid": uid, "namespace": "default", "name": uid,
                         "labels": {"koordinator.sh/qosClass": qos}, "annotations": dict(annotations or {})},
            "spec": {"containers": [{"name": "c", "resources": resources}]},
            "status": {"qosClass": kube_qos, "phase": phase,
                       "containerStatuses": [{"name": "c", "containerID": f"containerd://{uid}c",
                                              "state": {"running": {}}}]}}


# LS: 1 CPU / 1 Gi requested, limits 2 CPUs / 2 Gi. LSR: 2 CPUs / 1 Gi guaranteed. BE: 512 Mi batch, 1 Gi limit.
LS = pod("ls1", "LS", "Burstable", {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "2Gi"}})
LSR = pod("lsr1", "LSR", "Guaranteed", {"requests": {"cpu": "2", "memory": "1Gi"}, "limits": {"cpu": "2", "memory": "1Gi"}})
BE = pod("be1", "BE", "BestEffort", {"requests": {"kubernetes.io/batch-memory": "512Mi"},
                                     "limits": {"kubernetes.io/batch-memory": "1Gi"}})
PODS = [LS, LSR, BE]


class States:
    """The states informer's reading side; ``spec`` is the NodeSLO spec as the manager writes it."""

    def __init__(self, layout, pods, spec=None):
        self.layout, self._pods, self.spec = layout, pods, spec or {}
        self._node = {"metadata": {"name": "n1"},
                      "status": {"capacity": {"cpu": "32", "memory": "64Gi"},
                                 "allocatable": {"cpu": "32", "memory": "60Gi"}}}

    def node(self):
        return self._node

    def pods(self):
        return [pod_meta(p, self.layout) for p in self._pods]

    def node_slo(self):
        return merge_node_slo_spec(self.spec)

    def host_applications(self):
        return []

    def has_synced(self):
        return True


def put(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read().strip()


class Host:
    """A fake host (cgroups, /proc, /sys) with the koordlet's QoS manager on it."""

    def __init__(self, tmp_path, version=2, driver="systemd", pods=PODS, spec=None, gates=None):
        self.layout = CgroupLayout(version, driver, str(tmp_path / "cgroup"))
        self.proc, self.sys = str(tmp_path / "proc"), str(tmp_path / "sys")
        self.states = States(self.layout, pods, spec)
        self.executor = ResourceExecutor(self.layout)
        self.cache = MetricCache(None)
        self.ctx = QOSContext(states=self.states, cache=self.cache, executor=self.executor, layout=self.layout,
                              gates=gates or {}, clock=lambda: NOW, proc_root=self.proc, sys_root=self.sys)
        self.manager = build(self.ctx)

    def dirs(self):
        """Every cgroup dir of the pods: kubepods, the two QoS dirs, pods, containers."""
        out = [self.layout.qos_dir(q) for q in (GUARANTEED, BURSTABLE, BEST_EFFORT)]
        for meta in self.states.pods():
            out.append(meta.cgroup_dir)
            out += [rel for _n, _c, rel in meta.containers()]
        return out

    def create(self, name, value, dirs=None):
        for rel in dirs if dirs is not None else self.dirs():
            put(self.executor.path(name, rel), f"{value}\n")

    def file(self, name, rel):
        return read(self.executor.path(name, rel))

    def pod_dir(self, p):
        return self.layout.pod_dir(p["status"]["qosClass"], p["metadata"]["uid"])

    def ctr_dir(self, p):
        return self.layout.container_dir(p["status"]["qosClass"], p["metadata"]["uid"],
                                         f"containerd://{p['metadata']['uid']}c")

    def run(self, name, spec=None):
        if spec is not None:
            self.states.spec = spec
        self.executor.invalidate()      # each round decides from the files, not the write cache
        self.manager.get(name).run_once()


def unsupported_lines(caplog):
    return [r for r in caplog.records if "not supported" in r.getMessage()]


# -- CPUBurst ---------------------------------------------------------------------------------------

def burst_host(tmp_path, version, driver, spec, burst_file=True):
    h = Host(tmp_path, version, driver, spec=spec, gates={"CPUBurst": True})
    if burst_file:
        h.create("cpu.cfs_burst_us", 0)
    # quotas: LS pod and container at their limit (2 CPUs = 200000 µs)
    h.create("cpu.cfs_quota_us", "max 100000" if version == 2 else -1)
    for rel in (h.pod_dir(LS), h.ctr_dir(LS)):
        put(h.executor.path("cpu.cfs_quota_us", rel), "200000 100000\n" if version == 2 else "200000\n")
    return h


def burst_spec(**kw):
    return {"cpuBurstStrategy": kw}


@pytest.mark.parametrize("version,driver", LAYOUTS)
def test_cpu_burst_written_then_restored(tmp_path, version, driver):
    h = burst_host(tmp_path, version, driver, burst_spec(policy="cpuBurstOnly", cpuBurstPercent=1000))
    burst_name = "cpu.cfs_burst_us" if version == 1 else "cpu.max.burst"
    assert h.executor.path("cpu.cfs_burst_us", h.pod_dir(LS)).endswith(burst_name)
    h.run("CPUBurst")
    # 2 cores × 1000 % × 100000 µs = 2 000 000 µs, container and pod (one container)
    assert h.file("cpu.cfs_burst_us", h.ctr_dir(LS)) == "2000000"
    assert h.file("cpu.cfs_burst_us", h.pod_dir(LS)) == "2000000"
    # LSR and BE pods are never burst
    assert h.file("cpu.cfs_burst_us", h.ctr_dir(LSR)) == "0"
    assert h.file("cpu.cfs_burst_us", h.ctr_dir(BE)) == "0"
    # cpuBurstOnly resets the quota to the limit's: already 200000, left as it is
    assert h.executor.read("cpu.cfs_quota_us", h.ctr_dir(LS)) == "200000"
    h.run("CPUBurst", burst_spec(policy="none"))
    assert h.file("cpu.cfs_burst_us", h.ctr_dir(LS)) == "0"
    assert h.file("cpu.cfs_burst_us", h.pod_dir(LS)) == "0"


def test_cpu_burst_pod_annotation_overrides_node(tmp_path):
    ls = json.loads(json.dumps(LS))
    ls["metadata"]["annotations"]["koordinator.sh/cpuBurst"] = json.dumps({"policy": "auto", "cpuBurstPercent": 150})
    h = Host(tmp_path, spec=burst_spec(policy="none"), pods=[ls], gates={"CPUBurst": True})
    h.create("cpu.cfs_burst_us", 0)
    h.run("CPUBurst")
    assert h.file("cpu.cfs_burst_us", h.ctr_dir(ls)) == "300000"      # 2 × 150 % × 100000


def test_cpu_burst_kernel_without_burst_logs_once(tmp_path, caplog):
    h = burst_host(tmp_path, 1, "cgroupfs", burst_spec(policy="cpuBurstOnly"), burst_file=False)
    with caplog.at_level(logging.INFO):
        h.run("CPUBurst")
        h.run("CPUBurst")
    assert len(unsupported_lines(caplog)) == 1
    assert not os.path.exists(h.executor.path("cpu.cfs_burst_us", h.pod_dir(LS)))
    assert h.file("cpu.cfs_quota_us", h.ctr_dir(LS)) == "200000"


def test_cpu_burst_out_of_range_percent_uses_default(tmp_path, caplog):
    h = burst_host(tmp_path, 2, "systemd", burst_spec(policy="cpuBurstOnly", cpuBurstPercent=20000))
    with caplog.at_level(logging.WARNING):
        h.run("CPUBurst")
        h.run("CPUBurst")
    assert h.file("cpu.cfs_burst_us", h.ctr_dir(LS)) == "2000000"      # the default 1000 %
    assert len([r for r in caplog.records if "cpuBurstPercent=20000" in r.getMessage()]) == 1


def _usage(h, node_cores, throttled):
    t = NOW - 1
    h.cache.insert([Sample(kinds.NODE_CPU_USAGE, node_cores, t),
                    Sample(kinds.CONTAINER_CPU_THROTTLED, throttled, t, {kinds.LABEL_CONTAINER_ID: "containerd://ls1c"})])


@pytest.mark.parametrize("version", [1, 2])
def test_cfs_quota_burst_scales_up_down_and_resets(tmp_path, version):
    spec = burst_spec(policy="cfsQuotaBurstOnly", cfsQuotaBurstPercent=300)
    h = burst_host(tmp_path, version, "systemd", spec)
    # share pool: 32 CPUs − 2 requested by LSR = 30; usage 4 cores (no pod usage known) → 13 % < 50 %: idle.
    _usage(h, 4.0, 0.5)
    h.run("CPUBurst")
    # throttled → ×1.2: 200000 → 240000 (ceil 600000); the pod moves by the same 40000
    assert h.executor.read("cpu.cfs_quota_us", h.ctr_dir(LS)) == "240000"
    assert h.executor.read("cpu.cfs_quota_us", h.pod_dir(LS)) == "240000"
    if version == 2:
        assert h.file("cpu.cfs_quota_us", h.ctr_dir(LS)) == "240000 100000"
    h.run("CPUBurst")
    assert h.executor.read("cpu.cfs_quota_us", h.ctr_dir(LS)) == "288000"       # 240000 × 1.2
    # the node's share pool at 20/30 = 67 % ≥ 50 %: overload → ×0.8 = 230400
    h.cache = MetricCache(None)
    h.ctx.cache = h.cache
    _usage(h, 20.0, 0.5)
    h.run("CPUBurst")
    assert h.executor.read("cpu.cfs_quota_us", h.ctr_dir(LS)) == "230400"
    assert h.executor.read("cpu.cfs_quota_us", h.pod_dir(LS)) == "230400"
    # policy none: back to the limit's quota, the pod by the same delta
    h.run("CPUBurst", burst_spec(policy="none"))
    assert h.executor.read("cpu.cfs_quota_us", h.ctr_dir(LS)) == "200000"
    assert h.executor.read("cpu.cfs_quota_us", h.pod_dir(LS)) == "200000"


# -- CgroupReconcile (memory QoS) --------------------------------------------------------------------

ANOLIS = ("memory.min", "memory.low", "memory.high", "memory.wmark_ratio", "memory.wmark_scale_factor",
          "memory.wmark_min_adj", "memory.priority", "memory.use_priority_oom", "memory.oom.group")


def memory_spec(ls_enable=True, **ls):
    return {"resourceQOSStrategy": {
        "lsrClass": {"memoryQOS": {"enable": True, "minLimitPercent": 100, "lowLimitPercent": 0,
                                   "throttlingPercent": 0}},
        "lsClass": {"memoryQOS": {"enable": ls_enable, "minLimitPercent": 50, "lowLimitPercent": 80,
                                  "throttlingPercent": 80, "wmarkRatio": 90, "priorityEnable": 1, "priority": 6,
                                  **ls}},
        "beClass": {"memoryQOS": {"enable": True, "throttlingPercent": 80}}}}


def memory_host(tmp_path, version, driver, files=ANOLIS, spec=None):
    h = Host(tmp_path, version, driver, spec=spec or memory_spec(), gates={"CgroupReconcile": True})
    for name in files:
        unlimited = "max" if version == 2 else V1_UNLIMITED
        h.create(name, unlimited if name == "memory.high" else 0)
    return h


@pytest.mark.parametrize("version,driver", LAYOUTS)
def test_memory_qos_written_values(tmp_path, version, driver):
    h = memory_host(tmp_path, version, driver)
    h.run("CgroupReconcile")
    ls_pod, ls_ctr = h.pod_dir(LS), h.ctr_dir(LS)
    # LS: 1 Gi request → min 50 % = 536870912, low 80 % = 858993459 (floor)
    assert h.file("memory.min", ls_pod) == h.file("memory.min", ls_ctr) == "536870912"
    assert h.file("memory.low", ls_pod) == h.file("memory.low", ls_ctr) == "858993459"
    # high = floor((1 Gi + (2 Gi − 1 Gi) × 80 %) / 4096) × 4096 = floor(1932735283 / 4096) × 4096
    assert h.file("memory.high", ls_ctr) == "1932734464"
    assert h.file("memory.wmark_ratio", ls_pod) == "90"
    assert h.file("memory.wmark_scale_factor", ls_pod) == "20"    # LS default
    assert h.file("memory.wmark_min_adj", ls_pod) == "-25"        # LS default
    assert h.file("memory.priority", ls_pod) == "6"
    assert h.file("memory.use_priority_oom", ls_pod) == "1"
    # LSR: min 100 % of 1 Gi; throttling 0 → high unlimited
    assert h.file("memory.min", h.ctr_dir(LSR)) == str(GI)
    assert h.executor.read("memory.high", h.ctr_dir(LSR)) == "9223372036854775807"
    # v1 (Anolis) takes MaxInt64 (it refuses "-1"); v2 "max"; the tree held unlimited already: not rewritten
    assert h.file("memory.high", h.ctr_dir(LSR)) == ("max" if version == 2 else V1_UNLIMITED)
    # BE: 512 Mi batch request, 1 Gi batch limit: high = floor((512 Mi + 512 Mi × 80 %) / 4096) × 4096
    assert h.file("memory.high", h.ctr_dir(BE)) == str((512 * MI + 512 * MI * 80 // 100) // 4096 * 4096) \
        == "966365184"
    assert h.file("memory.wmark_min_adj", h.pod_dir(BE)) == "50"     # BE default
    # QoS dirs: Burstable = the LS pod's; kubepods root = every pod's (LS 512 Mi + LSR 1 Gi)
    assert h.file("memory.min", h.layout.qos_dir(BURSTABLE)) == "536870912"
    assert h.file("memory.low", h.layout.qos_dir(BURSTABLE)) == "858993459"
    assert h.file("memory.min", h.layout.qos_dir(GUARANTEED)) == str(512 * MI + GI) == "1610612736"
    assert h.file("memory.min", h.layout.qos_dir(BEST_EFFORT)) == "0"
    assert h.file("memory.priority", h.layout.qos_dir(BURSTABLE)) == "6"      # lsClass
    assert h.file("memory.priority", h.layout.qos_dir(GUARANTEED)) == "0"     # lsrClass
    # wmark files are pod/container only, not on QoS dirs
    assert h.file("memory.wmark_ratio", h.layout.qos_dir(BURSTABLE)) == "0"


def test_memory_qos_disabled_restores_none_values(tmp_path):
    h = memory_host(tmp_path, 2, "systemd")
    h.run("CgroupReconcile")
    assert h.file("memory.min", h.ctr_dir(LS)) == "536870912"
    h.run("CgroupReconcile", memory_spec(ls_enable=False))
    ls_pod, ls_ctr = h.pod_dir(LS), h.ctr_dir(LS)
    assert h.file("memory.min", ls_ctr) == h.file("memory.low", ls_ctr) == "0"
    assert h.file("memory.high", ls_ctr) == "max"
    assert (h.file("memory.wmark_ratio", ls_pod), h.file("memory.wmark_scale_factor", ls_pod),
            h.file("memory.wmark_min_adj", ls_pod), h.file("memory.priority", ls_pod)) == ("0", "50", "0", "0")
    assert h.file("memory.min", h.layout.qos_dir(BURSTABLE)) == "0"
    assert h.file("memory.min", h.layout.qos_dir(GUARANTEED)) == str(GI)     # the LSR pod's stays


def test_memory_qos_v1_unlimited_high_written_as_max_int64(tmp_path):
    h = memory_host(tmp_path, 1, "systemd")
    h.create("memory.high", 1 << 30, [h.ctr_dir(LSR)])
    h.run("CgroupReconcile")
    assert h.file("memory.high", h.ctr_dir(LSR)) == "9223372036854775807"


def test_memory_qos_upstream_kernel_logs_once_and_writes_what_exists(tmp_path, caplog):
    # cgroup v2 upstream: min/low/high/oom.group only
    h = memory_host(tmp_path, 2, "cgroupfs", files=("memory.min", "memory.low", "memory.high", "memory.oom.group"))
    with caplog.at_level(logging.INFO):
        h.run("CgroupReconcile")
        h.run("CgroupReconcile")
    lines = unsupported_lines(caplog)
    assert len(lines) == 1 and "memory.wmark_ratio" in lines[0].getMessage()
    assert h.file("memory.min", h.ctr_dir(LS)) == "536870912"
    assert not os.path.exists(h.executor.path("memory.wmark_ratio", h.pod_dir(LS)))


def test_memory_qos_v1_without_anolis_writes_nothing(tmp_path, caplog):
    h = memory_host(tmp_path, 1, "systemd", files=())
    with caplog.at_level(logging.INFO):
        h.run("CgroupReconcile")
        h.run("CgroupReconcile")
    assert len(unsupported_lines(caplog)) == 1
    assert not os.path.exists(h.executor.path("memory.min", h.pod_dir(LS)))


def test_memory_qos_out_of_range_value_ignored(tmp_path, caplog):
    h = memory_host(tmp_path, 1, "cgroupfs", spec=memory_spec(wmarkRatio=150, minLimitPercent=120))
    with caplog.at_level(logging.WARNING):
        h.run("CgroupReconcile")
        h.run("CgroupReconcile")
    assert h.file("memory.wmark_ratio", h.pod_dir(LS)) == "0"      # not written
    assert h.file("memory.min", h.pod_dir(LS)) == "0"              # min percent ignored: not written
    assert h.file("memory.low", h.pod_dir(LS)) == "858993459"      # the rest still applies
    assert len([r for r in caplog.records if "wmarkRatio=150" in r.getMessage()]) == 1
    assert len([r for r in caplog.records if "minLimitPercent=120" in r.getMessage()]) == 1


# -- SystemConfig -----------------------------------------------------------------------------------

def sys_host(tmp_path, reaper=True):
    h = Host(tmp_path, gates={"SystemConfig": True})
    put(f"{h.proc}/sys/vm/min_free_kbytes", "67584\n")
    put(f"{h.proc}/sys/vm/watermark_scale_factor", "10\n")
    if reaper:
        put(f"{h.sys}/kernel/mm/memcg_reaper/reap_background", "0\n")
    return h


def test_system_config_written_then_restored(tmp_path):
    h = sys_host(tmp_path)
    h.run("SystemConfigReconcile", {"systemStrategy": {"minFreeKbytesFactor": 100, "watermarkScaleFactor": 150,
                                                        "memcgReapBackGround": 1}})
    # 64 Gi = 67108864 kB × 100 / 10000 = 671088 kB
    assert read(f"{h.proc}/sys/vm/min_free_kbytes") == "671088"
    assert read(f"{h.proc}/sys/vm/watermark_scale_factor") == "150"
    assert read(f"{h.sys}/kernel/mm/memcg_reaper/reap_background") == "1"
    h.run("SystemConfigReconcile", {"systemStrategy": {}})
    assert read(f"{h.proc}/sys/vm/min_free_kbytes") == "67584"
    assert read(f"{h.proc}/sys/vm/watermark_scale_factor") == "10"
    assert read(f"{h.sys}/kernel/mm/memcg_reaper/reap_background") == "0"


def test_system_config_kernel_without_reaper_logs_once(tmp_path, caplog):
    h = sys_host(tmp_path, reaper=False)
    spec = {"systemStrategy": {"memcgReapBackGround": 1, "watermarkScaleFactor": 150}}
    with caplog.at_level(logging.INFO):
        h.run("SystemConfigReconcile", spec)
        h.run("SystemConfigReconcile", spec)
    assert len(unsupported_lines(caplog)) == 1
    assert not os.path.exists(f"{h.sys}/kernel/mm/memcg_reaper/reap_background")
    assert read(f"{h.proc}/sys/vm/watermark_scale_factor") == "150"


def test_system_config_out_of_range_skipped(tmp_path, caplog):
    h = sys_host(tmp_path)
    # factor 1: 67108864 × 1 / 10000 = 6710 kB < 10240: skipped; 500 > 400: skipped
    spec = {"systemStrategy": {"minFreeKbytesFactor": 1, "watermarkScaleFactor": 500}}
    with caplog.at_level(logging.WARNING):
        h.run("SystemConfigReconcile", spec)
        h.run("SystemConfigReconcile", spec)
    assert read(f"{h.proc}/sys/vm/min_free_kbytes") == "67584"
    assert read(f"{h.proc}/sys/vm/watermark_scale_factor") == "10"
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == 2


# -- ResctrlReconcile -------------------------------------------------------------------------------

def test_l3_mask_and_mba_hand_computed():
    # 11 ways (7ff): 0-30 % → ways [0, ceil(3.3)=4) → f; 0-100 % → 7ff; 50-100 % → [ceil(5.5)=6, 11) → 7c0
    assert (l3_mask(0x7FF, 0, 30), l3_mask(0x7FF, 0, 100), l3_mask(0x7FF, 50, 100)) == ("f", "7ff", "7c0")
    assert (mba_value(55, amd=False), mba_value(100, amd=False), mba_value(55, amd=True),
            mba_value(100, amd=True)) == (60, 100, 88, 2048)


def resctrl_host(tmp_path, version, spec, mounted=True):
    be = json.loads(json.dumps(BE))
    placed = pod("be2", "BE", "BestEffort", {}, annotations={"node.koordinator.sh/resctrl": "{}"})
    h = Host(tmp_path, version, "systemd", pods=[LS, be, placed], spec=spec, gates={"RdtResctrl": True})
    if mounted:
        root = f"{h.sys}/fs/resctrl"
        put(f"{root}/schemata", "    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n")
        put(f"{root}/info/L3/cbm_mask", "7ff\n")
        os.makedirs(f"{root}/info/MB", exist_ok=True)
        for group in ("LSR", "LS", "BE"):        # what the kernel creates with a group
            put(f"{root}/{group}/schemata", "    L3:0=7ff;1=7ff\n    MB:0=100;1=100\n")
            put(f"{root}/{group}/tasks", "")
    threads = "tasks" if version == 1 else "cgroup.threads"
    for p, tids in ((be, "101\n102\n"), (placed, "201\n"), (LS, "301\n")):
        put(h.layout.path("cpu", h.ctr_dir(p), threads), tids)
    return h


def resctrl_spec(be_enable=True, **be):
    return {"resourceQOSStrategy": {"beClass": {"resctrlQOS": {"enable": be_enable, **be}}}}


@pytest.mark.parametrize("version", [1, 2])
def test_resctrl_schemata_and_tasks(tmp_path, version):
    h = resctrl_host(tmp_path, version, resctrl_spec(mbaPercent=55))
    h.run("ResctrlReconcile")
    root = f"{h.sys}/fs/resctrl"
    assert read(f"{root}/BE/schemata") == "L3:0=f;1=f\nMB:0=60;1=60"        # 0-30 % of 11 ways; 55 % → 60
    # LS already holds the whole cache (the kernel pads each line): left as it is
    assert [line.strip() for line in read(f"{root}/LS/schemata").splitlines()] == ["L3:0=7ff;1=7ff", "MB:0=100;1=100"]
    # the BE pod's threads; not the annotated one (a hook placed it), not LS (class not enabled)
    assert read(f"{root}/BE/tasks").split() == ["101", "102"]
    assert read(f"{root}/LS/tasks") == ""
    h.run("ResctrlReconcile")
    assert read(f"{root}/BE/tasks").split() == ["101", "102"]                  # not appended twice


def test_resctrl_disabled_restores_whole_cache(tmp_path):
    h = resctrl_host(tmp_path, 2, resctrl_spec())
    h.run("ResctrlReconcile")
    assert read(f"{h.sys}/fs/resctrl/BE/schemata") == "L3:0=f;1=f\nMB:0=100;1=100"
    h.run("ResctrlReconcile", resctrl_spec(be_enable=False))
    assert read(f"{h.sys}/fs/resctrl/BE/schemata") == "L3:0=7ff;1=7ff\nMB:0=100;1=100"


def test_resctrl_creates_missing_group(tmp_path):
    h = resctrl_host(tmp_path, 1, resctrl_spec())
    root = f"{h.sys}/fs/resctrl"
    os.remove(f"{root}/LSR/schemata")
    os.remove(f"{root}/LSR/tasks")
    os.rmdir(f"{root}/LSR")
    h.run("ResctrlReconcile")
    assert os.path.isdir(f"{root}/LSR")      # on a real resctrl the kernel then adds schemata and tasks


def test_resctrl_not_mounted_logs_once(tmp_path, caplog):
    h = resctrl_host(tmp_path, 2, resctrl_spec(), mounted=False)
    with caplog.at_level(logging.INFO):
        h.run("ResctrlReconcile")
        h.run("ResctrlReconcile")
    assert len(unsupported_lines(caplog)) == 1
    assert not os.path.exists(f"{h.sys}/fs/resctrl")


def test_resctrl_invalid_range_leaves_l3_out(tmp_path, caplog):
    h = resctrl_host(tmp_path, 2, resctrl_spec(catRangeStartPercent=50, catRangeEndPercent=40))
    with caplog.at_level(logging.WARNING):
        h.run("ResctrlReconcile")
        h.run("ResctrlReconcile")
    assert read(f"{h.sys}/fs/resctrl/BE/schemata") == "MB:0=100;1=100"
    assert len([r for r in caplog.records if "catRangeStartPercent=50" in r.getMessage()]) == 1


def test_strategies_registered_behind_their_gates(tmp_path):
    h = Host(tmp_path, gates={"CPUBurst": True, "RdtResctrl": True})
    assert {s.name for s in h.manager.enabled()} == {"CPUBurst", "ResctrlReconcile"}
    h = Host(tmp_path, gates={"CgroupReconcile": True, "SystemConfig": True, "BlkIOReconcile": True})
    assert {s.name for s in h.manager.enabled()} == {"CgroupReconcile", "SystemConfigReconcile", "BlkIOReconcile"}


# -- BlkIOReconcile ---------------------------------------------------------------------------------

BLKIO_FILES = ("blkio.throttle.read_iops_device", "blkio.throttle.read_bps_device",
               "blkio.throttle.write_iops_device", "blkio.throttle.write_bps_device", "blkio.cost.weight")


def blkio_host(tmp_path, version=1, driver="systemd", iocost=True):
    h = Host(tmp_path, version, driver, gates={"BlkIOReconcile": True})
    put(f"{h.sys}/class/block/vdb/dev", "253:16\n")
    if version == 1:
        qos = [h.layout.qos_dir(GUARANTEED), h.layout.qos_dir(BEST_EFFORT)]
        for name in BLKIO_FILES if iocost else BLKIO_FILES[:4]:
            h.create(name, "", qos)
        if iocost:
            h.create("blkio.cost.qos", "", [""])
            h.create("blkio.cost.model", "", [""])
    return h


def blkio_spec(be=None, root=None):
    strategy = {}
    if be is not None:
        strategy["beClass"] = {"blkioQOS": be}
    if root is not None:
        strategy["cgroupRoot"] = {"blkioQOS": root}
    return {"resourceQOSStrategy": strategy}


VDB = {"name": "/dev/vdb", "type": "device",
       "ioCfg": {"readIOPS": 1024, "writeIOPS": 512, "readBPS": 1048576, "writeBPS": 524288, "ioWeightPercent": 40,
                 "readLatency": 2000, "enableUserModel": True, "modelReadBPS": 100, "modelReadSeqIOPS": 10,
                 "modelReadRandIOPS": 5, "modelWriteBPS": 90, "modelWriteSeqIOPS": 9, "modelWriteRandIOPS": 4}}


@pytest.mark.parametrize("driver", ["systemd", "cgroupfs"])
def test_blkio_written_then_reset(tmp_path, driver):
    h = blkio_host(tmp_path, driver=driver)
    be = h.layout.qos_dir(BEST_EFFORT)
    h.run("BlkIOReconcile", blkio_spec(be={"enable": True, "blocks": [VDB]}, root={"enable": True, "blocks": [VDB]}))
    assert [h.file(f, be) for f in BLKIO_FILES] == ["253:16 1024", "253:16 1048576", "253:16 512", "253:16 524288",
                                                   "253:16 40"]
    assert h.file("blkio.cost.qos", "") == "253:16 enable=1 ctrl=user rpct=95 rlat=2000 wpct=95 wlat=3000"
    assert h.file("blkio.cost.model", "") == \
        "253:16 ctrl=user rbps=100 rseqiops=10 rrandiops=5 wbps=90 wseqiops=9 wrandiops=4"
    h.run("BlkIOReconcile", blkio_spec(be={"enable": False, "blocks": [VDB]}))
    assert [h.file(f, be) for f in BLKIO_FILES] == ["253:16 0"] * 4 + ["253:16 100"]


def test_blkio_kernel_without_iocost_logs_once(tmp_path, caplog):
    h = blkio_host(tmp_path, iocost=False)
    spec = blkio_spec(be={"enable": True, "blocks": [VDB]}, root={"enable": True, "blocks": [VDB]})
    with caplog.at_level(logging.INFO):
        h.run("BlkIOReconcile", spec)
        h.run("BlkIOReconcile", spec)
    assert [r.getMessage() for r in unsupported_lines(caplog)] and \
        len({r.getMessage() for r in unsupported_lines(caplog)}) == len(unsupported_lines(caplog)) == 2
    assert h.file("blkio.throttle.read_iops_device", h.layout.qos_dir(BEST_EFFORT)) == "253:16 1024"
    assert not os.path.exists(h.executor.path("blkio.cost.weight", h.layout.qos_dir(BEST_EFFORT)))


def test_blkio_v2_does_nothing_logs_once(tmp_path, caplog):
    h = blkio_host(tmp_path, version=2)
    with caplog.at_level(logging.INFO):
        h.run("BlkIOReconcile", blkio_spec(be={"enable": True, "blocks": [VDB]}))
        h.run("BlkIOReconcile")
    assert len(unsupported_lines(caplog)) == 1


def test_blkio_out_of_range_and_unsupported_blocks(tmp_path, caplog):
    h = blkio_host(tmp_path)
    bad = {**VDB, "ioCfg": {"readIOPS": -5, "ioWeightPercent": 300}}
    vg = {"name": "vg0", "type": "volumegroup"}
    with caplog.at_level(logging.WARNING):
        h.run("BlkIOReconcile", blkio_spec(be={"enable": True, "blocks": [bad, vg]}))
        h.run("BlkIOReconcile")
    be = h.layout.qos_dir(BEST_EFFORT)
    assert h.file("blkio.throttle.read_iops_device", be) == ""      # refused: negative
    assert h.file("blkio.cost.weight", be) == ""                    # refused: > 100
    assert h.file("blkio.throttle.write_iops_device", be) == "253:16 0"
    assert len([r for r in caplog.records if "volumegroup" in r.getMessage()]) == 1
    assert len([r for r in caplog.records if "read_iops_device: invalid value '-5'" in r.getMessage()]) == 1
