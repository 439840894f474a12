"""resource.Quantity parsing and canonical form, checked against apimachinery's behaviour."""

from __future__ import annotations

import time
from decimal import Decimal
from fractions import Fraction

import pytest

from koordinator.apis import quantity as q

FORMAT_WRONG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("0.5", "500m"),
        ("1024Mi", "1Gi"),
        ("1000m", "1"),
        ("1.5Gi", "1536Mi"),
        ("100Mi", "100Mi"),
        ("3584Mi", "3584Mi"),
        ("1000000", "1M"),
        ("1000", "1k"),
        ("1.5m", "1500u"),
        ("0.0000000001", "1n"),  # finer than nano rounds up
        ("1e-20", "1e-9"),
        ("1e1", "10"),
        ("12e-1", "1200e-3"),
        ("-1Ki", "-1Ki"),
        ("0.1Ki", "102400m"),  # binary below 1024 prints as decimal
        ("5.5Ki", "5632"),  # not a whole number of Ki
        ("0", "0"),
        ("-0", "0"),
        (4, "4"),
        (0.5, "500m"),
        (None, "0"),
        (1e20, "100e18"),
    ],
)
def test_canonical_string(text, expected):
    assert q.canonical(text) == expected


@pytest.mark.parametrize("text", ["+1", "01", "1e3", "1E3", "100m", "40Mi", "2Gi", "1"])
def test_canonical_inputs_are_kept_verbatim(text):
    # ParseQuantity keeps the caller's text when it is already in canonical form.
    assert q.canonical(text) == text


@pytest.mark.parametrize(
    "text, value, fmt",
    [
        ("500m", Decimal("0.5"), q.DECIMAL_SI),
        ("1Gi", Decimal(2**30), q.BINARY_SI),
        ("1e3", Decimal(1000), q.DECIMAL_EXPONENT),
        ("3k", Decimal(3000), q.DECIMAL_SI),
        ("2Ei", Decimal(2 * 2**60), q.BINARY_SI),
        ("1.5", Decimal("1.5"), q.DECIMAL_SI),
        ("-250m", Decimal("-0.25"), q.DECIMAL_SI),
        ("Gi", Decimal(0), q.BINARY_SI),  # an empty numeral is zero in Go too
    ],
)
def test_parse_value_and_format(text, value, fmt):
    assert q.parse_quantity(text) == value
    assert q.quantity_format(text) == fmt
    parsed = q.parse(text)
    assert parsed.value == value and parsed.format == fmt


def test_values_beyond_int64_are_capped_on_the_slow_path():
    assert q.parse_quantity("99999999999999999999.5") == Decimal(2**63 - 1)


@pytest.mark.parametrize("text", ["100//apply a GPU", "abc", "", "1 Gi", "1.2.3", "1.5.", True, [1], {"a": 1}])
def test_format_errors_carry_the_servers_text(text):
    with pytest.raises(q.QuantityError) as err:
        q.parse(text)
    assert str(err.value) == FORMAT_WRONG
    assert isinstance(err.value, ValueError)


@pytest.mark.parametrize("text", ["1Kii", "1mi", "1K", "5k3", "1e"])
def test_suffix_errors(text):
    with pytest.raises(q.QuantityError, match="^unable to parse quantity's suffix$"):
        q.parse_quantity(text)


def test_surrounding_space_is_trimmed_like_unmarshal_json():
    assert q.canonical(" 2Gi ") == "2Gi"


@pytest.mark.parametrize(
    "text, milli, units",
    [("1.5m", 2, 1), ("0.5", 500, 1), ("100m", 100, 1), ("-100m", -100, -1), ("2", 2000, 2), ("1n", 1, 1), ("0", 0, 0)],
)
def test_milli_value_and_value_round_away_from_zero(text, milli, units):
    assert q.milli_value(text) == milli
    assert q.value(text) == units


def test_helpers_accept_numbers():
    assert q.milli_value(Decimal("0.0001")) == 1
    assert q.value(Fraction(3, 2)) == 2
    assert q.milli_value(2) == 2000


@pytest.mark.parametrize(
    "amount, fmt, expected",
    [
        (Decimal("0.5"), q.DECIMAL_SI, "500m"),
        (2**30, q.BINARY_SI, "1Gi"),
        (1024 * 2**20, q.BINARY_SI, "1Gi"),
        (Decimal("1.5") * 2**30, q.BINARY_SI, "1536Mi"),
        (Decimal("1.000"), q.DECIMAL_SI, "1"),
        (1000, q.DECIMAL_EXPONENT, "1e3"),
        (1500, q.BINARY_SI, "1500"),
        (0, q.BINARY_SI, "0"),
        (Fraction(1, 3), q.DECIMAL_SI, "333333334n"),
        ("0.5", q.DECIMAL_SI, "500m"),
    ],
)
def test_format_quantity(amount, fmt, expected):
    assert q.format_quantity(amount, fmt) == expected


def test_format_quantity_rejects_unknown_formats():
    with pytest.raises(ValueError):
        q.format_quantity(1, "Roman")


def test_huge_exponents_do_not_hang():
    start = time.monotonic()
    assert q.parse_quantity("1e2000000000") > 0
    assert q.parse_quantity("1e-2000000000") == Decimal("1e-9")
    assert time.monotonic() - start < 1


def test_parse_is_cached():
    q.parse_quantity("777Mi")
    hits = q._parse_full.cache_info().hits
    for _ in range(10):
        q.parse_quantity("777Mi")
    assert q._parse_full.cache_info().hits >= hits + 10


def test_floats_use_their_decimal_form():
    assert q.format_quantity(0.1) == "100m"
    assert q.milli_value(0.1) == 100
