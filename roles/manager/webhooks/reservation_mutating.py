"""``/mutate-reservation`` (gate ReservationMutatingWebhook, off by default): ClusterColocationProfiles on Reservations.

On CREATE only (reference B.6.5): every profile whose ``selector`` matches the Reservation's own
labels (``namespaceSelector`` is ignored: a Reservation is cluster-scoped) is applied in name
order unless its ``probability`` skips it, with the pod webhook's rules
(:mod:`koordinator_roles.manager.webhooks.colocation_profiles`):

- labels, annotations, key mappings, suffixes, the QoS label and the koordinator-priority label go
  on the Reservation's metadata;
- ``schedulerName`` and ``priorityClassName`` (with the PriorityClass's priority and
  preemptionPolicy) go into ``spec.template.spec``, only when the Reservation has a template;
- ``patch`` is a strategic merge patch of the Reservation.

There is no batch resource translation. A missing PriorityClass fails the admission (500).
"""

from __future__ import annotations

import copy
import logging
import random
from typing import Any

from koordinator.runtime.webhook import AdmissionResponse, allowed, errored
from koordinator_roles.manager.webhooks import _request as rq
from koordinator_roles.manager.webhooks.colocation_profiles import (MutationError, apply_profile, matched_profiles,
                                                                    selector_matches, should_skip)
from koordinator_roles.manager.webhooks.listers import Listers

log = logging.getLogger("koordinator.manager.webhooks.reservation")

Obj = dict[str, Any]


def _template_spec(reservation: Obj) -> Obj | None:
    """The reserve pod's spec (created inside an existing template), None without a template."""
    template = (reservation.get("spec") or {}).get("template")
    if not isinstance(template, dict):
        return None
    if not isinstance(template.get("spec"), dict):
        template["spec"] = {}
    return template["spec"]


def _matches(profile: Obj, reservation: Obj) -> bool:
    selector = (profile.get("spec") or {}).get("selector")
    return selector is None or selector_matches(selector, rq.labels(reservation))


class ReservationMutatingHandler:
    """The ``/mutate-reservation`` handler; ``rng`` decides probabilities (``rng.randrange(100)``)."""

    def __init__(self, listers: Listers, rng: random.Random | None = None) -> None:
        self.listers = listers
        self.rng = rng or random.Random()

    def __call__(self, request: Obj) -> AdmissionResponse:
        if rq.ignored(request, "reservations"):
            return allowed()
        try:
            original = rq.obj(request)
        except rq.BadObject as exc:
            return errored(400, str(exc))
        if original is None or rq.operation(request) != rq.CREATE:
            return allowed()
        reservation = copy.deepcopy(original)
        try:
            self.mutate(reservation)
        except MutationError as exc:
            log.error("failed to mutate reservation %s: %s", rq.name(original), exc)
            return errored(exc.code, str(exc))
        return allowed() if reservation == original else AdmissionResponse(patched=reservation)

    def mutate(self, reservation: Obj) -> None:
        """Apply every matching profile (name order, probability permitting) in place."""
        profiles = self.listers.colocation_profiles()
        if not profiles:
            return
        for profile in matched_profiles(profiles, lambda p: _matches(p, reservation)):
            if should_skip(profile, self.rng):
                log.debug("skip profile %s for reservation %s by probability", rq.name(profile), rq.name(reservation))
                continue
            apply_profile(reservation, profile, self.listers, _template_spec)
