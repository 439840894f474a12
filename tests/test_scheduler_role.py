"""The scheduler role against the embedded API server: binding, failures, requeues, preemption, conflicts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator_roles.scheduler.framework.interfaces import PreBindPlugin
from koordinator_roles.scheduler.plugins import in_tree_registry
from koordinator_roles.scheduler.framework.registry import Registry
from tests.scheduler_harness import NS, InProcessScheduler, condition, node, pod
from tests.waiting import wait_until



def node_of(api: Client, name: str) -> str:
    return (api.get("Pod", name, NS).get("spec") or {}).get("nodeName") or ""


def events_for(api: Client, name: str, reason: str) -> list[dict]:
    return [e for e in api.list("Event", NS)["items"]
            if e["involvedObject"].get("name") == name and e.get("reason") == reason]


def test_pods_are_bound_and_reported(fresh_crd_server, scheduler_api):
    for i in range(3):
        scheduler_api.create(node(f"n{i}"))
    with InProcessScheduler(fresh_crd_server.kubeconfig) as sched:
        for i in range(6):
            scheduler_api.create(pod(f"p{i}", NS))
        scheduler_api.create(pod("other", NS, scheduler="default-scheduler"))
        wait_until(lambda: all(node_of(scheduler_api, f"p{i}") for i in range(6)), message="pods bound")
        # LeastAllocated + balanced allocation spread equal pods over equal nodes.
        placed = [node_of(scheduler_api, f"p{i}") for i in range(6)]
        assert sorted(set(placed)) == ["n0", "n1", "n2"]
        assert max(placed.count(n) for n in set(placed)) == 2
        wait_until(lambda: events_for(scheduler_api, "p0", "Scheduled"), message="Scheduled event")
        assert events_for(scheduler_api, "p0", "Scheduled")[0]["message"] == \
            f"Successfully assigned {NS}/p0 to {placed[0]}"
        assert node_of(scheduler_api, "other") == ""  # another scheduler's pod is left alone
        assert sched.scheduler.wait_idle(10)


def test_pod_that_fits_nowhere_gets_condition_and_event_then_schedules_on_a_new_node(fresh_crd_server,
                                                                                     scheduler_api):
    scheduler_api.create(node("small-0", cpu="1"))
    scheduler_api.create(node("small-1", cpu="1"))
    scheduler_api.create(node("tainted", cpu="8",
                              taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    with InProcessScheduler(fresh_crd_server.kubeconfig):
        scheduler_api.create(pod("big", NS, cpu="2"))

        def unschedulable():
            cond = condition(scheduler_api.get("Pod", "big", NS))
            return cond if cond and cond.get("reason") == "Unschedulable" else None

        cond = wait_until(unschedulable, message="PodScheduled=False")
        assert cond["status"] == "False"
        assert cond["message"] == (
            "0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. "
            "preemption: 0/3 nodes are available: 1 Preemption is not helpful for scheduling, "
            "2 No preemption victims found for incoming pod.")
        event = wait_until(lambda: events_for(scheduler_api, "big", "FailedScheduling"), message="event")[0]
        assert event["type"] == "Warning" and event["message"] == cond["message"]
        # A new node that fits moves the pod out of the unschedulable set.
        scheduler_api.create(node("large", cpu="4"))
        wait_until(lambda: node_of(scheduler_api, "big") == "large", timeout=30, message="scheduled on the new node")


def test_node_selector_affinity_taints_and_spread(fresh_crd_server, scheduler_api):
    for i, zone in enumerate(["a", "a", "b"]):
        scheduler_api.create(node(f"z{zone}-{i}", labels={"topology.kubernetes.io/zone": zone,
                                                         "disk": "ssd" if i else "hdd"}))
    scheduler_api.create(node("gpu", labels={"topology.kubernetes.io/zone": "c"},
                    taints=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]))
    with InProcessScheduler(fresh_crd_server.kubeconfig):
        scheduler_api.create(pod("ssd", NS, spec={"nodeSelector": {"disk": "ssd"}}))
        scheduler_api.create(pod("tolerates", NS, spec={
            "tolerations": [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["c"]}]}]}}}}))
        spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                                                 "whenUnsatisfiable": "DoNotSchedule",
                                                 "labelSelector": {"matchLabels": {"app": "web"}},
                                                 "nodeAffinityPolicy": "Honor"}],
                  "nodeSelector": {"disk": "ssd"}}
        for i in range(4):
            scheduler_api.create(pod(f"web-{i}", NS, labels={"app": "web"}, spec=spread))
            wait_until(lambda i=i: node_of(scheduler_api, f"web-{i}"), message=f"web-{i} bound")
        wait_until(lambda: node_of(scheduler_api, "ssd") and node_of(scheduler_api, "tolerates"), message="bound")
        assert node_of(scheduler_api, "ssd") in ("za-1", "zb-2")
        assert node_of(scheduler_api, "tolerates") == "gpu"
        zones = [node_of(scheduler_api, f"web-{i}")[:2] for i in range(4)]
        assert zones.count("za") == 2 and zones.count("zb") == 2


def test_preemption_evicts_lower_priority_pod_and_nominates(fresh_crd_server, scheduler_api):
    for name, value in (("low", 100), ("high", 1000)):
        scheduler_api.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                    "value": value})
    scheduler_api.create(node("only", cpu="2"))
    with InProcessScheduler(fresh_crd_server.kubeconfig):
        scheduler_api.create(pod("victim", NS, cpu="1500m", spec={"priorityClassName": "low"}))
        wait_until(lambda: node_of(scheduler_api, "victim") == "only", message="victim bound")
        scheduler_api.create(pod("preemptor", NS, cpu="1", spec={"priorityClassName": "high"}))

        def victim_gone():
            try:
                scheduler_api.get("Pod", "victim", NS)
                return False
            except NotFound:
                return True

        wait_until(victim_gone, message="victim deleted")
        wait_until(lambda: node_of(scheduler_api, "preemptor") == "only", timeout=30, message="preemptor bound")
        preempted = events_for(scheduler_api, "victim", "Preempted")
        assert preempted and "on node only" in preempted[0]["message"]


class BindElsewhere(PreBindPlugin):
    """Binds the pod to another node just before DefaultBinder does: "bound by someone else meanwhile"."""

    name = "BindElsewhere"

    def __init__(self, handle):
        self.handle = handle

    def pre_bind(self, state, pod, node_name, modified):
        other = "n1" if node_name == "n0" else "n0"
        self.handle.client.bind(pod.name, pod.namespace, other, uid=pod.uid)
        return None


def test_bind_conflict_when_someone_else_bound_the_pod(fresh_crd_server, scheduler_api, tmp_path):
    scheduler_api.create(node("n0"))
    scheduler_api.create(node("n1"))
    registry = in_tree_registry().merge(Registry({"BindElsewhere": lambda args, handle: BindElsewhere(handle)}))
    config = tmp_path / "config.yaml"
    config.write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                      "leaderElection: {leaderElect: false}\n"
                      "profiles:\n- schedulerName: koord-scheduler\n"
                      "  plugins: {preBind: {enabled: [{name: BindElsewhere}]}}\n")
    with InProcessScheduler(fresh_crd_server.kubeconfig, "--config", str(config), registry=registry) as sched:
        scheduler_api.create(pod("contested", NS))
        wait_until(lambda: node_of(scheduler_api, "contested"), message="bound")
        first = node_of(scheduler_api, "contested")
        assert sched.scheduler.wait_idle(10)
        # The failed bind was undone: the cache holds the pod where the API says it is, once.
        wait_until(lambda: sched.parts.cache.dump().get(first) == [f"{NS}/contested"], message="cache confirmed")
        other = "n1" if first == "n0" else "n0"
        assert sched.parts.cache.dump().get(other, []) == []
        assert not sched.parts.queue.has(scheduler_api.get("Pod", "contested", NS)["metadata"]["uid"])
        time.sleep(0)  # nothing else to wait for: the pod is not re-queued


def test_role_process_schedules_with_a_mounted_config(fresh_crd_server, scheduler_api, tmp_path):
    """``koordinator --role=scheduler --config DIR`` as a process, the config a ConfigMap-style directory."""
    import subprocess
    import sys

    scheduler_api.create(node("n0"))
    mount = tmp_path / "config"
    (mount / "..2026_11_23").mkdir(parents=True)
    (mount / "..2026_11_23" / "koord-scheduler-config").write_text(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        "leaderElection: {leaderElect: true, resourceNamespace: default}\n"
        "profiles:\n- schedulerName: custom-scheduler\n")
    (mount / "..data").symlink_to("..2026_11_23")
    (mount / "koord-scheduler-config").symlink_to("..data/koord-scheduler-config")
    log = open(tmp_path / "scheduler.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "koordinator", "--role=scheduler", "--kubeconfig",
                             str(fresh_crd_server.kubeconfig), "--config", str(mount), "--metrics-addr", "0",
                             "--health-addr", "0", "--graceful-shutdown-timeout", "5s"],
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        scheduler_api.create(pod("custom", NS, scheduler="custom-scheduler"))
        wait_until(lambda: node_of(scheduler_api, "custom") == "n0" or proc.poll() is not None, timeout=60,
                   message="bound by the process")
        assert proc.poll() is None, (tmp_path / "scheduler.log").read_text()
        # The configuration's leaderElection replaced the flags: the Lease is koord-scheduler in "default".
        lease = scheduler_api.get("Lease", "koord-scheduler", "default")
        assert lease["spec"]["holderIdentity"]
    finally:
        proc.terminate()
        try:
            assert proc.wait(30) == 0, (tmp_path / "scheduler.log").read_text()
        finally:
            proc.kill()
            log.close()


@pytest.mark.parametrize("config, expected", [
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
     "profiles:\n- schedulerName: koord-scheduler\n  plugins: {filter: {enabled: [{name: VolumeBinding}]}}\n",
     "profiles[0].plugins.filter.enabled[0].name: Unsupported value: \"VolumeBinding\": kube-scheduler plugin "
     "VolumeBinding is not implemented in this build yet"),
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
     "profiles:\n- schedulerName: koord-scheduler\n  pluginConfig:\n  - name: LoadAwareScheduling\n"
     "    args: {usageThresholds: {cpu: 120}}\n",
     "profiles[0].pluginConfig[0].args.usageThresholds.cpu"),
])
def test_bad_configuration_is_a_usage_error_naming_the_field(tmp_path, config, expected):
    import subprocess
    import sys

    path = tmp_path / "config.yaml"
    path.write_text(config)
    done = subprocess.run([sys.executable, "-m", "koordinator", "--role=scheduler", "--config", str(path),
                           "--kubeconfig", str(tmp_path / "none")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert expected in done.stderr


def test_shipped_configmap_is_a_working_configuration(tmp_path):
    """manifests/config/koord-scheduler-config.yaml loads, and every profile's plugins build with their args."""
    import yaml

    import koordinator_roles.scheduler as role
    from koordinator_roles.scheduler.framework.handle import PluginHandle
    from koordinator_roles.scheduler.framework.runtime import Framework

    path = Path(__file__).resolve().parents[1] / "manifests" / "config" / "koord-scheduler-config.yaml"
    document = yaml.safe_load(path.read_text())["data"]["koord-scheduler-config"]
    file = tmp_path / "config.yaml"
    file.write_text(document)
    config = role.load_configuration(str(file))
    assert [p.scheduler_name for p in config.profiles] == ["koord-scheduler"]
    assert config.leader_election["resourceName"] == "koord-scheduler"
    fwk = Framework(config.profiles[0], in_tree_registry(), PluginHandle())
    assert "LoadAwareScheduling" in [p.name for p in fwk.points["score"]]
    assert [p.name for p in fwk.points["bind"]] == ["Reservation", "DefaultBinder"]
    assert {"Reservation", "NodeNUMAResource", "DeviceShare", "SchedulingHint"} <= set(fwk.plugins)
    # As Koordinator ships it: load filtering off (thresholds 0), load scoring on.
    assert fwk.plugin("LoadAwareScheduling").args.usage_thresholds == {"cpu": 0, "memory": 0}


def test_client_limits_default_to_kube_schedulers_without_a_config_file():
    from koordinator.runtime.options import RuntimeOptions

    options = RuntimeOptions.defaults("scheduler")
    assert (options.kube_api_qps, options.kube_api_burst) == (50.0, 100)
    assert (RuntimeOptions.defaults("manager").kube_api_qps, RuntimeOptions.defaults("manager").kube_api_burst) == \
        (20.0, 30)
