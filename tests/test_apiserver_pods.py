"""Pod-specific behaviour: defaults, priority admission, binding, eviction with PodDisruptionBudgets."""

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException


def pod(name, labels=None, **spec):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"requests": {"cpu": "100m"}}}], **spec}}


def test_pod_defaults(apiserver, namespace):
    _, made, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod("d"), expect=201)
    spec = made["spec"]
    assert spec["schedulerName"] == "default-scheduler" and spec["restartPolicy"] == "Always"
    assert spec["priority"] == 0 and spec["preemptionPolicy"] == "PreemptLowerPriority"
    assert made["status"]["phase"] == "Pending" and made["status"]["qosClass"] == "Burstable"
    assert made["metadata"]["generation"] == 1


def test_priority_admission(apiserver, namespace):
    apiserver.request("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
                      {"metadata": {"name": f"batch-{namespace}"}, "value": 5000, "preemptionPolicy": "Never"},
                      expect=201)
    _, made, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods",
                                   pod("p", priorityClassName=f"batch-{namespace}"), expect=201)
    assert made["spec"]["priority"] == 5000 and made["spec"]["preemptionPolicy"] == "Never"
    status, err, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods",
                                       pod("q", priorityClassName="low-priority"))
    assert status == 403
    assert err["message"] == 'pods "q" is forbidden: no PriorityClass with name low-priority was found'
    status, err, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods",
                                       pod("r", priorityClassName=f"batch-{namespace}", priority=1))
    assert status == 403 and "must not be provided in pod spec" in err["message"]
    status, err, _ = apiserver.request("PUT", f"/apis/scheduling.k8s.io/v1/priorityclasses/batch-{namespace}",
                                       {"metadata": {"name": f"batch-{namespace}"}, "value": 1})
    assert status == 422 and "may not be changed in an update" in err["message"]


def test_system_priority_classes_exist(apiserver):
    _, pc, _ = apiserver.request("GET", "/apis/scheduling.k8s.io/v1/priorityclasses/system-node-critical", expect=200)
    assert pc["value"] == 2000001000


def test_binding(core, namespace):
    core.create_namespaced_pod(namespace, pod("b"))
    body = client.V1Binding(metadata=client.V1ObjectMeta(name="b"),
                            target=client.V1ObjectReference(kind="Node", name="node-1"))
    # The generated client cannot parse the Status answer of a binding; the request is what matters.
    core.create_namespaced_binding(namespace, body, _preload_content=False)
    bound = core.read_namespaced_pod("b", namespace)
    assert bound.spec.node_name == "node-1"
    scheduled = [c for c in bound.status.conditions if c.type == "PodScheduled"][0]
    assert scheduled.status == "True"
    with pytest.raises(ApiException) as err:
        core.create_namespaced_binding(namespace, body, _preload_content=False)
    assert err.value.status == 409 and "already assigned to node" in err.value.body


def test_binding_needs_an_existing_pod(apiserver, namespace):
    status, _, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods/ghost/binding",
                                     {"target": {"name": "n"}})
    assert status == 404


def make_ready(apiserver, namespace, name):
    apiserver.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{name}/status",
                      {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}},
                      headers={"Content-Type": "application/strategic-merge-patch+json"}, expect=200)


def evict(apiserver, namespace, name):
    return apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods/{name}/eviction",
                             {"apiVersion": "policy/v1", "kind": "Eviction",
                              "metadata": {"name": name, "namespace": namespace}})


def test_eviction_respects_pod_disruption_budget(apiserver, namespace):
    for name in ("e1", "e2"):
        apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod(name, {"app": "e"}), expect=201)
        make_ready(apiserver, namespace, name)
    apiserver.request("POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
                      {"metadata": {"name": "budget"}, "spec": {"minAvailable": 1,
                                                                "selector": {"matchLabels": {"app": "e"}}}},
                      expect=201)
    _, pdb, _ = apiserver.request("GET", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/budget")
    assert pdb["status"]["expectedPods"] == 2 and pdb["status"]["currentHealthy"] == 2
    assert pdb["status"]["disruptionsAllowed"] == 1
    status, body, _ = evict(apiserver, namespace, "e1")
    assert status == 201 and body["status"] == "Success"
    apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/e1", expect=404)
    status, body, headers = evict(apiserver, namespace, "e2")
    assert status == 429 and body["reason"] == "TooManyRequests"
    assert body["message"] == "Cannot evict pod as it would violate the pod's disruption budget."
    assert body["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert "needs 1 healthy pods and has 1 currently" in body["details"]["causes"][0]["message"]
    # kube-apiserver suggests a retry only while the budget is being processed, not for a spent budget.
    assert "retry-after" not in headers
    apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/e2", expect=200)


def test_pending_pods_are_always_evictable(apiserver, namespace):
    apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod("pend", {"app": "p"}), expect=201)
    apiserver.request("POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
                      {"metadata": {"name": "strict"}, "spec": {"maxUnavailable": 0,
                                                                "selector": {"matchLabels": {"app": "p"}}}},
                      expect=201)
    status, _, _ = evict(apiserver, namespace, "pend")
    assert status == 201


def test_two_budgets_are_an_error(apiserver, namespace):
    apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods", pod("two", {"app": "t"}), expect=201)
    make_ready(apiserver, namespace, "two")
    for name in ("b1", "b2"):
        apiserver.request("POST", f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets",
                          {"metadata": {"name": name}, "spec": {"minAvailable": 0,
                                                                "selector": {"matchLabels": {"app": "t"}}}},
                          expect=201)
    status, body, _ = evict(apiserver, namespace, "two")
    assert status == 500 and "more than one PodDisruptionBudget" in body["message"]


def test_pod_validation_messages(apiserver, namespace):
    status, err, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods",
                                       {"metadata": {"name": "empty"}, "spec": {}})
    assert status == 422 and err["message"] == 'Pod "empty" is invalid: spec.containers: Required value'
    status, err, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods",
                                       {"metadata": {"name": "labels", "labels": {"ok": True}}, "spec": {}})
    assert status == 400 and "cannot unmarshal bool" in err["message"]


def test_graceful_pod_deletion(fresh_apiserver):
    fresh_apiserver.start("--pod-deletion", "graceful")
    path = "/api/v1/namespaces/default/pods"
    fresh_apiserver.request("POST", path, pod("g", nodeName="n1"), expect=201)
    status, deleting, _ = fresh_apiserver.request("DELETE", f"{path}/g")
    assert status == 202 and deleting["metadata"]["deletionGracePeriodSeconds"] == 30
    fresh_apiserver.request("GET", f"{path}/g", expect=200)
    fresh_apiserver.request("DELETE", f"{path}/g", {"gracePeriodSeconds": 0}, expect=200)
    fresh_apiserver.request("GET", f"{path}/g", expect=404)
    # Unbound pods go at once even in graceful mode.
    fresh_apiserver.request("POST", path, pod("u"), expect=201)
    fresh_apiserver.request("DELETE", f"{path}/u", expect=200)
