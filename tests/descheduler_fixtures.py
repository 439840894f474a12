"""What the descheduler plugin tests share: node and pod dicts, a recording evictor, a pod index over plain
dicts, a recording evict plugin for the framework's EvictorProxy, and an informer factory fixture.

A plugin test file keeps a thin ``node``/``pod`` of its own where its plugin wants other defaults (a pool
label, an owner, an age); the dicts' shape is this module's.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from typing import Any, Callable, Iterator

import pytest

from koordinator.runtime.informer import InformerFactory
from koordinator_roles.descheduler.framework.interfaces import EvictOptions, EvictPlugin

Obj = dict[str, Any]


def ago(seconds: float) -> str:
    """An RFC 3339 timestamp ``seconds`` before now (creationTimestamp's one-second resolution)."""
    return datetime.fromtimestamp(time.time() - seconds, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def node(name: str, *, cpu: str = "4", memory: str = "8Gi", pods: str = "110", labels: dict | None = None,
         taints: list | None = None, unschedulable: bool = False, **allocatable: str) -> Obj:
    """A Node with ``allocatable`` cpu, memory, pods and any other resource given as a keyword."""
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {"taints": list(taints or []), "unschedulable": unschedulable},
            "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": pods, **allocatable}}}


def pod(name: str, node_name: str, *, cpu: str = "100m", memory: str | None = None, ns: str = "default",
        labels: dict | None = None, phase: str = "Running", image: str = "app:1", created: float | None = None,
        owner: tuple[str, str] | None = None, **spec: Any) -> Obj:
    """A Pod bound to ``node_name`` with one container requesting ``cpu`` (and ``memory`` when given).

    ``created``: seconds before now for creationTimestamp (none when None); ``owner``: (kind, name) of an
    apps/v1 controller owner reference (its uid is the name). Further keywords go into ``spec``.
    """
    meta: Obj = {"name": name, "namespace": ns, "labels": dict(labels or {})}
    if created is not None:
        meta["creationTimestamp"] = ago(created)
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1], "apiVersion": "apps/v1", "uid": owner[1]}]
    requests = {"cpu": cpu} if memory is None else {"cpu": cpu, "memory": memory}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": node_name,
                     "containers": [{"name": "c", "image": image, "resources": {"requests": requests}}], **spec},
            "status": {"phase": phase}}


def pod_index(pods: list[Obj]) -> Callable[[str], list[Obj]]:
    """A PluginHandle ``pod_index`` over plain dicts: the pods on a node, in the list's order."""
    return lambda node_name: [p for p in pods if p["spec"].get("nodeName") == node_name]


def _never(pod: Obj) -> bool:
    return False


class RecordingEvictor:
    """The Evictor protocol, recording every eviction asked for.

    ``refuse`` pods fail Filter and ``pre_refuse`` ones PreEvictionFilter; ``fail`` pods fail the eviction
    itself; ``on_evict`` sees every eviction call first. ``node_limit`` mimics the global per-node limiter
    (an eviction past it fails) and ``full_nodes`` are nodes whose limit is reached from the start.
    """

    def __init__(self, refuse: Callable[[Obj], bool] = _never, fail: Callable[[Obj], bool] = _never,
                 on_evict: Callable[[Obj], None] = lambda p: None, pre_refuse: Callable[[Obj], bool] = _never,
                 node_limit: int | None = None, full_nodes: tuple[str, ...] = ()) -> None:
        self.refuse, self.fail, self.on_evict, self.pre_refuse = refuse, fail, on_evict, pre_refuse
        self.node_limit, self.full_nodes = node_limit, full_nodes
        self.evicted: list[tuple[str, EvictOptions]] = []
        #: Every pod an eviction was asked for, in order, whether or not it succeeded.
        self.attempts: list[str] = []
        self.per_node: dict[str, int] = {}

    @property
    def calls(self) -> int:
        """How many evictions were asked for."""
        return len(self.attempts)

    def filter(self, pod: Obj) -> bool:
        return not self.refuse(pod)

    def pre_eviction_filter(self, pod: Obj) -> bool:
        return not self.pre_refuse(pod)

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        name = pod["metadata"]["name"]
        self.attempts.append(name)
        self.on_evict(pod)
        if self.fail(pod):
            return False
        node_name = pod["spec"].get("nodeName", "")
        if self.node_limit is not None and self.per_node.get(node_name, 0) + 1 > self.node_limit:
            return False
        self.per_node[node_name] = self.per_node.get(node_name, 0) + 1
        self.evicted.append((name, options))
        return True

    def node_limit_exceeded(self, node_name: str) -> bool:
        return node_name in self.full_nodes or (
            self.node_limit is not None and self.per_node.get(node_name, 0) == self.node_limit)

    def namespace_limit_exceeded(self, namespace: str) -> bool:
        return False

    @property
    def names(self) -> list[str]:
        """The pods evicted, in order."""
        return [n for n, _ in self.evicted]


class RecordingEvictPlugin(EvictPlugin):
    """An Evict plugin for the framework's EvictorProxy that records the pods it is asked to evict."""

    name = "Recorder"

    def __init__(self) -> None:
        self.evicted: list[str] = []

    def evict(self, pod: Obj, options: EvictOptions) -> bool:
        self.evicted.append(pod["metadata"]["name"])
        return True


@pytest.fixture
def informers(client) -> Iterator[InformerFactory]:
    """An informer factory on the embedded API server's ``client``, stopped after the test."""
    factory = InformerFactory(client)
    try:
        yield factory
    finally:
        factory.stop(5)
