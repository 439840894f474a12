"""The plugins this build registers (kube-scheduler's in-tree ones and Koordinator's), by name.

``NOT_IMPLEMENTED`` names the plugins koord-scheduler has that this build lacks: enabling one
explicitly is a configuration error naming it; kube's default profile entries among them are
left out of the defaults (documented in the README).
"""

from __future__ import annotations

import importlib

from koordinator_roles.scheduler.framework.registry import Registry

# name -> module under koordinator_roles.scheduler.plugins exposing NAME and new(args, handle)
_MODULES = {
    "PrioritySort": "queuesort",
    "SchedulingGates": "schedulinggates",
    "NodeResourcesFit": "noderesources",
    "NodeResourcesBalancedAllocation": "noderesources",
    "NodeName": "nodename",
    "NodeUnschedulable": "nodeunschedulable",
    "NodeAffinity": "nodeaffinity",
    "TaintToleration": "tainttoleration",
    "NodePorts": "nodeports",
    "ImageLocality": "imagelocality",
    "PodTopologySpread": "podtopologyspread",
    "InterPodAffinity": "interpodaffinity",
    "DefaultPreemption": "defaultpreemption",
    "DefaultBinder": "defaultbinder",
    "DefaultPreBind": "defaultprebind",
    "LoadAwareScheduling": "loadaware",
    "ElasticQuota": "elasticquota",
    "Coscheduling": "coscheduling",
    "NodeNUMAResource": "nodenumaresource",
    "Reservation": "reservation",
    "DeviceShare": "deviceshare",
    "NodeResourcesFitPlus": "noderesourcesfitplus",
    "ScarceResourceAvoidance": "scarceresourceavoidance",
    "SchedulingHint": "schedulinghint",
}

_LATER = "is not implemented in this build yet"
NOT_IMPLEMENTED = {
    **{name: f"kube-scheduler plugin {name} {_LATER} (no volume or DRA scheduling)" for name in (
        "VolumeBinding", "VolumeRestrictions", "NodeVolumeLimits", "VolumeZone", "DynamicResources")},
}


def _factory(module_name: str, plugin: str):
    module = importlib.import_module(f"koordinator_roles.scheduler.plugins.{module_name}")
    factories = getattr(module, "FACTORIES", None)
    if factories is not None:
        return factories[plugin]
    return module.new


def in_tree_registry() -> Registry:
    """Every implemented plugin's factory."""
    return Registry({name: _factory(module, name) for name, module in _MODULES.items()})
