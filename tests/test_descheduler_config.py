"""koord-descheduler's configuration, framework construction, limiter, evictor proxy, loop and DefaultEvictor
(pure logic: no API server)."""

from __future__ import annotations

import pytest
import yaml

from koordinator import cli
from koordinator_roles.descheduler import config as cfg
from koordinator_roles.descheduler.descheduler import TOO_FEW_NODES, Descheduler, node_ready
from koordinator_roles.descheduler.framework.handle import PluginHandle
from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, EvictOptions, EvictPlugin, Status
from koordinator_roles.descheduler.framework.limiter import EvictionLimiter
from koordinator_roles.descheduler.framework.runtime import Framework
from koordinator_roles.descheduler.plugins import defaultevictor, in_tree_registry

API = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration"}
ONLY_DEFAULT_EVICTOR = {"evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
                        "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}}


def doc(**fields) -> dict:
    return {**API, **fields}


def errors_of(document: dict, **kwargs) -> list[str]:
    with pytest.raises(cfg.ConfigError) as info:
        cfg.parse(document, **kwargs)
    return info.value.errors


def framework_errors(profile: cfg.Profile, registry=None) -> list[str]:
    with pytest.raises(cfg.ConfigError) as info:
        Framework(profile, registry if registry is not None else in_tree_registry(), PluginHandle())
    return info.value.errors


# -- defaulting -----------------------------------------------------------------------------------

def test_defaults_are_koordinators():
    c = cfg.parse(None)
    (p,) = c.profiles
    assert p.name == "koord-descheduler"
    assert {point: p.names_at(point) for point in cfg.POINTS} == {
        "deschedule": [], "balance": [], "evict": ["MigrationController"], "filter": ["MigrationController"]}
    assert c.leader_election == {"leaderElect": True, "leaseDuration": 15.0, "renewDeadline": 10.0,
                                 "retryPeriod": 2.0, "resourceLock": "leases", "resourceName": "koord-descheduler",
                                 "resourceNamespace": "koordinator-system"}
    assert (c.client_qps, c.client_burst) == (50.0, 100)
    assert c.descheduling_interval == 0 and c.dry_run is False
    assert (c.max_pods_per_node, c.max_pods_per_namespace, c.max_pods_total) == (None, None, None)
    assert c.document["healthzBindAddress"] == c.document["metricsBindAddress"] == "0.0.0.0:10251"
    assert c.document["enableProfiling"] is True and c.document["enableContentionProfiling"] is True
    # Args of an enabled plugin are defaulted even without a pluginConfig entry.
    assert p.plugin_args["MigrationController"]["defaultJobMode"] == "ReservationFirst"


def test_a_single_unnamed_profile_is_koord_descheduler_but_two_need_names():
    assert cfg.parse(doc(profiles=[{"plugins": ONLY_DEFAULT_EVICTOR}])).profiles[0].name == "koord-descheduler"
    assert errors_of(doc(profiles=[{"name": "a"}, {}])) == ["profiles[1].name: Required value"]
    assert errors_of(doc(profiles=[{"name": "a"}, {"name": "a"}])) == ['profiles[1].name: Duplicate value: "a"']


def test_bind_addresses_are_completed_and_checked():
    c = cfg.parse(doc(healthzBindAddress="10.0.0.1", metricsBindAddress=":9000"))
    assert (c.document["healthzBindAddress"], c.document["metricsBindAddress"]) == ("10.0.0.1:10251", "0.0.0.0:9000")
    (error,) = errors_of(doc(metricsBindAddress="0.0.0.0:port"))
    assert error.startswith('metricsBindAddress: Invalid value: "0.0.0.0:port": ')


def test_the_files_bind_addresses_are_served_unless_the_flags_say_otherwise(tmp_path):
    import koordinator_roles.descheduler as role
    from koordinator.runtime.options import options_from_argv

    def options(*flags: str):
        opts = options_from_argv(cli.build_role_parser("descheduler", role), ["--role=descheduler", *flags],
                                 "descheduler", role_type=role.DeschedulerOptions)
        role.check_options(opts)
        return opts.health_addr, opts.metrics_addr

    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(doc(profiles=[{"plugins": ONLY_DEFAULT_EVICTOR}])))
    assert options("--config", str(plain)) == (":10251", ":10252")  # not set in the file: the role's defaults
    both = tmp_path / "both.yaml"
    both.write_text(yaml.safe_dump(doc(healthzBindAddress="127.0.0.1:18251", metricsBindAddress=":18252",
                                       profiles=[{"plugins": ONLY_DEFAULT_EVICTOR}])))
    assert options("--config", str(both)) == ("127.0.0.1:18251", "0.0.0.0:18252")
    assert options("--config", str(both), "--health-addr", ":9999") == (":9999", "0.0.0.0:18252")


def test_leader_election_and_interval():
    c = cfg.parse(doc(deschedulingInterval="1m30s", leaderElection={"leaseDuration": "20s"}))
    assert c.descheduling_interval == 90 and c.leader_election["leaseDuration"] == 20
    assert errors_of(doc(leaderElection={"leaseDuration": "5s"})) == [
        'leaderElection.leaseDuration: Invalid value: "10s": LeaseDuration must be greater than RenewDeadline']


# -- the merge ------------------------------------------------------------------------------------

def test_merge_plugin_set():
    ref = lambda n: cfg.PluginRef(n, f"user.{n}")  # noqa: E731
    defaults = [cfg.PluginRef("A", "d", True), cfg.PluginRef("B", "d", True)]
    assert [p.name for p in cfg.merge_plugin_set(defaults, [ref("C"), ref("A")], [])] == ["A", "B", "C"]
    # The user's entry replaces the default in place.
    assert cfg.merge_plugin_set(defaults, [ref("B")], [])[1].path == "user.B"
    assert [p.name for p in cfg.merge_plugin_set(defaults, [ref("C")], ["A"])] == ["B", "C"]
    assert [p.name for p in cfg.merge_plugin_set(defaults, [ref("C"), ref("C")], ["*"])] == ["C", "C"]


def test_profile_plugins_merge_with_the_default_set():
    (p,) = cfg.parse(doc(profiles=[{"name": "x", "plugins": {
        "evict": {"disabled": [{"name": "MigrationController"}], "enabled": [{"name": "DefaultEvictor"}]},
        "balance": {"enabled": [{"name": "LowNodeLoad"}]}}}])).profiles
    assert p.names_at("evict") == ["DefaultEvictor"] and p.names_at("filter") == ["MigrationController"]
    assert p.names_at("balance") == ["LowNodeLoad"]
    assert p.plugins["evict"][0].path == "profiles[0].plugins.evict.enabled[0].name"
    assert p.plugins["filter"][0].default


# -- plugin args -----------------------------------------------------------------------------------

def test_low_node_load_args_move_into_the_default_node_pool():
    (p,) = cfg.parse(doc(deschedulingInterval="10m", profiles=[{"name": "x", "pluginConfig": [{
        "name": "LowNodeLoad", "args": {"lowThresholds": {"cpu": 40}, "highThresholds": {"cpu": 70},
                                        "prodHighThresholds": {"cpu": 60}, "nodeSelector": {"matchLabels": {"a": "b"}},
                                        "nodePools": [{"name": "gpu", "highThresholds": {"cpu": 90}}]}}]}])).profiles
    args = p.plugin_args["LowNodeLoad"]
    assert "lowThresholds" not in args and "highThresholds" not in args and "nodeSelector" not in args
    assert args["prodHighThresholds"] == {"cpu": 60}  # copied, and kept at the top level too
    default_pool, gpu = args["nodePools"]
    assert default_pool["name"] == "__default_node_pool__"
    assert default_pool["lowThresholds"] == {"cpu": 40} and default_pool["highThresholds"] == {"cpu": 70}
    assert default_pool["prodHighThresholds"] == {"cpu": 60}
    assert default_pool["nodeSelector"] == {"matchLabels": {"a": "b"}}
    assert gpu == {"name": "gpu", "highThresholds": {"cpu": 90}}
    # The detector cache (default 5m) would expire between 10m rounds: raised to the interval.
    assert args["detectorCacheTimeout"] == "600s"
    (p,) = cfg.parse(doc(deschedulingInterval="10s", profiles=[{"name": "x", "pluginConfig": [
        {"name": "LowNodeLoad", "args": {}}]}])).profiles
    assert p.plugin_args["LowNodeLoad"]["detectorCacheTimeout"] == "5m"


def test_plugin_args_are_checked_against_their_schema():
    errors = errors_of(doc(profiles=[{"name": "x", "pluginConfig": [
        {"name": "MigrationController", "args": {"maxMigratingPerNode": "two"}}]}]))
    assert len(errors) == 1 and errors[0].startswith("profiles[0].pluginConfig[0].args.maxMigratingPerNode:")
    assert errors_of(doc(profiles=[{"name": "x", "pluginConfig": [
        {"name": "DefaultEvictor", "args": {"kind": "LowNodeLoadArgs"}}]}])) == [
        'profiles[0].pluginConfig[0].args.kind: Invalid value: "LowNodeLoadArgs": must be "DefaultEvictorArgs"']


# -- validation messages ---------------------------------------------------------------------------

def test_unknown_plugin_name_names_the_field():
    (error,) = errors_of(doc(profiles=[{"name": "x", "plugins": {"balance": {"enabled": [{"name": "LowNodLoad"}]}}}]))
    assert error.startswith('profiles[0].plugins.balance.enabled[0].name: Unsupported value: "LowNodLoad": '
                            "not a koord-descheduler plugin")
    assert "LowNodeLoad" in error  # the hint
    # A plugin registered beyond the schema's list (a test's, an out-of-tree one) is accepted.
    cfg.parse(doc(profiles=[{"name": "x", "plugins": {"balance": {"enabled": [{"name": "Mine"}]}}}]),
              registry_names={"Mine"})


def test_plugin_missing_from_the_registry_is_a_framework_error():
    (p,) = cfg.parse(doc(profiles=[{"name": "x", "plugins": {**ONLY_DEFAULT_EVICTOR,
                                                             "deschedule": {"enabled": [{"name": "PodLifeTime"}]}}}])).profiles
    assert framework_errors(p, {"DefaultEvictor": defaultevictor.new}) == [
        'profiles[0].plugins.deschedule.enabled[0].name: Unsupported value: "PodLifeTime": not implemented in this build']
    (p,) = cfg.parse(None).profiles
    assert framework_errors(p, {"DefaultEvictor": defaultevictor.new}) == [
        'profiles[0].plugins.evict: Unsupported value: "MigrationController" (a default plugin): not implemented in '
        "this build",
        'profiles[0].plugins.filter: Unsupported value: "MigrationController" (a default plugin): not implemented in '
        "this build"]


def test_exactly_one_evict_plugin():
    two = {"evict": {"enabled": [{"name": "DefaultEvictor"}]}, "filter": {"disabled": [{"name": "*"}]}}
    (p,) = cfg.parse(doc(profiles=[{"name": "x", "plugins": two}])).profiles
    # A stand-in evict plugin under MigrationController's name (it gets MigrationController's args).
    registry = {"DefaultEvictor": defaultevictor.new, "MigrationController": lambda args, h: defaultevictor.new({}, h)}
    assert framework_errors(p, registry) == [
        'profiles[0].plugins.evict: Invalid value: ["MigrationController", "DefaultEvictor"]: only one evict plugin '
        "can be enabled"]
    none = {"evict": {"disabled": [{"name": "*"}]}, "filter": {"disabled": [{"name": "*"}]}}
    (p,) = cfg.parse(doc(profiles=[{"name": "x", "plugins": none}])).profiles
    assert framework_errors(p) == ["profiles[0].plugins.evict: Required value: no evict plugin is enabled"]
    dup = {"evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}, {"name": "DefaultEvictor"}]},
           "filter": {"disabled": [{"name": "*"}]}}
    (p,) = cfg.parse(doc(profiles=[{"name": "x", "plugins": dup}])).profiles
    assert 'profiles[0].plugins.evict.enabled[1].name: Duplicate value: "DefaultEvictor"' in framework_errors(p)


def test_plugin_must_implement_its_extension_point_and_args_errors_name_the_field():
    (p,) = cfg.parse(doc(profiles=[{"name": "x", "plugins": {**ONLY_DEFAULT_EVICTOR, "balance": {
        "enabled": [{"name": "DefaultEvictor"}]}}}])).profiles
    assert framework_errors(p) == [
        'profiles[0].plugins.balance.enabled[0].name: Invalid value: "DefaultEvictor": does not extend the balance '
        "extension point"]
    (p,) = cfg.parse(doc(profiles=[{"name": "x", "plugins": ONLY_DEFAULT_EVICTOR, "pluginConfig": [
        {"name": "DefaultEvictor", "args": {"evictLocalStoragePods": "yes"}}]}])).profiles
    assert framework_errors(p) == [
        "profiles[0].pluginConfig[0].args.evictLocalStoragePods: Invalid value: 'yes': must be true or false"]


def test_bad_selectors_name_the_field():
    bad = {"matchLabels": {"bad key!": "x"}}
    (error,) = errors_of(doc(nodeSelector=bad))
    assert error.startswith('nodeSelector: Invalid value: {"matchLabels": {"bad key!": "x"}}: ') and "bad key!" in error
    (error,) = errors_of(doc(profiles=[{"name": "x", "nodeSelector": bad}]))
    assert error.startswith("profiles[0].nodeSelector: Invalid value: ")


def test_non_reloadable_changes():
    base = doc(profiles=[{"name": "x", "plugins": ONLY_DEFAULT_EVICTOR}])
    old = cfg.parse(base)
    assert cfg.non_reloadable_changes(old, cfg.parse({**base, "dryRun": True, "maxNoOfPodsToEvictTotal": 3,
                                                      "nodeSelector": {"matchLabels": {"a": "b"}}})) == []
    # Interval 0: that loop ran its one round and ended.
    assert cfg.non_reloadable_changes(old, cfg.parse({**base, "deschedulingInterval": "5s"})) == [
        "deschedulingInterval"]
    assert cfg.non_reloadable_changes(old, cfg.parse({**base, "leaderElection": {"leaderElect": False}})) == [
        "leaderElection"]
    looping = cfg.parse({**base, "deschedulingInterval": "10s"})
    assert cfg.non_reloadable_changes(looping, cfg.parse({**base, "deschedulingInterval": "1m"})) == []
    more = {**base, "profiles": [*base["profiles"], {"name": "y", "plugins": ONLY_DEFAULT_EVICTOR}]}
    assert cfg.non_reloadable_changes(old, cfg.parse(more)) == ["profiles"]
    args = {**base, "profiles": [{**base["profiles"][0], "pluginConfig": [
        {"name": "DefaultEvictor", "args": {"evictDaemonSetPods": True}}]}]}
    assert cfg.non_reloadable_changes(old, cfg.parse(args)) == ["profiles[0].pluginConfig"]


# -- the command line -------------------------------------------------------------------------------

def test_bad_config_is_a_usage_error_naming_the_field(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc(profiles=[{"name": "x", "plugins": {"balance": {"enabled": [{"name": "Nope"}]}}}])))
    with pytest.raises(SystemExit) as info:
        cli.main(["--role=descheduler", "--config", str(path)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert f"--config {path}: profiles[0].plugins.balance.enabled[0].name: Unsupported value: \"Nope\"" in err


def test_write_config_to_writes_the_effective_configuration_and_exits_0(tmp_path):
    path, out = tmp_path / "dir" / "key", tmp_path / "effective.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(doc(deschedulingInterval="10s", profiles=[{"plugins": ONLY_DEFAULT_EVICTOR}])))
    with pytest.raises(SystemExit) as info:  # a mounted ConfigMap directory holding one key
        cli.main(["--role=descheduler", "--config", str(path.parent), "--write-config-to", str(out)])
    assert info.value.code == 0
    written = yaml.safe_load(out.read_text())
    (profile,) = written["profiles"]
    assert profile["name"] == "koord-descheduler"
    assert profile["plugins"]["evict"] == {"enabled": [{"name": "DefaultEvictor"}]}
    assert written["deschedulingInterval"] == "10s" and written["leaderElection"]["resourceName"] == "koord-descheduler"


# -- limiter and evictor proxy ----------------------------------------------------------------------

def pod(name: str, node: str = "n1", namespace: str = "ns", **meta) -> dict:
    return {"metadata": {"name": name, "namespace": namespace,
                         "ownerReferences": [{"kind": "ReplicaSet", "name": "rs", "uid": "u"}], **meta},
            "spec": {"nodeName": node}, "status": {"phase": "Running"}}


def test_limiter_counts_per_round():
    lim = EvictionLimiter(max_per_node=2, max_per_namespace=3, max_total=4)
    for p in (pod("a"), pod("b")):
        assert lim.allow_evict(p)
        lim.done(p)
    assert not lim.allow_evict(pod("c")) and lim.node_limit_exceeded("n1")
    assert lim.allow_evict(pod("c", node="n2"))
    lim.done(pod("c", node="n2"))
    assert not lim.allow_evict(pod("d", node="n3")) and lim.namespace_limit_exceeded("ns")
    assert lim.allow_evict(pod("d", node="n3", namespace="other"))
    lim.done(pod("d", node="n3", namespace="other"))
    assert lim.total_evicted() == 4 and not lim.allow_evict(pod("e", node="n4", namespace="x"))
    lim.reset()
    assert lim.total_evicted() == 0 and lim.allow_evict(pod("a"))
    assert EvictionLimiter().allow_evict(pod("a"))


class Recorder(EvictPlugin):
    """An evict plugin of the test's own: remembers what it was asked to evict."""

    name = "Recorder"

    def __init__(self, fail: Exception | bool | None = None) -> None:
        self.evicted: list[tuple[str, EvictOptions]] = []
        self.fail = fail

    def evict(self, pod, options):
        if isinstance(self.fail, Exception):
            raise self.fail
        self.evicted.append((pod["metadata"]["name"], options))
        return self.fail is None


class EvictEverything(BalancePlugin):
    name = "EvictEverything"

    def __init__(self, handle) -> None:
        self.handle = handle
        self.seen: list[list[str]] = []

    def balance(self, nodes):
        self.seen.append([n["metadata"]["name"] for n in nodes])
        for node in nodes:
            for p in self.handle.pods_on_node(node["metadata"]["name"]):
                if self.handle.evictor.filter(p) and self.handle.evictor.pre_eviction_filter(p):
                    self.handle.evictor.evict(p, EvictOptions())
        return None


def build(pods: list[dict], *, dry_run: bool = False, limiter=None, fail=None, **fields):
    recorder = Recorder(fail)
    plugins: dict = {}
    registry = {"Recorder": lambda args, h: recorder, "DefaultEvictor": defaultevictor.new,
                "EvictEverything": lambda args, h: plugins.setdefault("balance", EvictEverything(h))}
    document = doc(dryRun=dry_run, profiles=[{"name": "p", "plugins": {
        "evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "Recorder"}]},
        "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
        "balance": {"enabled": [{"name": "EvictEverything"}]}}}], **fields)
    c = cfg.parse(document, registry_names=set(registry))
    by_node = lambda name: [p for p in pods if p["spec"]["nodeName"] == name]  # noqa: E731
    limiter = limiter or EvictionLimiter(c.max_pods_per_node, c.max_pods_per_namespace, c.max_pods_total)
    fwk = Framework(c.profiles[0], registry, PluginHandle(dry_run=c.dry_run, pod_index=by_node), limiter=limiter)
    return fwk, recorder, plugins, limiter


def test_evictor_proxy_filters_limits_and_fills_options():
    pods = [pod("a"), pod("b"), pod("bare", ownerReferences=[]), pod("c", node="n2")]
    fwk, recorder, _, limiter = build(pods, maxNoOfPodsToEvictPerNode=1)
    assert fwk.run_balance_plugins([{"metadata": {"name": "n1"}}, {"metadata": {"name": "n2"}}]) == []
    assert [name for name, _ in recorder.evicted] == ["a", "c"]  # bare: filtered; b: the node's limit
    options = recorder.evicted[0][1]
    assert (options.plugin_name, options.reason) == ("EvictEverything", "EvictEverything")
    assert limiter.total_evicted() == 2


def test_dry_run_counts_but_evicts_nothing(caplog):
    caplog.set_level("INFO", logger="koordinator.descheduler")
    fwk, recorder, _, limiter = build([pod("a")], dry_run=True)
    fwk.run_balance_plugins([{"metadata": {"name": "n1"}}])
    assert recorder.evicted == [] and limiter.total_evicted() == 1
    assert any("dry run: would evict pod=ns/a node=n1 plugin=EvictEverything" in r.getMessage() for r in caplog.records)


def test_a_failing_evict_plugin_is_one_pods_failure():
    fwk, _, _, limiter = build([pod("a"), pod("b")], fail=RuntimeError("nope"))
    assert fwk.run_balance_plugins([{"metadata": {"name": "n1"}}]) == []
    assert limiter.total_evicted() == 0
    fwk, recorder, _, limiter = build([pod("a")], fail=False)
    fwk.run_balance_plugins([{"metadata": {"name": "n1"}}])
    assert [n for n, _ in recorder.evicted] == ["a"] and limiter.total_evicted() == 0


# -- the loop ---------------------------------------------------------------------------------------

def node(name: str, ready: str | None = "True", **labels) -> dict:
    conditions = [{"type": "Ready", "status": ready}] if ready else []
    return {"metadata": {"name": name, "labels": labels}, "status": {"conditions": conditions}}


def test_node_readiness():
    assert node_ready(node("a")) and node_ready(node("b", ready=None))
    assert not node_ready(node("c", ready="False")) and not node_ready(node("d", ready="Unknown"))


def test_a_round_uses_ready_nodes_of_the_selectors_and_resets_the_limiter():
    fwk, recorder, plugins, limiter = build([pod("a", node="n1"), pod("b", node="n2")], maxNoOfPodsToEvictTotal=1)
    nodes = [node("n1", zone="z1"), node("n2", zone="z1"), node("n3", zone="z2"), node("n4", "False", zone="z1")]
    d = Descheduler({"p": fwk}, limiter, list_cached_nodes=lambda: nodes,
                    node_selector={"matchLabels": {"zone": "z1"}})
    assert d.run_once() == []
    assert plugins["balance"].seen == [["n1", "n2"]]
    assert [n for n, _ in recorder.evicted] == ["a"]  # the total limit: one per round
    assert d.run_once() == [] and [n for n, _ in recorder.evicted] == ["a", "a"]  # the limiter was reset
    d.update(interval=0, node_selector={"matchLabels": {"zone": "z2"}}, dry_run=False)
    assert d.run_once() == [TOO_FEW_NODES] and d.rounds == 3


def test_an_empty_cache_falls_back_to_the_api_and_one_round_with_interval_0():
    import threading

    fwk, _, plugins, limiter = build([])
    asked: list[str] = []

    def list_nodes(selector: str):
        asked.append(selector)
        return [node("n1", zone="a"), node("n2", zone="a")]

    d = Descheduler({"p": fwk}, limiter, list_cached_nodes=list, list_nodes=list_nodes,
                    node_selector={"matchLabels": {"zone": "a"}})
    d.run(threading.Event())  # interval 0: returns after one round
    assert d.rounds == 1 and asked == ["zone=a"] and plugins["balance"].seen == [["n1", "n2"]]


def test_plugin_errors_are_aggregated_and_end_the_round():
    class Broken(BalancePlugin):
        name = "Broken"

        def balance(self, nodes):
            return Status("no metrics")

    registry = {"DefaultEvictor": defaultevictor.new, "Broken": lambda a, h: Broken()}
    (p,) = cfg.parse(doc(profiles=[{"name": "p", "plugins": {**ONLY_DEFAULT_EVICTOR, "balance": {
        "enabled": [{"name": "Broken"}]}}}]), registry_names={"Broken"}).profiles
    fwk = Framework(p, registry, PluginHandle())
    d = Descheduler({"p": fwk}, EvictionLimiter(), list_cached_nodes=lambda: [node("a"), node("b")])
    assert d.run_once() == ["profile p: balance: Broken: no metrics"]


# -- DefaultEvictor ---------------------------------------------------------------------------------

def evictor(**args):
    return defaultevictor.new(args, PluginHandle())


def test_default_evictor_filters():
    e = evictor()
    assert e.why_not(pod("ok")) is None
    assert e.why_not(pod("bare", ownerReferences=[])) == "pod does not have any ownerRefs"
    failed = {**pod("bare", ownerReferences=[]), "status": {"phase": "Failed"}}
    assert e.why_not(failed) and evictor(evictFailedBarePods=True).why_not(failed) is None
    assert e.why_not(pod("m", annotations={"kubernetes.io/config.mirror": "x"})) == "pod is a mirror pod"
    assert e.why_not(pod("s", annotations={"kubernetes.io/config.source": "file"})) == "pod is a static pod"
    assert e.why_not(pod("t", deletionTimestamp="2026-01-01T00:00:00Z")) == "pod is terminating"
    ds = pod("ds", ownerReferences=[{"kind": "DaemonSet", "name": "d", "uid": "u"}])
    assert "daemonset" in e.why_not(ds) and evictor(evictDaemonSetPods=True).why_not(ds) is None
    critical = {**pod("c"), "spec": {"nodeName": "n1", "priority": 2000001000}}
    assert e.why_not(critical) == "pod has system critical priority"
    assert evictor(evictSystemCriticalPods=True).why_not(critical) is None
    high = {**pod("h"), "spec": {"nodeName": "n1", "priority": 9000}}
    assert evictor(priorityThreshold={"value": 9000}).why_not(high) == \
        "pod has higher priority than specified priority class threshold"
    assert evictor(priorityThreshold={"value": 9001}).why_not(high) is None
    local = {**pod("l"), "spec": {"nodeName": "n1", "volumes": [{"name": "v", "emptyDir": {}}]}}
    assert "local storage" in e.why_not(local) and evictor(evictLocalStoragePods=True).why_not(local) is None
    pvc = {**pod("p"), "spec": {"nodeName": "n1", "volumes": [{"name": "v", "persistentVolumeClaim": {"claimName": "c"}}]}}
    assert e.why_not(pvc) is None and "PVC" in evictor(ignorePvcPods=True).why_not(pvc)
    labelled = evictor(labelSelector={"matchLabels": {"app": "web"}})
    assert labelled.why_not(pod("x", labels={"app": "web"})) is None and labelled.why_not(pod("y"))
    # The evict annotation overrides every check.
    assert e.why_not({**critical, "metadata": {"name": "c", "annotations": {
        "descheduler.alpha.kubernetes.io/evict": "true"}}}) is None
    assert e.filter(pod("ok")) and not e.filter(ds) and e.pre_eviction_filter(ds)


@pytest.mark.parametrize("args, message", [
    ({"evictDaemonSetPods": 1}, "evictDaemonSetPods: Invalid value: 1: must be true or false"),
    ({"priorityThreshold": {"name": "a", "value": 1}}, "priorityThreshold: Invalid value: only one of"),
    ({"priorityThreshold": {"value": "high"}}, "priorityThreshold.value: Invalid value: 'high': must be an integer"),
    ({"labelSelector": {"matchLabels": {"bad key!": "x"}}}, "labelSelector: Invalid value: "),
    ({"nodeFit": "yes"}, "nodeFit: Invalid value: 'yes': must be true or false"),
    ({"evictPods": True}, "evictPods: unknown field of DefaultEvictorArgs"),
])
def test_default_evictor_args_errors_name_the_field(args, message):
    with pytest.raises(ValueError) as info:
        evictor(**args)
    assert str(info.value).startswith(message), str(info.value)


def test_schema_errors_name_the_field():
    assert errors_of(doc(profiles=[{"name": "x", "pluginConfig": [{"name": "DefaultEvictor"}, {"name": "DefaultEvictor"}]}])) \
        == ['profiles[0].pluginConfig[1]: Duplicate value: "DefaultEvictor"']
    assert errors_of({**API, "apiVersion": "descheduler/v1alpha3"}) == [
        'apiVersion: Unsupported value: "descheduler/v1alpha3": supported values: "descheduler/v1alpha2"']
    (error,) = errors_of(doc(maxNoOfPodsToEvictTotal=-1))
    assert error.startswith("maxNoOfPodsToEvictTotal: Invalid value: -1")
    assert errors_of(["not", "a", "document"]) == ["must be a DeschedulerConfiguration object, not list"]


def test_a_failing_node_list_fails_the_round_not_the_loop():
    fwk, _, _, limiter = build([])

    def unreachable(selector: str):
        raise ConnectionError("connection refused")

    d = Descheduler({"p": fwk}, limiter, list_cached_nodes=list, list_nodes=unreachable)
    assert d.run_once() == ["ConnectionError: connection refused"]
    assert d.run_once() == ["ConnectionError: connection refused"] and d.rounds == 2


def test_framework_errors_are_usage_errors_too(tmp_path, capsys):
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(doc(profiles=[{"name": "x", "plugins": {
        "evict": {"disabled": [{"name": "*"}]}, "filter": {"disabled": [{"name": "*"}]}}}])))
    with pytest.raises(SystemExit) as info:
        cli.main(["--role=descheduler", "--config", str(path)])
    assert info.value.code == 2
    assert capsys.readouterr().err == (f"koordinator: error: --config {path}: profiles[0].plugins.evict: Required value: "
                                       "no evict plugin is enabled\n")


def test_limiter_names_the_limit_it_enforces():
    lim = EvictionLimiter(max_per_namespace=1, max_total=5)
    lim.done(pod("a"))
    assert lim.refusal(pod("b", node="n2")) == "maxNoOfPodsToEvictPerNamespace (1)"
    lim.set_limits(None, None, 1)
    assert lim.refusal(pod("b", namespace="x")) == "maxNoOfPodsToEvictTotal (1)"
    lim.set_limits(1, None, None)
    assert lim.refusal(pod("b")) == "maxNoOfPodsToEvictPerNode (1)" and lim.refusal(pod("b", node="n2")) is None
