"""Matching the pods already placed, shared by InterPodAffinity and PodTopologySpread.

:class:`NodeMatchCounter` remembers per-node counts of matching pods while a node's pods are
unchanged, so the replicas of one workload do not rescan every pod of the cluster;
:func:`merge_label_keys` adds ``matchLabelKeys``/``mismatchLabelKeys`` to a term's selector.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Callable, Hashable, Iterable, Mapping

from koordinator.apis import selectors
from koordinator.apis.selectors import LabelSelector, Requirement
from koordinator_roles.scheduler.framework.types import NodeInfo, PodInfo


class NodeMatchCounter:
    """Per-node counts of pods satisfying a predicate, keyed by a hashable description of the predicate.

    An entry is reused only while it refers to the very same NodeInfo object at the same
    generation: snapshots hand out the same object for unchanged nodes, and every pod change bumps
    the generation, so a stale count is never returned. At most ``max_keys`` predicates are kept
    (least recently used dropped) to bound memory on large clusters.
    """

    def __init__(self, max_keys: int = 32) -> None:
        self._tables: OrderedDict[Hashable, dict[str, tuple[NodeInfo, int, int]]] = OrderedDict()
        self._max_keys = max_keys

    def table(self, key: Hashable) -> dict[str, tuple[NodeInfo, int, int]]:
        """The per-node entries of one predicate; fetch once per cycle, then :meth:`count` per node."""
        tables = self._tables
        table = tables.get(key)
        if table is None:
            table = tables[key] = {}
            while len(tables) > self._max_keys:
                tables.popitem(last=False)
        else:
            tables.move_to_end(key)
        return table

    @staticmethod
    def count(table: dict[str, tuple[NodeInfo, int, int]], ni: NodeInfo, predicate: Callable[[PodInfo], bool]) -> int:
        """Pods on ``ni`` satisfying ``predicate``, from ``table`` while the node is unchanged."""
        entry = table.get(ni.name)
        if entry is not None and entry[0] is ni and entry[1] == ni.generation:
            return entry[2]
        n = 0
        for p in ni.pods.values():
            if predicate(p):
                n += 1
        table[ni.name] = (ni, ni.generation, n)
        return n


def merge_label_keys(selector: LabelSelector, labels: Mapping[str, str], match_keys: Iterable[str] = (),
                     mismatch_keys: Iterable[str] = (), match_operator: str = selectors.IN) -> LabelSelector:
    """``selector`` plus ``key <match_operator> (value)`` for each of ``match_keys`` and
    ``key notin (value)`` for each of ``mismatch_keys`` that ``labels`` has (KEP-3633).

    A selector matching nothing stays so (kube keeps selectors without requirements). kube writes
    the requirements with ``In`` for pod affinity terms and ``=`` for spread constraints
    (``labels.SelectorFromSet``): ``match_operator`` keeps each plugin's.
    """
    if selector.match_nothing:
        return selector
    extra = [Requirement(k, match_operator, [labels[k]]) for k in match_keys if k in labels]
    extra += [Requirement(k, selectors.NOT_IN, [labels[k]]) for k in mismatch_keys if k in labels]
    if not extra:
        return selector
    return LabelSelector([*selector.requirements, *extra])
