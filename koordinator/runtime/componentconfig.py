"""What the component configuration files of the scheduler and the descheduler share (kube's component-base):
the ``leaderElection`` section's checks, kube's wording of schema errors, a profile's ``pluginConfig`` with
plugin args defaulted by their schemas, and ``--config`` given as a mounted ConfigMap directory."""

from __future__ import annotations

import copy
import functools
import json
import os
from typing import Any, Callable, Iterable, Protocol, TypeVar

from koordinator.apis import schemas
from koordinator.runtime.options import parse_duration

_DURATIONS = ("leaseDuration", "renewDeadline", "retryPeriod")


class _Named(Protocol):
    name: str


P = TypeVar("P", bound=_Named)


def merge_plugin_set(defaults: list[P], enabled: list[P], disabled: Iterable[str]) -> list[P]:
    """kube's v1 ``mergePluginSet`` (koord-descheduler applies the same): one extension point's enabled list
    after the user's changes.

    ``"*"`` in ``disabled`` drops every default; otherwise defaults not disabled stay in their order, a
    default that the user enables again is replaced in place by the user's entry (its weight, ...), and the
    remaining user entries follow in the user's order. Duplicates stay (the framework rejects them).
    """
    disabled = set(disabled)
    last_index = {p.name: k for k, p in enumerate(enabled)}
    replaced: set[int] = set()
    out: list[P] = []
    if "*" not in disabled:
        for plugin in defaults:
            if plugin.name in disabled:
                continue
            k = last_index.get(plugin.name)
            if k is not None:
                plugin = enabled[k]
                replaced.add(k)
            out.append(plugin)
    return out + [p for k, p in enumerate(enabled) if k not in replaced]


def leader_election(raw: dict, errors: list[str]) -> dict[str, Any]:
    """The ``leaderElection`` section with its durations in seconds; component-base's errors appended to
    ``errors`` (checked only when the election is on, as component-base does)."""
    out = dict(raw)
    bad: set[str] = set()
    for key in _DURATIONS:
        try:
            out[key] = parse_duration(str(raw[key]))
        except (ValueError, TypeError):  # a negative duration; its syntax passed the schema
            out[key] = 0.0
        if out[key] <= 0:
            bad.add(key)
    if not out["leaderElect"]:
        return out
    errors += [f"leaderElection.{key}: Invalid value: {json.dumps(raw[key])}: must be greater than zero"
               for key in _DURATIONS if key in bad]
    if not bad & {"leaseDuration", "renewDeadline"} and out["leaseDuration"] <= out["renewDeadline"]:
        errors.append(f"leaderElection.leaseDuration: Invalid value: {json.dumps(raw['renewDeadline'])}: "
                      "LeaseDuration must be greater than RenewDeadline")
    for key in ("resourceName", "resourceNamespace"):
        if not out.get(key):
            errors.append(f"leaderElection.{key}: Required value")
    return out


def kube_wording(field_errors: list) -> list[str]:
    """``path: message`` lines; the structural engine words a repeated pluginConfig entry with the whole item,
    kube names the plugin."""
    out = []
    for e in field_errors:
        message = e.message
        if ".pluginConfig[" in e.path and e.path.endswith("]") and message.startswith("Duplicate value: {"):
            try:
                message = f"Duplicate value: {json.dumps(json.loads(message[len('Duplicate value: '):])['name'])}"
            except (ValueError, KeyError, TypeError):
                pass
        out.append(f"{e.path}: {message}" if e.path else message)
    return out


def config_file(path: str) -> str:
    """``--config`` as a file: a mounted ConfigMap directory holds one key, the configuration file inside it."""
    if os.path.isdir(path):
        keys = sorted(k for k in os.listdir(path) if not k.startswith(".."))
        if len(keys) != 1:
            raise ValueError(f"--config {path}: a directory must hold exactly one configuration file, found "
                             f"{', '.join(keys) or 'none'}")
        return os.path.join(path, keys[0])
    return path


@functools.lru_cache(maxsize=None)
def _args_schemas(document: str) -> dict[str, list[schemas.ConfigSchema]]:
    found: dict[str, list[schemas.ConfigSchema]] = {}
    for s in schemas.config_schemas():
        if s.config.get("embeddedIn") == document and s.config.get("pluginArgsOf"):
            found.setdefault(s.config["pluginArgsOf"], []).append(s)
    return found


def default_plugin_args(document: str, plugin: str, args: dict) -> dict | None:
    """``args`` of ``plugin`` defaulted by its args schema embedded in ``document`` (the schema of the args' own
    apiVersion, else the newest, as config_documents chooses); None when the plugin has no args schema. Schema
    errors are the document's validation's to report."""
    candidates = _args_schemas(document).get(plugin)
    if not candidates:
        return None
    api_version = args.get("apiVersion")
    wanted = api_version.rpartition("/")[2] if isinstance(api_version, str) else None
    chosen = next((s for s in candidates if s.version == wanted), None) or max(
        candidates, key=lambda s: schemas.version_order(s.version))
    defaulted, _ = schemas.validate_config(chosen.name, args, chosen.version)
    return defaulted


def profile_plugin_args(document: str, path: str, entries: list | None, enabled: Iterable[str],
                        errors: list[str], *, unsupported: Callable[[str], str | None] | None = None,
                        adjust: Callable[[str, dict], dict] | None = None) -> tuple[dict[str, int], dict[str, dict]]:
    """One profile's ``pluginConfig`` read as kube's and koord-descheduler's configuration readers do:
    ``(plugin → index of its pluginConfig entry, plugin → its args)``.

    ``path`` is the profile's (``profiles[i]``); ``enabled`` the plugins enabled somewhere in the profile,
    whose args are defaulted by their schema in ``document`` even when ``pluginConfig`` omits them. The
    args lose ``apiVersion`` and ``kind``; ``adjust(plugin, args)`` may then change them (defaulting a
    schema cannot say). A repeated entry is skipped (the schema reports it); an entry for a plugin that
    ``unsupported`` gives a reason for, and ``args.kind`` other than ``<plugin>Args``, are appended to
    ``errors``. A plugin with neither an args schema nor a pluginConfig entry gets no args.
    """
    index: dict[str, int] = {}
    given: dict[str, dict] = {}
    for j, entry in enumerate(entries or []):
        plugin, entry_path = entry["name"], f"{path}.pluginConfig[{j}]"
        if plugin in index:
            continue  # the repeated entry is a schema error already
        index[plugin] = j
        reason = unsupported(plugin) if unsupported else None
        if reason:
            errors.append(f'{entry_path}.name: Unsupported value: "{plugin}": {reason}')
        args = entry.get("args") or {}
        kind = args.get("kind")
        if kind is not None and kind != f"{plugin}Args":
            errors.append(f'{entry_path}.args.kind: Invalid value: "{kind}": must be "{plugin}Args"')
        given[plugin] = args

    out: dict[str, dict] = {}
    for plugin in [*enabled, *given]:
        if plugin in out:
            continue
        args = given.get(plugin, {})
        defaulted = default_plugin_args(document, plugin, args)
        if defaulted is not None:
            args = defaulted
        elif plugin not in given:
            continue  # no schema and no args: the plugin's factory gets {}
        args = {k: copy.deepcopy(v) for k, v in args.items() if k not in ("apiVersion", "kind")}
        out[plugin] = adjust(plugin, args) if adjust else args
    return index, out
