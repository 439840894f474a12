"""Field-error causes and Go value rendering shared by every validator (``Invalid value: ...``,
``%#v`` of maps and selectors), plus the loose accessors validators read plain dicts with.
"""

from __future__ import annotations

from typing import Any, Callable

from koordinator.apis.gostrings import go_quote
from koordinator.apiserver.errors import cause, format_value, not_supported, required


Obj = dict[str, Any]
Cause = dict[str, str]
Causes = list[Cause]
NameFn = Callable[[str, bool], list[str]]
NEGATIVE = "must be greater than or equal to 0"
IMMUTABLE = "field is immutable"


# ---------------------------------------------------------------------------------------
# Cause helpers and Go value rendering
# ---------------------------------------------------------------------------------------


def fmt_value(value: Any) -> str:
    # A nil pointer prints as the quoted string "null" in field errors.
    return '"null"' if value is None else format_value(value)


def invalid(field: str, value: Any, detail: str) -> Cause:
    return cause("FieldValueInvalid", field, f"Invalid value: {fmt_value(value)}: {detail}")


def invalid_rendered(field: str, rendered: str, detail: str) -> Cause:
    """Invalid with a value already rendered the Go way (maps, structs, Stringers)."""
    return cause("FieldValueInvalid", field, f"Invalid value: {rendered}: {detail}")


def not_found(field: str, value: Any) -> Cause:
    return cause("FieldValueNotFound", field, f"Not found: {fmt_value(value)}")


def go_string_map(m: Any) -> str:
    """``%#v`` of a ``map[string]string`` (keys sorted, as fmt prints maps)."""
    if m is None:
        return "map[string]string(nil)"
    items = ", ".join(f"{go_quote(str(k))}:{go_quote(as_str(v))}" for k, v in sorted(as_dict(m).items()))
    return "map[string]string{" + items + "}"


def label_selector_string(sel: Any) -> str:
    """gogo-protobuf ``(*LabelSelector).String()``, how field errors print selectors."""
    if sel is None:
        return "nil"
    sel = as_dict(sel)
    labels = "".join(f"{k}: {as_str(v)}," for k, v in sorted(as_dict(sel.get("matchLabels")).items()))
    exprs = "".join(
        "LabelSelectorRequirement{Key:%s,Operator:%s,Values:[%s],}," % (
            as_str(e.get("key")), as_str(e.get("operator")), " ".join(as_str(v) for v in as_list(e.get("values"))))
        for e in (as_dict(x) for x in as_list(sel.get("matchExpressions"))))
    return (f"&LabelSelector{{MatchLabels:map[string]string{{{labels}}},"
            f"MatchExpressions:[]LabelSelectorRequirement{{{exprs}}},}}")


def int_or_string(value: Any) -> str:
    """``(*IntOrString).String()``: field errors print IntOrString unquoted."""
    return value if isinstance(value, str) else format_value(value)


def as_dict(value: Any) -> Obj:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def nonnegative(value: Any, field: str) -> Causes:
    n = as_int(value)
    return [invalid(field, n, NEGATIVE)] if n is not None and n < 0 else []


def one_of(value: Any, path: str, allowed: list[str]) -> Causes:
    """Required when empty, Unsupported when not one of ``allowed``."""
    text = as_str(value)
    if not text:
        return [required(path, "")]
    return [] if text in allowed else [not_supported(path, text, allowed)]
GREATER_THAN_ZERO = "must be greater than zero"
