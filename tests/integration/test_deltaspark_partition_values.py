"""Partition values that need escaping, through our maintenance of a delta-spark table
(issue 33.4, case 5).

A partition value lives in three spellings: the ``partitionValues`` string of each ``add``, the
directory delta-spark names after it (Hive's escaping: ``=``, ``%``, ``/``, ``:`` ... as ``%XX``,
a space and non-ASCII kept), and the file's ``path`` in the log, a URI, so that directory
percent-encoded once more (a space as ``%20``, ``%3D`` as ``%253D``). NULL is the directory
``__HIVE_DEFAULT_PARTITION__`` and a null ``partitionValues`` entry. Our OPTIMIZE writes new files
into such partitions, our checkpoint stores the values in its struct and map columns, our VACUUM
matches what it lists against the paths in the log: a spelling confused anywhere loses rows,
moves them to another partition, or deletes a live file.

delta-spark writes a table partitioned by a string (``a b``, ``x=y``, ``100%``, ``a/b``, ``é``,
``日本``, ``k:v``, NULL) and a date (a day, NULL) in three appends; our OPTIMIZE, checkpoint and
VACUUM follow, then delta-spark reads the table whole and each string partition by an equality
filter (partition pruning compares the filter with ``partitionValues``), writes to every
partition (one INSERT with a row for each, a DELETE of one whole partition and of some rows of
the NULL one) and reads again; our OPTIMIZE and VACUUM of that, and one more read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deltaspark import canon
from tests.deltaspark.client import DeltaSpark
from tests.integration.deltaspark_upkeep import step, table_ref

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(900)]

PARTS: list[str | None] = ["a b", "x=y", "100%", "a/b", "é", "日本", "k:v", None]
DAY = "2026-11-30"


def _literal(value: str | None) -> str:
    return "NULL" if value is None else "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _case(column: str) -> str:
    whens = " ".join(f"WHEN {i} THEN {_literal(v)}" for i, v in enumerate(PARTS))
    return f"CASE {column} % {len(PARTS)} {whens} END"


class Model:
    def __init__(self) -> None:
        self.rows: dict[int, dict[str, Any]] = {}

    def add(self, ids: range, s: str) -> None:
        for k in ids:
            self.rows[k] = {"id": k, "p": PARTS[k % len(PARTS)], "d": _day(k), "s": s}

    def expect(self, part: str | None = None, *, whole: bool = False) -> tuple[int, str]:
        rows = [r for r in self.rows.values() if whole or r["p"] == part]
        return len(rows), canon.digest(rows)


def _day(k: int) -> str | None:
    return None if k % 3 == 0 else DAY


def _insert(ref: str, ids: range, s: str) -> str:
    return (
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(2) */ id, {_case('id')}, "
        f"IF(id % 3 = 0, NULL, DATE '{DAY}'), '{s}' FROM range({ids.start}, {ids.stop}) AS r(id)"
    )


def _check(ds: DeltaSpark, path: Path, model: Model, when: str) -> None:
    """The whole table, and each non-null string partition by an equality filter."""
    whole = ds.submit("read", path=str(path))
    parts = {v: ds.submit("read", path=str(path), where=f"p = {_literal(v)}") for v in PARTS if v}
    nulls = ds.submit("read", path=str(path), where="p IS NULL")
    got = whole.result(timeout=600)
    assert (got["count"], got["digest"]) == model.expect(whole=True), f"{when}: the table"
    for value, fut in parts.items():
        got = fut.result(timeout=600)
        assert (got["count"], got["digest"]) == model.expect(value), f"{when}: p = {value!r}"
    got = nulls.result(timeout=600)
    assert (got["count"], got["digest"]) == model.expect(None), f"{when}: p IS NULL"


def test_escaped_partition_values_through_our_maintenance(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    ds, path = delta_spark, tmp_path / "parts"
    ref = table_ref(path)
    model = Model()
    ds.sql(
        f"CREATE TABLE {ref} (id BIGINT, p STRING, d DATE, s STRING) USING delta "
        "PARTITIONED BY (p, d)"
    )
    for i in range(3):
        ids = range(i * 48, (i + 1) * 48)
        ds.sql(_insert(ref, ids, f"w{i}"))
        model.add(ids, f"w{i}")
    dirs = {p.name for p in path.iterdir() if p.is_dir()}
    assert {"p=x%3Dy", "p=100%25", "p=a%2Fb", "p=日本", "p=__HIVE_DEFAULT_PARTITION__"} <= dirs

    optimized = step(ds, path, "optimize")
    assert optimized["numFilesRemoved"] >= 2 * len(PARTS) * 2, optimized  # >= 2 files each
    checkpoint = step(ds, path, "checkpoint")["version"]
    vacuumed = step(ds, path, "vacuum")
    # delta-spark starts from our checkpoint, with the values in its struct and map columns
    assert ds.call("log_segment", path=str(path))["checkpointVersion"] == checkpoint
    assert vacuumed["numDeleted"] >= optimized["numFilesRemoved"], vacuumed
    _check(ds, path, model, "after our OPTIMIZE, checkpoint and VACUUM")

    values = []
    for k, value in enumerate(PARTS):  # one row into each partition, in one INSERT
        new_id, day = 10_000 + k, None if k % 2 else DAY
        day_sql = "NULL" if day is None else f"DATE '{day}'"
        values.append(f"({new_id}, {_literal(value)}, {day_sql}, 'spark')")
        model.rows[new_id] = {"id": new_id, "p": value, "d": day, "s": "spark"}
    ds.sql(f"INSERT INTO {ref} VALUES {', '.join(values)}")
    ds.sql(f"DELETE FROM {ref} WHERE p = 'x=y'")
    ds.sql(f"DELETE FROM {ref} WHERE p IS NULL AND id % 2 = 0")
    model.rows = {
        k: r
        for k, r in model.rows.items()
        if r["p"] != "x=y" and not (r["p"] is None and k % 2 == 0)
    }
    _check(ds, path, model, "delta-spark's writes on our files")

    step(ds, path, "optimize")
    step(ds, path, "vacuum")
    _check(ds, path, model, "our OPTIMIZE and VACUUM of delta-spark's writes")
