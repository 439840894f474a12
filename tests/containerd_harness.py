"""A private, real containerd for tests: its own config, root, state and socket under /tmp/kc-*, the CRI plugin on,
a busybox test image built here (no network, no docker) and imported with ``ctr``, and CRI helpers.

    from tests.containerd_harness import api, container_config, containerd, runtime_spec  # noqa: F401

    def test_x(containerd):                          # the module-scoped fixture: one containerd per test module
        pb, rt = api(), containerd.runtime           # CRI v1 messages; RuntimeServiceStub on containerd's socket
        parent = containerd.cgroup_parent("besteffort")
        config = containerd.sandbox_config("p", "ns", "uid-1", cgroup_parent=parent)
        sandbox_id = rt.RunPodSandbox(pb.RunPodSandboxRequest(config=config)).pod_sandbox_id
        ...
        spec = runtime_spec(containerd.address, container_id)   # the OCI spec containerd stored

containerd runs with the ``native`` snapshotter, runc (``io.containerd.runc.v2``) with the cgroupfs driver and a runc
root of its own, and no CNI: sandboxes use the host network (:func:`sandbox_config` does that). The image's entrypoint
is a shell that sleeps and exits on SIGTERM (as PID 1 of a container it must trap the signal; a bare ``sleep`` as
PID 1 ignores SIGTERM and is only stopped by the SIGKILL after StopContainer's timeout).

:meth:`Containerd.stop` removes every pod sandbox through CRI, stops containerd, kills any shim of this instance
left over and the container processes it leaves, unmounts whatever is still mounted under the temp dir, removes the
cgroup directories under :meth:`Containerd.cgroup_parent`'s root and the temp dir.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import platform
import shutil
import signal
import struct
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

TEST_IMAGE = "docker.io/koordinator/test-busybox:1"
NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin works in
BUSYBOX = "/bin/busybox"
BINARIES = ("containerd", "containerd-shim-runc-v2", "runc", "ctr")
ENTRYPOINT = ["/bin/sh", "-c", "trap 'exit 0' TERM INT; sleep 2147483647 & wait"]
START_TIMEOUT = 30.0
# Plugins that are slow, fail, or are of no use here: other snapshotters (the CRI plugin uses `native`), tracing.
# (Not io.containerd.runtime.v1.linux: containerd 1.6's tasks service, and so CRI, will not load without it.)
DISABLED_PLUGINS = [
    "io.containerd.snapshotter.v1.aufs",
    "io.containerd.snapshotter.v1.btrfs",
    "io.containerd.snapshotter.v1.devmapper",
    "io.containerd.snapshotter.v1.zfs",
    "io.containerd.snapshotter.v1.overlayfs",
    "io.containerd.tracing.processor.v1.otlp",
    "io.containerd.internal.v1.tracing",
]
_SHIM_SOCKET_DIR = "/run/containerd/s"  # containerd 1.6 puts shim sockets here whatever its state dir
# containerd runs under this small parent, a child subreaper: the shims containerd daemonises (and the containers of
# a shim that dies) are re-parented to it instead of to PID 1, and it reaps them at once (this VM's init reaps
# orphans late: `[containerd-shim] <defunct>` would linger). It forwards SIGTERM/SIGINT to containerd, sends it
# SIGTERM if the test process dies, and exits when containerd and every adopted process have exited.
_REAPER = r"""
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
libc.prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
pid = os.posix_spawnp(sys.argv[1], sys.argv[1:], os.environ, file_actions=[(os.POSIX_SPAWN_DUP2, 2, 1)])
print(pid, flush=True)
def forward(sig, frame):
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, forward)
code = 1
while True:
    try:
        child, status = os.waitpid(-1, 0)
    except ChildProcessError:
        break
    if child == pid:
        code = os.waitstatus_to_exitcode(status)
sys.exit(code)
"""


# -- can it run here? ----------------------------------------------------------------------------------------------

def _is_static_elf(path: str) -> bool:
    """True when ``path`` is an ELF executable without a PT_INTERP program header (statically linked)."""
    with open(path, "rb") as f:
        head = f.read(64)
        if len(head) < 64 or head[:4] != b"\x7fELF":
            return False
        is64, endian = head[4] == 2, "<" if head[5] == 1 else ">"
        if is64:
            phoff, = struct.unpack_from(endian + "Q", head, 32)
            phentsize, phnum = struct.unpack_from(endian + "HH", head, 54)
        else:
            phoff, = struct.unpack_from(endian + "I", head, 28)
            phentsize, phnum = struct.unpack_from(endian + "HH", head, 42)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    for i in range(phnum):
        p_type, = struct.unpack_from(endian + "I", table, i * phentsize)
        if p_type == 3:  # PT_INTERP
            return False
    return True


def _cgroup_mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fstype, options) of every cgroup (v1) and cgroup2 mount."""
    mounts = []
    with open("/proc/self/mounts") as f:
        for line in f:
            fields = line.split()
            if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
                mounts.append((fields[1].replace("\\040", " "), fields[2], set(fields[3].split(","))))
    return mounts


def containerd_problem() -> str | None:
    """Why a private containerd cannot run on this machine, or None when it can."""
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return f"containerd tests need {', '.join(missing)} on PATH (Debian: containerd, runc)"
    if not os.path.isfile(BUSYBOX):
        return f"containerd tests need a static {BUSYBOX} for the test image (Debian: busybox-static)"
    if not _is_static_elf(BUSYBOX):
        return f"{BUSYBOX} is not statically linked (install Debian's busybox-static)"
    if os.geteuid() != 0:
        return "containerd tests must run as root"
    if not _cgroup_mounts():
        return "no cgroup (v1) or cgroup2 file system is mounted"
    try:
        import grpc  # noqa: F401
    except ImportError:
        return "containerd tests need grpcio"
    return None


# -- the test image ------------------------------------------------------------------------------------------------

def _goarch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64", "armv7l": "arm",
            "armv6l": "arm", "i686": "386", "i386": "386", "ppc64le": "ppc64le", "s390x": "s390x",
            "riscv64": "riscv64"}.get(machine, machine)


def _layer_tar() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        def add(name: str, kind: bytes, mode: int, data: bytes = b"", target: str = "") -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime, info.uid, info.gid = kind, mode, 0, 0, 0
            info.linkname = target
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        for d, mode in (("bin", 0o755), ("dev", 0o755), ("etc", 0o755), ("proc", 0o555), ("sys", 0o555),
                        ("tmp", 0o1777), ("root", 0o700)):
            add(d, tarfile.DIRTYPE, mode)
        add("bin/busybox", tarfile.REGTYPE, 0o755, Path(BUSYBOX).read_bytes())
        for applet in ("sh", "sleep"):
            add(f"bin/{applet}", tarfile.SYMTYPE, 0o777, target="busybox")
        add("etc/passwd", tarfile.REGTYPE, 0o644, b"root:x:0:0:root:/root:/bin/sh\n")
        add("etc/group", tarfile.REGTYPE, 0o644, b"root:x:0:\n")
    return buf.getvalue()


def build_test_image(path: str | os.PathLike) -> Path:
    """Write an OCI image layout tar of :data:`TEST_IMAGE` (busybox from this machine) to ``path``."""
    layer = gzip.compress(raw := _layer_tar(), mtime=0)
    arch = _goarch()
    config = json.dumps({
        "architecture": arch, "os": "linux",
        "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                   "Entrypoint": ENTRYPOINT, "WorkingDir": "/"},
        "rootfs": {"type": "layers", "diff_ids": ["sha256:" + hashlib.sha256(raw).hexdigest()]},
        "history": [{"created_by": "tests/containerd_harness.py: busybox from " + BUSYBOX}],
    }, sort_keys=True).encode()

    def descriptor(media_type: str, blob: bytes) -> dict[str, Any]:
        return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(blob).hexdigest(), "size": len(blob)}

    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": descriptor("application/vnd.oci.image.config.v1+json", config),
        "layers": [descriptor("application/vnd.oci.image.layer.v1.tar+gzip", layer)],
    }, sort_keys=True).encode()
    tag = TEST_IMAGE.rpartition(":")[2]
    index = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{**descriptor("application/vnd.oci.image.manifest.v1+json", manifest),
                       "platform": {"architecture": arch, "os": "linux"},
                       # containerd's importer names the image after io.containerd.image.name when present;
                       # ref.name (the tag) with `ctr images import --base-name <repo>` gives the same name.
                       "annotations": {"io.containerd.image.name": TEST_IMAGE,
                                       "org.opencontainers.image.ref.name": tag}}],
    }, sort_keys=True).encode()
    path = Path(path)
    with tarfile.open(path, "w") as tar:
        def add(name: str, data: bytes, kind: bytes = tarfile.REGTYPE) -> None:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = kind, 0o755 if kind == tarfile.DIRTYPE else 0o644, 0
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data) if data else None)

        add("oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add("index.json", index)
        add("blobs", b"", tarfile.DIRTYPE)
        add("blobs/sha256", b"", tarfile.DIRTYPE)
        for blob in (layer, config, manifest):
            add("blobs/sha256/" + hashlib.sha256(blob).hexdigest(), blob)
    return path


# -- CRI helpers (the generated runtime.v1 modules) ----------------------------------------------------------------

_channels: dict[str, Any] = {}


def _channel(address: str) -> Any:
    import grpc

    ch = _channels.get(address)
    if ch is None:
        ch = _channels[address] = grpc.insecure_channel(f"unix://{address}")
    return ch


def close_channel(address: str) -> None:
    """Close the channel :func:`runtime_stub` and :func:`image_stub` share for ``address`` (if any)."""
    ch = _channels.pop(address, None)
    if ch is not None:
        ch.close()


def api() -> Any:
    """The generated CRI v1 message module (``runtime.v1``)."""
    from koordinator.grpcapi.runtime.v1 import api_pb2

    return api_pb2


def runtime_stub(address: str) -> Any:
    """A ``RuntimeServiceStub`` on the unix socket ``address`` (one channel per address, closed by
    :meth:`Containerd.stop` for its own)."""
    from koordinator.grpcapi.runtime.v1 import api_pb2_grpc

    return api_pb2_grpc.RuntimeServiceStub(_channel(address))


def image_stub(address: str) -> Any:
    """An ``ImageServiceStub`` on the unix socket ``address``."""
    from koordinator.grpcapi.runtime.v1 import api_pb2_grpc

    return api_pb2_grpc.ImageServiceStub(_channel(address))


def sandbox_config(name: str, namespace: str, uid: str, *, labels: dict[str, str] | None = None,
                   annotations: dict[str, str] | None = None, cgroup_parent: str = "", log_directory: str = "",
                   attempt: int = 0, pid: int | None = None) -> Any:
    """A ``PodSandboxConfig`` on the host network (no CNI here). As the kubelet's: a pid namespace per container
    (``pid``: a ``NamespaceMode``, CONTAINER when None), the IPC namespace of the pod. A container's command is then
    PID 1 of its namespace and ignores SIGTERM unless it traps it (the image's entrypoint does; a bare ``sleep``
    stops only at StopContainer's timeout, so stop such containers with ``timeout=0``)."""
    pb = api()
    return pb.PodSandboxConfig(
        metadata=pb.PodSandboxMetadata(name=name, namespace=namespace, uid=uid, attempt=attempt),
        # no hostname: a host-network sandbox shares the host's UTS namespace, and runc refuses to set it
        log_directory=log_directory, labels=labels or {}, annotations=annotations or {},
        linux=pb.LinuxPodSandboxConfig(
            cgroup_parent=cgroup_parent,
            security_context=pb.LinuxSandboxSecurityContext(
                namespace_options=pb.NamespaceOption(network=pb.NODE, pid=pb.CONTAINER if pid is None else pid,
                                                     ipc=pb.POD))))


def container_config(name: str, *, command: list[str] | None = None, args: list[str] | None = None,
                     envs: dict[str, str] | None = None, labels: dict[str, str] | None = None,
                     annotations: dict[str, str] | None = None, resources: Any = None, attempt: int = 0) -> Any:
    """A ``ContainerConfig`` of :data:`TEST_IMAGE`; its log goes to ``<name>_<attempt>.log`` in the sandbox's log
    directory (containerd creates it). ``command`` None: the image's entrypoint."""
    pb = api()
    config = pb.ContainerConfig(
        metadata=pb.ContainerMetadata(name=name, attempt=attempt), image=pb.ImageSpec(image=TEST_IMAGE),
        command=command or [], args=args or [], envs=[pb.KeyValue(key=k, value=v) for k, v in (envs or {}).items()],
        labels=labels or {}, annotations=annotations or {}, log_path=f"{name}_{attempt}.log")
    if resources is not None:
        config.linux.resources.CopyFrom(resources)
    return config


def runtime_spec(address: str, container_id: str) -> dict[str, Any]:
    """The OCI runtime spec containerd stored for a container or a pod sandbox (CRI status, verbose)."""
    import grpc

    pb, rt = api(), runtime_stub(address)
    try:
        info = rt.ContainerStatus(pb.ContainerStatusRequest(container_id=container_id, verbose=True), timeout=10).info
    except grpc.RpcError as e:
        if e.code() != grpc.StatusCode.NOT_FOUND:
            raise
        info = rt.PodSandboxStatus(pb.PodSandboxStatusRequest(pod_sandbox_id=container_id, verbose=True),
                                   timeout=10).info
    return json.loads(info["info"])["runtimeSpec"]


# -- processes, mounts, cgroups ------------------------------------------------------------------------------------

def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return [a.decode(errors="replace") for a in f.read().split(b"\0") if a]
    except OSError:
        return []


def _pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit()]


def shim_pids(address: str) -> list[int]:
    """Pids of ``containerd-shim-runc-v2`` processes serving the containerd at ``address``."""
    found = []
    for pid in _pids():
        args = _cmdline(pid)
        if args and os.path.basename(args[0]) == "containerd-shim-runc-v2" and _arg(args, "-address") == address:
            found.append(pid)
    return found


def _arg(args: list[str], flag: str) -> str | None:
    for i, a in enumerate(args):
        if a in (flag, "-" + flag) and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(flag + "=") or a.startswith("-" + flag + "="):
            return a.split("=", 1)[1]
    return None


def mounts_under(path: str) -> list[str]:
    """Mount points at or below ``path`` (this mount namespace), deepest first."""
    prefix = path.rstrip("/") + "/"
    found = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            point = line.split()[4].encode().decode("unicode_escape")
            if point == path or point.startswith(prefix):
                found.append(point)
    return sorted(found, key=lambda p: p.count("/"), reverse=True)


def _umount(point: str) -> None:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.umount2(point.encode(), 2) != 0:  # MNT_DETACH
        err = ctypes.get_errno()
        if err not in (22, 2):  # EINVAL (not a mount point any more), ENOENT
            raise OSError(err, os.strerror(err), point)


def _wait(pred: Any, timeout: float, interval: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if pred():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(interval)


def _children(pid: int) -> list[tuple[int, list[str]]]:
    """(pid, command line) of the processes whose parent is ``pid``."""
    kids = []
    for p in _pids():
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            kids.append((p, _cmdline(p)))
    return kids


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# -- containerd ----------------------------------------------------------------------------------------------------

class Containerd:
    """A private containerd (CRI on) with :data:`TEST_IMAGE` imported; ``with Containerd() as c: ...``."""

    def __init__(self, *, import_image: bool = True) -> None:
        self.import_image = import_image
        self.dir: Path | None = None
        self.proc: subprocess.Popen | None = None  # the reaper, containerd's parent
        self.pid = 0  # containerd
        self._log: Any = None
        self.cgroup_root = f"kctest-{uuid.uuid4().hex[:12]}"
        self._cgroup_parents: list[str] = []
        self._run_dir_existed = True
        self.leftovers: list[str] = []  # what stop() had to kill or unmount itself
        self.start_seconds = 0.0
        self.import_seconds = 0.0

    # paths
    @property
    def address(self) -> str:
        """The gRPC unix socket (CRI RuntimeService and ImageService, and containerd's own API)."""
        assert self.dir is not None, "not started"
        return str(self.dir / "containerd.sock")

    @property
    def log_path(self) -> Path:
        assert self.dir is not None, "not started"
        return self.dir / "containerd.log"

    @property
    def config_path(self) -> Path:
        assert self.dir is not None, "not started"
        return self.dir / "config.toml"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def config(self) -> str:
        d = self.dir
        assert d is not None
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        q = json.dumps  # TOML basic strings are JSON strings for our values
        return f"""\
version = 2
root = {q(str(d / "root"))}
state = {q(str(d / "state"))}
temp = {q(str(d / "tmp"))}
disabled_plugins = {q(DISABLED_PLUGINS)}
oom_score = 0

[grpc]
  address = {q(self.address)}

[ttrpc]
  address = {q(self.address + ".ttrpc")}

[debug]
  address = ""
  level = "info"

[metrics]
  address = ""

[plugins]
  [plugins."io.containerd.internal.v1.opt"]
    path = {q(str(d / "opt"))}

  [{cri}]
    sandbox_image = {q(TEST_IMAGE)}
    disable_tcp_service = true
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
    enable_selinux = false
    disable_apparmor = true
    # Clamp oom_score_adj (the sandbox asks -998) to containerd's own: lowering it needs CAP_SYS_RESOURCE, which
    # root may lack (in this VM it does: runc fails "can't get final child's PID from pipe").
    restrict_oom_score_adj = true
    disable_hugetlb_controller = true
    tolerate_missing_hugetlb_controller = true
    systemd_cgroup = false
    stats_collect_period = 10

    [{cri}.containerd]
      snapshotter = "native"
      default_runtime_name = "runc"
      disable_snapshot_annotations = true

      [{cri}.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"

        [{cri}.containerd.runtimes.runc.options]
          SystemdCgroup = false
          Root = {q(str(d / "runc"))}

    [{cri}.cni]
      bin_dir = {q(str(d / "cni" / "bin"))}
      conf_dir = {q(str(d / "cni" / "net.d"))}
"""

    # lifecycle
    def start(self) -> "Containerd":
        problem = containerd_problem()
        if problem:
            raise RuntimeError(problem)
        started = time.monotonic()
        self._run_dir_existed = os.path.exists("/run/containerd")
        self.dir = Path(tempfile.mkdtemp(prefix="kc-", dir="/tmp"))
        try:
            for sub in ("root", "state", "tmp", "opt", "runc", "cni/bin", "cni/net.d", "pods"):
                (self.dir / sub).mkdir(parents=True, exist_ok=True)
            self.config_path.write_text(self.config())
            self._log = open(self.log_path, "ab")
            args = [sys.executable, "-c", _REAPER, "containerd", "--config", str(self.config_path)]
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self._log,
                                         start_new_session=True)
            assert self.proc.stdout is not None
            line = self.proc.stdout.readline()
            if not line.strip().isdigit():
                raise self._fail(f"the reaper did not start containerd ({line!r})")
            self.pid = int(line)
            self._wait_ready()
            self.start_seconds = time.monotonic() - started
            if self.import_image:
                started = time.monotonic()
                self.import_test_image()
                self.import_seconds = time.monotonic() - started
        except BaseException:
            self.stop()
            raise
        return self

    def _fail(self, what: str) -> RuntimeError:
        return RuntimeError(f"containerd: {what}; log {self.log_path}:\n{self.log_tail()}")

    def _wait_ready(self) -> None:
        import grpc

        deadline = time.monotonic() + START_TIMEOUT
        last: Exception | None = None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if not _alive(self.pid):
                raise self._fail("exited while starting")
            if os.path.exists(self.address):
                try:
                    # CRI's Version answers once the CRI plugin is initialised ("server is not initialized yet").
                    reply = self.runtime.Version(api().VersionRequest(), timeout=2)
                    if reply.runtime_name == "containerd":
                        return
                except grpc.RpcError as e:
                    last = e
                    if e.code() == grpc.StatusCode.UNIMPLEMENTED:  # served, but the CRI plugin failed to load
                        raise self._fail("the CRI plugin did not load") from None
            time.sleep(0.05)
        raise self._fail(f"CRI did not answer on {self.address} within {START_TIMEOUT:.0f} s ({last})")

    def ctr(self, *args: str, timeout: float = 60.0) -> str:
        """Run ``ctr --address <sock> -n k8s.io <args>`` and return its stdout."""
        cmd = ["ctr", "--address", self.address, "-n", NAMESPACE, *args]
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise self._fail(f"{' '.join(cmd)} exited {done.returncode}: {done.stderr.strip()}")
        return done.stdout

    def import_test_image(self) -> None:
        assert self.dir is not None
        tar = build_test_image(self.dir / "test-image.tar")
        repo = TEST_IMAGE.rpartition(":")[0]
        self.ctr("images", "import", "--snapshotter", "native", "--base-name", repo, str(tar))
        tar.unlink()
        # The CRI plugin learns about the image from containerd's events: wait until its ImageStatus knows it.
        request = api().ImageStatusRequest(image=api().ImageSpec(image=TEST_IMAGE))
        if not _wait(lambda: self.images.ImageStatus(request, timeout=10).HasField("image"), START_TIMEOUT, 0.05):
            raise self._fail(f"CRI does not see {TEST_IMAGE} after the import:\n{self.ctr('images', 'ls')}")

    def stop(self) -> None:
        """Remove every pod sandbox through CRI, stop containerd, then kill what is left of this instance (shims,
        container processes), unmount what is mounted under the temp dir, remove the cgroup directories and the temp
        dir. What had to be killed or unmounted is listed in :attr:`leftovers`. Safe to call twice; raises
        RuntimeError (after doing all it can) only when something could not be cleaned up."""
        if self.dir is None:
            return
        problems: list[str] = []
        address = self.address
        if self.pid and _alive(self.pid):
            try:
                self._remove_all_through_cri()
            except Exception as e:  # noqa: BLE001 - the rest still has to happen
                self.leftovers.append(f"CRI clean-up failed: {e}")
        close_channel(address)
        if self.pid and _alive(self.pid):
            os.kill(self.pid, signal.SIGTERM)
            if not _wait(lambda: not _alive(self.pid), 15):
                self.leftovers.append("containerd did not stop on SIGTERM")
                os.kill(self.pid, signal.SIGKILL)
                _wait(lambda: not _alive(self.pid), 10)
        for pid in shim_pids(address):
            self.leftovers.append(f"shim {pid}: {' '.join(_cmdline(pid))}")
            self._remove_shim_socket(address, _cmdline(pid))
            _kill(pid)
        if not _wait(lambda: not any(_alive(p) for p in shim_pids(address)), 10):
            problems.append(f"shims do not die: {shim_pids(address)}")
        if self.proc is not None:
            # Whatever the reaper still has once containerd and the shims are gone are container processes whose
            # shim died: kill them (a pid namespace dies with its init) until the reaper, with nothing left, exits.
            reaper = self.proc.pid

            def reaped() -> bool:
                for pid, args in _children(reaper):
                    if _alive(pid):
                        self.leftovers.append(f"process {pid}: {' '.join(args)}")
                        _kill(pid)
                return self.proc.poll() is not None

            if not _wait(reaped, 15):
                problems.append(f"processes the reaper adopted do not die: {_children(reaper)}")
                self.proc.kill()
                self.proc.wait()
            assert self.proc.stdout is not None
            self.proc.stdout.close()
            self.proc = None
        if self._log is not None:
            self._log.close()
            self._log = None
        self._remove_cgroups(problems)
        for point in mounts_under(str(self.dir)):
            self.leftovers.append(f"mount {point}")
            try:
                _umount(point)
            except OSError as e:
                problems.append(f"umount {point}: {e}")
        left = mounts_under(str(self.dir))
        if left:
            problems.append(f"still mounted (temp dir {self.dir} kept): {left}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        if not self._run_dir_existed:
            for d in (_SHIM_SOCKET_DIR, os.path.dirname(_SHIM_SOCKET_DIR)):
                try:
                    os.rmdir(d)
                except OSError:
                    pass
        if problems:
            raise RuntimeError("containerd harness clean-up: " + "; ".join(problems))

    def _remove_all_through_cri(self) -> None:
        import grpc

        pb, rt = api(), self.runtime
        try:
            rt.Version(pb.VersionRequest(), timeout=5)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNIMPLEMENTED:
                return  # no CRI plugin: no sandboxes
            raise
        for container in rt.ListContainers(pb.ListContainersRequest(), timeout=10).containers:
            rt.RemoveContainer(pb.RemoveContainerRequest(container_id=container.id), timeout=30)
        for sandbox in rt.ListPodSandbox(pb.ListPodSandboxRequest(), timeout=10).items:
            rt.StopPodSandbox(pb.StopPodSandboxRequest(pod_sandbox_id=sandbox.id), timeout=30)
            rt.RemovePodSandbox(pb.RemovePodSandboxRequest(pod_sandbox_id=sandbox.id), timeout=30)

    @staticmethod
    def _remove_shim_socket(address: str, args: list[str]) -> None:
        # containerd 1.6: unix://<socketRoot>/s/<sha256(<address>/<namespace>/<id>)>; a killed shim leaves it.
        ns, sid = _arg(args, "-namespace"), _arg(args, "-id")
        if ns and sid:
            digest = hashlib.sha256(os.path.join(address, ns, sid).encode()).hexdigest()
            try:
                os.unlink(os.path.join(_SHIM_SOCKET_DIR, digest))
            except OSError:
                pass

    # cgroups
    def cgroup_parent(self, qos: str = "besteffort", uid: str | None = None) -> str:
        """A cgroupfs parent of this instance's own, laid out as the kubelet's: ``/kctest-<x>/pod<uid>``
        (guaranteed) or ``/kctest-<x>/<qos>/pod<uid>`` (burstable, besteffort); ``uid`` is random when None.
        The directories (created by runc) are removed by :meth:`stop`."""
        uid = uid or str(uuid.uuid4())
        qos = qos.lower()
        parent = f"/{self.cgroup_root}/pod{uid}" if qos == "guaranteed" else f"/{self.cgroup_root}/{qos}/pod{uid}"
        self._cgroup_parents.append(parent)
        return parent

    def cgroup_dirs(self) -> list[Path]:
        """This instance's cgroup root directory in every mounted hierarchy where it exists."""
        return [Path(m) / self.cgroup_root for m, _, _ in _cgroup_mounts()
                if (Path(m) / self.cgroup_root).is_dir()]

    def _remove_cgroups(self, problems: list[str]) -> None:
        for root in self.cgroup_dirs():
            dirs = sorted((Path(dp) for dp, _, _ in os.walk(root)), key=lambda p: len(p.parts), reverse=True)
            for d in dirs:
                try:
                    pids = [int(p) for p in (d / "cgroup.procs").read_text().split()]
                except (OSError, ValueError):
                    pids = []
                for pid in pids:
                    self.leftovers.append(f"process {pid} in {d}: {' '.join(_cmdline(pid))}")
                    _kill(pid)
            for d in dirs:
                def gone(d: Path = d) -> bool:
                    try:
                        d.rmdir()
                        return True
                    except FileNotFoundError:
                        return True
                    except OSError:
                        return False

                if not _wait(gone, 10, 0.05):
                    problems.append(f"cannot remove cgroup {d}: {d.joinpath('cgroup.procs').read_text().split()}")

    # CRI conveniences
    @property
    def runtime(self) -> Any:
        return runtime_stub(self.address)

    @property
    def images(self) -> Any:
        return image_stub(self.address)

    def sandbox_config(self, name: str, namespace: str, uid: str, **kwargs: Any) -> Any:
        """:func:`sandbox_config` with the log directory in this instance's temp dir."""
        assert self.dir is not None
        kwargs.setdefault("log_directory", str(self.dir / "pods" / f"{namespace}_{name}_{uid}"))
        return sandbox_config(name, namespace, uid, **kwargs)

    def __enter__(self) -> "Containerd":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


@pytest.fixture(scope="module")
def containerd() -> Iterator[Containerd]:
    """A private containerd for the test module (skips where :func:`containerd_problem` says it cannot run)."""
    problem = containerd_problem()
    if problem:
        pytest.skip(problem)
    c = Containerd().start()
    try:
        yield c
    finally:
        c.stop()
