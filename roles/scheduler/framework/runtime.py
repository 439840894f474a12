"""The plugin runner of one profile (kube's ``frameworkImpl`` plus Koordinator's FrameworkExtender hooks).

It instantiates the profile's plugins once, orders them per extension point (multiPoint
expansion from :mod:`koordinator_roles.scheduler.config`) and runs them. The hot path is
:meth:`Framework.find_nodes_that_fit` and :meth:`Framework.prioritize`: batch plugins see all
candidate rows at once; per-node plugins only the rows still alive; the search stops once
``percentageOfNodesToScore`` feasible nodes were found, continuing next time where it stopped,
as kube-scheduler does.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from typing import Any, Callable

import numpy as np

from koordinator_roles.scheduler.framework import interfaces as fi
from koordinator_roles.scheduler.framework.diagnosis import Diagnosis
from koordinator_roles.scheduler.framework.snapshot import Snapshot
from koordinator_roles.scheduler.framework.status import (ERROR, SKIP, SUCCESS, UNSCHEDULABLE, UNSCHEDULABLE_AND_UNRESOLVABLE,
                                                          WAIT, CycleState, Status)
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo

log = logging.getLogger("koordinator.scheduler.framework")

POINTS = ("preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score", "reserve",
          "permit", "preBind", "bind", "postBind")
_POINT_TYPES: dict[str, type] = {
    "preEnqueue": fi.PreEnqueuePlugin, "queueSort": fi.QueueSortPlugin, "preFilter": fi.PreFilterPlugin,
    "filter": fi.FilterPlugin, "postFilter": fi.PostFilterPlugin, "preScore": fi.PreScorePlugin,
    "score": fi.ScorePlugin, "reserve": fi.ReservePlugin, "permit": fi.PermitPlugin, "preBind": fi.PreBindPlugin,
    "bind": fi.BindPlugin, "postBind": fi.PostBindPlugin,
}
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
_ALL_EVENTS = [fi.ClusterEvent("*")]


def implements(plugin: fi.Plugin, point: str) -> bool:
    return isinstance(plugin, _POINT_TYPES[point])


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """kube-scheduler's adaptive ``percentageOfNodesToScore`` (50% − nodes/125, at least 5%, at least 100 nodes)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if not percentage:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    if percentage >= 100:
        return num_all_nodes
    return max(num_all_nodes * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


class PluginArgsError(ValueError):
    """A plugin refused its args; the message names the field's full path in the configuration."""


class WaitingPod:
    """A pod held at Permit until every waiting plugin allows it, one rejects it, or a timeout fires."""

    def __init__(self, pod: PodInfo, timeouts: dict[str, float]) -> None:
        self.pod = pod
        self._pending = dict(timeouts)
        self._deadline = {name: time.monotonic() + t for name, t in timeouts.items()}
        self._cond = threading.Condition()
        self._result: Status | None = None
        self._done = False

    def pending_plugins(self) -> list[str]:
        with self._cond:
            return list(self._pending)

    def allow(self, plugin: str) -> None:
        with self._cond:
            self._pending.pop(plugin, None)
            if not self._pending and not self._done:
                self._done = True
                self._cond.notify_all()

    def reject(self, plugin: str, message: str) -> None:
        with self._cond:
            if not self._done:
                self._done = True
                self._result = Status(UNSCHEDULABLE, message, plugin=plugin)
                self._cond.notify_all()

    def wait(self) -> Status | None:
        with self._cond:
            while not self._done:
                now = time.monotonic()
                expired = [n for n in self._pending if self._deadline[n] <= now]
                if expired:
                    name = expired[0]
                    self._done = True
                    self._result = Status(UNSCHEDULABLE, f"rejected due to timeout after waiting "
                                          f"{self._pending[name]:g}s at plugin {name}", plugin=name)
                    break
                self._cond.wait(min(self._deadline[n] for n in self._pending) - now)
            return self._result


class Framework:
    """One profile's plugins, per extension point, and the code that runs them."""

    def __init__(self, profile: Any, registry: Any, handle: Any, *, percentage_of_nodes_to_score: int | None = None,
                 rng: random.Random | None = None) -> None:
        self.profile = profile
        self.profile_name: str = profile.scheduler_name
        self.handle = handle
        handle.framework = self
        self.percentage_of_nodes_to_score = (profile.percentage_of_nodes_to_score
                                             if profile.percentage_of_nodes_to_score is not None
                                             else percentage_of_nodes_to_score)
        self._rng = rng or random.Random()
        self._registry_factory = registry.get
        self.plugins: dict[str, fi.Plugin] = {}
        for name in profile.all_plugin_names():
            factory = registry.get(name)
            if factory is None:
                raise ValueError(f"profiles[{profile.index}]: plugin {name!r} is not registered")
            args = profile.plugin_args.get(name, {})
            try:
                self.plugins[name] = factory(args, handle)
            except ValueError as err:
                raise PluginArgsError(str(profile.args_error(name, err))) from err
        self.weights: dict[str, int] = {}
        self._scorers_by_skip: dict[frozenset, tuple[list, np.ndarray]] = {}
        self._scorers_weights: dict[str, int] | None = None
        self.points: dict[str, list[fi.Plugin]] = {}
        for point in POINTS:
            refs = profile.plugins_at(point, lambda name, p: name in self.plugins and implements(self.plugins[name], p))
            self.points[point] = [self.plugins[r.name] for r in refs]
            if point == "score":
                self.weights = {r.name: (r.weight or 1) for r in refs}
        self.next_start_node_index = 0
        self.last_scores: tuple | None = None
        self.waiting_pods: dict[str, WaitingPod] = {}
        self._waiting_lock = threading.Lock()
        pre_filter = self.points["preFilter"]
        self._pre_filter_transformers = [p for p in pre_filter if isinstance(p, fi.PreFilterTransformer)]
        self._filter_transformers = [p for p in self.points["filter"] if isinstance(p, fi.FilterTransformer)]
        self._score_transformers = [p for p in self.points["score"] if isinstance(p, fi.ScoreTransformer)]
        self._post_filter_transformers = [p for p in self.points["postFilter"]
                                          if isinstance(p, fi.PostFilterTransformer)]
        self._extensions = [(p.name, p.pre_filter_extensions()) for p in pre_filter]
        self._nominators = [p for p in self.plugins.values() if isinstance(p, fi.ReservationNominator)]
        self._resizers = [p for p in self.plugins.values() if isinstance(p, fi.ResizePodPlugin)]
        self._prefer_nodes = [p for p in pre_filter if isinstance(p, fi.PreferNodesPlugin)]

    # -- hot reload ------------------------------------------------------------------------------------

    def _changed_args(self, profile: Any) -> dict[str, dict]:
        return {name: args for name, args in profile.plugin_args.items()
                if name in self.plugins and args != self.profile.plugin_args.get(name)}

    def check_reload(self, profile: Any) -> None:
        """Raise ValueError (naming the field) if ``profile``'s changed plugin args cannot be applied."""
        from koordinator_roles.scheduler.framework.handle import PluginHandle

        for name, args in self._changed_args(profile).items():
            if not hasattr(self.plugins[name], "update_args"):
                raise ValueError(f"{profile.args_path(name)}: plugin {name} cannot change its args while running; "
                                 f"restart to apply")
            try:
                # A throw-away instance validates the args as the factory would.
                self._registry_factory(name)(args, PluginHandle())
            except ValueError as err:
                raise PluginArgsError(str(profile.args_error(name, err))) from err

    def reload(self, profile: Any, percentage_of_nodes_to_score: int | None) -> None:
        """Swap in a checked profile's score weights, plugin args and percentageOfNodesToScore."""
        for name, args in self._changed_args(profile).items():
            self.plugins[name].update_args(args)  # type: ignore[attr-defined]
        refs = profile.plugins_at("score", lambda name, p: name in self.plugins and implements(self.plugins[name], p))
        self.weights = {r.name: (r.weight or 1) for r in refs}
        self.percentage_of_nodes_to_score = (profile.percentage_of_nodes_to_score
                                             if profile.percentage_of_nodes_to_score is not None
                                             else percentage_of_nodes_to_score)
        self.profile = profile

    # -- plugin lookups --------------------------------------------------------------------------------

    def plugin(self, name: str) -> fi.Plugin | None:
        return self.plugins.get(name)

    def has_post_filter(self) -> bool:
        return bool(self.points["postFilter"])

    def events_for_plugin(self, name: str) -> list[fi.ClusterEvent]:
        plugin = self.plugins.get(name)
        if isinstance(plugin, fi.EnqueueExtensions):
            return plugin.events_to_register()
        return _ALL_EVENTS

    def queue_sort_key(self) -> Callable:
        sorts = self.points["queueSort"]
        if len(sorts) != 1:
            raise ValueError(f"profile {self.profile_name}: exactly one queueSort plugin must be enabled")
        return sorts[0].sort_key  # type: ignore[attr-defined]

    # -- PreEnqueue ------------------------------------------------------------------------------------

    def run_pre_enqueue(self, pod: PodInfo) -> Status | None:
        for plugin in self.points["preEnqueue"]:
            status = plugin.pre_enqueue(pod)  # type: ignore[attr-defined]
            if status is not None and status.code != SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    # -- PreFilter -------------------------------------------------------------------------------------

    def run_pre_filter(self, state: CycleState, pod: PodInfo,
                       snapshot: Snapshot) -> tuple[PodInfo, fi.PreFilterResult | None, Status | None]:
        """Transformers, then PreFilter plugins (Skip marks the plugin's Filter skipped)."""
        for plugin in self._pre_filter_transformers:
            changed, status = plugin.before_pre_filter(state, pod)
            if status is not None and status.code != SUCCESS:
                return pod, None, status.with_plugin(plugin.name)
            if changed is not None:
                pod = changed
        result: fi.PreFilterResult | None = None
        with_nodes: list[str] = []
        for plugin in self.points["preFilter"]:
            res, status = plugin.pre_filter(state, pod, snapshot)  # type: ignore[attr-defined]
            if status is not None and status.code == SKIP:
                state.skip_filter_plugins.add(plugin.name)
                continue
            if status is not None and status.code != SUCCESS:
                if status.code == ERROR:
                    status = Status.error(f"running PreFilter plugin {plugin.name!r}: {status.message()}")
                return pod, None, status.with_plugin(plugin.name)
            if res is not None and res.node_names is not None:
                with_nodes.append(plugin.name)
                result = res.merge(None) if result is None else result.merge(res)
                if not result.node_names:
                    msg = (f"node(s) didn't satisfy plugin {with_nodes[0]}" if len(with_nodes) == 1 else
                           f"node(s) didn't satisfy plugin(s) [{' '.join(with_nodes)}] simultaneously")
                    return pod, None, Status(UNSCHEDULABLE_AND_UNRESOLVABLE, msg, plugin=plugin.name)
        for plugin in self._pre_filter_transformers:
            status = plugin.after_pre_filter(state, pod)
            if status is not None and status.code != SUCCESS:
                return pod, None, status.with_plugin(plugin.name)
        return pod, result, None

    def run_pre_filter_add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo,
                               node: NodeInfo) -> Status | None:
        return self._run_extensions("AddPod", state, pod, to_add, node)

    def run_pre_filter_remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo,
                                  node: NodeInfo) -> Status | None:
        return self._run_extensions("RemovePod", state, pod, to_remove, node)

    def _run_extensions(self, which: str, state: CycleState, pod: PodInfo, other: PodInfo,
                        node: NodeInfo) -> Status | None:
        for name, ext in self._extensions:
            if ext is None or name in state.skip_filter_plugins:
                continue
            fn = ext.add_pod if which == "AddPod" else ext.remove_pod
            status = fn(state, pod, other, node)
            if status is not None and status.code != SUCCESS:
                return Status.error(f"running {which} on PreFilter plugin {name!r}: {status.message()}")
        return None

    # -- Filter ----------------------------------------------------------------------------------------

    def _active_filters(self, state: CycleState) -> list[fi.Plugin]:
        skip = state.skip_filter_plugins
        return [p for p in self.points["filter"] if p.name not in skip]

    def run_filter_plugins(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        for plugin in self._filter_transformers:
            new_pod, new_node, status = plugin.before_filter(state, pod, node)
            if status is not None and status.code != SUCCESS:
                return status.with_plugin(plugin.name)
            pod, node = new_pod or pod, new_node or node
        for plugin in self._active_filters(state):
            status = plugin.filter(state, pod, node)  # type: ignore[attr-defined]
            if status is not None and status.code != SUCCESS:
                if status.code == ERROR:
                    return Status.error(f"running {plugin.name!r} filter plugin: {status.message()}", plugin.name)
                return status.with_plugin(plugin.name)
        return None

    def _nominated_for(self, pod: PodInfo, node_name: str) -> list[PodInfo]:
        nominator = self.handle.nominator
        if nominator is None:
            return []
        return [p for p in nominator.nominated_pods_for_node(node_name)
                if p.priority >= pod.priority and p.uid != pod.uid]

    def run_filter_plugins_with_nominated_pods(self, state: CycleState, pod: PodInfo,
                                               node: NodeInfo) -> Status | None:
        """Filters with the higher-or-equal priority pods nominated to this node counted in, then without them."""
        nominated = self._nominated_for(pod, node.name)
        if nominated:
            state_with, node_with = state.clone(), node.clone()
            for other in nominated:
                node_with.add_pod(other)
                status = self.run_pre_filter_add_pod(state_with, pod, other, node_with)
                if status is not None:
                    return status
            status = self.run_filter_plugins(state_with, pod, node_with)
            if status is not None:
                return status
        return self.run_filter_plugins(state, pod, node)

    def find_nodes_that_fit(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                            pre_result: fi.PreFilterResult | None, diagnosis: Diagnosis) -> np.ndarray:
        """Feasible rows: at most ``num_feasible_nodes_to_find`` of them, starting where the last search stopped."""
        if pre_result is not None and pre_result.node_names is not None:
            candidates = np.array(sorted(snapshot.index[n] for n in pre_result.node_names if n in snapshot.index),
                                  dtype=np.int64)
        else:
            candidates = snapshot.all_rows()
        total = len(candidates)
        if total == 0:
            return candidates
        nominated_node = ((pod.pod.get("status") or {}).get("nominatedNodeName") or "")
        if nominated_node and nominated_node in snapshot.index:
            row = snapshot.index[nominated_node]
            if self.run_filter_plugins_with_nominated_pods(state, pod, snapshot.node_infos[row]) is None:
                return np.array([row], dtype=np.int64)
        if self._prefer_nodes:
            preferred = self._preferred_node(state, pod, snapshot, pre_result)
            if preferred is not None:
                return np.array([preferred], dtype=np.int64)
        want = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, len(snapshot))
        start = self.next_start_node_index % total
        filters = self._active_filters(state)
        # Nodes with nominated pods, or filter transformers, need the per-node path.
        per_node_rows: set[int] = set()
        nominator = self.handle.nominator
        for name in (nominator.nominated_node_names() if nominator is not None else ()):
            row = snapshot.index.get(name)
            if row is not None and self._nominated_for(pod, name):
                per_node_rows.add(row)
        if not filters:
            feasible = (np.concatenate([candidates[start:], candidates[:start]]) if start else candidates)[:want]
            self.next_start_node_index = (start + len(feasible)) % total
            return feasible
        all_batch = all(hasattr(p, "filter_nodes") for p in filters) and not self._filter_transformers
        if all_batch and not per_node_rows and total == len(snapshot):
            if want < total // 2:
                # Like kube-scheduler, which stops once it found `want` feasible nodes: first the `want`
                # nodes from the start index (and a quarter more), where most clusters find them all.
                first = min(total, want + want // 4)
                end = start + first
                rows = (candidates[start:end] if end <= total
                        else np.concatenate([candidates[start:], candidates[:end - total]]))
                alive = self._filter_rows(state, pod, snapshot, rows, filters, diagnosis)
                if len(alive) < want:
                    # Too few: the rest in one batch (never chunk after chunk).
                    rest = (np.concatenate([candidates[end:], candidates[:start]]) if end <= total
                            else candidates[end - total:start])
                    alive = np.concatenate([alive, self._filter_rows(state, pod, snapshot, rest, filters,
                                                                     diagnosis)])
            else:
                # Every node at once, in row order (array views, no gathers); the rotation is applied after.
                alive = self._filter_rows(state, pod, snapshot, snapshot.all_rows(), filters, diagnosis)
                if start:
                    alive = np.concatenate([alive[alive >= start], alive[alive < start]])
            if len(alive) >= want:
                # The search "processed" the nodes up to the last one kept, as kube's stops there.
                alive = alive[:want]
                processed = (int(alive[-1]) - start) % total + 1
            else:
                processed = total
            self.next_start_node_index = (start + processed) % total
            return alive
        order = np.concatenate([candidates[start:], candidates[:start]]) if start else candidates
        chunk = total if all_batch else min(total, max(want, 128))
        found: list[np.ndarray] = []
        n_found = 0
        processed = 0
        for begin in range(0, total, chunk):
            rows = order[begin:begin + chunk]
            if per_node_rows:
                mask = np.fromiter((r not in per_node_rows for r in rows.tolist()), dtype=bool, count=len(rows))
                special, rows = rows[~mask], rows[mask]
            else:
                special = rows[:0]
            alive = self._filter_rows(state, pod, snapshot, rows, filters, diagnosis)
            for row in special.tolist():
                status = self.run_filter_plugins_with_nominated_pods(state, pod, snapshot.node_infos[row])
                if status is None:
                    alive = np.append(alive, row)
                elif status.code == ERROR:
                    raise FilterError(status)
                else:
                    diagnosis.add(status.plugin, row, status)
            if special.size:
                # Keep the search order for the cut below.
                position = {r: i for i, r in enumerate(order[begin:begin + chunk].tolist())}
                alive = np.array(sorted(alive.tolist(), key=position.__getitem__), dtype=np.int64)
            found.append(alive)
            n_found += len(alive)
            processed = begin + len(order[begin:begin + chunk])
            if n_found >= want:
                break
        feasible = np.concatenate(found) if found else order[:0]
        if len(feasible) > want:
            feasible = feasible[:want]
            # The search "processed" the nodes up to the last one kept.
            last = int(feasible[-1])
            processed = int(np.flatnonzero(order == last)[0]) + 1
        self.next_start_node_index = (start + processed) % total
        return feasible

    def _preferred_node(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                        pre_result: fi.PreFilterResult | None) -> int | None:
        """Koordinator's PreferNodes: the row of the first preferred node (within the PreFilter result) that
        passes every filter; None to search as usual (a failed preferred node is filtered again there, so
        the diagnosis still tells why)."""
        allowed = pre_result.node_names if pre_result is not None else None
        for plugin in self._prefer_nodes:
            for name in plugin.prefer_nodes(state, pod):
                row = snapshot.index.get(name)
                if row is None or (allowed is not None and name not in allowed):
                    continue
                status = self.run_filter_plugins_with_nominated_pods(state, pod, snapshot.node_infos[row])
                if status is None:
                    return row
                if status.code == ERROR:
                    raise FilterError(status)
        return None

    def _filter_rows(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, rows: np.ndarray,
                     filters: list[fi.Plugin], diagnosis: Diagnosis) -> np.ndarray:
        infos = snapshot.node_infos
        for plugin in filters:
            if not len(rows):
                break
            if hasattr(plugin, "filter_nodes") and not self._filter_transformers:
                result = plugin.filter_nodes(state, pod, snapshot, rows)  # type: ignore[attr-defined]
                if result.all_passed:
                    continue
                passed = result.passed
                if passed.all():
                    continue
                failed = ~passed
                covered = np.zeros(len(rows), dtype=bool)
                for f in result.failures:
                    if f.code == ERROR:
                        raise FilterError(Status.error(f"running {plugin.name!r} filter plugin: {f.reason}",
                                                       plugin.name))
                    m = f.mask & failed
                    covered |= m
                    diagnosis.add_group(plugin.name, f.code, f.reason, rows[m])
                if (failed & ~covered).any():
                    diagnosis.add_group(plugin.name, UNSCHEDULABLE, f"node(s) rejected by {plugin.name}",
                                        rows[failed & ~covered])
                rows = rows[passed]
            else:
                keep = np.ones(len(rows), dtype=bool)
                for i, row in enumerate(rows.tolist()):
                    node, pod_here = infos[row], pod
                    failed_status = None
                    for transformer in self._filter_transformers:
                        new_pod, new_node, st = transformer.before_filter(state, pod_here, node)
                        if st is not None and st.code != SUCCESS:
                            failed_status = st.with_plugin(transformer.name)
                            break
                        pod_here, node = new_pod or pod_here, new_node or node
                    status = failed_status or plugin.filter(state, pod_here, node)  # type: ignore[attr-defined]
                    if status is not None and status.code != SUCCESS:
                        if status.code == ERROR:
                            raise FilterError(Status.error(f"running {plugin.name!r} filter plugin: "
                                                           f"{status.message()}", plugin.name))
                        keep[i] = False
                        diagnosis.add(plugin.name, row, status)
                rows = rows[keep]
        return rows

    # -- PostFilter --------------------------------------------------------------------------------------

    def run_post_filter(self, state: CycleState, pod: PodInfo,
                        diagnosis: Diagnosis) -> tuple[fi.PostFilterResult | None, Status]:
        result: fi.PostFilterResult | None = None
        reasons: list[str] = []
        rejector = ""
        status: Status | None = None
        for plugin in self.points["postFilter"]:
            res, status = plugin.post_filter(state, pod, diagnosis)  # type: ignore[attr-defined]
            if status is None or status.code == SUCCESS:
                status = Status(SUCCESS, plugin=plugin.name)
                result = res
                break
            if status.code == UNSCHEDULABLE_AND_UNRESOLVABLE:
                status.with_plugin(plugin.name)
                result = res
                break
            if not status.is_rejected():
                status = Status.error(status.message(), plugin.name)
                result = None
                break
            if res is not None:
                result = res
            reasons += status.reasons
            rejector = rejector or plugin.name
            status = None
        if status is None:
            status = Status(UNSCHEDULABLE, *reasons, plugin=rejector)
        for plugin in self._post_filter_transformers:
            plugin.after_post_filter(state, pod, diagnosis, status)
        return result, status

    # -- Score -----------------------------------------------------------------------------------------

    def prioritize(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                   rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """PreScore, Score, NormalizeScore and the weighted sum: (rows, total scores).

        ``last_scores`` holds the cycle's (scorers, weights, plugins × rows scores, rows, totals) afterwards, None
        when no Score plugin ran."""
        self.last_scores = None
        for plugin in self.points["preScore"]:
            status = plugin.pre_score(state, pod, snapshot, rows)  # type: ignore[attr-defined]
            if status is not None and status.code == SKIP:
                state.skip_score_plugins.add(plugin.name)
            elif status is not None and status.code != SUCCESS:
                raise FilterError(Status.error(f"running PreScore plugin {plugin.name!r}: {status.message()}",
                                               plugin.name))
        for plugin in self._score_transformers:
            new_pod, new_rows, status = plugin.before_score(state, pod, rows)
            if status is not None and status.code != SUCCESS:
                raise FilterError(status.with_plugin(plugin.name))
            pod, rows = new_pod or pod, (rows if new_rows is None else new_rows)
        scorers, weights = self._scorers(state.skip_score_plugins)
        if not scorers:
            total = np.zeros(len(rows), dtype=np.int64)
            if not self.points["score"]:
                total += 1
            return rows, total
        infos = snapshot.node_infos
        # Every plugin's scores in one matrix: one range check and one weighted sum for all of them.
        stacked = np.empty((len(scorers), len(rows)), dtype=np.int64)
        for i, (plugin, batch, normalize) in enumerate(scorers):
            if batch:
                scores = np.asarray(plugin.score_nodes(state, pod, snapshot, rows), dtype=np.int64)  # type: ignore
            else:
                scores = np.fromiter((plugin.score(state, pod, infos[r]) for r in rows.tolist()),  # type: ignore
                                     dtype=np.int64, count=len(rows))
            if normalize is not None:
                status = normalize(state, pod, snapshot, rows, scores)
                if status is not None and status.code != SUCCESS:
                    raise FilterError(Status.error(f"running Normalize on Score plugin {plugin.name!r}: "
                                                   f"{status.message()}", plugin.name))
            stacked[i] = scores
        # Negative scores viewed as unsigned are huge, so one reduction checks both bounds.
        if stacked.size and stacked.view(np.uint64).max() > fi.MAX_NODE_SCORE:
            for (plugin, _, _), scores in zip(scorers, stacked):
                if scores.view(np.uint64).max() > fi.MAX_NODE_SCORE:
                    bad = int(scores.max() if scores.max() > fi.MAX_NODE_SCORE else scores.min())
                    raise FilterError(Status.error(
                        f"plugin {plugin.name!r} returns an invalid score {bad}, it should in the range of "
                        f"[{fi.MIN_NODE_SCORE}, {fi.MAX_NODE_SCORE}] after normalizing", plugin.name))
        # Kept (not copied) for the scheduler's per-pod explanation of this cycle: read before the next one.
        totals = weights @ stacked
        self.last_scores = (scorers, weights, stacked, rows, totals)
        return rows, totals

    def _scorers(self, skipped: set[str]) -> tuple[list[tuple[fi.Plugin, bool, Any]], np.ndarray]:
        """The Score plugins not skipped, each with (batch?, its NormalizeScore or None), and their weights."""
        key = frozenset(skipped)
        if self._scorers_weights is not self.weights:  # a reload brought new weights
            self._scorers_by_skip, self._scorers_weights = {}, self.weights
        entry = self._scorers_by_skip.get(key)
        if entry is None:
            plugins = [p for p in self.points["score"] if p.name not in skipped]
            entry = self._scorers_by_skip[key] = (
                [(p, hasattr(p, "score_nodes"), getattr(p, "normalize_score", None)) for p in plugins],
                np.array([self.weights.get(p.name, 1) for p in plugins], dtype=np.int64))
        return entry

    def select_host(self, rows: np.ndarray, totals: np.ndarray) -> int:
        """The best row; ties broken uniformly at random (kube's reservoir sampling)."""
        best = np.flatnonzero(totals == totals.max())
        pick = best[0] if len(best) == 1 else best[self._rng.randrange(len(best))]
        return int(rows[pick])

    # -- after host selection (Koordinator) ---------------------------------------------------------------

    def run_reservation_nominate(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """ReservationNominator plugins pick the reservation the pod uses on the chosen node (always run,
        even when scoring was skipped for a single feasible node)."""
        for plugin in self._nominators:
            _, status = plugin.nominate_reservation(state, pod, node_name)
            if status is not None and status.code != SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    def run_resize_pod(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        """ResizePod plugins may change the pod before it is assumed (Koordinator's ResizePod gate)."""
        for plugin in self._resizers:
            status = plugin.resize_pod(state, pod, node_name)
            if status is not None and status.code != SUCCESS:
                return status.with_plugin(plugin.name)
        return None

    # -- Reserve / Permit --------------------------------------------------------------------------------

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self.points["reserve"]:
            status = plugin.reserve(state, pod, node_name)  # type: ignore[attr-defined]
            if status is not None and status.code != SUCCESS:
                if status.is_rejected():
                    return status.with_plugin(plugin.name)
                return Status.error(f"running Reserve plugin {plugin.name!r}: {status.message()}", plugin.name)
        return None

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in reversed(self.points["reserve"]):
            try:
                plugin.unreserve(state, pod, node_name)  # type: ignore[attr-defined]
            except Exception:
                log.exception("unreserve failed plugin=%s pod=%s", plugin.name, pod.key)

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        timeouts: dict[str, float] = {}
        for plugin in self.points["permit"]:
            status, timeout = plugin.permit(state, pod, node_name)  # type: ignore[attr-defined]
            if status is None or status.code == SUCCESS:
                continue
            if status.code == WAIT:
                timeouts[plugin.name] = min(float(timeout), 15 * 60.0)
                continue
            if status.is_rejected():
                return status.with_plugin(plugin.name)
            return Status.error(f"running Permit plugin {plugin.name!r}: {status.message()}", plugin.name)
        if timeouts:
            with self._waiting_lock:
                self.waiting_pods[pod.uid] = WaitingPod(pod, timeouts)
            return Status(WAIT, f"one or more plugins asked to wait and no plugin rejected pod {pod.name!r}")
        return None

    def wait_on_permit(self, pod: PodInfo) -> Status | None:
        with self._waiting_lock:
            waiting = self.waiting_pods.get(pod.uid)
        if waiting is None:
            return None
        try:
            return waiting.wait()
        finally:
            with self._waiting_lock:
                self.waiting_pods.pop(pod.uid, None)

    def get_waiting_pod(self, uid: str) -> WaitingPod | None:
        with self._waiting_lock:
            return self.waiting_pods.get(uid)

    # -- binding cycle -----------------------------------------------------------------------------------

    def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, modified: dict) -> Status | None:
        for plugin in self.points["preBind"]:
            if plugin.name in state.skip_pre_bind_plugins:
                continue
            status = plugin.pre_bind(state, pod, node_name, modified)  # type: ignore[attr-defined]
            if status is not None and status.code != SUCCESS:
                if status.is_rejected():
                    return status.with_plugin(plugin.name)
                return Status.error(f"running PreBind plugin {plugin.name!r}: {status.message()}", plugin.name)
        return None

    def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        for plugin in self.points["bind"]:
            status = plugin.bind(state, pod, node_name)  # type: ignore[attr-defined]
            if status is not None and status.code == SKIP:
                continue
            if status is not None and status.code != SUCCESS:
                if status.is_rejected():
                    return status.with_plugin(plugin.name)
                return Status.error(f"running Bind plugin {plugin.name!r}: {status.message()}", plugin.name)
            return None
        return Status(SKIP, "no Bind plugin bound the pod")

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        for plugin in self.points["postBind"]:
            try:
                plugin.post_bind(state, pod, node_name)  # type: ignore[attr-defined]
            except Exception:
                log.exception("postBind failed plugin=%s pod=%s", plugin.name, pod.key)


class FilterError(Exception):
    """A plugin failed with an Error (not a rejection) during filtering or scoring: the cycle fails."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status
