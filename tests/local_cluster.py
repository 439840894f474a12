"""``koordinator local`` for end-to-end tests driven as a user would: the process, its kubeconfig, an API client
and kubectl (:class:`Cluster`), started and always stopped by :func:`running_cluster`."""

from __future__ import annotations

import re
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from koordinator.runtime.client import Client
from koordinator.runtime.errors import NotFound
from tests.test_local import LocalProcess


@dataclass
class Cluster:
    lp: LocalProcess
    kubeconfig: str
    cache: Path
    client: Client

    def kubectl(self, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(["kubectl", "--kubeconfig", self.kubeconfig, "--cache-dir", str(self.cache), *args],
                              input=input, capture_output=True, text=True, timeout=60)

    def apply(self, text: str) -> None:
        proc = self.kubectl("apply", "-f", "-", input=text)
        assert proc.returncode == 0, proc.stderr

    def node_of(self, name: str, namespace: str) -> str:
        try:
            return (self.client.get("Pod", name, namespace).get("spec") or {}).get("nodeName") or ""
        except NotFound:
            return ""

    def gone(self, name: str, namespace: str) -> bool:
        try:
            pod = self.client.get("Pod", name, namespace)
        except NotFound:
            return True
        return bool(pod["metadata"].get("deletionTimestamp"))

    def events(self, name: str, namespace: str, reason: str) -> list[str]:
        return [e.get("message", "") for e in self.client.list("Event", namespace).get("items", [])
                if (e.get("involvedObject") or {}).get("name") == name and e.get("reason") == reason]

    def unschedulable(self, name: str, namespace: str) -> str:
        pod = self.client.get("Pod", name, namespace)
        for cond in (pod.get("status") or {}).get("conditions") or []:
            if cond.get("type") == "PodScheduled" and cond.get("reason") == "Unschedulable":
                return cond.get("message", "")
        return ""

    def delete_namespace_pods(self, namespace: str) -> None:
        proc = self.kubectl("delete", "pods", "--all", "-n", namespace, "--wait=true", "--timeout=60s")
        assert proc.returncode == 0, proc.stderr


# What a refused request leaves in a log: the Status reason/message ("Forbidden", "... is forbidden: User ...
# cannot ...") or the bare HTTP code.
FORBIDDEN = re.compile(r"forbidden|\b(?:HTTP|status|code)[ =:\"]*403\b", re.IGNORECASE)


def forbidden_lines(data_dir: Path) -> list[str]:
    """``LOG: line`` for every line of the children's logs (DATA_DIR/logs/*.log) that shows a refused request.

    The API server's own log is left out: it records what it refused to anyone (a test's kubectl may be
    refused on purpose); what matters is that no component was refused.
    """
    found = []
    for log in sorted((data_dir / "logs").glob("*.log")):
        if log.name == "apiserver.log":
            continue
        found += [f"{log.name}: {line}" for line in log.read_text(errors="replace").splitlines()
                  if FORBIDDEN.search(line)]
    return found


@contextmanager
def running_cluster(base: Path, *args: str) -> Iterator[Cluster]:
    """``koordinator local ARGS`` on the data dir ``base/kdata`` until it says ``up``; stopped (SIGTERM, then
    killed) on exit."""
    lp = LocalProcess(base / "kdata", *args)
    client = None
    try:
        kubeconfig = lp.expect("export KUBECONFIG=").split("=", 1)[1]
        lp.expect("koordinator local: up")
        client = Client.from_kubeconfig(kubeconfig)
        yield Cluster(lp, kubeconfig, base / "cache", client)
        # Every role runs as its own ServiceAccount (koordinator local): none may have been refused anything.
        refused = forbidden_lines(lp.data_dir)
        assert not refused, "requests refused by RBAC:\n" + "\n".join(refused[:20])
    finally:
        if client is not None:
            client.close()
        if lp.proc.poll() is None:
            lp.proc.send_signal(signal.SIGTERM)
            lp.finish()
        lp.kill()
