"""pods/binding, pods/eviction, graceful pod deletion and PodDisruptionBudget status.

No kube-controller-manager runs beside the embedded server, yet eviction needs current
PDB status (expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed). So the
server computes it itself, like the disruption controller, after every batch of writes that
touched pods or budgets in a namespace.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta, timezone
from typing import Any

from koordinator.apiserver import errors
from koordinator.apiserver.http import Response
from koordinator.apiserver.objects import condition, now_rfc3339, set_condition
from koordinator.apiserver.resources import ResourceType
from koordinator.apiserver.store import Entry
from koordinator.apiserver.writer import ObjectWriter
from koordinator.apis.selectors import label_selector_from_dict

Obj = dict[str, Any]
PDB_STORAGE = "policy/poddisruptionbudgets"
DISRUPTED_POD_TIMEOUT = timedelta(minutes=2)


def _success(code: int = 201) -> Response:
    return Response.json(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                                "code": code})


def is_ready(pod: Obj) -> bool:
    cond = condition(pod, "Ready")
    return bool(cond and cond.get("status") == "True")


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if isinstance(value, str) and value.endswith("%"):
        pct = int(value[:-1])
        return math.ceil(pct * total / 100) if round_up else math.floor(pct * total / 100)
    return int(value)


class PodSubresources:
    """Binding, eviction and the derived PDB status, on behalf of the API server."""

    def __init__(self, writer: ObjectWriter) -> None:
        self.writer = writer
        self._dirty_namespaces: set[str] = set()

    @property
    def _pods(self) -> ResourceType:
        return self.writer.registry.get("", "v1", "pods")

    @property
    def _pdbs(self) -> ResourceType:
        return self.writer.registry.get("policy", "v1", "poddisruptionbudgets")

    # -- binding ---------------------------------------------------------------

    def bind(self, namespace: str, name: str, body: Any, query: dict[str, str]) -> Response:
        if not isinstance(body, dict) or not isinstance(body.get("target"), dict) or not body["target"].get("name"):
            raise errors.invalid("Binding", "", name, [errors.required("target.name")])
        entry = self.writer.get(self._pods, f"{namespace}/{name}", name)
        pod = entry.obj()
        md = pod["metadata"]
        want_uid = (body.get("metadata") or {}).get("uid")
        if want_uid and want_uid != md["uid"]:
            raise errors.conflict("pods/binding", name, f"Precondition failed: UID in precondition: {want_uid}, "
                                  f"UID in object meta: {md['uid']}")
        node = body["target"]["name"]
        spec = pod.setdefault("spec", {})
        if md.get("deletionTimestamp"):
            raise errors.conflict("pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise errors.conflict("pods/binding", name,
                                  f"pod {name} is already assigned to node \"{spec['nodeName']}\"")
        if spec.get("schedulingGates"):
            raise errors.conflict("pods/binding", name, f"pod {name} has non-empty .spec.schedulingGates")
        if query.get("dryRun") == "All":
            return _success()
        spec["nodeName"] = node
        annotations = (body.get("metadata") or {}).get("annotations")
        if annotations:
            md.setdefault("annotations", {}).update(annotations)
        set_condition(pod, {"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": now_rfc3339()})
        self.writer.put(self._pods, pod)
        return _success()

    # -- eviction --------------------------------------------------------------

    def evict(self, namespace: str, name: str, body: Any, query: dict[str, str]) -> Response:
        if not isinstance(body, dict) or body.get("kind", "Eviction") != "Eviction":
            raise errors.bad_request("the body of a pods/eviction request must be a policy/v1 Eviction")
        options = body.get("deleteOptions") or {}
        entry = self.writer.get(self._pods, f"{namespace}/{name}", name)
        pod = entry.obj()
        phase = (pod.get("status") or {}).get("phase")
        dry_run = query.get("dryRun") == "All" or options.get("dryRun") == ["All"]
        if phase in ("Succeeded", "Failed", "Pending") or pod["metadata"].get("deletionTimestamp"):
            return self._delete(entry, name, options, dry_run)
        labels = pod["metadata"].get("labels") or {}
        budgets = [e for e in self.writer.store.items(PDB_STORAGE).values()
                   if e.fields.get("metadata.namespace") == namespace
                   and label_selector_from_dict((e.obj().get("spec") or {}).get("selector"),
                                                nil_matches_nothing=True).matches(labels)]
        if len(budgets) > 1:
            raise errors.StatusError(500, "InternalError", "This pod has more than one PodDisruptionBudget, which "
                                     "the eviction subresource does not support.")
        if not budgets:
            return self._delete(entry, name, options, dry_run)
        pdb_entry = budgets[0]
        pdb = pdb_entry.obj()
        pdb_name = pdb["metadata"]["name"]
        status = pdb.get("status") or {}
        refused = "Cannot evict pod as it would violate the pod's disruption budget."
        if status.get("observedGeneration", 0) < pdb["metadata"].get("generation", 1):
            raise errors.too_many_requests(refused, 10, [{"reason": "DisruptionBudget", "message":
                                           f"The disruption budget {pdb_name} is still being processed by the server."}])
        if not is_ready(pod):
            policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy") or "IfHealthyBudget"
            healthy, desired = status.get("currentHealthy", 0), status.get("desiredHealthy", 0)
            if policy == "AlwaysAllow" or healthy >= desired > 0:
                return self._delete(entry, name, options, dry_run)
        if status.get("disruptionsAllowed", 0) <= 0:
            # No Retry-After here (kube-apiserver sends one only while the budget is being processed).
            raise errors.too_many_requests(refused, 0, [{"reason": "DisruptionBudget", "message": (
                f"The disruption budget {pdb_name} needs {status.get('desiredHealthy', 0)} healthy pods and has "
                f"{status.get('currentHealthy', 0)} currently")}])
        if dry_run:
            return _success()
        status = dict(status)
        status["disruptionsAllowed"] = status["disruptionsAllowed"] - 1
        status["disruptedPods"] = {**(status.get("disruptedPods") or {}), name: now_rfc3339()}
        pdb["status"] = status
        self.writer.put(self._pdbs, pdb)
        return self._delete(entry, name, options, dry_run)

    def _delete(self, entry: Entry, name: str, options: Obj, dry_run: bool) -> Response:
        if dry_run:
            return _success()
        self.writer.delete_object(self._pods, entry.key, name, options, {})
        return _success()

    # -- graceful deletion -----------------------------------------------------

    def deletion_grace(self, pod: Obj, requested: Any) -> int:
        """Seconds a delete waits for a kubelet: always 0 unless the server runs with graceful pod deletion."""
        if self.writer.options.pod_deletion != "graceful":
            return 0
        phase = (pod.get("status") or {}).get("phase")
        if not (pod.get("spec") or {}).get("nodeName") or phase in ("Succeeded", "Failed"):
            return 0
        if requested is not None:
            try:
                return max(int(requested), 0)
            except (TypeError, ValueError):
                raise errors.bad_request(f"invalid gracePeriodSeconds: {requested!r}") from None
        return int((pod.get("spec") or {}).get("terminationGracePeriodSeconds", 30))

    @staticmethod
    def deletion_time(grace: int) -> str:
        return (datetime.now(timezone.utc) + timedelta(seconds=grace)).strftime("%Y-%m-%dT%H:%M:%SZ")

    # -- PodDisruptionBudget status ------------------------------------------------

    def object_written(self, rt: ResourceType, obj: Obj) -> None:
        """Note a write that may change some budget's status; recomputed before the commit."""
        if rt.group == "" and rt.plural == "pods" or rt.group == "policy" and rt.plural == "poddisruptionbudgets":
            ns = obj["metadata"].get("namespace")
            budgets = self.writer.store.items(PDB_STORAGE).values()
            if ns and any(e.fields.get("metadata.namespace") == ns for e in budgets):
                self._dirty_namespaces.add(ns)
                self.writer.after_writes(self.refresh_budgets)

    def refresh_budgets(self) -> None:
        dirty, self._dirty_namespaces = self._dirty_namespaces, set()
        for ns in dirty:
            pods = [e.obj() for e in self.writer.store.items("pods").values()
                    if e.fields.get("metadata.namespace") == ns]
            for e in list(self.writer.store.items(PDB_STORAGE).values()):
                if e.fields.get("metadata.namespace") != ns:
                    continue
                pdb = e.obj()
                status = self.budget_status(pdb, pods)
                if status != pdb.get("status"):
                    pdb["status"] = status
                    self.writer.store.put(PDB_STORAGE, e.key, pdb)

    @staticmethod
    def budget_status(pdb: Obj, pods: list[Obj]) -> Obj:
        """What the disruption controller would write for ``pdb`` given the namespace's pods."""
        spec = pdb.get("spec") or {}
        selector = label_selector_from_dict(spec.get("selector"), nil_matches_nothing=True)
        matching = [p for p in pods if selector.matches(p["metadata"].get("labels") or {})
                    and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        now = datetime.now(timezone.utc)
        old = pdb.get("status") or {}
        alive = {p["metadata"]["name"] for p in matching if not p["metadata"].get("deletionTimestamp")}
        disrupted = {}
        for pod_name, when in (old.get("disruptedPods") or {}).items():
            try:
                at = datetime.strptime(when, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc)
            except ValueError:
                continue
            if pod_name in alive and now - at < DISRUPTED_POD_TIMEOUT:
                disrupted[pod_name] = when
        expected = len(matching)
        healthy = sum(1 for p in matching if is_ready(p) and not p["metadata"].get("deletionTimestamp")
                      and p["metadata"]["name"] not in disrupted)
        if spec.get("minAvailable") is not None:
            desired = _int_or_percent(spec["minAvailable"], expected, round_up=True)
        elif spec.get("maxUnavailable") is not None:
            desired = max(0, expected - _int_or_percent(spec["maxUnavailable"], expected, round_up=True))
        else:
            desired = expected
        allowed = max(0, healthy - desired)
        status: Obj = {
            "observedGeneration": pdb["metadata"].get("generation", 1),
            "expectedPods": expected,
            "currentHealthy": healthy,
            "desiredHealthy": desired,
            "disruptionsAllowed": allowed,
        }
        if disrupted:
            status["disruptedPods"] = disrupted
        cond = {"type": "DisruptionAllowed", "status": "True" if allowed > 0 else "False",
                "reason": "SufficientPods" if allowed > 0 else "InsufficientPods", "message": "",
                "observedGeneration": status["observedGeneration"]}
        prev = next((c for c in old.get("conditions") or [] if c.get("type") == "DisruptionAllowed"), None)
        cond["lastTransitionTime"] = (prev["lastTransitionTime"] if prev and prev.get("status") == cond["status"]
                                      else now_rfc3339())
        status["conditions"] = [cond]
        return status
