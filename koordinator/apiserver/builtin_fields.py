"""The typed decoding of built-in kinds: wrongly typed fields refused, unknown fields dropped, at every depth.

kube-apiserver decodes a request body into Go structs: a value of the wrong JSON type is a 400
(``json: cannot unmarshal string into Go struct field Role.rules of type []v1.PolicyRule``) and a field
the kind does not have is dropped wherever it sits (``spec.replicas`` of a Service,
``spec.template.spec.containers[0].imagePullPolicyx`` of a Deployment) and reported to
``fieldValidation``. The field tables (``builtin_field_tables``) are generated from the ``kubernetes``
client's models by ``scripts/gen_builtin_fields.py``; a value typed as free-form there (IntOrString,
RawExtension, a CRD schema's ``default``) is taken as sent.
"""

from __future__ import annotations

import re
from typing import Any

from koordinator.apiserver.builtin_field_tables import KINDS, MODELS
from koordinator.apiserver.validation.decoding import json_type

_TOP_LEVEL = frozenset({"apiVersion", "kind"})
# Scalar codes -> (accepts this JSON value?, the type messages name). A string field also takes a number:
# the client's tables type resource.Quantity (which accepts both) as a string, like any string. They do
# not say whether an integer is an int32 or an int64, so messages say "integer".
_SCALARS = {
    "s": (lambda v: isinstance(v, (str, int, float)) and not isinstance(v, bool), "string"),
    "i": (lambda v: isinstance(v, int) and not isinstance(v, bool), "integer"),
    "f": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "float64"),
    "b": (lambda v: isinstance(v, bool), "bool"),
    "t": (lambda v: isinstance(v, str), "v1.Time"),
    "y": (lambda v: isinstance(v, str), "[]uint8"),
}
_MODEL_NAME = re.compile(r"^(?:[A-Z][a-z]+)?(V\d+(?:alpha\d+|beta\d+)?)(\w+)$")


def prune_unknown(api_version: str, kind: str, obj: dict[str, Any]) -> list[str]:
    """Drop from ``obj`` (in place) every field its kind does not have; their paths, as kube names them
    (``spec.template.spec.containers[0].foo``). A kind the tables do not cover is left alone."""
    model = KINDS.get((api_version, kind))
    if model is None:
        return []
    unknown: list[str] = []
    _prune_model(model, obj, "", unknown, skip=_TOP_LEVEL)
    return unknown


def _prune_model(model: str, value: dict[str, Any], path: str, unknown: list[str],
                 skip: frozenset[str] = frozenset()) -> None:
    known = MODELS[model]
    for name in list(value):
        if name in skip:
            continue
        where = f"{path}.{name}" if path else name
        if name not in known:
            del value[name]
            unknown.append(where)
        else:
            _prune_value(known[name], value[name], where, unknown)


def _prune_value(code: str, value: Any, path: str, unknown: list[str]) -> None:
    # A wrongly typed value is refused by type_error before this runs; scalars have nothing below them.
    if code[:1] == "[":
        if isinstance(value, list):
            for i, item in enumerate(value):
                _prune_value(code[1:-1], item, f"{path}[{i}]", unknown)
    elif code[:1] == "{":
        if isinstance(value, dict):
            for key, item in value.items():
                _prune_value(code[1:-1], item, f"{path}[{key}]", unknown)
    elif code in MODELS and isinstance(value, dict):
        _prune_model(code, value, path, unknown)


def type_error(api_version: str, kind: str, obj: dict[str, Any]) -> str | None:
    """The first value of the wrong JSON type in ``obj``, worded as Go's decoder words it, or None."""
    model = KINDS.get((api_version, kind))
    if model is None:
        return None
    return _model_error(model, obj, "", skip=_TOP_LEVEL)


def go_type(code: str) -> str:
    """The Go type a field code stands for (``[]v1.PolicyRule``, ``map[string]string``)."""
    if code[:1] == "[":
        return "[]" + go_type(code[1:-1])
    if code[:1] == "{":
        return "map[string]" + go_type(code[1:-1])
    if code in _SCALARS:
        return _SCALARS[code][1]
    if not code:
        return "interface {}"
    m = _MODEL_NAME.match(code)
    return f"{m.group(1).lower()}.{m.group(2)}" if m else code


def _struct_name(model: str) -> str:
    m = _MODEL_NAME.match(model)
    return m.group(2) if m else model


def _model_error(model: str, value: dict[str, Any], path: str, skip: frozenset[str] = frozenset()) -> str | None:
    known = MODELS[model]
    for name, item in value.items():
        if name in skip or name not in known or item is None:
            continue
        # Go names the innermost struct and the whole field path, without indexes or map keys.
        where = f"{path}.{name}" if path else name
        error = _value_error(known[name], item, where, _struct_name(model))
        if error:
            return error
    return None


def _value_error(code: str, value: Any, path: str, struct: str) -> str | None:
    if value is None or code == "":
        return None  # JSON null decodes to the zero value; free-form takes anything
    if code[:1] in "[{":
        container, items = (list, value) if code[0] == "[" else (dict, value.values() if isinstance(value, dict) else ())
        if not isinstance(value, container):
            return _mismatch(value, struct, path, code)
        for item in items:
            error = _value_error(code[1:-1], item, path, struct)
            if error:
                return error
        return None
    if code in _SCALARS:
        return None if _SCALARS[code][0](value) else _mismatch(value, struct, path, code)
    if not isinstance(value, dict):
        return _mismatch(value, struct, path, code)
    return _model_error(code, value, path)


def _mismatch(value: Any, struct: str, path: str, code: str) -> str:
    return f"json: cannot unmarshal {json_type(value)} into Go struct field {struct}.{path} of type {go_type(code)}"
