"""koord-descheduler's component configuration: a ``DeschedulerConfiguration`` (``descheduler/v1alpha2``).

Read as koord-descheduler reads it (reference descheduler §1.2):

* the schema ``schemas/config/koord-descheduler-config`` validates the document and fills its defaults
  (leader election, client connection, bind addresses, profiling); each plugin's args are validated and
  defaulted against ``schemas/config/<Plugin>-args`` (also when ``pluginConfig`` omits them);
* no profile gives one ``koord-descheduler`` profile; a single unnamed profile is called so too;
* each extension point's plugins are merged with Koordinator's default set (evict and filter:
  ``MigrationController``) by kube-scheduler's merge algorithm (:func:`merge_plugin_set`);
* LowNodeLoad's top-level thresholds move into a first node pool ``__default_node_pool__``
  (:func:`convert_low_node_load`), and with a ``deschedulingInterval`` its ``detectorCacheTimeout`` is raised
  to at least the interval (§1.1 step 5).

Errors are ``field.path: message`` strings and are raised together as :class:`ConfigError`. Whether an
enabled plugin exists in this build is the framework's check (:mod:`.framework.runtime`), not this module's.
"""

from __future__ import annotations

import argparse
import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from koordinator.apis.config_documents import validate_document
from koordinator.apis.selectors import SelectorError, label_selector_from_dict
from koordinator.runtime.componentconfig import (kube_wording, leader_election, merge_plugin_set,
                                                 profile_plugin_args)
from koordinator.runtime.options import parse_addr, parse_duration

DOCUMENT = "koord-descheduler-config"
API_VERSION = "descheduler/v1alpha2"
KIND = "DeschedulerConfiguration"
DEFAULT_PROFILE_NAME = "koord-descheduler"
#: The extension points of a profile, in the order the configuration lists them.
POINTS = ("deschedule", "balance", "evict", "filter")
#: Koordinator's default plugins per extension point (merged with every profile's own).
DEFAULT_PLUGINS: dict[str, tuple[str, ...]] = {
    "deschedule": (), "balance": (), "evict": ("MigrationController",), "filter": ("MigrationController",),
}
LOW_NODE_LOAD = "LowNodeLoad"
DEFAULT_NODE_POOL = "__default_node_pool__"
# LowNodeLoad's top-level fields that v1alpha2 → internal conversion moves into the default pool.
_POOL_FIELDS = ("nodeSelector", "useDeviationThresholds", "highThresholds", "lowThresholds",
                "prodHighThresholds", "prodLowThresholds", "resourceWeights", "anomalyCondition")
# ... of which these are copied but stay at the top level too (a quirk of Koordinator's conversion).
_POOL_FIELDS_KEPT = ("prodHighThresholds", "prodLowThresholds")


class ConfigError(Exception):
    """The configuration cannot be put into force; ``errors`` are ``"field.path: message"`` strings."""

    def __init__(self, errors: Iterable[str]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(self.errors) or "invalid configuration")


@dataclass(frozen=True)
class PluginRef:
    """A plugin enabled at an extension point, and where the document enables it (for errors).

    ``path`` is ``profiles[i].plugins.<point>.enabled[k].name`` for a plugin the user enabled, and
    ``profiles[i].plugins.<point>`` (with ``default=True``) for one of Koordinator's defaults.
    """

    name: str
    path: str
    default: bool = False


@dataclass
class Profile:
    """One descheduling profile after defaulting: merged plugin lists and defaulted args."""

    name: str
    index: int
    node_selector: dict | None = None
    plugins: dict[str, list[PluginRef]] = field(default_factory=lambda: {p: [] for p in POINTS})
    #: plugin name -> its args (apiVersion/kind removed), defaulted by the args schema.
    plugin_args: dict[str, dict] = field(default_factory=dict)
    #: plugin name -> index of its pluginConfig entry, for errors raised by the plugin's factory.
    plugin_config_index: dict[str, int] = field(default_factory=dict)

    def names_at(self, point: str) -> list[str]:
        return [p.name for p in self.plugins.get(point, [])]

    def all_plugin_names(self) -> list[str]:
        """Every plugin enabled at some extension point, each once, in point order."""
        return list(dict.fromkeys(p.name for point in POINTS for p in self.plugins[point]))

    def args_error(self, plugin: str, exc: Exception) -> str:
        """A plugin factory's ValueError (``"field: message"`` relative to the args) with the document path."""
        j = self.plugin_config_index.get(plugin)
        if j is not None:
            return f"profiles[{self.index}].pluginConfig[{j}].args.{exc}"
        return f"profiles[{self.index}].pluginConfig: {plugin} (default args): {exc}"


@dataclass
class DeschedulerConfiguration:
    """The whole configuration after validation and defaulting; ``document`` is the defaulted dict."""

    leader_election: dict[str, Any] = field(default_factory=dict)
    client_qps: float = 50.0
    client_burst: int = 100
    #: Seconds between rounds; 0: one round only.
    descheduling_interval: float = 0.0
    dry_run: bool = False
    node_selector: dict | None = None
    max_pods_per_node: int | None = None
    max_pods_per_namespace: int | None = None
    max_pods_total: int | None = None
    profiles: list[Profile] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)
    #: ``healthzBindAddress`` / ``metricsBindAddress`` as the file sets them (None when it does not: the
    #: role's --health-addr / --metrics-addr defaults apply rather than Koordinator's 0.0.0.0:10251).
    healthz_bind_address: str | None = None
    metrics_bind_address: str | None = None


# -- LowNodeLoad's args quirks -------------------------------------------------------------------

def convert_low_node_load(args: dict) -> dict:
    """v1alpha2 → internal LowNodeLoadArgs: the top-level pool fields become a first node pool.

    The pool is named ``__default_node_pool__`` and prepended to ``nodePools``; the moved top-level
    fields are removed, except ``prodHighThresholds``/``prodLowThresholds``, which Koordinator copies
    and also leaves in place.
    """
    out = copy.deepcopy(args)
    pool: dict[str, Any] = {"name": DEFAULT_NODE_POOL}
    for key in _POOL_FIELDS:
        if key in out:
            pool[key] = copy.deepcopy(out[key])
            if key not in _POOL_FIELDS_KEPT:
                del out[key]
    out["nodePools"] = [pool, *(out.get("nodePools") or [])]
    return out


def _raise_detector_cache_timeout(args: dict, interval: float) -> dict:
    """§1.1 step 5: a detector cache shorter than the loop would forget every anomaly between rounds."""
    raw = args.get("detectorCacheTimeout")
    try:
        current = _seconds(raw) if raw is not None else 0.0
    except ValueError:
        return args  # the args schema reports the bad duration
    if interval > 0 and current < interval:
        args["detectorCacheTimeout"] = _go_duration(interval)
    return args


def _seconds(value: Any) -> float:
    """A Go duration (``10s``) in seconds; ValueError when it is not one (or negative)."""
    try:
        return parse_duration(str(value))
    except argparse.ArgumentTypeError as err:
        raise ValueError(str(err)) from None


def _go_duration(seconds: float) -> str:
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{round(seconds * 1000)}ms"


# -- parsing --------------------------------------------------------------------------------------

def _unknown_name_error(error: Any, registry_names: set[str]) -> bool:
    """A schema error for a plugin name this build registers although the schema does not know it."""
    return error.path.endswith(".name") and any(
        error.message.startswith(f'Unsupported value: "{name}": not a ') for name in registry_names)


def parse(document: dict | None, *, registry_names: Iterable[str] = ()) -> DeschedulerConfiguration:
    """Validate and default a DeschedulerConfiguration document; raise :class:`ConfigError` if it is bad.

    ``registry_names``: plugins registered beyond the schema's list (out-of-tree or test plugins), whose
    names the schema would otherwise reject.
    """
    names = set(registry_names)
    if document is None:
        document = {"apiVersion": API_VERSION, "kind": KIND}
    if not isinstance(document, dict):
        raise ConfigError([f"must be a {KIND} object, not {type(document).__name__}"])
    doc, field_errors = validate_document(DOCUMENT, document)
    field_errors = [e for e in field_errors if not _unknown_name_error(e, names)]
    if field_errors:
        raise ConfigError(kube_wording(field_errors))
    doc = copy.deepcopy(doc)
    errors: list[str] = []
    profiles_doc = doc.get("profiles") or []
    if not profiles_doc:
        profiles_doc = [{"name": DEFAULT_PROFILE_NAME}]
    elif len(profiles_doc) == 1 and not profiles_doc[0].get("name"):
        profiles_doc[0]["name"] = DEFAULT_PROFILE_NAME
    doc["profiles"] = profiles_doc

    leader = leader_election(doc["leaderElection"], errors)
    for key in ("healthzBindAddress", "metricsBindAddress"):
        doc[key] = _bind_address(key, doc[key], errors)
    _selector("nodeSelector", doc.get("nodeSelector"), errors)
    interval = _seconds(doc["deschedulingInterval"]) if doc.get("deschedulingInterval") else 0.0

    profiles = [_profile(i, raw, interval, errors) for i, raw in enumerate(profiles_doc)]
    seen: set[str] = set()
    for p in profiles:
        if not p.name:
            errors.append(f"profiles[{p.index}].name: Required value")
        elif p.name in seen:
            errors.append(f'profiles[{p.index}].name: Duplicate value: "{p.name}"')
        seen.add(p.name)
    if errors:
        raise ConfigError(errors)
    client = doc["clientConnection"]
    return DeschedulerConfiguration(
        leader_election=leader,
        client_qps=float(client["qps"]),
        client_burst=int(client["burst"]),
        descheduling_interval=interval,
        dry_run=bool(doc["dryRun"]),
        node_selector=doc.get("nodeSelector"),
        max_pods_per_node=doc.get("maxNoOfPodsToEvictPerNode"),
        max_pods_per_namespace=doc.get("maxNoOfPodsToEvictPerNamespace"),
        max_pods_total=doc.get("maxNoOfPodsToEvictTotal"),
        profiles=profiles,
        document=doc,
        healthz_bind_address=doc["healthzBindAddress"] or None if document.get("healthzBindAddress") else None,
        metrics_bind_address=doc["metricsBindAddress"] or None if document.get("metricsBindAddress") else None,
    )


def read_file(path: str | Path) -> Any:
    """The YAML document of ``path``; :class:`ConfigError` naming the file when unreadable or not YAML."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the configuration: {exc.strerror or exc}"]) from exc
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML: {exc}"]) from exc


def load_file(path: str | Path, **kwargs: Any) -> DeschedulerConfiguration:
    """:func:`parse` of the YAML file at ``path`` (the ``--config`` file); same keyword arguments."""
    return parse(read_file(path), **kwargs)


def effective_document(config: DeschedulerConfiguration) -> dict[str, Any]:
    """The configuration as koord-descheduler's ``--write-config-to`` writes it: the defaulted document
    with every profile's merged plugins and its plugin args (pluginConfig sorted by name)."""
    doc = copy.deepcopy(config.document)
    doc["profiles"] = [{
        "name": p.name,
        **({"nodeSelector": copy.deepcopy(p.node_selector)} if p.node_selector is not None else {}),
        "plugins": {point: {"enabled": [{"name": n} for n in p.names_at(point)]} for point in POINTS},
        "pluginConfig": [{"name": name, "args": {"apiVersion": API_VERSION, "kind": f"{name}Args",
                                                 **copy.deepcopy(args)}}
                         for name, args in sorted(p.plugin_args.items())],
    } for p in config.profiles]
    return doc


def _bind_address(key: str, value: str, errors: list[str]) -> str:
    """Koordinator's defaulting (a bare IP gets ``:10251``; an empty host is ``0.0.0.0``) and its check."""
    text = value.strip()
    if text and ":" not in text:
        text = f"{text}:10251"
    if text.startswith(":"):
        text = f"0.0.0.0{text}"
    try:
        parsed = parse_addr(text) if text else None
    except ValueError as err:
        errors.append(f"{key}: Invalid value: {json.dumps(value)}: {err}")
        return value
    if text and parsed is None:
        errors.append(f"{key}: Invalid value: {json.dumps(value)}: must be host:port")
    return text


def _selector(path: str, selector: Any, errors: list[str]) -> None:
    if selector is None:
        return
    try:
        label_selector_from_dict(selector)
    except SelectorError as err:
        errors.append(f"{path}: Invalid value: {json.dumps(selector, sort_keys=True)}: {err}")


def _profile(i: int, raw: dict, interval: float, errors: list[str]) -> Profile:
    path = f"profiles[{i}]"
    profile = Profile(name=raw.get("name") or "", index=i, node_selector=raw.get("nodeSelector"))
    _selector(f"{path}.nodeSelector", profile.node_selector, errors)
    plugins = raw.get("plugins") or {}
    for point in POINTS:
        plugin_set = plugins.get(point) or {}
        enabled = [PluginRef(e["name"], f"{path}.plugins.{point}.enabled[{k}].name")
                   for k, e in enumerate(plugin_set.get("enabled") or [])]
        disabled = {e["name"] for e in plugin_set.get("disabled") or []}
        defaults = [PluginRef(n, f"{path}.plugins.{point}", default=True) for n in DEFAULT_PLUGINS[point]]
        profile.plugins[point] = merge_plugin_set(defaults, enabled, disabled)

    def adjust(plugin: str, args: dict) -> dict:
        if plugin == LOW_NODE_LOAD:
            return convert_low_node_load(_raise_detector_cache_timeout(args, interval))
        return args

    index, args = profile_plugin_args(DOCUMENT, path, raw.get("pluginConfig"), profile.all_plugin_names(), errors,
                                      adjust=adjust)
    profile.plugin_config_index.update(index)
    profile.plugin_args.update(args)
    return profile


# -- reloading ------------------------------------------------------------------------------------

#: Top-level fields a running descheduler takes over without a restart.
RELOADABLE = ("deschedulingInterval", "dryRun", "nodeSelector", "maxNoOfPodsToEvictPerNode",
              "maxNoOfPodsToEvictPerNamespace", "maxNoOfPodsToEvictTotal")


def non_reloadable_changes(old: DeschedulerConfiguration, new: DeschedulerConfiguration) -> list[str]:
    """The field paths whose change needs a restart; [] → the new configuration can be applied live.

    Live: the loop's interval (except from 0: that loop ran its one round and ended), dry run, the
    global node selector and the eviction limits (:data:`RELOADABLE`), and the profiles' node selectors. Anything that would rebuild the plugin
    instances (profiles, plugins, plugin args) or the process's connections needs a restart.
    """
    out: list[str] = []
    a, b = old.document, new.document
    for key in sorted(set(a) | set(b)):
        if key in RELOADABLE or key == "profiles":
            continue
        if a.get(key) != b.get(key):
            out.append(key)
    if old.descheduling_interval == 0 and new.descheduling_interval != 0:
        out.append("deschedulingInterval")  # the loop of a one-round configuration has ended
    if [p.name for p in old.profiles] != [p.name for p in new.profiles]:
        return [*out, "profiles"]
    for p, q in zip(old.profiles, new.profiles):
        if p.plugins != q.plugins:
            out.append(f"profiles[{p.index}].plugins")
        if p.plugin_args != q.plugin_args:
            out.append(f"profiles[{p.index}].pluginConfig")
    return out
