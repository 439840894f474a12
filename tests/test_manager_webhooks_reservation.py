"""``/mutate-reservation`` (reference B.6.5): ClusterColocationProfiles applied to Reservations on CREATE.

The handler's decisions with StaticListers, its registration behind the ReservationMutatingWebhook
gate (webhook server and webhook configuration), and end to end: a Reservation created through the
embedded API server is mutated by the manager's TLS webhook.
"""

from __future__ import annotations

import random
from typing import Iterator

import pytest

from koordinator.local import free_port
from koordinator_roles.manager import features
from koordinator_roles.manager.local import ensure_webhooks
from koordinator_roles.manager.webhook_configuration import MUTATING_NAME, webhook_configurations
from koordinator_roles.manager.webhooks import StaticListers, register_webhooks
from koordinator_roles.manager.webhooks.reservation_mutating import ReservationMutatingHandler
from tests.manager_harness import InProcessManager
from tests.waiting import wait_until

QOS = "koordinator.sh/qosClass"
PRIORITY = "koordinator.sh/priority"
GATE = "ReservationMutatingWebhook"
BATCH_PC = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "koord-batch"},
            "value": 5500, "preemptionPolicy": "Never"}


def reservation(name="r1", labels=None, template=True):
    spec = {"owners": [{"object": {"name": "p", "namespace": "default"}}], "ttl": "1h"}
    if template:
        spec["template"] = {"metadata": {"labels": {"app": "reserved"}},
                            "spec": {"containers": [{"name": "c", "image": "busybox",
                                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}
    return {"apiVersion": "scheduling.koordinator.sh/v1alpha1", "kind": "Reservation",
            "metadata": {"name": name, "labels": dict(labels or {})}, "spec": spec}


def profile(name, **spec):
    return {"apiVersion": "config.koordinator.sh/v1alpha1", "kind": "ClusterColocationProfile",
            "metadata": {"name": name}, "spec": spec}


def review(obj, op="CREATE", resource="reservations"):
    return {"uid": "u1", "kind": {"group": "scheduling.koordinator.sh", "version": "v1alpha1", "kind": "Reservation"},
            "resource": {"group": "scheduling.koordinator.sh", "version": "v1alpha1", "resource": resource},
            "operation": op, "object": obj, "oldObject": obj if op == "UPDATE" else None,
            "userInfo": {"username": "tester"}}


def mutate(obj, *profiles, pcs=(BATCH_PC,), rng=None, **kw):
    listers = StaticListers(colocation_profiles=profiles, priority_classes=pcs)
    return ReservationMutatingHandler(listers, rng=rng or random.Random(0))(review(obj, **kw))


def mutated(resp):
    assert resp.allowed, resp.message
    assert resp.patched is not None, "expected a mutation"
    return resp.patched


# -- the handler ----------------------------------------------------------------------------------------

def test_no_profiles_or_no_match_leaves_the_reservation_alone():
    assert mutate(reservation()).patched is None
    other = profile("a", selector={"matchLabels": {"team": "x"}}, labels={"hit": "1"})
    resp = mutate(reservation(labels={"team": "y"}), other)
    assert resp.allowed and resp.patched is None


def test_every_field_lands_where_b65_says():
    p = profile("a", selector={"matchLabels": {"team": "ml"}},
                labels={"l1": "v1", "tier": "gold"}, annotations={"a1": "v1"},
                labelKeysMapping={"team": "team-copy", "missing": "empty"},
                annotationKeysMapping={"a1": "a1-copy"}, labelSuffixes={"tier": "-x", "absent": "-y"},
                schedulerName="koord-scheduler", qosClass="BE", priorityClassName="koord-batch",
                koordinatorPriority=1111, patch={"spec": {"allocateOnce": False},
                                                 "metadata": {"labels": {"patched": "yes"}}})
    r = mutated(mutate(reservation(labels={"team": "ml"}), p))
    md = r["metadata"]
    assert md["labels"] == {"team": "ml", "l1": "v1", "tier": "gold-x", "team-copy": "ml", "empty": "",
                            QOS: "BE", PRIORITY: "1111", "patched": "yes"}
    assert md["annotations"] == {"a1": "v1", "a1-copy": "v1"}
    template_spec = r["spec"]["template"]["spec"]
    assert template_spec["schedulerName"] == "koord-scheduler"
    assert (template_spec["priorityClassName"], template_spec["priority"], template_spec["preemptionPolicy"]) == \
        ("koord-batch", 5500, "Never")
    assert r["spec"]["allocateOnce"] is False
    # No scheduling field on the Reservation itself, and no batch resource translation.
    assert "schedulerName" not in r["spec"] and "priority" not in r["spec"]
    assert template_spec["containers"][0]["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert r["spec"]["template"]["metadata"] == {"labels": {"app": "reserved"}}


def test_namespace_selector_is_ignored_and_an_empty_selector_matches():
    p = profile("a", namespaceSelector={"matchLabels": {"never": "matches"}}, selector={}, labels={"hit": "1"})
    assert mutated(mutate(reservation(), p))["metadata"]["labels"] == {"hit": "1"}
    bad = profile("b", selector={"matchExpressions": [{"key": "k", "operator": "Bogus"}]}, labels={"bad": "1"})
    assert mutated(mutate(reservation(), bad))["metadata"]["labels"] == {"bad": "1"}  # unparseable: matched


def test_profiles_apply_in_name_order_later_overriding():
    later = profile("b", labels={"who": "b"}, qosClass="LS")
    earlier = profile("a", labels={"who": "a", "only-a": "1"}, qosClass="BE")
    labels = mutated(mutate(reservation(), later, earlier))["metadata"]["labels"]
    assert labels == {"who": "b", "only-a": "1", QOS: "LS"}


def test_probability_skips_profiles():
    zero = profile("a", probability="0%", labels={"a": "1"})
    assert mutate(reservation(), zero).patched is None

    class Draw(random.Random):
        def __init__(self, value):
            super().__init__(0)
            self.value = value

        def randrange(self, *args):
            return self.value

    # 40%: applied when the draw (0..99) is at most 40, skipped above.
    forty = profile("a", probability="40%", labels={"a": "1"})
    assert mutated(mutate(reservation(), forty, rng=Draw(40)))["metadata"]["labels"] == {"a": "1"}
    assert mutate(reservation(), forty, rng=Draw(41)).patched is None


def test_without_template_the_scheduling_fields_are_dropped():
    p = profile("a", schedulerName="koord-scheduler", priorityClassName="koord-batch", labels={"x": "1"})
    r = mutated(mutate(reservation(template=False), p))
    assert "template" not in r["spec"] and "schedulerName" not in r["spec"]
    assert r["metadata"]["labels"] == {"x": "1"}


def test_missing_priority_class_fails_the_admission():
    p = profile("a", priorityClassName="koord-nope")
    resp = mutate(reservation(), p)
    assert not resp.allowed and resp.code == 500
    assert resp.message == 'priorityclasses.scheduling.k8s.io "koord-nope" not found'


def test_bad_probability_and_patch_fail_with_the_field_named():
    resp = mutate(reservation(), profile("a", probability="half"))
    assert not resp.allowed and "string is not a percentage" in resp.message
    resp = mutate(reservation(), profile("p1", patch={"spec": {"owners": {"$patch": "bogus"}}}))
    assert not resp.allowed and resp.message.startswith("profile p1: patch:"), resp.message


def test_only_create_of_reservations_is_mutated():
    p = profile("a", labels={"x": "1"})
    assert mutate(reservation(), p, op="UPDATE").patched is None
    assert mutate(reservation(), p, resource="pods").patched is None
    resp = ReservationMutatingHandler(StaticListers(colocation_profiles=[p]))(
        {**review(reservation()), "object": "not an object"})
    assert not resp.allowed and resp.code == 400


# -- the gate -------------------------------------------------------------------------------------------

class Recorder:
    def __init__(self) -> None:
        self.registered: list[tuple[str, bool]] = []

    def register(self, path, handler, mutating=False):
        self.registered.append((path, mutating))


def test_served_and_configured_only_with_the_gate_on():
    assert features.GATES[GATE] is False
    assert features.resolve({GATE: True})[GATE] is True
    server = Recorder()
    assert "/mutate-reservation" not in register_webhooks(server, StaticListers(), gates={})
    server = Recorder()
    assert "/mutate-reservation" in register_webhooks(server, StaticListers(), gates={GATE: True})
    assert ("/mutate-reservation", True) in server.registered

    def reservation_hooks(gates):
        mutating = webhook_configurations(gates)[0]
        return [w for w in mutating["webhooks"] if w["clientConfig"]["service"]["path"] == "/mutate-reservation"]

    assert reservation_hooks(features.GATES) == []
    [hook] = reservation_hooks({**features.GATES, GATE: True})
    assert hook["name"] == "mreservation-create.koordinator.sh" and hook["failurePolicy"] == "Fail"
    assert hook["rules"] == [{"apiGroups": ["scheduling.koordinator.sh"], "apiVersions": ["v1alpha1"],
                              "operations": ["CREATE"], "resources": ["reservations"], "scope": "Cluster"}]


# -- end to end -----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def manager(crd_server, crd_client, tmp_path_factory) -> Iterator[InProcessManager]:
    port = free_port()
    ensure_webhooks(crd_client, port)
    # The configuration a cluster with the gate on has: the default one plus the Reservation webhook.
    wanted = webhook_configurations({**features.GATES, GATE: True})[0]["webhooks"]
    current = crd_client.get("MutatingWebhookConfiguration", MUTATING_NAME)
    service_port = current["webhooks"][0]["clientConfig"]["service"]["port"]
    for w in wanted:
        w["clientConfig"]["service"]["port"] = service_port
    current["webhooks"] = wanted
    crd_client.update(current)
    crd_client.create(BATCH_PC)
    m = InProcessManager(crd_server.kubeconfig, tmp_path_factory.mktemp("certs"), "--controllers=-noderesource",
                         f"--feature-gates={GATE}=true", webhook_port=port)
    m.start()
    try:
        m.wait_for_webhooks(crd_client)
        yield m
    finally:
        m.stop()


def test_reservation_created_through_the_api_is_mutated(manager, crd_client):
    crd_client.create(profile("reserve-batch", selector={"matchLabels": {"colocation": "on"}}, qosClass="BE",
                              priorityClassName="koord-batch", schedulerName="koord-scheduler",
                              labels={"mutated": "true"}))
    wait_until(lambda: manager.runtime.informers.informer("ClusterColocationProfile").store.keys(),
               message="the manager's cache has the profile")
    crd_client.create(reservation("colocated", labels={"colocation": "on"}))
    crd_client.create(reservation("plain"))
    r = crd_client.get("Reservation", "colocated")
    assert r["metadata"]["labels"] == {"colocation": "on", "mutated": "true", QOS: "BE"}
    template_spec = r["spec"]["template"]["spec"]
    assert (template_spec["schedulerName"], template_spec["priorityClassName"], template_spec["priority"]) == \
        ("koord-scheduler", "koord-batch", 5500)
    plain = crd_client.get("Reservation", "plain")
    assert plain["metadata"].get("labels") in (None, {})
    assert "schedulerName" not in plain["spec"]["template"]["spec"]
