"""The gRPC contracts of koordinator.grpcapi: the committed generated modules are current, and the wire
contract (method paths, streaming, field numbers, types and labels) is upstream's.

The expected numbers below are written out from upstream (k8s.io/cri-api pkg/apis/runtime/v1 and
koordinator-sh/koordinator apis/runtime/v1alpha1), not read back from the generated code: a renumbered or
retyped field in our .proto fails here even when the generated modules are current.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from google.protobuf.descriptor import FieldDescriptor

from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
from koordinator.grpcapi.runtime.v1 import api_pb2_grpc as cri_grpc
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hook
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2_grpc as hook_grpc

REPO = Path(__file__).resolve().parent.parent

_SCALARS = {
    FieldDescriptor.TYPE_STRING: "string", FieldDescriptor.TYPE_BYTES: "bytes", FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_INT32: "int32", FieldDescriptor.TYPE_INT64: "int64", FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_UINT64: "uint64", FieldDescriptor.TYPE_DOUBLE: "double",
}


def _type(field: FieldDescriptor) -> str:
    """A field as written in a .proto: ``int64``, ``repeated HugepageLimit``, ``map<string,string>``."""
    if field.type in _SCALARS:
        name = _SCALARS[field.type]
    elif field.type == FieldDescriptor.TYPE_ENUM:
        name = field.enum_type.name
    elif field.type == FieldDescriptor.TYPE_MESSAGE:
        entry = field.message_type
        if entry.GetOptions().map_entry:
            return f"map<{_type(entry.fields_by_name['key'])},{_type(entry.fields_by_name['value'])}>"
        name = entry.name
    else:  # pragma: no cover - no other type is used by these contracts
        name = f"type{field.type}"
    return f"repeated {name}" if field.is_repeated else name


def _fields(message) -> dict[str, tuple[int, str]]:
    return {f.name: (f.number, _type(f)) for f in message.DESCRIPTOR.fields}


# ---------------------------------------------------------------------------------------------------------
# (a) the generated modules are what the .proto files generate with the pinned grpcio-tools


def test_generated_modules_are_current():
    proc = subprocess.run([sys.executable, "scripts/gen_protos.py", "--check"], cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""


def test_dependency_bounds_match_the_generated_code():
    """grpcio and protobuf lower bounds are the versions the generated modules check at import, and the
    test extra pins the grpcio-tools that generated them."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = {re.split(r"[<>=!~ ;]", d, maxsplit=1)[0]: d for d in project["dependencies"]}
    test_deps = {re.split(r"[<>=!~ ;]", d, maxsplit=1)[0]: d for d in project["optional-dependencies"]["test"]}
    for module in (cri_grpc, hook_grpc):
        assert deps["grpcio"] == f"grpcio>={module.GRPC_GENERATED_VERSION}"
    for folder in ("v1", "v1alpha1"):
        text = (REPO / "koordinator/grpcapi/runtime" / folder / "api_pb2.py").read_text()
        major, minor, patch = re.search(
            r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),", text).groups()
        assert deps["protobuf"] == f"protobuf>={major}.{minor}.{patch}"
    assert test_deps["grpcio-tools"] == f"grpcio-tools=={version('grpcio-tools')}"


# ---------------------------------------------------------------------------------------------------------
# (b) the wire contract


class _RecordingChannel:
    """Stands in for a grpc.Channel: records the method path and kind each stub method is built with."""

    def __init__(self):
        self.paths: dict[str, str] = {}

    def __getattr__(self, kind):
        def factory(path, **_):
            self.paths[path] = kind
            return path
        return factory


def _method_paths(service) -> dict[str, str]:
    """``/package.Service/Method`` -> the call kind, from the descriptor."""
    kinds = {(False, False): "unary_unary", (False, True): "unary_stream",
             (True, False): "stream_unary", (True, True): "stream_stream"}
    return {f"/{service.full_name}/{m.name}": kinds[m.client_streaming, m.server_streaming] for m in service.methods}


def test_packages_and_no_imports():
    assert cri.DESCRIPTOR.package == "runtime.v1"
    assert hook.DESCRIPTOR.package == "runtime.v1alpha1"
    assert list(cri.DESCRIPTOR.dependencies) == [] and list(hook.DESCRIPTOR.dependencies) == []
    assert cri.DESCRIPTOR.name == "koordinator/grpcapi/runtime/v1/api.proto"
    assert hook.DESCRIPTOR.name == "koordinator/grpcapi/runtime/v1alpha1/api.proto"


def test_cri_services_and_methods():
    runtime = cri.DESCRIPTOR.services_by_name["RuntimeService"]
    image = cri.DESCRIPTOR.services_by_name["ImageService"]
    assert set(cri.DESCRIPTOR.services_by_name) == {"RuntimeService", "ImageService"}
    assert {m.name for m in runtime.methods} == {
        "Version", "RunPodSandbox", "StopPodSandbox", "RemovePodSandbox", "PodSandboxStatus", "ListPodSandbox",
        "StreamPodSandboxes", "CreateContainer", "StartContainer", "StopContainer", "RemoveContainer",
        "ListContainers", "StreamContainers", "ContainerStatus", "UpdateContainerResources", "ReopenContainerLog",
        "ExecSync", "Exec", "Attach", "PortForward", "ContainerStats", "ListContainerStats", "StreamContainerStats",
        "PodSandboxStats", "ListPodSandboxStats", "StreamPodSandboxStats", "UpdateRuntimeConfig", "Status",
        "CheckpointContainer", "GetContainerEvents", "ListMetricDescriptors", "ListPodSandboxMetrics",
        "StreamPodSandboxMetrics", "RuntimeConfig", "UpdatePodSandboxResources",
    }
    assert {m.name for m in image.methods} == {
        "ListImages", "StreamImages", "ImageStatus", "PullImage", "RemoveImage", "ImageFsInfo"}
    paths = {**_method_paths(runtime), **_method_paths(image)}
    assert paths["/runtime.v1.RuntimeService/RunPodSandbox"] == "unary_unary"
    assert paths["/runtime.v1.ImageService/PullImage"] == "unary_unary"
    streaming = {p for p, kind in paths.items() if kind != "unary_unary"}
    assert streaming == {f"/runtime.v1.RuntimeService/{m}" for m in (
        "GetContainerEvents", "StreamPodSandboxes", "StreamContainers", "StreamContainerStats",
        "StreamPodSandboxStats", "StreamPodSandboxMetrics")} | {"/runtime.v1.ImageService/StreamImages"}
    assert all(paths[p] == "unary_stream" for p in streaming)   # server-streaming only
    events = runtime.methods_by_name["GetContainerEvents"]
    assert (events.input_type.name, events.output_type.name) == ("GetEventsRequest", "ContainerEventResponse")
    assert events.server_streaming and not events.client_streaming
    resize = runtime.methods_by_name["UpdatePodSandboxResources"]
    assert (resize.input_type.name, resize.output_type.name) == (
        "UpdatePodSandboxResourcesRequest", "UpdatePodSandboxResourcesResponse")

    # The generated stubs call exactly those paths, with those kinds.
    channel = _RecordingChannel()
    cri_grpc.RuntimeServiceStub(channel)
    cri_grpc.ImageServiceStub(channel)
    assert channel.paths == paths


def test_hook_service_and_methods():
    assert set(hook.DESCRIPTOR.services_by_name) == {"RuntimeHookService"}
    service = hook.DESCRIPTOR.services_by_name["RuntimeHookService"]
    pod = ("PodSandboxHookRequest", "PodSandboxHookResponse")
    container = ("ContainerResourceHookRequest", "ContainerResourceHookResponse")
    assert {m.name: (m.input_type.name, m.output_type.name) for m in service.methods} == {
        "PreRunPodSandboxHook": pod,
        "PostStopPodSandboxHook": pod,
        "PreCreateContainerHook": container,
        "PreStartContainerHook": container,
        "PostStartContainerHook": container,
        "PostStopContainerHook": container,
        "PreUpdateContainerResourcesHook": container,
    }
    paths = _method_paths(service)
    assert set(paths.values()) == {"unary_unary"}
    assert "/runtime.v1alpha1.RuntimeHookService/PreCreateContainerHook" in paths
    channel = _RecordingChannel()
    hook_grpc.RuntimeHookServiceStub(channel)
    assert channel.paths == paths


LINUX_CONTAINER_RESOURCES = {
    "cpu_period": (1, "int64"), "cpu_quota": (2, "int64"), "cpu_shares": (3, "int64"),
    "memory_limit_in_bytes": (4, "int64"), "oom_score_adj": (5, "int64"), "cpuset_cpus": (6, "string"),
    "cpuset_mems": (7, "string"), "hugepage_limits": (8, "repeated HugepageLimit"),
    "unified": (9, "map<string,string>"), "memory_swap_limit_in_bytes": (10, "int64"),
}
HUGEPAGE_LIMIT = {"page_size": (1, "string"), "limit": (2, "uint64")}
STR_MAP = "map<string,string>"

HOOK_MESSAGES = {
    "PodSandboxMetadata": {"name": (1, "string"), "uid": (2, "string"), "namespace": (3, "string"),
                           "attempt": (4, "uint32")},
    "PodSandboxHookRequest": {
        "pod_meta": (1, "PodSandboxMetadata"), "runtime_handler": (2, "string"), "labels": (3, STR_MAP),
        "annotations": (4, STR_MAP), "cgroup_parent": (5, "string"), "overhead": (6, "LinuxContainerResources"),
        "resources": (7, "LinuxContainerResources")},
    "PodSandboxHookResponse": {
        "labels": (1, STR_MAP), "annotations": (2, STR_MAP), "cgroup_parent": (3, "string"),
        "resources": (4, "LinuxContainerResources")},
    "LinuxContainerResources": LINUX_CONTAINER_RESOURCES,
    "HugepageLimit": HUGEPAGE_LIMIT,
    "ContainerMetadata": {"name": (1, "string"), "attempt": (2, "uint32"), "id": (3, "string")},
    "ContainerResourceHookRequest": {
        "pod_meta": (1, "PodSandboxMetadata"),
        "container_mata": (2, "ContainerMetadata"),   # upstream's spelling
        "container_annotations": (3, STR_MAP), "container_resources": (4, "LinuxContainerResources"),
        "pod_resources": (5, "LinuxContainerResources"), "pod_annotations": (6, STR_MAP),
        "pod_labels": (7, STR_MAP), "pod_cgroup_parent": (8, "string"), "container_envs": (9, STR_MAP)},
    "ContainerResourceHookResponse": {
        "container_annotations": (1, STR_MAP), "container_resources": (2, "LinuxContainerResources"),
        "pod_cgroup_parent": (3, "string"), "container_envs": (4, STR_MAP)},
}


def test_hook_messages_field_by_field():
    assert set(hook.DESCRIPTOR.message_types_by_name) == set(HOOK_MESSAGES)
    assert not hook.DESCRIPTOR.enum_types_by_name
    for name, expected in HOOK_MESSAGES.items():
        assert _fields(getattr(hook, name)) == expected, name


#: The CRI messages the runtime proxy reads or rewrites, every field of each.
CRI_MESSAGES = {
    "VersionRequest": {"version": (1, "string")},
    "VersionResponse": {"version": (1, "string"), "runtime_name": (2, "string"), "runtime_version": (3, "string"),
                        "runtime_api_version": (4, "string")},
    "RunPodSandboxRequest": {"config": (1, "PodSandboxConfig"), "runtime_handler": (2, "string")},
    "RunPodSandboxResponse": {"pod_sandbox_id": (1, "string")},
    "StopPodSandboxRequest": {"pod_sandbox_id": (1, "string")},
    "RemovePodSandboxRequest": {"pod_sandbox_id": (1, "string")},
    "PodSandboxConfig": {
        "metadata": (1, "PodSandboxMetadata"), "hostname": (2, "string"), "log_directory": (3, "string"),
        "dns_config": (4, "DNSConfig"), "port_mappings": (5, "repeated PortMapping"), "labels": (6, STR_MAP),
        "annotations": (7, STR_MAP), "linux": (8, "LinuxPodSandboxConfig"), "windows": (9, "WindowsPodSandboxConfig")},
    "PodSandboxMetadata": {"name": (1, "string"), "uid": (2, "string"), "namespace": (3, "string"),
                           "attempt": (4, "uint32")},
    "LinuxPodSandboxConfig": {
        "cgroup_parent": (1, "string"), "security_context": (2, "LinuxSandboxSecurityContext"),
        "sysctls": (3, STR_MAP), "overhead": (4, "LinuxContainerResources"),
        "resources": (5, "LinuxContainerResources")},
    "CreateContainerRequest": {"pod_sandbox_id": (1, "string"), "config": (2, "ContainerConfig"),
                               "sandbox_config": (3, "PodSandboxConfig")},
    "CreateContainerResponse": {"container_id": (1, "string")},
    "StartContainerRequest": {"container_id": (1, "string")},
    "StopContainerRequest": {"container_id": (1, "string"), "timeout": (2, "int64")},
    "RemoveContainerRequest": {"container_id": (1, "string")},
    "ContainerConfig": {
        "metadata": (1, "ContainerMetadata"), "image": (2, "ImageSpec"), "command": (3, "repeated string"),
        "args": (4, "repeated string"), "working_dir": (5, "string"), "envs": (6, "repeated KeyValue"),
        "mounts": (7, "repeated Mount"), "devices": (8, "repeated Device"), "labels": (9, STR_MAP),
        "annotations": (10, STR_MAP), "log_path": (11, "string"), "stdin": (12, "bool"), "stdin_once": (13, "bool"),
        "tty": (14, "bool"), "linux": (15, "LinuxContainerConfig"), "windows": (16, "WindowsContainerConfig"),
        "CDI_devices": (17, "repeated CDIDevice"), "stop_signal": (18, "Signal")},
    "LinuxContainerConfig": {"resources": (1, "LinuxContainerResources"),
                             "security_context": (2, "LinuxContainerSecurityContext")},
    "LinuxContainerResources": LINUX_CONTAINER_RESOURCES,
    "HugepageLimit": HUGEPAGE_LIMIT,
    "UpdateContainerResourcesRequest": {
        "container_id": (1, "string"), "linux": (2, "LinuxContainerResources"),
        "windows": (3, "WindowsContainerResources"), "annotations": (4, STR_MAP)},
    "UpdatePodSandboxResourcesRequest": {
        "pod_sandbox_id": (1, "string"), "overhead": (2, "LinuxContainerResources"),
        "resources": (3, "LinuxContainerResources")},
    "KeyValue": {"key": (1, "string"), "value": (2, "string")},
    "ContainerMetadata": {"name": (1, "string"), "attempt": (2, "uint32")},
    "ImageSpec": {"image": (1, "string"), "annotations": (2, STR_MAP), "user_specified_image": (18, "string"),
                  "runtime_handler": (19, "string"), "image_ref": (20, "string")},
    "ListPodSandboxRequest": {"filter": (1, "PodSandboxFilter")},
    "PodSandboxFilter": {"id": (1, "string"), "state": (2, "PodSandboxStateValue"), "label_selector": (3, STR_MAP)},
    "ListPodSandboxResponse": {"items": (1, "repeated PodSandbox")},
    "PodSandbox": {
        "id": (1, "string"), "metadata": (2, "PodSandboxMetadata"), "state": (3, "PodSandboxState"),
        "created_at": (4, "int64"), "labels": (5, STR_MAP), "annotations": (6, STR_MAP),
        "runtime_handler": (7, "string")},
    "ListContainersRequest": {"filter": (1, "ContainerFilter")},
    "ContainerFilter": {"id": (1, "string"), "state": (2, "ContainerStateValue"), "pod_sandbox_id": (3, "string"),
                        "label_selector": (4, STR_MAP)},
    "ListContainersResponse": {"containers": (1, "repeated Container")},
    "Container": {
        "id": (1, "string"), "pod_sandbox_id": (2, "string"), "metadata": (3, "ContainerMetadata"),
        "image": (4, "ImageSpec"), "image_ref": (5, "string"), "state": (6, "ContainerState"),
        "created_at": (7, "int64"), "labels": (8, STR_MAP), "annotations": (9, STR_MAP), "image_id": (10, "string")},
    "ContainerStatusRequest": {"container_id": (1, "string"), "verbose": (2, "bool")},
    "ContainerStatusResponse": {"status": (1, "ContainerStatus"), "info": (2, STR_MAP)},
    "PodSandboxStatusRequest": {"pod_sandbox_id": (1, "string"), "verbose": (2, "bool")},
    "ContainerEventResponse": {
        "container_id": (1, "string"), "container_event_type": (2, "ContainerEventType"), "created_at": (3, "int64"),
        "pod_sandbox_status": (4, "PodSandboxStatus"), "containers_statuses": (5, "repeated ContainerStatus")},
    "PullImageRequest": {"image": (1, "ImageSpec"), "auth": (2, "AuthConfig"),
                         "sandbox_config": (3, "PodSandboxConfig")},
    "PullImageResponse": {"image_ref": (1, "string")},
}


@pytest.mark.parametrize("name", sorted(CRI_MESSAGES))
def test_cri_message_fields(name):
    assert _fields(getattr(cri, name)) == CRI_MESSAGES[name]


def test_cri_enums():
    def values(enum):
        return {v.name: v.number for v in cri.DESCRIPTOR.enum_types_by_name[enum].values}
    assert values("PodSandboxState") == {"SANDBOX_READY": 0, "SANDBOX_NOTREADY": 1}
    assert values("ContainerState") == {"CONTAINER_CREATED": 0, "CONTAINER_RUNNING": 1, "CONTAINER_EXITED": 2,
                                        "CONTAINER_UNKNOWN": 3}
    assert values("ContainerEventType") == {"CONTAINER_CREATED_EVENT": 0, "CONTAINER_STARTED_EVENT": 1,
                                            "CONTAINER_STOPPED_EVENT": 2, "CONTAINER_DELETED_EVENT": 3}
    assert values("NamespaceMode") == {"POD": 0, "CONTAINER": 1, "NODE": 2, "TARGET": 3}
    assert values("CgroupDriver") == {"SYSTEMD": 0, "CGROUPFS": 1}
    assert values("Protocol") == {"TCP": 0, "UDP": 1, "SCTP": 2}
    signals = values("Signal")
    assert (signals["RUNTIME_DEFAULT"], signals["SIGKILL"], signals["SIGTERM"], signals["SIGRTMAX"]) == (0, 13, 23, 65)
    assert len(signals) == 66 and sorted(signals.values()) == list(range(66))
    profile = cri.SecurityProfile.DESCRIPTOR.enum_types_by_name["ProfileType"]
    assert {v.name: v.number for v in profile.values} == {"RuntimeDefault": 0, "Unconfined": 1, "Localhost": 2}


# ---------------------------------------------------------------------------------------------------------
# (c) round trips, and bytes checked by hand


def _pod_config() -> cri.PodSandboxConfig:
    return cri.PodSandboxConfig(
        metadata=cri.PodSandboxMetadata(name="nginx", uid="u-1", namespace="default", attempt=1),
        hostname="nginx", log_directory="/var/log/pods/default_nginx_u-1",
        dns_config=cri.DNSConfig(servers=["10.96.0.10"], searches=["default.svc.cluster.local"], options=["ndots:5"]),
        port_mappings=[cri.PortMapping(protocol=cri.TCP, container_port=80, host_port=8080)],
        labels={"app": "nginx"}, annotations={"koordinator.sh/qosClass": "LS"},
        linux=cri.LinuxPodSandboxConfig(
            cgroup_parent="/kubepods/burstable/podu-1", sysctls={"net.core.somaxconn": "1024"},
            resources=cri.LinuxContainerResources(
                cpu_period=100000, cpu_quota=200000, cpu_shares=2048, memory_limit_in_bytes=1 << 30,
                hugepage_limits=[cri.HugepageLimit(page_size="2MB", limit=1 << 21)], unified={"memory.high": "max"}),
            security_context=cri.LinuxSandboxSecurityContext(
                namespace_options=cri.NamespaceOption(network=cri.NODE), run_as_user=cri.Int64Value(value=0))),
    )


def test_run_pod_sandbox_request_round_trip():
    request = cri.RunPodSandboxRequest(config=_pod_config(), runtime_handler="runc")
    parsed = cri.RunPodSandboxRequest.FromString(request.SerializeToString())
    assert parsed == request
    assert parsed.config.linux.resources.hugepage_limits[0].limit == 1 << 21
    assert parsed.config.linux.security_context.namespace_options.network == cri.NODE
    assert dict(parsed.config.annotations) == {"koordinator.sh/qosClass": "LS"}


def test_create_container_request_round_trip():
    request = cri.CreateContainerRequest(
        pod_sandbox_id="sandbox-1",
        config=cri.ContainerConfig(
            metadata=cri.ContainerMetadata(name="app", attempt=2),
            image=cri.ImageSpec(image="nginx:1.27", user_specified_image="nginx"),
            command=["nginx"], args=["-g", "daemon off;"], envs=[cri.KeyValue(key="A", value="1")],
            mounts=[cri.Mount(container_path="/data", host_path="/mnt/data", readonly=True)],
            annotations={"io.kubernetes.container.hash": "abc"},
            linux=cri.LinuxContainerConfig(
                resources=cri.LinuxContainerResources(cpu_shares=512, cpuset_cpus="0-3", oom_score_adj=-997),
                security_context=cri.LinuxContainerSecurityContext(privileged=False, masked_paths=["/proc/kcore"])),
            stop_signal=cri.SIGTERM),
        sandbox_config=_pod_config(),
    )
    parsed = cri.CreateContainerRequest.FromString(request.SerializeToString())
    assert parsed == request
    assert [(e.key, e.value) for e in parsed.config.envs] == [("A", "1")]
    assert parsed.config.linux.resources.oom_score_adj == -997


def test_wire_bytes_by_hand():
    # field 1, wire type 2 (length-delimited) = 0x0a, then the length, then the bytes
    assert cri.RunPodSandboxResponse(pod_sandbox_id="abc").SerializeToString() == b"\x0a\x03abc"
    assert cri.KeyValue(key="k", value="v").SerializeToString() == b"\x0a\x01k\x12\x01v"
    # ContainerStatusRequest.verbose: field 2, varint = 0x10
    assert cri.ContainerStatusRequest(container_id="c", verbose=True).SerializeToString() == b"\x0a\x01c\x10\x01"
    # LinuxContainerResources.memory_swap_limit_in_bytes: field 10, varint = 0x50
    assert cri.LinuxContainerResources(memory_swap_limit_in_bytes=1).SerializeToString() == b"\x50\x01"
    # ContainerResourceHookRequest.container_envs: field 9, length-delimited = 0x4a; entry {1: key, 2: value}
    assert hook.ContainerResourceHookRequest(container_envs={"k": "v"}).SerializeToString() == \
        b"\x4a\x06\x0a\x01k\x12\x01v"
    # PodSandboxMetadata.attempt: field 4, varint = 0x20
    assert hook.PodSandboxMetadata(attempt=3).SerializeToString() == b"\x20\x03"


def test_hook_and_cri_linux_resources_share_a_wire_format():
    """The proxy copies LinuxContainerResources between the two APIs: the same bytes parse in both."""
    resources = _pod_config().linux.resources
    resources.memory_swap_limit_in_bytes = 1 << 31
    converted = hook.LinuxContainerResources.FromString(resources.SerializeToString())
    assert converted.hugepage_limits[0].page_size == "2MB" and dict(converted.unified) == {"memory.high": "max"}
    assert converted.memory_swap_limit_in_bytes == 1 << 31
    assert cri.LinuxContainerResources.FromString(converted.SerializeToString()) == resources


def test_hook_request_round_trip():
    request = hook.ContainerResourceHookRequest(
        pod_meta=hook.PodSandboxMetadata(name="nginx", uid="u-1", namespace="default"),
        container_mata=hook.ContainerMetadata(name="app", attempt=1, id="c-1"),
        container_annotations={"a": "b"}, container_resources=hook.LinuxContainerResources(cpu_shares=2),
        pod_labels={"app": "nginx"}, pod_cgroup_parent="/kubepods/podu-1", container_envs={"GOMAXPROCS": "2"})
    assert hook.ContainerResourceHookRequest.FromString(request.SerializeToString()) == request
