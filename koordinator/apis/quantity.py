"""Kubernetes ``resource.Quantity``: parsing, canonical form, and the rounding helpers.

The API server parses every quantity it decodes and, unless the text it was given is
already canonical, stores ``Quantity.String()`` instead: ``0.5`` becomes ``500m``,
``1024Mi`` becomes ``1Gi``, ``1000m`` becomes ``1``. Callers that store or compare
quantities must therefore go through :func:`canonical` rather than keep the text they got.

Values are kept exact. Every quantity the server accepts is a whole number of nano-units
(anything finer is rounded up, away from zero, as ``ParseQuantity`` does), so internally a
quantity is an ``int`` count of nanos; the public API hands out :class:`decimal.Decimal`.

Public API:

- :func:`parse_quantity` -> ``Decimal`` (raises :class:`QuantityError`, a ``ValueError``
  whose text is exactly the real server's decode error)
- :func:`parse` -> :class:`ParsedQuantity` (value, format, the string the server stores)
- :func:`canonical` -> the string the server stores for a given input
- :func:`quantity_format` -> ``"DecimalSI"`` / ``"BinarySI"`` / ``"DecimalExponent"``
- :func:`milli_value`, :func:`value` -> ``int`` rounded away from zero (``MilliValue``/``Value``)
- :func:`format_quantity` -> canonical text of a value in a given format
"""

from __future__ import annotations

import functools
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any, NamedTuple

__all__ = [
    "BINARY_SI",
    "DECIMAL_EXPONENT",
    "DECIMAL_SI",
    "ERR_FORMAT_WRONG",
    "ERR_NUMERIC",
    "ERR_SUFFIX",
    "ParsedQuantity",
    "QuantityError",
    "canonical",
    "format_quantity",
    "milli_value",
    "parse",
    "parse_quantity",
    "quantity_format",
    "value",
]

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"

ERR_FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
ERR_NUMERIC = "unable to parse numeric part of quantity"
ERR_SUFFIX = "unable to parse quantity's suffix"

_NANO = 10**9
_INT64_MAX = 2**63 - 1
# ParseQuantity caps values it had to take the slow (arbitrary precision) path for.
_MAX_NANOS = _INT64_MAX * _NANO
# Exponents beyond this are clamped: Go keeps such values lazily, Python would build
# astronomically large integers for ``1e2000000000``.
_MAX_EXACT_EXPONENT = 400

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_BINARY_BY_POWER = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")
_DIGITS = frozenset("0123456789")
_EXPONENT_RE = re.compile(r"[+-]?[0-9]+\Z")


class QuantityError(ValueError):
    """A quantity the server refuses to decode; ``str(err)`` is the server's exact text."""


class ParsedQuantity(NamedTuple):
    """A parsed quantity: exact value, its format, and the text the server would store."""

    value: Decimal
    format: str
    string: str


def _go_mod(a: int, b: int) -> int:
    """Go's ``%``: the remainder takes the sign of the dividend."""
    r = abs(a) % b
    return -r if a < 0 else r


def _nanos_to_decimal(nanos: int) -> Decimal:
    if nanos % _NANO == 0:
        return Decimal(nanos // _NANO)
    sign = 1 if nanos < 0 else 0
    digits = str(abs(nanos)).rstrip("0")
    exponent = -9 + (len(str(abs(nanos))) - len(digits))
    return Decimal((sign, tuple(int(c) for c in digits), exponent))


def _ceil_div(n: int, d: int) -> int:
    """Integer division of a non-negative ``n`` by ``d``, rounding up."""
    return -(-n // d)


def _split(text: str) -> tuple[bool, str, str, str, str]:
    """Go's ``parseQuantityString``: sign, value text, numerator, denominator, suffix."""
    positive = True
    pos = 0
    end = len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    # Leading zeros are dropped from the numerator (but stay in the value text).
    while pos < end and text[pos] == "0":
        pos += 1
    if pos >= end:
        return positive, "0", "0", "", ""
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[start:pos]
    if pos >= end:
        return positive, text, num, "", ""
    if not num:
        num = "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value_text = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value_text, num, denom, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(ERR_FORMAT_WRONG)
    return positive, value_text, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str]:
    """Go's ``suffixHandler.interpret``: (base, exponent, format)."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE" and _EXPONENT_RE.match(suffix[1:]):
        parsed = int(suffix[1:])
        if -(2**63) <= parsed <= _INT64_MAX:
            # Go converts the int64 exponent with int32(...), which wraps.
            return 10, ((parsed + 2**31) % 2**32) - 2**31, DECIMAL_EXPONENT
    raise QuantityError(ERR_SUFFIX)


def _pow10_nanos(digits: int, shift: int) -> int:
    """``digits * 10**shift`` in nanos, rounded up, clamped to the cap for huge shifts."""
    if digits == 0:
        return 0
    if shift >= 0:
        if shift > _MAX_EXACT_EXPONENT:
            return _MAX_NANOS
        return digits * 10**shift
    if -shift > len(str(digits)) + 1:
        return 1
    return _ceil_div(digits, 10**-shift)


@functools.lru_cache(maxsize=65536)
def _parse_text(text: str) -> tuple[int, str, str | None]:
    """Parse like Go's ``ParseQuantity``: (nanos, format, reused original text or None)."""
    if not text:
        raise QuantityError(ERR_FORMAT_WRONG)
    if text == "0":
        return 0, DECIMAL_SI, "0"
    positive, value_text, num, denom, suffix = _split(text)
    base, exponent, fmt = _interpret(suffix)

    precision = -1
    if fmt != BINARY_SI:
        precision = 18 - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    if precision >= 0:
        scale = (exponent if fmt != BINARY_SI else 0) - len(denom)
        if scale >= -9:
            shifted = num + denom
            mantissa = int(shifted)
            result = mantissa << exponent if fmt == BINARY_SI else mantissa
            if result <= _INT64_MAX:
                if scale > _MAX_EXACT_EXPONENT:
                    nanos = _MAX_NANOS if result else 0
                else:
                    nanos = result * 10 ** (scale + 9)
                reuse = False
                if fmt == BINARY_SI:
                    reuse = exponent % 10 == 0 and (mantissa & 0x07) != 0
                else:
                    reuse = _go_mod(scale, 3) == 0 and not shifted.endswith("000") and shifted[0] != "0"
                return (nanos if positive else -nanos), fmt, (text if reuse else None)

    # Arbitrary precision path: exact arithmetic, then round up to whole nanos and cap.
    body = value_text.lstrip("+-")
    int_part, _, frac_part = body.partition(".")
    if not (int_part + frac_part):
        raise QuantityError(ERR_NUMERIC)
    digits = int(int_part + frac_part)
    if base == 10:
        nanos = _pow10_nanos(digits, exponent - len(frac_part) + 9)
    else:
        nanos = _ceil_div(digits * (2**exponent) * _NANO, 10 ** len(frac_part))
    nanos = min(nanos, _MAX_NANOS)
    if fmt == BINARY_SI and 0 < nanos < _NANO:
        fmt = DECIMAL_SI
    return (nanos if positive else -nanos), fmt, None


def _text_of(raw: Any) -> str:
    """The text Go's ``UnmarshalJSON`` would hand to ``ParseQuantity`` for a JSON value."""
    if isinstance(raw, str):
        return raw.strip()
    if raw is None:
        return "0"
    if isinstance(raw, bool) or not isinstance(raw, (int, float, Decimal)):
        # true/false, objects and arrays reach ParseQuantity as their JSON text.
        raise QuantityError(ERR_FORMAT_WRONG)
    if isinstance(raw, float):
        return repr(raw)
    return str(raw)


def _nanos_of(raw: Any) -> tuple[int, str, str | None]:
    return _parse_text(_text_of(raw))


def parse(raw: str | int | float | None) -> ParsedQuantity:
    """Parse a quantity as the API server decodes it.

    Accepts the JSON forms a manifest can carry: strings, numbers and ``null`` (zero).
    Raises :class:`QuantityError` with the server's exact message when the text is invalid.
    """
    return _parse_full(_text_of(raw))


@functools.lru_cache(maxsize=65536)
def _parse_full(text: str) -> ParsedQuantity:
    nanos, fmt, reused = _parse_text(text)
    return ParsedQuantity(_nanos_to_decimal(nanos), fmt, reused if reused is not None else _canonical(nanos, fmt))


def parse_quantity(raw: str | int | float | None) -> Decimal:
    """The exact value of a quantity (``"500m"`` -> ``Decimal("0.5")``); see :func:`parse`."""
    return _parse_full(_text_of(raw)).value


def quantity_format(raw: str | int | float | None) -> str:
    """The format the server remembers for a quantity: DecimalSI, BinarySI or DecimalExponent."""
    return _nanos_of(raw)[1]


def canonical(raw: str | int | float | None) -> str:
    """The string the server stores for a quantity (``Quantity.String()`` after decoding)."""
    return _parse_full(_text_of(raw)).string


_TEXT_NANOS: dict[str, int] = {}
_TEXT_NANOS_MAX = 8192


def _to_nanos(q: Any) -> int:
    """Nanos of a value or quantity text, rounding finer values away from zero."""
    if isinstance(q, str):
        # The same few texts ("100m", "512Mi") come back for every pod a scheduler or controller reads.
        nanos = _TEXT_NANOS.get(q)
        if nanos is None:
            nanos = _nanos_of(q)[0]
            if len(_TEXT_NANOS) >= _TEXT_NANOS_MAX:
                _TEXT_NANOS.clear()
            _TEXT_NANOS[q] = nanos
        return nanos
    if q is None:
        return _nanos_of(q)[0]
    if isinstance(q, bool):
        raise QuantityError(ERR_FORMAT_WRONG)
    if isinstance(q, int):
        return q * _NANO
    if isinstance(q, float):
        # Use the float's shortest decimal form: 0.1 means 0.1, not 0.1000000000000000055...
        q = Decimal(repr(q))
    frac = Fraction(q) * _NANO
    magnitude = _ceil_div(abs(frac.numerator), frac.denominator)
    return magnitude if frac >= 0 else -magnitude


def _scaled(q: Any, unit: int) -> int:
    nanos = _to_nanos(q)
    magnitude = _ceil_div(abs(nanos), unit)
    return magnitude if nanos >= 0 else -magnitude


def milli_value(q: Any) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded away from zero (``"1.5m"`` -> 2)."""
    return _scaled(q, _NANO // 1000)


def value(q: Any) -> int:
    """``Quantity.Value()``: whole units, rounded away from zero (``"100m"`` -> 1)."""
    return _scaled(q, _NANO)


def format_quantity(amount: Any, fmt: str = DECIMAL_SI) -> str:
    """Canonical text of ``amount`` (a number, Decimal, Fraction or quantity text) in ``fmt``.

    ``format_quantity(Decimal("0.5"))`` -> ``"500m"``; ``format_quantity(2**30, BINARY_SI)``
    -> ``"1Gi"``. Amounts finer than a nano are rounded up, as the server would on decode.
    """
    if fmt not in (DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT):
        raise ValueError(f"unknown quantity format {fmt!r}")
    return _canonical(_to_nanos(amount), fmt)


def _canonical(nanos: int, fmt: str) -> str:
    """Go's ``Quantity.CanonicalizeBytes`` for a value held as nanos."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    magnitude = abs(nanos)
    if fmt == BINARY_SI:
        # Small or fractional binary values print in decimal to avoid rounding.
        if magnitude < 1024 * _NANO or magnitude % _NANO:
            fmt = DECIMAL_SI
        else:
            units = magnitude // _NANO
            power = 0
            while units >= 1024 and units % 1024 == 0 and power < len(_BINARY_BY_POWER) - 1:
                units //= 1024
                power += 1
            return f"{sign}{units}{_BINARY_BY_POWER[power]}"
    mantissa, exponent = magnitude, -9
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    shift = _go_mod(exponent, 3)
    if shift:
        # Move down to the next multiple of three, as Go does (e.g. 5e-1 -> 500e-3).
        step = shift if shift > 0 else shift + 3
        mantissa *= 10**step
        exponent -= step
    if fmt == DECIMAL_SI and exponent in _DECIMAL_BY_EXPONENT:
        return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
    # DecimalExponent, and (unlike Go, which drops the suffix) DecimalSI beyond 'E'.
    return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
