"""LoadAwareScheduling in the running scheduler: NodeMetrics through the API, pods placed by load."""

from __future__ import annotations

import time

from koordinator.runtime.client import Client
from tests.scheduler_harness import NS, InProcessScheduler, condition, node, pod
from tests.waiting import wait_until


def rfc3339(t: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def node_metric(api: Client, name: str, cpu: str, memory: str = "1Gi", *, age: float = 0.0) -> None:
    created = api.create({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeMetric",
                          "metadata": {"name": name}, "spec": {}})
    created["status"] = {"updateTime": rfc3339(time.time() - age),
                         "nodeMetric": {"nodeUsage": {"resources": {"cpu": cpu, "memory": memory}}}}
    api.update_status(created)


def bound_to(api: Client, name: str) -> str:
    return (api.get("Pod", name, NS).get("spec") or {}).get("nodeName") or ""


def unschedulable_message(api: Client, name: str) -> str | None:
    cond = condition(api.get("Pod", name, NS))
    return cond["message"] if cond and cond.get("reason") == "Unschedulable" else None


def test_hot_and_expired_nodes_are_filtered(fresh_crd_server, scheduler_api):
    # Default profile: LoadAwareScheduling with usageThresholds cpu 65 / memory 95, metrics expire after 180 s.
    for name in ("hot", "cold", "stale"):
        scheduler_api.create(node(name, cpu="4", labels={"pool": "a"}))
    node_metric(scheduler_api, "hot", "2800m")   # 70% > 65%
    node_metric(scheduler_api, "cold", "400m")   # 10%
    node_metric(scheduler_api, "stale", "400m", age=600)
    with InProcessScheduler(fresh_crd_server.kubeconfig):
        scheduler_api.create(pod("web", NS, cpu="500m"))
        wait_until(lambda: bound_to(scheduler_api, "web") == "cold", message="placed on the cold node")
        # Only the hot and the stale node are allowed: both rejected by their metrics.
        scheduler_api.create(pod("pinned", NS, cpu="500m", spec={"affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["hot", "stale"]}]}]}}}}))
        message = wait_until(lambda: unschedulable_message(scheduler_api, "pinned"), message="unschedulable")
        assert message.startswith(
            "0/3 nodes are available: 1 node(s) cpu usage exceed threshold, "
            "1 node(s) didn't match Pod's node affinity/selector, 1 node(s) nodeMetric expired.")
        # The hot node cools down: its NodeMetric update re-queues the pod.
        hot = scheduler_api.get("NodeMetric", "hot")
        hot["status"]["nodeMetric"]["nodeUsage"]["resources"]["cpu"] = "800m"
        hot["status"]["updateTime"] = rfc3339(time.time())
        scheduler_api.update_status(hot)
        wait_until(lambda: bound_to(scheduler_api, "pinned") == "hot", timeout=30,
                   message="placed once the node cooled")


def test_estimate_of_just_assigned_pods_counts_until_metrics_show_them(fresh_crd_server, scheduler_api):
    # Both nodes at 40% cpu. A 1-cpu pod is estimated at 85% of its request: 850m, so one such pod
    # lifts a node to (1600 + 850) / 4000 = 61% (fits under 65%), a second to 83% (does not).
    for name in ("a", "b"):
        scheduler_api.create(node(name, cpu="4"))
        node_metric(scheduler_api, name, "1600m")
    with InProcessScheduler(fresh_crd_server.kubeconfig):
        scheduler_api.create(pod("first", NS, cpu="1"))
        wait_until(lambda: bound_to(scheduler_api, "first"), message="first bound")
        scheduler_api.create(pod("second", NS, cpu="1"))
        wait_until(lambda: bound_to(scheduler_api, "second"), message="second bound")
        assert {bound_to(scheduler_api, "first"), bound_to(scheduler_api, "second")} == {"a", "b"}
        scheduler_api.create(pod("third", NS, cpu="1"))
        message = wait_until(lambda: unschedulable_message(scheduler_api, "third"), message="third unschedulable")
        assert message.startswith("0/2 nodes are available: 2 node(s) cpu usage exceed threshold.")


CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
profiles:
- schedulerName: koord-scheduler
  plugins:
    filter: {{enabled: [{{name: LoadAwareScheduling}}]}}
    score: {{enabled: [{{name: LoadAwareScheduling, weight: 1}}]}}
    reserve: {{enabled: [{{name: LoadAwareScheduling}}]}}
  pluginConfig:
  - name: LoadAwareScheduling
    args:
      usageThresholds: {{cpu: {cpu}}}
"""


def test_threshold_change_is_hot_reloaded(fresh_crd_server, scheduler_api, tmp_path):
    scheduler_api.create(node("warm", cpu="4"))
    node_metric(scheduler_api, "warm", "2800m")  # 70%
    config = tmp_path / "koord-scheduler-config.yaml"
    config.write_text(CONFIG.format(cpu=65))
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config)) as sched:
        scheduler_api.create(pod("job", NS, cpu="100m"))
        message = wait_until(lambda: unschedulable_message(scheduler_api, "job"), message="rejected at 65%")
        assert message.startswith("0/1 nodes are available: 1 node(s) cpu usage exceed threshold.")
        # A bad value is refused and the running thresholds stay.
        config.write_text(CONFIG.format(cpu=120))
        wait_until(lambda: sched.runtime.metrics.registry.get_sample_value(
            "koordinator_config_reloads_total", {"source": f"file:{config}", "result": "error"}),
            message="bad config rejected")
        assert bound_to(scheduler_api, "job") == ""
        config.write_text(CONFIG.format(cpu=80))
        wait_until(lambda: bound_to(scheduler_api, "job") == "warm", timeout=30, message="scheduled after the reload")


def test_prod_and_percentile_thresholds_from_node_annotations(fresh_crd_server, scheduler_api):
    import json

    key = "scheduling.koordinator.sh/usage-thresholds"
    scheduler_api.create(node("prod", cpu="4", annotations={key: json.dumps({"prodUsageThresholds": {"cpu": 30}})}))
    scheduler_api.create(node("p95", cpu="4", annotations={key: json.dumps(
        {"aggregatedUsage": {"usageThresholds": {"cpu": 50}, "usageAggregationType": "p95"}})}))
    # "prod": the node is at 40%, 1500m of it from the prod pod "svc" running there.
    scheduler_api.create(pod("svc", NS, cpu="1", spec={"nodeName": "prod"}))
    node_metric(scheduler_api, "prod", "1600m")
    metric = scheduler_api.get("NodeMetric", "prod")
    metric["status"]["podsMetric"] = [{"namespace": NS, "name": "svc", "priority": "koord-prod",
                                       "podUsage": {"resources": {"cpu": "1500m", "memory": "1Gi"}}}]
    scheduler_api.update_status(metric)
    # "p95": 10% now, but 60% at the 95th percentile of the last 5 minutes.
    node_metric(scheduler_api, "p95", "400m")
    metric = scheduler_api.get("NodeMetric", "p95")
    metric["status"]["nodeMetric"]["aggregatedNodeUsages"] = [
        {"duration": "5m", "usage": {"p95": {"resources": {"cpu": "2400m", "memory": "1Gi"}}}}]
    scheduler_api.update_status(metric)
    with InProcessScheduler(fresh_crd_server.kubeconfig):
        # A prod pod (Burstable, no labels: koord-prod) estimated at 85m: prod usage (1500 + 85) / 4000
        # = 40% > 30% on "prod"; (2400 + 85) / 4000 = 62% > 50% at p95 on "p95".
        scheduler_api.create(pod("api", NS, cpu="100m"))
        message = wait_until(lambda: unschedulable_message(scheduler_api, "api"), message="api rejected")
        assert message.startswith("0/2 nodes are available: 1 node(s) cpu aggregated usage exceed threshold, "
                                  "1 node(s) cpu usage exceed threshold.")
        # A batch pod is held to the node thresholds (65%) instead: (1600 + 250) / 4000 = 46% on "prod".
        scheduler_api.create(pod("batch", NS, cpu=None, memory=None,
                                 labels={"koordinator.sh/priority-class": "koord-batch"},
                                 spec={"nodeSelector": {"kubernetes.io/hostname": "prod"}}))
        wait_until(lambda: bound_to(scheduler_api, "batch") == "prod", message="batch pod placed")
