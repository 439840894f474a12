"""Role ``scheduler`` (koord-scheduler): kube-scheduler's framework with Koordinator's plugins.

Pods whose ``spec.schedulerName`` names a profile of the configuration (``koord-scheduler`` by
default) are scheduled: PreFilter → Filter → PostFilter (preemption) → Score → Reserve →
Permit, then PreBind → Bind on binder threads. ``--config`` is a KubeSchedulerConfiguration
(``kubescheduler.config.k8s.io/v1``) file, usually the mounted ``koord-scheduler-config``
ConfigMap; without it the default profile is used. With ``--config`` its ``leaderElection`` and
``clientConnection`` sections take the place of the ``--leader-elect*`` and ``--kube-api-*`` flags,
as for kube-scheduler. Score weights, plugin args (for plugins that support it),
``percentageOfNodesToScore`` and the backoff durations are hot reloaded; other changes are
logged and need a restart.
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from koordinator_roles.scheduler.local import local_setup  # noqa: F401  (the role contract's hook for `koordinator local`)
from koordinator_roles.scheduler.options import SchedulerOptions

if TYPE_CHECKING:
    from koordinator.runtime.options import RuntimeOptions

#: The role contract's dataclass of the flags :func:`add_flags` adds (:mod:`roles`).
Options = SchedulerOptions

log = logging.getLogger("koordinator.scheduler")


def add_flags(group: argparse._ArgumentGroup) -> None:
    """koord-scheduler's own flags (the shared ones come from the runtime)."""
    group.add_argument("--debug-scores", type=int, default=0, metavar="N",
                       help="log the top N nodes' scores of every scheduled pod (0: off)")


def load_configuration(path: str | None, registry: Any = None) -> Any:
    """The KubeSchedulerConfiguration of ``--config`` (or the default one); raises ValueError naming fields.

    ``registry``: the plugins that may be enabled (default: the in-tree ones; tests add their own).
    """
    from koordinator.runtime.componentconfig import config_file
    from koordinator_roles.scheduler import config as cfg
    from koordinator_roles.scheduler.plugins import NOT_IMPLEMENTED, in_tree_registry

    file = config_file(path) if path else None
    kwargs = dict(registry_names=set((registry or in_tree_registry()).names()), not_implemented=NOT_IMPLEMENTED)
    try:
        return cfg.load_file(file, **kwargs) if file else cfg.default_configuration(**kwargs)
    except cfg.ConfigError as err:
        raise ValueError(f"--config {path}: {err}" if path else str(err)) from None


def apply_configuration(config: Any, options: Any) -> None:
    """kube-scheduler's precedence: with --config, its leaderElection/clientConnection replace the flags."""
    if not options.config:
        return
    le = config.leader_election
    options.leader_elect = bool(le["leaderElect"])
    options.leader_elect_name = le["resourceName"]
    options.leader_elect_namespace = le["resourceNamespace"]
    options.leader_elect_lease_duration = le["leaseDuration"]
    options.leader_elect_renew_deadline = le["renewDeadline"]
    options.leader_elect_retry_period = le["retryPeriod"]
    options.kube_api_qps = config.client_qps
    options.kube_api_burst = config.client_burst


def check_options(options: RuntimeOptions[SchedulerOptions]) -> None:
    """Load and check the configuration (plugin args included) before anything starts.

    The configuration goes to ``register`` in ``options.role_options.configuration``: loading it is a
    good part of the start-up time, and register then runs what was checked.
    """
    from koordinator_roles.scheduler.framework.handle import PluginHandle
    from koordinator_roles.scheduler.framework.runtime import Framework
    from koordinator_roles.scheduler.plugins import in_tree_registry

    opts = options.role_options
    if opts.debug_scores < 0:
        raise ValueError(f"--debug-scores: {opts.debug_scores}: must not be negative")
    config = load_configuration(options.config)
    registry = in_tree_registry()
    for profile in config.profiles:
        Framework(profile, registry, PluginHandle())  # plugin factories validate their args
    apply_configuration(config, options)
    opts.configuration = config


@dataclass
class SchedulerParts:
    """What :func:`register` added, for tools and tests that look inside a running scheduler."""

    config: Any
    scheduler: Any
    queue: Any
    cache: Any
    frameworks: dict


def register(runtime: Any, options: RuntimeOptions[SchedulerOptions]) -> SchedulerParts:
    """Build the profiles' frameworks, the queue, the cache and the scheduler, and wire the informers."""
    from koordinator_roles.scheduler.wiring import build

    opts = options.role_options
    config = opts.configuration if opts.configuration is not None else load_configuration(options.config)
    parts = build(runtime, config, debug_scores=opts.debug_scores, config_path=options.config)
    log.info("scheduler profiles=%s", ",".join(parts.frameworks))
    return parts
