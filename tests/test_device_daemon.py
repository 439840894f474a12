"""koord-device-daemon: discovery on fake sysfs trees and a stand-in NVML (the lowest level: the module
object pynvml would be), the document it writes, its flags, and the koordlet's Device built from that
document against the embedded API server."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import types
from pathlib import Path
from typing import Any

import pytest

import koordinator_roles.device_daemon as daemon_role
from koordinator.cli import parse_role_options
from koordinator.devices import discovery, xpu
from koordinator_roles.koordlet.statesinformer.device_reporter import DeviceReporter, condition_reason
from tests.test_koordlet_reporter import api, cache, informers, started_states  # noqa: F401  (fixtures)
from tests.test_koordlet_states import make_node, unique
from tests.waiting import wait_until

GiB = 1 << 30
ROOT = Path(__file__).resolve().parent.parent


class NVMLError(Exception):
    """pynvml.NVMLError's stand-in."""


def fake_nvml(gpus: list[dict], *, nvlink: set[frozenset[int]] = frozenset(), init_error: Exception | None = None,
              fail: dict[str, Any] | None = None) -> types.SimpleNamespace:
    """A stand-in for ``pynvml`` with the functions the discovery calls; ``fail`` maps a function name to
    the GPU index whose call raises NVMLError ("GPU is lost") — an error in the middle of a scan."""
    fail = fail or {}

    def call(name: str, result: Any) -> Any:
        def fn(h, *rest):
            if fail.get(name) == h["index"]:
                raise NVMLError("GPU is lost")
            return result(h, *rest)
        return fn

    def init():
        if init_error is not None:
            raise init_error
        state["init"] += 1

    state = {"init": 0, "shutdown": 0}
    handles = [dict(g, index=i) for i, g in enumerate(gpus)]
    return types.SimpleNamespace(
        state=state, NVMLError=NVMLError, NVML_P2P_CAPS_INDEX_NVLINK=2, NVML_P2P_STATUS_OK=0,
        nvmlInit=init,
        nvmlShutdown=lambda: state.__setitem__("shutdown", state["shutdown"] + 1),
        nvmlSystemGetDriverVersion=lambda: "550.54.15",
        nvmlDeviceGetCount=lambda: len(handles),
        nvmlDeviceGetHandleByIndex=lambda i: handles[i],
        nvmlDeviceGetUUID=call("uuid", lambda h: h["uuid"]),
        nvmlDeviceGetName=call("name", lambda h: h["name"]),
        nvmlDeviceGetMinorNumber=call("minor", lambda h: h["minor"]),
        nvmlDeviceGetMemoryInfo=call("memory", lambda h: types.SimpleNamespace(total=h["memory"], used=0,
                                                                                 free=h["memory"])),
        nvmlDeviceGetPciInfo=call("pci", lambda h: types.SimpleNamespace(busId=h["bus"])),
        # NVLink when the pair is in ``nvlink`` (status 0 = OK), else "not supported" (status 4).
        nvmlDeviceGetP2PStatus=lambda a, b, caps: 0 if frozenset((a["minor"], b["minor"])) in nvlink else 4,
        nvmlDeviceGetTopologyCommonAncestor=lambda a, b: 50,  # SYS: across the NUMA nodes
    )


GPUS = [
    {"uuid": "GPU-aaa", "minor": 0, "memory": 80 * GiB, "bus": "00000000:3B:00.0", "name": "NVIDIA H100 80GB HBM3"},
    {"uuid": "GPU-bbb", "minor": 1, "memory": 80 * GiB, "bus": "00000000:86:00.0", "name": "NVIDIA H100 80GB HBM3"},
]


def pci_function(sys_root: Path, parents: str, bus: str, vendor: str, device: str, cls: str, numa: str) -> Path:
    """A PCI function under ``sys/devices/<parents>/<bus>`` with its ``bus/pci/devices`` link, as sysfs has it."""
    real = sys_root / "devices" / parents / bus
    real.mkdir(parents=True)
    for name, text in (("vendor", vendor), ("device", device), ("class", cls), ("numa_node", numa)):
        (real / name).write_text(text + "\n")
    links = sys_root / "bus" / "pci" / "devices"
    links.mkdir(parents=True, exist_ok=True)
    (links / bus).symlink_to(os.path.relpath(real, links))
    return real


def gpu_host(sys_root: Path) -> Path:
    """Two NVIDIA GPUs on NUMA nodes 0 and 1, one Mellanox RDMA NIC (mlx5_0) on node 0, one plain NIC."""
    pci_function(sys_root, "pci0000:3a/0000:3a:00.0", "0000:3b:00.0", "0x10de", "0x2330", "0x030200", "0")
    pci_function(sys_root, "pci0000:85/0000:85:00.0", "0000:86:00.0", "0x10de", "0x2330", "0x030200", "1")
    nic = pci_function(sys_root, "pci0000:5d/0000:5d:00.0", "0000:5e:00.0", "0x15b3", "0x101d", "0x020000", "0")
    pci_function(sys_root, "pci0000:00", "0000:00:1f.6", "0x8086", "0x15bb", "0x020000", "-1")
    ib = sys_root / "class" / "infiniband" / "mlx5_0"
    ib.mkdir(parents=True)
    (ib / "device").symlink_to(os.path.relpath(nic, ib))
    return sys_root


def expected_document() -> list[dict]:
    """What the daemon writes for :func:`gpu_host` with NVLink between the two GPUs."""
    def gpu(uuid, minor, peer, numa, pcie, bus):
        return {"vendor": "nvidia", "model": "NVIDIA H100 80GB HBM3", "uuid": uuid, "minor": minor,
                "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi"},
                "topology": {"p2pLinks": [{"peerMinor": peer, "type": "NVLink"}], "socketID": "-1",
                             "nodeID": numa, "pcieID": pcie, "busID": bus},
                "status": {"healthy": True}}
    return [gpu("GPU-aaa", "0", "1", "0", "pci0000:3a", "0000:3b:00.0"),
            gpu("GPU-bbb", "1", "0", "1", "pci0000:85", "0000:86:00.0"),
            {"type": "rdma", "vendor": "mellanox", "model": "mlx5_0", "uuid": "0000:5e:00.0", "minor": "0",
             "resources": {"koordinator.sh/rdma": "100"},
             "topology": {"socketID": "-1", "nodeID": "0", "pcieID": "pci0000:5d", "busID": "0000:5e:00.0"},
             "status": {"healthy": True}}]


def daemon_options(*flags: str, environ: dict[str, str] | None = None) -> Any:
    argv = ["--role=device-daemon", "--node-name", "n1", *flags]
    options = parse_role_options("device-daemon", argv, daemon_role)
    daemon_role.check_options(options, environ=environ or {})
    return options


# -- discovery and the document ------------------------------------------------------------------

def test_two_gpus_on_two_numa_nodes_and_an_rdma_nic(tmp_path):
    sys_root = gpu_host(tmp_path / "sys")
    out = tmp_path / "xpu" / "ic-device"
    opts = daemon_options("--oneshot", "--sys-root", str(sys_root), "--prints-output-file", str(out)).role_options
    nvml = fake_nvml(GPUS, nvlink={frozenset((0, 1))})
    d = daemon_role.DeviceDaemon(opts, nvml=nvml)
    d.run(threading.Event())  # --oneshot: one run, then back
    text = out.read_text()
    assert json.loads(text) == expected_document()
    assert text.startswith('[\n  {\n    "vendor": "nvidia",')  # 2-space indented, as Koordinator writes it
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in out.parent.iterdir()] == ["ic-device"]  # no temp file left behind
    assert nvml.state == {"init": 1, "shutdown": 1}
    # The document reads back to the same entries.
    assert [i.to_dict() for i in xpu.read_dir(str(out.parent))] == expected_document()


def test_no_gpu_no_nvml_is_an_empty_list_and_one_info_line(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    out = tmp_path / "ic-device"
    (tmp_path / "sys").mkdir()
    opts = daemon_options("--oneshot", "--sys-root", str(tmp_path / "sys"), "--prints-output-file",
                          str(out)).role_options
    daemon_role.DeviceDaemon(opts, nvml=fake_nvml([], init_error=NVMLError("Driver Not Loaded"))).run(
        threading.Event())
    assert json.loads(out.read_text()) == []
    nvml_lines = [r for r in caplog.records if "NVML" in r.getMessage()]
    assert [(r.levelname, r.getMessage()) for r in nvml_lines] == [
        ("INFO", "NVML is not available (Driver Not Loaded): no GPU discovery, no NVIDIA GPU in the device infos")]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_nvidia_pci_functions_without_nvml_are_said_not_reported(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    sys_root = gpu_host(tmp_path / "sys")
    infos = discovery.discover(str(sys_root), fake_nvml([], init_error=OSError("libnvidia-ml.so.1: not found")))
    assert [i.type for i in infos] == ["rdma"]
    assert "2 NVIDIA GPU(s) on the PCI bus (0000:3b:00.0,0000:86:00.0) but no NVML" in caplog.text


def test_other_accelerators_by_pci_vendor_and_class(tmp_path):
    sys_root = tmp_path / "sys"
    # Two Ascend NPUs (processing accelerators), a Huawei PCIe bridge and a Huawei NIC (not accelerators).
    pci_function(sys_root, "pci0000:c0", "0000:c1:00.0", "0x19e5", "0xd801", "0x120000", "1")
    pci_function(sys_root, "pci0000:80", "0000:81:00.0", "0x19e5", "0xd801", "0x120000", "0")
    pci_function(sys_root, "pci0000:80", "0000:82:00.0", "0x19e5", "0x1710", "0x120000", "0")
    pci_function(sys_root, "pci0000:80", "0000:83:00.0", "0x19e5", "0xa222", "0x020000", "0")
    pci_function(sys_root, "pci0000:20", "0000:21:00.0", "0xcabc", "0x0370", "0x120000", "-1")
    infos = discovery.discover(str(sys_root), fake_nvml([]))
    assert [(i.vendor, i.model, i.uuid, i.minor, i.topology.node_id, i.topology.pcie_id) for i in infos] == [
        ("cambricon", "cambricon-0370", "cambricon-0000:21:00.0", "0", "0", "pci0000:20"),
        ("huawei", "huawei-d801", "huawei-0000:81:00.0", "0", "0", "pci0000:80"),
        ("huawei", "huawei-d801", "huawei-0000:c1:00.0", "1", "1", "pci0000:c0")]
    assert infos[0].resources == {"koordinator.sh/gpu-core": "100"}


def test_an_unreadable_sysfs_file_leaves_one_device_out_in_one_line(tmp_path, caplog):
    sys_root = gpu_host(tmp_path / "sys")
    nic = sys_root / "bus" / "pci" / "devices" / "0000:5e:00.0"
    (nic / "class").unlink()
    (nic / "class").mkdir()  # reading it fails even as root (EISDIR)
    (sys_root / "bus" / "pci" / "devices" / "0000:00:1f.6" / "vendor").write_text("intel\n")
    infos = discovery.discover(str(sys_root), fake_nvml(GPUS))
    assert [i.uuid for i in infos] == ["GPU-aaa", "GPU-bbb"]  # the NIC is gone, the GPUs are not
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    real = os.path.realpath(nic)
    assert warnings == [
        f"sysfs {sys_root}/bus/pci/devices/0000:00:1f.6/vendor: Invalid value: 'intel': not a hexadecimal id: "
        "PCI device 0000:00:1f.6 left out",
        f"sysfs {sys_root}/bus/pci/devices/0000:5e:00.0/class: cannot read (Is a directory): PCI device "
        "0000:5e:00.0 left out",
        f"sysfs {real}/class: cannot read (Is a directory): RDMA device mlx5_0 left out"]


def test_an_nvml_error_mid_scan_leaves_that_gpu_out_in_one_line(tmp_path, caplog):
    sys_root = gpu_host(tmp_path / "sys")
    nvml = fake_nvml(GPUS, nvlink={frozenset((0, 1))}, fail={"memory": 1})
    infos = discovery.discover(str(sys_root), nvml)
    assert [i.uuid for i in infos] == ["GPU-aaa", "0000:5e:00.0"]
    assert infos[0].topology.p2p_links == ()  # its NVLink peer is gone
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["NVML: GPU index 1 left out: GPU is lost"]
    assert nvml.state["shutdown"] == 1
    # The count itself failing ends the NVML part (one line), the rest is still reported.
    caplog.clear()
    broken = fake_nvml(GPUS)
    broken.nvmlDeviceGetCount = lambda: (_ for _ in ()).throw(NVMLError("Unknown Error"))
    assert [i.uuid for i in discovery.discover(str(sys_root), broken)] == ["0000:5e:00.0"]
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        "NVML: GPU discovery failed: Unknown Error"]


def test_malformed_documents_name_the_field(tmp_path):
    d = tmp_path / "xpu"
    d.mkdir()
    (d / "a").write_text(json.dumps([{"vendor": "huawei", "minor": "x1"}]))
    with pytest.raises(xpu.DocumentError, match=r'a\[0\]\.minor: Invalid value: "x1": must be a decimal integer'):
        xpu.read_dir(str(d))
    (d / "a").write_text('{"vendor": "huawei"}')
    with pytest.raises(xpu.DocumentError, match=r"a: Invalid value: .*must be a JSON array"):
        xpu.read_dir(str(d))
    assert xpu.read_dir(str(tmp_path / "missing")) == []


# -- flags ----------------------------------------------------------------------------------------

def test_flags_env_config_and_defaults(tmp_path):
    opts = daemon_options().role_options
    assert (opts.oneshot, opts.no_timestamp, opts.sleep_interval, opts.prints_output_file) == (
        False, False, 900.0, "/var/run/koordlet/xpu-device-infos/ic-device")
    opts = daemon_options("--oneshot=false", "--no-timestamp", "--sleep-interval", "90s", "--prints-output-file",
                          "", environ={"KDD_ONESHOT": "true", "KDD_SLEEP_INTERVAL": "5s"}).role_options
    assert (opts.oneshot, opts.no_timestamp, opts.sleep_interval, opts.prints_output_file) == (False, True, 90.0, "")
    # A flag not given: its variable, else the configuration file, else the default.
    config = tmp_path / "cm" / "koord-device-daemon-config"
    config.parent.mkdir()
    config.write_text("version: v1\nflags:\n  kdd:\n    oneshot: true\n    sleepInterval: 2m\n"
                      "    printsOutputFile: /out/from-config\n")
    opts = daemon_options("--config-file", str(config.parent),
                          environ={"PRINTS_OUTPUT_FILE": "/out/from-env", "KDD_SLEEP_INTERVAL": "1m30s"}).role_options
    assert (opts.oneshot, opts.sleep_interval, opts.prints_output_file) == (True, 90.0, "/out/from-env")
    opts = daemon_options(environ={"KDD_CONFIG_FILE": str(config)}).role_options
    assert (opts.oneshot, opts.sleep_interval, opts.prints_output_file) == (True, 120.0, "/out/from-config")


@pytest.mark.parametrize("flags, environ, message", [
    ((), {"KDD_SLEEP_INTERVAL": "soon"}, 'KDD_SLEEP_INTERVAL: Invalid value: "soon"'),
    ((), {"KDD_ONESHOT": "yes"}, 'KDD_ONESHOT: Invalid value: "yes"'),
    (("--prints-output-file", "/tmp/"), {}, '--prints-output-file: Invalid value: "/tmp/": is a directory'),
    ((), {"CONFIG_FILE": "/nonexistent/kdd.yaml"}, "--config-file /nonexistent/kdd.yaml: cannot read"),
])
def test_bad_variables_are_one_clear_error(flags, environ, message):
    with pytest.raises(ValueError) as err:
        daemon_options(*flags, environ=environ)
    assert message in str(err.value)


def test_bad_config_file_names_file_and_field(tmp_path):
    path = tmp_path / "kdd.yaml"
    path.write_text("version: v2\n")
    with pytest.raises(ValueError, match=r'kdd.yaml: version: Unsupported value: "v2"'):
        daemon_options("--config-file", str(path))


@pytest.mark.parametrize("argv, message", [
    (["--sleep-interval", "0s"], "argument --sleep-interval: invalid duration '0s': must be positive"),
    (["--oneshot=maybe"], "argument --oneshot: invalid boolean value 'maybe'"),
    (["--sleep-interval", "10s", "--no-such-flag"], "unrecognized arguments: --no-such-flag"),
])
def test_bad_flags_exit_2_naming_the_flag(argv, message):
    proc = subprocess.run([sys.executable, "-m", "koordinator", "--role=device-daemon", "--node-name", "n1", *argv],
                          capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_oneshot_process_writes_and_exits_0(tmp_path):
    # No kubeconfig, no cluster: the daemon never talks to the API server.
    (tmp_path / "sys").mkdir()
    out = tmp_path / "xpu" / "ic-device"
    proc = subprocess.run(
        [sys.executable, "-m", "koordinator", "--role=device-daemon", "--node-name", "n1",
         "--metrics-addr", "0", "--health-addr", "0", "--log-level", "info",
         "--oneshot", "--no-timestamp", "--sys-root", str(tmp_path / "sys"), "--prints-output-file", str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text()) == []  # no GPU here, no NVML (or no driver): nothing, not an error
    assert f"device infos written to {out} devices=0" in proc.stderr
    assert "--no-timestamp has no effect" in proc.stderr


def test_the_loop_rewrites_every_interval_and_removes_its_file_when_stopped(tmp_path):
    sys_root = gpu_host(tmp_path / "sys")
    out = tmp_path / "ic-device"
    opts = daemon_options("--sleep-interval", "10ms", "--sys-root", str(sys_root), "--prints-output-file",
                          str(out)).role_options
    d = daemon_role.DeviceDaemon(opts, nvml=fake_nvml(GPUS))
    stop = threading.Event()
    t = threading.Thread(target=d.run, args=(stop,))
    t.start()
    try:
        wait_until(lambda: d.runs >= 3, 10, "three discoveries")
        assert len(json.loads(out.read_text())) == 3
    finally:
        stop.set()
        t.join(10)
    assert not out.exists()  # the koordlet must not report devices no daemon vouches for


# -- the koordlet's Device from the daemon's document -------------------------------------------

def test_koordlet_device_from_the_daemon_document(api, informers, cache, tmp_path):  # noqa: F811
    sys_root = gpu_host(tmp_path / "sys")
    xpu_dir = tmp_path / "xpu-device-infos"
    opts = daemon_options("--oneshot", "--sys-root", str(sys_root), "--prints-output-file",
                          str(xpu_dir / "ic-device")).role_options
    daemon_role.DeviceDaemon(opts, nvml=fake_nvml(GPUS, nvlink={frozenset((0, 1))})).run(threading.Event())
    document = json.loads((xpu_dir / "ic-device").read_text())

    node_name = unique("xpu-node")
    node = make_node(api, node_name)
    states = started_states(informers, node_name)
    # NVML on the koordlet side would find nothing: the Device comes from the document alone.
    reporter = DeviceReporter(api, states, cache, xpu_dir=str(xpu_dir), discover=lambda nvml, sys_root: None)
    assert reporter.sync_once() is True
    device = api.get("Device", node_name)
    assert device["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    assert device["metadata"]["labels"] == {"node.koordinator.sh/gpu-vendor": "nvidia",
                                            "node.koordinator.sh/gpu-model": "NVIDIA-H100-80GB-HBM3",
                                            "node.koordinator.sh/gpu-partition-policy": "Prefer"}
    assert json.loads(device["metadata"]["annotations"]["scheduling.koordinator.sh/gpu-partitions"]) == {
        "2": [{"minors": [0, 1], "gpuLinkType": "NVLink", "allocationScore": 1}]}
    devices = device["spec"]["devices"]
    # Every entry of the document, field by field.
    assert len(devices) == len(document)
    by_id = {d["id"]: d for d in devices}
    for entry in document:
        got = by_id[entry["uuid"]]
        assert got["type"] == entry.get("type", "gpu") and got["minor"] == int(entry["minor"])
        assert got["health"] is entry["status"]["healthy"]
        topo = entry["topology"]
        assert got["topology"] == {"socketID": -1, "nodeID": int(topo["nodeID"]), "pcieID": topo["pcieID"],
                                   "busID": topo["busID"]}
        want = dict(entry["resources"], **({} if entry.get("type") else {"koordinator.sh/gpu-memory-ratio": "100"}))
        assert got["resources"] == want
        [cond] = got["conditions"]
        assert (cond["type"], cond["status"], cond["reason"]) == ("Healthy", "True", "DeviceHealthy")
    # The GPU entries are what the koordlet's own NVML path reports for the same GPUs (plus conditions).
    gpu = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory": "80Gi",
           "koordinator.sh/gpu-memory-ratio": "100"}
    assert [{k: v for k, v in d.items() if k != "conditions"} for d in devices[:2]] == [
        {"id": "GPU-aaa", "minor": 0, "type": "gpu", "health": True, "resources": gpu,
         "topology": {"socketID": -1, "nodeID": 0, "pcieID": "pci0000:3a", "busID": "0000:3b:00.0"}},
        {"id": "GPU-bbb", "minor": 1, "type": "gpu", "health": True, "resources": gpu,
         "topology": {"socketID": -1, "nodeID": 1, "pcieID": "pci0000:85", "busID": "0000:86:00.0"}}]
    assert devices[2]["type"] == "rdma" and devices[2]["id"] == "0000:5e:00.0"

    # Unchanged document: no write (transition times kept).
    assert reporter.sync_once() is False
    # A GPU turns unhealthy: its condition flips with the daemon's reason.
    document[1]["status"] = {"healthy": False, "errCode": "XID 79", "errMessage": "fallen off the bus"}
    (xpu_dir / "ic-device").write_text(json.dumps(document))
    assert reporter.sync_once() is True
    bad = next(d for d in api.get("Device", node_name)["spec"]["devices"] if d["id"] == "GPU-bbb")
    assert bad["health"] is False
    assert {k: bad["conditions"][0][k] for k in ("status", "reason", "message")} == {
        "status": "False", "reason": "XID79", "message": "fallen off the bus"}  # a valid reason made of the code
    assert condition_reason("chip error") == "ChipError" and condition_reason("") == "Unknown"
    # A malformed file: one warning, the last good read stays.
    (xpu_dir / "broken").write_text("[{")
    assert reporter.sync_once() is False
    # The daemon stopped (its file removed): no accelerator left, NVML has none: the Device empties.
    (xpu_dir / "broken").unlink()
    (xpu_dir / "ic-device").unlink()
    assert reporter.sync_once() is True
    final = api.get("Device", node_name)
    assert final["spec"]["devices"] == []
    assert "node.koordinator.sh/gpu-partition-policy" not in final["metadata"]["labels"]
    assert "scheduling.koordinator.sh/gpu-partitions" not in (final["metadata"].get("annotations") or {})


# -- the GPU-host check script ---------------------------------------------------------------------

def test_device_check_script_on_a_fake_tree_without_nvml(tmp_path):
    sys_root = gpu_host(tmp_path / "sys")
    # Only the repository on the path and no third-party package: the discovery path must stay light.
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-S", str(ROOT / "scripts" / "device_check_nvml.py"), "--sys-root",
                           str(sys_root), "--output", str(tmp_path / "out" / "ic-device")],
                          capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["document"] == [expected_document()[2]]  # the NIC; the GPUs need NVML
    assert result["summary"] == {"nvml": False, "devices": 1, "by_kind": {"rdma": 1}, "heavy_modules": []}
    assert json.loads((tmp_path / "out" / "ic-device").read_text()) == result["document"]
    assert "2 NVIDIA GPU(s) on the PCI bus" in proc.stderr
