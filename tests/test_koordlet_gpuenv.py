"""GPUEnvInject (reference A.8.2 "GPU env"): ``NVIDIA_VISIBLE_DEVICES`` from the pod's device-allocated
annotation, as a pure hook and through the koordlet's real gRPC hook server over its unix socket."""

from __future__ import annotations

import json
import tempfile

import grpc
import pytest

from koordinator.apis.device import (ANNOTATION_DEVICE_ALLOCATED, GPU_CORE, DeviceAllocation,
                                     format_device_allocated)
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2_grpc as hookgrpc
from koordinator_roles.koordlet import features, runtimehooks
from koordinator_roles.koordlet.runtimehooks import GPUEnvInject, HookError
from koordinator_roles.koordlet.runtimehooks.hookserver import HookServer
from tests.test_koordlet_runtimehooks import ALL_ON, Node, creqs, facts, make_pod

TWO_GPUS = format_device_allocated({"gpu": [DeviceAllocation(1, {GPU_CORE: "100"}, "GPU-b"),
                                            DeviceAllocation(0, {GPU_CORE: "100"}, "GPU-a")]})


def env_of(pod):
    [c] = creqs(pod)
    answer = GPUEnvInject().container_hook(c, facts())
    return None if answer is None else dict(answer.envs)


# -- the hook -------------------------------------------------------------------------------------------

def test_visible_devices_are_the_allocated_minors_in_order():
    pod = make_pod("g", "LS", "Burstable", annotations={ANNOTATION_DEVICE_ALLOCATED: TWO_GPUS})
    assert env_of(pod) == {"NVIDIA_VISIBLE_DEVICES": "1,0"}


@pytest.mark.parametrize("annotations", [
    {},                                                                   # no devices at all
    {ANNOTATION_DEVICE_ALLOCATED: ""},
    {ANNOTATION_DEVICE_ALLOCATED: json.dumps({"rdma": [{"minor": 3, "resources": {}}]})},   # no GPU
    {ANNOTATION_DEVICE_ALLOCATED: json.dumps({"gpu": []})},
])
def test_pods_without_gpus_are_left_alone(annotations):
    assert env_of(make_pod("n", "LS", "Burstable", annotations=annotations)) is None


@pytest.mark.parametrize("raw, detail", [
    ("{not json", "invalid JSON '{not json'"),
    ('{"gpu": {"minor": 0}}', "'gpu' must be a list"),
    ('{"gpu": [{"minor": -1}]}', "gpu[0].minor must be a non-negative integer"),
    ('{"gpu": [{"resources": {}}]}', "gpu[0].minor must be a non-negative integer"),
])
def test_malformed_annotation_is_a_hook_error_naming_it(raw, detail):
    pod = make_pod("bad", "LS", "Burstable", annotations={ANNOTATION_DEVICE_ALLOCATED: raw})
    with pytest.raises(HookError) as err:
        env_of(pod)
    message = str(err.value)
    assert message.startswith("pod default/bad: annotation scheduling.koordinator.sh/device-allocated")
    assert detail in message
    assert err.value.reason == "InvalidDeviceAllocated"


def test_gate_off_by_default_and_accepted():
    assert features.GATES["GPUEnvInject"] is False
    assert "GPUEnvInject" not in [p.name for p in runtimehooks.enabled_plugins(features.resolve({}))]
    gates = features.resolve({"GPUEnvInject": True})
    assert "GPUEnvInject" in [p.name for p in runtimehooks.enabled_plugins(gates)]
    assert GPUEnvInject.stages == ("PreCreateContainer",)


def test_the_reconciler_leaves_it_out(tmp_path):
    # Only a new container takes an environment: a malformed annotation must not stop the pod's cpuset
    # from being reconciled (it would if the plugin's HookError reached the reconciler).
    pod = make_pod("lsr", "LSR", "Guaranteed", cpuset="2-3",
                   annotations={ANNOTATION_DEVICE_ALLOCATED: "{not json"},
                   containers={"c": {"limits": {"cpu": "2"}, "requests": {"cpu": "2"}}})
    n = Node(tmp_path, 2, "systemd", [pod], gates={**ALL_ON, "GPUEnvInject": True})
    result = n.reconciler.reconcile_once()
    assert result.skipped == {}
    assert n.executor.read("cpuset.cpus", n.ctr_dir(pod)) == "2-3"


# -- through the hook server ------------------------------------------------------------------------------

@pytest.fixture
def socket_dir():
    with tempfile.TemporaryDirectory(prefix="gpuenv-", dir="/tmp") as d:   # a socket path has 107 bytes at most
        yield d


def serve(tmp_path, socket_dir, pods, **kwargs):
    n = Node(tmp_path, 2, "systemd", pods, gates={**ALL_ON, "GPUEnvInject": True})
    server = HookServer(n.reconciler, addr=f"{socket_dir}/koordlet.sock", config_dir=str(tmp_path / "hookserver.d"),
                        host_endpoint="", **kwargs)
    server.start()
    return n, server


def container_request(pod):
    md = pod["metadata"]
    return hookapi.ContainerResourceHookRequest(
        pod_meta=hookapi.PodSandboxMetadata(name=md["name"], namespace=md["namespace"], uid=md["uid"]),
        container_mata=hookapi.ContainerMetadata(name="c"), pod_annotations=md["annotations"],
        pod_labels=md["labels"], pod_cgroup_parent=f"kubepods-burstable-pod{md['uid']}.slice",
        container_resources=hookapi.LinuxContainerResources(cpu_shares=1024, cpu_quota=-1),
        container_envs={"FROM_SPEC": "1"})


def test_hook_server_answers_the_environment(tmp_path, socket_dir):
    pod = make_pod("g", "", "Burstable", annotations={ANNOTATION_DEVICE_ALLOCATED: TWO_GPUS})
    _, server = serve(tmp_path, socket_dir, [pod])
    try:
        registration = json.loads((tmp_path / "hookserver.d" / "koordlet.json").read_text())
        assert "PreCreateContainer" in registration["runtime-hooks"]
        with grpc.insecure_channel(f"unix://{socket_dir}/koordlet.sock") as channel:
            answer = hookgrpc.RuntimeHookServiceStub(channel).PreCreateContainerHook(container_request(pod), timeout=10)
        assert dict(answer.container_envs) == {"FROM_SPEC": "1", "NVIDIA_VISIBLE_DEVICES": "1,0"}
    finally:
        server.stop(5)


def test_hook_server_skips_a_malformed_annotation_or_fails_with_policy_fail(tmp_path, socket_dir):
    pod = make_pod("bad", "", "Burstable", annotations={ANNOTATION_DEVICE_ALLOCATED: "[1]"})
    _, server = serve(tmp_path, socket_dir, [pod])
    try:
        with grpc.insecure_channel(f"unix://{socket_dir}/koordlet.sock") as channel:
            answer = hookgrpc.RuntimeHookServiceStub(channel).PreCreateContainerHook(container_request(pod), timeout=10)
        assert "NVIDIA_VISIBLE_DEVICES" not in answer.container_envs     # the plugin skipped, the call goes on
    finally:
        server.stop(5)
    _, server = serve(tmp_path, socket_dir, [pod], plugin_failure_policy="Fail")
    try:
        with grpc.insecure_channel(f"unix://{socket_dir}/koordlet.sock") as channel:
            with pytest.raises(grpc.RpcError) as err:
                hookgrpc.RuntimeHookServiceStub(channel).PreCreateContainerHook(container_request(pod), timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert err.value.details() == ("runtime hook GPUEnvInject: pod default/bad: annotation "
                                       "scheduling.koordinator.sh/device-allocated: must be an object of device "
                                       "type -> list, got '[1]'")
    finally:
        server.stop(5)
