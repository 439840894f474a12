"""The ElasticQuota plugin's background controllers (leader only): built-in quotas, status, over-use revoke."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from koordinator.apis import quota as q
from koordinator.runtime.errors import AlreadyExists, NotFound
from koordinator_roles.scheduler.plugins.helper.preemption import pod_start_time
from koordinator_roles.scheduler.plugins.elasticquota import tree as t

if TYPE_CHECKING:
    from koordinator_roles.scheduler.plugins.elasticquota.plugin import ElasticQuota

log = logging.getLogger("koordinator.scheduler.elasticquota")

STATUS_INTERVAL = 1.0
#: Quota status patches per round at most (see QuotaStatusController.sync_once).
MAX_STATUS_PATCHES = 100
RETRY_INTERVAL = 1.0


class BuiltinQuotaController:
    """Create ``koordinator-root-quota``, ``-system-quota`` and ``-default-quota`` when absent."""

    name = "builtin-quotas"

    def __init__(self, plugin: "ElasticQuota") -> None:
        self.plugin = plugin
        self.client = plugin.handle.client

    def objects(self) -> list[dict]:
        args = self.plugin.args
        ns = args.quota_group_namespace

        def eq(name: str, labels: dict, spec: dict) -> dict:
            return {"apiVersion": "scheduling.sigs.k8s.io/v1alpha1", "kind": "ElasticQuota",
                    "metadata": {"name": name, "namespace": ns, "labels": labels}, "spec": spec}

        root_max = {"cpu": str(q.DEFAULT_GROUP_MAX_VALUE), "memory": str(q.DEFAULT_GROUP_MAX_VALUE)}
        return [
            eq(q.ROOT_QUOTA, {q.LABEL_IS_PARENT: "true", q.LABEL_ALLOW_LENT_RESOURCE: "false", q.LABEL_PARENT: ""},
               {"max": root_max}),
            eq(q.SYSTEM_QUOTA, {q.LABEL_PARENT: q.ROOT_QUOTA}, {"max": dict(args.system_quota_group_max)}),
            eq(q.DEFAULT_QUOTA, {q.LABEL_PARENT: q.ROOT_QUOTA}, {"max": dict(args.default_quota_group_max)}),
        ]

    def ensure(self) -> bool:
        """Create what is missing; True once all exist."""
        ok = True
        for obj in self.objects():
            meta = obj["metadata"]
            try:
                self.client.get("ElasticQuota", meta["name"], meta["namespace"])
                continue
            except NotFound:
                pass
            try:
                self.client.create(obj)
            except AlreadyExists:
                pass
            except NotFound:  # the namespace does not exist yet
                try:
                    self.client.create({"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": meta["namespace"]}})
                except AlreadyExists:
                    pass
                ok = False
            except Exception as e:  # noqa: BLE001 - retried
                log.warning("could not create built-in ElasticQuota name=%s: %s", meta["name"], e)
                ok = False
        return ok

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                if self.ensure():
                    return
            except Exception as e:  # noqa: BLE001 - retried
                log.warning("built-in ElasticQuotas: %s", e)
            stop.wait(RETRY_INTERVAL)


def status_annotations(info: t.QuotaInfo) -> dict[str, str]:
    return {
        q.ANNOTATION_RUNTIME: t.resource_list_json(info.runtime),
        q.ANNOTATION_REQUEST: t.resource_list_json(info.request),
        q.ANNOTATION_CHILD_REQUEST: t.resource_list_json(info.child_request),
        q.ANNOTATION_GUARANTEED: t.resource_list_json(info.guaranteed),
        q.ANNOTATION_ALLOCATED: t.resource_list_json(info.allocated),
        q.ANNOTATION_NON_PREEMPTIBLE_REQUEST: t.resource_list_json(info.np_request),
        q.ANNOTATION_NON_PREEMPTIBLE_USED: t.resource_list_json(info.np_used),
    }


class QuotaStatusController:
    """Every second: the status annotations and ``status.used`` of the ElasticQuotas, patched when changed
    (at most ``max_patches`` per round)."""

    name = "quota-status"

    def __init__(self, plugin: "ElasticQuota", interval: float = STATUS_INTERVAL,
                 max_patches: int = MAX_STATUS_PATCHES) -> None:
        self.plugin = plugin
        self.client = plugin.handle.client
        self.interval = interval
        self.max_patches = max_patches
        self._next = 0

    def sync_once(self) -> int:
        """Patch the quotas whose written status differs from the tree, at most ``max_patches`` per round,
        going round the quotas so that every one gets its turn; returns how many were patched."""
        informer = self.plugin.quota_informer
        if informer is None:
            return 0
        mgr = self.plugin.manager
        patched = 0
        objs = sorted(informer.store.list(), key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        start = self._next % len(objs) if objs else 0
        for i, obj in enumerate(objs[start:] + objs[:start]):
            if patched >= self.max_patches:
                # Thousands of quotas all changing (a scheduling burst) would otherwise cost as many writes
                # per second as the bindings themselves: the rest are written in the next rounds.
                self._next = start + i
                return patched
            meta = obj.get("metadata") or {}
            with mgr.lock:
                mgr.refresh()
                info = mgr.quotas.get(meta.get("name", ""))
                if info is None or (info.namespace and info.namespace != meta.get("namespace")):
                    continue
                want = status_annotations(info)
                used = dict(info.used)
            current = meta.get("annotations") or {}
            changed = {k: v for k, v in want.items() if current.get(k) != v}
            used_now = t.from_quantities((obj.get("status") or {}).get("used"))
            patch: dict[str, Any] = {}
            if changed:
                patch["metadata"] = {"annotations": changed}
            if used_now != used or "used" not in (obj.get("status") or {}):
                patch["status"] = {"used": t.to_quantities(used)}
            if not patch:
                continue
            try:
                out = self.client.patch("ElasticQuota", meta["name"], patch, namespace=meta.get("namespace"))
                if "status" in patch and t.from_quantities((out.get("status") or {}).get("used")) != used:
                    # A server with a status subresource ignores status on the main resource.
                    self.client.patch("ElasticQuota", meta["name"], {"status": patch["status"]},
                                      namespace=meta.get("namespace"), subresource="status")
                patched += 1
            except NotFound:
                continue
            except Exception as e:  # noqa: BLE001 - retried next round
                log.warning("could not update ElasticQuota status name=%s: %s", meta.get("name"), e)
        self._next = start
        return patched

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            try:
                self.sync_once()
            except Exception:  # noqa: BLE001 - retried next round
                log.exception("ElasticQuota status sync failed")
            stop.wait(self.interval)


class QuotaOverUsedRevokeController:
    """``monitorAllQuotas``: evict a quota's least important preemptible pods once ``used > runtime`` has lasted
    longer than ``delayEvictTime``, until ``used ≤ runtime``."""

    name = "quota-overused-revoke"

    def __init__(self, plugin: "ElasticQuota", now: Callable[[], float] | None = None) -> None:
        self.plugin = plugin
        self.client = plugin.handle.client
        self.recorder = plugin.handle.event_recorder
        self.now = now or time.monotonic
        self.over_since: dict[str, float] = {}

    def victims(self, quota_name: str) -> tuple[list[t.PodEntry], t.Res, t.Res]:
        """The pods to evict from an over-used quota (already terminating ones count as gone)."""
        mgr = self.plugin.manager
        with mgr.lock:
            mgr.refresh()
            info = mgr.quotas[quota_name]
            runtime, used = dict(info.runtime), dict(info.used)
            pods = [e for e in mgr.pods.values() if e.quota == quota_name and e.assigned]
        remaining = dict(used)
        candidates = []
        for e in pods:
            if (e.pod.get("metadata") or {}).get("deletionTimestamp"):
                t.add_into(remaining, e.request, -1)
            elif not e.non_preemptible:
                candidates.append(e)
        wall = time.time()
        # Least important first: lower priority, then the most recently started.
        candidates.sort(key=lambda e: (e.priority, -pod_start_time(e.pod, wall)))
        removed: list[t.PodEntry] = []
        for e in candidates:
            if not t.exceeded(remaining, runtime):
                break
            t.add_into(remaining, e.request, -1)
            removed.append(e)
        # Give back the most important removed pods that fit after all.
        victims = []
        for e in reversed(removed):
            trial = t.add(remaining, e.request)
            if not t.exceeded(trial, runtime):
                remaining = trial
            else:
                victims.append(e)
        return victims, runtime, used

    def sync_once(self) -> list[str]:
        """One round; returns the keys of the pods evicted."""
        mgr = self.plugin.manager
        now = self.now()
        over: list[str] = []
        with mgr.lock:
            mgr.refresh()
            for name, info in mgr.quotas.items():
                if name in (q.ROOT_QUOTA, q.SYSTEM_QUOTA) or info.children:
                    continue
                if t.exceeded(info.used, info.runtime):
                    over.append(name)
        for name in list(self.over_since):
            if name not in over:
                del self.over_since[name]
        evicted: list[str] = []
        for name in over:
            since = self.over_since.setdefault(name, now)
            if now - since < self.plugin.args.delay_evict_time:
                continue
            victims, runtime, used = self.victims(name)
            for e in victims:
                meta = e.pod.get("metadata") or {}
                message = (f"pod is evicted because quota {name} is over-used, runtime: "
                           f"{t.print_resource_list(runtime)}, used: {t.print_resource_list(used)}")
                try:
                    self.client.evict(meta.get("name", ""), meta.get("namespace", ""))
                except NotFound:
                    continue
                except Exception as e2:  # noqa: BLE001 - retried next round
                    log.warning("could not evict pod=%s quota=%s: %s", e.key, name, e2)
                    continue
                evicted.append(e.key)
                log.info("revoked pod=%s quota=%s runtime=%s used=%s", e.key, name, json.dumps(
                    t.to_quantities(runtime)), json.dumps(t.to_quantities(used)))
                if self.recorder is not None:
                    self.recorder.event(e.pod, "Warning", "QuotaOverUsed", message)
            if victims:
                self.over_since.pop(name, None)
        return evicted

    def run(self, stop: threading.Event) -> None:
        interval = max(self.plugin.args.revoke_pod_interval, 0.05)
        while not stop.is_set():
            try:
                self.sync_once()
            except Exception:  # noqa: BLE001 - retried next round
                log.exception("ElasticQuota revoke round failed")
            stop.wait(interval)
