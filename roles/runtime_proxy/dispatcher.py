"""Calls the registered hook servers for one hook and applies their failure policies.

Every hook server that registered the hook type is called, in registration-file order, each with the
request as the previous one's answer left it (the caller merges an answer in before asking the next
one, :meth:`Dispatcher.call`). Koordinator's proxy calls only the first server it finds, in map
order; with one hook server (the koordlet) the two agree.

A failed call (unreachable socket, a gRPC error, the CRI call's deadline) is logged and counted
(``koord_runtime_proxy_hook_calls_total{result}``). Policy ``Fail`` turns it into :class:`HookFailed`,
which fails the CRI call with the hook server's name, endpoint and error; ``Ignore`` lets the
call go on as if that server had not answered.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import grpc

from koordinator.grpcapi.runtime.v1alpha1 import api_pb2_grpc as hookgrpc
from koordinator_roles.runtime_proxy.hookconfig import HookServer
from koordinator_roles.runtime_proxy.metrics import FAILED, FAILED_IGNORED, OK, ProxyMetrics

log = logging.getLogger("koordinator.runtime_proxy.dispatcher")


class HookFailed(Exception):
    """A hook server with failure policy Fail did not answer: the CRI call fails with this."""

    def __init__(self, server: HookServer, hook: str, code: grpc.StatusCode, details: str) -> None:
        super().__init__(f"hook server {server.name} ({server.endpoint}) failed {hook}: {details}")
        self.code = code


class Dispatcher:
    """The hook servers of ``registry`` and one gRPC channel per endpoint (see the module docstring)."""

    def __init__(self, registry: Any, metrics: ProxyMetrics) -> None:
        self.registry = registry
        self.metrics = metrics
        self._lock = threading.Lock()
        self._stubs: dict[str, tuple[grpc.Channel, hookgrpc.RuntimeHookServiceStub]] = {}

    def servers_for(self, hook: str) -> list[HookServer]:
        """The hook servers that registered ``hook``, in file order."""
        return [s for s in self.registry.servers() if hook in s.hooks]

    def call(self, server: HookServer, hook: str, request: Any, timeout: float | None) -> Any | None:
        """``server``'s answer to ``hook``; None when it failed and its policy is Ignore; HookFailed with Fail."""
        stub = self._stub(server.endpoint)
        try:
            response = getattr(stub, f"{hook}Hook")(request, timeout=timeout)
        except grpc.RpcError as err:
            code = err.code()
            details = err.details() or code.name
            if server.fails_closed:
                self.metrics.hook_calls.labels(server.name, hook, FAILED).inc()
                log.warning("hook server %s failed %s (policy Fail, the CRI call fails): %s: %s", server.name,
                            hook, code.name, details)
                raise HookFailed(server, hook, code, details) from None
            self.metrics.hook_calls.labels(server.name, hook, FAILED_IGNORED).inc()
            log.warning("hook server %s failed %s (policy Ignore, the CRI call goes on unchanged): %s: %s",
                        server.name, hook, code.name, details)
            return None
        self.metrics.hook_calls.labels(server.name, hook, OK).inc()
        return response

    def _stub(self, endpoint: str) -> hookgrpc.RuntimeHookServiceStub:
        with self._lock:
            entry = self._stubs.get(endpoint)
            if entry is None:
                channel = grpc.insecure_channel(f"unix://{endpoint}")
                entry = (channel, hookgrpc.RuntimeHookServiceStub(channel))
                self._stubs[endpoint] = entry
            return entry[1]

    def forget(self, servers: list[HookServer]) -> None:
        """Close the channels of endpoints no registered server names any more."""
        wanted = {s.endpoint for s in servers}
        with self._lock:
            gone = [e for e in self._stubs if e not in wanted]
            channels = [self._stubs.pop(e)[0] for e in gone]
        for channel in channels:
            channel.close()
        self.metrics.hook_servers.set(len(servers))

    def close(self) -> None:
        self.forget([])
