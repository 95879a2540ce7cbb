"""delta-spark, Delta Lake's reference implementation, reads everything we write (issue 21.2).

Each story builds one table with our engine and our ``txntable`` command, step by step: appends,
DELETE by partition (whole files) and by data column (deletion vectors), OPTIMIZE bin-pack,
Z-order (Spark executor) and liquid clustering, a deletion-vector purge, classic and multi-part
checkpoints, VACUUM and log cleanup. After every step delta-spark must read, at the latest
version and at every version still retained (time travel), exactly the rows the test wrote
(digests of what the test itself wrote, never of a reader under test), and ``DESCRIBE HISTORY``
must list every commit in the log with the operation, read version and blind-append flag we
recorded. Then delta-spark's own next operations (append, MERGE, OPTIMIZE, VACUUM) must succeed
on top of ours, and our engine and deltalake must read the result delta-spark says it wrote.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from tests import oracle_read
from tests.deltaspark import canon
from tests.deltaspark.client import DeltaSpark
from tests.deltaspark.support import (
    Expected,
    LogGuard,
    age_log,
    check_history,
    check_reads,
    commit_versions,
    retained_versions,
    txntable,
)
from tests.integration.optimize_helpers import batch as typed_batch
from txntable.engine.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark]

SCHEMA = pa.schema(
    [("id", pa.int64()), ("part", pa.string()), ("v", pa.float64()), ("s", pa.string())]
)


def make_rows(start: int, n: int, parts: int = 3) -> list[dict[str, Any]]:
    return [
        {"id": k, "part": f"p{k % parts}", "v": k / 8, "s": f"s{k}"}
        for k in range(start, start + n)
    ]


class Story:
    """One table, the rows it must hold now, and the checks run after each step."""

    def __init__(self, ds: DeltaSpark, path: Path) -> None:
        self.ds = ds
        self.path = path
        self.rows: dict[int, dict[str, Any]] = {}
        self.expected = Expected()
        self.checked = -1  # the newest version delta-spark has read

    def version(self) -> int:
        return Table.open(str(self.path)).version()

    def record(self) -> int:
        """The latest version holds ``self.rows``."""
        version = self.version()
        self.expected.record(version, canon.digest(self.rows.values()), len(self.rows))
        return version

    def maintained(self, before: int, commits: int = 1) -> int:
        """The step's ``commits`` commits after ``before`` changed no row."""
        version = self.version()
        assert version == before + commits, f"expected {commits} commits after {before}: {version}"
        for v in range(before + 1, version + 1):
            self.expected.same_as(v, v - 1)
        return version

    def check(self, step: str, *, every: bool = False) -> list[int]:
        """delta-spark reads the versions made since the last check (``every``: all retained
        versions) as expected, and its history lists every commit."""
        versions = check_reads(
            self.ds, self.path, self.expected, step, every=every, since=self.checked + 1
        )
        self.checked = max(self.checked, *versions)
        check_history(self.ds, self.path, step)
        return versions

    def append(self, table: Table, rows: list[dict[str, Any]]) -> None:
        table.append(pa.Table.from_pylist(rows, schema=SCHEMA))
        self.rows.update({r["id"]: r for r in rows})
        self.record()


def test_dv_story_delta_spark_reads_every_version(delta_spark: DeltaSpark, tmp_path: Path) -> None:
    """Appends, DELETEs with and without deletion vectors, OPTIMIZE, a DV purge, classic and
    multi-part checkpoints, VACUUM and log cleanup, then delta-spark's own writes on top.

    Appends, DELETEs and OPTIMIZE only add commits: after them delta-spark reads the new
    versions, and ``LogGuard`` proves no earlier log file changed. Checkpoints, VACUUM and log
    cleanup change what older versions are read from: after each, delta-spark reads every
    retained version (a time-travel read costs delta-spark several small Spark jobs, so the
    suite spends them where an older version can break)."""
    path = tmp_path / "dv"
    story = Story(delta_spark, path)
    table = Table.create(
        str(path),
        SCHEMA,
        partition_by=["part"],
        properties={"delta.enableDeletionVectors": "true"},
    )
    story.record()
    for i in range(2):
        story.append(table, make_rows(i * 60, 60))
    story.check("appends")

    guard = LogGuard(path)
    table = Table.open(str(path))
    assert table.delete("part = 'p0'") is not None  # whole files: no deletion vector
    story.rows = {k: r for k, r in story.rows.items() if r["part"] != "p0"}
    story.record()
    assert not _vectors(path), "a partition DELETE wrote deletion vectors"
    assert table.delete("id >= 100") is not None  # a data column: deletion vectors
    story.rows = {k: r for k, r in story.rows.items() if k < 100}
    story.record()
    assert _vectors(path), "a data-column DELETE on a DV table wrote no deletion vector"
    guard.check("deletes")
    story.check("deletes")

    guard = LogGuard(path)
    before = story.version()
    compacted = txntable("optimize", str(path), "--executor", "arrow")
    assert compacted.doc
    assert compacted.doc["numFilesRemoved"] > compacted.doc["numFilesAdded"] > 0
    story.maintained(before)
    guard.check("optimize bin-pack")
    story.check("optimize bin-pack")

    guard = LogGuard(path)
    table = Table.open(str(path))
    assert table.delete("id < 20") is not None
    story.rows = {k: r for k, r in story.rows.items() if k >= 20}
    story.record()
    assert _vectors(path)
    before = story.version()
    txntable("optimize", str(path), "--executor", "arrow", "--purge-deleted-percent", "1")
    story.maintained(before)
    assert not _vectors(path), "the purge left deletion vectors in the latest version"
    guard.check("deletion-vector purge")
    story.check("deletion-vector purge")

    guard = LogGuard(path)
    classic = txntable("checkpoint", str(path))
    assert classic.doc and not classic.doc["parts"]
    story.append(Table.open(str(path)), make_rows(500, 12))
    multi = txntable("checkpoint", str(path), "--part-size", "1")
    assert multi.doc and multi.doc["parts"] >= 2
    guard.check("checkpoints")
    story.check("classic and multi-part checkpoints", every=True)

    guard = LogGuard(path)
    versions_before = retained_versions(path)
    before = story.version()
    txntable("vacuum", str(path), "--retention", "interval 0 hours", "--force")
    story.maintained(before, commits=2)  # VACUUM START and VACUUM END, as Spark records them
    guard.check("vacuum")
    after_vacuum = story.check("vacuum", every=True)
    assert after_vacuum[-1] == story.version() and len(after_vacuum) < len(versions_before)

    age_log(path, days=3)
    guard = LogGuard(path)
    cleaned = txntable("cleanup", str(path), "--retention", "interval 1 days")
    assert cleaned.doc and cleaned.doc["checkpointVersion"] == multi.doc["version"]
    guard.check("log cleanup", deletes=True)
    assert commit_versions(path)[0] == multi.doc["version"]
    story.check("log cleanup", every=True)

    _delta_spark_writes_on_top(story)


def _vectors(path: Path) -> list[str]:
    snapshot = Table.open(str(path)).snapshot()
    return [a.path for a in snapshot.add_actions() if a.deletion_vector is not None]


def _delta_spark_writes_on_top(story: Story) -> None:
    """delta-spark's append, MERGE, OPTIMIZE and VACUUM succeed on our table; our engine and
    deltalake read what it wrote."""
    ds, ref = story.ds, f"delta.`{story.path}`"
    ds.sql(f"INSERT INTO {ref} VALUES (900, 'p1', 1.5, 'spark'), (901, 'p2', 2.5, 'spark')")
    story.rows.update(
        {
            900: {"id": 900, "part": "p1", "v": 1.5, "s": "spark"},
            901: {"id": 901, "part": "p2", "v": 2.5, "s": "spark"},
        }
    )
    story.record()
    some = sorted(story.rows)[:3]
    source = ", ".join(f"({k}, 'merged')" for k in [*some, 950])
    ds.sql(
        f"MERGE INTO {ref} t USING (SELECT * FROM VALUES {source} AS s(id, s)) s "
        "ON t.id = s.id WHEN MATCHED THEN UPDATE SET t.s = s.s "
        "WHEN NOT MATCHED THEN INSERT (id, part, v, s) VALUES (s.id, 'p1', 0.0, s.s)"
    )
    for k in some:
        story.rows[k] = {**story.rows[k], "s": "merged"}
    story.rows[950] = {"id": 950, "part": "p1", "v": 0.0, "s": "merged"}
    story.record()
    before = story.version()
    ds.sql(f"OPTIMIZE {ref}")
    ds.sql(f"VACUUM {ref} RETAIN 0 HOURS")
    story.maintained(before, commits=story.version() - before)
    story.check("delta-spark append, MERGE, OPTIMIZE, VACUUM on top")
    latest = story.version()
    assert Table.open(str(story.path)).snapshot().version == latest
    theirs = oracle_read.read(story.path)
    assert (theirs["rows"], theirs["digest"]) == (
        story.expected.counts[latest],
        story.expected.digests[latest],
    ), "deltalake reads other rows than delta-spark wrote"


def test_zorder_spark_executor_typed_rows(delta_spark: DeltaSpark, tmp_path: Path) -> None:
    """Every column type our writer writes (structs, lists, maps, decimals, binary, dates,
    timestamps, nulls), compacted with Z-order by the Spark executor: delta-spark reads the
    same values at every version."""
    path = tmp_path / "typed"
    expected = Expected()
    written: list[dict[str, Any]] = []
    table = None
    for i in range(4):
        data = typed_batch(i * 40, 40).drop_columns(["p"])
        if table is None:
            table = Table.create(str(path), data.schema)
            expected.record(table.version(), canon.digest([]), 0)
        table.append(data)
        written.extend(canon.rows(data))
        expected.record(table.version(), canon.digest(written), len(written))
    assert table is not None
    before = table.version()
    done = txntable("optimize", str(path), "--executor", "spark", "--zorder-by", "id,f64")
    assert done.doc and done.doc["numFilesAdded"] >= 1
    expected.same_as(before + 1, before)
    check_reads(delta_spark, path, expected, "z-order", every=False, since=before)
    history = check_history(delta_spark, path, "z-order (spark executor)")
    latest = next(r for r in history if r["version"] == before + 1)
    assert latest["operation"] == "OPTIMIZE"
    assert json.loads(dict(latest["operationParameters"])["zOrderBy"]) == ["id", "f64"]


def test_liquid_clustering_ours_then_theirs(delta_spark: DeltaSpark, tmp_path: Path) -> None:
    """A table delta-spark clusters (CLUSTER BY), appended to and clustered by us: delta-spark
    reads the same rows, still sees its clustering columns and clusters on top of ours."""
    path = tmp_path / "clustered"
    ref = f"delta.`{path}`"
    delta_spark.sql(
        f"CREATE TABLE {ref} (id BIGINT, x BIGINT, s STRING) USING delta CLUSTER BY (x)"
    )
    expected = Expected()
    expected.record(0, canon.digest([]), 0)
    schema = pa.schema([("id", pa.int64()), ("x", pa.int64()), ("s", pa.string())])
    rng = random.Random(21)
    rows: list[dict[str, Any]] = []
    table = Table.open(str(path))
    for i in range(6):
        new = [{"id": i * 50 + k, "x": rng.randrange(10_000), "s": f"r{k}"} for k in range(50)]
        table.append(pa.Table.from_pylist(new, schema=schema))
        rows.extend(new)
        expected.record(table.version(), canon.digest(rows), len(rows))
    before = table.version()
    done = txntable("optimize", str(path), "--executor", "arrow")
    assert done.doc and done.doc["numFilesAdded"] >= 1
    expected.same_as(before + 1, before)
    snapshot = Table.open(str(path)).snapshot()
    assert {a.clustering_provider for a in snapshot.add_actions()} == {"liquid"}
    check_reads(delta_spark, path, expected, "our clustering OPTIMIZE", every=False, since=before)
    check_history(delta_spark, path, "our clustering OPTIMIZE")
    detail = delta_spark.sql(f"DESCRIBE DETAIL {ref}")[0]
    assert detail["clusteringColumns"] == ["x"]
    delta_spark.sql(f"INSERT INTO {ref} VALUES (10000, 5, 'spark')")
    rows.append({"id": 10000, "x": 5, "s": "spark"})
    delta_spark.sql(f"OPTIMIZE {ref}")
    latest = Table.open(str(path)).version()
    for v in range(before + 2, latest + 1):
        expected.record(v, canon.digest(rows), len(rows))
    check_reads(delta_spark, path, expected, "their OPTIMIZE", every=False, since=latest)
    assert delta_spark.sql(f"DESCRIBE DETAIL {ref}")[0]["clusteringColumns"] == ["x"]
