"""Shared builders for the OPTIMIZE integration tests: fragmented tables written by deltalake
with many column types, and a multiset comparison of rows read back through deltalake."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("p", pa.string()),
        ("i8", pa.int8()),
        ("i32", pa.int32()),
        ("f64", pa.float64()),
        ("flag", pa.bool_()),
        ("s", pa.string()),
        ("b", pa.binary()),
        ("dec", pa.decimal128(12, 3)),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
        ("arr", pa.list_(pa.int64())),
        ("m", pa.map_(pa.string(), pa.int32())),
    ]
)


def batch(start: int, n: int, partitions: int = 3) -> pa.Table:
    """``n`` rows with ids from ``start``; every column has nulls somewhere."""
    rows: list[dict[str, Any]] = []
    for k in range(start, start + n):
        null = k % 7 == 3
        rows.append(
            {
                "id": k,
                "p": None if k % 11 == 5 else f"part{k % partitions}",
                "i8": None if null else k % 100 - 50,
                "i32": None if null else k * 3,
                "f64": None if null else k / 7.0,
                "flag": None if null else k % 2 == 0,
                "s": None if null else f"str-{k}-{'é' * (k % 3)}",
                "b": None if null else bytes([k % 256, (k * 7) % 256]),
                "dec": None if null else decimal.Decimal(k) / 1000,
                "d": None if null else dt.date(2020, 1, 1) + dt.timedelta(days=k % 400),
                "ts": None
                if null
                else dt.datetime(2021, 1, 1, tzinfo=dt.UTC)
                + dt.timedelta(seconds=k, microseconds=k),
                "st": None if null else {"x": k, "y": None if k % 2 else f"y{k}"},
                "arr": None if null else [k, None, k + 1],
                "m": None if null else [("a", k % 1000), ("b", None)],
            }
        )
    return pa.Table.from_pylist(rows, schema=SCHEMA)


def fragmented_table(path: Path, commits: int, rows: int, partitioned: bool) -> Path:
    """A table of ``commits`` small appends by deltalake."""
    for i in range(commits):
        write_deltalake(
            str(path),
            batch(i * rows, rows),
            mode="append",
            partition_by=["p"] if partitioned else None,
        )
    return path


def rows_multiset(path: Path) -> Counter[str]:
    """All rows of the table as read by deltalake, as a multiset of canonical JSON strings."""
    table = DeltaTable(str(path)).to_pyarrow_table()
    return Counter(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def file_count_by_partition(path: Path) -> Counter[str | None]:
    actions = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True))
    if "partition.p" not in actions.column_names:
        return Counter({None: actions.num_rows})
    return Counter(actions.column("partition.p").to_pylist())
