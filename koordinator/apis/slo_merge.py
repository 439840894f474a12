"""Koordinator's ``MergeCfg`` (reference 0.4) on JSON-shaped dicts.

Koordinator merges configuration by encoding the overriding object to JSON (nil pointers and
empty ``omitempty`` slices left out) and decoding it on top of a deep copy of the base. The
manager merges ``slo-controller-config`` strategies this way and the koordlet merges a NodeSLO
onto its built-in defaults the same way, so both use this one function.
"""

from __future__ import annotations

import copy
from typing import Any

Obj = dict[str, Any]

# Fields that are Go maps, not structs: merging replaces their entries whole instead of merging
# into them (decoding a JSON object into a map stores fresh values).
GO_MAP_FIELDS = frozenset({"extensions", "ratioModel", "resourceAmplificationRatio", "schedFeatures"})


def merge_config(base: Obj, override: Obj | None, *, map_fields: frozenset[str] = GO_MAP_FIELDS) -> Obj:
    """Koordinator's ``MergeCfg`` on JSON-shaped dicts: ``override`` decoded on top of a copy of ``base``.

    Present scalars replace (explicit ``false``/``0`` included); ``None`` and empty lists are absent
    (Go omits nil pointers and empty ``omitempty`` slices); nested objects merge recursively; a
    non-empty list replaces the whole list; for the Go map fields in ``map_fields`` each entry is
    replaced whole and keys are never removed. ``base`` and ``override`` are left untouched.
    """
    result = copy.deepcopy(base)
    if override:
        _merge_into(result, override, map_fields)
    return result


def _merge_into(dst: Obj, src: Obj, map_fields: frozenset[str]) -> None:
    for k, v in src.items():
        if v is None or (isinstance(v, list) and not v):
            continue
        if k in map_fields and isinstance(v, dict):
            if not v:
                continue
            target = dst.get(k)
            if not isinstance(target, dict):
                target = dst[k] = {}
            target.update({ek: copy.deepcopy(ev) for ek, ev in v.items() if ev is not None})
        elif isinstance(v, dict) and isinstance(dst.get(k), dict):
            _merge_into(dst[k], v, map_fields)
        else:
            dst[k] = copy.deepcopy(v)
