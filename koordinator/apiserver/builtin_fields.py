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


class TypeMismatch(ValueError):
    """A value of the wrong JSON type, worded as Go's decoder words it."""


def decode(api_version: str, kind: str, obj: dict[str, Any]) -> list[str]:
    """Decode ``obj`` as its kind's Go struct would be, in one walk: TypeMismatch for the first value of the
    wrong JSON type (in document order), else drop every field the kind does not have (in place) and return
    their paths as kube names them (``spec.template.spec.containers[0].foo``). A kind the tables do not
    cover is left alone."""
    model = KINDS.get((api_version, kind))
    if model is None:
        return []
    unknown: list[str] = []
    _decode_model(model, obj, "", "", unknown, skip=_TOP_LEVEL)
    return unknown


def _decode_model(model: str, value: dict[str, Any], path: str, go_path: str, unknown: list[str],
                  skip: frozenset[str] = frozenset()) -> None:
    known = MODELS[model]
    struct = _struct_name(model)
    for name in list(value):
        if name in skip:
            continue
        where = f"{path}.{name}" if path else name
        if name not in known:
            del value[name]
            unknown.append(where)
        else:
            # Go names the innermost struct and the whole field path, without indexes or map keys.
            _decode_value(known[name], value[name], where, f"{go_path}.{name}" if go_path else name, struct,
                          unknown)


def _decode_value(code: str, value: Any, path: str, go_path: str, struct: str, unknown: list[str]) -> None:
    if value is None or code == "":
        return  # JSON null decodes to the zero value; free-form takes anything
    if code[:1] == "[":
        if not isinstance(value, list):
            raise TypeMismatch(_mismatch(value, struct, go_path, code))
        for i, item in enumerate(value):
            _decode_value(code[1:-1], item, f"{path}[{i}]", go_path, struct, unknown)
    elif code[:1] == "{":
        if not isinstance(value, dict):
            raise TypeMismatch(_mismatch(value, struct, go_path, code))
        for key, item in value.items():
            _decode_value(code[1:-1], item, f"{path}[{key}]", go_path, struct, unknown)
    elif code in _SCALARS:
        if not _SCALARS[code][0](value):
            raise TypeMismatch(_mismatch(value, struct, go_path, code))
    elif not isinstance(value, dict):
        raise TypeMismatch(_mismatch(value, struct, go_path, code))
    else:
        _decode_model(code, value, path, go_path, unknown)


def _go_type(code: str) -> str:
    """The Go type a field code stands for (``[]v1.PolicyRule``, ``map[string]string``)."""
    if code[:1] == "[":
        return "[]" + _go_type(code[1:-1])
    if code[:1] == "{":
        return "map[string]" + _go_type(code[1:-1])
    if code in _SCALARS:
        return _SCALARS[code][1]
    if not code:
        return "interface {}"
    m = _MODEL_NAME.match(code)
    return f"{m.group(1).lower()}.{m.group(2)}" if m else code


def _struct_name(model: str) -> str:
    m = _MODEL_NAME.match(model)
    return m.group(2) if m else model


def _mismatch(value: Any, struct: str, path: str, code: str) -> str:
    return f"json: cannot unmarshal {json_type(value)} into Go struct field {struct}.{path} of type {_go_type(code)}"
