"""`koordinator --role=R`: flags, help, errors, role dispatch; the shared options; the probe server."""

from __future__ import annotations

import argparse
import http.client
import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter

import koordinator_roles as roles
from koordinator import cli
from koordinator.runtime import options as opts
from koordinator.runtime.options import (
    RuntimeOptions,
    add_shared_flags,
    options_from_args,
    parse_addr,
    parse_duration,
    parse_feature_gates,
)
from koordinator.runtime.servers import ProbeServer, probe, run_checks
from tests.waiting import wait_until

REPO = Path(__file__).resolve().parent.parent
ALL_ROLES = list(roles.ROLE_PACKAGES)


@pytest.fixture(autouse=True)
def _keep_logging():
    """cli.main configures the root logger; give it back as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.setenv("NODE_NAME", "node-a")
    monkeypatch.delenv("POD_NAMESPACE", raising=False)


def run_main(argv: list[str], capsys) -> tuple[int, str, str]:
    try:
        code = cli.main(argv)
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


def parse(role: str, *argv: str) -> RuntimeOptions:
    parser = cli.build_role_parser(role)
    return options_from_args(parser.parse_args([f"--role={role}", *argv]), role)


# -- help ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("role", ALL_ROLES)
def test_every_role_help_lists_every_flag_with_its_default(role, capsys):
    code, out, err = run_main([f"--role={role}", "--help"], capsys)
    assert code == 0, err
    parser = cli.build_role_parser(role, roles.load(role))
    flags = [a for a in parser._actions if a.option_strings and a.dest not in ("help", "role")]
    assert len(flags) >= 10
    formatter = parser._get_formatter()
    for action in flags:
        assert action.option_strings[-1] in out
        shown = formatter._get_help_string(action) % {"default": action.default, "prog": "koordinator"}
        assert "default" in shown, f"{action.option_strings[-1]}: help shows no default"
    metrics, health = opts.DEFAULT_ADDRS[role]
    assert f"(default: {metrics})" in out and f"(default: {health})" in out
    if role in opts.NODE_ROLES:
        assert "--node-name" in out and "--leader-elect" not in out
    elif role in opts.OFFLINE_ROLES:
        assert not {"--node-name", "--leader-elect", "--kubeconfig", "--kube-api-qps"} & set(out.split())
    else:
        assert "--leader-elect-lease-duration" in out and "--node-name" not in out
        assert opts.LEASE_NAMES[role] in out


def test_help_of_the_real_binary(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "koordinator", "--role=manager", "--help"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "--leader-elect-lease-duration" in proc.stdout and "(default: 15s)" in proc.stdout
    assert "(default: :8080)" in proc.stdout


def test_top_level_help_names_roles_and_subcommands(capsys):
    code, out, _ = run_main(["--help"], capsys)
    assert code == 0
    for word in ("apiserver", "local", "descheduler", "--role=ROLE --help"):
        assert word in out


def test_version(capsys):
    from koordinator import __version__

    code, out, _ = run_main(["--version"], capsys)
    assert code == 0 and out == f"koordinator {__version__}\n"


def test_controllers_subcommand_selects_like_kube_controller_manager(capsys):
    from koordinator import controllers

    assert controllers.select(["*"]) == list(controllers.CONTROLLERS)
    assert controllers.select(["*", "-job"]) == [n for n in controllers.CONTROLLERS if n != "job"]
    assert controllers.select(["deployment", "replicaset"]) == ["replicaset", "deployment"]
    args = cli.build_parser().parse_args(["controllers", "--controllers=*,-garbagecollector", "--metrics-addr=0"])
    assert controllers.select(args.controllers)[-1] == "statefulset"
    code, out, err = run_main(["controllers", "--controllers=*,-jobs"], capsys)
    assert code == 2 and out == ""
    assert err == ("koordinator controllers: error: argument --controllers: unknown controller 'jobs' (known: "
                   f"{', '.join(controllers.CONTROLLERS)})\n")


# -- bad flags: one line, exit 2 ---------------------------------------------------------------

@pytest.mark.parametrize("argv, needles", [
    (["--role=foo"], ["--role", "'foo'"]),
    (["--role"], ["--role", "expected one argument"]),
    (["--role=manager", "--leader-elect=maybe"], ["--leader-elect", "'maybe'"]),
    (["--role=scheduler", "--feature-gates=Foo"], ["--feature-gates", "'Foo'"]),
    (["--role=manager", "--feature-gates=A=yes"], ["--feature-gates", "'A=yes'"]),
    (["--role=manager", "--metrics-addr=nonsense"], ["--metrics-addr", "'nonsense'"]),
    (["--role=manager", "--health-addr=:99999"], ["--health-addr", "':99999'"]),
    (["--role=manager", "--health-addr=no host:80"], ["--health-addr", "'no host:80'"]),
    (["--role=manager", "--leader-elect-lease-duration=5s"],
     ["--leader-elect-lease-duration (5s)", "--leader-elect-renew-deadline (10s)"]),
    (["--role=descheduler", "--leader-elect-retry-period=9s"],
     ["--leader-elect-renew-deadline (10s)", "--leader-elect-retry-period (9s)"]),
    (["--role=manager", "--leader-elect-lease-duration=soon"], ["--leader-elect-lease-duration", "'soon'"]),
    (["--role=manager", "--leader-elect-renew-deadline=0s"], ["--leader-elect-renew-deadline", "'0s'"]),
    (["--role=manager", "--graceful-shutdown-timeout=-1s"], ["--graceful-shutdown-timeout", "'-1s'"]),
    (["--role=manager", "--kube-api-qps=fast"], ["--kube-api-qps", "'fast'"]),
    (["--role=manager", "--kube-api-burst=0"], ["--kube-api-burst", "'0'"]),
    (["--role=manager", "--log-level=loud"], ["--log-level", "'loud'"]),
    (["--role=manager", "--bogus"], ["unrecognized arguments: --bogus"]),
    (["--role=manager", "--leader-elect-n=x"], ["unrecognized arguments: --leader-elect-n=x"]),  # no abbreviations
    (["--role=koordlet", "--leader-elect"], ["unrecognized arguments: --leader-elect"]),
    (["--role=manager", "--node-name=n1"], ["unrecognized arguments: --node-name=n1"]),
])
def test_bad_flags_are_one_line_and_exit_2(argv, needles, capsys):
    code, out, err = run_main(argv, capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("koordinator: error: "), err
    for needle in needles:
        assert needle in err


def test_node_role_without_node_name(monkeypatch, capsys):
    monkeypatch.delenv("NODE_NAME")
    code, _, err = run_main(["--role=koordlet"], capsys)
    assert code == 2
    assert err == "koordinator: error: --node-name is required for role koordlet (or set $NODE_NAME)\n"


def test_bad_flag_from_the_real_binary(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "koordinator", "--role=manager", "--leader-elect=maybe"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr == ("koordinator: error: argument --leader-elect: invalid boolean value 'maybe' "
                           "(want true or false)\n")


# -- roles not in this build --------------------------------------------------------------------

@pytest.mark.parametrize("role", [r for r in ALL_ROLES if not roles.is_implemented(r)])
def test_role_not_implemented_exits_1_with_one_line(role, capsys):
    code, out, err = run_main([f"--role={role}"], capsys)
    assert code == 1
    assert err == f"koordinator: role {role!r} is not implemented in this build yet\n"


def test_not_implemented_from_the_real_binary_connects_nowhere(tmp_path):
    missing = next((r for r in ALL_ROLES if not roles.is_implemented(r)), None)
    if missing is None:
        pytest.skip("every role is implemented")
    # A kubeconfig pointing at nothing: the role must fail before any connection attempt.
    env = {**os.environ, "NODE_NAME": "node-a"}  # a node role needs its node before anything else
    proc = subprocess.run([sys.executable, "-m", "koordinator", f"--role={missing}",
                           "--kubeconfig", str(tmp_path / "missing")],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert proc.returncode == 1
    assert proc.stderr == f"koordinator: role {missing!r} is not implemented in this build yet\n"


def test_roles_helpers():
    assert list(roles.ROLE_PACKAGES) == list(opts.ROLES) == list(cli.ROLES)
    assert set(opts.COMPONENTS) == {*opts.ROLES, "controllers"}  # controllers: a subcommand, not a role
    assert roles.implemented_roles() == [r for r in ALL_ROLES if roles.is_implemented(r)]
    with pytest.raises(ValueError, match="'nope'"):
        roles.load("nope")


# -- dispatch to a role package -------------------------------------------------------------------

FAKE_ROLE = '''
"""A stand-in role for the CLI tests."""
from dataclasses import dataclass

CALLS = []


@dataclass
class Options:
    greeting: str


def add_flags(parser):
    parser.add_argument("--greeting", default="hello", help="what the fake role says")


def register(runtime, options):
    CALLS.append((runtime, options))
'''


@pytest.fixture
def fake_role(tmp_path, monkeypatch):
    """A `koordinator_roles.descheduler` package of the test's own, found before the real one
    (roles.__path__ gets the temp dir first)."""
    pkg = tmp_path / "fake_roles" / "descheduler"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(FAKE_ROLE)
    monkeypatch.setattr(roles, "__path__", [str(tmp_path / "fake_roles"), *roles.__path__])
    monkeypatch.delitem(sys.modules, "koordinator_roles.descheduler", raising=False)
    # Importing the fake also binds it as the package's attribute: undone too, or a later test of this worker
    # doing `import koordinator_roles.descheduler as d` would get the fake.
    monkeypatch.delattr(roles, "descheduler", raising=False)
    yield
    sys.modules.pop("koordinator_roles.descheduler", None)


class FakeRuntime:
    def __init__(self, options):
        self.options = options
        self.ran = False
        self.stopped = None

    def run(self):
        self.ran = True
        return 7

    def stop(self, timeout=None):
        self.stopped = timeout


def test_implemented_role_is_registered_and_run(fake_role, monkeypatch, capsys):
    assert roles.is_implemented("descheduler") and "descheduler" in roles.implemented_roles()
    monkeypatch.setattr(cli, "_make_runtime", FakeRuntime)
    code, _, err = run_main(["--role=descheduler", "--greeting=hi", "--feature-gates=A=true,B=false",
                             "--feature-gates", "B=true", "--leader-elect", "--metrics-addr=0"], capsys)
    assert code == 7, err
    module = sys.modules["koordinator_roles.descheduler"]
    ((runtime, options),) = module.CALLS
    assert runtime.ran and runtime.options is options
    assert options.role_options == module.Options(greeting="hi")
    assert options.feature_gates == {"A": True, "B": True}
    assert options.leader_elect is True and options.metrics_addr == "0" and not options.metrics_enabled
    assert options.explicit == {"role", "greeting", "feature_gates", "leader_elect", "metrics_addr"}


def test_role_flags_appear_in_help_with_defaults(fake_role, capsys):
    code, out, _ = run_main(["--role=descheduler", "--help"], capsys)
    assert code == 0
    assert "descheduler flags:" in out and "--greeting" in out and "(default: hello)" in out


def test_register_failure_exits_1_and_stops_the_runtime(fake_role, monkeypatch, capsys):
    made = []

    def make(options):
        made.append(FakeRuntime(options))
        return made[-1]

    monkeypatch.setattr(cli, "_make_runtime", make)
    import koordinator_roles.descheduler as module

    def broken(runtime, options):
        raise RuntimeError("cannot register")

    monkeypatch.setattr(module, "register", broken)
    code, _, err = run_main(["--role=descheduler"], capsys)
    assert code == 1
    assert made[0].stopped == 30.0 and not made[0].ran


def test_runtime_that_cannot_be_built_is_one_line(fake_role, monkeypatch, capsys):
    def make(options):
        raise ValueError("--kubeconfig /nowhere: no such file")

    monkeypatch.setattr(cli, "_make_runtime", make)
    code, _, err = run_main(["--role=descheduler"], capsys)
    assert code == 1
    assert err == "koordinator: error: koord-descheduler: --kubeconfig /nowhere: no such file\n"


def test_role_flags_and_options_fields_must_match(fake_role, monkeypatch):
    """A role's flags reach register only through its Options: a flag with nowhere to go is the role's mistake."""
    import koordinator_roles.descheduler as module

    @dataclass
    class TooFew:
        pass

    monkeypatch.setattr(module, "Options", TooFew)
    with pytest.raises(TypeError, match="TooFew has no field for the flag.s. --greeting"):
        cli.parse_role_options("descheduler", ["--role=descheduler"], module)
    monkeypatch.delattr(module, "Options")
    with pytest.raises(TypeError, match="role descheduler: add_flags without an Options dataclass"):
        cli.parse_role_options("descheduler", ["--role=descheduler"], module)


WRAPPER = textwrap.dedent('''
    import sys
    import koordinator_roles as roles
    roles.__path__.insert(0, sys.argv.pop(1))  # the fake role package before the real one
    from koordinator.cli import main
    sys.exit(main(sys.argv[1:]))
''')

REAL_ROLE = '''
import os, threading
from dataclasses import dataclass

@dataclass
class Options:
    marker: str

def add_flags(parser):
    parser.add_argument("--marker", required=True, help="file written once the runnable runs")

def register(runtime, options):
    gate = threading.Event()
    runtime.add_ready_check("fake-work", lambda: None if gate.is_set() else "not started")

    def work(stop):
        with open(options.role_options.marker, "w") as f:
            f.write(options.component)
        gate.set()
        stop.wait()

    runtime.add_runnable("fake-work", work)
'''


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_role_runs_on_the_real_runtime_and_stops_on_sigterm(apiserver, tmp_path):
    """The whole path: flags -> options -> Runtime -> register -> probes -> SIGTERM -> exit 0."""
    pytest.importorskip("koordinator.runtime.runtime")
    pkg = tmp_path / "fake_roles" / "descheduler"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(REAL_ROLE)
    marker = tmp_path / "marker"
    health, metrics = f"127.0.0.1:{_free_port()}", f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRAPPER, str(tmp_path / "fake_roles"), "--role=descheduler",
         "--kubeconfig", str(apiserver.kubeconfig), "--health-addr", health, "--metrics-addr", metrics,
         "--marker", str(marker), "--graceful-shutdown-timeout=10s", "--log-level=debug"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def ready():
            try:
                return probe(health, "/readyz", timeout=2)[0] == 200
            except OSError:
                return proc.poll() is not None  # stop waiting if it died

        assert wait_until(ready, 60), "role never became ready"
        assert proc.poll() is None, proc.communicate()[1]
        assert marker.read_text() == "koord-descheduler"
        status, body = probe(metrics, "/metrics")
        assert status == 200 and "rest_client_requests_total" in body
        status, body = probe(health, "/healthz?verbose")
        assert status == 200 and "[+]ping ok" in body
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, proc.communicate()[1]
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()


# -- options ----------------------------------------------------------------------------------------

def test_defaults_per_role(monkeypatch):
    m = parse("manager")
    assert (m.component, m.metrics_addr, m.health_addr) == ("koord-manager", ":8080", ":8000")
    assert m.leader_elect is False and m.leader_elect_name == "koordinator-manager"
    assert m.leader_elect_namespace == "koordinator-system"
    assert (m.leader_elect_lease_duration, m.leader_elect_renew_deadline, m.leader_elect_retry_period) == (15, 10, 2)
    assert m.leader_elect_identity.startswith(socket.gethostname() + "_")
    assert (m.kube_api_qps, m.kube_api_burst, m.graceful_shutdown_timeout, m.log_level) == (20.0, 30, 30.0, "info")
    assert m.kubeconfig is None and m.config is None and m.feature_gates == {} and m.node_name == ""
    s = parse("scheduler")
    assert (s.metrics_addr, s.health_addr, s.leader_elect_name) == (":10252", ":10251", "koord-scheduler")
    d = parse("descheduler")
    assert (d.metrics_addr, d.health_addr, d.leader_elect_name) == (":10252", ":10251", "koord-descheduler")
    k = parse("koordlet")
    assert (k.component, k.metrics_addr, k.health_addr, k.node_name) == ("koordlet", ":9316", ":9318", "node-a")
    assert k.leader_elect is False
    addrs = {parse(r).metrics_addr for r in ("koordlet", "device-daemon", "runtime-proxy")} | {
        parse(r).health_addr for r in ("koordlet", "device-daemon", "runtime-proxy")}
    assert len(addrs) == 6, "the node agents share a host network: their ports must differ"
    monkeypatch.setenv("POD_NAMESPACE", "kube-koord")
    assert parse("manager").leader_elect_namespace == "kube-koord"
    assert parse("manager", "--leader-elect-namespace=other").leader_elect_namespace == "other"
    assert parse("koordlet", "--node-name=n9").node_name == "n9"
    proxy = parse("runtime-proxy")
    assert proxy.node_name == "" and proxy.kubeconfig is None and proxy.leader_elect is False
    assert RuntimeOptions.defaults("manager", metrics_addr="0").metrics_addr == "0"


def test_flag_values():
    o = parse("scheduler", "--leader-elect", "--leader-elect-lease-duration=1m30s",
              "--leader-elect-renew-deadline", "500ms", "--leader-elect-retry-period=0.1",
              "--kubeconfig=/k", "--config", "/etc/c", "--log-level=debug", "--kube-api-qps=0",
              "--kube-api-burst=5", "--graceful-shutdown-timeout=2m", "--leader-elect-identity=me",
              "--metrics-addr=[::1]:0", "--health-addr=localhost:9000")
    assert o.leader_elect is True
    assert (o.leader_elect_lease_duration, o.leader_elect_renew_deadline, o.leader_elect_retry_period) == (90, 0.5, 0.1)
    assert (o.kubeconfig, o.config, o.log_level, o.kube_api_qps, o.kube_api_burst) == ("/k", "/etc/c", "debug", 0, 5)
    assert (o.graceful_shutdown_timeout, o.leader_elect_identity) == (120, "me")
    assert (o.metrics_addr, o.health_addr) == ("[::1]:0", "localhost:9000")


@pytest.mark.parametrize("argv, expected", [
    ([], False), (["--leader-elect"], True), (["--leader-elect=true"], True), (["--leader-elect=false"], False),
    (["--leader-elect=1"], True), (["--leader-elect=F"], False), (["--leader-elect", "--leader-elect=false"], False),
])
def test_boolean_flag_forms(argv, expected):
    assert parse("manager", *argv).leader_elect is expected


def test_feature_gates():
    assert parse_feature_gates("") == {}
    assert parse_feature_gates("A=true, B=false,C=1") == {"A": True, "B": False, "C": True}
    for bad in ("Foo", "=true", "A=maybe", "A=true,B"):
        with pytest.raises(argparse.ArgumentTypeError):
            parse_feature_gates(bad)
    o = parse("manager", "--feature-gates=A=true", "--feature-gates=A=false,B=true")
    assert o.feature_gates == {"A": False, "B": True}
    assert o.feature_enabled("B") and not o.feature_enabled("A") and o.feature_enabled("C", True)


def test_explicit_dests_tells_given_flags_from_defaults():
    parser = cli.build_role_parser("manager")
    parser.add_argument("--tag", action="append", default=["base"])
    parser.add_argument("-v", action="count", default=0)
    # --log-level=info and --leader-elect=false are the defaults: given, they count as given.
    argv = ["--role=manager", "--log-level=info", "--leader-elect=false", "--tag", "a", "-vv",
            "--feature-gates=A=true", "--feature-gates=B=false", "--kube-api-qps", "5"]
    assert opts.explicit_dests(parser, argv) == {"role", "log_level", "leader_elect", "tag", "v", "feature_gates",
                                                 "kube_api_qps"}
    assert opts.explicit_dests(parser, ["--role=manager"]) == {"role"}
    # The probe does not disturb what the real parse gives.
    args = parser.parse_args(argv)
    assert (args.tag, args.v, args.feature_gates) == (["base", "a"], 2, {"A": True, "B": False})


@pytest.mark.parametrize("text, seconds", [
    ("15s", 15), ("1m30s", 90), ("500ms", 0.5), ("1.5h", 5400), ("2", 2), ("0.25", 0.25), ("0", 0),
    ("1h2m3s4ms", 3723.004), ("100us", 1e-4), ("+3s", 3),
])
def test_durations(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "s", "15x", "1m30", "fast", "-1s", "nan", "inf", "1.2.3s"])
def test_bad_durations(text):
    with pytest.raises(argparse.ArgumentTypeError, match="duration"):
        parse_duration(text)


@pytest.mark.parametrize("text, parsed", [
    (":8080", ("", 8080)), ("127.0.0.1:0", ("127.0.0.1", 0)), ("0", None), ("", None),
    ("[::]:9316", ("::", 9316)), ("my-host.example:80", ("my-host.example", 80)),
])
def test_addresses(text, parsed):
    assert parse_addr(text) == parsed


@pytest.mark.parametrize("text", ["8080", "nonsense", ":http", ":65536", "::1:80", "[::1]", "[x]:80", "a_b:80"])
def test_bad_addresses(text):
    with pytest.raises(ValueError, match="invalid address"):
        parse_addr(text)


def test_options_for_an_unknown_role():
    with pytest.raises(ValueError, match="'nope'"):
        add_shared_flags(argparse.ArgumentParser(), "nope")
    with pytest.raises(opts.OptionsError, match="'nope'"):
        options_from_args(argparse.Namespace(), "nope")


# -- the probe server ---------------------------------------------------------------------------------

def get(server: ProbeServer, path: str, method: str = "GET", headers=None) -> tuple[int, str, dict]:
    host, port = server.address
    conn = http.client.HTTPConnection("127.0.0.1" if host in ("", "0.0.0.0") else host, port, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read().decode(), {k.lower(): v for k, v in resp.getheaders()}
    finally:
        conn.close()


@pytest.fixture
def registry():
    reg = CollectorRegistry()
    Counter("koordinator_test_things", "things counted", ["kind"], registry=reg).labels("a").inc(3)
    return reg


def test_probe_server_serves_metrics_and_probes_on_one_port(registry):
    state = {"db": None}
    server = ProbeServer("127.0.0.1:0", registry=registry, health_checks={"ping": lambda: None},
                         ready_checks={"db": lambda: state["db"]})
    server.start()
    try:
        host, port = server.address
        assert host == "127.0.0.1" and port > 0
        status, body, headers = get(server, "/metrics")
        assert status == 200 and 'koordinator_test_things_total{kind="a"} 3.0' in body
        assert headers["content-type"].startswith("text/plain")
        status, body, headers = get(server, "/metrics", headers={"Accept": "application/openmetrics-text"})
        assert status == 200 and headers["content-type"].startswith("application/openmetrics-text")
        for path in ("/healthz", "/livez", "/readyz", "/readyz/"):
            assert get(server, path)[:2] == (200, "ok")
        state["db"] = "connection refused"
        status, body, _ = get(server, "/readyz")
        assert status == 500
        assert body == "[-]db failed: connection refused\n[+]ping ok\nreadyz check failed\n"
        assert get(server, "/healthz")[:2] == (200, "ok")  # readiness checks do not affect liveness
        assert get(server, "/readyz?exclude=db")[0] == 200
        assert get(server, "/readyz/db")[:2] == (500, "internal server error: connection refused\n")
        assert get(server, "/readyz/ping")[:2] == (200, "ok")
        assert get(server, "/readyz/nope")[0] == 404
        state["db"] = None
        status, body, _ = get(server, "/readyz?verbose")
        assert (status, body) == (200, "[+]db ok\n[+]ping ok\nreadyz check passed\n")
        server.add_health_check("broken", lambda: 1 / 0)
        status, body, _ = get(server, "/livez")
        assert status == 500 and "[-]broken failed: ZeroDivisionError: division by zero" in body
        status, body, headers = get(server, "/healthz", method="HEAD")
        assert status == 500 and body == "" and int(headers["content-length"]) > 0
        assert get(server, "/nothing")[0] == 404
        assert probe(server.url, "/readyz") == (500, get(server, "/readyz")[1])
    finally:
        server.stop(5)


def test_probe_server_roles(registry):
    metrics_only = ProbeServer("127.0.0.1:0", registry=registry)
    probes_only = ProbeServer("127.0.0.1:0", health_checks={}, ready_checks={})
    metrics_only.start()
    probes_only.start()
    try:
        assert get(metrics_only, "/metrics")[0] == 200
        assert get(metrics_only, "/healthz")[0] == 404
        assert get(probes_only, "/healthz")[:2] == (200, "ok")
        assert get(probes_only, "/readyz?verbose")[:2] == (200, "readyz check passed\n")
        assert get(probes_only, "/metrics")[0] == 404
    finally:
        metrics_only.stop(5)
        probes_only.stop(5)


def test_probe_server_binds_all_interfaces_and_releases_its_port():
    server = ProbeServer(":0", health_checks={})
    server.start()
    host, port = server.address
    assert host == "0.0.0.0" and server.url == f"http://127.0.0.1:{port}"
    assert get(server, "/healthz")[0] == 200
    other = ProbeServer(f"127.0.0.1:{port}", health_checks={})
    with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{port}"):
        other.start()
    server.stop(5)
    with pytest.raises(RuntimeError):
        server.address
    with pytest.raises(OSError):
        probe(f"127.0.0.1:{port}", "/healthz", timeout=2)
    again = ProbeServer(f"127.0.0.1:{port}", health_checks={})
    again.start()  # the port is free again at once
    try:
        assert get(again, "/healthz")[0] == 200
    finally:
        again.stop(5)
    server.stop(5)  # a second stop is harmless


def test_probe_server_stop_returns_promptly_with_a_slow_request_in_flight():
    import threading

    release, entered = threading.Event(), threading.Event()

    def slow():
        entered.set()
        return None if release.wait(30) else "x"

    server = ProbeServer("127.0.0.1:0", health_checks={"slow": slow})
    server.start()
    url = server.url
    t = threading.Thread(target=lambda: probe(url, "/healthz", timeout=30), daemon=True)
    t.start()
    assert entered.wait(10)
    started = time.monotonic()
    server.stop(5)
    assert time.monotonic() - started < 5
    release.set()
    t.join(10)


def test_probe_server_rejects_a_disabled_address():
    with pytest.raises(ValueError, match="disabled"):
        ProbeServer("0")
    with pytest.raises(ValueError, match="invalid address"):
        ProbeServer("nonsense")


def test_run_checks_formats_like_kubernetes():
    assert run_checks("healthz", {}) == (200, "ok")
    assert run_checks("healthz", {"a": lambda: "", "b": lambda: None}, verbose=True) == (
        200, "[+]a ok\n[+]b ok\nhealthz check passed\n")
    assert run_checks("livez", {"a": lambda: "down"}, exclude=["a"], verbose=True) == (
        200, "[+]a excluded: ok\nlivez check passed\n")


def test_cli_module_does_not_load_the_runtime_for_apiserver(tmp_path):
    """`koordinator apiserver` must not pay for importing the client stack."""
    code = ("import sys; from koordinator import cli; cli.build_parser(); "
            "print(sorted(m for m in sys.modules if m.startswith(('koordinator.runtime.client', "
            "'koordinator.runtime.runtime', 'kubernetes'))))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
