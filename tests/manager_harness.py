"""Run koord-manager as a role for tests: in-process on a Runtime, or as a ``koordinator --role=manager`` process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import koordinator_roles.manager as manager
from koordinator.local import free_port
from tests.role_harness import InProcessRole

SYSTEM_NAMESPACE = "koordinator-system"


class InProcessManager(InProcessRole):
    """The manager role registered on a Runtime in this process (the way ``koordinator --role=manager`` does)."""

    def __init__(self, kubeconfig: Path, cert_dir: Path, *flags: str, webhook_port: int = 0) -> None:
        self.webhook_port = webhook_port
        super().__init__(manager, "manager", kubeconfig, "--webhook-host", "127.0.0.1", "--webhook-port",
                         str(webhook_port), "--webhook-cert-dir", str(cert_dir), *flags)
        self.parts = manager.register(self.runtime, self.options)

    def webhook_ready(self) -> str | None:
        return self.parts.webhook_server.ready()

    def wait_for_webhooks(self, client: Any) -> None:
        """Until the manager has injected its CA into every webhook, its caches synced and it serves."""
        from koordinator_roles.manager.webhook_configuration import MUTATING_NAME, VALIDATING_NAME
        from tests.waiting import wait_until

        wait_until(lambda: all(w["clientConfig"].get("caBundle")
                               for kind, name in (("MutatingWebhookConfiguration", MUTATING_NAME),
                                                  ("ValidatingWebhookConfiguration", VALIDATING_NAME))
                               for w in client.get(kind, name)["webhooks"]),
                   message="the manager injects its CA into every webhook")
        wait_until(lambda: self.runtime.informers.wait_for_sync(0) and self.webhook_ready() is None,
                   message="webhook server ready")


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
