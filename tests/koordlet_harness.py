"""Run the koordlet role in this process (as ``koordinator --role=koordlet`` builds it), and the node simulator."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import koordinator_roles.koordlet as koordlet
from koordinator.runtime.client import Client
from koordinator.runtime.informer import InformerFactory
from koordinator.sim.simulator import NodeSimulator
from tests.role_harness import InProcessRole


class InProcessKoordlet(InProcessRole):
    """The koordlet of ``node`` on a Runtime of its own, reading the simulated tree under ``root``
    (None: this machine's /proc, /sys and /sys/fs/cgroup)."""

    def __init__(self, kubeconfig: Path, node: str, root: Path | None, run_dir: Path, *flags: str) -> None:
        roots: list[str] = []
        if root is not None:
            tree = root / node
            roots = ["--proc-root", str(tree / "proc"), "--sys-root", str(tree / "sys"),
                     "--cgroup-root", str(tree / "cgroup")]
        hooks: list[str] = []
        self.hook_dir: str | None = None
        if not any(f.startswith("--runtime-hooks-addr") for f in flags):
            # A socket path may be 107 bytes at most: a test's run dir can be longer.
            self.hook_dir = tempfile.mkdtemp(prefix="kl-", dir="/tmp")
            hooks = ["--runtime-hooks-addr", f"{self.hook_dir}/koordlet.sock"]
        if not any(f.startswith("--runtime-hooks-config-path") for f in flags):
            hooks += ["--runtime-hooks-config-path", str(run_dir / "hookserver.d")]
        super().__init__(koordlet, "koordlet", kubeconfig, "--node-name", node, *roots, "--run-dir", str(run_dir),
                         *hooks, *flags)
        koordlet.check_options(self.options)
        self.parts = koordlet.register(self.runtime, self.options)

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            if self.hook_dir is not None:
                shutil.rmtree(self.hook_dir, ignore_errors=True)


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
