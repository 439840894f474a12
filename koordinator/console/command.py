"""``koordinator console``: the flags, the live loop and ``--once``."""

from __future__ import annotations

import argparse
import os
import queue
import sys
import time
from dataclasses import dataclass
from typing import Any

from koordinator.console.model import ClusterSnapshot, Collector, ConsoleError, NodeSnapshot
from koordinator.console.sources import NodeLocal, SourceError
from koordinator.runtime.errors import ApiError

#: The keys the live view answers.
QUIT, FILTER, SWITCH = "q", "/", "\t"


def _interval(value: str) -> float:
    try:
        n = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--refresh: Invalid value: {value!r}: not a number") from None
    if not 0.1 <= n <= 3600:
        raise argparse.ArgumentTypeError(f"--refresh: Invalid value: {value!r}: must be 0.1-3600 seconds")
    return n


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``console`` subcommand to the ``koordinator`` parser."""
    p = sub.add_parser(
        "console",
        help="a live terminal view of a node (--node-name) or of the cluster",
        description="A live view of a node (--node-name: usage against allocatable with history, pods by QoS "
                    "class, the BE suppression in force, evictions, NodeSLO thresholds, the koordlet's audit log and "
                    "runtime hooks) and of the cluster (nodes, pending pods, quotas, gangs, reservations, "
                    "migrations). Keys: q quits, / filters, tab switches panes. Not on a terminal, or with --once: "
                    "one plain snapshot on stdout.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--kubeconfig", default=None, metavar="PATH",
                   help="the cluster's kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
    p.add_argument("--node-name", default=None, metavar="NODE", help="show this node (else the cluster view only)")
    p.add_argument("--run-dir", default=None, metavar="DIR",
                   help="the node's koordlet --run-dir (its audit log and hook server registration)")
    p.add_argument("--cgroup-root", default=None, metavar="DIR",
                   help="the node's cgroup root, as the koordlet's --cgroup-root (the BE cpuset and quota in force)")
    p.add_argument("--proc-root", default=None, metavar="DIR",
                   help="the node's /proc, as the koordlet's --proc-root (live CPU and memory usage)")
    p.add_argument("--data-dir", default=None, metavar="DIR",
                   help="a `koordinator local` data dir: fills in --kubeconfig and, with --node-name, the node's "
                        "--run-dir, --cgroup-root and --proc-root (flags given win)")
    p.add_argument("--refresh", type=_interval, default=2.0, metavar="SECONDS", help="refresh interval")
    p.add_argument("--filter", default="", metavar="TEXT", help="show only pods/nodes/objects whose name contains TEXT")
    p.add_argument("--once", action="store_true", help="print one plain snapshot to stdout and exit")
    p.add_argument("--width", type=int, default=0, metavar="COLUMNS",
                   help="width of the plain snapshot (default: the terminal's, else $COLUMNS, else 160)")
    return p


def _fill_local(args: argparse.Namespace) -> None:
    """``--data-dir``: the kubeconfig and the simulated node's directories of ``koordinator local``."""
    if not args.data_dir:
        return
    data = os.path.abspath(args.data_dir)
    if not os.path.isdir(data):
        raise SourceError(f"--data-dir: Invalid value: {args.data_dir!r}: not a directory")
    args.kubeconfig = args.kubeconfig or os.path.join(data, "kubeconfig")
    if args.node_name:
        tree = os.path.join(data, "nodes", args.node_name)
        args.run_dir = args.run_dir or os.path.join(data, "koordlet", args.node_name)
        args.cgroup_root = args.cgroup_root or os.path.join(tree, "cgroup")
        args.proc_root = args.proc_root or os.path.join(tree, "proc")


@dataclass
class ViewState:
    """What the live view shows: the pane, the filter, the filter being typed, the latest snapshots."""

    panes: list[str]
    pane: int = 0
    needle: str = ""
    typing: str | None = None  # the filter prompt's text while open
    node: NodeSnapshot | None = None
    cluster: ClusterSnapshot | None = None
    error: str = ""
    quit: bool = False

    @property
    def current(self) -> str:
        return self.panes[self.pane]

    def key(self, k: str) -> None:
        """Apply one key: the filter prompt takes every key while open (Enter applies, Esc cancels)."""
        if self.typing is not None:
            if k in ("\r", "\n"):
                self.needle, self.typing = self.typing, None
            elif k == "\x1b":
                self.typing = None
            elif k in ("\x7f", "\b"):
                self.typing = self.typing[:-1]
            elif k.isprintable() and not k.startswith("\x1b"):
                self.typing += k
            return
        if k == QUIT:
            self.quit = True
        elif k == FILTER:
            self.typing = self.needle
        elif k == SWITCH:
            self.pane = (self.pane + 1) % len(self.panes)


def _collect(collector: Collector, pane: str) -> NodeSnapshot | ClusterSnapshot:
    return collector.node() if pane == "node" else collector.cluster()


def snapshot_text(collector: Collector, panes: list[str], needle: str, width: int) -> str:
    """Every pane once, as plain text with a heading each (what ``--once`` prints)."""
    from koordinator.console import render

    out = []
    for pane in panes:
        snap = _collect(collector, pane)
        view = render.node_view(snap, needle) if isinstance(snap, NodeSnapshot) else render.cluster_view(snap, needle)
        out.append(f"== {pane} view ==\n" + render.plain(view, width))
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    """Entry point of ``koordinator console``; errors are one line on stderr and exit code 1."""
    from koordinator.runtime.client import Client
    from koordinator.runtime.kubeconfig import ConfigError

    try:
        _fill_local(args)
        local = NodeLocal(proc_root=args.proc_root, cgroup_root=args.cgroup_root, run_dir=args.run_dir)
        client = Client.from_kubeconfig(args.kubeconfig, qps=0, max_attempts=1)
    except (SourceError, ConfigError, OSError, ValueError) as err:
        sys.stderr.write(f"koordinator console: error: {err}\n")
        return 1
    panes = ["node", "cluster"] if args.node_name else ["cluster"]
    collector = Collector(client, node=args.node_name, local=local)
    try:
        interactive = not args.once and sys.stdin.isatty() and sys.stdout.isatty()
        if not interactive:
            width = args.width or _width()
            sys.stdout.write(snapshot_text(collector, panes, args.filter, width))
            sys.stdout.flush()
            return 0
        return _live(collector, ViewState(panes=panes, needle=args.filter), args.refresh)
    except (ConsoleError, ApiError) as err:  # e.g. 401/403: the kubeconfig's user may not read what is shown
        sys.stderr.write(f"koordinator console: error: {err}\n")
        return 1
    finally:
        client.close()


def _width() -> int:
    try:
        return os.get_terminal_size(sys.stdout.fileno()).columns
    except (OSError, ValueError):
        pass
    try:
        return int(os.environ.get("COLUMNS", ""))
    except ValueError:
        return 160


def _view(state: ViewState) -> Any:
    from rich.console import Group
    from rich.text import Text

    from koordinator.console import render

    if state.current == "node" and state.node is not None:
        body = render.node_view(state.node, state.needle)
    elif state.current == "cluster" and state.cluster is not None:
        body = render.cluster_view(state.cluster, state.needle)
    else:
        body = Text("loading…")
    bar = Text()
    for i, pane in enumerate(state.panes):
        bar.append(f" {pane} ", style="reverse bold" if i == state.pane else "")
    bar.append(f"   {time.strftime('%H:%M:%S')}   q quit  / filter  tab switch pane")
    if state.typing is not None:
        bar.append(f"   filter: {state.typing}▏", style="bold")
    elif state.needle:
        bar.append(f"   filter: {state.needle!r}")
    parts = [bar, body]
    if state.error:
        parts.append(Text(f"error: {state.error}", style="bold red"))
    return Group(*parts)


def _refresh(collector: Collector, state: ViewState) -> None:
    """Fetch the current pane's snapshot; an error shows in the view and the next refresh tries again."""
    try:
        snap = _collect(collector, state.current)
    except (ConsoleError, ApiError) as err:
        state.error = str(err)
        return
    state.error = ""
    if isinstance(snap, NodeSnapshot):
        state.node = snap
    else:
        state.cluster = snap


def _live(collector: Collector, state: ViewState, interval: float) -> int:
    from rich.console import Console
    from rich.live import Live

    from koordinator.console.keys import KeyReader

    # The first snapshot outside the live screen: a node that does not exist is one line and exit 1.
    _refresh(collector, state)
    if state.error:
        raise ConsoleError(state.error)
    console = Console()
    keys = KeyReader(sys.stdin.fileno()).start()
    try:
        with Live(_view(state), console=console, screen=True, auto_refresh=False, transient=True) as live:
            deadline = time.monotonic() + interval
            while not state.quit:
                try:
                    k = keys.keys.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    _refresh(collector, state)
                    deadline = time.monotonic() + interval
                else:
                    pane = state.current
                    state.key(k)
                    if state.current != pane:
                        _refresh(collector, state)  # the other pane's data may be one interval old
                live.update(_view(state), refresh=True)
    except KeyboardInterrupt:
        pass
    finally:
        keys.stop()
    return 0
