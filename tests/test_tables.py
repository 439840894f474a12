"""Server-side Table output: the cells kube-apiserver's printers produce for kubectl get."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from koordinator.apiserver.errors import StatusError
from koordinator.apiserver.tables import evaluate_jsonpath, human_duration, to_table

NOW = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def ago(**kw) -> str:
    return (NOW - timedelta(**kw)).strftime("%Y-%m-%dT%H:%M:%SZ")


def table(group: str, kind: str, objs: list, columns=None, include: str = "Metadata") -> dict:
    return to_table(group, kind, objs, printer_columns=columns, include_object=include, now=NOW,
                    list_meta={"resourceVersion": "42"})


def row(group: str, kind: str, obj: dict, columns=None) -> list:
    return table(group, kind, [obj], columns)["rows"][0]["cells"]


# -- HumanDuration ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "seconds, text",
    [
        (-3, "<invalid>"), (-2, "<invalid>"), (-1.9, "0s"), (-1, "0s"), (0, "0s"), (0.9, "0s"), (45, "45s"),
        (119, "119s"), (120, "2m"), (121, "2m1s"), (5 * 60 + 3, "5m3s"), (9 * 60 + 59, "9m59s"),
        (10 * 60, "10m"), (10 * 60 + 59, "10m"), (179 * 60 + 59, "179m"), (3 * 3600, "3h"),
        (3 * 3600 + 4 * 60, "3h4m"), (8 * 3600 - 1, "7h59m"), (8 * 3600, "8h"), (47 * 3600 + 3599, "47h"),
        (48 * 3600, "2d"), (51 * 3600, "2d3h"), (8 * 86400 - 1, "7d23h"), (8 * 86400, "8d"),
        (729 * 86400, "729d"), (730 * 86400, "2y"), (775 * 86400, "2y45d"), (8 * 365 * 86400, "8y"),
        (20 * 365 * 86400 + 86400 * 100, "20y"),
    ],
)
def test_human_duration(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


# -- table envelope -----------------------------------------------------------------------------


def test_envelope_and_partial_object_metadata() -> None:
    pod = {"metadata": {"name": "p", "namespace": "ns", "labels": {"a": "b"}, "creationTimestamp": ago(minutes=5)},
           "spec": {"containers": [{"name": "c"}]}, "status": {"phase": "Pending"}}
    out = table("", "Pod", [pod])
    assert out["kind"] == "Table" and out["apiVersion"] == "meta.k8s.io/v1"
    assert out["metadata"] == {"resourceVersion": "42"}
    for col in out["columnDefinitions"]:
        assert set(col) == {"name", "type", "format", "description", "priority"}
    assert out["rows"][0]["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                        "metadata": pod["metadata"]}
    assert table("", "Pod", [pod], include="Object")["rows"][0]["object"] is pod
    assert table("", "Pod", [pod], include="None")["rows"][0]["object"] is None
    assert table("", "Pod", [pod], include="")["rows"][0]["object"]["kind"] == "PartialObjectMetadata"
    assert table("", "Pod", [])["rows"] == []


def test_unknown_include_object_is_bad_request() -> None:
    with pytest.raises(StatusError) as err:
        table("", "Pod", [], include="Everything")
    assert err.value.code == 400
    assert err.value.message == 'unrecognized includeObject value: "Everything"'


def test_no_headers_leaves_out_column_definitions() -> None:
    out = to_table("", "Namespace", [], printer_columns=None, list_meta={}, no_headers=True, now=NOW)
    assert "columnDefinitions" not in out


# -- pods ---------------------------------------------------------------------------------------

POD_COLUMNS = ["Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]


def pod(status: dict, spec: dict | None = None, **meta) -> dict:
    return {"metadata": {"name": "web-0", "namespace": "default", "creationTimestamp": ago(minutes=10), **meta},
            "spec": spec or {"containers": [{"name": "app", "image": "nginx"}]}, "status": status}


def test_pod_columns() -> None:
    out = table("", "Pod", [])
    assert [c["name"] for c in out["columnDefinitions"]] == POD_COLUMNS
    assert [c["priority"] for c in out["columnDefinitions"]] == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert out["columnDefinitions"][0]["format"] == "name"


def test_pod_running_one_of_one() -> None:
    p = pod({"phase": "Running", "podIP": "10.0.0.5", "podIPs": [{"ip": "10.0.0.5"}],
             "conditions": [{"type": "Ready", "status": "True"}],
             "containerStatuses": [{"name": "app", "ready": True, "restartCount": 0,
                                    "state": {"running": {"startedAt": ago(minutes=9)}}}]},
            {"containers": [{"name": "app"}], "nodeName": "node-1"})
    assert row("", "Pod", p) == ["web-0", "1/1", "Running", "0", "10m", "10.0.0.5", "node-1", "<none>", "<none>"]


def test_pod_pending_unscheduled() -> None:
    p = pod({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                  "reason": "Unschedulable"}]},
            {"containers": [{"name": "a"}, {"name": "b"}]})
    assert row("", "Pod", p) == ["web-0", "0/2", "Pending", "0", "10m", "<none>", "<none>", "<none>", "<none>"]


def test_pod_nominated_node_and_readiness_gates() -> None:
    p = pod({"phase": "Pending", "nominatedNodeName": "node-2",
             "conditions": [{"type": "example.com/gate-a", "status": "True"},
                            {"type": "example.com/gate-b", "status": "False"}]},
            {"containers": [{"name": "a"}], "readinessGates": [{"conditionType": "example.com/gate-a"},
                                                              {"conditionType": "example.com/gate-b"},
                                                              {"conditionType": "example.com/gate-c"}]})
    cells = row("", "Pod", p)
    assert cells[7:] == ["node-2", "1/3"]


def test_pod_terminating() -> None:
    p = pod({"phase": "Running", "containerStatuses": [{"name": "app", "ready": True,
                                                        "state": {"running": {}}}]},
            deletionTimestamp=ago(seconds=30))
    assert row("", "Pod", p)[:3] == ["web-0", "1/1", "Terminating"]
    # A finished pod being deleted keeps its terminal reason; a lost node reads Unknown.
    done = pod({"phase": "Succeeded"}, deletionTimestamp=ago(seconds=30))
    assert row("", "Pod", done)[2] == "Succeeded"
    lost = pod({"phase": "Running", "reason": "NodeLost"}, deletionTimestamp=ago(seconds=30))
    assert row("", "Pod", lost)[2] == "Unknown"


def test_pod_crash_loop_back_off_with_restart_age() -> None:
    p = pod({"phase": "Running", "containerStatuses": [{
        "name": "app", "ready": False, "restartCount": 5,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "finishedAt": ago(minutes=5)}},
    }]})
    assert row("", "Pod", p)[:4] == ["web-0", "0/1", "CrashLoopBackOff", "5 (5m ago)"]


def test_pod_restarts_sum_and_latest_restart() -> None:
    p = pod({"phase": "Running", "containerStatuses": [
        {"name": "a", "ready": True, "restartCount": 2, "state": {"running": {}},
         "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(hours=3)}}},
        {"name": "b", "ready": True, "restartCount": 1, "state": {"running": {}},
         "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(seconds=75)}}},
    ]}, {"containers": [{"name": "a"}, {"name": "b"}]})
    assert row("", "Pod", p)[1:4] == ["2/2", "Running", "3 (75s ago)"]


def test_pod_terminated_container_reasons() -> None:
    completed = pod({"phase": "Succeeded", "containerStatuses": [
        {"name": "app", "ready": False, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]})
    out = table("", "Pod", [completed])
    assert out["rows"][0]["cells"][1:3] == ["0/1", "Completed"]
    assert out["rows"][0]["conditions"] == [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                             "message": "The pod has completed successfully."}]
    signal = pod({"phase": "Failed", "containerStatuses": [
        {"name": "app", "state": {"terminated": {"exitCode": 137, "signal": 9}}}]})
    failed = table("", "Pod", [signal])["rows"][0]
    assert failed["cells"][2] == "Signal:9"
    assert failed["conditions"][0]["reason"] == "Failed"
    exit_code = pod({"phase": "Failed",
                     "containerStatuses": [{"name": "app", "state": {"terminated": {"exitCode": 2}}}]})
    assert row("", "Pod", exit_code)[2] == "ExitCode:2"
    evicted = pod({"phase": "Failed", "reason": "Evicted"})
    assert row("", "Pod", evicted)[2] == "Evicted"


def test_pod_completed_container_next_to_running_one() -> None:
    statuses = [{"name": "a", "ready": True, "state": {"running": {}}},
                {"name": "b", "ready": False, "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]
    spec = {"containers": [{"name": "a"}, {"name": "b"}]}
    ready = pod({"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                 "containerStatuses": statuses}, spec)
    assert row("", "Pod", ready)[1:3] == ["1/2", "Running"]
    not_ready = pod({"phase": "Running", "containerStatuses": statuses}, spec)
    assert row("", "Pod", not_ready)[1:3] == ["1/2", "NotReady"]


def test_pod_init_container_states() -> None:
    spec = {"initContainers": [{"name": "init"}], "containers": [{"name": "app"}]}
    waiting = pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "init", "state": {"waiting": {"reason": "PodInitializing"}}}],
        "containerStatuses": [{"name": "app", "state": {"waiting": {"reason": "PodInitializing"}}}]}, spec)
    assert row("", "Pod", waiting)[1:4] == ["0/1", "Init:0/1", "0"]
    crashing = pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "init", "restartCount": 3, "state": {"waiting": {"reason": "CrashLoopBackOff"}},
         "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(minutes=1)}}}]}, spec)
    assert row("", "Pod", crashing)[2:4] == ["Init:CrashLoopBackOff", "3 (60s ago)"]
    errored = pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "init", "state": {"terminated": {"exitCode": 1, "reason": "Error"}}}]}, spec)
    assert row("", "Pod", errored)[2] == "Init:Error"
    no_reason = pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "init", "state": {"terminated": {"exitCode": 3}}}]}, spec)
    assert row("", "Pod", no_reason)[2] == "Init:ExitCode:3"
    two = {"initContainers": [{"name": "i1"}, {"name": "i2"}], "containers": [{"name": "app"}]}
    second = pod({"phase": "Pending", "initContainerStatuses": [
        {"name": "i1", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}},
        {"name": "i2", "state": {"running": {}}}]}, two)
    assert row("", "Pod", second)[2] == "Init:1/2"


def test_pod_sidecar_init_container_counts_as_container() -> None:
    spec = {"initContainers": [{"name": "proxy", "restartPolicy": "Always"}], "containers": [{"name": "app"}]}
    p = pod({"phase": "Running", "conditions": [{"type": "Initialized", "status": "True"}],
             "initContainerStatuses": [{"name": "proxy", "ready": True, "started": True, "restartCount": 1,
                                        "state": {"running": {}},
                                        "lastState": {"terminated": {"exitCode": 1, "finishedAt": ago(minutes=2)}}}],
             "containerStatuses": [{"name": "app", "ready": True, "state": {"running": {}}}]}, spec)
    assert row("", "Pod", p)[1:4] == ["2/2", "Running", "1 (2m ago)"]


def test_pod_scheduling_gated() -> None:
    by_condition = pod({"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                            "reason": "SchedulingGated"}]})
    assert row("", "Pod", by_condition)[2] == "SchedulingGated"
    spec = {"containers": [{"name": "app"}], "schedulingGates": [{"name": "example.com/quota"}]}
    assert row("", "Pod", pod({"phase": "Pending"}, spec))[2] == "SchedulingGated"


# -- nodes --------------------------------------------------------------------------------------


def node(conditions: list, unschedulable: bool = False, labels: dict | None = None) -> dict:
    return {"metadata": {"name": "node-1", "creationTimestamp": ago(days=3, hours=4), "labels": labels or {}},
            "spec": {"unschedulable": True} if unschedulable else {},
            "status": {"conditions": conditions,
                       "addresses": [{"type": "Hostname", "address": "node-1"},
                                     {"type": "InternalIP", "address": "192.168.0.10"}],
                       "nodeInfo": {"kubeletVersion": "v1.30.2", "osImage": "Ubuntu 22.04.4 LTS",
                                    "kernelVersion": "5.15.0-105-generic",
                                    "containerRuntimeVersion": "containerd://1.7.13"}}}


def test_node_ready_scheduling_disabled_with_roles() -> None:
    n = node([{"type": "MemoryPressure", "status": "False"}, {"type": "Ready", "status": "True"}], True,
             {"node-role.kubernetes.io/control-plane": "", "node-role.kubernetes.io/worker": "",
              "kubernetes.io/role": "edge", "node-role.kubernetes.io/": ""})
    out = table("", "Node", [n])
    assert [c["name"] for c in out["columnDefinitions"]] == [
        "Name", "Status", "Roles", "Age", "Version", "Internal-IP", "External-IP", "OS-Image", "Kernel-Version",
        "Container-Runtime"]
    assert out["rows"][0]["cells"] == [
        "node-1", "Ready,SchedulingDisabled", "control-plane,edge,worker", "3d4h", "v1.30.2", "192.168.0.10",
        "<none>", "Ubuntu 22.04.4 LTS", "5.15.0-105-generic", "containerd://1.7.13"]


def test_node_not_ready_and_unknown() -> None:
    assert row("", "Node", node([{"type": "Ready", "status": "False"}]))[1:3] == ["NotReady", "<none>"]
    assert row("", "Node", node([{"type": "Ready", "status": "Unknown"}]))[1] == "NotReady"
    assert row("", "Node", node([], True))[1] == "Unknown,SchedulingDisabled"
    bare = {"metadata": {"name": "n"}}
    assert row("", "Node", bare) == ["n", "Unknown", "<none>", "<unknown>", "", "<none>", "<none>", "<unknown>",
                                     "<unknown>", "<unknown>"]


# -- other built-in kinds -----------------------------------------------------------------------


def meta(name: str = "x", **extra) -> dict:
    return {"name": name, "namespace": "default", "creationTimestamp": ago(minutes=3), **extra}


def test_namespace_configmap_secret_serviceaccount_lease() -> None:
    assert row("", "Namespace", {"metadata": meta("kube-system"), "status": {"phase": "Active"}}) == [
        "kube-system", "Active", "3m"]
    cm = {"metadata": meta("cfg"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}
    assert row("", "ConfigMap", cm) == ["cfg", 3, "3m"]
    secret = {"metadata": meta("s"), "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}}
    assert row("", "Secret", secret) == ["s", "kubernetes.io/tls", 2, "3m"]
    assert row("", "Secret", {"metadata": meta("o")}) == ["o", "Opaque", 0, "3m"]
    assert row("", "ServiceAccount", {"metadata": meta("default")}) == ["default", 0, "3m"]
    lease = {"metadata": meta("koord-scheduler"), "spec": {"holderIdentity": "host_1234"}}
    assert row("coordination.k8s.io", "Lease", lease) == ["koord-scheduler", "host_1234", "3m"]
    assert row("coordination.k8s.io", "Lease", {"metadata": meta("free"), "spec": {}})[1] == ""


def test_service() -> None:
    svc = {"metadata": meta("web"), "spec": {
        "type": "NodePort", "clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"],
        "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}],
        "selector": {"tier": "web", "app": "shop"}}}
    out = table("", "Service", [svc])
    assert [c["name"] for c in out["columnDefinitions"]] == [
        "Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"]
    assert out["rows"][0]["cells"] == ["web", "NodePort", "10.96.0.10", "<none>", "80:30080/TCP,53/UDP", "3m",
                                       "app=shop,tier=web"]
    headless = {"metadata": meta("h"), "spec": {"type": "ClusterIP", "clusterIP": "None", "clusterIPs": ["None"]}}
    assert row("", "Service", headless)[2:] == ["None", "<none>", "<none>", "3m", "<none>"]
    lb = {"metadata": meta("lb"), "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.11"],
                                           "ports": [{"port": 443, "protocol": "TCP", "nodePort": 31443}]},
          "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}]}}}
    assert row("", "Service", lb)[3] == "203.0.113.9,lb.example.com"
    pending = {"metadata": meta("lb2"), "spec": {"type": "LoadBalancer", "clusterIPs": ["10.96.0.12"]}}
    assert row("", "Service", pending)[3] == "<pending>"
    ext = {"metadata": meta("e"), "spec": {"type": "ExternalName", "externalName": "db.example.com"}}
    assert row("", "Service", ext)[2:4] == ["<none>", "db.example.com"]


def test_endpoints() -> None:
    ep = {"metadata": meta("web"), "subsets": [{
        "addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}, {"ip": "fd00::3"}, {"ip": "10.0.0.4"}],
        "ports": [{"port": 8080}]}]}
    assert row("", "Endpoints", ep) == ["web", "10.0.0.1:8080,10.0.0.2:8080,[fd00::3]:8080 + 1 more...", "3m"]
    assert row("", "Endpoints", {"metadata": meta("none")})[1] == "<none>"


def test_event() -> None:
    ev = {"metadata": meta("web-0.17c"), "type": "Warning", "reason": "FailedScheduling",
          "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{app}"},
          "message": " 0/3 nodes are available. \n", "source": {"component": "koord-scheduler"},
          "firstTimestamp": ago(minutes=20), "lastTimestamp": ago(minutes=2), "count": 7}
    out = table("", "Event", [ev])
    assert [(c["name"], c["priority"]) for c in out["columnDefinitions"]] == [
        ("Last Seen", 0), ("Type", 0), ("Reason", 0), ("Object", 0), ("Subobject", 1), ("Source", 1),
        ("Message", 0), ("First Seen", 1), ("Count", 1), ("Name", 1)]
    assert out["rows"][0]["cells"] == ["2m", "Warning", "FailedScheduling", "pod/web-0", "spec.containers{app}",
                                       "koord-scheduler", "0/3 nodes are available.", "20m", 7, "web-0.17c"]
    new_api = {"metadata": meta("e2"), "type": "Normal", "reason": "Scheduled",
               "involvedObject": {"kind": "Node"}, "eventTime": "2024-05-01T11:59:15.123456Z",
               "reportingComponent": "koord-scheduler", "reportingInstance": "koord-scheduler-abc"}
    # 44.877s ago: HumanDuration truncates.
    assert row("", "Event", new_api) == ["44s", "Normal", "Scheduled", "node", "",
                                         "koord-scheduler, koord-scheduler-abc", "", "44s", 1, "e2"]
    series = {**new_api, "series": {"count": 4, "lastObservedTime": "2024-05-01T11:59:50.000000Z"}}
    assert row("", "Event", series)[0] == "10s" and row("", "Event", series)[8] == 4


def test_events_k8s_io_event_uses_the_same_printer() -> None:
    ev = {"metadata": meta("e3"), "type": "Normal", "reason": "Evicted", "note": "evicted by koordlet",
          "regarding": {"kind": "Pod", "name": "be-1"}, "eventTime": ago(minutes=4),
          "reportingController": "koordlet", "reportingInstance": "node-1"}
    assert row("events.k8s.io", "Event", ev) == ["4m", "Normal", "Evicted", "pod/be-1", "", "koordlet, node-1",
                                                 "evicted by koordlet", "4m", 1, "e3"]


def test_priority_class_and_pdb() -> None:
    pc = {"metadata": meta("koord-prod"), "value": 9000, "globalDefault": False,
          "preemptionPolicy": "PreemptLowerPriority"}
    out = table("scheduling.k8s.io", "PriorityClass", [pc])
    assert [c["name"] for c in out["columnDefinitions"]] == ["Name", "Value", "Global-Default", "Age",
                                                             "PreemptionPolicy"]
    assert out["rows"][0]["cells"] == ["koord-prod", 9000, False, "3m", "PreemptLowerPriority"]
    pdb = {"metadata": meta("web"), "spec": {"minAvailable": "50%"}, "status": {"disruptionsAllowed": 1}}
    assert row("policy", "PodDisruptionBudget", pdb) == ["web", "50%", "N/A", 1, "3m"]
    pdb2 = {"metadata": meta("db"), "spec": {"maxUnavailable": 1}}
    assert row("policy", "PodDisruptionBudget", pdb2) == ["db", "N/A", "1", 0, "3m"]


def workload_template() -> dict:
    return {"spec": {"containers": [{"name": "app", "image": "nginx:1.25"}, {"name": "log", "image": "busybox"}]}}


def test_deployment_replicaset_statefulset_daemonset() -> None:
    selector = {"matchLabels": {"app": "web"},
                "matchExpressions": [{"key": "tier", "operator": "In", "values": ["fe", "be"]}]}
    deploy = {"metadata": meta("web"), "spec": {"replicas": 3, "selector": selector, "template": workload_template()},
              "status": {"readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}}
    out = table("apps", "Deployment", [deploy])
    assert [(c["name"], c["priority"]) for c in out["columnDefinitions"]] == [
        ("Name", 0), ("Ready", 0), ("Up-to-date", 0), ("Available", 0), ("Age", 0), ("Containers", 1),
        ("Images", 1), ("Selector", 1)]
    assert out["rows"][0]["cells"] == ["web", "2/3", 3, 2, "3m", "app,log", "nginx:1.25,busybox",
                                       "app=web,tier in (be,fe)"]
    rs = {"metadata": meta("web-5d9"), "spec": {"selector": {"matchLabels": {"app": "web"}},
                                               "template": workload_template()},
          "status": {"replicas": 1, "readyReplicas": 1}}
    assert row("apps", "ReplicaSet", rs) == ["web-5d9", 1, 1, 1, "3m", "app,log", "nginx:1.25,busybox", "app=web"]
    sts = {"metadata": meta("db"), "spec": {"replicas": 2, "template": workload_template()},
           "status": {"readyReplicas": 0}}
    assert row("apps", "StatefulSet", sts) == ["db", "0/2", "3m", "app,log", "nginx:1.25,busybox"]
    ds = {"metadata": meta("koordlet"), "spec": {"selector": {"matchLabels": {"app": "koordlet"}},
                                                 "template": {"spec": {"containers": [{"name": "koordlet",
                                                                                       "image": "koordlet:v1"}],
                                                                       "nodeSelector": {"kubernetes.io/os": "linux"}}}},
          "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
                     "updatedNumberScheduled": 3, "numberAvailable": 2}}
    assert row("apps", "DaemonSet", ds) == ["koordlet", 3, 3, 2, 3, 2, "kubernetes.io/os=linux", "3m", "koordlet",
                                            "koordlet:v1", "app=koordlet"]


def test_job_and_cronjob() -> None:
    job = {"metadata": meta("backup"), "spec": {"completions": 1, "template": workload_template(),
                                                "selector": {"matchLabels": {"job": "backup"}}},
           "status": {"succeeded": 1, "startTime": ago(minutes=3), "completionTime": ago(minutes=1),
                      "conditions": [{"type": "Complete", "status": "True"}]}}
    assert row("batch", "Job", job) == ["backup", "Complete", "1/1", "2m", "3m", "app,log", "nginx:1.25,busybox",
                                        "job=backup"]
    running = {"metadata": meta("r"), "spec": {"parallelism": 3}, "status": {"startTime": ago(seconds=30)}}
    assert row("batch", "Job", running)[1:4] == ["Running", "0/1 of 3", "30s"]
    cj = {"metadata": meta("nightly"), "spec": {"schedule": "0 3 * * *", "suspend": False, "jobTemplate": {
        "spec": {"template": workload_template()}}}, "status": {"active": [{"name": "j"}],
                                                                "lastScheduleTime": ago(hours=9)}}
    assert row("batch", "CronJob", cj) == ["nightly", "0 3 * * *", "<none>", "False", 1, "9h", "3m", "app,log",
                                           "nginx:1.25,busybox", "<none>"]


def test_webhooks_and_rbac() -> None:
    hooks = {"metadata": meta("koordinator-webhook"), "webhooks": [{"name": "a"}, {"name": "b"}]}
    assert row("admissionregistration.k8s.io", "MutatingWebhookConfiguration", hooks) == [
        "koordinator-webhook", 2, "3m"]
    assert row("admissionregistration.k8s.io", "ValidatingWebhookConfiguration", hooks)[1] == 2
    binding = {"metadata": meta("koord-manager"), "roleRef": {"kind": "ClusterRole", "name": "koord-manager"},
               "subjects": [{"kind": "ServiceAccount", "name": "koord-manager", "namespace": "koordinator-system"},
                            {"kind": "User", "name": "alice"}, {"kind": "User", "name": "bob"},
                            {"kind": "Group", "name": "ops"}]}
    out = table("rbac.authorization.k8s.io", "ClusterRoleBinding", [binding])
    assert [c["name"] for c in out["columnDefinitions"]] == ["Name", "Role", "Age", "Users", "Groups",
                                                             "ServiceAccounts"]
    assert out["rows"][0]["cells"] == ["koord-manager", "ClusterRole/koord-manager", "3m", "alice, bob", "ops",
                                       "koordinator-system/koord-manager"]
    assert row("rbac.authorization.k8s.io", "RoleBinding", binding)[1] == "ClusterRole/koord-manager"


def test_kinds_without_printer_use_created_at() -> None:
    role = {"metadata": {"name": "view", "creationTimestamp": "2024-04-30T10:00:00+02:00"}}
    for group, kind in [("rbac.authorization.k8s.io", "ClusterRole"), ("rbac.authorization.k8s.io", "Role"),
                        ("apiextensions.k8s.io", "CustomResourceDefinition")]:
        out = table(group, kind, [role])
        assert [(c["name"], c["type"]) for c in out["columnDefinitions"]] == [("Name", "string"),
                                                                             ("Created At", "date")]
        assert out["rows"][0]["cells"] == ["view", "2024-04-30T08:00:00Z"]
    assert row("rbac.authorization.k8s.io", "Role", {"metadata": {"name": "r"}}) == ["r", "0001-01-01T00:00:00Z"]


# -- custom resources ---------------------------------------------------------------------------

NODE_SLO_COLUMNS = [
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "description": "desired"},
    {"name": "QoS", "type": "string", "jsonPath": ".metadata.labels.koordinator\\.sh/qosClass"},
    {"name": "First", "type": "string", "jsonPath": ".status.conditions[0].type", "priority": 1},
    {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
    {"name": "Enabled", "type": "boolean", "jsonPath": ".spec.enabled"},
    {"name": "Resources", "type": "string", "jsonPath": ".spec.resources"},
    {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing.here"},
    {"name": "Heartbeat", "type": "date", "jsonPath": ".status.lastUpdateTime"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]


def test_crd_printer_columns() -> None:
    cr = {"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": "NodeSLO",
          "metadata": {"name": "node-1", "creationTimestamp": ago(hours=5, minutes=30),
                       "labels": {"koordinator.sh/qosClass": "LS"}},
          "spec": {"replicas": 3, "ratio": 0.75, "enabled": True, "resources": {"cpu": "2", "a": [1, 2]}},
          "status": {"lastUpdateTime": ago(seconds=90),
                     "conditions": [{"type": "Synced", "status": "True"}, {"type": "Ready", "status": "False"}]}}
    out = table("slo.koordinator.sh", "NodeSLO", [cr], NODE_SLO_COLUMNS)
    defs = out["columnDefinitions"]
    assert [c["name"] for c in defs] == ["Name"] + [c["name"] for c in NODE_SLO_COLUMNS]
    assert defs[0] == {"name": "Name", "type": "string", "format": "name", "description": defs[0]["description"],
                       "priority": 0}
    assert defs[1]["description"] == ('Custom resource definition column (in JSONPath format): '
                                      '.status.conditions[?(@.type=="Ready")].status')
    assert defs[2]["description"] == "desired"
    assert defs[4]["priority"] == 1
    assert out["rows"][0]["cells"] == ["node-1", "False", 3, "LS", "Synced", 0.75, True, '{"a":[1,2],"cpu":"2"}',
                                       None, "90s", "5h30m"]


def test_crd_column_type_mismatches_and_odd_values() -> None:
    columns = [{"name": "I", "type": "integer", "jsonPath": ".spec.a"},
               {"name": "B", "type": "boolean", "jsonPath": ".spec.a"},
               {"name": "D", "type": "date", "jsonPath": ".spec.b"},
               {"name": "D2", "type": "date", "jsonPath": ".spec.c"},
               {"name": "S", "type": "string", "jsonPath": ".spec.d"},
               {"name": "F", "type": "integer", "jsonPath": ".spec.e"},
               {"name": "N", "type": "string", "jsonPath": ".spec.f"}]
    cr = {"metadata": {"name": "x"}, "spec": {"a": "text", "b": "not-a-date", "c": 5, "d": 1e6, "e": 2.9,
                                              "f": None}}
    assert row("example.com", "Thing", cr, columns) == ["x", None, None, "<invalid>", None, "1e+06", 2, "<no value>"]


def test_custom_resource_without_columns_shows_age() -> None:
    cr = {"metadata": {"name": "q", "creationTimestamp": ago(days=2)}}
    for columns in ([], None):
        out = table("scheduling.sigs.k8s.io", "ElasticQuota", [cr], columns)
        assert [(c["name"], c["type"]) for c in out["columnDefinitions"]] == [("Name", "string"), ("Age", "date")]
        assert out["rows"][0]["cells"] == ["q", "2d"]


# -- JSONPath -----------------------------------------------------------------------------------


def test_jsonpath_subset() -> None:
    obj = {"metadata": {"labels": {"a.b/c": "x"}}, "items": [{"n": 1, "t": "a"}, {"n": 2, "t": "b"}, {"n": 3}],
           "spec": {"x": {"y": 1}, "z": {"y": 2}}}
    assert evaluate_jsonpath(".metadata.labels.a\\.b/c", obj) == ["x"]
    assert evaluate_jsonpath(".metadata.labels['a.b/c']", obj) == ["x"]
    assert evaluate_jsonpath("{.items[1].t}", obj) == ["b"]
    assert evaluate_jsonpath(".items[-1].n", obj) == [3]
    assert evaluate_jsonpath(".items[0:2].n", obj) == [1, 2]
    assert evaluate_jsonpath(".items[*].t", obj) == ["a", "b"]
    assert evaluate_jsonpath(".items[?(@.n > 1)].n", obj) == [2, 3]
    assert evaluate_jsonpath(".items[?(@.t != 'a')].n", obj) == [2]
    assert evaluate_jsonpath(".items[?(@.t)].n", obj) == [1, 2]
    assert evaluate_jsonpath(".spec.*.y", obj) == [1, 2]
    assert evaluate_jsonpath("..y", obj) == [1, 2]
    assert evaluate_jsonpath("$.spec.x.y", obj) == [1]
    assert evaluate_jsonpath(".items[5].n", obj) == []
    assert evaluate_jsonpath(".nope.deeper", obj) == []
