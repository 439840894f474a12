"""`koordinator explain pod NS/NAME` and the scheduler's per-pod diagnosis behind it (issue 22, part 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from koordinator.apis.explanation import DETAILS_ANNOTATION, GATE, KIND
from koordinator.explain import render
from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator_roles.scheduler import explain
from tests.scheduler_harness import NS, InProcessScheduler, node, pod
from tests.test_scheduler_loadaware_role import bound_to, node_metric, unschedulable_message
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parents[1]


def run_explain(*args: str, kubeconfig: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "koordinator", "explain", *args]
    if kubeconfig is not None:
        argv += ["--kubeconfig", str(kubeconfig)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def explanation_of(api: Client, name: str) -> dict | None:
    try:
        return api.get(KIND, name, NS)
    except NotFound:
        return None


def failed_details(obj: dict) -> dict[tuple[str, str], list[str]]:
    details = obj["status"]["detailedExplanation"][0]["scheduleExplanation"]["nodeFailedDetails"]
    return {(d["failedPlugin"], d["reason"]): d["failedNodes"] for d in details}


def hot_cold_stale(api: Client) -> None:
    """Three nodes: "hot" over LoadAwareScheduling's cpu threshold (65%), "cold" under it, "stale" with an
    expired NodeMetric (the default profile's LoadAwareScheduling rejects it)."""
    for name in ("hot", "cold", "stale"):
        api.create(node(name, cpu="4"))
    node_metric(api, "hot", "2800m")   # 70%
    node_metric(api, "cold", "400m")   # 10%
    node_metric(api, "stale", "400m", age=600)


PINNED = {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["hot", "stale"]}]}]}}}}


def test_loadaware_rejection_and_scores_are_written_and_explained(fresh_crd_server, scheduler_api):
    hot_cold_stale(scheduler_api)
    kubeconfig = fresh_crd_server.kubeconfig
    with InProcessScheduler(kubeconfig, "--feature-gates", f"{GATE}=true") as sched:
        scheduler_api.create(pod("web", NS, cpu="500m"))
        scheduler_api.create(pod("pinned", NS, cpu="500m", spec=PINNED))
        wait_until(lambda: bound_to(scheduler_api, "web") == "cold", message="web placed on the cold node")
        wait_until(lambda: unschedulable_message(scheduler_api, "pinned"), message="pinned unschedulable")

        # The rejected pod: per plugin, per reason, the nodes (recorded in memory and written as the object).
        recorded = sched.scheduler.explanations.get(f"{NS}/pinned")
        assert recorded is not None and not recorded.schedulable
        assert {(d.plugin, d.reason): d.nodes for d in recorded.failed} == {
            ("LoadAwareScheduling", "node(s) cpu usage exceed threshold"): ("hot",),
            ("LoadAwareScheduling", "node(s) nodeMetric expired"): ("stale",),
            ("NodeAffinity", "node(s) didn't match Pod's node affinity/selector"): ("cold",)}
        obj = wait_until(lambda: explanation_of(scheduler_api, "pinned"), message="pinned's ScheduleExplanation")
        obj = wait_until(lambda: (o := explanation_of(scheduler_api, "pinned")) and o.get("status") and o,
                         message="its status")
        assert obj["spec"]["questionObjectKey"] == f"{NS}/pinned"
        assert obj["status"]["schedulable"] is False
        assert obj["status"]["failedMessage"].startswith("0/3 nodes are available: 1 node(s) cpu usage exceed")
        assert failed_details(obj) == {
            ("LoadAwareScheduling", "node(s) cpu usage exceed threshold"): ["hot"],
            ("LoadAwareScheduling", "node(s) nodeMetric expired"): ["stale"],
            ("NodeAffinity", "node(s) didn't match Pod's node affinity/selector"): ["cold"]}

        # The placed pod: the chosen node's per-plugin scores beside the others' (only "cold" passed the filters,
        # so it was not scored: the chosen node alone).
        web = wait_until(lambda: (o := explanation_of(scheduler_api, "web")) and o.get("status") and o,
                         message="web's ScheduleExplanation")
        assert web["status"]["schedulable"] is True
        result = web["status"]["detailedExplanation"][0]["scheduleExplanation"]["feasibleSchedulingResult"]
        assert [r["nodeName"] for r in result] == ["cold"]
        assert json.loads(web["metadata"]["annotations"][DETAILS_ANNOTATION])["chosenNode"] == "cold"

        out = run_explain("pod", f"{NS}/pinned", kubeconfig=kubeconfig)
        assert out.returncode == 0, out.stderr
        assert "not bound to a node" in out.stdout and "unschedulable" in out.stdout
        text = out.stdout
        plugin_at = text.index("  LoadAwareScheduling\n")
        assert "node(s) cpu usage exceed threshold: 1 node(s): hot" in text[plugin_at:]
        assert "node(s) nodeMetric expired: 1 node(s): stale" in text[plugin_at:]
        assert "node(s) didn't match Pod's node affinity/selector: 1 node(s): cold" in text

        # Deleting a pod drops its in-memory explanation.
        scheduler_api.delete("Pod", "pinned", NS)
        wait_until(lambda: sched.scheduler.explanations.get(f"{NS}/pinned") is None, message="forgotten")


def test_bound_pod_shows_scores_of_the_chosen_and_next_best_nodes(fresh_crd_server, scheduler_api):
    # Four schedulable nodes at different loads: LoadAwareScheduling prefers the least loaded one.
    for name, cpu in (("n1", "400m"), ("n2", "800m"), ("n3", "1200m"), ("n4", "1600m")):
        scheduler_api.create(node(name, cpu="4"))
        node_metric(scheduler_api, name, cpu)
    kubeconfig = fresh_crd_server.kubeconfig
    with InProcessScheduler(kubeconfig, "--feature-gates", f"{GATE}=true") as sched:
        scheduler_api.create(pod("api", NS, cpu="500m"))
        chosen = wait_until(lambda: bound_to(scheduler_api, "api"), message="api bound")
        recorded = sched.scheduler.explanations.get(f"{NS}/api")
        assert recorded.schedulable and recorded.chosen_node == chosen
        assert "LoadAwareScheduling" in recorded.plugins
        # The chosen node first, then the next best by total; at most NEXT_BEST of them.
        assert recorded.nodes[0].node == chosen and len(recorded.nodes) == 1 + explain.NEXT_BEST
        totals = [n.total for n in recorded.nodes[1:]]
        assert totals == sorted(totals, reverse=True) and recorded.nodes[0].total >= totals[0]
        assert {n.node for n in recorded.nodes} == {"n1", "n2", "n3", "n4"}
        la = recorded.plugins.index("LoadAwareScheduling")
        by_node = {n.node: n.scores[la] for n in recorded.nodes}
        assert by_node["n1"] > by_node["n2"] > by_node["n3"] > by_node["n4"]
        wait_until(lambda: (o := explanation_of(scheduler_api, "api")) and o.get("status"), message="written")

        out = run_explain("pod", f"{NS}/api", kubeconfig=kubeconfig)
        assert out.returncode == 0, out.stderr
        assert f"bound to {chosen}" in out.stdout and "schedulable" in out.stdout
        table = out.stdout[out.stdout.index("Scores"):].splitlines()
        header = table[1].split()
        assert header[:2] == ["PLUGIN", "WEIGHT"] and header[2] == f"{chosen}*"
        row = next(line.split() for line in table if line.split()[:1] == ["LoadAwareScheduling"])
        weight = recorded.weights[la]
        assert [int(v) for v in row[2:]] == [n.scores[la] * weight for n in recorded.nodes]
        total_row = next(line.split() for line in table if line.split()[:1] == ["TOTAL"])
        assert [int(v) for v in total_row[1:]] == [n.total for n in recorded.nodes]


def test_without_the_gate_nothing_is_written_and_explain_says_so(fresh_crd_server, scheduler_api):
    scheduler_api.create(node("small", cpu="1"))
    kubeconfig = fresh_crd_server.kubeconfig
    with InProcessScheduler(kubeconfig) as sched:
        scheduler_api.create(pod("big", NS, cpu="2"))
        message = wait_until(lambda: unschedulable_message(scheduler_api, "big"), message="big unschedulable")
        recorded = sched.scheduler.explanations.get(f"{NS}/big")
        assert [(d.plugin, d.reason, d.nodes) for d in recorded.failed] == [
            ("NodeResourcesFit", "Insufficient cpu", ("small",))]
        sched.scheduler.wait_idle(10)
        assert explanation_of(scheduler_api, "big") is None
        # KUBECONFIG is how kubectl finds the cluster without a flag.
        out = run_explain("pod", f"{NS}/big", env={"KUBECONFIG": str(kubeconfig)})
    assert out.returncode == 0, out.stderr
    assert f"PodScheduled=False (Unschedulable): {message}" in out.stdout
    assert f"--feature-gates={GATE}=true" in out.stdout


def test_missing_pod_is_one_line_and_exit_1(fresh_crd_server, scheduler_api):
    out = run_explain("pod", f"{NS}/nosuch", kubeconfig=fresh_crd_server.kubeconfig)
    assert out.returncode == 1
    assert out.stdout == ""
    assert out.stderr == f"koordinator explain: error: pod {NS}/nosuch not found\n"


def test_bad_arguments_are_usage_errors_naming_the_value(tmp_path):
    out = run_explain("node", "a/b")
    assert out.returncode == 2 and '"node"' in out.stderr and len(out.stderr.splitlines()) == 1
    out = run_explain("pod", "noslash")
    assert out.returncode == 2 and '"noslash"' in out.stderr and "NAMESPACE/NAME" in out.stderr
    out = run_explain("pod", "a/b", kubeconfig=tmp_path / "missing")
    assert out.returncode == 1 and "missing: no such file" in out.stderr


def test_recorder_keeps_the_latest_per_pod_bounded_and_writes_only_changes():
    recorder = explain.ExplanationRecorder(capacity=2)

    def failed(name: str, message: str) -> explain.CycleExplanation:
        return explain.CycleExplanation(namespace="ns", name=name, uid=f"uid-{name}", schedulable=False,
                                        message=message, at=1.0)

    recorder.record(failed("a", "first"))
    recorder.record(failed("b", "first"))
    assert recorder.claim_write(failed("a", "first"))
    # The same verdict again (at another time) is not written again; a new one is.
    recorder.record(failed("a", "first"))
    assert not recorder.claim_write(explain.CycleExplanation(namespace="ns", name="a", uid="uid-a", schedulable=False,
                                                             message="first", at=60.0))
    recorder.record(failed("a", "second"))
    assert recorder.claim_write(failed("a", "second"))
    # A third pod evicts the least recently recorded one.
    recorder.record(failed("c", "first"))
    assert len(recorder) == 2 and recorder.get("ns/b") is None and recorder.get("ns/a").message == "second"
    recorder.forget("ns/a")
    assert recorder.get("ns/a") is None and not recorder.claim_write(failed("a", "second"))
    # A failed write lets the next cycle write it again.
    recorder.record(failed("c", "first"))
    assert recorder.claim_write(failed("c", "first"))
    recorder.unclaim_write(failed("c", "first"))
    assert recorder.claim_write(failed("c", "first"))


def test_render_caps_node_lists_and_names_pre_filter_rejections():
    pod_obj = {"metadata": {"namespace": "ns", "name": "p", "uid": "u1"}, "spec": {}}
    obj = {"metadata": {"ownerReferences": [{"kind": "Pod", "uid": "u1"}],
                        "annotations": {DETAILS_ANNOTATION: json.dumps({"failedNodeCounts": [250, 3]})}},
           "status": {"schedulable": False, "failedMessage": "0/253 nodes are available: ...",
                      "detailedExplanation": [{"scheduleExplanation": {"nodeFailedDetails": [
                          {"failedPlugin": "NodeResourcesFit", "reason": "Insufficient cpu",
                           "failedNodes": ["n1", "n2"]},
                          {"failedPlugin": "Coscheduling", "reason": "gang not ready", "failedNodes": []}]}}]}}
    text = render(pod_obj, obj)
    assert "Insufficient cpu: 250 node(s): n1, n2 (+248 more)" in text
    assert "gang not ready: all 3 node(s) (rejected before filtering)" in text
    # An explanation owned by an earlier pod of the same name is not this pod's.
    other = {**pod_obj, "metadata": {**pod_obj["metadata"], "uid": "u2"}}
    assert "No ScheduleExplanation for this pod" in render(other, obj)


def test_koordinator_local_runs_the_scheduler_with_the_gate_on(tmp_path):
    import koordinator_roles.scheduler as scheduler_role
    from koordinator.cli import parse_role_options
    from koordinator_roles import LocalContext

    context = LocalContext(client=None, kubeconfig=tmp_path / "kubeconfig", data_dir=tmp_path,  # type: ignore[arg-type]
                           namespace="koordinator-system", nodes=(), roles=("scheduler",), free_port=lambda: 0)
    setup = scheduler_role.local_setup(context)
    options = parse_role_options("scheduler", ["--role=scheduler", *setup.flags], scheduler_role)
    assert options.feature_enabled(GATE) and options.config == str(tmp_path / "scheduler-config.yaml")
