"""Impersonation (kubectl --as / --as-group / --as-uid, Impersonate-* headers) against a real server.

Each impersonated attribute is authorized with the ``impersonate`` verb as kube-apiserver's filter
does, and refusals carry kube's 403 wording. The ``imp`` user below may impersonate only some
users, groups, uids, extras and ServiceAccounts, so both outcomes are checked for each kind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from koordinator.apiserver.http import Request
from tests.apiserver_process import ApiServerProcess

WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
REVIEW = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}

# What `imp` may impersonate (resourceNames narrow each rule to the names listed).
IMPERSONATOR_ROLE = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "impersonator"},
    "rules": [
        {"apiGroups": [""], "resources": ["users"], "verbs": ["impersonate"], "resourceNames": ["bob"]},
        {"apiGroups": [""], "resources": ["groups"], "verbs": ["impersonate"], "resourceNames": ["devs", "qa"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["uids"], "verbs": ["impersonate"],
         "resourceNames": ["u-bob"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["userextras/scopes"], "verbs": ["impersonate"],
         "resourceNames": ["view"]},
    ],
}
SA_IMPERSONATOR = {
    "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "sa-impersonator",
                                                                             "namespace": "team"},
    "rules": [{"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"],
               "resourceNames": ["robot"]}],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root: Path = tmp_path_factory.mktemp("impersonation")
    (root / "tokens").write_text('admintoken\nimptoken,imp,u-imp\nalicetoken,alice,u-alice,"devs"\n')
    srv = ApiServerProcess(root / "data", "--token-file", str(root / "tokens")).start()
    try:
        srv.kubectl("create", "namespace", "team")
        srv.kubectl("apply", "-f", "-", input=json.dumps(IMPERSONATOR_ROLE))
        srv.kubectl("apply", "-f", "-", input=json.dumps(SA_IMPERSONATOR))
        srv.kubectl("create", "clusterrolebinding", "imp", "--clusterrole=impersonator", "--user=imp")
        srv.kubectl("create", "rolebinding", "imp", "--role=sa-impersonator", "--user=imp", "-n", "team")
        yield srv
    finally:
        srv.stop()


def _request(server: ApiServerProcess, token: str, headers: list[tuple[str, str]], method: str = "POST",
             path: str = WHOAMI) -> tuple[int, dict]:
    """One request whose headers may repeat (http.client's dict-based request cannot send that)."""
    conn = server.connection()
    try:
        body = json.dumps(REVIEW).encode() if method == "POST" else b""
        conn.putrequest(method, path)
        for name, value in [("Authorization", f"Bearer {token}"), ("Content-Type", "application/json"),
                            ("Content-Length", str(len(body))), *headers]:
            conn.putheader(name, value)
        conn.endheaders(body)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read() or b"null")
    finally:
        conn.close()


def _whoami(server: ApiServerProcess, token: str, headers: list[tuple[str, str]]) -> dict:
    status, body = _request(server, token, headers)
    assert status == 201, body
    return body["status"]["userInfo"]


def test_kubectl_as_with_two_groups_and_a_uid(server):
    out = server.kubectl("--as", "X", "--as-group", "A", "--as-group", "B", "--as-uid", "u-9",
                         "auth", "whoami", "-o", "json").stdout
    assert json.loads(out)["status"]["userInfo"] == {"username": "X", "uid": "u-9",
                                                     "groups": ["A", "B", "system:authenticated"]}
    # The table kubectl prints by default lists both groups too.
    table = server.kubectl("--as", "X", "--as-group", "A", "--as-group", "B", "auth", "whoami").stdout
    assert "[A B system:authenticated]" in table


def test_every_group_header_is_honoured_and_authorized(server):
    user = _whoami(server, "imptoken", [("Impersonate-User", "bob"), ("Impersonate-Group", "devs"),
                                        ("Impersonate-Group", "qa")])
    assert user == {"username": "bob", "groups": ["devs", "qa", "system:authenticated"]}
    # The second group is checked as well as the first: one the impersonator may not use refuses all.
    status, body = _request(server, "imptoken", [("Impersonate-User", "bob"), ("Impersonate-Group", "devs"),
                                                 ("Impersonate-Group", "ops")])
    assert status == 403
    assert body["message"] == ('groups "ops" is forbidden: User "imp" cannot impersonate resource "groups" in API '
                               'group "" at the cluster scope')
    assert body["details"] == {"name": "ops", "kind": "groups"}


def test_user_refusal_has_kubes_wording(server):
    status, body = _request(server, "imptoken", [("Impersonate-User", "carol")])
    assert status == 403 and body["reason"] == "Forbidden"
    assert body["message"] == ('users "carol" is forbidden: User "imp" cannot impersonate resource "users" in API '
                               'group "" at the cluster scope')
    # A user with no impersonation rights at all is refused the same way.
    status, body = _request(server, "alicetoken", [("Impersonate-User", "bob")])
    assert status == 403 and body["message"].startswith('users "bob" is forbidden: User "alice" cannot impersonate')


def test_uid_is_authorized_in_the_authentication_group(server):
    user = _whoami(server, "imptoken", [("Impersonate-User", "bob"), ("Impersonate-Uid", "u-bob")])
    assert user == {"username": "bob", "uid": "u-bob", "groups": ["system:authenticated"]}
    status, body = _request(server, "imptoken", [("Impersonate-User", "bob"), ("Impersonate-Uid", "u-other")])
    assert status == 403
    assert body["message"] == ('uids.authentication.k8s.io "u-other" is forbidden: User "imp" cannot impersonate '
                               'resource "uids" in API group "authentication.k8s.io" at the cluster scope')


def test_extras_are_authorized_per_key_and_value(server):
    user = _whoami(server, "imptoken", [("Impersonate-User", "bob"), ("Impersonate-Extra-Scopes", "view")])
    assert user["extra"] == {"scopes": ["view"]}
    status, body = _request(server, "imptoken", [("Impersonate-User", "bob"), ("Impersonate-Extra-Scopes", "view"),
                                                 ("Impersonate-Extra-Scopes", "admin")])
    assert status == 403
    assert body["message"] == ('userextras.authentication.k8s.io "admin" is forbidden: User "imp" cannot impersonate '
                               'resource "userextras/scopes" in API group "authentication.k8s.io" at the cluster '
                               'scope')
    # Keys are %-decoded (client-go escapes them so any character fits a header name).
    user = _whoami(server, "admintoken", [("Impersonate-User", "bob"),
                                          ("Impersonate-Extra-Acme.com%2fProject", "p1"),
                                          ("Impersonate-Extra-Acme.com%2fProject", "p2")])
    assert user["extra"] == {"acme.com/project": ["p1", "p2"]}


def test_service_account_is_authorized_in_its_namespace(server):
    user = _whoami(server, "imptoken", [("Impersonate-User", "system:serviceaccount:team:robot")])
    assert user == {"username": "system:serviceaccount:team:robot",
                    "groups": ["system:serviceaccounts", "system:serviceaccounts:team", "system:authenticated"]}
    status, body = _request(server, "imptoken", [("Impersonate-User", "system:serviceaccount:other:robot")])
    assert status == 403
    assert body["message"] == ('serviceaccounts "robot" is forbidden: User "imp" cannot impersonate resource '
                               '"serviceaccounts" in API group "" in the namespace "other"')
    # A name that is no valid namespace/ServiceAccount pair is a plain user, authorized as one.
    status, body = _request(server, "imptoken", [("Impersonate-User", "system:serviceaccount:Team:robot")])
    assert status == 403 and body["message"].startswith(
        'users "system:serviceaccount:Team:robot" is forbidden: User "imp" cannot impersonate resource "users"')
    # Given groups replace the ServiceAccount's own.
    user = _whoami(server, "admintoken", [("Impersonate-User", "system:serviceaccount:team:robot"),
                                          ("Impersonate-Group", "devs")])
    assert user["groups"] == ["devs", "system:authenticated"]


def test_authenticated_and_anonymous_groups(server):
    # (system:masters lets the impersonated user ask who it is at all.)
    # An explicit system:unauthenticated keeps system:authenticated out, and is not duplicated.
    masters = ("Impersonate-Group", "system:masters")
    user = _whoami(server, "admintoken", [("Impersonate-User", "bob"), masters,
                                          ("Impersonate-Group", "system:unauthenticated")])
    assert user["groups"] == ["system:masters", "system:unauthenticated"]
    # The anonymous user gets system:unauthenticated instead of system:authenticated.
    user = _whoami(server, "admintoken", [("Impersonate-User", "system:anonymous"), masters])
    assert user == {"username": "system:anonymous", "groups": ["system:masters", "system:unauthenticated"]}
    # Without a group it is refused as anonymous is: it may not even ask who it is.
    status, body = _request(server, "admintoken", [("Impersonate-User", "system:anonymous")])
    assert status == 403 and 'User "system:anonymous" cannot create resource "selfsubjectreviews"' in body["message"]


def test_groups_without_a_user_are_a_500(server):
    status, body = _request(server, "admintoken", [("Impersonate-Group", "devs")])
    assert status == 500 and body["reason"] == "InternalError"
    assert body["message"] == ("Internal error occurred: requested [{Group  devs    }] without impersonating a user")
    status, body = _request(server, "admintoken", [("Impersonate-Uid", "u-1")])
    assert status == 500 and "without impersonating a user" in body["message"]


def test_the_impersonated_user_is_the_one_authorized(server):
    # imp may act as bob, but bob may not list pods: the request itself is refused for bob.
    status, body = _request(server, "imptoken", [("Impersonate-User", "bob")], "GET", "/api/v1/namespaces/team/pods")
    assert status == 403 and body["message"].startswith('pods is forbidden: User "bob" cannot list resource "pods"')
    status, body = _request(server, "admintoken", [("Impersonate-User", "bob"),
                                                   ("Impersonate-Group", "system:masters")],
                            "GET", "/api/v1/namespaces/team/pods")
    assert status == 200 and body["kind"] == "PodList"


def test_repeated_headers_reach_the_request():
    req = Request("GET", "/", {"impersonate-group": "b", "accept": "x"}, b"",
                  {"impersonate-group": ["a", "b"]})
    assert req.header_values("impersonate-group") == ["a", "b"]
    assert req.header("impersonate-group") == "b"
    assert req.header_values("accept") == ["x"] and req.header_values("missing") == []
