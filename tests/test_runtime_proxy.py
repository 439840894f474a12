"""koord-runtime-proxy between a CRI client (acting as the kubelet) and a real containerd, with the koordlet's
real hook server: what the hooks chose is read back from containerd (its stored OCI spec) and from the cgroup
files on disk, never from our own logs.

One containerd and one koordlet (over this machine's /proc, /sys and cgroups, its pods from an embedded API
server) per module; each test starts its own proxy, with a hook-server directory of its own into which it
copies the koordlet's registration (or writes others).
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, Iterator

import grpc
import pytest

import koordinator_roles.runtime_proxy as runtime_proxy
from koordinator.cli import parse_role_options
from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
from koordinator.grpcapi.runtime.v1 import api_pb2_grpc as crigrpc
from koordinator.runtime.client import Client
from koordinator.runtime.runtime import Runtime
from tests.containerd_harness import Containerd, container_config, containerd, runtime_spec  # noqa: F401
from tests.koordlet_harness import InProcessKoordlet
from tests.waiting import wait_until

MiB = 1 << 20
CGROUP = Path("/sys/fs/cgroup")
NODE = "cri-node"
QOS = "koordinator.sh/qosClass"
EXT_SPEC = "node.koordinator.sh/extended-resource-spec"
RESOURCE_STATUS = "scheduling.koordinator.sh/resource-status"
SKIP = "runtimeproxy.koordinator.sh/skip-hookserver"
#: A BE container asking for 500m batch-cpu (limit 1000m) and 128Mi batch-memory (limit 256Mi).
BATCH = {"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "128Mi"},
         "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "256Mi"}}
#: What the kubelet asks for a container of a BestEffort pod: minimum shares, no quota, no memory limit.
KUBELET_BE = cri.LinuxContainerResources(cpu_shares=2, oom_score_adj=1000)

pytestmark = pytest.mark.skipif(not (CGROUP / "cpu" / "cpu.shares").exists(), reason="needs cgroup v1 (cpu)")


@pytest.fixture(scope="module")
def koordlet(crd_server: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The koordlet of NODE serving hooks; yields its registration file (``koordlet.json``)."""
    api = Client.from_kubeconfig(str(crd_server.kubeconfig), qps=0)
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
                "status": {"capacity": {"cpu": "2", "memory": "8Gi", "pods": "110"}}})
    run = tmp_path_factory.mktemp("koordlet")
    sock_dir = tempfile.mkdtemp(prefix="kh-", dir="/tmp")
    k = InProcessKoordlet(crd_server.kubeconfig, NODE, None, run, "--cgroup-driver=cgroupfs",
                          "--runtime-hooks-addr", f"{sock_dir}/koordlet.sock",
                          "--runtime-hooks-config-path", str(run / "hookserver.d"),
                          # GPUEnvInject only touches pods with GPUs (device-allocated annotation).
                          "--feature-gates=GPUEnvInject=true",
                          "--enable-node-metric-report=false").start()
    try:
        wait_until(lambda: k.parts.states.has_synced(), message="the koordlet's states synced")
        yield run / "hookserver.d" / "koordlet.json"
    finally:
        k.stop()
        shutil.rmtree(sock_dir, ignore_errors=True)
        api.close()


class Proxy:
    """A runtime proxy on a Runtime of its own in this process, and a CRI client of it (the "kubelet")."""

    def __init__(self, backend: str, hook_dir: Path, *flags: str) -> None:
        self.dir = tempfile.mkdtemp(prefix="kp-", dir="/tmp")
        self.endpoint = f"{self.dir}/runtimeproxy.sock"
        argv = ["--role=runtime-proxy", f"--koord-runtimeproxy-endpoint={self.endpoint}",
                f"--remote-runtime-service-endpoint={backend}", f"--hook-server-config-dir={hook_dir}",
                "--metrics-addr=0", "--health-addr=0", "--log-level=warning", *flags]
        self.options = parse_role_options("runtime-proxy", argv, runtime_proxy)
        runtime_proxy.check_options(self.options)
        self.runtime = Runtime(self.options)
        self.parts = runtime_proxy.register(self.runtime, self.options)
        self.runtime.start()
        wait_until(lambda: self.parts.backend_sync.synced.is_set(), message="the proxy reached containerd")
        self.channel: grpc.Channel | None = grpc.insecure_channel(f"unix://{self.endpoint}")
        self.cri = crigrpc.RuntimeServiceStub(self.channel)

    def hook_servers(self) -> list[str]:
        return [s.name for s in self.parts.registry.servers()]

    def metric(self, name: str, **labels: str) -> float:
        return self.runtime.metrics.registry.get_sample_value(name, labels) or 0.0

    def stop(self) -> None:
        if self.channel is None:
            return
        self.channel.close()
        self.channel = None
        self.runtime.stop(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def hook_dir(tmp_path: Path) -> Path:
    path = tmp_path / "hookserver.d"
    path.mkdir()
    return path


@pytest.fixture
def proxies(containerd: Containerd) -> Iterator[Any]:  # noqa: F811
    started: list[Proxy] = []

    def start(hook_dir: Path, *flags: str) -> Proxy:
        p = Proxy(containerd.address, hook_dir, *flags)
        started.append(p)
        return p

    yield start
    for p in started:
        p.stop()


def register(hook_dir: Path, koordlet_json: Path, proxy: Proxy) -> None:
    shutil.copy(koordlet_json, hook_dir / "koordlet.json")
    wait_until(lambda: "koordlet.json" in proxy.hook_servers(), message="the proxy saw the koordlet's registration")


def run_pod(proxy: Proxy, containerd: Containerd, qos_dir: str, *, labels: dict[str, str],  # noqa: F811
            annotations: dict[str, str], kubelet_cgroup: bool = True) -> tuple[str, Any, str]:
    """RunPodSandbox through the proxy as the kubelet does it (the pod cgroup made first); (sandbox id, config, parent)."""
    uid = str(uuid.uuid4())
    parent = containerd.cgroup_parent(qos_dir, uid)
    if kubelet_cgroup:
        for subsystem in ("cpu", "cpuacct", "memory"):
            (CGROUP / subsystem / parent.lstrip("/")).mkdir(parents=True, exist_ok=True)
    config = containerd.sandbox_config(f"pod-{uid[:8]}", "default", uid, cgroup_parent=parent, labels=labels,
                                       annotations=annotations)
    sandbox_id = proxy.cri.RunPodSandbox(cri.RunPodSandboxRequest(config=config), timeout=60).pod_sandbox_id
    return sandbox_id, config, parent


def create(proxy: Proxy, sandbox_id: str, config: Any, resources: Any, **kwargs: Any) -> str:
    request = cri.CreateContainerRequest(pod_sandbox_id=sandbox_id, sandbox_config=config,
                                         config=container_config("main", resources=resources, **kwargs))
    return proxy.cri.CreateContainer(request, timeout=60).container_id


def be_pod() -> tuple[dict[str, str], dict[str, str]]:
    return {QOS: "BE", "app": "batch"}, {EXT_SPEC: json.dumps({"containers": {"main": BATCH}})}


def read(path: Path) -> str:
    return path.read_text().strip()


# -- through the koordlet's hook server ----------------------------------------------------------------


def test_a_be_pod_is_created_with_its_batch_limits(containerd, koordlet, proxies, hook_dir):  # noqa: F811
    proxy = proxies(hook_dir)
    register(hook_dir, koordlet, proxy)
    registration = json.loads(koordlet.read_text())
    assert registration["failure-policy"] == "Ignore"
    assert registration["runtime-hooks"] == ["PreRunPodSandbox", "PreCreateContainer", "PreUpdateContainerResources"]

    labels, annotations = be_pod()
    sandbox_id, config, parent = run_pod(proxy, containerd, "besteffort", labels=labels, annotations=annotations)
    sandbox = runtime_spec(containerd.address, sandbox_id)
    assert sandbox["linux"]["cgroupsPath"] == f"{parent}/{sandbox_id}"
    # The pod cgroup the kubelet made got the pod's batch values at PreRunPodSandbox.
    pod_dir = parent.lstrip("/")
    assert read(CGROUP / "cpu" / pod_dir / "cpu.shares") == "512"
    assert read(CGROUP / "cpu" / pod_dir / "cpu.cfs_quota_us") == "100000"
    assert read(CGROUP / "memory" / pod_dir / "memory.limit_in_bytes") == str(256 * MiB)

    container_id = create(proxy, sandbox_id, config, KUBELET_BE, envs={"A": "1"})
    spec = runtime_spec(containerd.address, container_id)
    assert spec["linux"]["cgroupsPath"] == f"{parent}/{container_id}"
    cpu, memory = spec["linux"]["resources"]["cpu"], spec["linux"]["resources"]["memory"]
    assert (cpu["shares"], cpu["quota"], memory["limit"]) == (512, 100000, 256 * MiB)
    assert spec["process"]["oomScoreAdj"] == 1000, "the kubelet's oom_score_adj survives the merge"
    assert "A=1" in spec["process"]["env"]
    proxy.cri.StartContainer(cri.StartContainerRequest(container_id=container_id), timeout=60)
    assert read(CGROUP / "cpu" / pod_dir / container_id / "cpu.shares") == "512"
    assert read(CGROUP / "memory" / pod_dir / container_id / "memory.limit_in_bytes") == str(256 * MiB)
    assert proxy.metric("koord_runtime_proxy_hook_calls_total", hook_server="koordlet.json",
                        hook="PreCreateContainer", result="ok") == 1
    proxy.cri.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    proxy.cri.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    assert len(proxy.parts.store) == 0


def test_an_ls_container_gets_the_cpuset_the_scheduler_bound(containerd, koordlet, proxies, hook_dir):  # noqa: F811
    proxy = proxies(hook_dir)
    register(hook_dir, koordlet, proxy)
    sandbox_id, config, parent = run_pod(proxy, containerd, "guaranteed", labels={QOS: "LS"},
                                         annotations={RESOURCE_STATUS: json.dumps({"cpuset": "0"})})
    kubelet = cri.LinuxContainerResources(cpu_shares=1024, cpu_quota=100000, cpu_period=100000,
                                          memory_limit_in_bytes=128 * MiB, oom_score_adj=-997)
    container_id = create(proxy, sandbox_id, config, kubelet)
    resources = runtime_spec(containerd.address, container_id)["linux"]["resources"]
    assert resources["cpu"]["cpus"] == "0"
    assert resources["cpu"]["quota"] == -1, "a pinned container's CFS quota is unset"
    assert resources["cpu"]["shares"] == 1024 and resources["memory"]["limit"] == 128 * MiB
    proxy.cri.StartContainer(cri.StartContainerRequest(container_id=container_id), timeout=60)
    assert read(CGROUP / "cpuset" / parent.lstrip("/") / container_id / "cpuset.cpus") == "0"


def test_a_container_of_a_pod_with_gpus_sees_them(containerd, koordlet, proxies, hook_dir):  # noqa: F811
    proxy = proxies(hook_dir)
    register(hook_dir, koordlet, proxy)
    allocated = json.dumps({"gpu": [{"minor": 2, "resources": {"koordinator.sh/gpu-core": "100"}},
                                    {"minor": 0, "resources": {"koordinator.sh/gpu-core": "100"}}]})
    sandbox_id, config, _ = run_pod(proxy, containerd, "burstable", labels={QOS: "LS"},
                                    annotations={"scheduling.koordinator.sh/device-allocated": allocated})
    container_id = create(proxy, sandbox_id, config, cri.LinuxContainerResources(cpu_shares=512), envs={"A": "1"})
    env = runtime_spec(containerd.address, container_id)["process"]["env"]
    assert "NVIDIA_VISIBLE_DEVICES=2,0" in env and "A=1" in env
    proxy.cri.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    proxy.cri.RemovePodSandbox(cri.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)


def test_a_pod_with_the_skip_label_goes_through_unchanged(containerd, koordlet, proxies, hook_dir):  # noqa: F811
    proxy = proxies(hook_dir)
    register(hook_dir, koordlet, proxy)
    labels, annotations = be_pod()
    sandbox_id, config, _ = run_pod(proxy, containerd, "besteffort", labels={**labels, SKIP: "true"},
                                    annotations=annotations)
    container_id = create(proxy, sandbox_id, config, KUBELET_BE)
    cpu = runtime_spec(containerd.address, container_id)["linux"]["resources"]["cpu"]
    assert cpu["shares"] == 2 and "quota" not in cpu
    assert proxy.metric("koord_runtime_proxy_hook_calls_total", hook_server="koordlet.json",
                        hook="PreCreateContainer", result="ok") == 0


def test_a_plugin_that_cannot_handle_the_pod_is_skipped(containerd, koordlet, proxies, hook_dir,  # noqa: F811
                                                        caplog):
    proxy = proxies(hook_dir)
    register(hook_dir, koordlet, proxy)
    with caplog.at_level(logging.WARNING, logger="koordinator.koordlet"):
        sandbox_id, config, _ = run_pod(proxy, containerd, "besteffort", labels={QOS: "BE"},
                                        annotations={EXT_SPEC: "{not json"})
        container_id = create(proxy, sandbox_id, config, KUBELET_BE)
    assert runtime_spec(containerd.address, container_id)["linux"]["resources"]["cpu"]["shares"] == 2
    skipped = [r.getMessage() for r in caplog.records if "runtime hook BatchResource skipped" in r.getMessage()]
    assert len(skipped) == 2 and f"annotation {EXT_SPEC} is not JSON" in skipped[0], skipped


# -- hook server down ----------------------------------------------------------------------------------


def down(hook_dir: Path, policy: str) -> str:
    name = f"down-{policy.lower()}.json"
    (hook_dir / name).write_text(json.dumps({"remote-endpoint": f"{hook_dir}/nobody.sock", "failure-policy": policy,
                                             "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer"]}))
    return name


def test_hook_server_down_with_ignore_creates_the_container_unchanged(containerd, proxies, hook_dir):  # noqa: F811
    proxy = proxies(hook_dir)
    name = down(hook_dir, "Ignore")
    wait_until(lambda: name in proxy.hook_servers())
    labels, annotations = be_pod()
    sandbox_id, config, _ = run_pod(proxy, containerd, "besteffort", labels=labels, annotations=annotations)
    container_id = create(proxy, sandbox_id, config, KUBELET_BE)
    cpu = runtime_spec(containerd.address, container_id)["linux"]["resources"]["cpu"]
    assert cpu["shares"] == 2
    for hook in ("PreRunPodSandbox", "PreCreateContainer"):
        assert proxy.metric("koord_runtime_proxy_hook_calls_total", hook_server=name, hook=hook,
                            result="failed_ignored") == 1


def test_hook_server_down_with_fail_fails_the_call_naming_it(containerd, proxies, hook_dir):  # noqa: F811
    proxy = proxies(hook_dir)
    name = down(hook_dir, "Fail")
    wait_until(lambda: name in proxy.hook_servers())
    labels, annotations = be_pod()
    with pytest.raises(grpc.RpcError) as failed:
        run_pod(proxy, containerd, "besteffort", labels={**labels, "test": "fail-closed"}, annotations=annotations)
    assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
    assert f"hook server {name} ({hook_dir}/nobody.sock) failed PreRunPodSandbox" in failed.value.details()
    listed = containerd.runtime.ListPodSandbox(cri.ListPodSandboxRequest(), timeout=10).items
    assert not [s for s in listed if s.labels.get("test") == "fail-closed"], "the call must not reach containerd"
    assert proxy.metric("koord_runtime_proxy_hook_calls_total", hook_server=name, hook="PreRunPodSandbox",
                        result="failed") == 1
    assert proxy.metric("koord_runtime_proxy_cri_requests_total", method="RunPodSandbox", code="UNAVAILABLE") == 1


# -- restart -------------------------------------------------------------------------------------------


def test_after_a_restart_the_update_hook_still_finds_the_pod(containerd, koordlet, proxies, hook_dir):  # noqa: F811
    first = proxies(hook_dir)
    register(hook_dir, koordlet, first)
    labels, annotations = be_pod()
    sandbox_id, config, parent = run_pod(first, containerd, "besteffort", labels=labels, annotations=annotations)
    container_id = create(first, sandbox_id, config, KUBELET_BE)
    first.cri.StartContainer(cri.StartContainerRequest(container_id=container_id), timeout=60)
    first.stop()

    second = proxies(hook_dir)
    wait_until(lambda: "koordlet.json" in second.hook_servers())
    pod = second.parts.store.pod(sandbox_id)
    assert pod is not None and pod.labels[QOS] == "BE" and pod.cgroup_parent == parent
    # The kubelet resizes the container with what it knows of a BE pod: the hook puts the batch limits back.
    update = cri.LinuxContainerResources(cpu_shares=2, cpu_quota=0, memory_limit_in_bytes=0)
    second.cri.UpdateContainerResources(cri.UpdateContainerResourcesRequest(container_id=container_id, linux=update),
                                        timeout=60)
    assert second.metric("koord_runtime_proxy_hook_calls_total", hook_server="koordlet.json",
                         hook="PreUpdateContainerResources", result="ok") == 1
    container_dir = parent.lstrip("/") + "/" + container_id
    assert read(CGROUP / "cpu" / container_dir / "cpu.shares") == "512"
    assert read(CGROUP / "cpu" / container_dir / "cpu.cfs_quota_us") == "100000"
    assert read(CGROUP / "memory" / container_dir / "memory.limit_in_bytes") == str(256 * MiB)


# -- bad registrations ---------------------------------------------------------------------------------


def test_a_malformed_registration_is_logged_and_the_others_keep_working(containerd, koordlet, proxies,  # noqa: F811
                                                                         hook_dir, caplog):
    proxy = proxies(hook_dir)
    register(hook_dir, koordlet, proxy)
    with caplog.at_level(logging.ERROR, logger="koordinator.runtime_proxy"):
        (hook_dir / "broken.json").write_text(json.dumps({"remote-endpoint": "/run/x.sock",
                                                          "failure-policy": "Sometimes", "runtime-hooks": []}))
        wait_until(lambda: "broken.json" in proxy.parts.registry.problems(), message="the broken file was read")
    lines = [r.getMessage() for r in caplog.records if "broken.json" in r.getMessage()]
    assert lines == [f"invalid hook server registration {hook_dir}/broken.json: failure-policy: 'Sometimes': "
                     "want Fail or Ignore"]
    assert proxy.hook_servers() == ["koordlet.json"]
    labels, annotations = be_pod()
    sandbox_id, config, _ = run_pod(proxy, containerd, "besteffort", labels=labels, annotations=annotations)
    cpu = runtime_spec(containerd.address, create(proxy, sandbox_id, config, KUBELET_BE))["linux"]["resources"]["cpu"]
    assert cpu["shares"] == 512


# -- pass-through --------------------------------------------------------------------------------------


def test_calls_without_hooks_reach_containerd_unchanged(containerd, proxies, hook_dir):  # noqa: F811
    from tests.containerd_harness import TEST_IMAGE

    proxy = proxies(hook_dir)
    assert proxy.cri.Version(cri.VersionRequest(version="v1"), timeout=10).runtime_name == "containerd"
    images = crigrpc.ImageServiceStub(proxy.channel)
    status = images.ImageStatus(cri.ImageStatusRequest(image=cri.ImageSpec(image=TEST_IMAGE)), timeout=10)
    assert TEST_IMAGE in status.image.repo_tags
    # containerd's own status and message come back
    with pytest.raises(grpc.RpcError) as missing:
        proxy.cri.ContainerStatus(cri.ContainerStatusRequest(container_id="no-such-container"), timeout=10)
    with pytest.raises(grpc.RpcError) as direct:
        containerd.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id="no-such-container"), timeout=10)
    assert (missing.value.code(), missing.value.details()) == (direct.value.code(), direct.value.details())
    assert proxy.metric("koord_runtime_proxy_cri_requests_total", method="ContainerStatus",
                        code=direct.value.code().name) == 1
    # a server-streaming method travels as a stream: containerd 1.6 answers it with its own status
    with pytest.raises(grpc.RpcError) as events:
        next(iter(proxy.cri.GetContainerEvents(cri.GetEventsRequest(), timeout=10)))
    with pytest.raises(grpc.RpcError) as direct_events:
        next(iter(containerd.runtime.GetContainerEvents(cri.GetEventsRequest(), timeout=10)))
    assert events.value.code() == direct_events.value.code()
    # a method this build's proto does not know is forwarded too
    bogus = proxy.channel.unary_unary("/runtime.v1.RuntimeService/NoSuchMethod")
    with pytest.raises(grpc.RpcError) as unknown:
        bogus(b"", timeout=10)
    assert unknown.value.code() == grpc.StatusCode.UNIMPLEMENTED


# -- several hook servers --------------------------------------------------------------------------------


class Recorder:
    """A second hook server (as a vendor's would be): records every call and adds an env var and an annotation
    at PreCreateContainer."""

    def __init__(self, path: str) -> None:
        from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi
        from koordinator.grpcapi.runtime.v1alpha1 import api_pb2_grpc as hookgrpc
        from koordinator.runtime.grpcserver import serve_unix

        self.calls: list[tuple[str, Any]] = []
        recorder = self

        class Servicer(hookgrpc.RuntimeHookServiceServicer):
            def PreCreateContainerHook(self, request: Any, context: Any) -> Any:
                recorder.calls.append(("PreCreateContainer", request))
                return hookapi.ContainerResourceHookResponse(
                    container_envs={**request.container_envs, "INJECTED": "1"},
                    container_annotations={"recorder.example.com/seen": "true"})

            def PreStartContainerHook(self, request: Any, context: Any) -> Any:
                recorder.calls.append(("PreStartContainer", request))
                return hookapi.ContainerResourceHookResponse()

            def PostStartContainerHook(self, request: Any, context: Any) -> Any:
                recorder.calls.append(("PostStartContainer", request))
                return hookapi.ContainerResourceHookResponse()

            def PostStopContainerHook(self, request: Any, context: Any) -> Any:
                recorder.calls.append(("PostStopContainer", request))
                return hookapi.ContainerResourceHookResponse()

            def PostStopPodSandboxHook(self, request: Any, context: Any) -> Any:
                recorder.calls.append(("PostStopPodSandbox", request))
                return hookapi.PodSandboxHookResponse()

        self.path = path
        self.server = serve_unix(path, "recorder", lambda s: hookgrpc.add_RuntimeHookServiceServicer_to_server(
            Servicer(), s), max_workers=2, name="recorder")

    def registration(self) -> str:
        return json.dumps({"remote-endpoint": self.path, "failure-policy": "Fail", "runtime-hooks": [
            "PreCreateContainer", "PreStartContainer", "PostStartContainer", "PostStopContainer",
            "PostStopPodSandbox"]})


def test_every_registered_hook_server_is_asked_in_file_order(containerd, koordlet, proxies, hook_dir,  # noqa: F811
                                                             tmp_path):
    sock_dir = tempfile.mkdtemp(prefix="kr-", dir="/tmp")
    recorder = Recorder(f"{sock_dir}/recorder.sock")
    try:
        proxy = proxies(hook_dir)
        register(hook_dir, koordlet, proxy)
        (hook_dir / "recorder.json").write_text(recorder.registration())
        wait_until(lambda: proxy.hook_servers() == ["koordlet.json", "recorder.json"])
        labels, annotations = be_pod()
        sandbox_id, config, _ = run_pod(proxy, containerd, "besteffort", labels=labels, annotations=annotations)
        container_id = create(proxy, sandbox_id, config, KUBELET_BE, envs={"A": "1"})
        (_, created), = [c for c in recorder.calls if c[0] == "PreCreateContainer"]
        assert created.container_resources.cpu_shares == 512, "the recorder sees the koordlet's answer"
        assert created.pod_labels[QOS] == "BE" and dict(created.container_envs) == {"A": "1"}
        spec = runtime_spec(containerd.address, container_id)
        assert "INJECTED=1" in spec["process"]["env"] and "A=1" in spec["process"]["env"]
        status = containerd.runtime.ContainerStatus(cri.ContainerStatusRequest(container_id=container_id), timeout=10)
        assert status.status.annotations["recorder.example.com/seen"] == "true"
        assert spec["linux"]["resources"]["cpu"]["shares"] == 512
        proxy.cri.StartContainer(cri.StartContainerRequest(container_id=container_id), timeout=60)
        proxy.cri.StopContainer(cri.StopContainerRequest(container_id=container_id, timeout=10), timeout=60)
        proxy.cri.StopPodSandbox(cri.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
        assert [name for name, _ in recorder.calls] == ["PreCreateContainer", "PreStartContainer",
                                                        "PostStartContainer", "PostStopContainer",
                                                        "PostStopPodSandbox"]
        started = recorder.calls[1][1]
        assert started.container_mata.id == container_id and started.pod_meta.uid == config.metadata.uid
        assert started.container_annotations["recorder.example.com/seen"] == "true"
    finally:
        recorder.server.stop(None)
        shutil.rmtree(sock_dir, ignore_errors=True)
