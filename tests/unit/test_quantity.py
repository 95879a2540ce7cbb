"""Sizes and durations: the Kubernetes quantity grammar, the lenient CLI forms, and rejections."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from txntable.api.quantity import (
    SIZE_PATTERN,
    QuantityError,
    format_bytes,
    format_duration,
    parse_bytes,
    parse_duration,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("128Mi", 128 * 2**20),
        ("1Gi", 2**30),
        ("1.5Gi", 3 * 2**29),
        ("512M", 512 * 10**6),
        ("1k", 1000),
        ("1Ki", 1024),
        ("2Ti", 2 * 2**40),
        ("1E", 10**18),
        ("1Ei", 2**60),
        ("1e3", 1000),
        ("134217728", 134217728),
        (134217728, 134217728),
        (0, 0),
    ],
)
def test_parse_bytes_kubernetes_quantities(text: str | int, expected: int) -> None:
    assert parse_bytes(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("512MB", 512 * 10**6), ("64MiB", 64 * 2**20), ("1gb", 10**9), ("10 KiB", 10240), ("7B", 7)],
)
def test_parse_bytes_lenient_forms(text: str, expected: int) -> None:
    assert parse_bytes(text, lenient=True) == expected
    with pytest.raises(QuantityError):
        parse_bytes(text)  # not a Kubernetes quantity: manifests must not accept it


@pytest.mark.parametrize(
    "bad", ["-1Gi", "-5", -1, "1.5", "500m", "abc", "", "1Xb", "Gi", "1.2.3Mi", True, 1.5]
)
def test_parse_bytes_rejects(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_bytes(bad, lenient=True)  # type: ignore[arg-type]


def test_parse_quantity_keeps_fractions_exact() -> None:
    assert parse_quantity("500m") == Decimal("0.5")
    assert parse_quantity("-1.5Ki") == Decimal(-1536)
    assert parse_quantity("+2e-1") == Decimal("0.2")


def test_size_pattern_admits_exactly_positive_sizes() -> None:
    good = ["1", "128Mi", "1.5Gi", "10G", "007"]
    bad = ["0", "000", "-1Gi", "1.5", "0.5Gi", "512MB", "1e3", "1 Gi", ""]
    assert all(re.search(SIZE_PATTERN, g) for g in good)
    assert not any(re.search(SIZE_PATTERN, b) for b in bad)
    for text in good:
        assert parse_bytes(text) > 0


@pytest.mark.parametrize(
    ("size", "text"), [(134217728, "128Mi"), (2**30, "1Gi"), (1000, "1000"), (1536, "1536")]
)
def test_format_bytes_round_trips(size: int, text: str) -> None:
    assert format_bytes(size) == text
    assert parse_bytes(format_bytes(size)) == size


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("15m", 900), ("1h30m", 5400), ("2d", 172800), ("30d", 2592000), ("1h", 3600)],
)
def test_parse_duration(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds
    assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("bad", ["", "0s", "1w", "1.5h", "h", "10", "1h 30m", "-1h", "P1D"])
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(QuantityError):
        parse_duration(bad)


def test_format_duration_picks_largest_unit() -> None:
    assert format_duration(86400) == "1d"
    assert format_duration(5400) == "90m"
    assert format_duration(61) == "61s"
    with pytest.raises(QuantityError):
        format_duration(0)
