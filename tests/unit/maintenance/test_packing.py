"""The packing kernel both OPTIMIZE plans use: its rules on sizes alone, table-driven."""

from __future__ import annotations

import random

import pytest

from txntable.api.optimize_options import OptimizeOptions
from txntable.maintenance.packing import bins_within, pack_partition, partition_order

POLICY = OptimizeOptions(target_file_size=100, min_file_size=50, min_input_files=2)

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


@pytest.mark.parametrize(
    ("most", "expected"),
    [
        pytest.param(None, [[30, 20, 20, 10, 10, 5]], id="no-limit-one-bin"),
        pytest.param(3, [[30, 20, 20], [10, 10, 5]], id="full-by-count-opens-a-bin"),
        pytest.param(4, [[30, 20, 20, 10], [10, 5]], id="the-rest-still-packs"),
        pytest.param(5, [[30, 20, 20, 10, 10]], id="a-lone-leftover-is-dropped"),
    ],
)
def test_max_files_per_bin_closes_a_bin_by_count(
    most: int | None, expected: list[list[int]]
) -> None:
    sizes = [10, 20, 5, 30, 10, 20]  # 95 bytes: one bin of a 100-byte target without a limit
    rules = OptimizeOptions(target_file_size=100, min_file_size=50, max_files_per_bin=most)
    bins = pack_partition(sizes, rules)
    assert [[sizes[i] for i in members] for members in bins] == expected


def test_max_files_per_bin_holds_for_empty_files_and_purges() -> None:
    rules = OptimizeOptions(target_file_size=100, min_file_size=50, max_files_per_bin=2)
    sizes = [0, 0, 0, 0, 0]
    assert [len(m) for m in pack_partition(sizes, rules)] == [2, 2]
    # a file due a purge counts like any other; the bin it opens closes at two files
    purge = [True, False, False, False]
    assert [len(m) for m in pack_partition([90, 5, 5, 5], rules, purge=purge)] == [2, 2]
    unlimited = OptimizeOptions(target_file_size=100, min_file_size=50)
    assert [len(m) for m in pack_partition([90, 5, 5, 5], unlimited, purge=purge)] == [3]


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
