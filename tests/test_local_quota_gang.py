"""ElasticQuota and Coscheduling end to end on ``koordinator local`` (one simulated node, 32 CPUs), driven with
kubectl as a user would: the shipped scheduler configuration, the manager's webhooks and the local workload
controllers."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.local_cluster import Cluster, running_cluster
from tests.waiting import wait_until

QUOTA_LABEL = "quota.scheduling.koordinator.sh/name"
GANG = "gang.scheduling.koordinator.sh/"
WAIT = 60


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("local-quota"), "--nodes", "1") as c:
        yield c


def pod(name: str, namespace: str, cpu: str, *, labels: dict | None = None, annotations: dict | None = None,
        priority_class: str = "") -> str:
    spec: dict = {"schedulerName": "koord-scheduler",
                  "containers": [{"name": "main", "image": "busybox",
                                  "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "spec": spec,
                       "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                                    "annotations": annotations or {}}})


def quota(name: str, namespace: str, mn: int, mx: int, *, parent: str = "", is_parent: bool = False) -> str:
    labels = {"quota.scheduling.koordinator.sh/parent": parent} if parent else {}
    if is_parent:
        labels["quota.scheduling.koordinator.sh/is-parent"] = "true"
    return json.dumps({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                       "metadata": {"name": name, "namespace": namespace, "labels": labels},
                       "spec": {"min": {"cpu": str(mn)}, "max": {"cpu": str(mx)}}})


def test_a_quota_tree_limits_lends_and_takes_back(cluster):
    ns = "teams"
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    for text in (quota("team", ns, 8, 16, is_parent=True), quota("a", ns, 4, 8, parent="team"),
                 quota("b", ns, 4, 16, parent="team")):
        cluster.apply(text)
    # Something outside the tree uses half of the 32-CPU node: the tree's total is the other half.
    cluster.apply(pod("filler", "default", "16"))
    wait_until(lambda: cluster.node_of("filler", "default"), WAIT, "filler bound")

    # a alone: up to its max (8), the 9th pod stays Pending with Koordinator's message.
    for i in range(9):
        cluster.apply(pod(f"a{i}", ns, "1", labels={QUOTA_LABEL: "a"}))
    for i in range(8):
        wait_until(lambda i=i: cluster.node_of(f"a{i}", ns), WAIT, f"a{i} bound")
    message = wait_until(lambda: cluster.unschedulable("a8", ns), WAIT, "a8 unschedulable")
    assert ("Insufficient quotas, quotaName: a, runtime: cpu:8, used: cpu:8, pod's request: cpu:1, "
            "exceedDimensions: [cpu]") in message, message
    wait_until(lambda: any("Insufficient quotas, quotaName: a" in m
                           for m in cluster.events("a8", ns, "FailedScheduling")),
               WAIT, "a8's FailedScheduling event")  # written after the condition, asynchronously
    proc = cluster.kubectl("get", "pod", "a8", "-n", ns, "-o", "jsonpath={.status.phase}")
    assert proc.stdout == "Pending"
    cluster.delete_namespace_pods(ns)

    # b borrows a's idle min: 16 pods of 1 CPU (b's min is 4) fill the node.
    for i in range(16):
        cluster.apply(pod(f"b{i}", ns, "1", labels={QUOTA_LABEL: "b"}))
    for i in range(16):
        wait_until(lambda i=i: cluster.node_of(f"b{i}", ns), WAIT, f"b{i} bound")
    wait_until(lambda: json.loads(cluster.client.get("ElasticQuota", "b", ns)["metadata"].get("annotations", {})
                                  .get("quota.scheduling.koordinator.sh/runtime", "{}")).get("cpu") == "16",
               WAIT, "b's runtime annotation: 16 CPUs, a's idle min included")

    # a asks for its min back: the node is full, so b's borrowed pods are preempted, as many as a needs.
    for i in range(4):
        cluster.apply(pod(f"a{i}", ns, "1", labels={QUOTA_LABEL: "a"}))
    for i in range(4):
        wait_until(lambda i=i: cluster.node_of(f"a{i}", ns), WAIT, f"a{i} bound after taking back")
    preempted = [f"b{i}" for i in range(16) if cluster.gone(f"b{i}", ns)]
    assert len(preempted) == 4, preempted
    for name in preempted:
        assert wait_until(lambda name=name: cluster.events(name, ns, "Preempted"), WAIT, f"{name} event")[0] \
            .startswith("Preempted by pod ")
    cluster.delete_namespace_pods(ns)
    cluster.delete_namespace_pods("default")


def gang_pod(name: str, namespace: str, gang: str, cpu: str, min_available: int, **extra: str) -> str:
    annotations = {GANG + "name": gang, GANG + "min-available": str(min_available),
                   **{GANG + k.replace("_", "-"): v for k, v in extra.items()}}
    return pod(name, namespace, cpu, annotations=annotations)


def test_a_gang_is_bound_all_or_nothing(cluster):
    ns = "gangs"
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    cluster.apply(pod("blocker", ns, "8"))
    wait_until(lambda: cluster.node_of("blocker", ns), WAIT, "blocker bound")
    # Room for two of three 10-CPU members: none is bound, each says why.
    names = [f"g{i}" for i in range(3)]
    for name in names:
        cluster.apply(gang_pod(name, ns, "trio", "10", 3))
    for name in names:
        wait_until(lambda name=name: cluster.events(name, ns, "FailedScheduling"), WAIT, f"{name} FailedScheduling")
    assert not any(cluster.node_of(n, ns) for n in names)
    reasons = {n: cluster.events(n, ns, "FailedScheduling")[-1] for n in names}
    assert any("Insufficient cpu" in r for r in reasons.values()), reasons
    assert all("Insufficient cpu" in r or "gang" in r.lower() or "attempted" in r for r in reasons.values()), reasons
    # Room frees: all three are bound together.
    cluster.kubectl("delete", "pod", "blocker", "-n", ns, "--wait=true")
    for name in names:
        wait_until(lambda name=name: cluster.node_of(name, ns), WAIT, f"{name} bound once room freed")
    cluster.delete_namespace_pods(ns)

    # A Strict gang whose second member can never fit: after its waiting time the whole gang is released.
    cluster.apply(gang_pod("s0", ns, "strict", "1", 2, waiting_time="3s"))
    cluster.apply(gang_pod("s1", ns, "strict", "64", 2, waiting_time="3s"))
    # A round may also end with "all pending pods ... attempted" before s1 was tried; the round that tries
    # s1 releases s0 with the gang's reason.
    wait_until(lambda: 'GangGroup "gangs/strict" gets rejected' in cluster.unschedulable("s0", ns), WAIT,
               "s0 released with the gang")
    assert not cluster.node_of("s0", ns) and not cluster.node_of("s1", ns)
    cluster.delete_namespace_pods(ns)


DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: gangs}
spec:
  replicas: 3
  selector: {matchLabels: {app: trainer}}
  template:
    metadata:
      labels: {app: trainer}
      annotations:
        gang.scheduling.koordinator.sh/name: trainer
        gang.scheduling.koordinator.sh/min-available: "3"
    spec:
      schedulerName: koord-scheduler
      containers: [{name: main, image: busybox, resources: {requests: {cpu: "2"}}}]
"""
JOB = """
apiVersion: batch/v1
kind: Job
metadata: {name: allreduce, namespace: gangs}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations:
        gang.scheduling.koordinator.sh/name: allreduce
        gang.scheduling.koordinator.sh/min-available: "2"
        sim.koordinator.sh/duration: 1s
    spec:
      schedulerName: koord-scheduler
      restartPolicy: Never
      containers: [{name: main, image: busybox, resources: {requests: {cpu: "2"}}}]
"""


def test_deployment_and_job_gangs(cluster):
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gangs"}}))
    cluster.apply(DEPLOYMENT)
    proc = cluster.kubectl("rollout", "status", "deployment/trainer", "-n", "gangs", "--timeout=60s")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    pods = cluster.client.list("Pod", "gangs", label_selector="app=trainer")["items"]
    assert len(pods) == 3 and all(p["spec"].get("nodeName") for p in pods)
    # The gang was allowed together: PreBind wrote the gang group on every member, with the group's size.
    groups = [(p["metadata"].get("annotations") or {}).get("internal.scheduling.koordinator.sh/bind-gang-group-id")
              for p in pods]
    assert groups == ["gangs/trainer"] * 3, groups
    counts = [(p["metadata"].get("annotations") or {}).get("internal.scheduling.koordinator.sh/bind-gang-member-count")
              for p in pods]
    assert counts == ["3"] * 3, counts
    cluster.apply(JOB)
    proc = cluster.kubectl("wait", "--for=condition=complete", "job/allreduce", "-n", "gangs", "--timeout=60s")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cluster.kubectl("delete", "deployment/trainer", "job/allreduce", "-n", "gangs", "--wait=true")


def test_bad_quotas_and_gang_annotations_are_refused_naming_the_field(cluster):
    ns = "bad"
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    cluster.apply(quota("parent", ns, 4, 8, is_parent=True))
    cluster.apply(quota("child", ns, 2, 8, parent="parent"))
    before = cluster.client.get("ElasticQuota", "child", ns)
    proc = cluster.kubectl("apply", "-f", "-", input=quota("child", ns, 10, 8, parent="parent"))
    assert proc.returncode != 0
    assert "spec.min[cpu]: 10 > spec.max[cpu]: 8" in proc.stderr, proc.stderr
    proc = cluster.kubectl("apply", "-f", "-", input=quota("child", ns, 6, 8, parent="parent"))
    assert proc.returncode != 0
    assert "child" in proc.stderr and "parent" in proc.stderr and "spec.min[cpu]" in proc.stderr, proc.stderr
    after = cluster.client.get("ElasticQuota", "child", ns)
    # The quota controller may write status meanwhile; the refused updates changed neither spec nor generation.
    assert after["spec"] == before["spec"] and after["metadata"]["generation"] == before["metadata"]["generation"]
    proc = cluster.kubectl("apply", "-f", "-", input=gang_pod("g", ns, "g", "1", 2).replace('"2"', '"two"'))
    assert proc.returncode != 0
    assert 'gang.scheduling.koordinator.sh/min-available: Invalid value: "two"' in proc.stderr, proc.stderr
    assert cluster.kubectl("get", "pod", "g", "-n", ns).returncode != 0, "nothing stored"



def test_a_gang_that_does_not_fit_its_quota_is_rejected_as_a_whole(cluster):
    ns = "gangquota"
    cluster.apply(json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
    cluster.apply(quota("small", ns, 2, 2))
    names = [f"m{i}" for i in range(3)]
    for name in names:
        text = json.loads(gang_pod(name, ns, "trio", "1", 3))
        text["metadata"]["labels"] = {QUOTA_LABEL: "small"}
        cluster.apply(json.dumps(text))
    # Two members fit the quota, the third does not: the gang is released, none of it is bound.
    for name in names:
        wait_until(lambda name=name: cluster.events(name, ns, "FailedScheduling"), WAIT, f"{name} FailedScheduling")
    messages = [m for n in names for m in cluster.events(n, ns, "FailedScheduling")]
    assert any("Insufficient quotas, quotaName: small" in m for m in messages), messages
    assert not any(cluster.node_of(n, ns) for n in names)

    def allocated() -> str:
        annotations = cluster.client.get("ElasticQuota", "small", ns)["metadata"].get("annotations", {})
        return json.loads(annotations.get("quota.scheduling.koordinator.sh/allocated", "{}")).get("cpu", "0")

    wait_until(lambda: allocated() == "0", WAIT, "nothing of the rejected gang left allocated in the quota")
    cluster.delete_namespace_pods(ns)
