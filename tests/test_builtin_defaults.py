"""Defaulting of built-in kinds, matched against what kube-apiserver stores."""

from __future__ import annotations

import base64
import copy
from typing import Any

import pytest

from koordinator.apiserver import validation as builtin_validation
from koordinator.apiserver.builtin_defaults import DEFAULTERS, apply_defaults, pod_qos_class

NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
               "tolerationSeconds": 300}


def pod(**spec: Any) -> dict[str, Any]:
    spec.setdefault("containers", [{"name": "c", "image": "nginx:1.25"}])
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def defaulted(group: str, kind: str, obj: dict[str, Any], **kw: Any) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    apply_defaults(group, kind, obj, **kw)
    return obj


def test_pod_defaults():
    obj = defaulted("", "Pod", pod(containers=[{"name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80}]}]))
    assert obj["spec"] == {
        "containers": [{
            "name": "c", "image": "nginx:1.25", "ports": [{"containerPort": 80, "protocol": "TCP"}],
            "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File", "resources": {},
        }],
        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
        "schedulerName": "default-scheduler", "securityContext": {}, "enableServiceLinks": True,
        "tolerations": [NOT_READY, UNREACHABLE],
    }
    assert obj["status"] == {"phase": "Pending", "qosClass": "BestEffort"}
    assert "preemptionPolicy" not in obj["spec"]  # the Priority admission plugin sets it


def test_explicit_pod_fields_are_kept():
    obj = defaulted("", "Pod", pod(restartPolicy="Never", dnsPolicy="None", schedulerName="koord-scheduler",
                                   terminationGracePeriodSeconds=0, enableServiceLinks=False))
    spec = obj["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"]) == ("Never", "None", "koord-scheduler")
    assert spec["terminationGracePeriodSeconds"] == 0 and spec["enableServiceLinks"] is False


@pytest.mark.parametrize(
    "image, policy",
    [("nginx", "Always"), ("nginx:latest", "Always"), ("nginx:1.25", "IfNotPresent"),
     ("registry.k8s.io/pause:3.10", "IfNotPresent"), ("localhost:5000/app", "Always"),
     ("nginx@sha256:0123abcd", "IfNotPresent"), ("ghcr.io/koordinator-sh/koordlet:v1.5.0", "IfNotPresent"),
     ("", "IfNotPresent")],
)
def test_image_pull_policy(image, policy):
    obj = defaulted("", "Pod", pod(containers=[{"name": "c", "image": image}]))
    assert obj["spec"]["containers"][0]["imagePullPolicy"] == policy


def test_limits_become_requests_for_pods_only():
    resources = {"limits": {"cpu": 1, "memory": "1024Mi"}, "requests": {"cpu": "500m"}}
    obj = defaulted("", "Pod", pod(containers=[{"name": "c", "image": "x:1", "resources": copy.deepcopy(resources)}]))
    assert obj["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1", "memory": "1Gi"},
                                                         "requests": {"cpu": "500m", "memory": "1Gi"}}
    deploy = {"spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x:1",
                                                             "resources": {"limits": {"cpu": 1}}}]}}}}
    deploy = defaulted("apps", "Deployment", deploy)
    assert deploy["spec"]["template"]["spec"]["containers"][0]["resources"] == {"limits": {"cpu": "1"}}


def test_quantities_are_canonicalised():
    obj = defaulted("", "Pod", pod(
        containers=[{"name": "c", "image": "x:1", "resources": {"requests": {"cpu": 0.5, "memory": "1048576Ki"}}}],
        overhead={"cpu": "0.25"},
        volumes=[{"name": "s", "emptyDir": {"sizeLimit": "1000Mi"}}]))
    assert obj["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert obj["spec"]["overhead"] == {"cpu": "250m"}
    assert obj["spec"]["volumes"][0]["emptyDir"]["sizeLimit"] == "1000Mi"


def test_invalid_quantities_are_left_for_the_decode_check():
    obj = defaulted("", "Pod", pod(containers=[{"name": "c", "image": "x:1",
                                                "resources": {"limits": {"x.com/gpu": "100//GPU"}}}]))
    assert obj["spec"]["containers"][0]["resources"]["limits"] == {"x.com/gpu": "100//GPU"}


@pytest.mark.parametrize(
    "resources, qos",
    [
        ([{"limits": {"cpu": "1", "memory": "1Gi"}}], "Guaranteed"),
        ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "1", "memory": "1Gi"}},
          {"limits": {"cpu": "2", "memory": "2Gi"}}], "Guaranteed"),
        ([{"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "500m"}}], "Burstable"),
        ([{"requests": {"memory": "1Gi"}}], "Burstable"),
        ([{"limits": {"cpu": "1"}}], "Burstable"),
        ([{}], "BestEffort"),
        ([{"requests": {"cpu": "0"}}], "BestEffort"),
        # Koordinator BE pods request batch resources only: BestEffort to Kubernetes.
        ([{"requests": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "2Gi"},
           "limits": {"kubernetes.io/batch-cpu": "1000", "kubernetes.io/batch-memory": "2Gi"}}], "BestEffort"),
    ],
)
def test_qos_class(resources, qos):
    containers = [{"name": f"c{i}", "image": "x:1", "resources": r} for i, r in enumerate(resources)]
    obj = defaulted("", "Pod", pod(containers=containers))
    assert obj["status"]["qosClass"] == qos


def test_qos_class_from_pod_level_resources():
    spec = {"resources": {"limits": {"cpu": "2", "memory": "2Gi"}},
            "containers": [{"name": "c", "image": "x:1", "resources": {"requests": {"cpu": "1"}}}]}
    obj = defaulted("", "Pod", pod(**spec))
    # Missing pod-level requests come from the containers' sum, else from the pod-level limit.
    assert obj["spec"]["resources"]["requests"] == {"cpu": "1", "memory": "2Gi"}
    assert obj["status"]["qosClass"] == "Burstable"
    obj = defaulted("", "Pod", pod(resources={"limits": {"cpu": "2", "memory": "2Gi"}}))
    assert obj["status"]["qosClass"] == "Guaranteed"
    assert pod_qos_class({"spec": {"resources": {"requests": {"cpu": "1"}}}}) == "Burstable"


def test_default_tolerations_are_not_duplicated():
    mine = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 60}
    obj = defaulted("", "Pod", pod(tolerations=[mine]))
    assert obj["spec"]["tolerations"] == [mine, UNREACHABLE]
    wildcard = {"operator": "Exists"}
    obj = defaulted("", "Pod", pod(tolerations=[wildcard]))
    assert obj["spec"]["tolerations"] == [wildcard]


def test_create_only_additions_skip_updates():
    stored = pod()
    stored["metadata"]["resourceVersion"] = "42"
    obj = defaulted("", "Pod", stored)
    assert "tolerations" not in obj["spec"] and "status" not in obj
    assert obj["spec"]["restartPolicy"] == "Always"
    assert "tolerations" in defaulted("", "Pod", stored, create=True)["spec"]


def test_existing_status_is_kept():
    obj = pod()
    obj["status"] = {"phase": "Running", "qosClass": "Burstable"}
    assert defaulted("", "Pod", obj)["status"] == {"phase": "Running", "qosClass": "Burstable"}


def test_host_network_pods_get_host_ports():
    obj = defaulted("", "Pod", pod(hostNetwork=True, containers=[{"name": "c", "image": "x:1",
                                                                   "ports": [{"containerPort": 9316}]}]))
    assert obj["spec"]["containers"][0]["ports"] == [{"containerPort": 9316, "protocol": "TCP", "hostPort": 9316}]


def test_probe_volume_and_env_defaults():
    ctr = {"name": "c", "image": "x:1", "livenessProbe": {"httpGet": {"port": 8080}},
           "lifecycle": {"preStop": {"httpGet": {"port": 1}}},
           "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}
    obj = defaulted("", "Pod", pod(containers=[ctr], volumes=[
        {"name": "a"}, {"name": "b", "secret": {"secretName": "s"}}, {"name": "c", "hostPath": {"path": "/x"}},
        {"name": "d", "configMap": {"name": "cm", "defaultMode": 0o400}}]))
    c = obj["spec"]["containers"][0]
    assert c["livenessProbe"] == {"httpGet": {"port": 8080, "path": "/", "scheme": "HTTP"}, "timeoutSeconds": 1,
                                  "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3}
    assert c["lifecycle"]["preStop"]["httpGet"] == {"port": 1, "path": "/", "scheme": "HTTP"}
    assert c["env"][0]["valueFrom"]["fieldRef"] == {"fieldPath": "spec.nodeName", "apiVersion": "v1"}
    assert obj["spec"]["volumes"] == [
        {"name": "a", "emptyDir": {}}, {"name": "b", "secret": {"secretName": "s", "defaultMode": 420}},
        {"name": "c", "hostPath": {"path": "/x", "type": ""}}, {"name": "d", "configMap": {"name": "cm", "defaultMode": 256}}]


def template() -> dict[str, Any]:
    return {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "x:1"}]}}


def test_deployment_defaults():
    obj = defaulted("apps", "Deployment", {"spec": {"template": template()}})
    spec = obj["spec"]
    assert spec["replicas"] == 1 and spec["revisionHistoryLimit"] == 10 and spec["progressDeadlineSeconds"] == 600
    assert spec["strategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}
    tspec = spec["template"]["spec"]
    assert tspec["restartPolicy"] == "Always" and tspec["schedulerName"] == "default-scheduler"
    assert "enableServiceLinks" not in tspec and "tolerations" not in tspec
    assert defaulted("apps", "Deployment", {"spec": {"strategy": {"type": "Recreate"}}})["spec"]["strategy"] == {
        "type": "Recreate"}


def test_daemonset_statefulset_replicaset_defaults():
    ds = defaulted("apps", "DaemonSet", {"spec": {"template": template()}})["spec"]
    assert ds["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert ds["revisionHistoryLimit"] == 10 and "replicas" not in ds
    sts = defaulted("apps", "StatefulSet", {"spec": {"template": template()}})["spec"]
    assert sts["podManagementPolicy"] == "OrderedReady" and sts["replicas"] == 1
    assert sts["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert sts["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}
    rs = defaulted("apps", "ReplicaSet", {"spec": {"template": template()}})["spec"]
    assert rs["replicas"] == 1 and rs["template"]["spec"]["dnsPolicy"] == "ClusterFirst"


def test_job_and_cronjob_defaults():
    job = defaulted("batch", "Job", {"metadata": {"name": "j"}, "spec": {"template": template()}})
    spec = job["spec"]
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"]) == (1, 1, 6)
    assert spec["completionMode"] == "NonIndexed" and spec["suspend"] is False
    assert spec["podReplacementPolicy"] == "TerminatingOrFailed"
    assert job["metadata"]["labels"] == {"app": "x"}  # copied from the template when absent
    assert defaulted("batch", "Job", {"spec": {"parallelism": 3}})["spec"].get("completions") is None
    cron = defaulted("batch", "CronJob", {"spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {
        "template": template()}}}})["spec"]
    assert (cron["concurrencyPolicy"], cron["suspend"], cron["successfulJobsHistoryLimit"],
            cron["failedJobsHistoryLimit"]) == ("Allow", False, 3, 1)
    assert cron["jobTemplate"]["spec"]["template"]["spec"]["restartPolicy"] == "Always"


def test_service_defaults():
    svc = defaulted("", "Service", {"spec": {"ports": [{"port": 80}, {"port": 443, "targetPort": "https",
                                                                       "protocol": "UDP"}]}})["spec"]
    assert svc == {"ports": [{"port": 80, "protocol": "TCP", "targetPort": 80},
                             {"port": 443, "targetPort": "https", "protocol": "UDP"}],
                   "sessionAffinity": "None", "type": "ClusterIP", "internalTrafficPolicy": "Cluster"}
    lb = defaulted("", "Service", {"spec": {"type": "LoadBalancer", "sessionAffinity": "ClientIP"}})["spec"]
    assert lb["externalTrafficPolicy"] == "Cluster" and lb["allocateLoadBalancerNodePorts"] is True
    assert lb["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 10800}}


def test_namespace_defaults():
    ns = defaulted("", "Namespace", {"metadata": {"name": "koordinator-system"}})
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "koordinator-system"}
    assert ns["spec"] == {"finalizers": ["kubernetes"]} and ns["status"] == {"phase": "Active"}
    updated = defaulted("", "Namespace", {"metadata": {"name": "n", "resourceVersion": "3"}, "spec": {"finalizers": []}})
    assert updated["spec"] == {"finalizers": []}  # the finalizer is never re-added on update


def test_other_kind_defaults():
    assert defaulted("scheduling.k8s.io", "PriorityClass", {"value": 1})["preemptionPolicy"] == "PreemptLowerPriority"
    secret = defaulted("", "Secret", {"data": {"a": "eA=="}, "stringData": {"b": "hello"}})
    assert secret == {"type": "Opaque", "data": {"a": "eA==", "b": base64.b64encode(b"hello").decode()}}
    node = defaulted("", "Node", {"status": {"capacity": {"cpu": 8, "memory": "16384Mi"}}})
    assert node["status"] == {"capacity": {"cpu": "8", "memory": "16Gi"}, "allocatable": {"cpu": "8", "memory": "16Gi"}}
    binding = defaulted("rbac.authorization.k8s.io", "ClusterRoleBinding", {
        "roleRef": {"kind": "ClusterRole", "name": "r"},
        "subjects": [{"kind": "User", "name": "u"}, {"kind": "ServiceAccount", "name": "s", "namespace": "n"}]})
    assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert binding["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io" and "apiGroup" not in binding["subjects"][1]
    pdb = {"spec": {"minAvailable": 1}}
    apply_defaults("policy", "PodDisruptionBudget", pdb)
    assert pdb == {"spec": {"minAvailable": 1}}
    cr = {"spec": {"x": 1}}
    apply_defaults("scheduling.koordinator.sh", "Reservation", cr)
    assert cr == {"spec": {"x": 1}}


def test_defaulting_is_idempotent():
    for (group, kind) in DEFAULTERS:
        obj = {"metadata": {"name": "x"}, "spec": {"template": template(), "ports": [{"port": 1}],
                                                   "containers": [{"name": "c", "image": "x"}]}}
        once = defaulted(group, kind, obj)
        assert defaulted(group, kind, once) == once, kind


def test_defaulted_workloads_validate_cleanly():
    deploy = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "default"},
              "spec": {"selector": {"matchLabels": {"app": "x"}}, "template": template()}}
    apply_defaults("apps", "Deployment", deploy)
    assert builtin_validation.validate("apps", "Deployment", deploy, None) == []
    p = pod()
    apply_defaults("", "Pod", p)
    assert builtin_validation.validate("", "Pod", p, None) == []
