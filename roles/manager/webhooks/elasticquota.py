"""The ElasticQuota webhooks (``scheduling.sigs.k8s.io/v1alpha1``), reference B.6.3 and B.6.4.

* mutating, CREATE: parent label defaults to ``koordinator-root-quota``, the tree id is copied from
  the parent, the ``shared-weight`` annotation defaults to (or is re-keyed after) ``spec.max``;
* validating, CREATE/UPDATE/DELETE: the self checks, the tree rules and the deletion guards of
  :mod:`koordinator_roles.manager.webhooks.quota_topology`.

Rejections are answered as Koordinator does, with HTTP code 400 and Koordinator's message.
Gates honoured: ``ElasticQuotaEnableUpdateResourceKey`` (a child's max keys need only be a subset
of its parent's). ``ElasticQuotaGuaranteeUsage`` and ``MultiQuotaTree`` are not supported by this
build (the feature-gate table refuses them).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Mapping
from typing import Any

from koordinator.runtime.webhook import AdmissionResponse, allowed, errored
from koordinator_roles.manager.webhooks import _request as rq
from koordinator_roles.manager.webhooks.listers import Listers
from koordinator_roles.manager.webhooks.quota_topology import QuotaError, QuotaTopology

log = logging.getLogger("koordinator.manager.webhooks.quota")

Obj = dict[str, Any]

RESOURCE = "elasticquotas"


class ElasticQuotaMutatingHandler:
    """``/mutate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` (acts on CREATE)."""

    def __init__(self, listers: Listers, gates: Mapping[str, bool] | None = None) -> None:
        self.listers = listers
        self.gates = dict(gates or {})

    def __call__(self, request: Obj) -> AdmissionResponse:
        if rq.ignored(request, RESOURCE) or rq.operation(request) != rq.CREATE:
            return allowed()
        try:
            quota, _ = rq.object_and_old(request)
        except rq.BadObject as exc:
            return errored(400, str(exc))
        mutated = copy.deepcopy(quota)
        try:
            QuotaTopology.build(self.listers.elastic_quotas(), self.listers).fill_defaults(mutated)
        except QuotaError as exc:
            log.error("failed to mutate quota %s: %s", rq.name(quota), exc)
            return errored(400, str(exc))
        return allowed() if mutated == quota else AdmissionResponse(patched=mutated)


class ElasticQuotaValidatingHandler:
    """``/validate-scheduling-sigs-k8s-io-v1alpha1-elasticquota`` (CREATE, UPDATE, DELETE)."""

    def __init__(self, listers: Listers, gates: Mapping[str, bool] | None = None) -> None:
        self.listers = listers
        self.gates = dict(gates or {})

    def __call__(self, request: Obj) -> AdmissionResponse:
        if rq.ignored(request, RESOURCE):
            return allowed()
        op = rq.operation(request)
        try:
            if op == rq.DELETE:
                quota, old = rq.obj(request, "oldObject"), None
                if quota is None:
                    # No old object (an API server older than 1.16): nothing to judge by.
                    return allowed()
            else:
                quota, old = rq.object_and_old(request)
        except rq.BadObject as exc:
            return errored(400, str(exc))
        topology = QuotaTopology.build(self.listers.elastic_quotas(), self.listers)
        try:
            if op == rq.CREATE:
                message = topology.validate_add(quota, self.gates)
            elif op == rq.UPDATE:
                message = topology.validate_update(old, quota, self.gates)
            elif op == rq.DELETE:
                message = topology.validate_delete(quota)
            else:
                message = None
        except QuotaError as exc:
            message = str(exc)
        if message:
            log.warning("rejected quota %s (%s): %s", rq.name(quota), op, message)
            return errored(400, message)
        return allowed()
