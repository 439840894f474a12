"""``koordinator local``: a whole Koordinator cluster on this machine, as one process tree.

It starts ``koordinator apiserver`` (with our CRDs) as a child process, creates the
``koordinator-system`` namespace and N simulated Nodes, starts ``koordinator simulate-nodes`` for
them (fake /proc, /sys and cgroup trees under ``DIR/nodes`` and a stand-in kubelet, see
:mod:`koordinator.sim`), then starts every role this build implements as a child
``koordinator --role=R`` against it — the koordlet once per simulated node, over that node's
tree — prints the kubeconfig and one status line per component (again whenever it changes), and
on Ctrl-C, SIGTERM or SIGHUP stops the roles (SIGTERM, then SIGKILL after ``--shutdown-timeout``), then
the simulator, then the API server.

Beside the roles it runs ``koordinator controllers`` (Deployments, ReplicaSets, Jobs ... make pods),
installs what ``kubectl apply -k manifests`` installs on a cluster (the default ConfigMaps, colocation
on, and the koord-* PriorityClasses, from :mod:`koordinator.defaults`; created when absent, never
overwritten), and runs the scheduler with two profiles, ``koord-scheduler`` and
``default-scheduler``, so that every pod gets scheduled. ``koordinator local: up`` is printed once
everything is usable: every child ready, the manager's webhooks served, and a first NodeMetric from
every simulated node (the koordlets report every :data:`KOORDLET_REPORT_INTERVAL`).

Layout of the data directory (reused on restart: the nodes are kept, the CRDs refreshed)::

    DIR/lock            flock()ed while a `local` (or `apiserver`) uses the directory
    DIR/state.db        the API server's SQLite database
    DIR/kubeconfig      for kubectl and the roles
    DIR/crds/           the CRDs written from koordinator.apis.schemas (works from an installed package)
    DIR/scheduler-config.yaml  the scheduler's --config (rewritten at every start)
    DIR/logs/NAME.log   each child's stdout and stderr (koordlet-<node>.log per koordlet)
    DIR/nodes/<node>/   each simulated node's proc, sys and cgroup trees (rebuilt on restart)
    DIR/koordlet/<node>/  each koordlet's --run-dir (metric cache, prediction checkpoints)

Every child runs in its own session, so a Ctrl-C in the terminal reaches only this process and
the shutdown order stays ours. A role that dies is reported on its status line; an API server
that dies takes everything down with exit code 1.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
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

from koordinator.runtime.options import parse_duration, port

log = logging.getLogger("koordinator.local")

NODE_PREFIX = "sim-node-"
SIMULATED_LABEL = "koordinator.sh/simulated-node"
SYSTEM_NAMESPACE = "koordinator-system"
NODE_ROLES = ("koordlet", "device-daemon", "runtime-proxy")
# Node roles that run once per simulated node, over its tree (the others run once, for sim-node-0).
PER_NODE_ROLES = ("koordlet",)
SIMULATOR = "simulator"
NODE_CAPACITY = {"cpu": "32", "memory": "128Gi", "pods": "110", "ephemeral-storage": "500Gi"}
CONTROLLERS = "controllers"
# The koordlets' --report-interval. The NodeMetric spec cannot ask for less than 30 s (the koordlet's
# floor protects a big cluster's API server from every node writing its status often); a few
# simulated nodes can afford it, and the demo's batch resources then follow usage within seconds.
KOORDLET_REPORT_INTERVAL = "5s"
# The profiles of the scheduler in local: Koordinator's own and kube's, so that pods without a
# schedulerName are scheduled too (there is no kube-scheduler here).
SCHEDULER_PROFILES = ("koord-scheduler", "default-scheduler")
SCHEDULER_CONFIG = "scheduler-config.yaml"
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
    return p


def run(args: argparse.Namespace) -> int:
    """Entry point of ``koordinator local``."""
    config = LocalConfig(data_dir=Path(args.data_dir).absolute(), nodes=args.nodes, port=args.port,
                         log_level=args.log_level, shutdown_timeout=args.shutdown_timeout,
                         ready_timeout=args.ready_timeout, cgroup_version=args.cgroup_version,
                         cgroup_driver=args.cgroup_driver)
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


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on right now (the child binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


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


def ensure_manager_webhooks(client: Any, port: int) -> None:
    """Route the manager's admission webhooks to 127.0.0.1:``port``, as a cluster routes them to its pods.

    The embedded API server resolves ``koordinator-webhook-service`` through its Endpoints (there
    is no kube-proxy), so the webhook configurations are the same objects as in ``manifests/``; the
    manager patches their ``caBundle`` once it has its certificate.
    """
    from koordinator.runtime.errors import AlreadyExists
    from roles.manager import features
    from roles.manager.webhook_configuration import SERVICE_NAME, SERVICE_NAMESPACE, webhook_configurations

    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
               "spec": {"ports": [{"port": 443, "targetPort": port, "protocol": "TCP"}],
                        "selector": {"koord-app": "koord-manager"}}}
    endpoints = {"apiVersion": "v1", "kind": "Endpoints",
                 "metadata": {"name": SERVICE_NAME, "namespace": SERVICE_NAMESPACE},
                 "subsets": [{"addresses": [{"ip": "127.0.0.1"}], "ports": [{"port": port, "protocol": "TCP"}]}]}
    for obj in (service, endpoints):
        try:
            client.create(obj)
        except AlreadyExists:
            # A restart picks a new port: point the existing objects at it.
            current = client.get(obj["kind"], SERVICE_NAME, SERVICE_NAMESPACE)
            for k in ("spec", "subsets"):
                if k in obj:
                    current[k] = obj[k]
            client.update(current)
    for config in webhook_configurations(features.GATES):
        try:
            client.create(config)
        except AlreadyExists:
            current = client.get(config["kind"], config["metadata"]["name"])
            # Keep the caBundle the manager injected; take everything else from this build.
            bundles = {w["name"]: w.get("clientConfig", {}).get("caBundle") for w in current.get("webhooks") or []}
            for w in config["webhooks"]:
                if bundles.get(w["name"]):
                    w["clientConfig"]["caBundle"] = bundles[w["name"]]
            current["webhooks"] = config["webhooks"]
            client.update(current)


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


def scheduler_config(profiles: tuple[str, ...] = SCHEDULER_PROFILES) -> dict[str, Any]:
    """The scheduler's KubeSchedulerConfiguration in local: one profile per name in ``profiles``, each
    with the plugins the scheduler uses without ``--config`` (kube's defaults and LoadAwareScheduling)."""
    from roles.scheduler import config

    return {
        "apiVersion": config.API_VERSION,
        "kind": config.KIND,
        # One scheduler in local: electing a leader would only delay it after an unclean stop (the
        # dead holder's Lease must expire first).
        "leaderElection": {"leaderElect": False},
        "profiles": [config.default_profile(name) for name in profiles],
    }


def write_scheduler_config(path: Path) -> Path:
    """Write :func:`scheduler_config` as YAML to ``path`` (replacing it atomically); returns ``path``."""
    import yaml

    text = ("# Written by `koordinator local` at every start: the scheduler's --config. Profiles\n"
            "# koord-scheduler and default-scheduler (pods without a schedulerName), kube's default plugins\n"
            "# plus LoadAwareScheduling each.\n" + yaml.safe_dump(scheduler_config(), sort_keys=False))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
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
        tmp = directory / f".{name}.tmp"
        tmp.write_text(yaml.safe_dump(crd, sort_keys=False), encoding="utf-8")
        tmp.replace(directory / name)
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
    simulator_start_timeout: float = 30.0
    # Run `koordinator controllers` too (tests of local's wiring with stand-in roles leave it out).
    controllers: bool = True
    # After this long without everything ready, say what is not (and keep waiting).
    ready_timeout: float = 60.0


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
        self.board = StatusBoard(config.out)
        self.apiserver: ChildProcess | None = None
        self.simulator: ChildProcess | None = None
        self.simulator_exited = False
        self.node_names: list[str] = []
        self.url = ""
        self.roles: list[_Role] = []
        self.webhook_port = 0
        self.lock: Any = None  # the data dir's DataDirLock while we run
        self.up = False
        self._metrics_reported = False
        self._not_ready_said = False
        self._started_at = 0.0
        self._client: Any = None
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
                "--kubeconfig-out", str(self.kubeconfig), "--log-level", self.config.log_level]
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

        client = Client.from_kubeconfig(str(self.kubeconfig))
        try:
            # control-plane: the manager's pod webhooks skip this namespace (manifests/namespace.yaml).
            ensure_namespace(client, SYSTEM_NAMESPACE, {"control-plane": "koordinator"})
            # Before the webhook configurations: nothing here may wait for a manager not yet started.
            created, kept = install_defaults(client)
            names = ensure_nodes(client, self.config.nodes)
            if self._runs("manager"):
                self.webhook_port = free_port()
                ensure_manager_webhooks(client, self.webhook_port)
        finally:
            client.close()
        self.node_names = names
        configmaps = sum(1 for o in created + kept if o.startswith("ConfigMap/"))
        self.board.set("defaults", "ready", f"{configmaps} ConfigMaps in {SYSTEM_NAMESPACE}, "
                                            f"{len(created) + len(kept) - configmaps} PriorityClasses "
                                            f"({len(created)} created, {len(kept)} kept as they were)")
        if names:
            shown = ", ".join(names) if len(names) <= 5 else f"{names[0]} .. {names[-1]}"
            self.board.set("nodes", "ready", f"{len(names)} simulated: {shown}")
        else:
            self.board.set("nodes", "none", "--nodes 0")

    @property
    def nodes_dir(self) -> Path:
        return self.data_dir / "nodes"

    def _start_simulator(self) -> None:
        """``koordinator simulate-nodes`` for the simulated nodes; wait (bounded) until their trees exist."""
        if not self.node_names:
            return
        argv = [*self.config.command, "simulate-nodes", "--kubeconfig", str(self.kubeconfig),
                "--root", str(self.nodes_dir), "--nodes", ",".join(self.node_names),
                "--cgroup-version", str(self.config.cgroup_version), "--cgroup-driver", self.config.cgroup_driver,
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

    def _runs(self, role: str) -> bool:
        import roles

        return (self.config.roles is None or role in self.config.roles) and roles.is_implemented(role)

    def _start_controllers(self) -> None:
        """``koordinator controllers`` (Deployments, ReplicaSets, Jobs ... make pods), supervised like a role."""
        if not self.config.controllers:
            return
        self._start_child(CONTROLLERS, None, [*self.config.command, CONTROLLERS], [])

    def _start_roles(self) -> None:
        import roles

        wanted = self.config.roles if self.config.roles is not None else list(roles.ROLE_PACKAGES)
        implemented = set(roles.implemented_roles())
        for role in wanted:
            if role not in implemented:
                self.board.set(role, "not implemented yet")
                continue
            if role in NODE_ROLES and not self.node_names:
                self.board.set(role, "not started", "no simulated node (--nodes 0)")
                continue
            if role in PER_NODE_ROLES:
                for node in self.node_names:
                    self._start_role(role, node, self.per_node_flags(node))
            elif role in NODE_ROLES:
                self._start_role(role, None, ["--node-name", self.node_names[0]])
            elif role == "scheduler":
                config = write_scheduler_config(self.data_dir / SCHEDULER_CONFIG)
                self._start_role(role, None, ["--config", str(config)])
            else:
                self._start_role(role, None, [])

    def per_node_flags(self, node: str) -> list[str]:
        """A per-node role's flags: its node and that node's simulated tree and run directory."""
        tree = self.nodes_dir / node
        return ["--node-name", node, "--proc-root", str(tree / "proc"), "--sys-root", str(tree / "sys"),
                "--cgroup-root", str(tree / "cgroup"), "--run-dir", str(self.data_dir / "koordlet" / node),
                "--report-interval", KOORDLET_REPORT_INTERVAL]

    def _start_role(self, role: str, node: str | None, extra: list[str]) -> None:
        self._start_child(role, node, [*self.config.command, f"--role={role}"], extra)

    def _start_child(self, role: str, node: str | None, command: list[str], extra: list[str]) -> None:
        name = f"{role}/{node}" if node else role
        metrics = f"127.0.0.1:{free_port()}"
        health = f"127.0.0.1:{free_port()}"
        argv = [*command, "--kubeconfig", str(self.kubeconfig), "--metrics-addr", metrics, "--health-addr", health,
                "--log-level", self.config.log_level, *extra]
        env = None
        if role == "manager":
            argv += ["--webhook-host", "127.0.0.1", "--webhook-port", str(self.webhook_port),
                     "--webhook-cert-dir", str(self.data_dir / "webhook-certs")]
            env = {**os.environ, "POD_NAMESPACE": SYSTEM_NAMESPACE}
        log_name = f"{role}-{node}" if node else role
        child = ChildProcess(name, argv, self.data_dir / "logs" / f"{log_name}.log", env=env)
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
                    reason = self._node_metrics_missing()
                    if reason:
                        waiting.append(f"nodemetrics ({reason})")
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

    def _node_metrics_missing(self) -> str | None:
        """Why a pod may not be schedulable yet: simulated nodes without a first NodeMetric report (while
        a NodeMetric has no updateTime, LoadAwareScheduling filters its node out as expired). None once
        every one has reported, or when no koordlet or manager runs to report them."""
        if self._metrics_reported or not self.node_names or not (self._runs("manager") and self._runs("koordlet")):
            return None
        from koordinator.runtime.client import Client

        try:
            if self._client is None:
                self._client = Client.from_kubeconfig(str(self.kubeconfig))
            items = self._client.list("NodeMetric").get("items") or []
        except Exception as err:  # the API server's death is noticed by the loop; anything else: look again
            log.debug("listing NodeMetrics failed: %s", err)
            return f"cannot list NodeMetrics: {err}"
        reported = {m["metadata"]["name"] for m in items if (m.get("status") or {}).get("updateTime")}
        missing = [n for n in self.node_names if n not in reported]
        if missing:
            shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            return f"no report yet from {shown}"
        self._metrics_reported = True
        return None

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
