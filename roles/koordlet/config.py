"""``--config PATH``: the koordlet-config document (``schemas/config/koordlet-config``), read at start.

``PATH`` is a YAML file, or a mounted ``koordlet-config`` ConfigMap directory holding the key
``koordlet-config``. It is read by :class:`~koordinator.runtime.configsource.FileConfigSource` and
validated by :func:`~koordinator.runtime.configsource.parse_configmap` against the document's schema,
the machinery every role's ``--config`` goes through; errors name the file, the key and the value.

The document's keys are the Go koordlet's flags in camelCase. Each key that has a flag in this build
(:data:`FLAGS`) sets that flag, converted and checked by the flag's own ``type`` function, so a value the
command line would refuse is refused in the file too, naming the key. A flag given on the command line
wins over the file (``RuntimeOptions.explicit``); ``--feature-gates`` wins gate by gate over
``featureGates``. Keys the schema knows but this build does not use are accepted and listed in one log
line at start (:func:`unused_keys`).

Like the Go koordlet, whose settings are flags read at start, the koordlet reads the file once: a
change takes a restart. :func:`watch` logs a warning when the file changes, saying so.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
from dataclasses import dataclass, fields
from typing import Any, Callable

import yaml

from koordinator.apis.schemas import FieldError, value_at

log = logging.getLogger("koordinator.koordlet")

DOCUMENT = "koordlet-config"
FEATURE_GATES = "featureGates"

#: Document key -> the ``dest`` of the flag it sets (the shared flags included). ``featureGates`` is
#: merged with ``--feature-gates`` instead (:func:`apply`).
FLAGS: dict[str, str] = {
    "addr": "metrics_addr",
    "kubeApiQps": "kube_api_qps",
    "kubeApiBurst": "kube_api_burst",
    "cgroupRootDir": "cgroup_root",
    "sysRootDir": "sys_root",
    "procRootDir": "proc_root",
    # The Go koordlet's TSDB directory: here the metric cache (metrics.db) lives under --run-dir.
    "tsdbPath": "run_dir",
    "tsdbRetentionDuration": "tsdb_retention_duration",
    "tsdbMaxBytes": "tsdb_max_bytes",
    "kubeletSyncInterval": "kubelet_sync_interval",
    "kubeletSyncTimeout": "kubelet_sync_timeout",
    "nodeTopologySyncInterval": "node_topology_sync_interval",
    "enableNodeMetricReport": "enable_node_metric_report",
    "collectResUsedInterval": "collect_res_used_interval",
    "collectNodeCpuInfoInterval": "collect_node_cpu_info_interval",
    "collectSysMetricOutdatedInterval": "collect_sys_metric_outdated_interval",
    "predictionCheckpointFilepath": "prediction_checkpoint_filepath",
    "predictionColdStartDuration": "prediction_cold_start_duration",
    "predictionSafetyMarginPercent": "prediction_safety_margin_percent",
    "predictionMemoryHistogramDecayHalflife": "prediction_memory_histogram_decay_halflife",
    "predictionCpuHistogramDecayHalflife": "prediction_cpu_histogram_decay_halflife",
    "predictionTrainingInterval": "prediction_training_interval",
    "predictionModelExpirationDuration": "prediction_model_expiration_duration",
    "predictionModelCheckpointInterval": "prediction_model_checkpoint_interval",
    "predictionModelCheckpointMaxPerStep": "prediction_model_checkpoint_max_per_step",
    "reconcileIntervalSeconds": "reconcile_interval_seconds",
    "cpuSuppressIntervalSeconds": "cpu_suppress_interval_seconds",
    "cpuEvictIntervalSeconds": "cpu_evict_interval_seconds",
    "memoryEvictIntervalSeconds": "memory_evict_interval_seconds",
    "memoryEvictCoolTimeSeconds": "memory_evict_cool_time_seconds",
    "cpuEvictCoolTimeSeconds": "cpu_evict_cool_time_seconds",
    "onlyEvictByApi": "only_evict_by_api",
    "auditLogDir": "audit_log_dir",
    "xpuDeviceInfosDir": "xpu_device_infos_dir",
    "auditMaxDiskSpaceMb": "audit_max_disk_space_mb",
    "resourceForceUpdateSeconds": "resource_force_update_seconds",
    "runtimeHooksNetwork": "runtime_hooks_network",
    "runtimeHooksAddr": "runtime_hooks_addr",
    "runtimeHooksHostEndpoint": "runtime_hooks_host_endpoint",
    "runtimeHooksFailurePolicy": "runtime_hooks_failure_policy",
    "runtimeHooksPluginFailurePolicy": "runtime_hooks_plugin_failure_policy",
    "runtimeHooksConfigPath": "runtime_hooks_config_path",
    "runtimeHooksDisableStages": "runtime_hooks_disable_stages",
}


@dataclass(frozen=True)
class KoordletConfig:
    """The document of ``--config`` as read at start."""

    #: The file the document came from, as messages name it.
    file: str
    #: The keys as written: only these set flags (the schema's defaults are the Go koordlet's, not ours).
    written: dict[str, Any]
    #: Validated, with the schema's defaults: what a changed file is compared with.
    parsed: dict[str, Any]
    #: The other keys of a mounted ConfigMap directory (``qos-plugin-extra-configs``), unused here.
    other_keys: tuple[str, ...] = ()

    def where(self, key: str) -> str:
        """How a message names ``key`` of this document: ``--config FILE: key``."""
        return f"--config {self.file}: {key}"


def load(path: str) -> KoordletConfig:
    """Read and validate ``--config PATH``; raises ValueError, one line naming the file, the key and the value."""
    from koordinator.runtime.configsource import ConfigError, FileConfigSource, parse_configmap

    # key=: a plain YAML file is the document whatever its name (a ConfigMap volume names it koordlet-config).
    source = FileConfigSource(path, DOCUMENT, key=DOCUMENT, watch=False)
    try:
        texts, errors = source.read()
    except ConfigError:
        raise ValueError(f"--config {path}: no such file or directory") from None
    in_dir = os.path.isdir(path)

    def file_of(key: str | None) -> str:
        return os.path.join(path, key) if in_dir and key else path

    parsed: dict[str, Any] | None = None
    if not errors:
        parsed, errors = parse_configmap(DOCUMENT, texts)
    if errors:
        raise ValueError("; ".join(_describe(e, texts, file_of) for e in errors))
    parsed = parsed or {}
    if DOCUMENT not in parsed:
        raise ValueError(f"--config {path}: the directory has no {DOCUMENT} file (the key of the {DOCUMENT} "
                         "ConfigMap)")
    return KoordletConfig(file=file_of(DOCUMENT), written=_as_written(texts[DOCUMENT]) or {},
                          parsed=parsed[DOCUMENT], other_keys=tuple(sorted(k for k in texts if k != DOCUMENT)))


def apply(cfg: KoordletConfig, options: Any) -> dict[str, str]:
    """Set each flag ``cfg`` has a key for, unless the command line gave it; merge ``featureGates``.

    Returns how messages name each setting that came from the file (``{dest: "--config FILE: key"}``).
    Raises ValueError naming the file, the key and the value when the flag's type refuses the value, or
    a gate of ``featureGates`` is unknown or not supported, also where the command line wins.
    """
    actions = flag_actions(options.role)
    names: dict[str, str] = {}
    for key, value in cfg.written.items():
        dest = FLAGS.get(key)
        if dest is None:
            continue
        # Checked even where the command line wins: the file must stand on its own at the next start.
        value = _convert(cfg, key, value, actions[dest])
        if dest not in options.explicit:
            _set(options, dest, value)
            names[dest] = cfg.where(key)
    _merge_gates(cfg, options)
    return names


def unused_keys(cfg: KoordletConfig) -> list[str]:
    """The keys written in the document (and other ConfigMap keys) that this build does not use."""
    return sorted(k for k in cfg.written if k not in FLAGS and k != FEATURE_GATES) + list(cfg.other_keys)


def overridden_keys(cfg: KoordletConfig, explicit: frozenset[str]) -> list[str]:
    """The keys written in the document whose flag the command line gave (the flag won)."""
    return sorted(k for k in cfg.written if FLAGS.get(k) in explicit)


def log_start(cfg: KoordletConfig, options: Any) -> None:
    """One line on what the document set, and one listing what it holds in vain (never dropped silently)."""
    applied = sorted(k for k in cfg.written if k in FLAGS and FLAGS[k] not in options.explicit)
    if FEATURE_GATES in cfg.written:
        applied.append(FEATURE_GATES)
    log.info("koordlet-config read at start file=%s applied=%s command-line-wins=%s", cfg.file,
             ",".join(applied) or "none", ",".join(overridden_keys(cfg, options.explicit)) or "none")
    if unused := unused_keys(cfg):
        log.info("koordlet-config keys with no effect in this build: %s file=%s", ",".join(unused), cfg.file)


def watch(runtime: Any, path: str, in_force: KoordletConfig) -> Any:
    """Warn when ``path`` changes: the settings read at start stay in force until a restart.

    Uses the runtime's ConfigMap file watcher, so a changed document is also checked against the
    schema: an invalid one is reported (log, Warning Event, metric) as for any role's ``--config``.
    """
    def on_change(parsed: dict[str, Any]) -> None:
        document = parsed.get(DOCUMENT)
        if document == in_force.parsed:
            return  # the first load, or back to the document in force
        changed = _changed_keys(in_force.parsed, document or {})
        log.warning("koordlet-config changed, restart the koordlet to apply it (it is read at start only) "
                    "file=%s changed=%s", in_force.file,
                    ",".join(changed) if document is not None else f"the {DOCUMENT} key was removed")

    return runtime.config_file(DOCUMENT, on_change, path=path, key=DOCUMENT)


def flag_actions(role: str) -> dict[str, argparse.Action]:
    """The role's flags (shared ones included) by ``dest``, defined as the command line defines them."""
    from koordinator.runtime.options import add_shared_flags
    from koordinator_roles.koordlet import add_flags

    parser = argparse.ArgumentParser(add_help=False)
    add_shared_flags(parser, role)
    add_flags(parser.add_argument_group())
    # argparse has no public accessor for its actions; _actions is what its own help and parsing walk.
    return {action.dest: action for action in parser._actions}


# -- helpers ---------------------------------------------------------------------------------------

def _convert(cfg: KoordletConfig, key: str, value: Any, action: argparse.Action) -> Any:
    """``value`` through the flag's ``type`` (and ``choices``), as ``--flag=VALUE`` would go."""
    text = _flag_text(value)
    try:
        converted = action.type(text) if callable(action.type) else text
    except (argparse.ArgumentTypeError, ValueError, TypeError) as err:
        raise ValueError(f"{cfg.where(key)}: {err}") from None
    if action.choices is not None and converted not in action.choices:
        raise ValueError(f"{cfg.where(key)}: invalid choice {value!r} (choose from "
                         f"{', '.join(map(str, action.choices))})")
    return converted


def _flag_text(value: Any) -> str:
    """A YAML scalar as it would be written on the command line (``true``, not ``True``)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(str, value))
    return str(value)


def _set(options: Any, dest: str, value: Any) -> None:
    # The koordlet's own flags are fields of options.role_options; the shared ones attributes of options.
    target = options.role_options if dest in {f.name for f in fields(options.role_options)} else options
    setattr(target, dest, value)


def _merge_gates(cfg: KoordletConfig, options: Any) -> None:
    """``featureGates`` under ``--feature-gates``: a gate the command line names keeps its value."""
    from koordinator_roles.koordlet import features

    gates = cfg.written.get(FEATURE_GATES) or {}
    features.resolve(gates, source=cfg.where(FEATURE_GATES))  # every gate, as for the other keys
    options.feature_gates = {**gates, **options.feature_gates}


def _changed_keys(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    return sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def _as_written(text: str | None) -> dict[str, Any] | None:
    """The document as written, or None if it is no YAML mapping (the schema's errors say why)."""
    try:
        document = yaml.safe_load(text or "")
    except yaml.YAMLError:
        return None
    return document if isinstance(document, dict) else None


def _describe(error: FieldError, texts: dict[str, str], file_of: Callable[[str | None], str]) -> str:
    """``--config FILE: field: message (value: V)`` for one error of :func:`parse_configmap`."""
    key, field = _split(error.path, list(texts))
    message = f"{field}: {error.message}" if field else error.message
    document = _as_written(texts.get(key)) if key else None
    found, value = value_at(document, field) if document is not None and field else (False, None)
    rendered = json.dumps(value, default=str)
    # The schema's wording names most values ("Invalid value: -1: ..."), not a wrong type's.
    if found and f": {rendered}:" not in error.message:
        message += f" (value: {rendered})"
    return f"--config {file_of(key)}: {message}"


def _split(path: str, keys: list[str]) -> tuple[str | None, str]:
    """``data.<key>.<field>`` -> ``(key, field)``; the longest key wins (keys may hold dots)."""
    for key in sorted(keys, key=len, reverse=True):
        prefix = f"data.{key}"
        if path == prefix:
            return key, ""
        if path.startswith(prefix + ".") or path.startswith(prefix + "["):
            return key, path[len(prefix):].lstrip(".")
    return None, path
