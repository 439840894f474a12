"""koordlet's flags and feature gates: bad values are one line naming the flag, before anything starts."""

from __future__ import annotations

import pytest

from koordinator import cli
from koordinator_roles.koordlet import features


def run_main(argv: list[str], capsys) -> tuple[int, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    return code, capsys.readouterr().err


@pytest.mark.parametrize("flags, needle", [
    (["--config=/etc/koordlet-config-nonexistent"], "--config /etc/koordlet-config-nonexistent: no such file"),
    (["--proc-root=/nonexistent-proc"], "--proc-root: '/nonexistent-proc' is not a directory"),
    (["--cgroup-root-dir=/nonexistent-cg"], "--cgroup-root: '/nonexistent-cg' is not a directory"),
    (["--kubelet-addr=ftp://node:10250"], "--kubelet-addr: 'ftp://node:10250' must start with http:// or https://"),
    (["--tsdb-max-bytes=100MB"], "argument --tsdb-max-bytes: invalid size '100MB'"),
    (["--tsdb-max-bytes=0"], "argument --tsdb-max-bytes: invalid size '0': must be positive"),
    (["--collect-res-used-interval=0s"], "argument --collect-res-used-interval: invalid duration '0s': must be positive"),
    (["--report-interval=0s"], "--report-interval: 0s: must be positive"),
    (["--prediction-safety-margin-percent=-5"], "invalid percent -5: must be 0-1000"),
    (["--cgroup-driver=docker"], "argument --cgroup-driver: invalid choice: 'docker'"),
    (["--feature-gates=NoSuchGate=true"], "--feature-gates: unrecognized feature gate: NoSuchGate"),
    (["--feature-gates=BECPUManager=true"], "--feature-gates: BECPUManager=true is not supported: the QoS manager"),
])
def test_bad_flags_exit_2_naming_the_flag(flags, needle, capsys, tmp_path):
    code, err = run_main(["--role=koordlet", "--node-name=n1", f"--run-dir={tmp_path}", *flags], capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("koordinator: error: "), err
    assert needle in err


def test_feature_gates_defaults_and_inactive():
    gates = features.resolve({"Accelerators": True, "BECPUSuppress": False})
    assert gates["Accelerators"] and gates["NodeTopologyReport"] and not gates["BECPUSuppress"]
    # Every gate on by default in Koordinator does something here (the runtime hooks run in reconciler mode).
    assert features.inactive(gates) == []
    assert features.resolve({"CPUNormalization": True})["CPUNormalization"]
    assert "NodeTopologyReport" not in features.inactive(features.resolve({}))
