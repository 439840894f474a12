"""Self-managed webhook certificates (koordinator_roles.manager.certs) against the embedded API server."""

from __future__ import annotations

import base64
import datetime
import http.client
import json
import os
import socket
import ssl
import threading
import uuid

import pytest
from cryptography import x509

from koordinator.runtime import errors
from koordinator.runtime.webhook import WebhookServer, allowed
from koordinator_roles.manager.certs import (CA_CERT, CA_KEY, SERVER_CERT, SERVER_CERT2, SERVER_KEY, SERVER_KEY2, Artifacts,
                                             CertConfig, CertError, CertManager, serving_problem)
from tests.waiting import wait_until

NS = "koordinator-system"
SVC_HOST = "koordinator-webhook-service.koordinator-system.svc"


@pytest.fixture
def system_ns(client):
    try:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    except errors.AlreadyExists:
        pass
    return NS


def _webhook(name: str, client_config: dict) -> dict:
    # Rules that match nothing and Ignore: harmless to every other test sharing the server.
    return {"name": name, "clientConfig": client_config, "failurePolicy": "Ignore", "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "rules": [{"apiGroups": ["nothing.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["nothings"]}]}


@pytest.fixture
def cfg(client, system_ns, tmp_path):
    """A config of the test's own (Secret and configuration names), with both configurations created."""
    suffix = uuid.uuid4().hex[:8]
    config = CertConfig.from_env({}, cert_dir=str(tmp_path / "certs"), secret_name=f"certs-{suffix}",
                                 mutating_webhook_name=f"mutating-{suffix}",
                                 validating_webhook_name=f"validating-{suffix}",
                                 extra_hosts=["127.0.0.1", "localhost"])
    client.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                   "metadata": {"name": config.mutating_webhook_name},
                   "webhooks": [_webhook("m1.koordinator.sh", {"url": "https://127.0.0.1:1/mutate-pod"}),
                                _webhook("m2.koordinator.sh", {"service": {"name": config.service_name,
                                                                           "namespace": NS, "path": "/x"}})]})
    client.create({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                   "metadata": {"name": config.validating_webhook_name},
                   "webhooks": [_webhook("v1.koordinator.sh", {"url": "https://127.0.0.1:1/validate-pod",
                                                               "caBundle": base64.b64encode(b"old").decode()})]})
    yield config
    for kind, name in (("MutatingWebhookConfiguration", config.mutating_webhook_name),
                       ("ValidatingWebhookConfiguration", config.validating_webhook_name),
                       ("Secret", config.secret_name)):
        try:
            client.delete(kind, name, NS if kind == "Secret" else None)
        except errors.NotFound:
            pass


def secret_artifacts(client, config) -> Artifacts:
    a = Artifacts.from_secret(client.get("Secret", config.secret_name, NS))
    assert a is not None
    return a


def bundles(client, config) -> list[str]:
    out = []
    for kind, name in (("MutatingWebhookConfiguration", config.mutating_webhook_name),
                       ("ValidatingWebhookConfiguration", config.validating_webhook_name)):
        out += [w["clientConfig"].get("caBundle") for w in client.get(kind, name)["webhooks"]]
    return out


def read(config, name) -> bytes:
    with open(os.path.join(config.cert_dir, name), "rb") as f:
        return f.read()


def rv(client, kind, name, ns=None) -> str:
    return client.get(kind, name, ns)["metadata"]["resourceVersion"]


# -- configuration ------------------------------------------------------------------------------


def test_config_defaults_and_environment():
    c = CertConfig.from_env({})
    assert (c.cert_dir, c.secret_name, c.namespace, c.service_name, c.mutating_webhook_name,
            c.validating_webhook_name, c.extra_hosts) == (
        "/tmp/koordinator-webhook-certs", "koordinator-webhook-certs", "koordinator-system",
        "koordinator-webhook-service", "koordinator-mutating-webhook-configuration",
        "koordinator-validating-webhook-configuration", [])
    assert c.hosts() == ["koordinator-webhook-service", "koordinator-webhook-service.koordinator-system",
                         SVC_HOST, SVC_HOST + ".cluster.local"]
    env = {"WEBHOOK_CERT_DIR": "/d", "SECRET_NAME": "s", "POD_NAMESPACE": "ns1", "SERVICE_NAME": "svc",
           "MUTATING_WEBHOOK_NAME": "m", "VALIDATING_WEBHOOK_NAME": "v", "SECRET_UNUSED": "x"}
    c = CertConfig.from_env(env, extra_hosts=["127.0.0.1", "localhost", "localhost"])
    assert (c.cert_dir, c.secret_name, c.namespace, c.service_name, c.mutating_webhook_name,
            c.validating_webhook_name) == ("/d", "s", "ns1", "svc", "m", "v")
    assert c.hosts() == ["svc", "svc.ns1", "svc.ns1.svc", "svc.ns1.svc.cluster.local", "127.0.0.1", "localhost"]
    # Empty variables count as unset (Koordinator reads them with len(v) > 0); overrides win.
    assert CertConfig.from_env({"POD_NAMESPACE": ""}).namespace == "koordinator-system"
    assert CertConfig.from_env({"POD_NAMESPACE": "a"}, namespace="b").namespace == "b"


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match=r"namespace \(POD_NAMESPACE\) 'Bad_NS' is not a DNS-1123 label"):
        CertConfig.from_env({"POD_NAMESPACE": "Bad_NS"})
    with pytest.raises(ValueError, match="extra_hosts entry 'no host' is not a DNS name or IP address"):
        CertConfig(extra_hosts=["no host"])
    with pytest.raises(ValueError, match="secret_name"):
        CertConfig(secret_name="")
    with pytest.raises(TypeError, match="no field"):
        CertConfig.from_env({}, bogus=1)


# -- ensure ------------------------------------------------------------------------------------


def test_bootstrap_from_nothing(client, cfg):
    CertManager(client, cfg).ensure()
    secret = client.get("Secret", cfg.secret_name, NS)
    assert set(secret["data"]) == {CA_CERT, CA_KEY, SERVER_CERT, SERVER_KEY, SERVER_CERT2, SERVER_KEY2}
    a = secret_artifacts(client, cfg)
    assert base64.b64decode(secret["data"][SERVER_CERT2]) == a.cert
    assert serving_problem(a, cfg.hosts()) is None
    cert = x509.load_pem_x509_certificate(a.cert)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {
        "koordinator-webhook-service", "koordinator-webhook-service.koordinator-system", SVC_HOST,
        SVC_HOST + ".cluster.local", "localhost"}
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    # Serving certificate about a year, CA about ten (both backdated one hour).
    days = (cert.not_valid_after_utc - cert.not_valid_before_utc).days
    assert days == 365
    ca = x509.load_pem_x509_certificate(a.ca_cert)
    assert (ca.not_valid_after_utc - ca.not_valid_before_utc).days == 3650
    assert (read(cfg, "tls.crt"), read(cfg, "tls.key"), read(cfg, "ca.crt")) == (a.cert, a.key, a.ca_cert)
    assert os.stat(os.path.join(cfg.cert_dir, "tls.key")).st_mode & 0o777 == 0o600
    assert bundles(client, cfg) == [base64.b64encode(a.ca_cert).decode()] * 3
    # The rest of the configurations is untouched.
    hooks = client.get("MutatingWebhookConfiguration", cfg.mutating_webhook_name)["webhooks"]
    assert hooks[0]["clientConfig"]["url"] == "https://127.0.0.1:1/mutate-pod"
    assert hooks[1]["clientConfig"]["service"]["path"] == "/x"


def test_second_replica_reuses_the_secret(client, cfg, tmp_path):
    first = CertManager(client, cfg)
    first.ensure()
    a = secret_artifacts(client, cfg)
    versions = (rv(client, "Secret", cfg.secret_name, NS),
                rv(client, "MutatingWebhookConfiguration", cfg.mutating_webhook_name),
                rv(client, "ValidatingWebhookConfiguration", cfg.validating_webhook_name))
    stat = os.stat(os.path.join(cfg.cert_dir, "tls.crt"))
    other_cfg = CertConfig(**{**cfg.__dict__, "cert_dir": str(tmp_path / "replica2")})
    CertManager(client, other_cfg).ensure()
    first.ensure()
    # Nothing written anywhere: same Secret, same configurations, same files (not even rewritten).
    assert (rv(client, "Secret", cfg.secret_name, NS),
            rv(client, "MutatingWebhookConfiguration", cfg.mutating_webhook_name),
            rv(client, "ValidatingWebhookConfiguration", cfg.validating_webhook_name)) == versions
    assert read(other_cfg, "tls.crt") == a.cert and read(other_cfg, "ca.crt") == a.ca_cert
    after = os.stat(os.path.join(cfg.cert_dir, "tls.crt"))
    assert (after.st_ino, after.st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)


def test_racing_replicas_end_with_the_same_certificates(client, cfg, tmp_path):
    managers = [CertManager(client, CertConfig(**{**cfg.__dict__, "cert_dir": str(tmp_path / f"r{i}")}))
                for i in range(3)]
    barrier = threading.Barrier(len(managers))
    failures = []

    def go(m):
        barrier.wait()
        try:
            m.ensure()
        except Exception as err:  # reported below
            failures.append(err)

    threads = [threading.Thread(target=go, args=(m,)) for m in managers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failures
    a = secret_artifacts(client, cfg)
    for m in managers:
        assert m.artifacts == a
        assert read(m.config, "tls.crt") == a.cert
    assert bundles(client, cfg) == [base64.b64encode(a.ca_cert).decode()] * 3


def test_expiring_serving_certificate_is_rotated_keeping_the_ca(client, cfg):
    CertManager(client, cfg, serving_validity=datetime.timedelta(days=10)).ensure()
    old = secret_artifacts(client, cfg)
    assert "expires" in serving_problem(old, cfg.hosts())
    CertManager(client, cfg).ensure()
    new = secret_artifacts(client, cfg)
    assert new.cert != old.cert and new.key != old.key
    assert (new.ca_cert, new.ca_key) == (old.ca_cert, old.ca_key)
    assert serving_problem(new, cfg.hosts()) is None
    assert read(cfg, "tls.crt") == new.cert
    assert bundles(client, cfg) == [base64.b64encode(old.ca_cert).decode()] * 3


def test_expiring_ca_is_rotated_and_the_bundles_follow(client, cfg):
    CertManager(client, cfg, ca_validity=datetime.timedelta(days=60)).ensure()
    old = secret_artifacts(client, cfg)
    CertManager(client, cfg).ensure()
    new = secret_artifacts(client, cfg)
    assert new.ca_cert != old.ca_cert and new.cert != old.cert
    assert read(cfg, "ca.crt") == new.ca_cert
    assert bundles(client, cfg) == [base64.b64encode(new.ca_cert).decode()] * 3


def test_uncovered_host_regenerates_the_serving_certificate(client, cfg):
    narrow = CertConfig(**{**cfg.__dict__, "extra_hosts": []})
    CertManager(client, narrow).ensure()
    old = secret_artifacts(client, cfg)
    assert serving_problem(old, cfg.hosts()) == "the serving certificate does not cover 127.0.0.1, localhost"
    CertManager(client, cfg).ensure()
    new = secret_artifacts(client, cfg)
    assert new.cert != old.cert and new.ca_cert == old.ca_cert
    assert serving_problem(new, cfg.hosts()) is None


@pytest.mark.parametrize("data", [
    {"ca-cert.pem": base64.b64encode(b"garbage").decode(), "ca-key.pem": base64.b64encode(b"x").decode(),
     "cert.pem": base64.b64encode(b"y").decode(), "key.pem": base64.b64encode(b"z").decode()},
    {"unrelated": base64.b64encode(b"keep me").decode()},
    None,
], ids=["garbage", "missing-keys", "no-data"])
def test_garbage_secret_is_replaced(client, cfg, data):
    body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": cfg.secret_name, "namespace": NS,
                                                               "labels": {"keep": "yes"}}}
    if data is not None:
        body["data"] = data
    client.create(body)
    CertManager(client, cfg).ensure()
    secret = client.get("Secret", cfg.secret_name, NS)
    a = Artifacts.from_secret(secret)
    assert a is not None and serving_problem(a, cfg.hosts()) is None
    assert secret["metadata"]["labels"] == {"keep": "yes"}
    if data and "unrelated" in data:
        assert secret["data"]["unrelated"] == data["unrelated"]


def test_missing_configurations_are_skipped(client, cfg):
    client.delete("MutatingWebhookConfiguration", cfg.mutating_webhook_name)
    client.delete("ValidatingWebhookConfiguration", cfg.validating_webhook_name)
    m = CertManager(client, cfg)
    m.ensure()
    assert m.ca_bundle == base64.b64encode(secret_artifacts(client, cfg).ca_cert).decode()


class _Interfering:
    """A client that edits the webhook configuration behind the manager's back before its first update,
    so the manager's update meets a real 409 Conflict from the server."""

    def __init__(self, client):
        self._client = client
        self.kinds = client.kinds
        self.conflicts = 0

    def __getattr__(self, name):
        return getattr(self._client, name)

    def update(self, obj, **kw):
        if obj["kind"] == "ValidatingWebhookConfiguration" and not self.conflicts:
            self.conflicts += 1
            fresh = self._client.get(obj["kind"], obj["metadata"]["name"])
            fresh["metadata"].setdefault("labels", {})["edited"] = "behind-your-back"
            self._client.update(fresh)
        return self._client.update(obj, **kw)


def test_conflict_on_bundle_update_is_retried_without_losing_the_other_edit(client, cfg):
    wrapped = _Interfering(client)
    CertManager(wrapped, cfg).ensure()
    assert wrapped.conflicts == 1
    obj = client.get("ValidatingWebhookConfiguration", cfg.validating_webhook_name)
    assert obj["metadata"]["labels"]["edited"] == "behind-your-back"
    assert bundles(client, cfg) == [base64.b64encode(secret_artifacts(client, cfg).ca_cert).decode()] * 3


def test_unreachable_api_server_gives_a_clear_error(cfg):
    from koordinator.runtime.client import Client
    from koordinator.runtime.kubeconfig import ClusterConfig

    conf = ClusterConfig(host="http://127.0.0.1:1")
    dead = Client(conf, qps=0, max_attempts=1)
    with pytest.raises(CertError, match="cannot write the certificate Secret after 6 attempts"):
        CertManager(dead, cfg).ensure()


# -- with the webhook server -------------------------------------------------------------------


def _verified_review(port: int, ca_file: str) -> dict:
    ctx = ssl.create_default_context(cafile=ca_file)
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "e2e", "operation": "CREATE", "object": {"metadata": {"name": "p"}}}})
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        # Connect to the loopback address, verify the name the API server would dial.
        with ctx.wrap_socket(raw, server_hostname=SVC_HOST) as tls:
            conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=5)
            conn.sock = tls
            conn.request("POST", "/validate", body=body, headers={"Content-Type": "application/json"})
            return json.loads(conn.getresponse().read())


def test_webhook_server_serves_the_managed_certificate_and_picks_up_rotation(client, cfg, tmp_path):
    m = CertManager(client, cfg)
    m.ensure()
    server = WebhookServer("127.0.0.1:0", cfg.cert_dir)
    server.register("/validate", lambda req: allowed())
    server.start()
    try:
        port = server.address[1]
        old_ca = str(tmp_path / "old-ca.crt")
        with open(old_ca, "wb") as f:
            f.write(read(cfg, "ca.crt"))
        resp = _verified_review(port, old_ca)
        assert resp["response"] == {"uid": "e2e", "allowed": True, "status": {"code": 200}}
        assert server.ready() is None
        # Rotation: the Secret is lost, a new CA and certificate are generated and written.
        client.delete("Secret", cfg.secret_name, NS)
        m.ensure()
        new_ca = os.path.join(cfg.cert_dir, "ca.crt")
        with open(old_ca, "rb") as f:
            assert read(cfg, "ca.crt") != f.read()
        wait_until(lambda: _ok(port, new_ca), message="the rotated certificate served")
        with pytest.raises(ssl.SSLCertVerificationError):
            _verified_review(port, old_ca)
    finally:
        server.stop(5)


def _ok(port: int, ca_file: str) -> bool:
    try:
        return _verified_review(port, ca_file)["response"]["allowed"] is True
    except ssl.SSLCertVerificationError:
        return False


def test_run_loop_repairs_changes_soon(client, cfg):
    m = CertManager(client, cfg)
    m.ensure()
    m.start()
    try:
        bundle = m.ca_bundle
        # Someone resets a caBundle (a re-applied manifest): repaired without waiting for the resync.
        obj = client.get("ValidatingWebhookConfiguration", cfg.validating_webhook_name)
        obj["webhooks"][0]["clientConfig"]["caBundle"] = base64.b64encode(b"stale").decode()
        client.update(obj)
        wait_until(lambda: bundles(client, cfg) == [bundle] * 3, message="the caBundle repaired")
        # The Secret is deleted: recreated, and every bundle follows the new CA.
        client.delete("Secret", cfg.secret_name, NS)

        def recreated():
            try:
                a = secret_artifacts(client, cfg)
            except errors.NotFound:
                return False
            return bundles(client, cfg) == [base64.b64encode(a.ca_cert).decode()] * 3 and \
                read(cfg, "ca.crt") == a.ca_cert
        wait_until(recreated, message="the Secret recreated")
    finally:
        assert m.stop(5)


def test_refused_write_is_not_retried_and_names_the_step(client, cfg):
    missing = CertConfig(**{**cfg.__dict__, "namespace": f"absent-{uuid.uuid4().hex[:6]}"})
    with pytest.raises(CertError, match=r"cannot write the certificate Secret: .*not found"):
        CertManager(client, missing).ensure()
