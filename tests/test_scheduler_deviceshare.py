"""DeviceShare: request validation, the scorer, allocation under both strategies, the plugin's extension
points on hand-built state, and the running scheduler placing two half-GPU pods (with the API server's
own check of a negative device request)."""

from __future__ import annotations

import json

import pytest

from koordinator.apis import device as dev
from koordinator.runtime.client import Client
from koordinator.runtime.errors import ApiError
from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import SKIP, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins import deviceshare
from koordinator_roles.scheduler.plugins.deviceshare.allocator import Scorer, allocate, score_node
from koordinator_roles.scheduler.plugins.deviceshare.args import DEFAULT_RESOURCE_WEIGHTS, parse_args
from koordinator_roles.scheduler.plugins.deviceshare.request import (DeviceRequestError, fill_gpu_memory,
                                                                     parse_requests)
from koordinator_roles.scheduler.plugins.deviceshare.state import DeviceCache
from tests.scheduler_harness import NS, InProcessScheduler, node, pod
from tests.waiting import wait_until

GI = 1024 ** 3


def milli(**values: int) -> dict[str, int]:
    """Pod requests as the scheduler holds them (milli-units), keyed by short names."""
    names = {"core": dev.GPU_CORE, "mem": dev.GPU_MEMORY, "ratio": dev.GPU_MEMORY_RATIO, "shared": dev.GPU_SHARED,
             "kgpu": dev.KOORD_GPU, "nvidia": dev.NVIDIA_GPU, "rdma": dev.RDMA, "fpga": dev.FPGA,
             "npu": dev.NPU_CORE, "cpu": "cpu"}
    return {names[k]: v * 1000 for k, v in values.items()}


# -- request validation and normalisation ------------------------------------------------------------

@pytest.mark.parametrize("values,per_device,count,shared", [
    (dict(core=50, ratio=50), {dev.GPU_CORE: 50, dev.GPU_MEMORY_RATIO: 50}, 1, True),
    (dict(core=200, ratio=200), {dev.GPU_CORE: 100, dev.GPU_MEMORY_RATIO: 100}, 2, False),
    (dict(nvidia=2), {dev.GPU_CORE: 100, dev.GPU_MEMORY_RATIO: 100}, 2, False),
    (dict(kgpu=50), {dev.GPU_CORE: 50, dev.GPU_MEMORY_RATIO: 50}, 1, True),
    (dict(mem=8 * GI), {dev.GPU_MEMORY: 8 * GI}, 1, True),
    (dict(ratio=30), {dev.GPU_MEMORY_RATIO: 30}, 1, True),
    (dict(core=30, mem=4 * GI), {dev.GPU_CORE: 30, dev.GPU_MEMORY: 4 * GI}, 1, True),
    (dict(shared=2, core=100, ratio=100), {dev.GPU_CORE: 50, dev.GPU_MEMORY_RATIO: 50}, 2, True),
    (dict(shared=3, core=150, ratio=150), {dev.GPU_CORE: 50, dev.GPU_MEMORY_RATIO: 50}, 3, True),
])
def test_gpu_requests_accepted_and_split(values, per_device, count, shared):
    gpu = parse_requests(milli(cpu=1, **values)).get(dev.TYPE_GPU)
    assert (dict(gpu.per_device), gpu.count, gpu.shared) == (per_device, count, shared)


@pytest.mark.parametrize("values,words", [
    (dict(core=101, ratio=101), [dev.GPU_CORE, "101", "multiple of 100"]),
    (dict(core=50), ["invalid GPU request combination", f"{dev.GPU_CORE}=50"]),
    (dict(core=50, mem=GI, ratio=50), ["invalid GPU request combination", f"{dev.GPU_MEMORY_RATIO}=50"]),
    (dict(nvidia=1, core=50), ["invalid GPU request combination", f"{dev.NVIDIA_GPU}=1"]),
    (dict(shared=2, nvidia=1), ["invalid GPU request combination", dev.GPU_SHARED]),
    (dict(shared=2, core=101, ratio=100), [f"{dev.GPU_CORE}=101", f"{dev.GPU_SHARED}=2"]),
    (dict(shared=1, core=200, ratio=100), [f"{dev.GPU_CORE}=200", "at most 100 x"]),
    (dict(rdma=150), [f"{dev.RDMA}=150", "multiple of 100"]),
    (dict(fpga=250), [f"{dev.FPGA}=250"]),
    (dict(core=-50, ratio=50), [f"{dev.GPU_CORE}=-50", "negative"]),
    (dict(npu=1), [dev.NPU_CORE, "not supported"]),
])
def test_invalid_requests_name_resource_and_value(values, words):
    with pytest.raises(DeviceRequestError) as err:
        parse_requests(milli(**values))
    for word in words:
        assert word in str(err.value)


def test_non_device_and_zero_requests_are_not_device_pods():
    assert parse_requests(milli(cpu=4)) is None
    assert parse_requests({dev.GPU_CORE: 0, "cpu": 1000}) is None


def test_gpu_rdma_and_fpga_together():
    reqs = parse_requests(milli(nvidia=1, rdma=100, fpga=50))
    assert [r.type for r in reqs.by_type] == [dev.TYPE_GPU, dev.TYPE_RDMA, dev.TYPE_FPGA]
    assert (dict(reqs.get(dev.TYPE_RDMA).per_device), reqs.get(dev.TYPE_RDMA).count) == ({dev.RDMA: 100}, 1)
    assert reqs.get(dev.TYPE_FPGA).shared and reqs.get(dev.TYPE_FPGA).per_device == {dev.FPGA: 50}
    assert dict(parse_requests(milli(rdma=300)).get(dev.TYPE_RDMA).per_device) == {dev.RDMA: 100}
    assert parse_requests(milli(rdma=300)).get(dev.TYPE_RDMA).count == 3


def test_memory_and_ratio_completion():
    total = {dev.GPU_CORE: 100, dev.GPU_MEMORY: 16 * GI, dev.GPU_MEMORY_RATIO: 100}
    assert fill_gpu_memory({dev.GPU_MEMORY_RATIO: 50}, total)[dev.GPU_MEMORY] == 8 * GI
    # floor(5Gi / 16Gi x 100) = 31
    assert fill_gpu_memory({dev.GPU_MEMORY: 5 * GI}, total)[dev.GPU_MEMORY_RATIO] == 31
    both = {dev.GPU_MEMORY: GI, dev.GPU_MEMORY_RATIO: 90}
    assert fill_gpu_memory(both, total) == both
    assert fill_gpu_memory({dev.GPU_MEMORY_RATIO: 50}, {dev.GPU_CORE: 100}) is None


# -- args ---------------------------------------------------------------------------------------------

def test_args_defaults_and_validation():
    args = parse_args({})
    assert args.scoring_type == "LeastAllocated" and dict(args.resource_weights) == DEFAULT_RESOURCE_WEIGHTS
    assert dev.GPU_CORE not in args.resource_weights
    most = parse_args({"scoringStrategy": {"type": "MostAllocated"}})
    assert most.most_allocated and dict(most.resource_weights) == DEFAULT_RESOURCE_WEIGHTS
    custom = parse_args({"scoringStrategy": {"resources": [{"name": dev.GPU_CORE, "weight": 3}]}})
    assert dict(custom.resource_weights) == {dev.GPU_CORE: 3}
    models = parse_args({"gpuShareUnsupportedModels": [{"vendor": "nvidia", "model": "T4"}]})
    assert models.gpu_share_unsupported_models == {("nvidia", "T4")}
    with pytest.raises(ValueError, match=r"scoringStrategy.type: Unsupported value: 'Balanced'"):
        parse_args({"scoringStrategy": {"type": "Balanced"}})
    with pytest.raises(ValueError, match=r"scoringStrategy.resources\[0\].weight: Invalid value: 0"):
        parse_args({"scoringStrategy": {"resources": [{"name": dev.GPU_MEMORY, "weight": 0}]}})
    with pytest.raises(ValueError, match=r"gpuShareUnsupportedModels\[0\].model: Required value"):
        parse_args({"gpuShareUnsupportedModels": [{"vendor": "nvidia"}]})
    with pytest.raises(ValueError, match="disableDeviceNUMATopologyAlignment"):
        parse_args({"disableDeviceNUMATopologyAlignment": "yes"})


# -- scorer and allocation ------------------------------------------------------------------------------

GPU_TOTAL = {dev.GPU_CORE: 100, dev.GPU_MEMORY: 16 * GI, dev.GPU_MEMORY_RATIO: 100}


def gpus(n: int) -> dict[int, dict[str, int]]:
    return {minor: dict(GPU_TOTAL) for minor in range(n)}


def test_scorer_formulas():
    weights = {dev.GPU_MEMORY_RATIO: 1, dev.GPU_MEMORY: 1}
    least, most = Scorer(weights), Scorer(weights, most=True)
    free = {dev.GPU_CORE: 50, dev.GPU_MEMORY: 8 * GI, dev.GPU_MEMORY_RATIO: 50}
    request = {dev.GPU_CORE: 25, dev.GPU_MEMORY_RATIO: 25}
    # ratio: requested 50 + 25 = 75 -> least 25, most 75; memory: requested 8Gi (the pod asks none) -> 50 / 50.
    assert least.score(request, GPU_TOTAL, free) == (25 + 50) // 2
    assert most.score(request, GPU_TOTAL, free) == (75 + 50) // 2
    # Over capacity: least 0 for that resource, most capped at 100.
    assert least.score({dev.GPU_MEMORY_RATIO: 80}, GPU_TOTAL, free) == (0 + 50) // 2
    assert most.score({dev.GPU_MEMORY_RATIO: 80}, GPU_TOTAL, free) == (100 + 50) // 2
    # gpu-core is not weighted by default; resources the device lacks do not count.
    assert Scorer({dev.GPU_CORE: 0 + 1}).score({}, {dev.GPU_MEMORY: GI}, {}) == 0


def half():
    return parse_requests(milli(core=50, ratio=50))


def test_least_allocated_spreads_and_most_allocated_packs():
    total = {dev.TYPE_GPU: gpus(2)}
    used0 = {dev.TYPE_GPU: {0: {dev.GPU_CORE: 50, dev.GPU_MEMORY: 8 * GI, dev.GPU_MEMORY_RATIO: 50}, 1: dict(GPU_TOTAL)}}
    least = Scorer(DEFAULT_RESOURCE_WEIGHTS)
    most = Scorer(DEFAULT_RESOURCE_WEIGHTS, most=True)
    # Both GPUs empty: equal scores, the lower minor wins.
    alloc, _ = allocate(half(), total, {dev.TYPE_GPU: gpus(2)}, least)
    assert [m for m, _ in alloc[dev.TYPE_GPU]] == [0]
    # GPU 0 half used: LeastAllocated picks the empty GPU 1, MostAllocated fills GPU 0.
    alloc, _ = allocate(half(), total, used0, least)
    assert [m for m, _ in alloc[dev.TYPE_GPU]] == [1]
    alloc, _ = allocate(half(), total, used0, most)
    assert alloc[dev.TYPE_GPU] == ((0, {dev.GPU_CORE: 50, dev.GPU_MEMORY_RATIO: 50, dev.GPU_MEMORY: 8 * GI}),)


def test_whole_gpus_unhealthy_and_insufficient():
    total = {dev.TYPE_GPU: {0: dict(GPU_TOTAL), 1: {}, 2: dict(GPU_TOTAL)}}  # GPU 1 unhealthy
    free = {dev.TYPE_GPU: {0: dict(GPU_TOTAL), 1: {}, 2: dict(GPU_TOTAL)}}
    two = parse_requests(milli(nvidia=2))
    alloc, _ = allocate(two, total, free, Scorer(DEFAULT_RESOURCE_WEIGHTS))
    assert [m for m, _ in alloc[dev.TYPE_GPU]] == [0, 2]
    three = parse_requests(milli(nvidia=3))
    assert allocate(three, total, free, Scorer(DEFAULT_RESOURCE_WEIGHTS)) == (None, "Insufficient gpu devices")
    # A half-used GPU cannot host a whole-GPU pod.
    free[dev.TYPE_GPU][2] = {dev.GPU_CORE: 50, dev.GPU_MEMORY: 8 * GI, dev.GPU_MEMORY_RATIO: 50}
    assert allocate(two, total, free, Scorer(DEFAULT_RESOURCE_WEIGHTS))[1] == "Insufficient gpu devices"
    # No rdma device at all.
    assert allocate(parse_requests(milli(rdma=100)), total, free, Scorer({}))[1] == "Insufficient rdma devices"


def test_node_score_sums_types():
    total = {dev.TYPE_GPU: gpus(2), dev.TYPE_RDMA: {0: {dev.RDMA: 100}}}
    free = {dev.TYPE_GPU: gpus(2), dev.TYPE_RDMA: {0: {dev.RDMA: 100}}}
    reqs = parse_requests(milli(core=50, ratio=50, rdma=50))
    least = Scorer(DEFAULT_RESOURCE_WEIGHTS)
    # gpu: ratio (200 - 50) * 100 // 200 = 75, memory 100 -> 87; rdma: 50.
    assert score_node(reqs, total, free, least) == 87 + 50


# -- the plugin on hand-built state ---------------------------------------------------------------------

def device_obj(name: str, n: int = 2, *, unhealthy: tuple[int, ...] = (), labels: dict | None = None) -> dict:
    return {"apiVersion": dev.DEVICE_API_VERSION, "kind": "Device",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"devices": [{"type": "gpu", "id": f"GPU-{name}-{m}", "minor": m, "health": m not in unhealthy,
                                  "resources": {dev.GPU_CORE: "100", dev.GPU_MEMORY: "16Gi",
                                                dev.GPU_MEMORY_RATIO: "100"}} for m in range(n)]}}


def gpu_pod(name: str, *, node_name: str = "", labels: dict | None = None, annotations: dict | None = None,
            **values: str) -> dict:
    body = pod(name, NS, cpu="100m", memory="128Mi", labels=labels, annotations=annotations)
    body["metadata"]["uid"] = f"uid-{name}"
    res = body["spec"]["containers"][0]["resources"]
    res["requests"].update(values)
    res["limits"] = dict(values)
    if node_name:
        body["spec"]["nodeName"] = node_name
    return body


HALF = {dev.GPU_CORE: "50", dev.GPU_MEMORY_RATIO: "50"}


def plugin_with(args: dict | None = None, nodes: tuple[str, ...] = ("n1",), **device_kw) -> deviceshare.DeviceShare:
    plugin = deviceshare.new(args, PluginHandle())
    for name in nodes:
        plugin.cache.on_device(device_obj(name, **device_kw))
    return plugin


def node_info(name: str, labels: dict | None = None) -> NodeInfo:
    return NodeInfo(node(name, labels=labels, extra={dev.GPU_CORE: "200", dev.GPU_MEMORY_RATIO: "200"}))


def test_plain_pods_skip_prefilter_and_prescore():
    plugin = plugin_with()
    state, plain = CycleState(), PodInfo(pod("plain", NS))
    _, status = plugin.pre_filter(state, plain, None)
    assert status.code == SKIP
    snap = Snapshot([node_info("n1"), node_info("n2")])
    assert plugin.pre_score(state, plain, snap, snap.all_rows()).code == SKIP
    assert plugin.filter_nodes(state, plain, snap, snap.all_rows()).all_passed
    assert plugin.score_nodes(state, plain, snap, snap.all_rows()).tolist() == [0, 0]
    assert plugin.reserve(state, plain, "n1") is None
    modified = {"metadata": {}}
    assert plugin.pre_bind(state, plain, "n1", modified) is None and modified == {"metadata": {}}


def test_invalid_request_is_unresolvable_naming_resource_and_value():
    plugin = plugin_with()
    bad = PodInfo(gpu_pod("bad", **{dev.GPU_CORE: "101", dev.GPU_MEMORY_RATIO: "101"}))
    _, status = plugin.pre_filter(CycleState(), bad, None)
    assert status.code == UNSCHEDULABLE_AND_UNRESOLVABLE
    assert f"{dev.GPU_CORE}=101" in status.message() and status.plugin == "DeviceShare"


def test_filter_score_reserve_prebind_and_unreserve():
    plugin = plugin_with(nodes=("n1",), unhealthy=(1,))
    snap = Snapshot([node_info("n1"), node_info("n2")])  # n2 has no Device: it passes (Koordinator's rule)
    rows = snap.all_rows()
    first = PodInfo(gpu_pod("first", **HALF))
    state = CycleState()
    assert plugin.pre_filter(state, first, snap) == (None, None)
    assert plugin.filter_nodes(state, first, snap, rows).all_passed
    assert plugin.pre_score(state, first, snap, rows) is None
    scores = plugin.score_nodes(state, first, snap, rows)
    plugin.normalize_score(state, first, snap, rows, scores)
    assert scores.tolist() == [100, 0]
    assert plugin.reserve(state, first, "n1") is None
    modified = {"metadata": {"annotations": {"keep": "me"}}}
    assert plugin.pre_bind(state, first, "n1", modified) is None
    allocated = dev.parse_device_allocated(modified["metadata"]["annotations"][dev.ANNOTATION_DEVICE_ALLOCATED])
    assert modified["metadata"]["annotations"]["keep"] == "me"
    assert allocated == {"gpu": [dev.DeviceAllocation(0, {dev.GPU_CORE: "50", dev.GPU_MEMORY: "8Gi",
                                                          dev.GPU_MEMORY_RATIO: "50"}, "GPU-n1-0")]}
    # The second half fills GPU 0; a third finds no healthy GPU with room (GPU 1 is unhealthy).
    second = PodInfo(gpu_pod("second", **HALF))
    state2 = CycleState()
    plugin.pre_filter(state2, second, snap)
    assert plugin.reserve(state2, second, "n1") is None
    third = PodInfo(gpu_pod("third", **HALF))
    state3 = CycleState()
    plugin.pre_filter(state3, third, snap)
    result = plugin.filter_nodes(state3, third, snap, rows)
    assert result.passed.tolist() == [False, True]
    assert [(f.code, f.reason, f.mask.tolist()) for f in result.failures] == \
        [(UNSCHEDULABLE, "Insufficient gpu devices", [True, False])]
    assert plugin.filter(state3, third, snap.node_infos[0]).reasons == ["Insufficient gpu devices"]
    assert plugin.reserve(state3, third, "n1").code == UNSCHEDULABLE
    # Unreserve gives the second half back.
    plugin.unreserve(state2, second, "n1")
    assert plugin.filter(state3, third, snap.node_infos[0]) is None


def test_pods_from_the_informer_count_and_assumed_pods_survive_until_confirmed():
    cache = DeviceCache()
    cache.on_device(device_obj("n1"))
    annotation = dev.format_device_allocated({"gpu": [dev.DeviceAllocation(1, {dev.GPU_CORE: "100",
                                                                               dev.GPU_MEMORY: "16Gi",
                                                                               dev.GPU_MEMORY_RATIO: "100"})]})
    bound = gpu_pod("bound", node_name="n1", annotations={dev.ANNOTATION_DEVICE_ALLOCATED: annotation})
    cache.on_pod(bound)
    assert cache.node_view("n1")[1]["gpu"][1] == {dev.GPU_CORE: 0, dev.GPU_MEMORY: 0, dev.GPU_MEMORY_RATIO: 0}
    finished = json.loads(json.dumps(bound))
    finished["status"] = {"phase": "Succeeded"}
    cache.on_pod_update(bound, finished)
    assert cache.node_view("n1")[1]["gpu"][1] == GPU_TOTAL
    # Assumed, then seen bound without the annotation yet: kept; forget drops it; confirmed ones stay.
    cache.assume("uid-a", "n1", {"gpu": ((0, {dev.GPU_CORE: 50}),)})
    cache.on_pod(gpu_pod("a", node_name="n1"))
    assert cache.node_view("n1")[1]["gpu"][0][dev.GPU_CORE] == 50
    cache.forget("uid-a")
    assert cache.node_view("n1")[1]["gpu"][0][dev.GPU_CORE] == 100
    cache.on_pod(bound)
    cache.forget("uid-bound")
    assert cache.node_view("n1")[1]["gpu"][1][dev.GPU_CORE] == 0
    cache.on_pod_delete(bound)
    assert cache.node_view("n1")[1]["gpu"][1][dev.GPU_CORE] == 100
    # A bad annotation is ignored (logged), not fatal.
    cache.on_pod(gpu_pod("junk", node_name="n1", annotations={dev.ANNOTATION_DEVICE_ALLOCATED: "{"}))
    assert cache.pod_allocation("uid-junk") is None
    cache.on_device_delete(device_obj("n1"))
    assert cache.node_view("n1") is None


def test_gpu_and_rdma_pod_gets_both_with_ids():
    plugin = plugin_with()
    obj = device_obj("n1")
    obj["spec"]["devices"].append({"type": "rdma", "id": "0000:1f:00.0", "minor": 0, "health": True,
                                   "resources": {dev.RDMA: "100"}})
    plugin.cache.on_device(obj)
    both = PodInfo(gpu_pod("both", **{dev.NVIDIA_GPU: "1", dev.RDMA: "100"}))
    state = CycleState()
    plugin.pre_filter(state, both, None)
    assert plugin.filter(state, both, node_info("n1")) is None
    assert plugin.reserve(state, both, "n1") is None
    modified: dict = {}
    plugin.pre_bind(state, both, "n1", modified)
    got = dev.parse_device_allocated(modified["metadata"]["annotations"][dev.ANNOTATION_DEVICE_ALLOCATED])
    assert got["rdma"] == [dev.DeviceAllocation(0, {dev.RDMA: "100"}, "0000:1f:00.0")]
    assert got["gpu"] == [dev.DeviceAllocation(0, {dev.GPU_CORE: "100", dev.GPU_MEMORY: "16Gi",
                                                   dev.GPU_MEMORY_RATIO: "100"}, "GPU-n1-0")]
    # The only RDMA device is taken now.
    other = PodInfo(gpu_pod("other", **{dev.RDMA: "50"}))
    state = CycleState()
    plugin.pre_filter(state, other, None)
    assert plugin.filter(state, other, node_info("n1")).reasons == ["Insufficient rdma devices"]


def test_preemption_dry_run_frees_and_restores_victim_devices():
    plugin = plugin_with(n=1)
    annotation = dev.format_device_allocated({"gpu": [dev.DeviceAllocation(0, {dev.GPU_CORE: "100",
                                                                               dev.GPU_MEMORY: "16Gi",
                                                                               dev.GPU_MEMORY_RATIO: "100"})]})
    victim = gpu_pod("victim", node_name="n1", annotations={dev.ANNOTATION_DEVICE_ALLOCATED: annotation})
    plugin.cache.on_pod(victim)
    preemptor = PodInfo(gpu_pod("preemptor", **HALF))
    state = CycleState()
    plugin.pre_filter(state, preemptor, None)
    n1 = node_info("n1")
    assert plugin.filter(state, preemptor, n1).reasons == ["Insufficient gpu devices"]
    extensions = plugin.pre_filter_extensions()
    trial = state.clone()
    assert extensions.remove_pod(trial, preemptor, PodInfo(victim), n1) is None
    assert plugin.filter(trial, preemptor, n1) is None
    assert plugin.filter(state, preemptor, n1) is not None  # the original cycle state is untouched
    extensions.add_pod(trial, preemptor, PodInfo(victim), n1)
    assert plugin.filter(trial, preemptor, n1).reasons == ["Insufficient gpu devices"]


def test_sharing_checks_isolation_provider_and_unsupported_models():
    plugin = plugin_with({"gpuShareUnsupportedModels": [{"vendor": "nvidia", "model": "T4"}]},
                         labels={dev.LABEL_GPU_VENDOR: "nvidia", dev.LABEL_GPU_MODEL: "T4"})
    half_pod = PodInfo(gpu_pod("half", **HALF))
    state = CycleState()
    plugin.pre_filter(state, half_pod, None)
    status = plugin.filter(state, half_pod, node_info("n1"))
    assert (status.code, status.message()) == (UNSCHEDULABLE_AND_UNRESOLVABLE,
                                               'model "T4" of vendor "nvidia" does not support GPU Share')
    whole = PodInfo(gpu_pod("whole", **{dev.NVIDIA_GPU: "1"}))
    state = CycleState()
    plugin.pre_filter(state, whole, None)
    assert plugin.filter(state, whole, node_info("n1")) is None  # whole GPUs are not sharing
    hami = PodInfo(gpu_pod("hami", labels={dev.LABEL_GPU_ISOLATION_PROVIDER: "HAMi-core"}, **HALF))
    plain_plugin = plugin_with()
    state = CycleState()
    plain_plugin.pre_filter(state, hami, None)
    assert plain_plugin.filter(state, hami, node_info("n1")).message() == \
        "GPUIsolationProviderHAMICore not found on the node"
    assert plain_plugin.filter(state, hami, node_info("n1", {dev.LABEL_GPU_ISOLATION_PROVIDER: "HAMi-core"})) is None


def test_events_and_args_reload():
    plugin = plugin_with()
    assert {(e.kind, e.action) for e in plugin.events_to_register()} == \
        {("Device", "Add"), ("Device", "Update"), ("Pod", "Delete")}
    plugin.update_args({"scoringStrategy": {"type": "MostAllocated"}})
    assert plugin.scorer.most
    with pytest.raises(ValueError):
        plugin.update_args({"scoringStrategy": {"type": "Nope"}})
    assert plugin.scorer.most


# -- the running scheduler ----------------------------------------------------------------------------

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {{enabled: [{{name: DeviceShare}}]}}
    filter: {{enabled: [{{name: DeviceShare}}]}}
    preScore: {{enabled: [{{name: DeviceShare}}]}}
    score: {{enabled: [{{name: DeviceShare, weight: 1}}]}}
    reserve: {{enabled: [{{name: DeviceShare}}]}}
    preBind: {{enabled: [{{name: DeviceShare}}]}}
  pluginConfig:
  - name: DeviceShare
    args: {args}
"""


def gpu_node(name: str) -> dict:
    """A node with two 16Gi GPUs, with the device allocatable the manager derives from its Device."""
    return node(name, cpu="8", memory="32Gi", extra={dev.GPU_CORE: "200", dev.GPU_MEMORY_RATIO: "200",
                                                     dev.GPU_MEMORY: "32Gi", dev.KOORD_GPU: "200"})


def allocated(api: Client, name: str) -> dict | None:
    p = api.get("Pod", name, NS)
    raw = ((p.get("metadata") or {}).get("annotations") or {}).get(dev.ANNOTATION_DEVICE_ALLOCATED)
    if not raw or not (p.get("spec") or {}).get("nodeName"):
        return None
    return dev.parse_device_allocated(raw)


@pytest.mark.parametrize("strategy,minors", [("MostAllocated", [0, 0]), ("LeastAllocated", [0, 1])])
def test_two_half_gpu_pods_land_with_device_ids(scheduler_api, fresh_crd_server, tmp_path, strategy, minors):
    api = scheduler_api
    api.create(gpu_node("gpu-node"))
    api.create(device_obj("gpu-node"))
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(CONFIG.format(args=json.dumps({"scoringStrategy": {"type": strategy}})))
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(path)):
        got = []
        for name in ("half-a", "half-b"):
            # One after the other: the second pod sees the first one's GPU in use.
            api.create(gpu_pod(name, **HALF))
            result = wait_until(lambda name=name: allocated(api, name), message=f"{name} bound with devices")
            (entry,) = result["gpu"]
            assert entry.id == f"GPU-gpu-node-{entry.minor}"
            assert dict(entry.resources) == {dev.GPU_CORE: "50", dev.GPU_MEMORY: "8Gi", dev.GPU_MEMORY_RATIO: "50"}
            got.append(entry.minor)
        assert got == minors
        # Pods without device requests are untouched by DeviceShare.
        api.create(pod("plain", NS))
        wait_until(lambda: (api.get("Pod", "plain", NS).get("spec") or {}).get("nodeName"), message="plain bound")
        assert dev.ANNOTATION_DEVICE_ALLOCATED not in (api.get("Pod", "plain", NS)["metadata"].get("annotations") or {})
        # A pod asking for 101% is rejected before any node is looked at, naming the resource and value.
        api.create(gpu_pod("too-much", **{dev.GPU_CORE: "101", dev.GPU_MEMORY_RATIO: "101"}))

        def rejected() -> str | None:
            cond = next((c for c in (api.get("Pod", "too-much", NS).get("status") or {}).get("conditions") or []
                         if c.get("type") == "PodScheduled"), None)
            return cond["message"] if cond and cond.get("reason") == "Unschedulable" else None

        message = wait_until(rejected, message="too-much rejected")
        assert f"{dev.GPU_CORE}=101" in message


def test_api_server_rejects_negative_device_request(scheduler_api):
    body = gpu_pod("negative", **{dev.GPU_CORE: "-50", dev.GPU_MEMORY_RATIO: "50"})
    with pytest.raises(ApiError) as err:
        scheduler_api.create(body)
    assert err.value.status == 422
    assert f"spec.containers[0].resources.requests[{dev.GPU_CORE}]: Invalid value: \"-50\": " \
           "must be greater than or equal to 0" in str(err.value)


# -- reservations that reserve devices -----------------------------------------------------------------------

WHOLE = {dev.GPU_CORE: "100", dev.GPU_MEMORY_RATIO: "100"}


def _whole_gpu(minor: int) -> str:
    return dev.format_device_allocated({"gpu": [dev.DeviceAllocation(minor, {dev.GPU_CORE: "100",
                                                                           dev.GPU_MEMORY: "16Gi",
                                                                           dev.GPU_MEMORY_RATIO: "100"})]})


def gpu_reservation(name: str, *, node_name: str = "", minor: int | None = None, policy: str = "",
                    owner: str = "owner") -> dict:
    """A Reservation of one whole GPU; with ``node_name`` Available there, holding GPU ``minor``."""
    from koordinator.apis import reservation as rv

    requests = {"cpu": "100m", **WHOLE}
    body: dict = {"apiVersion": rv.GROUP_VERSION, "kind": rv.KIND,
                  "metadata": {"name": name, "annotations": {}},
                  "spec": {"template": {"metadata": {"namespace": NS}, "spec": {
                      "schedulerName": "koord-scheduler",
                      "containers": [{"name": "c", "image": "busybox",
                                      "resources": {"requests": requests, "limits": dict(WHOLE)}}]}},
                      "owners": [{"object": {"name": owner, "namespace": NS}}], "ttl": "1h"}}
    if policy:
        body["spec"]["allocatePolicy"] = policy
    if node_name:
        body["metadata"]["uid"] = f"uid-{name}"
        body["metadata"]["annotations"][dev.ANNOTATION_DEVICE_ALLOCATED] = _whole_gpu(minor)
        body["status"] = {"phase": "Available", "nodeName": node_name, "allocatable": requests}
    return body


def test_cache_counts_reservation_devices_once_with_their_owners():
    from koordinator.apis import reservation as rv

    cache = DeviceCache()
    cache.on_device(device_obj("n1"))
    r = gpu_reservation("r", node_name="n1", minor=1)
    cache.on_reservation(r)
    assert cache.node_view("n1")[1]["gpu"][1] == {dev.GPU_CORE: 0, dev.GPU_MEMORY: 0, dev.GPU_MEMORY_RATIO: 0}
    assert cache.reservation_remaining("uid-r", "n1") == {"gpu": {1: GPU_TOTAL}}
    assert cache.reservation_remaining("uid-r", "n2") is None
    # An owner using half of the reserved GPU: the GPU is not counted twice, the reservation keeps the rest.
    half = dev.format_device_allocated({"gpu": [dev.DeviceAllocation(1, {dev.GPU_CORE: "50", dev.GPU_MEMORY: "8Gi",
                                                                       dev.GPU_MEMORY_RATIO: "50"})]})
    owner = gpu_pod("owner", node_name="n1", annotations={dev.ANNOTATION_DEVICE_ALLOCATED: half,
                                                           rv.ANNOTATION_RESERVATION_ALLOCATED:
                                                               rv.allocated_annotation("r", "uid-r")})
    cache.on_pod(owner)
    assert cache.node_view("n1")[1]["gpu"][1] == {dev.GPU_CORE: 0, dev.GPU_MEMORY: 0, dev.GPU_MEMORY_RATIO: 0}
    assert cache.reservation_remaining("uid-r", "n1") == {"gpu": {1: {dev.GPU_CORE: 50, dev.GPU_MEMORY: 8 * GI,
                                                                      dev.GPU_MEMORY_RATIO: 50}}}
    # The reservation finishes (allocateOnce consumed it): only the owner's half stays used.
    cache.on_reservation_update(r, {**r, "status": {**r["status"], "phase": "Succeeded"}})
    assert cache.node_view("n1")[1]["gpu"][1] == {dev.GPU_CORE: 50, dev.GPU_MEMORY: 8 * GI, dev.GPU_MEMORY_RATIO: 50}
    cache.on_pod_delete(owner)
    assert cache.node_view("n1")[1]["gpu"][1] == GPU_TOTAL
    # A bad annotation on a Reservation is ignored (logged), not fatal.
    bad = gpu_reservation("bad", node_name="n1", minor=0)
    bad["metadata"]["annotations"][dev.ANNOTATION_DEVICE_ALLOCATED] = "{oops"
    cache.on_reservation(bad)
    assert cache.node_view("n1")[1]["gpu"][0] == GPU_TOTAL


class _GpuCluster:
    """Node n1 (Device with 2 GPUs) holding Reservation r on GPU ``minor``; a Framework of NodeResourcesFit,
    Reservation and DeviceShare."""

    def __init__(self, minor: int, policy: str = "") -> None:
        from koordinator.apis import reservation as rv
        from koordinator_roles.scheduler.framework.runtime import Framework
        from koordinator_roles.scheduler.plugins import in_tree_registry
        from tests.test_scheduler_reservation import _profile

        self.r = gpu_reservation("r", node_name="n1", minor=minor, policy=policy)
        ni = node_info("n1")
        ni.add_pod(PodInfo(rv.reserve_pod(self.r, rv.allocatable(self.r))))
        self.snapshot = Snapshot([ni])
        names = ["NodeResourcesFit", "Reservation", "DeviceShare"]
        self.fwk = Framework(_profile(names, {"Reservation": 5000}), in_tree_registry(),
                             PluginHandle(snapshot_source=lambda: self.snapshot))
        self.reservation = self.fwk.plugins["Reservation"]
        self.devices = self.fwk.plugins["DeviceShare"]
        self.reservation.cache.add_reservation(self.r)
        self.devices.cache.on_device(device_obj("n1"))
        self.devices.cache.on_reservation(self.r)

    def schedule(self, p: dict):
        """PreFilter, Filter, nominate, Reserve, PreBind on n1: (devices annotation or None, filter message)."""
        from koordinator_roles.scheduler.framework.diagnosis import Diagnosis

        state, pi, diagnosis = CycleState(), PodInfo(p), Diagnosis(self.snapshot)
        pi, result, status = self.fwk.run_pre_filter(state, pi, self.snapshot)
        assert status is None or status.code == SKIP, status
        rows = self.fwk.find_nodes_that_fit(state, pi, self.snapshot, result, diagnosis)
        if len(rows) == 0:
            return None, diagnosis.fit_error_message(len(self.snapshot))
        assert self.fwk.run_reservation_nominate(state, pi, "n1") is None
        assert self.fwk.run_reserve(state, pi, "n1") is None
        modified = {"metadata": {"annotations": {}, "labels": {}}}
        assert self.devices.pre_bind(state, pi, "n1", modified) is None
        assert self.reservation.pre_bind(state, pi, "n1", modified) is None
        return modified["metadata"]["annotations"], ""


def test_reserved_gpu_is_held_for_others_and_given_to_its_owner():
    from koordinator.apis import reservation as rv

    cluster = _GpuCluster(minor=0)
    # A non-owner gets the other GPU; a second one finds none (GPU 0 is the reservation's).
    annotations, _ = cluster.schedule(gpu_pod("stranger", **WHOLE))
    assert [a.minor for a in dev.parse_device_allocated(annotations[dev.ANNOTATION_DEVICE_ALLOCATED])["gpu"]] == [1]
    _, message = cluster.schedule(gpu_pod("stranger-2", **WHOLE))
    assert "Insufficient" in message, message
    # The owner gets exactly the reserved GPU, inside the reservation.
    annotations, _ = cluster.schedule(gpu_pod("owner", **WHOLE))
    (entry,) = dev.parse_device_allocated(annotations[dev.ANNOTATION_DEVICE_ALLOCATED])["gpu"]
    assert entry.minor == 0 and entry.id == "GPU-n1-0"
    assert json.loads(annotations[rv.ANNOTATION_RESERVATION_ALLOCATED])["name"] == "r"
    assert cluster.devices.cache.reservation_remaining("uid-r", "n1") == {"gpu": {0: {
        dev.GPU_CORE: 0, dev.GPU_MEMORY: 0, dev.GPU_MEMORY_RATIO: 0}}}


def test_restricted_reservation_gives_only_its_own_devices():
    cluster = _GpuCluster(minor=1, policy="Restricted")
    state, pi = CycleState(), PodInfo(gpu_pod("owner", **{dev.GPU_CORE: "200", dev.GPU_MEMORY_RATIO: "200"}))
    pi, _, status = cluster.fwk.run_pre_filter(state, pi, cluster.snapshot)
    info = cluster.reservation.cache.get("uid-r")
    # Two GPUs asked, the Restricted reservation holds one: it cannot give them.
    status = cluster.devices.filter_reservation(state, pi, info, "n1")
    assert status.code == UNSCHEDULABLE and status.reasons == ["Insufficient gpu devices"]
    # One GPU: only the reserved one qualifies.
    state, pi = CycleState(), PodInfo(gpu_pod("owner", **WHOLE))
    pi, _, _ = cluster.fwk.run_pre_filter(state, pi, cluster.snapshot)
    assert cluster.devices.filter_reservation(state, pi, info, "n1") is None
    # Scored on the reservation's one GPU alone (not the node's two).
    one = {"gpu": {1: dict(GPU_TOTAL)}}
    expected = score_node(parse_requests(pi.requests), one, one, cluster.devices.scorer)
    assert cluster.devices.score_reservation(state, pi, info, "n1") == expected == 50


def test_reserve_pod_devices_are_written_on_its_reservation():
    from koordinator.apis import reservation as rv

    plugin = plugin_with()
    pending = gpu_reservation("pending")
    pending["metadata"]["uid"] = "uid-pending"
    reserve_pod = PodInfo(rv.reserve_pod(pending))
    state = CycleState()
    assert plugin.pre_filter(state, reserve_pod, None) == (None, None)
    assert plugin.reserve(state, reserve_pod, "n1") is None
    # The pod copy is left alone; the Reservation gets device-allocated (PreBindReservation).
    modified = {"metadata": {"annotations": {}}}
    assert plugin.pre_bind(state, reserve_pod, "n1", modified) is None and modified["metadata"]["annotations"] == {}
    reservation = {"metadata": {"name": "pending", "annotations": {}}}
    assert plugin.pre_bind_reservation(state, reservation, "n1") is None
    raw = reservation["metadata"]["annotations"][dev.ANNOTATION_DEVICE_ALLOCATED]
    (entry,) = dev.parse_device_allocated(raw)["gpu"]
    assert entry.minor == 0 and entry.id == "GPU-n1-0"
    # Assumed as the reservation's holding; its informer update before the bind keeps it.
    assert plugin.cache.reservation_remaining("uid-pending", "n1") == {"gpu": {0: GPU_TOTAL}}
    plugin.cache.on_reservation({**pending, "metadata": {**pending["metadata"], **reservation["metadata"]}})
    assert plugin.cache.reservation_remaining("uid-pending", "n1") == {"gpu": {0: GPU_TOTAL}}


RESERVATION_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: false}
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {enabled: [{name: Reservation}, {name: DeviceShare}]}
    filter: {enabled: [{name: DeviceShare}, {name: Reservation}]}
    preScore: {enabled: [{name: Reservation}, {name: DeviceShare}]}
    score: {enabled: [{name: DeviceShare, weight: 1}, {name: Reservation, weight: 5000}]}
    reserve: {enabled: [{name: DeviceShare}, {name: Reservation}]}
    preBind: {enabled: [{name: DeviceShare}, {name: Reservation}]}
    bind: {disabled: [{name: "*"}], enabled: [{name: Reservation}, {name: DefaultBinder}]}
"""


def test_gpu_reservation_holds_its_device_and_its_owner_gets_it(scheduler_api, fresh_crd_server, tmp_path):
    from koordinator.apis import reservation as rv

    api = scheduler_api
    api.create(gpu_node("gpu-node"))
    api.create(device_obj("gpu-node"))
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(RESERVATION_CONFIG)
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(path)):
        api.create(gpu_reservation("gpu-r"))

        def reserved_minor() -> list[int] | None:
            r = api.get(rv.KIND, "gpu-r")
            raw = ((r.get("metadata") or {}).get("annotations") or {}).get(dev.ANNOTATION_DEVICE_ALLOCATED)
            if not raw or (r.get("status") or {}).get("phase") != "Available":
                return None
            return [a.minor for a in dev.parse_device_allocated(raw)["gpu"]]

        (minor,) = wait_until(reserved_minor, message="gpu-r Available with its device")
        # Everyone else gets the other GPU, and then none.
        api.create(gpu_pod("stranger", **WHOLE))
        got = wait_until(lambda: allocated(api, "stranger"), message="stranger bound with devices")
        assert [a.minor for a in got["gpu"]] == [1 - minor]
        api.create(gpu_pod("stranger-2", **WHOLE))

        def unschedulable() -> str | None:
            cond = next((c for c in (api.get("Pod", "stranger-2", NS).get("status") or {}).get("conditions") or []
                         if c.get("type") == "PodScheduled"), None)
            return cond["message"] if cond and cond.get("reason") == "Unschedulable" else None

        assert "Insufficient" in wait_until(unschedulable, message="stranger-2 unschedulable")
        # The owner gets exactly the reserved GPU, and is assigned to the reservation.
        api.create(gpu_pod("owner", **WHOLE))
        got = wait_until(lambda: allocated(api, "owner"), message="owner bound with devices")
        (entry,) = got["gpu"]
        assert entry.minor == minor and entry.id == f"GPU-gpu-node-{minor}"
        annotations = api.get("Pod", "owner", NS)["metadata"]["annotations"]
        assert json.loads(annotations[rv.ANNOTATION_RESERVATION_ALLOCATED])["name"] == "gpu-r"


def test_dry_run_victim_inside_a_reservation_gives_its_device_back_to_the_reservation():
    from koordinator.apis import reservation as rv

    cluster = _GpuCluster(minor=0)
    cache, plugin = cluster.devices.cache, cluster.devices
    cache.on_pod(gpu_pod("busy", node_name="n1", annotations={dev.ANNOTATION_DEVICE_ALLOCATED: _whole_gpu(1)}))
    low = gpu_pod("low", node_name="n1", annotations={
        dev.ANNOTATION_DEVICE_ALLOCATED: _whole_gpu(0),
        rv.ANNOTATION_RESERVATION_ALLOCATED: rv.allocated_annotation("r", "uid-r")})
    cache.on_pod(low)
    info, node = cluster.reservation.cache.get("uid-r"), cluster.snapshot.get("n1")

    def trial(matches: bool):
        state, pi = CycleState(), PodInfo(gpu_pod("high", **WHOLE))
        assert plugin.pre_filter(state, pi, None) == (None, None)
        if matches:
            plugin.restore_reservation(state, pi, [info], [], node)
        assert plugin.filter(state, pi, node).reasons == ["Insufficient gpu devices"]
        assert plugin.remove_pod(state, pi, PodInfo(low), node) is None
        return state, pi

    # An owner of r: the victim's GPU returns to r, which can give it.
    state, pi = trial(matches=True)
    assert plugin.filter(state, pi, node) is None
    assert plugin.filter_reservation(state, pi, info, "n1") is None
    assert plugin.add_pod(state, pi, PodInfo(low), node) is None
    assert plugin.filter(state, pi, node).reasons == ["Insufficient gpu devices"]
    # A pod that does not match r: the GPU goes back to r, not to the node's free devices.
    state, pi = trial(matches=False)
    assert plugin.filter(state, pi, node).reasons == ["Insufficient gpu devices"]
