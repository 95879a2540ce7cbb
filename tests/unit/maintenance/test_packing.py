"""The packing kernel both OPTIMIZE plans use: its rules on sizes alone, table-driven."""

from __future__ import annotations

import random

import pytest

from txntable.maintenance.packing import bins_within, pack_partition, partition_order
from txntable.maintenance.planner import OptimizePolicy

POLICY = OptimizePolicy(target_file_size=100, min_file_size=50, min_input_files=2)

PACK_CASES = [
    # (what, sizes, purge, bins as sizes)
    ("one file is already compacted", [10], None, []),
    ("one file due a purge is rewritten alone", [10], [True], [[10]]),
    ("files at or over the minimum are left alone", [50, 60, 10], None, []),
    (
        "a purge bin is kept, a lone small file dropped",
        [90, 10, 5],
        [True, False, False],
        [[90, 10]],
    ),
    ("first fit, largest first", [30, 40, 20, 45, 25], None, [[45, 40], [30, 25, 20]]),
    ("a bin under min_input_files is dropped", [45, 45, 45], None, [[45, 45]]),
    ("too few candidates and nothing to purge", [49, 70, 80], None, []),
]


@pytest.mark.parametrize(
    ("sizes", "purge", "expected"),
    [pytest.param(*c[1:], id=c[0]) for c in PACK_CASES],
)
def test_pack_partition(
    sizes: list[int], purge: list[bool] | None, expected: list[list[int]]
) -> None:
    bins = pack_partition(sizes, POLICY, purge=purge)
    assert [[sizes[i] for i in members] for members in bins] == expected


def test_ties_order_equal_sizes_and_change_no_bin_sizes() -> None:
    rng = random.Random(24)
    sizes = [rng.choice([5, 10, 20, 30, 45]) for _ in range(200)]
    names = [f"part-{rng.randrange(10**6):06d}.parquet" for _ in sizes]
    by_name = pack_partition(sizes, POLICY, ties=names)
    unnamed = pack_partition(sizes, POLICY)
    # equal sizes are interchangeable: the same bins by size, whatever orders the ties
    assert [[sizes[i] for i in m] for m in by_name] == [[sizes[i] for i in m] for m in unnamed]
    for members in by_name:
        ordered = sorted(members, key=lambda i: (-sizes[i], names[i]))
        assert members == ordered


@pytest.mark.parametrize(
    ("bin_bytes", "max_bytes", "taken"),
    [
        ([10, 20, 30], None, 3),
        ([10, 20, 30], 30, 2),
        ([10, 20, 30], 29, 1),
        ([50, 1], 10, 1),  # the first bin is always taken
        ([], 10, 0),
    ],
)
def test_bins_within(bin_bytes: list[int], max_bytes: int | None, taken: int) -> None:
    assert bins_within(bin_bytes, max_bytes) == taken


def test_partition_order_puts_null_first() -> None:
    keys = [("b",), (None,), ("a",), ("",)]
    assert sorted(keys, key=partition_order) == [(None,), ("",), ("a",), ("b",)]
