"""``koordinator --role=manager`` as a process: its flags, and leader election between two replicas."""

from __future__ import annotations

import signal
import subprocess
import sys
import pytest

from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from koordinator_roles.manager import enabled_controllers, noderesource_plugins
from tests.manager_harness import SYSTEM_NAMESPACE, manager_process
from tests.waiting import wait_until


def run_manager(*flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "koordinator", "--role=manager", *flags],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("flags, message", [
    (["--feature-gates=Bogus=true"], "unrecognized feature gate: Bogus"),
    (["--feature-gates=NodeMutatingWebhook=true"], "NodeMutatingWebhook=true is not supported"),
    (["--controllers=nodeslo,nodemetrics"], "unknown controller 'nodemetrics'"),
    (["--controllers=colocationprofile"], "colocationprofile: needs the ColocationProfileController gate"),
    (["--noderesource-plugins=BatchResource=maybe"], "'BatchResource=maybe': 'maybe' is not true or false"),
    (["--noderesource-plugins=Batch=false"], "unknown plugin 'Batch'"),
    (["--webhook-port=70000"], "70000"),
])
def test_bad_flags_exit_2_naming_the_value(flags, message):
    proc = run_manager(*flags)
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr


def test_help_lists_the_manager_flags():
    proc = run_manager("--help")
    assert proc.returncode == 0
    for flag in ("--controllers", "--slo-config-name", "--config-namespace", "--webhook-port",
                 "--webhook-cert-dir", "--node-strategy-name-need-check", "--noderesource-plugins"):
        assert flag in proc.stdout


def test_controllers_flag_follows_koordinator_rules():
    assert enabled_controllers("*") == ["nodemetric", "nodeslo", "noderesource", "quotaprofile"]
    assert enabled_controllers("*,-noderesource") == ["nodemetric", "nodeslo", "quotaprofile"]
    assert enabled_controllers("nodeslo") == ["nodeslo"]
    assert enabled_controllers("quotaprofile") == ["quotaprofile"]
    # "-name" wins over "*" whatever the order; names not listed are off without "*".
    assert enabled_controllers("-nodeslo,*") == ["nodemetric", "noderesource", "quotaprofile"]
    assert enabled_controllers("*,-colocationprofile,-quotaprofile") == ["nodemetric", "nodeslo", "noderesource"]
    assert noderesource_plugins("") == ["CPUNormalization", "ResourceAmplification", "MidResource", "BatchResource",
                                        "GPUDeviceResource", "RDMADeviceResource"]
    assert "MidResource" not in noderesource_plugins("MidResource=false")


def _holder(client: Client) -> str | None:
    try:
        lease = client.get("Lease", "koordinator-manager", SYSTEM_NAMESPACE)
    except NotFound:
        return None
    return (lease.get("spec") or {}).get("holderIdentity") or None


def _has_nodeslo(client: Client, name: str) -> bool:
    try:
        client.get("NodeSLO", name)
        return True
    except NotFound:
        return False


def test_two_managers_one_leads_and_the_other_takes_over(crd_server, crd_client, tmp_path):
    server, client = crd_server, crd_client
    flags = ["--leader-elect", "--leader-elect-lease-duration=2s", "--leader-elect-renew-deadline=1s",
             "--leader-elect-retry-period=200ms", "--webhook-port=0", "--log-level=info"]
    procs = {ident: manager_process(server.kubeconfig, tmp_path / f"{ident}.log", *flags,
                                    f"--leader-elect-identity={ident}")
             for ident in ("manager-a", "manager-b")}
    try:
        leader = wait_until(lambda: _holder(client), message="one manager takes the Lease")
        client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "le-node-1"}})
        wait_until(lambda: _has_nodeslo(client, "le-node-1"), message="the leader's controllers run")

        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait(10)
        other = "manager-b" if leader == "manager-a" else "manager-a"
        wait_until(lambda: _holder(client) == other, timeout=30, message="the other manager takes over")
        client.create({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "le-node-2"}})
        wait_until(lambda: _has_nodeslo(client, "le-node-2"), message="controllers resume under the new leader")
        assert procs[other].poll() is None
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
