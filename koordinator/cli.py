"""``koordinator``: one executable for every role, the embedded API server and local tooling.

``koordinator --role=ROLE [flags]`` runs one component (see :mod:`koordinator.runtime.options` for
the shared flags; a role package may add its own), ``koordinator apiserver`` the embedded API
server, ``koordinator local`` a whole cluster on this machine (:mod:`koordinator.local`),
``koordinator simulate-nodes`` the simulated nodes it runs (:mod:`koordinator.sim.command`),
``koordinator controllers`` the workload controllers it runs (:mod:`koordinator.controllers`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from types import ModuleType
from typing import Any

from koordinator import __version__
from koordinator.runtime.options import RuntimeOptions, port, positive_int
from koordinator_roles import ROLE_PACKAGES

# The role names; ``koordinator.runtime.options.ROLES`` is the same tuple. cli imports the runtime only
# for the role path, so that ``koordinator apiserver`` starts without loading the client stack.
ROLES = tuple(ROLE_PACKAGES)

log = logging.getLogger("koordinator.cli")

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def _add_apiserver(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "apiserver",
        help="run the embedded, SQLite-backed Kubernetes-compatible API server",
        description="Run the embedded Kubernetes-compatible API server. It stores everything in "
                    "DATA_DIR/state.db (SQLite, WAL); kubectl and any Kubernetes client work against it.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--data-dir", default=os.path.join(os.getcwd(), "koordinator-data"),
                   help="directory for the database (and the generated TLS certificate)")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to bind; anything but loopback requires --token-file")
    p.add_argument("--port", type=port, default=6443, help="port to bind; 0 picks a free one")
    p.add_argument("--token-file", default=None,
                   help="file of accepted bearer tokens, one per line; requests without one get 401; implies "
                        "--tls (clients send tokens over HTTPS only)")
    p.add_argument("--tls", action="store_true", help="serve HTTPS with a self-signed certificate; without --token-file a token is generated "
                        "into DATA_DIR/token")
    p.add_argument("--service-account-issuer", default="https://kubernetes.default.svc", metavar="URL",
                   help="iss of the ServiceAccount tokens the server issues (serviceaccounts/token) and accepts "
                        "(with --token-file); also the audience it accepts and issues tokens for by default")
    p.add_argument("--authorization-mode", default=None, choices=["AlwaysAllow", "RBAC"],
                   help="how requests are authorised: RBAC (Roles, ClusterRoles and their bindings; the default with "
                        "--token-file) or AlwaysAllow (the default without)")
    p.add_argument("--crd-dir", action="append", default=[], metavar="DIR",
                   help="create/update the CRDs in DIR's YAML files at start (repeatable)")
    p.add_argument("--kubeconfig-out", default=None, metavar="PATH",
                   help="write a kubeconfig for this server to PATH (default: DATA_DIR/kubeconfig)")
    p.add_argument("--watch-history", type=positive_int, default=50_000, metavar="N",
                   help="events kept for watches that resume from a resourceVersion; older ones get 410 Expired")
    p.add_argument("--pod-deletion", choices=("immediate", "graceful"), default="immediate",
                   help="immediate: pods are removed at once (no kubelet runs here); graceful: bound pods get a "
                        "deletionTimestamp and wait for a delete with grace 0, like a kubelet's")
    p.add_argument("--bookmark-interval", type=float, default=60.0, metavar="SECONDS",
                   help="how often watches that allow bookmarks get one")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))


def _run_apiserver(args: argparse.Namespace) -> int:
    from koordinator.apiserver.server import DataDirInUse, DataDirLock, inherited_lock_fd

    kubeconfig = args.kubeconfig_out or os.path.join(args.data_dir, "kubeconfig")
    # Two servers on one state.db would each serve their own resourceVersions and watch history.
    try:
        lock = DataDirLock(args.data_dir).acquire(inherited_lock_fd())
    except DataDirInUse as err:
        sys.stderr.write(f"koordinator apiserver: error: {err}\n")
        return 1
    except OSError as err:
        sys.stderr.write(f"koordinator apiserver: error: --data-dir {args.data_dir}: {err}\n")
        return 1
    try:
        return _serve(args, kubeconfig)
    finally:
        lock.release()


def _serve(args: argparse.Namespace, kubeconfig: str) -> int:
    from koordinator.apiserver.server import EmbeddedApiServer, ServerConfig

    config = ServerConfig(
        data_dir=args.data_dir, host=args.host, port=args.port, token_file=args.token_file, tls=args.tls,
        crd_dirs=args.crd_dir, kubeconfig_out=kubeconfig, history_size=args.watch_history,
        pod_deletion=args.pod_deletion, bookmark_interval=args.bookmark_interval,
        service_account_issuer=args.service_account_issuer,
        authorization_mode=args.authorization_mode,
    )
    try:
        server = EmbeddedApiServer(config)
    except (ValueError, OSError) as err:
        sys.stderr.write(f"koordinator apiserver: error: {err}\n")
        return 2

    def ready(url: str) -> None:
        print(f"koordinator apiserver serving at {url}", flush=True)
        print(f"kubeconfig: {kubeconfig}  (export KUBECONFIG={kubeconfig})", flush=True)

    try:
        server.run(on_ready=ready)
    except OSError as err:
        sys.stderr.write(f"koordinator apiserver: error: cannot listen on {args.host}:{args.port}: {err}\n")
        return 1
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="koordinator", description="Koordinator: QoS-based co-location for Kubernetes.",
                     epilog="`koordinator --role=ROLE --help` lists the flags of a role.")
    parser.add_argument("--role", choices=ROLES, help="run one Koordinator component")
    parser.add_argument("--version", action="version", version=f"koordinator {__version__}")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add_apiserver(sub)
    from koordinator import local
    from koordinator.controllers import command as controllers
    from koordinator.sim import command as simulate_nodes

    local.add_parser(sub)
    from koordinator import explain

    explain.add_parser(sub)
    simulate_nodes.add_parser(sub)
    controllers.add_parser(sub)
    from koordinator.console import command as console

    console.add_parser(sub)
    return parser


# -- koordinator --role=ROLE ---------------------------------------------------------------------

def _role_from_argv(argv: list[str]) -> str | None:
    """The ``--role`` value anywhere in ``argv`` (exit 2 naming the value if it is not a role)."""
    pre = _Parser(prog="koordinator", add_help=False, allow_abbrev=False)
    pre.add_argument("--role", choices=ROLES)
    known, _ = pre.parse_known_args(argv)
    return known.role


def build_role_parser(role: str, module: ModuleType | None = None) -> argparse.ArgumentParser:
    """The parser of ``koordinator --role=ROLE``: shared flags plus the role package's ``add_flags``."""
    from koordinator.runtime.options import COMPONENTS, HelpFormatter, add_shared_flags

    parser = _Parser(prog="koordinator", usage=f"koordinator --role={role} [flags]", allow_abbrev=False,
                     description=f"Run {COMPONENTS[role]}.", formatter_class=HelpFormatter)
    parser.add_argument("--role", choices=ROLES, required=True, help=f"the component to run (here: {role}; required)")
    add_shared_flags(parser, role)
    add_flags = getattr(module, "add_flags", None) if module is not None else None
    if add_flags is not None:
        add_flags(parser.add_argument_group(f"{role} flags"))
    return parser


def parse_role_options(role: str, argv: list[str], module: ModuleType | None = None, *,
                       parser: argparse.ArgumentParser | None = None) -> RuntimeOptions[Any]:
    """``koordinator --role=ROLE ...`` parsed as :func:`run_role` parses it, before ``check_options``.

    The :class:`~koordinator.runtime.options.RuntimeOptions` of the shared flags, with the role's own
    flags as its ``Options`` in ``role_options`` (see :mod:`roles`). argparse exits on a bad flag; a bad
    combination raises :class:`~koordinator.runtime.options.OptionsError`.
    """
    from koordinator.runtime.options import options_from_argv

    role_type = getattr(module, "Options", None) if module is not None else None
    if role_type is None and getattr(module, "add_flags", None) is not None:
        # Its flags would be parsed and then reach nothing: a mistake in the role package.
        raise TypeError(f"role {role}: add_flags without an Options dataclass to hold the flags")
    return options_from_argv(parser or build_role_parser(role, module), argv, role, role_type=role_type)


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (debug|info|warning|error), one line per record."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT, stream=sys.stderr, force=True)
    if level != "debug":
        # The HTTP stack logs every retry and pool event at info/warning; our client reports what matters.
        logging.getLogger("urllib3").setLevel(logging.ERROR)


def _make_runtime(options: Any) -> Any:
    """The Runtime for ``options`` (a seam for tests of the dispatch); the role owns this process."""
    from koordinator.runtime.runtime import Runtime

    return Runtime(options, freeze_after_sync=True)


def run_role(role: str, argv: list[str]) -> int:
    """Parse the role's flags, then register the role on a Runtime and run it until SIGTERM/SIGINT."""
    import koordinator_roles as roles
    from koordinator.runtime.options import OptionsError

    module = roles.load(role)
    parser = build_role_parser(role, module)
    try:
        options = parse_role_options(role, argv, module, parser=parser)
        check = getattr(module, "check_options", None)
        if check is not None:
            check(options)
    except (OptionsError, ValueError) as err:
        parser.error(str(err))
    configure_logging(options.log_level)
    if module is None:
        sys.stderr.write(f"koordinator: role {role!r} is not implemented in this build yet\n")
        return 1
    try:
        runtime = _make_runtime(options)
    except Exception as err:  # no kubeconfig, unreadable config: one line, not a traceback
        log.debug("building the runtime failed", exc_info=True)
        sys.stderr.write(f"koordinator: error: {options.component}: {err}\n")
        return 1
    try:
        module.register(runtime, options)
    except Exception:
        log.exception("role %s failed to register", role)
        stop = getattr(runtime, "stop", None)
        if stop is not None:
            stop(options.graceful_shutdown_timeout)
        return 1
    from koordinator.runtime.configsource import ConfigError

    try:
        return int(runtime.run())
    except (OSError, ConfigError) as err:  # a port in use, an invalid --config: one line naming it
        log.debug("runtime failed", exc_info=True)
        sys.stderr.write(f"koordinator: error: {options.component}: {err}\n")
        return 1


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    role = _role_from_argv(argv)
    if role is not None:
        return run_role(role, argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    level = getattr(args, "log_level", "warning")
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)
    if args.command == "apiserver":
        return _run_apiserver(args)
    if args.command == "local":
        from koordinator import local

        return local.run(args)
    if args.command == "explain":
        from koordinator import explain

        return explain.run(args)
    if args.command == "simulate-nodes":
        from koordinator.sim import command as simulate_nodes

        return simulate_nodes.run(args)
    if args.command == "controllers":
        from koordinator.controllers import command as controllers

        configure_logging(args.log_level)
        return controllers.run(args)
    if args.command == "console":
        from koordinator.console import command as console

        return console.run(args)
    parser.print_help()
    return 2
