"""koord-manager's admission webhooks: what they decide, and registering them on a server.

The handlers take an AdmissionReview ``request`` dict and return a
:class:`koordinator.runtime.webhook.AdmissionResponse`; they read the cluster only through a
:class:`~koordinator_roles.manager.webhooks.listers.Listers` (informer caches in the manager).

========================================================  =========  ===============================
path                                                      mutating   gate (default)
========================================================  =========  ===============================
``/mutate-pod``                                           yes        PodMutatingWebhook (on)
``/validate-pod``                                         no         PodValidatingWebhook (on)
``/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``  yes        ElasticQuotaMutatingWebhook (on)
``/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota``  no       ElasticQuotaValidatingWebhook (on)
``/validate-configmap``                                   no         ConfigMapValidatingWebhook (off)
``/mutate-reservation``                                   yes        ReservationMutatingWebhook (off)
========================================================  =========  ===============================

Koordinator's node and pod-binding webhooks are not part of this build.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from koordinator_roles.manager import features
from koordinator_roles.manager.webhooks.configmap_validating import ConfigMapValidatingHandler
from koordinator_roles.manager.webhooks.elasticquota import ElasticQuotaMutatingHandler, ElasticQuotaValidatingHandler
from koordinator_roles.manager.webhooks.listers import InformerListers, Listers, StaticListers
from koordinator_roles.manager.webhooks.pod_mutating import PodMutatingHandler
from koordinator_roles.manager.webhooks.pod_validating import PodValidatingHandler
from koordinator_roles.manager.webhooks.reservation_mutating import ReservationMutatingHandler

__all__ = ["WEBHOOKS", "InformerListers", "Listers", "StaticListers", "build_handlers", "register_webhooks"]

MUTATE_POD = "/mutate-pod"
VALIDATE_POD = "/validate-pod"
MUTATE_QUOTA = "/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
VALIDATE_QUOTA = "/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota"
VALIDATE_CONFIGMAP = "/validate-configmap"
MUTATE_RESERVATION = "/mutate-reservation"

# (path, gate, mutating) — Koordinator's paths (reference B.1.2) this build serves.
WEBHOOKS: list[tuple[str, str, bool]] = [
    (MUTATE_POD, "PodMutatingWebhook", True),
    (VALIDATE_POD, "PodValidatingWebhook", False),
    (MUTATE_QUOTA, "ElasticQuotaMutatingWebhook", True),
    (VALIDATE_QUOTA, "ElasticQuotaValidatingWebhook", False),
    (VALIDATE_CONFIGMAP, "ConfigMapValidatingWebhook", False),
    (MUTATE_RESERVATION, "ReservationMutatingWebhook", True),
]

def _enabled(gates: Mapping[str, bool], gate: str) -> bool:
    """``gate``'s value in ``gates`` (either spelling), else Koordinator's default."""
    for name in (gate, *(alias for alias, canonical in features.ALIASES.items() if canonical == gate)):
        if name in gates:
            return bool(gates[name])
    return features.GATES.get(gate, False)


def build_handlers(listers: Listers, *, gates: Mapping[str, bool], config_namespace: str = "koordinator-system",
                   slo_config_name: str = "slo-controller-config", node_strategy_name_need_check: bool = False,
                   rng: random.Random | None = None) -> dict[str, Any]:
    """Every handler of :data:`WEBHOOKS` by path, whatever its gate."""
    return {
        MUTATE_POD: PodMutatingHandler(listers, gates, rng=rng),
        VALIDATE_POD: PodValidatingHandler(listers, gates),
        MUTATE_QUOTA: ElasticQuotaMutatingHandler(listers, gates),
        VALIDATE_QUOTA: ElasticQuotaValidatingHandler(listers, gates),
        VALIDATE_CONFIGMAP: ConfigMapValidatingHandler(listers, namespace=config_namespace, name=slo_config_name,
                                                       node_strategy_name_need_check=node_strategy_name_need_check),
        MUTATE_RESERVATION: ReservationMutatingHandler(listers, rng=rng),
    }


def register_webhooks(server: Any, listers: Listers, *, gates: Mapping[str, bool],
                      config_namespace: str = "koordinator-system", slo_config_name: str = "slo-controller-config",
                      node_strategy_name_need_check: bool = False) -> list[str]:
    """Register on ``server`` (``server.register(path, handler, mutating=...)``) the handlers whose gate is on.

    ``gates`` maps gate names to values; a gate it does not name keeps its default (reference B.1.3).
    Returns the registered paths in :data:`WEBHOOKS` order.
    """
    handlers = build_handlers(listers, gates=gates, config_namespace=config_namespace,
                              slo_config_name=slo_config_name,
                              node_strategy_name_need_check=node_strategy_name_need_check)
    paths: list[str] = []
    for path, gate, mutating in WEBHOOKS:
        if _enabled(gates, gate):
            server.register(path, handlers[path], mutating=mutating)
            paths.append(path)
    return paths
