"""Sizes and durations: the Kubernetes quantity grammar, one size syntax for the command line and
the CRDs (64M is 64,000,000 bytes in both), and rejections."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from tests.support.manifests import compaction_policy_manifest
from txntable.api.quantity import (
    SIZE_PATTERN,
    QuantityError,
    format_bytes,
    format_duration,
    parse_bytes,
    parse_duration,
    parse_quantity,
    parse_size,
)
from txntable.api.types import CompactionPolicy
from txntable.cli.main import build_parser
from txntable.jobs.optimize import options_from_args
from txntable.maintenance.errors import InvalidPolicyError


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
    ("text", "hint"),
    [
        ("512MB", "write 512M = 512,000,000 bytes or 512Mi = 536,870,912 bytes"),
        ("64MiB", "write 64M = 64,000,000 bytes or 64Mi = 67,108,864 bytes"),
        ("1gb", "write 1G = 1,000,000,000 bytes or 1Gi = 1,073,741,824 bytes"),
        ("10 KiB", "write 10k = 10,000 bytes or 10Ki = 10,240 bytes"),
        ("7B", "a Kubernetes quantity"),
    ],
)
def test_parse_size_rejects_habits_with_both_readings(text: str, hint: str) -> None:
    with pytest.raises(QuantityError, match=re.escape(hint)):
        parse_size(text)
    with pytest.raises(QuantityError):
        parse_bytes(text)  # not a Kubernetes quantity: manifests must not accept it


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("1.1Ki", "'1.1Ki' is not a whole number of bytes (1126.4)"),
        ("1.5", "'1.5' is not a whole number of bytes (1.5)"),
        ("0.5Ki", "write 512"),  # whole, but the CRDs want the whole part at least 1
        ("1.03125Ki", "write 1056"),  # whole, but a thirty-second of a binary unit
        ("0.5KB", "write 500 for 0.5k or 512 for 0.5Ki"),
        ("1.3KiB", "write 1.3k = 1,300 bytes"),  # 1.3Ki is 1331.2 bytes: not offered
    ],
)
def test_a_refused_size_is_told_what_to_write(text: str, says: str) -> None:
    """The hint names only spellings the CRDs admit (``0.5Ki`` used to be told to write
    ``0.5Ki``, and ``1.1Ki`` that it was not a positive size)."""
    with pytest.raises(QuantityError, match=re.escape(says)) as info:
        parse_size(text)
    if "write " in str(info.value):
        for offer in str(info.value).split("write ", 1)[1].rstrip(")").split(" or "):
            spelled = offer.split()[0]
            assert re.fullmatch(SIZE_PATTERN, spelled), f"the hint offers {spelled!r}"


@pytest.mark.parametrize(
    "bad", ["-1Gi", "-5", -1, "1.5", "500m", "abc", "", "1Xb", "Gi", "1.2.3Mi", True, 1.5]
)
def test_parse_bytes_rejects(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_bytes(bad)  # type: ignore[arg-type]
    with pytest.raises(QuantityError):
        parse_size(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text", ["64M", "64Mi", "1.5Gi", "1k", "1Ki", "134217728", "2G", "1E", "007"]
)
def test_command_line_sizes_mean_what_they_mean_in_a_crd(text: str) -> None:
    """``txntable optimize --target-size 64M`` and ``targetFileSize: 64M`` are the same size."""
    args = build_parser().parse_args(["optimize", "t", "--target-size", text])
    cli = options_from_args(args).target_file_size
    manifest = compaction_policy_manifest(
        "p", namespace=None, targetFileSize=text, minFileSize="1", triggers={"smallFiles": 1}
    )
    crd = CompactionPolicy.from_manifest(manifest).spec.target_file_size
    assert cli == crd == parse_size(text)
    assert parse_size("64M") == 64_000_000 and parse_size("64Mi") == 64 * 2**20


def test_command_line_rejects_what_a_crd_rejects() -> None:
    for text in ("64MB", "0", "1e3", "500m", "1 Gi"):
        args = build_parser().parse_args(["optimize", "t", "--max-bytes", text])
        with pytest.raises(InvalidPolicyError, match=f"--max-bytes: {re.escape(repr(text))}"):
            options_from_args(args)
        assert re.search(SIZE_PATTERN, text) is None


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


@pytest.mark.parametrize(
    "bad", ["", "0s", "1w", "1.5h", "h", "10", "1h30", "-1h", "P1D", "1 month", "500 milliseconds"]
)
def test_parse_duration_rejects(bad: str) -> None:
    with pytest.raises(QuantityError):
        parse_duration(bad)


def test_format_duration_picks_largest_unit() -> None:
    assert format_duration(86400) == "1d"
    assert format_duration(5400) == "90m"
    assert format_duration(61) == "61s"
    with pytest.raises(QuantityError):
        format_duration(0)
