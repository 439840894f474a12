"""NodeSLO and NodeMetric specs from the merged slo-controller-config (koordinator_roles.manager.nodeslo / nodemetric).

Expected values are hand-computed from reference B.3.2 and B.4: each strategy is the first matching
node strategy else the cluster strategy (both already merged on Koordinator's defaults).
"""

from __future__ import annotations

import json

import pytest

from koordinator.apis.schemas import validate_object
from koordinator_roles.manager.nodemetric import default_node_metric_spec, node_metric_spec
from koordinator_roles.manager.nodeslo import node_slo_spec
from koordinator_roles.manager.sloconfig import ManagerConfig, parse_slo_controller_config


def cm(**data):
    return {"metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
            "data": {k.replace("_", "-"): json.dumps(v) for k, v in data.items()}}


def node(labels=None, annotations=None):
    return {"metadata": {"name": "n1", "labels": labels or {}, "annotations": annotations or {}}}


def config(**data) -> ManagerConfig:
    cfg, problems = parse_slo_controller_config(cm(**data), None)
    assert [p for p in problems if p.severity == "error"] == []
    return cfg


def assert_valid(kind: str, spec: dict) -> None:
    errors = validate_object({"apiVersion": "slo.koordinator.sh/v1alpha1", "kind": kind,
                              "metadata": {"name": "n1"}, "spec": spec})
    assert errors == [], errors


DEFAULT_SLO_SPEC = {
    "resourceUsedThresholdWithBE": {"enable": False, "cpuSuppressThresholdPercent": 65, "cpuSuppressPolicy": "cpuset",
                                    "memoryEvictThresholdPercent": 70, "cpuEvictPolicy": "evictByRealLimit"},
    "resourceQOSStrategy": {},
    "cpuBurstStrategy": {"policy": "none", "cpuBurstPercent": 1000, "cfsQuotaBurstPercent": 300,
                         "cfsQuotaBurstPeriodSeconds": -1, "sharePoolThresholdPercent": 50},
    "systemStrategy": {"totalNetworkBandwidth": "0"},
    "extensions": {},
}


# -- NodeSLO ---------------------------------------------------------------------------------------


def test_default_node_slo_spec():
    spec = node_slo_spec(ManagerConfig.defaults(), node())
    assert spec == DEFAULT_SLO_SPEC  # no hostApplications: Go's omitempty leaves an empty list out
    assert_valid("NodeSLO", spec)


def test_node_strategies_select_per_key():
    cfg = config(
        resource_threshold_config={"clusterStrategy": {"enable": True},
                                   "nodeStrategies": [{"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}},
                                                       "cpuSuppressThresholdPercent": 50, "cpuSuppressPolicy": "cfsQuota"}]},
        resource_qos_config={"clusterStrategy": {"lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}}},
                             "nodeStrategies": [{"nodeSelector": {"matchLabels": {"pool": "a"}},
                                                 "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}}}]},
        cpu_burst_config={"nodeStrategies": [{"nodeSelector": {"matchLabels": {"pool": "b"}}, "policy": "auto"}]},
        system_config={"clusterStrategy": {"minFreeKbytesFactor": 100},
                       "nodeStrategies": [{"nodeSelector": {"matchLabels": {"pool": "a"}}, "watermarkScaleFactor": 150,
                                           "totalNetworkBandwidth": "10G"}]})
    spec = node_slo_spec(cfg, node({"pool": "a"}))
    assert spec["resourceUsedThresholdWithBE"] == {
        **DEFAULT_SLO_SPEC["resourceUsedThresholdWithBE"], "enable": True, "cpuSuppressThresholdPercent": 50,
        "cpuSuppressPolicy": "cfsQuota"}
    # the node strategy merges on top of the cluster strategy
    assert spec["resourceQOSStrategy"] == {"lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}},
                                           "beClass": {"cpuQOS": {"enable": True, "groupIdentity": -1}}}
    assert spec["cpuBurstStrategy"] == DEFAULT_SLO_SPEC["cpuBurstStrategy"]  # pool=b strategy does not match
    assert spec["systemStrategy"] == {"totalNetworkBandwidth": "10G", "minFreeKbytesFactor": 100,
                                      "watermarkScaleFactor": 150}
    assert_valid("NodeSLO", spec)
    other = node_slo_spec(cfg, node({"pool": "b"}))
    assert other["cpuBurstStrategy"]["policy"] == "auto"
    assert other["resourceQOSStrategy"] == {"lsClass": {"cpuQOS": {"enable": True, "groupIdentity": 2}}}
    assert other["systemStrategy"] == {"totalNetworkBandwidth": "0", "minFreeKbytesFactor": 100}
    assert_valid("NodeSLO", other)


def test_resource_qos_gets_no_injected_defaults():
    # Neither the schema's nor koordlet's per-class defaults reach the NodeSLO: only what was configured.
    cfg = config(resource_qos_config={"clusterStrategy": {"lsClass": {"networkQOS": {"enable": True,
                                                                                     "ingressRequest": 20}}}})
    spec = node_slo_spec(cfg, node())
    assert spec["resourceQOSStrategy"] == {"lsClass": {"networkQOS": {"enable": True, "ingressRequest": 20}}}
    assert_valid("NodeSLO", spec)


def test_network_bandwidth_annotation():
    cfg = config(system_config={"clusterStrategy": {"totalNetworkBandwidth": "1G", "minFreeKbytesFactor": 100}})
    spec = node_slo_spec(cfg, node(annotations={"node.koordinator.sh/network-bandwidth": "10M"}))
    assert spec["systemStrategy"] == {"totalNetworkBandwidth": "10M", "minFreeKbytesFactor": 100}
    assert_valid("NodeSLO", spec)
    # a value that is not a quantity: no systemStrategy at all (koord-manager's nil)
    bad = node_slo_spec(cfg, node(annotations={"node.koordinator.sh/network-bandwidth": "ten megs"}))
    assert "systemStrategy" not in bad and bad["cpuBurstStrategy"] == DEFAULT_SLO_SPEC["cpuBurstStrategy"]
    assert_valid("NodeSLO", bad)


def test_host_applications_node_list_replaces_cluster_list():
    nginx = {"name": "nginx", "priority": "koord-prod", "qos": "LS",
             "cgroupPath": {"base": "CgroupRoot", "parentDir": "host-latency-sensitive", "relativePath": "nginx"}}
    batch = {"name": "spark", "priority": "koord-batch", "qos": "BE"}
    cfg = config(host_application_config={
        "applications": [nginx],
        "nodeConfigs": [{"name": "batch", "nodeSelector": {"matchLabels": {"pool": "batch"}}, "applications": [batch]},
                        {"name": "none", "nodeSelector": {"matchLabels": {"pool": "none"}}, "applications": []}]})
    assert node_slo_spec(cfg, node())["hostApplications"] == [nginx]
    spec = node_slo_spec(cfg, node({"pool": "batch"}))
    assert spec["hostApplications"] == [batch]  # replaced, not merged
    assert_valid("NodeSLO", spec)
    assert "hostApplications" not in node_slo_spec(cfg, node({"pool": "none"}))


def test_extensions_carry_over_from_the_old_spec():
    old = {**DEFAULT_SLO_SPEC, "extensions": {"vendor": {"x": 1}}}
    spec = node_slo_spec(ManagerConfig.defaults(), node(), old)
    assert spec["extensions"] == {"vendor": {"x": 1}}
    spec["extensions"]["vendor"]["x"] = 2
    assert old["extensions"] == {"vendor": {"x": 1}}  # a copy, not the old spec's dict
    # an old spec that equals the new one means "no update needed"
    assert node_slo_spec(ManagerConfig.defaults(), node(), DEFAULT_SLO_SPEC) == DEFAULT_SLO_SPEC


# -- NodeMetric ------------------------------------------------------------------------------------

DEFAULT_METRIC_SPEC = {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60,
                                               "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
                                               "nodeMemoryCollectPolicy": "usageWithoutPageCache"}}


def test_node_metric_default_when_colocation_is_off():
    assert default_node_metric_spec() == DEFAULT_METRIC_SPEC
    # disabled colocation: the configured intervals do not apply
    cfg = config(colocation_config={"enable": False, "metricReportIntervalSeconds": 30})
    spec = node_metric_spec(cfg, node())
    assert spec == DEFAULT_METRIC_SPEC
    assert_valid("NodeMetric", spec)


def test_node_metric_follows_the_enabled_node_strategy():
    cfg = config(colocation_config={
        "enable": True, "metricAggregateDurationSeconds": 600, "metricReportIntervalSeconds": 30,
        "metricMemoryCollectPolicy": "usageWithPageCache",
        "nodeConfigs": [{"nodeSelector": {"matchLabels": {"pool": "a"}}, "metricAggregatePolicy": {"durations": ["1m"]}},
                        {"nodeSelector": {"matchLabels": {"pool": "off"}}, "enable": False}]})
    expected = {"metricCollectPolicy": {"aggregateDurationSeconds": 600, "reportIntervalSeconds": 30,
                                        "nodeAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
                                        "nodeMemoryCollectPolicy": "usageWithPageCache"}}
    assert node_metric_spec(cfg, node()) == expected
    spec = node_metric_spec(cfg, node({"pool": "a"}))
    assert spec["metricCollectPolicy"]["nodeAggregatePolicy"] == {"durations": ["1m0s"]}
    assert_valid("NodeMetric", spec)
    assert node_metric_spec(cfg, node({"pool": "off"})) == DEFAULT_METRIC_SPEC
    # a node annotation that makes the strategy invalid gives the default spec
    bad = node(annotations={"node.koordinator.sh/colocation-strategy": '{"metricReportIntervalSeconds": 0}'})
    assert node_metric_spec(cfg, bad) == DEFAULT_METRIC_SPEC


@pytest.mark.parametrize("configmap", [None, cm(colocation_config={"enable": True, "degradeTimeMinutes": 0})])
def test_node_metric_spec_freezes_while_colocation_is_in_error(configmap):
    good = config(colocation_config={"enable": True, "metricReportIntervalSeconds": 30})
    old = node_metric_spec(good, node())
    assert old["metricCollectPolicy"]["reportIntervalSeconds"] == 30
    cfg, _ = parse_slo_controller_config(configmap, good)
    assert cfg.colocation_error is True
    assert node_metric_spec(cfg, node(), old) == old          # existing NodeMetric: frozen
    fresh = node_metric_spec(cfg, node(), None)               # a new one still gets a spec
    assert fresh["metricCollectPolicy"]["reportIntervalSeconds"] == (60 if configmap is None else 30)
