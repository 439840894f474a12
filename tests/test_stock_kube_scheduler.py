"""The stock kube-scheduler against ``koordinator apiserver``.

With the binary on PATH, kube-scheduler binds a pod. Without it, the informers it starts are
replayed with the official Python client: the same LIST and WATCH requests, with the Accept
header client-go sends, so a kind the server does not serve fails here on any machine.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid

import pytest
from kubernetes import client, config

from koordinator.local import free_port
from tests.waiting import wait_until

# client-go in kube-scheduler asks for protobuf and accepts JSON (componentconfig
# ClientConnection contentType application/vnd.kubernetes.protobuf); both forms client-go writes.
ACCEPT_HEADERS = ["application/vnd.kubernetes.protobuf,application/json", "application/vnd.kubernetes.protobuf, */*"]

# Every informer kube-scheduler 1.36 starts with the default profile and default feature gates
# (kubernetes/kubernetes pkg/scheduler):
SCHEDULER_INFORMERS = [
    # scheduler.go: the pod informer skips terminal pods; eventhandlers.go addAllEventHandlers.
    ("/api/v1/pods", "status.phase!=Succeeded,status.phase!=Failed"),
    ("/api/v1/nodes", ""),
    # plugins/interpodaffinity: namespace lister for namespaceSelector.
    ("/api/v1/namespaces", ""),
    # plugins/podtopologyspread setListers: default constraints from these owners' selectors.
    ("/api/v1/services", ""),
    ("/api/v1/replicationcontrollers", ""),
    ("/apis/apps/v1/replicasets", ""),
    ("/apis/apps/v1/statefulsets", ""),
    # plugins/defaultpreemption: PDB lister.
    ("/apis/policy/v1/poddisruptionbudgets", ""),
    # plugins/volumebinding New, volumezone, volumerestrictions, nodevolumelimits (fwk.PersistentVolume,
    # fwk.PersistentVolumeClaim, fwk.StorageClass, fwk.CSINode, fwk.CSIDriver, fwk.CSIStorageCapacity,
    # fwk.VolumeAttachment in eventhandlers.go).
    ("/api/v1/persistentvolumes", ""),
    ("/api/v1/persistentvolumeclaims", ""),
    ("/apis/storage.k8s.io/v1/storageclasses", ""),
    ("/apis/storage.k8s.io/v1/csinodes", ""),
    ("/apis/storage.k8s.io/v1/csidrivers", ""),
    ("/apis/storage.k8s.io/v1/csistoragecapacities", ""),
    ("/apis/storage.k8s.io/v1/volumeattachments", ""),
    # scheduler.go with DynamicResourceAllocation (GA, locked on): ResourceClaims (assume cache),
    # ResourceSlices (resourceslicetracker), DeviceClasses (NewDRAManager, DRAExtendedResource).
    # DeviceTaintRules are informed only with DRADeviceTaintRules, off by default in 1.36.
    ("/apis/resource.k8s.io/v1/resourceclaims", ""),
    ("/apis/resource.k8s.io/v1/resourceslices", ""),
    ("/apis/resource.k8s.io/v1/deviceclasses", ""),
]


@pytest.fixture
def api(apiserver):
    api = config.new_client_from_config(config_file=str(apiserver.kubeconfig))
    try:
        yield api
    finally:
        api.close()


def _get(api: client.ApiClient, path: str, query: list[tuple[str, str]], accept: str):
    method, url, headers, _, _ = api.param_serialize("GET", path, query_params=query,
                                                     header_params={"Accept": accept}, auth_settings=["BearerToken"])
    return api.call_api(method, url, header_params=headers, _request_timeout=30)


@pytest.mark.parametrize("accept", ACCEPT_HEADERS)
@pytest.mark.parametrize("path,field_selector", SCHEDULER_INFORMERS, ids=[p for p, _ in SCHEDULER_INFORMERS])
def test_scheduler_informers_list_and_watch(api, path, field_selector, accept):
    selector = [("fieldSelector", field_selector)] if field_selector else []
    # The reflector's first LIST: from the watch cache, in pages of 500.
    resp = _get(api, path, [*selector, ("limit", "500"), ("resourceVersion", "0")], accept)
    assert resp.status == 200, resp.read()
    assert resp.getheader("Content-Type").startswith("application/json")
    listed = json.loads(resp.read())
    assert listed["kind"].endswith("List") and listed["metadata"]["resourceVersion"]
    # Then WATCH from the list's resourceVersion: the stream opens at once.
    resp = _get(api, path, [*selector, ("allowWatchBookmarks", "true"),
                            ("resourceVersion", listed["metadata"]["resourceVersion"]), ("timeoutSeconds", "300"),
                            ("watch", "true")], accept)
    try:
        assert resp.status == 200
        assert resp.getheader("Content-Type").startswith("application/json")
    finally:
        resp.response.close()
    # client-go's watch-list (streaming list): initial events, then the bookmark that ends them.
    resp = _get(api, path, [*selector, ("allowWatchBookmarks", "true"), ("resourceVersionMatch", "NotOlderThan"),
                            ("sendInitialEvents", "true"), ("timeoutSeconds", "300"), ("watch", "true")], accept)
    try:
        assert resp.status == 200
        pending = b""
        for chunk in resp.response.stream(decode_content=True):
            *lines, pending = (pending + chunk).split(b"\n")
            events = [json.loads(line) for line in lines if line.strip()]
            if any(e["type"] == "BOOKMARK" and e["object"]["metadata"].get("annotations", {}).get(
                    "k8s.io/initial-events-end") == "true" for e in events):
                break
        else:
            pytest.fail(f"{path}: the watch ended without the initial-events-end bookmark")
    finally:
        resp.response.close()


@pytest.mark.skipif(shutil.which("kube-scheduler") is None,
                    reason="kube-scheduler is not on PATH (install kube-scheduler 1.36 to run the stock scheduler)")
def test_stock_kube_scheduler_binds_a_pod(fresh_apiserver, tmp_path):
    fresh_apiserver.start()
    api = config.new_client_from_config(config_file=str(fresh_apiserver.kubeconfig))
    core = client.CoreV1Api(api)
    log = tmp_path / "kube-scheduler.log"
    with open(log, "w") as log_file:
        scheduler = subprocess.Popen(
            ["kube-scheduler", f"--kubeconfig={fresh_apiserver.kubeconfig}", "--leader-elect=false",
             "--bind-address=127.0.0.1", f"--secure-port={free_port()}", f"--cert-dir={tmp_path / 'certs'}",
             "--authentication-skip-lookup=true"],
            stdout=subprocess.DEVNULL, stderr=log_file)
    try:
        core.create_node({"apiVersion": "v1", "kind": "Node", "metadata": {
            "name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
            "status": {"capacity": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})
        name = f"web-{uuid.uuid4().hex[:6]}"
        core.create_namespaced_pod("default", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                                               "spec": {"containers": [{"name": "c", "image": "nginx:1.27",
                                                                        "resources": {"requests": {"cpu": "1"}}}]}})
        wait_until(lambda: core.read_namespaced_pod(name, "default").spec.node_name == "node-1", timeout=60,
                   message=f"kube-scheduler did not bind the pod; its log:\n{log.read_text()[-4000:]}")
        events = core.list_namespaced_event("default", field_selector=f"involvedObject.name={name}")
        wait_until(lambda: any(e.reason == "Scheduled" for e in
                               core.list_namespaced_event("default",
                                                          field_selector=f"involvedObject.name={name}").items),
                   timeout=30, message=f"no Scheduled event recorded (got {events.items})")
    finally:
        scheduler.terminate()
        try:
            scheduler.wait(20)
        except subprocess.TimeoutExpired:
            scheduler.kill()
            scheduler.wait()
        api.close()
