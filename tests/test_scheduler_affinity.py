"""PodTopologySpread and InterPodAffinity on in-memory snapshots (kube-scheduler semantics)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from koordinator.runtime.store import Indexer, namespace_index
from koordinator_roles.scheduler.framework.handle import PluginHandle
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import (SKIP, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE, CycleState,
                                                          Status)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo
from koordinator_roles.scheduler.plugins import interpodaffinity, podtopologyspread

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"

SPREAD_FAIL = "node(s) didn't match pod topology spread constraints"
SPREAD_MISSING = "node(s) didn't match pod topology spread constraints (missing required label)"


# -- builders ---------------------------------------------------------------------------------------

def node(name: str, zone: str | None = None, **labels: str) -> dict:
    lab = {HOST: name, **labels}
    if zone is not None:
        lab[ZONE] = zone
    return {"metadata": {"name": name, "labels": lab},
            "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}}}


_seq = [0]


def pod(name: str | None = None, ns: str = "default", labels: dict | None = None, node_name: str = "",
        spread: list | None = None, affinity: dict | None = None, node_selector: dict | None = None,
        terminating: bool = False) -> dict:
    _seq[0] += 1
    name = name or f"p{_seq[0]}"
    meta = {"name": name, "namespace": ns, "uid": f"uid-{name}-{_seq[0]}", "labels": dict(labels or {})}
    if terminating:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    spec: dict = {"containers": [{"name": "c"}]}
    if node_name:
        spec["nodeName"] = node_name
    if spread:
        spec["topologySpreadConstraints"] = spread
    if affinity:
        spec["affinity"] = affinity
    if node_selector:
        spec["nodeSelector"] = node_selector
    return {"metadata": meta, "spec": spec}


def cluster(nodes: list[dict], pods: list[dict]) -> Snapshot:
    infos = {n["metadata"]["name"]: NodeInfo(n) for n in nodes}
    for p in pods:
        infos[p["spec"]["nodeName"]].add_pod(PodInfo(p))
    return Snapshot(list(infos.values()))


def constraint(key: str, skew: int = 1, when: str = "DoNotSchedule", app: str = "web", **extra) -> dict:
    return {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"app": app}}, **extra}


def spread_plugin(snap: Snapshot, args: dict | None = None, informers=None):
    return podtopologyspread.new(args or {}, PluginHandle(snapshot_source=lambda: snap, informers=informers))


def ipa_plugin(snap: Snapshot, args: dict | None = None, informers=None):
    return interpodaffinity.new(args or {}, PluginHandle(snapshot_source=lambda: snap, informers=informers))


def run_filter(plugin, snap: Snapshot, incoming: dict):
    """PreFilter then Filter on every node: (prefilter status, {node: status}, state)."""
    pi = PodInfo(incoming)
    state = CycleState()
    _, status = plugin.pre_filter(state, pi, snap)
    if status is not None:
        return status, {}, state
    out = {ni.name: plugin.filter(state, pi, ni) for ni in snap.node_infos}
    # The batch form must agree with the per-node one.
    res = plugin.filter_nodes(state, pi, snap, snap.all_rows())
    for i, ni in enumerate(snap.node_infos):
        single = out[ni.name]
        assert bool(res.passed[i]) == (single is None)
        if single is not None:
            reasons = [f.reason for f in res.failures if f.mask[i]]
            assert reasons == single.reasons
            assert [f.code for f in res.failures if f.mask[i]] == [single.code]
    return None, out, state


def passing(statuses: dict) -> list[str]:
    return sorted(name for name, st in statuses.items() if st is None)


def run_score(plugin, snap: Snapshot, incoming: dict, rows=None):
    pi = PodInfo(incoming)
    state = CycleState()
    rows = snap.all_rows() if rows is None else rows
    status = plugin.pre_score(state, pi, snap, rows)
    if status is not None:
        return status, None, None
    raw = plugin.score_nodes(state, pi, snap, rows)
    single = [plugin.score(state, pi, snap.node_infos[r]) for r in rows]
    assert list(raw) == single
    scores = raw.copy()
    plugin.normalize_score(state, pi, snap, rows, scores)
    return None, list(raw), list(scores)


WEB = {"app": "web"}


# -- PodTopologySpread: Filter ----------------------------------------------------------------------

def test_hard_spread_across_zones_max_skew_1():
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")]
    pods = [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n2"), pod(labels=WEB, node_name="n3")]
    snap = cluster(nodes, pods)
    pre, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=WEB, spread=[constraint(ZONE)]))
    assert pre is None
    # zone a: 2 + 1 - 1 = 2 > 1; zone b: 1 + 1 - 1 = 1.
    assert passing(out) == ["n3", "n4"]
    assert out["n1"] == Status(UNSCHEDULABLE, SPREAD_FAIL)


def test_hard_spread_across_hosts_and_self_match():
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b")]
    pods = [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n2")]
    snap = cluster(nodes, pods)
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=WEB, spread=[constraint(HOST)]))
    assert passing(out) == ["n3"]
    # A pod that its own selector does not select adds nothing: skew 1 - 0 = 1 fits everywhere.
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels={"app": "other"}, spread=[constraint(HOST)]))
    assert passing(out) == ["n1", "n2", "n3"]


def test_only_same_namespace_and_non_terminating_pods_count():
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [pod(labels=WEB, node_name="n1", ns="other"), pod(labels=WEB, node_name="n1", terminating=True),
            pod(labels={"app": "db"}, node_name="n1")]
    snap = cluster(nodes, pods)
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=WEB, spread=[constraint(ZONE)]))
    assert passing(out) == ["n1", "n2"]


def test_min_domains_treats_global_minimum_as_zero():
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n2")]
    snap = cluster(nodes, pods)
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=WEB, spread=[constraint(ZONE)]))
    assert passing(out) == ["n1", "n2"]  # 1 + 1 - 1 = 1
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=WEB, spread=[constraint(ZONE, minDomains=3)]))
    assert passing(out) == []  # 2 domains < 3: minimum 0, 1 + 1 - 0 = 2 > 1
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=WEB, spread=[constraint(ZONE, minDomains=2)]))
    assert passing(out) == ["n1", "n2"]


def test_node_affinity_policy_honor_and_ignore():
    nodes = [node("n1", "a", disk="ssd"), node("n2", "b", disk="ssd"), node("n3", "c")]
    pods = [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n2")]
    snap = cluster(nodes, pods)
    # Honor (default): zone c does not match the nodeSelector, so the minimum is 1 (zones a, b).
    _, out, _ = run_filter(spread_plugin(snap), snap,
                           pod(labels=WEB, spread=[constraint(ZONE)], node_selector={"disk": "ssd"}))
    assert passing(out) == ["n1", "n2", "n3"]
    # Ignore: the empty zone c counts, minimum 0, so a and b are skewed (the NodeAffinity filter
    # itself, not this plugin, keeps the pod off n3).
    _, out, _ = run_filter(spread_plugin(snap), snap,
                           pod(labels=WEB, spread=[constraint(ZONE, nodeAffinityPolicy="Ignore")],
                               node_selector={"disk": "ssd"}))
    assert passing(out) == ["n3"]


def test_node_taints_policy_honor_excludes_untolerated_nodes():
    tainted = node("n3", "c")
    tainted["spec"] = {"taints": [{"key": "k", "value": "v", "effect": "NoSchedule"}]}
    snap = cluster([node("n1", "a"), node("n2", "b"), tainted],
                   [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n2")])
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=WEB, spread=[constraint(ZONE)]))
    assert passing(out) == ["n3"]  # default Ignore: tainted zone c counts with 0
    _, out, _ = run_filter(spread_plugin(snap), snap,
                           pod(labels=WEB, spread=[constraint(ZONE, nodeTaintsPolicy="Honor")]))
    assert passing(out) == ["n1", "n2", "n3"]


def test_missing_topology_label_is_unresolvable():
    snap = cluster([node("n1", "a"), node("n2")], [])
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=WEB, spread=[constraint(ZONE)]))
    assert out["n1"] is None
    assert out["n2"] == Status(UNSCHEDULABLE_AND_UNRESOLVABLE, SPREAD_MISSING)


def test_match_label_keys_narrow_the_selector():
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [pod(labels={"app": "web", "rev": "1"}, node_name="n1"),
            pod(labels={"app": "web", "rev": "1"}, node_name="n1")]
    snap = cluster(nodes, pods)
    incoming = {"app": "web", "rev": "2"}
    _, out, _ = run_filter(spread_plugin(snap), snap, pod(labels=incoming, spread=[constraint(ZONE)]))
    assert passing(out) == ["n2"]
    _, out, _ = run_filter(spread_plugin(snap), snap,
                           pod(labels=incoming, spread=[constraint(ZONE, matchLabelKeys=["rev"])]))
    assert passing(out) == ["n1", "n2"]  # rev=1 pods no longer count


def test_spread_add_pod_remove_pod_update_prefilter_state():
    nodes = [node("n1", "a"), node("n2", "b")]
    existing = pod(labels=WEB, node_name="n1")
    snap = cluster(nodes, [existing])
    plugin = spread_plugin(snap)
    incoming = PodInfo(pod(labels=WEB, spread=[constraint(ZONE)]))
    state = CycleState()
    assert plugin.pre_filter(state, incoming, snap) == (None, None)
    n1, n2 = snap.node_infos
    assert plugin.filter(state, incoming, n1) is not None and plugin.filter(state, incoming, n2) is None
    # Preemption removing the pod on n1 frees zone a.
    copy = state.clone()
    plugin.remove_pod(copy, incoming, PodInfo(existing), n1)
    assert plugin.filter(copy, incoming, n1) is None
    assert plugin.filter(state, incoming, n1) is not None  # the original state is untouched
    # Adding two matching pods in zone b makes b the crowded one.
    for _ in range(2):
        plugin.add_pod(state, incoming, PodInfo(pod(labels=WEB, node_name="n2")), n2)
    assert plugin.filter(state, incoming, n1) is None
    assert plugin.filter(state, incoming, n2) == Status(UNSCHEDULABLE, SPREAD_FAIL)
    # Pods of another namespace or not selected change nothing.
    plugin.add_pod(state, incoming, PodInfo(pod(labels=WEB, ns="x", node_name="n1")), n1)
    plugin.add_pod(state, incoming, PodInfo(pod(labels={"app": "db"}, node_name="n1")), n1)
    assert plugin.filter(state, incoming, n1) is None


def test_spread_counts_follow_node_changes_between_cycles():
    nodes = [node("n1", "a"), node("n2", "b")]
    snap = cluster(nodes, [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n2")])
    plugin = spread_plugin(snap)
    incoming = pod(labels=WEB, spread=[constraint(ZONE)])
    _, out, _ = run_filter(plugin, snap, incoming)
    assert passing(out) == ["n1", "n2"]
    # The same NodeInfo gains pods (its generation moves): cached counts must not be reused.
    snap.node_infos[0].add_pod(PodInfo(pod(labels=WEB, node_name="n1")))
    _, out, _ = run_filter(plugin, snap, incoming)
    assert passing(out) == ["n2"]


def test_spread_skip_fast_paths():
    snap = cluster([node("n1", "a")], [pod(labels=WEB, node_name="n1")])
    plugin = spread_plugin(snap)
    plain = PodInfo(pod(labels=WEB))
    _, status = plugin.pre_filter(CycleState(), plain, snap)
    assert status.code == SKIP
    assert plugin.pre_score(CycleState(), plain, snap, snap.all_rows()).code == SKIP
    soft_only = PodInfo(pod(labels=WEB, spread=[constraint(ZONE, when="ScheduleAnyway")]))
    assert plugin.pre_filter(CycleState(), soft_only, snap)[1].code == SKIP
    hard_only = PodInfo(pod(labels=WEB, spread=[constraint(ZONE)]))
    assert plugin.pre_score(CycleState(), hard_only, snap, snap.all_rows()).code == SKIP


# -- PodTopologySpread: Score -----------------------------------------------------------------------

def test_soft_spread_scores():
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4")]  # n4 has no zone
    pods = [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n2")]
    snap = cluster(nodes, pods)
    incoming = pod(labels=WEB, spread=[constraint(ZONE, when="ScheduleAnyway"),
                                       constraint(HOST, skew=2, when="ScheduleAnyway")])
    status, raw, normalized = run_score(spread_plugin(snap), snap, incoming)
    assert status is None
    zone_w, host_w = math.log(2 + 2), math.log(3 + 2)  # 2 zones; 3 scored nodes (n4 is ignored)
    expected_raw = [round(3 * zone_w + 2 * host_w + 1), round(3 * zone_w + 1 * host_w + 1), round(0 + 0 + 1), 0]
    assert raw == expected_raw == [8, 7, 1, 0]
    # 100 * (max + min - s) / max with min 1, max 8; the ignored node gets 0.
    assert normalized == [12, 25, 100, 0]


def test_soft_spread_all_zero_scores_normalise_to_max():
    snap = cluster([node("n1", "a"), node("n2", "b")], [])
    _, raw, normalized = run_score(spread_plugin(snap), snap,
                                   pod(labels=WEB, spread=[constraint(ZONE, when="ScheduleAnyway")]))
    assert raw == [0, 0]
    assert normalized == [100, 100]


def test_soft_spread_only_feasible_rows_define_domains():
    nodes = [node("n1", "a"), node("n2", "b"), node("n3", "c")]
    pods = [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n3"), pod(labels=WEB, node_name="n3")]
    snap = cluster(nodes, pods)
    rows = np.array([0, 1], dtype=np.int64)  # n3 was filtered out
    _, raw, normalized = run_score(spread_plugin(snap), snap,
                                   pod(labels=WEB, spread=[constraint(ZONE, skew=3, when="ScheduleAnyway")]), rows)
    w = math.log(2 + 2)
    assert raw == [round(1 * w + 2), 2]
    assert normalized == [100 * (raw[0] + 2 - raw[0]) // raw[0], 100 * (raw[0] + 2 - 2) // raw[0]]


class _FakeInformer:
    def __init__(self, objs: list[dict]) -> None:
        self.store = Indexer({"namespace": namespace_index})
        for o in objs:
            meta = o["metadata"]
            key = f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
            self.store.put(key, o)


class _FakeInformers:
    def __init__(self, **by_kind: list[dict]) -> None:
        self.by_kind = {k: _FakeInformer(v) for k, v in by_kind.items()}

    def informer(self, kind: str):
        if kind == "ReplicationController":
            raise KeyError(kind)
        return self.by_kind.setdefault(kind, _FakeInformer([]))


def test_system_default_constraints_use_service_selectors():
    nodes = [node("n1", "a"), node("n2", "b")]
    pods = [pod(labels=WEB, node_name="n1"), pod(labels=WEB, node_name="n1")]
    snap = cluster(nodes, pods)
    svc = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"selector": {"app": "web"}}}
    informers = _FakeInformers(Service=[svc])
    plugin = spread_plugin(snap, informers=informers)
    incoming = pod(labels=WEB)
    # System defaults are soft only: nothing to filter.
    assert plugin.pre_filter(CycleState(), PodInfo(incoming), snap)[1].code == SKIP
    status, raw, normalized = run_score(plugin, snap, incoming)
    assert status is None
    zone_w, host_w = math.log(4), math.log(4)
    assert raw == [round(2 * zone_w + 4 + 2 * host_w + 2), round(4 + 2)]
    assert normalized[1] == 100 and normalized[0] < normalized[1]
    # A pod no Service selects has no default constraints.
    assert plugin.pre_score(CycleState(), PodInfo(pod(labels={"app": "x"})), snap, snap.all_rows()).code == SKIP
    # Without informers (unit tests, no API) there are none either.
    assert spread_plugin(snap).pre_score(CycleState(), PodInfo(incoming), snap, snap.all_rows()).code == SKIP


def test_list_default_constraints_filter():
    nodes = [node("n1", "a"), node("n2", "b")]
    snap = cluster(nodes, [pod(labels=WEB, node_name="n1")])
    rs = {"metadata": {"name": "web-rs", "namespace": "default"},
          "spec": {"selector": {"matchLabels": {"app": "web"}}}}
    args = {"defaultingType": "List",
            "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}
    plugin = spread_plugin(snap, args, informers=_FakeInformers(ReplicaSet=[rs]))
    owned = pod(labels=WEB)
    owned["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-rs",
                                             "controller": True}]
    _, out, _ = run_filter(plugin, snap, owned)
    assert passing(out) == ["n2"]


@pytest.mark.parametrize("args, message", [
    ({"defaultingType": "Foo"}, 'defaultingType: Unsupported value: "Foo": supported values: "System", "List"'),
    ({"defaultingType": "System", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
                                                          "whenUnsatisfiable": "DoNotSchedule"}]},
     'defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 0, "topologyKey": ZONE,
                                                        "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": "",
                                                        "whenUnsatisfiable": "DoNotSchedule"}]},
     "defaultConstraints[0].topologyKey: Required value: can not be empty"),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
                                                        "whenUnsatisfiable": "Maybe"}]},
     'defaultConstraints[0].whenUnsatisfiable: Unsupported value: "Maybe"'),
    ({"defaultingType": "List", "defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE,
                                                        "whenUnsatisfiable": "DoNotSchedule",
                                                        "labelSelector": {}}]},
     "defaultConstraints[0].labelSelector: Forbidden: constraint must not define a selector"),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]},
     'defaultConstraints[1]: Duplicate value: "{topology.kubernetes.io/zone, DoNotSchedule}"'),
])
def test_spread_args_validation(args, message):
    with pytest.raises(ValueError) as err:
        podtopologyspread.validate_args(args)
    assert str(err.value).startswith(message)


def test_spread_args_defaults():
    assert podtopologyspread.validate_args({}) == {"defaultingType": "System", "defaultConstraints": []}
    plugin = spread_plugin(Snapshot())
    assert plugin.system_defaulted and [c["maxSkew"] for c in plugin.default_constraints] == [5, 3]


# -- InterPodAffinity: Filter -----------------------------------------------------------------------

def term(key: str, ns: list | None = None, ns_selector: dict | None = None, **labels: str) -> dict:
    t: dict = {"labelSelector": {"matchLabels": labels}, "topologyKey": key}
    if ns is not None:
        t["namespaces"] = ns
    if ns_selector is not None:
        t["namespaceSelector"] = ns_selector
    return t


def required(affinity: list | None = None, anti: list | None = None) -> dict:
    out: dict = {}
    if affinity:
        out["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": affinity}
    if anti:
        out["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": anti}
    return out


AFF_FAIL = Status(UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) didn't match pod affinity rules")
ANTI_FAIL = Status(UNSCHEDULABLE, "node(s) didn't match pod anti-affinity rules")
EXISTING_FAIL = Status(UNSCHEDULABLE, "node(s) didn't satisfy existing pods anti-affinity rules")


def test_required_affinity_same_zone():
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4")]
    snap = cluster(nodes, [pod(labels={"app": "db"}, node_name="n1")])
    _, out, _ = run_filter(ipa_plugin(snap), snap, pod(labels=WEB, affinity=required([term(ZONE, app="db")])))
    assert passing(out) == ["n1", "n2"]
    assert out["n3"] == AFF_FAIL and out["n4"] == AFF_FAIL


def test_required_affinity_other_namespace_needs_namespaces():
    snap = cluster([node("n1", "a"), node("n2", "b")], [pod(labels={"app": "db"}, ns="data", node_name="n1")])
    _, out, _ = run_filter(ipa_plugin(snap), snap, pod(labels=WEB, affinity=required([term(ZONE, app="db")])))
    assert passing(out) == []
    _, out, _ = run_filter(ipa_plugin(snap), snap,
                           pod(labels=WEB, affinity=required([term(ZONE, ns=["data"], app="db")])))
    assert passing(out) == ["n1"]


def test_self_matching_affinity_first_pod_goes_anywhere_with_the_key():
    nodes = [node("n1", "a"), node("n2", "b"), node("n3")]
    snap = cluster(nodes, [pod(labels={"app": "other"}, node_name="n1")])
    first = pod(labels=WEB, affinity=required([term(ZONE, app="web")]))
    _, out, _ = run_filter(ipa_plugin(snap), snap, first)
    assert passing(out) == ["n1", "n2"]
    assert out["n3"] == AFF_FAIL  # the topology key must still exist
    # A pod its own terms do not select gets no such exception.
    _, out, _ = run_filter(ipa_plugin(snap), snap, pod(labels={"app": "x"}, affinity=required([term(ZONE, app="web")])))
    assert passing(out) == []
    # Once one matching pod exists, the others must join its zone.
    snap = cluster(nodes, [pod(labels=WEB, node_name="n2")])
    _, out, _ = run_filter(ipa_plugin(snap), snap, first)
    assert passing(out) == ["n2"]


def test_incoming_anti_affinity():
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4")]
    snap = cluster(nodes, [pod(labels=WEB, node_name="n1")])
    incoming = pod(labels=WEB, affinity=required(anti=[term(HOST, app="web")]))
    _, out, _ = run_filter(ipa_plugin(snap), snap, incoming)
    assert passing(out) == ["n2", "n3", "n4"]
    assert out["n1"] == ANTI_FAIL
    _, out, _ = run_filter(ipa_plugin(snap), snap, pod(labels=WEB, affinity=required(anti=[term(ZONE, app="web")])))
    assert passing(out) == ["n3", "n4"]  # a node without the key is not in any zone


def test_existing_pods_anti_affinity():
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b")]
    guard = pod(labels={"app": "db"}, node_name="n1", affinity=required(anti=[term(ZONE, app="web")]))
    snap = cluster(nodes, [guard])
    plugin = ipa_plugin(snap)
    _, out, _ = run_filter(plugin, snap, pod(labels=WEB))
    assert passing(out) == ["n3"]
    assert out["n1"] == EXISTING_FAIL and out["n2"] == EXISTING_FAIL
    # A pod the existing term does not select skips the plugin entirely.
    pre, _, _ = run_filter(plugin, snap, pod(labels={"app": "cache"}))
    assert pre.code == SKIP
    # The existing term only covers its own namespace by default.
    pre, _, _ = run_filter(plugin, snap, pod(labels=WEB, ns="other"))
    assert pre.code == SKIP


def test_namespace_selector_with_namespace_labels():
    namespaces = [{"metadata": {"name": "ns1", "labels": {"team": "x"}}},
                  {"metadata": {"name": "ns2", "labels": {"team": "y"}}}]
    nodes = [node("n1", "a"), node("n2", "b"), node("n3", "c")]
    snap = cluster(nodes, [pod(labels=WEB, ns="ns1", node_name="n1"), pod(labels=WEB, ns="ns2", node_name="n2")])
    informers = _FakeInformers(Namespace=namespaces)
    plugin = ipa_plugin(snap, informers=informers)
    incoming = pod(ns="default", affinity=required(
        anti=[term(ZONE, ns_selector={"matchLabels": {"team": "x"}}, app="web")]))
    _, out, _ = run_filter(plugin, snap, incoming)
    assert passing(out) == ["n2", "n3"]
    # An empty namespaceSelector selects every namespace.
    _, out, _ = run_filter(plugin, snap, pod(ns="default", affinity=required(anti=[term(ZONE, ns_selector={},
                                                                                        app="web")])))
    assert passing(out) == ["n3"]
    # Existing pods' namespaceSelector is matched against the incoming pod's namespace labels.
    guard = pod(labels={"app": "db"}, ns="default", node_name="n3",
                affinity=required(anti=[term(ZONE, ns_selector={"matchLabels": {"team": "y"}}, app="api")]))
    snap2 = cluster(nodes, [guard])
    plugin2 = ipa_plugin(snap2, informers=informers)
    _, out, _ = run_filter(plugin2, snap2, pod(labels={"app": "api"}, ns="ns2"))
    assert passing(out) == ["n1", "n2"]
    pre, _, _ = run_filter(plugin2, snap2, pod(labels={"app": "api"}, ns="ns1"))
    assert pre.code == SKIP


def test_ipa_add_pod_remove_pod_update_prefilter_state():
    nodes = [node("n1", "a"), node("n2", "b")]
    web = pod(labels=WEB, node_name="n1")
    snap = cluster(nodes, [web])
    plugin = ipa_plugin(snap)
    incoming = PodInfo(pod(labels=WEB, affinity=required(anti=[term(ZONE, app="web")])))
    state = CycleState()
    assert plugin.pre_filter(state, incoming, snap) == (None, None)
    n1, n2 = snap.node_infos
    assert plugin.filter(state, incoming, n1) == ANTI_FAIL and plugin.filter(state, incoming, n2) is None
    victim_removed = state.clone()
    plugin.remove_pod(victim_removed, incoming, PodInfo(web), n1)
    assert plugin.filter(victim_removed, incoming, n1) is None
    assert plugin.filter(state, incoming, n1) == ANTI_FAIL
    plugin.add_pod(state, incoming, PodInfo(pod(labels=WEB, node_name="n2")), n2)
    assert plugin.filter(state, incoming, n2) == ANTI_FAIL
    # An added pod with anti-affinity against the incoming pod blocks its zone too.
    state3 = victim_removed.clone()
    guard = PodInfo(pod(labels={"app": "db"}, node_name="n2", affinity=required(anti=[term(ZONE, app="web")])))
    plugin.add_pod(state3, incoming, guard, n2)
    assert plugin.filter(state3, incoming, n2) == EXISTING_FAIL
    plugin.remove_pod(state3, incoming, guard, n2)
    assert plugin.filter(state3, incoming, n2) is None


def test_ipa_skip_fast_paths():
    snap = cluster([node("n1", "a")], [pod(labels=WEB, node_name="n1")])
    plugin = ipa_plugin(snap)
    plain = PodInfo(pod(labels=WEB))
    assert plugin.pre_filter(CycleState(), plain, snap)[1].code == SKIP
    assert plugin.pre_score(CycleState(), plain, snap, snap.all_rows()).code == SKIP
    preferred_only = PodInfo(pod(labels=WEB, affinity={"podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 5, "podAffinityTerm": term(ZONE, app="web")}]}}))
    assert plugin.pre_filter(CycleState(), preferred_only, snap)[1].code == SKIP
    required_only = PodInfo(pod(labels=WEB, affinity=required([term(ZONE, app="web")])))
    assert plugin.pre_score(CycleState(), required_only, snap, snap.all_rows()).code == SKIP


def test_ipa_invalid_term_is_unresolvable():
    snap = cluster([node("n1", "a")], [])
    bad = pod(affinity=required([{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Bad"}]},
                                  "topologyKey": ZONE}]))
    _, status = ipa_plugin(snap).pre_filter(CycleState(), PodInfo(bad), snap)
    assert status.code == UNSCHEDULABLE_AND_UNRESOLVABLE and status.message().startswith("parsing pod: ")


# -- InterPodAffinity: Score ------------------------------------------------------------------------

def test_preferred_scoring_both_directions():
    nodes = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")]
    friend = pod(labels={"role": "x"}, node_name="n3", affinity={
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [term(ZONE, app="me")],
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 7, "podAffinityTerm": term(HOST, app="me")}],
        }})
    pods = [pod(labels={"app": "db"}, node_name="n1"), pod(labels=WEB, node_name="n2"),
            pod(labels=WEB, node_name="n3"), friend]
    snap = cluster(nodes, pods)
    incoming = pod(labels={"app": "me"}, affinity={
        "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 10, "podAffinityTerm": term(ZONE, app="db")}]},
        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "podAffinityTerm": term(HOST, app="web")}]},
    })
    status, raw, normalized = run_score(ipa_plugin(snap), snap, incoming)
    assert status is None
    # n1: zone a +10; n2: +10, host -5; n3: zone b +1 (friend's required term, hard weight 1),
    # host -5 (web) +7 (friend's preferred term); n4: zone b +1.
    assert raw == [10, 5, 3, 1]
    # 100 * (s - min) / (max - min), truncated.
    assert normalized == [100, 44, 22, 0]
    # hardPodAffinityWeight scales the existing pod's required term; 0 turns it off.
    _, raw, _ = run_score(ipa_plugin(snap, {"hardPodAffinityWeight": 4}), snap, incoming)
    assert raw == [10, 5, 6, 4]
    _, raw, _ = run_score(ipa_plugin(snap, {"hardPodAffinityWeight": 0}), snap, incoming)
    assert raw == [10, 5, 2, 0]


def test_existing_pods_preferences_score_a_pod_without_affinity():
    nodes = [node("n1", "a"), node("n2", "b")]
    repeller = pod(labels={"app": "db"}, node_name="n1", affinity={"podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 20, "podAffinityTerm": term(ZONE, app="web")}]}})
    snap = cluster(nodes, [repeller])
    status, raw, normalized = run_score(ipa_plugin(snap), snap, pod(labels=WEB))
    assert status is None and raw == [-20, 0] and normalized == [0, 100]
    ignoring = ipa_plugin(snap, {"ignorePreferredTermsOfExistingPods": True})
    assert run_score(ignoring, snap, pod(labels=WEB))[0].code == SKIP
    # A pod nobody's terms select has nothing to score.
    assert run_score(ipa_plugin(snap), snap, pod(labels={"app": "x"}))[0].code == SKIP


@pytest.mark.parametrize("args, message", [
    ({"hardPodAffinityWeight": 101}, "hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"),
    ({"hardPodAffinityWeight": -1}, "hardPodAffinityWeight: Invalid value: -1: not in valid range [0, 100]"),
    ({"hardPodAffinityWeight": "1"}, "hardPodAffinityWeight: Invalid value"),
    ({"ignorePreferredTermsOfExistingPods": "yes"}, "ignorePreferredTermsOfExistingPods: Invalid value"),
])
def test_ipa_args_validation(args, message):
    with pytest.raises(ValueError) as err:
        interpodaffinity.validate_args(args)
    assert str(err.value).startswith(message)


def test_ipa_args_defaults():
    assert interpodaffinity.validate_args({}) == {"hardPodAffinityWeight": 1,
                                                  "ignorePreferredTermsOfExistingPods": False}


# -- events ---------------------------------------------------------------------------------------------

def test_event_hints():
    snap = Snapshot()
    spread = spread_plugin(snap)
    pending = pod(labels=WEB, spread=[constraint(ZONE)])
    hints = {(e.kind, e.action): e.hint for e in spread.events_to_register()}
    assert hints[("Pod", "Delete")](pending, pod(labels=WEB, node_name="n1"), None)
    assert not hints[("Pod", "Delete")](pending, pod(labels={"app": "db"}, node_name="n1"), None)
    assert hints[("Node", "Add")](pending, None, node("n9", "z"))
    assert not hints[("Node", "Add")](pending, None, node("n9"))

    ipa = ipa_plugin(snap)
    hints = {(e.kind, e.action): e.hint for e in ipa.events_to_register()}
    wants_db = pod(labels=WEB, affinity=required([term(ZONE, app="db")]))
    assert hints[("Pod", "Add")](wants_db, None, pod(labels={"app": "db"}, node_name="n1"))
    assert not hints[("Pod", "Add")](wants_db, None, pod(labels={"app": "x"}, node_name="n1"))
    assert not hints[("Pod", "Add")](wants_db, None, pod(labels={"app": "db"}))  # not scheduled
    avoids_web = pod(affinity=required(anti=[term(ZONE, app="web")]))
    assert hints[("Pod", "Delete")](avoids_web, pod(labels=WEB, node_name="n1"), None)
    assert not hints[("Pod", "Delete")](avoids_web, pod(labels={"app": "x"}, node_name="n1"), None)
