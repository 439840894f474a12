"""The proxy's gRPC server: CRI v1 RuntimeService and ImageService on ``--koord-runtimeproxy-endpoint``.

Every method of both services (as the CRI proto in :mod:`koordinator.grpcapi.runtime.v1` lists them,
server-streaming ones included) is forwarded to the backend. The hooked ones
(:data:`~.interceptor.HOOKED_METHODS`) are decoded and go through :class:`~.interceptor.Interceptor`;
all others travel as raw bytes, never decoded, so a field this build does not know reaches the
backend intact and pass-through costs one hop. A method the proto does not know (a newer kubelet's)
is forwarded as a unary call. Backend errors come back with the backend's status code and message;
a hook server with policy Fail fails the call with its own status and a message naming it.

The socket (:func:`~koordinator.runtime.grpcserver.serve_unix`): its directory is created (0755), a
stale socket file from an earlier run is removed, and anything else at that path is an error naming
it, as is a socket that cannot be bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any, Callable

import grpc

from koordinator.grpcapi.runtime.v1 import api_pb2 as cri
from koordinator.runtime.grpcserver import serve_unix, socket_path, stop_server
from koordinator_roles.runtime_proxy.dispatcher import HookFailed
from koordinator_roles.runtime_proxy.interceptor import HOOKED_METHODS, Interceptor
from koordinator_roles.runtime_proxy.metrics import ProxyMetrics

log = logging.getLogger("koordinator.runtime_proxy")

RUNTIME_SERVICE = "runtime.v1.RuntimeService"
IMAGE_SERVICE = "runtime.v1.ImageService"
#: The kubelet's CRI message size limit (16 MiB), both ways: a node's ListContainers can exceed gRPC's 4 MiB.
MAX_MESSAGE_BYTES = 16 << 20
#: The ``code`` label of a call that succeeded (failed ones carry the gRPC status name).
OK_CODE = "OK"
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
                   ("grpc.max_send_message_length", MAX_MESSAGE_BYTES)]


def backend_channel(endpoint: str) -> grpc.Channel:
    """A channel to a CRI unix socket (``/path`` or ``unix:///path``)."""
    return grpc.insecure_channel(f"unix://{socket_path(endpoint)}", options=CHANNEL_OPTIONS)


class ProxyServer:
    """The gRPC server (a Runtime component); ``interceptor`` handles the hooked methods."""

    def __init__(self, endpoint: str, runtime_channel: grpc.Channel, image_channel: grpc.Channel,
                 interceptor: Interceptor, metrics: ProxyMetrics, *, max_workers: int = 32) -> None:
        self.endpoint = socket_path(endpoint)
        self.runtime_channel = runtime_channel
        self.image_channel = image_channel
        self.interceptor = interceptor
        self.metrics = metrics
        self.max_workers = max_workers
        self._server: grpc.Server | None = None
        self._handlers = self._build_handlers()

    # -- handlers ----------------------------------------------------------------------------------

    def _build_handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        handlers: dict[str, grpc.RpcMethodHandler] = {}
        for service in cri.DESCRIPTOR.services_by_name.values():
            channel = self.image_channel if service.full_name == IMAGE_SERVICE else self.runtime_channel
            for method in service.methods:
                path = f"/{service.full_name}/{method.name}"
                if service.full_name == RUNTIME_SERVICE and method.name in HOOKED_METHODS:
                    handlers[path] = self._hooked(method)
                elif method.server_streaming:
                    handlers[path] = self._raw_stream(path, channel)
                else:
                    handlers[path] = self._raw_unary(path, channel)
        return handlers

    def handler(self, path: str) -> grpc.RpcMethodHandler:
        """The handler of ``/service/Method``; an unknown method is forwarded unary to the runtime backend."""
        found = self._handlers.get(path)
        if found is None:
            found = self._handlers[path] = self._raw_unary(path, self.runtime_channel)
        return found

    def _observe(self, method: str) -> Callable[[str, float], None]:
        duration = self.metrics.duration.labels(method)
        ok = self.metrics.requests.labels(method, OK_CODE)

        def observe(code: str, started: float) -> None:
            duration.observe(time.perf_counter() - started)
            (ok if code == OK_CODE else self.metrics.requests.labels(method, code)).inc()

        return observe

    def _raw_unary(self, path: str, channel: grpc.Channel) -> grpc.RpcMethodHandler:
        forward = channel.unary_unary(path)
        observe = self._observe(path.rsplit("/", 1)[-1])

        def handle(request: bytes, context: grpc.ServicerContext) -> bytes:
            started = time.perf_counter()
            try:
                response = forward(request, timeout=context.time_remaining())
            except grpc.RpcError as err:
                observe(err.code().name, started)
                context.abort(err.code(), err.details() or "")
            observe(OK_CODE, started)
            return response

        return grpc.unary_unary_rpc_method_handler(handle)

    def _raw_stream(self, path: str, channel: grpc.Channel) -> grpc.RpcMethodHandler:
        forward = channel.unary_stream(path)
        observe = self._observe(path.rsplit("/", 1)[-1])

        def handle(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
            started = time.perf_counter()
            call = forward(request, timeout=context.time_remaining())
            context.add_callback(call.cancel)      # the kubelet went away: stop the backend stream
            try:
                yield from call
            except grpc.RpcError as err:
                observe(err.code().name, started)
                if err.code() != grpc.StatusCode.CANCELLED or context.is_active():
                    context.abort(err.code(), err.details() or "")
                return
            observe(OK_CODE, started)

        return grpc.unary_stream_rpc_method_handler(handle)

    def _hooked(self, method: Any) -> grpc.RpcMethodHandler:
        request_type = getattr(cri, method.input_type.name)
        response_type = getattr(cri, method.output_type.name)
        intercept = self.interceptor.handler(method.name)
        observe = self._observe(method.name)

        def handle(request: Any, context: grpc.ServicerContext) -> Any:
            started = time.perf_counter()
            try:
                response = intercept(request, context.time_remaining())
            except grpc.RpcError as err:
                observe(err.code().name, started)
                context.abort(err.code(), err.details() or "")
            except HookFailed as err:
                observe(err.code.name, started)
                context.abort(err.code, str(err))
            observe(OK_CODE, started)
            return response

        return grpc.unary_unary_rpc_method_handler(handle, request_deserializer=request_type.FromString,
                                                   response_serializer=response_type.SerializeToString)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Bind the socket and serve (OSError naming the path when it cannot)."""
        proxy = self

        class _Generic(grpc.GenericRpcHandler):
            def service(self, handler_call_details: Any) -> grpc.RpcMethodHandler:
                return proxy.handler(handler_call_details.method)

        self._server = serve_unix(self.endpoint, "--koord-runtimeproxy-endpoint",
                                  lambda server: server.add_generic_rpc_handlers([_Generic()]),
                                  max_workers=self.max_workers, name="cri", options=CHANNEL_OPTIONS)
        log.info("serving CRI on %s", self.endpoint)

    def stop(self, timeout: float) -> bool:
        server, self._server = self._server, None
        stop_server(server, self.endpoint, timeout)
        return True
