"""Runtime hooks in reconciler mode (reference A.8): each plugin's answer, then the reconciler's writes on fake
node trees (cgroup v1 and v2, systemd and cgroupfs). Expected values are worked out by hand in the comments.

The node: 32 CPUs (2 sockets × 8 cores × 2 threads; NUMA node = socket: node 0 holds 0-7,16-23, node 1
holds 8-15,24-31).
"""

from __future__ import annotations

import json
import logging

import pytest

from koordinator.runtime.events import EventRecorder
from koordinator.sim.tree import CgroupStats, NodeTree, Topology
from koordinator_roles.koordlet import features, runtimehooks
from koordinator_roles.koordlet.metriccache import MetricCache, kinds
from koordinator_roles.koordlet.resourceexecutor import ResourceExecutor
from koordinator_roles.koordlet.runtimehooks import (BatchResource, CPUNormalization, CPUSetAllocator, GroupIdentity,
                                                     HookError, NodeFacts, Reconciler, node_facts)
from koordinator_roles.koordlet.runtimehooks.protocol import container_requests, pod_request
from koordinator_roles.koordlet.statesinformer.nodeslo import merge_node_slo_spec
from koordinator_roles.koordlet.statesinformer.states import pod_meta
from koordinator_roles.koordlet.system.cgroup import CgroupLayout
from tests.waiting import wait_until

LAYOUTS = [(1, "systemd"), (1, "cgroupfs"), (2, "systemd"), (2, "cgroupfs")]
TOPO = Topology(2, 8, 2)
GiB = 1 << 30
STATUS = "scheduling.koordinator.sh/resource-status"
EXT = "node.koordinator.sh/extended-resource-spec"
ALL_ON = {"GroupIdentity": True, "BatchResource": True, "CPUSetAllocator": True, "CPUNormalization": True}


def processors():
    out = []
    for cpu in range(TOPO.cpus):
        core, socket, _ = TOPO.place(cpu)
        out.append({"id": cpu, "core": core, "socket": socket, "node": socket})
    return out


def make_pod(uid, qos, kube_qos, *, cpuset=None, status=None, ext=None, containers=None, annotations=None,
             namespace="default", phase="Running"):
    """A pod object; ``containers``: name -> resources of spec.containers (default one container "c")."""
    containers = containers or {"c": {}}
    ann = dict(annotations or {})
    if cpuset is not None:
        ann[STATUS] = json.dumps({"cpuset": cpuset})
    if status is not None:
        ann[STATUS] = status
    if ext is not None:
        ann[EXT] = json.dumps({"containers": ext})
    labels = {"koordinator.sh/qosClass": qos} if qos else {}
    return {"metadata": {"uid": uid, "namespace": namespace, "name": uid, "labels": labels, "annotations": ann},
            "spec": {"containers": [{"name": n, "resources": r} for n, r in containers.items()]},
            "status": {"qosClass": kube_qos, "phase": phase,
                       "containerStatuses": [{"name": n, "containerID": f"containerd://{uid}{n}"}
                                             for n in containers]}}


def gi_slo(lsr=2, ls=2, be=-1, **extra):
    return merge_node_slo_spec({"resourceQOSStrategy": {
        "lsrClass": {"cpuQOS": {"enable": True, "groupIdentity": lsr}},
        "lsClass": {"cpuQOS": {"enable": True, "groupIdentity": ls}},
        "beClass": {"cpuQOS": {"enable": True, "groupIdentity": be}}}, **extra})


def facts(pods=(), node_annotations=None, slo=None, policy="none"):
    node = {"metadata": {"name": "n1", "annotations": node_annotations or {}}}
    return node_facts(node, slo if slo is not None else merge_node_slo_spec(None), processors(), list(pods),
                      cpu_manager_policy=policy)


def preq(p):
    return pod_request(p, "kubepods/pod" + p["metadata"]["uid"])


def creqs(p):
    req = preq(p)
    return container_requests(req, [(c["name"], f"containerd://x{c['name']}", f"{req.cgroup_parent}/x{c['name']}")
                                    for c in p["spec"]["containers"]])


# -- GroupIdentity ---------------------------------------------------------------------------------------

def test_group_identity_answers():
    gi = GroupIdentity()
    f = facts(slo=gi_slo(lsr=2, ls=1, be=-1))

    def bvt(p):
        return gi.pod_hook(preq(p), f).resources.cpu_bvt

    assert bvt(make_pod("a", "LSR", "Guaranteed")) == 2
    assert bvt(make_pod("b", "LSE", "Guaranteed")) == 2          # LSE uses the LSR value
    assert bvt(make_pod("c", "LS", "Burstable")) == 1
    assert bvt(make_pod("d", "BE", "BestEffort")) == -1
    # No QoS label: from the Kubernetes QoS; Guaranteed takes LSR's value since LSR is enabled.
    assert [bvt(make_pod(u, "", k)) for u, k in (("e", "Guaranteed"), ("f", "Burstable"), ("g", "BestEffort"))] \
        == [2, 1, -1]
    # The cpuQOS annotation counts for LS pods only; enable false -> 0.
    override = {"koordinator.sh/cpuQOS": json.dumps({"enable": True, "groupIdentity": -1})}
    assert bvt(make_pod("h", "LS", "Burstable", annotations=override)) == -1
    assert bvt(make_pod("i", "BE", "BestEffort", annotations=override)) == -1     # BE value anyway
    assert bvt(make_pod("j", "LSR", "Guaranteed", annotations=override)) == 2
    assert bvt(make_pod("k", "LS", "Burstable",
                        annotations={"koordinator.sh/cpuQOS": json.dumps({"groupIdentity": 2})})) == 0
    # Kube-QoS dirs: the Guaranteed dir (the kubepods root) is always 0.
    assert [gi.kube_qos_hook(k, f).cpu_bvt for k in ("Guaranteed", "Burstable", "BestEffort")] == [0, 1, -1]
    # Containers carry their pod's value.
    [c] = creqs(make_pod("c", "LS", "Burstable"))
    assert gi.container_hook(c, f).resources.cpu_bvt == 1


def test_group_identity_disabled_or_other_policy_does_nothing():
    gi = GroupIdentity()
    assert gi.pod_hook(preq(make_pod("a", "LS", "Burstable")), facts()) is None
    core = gi_slo()
    core["resourceQOSStrategy"]["policies"] = {"cpuPolicy": "coreSched"}
    assert gi.kube_qos_hook("Burstable", facts(slo=core)) is None


# -- BatchResource ---------------------------------------------------------------------------------------

BE_EXT = {"c1": {"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
                 "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "1Gi"}},
          "c2": {"requests": {"kubernetes.io/batch-cpu": "1500"},
                 "limits": {"kubernetes.io/batch-cpu": "2000", "kubernetes.io/batch-memory": "2Gi"}}}
BE_CONTAINERS = {"c1": {}, "c2": {}}


def test_batch_resource_answers():
    br = BatchResource()
    p = make_pod("be", "BE", "BestEffort", ext=BE_EXT, containers=BE_CONTAINERS)
    pod = br.pod_hook(preq(p), facts()).resources
    # shares: (500 + 1500) * 1024 / 1000 = 2048; quota: (1000 + 2000) * 100000 / 1000 = 300000; memory 1Gi + 2Gi.
    assert (pod.cpu_shares, pod.cfs_quota, pod.memory_limit) == (2048, 300000, 3 * GiB)
    c1, c2 = (br.container_hook(c, facts()).resources for c in creqs(p))
    assert (c1.cpu_shares, c1.cfs_quota, c1.memory_limit) == (512, 100000, GiB)
    assert (c2.cpu_shares, c2.cfs_quota, c2.memory_limit) == (1536, 200000, 2 * GiB)
    # Ratio 1.5: ceil(300000 / 1.5) = 200000, ceil(100000 / 1.5) = 66667.
    scaled = facts(node_annotations={"node.koordinator.sh/cpu-normalization-ratio": "1.50"})
    assert br.pod_hook(preq(p), scaled).resources.cfs_quota == 200000
    assert br.container_hook(creqs(p)[0], scaled).resources.cfs_quota == 66667
    # CPUSuppress's cfsQuota policy owns the BE quota: unlimited.
    suppress = facts(slo=merge_node_slo_spec({"resourceUsedThresholdWithBE": {"enable": True,
                                                                              "cpuSuppressPolicy": "cfsQuota"}}))
    assert br.pod_hook(preq(p), suppress).resources.cfs_quota == -1
    # A container without limits makes the pod unlimited; its own values are the defaults.
    p2 = make_pod("be2", "BE", "BestEffort", ext={**BE_EXT, "c3": {"requests": {"kubernetes.io/batch-cpu": "100"}}},
                  containers={**BE_CONTAINERS, "c3": {}})
    pod2 = br.pod_hook(preq(p2), facts()).resources
    assert (pod2.cpu_shares, pod2.cfs_quota, pod2.memory_limit) == (2150, -1, -1)   # 2100 * 1.024 = 2150
    c3 = br.container_hook(creqs(p2)[2], facts()).resources
    assert (c3.cpu_shares, c3.cfs_quota, c3.memory_limit) == (102, -1, -1)
    # Not BE, or no annotation: nothing.
    assert br.pod_hook(preq(make_pod("ls", "LS", "Burstable", ext=BE_EXT)), facts()) is None
    assert br.pod_hook(preq(make_pod("be3", "BE", "BestEffort")), facts()) is None
    bad = make_pod("be4", "BE", "BestEffort", annotations={EXT: "{nope"})
    with pytest.raises(HookError, match="extended-resource-spec is not JSON"):
        br.pod_hook(preq(bad), facts())


# -- CPUSetAllocator -------------------------------------------------------------------------------------

def test_cpuset_allocator_answers():
    ca = CPUSetAllocator()
    lsr = make_pod("lsr", "LSR", "Guaranteed", cpuset="2-3")
    lse = make_pod("lse", "LSE", "Guaranteed", cpuset="4,5")
    pods = [lsr, lse]
    f = facts(pods, node_annotations={"node.koordinator.sh/system-qos-resource": json.dumps({"cpuset": "30-31"})})
    # Shared pool: 0-31 minus bound 2-5 minus exclusive system CPUs 30-31.
    assert f.ls_share_pool == "0-1,6-29"
    assert f.ls_pools == {0: "0-1,6-7,16-23", 1: "8-15,24-29"}

    def answer(p):
        [c] = creqs(p)
        return ca.container_hook(c, f)

    assert (answer(lsr).resources.cpuset, answer(lsr).resources.cfs_quota) == ("2-3", -1)
    assert ca.pod_hook(preq(lsr), f).resources.cfs_quota == -1        # a pinned pod's quota is unset
    assert answer(lse).resources.cpuset == "4-5"
    assert answer(make_pod("ls", "LS", "Burstable")).resources.cpuset == "0-1,6-29"
    assert answer(make_pod("sys", "SYSTEM", "Burstable")).resources.cpuset == "30-31"
    assert answer(make_pod("be", "BE", "BestEffort")).resources.cpuset == ""        # CPUSuppress's
    assert answer(make_pod("be-b", "BE", "Burstable")).resources.cpuset == "0-1,6-29"
    assert answer(make_pod("none", "", "Burstable")).resources.cpuset == "0-1,6-29"
    numa = make_pod("numa", "LS", "Burstable",
                    status=json.dumps({"numaNodeResources": [{"node": 1, "resources": {"cpu": "4"}}]}))
    assert answer(numa).resources.cpuset == "8-15,24-29"
    assert ca.pod_hook(preq(make_pod("ls", "LS", "Burstable")), f) is None
    # kubelet static policy: the kubelet owns unlabeled pods' cpusets.
    static = facts(policy="static")
    [c] = creqs(make_pod("none", "", "Guaranteed"))
    assert ca.container_hook(c, static) is None
    # A malformed resource-status is an error naming the pod.
    with pytest.raises(HookError, match="pod default/bad: annotation scheduling.koordinator.sh/resource-status"):
        answer(make_pod("bad", "LSR", "Guaranteed", status="{not json"))
    with pytest.raises(HookError, match="cpuset"):
        answer(make_pod("bad2", "LSR", "Guaranteed", cpuset="3-1"))


# -- CPUNormalization ------------------------------------------------------------------------------------

def test_cpu_normalization_answers():
    cn = CPUNormalization()
    ls = make_pod("ls", "LS", "Burstable", containers={"c": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}})
    f = facts(node_annotations={"node.koordinator.sh/cpu-normalization-ratio": "1.25"})
    # kubelet quota 2 cores = 200000; / 1.25 = 160000 (pod and container alike).
    assert cn.pod_hook(preq(ls), f).resources.cfs_quota == 160000
    assert cn.container_hook(creqs(ls)[0], f).resources.cfs_quota == 160000
    # No ratio: the kubelet's quota (restores a scaled one).
    assert cn.pod_hook(preq(ls), facts()).resources.cfs_quota == 200000
    pinned = make_pod("p", "", "Guaranteed", cpuset="1", containers={"c": {"limits": {"cpu": "1"}}})
    assert cn.pod_hook(preq(pinned), f) is None
    assert cn.pod_hook(preq(make_pod("be", "BE", "BestEffort")), f) is None
    assert cn.pod_hook(preq(make_pod("u", "LS", "Burstable")), f) is None      # unlimited stays unlimited


# -- the reconciler on fake trees ------------------------------------------------------------------------

class States:
    """The states informer's reading side, set by the test."""

    def __init__(self, layout, pods, slo, node_annotations=None):
        self.layout, self._pods, self.slo = layout, pods, slo
        self._node = {"metadata": {"name": "n1", "annotations": node_annotations or {}}}

    def node(self):
        return self._node

    def pods(self):
        return [pod_meta(p, self.layout) for p in self._pods]

    def node_slo(self):
        return self.slo

    def host_applications(self):
        return list(self.slo.get("hostApplications") or [])

    def has_synced(self):
        return True


class Node:
    """A fake node tree with the pods' cgroups, and a reconciler wired as the koordlet does."""

    def __init__(self, tmp_path, version, driver, pods, *, slo=None, gates=ALL_ON, bvt=True, events=None,
                 node_annotations=None):
        self.tree = NodeTree(tmp_path, "n1", TOPO, 64 * GiB, cgroup_version=version, driver=driver)
        self.tree.create(boot_time=0)
        self.layout = CgroupLayout(version, driver, str(self.tree.cgroup_root))
        self.executor = ResourceExecutor(self.layout)
        self.bvt = bvt
        for kube_qos in ("Guaranteed", "Burstable", "BestEffort"):
            self.add_bvt(self.layout.qos_dir(kube_qos))
        for p in pods:
            self.add_pod(p)
        cache = MetricCache(None)
        cache.set_kv(kinds.KV_NODE_CPU_INFO, {"cpus": processors()})
        self.states = States(self.layout, pods, slo if slo is not None else gi_slo(), node_annotations)
        self.reconciler = runtimehooks.build(self.states, self.executor, gates, cache=cache, events=events,
                                             proc_root=str(self.tree.proc_root))

    def add_bvt(self, rel):
        if self.bvt:
            with open(self.executor.path("cpu.bvt_warp_ns", rel), "w") as f:
                f.write("0\n")

    def add_pod(self, p):
        uid, kube_qos = p["metadata"]["uid"], p["status"]["qosClass"]
        pd = self.layout.pod_dir(kube_qos, uid)
        cgroups = [(pd, CgroupStats(cpus="0-31", mems="0-1"))]
        for c in p["status"]["containerStatuses"]:
            cgroups.append((self.layout.container_dir(kube_qos, uid, c["containerID"]),
                            CgroupStats(cpus="0-31", mems="0-1", leaf=True)))
        self.tree.add_cgroups(pd, cgroups)
        for rel, _ in cgroups:
            self.add_bvt(rel)

    def pod_dir(self, p):
        return self.layout.pod_dir(p["status"]["qosClass"], p["metadata"]["uid"])

    def ctr_dir(self, p, name="c"):
        return self.layout.container_dir(p["status"]["qosClass"], p["metadata"]["uid"],
                                         f"containerd://{p['metadata']['uid']}{name}")

    def raw(self, name, rel):
        with open(self.executor.path(name, rel)) as f:
            return f.read().strip()


LSR = make_pod("lsr1", "LSR", "Guaranteed", cpuset="2-3",
               containers={"c": {"limits": {"cpu": "2", "memory": "1Gi"}, "requests": {"cpu": "2", "memory": "1Gi"}}})
LS = make_pod("ls1", "LS", "Burstable", containers={"c": {"limits": {"cpu": "2"}, "requests": {"cpu": "1"}}})
BE = make_pod("be1", "BE", "BestEffort", ext=BE_EXT, containers=BE_CONTAINERS)


@pytest.mark.parametrize("version, driver", LAYOUTS)
def test_reconciler_writes_every_plugin(tmp_path, version, driver):
    n = Node(tmp_path, version, driver, [LSR, LS, BE],
             node_annotations={"node.koordinator.sh/cpu-normalization-ratio": "1.25"})
    result = n.reconciler.reconcile_once()
    assert result.pods == 3 and not result.skipped and not result.dangling
    lay = n.layout
    # GroupIdentity (LSR 2, LS 2, BE -1): QoS dirs 0 / 2 / -1, pods and containers their class's value.
    assert [n.raw("cpu.bvt_warp_ns", lay.qos_dir(k)) for k in ("Guaranteed", "Burstable", "BestEffort")] \
        == ["0", "2", "-1"]
    for p, want in ((LSR, "2"), (LS, "2"), (BE, "-1")):
        assert n.raw("cpu.bvt_warp_ns", n.pod_dir(p)) == want
        assert n.raw("cpu.bvt_warp_ns", n.ctr_dir(p, p["spec"]["containers"][0]["name"])) == want
    # CPUSetAllocator: LSR pinned to 2-3 with its quota unset; LS gets the shared pool 0-1,4-31.
    assert n.executor.read("cpuset.cpus", n.ctr_dir(LSR)) == "2-3"
    assert n.executor.read("cpu.cfs_quota_us", n.pod_dir(LSR)) == "-1"
    assert n.executor.read("cpu.cfs_quota_us", n.ctr_dir(LSR)) == "-1"
    assert n.executor.read("cpuset.cpus", n.ctr_dir(LS)) == "0-1,4-31"
    # The BE container's cpuset is CPUSuppress's: untouched.
    assert n.executor.read("cpuset.cpus", n.ctr_dir(BE, "c1")) == "0-31"
    # CPUNormalization: LS limit 2 cores = 200000 / 1.25 = 160000, pod (its only container) and container.
    assert n.executor.read("cpu.cfs_quota_us", n.pod_dir(LS)) == "160000"
    assert n.executor.read("cpu.cfs_quota_us", n.ctr_dir(LS)) == "160000"
    # BatchResource: pod 2048 shares, quota 300000 / 1.25 = 240000, memory 3Gi; c1 512, 80000, 1Gi.
    be_pod, c1 = n.pod_dir(BE), n.ctr_dir(BE, "c1")
    if version == 1:
        assert (n.raw("cpu.shares", be_pod), n.raw("cpu.cfs_quota_us", be_pod),
                n.raw("memory.limit_in_bytes", be_pod)) == ("2048", "240000", str(3 * GiB))
        assert (n.raw("cpu.shares", c1), n.raw("cpu.cfs_quota_us", c1), n.raw("memory.limit_in_bytes", c1)) \
            == ("512", "80000", str(GiB))
        assert n.raw("cpu.cfs_quota_us", n.ctr_dir(LS)) == "160000"
    else:
        # The v2 files (raw() takes the logical name): cpu.weight = 1 + (shares - 2) * 9999 / 262142:
        # 2048 -> 79, 512 -> 20; cpu.max "quota period"; memory.max.
        assert (n.raw("cpu.shares", be_pod), n.raw("cpu.cfs_quota_us", be_pod),
                n.raw("memory.limit_in_bytes", be_pod)) == ("79", "240000 100000", str(3 * GiB))
        assert (n.raw("cpu.shares", c1), n.raw("cpu.cfs_quota_us", c1), n.raw("memory.limit_in_bytes", c1)) \
            == ("20", "80000 100000", str(GiB))
        assert n.raw("cpu.cfs_quota_us", n.pod_dir(LSR)) == "max 100000"
    # A second round changes nothing (idempotent: CPUNormalization scales the kubelet's quota, not the file's).
    n.reconciler.reconcile_once()
    assert n.executor.read("cpu.cfs_quota_us", n.ctr_dir(LS)) == "160000"


@pytest.mark.parametrize("version, driver", [(1, "cgroupfs"), (2, "systemd")])
def test_gates_off_write_nothing(tmp_path, version, driver):
    n = Node(tmp_path, version, driver, [LSR, LS, BE], gates={})
    assert n.reconciler.plugins == []
    dirs = [n.pod_dir(p) for p in (LSR, LS, BE)] + [n.ctr_dir(LSR), n.ctr_dir(BE, "c1")]
    names = ("cpu.bvt_warp_ns", "cpuset.cpus", "cpu.cfs_quota_us", "cpu.shares", "memory.limit_in_bytes")
    before = {(name, d): n.raw(name, d) for name in names for d in dirs}
    assert n.reconciler.reconcile_once().updates == 0
    assert {(name, d): n.raw(name, d) for name in names for d in dirs} == before
    # GroupIdentity alone off: the others write, bvt stays 0.
    m = Node(tmp_path / "m", version, driver, [LS], gates={**ALL_ON, "GroupIdentity": False})
    m.reconciler.reconcile_once()
    assert m.raw("cpu.bvt_warp_ns", m.pod_dir(LS)) == "0"
    assert m.executor.read("cpuset.cpus", m.ctr_dir(LS)) == "0-31"      # shared pool: nothing bound


@pytest.mark.parametrize("version, driver", [(1, "systemd"), (2, "cgroupfs")])
def test_kernel_without_group_identity_is_skipped_once(tmp_path, version, driver, caplog):
    n = Node(tmp_path, version, driver, [LS, BE], bvt=False)
    with caplog.at_level(logging.INFO, logger="koordinator.koordlet.runtimehooks"):
        n.reconciler.reconcile_once()
        n.reconciler.reconcile_once()
    skipped = [r for r in caplog.records if "runtime hook GroupIdentity skipped" in r.getMessage()]
    assert len(skipped) == 1
    assert n.executor.read("memory.limit_in_bytes", n.pod_dir(BE)) == str(3 * GiB)   # the others still apply


@pytest.mark.parametrize("version, driver", [(1, "systemd"), (2, "cgroupfs")])
def test_host_application_bvt(tmp_path, version, driver):
    # Host apps without cgroupPath: LS -> host-latency-sensitive/<name> (LS value 1), BE -> host-best-effort (-1).
    slo = gi_slo(lsr=2, ls=1, be=-1)
    slo["hostApplications"] = [{"name": "nginx", "qos": "LS"}, {"name": "batchd", "qos": "BE"}]
    n = Node(tmp_path, version, driver, [], slo=slo)
    for rel in ("host-latency-sensitive/nginx", "host-best-effort/batchd"):
        for sub in (("cpu",) if version == 1 else ("",)):
            d = n.tree.cgroup_root / sub / rel
            d.mkdir(parents=True)
        n.add_bvt(rel)
    n.reconciler.reconcile_once()
    assert n.raw("cpu.bvt_warp_ns", "host-latency-sensitive/nginx") == "1"
    assert n.raw("cpu.bvt_warp_ns", "host-best-effort/batchd") == "-1"


def test_group_identity_sysctl_switched_on(tmp_path):
    n = Node(tmp_path, 1, "cgroupfs", [LS])
    sysctl = n.tree.proc_root / "sys/kernel"
    sysctl.mkdir(parents=True, exist_ok=True)
    (sysctl / "sched_group_identity_enabled").write_text("0\n")
    (sysctl / "sched_core").write_text("1\n")
    n.reconciler.reconcile_once()
    assert (sysctl / "sched_group_identity_enabled").read_text() == "1"
    assert (sysctl / "sched_core").read_text() == "0"        # core scheduling and group identity exclude each other


@pytest.mark.parametrize("version, driver", LAYOUTS)
def test_terminated_pod_cleaned(tmp_path, version, driver):
    # LS value 1 differs from BE's -1: a BE pod (Burstable dir) left behind gets its dir's value back.
    be_burstable = make_pod("beb", "BE", "Burstable")
    n = Node(tmp_path, version, driver, [LS, be_burstable], slo=gi_slo(lsr=2, ls=1, be=-1))
    n.reconciler.reconcile_once()
    gone = n.pod_dir(be_burstable)
    assert n.raw("cpu.bvt_warp_ns", gone) == "-1"
    be_burstable["status"]["phase"] = "Succeeded"          # the kubelet has not removed its cgroup yet
    result = n.reconciler.reconcile_once()
    assert result.pods == 1 and result.dangling == [gone]
    assert n.raw("cpu.bvt_warp_ns", gone) == "1"           # the Burstable dir's value
    assert n.raw("cpu.bvt_warp_ns", n.pod_dir(LS)) == "1"
    assert any(gone in path for path in n.executor._cache)
    n.tree.remove_cgroup(gone)
    assert n.reconciler.reconcile_once().dangling == []
    # Forgotten by the executor: a cgroup recreated at that path is written again at once.
    assert not any(gone in path for path in n.executor._cache)


def test_reconciler_registers_callbacks_and_runnable():
    calls = []

    class FakeStates:
        def register_callback(self, kind, name, fn):
            calls.append(("callback", kind))

    class FakeRuntime:
        def add_runnable(self, name, fn):
            calls.append(("runnable", name))

    class Executor:
        layout = CgroupLayout(1, "cgroupfs", "/nonexistent")

    Reconciler(FakeStates(), Executor(), [], interval=1.0).register(FakeRuntime())
    assert calls == [("callback", "pods"), ("callback", "nodeslo"), ("callback", "node"),
                     ("runnable", "runtime-hooks-reconciler")]


def test_hook_gates_are_enabled():
    gates = features.resolve({"CPUNormalization": True})
    assert [p.name for p in runtimehooks.enabled_plugins(gates)] == ["BatchResource", "CPUNormalization",
                                                                     "CPUSetAllocator", "GroupIdentity"]
    for name in ("GroupIdentity", "CPUSetAllocator", "BatchResource", "CPUNormalization"):
        assert name not in features.UNSUPPORTED
    with pytest.raises(ValueError, match="OOMScoreAdj=true is not supported"):
        features.resolve({"OOMScoreAdj": True})


# -- a malformed resource-status: a Warning Event, the other pods done -----------------------------------

def events_for(client, namespace, name):
    return [e for e in client.list("Event", namespace)["items"] if e["involvedObject"].get("name") == name]


def test_malformed_resource_status_event_and_others_done(tmp_path, client, namespace):
    recorder = EventRecorder(client, "koordlet", host="n1")
    recorder.start()
    try:
        bad = make_pod("bad1", "LSR", "Guaranteed", status="{not json", namespace=namespace)
        ls = make_pod("ls2", "LS", "Burstable", namespace=namespace)
        be = make_pod("be2", "BE", "BestEffort", ext=BE_EXT, containers=BE_CONTAINERS, namespace=namespace)
        n = Node(tmp_path, 1, "systemd", [bad, ls, be], events=lambda: recorder)
        result = n.reconciler.reconcile_once()
        assert list(result.skipped) == [f"{namespace}/bad1"]
        # The others are done: LS bvt 2 and shared pool (nothing bound: the bad pod binds nothing), BE limits.
        assert n.raw("cpu.bvt_warp_ns", n.pod_dir(ls)) == "2"
        assert n.executor.read("cpuset.cpus", n.ctr_dir(ls)) == "0-31"
        assert n.raw("memory.limit_in_bytes", n.pod_dir(be)) == str(3 * GiB)
        # The bad pod is untouched.
        assert n.raw("cpu.bvt_warp_ns", n.pod_dir(bad)) == "0"
        [event] = wait_until(lambda: events_for(client, namespace, "bad1"), message="the warning event")
        assert event["type"] == "Warning" and event["reason"] == "InvalidResourceStatus"
        assert "scheduling.koordinator.sh/resource-status is not JSON" in event["message"]
        # Reported once: a second round sends no second event for the same problem.
        n.reconciler.reconcile_once()
        assert n.reconciler._reported == {"bad1": event["message"]}
    finally:
        recorder.stop(5.0)


def test_node_facts_without_topology():
    f = node_facts({"metadata": {}}, {}, [], [])
    assert f == NodeFacts(node_slo={}, ls_share_pool=None, be_share_pool=None)
    [c] = creqs(make_pod("ls", "LS", "Burstable"))
    assert CPUSetAllocator().container_hook(c, f) is None       # no topology yet: no cpuset
