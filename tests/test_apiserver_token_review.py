"""TokenReview and ServiceAccount issuer discovery against a real ``koordinator apiserver --token-file``.

A TokenReview answers whether a token authenticates to this server, as whom and for which
audiences, in kube-apiserver's shape and wording; issuer discovery serves the OpenID
configuration and the key set a relying party verifies ServiceAccount tokens with.
"""

from __future__ import annotations

import base64
import json
import time
import uuid

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from koordinator.apiserver.authentication import ServiceAccountTokens
from tests.apiserver_process import ApiServerProcess

ISSUER = "https://kubernetes.default.svc"
PATH = "/apis/authentication.k8s.io/v1/tokenreviews"
CONFIG = "/.well-known/openid-configuration"
JWKS = "/openid/v1/jwks"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("tokenreview")
    (root / "tokens").write_text('admintoken\nalicetoken,alice,u-alice,"devs"\ndelegatortoken,delegator,u-del\n')
    srv = ApiServerProcess(root / "data", "--token-file", str(root / "tokens")).start()
    try:
        # As a webhook authenticator or an extension API server is set up: bound to system:auth-delegator.
        srv.kubectl("create", "clusterrolebinding", "delegator", "--clusterrole=system:auth-delegator",
                    "--user=delegator")
        yield srv
    finally:
        srv.stop()


def _as(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _review(server: ApiServerProcess, token: str, audiences: list[str] | None = None,
            caller: str = "delegatortoken") -> dict:
    spec: dict = {"token": token}
    if audiences is not None:
        spec["audiences"] = audiences
    status, body, _ = server.request("POST", PATH, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                    "spec": spec}, headers=_as(caller))
    assert status == 201, body
    assert body["kind"] == "TokenReview" and body["spec"] == spec
    return body["status"]


def _service_account(server: ApiServerProcess) -> tuple[str, str]:
    ns = "tr-" + uuid.uuid4().hex[:8]
    server.kubectl("create", "namespace", ns)
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    uid = json.loads(server.kubectl("get", "sa", "robot", "-n", ns, "-o", "json").stdout)["metadata"]["uid"]
    return ns, uid


def _claims(token: str) -> dict:
    payload = token.split(".")[1]
    return json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))


def test_static_tokens(server):
    assert _review(server, "alicetoken") == {
        "authenticated": True, "audiences": [ISSUER],
        "user": {"username": "alice", "uid": "u-alice", "groups": ["devs", "system:authenticated"]}}
    # Static tokens are audience-agnostic: valid for the server's own audiences and no other.
    assert _review(server, "alicetoken", [ISSUER, "vault"])["audiences"] == [ISSUER]
    assert _review(server, "alicetoken", ["vault"]) == {"user": {}, "error": "invalid bearer token"}
    assert _review(server, "no-such-token") == {"user": {}, "error": "invalid bearer token"}


def test_service_account_token(server):
    ns, uid = _service_account(server)
    token = server.kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    status = _review(server, token)
    assert status == {"authenticated": True, "audiences": [ISSUER], "user": {
        "username": f"system:serviceaccount:{ns}:robot", "uid": uid,
        "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": [f"JTI={_claims(token)['jti']}"]}}}


def test_pod_bound_token_carries_the_pod(server):
    ns, _ = _service_account(server)
    server.kubectl("run", "web", "-n", ns, "--image=nginx:1.27")
    pod_uid = json.loads(server.kubectl("get", "pod", "web", "-n", ns, "-o", "json").stdout)["metadata"]["uid"]
    token = server.kubectl("create", "token", "robot", "-n", ns, "--bound-object-kind=Pod",
                           "--bound-object-name=web").stdout.strip()
    extra = _review(server, token)["user"]["extra"]
    assert extra["authentication.kubernetes.io/pod-name"] == ["web"]
    assert extra["authentication.kubernetes.io/pod-uid"] == [pod_uid]
    server.kubectl("delete", "pod", "web", "-n", ns, "--wait=false")
    server.kubectl("wait", "--for=delete", "pod/web", "-n", ns, "--timeout=20s")
    assert _review(server, token) == {"user": {}, "error": "[invalid bearer token, service account token has been "
                                                           "invalidated]"}


def test_audiences_must_intersect(server):
    ns, _ = _service_account(server)
    token = server.kubectl("create", "token", "robot", "-n", ns, "--audience=vault", "--audience=s3").stdout.strip()
    status = _review(server, token, ["s3", "other"])
    assert status["authenticated"] is True and status["audiences"] == ["s3"]
    # No spec.audiences means the server's own, which this token was not made for.
    assert _review(server, token) == {"user": {}, "error": (
        f'[invalid bearer token, token audiences ["vault" "s3"] is invalid for the target audiences ["{ISSUER}"]]')}
    # Nor is a token for the server's audience valid for another one.
    plain = server.kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    assert "is invalid for the target audiences [\"vault\"]" in _review(server, plain, ["vault"])["error"]


def test_refused_service_account_tokens_say_why(server):
    ns, uid = _service_account(server)
    server.kubectl("create", "token", "robot", "-n", ns)  # the data dir's key exists from here on
    past = ServiceAccountTokens(str(server.data_dir), None, clock=lambda: time.time() - 7200)
    expired, _ = past.issue(ns, "robot", uid, [ISSUER], 3600)
    assert _review(server, expired)["error"] == "[invalid bearer token, service account token has expired]"
    future = ServiceAccountTokens(str(server.data_dir), None, clock=lambda: time.time() + 7200)
    early, _ = future.issue(ns, "robot", uid, [ISSUER], 3600)
    assert _review(server, early)["error"] == "[invalid bearer token, service account token is not valid yet]"
    # Signed by another key: its kid names no key of the server's.
    forged, _ = ServiceAccountTokens(str(server.data_dir / "elsewhere"), None).issue(ns, "robot", uid, [ISSUER], 3600)
    assert _review(server, forged)["error"] == "[invalid bearer token, invalid signature, no keys found]"
    # The server's kid, a broken signature.
    good = server.kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    head, body, sig = good.split(".")
    tampered = f"{head}.{body}.{'A' if sig[0] != 'A' else 'B'}{sig[1:]}"
    assert _review(server, tampered)["error"] == ("[invalid bearer token, go-jose/go-jose: error in cryptographic "
                                                  "primitive]")
    # Another issuer's JWT is no ServiceAccount token at all.
    other = ServiceAccountTokens(str(server.data_dir), None, issuer="https://elsewhere").issue(
        ns, "robot", uid, ["https://elsewhere"], 3600)[0]
    assert _review(server, other)["error"] == "invalid bearer token"
    server.kubectl("delete", "serviceaccount", "robot", "-n", ns)
    assert _review(server, good)["error"] == '[invalid bearer token, serviceaccounts "robot" not found]'
    server.kubectl("create", "serviceaccount", "robot", "-n", ns)
    new_uid = json.loads(server.kubectl("get", "sa", "robot", "-n", ns, "-o", "json").stdout)["metadata"]["uid"]
    assert _review(server, good)["error"] == (f"[invalid bearer token, service account UID ({new_uid}) does not "
                                              f"match claim ({uid})]")


def test_rbac_needs_create_tokenreviews(server):
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {"token": "alicetoken"}}
    status, answer, _ = server.request("POST", PATH, body, headers=_as("alicetoken"))
    assert status == 403
    assert answer["message"] == ('tokenreviews.authentication.k8s.io is forbidden: User "alice" cannot create resource '
                                 '"tokenreviews" in API group "authentication.k8s.io" at the cluster scope')
    assert server.request("POST", PATH, body, headers=_as("admintoken"))[0] == 201
    can_i = server.kubectl("--token=delegatortoken", "auth", "can-i", "create", "tokenreviews", check=False)
    assert can_i.stdout.strip() == "yes"
    role = json.loads(server.kubectl("get", "clusterrole", "system:auth-delegator", "-o", "json").stdout)
    assert role["rules"] == [
        {"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]},
        {"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}]


def test_kubectl_create_and_discovery(server):
    manifest = json.dumps({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                           "spec": {"token": "alicetoken"}})
    out = server.kubectl("create", "-f", "-", "-o", "json", input=manifest).stdout
    assert json.loads(out)["status"]["user"]["username"] == "alice"
    resources = server.request("GET", "/apis/authentication.k8s.io/v1", headers=_as("alicetoken"), expect=200)[1]
    entry = next(r for r in resources["resources"] if r["name"] == "tokenreviews")
    assert entry["kind"] == "TokenReview" and entry["verbs"] == ["create"] and entry["namespaced"] is False


@pytest.mark.parametrize("spec,message", [
    ({}, "token is required for TokenReview in authentication"),
    ({"token": ""}, "token is required for TokenReview in authentication"),
    ({"token": 7}, "spec.token: must be a string, got 7"),
    ({"token": "t", "audiences": "vault"}, 'spec.audiences: must be a list of strings, got "vault"'),
    ([], "spec: must be an object"),
])
def test_bad_review_is_400_naming_the_field(server, spec, message):
    status, body, _ = server.request("POST", PATH, {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                                    "spec": spec}, headers=_as("admintoken"))
    assert status == 400 and message in body["message"], body


def test_only_create(server):
    status, body, _ = server.request("GET", PATH, headers=_as("admintoken"))
    assert status == 405 and body["reason"] == "MethodNotAllowed"


# -- ServiceAccount issuer discovery ------------------------------------------------------------------


def test_openid_configuration_and_jwks_verify_tokens(server):
    ns, _ = _service_account(server)
    token = server.kubectl("create", "token", "robot", "-n", ns).stdout.strip()
    # Every ServiceAccount may read both (system:service-account-issuer-discovery).
    status, config, headers = server.request("GET", CONFIG, headers=_as(token))
    assert status == 200 and headers["cache-control"] == "public, max-age=3600"
    assert config == {"issuer": ISSUER, "jwks_uri": f"https://127.0.0.1:{server.port}{JWKS}",
                      "response_types_supported": ["id_token"], "subject_types_supported": ["public"],
                      "id_token_signing_alg_values_supported": ["RS256"]}
    status, jwks, headers = server.request("GET", JWKS + "/", headers=_as(token))
    assert status == 200 and headers["content-type"] == "application/jwk-set+json"
    [key] = jwks["keys"]
    head, body, sig = token.split(".")
    header = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    assert key["kid"] == header["kid"] and key["alg"] == "RS256" and key["use"] == "sig" and key["kty"] == "RSA"

    def num(text: str) -> int:
        return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")

    # The published key verifies the token's signature (raises if not).
    public = rsa.RSAPublicNumbers(num(key["e"]), num(key["n"])).public_key()
    public.verify(base64.urlsafe_b64decode(sig + "=" * (-len(sig) % 4)), f"{head}.{body}".encode(),
                  padding.PKCS1v15(), hashes.SHA256())


def test_issuer_discovery_rbac_and_methods(server):
    # A user that is no ServiceAccount is not granted it (kube binds it to system:serviceaccounts only).
    status, body, _ = server.request("GET", CONFIG, headers=_as("alicetoken"))
    assert status == 403 and body["message"] == f'forbidden: User "alice" cannot get path "{CONFIG}"'
    assert server.request("GET", CONFIG)[0] == 401
    binding = json.loads(server.kubectl("get", "clusterrolebinding", "system:service-account-issuer-discovery",
                                        "-o", "json").stdout)
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                    "name": "system:serviceaccounts"}]
    for path in (CONFIG, JWKS):
        status, body, _ = server.request("POST", path, {}, headers=_as("admintoken"))
        assert status == 405 and body["reason"] == "MethodNotAllowed"


def test_issuer_discovery_needs_an_https_issuer(tmp_path):
    srv = ApiServerProcess(tmp_path / "data", "--service-account-issuer", "kubernetes/serviceaccount").start()
    try:
        assert srv.request("GET", CONFIG)[0] == 404
        assert srv.request("GET", JWKS)[0] == 404
    finally:
        srv.stop()
