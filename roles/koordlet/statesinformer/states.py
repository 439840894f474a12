"""What the koordlet knows about its node (reference A.6.1): the Node, its pods, NodeSLO and NodeMetric.

- Node, NodeSLO and NodeMetric come from shared informers on this node's name
  (``metadata.name=<node>``); NodeSLO and NodeMetric specs are merged onto the koordlet defaults
  (:mod:`.nodeslo`, :mod:`.nodemetric_spec`).
- Pods come from the kubelet's ``/pods/`` when a :class:`~.kubelet.KubeletClient` is given (polled
  by :meth:`StatesInformer.run`), else from an informer on ``spec.nodeName=<node>``. Terminated pods
  (Succeeded, Failed) are left out.

Consumers register callbacks per kind (``node``, ``pods``, ``nodeslo``, ``nodemetric``). A callback
runs on the thread that noticed the change (the informer's delivery thread, or the kubelet
poller) when what the consumer sees changed: the Node's labels or annotations, the set of pods or
any of them, the merged NodeSLO or NodeMetric spec. Runs are coalesced: while the callbacks of a
kind run, further changes of that kind collapse into one more run.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from koordinator.apis.extension import kube_qos_class
from koordinator_roles.koordlet.statesinformer.kubelet import KubeletClient, poll_pods
from koordinator_roles.koordlet.statesinformer.nodemetric_spec import merge_node_metric_spec
from koordinator_roles.koordlet.statesinformer.nodeslo import merge_node_slo_spec
from koordinator_roles.koordlet.system.cgroup import CgroupLayout

log = logging.getLogger("koordinator.koordlet.statesinformer")

Obj = dict[str, Any]

NODE = "node"
PODS = "pods"
NODESLO = "nodeslo"
NODEMETRIC = "nodemetric"
CALLBACK_KINDS = (NODE, PODS, NODESLO, NODEMETRIC)

TERMINATED_PHASES = ("Succeeded", "Failed")


@dataclass(frozen=True)
class PodMeta:
    """A pod on this node and its cgroup directory (relative, from :meth:`CgroupLayout.pod_dir`).

    ``pod`` is the shared cached object: read it, never modify it.
    """

    pod: dict
    cgroup_dir: str
    layout: CgroupLayout | None = field(default=None, compare=False, repr=False)

    @property
    def uid(self) -> str:
        return (self.pod.get("metadata") or {}).get("uid", "")

    @property
    def namespace(self) -> str:
        return (self.pod.get("metadata") or {}).get("namespace", "")

    @property
    def name(self) -> str:
        return (self.pod.get("metadata") or {}).get("name", "")

    @property
    def kube_qos(self) -> str:
        return kube_qos_class(self.pod)

    def containers(self) -> list[tuple[str, str, str]]:
        """``(name, container ID "runtime://id", relative cgroup dir)`` of every container status with an ID.

        A container ID the layout cannot place (unknown runtime with the systemd driver, malformed)
        is left out with a debug log: the collectors then skip that container.
        """
        out = []
        statuses = (self.pod.get("status") or {}).get("containerStatuses") or []
        for status in statuses:
            cid = status.get("containerID") if isinstance(status, dict) else None
            if not cid:
                continue
            if self.layout is None:
                out.append((status.get("name", ""), cid, ""))
                continue
            try:
                rel = self.layout.container_dir(self.kube_qos, self.uid, cid)
            except ValueError as err:
                log.debug("pod %s/%s container %s: %s", self.namespace, self.name, status.get("name"), err)
                continue
            out.append((status.get("name", ""), cid, rel))
        return out


def pod_meta(pod: Obj, layout: CgroupLayout) -> PodMeta:
    """The :class:`PodMeta` of ``pod``; ValueError naming the pod when it has no usable UID or QoS."""
    md = pod.get("metadata") or {}
    uid = md.get("uid")
    if not uid:
        raise ValueError(f"pod {md.get('namespace')}/{md.get('name')}: no metadata.uid")
    try:
        cgroup_dir = layout.pod_dir(kube_qos_class(pod), uid)
    except ValueError as err:
        raise ValueError(f"pod {md.get('namespace')}/{md.get('name')}: {err}") from None
    return PodMeta(pod=pod, cgroup_dir=cgroup_dir, layout=layout)


class _Callbacks:
    """The callbacks of one kind, run coalesced: a change during a run causes exactly one more run."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._lock = threading.Lock()
        self._fns: dict[str, Callable[[], None]] = {}
        self._running = False
        self._pending = False

    def register(self, name: str, fn: Callable[[], None]) -> None:
        with self._lock:
            self._fns[name] = fn

    def fire(self) -> None:
        with self._lock:
            if self._running:
                self._pending = True
                return
            self._running = True
        while True:
            with self._lock:
                fns = list(self._fns.items())
            for name, fn in fns:
                try:
                    fn()
                except Exception:  # one consumer's bug must not starve the others
                    log.exception("states callback failed kind=%s name=%s", self.kind, name)
            with self._lock:
                if not self._pending:
                    self._running = False
                    return
                self._pending = False


class StatesInformer:
    """The node's Node, pods, NodeSLO and NodeMetric, with change callbacks (see the module docstring).

    ``informers`` is the Runtime's :class:`~koordinator.runtime.informer.InformerFactory` (the
    Runtime starts and stops the informers this creates). With ``kubelet`` the pods come from the
    kubelet and :meth:`run` must be registered as a runnable; without it :meth:`run` returns at once.
    """

    def __init__(self, informers: Any, node_name: str, layout: CgroupLayout, *,
                 kubelet: KubeletClient | None = None, kubelet_sync_interval: float = 10.0) -> None:
        if not node_name:
            raise ValueError("the states informer needs the node name (--node-name)")
        self.node_name = node_name
        self.layout = layout
        self.kubelet = kubelet
        self.kubelet_sync_interval = kubelet_sync_interval
        self._lock = threading.Lock()
        self._callbacks = {kind: _Callbacks(kind) for kind in CALLBACK_KINDS}

        by_name = f"metadata.name={node_name}"
        self._node_informer = informers.informer("Node", field_selector=by_name)
        self._slo_informer = informers.informer("NodeSLO", field_selector=by_name)
        self._metric_informer = informers.informer("NodeMetric", field_selector=by_name)
        self._pod_informer = None if kubelet is not None else \
            informers.informer("Pod", field_selector=f"spec.nodeName={node_name}")

        self._node_seen: tuple | None = None
        self._node_slo = merge_node_slo_spec(None)
        self._node_slo_seen: tuple = (False, self._node_slo)
        self._node_metric: Obj | None = None
        self._node_metric_spec = merge_node_metric_spec(None)
        self._pods: list[PodMeta] = []
        self._pods_fingerprint: Any = None
        self._kubelet_synced = threading.Event()
        self._bad_pods: set[str] = set()

        self._regs = [
            self._node_informer.add_handler(*self._handlers(self._on_node)),
            self._slo_informer.add_handler(*self._handlers(self._on_node_slo)),
            self._metric_informer.add_handler(*self._handlers(self._on_node_metric)),
        ]
        if self._pod_informer is not None:
            self._regs.append(self._pod_informer.add_handler(*self._handlers(self._on_api_pods)))

    @classmethod
    def from_runtime(cls, runtime: Any, node_name: str, layout: CgroupLayout, **kwargs: Any) -> "StatesInformer":
        """Built on ``runtime.informers``."""
        return cls(runtime.informers, node_name, layout, **kwargs)

    @staticmethod
    def _handlers(fn: Callable[[], None]) -> tuple:
        # Every event only says "look again": the state is recomputed from the cache's current
        # object, so a burst of events that ends where it started fires no callback at all.
        return (lambda _obj: fn(), lambda _old, _new: fn(), lambda _obj: fn())

    # -- reading ---------------------------------------------------------------------------------

    def node(self) -> Obj | None:
        """This node's Node object (cached, do not modify), None until it has been seen."""
        return self._node_informer.store.get(self.node_name)

    def pods(self) -> list[PodMeta]:
        """The pods on this node that have not terminated."""
        with self._lock:
            return list(self._pods)

    def node_slo(self) -> Obj:
        """The NodeSLO spec merged onto the koordlet defaults (the defaults alone before any NodeSLO)."""
        with self._lock:
            return self._node_slo

    def host_applications(self) -> list[Obj]:
        """The NodeSLO's ``hostApplications`` (empty when none)."""
        return list(self.node_slo().get("hostApplications") or [])

    def node_metric(self) -> Obj | None:
        """This node's NodeMetric object (cached, do not modify), None until it has been seen."""
        with self._lock:
            return self._node_metric

    def node_metric_spec(self) -> Obj:
        """The NodeMetric spec merged with the defaults, minimums applied (:mod:`.nodemetric_spec`)."""
        with self._lock:
            return self._node_metric_spec

    def register_callback(self, kind: str, name: str, fn: Callable[[], None]) -> None:
        """Call ``fn()`` when the state of ``kind`` (node, pods, nodeslo, nodemetric) changes."""
        if kind not in self._callbacks:
            raise ValueError(f"unknown states callback kind {kind!r}: want one of {', '.join(CALLBACK_KINDS)}")
        self._callbacks[kind].register(name, fn)

    def has_synced(self) -> bool:
        """Every informer listed and its state computed; with a kubelet, one pod list received."""
        if not all(reg.has_synced() for reg in self._regs):
            return False
        return self.kubelet is None or self._kubelet_synced.is_set()

    # -- the kubelet loop --------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Poll the kubelet's pods every ``kubelet_sync_interval`` until ``stop`` (nothing to do without a kubelet)."""
        if self.kubelet is None:
            return
        poll_pods(self.kubelet, self._on_kubelet_pods, stop, self.kubelet_sync_interval)

    # -- updates -----------------------------------------------------------------------------------

    def _on_node(self) -> None:
        node = self.node()
        md = (node or {}).get("metadata") or {}
        seen = (node is not None, md.get("labels") or {}, md.get("annotations") or {})
        with self._lock:
            if seen == self._node_seen:
                return
            self._node_seen = seen
        self._callbacks[NODE].fire()

    def _on_node_slo(self) -> None:
        obj = self._slo_informer.store.get(self.node_name)
        merged = merge_node_slo_spec((obj or {}).get("spec"))
        seen = (obj is not None, merged)
        with self._lock:
            if seen == self._node_slo_seen:
                return
            self._node_slo_seen = seen
            self._node_slo = merged
        self._callbacks[NODESLO].fire()

    def _on_node_metric(self) -> None:
        obj = self._metric_informer.store.get(self.node_name)
        merged = merge_node_metric_spec((obj or {}).get("spec"))
        with self._lock:
            spec_changed = merged != self._node_metric_spec or (obj is None) != (self._node_metric is None)
            self._node_metric = obj
            self._node_metric_spec = merged
        if spec_changed:
            self._callbacks[NODEMETRIC].fire()

    def _on_api_pods(self) -> None:
        pods = self._pod_informer.store.list()
        fingerprint = sorted(((p.get("metadata") or {}).get("uid"), (p.get("metadata") or {}).get("resourceVersion"))
                             for p in pods)
        self._set_pods(pods, fingerprint)

    def _on_kubelet_pods(self, pods: list[Obj]) -> None:
        self._kubelet_synced.set()
        self._set_pods(pods, pods)

    def _set_pods(self, pods: list[Obj], fingerprint: Any) -> None:
        with self._lock:
            if fingerprint == self._pods_fingerprint:
                return
        metas = []
        for pod in pods:
            if (pod.get("status") or {}).get("phase") in TERMINATED_PHASES:
                continue
            try:
                metas.append(pod_meta(pod, self.layout))
            except ValueError as err:
                key = str(err)
                if key not in self._bad_pods and len(self._bad_pods) < 1000:
                    self._bad_pods.add(key)
                    log.warning("pod skipped: %s", err)
        metas.sort(key=lambda m: (m.namespace, m.name))
        with self._lock:
            self._pods_fingerprint = fingerprint
            self._pods = metas
        self._callbacks[PODS].fire()
