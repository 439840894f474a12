"""A pod's required node affinity: its nodeSelector AND its required node affinity terms.

kube's ``nodeaffinity.GetRequiredNodeAffinity`` (component-helpers), which NodeAffinity filters on
and PodTopologySpread honours when it counts the nodes of a domain (``nodeAffinityPolicy: Honor``).
"""

from __future__ import annotations

from typing import Any, Mapping

from koordinator.apis.selectors import node_selector_term_matches
from koordinator_roles.scheduler.framework.types import NodeInfo

OBJECT_NAME_FIELD = "metadata.name"


class RequiredNodeAffinity:
    """``selector`` (nodeSelector) and ``terms`` (None: no required affinity; []: matches no node)."""

    __slots__ = ("selector", "terms")

    def __init__(self, pod: Mapping[str, Any]) -> None:
        spec = pod.get("spec") or {}
        self.selector: dict[str, str] = dict(spec.get("nodeSelector") or {})
        required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution"))
        self.terms: list | None = None if required is None else list(required.get("nodeSelectorTerms") or ())

    @property
    def empty(self) -> bool:
        """True when every node matches (no nodeSelector, no required terms)."""
        return not self.selector and self.terms is None

    def matches(self, node: NodeInfo) -> bool:
        """The node's labels satisfy the nodeSelector and, when there are terms, any one term."""
        labels = node.labels
        for k, v in self.selector.items():
            if labels.get(k) != v:
                return False
        if self.terms is None:
            return True
        fields = {OBJECT_NAME_FIELD: node.name}
        return any(node_selector_term_matches(t, labels, fields) for t in self.terms)
