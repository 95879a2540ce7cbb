"""Row ids and row commit versions survive our maintenance of a table that combines row
tracking, deletion vectors, column mapping and partitions (issue 33.4, case 4).

delta-spark makes the table the way a user gets one: partitioned, column mapping by name,
deletion vectors, rows written first and row tracking switched on afterwards
(``ALTER TABLE SET TBLPROPERTIES``, which makes delta-spark assign the files already there their
``baseRowId`` in a backfill commit), then more appends, an UPDATE and a DELETE (vectors) and a
column rename. Every row's id (``_metadata.row_id``) and commit version
(``_metadata.row_commit_version``) are now fixed: a rewrite must carry them in the files it
writes (the materialized columns) because the new files' ``baseRowId`` and
``defaultRowCommitVersion`` cannot. Our Z-order OPTIMIZE (it rewrites every file of each
partition, purging the vectors), checkpoint, VACUUM and log cleanup follow; after the OPTIMIZE
and after the last step delta-spark must read the same rows with the same row ids and row commit
versions as before. Then delta-spark's own append and UPDATE must give new rows fresh ids (none
reused) and keep the updated rows' ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.deltaspark.client import DeltaSpark
from tests.deltaspark.support import age_log
from tests.integration.deltaspark_upkeep import step, table_ref
from txntable.engine.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(900)]

_TRACKED = (
    "SELECT id, p, x, label, _metadata.row_id AS row_id, "
    "_metadata.row_commit_version AS row_commit_version FROM {t}"
)


def _tracked(ds: DeltaSpark, path: Path) -> dict[int, dict[str, Any]]:
    rows = ds.call("query", sql=_TRACKED.format(t=table_ref(path)), want_rows=True)["rows"]
    by_id = {r["id"]: r for r in rows}
    assert len(by_id) == len(rows), "two rows with one id"
    ids = [r["row_id"] for r in rows]
    assert None not in ids and len(set(ids)) == len(ids), "a row id missing or reused"
    return by_id


def _insert(ref: str, start: int, n: int) -> str:
    return (
        f"INSERT INTO {ref} SELECT /*+ REPARTITION(2) */ id, IF(id % 2 = 0, 'even', 'odd'), "
        f"(id * 7919) % 101, CAST(id AS STRING) FROM range({start}, {start + n}) AS r(id)"
    )


def test_row_ids_survive_our_zorder_and_maintenance(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    ds, path = delta_spark, tmp_path / "tracked"
    ref = table_ref(path)
    for sql in (
        f"CREATE TABLE {ref} (id BIGINT, p STRING, x BIGINT, s STRING) USING delta "
        "PARTITIONED BY (p) TBLPROPERTIES ('delta.columnMapping.mode' = 'name', "
        "'delta.enableDeletionVectors' = 'true')",
        _insert(ref, 0, 100),
        _insert(ref, 100, 100),
        f"ALTER TABLE {ref} SET TBLPROPERTIES ('delta.enableRowTracking' = 'true')",
        _insert(ref, 200, 100),
        f"UPDATE {ref} SET x = x + 1000 WHERE id % 9 = 0",
        f"DELETE FROM {ref} WHERE id % 10 = 3",
        f"ALTER TABLE {ref} RENAME COLUMN s TO label",
    ):
        ds.sql(sql)
    snapshot = Table.open(str(path)).snapshot()
    adds = list(snapshot.add_actions())
    assert all(a.base_row_id is not None for a in adds), "delta-spark backfilled no row ids"
    assert any(a.deletion_vector is not None for a in adds)
    before = _tracked(ds, path)
    assert len(before) == 300 - 30
    # the backfill's (or the first appends'), the third append's, the UPDATE's
    assert len({r["row_commit_version"] for r in before.values()}) >= 3, before

    optimized = step(ds, path, "optimize", "--executor", "arrow", "--zorder-by", "x,id")
    assert optimized["numFilesRemoved"] >= 6 and optimized["numFilesAdded"] >= 2, optimized
    adds = list(Table.open(str(path)).snapshot().add_actions())
    assert not [a.path for a in adds if a.deletion_vector is not None], "a vector survived"
    assert _tracked(ds, path) == before, "our Z-order changed rows, row ids or commit versions"

    step(ds, path, "checkpoint")
    step(ds, path, "vacuum")
    age_log(path, days=3)
    assert step(ds, path, "cleanup")["numDeleted"] > 0
    assert _tracked(ds, path) == before, "after checkpoint, VACUUM and log cleanup"

    ds.sql(_insert(ref, 1000, 10).replace(", CAST(id AS STRING)", ", 'new'"))
    ds.sql(f"UPDATE {ref} SET label = 'changed' WHERE id = 1")
    after = _tracked(ds, path)
    latest = Table.open(str(path)).version()
    old_ids = {r["row_id"] for r in before.values()}
    new = [after[k] for k in range(1000, 1010)]
    assert not {r["row_id"] for r in new} & old_ids, "delta-spark reused a row id after ours"
    assert after[1]["row_id"] == before[1]["row_id"]
    assert after[1]["row_commit_version"] == latest and after[1]["label"] == "changed"
    unchanged = {k: r for k, r in after.items() if k != 1 and k < 1000}
    assert unchanged == {k: r for k, r in before.items() if k != 1}
