"""slo-controller-config -> ManagerConfig (koordinator_roles.manager.sloconfig): pure functions, hand-computed values."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from koordinator_roles.manager.sloconfig import (
    DEFAULT_COLOCATION_STRATEGY,
    SLO_CONFIG_KEYS,
    ManagerConfig,
    colocation_strategy,
    cpu_normalization_strategy,
    format_go_duration,
    is_colocation_strategy_valid,
    merge_config,
    node_strategy,
    parse_go_duration,
    parse_slo_controller_config,
    resource_amplification_strategy,
)

REPO = Path(__file__).resolve().parent.parent


def cm(**data):
    """A slo-controller-config ConfigMap; keyword names use _ for - and values are dumped to JSON."""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "slo-controller-config", "namespace": "koordinator-system"},
            "data": {k.replace("_", "-"): (v if isinstance(v, str) else json.dumps(v)) for k, v in data.items()}}


def node(labels=None, annotations=None, name="n1"):
    return {"metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}}}


def parse(configmap, previous=None):
    return parse_slo_controller_config(configmap, previous)


# -- defaults and deletion -------------------------------------------------------------------------


def test_keys():
    assert set(SLO_CONFIG_KEYS) == {
        "colocation-config", "resource-threshold-config", "resource-qos-config", "cpu-burst-config",
        "system-config", "host-application-config", "cpu-normalization-config", "resource-amplification-config"}


def test_no_keys_gives_koordinator_defaults():
    cfg, problems = parse(cm())
    assert problems == [] and cfg == ManagerConfig.defaults() and cfg.colocation_error is False
    # Values from reference B.2.2 / B.3.1 (durations in Go's Duration.String form).
    assert cfg.colocation == {
        "enable": False, "metricAggregateDurationSeconds": 300, "metricReportIntervalSeconds": 60,
        "metricAggregatePolicy": {"durations": ["5m0s", "10m0s", "30m0s"]},
        "metricMemoryCollectPolicy": "usageWithoutPageCache", "cpuReclaimThresholdPercent": 60,
        "cpuCalculatePolicy": "usage", "memoryReclaimThresholdPercent": 65, "memoryCalculatePolicy": "usage",
        "degradeTimeMinutes": 15, "updateTimeThresholdSeconds": 300, "resourceDiffThreshold": 0.1,
        "midCPUThresholdPercent": 100, "midMemoryThresholdPercent": 100, "midUnallocatedPercent": 0,
        "midStaticCPUReservedPercent": 0, "midStaticMemoryReservedPercent": 0, "nodeConfigs": []}
    assert cfg.threshold == {"clusterStrategy": {"enable": False, "cpuSuppressThresholdPercent": 65,
                                                 "cpuSuppressPolicy": "cpuset", "memoryEvictThresholdPercent": 70,
                                                 "cpuEvictPolicy": "evictByRealLimit"}, "nodeStrategies": []}
    assert cfg.resource_qos == {"clusterStrategy": {}, "nodeStrategies": []}
    assert cfg.cpu_burst["clusterStrategy"] == {"policy": "none", "cpuBurstPercent": 1000, "cfsQuotaBurstPercent": 300,
                                                "cfsQuotaBurstPeriodSeconds": -1, "sharePoolThresholdPercent": 50}
    assert cfg.system["clusterStrategy"] == {"totalNetworkBandwidth": "0"}
    assert cfg.host_application == {"applications": [], "nodeConfigs": []}
    assert cfg.cpu_normalization == {"enable": False, "ratioModel": {}, "nodeConfigs": []}
    assert cfg.resource_amplification == {"enable": False, "nodeConfigs": []}
    assert cfg.colocation_cluster_enabled() is False


def test_empty_values_mean_defaults():
    cfg, problems = parse(cm(colocation_config="", resource_threshold_config="  "))
    assert problems == [] and cfg == ManagerConfig.defaults()


def test_configmap_deleted_resets_to_defaults_in_colocation_error():
    previous, _ = parse(cm(colocation_config={"enable": True}, cpu_burst_config={"clusterStrategy": {"policy": "auto"}}))
    for prev in (previous, None):
        cfg, problems = parse(None, prev)
        assert problems == []
        assert cfg.colocation_error is True
        assert cfg.colocation == ManagerConfig.defaults().colocation
        assert cfg.cpu_burst == ManagerConfig.defaults().cpu_burst
    # a ConfigMap back again clears the error status
    cfg, _ = parse(cm(), cfg)
    assert cfg.colocation_error is False and cfg == ManagerConfig.defaults()


def test_shipped_configmap_parses_cleanly():
    doc = yaml.safe_load((REPO / "manifests/config/slo-controller-config.yaml").read_text())
    cfg, problems = parse(doc)
    assert problems == []
    assert cfg.colocation["enable"] is True and cfg.colocation_cluster_enabled()
    assert cfg.threshold["clusterStrategy"]["enable"] is True
    # resource-qos keeps exactly what the ConfigMap says: no schema defaults injected
    assert cfg.resource_qos["clusterStrategy"]["beClass"]["resctrlQOS"] == {
        "enable": False, "catRangeStartPercent": 0, "catRangeEndPercent": 30, "mbaPercent": 100}
    assert "systemClass" not in cfg.resource_qos["clusterStrategy"]


# -- MergeCfg --------------------------------------------------------------------------------------


def test_merge_config_semantics():
    base = {"enable": True, "a": 5, "list": [1, 2, 3], "nested": {"x": 1, "y": {"z": 2}},
            "ratioModel": {"m1": {"baseRatio": 1.5, "turboEnabledRatio": 1.8}, "m2": {"baseRatio": 1.1}}}
    frozen = copy.deepcopy(base)
    override = {"enable": False, "a": 0, "list": [9], "nested": {"y": {"w": 3}}, "absent": None,
                "ratioModel": {"m1": {"baseRatio": 2.0}}}
    out = merge_config(base, override)
    assert out == {
        "enable": False, "a": 0,            # explicit false/0 override
        "list": [9],                        # arrays replace
        "nested": {"x": 1, "y": {"z": 2, "w": 3}},  # objects merge recursively
        # a Go map: the entry is replaced whole (turboEnabledRatio gone), other entries kept
        "ratioModel": {"m1": {"baseRatio": 2.0}, "m2": {"baseRatio": 1.1}}}
    assert base == frozen                   # base untouched
    # None and empty lists are absent (Go omits nil pointers and empty omitempty slices)
    assert merge_config({"list": [1], "v": 1}, {"list": [], "v": None}) == {"list": [1], "v": 1}
    assert merge_config({"a": 1}, None) == {"a": 1}


# -- cluster + node strategies ---------------------------------------------------------------------


def test_threshold_cluster_and_first_matching_node_strategy():
    cfg, problems = parse(cm(resource_threshold_config={
        "clusterStrategy": {"enable": True, "cpuSuppressThresholdPercent": 60},
        "nodeStrategies": [
            {"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressThresholdPercent": 50,
             "enable": False},
            {"name": "a2", "nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressThresholdPercent": 40},
            {"name": "b", "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["b"]}]},
             "memoryEvictThresholdPercent": 80},
        ]}))
    assert problems == []
    # cluster = defaults merged with {enable: true, cpuSuppress 60}
    cluster = {"enable": True, "cpuSuppressThresholdPercent": 60, "cpuSuppressPolicy": "cpuset",
               "memoryEvictThresholdPercent": 70, "cpuEvictPolicy": "evictByRealLimit"}
    assert node_strategy(cfg.threshold, node({"pool": "x"})) == cluster
    # pool=a: first entry (explicit false and 50 override); the second match (40) is ignored
    assert node_strategy(cfg.threshold, node({"pool": "a"})) == {**cluster, "enable": False,
                                                                  "cpuSuppressThresholdPercent": 50}
    assert node_strategy(cfg.threshold, node({"pool": "b"})) == {**cluster, "memoryEvictThresholdPercent": 80}
    # the merged entries keep their profile
    assert cfg.threshold["nodeStrategies"][0]["name"] == "a"
    assert cfg.threshold["nodeStrategies"][0]["nodeSelector"] == {"matchLabels": {"pool": "a"}}


def test_unparsable_selector_is_skipped_with_a_warning():
    cfg, problems = parse(cm(cpu_burst_config={"nodeStrategies": [
        {"name": "bad", "nodeSelector": {"matchExpressions": [{"key": "pool", "operator": "Near", "values": ["a"]}]},
         "policy": "auto"},
        {"name": "good", "nodeSelector": {"matchLabels": {"pool": "a"}}, "policy": "cpuBurstOnly"}]}))
    assert [(p.severity, p.key) for p in problems] == [("warning", "cpu-burst-config")]
    assert problems[0].message.startswith("data.cpu-burst-config.nodeStrategies[0].nodeSelector: ")
    assert node_strategy(cfg.cpu_burst, node({"pool": "a"}))["policy"] == "cpuBurstOnly"


def test_colocation_node_configs_merge_on_cluster():
    cfg, problems = parse(cm(colocation_config={
        "enable": True, "cpuReclaimThresholdPercent": 70,
        "nodeConfigs": [
            {"name": "pool-a", "nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuReclaimThresholdPercent": 80,
             "metricAggregatePolicy": {"durations": ["1m", "90s"]}},
            {"name": "pool-a-too", "nodeSelector": {"matchLabels": {"pool": "a"}}, "enable": False},
        ]}))
    assert problems == []
    entry = cfg.colocation["nodeConfigs"][0]
    assert entry["name"] == "pool-a" and entry["nodeSelector"] == {"matchLabels": {"pool": "a"}}
    assert entry["memoryReclaimThresholdPercent"] == 65 and entry["enable"] is True
    s = colocation_strategy(cfg, node({"pool": "a"}))
    assert s["cpuReclaimThresholdPercent"] == 80 and s["enable"] is True   # second match ignored
    assert s["metricAggregatePolicy"] == {"durations": ["1m0s", "1m30s"]}  # Go Duration.String
    assert "name" not in s and "nodeSelector" not in s and "nodeConfigs" not in s
    other = colocation_strategy(cfg, node({"pool": "b"}))
    assert other == {**DEFAULT_COLOCATION_STRATEGY, "enable": True, "cpuReclaimThresholdPercent": 70}


def test_colocation_annotation_and_ratio_labels():
    cfg, _ = parse(cm(colocation_config={"enable": True}))
    n = node(labels={"node.koordinator.sh/cpu-reclaim-ratio": "0.29",
                     "node.koordinator.sh/memory-reclaim-ratio": "0.57",
                     "node.koordinator.sh/mid-static-cpu-reserved-ratio": "abc",
                     "node.koordinator.sh/mid-static-memory-reserved-ratio": "-0.1"},
             annotations={"node.koordinator.sh/colocation-strategy": json.dumps(
                 {"cpuReclaimThresholdPercent": 10, "degradeTimeMinutes": 5, "enable": False,
                  "metricAggregatePolicy": {"durations": ["2m"]}, "unknownField": 1})})
    s = colocation_strategy(cfg, n)
    # labels win over the annotation: int(0.29*100) = int(28.999999999999996) = 28; 0.57 -> 56
    assert s["cpuReclaimThresholdPercent"] == 28 and s["memoryReclaimThresholdPercent"] == 56
    # invalid ("abc") and negative ratios are ignored: the defaults stay
    assert s["midStaticCPUReservedPercent"] == 0 and s["midStaticMemoryReservedPercent"] == 0
    # annotation fields merged (explicit false included), unknown fields dropped
    assert s["degradeTimeMinutes"] == 5 and s["enable"] is False and "unknownField" not in s
    assert s["metricAggregatePolicy"] == {"durations": ["2m0s"]}
    assert colocation_strategy(cfg, node({"node.koordinator.sh/cpu-reclaim-ratio": "0.7"}))[
        "cpuReclaimThresholdPercent"] == 70


@pytest.mark.parametrize("annotation", ["{not json", '{"cpuReclaimThresholdPercent": "10"}',
                                        '{"metricAggregatePolicy": {"durations": ["5 minutes"]}}', "[1]"])
def test_bad_colocation_annotation_is_ignored(annotation):
    cfg, _ = parse(cm(colocation_config={"enable": True, "cpuReclaimThresholdPercent": 70}))
    s = colocation_strategy(cfg, node(annotations={"node.koordinator.sh/colocation-strategy": annotation}))
    assert s["cpuReclaimThresholdPercent"] == 70 and s["metricAggregatePolicy"]["durations"][0] == "5m0s"


def test_cpu_normalization_and_amplification_strategies():
    cfg, problems = parse(cm(
        cpu_normalization_config={"enable": True, "ratioModel": {"Intel Xeon": {"baseRatio": 1.5}},
                                  "nodeConfigs": [{"nodeSelector": {"matchLabels": {"pool": "a"}}, "enable": False,
                                                   "defaultRatio": 1.2}]},
        resource_amplification_config={"enable": True, "resourceAmplificationRatio": {"cpu": 1.5},
                                       "nodeConfigs": [{"name": "a", "nodeSelector": {"matchLabels": {"pool": "a"}},
                                                        "resourceAmplificationRatio": {"memory": 1.2}}]}))
    assert problems == []
    assert cpu_normalization_strategy(cfg, node({"pool": "b"})) == {
        "enable": True, "ratioModel": {"Intel Xeon": {"baseRatio": 1.5}}}
    assert cpu_normalization_strategy(cfg, node({"pool": "a"})) == {
        "enable": False, "ratioModel": {"Intel Xeon": {"baseRatio": 1.5}}, "defaultRatio": 1.2}
    # map entries add to the cluster's map
    assert resource_amplification_strategy(cfg, node({"pool": "a"})) == {
        "enable": True, "resourceAmplificationRatio": {"cpu": 1.5, "memory": 1.2}}
    assert resource_amplification_strategy(cfg, node()) == {"enable": True, "resourceAmplificationRatio": {"cpu": 1.5}}


# -- bad input -------------------------------------------------------------------------------------


def test_bad_json_keeps_the_previous_value_of_that_key_only():
    previous, problems = parse(cm(colocation_config={"enable": True, "cpuReclaimThresholdPercent": 70},
                                  cpu_burst_config={"clusterStrategy": {"policy": "auto"}}))
    assert problems == [] and previous.colocation_error is False
    cfg, problems = parse(cm(colocation_config='{"enable": true,', cpu_burst_config='{"clusterStrategy": {',
                             resource_threshold_config={"clusterStrategy": {"enable": True}}), previous)
    assert cfg.colocation == previous.colocation and cfg.colocation_error is True
    assert cfg.cpu_burst == previous.cpu_burst
    assert cfg.threshold["clusterStrategy"]["enable"] is True          # the good key updated
    by_key = {p.key: p for p in problems}
    assert set(by_key) == {"colocation-config", "cpu-burst-config"}
    assert by_key["colocation-config"].severity == "error"
    assert by_key["colocation-config"].reason == "ColocationCfgUnmarshalFailed"
    assert by_key["cpu-burst-config"].reason == "SLOCfgUnmarshalFailed"
    assert by_key["colocation-config"].message.startswith("data.colocation-config: colocation-config is not valid JSON")
    # fixing the key clears the error status
    fixed, problems = parse(cm(colocation_config={"enable": True, "cpuReclaimThresholdPercent": 70}), cfg)
    assert problems == [] and fixed.colocation_error is False


def test_bad_key_without_previous_config_uses_defaults():
    cfg, problems = parse(cm(system_config="nope", colocation_config="[]"))
    assert cfg.system == ManagerConfig.defaults().system and cfg.colocation == ManagerConfig.defaults().colocation
    assert cfg.colocation_error is True
    assert {p.key for p in problems} == {"system-config", "colocation-config"}


def test_schema_invalid_value_is_rejected_naming_field_and_value():
    previous, _ = parse(cm(colocation_config={"enable": True}))
    cfg, problems = parse(cm(colocation_config={"enable": True, "cpuReclaimThresholdPercent": -1},
                             resource_threshold_config={"clusterStrategy": {"cpuSuppressThresholdPercent": 101}}),
                          previous)
    assert cfg.colocation == previous.colocation and cfg.colocation_error is True
    assert cfg.threshold == ManagerConfig.defaults().threshold
    messages = sorted(p.message for p in problems)
    assert all(p.severity == "error" for p in problems)
    assert messages[0].startswith("data.colocation-config.cpuReclaimThresholdPercent: Invalid value: -1: ")
    assert "greater than or equal to 0" in messages[0]
    assert messages[1].startswith(
        "data.resource-threshold-config.clusterStrategy.cpuSuppressThresholdPercent: Invalid value: 101: ")


def test_invalid_node_config_rejects_the_key():
    # the schema checks nodeConfigs too, so koord-manager's "replace by the cluster strategy" never triggers
    cfg, problems = parse(cm(colocation_config={"enable": True, "nodeConfigs": [
        {"nodeSelector": {"matchLabels": {"a": "b"}}, "midUnallocatedPercent": 200}]}))
    assert cfg.colocation_error is True and [p.severity for p in problems] == ["error"]
    assert problems[0].message.startswith("data.colocation-config.nodeConfigs[0].midUnallocatedPercent: Invalid value: 200")


def test_unknown_field_is_a_warning_and_the_rest_applies():
    cfg, problems = parse(cm(cpu_burst_config={"clusterStrategy": {"policy": "auto", "burstiness": 3}}))
    assert cfg.cpu_burst["clusterStrategy"]["policy"] == "auto" and "burstiness" not in cfg.cpu_burst["clusterStrategy"]
    assert [(p.severity, p.reason) for p in problems] == [("warning", "SLOCfgWarning")]
    assert problems[0].message.startswith("data.cpu-burst-config.clusterStrategy.burstiness: unknown field")


def test_field_names_match_case_insensitively_as_in_go():
    cfg, problems = parse(cm(colocation_config={"Enable": True, "CPUReclaimThresholdPercent": 55}))
    assert cfg.colocation["enable"] is True and cfg.colocation["cpuReclaimThresholdPercent"] == 55
    assert "CPUReclaimThresholdPercent" not in cfg.colocation
    assert [p.severity for p in problems] == ["warning", "warning"]
    assert "applied as 'cpuReclaimThresholdPercent'" in problems[1].message


def test_unknown_configmap_key_is_a_warning():
    cfg, problems = parse(cm(colocation_cfg={"enable": True}))
    assert cfg == ManagerConfig.defaults()
    assert [(p.key, p.severity) for p in problems] == [("colocation-cfg", "warning")]
    assert "did you mean 'colocation-config'" in problems[0].message


def test_nulls_are_absent_and_quantities_canonical():
    cfg, problems = parse(cm(system_config={"clusterStrategy": {"totalNetworkBandwidth": 1000000,
                                                                "minFreeKbytesFactor": None}},
                             resource_threshold_config="null"))
    assert problems == []
    assert cfg.system["clusterStrategy"] == {"totalNetworkBandwidth": "1M"}
    assert cfg.threshold == ManagerConfig.defaults().threshold


def test_changed_keys_and_equality():
    a, _ = parse(cm())
    b, _ = parse(cm(cpu_burst_config={"clusterStrategy": {"policy": "auto"}}))
    assert a == ManagerConfig.defaults() and a != b
    assert b.changed_keys(a) == {"cpu-burst-config"}
    c = a.copy()
    c.colocation_error = True
    assert c.changed_keys(a) == {"colocation-config"}


# -- helpers ---------------------------------------------------------------------------------------


def test_is_colocation_strategy_valid():
    assert is_colocation_strategy_valid(DEFAULT_COLOCATION_STRATEGY)
    assert not is_colocation_strategy_valid(None)
    for bad in ({"metricReportIntervalSeconds": 0}, {"resourceDiffThreshold": 0}, {"midUnallocatedPercent": 200},
                {"cpuReclaimThresholdPercent": -1}, {"metricMemoryCollectPolicy": ""},
                {"batchCPUThresholdPercent": -1}):
        assert not is_colocation_strategy_valid({**DEFAULT_COLOCATION_STRATEGY, **bad}), bad
    # batch thresholds above 100 are valid (pitfall 15)
    assert is_colocation_strategy_valid({**DEFAULT_COLOCATION_STRATEGY, "batchCPUThresholdPercent": 150})


@pytest.mark.parametrize("text,ns,canonical", [
    ("5m", 300 * 10**9, "5m0s"), ("1h", 3600 * 10**9, "1h0m0s"), ("90s", 90 * 10**9, "1m30s"),
    ("1.5s", 1_500_000_000, "1.5s"), ("500ms", 500_000_000, "500ms"), ("0", 0, "0s"),
    ("1h2m3.25s", (3723 * 10**9) + 250_000_000, "1h2m3.25s"), ("1500us", 1_500_000, "1.5ms"), ("7ns", 7, "7ns")])
def test_go_durations(text, ns, canonical):
    assert parse_go_duration(text) == ns and format_go_duration(ns) == canonical


@pytest.mark.parametrize("text", ["", "5", "5 m", "m", "1x"])
def test_bad_go_durations(text):
    with pytest.raises(ValueError):
        parse_go_duration(text)
