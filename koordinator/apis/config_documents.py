"""The configuration documents inside ConfigMaps, validated whole.

Which ConfigMap holds which document comes from the ``x-koordinator-config`` block of each schema
under ``schemas/config`` (``configMap``, ``configMapAliases``, ``key``, ``anyKey``, ``passthroughKeys``);
this module only walks a ConfigMap with that map and hands every key to
:func:`koordinator.apis.schemas.validate_config`. On top of the document's own schema it checks the
plugin profiles of the scheduler and descheduler configurations: every plugin name must be one the
component registers (the outer schema's ``plugins`` list plus the plugins with an args schema), and each
``profiles[i].pluginConfig[j].args`` is validated against the schema whose block says
``pluginArgsOf: <plugin>, embeddedIn: <document>`` (``schemas/config/<plugin>-args/<version>.yaml``).

Paths are prefixed with ``data.<key>``, e.g.
``data.koord-scheduler-config.profiles[0].pluginConfig[1].args.usageThresholds.cpu``.
"""

from __future__ import annotations

from typing import Any

from koordinator.apis import schemas
from koordinator.apis.schemas import ConfigSchema, FieldError

Obj = dict[str, Any]


def documents_of(configmap_name: str) -> list[ConfigSchema]:
    """The documents a ConfigMap of this name holds (newest version of each), or [] if it is not one of ours."""
    found: dict[str, ConfigSchema] = {}
    for s in schemas.config_schemas():
        names = [s.config.get("configMap"), *s.config.get("configMapAliases", ())]
        if configmap_name in names:
            found[s.name] = schemas.config_schema(s.name)
    return sorted(found.values(), key=lambda s: s.name)


def validate_configmap(configmap: Any) -> list[FieldError]:
    """Validate every key of a known ConfigMap (slo-controller-config, koord-scheduler-config, ...).

    A ConfigMap whose name is not one of ours gives no errors. Keys a document does not claim are
    reported (koord-manager would silently ignore them), with the closest known key as a hint.
    """
    if not isinstance(configmap, dict):
        return [FieldError("", "must be an object")]
    metadata = configmap.get("metadata")
    name = metadata.get("name") if isinstance(metadata, dict) else None
    docs = documents_of(name) if isinstance(name, str) else []
    if not docs:
        return []
    data = configmap.get("data") or {}
    if not isinstance(data, dict):
        return [FieldError("data", "must be an object of strings")]
    by_key = {d.config.get("key"): d for d in docs}
    any_key = next((d for d in docs if d.config.get("anyKey")), None)
    passthrough = {k for d in docs for k in d.config.get("passthroughKeys", ())}
    errors: list[FieldError] = []
    for key, text in data.items():
        prefix = f"data.{key}"
        doc = by_key.get(key) or (any_key if key not in passthrough else None)
        if doc is None:
            if key not in passthrough:
                hint = schemas.suggest(key, [k for k in by_key if k] + sorted(passthrough))
                errors.append(FieldError(prefix, f"unknown key in {name}" + (
                    f", did you mean {hint!r}?" if hint else f" (known keys: {', '.join(sorted(by_key))})")))
            continue
        if not isinstance(text, str):
            errors.append(FieldError(prefix, f"must be a string holding the {doc.name} document"))
            continue
        # An empty value is an empty document (for koord-manager: "use the defaults").
        _, errs = validate_document(doc.name, text if text.strip() else {})
        errors += [FieldError(f"{prefix}.{e.path}" if e.path else prefix, e.message) for e in errs]
    return errors


def validate_document(name: str, document: Any, version: str | None = None) -> tuple[Any, list[FieldError]]:
    """:func:`schemas.validate_config`, plus the plugin names and plugin args of scheduler/descheduler profiles.

    Without ``version`` the document's own ``apiVersion`` chooses the schema when one exists for it
    (else the newest version, whose ``apiVersion`` enum then names what is supported).
    """
    parsed, errors = schemas.validate_config(name, document, version)
    if version is None and isinstance(parsed, dict):
        own = _version_of(parsed.get("apiVersion"))
        if own and own != schemas.config_schema(name).version and _has_version(name, own):
            return validate_document(name, document, own)
    cs = schemas.config_schema(name, version)
    if "plugins" in cs.config and isinstance(parsed, dict):
        errors += _profile_errors(cs, parsed)
    return parsed, errors


def _version_of(api_version: Any) -> str | None:
    return api_version.rpartition("/")[2] if isinstance(api_version, str) and api_version else None


def _has_version(name: str, version: str) -> bool:
    return any(s.name == name and s.version == version for s in schemas.config_schemas())


def _args_schemas(outer: ConfigSchema) -> dict[str, list[ConfigSchema]]:
    found: dict[str, list[ConfigSchema]] = {}
    for s in schemas.config_schemas():
        if s.config.get("embeddedIn") == outer.name and s.config.get("pluginArgsOf"):
            found.setdefault(s.config["pluginArgsOf"], []).append(s)
    return found


def _profile_errors(outer: ConfigSchema, doc: Obj) -> list[FieldError]:
    args_schemas = _args_schemas(outer)
    known = set(outer.config.get("plugins", ())) | set(args_schemas)
    component = (outer.config.get("consumers") or [outer.name])[0]
    errors: list[FieldError] = []

    def check_name(path: str, plugin: Any, wildcard_ok: bool = False) -> None:
        if not isinstance(plugin, str) or plugin in known or (wildcard_ok and plugin == "*"):
            return  # a non-string name is already a schema error
        # A typo, or a name cut short ("LoadAware" for LoadAwareScheduling).
        hint = schemas.suggest(plugin, sorted(known)) or next(
            (k for k in sorted(known) if plugin and k.lower().startswith(plugin.lower())), None)
        errors.append(FieldError(f"{path}.name", f'Unsupported value: "{plugin}": not a {component} plugin'
                                 + (f", did you mean {hint!r}?" if hint else "")))

    for i, profile in enumerate(_list(doc.get("profiles"))):
        if not isinstance(profile, dict):
            continue
        plugins = profile.get("plugins")
        for point, plugin_set in (plugins.items() if isinstance(plugins, dict) else ()):
            for which in ("enabled", "disabled"):
                entries = plugin_set.get(which) if isinstance(plugin_set, dict) else None
                for k, entry in enumerate(_list(entries)):
                    if isinstance(entry, dict):
                        check_name(f"profiles[{i}].plugins.{point}.{which}[{k}]", entry.get("name"),
                                   wildcard_ok=which == "disabled")
        for j, config in enumerate(_list(profile.get("pluginConfig"))):
            if not isinstance(config, dict):
                continue
            path = f"profiles[{i}].pluginConfig[{j}]"
            plugin, args = config.get("name"), config.get("args")
            check_name(path, plugin)
            if not isinstance(args, dict) or plugin not in args_schemas:
                continue
            wanted = _version_of(args.get("apiVersion"))
            candidates = args_schemas[plugin]
            chosen = next((s for s in candidates if s.version == wanted), None) or max(
                candidates, key=lambda s: schemas.version_order(s.version))
            _, errs = schemas.validate_config(chosen.name, args, chosen.version)
            errors += [FieldError(f"{path}.args.{e.path}" if e.path else f"{path}.args", e.message) for e in errs]
    return errors


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
