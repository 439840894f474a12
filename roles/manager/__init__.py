"""Role ``manager`` (koord-manager): SLO controllers, colocation resources and admission webhooks.

- Leader-elected controllers (Lease ``koordinator-manager``): ``nodemetric``, ``nodeslo`` and
  ``noderesource`` (:mod:`koordinator_roles.manager.controllers`), all driven by the ``slo-controller-config``
  ConfigMap read through the API (:mod:`koordinator_roles.manager.sloconfig_cache`), and ``quotaprofile``
  (:mod:`koordinator_roles.manager.quotaprofile`), one root ElasticQuota per ElasticQuotaProfile.
- On every replica: the TLS admission webhook server (port 9876, ``--webhook-port`` or env
  ``WEBHOOK_PORT``) with the pod, ElasticQuota and (gated) ConfigMap and Reservation webhooks
  (:mod:`koordinator_roles.manager.webhooks`), and the self-managed certificates (:mod:`koordinator_roles.manager.certs`).

Flags and environment variables keep Koordinator's names and defaults (reference B.1).
"""

from __future__ import annotations

import argparse
import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from koordinator_roles.manager import features
from koordinator_roles.manager.local import local_setup  # noqa: F401  (the role contract's hook for `koordinator local`)
from koordinator_roles.manager.options import ManagerOptions

if TYPE_CHECKING:
    from koordinator.runtime.options import RuntimeOptions

#: The role contract's dataclass of the flags :func:`add_flags` adds (:mod:`roles`).
Options = ManagerOptions

log = logging.getLogger("koordinator.manager")

LEASE_NAME = "koordinator-manager"
CONTROLLERS = ("nodemetric", "nodeslo", "noderesource", "quotaprofile")
# Koordinator's other controller names: accepted in --controllers only as "-name" or via "*".
NOT_IMPLEMENTED_CONTROLLERS = {
    "colocationprofile": "needs the ColocationProfileController gate, which this build does not implement",
}
DEFAULT_WEBHOOK_PORT = 9876
DEFAULT_CERT_DIR = "/tmp/koordinator-webhook-certs"


def _env_port(default: int) -> str:
    return os.environ.get("WEBHOOK_PORT") or str(default)


def add_flags(group: argparse._ArgumentGroup) -> None:
    """koord-manager's own flags (the shared ones come from the runtime)."""
    from koordinator.runtime.options import add_bool_flag, port

    group.add_argument("--controllers", default="*", metavar="LIST",
                       help="controllers to run, comma separated: '*' is every controller, 'name' enables "
                            "one, '-name' disables one (" + ", ".join(CONTROLLERS) + ")")
    group.add_argument("--slo-config-name", default="slo-controller-config", metavar="NAME",
                       help="the ConfigMap holding the SLO controller configuration")
    group.add_argument("--config-namespace", default="koordinator-system", metavar="NAMESPACE",
                       help="the namespace of --slo-config-name")
    group.add_argument("--webhook-port", type=port, default=_env_port(DEFAULT_WEBHOOK_PORT),
                       help="admission webhook server port (env WEBHOOK_PORT); 0 disables the webhook server")
    group.add_argument("--webhook-host", default=os.environ.get("WEBHOOK_HOST", ""), metavar="HOST",
                       help="address the webhook server binds (env WEBHOOK_HOST; empty: every interface)")
    group.add_argument("--webhook-cert-dir", default=os.environ.get("WEBHOOK_CERT_DIR", DEFAULT_CERT_DIR),
                       metavar="DIR", help="where the serving certificate is written (env WEBHOOK_CERT_DIR)")
    add_bool_flag(group, "--node-strategy-name-need-check", default=False,
                  help="the ConfigMap webhook requires every nodeStrategy/nodeConfig to have a unique name")
    group.add_argument("--noderesource-plugins", default="", metavar="NAME=BOOL,...",
                       help="turn noderesource plugins off or on (MidResource, BatchResource, CPUNormalization, "
                            "ResourceAmplification, GPUDeviceResource, RDMADeviceResource); all on by default")


def enabled_controllers(spec: str) -> list[str]:
    """``--controllers``: Koordinator's rule, checked in list order; raises ValueError naming a bad entry."""
    entries = [e.strip() for e in spec.split(",") if e.strip()]
    known = set(CONTROLLERS) | set(NOT_IMPLEMENTED_CONTROLLERS)
    for entry in entries:
        name = entry[1:] if entry.startswith("-") else entry
        if entry != "*" and name not in known:
            raise ValueError(f"--controllers: unknown controller {name!r} (known: {', '.join(sorted(known))})")
        if entry in NOT_IMPLEMENTED_CONTROLLERS:
            raise ValueError(f"--controllers: {entry}: {NOT_IMPLEMENTED_CONTROLLERS[entry]}")
    enabled = []
    for name in CONTROLLERS:
        if name in entries:
            enabled.append(name)
        elif f"-{name}" in entries:
            continue
        elif "*" in entries:
            enabled.append(name)
    return enabled


def noderesource_plugins(spec: str) -> list[str]:
    """``--noderesource-plugins Name=false,...`` over every plugin (all on by default)."""
    from koordinator.runtime.options import parse_bool
    from koordinator_roles.manager import noderesource

    wanted = dict.fromkeys(noderesource.PLUGINS, True)
    for entry in (e.strip() for e in spec.split(",") if e.strip()):
        name, sep, value = entry.partition("=")
        if name not in wanted:
            raise ValueError(f"--noderesource-plugins: unknown plugin {name!r} "
                             f"(known: {', '.join(noderesource.PLUGINS)})")
        try:
            wanted[name] = parse_bool(value) if sep else True
        except (ValueError, argparse.ArgumentTypeError):
            raise ValueError(f"--noderesource-plugins: {entry!r}: {value!r} is not true or false") from None
    return [name for name, on in wanted.items() if on]


def check_options(options: RuntimeOptions[ManagerOptions]) -> None:
    """Refuse bad role flags before anything starts (the CLI prints the message and exits 2)."""
    features.resolve(options.feature_gates)
    enabled_controllers(options.role_options.controllers)
    noderesource_plugins(options.role_options.noderesource_plugins)


@dataclass
class ManagerParts:
    """What :func:`register` added, for tools and tests that look inside a running manager."""

    config: Any
    controllers: list[str]
    webhook_server: Any = None
    cert_manager: Any = None
    quotaprofile: Any = None


def register(runtime: Any, options: RuntimeOptions[ManagerOptions]) -> ManagerParts:
    """Add the manager's controllers, webhook server and certificate manager to ``runtime``."""
    from koordinator_roles.manager.controllers import NodeResourceController, add_nodemetric_controller, add_nodeslo_controller
    from koordinator_roles.manager.sloconfig_cache import SLOConfigCache

    opts = options.role_options
    # The same checks as check_options (which the CLI runs first): bad values raise here too.
    gates = features.resolve(options.feature_gates)
    namespace, name = opts.config_namespace, opts.slo_config_name
    config = SLOConfigCache(
        runtime.informers.informer("ConfigMap", namespace=namespace, field_selector=f"metadata.name={name}"),
        namespace, name, recorder=runtime.event_recorder(), metrics=runtime.metrics)
    controllers = enabled_controllers(opts.controllers)
    plugins = noderesource_plugins(opts.noderesource_plugins)
    if "nodemetric" in controllers:
        add_nodemetric_controller(runtime, config)
    if "nodeslo" in controllers:
        add_nodeslo_controller(runtime, config)
    if "noderesource" in controllers:
        NodeResourceController(runtime, config, plugins=plugins, gpu_shared=gates["EnableSyncGPUSharedResource"])
    quotaprofile = None
    if "quotaprofile" in controllers:
        # Koordinator registers it with the other controllers, behind no feature gate.
        from koordinator_roles.manager.quotaprofile import add_quotaprofile_controller

        quotaprofile = add_quotaprofile_controller(runtime)
    log.info("manager controllers=%s", ",".join(controllers) or "none")
    parts = ManagerParts(config=config, controllers=controllers, quotaprofile=quotaprofile)
    if opts.webhook_port:
        parts.webhook_server, parts.cert_manager = _register_webhooks(runtime, opts, gates)
    return parts


def _register_webhooks(runtime: Any, opts: ManagerOptions, gates: dict[str, bool]) -> tuple[Any, Any]:
    from koordinator.runtime.webhook import WebhookServer
    from koordinator_roles.manager.certs import CertConfig, CertManager
    from koordinator_roles.manager.webhooks import register_webhooks
    from koordinator_roles.manager.webhooks.listers import InformerListers

    certs = CertManager(runtime.client, CertConfig.from_env(cert_dir=opts.webhook_cert_dir))
    # The server needs its certificate before it can start: one pass now, then the rotation loop.
    certs.ensure()
    runtime.add_runnable("webhook-certs", certs.run)
    server = WebhookServer(f"{opts.webhook_host}:{opts.webhook_port}", opts.webhook_cert_dir,
                           registry=runtime.metrics.registry)
    listers = InformerListers(runtime.informers)
    paths = register_webhooks(
        server, listers, gates=gates,
        config_namespace=opts.config_namespace, slo_config_name=opts.slo_config_name,
        node_strategy_name_need_check=opts.node_strategy_name_need_check)
    runtime.add_component(server)
    runtime.add_ready_check("webhook", server.ready)
    log.info("webhook server port=%s paths=%s", opts.webhook_port, ",".join(paths))
    return server, certs
