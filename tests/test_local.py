"""`koordinator local`: the API server, simulated nodes and roles as supervised child processes."""

from __future__ import annotations

import io
import os
import queue
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import roles
from koordinator import local
from koordinator.local import ChildProcess, LocalCluster, LocalConfig, stop_children
from koordinator.runtime.client import Client
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent


def processes_mentioning(text: str) -> list[tuple[int, str]]:
    """(pid, cmdline) of every live process whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
        if text in cmdline and state != "Z":
            found.append((int(entry), cmdline))
    return found


class LocalProcess:
    """`koordinator local` as a subprocess; its stdout lines arrive on a queue."""

    def __init__(self, data_dir: Path, *args: str) -> None:
        self.data_dir = data_dir
        self.proc = subprocess.Popen([sys.executable, "-m", "koordinator", "local", "--data-dir", str(data_dir),
                                      "--port", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=data_dir.parent)
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def expect(self, needle: str, timeout: float = 90) -> str:
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"no line with {needle!r} within {timeout}s; got:\n" + "\n".join(self.lines))
            if line is None:
                raise AssertionError(f"exited ({self.proc.wait()}) before {needle!r}; got:\n" + "\n".join(self.lines)
                                     + "\nstderr:\n" + (self.proc.stderr.read() if self.proc.stderr else ""))
            self.lines.append(line)
            if needle in line:
                return line

    def finish(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        while True:  # drain what is left
            line = self._queue.get(timeout=10)
            if line is None:
                break
            self.lines.append(line)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid, _ in processes_mentioning(str(self.data_dir)):
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass


def kubectl(kubeconfig: str, cache: Path, *args: str) -> str:
    proc = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", str(cache), *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_local_comes_up_kubectl_sees_the_nodes_and_ctrl_c_leaves_nothing(tmp_path):
    data = tmp_path / "kdata"
    lp = LocalProcess(data, "--nodes", "3")
    try:
        kubeconfig = lp.expect("export KUBECONFIG=").split("=", 1)[1]
        assert kubeconfig == str(data / "kubeconfig")
        lp.expect("koordinator local: up")
        out = "\n".join(lp.lines)
        assert "apiserver      ready" in out
        assert "nodes          ready                3 simulated: sim-node-0, sim-node-1, sim-node-2" in out
        assert f"simulator      ready                {data / 'nodes'}" in out
        for i in range(3):
            assert (data / "nodes" / f"sim-node-{i}" / "proc" / "stat").is_file()
            assert (data / "nodes" / f"sim-node-{i}" / "cgroup" / "kubepods.slice").is_dir()
        for role in roles.ROLE_PACKAGES:
            if not roles.is_implemented(role):
                assert any(line.startswith(role) and "not implemented yet" in line for line in lp.lines)
        assert kubectl(kubeconfig, tmp_path / "cache", "get", "nodes", "-o", "name").split() == [
            "node/sim-node-0", "node/sim-node-1", "node/sim-node-2"]
        table = kubectl(kubeconfig, tmp_path / "cache", "get", "nodes")
        assert table.count(" Ready ") == 3, table
        assert "nodeslos.slo.koordinator.sh" in kubectl(kubeconfig, tmp_path / "cache", "get", "crd", "-o", "name")
        assert "koordinator-system" in kubectl(kubeconfig, tmp_path / "cache", "get", "namespaces")
        assert processes_mentioning(str(data)), "the children should be running"
        lp.proc.send_signal(signal.SIGINT)
        assert lp.finish() == 0, "\n".join(lp.lines)
        assert any(line.startswith("apiserver") and "stopped" in line for line in lp.lines)
        assert any(line.startswith("simulator") and "stopped" in line and "exit code 0" in line for line in lp.lines)
        assert wait_until(lambda: not processes_mentioning(str(data)), 10), processes_mentioning(str(data))
        assert (data / "logs" / "apiserver.log").read_text().count("serving at") == 1

        # Same data dir again, fewer nodes: the kept nodes are the same objects, the extra one is gone.
        client = None
        lp = LocalProcess(data, "--nodes", "2")
        lp.expect("koordinator local: up")
        client = Client.from_kubeconfig(kubeconfig)
        names = sorted(n["metadata"]["name"] for n in client.list("Node")["items"])
        assert names == ["sim-node-0", "sim-node-1"]
        node = client.get("Node", "sim-node-0")
        assert node["metadata"]["labels"][local.SIMULATED_LABEL] == "true"
        assert node["status"]["allocatable"]["cpu"] == "32"
        assert {c["type"]: c["status"] for c in node["status"]["conditions"]}["Ready"] == "True"
        client.close()
        lp.proc.send_signal(signal.SIGTERM)
        assert lp.finish() == 0
        assert wait_until(lambda: not processes_mentioning(str(data)), 10)
    finally:
        lp.kill()


PROFILE = """
apiVersion: config.koordinator.sh/v1alpha1
kind: ClusterColocationProfile
metadata: {name: colocation-profile-example}
spec:
  namespaceSelector: {matchLabels: {koordinator.sh/enable-colocation: "true"}}
  selector: {matchLabels: {koordinator.sh/enable-colocation: "true"}}
  qosClass: BE
  priorityClassName: koord-batch
  koordinatorPriority: 1000
"""
POD = """
apiVersion: v1
kind: Pod
metadata: {name: batch, namespace: colo, labels: {koordinator.sh/enable-colocation: "true"}}
spec:
  containers:
  - {name: main, image: nginx, resources: {requests: {cpu: 500m, memory: 1Gi}}}
"""


def test_local_runs_the_manager_and_a_profile_mutates_a_kubectl_pod(tmp_path):
    """The README's walk-through: NodeSLO per node, and a ClusterColocationProfile applied by kubectl."""
    data = tmp_path / "kdata"
    lp = LocalProcess(data, "--nodes", "2")
    try:
        kubeconfig = lp.expect("export KUBECONFIG=").split("=", 1)[1]
        lp.expect("manager        ready")
        cache = tmp_path / "cache"
        client = Client.from_kubeconfig(kubeconfig)
        try:
            wait_until(lambda: len(client.list("NodeSLO")["items"]) == 2, message="a NodeSLO per simulated node")
            kubectl(kubeconfig, cache, "apply", "-f", str(Path(__file__).resolve().parents[1] / "manifests"
                                                           / "priorityclasses.yaml"))
            kubectl(kubeconfig, cache, "create", "namespace", "colo")
            kubectl(kubeconfig, cache, "label", "namespace", "colo", "koordinator.sh/enable-colocation=true")
            proc = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", str(cache), "apply", "-f", "-"],
                                  input=PROFILE, capture_output=True, text=True, timeout=60)
            assert proc.returncode == 0, proc.stderr

            def mutated() -> dict | None:
                # The manager's caches may lag the profile by a moment: retry the create until it shows.
                try:
                    client.delete("Pod", "batch", "colo")
                except Exception:
                    pass
                proc = subprocess.run(["kubectl", "--kubeconfig", kubeconfig, "--cache-dir", str(cache), "apply",
                                       "-f", "-"], input=POD, capture_output=True, text=True, timeout=60)
                assert proc.returncode == 0, proc.stderr
                pod = client.get("Pod", "batch", "colo")
                return pod if pod["metadata"]["labels"].get("koordinator.sh/qosClass") == "BE" else None

            pod = wait_until(mutated, message="the profile mutates the pod")
            assert pod["spec"]["priorityClassName"] == "koord-batch" and pod["spec"]["priority"] == 5000
            assert pod["spec"]["containers"][0]["resources"]["requests"]["kubernetes.io/batch-cpu"] == "500"
        finally:
            client.close()
        lp.proc.send_signal(signal.SIGTERM)
        assert lp.finish() == 0
    finally:
        lp.kill()


def test_local_exits_1_when_the_apiserver_dies(tmp_path):
    data = tmp_path / "kdata"
    lp = LocalProcess(data, "--nodes", "1")
    try:
        ready = lp.expect("apiserver      ready")
        pid = int(ready.rsplit("(pid ", 1)[1].rstrip(")"))
        lp.expect("koordinator local: up")
        os.kill(pid, signal.SIGKILL)
        assert lp.finish() == 1
        assert any(line.startswith("apiserver") and "exited (code -9)" in line for line in lp.lines), lp.lines
        assert wait_until(lambda: not processes_mentioning(str(data)), 10)
    finally:
        lp.kill()


def test_local_reports_an_apiserver_that_cannot_start(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run([sys.executable, "-m", "koordinator", "local", "--data-dir", str(tmp_path / "d"),
                               "--port", str(port)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1
    last = [line for line in proc.stdout.splitlines() if line.startswith("apiserver")][-1]
    assert "exited (code 1)" in last and f"cannot listen on 127.0.0.1:{port}" in last
    assert not processes_mentioning(str(tmp_path / "d"))


def test_local_flags():
    for argv, needle in ((["--nodes", "-1"], "--nodes"), (["--port", "70000"], "--port"),
                         (["--shutdown-timeout", "soon"], "--shutdown-timeout")):
        proc = subprocess.run([sys.executable, "-m", "koordinator", "local", *argv], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and needle in proc.stderr, proc.stderr


# -- supervision, with stand-in children ----------------------------------------------------------------

def python_child(tmp_path: Path, name: str, code: str, **kwargs) -> ChildProcess:
    return ChildProcess(name, [sys.executable, "-c", textwrap.dedent(code)], tmp_path / "logs" / f"{name}.log",
                        **kwargs)


def test_child_output_goes_to_its_log_and_sigterm_stops_it(tmp_path):
    lines: list[str] = []
    child = python_child(tmp_path, "talker", """
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(3))
        print("hello from the child", flush=True)
        print("to stderr", file=sys.stderr, flush=True)
        while True:
            time.sleep(1)
    """, on_line=lines.append)
    child.start()
    assert wait_until(lambda: "to stderr" in lines and "hello from the child" in lines, 30), lines
    assert child.poll() is None
    assert stop_children([child], 30) == {"talker": 3}
    log_text = (tmp_path / "logs" / "talker.log").read_text()
    assert "hello from the child" in log_text and "to stderr" in log_text
    assert child.last_line in ("hello from the child", "to stderr")


def test_a_child_ignoring_sigterm_is_killed_with_its_group(tmp_path):
    marker = f"grandchild-{os.getpid()}-{time.monotonic_ns()}"
    child = python_child(tmp_path, "stubborn", f"""
        import signal, subprocess, sys, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                          "time.sleep(600)", "{marker}"])
        print("ready", flush=True)
        while True:
            time.sleep(1)
    """)
    ready = threading.Event()
    child.on_line = lambda line: ready.set() if line == "ready" else None
    child.start()
    assert ready.wait(30)
    assert wait_until(lambda: processes_mentioning(marker), 10)
    codes = stop_children([child], 0.5)
    assert codes == {"stubborn": -signal.SIGKILL}
    assert wait_until(lambda: not processes_mentioning(marker), 10), "the grandchild survived"


def test_hurry_cuts_the_grace_period(tmp_path):
    child = python_child(tmp_path, "slow", """
        import signal, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        print("ready", flush=True)
        time.sleep(600)
    """)
    ready = threading.Event()
    child.on_line = lambda line: ready.set() if line == "ready" else None
    child.start()
    assert ready.wait(30)
    hurry = threading.Event()
    hurry.set()
    started = time.monotonic()
    assert stop_children([child], 60, hurry) == {"slow": -signal.SIGKILL}
    assert time.monotonic() - started < 30


PROBED_ROLE = """
    import os, signal, sys, threading
    from koordinator.runtime.servers import ProbeServer
    state = sys.argv[2]
    def ready():
        text = open(state).read().strip() if os.path.exists(state) else "starting"
        return None if text == "ok" else text
    server = ProbeServer(sys.argv[1], health_checks={}, ready_checks={"work": ready})
    server.start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *a: stop.set())
    while not stop.wait(0.05):
        if os.path.exists(state) and open(state).read().strip() == "die":
            print("fatal: told to die", flush=True)
            sys.exit(4)
    server.stop(5)
"""


def test_role_status_lines_follow_the_child(tmp_path):
    """starting -> ready -> not ready (with the failing check) -> exited (code, last line); one line per change."""
    out = io.StringIO()
    cluster = LocalCluster(LocalConfig(data_dir=tmp_path, out=out))
    health = f"127.0.0.1:{local.free_port()}"
    state = tmp_path / "state"
    child = ChildProcess("manager", [sys.executable, "-c", textwrap.dedent(PROBED_ROLE), health, str(state)],
                         tmp_path / "logs" / "manager.log")
    child.start()
    role = local._Role("manager", child, health)
    try:
        def last_state():
            cluster._check_role(role)
            return out.getvalue().splitlines()[-1] if out.getvalue() else ""

        assert wait_until(lambda: "not ready" in last_state() and "work failed: starting" in last_state(), 30), \
            out.getvalue()
        state.write_text("ok")
        assert wait_until(lambda: " ready " in last_state(), 30), out.getvalue()
        state.write_text("disk full")
        assert wait_until(lambda: "work failed: disk full" in last_state(), 30), out.getvalue()
        lines_before = len(out.getvalue().splitlines())
        cluster._check_role(role)
        cluster._check_role(role)
        assert len(out.getvalue().splitlines()) == lines_before, "unchanged state must not print again"
        state.write_text("die")
        assert wait_until(lambda: "exited (code 4)" in last_state(), 30), out.getvalue()
        assert "fatal: told to die" in last_state() and "manager.log" in last_state()
        assert role.exited
    finally:
        if child.poll() is None:
            stop_children([child], 10)


def test_local_runs_an_implemented_role_and_stops_it_before_the_apiserver(tmp_path, monkeypatch):
    """With a role package present, `local` starts it, sees it ready, and stops it first."""
    pytest.importorskip("koordinator.runtime.runtime")
    fake = tmp_path / "fake_roles" / "scheduler"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(textwrap.dedent("""
        def register(runtime, options):
            runtime.add_runnable("idle", lambda stop: stop.wait())
    """))
    monkeypatch.setattr(roles, "__path__", [*roles.__path__, str(tmp_path / "fake_roles")])
    wrapper = ("import sys, roles; roles.__path__.append(sys.argv.pop(1)); "
               "from koordinator.cli import main; sys.exit(main(sys.argv[1:]))")
    out = io.StringIO()
    data = tmp_path / "kdata"
    missing = next((r for r in roles.ROLE_PACKAGES if not roles.is_implemented(r)), None)
    config = LocalConfig(data_dir=data, nodes=1, port=0, roles=["scheduler", *([missing] if missing else [])], out=out,
                         shutdown_timeout=20, poll_interval=0.1,
                         command=[sys.executable, "-c", wrapper, str(tmp_path / "fake_roles")])
    cluster = LocalCluster(config)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(cluster.run()), daemon=True)
    runner.start()
    try:
        assert wait_until(lambda: any(line.startswith("scheduler") and " ready " in line
                                      for line in out.getvalue().splitlines()), 90), out.getvalue()
        if missing:
            assert f"{missing:<14} not implemented yet" in out.getvalue()
        cmd = next(cmd for _, cmd in processes_mentioning(str(data)) if "--role=scheduler" in cmd)
        assert f"--kubeconfig {data / 'kubeconfig'}" in cmd and "--metrics-addr 127.0.0.1:" in cmd
    finally:
        cluster.request_stop()
        runner.join(60)
    assert result == [0], out.getvalue()
    lines = out.getvalue().splitlines()
    stopped = [line.split()[0] for line in lines if "stopped" in line]
    assert stopped == ["scheduler", "simulator", "apiserver"], lines
    assert "exit code 0" in next(line for line in lines if line.startswith("scheduler") and "stopped" in line)
    assert wait_until(lambda: not processes_mentioning(str(data)), 10)


FAKE_KOORDLET = """
    import os

    def add_flags(parser):
        for flag in ("--proc-root", "--sys-root", "--cgroup-root", "--run-dir"):
            parser.add_argument(flag, required=True)

    def register(runtime, options):
        # The simulator's tree exists before any koordlet starts.
        stat = os.path.join(options.extra["proc_root"], "stat")
        assert os.path.isfile(stat), stat
        assert os.path.isdir(os.path.join(options.extra["cgroup_root"], "cpuacct", "kubepods")), options.extra
        assert os.path.isdir(os.path.join(options.extra["sys_root"], "devices", "system", "cpu"))
        runtime.add_runnable("idle", lambda stop: stop.wait())
"""


def test_local_runs_one_koordlet_per_simulated_node_over_its_tree(tmp_path, monkeypatch):
    """The simulator starts before the roles; each koordlet gets its node's tree and run directory, and a
    status line of its own; the pods of a simulated node become Running."""
    pytest.importorskip("koordinator.runtime.runtime")
    fake = tmp_path / "fake_roles" / "koordlet"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text(textwrap.dedent(FAKE_KOORDLET))
    # Ahead of the real package (written in parallel): this test is about local's wiring only.
    monkeypatch.setattr(roles, "__path__", [str(tmp_path / "fake_roles"), *roles.__path__])
    monkeypatch.delitem(sys.modules, "roles.koordlet", raising=False)
    wrapper = ("import sys, roles; roles.__path__.insert(0, sys.argv.pop(1)); "
               "from koordinator.cli import main; sys.exit(main(sys.argv[1:]))")
    out = io.StringIO()
    data = tmp_path / "kdata"
    config = LocalConfig(data_dir=data, nodes=2, port=0, roles=["koordlet"], out=out, shutdown_timeout=20,
                         poll_interval=0.1, command=[sys.executable, "-c", wrapper, str(tmp_path / "fake_roles")],
                         cgroup_version=1, cgroup_driver="cgroupfs")
    cluster = LocalCluster(config)
    result: list[int] = []
    runner = threading.Thread(target=lambda: result.append(cluster.run()), daemon=True)
    runner.start()
    try:
        def ready(name: str) -> bool:
            lines = out.getvalue().splitlines()
            assert not any(line.startswith(name + " ") and "exited" in line for line in lines), out.getvalue()
            return any(line.startswith(name + " ") and " ready " in line for line in lines)

        assert wait_until(lambda: ready("koordlet/sim-node-0") and ready("koordlet/sim-node-1"), 90), out.getvalue()
        lines = out.getvalue().splitlines()
        assert [line.split()[0] for line in lines if " ready " in line or "starting" in line].index("simulator") < \
            [line.split()[0] for line in lines].index("koordlet/sim-node-0")
        for node in ("sim-node-0", "sim-node-1"):
            cmd = next(cmd for _, cmd in processes_mentioning(str(data)) if f"--node-name {node}" in cmd)
            tree = data / "nodes" / node
            assert "--role=koordlet" in cmd
            assert (f"--proc-root {tree / 'proc'} --sys-root {tree / 'sys'} --cgroup-root {tree / 'cgroup'} "
                    f"--run-dir {data / 'koordlet' / node}") in cmd
            assert (data / "logs" / f"koordlet-{node}.log").is_file()
            assert (tree / "cgroup" / "cpuacct" / "kubepods").is_dir()  # v1, cgroupfs as asked
        sim = next(cmd for _, cmd in processes_mentioning(str(data)) if "simulate-nodes" in cmd)
        assert "--nodes sim-node-0,sim-node-1" in sim and "--cgroup-version 1 --cgroup-driver cgroupfs" in sim

        client = Client.from_kubeconfig(str(data / "kubeconfig"))
        try:
            client.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                           "spec": {"nodeName": "sim-node-1", "containers": [{"name": "c", "image": "nginx"}]}})
            pod = wait_until(lambda: (p := client.get("Pod", "p", "default"))["status"].get("phase") == "Running"
                             and p, 30, message="the simulator runs the pod")
            assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
        finally:
            client.close()
    finally:
        cluster.request_stop()
        runner.join(60)
    assert result == [0], out.getvalue()
    stopped = [line.split()[0] for line in out.getvalue().splitlines() if "stopped" in line]
    assert stopped[-2:] == ["simulator", "apiserver"] and sorted(stopped[:-2]) == [
        "koordlet/sim-node-0", "koordlet/sim-node-1"], out.getvalue()
    assert wait_until(lambda: not processes_mentioning(str(data)), 10)
