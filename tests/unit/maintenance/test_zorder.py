"""Z-order keys: rank normalisation, bit interleaving, clustering effect, unsupported types."""

from __future__ import annotations

import datetime as dt
import decimal
import random

import pyarrow as pa
import pytest

from tests.unit.case_ids import readable
from txntable.maintenance.errors import InvalidPolicyError
from txntable.maintenance.zorder import (
    bits_per_column,
    interleave,
    normalised_ranks,
    zorder_key,
    zorder_sort,
)


def u64(values: list[int]) -> pa.Array:
    return pa.array(values, pa.uint64())


@pytest.mark.parametrize(
    ("x", "y", "expected"),
    [
        # bit b of x -> key bit 2b+1, of y -> key bit 2b
        ([0, 1, 0, 1], [0, 0, 1, 1], [0, 2, 1, 3]),
        ([2, 3], [2, 3], [12, 15]),
        ([0b11], [0b00], [0b1010]),
    ],
    ids=readable,
)
def test_interleave_two_columns(x, y, expected):
    assert interleave([u64(x), u64(y)], bits=2).to_pylist() == expected


def test_interleave_one_column_is_identity():
    assert interleave([u64([5, 0, 7])], bits=3).to_pylist() == [5, 0, 7]


def test_bits_per_column():
    assert [bits_per_column(k) for k in (1, 2, 3, 4, 8)] == [32, 32, 21, 16, 8]
    with pytest.raises(InvalidPolicyError):
        bits_per_column(0)


@pytest.mark.parametrize(
    "values",
    [
        [3, 1, None, 3, -7],
        ["b", "a", None, "b", ""],
        [b"x", None, b"a", b"x", b""],
        [decimal.Decimal("1.5"), None, decimal.Decimal("0.1"), decimal.Decimal("-2")],
        [dt.date(2020, 1, 1), None, dt.date(2019, 1, 1), dt.date(2020, 1, 1)],
        [dt.datetime(2020, 1, 1, tzinfo=dt.UTC), None, dt.datetime(1970, 1, 1, tzinfo=dt.UTC)],
        [True, None, False, True],
        [1.5, None, -0.0, 2.5],
    ],
    ids=readable,
)
def test_ranks_preserve_order_and_ties(values):
    ranks = normalised_ranks(pa.array(values), bits=32).to_pylist()
    present = [(v, r) for v, r in zip(values, ranks, strict=True) if v is not None]
    for v1, r1 in present:
        for v2, r2 in present:
            assert (v1 < v2) == (r1 < r2) and (v1 == v2) == (r1 == r2)
    nulls = [r for v, r in zip(values, ranks, strict=True) if v is None]
    assert all(n > max(r for _, r in present) for n in nulls)  # nulls last


def test_ranks_are_scaled_into_the_bit_budget_keeping_order():
    values = list(range(1000))
    ranks = normalised_ranks(pa.array(values), bits=4).to_pylist()
    assert min(ranks) == 0 and max(ranks) == 15
    assert ranks == sorted(ranks)


def test_unsupported_types_are_rejected():
    with pytest.raises(InvalidPolicyError):
        normalised_ranks(pa.array([{"a": 1}]), bits=8)
    with pytest.raises(InvalidPolicyError):
        zorder_key(pa.table({"a": [1]}), ["b"])


def test_zorder_sort_keeps_rows_and_clusters_them():
    rng = random.Random(3)
    n = 4096
    table = pa.table(
        {
            "x": [rng.randrange(64) for _ in range(n)],
            "y": [rng.randrange(64) for _ in range(n)],
            "payload": list(range(n)),
        }
    )
    out = zorder_sort(table, ["x", "y"])
    assert sorted(out.column("payload").to_pylist()) == list(range(n))
    assert sorted(out.to_pylist(), key=lambda r: r["payload"]) == table.to_pylist()

    # cut into 16 "files": each must cover a small box in (x, y), unlike the input order
    def mean_box(t: pa.Table) -> float:
        rows = t.to_pylist()
        chunk = len(rows) // 16
        areas = []
        for i in range(16):
            part = rows[i * chunk : (i + 1) * chunk]
            xs = [r["x"] for r in part]
            ys = [r["y"] for r in part]
            areas.append((max(xs) - min(xs) + 1) * (max(ys) - min(ys) + 1))
        return sum(areas) / len(areas)

    assert mean_box(out) < mean_box(table) / 4  # ideal 256 vs 4096


def test_zorder_sort_small_tables():
    assert (
        zorder_sort(pa.table({"x": []}, schema=pa.schema([("x", pa.int64())])), ["x"]).num_rows == 0
    )
    assert zorder_sort(pa.table({"x": [1]}), ["x"]).to_pylist() == [{"x": 1}]
