"""The runtime proxy's own flags (:func:`koordinator_roles.runtime_proxy.add_flags`) as one typed value."""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_ENDPOINT = "/var/run/koord-runtimeproxy/runtimeproxy.sock"
DEFAULT_BACKEND = "/var/run/containerd/containerd.sock"
DEFAULT_HOOK_CONFIG_DIR = "/etc/runtime/hookserver.d"
CONTAINERD = "Containerd"
DOCKER = "Docker"


@dataclass
class RuntimeProxyOptions:
    """The runtime proxy's flags, by ``dest``; ``options.role_options`` of its ``RuntimeOptions``."""

    #: The CRI socket this proxy serves (the kubelet's ``--container-runtime-endpoint``).
    koord_runtimeproxy_endpoint: str = DEFAULT_ENDPOINT
    #: The backend runtime's CRI socket (RuntimeService).
    remote_runtime_service_endpoint: str = DEFAULT_BACKEND
    #: The backend's ImageService socket; empty: the runtime service's.
    remote_image_service_endpoint: str = ""
    #: ``Containerd`` (the only mode of this build) or ``Docker``.
    backend_runtime_mode: str = CONTAINERD
    #: Pods labelled ``key=value`` never go through hook servers (the koordlet's own pod).
    runtime_hook_server_key: str = "runtimeproxy.koordinator.sh/skip-hookserver"
    runtime_hook_server_val: str = "true"
    #: Where hook servers register (one JSON file each).
    hook_server_config_dir: str = DEFAULT_HOOK_CONFIG_DIR
    #: Seconds to wait for the backend at start before serving anyway.
    backend_connect_timeout: float = 5.0
    #: Threads serving CRI calls.
    max_concurrent_calls: int = 32
