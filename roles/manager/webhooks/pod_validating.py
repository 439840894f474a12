"""``/validate-pod``: Koordinator's QoS/priority rules and the ElasticQuota pod checks (B.6.2, B.6.4).

ClusterColocationProfile rules, reported together as one aggregate of field errors:

* UPDATE only: the raw ``koordinator.sh/qosClass`` label, the raw priority class and (unless
  ``ColocationProfileSkipValidatingPriority``) the ``koordinator.sh/priority`` label are immutable;
* a pod requesting batch-cpu/batch-memory must have QoS BE;
* BE may not be combined with priority none or koord-prod, LSR not with none, mid, batch or free;
* an LSR/LSE pod must request a non-zero, whole number of CPUs.

Then the gang keys (not a Koordinator check: its scheduler silently treats a bad value as "no gang"
or as the default): annotations ``gang.scheduling.koordinator.sh/min-available`` and
``gang.scheduling.koordinator.sh/total-number`` and the label
``pod-group.scheduling.sigs.k8s.io/min-available`` must be non-negative integers; on UPDATE only a
value that changed is checked, so a pod admitted before this check can still be updated.

Then the quota check: a pod may not be bound to a parent quota (unless
``SupportParentQuotaSubmitPod``), and on UPDATE its ``quota.scheduling.koordinator.sh/preemptible``
label may not change.

As in Koordinator a rejection is answered as an error with HTTP code 400 (controller-runtime's
``admission.Errored(http.StatusBadRequest, err)``), its message the aggregate text.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from koordinator.apis import extension, gang, quantity
from koordinator.runtime.webhook import AdmissionResponse, allowed, errored
from koordinator_roles.manager.webhooks import _request as rq
from koordinator_roles.manager.webhooks import fielderrors as fe
from koordinator_roles.manager.webhooks.listers import Listers
from koordinator_roles.manager.webhooks.quota_topology import QuotaTopology

Obj = dict[str, Any]

GATE_SKIP_VALIDATING_PRIORITY = "ColocationProfileSkipValidatingPriority"

# (metadata field, key) of the gang member counts the coscheduling plugin reads as integers.
GANG_INTEGER_KEYS = (
    ("annotations", gang.ANNOTATION_MIN),
    ("annotations", gang.ANNOTATION_TOTAL),
    ("labels", gang.LABEL_LIGHTWEIGHT_MIN),
)
_INT32_MAX = 2**31 - 1

QOS_PATH = f"labels.{extension.LABEL_POD_QOS}"
PRIORITY_LABEL_PATH = f"labels.{extension.LABEL_POD_PRIORITY}"
REQUESTS_PATH = "pod.spec.containers[*].resources.requests"

# (QoS, priority classes it may not be combined with)
FORBIDDEN_COMBINATIONS = (
    (extension.QOS_BE, (extension.PRIORITY_NONE, extension.PRIORITY_PROD)),
    (extension.QOS_LSR, (extension.PRIORITY_NONE, extension.PRIORITY_MID, extension.PRIORITY_BATCH,
                         extension.PRIORITY_FREE)),
)


class PodValidatingHandler:
    """The ``/validate-pod`` handler."""

    def __init__(self, listers: Listers, gates: Mapping[str, bool] | None = None) -> None:
        self.listers = listers
        self.gates = dict(gates or {})

    def __call__(self, request: Obj) -> AdmissionResponse:
        if rq.ignored(request, "pods"):
            return allowed()
        op = rq.operation(request)
        if op not in (rq.CREATE, rq.UPDATE):
            return allowed()
        try:
            pod, old = rq.object_and_old(request)
        except rq.BadObject as exc:
            return errored(400, str(exc))
        errors = colocation_errors(pod, old, skip_priority_label=self.gates.get(GATE_SKIP_VALIDATING_PRIORITY, False))
        if errors:
            return errored(400, fe.aggregate(errors))
        errors = gang_errors(pod, old)
        if errors:
            return errored(400, fe.aggregate(errors))
        topology = QuotaTopology.build(self.listers.elastic_quotas(), self.listers)
        message = topology.validate_pod(pod, old, op, self.gates)
        if message:
            return errored(400, message)
        return allowed()


def colocation_errors(pod: Obj, old: Obj | None, *, skip_priority_label: bool = False) -> list[fe.FieldError]:
    """The ClusterColocationProfile rules, in Koordinator's order."""
    errors: list[fe.FieldError] = []
    if old is not None:
        errors += fe.immutable(QOS_PATH, extension.qos_class(pod), extension.qos_class(old))
        errors += fe.immutable("spec.priority", extension.priority_class(pod), extension.priority_class(old))
        if not skip_priority_label:
            errors += fe.immutable(PRIORITY_LABEL_PATH, rq.labels(pod).get(extension.LABEL_POD_PRIORITY, ""),
                                   rq.labels(old).get(extension.LABEL_POD_PRIORITY, ""))
    requests = _pod_requests(pod)
    qos = extension.qos_class(pod)
    if (requests.get(extension.BATCH_CPU, 0) or requests.get(extension.BATCH_MEMORY, 0)) and qos != extension.QOS_BE:
        errors.append(fe.required(QOS_PATH, "must specify koordinator QoS BE with koordinator colocation resources"))
    priority = extension.priority_class(pod)
    for forbidden_qos, classes in FORBIDDEN_COMBINATIONS:
        if qos == forbidden_qos and priority in classes:
            errors.append(fe.forbidden("Pod", f"{extension.LABEL_POD_QOS}={qos} and priorityClass={priority} "
                                              "cannot be used in combination"))
    if qos in (extension.QOS_LSR, extension.QOS_LSE):
        cpu = requests.get(extension.CPU, 0)
        if cpu == 0:
            errors.append(fe.required(REQUESTS_PATH, "LSR Pod must declare the requested CPUs"))
        elif cpu % 1000:
            text = quantity.format_quantity(Decimal(cpu) / 1000)
            errors.append(fe.invalid(REQUESTS_PATH, text, "the requested CPUs of LSR Pod must be integer"))
    return errors


def gang_errors(pod: Obj, old: Obj | None) -> list[fe.FieldError]:
    """Gang member counts that are not non-negative integers (on UPDATE: only values that changed)."""
    errors: list[fe.FieldError] = []
    for field, key in GANG_INTEGER_KEYS:
        values = rq.meta(pod).get(field) or {}
        if key not in values:
            continue
        value = values[key]
        if old is not None and (rq.meta(old).get(field) or {}).get(key) == value:
            continue
        if not (isinstance(value, str) and value.isascii() and value.isdigit()):
            errors.append(fe.invalid(f"{field}.{key}", value, "must be a non-negative integer"))
        elif int(value) > _INT32_MAX:
            errors.append(fe.invalid(f"{field}.{key}", value, f"must be no greater than {_INT32_MAX}"))
    return errors


def _pod_requests(pod: Obj) -> dict[str, int]:
    try:
        return extension.pod_requests(pod)
    except quantity.QuantityError:
        return {}  # the API server's own validation reports the bad quantity
