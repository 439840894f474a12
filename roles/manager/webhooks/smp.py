"""A small strategic merge patch for Pods (the ``patch`` field of a ClusterColocationProfile).

Same semantics as the API server's strategic merge for the fields a profile patch touches:

* objects merge key by key; a ``null`` value deletes the key;
* ``{"$patch": "replace"}`` inside an object replaces it whole, ``{"$patch": "delete"}`` removes it;
* lists of objects with a merge key (containers by ``name``, ports by ``containerPort``,
  volumeMounts by ``mountPath``, ...) merge element by element, new elements are appended, an
  element ``{"<key>": ..., "$patch": "delete"}`` removes the matching one;
* ``metadata.finalizers`` merges as a set; every other list is replaced.

Keys are matched by field name alone, which is unambiguous inside a Pod. The roles may not import
the API server's full implementation (layering), hence this copy of the subset.
"""

from __future__ import annotations

import copy
from typing import Any

MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "ownerReferences": "uid",
    "topologySpreadConstraints": "topologyKey",
}
PRIMITIVE_MERGE = {"finalizers"}

_DIRECTIVE = "$patch"


class PatchError(ValueError):
    """A patch that cannot be applied (wrong shape, unknown directive)."""


def strategic_merge(original: Any, patch: Any) -> Any:
    """The result of applying ``patch`` to ``original`` (neither is modified)."""
    if not isinstance(patch, dict):
        raise PatchError(f"a strategic merge patch must be a JSON object, got {type(patch).__name__}")
    return _merge_map(original if isinstance(original, dict) else {}, patch)


def _merge_map(original: dict, patch: dict) -> dict:
    directive = patch.get(_DIRECTIVE)
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != _DIRECTIVE}
    if directive not in (None, "merge"):
        raise PatchError(f"unknown patch directive {directive!r} in a map")
    out = copy.deepcopy(original)
    for key, value in patch.items():
        if key == _DIRECTIVE or key.startswith("$"):
            continue  # $retainKeys / $setElementOrder: ordering hints we do not need
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            if value.get(_DIRECTIVE) == "delete":
                out.pop(key, None)
            else:
                out[key] = _merge_map(out.get(key) if isinstance(out.get(key), dict) else {}, value)
        elif isinstance(value, list):
            out[key] = _merge_list(key, out.get(key), value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _merge_list(field: str, original: Any, patch: list) -> list:
    base = original if isinstance(original, list) else []
    if field in PRIMITIVE_MERGE:
        merged = list(base)
        for item in patch:
            if item not in merged:
                merged.append(copy.deepcopy(item))
        return merged
    key = MERGE_KEYS.get(field)
    if key is None or not all(isinstance(x, dict) for x in patch):
        return copy.deepcopy(patch)
    if any(isinstance(x, dict) and x.get(_DIRECTIVE) == "replace" for x in patch):
        return [copy.deepcopy({k: v for k, v in x.items() if k != _DIRECTIVE}) for x in patch
                if x.get(_DIRECTIVE) != "replace"]
    merged = copy.deepcopy(base)
    for item in patch:
        if key not in item:
            raise PatchError(f"{field}: every element of the patch must carry the merge key {key!r}")
        index = next((i for i, x in enumerate(merged) if isinstance(x, dict) and x.get(key) == item[key]), None)
        if item.get(_DIRECTIVE) == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(_merge_map({}, item))
        else:
            merged[index] = _merge_map(merged[index], item)
    return merged
