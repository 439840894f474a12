"""DefaultPreBind (Koordinator): sends what the PreBind plugins changed on the pod as one patch before Bind.

The framework hands every PreBind plugin the same deep copy of the pod; this plugin runs last
(the configuration appends it to preBind) and patches the difference in labels and annotations
(a JSON merge patch, retried on conflicts and throttling by the client). When the difference is only
added or changed annotations and the profile binds with DefaultBinder alone, they travel in the
Binding instead (the API server sets them with ``spec.nodeName``): one API call per pod, not two.
"""

from __future__ import annotations

from typing import Any

from koordinator.apis import reservation as rv
from koordinator.runtime.errors import ApiError
from koordinator_roles.scheduler.framework.interfaces import PreBindPlugin, ReservationPreBindPlugin
from koordinator_roles.scheduler.framework.status import BINDING_ANNOTATIONS, CycleState, Status
from koordinator_roles.scheduler.framework.types import PodInfo

NAME = "DefaultPreBind"


def metadata_patch(original: dict, modified: dict) -> dict | None:
    """A merge patch turning original's labels/annotations into modified's, or None when equal."""
    patch: dict[str, Any] = {}
    for field in ("labels", "annotations"):
        old = (original.get("metadata") or {}).get(field) or {}
        new = (modified.get("metadata") or {}).get(field) or {}
        if old == new:
            continue
        diff: dict[str, Any] = {k: v for k, v in new.items() if old.get(k) != v}
        diff.update({k: None for k in old if k not in new})
        patch[field] = diff
    return {"metadata": patch} if patch else None


class DefaultPreBind(PreBindPlugin):
    name = NAME

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, modified: dict) -> Status | None:
        if rv.is_reserve_pod(pod.pod):
            return self._pre_bind_reservation(state, pod, node_name, modified)
        patch = metadata_patch(pod.pod, modified)
        if patch is None:
            return None
        annotations = patch["metadata"].get("annotations")
        if (annotations and set(patch["metadata"]) == {"annotations"} and None not in annotations.values()
                and self._binds_with_default_binder()):
            state.write(BINDING_ANNOTATIONS, annotations)
            return None
        try:
            self.handle.client.patch("Pod", pod.name, patch, namespace=pod.namespace, patch_type="merge")
        except ApiError as err:
            return Status.error(f"failed to patch pod {pod.key}: {err}")
        return None

    def _pre_bind_reservation(self, state: CycleState, pod: PodInfo, node_name: str, modified: dict) -> Status | None:
        """A reserve pod (Koordinator's frameworkext): the changes go to its Reservation. The Reservation is
        loaded, ``status.nodeName`` set on a copy, the ReservationPreBind plugins change it, and the metadata
        difference (theirs and the PreBind plugins' on the pod copy) is patched onto the Reservation."""
        name = rv.reservation_name_of(pod.pod)
        try:
            original = self.handle.client.get(rv.KIND, name)
        except ApiError as err:
            return Status.error(f"failed to get reservation {name}: {err}")
        meta = original.get("metadata") or {}
        reservation = {**original, "metadata": {**meta, "labels": dict(meta.get("labels") or {}),
                                                "annotations": dict(meta.get("annotations") or {})},
                       "status": {**(original.get("status") or {}), "nodeName": node_name}}
        fwk = getattr(self.handle, "framework", None)
        for plugin in (getattr(fwk, "points", None) or {}).get("preBind", []):
            if isinstance(plugin, ReservationPreBindPlugin):
                status = plugin.pre_bind_reservation(state, reservation, node_name)
                if status is not None and not status.is_success():
                    return status.with_plugin(plugin.name)
        pod_patch = metadata_patch(pod.pod, modified)
        for field, diff in ((pod_patch or {}).get("metadata") or {}).items():
            target = reservation["metadata"][field]
            for key, value in diff.items():
                if value is None:
                    target.pop(key, None)
                else:
                    target[key] = value
        patch = metadata_patch(original, reservation)
        if patch is None:
            return None
        try:
            self.handle.client.patch(rv.KIND, name, patch, patch_type="merge")
        except ApiError as err:
            return Status.error(f"failed to patch reservation {name}: {err}")
        return None

    def _binds_with_default_binder(self) -> bool:
        fwk = getattr(self.handle, "framework", None)
        points = getattr(fwk, "points", None) or {}
        # Reservation binds reserve pods only (it Skips every other pod), so DefaultBinder still binds this one.
        return [p.name for p in points.get("bind", []) if p.name != "Reservation"] == ["DefaultBinder"]


def new(args: dict, handle: Any) -> DefaultPreBind:
    return DefaultPreBind(handle)
