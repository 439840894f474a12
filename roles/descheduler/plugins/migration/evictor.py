"""The evictor interpreter (reference §1.7.8): how a PMJ's pod is actually removed.

Policy: pod label ``koordinator.sh/evict-policy``, else the PMJ's label, else ``evictionPolicy``; unknown names fall
back to the default. ``Eviction`` posts a policy/v1 Eviction (the API server enforces PodDisruptionBudgets and answers
429 when one forbids it); ``Delete`` deletes the pod; ``SoftEviction`` only annotates it for another agent. Every
call is guarded by a non-blocking ``evictQPS``/``evictBurst`` token bucket (no token: ``TooManyEvictions``), and
deletes carry a UID precondition so a replacement pod of the same name is never removed by mistake.
"""

from __future__ import annotations

import json
from typing import Any

from koordinator.apis import migration as mj
from koordinator.apis.timestamps import now_rfc3339
from koordinator.runtime.ratelimit import TokenBucket
from koordinator_roles.descheduler.plugins.migration.args import EVICTION_POLICIES, MigrationControllerArgs

Obj = dict[str, Any]


class EvictionError(Exception):
    """The pod could not be evicted now (the reconcile retries with backoff)."""


def reason_of(job: Obj) -> tuple[str, str]:
    """(reason, trigger) from the PMJ's annotations; an empty reason falls back to the trigger, then ``NotSet``."""
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    trigger = annotations.get(mj.ANNOTATION_EVICT_TRIGGER, "")
    reason = annotations.get(mj.ANNOTATION_EVICT_REASON, "") or trigger or "NotSet"
    return reason, trigger


class EvictorInterpreter:
    """Removes pods per policy; ``client`` is the runtime client."""

    def __init__(self, client: Any, args: MigrationControllerArgs) -> None:
        self.client = client
        self.args = args
        self.bucket = TokenBucket(args.evict_qps, args.evict_burst)

    def policy(self, pod: Obj, job: Obj) -> str:
        for obj in (pod, job):
            name = ((obj.get("metadata") or {}).get("labels") or {}).get(mj.LABEL_EVICT_POLICY)
            if name:
                return name if name in EVICTION_POLICIES else self.args.eviction_policy
        return self.args.eviction_policy

    def evict(self, pod: Obj, job: Obj) -> str:
        """Remove ``pod`` for ``job``; returns the policy used. EvictionError or ApiError on failure."""
        if not self.bucket.try_take():
            raise EvictionError("TooManyEvictions: the eviction rate limit is reached")
        meta = pod["metadata"]
        options = dict((job.get("spec") or {}).get("deleteOptions") or self.args.default_delete_options or {})
        options.setdefault("preconditions", {"uid": meta.get("uid")})
        policy = self.policy(pod, job)
        if policy == "Eviction":
            self.client.evict(meta["name"], meta["namespace"], delete_options=options)
        elif policy == "Delete":
            self.client.delete("Pod", meta["name"], meta["namespace"],
                               grace_period_seconds=options.get("gracePeriodSeconds"),
                               propagation_policy=options.get("propagationPolicy"),
                               preconditions=options.get("preconditions"))
        else:
            reason, trigger = reason_of(job)
            value = json.dumps({"timestamp": now_rfc3339(), "deleteOptions": options, "initiator": trigger,
                                "reason": reason})
            self.client.patch("Pod", meta["name"], {"metadata": {"annotations": {mj.ANNOTATION_SOFT_EVICTION: value}}},
                              namespace=meta["namespace"])
        return policy
