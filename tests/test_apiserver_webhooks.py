"""Admission webhooks called by the embedded API server, against a real TLS webhook server.

The API server runs as a subprocess of its own for this module (webhook configurations are
cluster-wide); the webhook server is a stdlib HTTPS server on a thread of the test process,
with a certificate from a CA made here and handed to the configurations as ``caBundle``.
"""

from __future__ import annotations

import base64
import datetime
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from koordinator.runtime.client import Client
from koordinator.runtime.errors import Conflict
from tests.apiserver_process import ApiServerProcess
from tests.waiting import wait_until

Obj = dict[str, Any]
SERVICE_NS = "wh-system"
SERVICE_NAME = "hooks"


# -- certificates -------------------------------------------------------------------------------


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def make_ca_and_cert(directory: Path) -> tuple[bytes, Path, Path]:
    """A CA (PEM returned) and a serving certificate it signed, valid for 127.0.0.1 and hooks.wh-system.svc."""
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name("webhook-test-ca")).issuer_name(_name("webhook-test-ca"))
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    sans = [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName(f"{SERVICE_NAME}.{SERVICE_NS}.svc")]
    cert = (x509.CertificateBuilder().subject_name(_name("webhook")).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256()))
    cert_path, key_path = directory / "tls.crt", directory / "tls.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return ca.public_bytes(serialization.Encoding.PEM), cert_path, key_path


# -- the webhook server -------------------------------------------------------------------------

Handler = Callable[[Obj], Obj]


class WebhookServer:
    """HTTPS server answering AdmissionReviews with per-path handlers; records every request."""

    def __init__(self, directory: Path) -> None:
        ca_pem, cert, key = make_ca_and_cert(directory)
        self.ca_bundle = base64.b64encode(ca_pem).decode()
        self.handlers: dict[str, Handler] = {}
        self.requests: list[tuple[str, Obj]] = []
        self.lock = threading.Lock()
        outer = self

        class RequestHandler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                path, _, query = self.path.partition("?")
                with outer.lock:
                    outer.requests.append((self.path, body["request"]))
                    handler = outer.handlers.get(path)
                response = handler(body["request"]) if handler else {"allowed": True}
                raw = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                                  "response": {"uid": body["request"]["uid"], **response}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), RequestHandler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def seen(self, path: str) -> list[Obj]:
        with self.lock:
            return [r for p, r in self.requests if p.partition("?")[0] == path]

    def reset(self) -> None:
        with self.lock:
            self.handlers.clear()
            self.requests.clear()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    proc = ApiServerProcess(tmp_path_factory.mktemp("webhook-apiserver"))
    proc.start()
    try:
        proc.request("POST", "/api/v1/namespaces", {"metadata": {"name": SERVICE_NS}}, expect=201)
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def webhook_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebhookServer]:
    ws = WebhookServer(tmp_path_factory.mktemp("webhook-certs"))
    ws.thread.start()
    try:
        yield ws
    finally:
        ws.httpd.shutdown()
        ws.httpd.server_close()


@pytest.fixture
def hooks(server: ApiServerProcess, webhook_server: WebhookServer) -> Iterator[WebhookServer]:
    """The webhook server, with every configuration this test makes removed afterwards."""
    webhook_server.reset()
    try:
        yield webhook_server
    finally:
        for plural in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations"):
            server.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{plural}")
        webhook_server.reset()


@pytest.fixture
def ns(server: ApiServerProcess) -> str:
    name = f"t-{uuid.uuid4().hex[:10]}"
    server.request("POST", "/api/v1/namespaces", {"metadata": {"name": name, "labels": {"webhooks": "on"}}},
                   expect=201)
    return name


@pytest.fixture
def client(server: ApiServerProcess) -> Iterator[Client]:
    c = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
    try:
        yield c
    finally:
        c.close()


def webhook(name: str, client_config: Obj, rules: list[Obj], **extra: Any) -> Obj:
    return {"name": name, "clientConfig": client_config, "rules": rules, "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "namespaceSelector": {"matchLabels": {"webhooks": "on"}}, **extra}


def rule(operations: list[str], resources: list[str], groups: tuple[str, ...] = ("",), **extra: Any) -> Obj:
    return {"operations": operations, "apiGroups": list(groups), "apiVersions": ["v1"], "resources": resources,
            **extra}


def configure(server: ApiServerProcess, mutating: bool, name: str, *hooks_: Obj) -> Obj:
    kind = "MutatingWebhookConfiguration" if mutating else "ValidatingWebhookConfiguration"
    _, body, _ = server.request("POST", f"/apis/admissionregistration.k8s.io/v1/{kind.lower()}s", {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        "webhooks": list(hooks_)}, expect=201)
    return body


def url_config(ws: WebhookServer, path: str) -> Obj:
    return {"url": ws.url(path), "caBundle": ws.ca_bundle}


def pod(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def json_patch(ops: list[Obj]) -> Obj:
    return {"allowed": True, "patchType": "JSONPatch", "patch": base64.b64encode(json.dumps(ops).encode()).decode()}


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- tests --------------------------------------------------------------------------------------


def test_mutating_webhook_patches_pods_created_by_the_client_and_kubectl(server, hooks, ns, client):
    hooks.handlers["/mutate"] = lambda req: {
        **json_patch([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}]),
        "warnings": ["pod was mutated"]}
    configure(server, True, "mutator", webhook("mutate.pods.example.com", url_config(hooks, "/mutate"),
                                               [rule(["CREATE"], ["pods"])]))
    created = client.create(pod("p1"), namespace=ns)
    assert created["metadata"]["labels"] == {"mutated": "yes"}
    assert client.get("Pod", "p1", ns)["metadata"]["labels"] == {"mutated": "yes"}

    req = hooks.seen("/mutate")[0]
    assert req["operation"] == "CREATE"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "pods"}
    assert req["requestKind"] == req["kind"] and req["requestResource"] == req["resource"]
    assert (req["name"], req["namespace"], req["dryRun"]) == ("p1", ns, False)
    assert req["options"] == {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}
    assert req["oldObject"] is None
    assert req["userInfo"]["username"] == "system:anonymous"
    # Defaulting ran before the webhook saw the pod.
    assert req["object"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    assert req["object"]["spec"]["priority"] == 0
    path = next(p for p, _ in hooks.requests if p.startswith("/mutate"))
    assert path == "/mutate?timeout=10s"

    manifest = json.dumps(pod("p2"))
    out = server.kubectl("create", "-n", ns, "-f", "-", input=manifest)
    assert "pod was mutated" in out.stderr
    got = json.loads(server.kubectl("get", "pod", "p2", "-n", ns, "-o", "json").stdout)
    assert got["metadata"]["labels"] == {"mutated": "yes"}

    # The Warning header carries the webhook's warnings.
    _, _, headers = server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("p3"), expect=201)
    assert headers["warning"] == '299 - "pod was mutated"'


def test_invalid_mutation_is_refused_by_validation(server, hooks, ns):
    hooks.handlers["/break"] = lambda req: json_patch([{"op": "replace", "path": "/spec/containers/0/name",
                                                        "value": "Not_Valid"}])
    configure(server, True, "breaker", webhook("break.pods.example.com", url_config(hooks, "/break"),
                                               [rule(["CREATE"], ["pods"])]))
    code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("p"))
    assert code == 422
    assert body["message"].startswith('Pod "p" is invalid: spec.containers[0].name: Invalid value: "Not_Valid"')


def test_denials_carry_the_webhook_name_code_and_reason(server, hooks, ns):
    hooks.handlers["/deny"] = lambda req: {"allowed": False, "status": {"code": 403, "message": "no pods today",
                                                                         "reason": "Forbidden"}}
    hooks.handlers["/deny-low"] = lambda req: {"allowed": False, "status": {"code": 200, "reason": "NotAllowed"}}
    hooks.handlers["/deny-bare"] = lambda req: {"allowed": False}
    configure(server, False, "denier", webhook("deny.pods.example.com", url_config(hooks, "/deny"),
                                               [rule(["CREATE"], ["pods"])],
                                               objectSelector={"matchLabels": {"hook": "deny"}}),
              webhook("low.pods.example.com", url_config(hooks, "/deny-low"), [rule(["CREATE"], ["pods"])],
                      objectSelector={"matchLabels": {"hook": "low"}}),
              webhook("bare.pods.example.com", url_config(hooks, "/deny-bare"), [rule(["CREATE"], ["pods"])],
                      objectSelector={"matchLabels": {"hook": "bare"}}))
    code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("a", {"hook": "deny"}))
    assert (code, body["reason"]) == (403, "Forbidden")
    assert body["message"] == 'admission webhook "deny.pods.example.com" denied the request: no pods today'
    code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("b", {"hook": "low"}))
    assert (code, body["reason"]) == (400, "NotAllowed")
    assert body["message"] == 'admission webhook "low.pods.example.com" denied the request: NotAllowed'
    code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("c", {"hook": "bare"}))
    assert code == 400
    assert body["message"] == 'admission webhook "bare.pods.example.com" denied the request without explanation'
    server.request("GET", f"/api/v1/namespaces/{ns}/pods/a", expect=404)
    # No label matches no objectSelector: no webhook, created.
    server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("d"), expect=201)
    assert len(hooks.requests) == 3


def test_failure_policy_fail_and_ignore(server, hooks, ns):
    port = closed_port()
    down = {"url": f"https://127.0.0.1:{port}/down", "caBundle": hooks.ca_bundle}
    configure(server, False, "down", webhook("fail.pods.example.com", down, [rule(["CREATE"], ["pods"])],
                                             objectSelector={"matchLabels": {"policy": "fail"}}),
              webhook("ignore.pods.example.com", down, [rule(["CREATE"], ["pods"])], failurePolicy="Ignore",
                      objectSelector={"matchLabels": {"policy": "ignore"}}))
    code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("f", {"policy": "fail"}))
    assert (code, body["reason"]) == (500, "InternalError")
    assert body["message"] == (
        f'Internal error occurred: failed calling webhook "fail.pods.example.com": failed to call webhook: '
        f'Post "https://127.0.0.1:{port}/down?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused')
    server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("i", {"policy": "ignore"}), expect=201)


def test_a_slow_webhook_times_out(server, hooks, ns):
    release = threading.Event()
    hooks.handlers["/slow"] = lambda req: (release.wait(10), {"allowed": True})[1]
    configure(server, False, "slow", webhook("slow.pods.example.com", url_config(hooks, "/slow"),
                                             [rule(["CREATE"], ["pods"])], timeoutSeconds=1))
    try:
        code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("s"))
    finally:
        release.set()
    assert code == 500
    assert body["message"] == (
        f'Internal error occurred: failed calling webhook "slow.pods.example.com": failed to call webhook: '
        f'Post "{hooks.url("/slow")}?timeout=1s": context deadline exceeded')


def test_namespace_selector_and_cluster_scoped_objects(server, hooks, ns):
    configure(server, False, "watcher", webhook("ns.example.com", url_config(hooks, "/seen"),
                                                [rule(["CREATE"], ["pods", "configmaps", "nodes", "namespaces"])]))
    other = f"t-{uuid.uuid4().hex[:10]}"
    # A Namespace is judged by its own labels: this one has none.
    server.request("POST", "/api/v1/namespaces", {"metadata": {"name": other}}, expect=201)
    server.request("POST", f"/api/v1/namespaces/{other}/pods", pod("x"), expect=201)
    assert hooks.seen("/seen") == []
    labelled = f"t-{uuid.uuid4().hex[:10]}"
    server.request("POST", "/api/v1/namespaces", {"metadata": {"name": labelled, "labels": {"webhooks": "on"}}},
                   expect=201)
    server.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "cm"}}, expect=201)
    # Cluster-scoped objects ignore the namespaceSelector.
    server.request("POST", "/api/v1/nodes", {"metadata": {"name": f"node-{uuid.uuid4().hex[:6]}"}}, expect=201)
    seen = hooks.seen("/seen")
    assert [(r["resource"]["resource"], r.get("namespace", "")) for r in seen] == [
        ("namespaces", labelled), ("configmaps", ns), ("nodes", "")]


def test_rules_match_operations_and_subresources(server, hooks, ns, client):
    configure(server, False, "rules",
              webhook("status.example.com", url_config(hooks, "/status"), [rule(["UPDATE"], ["pods/status"])]),
              webhook("any-status.example.com", url_config(hooks, "/any-status"), [rule(["*"], ["*/status"])]),
              webhook("main.example.com", url_config(hooks, "/main"), [rule(["UPDATE"], ["pods"])]),
              webhook("all.example.com", url_config(hooks, "/all"), [rule(["*"], ["*/*"], scope="Namespaced")]))
    client.create(pod("r"), namespace=ns)
    client.patch("Pod", "r", {"status": {"phase": "Running"}}, namespace=ns, subresource="status")
    client.patch("Pod", "r", {"metadata": {"labels": {"a": "b"}}}, namespace=ns)
    status = hooks.seen("/status")
    assert [(r["operation"], r["subResource"]) for r in status] == [("UPDATE", "status")]
    assert status[0]["object"]["status"]["phase"] == "Running"
    assert status[0]["oldObject"]["status"]["phase"] == "Pending"
    assert status[0]["options"]["kind"] == "UpdateOptions"
    assert len(hooks.seen("/any-status")) == 1
    assert [r.get("subResource") for r in hooks.seen("/main")] == [None]
    assert [(r["operation"], r.get("subResource")) for r in hooks.seen("/all")] == [
        ("CREATE", None), ("UPDATE", "status"), ("UPDATE", None)]


def test_delete_reaches_validating_webhooks_with_the_old_object(server, hooks, ns, client):
    hooks.handlers["/delete"] = lambda req: (
        {"allowed": False, "status": {"message": "protected"}}
        if req["oldObject"]["metadata"].get("labels", {}).get("protected") else {"allowed": True})
    configure(server, False, "deletes", webhook("delete.example.com", url_config(hooks, "/delete"),
                                                [rule(["DELETE"], ["configmaps"])]))
    for name, labels in (("keep", {"protected": "yes"}), ("drop", {})):
        client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}},
                      namespace=ns)
    code, body, _ = server.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/keep")
    assert (code, body["message"]) == (400, 'admission webhook "delete.example.com" denied the request: protected')
    server.request("GET", f"/api/v1/namespaces/{ns}/configmaps/keep", expect=200)
    server.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps/drop", expect=200)
    req = hooks.seen("/delete")[-1]
    assert (req["operation"], req["name"], req["object"]) == ("DELETE", "drop", None)
    assert req["oldObject"]["metadata"]["name"] == "drop"
    assert req["options"]["kind"] == "DeleteOptions"
    # deletecollection asks about every object.
    code, _, _ = server.request("DELETE", f"/api/v1/namespaces/{ns}/configmaps")
    assert code == 400
    server.request("GET", f"/api/v1/namespaces/{ns}/configmaps/keep", expect=200)


def test_dry_run_needs_side_effect_free_webhooks(server, hooks, ns):
    configure(server, False, "dry",
              webhook("pure.example.com", url_config(hooks, "/pure"), [rule(["CREATE"], ["configmaps"])]),
              webhook("effects.example.com", url_config(hooks, "/effects"), [rule(["CREATE"], ["configmaps"])],
                      sideEffects="NoneOnDryRun", objectSelector={"matchLabels": {"effects": "yes"}}))
    server.request("POST", f"/api/v1/namespaces/{ns}/configmaps?dryRun=All", {"metadata": {"name": "d"}},
                   expect=201)
    assert [r["dryRun"] for r in hooks.seen("/pure")] == [True]
    assert hooks.seen("/pure")[0]["options"]["dryRun"] == ["All"]
    server.request("GET", f"/api/v1/namespaces/{ns}/configmaps/d", expect=404)
    server.request("POST", f"/api/v1/namespaces/{ns}/configmaps?dryRun=All",
                   {"metadata": {"name": "e", "labels": {"effects": "yes"}}}, expect=201)
    assert len(hooks.seen("/effects")) == 1
    # sideEffects cannot be Some/Unknown in v1, so a dry run is refused only for configurations
    # stored before that rule; the v1 validation refuses them outright.
    code, body, _ = server.request("POST", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", {
        "metadata": {"name": "bad"}, "webhooks": [{**webhook("x.example.com", url_config(hooks, "/x"), []),
                                                  "sideEffects": "Some"}]})
    assert code == 422
    assert body["message"] == ('ValidatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: '
                               'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", '
                               '"NoneOnDryRun"')


def test_service_client_config_resolves_endpoints_and_verifies_the_service_name(server, hooks, ns, client):
    for name in (SERVICE_NAME, "other"):
        client.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
                       "spec": {"ports": [{"name": "https", "port": 443, "targetPort": 9443}]}},
                      namespace=SERVICE_NS)
        client.create({"apiVersion": "v1", "kind": "Endpoints", "metadata": {"name": name},
                       "subsets": [{"addresses": [{"ip": "127.0.0.1"}],
                                    "ports": [{"name": "https", "port": hooks.port}]}]}, namespace=SERVICE_NS)
    try:
        svc = {"service": {"namespace": SERVICE_NS, "name": SERVICE_NAME, "path": "/svc"}, "caBundle": hooks.ca_bundle}
        configure(server, False, "svc", webhook("svc.example.com", svc, [rule(["CREATE"], ["configmaps"])]))
        server.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "a"}}, expect=201)
        assert len(hooks.seen("/svc")) == 1
        # The certificate names hooks.wh-system.svc only: another service on the same address fails TLS.
        wrong = {"service": {"namespace": SERVICE_NS, "name": "other", "path": "/svc"}, "caBundle": hooks.ca_bundle}
        configure(server, False, "wrong", webhook("wrong.example.com", wrong, [rule(["CREATE"], ["configmaps"])]))
        code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "b"}})
        assert code == 500
        assert body["message"].startswith(
            'Internal error occurred: failed calling webhook "wrong.example.com": failed to call webhook: '
            f'Post "https://other.{SERVICE_NS}.svc:443/svc?timeout=10s": tls: failed to verify certificate: x509:')
        server.request("DELETE", "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/wrong",
                       expect=200)
        client.delete("Endpoints", SERVICE_NAME, SERVICE_NS)
        code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "c"}})
        assert body["message"].endswith(
            f'Post "https://{SERVICE_NAME}.{SERVICE_NS}.svc:443/svc?timeout=10s": endpoints "{SERVICE_NAME}" not found')
    finally:
        for plural in ("services", "endpoints"):
            for name in (SERVICE_NAME, "other"):
                server.request("DELETE", f"/api/v1/namespaces/{SERVICE_NS}/{plural}/{name}")


def test_a_webhook_that_reads_the_api_server_does_not_deadlock_it(server, hooks, ns):
    def reads_back(req: Obj) -> Obj:
        # Like a real webhook with informers: it lists and gets from this API server while answering.
        conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
        try:
            conn.request("GET", f"/api/v1/namespaces/{ns}/configmaps")
            listed = json.loads(conn.getresponse().read())
            conn.request("GET", f"/api/v1/namespaces/{ns}")
            namespace = json.loads(conn.getresponse().read())
        finally:
            conn.close()
        count = len(listed["items"])
        return json_patch([{"op": "add", "path": "/data", "value": {
            "seen": str(count), "ns": namespace["metadata"]["name"]}}])

    configure(server, True, "reader", webhook("reader.example.com", url_config(hooks, "/read"),
                                              [rule(["CREATE"], ["configmaps"])], timeoutSeconds=5))
    server.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "c0"}}, expect=201)
    hooks.handlers["/read"] = reads_back
    _, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "c1"}},
                                expect=201)
    assert body["data"] == {"seen": "1", "ns": ns}


def _blocking(ws: WebhookServer, path: str) -> tuple[threading.Event, threading.Event]:
    """The first call to ``path`` waits for ``proceed``; later calls answer at once."""
    in_call, proceed = threading.Event(), threading.Event()
    first = [True]

    def handler(req: Obj) -> Obj:
        with ws.lock:
            block, first[0] = first[0], False
        if block:
            in_call.set()
            proceed.wait(10)
        return {"allowed": True}

    ws.handlers[path] = handler
    return in_call, proceed


def test_updates_racing_a_webhook_call(server, hooks, ns, client):
    configure(server, False, "race", webhook("race.example.com", url_config(hooks, "/race"),
                                             [rule(["UPDATE"], ["configmaps"])]))
    cm = client.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}, "data": {"a": "1"}},
                       namespace=ns)

    # A PUT carrying the resourceVersion it read: the object changed during the call -> Conflict.
    in_call, proceed = _blocking(hooks, "/race")
    results: list[Any] = []
    writer = threading.Thread(target=lambda: results.append(_try(lambda: client.update({**cm, "data": {"a": "put"}}))))
    writer.start()
    try:
        assert in_call.wait(10)
        client.patch("ConfigMap", "cm", {"data": {"b": "2"}}, namespace=ns)  # proceeds while the PUT waits
    finally:
        proceed.set()
        writer.join(20)
    assert isinstance(results[0], Conflict)
    assert client.get("ConfigMap", "cm", ns)["data"] == {"a": "1", "b": "2"}

    # A PATCH is recomputed from the current object instead.
    in_call, proceed = _blocking(hooks, "/race")
    results.clear()
    writer = threading.Thread(target=lambda: results.append(_try(
        lambda: client.patch("ConfigMap", "cm", {"data": {"c": "3"}}, namespace=ns))))
    writer.start()
    try:
        assert in_call.wait(10)
        client.patch("ConfigMap", "cm", {"data": {"d": "4"}}, namespace=ns)
    finally:
        proceed.set()
        writer.join(20)
    assert results[0]["data"] == {"a": "1", "b": "2", "c": "3", "d": "4"}
    wait_until(lambda: client.get("ConfigMap", "cm", ns)["data"].get("c") == "3", message="patch stored")


def _try(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as exc:  # the test inspects what the writer thread got
        return exc


def test_binding_subresource_reaches_webhooks(server, hooks, ns, client):
    hooks.handlers["/bind"] = lambda req: {"allowed": req["object"]["target"]["name"] != "forbidden-node",
                                           "status": {"message": "not that node"}}
    configure(server, False, "bind", webhook("bind.example.com", url_config(hooks, "/bind"),
                                             [rule(["CREATE"], ["pods/binding"])]))
    client.create(pod("b"), namespace=ns)
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"},
               "target": {"kind": "Node", "name": "forbidden-node"}}
    code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/pods/b/binding", binding)
    assert (code, body["message"]) == (400, 'admission webhook "bind.example.com" denied the request: not that node')
    binding["target"]["name"] = "node-1"
    server.request("POST", f"/api/v1/namespaces/{ns}/pods/b/binding", binding, expect=201)
    req = hooks.seen("/bind")[-1]
    assert (req["kind"]["kind"], req["resource"]["resource"], req["subResource"]) == ("Binding", "pods", "binding")
    assert client.get("Pod", "b", ns)["spec"]["nodeName"] == "node-1"


def test_webhook_configurations_are_defaulted_validated_and_exempt(server, hooks, ns):
    body = configure(server, True, "defaults", {
        "name": "defaults.example.com", "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "clientConfig": {"service": {"namespace": "x", "name": "y"}},
        "rules": [rule(["CREATE"], ["pods"])]})
    hook = body["webhooks"][0]
    assert (hook["failurePolicy"], hook["matchPolicy"], hook["timeoutSeconds"], hook["reinvocationPolicy"]) == (
        "Fail", "Equivalent", 10, "Never")
    assert hook["namespaceSelector"] == {} and hook["objectSelector"] == {}
    assert hook["clientConfig"]["service"]["port"] == 443 and hook["rules"][0]["scope"] == "*"
    code, body, _ = server.request("POST", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations", {
        "metadata": {"name": "bad"}, "webhooks": [
            {"name": "short.name", "clientConfig": {}, "admissionReviewVersions": ["v2"], "timeoutSeconds": 31},
            {"name": "short.name", "sideEffects": "None", "admissionReviewVersions": ["v1"],
             "clientConfig": {"url": "http://host/path"}}]})
    assert code == 422
    assert body["message"] == (
        'MutatingWebhookConfiguration.admissionregistration.k8s.io "bad" is invalid: ['
        'webhooks[0].name: Invalid value: "short.name": should be a domain with at least three segments separated '
        'by dots, webhooks[0].sideEffects: Required value: must specify one of None, NoneOnDryRun, '
        'webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds, '
        'webhooks[0].admissionReviewVersions: Invalid value: []string{"v2"}: must include at least one of v1, '
        'v1beta1, webhooks[0].clientConfig: Required value: exactly one of url or service is required, '
        'webhooks[1].name: Invalid value: "short.name": should be a domain with at least three segments separated '
        'by dots, webhooks[1].clientConfig.url: Invalid value: "http": \'https\' is the only allowed URL scheme, '
        'webhooks[1].name: Duplicate value: "short.name"]')
    # The "defaults" webhook points at a service that does not exist and fails closed, yet
    # webhook configurations themselves are never sent to webhooks: it can still be removed.
    code, _, _ = server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("blocked"))
    assert code == 500
    server.request("DELETE", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/defaults",
                   expect=200)
    server.request("POST", f"/api/v1/namespaces/{ns}/pods", pod("free"), expect=201)
