"""OPTIMIZE on tables with widened column types and variant columns.

Type widening: older files store a column in the type it had then (integer, float, decimal(5,2),
date); the rewrite writes every column in the table's current type (long, double, decimal(10,4),
timestamp_ntz) with lossless casts, and statistics in that type. Variant columns are carried
through as their two binaries, unchanged, with a null count and no bounds. Shredded variants are
refused up front, the feature named, and nothing changes.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle_read
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.errors import UnsupportedWriterFeatureError
from txntable.engine.model.stats import stats_for_table
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration


def _write_commit(path: Path, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": int(time.time() * 1000), "operation": "WRITE"}}
    log = path / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    with open(log / f"{version:020d}.json", "x") as fh:
        fh.write("\n".join(json.dumps(a) for a in [info, *actions]) + "\n")


def _add_file(
    path: Path, data: pa.Table, partition_values: dict[str, str | None]
) -> dict[str, Any]:
    """Write ``data`` as a Parquet file of the table (in its own types) and its add action."""
    name = f"part-{uuid.uuid4()}.c000.snappy.parquet"
    pq.write_table(data, path / name)
    return {
        "add": {
            "path": name,
            "partitionValues": partition_values,
            "size": (path / name).stat().st_size,
            "modificationTime": int(time.time() * 1000),
            "dataChange": True,
            "stats": json.dumps({"numRecords": data.num_rows}),
        }
    }


def _schema(fields: list[tuple[str, Any, dict[str, Any]]]) -> str:
    return json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": n, "type": t, "nullable": True, "metadata": m} for n, t, m in fields
            ],
        }
    )


def _metadata(schema_string: str, configuration: dict[str, str]) -> dict[str, Any]:
    return {
        "metaData": {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": [],
            "configuration": configuration,
            "createdTime": 1,
        }
    }


def _change(from_type: str, to_type: str) -> dict[str, Any]:
    return {"delta.typeChanges": [{"fromType": from_type, "toType": to_type}]}


_OLD = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int32()),
        ("f", pa.float32()),
        ("i2d", pa.int16()),
        ("dec", pa.decimal128(5, 2)),
        ("day", pa.date32()),
        ("st", pa.struct([("x", pa.int8())])),
    ]
)
_NEW = pa.schema(
    [
        ("id", pa.int64()),
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("i2d", pa.float64()),
        ("dec", pa.decimal128(10, 4)),
        ("day", pa.timestamp("us")),
        ("st", pa.struct([("x", pa.int32())])),
    ]
)


def _rows(start: int, n: int, schema: pa.Schema) -> pa.Table:
    rows = []
    for k in range(start, start + n):
        null = k % 5 == 4
        day = dt.date(2024, 1, 1) + dt.timedelta(days=k)
        rows.append(
            {
                "id": k,
                "i": None if null else (k * 1000 if schema is _OLD else k * 10**10),
                "f": None if null else k + 0.5,
                "i2d": None if null else -k,
                "dec": None if null else decimal.Decimal(k) / 4,
                "day": None
                if null
                else (day if schema is _OLD else dt.datetime(2025, 1, 1, k % 24, k)),
                "st": None if k % 7 == 6 else {"x": None if null else k % 100},
            }
        )
    return pa.Table.from_pylist(rows, schema=schema)


def _widened_table(path: Path) -> None:
    """Two files written in the old types, a type change, two files in the new types."""
    old = _schema(
        [
            ("id", "long", {}),
            ("i", "integer", {}),
            ("f", "float", {}),
            ("i2d", "short", {}),
            ("dec", "decimal(5,2)", {}),
            ("day", "date", {}),
            ("st", {"type": "struct", "fields": [
                {"name": "x", "type": "byte", "nullable": True, "metadata": {}}]}, {}),
        ]
    )  # fmt: skip
    new = _schema(
        [
            ("id", "long", {}),
            ("i", "long", _change("integer", "long")),
            ("f", "double", _change("float", "double")),
            ("i2d", "double", _change("short", "double")),
            ("dec", "decimal(10,4)", _change("decimal(5,2)", "decimal(10,4)")),
            ("day", "timestamp_ntz", _change("date", "timestamp_ntz")),
            ("st", {"type": "struct", "fields": [
                {"name": "x", "type": "integer", "nullable": True,
                 "metadata": _change("byte", "integer")}]}, {}),
        ]
    )  # fmt: skip
    features = ["typeWidening", "timestampNtz"]
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7,
                "readerFeatures": features, "writerFeatures": features}  # fmt: skip
    path.mkdir()
    config = {"delta.enableTypeWidening": "true"}
    meta = _metadata(old, config)
    _write_commit(path, 0, [{"protocol": protocol}, meta])
    _write_commit(path, 1, [_add_file(path, _rows(0, 10, _OLD), {})])
    _write_commit(path, 2, [_add_file(path, _rows(10, 10, _OLD), {})])
    meta["metaData"]["schemaString"] = new
    _write_commit(path, 3, [meta])
    _write_commit(path, 4, [_add_file(path, _rows(20, 10, _NEW), {})])
    _write_commit(path, 5, [_add_file(path, _rows(30, 10, _NEW), {})])


def _live_rows(path: Path) -> list[dict[str, Any]]:
    """Rows of the live files, each read in its own type and widened here (pyarrow casts)."""
    rows: list[dict[str, Any]] = []
    for add in Table.open(str(path)).snapshot().add_actions():
        data = pq.read_table(path / add.path)
        rows.extend(data.cast(_NEW).to_pylist())
    return sorted(rows, key=lambda r: r["id"])


def test_widened_columns_are_rewritten_in_the_current_type(tmp_path: Path) -> None:
    path = tmp_path / "widened"
    _widened_table(path)
    expected = _live_rows(path)
    assert len(expected) == 40  # deltalake 1.6.6 refuses typeWidening: pyarrow is the oracle
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_removed == 4, result.skipped
    snapshot = Table.open(str(path)).snapshot()
    assert snapshot.num_files == 1
    (add,) = snapshot.add_actions()
    written = pq.read_table(path / add.path)
    assert written.schema.equals(_NEW)  # int64, double, decimal(10,4), timestamp, struct<int32>
    assert sorted(written.to_pylist(), key=lambda r: r["id"]) == expected
    stats = json.loads(add.stats or "{}")
    assert stats["minValues"]["day"] == "2024-01-01T00:00:00.000"  # a date, now a timestamp
    assert stats["maxValues"]["i"] == 38 * 10**10  # 39 is a null row
    assert stats["minValues"]["dec"] == 0 and stats["maxValues"]["dec"] == 9.5


def test_a_narrowing_file_is_refused_not_truncated(tmp_path: Path) -> None:
    """A file whose values do not fit the schema's type (no widening could have produced it)
    fails its bin: nothing is committed, no value is cut."""
    path = tmp_path / "bad"
    path.mkdir()
    schema = _schema([("id", "long", {}), ("i", "integer", {})])
    _write_commit(path, 0, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
                            _metadata(schema, {})])  # fmt: skip
    good = pa.table({"id": pa.array([1], pa.int64()), "i": pa.array([1], pa.int32())})
    bad = pa.table({"id": pa.array([2], pa.int64()), "i": pa.array([2**40], pa.int64())})
    _write_commit(path, 1, [_add_file(path, good, {}), _add_file(path, bad, {})])
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.bins_committed == 0 and "rewrite failed" in result.skipped[0]["reason"]
    assert Table.open(str(path)).snapshot().version == 1


# -- variant ------------------------------------------------------------------------------------

_VARIANT = pa.struct([("value", pa.binary()), ("metadata", pa.binary())])
_EMPTY_METADATA = bytes([0x01, 0x00, 0x00])  # version 1, no dictionary strings


def _variant_value(k: int) -> bytes:
    if k % 2:
        text = f"v{k}".encode()  # a short string: header (length << 2) | 1
        return bytes([(len(text) << 2) | 1]) + text
    return bytes([3 << 2, k % 128])  # an int8 primitive: type id 3


def _variant_rows(start: int, n: int) -> pa.Table:
    rows = []
    for k in range(start, start + n):
        v = None if k % 4 == 3 else {"value": _variant_value(k), "metadata": _EMPTY_METADATA}
        rows.append({"id": k, "v": v, "s": {"inner": v, "n": k}})
    schema = pa.schema(
        [("id", pa.int64()), ("v", _VARIANT),
         ("s", pa.struct([("inner", _VARIANT), ("n", pa.int64())]))]
    )  # fmt: skip
    return pa.Table.from_pylist(rows, schema=schema)


def _variant_table(path: Path) -> None:
    schema = _schema(
        [
            ("id", "long", {}),
            ("v", "variant", {}),
            ("s", {"type": "struct", "fields": [
                {"name": "inner", "type": "variant", "nullable": True, "metadata": {}},
                {"name": "n", "type": "long", "nullable": True, "metadata": {}}]}, {}),
        ]
    )  # fmt: skip
    protocol = {"minReaderVersion": 3, "minWriterVersion": 7,
                "readerFeatures": ["variantType"], "writerFeatures": ["variantType"]}  # fmt: skip
    path.mkdir()
    _write_commit(path, 0, [{"protocol": protocol}, _metadata(schema, {})])
    for i in range(3):
        _write_commit(path, i + 1, [_add_file(path, _variant_rows(i * 8, 8), {})])


def _variant_bytes(path: Path) -> list[tuple[Any, ...]]:
    out = []
    for add in Table.open(str(path)).snapshot().add_actions():
        for row in pq.read_table(path / add.path).to_pylist():
            v, inner = row["v"], row["s"]["inner"] if row["s"] else None
            out.append((row["id"], v and (v["value"], v["metadata"]),
                        inner and (inner["value"], inner["metadata"])))  # fmt: skip
    return sorted(out, key=lambda r: r[0])


def test_variant_columns_are_carried_through_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "variant"
    _variant_table(path)
    expected = _variant_bytes(path)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_removed == 3, result.skipped
    assert Table.open(str(path)).snapshot().num_files == 1
    assert _variant_bytes(path) == expected  # every value and metadata byte for byte
    (add,) = Table.open(str(path)).snapshot().add_actions()
    stats = json.loads(add.stats or "{}")
    assert stats["nullCount"] == {"id": 0, "v": 6, "s": {"inner": 6, "n": 0}}
    assert set(stats["minValues"]) == {"id", "s"} and set(stats["minValues"]["s"]) == {"n"}
    assert "v" not in stats["maxValues"]


def test_shredded_variant_tables_are_refused_and_left_unchanged(table_copy: Any) -> None:
    path = table_copy("variant-stats-no-checkpoint")
    add = next(Table.open(str(path)).snapshot().add_actions())
    extra = f"part-{uuid.uuid4()}.c000.snappy.parquet"  # a second file, so there is a bin
    (path / extra).write_bytes((path / add.path).read_bytes())
    obj = {**add.to_json(), "path": extra}
    obj.pop("tags", None)
    _write_commit(path, 2, [{"add": obj}])
    before = sorted(p.name for p in path.rglob("*"))
    with pytest.raises(UnsupportedWriterFeatureError, match="variantShredding-preview") as info:
        optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert "variantShredding-preview" in info.value.features
    assert sorted(p.name for p in path.rglob("*")) == before
    assert Table.open(str(path)).snapshot().version == 2


def test_the_variant_stats_helper_counts_nulls_only() -> None:
    data = _variant_rows(0, 8)
    stats = json.loads(stats_for_table(data, opaque=[("v",), ("s", "inner")]))
    assert stats["nullCount"] == {"id": 0, "v": 2, "s": {"inner": 2, "n": 0}}
    assert stats["minValues"] == {"id": 0, "s": {"n": 0}}


def test_deltalake_reads_the_rewritten_variant_table_as_before(tmp_path: Path) -> None:
    path = tmp_path / "variant"
    _variant_table(path)
    before = oracle_read.read(path)
    assert before["rows"] == 24
    optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (before["rows"], before["digest"])
