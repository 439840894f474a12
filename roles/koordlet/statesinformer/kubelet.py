"""The kubelet's HTTP endpoints the koordlet reads: ``/pods/`` (the pods on this node) and ``/configz``.

``--kubelet-addr`` is ``https://HOST:10250`` (the authenticated port: the service account token
from :data:`SERVICE_ACCOUNT_TOKEN` is sent when the file exists, and the kubelet's self-signed
certificate is not verified, as Koordinator does) or ``http://HOST:10255`` (the read-only port).

:func:`poll_pods` is the pods loop of the states informer (reference A.6.1): it lists every
``kubelet-sync-interval``; an error or an empty list keeps the previous pods.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import urllib.error
import urllib.request
from typing import Any, Callable
from urllib.parse import urlparse

log = logging.getLogger("koordinator.koordlet.statesinformer.kubelet")

SERVICE_ACCOUNT_TOKEN = "/var/run/secrets/kubernetes.io/serviceaccount/token"
DEFAULT_TIMEOUT = 3.0


class KubeletError(OSError):
    """A kubelet request that failed or answered something unusable; the message names the URL."""


def parse_kubelet_addr(addr: str) -> str:
    """The base URL of ``--kubelet-addr`` (no trailing slash); ValueError naming the value when unusable."""
    parsed = urlparse(addr.strip())
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError(f"--kubelet-addr: {addr!r} must be http://HOST:PORT or https://HOST:PORT")
    try:
        parsed.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise ValueError(f"--kubelet-addr: {addr!r} has an invalid port") from None
    if parsed.path not in ("", "/") or parsed.query or parsed.fragment:
        raise ValueError(f"--kubelet-addr: {addr!r} must not have a path, query or fragment")
    return f"{parsed.scheme}://{parsed.netloc}"


class KubeletClient:
    """GETs against one kubelet; thread-safe (every call opens its own connection)."""

    def __init__(self, addr: str, *, token_path: str | None = SERVICE_ACCOUNT_TOKEN,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.base_url = parse_kubelet_addr(addr)
        self.token_path = token_path
        self.timeout = timeout
        # The kubelet serves a self-signed certificate; Koordinator skips verification too.
        self._ssl = ssl.create_default_context()
        self._ssl.check_hostname = False
        self._ssl.verify_mode = ssl.CERT_NONE

    def _token(self) -> str | None:
        # Read on every request: a projected service account token is rotated on disk.
        if not self.token_path or not self.base_url.startswith("https://"):
            return None
        try:
            with open(self.token_path, encoding="utf-8") as f:
                token = f.read().strip()
        except OSError:
            return None
        return token or None

    def get_json(self, path: str) -> Any:
        """GET ``path`` and decode the JSON answer; KubeletError naming the URL on any failure."""
        url = self.base_url + path
        headers = {"Accept": "application/json", "User-Agent": "koordlet"}
        token = self._token()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(url, headers=headers)
        context = self._ssl if url.startswith("https://") else None
        try:
            with urllib.request.urlopen(request, timeout=self.timeout, context=context) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            raise KubeletError(f"GET {url}: HTTP {err.code} {err.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as err:
            reason = getattr(err, "reason", None) or err
            raise KubeletError(f"GET {url}: {reason}") from None
        try:
            return json.loads(body)
        except ValueError as err:
            raise KubeletError(f"GET {url}: the answer is not JSON ({err})") from None

    def pods(self) -> list[dict]:
        """The PodList of ``/pods/``: every pod the kubelet runs (terminated ones included)."""
        body = self.get_json("/pods/")
        items = body.get("items") if isinstance(body, dict) else None
        if items is None:
            return []
        if not isinstance(items, list) or not all(isinstance(p, dict) for p in items):
            raise KubeletError(f"GET {self.base_url}/pods/: items is not a list of objects")
        return items

    def configz(self) -> dict:
        """The kubelet's configuration (``/configz`` ``kubeletconfig``)."""
        body = self.get_json("/configz")
        config = body.get("kubeletconfig") if isinstance(body, dict) else None
        if not isinstance(config, dict):
            raise KubeletError(f"GET {self.base_url}/configz: no kubeletconfig object in the answer")
        return config


def poll_pods(kubelet: KubeletClient, on_pods: Callable[[list[dict]], None], stop: threading.Event,
              interval: float) -> None:
    """List pods at once and then every ``interval`` until ``stop``; ``on_pods`` gets every non-empty list.

    An error or an empty list keeps the previous pods (``on_pods`` is not called); the problem is
    logged once until it changes or a list succeeds again.
    """
    problem: str | None = None
    while not stop.is_set():
        try:
            pods = kubelet.pods()
        except KubeletError as err:
            pods, now = [], str(err)
        else:
            now = None if pods else f"GET {kubelet.base_url}/pods/: empty pod list"
        if now is None:
            if problem is not None:
                log.info("listing pods from the kubelet works again url=%s", kubelet.base_url)
            problem = None
            try:
                on_pods(pods)
            except Exception:  # a bug in the consumer must not end the loop
                log.exception("handling the kubelet pod list failed")
        elif now != problem:
            log.warning("cannot list pods from the kubelet, keeping the previous pods: %s", now)
            problem = now
        stop.wait(interval)
