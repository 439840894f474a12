"""The workload controllers a cluster without kube-controller-manager lacks.

``koordinator local`` runs them (as ``koordinator controllers``, a child process) so that
Deployments, ReplicaSets, Jobs, DaemonSets and StatefulSets make pods, dependents are garbage
collected and aggregating ClusterRoles show the rules they aggregate, with the semantics, status
fields, conditions and events of kube-controller-manager.
On a real cluster none of this runs: kube-controller-manager does it. (Namespace deletion, the
``default`` ServiceAccount and PodDisruptionBudget status are kept by the embedded API server
itself, so they work with ``koordinator apiserver`` alone.)

Each controller is a module with ``register(runtime)``; :data:`CONTROLLERS` names them the way
kube-controller-manager's ``--controllers`` flag does.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

# name -> module; registration order is this order.
CONTROLLERS = {
    "clusterrole-aggregation": "koordinator.controllers.clusterroleaggregation",
    "replicaset": "koordinator.controllers.replicaset",
    "deployment": "koordinator.controllers.deployment",
    "job": "koordinator.controllers.job",
    "daemonset": "koordinator.controllers.daemonset",
    "statefulset": "koordinator.controllers.statefulset",
    "garbagecollector": "koordinator.controllers.garbagecollector",
}


def select(spec: Iterable[str]) -> list[str]:
    """The controllers a ``--controllers`` list enables, as kube-controller-manager reads it.

    ``*`` enables every controller, ``name`` one controller, ``-name`` disables one; an unknown name
    is a ValueError naming it.
    """
    entries = [e.strip() for e in spec if e.strip()]
    everything = "*" in entries
    enabled: set[str] = set()
    disabled: set[str] = set()
    for entry in entries:
        if entry == "*":
            continue
        name = entry[1:] if entry.startswith("-") else entry
        if name not in CONTROLLERS:
            raise ValueError(f"--controllers: unknown controller {name!r} (known: {', '.join(CONTROLLERS)})")
        (disabled if entry.startswith("-") else enabled).add(name)
    return [n for n in CONTROLLERS if (everything or n in enabled) and n not in disabled]


def register(runtime: Any, names: Iterable[str] | None = None) -> list[str]:
    """Register the named controllers (default: all) on ``runtime``; returns their names."""
    chosen = list(CONTROLLERS) if names is None else list(names)
    for name in chosen:
        importlib.import_module(CONTROLLERS[name]).register(runtime)
    return chosen
