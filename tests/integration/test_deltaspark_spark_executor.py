"""A bare ``txntable optimize``, which rewrites on Spark, on a table delta-spark wrote with
deletion vectors, column mapping and row tracking (issue 33.4, case 6).

The other delta-spark stories compact with ``--executor arrow`` (no JVM, cheap); a user who gives
no executor gets the Spark one (``local[2]``), a different writer of the new files: Spark tasks
reading the old files by their physical column names and applying their deletion vectors. The
table: partitioned, row tracking, column mapping by name with a renamed and a dropped column and
one added later (so the physical names differ from the logical ones and old files lack a
column), deletion vectors from a DELETE and an UPDATE. After our bare OPTIMIZE (purging the
vectors) and checkpoint delta-spark must read the rows it read before with the same row ids and
row commit versions, and its DELETE on the files we wrote must delete just its rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deltaspark.client import DeltaSpark
from tests.integration.deltaspark_upkeep import step, table_ref
from txntable.engine.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(900)]


_COLUMNS = "*, _metadata.row_id AS row_id, _metadata.row_commit_version AS row_commit_version"


def _by_id(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda r: int(r["id"]))


def test_bare_optimize_runs_on_spark_and_keeps_delta_sparks_rows(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    ds, path = delta_spark, tmp_path / "spark-executor"
    ref = table_ref(path)
    for sql in (
        f"CREATE TABLE {ref} (id BIGINT, a STRING, b INT, p STRING) USING delta "
        "PARTITIONED BY (p) TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.enableDeletionVectors' = 'true', 'delta.enableRowTracking' = 'true')",
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(3) */ id, CAST(id AS STRING), "
        "CAST(id AS INT), IF(id % 2 = 0, 'even', 'odd') FROM range(0, 300) AS r(id)",
        f"ALTER TABLE {ref} RENAME COLUMN a TO renamed",
        f"ALTER TABLE {ref} DROP COLUMN b",
        f"ALTER TABLE {ref} ADD COLUMN c DOUBLE",
        f"INSERT INTO {ref} (id, renamed, p, c) SELECT /*+ REPARTITION(3) */ id, "
        "CAST(id AS STRING), IF(id % 2 = 0, 'even', 'odd'), id / 4 FROM range(300, 600) AS r(id)",
        f"DELETE FROM {ref} WHERE id % 10 = 0",
        f"UPDATE {ref} SET renamed = 'updated' WHERE id % 10 = 1",
    ):
        ds.sql(sql)
    adds = list(Table.open(str(path)).snapshot().add_actions())
    assert sum(a.deletion_vector is not None for a in adds) >= 6
    expected = ds.read(path, columns=_COLUMNS, want_rows=True)
    assert expected["count"] == 540

    optimized = step(ds, path, "optimize", "--purge-deleted-percent", "1")
    assert optimized["executor"] == "spark", optimized
    assert optimized["numFilesRemoved"] > optimized["numFilesAdded"] > 0, optimized
    adds = list(Table.open(str(path)).snapshot().add_actions())
    assert not [a.path for a in adds if a.deletion_vector is not None], "a vector survived"

    step(ds, path, "checkpoint")  # delta-spark reads our OPTIMIZE's files from our checkpoint
    assert ds.call("log_segment", path=str(path))["checkpointVersion"] == optimized["version"]
    got = ds.read(path, columns=_COLUMNS, want_rows=True)
    assert _by_id(got["rows"]) == _by_id(expected["rows"]), "rows, row ids or commit versions"

    ds.sql(f"DELETE FROM {ref} WHERE id IN (5, 306)")
    adds = list(Table.open(str(path)).snapshot().add_actions())
    assert sum(a.deletion_vector is not None for a in adds) == 2, "vectors on the files we wrote"
    got = ds.read(path, columns=_COLUMNS, want_rows=True)
    want = [r for r in expected["rows"] if r["id"] not in (5, 306)]
    assert _by_id(got["rows"]) == _by_id(want)
