"""OPTIMIZE purges the deletion vectors of files whose ``add`` has no ``numRecords`` (issue 33.3),
on tables delta-spark wrote the way a user gets them.

delta-spark 4.4 computes statistics for every file a DELETE gives a vector (even with
``spark.databricks.delta.stats.collect=false``), so the commits always carry ``numRecords``; a
checkpoint need not. A table with ``delta.checkpoint.writeStatsAsJson=false`` and
``delta.checkpoint.writeStatsAsStruct=false`` (both documented table properties) gets checkpoints
whose ``add`` rows have no statistics at all, and every reader that starts from such a
checkpoint sees the files with vectors and no row count. Two tables of that kind:

* ``table``: partitioned, three files per partition, a DELETE leaving a vector (``u``, in a
  file) on each, then delta-spark's checkpoint;
* ``clone``: its SHALLOW CLONE, whose adds name the source's files by absolute URI and whose
  vectors become absolute-path ones (``p``), checkpointed by delta-spark too (made before the
  source's checkpoint: delta-spark refuses to commit an add with a vector and no ``numRecords``,
  ``DELTA_DELETION_VECTOR_MISSING_NUM_RECORDS``, so a clone cannot copy such an add).

``--min-file-size 1`` leaves no file small enough to compact by size, so only the purge rule (a
vector hiding at least 5% of its file's rows) can select them. Before the footer counts nothing
was planned and every vector stayed. After our OPTIMIZE delta-spark and deltalake (QueryBuilder,
which applies vectors, in a child process) read the rows they read before, every vector is gone
and the new files' ``numRecords`` add up to the rows kept.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests import oracle_read
from tests.deltaspark.client import DeltaSpark
from tests.deltaspark.support import txntable
from txntable.engine.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(1200)]

_NO_CHECKPOINT_STATS = (
    "'delta.enableDeletionVectors' = 'true', "
    "'delta.checkpoint.writeStatsAsJson' = 'false', "
    "'delta.checkpoint.writeStatsAsStruct' = 'false'"
)


@pytest.fixture(scope="module")
def tables(delta_spark: DeltaSpark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("dv-no-num-records")
    table, clone = root / "table", root / "clone"
    for sql in (
        f"CREATE TABLE delta.`{table}` (id BIGINT, s STRING, p STRING) USING delta "
        f"PARTITIONED BY (p) TBLPROPERTIES ({_NO_CHECKPOINT_STATS})",
        f"INSERT INTO delta.`{table}` SELECT /*+ REPARTITION(3) */ id, CAST(id AS STRING), "
        "IF(id % 2 = 0, 'even', 'odd') FROM range(0, 6000) AS r(id)",
        f"DELETE FROM delta.`{table}` WHERE id % 10 IN (0, 1)",
    ):
        delta_spark.sql(sql)
    # cloned before the source's checkpoint: delta-spark refuses to commit an add with a vector
    # and no numRecords (DELTA_DELETION_VECTOR_MISSING_NUM_RECORDS), which is what a clone of
    # the checkpointed source would copy
    delta_spark.sql(f"CREATE TABLE delta.`{clone}` SHALLOW CLONE delta.`{table}`")
    for path in (table, clone):
        delta_spark.call("checkpoint", path=str(path))
    return {"table": table, "clone": clone}


def _commit(path: Path, version: int) -> list[dict[str, Any]]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.mark.parametrize(("name", "storage_type"), [("table", "u"), ("clone", "p")])
def test_vectors_without_num_records_are_purged(
    delta_spark: DeltaSpark, tables: dict[str, Path], name: str, storage_type: str
) -> None:
    path = tables[name]
    spark_before = delta_spark.read(path)
    ours_before = oracle_read.read(path)
    assert spark_before["count"] == ours_before["rows"] == 4800
    dv_adds = [a for a in Table.open(str(path)).snapshot().add_actions() if a.deletion_vector]
    assert len(dv_adds) == 6, [a.path for a in dv_adds]  # 3 files in each of 2 partitions
    assert {a.deletion_vector.storage_type for a in dv_adds if a.deletion_vector} == {storage_type}
    assert not any(a.stats for a in dv_adds), "the checkpoint was written with statistics"
    deleted = sum(a.deletion_vector.cardinality for a in dv_adds if a.deletion_vector)

    done = txntable("optimize", str(path), "--executor", "arrow", "--min-file-size", "1")
    doc = done.doc
    assert doc is not None and doc["error"] is None and not doc["skipped"], done.stdout
    assert doc["numFilesRemoved"] == 6, doc

    live = list(Table.open(str(path)).snapshot().add_actions())
    assert not [a.path for a in live if a.deletion_vector]  # every vector purged
    lines = [line for v in doc["commits"] for line in _commit(path, v)]
    metrics = [line["commitInfo"]["operationMetrics"] for line in lines if "commitInfo" in line]
    assert sum(int(m["numDeletionVectorsRemoved"]) for m in metrics) == 6
    written = sum(json.loads(line["add"]["stats"])["numRecords"] for line in lines if "add" in line)
    assert written == 4800 and deleted == 1200
    spark_after = delta_spark.read(path)
    assert (spark_after["count"], spark_after["digest"]) == (4800, spark_before["digest"])
    ours_after = oracle_read.read(path)
    assert (ours_after["rows"], ours_after["digest"]) == (4800, ours_before["digest"])
