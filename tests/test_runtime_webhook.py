"""The admission webhook server (koordinator.runtime.webhook): JSON patches, responses, errors, TLS reload, metrics."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import logging
import os
import random
import socket
import ssl
import threading

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from prometheus_client import CollectorRegistry

from koordinator.apiserver.patch import apply_json_patch
from koordinator.runtime.webhook import (AdmissionResponse, WebhookServer, allowed, denied, errored,
                                         json_patch)
from tests.waiting import wait_until

# -- json_patch -------------------------------------------------------------------------------


def roundtrip(old, new):
    ops = json_patch(old, new)
    assert apply_json_patch(old, ops) == new, ops
    return ops


def test_json_patch_equal_documents_give_no_operations():
    doc = {"a": 1, "b": {"c": [1, 2, {"d": None}]}, "e": "x"}
    assert json_patch(doc, json.loads(json.dumps(doc))) == []
    # JSON numbers: 1 and 1.0 are the same value.
    assert json_patch({"n": 1}, {"n": 1.0}) == []


def test_json_patch_escapes_label_keys():
    old = {"metadata": {"labels": {"app": "x"}}}
    new = {"metadata": {"labels": {"app": "x", "koordinator.sh/qosClass": "BE", "a~b/c": "1"}}}
    ops = roundtrip(old, new)
    # RFC 6901: "/" -> "~1", "~" -> "~0" (the "~" first).
    assert ops == [
        {"op": "add", "path": "/metadata/labels/koordinator.sh~1qosClass", "value": "BE"},
        {"op": "add", "path": "/metadata/labels/a~0b~1c", "value": "1"},
    ]


def test_json_patch_nested_add_of_a_missing_map():
    old = {"metadata": {"name": "p"}, "spec": {}}
    new = {"metadata": {"name": "p", "labels": {"koordinator.sh/priority-class": "koord-batch"}},
           "spec": {"priority": 5000}}
    ops = roundtrip(old, new)
    assert ops == [
        {"op": "add", "path": "/metadata/labels", "value": {"koordinator.sh/priority-class": "koord-batch"}},
        {"op": "add", "path": "/spec/priority", "value": 5000},
    ]


def test_json_patch_removes_and_replaces():
    old = {"a": 1, "b": "x", "c": {"d": 1, "e~/": 2}, "t": True}
    new = {"b": "y", "c": {"d": 1}, "t": 1}
    ops = roundtrip(old, new)
    assert ops == [
        {"op": "remove", "path": "/a"},
        {"op": "replace", "path": "/b", "value": "y"},
        {"op": "remove", "path": "/c/e~0~1"},
        # true and 1 are different JSON values.
        {"op": "replace", "path": "/t", "value": 1},
    ]


def test_json_patch_arrays():
    # Same length: element by element.
    assert roundtrip({"l": [1, {"x": 1}, 3]}, {"l": [1, {"x": 2}, 3]}) == [
        {"op": "replace", "path": "/l/1/x", "value": 2}]
    # Appended: adds at the new indices.
    assert roundtrip({"l": [1]}, {"l": [1, 2, 3]}) == [
        {"op": "add", "path": "/l/1", "value": 2}, {"op": "add", "path": "/l/2", "value": 3}]
    # Truncated: removes from the end first, so every index is valid when applied.
    assert roundtrip({"l": [1, 2, 3]}, {"l": [1]}) == [
        {"op": "remove", "path": "/l/2"}, {"op": "remove", "path": "/l/1"}]
    # Neither: the whole array.
    assert roundtrip({"l": [1, 2, 3]}, {"l": [0, 1]}) == [{"op": "replace", "path": "/l", "value": [0, 1]}]
    # Type change at a key.
    assert roundtrip({"l": [1]}, {"l": {"a": 1}}) == [{"op": "replace", "path": "/l", "value": {"a": 1}}]


def test_json_patch_values_are_copies():
    new = {"spec": {"tolerations": [{"key": "k"}]}}
    ops = json_patch({"spec": {}}, new)
    new["spec"]["tolerations"][0]["key"] = "changed"
    assert ops == [{"op": "add", "path": "/spec/tolerations", "value": [{"key": "k"}]}]


def test_json_patch_pod_mutation_roundtrip():
    pod = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"}, "annotations": {}},
        "spec": {"schedulerName": "default-scheduler", "containers": [
            {"name": "c", "resources": {"requests": {"cpu": "1", "memory": "1Gi"},
                                        "limits": {"cpu": "1", "memory": "1Gi"}}}]},
    }
    mutated = json.loads(json.dumps(pod))
    mutated["metadata"]["labels"]["koordinator.sh/qosClass"] = "BE"
    mutated["metadata"]["annotations"]["koordinator.sh/resource-spec"] = '{"preferredCPUBindPolicy":"Default"}'
    mutated["spec"]["schedulerName"] = "koord-scheduler"
    mutated["spec"]["priority"] = 5500
    c = mutated["spec"]["containers"][0]["resources"]
    c["requests"] = {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "1Gi"}
    c["limits"] = {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "1Gi"}
    mutated["spec"]["tolerations"] = [{"key": "koordinator.sh/be", "operator": "Exists"}]
    roundtrip(pod, mutated)


def _random_value(rng: random.Random, depth: int):
    choice = rng.randrange(7 if depth < 3 else 4)
    if choice == 0:
        return rng.randrange(4)
    if choice == 1:
        return rng.choice(["a", "b", "c/d", "e~f"])
    if choice == 2:
        return rng.choice([True, False, None])
    if choice == 3:
        return rng.random()
    if choice in (4, 5):
        return {rng.choice(["k", "a/b", "~", "x~1", "koordinator.sh/q"]): _random_value(rng, depth + 1)
                for _ in range(rng.randrange(4))}
    return [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]


def test_json_patch_random_roundtrips():
    # A fixed seed: random documents (with keys that need escaping) and random edits of them.
    rng = random.Random(20240501)
    for _ in range(500):
        old = {"root": _random_value(rng, 0), "other": _random_value(rng, 0)}
        new = {"root": _random_value(rng, 0), "other": old["other"]}
        roundtrip(old, new)


# -- the server -------------------------------------------------------------------------------


def write_cert(directory, common_name: str = "webhook", *, key_pem: bytes | None = None) -> bytes:
    """A self-signed serving certificate for 127.0.0.1 in ``directory`` (tls.crt/tls.key); its DER."""
    key = serialization.load_pem_private_key(key_pem, None) if key_pem else ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
            .sign(key, hashes.SHA256()))
    os.makedirs(directory, exist_ok=True)
    if key_pem is None:
        _replace(os.path.join(directory, "tls.key"), key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    _replace(os.path.join(directory, "tls.crt"), cert.public_bytes(serialization.Encoding.PEM))
    return cert.public_bytes(serialization.Encoding.DER)


def _replace(path, data: bytes) -> None:
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)


def _client_context() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def request(server: WebhookServer, path: str, body, *, method: str = "POST",
            content_type: str | None = "application/json") -> tuple[int, dict | str]:
    conn = http.client.HTTPSConnection(*server.address, context=_client_context(), timeout=10)
    try:
        data = body if isinstance(body, bytes) else json.dumps(body).encode() if body is not None else None
        headers = {"Content-Type": content_type} if content_type else {}
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read().decode()
        try:
            return resp.status, json.loads(raw)
        except ValueError:
            return resp.status, raw
    finally:
        conn.close()


def peer_cert(server: WebhookServer) -> bytes:
    with socket.create_connection(server.address, timeout=5) as raw:
        with _client_context().wrap_socket(raw) as tls:
            return tls.getpeercert(binary_form=True)


def review(obj=None, *, uid="u-1", api_version="admission.k8s.io/v1", operation="CREATE") -> dict:
    return {"apiVersion": api_version, "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "namespace": "ns", "name": "p", "operation": operation,
                        "object": obj if obj is not None else {"metadata": {"name": "p"}}}}


@pytest.fixture
def certdir(tmp_path):
    directory = tmp_path / "certs"
    write_cert(str(directory))
    return str(directory)


@pytest.fixture
def registry():
    return CollectorRegistry()


@pytest.fixture
def server(certdir, registry):
    srv = WebhookServer("127.0.0.1:0", certdir, registry=registry)
    srv.register("/allow", lambda req: allowed(warnings=["w1"]))
    srv.register("/deny", lambda req: denied("spec.x: Forbidden: no"))
    srv.register("/error", lambda req: errored(400, "cannot decode object"))

    def mutate(req):
        obj = json.loads(json.dumps(req["object"]))
        obj.setdefault("metadata", {}).setdefault("labels", {})["koordinator.sh/qosClass"] = "BE"
        return AdmissionResponse(patched=obj)

    srv.register("/mutate", mutate, mutating=True)
    srv.register("/mutate-noop", lambda req: AdmissionResponse(patched=req["object"]), mutating=True)
    srv.register("/validate-patched", lambda req: AdmissionResponse(patched={"x": 1}))

    def boom(req):
        raise RuntimeError("lister failed")

    srv.register("/boom", boom)
    srv.register("/bad-return", lambda req: {"allowed": True})
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(5)


def test_allowed_response(server):
    status, body = request(server, "/allow", review(uid="abc"))
    assert status == 200
    assert body == {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                    "response": {"uid": "abc", "allowed": True, "status": {"code": 200}, "warnings": ["w1"]}}


def test_denied_and_errored_responses(server):
    _, body = request(server, "/deny", review())
    assert body["response"] == {"uid": "u-1", "allowed": False,
                                "status": {"code": 403, "reason": "Forbidden", "message": "spec.x: Forbidden: no"}}
    _, body = request(server, "/error", review())
    # controller-runtime's Errored: a code and a message, no reason.
    assert body["response"] == {"uid": "u-1", "allowed": False,
                                "status": {"code": 400, "message": "cannot decode object"}}


def test_mutating_handler_answers_with_a_json_patch(server):
    pod = {"metadata": {"name": "p", "labels": {"app": "x"}}}
    status, body = request(server, "/mutate", review(pod))
    assert status == 200
    resp = body["response"]
    assert resp["allowed"] is True and resp["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(resp["patch"]))
    assert ops == [{"op": "add", "path": "/metadata/labels/koordinator.sh~1qosClass", "value": "BE"}]
    assert apply_json_patch(pod, ops)["metadata"]["labels"] == {"app": "x", "koordinator.sh/qosClass": "BE"}
    # Nothing changed: no patch at all.
    _, body = request(server, "/mutate-noop", review(pod))
    assert "patch" not in body["response"] and "patchType" not in body["response"]
    # A validating handler's patched object is ignored.
    _, body = request(server, "/validate-patched", review(pod))
    assert "patch" not in body["response"] and body["response"]["allowed"] is True


def test_v1beta1_is_answered_in_kind(server):
    _, body = request(server, "/allow", review(api_version="admission.k8s.io/v1beta1"))
    assert body["apiVersion"] == "admission.k8s.io/v1beta1" and body["response"]["allowed"] is True


def test_handler_exception_is_an_errored_500_and_the_server_lives_on(server, caplog):
    with caplog.at_level(logging.ERROR, logger="koordinator.runtime.webhook"):
        status, body = request(server, "/boom", review(uid="x"))
    assert status == 200
    assert body["response"] == {"uid": "x", "allowed": False, "status": {"code": 500, "message": "lister failed"}}
    assert any(r.exc_info and "lister failed" in str(r.exc_info[1]) for r in caplog.records)
    _, body = request(server, "/bad-return", review())
    status = body["response"]["status"]
    assert status["code"] == 500 and "not an AdmissionResponse" in status["message"]
    assert request(server, "/allow", review())[0] == 200


def test_request_errors(server):
    status, body = request(server, "/nowhere", review())
    assert status == 404 and "404 page not found" in body
    status, body = request(server, "/allow", None, method="GET")
    assert status == 405 and body["response"]["status"]["code"] == 405
    status, body = request(server, "/allow", review(), content_type="text/plain")
    assert status == 415 and "expected application/json" in body["response"]["status"]["message"]
    status, body = request(server, "/allow", b"{not json")
    assert status == 400 and body["response"]["allowed"] is False
    assert body["response"]["status"]["message"].startswith("unable to decode the request")
    status, body = request(server, "/allow", b"")
    assert status == 400 and body["response"]["status"]["message"] == "request body is empty"
    status, body = request(server, "/allow", {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})
    assert status == 400 and body["response"]["status"]["message"] == "got an empty AdmissionRequest"
    status, body = request(server, "/allow", {"apiVersion": "v1", "kind": "Pod", "request": {"uid": "q"}})
    assert status == 400 and "expected an AdmissionReview" in body["response"]["status"]["message"]
    status, body = request(server, "/allow", [1, 2])
    assert status == 400


def test_keep_alive_connection_serves_several_requests(server):
    conn = http.client.HTTPSConnection(*server.address, context=_client_context(), timeout=10)
    try:
        for uid in ("a", "b", "c"):
            conn.request("POST", "/allow", body=json.dumps(review(uid=uid)),
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            assert json.loads(resp.read())["response"]["uid"] == uid
    finally:
        conn.close()


def test_metrics(server, registry):
    request(server, "/allow", review())
    request(server, "/allow", review())
    request(server, "/allow", None, method="GET")
    request(server, "/boom", review())
    value = registry.get_sample_value
    assert value("controller_runtime_webhook_requests_total", {"webhook": "/allow", "code": "200"}) == 2
    assert value("controller_runtime_webhook_requests_total", {"webhook": "/allow", "code": "405"}) == 1
    assert value("controller_runtime_webhook_requests_total", {"webhook": "/boom", "code": "200"}) == 1
    assert value("controller_runtime_webhook_latency_seconds_count", {"webhook": "/allow"}) == 3
    assert value("controller_runtime_webhook_requests_in_flight", {"webhook": "/allow"}) == 0
    # A second server on the same registry shares the families instead of failing to register them.
    WebhookServer("127.0.0.1:0", server.cert_dir, registry=registry)


def test_register_rejects_bad_input(server):
    with pytest.raises(ValueError, match="must start with '/'"):
        server.register("allow", lambda r: allowed())
    with pytest.raises(ValueError, match="already registered"):
        server.register("/allow", lambda r: allowed())
    with pytest.raises(ValueError, match="invalid webhook address"):
        WebhookServer("0", "/tmp")
    with pytest.raises(ValueError, match="port"):
        WebhookServer("127.0.0.1:x", "/tmp")


def test_start_without_certificate_files_names_the_path(tmp_path):
    srv = WebhookServer("127.0.0.1:0", str(tmp_path / "none"))
    with pytest.raises(FileNotFoundError, match=r"none/tls\.crt"):
        srv.start()
    assert srv.ready() == "webhook-server is not started"


def test_ready(server):
    assert server.ready() is None
    server.stop(5)
    assert server.ready() is not None


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion.TLSv1_1 is deprecated:DeprecationWarning")
def test_tls_1_1_is_refused(server):
    ctx = _client_context()
    ctx.minimum_version = ssl.TLSVersion.MINIMUM_SUPPORTED
    ctx.maximum_version = ssl.TLSVersion.TLSv1_1
    with socket.create_connection(server.address, timeout=5) as raw:
        with pytest.raises((ssl.SSLError, OSError)):
            with ctx.wrap_socket(raw) as tls:
                tls.do_handshake()
    assert server.ready() is None


def test_rotated_certificate_is_served_without_restart(server, certdir):
    first = peer_cert(server)
    write_cert(certdir, "rotated")  # a new key and certificate, each renamed into place
    second = wait_until(lambda: (c := peer_cert(server)) != first and c, message="the new certificate")
    assert x509.load_der_x509_certificate(second).subject.rfc4514_string() == "CN=rotated"
    # A certificate whose key is elsewhere: it does not load, the previous one is kept.
    other_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "orphan")])
    now = datetime.datetime.now(datetime.timezone.utc)
    orphan = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(other_key.public_key())
              .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
              .sign(other_key, hashes.SHA256()))
    _replace(os.path.join(certdir, "tls.crt"), orphan.public_bytes(serialization.Encoding.PEM))
    assert peer_cert(server) == second
    assert request(server, "/allow", review())[0] == 200
    # The matching key arrives: served.
    _replace(os.path.join(certdir, "tls.key"), other_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    third = wait_until(lambda: (c := peer_cert(server)) != second and c, message="the orphan certificate")
    assert x509.load_der_x509_certificate(third).subject.rfc4514_string() == "CN=orphan"


def test_stop_closes_idle_keep_alive_connections(certdir):
    srv = WebhookServer("127.0.0.1:0", certdir)
    srv.register("/allow", lambda r: allowed())
    srv.start()
    conn = http.client.HTTPSConnection(*srv.address, context=_client_context(), timeout=10)
    try:
        conn.request("POST", "/allow", body=json.dumps(review()), headers={"Content-Type": "application/json"})
        assert conn.getresponse().read()
        threads = [t for t in threading.enumerate() if t.name == "webhook-server-conn"]
        assert threads
        address = srv.address
        srv.stop(5)
        for t in threads:
            assert not t.is_alive()
        with pytest.raises(OSError):
            socket.create_connection(address, timeout=1).close()
    finally:
        conn.close()
        srv.stop(1)
