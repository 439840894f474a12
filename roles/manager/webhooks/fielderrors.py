"""Kubernetes field errors and their aggregate, printed the way Go's apimachinery prints them.

Koordinator's validating webhooks collect ``field.ErrorList`` values and answer with
``ErrorList.ToAggregate().Error()``. People and tests compare those texts, so they are reproduced
exactly: one error prints as ``<path>: <Type>: <detail>`` (``<path>: Invalid value: "x": <detail>``
for the value-carrying types), several as ``[e1, e2]``, and identical texts appear once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

REQUIRED = "Required value"
FORBIDDEN = "Forbidden"
INVALID = "Invalid value"
NOT_SUPPORTED = "Unsupported value"
DUPLICATE = "Duplicate value"

FIELD_IMMUTABLE = "field is immutable"

# Types that print without the offending value (as ErrorBody does).
_NO_VALUE = (REQUIRED, FORBIDDEN)


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``: its type, path, offending value (value types only) and detail."""

    type: str
    path: str
    detail: str = ""
    value: Any = None

    def __str__(self) -> str:
        body = self.type if self.type in _NO_VALUE else f"{self.type}: {_go_value(self.value)}"
        if self.detail:
            body += f": {self.detail}"
        return f"{self.path}: {body}"


def required(path: str, detail: str = "") -> FieldError:
    return FieldError(REQUIRED, path, detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError(FORBIDDEN, path, detail)


def invalid(path: str, value: Any, detail: str) -> FieldError:
    return FieldError(INVALID, path, detail, value)


def immutable(path: str, new: Any, old: Any) -> list[FieldError]:
    """``validation.ValidateImmutableField``: an Invalid error carrying the new value when it changed."""
    return [] if new == old else [invalid(path, new, FIELD_IMMUTABLE)]


def aggregate(errors: Iterable[Any]) -> str:
    """``utilerrors.NewAggregate(...).Error()`` over de-duplicated texts ("" when there are none)."""
    texts: list[str] = []
    for err in errors:
        text = str(err)
        if text not in texts:
            texts.append(text)
    if not texts:
        return ""
    if len(texts) == 1:
        return texts[0]
    return "[" + ", ".join(texts) + "]"


def _go_value(value: Any) -> str:
    # Strings print quoted (%q), numbers and booleans bare, nil as "null".
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
