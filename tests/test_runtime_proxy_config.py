"""The runtime proxy without a container runtime: its flags and refusals (the real binary's exit codes), hook-server
registrations read from a real directory (bad files named, the last good one kept), Koordinator's resource merge
rules, and the koordlet hook server's translation helpers."""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
from koordinator.grpcapi.runtime.v1alpha1 import api_pb2 as hookapi
from koordinator_roles.koordlet.runtimehooks.hookserver import cgroup_dir, kube_qos_of, stages_served
from koordinator_roles.koordlet.runtimehooks import enabled_plugins
from koordinator_roles.runtime_proxy.hookconfig import HookRegistry, RegistrationError, parse
from koordinator_roles.runtime_proxy.interceptor import _set_envs
from koordinator.grpcapi.runtime.resources import merge_response, merge_update, to_cri, to_hook
from tests.waiting import wait_until

KOORDLET_JSON = {"remote-endpoint": "/var/run/koordlet/koordlet.sock", "failure-policy": "Ignore",
                 "runtime-hooks": ["PreRunPodSandbox", "PreCreateContainer", "PreUpdateContainerResources"]}


def koordinator(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "koordinator", *args], capture_output=True, text=True, timeout=60,
                          cwd=cwd)


# -- flags ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag, code, message", [
    ("--backend-runtime-mode=Docker", 2, "--backend-runtime-mode=Docker: not supported by this build"),
    ("--backend-runtime-mode=Pouch", 2, "--backend-runtime-mode='Pouch': want Containerd or Docker"),
    ("--koord-runtimeproxy-endpoint=", 2, "--koord-runtimeproxy-endpoint: must not be empty"),
    ("--kubeconfig=/x", 2, "unrecognized arguments: --kubeconfig=/x"),
    ("--max-concurrent-calls=0", 2, "invalid value '0': must be positive"),
])
def test_bad_flags_exit_2_naming_the_flag(tmp_path, flag, code, message):
    proc = koordinator("--role=runtime-proxy", flag, f"--hook-server-config-dir={tmp_path}/hooks", cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_socket_path_that_cannot_be_created_exits_1_naming_it(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = koordinator("--role=runtime-proxy", f"--koord-runtimeproxy-endpoint={blocker}/proxy.sock",
                       f"--hook-server-config-dir={tmp_path}/hooks", "--metrics-addr=0", "--health-addr=0",
                       cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert f"koordinator: error: koord-runtime-proxy: --koord-runtimeproxy-endpoint {blocker}/proxy.sock: " \
           f"cannot create {blocker}: a file that is not a directory is in the way" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_regular_file_at_the_socket_path_is_not_removed(tmp_path):
    target = tmp_path / "proxy.sock"
    target.write_text("precious")
    proc = koordinator("--role=runtime-proxy", f"--koord-runtimeproxy-endpoint={target}",
                       f"--hook-server-config-dir={tmp_path}/hooks", "--metrics-addr=0", "--health-addr=0",
                       cwd=tmp_path)
    assert proc.returncode == 1
    assert f"--koord-runtimeproxy-endpoint {target}: exists and is not a socket" in proc.stderr
    assert target.read_text() == "precious"


def test_help_has_no_api_server_flags(tmp_path):
    proc = koordinator("--role=runtime-proxy", "--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert "--remote-runtime-service-endpoint" in proc.stdout and "--hook-server-config-dir" in proc.stdout
    assert "--kubeconfig" not in proc.stdout and "--node-name" not in proc.stdout


# -- registrations -------------------------------------------------------------------------------------


def test_parse_the_koordlet_registration():
    server = parse("koordlet.json", json.dumps(KOORDLET_JSON))
    assert (server.endpoint, server.failure_policy, server.fails_closed) == ("/var/run/koordlet/koordlet.sock",
                                                                              "Ignore", False)
    assert server.hooks == frozenset(KOORDLET_JSON["runtime-hooks"])
    assert parse("x.json", json.dumps({**KOORDLET_JSON, "failure-policy": ""})).failure_policy == "Ignore"
    assert parse("x.json", json.dumps({**KOORDLET_JSON, "remote-endpoint": "unix:///run/k.sock"})).endpoint == \
        "/run/k.sock"


@pytest.mark.parametrize("doc, message", [
    ("{", "x.json: not JSON: "),
    ("[]", "x.json: want a JSON object, got list"),
    ({**KOORDLET_JSON, "remote-endpoint": ""}, "x.json: remote-endpoint: '': want the hook server's unix socket path"),
    ({**KOORDLET_JSON, "remote-endpoint": "koordlet.sock"}, "x.json: remote-endpoint: 'koordlet.sock': want an "
                                                            "absolute unix socket path"),
    ({**KOORDLET_JSON, "failure-policy": "fail"}, "x.json: failure-policy: 'fail': want Fail or Ignore"),
    ({**KOORDLET_JSON, "runtime-hooks": "PreCreateContainer"}, "x.json: runtime-hooks: 'PreCreateContainer': want a "
                                                               "list of hook types"),
    ({**KOORDLET_JSON, "runtime-hooks": ["PreCreateContainer", "PreCreate"]},
     "x.json: runtime-hooks[1]: unknown hook type 'PreCreate'"),
])
def test_bad_registrations_name_the_field(doc, message):
    with pytest.raises(RegistrationError) as err:
        parse("x.json", doc if isinstance(doc, str) else json.dumps(doc))
    assert str(err.value).startswith(message)


def test_the_registry_follows_the_directory_and_keeps_the_last_good_registration(tmp_path, caplog):
    hooks = tmp_path / "hookserver.d"
    seen: list[list[str]] = []
    registry = HookRegistry(str(hooks), on_change=lambda servers: seen.append([s.name for s in servers]),
                            debounce=0.01)
    registry.start()
    try:
        assert hooks.is_dir() and registry.servers() == []
        (hooks / "koordlet.json").write_text(json.dumps(KOORDLET_JSON))
        (hooks / "notes.txt").write_text("not a registration")
        wait_until(lambda: [s.name for s in registry.servers()] == ["koordlet.json"])
        with caplog.at_level(logging.ERROR, logger="koordinator.runtime_proxy"):
            (hooks / "koordlet.json").write_text(json.dumps({**KOORDLET_JSON, "failure-policy": "Never"}))
            wait_until(lambda: "koordlet.json" in registry.problems())
            wait_until(lambda: caplog.records)  # logged by the watcher thread, just after the problem is recorded
        assert [r.getMessage() for r in caplog.records] == [
            f"invalid hook server registration {hooks}/koordlet.json: failure-policy: 'Never': want Fail or Ignore; "
            "its previous registration stays in force"]
        assert registry.servers()[0].failure_policy == "Ignore"
        (hooks / "koordlet.json").write_text(json.dumps({**KOORDLET_JSON, "failure-policy": "Fail"}))
        wait_until(lambda: registry.servers() and registry.servers()[0].fails_closed)
        assert registry.problems() == {}
        (hooks / "koordlet.json").unlink()
        wait_until(lambda: registry.servers() == [])
        assert seen[-1] == []
    finally:
        registry.stop(5)


def test_the_registry_refuses_a_config_dir_it_cannot_create(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError, match=f"hook server config dir {blocker}/hooks: Not a directory"):
        HookRegistry(str(blocker / "hooks")).start()


# -- merge rules ---------------------------------------------------------------------------------------


def test_the_hook_response_rule():
    a = hookapi.LinuxContainerResources(cpu_period=100000, cpu_quota=50000, cpu_shares=1024, memory_limit_in_bytes=1,
                                        oom_score_adj=-997, cpuset_cpus="0-1", cpuset_mems="0", unified={"a": "1"})
    b = hookapi.LinuxContainerResources(cpu_quota=-1, cpu_shares=0, unified={"b": "2"})
    out = merge_response(a, b)
    assert (out.cpu_period, out.cpu_quota, out.cpu_shares, out.memory_limit_in_bytes) == (100000, -1, 1024, 1)
    assert out.oom_score_adj == 0, "0 is a valid oom_score_adj and overwrites"
    assert (out.cpuset_cpus, out.cpuset_mems) == ("", ""), "cpusets are always taken, even empty"
    assert dict(out.unified) == {"a": "1", "b": "2"}
    assert merge_response(a, hookapi.LinuxContainerResources(oom_score_adj=2000)).oom_score_adj == -997
    assert a.cpu_quota == 50000, "the inputs are not changed"


def test_the_update_request_rule():
    a = hookapi.LinuxContainerResources(cpu_shares=512, cpuset_cpus="0", oom_score_adj=1000)
    out = merge_update(a, hookapi.LinuxContainerResources(cpu_shares=2, memory_limit_in_bytes=5, oom_score_adj=-1))
    assert (out.cpu_shares, out.memory_limit_in_bytes, out.cpuset_cpus, out.oom_score_adj) == (2, 5, "0", 1000)
    assert merge_update(a, hookapi.LinuxContainerResources(cpuset_cpus="1")).cpuset_cpus == "1"


def test_cri_and_hook_resources_share_their_wire_format():
    resources = cri.LinuxContainerResources(cpu_shares=2, cpu_quota=-1, memory_swap_limit_in_bytes=7,
                                            hugepage_limits=[cri.HugepageLimit(page_size="2MB", limit=4)],
                                            unified={"memory.high": "max"})
    assert to_cri(to_hook(resources)) == resources
    assert to_hook(resources).hugepage_limits[0].page_size == "2MB"


def test_envs_keep_the_kubelets_order():
    config = cri.ContainerConfig(envs=[cri.KeyValue(key="B", value="1"), cri.KeyValue(key="A", value="2"),
                                       cri.KeyValue(key="GONE", value="x")])
    _set_envs(config, {"A": "2", "B": "1", "NEW": "3"})
    assert [(kv.key, kv.value) for kv in config.envs] == [("B", "1"), ("A", "2"), ("NEW", "3")]


# -- the koordlet side ---------------------------------------------------------------------------------


@pytest.mark.parametrize("parent, rel, qos", [
    ("/kubepods/besteffort/pod1", "kubepods/besteffort/pod1", "BestEffort"),
    ("/kubepods/burstable/pod1", "kubepods/burstable/pod1", "Burstable"),
    ("/kubepods/pod1", "kubepods/pod1", "Guaranteed"),
    ("kubepods-besteffort-pod1_2.slice", "kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1_2.slice",
     "BestEffort"),
    ("kubepods-pod1.slice", "kubepods.slice/kubepods-pod1.slice", "Guaranteed"),
])
def test_cgroup_parents_of_both_drivers(parent, rel, qos):
    assert (cgroup_dir(parent), kube_qos_of(parent)) == (rel, qos)


def test_the_registered_stages_are_those_the_plugins_serve():
    plugins = enabled_plugins({"BatchResource": True, "CPUSetAllocator": True, "GroupIdentity": True})
    assert stages_served(plugins, []) == ["PreRunPodSandbox", "PreCreateContainer", "PreUpdateContainerResources"]
    assert stages_served(plugins, ["PreUpdateContainerResources"]) == ["PreRunPodSandbox", "PreCreateContainer"]
    assert stages_served([], []) == []


def test_the_koordlet_refuses_a_hook_socket_path_too_long(tmp_path):
    from koordinator.runtime.grpcserver import prepare_socket

    path = "/tmp/" + "x" * 120 + ".sock"
    with pytest.raises(OSError, match=r"--runtime-hooks-addr /tmp/x+\.sock: 130 bytes, a unix socket path may have "
                                      r"at most 107"):
        prepare_socket(path, "--runtime-hooks-addr")
    stale = tmp_path / "s.sock"
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(stale))
    sock.close()
    prepare_socket(str(stale), "--runtime-hooks-addr")
    assert not os.path.exists(stale), "a stale socket is removed"
