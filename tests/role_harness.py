"""A role registered on a Runtime in this process, the way ``koordinator --role=ROLE`` builds it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from koordinator.cli import parse_role_options
from koordinator.runtime.client import Client
from koordinator.runtime.runtime import Runtime


class InProcessRole:
    """Parses ``--role=ROLE --kubeconfig K`` plus ``flags`` (probe servers off, quiet logs), and owns the
    client (unthrottled) and the Runtime; subclasses register the role on :attr:`runtime` as :attr:`parts`."""

    def __init__(self, module: ModuleType, role: str, kubeconfig: Path, *flags: str) -> None:
        argv = [f"--role={role}", "--kubeconfig", str(kubeconfig), "--metrics-addr", "0", "--health-addr", "0",
                "--log-level", "warning", *flags]
        self.options = parse_role_options(role, argv, module)
        self.client = Client.from_kubeconfig(str(kubeconfig), qps=0)
        self.runtime = Runtime(self.options, client=self.client)
        self.parts: Any = None
        self._stopped = False

    def start(self) -> "InProcessRole":
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

    def __enter__(self) -> "InProcessRole":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()
