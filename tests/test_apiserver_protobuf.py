"""Kubernetes protobuf request bodies: the decoder on hand-built bytes, and kubectl end to end."""

from __future__ import annotations

import base64
import json
import random
import subprocess
import uuid

import pytest

from koordinator.apiserver import errors, protobuf
from koordinator.apiserver.protobuf_schema import KINDS, MESSAGES, SCALARS

PB = "application/vnd.kubernetes.protobuf"


# -- a minimal protobuf encoder, so the tests spell out the bytes they send -----------------------

def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative numbers are 10-byte two's complement, as Go writes them
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def f(num: int, value: int | bool | str | bytes) -> bytes:
    """One field: ints and bools as varints, str and bytes length-delimited."""
    if isinstance(value, (bool, int)):
        return varint(num << 3) + varint(int(value))
    data = value.encode() if isinstance(value, str) else value
    return varint(num << 3 | 2) + varint(len(data)) + data


def msg(*fields: bytes) -> bytes:
    return b"".join(fields)


def entry(num: int, key: str, value: str | bytes) -> bytes:
    return f(num, msg(f(1, key), f(2, value)))


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    # contentEncoding and contentType are written empty, as client-go does.
    return b"k8s\x00" + msg(f(1, msg(f(1, api_version), f(2, kind))), f(2, raw), f(3, ""), f(4, ""))


def meta(name: str, namespace: str = "") -> bytes:
    # What gogo writes for a fresh ObjectMeta: every string, generation 0, an empty creationTimestamp.
    return msg(f(1, name), f(2, ""), f(3, namespace), f(4, ""), f(5, ""), f(6, ""), f(7, 0), f(8, b""))


def status_of(call) -> errors.StatusError:
    with pytest.raises(errors.StatusError) as info:
        call()
    return info.value


# -- decoder unit tests ------------------------------------------------------------------------------

def test_configmap_decodes_to_the_json_shape():
    body = envelope("v1", "ConfigMap", msg(
        f(1, msg(meta("cm", "ns"), entry(11, "app", "web"))),
        entry(2, "a", "1"), entry(2, "empty", ""), entry(3, "bin", b"\x00\xff"), f(4, False)))
    assert protobuf.decode(body) == {
        "kind": "ConfigMap", "apiVersion": "v1",
        "metadata": {"name": "cm", "namespace": "ns", "labels": {"app": "web"}},
        # immutable is a *bool: an explicit false is kept
        "immutable": False, "data": {"a": "1", "empty": ""}, "binaryData": {"bin": "AP8="},
    }


def test_zero_time_is_omitted_and_times_are_rfc3339():
    times = msg(f(1, 1700000000), f(2, 123456789))
    node = protobuf.decode(envelope("v1", "Node", msg(
        f(1, meta("n")), f(3, msg(f(4, msg(f(1, "Ready"), f(2, "True"), f(3, b""), f(4, times))))))))
    assert "creationTimestamp" not in node["metadata"]
    assert node["status"]["conditions"] == [
        {"type": "Ready", "status": "True", "lastTransitionTime": "2023-11-14T22:13:20Z"}]
    lease = protobuf.decode(envelope("coordination.k8s.io/v1", "Lease", msg(
        f(1, meta("l")), f(2, msg(f(1, "me"), f(3, times), f(5, 0))))))
    assert lease["spec"] == {"holderIdentity": "me", "acquireTime": "2023-11-14T22:13:20.123456Z",
                             "leaseTransitions": 0}
    epoch = protobuf.decode(envelope("v1", "Node", msg(f(1, msg(f(1, "n"), f(9, msg(f(1, 0))))))))
    assert epoch["metadata"]["deletionTimestamp"] == "1970-01-01T00:00:00Z"


def test_pointer_zero_values_are_kept_and_omitempty_zeroes_dropped():
    container = msg(f(1, "c"), f(2, "img"), f(8, b""), f(16, False), f(17, False), f(18, False),
                    f(6, msg(f(1, ""), f(2, 0), f(3, 8080), f(4, "TCP"), f(5, ""))))
    pod_spec = msg(f(2, container), f(3, "Always"), f(4, 0), f(11, False), f(21, False), f(24, ""))
    template = msg(f(1, meta("")), f(2, pod_spec))
    spec = msg(f(1, 0), f(2, msg(entry(1, "app", "web"))), f(3, template), f(4, b""),
               f(5, 0), f(7, False), f(6, 0))
    obj = protobuf.decode(envelope("apps/v1", "Deployment", msg(f(1, meta("web")), f(2, spec), f(3, b""))))
    assert obj["spec"] == {
        "replicas": 0,  # *int32
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {}, "spec": {
            "containers": [{"name": "c", "image": "img", "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                            "resources": {}}],
            "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 0,  # *int64
            "automountServiceAccountToken": False,  # *bool
        }},
        "strategy": {},  # a non-pointer struct: Go's JSON writes it even when empty
        "revisionHistoryLimit": 0,
    }
    assert obj["status"] == {}
    pc = protobuf.decode(envelope("scheduling.k8s.io/v1", "PriorityClass", msg(
        f(1, meta("pc")), f(2, 0), f(3, False), f(4, ""), f(5, "Never"))))
    # value has no omitempty in Go: a zero priority is still a value
    assert pc == {"kind": "PriorityClass", "apiVersion": "scheduling.k8s.io/v1", "metadata": {"name": "pc"},
                  "value": 0, "preemptionPolicy": "Never"}


def test_unknown_field_numbers_are_skipped_and_reported():
    body = envelope("v1", "Secret", msg(
        f(1, msg(meta("s"), f(99, "x"))), f(3, "Opaque"), f(77, 5),
        varint(78 << 3 | 1) + (7).to_bytes(8, "little"), varint(79 << 3 | 5) + (7).to_bytes(4, "little"),
        entry(2, "k", b"v")))
    obj, unknown = protobuf.decode_reporting(body)
    assert obj == {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"}, "type": "Opaque",
                   "data": {"k": "dg=="}}
    assert unknown == ["metadata#99", "#77", "#78", "#79"]


def test_special_types():
    probe = msg(f(1, msg(f(2, msg(f(1, "/h"), f(2, msg(f(1, 1), f(3, "http"))))))), f(2, 0), f(7, 0))
    env = msg(f(1, "V"), f(3, msg(f(3, msg(f(1, msg(f(1, "cfg"))), f(2, "key"))))))
    resources = msg(entry(1, "cpu", msg(f(1, "500m"))), entry(2, "memory", b""))
    container = msg(f(1, "c"), f(7, env), f(8, resources), f(10, probe),
                    f(12, msg(f(2, msg(f(4, msg(f(1, 5))))))))
    volume = msg(f(1, "v"), f(2, msg(f(19, msg(f(1, msg(f(1, "cfg"))), f(3, 420))))))
    # repeated int64, written unpacked (one field per element) as proto2 does
    sec = msg(f(4, 1000), f(4, 2000), f(2, -1))
    pod = protobuf.decode(envelope("v1", "Pod", msg(f(1, meta("p")), f(2, msg(
        f(1, volume), f(2, container), f(14, sec), f(22, msg(f(1, "k"), f(5, 0))))))))
    spec = pod["spec"]
    assert spec["volumes"] == [{"name": "v", "configMap": {"name": "cfg", "defaultMode": 420}}]
    c = spec["containers"][0]
    assert c["env"] == [{"name": "V", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "key"}}}]
    assert c["resources"] == {"limits": {"cpu": "500m"}, "requests": {"memory": "0"}}
    assert c["livenessProbe"] == {"httpGet": {"path": "/h", "port": "http"}, "terminationGracePeriodSeconds": 0}
    assert c["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert spec["securityContext"] == {"runAsUser": -1, "supplementalGroups": [1000, 2000]}
    assert spec["tolerations"] == [{"key": "k", "tolerationSeconds": 0}]
    packed = protobuf.decode(envelope("v1", "Pod", msg(f(2, msg(f(14, msg(f(4, varint(1) + varint(2)))))))))
    assert packed["spec"]["securityContext"] == {"supplementalGroups": [1, 2]}
    pdb = protobuf.decode(envelope("policy/v1", "PodDisruptionBudget", msg(
        f(1, meta("b")), f(2, msg(f(1, msg(f(1, 0), f(2, 0))), f(3, msg(f(1, 1), f(3, "50%"))))))))
    assert pdb["spec"] == {"minAvailable": 0, "maxUnavailable": "50%"}
    rev = protobuf.decode(envelope("apps/v1", "ControllerRevision", msg(
        f(1, meta("r")), f(2, msg(f(1, b'{"spec":{"a":1}}'))), f(3, 2))))
    assert rev["data"] == {"spec": {"a": 1}} and rev["revision"] == 2
    assert [protobuf.go_duration(n) for n in (0, 1500, 2_500_000, 90 * 10**9, 3_723_500_000_000, -10**9)] == [
        "0s", "1.5µs", "2.5ms", "1m30s", "1h2m3.5s", "-1s"]


def test_eviction_and_delete_options():
    body = envelope("policy/v1", "Eviction", msg(
        f(1, meta("p", "ns")), f(2, msg(f(1, 0), f(2, msg(f(1, "u1"))), f(4, "Background"), f(5, "All")))))
    assert protobuf.decode(body) == {
        "kind": "Eviction", "apiVersion": "policy/v1", "metadata": {"name": "p", "namespace": "ns"},
        "deleteOptions": {"gracePeriodSeconds": 0, "preconditions": {"uid": "u1"},
                          "propagationPolicy": "Background", "dryRun": ["All"]}}
    # client-go sends DeleteOptions under the group version of the typed client it came from
    assert protobuf.decode(envelope("apps/v1", "DeleteOptions", f(3, True)))["orphanDependents"] is True


def test_workload_update_strategies():
    pvc = msg(f(1, meta("data")), f(2, msg(f(1, "ReadWriteOnce"), f(2, msg(entry(2, "storage", msg(f(1, "1Gi"))))))))
    strategy = msg(f(1, "RollingUpdate"), f(2, msg(f(1, 0), f(2, msg(f(1, 1), f(3, "10%"))))))
    sts_spec = msg(f(1, 1), f(4, pvc), f(5, "db"), f(6, "Parallel"), f(7, strategy),
                   f(10, msg(f(1, "Delete"), f(2, "Retain"))), f(11, msg(f(1, 0))))
    sts = protobuf.decode(envelope("apps/v1", "StatefulSet", msg(f(1, meta("db")), f(2, sts_spec))))
    assert sts["spec"] == {
        "replicas": 1, "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}],
        "serviceName": "db", "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": "10%"}},
        "persistentVolumeClaimRetentionPolicy": {"whenDeleted": "Delete", "whenScaled": "Retain"}, "ordinals": {}}

    rolling = msg(f(1, msg(f(1, 0), f(2, 0))), f(2, msg(f(1, 0), f(2, 1))))
    ds_spec = msg(f(3, msg(f(1, "RollingUpdate"), f(2, rolling))), f(4, 0), f(6, 3))
    ds = protobuf.decode(envelope("apps/v1", "DaemonSet", msg(f(1, meta("agent")), f(2, ds_spec))))
    assert ds["spec"] == {"updateStrategy": {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}},
                          "revisionHistoryLimit": 3}

    cj_spec = msg(f(1, "@hourly"), f(8, "Etc/UTC"), f(3, "Forbid"), f(4, False), f(6, 0),
                  f(5, msg(f(1, meta("")), f(2, b""))))
    cj = protobuf.decode(envelope("batch/v1", "CronJob", msg(f(1, meta("c")), f(2, cj_spec))))
    assert cj["spec"] == {"schedule": "@hourly", "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid",
                          "suspend": False, "jobTemplate": {"metadata": {}, "spec": {}},
                          "successfulJobsHistoryLimit": 0}

    target = msg(f(1, "Node"), f(3, "n1"))
    binding = protobuf.decode(envelope("v1", "Binding", msg(f(1, meta("p", "ns")), f(2, target))))
    assert binding["target"] == {"kind": "Node", "name": "n1"}
    scale_body = msg(f(1, meta("web")), f(2, msg(f(1, 0))), f(3, msg(f(1, 0), f(2, ""))))
    scale = protobuf.decode(envelope("autoscaling/v1", "Scale", scale_body))
    assert scale["spec"] == {} and scale["status"] == {"replicas": 0}


@pytest.mark.parametrize("body, detail", [
    (b"", "magic"),
    (b"{\"kind\":\"ConfigMap\"}", "magic"),
    (envelope("v1", "ConfigMap", b"")[:-3], "truncated varint"),
    (b"k8s\x00" + f(1, msg(f(1, "v1"), f(2, "ConfigMap"))) + varint(2 << 3 | 2) + varint(50) + b"abc", "past the end"),
    (b"k8s\x00\x0a\x80", "truncated varint"),
    (envelope("v1", "ConfigMap", f(1, msg(f(1, "x"))) + b"\x12\x05ab"), "past the end"),
    (envelope("v1", "ConfigMap", varint(1 << 3 | 0) + varint(5)), "expected a length-delimited value"),
    (envelope("v1", "ConfigMap", varint(4 << 3 | 2) + varint(0)), "expected a varint"),
    (envelope("v1", "ConfigMap", varint(9 << 3 | 3)), "unsupported wire type 3"),
    (envelope("v1", "ConfigMap", b"\x00\x01"), "field number 0"),
    (envelope("v1", "ConfigMap", b"\x08" + b"\xff" * 11), "longer than 10 bytes"),
    (envelope("v1", "Node", f(1, msg(f(8, msg(f(1, 1 << 62)))))), "time out of range"),
    (b"k8s\x00" + f(1, msg(f(1, "v1"))), "names no kind"),
    (b"k8s\x00" + msg(f(1, msg(f(1, "v1"), f(2, "Pod"))), f(3, "gzip")), "content encoding"),
])
def test_malformed_bodies_are_bad_requests(body, detail):
    err = status_of(lambda: protobuf.decode(body))
    assert (err.code, err.reason) == (400, "BadRequest")
    assert "protobuf: " in err.message and detail in err.message
    # worded like the JSON path's decode errors: generic for the envelope, by kind inside the object
    assert err.message.startswith(("the request body could not be decoded: ", "ConfigMap in version", "Node in"))
    err = status_of(lambda: protobuf.decode(body, "ConfigMap", "v1"))
    assert err.code == 400 and err.message.startswith('ConfigMap in version "v1" cannot be handled as a ConfigMap')


def test_kinds_without_a_schema_are_unsupported_media_types():
    err = status_of(lambda: protobuf.decode(envelope("example.com/v1", "Widget", b"")))
    assert (err.code, err.reason) == (415, "UnsupportedMediaType")
    assert 'Widget in version "example.com/v1"' in err.message


def test_random_corruption_never_escapes_as_anything_but_a_status():
    good = envelope("apps/v1", "Deployment", msg(f(1, meta("web", "ns")), f(2, msg(
        f(1, 2), f(3, msg(f(2, msg(f(2, msg(f(1, "c"), f(2, "nginx"), f(8, b""))))))),
        f(4, msg(f(1, "RollingUpdate"), f(2, msg(f(1, msg(f(1, 1), f(3, "25%")))))))))))
    rng = random.Random(7)
    for _ in range(2000):
        data = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            if not data:
                break
            op = rng.random()
            pos = rng.randrange(len(data))
            if op < 0.5:
                data[pos] = rng.randrange(256)
            elif op < 0.8:
                del data[pos:]
            else:
                data.insert(pos, rng.randrange(256))
        try:
            protobuf.decode(bytes(data))
        except errors.StatusError as exc:
            assert exc.code in (400, 415)


def test_schema_is_consistent():
    for name, fields in MESSAGES.items():
        for num, field in fields.items():
            assert num > 0 and field.name
            assert field.type in SCALARS or field.type in MESSAGES, f"{name}.{field.name}: {field.type}"
            assert not (field.inline and (field.repeated or field.map_value or field.type in SCALARS))
    assert all(message in MESSAGES for message in KINDS.values())


# -- end to end: the real kubectl against the server -------------------------------------------------

def kubectl_create(apiserver, *args: str) -> None:
    """``kubectl create ...``, checking that the object really went out as protobuf (-v=8 logs headers)."""
    if "--" in args:
        at = args.index("--")
        args = (*args[:at], "-v=8", *args[at:])
    else:
        args = (*args, "-v=8")
    proc = apiserver.kubectl("create", *args, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"Content-Type: {PB}" in proc.stderr


def get(apiserver, path: str) -> dict:
    return apiserver.request("GET", path, expect=200)[1]


def test_kubectl_create_workloads(apiserver, namespace):
    ns = ("-n", namespace)
    kubectl_create(apiserver, "deployment", "web", "--image=nginx:1.27", "--port=80", "--replicas=3", *ns)
    dep = get(apiserver, f"/apis/apps/v1/namespaces/{namespace}/deployments/web")
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["selector"] == {"matchLabels": {"app": "web"}}
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    assert (c["name"], c["image"], c["ports"]) == ("nginx", "nginx:1.27", [{"containerPort": 80, "protocol": "TCP"}])
    assert dep["spec"]["template"]["metadata"]["labels"] == {"app": "web"}
    kubectl_create(apiserver, "deployment", "idle", "--image=nginx", "--replicas=0", *ns)
    assert get(apiserver, f"/apis/apps/v1/namespaces/{namespace}/deployments/idle")["spec"]["replicas"] == 0

    kubectl_create(apiserver, "job", "once", "--image=busybox", *ns, "--", "echo", "hi")
    job = get(apiserver, f"/apis/batch/v1/namespaces/{namespace}/jobs/once")
    pod_spec = job["spec"]["template"]["spec"]
    assert pod_spec["containers"][0]["command"] == ["echo", "hi"] and pod_spec["restartPolicy"] == "Never"

    kubectl_create(apiserver, "cronjob", "tick", "--image=busybox", "--schedule=*/5 * * * *", *ns, "--", "date")
    cj = get(apiserver, f"/apis/batch/v1/namespaces/{namespace}/cronjobs/tick")
    assert cj["spec"]["schedule"] == "*/5 * * * *"
    job_pod = cj["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job_pod["containers"][0]["command"] == ["date"] and job_pod["restartPolicy"] == "OnFailure"


def test_kubectl_create_config_and_secrets(apiserver, namespace, tmp_path):
    ns = ("-n", namespace)
    blob = bytes(range(256))
    (tmp_path / "blob").write_bytes(blob)
    kubectl_create(apiserver, "configmap", "cfg", "--from-literal=a=1", "--from-literal=empty=",
                   f"--from-file=bin={tmp_path / 'blob'}", *ns)
    cm = get(apiserver, f"/api/v1/namespaces/{namespace}/configmaps/cfg")
    assert cm["data"] == {"a": "1", "empty": ""}
    assert base64.b64decode(cm["binaryData"]["bin"]) == blob

    kubectl_create(apiserver, "secret", "generic", "gen", "--from-literal=user=admin",
                   f"--from-file=blob={tmp_path / 'blob'}", *ns)
    secret = get(apiserver, f"/api/v1/namespaces/{namespace}/secrets/gen")
    assert secret["type"] == "Opaque"
    assert base64.b64decode(secret["data"]["user"]) == b"admin" and base64.b64decode(secret["data"]["blob"]) == blob

    key, crt = tmp_path / "tls.key", tmp_path / "tls.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
                    "-days", "1", "-subj", "/CN=example"], check=True, capture_output=True)
    kubectl_create(apiserver, "secret", "tls", "cert", f"--cert={crt}", f"--key={key}", *ns)
    tls = get(apiserver, f"/api/v1/namespaces/{namespace}/secrets/cert")
    assert tls["type"] == "kubernetes.io/tls"
    assert base64.b64decode(tls["data"]["tls.crt"]) == crt.read_bytes()

    kubectl_create(apiserver, "secret", "docker-registry", "pull", "--docker-server=registry.example",
                   "--docker-username=u", "--docker-password=p", *ns)
    pull = get(apiserver, f"/api/v1/namespaces/{namespace}/secrets/pull")
    assert pull["type"] == "kubernetes.io/dockerconfigjson"
    config = json.loads(base64.b64decode(pull["data"][".dockerconfigjson"]))
    assert config["auths"]["registry.example"]["username"] == "u"

    kubectl_create(apiserver, "serviceaccount", "robot", *ns)
    assert get(apiserver, f"/api/v1/namespaces/{namespace}/serviceaccounts/robot")["metadata"]["name"] == "robot"


def test_kubectl_create_services(apiserver, namespace):
    ns = ("-n", namespace)
    base = f"/api/v1/namespaces/{namespace}/services"
    kubectl_create(apiserver, "service", "clusterip", "cip", "--tcp=5678:8080", "--tcp=90:http", *ns)
    svc = get(apiserver, f"{base}/cip")
    assert svc["spec"]["type"] == "ClusterIP" and svc["spec"]["selector"] == {"app": "cip"}
    assert [(p["port"], p["targetPort"], p["protocol"]) for p in svc["spec"]["ports"]] == [
        (5678, 8080, "TCP"), (90, "http", "TCP")]
    kubectl_create(apiserver, "service", "nodeport", "np", "--tcp=80:8080", "--node-port=30080", *ns)
    np = get(apiserver, f"{base}/np")
    assert np["spec"]["type"] == "NodePort" and np["spec"]["ports"][0]["nodePort"] == 30080
    kubectl_create(apiserver, "service", "loadbalancer", "lb", "--tcp=443:8443", *ns)
    lb = get(apiserver, f"{base}/lb")
    assert lb["spec"]["type"] == "LoadBalancer" and lb["spec"]["ports"][0]["targetPort"] == 8443
    kubectl_create(apiserver, "service", "externalname", "ext", "--external-name=db.example.com", *ns)
    ext = get(apiserver, f"{base}/ext")
    assert (ext["spec"]["type"], ext["spec"]["externalName"]) == ("ExternalName", "db.example.com")


def test_kubectl_create_policy_and_rbac(apiserver, namespace):
    ns = ("-n", namespace)
    kubectl_create(apiserver, "poddisruptionbudget", "half", "--selector=app=web", "--min-available=50%", *ns)
    kubectl_create(apiserver, "poddisruptionbudget", "two", "--selector=app=db", "--min-available=2", *ns)
    pdbs = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    assert get(apiserver, f"{pdbs}/half")["spec"]["minAvailable"] == "50%"
    two = get(apiserver, f"{pdbs}/two")["spec"]
    assert two["minAvailable"] == 2 and two["selector"] == {"matchLabels": {"app": "db"}}

    rbac = "/apis/rbac.authorization.k8s.io/v1"
    kubectl_create(apiserver, "role", "reader", "--verb=get,list", "--resource=pods,deployments.apps",
                   "--resource-name=web", *ns)
    rules = get(apiserver, f"{rbac}/namespaces/{namespace}/roles/reader")["rules"]
    assert {(tuple(r["apiGroups"]), tuple(r["resources"])) for r in rules} == {(("",), ("pods",)),
                                                                              (("apps",), ("deployments",))}
    assert all(r["verbs"] == ["get", "list"] and r["resourceNames"] == ["web"] for r in rules)
    kubectl_create(apiserver, "rolebinding", "readers", "--role=reader", "--user=alice", "--group=devs",
                   f"--serviceaccount={namespace}:robot", *ns)
    binding = get(apiserver, f"{rbac}/namespaces/{namespace}/rolebindings/readers")
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "reader"}
    assert [(s["kind"], s["name"], s.get("namespace")) for s in binding["subjects"]] == [
        ("User", "alice", None), ("Group", "devs", None), ("ServiceAccount", "robot", namespace)]

    suffix = uuid.uuid4().hex[:8]
    kubectl_create(apiserver, "clusterrole", f"cr-{suffix}", "--verb=get", "--resource=nodes",
                   "--non-resource-url=/healthz")
    kubectl_create(apiserver, "clusterrolebinding", f"crb-{suffix}", f"--clusterrole=cr-{suffix}", "--user=bob")
    cr = get(apiserver, f"{rbac}/clusterroles/cr-{suffix}")
    assert {tuple(r.get("resources") or r.get("nonResourceURLs")) for r in cr["rules"]} == {("nodes",), ("/healthz",)}
    crb = get(apiserver, f"{rbac}/clusterrolebindings/crb-{suffix}")
    assert crb["roleRef"]["kind"] == "ClusterRole" and crb["subjects"] == [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "bob"}]

    kubectl_create(apiserver, "priorityclass", f"zero-{suffix}", "--value=0", "--description=nothing special")
    pc = get(apiserver, f"/apis/scheduling.k8s.io/v1/priorityclasses/zero-{suffix}")
    assert pc["value"] == 0 and not pc.get("globalDefault") and pc["description"] == "nothing special"
    assert pc["preemptionPolicy"] == "PreemptLowerPriority"
    kubectl_create(apiserver, "namespace", f"ns-{suffix}")
    assert get(apiserver, f"/api/v1/namespaces/ns-{suffix}")["metadata"]["name"] == f"ns-{suffix}"
    for path in (f"{rbac}/clusterrolebindings/crb-{suffix}", f"{rbac}/clusterroles/cr-{suffix}",
                 f"/apis/scheduling.k8s.io/v1/priorityclasses/zero-{suffix}", f"/api/v1/namespaces/ns-{suffix}"):
        apiserver.request("DELETE", path)


def test_invalid_object_sent_as_protobuf_gets_422(apiserver, namespace):
    proc = apiserver.kubectl("create", "deployment", "Bad_Name", "--image=nginx", "-n", namespace, check=False)
    assert proc.returncode != 0
    assert 'Deployment.apps "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name"' in proc.stderr
    proc = apiserver.kubectl("create", "deployment", "web", "--image=nginx", "--port=99999", "-n", namespace,
                             check=False)
    assert "spec.template.spec.containers[0].ports[0].containerPort: Invalid value: 99999" in proc.stderr


def test_raw_protobuf_requests(apiserver, namespace):
    path = f"/api/v1/namespaces/{namespace}/configmaps"
    headers = {"Content-Type": PB, "Accept": f"{PB},application/json"}
    body = envelope("v1", "ConfigMap", msg(f(1, meta("raw")), entry(2, "k", "v")))
    status, obj, hdrs = apiserver.request("POST", path, raw=body, headers=headers)
    assert status == 201 and obj["data"] == {"k": "v"} and hdrs["content-type"] == "application/json"
    status, obj, _ = apiserver.request("POST", path, raw=body[:-8], headers=headers)
    assert status == 400 and obj["reason"] == "BadRequest"
    assert obj["message"].startswith('ConfigMap in version "v1" cannot be handled as a ConfigMap: protobuf:')
    status, obj, _ = apiserver.request("POST", path, raw=envelope("v1", "Secret", f(1, meta("s"))), headers=headers)
    assert status == 400  # a Secret sent to the configmaps endpoint
    status, obj, _ = apiserver.request("POST", path, raw=envelope("example.com/v1", "Widget", b""), headers=headers)
    assert status == 415 and "Widget" in obj["message"]
    status, obj, _ = apiserver.request("POST", path, raw=b"not protobuf", headers=headers)
    assert status == 400


def _node_and_pod(apiserver, namespace, node: str, pod: str) -> None:
    apiserver.request("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}},
                      expect=201)
    apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]}}, expect=201)


def test_eviction_sent_as_protobuf(apiserver, namespace):
    node = f"pb-{uuid.uuid4().hex[:8]}"
    _node_and_pod(apiserver, namespace, node, "victim")
    body = envelope("policy/v1", "Eviction", msg(f(1, meta("victim", namespace)), f(2, msg(f(1, 0)))))
    status, obj, _ = apiserver.request("POST", f"/api/v1/namespaces/{namespace}/pods/victim/eviction", raw=body,
                                       headers={"Content-Type": PB})
    assert status == 201, obj
    assert apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/victim")[0] == 404
    apiserver.request("DELETE", f"/api/v1/nodes/{node}")


def test_kubectl_drain_evicts_the_nodes_pods(apiserver, namespace):
    node = f"drain-{uuid.uuid4().hex[:8]}"
    _node_and_pod(apiserver, namespace, node, "worker")
    apiserver.kubectl("drain", node, "--force", "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=30s")
    assert apiserver.request("GET", f"/api/v1/namespaces/{namespace}/pods/worker")[0] == 404
    assert get(apiserver, f"/api/v1/nodes/{node}")["spec"]["unschedulable"] is True
    apiserver.request("DELETE", f"/api/v1/nodes/{node}")


# Every PodSpec/Container field family the schema covers, in a CronJob created as JSON. ``kubectl
# create job --from=cronjob/...`` reads it back, copies the template into a Job and sends that as
# protobuf, so the Job's template must come out equal. (No explicit zero values of omitempty fields
# here: a Go round trip drops those, so the Job could not show them.)
_FULL_POD_SPEC = {
    "restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "activeDeadlineSeconds": 50, "dnsPolicy": "None",
    "dnsConfig": {"nameservers": ["1.1.1.1"], "searches": ["x.local"],
                  "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]},
    "nodeSelector": {"disk": "ssd"}, "serviceAccountName": "default", "automountServiceAccountToken": False,
    "shareProcessNamespace": True, "hostname": "h", "subdomain": "s", "schedulerName": "default-scheduler",
    "enableServiceLinks": False, "setHostnameAsFQDN": False, "hostUsers": True,
    "imagePullSecrets": [{"name": "pull"}], "hostAliases": [{"ip": "10.0.0.1", "hostnames": ["a", "b"]}],
    "readinessGates": [{"conditionType": "x/ready"}], "os": {"name": "linux"},
    "securityContext": {
        "runAsUser": 1000, "runAsGroup": 0, "runAsNonRoot": True, "fsGroup": 2000, "supplementalGroups": [1, 2],
        "fsGroupChangePolicy": "OnRootMismatch", "sysctls": [{"name": "net.core.somaxconn", "value": "1024"}],
        "seccompProfile": {"type": "RuntimeDefault"}, "seLinuxOptions": {"level": "s0:c1"}},
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{
                "matchExpressions": [{"key": "zone", "operator": "In", "values": ["a", "b"]}],
                "matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["n9"]}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 10, "preference": {"matchExpressions": [{"key": "gpu", "operator": "Exists"}]}}]},
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone", "namespaces": ["x"],
            "namespaceSelector": {}, "matchLabelKeys": ["pod-template-hash"]}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": {
            "labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["full"]}]},
            "topologyKey": "kubernetes.io/hostname"}}]}},
    "tolerations": [{"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute", "tolerationSeconds": 0},
                    {"operator": "Exists"}],
    "topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "full"}}, "minDomains": 2, "nodeAffinityPolicy": "Honor",
        "nodeTaintsPolicy": "Ignore", "matchLabelKeys": ["v"]}],
    "volumes": [
        {"name": "e", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
        {"name": "h", "hostPath": {"path": "/tmp", "type": "Directory"}},
        {"name": "c", "configMap": {"name": "cm", "items": [{"key": "k", "path": "p", "mode": 256}],
                                    "defaultMode": 420, "optional": True}},
        {"name": "s", "secret": {"secretName": "sec", "defaultMode": 256, "optional": False}},
        {"name": "p", "persistentVolumeClaim": {"claimName": "pvc", "readOnly": True}},
        {"name": "d", "downwardAPI": {"items": [
            {"path": "labels", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.labels"}},
            {"path": "cpu", "resourceFieldRef": {"containerName": "main", "resource": "limits.cpu",
                                                 "divisor": "1m"}}]}},
        {"name": "pr", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600, "audience": "api"}},
            {"configMap": {"name": "cm", "items": [{"key": "a", "path": "b"}]}},
            {"secret": {"name": "sec", "optional": True}},
            {"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}},
        {"name": "csi", "csi": {"driver": "d.io", "readOnly": True, "volumeAttributes": {"x": "y"},
                                "nodePublishSecretRef": {"name": "s"}}},
        {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"metadata": {"labels": {"a": "b"}}, "spec": {
            "accessModes": ["ReadWriteOnce"], "storageClassName": "fast",
            "resources": {"requests": {"storage": "1Gi"}}}}}},
        {"name": "nfs", "nfs": {"server": "s", "path": "/x", "readOnly": True}}],
    "initContainers": [{"name": "init", "image": "busybox", "command": ["sh", "-c", "true"],
                        "restartPolicy": "Always", "resources": {}}],
    "containers": [{
        "name": "main", "image": "busybox:1", "imagePullPolicy": "IfNotPresent", "command": ["sh"],
        "args": ["-c", "sleep 1"], "workingDir": "/w",
        "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"},
                  {"containerPort": 53, "protocol": "UDP", "hostPort": 53, "hostIP": "0.0.0.0"}],
        "env": [
            {"name": "A", "value": "1"},
            {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "C", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "k", "optional": True}}},
            {"name": "D", "valueFrom": {"configMapKeyRef": {"name": "cm", "key": "k"}}},
            {"name": "R", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory", "divisor": "1Mi"}}}],
        "envFrom": [{"prefix": "P_", "configMapRef": {"name": "cm", "optional": False}},
                    {"secretRef": {"name": "sec"}}],
        "resources": {"limits": {"cpu": "1", "memory": "128Mi"}, "requests": {"cpu": "100m", "memory": "64Mi"}},
        "resizePolicy": [{"resourceName": "cpu", "restartPolicy": "NotRequired"}],
        "volumeMounts": [{"name": "e", "mountPath": "/e", "readOnly": True, "subPath": "x", "mountPropagation": "None"},
                         {"name": "c", "mountPath": "/c", "subPathExpr": "$(A)"}],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "http", "scheme": "HTTP",
                        "httpHeaders": [{"name": "X", "value": "y"}]},
            "initialDelaySeconds": 5, "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1,
            "failureThreshold": 3, "terminationGracePeriodSeconds": 5},
        "readinessProbe": {"tcpSocket": {"port": 8080}, "periodSeconds": 5},
        "startupProbe": {"exec": {"command": ["cat", "/ok"]}, "failureThreshold": 30},
        "lifecycle": {"postStart": {"exec": {"command": ["true"]}}, "preStop": {"sleep": {"seconds": 3}}},
        "securityContext": {
            "privileged": False, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsUser": 0,
            "capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}, "procMount": "Default",
            "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"},
            "appArmorProfile": {"type": "RuntimeDefault"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "FallbackToLogsOnError",
        "stdin": True, "tty": True,
    }, {"name": "grpc", "image": "g", "livenessProbe": {"grpc": {"port": 9090, "service": ""}}}],
}


def test_full_pod_template_survives_protobuf(apiserver, namespace):
    job_spec = {
        "backoffLimit": 0, "parallelism": 1, "completions": 1, "activeDeadlineSeconds": 100,
        "ttlSecondsAfterFinished": 0, "suspend": False,
        "podFailurePolicy": {"rules": [
            {"action": "FailJob", "onExitCodes": {"containerName": "main", "operator": "In", "values": [42]}},
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]},
        "template": {"metadata": {"labels": {"app": "full"}, "annotations": {"a": "b"}}, "spec": _FULL_POD_SPEC},
    }
    apiserver.request("POST", f"/apis/batch/v1/namespaces/{namespace}/cronjobs", {
        "apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "full"},
        "spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": job_spec}}}, expect=201)
    kubectl_create(apiserver, "job", "copy", "--from=cronjob/full", "-n", namespace)
    stored = get(apiserver, f"/apis/batch/v1/namespaces/{namespace}/cronjobs/full")["spec"]["jobTemplate"]["spec"]
    job = get(apiserver, f"/apis/batch/v1/namespaces/{namespace}/jobs/copy")["spec"]
    # The server adds the generated selector's labels to a Job's template, as kube-apiserver does.
    generated = {"job-name", "batch.kubernetes.io/job-name", "controller-uid", "batch.kubernetes.io/controller-uid"}
    labels = job["template"]["metadata"]["labels"]
    assert generated <= set(labels)
    job["template"]["metadata"]["labels"] = {k: v for k, v in labels.items() if k not in generated}
    assert job["template"] == stored["template"]
    assert {k: job[k] for k in job_spec if k != "template"} == {k: stored[k] for k in job_spec if k != "template"}
