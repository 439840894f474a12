"""koordlet --config: a koordlet-config document (file or mounted ConfigMap directory) sets the koordlet's flags."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
from pathlib import Path

import pytest
import yaml

import koordinator_roles.koordlet as koordlet
from koordinator import cli
from koordinator.apis import schemas
from koordinator.runtime.options import add_shared_flags
from koordinator_roles.koordlet import config
from koordinator_roles.koordlet.metriccache import kinds
from tests.koordlet_harness import InProcessKoordlet, Simulator
from tests.test_koordlet_role import run_main
from tests.waiting import wait_until

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20


def options_for(*flags: str):
    """The options ``koordinator --role=koordlet --node-name=n1 FLAGS`` parses to (before check_options)."""
    argv = ["--role=koordlet", "--node-name=n1", *flags]
    return cli.parse_role_options("koordlet", argv, koordlet)


def host_tree(root: Path) -> dict[str, Path]:
    paths = {name: root / name for name in ("proc", "sys", "cgroup")}
    for path in paths.values():
        path.mkdir(parents=True, exist_ok=True)
    return paths


def write_config(path: Path, document: dict | str) -> Path:
    """Written whole at once (a watcher never sees it half written)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(document if isinstance(document, str) else yaml.safe_dump(document))
    os.replace(tmp, path)
    return path


# -- applying -------------------------------------------------------------------------------------

def test_a_file_sets_the_flags_it_has_keys_for(tmp_path):
    tree = host_tree(tmp_path / "host")
    path = write_config(tmp_path / "koordlet.yaml", {
        "procRootDir": str(tree["proc"]), "sysRootDir": str(tree["sys"]), "cgroupRootDir": str(tree["cgroup"]),
        "tsdbPath": str(tmp_path / "metrics"), "tsdbMaxBytes": "50Mi", "tsdbRetentionDuration": "1h30m",
        "kubeletSyncInterval": "5s", "collectResUsedInterval": "500ms", "enableNodeMetricReport": False,
        "predictionSafetyMarginPercent": 20, "predictionModelCheckpointMaxPerStep": 3,
        "addr": ":19316", "kubeApiQps": 7.5, "kubeApiBurst": 9})
    options = options_for(f"--config={path}")
    koordlet.check_options(options)
    own = options.role_options
    assert (own.proc_root, own.sys_root, own.cgroup_root) == (
        str(tree["proc"]), str(tree["sys"]), str(tree["cgroup"]))
    assert own.run_dir == str(tmp_path / "metrics")
    assert own.tsdb_max_bytes == 50 * MiB and own.tsdb_retention_duration == 5400.0
    assert own.kubelet_sync_interval == 5.0 and own.collect_res_used_interval == 0.5
    assert own.enable_node_metric_report is False
    assert own.prediction_safety_margin_percent == 20 and own.prediction_model_checkpoint_max_per_step == 3
    assert (options.metrics_addr, options.kube_api_qps, options.kube_api_burst) == (":19316", 7.5, 9)
    # Keys the document does not have keep the flags' defaults (not the schema's, which are the Go koordlet's).
    assert own.prediction_checkpoint_filepath == "" and own.kubelet_sync_timeout == 3.0


def test_the_command_line_wins_also_with_the_default_value(tmp_path):
    tree = host_tree(tmp_path / "host")
    path = write_config(tmp_path / "koordlet.yaml", {
        "cgroupRootDir": "/nonexistent-cgroup", "kubeletSyncInterval": "5s", "tsdbMaxBytes": "50Mi",
        "addr": ":19316"})
    # --kubelet-sync-interval=10s is the default: given explicitly, it still wins over the file.
    options = options_for(f"--config={path}", f"--cgroup-root-dir={tree['cgroup']}", "--kubelet-sync-interval=10s",
                          "--metrics-addr=0")
    koordlet.check_options(options)
    assert options.role_options.cgroup_root == str(tree["cgroup"])
    assert options.role_options.kubelet_sync_interval == 10.0
    assert options.metrics_addr == "0"
    assert options.role_options.tsdb_max_bytes == 50 * MiB  # no flag given: the file's


def test_feature_gates_merge_gate_by_gate(tmp_path):
    path = write_config(tmp_path / "koordlet.yaml", {"featureGates": {
        "Accelerators": True, "HugePageReport": True, "NodeTopologyReport": False}})
    options = options_for(f"--config={path}", "--feature-gates=HugePageReport=false,NodeMetricPromMetrics=true")
    koordlet.check_options(options)
    assert options.feature_gates == {"Accelerators": True, "HugePageReport": False, "NodeTopologyReport": False,
                                     "NodeMetricPromMetrics": True}


def test_a_mounted_configmap_directory(tmp_path):
    volume = tmp_path / "volume"
    (volume / "..2026_01_01").mkdir(parents=True)
    for key, text in {"koordlet-config": "kubeletSyncTimeout: 7s\nenablePprof: true\n",
                      "qos-plugin-extra-configs": "anything: goes\n"}.items():
        (volume / "..2026_01_01" / key).write_text(text)
    os.symlink("..2026_01_01", volume / "..data")
    for key in ("koordlet-config", "qos-plugin-extra-configs"):
        os.symlink(f"..data/{key}", volume / key)
    options = options_for(f"--config={volume}")
    koordlet.check_options(options)
    assert options.role_options.kubelet_sync_timeout == 7.0
    cfg = config.load(str(volume))
    assert cfg.file == str(volume / "koordlet-config")
    assert config.unused_keys(cfg) == ["enablePprof", "qos-plugin-extra-configs"]


def test_keys_without_effect_are_logged_once_in_one_line(tmp_path, caplog):
    path = write_config(tmp_path / "koordlet.yaml", {
        "kubeletSyncInterval": "5s", "enableNriRuntimeHook": False, "enablePprof": True,
        "resctrlCollectorInterval": "20s", "xpuDeviceInfosDir": "/xpu", "featureGates": {"Accelerators": True}})
    options = options_for(f"--config={path}", "--kubelet-sync-interval=2s")
    koordlet.check_options(options)
    with caplog.at_level(logging.INFO, logger="koordinator.koordlet"):
        config.log_start(config.load(str(path)), options)
    lines = [r.getMessage() for r in caplog.records if "no effect" in r.getMessage()]
    assert lines == [f"koordlet-config keys with no effect in this build: enableNriRuntimeHook,enablePprof,"
                     f"resctrlCollectorInterval file={path}"]
    assert options.role_options.xpu_device_infos_dir == "/xpu"
    (applied,) = [r.getMessage() for r in caplog.records if "read at start" in r.getMessage()]
    assert "applied=xpuDeviceInfosDir,featureGates" in applied and "command-line-wins=kubeletSyncInterval" in applied


# -- refusals: one line naming the file, the key and the value, exit 2 ------------------------------

@pytest.mark.parametrize("document, needle", [
    ("kubeletSyncInterval: [5s\n", "koordlet-config is not valid YAML: "),
    ("- kubeletSyncInterval\n", "must be of type object"),
    ("kubeletSyncInterval: 10\n", 'kubeletSyncInterval: Invalid value: "int64"'),
    ("kubeletSyncInterval: 10x\n", 'kubeletSyncInterval: Invalid value: "10x": is not a valid duration'),
    ("collectResUsedInterval: 0s\n", "collectResUsedInterval: invalid duration '0s': must be positive"),
    ("kubeletSyncIntervall: 5s\n", "kubeletSyncIntervall: unknown field, did you mean 'kubeletSyncInterval'?"),
    ("enableNodeMetricReport: sometimes\n", 'enableNodeMetricReport: Invalid value: "string"'),
    ("defaultRuntimeType: rkt\n", 'defaultRuntimeType: Unsupported value: "rkt"'),
    ("tsdbMaxBytes: -1\n", "tsdbMaxBytes: Invalid value: -1: "),
    ("tsdbMaxBytes: 0\n", "tsdbMaxBytes: invalid size '0': must be positive"),
    ("tsdbMaxBytes: 100MB\n", 'tsdbMaxBytes: Invalid value: "100MB": is not a valid quantity'),
    ("predictionSafetyMarginPercent: 2000\n", "predictionSafetyMarginPercent: invalid percent 2000: must be 0-1000"),
    ("addr: nowhere\n", "addr: invalid address 'nowhere'"),
    ("runtimeHooksNetwork: tcp\n", "runtimeHooksNetwork: 'tcp': only unix is supported"),
    ("runtimeHooksDisableStages: [PreCreate]\n", "runtimeHooksDisableStages: unknown stage 'PreCreate'"),
    ("kubeApiBurst: 0\n", "kubeApiBurst: invalid value '0': must be positive"),
    ("procRootDir: /nonexistent-proc\n", "procRootDir: '/nonexistent-proc' is not a directory"),
    ("featureGates: {NoSuchGate: true}\n", "featureGates: unrecognized feature gate: NoSuchGate"),
    ("featureGates: {BECPUManager: true}\n", "featureGates: BECPUManager=true is not supported: the QoS manager"),
])
def test_bad_documents_exit_2_naming_file_key_and_value(document, needle, tmp_path, capsys):
    path = write_config(tmp_path / "koordlet.yaml", document)
    code, err = run_main(["--role=koordlet", "--node-name=n1", f"--run-dir={tmp_path}", f"--config={path}"], capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith(f"koordinator: error: --config {path}: "), err
    assert needle in err


def test_a_wrong_type_names_the_value_too(tmp_path, capsys):
    path = write_config(tmp_path / "koordlet.yaml", "kubeletSyncInterval: 10\n")
    _, err = run_main(["--role=koordlet", "--node-name=n1", f"--config={path}"], capsys)
    assert err.rstrip().endswith("(value: 10)"), err


def test_a_value_the_flag_refuses_is_refused_even_where_the_command_line_wins(tmp_path, capsys):
    path = write_config(tmp_path / "koordlet.yaml", "tsdbMaxBytes: 0\n")
    code, err = run_main(["--role=koordlet", "--node-name=n1", f"--config={path}", "--tsdb-max-bytes=10Mi"], capsys)
    assert code == 2 and "tsdbMaxBytes: invalid size '0'" in err, err


def _missing(d: Path) -> Path:
    return d / "missing.yaml"


def _not_utf8(d: Path) -> Path:
    (d / "latin1.yaml").write_bytes(b"procRootDir: /pr\xf6c\n")
    return d / "latin1.yaml"


def _empty_volume(d: Path) -> Path:
    (d / "volume").mkdir()
    return d / "volume"


@pytest.mark.parametrize("make, needle", [
    (_missing, "missing.yaml: no such file or directory"),
    (_not_utf8, "latin1.yaml: is not UTF-8 text"),
    (_empty_volume, "volume: the directory has no koordlet-config file"),
])
def test_unreadable_config_exits_2(make, needle, tmp_path, capsys):
    path = make(tmp_path)
    code, err = run_main(["--role=koordlet", "--node-name=n1", f"--config={path}"], capsys)
    assert code == 2 and err.count("\n") == 1 and needle in err, err


# -- the mapping and the shipped manifests -----------------------------------------------------------

def test_every_key_maps_to_a_flag_and_every_flag_that_koordinator_has_is_mapped():
    properties = schemas.config_schema(config.DOCUMENT).schema["properties"]
    actions = config.flag_actions("koordlet")
    assert set(config.FLAGS) <= set(properties)
    assert set(config.FLAGS.values()) <= set(actions)
    assert config.FEATURE_GATES in properties
    shared = argparse.ArgumentParser(add_help=False)
    add_shared_flags(shared, "koordlet")
    own = set(actions) - set(vars(shared.parse_args([])))
    # Flags of this build with no key in Koordinator's document: no such Go flag, or one of another shape
    # (the Go koordlet builds the kubelet's address from kubeletPreferredAddressType and the ports).
    assert own - set(config.FLAGS.values()) == {"cgroup_driver", "kubelet_addr", "report_interval"}


def test_the_shipped_configmap_validates_and_maps_onto_the_daemonset(tmp_path):
    (configmap,) = [o for o in yaml.safe_load_all((ROOT / "manifests/config/koordlet-config.yaml").read_text()) if o]
    (daemonset,) = [o for o in yaml.safe_load_all((ROOT / "manifests/workloads/koordlet.yaml").read_text()) if o]
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    volume = tmp_path / "config"
    volume.mkdir()
    for key, text in configmap["data"].items():
        (volume / key).write_text(text)
    args = [a.replace("$(NODE_NAME)", "n1") for a in container["args"]]
    assert "--config=/etc/koordinator/config/koordlet-config" in args
    args = [f"--config={volume / 'koordlet-config'}" if a.startswith("--config=") else a for a in args]
    options = cli.parse_role_options("koordlet", args, koordlet)
    # The DaemonSet passes no flag the document sets: it would silently shadow the key.
    assert not options.explicit & set(config.FLAGS.values()), shlex.join(args)
    cfg = config.load(str(volume / "koordlet-config"))
    config.apply(cfg, options)  # the host paths do not exist here: map only, no check_options
    own = options.role_options
    assert (own.cgroup_root, own.sys_root, own.proc_root) == ("/host-cgroup/", "/host-sys/", "/proc/")
    assert own.run_dir == "/metric-data/" and own.prediction_checkpoint_filepath == "/prediction-checkpoints"
    assert own.tsdb_max_bytes == 100 * MiB and own.tsdb_retention_duration == 12 * 3600
    assert options.metrics_addr == ":9316" and options.feature_gates == {"Accelerators": True}
    assert own.runtime_hooks_addr == "/host-var-run-koordlet/koordlet.sock"
    assert own.runtime_hooks_host_endpoint == "/var/run/koordlet/koordlet.sock"
    assert own.runtime_hooks_config_path == "/host-etc-hookserver/"
    assert "runtimeHooksAddr" not in config.unused_keys(cfg)


# -- a koordlet started with --config -------------------------------------------------------------

def test_a_koordlet_reads_the_simulated_node_named_in_its_config(fresh_crd_server, scheduler_api, tmp_path, caplog):
    node = "sim-config"
    scheduler_api.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": node},
                          "status": {"capacity": {"cpu": "6", "memory": "8Gi", "pods": "110"}}})
    root = tmp_path / "nodes"
    tree = root / node
    path = write_config(tmp_path / "koordlet.yaml", {
        "procRootDir": str(tree / "proc"), "sysRootDir": str(tree / "sys"), "cgroupRootDir": str(tree / "cgroup"),
        "enableNodeMetricReport": False, "enablePprof": True})
    sim = Simulator(fresh_crd_server.kubeconfig, root, [node], interval=0.2).start()
    koordlet_ = None
    try:
        with caplog.at_level(logging.INFO, logger="koordinator.koordlet"):
            # root=None: no --*-root flags, the paths come from the file alone.
            koordlet_ = InProcessKoordlet(fresh_crd_server.kubeconfig, node, None, tmp_path / "run",
                                          f"--config={path}").start()
            parts = koordlet_.parts
            assert parts.advisor.paths.cgroup_root == str(tree / "cgroup") and parts.reporter is None
            assert (parts.layout.version, parts.layout.driver) == (2, "systemd")  # the simulator's
            cpu_info = wait_until(lambda: parts.cache.get_kv(kinds.KV_NODE_CPU_INFO), message="node CPU info")
            assert cpu_info["total_cpus"] == 6 and cpu_info["model"].startswith("Koordinator Simulated CPU")
            assert any("keys with no effect in this build: enablePprof" in r.getMessage() for r in caplog.records)

            # Read at start only: a change is a warning naming what changed, not a new setting.
            write_config(path, path.read_text() + "kubeletSyncInterval: 4s\n")
            warning = wait_until(lambda: next((r for r in caplog.records if r.levelno == logging.WARNING
                                               and "restart the koordlet" in r.getMessage()), None),
                                 timeout=10, message="a warning that the change needs a restart")
            assert "changed=kubeletSyncInterval" in warning.getMessage()
            assert koordlet_.options.role_options.kubelet_sync_interval == 10.0
    finally:
        if koordlet_ is not None:
            koordlet_.stop()
        sim.stop()
