"""The Reservation a ReservationFirst PodMigrationJob creates for its pod (reference §1.7.6)."""

from __future__ import annotations

import copy
import time
from typing import Any

from koordinator.apis import migration as mj
from koordinator.apis import reservation as rv

Obj = dict[str, Any]


def is_unscheduled(pod: Obj) -> bool:
    """A Pending pod the scheduler could not place (``PodScheduled=False``)."""
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("status") or {}).get("phase", "Pending") != "Pending":
        return False
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _owners(pod: Obj) -> list[Obj]:
    """Who may consume the reservation: an unscheduled pod itself; else the pod's controller's pods; a pod
    without a controller (nothing recreates it) only a pod of the same namespace and name."""
    meta = pod["metadata"]
    if is_unscheduled(pod):  # the pod itself goes into the reservation once the scheduler finds room
        return [{"object": {"kind": "Pod", "namespace": meta.get("namespace"), "name": meta.get("name"),
                            "uid": meta.get("uid")}}]
    ref = mj.controller_ref(pod)
    if ref is not None:
        return [{"controller": {**{k: ref[k] for k in ("apiVersion", "kind", "name", "uid") if k in ref},
                                "controller": True, "namespace": meta.get("namespace")}}]
    return [{"object": {"kind": "Pod", "namespace": meta.get("namespace"), "name": meta.get("name")}}]


def _exclude_node(spec: Obj, node: str) -> None:
    """Required node affinity ``metadata.name NotIn [node]`` on every term (one term if there is none)."""
    requirement = {"key": "metadata.name", "operator": "NotIn", "values": [node]}
    required = (spec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
                .setdefault("requiredDuringSchedulingIgnoredDuringExecution", {}))
    terms = required.get("nodeSelectorTerms") or []
    if not terms:
        terms = [{}]
    for term in terms:
        term.setdefault("matchFields", []).append(copy.deepcopy(requirement))
    required["nodeSelectorTerms"] = terms


def build_reservation(job: Obj, pod: Obj) -> Obj:
    """The Reservation for ``job`` (named :func:`migration.reservation_name`), its template taken from the pod."""
    options = (job.get("spec") or {}).get("reservationOptions") or {}
    template = copy.deepcopy(options.get("template") or {})
    meta = template.setdefault("metadata", {})
    meta["name"] = mj.reservation_name(job)
    labels = meta.setdefault("labels", {})
    labels[mj.LABEL_CREATED_BY] = mj.CREATED_BY_DESCHEDULER
    labels[rv.LABEL_RESERVATION_ORDER] = str(int(time.time() * 1000))
    spec = template.setdefault("spec", {})
    pod_meta, pod_spec = pod["metadata"], copy.deepcopy(pod.get("spec") or {})
    if not spec.get("template"):
        annotations = {k: v for k, v in (pod_meta.get("annotations") or {}).items()
                       if k != rv.ANNOTATION_RESERVATION_ALLOCATED}
        spec["template"] = {"metadata": {"namespace": pod_meta.get("namespace"),
                                         "labels": dict(pod_meta.get("labels") or {}), "annotations": annotations},
                            "spec": pod_spec}
    if not spec.get("owners"):
        spec["owners"] = _owners(pod)
    spec["allocateOnce"] = True
    tspec = spec["template"].setdefault("spec", {})
    node = pod_spec.get("nodeName")
    tspec.pop("nodeName", None)
    if not spec.get("ttl") and not spec.get("expires") and (job.get("spec") or {}).get("ttl"):
        if mj.ttl_seconds(job) > 0:
            spec["ttl"] = job["spec"]["ttl"]
    if node:
        _exclude_node(tspec, node)
    return {"apiVersion": rv.GROUP_VERSION, "kind": rv.KIND, "metadata": meta, "spec": spec}
