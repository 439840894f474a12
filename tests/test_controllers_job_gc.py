"""The Job controller, TTL after finished, the garbage collector and deletion propagation, against the
embedded API server over HTTP, with kubectl as a real client. The test plays the kubelet: it binds
pods and writes their status."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from koordinator import controllers
from koordinator.controllers import garbagecollector, job as jobctl, jobutil
from koordinator.runtime import errors
from koordinator.runtime.client import Client
from koordinator.runtime.options import RuntimeOptions
from koordinator.runtime.runtime import Runtime
from tests.waiting import wait_until

NODE = "kubelet-node"
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def api(crd_server) -> Iterator[Client]:
    c = Client.from_kubeconfig(str(crd_server.kubeconfig), qps=0)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def running_controllers(crd_server, api) -> Iterator[Runtime]:
    """The Job controller (with TTL after finished) and the garbage collector, with short backoffs."""
    saved = (jobctl.POD_FAILURE_BACKOFF, jobctl.MAX_POD_FAILURE_BACKOFF, jobctl.SYNC_BATCH_PERIOD)
    jobctl.POD_FAILURE_BACKOFF, jobctl.MAX_POD_FAILURE_BACKOFF, jobctl.SYNC_BATCH_PERIOD = 0.2, 0.4, 0.05
    options = RuntimeOptions.defaults("controllers", kubeconfig=str(crd_server.kubeconfig), metrics_addr="0",
                                      health_addr="0", log_level="warning")
    runtime = Runtime(options, client=Client.from_kubeconfig(str(crd_server.kubeconfig), qps=0))
    controllers.register(runtime, ["job", "garbagecollector"])
    runtime.start()
    try:
        assert runtime.informers.wait_for_sync(30)
        yield runtime
    finally:
        runtime.stop(10)
        runtime.client.close()
        jobctl.POD_FAILURE_BACKOFF, jobctl.MAX_POD_FAILURE_BACKOFF, jobctl.SYNC_BATCH_PERIOD = saved


@pytest.fixture
def ns(api, running_controllers) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


# -- the kubelet ------------------------------------------------------------------------------------------


def job_pods(api: Client, ns: str, name: str) -> list[Obj]:
    return api.list("Pod", ns, label_selector=f"batch.kubernetes.io/job-name={name}")["items"]


def unfinished(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
            and not p["metadata"].get("deletionTimestamp")]


def run(api: Client, pod: Obj) -> None:
    """Bind the pod and report it Running and Ready."""
    md = pod["metadata"]
    if not (pod.get("spec") or {}).get("nodeName"):
        api.bind(md["name"], md["namespace"], NODE)
    now = jobutil.now_rfc3339()
    api.patch("Pod", md["name"], {"status": {
        "phase": "Running", "startTime": now,
        "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}],
        "containerStatuses": [{"name": "main", "ready": True, "restartCount": 0, "image": "busybox",
                               "imageID": "", "state": {"running": {"startedAt": now}}}]}},
        namespace=md["namespace"], subresource="status")


def finish(api: Client, pod: Obj, exit_code: int = 0) -> None:
    """Report the pod's container terminated: Succeeded with exit code 0, else Failed."""
    md = pod["metadata"]
    now = jobutil.now_rfc3339()
    api.patch("Pod", md["name"], {"status": {
        "phase": "Succeeded" if exit_code == 0 else "Failed",
        "conditions": [{"type": "Ready", "status": "False", "lastTransitionTime": now}],
        "containerStatuses": [{"name": "main", "ready": False, "restartCount": 0, "image": "busybox", "imageID": "",
                               "state": {"terminated": {"exitCode": exit_code,
                                                        "reason": "Completed" if exit_code == 0 else "Error",
                                                        "startedAt": now, "finishedAt": now}}}]}},
        namespace=md["namespace"], subresource="status")


def new_job(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {**spec, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "main", "image": "busybox", "command": ["true"]}]}}}}


def get_job(api: Client, ns: str, name: str) -> Obj:
    return api.get("Job", name, ns)


def conditions(job: Obj) -> list[tuple[str, str, str, str]]:
    return [(c["type"], c["status"], c.get("reason", ""), c.get("message", ""))
            for c in (job.get("status") or {}).get("conditions") or ()]


def gone(api: Client, kind: str, name: str, ns: str | None = None) -> bool:
    try:
        api.get(kind, name, ns)
        return False
    except errors.NotFound:
        return True


def events(api: Client, ns: str, name: str) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e["message"]) for e in api.list("Event", ns)["items"]
            if e["involvedObject"].get("name") == name]


# -- Jobs --------------------------------------------------------------------------------------------------


def test_job_runs_parallelism_pods_until_completions_succeed(crd_server, api, ns):
    api.create(new_job("work", completions=4, parallelism=2), namespace=ns)
    job = get_job(api, ns, "work")
    uid = job["metadata"]["uid"]
    # The server generated the selector and the template labels, as kube-apiserver does.
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == {
        "batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": "work",
        "controller-uid": uid, "job-name": "work"}
    done = 0
    while done < 4:
        pods = wait_until(lambda: unfinished(job_pods(api, ns, "work")) or None, message="a running pod")
        assert len(pods) <= 2, [p["metadata"]["name"] for p in pods]
        assert int((get_job(api, ns, "work").get("status") or {}).get("active", 0)) <= 2
        pod = pods[0]
        assert pod["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
        (ref,) = pod["metadata"]["ownerReferences"]
        assert ref == {"apiVersion": "batch/v1", "kind": "Job", "name": "work", "uid": uid, "controller": True,
                       "blockOwnerDeletion": True}
        assert pod["metadata"]["generateName"] == "work-"
        run(api, pod)
        finish(api, pod)
        done += 1
    crd_server.kubectl("wait", "--for=condition=complete", "job/work", "-n", ns, "--timeout=20s")
    status = get_job(api, ns, "work")["status"]
    assert status["succeeded"] == 4 and "active" not in status and "failed" not in status
    assert status["ready"] == 0 and status["terminating"] == 0 and status["uncountedTerminatedPods"] == {}
    assert status["startTime"] and status["completionTime"]
    assert conditions({"status": status}) == [
        ("SuccessCriteriaMet", "True", "CompletionsReached", "Reached expected number of succeeded pods"),
        ("Complete", "True", "CompletionsReached", "Reached expected number of succeeded pods")]
    # Counted pods lose the tracking finalizer; they stay (for logs) until the Job goes.
    pods = job_pods(api, ns, "work")
    assert len(pods) == 4 and all(not p["metadata"].get("finalizers") for p in pods)
    seen = wait_until(lambda: (lambda e: e if ("Normal", "Completed", "Job completed") in e else None)(
        events(api, ns, "work")), message="the Completed event")
    created = [m for t, r, m in seen if r == "SuccessfulCreate"]
    assert len(created) == 4 and all(m.startswith("Created pod: work-") for m in created)
    described = crd_server.kubectl("describe", "job", "work", "-n", ns).stdout
    assert "4 Succeeded" in described and "Completed" in described


def test_backoff_limit_fails_the_job_and_removes_active_pods(api, ns):
    api.create(new_job("flaky", completions=4, parallelism=2, backoffLimit=1), namespace=ns)
    pods = wait_until(lambda: (lambda p: p if len(p) == 2 else None)(unfinished(job_pods(api, ns, "flaky"))),
                      message="two pods")
    for pod in pods:
        run(api, pod)
    finish(api, pods[0], exit_code=1)
    # One failure is within the limit: after the backoff the pod is replaced.
    replaced = wait_until(lambda: (lambda p: p if len(p) == 2 and pods[1]["metadata"]["uid"] in
                                   {x["metadata"]["uid"] for x in p} else None)(unfinished(job_pods(api, ns, "flaky"))),
                          message="a replacement pod")
    wait_until(lambda: get_job(api, ns, "flaky")["status"].get("failed") == 1, message="the failure counted")
    newcomer = next(p for p in replaced if p["metadata"]["uid"] != pods[1]["metadata"]["uid"])
    run(api, newcomer)
    finish(api, newcomer, exit_code=2)
    wait_until(lambda: jobutil.is_finished(get_job(api, ns, "flaky")), message="the Job fails")
    status = get_job(api, ns, "flaky")["status"]
    assert conditions({"status": status}) == [
        ("FailureTarget", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"),
        ("Failed", "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit")]
    # The still running pod was deleted and counted as failed; nothing is left running or uncounted.
    assert status["failed"] == 3 and "active" not in status and status["uncountedTerminatedPods"] == {}
    assert "completionTime" not in status
    assert not unfinished(job_pods(api, ns, "flaky"))
    assert all(p["metadata"]["uid"] != pods[1]["metadata"]["uid"] for p in job_pods(api, ns, "flaky"))
    wait_until(lambda: ("Warning", "BackoffLimitExceeded", "Job has reached the specified backoff limit")
               in events(api, ns, "flaky"), message="the Warning event")


def test_indexed_job_gives_each_pod_its_index(crd_server, api, ns):
    api.create(new_job("idx", completions=3, parallelism=3, completionMode="Indexed"), namespace=ns)
    pods = wait_until(lambda: (lambda p: p if len(p) == 3 else None)(unfinished(job_pods(api, ns, "idx"))),
                      message="three pods")
    by_index = {}
    for pod in pods:
        md = pod["metadata"]
        ix = md["annotations"]["batch.kubernetes.io/job-completion-index"]
        assert md["labels"]["batch.kubernetes.io/job-completion-index"] == ix
        assert md["generateName"] == f"idx-{ix}-" and pod["spec"]["hostname"] == f"idx-{ix}"
        assert {"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
            "apiVersion": "v1", "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}} \
            in pod["spec"]["containers"][0]["env"]
        by_index[int(ix)] = pod
    assert sorted(by_index) == [0, 1, 2]
    for ix in (2, 1):
        run(api, by_index[ix])
        finish(api, by_index[ix])
    wait_until(lambda: get_job(api, ns, "idx")["status"].get("completedIndexes") == "1,2",
               message="indexes 1 and 2 completed")
    run(api, by_index[0])
    finish(api, by_index[0])
    crd_server.kubectl("wait", "--for=condition=complete", "job/idx", "-n", ns, "--timeout=20s")
    status = get_job(api, ns, "idx")["status"]
    assert status["completedIndexes"] == "0-2" and status["succeeded"] == 3


def test_active_deadline_fails_the_job(api, ns):
    api.create(new_job("slow", activeDeadlineSeconds=1, parallelism=2, completions=2), namespace=ns)
    pods = wait_until(lambda: (lambda p: p if len(p) == 2 else None)(unfinished(job_pods(api, ns, "slow"))),
                      message="two pods")
    run(api, pods[0])
    wait_until(lambda: jobutil.is_finished(get_job(api, ns, "slow")), message="the deadline passes")
    job = get_job(api, ns, "slow")
    assert conditions(job) == [
        ("FailureTarget", "True", "DeadlineExceeded", "Job was active longer than specified deadline"),
        ("Failed", "True", "DeadlineExceeded", "Job was active longer than specified deadline")]
    assert job["status"]["failed"] == 2 and job_pods(api, ns, "slow") == []


def test_suspended_job_runs_nothing_until_resumed(api, ns):
    api.create(new_job("later", suspend=True), namespace=ns)
    wait_until(lambda: ("Suspended", "True", "JobSuspended", "Job suspended") in conditions(get_job(api, ns, "later")),
               message="the Suspended condition")
    job = get_job(api, ns, "later")
    assert "startTime" not in job["status"] and job_pods(api, ns, "later") == []
    api.patch("Job", "later", {"spec": {"suspend": False}}, namespace=ns)
    (pod,) = wait_until(lambda: unfinished(job_pods(api, ns, "later")), message="a pod once resumed")
    wait_until(lambda: ("Suspended", "False", "JobResumed", "Job resumed") in conditions(get_job(api, ns, "later")),
               message="the resumed condition")
    assert get_job(api, ns, "later")["status"]["startTime"]


def test_ttl_after_finished_deletes_the_job_and_its_pods(api, ns):
    api.create(new_job("brief", ttlSecondsAfterFinished=0), namespace=ns)
    (pod,) = wait_until(lambda: unfinished(job_pods(api, ns, "brief")), message="a pod")
    run(api, pod)
    finish(api, pod)

    wait_until(lambda: gone(api, "Job", "brief", ns), message="the expired Job deleted")
    wait_until(lambda: job_pods(api, ns, "brief") == [], message="its pods deleted with it")


def test_job_deleted_through_the_api_orphans_its_pods_by_default(crd_server, api, ns):
    api.create(new_job("legacy", parallelism=2, completions=2), namespace=ns)
    pods = wait_until(lambda: (lambda p: p if len(p) == 2 else None)(unfinished(job_pods(api, ns, "legacy"))),
                      message="two pods")
    # No propagationPolicy: batch/v1 Jobs orphan their pods (kubectl always sends Background).
    crd_server.request("DELETE", f"/apis/batch/v1/namespaces/{ns}/jobs/legacy", expect=202)

    def orphaned() -> list[Obj] | None:
        left = job_pods(api, ns, "legacy")
        return left if len(left) == 2 and all(not p["metadata"].get("ownerReferences")
                                              and not p["metadata"].get("finalizers") for p in left) else None

    wait_until(orphaned, message="the pods orphaned and their tracking finalizers removed")
    wait_until(lambda: gone(api, "Job", "legacy", ns), message="the Job deleted once its orphan finalizer is removed")
    assert {p["metadata"]["uid"] for p in job_pods(api, ns, "legacy")} == {p["metadata"]["uid"] for p in pods}


def test_backoff_doubles_from_the_base_up_to_the_cap():
    record = jobutil.BackoffRecord("ns/j", failures=1, last_failure=1000.0)
    assert record.remaining(10, 360, now=1000.0) == 10
    assert jobutil.BackoffRecord("ns/j", 3, 1000.0).remaining(10, 360, now=1005.0) == 35
    assert jobutil.BackoffRecord("ns/j", 7, 1000.0).remaining(10, 360, now=1000.0) == 360
    assert jobutil.BackoffRecord("ns/j", 2, 1000.0).remaining(10, 360, now=1030.0) == 0
    assert jobutil.format_indexes([4, 0, 1, 2, 7, 8]) == "0-2,4,7,8"
    assert jobutil.parse_indexes("0-2,4,7-9", 8) == {0, 1, 2, 4, 7}


# -- the garbage collector and deletion propagation ----------------------------------------------------------


def owner_ref(obj: Obj, controller: bool = True) -> Obj:
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": obj["metadata"]["name"],
            "uid": obj["metadata"]["uid"], "controller": controller, "blockOwnerDeletion": True}


def make_deployment(api: Client, ns: str, name: str) -> tuple[Obj, Obj, list[Obj]]:
    """A Deployment with a ReplicaSet and two pods owned as the apps controllers own them."""
    labels = {"app": name}
    template = {"metadata": {"labels": labels}, "spec": {"containers": [{"name": "main", "image": "nginx"}]}}
    deploy = api.create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                         "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template}},
                        namespace=ns)
    rs = api.create({"apiVersion": "apps/v1", "kind": "ReplicaSet",
                     "metadata": {"name": f"{name}-rs", "ownerReferences": [owner_ref(deploy)]},
                     "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": template}},
                    namespace=ns)
    pods = [api.create({"apiVersion": "v1", "kind": "Pod",
                        "metadata": {"name": f"{name}-pod-{i}", "labels": labels, "ownerReferences": [owner_ref(rs)]},
                        "spec": template["spec"]}, namespace=ns) for i in range(2)]
    return deploy, rs, pods


def names(api: Client, kind: str, ns: str) -> list[str]:
    return sorted(o["metadata"]["name"] for o in api.list(kind, ns)["items"])


def test_kubectl_delete_deployment_collects_its_replicaset_and_pods(crd_server, api, ns):
    make_deployment(api, ns, "web")
    crd_server.kubectl("delete", "deployment", "web", "-n", ns)
    wait_until(lambda: names(api, "ReplicaSet", ns) == [] and names(api, "Pod", ns) == [],
               message="the ReplicaSet and its pods collected")


def test_kubectl_cascade_foreground_returns_after_the_dependents(crd_server, api, ns):
    make_deployment(api, ns, "fg")
    crd_server.kubectl("delete", "deployment", "fg", "-n", ns, "--cascade=foreground", "--timeout=30s")
    # kubectl waited for the Deployment, which goes only after its blocking dependents.
    assert names(api, "Deployment", ns) == [] and names(api, "ReplicaSet", ns) == [] and names(api, "Pod", ns) == []


def test_foreground_deletion_keeps_the_owner_until_blocking_dependents_go(crd_server, api, ns):
    cm = api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owner"}}, namespace=ns)
    api.create({"apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": "held", "ownerReferences": [owner_ref(cm)], "finalizers": ["example.com/hold"]}},
               namespace=ns)
    status, body, _ = crd_server.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/owner",
                                         {"propagationPolicy": "Foreground"})
    assert status == 202 and body["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert body["metadata"]["deletionTimestamp"]
    secret = wait_until(lambda: api.get("Secret", "held", ns)["metadata"].get("deletionTimestamp") and
                        api.get("Secret", "held", ns), message="the dependent being deleted")
    assert api.get("ConfigMap", "owner", ns)["metadata"]["finalizers"] == ["foregroundDeletion"]
    api.patch("Secret", "held", {"metadata": {"finalizers": None}}, namespace=ns)
    wait_until(lambda: names(api, "ConfigMap", ns) == [], message="the owner deleted once the dependent went")
    assert secret["metadata"]["name"] == "held" and names(api, "Secret", ns) == []


def test_kubectl_cascade_orphan_leaves_the_replicaset_without_owner(crd_server, api, ns):
    _, rs, pods = make_deployment(api, ns, "orph")
    crd_server.kubectl("delete", "deployment", "orph", "-n", ns, "--cascade=orphan")
    wait_until(lambda: names(api, "Deployment", ns) == [], message="the Deployment gone")
    left = api.get("ReplicaSet", "orph-rs", ns)
    assert left["metadata"]["uid"] == rs["metadata"]["uid"] and not left["metadata"].get("ownerReferences")
    assert not left["metadata"].get("finalizers")
    for pod in pods:
        assert api.get("Pod", pod["metadata"]["name"], ns)["metadata"]["ownerReferences"] == [owner_ref(rs)]


def test_dependents_of_every_kind_are_collected_cluster_scoped_owners_too(api, ns):
    profile = api.create({"apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
                          "metadata": {"name": f"owner-{ns}"}, "spec": {}})
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "ownerReferences": [
        owner_ref(profile, controller=False)]}}, namespace=ns)
    api.create({"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "PodGroup",
                "metadata": {"name": "pg", "ownerReferences": [owner_ref(profile)]}, "spec": {"minMember": 1}},
               namespace=ns)
    cm2 = api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "second-owner"}}, namespace=ns)
    # Two owners: losing one of them only drops that reference.
    api.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "ownerReferences": [
        owner_ref(profile, controller=False), owner_ref(cm2, controller=False)]},
        "spec": {"ports": [{"port": 80}]}}, namespace=ns)
    api.delete("ClusterColocationProfile", f"owner-{ns}")
    wait_until(lambda: names(api, "ConfigMap", ns) == ["second-owner"] and names(api, "PodGroup", ns) == [],
               message="the dependents of the deleted profile collected")
    wait_until(lambda: api.get("Service", "svc", ns)["metadata"].get("ownerReferences") == [
        owner_ref(cm2, controller=False)], message="the dangling reference dropped")
    # A dependent created after its owner is gone (by uid) is collected too.
    api.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "late", "ownerReferences": [
        {**owner_ref(cm2), "uid": str(uuid.uuid4())}]}}, namespace=ns)
    wait_until(lambda: names(api, "Secret", ns) == [], message="the dependent of an owner that never existed")


def test_invalid_propagation_policy_names_the_value_and_deletes_nothing(crd_server, api, ns):
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "keep"}}, namespace=ns)
    path = f"/api/v1/namespaces/{ns}/configmaps"
    status, body, _ = crd_server.request("DELETE", f"{path}/keep", {"propagationPolicy": "Sideways"})
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == ('DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: '
                               '"Sideways": supported values: "Foreground", "Background", "Orphan", "nil"')
    status, body, _ = crd_server.request("DELETE", f"{path}?propagationPolicy=Sideways")
    assert status == 422 and '"Sideways"' in body["message"]
    status, body, _ = crd_server.request("DELETE", f"{path}/keep", {"propagationPolicy": "Orphan",
                                                                     "orphanDependents": True})
    assert status == 422 and body["message"] == (
        'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Invalid value: "Orphan": '
        'orphanDependents and deletionPropagation cannot be both set')
    assert api.get("ConfigMap", "keep", ns)["metadata"]["name"] == "keep"
    # The query parameter form of a valid policy works like the body's: the orphan finalizer, which
    # the collector removes once there is nothing to orphan.
    status, body, _ = crd_server.request("DELETE", f"{path}/keep?propagationPolicy=Orphan")
    assert status == 202 and body["metadata"]["finalizers"] == ["orphan"]
    wait_until(lambda: names(api, "ConfigMap", ns) == [], message="the orphan finalizer removed")


def test_deleting_a_namespace_empties_it_even_with_job_pods(crd_server, api, ns):
    api.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}}, namespace=ns)
    api.create(new_job("inside", parallelism=2, completions=2), namespace=ns)
    wait_until(lambda: len(unfinished(job_pods(api, ns, "inside"))) == 2, message="the job's pods")
    crd_server.kubectl("delete", "namespace", ns, "--timeout=30s")
    wait_until(lambda: gone(api, "Namespace", ns), message="the namespace finalized")


def test_eviction_that_would_violate_a_pdb_is_refused_with_429(api, ns):
    api.create({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "keep-one"},
                "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}}, namespace=ns)
    pod = api.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "db", "labels": {"app": "db"}},
                      "spec": {"containers": [{"name": "main", "image": "postgres"}]}}, namespace=ns)
    run(api, pod)
    wait_until(lambda: (api.get("PodDisruptionBudget", "keep-one", ns).get("status") or {}).get("currentHealthy") == 1,
               message="the budget counts the pod")
    with pytest.raises(errors.TooManyRequests) as err:
        api.evict("db", ns)
    assert err.value.status == 429 and "disruption budget" in err.value.message
    assert api.get("Pod", "db", ns)["metadata"]["uid"] == pod["metadata"]["uid"]


def test_the_collector_watches_what_discovery_lists(running_controllers):
    kinds = garbagecollector.discover(running_controllers.client)
    resources = {k.resource for k in kinds}
    for expected in ("pods", "replicasets.apps", "deployments.apps", "jobs.batch", "daemonsets.apps",
                     "statefulsets.apps", "controllerrevisions.apps", "configmaps", "secrets", "services",
                     "endpoints", "reservations.scheduling.koordinator.sh", "podgroups.scheduling.sigs.k8s.io",
                     "namespaces"):
        assert expected in resources, expected
    assert "events" not in resources and "bindings" not in resources
