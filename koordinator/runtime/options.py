"""Flags shared by every role, parsed into :class:`RuntimeOptions`.

Flag names follow the Kubernetes components (``--kubeconfig``, ``--feature-gates``,
``--leader-elect-lease-duration 15s`` ...). Per-role defaults:

=================  ==================  ============  ============  =====================  ==========
role               component           metrics-addr  health-addr   lease name             node flags
=================  ==================  ============  ============  =====================  ==========
manager            koord-manager       ``:8080``     ``:8000``     koordinator-manager    no
scheduler          koord-scheduler     ``:10252``    ``:10251``    koord-scheduler        no
descheduler        koord-descheduler   ``:10252``    ``:10251``    koord-descheduler      no
koordlet           koordlet            ``:9316``     ``:9318``     (no leader election)   yes
device-daemon      koord-device-daemon ``:9320``     ``:9321``     (no leader election)   yes
runtime-proxy      koord-runtime-proxy ``:9322``     ``:9323``     (no leader election)   no
=================  ==================  ============  ============  =====================  ==========

The device-daemon and runtime-proxy ports are ours (the Go components serve neither endpoint);
they sit next to koordlet's so that all three node agents fit on one host network. ``0``
disables a server; the same address for both serves ``/metrics`` and the probes on one port.

``--leader-elect`` defaults to false for every role (unlike kube-scheduler): the manifests pass
it explicitly, and ``koordinator local`` runs one replica of each role. Only the cluster roles
(manager, scheduler, descheduler) have the leader-election flags; a node agent runs once per
node, so a lease would make all but one node idle. Only the node roles (koordlet, device-daemon)
have ``--node-name``. The runtime-proxy never talks to the API server (it sits between the kubelet
and the container runtime): it has no ``--kubeconfig``, ``--config``, ``--feature-gates``,
``--kube-api-*`` nor ``--node-name``, and its Runtime has no client.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
import socket
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Generic, TypeVar

ROLES = ("manager", "scheduler", "koordlet", "descheduler", "device-daemon", "runtime-proxy")

COMPONENTS = {
    "manager": "koord-manager",
    "scheduler": "koord-scheduler",
    "koordlet": "koordlet",
    "descheduler": "koord-descheduler",
    "device-daemon": "koord-device-daemon",
    "runtime-proxy": "koord-runtime-proxy",
    # Not a role: ``koordinator controllers``, the workload controllers of a cluster without
    # kube-controller-manager (``koordinator local``). It shares the runtime and its flags.
    "controllers": "koordinator-controllers",
}

# Roles that run once per node: they have --node-name and no leader election.
NODE_ROLES = frozenset({"koordlet", "device-daemon"})
# Roles that never talk to the API server: no client flags, no leader election. (The device daemon only
# writes a file the koordlet reads; its --node-name, accepted as a node role's, only names it in its logs.)
OFFLINE_ROLES = frozenset({"runtime-proxy", "device-daemon"})
# Roles that cannot do anything useful without knowing their node.
NODE_NAME_REQUIRED = frozenset({"koordlet"})

DEFAULT_ADDRS = {  # role -> (metrics_addr, health_addr)
    "manager": (":8080", ":8000"),
    "scheduler": (":10252", ":10251"),
    "descheduler": (":10252", ":10251"),
    "koordlet": (":9316", ":9318"),
    "device-daemon": (":9320", ":9321"),
    "runtime-proxy": (":9322", ":9323"),
    "controllers": (":10257", ":10258"),
}

# role -> (--kube-api-qps, --kube-api-burst) defaults; kube-scheduler's component config defaults to
# 50/100 (one bind and one Event per pod), the other roles to client-go's 20/30-ish budgets.
DEFAULT_API_LIMITS = {"scheduler": (50.0, 100)}


def api_limits(role: str) -> tuple[float, int]:
    """The role's default (--kube-api-qps, --kube-api-burst)."""
    return DEFAULT_API_LIMITS.get(role, (20.0, 30))

LEASE_NAMES = {
    "manager": "koordinator-manager",
    "scheduler": "koord-scheduler",
    "descheduler": "koord-descheduler",
    "controllers": "koordinator-controllers",
}

_DEFAULT_CONFIG_HELP = ("the role's configuration file or mounted ConfigMap directory, hot reloaded "
                        "(default: none, built-in defaults)")
# Roles whose --config is not hot reloaded say so in --help.
CONFIG_HELP = {
    "koordlet": "a koordlet-config document (YAML file) or the mounted koordlet-config ConfigMap directory: "
                "the koordlet's flags in camelCase; flags given on the command line win; read at start, so a "
                "change takes a restart (default: none, the flags alone)",
}

LOG_LEVELS = ("debug", "info", "warning", "error")
DEFAULT_NAMESPACE = "koordinator-system"
# client-go's leaderelection.JitterFactor: renewDeadline must exceed retryPeriod by this factor.
JITTER_FACTOR = 1.2


class OptionsError(ValueError):
    """A flag value, or a combination of flags, is invalid. The message names the flags."""


R = TypeVar("R")


@dataclass
class RuntimeOptions(Generic[R]):
    """Everything the shared flags configure; durations are in seconds.

    ``role_options`` holds the role's own flags (those a role package adds with ``add_flags``) as the
    role's ``Options`` dataclass, one field per argparse ``dest`` (``--sleep-interval`` ->
    ``sleep_interval``), so a role annotates ``RuntimeOptions[ItsOptions]``; None for a role without
    flags of its own. ``explicit`` holds the ``dest`` of every flag given on the command line, the
    role's included (:func:`explicit_dests`), so that a role reading settings from a file as well can
    let the command line win; empty when the options come from no command line.
    """

    role: str
    component: str
    kubeconfig: str | None = None
    config: str | None = None
    feature_gates: dict[str, bool] = field(default_factory=dict)
    metrics_addr: str = ":8080"
    health_addr: str = ":8000"
    leader_elect: bool = False
    leader_elect_namespace: str = DEFAULT_NAMESPACE
    leader_elect_name: str = ""
    leader_elect_identity: str = ""
    leader_elect_lease_duration: float = 15.0
    leader_elect_renew_deadline: float = 10.0
    leader_elect_retry_period: float = 2.0
    log_level: str = "info"
    node_name: str = ""
    kube_api_qps: float = 20.0
    kube_api_burst: int = 30
    graceful_shutdown_timeout: float = 30.0
    role_options: R = None  # type: ignore[assignment]  # None only for a role without flags of its own
    explicit: frozenset[str] = frozenset()

    @classmethod
    def defaults(cls, role: str, **overrides: Any) -> "RuntimeOptions":
        """The options a role gets with no flags (environment variables aside), plus ``overrides``."""
        parser = argparse.ArgumentParser(add_help=False)
        add_shared_flags(parser, role)
        return options_from_args(parser.parse_args([]), role, **overrides)

    def feature_enabled(self, name: str, default: bool = False) -> bool:
        """Whether ``--feature-gates`` turned ``name`` on (``default`` when not mentioned)."""
        return self.feature_gates.get(name, default)

    @property
    def metrics_enabled(self) -> bool:
        return parse_addr(self.metrics_addr) is not None

    @property
    def health_enabled(self) -> bool:
        return parse_addr(self.health_addr) is not None


# -- value parsers (argparse ``type=`` functions: they raise ArgumentTypeError naming the value) ----

_TRUE = {"1", "t", "T", "TRUE", "true", "True"}
_FALSE = {"0", "f", "F", "FALSE", "false", "False"}


def parse_bool(value: str) -> bool:
    """Go's ``strconv.ParseBool``: what pflag accepts in ``--flag=VALUE``."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {value!r} (want true or false)")


_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(value: str) -> float:
    """A Go duration (``15s``, ``1m30s``, ``500ms``, ``1.5h``) or plain seconds (``15``, ``0.5``), in seconds."""
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        pos, seconds = 0, 0.0
        if text in ("", "+", "-"):
            raise argparse.ArgumentTypeError(f"invalid duration {value!r}") from None
        sign = 1.0
        if text[0] in "+-":
            sign = -1.0 if text[0] == "-" else 1.0
            pos = 1
        while pos < len(text):
            m = _DURATION_PART.match(text, pos)
            if m is None:
                raise argparse.ArgumentTypeError(
                    f"invalid duration {value!r} (want e.g. 15s, 1m30s, 500ms or plain seconds)") from None
            seconds += float(m.group(1)) * _DURATION_UNITS[m.group(2)]
            pos = m.end()
        seconds *= sign
    if seconds != seconds or seconds in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}")
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}: must not be negative")
    return seconds


def format_duration(seconds: float) -> str:
    """``15.0`` -> ``15s``, ``90`` -> ``1m30s``, ``0.5`` -> ``500ms`` (for help texts and messages)."""
    if seconds < 1 and seconds != 0:
        return f"{seconds * 1000:g}ms"
    minutes, secs = divmod(seconds, 60)
    if minutes >= 1 and secs == int(secs):
        return f"{int(minutes)}m{int(secs)}s" if secs else f"{int(minutes)}m"
    return f"{seconds:g}s"


def parse_addr(value: str) -> tuple[str, int] | None:
    """``HOST:PORT``, ``:PORT`` (all interfaces), ``[V6]:PORT`` -> ``(host, port)``; ``0`` or ``""`` -> None (disabled).

    Raises ValueError naming the value when it is none of these.
    """
    text = value.strip()
    if text in ("0", ""):
        return None
    if text.startswith("["):
        host, sep, port_text = text[1:].partition("]:")
        if not sep:
            raise ValueError(f"invalid address {value!r} (want HOST:PORT, :PORT, or 0 to disable)")
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ValueError(f"invalid address {value!r}: {host!r} is not an IPv6 address") from None
    else:
        host, sep, port_text = text.rpartition(":")
        if not sep:
            raise ValueError(f"invalid address {value!r} (want HOST:PORT, :PORT, or 0 to disable)")
        if ":" in host:
            raise ValueError(f"invalid address {value!r}: write an IPv6 host in brackets, [{host}]:{port_text}")
        if host and not _valid_host(host):
            raise ValueError(f"invalid address {value!r}: {host!r} is not a host name or IP address")
    if not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ValueError(f"invalid address {value!r}: port {port_text!r} is not a number 0-65535")
    return host, int(port_text)


_HOSTNAME = re.compile(r"^(?=.{1,253}$)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$")


def _valid_host(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return bool(_HOSTNAME.match(host))


def _addr(value: str) -> str:
    try:
        parse_addr(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return value.strip()


def parse_feature_gates(value: str) -> dict[str, bool]:
    """``A=true,B=false`` -> ``{"A": True, "B": False}``; an empty string is no gates."""
    gates: dict[str, bool] = {}
    for entry in value.split(","):
        entry = entry.strip()
        if not entry:
            continue
        name, sep, flag = entry.partition("=")
        name, flag = name.strip(), flag.strip()
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"invalid feature gate {entry!r} (want NAME=true or NAME=false)")
        try:
            gates[name] = parse_bool(flag)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(
                f"invalid feature gate {entry!r}: {flag!r} is not true or false") from None
    return gates


def positive_duration(value: str) -> float:
    """:func:`parse_duration`, refusing zero (an interval or a timeout)."""
    seconds = parse_duration(value)
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}: must be positive")
    return seconds


def _non_negative_float(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {value!r}") from None
    if not n >= 0 or n == float("inf"):
        raise argparse.ArgumentTypeError(f"invalid value {value!r}: must be a finite number >= 0")
    return n


def positive_int(value: str) -> int:
    """argparse type: an integer > 0."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {value!r}: not an integer") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"invalid value {value!r}: must be positive")
    return n


def port(value: str) -> int:
    """argparse type: a TCP port, 0 meaning "pick a free one"."""
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {value!r}: not an integer") from None
    if not 0 <= n <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {n}: must be 0-65535 (0 picks a free port)")
    return n


class _MergeFeatureGates(argparse.Action):
    """Repeated ``--feature-gates`` merge, later entries winning (as pflag's mapStringBool)."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[no-untyped-def]
        merged = dict(getattr(namespace, self.dest, None) or {})
        merged.update(values)
        setattr(namespace, self.dest, merged)


class _FeatureGatesDefault(dict):
    def __str__(self) -> str:  # shown in --help
        return ",".join(f"{k}={str(v).lower()}" for k, v in self.items()) or "none"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows ``(default: ...)`` after a flag's help unless the help already states its default."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or action.required:
            return text
        return super()._get_help_string(action) or ""


def add_bool_flag(parser: argparse.ArgumentParser, flag: str, *, default: bool, help: str,
                  dest: str | None = None) -> None:
    """A Kubernetes-style boolean flag: ``--flag``, ``--flag=true``, ``--flag=false``."""
    parser.add_argument(flag, dest=dest, nargs="?", const=True, default=default, type=parse_bool,
                        metavar="true|false", help=f"{help} (default: {str(default).lower()})")


# -- the flags -------------------------------------------------------------------------------

def add_shared_flags(parser: argparse.ArgumentParser, role: str) -> None:
    """Add the flags every role has to ``parser`` (leader election for cluster roles, --node-name for node roles)."""
    if role not in COMPONENTS:
        raise ValueError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    metrics, health = DEFAULT_ADDRS[role]
    g = parser.add_argument_group("shared flags")
    offline = role in OFFLINE_ROLES
    if not offline:
        g.add_argument("--kubeconfig", default=None, metavar="PATH",
                       help="kubeconfig of the cluster (default: in-cluster, then $KUBECONFIG, then ~/.kube/config)")
        g.add_argument("--config", default=None, metavar="PATH", help=CONFIG_HELP.get(role, _DEFAULT_CONFIG_HELP))
        g.add_argument("--feature-gates", type=parse_feature_gates, action=_MergeFeatureGates,
                       default=_FeatureGatesDefault(), metavar="A=true,B=false",
                       help="feature gates to turn on or off; repeatable (default: %(default)s)")
    g.add_argument("--metrics-addr", type=_addr, default=metrics, metavar="ADDR",
                   help="HOST:PORT or :PORT serving Prometheus /metrics; 0 disables (default: %(default)s)")
    g.add_argument("--health-addr", type=_addr, default=health, metavar="ADDR",
                   help="HOST:PORT or :PORT serving /healthz, /livez and /readyz; 0 disables; the same "
                        "address as --metrics-addr serves both on one port (default: %(default)s)")
    if role not in NODE_ROLES and not offline:
        add_bool_flag(g, "--leader-elect", default=False,
                      help="elect a leader with a coordination.k8s.io/v1 Lease before doing leader-only work")
        g.add_argument("--leader-elect-namespace", default=None, metavar="NS",
                       help="namespace of the Lease (default: $POD_NAMESPACE, else koordinator-system)")
        g.add_argument("--leader-elect-name", default=LEASE_NAMES[role], metavar="NAME",
                       help="name of the Lease (default: %(default)s)")
        g.add_argument("--leader-elect-identity", default="", metavar="ID",
                       help="this replica's holder identity (default: HOSTNAME_<random uuid>)")
        g.add_argument("--leader-elect-lease-duration", type=positive_duration, default=15.0, metavar="DURATION",
                       help="how long a non-leader waits after the last observed renewal before taking the "
                            "lease (default: 15s)")
        g.add_argument("--leader-elect-renew-deadline", type=positive_duration, default=10.0, metavar="DURATION",
                       help="how long the leader keeps trying to renew before giving up leadership (default: 10s)")
        g.add_argument("--leader-elect-retry-period", type=positive_duration, default=2.0, metavar="DURATION",
                       help="interval between attempts to acquire or renew the lease (default: 2s)")
    g.add_argument("--log-level", choices=LOG_LEVELS, default="info", help="log verbosity (default: %(default)s)")
    if role in NODE_ROLES:
        env = os.environ.get("NODE_NAME", "")
        g.add_argument("--node-name", default=None, metavar="NAME",
                       help=f"the Node this agent runs on (default: $NODE_NAME, now {env or 'unset'!s})")
    if not offline:
        qps, burst = api_limits(role)
        g.add_argument("--kube-api-qps", type=_non_negative_float, default=qps, metavar="QPS",
                       help="client-side limit on API requests per second; 0 means unlimited (default: %(default)s)")
        g.add_argument("--kube-api-burst", type=positive_int, default=burst, metavar="N",
                       help="requests allowed above --kube-api-qps in a burst (default: %(default)s)")
    g.add_argument("--graceful-shutdown-timeout", type=parse_duration, default=30.0, metavar="DURATION",
                   help="on SIGTERM/SIGINT, how long to let in-flight work finish before exiting (default: 30s)")


_SHARED_DESTS = frozenset({
    "role", "kubeconfig", "config", "feature_gates", "metrics_addr", "health_addr", "leader_elect",
    "leader_elect_namespace", "leader_elect_name", "leader_elect_identity", "leader_elect_lease_duration",
    "leader_elect_renew_deadline", "leader_elect_retry_period", "log_level", "node_name", "kube_api_qps",
    "kube_api_burst", "graceful_shutdown_timeout", "help",
})


def options_from_argv(parser: argparse.ArgumentParser, argv: Sequence[str], role: str, *,
                      role_type: type[R] | None = None, **overrides: Any) -> RuntimeOptions[R]:
    """Parse a role's ``argv`` (argparse exits on a bad flag) into options that know which flags were given.

    ``role_type``: the role's ``Options`` dataclass, built from the flags that are not shared.
    """
    args = parser.parse_args(argv)
    return options_from_args(args, role, role_type=role_type, explicit=explicit_dests(parser, argv, vars(args)),
                             **overrides)


def explicit_dests(parser: argparse.ArgumentParser, argv: Sequence[str],
                   dests: Iterable[str] | None = None) -> frozenset[str]:
    """The ``dest`` of every flag that ``argv`` gives, as opposed to those left at their defaults.

    argparse keeps no record of this, and comparing with the default cannot tell ``--flag=DEFAULT``
    from no flag at all. So ``argv`` is parsed again into a namespace whose every attribute is
    already None: argparse then fills in no defaults (it does so only for missing attributes) and
    its own actions treat None as "not set yet" (``append``, ``count``, repeated ``--feature-gates``
    merge), so whatever is not None afterwards was given. ``argv`` must be one that ``parser`` has
    already accepted (a bad one exits, as parsing does); no flag of ours parses to None. ``dests``:
    the parser's, when the caller already has them (``vars()`` of its parse of ``argv``).
    """
    if dests is None:
        dests = vars(parser.parse_args(argv))
    probe = argparse.Namespace(**dict.fromkeys(dests))
    parser.parse_args(argv, namespace=probe)
    return frozenset(dest for dest, value in vars(probe).items() if value is not None)


def default_identity() -> str:
    """``hostname_<uuid4>``, client-go's convention for a leader-election holder identity."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def role_options_from(role_type: type[R], values: dict[str, Any]) -> R:
    """The role's ``Options`` dataclass from the values of its flags (by ``dest``).

    A flag without a field is a mistake in the role package, not in the command line: TypeError naming
    the flag. Fields that no flag sets keep their defaults (a field without one: TypeError too).
    """
    names = {f.name for f in fields(role_type) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(values) - names)
    if unknown:
        flags = ", ".join(f"--{dest.replace('_', '-')}" for dest in unknown)
        raise TypeError(f"{role_type.__name__} has no field for the flag(s) {flags}")
    return role_type(**values)


def options_from_args(args: argparse.Namespace, role: str, *, role_type: type[R] | None = None,
                      **overrides: Any) -> RuntimeOptions[R]:
    """Build and cross-check the options from parsed flags; raises :class:`OptionsError` naming the flags.

    With ``role_type`` the flags that are not shared become :attr:`RuntimeOptions.role_options`; without
    it they are left to the caller (``koordinator controllers`` reads its ``--controllers`` from ``args``).
    """
    if role not in COMPONENTS:
        raise OptionsError(f"unknown role {role!r} (one of {', '.join(ROLES)})")
    values = vars(args)
    metrics, health = DEFAULT_ADDRS[role]
    opts = RuntimeOptions(
        role=role,
        component=COMPONENTS[role],
        kubeconfig=values.get("kubeconfig"),
        config=values.get("config"),
        feature_gates=dict(values.get("feature_gates") or {}),
        metrics_addr=values.get("metrics_addr", metrics),
        health_addr=values.get("health_addr", health),
        leader_elect=bool(values.get("leader_elect", False)),
        leader_elect_namespace=(values.get("leader_elect_namespace")
                                or os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE),
        leader_elect_name=values.get("leader_elect_name") or LEASE_NAMES.get(role, COMPONENTS[role]),
        leader_elect_identity=values.get("leader_elect_identity") or default_identity(),
        leader_elect_lease_duration=values.get("leader_elect_lease_duration", 15.0),
        leader_elect_renew_deadline=values.get("leader_elect_renew_deadline", 10.0),
        leader_elect_retry_period=values.get("leader_elect_retry_period", 2.0),
        log_level=values.get("log_level", "info"),
        node_name=(values.get("node_name") or os.environ.get("NODE_NAME", "")) if role in NODE_ROLES else "",
        kube_api_qps=values.get("kube_api_qps", api_limits(role)[0]),
        kube_api_burst=values.get("kube_api_burst", api_limits(role)[1]),
        graceful_shutdown_timeout=values.get("graceful_shutdown_timeout", 30.0),
        role_options=(role_options_from(role_type, {k: v for k, v in values.items() if k not in _SHARED_DESTS})
                      if role_type is not None else None),
    )
    for key, value in overrides.items():
        if not hasattr(opts, key):
            raise OptionsError(f"unknown option {key!r}")
        setattr(opts, key, value)
    validate(opts)
    return opts


def validate(opts: RuntimeOptions) -> None:
    """Cross-flag checks (single values were checked while parsing); raises :class:`OptionsError`."""
    lease, renew, retry = (opts.leader_elect_lease_duration, opts.leader_elect_renew_deadline,
                           opts.leader_elect_retry_period)
    # The same rules as client-go's leaderelection.NewLeaderElector.
    if lease <= renew:
        raise OptionsError(
            f"--leader-elect-lease-duration ({format_duration(lease)}) must be greater than "
            f"--leader-elect-renew-deadline ({format_duration(renew)})")
    if renew <= JITTER_FACTOR * retry:
        raise OptionsError(
            f"--leader-elect-renew-deadline ({format_duration(renew)}) must be greater than "
            f"{JITTER_FACTOR} x --leader-elect-retry-period ({format_duration(retry)})")
    if opts.role in NODE_NAME_REQUIRED and not opts.node_name:
        raise OptionsError(f"--node-name is required for role {opts.role} (or set $NODE_NAME)")
    for flag, value in (("--metrics-addr", opts.metrics_addr), ("--health-addr", opts.health_addr)):
        try:
            parse_addr(value)
        except ValueError as err:
            raise OptionsError(f"{flag}: {err}") from None
