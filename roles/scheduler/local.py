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
    """The scheduler's part of ``koordinator local`` (the role contract, :mod:`roles`): its ``--config``, and
    the ScheduleExplanation gate on so that ``koordinator explain pod`` has per-plugin details there."""
    from koordinator.apis.explanation import GATE

    path = write_config(context.data_dir / CONFIG_FILE)
    return LocalSetup(flags=["--config", str(path), "--feature-gates", f"{GATE}=true"])


def scheduler_config(profiles: tuple[str, ...] = PROFILES) -> dict[str, Any]:
    """The scheduler's KubeSchedulerConfiguration in local: the shipped ``koord-scheduler-config`` (the
    plugins and plugin args a cluster install gets), its profile once per name in ``profiles``."""
    import copy

    import yaml

    from koordinator import defaults

    (configmap,) = [o for o in defaults.objects()
                    if o.get("kind") == "ConfigMap" and o["metadata"]["name"] == "koord-scheduler-config"]
    document = yaml.safe_load(configmap["data"]["koord-scheduler-config"])
    shipped = document["profiles"][0]
    document["profiles"] = [{**copy.deepcopy(shipped), "schedulerName": name} for name in profiles]
    # One scheduler in local: electing a leader would only delay it after an unclean stop (the dead
    # holder's Lease must expire first).
    document["leaderElection"] = {"leaderElect": False}
    return document


def write_config(path: Path) -> Path:
    """Write :func:`scheduler_config` as YAML to ``path`` (replacing it atomically); returns ``path``."""
    import yaml

    text = ("# Written by `koordinator local` at every start: the scheduler's --config. The shipped\n"
            "# koord-scheduler-config, its profile as koord-scheduler and as default-scheduler (pods\n"
            "# without a schedulerName).\n" + yaml.safe_dump(scheduler_config(), sort_keys=False))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
