"""NodeNUMAResource (reference §2.2): annotations, args, the cpuset accumulator, the NUMA topology manager,
the plugin's extension points and one run of the real scheduler against the embedded API server.

Topology used throughout: 2 sockets × 8 cores × 2 threads, one NUMA node per socket, numbered as Linux on
x86 (koordinator/sim/tree.py Topology): CPUs 0-7 are NUMA 0's first threads, 8-15 NUMA 1's, and cpu i and
i + 16 are siblings. So NUMA 0 = 0-7,16-23 and NUMA 1 = 8-15,24-31.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from koordinator.apis import numa
from koordinator.apis.cpuset import format_cpuset, parse_cpuset
from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator.sim.tree import Topology
from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.interfaces import ClusterEvent
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.plugins.helper.reservationstate import STATE_KEY
from koordinator_roles.scheduler.framework.status import (SKIP, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                          CycleState)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins import nodenumaresource as nr
from koordinator_roles.scheduler.plugins.nodenumaresource.accumulator import (AllocationError, allocate_cpus,
                                                                              take_cpus)
from koordinator_roles.scheduler.plugins.nodenumaresource.args import parse_args
from koordinator_roles.scheduler.plugins.nodenumaresource.topology import CPUTopology
from koordinator_roles.scheduler.plugins.nodenumaresource.topologymanager import (Hint, admit, generate_hints,
                                                                                  merge_hints, split_request)
from tests.scheduler_harness import NS, InProcessScheduler, condition, node, pod
from tests.waiting import wait_until

GI = 1024 ** 3
TOPO = CPUTopology.linux_x86(2, 8, 2)
ALL = set(TOPO.cpus)
LEAST, MOST = numa.NUMA_LEAST_ALLOCATED, numa.NUMA_MOST_ALLOCATED
FULL, SPREAD = numa.CPU_BIND_POLICY_FULL_PCPUS, numa.CPU_BIND_POLICY_SPREAD_BY_PCPUS
PCPU, NUMA_LEVEL = numa.CPU_EXCLUSIVE_POLICY_PCPU_LEVEL, numa.CPU_EXCLUSIVE_POLICY_NUMA_NODE_LEVEL


def cpu_topology_annotation(sockets=2, cores=8, threads=2) -> str:
    topo = Topology(sockets, cores, threads)
    detail = []
    for cpu in range(topo.cpus):
        core, socket, _ = topo.place(cpu)
        detail.append({"id": cpu, "core": core, "socket": socket, "node": socket})
    return json.dumps({"detail": detail})


def nrt(name: str, policy: str = "None", annotations: dict | None = None) -> dict:
    """A NodeResourceTopology for the 2×8×2 machine: two NUMA zones of 16 CPUs and 32Gi each."""
    zones = [{"name": f"node-{i}", "type": "Node",
              "resources": [{"name": "cpu", "capacity": "16", "allocatable": "16", "available": "16"},
                            {"name": "memory", "capacity": "32Gi", "allocatable": "32Gi", "available": "32Gi"}]}
             for i in (0, 1)]
    return {"apiVersion": "topology.node.k8s.io/v1alpha1", "kind": "NodeResourceTopology",
            "metadata": {"name": name, "annotations": {numa.ANNOTATION_CPU_TOPOLOGY: cpu_topology_annotation(),
                                                       **(annotations or {})}},
            "topologyPolicies": [policy], "zones": zones}


# -- shared apis -------------------------------------------------------------------------------------------

def test_cpuset_parse_and_format():
    assert parse_cpuset("0-3,8,10-11") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpuset([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    assert format_cpuset([]) == ""
    with pytest.raises(ValueError, match="x: invalid CPU list 'a-b'"):
        parse_cpuset("a-b", "x")
    with pytest.raises(ValueError, match="invalid CPU range '5-2'"):
        parse_cpuset("5-2")
    # The koordlet uses the same implementation.
    from koordinator_roles.koordlet.system import cpuset as koordlet_cpuset
    assert koordlet_cpuset.parse_cpuset is parse_cpuset


def test_annotation_parsers_name_the_annotation_and_value():
    assert numa.parse_resource_spec({}) == numa.ResourceSpec()
    spec = numa.parse_resource_spec({numa.ANNOTATION_RESOURCE_SPEC: json.dumps(
        {"preferredCPUBindPolicy": "SpreadByPCPUs", "preferredCPUExclusivePolicy": "PCPULevel"})})
    assert spec == numa.ResourceSpec("", SPREAD, PCPU)
    # Unknown policy strings are kept (the plugin ignores them); wrong types are errors.
    assert numa.parse_resource_spec({numa.ANNOTATION_RESOURCE_SPEC: '{"preferredCPUBindPolicy":"test"}'}) \
        .preferred_cpu_bind_policy == "test"
    with pytest.raises(numa.AnnotationError, match=r"scheduling.koordinator.sh/resource-spec: invalid JSON '\{bad'"):
        numa.parse_resource_spec({numa.ANNOTATION_RESOURCE_SPEC: "{bad"})
    with pytest.raises(numa.AnnotationError, match="requiredCPUBindPolicy must be a string, got 3"):
        numa.parse_resource_spec({numa.ANNOTATION_RESOURCE_SPEC: '{"requiredCPUBindPolicy":3}'})
    with pytest.raises(numa.AnnotationError, match="numa-topology-spec: unknown numaTopologyPolicy 'Foo'"):
        numa.parse_numa_topology_spec({numa.ANNOTATION_NUMA_TOPOLOGY_SPEC: '{"numaTopologyPolicy":"Foo"}'})
    with pytest.raises(numa.AnnotationError, match=r"resource-status cpuset: invalid CPU list 'x'"):
        numa.parse_resource_status({numa.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"x"}'})
    with pytest.raises(numa.AnnotationError, match="cpu-topology: bad core 'a'"):
        numa.parse_cpu_topology('{"detail":[{"id":0,"core":"a","socket":0,"node":0}]}')
    status = numa.ResourceStatus((0, 1, 16, 17), (numa.NUMANodeResource(0, {"cpu": 4000, "memory": 8 * GI * 1000}),))
    text = numa.format_resource_status(status)
    assert json.loads(text) == {"cpuset": "0-1,16-17",
                                "numaNodeResources": [{"node": 0, "resources": {"cpu": "4", "memory": "8Gi"}}]}
    assert numa.parse_resource_status({numa.ANNOTATION_RESOURCE_STATUS: text}) == status
    kubelet = numa.parse_kubelet_cpu_manager_policy(json.dumps(
        {"policy": "static", "options": {"full-pcpus-only": "true"}, "reservedCPUs": "0-1"}))
    assert kubelet.full_pcpus_only and kubelet.reserved_cpus == (0, 1)
    assert numa.parse_pod_cpu_allocs(json.dumps([{"uid": "u", "cpuset": "4-5", "managedByKubelet": True},
                                                 {"uid": "v", "cpuset": "6", "managedByKubelet": False}])) == [4, 5]
    assert numa.parse_system_qos_exclusive_cpus('{"cpuset":"2-3"}') == [2, 3]
    assert numa.parse_system_qos_exclusive_cpus('{"cpuset":"2-3","cpusetExclusive":false}') == []


def test_args_defaults_and_validation():
    args = parse_args({})
    assert args.default_cpu_bind_policy == FULL
    assert args.scoring_strategy.type == "LeastAllocated"
    assert args.scoring_strategy.resources == [("cpu", 1), ("memory", 1)]
    assert args.default_numa_strategy == LEAST
    assert parse_args({"numaScoringStrategy": {"type": "MostAllocated"}}).default_numa_strategy == MOST
    with pytest.raises(ValueError, match="defaultCPUBindPolicy: Unsupported value: 'Foo'"):
        parse_args({"defaultCPUBindPolicy": "Foo"})
    with pytest.raises(ValueError, match="scoringStrategy.type: Unsupported value: 'BalancedAllocation'"):
        parse_args({"scoringStrategy": {"type": "BalancedAllocation"}})
    with pytest.raises(ValueError, match=r"scoringStrategy.resources\[0\].weight: Invalid value: 0"):
        parse_args({"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 0}]}})


# -- the accumulator ---------------------------------------------------------------------------------------

def take(n, policy=FULL, allocated=None, exclusive="", strategy=LEAST, available=None):
    allocated = allocated or {}
    avail = (ALL if available is None else set(available)) - set(allocated)
    return take_cpus(TOPO, 1, avail, allocated, n, policy, exclusive, strategy)


def test_topology_matches_linux_numbering():
    assert TOPO.num_cpus == 32 and TOPO.num_cores == 16 and TOPO.num_nodes == 2 and TOPO.num_sockets == 2
    assert TOPO.cpus_per_core == 2 and TOPO.cpus_per_node == 16
    assert TOPO.core_cpus[TOPO.core_of[3]] == [3, 19]
    assert TOPO.node_cpus[1] == list(range(8, 16)) + list(range(24, 32))


def test_full_pcpus_takes_whole_cores_on_one_numa_node():
    assert take(4) == [0, 1, 16, 17]
    assert take(2) == [0, 16]
    # A whole NUMA node, then spilling over sockets: all of socket 0 plus two cores of socket 1.
    assert take(16) == list(range(0, 8)) + list(range(16, 24))
    assert take(20) == list(range(0, 10)) + list(range(16, 26))


def test_spread_by_pcpus_takes_one_cpu_per_core():
    assert take(4, SPREAD) == [0, 1, 2, 3]
    # More than the node's cores: first threads of every core first, then siblings.
    assert take(12, SPREAD) == list(range(0, 8)) + [16, 17, 18, 19]


def test_least_and_most_allocated_numa_strategies():
    used = {c: (1, "") for c in (0, 16, 1, 17)}
    # LeastAllocated spreads to the emptier NUMA node, MostAllocated packs the used one.
    assert take(4, allocated=used) == [8, 9, 24, 25]
    assert take(4, allocated=used, strategy=MOST) == [2, 3, 18, 19]
    assert take(4, SPREAD, allocated=used, strategy=MOST) == [2, 3, 4, 5]


def test_exclusive_policies():
    # cpu 0 is held PCPU-exclusively: a PCPULevel pod keeps off its core (sibling 16), others may use it.
    pcpu = {0: (1, PCPU)}
    assert take(8, SPREAD, allocated=pcpu, exclusive=PCPU, strategy=MOST) == list(range(8, 16))
    assert take(8, SPREAD, allocated=pcpu, strategy=MOST) == list(range(1, 8)) + [16]
    # cpu 0 held NUMA-exclusively: a NUMANodeLevel pod goes to the other NUMA node while one exists.
    node_level = {0: (1, NUMA_LEVEL)}
    assert take(4, allocated=node_level, exclusive=NUMA_LEVEL, strategy=MOST) == [8, 9, 24, 25]
    assert take(4, allocated=node_level, strategy=MOST) == [1, 2, 17, 18]


def test_accumulator_failures_and_required_policies():
    with pytest.raises(AllocationError, match="not enough cpus available to satisfy request"):
        take(33)
    # Only half cores free: FullPCPUs required cannot be met; preferred falls back to single threads.
    halves = set(range(0, 16))
    with pytest.raises(AllocationError, match="not enough cpus available to satisfy request"):
        allocate_cpus(TOPO, halves, {}, 4, FULL, FULL, "", LEAST)
    assert allocate_cpus(TOPO, halves, {}, 4, FULL, "", "", LEAST) == [0, 1, 2, 3]
    # SpreadByPCPUs required: one CPU per core, so at most 16.
    assert len(allocate_cpus(TOPO, ALL, {}, 16, SPREAD, SPREAD, "", LEAST)) == 16
    with pytest.raises(AllocationError, match="not enough cpus"):
        allocate_cpus(TOPO, ALL, {}, 17, SPREAD, SPREAD, "", LEAST)
    # Per-NUMA split: 2 CPUs from each NUMA node.
    assert allocate_cpus(TOPO, ALL, {}, 4, FULL, FULL, "", LEAST, {0: 2000, 1: 2000}) == [0, 8, 16, 24]


# -- the topology manager ----------------------------------------------------------------------------------

ALLOC = {0: {"cpu": 16000, "memory": 32 * GI}, 1: {"cpu": 16000, "memory": 32 * GI}}


def hints_for(request, used=None, policy=numa.NUMA_POLICY_SINGLE_NUMA_NODE, exclusive=False, single=(), shared=()):
    return generate_hints([0, 1], ALLOC, used or {}, request, policy, exclusive, set(single), set(shared), None,
                          lambda a, r: 0)


def test_hints_merge_and_policies():
    hints = hints_for({"cpu": 8000, "memory": GI})
    assert [(h.mask, h.preferred) for h in hints["cpu"]] == [(1, True), (2, True), (3, False)]
    best = merge_hints([0, 1], hints)
    assert best == Hint(1, True, 0)
    assert admit(numa.NUMA_POLICY_SINGLE_NUMA_NODE, hints, best) == ""
    # 20 CPUs need both NUMA nodes: SingleNUMANode refuses, Restricted accepts, BestEffort always does.
    big = {"cpu": 20000}
    single = hints_for(big)
    assert admit(numa.NUMA_POLICY_SINGLE_NUMA_NODE, single, merge_hints([0, 1], single)) == \
        "node(s) Insufficient NUMA Node resources"
    restricted = hints_for(big, policy=numa.NUMA_POLICY_RESTRICTED)
    best = merge_hints([0, 1], restricted)
    assert best.mask == 3 and admit(numa.NUMA_POLICY_RESTRICTED, restricted, best) == ""
    assert admit(numa.NUMA_POLICY_BEST_EFFORT, single, merge_hints([0, 1], single)) == ""
    # Nothing fits at all.
    none = hints_for({"cpu": 40000})
    assert admit(numa.NUMA_POLICY_RESTRICTED, none, merge_hints([0, 1], none)) == "Unsatisfied NUMA cpu"
    # Used capacity counts: NUMA 0 has 4 CPUs left, so 8 CPUs go to NUMA 1.
    hints = hints_for({"cpu": 8000}, used={0: {"cpu": 12000}})
    assert merge_hints([0, 1], hints).mask == 2


def test_single_numa_exclusive_check():
    # NUMA 0 is used by a multi-NUMA pod ("shared"): a Required-exclusive single-NUMA hint on it is not preferred.
    hints = hints_for({"cpu": 4000}, exclusive=True, shared={0})
    assert [(h.mask, h.preferred) for h in hints["cpu"]] == [(1, False), (2, True), (3, False)]
    assert merge_hints([0, 1], hints).mask == 2
    # A node used by a single-NUMA pod may not join a multi-NUMA hint.
    hints = hints_for({"cpu": 20000}, policy=numa.NUMA_POLICY_RESTRICTED, exclusive=True, single={0})
    assert admit(numa.NUMA_POLICY_RESTRICTED, hints, merge_hints([0, 1], hints)) == \
        "node(s) Insufficient NUMA Node resources"


def test_split_request_evenly():
    out = split_request([0, 1], ALLOC, {0: {"cpu": 14000}}, {"cpu": 8000, "memory": 2 * GI})
    # NUMA 0 (2 CPUs left) is asked first for half and gives 2; NUMA 1 gives the other 6.
    assert out == {0: {"cpu": 2000, "memory": GI}, 1: {"cpu": 6000, "memory": GI}}
    with pytest.raises(AllocationError, match="Insufficient NUMA cpu"):
        split_request([0], ALLOC, {0: {"cpu": 14000}}, {"cpu": 4000})


# -- the plugin --------------------------------------------------------------------------------------------

def make_node(name="n1", cpu="32", memory="64Gi", labels=None, annotations=None):
    return {"metadata": {"name": name, "labels": dict(labels or {}), "annotations": dict(annotations or {})},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}}}


def make_pod(name, cpu="4", memory="1Gi", qos="LSR", annotations=None, node_name="", labels=None):
    lab = {"koordinator.sh/qosClass": qos} if qos else {}
    lab.update(labels or {})
    spec = {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": {"name": name, "namespace": "d", "uid": f"uid-{name}", "labels": lab,
                         "annotations": dict(annotations or {})}, "spec": spec, "status": {"phase": "Pending"}}


class Env:
    """The plugin over a snapshot, fed NRTs and pods through its informer handlers."""

    def __init__(self, nodes=None, nrts=None, args=None):
        self.snap = Snapshot([NodeInfo(n) for n in (nodes or [make_node()])])
        self.plugin = nr.new(args or {}, PluginHandle(snapshot_source=lambda: self.snap))
        for n in nodes or [make_node()]:
            self.plugin.on_node(n)
        for t in nrts if nrts is not None else [nrt("n1")]:
            self.plugin.on_nrt(t)

    def cycle(self, pod):
        pi, state = PodInfo(pod), CycleState()
        return pi, state, self.plugin.pre_filter(state, pi, self.snap)[1]

    def node(self, name="n1"):
        return self.snap.get(name)

    def schedule(self, pod, node_name="n1"):
        """PreFilter, Filter, Reserve and PreBind on one node: the annotations PreBind writes."""
        pi, state, status = self.cycle(pod)
        assert status is None or status.code == SKIP, status
        assert self.plugin.filter(state, pi, self.node(node_name)) is None
        assert self.plugin.reserve(state, pi, node_name) is None
        modified = {"metadata": {"annotations": {}}}
        assert self.plugin.pre_bind(state, pi, node_name, modified) is None
        return modified["metadata"]["annotations"]


def cpuset_of(annotations):
    return parse_cpuset(json.loads(annotations[numa.ANNOTATION_RESOURCE_STATUS])["cpuset"])


def test_lsr_prod_pods_get_full_cores_without_overlap():
    env = Env()
    first = env.schedule(make_pod("a"))
    assert cpuset_of(first) == [0, 1, 16, 17]
    assert json.loads(first[numa.ANNOTATION_RESOURCE_SPEC]) == {"preferredCPUBindPolicy": "FullPCPUs"}
    second = env.schedule(make_pod("b"))
    assert cpuset_of(second) == [8, 9, 24, 25]
    # An explicit spread policy; the pod's own resource-spec is not rewritten.
    spread = {numa.ANNOTATION_RESOURCE_SPEC: json.dumps({"preferredCPUBindPolicy": "SpreadByPCPUs"})}
    third = env.schedule(make_pod("c", annotations=spread))
    assert cpuset_of(third) == [2, 3, 4, 5]
    assert numa.ANNOTATION_RESOURCE_SPEC not in third


def test_prefilter_messages_for_bad_input():
    env = Env()
    _, _, status = env.cycle(make_pod("bad", annotations={numa.ANNOTATION_RESOURCE_SPEC: "[1]"}))
    assert status.code == UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.message() == "annotation scheduling.koordinator.sh/resource-spec: '[1]' is not a JSON object"
    _, _, status = env.cycle(make_pod("frac", cpu="1500m"))
    assert (status.code, status.message()) == (UNSCHEDULABLE_AND_UNRESOLVABLE, "the requested CPUs must be integer")
    # An unknown policy string is ignored: no cpuset, and the pod is treated as an ordinary one.
    _, state, status = env.cycle(make_pod("odd", annotations={
        numa.ANNOTATION_RESOURCE_SPEC: '{"requiredCPUBindPolicy":"test","preferredCPUBindPolicy":"test"}'}))
    assert status.code == SKIP
    # LS pods and pods without the explicit LSR/LSE label get no cpuset: Skip when no node is special.
    for p in (make_pod("ls", qos="LS"), make_pod("guaranteed", qos="")):
        assert env.cycle(p)[2].code == SKIP
    # Zero requests: Skip (also for Score).
    pi, state, status = env.cycle(make_pod("zero", cpu="0", memory="0"))
    assert status.code == SKIP
    assert env.plugin.pre_score(state, pi, env.snap, env.snap.all_rows()).code == SKIP


def test_filter_messages():
    env = Env(nodes=[make_node("n1"), make_node("bare")])
    pi, state, _ = env.cycle(make_pod("a"))
    # A cpuset needs a CPU topology (NodeResourceTopology): without one the node is out.
    status = env.plugin.filter(state, pi, env.node("bare"))
    assert (status.code, status.message()) == (UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) invalid CPU Topology")
    # With a preferred policy only, Filter makes no trial allocation (Reserve does).
    env.plugin.on_pod(make_pod("all", cpu="32", node_name="n1",
                               annotations={numa.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-31"}'}))
    assert env.plugin.filter(state, pi, env.node("n1")) is None
    assert env.plugin.reserve(state, pi, "n1").message() == "not enough cpus available to satisfy request"
    env.plugin.on_pod_delete(make_pod("all"))
    required = {numa.ANNOTATION_RESOURCE_SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'}
    pi, state, _ = env.cycle(make_pod("r", annotations=required))
    assert env.plugin.filter(state, pi, env.node("bare")).message() == "node(s) invalid CPU Topology"
    pi, state, _ = env.cycle(make_pod("r3", cpu="3", annotations=required))
    assert env.plugin.filter(state, pi, env.node()).message() == "node(s) requested cpus not multiple cpus per core"
    pi, state, _ = env.cycle(make_pod("r40", cpu="40", annotations=required))
    status = env.plugin.filter(state, pi, env.node())
    assert (status.code, status.message()) == (UNSCHEDULABLE, "not enough cpus available to satisfy request")


def test_node_policies_force_binding_and_conflicts():
    forced = make_node("n1", labels={numa.LABEL_CPU_BIND_POLICY: "FullPCPUsOnly"})
    env = Env(nodes=[forced])
    # Any pod asking native cpu is bound on such a node, LS included; fractions are refused.
    pi, state, status = env.cycle(make_pod("ls", cpu="1500m", qos="LS"))
    assert status is None
    assert env.plugin.filter(state, pi, env.node()).message() == "the requested CPUs must be integer"
    annotations = env.schedule(make_pod("ls2", cpu="2", qos="LS"))
    assert cpuset_of(annotations) == [0, 16]
    assert json.loads(annotations[numa.ANNOTATION_RESOURCE_SPEC]) == {"requiredCPUBindPolicy": "FullPCPUs"}
    spread = {numa.ANNOTATION_RESOURCE_SPEC: '{"requiredCPUBindPolicy":"SpreadByPCPUs"}'}
    pi, state, _ = env.cycle(make_pod("sp", annotations=spread))
    assert env.plugin.filter(state, pi, env.node()).message() == \
        "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
    # NUMA policy of the node vs the pod's.
    env = Env(nodes=[make_node("n1", labels={numa.LABEL_NUMA_TOPOLOGY_POLICY: "Restricted"})])
    spec = {numa.ANNOTATION_NUMA_TOPOLOGY_SPEC: '{"numaTopologyPolicy":"SingleNUMANode"}'}
    pi, state, _ = env.cycle(make_pod("x", annotations=spec))
    status = env.plugin.filter(state, pi, env.node())
    assert (status.code, status.message()) == (UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) NUMA Topology policy not match")


def test_numa_policy_from_nrt_and_numa_node_resources():
    env = Env(nrts=[nrt("n1", policy="SingleNUMANodePodLevel")])
    annotations = env.schedule(make_pod("a", cpu="8", memory="4Gi"))
    status = json.loads(annotations[numa.ANNOTATION_RESOURCE_STATUS])
    assert status == {"cpuset": "0-3,16-19", "numaNodeResources": [{"node": 0, "resources": {"cpu": "8",
                                                                                               "memory": "4Gi"}}]}
    # An LS pod (no cpuset) is still placed within one NUMA node: it gets NUMA amounts only.
    ls = json.loads(env.schedule(make_pod("ls", cpu="10", qos="LS"))[numa.ANNOTATION_RESOURCE_STATUS])
    assert ls == {"numaNodeResources": [{"node": 1, "resources": {"cpu": "10", "memory": "1Gi"}}]}
    # 9 CPUs fit in neither NUMA node now (8 and 6 left).
    pi, state, _ = env.cycle(make_pod("big", cpu="9"))
    status = env.plugin.filter(state, pi, env.node())
    assert (status.code, status.message()) == (UNSCHEDULABLE, "node(s) Insufficient NUMA Node resources")


def test_allocation_state_from_pods_and_unreserve():
    env = Env()
    bound = make_pod("old", node_name="n1", annotations={numa.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1,16-17"}'})
    env.plugin.on_pod(bound)
    assert cpuset_of(env.schedule(make_pod("a"))) == [8, 9, 24, 25]
    # Unreserve gives the CPUs back; so does deleting a pod.
    pi, state, _ = env.cycle(make_pod("b"))
    env.plugin.reserve(state, pi, "n1")
    assert env.plugin.store.has("uid-b")
    env.plugin.unreserve(state, pi, "n1")
    assert not env.plugin.store.has("uid-b")
    env.plugin.on_pod_delete(bound)
    assert not env.plugin.store.has("uid-old")
    done = dict(make_pod("a", node_name="n1"), status={"phase": "Succeeded"})
    env.plugin.on_pod(done)
    assert not env.plugin.store.has("uid-a")
    # Preemption's RemovePod frees a victim's CPUs for this cycle only.
    env.plugin.on_pod(make_pod("v", cpu="32", node_name="n1", annotations={
        numa.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-31"}'}))
    required = {numa.ANNOTATION_RESOURCE_SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'}
    pi, state, _ = env.cycle(make_pod("p", annotations=required))
    assert env.plugin.filter(state, pi, env.node()).message() == "not enough cpus available to satisfy request"
    victim = PodInfo(make_pod("v", cpu="32", node_name="n1"))
    env.plugin.remove_pod(state, pi, victim, env.node())
    assert env.plugin.filter(state, pi, env.node()) is None
    env.plugin.add_pod(state, pi, PodInfo(make_pod("v", cpu="32", node_name="n1", annotations={
        numa.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-31"}'})), env.node())
    assert env.plugin.filter(state, pi, env.node()) is not None


def test_plain_pods_cost_nothing_and_scores_are_vectorised():
    nodes = [make_node(f"n{i}", cpu=str(8 + i), memory=f"{16 + i}Gi") for i in range(6)]
    env = Env(nodes=nodes, nrts=[])
    plain = make_pod("plain", cpu="100m", memory="500Mi", qos="")
    pi, state, status = env.cycle(plain)
    assert status.code == SKIP
    rows = env.snap.all_rows()
    assert env.plugin.filter_nodes(state, pi, env.snap, rows).all_passed
    batch = env.plugin.score_nodes(state, pi, env.snap, rows)
    assert list(batch) == [env.plugin.score(state, pi, ni) for ni in env.snap.node_infos]
    # n0: cpu (8000-100)*100//8000 = 98, memory (16Gi-500Mi)*100//16Gi = 96 -> 97.
    assert batch[0] == 97
    # One special node (a NUMA policy label): plain pods are checked there only, and scored per node there.
    special = make_node("n2", cpu="10", memory="18Gi", labels={numa.LABEL_NUMA_TOPOLOGY_POLICY: "SingleNUMANode"})
    env.snap.update_node(NodeInfo(special))
    env.plugin.on_node(special)
    pi, state, status = env.cycle(plain)
    assert status is None
    result = env.plugin.filter_nodes(state, pi, env.snap, rows)
    # n2 has no NRT: no NUMA node can hold the pod.
    assert list(result.passed) == [True, True, False, True, True, True]
    assert result.failures[0].reason == "node(s) Insufficient NUMA Node resources"
    mixed = env.plugin.score_nodes(state, pi, env.snap, rows)
    assert list(mixed) == [env.plugin.score(state, pi, ni) for ni in env.snap.node_infos]
    assert (mixed[[0, 1, 3, 4, 5]] == batch[[0, 1, 3, 4, 5]]).all()


def test_most_allocated_scoring_and_events():
    env = Env(nodes=[make_node("n1"), make_node("n2", cpu="64", memory="128Gi")], nrts=[],
              args={"scoringStrategy": {"type": "MostAllocated",
                                        "resources": [{"name": "cpu", "weight": 1}]}})
    pi, state, _ = env.cycle(make_pod("p", cpu="16", qos=""))
    scores = env.plugin.score_nodes(state, pi, env.snap, env.snap.all_rows())
    assert list(scores) == [50, 25]
    assert np.asarray(scores).dtype == np.int64
    assert set(env.plugin.events_to_register()) >= {ClusterEvent("NodeResourceTopology", "Add"),
                                                    ClusterEvent("Node", "Update"), ClusterEvent("Pod", "Delete")}


def test_reserved_cpus_are_never_allocated():
    kubelet = json.dumps({"policy": "static", "reservedCPUs": "0,16"})
    node_obj = make_node("n1", annotations={numa.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs":"1,17"}',
                                            numa.ANNOTATION_SYSTEM_QOS_RESOURCE: '{"cpuset":"2,18"}'})
    env = Env(nodes=[node_obj], nrts=[nrt("n1", annotations={numa.ANNOTATION_KUBELET_CPU_MANAGER_POLICY: kubelet})],
              args={"numaScoringStrategy": {"type": "MostAllocated"}})
    assert cpuset_of(env.schedule(make_pod("a"))) == [3, 4, 19, 20]
    # A malformed reservation annotation is named when a cpuset is needed.
    bad = make_node("n1", annotations={numa.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs":"z"}'})
    env = Env(nodes=[bad])
    pi, state, _ = env.cycle(make_pod("b", annotations={
        numa.ANNOTATION_RESOURCE_SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'}))
    message = env.plugin.filter(state, pi, env.node()).message()
    assert message.startswith("node(s) invalid CPU Topology: annotation node.koordinator.sh/reservation "
                              "reservedCPUs: invalid CPU list 'z'"), message


# -- the real scheduler ------------------------------------------------------------------------------------

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {enabled: [{name: NodeNUMAResource}]}
    filter: {enabled: [{name: NodeNUMAResource}]}
    score: {enabled: [{name: NodeNUMAResource, weight: 1}]}
    reserve: {enabled: [{name: NodeNUMAResource}]}
    preBind: {enabled: [{name: NodeNUMAResource}]}
"""


def _get(api: Client, name: str) -> dict | None:
    try:
        return api.get("Pod", name, NS)
    except NotFound:
        return None


def _status_when_bound(api: Client, name: str) -> dict | None:
    p = _get(api, name)
    if p is None or not (p.get("spec") or {}).get("nodeName"):
        return None
    raw = ((p.get("metadata") or {}).get("annotations") or {}).get(numa.ANNOTATION_RESOURCE_STATUS)
    return json.loads(raw) if raw else None


def _unschedulable(api: Client, name: str) -> str | None:
    p = _get(api, name)
    cond = condition(p) if p else None
    return cond["message"] if cond and cond.get("reason") == "Unschedulable" else None


def test_scheduler_binds_cpusets(fresh_crd_server, scheduler_api, tmp_path):
    api = scheduler_api
    api.create(node("n1", cpu="32", memory="64Gi"))
    api.create(nrt("n1"))
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(CONFIG)
    lsr = {"koordinator.sh/qosClass": "LSR", "koordinator.sh/priority-class": "koord-prod"}
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(path)):
        api.create(pod("a", NS, cpu="4", memory="1Gi", labels=lsr))
        first = wait_until(lambda: _status_when_bound(api, "a"), message="a bound with a cpuset")
        cpus = parse_cpuset(first["cpuset"])
        # Two full physical cores (cpu i and i+16) on one NUMA node.
        assert len(cpus) == 4 and {c % 16 for c in cpus} == {cpus[0], cpus[1]}
        assert len({c % 16 // 8 for c in cpus}) == 1
        api.create(pod("b", NS, cpu="4", memory="1Gi", labels=lsr))
        second = wait_until(lambda: _status_when_bound(api, "b"), message="b bound with a cpuset")
        assert not set(parse_cpuset(second["cpuset"])) & set(cpus)
        bad = {numa.ANNOTATION_RESOURCE_SPEC: '{"preferredCPUBindPolicy": 5}'}
        api.create(pod("c", NS, cpu="4", memory="1Gi", labels=lsr, annotations=bad))
        message = wait_until(lambda: _unschedulable(api, "c"), message="c unschedulable")
        assert "scheduling.koordinator.sh/resource-spec" in message and "preferredCPUBindPolicy" in message, message
        assert "5" in message


# -- reservations ------------------------------------------------------------------------------------------

class FakeReservationInfo:
    """What the plugin reads of the Reservation plugin's ReservationInfo: uid and allocate policy."""

    def __init__(self, uid: str, policy: str = "") -> None:
        self.uid, self.policy = uid, policy


class FakeReservationState:
    """The Reservation plugin's cycle state as far as nominations go (node -> ReservationInfo)."""

    def __init__(self, nominated: dict) -> None:
        self.nominated = nominated


def reservation(name: str, cpuset: str, node_name: str = "n1", phase: str = "Available") -> dict:
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
            "metadata": {"name": name, "uid": f"res-{name}",
                         "annotations": {numa.ANNOTATION_RESOURCE_STATUS: json.dumps({"cpuset": cpuset})}},
            "spec": {"template": {"metadata": {"labels": {"koordinator.sh/qosClass": "LSR"}},
                                  "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "4"}}}]}}},
            "status": {"phase": phase, "nodeName": node_name}}


def owner_cycle(env, pod_obj, infos, nominated=None):
    pi, state = PodInfo(pod_obj), CycleState()
    env.plugin.pre_restore_reservation(state, pi)
    env.plugin.restore_reservation(state, pi, infos, [], env.node())
    if nominated is not None:
        state.write(STATE_KEY, FakeReservationState({"n1": nominated}))
    assert env.plugin.pre_filter(state, pi, env.snap)[1] is None
    return pi, state


def test_reserved_cpus_are_held_and_preferred_by_owner_pods():
    env = Env()
    env.plugin.on_reservation(reservation("r1", "0-1,16-17"))
    assert env.plugin.store.get("res-r1")[0] == "n1"
    # Other pods stay off the reserved CPUs.
    assert cpuset_of(env.schedule(make_pod("other", cpu="2"))) == [8, 24]
    # A matched pod whose reservation is nominated takes the reserved CPUs first.
    info = FakeReservationInfo("res-r1")
    pi, state = owner_cycle(env, make_pod("owner"), [info], nominated=info)
    assert env.plugin.filter(state, pi, env.node()) is None
    assert env.plugin.reserve(state, pi, "n1") is None
    assert sorted(env.plugin.store.get("uid-owner")[1].cpus) == [0, 1, 16, 17]
    # Matched but placed outside the reservation (none nominated): the reservation keeps its CPUs.
    pi, state = owner_cycle(env, make_pod("outside"), [info])
    assert env.plugin.reserve(state, pi, "n1") is None
    assert not set(env.plugin.store.get("uid-outside")[1].cpus) & {0, 1, 16, 17}
    # A terminal or deleted Reservation gives its CPUs back.
    env.plugin.on_reservation(reservation("r1", "0-1,16-17", phase="Succeeded"))
    assert env.plugin.store.get("res-r1") is None
    env.plugin.on_reservation(reservation("r2", "2-3,18-19"))
    env.plugin.on_reservation_delete(reservation("r2", "2-3,18-19"))
    assert env.plugin.store.get("res-r2") is None


def test_restricted_reservation_must_hold_the_whole_cpuset():
    env = Env()
    env.plugin.on_reservation(reservation("r1", "0-1,16-17"))
    restricted = FakeReservationInfo("res-r1", "Restricted")
    pi, state = owner_cycle(env, make_pod("big", cpu="8"), [restricted])
    status = env.plugin.filter_reservation(state, pi, restricted, "n1")
    assert (status.code, status.message()) == (UNSCHEDULABLE, "not enough cpus available to satisfy request")
    pi, state = owner_cycle(env, make_pod("fits", cpu="4"), [restricted], nominated=restricted)
    assert env.plugin.filter_reservation(state, pi, restricted, "n1") is None
    assert env.plugin.reserve(state, pi, "n1") is None
    assert sorted(env.plugin.store.get("uid-fits")[1].cpus) == [0, 1, 16, 17]
    # Aligned/default reservations never reject.
    aligned = FakeReservationInfo("res-r1")
    pi, state = owner_cycle(env, make_pod("big2", cpu="8"), [aligned])
    assert env.plugin.filter_reservation(state, pi, aligned, "n1") is None


def test_amplified_cpu_check():
    ratio = {numa.ANNOTATION_AMPLIFICATION_RATIO: '{"cpu": 2}'}
    ni = NodeInfo(make_node("n1", annotations=ratio))
    bound = make_pod("bound", cpu="28", node_name="n1",
                     annotations={numa.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1,16-17"}'})
    ni.add_pod(PodInfo(bound))
    env = Env(nodes=[make_node("n1", annotations=ratio)])
    env.snap.update_node(ni)
    env.plugin.on_pod(bound)
    # requested 28 cpus, 4 of them a cpuset counted twice: 28 - 4 + 8 = 32 = allocatable, nothing left.
    pi, state, status = env.cycle(make_pod("ls", cpu="1", qos="LS"))
    assert status is None  # the node is special (amplified): Filter runs
    status = env.plugin.filter(state, pi, env.node())
    assert (status.code, status.message()) == (UNSCHEDULABLE, "Insufficient amplified cpu")
    bad = make_node("n1", annotations={numa.ANNOTATION_AMPLIFICATION_RATIO: '{"cpu": "x"}'})
    env = Env(nodes=[bad])
    pi, state, _ = env.cycle(make_pod("ls", cpu="1", qos="LS"))
    status = env.plugin.filter(state, pi, env.node())
    assert (status.code, status.message()) == (UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) invalid CPU amplification ratio")


def test_update_args_keeps_allocations():
    env = Env()
    assert cpuset_of(env.schedule(make_pod("a"))) == [0, 1, 16, 17]
    env.plugin.update_args({"defaultCPUBindPolicy": "SpreadByPCPUs", "numaScoringStrategy": {"type": "MostAllocated"}})
    # Pods scheduled after the reload get the new defaults; the CPUs given before stay taken.
    assert cpuset_of(env.schedule(make_pod("b"))) == [2, 3, 4, 5]
    with pytest.raises(ValueError, match="defaultCPUBindPolicy"):
        env.plugin.update_args({"defaultCPUBindPolicy": "Nope"})
    assert env.plugin.args.default_cpu_bind_policy == SPREAD


def test_batch_paths_agree_with_per_node_for_cpuset_pods():
    annotated = make_node("n3", annotations={numa.ANNOTATION_NODE_RESERVATION: '{"reservedCPUs":"0-1,16-17"}'})
    nodes = [make_node("n1"), make_node("bare"), annotated,
             make_node("n4", labels={numa.LABEL_CPU_BIND_POLICY: "SpreadByPCPUs"})]
    env = Env(nodes=nodes, nrts=[nrt("n1"), nrt("n3"), nrt("n4")])
    env.plugin.on_pod(make_pod("busy", cpu="8", node_name="n1",
                               annotations={numa.ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-31"}'}))
    rows = env.snap.all_rows()
    required = {numa.ANNOTATION_RESOURCE_SPEC: '{"requiredCPUBindPolicy":"FullPCPUs"}'}
    for p in (make_pod("preferred", cpu="20"), make_pod("required", cpu="20", annotations=required)):
        pi, state, status = env.cycle(p)
        assert status is None
        result = env.plugin.filter_nodes(state, pi, env.snap, rows)
        per_node = [env.plugin.filter(state, pi, ni) for ni in env.snap.node_infos]
        assert list(result.passed) == [s is None for s in per_node], (p["metadata"]["name"], per_node)
        for failure in result.failures:
            for i in np.flatnonzero(failure.mask):
                assert per_node[i].message() == failure.reason
        scores = env.plugin.score_nodes(state, pi, env.snap, rows)
        assert list(scores) == [env.plugin.score(state, pi, ni) for ni in env.snap.node_infos]
    # What the required pod saw: n1 full, no topology on "bare", n3 has 14 whole cores left, n4 conflicts.
    assert [s.message() if s else None for s in per_node] == [
        "not enough cpus available to satisfy request", "node(s) invalid CPU Topology", None,
        "node(s) cpu bind policy conflicts with pod's required cpu bind policy"]
