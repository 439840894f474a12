"""Run koord-manager as a role for tests: in-process on a Runtime, or as a ``koordinator --role=manager`` process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import roles.manager as manager
from koordinator.cli import build_role_parser
from koordinator.local import free_port
from koordinator.runtime.client import Client
from koordinator.runtime.options import options_from_args
from koordinator.runtime.runtime import Runtime

SYSTEM_NAMESPACE = "koordinator-system"


class InProcessManager:
    """The manager role registered on a Runtime in this process (the way ``koordinator --role=manager`` does)."""

    def __init__(self, kubeconfig: Path, cert_dir: Path, *flags: str, webhook_port: int = 0) -> None:
        self.webhook_port = webhook_port
        argv = ["--role=manager", "--kubeconfig", str(kubeconfig), "--metrics-addr", "0", "--health-addr", "0",
                "--webhook-host", "127.0.0.1", "--webhook-port", str(webhook_port),
                "--webhook-cert-dir", str(cert_dir), "--log-level", "warning", *flags]
        args = build_role_parser("manager", manager).parse_args(argv)
        self.options = options_from_args(args, "manager")
        self.client = Client.from_kubeconfig(str(kubeconfig), qps=0)
        self.runtime = Runtime(self.options, client=self.client)
        self.parts = manager.register(self.runtime, self.options)
        self._stopped = False

    def start(self) -> "InProcessManager":
        self.runtime.start()
        return self

    def webhook_ready(self) -> str | None:
        return self.parts.webhook_server.ready()

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        try:
            self.runtime.stop(10)
        finally:
            self.client.close()


def manager_process(kubeconfig: Path, log_path: Path, *flags: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """``koordinator --role=manager`` as a child process (output to ``log_path``)."""
    out = open(log_path, "a", encoding="utf-8")
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "koordinator", "--role=manager", "--kubeconfig", str(kubeconfig),
             "--metrics-addr", "0", "--health-addr", f"127.0.0.1:{free_port()}", *flags],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    finally:
        out.close()
