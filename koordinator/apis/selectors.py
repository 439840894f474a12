"""Label and field selectors with Kubernetes semantics.

Three inputs produce selectors:

* the query-string label syntax (``?labelSelector=``, ``kubectl -l``) via :func:`parse_label_selector`;
* ``metav1.LabelSelector`` objects (``matchLabels`` + ``matchExpressions``) via
  :func:`label_selector_from_dict`;
* the query-string field syntax (``?fieldSelector=``) via :func:`parse_field_selector`.

:func:`node_selector_term_matches` evaluates a core/v1 ``NodeSelectorTerm`` (node affinity).

This module is shared by the API server, the controllers and the scheduler, so it raises its own
:class:`SelectorError` (a ``ValueError``) instead of an HTTP error; the server answers it as 400.
Error texts follow apimachinery's wording because clients and people compare them.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

from koordinator.apis.gostrings import go_quote

__all__ = [
    "SelectorError",
    "Requirement",
    "LabelSelector",
    "FieldSelector",
    "parse_label_selector",
    "label_selector_from_dict",
    "parse_field_selector",
    "node_selector_term_matches",
    "EXISTS",
    "DOES_NOT_EXIST",
    "EQUALS",
    "DOUBLE_EQUALS",
    "NOT_EQUALS",
    "IN",
    "NOT_IN",
    "GREATER_THAN",
    "LESS_THAN",
]


class SelectorError(ValueError):
    """A selector that cannot be parsed or is invalid (the API server answers it as 400 BadRequest)."""


# Operator spellings are apimachinery's ``selection.Operator`` values.
EXISTS = "exists"
DOES_NOT_EXIST = "!"
EQUALS = "="
DOUBLE_EQUALS = "=="
NOT_EQUALS = "!="
IN = "in"
NOT_IN = "notin"
GREATER_THAN = "gt"
LESS_THAN = "lt"

_BINARY_OPERATORS = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)

# -- validation (k8s.io/apimachinery/pkg/util/validation) ---------------------------------------

_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_QUALIFIED_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_INT64_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # Reproduces validation.RegexError, including its double space before each "or".
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    text = msg + " (e.g. "
    for i, example in enumerate(examples):
        if i:
            text += " or "
        text += f"'{example}', "
    return text + f"regex used for validation is '{fmt}')"


def _qualified_name_errors(value: str) -> list[str]:
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
                errs.append("prefix part "
                            + _regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    else:
        return [
            "a qualified name "
            + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part "
                    + _regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def _label_value_errors(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def _go_string_slice(values: list[str] | None) -> str:
    # field.Invalid renders a []string with %#v.
    if not values:
        return "[]string(nil)"
    return "[]string{" + ", ".join(go_quote(v) for v in values) + "}"


def _invalid(path: str, rendered_value: str, detail: str) -> str:
    return f"{path}: Invalid value: {rendered_value}: {detail}"


def _aggregate(errors: list[str]) -> str:
    # utilerrors.Aggregate: one message alone, several in brackets (duplicates folded).
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _key_error(key: str, path: str) -> str | None:
    errs = _qualified_name_errors(key)
    return _invalid(path, go_quote(key), "; ".join(errs)) if errs else None


# -- requirements -------------------------------------------------------------------------------

# Compact operator codes for the matching hot path.
_C_EQ, _C_IN, _C_NE, _C_NOTIN, _C_EXISTS, _C_NOT_EXISTS, _C_GT, _C_LT = range(8)


class Requirement:
    """One ``key <op> values`` term of a label selector (apimachinery ``labels.Requirement``)."""

    __slots__ = ("key", "operator", "values", "_code", "_arg")

    def __init__(self, key: str, operator: str, values: Iterable[str] = ()) -> None:
        self.key = key
        self.operator = operator
        # Sorted and de-duplicated like the sets.String the Go parser builds.
        self.values: tuple[str, ...] = tuple(sorted(set(values)))
        if operator in (EQUALS, DOUBLE_EQUALS):
            self._code, self._arg = _C_EQ, self.values[0]
        elif operator == IN:
            self._code, self._arg = _C_IN, frozenset(self.values)
        elif operator == NOT_EQUALS:
            self._code, self._arg = _C_NE, self.values[0]
        elif operator == NOT_IN:
            self._code, self._arg = _C_NOTIN, frozenset(self.values)
        elif operator == EXISTS:
            self._code, self._arg = _C_EXISTS, None
        elif operator == DOES_NOT_EXIST:
            self._code, self._arg = _C_NOT_EXISTS, None
        elif operator == GREATER_THAN:
            self._code, self._arg = _C_GT, int(self.values[0])
        elif operator == LESS_THAN:
            self._code, self._arg = _C_LT, int(self.values[0])
        else:  # pragma: no cover - construction goes through _new_requirement
            raise SelectorError(f"unsupported operator {operator!r}")

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether ``labels`` satisfies this requirement (NotIn/!= also match a missing key)."""
        return _check(self._code, self.key, self._arg, labels)

    def __str__(self) -> str:
        prefix = "!" if self.operator == DOES_NOT_EXIST else ""
        if self.operator in (EXISTS, DOES_NOT_EXIST):
            return prefix + self.key
        spelled = {IN: " in ", NOT_IN: " notin ", GREATER_THAN: ">", LESS_THAN: "<"}.get(self.operator, self.operator)
        vals = ",".join(self.values)
        if self.operator in (IN, NOT_IN):
            vals = f"({vals})"
        return self.key + spelled + vals

    def __repr__(self) -> str:
        return f"Requirement({self.key!r}, {self.operator!r}, {list(self.values)!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Requirement) and self.key == other.key and self.operator == other.operator
                and self.values == other.values)

    def __hash__(self) -> int:
        return hash((self.key, self.operator, self.values))


def _check(code: int, key: str, arg: Any, labels: Mapping[str, str]) -> bool:
    value = labels.get(key)
    if code == _C_EQ:
        return value is not None and value == arg
    if code == _C_IN:
        return value is not None and value in arg
    if code == _C_NE:
        return value is None or value != arg
    if code == _C_NOTIN:
        return value is None or value not in arg
    if code == _C_EXISTS:
        return value is not None
    if code == _C_NOT_EXISTS:
        return value is None
    # Gt/Lt: a missing or non-integer label never matches.
    if value is None or not _INT64_RE.fullmatch(value):
        return False
    number = int(value)
    if not _INT64_MIN <= number <= _INT64_MAX:
        return False
    return number > arg if code == _C_GT else number < arg


def _new_requirement(key: str, op: str, values: list[str] | None, path: str = "") -> Requirement:
    vals = list(values or [])
    errs: list[str] = []
    key_path = f"{path}.key" if path else "key"
    values_path = f"{path}.values" if path else "values"
    err = _key_error(key, key_path)
    if err:
        errs.append(err)
    if op in (IN, NOT_IN):
        if not vals:
            errs.append(_invalid(values_path, _go_string_slice(vals),
                                 "for 'in', 'notin' operators, values set can't be empty"))
    elif op in (EQUALS, DOUBLE_EQUALS, NOT_EQUALS):
        if len(vals) != 1:
            errs.append(_invalid(values_path, _go_string_slice(vals),
                                 "exact-match compatibility requires one single value"))
    elif op in (EXISTS, DOES_NOT_EXIST):
        if vals:
            errs.append(_invalid(values_path, _go_string_slice(vals),
                                 "values set must be empty for exists and does not exist"))
    elif op in (GREATER_THAN, LESS_THAN):
        if len(vals) != 1:
            errs.append(_invalid(values_path, _go_string_slice(vals),
                                 "for 'Gt', 'Lt' operators, exactly one value is required"))
        for i, v in enumerate(vals):
            if not _INT64_RE.fullmatch(v) or not _INT64_MIN <= int(v) <= _INT64_MAX:
                errs.append(_invalid(f"{values_path}[{i}]", go_quote(v),
                                     "for 'Gt', 'Lt' operators, the value must be an integer"))
    else:
        supported = ", ".join(f'"{o}"' for o in (DOES_NOT_EXIST, EQUALS, DOUBLE_EQUALS, IN, NOT_EQUALS, NOT_IN,
                                                 EXISTS, GREATER_THAN, LESS_THAN))
        errs.append(f"{path + '.' if path else ''}operator: Unsupported value: {go_quote(op)}: "
                    f"supported values: {supported}")
    for i, v in enumerate(vals):
        verrs = _label_value_errors(v)
        if verrs:
            errs.append(_invalid(f"{values_path}[{i}][{key}]", go_quote(v), "; ".join(verrs)))
    if errs:
        raise SelectorError(_aggregate(errs))
    return Requirement(key, op, vals)


# -- label selectors ----------------------------------------------------------------------------


class LabelSelector:
    """An AND of label requirements, precompiled for matching on every watch event.

    Three shapes exist, as in apimachinery:

    * *everything* — no requirements (empty query string, ``{}`` LabelSelector): matches all;
    * *nothing* — ``match_nothing=True`` (a nil LabelSelector where Kubernetes uses
      ``labels.Nothing()``, e.g. a PodDisruptionBudget without selector): matches no object;
    * requirements — every one must hold.
    """

    __slots__ = ("requirements", "match_nothing", "_checks", "_equalities")

    def __init__(self, requirements: Iterable[Requirement] = (), *, match_nothing: bool = False) -> None:
        # Stable sort by key: Go sorts by key, so String() output and error order agree with it.
        self.requirements: tuple[Requirement, ...] = tuple(sorted(requirements, key=lambda r: r.key))
        self.match_nothing = match_nothing
        self._checks = tuple((r._code, r.key, r._arg) for r in self.requirements)
        # matchLabels-only selectors (the common case) reduce to dict lookups.
        if self._checks and all(code == _C_EQ for code, _, _ in self._checks):
            self._equalities: tuple[tuple[str, str], ...] | None = tuple((k, a) for _, k, a in self._checks)
        else:
            self._equalities = None

    @classmethod
    def everything(cls) -> "LabelSelector":
        """A selector matching every object."""
        return _EVERYTHING

    @classmethod
    def nothing(cls) -> "LabelSelector":
        """A selector matching no object."""
        return _NOTHING

    @property
    def empty(self) -> bool:
        """True when the selector matches everything (no requirements, not match-nothing)."""
        return not self._checks and not self.match_nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """Whether an object carrying ``labels`` (``None`` = no labels) is selected."""
        if self.match_nothing:
            return False
        checks = self._checks
        if not checks:
            return True
        if labels is None:
            labels = _NO_LABELS
        eqs = self._equalities
        if eqs is not None:
            get = labels.get
            for key, want in eqs:
                if get(key) != want:
                    return False
            return True
        for code, key, arg in checks:
            if not _check(code, key, arg, labels):
                return False
        return True

    def __str__(self) -> str:
        """The canonical query-string form (``labels.Selector.String()``); "" for everything/nothing."""
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        if self.match_nothing:
            return "LabelSelector(<nothing>)"
        return f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, LabelSelector) and self.match_nothing == other.match_nothing
                and self.requirements == other.requirements)

    def __hash__(self) -> int:
        return hash((self.match_nothing, self.requirements))


_NO_LABELS: dict[str, str] = {}
_EVERYTHING = LabelSelector()
_NOTHING = LabelSelector(match_nothing=True)


# Lexer tokens of labels.Parse.
(_T_EOS, _T_CLOSE, _T_COMMA, _T_NOT, _T_DEQ, _T_EQ, _T_GT, _T_IDENT, _T_IN, _T_LT, _T_NE, _T_NOTIN,
 _T_OPEN) = range(13)
_SPECIAL = {"=": _T_EQ, "!": _T_NOT, "(": _T_OPEN, ")": _T_CLOSE, ",": _T_COMMA, ">": _T_GT, "<": _T_LT}
_WHITESPACE = " \t\r\n"


def _lex(text: str) -> list[tuple[int, str]]:
    items: list[tuple[int, str]] = []
    i, n = 0, len(text)
    while True:
        while i < n and text[i] in _WHITESPACE:
            i += 1
        if i >= n:
            items.append((_T_EOS, ""))
            return items
        ch = text[i]
        if ch in _SPECIAL:
            two = text[i:i + 2]
            if two == "==":
                items.append((_T_DEQ, two))
                i += 2
            elif two == "!=":
                items.append((_T_NE, two))
                i += 2
            else:
                items.append((_SPECIAL[ch], ch))
                i += 1
            continue
        start = i
        while i < n and text[i] not in _SPECIAL and text[i] not in _WHITESPACE:
            i += 1
        word = text[start:i]
        items.append((_T_IN if word == "in" else _T_NOTIN if word == "notin" else _T_IDENT, word))


class _Parser:
    """Recursive-descent parser mirroring ``labels.Parse`` (including its error texts)."""

    def __init__(self, text: str) -> None:
        self.items = _lex(text)
        self.pos = 0

    def _peek(self, values: bool = True) -> tuple[int, str]:
        tok, lit = self.items[self.pos]
        # In value context the keywords "in"/"notin" are ordinary identifiers.
        if values and tok in (_T_IN, _T_NOTIN):
            tok = _T_IDENT
        return tok, lit

    def _next(self, values: bool = True) -> tuple[int, str]:
        item = self._peek(values)
        self.pos += 1
        return item

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            tok, lit = self._peek()
            if tok in (_T_IDENT, _T_NOT):
                try:
                    reqs.append(self._requirement())
                except SelectorError as err:
                    raise SelectorError(f"unable to parse requirement: {err}") from None
                tok, lit = self._next()
                if tok == _T_EOS:
                    return reqs
                if tok == _T_COMMA:
                    tok2, lit2 = self._peek()
                    if tok2 not in (_T_IDENT, _T_NOT):
                        raise SelectorError(f"found '{lit2}', expected: identifier after ','")
                    continue
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            if tok == _T_EOS:
                return reqs
            raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")

    def _requirement(self) -> Requirement:
        operator = ""
        tok, lit = self._next()
        if tok == _T_NOT:
            operator = DOES_NOT_EXIST
            tok, lit = self._next()
        if tok != _T_IDENT:
            raise SelectorError(f"found '{lit}', expected: identifier")
        key = lit
        # The parser validates keys with a nil field path, which Go prints as "<nil>".
        err = _key_error(key, "<nil>")
        if err:
            raise SelectorError(err)
        if self._peek()[0] in (_T_EOS, _T_COMMA) and operator != DOES_NOT_EXIST:
            operator = EXISTS
        if operator in (EXISTS, DOES_NOT_EXIST):
            return _new_requirement(key, operator, [])
        tok, lit = self._next(values=False)
        op = {_T_IN: IN, _T_EQ: EQUALS, _T_DEQ: DOUBLE_EQUALS, _T_GT: GREATER_THAN, _T_LT: LESS_THAN,
              _T_NOTIN: NOT_IN, _T_NE: NOT_EQUALS}.get(tok)
        if op is None:
            raise SelectorError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        values = self._set_values() if op in (IN, NOT_IN) else self._exact_value()
        return _new_requirement(key, op, values)

    def _set_values(self) -> list[str]:
        tok, lit = self._next()
        if tok != _T_OPEN:
            raise SelectorError(f"found '{lit}' expected: '('")
        tok, lit = self._peek()
        if tok in (_T_IDENT, _T_COMMA):
            values = self._identifier_list()
            if self._next()[0] != _T_CLOSE:
                raise SelectorError(f"found '{lit}', expected: ')'")
            return values
        if tok == _T_CLOSE:
            self._next()
            return [""]
        raise SelectorError(f"found '{lit}', expected: ',', ')' or identifier")

    def _identifier_list(self) -> list[str]:
        # Empty members ("(,a)", "(a,,b)", "(a,)") stand for the empty value, as in Go.
        values: list[str] = []
        while True:
            tok, lit = self._next()
            if tok == _T_IDENT:
                values.append(lit)
                tok2, lit2 = self._peek()
                if tok2 == _T_COMMA:
                    continue
                if tok2 == _T_CLOSE:
                    return values
                raise SelectorError(f"found '{lit2}', expected: ',' or ')'")
            if tok == _T_COMMA:
                if not values:
                    values.append("")
                tok2 = self._peek()[0]
                if tok2 == _T_CLOSE:
                    values.append("")
                    return values
                if tok2 == _T_COMMA:
                    self._next()
                    values.append("")
                continue
            raise SelectorError(f"found '{lit}', expected: ',', or identifier")

    def _exact_value(self) -> list[str]:
        tok, lit = self._peek()
        if tok in (_T_EOS, _T_COMMA):
            return [""]
        tok, lit = self._next()
        if tok == _T_IDENT:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")


def parse_label_selector(text: str) -> LabelSelector:
    """Parse the query-string label selector syntax (``labels.Parse``).

    Comma means AND; terms are ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``,
    ``k`` (exists), ``!k`` (does not exist), ``k>n`` / ``k<n`` (integer comparison). Keys may
    carry a DNS prefix (``koordinator.sh/qosClass``). ``!=`` and ``notin`` also select objects
    without the key. An empty or blank string selects everything.

    Raises :class:`SelectorError` with apimachinery's message on bad input.
    """
    if not text or not text.strip():
        return _EVERYTHING
    return LabelSelector(_Parser(text).parse())


_DICT_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def label_selector_from_dict(sel: Mapping[str, Any] | None, *, nil_matches_nothing: bool = True) -> LabelSelector:
    """Convert a ``metav1.LabelSelector`` object (``LabelSelectorAsSelector``).

    * ``None`` (the field is absent/null): matches **nothing** — what Kubernetes does for
      PodDisruptionBudgets, affinity terms, topology spread constraints and workload selectors.
      Pass ``nil_matches_nothing=False`` where the API documents nil as "select all".
    * ``{}`` or no ``matchLabels``/``matchExpressions``: matches **everything**.
    * otherwise all ``matchLabels`` pairs and ``matchExpressions`` (In/NotIn need values,
      Exists/DoesNotExist take none) must hold.

    Raises :class:`SelectorError` for invalid keys, values, operators or arity.
    """
    if sel is None:
        return _NOTHING if nil_matches_nothing else _EVERYTHING
    match_labels = sel.get("matchLabels") or {}
    expressions = sel.get("matchExpressions") or []
    if not match_labels and not expressions:
        return _EVERYTHING
    reqs: list[Requirement] = []
    for key, value in match_labels.items():
        reqs.append(_new_requirement(key, EQUALS, [value if isinstance(value, str) else str(value)]))
    for expr in expressions:
        op_name = expr.get("operator", "")
        op = _DICT_OPERATORS.get(op_name)
        if op is None:
            raise SelectorError(f"{go_quote(str(op_name))} is not a valid label selector operator")
        reqs.append(_new_requirement(expr.get("key", ""), op, list(expr.get("values") or [])))
    return LabelSelector(reqs)


# -- field selectors ----------------------------------------------------------------------------


class FieldSelector:
    """An AND of ``field = value`` / ``field != value`` terms (``fields.Selector``).

    ``requirements`` lists ``(field, op, value)`` with ``op`` normalised to ``"="`` or ``"!="``
    (``==`` is the same as ``=``) and values unescaped. A field missing from the object's field
    set compares as the empty string, as in Kubernetes.
    """

    __slots__ = ("requirements",)

    def __init__(self, requirements: Iterable[tuple[str, str, str]] = ()) -> None:
        self.requirements: tuple[tuple[str, str, str], ...] = tuple(requirements)

    @property
    def empty(self) -> bool:
        """True when the selector has no terms and so matches everything."""
        return not self.requirements

    def fields(self) -> set[str]:
        """Names of the fields the selector looks at (to reject unsupported ones)."""
        return {f for f, _, _ in self.requirements}

    def matches(self, fields: Mapping[str, str]) -> bool:
        """Whether an object whose selectable fields are ``fields`` is selected."""
        for field, op, value in self.requirements:
            if (fields.get(field, "") == value) != (op == "="):
                return False
        return True

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{_escape_field_value(v)}" for f, op, v in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, FieldSelector) and self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash(self.requirements)


def _escape_field_value(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _split_field_terms(text: str) -> list[str]:
    # Backslash-escaped commas stay inside the term (still escaped).
    terms: list[str] = []
    start = 0
    in_slash = False
    for i, ch in enumerate(text):
        if in_slash:
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _unescape_field_value(value: str) -> str:
    if "\\" not in value and "," not in value and "=" not in value:
        return value
    out: list[str] = []
    in_slash = False
    for ch in value:
        if in_slash:
            if ch not in "\\,=":
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            in_slash = False
        elif ch == "\\":
            in_slash = True
        elif ch in ",=":
            # Go formats the offending rune with %v, i.e. as its code point number.
            raise SelectorError(f"invalid field selector: unescaped character in value: {ord(ch)}")
        else:
            out.append(ch)
    if in_slash:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_field_selector(text: str) -> FieldSelector:
    """Parse the query-string field selector syntax (``fields.ParseSelector``).

    Terms are ``field=value``, ``field==value`` or ``field!=value`` joined by commas (AND); the
    first operator occurrence splits a term, values may escape ``\\,`` ``\\=`` ``\\\\``. No
    whitespace is trimmed (as in Kubernetes). An empty string selects everything.
    """
    if not text:
        return FieldSelector()
    reqs: list[tuple[str, str, str]] = []
    # Go sorts the raw terms first, so the first error reported follows that order.
    for part in sorted(_split_field_terms(text)):
        if not part:
            continue
        for i in range(len(part)):
            rest = part[i:]
            if rest.startswith("!="):
                field, op, raw = part[:i], "!=", part[i + 2:]
                break
            if rest.startswith("=="):
                field, op, raw = part[:i], "=", part[i + 2:]
                break
            if rest.startswith("="):
                field, op, raw = part[:i], "=", part[i + 1:]
                break
        else:
            raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
        reqs.append((field, op, _unescape_field_value(raw)))
    return FieldSelector(reqs)


# -- node selector terms ------------------------------------------------------------------------

_NODE_OPERATORS = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST,
                   "Gt": GREATER_THAN, "Lt": LESS_THAN}


def node_selector_term_matches(term: Mapping[str, Any] | None, labels: Mapping[str, str] | None,
                               fields: Mapping[str, str] | None = None) -> bool:
    """Whether a node matches one core/v1 ``NodeSelectorTerm`` (component-helpers nodeaffinity).

    ``matchExpressions`` (In/NotIn/Exists/DoesNotExist/Gt/Lt) are evaluated against the node's
    ``labels``; ``matchFields`` (In/NotIn with exactly one value, in practice on
    ``metadata.name``) against ``fields`` such as ``{"metadata.name": node_name}``.

    As in Kubernetes: a term with neither list matches nothing; an invalid term (bad key,
    operator or arity) matches nothing; and ``matchFields`` are only checked when ``fields``
    is non-empty. A node selector ORs its terms: ``any(node_selector_term_matches(t, ...) ...)``.
    """
    if not term:
        return False
    expressions = term.get("matchExpressions") or []
    match_fields = term.get("matchFields") or []
    if not expressions and not match_fields:
        return False
    if expressions:
        if labels is None:
            labels = _NO_LABELS
        for expr in expressions:
            op = _NODE_OPERATORS.get(expr.get("operator", ""))
            if op is None:
                return False
            try:
                req = _new_requirement(expr.get("key", ""), op, list(expr.get("values") or []))
            except SelectorError:
                return False
            if not req.matches(labels):
                return False
    if match_fields:
        checks: list[tuple[str, bool, str]] = []
        for expr in match_fields:
            values = expr.get("values") or []
            op = expr.get("operator")
            if op not in ("In", "NotIn") or len(values) != 1:
                return False
            checks.append((expr.get("key", ""), op == "In", values[0]))
        if fields:
            for key, equal, value in checks:
                if (fields.get(key, "") == value) != equal:
                    return False
    return True
