"""Run the koordlet role in this process (as ``koordinator --role=koordlet`` builds it), and the node simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import roles.koordlet as koordlet
from koordinator.cli import build_role_parser
from koordinator.runtime.client import Client
from koordinator.runtime.informer import InformerFactory
from koordinator.runtime.options import options_from_args
from koordinator.runtime.runtime import Runtime
from koordinator.sim.simulator import NodeSimulator


class InProcessKoordlet:
    """The koordlet of ``node`` on a Runtime of its own, reading the simulated tree under ``root``
    (None: this machine's /proc, /sys and /sys/fs/cgroup)."""

    def __init__(self, kubeconfig: Path, node: str, root: Path | None, run_dir: Path, *flags: str) -> None:
        roots: list[str] = []
        if root is not None:
            tree = root / node
            roots = ["--proc-root", str(tree / "proc"), "--sys-root", str(tree / "sys"),
                     "--cgroup-root", str(tree / "cgroup")]
        argv = ["--role=koordlet", "--kubeconfig", str(kubeconfig), "--node-name", node, "--metrics-addr", "0",
                "--health-addr", "0", "--log-level", "warning", *roots, "--run-dir", str(run_dir), *flags]
        args = build_role_parser("koordlet", koordlet).parse_args(argv)
        self.options = options_from_args(args, "koordlet")
        koordlet.check_options(self.options)
        self.client = Client.from_kubeconfig(str(kubeconfig), qps=0)
        self.runtime = Runtime(self.options, client=self.client)
        self.parts = koordlet.register(self.runtime, self.options)
        self._stopped = False

    def start(self) -> "InProcessKoordlet":
        self.runtime.start()
        return self

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            self.runtime.stop(10)
        finally:
            self.client.close()


class Simulator:
    """A :class:`NodeSimulator` with its own client and informers, started and stopped together."""

    def __init__(self, kubeconfig: Path, root: Path, nodes: list[str], **kwargs: Any) -> None:
        self.client = Client.from_kubeconfig(str(kubeconfig), qps=0)
        self.informers = InformerFactory(self.client)
        self.sim = NodeSimulator(self.client, self.informers, root, nodes, **kwargs)

    def start(self, timeout: float = 20.0) -> "Simulator":
        self.sim.start()
        self.informers.start()
        if not self.sim.wait_for_sync(timeout):
            raise AssertionError("the node simulator did not sync")
        return self

    def stop(self) -> None:
        try:
            self.sim.stop(10)
            self.informers.stop(10)
        finally:
            self.client.close()
