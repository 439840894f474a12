"""The pod webhooks' decisions (koordinator_roles.manager.webhooks): /mutate-pod and /validate-pod.

Handlers are called with AdmissionReview request dicts and StaticListers; expected values are
computed by hand from the reference (B.6.1, B.6.2), the arithmetic noted beside each.
"""

from __future__ import annotations

import copy
import json
import random

import pytest

from koordinator_roles.manager.webhooks import StaticListers, register_webhooks
from koordinator_roles.manager.webhooks.pod_mutating import PodMutatingHandler, probability_percent
from koordinator_roles.manager.webhooks.pod_validating import PodValidatingHandler
from koordinator_roles.manager.webhooks.smp import strategic_merge

ERS = "node.koordinator.sh/extended-resource-spec"
QOS = "koordinator.sh/qosClass"


def review(obj, op="CREATE", old=None, namespace="default", resource="pods"):
    req = {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
           "resource": {"group": "", "version": "v1", "resource": resource},
           "namespace": namespace, "operation": op, "object": obj, "oldObject": old,
           "userInfo": {"username": "tester"}}
    return req


def pod(name="p", namespace="default", labels=None, annotations=None, containers=None, **spec):
    md = {"name": name, "namespace": namespace}
    if labels is not None:
        md["labels"] = labels
    if annotations is not None:
        md["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"containers": containers if containers is not None else
                     [{"name": "main", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"},
                                                                       "limits": {"cpu": "1", "memory": "2Gi"}}}],
                     **spec}}


def profile(name, **spec):
    annotations = spec.pop("annotations_", None)
    md = {"name": name}
    if annotations:
        md["annotations"] = annotations
    return {"apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
            "metadata": md, "spec": spec}


def ns(name, labels=None):
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}


BATCH_PC = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "koord-batch"},
            "value": 5500, "preemptionPolicy": "PreemptLowerPriority"}


def mutate(obj, *, profiles=(), namespaces=(ns("default"),), pcs=(BATCH_PC,), gates=None, rng=None, **kw):
    listers = StaticListers(colocation_profiles=profiles, namespaces=namespaces, priority_classes=pcs)
    handler = PodMutatingHandler(listers, gates or {}, rng=rng or random.Random(0))
    return handler(review(obj, **kw))


def result(resp, original):
    assert resp.allowed, resp.message
    return resp.patched if resp.patched is not None else original


# -- matching --------------------------------------------------------------------------------------

def test_no_profiles_no_batch_resources_leaves_the_pod_alone():
    resp = mutate(pod())
    assert resp.allowed and resp.patched is None


def test_update_is_never_mutated():
    p = profile("a", labels={"x": "y"})
    resp = mutate(pod(), profiles=[p], op="UPDATE", old=pod())
    assert resp.allowed and resp.patched is None


def test_namespace_selector_matches_namespace_labels():
    p = profile("a", namespaceSelector={"matchLabels": {"colo": "on"}}, labels={"hit": "1"})
    on = mutate(pod(), profiles=[p], namespaces=[ns("default", {"colo": "on"})])
    off = mutate(pod(), profiles=[p], namespaces=[ns("default", {"colo": "off"})])
    assert result(on, None)["metadata"]["labels"]["hit"] == "1"
    assert off.patched is None


def test_missing_namespace_counts_as_a_selector_error_and_matches():
    # Koordinator: a namespace Get error leaves the profile matched.
    p = profile("a", namespaceSelector={"matchLabels": {"colo": "on"}}, labels={"hit": "1"})
    resp = mutate(pod(namespace="ghost"), profiles=[p], namespaces=[])
    assert resp.patched["metadata"]["labels"]["hit"] == "1"


def test_pod_selector_and_empty_selectors():
    sel = profile("a", selector={"matchLabels": {"app": "web"}}, labels={"a": "1"})
    empty = profile("b", selector={}, namespaceSelector={}, labels={"b": "1"})
    out = result(mutate(pod(labels={"app": "web"}), profiles=[sel, empty]), None)
    assert out["metadata"]["labels"] == {"app": "web", "a": "1", "b": "1"}
    out = result(mutate(pod(labels={"app": "db"}), profiles=[sel, empty]), None)
    assert out["metadata"]["labels"] == {"app": "db", "b": "1"}


def test_unparseable_selector_counts_as_matched():
    bad = profile("a", selector={"matchExpressions": [{"key": "k", "operator": "Bogus"}]}, labels={"a": "1"})
    assert mutate(pod(), profiles=[bad]).patched["metadata"]["labels"]["a"] == "1"


def test_empty_pod_namespace_uses_the_request_namespace_and_is_restored():
    p = profile("a", namespaceSelector={"matchLabels": {"colo": "on"}}, labels={"hit": "1"})
    obj = pod(namespace="")
    del obj["metadata"]["namespace"]
    resp = mutate(obj, profiles=[p], namespaces=[ns("team", {"colo": "on"})], namespace="team")
    assert resp.patched["metadata"]["labels"] == {"hit": "1"}
    assert "namespace" not in resp.patched["metadata"]


def test_profiles_apply_sorted_by_name_later_overrides_earlier():
    z = profile("z", labels={"who": "z"}, schedulerName="z-sched")
    a = profile("a", labels={"who": "a"}, schedulerName="a-sched")
    out = mutate(pod(), profiles=[z, a]).patched
    assert out["metadata"]["labels"]["who"] == "z"
    assert out["spec"]["schedulerName"] == "z-sched"


# -- probability ---------------------------------------------------------------------------------

class FixedDraw:
    """randrange(100) always returns ``value``."""

    def __init__(self, value):
        self.value = value

    def randrange(self, n):
        assert n == 100
        return self.value


@pytest.mark.parametrize("prob,draw,applied", [
    (0, 0, False),        # percent 0 always skips
    ("0%", 0, False),
    (100, 99, True),      # 100 never draws
    ("100%", 99, True),
    (50, 50, True),       # skip only when draw > percent: 50 > 50 is false
    (50, 51, False),
    ("50%", 51, False),
    ("50%", 10, True),
])
def test_probability_rule(prob, draw, applied):
    p = profile("a", probability=prob, labels={"hit": "1"})
    resp = mutate(pod(), profiles=[p], rng=FixedDraw(draw))
    assert (resp.patched is not None and resp.patched["metadata"]["labels"].get("hit") == "1") == applied


def test_probability_with_a_seeded_rng_is_deterministic():
    p = profile("a", probability="50%", labels={"hit": "1"})
    outcomes = [mutate(pod(), profiles=[p], rng=random.Random(7 + i)).patched is not None for i in range(20)]
    again = [mutate(pod(), profiles=[p], rng=random.Random(7 + i)).patched is not None for i in range(20)]
    assert outcomes == again and True in outcomes and False in outcomes


def test_probability_values():
    assert probability_percent(profile("a")) == 100
    assert probability_percent(profile("a", probability=30)) == 30
    assert probability_percent(profile("a", probability="33%")) == 33


def test_invalid_probability_fails_the_admission():
    resp = mutate(pod(), profiles=[profile("a", probability="half")])
    assert not resp.allowed and resp.code == 500
    assert "string is not a percentage" in resp.message


# -- each mutation ---------------------------------------------------------------------------------

def test_labels_annotations_and_key_mappings():
    p = profile("a", labels={"l": "1"}, annotations={"an": "v"},
                labelKeysMapping={"src": "dst", "missing": "dst2"},
                annotationKeysMapping={"asrc": "adst", "amissing": "adst2"})
    out = mutate(pod(labels={"src": "S"}, annotations={"asrc": "A"}), profiles=[p]).patched
    assert out["metadata"]["labels"] == {"src": "S", "l": "1", "dst": "S", "dst2": ""}
    assert out["metadata"]["annotations"] == {"asrc": "A", "an": "v", "adst": "A", "adst2": ""}


def test_label_suffix_applies_after_mapping_and_only_to_existing_labels():
    p = profile("a", labelKeysMapping={"src": "dst"}, labelSuffixes={"dst": "-x", "absent": "-y"})
    out = mutate(pod(labels={"src": "v"}), profiles=[p]).patched
    assert out["metadata"]["labels"] == {"src": "v", "dst": "v-x"}


def test_scheduler_qos_priority_class_and_koordinator_priority():
    p = profile("a", schedulerName="koord-scheduler", qosClass="BE", priorityClassName="koord-batch",
                koordinatorPriority=1111)
    out = mutate(pod(), profiles=[p]).patched
    assert out["spec"]["schedulerName"] == "koord-scheduler"
    assert out["spec"]["priorityClassName"] == "koord-batch"
    assert out["spec"]["priority"] == 5500
    assert out["spec"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert out["metadata"]["labels"] == {QOS: "BE", "koordinator.sh/priority": "1111"}


def test_missing_priority_class_fails_with_the_not_found_text():
    resp = mutate(pod(), profiles=[profile("a", priorityClassName="nope")], pcs=[])
    assert not resp.allowed and resp.code == 500
    assert resp.message == 'priorityclasses.scheduling.k8s.io "nope" not found'


def test_patch_merges_containers_by_name():
    patch = {"metadata": {"labels": {"patched": "yes"}},
             "spec": {"containers": [{"name": "main", "env": [{"name": "A", "value": "1"}]},
                                     {"name": "side", "image": "busybox"}],
                      "tolerations": [{"key": "k", "operator": "Exists"}]}}
    obj = pod()
    obj["spec"]["tolerations"] = [{"key": "old", "operator": "Exists"}]
    out = mutate(obj, profiles=[profile("a", patch=patch)]).patched
    names = [c["name"] for c in out["spec"]["containers"]]
    assert names == ["main", "side"]
    main = out["spec"]["containers"][0]
    assert main["image"] == "nginx" and main["env"] == [{"name": "A", "value": "1"}]
    assert out["spec"]["tolerations"] == [{"key": "k", "operator": "Exists"}]  # plain list: replaced
    assert out["metadata"]["labels"]["patched"] == "yes"


def test_strategic_merge_directives():
    base = {"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    out = strategic_merge(base, {"metadata": {"labels": {"a": None}, "finalizers": ["y"]},
                                 "spec": {"containers": [{"name": "a", "$patch": "delete"}]}})
    assert out == {"metadata": {"labels": {"b": "2"}, "finalizers": ["x", "y"]},
                   "spec": {"containers": [{"name": "b"}]}}
    assert base["metadata"]["labels"] == {"a": "1", "b": "2"}  # not modified


# -- resource translation --------------------------------------------------------------------------

def batch_profile(name="a", **extra):
    return profile(name, qosClass="BE", priorityClassName="koord-batch", **extra)


def test_batch_translation_cpu_as_milli_integer_and_memory_bytes():
    out = mutate(pod(), profiles=[batch_profile()]).patched
    res = out["spec"]["containers"][0]["resources"]
    # cpu 500m -> 500 (milli value); limit 1 -> 1000, canonical "1k"; memory keeps its quantity
    assert res == {"requests": {"kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"},
                   "limits": {"kubernetes.io/batch-cpu": "1k", "kubernetes.io/batch-memory": "2Gi"}}


def test_mid_translation_and_limit_copied_to_request_and_overhead():
    mid_pc = {"metadata": {"name": "koord-mid"}, "value": 7500}
    containers = [{"name": "main", "resources": {"limits": {"cpu": "1500m", "memory": "1Gi"}}}]
    init = [{"name": "init", "resources": {"requests": {"cpu": "250m"}}}]
    obj = pod(containers=containers, initContainers=init, overhead={"cpu": "100m", "memory": "10Mi"})
    out = mutate(obj, profiles=[profile("a", priorityClassName="koord-mid")], pcs=[mid_pc]).patched
    main = out["spec"]["containers"][0]["resources"]
    assert main["limits"] == {"kubernetes.io/mid-cpu": "1500", "kubernetes.io/mid-memory": "1Gi"}
    assert main["requests"] == main["limits"]  # requests were absent: copied from the limits
    assert out["spec"]["initContainers"][0]["resources"] == {"requests": {"kubernetes.io/mid-cpu": "250"}}
    assert out["spec"]["overhead"] == {"kubernetes.io/mid-cpu": "100", "kubernetes.io/mid-memory": "10Mi"}
    # mid resources are not batch: no extended-resource-spec annotation
    assert ERS not in (out["metadata"].get("annotations") or {})


def test_free_and_prod_pods_are_not_translated():
    free_pc = {"metadata": {"name": "koord-free"}, "value": 3500}
    out = mutate(pod(), profiles=[profile("a", priorityClassName="koord-free", labels={"x": "1"})], pcs=[free_pc])
    assert out.patched["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}


def test_translation_runs_even_when_every_profile_is_skipped_by_probability():
    # spec.priority 5999 is koord-batch by band; the only profile is skipped (probability 0).
    obj = pod(priority=5999)
    out = mutate(obj, profiles=[profile("a", probability=0, labels={"x": "1"})]).patched
    assert "x" not in (out["metadata"].get("labels") or {})
    assert out["spec"]["containers"][0]["resources"]["requests"]["kubernetes.io/batch-cpu"] == "500"


def test_no_matched_profile_means_no_translation():
    obj = pod(priority=5999)
    other = profile("a", selector={"matchLabels": {"never": "x"}})
    out = mutate(obj, profiles=[other])
    assert out.patched is None


def test_skip_update_resources_annotation_and_gate():
    skip = batch_profile(annotations_={"config.koordinator.sh/skip-update-resources": ""})
    out = mutate(pod(), profiles=[skip]).patched
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert out["metadata"]["labels"][QOS] == "BE"
    out = mutate(pod(), profiles=[batch_profile()], gates={"ColocationProfileSkipMutatingResources": True}).patched
    assert out["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}


# -- extended-resource-spec ------------------------------------------------------------------------

def test_extended_resource_spec_annotation():
    out = mutate(pod(), profiles=[batch_profile()]).patched
    # Go's json.Marshal: keys sorted, limits before requests, canonical quantities.
    assert out["metadata"]["annotations"][ERS] == (
        '{"containers":{"main":{"limits":{"kubernetes.io/batch-cpu":"1k","kubernetes.io/batch-memory":"2Gi"},'
        '"requests":{"kubernetes.io/batch-cpu":"500","kubernetes.io/batch-memory":"1Gi"}}}}')
    assert json.loads(out["metadata"]["annotations"][ERS])["containers"]["main"]["requests"] == {
        "kubernetes.io/batch-cpu": "500", "kubernetes.io/batch-memory": "1Gi"}


def test_extended_resource_spec_without_profiles_and_unchanged():
    containers = [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": "1000"}}}]
    out = mutate(pod(containers=containers)).patched
    assert out["metadata"]["annotations"][ERS] == '{"containers":{"c":{"requests":{"kubernetes.io/batch-cpu":"1k"}}}}'
    # same content already there (different quantity spelling): no patch
    again = mutate(out)
    assert again.patched is None


def test_extended_resource_spec_gate_and_bad_annotation():
    containers = [{"name": "c", "resources": {"requests": {"kubernetes.io/batch-cpu": "1000"}}}]
    assert mutate(pod(containers=containers), gates={"DisableExtendedResourceSpec": True}).patched is None
    resp = mutate(pod(containers=containers, annotations={ERS: "{not json"}))
    assert not resp.allowed and resp.code == 500
    assert resp.message.startswith("failed to get current extended resource spec, err:")


def test_bad_object_is_a_400():
    resp = PodMutatingHandler(StaticListers(), {})(review("nope"))
    assert not resp.allowed and resp.code == 400


# -- validating ----------------------------------------------------------------------------------

def validate(obj, op="CREATE", old=None, gates=None, quotas=(), pods=()):
    handler = PodValidatingHandler(StaticListers(elastic_quotas=quotas, pods=pods), gates or {})
    return handler(review(obj, op=op, old=old))


def vpod(labels=None, priority=None, requests=None, name="p", namespace="default"):
    spec = {"containers": [{"name": "c", "resources": {"requests": requests or {"cpu": "1"}}}]}
    if priority is not None:
        spec["priority"] = priority
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels or {}}, "spec": spec}


def test_valid_pods_pass():
    assert validate(vpod({QOS: "LS"}, 9500)).allowed
    assert validate(vpod({QOS: "BE"}, 5500, {"kubernetes.io/batch-cpu": "1000"})).allowed
    assert validate(vpod()).allowed


def test_batch_resources_require_be():
    resp = validate(vpod({QOS: "LS"}, 5500, {"kubernetes.io/batch-cpu": "1000"}))
    assert not resp.allowed and resp.code == 400
    assert resp.message == ("labels.koordinator.sh/qosClass: Required value: must specify koordinator QoS BE "
                            "with koordinator colocation resources")


@pytest.mark.parametrize("qos,priority,klass", [
    ("BE", None, ""), ("BE", 9500, "koord-prod"),
    ("LSR", 7500, "koord-mid"), ("LSR", 5500, "koord-batch"), ("LSR", 3500, "koord-free"),
])
def test_forbidden_combinations(qos, priority, klass):
    resp = validate(vpod({QOS: qos}, priority, {"cpu": "2"}))
    assert not resp.allowed
    assert resp.message == (f"Pod: Forbidden: koordinator.sh/qosClass={qos} and priorityClass={klass} "
                            "cannot be used in combination")


def test_lsr_cpu_must_be_non_zero_and_integer():
    resp = validate(vpod({QOS: "LSE"}, 9500, {"memory": "1Gi"}))
    assert resp.message == ("pod.spec.containers[*].resources.requests: Required value: "
                            "LSR Pod must declare the requested CPUs")
    resp = validate(vpod({QOS: "LSR"}, 9500, {"cpu": "1500m"}))
    assert resp.message == ('pod.spec.containers[*].resources.requests: Invalid value: "1500m": '
                            "the requested CPUs of LSR Pod must be integer")


def test_several_errors_aggregate_like_go():
    # LSR without priority (forbidden) and without cpu (required)
    resp = validate(vpod({QOS: "LSR"}, None, {"memory": "1Gi"}))
    assert resp.message == (
        "[Pod: Forbidden: koordinator.sh/qosClass=LSR and priorityClass= cannot be used in combination, "
        "pod.spec.containers[*].resources.requests: Required value: LSR Pod must declare the requested CPUs]")


def test_immutability_on_update():
    old = vpod({QOS: "LS", "koordinator.sh/priority": "1"}, 9500)
    new = vpod({QOS: "BE", "koordinator.sh/priority": "2"}, 5500, {"kubernetes.io/batch-cpu": "1"})
    resp = validate(new, op="UPDATE", old=old)
    assert resp.message == (
        '[labels.koordinator.sh/qosClass: Invalid value: "BE": field is immutable, '
        'spec.priority: Invalid value: "koord-batch": field is immutable, '
        'labels.koordinator.sh/priority: Invalid value: "2": field is immutable]')
    resp = validate(vpod({QOS: "LS", "koordinator.sh/priority": "2"}, 9500), op="UPDATE", old=old,
                    gates={"ColocationProfileSkipValidatingPriority": True})
    assert resp.allowed


def quota(name, *, parent=None, is_parent=False, namespace="default", annotations=None):
    labels = {}
    if parent:
        labels["quota.scheduling.koordinator.sh/parent"] = parent
    if is_parent:
        labels["quota.scheduling.koordinator.sh/is-parent"] = "true"
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels, "annotations": annotations or {}},
            "spec": {"max": {"cpu": "10"}, "min": {"cpu": "1"}}}


def test_pod_in_parent_quota_is_rejected_unless_gate():
    quotas = [quota("parent", is_parent=True), quota("child", parent="parent")]
    bound = vpod({"quota.scheduling.koordinator.sh/name": "parent"}, name="web")
    resp = validate(bound, quotas=quotas)
    assert not resp.allowed and resp.code == 400
    assert resp.message == "pod can not be linked to a parentQuotaGroup,quota:parent, pod:web"
    assert validate(bound, quotas=quotas, gates={"SupportParentQuotaSubmitPod": True}).allowed
    assert validate(vpod({"quota.scheduling.koordinator.sh/name": "child"}), quotas=quotas).allowed
    assert validate(vpod({"quota.scheduling.koordinator.sh/name": "unknown"}), quotas=quotas).allowed


def test_pod_quota_by_namespace_and_by_annotation():
    quotas = [quota("team-a", is_parent=True, namespace="team-a"),
              quota("shared", is_parent=True, annotations={"quota.scheduling.koordinator.sh/namespaces": '["team-b"]'})]
    resp = validate(vpod(name="x", namespace="team-a"), quotas=quotas)
    assert resp.message == "pod can not be linked to a parentQuotaGroup,quota:team-a, pod:x"
    resp = validate(vpod(name="y", namespace="team-b"), quotas=quotas)
    assert resp.message == "pod can not be linked to a parentQuotaGroup,quota:shared, pod:y"
    # DisableDefaultQuota: only the label counts
    assert validate(vpod(name="x", namespace="team-a"), quotas=quotas, gates={"DisableDefaultQuota": True}).allowed


def test_preemptible_label_is_immutable():
    old = vpod({"quota.scheduling.koordinator.sh/preemptible": "true"})
    new = vpod({"quota.scheduling.koordinator.sh/preemptible": "false"})
    resp = validate(new, op="UPDATE", old=old)
    assert resp.message == "Preemptible label is forbidden modify now."


# -- gang member counts (this build's check; Koordinator's /validate-pod has none) ------------------

GANG_MIN = "gang.scheduling.koordinator.sh/min-available"
GANG_TOTAL = "gang.scheduling.koordinator.sh/total-number"
LIGHT_MIN = "pod-group.scheduling.sigs.k8s.io/min-available"


def gang_pod(annotations=None, labels=None):
    obj = vpod(labels)
    obj["metadata"]["annotations"] = dict(annotations or {})
    return obj


@pytest.mark.parametrize("annotations, labels, message", [
    ({GANG_MIN: "abc"}, None,
     f'annotations.{GANG_MIN}: Invalid value: "abc": must be a non-negative integer'),
    ({GANG_TOTAL: "2.5"}, None,
     f'annotations.{GANG_TOTAL}: Invalid value: "2.5": must be a non-negative integer'),
    (None, {LIGHT_MIN: "x"},
     f'labels.{LIGHT_MIN}: Invalid value: "x": must be a non-negative integer'),
    ({GANG_MIN: "-1"}, None,
     f'annotations.{GANG_MIN}: Invalid value: "-1": must be a non-negative integer'),
    ({GANG_MIN: "2147483648"}, None,
     f'annotations.{GANG_MIN}: Invalid value: "2147483648": must be no greater than 2147483647'),
    ({GANG_MIN: " 2"}, None,
     f'annotations.{GANG_MIN}: Invalid value: " 2": must be a non-negative integer'),
    ({GANG_MIN: "abc", GANG_TOTAL: "def"}, None,
     f'[annotations.{GANG_MIN}: Invalid value: "abc": must be a non-negative integer, '
     f'annotations.{GANG_TOTAL}: Invalid value: "def": must be a non-negative integer]'),
])
def test_gang_counts_must_be_non_negative_integers(annotations, labels, message):
    resp = validate(gang_pod(annotations, labels))
    assert not resp.allowed and resp.code == 400
    assert resp.message == message


def test_valid_gang_counts_pass_and_updates_check_only_changed_values():
    assert validate(gang_pod({GANG_MIN: "3", GANG_TOTAL: "0"}, {LIGHT_MIN: "2"})).allowed
    # a pod admitted before this check (or with the webhook down) can still be updated
    old = gang_pod({GANG_MIN: "abc"})
    new = gang_pod({GANG_MIN: "abc", "other": "x"})
    assert validate(new, op="UPDATE", old=old).allowed
    changed = gang_pod({GANG_MIN: "def"})
    assert validate(changed, op="UPDATE", old=old).message == \
        f'annotations.{GANG_MIN}: Invalid value: "def": must be a non-negative integer'


# -- registration --------------------------------------------------------------------------------

class Recorder:
    def __init__(self):
        self.registered = []

    def register(self, path, handler, *, mutating=False):
        self.registered.append((path, mutating, handler))


def test_register_webhooks_default_gates_and_aliases():
    server = Recorder()
    paths = register_webhooks(server, StaticListers(), gates={})
    assert paths == ["/mutate-pod", "/validate-pod", "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota",
                     "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"]
    assert [m for _, m, _ in server.registered] == [True, False, True, False]
    server = Recorder()
    paths = register_webhooks(server, StaticListers(), gates={"ConfigMapValidatingWebhook": True,
                                                              "PodMutatingWebhook": False,
                                                              "ElasticValidatingWebhook": False})
    assert paths == ["/validate-pod", "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota", "/validate-configmap"]


def test_handlers_do_not_modify_the_request():
    obj = pod()
    before = copy.deepcopy(obj)
    mutate(obj, profiles=[batch_profile(patch={"metadata": {"labels": {"x": "1"}}})])
    assert obj == before


# -- through the API server --------------------------------------------------------------------------

def test_bad_gang_count_is_refused_by_the_api_server(crd_server, crd_client, tmp_path_factory):
    from koordinator.local import free_port
    from koordinator.runtime.errors import ApiError, NotFound
    from koordinator_roles.manager.local import ensure_webhooks
    from koordinator_roles.manager.webhook_configuration import VALIDATING_NAME
    from tests.manager_harness import InProcessManager
    from tests.waiting import wait_until

    c = crd_client
    port = free_port()
    ensure_webhooks(c, port)
    c.create(ns("gang"))
    with InProcessManager(crd_server.kubeconfig, tmp_path_factory.mktemp("certs"), "--controllers=-noderesource",
                          webhook_port=port) as m:
        wait_until(lambda: all(w["clientConfig"].get("caBundle")
                               for w in c.get("ValidatingWebhookConfiguration", VALIDATING_NAME)["webhooks"]),
                   message="the manager injects its CA")
        wait_until(lambda: m.runtime.informers.wait_for_sync(0) and m.webhook_ready() is None,
                   message="webhook server ready")
        for field, key in (("annotations", GANG_MIN), ("annotations", GANG_TOTAL), ("labels", LIGHT_MIN)):
            obj = pod("g", "gang")
            obj["metadata"][field] = {key: "abc"}
            with pytest.raises(ApiError) as err:
                c.create(obj)
            assert err.value.message == ('admission webhook "vpod.koordinator.sh" denied the request: '
                                         f'{field}.{key}: Invalid value: "abc": must be a non-negative integer')
            with pytest.raises(NotFound):
                c.get("Pod", "g", "gang")
        ok = pod("g", "gang", annotations={GANG_MIN: "2", GANG_TOTAL: "3"})
        assert c.create(ok)["metadata"]["annotations"][GANG_MIN] == "2"
