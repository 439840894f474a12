"""koord-scheduler's component configuration: a ``KubeSchedulerConfiguration`` (kubescheduler.config.k8s.io/v1).

The document is read as kube-scheduler 1.35 reads it, with Koordinator's differences:

* Validation and schema defaults come from ``schemas/config/koord-scheduler-config`` and each plugin's
  ``schemas/config/<Plugin>-args`` (:func:`koordinator.apis.config_documents.validate_document`).
* Each profile's plugins are merged with kube's default multiPoint set as v1 defaulting does
  (:func:`merge_plugin_set`); Koordinator appends ``DefaultPreBind`` to preBind. Default plugins this
  build does not implement (the volume plugins, DynamicResources) are dropped from the defaults without
  a word; a plugin the user enables explicitly but this build lacks is an error naming the field.
* The multiPoint expansion (which plugin runs at which point, in which order, with which weight) is
  kube's framework's (:meth:`Profile.plugins_at`).
* Every plugin with an args schema gets its args defaulted, also when ``pluginConfig`` omits it.

Errors are ``field.path: message`` strings in kube's wording (``Duplicate value: "x"``, ``Invalid value``)
and are raised together as :class:`ConfigError`.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml

from koordinator.apis.config_documents import validate_document
from koordinator.runtime.componentconfig import (kube_wording, leader_election, merge_plugin_set,
                                                 profile_plugin_args)

DOCUMENT = "koord-scheduler-config"
API_VERSION = "kubescheduler.config.k8s.io/v1"
KIND = "KubeSchedulerConfiguration"
DEFAULT_SCHEDULER_NAME = "koord-scheduler"

# The extension points a profile configures, in the order the framework runs them.
POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve",
          "permit", "preBind", "bind", "postBind")
MULTI_POINT = "multiPoint"

Implements = Callable[[str, str], bool]


class ConfigError(Exception):
    """The configuration cannot be put into force; ``errors`` are ``"field.path: message"`` strings."""

    def __init__(self, errors: Iterable[str]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(self.errors) or "invalid configuration")


@dataclass(frozen=True)
class PluginRef:
    """A plugin enabled at an extension point; ``weight`` only means something for score (0 = unset)."""

    name: str
    weight: int = 0


# -- kube's defaults and the merge --------------------------------------------------------------------

def default_plugins() -> list[PluginRef]:
    """kube-scheduler 1.35's v1 default multiPoint plugins, in order, with their score weights.

    DynamicResources sits before DefaultPreemption because DRA is GA (enabled) in 1.35: deallocating an
    idle claim is preferred to evicting a pod. The in-tree EBS/GCE PD/Azure disk limit plugins are gone.
    """
    return [
        PluginRef("SchedulingGates"), PluginRef("PrioritySort"), PluginRef("NodeUnschedulable"),
        PluginRef("NodeName"), PluginRef("TaintToleration", 3), PluginRef("NodeAffinity", 2),
        PluginRef("NodePorts"), PluginRef("NodeResourcesFit", 1), PluginRef("VolumeRestrictions"),
        PluginRef("NodeVolumeLimits"), PluginRef("VolumeBinding"), PluginRef("VolumeZone"),
        PluginRef("PodTopologySpread", 2), PluginRef("InterPodAffinity", 2), PluginRef("DynamicResources"),
        PluginRef("DefaultPreemption"), PluginRef("NodeResourcesBalancedAllocation", 1),
        PluginRef("ImageLocality", 1), PluginRef("DefaultBinder"),
    ]


# Which extension points each plugin this scheduler knows implements: the fallback for ``implements``
# when the caller has no plugin classes at hand (kube's in-tree plugins, Koordinator's per its plugins).
KNOWN_POINTS: dict[str, frozenset[str]] = {name: frozenset(points.split()) for name, points in {
    "SchedulingGates": "preEnqueue",
    "PrioritySort": "queueSort",
    "NodeUnschedulable": "filter",
    "NodeName": "filter",
    "TaintToleration": "filter preScore score",
    "NodeAffinity": "preFilter filter preScore score",
    "NodePorts": "preFilter filter",
    "NodeResourcesFit": "preFilter filter preScore score",
    "VolumeRestrictions": "preFilter filter",
    "NodeVolumeLimits": "preFilter filter",
    "VolumeBinding": "preFilter filter preScore score reserve preBind",
    "VolumeZone": "preFilter filter",
    "PodTopologySpread": "preFilter filter preScore score",
    "InterPodAffinity": "preFilter filter preScore score",
    "DynamicResources": "preEnqueue preFilter filter postFilter preScore score reserve preBind",
    "DefaultPreemption": "postFilter",
    "NodeResourcesBalancedAllocation": "preScore score",
    "ImageLocality": "score",
    "DefaultBinder": "bind",
    "LoadAwareScheduling": "preFilter filter score reserve",
    "NodeNUMAResource": "preFilter filter preScore score reserve preBind",
    "Reservation": "preFilter filter postFilter preScore score reserve preBind bind",
    "ElasticQuota": "preFilter postFilter reserve",
    "Coscheduling": "preEnqueue preFilter postFilter preScore score reserve permit preBind postBind",
    "DeviceShare": "preFilter filter preScore score reserve preBind",
    "NodeResourcesFitPlus": "preScore score",
    "ScarceResourceAvoidance": "preScore score",
    "SchedulingHint": "preFilter",
    "DefaultPreBind": "preBind",
}.items()}


def known_implements(plugin: str, point: str) -> bool:
    """Whether ``plugin`` implements extension ``point`` per :data:`KNOWN_POINTS` (unknown plugins: yes)."""
    points = KNOWN_POINTS.get(plugin)
    return True if points is None else point in points


# -- the parsed configuration -------------------------------------------------------------------------

@dataclass
class Profile:
    """One scheduling profile after defaulting: merged plugin lists, disabled sets and defaulted args."""

    scheduler_name: str = DEFAULT_SCHEDULER_NAME
    percentage_of_nodes_to_score: int | None = None
    multi_point: list[PluginRef] = field(default_factory=list)
    points: dict[str, list[PluginRef]] = field(default_factory=lambda: {p: [] for p in POINTS})
    disabled: dict[str, set[str]] = field(default_factory=lambda: {p: set() for p in (*POINTS, MULTI_POINT)})
    plugin_args: dict[str, dict] = field(default_factory=dict)
    plugin_config_index: dict[str, int] = field(default_factory=dict)
    index: int = 0

    def plugins_at(self, point: str, implements: Implements) -> list[PluginRef]:
        """The plugins that run at ``point``, in order, as kube's framework expands multiPoint.

        Order: first the multiPoint plugins also enabled at the point itself (in the point's order,
        with the point's weight: the user re-configured them), then the other multiPoint plugins that
        implement the point and are not disabled there, then the rest of the point's own list. A
        ``"*"`` in the point's disabled set keeps every multiPoint plugin out. At score, a weight of 0
        (unset) counts as 1.
        """
        own = self.points.get(point, [])
        disabled = self.disabled.get(point, set())
        out: list[PluginRef]
        if "*" in disabled:
            out = list(own)
        else:
            own_names = {p.name for p in own}
            mp_names = {p.name for p in self.multi_point}
            overrides = [p for p in own if p.name in mp_names]
            expanded = [p for p in _unique(self.multi_point)
                        if p.name not in own_names and p.name not in disabled and implements(p.name, point)]
            out = overrides + expanded + [p for p in own if p.name not in mp_names]
        if point == "score":
            out = [p if p.weight else PluginRef(p.name, 1) for p in out]
        return out

    def all_plugin_names(self) -> list[str]:
        """Every plugin enabled anywhere in the profile (multiPoint first), each once."""
        names = [p.name for p in self.multi_point]
        for point in POINTS:
            names += [p.name for p in self.points.get(point, [])]
        return list(dict.fromkeys(names))

    def args_path(self, plugin: str) -> str:
        """Where ``plugin``'s args live in the document, for errors raised by the plugin's factory."""
        j = self.plugin_config_index.get(plugin)
        return f"profiles[{self.index}].pluginConfig[{j}].args" if j is not None else \
            f"profiles[{self.index}].pluginConfig"

    def args_error(self, plugin: str, exc: Exception) -> ConfigError:
        """A factory's ValueError (``"field.path: message"`` relative to the args) as a ConfigError."""
        if plugin in self.plugin_config_index:
            return ConfigError([f"{self.args_path(plugin)}.{exc}"])
        return ConfigError([f"{self.args_path(plugin)}: {plugin} (default args): {exc}"])


@dataclass
class SchedulerConfiguration:
    """The whole configuration after validation and defaulting; ``document`` is the defaulted dict."""

    parallelism: int = 16
    percentage_of_nodes_to_score: int | None = None
    pod_initial_backoff_seconds: int = 1
    pod_max_backoff_seconds: int = 10
    leader_election: dict[str, Any] = field(default_factory=dict)
    client_qps: float = 50.0
    client_burst: int = 100
    profiles: list[Profile] = field(default_factory=list)
    document: dict[str, Any] = field(default_factory=dict)

    def profile(self, scheduler_name: str) -> Profile | None:
        """The profile that schedules pods with this ``spec.schedulerName``, if any."""
        return next((p for p in self.profiles if p.scheduler_name == scheduler_name), None)


# -- parsing --------------------------------------------------------------------------------------------

def _registered_name_error(error: Any, registry_names: set[str]) -> bool:
    return error.path.endswith(".name") and any(
        error.message.startswith(f'Unsupported value: "{name}": not a ') for name in registry_names)


def parse(document: dict | None, *, registry_names: set[str], not_implemented: dict[str, str],
          implements: Implements | None = None) -> SchedulerConfiguration:
    """Validate and default a KubeSchedulerConfiguration document; raise :class:`ConfigError` if it is bad.

    ``registry_names``: the plugins this build implements; ``not_implemented``: plugin name → why it is
    missing (used in the error when such a plugin is enabled). ``implements(plugin, point)`` decides
    the multiPoint expansion for the per-profile checks (one queueSort, a bind plugin); it defaults to
    :func:`known_implements`.
    """
    implements = implements or known_implements
    doc, field_errors = validate_document(DOCUMENT, document if document is not None else {})
    # The schema knows koord-scheduler's plugin names; plugins registered out of tree are ours too.
    field_errors = [e for e in field_errors if not _registered_name_error(e, registry_names)]
    if field_errors:
        raise ConfigError(kube_wording(field_errors))
    doc = copy.deepcopy(doc)
    errors: list[str] = []
    if not doc.get("profiles"):
        # kube's v1 defaulting adds one profile; Koordinator's is named koord-scheduler.
        doc["profiles"] = [{"schedulerName": DEFAULT_SCHEDULER_NAME}]

    if doc["podMaxBackoffSeconds"] < doc["podInitialBackoffSeconds"]:
        errors.append(f"podMaxBackoffSeconds: Invalid value: {doc['podMaxBackoffSeconds']}: "
                      "must be greater than or equal to PodInitialBackoffSeconds")
    leader = leader_election(doc["leaderElection"], errors)

    profiles = [_profile(i, raw, registry_names, not_implemented, implements, errors)
                for i, raw in enumerate(doc["profiles"])]
    _cross_profile_checks(profiles, implements, errors)
    if errors:
        raise ConfigError(errors)

    client = doc["clientConnection"]
    return SchedulerConfiguration(
        parallelism=doc["parallelism"],
        percentage_of_nodes_to_score=doc.get("percentageOfNodesToScore"),
        pod_initial_backoff_seconds=doc["podInitialBackoffSeconds"],
        pod_max_backoff_seconds=doc["podMaxBackoffSeconds"],
        leader_election=leader,
        client_qps=float(client["qps"]),
        client_burst=int(client["burst"]),
        profiles=profiles,
        document=doc,
    )


def load_file(path: str | Path, **kwargs: Any) -> SchedulerConfiguration:
    """:func:`parse` of the YAML file at ``path`` (the ``--config`` file); same keyword arguments."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([f"{path}: cannot read the configuration: {exc.strerror or exc}"]) from exc
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError([f"{path}: not valid YAML: {exc}"]) from exc
    return parse(document, **kwargs)


def default_profile(scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> dict[str, Any]:
    """The profile document used without a ``--config`` file, under ``scheduler_name``: kube's default
    plugins plus Koordinator's at the points its default profile enables them (the shipped
    ``koord-scheduler-config`` has the same): SchedulingHint, Reservation (score weight 5000, binding
    reserve pods before DefaultBinder), NodeNUMAResource, DeviceShare, LoadAwareScheduling, Coscheduling
    and ElasticQuota; PostFilter runs Reservation's preemption (when its ``enablePreemption``), Coscheduling,
    ElasticQuota's quota preemption, then kube's DefaultPreemption."""
    def enabled(*names: str) -> dict[str, Any]:
        return {"enabled": [{"name": n} for n in names]}

    return {"schedulerName": scheduler_name, "plugins": {
        "preEnqueue": enabled("Coscheduling"),
        "preFilter": enabled("SchedulingHint", "Reservation", "NodeNUMAResource", "DeviceShare", "Coscheduling",
                             "ElasticQuota"),
        "filter": enabled("LoadAwareScheduling", "NodeNUMAResource", "DeviceShare", "Reservation"),
        "postFilter": {"disabled": [{"name": "*"}], **enabled("Reservation", "Coscheduling", "ElasticQuota",
                                                              "DefaultPreemption")},
        "preScore": enabled("Reservation", "NodeNUMAResource", "DeviceShare", "Coscheduling"),
        "score": {"enabled": [{"name": "LoadAwareScheduling", "weight": 1}, {"name": "NodeNUMAResource", "weight": 1},
                              {"name": "DeviceShare", "weight": 1}, {"name": "Reservation", "weight": 5000},
                              {"name": "Coscheduling", "weight": 1}]},
        "reserve": enabled("LoadAwareScheduling", "NodeNUMAResource", "DeviceShare", "Reservation", "Coscheduling",
                           "ElasticQuota"),
        "permit": enabled("Coscheduling"),
        "preBind": enabled("NodeNUMAResource", "DeviceShare", "Reservation", "Coscheduling"),
        "bind": {"disabled": [{"name": "*"}], **enabled("Reservation", "DefaultBinder")},
        "postBind": enabled("Coscheduling"),
    }}


def default_configuration(**kwargs: Any) -> SchedulerConfiguration:
    """The configuration without a ``--config`` file: one ``koord-scheduler`` :func:`default_profile`."""
    return parse({"apiVersion": API_VERSION, "kind": KIND, "profiles": [default_profile()]}, **kwargs)


def _refs(entries: list | None) -> list[PluginRef]:
    return [PluginRef(e["name"], int(e.get("weight") or 0)) for e in entries or []]


def _profile(i: int, raw: dict, registry_names: set[str], not_implemented: dict[str, str],
             implements: Implements, errors: list[str]) -> Profile:
    path = f"profiles[{i}]"
    name = raw.get("schedulerName", DEFAULT_SCHEDULER_NAME)
    if not name:
        errors.append(f"{path}.schedulerName: Required value")
    plugins = raw.get("plugins") or {}
    profile = Profile(scheduler_name=name, percentage_of_nodes_to_score=raw.get("percentageOfNodesToScore"),
                      index=i)

    def missing(plugin: str) -> str | None:
        if plugin in not_implemented:
            return not_implemented[plugin] or "not implemented by this koord-scheduler"
        return None if plugin in registry_names else "not implemented by this koord-scheduler"

    for point in (MULTI_POINT, *POINTS):
        plugin_set = plugins.get(point) or {}
        enabled = _refs(plugin_set.get("enabled"))
        disabled = {p.name for p in _refs(plugin_set.get("disabled"))}
        seen: set[str] = set()
        for k, ref in enumerate(enabled):
            entry = f"{path}.plugins.{point}.enabled[{k}].name"
            reason = missing(ref.name)
            if reason:
                errors.append(f'{entry}: Unsupported value: "{ref.name}": {reason}')
            elif ref.name in seen:
                errors.append(f'{entry}: Duplicate value: "{ref.name}"')
            elif point != MULTI_POINT and not implements(ref.name, point):
                errors.append(f'{entry}: Invalid value: "{ref.name}": does not extend the {point} extension point')
            seen.add(ref.name)
        # Defaults this build lacks (volume plugins, DRA) go silently: they are not the user's choice.
        defaults = [p for p in default_plugins() if not missing(p.name)] if point == MULTI_POINT else []
        merged = merge_plugin_set(defaults, enabled, disabled)
        if point == MULTI_POINT:
            profile.multi_point = merged
        else:
            profile.points[point] = merged
        profile.disabled[point] = disabled

    # Koordinator's profile defaulting: DefaultPreBind patches the pod once after all PreBind plugins.
    pre_bind = profile.points["preBind"]
    if (not missing("DefaultPreBind") and not {"*", "DefaultPreBind"} & profile.disabled["preBind"]
            and all(p.name != "DefaultPreBind" for p in pre_bind)):
        pre_bind.append(PluginRef("DefaultPreBind"))

    index, args = profile_plugin_args(DOCUMENT, path, raw.get("pluginConfig"), profile.all_plugin_names(), errors,
                                      unsupported=missing, adjust=_extra_defaults)
    profile.plugin_config_index.update(index)
    profile.plugin_args.update(args)

    _check_required_points(profile, implements, errors)
    return profile


def _check_required_points(profile: Profile, implements: Implements, errors: list[str]) -> None:
    path = f"profiles[{profile.index}].plugins"
    name = json.dumps(profile.scheduler_name)
    queue_sort = [p.name for p in profile.plugins_at("queueSort", implements)]
    if len(queue_sort) != 1:
        errors.append(f"{path}.queueSort: Invalid value: {json.dumps(queue_sort)}: only one queue sort plugin "
                      f"required for profile with scheduler name {name}, but got {len(queue_sort)}")
    if not profile.plugins_at("bind", implements):
        errors.append(f"{path}.bind: Required value: at least one bind plugin is needed for profile with "
                      f"scheduler name {name}")


def _cross_profile_checks(profiles: list[Profile], implements: Implements, errors: list[str]) -> None:
    seen: set[str] = set()
    for p in profiles:
        if p.scheduler_name in seen:
            errors.append(f'profiles[{p.index}].schedulerName: Duplicate value: "{p.scheduler_name}"')
        seen.add(p.scheduler_name)
    if not profiles:
        return
    # One queue serves every profile, so they must all sort it the same way.
    canon = [p.name for p in profiles[0].plugins_at("queueSort", implements)]
    for p in profiles[1:]:
        names = [r.name for r in p.plugins_at("queueSort", implements)]
        if names != canon:
            errors.append(f"profiles[{p.index}].plugins.queueSort: Invalid value: {json.dumps(names)}: "
                          "must be the same for all profiles")
        elif canon and p.plugin_args.get(canon[0]) != profiles[0].plugin_args.get(canon[0]):
            errors.append(f"profiles[{p.index}].pluginConfig: Invalid value: {canon[0]}: queueSort args "
                          "must be the same for all profiles")


# Defaulting that a schema default cannot say (it applies only to an absent field): the Go SetDefaults_*.

def _default_load_aware(args: dict) -> dict:
    if not args.get("usageThresholds"):
        args["usageThresholds"] = {"cpu": 65, "memory": 95}
    factors = args.get("estimatedScalingFactors") or {}
    args["estimatedScalingFactors"] = {"cpu": 85, "memory": 70, **factors}
    if not args.get("resourceWeights") and not args.get("dominantResourceWeight"):
        args["resourceWeights"] = {"cpu": 1, "memory": 1}
    return args


def _default_node_resources_fit(args: dict) -> dict:
    strategy = args.setdefault("scoringStrategy", {})
    strategy.setdefault("type", "LeastAllocated")
    if not strategy.get("resources"):
        strategy["resources"] = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
    for resource in strategy["resources"]:
        if not resource.get("weight"):
            resource["weight"] = 1
    return args


_EXTRA_DEFAULTS: dict[str, Callable[[dict], dict]] = {
    "LoadAwareScheduling": _default_load_aware,
    "NodeResourcesFit": _default_node_resources_fit,
}


def _extra_defaults(plugin: str, args: dict) -> dict:
    extra = _EXTRA_DEFAULTS.get(plugin)
    return extra(args) if extra else args


# -- reloading ------------------------------------------------------------------------------------------

def non_reloadable_changes(old: SchedulerConfiguration, new: SchedulerConfiguration) -> list[str]:
    """The field paths whose change from ``old`` to ``new`` needs a restart; [] → a hot reload will do.

    A restart is needed when the set of frameworks or the plugin instances would change: profiles
    added, removed or renamed, plugins enabled or disabled (or reordered) at any point, the queue's
    sort, parallelism, leader election, the client connection, extenders. Score weights, plugin args,
    percentageOfNodesToScore and the backoff seconds can be applied to the running scheduler.
    """
    out: list[str] = []
    for key in ("parallelism", "leaderElection", "clientConnection", "extenders"):
        if old.document.get(key) != new.document.get(key):
            out.append(key)
    old_names = [p.scheduler_name for p in old.profiles]
    new_names = [p.scheduler_name for p in new.profiles]
    if old_names != new_names:
        if len(old_names) != len(new_names):
            out.append("profiles")
        else:
            out += [f"profiles[{i}].schedulerName" for i, (a, b) in enumerate(zip(old_names, new_names)) if a != b]
        return out
    for a, b in zip(old.profiles, new.profiles):
        path = f"profiles[{a.index}].plugins"
        if [p.name for p in a.multi_point] != [p.name for p in b.multi_point] or \
                a.disabled.get(MULTI_POINT) != b.disabled.get(MULTI_POINT):
            out.append(f"{path}.{MULTI_POINT}")
        for point in POINTS:
            if [p.name for p in a.points.get(point, [])] != [p.name for p in b.points.get(point, [])] or \
                    a.disabled.get(point) != b.disabled.get(point):
                out.append(f"{path}.{point}")
    return out


def _unique(refs: list[PluginRef]) -> list[PluginRef]:
    seen: set[str] = set()
    out = []
    for r in refs:
        if r.name not in seen:
            seen.add(r.name)
            out.append(r)
    return out
