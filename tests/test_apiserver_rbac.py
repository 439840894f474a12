"""Authorization in the embedded API server: request attributes, RBAC rules, 403s, access reviews."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from koordinator.apiserver import rbac_bootstrap
from koordinator.apiserver.app import ApiServer
from koordinator.apiserver.authorization import (
    Attributes,
    RbacAuthorizer,
    forbidden,
    request_attributes,
    rule_allows,
)
from koordinator.apiserver.store import Store
from tests.apiserver_process import ApiServerProcess

ROOT = Path(__file__).resolve().parent.parent
RBAC_MANIFESTS = sorted((ROOT / "manifests" / "rbac").glob("*.yaml"))
SA_NS = "koordinator-system"
SA_GROUPS = f"system:serviceaccounts,system:serviceaccounts:{SA_NS}"

# -- request attributes -----------------------------------------------------------------------


@pytest.mark.parametrize("method,path,query,expected", [
    ("GET", "/api/v1/namespaces/ns/pods", {}, ("list", "", "pods", "", "ns", "")),
    ("GET", "/api/v1/namespaces/ns/pods", {"watch": "true"}, ("watch", "", "pods", "", "ns", "")),
    ("GET", "/api/v1/watch/namespaces/ns/pods", {}, ("watch", "", "pods", "", "ns", "")),
    ("GET", "/api/v1/namespaces/ns/pods/p", {}, ("get", "", "pods", "", "ns", "p")),
    ("HEAD", "/api/v1/namespaces/ns/pods/p", {}, ("get", "", "pods", "", "ns", "p")),
    ("POST", "/api/v1/namespaces/ns/pods", {}, ("create", "", "pods", "", "ns", "")),
    ("PUT", "/api/v1/namespaces/ns/pods/p/status", {}, ("update", "", "pods", "status", "ns", "p")),
    ("POST", "/api/v1/namespaces/ns/pods/p/eviction", {}, ("create", "", "pods", "eviction", "ns", "p")),
    ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale", {},
     ("patch", "apps", "deployments", "scale", "ns", "d")),
    ("DELETE", "/apis/apps/v1/namespaces/ns/deployments/d", {}, ("delete", "apps", "deployments", "", "ns", "d")),
    ("DELETE", "/apis/apps/v1/namespaces/ns/deployments", {},
     ("deletecollection", "apps", "deployments", "", "ns", "")),
    ("GET", "/api/v1/nodes", {}, ("list", "", "nodes", "", "", "")),
    ("GET", "/api/v1/namespaces", {}, ("list", "", "namespaces", "", "", "")),
    # A namespace is named both as the namespace and the object; status/finalize are its subresources.
    ("GET", "/api/v1/namespaces/ns", {}, ("get", "", "namespaces", "", "ns", "ns")),
    ("PUT", "/api/v1/namespaces/ns/finalize", {}, ("update", "", "namespaces", "finalize", "ns", "ns")),
    # A list narrowed to one name by metadata.name is that object's (RBAC resourceNames apply).
    ("GET", "/api/v1/namespaces/ns/configmaps", {"fieldSelector": "metadata.name=cfg"},
     ("list", "", "configmaps", "", "ns", "cfg")),
    ("GET", "/api/v1/namespaces/ns/configmaps", {"fieldSelector": "metadata.name!=cfg"},
     ("list", "", "configmaps", "", "ns", "")),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {},
     ("create", "authorization.k8s.io", "selfsubjectaccessreviews", "", "", "")),
])
def test_resource_request_attributes(method, path, query, expected):
    attrs = request_attributes(method, path, query, "u", ["g"])
    assert attrs.resource_request
    assert (attrs.verb, attrs.api_group, attrs.resource, attrs.subresource, attrs.namespace, attrs.name) == expected


@pytest.mark.parametrize("method,path,verb", [
    ("GET", "/healthz", "get"), ("HEAD", "/version", "get"), ("GET", "/api", "get"), ("GET", "/apis", "get"),
    ("GET", "/apis/apps", "get"), ("GET", "/apis/apps/v1", "get"), ("GET", "/openapi/v3/api/v1", "get"),
    ("POST", "/logs", "post"),
])
def test_non_resource_request_attributes(method, path, verb):
    attrs = request_attributes(method, path, {}, "u", [])
    assert not attrs.resource_request and attrs.verb == verb and attrs.path == path


def _res(verb, resource, group="", sub="", name="", ns="ns"):
    return Attributes("u", (), verb, True, group, "v1", resource, sub, ns, name)


def _path(verb, path):
    return Attributes("u", (), verb, False, path=path)


def test_rule_matching():
    rule = {"apiGroups": [""], "resources": ["pods", "pods/status"], "verbs": ["get", "list"]}
    assert rule_allows(_res("get", "pods"), rule)
    assert rule_allows(_res("get", "pods", sub="status"), rule)
    assert not rule_allows(_res("get", "pods", sub="log"), rule)
    assert not rule_allows(_res("create", "pods"), rule)
    assert not rule_allows(_res("get", "pods", group="apps"), rule)
    assert not rule_allows(_res("get", "nodes"), rule)
    # Wildcards: every group/resource/verb; */sub only that subresource of anything.
    star = {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}
    assert rule_allows(_res("deletecollection", "deployments", group="apps"), star)
    assert rule_allows(_res("update", "pods", sub="status"), star)
    sub_star = {"apiGroups": ["*"], "resources": ["*/scale"], "verbs": ["update"]}
    assert rule_allows(_res("update", "deployments", group="apps", sub="scale"), sub_star)
    assert not rule_allows(_res("update", "deployments", group="apps"), sub_star)
    assert not rule_allows(_res("update", "deployments", group="apps", sub="status"), sub_star)
    # resourceNames: only requests naming one of them (a create or list without a name never matches).
    named = {"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["cfg"],
             "verbs": ["get", "list", "create"]}
    assert rule_allows(_res("get", "configmaps", name="cfg"), named)
    assert rule_allows(_res("list", "configmaps", name="cfg"), named)
    assert not rule_allows(_res("get", "configmaps", name="other"), named)
    assert not rule_allows(_res("list", "configmaps"), named)
    assert not rule_allows(_res("create", "configmaps"), named)
    # nonResourceURLs: exact, or a prefix ending in *; a resource rule never grants a path and vice versa.
    urls = {"nonResourceURLs": ["/healthz", "/apis/*"], "verbs": ["get"]}
    assert rule_allows(_path("get", "/healthz"), urls)
    assert not rule_allows(_path("get", "/healthz/etcd"), urls)
    assert rule_allows(_path("get", "/apis/apps/v1"), urls)
    assert not rule_allows(_path("get", "/apis"), urls)
    assert not rule_allows(_path("post", "/healthz"), urls)
    assert not rule_allows(_path("get", "/healthz"), star)
    assert not rule_allows(_res("get", "pods"), urls)


def test_forbidden_wording():
    user = "system:serviceaccount:ns:sa"
    err = forbidden(_res("create", "pods").for_user(user, []))
    assert err.code == 403 and err.reason == "Forbidden"
    assert err.message == (f'pods is forbidden: User "{user}" cannot create resource "pods" in API group "" '
                           'in the namespace "ns"')
    assert err.details == {"kind": "pods"}
    err = forbidden(_res("get", "nodes", name="n1", ns="").for_user(user, []))
    assert err.message == (f'nodes "n1" is forbidden: User "{user}" cannot get resource "nodes" in API group "" '
                           "at the cluster scope")
    assert err.details == {"name": "n1", "kind": "nodes"}
    err = forbidden(_res("update", "deployments", group="apps", sub="status", name="d").for_user(user, []))
    assert err.message == (f'deployments.apps "d" is forbidden: User "{user}" cannot update resource '
                           f'"deployments/status" in API group "apps" in the namespace "ns"')
    assert err.details == {"name": "d", "group": "apps", "kind": "deployments"}
    err = forbidden(_path("get", "/metrics").for_user(user, []),
                    'RBAC: clusterrole.rbac.authorization.k8s.io "x" not found')
    assert err.message == (f'forbidden: User "{user}" cannot get path "/metrics": '
                           'RBAC: clusterrole.rbac.authorization.k8s.io "x" not found')


# -- the RBAC authorizer over a store ----------------------------------------------------------


def _create(api, plural, obj):
    rt = api.registry.get("rbac.authorization.k8s.io", "v1", plural)
    api.create_object(rt, obj["metadata"].get("namespace"), obj)
    api.store.commit()


def _crb(name, role, user):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}]}


@pytest.fixture
def rbac_api(tmp_path):
    store = Store(str(tmp_path / "state.db"), synchronous="OFF")
    api = ApiServer(store)
    rbac_bootstrap.ensure_policy(api)
    authz = RbacAuthorizer(store)
    yield api, authz
    store.close()


def test_aggregation_and_index_rebuild(rbac_api):
    api, authz = rbac_api
    _create(api, "clusterrolebindings", _crb("e", "edit", "ed"))
    _create(api, "clusterrolebindings", _crb("v", "view", "vi"))
    _create(api, "clusterrolebindings", _crb("a", "admin", "ad"))

    def allowed(user, verb, resource, group="", sub=""):
        return authz.authorize(Attributes(user, ("system:authenticated",), verb, True, group, "v1", resource, sub,
                                          "ns", "")).allowed

    # edit = system:aggregate-to-edit + view (labelled aggregate-to-edit), admin = edit + aggregate-to-admin.
    assert allowed("ed", "create", "pods") and allowed("ed", "list", "pods")
    assert allowed("ed", "create", "pods", sub="eviction")
    assert not allowed("ed", "create", "roles", "rbac.authorization.k8s.io")
    assert allowed("ad", "create", "roles", "rbac.authorization.k8s.io")
    assert allowed("ad", "list", "deployments", "apps")
    assert allowed("vi", "list", "deployments", "apps") and not allowed("vi", "get", "secrets")
    assert not allowed("vi", "list", "nodeslos", "slo.koordinator.sh")
    rebuilds = authz.rebuilds
    assert allowed("vi", "list", "pods") and authz.rebuilds == rebuilds  # no change, no rebuild
    # A ClusterRole labelled for view joins view, edit and admin once committed.
    _create(api, "clusterroles", {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "slo-view", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
        "rules": [{"apiGroups": ["slo.koordinator.sh"], "resources": ["nodeslos"], "verbs": ["list"]}]})
    assert allowed("vi", "list", "nodeslos", "slo.koordinator.sh")
    assert allowed("ad", "list", "nodeslos", "slo.koordinator.sh")
    assert authz.rebuilds == rebuilds + 1
    # Basic users may review their own access; nobody else gets anything without a binding.
    assert allowed("anyone", "create", "selfsubjectaccessreviews", "authorization.k8s.io")
    assert not allowed("anyone", "list", "pods")
    # system:masters short-circuits.
    assert authz.authorize(Attributes("root", ("system:masters",), "escalate", True, "x", "v1", "y")).allowed


def test_ill_typed_rbac_objects_stored_before_type_checks_break_nobodys_authorization(rbac_api):
    """A database written by an older server may hold a role whose rules are not a list of rules."""
    api, authz = rbac_api
    _create(api, "clusterroles", {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                                  "metadata": {"name": "reader"},
                                  "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]})
    _create(api, "clusterrolebindings", _crb("r", "reader", "u"))
    for name, obj in [("clusterroles", {"metadata": {"name": "junk"}, "rules": "x"}),
                      ("clusterroles", {"metadata": {"name": "junk-2"}, "rules": [5, {"verbs": 5}]}),
                      ("clusterrolebindings", {"metadata": {"name": "junk-b"}, "roleRef": "x", "subjects": "y"}),
                      ("clusterrolebindings", {"metadata": {"name": "junk-c"},
                                               "subjects": [{"kind": "User", "name": "u"}],
                                               "roleRef": {"kind": "ClusterRole", "name": ["junk"]}})]:
        api.store.put(api.registry.get("rbac.authorization.k8s.io", "v1", name).storage_key,
                      obj["metadata"]["name"], {"apiVersion": "rbac.authorization.k8s.io/v1", **obj})
    api.store.commit()
    for role in ("junk", "junk-2"):
        _create(api, "clusterrolebindings", _crb(f"b-{role}", role, "u"))

    def allowed(verb):
        return authz.authorize(Attributes("u", ("system:authenticated",), verb, True, "", "v1", "pods", "",
                                          "ns", "")).allowed

    assert allowed("get") and not allowed("delete")


# -- against a real server process -------------------------------------------------------------


def _manifest_docs():
    docs = []
    for path in RBAC_MANIFESTS:
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return docs


def _sa_user(name):
    return f"system:serviceaccount:{SA_NS}:{name}"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("rbac")
    lines = ["admintoken", 'alicetoken,alice,u-alice,"devs"', "bobtoken,bob,u-bob",
             'roottoken,root,u-root,"system:masters"']
    for doc in _manifest_docs():
        if doc["kind"] == "ServiceAccount":
            name = doc["metadata"]["name"]
            lines.append(f'sa-{name},{_sa_user(name)},u-{name},"{SA_GROUPS}"')
    (root / "tokens").write_text("\n".join(lines) + "\n")
    srv = ApiServerProcess(root / "data", "--token-file", str(root / "tokens")).start()
    try:
        srv.kubectl("create", "namespace", "x")
        srv.kubectl("create", "namespace", SA_NS)
        srv.kubectl("create", "rolebinding", "alice-view", "--clusterrole=view", "--user=alice", "-n", "x")
        srv.kubectl("apply", "-f", str(ROOT / "manifests" / "rbac"))
        yield srv
    finally:
        srv.stop()


def _as(server, token, method, path, body=None, query=""):
    return server.request(method, path + query, body, headers={"Authorization": f"Bearer {token}"})


POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "nginx"}]}}


def test_view_lists_pods_and_is_refused_create_with_kubes_message(server):
    status, body, _ = _as(server, "alicetoken", "GET", "/api/v1/namespaces/x/pods")
    assert status == 200 and body["kind"] == "PodList"
    status, body, _ = _as(server, "alicetoken", "POST", "/api/v1/namespaces/x/pods", POD)
    assert status == 403
    assert body == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": 'pods is forbidden: User "alice" cannot create resource "pods" in API group "" '
                               'in the namespace "x"',
                    "reason": "Forbidden", "details": {"kind": "pods"}, "code": 403}
    # Only in x: elsewhere and cluster-wide, nothing; discovery works for every authenticated user.
    status, body, _ = _as(server, "alicetoken", "GET", "/api/v1/nodes/n1")
    assert status == 403 and body["message"] == ('nodes "n1" is forbidden: User "alice" cannot get resource "nodes" '
                                                 'in API group "" at the cluster scope')
    assert body["details"] == {"name": "n1", "kind": "nodes"}
    status, body, _ = _as(server, "alicetoken", "GET", "/metrics")
    assert status == 403 and body["message"] == 'forbidden: User "alice" cannot get path "/metrics"'
    assert _as(server, "alicetoken", "GET", "/apis/apps/v1")[0] == 200
    assert _as(server, "alicetoken", "GET", "/api")[0] == 200
    # Unauthenticated stays 401.
    assert server.request("GET", "/api/v1/namespaces/x/pods")[0] == 401
    # kubectl shows the same message.
    proc = server.kubectl("--token=alicetoken", "-n", "x", "run", "p", "--image=nginx", check=False)
    assert proc.returncode != 0 and 'User "alice" cannot create resource "pods"' in proc.stderr


def _can_i(server, token, *args):
    proc = server.kubectl(f"--token={token}", "auth", "can-i", *args, check=False)
    assert proc.stdout.strip() in ("yes", "no"), proc.stderr
    return proc.stdout.strip() == "yes"


def test_kubectl_auth_can_i(server):
    assert _can_i(server, "alicetoken", "list", "pods", "-n", "x")
    assert not _can_i(server, "alicetoken", "create", "pods", "-n", "x")
    assert not _can_i(server, "alicetoken", "list", "pods", "-n", "default")
    assert _can_i(server, "alicetoken", "get", "deployments.apps", "--subresource", "scale", "-n", "x")
    assert not _can_i(server, "alicetoken", "update", "deployments.apps", "--subresource", "scale", "-n", "x")
    assert _can_i(server, "admintoken", "delete", "nodes")
    assert _can_i(server, "roottoken", "create", "clusterroles")
    assert not _can_i(server, "bobtoken", "get", "pods", "-n", "x")
    # --list is a SelfSubjectRulesReview.
    listing = server.kubectl("--token=alicetoken", "auth", "can-i", "--list", "-n", "x").stdout
    assert "selfsubjectaccessreviews.authorization.k8s.io" in listing and "deployments.apps" in listing


def _review(server, token, verb, resource, group="", sub="", namespace="", name=""):
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": verb, "resource": resource, "group": group, "subresource": sub,
                                            "namespace": namespace, "name": name}}}
    status, answer, _ = _as(server, token, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", body)
    assert status == 201, answer
    return answer["status"]["allowed"]


def _bindings(docs):
    """(ServiceAccount name, role doc, namespace or "") for every binding in the manifests."""
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d for d in docs}
    for d in docs:
        if d["kind"] not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        ns = d["metadata"].get("namespace", "")
        ref = d["roleRef"]
        role = roles[(ref["kind"], ns if ref["kind"] == "Role" else "", ref["name"])]
        for subject in d["subjects"]:
            yield subject["name"], role, ns


@pytest.mark.parametrize("manifest", [p.stem for p in RBAC_MANIFESTS])
def test_manifest_roles_answer_as_their_rules_say(server, manifest):
    docs = [d for d in yaml.safe_load_all((ROOT / "manifests" / "rbac" / f"{manifest}.yaml").read_text()) if d]
    accounts = [d["metadata"]["name"] for d in docs if d["kind"] == "ServiceAccount"]
    bindings = list(_bindings(docs))
    for sa, role, ns in bindings:
        token = f"sa-{sa}"
        for rule in role["rules"]:
            for group in rule["apiGroups"]:
                for combined in rule["resources"]:
                    resource, _, sub = combined.partition("/")
                    for verb in rule["verbs"]:
                        name = (rule.get("resourceNames") or [""])[0]
                        assert _review(server, token, verb, resource, group, sub, ns or "any", name), \
                            (sa, verb, combined, group, name)
                    if rule.get("resourceNames"):
                        # Another object of the kind is not granted by this rule (nor, here, by any other).
                        others = [r for r in role["rules"] if combined in r["resources"] and not r.get("resourceNames")
                                  and "get" in r["verbs"] and group in r["apiGroups"]]
                        if not others:
                            assert not _review(server, token, "get", resource, group, sub, ns or "any", "other")
    for sa in accounts:
        token = f"sa-{sa}"
        # Nothing in the manifests lets a role impersonate or escalate, nor touch RBAC objects.
        assert not _review(server, token, "impersonate", "users")
        assert not _review(server, token, "create", "clusterrolebindings", "rbac.authorization.k8s.io")
    # kubectl agrees for one granted and one refused question of each role.
    for sa, role, ns in bindings[:2]:
        rule = role["rules"][0]
        target = rule["resources"][0]
        group = rule["apiGroups"][0]
        kind, _, sub = target.partition("/")
        resource = f"{kind}.{group}" if group else kind
        args = [rule["verbs"][0], resource, *(["--subresource", sub] if sub else []), "-n", ns or SA_NS]
        if rule.get("resourceNames"):
            args[1] += "/" + rule["resourceNames"][0]
        assert _can_i(server, f"sa-{sa}", *args), args
        assert not _can_i(server, f"sa-{sa}", "delete", "namespaces")


def test_manager_lists_its_configmap_by_name_only(server):
    # A resourceNames rule grants a list narrowed by metadata.name to that one object.
    path = f"/api/v1/namespaces/{SA_NS}/configmaps"
    query = "?fieldSelector=metadata.name%3Dslo-controller-config"
    status, body, _ = _as(server, "sa-koord-manager", "GET", path, query=query)
    assert status == 200, body
    status, body, _ = _as(server, "sa-koord-manager", "GET", path)
    assert status == 403 and "cannot list resource \"configmaps\"" in body["message"]


def test_binding_to_a_missing_role_grants_nothing(server):
    server.kubectl("create", "rolebinding", "bob-missing", "--clusterrole=missing-role", "--user=bob", "-n", "x")
    status, body, _ = _as(server, "bobtoken", "GET", "/api/v1/namespaces/x/pods")
    assert status == 403
    assert body["message"] == ('pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the '
                               'namespace "x": RBAC: clusterrole.rbac.authorization.k8s.io "missing-role" not found')
    # Nothing else changed: alice keeps her rights, bob's discovery still works.
    assert _as(server, "alicetoken", "GET", "/api/v1/namespaces/x/pods")[0] == 200
    assert _as(server, "bobtoken", "GET", "/api/v1")[0] == 200
    # Once the role exists the binding grants it (the index follows changes).
    server.kubectl("create", "clusterrole", "missing-role", "--verb=list", "--resource=pods")
    assert _as(server, "bobtoken", "GET", "/api/v1/namespaces/x/pods")[0] == 200
    assert _as(server, "bobtoken", "GET", "/api/v1/namespaces/default/pods")[0] == 403
    server.kubectl("delete", "rolebinding", "bob-missing", "-n", "x")
    assert _as(server, "bobtoken", "GET", "/api/v1/namespaces/x/pods")[0] == 403


def test_subject_access_review_for_another_user(server):
    body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": "alice", "groups": ["system:authenticated"],
                     "resourceAttributes": {"verb": "list", "resource": "pods", "namespace": "x"}}}
    path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
    status, answer, _ = _as(server, "admintoken", "POST", path, body)
    assert status == 201 and answer["status"]["allowed"] is True
    body["spec"]["resourceAttributes"]["verb"] = "delete"
    assert _as(server, "admintoken", "POST", path, body)[1]["status"]["allowed"] is False
    # Only who may create subjectaccessreviews may ask about others.
    assert _as(server, "alicetoken", "POST", path, body)[0] == 403
    status, answer, _ = _as(server, "admintoken", "POST", path, {"spec": {"resourceAttributes": {"verb": "get"}}})
    assert status == 422 and "spec.user" in answer["message"]


def test_authorization_mode_flag(tmp_path):
    tokens = tmp_path / "tokens"
    tokens.write_text("admintoken\nbobtoken,bob,u-bob\n")
    srv = ApiServerProcess(tmp_path / "data", "--token-file", str(tokens), "--authorization-mode", "AlwaysAllow")
    srv.start()
    try:
        assert _as(srv, "bobtoken", "GET", "/api/v1/namespaces/default/pods")[0] == 200
    finally:
        srv.stop()
    proc = subprocess.run([sys.executable, "-m", "koordinator", "apiserver", "--authorization-mode", "Webhook"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "--authorization-mode" in proc.stderr and "'Webhook'" in proc.stderr


def test_impersonation(server):
    # kubectl --as: admins may act as anyone; the request is then authorised as that user.
    assert _can_i(server, "admintoken", "list", "pods", "-n", "x", "--as=alice")
    assert not _can_i(server, "admintoken", "create", "pods", "-n", "x", "--as=alice")
    koordlet = _sa_user("koordlet")
    assert _can_i(server, "admintoken", "list", "nodes", f"--as={koordlet}")  # its groups come with it
    assert not _can_i(server, "admintoken", "delete", "nodes", f"--as={koordlet}")
    headers = {"Authorization": "Bearer alicetoken", "Impersonate-User": "bob"}
    status, body, _ = server.request("GET", "/api/v1/namespaces/x/pods", headers=headers)
    assert status == 403 and body["message"] == ('users "bob" is forbidden: User "alice" cannot impersonate resource '
                                                 '"users" in API group "" at the cluster scope')
    headers = {"Authorization": "Bearer admintoken", "Impersonate-User": "bob"}
    status, body, _ = server.request("GET", "/api/v1/namespaces/x/pods", headers=headers)
    assert status == 403 and 'User "bob" cannot list resource "pods"' in body["message"]
    headers["Impersonate-Group"] = "system:masters"
    assert server.request("GET", "/api/v1/namespaces/x/pods", headers=headers)[0] == 200
