"""Reservation, NodeNUMAResource and DeviceShare end to end on ``koordinator local`` (one simulated 2×8-core SMT
node with two fake GPUs), driven with kubectl as a user would: the shipped scheduler configuration places the
pods and writes the allocations on them; the simulated kubelet creates the containers through the koordlet's
hook server, whose cpuset and GPU hooks apply those allocations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from koordinator.apis import quantity
from koordinator.apis.cpuset import parse_cpuset
from koordinator.apis.device import ANNOTATION_DEVICE_ALLOCATED, ENV_NVIDIA_VISIBLE_DEVICES
from koordinator.apis.extension import ANNOTATION_RESOURCE_STATUS, pod_requests
from koordinator.apis.reservation import ANNOTATION_RESERVATION_ALLOCATED
from tests.local_cluster import Cluster, running_cluster
from tests.waiting import wait_until

NODE = "sim-node-0"
WAIT = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("local-placement"), "--nodes", "1", "--gpus-per-node", "2",
                         "--koordlet-feature-gates", "GPUEnvInject=true") as c:
        yield c


def pod(name: str, *, cpu: str, memory: str = "256Mi", labels: dict | None = None, annotations: dict | None = None,
        extra: dict | None = None, guaranteed: bool = False, priority_class: str = "") -> str:
    requests = {"cpu": cpu, "memory": memory, **(extra or {})}
    resources: dict = {"requests": requests}
    if guaranteed or extra:
        resources["limits"] = dict(requests) if guaranteed else dict(extra or {})
    spec: dict = {"schedulerName": "koord-scheduler",
                  "containers": [{"name": "main", "image": "busybox", "resources": resources}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                       "metadata": {"name": name, "namespace": "default", "labels": labels or {},
                                    "annotations": annotations or {}}})


def reservation(name: str, cpu: str, owners: list, **spec: object) -> str:
    template = {"metadata": {"namespace": "default"},
                "spec": {"schedulerName": "koord-scheduler",
                         "containers": [{"name": "main", "resources": {"requests": {"cpu": cpu}}}]}}
    return json.dumps({"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
                       "metadata": {"name": name}, "spec": {"template": template, "owners": owners, **spec}})


def annotation(cluster: Cluster, name: str, key: str) -> str:
    return (cluster.client.get("Pod", name, "default")["metadata"].get("annotations") or {}).get(key, "")


def phase(cluster: Cluster, name: str) -> str:
    return (cluster.client.get("Reservation", name).get("status") or {}).get("phase", "")


def running_container(cluster: Cluster, name: str) -> str:
    """The id of the pod's container once the simulated kubelet runs it ("" before)."""
    statuses = (cluster.client.get("Pod", name, "default").get("status") or {}).get("containerStatuses") or []
    cid = (statuses[0].get("containerID") or "") if statuses and statuses[0].get("ready") else ""
    return cid.split("://", 1)[-1]


def node_tree(cluster: Cluster) -> Path:
    return cluster.lp.data_dir / "nodes" / NODE


def free_cpu_milli(cluster: Cluster) -> int:
    """The node's allocatable cpu minus what its pods request (the scheduler's view, reservations aside)."""
    node = cluster.client.get("Node", NODE)
    used = sum(pod_requests(p).get("cpu", 0) for p in cluster.client.list("Pod").get("items", [])
               if (p.get("spec") or {}).get("nodeName") == NODE
               and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))
    return quantity.milli_value(node["status"]["allocatable"]["cpu"]) - used


def test_an_lsr_pod_gets_full_physical_cores_on_one_numa_node(cluster):
    cluster.apply(pod("lsr", cpu="4", memory="1Gi", guaranteed=True, priority_class="koord-prod",
                      labels={"koordinator.sh/qosClass": "LSR"}))
    wait_until(lambda: cluster.node_of("lsr", "default"), WAIT, "lsr bound")
    status = json.loads(annotation(cluster, "lsr", ANNOTATION_RESOURCE_STATUS))
    cpus = set(parse_cpuset(status["cpuset"]))
    # 2 sockets × 8 cores × 2 threads, numbered as Linux does: cpu i and i+16 are one core's threads,
    # cpus 0-7 (and 16-23) are NUMA node 0.
    assert len(cpus) == 4
    assert {c % 16 // 8 for c in cpus} in ({0}, {1}), cpus                    # one NUMA node
    assert all((c + 16 if c < 16 else c - 16) in cpus for c in cpus), cpus    # whole cores

    # The simulated container was created with that cpuset (the koordlet's cpuset hook answered it).
    cid = wait_until(lambda: running_container(cluster, "lsr"), WAIT, "lsr running")
    [cpuset_file] = [p for p in (node_tree(cluster) / "cgroup").rglob("cpuset.cpus") if cid in str(p.parent)]
    assert set(parse_cpuset(cpuset_file.read_text().strip())) == cpus

    # A second one gets other cores.
    cluster.apply(pod("lsr-2", cpu="4", memory="1Gi", guaranteed=True, priority_class="koord-prod",
                      labels={"koordinator.sh/qosClass": "LSR"}))
    wait_until(lambda: annotation(cluster, "lsr-2", ANNOTATION_RESOURCE_STATUS), WAIT, "lsr-2 bound")
    other = set(parse_cpuset(json.loads(annotation(cluster, "lsr-2", ANNOTATION_RESOURCE_STATUS))["cpuset"]))
    assert len(other) == 4 and not other & cpus


def test_fractional_gpus_are_shared_and_visible_in_the_container(cluster):
    share = {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}
    minors = {}
    # LeastAllocated (Koordinator's default): the first two go to the emptiest GPU each, the third shares.
    for name in ("gpu-a", "gpu-b", "gpu-c"):
        cluster.apply(pod(name, cpu="500m", extra=share))
        raw = wait_until(lambda name=name: annotation(cluster, name, ANNOTATION_DEVICE_ALLOCATED), WAIT,
                         f"{name} allocated")
        [gpu] = json.loads(raw)["gpu"]
        assert gpu["resources"] == {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory": "8Gi",
                                    "koordinator.sh/gpu-memory-ratio": "50"}
        assert gpu["id"].startswith("GPU-")
        minors[name] = gpu["minor"]
    assert minors == {"gpu-a": 0, "gpu-b": 1, "gpu-c": 0}

    # Two GPUs of 100 each are now 50 + 100 used: a whole GPU fits no more.
    cluster.apply(pod("gpu-whole", cpu="500m", extra={"nvidia.com/gpu": "1"}))
    message = wait_until(lambda: cluster.unschedulable("gpu-whole", "default"), WAIT, "gpu-whole unschedulable")
    assert "Insufficient gpu devices" in message, message

    for name, minor in minors.items():
        cid = wait_until(lambda name=name: running_container(cluster, name), WAIT, f"{name} running")
        environ = (node_tree(cluster) / "containers" / cid / "environ").read_bytes()
        assert f"{ENV_NVIDIA_VISIBLE_DEVICES}={minor}".encode() in environ.split(b"\0")
    cluster.kubectl("delete", "pod", "gpu-whole", "--wait=false")


def test_a_reservation_holds_room_for_its_owners_until_used_or_expired(cluster):
    cluster.apply(reservation("r-demo", "4", [{"labelSelector": {"matchLabels": {"app": "res-demo"}}}], ttl="1h"))
    wait_until(lambda: phase(cluster, "r-demo") == "Available", WAIT, "r-demo Available")
    status = cluster.client.get("Reservation", "r-demo")["status"]
    assert status["nodeName"] == NODE and status["allocatable"] == {"cpu": "4"}

    # Everything else on the node taken: only the reserved room is left, and an outsider cannot have it.
    cluster.apply(pod("filler", cpu=f"{free_cpu_milli(cluster) - 4000}m"))
    wait_until(lambda: cluster.node_of("filler", "default"), WAIT, "filler bound")
    cluster.apply(pod("outsider", cpu="1"))
    message = wait_until(lambda: cluster.unschedulable("outsider", "default"), WAIT, "outsider unschedulable")
    assert "Insufficient cpu" in message, message

    # The owner lands in it and consumes it (allocateOnce: the Reservation is then Succeeded).
    cluster.apply(pod("owner", cpu="4", labels={"app": "res-demo"}))
    wait_until(lambda: cluster.node_of("owner", "default"), WAIT, "owner bound")
    allocated = json.loads(annotation(cluster, "owner", ANNOTATION_RESERVATION_ALLOCATED))
    assert allocated["name"] == "r-demo"
    wait_until(lambda: phase(cluster, "r-demo") == "Succeeded", WAIT, "r-demo Succeeded")
    assert cluster.node_of("outsider", "default") == ""

    # A Reservation for someone else keeps the owner's room once it leaves; when it expires the room is free.
    cluster.kubectl("delete", "pod", "owner", "--wait=true")
    expires = (datetime.now(timezone.utc) + timedelta(seconds=20)).strftime("%Y-%m-%dT%H:%M:%SZ")
    cluster.apply(reservation("r-expiring", "4", [{"object": {"name": "nobody", "namespace": "default"}}],
                              expires=expires))
    wait_until(lambda: phase(cluster, "r-expiring") in ("Available", "Failed"), WAIT, "r-expiring placed")
    wait_until(lambda: phase(cluster, "r-expiring") == "Failed", WAIT, "r-expiring expired")
    ready = [c for c in cluster.client.get("Reservation", "r-expiring")["status"]["conditions"]
             if c["type"] == "Ready"]
    assert ready[0]["reason"] == "Expired"
    wait_until(lambda: cluster.node_of("outsider", "default"), WAIT, "outsider bound once the room is free")
    cluster.kubectl("delete", "pod", "filler", "outsider", "--wait=false")


def test_bad_input_is_refused_naming_the_field(cluster):
    # A Reservation with no owners: the API server refuses it.
    proc = cluster.kubectl("apply", "-f", "-", input=reservation("no-owners", "1", []))
    assert proc.returncode != 0 and "spec.owners" in proc.stderr, proc.stderr

    # A negative gpu-core: refused like any negative request.
    proc = cluster.kubectl("apply", "-f", "-", input=pod("negative-gpu", cpu="100m",
                                                         extra={"koordinator.sh/gpu-core": "-50"}))
    assert proc.returncode != 0, proc.stdout
    assert "resources.requests[koordinator.sh/gpu-core]: Invalid value: \"-50\"" in proc.stderr, proc.stderr

    # A malformed resource-spec: the pod stays Pending, the condition and the Event name the annotation.
    cluster.apply(pod("bad-spec", cpu="1", guaranteed=True, priority_class="koord-prod",
                      labels={"koordinator.sh/qosClass": "LSR"},
                      annotations={"scheduling.koordinator.sh/resource-spec": '{"preferredCPUBindPolicy": 5}'}))
    message = wait_until(lambda: cluster.unschedulable("bad-spec", "default"), WAIT, "bad-spec unschedulable")
    assert "scheduling.koordinator.sh/resource-spec" in message and "preferredCPUBindPolicy" in message, message
    wait_until(lambda: any("resource-spec" in m for m in cluster.events("bad-spec", "default", "FailedScheduling")),
               WAIT, "the FailedScheduling event")  # events are written after the condition, asynchronously

    # gpu-core of 101 (above 100, not a multiple of it): the request is invalid.
    cluster.apply(pod("gpu-101", cpu="100m", extra={"koordinator.sh/gpu-core": "101",
                                                    "koordinator.sh/gpu-memory-ratio": "101"}))
    message = wait_until(lambda: cluster.unschedulable("gpu-101", "default"), WAIT, "gpu-101 unschedulable")
    assert "koordinator.sh/gpu-core" in message and "101" in message, message
