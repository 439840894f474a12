"""``koordinator local``: a whole Koordinator cluster on this machine, as one process tree.

It starts ``koordinator apiserver`` (with our CRDs) as a child process, creates the
``koordinator-system`` namespace and N simulated Nodes, starts ``koordinator simulate-nodes`` for
them (fake /proc, /sys and cgroup trees under ``DIR/nodes`` and a stand-in kubelet, see
:mod:`koordinator.sim`), then starts every role this build implements as a child
``koordinator --role=R`` against it — the koordlet once per simulated node, over that node's
tree — prints the kubeconfig and one status line per component (again whenever it changes), and
on Ctrl-C, SIGTERM or SIGHUP stops the roles (SIGTERM, then SIGKILL after ``--shutdown-timeout``), then
the simulator, then the API server.

Beside the roles it runs ``koordinator controllers`` (Deployments, ReplicaSets, Jobs ... make pods) and
installs what ``kubectl apply -k manifests`` installs on a cluster (the default ConfigMaps, colocation
on, and the koord-* PriorityClasses, from :mod:`koordinator.defaults`; created when absent, never
overwritten). What a role needs beyond that, ``local`` asks the role through the roles contract
(:mod:`roles`: ``local_setup(context) -> LocalSetup``) and imports no role package itself: the manager
creates its webhook Service, Endpoints and configurations and gets its webhook port, the scheduler
writes its two-profile ``--config`` (``koord-scheduler`` and ``default-scheduler``, so that every pod
gets scheduled), the koordlet runs once per node over the node's tree. ``koordinator local: up`` is
printed once everything is usable: every child ready (the manager's webhooks served) and every
role's ready check met (a first NodeMetric from every simulated node).

Layout of the data directory (reused on restart: the nodes are kept, the CRDs refreshed)::

    DIR/lock            flock()ed while a `local` (or `apiserver`) uses the directory
    DIR/state.db        the API server's SQLite database
    DIR/kubeconfig      for kubectl (cluster admin: DIR/token, system:masters)
    DIR/kubeconfigs/ROLE.kubeconfig  each role's own ServiceAccount token (re-minted at every start), and
                        controllers.kubeconfig, simulator.kubeconfig for local's stand-ins
    DIR/crds/           the CRDs written from koordinator.apis.schemas (works from an installed package)
    DIR/scheduler-config.yaml  the scheduler's --config (rewritten at every start by its local setup)
    DIR/webhook-certs/  the manager's serving certificate
    DIR/logs/NAME.log   each child's stdout and stderr (koordlet-<node>.log per koordlet)
    DIR/nodes/<node>/   each simulated node's proc, sys and cgroup trees (rebuilt on restart)
    DIR/koordlet/<node>/  each koordlet's --run-dir (metric cache, prediction checkpoints)

The API server serves HTTPS with authentication and RBAC (``--tls``: an admin token in ``DIR/token``,
the CA in the kubeconfig). ``local`` applies the roles' ServiceAccounts, ClusterRoles and bindings
(``manifests/rbac``, shipped in :mod:`koordinator.defaults`), mints a token for each role's ServiceAccount
and starts every role with a kubeconfig of its own: a role that lacks a permission is Forbidden here, as
it would be on a cluster. The admission webhooks are called by the API server itself, so they need no
identity; the scheduler's binds go through RBAC like every other request. The workload controllers and the
node simulator, which stand in for kube-controller-manager and the kubelets, run as ServiceAccounts of
``kube-system`` with ClusterRoles of what they use (``koordinator/defaults/local/kube-stand-ins.yaml``).

Every child runs in its own session, so a Ctrl-C in the terminal reaches only this process and
the shutdown order stays ours. A role that dies is reported on its status line; an API server
that dies takes everything down with exit code 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, TextIO

import koordinator_roles as roles
from koordinator.atomicfile import write_atomic
from koordinator.runtime.options import NODE_ROLES, parse_duration, parse_feature_gates, port
from koordinator.sim.command import gpu_count
from koordinator_roles import LocalContext, LocalSetup, SimulatedNode

log = logging.getLogger("koordinator.local")

NODE_PREFIX = "sim-node-"
SIMULATED_LABEL = "koordinator.sh/simulated-node"
SYSTEM_NAMESPACE = "koordinator-system"
SIMULATOR = "simulator"
NODE_CAPACITY = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
CONTROLLERS = "controllers"
# The ServiceAccounts (kube-system) of local's stand-ins for kube's components (koordinator.defaults).
STAND_IN_SERVICE_ACCOUNTS = {CONTROLLERS: "koordinator-controllers", SIMULATOR: "koordinator-node-simulator"}
STAND_IN_NAMESPACE = "kube-system"
# Each role's ServiceAccount in SYSTEM_NAMESPACE (manifests/rbac). A role not named here (runtime-proxy:
# a host binary that makes no API request; manifests/ deploys no identity for it) gets the admin kubeconfig.
ROLE_SERVICE_ACCOUNTS = {
    "manager": "koord-manager",
    "scheduler": "koord-scheduler",
    "descheduler": "koord-descheduler",
    "koordlet": "koordlet",
    "device-daemon": "koord-device-daemon",
}
# The roles' tokens are re-minted at every start; a year outlives any local session.
ROLE_TOKEN_SECONDS = 365 * 24 * 3600
_ARCH = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


# -- flags -----------------------------------------------------------------------------------------

def _node_count(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid node count {value!r}: not an integer") from None
    if not 0 <= n <= 1000:
        raise argparse.ArgumentTypeError(f"invalid node count {n}: must be 0-1000")
    return n


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``local`` subcommand to the ``koordinator`` parser (imports nothing heavy: apiserver uses it too)."""
    p = sub.add_parser(
        "local",
        help="run the embedded API server, simulated nodes and every implemented role on this machine",
        description="Run a whole Koordinator cluster on this machine: the embedded API server with the "
                    "Koordinator CRDs, N simulated nodes and every role this build implements, each a child "
                    "process. Ctrl-C stops everything.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--nodes", type=_node_count, default=3, metavar="N",
                   help="simulated Nodes to create (sim-node-0 ...); kept across restarts")
    p.add_argument("--data-dir", default=os.path.join(os.getcwd(), "koordinator-data"), metavar="DIR",
                   help="database, kubeconfig, CRDs and logs")
    p.add_argument("--port", type=port, default=6443, help="API server port; 0 picks a free one")
    p.add_argument("--shutdown-timeout", type=parse_duration, default="30s", metavar="DURATION",
                   help="on Ctrl-C, how long each child may take to exit before it is killed (30s, 1m, "
                        "or plain seconds)")
    p.add_argument("--ready-timeout", type=parse_duration, default="60s", metavar="DURATION",
                   help="how long to wait for everything to be ready before saying what is not (local keeps "
                        "waiting, and says `up` once it is)")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"),
                   help="log level of every child (their logs go to DATA_DIR/logs)")
    p.add_argument("--cgroup-version", type=int, choices=(1, 2), default=2,
                   help="cgroup hierarchy of the simulated nodes")
    p.add_argument("--cgroup-driver", choices=("systemd", "cgroupfs"), default="systemd",
                   help="cgroup driver (directory naming) of the simulated nodes")
    p.add_argument("--gpus-per-node", type=gpu_count, default=0, metavar="N",
                   help="simulated NVIDIA GPUs on every simulated node (a Device object, GPU labels, nvidia.com/gpu; "
                        "the Node annotation sim.koordinator.sh/gpus overrides it per node)")
    p.add_argument("--koordlet-feature-gates", type=_feature_gates, default="", metavar="A=true,B=false",
                   help="passed to every koordlet as its --feature-gates (e.g. MemoryEvict=true, CPUEvict=true: "
                        "the eviction gates are off by default, as in Koordinator)")
    return p


def _feature_gates(value: str) -> str:
    """``--koordlet-feature-gates``: checked for its form here (a gate the koordlet does not know is refused
    by the koordlet itself, which then exits 2 and shows as exited with its error)."""
    parse_feature_gates(value)
    return value


def run(args: argparse.Namespace) -> int:
    """Entry point of ``koordinator local``."""
    config = LocalConfig(data_dir=Path(args.data_dir).absolute(), nodes=args.nodes, port=args.port,
                         log_level=args.log_level, shutdown_timeout=args.shutdown_timeout,
                         ready_timeout=args.ready_timeout, cgroup_version=args.cgroup_version,
                         cgroup_driver=args.cgroup_driver, gpus_per_node=args.gpus_per_node,
                         feature_gates={"koordlet": args.koordlet_feature_gates} if args.koordlet_feature_gates else {})
    return LocalCluster(config).run()


# -- child processes -------------------------------------------------------------------------------

class ChildProcess:
    """A child process in its own session; its stdout and stderr go, line by line, to ``log_path``.

    ``on_line`` (if given) sees every output line, from the reader thread.
    """

    def __init__(self, name: str, argv: list[str], log_path: Path, *,
                 on_line: Callable[[str], None] | None = None, env: dict[str, str] | None = None,
                 pass_fds: tuple[int, ...] = ()) -> None:
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.on_line = on_line
        self.env = env
        self.pass_fds = pass_fds
        self.proc: subprocess.Popen[str] | None = None
        self.last_line = ""
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def start(self) -> None:
        """Start the child, its output copied to ``log_path`` by a reader thread."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ if self.env is None else self.env)
        env["PYTHONUNBUFFERED"] = "1"
        # Own session: a terminal's Ctrl-C goes to `local` alone, which then stops children in order.
        self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, errors="replace", env=env,
                                     start_new_session=True, pass_fds=self.pass_fds)
        self._reader = threading.Thread(target=self._copy_output, name=f"local-{self.name}-output", daemon=True)
        self._reader.start()
        log.debug("started name=%s pid=%d argv=%s", self.name, self.proc.pid, " ".join(self.argv))

    def _copy_output(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with open(self.log_path, "a", encoding="utf-8") as out:
            out.write(f"--- {_now()} {' '.join(self.argv)}\n")
            out.flush()
            for line in self.proc.stdout:
                out.write(line)
                out.flush()
                stripped = line.rstrip("\n")
                if stripped:
                    self.last_line = stripped
                if self.on_line is not None:
                    self.on_line(stripped)

    def poll(self) -> int | None:
        """The exit code, or None while it runs."""
        return self.proc.poll() if self.proc is not None else None

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the child's whole process group."""
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float, hurry: threading.Event | None = None) -> int | None:
        """Wait up to ``timeout`` seconds (less once ``hurry`` is set) for the exit code."""
        if self.proc is None:
            return None
        deadline = time.monotonic() + timeout
        while True:
            try:
                return self.proc.wait(timeout=max(0.0, min(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                if time.monotonic() >= deadline or (hurry is not None and hurry.is_set()):
                    return None

    def kill(self) -> int:
        """SIGKILL the process group and reap the child."""
        assert self.proc is not None
        self.signal(signal.SIGKILL)
        return self.proc.wait()

    def close(self) -> None:
        """After exit: kill what may remain of its process group, finish copying its output."""
        if self.proc is None:
            return
        if self.proc.poll() is not None:
            self.signal(signal.SIGKILL)  # anything the child left behind in its group
        if self._reader is not None:
            self._reader.join(5.0)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def stop_children(children: list[ChildProcess], timeout: float, hurry: threading.Event | None = None) -> dict[str, int]:
    """SIGTERM all of ``children`` at once, SIGKILL those still running after ``timeout``; name -> exit code."""
    for child in children:
        if child.poll() is None:
            child.signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    codes: dict[str, int] = {}
    for child in children:
        code = child.wait(max(0.0, deadline - time.monotonic()), hurry)
        if code is None:
            log.warning("child did not exit in time, killing name=%s pid=%s", child.name, child.pid)
            code = child.kill()
        child.close()
        codes[child.name] = code
    return codes


_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = (int(v) for v in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999  # Linux's default


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the child binds it a moment later), never the same twice
    in this process.

    Taken below the kernel's ephemeral range when there is room: the many client connections of a
    running cluster take their local ports from that range, and one of them could otherwise take the
    port between this call and the child's bind.
    """
    low, _ = _ephemeral_range()
    candidates = random.sample(range(10000, low), min(64, max(0, low - 10000)))
    with _handed_out_lock:
        for candidate in [*candidates, 0]:
            if candidate in _handed_out:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, candidate))
                except OSError:
                    continue
                chosen = s.getsockname()[1]
            if chosen not in _handed_out:
                _handed_out.add(chosen)
                return chosen
    raise OSError(f"no free port on {host}")


# -- status lines ---------------------------------------------------------------------------------

class StatusBoard:
    """One line per component, printed when (and only when) its state changes.

    A new detail in the same state (a role still not ready, now for another reason) is printed at most
    once every ``detail_interval`` seconds: a role syncing dozens of caches would fill the terminal.
    """

    def __init__(self, out: TextIO, detail_interval: float = 5.0) -> None:
        self.out = out
        self.detail_interval = detail_interval
        self._lines: dict[str, tuple[str, str, float]] = {}  # name -> (state, line, when printed)
        self._lock = threading.Lock()
        self._broken = False

    def set(self, name: str, state: str, detail: str = "") -> None:
        """Print ``name``'s line if it differs from the last one printed for it."""
        line = f"{name:<14} {state:<20} {detail}".rstrip()
        now = time.monotonic()
        with self._lock:
            last = self._lines.get(name)
            if last is not None and (last[1] == line or (last[0] == state and now - last[2] < self.detail_interval)):
                return
            self._lines[name] = (state, line, now)
            self.say(line)

    def say(self, text: str) -> None:
        """Print one line; once the output is gone (the terminal closed) print nothing more."""
        if self._broken:
            return
        try:
            print(text, file=self.out, flush=True)
        except (OSError, ValueError):
            # A hung-up terminal (EIO) or a closed pipe must not interrupt the shutdown it announces.
            self._broken = True
            if self.out is sys.stdout:
                # Else the interpreter's final flush of the lost terminal fails and the exit code is 120.
                try:
                    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
                except OSError:
                    pass


def shorten(detail: str, limit: int = 120) -> str:
    """``detail`` cut to about ``limit`` characters at a list separator, saying how many items were left out.

    A starting process waiting for 60 informer caches lists them all in its readiness check: one status
    line, not a screenful.
    """
    if len(detail) <= limit:
        return detail
    cut = detail.rfind(", ", 0, limit)
    if cut <= 0:
        return detail[:limit] + "…"
    left_out = detail[cut:].count(", ")
    return f"{detail[:cut]}, … ({left_out} more)"


# -- the simulated cluster --------------------------------------------------------------------------

def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_name(i: int) -> str:
    return f"{NODE_PREFIX}{i}"


def simulated_node(name: str) -> dict[str, Any]:
    """A Node object (without status) for a simulated node."""
    arch = _ARCH.get(platform.machine().lower(), platform.machine().lower() or "amd64")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": arch,
                SIMULATED_LABEL: "true",
            },
        },
        "spec": {},
    }


def simulated_node_status(name: str) -> dict[str, Any]:
    """The status of a healthy simulated node: 32 CPUs, 128Gi, Ready."""
    now = _now()
    arch = simulated_node(name)["metadata"]["labels"]["kubernetes.io/arch"]

    def condition(kind: str, status: str, reason: str, message: str) -> dict[str, str]:
        return {"type": kind, "status": status, "reason": reason, "message": message,
                "lastHeartbeatTime": now, "lastTransitionTime": now}

    return {
        "capacity": dict(NODE_CAPACITY),
        "allocatable": dict(NODE_CAPACITY),
        "conditions": [
            condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "simulated node"),
            condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "simulated node"),
            condition("PIDPressure", "False", "KubeletHasSufficientPID", "simulated node"),
            condition("Ready", "True", "KubeletReady", "simulated by koordinator local"),
        ],
        "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
        "nodeInfo": {
            "machineID": name, "systemUUID": name, "bootID": name,
            "kernelVersion": platform.release(), "osImage": "koordinator simulated node",
            "containerRuntimeVersion": "simulated://0", "kubeletVersion": "v1.32.0-sim",
            "kubeProxyVersion": "v1.32.0-sim", "operatingSystem": "linux", "architecture": arch,
        },
    }


def ensure_nodes(client: Any, count: int) -> list[str]:
    """Create (or keep) ``sim-node-0..count-1``, mark them Ready, delete simulated nodes beyond ``count``."""
    from koordinator.runtime.errors import AlreadyExists, NotFound

    wanted = [node_name(i) for i in range(count)]
    for name in wanted:
        desired = simulated_node(name)
        try:
            client.create(desired)
        except AlreadyExists:
            current = client.get("Node", name)
            labels = current.get("metadata", {}).get("labels") or {}
            missing = {k: v for k, v in desired["metadata"]["labels"].items() if labels.get(k) != v}
            if missing:
                client.patch("Node", name, {"metadata": {"labels": missing}})
        client.patch("Node", name, {"status": simulated_node_status(name)}, subresource="status")
    existing = client.list("Node", label_selector=f"{SIMULATED_LABEL}=true").get("items") or []
    for node in existing:
        name = node["metadata"]["name"]
        if name not in wanted:
            try:
                client.delete("Node", name)
            except NotFound:
                pass
    return wanted


def ensure_namespace(client: Any, name: str, labels: dict[str, str] | None = None) -> None:
    from koordinator.runtime.errors import AlreadyExists

    try:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}})
    except AlreadyExists:
        if labels:
            client.patch("Namespace", name, {"metadata": {"labels": labels}})


def install_defaults(client: Any) -> tuple[list[str], list[str]]:
    """Create each object of :mod:`koordinator.defaults` that does not exist; (created, kept) as ``Kind/name``.

    An existing object is left as it is: the user may have changed it (``kubectl edit configmap -n
    koordinator-system slo-controller-config``), and a restart must not undo that.
    """
    from koordinator import defaults
    from koordinator.runtime.errors import AlreadyExists, NotFound

    created: list[str] = []
    kept: list[str] = []
    for obj in defaults.objects():
        meta = obj["metadata"]
        label = f"{obj['kind']}/{meta['name']}"
        # Look before creating: a create of an existing object still goes through admission first.
        try:
            client.get(obj["kind"], meta["name"], meta.get("namespace"))
            kept.append(label)
            continue
        except NotFound:
            pass
        try:
            client.create(obj)
            created.append(label)
        except AlreadyExists:
            kept.append(label)
    return created, kept


def apply_rbac(client: Any) -> int:
    """Apply the roles' RBAC (:func:`koordinator.defaults.rbac_objects`) and the identities of local's
    stand-ins (:func:`koordinator.defaults.local_stand_in_objects`); the number of objects.

    Like ``kubectl apply``: a missing object is created, an existing Role, ClusterRole or binding is
    replaced by the shipped one (a permission fixed in a newer build takes effect at restart); an existing
    ServiceAccount is kept (nothing in it is ours to reset).
    """
    from koordinator import defaults
    from koordinator.runtime.errors import AlreadyExists

    objects = defaults.rbac_objects() + defaults.local_stand_in_objects()
    for obj in objects:
        # Raw requests: the client's kind registry knows the kinds the roles use, not the rbac group's.
        collection = _collection_path(obj)
        try:
            client.request("POST", collection, body=obj)
        except AlreadyExists:
            if obj["kind"] == "ServiceAccount":
                continue
            path = f"{collection}/{obj['metadata']['name']}"
            current = client.request("GET", path)
            meta = {**obj["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}
            client.request("PUT", path, body={**obj, "metadata": meta})
    return len(objects)


_RBAC_RESOURCES = {"ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings",
                   "ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings"}


def _collection_path(obj: dict[str, Any]) -> str:
    """The REST collection of one of the RBAC manifests' objects (namespaced ones in their namespace)."""
    version = obj["apiVersion"]
    prefix = "/api/v1" if version == "v1" else f"/apis/{version}"
    namespace = obj["metadata"].get("namespace")
    where = f"/namespaces/{namespace}" if namespace else ""
    return f"{prefix}{where}/{_RBAC_RESOURCES[obj['kind']]}"


def mint_token(client: Any, namespace: str, service_account: str, seconds: int = ROLE_TOKEN_SECONDS) -> str:
    """A TokenRequest for ``service_account`` through ``client`` (an admin's); the token."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds}}
    answer = client.request("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{service_account}/token",
                            body=body)
    return answer["status"]["token"]


def write_token_kubeconfig(admin_kubeconfig: Path, token: str, path: Path) -> Path:
    """A copy of ``admin_kubeconfig`` (same server and CA) whose user is ``token``; written with mode 0600."""
    import yaml

    config = yaml.safe_load(admin_kubeconfig.read_text(encoding="utf-8"))
    for user in config.get("users") or []:
        user["user"] = {"token": token}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, yaml.safe_dump(config, sort_keys=False), 0o600)
    return path


def write_crds(directory: Path) -> int:
    """Write every Koordinator CRD as YAML into ``directory`` (replacing older files); returns the count."""
    import yaml

    from koordinator.apis.schemas import crd_manifests

    directory.mkdir(parents=True, exist_ok=True)
    manifests = crd_manifests()
    for stale in directory.glob("*.yaml"):
        if stale.name not in manifests:
            stale.unlink()
    for name, crd in manifests.items():
        write_atomic(directory / name, yaml.safe_dump(crd, sort_keys=False), mode=None)
    return len(manifests)


@dataclass
class LocalConfig:
    """Settings of ``koordinator local`` (each one a flag)."""

    data_dir: Path
    nodes: int = 3
    port: int = 6443
    log_level: str = "info"
    shutdown_timeout: float = 30.0
    roles: list[str] | None = None  # None: every implemented role
    out: TextIO = field(default_factory=lambda: sys.stdout)
    poll_interval: float = 0.5
    # How to run `koordinator` (tests substitute a wrapper that adds role packages).
    command: list[str] = field(default_factory=lambda: [sys.executable, "-m", "koordinator"])
    apiserver_start_timeout: float = 60.0
    cgroup_version: int = 2
    cgroup_driver: str = "systemd"
    gpus_per_node: int = 0
    simulator_start_timeout: float = 30.0
    # Run `koordinator controllers` too (tests of local's wiring with stand-in roles leave it out).
    controllers: bool = True
    # After this long without everything ready, say what is not (and keep waiting).
    ready_timeout: float = 60.0
    # role -> its --feature-gates (from --koordlet-feature-gates), given to each of its instances.
    feature_gates: dict[str, str] = field(default_factory=dict)


@dataclass
class _Role:
    role: str
    child: ChildProcess
    health_addr: str
    exited: bool = False
    name: str = ""  # the status line's name: the role, or role/node for a per-node role
    metrics_addr: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or self.role

    def detail(self) -> str:
        """The status line's detail while it runs: pid, metrics and health URLs."""
        metrics = f"metrics http://{self.metrics_addr}, " if self.metrics_addr else ""
        return f"pid {self.child.pid}, {metrics}health http://{self.health_addr}"


class LocalCluster:
    """The API server, the simulated nodes and the roles, supervised until :meth:`request_stop`."""

    def __init__(self, config: LocalConfig) -> None:
        self.config = config
        self.data_dir = config.data_dir
        self.kubeconfig = self.data_dir / "kubeconfig"
        # role -> its ServiceAccount's kubeconfig (_prepare_cluster); a role without one uses the admin's.
        self.role_kubeconfigs: dict[str, Path] = {}
        self.board = StatusBoard(config.out)
        self.apiserver: ChildProcess | None = None
        self.simulator: ChildProcess | None = None
        self.simulator_exited = False
        self.node_names: list[str] = []
        self.url = ""
        self.roles: list[_Role] = []
        # What each role to start asked for (its package's local_setup; an empty setup without one).
        self.setups: dict[str, LocalSetup] = {}
        self.lock: Any = None  # the data dir's DataDirLock while we run
        self.up = False
        self._checks_met: set[str] = set()  # the roles' ready checks already met (not run again)
        self._not_ready_said = False
        self._started_at = 0.0
        self._client: Any = None  # from _prepare_cluster to the shutdown: the roles' setups and checks use it
        self._stop = threading.Event()
        self._hurry = threading.Event()
        self._serving = threading.Event()
        self._simulating = threading.Event()

    def request_stop(self) -> None:
        """Begin a clean shutdown; a second call makes it hurry (children are killed at once)."""
        if self._stop.is_set():
            self._hurry.set()
        self._stop.set()

    def _on_signal(self, signum: int, frame: Any) -> None:
        self.request_stop()

    def run(self) -> int:
        """Start everything, supervise until stopped, stop everything; the exit code."""
        handlers: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            # SIGHUP: the terminal closed. The children, in their own sessions, never see it: stop them.
            for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                handlers[sig] = signal.signal(sig, self._on_signal)
        code = 1
        try:
            code = self._run()
        finally:
            try:
                self._shutdown()
            finally:
                if self.lock is not None:
                    self.lock.release()
                    self.lock = None
                for sig, handler in handlers.items():
                    signal.signal(sig, handler)
        return code

    def _run(self) -> int:
        from koordinator.apiserver.server import DataDirInUse, DataDirLock

        self._started_at = time.monotonic()
        try:
            self.lock = DataDirLock(str(self.data_dir)).acquire()
        except DataDirInUse as err:
            self.board.say(f"koordinator local: error: {err}")
            return 1
        except OSError as err:
            self.board.say(f"koordinator local: error: --data-dir {self.data_dir}: {err}")
            return 1
        self.board.say(f"koordinator local: data dir {self.data_dir} (logs in {self.data_dir / 'logs'})")
        if not self._start_apiserver():
            return 0 if self._stop.is_set() else 1
        try:
            self._prepare_cluster()
        except Exception as err:
            if self._stop.is_set():
                return 0
            log.debug("preparing the cluster failed", exc_info=True)
            self.board.say(f"koordinator local: error: preparing the cluster failed: {err}")
            return 1
        if self._stop.is_set():
            return 0
        self._start_simulator()
        if self._stop.is_set():
            return 0
        self._start_controllers()
        self._start_roles()
        return self._supervise()

    def _start_apiserver(self) -> bool:
        from koordinator.apiserver.server import LOCK_FD_ENV

        crd_dir = self.data_dir / "crds"
        count = write_crds(crd_dir)
        argv = [*self.config.command, "apiserver", "--data-dir", str(self.data_dir),
                "--port", str(self.config.port), "--crd-dir", str(crd_dir),
                "--kubeconfig-out", str(self.kubeconfig), "--log-level", self.config.log_level,
                # HTTPS, an admin token (DIR/token, kept across restarts) and RBAC: the roles run under
                # their own ServiceAccounts, checked as on a cluster.
                "--tls"]
        # The API server opens state.db under our lock: it gets our lock's descriptor (and with it the
        # lock, which it keeps should we be killed), so that it does not take itself for a second user.
        assert self.lock is not None and self.lock.fd is not None
        self.apiserver = ChildProcess("apiserver", argv, self.data_dir / "logs" / "apiserver.log",
                                      on_line=self._apiserver_line, pass_fds=(self.lock.fd,),
                                      env={**os.environ, LOCK_FD_ENV: str(self.lock.fd)})
        self.board.set("apiserver", "starting", f"{count} CRDs")
        self.apiserver.start()
        deadline = time.monotonic() + self.config.apiserver_start_timeout
        while not self._serving.wait(0.1):
            code = self.apiserver.poll()
            if code is not None:
                self.apiserver.close()  # the last output lines are in by now
                self.board.set("apiserver", f"exited (code {code})", self.apiserver.last_line)
                return False
            if self._stop.is_set():
                return False
            if time.monotonic() > deadline:
                self.board.set("apiserver", "not ready", f"no answer within {self.config.apiserver_start_timeout:g}s; "
                                                         f"see {self.apiserver.log_path}")
                return False
        self.board.set("apiserver", "ready", f"{self.url}  (pid {self.apiserver.pid})")
        self.board.say(f"export KUBECONFIG={self.kubeconfig}")
        return True

    def _apiserver_line(self, line: str) -> None:
        if not self._serving.is_set() and "serving at " in line:
            self.url = line.rsplit(" ", 1)[1]
            self._serving.set()

    def _prepare_cluster(self) -> None:
        from koordinator.runtime.client import Client

        self._client = client = Client.from_kubeconfig(str(self.kubeconfig))
        # control-plane: the manager's pod webhooks skip this namespace (manifests/namespace.yaml).
        ensure_namespace(client, SYSTEM_NAMESPACE, {"control-plane": "koordinator"})
        # Before the roles' setups (the manager's webhook configurations): nothing here may wait for a
        # role not yet started.
        created, kept = install_defaults(client)
        self._set_up_identities(client)
        names = ensure_nodes(client, self.config.nodes)
        self.node_names = names
        self._set_up_roles(client)
        configmaps = sum(1 for o in created + kept if o.startswith("ConfigMap/"))
        self.board.set("defaults", "ready", f"{configmaps} ConfigMaps in {SYSTEM_NAMESPACE}, "
                                            f"{len(created) + len(kept) - configmaps} PriorityClasses "
                                            f"({len(created)} created, {len(kept)} kept as they were)")
        if names:
            shown = ", ".join(names) if len(names) <= 5 else f"{names[0]} .. {names[-1]}"
            self.board.set("nodes", "ready", f"{len(names)} simulated: {shown}")
        else:
            self.board.set("nodes", "none", "--nodes 0")

    def _set_up_identities(self, client: Any) -> None:
        """Apply the roles' RBAC and write a kubeconfig with a fresh token for each wanted role's ServiceAccount."""
        count = apply_rbac(client)
        directory = self.data_dir / "kubeconfigs"
        for role in self._wanted_roles():
            account = ROLE_SERVICE_ACCOUNTS.get(role)
            if account is None or not roles.is_implemented(role):
                continue
            token = mint_token(client, SYSTEM_NAMESPACE, account)
            self.role_kubeconfigs[role] = write_token_kubeconfig(self.kubeconfig, token,
                                                                 directory / f"{role}.kubeconfig")
        started = {CONTROLLERS: self.config.controllers, SIMULATOR: self.config.nodes > 0}
        for stand_in, account in STAND_IN_SERVICE_ACCOUNTS.items():
            if not started[stand_in]:
                continue
            token = mint_token(client, STAND_IN_NAMESPACE, account)
            self.role_kubeconfigs[stand_in] = write_token_kubeconfig(self.kubeconfig, token,
                                                                     directory / f"{stand_in}.kubeconfig")
        self.board.set("rbac", "ready", f"{count} objects applied; roles run as their ServiceAccounts "
                                        f"({len(self.role_kubeconfigs)} kubeconfigs in {directory})")

    @property
    def nodes_dir(self) -> Path:
        return self.data_dir / "nodes"

    def _simulated_node(self, name: str) -> SimulatedNode:
        tree = self.nodes_dir / name  # the layout of koordinator.sim's NodeTree
        return SimulatedNode(name, proc_root=tree / "proc", sys_root=tree / "sys", cgroup_root=tree / "cgroup")

    def _start_simulator(self) -> None:
        """``koordinator simulate-nodes`` for the simulated nodes; wait (bounded) until their trees exist."""
        if not self.node_names:
            return
        kubeconfig = self.role_kubeconfigs.get(SIMULATOR, self.kubeconfig)
        argv = [*self.config.command, "simulate-nodes", "--kubeconfig", str(kubeconfig),
                "--root", str(self.nodes_dir), "--nodes", ",".join(self.node_names),
                "--cgroup-version", str(self.config.cgroup_version), "--cgroup-driver", self.config.cgroup_driver,
                "--gpus-per-node", str(self.config.gpus_per_node),
                # Where each node's koordlet registers its hook server (roles/koordlet/local.py): the
                # simulated runtime calls it as koord-runtime-proxy would.
                "--hook-server-config-dir", str(self.data_dir / "koordlet" / "{node}" / "hookserver.d"),
                "--log-level", self.config.log_level]
        self.simulator = ChildProcess(SIMULATOR, argv, self.data_dir / "logs" / f"{SIMULATOR}.log",
                                      on_line=self._simulator_line)
        self.board.set(SIMULATOR, "starting", f"{len(self.node_names)} node trees under {self.nodes_dir}")
        self.simulator.start()
        deadline = time.monotonic() + self.config.simulator_start_timeout
        while not self._simulating.wait(0.1):
            if self._check_simulator() or self._stop.is_set():
                return
            if time.monotonic() > deadline:
                self.board.set(SIMULATOR, "not ready", f"no trees within {self.config.simulator_start_timeout:g}s; "
                                                       f"see {self.simulator.log_path}")
                return
        self.board.set(SIMULATOR, "ready", f"{self.nodes_dir}  (pid {self.simulator.pid})")

    def _simulator_line(self, line: str) -> None:
        if ": ready: " in line:
            self._simulating.set()

    def _check_simulator(self) -> bool:
        """Report a simulator that exited (once); True if it has."""
        if self.simulator is None:
            return False
        if self.simulator_exited:
            return True
        code = self.simulator.poll()
        if code is None:
            return False
        self.simulator_exited = True
        self.simulator.close()
        self.board.set(SIMULATOR, f"exited (code {code})",
                       f"{self.simulator.last_line}  [log: {self.simulator.log_path}]".strip())
        return True

    def _wanted_roles(self) -> list[str]:
        return self.config.roles if self.config.roles is not None else list(roles.ROLE_PACKAGES)

    def _startable(self, role: str) -> bool:
        """Whether ``role`` is started: this build has it, and a node role has a node to run on."""
        return roles.is_implemented(role) and not (role in NODE_ROLES and not self.node_names)

    def _set_up_roles(self, client: Any) -> None:
        """Ask each role to start what it needs in this cluster (its package's ``local_setup``, see :mod:`roles`)."""
        starting = tuple(role for role in self._wanted_roles() if self._startable(role))
        nodes = tuple(self._simulated_node(name) for name in self.node_names)
        context = LocalContext(client=client, kubeconfig=self.kubeconfig, data_dir=self.data_dir,
                               namespace=SYSTEM_NAMESPACE, nodes=nodes, roles=starting, free_port=free_port)
        for role in starting:
            hook = getattr(roles.load(role), "local_setup", None)
            self.setups[role] = hook(context) if hook is not None else LocalSetup()

    def _start_controllers(self) -> None:
        """``koordinator controllers`` (Deployments, ReplicaSets, Jobs ... make pods), supervised like a role,
        as its ServiceAccount (``STAND_IN_SERVICE_ACCOUNTS``)."""
        if not self.config.controllers:
            return
        self._start_child(CONTROLLERS, None, [*self.config.command, CONTROLLERS], [])

    def _start_roles(self) -> None:
        for role in self._wanted_roles():
            if not roles.is_implemented(role):
                self.board.set(role, "not implemented yet")
                continue
            if not self._startable(role):
                self.board.set(role, "not started", "no simulated node (--nodes 0)")
                continue
            setup = self.setups[role]
            if setup.not_run:
                self.board.set(role, "not started", setup.not_run)
                continue
            if setup.node_flags is not None:
                for node, flags in setup.node_flags.items():
                    self._start_role(role, node, ["--node-name", node, *flags, *setup.flags], setup.env)
            elif role in NODE_ROLES:  # one instance, on the first node
                self._start_role(role, None, ["--node-name", self.node_names[0], *setup.flags], setup.env)
            else:
                self._start_role(role, None, setup.flags, setup.env)

    def _start_role(self, role: str, node: str | None, extra: list[str], env: dict[str, str]) -> None:
        gates = self.config.feature_gates.get(role)
        if gates:
            extra = [*extra, "--feature-gates", gates]
        self._start_child(role, node, [*self.config.command, f"--role={role}"], extra, env)

    def _start_child(self, role: str, node: str | None, command: list[str], extra: list[str],
                     env: dict[str, str] | None = None) -> None:
        name = f"{role}/{node}" if node else role
        metrics = f"127.0.0.1:{free_port()}"
        health = f"127.0.0.1:{free_port()}"
        kubeconfig = self.role_kubeconfigs.get(role, self.kubeconfig)
        argv = [*command, "--kubeconfig", str(kubeconfig), "--metrics-addr", metrics, "--health-addr", health,
                "--log-level", self.config.log_level, *extra]
        log_name = f"{role}-{node}" if node else role
        child = ChildProcess(name, argv, self.data_dir / "logs" / f"{log_name}.log",
                             env={**os.environ, **env} if env else None)
        child.start()
        entry = _Role(role, child, health, name=name, metrics_addr=metrics)
        self.roles.append(entry)
        self.board.set(name, "starting", entry.detail())

    def _supervise(self) -> int:
        """Watch the children until stopped; say ``up`` once everything is usable. The exit code."""
        assert self.apiserver is not None
        # Quick looks while coming up: each one may be what makes `up` appear.
        interval = min(self.config.poll_interval, 0.1)
        while True:
            code = self.apiserver.poll()
            if code is not None:
                self.apiserver.close()
                self.board.set("apiserver", f"exited (code {code})", self.apiserver.last_line)
                self.board.say("koordinator local: the API server died; stopping everything")
                return 1
            simulator_exited = self._check_simulator()
            waiting = [f"{r.name} ({reason})" for r in self.roles if (reason := self._check_role(r))]
            if not self.up:
                if self.simulator is not None and (simulator_exited or not self._simulating.is_set()):
                    waiting.append(f"{SIMULATOR} (exited)" if simulator_exited else f"{SIMULATOR} (no node trees)")
                if not waiting:
                    waiting = self._ready_checks_failing()
                if not waiting:
                    self.up = True
                    self.board.say(f"koordinator local: up in {time.monotonic() - self._started_at:.1f}s; "
                                   "Ctrl-C stops everything")
                    interval = self.config.poll_interval
                elif not self._not_ready_said and time.monotonic() - self._started_at > self.config.ready_timeout:
                    self._not_ready_said = True
                    self.board.say(f"koordinator local: not ready after {self.config.ready_timeout:g}s: "
                                   f"{', '.join(waiting)}; still waiting (logs in {self.data_dir / 'logs'}), "
                                   "Ctrl-C stops everything")
            if self._stop.wait(interval):
                return 0

    def _ready_checks_failing(self) -> list[str]:
        """``name (why)`` for each ready check of the roles' setups not met yet (a met one is not run again)."""
        failing = []
        for setup in self.setups.values():
            for name, check in setup.ready_checks.items():
                if name in self._checks_met:
                    continue
                try:
                    reason = check()
                except Exception as err:  # a check that fails is not met; the next round looks again
                    log.debug("ready check %s failed", name, exc_info=True)
                    reason = str(err) or type(err).__name__
                if reason:
                    failing.append(f"{name} ({reason})")
                else:
                    self._checks_met.add(name)
        return failing

    def _check_role(self, role: _Role) -> str | None:
        """Probe the role's /readyz and update its status line; None when it is ready, else why not."""
        from koordinator.runtime.servers import probe

        if role.exited:
            return "exited"
        code = role.child.poll()
        if code is not None:
            role.exited = True
            role.child.close()
            self.board.set(role.name, f"exited (code {code})",
                           f"{role.child.last_line}  [log: {role.child.log_path}]".strip())
            return "exited"
        try:
            status, body = probe(role.health_addr, "/readyz", timeout=1.0)
        except OSError:
            self.board.set(role.name, "starting", role.detail())
            return "starting"
        if status == 200:
            self.board.set(role.name, "ready", role.detail())
            return None
        failing = [line[3:] for line in body.splitlines() if line.startswith("[-]")]
        reason = shorten("; ".join(failing) or f"HTTP {status}")
        self.board.set(role.name, "not ready", reason)
        return reason

    def _shutdown(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        running = [r.child for r in self.roles if r.child.proc is not None and not r.exited]
        if running or (self.apiserver is not None and self.apiserver.proc is not None):
            self.board.say("koordinator local: stopping")
        if running:
            for name, code in stop_children(running, self.config.shutdown_timeout, self._hurry).items():
                self.board.set(name, "stopped", f"exit code {code}")
        for r in self.roles:
            if r.exited:
                r.child.close()
        # After the koordlets (they read its trees), before the API server (it writes pod status).
        if self.simulator is not None and self.simulator.proc is not None and not self.simulator_exited:
            if self.simulator.poll() is None:
                code = stop_children([self.simulator], self.config.shutdown_timeout, self._hurry)[SIMULATOR]
                self.board.set(SIMULATOR, "stopped", f"exit code {code}")
            else:
                self.simulator.close()
        if self.apiserver is not None and self.apiserver.proc is not None:
            if self.apiserver.poll() is None:
                code = stop_children([self.apiserver], self.config.shutdown_timeout, self._hurry)["apiserver"]
                self.board.set("apiserver", "stopped", f"exit code {code}")
            else:
                self.apiserver.close()
