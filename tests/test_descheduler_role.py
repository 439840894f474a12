"""koord-descheduler as a role against the embedded API server: rounds, evictions, dry run, leader election,
hot reload."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

import koordinator_roles.descheduler as descheduler_role
from koordinator.runtime.client import Client
from koordinator.runtime.errors import AlreadyExists, NotFound
from koordinator_roles.descheduler.framework.interfaces import BalancePlugin, EvictOptions
from koordinator_roles.descheduler.plugins import in_tree_registry
from koordinator_roles.descheduler.wiring import build
from tests.role_harness import InProcessRole
from tests.waiting import wait_until

NS = "work"
API = {"apiVersion": "descheduler/v1alpha2", "kind": "DeschedulerConfiguration"}
DEFAULT_EVICTOR = {"evict": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]},
                   "filter": {"disabled": [{"name": "*"}], "enabled": [{"name": "DefaultEvictor"}]}}


class EvictAll(BalancePlugin):
    """A test balance plugin: asks to evict every pod the filters let through, node by node."""

    name = "EvictAll"

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        handle.informers.informer("Pod")

    def balance(self, nodes):
        for node in nodes:
            for pod in self.handle.pods_on_node(node["metadata"]["name"]):
                if self.handle.evictor.filter(pod) and self.handle.evictor.pre_eviction_filter(pod):
                    self.handle.evictor.evict(pod, EvictOptions(reason="test: evict all"))
        return None


class InProcessDescheduler(InProcessRole):
    """The descheduler role on a Runtime in this process, as ``koordinator --role=descheduler`` runs it;
    with ``test_plugins`` the registry has :class:`EvictAll` too (and the config file is not watched: the
    watcher knows only koord-descheduler's own plugin names)."""

    def __init__(self, kubeconfig: Path, *flags: str, test_plugins: bool = False) -> None:
        super().__init__(descheduler_role, "descheduler", kubeconfig, *flags)
        if test_plugins:
            registry = {**in_tree_registry(), "EvictAll": lambda args, handle: EvictAll(handle)}
            config = descheduler_role.load_configuration(self.options.config, registry)
            self.parts = build(self.runtime, config, registry=registry)
        else:
            descheduler_role.check_options(self.options)
            self.parts = descheduler_role.register(self.runtime, self.options)

    @property
    def rounds(self) -> int:
        return self.parts.descheduler.rounds


def write_config(path: Path, **fields: Any) -> Path:
    path.write_text(yaml.safe_dump({**API, **fields}))
    return path


def node(name: str) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}}}


def pod(name: str, node_name: str, owner: str | None = "ReplicaSet") -> dict:
    owners = [{"apiVersion": "apps/v1", "kind": owner, "name": "owner", "uid": "00000000-0000-0000-0000-000000000001",
               "controller": True}] if owner else []
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NS, "ownerReferences": owners},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "image": "busybox"}]}}


@pytest.fixture
def api(fresh_apiserver):
    fresh_apiserver.start()
    c = Client.from_kubeconfig(str(fresh_apiserver.kubeconfig), qps=0)
    for ns in (NS, "koordinator-system"):
        c.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    for name in ("node-a", "node-b"):
        c.create(node(name))
    try:
        yield c
    finally:
        c.close()


def exists(api: Client, name: str) -> bool:
    try:
        return not api.get("Pod", name, NS)["metadata"].get("deletionTimestamp")
    except NotFound:
        return False


def events(api: Client, reason: str) -> list[dict]:
    return [e for e in api.list("Event", NS)["items"] if e.get("reason") == reason]


def test_a_round_evicts_through_default_evictor_within_the_limits(fresh_apiserver, api, tmp_path):
    for name in ("web-1", "web-2", "web-3"):
        api.create(pod(name, "node-a"))
    api.create(pod("agent", "node-a", owner="DaemonSet"))
    api.create(pod("bare", "node-a", owner=None))
    config = write_config(tmp_path / "config.yaml", maxNoOfPodsToEvictPerNode=2, leaderElection={"leaderElect": False},
                          profiles=[{"name": "p", "plugins": {**DEFAULT_EVICTOR,
                                                              "balance": {"enabled": [{"name": "EvictAll"}]}}}])
    with InProcessDescheduler(fresh_apiserver.kubeconfig, "--config", str(config), test_plugins=True) as d:
        wait_until(lambda: d.rounds == 1, message="the one round (deschedulingInterval 0)")
        assert d.parts.descheduler.last_errors == []
        left = [n for n in ("web-1", "web-2", "web-3") if exists(api, n)]
        assert len(left) == 1, left  # maxNoOfPodsToEvictPerNode: 2 per round
        assert exists(api, "agent") and exists(api, "bare")  # DefaultEvictor's filters
        descheduled = wait_until(lambda: len(events(api, "Descheduled")) == 2 and events(api, "Descheduled"))
        assert {e["message"] for e in descheduled} == {
            'Pod evicted from node "node-a" by the reason "test: evict all"'}
        (refused,) = wait_until(lambda: events(api, "EvictionRefused"))
        assert refused["involvedObject"]["name"] == left[0]
        assert "maxNoOfPodsToEvictPerNode (2)" in refused["message"]
        assert d.runtime.metrics.registry.get_sample_value("descheduler_pods_evicted_total", {
            "result": "success", "strategy": "EvictAll", "namespace": NS, "node": "node-a"}) == 2


def test_dry_run_evicts_nothing_and_logs_what_it_would_do(fresh_apiserver, api, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="koordinator.descheduler")
    api.create(pod("web-1", "node-b"))
    config = write_config(tmp_path / "config.yaml", dryRun=True, leaderElection={"leaderElect": False},
                          profiles=[{"name": "p", "plugins": {**DEFAULT_EVICTOR,
                                                              "balance": {"enabled": [{"name": "EvictAll"}]}}}])
    with InProcessDescheduler(fresh_apiserver.kubeconfig, "--config", str(config), test_plugins=True) as d:
        wait_until(lambda: d.rounds == 1)
        assert exists(api, "web-1")
        assert any(f"dry run: would evict pod={NS}/web-1 node=node-b plugin=EvictAll" in r.getMessage()
                   for r in caplog.records)
        assert events(api, "Descheduled") == []


def test_only_the_leader_deschedules(fresh_apiserver, api, tmp_path):
    config = write_config(tmp_path / "config.yaml", deschedulingInterval="1h",
                          profiles=[{"name": "p", "plugins": DEFAULT_EVICTOR}])
    flags = ("--config", str(config), "--leader-elect-lease-duration=3s", "--leader-elect-renew-deadline=2s",
             "--leader-elect-retry-period=0.2s")
    first = InProcessDescheduler(fresh_apiserver.kubeconfig, *flags).start()
    second = None
    try:
        assert first.options.leader_elect and first.options.leader_elect_name == "koord-descheduler"
        wait_until(lambda: first.runtime.is_leader() and first.rounds == 1, message="the first instance leads")
        second = InProcessDescheduler(fresh_apiserver.kubeconfig, *flags).start()
        lease = api.get("Lease", "koord-descheduler", "koordinator-system")
        assert lease["spec"]["holderIdentity"] == first.options.leader_elect_identity
        assert not second.runtime.is_leader() and second.rounds == 0
        first.stop()  # releases the Lease
        wait_until(lambda: second.runtime.is_leader() and second.rounds == 1, message="the second takes over")
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_config_changes_are_hot_reloaded_or_wait_for_a_restart(fresh_apiserver, api, tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="koordinator.descheduler")
    directory = tmp_path / "config"
    directory.mkdir()
    profiles = [{"name": "p", "plugins": DEFAULT_EVICTOR}]
    config = write_config(directory / "koord-descheduler-config", deschedulingInterval="1h", dryRun=True,
                          leaderElection={"leaderElect": False}, profiles=profiles)
    with InProcessDescheduler(fresh_apiserver.kubeconfig, "--config", str(directory)) as d:
        wait_until(lambda: d.rounds == 1)
        write_config(config, deschedulingInterval="30m", dryRun=False, maxNoOfPodsToEvictTotal=3,
                     leaderElection={"leaderElect": False}, profiles=profiles)
        wait_until(lambda: d.parts.config.dry_run is False, message="the reload")
        assert d.parts.descheduler.interval == 1800 and d.parts.limiter.max_total == 3
        assert all(not f.evictor.dry_run for f in d.parts.frameworks.values())
        write_config(config, deschedulingInterval="30m", leaderElection={"leaderElect": False},
                     profiles=[*profiles, {"name": "q", "plugins": DEFAULT_EVICTOR}])
        wait_until(lambda: any("need a restart" in r.getMessage() and "fields=profiles" in r.getMessage()
                               for r in caplog.records), message="the refusal")
        assert list(d.parts.frameworks) == ["p"] and d.parts.config.descheduling_interval == 1800


def test_local_setup_runs_the_clusters_configuration_with_short_rounds(tmp_path, client):
    """``koordinator local`` runs the cluster's koord-descheduler-config (the shipped one until a user edits
    it: local never overwrites it), with short rounds and no leader election."""
    from koordinator_roles import LocalContext
    from koordinator_roles.descheduler import config as cfg
    from koordinator_roles.descheduler.local import CONFIGMAP, descheduler_config, local_setup

    document = descheduler_config()
    parsed = cfg.parse(document, registry_names=set(in_tree_registry()))
    assert parsed.descheduling_interval == 5 and parsed.leader_election["leaderElect"] is False
    assert parsed.profiles[0].names_at("evict") == ["MigrationController"]  # the shipped configuration's
    context = LocalContext(client=client, kubeconfig=tmp_path / "kubeconfig", data_dir=tmp_path,
                           namespace="koordinator-system", nodes=(), roles=("descheduler",), free_port=lambda: 0)
    try:
        client.delete("ConfigMap", CONFIGMAP, "koordinator-system")
    except NotFound:
        pass
    setup = local_setup(context)          # no ConfigMap: the shipped document
    assert setup.not_run == "" and setup.flags == ["--config", str(tmp_path / "descheduler-config.yaml")]
    assert yaml.safe_load((tmp_path / "descheduler-config.yaml").read_text()) == document

    # A user's edit of the ConfigMap (LowNodeLoad on) is what the next start runs.
    edited = {**document, "profiles": [{**document["profiles"][0],
                                        "plugins": {**document["profiles"][0]["plugins"],
                                                    "balance": {"enabled": [{"name": "LowNodeLoad"}]}}}]}
    try:
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "koordinator-system"}})
    except AlreadyExists:  # another test on this server made it
        pass
    client.create({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": CONFIGMAP, "namespace": "koordinator-system"},
                   "data": {CONFIGMAP: yaml.safe_dump(edited)}})
    try:
        local_setup(context)
        written = yaml.safe_load((tmp_path / "descheduler-config.yaml").read_text())
        assert written["profiles"][0]["plugins"]["balance"] == {"enabled": [{"name": "LowNodeLoad"}]}
    finally:
        client.delete("ConfigMap", CONFIGMAP, "koordinator-system")
