"""Role ``runtime-proxy`` (koord-runtime-proxy): a CRI proxy that lets hook servers shape pods and containers
as they are created.

The kubelet talks CRI v1 to ``--koord-runtimeproxy-endpoint`` instead of to containerd; the proxy
forwards every call to ``--remote-runtime-service-endpoint`` (images to
``--remote-image-service-endpoint``), and around the sandbox and container lifecycle calls it asks the
hook servers registered in ``--hook-server-config-dir`` (the koordlet's ``koordlet.json``) and merges
their answers into the request: cgroup parent, resources, annotations, environment
(:mod:`.interceptor`). So a BE container starts with its batch limits instead of waiting for the
koordlet's next reconcile round.

Modules: :mod:`.hookconfig` (registrations, watched), :mod:`.dispatcher` (calls, failure policies),
:mod:`.interceptor` (the hooked calls), :mod:`.resources` (merge rules), :mod:`.store` (pod and
container metadata, rebuilt from the backend after a restart), :mod:`.server` (the gRPC server),
:mod:`.metrics`. Only the ``Containerd`` backend mode (any CRI v1 runtime) is built; ``Docker``
(dockershim's HTTP API) is refused at start. The proxy never talks to the API server.
"""

from __future__ import annotations

import argparse
import logging
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from koordinator_roles.runtime_proxy.options import CONTAINERD, DOCKER, RuntimeProxyOptions

if TYPE_CHECKING:
    from koordinator.runtime.options import RuntimeOptions
    from koordinator_roles import LocalContext, LocalSetup

#: The role contract's dataclass of the flags :func:`add_flags` adds (:mod:`roles`).
Options = RuntimeProxyOptions

log = logging.getLogger("koordinator.runtime_proxy")


def add_flags(group: argparse._ArgumentGroup) -> None:
    """koord-runtime-proxy's flags (Koordinator's names and defaults, plus this build's own)."""
    from koordinator.runtime.options import positive_duration, positive_int

    d = RuntimeProxyOptions()
    group.add_argument("--koord-runtimeproxy-endpoint", default=d.koord_runtimeproxy_endpoint, metavar="PATH",
                       help="the unix socket this proxy serves CRI on; point the kubelet's "
                            "--container-runtime-endpoint at it")
    group.add_argument("--remote-runtime-service-endpoint", default=d.remote_runtime_service_endpoint,
                       metavar="PATH", help="the container runtime's CRI socket")
    group.add_argument("--remote-image-service-endpoint", default="", metavar="PATH",
                       help="the runtime's image service socket (default: --remote-runtime-service-endpoint)")
    group.add_argument("--backend-runtime-mode", default=CONTAINERD, metavar="MODE",
                       help=f"{CONTAINERD} (any CRI v1 runtime) or {DOCKER} (not in this build)")
    group.add_argument("--runtime-hook-server-key", default=d.runtime_hook_server_key, metavar="KEY",
                       help="pods labelled KEY=--runtime-hook-server-val skip every hook server")
    group.add_argument("--runtime-hook-server-val", default=d.runtime_hook_server_val, metavar="VALUE",
                       help="see --runtime-hook-server-key")
    group.add_argument("--hook-server-config-dir", default=d.hook_server_config_dir, metavar="DIR",
                       help="where hook servers register, one JSON file each (watched)")
    group.add_argument("--backend-connect-timeout", type=positive_duration, default=d.backend_connect_timeout,
                       metavar="DURATION", help="how long one attempt to reach the backend waits (default: 5s)")
    group.add_argument("--max-concurrent-calls", type=positive_int, default=d.max_concurrent_calls, metavar="N",
                       help="CRI calls served at once")


def check_options(options: RuntimeOptions[RuntimeProxyOptions]) -> None:
    """Refuse a backend mode this build lacks, and empty socket paths (the CLI exits 2)."""
    opts = options.role_options
    if opts.backend_runtime_mode == DOCKER:
        raise ValueError(f"--backend-runtime-mode={DOCKER}: not supported by this build (dockershim's HTTP API); "
                         f"use {CONTAINERD} with a CRI v1 runtime (containerd, CRI-O)")
    if opts.backend_runtime_mode != CONTAINERD:
        raise ValueError(f"--backend-runtime-mode={opts.backend_runtime_mode!r}: want {CONTAINERD} or {DOCKER}")
    for flag in ("koord_runtimeproxy_endpoint", "remote_runtime_service_endpoint", "hook_server_config_dir"):
        if not getattr(opts, flag).strip():
            raise ValueError(f"--{flag.replace('_', '-')}: must not be empty")
    if opts.koord_runtimeproxy_endpoint == opts.remote_runtime_service_endpoint:
        raise ValueError(f"--koord-runtimeproxy-endpoint and --remote-runtime-service-endpoint are both "
                         f"{opts.koord_runtimeproxy_endpoint!r}: the proxy would call itself")


def _why(err: Exception, timeout: float) -> str:
    import grpc

    if isinstance(err, grpc.RpcError):
        if err.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"no answer within {timeout:g}s"
        return f"{err.code().name}: {err.details()}"
    return str(err)


class BackendSync:
    """Waits for the backend, then rebuilds the metadata store from it (a Runtime runnable and ready check)."""

    def __init__(self, stub: Any, store: Any, endpoint: str, connect_timeout: float) -> None:
        self.stub = stub
        self.store = store
        self.endpoint = endpoint
        self.connect_timeout = connect_timeout
        self.synced = threading.Event()
        self.problem = f"backend {endpoint} not reached yet"

    def run(self, stop: threading.Event) -> None:
        from koordinator.grpcapi.runtime.v1 import api_pb2 as cri

        while not stop.is_set():
            try:
                version = self.stub.Version(cri.VersionRequest(version="v1"), timeout=self.connect_timeout,
                                            wait_for_ready=True)
                pods, containers = self.store.rebuild(self.stub)
            except Exception as err:  # noqa: BLE001 - retried until it works or the proxy stops
                problem = f"backend {self.endpoint}: {_why(err, self.connect_timeout)}"
                if problem != self.problem:
                    log.warning("%s (retrying)", problem)
                self.problem = problem
                if stop.wait(1.0):
                    return
                continue
            log.info("backend %s %s (CRI %s): %d pods and %d containers known", version.runtime_name,
                     version.runtime_version, version.runtime_api_version, pods, containers)
            self.synced.set()
            return

    def ready(self) -> str | None:
        return None if self.synced.is_set() else self.problem


@dataclass
class RuntimeProxyParts:
    """What :func:`register` built, for tools and tests that look inside a running proxy."""

    server: Any
    registry: Any
    store: Any
    dispatcher: Any
    backend_sync: BackendSync


def register(runtime: Any, options: RuntimeOptions[RuntimeProxyOptions]) -> RuntimeProxyParts:
    """The proxy's server, hook registry and backend sync on ``runtime``."""
    from koordinator.grpcapi.runtime.v1 import api_pb2_grpc as crigrpc
    from koordinator_roles.runtime_proxy.dispatcher import Dispatcher
    from koordinator_roles.runtime_proxy.hookconfig import HookRegistry
    from koordinator_roles.runtime_proxy.interceptor import Interceptor
    from koordinator_roles.runtime_proxy.metrics import ProxyMetrics
    from koordinator_roles.runtime_proxy.server import ProxyServer, backend_channel
    from koordinator_roles.runtime_proxy.store import MetadataStore

    opts = options.role_options
    metrics = ProxyMetrics.register(runtime.metrics.registry)
    runtime_channel = backend_channel(opts.remote_runtime_service_endpoint)
    image_endpoint = opts.remote_image_service_endpoint or opts.remote_runtime_service_endpoint
    image_channel = (runtime_channel if image_endpoint == opts.remote_runtime_service_endpoint
                     else backend_channel(image_endpoint))
    backend = crigrpc.RuntimeServiceStub(runtime_channel)
    store = MetadataStore()
    registry = HookRegistry(opts.hook_server_config_dir)
    dispatcher = Dispatcher(registry, metrics)
    registry.on_change = dispatcher.forget
    interceptor = Interceptor(backend, store, dispatcher,
                              skip_label=(opts.runtime_hook_server_key, opts.runtime_hook_server_val))
    server = ProxyServer(opts.koord_runtimeproxy_endpoint, runtime_channel, image_channel, interceptor, metrics,
                         max_workers=opts.max_concurrent_calls)
    runtime.add_component(_Channels([runtime_channel, image_channel], dispatcher))
    runtime.add_component(registry)
    runtime.add_component(server)
    sync = BackendSync(backend, store, opts.remote_runtime_service_endpoint, opts.backend_connect_timeout)
    runtime.add_runnable("backend-sync", sync.run)
    runtime.add_ready_check("backend", sync.ready)
    log.info("runtime proxy endpoint=%s backend=%s hook-server-config-dir=%s", opts.koord_runtimeproxy_endpoint,
             opts.remote_runtime_service_endpoint, opts.hook_server_config_dir)
    return RuntimeProxyParts(server=server, registry=registry, store=store, dispatcher=dispatcher, backend_sync=sync)


class _Channels:
    """Closes the backend channels and the hook servers' channels last, after the server stopped."""

    def __init__(self, channels: list[Any], dispatcher: Any) -> None:
        self.channels = channels
        self.dispatcher = dispatcher

    def start(self) -> None:
        pass

    def stop(self, timeout: float) -> bool:
        for channel in {id(c): c for c in self.channels}.values():
            channel.close()
        self.dispatcher.close()
        return True


def local_setup(context: LocalContext) -> LocalSetup:
    """``koordinator local`` has no container runtime and no kubelet to put the proxy between."""
    from koordinator_roles import LocalSetup

    return LocalSetup(not_run="needs a kubelet and containerd on a node (see manifests/host/README.md)")
