"""Simulated GPUs and the simulated runtime's hook calls.

* A node with ``gpus_per_node`` (or the ``sim.koordinator.sh/gpus`` annotation) gets fake NVIDIA GPUs: PCI
  devices in its sysfs, ``/proc/driver/nvidia/gpus``, the ``Device`` named after it, GPU labels and
  ``nvidia.com/gpu`` on the Node; koord-manager turns the Device into ``koordinator.sh/gpu-*`` resources.
* With a hook-server registration directory the simulated runtime calls the koordlet's hooks at pod start:
  a GPU pod's container gets ``NVIDIA_VISIBLE_DEVICES``, a bound LSR pod's container its cpuset.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from koordinator.apis.device import ANNOTATION_DEVICE_ALLOCATED, NVIDIA_GPU
from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator.sim import gpus, profiles, tree
from koordinator.sim.hooks import parse_environ
from koordinator.sim.simulator import ANNOTATION_GPUS, container_id
from koordinator_roles.koordlet.statesinformer.device_reporter import DeviceReporter
from koordinator_roles.koordlet.statesinformer.nvml import GPU, GPUInventory, pci_location
from koordinator_roles.manager.noderesource import calculate
from tests.koordlet_harness import InProcessKoordlet, Simulator
from tests.manager_harness import InProcessManager
from tests.waiting import wait_until

GiB = 1 << 30
SYSTEM_NAMESPACE = "koordinator-system"


@pytest.fixture(scope="module")
def api(crd_server) -> Iterator[Client]:
    c = Client.from_kubeconfig(str(crd_server.kubeconfig), qps=0)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def kubeconfig(crd_server) -> Path:
    return crd_server.kubeconfig


@pytest.fixture
def node(api) -> Iterator[str]:
    name = f"gpu-{uuid.uuid4().hex[:8]}"
    alloc = {"cpu": "8", "memory": "16Gi", "pods": "110"}
    api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"capacity": alloc, "allocatable": alloc,
                           "conditions": [{"type": "Ready", "status": "True"}]}})
    yield name
    for kind in ("Node", "Device"):
        try:
            api.delete(kind, name)
        except NotFound:
            pass


@pytest.fixture
def namespace(api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture
def parts() -> Iterator[list]:
    started: list = []
    yield started
    for part in reversed(started):
        part.stop()


def device(api: Client, name: str) -> dict | None:
    try:
        return api.get("Device", name)
    except NotFound:
        return None


def device_minors(api: Client, name: str) -> list[int] | None:
    d = device(api, name)
    return None if d is None else [e["minor"] for e in d["spec"]["devices"]]


# -- pure layout -------------------------------------------------------------------------------------------

def test_gpus_spread_over_numa_nodes_with_stable_ids():
    four = gpus.simulated_gpus("n1", 4, 2)
    assert [(g.minor, g.numa_node, g.bus_id, g.pcie_id) for g in four] == [
        (0, 0, "0000:1b:00.0", "pci0000:1a"), (1, 0, "0000:29:00.0", "pci0000:28"),
        (2, 1, "0000:37:00.0", "pci0000:36"), (3, 1, "0000:45:00.0", "pci0000:44")]
    assert [g.numa_node for g in gpus.simulated_gpus("n1", 3, 2)] == [0, 0, 1]
    assert gpus.simulated_gpus("n1", 4, 2) == four                       # the same ids after a restart
    assert len({g.uuid for g in four}) == 4 and four[0].uuid != gpus.simulated_gpus("n2", 1, 2)[0].uuid
    assert four[0].uuid.startswith("GPU-") and [len(p) for p in four[0].uuid[4:].split("-")] == [8, 4, 4, 4, 12]
    assert gpus.simulated_gpus("n1", 16, 2)[-1].bus_id == "0000:ed:00.0"
    with pytest.raises(ValueError, match="GPU count 17: must be 0-16"):
        gpus.simulated_gpus("n1", 17, 2)


def test_bad_arguments(api, tmp_path):
    from koordinator.runtime.informer import InformerFactory
    from koordinator.sim.simulator import NodeSimulator

    informers = InformerFactory(api)
    with pytest.raises(ValueError, match="GPUs per node 17: must be 0-16"):
        NodeSimulator(api, informers, tmp_path, ["a"], gpus_per_node=17)
    with pytest.raises(ValueError, match=r"hook server config dir '/x/hooks': must contain \{node\}"):
        NodeSimulator(api, informers, tmp_path, ["a", "b"], hook_config_dir="/x/hooks")


# -- the device daemon's part ------------------------------------------------------------------------------

def test_gpus_in_sysfs_proc_device_and_node(api, node, parts, tmp_path, kubeconfig):
    root = tmp_path / "nodes"
    parts.append(Simulator(kubeconfig, root, [node], gpus_per_node=2).start())
    node_obj = api.get("Node", node)
    d = wait_until(lambda: device(api, node), message="the simulator creates the node's Device")
    assert d["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Node", "name": node,
                                                 "uid": node_obj["metadata"]["uid"], "controller": True,
                                                 "blockOwnerDeletion": True}]
    labels = d["metadata"]["labels"]
    assert labels["node.koordinator.sh/gpu-vendor"] == "nvidia"
    assert labels["node.koordinator.sh/gpu-model"] == "Tesla-V100-SXM2-16GB"
    uuids = [gpus.gpu_uuid(node, 0), gpus.gpu_uuid(node, 1)]
    # 8 CPUs: 2 sockets, so the two GPUs sit on NUMA nodes 0 and 1.
    assert d["spec"]["devices"] == [
        {"id": uuids[0], "minor": 0, "type": "gpu", "health": True,
         "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                       "koordinator.sh/gpu-memory-ratio": "100"},
         "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:1a", "busID": "0000:1b:00.0"}},
        {"id": uuids[1], "minor": 1, "type": "gpu", "health": True,
         "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "16Gi",
                       "koordinator.sh/gpu-memory-ratio": "100"},
         "topology": {"socketID": -1, "nodeID": 1, "pcieID": "pci0000:28", "busID": "0000:29:00.0"}}]

    live = wait_until(lambda: gpu_node(api, node, "2"), message="GPU labels and nvidia.com/gpu on the Node")
    assert live["status"]["allocatable"]["cpu"] == "8" and live["status"]["capacity"]["memory"] == "16Gi"

    base = root / node
    for minor, (bus, numa, pcie) in enumerate((("0000:1b:00.0", 0, "pci0000:1a"), ("0000:29:00.0", 1, "pci0000:28"))):
        pci = base / "sys/bus/pci/devices" / bus
        assert (pci / "vendor").read_text() == "0x10de\n" and (pci / "class").read_text() == "0x030200\n"
        assert (pci / "numa_node").read_text() == f"{numa}\n"
        assert (pci / "local_cpulist").read_text() == ("0-1,4-5\n" if numa == 0 else "2-3,6-7\n")
        # The koordlet's Device reporter finds NUMA node and PCI root as on a real host.
        assert pci_location(str(base / "sys"), bus) == (numa, pcie)
        text = (base / "proc/driver/nvidia/gpus" / bus / "information").read_text()
        info = dict((k.strip(), v.strip()) for k, _, v in (line.partition(":") for line in text.splitlines()))
        assert (info["Model"], info["GPU UUID"], info["Bus Location"], info["Device Minor"]) == (
            "Tesla V100-SXM2-16GB", uuids[minor], bus, str(minor))
        assert (base / "dev" / f"nvidia{minor}").exists()

    # koord-manager's GPUDeviceResource turns this Device into the node's GPU resources.
    nr = calculate(colocation_enabled=True, strategy={}, normalization={"enable": False},
                   amplification={"enable": False}, node=live, pods=[], node_metric=None, nrt=None,
                   device=device(api, node), now=0.0, plugins=("GPUDeviceResource",))
    assert nr.resources == {"koordinator.sh/gpu": 200, "koordinator.sh/gpu-core": 200,
                            "koordinator.sh/gpu-memory": 32 * GiB, "koordinator.sh/gpu-memory-ratio": 200}


def gpu_node(api: Client, name: str, count: str) -> dict | None:
    n = api.get("Node", name)
    labels, status = n["metadata"].get("labels") or {}, n.get("status") or {}
    want_labels = {"node.koordinator.sh/gpu-vendor": "nvidia", "node.koordinator.sh/gpu-model": "Tesla-V100-SXM2-16GB"}
    ok_labels = all(labels.get(k) == v for k, v in want_labels.items()) if count != "0" else \
        not any(k in labels for k in want_labels)
    ok = ok_labels and all((status.get(f) or {}).get(NVIDIA_GPU) == count for f in ("capacity", "allocatable"))
    return n if ok else None


def test_node_annotation_changes_the_count_and_a_bad_one_is_reported(api, node, namespace, parts, tmp_path, kubeconfig):
    root = tmp_path / "nodes"
    parts.append(Simulator(kubeconfig, root, [node], gpus_per_node=2).start())
    wait_until(lambda: device_minors(api, node) == [0, 1], message="two GPUs")
    api.patch("Node", node, {"metadata": {"annotations": {ANNOTATION_GPUS: "1"}}})
    wait_until(lambda: device_minors(api, node) == [0], message="the annotation leaves one GPU")
    wait_until(lambda: gpu_node(api, node, "1"), message="nvidia.com/gpu 1")
    assert not (root / node / "sys/bus/pci/devices/0000:29:00.0").exists()
    assert not (root / node / "proc/driver/nvidia/gpus/0000:29:00.0").exists()
    assert not (root / node / "dev/nvidia1").exists() and (root / node / "dev/nvidia0").exists()

    api.patch("Node", node, {"metadata": {"annotations": {ANNOTATION_GPUS: "lots"}}})
    wait_until(lambda: device_minors(api, node) == [0, 1], message="a bad annotation gives the default")
    [event] = wait_until(lambda: [e for e in api.list("Event", "default")["items"]
                                  if e["involvedObject"].get("name") == node
                                  and e["reason"] == profiles.REASON_INVALID], message="the warning event")
    assert event["message"] == ("annotation sim.koordinator.sh/gpus='lots': want a GPU count 0-16; simulating 2"), event

    api.patch("Node", node, {"metadata": {"annotations": {ANNOTATION_GPUS: "0"}}})
    wait_until(lambda: device(api, node) is None, message="no GPU left: the Device goes")
    wait_until(lambda: gpu_node(api, node, "0"), message="GPU labels removed, nvidia.com/gpu 0")
    assert not list((root / node / "sys/bus/pci/devices").iterdir())


def test_a_device_written_by_someone_else_is_left_alone(api, node, parts, tmp_path, kubeconfig, caplog):
    theirs = {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Device", "metadata": {"name": node},
              "spec": {"devices": [{"type": "gpu", "minor": 7, "health": True, "id": "GPU-real"}]}}
    api.create(theirs)
    with caplog.at_level(logging.WARNING, logger="koordinator.sim.simulator"):
        parts.append(Simulator(kubeconfig, tmp_path / "nodes", [node], gpus_per_node=2).start())
        wait_until(lambda: gpu_node(api, node, "2"), message="the Node still gets its labels")
        wait_until(lambda: "its Device was not written by the simulator; left alone" in caplog.text,
                   message="the simulator says why")
    assert device_minors(api, node) == [7]


def test_the_koordlets_device_reporter_leaves_the_simulators_device_alone(api, node, parts, tmp_path, kubeconfig):
    parts.append(Simulator(kubeconfig, tmp_path / "nodes", [node], gpus_per_node=1).start())
    before = wait_until(lambda: device(api, node), message="the simulator's Device")

    name = node

    class States:
        node_name = name

        def node(self):
            return api.get("Node", name)

    # Without NVML (the case on a machine without NVIDIA GPUs) nothing is reported nor deleted.
    assert not DeviceReporter(api, States(), discover=lambda nvml, sys_root: None).sync_once()
    # With real GPUs on the host, the Device the simulator manages is still not taken over.
    inventory = GPUInventory([GPU("GPU-host", 0, 80 * GiB, "0000:3b:00.0", 0, "pci0000:3a")], "H100", "550.1")
    assert not DeviceReporter(api, States(), discover=lambda nvml, sys_root: inventory).sync_once()
    assert device(api, node)["spec"] == before["spec"]


def test_koord_manager_puts_the_gpu_resources_on_the_node(api, node, parts, tmp_path, kubeconfig):
    # colocation on: the noderesource controller runs its plugins (GPUDeviceResource among them).
    try:
        api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}})
        api.create({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "slo-controller-config", "namespace": SYSTEM_NAMESPACE},
                    "data": {"colocation-config": json.dumps({"enable": True})}})
    except Exception as err:  # another test of the module made them
        if "AlreadyExists" not in type(err).__name__:
            raise
    parts.append(Simulator(kubeconfig, tmp_path / "nodes", [node], gpus_per_node=2).start())
    parts.append(InProcessManager(kubeconfig, tmp_path / "certs").start())

    def gpu_resources():
        alloc = (api.get("Node", node).get("status") or {}).get("allocatable") or {}
        return alloc if alloc.get("koordinator.sh/gpu-core") == "200" else None

    alloc = wait_until(gpu_resources, timeout=60, message="the manager's GPU resources on the Node")
    assert alloc["koordinator.sh/gpu-memory"] == "32Gi" and alloc["koordinator.sh/gpu-memory-ratio"] == "200"
    assert alloc[NVIDIA_GPU] == "2" and alloc["cpu"] == "8"
    # The simulator keeps what it owns (nvidia.com/gpu) without touching the manager's resources.
    assert gpu_node(api, node, "2")


# -- the runtime's hook calls ------------------------------------------------------------------------------

LAYOUTS = [(2, "systemd"), (1, "cgroupfs")]


@pytest.mark.parametrize("version, driver", LAYOUTS, ids=[f"v{v}-{d}" for v, d in LAYOUTS])
def test_the_runtime_calls_the_koordlets_hooks(api, node, namespace, parts, tmp_path, kubeconfig, version, driver,
                                               caplog):
    root, runs = tmp_path / "nodes", tmp_path / "koordlet"
    parts.append(Simulator(kubeconfig, root, [node], gpus_per_node=2, cgroup_version=version, cgroup_driver=driver,
                           hook_config_dir=str(runs / "{node}" / "hookserver.d")).start())
    koordlet = InProcessKoordlet(kubeconfig, node, root, runs / node, "--feature-gates=GPUEnvInject=true",
                                 f"--cgroup-driver={driver}").start()
    parts.append(koordlet)
    registration = runs / node / "hookserver.d" / "koordlet.json"
    wait_until(registration.exists, message="the koordlet registers its hook server")
    cgroups = root / node / "cgroup"

    def environ(uid: str, name: str = "main") -> dict[str, str]:
        path = root / node / tree.CONTAINERS / container_id(uid, name).partition("://")[2] / "environ"
        return parse_environ(path.read_bytes())

    def control(rel: str, v2: str, v1: tuple[str, str]) -> str:
        path = cgroups / rel / v2 if version == 2 else cgroups / v1[0] / rel / v1[1]
        return path.read_text().strip()

    # A pod DeviceShare gave GPU 1: its container sees that GPU, and keeps its own environment.
    allocated = json.dumps({"gpu": [{"minor": 1, "resources": {"koordinator.sh/gpu-core": "100"}}]})
    gpu_pod = pod("trainer", node, {ANNOTATION_DEVICE_ALLOCATED: allocated}, env=[{"name": "EPOCHS", "value": "3"}])
    uid = api.create(gpu_pod, namespace=namespace)["metadata"]["uid"]
    wait_until(lambda: running(api, "trainer", namespace), message="the GPU pod runs")
    assert environ(uid) == {"EPOCHS": "3", "NVIDIA_VISIBLE_DEVICES": "1"}

    # A bound LSR pod: its container is created with the scheduler's cpuset and without a CFS quota.
    lsr = pod("pinned", node, {"scheduling.koordinator.sh/resource-status": json.dumps({"cpuset": "2-3"})},
              labels={"koordinator.sh/qosClass": "LSR"}, cpu="2")
    uid = api.create(lsr, namespace=namespace)["metadata"]["uid"]
    wait_until(lambda: running(api, "pinned", namespace), message="the LSR pod runs")
    ctr = tree.container_dir(driver, "Guaranteed", uid, container_id(uid, "main"))
    pod_dir = tree.pod_dir(driver, "Guaranteed", uid)
    assert control(ctr, "cpuset.cpus", ("cpuset", "cpuset.cpus")) == "2-3"
    assert control(ctr, "cpu.max", ("cpu", "cpu.cfs_quota_us")) == ("max 100000" if version == 2 else "-1")
    assert control(pod_dir, "cpu.max", ("cpu", "cpu.cfs_quota_us")) == ("max 100000" if version == 2 else "-1")
    assert environ(uid) == {}

    # The hook server down: the pod still starts (failure policy Ignore), said once in the log.
    koordlet.stop()
    parts.remove(koordlet)
    with caplog.at_level(logging.WARNING, logger="koordinator.sim.hooks"):
        for name in ("late-1", "late-2"):
            late = api.create(pod(name, node, {ANNOTATION_DEVICE_ALLOCATED: allocated}), namespace=namespace)
            wait_until(lambda: running(api, name, namespace), message=f"{name} runs without hooks")
            assert environ(late["metadata"]["uid"]) == {}
    failures = [r for r in caplog.records if "failed PreRunPodSandbox" in r.getMessage()]
    assert len(failures) == 1 and "the simulated runtime goes on without it" in failures[0].getMessage()


def pod(name: str, node: str, annotations: dict[str, str], *, labels: dict[str, str] | None = None,
        env: list[dict[str, Any]] | None = None, cpu: str | None = None) -> dict:
    container: dict[str, Any] = {"name": "main", "image": "busybox"}
    if env:
        container["env"] = env
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": cpu, "memory": "1Gi"}}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations},
            "spec": {"nodeName": node, "containers": [container]}}


def running(api: Client, name: str, namespace: str) -> dict | None:
    p = api.get("Pod", name, namespace)
    return p if (p.get("status") or {}).get("phase") == "Running" else None


def test_registrations_the_runtime_cannot_use_are_logged_once(tmp_path, caplog):
    from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi
    from koordinator.sim.hooks import HookCaller, format_environ

    assert HookCaller(str(tmp_path / "missing")).servers("PreCreateContainer") == []
    d = tmp_path / "hookserver.d"
    d.mkdir()
    (d / "bad.json").write_text(json.dumps({"remote-endpoint": "/run/x.sock", "failure-policy": "Never",
                                            "runtime-hooks": []}))
    (d / "good.json").write_text(json.dumps({"remote-endpoint": "unix:///run/k.sock",
                                             "runtime-hooks": ["PreCreateContainer"]}))
    (d / "koordlet.json.tmp").write_text("{half")                 # a file being written: not a registration
    caller = HookCaller(str(d))
    with caplog.at_level(logging.WARNING, logger="koordinator.sim.hooks"):
        for _ in range(2):
            [server] = caller.servers("PreCreateContainer")
            assert (server.name, server.endpoint, server.failure_policy) == ("good.json", "/run/k.sock", "Ignore")
        assert caller.servers("PreRunPodSandbox") == []
    assert [r.getMessage() for r in caplog.records] == [
        f"invalid hook server registration {d}/bad.json: failure-policy: 'Never': want Fail or Ignore"]

    assert format_environ({"A": "1", "B": "x=y"}) == b"A=1\0B=x=y\0"
    assert parse_environ(b"A=1\0B=x=y\0") == {"A": "1", "B": "x=y"}
