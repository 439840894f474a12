"""The ClusterRole aggregation controller against the embedded API server, with kubectl as a client.

The server runs with a token file, so under RBAC with kube's bootstrap policy (admin / edit / view
aggregate the ``system:aggregate-to-*`` roles and each other). The controller runs on its own
Runtime as a user bound only to what its module docstring says it needs (list/watch/update/escalate
on clusterroles), so these tests also prove that this is enough.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlparse

import pytest
import yaml

from koordinator import controllers
from koordinator.apis.selectors import SelectorError
from koordinator.controllers import clusterroleaggregation as cra
from koordinator.runtime import errors
from koordinator.runtime.client import Client
from koordinator.runtime.kinds import Kind
from koordinator.runtime.options import RuntimeOptions
from koordinator.runtime.runtime import Runtime
from tests.apiserver_process import ApiServerProcess
from tests.waiting import wait_until

Obj = dict[str, Any]
RBAC = "rbac.authorization.k8s.io"
AGG = f"{RBAC}/aggregate-to-"
CONTROLLER_USER = "clusterrole-aggregation-controller"
# Exactly the rights the controller's ClusterRole must grant it.
CONTROLLER_RULES = [{"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["list", "watch", "update", "escalate"]}]


def _role(name: str, rules: list[Obj] | None = None, labels: dict[str, str] | None = None,
          selectors: list[Obj] | None = None) -> Obj:
    obj: Obj = {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRole",
                "metadata": {"name": name, "labels": labels or {}}, "rules": rules or []}
    if selectors is not None:
        obj["aggregationRule"] = {"clusterRoleSelectors": selectors}
    return obj


def _rule(group: str, resources: list[str], verbs: list[str]) -> Obj:
    return {"apiGroups": [group], "resources": resources, "verbs": verbs}


def _union(*lists: list[Obj]) -> list[Obj]:
    out: list[Obj] = []
    for rules in lists:
        for rule in rules:
            if rule not in out:
                out.append(rule)
    return out


# -- fixtures ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServerProcess]:
    root = tmp_path_factory.mktemp("aggregation")
    (root / "tokens").write_text(f"admintoken\naggrtoken,{CONTROLLER_USER},u-aggr\n")
    s = ApiServerProcess(root / "data", "--token-file", str(root / "tokens")).start()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture(scope="module")
def client(server: ApiServerProcess) -> Iterator[Client]:
    c = Client.from_kubeconfig(str(server.kubeconfig), qps=0)
    c.kinds.register(cra.CLUSTER_ROLE)
    c.kinds.register(Kind(RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", False))
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def runtime(server: ApiServerProcess, client: Client) -> Iterator[Runtime]:
    client.create(_role("test:clusterrole-aggregation-controller", CONTROLLER_RULES))
    client.create({"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "test:clusterrole-aggregation-controller"},
                   "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole",
                               "name": "test:clusterrole-aggregation-controller"},
                   "subjects": [{"apiGroup": RBAC, "kind": "User", "name": CONTROLLER_USER}]})
    config = yaml.safe_load(server.kubeconfig.read_text())
    config["users"][0]["user"]["token"] = "aggrtoken"
    kubeconfig = Path(server.data_dir) / "controller-kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(config))
    options = RuntimeOptions.defaults("controllers", kubeconfig=str(kubeconfig), metrics_addr="0",
                                      health_addr="0", log_level="warning")
    rt = Runtime(options, client=Client.from_kubeconfig(str(kubeconfig), qps=0))
    assert controllers.register(rt, controllers.select(["clusterrole-aggregation"])) == ["clusterrole-aggregation"]
    rt.start()
    try:
        wait_until(lambda: rt.informers.informers() and not rt.informers.unsynced(), 20, "the informer to sync")
        yield rt
    finally:
        rt.stop(10)
        rt.client.close()


def rules_of(client: Client, name: str) -> list[Obj]:
    return client.get(cra.CLUSTER_ROLE, name).get("rules") or []


def bootstrap_expectation(client: Client, view_after: list[Obj] = (), edit_before: list[Obj] = ()
                          ) -> dict[str, list[Obj]]:
    """What kube's controller makes of the bootstrap roles: each selector's roles by name, so
    edit = aggregate-to-edit + view, admin = edit + aggregate-to-admin. ``view_after``: the rules of
    a role aggregated into view whose name sorts after system:aggregate-to-view; ``edit_before``: of
    one aggregated into edit whose name sorts before system:aggregate-to-edit."""
    view = _union(rules_of(client, "system:aggregate-to-view"), list(view_after))
    edit = _union(list(edit_before), rules_of(client, "system:aggregate-to-edit"), view)
    admin = _union(edit, rules_of(client, "system:aggregate-to-admin"))
    return {"view": view, "edit": edit, "admin": admin}


def wait_rules(client: Client, name: str, want: list[Obj], message: str) -> None:
    wait_until(lambda: rules_of(client, name) == want, 20, message)


def wait_bootstrap(client: Client, **extra: list[Obj]) -> dict[str, list[Obj]]:
    want = bootstrap_expectation(client, **extra)
    for name, rules in want.items():
        wait_rules(client, name, rules, f"{name} to hold its aggregated rules")
    return want


# -- pure functions ----------------------------------------------------------------------------------

def test_rules_compare_as_kube_semantic_equality() -> None:
    a = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}
    b = {"verbs": ["get"], "resources": ["pods"], "apiGroups": [""], "resourceNames": []}
    assert cra.rules_equal([a], [b]) and cra.rules_equal(None, [])
    assert not cra.rules_equal([a, b], [a]) and not cra.rules_equal([a, {**a, "verbs": ["list"]}],
                                                                     [{**a, "verbs": ["list"]}, a])


def test_aggregated_rules_follow_selectors_then_names_and_skip_self() -> None:
    r1, r2, r3 = _rule("a", ["x"], ["get"]), _rule("b", ["y"], ["get"]), _rule("c", ["z"], ["get"])
    agg = _role("agg", [r3], labels={"t": "1"},
                selectors=[{"matchLabels": {"t": "2"}}, {"matchExpressions": [{"key": "t", "operator": "Exists"}]}])
    roles = [agg, _role("zz", [r1, r2], {"t": "2"}), _role("aa", [r2, r1], {"t": "2"}), _role("mm", [r3], {"t": "3"})]
    # Selector 0 first (aa then zz, r1 once), then selector 1 adds mm's r3; agg's own rules do not count.
    assert cra.aggregated_rules(agg, roles) == [r2, r1, r3]


def test_a_stored_bad_selector_names_itself() -> None:
    # Only a role stored before the API server validated selectors can have one.
    agg = _role("old", selectors=[{"matchLabels": {"a": "b"}}, {"matchExpressions": [{"key": "k", "operator": "Bogus"}]}])
    with pytest.raises(SelectorError, match=r"aggregationRule\.clusterRoleSelectors\[1\]: .*Bogus"):
        cra.aggregated_rules(agg, [])


# -- against the server ------------------------------------------------------------------------------

def test_bootstrap_admin_shows_the_aggregated_rules(server: ApiServerProcess, client: Client,
                                                    runtime: Runtime) -> None:
    want = wait_bootstrap(client)
    shown = json.loads(server.kubectl("get", "clusterrole", "admin", "-o", "json").stdout)
    assert shown["rules"] == want["admin"] and shown["aggregationRule"]["clusterRoleSelectors"] == [
        {"matchLabels": {f"{AGG}admin": "true"}}]
    resources = {r for rule in shown["rules"] for r in rule.get("resources") or ()}
    assert {"localsubjectaccessreviews", "secrets", "deployments", "pods"} <= resources
    # The source roles are not aggregating: left alone.
    assert rules_of(client, "system:aggregate-to-view") == want["view"]
    assert "pods" in server.kubectl("get", "clusterrole", "view", "-o", "yaml").stdout
    # The controller's identity has no more than its role: not even a get of one ClusterRole.
    status, _, _ = server.request("GET", f"/apis/{RBAC}/v1/clusterroles/admin",
                                  headers={"Authorization": "Bearer aggrtoken"})
    assert status == 403


def test_no_write_when_the_aggregated_rules_are_unchanged(client: Client, runtime: Runtime) -> None:
    wait_bootstrap(client)
    sample = runtime.metrics.registry.get_sample_value
    host = urlparse(runtime.client.host).netloc

    def reconciled() -> float:
        return sample("controller_runtime_reconcile_total", {"controller": cra.NAME, "result": "success"}) or 0

    def puts() -> float:
        return sum(sample("rest_client_requests_total", {"code": code, "method": "PUT", "host": host}) or 0
                   for code in ("200", "409"))

    done, written = reconciled(), puts()
    assert written >= 3  # admin, edit and view were written at start: the samples are the right ones
    view_rv = client.get(cra.CLUSTER_ROLE, "view")["metadata"]["resourceVersion"]
    source = client.get(cra.CLUSTER_ROLE, "system:aggregate-to-view")
    source["metadata"].setdefault("annotations", {})["touched"] = uuid.uuid4().hex
    client.update(source)  # queues view (its selector matches), whose rules stay the same
    wait_until(lambda: reconciled() > done, 20, "view to be reconciled")
    assert puts() == written
    assert client.get(cra.CLUSTER_ROLE, "view")["metadata"]["resourceVersion"] == view_rv


def test_aggregate_to_view_flows_into_edit_and_admin_and_back_out(client: Client, runtime: Runtime) -> None:
    before = wait_bootstrap(client)
    name = f"widgets-view-{uuid.uuid4().hex[:6]}"
    widget = _rule("example.com", ["widgets"], ["get", "list", "watch"])
    client.create(_role(name, [widget], labels={f"{AGG}view": "true"}))
    # Sorted by name, widgets-view-* comes after system:aggregate-to-view; edit and admin follow the chain.
    after = wait_bootstrap(client, view_after=[widget])
    assert after["view"] == before["view"] + [widget] and widget in after["admin"]

    # A changed rule replaces the old one everywhere.
    role = client.get(cra.CLUSTER_ROLE, name)
    changed = _rule("example.com", ["widgets"], ["get"])
    role["rules"] = [changed]
    client.update(role)
    after = wait_bootstrap(client, view_after=[changed])
    assert widget not in after["admin"] and changed in after["admin"]

    client.delete(cra.CLUSTER_ROLE, name)
    for role_name in ("view", "edit", "admin"):
        wait_rules(client, role_name, before[role_name], f"{role_name} to drop the deleted role's rule")


def test_removing_the_label_removes_the_rules(client: Client, runtime: Runtime) -> None:
    before = wait_bootstrap(client)
    name = f"gadgets-edit-{uuid.uuid4().hex[:6]}"
    gadget = _rule("example.com", ["gadgets"], ["create"])
    client.create(_role(name, [gadget], labels={f"{AGG}edit": "true"}))
    # gadgets-edit-* sorts before system:aggregate-to-edit; aggregate-to-edit does not reach view.
    after = wait_bootstrap(client, edit_before=[gadget])
    assert after["edit"][0] == gadget and after["view"] == before["view"]
    role = client.get(cra.CLUSTER_ROLE, name)
    role["metadata"]["labels"] = {"unrelated": "true"}
    client.update(role)
    wait_rules(client, "edit", before["edit"], "edit to drop the relabelled role's rule")
    wait_rules(client, "admin", before["admin"], "admin to drop it too")
    client.delete(cra.CLUSTER_ROLE, name)


def test_user_aggregating_role_is_the_deduplicated_union(client: Client, runtime: Runtime) -> None:
    tag = uuid.uuid4().hex[:6]
    shared, only_b, only_c = (_rule("example.com", ["things"], ["get"]), _rule("example.com", ["b"], ["list"]),
                              _rule("example.com", ["c"], ["watch"]))
    stale = _rule("example.com", ["stale"], ["delete"])
    agg = f"team-{tag}"
    # Its own label matches its selector: a role never aggregates itself.
    client.create(_role(agg, [stale], labels={"team": tag},
                        selectors=[{"matchLabels": {"team": tag}},
                                   {"matchExpressions": [{"key": f"extra-{tag}", "operator": "Exists"}]}]))
    wait_rules(client, agg, [], "the stale rule to be stomped")
    client.create(_role(f"b-{tag}", [shared, only_b], labels={"team": tag}))
    client.create(_role(f"a-{tag}", [shared], labels={"team": tag, f"extra-{tag}": ""}))
    client.create(_role(f"c-{tag}", [only_c, shared], labels={f"extra-{tag}": "x"}))
    wait_rules(client, agg, [shared, only_b, only_c], "the union of a, b (selector 0) and c (selector 1)")

    # Narrowing the selector is a change of the aggregating role itself.
    role = client.get(cra.CLUSTER_ROLE, agg)
    role["aggregationRule"]["clusterRoleSelectors"] = [{"matchLabels": {f"extra-{tag}": "x"}}]
    client.update(role)
    wait_rules(client, agg, [only_c, shared], "only c's rules")
    for name in (agg, f"a-{tag}", f"b-{tag}", f"c-{tag}"):
        client.delete(cra.CLUSTER_ROLE, name)


def test_a_bad_selector_is_refused_naming_the_field(server: ApiServerProcess, client: Client,
                                                    runtime: Runtime) -> None:
    wait_bootstrap(client)
    name = f"bogus-{uuid.uuid4().hex[:6]}"
    bad = _role(name, selectors=[{"matchExpressions": [{"key": "team", "operator": "Bogus"}]}])
    path = f"/apis/{RBAC}/v1/clusterroles"
    headers = {"Authorization": "Bearer admintoken"}

    def stored() -> set[tuple[str, str]]:
        items = server.request("GET", path, headers=headers, expect=200)[1]["items"]
        return {(i["metadata"]["name"], i["metadata"]["resourceVersion"]) for i in items}

    before = stored()
    status, body, _ = server.request("POST", path, bad, headers=headers)
    assert status == 422 and body["reason"] == "Invalid"
    assert body["message"] == (
        f'ClusterRole.{RBAC} "{name}" is invalid: [aggregationRule.clusterRoleSelectors[0].matchExpressions[0]'
        '.operator: Invalid value: "Bogus": not a valid selector operator, aggregationRule.clusterRoleSelectors[0]: '
        'Invalid value: "null": invalid label selector.]')
    assert {"reason": "FieldValueInvalid", "message": 'Invalid value: "Bogus": not a valid selector operator',
            "field": "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].operator"} in body["details"]["causes"]
    # kubectl shows the same message.
    proc = server.kubectl("create", "-f", "-", input=json.dumps(bad), check=False)
    assert proc.returncode != 0 and "not a valid selector operator" in proc.stderr
    # No selectors at all, on an aggregationRule that is there, is refused too.
    status, body, _ = server.request("POST", path, _role(name, selectors=[]), headers=headers)
    assert status == 422 and "aggregationRule.clusterRoleSelectors: Required value: at least one " \
                                "clusterRoleSelector required if aggregationRule is non-nil" in body["message"]
    # Nothing was stored.
    with pytest.raises(errors.NotFound):
        client.get(cra.CLUSTER_ROLE, name)
    assert stored() == before

    # The same on an update of an existing aggregating role: refused, the stored role unchanged.
    view = client.get(cra.CLUSTER_ROLE, "view")
    broken = json.loads(json.dumps(view))
    broken["aggregationRule"]["clusterRoleSelectors"][0] = {"matchExpressions": [{"key": "k", "operator": "In"}]}
    with pytest.raises(errors.ApiError) as err:
        client.update(broken)
    assert "aggregationRule.clusterRoleSelectors[0].matchExpressions[0].values: Required value" in str(err.value)
    assert client.get(cra.CLUSTER_ROLE, "view")["metadata"]["resourceVersion"] == view["metadata"]["resourceVersion"]


def test_the_controller_is_listed_by_the_controllers_flag() -> None:
    assert "clusterrole-aggregation" in controllers.select(["*"])
    assert "clusterrole-aggregation" not in controllers.select(["*", "-clusterrole-aggregation"])
