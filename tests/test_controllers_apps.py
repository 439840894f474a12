"""The apps/v1 workload controllers (ReplicaSet, Deployment, DaemonSet, StatefulSet) against the
embedded API server, with kubectl as a real client.

The controllers run on one Runtime in this process, against a server of this module's own (the
DaemonSet controller acts on every Node). There is no kubelet: :class:`FakeKubelet` binds the pods
of a test's namespace and reports them Running and Ready through the API, unless told to hold some
back. Each test works in its own namespace.
"""

from __future__ import annotations

import json
import re
import uuid
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

import pytest

from koordinator import controllers
from koordinator.runtime import errors
from koordinator.runtime.client import Client
from koordinator.runtime.informer import SharedInformer
from koordinator.runtime.options import RuntimeOptions
from koordinator.runtime.runtime import Runtime
from tests.apiserver_process import ApiServerProcess
from tests.waiting import wait_until

Obj = dict[str, Any]
NODE = "apps-node-0"
APPS = ["replicaset", "deployment", "daemonset", "statefulset"]


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _daemon_node(pod: Obj) -> str | None:
    """The node a DaemonSet pod's required node affinity names (``metadata.name`` In [node])."""
    terms = (((((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    for term in terms:
        for field in term.get("matchFields") or ():
            if field.get("key") == "metadata.name" and field.get("values"):
                return field["values"][0]
    return None


class FakeKubelet:
    """Binds a namespace's pods (to their DaemonSet node, else :data:`NODE`) and marks them Running
    and Ready, as the scheduler and a kubelet would; pods for which ``hold(pod)`` is true stay Pending
    until :meth:`release`."""

    def __init__(self, client: Client, namespace: str) -> None:
        self.client = client
        self.namespace = namespace
        self.hold: Callable[[Obj], bool] = lambda pod: False
        self.informer = SharedInformer(client, "Pod", namespace=namespace)
        self.informer.add_handler(on_add=self._handle, on_update=lambda old, new: self._handle(new))

    def start(self) -> "FakeKubelet":
        self.informer.start()
        self.informer.wait_for_sync(10)
        return self

    def stop(self) -> None:
        self.informer.stop(5)

    def release(self, name: str | None = None) -> None:
        """Let the held pod ``name`` through (every held pod without a name)."""
        if name is None:
            self.hold = lambda pod: False
        for pod in self.informer.store.list():
            if name is None or pod["metadata"]["name"] == name:
                self._handle(pod, force=name is not None)

    def _handle(self, pod: Obj, force: bool = False) -> None:
        meta = pod["metadata"]
        status = pod.get("status") or {}
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ())
        if meta.get("deletionTimestamp") or (status.get("phase") == "Running" and ready) or \
                (self.hold(pod) and not force):
            return
        try:
            if not (pod.get("spec") or {}).get("nodeName"):
                self.client.bind(meta["name"], self.namespace, _daemon_node(pod) or NODE, uid=meta.get("uid"))
            now = _now()
            containers = [{"name": c["name"], "ready": True, "restartCount": 0, "image": c.get("image", ""),
                           "imageID": "", "started": True, "state": {"running": {"startedAt": now}}}
                          for c in pod["spec"].get("containers") or ()]
            self.client.patch("Pod", meta["name"], {"status": {
                "phase": "Running", "startTime": now, "containerStatuses": containers,
                "conditions": [{"type": t, "status": "True", "lastTransitionTime": now}
                               for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]}},
                namespace=self.namespace, subresource="status")
        except (errors.NotFound, errors.Conflict):
            pass  # deleted or bound meanwhile: a later event brings it back


# -- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    s = ApiServerProcess(tmp_path_factory.mktemp("apps-apiserver")).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(server: ApiServerProcess) -> Iterator[Client]:
    c = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
    c.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE},
              "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def runtime(server: ApiServerProcess, client: Client) -> Iterator[Runtime]:
    options = RuntimeOptions.defaults("controllers", kubeconfig=str(server.kubeconfig), metrics_addr="0",
                                      health_addr="0", log_level="warning")
    rt_client = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
    rt = Runtime(options, client=rt_client)
    controllers.register(rt, APPS)
    rt.start()
    try:
        wait_until(lambda: not rt.informers.unsynced() and rt.informers.informers(), 20, "the informers to sync")
        yield rt
    finally:
        rt.stop(10)
        rt_client.close()


@pytest.fixture
def ns(server: ApiServerProcess, client: Client, runtime: Runtime) -> str:
    name = f"apps-{uuid.uuid4().hex[:8]}"
    client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    return name


@pytest.fixture
def kubelet(client: Client, ns: str) -> Iterator[FakeKubelet]:
    k = FakeKubelet(client, ns).start()
    try:
        yield k
    finally:
        k.stop()


# -- helpers -----------------------------------------------------------------------------------------

def pod_template(labels: dict[str, str], image: str = "nginx:1.25", **spec: Any) -> Obj:
    return {"metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": image}], **spec}}


def pods_of(client: Client, ns: str, selector: str) -> list[Obj]:
    return client.list("Pod", ns, label_selector=selector)["items"]


def events_of(client: Client, ns: str, name: str) -> list[Obj]:
    """Events about ``name``, oldest first (the recorder names them ``<object>.<hex nanoseconds>``)."""
    events = [e for e in client.list("Event", ns)["items"] if e["involvedObject"].get("name") == name]
    return sorted(events, key=lambda e: int(e["metadata"]["name"].rsplit(".", 1)[1], 16))


def event_messages(client: Client, ns: str, name: str, reason: str) -> list[str]:
    return [e["message"] for e in events_of(client, ns, name) if e["reason"] == reason]


def messages_once(client: Client, ns: str, name: str, reason: str, done: Callable[[list[str]], bool]) -> list[str]:
    """The ``reason`` event messages about ``name`` once ``done`` holds for them (events are written
    asynchronously, after the change they describe)."""
    return wait_until(lambda: done(m := event_messages(client, ns, name, reason)) and m or None,
                      message=f"{reason} events of {name}")


def owned_by(obj: Obj, owner: Obj) -> bool:
    return any(r.get("uid") == owner["metadata"]["uid"] and r.get("controller")
               for r in obj["metadata"].get("ownerReferences") or ())


def kubectl(server: ApiServerProcess, *args: str, check: bool = True, timeout: float = 90) -> str:
    proc = server.kubectl(*args, check=check, timeout=timeout)
    return proc.stdout + (proc.stderr if not check else "")


def replicasets_of(client: Client, ns: str, deploy: Obj) -> list[Obj]:
    return [rs for rs in client.list("ReplicaSet", ns)["items"] if owned_by(rs, deploy)]


# -- the pure parts ---------------------------------------------------------------------------------

def test_fenceposts_hashes_and_deletion_ranking():
    from koordinator.controllers import deploymentutil as dep
    from koordinator.controllers.history import SAFE_ALPHABET, template_hash
    from koordinator.controllers.replicaset import pods_to_delete

    # Surge rounds up, unavailable down; both 0 would stall a rollout, so unavailable becomes 1.
    assert dep.resolve_fenceposts("25%", "25%", 10) == (3, 2)
    assert dep.resolve_fenceposts("0%", "0%", 10) == (0, 1)
    assert dep.resolve_fenceposts(0, "10%", 5) == (0, 1)
    template = pod_template({"app": "x"})
    h = template_hash(template, None)
    assert h == template_hash(json.loads(json.dumps(template)), None) and set(h) <= set(SAFE_ALPHABET)
    assert h != template_hash(template, 1) != template_hash(pod_template({"app": "x"}, "other"), None)

    def pod(name: str, node: str = "", phase: str = "Running", ready: bool = True,
            created: str = "2026-01-01T00:00:00Z", cost: str | None = None) -> Obj:
        return {"metadata": {"name": name, "creationTimestamp": created,
                             "annotations": {"controller.kubernetes.io/pod-deletion-cost": cost} if cost else {}},
                "spec": {"nodeName": node},
                "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                                                           "lastTransitionTime": created}]}}

    pods = [pod("ready-old", "n4"), pod("unassigned", phase="Pending", ready=False),
            pod("pending", "n1", phase="Pending", ready=False), pod("notready", "n1", ready=False),
            pod("costly", "n2", ready=False, cost="10"), pod("ready-new", "n5", created=_now()), pod("crowded", "n1")]
    order = [p["metadata"]["name"] for p in pods_to_delete(pods, pods, 6, datetime.now(timezone.utc).timestamp())]
    # Unassigned, Pending, not ready, cheaper, doubled up on a node, ready for less time.
    assert order == ["unassigned", "pending", "notready", "costly", "crowded", "ready-new"]


# -- ReplicaSet -------------------------------------------------------------------------------------

def replicaset(ns: str, name: str, replicas: int, labels: dict[str, str], **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": pod_template(labels), **spec}}


def test_replicaset_creates_pods_and_reports_status_and_events(client, ns, kubelet):
    rs = client.create(replicaset(ns, "rs", 3, {"app": "rs"}))
    wait_until(lambda: (client.get("ReplicaSet", "rs", ns).get("status") or {}).get("availableReplicas") == 3,
               message="3 available replicas")
    pods = pods_of(client, ns, "app=rs")
    assert len(pods) == 3
    assert all(owned_by(p, rs) and p["metadata"]["name"].startswith("rs-") for p in pods)
    status = client.get("ReplicaSet", "rs", ns)["status"]
    assert status == {**status, "replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3,
                      "availableReplicas": 3, "observedGeneration": 1}
    created = wait_until(lambda: len(event_messages(client, ns, "rs", "SuccessfulCreate")) == 3
                         and event_messages(client, ns, "rs", "SuccessfulCreate"), message="3 events")
    assert sorted(created) == sorted(f"Created pod: {p['metadata']['name']}" for p in pods)
    # A deleted pod is replaced.
    client.delete("Pod", pods[0]["metadata"]["name"], ns)
    wait_until(lambda: len(pods_of(client, ns, "app=rs")) == 3
               and pods[0]["metadata"]["name"] not in {p["metadata"]["name"] for p in pods_of(client, ns, "app=rs")},
               message="a replacement pod")


def test_replicaset_adopts_orphans_and_releases_pods_that_stop_matching(client, ns, kubelet, runtime):
    orphan = client.create({"apiVersion": "v1", "kind": "Pod",
                            "metadata": {"name": "orphan", "namespace": ns, "labels": {"app": "adopt"}},
                            "spec": pod_template({})["spec"]})
    # Informers of different kinds are not ordered: let the controllers' cache see the pod first.
    wait_until(lambda: runtime.informers.informer("Pod").store.get(f"{ns}/orphan"), message="the pod cached")
    rs = client.create(replicaset(ns, "adopter", 2, {"app": "adopt"}))
    wait_until(lambda: owned_by(client.get("Pod", "orphan", ns), rs), message="the orphan adopted")
    wait_until(lambda: len(pods_of(client, ns, "app=adopt")) == 2, message="2 pods, the orphan among them")
    wait_until(lambda: len(event_messages(client, ns, "adopter", "SuccessfulCreate")) == 1, message="one creation")
    # Relabelled, the pod is released, and replaced.
    client.patch("Pod", "orphan", {"metadata": {"labels": {"app": "gone"}}}, namespace=ns)
    wait_until(lambda: not (client.get("Pod", "orphan", ns)["metadata"].get("ownerReferences")),
               message="the pod released")
    wait_until(lambda: len(pods_of(client, ns, "app=adopt")) == 2
               and all(owned_by(p, rs) for p in pods_of(client, ns, "app=adopt")), message="a replacement")
    assert orphan["metadata"]["uid"] == client.get("Pod", "orphan", ns)["metadata"]["uid"]


def test_replicaset_scale_down_deletes_the_least_useful_pods_first(client, ns, kubelet):
    # Pods not yet scheduled or not ready go before ready ones; among those, the lower deletion cost first.
    rs = client.create(replicaset(ns, "rank", 3, {"app": "rank"}))
    wait_until(lambda: (client.get("ReplicaSet", "rank", ns).get("status") or {}).get("readyReplicas") == 3,
               message="3 ready pods")
    ready = {p["metadata"]["name"] for p in pods_of(client, ns, "app=rank")}
    # Two more replicas the kubelet holds back (unassigned, Pending); the replica count only changes
    # by the test's own patches, so the controller never has surplus pods before the test asks.
    kubelet.hold = lambda pod: pod["metadata"]["name"] not in ready
    client.patch("ReplicaSet", "rank", {"spec": {"replicas": 5}}, namespace=ns)
    pending = wait_until(lambda: len(names := {p["metadata"]["name"] for p in pods_of(client, ns, "app=rank")}) == 5
                         and sorted(names - ready), message="2 pending pods")
    cheap, costly = pending
    client.patch("Pod", costly, {"metadata": {"annotations": {
        "controller.kubernetes.io/pod-deletion-cost": "100"}}}, namespace=ns)
    # Scaled to 4: one pod must go, and it is the pending pod with the lower deletion cost.
    client.patch("ReplicaSet", "rank", {"spec": {"replicas": 4}}, namespace=ns)
    wait_until(lambda: {p["metadata"]["name"] for p in pods_of(client, ns, "app=rank")} == ready | {costly},
               message=f"{cheap} deleted first")
    # To 3: the other pending pod, never a ready one while a pending one is left.
    client.patch("ReplicaSet", "rank", {"spec": {"replicas": 3}}, namespace=ns)
    wait_until(lambda: {p["metadata"]["name"] for p in pods_of(client, ns, "app=rank")} == ready,
               message=f"{costly} deleted next")
    messages_once(client, ns, "rank", "SuccessfulDelete",
                  lambda m: f"Deleted pod: {cheap}" in m and f"Deleted pod: {costly}" in m)
    assert all(owned_by(p, rs) for p in pods_of(client, ns, "app=rank"))


def test_replicaset_failed_create_is_reported_and_other_sets_keep_working(client, ns, kubelet):
    # The server accepts the ReplicaSet; the pods it asks for are refused (no such PriorityClass).
    bad = replicaset(ns, "bad", 2, {"app": "bad"})
    bad["spec"]["template"]["spec"]["priorityClassName"] = "no-such-class"
    client.create(bad)
    client.create(replicaset(ns, "good", 1, {"app": "good"}))
    msgs = wait_until(lambda: event_messages(client, ns, "bad", "FailedCreate"), message="a FailedCreate event")
    # kube names the pod by its generateName ("bad-") here; this server by the generated name.
    assert re.fullmatch(r'Error creating: pods "bad-\w*" is forbidden: no PriorityClass with name no-such-class '
                        r'was found', msgs[0]), msgs[0]
    cond = wait_until(lambda: [c for c in (client.get("ReplicaSet", "bad", ns).get("status") or {}).get(
        "conditions") or () if c["type"] == "ReplicaFailure"], message="the ReplicaFailure condition")[0]
    assert cond["status"] == "True" and cond["reason"] == "FailedCreate"
    assert "no PriorityClass with name no-such-class was found" in cond["message"]
    wait_until(lambda: (client.get("ReplicaSet", "good", ns).get("status") or {}).get("readyReplicas") == 1,
               message="the good ReplicaSet served")
    assert pods_of(client, ns, "app=bad") == []
    # A Deployment with such a template shows its ReplicaSet's failure as its own condition.
    broken = deployment(ns, "broken", 1)
    broken["spec"]["template"]["spec"]["priorityClassName"] = "no-such-class"
    client.create(broken)
    cond = wait_until(lambda: [c for c in (client.get("Deployment", "broken", ns).get("status") or {}).get(
        "conditions") or () if c["type"] == "ReplicaFailure"], message="the Deployment's ReplicaFailure")[0]
    assert cond["reason"] == "FailedCreate" and "no PriorityClass with name no-such-class" in cond["message"]


# -- Deployment -------------------------------------------------------------------------------------

def deployment(ns: str, name: str, replicas: int, *, image: str = "nginx:1.25", **spec: Any) -> Obj:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": pod_template(labels, image), **spec}}


def test_deployment_rolls_out_updates_and_undoes_with_kubectl(server, client, ns, kubelet):
    kubectl(server, "-n", ns, "create", "deployment", "web", "--image=nginx:1.25", "--replicas=3")
    out = kubectl(server, "-n", ns, "rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in out
    d = client.get("Deployment", "web", ns)
    first = replicasets_of(client, ns, d)
    assert len(first) == 1
    rs1 = first[0]
    hash1 = rs1["metadata"]["labels"]["pod-template-hash"]
    assert rs1["metadata"]["name"] == f"web-{hash1}"
    assert rs1["spec"]["selector"]["matchLabels"] == {"app": "web", "pod-template-hash": hash1}
    assert rs1["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    assert rs1["metadata"]["annotations"]["deployment.kubernetes.io/desired-replicas"] == "3"
    assert rs1["metadata"]["annotations"]["deployment.kubernetes.io/max-replicas"] == "4"  # 3 + ceil(25%)
    assert all(p["metadata"]["labels"]["pod-template-hash"] == hash1 for p in pods_of(client, ns, "app=web"))
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    status = d["status"]
    assert (status["replicas"], status["updatedReplicas"], status["readyReplicas"], status["availableReplicas"],
            status.get("unavailableReplicas", 0)) == (3, 3, 3, 3, 0)
    conds = {c["type"]: c for c in status["conditions"]}
    assert (conds["Available"]["status"], conds["Available"]["reason"]) == ("True", "MinimumReplicasAvailable")
    assert conds["Available"]["message"] == "Deployment has minimum availability."
    assert (conds["Progressing"]["reason"], conds["Progressing"]["message"]) == (
        "NewReplicaSetAvailable", f'ReplicaSet "{rs1["metadata"]["name"]}" has successfully progressed.')
    assert messages_once(client, ns, "web", "ScalingReplicaSet", bool) == [
        f"Scaled up replica set {rs1['metadata']['name']} from 0 to 3"]

    # A new image: a second ReplicaSet, rolled out; the first scaled to 0 and kept.
    kubectl(server, "-n", ns, "annotate", "deployment/web", "kubernetes.io/change-cause=image 1.26")
    kubectl(server, "-n", ns, "set", "image", "deployment/web", "nginx=nginx:1.26")
    out = kubectl(server, "-n", ns, "rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in out
    rss = {rs["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: rs
           for rs in replicasets_of(client, ns, d)}
    assert set(rss) == {"1", "2"}
    wait_until(lambda: client.get("ReplicaSet", rs1["metadata"]["name"], ns)["status"].get("replicas", 0) == 0,
               message="the old ReplicaSet at 0")
    assert rss["1"]["spec"]["replicas"] == 0 and rss["2"]["spec"]["replicas"] == 3
    assert rss["2"]["metadata"]["annotations"]["kubernetes.io/change-cause"] == "image 1.26"
    images = {p["spec"]["containers"][0]["image"] for p in pods_of(client, ns, "app=web")}
    assert images == {"nginx:1.26"}
    history = kubectl(server, "-n", ns, "rollout", "history", "deployment/web")
    assert "image 1.26" in history and [ln.split()[0] for ln in history.splitlines()[2:] if ln.strip()] == ["1", "2"]

    # Undo: back to the first template, now revision 3 (the ReplicaSet remembers it was 1).
    kubectl(server, "-n", ns, "rollout", "undo", "deployment/web")
    out = kubectl(server, "-n", ns, "rollout", "status", "deployment/web", "--timeout=60s")
    assert 'deployment "web" successfully rolled out' in out
    back = client.get("ReplicaSet", rs1["metadata"]["name"], ns)
    assert back["spec"]["replicas"] == 3
    assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"
    assert back["metadata"]["annotations"]["deployment.kubernetes.io/revision-history"] == "1"
    assert {p["spec"]["containers"][0]["image"] for p in pods_of(client, ns, "app=web")} == {"nginx:1.25"}
    assert len(replicasets_of(client, ns, d)) == 2

    # Restart: a new template annotation, a new ReplicaSet.
    kubectl(server, "-n", ns, "rollout", "restart", "deployment/web")
    kubectl(server, "-n", ns, "rollout", "status", "deployment/web", "--timeout=60s")
    assert len(replicasets_of(client, ns, d)) == 3
    describe = kubectl(server, "-n", ns, "describe", "deployment", "web")
    assert "deployment-controller" in describe and "ScalingReplicaSet" in describe


def test_deployment_rolling_update_respects_max_surge_and_max_unavailable(client, ns, kubelet):
    d = client.create(deployment(ns, "roll", 4, strategy={
        "type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": "25%"}}))
    wait_until(lambda: (client.get("Deployment", "roll", ns).get("status") or {}).get("availableReplicas") == 4,
               message="4 available")
    # Every ReplicaSet change, in the order the server made them: the sizes asked for, summed.
    sizes: dict[str, int] = {}
    totals: list[int] = []
    available: list[int] = []

    trace: list[tuple] = []

    def on_change(rs: Obj) -> None:
        sizes[rs["metadata"]["name"]] = rs["spec"]["replicas"]
        totals.append(sum(sizes.values()))
        trace.append((rs["metadata"]["name"], rs["spec"]["replicas"], rs["metadata"]["resourceVersion"],
                      (rs.get("status") or {}).get("availableReplicas")))

    watch = SharedInformer(client, "ReplicaSet", namespace=ns)
    handler = watch.add_handler(on_add=on_change, on_update=lambda old, new: on_change(new))
    pods = SharedInformer(client, "Pod", namespace=ns)

    def count_ready(*_: Any) -> None:
        available.append(sum(1 for p in pods.store.list() if not p["metadata"].get("deletionTimestamp") and any(
            c["type"] == "Ready" and c["status"] == "True" for c in (p.get("status") or {}).get("conditions") or ())))

    pods_handler = pods.add_handler(on_add=count_ready, on_update=count_ready, on_delete=count_ready)
    watch.start()
    pods.start()
    try:
        wait_until(lambda: handler.has_synced() and pods_handler.has_synced(), message="the watches synced")
        totals.clear()
        available.clear()
        client.patch("Deployment", "roll", {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.26"}]}}}}, namespace=ns, patch_type="strategic")
        wait_until(lambda: _rolled_out(client, ns, "roll", 4), 60, "the rollout")
    finally:
        watch.stop()
        pods.stop()
    assert totals and max(totals) == 5 and totals[-1] == 4, trace  # 4 + maxSurge 1, used
    assert available and min(available) >= 3, available  # 4 - maxUnavailable 25% (rounded down: 1)
    scalings = messages_once(client, ns, "roll", "ScalingReplicaSet", lambda m: len(m) >= 2)
    new_rs = [rs for rs in replicasets_of(client, ns, d) if rs["spec"]["replicas"] == 4][0]["metadata"]["name"]
    assert scalings[1] == f"Scaled up replica set {new_rs} from 0 to 1"  # 4 + 1 surge - 4 existing


def _rolled_out(client: Client, ns: str, name: str, replicas: int) -> bool:
    d = client.get("Deployment", name, ns)
    s = d.get("status") or {}
    return (s.get("observedGeneration") == d["metadata"]["generation"] and s.get("updatedReplicas") == replicas
            and s.get("replicas") == replicas and s.get("availableReplicas") == replicas)


def test_deployment_scales_with_kubectl_scale_and_recreate(server, client, ns, kubelet):
    client.create(deployment(ns, "sc", 2, strategy={"type": "Recreate"}))
    wait_until(lambda: _rolled_out(client, ns, "sc", 2), message="2 replicas")
    kubectl(server, "-n", ns, "scale", "deployment/sc", "--replicas=5")
    wait_until(lambda: _rolled_out(client, ns, "sc", 5), message="scaled to 5")
    assert len(pods_of(client, ns, "app=sc")) == 5
    kubectl(server, "-n", ns, "scale", "deployment/sc", "--replicas=1")
    wait_until(lambda: _rolled_out(client, ns, "sc", 1) and len(pods_of(client, ns, "app=sc")) == 1,
               message="scaled to 1")
    messages_once(client, ns, "sc", "ScalingReplicaSet", lambda m: m[-1].startswith("Scaled down replica set sc-")
                  and m[-1].endswith("from 5 to 1"))
    # Recreate: the old pod is gone before the new one is created (a rolling update of one
    # replica would surge: both at once).
    (old_pod,) = pods_of(client, ns, "app=sc")
    seen: list[tuple[str, str]] = []
    watch = SharedInformer(client, "Pod", namespace=ns)
    handler = watch.add_handler(on_add=lambda p: seen.append(("add", p["metadata"]["name"])),
                      on_delete=lambda p: seen.append(("delete", p["metadata"]["name"])))
    watch.start()
    try:
        wait_until(handler.has_synced, message="the watch's initial adds delivered")
        seen.clear()
        client.patch("Deployment", "sc", {"spec": {"template": {"spec": {"containers": [
            {"name": "app", "image": "nginx:1.26"}]}}}}, namespace=ns, patch_type="strategic")
        wait_until(lambda: _rolled_out(client, ns, "sc", 1), message="recreated")
        wait_until(lambda: len(seen) >= 2, message="the old pod deleted and a new one added")
    finally:
        watch.stop()
    assert seen[0] == ("delete", old_pod["metadata"]["name"]) and seen[1][0] == "add", seen


def test_deployment_paused_and_progress_deadline(server, client, ns, kubelet):
    kubelet.hold = lambda pod: True  # nothing ever becomes ready
    client.create(deployment(ns, "slow", 1, progressDeadlineSeconds=2))

    def progressing() -> Obj | None:
        conds = (client.get("Deployment", "slow", ns).get("status") or {}).get("conditions") or []
        return next((c for c in conds if c["type"] == "Progressing"), None)

    cond = wait_until(lambda: (c := progressing()) and c["reason"] == "ProgressDeadlineExceeded" and c, 20,
                      "the progress deadline")
    assert cond["status"] == "False" and cond["message"].endswith("has timed out progressing.")
    out = kubectl(server, "-n", ns, "rollout", "status", "deployment/slow", "--timeout=20s", check=False)
    assert 'deployment "slow" exceeded its progress deadline' in out
    kubectl(server, "-n", ns, "rollout", "pause", "deployment/slow")
    kubectl(server, "-n", ns, "set", "image", "deployment/slow", "app=nginx:1.26")
    kubectl(server, "-n", ns, "scale", "deployment/slow", "--replicas=2")
    d = client.get("Deployment", "slow", ns)
    wait_until(lambda: sum(rs["spec"]["replicas"] for rs in replicasets_of(client, ns, d)) == 2,
               message="a paused deployment still scales")
    assert len(replicasets_of(client, ns, d)) == 1  # but rolls nothing out


# -- DaemonSet --------------------------------------------------------------------------------------

def _make_node(client: Client, name: str, labels: dict[str, str], taints: list[Obj] | None = None) -> None:
    client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
                   "spec": {"taints": taints or []}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}})


def _ds_status(client: Client, ns: str, name: str) -> Obj:
    return client.get("DaemonSet", name, ns).get("status") or {}


def test_daemonset_runs_one_pod_per_eligible_node_and_rolls_out(server, client, ns, kubelet):
    pool = {"pool": ns}
    for n in ("a", "b"):
        _make_node(client, f"{ns}-{n}", pool)
    _make_node(client, f"{ns}-tainted", pool, [{"key": "dedicated", "value": "db", "effect": "NoSchedule"}])
    _make_node(client, f"{ns}-elsewhere", {"pool": "other"})
    labels = {"app": "agent"}
    client.create({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": ns},
                   "spec": {"selector": {"matchLabels": labels},
                            "template": pod_template(labels, nodeSelector=pool)}})
    out = kubectl(server, "-n", ns, "rollout", "status", "ds/agent", "--timeout=60s")
    assert 'daemon set "agent" successfully rolled out' in out
    pods = pods_of(client, ns, "app=agent")
    assert sorted(p["spec"]["nodeName"] for p in pods) == [f"{ns}-a", f"{ns}-b"]
    pod = pods[0]
    assert pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In",
                                                "values": [pod["spec"]["nodeName"]]}]}]}
    tolerated = {(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]}
    assert {("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unreachable", "NoExecute"),
            ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ("node.kubernetes.io/memory-pressure", "NoSchedule")} <= tolerated
    status = _ds_status(client, ns, "agent")
    assert {k: status.get(k, 0) for k in ("desiredNumberScheduled", "currentNumberScheduled", "numberReady",
                                           "numberAvailable", "updatedNumberScheduled", "numberMisscheduled",
                                           "numberUnavailable", "observedGeneration")} == {
        "desiredNumberScheduled": 2, "currentNumberScheduled": 2, "numberReady": 2, "numberAvailable": 2,
        "updatedNumberScheduled": 2, "numberMisscheduled": 0, "numberUnavailable": 0, "observedGeneration": 1}
    revisions = client.list("ControllerRevision", ns)["items"]
    assert len(revisions) == 1 and revisions[0]["revision"] == 1
    hash1 = revisions[0]["metadata"]["labels"]["controller-revision-hash"]
    assert revisions[0]["metadata"]["name"] == f"agent-{hash1}"
    assert {p["metadata"]["labels"]["controller-revision-hash"] for p in pods} == {hash1}

    # Tolerating the taint: the tainted node becomes eligible, and every pod is replaced.
    client.patch("DaemonSet", "agent", {"spec": {"template": {"spec": {"tolerations": [
        {"key": "dedicated", "operator": "Equal", "value": "db", "effect": "NoSchedule"}]}}}}, namespace=ns)
    kubectl(server, "-n", ns, "rollout", "status", "ds/agent", "--timeout=60s")
    pods = pods_of(client, ns, "app=agent")
    assert sorted(p["spec"]["nodeName"] for p in pods) == [f"{ns}-a", f"{ns}-b", f"{ns}-tainted"]
    revisions = sorted(client.list("ControllerRevision", ns)["items"], key=lambda r: r["revision"])
    assert [r["revision"] for r in revisions] == [1, 2]
    hash2 = revisions[1]["metadata"]["labels"]["controller-revision-hash"]
    assert {p["metadata"]["labels"]["controller-revision-hash"] for p in pods} == {hash2}
    assert _ds_status(client, ns, "agent")["desiredNumberScheduled"] == 3
    # A node that stops matching loses its pod.
    client.patch("Node", f"{ns}-b", {"metadata": {"labels": {"pool": "other"}}})
    wait_until(lambda: sorted(p["spec"]["nodeName"] for p in pods_of(client, ns, "app=agent"))
               == [f"{ns}-a", f"{ns}-tainted"], message="the pod on the relabelled node deleted")
    wait_until(lambda: _ds_status(client, ns, "agent").get("desiredNumberScheduled") == 2, message="desired 2")


def test_daemonset_surge_starts_the_new_pod_before_deleting_the_old(server, client, ns, kubelet):
    pool = {"pool": ns}
    nodes = [f"{ns}-{n}" for n in ("a", "b")]
    for node in nodes:
        _make_node(client, node, pool)
    labels = {"app": "surge"}
    client.create({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "surge", "namespace": ns},
                   "spec": {"selector": {"matchLabels": labels},
                            "updateStrategy": {"type": "RollingUpdate",
                                               "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
                            "template": pod_template(labels, nodeSelector=pool)}})
    kubectl(server, "-n", ns, "rollout", "status", "ds/surge", "--timeout=60s")
    old = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods_of(client, ns, "app=surge")}
    seen: list[tuple[str, str, str]] = []  # (event, pod, node) in the order the watch delivered them
    watch = SharedInformer(client, "Pod", namespace=ns)
    handler = watch.add_handler(on_add=lambda p: seen.append(("add", p["metadata"]["name"], _daemon_node(p) or "")),
                      on_delete=lambda p: seen.append(("delete", p["metadata"]["name"], "")))
    watch.start()
    try:
        wait_until(handler.has_synced, message="the watch's initial adds delivered")
        seen.clear()
        kubectl(server, "-n", ns, "set", "image", "ds/surge", "app=nginx:1.26")
        kubectl(server, "-n", ns, "rollout", "status", "ds/surge", "--timeout=60s")
        wait_until(lambda: sum(1 for e in seen if e[0] == "delete") == 2, message="both old pods deleted")
    finally:
        watch.stop()
    for name, node in old.items():
        added = next(i for i, e in enumerate(seen) if e[0] == "add" and e[2] == node)
        deleted = next(i for i, e in enumerate(seen) if e[0] == "delete" and e[1] == name)
        assert added < deleted, seen
    assert {p["spec"]["containers"][0]["image"] for p in pods_of(client, ns, "app=surge")} == {"nginx:1.26"}


# -- StatefulSet ------------------------------------------------------------------------------------

def statefulset(ns: str, name: str, replicas: int, **spec: Any) -> Obj:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "namespace": ns},
            "spec": {"replicas": replicas, "serviceName": name, "selector": {"matchLabels": labels},
                     "template": pod_template(labels), **spec}}


def test_statefulset_creates_in_order_after_ready_and_scales_down_in_reverse(server, client, ns, kubelet):
    kubelet.hold = lambda pod: True
    client.create(statefulset(ns, "db", 3, volumeClaimTemplates=[
        {"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                                "resources": {"requests": {"storage": "1Gi"}}}}]))

    def names() -> list[str]:
        return sorted(p["metadata"]["name"] for p in pods_of(client, ns, "app=db"))

    for i in range(3):
        wait_until(lambda: names() == [f"db-{j}" for j in range(i + 1)], message=f"db-{i} created")
        pod = client.get("Pod", f"db-{i}", ns)
        labels = pod["metadata"]["labels"]
        assert labels["statefulset.kubernetes.io/pod-name"] == f"db-{i}"
        assert labels["apps.kubernetes.io/pod-index"] == str(i)
        assert (pod["spec"]["hostname"], pod["spec"]["subdomain"]) == (f"db-{i}", "db")
        assert {"name": "data", "persistentVolumeClaim": {"claimName": f"data-db-{i}"}} in pod["spec"]["volumes"]
        # A harmless spec change: once its generation is observed, the controller has synced while
        # db-i was not ready, and must not have created the next ordinal.
        generation = client.patch("StatefulSet", "db", {"spec": {"revisionHistoryLimit": 20 + i}},
                                  namespace=ns)["metadata"]["generation"]
        wait_until(lambda: client.get("StatefulSet", "db", ns)["status"].get("observedGeneration") == generation,
                   message="the set synced")
        assert names() == [f"db-{j}" for j in range(i + 1)]
        kubelet.release(f"db-{i}")
    out = kubectl(server, "-n", ns, "rollout", "status", "sts/db", "--timeout=60s")
    assert "partitioned roll out complete: 3 new pods have been updated" in out
    sts = client.get("StatefulSet", "db", ns)
    status = sts["status"]
    revision = status["updateRevision"]
    assert revision.startswith("db-") and status["currentRevision"] == revision
    assert {k: status[k] for k in ("replicas", "readyReplicas", "currentReplicas", "updatedReplicas",
                                   "availableReplicas", "observedGeneration")} == {
        "replicas": 3, "readyReplicas": 3, "currentReplicas": 3, "updatedReplicas": 3, "availableReplicas": 3,
        "observedGeneration": sts["metadata"]["generation"]}
    assert {p["metadata"]["labels"]["controller-revision-hash"] for p in pods_of(client, ns, "app=db")} == {revision}
    assert [r["metadata"]["name"] for r in client.list("ControllerRevision", ns)["items"]] == [revision]
    created = messages_once(client, ns, "db", "SuccessfulCreate",
                            lambda m: "create Pod db-2 in StatefulSet db successful" in m)
    assert "create Pod db-0 in StatefulSet db successful" in created
    served = any(r["name"] == "persistentvolumeclaims" for r in client.request("GET", "/api/v1")["resources"])
    if served:
        claim = client.get("PersistentVolumeClaim", "data-db-1", ns)
        assert claim["metadata"]["labels"] == {"app": "db"}
        assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
        assert "create Claim data-db-1 Pod db-1 in StatefulSet db success" in created
    else:  # the claim is reported, and the pod made without it
        assert "create Claim data-db-1 for Pod db-1 in StatefulSet db failed error: the server does not serve " \
               "persistentvolumeclaims" in messages_once(client, ns, "db", "FailedCreate", bool)

    # Scale down: db-2 goes first; db-1 only once db-2 is gone.
    order: list[str] = []
    gone = SharedInformer(client, "Pod", namespace=ns)
    gone.add_handler(on_delete=lambda pod: order.append(pod["metadata"]["name"]))
    gone.start()
    try:
        gone.wait_for_sync(10)
        kubectl(server, "-n", ns, "scale", "sts/db", "--replicas=1")
        wait_until(lambda: names() == ["db-0"], message="scaled down to db-0")
        wait_until(lambda: len(order) == 2, message="two deletions seen")
    finally:
        gone.stop()
    assert order == ["db-2", "db-1"]
    deleted = wait_until(lambda: len(m := event_messages(client, ns, "db", "SuccessfulDelete")) == 2 and m,
                         message="two deletion events")
    assert deleted == ["delete Pod db-2 in StatefulSet db successful", "delete Pod db-1 in StatefulSet db successful"]


def test_statefulset_rolling_update_in_reverse_order_with_partition(server, client, ns, kubelet):
    client.create(statefulset(ns, "web", 3, podManagementPolicy="Parallel"))
    kubectl(server, "-n", ns, "rollout", "status", "sts/web", "--timeout=60s")
    first = client.get("StatefulSet", "web", ns)["status"]["currentRevision"]
    client.patch("StatefulSet", "web", {"spec": {"updateStrategy": {"type": "RollingUpdate",
                                                                    "rollingUpdate": {"partition": 1}},
                                                 "template": {"spec": {"containers": [
                                                     {"name": "app", "image": "nginx:1.26"}]}}}},
                 namespace=ns, patch_type="strategic")
    kubectl(server, "-n", ns, "rollout", "status", "sts/web", "--timeout=60s")

    def revisions() -> dict[str, str]:
        return {p["metadata"]["name"]: p["metadata"]["labels"]["controller-revision-hash"]
                for p in pods_of(client, ns, "app=web")}

    status = wait_until(lambda: (s := client.get("StatefulSet", "web", ns)["status"]).get("updatedReplicas") == 2
                        and s.get("readyReplicas") == 3 and s, message="two pods updated")
    update = status["updateRevision"]
    assert update != first and status["currentRevision"] == first
    assert revisions() == {"web-0": first, "web-1": update, "web-2": update}
    # web-2 was replaced before web-1.
    deleted = wait_until(lambda: len(m := event_messages(client, ns, "web", "SuccessfulDelete")) == 2 and m,
                         message="two deletion events")
    assert deleted == ["delete Pod web-2 in StatefulSet web successful",
                       "delete Pod web-1 in StatefulSet web successful"]
    # The partition lifted, the last pod follows and the update revision becomes current.
    client.patch("StatefulSet", "web", {"spec": {"updateStrategy": {"rollingUpdate": {"partition": 0}}}},
                 namespace=ns)
    wait_until(lambda: (s := client.get("StatefulSet", "web", ns)["status"]).get("currentRevision") == update
               and s.get("updatedReplicas") == 3, message="the rollout completed")
    assert set(revisions().values()) == {update}
