"""The NodeSLO spec of a node (reference B.3.2), from the merged ``slo-controller-config``.

Pure: :func:`node_slo_spec` reads a :class:`~koordinator_roles.manager.sloconfig.ManagerConfig` and the Node
and returns the spec the NodeSLO of that node (same name, cluster-scoped) should have.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

from koordinator.apis import quantity
from koordinator_roles.manager.sloconfig import ManagerConfig, first_matching, node_strategy

log = logging.getLogger("koordinator.manager.nodeslo")

Obj = dict[str, Any]

ANNOTATION_NETWORK_BANDWIDTH = "node.koordinator.sh/network-bandwidth"


def system_strategy(cfg: ManagerConfig, node: Obj) -> Obj | None:
    """The node's SystemStrategy; the network-bandwidth annotation overrides totalNetworkBandwidth.

    An annotation that is not a quantity makes the whole strategy None (koord-manager logs the error
    and writes no systemStrategy).
    """
    strategy = node_strategy(cfg.system, node)
    annotations = ((node or {}).get("metadata") or {}).get("annotations") or {}
    raw = annotations.get(ANNOTATION_NETWORK_BANDWIDTH)
    if raw is not None:
        try:
            strategy["totalNetworkBandwidth"] = quantity.canonical(raw)
        except (quantity.QuantityError, TypeError, ValueError):
            log.error("node %s: annotation %s=%r is not a quantity; no systemStrategy",
                      ((node or {}).get("metadata") or {}).get("name", ""), ANNOTATION_NETWORK_BANDWIDTH, raw)
            return None
    return strategy


def host_applications(cfg: ManagerConfig, node: Obj) -> list[Obj]:
    """The applications of the first matching host-application nodeConfig, else the cluster list (no merging)."""
    entry = first_matching(cfg.host_application.get("nodeConfigs") or [], node)
    apps = (entry if entry is not None else cfg.host_application).get("applications") or []
    return copy.deepcopy(apps)


def node_slo_spec(cfg: ManagerConfig, node: Obj, old_spec: Obj | None = None) -> Obj:
    """The NodeSLO spec for ``node``: each strategy from the first matching node strategy, else the cluster's.

    ``extensions`` carries over from ``old_spec`` (no extension plugins are registered, as in open
    source Koordinator), ``{}`` when there is none. Empty ``hostApplications`` and a None
    ``systemStrategy`` are left out, as Go's ``omitempty`` does.
    """
    spec: Obj = {
        "resourceUsedThresholdWithBE": node_strategy(cfg.threshold, node),
        "resourceQOSStrategy": node_strategy(cfg.resource_qos, node),
        "cpuBurstStrategy": node_strategy(cfg.cpu_burst, node),
    }
    system = system_strategy(cfg, node)
    if system is not None:
        spec["systemStrategy"] = system
    old_extensions = (old_spec or {}).get("extensions")
    spec["extensions"] = copy.deepcopy(old_extensions) if isinstance(old_extensions, dict) else {}
    apps = host_applications(cfg, node)
    if apps:
        spec["hostApplications"] = apps
    return spec
