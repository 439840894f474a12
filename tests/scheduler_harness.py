"""Run koord-scheduler as a role for tests: registered on a Runtime in this process, against a real API server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import koordinator_roles.scheduler as scheduler_role
from koordinator_roles.scheduler.wiring import build
from tests.role_harness import InProcessRole

#: The namespace the scheduler tests' pods live in (each test has a server of its own).
NS = "sched"


class InProcessScheduler(InProcessRole):
    """The scheduler role on a Runtime in this process, as ``koordinator --role=scheduler`` runs it.

    ``registry`` replaces the in-tree plugin registry (tests add plugins of their own, the way
    out-of-tree plugins are added to kube-scheduler).
    """

    def __init__(self, kubeconfig: Path, *flags: str, registry: Any = None) -> None:
        super().__init__(scheduler_role, "scheduler", kubeconfig, *flags)
        if registry is None:
            scheduler_role.check_options(self.options)
            config = self.options.role_options.configuration
        else:
            config = scheduler_role.load_configuration(self.options.config, registry)
        # The file watcher validates against koord-scheduler's own plugin names: no hot reload with extra plugins.
        self.parts = build(self.runtime, config, config_path=self.options.config if registry is None else None,
                           registry=registry)

    @property
    def scheduler(self) -> Any:
        return self.parts.scheduler


def node(name: str, cpu: str = "4", memory: str = "8Gi", *, pods: str = "110", labels: dict | None = None,
         taints: list | None = None, extra: dict | None = None, annotations: dict | None = None) -> dict:
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods, **(extra or {})}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})},
                         "annotations": annotations or {}},
            "spec": {"taints": taints or []},
            "status": {"capacity": dict(allocatable), "allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def pod(name: str, namespace: str, cpu: str | None = "100m", memory: str | None = "128Mi", *,
        scheduler: str = "koord-scheduler", priority: int | None = None, labels: dict | None = None,
        spec: dict | None = None, annotations: dict | None = None) -> dict:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    body: dict = {"apiVersion": "v1", "kind": "Pod",
                  "metadata": {"name": name, "namespace": namespace, "labels": labels or {},
                               "annotations": annotations or {}},
                  "spec": {"schedulerName": scheduler,
                           "containers": [{"name": "c", "image": "busybox",
                                           "resources": {"requests": requests}}], **(spec or {})}}
    if priority is not None:
        body["spec"]["priority"] = priority
    return body


def condition(pod_obj: dict, kind: str = "PodScheduled") -> dict | None:
    return next((c for c in (pod_obj.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)

