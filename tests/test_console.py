"""``koordinator console``: the node-local readers over fake trees, the snapshots against the embedded API
server, ``--once`` as a subprocess, the keys, and one end-to-end run in tmux against ``koordinator local``."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from koordinator.console import render, sources
from koordinator.console.command import ViewState
from koordinator.console.model import Collector, ConsoleError
from koordinator.runtime.client import Client
from tests.waiting import wait_until

# -- fake node-local trees --------------------------------------------------------------------------------


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def proc_tree(root: Path, busy: int, idle: int, cpus: int = 4) -> Path:
    """A /proc with one aggregate cpu line (user=busy, idle=idle) and ``cpus`` per-CPU lines."""
    lines = [f"cpu  {busy} 0 0 {idle} 0 0 0 0 0 0"] + [f"cpu{i} 0 0 0 0 0 0 0 0 0 0" for i in range(cpus)]
    write(root / "stat", "\n".join(lines) + "\nbtime 1\n")
    write(root / "meminfo", "MemTotal:       8388608 kB\nMemFree:        1048576 kB\nMemAvailable:   6291456 kB\n")
    return root


def audit_line(owner: str, reason: str, file: str = "/cg/kubepods.slice/kubepods-besteffort.slice/cpuset.cpus",
               time: str = "2026-01-01T00:00:00.000Z") -> str:
    return json.dumps({"time": time, "file": file, "old": "0-7", "new": "0-3", "owner": owner, "reason": reason})


def run_dir(root: Path) -> Path:
    write(root / "audit" / "audit.log", "\n".join([
        audit_line("CPUSuppress", "suppress BE to 4000m", time="2026-01-01T00:00:01.000Z"),
        "{not json",
        audit_line("GroupIdentity", "LS bvt", file="/cg/kubepods.slice/x/cpu.bvt_warp_ns",
                   time="2026-01-01T00:00:02.000Z"),
        audit_line("CPUSuppress", "suppress BE to 3000m", time="2026-01-01T00:00:03.000Z"),
    ]) + "\n")
    write(root / "hookserver.d" / "koordlet.json", json.dumps(
        {"remote-endpoint": "/run/koordlet.sock", "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer"]}))
    return root


def cgroup_v2(root: Path) -> Path:
    write(root / "cgroup.controllers", "cpuset cpu memory\n")
    be = root / "kubepods.slice" / "kubepods-besteffort.slice"
    write(be / "cpuset.cpus", "0-2,5\n")
    write(be / "cpu.max", "250000 100000\n")
    return root


def test_cpu_meter_counts_cores_from_proc_stat_deltas(tmp_path):
    proc = proc_tree(tmp_path / "proc", busy=1000, idle=1000)
    meter = sources.CpuMeter(str(proc))
    assert meter.sample() is None  # nothing to compare with yet
    proc_tree(proc, busy=1300, idle=1100)  # 300 of 400 ticks busy on 4 CPUs: 3 cores
    assert meter.sample() == pytest.approx(3.0)
    assert sources.read_memory(str(proc)) == (8 << 30, 2 << 30)


def test_be_state_reads_v2_systemd_and_v1_cgroupfs(tmp_path):
    state = sources.be_state(str(cgroup_v2(tmp_path / "v2")))
    assert state is not None
    assert (state.cpuset, state.cpus, state.quota_cores) == ("0-2,5", 4, 2.5)
    v1 = tmp_path / "v1"
    write(v1 / "cpuset" / "kubepods" / "besteffort" / "cpuset.cpus", "1-2\n")
    write(v1 / "cpu" / "kubepods" / "besteffort" / "cpu.cfs_quota_us", "-1\n")
    state = sources.be_state(str(v1))
    assert state is not None
    assert (state.cpuset, state.cpus, state.quota_cores) == ("1-2", 2, None)
    (tmp_path / "empty").mkdir()
    assert sources.be_state(str(tmp_path / "empty")) is None


def test_audit_tail_hooks_and_registration(tmp_path):
    rd = run_dir(tmp_path / "run")
    entries = sources.audit_tail(str(rd))
    assert [e["reason"] for e in entries] == ["suppress BE to 4000m", "LS bvt", "suppress BE to 3000m"]
    assert sources.audit_tail(str(rd), limit=1)[0]["reason"] == "suppress BE to 3000m"
    assert [(h.plugin, h.writes) for h in sources.hook_activity(entries)] == [("GroupIdentity", 1)]
    assert sources.hook_registration(str(rd))["remote-endpoint"] == "/run/koordlet.sock"
    assert sources.audit_tail(str(tmp_path)) == []  # no audit log: nothing, not an error


def test_audit_tail_skips_the_cut_first_line_of_a_big_log(tmp_path):
    lines = [audit_line("CPUSuppress", f"suppress BE to {i}m") for i in range(1000)]
    write(tmp_path / "audit" / "audit.log", "\n".join(lines) + "\n")
    entries = sources.audit_tail(str(tmp_path), limit=10_000)
    assert entries[-1]["reason"] == "suppress BE to 999m"
    assert 0 < len(entries) < 1000 and all("owner" in e for e in entries)


def test_a_missing_source_directory_is_one_error_naming_the_flag(tmp_path):
    with pytest.raises(sources.SourceError, match=r"--run-dir: Invalid value: .*nope.*: not a directory"):
        sources.NodeLocal(run_dir=str(tmp_path / "nope"))


def test_sparkline_and_units():
    assert render.sparkline([0, 4, 8], top=8) == "▁▅█"
    assert render.sparkline([]) == ""
    assert render.cores(7998) == "8.00" and render.cores(None) == "-"
    assert render.size(3 << 30) == "3.0Gi"


def test_keys_switch_panes_filter_and_quit():
    state = ViewState(panes=["node", "cluster"])
    state.key("\t")
    assert state.current == "cluster"
    state.key("\t")
    assert state.current == "node"
    for k in "/ab":
        state.key(k)
    assert state.typing == "ab" and state.needle == ""
    state.key("q")  # typed into the prompt, not a quit
    state.key("\x7f")
    state.key("\r")
    assert (state.needle, state.typing, state.quit) == ("ab", None, False)
    state.key("/")
    state.key("x")
    state.key("\x1b")  # Esc: the filter stays as it was
    assert (state.needle, state.typing) == ("ab", None)
    state.key("q")
    assert state.quit


# -- snapshots against the embedded API server -----------------------------------------------------------

@pytest.fixture(scope="module")
def seeded(crd_client: Client) -> Iterator[dict]:
    """A node with a NodeMetric, a NodeSLO, pods (LS, BE, another node's, a pending one), an eviction event,
    an ElasticQuota and a PodGroup."""
    suffix = uuid.uuid4().hex[:6]
    node, other, ns = f"console-{suffix}", f"console-other-{suffix}", f"console-{suffix}"
    c = crd_client
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in (node, other):
        created = c.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}})
        created["status"] = {"allocatable": {"cpu": "32", "memory": "64Gi", "kubernetes.io/batch-cpu": "12000",
                                             "kubernetes.io/batch-memory": "20Gi"},
                             "conditions": [{"type": "Ready", "status": "True"}]}
        c.update_status(created)

    def pod(name: str, node_name: str, cpu: str, *, labels: dict | None = None) -> dict:
        resources = {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"cpu": "4", "memory": "2Gi"}} if cpu else {}
        spec: dict = {"containers": [{"name": "main", "image": "busybox", "resources": resources}]}
        if node_name:
            spec["nodeName"] = node_name
        return c.create({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                         "metadata": {"name": name, "namespace": ns, "labels": labels or {}}})

    pod("web", node, "2")
    pod("batch", node, "", labels={"koordinator.sh/qosClass": "BE"})
    pod("elsewhere", other, "1")
    pending = pod("waiting", "", "1")
    pending["status"] = {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/2 nodes are available: 2 Insufficient cpu."}]}
    c.update_status(pending)
    metric = c.create({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric", "metadata": {"name": node}})
    metric["status"] = {"updateTime": "2026-01-01T00:00:00Z",
                        "nodeMetric": {"nodeUsage": {"resources": {"cpu": "9500m", "memory": "8Gi"}}},
                        "podsMetric": [{"namespace": ns, "name": "web",
                                        "podUsage": {"resources": {"cpu": "7998m", "memory": "512Mi"}}}]}
    c.update_status(metric)
    c.create({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO", "metadata": {"name": node},
              "spec": {"resourceUsedThresholdWithBE": {"enable": True, "cpuSuppressThresholdPercent": 55,
                                                        "cpuSuppressPolicy": "cpuset"}}})
    for event, host, target in (("ev-mine", node, "gone-be"), ("ev-other", other, "other-be")):
        c.create({"apiVersion": "v1", "kind": "Event", "metadata": {"name": event, "namespace": ns},
                  "involvedObject": {"kind": "Pod", "namespace": ns, "name": target},
                  "reason": "EvictPodSuccess", "message": f"evict Pod:{ns}/{target}, reason: evict by cpu",
                  "source": {"component": "koordlet", "host": host}, "lastTimestamp": "2026-01-01T00:00:00Z",
                  "count": 1, "type": "Warning"})
    c.create({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
              "metadata": {"name": f"quota-{suffix}", "namespace": ns},
              "spec": {"min": {"cpu": "4"}, "max": {"cpu": "8"}}})
    c.create({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
              "metadata": {"name": f"gang-{suffix}", "namespace": ns}, "spec": {"minMember": 3}})
    yield {"node": node, "other": other, "ns": ns, "suffix": suffix}


def test_node_snapshot_from_the_api_and_local_sources(crd_client, seeded, tmp_path):
    local = sources.NodeLocal(run_dir=str(run_dir(tmp_path / "run")), cgroup_root=str(cgroup_v2(tmp_path / "cg")))
    snap = Collector(crd_client, node=seeded["node"], local=local).node()
    ns = seeded["ns"]
    assert (snap.cpu_allocatable, snap.batch_cpu, snap.cpu_usage) == (32000, 12000, 9500)
    assert snap.usage_source.startswith("NodeMetric") and snap.cpu_history == [9.5]
    groups = {qos: [p.key for p in rows] for qos, rows in snap.pods_by_qos()}
    assert groups == {"LS": [f"{ns}/web"], "BE": [f"{ns}/batch"]}
    web = next(p for p in snap.pods if p.name == "web")
    assert (web.cpu_usage, web.cpu_request, web.cpu_limit, web.memory_request) == (7998, 2000, 4000, 1 << 30)
    assert snap.thresholds == {"enable": True, "cpuSuppressThresholdPercent": 55, "cpuSuppressPolicy": "cpuset"}
    assert [e.object for e in snap.evictions] == [f"{ns}/gone-be"]  # the other node's eviction is not here
    assert snap.be is not None and snap.be.cpus == 4 and snap.be_reason == "suppress BE to 3000m"
    assert [h.plugin for h in snap.hooks] == ["GroupIdentity"]
    text = render.plain(render.node_view(snap), 200)
    assert "\x1b" not in text
    web_line = next(line for line in text.splitlines() if f"{ns}/web" in line)
    assert "8.00" in web_line.split() and "2.00" in web_line.split()
    assert "cpuSuppressThresholdPercent=55" in text and "gone-be" in text
    filtered = render.plain(render.node_view(snap, "batch"), 200)
    assert f"{ns}/batch" in filtered and f"{ns}/web" not in filtered


def test_cluster_snapshot(crd_client, seeded):
    snap = Collector(crd_client).cluster()
    rows = {n.name: n for n in snap.nodes}
    mine = rows[seeded["node"]]
    assert (mine.cpu_usage, mine.batch_cpu, mine.pods) == (9500, 12000, 2)
    assert rows[seeded["other"]].cpu_usage is None and rows[seeded["other"]].pods == 1
    assert (f"{seeded['ns']}/waiting", "0/2 nodes are available: 2 Insufficient cpu.") in snap.pending
    assert any(q["name"] == f"{seeded['ns']}/quota-{seeded['suffix']}" and q["max"] == "cpu=8" for q in snap.quotas)
    assert any(g["name"].endswith(f"gang-{seeded['suffix']}") and g["minMember"] == "3" for g in snap.gangs)
    assert {e.object for e in snap.evictions} >= {f"{seeded['ns']}/gone-be", f"{seeded['ns']}/other-be"}
    text = render.plain(render.cluster_view(snap, seeded["suffix"]), 200)
    assert seeded["node"] in text and "Insufficient cpu" in text and "console-" in text


def test_unknown_node_is_one_error(crd_client):
    with pytest.raises(ConsoleError, match="node 'no-such-node' not found"):
        Collector(crd_client, node="no-such-node").node()


# -- the command ------------------------------------------------------------------------------------------

def console(*args: str, timeout: float = 30) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "koordinator", "console", *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def test_once_prints_a_plain_snapshot_of_both_views(crd_server, seeded, tmp_path):
    proc = console("--kubeconfig", str(crd_server.kubeconfig), "--node-name", seeded["node"],
                   "--run-dir", str(run_dir(tmp_path / "run")), "--cgroup-root", str(cgroup_v2(tmp_path / "cg")),
                   "--proc-root", str(proc_tree(tmp_path / "proc", 10, 10)), "--once", "--width", "200")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "\x1b" not in out
    assert "== node view ==" in out and "== cluster view ==" in out
    web_line = next(line for line in out.splitlines() if f"{seeded['ns']}/web" in line)
    assert "8.00" in web_line.split()
    assert "0-2,5 (4 cpus)" in out and "suppress BE to 3000m" in out and "Insufficient cpu" in out


def test_without_a_tty_the_console_prints_once_too(crd_server, seeded):
    proc = console("--kubeconfig", str(crd_server.kubeconfig), "--filter", seeded["node"], "--width", "200")
    assert proc.returncode == 0, proc.stderr
    assert "== cluster view ==" in proc.stdout and seeded["node"] in proc.stdout
    assert seeded["other"] not in proc.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("case", ["unreachable", "no-node", "bad-run-dir"])
def test_errors_are_one_line(crd_server, tmp_path, case):
    kubeconfig = str(crd_server.kubeconfig)
    args = ["--once"]
    if case == "unreachable":
        kubeconfig = str(tmp_path / "kubeconfig")
        write(Path(kubeconfig), json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{_free_port()}"}}],
            "users": [{"name": "u", "user": {}}],
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
        expected = "cannot reach the API server"
    elif case == "no-node":
        args += ["--node-name", "no-such-node"]
        expected = "node 'no-such-node' not found"
    else:
        args += ["--node-name", "x", "--run-dir", str(tmp_path / "missing")]
        expected = "--run-dir: Invalid value"
    proc = console("--kubeconfig", kubeconfig, *args)
    assert proc.returncode == 1
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and expected in lines[0], proc.stderr


# -- end to end: koordinator local, the console in tmux ----------------------------------------------------

class Tmux:
    """One tmux server of the test's own (its own socket), one session running a command."""

    def __init__(self, socket_name: str) -> None:
        self.base = ["tmux", "-L", socket_name]

    def __call__(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.base, *args], capture_output=True, text=True, timeout=10)

    def screen(self) -> str:
        return self("capture-pane", "-p", "-t", "console").stdout


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (apt-get install tmux)")
def test_console_in_tmux_against_koordinator_local(tmp_path):
    from tests.local_cluster import running_cluster

    node = "sim-node-0"
    with running_cluster(tmp_path, "--nodes", "1") as cluster:
        cluster.apply(json.dumps({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "busy8", "namespace": "default", "annotations": {"sim.koordinator.sh/cpu": "8"}},
            "spec": {"schedulerName": "koord-scheduler", "containers": [
                {"name": "main", "image": "busybox",
                 "resources": {"requests": {"cpu": "1", "memory": "256Mi"},
                               "limits": {"cpu": "10", "memory": "1Gi"}}}]}}))
        exit_file = tmp_path / "console-exit"
        command = (f"{sys.executable} -m koordinator console --data-dir {cluster.lp.data_dir} --node-name {node} "
                   f"--refresh 0.5; echo $? > {exit_file}")
        tmux = Tmux(f"koordinator-console-{uuid.uuid4().hex[:8]}")
        # Not TMUX (a test run inside tmux), nor COLUMNS/LINES (pytest-xdist's workers set 80x24): the console must
        # take the pane's 200 columns.
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "COLUMNS", "LINES")}
        started = subprocess.run([*tmux.base, "new-session", "-d", "-x", "200", "-y", "50", "-s", "console",
                                  "sh", "-c", command], capture_output=True, text=True, timeout=10, env=env)
        assert started.returncode == 0, started.stderr
        try:
            def pod_cores() -> float | None:
                for line in tmux.screen().splitlines():
                    if "default/busy8" in line:
                        fields = line.split()
                        used = fields[fields.index("default/busy8") + 3]  # phase, priority, cpu used
                        # The first report after the pod starts covers part of a window: wait for a full one.
                        if used != "-" and 7.5 <= float(used) <= 8.5:
                            return float(used)
                return None

            try:  # the pod's usage reaches the view with the koordlet's next NodeMetric report (slow on a busy machine)
                cores = wait_until(pod_cores, timeout=120, interval=0.2, message="busy8's usage in the node view")
            except AssertionError:
                print(tmux.screen(), file=sys.stderr)
                raise
            screen = tmux.screen()
            assert f"node {node}" in screen and "Pods by QoS class" in screen
            tmux("send-keys", "-t", "console", "Tab")
            wait_until(lambda: "Nodes" in tmux.screen() and "batch-cpu" in tmux.screen(), timeout=10,
                       message="the cluster view after tab")
            cluster_line = next(line for line in tmux.screen().splitlines() if line.strip().startswith(node))
            assert "32.00" in cluster_line.split()
            tmux("send-keys", "-t", "console", "q")
            wait_until(lambda: exit_file.exists() and exit_file.read_text().strip(), timeout=10,
                       message="the console to quit on q")
            assert exit_file.read_text().strip() == "0"
        finally:
            tmux("kill-server")
