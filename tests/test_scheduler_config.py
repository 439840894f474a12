"""koord-scheduler's KubeSchedulerConfiguration: defaults, kube's plugin merge and multiPoint expansion, errors."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from koordinator_roles.scheduler import config as c
from koordinator_roles.scheduler.config import ConfigError, PluginRef

REPO = Path(__file__).resolve().parent.parent
SHIPPED = yaml.safe_load(yaml.safe_load((REPO / "tests/data/koordinator-scheduler-config.yaml").read_text())
                         ["data"]["koord-scheduler-config"])

# A build with every plugin but the volume and DRA ones, as the role is planned.
REGISTRY = set(c.KNOWN_POINTS) - {"VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone",
                                  "DynamicResources"}
ALL = set(c.KNOWN_POINTS)


def parse(doc, registry=REGISTRY, not_implemented=None, **kw):
    return c.parse(doc, registry_names=registry, not_implemented=not_implemented or {}, **kw)


def document(*profiles, **top):
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": list(profiles), **top}


def errors_of(doc, **kw) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse(doc, **kw)
    assert str(info.value) == "; ".join(info.value.errors)
    return info.value.errors


def names(refs):
    return [r.name for r in refs]


# -- defaults ------------------------------------------------------------------------------------------

def test_default_plugins_are_kube_135s_multipoint_list():
    assert [(p.name, p.weight) for p in c.default_plugins()] == [
        ("SchedulingGates", 0), ("PrioritySort", 0), ("NodeUnschedulable", 0), ("NodeName", 0),
        ("TaintToleration", 3), ("NodeAffinity", 2), ("NodePorts", 0), ("NodeResourcesFit", 1),
        ("VolumeRestrictions", 0), ("NodeVolumeLimits", 0), ("VolumeBinding", 0), ("VolumeZone", 0),
        ("PodTopologySpread", 2), ("InterPodAffinity", 2), ("DynamicResources", 0), ("DefaultPreemption", 0),
        ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1), ("DefaultBinder", 0)]


def test_default_configuration():
    cfg = c.default_configuration(registry_names=REGISTRY, not_implemented={})
    assert (cfg.parallelism, cfg.percentage_of_nodes_to_score) == (16, None)
    assert (cfg.pod_initial_backoff_seconds, cfg.pod_max_backoff_seconds) == (1, 10)
    assert (cfg.client_qps, cfg.client_burst) == (50.0, 100)
    le = cfg.leader_election
    assert le["leaderElect"] is True and le["resourceLock"] == "leases"
    assert (le["leaseDuration"], le["renewDeadline"], le["retryPeriod"]) == (15.0, 10.0, 2.0)
    assert (le["resourceName"], le["resourceNamespace"]) == ("koord-scheduler", "koordinator-system")
    [p] = cfg.profiles
    assert p.scheduler_name == "koord-scheduler" and p.index == 0 and cfg.profile("koord-scheduler") is p
    impl = c.known_implements
    assert names(p.plugins_at("queueSort", impl)) == ["PrioritySort"]
    # Reservation binds reserve pods (Skip for others) ahead of DefaultBinder, as Koordinator requires.
    assert names(p.plugins_at("bind", impl)) == ["Reservation", "DefaultBinder"]
    assert names(p.plugins_at("filter", impl)) == [
        "NodeUnschedulable", "NodeName", "TaintToleration", "NodeAffinity", "NodePorts", "NodeResourcesFit",
        "PodTopologySpread", "InterPodAffinity", "LoadAwareScheduling", "NodeNUMAResource", "DeviceShare",
        "Reservation"]
    assert [(r.name, r.weight) for r in p.plugins_at("score", impl)] == [
        ("TaintToleration", 3), ("NodeAffinity", 2), ("NodeResourcesFit", 1), ("PodTopologySpread", 2),
        ("InterPodAffinity", 2), ("NodeResourcesBalancedAllocation", 1), ("ImageLocality", 1),
        ("LoadAwareScheduling", 1), ("NodeNUMAResource", 1), ("DeviceShare", 1), ("Reservation", 5000),
        ("Coscheduling", 1)]
    assert names(p.plugins_at("reserve", impl)) == ["LoadAwareScheduling", "NodeNUMAResource", "DeviceShare",
                                                     "Reservation", "Coscheduling", "ElasticQuota"]
    assert names(p.plugins_at("preBind", impl)) == ["NodeNUMAResource", "DeviceShare", "Reservation", "Coscheduling",
                                                     "DefaultPreBind"]
    assert names(p.plugins_at("postFilter", impl)) == ["Reservation", "Coscheduling", "ElasticQuota",
                                                        "DefaultPreemption"]
    assert names(p.plugins_at("preFilter", impl))[-6:] == ["SchedulingHint", "Reservation", "NodeNUMAResource",
                                                            "DeviceShare", "Coscheduling", "ElasticQuota"]
    for point in ("preEnqueue", "permit", "postBind"):
        assert "Coscheduling" in names(p.plugins_at(point, impl)), point
    # Volume plugins this build lacks are left out of the defaults without an error.
    assert not {"VolumeBinding", "VolumeZone", "DynamicResources"} & set(p.all_plugin_names())
    # Args for every plugin with an args schema, though pluginConfig is empty.
    assert set(p.plugin_args) == {"NodeResourcesFit", "DefaultPreemption", "LoadAwareScheduling", "Coscheduling",
                                  "ElasticQuota", "NodeNUMAResource", "Reservation", "DeviceShare", "SchedulingHint"}
    assert p.plugin_args["DefaultPreemption"] == {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": 100}
    assert p.plugin_args["NodeResourcesFit"]["scoringStrategy"] == {
        "type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]}
    assert p.plugin_config_index == {}


def test_omitted_profiles_and_scheduler_name_default_to_koord_scheduler():
    cfg = parse(document())
    assert [p.scheduler_name for p in cfg.profiles] == ["koord-scheduler"]
    cfg = parse(document({"percentageOfNodesToScore": 30}, percentageOfNodesToScore=50, parallelism=4))
    assert cfg.profiles[0].scheduler_name == "koord-scheduler"
    assert (cfg.profiles[0].percentage_of_nodes_to_score, cfg.percentage_of_nodes_to_score) == (30, 50)
    assert cfg.parallelism == 4 and cfg.document["parallelism"] == 4


def test_default_prebind_is_appended_unless_disabled():
    impl = c.known_implements
    cfg = parse(document({"plugins": {"preBind": {"enabled": [{"name": "Reservation"}]}}}))
    assert names(cfg.profiles[0].plugins_at("preBind", impl)) == ["Reservation", "DefaultPreBind"]
    for disabled in ("*", "DefaultPreBind"):
        cfg = parse(document({"plugins": {"preBind": {"disabled": [{"name": disabled}]}}}))
        assert cfg.profiles[0].plugins_at("preBind", impl) == []
    # Listed already (as the shipped profile does): not twice.
    cfg = parse(document({"plugins": {"preBind": {"enabled": [{"name": "DefaultPreBind"}, {"name": "Reservation"}]}}}))
    assert names(cfg.profiles[0].points["preBind"]) == ["DefaultPreBind", "Reservation"]


# -- merging -------------------------------------------------------------------------------------------

DEFAULTS = [PluginRef("A"), PluginRef("B", 2), PluginRef("C", 1)]


def test_merge_disable_all_keeps_only_the_users_plugins():
    assert c.merge_plugin_set(DEFAULTS, [PluginRef("X"), PluginRef("B", 7)], {"*"}) == [
        PluginRef("X"), PluginRef("B", 7)]


def test_merge_disable_by_name_replace_in_place_and_append():
    merged = c.merge_plugin_set(DEFAULTS, [PluginRef("X", 4), PluginRef("C", 9)], {"A"})
    assert merged == [PluginRef("B", 2), PluginRef("C", 9), PluginRef("X", 4)]
    assert c.merge_plugin_set(DEFAULTS, [], set()) == DEFAULTS


def test_profile_merge_against_kube_defaults():
    cfg = parse(document({"plugins": {"multiPoint": {
        "enabled": [{"name": "NodeAffinity", "weight": 7}, {"name": "LoadAwareScheduling", "weight": 3}],
        "disabled": [{"name": "ImageLocality"}]}}}))
    p = cfg.profiles[0]
    mp = [(r.name, r.weight) for r in p.multi_point]
    assert mp.index(("NodeAffinity", 7)) == 5  # in NodeAffinity's default place
    assert mp[-1] == ("LoadAwareScheduling", 3) and "ImageLocality" not in names(p.multi_point)
    assert p.disabled["multiPoint"] == {"ImageLocality"}
    score = {r.name: r.weight for r in p.plugins_at("score", c.known_implements)}
    assert score["NodeAffinity"] == 7 and score["LoadAwareScheduling"] == 3 and "ImageLocality" not in score

    cfg = parse(document({"plugins": {"multiPoint": {"disabled": [{"name": "*"}]},
                                      "queueSort": {"enabled": [{"name": "PrioritySort"}]},
                                      "bind": {"enabled": [{"name": "DefaultBinder"}]}}}))
    assert cfg.profiles[0].multi_point == [] and cfg.profiles[0].all_plugin_names() == [
        "PrioritySort", "DefaultPreBind", "DefaultBinder"]


# -- multiPoint expansion ------------------------------------------------------------------------------

FAKE_POINTS = {"P": {"filter", "score"}, "Q": {"filter"}, "R": {"score"}, "S": {"filter", "score"}}


def fake_implements(plugin: str, point: str) -> bool:
    return point in FAKE_POINTS.get(plugin, set())


def profile(**points) -> c.Profile:
    p = c.Profile(multi_point=[PluginRef("P", 2), PluginRef("Q"), PluginRef("R"), PluginRef("S", 5)])
    for point, (enabled, disabled) in points.items():
        p.points[point] = enabled
        p.disabled[point] = disabled
    return p


def test_multipoint_expansion_order_and_implements():
    p = profile(filter=([PluginRef("X"), PluginRef("S"), PluginRef("Y")], set()))
    # Re-configured multiPoint plugins (S) first, then the other multiPoint ones that implement filter,
    # then the point's own others.
    assert names(p.plugins_at("filter", fake_implements)) == ["S", "P", "Q", "X", "Y"]
    assert names(p.plugins_at("permit", fake_implements)) == []


def test_multipoint_expansion_disabled_and_weights():
    p = profile(score=([PluginRef("S", 0), PluginRef("Z", 4)], {"P"}))
    assert [(r.name, r.weight) for r in p.plugins_at("score", fake_implements)] == [
        ("S", 1), ("R", 1), ("Z", 4)]  # the point's own (unset) weight wins over multiPoint's 5; 0 → 1
    p = profile(score=([PluginRef("Z")], {"*"}))
    assert [(r.name, r.weight) for r in p.plugins_at("score", fake_implements)] == [("Z", 1)]
    p = profile()
    assert [(r.name, r.weight) for r in p.plugins_at("score", fake_implements)] == [("P", 2), ("R", 1), ("S", 5)]
    # Weights mean nothing outside score: left as given.
    assert [(r.name, r.weight) for r in p.plugins_at("filter", fake_implements)] == [("P", 2), ("Q", 0), ("S", 5)]


# -- Koordinator's shipped configuration ---------------------------------------------------------------

def test_shipped_configuration_parses():
    cfg = parse(copy.deepcopy(SHIPPED), registry=ALL)
    [p] = cfg.profiles
    impl = c.known_implements
    assert p.scheduler_name == "koord-scheduler"
    assert names(p.plugins_at("queueSort", impl)) == ["PrioritySort"]
    assert names(p.plugins_at("bind", impl)) == ["Reservation", "DefaultBinder"]
    assert names(p.plugins_at("postFilter", impl)) == ["Reservation", "Coscheduling", "ElasticQuota",
                                                      "DefaultPreemption"]
    assert names(p.plugins_at("preBind", impl))[-1] == "DefaultPreBind"
    assert names(p.plugins_at("preBind", impl)).count("DefaultPreBind") == 1
    score = {r.name: r.weight for r in p.plugins_at("score", impl)}
    assert score["Reservation"] == 5000 and score["TaintToleration"] == 3 and score["LoadAwareScheduling"] == 1
    filters = names(p.plugins_at("filter", impl))
    assert filters.index("NodeResourcesFit") < filters.index("LoadAwareScheduling")
    assert p.plugin_config_index["LoadAwareScheduling"] == 1
    la = p.plugin_args["LoadAwareScheduling"]
    assert la["usageThresholds"] == {"cpu": 0, "memory": 0} and la["nodeMetricExpirationSeconds"] == 300
    assert "kind" not in la and "apiVersion" not in la
    assert p.plugin_args["Reservation"]["gcDurationSeconds"] == 86400
    assert cfg.leader_election["resourceName"] == "koord-scheduler"


def test_shipped_configuration_fails_without_its_plugins():
    errors = errors_of(copy.deepcopy(SHIPPED), registry=ALL - {"DeviceShare"},
                       not_implemented={"DeviceShare": "Device CRs are not served in this build"})
    assert 'profiles[0].plugins.filter.enabled[2].name: Unsupported value: "DeviceShare": ' \
           "Device CRs are not served in this build" in errors
    assert any(e.startswith("profiles[0].pluginConfig[6].name: Unsupported value: \"DeviceShare\"") for e in errors)


# -- errors --------------------------------------------------------------------------------------------

def test_duplicate_scheduler_name():
    assert errors_of(document({"schedulerName": "x"}, {"schedulerName": "x"})) == [
        'profiles[1].schedulerName: Duplicate value: "x"']


def test_queue_sort_must_be_the_same_for_all_profiles():
    def implements(plugin, point):
        return point == "queueSort" if plugin == "Coscheduling" else c.known_implements(plugin, point)
    other = {"schedulerName": "b", "plugins": {"queueSort": {"disabled": [{"name": "*"}],
                                                             "enabled": [{"name": "Coscheduling"}]}}}
    assert errors_of(document({"schedulerName": "a"}, other), implements=implements) == [
        'profiles[1].plugins.queueSort: Invalid value: ["Coscheduling"]: must be the same for all profiles']


def test_exactly_one_queue_sort_and_a_bind_plugin():
    errors = errors_of(document({"plugins": {"queueSort": {"disabled": [{"name": "*"}]},
                                             "bind": {"disabled": [{"name": "DefaultBinder"}]}}}))
    assert errors == [
        'profiles[0].plugins.queueSort: Invalid value: []: only one queue sort plugin required for profile '
        'with scheduler name "koord-scheduler", but got 0',
        'profiles[0].plugins.bind: Required value: at least one bind plugin is needed for profile with '
        'scheduler name "koord-scheduler"']

    def implements(plugin, point):
        return point == "queueSort" if plugin == "Coscheduling" else c.known_implements(plugin, point)
    errors = errors_of(document({"plugins": {"queueSort": {"enabled": [{"name": "Coscheduling"}]}}}),
                       implements=implements)
    assert errors == ['profiles[0].plugins.queueSort: Invalid value: ["PrioritySort", "Coscheduling"]: only one '
                      'queue sort plugin required for profile with scheduler name "koord-scheduler", but got 2']


def test_duplicate_plugin_config():
    errors = errors_of(document({"pluginConfig": [{"name": "LoadAwareScheduling", "args": {}},
                                                  {"name": "NodeResourcesFit"},
                                                  {"name": "LoadAwareScheduling"}]}))
    assert errors == ['profiles[0].pluginConfig[2]: Duplicate value: "LoadAwareScheduling"']


def test_duplicate_and_misplaced_enabled_plugins():
    errors = errors_of(document({"plugins": {
        "filter": {"enabled": [{"name": "LoadAwareScheduling"}, {"name": "LoadAwareScheduling"}]},
        "permit": {"enabled": [{"name": "LoadAwareScheduling"}]}}}))
    assert errors == [
        'profiles[0].plugins.filter.enabled[1].name: Duplicate value: "LoadAwareScheduling"',
        'profiles[0].plugins.permit.enabled[0].name: Invalid value: "LoadAwareScheduling": '
        'does not extend the permit extension point']


def test_args_kind_must_match_the_plugin():
    errors = errors_of(document({"pluginConfig": [{"name": "InterPodAffinity", "args": {"kind": "FooArgs"}}]}))
    assert errors == ['profiles[0].pluginConfig[0].args.kind: Invalid value: "FooArgs": must be "InterPodAffinityArgs"']
    # Plugins with an args schema: the schema's enum says it.
    errors = errors_of(document({"pluginConfig": [{"name": "LoadAwareScheduling",
                                                   "args": {"kind": "NodeResourcesFitArgs"}}]}))
    assert errors == ['profiles[0].pluginConfig[0].args.kind: Unsupported value: "NodeResourcesFitArgs": '
                      'supported values: "LoadAwareSchedulingArgs"']
    cfg = parse(document({"pluginConfig": [{"name": "InterPodAffinity",
                                            "args": {"kind": "InterPodAffinityArgs", "hardPodAffinityWeight": 3}}]}))
    assert cfg.profiles[0].plugin_args["InterPodAffinity"] == {"hardPodAffinityWeight": 3}


def test_not_implemented_plugins_are_errors_where_enabled():
    doc = document({"plugins": {"filter": {"enabled": [{"name": "LoadAwareScheduling"}, {"name": "NodeNUMAResource"},
                                                       {"name": "DeviceShare"}]},
                                "multiPoint": {"enabled": [{"name": "VolumeBinding"}]}},
                    "pluginConfig": [{"name": "ElasticQuota", "args": {}}]})
    errors = errors_of(doc, not_implemented={"DeviceShare": "no Device CRs", "ElasticQuota": "no quota tree"})
    assert errors == [
        'profiles[0].plugins.multiPoint.enabled[0].name: Unsupported value: "VolumeBinding": '
        "not implemented by this koord-scheduler",
        'profiles[0].plugins.filter.enabled[2].name: Unsupported value: "DeviceShare": no Device CRs',
        'profiles[0].pluginConfig[0].name: Unsupported value: "ElasticQuota": no quota tree']
    # Disabling a plugin this build lacks is fine.
    parse(document({"plugins": {"filter": {"disabled": [{"name": "VolumeZone"}]}}}))


def test_unknown_plugin_names_come_from_the_schema():
    errors = errors_of(document({"plugins": {"filter": {"enabled": [{"name": "LoadAware"}]}}}))
    assert errors == ['profiles[0].plugins.filter.enabled[0].name: Unsupported value: "LoadAware": not a '
                      "koord-scheduler plugin, did you mean 'LoadAwareScheduling'?"]


def test_bad_arg_value_names_the_args_field():
    errors = errors_of(document({"pluginConfig": [{"name": "LoadAwareScheduling",
                                                   "args": {"usageThresholds": {"cpu": 101}}}]}))
    assert len(errors) == 1 and errors[0].startswith(
        "profiles[0].pluginConfig[0].args.usageThresholds.cpu: Invalid value: 101")


def test_global_field_errors():
    assert errors_of(document(podInitialBackoffSeconds=5, podMaxBackoffSeconds=2)) == [
        "podMaxBackoffSeconds: Invalid value: 2: must be greater than or equal to PodInitialBackoffSeconds"]
    assert errors_of(document(leaderElection={"leaseDuration": "5s", "renewDeadline": "10s"})) == [
        'leaderElection.leaseDuration: Invalid value: "10s": LeaseDuration must be greater than RenewDeadline']
    assert errors_of(document(leaderElection={"retryPeriod": "0s"})) == [
        'leaderElection.retryPeriod: Invalid value: "0s": must be greater than zero']
    # Not electing: the election settings are not checked.
    cfg = parse(document(leaderElection={"leaderElect": False, "leaseDuration": "1s"}))
    assert cfg.leader_election["leaderElect"] is False and cfg.leader_election["leaseDuration"] == 1.0
    assert errors_of(document(parallelism=0))[0].startswith("parallelism: Invalid value: 0")
    assert errors_of({"kind": "KubeSchedulerConfiguration"}) == ["apiVersion: Required value"]


# -- plugin args ---------------------------------------------------------------------------------------

def la_args(args=None):
    configs = [] if args is None else [{"name": "LoadAwareScheduling", "args": args}]
    cfg = parse(document({"plugins": {"filter": {"enabled": [{"name": "LoadAwareScheduling"}]}},
                          "pluginConfig": configs}))
    return cfg.profiles[0].plugin_args["LoadAwareScheduling"]


def test_load_aware_args_defaults():
    args = la_args()
    assert args["usageThresholds"] == {"cpu": 65, "memory": 95}
    assert args["estimatedScalingFactors"] == {"cpu": 85, "memory": 70}
    assert args["resourceWeights"] == {"cpu": 1, "memory": 1}
    assert (args["filterExpiredNodeMetrics"], args["nodeMetricExpirationSeconds"]) == (True, 180)
    assert la_args({})["usageThresholds"] == {"cpu": 65, "memory": 95}
    # Koordinator's Go defaulting: an empty map takes the defaults, missing factor keys are filled.
    assert la_args({"usageThresholds": {}})["usageThresholds"] == {"cpu": 65, "memory": 95}
    assert la_args({"usageThresholds": {"cpu": 80}})["usageThresholds"] == {"cpu": 80}
    assert la_args({"estimatedScalingFactors": {"cpu": 50}})["estimatedScalingFactors"] == {"cpu": 50, "memory": 70}
    assert "resourceWeights" not in la_args({"dominantResourceWeight": 5})
    assert la_args({"resourceWeights": {"cpu": 3}})["resourceWeights"] == {"cpu": 3}


def test_args_error_paths():
    cfg = parse(document({"pluginConfig": [{"name": "NodeResourcesFit"}, {"name": "LoadAwareScheduling"}]},
                         {"schedulerName": "b"}))
    p = cfg.profiles[0]
    assert p.plugin_config_index == {"NodeResourcesFit": 0, "LoadAwareScheduling": 1}
    err = p.args_error("LoadAwareScheduling", ValueError("resourceWeights.cpu: must be in (0, 100]"))
    assert err.errors == ["profiles[0].pluginConfig[1].args.resourceWeights.cpu: must be in (0, 100]"]
    err = cfg.profiles[1].args_error("NodeResourcesFit", ValueError("x: bad"))
    assert err.errors == ["profiles[1].pluginConfig: NodeResourcesFit (default args): x: bad"]


# -- files ---------------------------------------------------------------------------------------------

def test_load_file(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(SHIPPED))
    cfg = c.load_file(path, registry_names=ALL, not_implemented={})
    assert cfg.profiles[0].scheduler_name == "koord-scheduler"
    path.write_text("profiles: [\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        c.load_file(path, registry_names=ALL, not_implemented={})
    with pytest.raises(ConfigError, match="cannot read"):
        c.load_file(tmp_path / "missing.yaml", registry_names=ALL, not_implemented={})


# -- reloading -----------------------------------------------------------------------------------------

def test_non_reloadable_changes():
    base = copy.deepcopy(SHIPPED)
    old = parse(base, registry=ALL)

    def changed(edit):
        doc = copy.deepcopy(base)
        edit(doc)
        return c.non_reloadable_changes(old, parse(doc, registry=ALL))

    assert changed(lambda d: None) == []
    prof = lambda d: d["profiles"][0]  # noqa: E731
    # Reloadable: weights, args, percentageOfNodesToScore, backoff.
    assert changed(lambda d: prof(d)["plugins"]["score"]["enabled"][3].update(weight=10)) == []
    assert changed(lambda d: prof(d)["pluginConfig"][1]["args"]["usageThresholds"].update(cpu=70)) == []
    assert changed(lambda d: d.update(percentageOfNodesToScore=40, podMaxBackoffSeconds=20)) == []
    assert changed(lambda d: prof(d).update(percentageOfNodesToScore=40)) == []
    # Needs a restart.
    assert changed(lambda d: d.update(parallelism=8)) == ["parallelism"]
    assert changed(lambda d: d["leaderElection"].update(resourceName="other")) == ["leaderElection"]
    assert changed(lambda d: d.update(clientConnection={"qps": 10})) == ["clientConnection"]
    assert changed(lambda d: prof(d).update(schedulerName="renamed")) == ["profiles[0].schedulerName"]
    assert changed(lambda d: d["profiles"].append({"schedulerName": "second"})) == ["profiles"]
    assert changed(lambda d: prof(d)["plugins"]["filter"]["enabled"].pop()) == ["profiles[0].plugins.filter"]
    assert changed(lambda d: prof(d)["plugins"].update(multiPoint={"disabled": [{"name": "ImageLocality"}]})) == [
        "profiles[0].plugins.multiPoint"]
    assert changed(lambda d: prof(d)["plugins"]["queueSort"].update(disabled=[])) == [
        "profiles[0].plugins.queueSort"]
