"""ServiceAccount tokens against a real ``koordinator apiserver --token-file`` process.

kubectl mints tokens through the TokenRequest subresource (``kubectl create token``) and proves
who a token authenticates as through SelfSubjectReview (``kubectl auth whoami``).
"""

from __future__ import annotations

import base64
import json
import os
import stat
import time
import uuid

import pytest

from koordinator.apiserver.authentication import USER_PREFIX, ServiceAccountTokens
from tests.apiserver_process import ApiServerProcess

ADMIN_TOKEN = "admin-" + uuid.uuid4().hex
USER_TOKEN = "alice-" + uuid.uuid4().hex
ISSUER = "https://kubernetes.default.svc"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    base = tmp_path_factory.mktemp("satokens")
    token_file = base / "tokens.csv"
    # A bare token (the admin) and a CSV user row: both must keep working beside SA tokens.
    token_file.write_text(f'{ADMIN_TOKEN}\n{USER_TOKEN},alice,u-1,"dev,ops"\n')
    proc = ApiServerProcess(base / "data", "--token-file", str(token_file)).start()
    try:
        yield proc
    finally:
        proc.stop()


def _ns(server: ApiServerProcess) -> str:
    name = "sa-" + uuid.uuid4().hex[:8]
    server.kubectl("create", "namespace", name)
    return name


def _whoami(server: ApiServerProcess, token: str) -> dict:
    out = server.kubectl("--token", token, "auth", "whoami", "-o", "json").stdout
    return json.loads(out)["status"]["userInfo"]


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _refused(server: ApiServerProcess, token: str, ns: str) -> None:
    """``token`` gets 401 for a read and for a write, and the write leaves nothing behind."""
    before = server.request("GET", f"/api/v1/namespaces/{ns}/configmaps", headers=_as(ADMIN_TOKEN), expect=200)[1]
    code, body, _ = server.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts", headers=_as(token))
    assert code == 401, body
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "refused"}}
    code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/configmaps", cm, headers=_as(token))
    assert code == 401, body
    assert server.kubectl("--token", token, "get", "pods", "-n", ns, check=False).returncode != 0
    after = server.request("GET", f"/api/v1/namespaces/{ns}/configmaps", headers=_as(ADMIN_TOKEN), expect=200)[1]
    assert after["items"] == before["items"] == []
    # No write happened: the list's resourceVersion (the store's revision) is unchanged.
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


def test_create_token_authenticates_as_the_service_account(server):
    ns = _ns(server)
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    sa = json.loads(server.kubectl("get", "sa", "robot", "-n", ns, "-o", "json").stdout)
    token = server.kubectl("create", "token", "robot", "-n", ns, "--duration=1h").stdout.strip()
    assert token.count(".") == 2
    user = _whoami(server, token)
    assert user["username"] == f"{USER_PREFIX}{ns}:robot"
    assert user["uid"] == sa["metadata"]["uid"]
    assert user["groups"] == ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"]
    # Ordinary requests get past authentication as the SA: answered (200) or, under RBAC with no
    # binding for the SA, refused by authorization (403) naming the SA's user, but never 401.
    code, body, _ = server.request("GET", f"/api/v1/namespaces/{ns}/serviceaccounts", headers=_as(token))
    assert code in (200, 403), body
    if code == 403:
        assert f'User "{USER_PREFIX}{ns}:robot"' in body["message"], body
    # The signing key is generated once per data dir, private to its owner.
    key = server.data_dir / "service-account.key"
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600


def test_static_tokens_keep_their_users(server):
    assert _whoami(server, ADMIN_TOKEN) == {"username": "system:admin",
                                            "groups": ["system:masters", "system:authenticated"]}
    assert _whoami(server, USER_TOKEN) == {"username": "alice", "uid": "u-1",
                                           "groups": ["dev", "ops", "system:authenticated"]}
    assert server.request("GET", "/api/v1/namespaces", headers=_as("nope"))[0] == 401


def test_token_request_fields_and_discovery(server):
    ns = _ns(server)
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    before = time.time()
    code, tr, _ = server.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/robot/token",
                                 {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                  "spec": {"audiences": ["api", ISSUER], "expirationSeconds": 7200}},
                                 headers=_as(ADMIN_TOKEN))
    assert code == 201, tr
    assert tr["kind"] == "TokenRequest" and tr["spec"]["audiences"] == ["api", ISSUER]
    expires = time.mktime(time.strptime(tr["status"]["expirationTimestamp"], "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert before + 7200 - 5 <= expires <= time.time() + 7200 + 5
    # A token for another audience only is not one this server accepts.
    other = server.kubectl("create", "token", "robot", "-n", ns, "--audience=vault").stdout.strip()
    assert server.request("GET", "/api/v1/namespaces", headers=_as(other))[0] == 401
    doc = server.request("GET", "/api/v1", headers=_as(ADMIN_TOKEN), expect=200)[1]
    entry = next(r for r in doc["resources"] if r["name"] == "serviceaccounts/token")
    assert entry["verbs"] == ["create"] and entry["kind"] == "TokenRequest"
    assert entry["group"] == "authentication.k8s.io"


@pytest.mark.parametrize("spec, field, status", [
    ({"expirationSeconds": 10}, "spec.expirationSeconds", 422),
    ({"expirationSeconds": "1h"}, "spec.expirationSeconds", 422),
    ({"audiences": "api"}, "spec.audiences", 422),
    ({"boundObjectRef": {"kind": "ConfigMap", "name": "x"}}, "spec.boundObjectRef.kind", 422),
])
def test_bad_token_request_is_refused_naming_the_field(server, spec, field, status):
    ns = _ns(server)
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    code, body, _ = server.request("POST", f"/api/v1/namespaces/{ns}/serviceaccounts/robot/token",
                                   {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
                                   headers=_as(ADMIN_TOKEN))
    assert code == status, body
    assert field in body["message"], body


def test_token_for_a_missing_service_account_is_404(server):
    ns = _ns(server)
    proc = server.kubectl("create", "token", "ghost", "-n", ns, check=False)
    assert proc.returncode != 0 and 'serviceaccounts "ghost" not found' in proc.stderr


def test_token_signed_by_another_key_is_401(server, tmp_path):
    ns = _ns(server)
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    uid = json.loads(server.kubectl("get", "sa", "robot", "-n", ns, "-o", "json").stdout)["metadata"]["uid"]
    # Every claim right (issuer, audience, the live SA's uid) but the signing key.
    forged, _ = ServiceAccountTokens(str(tmp_path), None).issue(ns, "robot", uid, [ISSUER], 3600)
    _refused(server, forged, ns)


def test_expired_token_is_401(server):
    ns = _ns(server)
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    # Make sure the data dir's key exists, then mint with it two hours in the past.
    server.kubectl("create", "token", "robot", "-n", ns)
    uid = json.loads(server.kubectl("get", "sa", "robot", "-n", ns, "-o", "json").stdout)["metadata"]["uid"]
    tokens = ServiceAccountTokens(str(server.data_dir), None, clock=lambda: time.time() - 7200)
    expired, exp = tokens.issue(ns, "robot", uid, [ISSUER], 3600)
    assert exp < time.time()
    _refused(server, expired, ns)
    # The same key and claims, unexpired, are accepted: the refusal was the expiry alone.
    fresh, _ = ServiceAccountTokens(str(server.data_dir), None).issue(ns, "robot", uid, [ISSUER], 3600)
    assert _whoami(server, fresh)["username"] == f"{USER_PREFIX}{ns}:robot"


def test_deleted_or_recreated_service_account_token_is_401(server):
    ns = _ns(server)
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    token = server.kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    old_uid = _whoami(server, token)["uid"]
    server.kubectl("delete", "serviceaccount", "robot", "-n", ns)
    _refused(server, token, ns)
    # A new ServiceAccount of the same name has a new uid: the old token stays refused.
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    _refused(server, token, ns)
    new = _whoami(server, server.kubectl("create", "token", "robot", "-n", ns).stdout.strip())
    assert new["username"] == f"{USER_PREFIX}{ns}:robot" and new["uid"] != old_uid


def test_without_a_token_file_tokens_are_issued_and_the_server_stays_open(tmp_path):
    proc = ApiServerProcess(tmp_path / "data", "--service-account-issuer", "https://issuer.example").start()
    try:
        sa = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "robot"}}
        proc.request("POST", "/api/v1/namespaces/default/serviceaccounts", sa, expect=201)
        tr = proc.request("POST", "/api/v1/namespaces/default/serviceaccounts/robot/token", {}, expect=201)[1]
        payload = tr["status"]["token"].split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        assert claims["iss"] == "https://issuer.example" and claims["aud"] == ["https://issuer.example"]
        assert claims["sub"] == "system:serviceaccount:default:robot" and claims["exp"] - claims["iat"] == 3600
        assert tr["spec"]["expirationSeconds"] == 3600
        # No authentication without a token file: any bearer, or none, is served as before.
        proc.request("GET", "/api/v1/namespaces", headers=_as("not-a-token"), expect=200)
        proc.request("GET", "/api/v1/namespaces", expect=200)
    finally:
        proc.stop()


def test_token_bound_to_a_pod_stops_working_with_the_pod(server):
    ns = _ns(server)
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    server.kubectl("run", "web", "-n", ns, "--image=nginx:1.27")
    token = server.kubectl("create", "token", "robot", "-n", ns, "--bound-object-kind=Pod",
                           "--bound-object-name=web").stdout.strip()
    user = _whoami(server, token)
    assert user["extra"]["authentication.kubernetes.io/pod-name"] == ["web"]
    server.kubectl("delete", "pod", "web", "-n", ns, "--wait=false")
    server.kubectl("wait", "--for=delete", "pod/web", "-n", ns, "--timeout=20s")
    _refused(server, token, ns)
    # The SA itself is untouched: a fresh, unbound token works.
    assert _whoami(server, server.kubectl("create", "token", "robot", "-n", ns).stdout.strip())["uid"] == user["uid"]
