"""ElasticQuota in the running scheduler: quota limits, borrowing, revoke, quota-scoped preemption, status."""

from __future__ import annotations

import json

from koordinator.apis import quota as q
from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from tests.scheduler_harness import NS, InProcessScheduler, condition, node, pod
from tests.waiting import wait_until

CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: koord-scheduler
  plugins:
    preFilter: {{enabled: [{{name: ElasticQuota}}]}}
    postFilter: {{disabled: [{{name: "*"}}], enabled: [{{name: ElasticQuota}}]}}
    reserve: {{enabled: [{{name: ElasticQuota}}]}}
  pluginConfig:
  - name: ElasticQuota
    args: {args}
"""


def start(server, tmp_path, args: dict) -> InProcessScheduler:
    path = tmp_path / "koord-scheduler-config.yaml"
    path.write_text(CONFIG.format(args=json.dumps(args)))
    return InProcessScheduler(server.kubeconfig, "--config", str(path))


def quota(api: Client, name: str, mn: str, mx: str, *, parent: str = "", is_parent: bool = False,
          weight: str | None = None) -> None:
    labels = {q.LABEL_PARENT: parent} if parent else {}
    if is_parent:
        labels[q.LABEL_IS_PARENT] = "true"
    annotations = {q.ANNOTATION_SHARED_WEIGHT: json.dumps({"cpu": weight})} if weight else {}
    api.create({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                "metadata": {"name": name, "namespace": NS, "labels": labels, "annotations": annotations},
                "spec": {"min": {"cpu": mn}, "max": {"cpu": mx}}})


def qpod(name: str, quota_name: str, cpu: str, **kw) -> dict:
    labels = {q.LABEL_QUOTA_NAME: quota_name, **kw.pop("labels", {})}
    return pod(name, NS, cpu=cpu, memory=None, labels=labels, **kw)


def get_or_none(api: Client, kind: str, name: str, namespace: str) -> dict | None:
    try:
        return api.get(kind, name, namespace)
    except NotFound:
        return None


def bound_to(api: Client, name: str) -> str:
    try:
        return (api.get("Pod", name, NS).get("spec") or {}).get("nodeName") or ""
    except NotFound:
        return ""


def gone(api: Client, name: str) -> bool:
    try:
        p = api.get("Pod", name, NS)
    except NotFound:
        return True
    return bool((p.get("metadata") or {}).get("deletionTimestamp"))


def unschedulable_message(api: Client, name: str) -> str | None:
    cond = condition(api.get("Pod", name, NS))
    return cond["message"] if cond and cond.get("reason") == "Unschedulable" else None


def events_of(api: Client, name: str, reason: str) -> list[str]:
    return [e.get("message", "") for e in api.list("Event", NS).get("items", [])
            if (e.get("involvedObject") or {}).get("name") == name and e.get("reason") == reason]


def annotation(api: Client, name: str, key: str, namespace: str = NS) -> dict | None:
    raw = ((api.get("ElasticQuota", name, namespace).get("metadata") or {}).get("annotations") or {}).get(key)
    return json.loads(raw) if raw else None


def team(api: Client) -> None:
    """Two 8-cpu nodes; team (min 8, max 16) with children a (min 4, max 12) and b (min 4, max 16), equal weights."""
    for name in ("n1", "n2"):
        api.create(node(name, cpu="8", memory="32Gi"))
    quota(api, "team", "8", "16", is_parent=True)
    quota(api, "a", "4", "12", parent="team", weight="1")
    quota(api, "b", "4", "16", parent="team", weight="1")


def test_borrowing_limits_revoke_and_status(fresh_crd_server, scheduler_api, tmp_path):
    api = scheduler_api
    team(api)
    with start(fresh_crd_server, tmp_path, {"monitorAllQuotas": True, "delayEvictTime": "1s",
                                           "revokePodInterval": "100ms"}):
        # The built-in quotas are created in koordinator-system.
        for name in (q.ROOT_QUOTA, q.SYSTEM_QUOTA, q.DEFAULT_QUOTA):
            wait_until(lambda name=name: get_or_none(api, "ElasticQuota", name, "koordinator-system"), message=name)
        root = api.get("ElasticQuota", q.ROOT_QUOTA, "koordinator-system")
        assert root["metadata"]["labels"][q.LABEL_IS_PARENT] == "true"
        assert root["metadata"]["labels"][q.LABEL_ALLOW_LENT_RESOURCE] == "false"
        # b borrows a's idle min: 3 pods of 4 cpu (b's min is 4; the team's 8 plus 4 from the cluster).
        for i in range(3):
            api.create(qpod(f"b{i}", "b", "4"))
        for i in range(3):
            wait_until(lambda i=i: bound_to(api, f"b{i}"), message=f"b{i} bound")
        wait_until(lambda: annotation(api, "b", q.ANNOTATION_RUNTIME) == {"cpu": "12"}, message="b runtime 12")
        wait_until(lambda: (api.get("ElasticQuota", "b", NS).get("status") or {}).get("used") == {"cpu": "12"},
                   message="b status.used")
        assert annotation(api, "team", q.ANNOTATION_CHILD_REQUEST) == {"cpu": "12"}
        assert annotation(api, "a", q.ANNOTATION_RUNTIME) == {"cpu": "0"}
        # a asks for its min and more: a and b both borrow, 8 beyond the mins split 1:1 -> 8 each.
        # b (used 12 > runtime 8) is revoked after delayEvictTime, making room for a's pods.
        for i in range(2):
            api.create(qpod(f"a{i}", "a", "4"))
        for i in range(2):
            wait_until(lambda i=i: bound_to(api, f"a{i}"), message=f"a{i} bound")
        evicted = [f"b{i}" for i in range(3) if gone(api, f"b{i}")]
        assert len(evicted) == 1, evicted
        message = wait_until(lambda: events_of(api, evicted[0], "QuotaOverUsed"), message="revoke event")[0]
        assert message == "pod is evicted because quota b is over-used, runtime: cpu:8, used: cpu:12"
        wait_until(lambda: annotation(api, "a", q.ANNOTATION_RUNTIME) == {"cpu": "8"}, message="a runtime 8")
        wait_until(lambda: (api.get("ElasticQuota", "a", NS).get("status") or {}).get("used") == {"cpu": "8"},
                   message="a status.used")
        # Beyond its runtime a's next pod stays pending with Koordinator's message.
        api.create(qpod("a2", "a", "4"))
        message = wait_until(lambda: unschedulable_message(api, "a2"), message="a2 unschedulable")
        expected = ("0/2 nodes are available: Insufficient quotas, quotaName: a, runtime: cpu:8, used: cpu:8, "
                    "pod's request: cpu:4, exceedDimensions: [cpu].")
        assert message.startswith(expected), message
        assert any(m.startswith(expected) for m in wait_until(lambda: events_of(api, "a2", "FailedScheduling"),
                                                               message="FailedScheduling event"))
        assert bound_to(api, "a2") == ""
        for key in (q.ANNOTATION_REQUEST, q.ANNOTATION_GUARANTEED, q.ANNOTATION_ALLOCATED,
                    q.ANNOTATION_NON_PREEMPTIBLE_REQUEST, q.ANNOTATION_NON_PREEMPTIBLE_USED):
            assert annotation(api, "a", key) is not None, key


def test_non_preemptible_pods_are_limited_to_min(fresh_crd_server, scheduler_api, tmp_path):
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    quota(api, "c", "2", "8")
    with start(fresh_crd_server, tmp_path, {}):
        np = {q.LABEL_PREEMPTIBLE: "false"}
        for i in range(2):
            api.create(qpod(f"np{i}", "c", "1", labels=np))
            wait_until(lambda i=i: bound_to(api, f"np{i}"), message=f"np{i} bound")
        api.create(qpod("np2", "c", "1", labels=np))
        message = wait_until(lambda: unschedulable_message(api, "np2"), message="np2 unschedulable")
        assert message.startswith("0/1 nodes are available: Insufficient non-preemptible quotas, quotaName: c, "
                                  "min: cpu:2, nonPreemptibleUsed: cpu:2, pod's request: cpu:1, "
                                  "exceedDimensions: [cpu]."), message
        # A preemptible pod of the same quota still fits (runtime: its request, up to max).
        api.create(qpod("p0", "c", "1"))
        wait_until(lambda: bound_to(api, "p0"), message="p0 bound")
        wait_until(lambda: annotation(api, "c", q.ANNOTATION_NON_PREEMPTIBLE_USED) == {"cpu": "2"},
                   message="non-preemptible-used")


def test_preemption_stays_inside_the_quota(fresh_crd_server, scheduler_api, tmp_path):
    api = scheduler_api
    api.create(node("n1", cpu="8"))
    quota(api, "p", "4", "4")
    for name, value in (("low", 1), ("high", 100)):
        api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                    "value": value})
    with start(fresh_crd_server, tmp_path, {}):
        api.create(qpod("low", "p", "4", spec={"priorityClassName": "low"}))
        api.create(pod("other", NS, cpu="2", memory=None))  # default quota, priority 0
        wait_until(lambda: bound_to(api, "low") and bound_to(api, "other"), message="low and other bound")
        api.create(qpod("high", "p", "4", spec={"priorityClassName": "high"}))
        wait_until(lambda: gone(api, "low"), message="low preempted")
        wait_until(lambda: bound_to(api, "high"), message="high bound")
        assert bound_to(api, "other") == "n1"
        # Equal priority: nothing to preempt.
        api.create(qpod("peer", "p", "1", spec={"priorityClassName": "high"}))
        message = wait_until(lambda: unschedulable_message(api, "peer"), message="peer unschedulable")
        assert message.startswith("0/1 nodes are available: Insufficient quotas, quotaName: p, runtime: cpu:4, "
                                  "used: cpu:4, pod's request: cpu:1, exceedDimensions: [cpu]. preemption: "), message


def test_a_quota_within_its_min_takes_back_what_it_lent(fresh_crd_server, scheduler_api, tmp_path):
    """One 8-cpu node, team (min 8) with a and b (min 4 each): b borrows a's idle min and fills the node; when a
    asks for its min the nodes are full, so a's pods preempt b's borrowed pods (whatever the priorities), and
    only as many as a needs; a pod beyond a's min takes nothing."""
    api = scheduler_api
    api.create(node("n1", cpu="8", memory="32Gi"))
    quota(api, "team", "8", "16", is_parent=True)
    quota(api, "a", "4", "8", parent="team", weight="1")
    quota(api, "b", "4", "8", parent="team", weight="1")
    api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "b-high"},
                "value": 1000})
    with start(fresh_crd_server, tmp_path, {}):
        for i in range(4):
            api.create(qpod(f"b{i}", "b", "2", spec={"priorityClassName": "b-high"}))
        for i in range(4):
            wait_until(lambda i=i: bound_to(api, f"b{i}"), message=f"b{i} bound")
        api.create(qpod("a0", "a", "2"))
        wait_until(lambda: bound_to(api, "a0"), message="a0 bound after taking back")
        taken = [f"b{i}" for i in range(4) if gone(api, f"b{i}")]
        assert len(taken) == 1, taken
        assert wait_until(lambda: events_of(api, taken[0], "Preempted"), message="Preempted event")[0].startswith(
            "Preempted by pod ")
        # a at its min (4 with a1): a1 takes back one more; a2 would go beyond a's min: it takes nothing.
        api.create(qpod("a1", "a", "2"))
        wait_until(lambda: bound_to(api, "a1"), message="a1 bound")
        api.create(qpod("a2", "a", "2"))
        wait_until(lambda: unschedulable_message(api, "a2"), message="a2 unschedulable")
        assert len([i for i in range(4) if gone(api, f"b{i}")]) == 2
