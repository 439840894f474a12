"""Args and pod scoping shared by koord-descheduler's smaller balance plugins (FragmentationAware,
ScaleDownBinPack, reference §1.8): schema defaulting/validation of an args document, and the
``nodeSelector`` / ``evictableNamespaces`` / ``podSelectors`` trio that decides which nodes and pods a
plugin looks at.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from koordinator.apis import schemas
from koordinator.apis.extension import resource_list
from koordinator.apis.selectors import LabelSelector, SelectorError, label_selector_from_dict

Obj = dict[str, Any]
SCHEMA_VERSION = "v1alpha2"
TERMINAL_PHASES = ("Succeeded", "Failed")


def validated_document(schema: str, raw: Mapping[str, Any] | None) -> dict:
    """``raw`` defaulted by ``schemas/config/<schema>/v1alpha2.yaml``; ValueError with every schema error
    in kube wording (``field: Invalid value: X: why``)."""
    if raw is not None and not isinstance(raw, Mapping):
        raise ValueError(f"args: Invalid value: {raw!r}: must be an object")
    document, errors = schemas.validate_config(schema, dict(raw or {}), SCHEMA_VERSION)
    if errors:
        raise ValueError("; ".join(f"{e.path}: {e.message}" if e.path else e.message for e in errors))
    return document


def invalid(path: str, value: Any, why: str) -> ValueError:
    """A ValueError ``path: Invalid value: value: why`` (strings quoted as kube does)."""
    shown = f'"{value}"' if isinstance(value, str) else value
    return ValueError(f"{path}: Invalid value: {shown}: {why}")


def finite_number(document: Mapping[str, Any], key: str) -> float:
    """``document[key]`` as a float; NaN/±Inf are refused (JSON cannot carry them, a Python caller can)."""
    value = float(document[key])
    if not math.isfinite(value):
        raise invalid(key, document[key], "must be a finite number")
    return value


def resource_names(document: Mapping[str, Any]) -> tuple[str, ...]:
    """``resources``: a non-empty list of distinct, non-empty resource names."""
    names = list(document.get("resources") or ())
    if not names:
        raise ValueError("resources: Required value: at least one resource must be given")
    for i, name in enumerate(names):
        if not name:
            raise invalid(f"resources[{i}]", name, "must not be empty")
        if name in names[:i]:
            raise ValueError(f'resources[{i}]: Duplicate value: "{name}"')
    return tuple(names)


@dataclass
class PodScope:
    """Which nodes and pods a plugin considers: ``nodeSelector`` on nodes; on pods ``evictableNamespaces``
    (include or exclude) and ``podSelectors`` (with any given, a pod must match one)."""

    node_selector: LabelSelector | None = None
    include_namespaces: frozenset[str] | None = None
    exclude_namespaces: frozenset[str] = frozenset()
    pod_selectors: list[LabelSelector] = field(default_factory=list)

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> "PodScope":
        """Parse the three fields of a (schema-validated) args document; ValueError naming the field."""
        node_selector = None
        if document.get("nodeSelector") is not None:
            try:
                node_selector = label_selector_from_dict(document["nodeSelector"])
            except SelectorError as exc:
                raise ValueError(f"nodeSelector: {exc}") from None
        namespaces = document.get("evictableNamespaces") or {}
        include = namespaces.get("include")
        exclude = namespaces.get("exclude")
        selectors = []
        for i, entry in enumerate(document.get("podSelectors") or ()):
            if entry.get("selector") is None:
                continue  # an entry without a selector neither selects nor rejects (as LowNodeLoad)
            try:
                selectors.append(label_selector_from_dict(entry["selector"]))
            except SelectorError as exc:
                raise ValueError(f"podSelectors[{i}].selector: {exc}") from None
        return cls(node_selector=node_selector,
                   include_namespaces=frozenset(include) if include is not None else None,
                   exclude_namespaces=frozenset(exclude or ()), pod_selectors=selectors)

    def nodes(self, nodes: Iterable[Obj]) -> list[Obj]:
        """The nodes the plugin's ``nodeSelector`` matches (all without one)."""
        if self.node_selector is None:
            return list(nodes)
        return [n for n in nodes if self.node_selector.matches((n.get("metadata") or {}).get("labels") or {})]

    def selects(self, pod: Obj) -> bool:
        """The pod is in scope: its namespace is evictable and it matches a pod selector (if any)."""
        meta = pod.get("metadata") or {}
        namespace = meta.get("namespace", "")
        if self.include_namespaces is not None and namespace not in self.include_namespaces:
            return False
        if namespace in self.exclude_namespaces:
            return False
        if self.pod_selectors:
            labels = meta.get("labels") or {}
            return any(s.matches(labels) for s in self.pod_selectors)
        return True


def not_terminated(pod: Obj) -> bool:
    """Neither Succeeded nor Failed (such pods hold no resources)."""
    return (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES


def allocatable(node: Obj) -> dict[str, int]:
    """The node's ``status.allocatable`` in milli-units."""
    return resource_list((node.get("status") or {}).get("allocatable"))


def node_name(obj: Obj) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def pod_key(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"
