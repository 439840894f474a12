"""/validate-configmap (koordinator_roles.manager.webhooks.configmap_validating): slo-controller-config checks.

Expected texts are Koordinator's ``___{json}___`` errors (reference B.2.11), built by hand.
"""

from __future__ import annotations

import json

from koordinator_roles.manager.webhooks import StaticListers
from koordinator_roles.manager.webhooks.configmap_validating import ConfigMapValidatingHandler, virtual_nodes

NS, NAME = "koordinator-system", "slo-controller-config"


def cm(data, name=NAME, namespace=NS):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace},
            "data": {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}}


def review(obj, op="CREATE", old=None):
    return {"uid": "u", "operation": op, "object": obj, "oldObject": old, "namespace": NS, "name": NAME,
            "resource": {"group": "", "version": "v1", "resource": "configmaps"}}


def check(data, op="CREATE", old=None, nodes=(), name_check=False, **kw):
    h = ConfigMapValidatingHandler(StaticListers(nodes=nodes), node_strategy_name_need_check=name_check)
    return h(review(cm(data, **kw), op, cm(old) if old is not None else None))


def strategy(name, selector, **fields):
    return {"name": name, "nodeSelector": selector, **fields}


def node(name, labels):
    return {"metadata": {"name": name, "labels": labels}}


def test_other_configmaps_and_delete_are_allowed():
    assert check({"colocation-config": "{bad"}, name="other").allowed
    assert check({"colocation-config": "{bad"}, namespace="default").allowed
    h = ConfigMapValidatingHandler(StaticListers())
    assert h(review(None, op="DELETE", old=cm({}))).allowed


def test_valid_config_passes():
    data = {"colocation-config": {"enable": True, "cpuReclaimThresholdPercent": 60},
            "resource-threshold-config": {"clusterStrategy": {"enable": False}}}
    resp = check(data)
    assert resp.allowed, resp.message


def test_parse_failure():
    resp = check({"resource-threshold-config": "{not json"})
    assert not resp.allowed and resp.code == 400
    body = json.loads(resp.message.strip("_"))
    assert body["reason"] == "ParseConfigFail"
    assert body["message"].startswith(
        "Failed to parse ResourceThreshold config in configmap koordinator-system/slo-controller-config, err: ")


def test_unchanged_or_empty_keys_are_not_checked():
    bad = "{not json"
    assert check({"resource-threshold-config": bad}, op="UPDATE", old={"resource-threshold-config": bad}).allowed
    assert check({"resource-threshold-config": ""}).allowed


def test_schema_errors_name_the_data_key_and_field():
    resp = check({"colocation-config": {"cpuReclaimThresholdPercent": "lots"}})
    body = json.loads(resp.message[3:-3])
    assert body["reason"] == "ConfigParamInvalid"
    assert body["message"].startswith("data.colocation-config.cpuReclaimThresholdPercent: ")
    # the schema-only keys are checked too
    resp = check({"cpu-normalization-config": {"enable": "yes"}})
    assert not resp.allowed and "data.cpu-normalization-config.enable" in resp.message


def test_empty_node_selector():
    data = {"resource-threshold-config": {"nodeStrategies": [{"name": "a", "nodeSelector": {}}]}}
    resp = check(data)
    assert resp.message == ('___{"reason":"ConfigParamInvalid","message":"nodeConfigs NodeSelector must not empty '
                            'error! configType: resource-threshold-config,nodeConfig name:a"}___')


def test_unparseable_node_selector():
    sel = {"matchExpressions": [{"key": "k", "operator": "Near", "values": ["v"]}]}
    resp = check({"cpu-burst-config": {"nodeStrategies": [strategy("a", sel)]}})
    assert '"reason":"ConfigParamInvalid"' in resp.message and "failed to parse node selector" in resp.message


def test_name_check_only_with_the_flag():
    data = {"resource-threshold-config": {"nodeStrategies": [strategy("", {"matchLabels": {"a": "1"}})]}}
    assert check(data).allowed
    assert check(data, name_check=True).message == (
        '___{"reason":"ConfigParamInvalid","message":"nodeConfig Name need! configType:resource-threshold-config"}___')
    dup = {"resource-threshold-config": {"nodeStrategies": [strategy("x", {"matchLabels": {"a": "1"}}),
                                                            strategy("x", {"matchLabels": {"a": "2"}})]}}
    assert check(dup, name_check=True).message == (
        '___{"reason":"ConfigParamInvalid","message":"nodeConfig Name confilict, '
        'configType:resource-threshold-config,nodeConfig Name:x! "}___')


def test_overlap():
    # {a=1} and {a=1,b=2}: the second's virtual node {a:1,b:2} is matched by both.
    data = {"colocation-config": {"nodeConfigs": [strategy("s1", {"matchLabels": {"a": "1"}}),
                                                  strategy("s2", {"matchLabels": {"a": "1", "b": "2"}})]}}
    assert check(data).message == ('___{"reason":"NodeStrategiesOverlap","message":{"config":"colocation-config",'
                                   '"strategies":["s1","s2"]}}___')
    disjoint = {"colocation-config": {"nodeConfigs": [strategy("s1", {"matchLabels": {"a": "1"}}),
                                                      strategy("s2", {"matchLabels": {"a": "2"}})]}}
    assert check(disjoint).allowed


def test_overlap_ignores_operators_notin_quirk():
    # "a NotIn [x]" and "a Exists" both select a node labelled a=z. The NotIn selector's virtual
    # node is {a: x} (operator ignored: a node WITH a=x, which NotIn itself rejects), the Exists
    # selector's is {} -- neither is matched by both, so the overlap goes unnoticed (Koordinator's
    # behaviour); only a real node carrying a=z is caught, by the node conflict check.
    notin = strategy("not-x", {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["x"]}]})
    exists = strategy("has-a", {"matchExpressions": [{"key": "a", "operator": "Exists"}]})
    data = {"resource-threshold-config": {"nodeStrategies": [notin, exists]}}
    assert virtual_nodes(notin["nodeSelector"]) == [{"a": "x"}]
    assert check(data).allowed
    resp = check(data, nodes=[node("n1", {"a": "z"})])
    assert '"reason":"ExistNodeConfict"' in resp.message and '"strategies":["not-x","has-a"]' in resp.message


def test_virtual_nodes():
    sel = {"matchLabels": {"m": "1"},
           "matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]},
                                {"key": "b", "operator": "In", "values": ["x", "y", "z"]},
                                {"key": "c", "operator": "Exists"}]}
    nodes = virtual_nodes(sel)
    assert len(nodes) == 6  # 2 * 3; Exists adds nothing
    assert nodes[0] == {"m": "1", "a": "1", "b": "x"}
    assert nodes[5] == {"m": "1", "a": "2", "b": "z"}  # i=5: a=values[5%2]=2, b=values[5%3]=z


def test_node_conflict():
    data = {"resource-threshold-config": {"nodeStrategies": [
        strategy("s1", {"matchLabels": {"a": "1"}}), strategy("s2", {"matchLabels": {"b": "1"}})]}}
    both = node("n1", {"a": "1", "b": "1"})
    assert check(data, nodes=[node("n0", {"a": "1"})]).allowed
    assert check(data, nodes=[node("n0", {"a": "1"}), both]).message == (
        '___{"reason":"ExistNodeConfict","message":{"config":"resource-threshold-config",'
        '"strategies":["s1","s2"],"exampleNodes":["n1"]}}___')


def test_net_qos_checks():
    def qos(cluster=None, nodes=None):
        doc = {}
        if cluster is not None:
            doc["clusterStrategy"] = cluster
        if nodes is not None:
            doc["nodeStrategies"] = nodes
        return doc

    def net(**values):
        return {"networkQOS": {"enable": True, **values}}

    system = {"clusterStrategy": {"totalNetworkBandwidth": "1000"}}
    ok = qos({"lsrClass": net(ingressRequest=30), "lsClass": net(ingressRequest=30), "beClass": net(ingressRequest=30)})
    assert check({"resource-qos-config": ok, "system-config": system}).allowed
    # 50 + 60 = 110 > 100
    over = qos({"lsClass": net(egressRequest=50), "beClass": net(egressRequest=60)})
    assert check({"resource-qos-config": over, "system-config": system}).message == \
        "ClusterStrategy total net bandwidth percentage already over 100"
    mixed = qos({"lsClass": net(ingressRequest=10), "beClass": net(ingressRequest="10M")})
    assert check({"resource-qos-config": mixed, "system-config": system}).message == \
        "only one type can be used for percentages or quantity in clusterStrategy"
    # percentages are also subtracted from the bandwidth (quirk): 60 > total 50
    small = {"clusterStrategy": {"totalNetworkBandwidth": "50"}}
    assert check({"resource-qos-config": qos({"lsClass": net(ingressRequest=60)}), "system-config": small}).message \
        == "total net bandwidth over total network bandwidth in clusterStrategy"
    # a node strategy with no matching system node strategy gets bandwidth 0
    sel = {"matchLabels": {"pool": "a"}}
    node_qos = qos(nodes=[{"name": "a", "nodeSelector": sel, "lsClass": net(ingressRequest=10)}])
    sys_nodes = {"clusterStrategy": {"totalNetworkBandwidth": "1000"},
                 "nodeStrategies": [{"name": "b", "nodeSelector": {"matchLabels": {"pool": "b"}},
                                     "totalNetworkBandwidth": "1000"}]}
    assert check({"resource-qos-config": node_qos, "system-config": sys_nodes}).message == \
        "total net bandwidth quantity already over total network bandwidth in cfg.NodeStrategies[0]"
    sys_same = {"nodeStrategies": [{"name": "a", "nodeSelector": sel, "totalNetworkBandwidth": "100"}]}
    assert check({"resource-qos-config": node_qos, "system-config": sys_same}).allowed
    # without system-config: cluster strategy unchecked against bandwidth (deviation: no parse failure)
    assert check({"resource-qos-config": ok}).allowed
