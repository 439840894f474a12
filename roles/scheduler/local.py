"""The scheduler in ``koordinator local``: the only scheduler there, so it serves kube's name too.

There is no kube-scheduler in ``local``: the scheduler runs with two profiles, ``koord-scheduler``
and ``default-scheduler``, so that pods without a ``schedulerName`` are scheduled as well.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from koordinator_roles import LocalContext, LocalSetup

#: The profiles of the scheduler in local: Koordinator's own and kube's.
PROFILES = ("koord-scheduler", "default-scheduler")
#: Under ``local``'s data directory: the scheduler's ``--config`` (rewritten at every start).
CONFIG_FILE = "scheduler-config.yaml"


def local_setup(context: LocalContext) -> LocalSetup:
    """The scheduler's part of ``koordinator local`` (the role contract, :mod:`roles`): its ``--config``."""
    path = write_config(context.data_dir / CONFIG_FILE)
    return LocalSetup(flags=["--config", str(path)])


def scheduler_config(profiles: tuple[str, ...] = PROFILES) -> dict[str, Any]:
    """The scheduler's KubeSchedulerConfiguration in local: one profile per name in ``profiles``, each
    with the plugins the scheduler uses without ``--config`` (kube's defaults and LoadAwareScheduling)."""
    from koordinator_roles.scheduler import config

    return {
        "apiVersion": config.API_VERSION,
        "kind": config.KIND,
        # One scheduler in local: electing a leader would only delay it after an unclean stop (the
        # dead holder's Lease must expire first).
        "leaderElection": {"leaderElect": False},
        "profiles": [config.default_profile(name) for name in profiles],
    }


def write_config(path: Path) -> Path:
    """Write :func:`scheduler_config` as YAML to ``path`` (replacing it atomically); returns ``path``."""
    import yaml

    text = ("# Written by `koordinator local` at every start: the scheduler's --config. Profiles\n"
            "# koord-scheduler and default-scheduler (pods without a schedulerName), kube's default plugins\n"
            "# plus LoadAwareScheduling each.\n" + yaml.safe_dump(scheduler_config(), sort_keys=False))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
