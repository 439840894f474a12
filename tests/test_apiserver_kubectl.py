"""kubectl as a real client: apply, get (tables), patch, label, annotate, edit-style replace, delete, describe, -w."""

import json
import subprocess
import time

import yaml

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: {ns}
  labels: {{app: web}}
spec:
  containers:
  - name: nginx
    image: nginx:1.27
    env: [{{name: A, value: "1"}}]
"""


def test_apply_create_then_configure_then_unchanged(apiserver, namespace):
    out = apiserver.kubectl("apply", "-f", "-", input=POD.format(ns=namespace)).stdout
    assert "pod/web created" in out
    changed = POD.format(ns=namespace).replace("nginx:1.27", "nginx:1.28")
    assert "pod/web configured" in apiserver.kubectl("apply", "-f", "-", input=changed).stdout
    assert "pod/web unchanged" in apiserver.kubectl("apply", "-f", "-", input=changed).stdout
    pod = json.loads(apiserver.kubectl("get", "pod", "web", "-n", namespace, "-o", "json").stdout)
    assert pod["spec"]["containers"][0]["image"] == "nginx:1.28"
    assert "kubectl.kubernetes.io/last-applied-configuration" in pod["metadata"]["annotations"]


def test_apply_configmap_and_crd_free_kinds(apiserver, namespace):
    manifest = f"""
apiVersion: v1
kind: ConfigMap
metadata: {{name: settings, namespace: {namespace}}}
data: {{a: "1"}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {{name: pc-{namespace}}}
value: 5000
"""
    out = apiserver.kubectl("apply", "-f", "-", input=manifest).stdout
    assert "configmap/settings created" in out and f"priorityclass.scheduling.k8s.io/pc-{namespace} created" in out
    out = apiserver.kubectl("apply", "-f", "-", input=manifest.replace('a: "1"', 'a: "2"')).stdout
    assert "configmap/settings configured" in out


def test_server_side_apply(apiserver, namespace):
    manifest = f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ssa, namespace: {namespace}}}\ndata: {{a: '1'}}\n"
    assert "serverside-applied" in apiserver.kubectl("apply", "--server-side", "-f", "-", input=manifest).stdout
    assert "serverside-applied" in apiserver.kubectl(
        "apply", "--server-side", "-f", "-", input=manifest.replace("'1'", "'2'")).stdout
    cm = json.loads(apiserver.kubectl("get", "cm", "ssa", "-n", namespace, "-o", "json",
                                      "--show-managed-fields").stdout)
    assert cm["data"] == {"a": "2"}
    assert cm["metadata"]["managedFields"][0]["manager"] == "kubectl"


def test_get_prints_server_side_tables(apiserver, namespace):
    apiserver.kubectl("apply", "-f", "-", input=POD.format(ns=namespace))
    out = apiserver.kubectl("get", "pods", "-n", namespace).stdout.splitlines()
    assert out[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert out[1].split()[:4] == ["web", "0/1", "Pending", "0"]
    wide = apiserver.kubectl("get", "pods", "-n", namespace, "-o", "wide").stdout.splitlines()[0]
    assert "NODE" in wide and "IP" in wide
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"kn-{namespace}",
            "labels": {"node-role.kubernetes.io/worker": ""}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.32.0"}}}
    apiserver.kubectl("apply", "-f", "-", input=json.dumps(node))
    line = [ln for ln in apiserver.kubectl("get", "nodes").stdout.splitlines() if ln.startswith(f"kn-{namespace}")][0]
    assert line.split()[1:3] == ["Ready", "worker"]
    assert "web" in apiserver.kubectl("get", "pods", "-n", namespace, "-l", "app=web", "-o", "name").stdout


def test_patch_label_annotate(apiserver, namespace):
    apiserver.kubectl("apply", "-f", "-", input=POD.format(ns=namespace))
    apiserver.kubectl("label", "pod", "web", "-n", namespace, "tier=fe")
    apiserver.kubectl("annotate", "pod", "web", "-n", namespace, "note=hello")
    apiserver.kubectl("patch", "pod", "web", "-n", namespace, "-p",
                      '{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}')
    apiserver.kubectl("patch", "pod", "web", "-n", namespace, "--type=json", "-p",
                      '[{"op":"add","path":"/metadata/labels/extra","value":"x"}]')
    apiserver.kubectl("patch", "pod", "web", "-n", namespace, "--type=merge", "-p",
                      '{"metadata":{"annotations":{"note":null}}}')
    pod = json.loads(apiserver.kubectl("get", "pod", "web", "-n", namespace, "-o", "json").stdout)
    assert pod["metadata"]["labels"] == {"app": "web", "tier": "fe", "extra": "x"}
    assert "note" not in pod["metadata"].get("annotations", {})
    container = pod["spec"]["containers"][0]
    assert container["image"] == "nginx:1.28" and container["env"] == [{"name": "A", "value": "1"}]
    apiserver.kubectl("label", "pod", "web", "-n", namespace, "tier-")
    pod = json.loads(apiserver.kubectl("get", "pod", "web", "-n", namespace, "-o", "json").stdout)
    assert "tier" not in pod["metadata"]["labels"]


def test_replace_like_edit(apiserver, namespace):
    apiserver.kubectl("create", "configmap", "ed", "-n", namespace, "--from-literal=a=1")
    current = yaml.safe_load(apiserver.kubectl("get", "cm", "ed", "-n", namespace, "-o", "yaml").stdout)
    current["data"]["a"] = "2"
    apiserver.kubectl("replace", "-f", "-", input=yaml.safe_dump(current))
    current["data"]["a"] = "3"  # now stale: the server must refuse it
    proc = apiserver.kubectl("replace", "-f", "-", input=yaml.safe_dump(current), check=False)
    assert proc.returncode != 0 and "the object has been modified" in proc.stderr


def test_delete_waits_and_completes(apiserver, namespace):
    apiserver.kubectl("apply", "-f", "-", input=POD.format(ns=namespace))
    out = apiserver.kubectl("delete", "pod", "web", "-n", namespace, timeout=30).stdout
    assert 'pod "web" deleted' in out
    proc = apiserver.kubectl("get", "pod", "web", "-n", namespace, check=False)
    assert proc.returncode != 0 and 'pods "web" not found' in proc.stderr


def test_describe_shows_events(apiserver, namespace):
    apiserver.kubectl("apply", "-f", "-", input=POD.format(ns=namespace))
    uid = json.loads(apiserver.kubectl("get", "pod", "web", "-n", namespace, "-o", "json").stdout)["metadata"]["uid"]
    event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web.1", "namespace": namespace},
             "involvedObject": {"kind": "Pod", "name": "web", "namespace": namespace, "uid": uid, "apiVersion": "v1"},
             "reason": "FailedScheduling", "message": "0/3 nodes are available", "type": "Warning",
             "source": {"component": "koord-scheduler"}, "count": 1,
             "firstTimestamp": "2026-11-22T10:00:00Z", "lastTimestamp": "2026-11-22T10:00:00Z"}
    apiserver.kubectl("create", "-f", "-", input=json.dumps(event))
    out = apiserver.kubectl("describe", "pod", "web", "-n", namespace).stdout
    assert "FailedScheduling" in out and "0/3 nodes are available" in out


def test_get_watch_streams_changes(apiserver, namespace):
    apiserver.kubectl("create", "configmap", "watched", "-n", namespace, "--from-literal=a=1")
    proc = subprocess.Popen(["kubectl", "--kubeconfig", str(apiserver.kubeconfig), "--cache-dir",
                             str(apiserver.cache_dir), "get", "cm", "-n", namespace, "-w", "--request-timeout=20s"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert first.split()[:2] == ["NAME", "DATA"]
        assert proc.stdout.readline().split()[:2] == ["watched", "1"]
        apiserver.kubectl("create", "configmap", "later", "-n", namespace, "--from-literal=a=1",
                          "--from-literal=b=2")
        deadline = time.monotonic() + 15
        line = ""
        while time.monotonic() < deadline and not line.startswith("later"):
            line = proc.stdout.readline()
        assert line.split()[:2] == ["later", "2"]
    finally:
        proc.kill()
        proc.wait()


def test_kubectl_reports_server_errors(apiserver, namespace):
    proc = apiserver.kubectl("create", "configmap", "Bad_Name", "-n", namespace, check=False)
    assert proc.returncode != 0 and "Invalid" in proc.stderr and "Bad_Name" in proc.stderr
    proc = apiserver.kubectl("get", "gadgets", check=False)
    assert proc.returncode != 0 and 'the server doesn\'t have a resource type "gadgets"' in proc.stderr
