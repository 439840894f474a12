"""The containerd harness against a real containerd: CRI answers, a pod sandbox with a cgroup parent and a container
with resources run, containerd's stored OCI spec and the cgroup files on disk hold those resources, and stopping
the harness leaves no shim, mount, cgroup directory or temp dir behind."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import grpc
import pytest

from tests.containerd_harness import (TEST_IMAGE, Containerd, api, container_config, containerd,  # noqa: F401
                                      containerd_problem, mounts_under, runtime_spec, shim_pids)
from tests.waiting import wait_until

MiB = 1 << 20
CPU = Path("/sys/fs/cgroup/cpu")
CPUSET = Path("/sys/fs/cgroup/cpuset")
MEMORY = Path("/sys/fs/cgroup/memory")


def test_cri_version_and_the_test_image(containerd):
    pb = api()
    version = containerd.runtime.Version(pb.VersionRequest(), timeout=10)
    assert version.runtime_name == "containerd"
    assert version.runtime_api_version == "v1"
    status = containerd.images.ImageStatus(pb.ImageStatusRequest(image=pb.ImageSpec(image=TEST_IMAGE)), timeout=10)
    assert TEST_IMAGE in status.image.repo_tags
    assert containerd.address.startswith("/tmp/kc-") and len(containerd.address) < 108
    assert TEST_IMAGE in containerd.ctr("images", "ls", "-q").split()


@pytest.mark.skipif(not CPU.joinpath("cpu.shares").exists(), reason="needs the cgroup v1 cpu hierarchy")
def test_sandbox_and_container_with_resources(containerd):
    pb, rt = api(), containerd.runtime
    uid = str(uuid.uuid4())
    parent = containerd.cgroup_parent("besteffort", uid)
    assert parent == f"/{containerd.cgroup_root}/besteffort/pod{uid}"
    config = containerd.sandbox_config("harness-pod", "default", uid, cgroup_parent=parent,
                                       labels={"app": "harness"}, annotations={"note": "sandbox"})
    sandbox_id = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config), timeout=60).pod_sandbox_id
    status = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id), timeout=10).status
    assert status.state == pb.SANDBOX_READY
    assert status.metadata.uid == uid and status.labels["app"] == "harness"
    sandbox_spec = runtime_spec(containerd.address, sandbox_id)
    assert sandbox_spec["linux"]["cgroupsPath"] == f"{parent}/{sandbox_id}"
    assert sandbox_spec["annotations"]["io.kubernetes.cri.container-type"] == "sandbox"
    assert CPU.joinpath(parent.lstrip("/"), sandbox_id).is_dir()

    resources = pb.LinuxContainerResources(cpu_shares=512, cpu_quota=50000, cpu_period=100000,
                                           memory_limit_in_bytes=64 * MiB, cpuset_cpus="0")
    cconfig = container_config("main", envs={"HELLO": "world"}, annotations={"note": "container"},
                               resources=resources)
    container_id = rt.CreateContainer(pb.CreateContainerRequest(pod_sandbox_id=sandbox_id, config=cconfig,
                                                                sandbox_config=config), timeout=60).container_id
    rt.StartContainer(pb.StartContainerRequest(container_id=container_id), timeout=60)
    cstatus = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=container_id), timeout=10).status
    assert cstatus.state == pb.CONTAINER_RUNNING
    assert cstatus.image.image == TEST_IMAGE

    spec = runtime_spec(containerd.address, container_id)
    assert spec["linux"]["cgroupsPath"] == f"{parent}/{container_id}"
    res = spec["linux"]["resources"]
    assert res["cpu"]["shares"] == 512
    assert res["cpu"]["quota"] == 50000
    assert res["cpu"]["period"] == 100000
    assert res["cpu"]["cpus"] == "0"
    assert res["memory"]["limit"] == 64 * MiB
    assert "HELLO=world" in spec["process"]["env"]
    assert spec["process"]["args"][0] == "/bin/sh"  # the image's entrypoint
    assert spec["annotations"]["io.kubernetes.cri.sandbox-id"] == sandbox_id

    cgroup = parent.lstrip("/") + "/" + container_id
    assert CPU.joinpath(cgroup, "cpu.shares").read_text().strip() == "512"
    assert CPU.joinpath(cgroup, "cpu.cfs_quota_us").read_text().strip() == "50000"
    assert CPU.joinpath(cgroup, "cpu.cfs_period_us").read_text().strip() == "100000"
    if MEMORY.joinpath("memory.limit_in_bytes").exists():
        assert MEMORY.joinpath(cgroup, "memory.limit_in_bytes").read_text().strip() == str(64 * MiB)
    if CPUSET.joinpath("cpuset.cpus").exists():
        assert CPUSET.joinpath(cgroup, "cpuset.cpus").read_text().strip() == "0"
    pids = CPU.joinpath(cgroup, "cgroup.procs").read_text().split()
    assert pids, "the container's processes are in its cgroup"
    assert shim_pids(containerd.address), "a shim serves the pod"

    # SIGTERM stops the image's entrypoint at once (a timeout of 30 s would be the SIGKILL fallback)
    rt.StopContainer(pb.StopContainerRequest(container_id=container_id, timeout=30), timeout=60)
    cstatus = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=container_id), timeout=10).status
    assert cstatus.state == pb.CONTAINER_EXITED
    assert cstatus.exit_code == 0, "the entrypoint traps SIGTERM and exits 0"
    rt.RemoveContainer(pb.RemoveContainerRequest(container_id=container_id), timeout=60)
    with pytest.raises(grpc.RpcError) as err:
        rt.ContainerStatus(pb.ContainerStatusRequest(container_id=container_id), timeout=10)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert not CPU.joinpath(cgroup).exists()

    rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    status = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=sandbox_id), timeout=10).status
    assert status.state == pb.SANDBOX_NOTREADY
    rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    listed = rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=10).items
    assert sandbox_id not in [s.id for s in listed]
    assert not shim_pids(containerd.address), "the pod's shim exits with its sandbox"


def test_container_command_exit_code_and_log(containerd):
    pb, rt = api(), containerd.runtime
    uid = str(uuid.uuid4())
    config = containerd.sandbox_config("logs", "default", uid, cgroup_parent=containerd.cgroup_parent("burstable"))
    sandbox_id = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config), timeout=60).pod_sandbox_id
    container_id = rt.CreateContainer(pb.CreateContainerRequest(
        pod_sandbox_id=sandbox_id, sandbox_config=config,
        config=container_config("echo", command=["/bin/sh", "-c", 'echo "hello $WHO"; exit 3'], envs={"WHO": "cri"})),
        timeout=60).container_id
    rt.StartContainer(pb.StartContainerRequest(container_id=container_id), timeout=60)

    def exited():
        status = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=container_id), timeout=10).status
        return status if status.state == pb.CONTAINER_EXITED else None

    status = wait_until(exited, message="the container to exit")
    assert status.exit_code == 3
    assert status.log_path == os.path.join(config.log_directory, "echo_0.log")
    assert Path(status.log_path).read_text().endswith(" stdout F hello cri\n")
    rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox_id), timeout=60)
    assert not rt.ListContainers(pb.ListContainersRequest(), timeout=10).containers


def test_stop_leaves_nothing_behind():
    """A pod left running when the harness stops: its sandbox, container, shim, mounts, cgroups and dir all go."""
    problem = containerd_problem()
    if problem:
        pytest.skip(problem)
    pb = api()
    with Containerd() as c:
        rt, uid = c.runtime, str(uuid.uuid4())
        parent = c.cgroup_parent("burstable", uid)
        config = c.sandbox_config("left-behind", "default", uid, cgroup_parent=parent)
        sandbox_id = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config), timeout=60).pod_sandbox_id
        container_id = rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=container_config("c"), sandbox_config=config),
            timeout=60).container_id
        rt.StartContainer(pb.StartContainerRequest(container_id=container_id), timeout=60)
        address, tmp, cgroups = c.address, str(c.dir), c.cgroup_dirs()
        assert shim_pids(address) and cgroups
        assert c.log_path.is_file() and os.path.exists(address)
    assert not shim_pids(address)
    assert not any(address in " ".join(_cmdline(p)) for p in _all_pids())
    assert not mounts_under(tmp)
    assert not os.path.exists(tmp)
    assert not any(d.exists() for d in cgroups)
    assert c.dir is None


def test_stop_cleans_up_after_containerd_is_killed():
    """containerd killed with its pods running: stop() kills the shim and the containers, unmounts their rootfs,
    removes the cgroups and the dir, and says what it had to clean up itself."""
    problem = containerd_problem()
    if problem:
        pytest.skip(problem)
    pb = api()
    c = Containerd().start()
    try:
        rt, uid = c.runtime, str(uuid.uuid4())
        parent = c.cgroup_parent("guaranteed", uid)
        assert parent == f"/{c.cgroup_root}/pod{uid}"
        config = c.sandbox_config("orphaned", "default", uid, cgroup_parent=parent)
        sandbox_id = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config), timeout=60).pod_sandbox_id
        container_id = rt.CreateContainer(pb.CreateContainerRequest(
            pod_sandbox_id=sandbox_id, config=container_config("c", command=["/bin/sleep", "100000"]),
            sandbox_config=config), timeout=60).container_id
        rt.StartContainer(pb.StartContainerRequest(container_id=container_id), timeout=60)
        container_pids = CPU.joinpath(parent.lstrip("/"), container_id, "cgroup.procs").read_text().split()
        address, tmp, cgroups = c.address, str(c.dir), c.cgroup_dirs()
        assert container_pids and mounts_under(tmp)
        os.kill(c.pid, 9)
    finally:
        c.stop()
    assert any(x.startswith("shim ") for x in c.leftovers), c.leftovers
    assert any(x.startswith("mount ") for x in c.leftovers), c.leftovers
    assert not shim_pids(address)
    assert not any(os.path.exists(f"/proc/{p}") for p in container_pids)
    assert not mounts_under(tmp) and not os.path.exists(tmp)
    assert not any(d.exists() for d in cgroups)


def _all_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []
