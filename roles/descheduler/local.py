"""The descheduler in ``koordinator local``: the shipped configuration, with rounds every few seconds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from koordinator_roles import LocalContext, LocalSetup

#: Under ``local``'s data directory: the descheduler's ``--config`` (rewritten at every start).
CONFIG_FILE = "descheduler-config.yaml"
#: A local cluster is small and short-lived: rounds come more often than the shipped 10s.
LOCAL_INTERVAL = "5s"
#: The ConfigMap (and its key) holding the DeschedulerConfiguration, as a cluster install has it.
CONFIGMAP = "koord-descheduler-config"


def local_setup(context: LocalContext) -> LocalSetup:
    """The descheduler's part of ``koordinator local`` (the role contract, :mod:`roles`): its ``--config``.

    When this build lacks the configuration's evict plugin (the shipped one names MigrationController),
    the descheduler is not started, and ``local`` says why.
    """
    document = descheduler_config(_configmap(context.client))
    missing = _missing_plugins(document)
    if missing:
        return LocalSetup(not_run=f"this build lacks the plugin(s) {', '.join(missing)} its configuration enables")
    path = write_config(context.data_dir / CONFIG_FILE, document)
    return LocalSetup(flags=["--config", str(path)])


def _configmap(client: Any) -> dict[str, Any] | None:
    """The cluster's ``koord-descheduler-config`` ConfigMap (``local`` creates it from the shipped one when
    absent and never overwrites it, so ``kubectl edit`` of it takes effect at the next start)."""
    from koordinator.runtime.errors import NotFound

    try:
        return client.get("ConfigMap", CONFIGMAP, "koordinator-system")
    except NotFound:
        return None


def descheduler_config(configmap: dict[str, Any] | None = None) -> dict[str, Any]:
    """``configmap``'s document (default: the shipped ``koord-descheduler-config``), with a short
    ``deschedulingInterval`` and no leader election (one descheduler in local; a Lease would only delay it
    after an unclean stop)."""
    import yaml

    from koordinator import defaults

    if configmap is None or CONFIGMAP not in (configmap.get("data") or {}):
        (configmap,) = [o for o in defaults.objects()
                        if o.get("kind") == "ConfigMap" and o["metadata"]["name"] == CONFIGMAP]
    document = yaml.safe_load(configmap["data"][CONFIGMAP])
    document["deschedulingInterval"] = LOCAL_INTERVAL
    document["leaderElection"] = {**(document.get("leaderElection") or {}), "leaderElect": False}
    return document


def _missing_plugins(document: dict[str, Any]) -> list[str]:
    from koordinator_roles.descheduler import config as cfg
    from koordinator_roles.descheduler.plugins import in_tree_registry

    registry = in_tree_registry()
    parsed = cfg.parse(document, registry_names=set(registry))
    names = {ref.name for p in parsed.profiles for refs in p.plugins.values() for ref in refs}
    return sorted(names - set(registry))


def write_config(path: Path, document: dict[str, Any]) -> Path:
    """Write ``document`` as YAML to ``path`` (replacing it atomically); returns ``path``."""
    import yaml

    text = ("# Written by `koordinator local` at every start: the descheduler's --config. The cluster's\n"
            f"# koord-descheduler-config ConfigMap with deschedulingInterval {LOCAL_INTERVAL} and no leader election.\n"
            + yaml.safe_dump(document, sort_keys=False))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
    return path
