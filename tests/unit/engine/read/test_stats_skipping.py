"""Which files a row-level delete may skip by their statistics: only those that cannot match."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest

from txntable.engine.model.predicates import parse_predicate
from txntable.engine.read.state import ADD_SCHEMA
from txntable.engine.read.stats_skipping import prune

TYPES = {
    "id": "long",
    "s": "string",
    "f": "float",
    "d": "double",
    "t": "timestamp",
    "st": {"type": "struct", "fields": []},
}
STATS = {
    "numRecords": 10,
    "minValues": {
        "id": 10,
        "s": "m",
        "f": 1.5,
        "d": 0.5,
        "t": "2024-01-01T00:00:00.000Z",
        "st": {},
    },
    "maxValues": {"id": 20, "s": "p", "f": 2.5, "d": 9.5, "t": "2024-02-01T00:00:00.000Z"},
    "nullCount": {"id": 0, "s": 3, "f": 0, "d": 10, "t": 0, "st": {"a": 0}},
}


def _files(*stats: dict[str, Any] | None) -> pa.Table:
    rows = [
        {"path": f"f{i}.parquet", "stats": None if s is None else json.dumps(s)}
        for i, s in enumerate(stats)
    ]
    return pa.Table.from_pylist(rows, schema=ADD_SCHEMA)


@pytest.mark.parametrize(
    ("predicate", "may_match"),
    [
        ("id = 15", True),
        ("id = 9", False),
        ("id = 21", False),
        ("id < 10", False),
        ("id <= 10", True),
        ("id > 20", False),
        ("id >= 20", True),
        ("id > 19.5", True),
        ("id = NULL", False),
        ("id IN (1, 2, 30)", False),
        ("id IN (1, 12)", True),
        ("id NOT IN (10, 11)", True),
        ("id != 15", True),
        ("NOT (id = 15)", True),
        ("id = 1 OR id = 2", False),
        ("id = 1 OR id = 15", True),
        ("id = 15 AND id = 30", False),
        ("s = 'a'", False),  # below the minimum
        ("s = 'z'", True),  # maxima of strings may be cut without a tie-breaker: not used
        ("s < 'm'", False),
        ("f = 100", True),  # float bounds are not trusted
        ("d = 100", False),
        ("d IS NULL", True),
        ("d IS NOT NULL", False),  # 10 nulls of 10 records
        ("id IS NULL", False),
        ("s IS NOT NULL", True),
        ("t = TIMESTAMP '2030-01-01 00:00:00'", True),  # timestamps are not compared
        ("id = 'x'", True),  # not comparable here: evaluation reports the bad literal later
        ("nope = 1", True),  # no statistics for the column
        ("st = 1", True),  # a struct's type is no name
    ],
)
def test_a_file_is_skipped_only_when_no_row_can_match(predicate: str, may_match: bool) -> None:
    kept = prune(_files(STATS), parse_predicate(predicate), TYPES)
    assert kept.num_rows == (1 if may_match else 0)


def test_files_without_statistics_are_kept() -> None:
    files = _files(None, {"numRecords": 3}, STATS)
    kept = prune(files, parse_predicate("id = 99"), TYPES)
    assert kept.column("path").to_pylist() == ["f0.parquet", "f1.parquet"]
