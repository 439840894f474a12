"""Role ``descheduler`` (koord-descheduler): profiles of plugins that move pods off unsuitable nodes.

``--config`` is a DeschedulerConfiguration (``descheduler/v1alpha2``) file, usually the mounted
``koord-descheduler-config`` ConfigMap (a directory holding one key); without it Koordinator's defaults
apply (one ``koord-descheduler`` profile whose evict and filter plugin is MigrationController). With
``--config`` its ``leaderElection`` and ``clientConnection`` take the place of the ``--leader-elect*`` and
``--kube-api-*`` flags (flags given on the command line still win), as for koord-descheduler.

The descheduling loop runs on the leader only (Lease ``koord-descheduler``): every
``deschedulingInterval`` (0: one round) each profile's deschedule plugins, then its balance plugins, on
the ready nodes; plugins evict through their profile's evictor proxy (filters, the per-round global
limits, dry run, the single evict plugin). ``deschedulingInterval``, ``dryRun``, ``nodeSelector`` and the
``maxNoOfPodsToEvict*`` limits are hot reloaded; other changes are logged and need a restart.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING, Any

from koordinator_roles.descheduler.local import local_setup  # noqa: F401  (the role contract's hook for `koordinator local`)
from koordinator_roles.descheduler.options import DeschedulerOptions

if TYPE_CHECKING:
    from koordinator.runtime.options import RuntimeOptions

#: The role contract's dataclass of the flags :func:`add_flags` adds (:mod:`roles`).
Options = DeschedulerOptions

log = logging.getLogger("koordinator.descheduler")


def add_flags(group: argparse._ArgumentGroup) -> None:
    """koord-descheduler's own flags (the shared ones come from the runtime)."""
    group.add_argument("--write-config-to", default=None, metavar="FILE",
                       help="write the effective configuration (defaults applied, profiles completed) as YAML "
                            "to FILE and exit")



def load_configuration(path: str | None, registry: Any = None) -> Any:
    """The DeschedulerConfiguration of ``--config`` (or the default one); ValueError naming the fields."""
    from koordinator.runtime.componentconfig import config_file
    from koordinator_roles.descheduler import config as cfg
    from koordinator_roles.descheduler.plugins import in_tree_registry

    names = set(registry if registry is not None else in_tree_registry())
    try:
        return cfg.load_file(config_file(path), registry_names=names) if path else cfg.parse(None, registry_names=names)
    except cfg.ConfigError as err:
        raise ValueError(f"--config {path}: {err}" if path else str(err)) from None


def validation_handle(dry_run: bool = False) -> Any:
    """The handle plugin factories get when only their args are checked (``check_options``, before any
    connection): no ``client``, and informers that are created but never started."""
    from koordinator.runtime.client import Client
    from koordinator.runtime.informer import InformerFactory
    from koordinator.runtime.kubeconfig import ClusterConfig
    from koordinator_roles.descheduler.framework.handle import PluginHandle

    offline = Client(ClusterConfig(host="http://127.0.0.1:1"))  # never called: nothing starts the informers
    return PluginHandle(informers=InformerFactory(offline), dry_run=dry_run, leader=lambda: False)


def check_frameworks(config: Any, registry: Any, path: str | None = None) -> None:
    """Build every profile's framework on a :func:`validation_handle` (the plugins check their args)."""
    from koordinator_roles.descheduler.config import ConfigError
    from koordinator_roles.descheduler.framework.runtime import Framework

    errors: list[str] = []
    for profile in config.profiles:
        try:
            Framework(profile, registry, validation_handle(config.dry_run))
        except ConfigError as err:
            errors += err.errors
    if errors:
        raise ValueError((f"--config {path}: " if path else "") + "; ".join(errors))


def apply_configuration(config: Any, options: Any) -> None:
    """With --config, its leaderElection/clientConnection, and the healthz/metrics bind addresses it sets, replace
    the flags not given on the command line (as koord-descheduler serves on the file's addresses with --config)."""
    if not options.config:
        return
    le = config.leader_election
    given = options.explicit
    for dest, value in (("leader_elect", bool(le["leaderElect"])), ("leader_elect_name", le["resourceName"]),
                        ("leader_elect_namespace", le["resourceNamespace"]),
                        ("leader_elect_lease_duration", le["leaseDuration"]),
                        ("leader_elect_renew_deadline", le["renewDeadline"]),
                        ("leader_elect_retry_period", le["retryPeriod"]),
                        ("kube_api_qps", config.client_qps), ("kube_api_burst", config.client_burst),
                        ("health_addr", config.healthz_bind_address),
                        ("metrics_addr", config.metrics_bind_address)):
        if dest not in given and value is not None:
            setattr(options, dest, value)


def check_options(options: RuntimeOptions[DeschedulerOptions]) -> None:
    """Load and check the configuration (plugins and their args included) before anything starts.

    With ``--write-config-to`` the effective configuration is written and the process exits 0.
    """
    from koordinator_roles.descheduler.plugins import in_tree_registry

    opts = options.role_options
    registry = in_tree_registry()
    config = load_configuration(options.config, registry)
    check_frameworks(config, registry, options.config)
    if opts.write_config_to:
        _write_config(config, opts.write_config_to)
        raise SystemExit(0)
    apply_configuration(config, options)
    opts.configuration = config


def _write_config(config: Any, path: str) -> None:
    import yaml

    from koordinator_roles.descheduler.config import effective_document

    try:
        with open(path, "w", encoding="utf-8") as f:
            yaml.safe_dump(effective_document(config), f, sort_keys=False)
    except OSError as err:
        raise ValueError(f"--write-config-to {path}: {err.strerror or err}") from None


def register(runtime: Any, options: RuntimeOptions[DeschedulerOptions]) -> Any:
    """Build the profiles' frameworks and the loop (leader-gated), the metric and the config reload."""
    from koordinator_roles.descheduler.wiring import build

    opts = options.role_options
    config = opts.configuration if opts.configuration is not None else load_configuration(options.config)
    parts = build(runtime, config, config_path=options.config)
    log.info("descheduler profiles=%s interval=%ss dryRun=%s", ",".join(parts.frameworks),
             config.descheduling_interval, config.dry_run)
    return parts
