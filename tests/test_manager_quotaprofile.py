"""The ``quotaprofile`` controller (reference B.7): pure parts, then end to end.

End to end the manager runs in this process with its webhook server on, routed through the
embedded API server's webhook configurations, so the quota the controller writes goes through
the real ElasticQuota webhooks. The test acts like a user: Nodes, ElasticQuotaProfiles, cordons.
"""

from __future__ import annotations

import json
from typing import Iterator

import pytest

from koordinator.local import free_port
from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator_roles.manager.local import ensure_webhooks
from koordinator_roles.manager.quotaprofile import (QUOTA_MAX, InvalidProfile, desired_quota, parse_ratio,
                                                    quota_differs, tree_id)
from tests.manager_harness import InProcessManager
from tests.waiting import wait_until

P = "quota.scheduling.koordinator.sh/"
NS = "qp"


def node(name, *, labels=None, cpu="10", memory="20Gi", ready=True, unschedulable=False):
    obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
           "spec": {"unschedulable": True} if unschedulable else {},
           "status": {"capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
                      "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                      "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}
    return obj


def profile(name, quota_name, *, selector=None, ratio=None, quota_labels=None, annotations=None, labels=None):
    spec = {"quotaName": quota_name, "nodeSelector": selector if selector is not None else {}}
    if ratio is not None:
        spec["resourceRatio"] = ratio
    if quota_labels is not None:
        spec["quotaLabels"] = quota_labels
    return {"apiVersion": "quota.koordinator.sh/v1alpha1", "kind": "ElasticQuotaProfile",
            "metadata": {"name": name, "namespace": NS, "labels": dict(labels or {}),
                         "annotations": dict(annotations or {})},
            "spec": spec}


# -- pure ------------------------------------------------------------------------------------------

def test_tree_id_is_fnv1a_64_of_namespace_slash_name():
    # Go: fnv.New64a(); Write([]byte("default/p")); strconv.FormatUint(Sum64(), 10)
    assert tree_id("default", "p") == "7107783898700600073"
    assert tree_id("default", "p") != tree_id("default", "q")


def test_desired_quota_sums_matching_nodes_times_ratio():
    nodes = [node("a", labels={"pool": "x"}), node("b", labels={"pool": "x"}, cpu="3900m", memory="1Gi",
                                                    unschedulable=True),
             node("c", labels={"pool": "y"}, cpu="100"), node("d", labels={"pool": "x"}, cpu="2", ready=False)]
    p = profile("p", "q", selector={"matchLabels": {"pool": "x"}}, ratio="0.5", quota_labels={"team": "t"})
    q = desired_quota(p, nodes, None, "42")
    assert q["metadata"] == {
        "name": "q", "namespace": NS,
        "labels": {P + "profile": "p", "team": "t", P + "tree-id": "42", P + "is-root": "true"},
        "annotations": {
            # (10 + 3.9 + 2) cpu * 0.5 at milli precision, (20Gi + 1Gi + 20Gi) * 0.5 bytes, pods integer
            P + "total-resource": '{"cpu":"7950m","memory":"20992Mi","pods":"165"}',
            # b is cordoned, d is not Ready
            P + "unschedulable-resource": '{"cpu":"2950m","memory":"10752Mi","pods":"110"}'}}
    assert q["spec"] == {"min": {"cpu": "7950m", "memory": "20992Mi"},
                         "max": {"cpu": QUOTA_MAX, "memory": QUOTA_MAX}}
    assert QUOTA_MAX == "4611686018427387"


def test_desired_quota_without_ratio_keys_and_existing_quota():
    nodes = [node("a", cpu="3900m"), node("b", cpu="100m")]
    p = profile("p", "q", annotations={P + "resource-keys": '["cpu","nvidia.com/gpu"]'})
    current = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
               "metadata": {"name": "q", "namespace": NS, "resourceVersion": "7",
                            "labels": {P + "parent": "koordinator-root-quota"}, "annotations": {"keep": "me"}},
               "spec": {"min": {"cpu": "1"}}}
    q = desired_quota(p, nodes, current, "42")
    # No ratio: the sum in the first term's format; a key no node has is 0.
    assert q["spec"]["min"] == {"cpu": "4", "nvidia.com/gpu": "0"}
    assert q["metadata"]["labels"][P + "parent"] == "koordinator-root-quota"
    assert q["metadata"]["annotations"]["keep"] == "me"
    assert q["metadata"]["resourceVersion"] == "7"
    assert current["spec"] == {"min": {"cpu": "1"}}  # not modified
    assert quota_differs(current, q)
    same = json.loads(json.dumps(q))
    same["spec"]["min"]["cpu"] = "4000m"  # the same value, spelled differently
    assert not quota_differs(same, q)


@pytest.mark.parametrize("raw, expected", [(None, None), ("0.5", 0.5), ("1", 1.0), ("1e-1", 0.1), (".25", 0.25),
                                           ("1.5", 1.5), ("-1", -1.0)])
def test_parse_ratio(raw, expected):
    assert parse_ratio(raw) == expected


@pytest.mark.parametrize("raw", ["abc", "", " 0.5", "0x1p-1", "1_0", "50%"])
def test_parse_ratio_rejects_what_is_not_a_number(raw):
    with pytest.raises(InvalidProfile, match=r'^spec\.resourceRatio: Invalid value: '):
        parse_ratio(raw)


def test_out_of_range_ratio_counts_as_one():
    q = desired_quota(profile("p", "q", ratio="2"), [node("a", cpu="3")], None, "1")
    assert q["spec"]["min"]["cpu"] == "3"


@pytest.mark.parametrize("change, message", [
    ({"spec": {"quotaName": "q", "nodeSelector": {"matchExpressions": [{"key": "k", "operator": "Bogus"}]}}},
     'spec.nodeSelector: Invalid value: {"matchExpressions":[{"key":"k","operator":"Bogus"}]}: '
     '"Bogus" is not a valid label selector operator'),
    ({"spec": {"quotaName": "q", "nodeSelector": {}, "resourceRatio": "abc"}},
     'spec.resourceRatio: Invalid value: "abc": must be a number in (0, 1]'),
    ({"metadata": {"name": "p", "namespace": NS, "annotations": {P + "resource-keys": "cpu"}}},
     f'metadata.annotations[{P}resource-keys]: Invalid value: "cpu": must be a JSON list of resource names'),
    ({"spec": {"quotaName": "", "nodeSelector": {}}}, "spec.quotaName: Required value"),
])
def test_bad_profile_input_names_the_field_and_value(change, message):
    p = {**profile("p", "q"), **change}
    with pytest.raises(InvalidProfile) as err:
        desired_quota(p, [node("a")], None, "1")
    assert str(err.value).startswith(message)


# -- end to end --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def manager(crd_server, crd_client, tmp_path_factory) -> Iterator[InProcessManager]:
    port = free_port()
    ensure_webhooks(crd_client, port)
    crd_client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
    m = InProcessManager(crd_server.kubeconfig, tmp_path_factory.mktemp("certs"),
                         "--controllers=quotaprofile", webhook_port=port)
    m.start()
    try:
        m.wait_for_webhooks(crd_client)
        yield m
    finally:
        m.stop()


def get_or_none(client: Client, kind: str, name: str, namespace: str | None = None) -> dict | None:
    try:
        return client.get(kind, name, namespace)
    except NotFound:
        return None


def annotation_json(quota: dict, key: str) -> dict:
    return json.loads(quota["metadata"]["annotations"][P + key])


def warnings_for(client: Client, name: str) -> list[str]:
    return [e["message"] for e in client.list("Event", NS)["items"]
            if e["involvedObject"].get("name") == name and e["involvedObject"].get("kind") == "ElasticQuotaProfile"
            and e["type"] == "Warning"]


def test_profile_keeps_its_quota_in_step_with_the_nodes(manager, crd_client):
    c = crd_client
    c.create(node("qp-a1", labels={"pool": "a"}, cpu="10", memory="20Gi"))
    c.create(node("qp-a2", labels={"pool": "a"}, cpu="6", memory="8Gi"))
    c.create(node("qp-b1", labels={"pool": "b"}, cpu="100", memory="100Gi"))
    p = profile("pool-a", "quota-a", selector={"matchLabels": {"pool": "a"}}, ratio="0.5",
                quota_labels={"team": "search"})
    c.create(p)

    def quota_with(min_cpu=None, unschedulable=None):
        q = get_or_none(c, "ElasticQuota", "quota-a", NS)
        if q is None:
            return None
        if min_cpu is not None and q["spec"]["min"]["cpu"] != min_cpu:
            return None
        if unschedulable is not None and annotation_json(q, "unschedulable-resource") != unschedulable:
            return None
        return q

    # (10 + 6) cpu and (20 + 8) Gi memory, halved; pool b is not selected.
    q = wait_until(lambda: quota_with("8"), message="quota-a created from pool a at ratio 0.5")
    assert q["spec"]["min"] == {"cpu": "8", "memory": "14Gi"}
    assert q["spec"]["max"] == {"cpu": "4611686018427387", "memory": "4611686018427387"}
    labels = q["metadata"]["labels"]
    tree = tree_id(NS, "pool-a")
    assert labels[P + "profile"] == "pool-a" and labels["team"] == "search"
    assert labels[P + "tree-id"] == tree and labels[P + "is-root"] == "true"
    # the ElasticQuota mutating webhook filled in the parent on create; the controller keeps it
    assert labels[P + "parent"] == "koordinator-root-quota"
    assert annotation_json(q, "total-resource") == {"cpu": "8", "memory": "14Gi", "pods": "110"}
    assert annotation_json(q, "unschedulable-resource") == {}
    # the tree id is written back to the profile
    assert wait_until(lambda: (c.get("ElasticQuotaProfile", "pool-a", NS)["metadata"].get("labels") or {}).get(
        P + "tree-id"), message="tree id on the profile") == tree

    # Nothing changed: reconciling again writes nothing.
    version = q["metadata"]["resourceVersion"]
    manager.parts.quotaprofile.reconcile(f"{NS}/pool-a")
    assert c.get("ElasticQuota", "quota-a", NS)["metadata"]["resourceVersion"] == version

    # A cordoned node moves to unschedulable-resource; min still counts it.
    a2 = c.get("Node", "qp-a2")
    a2["spec"]["unschedulable"] = True
    c.update(a2)
    q = wait_until(lambda: quota_with("8", {"cpu": "3", "memory": "4Gi", "pods": "55"}),
                   message="cordoned node in unschedulable-resource")
    # A NotReady node too.
    a1 = c.get("Node", "qp-a1")
    a1["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    c.update_status(a1)
    wait_until(lambda: quota_with("8", {"cpu": "8", "memory": "14Gi", "pods": "110"}),
               message="NotReady node in unschedulable-resource")

    # A deleted node lowers min; a node relabelled into the pool raises it.
    c.delete("Node", "qp-a2")
    q = wait_until(lambda: quota_with("5", {"cpu": "5", "memory": "10Gi", "pods": "55"}),
                   message="deleted node leaves min")
    assert q["spec"]["min"]["memory"] == "10Gi"
    c.patch("Node", "qp-b1", {"metadata": {"labels": {"pool": "a"}}})
    q = wait_until(lambda: quota_with("55"), message="relabelled node joins")
    assert q["spec"]["min"]["memory"] == "60Gi"
    # Allocatable changes follow too.
    b1 = c.get("Node", "qp-b1")
    b1["status"]["allocatable"]["cpu"] = "50"
    c.update_status(b1)
    wait_until(lambda: quota_with("30"), message="allocatable change")

    # Someone edits the quota: put back.
    q = c.get("ElasticQuota", "quota-a", NS)
    q["spec"]["min"]["cpu"] = "1"
    c.update(q)
    wait_until(lambda: quota_with("30") and quota_with("30")["metadata"]["resourceVersion"] !=
               q["metadata"]["resourceVersion"], message="edited quota restored")


def test_bad_profile_input_is_a_warning_event_and_changes_nothing(manager, crd_client):
    c = crd_client
    c.create(node("qp-c1", labels={"pool": "c"}, cpu="4", memory="4Gi"))
    bad = profile("bad-selector", "quota-bad", selector={"matchExpressions": [{"key": "pool", "operator": "Bogus"}]})
    c.create(bad)
    events = wait_until(lambda: warnings_for(c, "bad-selector"), message="Warning for the bad selector")
    assert events[0].startswith("spec.nodeSelector: Invalid value:") and '"Bogus"' in events[0]
    # nothing else: no quota, no tree id on the profile
    manager.parts.quotaprofile.reconcile(f"{NS}/bad-selector")
    assert get_or_none(c, "ElasticQuota", "quota-bad", NS) is None
    assert P + "tree-id" not in (c.get("ElasticQuotaProfile", "bad-selector", NS)["metadata"].get("labels") or {})

    # A working profile given a ratio that is not a number keeps its quota as it is.
    good = profile("pool-c", "quota-c", selector={"matchLabels": {"pool": "c"}})
    c.create(good)
    q = wait_until(lambda: get_or_none(c, "ElasticQuota", "quota-c", NS), message="quota-c")
    assert q["spec"]["min"] == {"cpu": "4", "memory": "4Gi"}
    version = q["metadata"]["resourceVersion"]
    c.patch("ElasticQuotaProfile", "pool-c", {"spec": {"resourceRatio": "abc"}}, namespace=NS)
    events = wait_until(lambda: warnings_for(c, "pool-c"), message="Warning for the bad ratio")
    assert events == ['spec.resourceRatio: Invalid value: "abc": must be a number in (0, 1]']
    manager.parts.quotaprofile.reconcile(f"{NS}/pool-c")
    assert c.get("ElasticQuota", "quota-c", NS)["metadata"]["resourceVersion"] == version

    # Fixed: the quota follows again.
    c.patch("ElasticQuotaProfile", "pool-c", {"spec": {"resourceRatio": "0.25"}}, namespace=NS)
    wait_until(lambda: c.get("ElasticQuota", "quota-c", NS)["spec"]["min"] == {"cpu": "1", "memory": "1Gi"},
               message="quota-c at ratio 0.25")
