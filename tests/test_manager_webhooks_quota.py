"""The ElasticQuota webhooks (koordinator_roles.manager.webhooks.elasticquota) and InformerListers.

Quota tree cases are built by hand from the reference (B.6.3, B.6.4); each message is Koordinator's.
"""

from __future__ import annotations

import copy
import uuid

import pytest

from koordinator.apis.schemas import crd_manifests
from koordinator.local import free_port
from koordinator.runtime.errors import AlreadyExists, ApiError, NotFound
from koordinator.runtime.informer import InformerFactory
from koordinator_roles.manager.webhooks import InformerListers, StaticListers
from koordinator_roles.manager.local import ensure_webhooks
from koordinator_roles.manager.webhooks.elasticquota import ElasticQuotaMutatingHandler, ElasticQuotaValidatingHandler
from tests.manager_harness import InProcessManager
from tests.waiting import wait_until

P = "quota.scheduling.koordinator.sh/"


def quota(name, *, parent=None, is_parent=False, tree=None, min=None, max=None, labels=None, annotations=None,
          namespace="default", status=None):
    lab = dict(labels or {})
    if parent is not None:
        lab[P + "parent"] = parent
    if is_parent:
        lab[P + "is-parent"] = "true"
    if tree is not None:
        lab[P + "tree-id"] = tree
    obj = {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
           "metadata": {"name": name, "namespace": namespace, "labels": lab, "annotations": dict(annotations or {})},
           "spec": {}}
    if min is not None:
        obj["spec"]["min"] = min
    if max is not None:
        obj["spec"]["max"] = max
    if status is not None:
        obj["status"] = status
    return obj


def review(obj, op="CREATE", old=None):
    return {"uid": "u", "operation": op, "object": obj if op != "DELETE" else None,
            "oldObject": old if op != "DELETE" else obj, "namespace": "default",
            "resource": {"group": "scheduling.sigs.k8s.io", "version": "v1alpha1", "resource": "elasticquotas"}}


def validate(obj, cached=(), op="CREATE", old=None, gates=None, pods=()):
    h = ElasticQuotaValidatingHandler(StaticListers(elastic_quotas=cached, pods=pods), gates or {})
    return h(review(obj, op, old))


def mutate(obj, cached=()):
    return ElasticQuotaMutatingHandler(StaticListers(elastic_quotas=cached), {})(review(obj))


CPU10 = {"cpu": "10", "memory": "10Gi"}


# -- mutating ------------------------------------------------------------------------------------

def test_mutating_fills_parent_and_shared_weight():
    resp = mutate(quota("q", max={"memory": "1Gi", "cpu": "2000m"}))
    out = resp.patched
    assert out["metadata"]["labels"][P + "parent"] == "koordinator-root-quota"
    # json.Marshal of spec.max: keys sorted, canonical quantities (2000m -> 2)
    assert out["metadata"]["annotations"][P + "shared-weight"] == '{"cpu":"2","memory":"1Gi"}'


def test_mutating_copies_tree_id_from_parent_and_needs_the_parent():
    parent = quota("parent", is_parent=True, tree="t1", max=CPU10)
    out = mutate(quota("child", parent="parent", max=CPU10), cached=[parent]).patched
    assert out["metadata"]["labels"][P + "tree-id"] == "t1"
    resp = mutate(quota("child", parent="ghost", max=CPU10))
    assert not resp.allowed and resp.code == 400
    assert resp.message == "fill quota child failed, parent not exist"


def test_mutating_syncs_shared_weight_keys_with_max():
    q = quota("q", max={"cpu": "4", "memory": "8Gi"}, annotations={P + "shared-weight": '{"cpu":"1","gpu":"3"}'})
    out = mutate(q).patched
    # gpu dropped (not in max), memory added with max's value, cpu kept
    assert out["metadata"]["annotations"][P + "shared-weight"] == '{"cpu":"1","memory":"8Gi"}'
    same = quota("q", parent="koordinator-root-quota", max={"cpu": "4"}, annotations={P + "shared-weight": '{"cpu":"9"}'})
    assert mutate(same).patched is None


def test_mutating_skips_root_and_non_create():
    assert mutate(quota("koordinator-root-quota", max=CPU10)).patched is None
    h = ElasticQuotaMutatingHandler(StaticListers(), {})
    assert h(review(quota("q", max=CPU10), op="UPDATE", old=quota("q"))).patched is None


# -- self checks ---------------------------------------------------------------------------------

def test_self_checks_in_order():
    assert validate(quota("q", max={"cpu": "-1", "memory": "-1"})).message == \
        "q quota.Spec.Max's value < 0, in dimensions :[cpu memory]"
    assert validate(quota("q", max=CPU10, min={"cpu": "-2"})).message == \
        "q quota.Spec.Min's value < 0, in dimensions :[cpu]"
    assert validate(quota("q", max=CPU10, annotations={P + "shared-weight": '{"cpu":"-1"}'})).message == \
        f"q quota.Annotation[{P}shared-weight]'s value < 0, in dimension :[cpu]"
    assert validate(quota("q", max={"cpu": "10"}, min={"gpu": "1"})).message == \
        "resourceKey gpu of quota q is included in min, which is not included in max"
    # Koordinator's text, then the fields and values (this build's addition)
    assert validate(quota("q", max={"cpu": "10"}, min={"cpu": "12000m"})).message == \
        "resourceKey cpu of quota q min 12 > max 10 (spec.min[cpu]: 12 > spec.max[cpu]: 10)"


def test_max_strict_check_resource_keys():
    ann = {P + "max-strict-check-resource-keys": '["cpu","memory"]'}
    q = quota("q", max={"cpu": "4"}, annotations=ann, status={"used": {"cpu": "5"}})
    assert validate(q).message == "resourceKey cpu of quota q max 4 < used 5"
    q = quota("q", max={"cpu": "4"}, annotations=ann, status={"used": {"memory": "1Gi"}})
    assert validate(q).message == ("resourceKey memory of quota q is included in used, which is not included in max "
                                   "but should check max >= used")
    assert validate(quota("q", max={"cpu": "4"}, annotations=ann, status={"used": {"cpu": "4"}})).allowed


# -- ADD -------------------------------------------------------------------------------------------

def test_add_name_and_namespace_conflicts():
    cached = [quota("a", max=CPU10, annotations={P + "namespaces": '["ns1"]'})]
    assert validate(quota("a", max=CPU10), cached).message == "AddQuota quota already exist:a"
    assert validate(quota("b", max=CPU10, annotations={P + "namespaces": '["ns1"]'}), cached).message == \
        "AddQuota quota b's annotation namespace ns1 is already bound to quota a"


def test_add_under_a_parent():
    parent = quota("parent", is_parent=True, max=CPU10, min={"cpu": "4", "memory": "4Gi"})
    assert validate(quota("c", parent="parent", max=CPU10, min={"cpu": "4"}), [parent]).allowed
    assert validate(quota("c", parent="ghost", max=CPU10)).message == \
        "c has parentName ghost but not find parentInfo in quotaInfoMap"
    leaf = quota("leaf", max=CPU10)
    assert validate(quota("c", parent="leaf", max=CPU10), [leaf]).message == \
        "c has parentName leaf but the parentQuotaInfo's IsParent is false"


def test_tree_id_rules():
    parent = quota("parent", is_parent=True, tree="t1", max=CPU10, min=CPU10)
    assert validate(quota("c", parent="parent", tree="t2", max=CPU10), [parent]).message == \
        "c tree id is different from parent parent, [t2] vs [t1]"
    old = quota("c", parent="parent", tree="t1", max=CPU10)
    new = quota("c", parent="parent", tree="t3", max=CPU10)
    assert validate(new, [parent, old], op="UPDATE", old=old).message == "c tree id changed [t1] vs [t3]"
    child = quota("kid", parent="p2", tree="x", max=CPU10)
    p2_old = quota("p2", is_parent=True, tree="x", max=CPU10, min=CPU10)
    p2_new = quota("p2", is_parent=True, tree="x", max=CPU10, min=CPU10, annotations={P + "namespaces": '["z"]'})
    assert validate(p2_new, [p2_old, child], op="UPDATE", old=p2_old).allowed


def test_key_checks():
    parent = quota("parent", is_parent=True, max={"cpu": "10", "memory": "1Gi"}, min={"cpu": "4"})
    msg = validate(quota("c", parent="parent", max={"cpu": "10"}), [parent]).message
    assert msg == ("failed to check sub and parent group quotaKey, err: checkSubAndParentGroupQuotaKey failed: "
                   "parent's max keys are not the same with c's")
    # with the gate a subset of the parent's max keys is fine
    assert validate(quota("c", parent="parent", max={"cpu": "10"}), [parent],
                    gates={"ElasticQuotaEnableUpdateResourceKey": True}).allowed
    msg = validate(quota("c", parent="parent", max={"cpu": "1", "memory": "1", "gpu": "1"}), [parent],
                   gates={"ElasticQuotaEnableUpdateResourceKey": True}).message
    assert msg.endswith("c's max keys are not all included in parent's")
    msg = validate(quota("c", parent="parent", max={"cpu": "10", "memory": "1Gi"}, min={"memory": "1"}),
                   [parent]).message
    assert msg.endswith("checkSubAndParentGroupQuotaKey failed: c's min keys are not all included in parent's")


def test_min_sums():
    parent = quota("parent", is_parent=True, max=CPU10, min={"cpu": "4", "memory": "4Gi"})
    sibling = quota("s", parent="parent", max=CPU10, min={"cpu": "3"})
    # 3 + 2 = 5 cpu > 4
    assert validate(quota("c", parent="parent", max=CPU10, min={"cpu": "2"}), [parent, sibling]).message == (
        "checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: parent "
        "(quota c spec.min[cpu]: 2, children of parent would sum to 5 > parent spec.min[cpu]: 4)")
    assert validate(quota("c", parent="parent", max=CPU10, min={"cpu": "1"}), [parent, sibling]).allowed
    force = quota("c", parent="parent", max=CPU10, min={"cpu": "2"}, labels={P + "allow-force-update": "true"})
    assert validate(force, [parent, sibling]).allowed
    root_marked = quota("c", parent="parent", max=CPU10, min={"cpu": "2"}, labels={P + "is-root": "true"})
    assert validate(root_marked, [parent, sibling]).allowed
    # lowering the parent's min under its children's sum (3 cpu)
    new_parent = quota("parent", is_parent=True, max=CPU10, min={"cpu": "2", "memory": "4Gi"})
    assert validate(new_parent, [parent, sibling], op="UPDATE", old=parent).message == (
        "checkMinQuotaSum all children's MinQuota > current MinQuota, current: parent "
        "(children [s] spec.min[cpu] sum to 3 > parent spec.min[cpu]: 2)")
    # a resource the parent has no min for counts as 0
    gpu_max = {**CPU10, "nvidia.com/gpu": "8"}
    gpu_parent = quota("parent", is_parent=True, max=gpu_max, min={"cpu": "4", "nvidia.com/gpu": "0"})
    gpu_child = quota("g", parent="parent", max=gpu_max, min={"nvidia.com/gpu": "1"})
    assert validate(gpu_child, [gpu_parent]).message.endswith(
        "(quota g spec.min[nvidia.com/gpu]: 1, children of parent would sum to 1 > parent spec.min[nvidia.com/gpu]: 0)")


def test_parent_without_min_fails_when_children_have_min():
    parent = quota("parent", is_parent=True, max=CPU10)
    msg = validate(quota("c", parent="parent", max=CPU10), [parent])
    assert msg.allowed  # no min anywhere
    msg = validate(quota("c", parent="parent", max=CPU10, min={}), [parent])
    assert msg.allowed


# -- UPDATE --------------------------------------------------------------------------------------

def test_update_unchanged_tree_fields_is_skipped_and_protected_quotas():
    old = quota("q", max={"cpu": "-1"})
    new = quota("q", max={"cpu": "-1"}, labels={"other": "x"})
    assert validate(new, [], op="UPDATE", old=old).allowed  # only irrelevant fields changed
    for name in ("koordinator-system-quota", "koordinator-root-quota"):
        old = quota(name, max=CPU10)
        assert validate(quota(name, max={"cpu": "20"}), [old], op="UPDATE", old=old).message == f"invalid quota {name}"
    old = quota("q", max=CPU10)
    assert validate(quota("q", max={"cpu": "11"}), [], op="UPDATE", old=old).message == \
        "UpdateQuota quota not exist in quotaInfoMap:q"


def test_update_namespace_binding_conflict():
    a = quota("a", max=CPU10, annotations={P + "namespaces": '["ns1"]'})
    b = quota("b", max=CPU10)
    new_b = quota("b", max=CPU10, annotations={P + "namespaces": '["ns1"]'})
    assert validate(new_b, [a, b], op="UPDATE", old=b).message == \
        "UpdadteQuota, quota b update namespaces, but namespace ns1 is already bound to quota a"


def test_is_parent_changes():
    parent = quota("parent", is_parent=True, max=CPU10, min=CPU10)
    child = quota("c", parent="parent", max=CPU10)
    new = quota("parent", max=CPU10, min=CPU10)
    assert validate(new, [parent, child], op="UPDATE", old=parent).message == \
        "quota has children, isParent is forbidden to modify as false, quotaName:parent"
    leaf = quota("leaf", max=CPU10)
    to_parent = quota("leaf", is_parent=True, max=CPU10)
    bound = {"metadata": {"name": "p1", "namespace": "x", "labels": {P + "name": "leaf"}}}
    assert validate(to_parent, [leaf], op="UPDATE", old=leaf, pods=[bound]).message == \
        "quota has bound pods, isParent is forbidden to modify as true, quotaName: leaf"
    in_ns = {"metadata": {"name": "p1", "namespace": "leaf"}}
    assert not validate(to_parent, [leaf], op="UPDATE", old=leaf, pods=[in_ns]).allowed
    assert validate(to_parent, [leaf], op="UPDATE", old=leaf).allowed


# -- DELETE --------------------------------------------------------------------------------------

def test_delete_rules():
    for name in ("koordinator-system-quota", "koordinator-root-quota", "koordinator-default-quota"):
        assert validate(quota(name), op="DELETE").message == f"can not delete quotaGroup :{name}"
    assert validate(quota("gone"), op="DELETE").message == "not found quota:gone"
    parent = quota("parent", is_parent=True, max=CPU10)
    kids = [quota(f"c{i}", parent="parent", max=CPU10) for i in range(2)]
    assert validate(parent, [parent, *kids], op="DELETE").message == \
        "delete quota failed, quota parent has 2 child quotas"
    leaf = quota("leaf", max=CPU10)
    pods = [{"metadata": {"name": f"p{i}", "namespace": "n", "labels": {P + "name": "leaf"}}} for i in range(3)]
    assert validate(leaf, [leaf], op="DELETE", pods=pods[:2]).message == \
        "delete quota failed, quota leaf has 2 child pods: p0, p1"
    assert validate(leaf, [leaf], op="DELETE", pods=pods).message == \
        "delete quota failed, quota leaf has 3 child pods: p0, p1, ..."
    assert validate(leaf, [leaf], op="DELETE").allowed
    assert validate(leaf, [leaf], op="DELETE").code == 0


def test_rejections_are_400():
    resp = validate(quota("q", max={"cpu": "-1"}))
    assert not resp.allowed and resp.code == 400


# -- InformerListers against the embedded API server ---------------------------------------------

def install_crds(client, *files):
    """Create the CRDs (idempotent) and wait until their resources are served."""
    manifests = crd_manifests()
    for f in files:
        try:
            client.create(manifests[f])
        except AlreadyExists:
            pass

    def served():
        try:
            client.list("ElasticQuota")
            client.list("ClusterColocationProfile")
            return True
        except ApiError:
            return False
    wait_until(served, message="CRDs served")


def test_informer_listers_read_the_cluster(client, namespace):
    install_crds(client, "scheduling.sigs.k8s.io_elasticquotas.yaml",
                 "config.koordinator.sh_clustercolocationprofiles.yaml")
    factory = InformerFactory(client)
    listers = InformerListers(factory)
    suffix = uuid.uuid4().hex[:6]
    client.create({"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": "bound", "namespace": namespace, "labels": {P + "name": f"q-{suffix}"}},
                   "spec": {"containers": [{"name": "c", "image": "nginx"}]}})
    client.create(quota(f"q-{suffix}", max=CPU10, namespace=namespace))
    client.create({"apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
                   "metadata": {"name": f"prof-{suffix}"}, "spec": {"qosClass": "BE"}})
    client.create({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                   "metadata": {"name": f"pc-{suffix}"}, "value": 5100})
    factory.start()
    try:
        assert factory.wait_for_sync(20)
        wait_until(lambda: any(q["metadata"]["name"] == f"q-{suffix}" for q in listers.elastic_quotas()),
                   message="quota in cache")
        assert [p["metadata"]["name"] for p in listers.pods_with_label(P + "name", f"q-{suffix}")] == ["bound"]
        assert [p["metadata"]["name"] for p in listers.pods(namespace)] == ["bound"]
        assert listers.namespace(namespace)["metadata"]["name"] == namespace
        assert listers.priority_class(f"pc-{suffix}")["value"] == 5100
        assert any(p["metadata"]["name"] == f"prof-{suffix}" for p in listers.colocation_profiles())
        assert listers.namespace(f"missing-{suffix}") is None
        # a namespace created after the caches synced is found at once (live read on a cache miss)
        fresh = f"fresh-{suffix}"
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": fresh}})
        assert listers.namespace(fresh)["metadata"]["name"] == fresh
        assert isinstance(listers.nodes(), list)
        # the quota webhook reads the bound pod through the index
        resp = ElasticQuotaValidatingHandler(listers, {})(review(quota(f"q-{suffix}", namespace=namespace),
                                                                 op="DELETE"))
        assert resp.message == f"delete quota failed, quota q-{suffix} has 1 child pods: bound"
    finally:
        factory.stop()
        client.delete("ClusterColocationProfile", f"prof-{suffix}")
        client.delete("PriorityClass", f"pc-{suffix}")


# -- through the API server: the manager's webhook server behind the real webhook configurations ----

@pytest.fixture(scope="module")
def webhook_manager(crd_server, crd_client, tmp_path_factory):
    port = free_port()
    ensure_webhooks(crd_client, port)
    m = InProcessManager(crd_server.kubeconfig, tmp_path_factory.mktemp("certs"), "--controllers=-noderesource",
                         webhook_port=port).start()
    try:
        m.wait_for_webhooks(crd_client)
        yield m
    finally:
        m.stop()


def _in_webhook_cache(manager, name):
    return wait_until(lambda: any(q["metadata"]["name"] == name
                                  for q in manager.runtime.informers.informer("ElasticQuota").store.list()),
                      message=f"{name} in the webhook's quota cache")


def _denied(call):
    with pytest.raises(ApiError) as err:
        call()
    assert 'admission webhook "velasticquota.koordinator.sh" denied the request: ' in err.value.message
    return err.value.message


def test_min_above_max_is_refused_and_nothing_is_stored(webhook_manager, crd_client):
    c = crd_client
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wq-self"}})
    message = _denied(lambda: c.create(quota("upside-down", namespace="wq-self", min={"cpu": "30"},
                                             max={"cpu": "20"})))
    assert message.endswith("resourceKey cpu of quota upside-down min 30 > max 20 "
                            "(spec.min[cpu]: 30 > spec.max[cpu]: 20)")
    with pytest.raises(NotFound):
        c.get("ElasticQuota", "upside-down", "wq-self")
    # An update that would turn a stored quota upside down leaves it as it was.
    stored = c.create(quota("fine", namespace="wq-self", min={"cpu": "1"}, max={"cpu": "20"}))
    _in_webhook_cache(webhook_manager, "fine")
    bad = copy.deepcopy(stored)
    bad["spec"]["min"] = {"cpu": "21"}
    message = _denied(lambda: c.update(bad))
    assert "(spec.min[cpu]: 21 > spec.max[cpu]: 20)" in message
    again = c.get("ElasticQuota", "fine", "wq-self")
    assert again["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"]
    assert again["spec"]["min"] == {"cpu": "1"}


def test_child_min_above_parent_min_is_refused_naming_both(webhook_manager, crd_client):
    c = crd_client
    c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "wq-tree"}})
    limits = {"cpu": "20", "memory": "20Gi"}
    c.create(quota("wq-parent", namespace="wq-tree", is_parent=True, min={"cpu": "10", "memory": "10Gi"},
                   max=limits))
    _in_webhook_cache(webhook_manager, "wq-parent")
    message = _denied(lambda: c.create(quota("wq-child", namespace="wq-tree", parent="wq-parent",
                                             min={"cpu": "15", "memory": "5Gi"}, max=limits)))
    assert message.endswith("checkMinQuotaSum all brothers' MinQuota > parent MinQuota, parent: wq-parent "
                            "(quota wq-child spec.min[cpu]: 15, children of wq-parent would sum to 15 > "
                            "wq-parent spec.min[cpu]: 10)")
    with pytest.raises(NotFound):
        c.get("ElasticQuota", "wq-child", "wq-tree")
    # A child that fits, then an update past the parent: refused, the stored child unchanged.
    child = c.create(quota("wq-child", namespace="wq-tree", parent="wq-parent", min={"cpu": "5", "memory": "5Gi"},
                           max=limits))
    _in_webhook_cache(webhook_manager, "wq-child")
    bigger = copy.deepcopy(child)
    bigger["spec"]["min"]["cpu"] = "11"
    assert "(quota wq-child spec.min[cpu]: 11, children of wq-parent would sum to 11 > " in _denied(
        lambda: c.update(bigger))
    assert c.get("ElasticQuota", "wq-child", "wq-tree")["metadata"]["resourceVersion"] == \
        child["metadata"]["resourceVersion"]
    # Lowering the parent under its child's min names the children.
    parent = c.get("ElasticQuota", "wq-parent", "wq-tree")
    lower = copy.deepcopy(parent)
    lower["spec"]["min"]["cpu"] = "2"
    assert _denied(lambda: c.update(lower)).endswith(
        "checkMinQuotaSum all children's MinQuota > current MinQuota, current: wq-parent "
        "(children [wq-child] spec.min[cpu] sum to 5 > wq-parent spec.min[cpu]: 2)")
    assert c.get("ElasticQuota", "wq-parent", "wq-tree")["spec"]["min"]["cpu"] == "10"
