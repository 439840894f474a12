"""The plugin API: one small class per plugin, implementing the extension points it needs.

A plugin subclasses :class:`Plugin` and the mixins of its extension points and is registered by
name (:mod:`.registry`) with a factory ``factory(args: dict, handle: Handle) -> Plugin``. Which
plugins run at which point, with which weights and args, comes from the profile
(``KubeSchedulerConfiguration.profiles[].plugins`` / ``pluginConfig``), as in kube-scheduler.

Conventions (kube-scheduler's, in Python):

- A status of ``None`` is Success. Unschedulable reasons are the user-facing strings that end up
  in "0/N nodes are available: 3 Insufficient cpu, ...".
- ``pod`` arguments are :class:`~.types.PodInfo`; ``node`` arguments :class:`~.types.NodeInfo`.
- Filter and Score have a per-node form (``filter``/``score``) and an optional batch form over
  snapshot rows (``filter_nodes``/``score_nodes``) that the framework prefers: see
  :class:`BatchFilterResult`. A plugin need only implement one; the per-node form is what
  preemption uses on modified NodeInfos, so a batch-only filter must also provide ``filter``.
- Koordinator's frameworkext additions are extension points too (transformers, reservation
  nomination/restore/filter/score/prebind, ResizePod, NextPod, PreferNodes, ForgetPod, controllers); the
  framework calls them when a plugin implements them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterable, NamedTuple, Protocol

import numpy as np

from koordinator_roles.scheduler.framework.status import CycleState, Status
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo, QueuedPodInfo

if TYPE_CHECKING:
    from koordinator_roles.scheduler.framework.snapshot import Snapshot

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Plugin:
    """Base of every plugin: ``name`` is the registry name (``"NodeResourcesFit"``)."""

    name = ""


# -- results ---------------------------------------------------------------------------------------

@dataclass
class PreFilterResult:
    """PreFilter may restrict the nodes worth filtering (NodeName, NodeAffinity on metadata.name).

    ``node_names`` None means all nodes; results of several plugins are intersected.
    """

    node_names: set[str] | None = None

    def merge(self, other: "PreFilterResult | None") -> "PreFilterResult":
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return PreFilterResult(set(other.node_names))
        return PreFilterResult(self.node_names & other.node_names)


class Failure(NamedTuple):
    """One reason a batch filter rejected some nodes: ``mask`` is aligned with the ``rows`` it was given."""

    code: int
    reason: str
    mask: np.ndarray


@dataclass
class BatchFilterResult:
    """A batch filter's verdict on ``rows``: ``passed[i]`` for ``rows[i]``, and why the others failed.

    A failed node's Status is the union of the reasons whose mask covers it (code: the more
    severe one), e.g. a node both short of cpu and of memory has "Insufficient cpu" and
    "Insufficient memory". Every failed node must be covered by at least one failure.
    """

    passed: np.ndarray
    failures: list[Failure] = field(default_factory=list)
    # Set when the plugin knows that every node passed: the framework then does not scan ``passed``.
    all_passed: bool = False

    @classmethod
    def all_pass(cls, n: int) -> "BatchFilterResult":
        """Every one of ``n`` rows passed (``passed`` is a shared read-only array)."""
        passed = _ALL_PASSED.get(n)
        if passed is None:
            if len(_ALL_PASSED) >= 64:
                _ALL_PASSED.clear()
            passed = _ALL_PASSED[n] = np.ones(n, dtype=bool)
            passed.flags.writeable = False
        return cls(passed, all_passed=True)


_ALL_PASSED: dict[int, np.ndarray] = {}  # by length; candidate counts repeat cycle after cycle


@dataclass
class PostFilterResult:
    """PostFilter's outcome: the node the pod was nominated to (preemption)."""

    nominated_node_name: str = ""


@dataclass(frozen=True)
class ClusterEvent:
    """A change that may make a rejected pod schedulable: resource kind and action.

    kinds: "Pod", "Node", "NodeMetric", ...; actions: "Add", "Update", "Delete" (or "*"). ``hint``
    (optional) is called with (pod, old, new) and returns True when the event may help that pod
    (kube's QueueingHint); None means "may help".
    """

    kind: str
    action: str = "*"
    hint: Callable[[dict, Any, Any], bool] | None = field(default=None, compare=False)

    def matches(self, kind: str, action: str) -> bool:
        return (self.kind == kind or self.kind == "*") and (self.action == "*" or self.action == action)


# -- the handle plugins receive ---------------------------------------------------------------------

class Handle(Protocol):
    """What a plugin factory receives (kube's ``framework.Handle`` plus Koordinator's ExtendedHandle).

    - ``snapshot()``: the current cycle's :class:`~.snapshot.Snapshot` (valid during a cycle);
    - ``client``: :class:`koordinator.runtime.client.Client`; ``informers``: the shared
      :class:`~koordinator.runtime.informer.InformerFactory` (ask for informers in the factory so
      that they sync before scheduling starts);
    - ``event_recorder``; ``framework``: the :class:`FrameworkHandle` of the plugin's profile;
    - ``nominator``: pods nominated to nodes by preemption (``nominated_pods_for_node(name)``);
    - ``add_forget_handler(fn)``: ``fn(pod_info, node_name)`` when an assumed pod is forgotten;
    - ``scheduler_name``: the profile's schedulerName; ``parallelism``: from the configuration.
    """

    client: Any
    informers: Any
    event_recorder: Any
    framework: "FrameworkHandle"
    nominator: Any
    scheduler_name: str
    parallelism: int

    def snapshot(self) -> "Snapshot": ...

    def add_forget_handler(self, fn: Callable[[PodInfo, str], None]) -> None: ...


class FrameworkHandle(Protocol):
    """The profile's plugin runner, as far as plugins (preemption) need it."""

    def run_pre_filter_add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo,
                               node: NodeInfo) -> Status | None: ...

    def run_pre_filter_remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo,
                                  node: NodeInfo) -> Status | None: ...

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        """Every filter plugin on one (possibly modified) NodeInfo; the first failure, or None."""

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo,
                                               node: NodeInfo) -> Status | None: ...


# -- extension points --------------------------------------------------------------------------------

class PreEnqueuePlugin(Plugin):
    def pre_enqueue(self, pod: PodInfo) -> Status | None:
        """Gate a pod before it enters the active queue (SchedulingGates, Coscheduling)."""
        raise NotImplementedError


class QueueSortPlugin(Plugin):
    def sort_key(self, qpi: QueuedPodInfo) -> tuple:
        """The heap key: smaller pops first (PrioritySort: (-priority, timestamp))."""
        raise NotImplementedError


class PreFilterExtensions:
    """Incremental updates of PreFilter state when preemption adds/removes pods on a node."""

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status | None:
        return None

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status | None:
        return None


class PreFilterPlugin(Plugin):
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: "Snapshot") -> tuple[PreFilterResult | None, Status | None]:
        """Compute per-pod state; Skip skips this plugin's Filter; a rejection fails the pod on every node."""
        raise NotImplementedError

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None


class FilterPlugin(Plugin):
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        raise NotImplementedError

    # Optional batch form; plugins define it to be vectorised:
    # def filter_nodes(self, state, pod, snapshot, rows: np.ndarray) -> BatchFilterResult


class PostFilterPlugin(Plugin):
    def post_filter(self, state: CycleState, pod: PodInfo,
                    statuses: "NodeStatusReader") -> tuple[PostFilterResult | None, Status | None]:
        raise NotImplementedError


class PreScorePlugin(Plugin):
    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: "Snapshot",
                  rows: np.ndarray) -> Status | None:
        """Per-pod scoring state over the feasible rows; Skip skips this plugin's Score."""
        raise NotImplementedError


class ScorePlugin(Plugin):
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> int:
        raise NotImplementedError

    # Optional batch form: def score_nodes(self, state, pod, snapshot, rows) -> np.ndarray[int64]
    # Optional: def normalize_score(self, state, pod, snapshot, rows, scores: np.ndarray) -> Status | None
    #   (in place; the result must lie in [0, 100])


class ReservePlugin(Plugin):
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        raise NotImplementedError

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Undo reserve; must be idempotent and may run even if this plugin's reserve was not called."""


class PermitPlugin(Plugin):
    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status | None, float]:
        """None/Success, a rejection, or Wait with a timeout in seconds (see ``WaitingPod``)."""
        raise NotImplementedError


class PreBindPlugin(Plugin):
    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, modified: dict) -> Status | None:
        """Runs off the scheduling thread. ``modified`` is a copy of the pod whose ``metadata.labels`` and
        ``metadata.annotations`` may be changed: the changes are sent as one patch before Bind (Koordinator's
        DefaultPreBind)."""
        raise NotImplementedError


class BindPlugin(Plugin):
    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """Bind, or return Skip to let the next bind plugin do it."""
        raise NotImplementedError


class PostBindPlugin(Plugin):
    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        raise NotImplementedError


class EnqueueExtensions:
    """Plugins that reject pods say which cluster events may make those pods schedulable again."""

    def events_to_register(self) -> list[ClusterEvent]:
        raise NotImplementedError


# -- Koordinator extension points (frameworkext); empty unless a plugin implements them ---------------

class PreFilterTransformer:
    def before_pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PodInfo | None, Status | None]:
        """May return a modified copy of the pod (None: unchanged)."""
        return None, None

    def after_pre_filter(self, state: CycleState, pod: PodInfo) -> Status | None:
        return None


class FilterTransformer:
    def before_filter(self, state: CycleState, pod: PodInfo,
                      node: NodeInfo) -> tuple[PodInfo | None, NodeInfo | None, Status | None]:
        return None, None, None


class ScoreTransformer:
    def before_score(self, state: CycleState, pod: PodInfo, rows: np.ndarray) -> tuple[PodInfo | None,
                                                                                        np.ndarray | None,
                                                                                        Status | None]:
        return None, None, None


class PostFilterTransformer:
    def after_post_filter(self, state: CycleState, pod: PodInfo, statuses: "NodeStatusReader",
                          status: Status | None) -> None:
        return None


class ReservationNominator:
    def nominate_reservation(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Any, Status | None]:
        """The reservation the pod should use on the chosen node (None: none)."""
        return None, None


class ReservationRestorePlugin:
    def pre_restore_reservation(self, state: CycleState, pod: PodInfo) -> Status | None:
        return None

    def restore_reservation(self, state: CycleState, pod: PodInfo, matched: list, unmatched: list,
                            node: NodeInfo) -> tuple[Any, Status | None]:
        return None, None


class ReservationFilterPlugin:
    def filter_reservation(self, state: CycleState, pod: PodInfo, reservation: Any,
                           node_name: str) -> Status | None:
        return None


class ReservationScorePlugin:
    def score_reservation(self, state: CycleState, pod: PodInfo, reservation: Any, node_name: str) -> int:
        return 0


class ReservationPreBindPlugin:
    def pre_bind_reservation(self, state: CycleState, reservation: dict, node_name: str) -> Status | None:
        return None


class ResizePodPlugin:
    def resize_pod(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        return None


class NextPodPlugin:
    def next_pod(self, unavailable: Collection[str] = ()) -> dict | None:
        """A pod the queue should hand out next (Coscheduling keeps gangs together), or None; never one whose
        ``namespace/name`` is in ``unavailable`` (the queue could not hand it out just now)."""
        return None


class PreferNodesPlugin:
    def prefer_nodes(self, state: CycleState, pod: PodInfo) -> list[str]:
        """Nodes to try first, in order, after PreFilter (SchedulingHint): the framework runs each through the
        full Filter and schedules the pod on the first that passes, without searching further."""
        return []


class ForgetPodHandler:
    def forget_pod(self, pod: PodInfo, node_name: str) -> None:
        return None


class ControllerProvider:
    def new_controllers(self) -> list[Any]:
        """Background controllers (Reservation, ElasticQuota, PodGroup) the role registers on the Runtime: each
        has ``name`` and ``run(stop: threading.Event)``, and runs on the leader only."""
        return []


class NodeStatusReader(Protocol):
    """Why each node failed Filter in this cycle (the diagnosis), as PostFilter sees it."""

    def node_status(self, node_name: str) -> Status | None: ...

    def node_names(self) -> Iterable[str]: ...

    def unresolvable(self, node_name: str) -> bool: ...
