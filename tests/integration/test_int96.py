"""INT96 timestamps outside the nanosecond range, everywhere the engine reads data files.

pyarrow reads INT96 as nanoseconds unless told otherwise, which covers only 1677-2262: a file
holding 9999-12-31 or 0001-01-01 (both legal Delta timestamps, written by Spark, Hive, Impala or
pyarrow's ``use_deprecated_int96_timestamps``) failed every read, so its bin was skipped forever,
a DELETE on it failed, row ids could not be listed. deltalake misreads these values itself
(9999-12-31 comes back as 1816-03-28), so the values are compared with the ones written.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import deltagen as g
from tests import feature_tables as ft
from tests import table_reads as tr
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.commit.row_tracking import stable_row_ids
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration

UTC = dt.UTC
LAST = dt.datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
FIRST = dt.datetime(1, 1, 1, tzinfo=UTC)
LEAP = dt.datetime(2024, 2, 29, 12, 0, 0, 123456, tzinfo=UTC)
EVERYTHING = OptimizeOptions(target_file_size=1 << 30, min_file_size=1 << 30)


def _values(root: Path) -> list[tuple[int, Any]]:
    return sorted((r["id"], r["ts"]) for r in tr.rows(tr.load(root)))


def _int96_commit(root: Path, version: int, name: str, values: list[Any], **extra: Any) -> None:
    data = pa.table(
        {
            "id": pa.array(range(version * 10, version * 10 + len(values)), pa.int64()),
            "ts": pa.array(values, pa.timestamp("us", "UTC")),
        }
    )
    g.write_commit(
        root, version, [g.commit_info(), ft.data_file(root, name, data, int96=True, **extra)]
    )


def test_optimize_keeps_int96_edge_values_exactly(tmp_path: Path) -> None:
    root = ft.build("int96_edges", tmp_path / "t")
    written = _values(root)
    assert (1, LAST) in written and (11, FIRST) in written and (2, LEAP) in written
    result = optimize(Table.open(str(root)), EVERYTHING, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1, result.skipped
    assert _values(root) == written
    (add,) = tr.load(root).files().to_pylist()
    parquet = pq.ParquetFile(root / add["path"])
    column = parquet.metadata.schema.column(1)
    assert (column.physical_type, str(column.logical_type)) == (
        "INT64",
        "Timestamp(isAdjustedToUTC=true, timeUnit=microseconds, is_from_converted_type=false, "
        "force_set_converted_type=false)",
    )
    stats = json.loads(add["stats"])
    # the maximum's bound cannot round up past 9999-12-31T23:59:59.999: no bound is written
    assert stats["minValues"]["ts"] == "0001-01-01T00:00:00.000Z"
    assert "ts" not in stats.get("maxValues", {})


def test_zorder_by_an_int96_column(tmp_path: Path) -> None:
    root = ft.build("int96_edges", tmp_path / "t")
    written = _values(root)
    policy = OptimizeOptions(target_file_size=1 << 30, min_file_size=1 << 30, z_order_by=("ts",))
    result = optimize(Table.open(str(root)), policy, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1
    assert _values(root) == written


def test_delete_with_deletion_vectors_on_int96_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))])
    table = Table.create(str(root), schema, (), {"delta.enableDeletionVectors": "true"})
    _int96_commit(root, 1, "a.parquet", [LAST, FIRST, LEAP])
    table.delete("ts > TIMESTAMP '9000-01-01 00:00:00'")
    assert _values(root) == [(11, FIRST), (12, LEAP)]
    (add,) = tr.load(root).files().to_pylist()
    assert add["deletionVector"] is not None  # rows marked, the file kept
    result = optimize(Table.open(str(root)), EVERYTHING, ArrowExecutor())
    assert result.error is None
    assert _values(root) == [(11, FIRST), (12, LEAP)]


def test_stable_row_ids_of_int96_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    schema = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", "UTC"))])
    table = Table.create(str(root), schema, (), {"delta.enableRowTracking": "true"})
    high = -1
    for version in (1, 2):
        extra = {"baseRowId": high + 1, "defaultRowCommitVersion": version}
        data = pa.table(
            {"id": pa.array([version, version + 10], pa.int64()), "ts": pa.array([LAST, FIRST])}
        )
        add = ft.data_file(root, f"f{version}.parquet", data, int96=True, **extra)
        high += 2
        domain = {
            "domainMetadata": {
                "domain": "delta.rowTracking",
                "configuration": json.dumps({"rowIdHighWaterMark": high}),
                "removed": False,
            }
        }
        g.write_commit(root, version, [g.commit_info(), add, domain])
    # the file's own types: INT96 says no time zone
    ids = stable_row_ids(table.snapshot(), ["id", "ts"]).to_pylist()
    naive_last, naive_first = LAST.replace(tzinfo=None), FIRST.replace(tzinfo=None)
    assert sorted((r["row_id"], r["id"], r["ts"]) for r in ids) == [
        (0, 1, naive_last),
        (1, 11, naive_first),
        (2, 2, naive_last),
        (3, 12, naive_first),
    ]
    result = optimize(Table.open(str(root)), EVERYTHING, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1
    after = stable_row_ids(table.snapshot(), ["id", "ts"]).to_pylist()  # now INT64, in UTC
    assert sorted((r["row_id"], r["id"], r["ts"].replace(tzinfo=None)) for r in after) == sorted(
        (r["row_id"], r["id"], r["ts"]) for r in ids
    )


def _timestamp_table(root: Path) -> Path:
    """Version 0 of a table of ``id`` and ``ts`` (a timestamp), written by hand."""
    ft.create(root, g.protocol(), [ft.field("id", "long"), ft.field("ts", "timestamp")])
    return root


def _spark_int96(spark: Any, where: Path, mode: str) -> Path:
    """A Parquet file Spark writes with INT96 timestamps in ``mode`` (CORRECTED or LEGACY)."""
    spark.conf.set("spark.sql.parquet.outputTimestampType", "INT96")
    spark.conf.set("spark.sql.parquet.int96RebaseModeInWrite", mode)
    try:
        frame = spark.sql(
            "SELECT CAST(id AS BIGINT) AS id, ts FROM VALUES "
            "(1, TIMESTAMP '9999-12-31 23:59:59.999999'), (2, TIMESTAMP '0001-01-01 00:00:00'), "
            "(3, TIMESTAMP '2024-02-29 12:00:00.123456') AS t(id, ts)"
        )
        frame.coalesce(1).write.mode("overwrite").parquet(str(where))
    finally:
        for key in ("outputTimestampType", "int96RebaseModeInWrite"):
            spark.conf.unset(f"spark.sql.parquet.{key}")
    (part,) = where.glob("part-*.parquet")
    return part


@pytest.fixture
def utc_spark(spark: Any) -> Iterator[Any]:
    """The session with its time zone at UTC (the literals and strings below are UTC)."""
    zone = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    yield spark
    spark.conf.set("spark.sql.session.timeZone", zone)


@pytest.mark.spark
def test_spark_written_int96_on_the_spark_executor(utc_spark: Any, tmp_path: Path) -> None:
    from txntable.maintenance.executor_spark import SparkExecutor

    spark = utc_spark

    root = _timestamp_table(tmp_path / "t")
    for version, mode in ((1, "CORRECTED"), (2, "CORRECTED")):
        part = _spark_int96(spark, tmp_path / f"spark{version}", mode)
        assert pq.ParquetFile(part).schema.column(1).physical_type == "INT96"
        target = root / f"s{version}.parquet"
        target.write_bytes(part.read_bytes())
        data = tr.parquet_file(str(target)).read()
        add = g.add(
            target.name, target.stat().st_size, stats=json.dumps({"numRecords": data.num_rows})
        )
        g.write_commit(root, version, [g.commit_info(), add])
    expected = sorted([(1, LAST), (2, FIRST), (3, LEAP)] * 2)
    assert _values(root) == expected
    result = optimize(Table.open(str(root)), EVERYTHING, SparkExecutor(spark=spark))
    assert result.error is None and result.bins_committed == 1, result.skipped
    assert _values(root) == expected
    # Spark reads the rewritten file (INT64 microseconds) as the values it wrote
    written = root / tr.load(root).files()["path"][0].as_py()
    back = spark.read.parquet(str(written)).selectExpr("id", "CAST(ts AS STRING) AS ts")
    assert sorted((r["id"], r["ts"]) for r in back.collect()) == sorted(
        [
            (1, "9999-12-31 23:59:59.999999"),
            (2, "0001-01-01 00:00:00"),
            (3, "2024-02-29 12:00:00.123456"),
        ]
        * 2
    )


@pytest.mark.spark
def test_spark_legacy_calendar_files_are_not_rewritten(utc_spark: Any, tmp_path: Path) -> None:
    spark = utc_spark
    root = _timestamp_table(tmp_path / "t")
    for version in (1, 2):
        part = _spark_int96(spark, tmp_path / f"legacy{version}", "LEGACY")
        assert b"org.apache.spark.legacyINT96" in (pq.ParquetFile(part).metadata.metadata or {})
        target = root / f"l{version}.parquet"
        target.write_bytes(part.read_bytes())
        g.write_commit(root, version, [g.commit_info(), g.add(target.name, target.stat().st_size)])
    before = {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()}
    result = optimize(Table.open(str(root)), EVERYTHING, ArrowExecutor())
    assert result.bins_committed == 0 and "LEGACY calendar" in (result.error or "")
    assert {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()} == before
