"""schemas/config: every configuration document's schema, its defaults, real Koordinator ConfigMaps and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from koordinator.apis import schemas
from koordinator.apis.config_documents import documents_of, validate_configmap, validate_document
from koordinator.apis.crdschema import check_crd_schema

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT.parent / "shared" / "examples" / "koordinator"



def _default_documents() -> dict[str, str]:
    """The default documents as the manifests ship them (key -> text): manifests/config is their only copy."""
    out: dict[str, str] = {}
    for path in sorted((ROOT / "manifests" / "config").glob("*.yaml")):
        out.update(yaml.safe_load(path.read_text())["data"])
    return out


DEFAULTS = _default_documents()

SLO_KEYS = ["colocation-config", "resource-threshold-config", "resource-qos-config", "cpu-burst-config",
            "system-config", "host-application-config", "cpu-normalization-config",
            "resource-amplification-config"]
TOP_LEVEL = SLO_KEYS + ["koord-scheduler-config", "koord-descheduler-config", "koordlet-config",
                        "koord-device-daemon-config"]
SCHEDULER_ARGS = ["LoadAwareScheduling", "NodeNUMAResource", "Reservation", "ElasticQuota", "Coscheduling",
                  "DeviceShare", "NodeResourcesFitPlus", "ScarceResourceAvoidance", "SchedulingHint",
                  "NodeResourcesFit", "DefaultPreemption"]
DESCHEDULER_ARGS = ["LowNodeLoad", "MigrationController", "CustomPriority", "FragmentationAware",
                    "ScaleDownBinPack"]


def messages(errors):
    return {e.path: " | ".join(x.message for x in errors if x.path == e.path) for e in errors}


def configmap(name, **data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "koordinator-system"},
            "data": data}


# -- the schemas themselves ---------------------------------------------------------------------


@pytest.mark.parametrize("cs", schemas.config_schemas(), ids=lambda s: f"{s.name}/{s.version}")
def test_every_config_schema_is_a_valid_structural_schema(cs):
    assert check_crd_schema(cs.schema, "schema") == []
    block = cs.config
    assert block.get("encoding") in ("json", "yaml") and block.get("description")
    if "pluginArgsOf" in block:
        outer = schemas.config_schema(block["embeddedIn"])
        assert block["pluginArgsOf"] in outer.config["plugins"]
        assert cs.name == f"{block['pluginArgsOf']}-args"
        assert cs.schema["properties"]["kind"]["enum"] == [block["argsKind"]]
        assert [v.rpartition("/")[2] for v in cs.schema["properties"]["apiVersion"]["enum"]] == [cs.version]
    else:
        assert block.get("configMap") and block.get("key")
        # Version = the document's API version where it has one, else v1alpha1.
        props = cs.schema["properties"]
        if "apiVersion" in props:
            assert [v.rpartition("/")[2] for v in props["apiVersion"]["enum"]] == [cs.version]
        elif "version" in props:  # the device daemon's file: version: v1
            assert [v for v in props["version"]["enum"] if v] == [cs.version]
        else:
            assert cs.version == "v1alpha1"


def test_every_document_has_a_schema():
    names = {s.name for s in schemas.config_schemas()}
    assert set(TOP_LEVEL) <= names
    assert {f"{p}-args" for p in SCHEDULER_ARGS + DESCHEDULER_ARGS} <= names
    assert schemas.config_schema("koord-scheduler-config").version == "v1"
    assert schemas.config_schema("koord-descheduler-config").version == "v1alpha2"
    assert schemas.config_schema("LowNodeLoad-args").version == "v1alpha2"
    assert schemas.config_schema("colocation-config").version == "v1alpha1"


def test_configmaps_map_to_their_documents():
    assert [d.name for d in documents_of("slo-controller-config")] == sorted(SLO_KEYS)
    assert [d.name for d in documents_of("scheduler-config")] == ["koord-scheduler-config"]
    assert [d.name for d in documents_of("descheduler-config")] == ["koord-descheduler-config"]
    assert [d.name for d in documents_of("koordlet-config")] == ["koordlet-config"]
    assert documents_of("redis-config") == []


# -- default documents ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_default_documents_validate(name):
    assert name in DEFAULTS, f"manifests/config ships no default {name}"
    parsed, errors = validate_document(name, DEFAULTS[name])
    assert errors == []
    assert isinstance(parsed, dict)


def test_passthrough_keys_are_not_checked():
    assert validate_configmap(configmap("koordlet-config", **{"koordlet-config": DEFAULTS["koordlet-config"],
                                                               "qos-plugin-extra-configs": "anything"})) == []


def test_defaults_are_those_of_koordinator():
    doc, errors = validate_document("colocation-config", "{}")
    assert errors == []
    assert doc["enable"] is False and doc["cpuReclaimThresholdPercent"] == 60
    assert doc["memoryReclaimThresholdPercent"] == 65 and doc["metricAggregatePolicy"]["durations"] == [
        "5m", "10m", "30m"]
    assert "batchCPUThresholdPercent" not in doc
    # Node-level entries inherit absent fields from the cluster strategy: nothing is defaulted there.
    doc, _ = validate_document("resource-threshold-config", {"nodeStrategies": [
        {"nodeSelector": {"matchLabels": {"pool": "a"}}, "cpuSuppressThresholdPercent": 60}]})
    assert doc["clusterStrategy"] == {"enable": False, "cpuSuppressThresholdPercent": 65,
                                      "cpuSuppressPolicy": "cpuset", "memoryEvictThresholdPercent": 70,
                                      "cpuEvictPolicy": "evictByRealLimit"}
    assert doc["nodeStrategies"][0] == {"nodeSelector": {"matchLabels": {"pool": "a"}},
                                        "cpuSuppressThresholdPercent": 60}
    doc, _ = validate_document("resource-qos-config", "{}")
    assert doc == {}  # koord-manager's default is an empty strategy; koordlet fills in its own
    doc, _ = validate_document("cpu-burst-config", "{}")
    assert doc["clusterStrategy"] == {"policy": "none", "cpuBurstPercent": 1000, "cfsQuotaBurstPercent": 300,
                                      "cfsQuotaBurstPeriodSeconds": -1, "sharePoolThresholdPercent": 50}
    doc, _ = validate_document("MigrationController-args", {})
    assert doc["defaultJobMode"] == "ReservationFirst" and doc["evictQPS"] == "10"
    assert doc["maxMigratingPerNode"] == 2 and doc["objectLimiters"] == {"workload": {"duration": "5m"}}
    doc, _ = validate_document("LowNodeLoad-args", {})
    assert doc["anomalyCondition"] == {"timeout": "1m", "consecutiveAbnormalities": 5, "consecutiveNormalities": 3}
    assert doc["nodeMetricExpirationSeconds"] == 180 and doc["nodeFit"] is True


# -- Koordinator's own ConfigMaps -----------------------------------------------------------------

# file -> {path: words every message at that path must contain}
KNOWN_BROKEN = {
    "slo-config--2.yaml": {"data.system-config": ["system-config is not valid JSON", "Expecting ',' delimiter"]},
    "capacity-scheduling--13.yaml": {
        "data.koord-scheduler-config.apiVersion": ["kubescheduler.config.k8s.io/v1beta2", "supported values",
                                                   '"kubescheduler.config.k8s.io/v1"'],
        "data.koord-scheduler-config.profiles[0].pluginConfig[0].args.apiVersion": [
            "kubescheduler.config.k8s.io/v1beta2"]},
    "cpu-evict--1.yaml": {
        "data.resource-threshold-config.clusterStrategy.CPUEvictTimeWindowSeconds": [
            "unknown field", "did you mean 'cpuEvictTimeWindowSeconds'"]},
    **{f"node-resource-fit-plus-scoring--{i}.yaml": {
        "data.scheduler-config.yaml": ["koord-scheduler-config is not valid YAML"]} for i in (3, 4, 5, 6)},
}


def _example_configmaps():
    if not EXAMPLES.is_dir():
        return [pytest.param(None, None, marks=pytest.mark.skip(reason=f"{EXAMPLES} is absent"))]
    found = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        try:
            objs = list(yaml.safe_load_all(path.read_text()))
        except yaml.YAMLError:
            continue  # not our concern here: no ConfigMap in it can be read either
        for i, obj in enumerate(o for o in objs if isinstance(o, dict) and o.get("kind") == "ConfigMap"):
            found.append(pytest.param(path.name, obj, id=f"{path.name}[{i}]"))
    return found


@pytest.mark.parametrize("filename,obj", _example_configmaps())
def test_koordinator_example_configmaps(filename, obj):
    errors = validate_configmap(obj)
    expected = KNOWN_BROKEN.get(filename, {})
    got = messages(errors)
    assert set(got) == set(expected), errors
    for path, words in expected.items():
        for word in words:
            assert word in got[path], (path, got[path])


def test_the_example_corpus_has_the_configmaps_we_expect():
    if not EXAMPLES.is_dir():
        pytest.skip(f"{EXAMPLES} is absent")
    params = _example_configmaps()
    ours = [p for p in params if documents_of(p.values[1]["metadata"]["name"])]
    assert len(params) == 34
    assert len(ours) == 30  # the other four are nginx, redis, YARN and MetaX configuration
    assert set(KNOWN_BROKEN) <= {p.values[0] for p in ours}


# -- bad documents ----------------------------------------------------------------------------------

BROKEN = [
    # wrong types
    ("colocation-config", {"enable": "yes"}, {"enable": ["must be of type boolean"]}),
    ("colocation-config", {"cpuReclaimThresholdPercent": 60.5}, {"cpuReclaimThresholdPercent": ["integer"]}),
    ("resource-threshold-config", {"clusterStrategy": {"cpuSuppressThresholdPercent": "65"}},
     {"clusterStrategy.cpuSuppressThresholdPercent": ["must be of type integer"]}),
    ("resource-threshold-config", {"nodeStrategies": "pool-a"}, {"nodeStrategies": ["must be of type array"]}),
    # out-of-range percents
    ("colocation-config", {"midCPUThresholdPercent": 120},
     {"midCPUThresholdPercent": ["Invalid value: 120", "less than or equal to 100"]}),
    ("colocation-config", {"cpuReclaimThresholdPercent": -1},
     {"cpuReclaimThresholdPercent": ["greater than or equal to 0"]}),
    ("colocation-config", {"resourceDiffThreshold": 0}, {"resourceDiffThreshold": ["greater than 0"]}),
    ("resource-threshold-config",
     {"nodeStrategies": [{"nodeSelector": {"matchLabels": {"a": "b"}}, "memoryEvictThresholdPercent": 101}]},
     {"nodeStrategies[0].memoryEvictThresholdPercent": ["less than or equal to 100"]}),
    ("resource-qos-config", {"clusterStrategy": {"lsClass": {"cpuQOS": {"groupIdentity": 3}},
                                                 "beClass": {"memoryQOS": {"wmarkScalePermill": 0}}}},
     {"clusterStrategy.lsClass.cpuQOS.groupIdentity": ["less than or equal to 2"],
      "clusterStrategy.beClass.memoryQOS.wmarkScalePermill": ["greater than or equal to 1"]}),
    ("cpu-burst-config", {"clusterStrategy": {"cpuBurstPercent": 0, "cfsQuotaBurstPercent": 99}},
     {"clusterStrategy.cpuBurstPercent": ["greater than or equal to 1"],
      "clusterStrategy.cfsQuotaBurstPercent": ["greater than or equal to 100"]}),
    ("LoadAwareScheduling-args", {"usageThresholds": {"cpu": 101}, "resourceWeights": {"cpu": 0}},
     {"usageThresholds.cpu": ["less than or equal to 100"], "resourceWeights.cpu": ["greater than or equal to 1"]}),
    ("LowNodeLoad-args", {"highThresholds": {"cpu": 100.5}}, {"highThresholds.cpu": ["less than or equal to 100"]}),
    # negative and garbage quantities
    ("system-config", {"clusterStrategy": {"totalNetworkBandwidth": "-1G"}},
     {"clusterStrategy.totalNetworkBandwidth": ['Invalid value: "-1G"', "should match"]}),
    ("system-config", {"clusterStrategy": {"totalNetworkBandwidth": "lots"}},
     {"clusterStrategy.totalNetworkBandwidth": ['Invalid value: "lots": is not a valid quantity']}),
    ("resource-qos-config", {"clusterStrategy": {"beClass": {"networkQOS": {"ingressRequest": "fast",
                                                                            "egressLimit": 150}}}},
     {"clusterStrategy.beClass.networkQOS.ingressRequest": ["is not a valid quantity"],
      "clusterStrategy.beClass.networkQOS.egressLimit": ["less than or equal to 100"]}),
    ("ElasticQuota-args", {"defaultQuotaGroupMax": {"cpu": "-1", "memory": -5, "nvidia.com/gpu": "8x"}},
     {"defaultQuotaGroupMax.cpu": ['Invalid value: "-1"'],
      "defaultQuotaGroupMax.memory": ["greater than or equal to 0"],
      "defaultQuotaGroupMax.nvidia.com/gpu": ["is not a valid quantity"]}),
    ("koordlet-config", {"tsdbMaxBytes": "100MB"}, {"tsdbMaxBytes": ["is not a valid quantity"]}),
    # bad durations
    ("colocation-config", {"metricAggregatePolicy": {"durations": ["5m", "10 minutes"]}},
     {"metricAggregatePolicy.durations[1]": ["is not a valid duration"]}),
    ("Coscheduling-args", {"defaultTimeout": "ten"}, {"defaultTimeout": ["is not a valid duration"]}),
    ("ElasticQuota-args", {"delayEvictTime": "-5s"}, {"delayEvictTime": ['Invalid value: "-5s"']}),
    ("koord-descheduler-config", {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration",
                                  "deschedulingInterval": "1d"},
     {"deschedulingInterval": ["is not a valid duration"]}),
    ("koord-device-daemon-config", {"flags": {"kdd": {"sleepInterval": 900}}}, {"flags.kdd.sleepInterval": [
        "duration"]}),
    # unknown enum values
    ("cpu-burst-config", {"clusterStrategy": {"policy": "always"}},
     {"clusterStrategy.policy": ['Unsupported value: "always"', '"cfsQuotaBurstOnly"']}),
    ("colocation-config", {"memoryCalculatePolicy": "peak"}, {"memoryCalculatePolicy": ["Unsupported value"]}),
    ("resource-qos-config", {"clusterStrategy": {"policies": {"netQOSPolicy": "terwayQos"}}},
     {"clusterStrategy.policies.netQOSPolicy": ['"terway-qos"']}),
    ("host-application-config", {"applications": [{"name": "nginx", "qos": "LSX"}]},
     {"applications[0].qos": ['Unsupported value: "LSX"']}),
    ("LoadAwareScheduling-args", {"aggregated": {"usageAggregationType": "p100"}},
     {"aggregated.usageAggregationType": ["Unsupported value"]}),
    ("MigrationController-args", {"evictionPolicy": "Kill", "skipEvictionGates": ["NodeFitness"]},
     {"evictionPolicy": ["Unsupported value"], "skipEvictionGates[0]": ["Unsupported value"]}),
    ("koord-device-daemon-config", {"version": "v2"}, {"version": ['Unsupported value: "v2"']}),
    # typo'd field names
    ("resource-threshold-config", {"clusterStrategy": {"cpuSupressThresholdPercent": 60}},
     {"clusterStrategy.cpuSupressThresholdPercent": ["did you mean 'cpuSuppressThresholdPercent'?"]}),
    ("colocation-config", {"enabled": True}, {"enabled": ["unknown field, did you mean 'enable'?"]}),
    ("koord-scheduler-config", {"apiVersion": "kubescheduler.config.k8s.io/v1",
                                "kind": "KubeSchedulerConfiguration", "profiles": [{"schedulername": "x"}]},
     {"profiles[0].schedulername": ["did you mean 'schedulerName'?"]}),
    ("koordlet-config", {"kubeletSyncIntervl": "5s"}, {"kubeletSyncIntervl": ["did you mean 'kubeletSyncInterval'?"]}),
    # structure
    ("cpu-burst-config", {"nodeStrategies": [{"name": "pool-a", "policy": "auto"}]},
     {"nodeStrategies[0].nodeSelector": ["Required value"]}),
    ("MigrationController-args", {"namespaces": {"include": ["a"], "exclude": ["b"]}},
     {"namespaces": ["at most 1"]}),
    ("CustomPriority-args", {"evictionOrder": [{"name": "Spot", "nodeSelector": {}}]},
     {"evictionOrder": ["at least 2 items"], "evictionOrder[0].name": ["should match"]}),
    ("koord-scheduler-config", {"kind": "KubeSchedulerConfiguration"}, {"apiVersion": ["Required value"]}),
]


@pytest.mark.parametrize("name,document,expected",
                         [pytest.param(*case, id=f"{case[0]}:{','.join(case[2])}") for case in BROKEN])
def test_broken_documents_are_rejected_with_exact_paths(name, document, expected):
    _, errors = validate_document(name, document)
    got = messages(errors)
    assert set(got) == set(expected), errors
    for path, words in expected.items():
        for word in words:
            assert word in got[path], (path, got[path])


# -- text forms -------------------------------------------------------------------------------------


def test_json_text_with_a_syntax_error_gives_one_error_naming_the_document():
    errors = validate_configmap(configmap("slo-controller-config", **{
        "colocation-config": '{"enable": true "cpuReclaimThresholdPercent": 60}',
        "cpu-burst-config": '{"clusterStrategy": {"policy": "auto"}}'}))
    assert len(errors) == 1
    assert errors[0].path == "data.colocation-config"
    assert errors[0].message.startswith("colocation-config is not valid JSON: Expecting ',' delimiter: line 1")


def test_text_is_parsed_as_the_documents_encoding():
    # JSON documents are read as JSON, as koord-manager does: YAML is not accepted there.
    _, errors = validate_document("cpu-burst-config", "clusterStrategy: {policy: auto}")
    assert [e.message.split(":")[0] for e in errors] == ["cpu-burst-config is not valid JSON"]
    doc, errors = validate_document("koord-descheduler-config", "apiVersion: descheduler/v1alpha2\n"
                                                                "kind: DeschedulerConfiguration\n")
    assert errors == [] and doc["leaderElection"]["resourceName"] == "koord-descheduler"
    _, errors = validate_document("koord-scheduler-config", "profiles:\n- schedulerName: a\n pluginConfig: []\n")
    assert len(errors) == 1 and errors[0].message.startswith("koord-scheduler-config is not valid YAML")


def test_configmap_values_in_error_carry_the_key_in_the_path():
    errors = validate_configmap(configmap(
        "slo-controller-config",
        **{"colocation-config": json.dumps({"enable": True, "midCPUThresholdPercent": 120}),
           "resource-threshold-config": json.dumps({"clusterStrategy": {"CPUEvictTimeWindowSeconds": 60}})}))
    assert [str(e) for e in errors] == [
        "data.colocation-config.midCPUThresholdPercent: Invalid value: 120: midCPUThresholdPercent in body "
        "should be less than or equal to 100",
        "data.resource-threshold-config.clusterStrategy.CPUEvictTimeWindowSeconds: unknown field, "
        "did you mean 'cpuEvictTimeWindowSeconds'?"]


def test_configmap_keys():
    # An empty key means "use the defaults" to koord-manager.
    assert validate_configmap(configmap("slo-controller-config", **{"colocation-config": "  \n"})) == []
    errors = validate_configmap(configmap("slo-controller-config", **{"colocation-cofig": "{}", "zzz": "{}"}))
    assert messages(errors) == {
        "data.colocation-cofig": "unknown key in slo-controller-config, did you mean 'colocation-config'?",
        "data.zzz": "unknown key in slo-controller-config (known keys: colocation-config, cpu-burst-config, "
                    "cpu-normalization-config, host-application-config, resource-amplification-config, "
                    "resource-qos-config, resource-threshold-config, system-config)"}
    errors = validate_configmap(configmap("koordlet-config", **{"koordlet-config": "kubeletSyncInterval: 5s",
                                                                "qos-plugin-extra-config": "x"}))
    assert messages(errors) == {
        "data.qos-plugin-extra-config": "unknown key in koordlet-config, did you mean 'qos-plugin-extra-configs'?"}
    # The scheduler's ConfigMap is mounted as a file: any key holds the configuration.
    errors = validate_configmap(configmap("koord-scheduler-config", **{"scheduler.yaml": "kind: Foo"}))
    assert set(messages(errors)) == {"data.scheduler.yaml.apiVersion", "data.scheduler.yaml.kind"}
    errors = validate_configmap(configmap("koord-scheduler-config", **{"koord-scheduler-config": ""}))
    assert set(messages(errors)) == {"data.koord-scheduler-config.apiVersion", "data.koord-scheduler-config.kind"}
    assert validate_configmap(configmap("some-app-config", **{"x": "{"})) == []
    assert validate_configmap({"kind": "ConfigMap", "metadata": {"name": "slo-controller-config"},
                               "data": {"colocation-config": 5}})[0].message.startswith("must be a string")
    assert validate_configmap({"kind": "ConfigMap", "metadata": {"name": "slo-controller-config"}}) == []


# -- scheduler and descheduler profiles --------------------------------------------------------------

SCHEDULER = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: koord-scheduler
  plugins:
    queueSort:
      disabled: [{name: "*"}]
      enabled: [{name: PrioritySort}]
    score:
      enabled: [{name: LoadAware, weight: 1}, {name: NodeResourcesFitPlus, weight: 2}]
  pluginConfig:
  - name: NodeResourcesFitPlus
    args:
      resources:
        nvidia.com/gpu: {type: MostAllocated, weight: 2}
  - name: LoadAwareScheduling
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: LoadAwareSchedulingArgs
      usageThresholds: {cpu: 120, memory: 65}
      estimatedScalingFactors: {cpu: "85"}
  - name: Coscheduling
    args: {kind: CoschedulingArg, defaultMatchPolicy: once-satisfied}
  - name: InterPodAffinity
    args: {hardPodAffinityWeight: 1}
  - name: MyPlugin
    args: {anything: 1}
"""


def test_plugin_args_are_validated_against_their_plugin_schema():
    errors = validate_configmap(configmap("koord-scheduler-config", **{"koord-scheduler-config": SCHEDULER}))
    got = messages(errors)
    prefix = "data.koord-scheduler-config.profiles[0]"
    assert set(got) == {f"{prefix}.plugins.score.enabled[0].name", f"{prefix}.pluginConfig[1].args.usageThresholds.cpu",
                        f"{prefix}.pluginConfig[1].args.estimatedScalingFactors.cpu",
                        f"{prefix}.pluginConfig[2].args.kind", f"{prefix}.pluginConfig[4].name"}
    assert got[f"{prefix}.plugins.score.enabled[0].name"] == (
        'Unsupported value: "LoadAware": not a koord-scheduler plugin, did you mean \'LoadAwareScheduling\'?')
    assert "less than or equal to 100" in got[f"{prefix}.pluginConfig[1].args.usageThresholds.cpu"]
    assert "must be of type integer" in got[f"{prefix}.pluginConfig[1].args.estimatedScalingFactors.cpu"]
    assert got[f"{prefix}.pluginConfig[2].args.kind"] == (
        'Unsupported value: "CoschedulingArg": supported values: "CoschedulingArgs"')
    assert got[f"{prefix}.pluginConfig[4].name"] == 'Unsupported value: "MyPlugin": not a koord-scheduler plugin'


def test_repeated_plugin_config_is_rejected():
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "profiles": [{"pluginConfig": [{"name": "Reservation", "args": {}}, {"name": "Reservation"}]}]}
    _, errors = validate_document("koord-scheduler-config", doc)
    assert [e.path for e in errors] == ["profiles[0].pluginConfig[1]"]
    assert "Duplicate value" in errors[0].message


def test_descheduler_plugin_args():
    doc = yaml.safe_load(DEFAULTS["koord-descheduler-config"])
    doc["profiles"][0]["plugins"]["balance"] = {"enabled": [{"name": "LowNodeLoads"}]}
    doc["profiles"][0]["pluginConfig"][1]["args"]["lowThresholds"]["cpu"] = -1
    doc["profiles"][0]["pluginConfig"][0]["args"]["maxMigratingPerWorkload"] = "10 percent"
    _, errors = validate_document("koord-descheduler-config", doc)
    got = messages(errors)
    assert set(got) == {"profiles[0].plugins.balance.enabled[0].name",
                        "profiles[0].pluginConfig[1].args.lowThresholds.cpu",
                        "profiles[0].pluginConfig[0].args.maxMigratingPerWorkload"}
    assert "did you mean 'LowNodeLoad'?" in got["profiles[0].plugins.balance.enabled[0].name"]
    assert "not a koord-descheduler plugin" in got["profiles[0].plugins.balance.enabled[0].name"]


def test_the_documents_api_version_chooses_the_schema():
    _, errors = validate_document("koord-descheduler-config", {"apiVersion": "descheduler/v1alpha1",
                                                               "kind": "DeschedulerConfiguration"})
    assert [str(e) for e in errors] == [
        'apiVersion: Unsupported value: "descheduler/v1alpha1": supported values: "descheduler/v1alpha2"']
