"""Start and stop ``koordinator apiserver`` as a subprocess, and talk to it raw or via kubectl."""

from __future__ import annotations

import http.client
import json
import os
import signal
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any


class ApiServerProcess:
    """A ``koordinator apiserver --port 0`` child process on 127.0.0.1."""

    def __init__(self, data_dir: Path, *extra: str) -> None:
        self.data_dir = Path(data_dir)
        self.extra = list(extra)
        self.proc: subprocess.Popen | None = None
        self.url = ""
        self.port = 0
        self.kubeconfig = self.data_dir / "kubeconfig"
        self.cache_dir = self.data_dir / "kubectl-cache"

    def start(self, *extra: str, port: int = 0) -> "ApiServerProcess":
        args = [sys.executable, "-m", "koordinator", "apiserver", "--data-dir", str(self.data_dir),
                "--port", str(port), *self.extra, *extra]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 30
        assert self.proc.stdout is not None
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise RuntimeError(f"apiserver exited: {self.proc.wait()} {err}")
            if "serving at" in line:
                self.url = line.strip().rsplit(" ", 1)[1]
                self.port = int(self.url.rsplit(":", 1)[1])
                # The kubeconfig line follows; nothing else is read from stdout afterwards.
                self.proc.stdout.readline()
                return self
        raise RuntimeError("apiserver did not report its URL within 30 s")

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        code = self.proc.returncode
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream:
                stream.close()
        self.proc = None
        return code

    def kill9(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        self.stop()

    # -- raw HTTP ----------------------------------------------------------------

    def connection(self) -> http.client.HTTPConnection:
        if self.url.startswith("https://"):
            ctx = ssl.create_default_context(cafile=str(self.data_dir / "apiserver.crt"))
            return http.client.HTTPSConnection("127.0.0.1", self.port, timeout=30, context=ctx)
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def request(self, method: str, path: str, body: Any = None, *, headers: dict[str, str] | None = None,
                expect: int | None = None, raw: bytes | None = None) -> tuple[int, Any, dict[str, str]]:
        conn = self.connection()
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            hdrs = {"Content-Type": "application/json", **(headers or {})}
            conn.request(method, path, body=data, headers=hdrs)
            resp = conn.getresponse()
            payload = resp.read()
            try:
                parsed = json.loads(payload) if payload else None
            except ValueError:
                parsed = payload.decode(errors="replace")
            result = (resp.status, parsed, {k.lower(): v for k, v in resp.getheaders()})
        finally:
            conn.close()
        if expect is not None and result[0] != expect:
            raise AssertionError(f"{method} {path}: expected {expect}, got {result[0]}: {result[1]}")
        return result

    # -- kubectl -----------------------------------------------------------------

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 60) -> subprocess.CompletedProcess:
        cmd = ["kubectl", "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.cache_dir), *args]
        proc = subprocess.run(cmd, input=input, capture_output=True, text=True, timeout=timeout)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
        return proc
