"""``koordinator``: one executable for every role, the embedded API server and local tooling."""

from __future__ import annotations

import argparse
import logging
import os
import sys

ROLES = ("manager", "scheduler", "koordlet", "descheduler", "device-daemon", "runtime-proxy")


class _Parser(argparse.ArgumentParser):
    """argparse, but a bad flag is one line on stderr and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        raise SystemExit(2)


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {value!r}: not an integer") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {port}: must be 0-65535 (0 picks a free port)")
    return port


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {value!r}: not an integer") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"invalid value {n}: must be positive")
    return n


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
    p.add_argument("--port", type=_port, default=6443, help="port to bind; 0 picks a free one")
    p.add_argument("--token-file", default=None,
                   help="file of accepted bearer tokens, one per line; requests without one get 401; implies "
                        "--tls (clients send tokens over HTTPS only)")
    p.add_argument("--tls", action="store_true", help="serve HTTPS with a self-signed certificate; without --token-file a token is generated "
                        "into DATA_DIR/token")
    p.add_argument("--crd-dir", action="append", default=[], metavar="DIR",
                   help="create/update the CRDs in DIR's YAML files at start (repeatable)")
    p.add_argument("--kubeconfig-out", default=None, metavar="PATH",
                   help="write a kubeconfig for this server to PATH (default: DATA_DIR/kubeconfig)")
    p.add_argument("--watch-history", type=_positive_int, default=50_000, metavar="N",
                   help="events kept for watches that resume from a resourceVersion; older ones get 410 Expired")
    p.add_argument("--pod-deletion", choices=("immediate", "graceful"), default="immediate",
                   help="immediate: pods are removed at once (no kubelet runs here); graceful: bound pods get a "
                        "deletionTimestamp and wait for a delete with grace 0, like a kubelet's")
    p.add_argument("--bookmark-interval", type=float, default=60.0, metavar="SECONDS",
                   help="how often watches that allow bookmarks get one")
    p.add_argument("--log-level", default="warning", choices=("debug", "info", "warning", "error"))


def _run_apiserver(args: argparse.Namespace) -> int:
    from koordinator.apiserver.server import EmbeddedApiServer, ServerConfig

    kubeconfig = args.kubeconfig_out or os.path.join(args.data_dir, "kubeconfig")
    config = ServerConfig(
        data_dir=args.data_dir, host=args.host, port=args.port, token_file=args.token_file, tls=args.tls,
        crd_dirs=args.crd_dir, kubeconfig_out=kubeconfig, history_size=args.watch_history,
        pod_deletion=args.pod_deletion, bookmark_interval=args.bookmark_interval,
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
    parser = _Parser(prog="koordinator", description="Koordinator: QoS-based co-location for Kubernetes.")
    parser.add_argument("--role", choices=ROLES, help="run one Koordinator component")
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)
    _add_apiserver(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    level = getattr(args, "log_level", "warning")
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s")
    if args.command == "apiserver":
        return _run_apiserver(args)
    if args.role:
        sys.stderr.write(f"koordinator: role {args.role!r} is not implemented yet\n")
        return 2
    parser.print_help()
    return 2
