"""Structural schemas of CustomResourceDefinitions: pruning, defaulting and validation.

kube-apiserver runs every custom object it decodes through three steps driven by the
version's ``schema.openAPIV3Schema``, and so do we, in one pass over the object:

* **pruning** (apiextensions ``pruning.PruneWithOptions``): fields the schema does not
  specify are dropped and their paths reported (``spec.foo``, ``spec.items[0].bar``,
  ``spec.labels.key.x``), except under ``x-kubernetes-preserve-unknown-fields``; ``apiVersion``,
  ``kind`` and ``metadata`` survive at the root and in ``x-kubernetes-embedded-resource`` objects.
  ``null`` for a non-nullable field without a default is dropped silently
  (``PruneNonNullableNullsWithoutDefaults``).
* **defaulting** (``defaulting.Default``): absent properties, and ``null`` ones that are not
  nullable, take the schema ``default``; defaults are processed like user input, so defaults
  nested inside them apply too.
* **validation** (kube-openapi's ``SchemaValidator`` as wrapped by ``kubeOpenAPIResultToFieldErrors``,
  then the embedded-resource checks, then ``x-kubernetes-list-type`` set/map uniqueness), on the
  pruned and defaulted object, with the real server's wording.

The schema is compiled once into a tree of ``_Node`` objects so the per-write cost is a
single walk with no dictionary look-ups of schema keywords.

Not supported (documented deviations):

* ``x-kubernetes-validations`` (CEL rules) are accepted and ignored: there is no CEL evaluator here.
* ``anyOf``/``oneOf`` failures report the alternative with the fewest errors, where kube-openapi
  uses an internal "match count"; the summary cause (``"spec.x" must validate ...``) is the same.
* ``pattern`` is Go RE2 syntax evaluated with Python ``re`` (``$``/``\\z`` and POSIX classes are
  translated); Unicode classes (``\\p{..}``) cannot be evaluated and are skipped.
* The ``email``, ``uri`` and ``hostname`` formats are approximations of Go's parsers.
* Embedded resources' ``metadata`` is reduced to ObjectMeta fields, but its values (labels,
  names) are not validated as the real server's ObjectMeta validation would.
* Root ``metadata`` is left to the caller; only ``name``/``generateName`` restrictions the
  schema declares are validated here (the only ones a structural schema may declare).
"""

from __future__ import annotations

import base64
import binascii
import calendar
import ipaddress
import math
import re
import warnings
from decimal import Decimal
from typing import Any, Callable

from koordinator.apis.gostrings import go_quote

from koordinator.apis.field_causes import cause, required

Obj = dict[str, Any]
Cause = dict[str, str]

_META_KEYS = frozenset(("apiVersion", "kind", "metadata"))
_OBJECT_META_FIELDS = frozenset((
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation", "creationTimestamp",
    "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
    "managedFields",
))
_JSON_TYPE: dict[type, str] = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object",
                               list: "array", type(None): "null"}
# kube-openapi's schemaInfoForType: the "format" Go infers for a decoded JSON value.
_GO_FORMAT: dict[type, str] = {int: "int64", float: "float64"}
_SCALARS = frozenset((str, int, float, bool))
_PY_TYPES: dict[str, tuple[type, ...]] = {"string": (str,), "integer": (int,), "number": (int, float),
                                          "boolean": (bool,)}
_OPENAPI_TYPES = ("array", "boolean", "integer", "number", "object", "string")
_SCHEMA_KEYWORDS = frozenset((
    "id", "$schema", "$ref", "description", "type", "format", "title", "default", "maximum", "exclusiveMaximum",
    "minimum", "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "multipleOf", "enum", "maxProperties", "minProperties", "required", "items", "allOf", "oneOf", "anyOf", "not",
    "properties", "additionalProperties", "patternProperties", "dependencies", "additionalItems", "definitions",
    "externalDocs", "example", "nullable", "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type", "x-kubernetes-map-type",
    "x-kubernetes-validations",
))


# ---------------------------------------------------------------------------------------------
# Rendering values the way apimachinery's field.Error and kube-openapi do (Go %q, %v, json)
# ---------------------------------------------------------------------------------------------



def _digits(f: float) -> tuple[str, int]:
    """Shortest round-trip decimal digits of ``abs(f)`` and the exponent of the first digit."""
    sign, digits, exp = Decimal(repr(abs(f))).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    return text, len(digits) + int(exp) - 1


def _go_float(f: float) -> str:
    """Go's %v for a float64: shortest digits, exponent form below 1e-4 or from 1e21 on."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1, f) < 0 else "0"
    digits, exp = _digits(f)
    sign = "-" if f < 0 else ""
    if exp < -4 or exp >= 21:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    return sign + _plain(digits, exp)


def _plain(digits: str, exp: int) -> str:
    if exp < 0:
        return "0." + "0" * (-exp - 1) + digits
    if len(digits) <= exp + 1:
        return digits + "0" * (exp + 1 - len(digits))
    return digits[: exp + 1] + "." + digits[exp + 1:]


def _json_float(f: float) -> str:
    """Go encoding/json's float64 text (ES6 style: exponent below 1e-6 or from 1e21 on)."""
    if not math.isfinite(f):
        return "null"
    if f == 0:
        return "0"
    digits, exp = _digits(f)
    sign = "-" if f < 0 else ""
    if exp < -6 or exp >= 21:
        mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mant}e{'-' if exp < 0 else '+'}{abs(exp)}"
    return sign + _plain(digits, exp)


_JSON_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f",
                 "<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_NEEDS_ESCAPE = re.compile('["\\\\<>&\u2028\u2029\x00-\x1f]')


def _json_str(s: str) -> str:
    if not _JSON_NEEDS_ESCAPE.search(s):
        return f'"{s}"'
    return '"' + _JSON_NEEDS_ESCAPE.sub(lambda m: _JSON_ESCAPES.get(m.group(), f"\\u{ord(m.group()):04x}"), s) + '"'


def _go_json(v: Any) -> str:
    """Go's json.Marshal of a decoded JSON value (map keys sorted, HTML-safe escaping)."""
    t = type(v)
    if t is str:
        return _json_str(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        return _json_float(v)
    if v is None:
        return "null"
    if t is dict:
        return "{" + ",".join(f"{_json_str(k)}:{_go_json(v[k])}" for k in sorted(v)) + "}"
    if t is list:
        return "[" + ",".join(_go_json(x) for x in v) + "]"
    return _json_str(str(v))


def _render(v: Any) -> str:
    """A bad value as field.Error.ErrorBody prints it (%q strings, %v scalars, JSON otherwise)."""
    t = type(v)
    if t is str:
        return go_quote(v)
    if t is bool:
        return "true" if v else "false"
    if t is int:
        return str(v)
    if t is float:
        return _go_float(v)
    return _go_json(v)


def _invalid(path: str, value: Any, detail: str) -> Cause:
    return cause("FieldValueInvalid", path, f"Invalid value: {_render(value)}: {detail}")


def _type_invalid(path: str, value: Any, detail: str) -> Cause:
    return cause("FieldValueTypeInvalid", path, f"Invalid value: {_render(value)}: {detail}")


def _too_many(path: str, actual: int, limit: int) -> Cause:
    return cause("FieldValueTooMany", path,
                 f"Too many: {actual}: must have at most {limit} {'item' if limit == 1 else 'items'}")


def _duplicate(path: str, value: Any) -> Cause:
    return cause("FieldValueDuplicate", path, f"Duplicate value: {_render(value)}")


def _composite(message: str) -> Cause:
    # kube-openapi's allOf/anyOf/oneOf/not results are plain errors, not field errors: the
    # server wraps them as field.Invalid with no field and an empty value.
    return cause("FieldValueInvalid", "", f'Invalid value: "": {message}')


# ---------------------------------------------------------------------------------------------
# String formats (the set kube-apiserver keeps; any other format is stripped and not checked)
# ---------------------------------------------------------------------------------------------

_RX_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\Z", re.ASCII)
_RX_TIME = re.compile(r"([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))\Z", re.ASCII)
_RX_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}\Z", re.ASCII)
_RX_UUID = {
    "uuid": re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}\Z"),
    "uuid3": re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}\Z"),
    "uuid4": re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}\Z"),
    "uuid5": re.compile(r"(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}\Z"),
}
_RX_HOSTNAME = re.compile(
    r"([a-zA-Z0-9](-?[a-zA-Z0-9]{0,62})?|([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,63})\Z")
_RX_EMAIL = re.compile(r"([^<>@\s]+@[^<>@\s]+|[^<>]*<[^<>@\s]+@[^<>@\s]+>)\Z")
_RX_URI = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*:[^\s]*|/[^\s]*)\Z")
_RX_MAC = re.compile(r"([0-9a-fA-F]{2}([:-])[0-9a-fA-F]{2}(\2[0-9a-fA-F]{2}){4}((\2[0-9a-fA-F]{2}){2})?"
                     r"((\2[0-9a-fA-F]{2}){12})?|[0-9a-fA-F]{4}(\.[0-9a-fA-F]{4}){2}((\.[0-9a-fA-F]{4}){1})?"
                     r"((\.[0-9a-fA-F]{4}){6})?)\Z")
_RX_GO_DURATION = re.compile(r"[-+]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:ns|us|µs|μs|ms|s|m|h))+\Z|[-+]?0\Z")
_RX_DURATION_PART = re.compile(r"(\d+)\s*([A-Za-zµ]+)")
_DURATION_UNITS = frozenset(("ns", "nanosecond", "nanoseconds", "us", "µs", "microsecond", "microseconds", "ms",
                             "millisecond", "milliseconds", "s", "sec", "secs", "second", "seconds", "m", "min",
                             "mins", "minute", "minutes", "h", "hr", "hrs", "hour", "hours", "d", "day", "days",
                             "w", "wk", "week", "weeks"))
_RX_HEXCOLOR = re.compile(r"#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})\Z")
_BYTE = r"\s*(0|[1-9]\d?|1\d\d?|2[0-4]\d|25[0-5])\s*"
_RX_RGB = re.compile(rf"rgb\({_BYTE},{_BYTE},{_BYTE}\)\Z")
_RX_SSN = re.compile(r"\d{3}[- ]?\d{2}[- ]?\d{4}\Z", re.ASCII)
_RX_OBJECTID = re.compile(r"[0-9a-fA-F]{24}\Z")
_RX_CREDITCARD = re.compile(r"(?:4[0-9]{12}(?:[0-9]{3})?|5[1-5][0-9]{14}|(222[1-9]|22[3-9][0-9]|2[3-6][0-9]{2}"
                            r"|27[01][0-9]|2720)[0-9]{12}|6(?:011|5[0-9][0-9])[0-9]{12}|3[47][0-9]{13}"
                            r"|3(?:0[0-5]|[68][0-9])[0-9]{11}|(?:2131|1800|35\d{3})\d{11}|6[27][0-9]{14})\Z")


def _is_date(s: str) -> bool:
    m = _RX_DATE.match(s)
    if m is None:
        return False
    year, month, day = int(m.group(1)), int(m.group(2)), int(m.group(3))
    # Year 0 is a leap year in Go's proleptic calendar, as 2000 is.
    return 1 <= month <= 12 and 1 <= day <= calendar.monthrange(year or 2000, month)[1]


def _is_datetime(s: str) -> bool:
    # go-openapi's IsDateTime: a full-date, "T", then a time with a mandatory zone.
    if len(s) < 4:
        return False
    parts = s.lower().split("t")
    if len(parts) < 2 or not _is_date(parts[0]):
        return False
    m = _RX_TIME.match(parts[1])
    return m is not None and m.group(1) <= "23" and m.group(2) <= "59" and m.group(3) <= "59"


def _is_byte(s: str) -> bool:
    if len(s) % 4 or not _RX_BASE64.match(s):
        return False
    try:
        base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _is_ip(s: str, version: int) -> bool:
    if "%" in s:
        return False
    try:
        ip = ipaddress.ip_address(s)
    except ValueError:
        return False
    return (ip.version == 4 and "." in s) if version == 4 else ":" in s


def _is_cidr(s: str) -> bool:
    if "/" not in s or "%" in s:
        return False
    try:
        ipaddress.ip_network(s, strict=False)
    except ValueError:
        return False
    return True


def _is_hostname(s: str) -> bool:
    return len(s) <= 255 and bool(_RX_HOSTNAME.match(s)) and all(len(p) <= 63 for p in s.split("."))


def _is_duration(s: str) -> bool:
    if _RX_GO_DURATION.match(s):
        return True
    return any(unit.lower() in _DURATION_UNITS for _, unit in _RX_DURATION_PART.findall(s))


def _isbn_ok(digits: str, length: int) -> bool:
    if length == 10:
        if not re.fullmatch(r"[0-9]{9}[0-9X]", digits):
            return False
        total = sum((10 - i) * (10 if c == "X" else int(c)) for i, c in enumerate(digits))
        return total % 11 == 0
    if not re.fullmatch(r"[0-9]{13}", digits):
        return False
    total = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(digits))
    return total % 10 == 0


def _is_isbn(s: str, length: int = 0) -> bool:
    digits = s.replace("-", "").replace(" ", "")
    if length:
        return _isbn_ok(digits, length)
    return _isbn_ok(digits, 10) or _isbn_ok(digits, 13)


def _is_creditcard(s: str) -> bool:
    digits = re.sub(r"[^0-9]", "", s)
    if not _RX_CREDITCARD.match(digits):
        return False
    total, double = 0, False
    for c in reversed(digits):
        d = int(c) * (2 if double else 1)
        total += d - 9 if d > 9 else d
        double = not double
    return total % 10 == 0


def _matcher(rx: re.Pattern[str]) -> Callable[[str], bool]:
    return lambda s: rx.match(s) is not None


_FORMATS: dict[str, Callable[[str], bool]] = {
    "bsonobjectid": _matcher(_RX_OBJECTID),
    "uri": _matcher(_RX_URI),
    "email": _matcher(_RX_EMAIL),
    "hostname": _is_hostname,
    "ipv4": lambda s: _is_ip(s, 4),
    "ipv6": lambda s: _is_ip(s, 6),
    "cidr": _is_cidr,
    "mac": _matcher(_RX_MAC),
    "uuid": _matcher(_RX_UUID["uuid"]),
    "uuid3": _matcher(_RX_UUID["uuid3"]),
    "uuid4": _matcher(_RX_UUID["uuid4"]),
    "uuid5": _matcher(_RX_UUID["uuid5"]),
    "isbn": _is_isbn,
    "isbn10": lambda s: _is_isbn(s, 10),
    "isbn13": lambda s: _is_isbn(s, 13),
    "creditcard": _is_creditcard,
    "ssn": _matcher(_RX_SSN),
    "hexcolor": _matcher(_RX_HEXCOLOR),
    "rgbcolor": _matcher(_RX_RGB),
    "byte": _is_byte,
    "password": lambda s: True,
    "date": _is_date,
    "duration": _is_duration,
    "datetime": _is_datetime,
}


# ---------------------------------------------------------------------------------------------
# Go RE2 patterns on Python's re
# ---------------------------------------------------------------------------------------------

_POSIX_CLASSES = {"alpha": "a-zA-Z", "digit": "0-9", "alnum": "a-zA-Z0-9", "upper": "A-Z", "lower": "a-z",
                  "space": r"\t\n\v\f\r ", "xdigit": "0-9A-Fa-f", "word": r"\w", "blank": r"\t ",
                  "punct": r"!-/:-@\[-`{-~", "cntrl": r"\x00-\x1f\x7f", "print": r" -~", "graph": r"!-~",
                  "ascii": r"\x00-\x7f"}
_RX_MULTILINE_FLAG = re.compile(r"\(\?[a-zA-Z]*m")
_RX_PERL_ONLY = re.compile(r"\(\?(?:[=!]|<[=!])")
_RX_BACKREF = re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]")


def _translate_go_regex(src: str) -> str:
    """Rewrite the RE2 constructs whose meaning differs in Python (``$``, ``\\z``, POSIX classes)."""
    multiline = _RX_MULTILINE_FLAG.search(src) is not None
    out: list[str] = []
    i, n, in_class = 0, len(src), False
    while i < n:
        c = src[i]
        if c == "\\" and i + 1 < n:
            if src[i + 1] == "z" and not in_class:
                out.append(r"\Z")
            else:
                out.append(src[i:i + 2])
            i += 2
            continue
        if in_class:
            if src.startswith("[:", i):
                end = src.find(":]", i + 2)
                name = src[i + 2:end] if end > 0 else ""
                negated = name.startswith("^")
                cls = _POSIX_CLASSES.get(name.lstrip("^"))
                if cls is not None and not negated:
                    out.append(cls)
                    i = end + 2
                    continue
            if c == "]":
                in_class = False
            out.append(c)
        elif c == "[":
            in_class = True
            out.append(c)
            # A "]" right after "[" or "[^" is a literal in both dialects.
            if src.startswith("^", i + 1):
                out.append("^")
                i += 1
            if src.startswith("]", i + 1):
                out.append(r"\]")
                i += 1
        elif c == "$" and not multiline:
            # Go's $ is the end of the text; Python's also matches before a final newline.
            out.append(r"\Z")
        else:
            out.append(c)
        i += 1
    return "".join(out)


def _compile_go_regex(src: str) -> tuple[re.Pattern[str] | None, str]:
    """Compile a schema pattern; returns (pattern or None, error text as Go would word it)."""
    perl = _RX_PERL_ONLY.search(src)
    if perl:
        return None, f"error parsing regexp: invalid or unsupported Perl syntax: `{perl.group()}`"
    backref = _RX_BACKREF.search(src)
    if backref:
        return None, f"error parsing regexp: invalid escape sequence: `{backref.group()[-2:]}`"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return re.compile(_translate_go_regex(src), re.ASCII), ""
    except re.error as e:
        return None, f"error parsing regexp: {e}"


def _uses_unicode_classes(src: str) -> bool:
    return "\\p" in src or "\\P" in src


# ---------------------------------------------------------------------------------------------
# The compiled schema
# ---------------------------------------------------------------------------------------------


def _int_or_none(v: Any) -> int | None:
    if type(v) is int:
        return v
    if type(v) is float and v.is_integer():
        return int(v)
    return None


def _num_or_none(v: Any) -> int | float | None:
    return v if type(v) in (int, float) else None


class _Node:
    """One schema node, with every keyword the walk needs already looked up."""

    __slots__ = (
        "types", "type_label", "nullable", "fmt_name", "fmt_check", "props", "addl", "addl_any", "items",
        "items_walk", "preserve", "embedded", "has_default", "default", "defaulted", "required", "enum",
        "enum_strs", "max_len", "min_len", "pattern", "pattern_src", "pattern_err", "minimum", "maximum",
        "excl_min", "excl_max", "multiple_of", "min_items", "max_items", "unique", "min_props", "max_props",
        "all_of", "any_of", "one_of", "not_", "junctors", "list_type", "list_keys", "str_checks", "num_checks",
        "scalar_checks", "fast", "obj_pre", "arr_pre", "int_only", "arr_post", "obj_post", "type_ok", "int_lo",
        "int_hi", "str_ok", "fast_props", "fast_addl",
    )

    def __init__(self, s: Any) -> None:
        if not isinstance(s, dict):
            s = {}
        if s.get("x-kubernetes-int-or-string") is True:
            self.types: tuple[str, ...] = ("integer", "string")
        else:
            t = s.get("type")
            self.types = (t,) if isinstance(t, str) and t else ()
        self.type_label = ",".join(self.types)
        self.nullable = s.get("nullable") is True
        fmt = s.get("format")
        check = _FORMATS.get(fmt.replace("-", "")) if isinstance(fmt, str) and fmt else None
        self.fmt_name = fmt if check is not None else ""
        self.fmt_check = check
        props = s.get("properties")
        self.props: dict[str, _Node] = ({k: _Node(v) for k, v in props.items()} if isinstance(props, dict) else {})
        addl = s.get("additionalProperties")
        self.addl = _Node(addl) if isinstance(addl, dict) else None
        self.addl_any = addl is True
        items = s.get("items")
        self.items = _Node(items) if isinstance(items, dict) else None
        self.preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
        self.embedded = s.get("x-kubernetes-embedded-resource") is True
        self.items_walk = _preserved(self.items) if self.preserve and self.items is not None else self.items
        self.default = s.get("default")
        self.has_default = self.default is not None
        self.defaulted = tuple((k, n) for k, n in self.props.items() if n.has_default)
        req = s.get("required")
        self.required = tuple(r for r in req if isinstance(r, str)) if isinstance(req, list) else ()
        enum = s.get("enum")
        self.enum = list(enum) if isinstance(enum, list) and enum else None
        self.enum_strs = (frozenset(e for e in self.enum if type(e) is str) if self.enum is not None else None)
        self.max_len = _int_or_none(s.get("maxLength"))
        self.min_len = _int_or_none(s.get("minLength"))
        pattern = s.get("pattern")
        self.pattern_src = pattern if isinstance(pattern, str) and pattern else ""
        self.pattern, self.pattern_err = (_compile_go_regex(self.pattern_src) if self.pattern_src else (None, ""))
        if self.pattern is None and self.pattern_src and _uses_unicode_classes(self.pattern_src):
            self.pattern_src = ""  # valid RE2 we cannot evaluate: skipped rather than rejected
        self.minimum = _num_or_none(s.get("minimum"))
        self.maximum = _num_or_none(s.get("maximum"))
        self.excl_min = s.get("exclusiveMinimum") is True
        self.excl_max = s.get("exclusiveMaximum") is True
        self.multiple_of = _num_or_none(s.get("multipleOf"))
        self.min_items = _int_or_none(s.get("minItems"))
        self.max_items = _int_or_none(s.get("maxItems"))
        self.unique = s.get("uniqueItems") is True
        self.min_props = _int_or_none(s.get("minProperties"))
        self.max_props = _int_or_none(s.get("maxProperties"))
        self.all_of = [_Node(x) for x in s.get("allOf") or () if isinstance(x, dict)]
        self.any_of = [_Node(x) for x in s.get("anyOf") or () if isinstance(x, dict)]
        self.one_of = [_Node(x) for x in s.get("oneOf") or () if isinstance(x, dict)]
        self.not_ = _Node(s["not"]) if isinstance(s.get("not"), dict) else None
        self.junctors = bool(self.all_of or self.any_of or self.one_of or self.not_ is not None)
        lt = s.get("x-kubernetes-list-type")
        self.list_type = lt if lt in ("set", "map") else ""
        keys = s.get("x-kubernetes-list-map-keys")
        self.list_keys = tuple(k for k in keys if isinstance(k, str)) if isinstance(keys, list) else ()
        self._finish()

    def _finish(self) -> None:
        self.str_checks = (self.max_len is not None or self.min_len is not None or bool(self.pattern_src))
        self.num_checks = (self.minimum is not None or self.maximum is not None or self.multiple_of is not None)
        self.scalar_checks = (self.str_checks or self.num_checks or self.fmt_check is not None
                              or self.enum is not None or self.junctors)
        types = self.types
        self.type_ok = (frozenset(t for name in types for t in _PY_TYPES.get(name, ())) if types else _SCALARS)
        self.fast: frozenset[type] = frozenset() if self.scalar_checks else self.type_ok
        # Cheaper tests for the common checked leaves: an integer within bounds, a string in its enum.
        self.int_lo: float = math.inf
        self.int_hi: float = -math.inf
        self.str_ok: frozenset[str] = frozenset()
        plain = not (self.fmt_check is not None or self.junctors or self.str_checks)
        if (plain and self.enum is None and self.multiple_of is None and int in self.type_ok
                and self.num_checks):
            lo, hi = self.minimum, self.maximum
            self.int_lo = -math.inf if lo is None else (int(lo) + 1 if self.excl_min else int(lo))
            self.int_hi = math.inf if hi is None else (int(hi) - 1 if self.excl_max else int(hi))
        if plain and not self.num_checks and self.enum_strs and str in self.type_ok:
            self.str_ok = self.enum_strs
        self.obj_pre = self.junctors or bool(types and "object" not in types)
        self.arr_pre = self.junctors or bool(types and "array" not in types)
        self.arr_post = (self.min_items is not None or self.max_items is not None or self.unique
                         or self.enum is not None or bool(self.list_type))
        self.obj_post = (self.enum is not None or self.min_props is not None or self.max_props is not None
                         or bool(self.required))
        self.int_only = "integer" in types and "number" not in types
        # What the walk's inner loop needs per property, unpacked in one go.
        self.fast_props = {k: n._fast_entry() for k, n in self.props.items()}
        self.fast_addl = self.addl._fast_entry() if self.addl is not None else None

    def _fast_entry(self) -> tuple[Any, ...]:
        return (self, self.fast, self.int_lo, self.int_hi, self.str_ok)


def _preserved(node: _Node) -> _Node:
    """The node as seen through a preserving array: its own unknown fields are kept too."""
    clone = object.__new__(_Node)
    for slot in _Node.__slots__:
        setattr(clone, slot, getattr(node, slot))
    clone.preserve = True
    if clone.items is not None:
        clone.items_walk = _preserved(clone.items)
    return clone


# ---------------------------------------------------------------------------------------------
# Value validation (kube-openapi semantics and order)
# ---------------------------------------------------------------------------------------------


def _type_error(node: _Node, v: Any, path: str) -> Cause | None:
    if v is None:
        if node.nullable:
            return None
        return _type_invalid(path, "null", f'{path} in body must be of type {node.type_label}: "null"')
    t = type(v)
    sch = _JSON_TYPE.get(t, "object")
    types = node.types
    if sch in types:
        return None
    float_int = t is float and "integer" in types and math.isfinite(v) and v.is_integer()
    int_float = t is int and "number" in types
    if node.fmt_name and t is not str and t is not list and not (float_int or int_float):
        # kube-openapi compares the declared format with the one it infers from the Go value.
        go_fmt = _GO_FORMAT.get(t, "")
        return _type_invalid(path, go_fmt, f"{path} in body must be of type {node.fmt_name}: {go_quote(go_fmt)}")
    if node.fmt_name and (t is str or t is list) and "number" not in types and "integer" not in types:
        return None
    if float_int or int_float:
        return None
    return _type_invalid(path, sch, f"{path} in body must be of type {node.type_label}: {go_quote(sch)}")


def _junctor_errors(node: _Node, v: Any, path: str, errs: list[Cause]) -> None:
    quoted = go_quote(path)
    if node.any_of:
        best: list[Cause] | None = None
        for sub in node.any_of:
            found: list[Cause] = []
            _validate(sub, v, path, found)
            if not found:
                break
            if best is None or len(found) < len(best):
                best = found
        else:
            errs.append(_composite(f"{quoted} must validate at least one schema (anyOf)"))
            errs.extend(best or ())
    if node.one_of:
        valid, best = 0, None
        for sub in node.one_of:
            found = []
            _validate(sub, v, path, found)
            if not found:
                valid += 1
                best = None
            elif valid == 0 and (best is None or len(found) < len(best)):
                best = found
        if valid != 1:
            detail = "Found none valid" if valid == 0 else f"Found {valid} valid alternatives"
            errs.append(_composite(f"{quoted} must validate one and only one schema (oneOf). {detail}"))
            errs.extend(best or ())
    if node.all_of:
        valid = 0
        for sub in node.all_of:
            found = []
            _validate(sub, v, path, found)
            if not found:
                valid += 1
            errs.extend(found)
        if valid != len(node.all_of):
            errs.append(_composite(f"{quoted} must validate all the schemas (allOf)"
                                   + (". None validated" if valid == 0 else "")))
    if node.not_ is not None:
        found = []
        _validate(node.not_, v, path, found)
        if not found:
            errs.append(_composite(f"{quoted} must not validate the schema (not)"))


def _string_error(node: _Node, v: str, path: str) -> Cause | None:
    n = node.max_len
    if n is not None and len(v) > n:
        return cause("FieldValueTooLong", path, f"Too long: may not be more than {n} {'byte' if n == 1 else 'bytes'}")
    n = node.min_len
    if n is not None and len(v) < n:
        return _invalid(path, v, f"{path} in body should be at least {n} chars long")
    if node.pattern_src:
        if node.pattern is None:
            return _invalid(path, v, f"{path} in body should match '{node.pattern_src}, but pattern is invalid: "
                                     f"{node.pattern_err}'")
        if node.pattern.search(v) is None:
            return _invalid(path, v, f"{path} in body should match '{node.pattern_src}'")
    return None


def _number_errors(node: _Node, v: int | float, path: str, errs: list[Cause]) -> None:
    is_int = type(v) is int
    # kube-openapi compares integers with the bound truncated to int64, floats as floats;
    # the bound is printed in the same type.
    f = node.multiple_of
    if f is not None:
        if f < 0:
            errs.append(_invalid(path, f, f"factor MultipleOf declared for {path} must be positive: {_render(f)}"))
        elif is_int and int(f) != 0:
            if v % int(f):
                errs.append(_invalid(path, v, f"{path} in body should be a multiple of {int(f)}"))
        elif f != 0:
            mult = (1 / f * v) if f < 1 else v / f
            if not (math.isfinite(mult) and (mult.is_integer() or abs(mult - round(mult)) < 1e-9 * abs(mult))):
                errs.append(_invalid(path, v, f"{path} in body should be a multiple of {_render(float(f))}"))
    m = node.minimum
    if m is not None:
        bound = int(m) if is_int else float(m)
        if v < bound or (node.excl_min and v == bound):
            op = "greater than" if node.excl_min else "greater than or equal to"
            errs.append(_invalid(path, v, f"{path} in body should be {op} {_render(bound)}"))
    m = node.maximum
    if m is not None:
        bound = int(m) if is_int else float(m)
        if v > bound or (node.excl_max and v == bound):
            op = "less than" if node.excl_max else "less than or equal to"
            errs.append(_invalid(path, v, f"{path} in body should be {op} {_render(bound)}"))


def _pre_errors(node: _Node, v: Any, path: str, errs: list[Cause]) -> None:
    """Type, allOf/anyOf/oneOf/not, string, format and number checks (kube-openapi's order)."""
    if node.types:
        e = _type_error(node, v, path)
        if e is not None:
            errs.append(e)
    if node.junctors:
        _junctor_errors(node, v, path, errs)
    t = type(v)
    if t is str:
        if node.str_checks:
            e = _string_error(node, v, path)
            if e is not None:
                errs.append(e)
        if node.fmt_check is not None and not node.fmt_check(v):
            errs.append(_type_invalid(path, v, f"{path} in body must be of type {node.fmt_name}: {go_quote(v)}"))
    elif (t is int or t is float) and node.num_checks:
        _number_errors(node, v, path, errs)


def _enum_match(v: Any, e: Any) -> bool:
    tv, te = type(v), type(e)
    if tv is bool or te is bool:
        return tv is te and v == e
    if tv in (int, float) and te in (int, float):
        if tv is float and te is int:
            # Go converts the value to the enum's type, truncating a float to int64.
            return math.isfinite(v) and int(v) == e
        return v == e
    return tv is te and _strict_key(v) == _strict_key(e)


def _enum_error(node: _Node, v: Any, path: str) -> Cause | None:
    enum = node.enum
    if v is not None:
        if type(v) is str:
            if v in node.enum_strs:  # type: ignore[operator]
                return None
        elif any(_enum_match(v, e) for e in enum):  # type: ignore[union-attr]
            return None
    supported = ", ".join(go_quote(e if type(e) is str else _go_json(e)) for e in enum)  # type: ignore[union-attr]
    return cause("FieldValueNotSupported", path, f"Unsupported value: {_render(v)}: supported values: {supported}")


def _strict_key(v: Any) -> Any:
    """A hashable key equal only for reflect.DeepEqual-equal JSON values (1 and 1.0 differ)."""
    t = type(v)
    if t is dict or t is list:
        return ("json", _go_json(v), _types_signature(v))
    return (t, v)


def _types_signature(v: Any) -> str:
    t = type(v)
    if t is dict:
        return "{" + ",".join(_types_signature(v[k]) for k in sorted(v)) + "}"
    if t is list:
        return "[" + ",".join(_types_signature(x) for x in v) + "]"
    return _JSON_TYPE.get(t, "?")[0]


def _array_post_errors(node: _Node, v: list[Any], path: str, errs: list[Cause]) -> None:
    size = len(v)
    if node.min_items is not None and size < node.min_items:
        errs.append(_invalid(path, size, f"{path} in body should have at least {node.min_items} items"))
    if node.max_items is not None and size > node.max_items:
        errs.append(_too_many(path, size, node.max_items))
    if node.unique and size > 1:
        seen = set()
        for x in v:
            key = _strict_key(x)
            if key in seen:
                errs.append(_invalid(path, "", f"{path} in body shouldn't contain duplicates"))
                break
            seen.add(key)
    if node.enum is not None:
        e = _enum_error(node, v, path)
        if e is not None:
            errs.append(e)


def _props_count_error(node: _Node, n: int, path: str) -> Cause | None:
    if node.min_props is not None and n < node.min_props:
        return _invalid(path, n, f"{path} in body should have at least {node.min_props} properties")
    if node.max_props is not None and n > node.max_props:
        return _too_many(path, n, node.max_props)
    return None


def _validate(node: _Node, v: Any, path: str, errs: list[Cause]) -> None:
    """Validate ``v`` against ``node`` without pruning or defaulting (allOf branches, metadata)."""
    if v is None:
        if node.types:
            e = _type_error(node, v, path)
            if e is not None:
                errs.append(e)
        if node.enum is not None:
            errs.append(_enum_error(node, v, path))  # type: ignore[arg-type]
        return
    _pre_errors(node, v, path, errs)
    t = type(v)
    if t is list:
        if node.items is not None:
            for i, x in enumerate(v):
                _validate(node.items, x, f"{path}[{i}]", errs)
        _array_post_errors(node, v, path, errs)
    elif t is dict:
        if node.enum is not None:
            e = _enum_error(node, v, path)
            if e is not None:
                errs.append(e)
        e = _props_count_error(node, len(v), path)
        if e is not None:
            errs.append(e)
            return
        props, addl = node.props, node.addl
        for k, x in v.items():
            child = props.get(k) or addl
            if child is not None:
                _validate(child, x, f"{path}.{k}" if path else k, errs)
        for k in node.required:
            if k not in v:
                errs.append(required(f"{path}.{k}" if path else k))
    elif node.enum is not None:
        e = _enum_error(node, v, path)
        if e is not None:
            errs.append(e)


# ---------------------------------------------------------------------------------------------
# x-kubernetes-list-type and embedded resources (separate passes in the real server)
# ---------------------------------------------------------------------------------------------


def _list_type_errors(node: _Node, v: list[Any], path: str, errs: list[Cause]) -> None:
    if len(v) <= 1 and node.list_type == "set":
        return
    if node.list_type == "set":
        counts: dict[Any, int] = {}
        for i, x in enumerate(v):
            key = _strict_key(x)
            times = counts.get(key, 0)
            if times == 1:
                errs.append(_duplicate(f"{path}[{i}]", x))
            counts[key] = times + 1
        return
    for i, x in enumerate(v):
        if x is not None and type(x) is not dict:
            errs.append(_invalid(f"{path}[{i}]", x, "must be an object for an array of list-type map"))
            return
    if len(v) <= 1:
        return
    keys = node.list_keys
    item_props = node.items.props if node.items is not None else {}
    missing = []
    for i, x in enumerate(v):
        if type(x) is dict:
            for k in keys:
                if k not in x and not (k in item_props and item_props[k].has_default):
                    missing.append(required(f"{path}[{i}].{k}"))
    if missing:
        errs.extend(missing)
        return
    seen = set()
    for i, x in enumerate(v):
        if type(x) is not dict:
            continue
        key = tuple(_strict_key(x[k]) if k in x else ("unspecified",) for k in keys)
        if key in seen:
            errs.append(_duplicate(f"{path}[{i}]", {k: x.get(k) for k in keys}))
        else:
            seen.add(key)


def _embedded_errors(out: Obj, path: str, errs: list[Cause]) -> None:
    if "apiVersion" not in out:
        errs.append(required(f"{path}.apiVersion", "must not be empty"))
    if "kind" not in out:
        errs.append(required(f"{path}.kind", "must not be empty"))
    for k in ("apiVersion", "kind"):
        if k not in out:
            continue
        val, fpath = out[k], f"{path}.{k}"
        if type(val) is not str:
            errs.append(_invalid(fpath, val, "must be a string"))
        elif not val:
            errs.append(_invalid(fpath, val, "must not be empty"))
        elif k == "apiVersion" and val.count("/") > 1:
            errs.append(_invalid(fpath, val, f"unexpected GroupVersion string: {val}"))


# ---------------------------------------------------------------------------------------------
# The walk: prune, default and validate in one pass
# ---------------------------------------------------------------------------------------------


def _copy(v: Any) -> Any:
    t = type(v)
    if t is dict:
        return {k: _copy(x) for k, x in v.items()}
    if t is list:
        return [_copy(x) for x in v]
    return v


class _State:
    __slots__ = ("causes", "meta", "lists", "unknown")

    def __init__(self) -> None:
        self.causes: list[Cause] = []
        self.meta: list[Cause] = []
        self.lists: list[Cause] = []
        self.unknown: list[str] | None = []


def _walk(node: _Node | None, v: Any, path: str, st: _State) -> Any:
    t = type(v)
    if t is dict:
        return _walk_dict(node, v, path, st, False)
    if t is list:
        return _walk_list(node, v, path, st)
    if node is None:
        return v
    return _walk_scalar(node, v, t, path, st)


def _walk_scalar(node: _Node, v: Any, t: type, path: str, st: _State) -> Any:
    if v is None:
        if node.types and not node.nullable:
            st.causes.append(_type_error(node, v, path))  # type: ignore[arg-type]
        if node.enum is not None:
            st.causes.append(_enum_error(node, v, path))  # type: ignore[arg-type]
        return v
    causes = st.causes
    if t not in node.type_ok:
        e = _type_error(node, v, path)
        if e is not None:
            causes.append(e)
    if node.scalar_checks:
        if node.junctors:
            _junctor_errors(node, v, path, causes)
        if t is str:
            if node.str_checks:
                e = _string_error(node, v, path)
                if e is not None:
                    causes.append(e)
            if node.fmt_check is not None and not node.fmt_check(v):
                causes.append(_type_invalid(path, v, f"{path} in body must be of type {node.fmt_name}: "
                                                      f"{go_quote(v)}"))
        elif (t is int or t is float) and node.num_checks:
            _number_errors(node, v, path, causes)
        if node.enum is not None:
            e = _enum_error(node, v, path)
            if e is not None:
                causes.append(e)
    if t is float and node.int_only and v.is_integer():
        # Go stores 2.0 as float64 2 and writes it back as "2"; keep integer fields integers.
        return int(v)
    return v


def _walk_default(node: _Node, value: Any, path: str, st: _State) -> Any:
    # Defaults are the CRD author's, not the client's: never report them as unknown fields.
    saved, st.unknown = st.unknown, None
    try:
        return _walk(node, value, path, st)
    finally:
        st.unknown = saved


def _walk_embedded_meta(node: _Node, k: str, x: Any, path: str, st: _State, root: bool) -> Any:
    kpath = f"{path}.{k}" if path else k
    child = node.props.get(k)
    if k != "metadata" or type(x) is not dict:
        if child is not None:
            _validate(child, x, kpath, st.causes)
        return _copy(x)
    if root:
        # The caller owns root metadata; a structural schema may only restrict name/generateName.
        if child is not None:
            for name in ("name", "generateName"):
                sub = child.props.get(name)
                if sub is not None and name in x:
                    _validate(sub, x[name], f"metadata.{name}", st.causes)
        return _copy(x)
    out = {}
    unknown = st.unknown
    for mk, mv in x.items():
        if mk in _OBJECT_META_FIELDS:
            out[mk] = _copy(mv)
        elif unknown is not None:
            unknown.append(f"{kpath}.{mk}")
    if child is not None:
        _validate(child, out, kpath, st.causes)
    return out


def _walk_dict(node: _Node | None, v: Obj, path: str, st: _State, root: bool) -> Obj:
    if node is None:
        if st.unknown is not None:
            st.unknown.extend(f"{path}.{k}" if path else k for k in v)
        return {}
    causes = st.causes
    mark = len(causes)
    out: Obj = {}
    props, addl, preserve = node.fast_props, node.fast_addl, node.preserve
    embedded = node.embedded or root
    for k, x in v.items():
        if embedded and k in _META_KEYS and (preserve or type(x) is (dict if k == "metadata" else str)):
            out[k] = _walk_embedded_meta(node, k, x, path, st, root)
            continue
        entry = props.get(k) or addl
        if entry is not None:
            child, fast, lo, hi, str_ok = entry
            tx = type(x)
            if tx in fast or (tx is int and lo <= x <= hi) or (tx is str and x in str_ok):
                out[k] = x
            elif tx is dict:
                out[k] = _walk_dict(child, x, f"{path}.{k}" if path else k, st, False)
            elif tx is list:
                out[k] = _walk_list(child, x, f"{path}.{k}" if path else k, st)
            elif x is None and not child.nullable:
                if child.has_default:
                    out[k] = _walk_default(child, child.default, f"{path}.{k}" if path else k, st)
                # else: a null for a non-nullable field without default is pruned silently
            else:
                out[k] = _walk_scalar(child, x, tx, f"{path}.{k}" if path else k, st)
        elif node.addl_any:
            out[k] = _walk(None, x, f"{path}.{k}" if path else k, st)
        elif preserve:
            out[k] = _copy(x)
        elif not (root and k in _META_KEYS) and st.unknown is not None:
            st.unknown.append(f"{path}.{k}" if path else k)
    for k, child in node.defaulted:
        if k not in out:
            out[k] = _walk_default(child, child.default, f"{path}.{k}" if path else k, st)
    if node.obj_pre or node.obj_post:
        pre: list[Cause] = []
        if node.obj_pre:
            _pre_errors(node, out, path, pre)
        if node.enum is not None:
            e = _enum_error(node, out, path)
            if e is not None:
                pre.append(e)
        e = _props_count_error(node, len(out), path) if (node.min_props is not None
                                                         or node.max_props is not None) else None
        if e is not None:
            # kube-openapi stops at a property-count failure: nothing below is reported.
            del causes[mark:]
            causes.extend(pre)
            causes.append(e)
        else:
            if pre:
                causes[mark:mark] = pre
            for k in node.required:
                if k not in out:
                    causes.append(required(f"{path}.{k}" if path else k))
    if node.embedded and not root:
        _embedded_errors(out, path, st.meta)
    return out


def _walk_list(node: _Node | None, v: list[Any], path: str, st: _State) -> list[Any]:
    if node is None:
        return [_walk(None, x, f"{path}[{i}]", st) for i, x in enumerate(v)]
    causes = st.causes
    mark = len(causes)
    items = node.items_walk
    if items is None:
        out = _copy(v) if node.preserve else [_walk(None, x, f"{path}[{i}]", st) for i, x in enumerate(v)]
    else:
        out = []
        fast, lo, hi, str_ok = items.fast, items.int_lo, items.int_hi, items.str_ok
        for i, x in enumerate(v):
            tx = type(x)
            if tx in fast or (tx is int and lo <= x <= hi) or (tx is str and x in str_ok):
                out.append(x)
            elif tx is dict:
                out.append(_walk_dict(items, x, f"{path}[{i}]", st, False))
            elif x is None and not items.nullable and items.has_default:
                out.append(_walk_default(items, items.default, f"{path}[{i}]", st))
            else:
                out.append(_walk(items, x, f"{path}[{i}]", st))
    if node.arr_pre:
        pre: list[Cause] = []
        _pre_errors(node, out, path, pre)
        if pre:
            causes[mark:mark] = pre
    if node.arr_post:
        _array_post_errors(node, out, path, causes)
        if node.list_type:
            _list_type_errors(node, out, path, st.lists)
    return out


class ProcessResult:
    """What processing one object produced."""

    __slots__ = ("obj", "unknown_fields", "causes")

    def __init__(self, obj: Any, unknown_fields: list[str], causes: list[Cause]) -> None:
        self.obj = obj
        self.unknown_fields = unknown_fields
        self.causes = causes

    def __repr__(self) -> str:
        return f"ProcessResult(obj={self.obj!r}, unknown_fields={self.unknown_fields!r}, causes={self.causes!r})"


class StructuralSchema:
    """A CRD version's ``openAPIV3Schema``, compiled once, applied to every object written."""

    def __init__(self, openapi_v3_schema: dict[str, Any]) -> None:
        """Compile ``openapi_v3_schema`` (assumed accepted by :func:`check_crd_schema`)."""
        self.schema = openapi_v3_schema
        self._root = _Node(openapi_v3_schema)

    def process(self, obj: Obj, *, status_subresource: bool = False) -> ProcessResult:
        """Prune, default and validate ``obj`` the way kube-apiserver does on create and update.

        Returns a :class:`ProcessResult` whose ``obj`` is a new object (``obj`` itself is left
        untouched), ``unknown_fields`` the pruned paths in document order (for the caller's
        ``fieldValidation`` handling; root ``metadata`` is the caller's), and ``causes`` the
        validation failures as Status causes: schema violations, then embedded-resource
        checks, then ``x-kubernetes-list-type`` duplicates.

        ``status_subresource`` is accepted for the caller's convenience: the real server
        validates the whole object either way (dropping or carrying over ``status`` is the
        request handler's job), so it does not change the result.
        ``x-kubernetes-validations`` (CEL) rules are not evaluated.
        """
        st = _State()
        if type(obj) is dict:
            out = _walk_dict(self._root, obj, "", st, True)
        else:
            out = _walk(self._root, obj, "", st)
        causes = st.causes
        if st.meta or st.lists:
            causes = causes + st.meta + st.lists
        return ProcessResult(out, st.unknown or [], causes)


# ---------------------------------------------------------------------------------------------
# CRD creation: is the schema acceptable (apiextensions validation + structural invariants)
# ---------------------------------------------------------------------------------------------


class _SchemaContext:
    __slots__ = ("allow_defaults", "defaults_reason", "inside_meta")

    def __init__(self, allow_defaults: bool = True, defaults_reason: str = "", inside_meta: bool = False) -> None:
        self.allow_defaults = allow_defaults
        self.defaults_reason = defaults_reason
        self.inside_meta = inside_meta

    def forbid_defaults(self, reason: str) -> "_SchemaContext":
        return _SchemaContext(False, reason, self.inside_meta)

    def in_meta(self) -> "_SchemaContext":
        return _SchemaContext(self.allow_defaults, self.defaults_reason, True)


def _forbidden(path: str, detail: str) -> Cause:
    return cause("FieldValueForbidden", path, f"Forbidden: {detail}")


def _check_openapi(s: dict[str, Any], fpath: str, jpath: str, ctx: _SchemaContext, is_root: bool,
                   errs: list[Cause], defaults: list[Cause], unknown: list[str] | None) -> None:
    """apiextensions' ValidateCustomResourceDefinitionOpenAPISchema for one node and below."""
    for kw in s:
        if kw not in _SCHEMA_KEYWORDS:
            if unknown is not None:
                unknown.append(f"{jpath}.{kw}")
            else:
                errs.append(_forbidden(f"{fpath}.{kw}", "unknown field"))
    t = s.get("type")
    if "default" in s and s["default"] is not None:
        if not ctx.allow_defaults:
            errs.append(_forbidden(f"{fpath}.default",
                                   "must not be set" + (f" {ctx.defaults_reason}" if ctx.defaults_reason else "")))
        else:
            _check_default(s, f"{fpath}.default", ctx, defaults)
    if s.get("id"):
        errs.append(_forbidden(f"{fpath}.id", "id is not supported"))
    if "additionalItems" in s:
        errs.append(_forbidden(f"{fpath}.additionalItems", "additionalItems is not supported"))
    if s.get("patternProperties"):
        errs.append(_forbidden(f"{fpath}.patternProperties", "patternProperties is not supported"))
    if s.get("definitions"):
        errs.append(_forbidden(f"{fpath}.definitions", "definitions is not supported"))
    if "dependencies" in s:
        errs.append(_forbidden(f"{fpath}.dependencies", "dependencies is not supported"))
    if "$ref" in s:
        errs.append(_forbidden(f"{fpath}.$ref", "$ref is not supported"))
    if t == "null":
        errs.append(_forbidden(f"{fpath}.type", "type cannot be set to null, use nullable as an alternative"))
    if isinstance(s.get("items"), list):
        errs.append(_forbidden(f"{fpath}.items", "items must be a schema object and not an array"))
    if ctx.inside_meta and s.get("x-kubernetes-embedded-resource") is True:
        errs.append(_forbidden(f"{fpath}.x-kubernetes-embedded-resource", "must not be used inside of resource meta"))
    if t is not None and t != "" and t not in _OPENAPI_TYPES:
        choices = ", ".join(f'"{c}"' for c in _OPENAPI_TYPES)
        errs.append(cause("FieldValueNotSupported", f"{fpath}.type",
                          f"Unsupported value: {_render(t)}: supported values: {choices}"))
    if s.get("uniqueItems") is True:
        errs.append(_forbidden(f"{fpath}.uniqueItems",
                               "uniqueItems cannot be set to true since the runtime complexity becomes quadratic"))
    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
    addl = s.get("additionalProperties")
    if addl is not None:
        if props and (addl is False or isinstance(addl, dict)):
            errs.append(_forbidden(f"{fpath}.additionalProperties",
                                   "additionalProperties and properties are mutual exclusive"))
        if isinstance(addl, dict):
            sub = ctx.forbid_defaults("inside additionalProperties applying to object metadata") \
                if ctx.inside_meta else ctx
            _check_openapi(addl, f"{fpath}.additionalProperties", f"{jpath}.additionalProperties", sub, False,
                           errs, defaults, unknown)
    embedded = s.get("x-kubernetes-embedded-resource") is True
    for name, sub_schema in props.items():
        if not isinstance(sub_schema, dict):
            errs.append(_invalid(f"{fpath}.properties[{name}]", sub_schema, "must be an object"))
            continue
        sub = ctx
        if (is_root or embedded) and name in _META_KEYS:
            sub = ctx.in_meta()
            if is_root:
                sub = sub.forbid_defaults(f"in top-level {name}")
        _check_openapi(sub_schema, f"{fpath}.properties[{name}]", f"{jpath}.properties.{name}", sub, False,
                       errs, defaults, unknown)
    if isinstance(s.get("not"), dict):
        _check_openapi(s["not"], f"{fpath}.not", f"{jpath}.not", ctx, False, errs, defaults, unknown)
    for junctor in ("allOf", "oneOf", "anyOf"):
        for i, sub_schema in enumerate(s.get(junctor) or ()):
            if isinstance(sub_schema, dict):
                _check_openapi(sub_schema, f"{fpath}.{junctor}[{i}]", f"{jpath}.{junctor}[{i}]", ctx, False,
                               errs, defaults, unknown)
    items = s.get("items")
    if isinstance(items, dict):
        _check_openapi(items, f"{fpath}.items", f"{jpath}.items", ctx, False, errs, defaults, unknown)
    if s.get("x-kubernetes-preserve-unknown-fields") is False:
        errs.append(_invalid(f"{fpath}.x-kubernetes-preserve-unknown-fields", False, "must be true or undefined"))
    _check_list_type(s, fpath, errs)


def _check_list_type(s: dict[str, Any], fpath: str, errs: list[Cause]) -> None:
    list_type = s.get("x-kubernetes-list-type")
    keys = s.get("x-kubernetes-list-map-keys") or []
    t = s.get("type")
    if list_type is not None and list_type not in ("atomic", "set", "map"):
        errs.append(cause("FieldValueNotSupported", f"{fpath}.x-kubernetes-list-type",
                          f'Unsupported value: {_render(list_type)}: supported values: "atomic", "set", "map"'))
    map_type = s.get("x-kubernetes-map-type")
    if map_type is not None and map_type not in ("atomic", "granular"):
        errs.append(cause("FieldValueNotSupported", f"{fpath}.x-kubernetes-map-type",
                          f'Unsupported value: {_render(map_type)}: supported values: "atomic", "granular"'))
    if list_type is not None and t != "array":
        if not t:
            errs.append(required(f"{fpath}.type", "must be array if x-kubernetes-list-type is specified"))
        else:
            errs.append(_invalid(f"{fpath}.type", t, "must be array if x-kubernetes-list-type is specified"))
    items = s.get("items")
    if list_type == "map":
        if not keys:
            errs.append(required(f"{fpath}.x-kubernetes-list-map-keys",
                                 "must not be empty if x-kubernetes-list-type is map"))
        if items is None:
            errs.append(required(f"{fpath}.items", "must have a schema if x-kubernetes-list-type is map"))
        elif isinstance(items, dict):
            if items.get("type") != "object":
                errs.append(_invalid(f"{fpath}.items.type", items.get("type", ""),
                                     "must be object if parent array's x-kubernetes-list-type is map"))
            else:
                item_props = items.get("properties") or {}
                seen: set[str] = set()
                for k in keys:
                    if k in item_props:
                        if (item_props[k] or {}).get("type") in ("array", "object"):
                            errs.append(_invalid(f"{fpath}.items.properties[{k}].type", items.get("type"),
                                                 "must be a scalar type if parent array's x-kubernetes-list-type "
                                                 "is map"))
                    else:
                        errs.append(_invalid(f"{fpath}.x-kubernetes-list-map-keys", keys,
                                             "entries must all be names of item properties"))
                    if k in seen:
                        errs.append(_invalid(f"{fpath}.x-kubernetes-list-map-keys", keys,
                                             "must not contain duplicate entries"))
                    seen.add(k)
    if keys and list_type != "map":
        errs.append(required(f"{fpath}.x-kubernetes-list-type",
                             "must be map if x-kubernetes-list-map-keys is non-empty"))


def _check_default(s: dict[str, Any], dpath: str, ctx: _SchemaContext, errs: list[Cause]) -> None:
    """A default must be pruned already and valid against its own schema."""
    node = _Node(s)
    default = s["default"]
    st = _State()
    if ctx.inside_meta and not node.embedded:
        st.unknown = None  # pruning under metadata is not precise in the real server either
    out = _walk_dict(node, default, "", st, node.embedded) if type(default) is dict else _walk(node, default, "", st)
    del out
    if st.unknown:
        errs.append(_invalid(dpath, default, "must not have unknown fields"))
    for c in st.causes + st.meta + st.lists:
        errs.append(cause(c["reason"], f"{dpath}.{c['field']}" if c["field"] else dpath, c["message"]))


_NESTED_FORBIDDEN = (
    ("type", "must be empty to be structural"),
    ("additionalProperties", "must be undefined to be structural"),
    ("default", "must be undefined to be structural"),
    ("title", "must be empty to be structural"),
    ("description", "must be empty to be structural"),
    ("nullable", "must be false to be structural"),
    ("x-kubernetes-preserve-unknown-fields", "must be false to be structural"),
    ("x-kubernetes-embedded-resource", "must be false to be structural"),
    ("x-kubernetes-int-or-string", "must be false to be structural"),
    ("x-kubernetes-list-map-keys", "must be empty to be structural"),
    ("x-kubernetes-list-type", "must be undefined to be structural"),
)
_INT_OR_STRING_ANY_OF = [{"type": "integer"}, {"type": "string"}]
_ROOT, _ITEM, _FIELD = 0, 1, 2


def _is_set(v: Any) -> bool:
    # Go zero values (false, "", empty collections, nil) count as unset in the structural checks.
    return not (v is None or v is False or v == "" or v == [] or v == {})


def _int_or_string_any_of(s: dict[str, Any]) -> bool:
    return s.get("anyOf") == _INT_OR_STRING_ANY_OF


def _int_or_string_all_of(s: dict[str, Any]) -> bool:
    all_of = s.get("allOf")
    return (isinstance(all_of, list) and len(all_of) >= 1 and isinstance(all_of[0], dict)
            and all_of[0].get("anyOf") == _INT_OR_STRING_ANY_OF)


def _check_value_validation(s: dict[str, Any], skip_any_of: bool, skip_first_all_of_any_of: bool,
                            path: str, errs: list[Cause]) -> None:
    if not skip_any_of:
        for i, sub in enumerate(s.get("anyOf") or ()):
            _check_nested(sub, False, path + f".anyOf[{i}]", errs)
    for i, sub in enumerate(s.get("allOf") or ()):
        _check_nested(sub, skip_first_all_of_any_of and i == 0, path + f".allOf[{i}]", errs)
    for i, sub in enumerate(s.get("oneOf") or ()):
        _check_nested(sub, False, path + f".oneOf[{i}]", errs)
    if isinstance(s.get("not"), dict):
        _check_nested(s["not"], False, path + ".not", errs)
    pattern = s.get("pattern")
    if isinstance(pattern, str) and pattern:
        compiled, err = _compile_go_regex(pattern)
        if compiled is None and not _uses_unicode_classes(pattern):
            errs.append(_invalid(f"{path}.pattern", pattern, f"must be a valid regular expression, but isn't: {err}"))


def _check_nested(v: Any, skip_any_of: bool, path: str, errs: list[Cause]) -> None:
    """Value validations under allOf/anyOf/oneOf/not may not carry structure of their own."""
    if not isinstance(v, dict):
        return
    _check_value_validation(v, skip_any_of, False, path, errs)
    if isinstance(v.get("items"), dict):
        _check_nested(v["items"], False, path + ".items", errs)
    props = v.get("properties") if isinstance(v.get("properties"), dict) else {}
    for k, sub in props.items():
        _check_nested(sub, False, f"{path}.properties[{k}]", errs)
    for key, detail in _NESTED_FORBIDDEN:
        if key in v and _is_set(v[key]):
            errs.append(_forbidden(f"{path}.{key}", detail))
    if "metadata" in props:
        errs.append(_forbidden(f"{path}.properties[metadata]", "must not be specified in a nested context"))


def _check_structural(s: Any, lvl: int, path: str, errs: list[Cause]) -> None:
    """apiextensions' validateStructuralInvariants."""
    if not isinstance(s, dict):
        return
    t = s.get("type") or ""
    items = s.get("items")
    if t == "array" and items is None:
        errs.append(required(f"{path}.items", "must be specified"))
    if isinstance(items, dict):
        _check_structural(items, _ITEM, f"{path}.items", errs)
    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
    for k, sub in props.items():
        _check_structural(sub, _FIELD, f"{path}.properties[{k}]", errs)
    addl = s.get("additionalProperties")
    if addl is not None and addl is not False:
        if lvl == _ROOT:
            errs.append(_forbidden(f"{path}.additionalProperties", "must not be used at the root"))
        if isinstance(addl, dict):
            _check_structural(addl, _FIELD, f"{path}.additionalProperties", errs)
    int_or_string = s.get("x-kubernetes-int-or-string") is True
    preserve = s.get("x-kubernetes-preserve-unknown-fields") is True
    embedded = s.get("x-kubernetes-embedded-resource") is True
    if int_or_string and preserve:
        errs.append(_invalid(f"{path}.x-kubernetes-preserve-unknown-fields", True,
                             "must be false if x-kubernetes-int-or-string is true"))
    if int_or_string and embedded:
        errs.append(_invalid(f"{path}.x-kubernetes-embedded-resource", True,
                             "must be false if x-kubernetes-int-or-string is true"))
    _check_value_validation(s, _int_or_string_any_of(s), _int_or_string_all_of(s), path, errs)
    if embedded and t != "object":
        if not t:
            errs.append(required(f"{path}.type", "must be object if x-kubernetes-embedded-resource is true"))
        else:
            errs.append(_invalid(f"{path}.type", t, "must be object if x-kubernetes-embedded-resource is true"))
    elif not t and not int_or_string and not preserve:
        detail = {_ROOT: "must not be empty at the root", _ITEM: "must not be empty for specified array items",
                  _FIELD: "must not be empty for specified object fields"}[lvl]
        errs.append(required(f"{path}.type", detail))
    if embedded and addl is not None:
        errs.append(_forbidden(f"{path}.additionalProperties", "must not be used if x-kubernetes-embedded-resource "
                                                               "is set"))
    if lvl == _ROOT and t and t != "object":
        errs.append(_invalid(f"{path}.type", t, "must be object at the root"))
    check_metadata = lvl == _ROOT or embedded
    if check_metadata:
        for name, want in (("kind", "string"), ("apiVersion", "string"), ("metadata", "object")):
            if name in props and isinstance(props[name], dict) and (props[name].get("type") or "") != want:
                errs.append(_invalid(f"{path}.properties[{name}].type", props[name].get("type") or "",
                                     f"must be {want}"))
    if lvl == _ROOT and isinstance(props.get("metadata"), dict):
        meta = props["metadata"]
        meta_props = meta.get("properties") if isinstance(meta.get("properties"), dict) else {}
        extra = [k for k, v in meta.items() if k not in ("type", "default", "properties") and _is_set(v)
                 and k in _SCHEMA_KEYWORDS]
        if meta_props and not set(meta_props) <= {"name", "generateName"}:
            extra.append("properties")
        if extra:
            errs.append(_forbidden(f"{path}.properties[metadata]", "must not specify anything other than name and "
                                   "generateName, but metadata is implicitly specified"))
    if embedded and not preserve and not props:
        errs.append(required(f"{path}.properties", "must not be empty if x-kubernetes-embedded-resource is true "
                                                   "without x-kubernetes-preserve-unknown-fields"))


def _check_completeness_value(v: dict[str, Any], s: dict[str, Any] | None, spath: str, vpath: str,
                              errs: list[Cause]) -> None:
    if isinstance(v.get("not"), dict):
        _check_completeness_nested(v["not"], s, spath, vpath + ".not", errs)
    for junctor in ("allOf", "anyOf", "oneOf"):
        for i, sub in enumerate(v.get(junctor) or ()):
            if isinstance(sub, dict):
                _check_completeness_nested(sub, s, spath, f"{vpath}.{junctor}[{i}]", errs)


def _check_completeness_nested(v: dict[str, Any], s: dict[str, Any] | None, spath: str, vpath: str,
                               errs: list[Cause]) -> None:
    """Every field a value validation mentions must be specified in the structural part too."""
    if s is None:
        errs.append(required(spath, f"because it is defined in {vpath}"))
        return
    _check_completeness_value(v, s, spath, vpath, errs)
    if isinstance(v.get("items"), dict):
        s_items = s.get("items") if isinstance(s.get("items"), dict) else None
        _check_completeness_nested(v["items"], s_items, spath + ".items", vpath + ".items", errs)
    v_props = v.get("properties") if isinstance(v.get("properties"), dict) else {}
    s_props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
    s_addl = s.get("additionalProperties") if isinstance(s.get("additionalProperties"), dict) else None
    for k, v_sub in v_props.items():
        if not isinstance(v_sub, dict):
            continue
        if k in s_props:
            _check_completeness_nested(v_sub, s_props[k] if isinstance(s_props[k], dict) else None,
                                       f"{spath}.properties[{k}]", f"{vpath}.properties[{k}]", errs)
        elif s_addl is None:
            errs.append(required(f"{spath}.properties[{k}]", f"because it is defined in {vpath}.properties[{k}]"))
        else:
            _check_completeness_nested(v_sub, s_addl, f"{spath}.additionalProperties", f"{vpath}.properties[{k}]",
                                       errs)


def _walk_completeness(s: Any, path: str, errs: list[Cause]) -> None:
    if not isinstance(s, dict):
        return
    _check_completeness_value(s, s, path, path, errs)
    if isinstance(s.get("items"), dict):
        _walk_completeness(s["items"], path + ".items", errs)
    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
    for k, sub in props.items():
        _walk_completeness(sub, f"{path}.properties[{k}]", errs)
    if isinstance(s.get("additionalProperties"), dict):
        _walk_completeness(s["additionalProperties"], path + ".additionalProperties", errs)


def check_crd_schema(openapi_v3_schema: Any, path: str, *, unknown_fields: list[str] | None = None) -> list[Cause]:
    """Validate a CRD version's ``openAPIV3Schema`` as kube-apiserver does when the CRD is written.

    ``path`` is where the schema sits in the CRD, e.g. ``spec.versions[0].schema.openAPIV3Schema``;
    cause fields below it use the server's notation (``properties[spec].type``). Returns the
    generic OpenAPI restrictions (unsupported keywords and types, list-type rules, defaults
    that are not pruned or do not validate) followed by the structural-schema violations,
    sorted as the real server sorts them.

    Keywords that JSONSchemaProps does not have are reported as ``Forbidden: unknown field``
    causes, unless ``unknown_fields`` is given: then their paths (the decoder's dotted
    notation, ``...openAPIV3Schema.properties.spec.typo``) are appended to it instead, so the
    caller can treat them as kube-apiserver does (dropped, with a warning or a strict error).
    ``x-kubernetes-validations`` rules are accepted without being compiled.
    """
    if not isinstance(openapi_v3_schema, dict):
        return [_invalid(path, "", "must be an object")]
    errs: list[Cause] = []
    defaults: list[Cause] = []
    if openapi_v3_schema.get("nullable") is True:
        errs.append(_forbidden(f"{path}.nullable", "nullable cannot be true at the root"))
    _check_openapi(openapi_v3_schema, path, path, _SchemaContext(), True, errs, defaults, unknown_fields)
    structural: list[Cause] = []
    _check_structural(openapi_v3_schema, _ROOT, path, structural)
    _walk_completeness(openapi_v3_schema, path, structural)
    structural.sort(key=lambda c: f"{c['field']}: {c['message']}")
    return errs + defaults + structural
