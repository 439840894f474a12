"""``koordinator controllers``: the workload controllers on the shared runtime, until SIGTERM/SIGINT.

It takes the flags every role has (``--kubeconfig``, ``--metrics-addr``, ``--health-addr``,
``--leader-elect`` with the Lease ``koordinator-controllers`` ...) plus kube-controller-manager's
``--controllers``. Imports nothing heavy until it runs: the top-level parser is built for every
``koordinator`` subcommand.
"""

from __future__ import annotations

import argparse
import logging
import sys

log = logging.getLogger("koordinator.controllers")

COMPONENT = "controllers"


def _controller_list(value: str) -> list[str]:
    from koordinator.controllers import select

    entries = value.split(",")
    try:
        select(entries)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--controllers: ")) from None
    return entries


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``controllers`` subcommand to the ``koordinator`` parser."""
    from koordinator.controllers import CONTROLLERS
    from koordinator.runtime.options import HelpFormatter, add_shared_flags

    p = sub.add_parser(
        "controllers",
        help="run the workload controllers (Deployment, ReplicaSet, Job, DaemonSet, StatefulSet, garbage "
             "collector, ClusterRole aggregation) against a cluster that has no kube-controller-manager",
        description="Run the workload controllers a cluster without kube-controller-manager lacks: "
                    f"{', '.join(CONTROLLERS)}. `koordinator local` runs them; on a real cluster "
                    "kube-controller-manager does this work.",
        formatter_class=HelpFormatter,
    )
    add_shared_flags(p, COMPONENT)
    p.add_argument("--controllers", type=_controller_list, default=["*"], metavar="LIST",
                   help="controllers to run, as kube-controller-manager's flag: '*' all, 'foo' enables foo, "
                        "'-foo' disables foo (e.g. '*,-job')")
    return p


def run(args: argparse.Namespace) -> int:
    """Entry point of ``koordinator controllers`` (the caller has configured logging)."""
    from koordinator import controllers
    from koordinator.runtime.options import OptionsError, options_from_args
    from koordinator.runtime.runtime import Runtime

    try:
        options = options_from_args(args, COMPONENT)
    except OptionsError as err:
        sys.stderr.write(f"koordinator controllers: error: {err}\n")
        return 2
    try:
        runtime = Runtime(options, freeze_after_sync=True)
    except Exception as err:  # no kubeconfig, unreadable kubeconfig: one line, not a traceback
        log.debug("building the runtime failed", exc_info=True)
        sys.stderr.write(f"koordinator controllers: error: {err}\n")
        return 1
    names = controllers.register(runtime, controllers.select(args.controllers))
    log.info("controllers registered: %s", ", ".join(names))
    try:
        return int(runtime.run())
    except OSError as err:  # a port in use: one line naming it
        sys.stderr.write(f"koordinator controllers: error: {err}\n")
        return 1
