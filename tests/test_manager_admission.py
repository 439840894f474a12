"""koord-manager's admission webhooks end to end: kubectl → embedded API server → manager (TLS) → back.

The webhook configurations are the ones ``koordinator local`` installs (the objects of
manifests/webhooks.yaml), routed through Service + Endpoints to the manager's port; the manager
bootstraps its certificates and injects the caBundle itself.
"""

from __future__ import annotations

import base64
import subprocess
from typing import Iterator

import pytest
import yaml

from koordinator.apis import quantity
from koordinator.local import free_port
from koordinator_roles.manager.local import ensure_webhooks as ensure_manager_webhooks
from koordinator_roles.manager.webhook_configuration import MUTATING_NAME, VALIDATING_NAME
from tests.apiserver_process import ApiServerProcess
from tests.manager_harness import InProcessManager
from tests.waiting import wait_until

PRIORITY_CLASSES = "manifests/priorityclasses.yaml"
PROFILE = """
apiVersion: config.koordinator.sh/v1alpha1
kind: ClusterColocationProfile
metadata:
  name: colocation-profile-example
spec:
  namespaceSelector:
    matchLabels:
      koordinator.sh/enable-colocation: "true"
  selector:
    matchLabels:
      koordinator.sh/enable-colocation: "true"
  qosClass: BE
  priorityClassName: koord-batch
  koordinatorPriority: 1000
  schedulerName: koord-scheduler
  labels:
    koordinator.sh/mutated: "true"
  annotations:
    koordinator.sh/intercepted: "true"
  patch:
    spec:
      terminationGracePeriodSeconds: 30
"""


@pytest.fixture(scope="module")
def manager(crd_server, crd_client, tmp_path_factory) -> Iterator[InProcessManager]:
    port = free_port()
    ensure_manager_webhooks(crd_client, port)
    crd_server.kubectl("apply", "-f", PRIORITY_CLASSES)
    m = InProcessManager(crd_server.kubeconfig, tmp_path_factory.mktemp("certs"), "--controllers=-noderesource",
                         webhook_port=port)
    m.start()
    try:
        m.wait_for_webhooks(crd_client)
        yield m
    finally:
        m.stop()


def kubectl_apply(crd_server: ApiServerProcess, manifest: str, *, check: bool = True) -> subprocess.CompletedProcess:
    return crd_server.kubectl("apply", "-f", "-", input=manifest, check=check)


def pod_manifest(name: str, namespace: str, labels: dict | None = None, *, cpu: str = "500m", memory: str = "1Gi",
                 priority_class: str | None = None) -> str:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace,
                                                          "labels": labels or {}},
           "spec": {"containers": [{"name": "main", "image": "nginx", "resources": {
               "requests": {"cpu": cpu, "memory": memory}, "limits": {"cpu": cpu, "memory": memory}}}]}}
    if priority_class:
        pod["spec"]["priorityClassName"] = priority_class
    return yaml.safe_dump(pod)


def test_certificates_bootstrap_from_nothing(manager, crd_client):
    secret = crd_client.get("Secret", "koordinator-webhook-certs", "koordinator-system")
    ca = base64.b64decode(secret["data"]["ca-cert.pem"])
    for kind, name in (("MutatingWebhookConfiguration", MUTATING_NAME),
                       ("ValidatingWebhookConfiguration", VALIDATING_NAME)):
        for webhook in crd_client.get(kind, name)["webhooks"]:
            assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == ca


def test_profile_mutates_a_pod_created_with_kubectl(manager, crd_client, crd_server):
    kubectl_apply(crd_server, PROFILE)
    crd_server.kubectl("create", "namespace", "colo")
    crd_server.kubectl("label", "namespace", "colo", "koordinator.sh/enable-colocation=true")
    wait_until(lambda: len(manager.runtime.informers.informer("ClusterColocationProfile").store.keys()) == 1
               and (manager.runtime.informers.informer("Namespace").store.get("colo") or {}).get(
                   "metadata", {}).get("labels", {}).get("koordinator.sh/enable-colocation") == "true",
               message="the manager's caches have the profile and the namespace labels")
    kubectl_apply(crd_server, pod_manifest("batch-job", "colo", {"koordinator.sh/enable-colocation": "true"}))
    pod = crd_client.get("Pod", "batch-job", "colo")
    labels = pod["metadata"]["labels"]
    assert labels["koordinator.sh/qosClass"] == "BE"
    assert labels["koordinator.sh/priority"] == "1000"
    assert labels["koordinator.sh/mutated"] == "true"
    assert pod["metadata"]["annotations"]["koordinator.sh/intercepted"] == "true"
    spec = pod["spec"]
    assert spec["schedulerName"] == "koord-scheduler"
    assert spec["priorityClassName"] == "koord-batch" and spec["priority"] == 5000
    assert spec["terminationGracePeriodSeconds"] == 30
    resources = spec["containers"][0]["resources"]
    # cpu 500m becomes batch-cpu 500 (milli-cores as a plain integer), memory 1Gi batch-memory in bytes.
    assert quantity.value(resources["requests"]["kubernetes.io/batch-cpu"]) == 500
    assert quantity.value(resources["limits"]["kubernetes.io/batch-memory"]) == 1 << 30
    assert "cpu" not in resources["requests"] and "memory" not in resources["limits"]
    assert "node.koordinator.sh/extended-resource-spec" in pod["metadata"]["annotations"]

    # A pod the profile's selector does not match is left alone.
    kubectl_apply(crd_server, pod_manifest("plain", "colo"))
    plain = crd_client.get("Pod", "plain", "colo")
    assert "koordinator.sh/qosClass" not in (plain["metadata"].get("labels") or {})
    assert plain["spec"]["containers"][0]["resources"]["requests"]["cpu"] == "500m"


def test_invalid_qos_priority_combination_is_rejected(manager, crd_server):
    crd_server.kubectl("create", "namespace", "lsr-batch")
    proc = kubectl_apply(crd_server, pod_manifest("bad", "lsr-batch", {"koordinator.sh/qosClass": "LSR"},
                                              cpu="1", priority_class="koord-batch"), check=False)
    assert proc.returncode != 0
    assert ('admission webhook "vpod.koordinator.sh" denied the request: '
            "Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass=koord-batch cannot be used in combination"
            ) in proc.stderr


def test_elastic_quota_tree_violations_are_rejected(manager, crd_server):
    crd_server.kubectl("create", "namespace", "quota")
    kubectl_apply(crd_server, """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: parent
  namespace: quota
  labels:
    quota.scheduling.koordinator.sh/is-parent: "true"
spec:
  min: {cpu: "10", memory: 10Gi}
  max: {cpu: "20", memory: 20Gi}
""")
    proc = kubectl_apply(crd_server, """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: child
  namespace: quota
  labels:
    quota.scheduling.koordinator.sh/parent: parent
spec:
  min: {cpu: "15", memory: 5Gi}
  max: {cpu: "20", memory: 20Gi}
""", check=False)
    assert proc.returncode != 0
    assert 'admission webhook "velasticquota.koordinator.sh" denied the request' in proc.stderr
    assert "checkMinQuotaSum" in proc.stderr
    # min > max is refused by the self checks.
    proc = kubectl_apply(crd_server, """
apiVersion: scheduling.sigs.k8s.io/v1alpha1
kind: ElasticQuota
metadata:
  name: upside-down
  namespace: quota
spec:
  min: {cpu: "30"}
  max: {cpu: "20"}
""", check=False)
    assert proc.returncode != 0 and "min 30 > max 20" in proc.stderr


def test_unavailable_webhook_with_failure_policy_fail(manager, crd_server, crd_client):
    # Last in this module: it stops the manager the other tests share.
    crd_server.kubectl("create", "namespace", "nowebhook")
    manager.stop()
    proc = kubectl_apply(crd_server, pod_manifest("p", "nowebhook"), check=False)
    assert proc.returncode != 0
    assert 'Internal error occurred: failed calling webhook "mpod-create.koordinator.sh"' in proc.stderr
    assert crd_client.list("Pod", "nowebhook")["items"] == []
