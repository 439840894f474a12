"""Unknown-field pruning for the built-in kinds, at every depth.

kube-apiserver decodes a request body into Go structs, so a field the kind does not have is dropped
wherever it sits (``spec.replicas`` of a Service, ``spec.template.spec.containers[0].imagePullPolicyx``
of a Deployment) and reported to ``fieldValidation``. The field tables (``builtin_field_tables``) are
generated from the ``kubernetes`` client's models by ``scripts/gen_builtin_fields.py``; a value typed
as free-form there (IntOrString, RawExtension, a CRD's JSON schema ``default``) is kept as sent.
"""

from __future__ import annotations

from typing import Any

from koordinator.apiserver.builtin_field_tables import KINDS, MODELS

_TOP_LEVEL = frozenset({"apiVersion", "kind"})


def prune_unknown(api_version: str, kind: str, obj: dict[str, Any]) -> list[str]:
    """Drop from ``obj`` (in place) every field its kind does not have; their paths, as kube names them
    (``spec.template.spec.containers[0].foo``). A kind the tables do not cover is left alone."""
    model = KINDS.get((api_version, kind))
    if model is None:
        return []
    unknown: list[str] = []
    known = MODELS[model]
    for name in list(obj):
        if name in _TOP_LEVEL:
            continue
        if name not in known:
            del obj[name]
            unknown.append(name)
        else:
            _prune_value(known[name], obj[name], name, unknown)
    return unknown


def _prune_model(model: str, value: dict[str, Any], path: str, unknown: list[str]) -> None:
    known = MODELS[model]
    for name in list(value):
        if name not in known:
            del value[name]
            unknown.append(f"{path}.{name}")
        else:
            _prune_value(known[name], value[name], f"{path}.{name}", unknown)


def _prune_value(code: str, value: Any, path: str, unknown: list[str]) -> None:
    # A wrongly typed value is left for validation to name; scalars have nothing below them.
    if not code:
        return
    if code[0] == "[":
        if isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    _prune_model(code[1:-1], item, f"{path}[{i}]", unknown)
    elif code[0] == "{":
        if isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, dict):
                    _prune_model(code[1:-1], item, f"{path}[{key}]", unknown)
    elif isinstance(value, dict):
        _prune_model(code, value, path, unknown)
