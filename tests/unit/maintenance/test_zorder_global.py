"""The bin-wide Z-order key of the distributed path: bucketing by sampled boundaries, a key that
does not depend on which rows a task holds, and key ranges of even size."""

from __future__ import annotations

import bisect
import itertools
import random
from collections import Counter

import pyarrow as pa
import pytest

from txntable.maintenance.errors import InvalidPolicyError
from txntable.maintenance.zorder import (
    bucketize,
    column_boundaries,
    global_zorder_key,
    range_ids,
    range_splits,
)


@pytest.mark.parametrize("right", [True, False])
@pytest.mark.parametrize(("kind", "many"), [("int", 12), ("int", 300), ("str", 12)])
def test_bucketize_agrees_with_binary_search(right: bool, kind: str, many: int) -> None:
    rng = random.Random(3)
    raw = [rng.randrange(1000) for _ in range(500)]
    bounds_raw = sorted({rng.randrange(1000) for _ in range(many)})
    convert = (lambda v: v) if kind == "int" else (lambda v: f"{v:04d}")
    values = [convert(v) for v in raw]
    bounds = [convert(v) for v in bounds_raw]
    search = bisect.bisect_right if right else bisect.bisect_left
    expected = [search(bounds, v) for v in values]
    got = bucketize(pa.array(values), pa.array(bounds), right=right).to_pylist()
    assert got == expected


def test_bucketize_nulls_count_every_boundary_and_empty_inputs() -> None:
    got = bucketize(pa.array([None, 5, None]), pa.array([1, 9])).to_pylist()
    assert got == [2, 1, 2]
    assert bucketize(pa.array([3, 1]), pa.array([], pa.int64())).to_pylist() == [0, 0]
    assert bucketize(pa.array([], pa.int64()), pa.array([1])).to_pylist() == []


def test_boundaries_are_the_distinct_values_when_few_else_equi_depth() -> None:
    assert column_boundaries(pa.array(["b", None, "a", "b"]), bits=32).to_pylist() == ["a", "b"]
    skewed = pa.array([0] * 900 + list(range(1, 101)))
    bounds = column_boundaries(skewed, bits=32, max_buckets=11).to_pylist()
    assert bounds == sorted(set(bounds)) and len(bounds) <= 10
    assert bounds[0] == 0 and bounds[-1] > 0  # the frequent value is one boundary, not ten


def test_boundaries_refuse_unorderable_columns() -> None:
    with pytest.raises(InvalidPolicyError, match="cannot Z-order by a column of type"):
        column_boundaries(pa.array([{"a": 1}]), bits=32)


def test_global_key_does_not_depend_on_the_rows_a_task_holds() -> None:
    rng = random.Random(4)
    table = pa.table(
        {
            "x": [rng.randrange(1000) if rng.random() > 0.05 else None for _ in range(2000)],
            "s": [f"s{rng.randrange(300):03d}" for _ in range(2000)],
        }
    )
    sample = table.slice(0, 2000).take(pa.array(range(0, 2000, 7)))
    bounds = [column_boundaries(sample.column(c), bits=32) for c in ("x", "s")]
    whole = global_zorder_key(table, ["x", "s"], bounds).to_pylist()
    halves = (
        global_zorder_key(table.slice(0, 1100), ["x", "s"], bounds).to_pylist()
        + global_zorder_key(table.slice(1100), ["x", "s"], bounds).to_pylist()
    )
    assert halves == whole
    # and the key keeps each column's order where the other column is equal
    columns = zip(table.column("s").to_pylist(), table.column("x").to_pylist(), whole, strict=True)
    rows = sorted((s, x, k) for s, x, k in columns if x is not None)
    for (s1, x1, k1), (s2, x2, k2) in itertools.pairwise(rows):
        if s1 == s2 and x1 < x2:
            assert k1 <= k2


def test_ranges_are_even_and_a_frequent_key_is_spread() -> None:
    keys = pa.array(list(range(10_000)), pa.uint64())
    ids = range_ids(keys, range_splits(keys, 8)).to_pylist()
    counts = Counter(ids)
    assert sorted(counts) == list(range(8))
    assert max(counts.values()) - min(counts.values()) <= 2
    assert ids == sorted(ids)  # ranges follow the key order

    frequent = pa.array([7] * 9000 + list(range(100, 1100)), pa.uint64())
    ids = range_ids(frequent, range_splits(frequent, 10)).to_pylist()
    counts = Counter(ids)
    assert len(counts) == 10 and max(counts.values()) <= 1100, counts
