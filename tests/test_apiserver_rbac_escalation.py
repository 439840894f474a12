"""RBAC escalation prevention: roles and bindings grant no more than their writer holds (or may escalate/bind)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from koordinator.apiserver.rbac_escalation import compact_string, missing_rules, only_gc_fields_changed
from tests.apiserver_process import ApiServerProcess

RBAC = "/apis/rbac.authorization.k8s.io/v1"
TEAM_ROLES = f"{RBAC}/namespaces/team/roles"
TEAM_BINDINGS = f"{RBAC}/namespaces/team/rolebindings"
RBAC_API = "rbac.authorization.k8s.io/v1"


def rule(groups, resources, verbs, names=None):
    out = {"apiGroups": groups, "resources": resources, "verbs": verbs}
    if names:
        out["resourceNames"] = names
    return out


def role(name: str, rules: list[dict], kind: str = "Role") -> dict:
    return {"apiVersion": RBAC_API, "kind": kind, "metadata": {"name": name}, "rules": rules}


def binding(name: str, ref_kind: str, ref_name: str, user: str = "dave", kind: str = "RoleBinding") -> dict:
    return {"apiVersion": RBAC_API, "kind": kind, "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": ref_kind, "name": ref_name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}


def test_coverage_as_kube_breaks_rules_down():
    held = [rule([""], ["pods"], ["get", "list"]), rule(["apps"], ["*"], ["get"]),
            rule([""], ["configmaps"], ["update"], names=["cfg"]), {"nonResourceURLs": ["/logs/*"], "verbs": ["get"]}]
    assert missing_rules(held, [rule([""], ["pods"], ["get"]), rule(["apps"], ["deployments/scale"], ["get"]),
                                rule([""], ["configmaps"], ["update"], names=["cfg"]),
                                {"nonResourceURLs": ["/logs/a"], "verbs": ["get"]}]) == []
    # A wildcard asked for must be held as one; a named rule does not cover every name.
    assert missing_rules(held, [rule([""], ["*"], ["get"])]) == [rule([""], ["*"], ["get"])]
    assert missing_rules(held, [rule([""], ["configmaps"], ["update"])]) == [rule([""], ["configmaps"], ["update"])]
    assert missing_rules(held, [rule([""], ["pods"], ["*"])]) == [rule([""], ["pods"], ["*"])]
    assert compact_string(rule([""], ["pods"], ["get", "create"], names=["a"])) == \
        '{APIGroups:[""], Resources:["pods"], ResourceNames:["a"], Verbs:["get" "create"]}'


def test_only_gc_fields_changed():
    old = {"metadata": {"name": "r", "resourceVersion": "1", "labels": {"a": "b"}}, "rules": []}
    assert only_gc_fields_changed({**old, "metadata": {**old["metadata"], "finalizers": ["x"]}}, old)
    assert not only_gc_fields_changed({**old, "metadata": {**old["metadata"], "labels": {}}}, old)
    assert not only_gc_fields_changed(old, None)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[ApiServerProcess]:
    root = tmp_path_factory.mktemp("rbac-escalation")
    (root / "tokens").write_text("admintoken\ncaroltoken,carol,u-carol\n")
    srv = ApiServerProcess(root / "data", "--token-file", str(root / "tokens")).start()
    try:
        srv.kubectl("create", "namespace", "team")
        # carol manages RBAC in `team` and may read pods there: nothing more.
        srv.kubectl("create", "role", "rbac-manager", "-n", "team", "--verb=get,list,create,update,patch,delete",
                    "--resource=roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io")
        srv.kubectl("create", "role", "pod-reader", "-n", "team", "--verb=get,list", "--resource=pods")
        for name in ("rbac-manager", "pod-reader"):
            srv.kubectl("create", "rolebinding", f"carol-{name}", "-n", "team", f"--role={name}", "--user=carol")
        srv.kubectl("create", "clusterrole", "clusterrole-writer", "--verb=create,update",
                    "--resource=clusterroles.rbac.authorization.k8s.io")
        srv.kubectl("create", "clusterrolebinding", "carol-clusterrole-writer", "--clusterrole=clusterrole-writer",
                    "--user=carol")
        yield srv
    finally:
        srv.stop()


def as_carol(server, method, path, body=None, content_type="application/json"):
    return server.request(method, path, body, headers={"Authorization": "Bearer caroltoken",
                                                       "Content-Type": content_type})


def as_admin(server, method, path, body=None, content_type="application/json", expect=None):
    return server.request(method, path, body, headers={"Authorization": "Bearer admintoken",
                                                       "Content-Type": content_type}, expect=expect)


def test_a_role_with_rules_the_writer_holds_is_created(server):
    status, body, _ = as_carol(server, "POST", TEAM_ROLES, role("reader-copy", [rule([""], ["pods"], ["get"])]))
    assert status == 201, body


def test_a_role_granting_more_is_refused_with_kubes_message_and_not_stored(server):
    wanted = [rule([""], ["pods"], ["get", "create", "delete"]), rule([""], ["secrets"], ["get"])]
    status, body, _ = as_carol(server, "POST", TEAM_ROLES, role("pod-writer", wanted))
    assert status == 403, body
    assert body["reason"] == "Forbidden"
    assert body["message"] == (
        'roles.rbac.authorization.k8s.io "pod-writer" is forbidden: user "carol" (groups=["system:authenticated"]) '
        "is attempting to grant RBAC permissions not currently held:\n"
        '{APIGroups:[""], Resources:["pods"], Verbs:["create" "delete"]}\n'
        '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}')
    assert body["details"] == {"name": "pod-writer", "group": "rbac.authorization.k8s.io", "kind": "roles"}
    as_admin(server, "GET", f"{TEAM_ROLES}/pod-writer", expect=404)
    # The same through kubectl, as a user sees it.
    proc = server.kubectl("--token", "caroltoken", "create", "role", "w", "-n", "team", "--verb=create",
                          "--resource=pods", check=False)
    assert proc.returncode != 0 and "is attempting to grant RBAC permissions not currently held" in proc.stderr


def test_an_update_of_a_role_the_writer_does_not_hold_is_refused_unless_only_gc_fields_change(server):
    merge = "application/merge-patch+json"
    as_admin(server, "POST", TEAM_ROLES, role("admin-made", [rule([""], ["secrets"], ["get"])]), expect=201)
    _, before, _ = as_admin(server, "GET", f"{TEAM_ROLES}/admin-made", expect=200)
    status, body, _ = as_carol(server, "PATCH", f"{TEAM_ROLES}/admin-made", {"metadata": {"labels": {"a": "b"}}},
                               merge)
    assert status == 403 and '{APIGroups:[""], Resources:["secrets"], Verbs:["get"]}' in body["message"], body
    assert as_admin(server, "GET", f"{TEAM_ROLES}/admin-made", expect=200)[1] == before
    status, body, _ = as_carol(server, "PATCH", f"{TEAM_ROLES}/admin-made", {"metadata": {"finalizers": ["team/x"]}},
                               merge)
    assert status == 200, body
    as_admin(server, "PATCH", f"{TEAM_ROLES}/admin-made", {"metadata": {"finalizers": None}}, merge, expect=200)


def test_binding_a_role_needs_its_rules_or_bind(server):
    status, body, _ = as_carol(server, "POST", TEAM_BINDINGS, binding("dave-reader", "Role", "pod-reader"))
    assert status == 201, body
    status, body, _ = as_carol(server, "POST", TEAM_BINDINGS, binding("dave-edit", "ClusterRole", "edit"))
    assert status == 403, body
    assert body["message"].startswith(
        'rolebindings.rbac.authorization.k8s.io "dave-edit" is forbidden: user "carol" '
        '(groups=["system:authenticated"]) is attempting to grant RBAC permissions not currently held:\n'), body
    as_admin(server, "GET", f"{TEAM_BINDINGS}/dave-edit", expect=404)
    # `bind` on that one ClusterRole is enough, without holding its rules.
    server.kubectl("create", "role", "bind-edit", "-n", "team", "--verb=bind",
                   "--resource=clusterroles.rbac.authorization.k8s.io", "--resource-name=edit")
    server.kubectl("create", "rolebinding", "carol-bind-edit", "-n", "team", "--role=bind-edit", "--user=carol")
    status, body, _ = as_carol(server, "POST", TEAM_BINDINGS, binding("dave-edit", "ClusterRole", "edit"))
    assert status == 201, body
    status, body, _ = as_carol(server, "POST", TEAM_BINDINGS, binding("dave-admin", "ClusterRole", "admin"))
    assert status == 403, body


def test_a_binding_to_a_missing_role_is_refused_naming_it(server):
    status, body, _ = as_carol(server, "POST", TEAM_BINDINGS, binding("ghost", "ClusterRole", "nope"))
    assert status == 403, body
    assert body["message"] == ('rolebindings.rbac.authorization.k8s.io "ghost" is forbidden: '
                               'clusterroles.rbac.authorization.k8s.io "nope" not found')


def test_escalate_lets_a_role_grant_anything(server):
    server.kubectl("create", "role", "escalator", "-n", "team", "--verb=escalate",
                   "--resource=roles.rbac.authorization.k8s.io")
    server.kubectl("create", "rolebinding", "carol-escalator", "-n", "team", "--role=escalator", "--user=carol")
    status, body, _ = as_carol(server, "POST", TEAM_ROLES, role("everything", [rule(["*"], ["*"], ["*"])]))
    assert status == 201, body


def test_an_aggregating_cluster_role_needs_cluster_admin(server):
    aggregating = {**role("my-aggregate", [], kind="ClusterRole"),
                   "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"x": "y"}}]}}
    status, body, _ = as_carol(server, "POST", f"{RBAC}/clusterroles", aggregating)
    assert status == 403, body
    assert body["message"] == ('clusterroles.rbac.authorization.k8s.io "my-aggregate" is forbidden: '
                               "must have cluster-admin privileges to use the aggregationRule")
    as_admin(server, "GET", f"{RBAC}/clusterroles/my-aggregate", expect=404)
    as_admin(server, "POST", f"{RBAC}/clusterroles", aggregating, expect=201)  # the admin may


@pytest.mark.parametrize("path,body", [
    (TEAM_ROLES, {**role("bad-1", []), "rules": "x"}),
    (TEAM_ROLES, role("bad-2", [{"verbs": 5, "apiGroups": [""], "resources": ["pods"]}])),
    (TEAM_ROLES, role("bad-3", [5, {"verbs": ["get"], "apiGroups": [""], "resources": [["pods"]]}])),
    (TEAM_BINDINGS, {**binding("bad-4", "Role", "pod-reader"), "roleRef": "x"}),
    (TEAM_BINDINGS, {**binding("bad-5", "Role", "pod-reader"), "roleRef": {"kind": ["Role"], "name": {}}}),
])
def test_ill_typed_roles_and_bindings_get_a_4xx_and_nothing_is_stored(server, path, body):
    status, answer, _ = as_carol(server, "POST", path, body)
    assert 400 <= status < 500, answer
    as_admin(server, "GET", f"{path}/{body['metadata']['name']}", expect=404)
