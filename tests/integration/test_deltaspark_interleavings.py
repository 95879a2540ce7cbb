"""Our OPTIMIZE against delta-spark's commits, one exact interleaving at a time.

The seeded races (``test_deltaspark_races.py``) rarely make the two meet at a commit. Here every
meeting is forced (``deltaspark_interleave``): our OPTIMIZE job stops after rewriting its bins,
either before it checks its inputs against the latest version (``optimize:rewritten``) or with
its transaction built, right before the commit (``optimize:committing``, where only the engine's
conflict checker stands between delta-spark's commit and ours); delta-spark commits one operation
on the same table; our job goes on. Each table is small and made by delta-spark: two bins (one per
partition, or two files each on an unpartitioned table), deletion vectors on or off.

Delta's rules, which every case holds the outcome to: OPTIMIZE commits ``dataChange=false``
removes and adds only, so it runs at SnapshotIsolation and a concurrent append never conflicts
with it; a writer that removed (or gave a deletion vector to) a file a bin compacts makes that
bin lose, never the others, and never brings a deleted row back; a metadata change makes the
batch's commit fail (``MetadataChangedException``), after which a changed schema stops the run
with nothing committed and any other change is absorbed. After each case the rows are held to
the expected set by delta-spark, deltalake and our reader, DESCRIBE HISTORY parses every commit,
and a further delta-spark write lands on top.

The reverse direction (delta-spark's transaction reads, our OPTIMIZE commits, delta-spark
commits) is at the end of the file.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.deltaspark.client import DeltaSpark, DeltaSparkError
from tests.integration.deltaspark_interleave import (
    Gate,
    JobResult,
    Rows,
    check_table,
    commit_info,
    copy_table,
    make_template,
    operations,
    paused_optimize,
    run_optimize,
    sql_table,
)
from tests.table_reads import load, rows
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.table import Table
from txntable.maintenance.optimize import plan

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(600)]

#: table variants: (partitioned, deletion vectors)
VARIANTS = {
    "part-dv": (True, True),
    "part": (True, False),
    "flat-dv": (False, True),
    "flat": (False, False),
}
#: with the transaction built, right before the commit: only the engine's conflict checker
#: judges what lands here
COMMITTING = "optimize:committing"
#: after the rewrite, before the job checks its inputs against the latest version: the job's own
#: check judges what lands here (test_optimize_concurrency.py lands deltalake's schema and
#: property changes there; here: a deletion vector delta-spark replaced, which deltalake cannot)
REWRITTEN = "optimize:rewritten"


@pytest.fixture(scope="module")
def templates(delta_spark: DeltaSpark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("interleave-templates")
    delta_spark.call("register_gate")
    return {
        name: make_template(delta_spark, root / name, partitioned=part, dv=dv)
        for name, (part, dv) in VARIANTS.items()
    }


def job_args(variant: str) -> tuple[str, ...]:
    """Two bins either way: one per partition, or two files each on an unpartitioned table."""
    return () if VARIANTS[variant][0] else ("--max-files-per-bin", "2")


def interleave(
    ds: DeltaSpark,
    templates: dict[str, Path],
    tmp_path: Path,
    variant: str,
    point: str,
    their_op: Callable[[str, Path], Any],
) -> tuple[Path, JobResult]:
    """A copy of the variant's table; our job stops at ``point``; delta-spark runs
    ``their_op(table_sql, path)``; our job goes on to its end."""
    path = copy_table(templates[variant], tmp_path / "t")
    with paused_optimize(path, point, tmp_path, *job_args(variant)) as job:
        their_op(sql_table(path), path)
        result = job.resume()
    assert result.code == 0, (result.doc, result.stderr[-2000:])
    doc = result.doc
    assert doc["error"] is None and doc["binsPlanned"] == 2, doc
    assert doc["binsCommitted"] + doc["binsSkipped"] == 2, doc
    return path, result


def conflicts(result: JobResult) -> dict[str, int]:
    found: dict[str, int] = result.doc["engineMetrics"]["conflicts"]
    return found


def ours(path: Path, result: JobResult) -> list[dict[str, Any]]:
    """Our OPTIMIZE commits' commitInfo."""
    return [commit_info(path, v) for v in result.doc["commits"]]


def sql(statement: str) -> Callable[[DeltaSpark], Callable[[str, Path], Any]]:
    def bind(ds: DeltaSpark) -> Callable[[str, Path], Any]:
        return lambda table, _path: ds.sql(statement.format(t=table))

    return bind


# -- a blind append, a checkpoint: no conflict --------------------------------------------------


def test_append_into_a_partition_being_compacted(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path
) -> None:
    point = COMMITTING
    op = sql("INSERT INTO {t} VALUES (100, 'a', 1000), (101, 'a', 1010)")(delta_spark)
    path, result = interleave(delta_spark, templates, tmp_path, "part-dv", point, op)
    assert result.doc["binsCommitted"] == 2 and conflicts(result) == {}, result.doc
    (info,) = ours(path, result)
    assert info["isolationLevel"] == "SnapshotIsolation" and info["readVersion"] == 0, info
    # the append took the version our first write tried; the engine found no conflict and
    # wrote the same transaction again (SnapshotIsolation: appends never conflict)
    assert info["txntableAttempt"] == 2 and result.pauses == 1
    assert operations(path) == ["CREATE TABLE AS SELECT", "WRITE", "OPTIMIZE"]
    expected = Rows()
    expected.add({"id": 100, "p": "a", "v": 1000}, {"id": 101, "p": "a", "v": 1010})
    check_table(delta_spark, path, expected, f"append at {point}")


def test_checkpoint_at_the_pause_is_no_conflict(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path
) -> None:
    def checkpoint(_table: str, path: Path) -> None:
        delta_spark.call("checkpoint", path=str(path))

    path, result = interleave(delta_spark, templates, tmp_path, "part", COMMITTING, checkpoint)
    assert (path / "_delta_log" / f"{0:020d}.checkpoint.parquet").exists()
    assert result.doc["binsCommitted"] == 2 and conflicts(result) == {}, result.doc
    (info,) = ours(path, result)
    assert info["txntableAttempt"] == 1 and info["readVersion"] == 0
    check_table(delta_spark, path, Rows(), "checkpoint")


# -- writers that remove a file of one bin: that bin loses, the other commits -------------------

#: (variant, statement, change to the expected rows, the partition of the lost bin)
REMOVERS: dict[str, tuple[str, str, Callable[[Rows], None], str | None]] = {
    "delete-copy-on-write": ("flat", "DELETE FROM {t} WHERE id = 5", lambda r: r.delete(5), None),
    "delete-dv": ("part-dv", "DELETE FROM {t} WHERE id = 4", lambda r: r.delete(4), "a"),
    "update-dv": (
        "flat-dv",
        "UPDATE {t} SET v = -1 WHERE id = 7",
        lambda r: r.set(7, v=-1),
        None,
    ),
    "merge": (
        "part",
        "MERGE INTO {t} AS t USING (SELECT 9 AS id, -9 AS v) AS s ON t.id = s.id "
        "WHEN MATCHED THEN UPDATE SET v = s.v",
        lambda r: r.set(9, v=-9),
        "b",
    ),
    "insert-overwrite-partition": (
        "part",
        "INSERT OVERWRITE {t} PARTITION (p = 'a') SELECT 200 AS id, 2000 AS v",
        lambda r: r.replace_partition("a", {"id": 200, "p": "a", "v": 2000}),
        "a",
    ),
    "replace-where": (
        "part-dv",
        "INSERT INTO {t} REPLACE WHERE p = 'b' SELECT 201 AS id, 'b' AS p, 2010 AS v",
        lambda r: r.replace_partition("b", {"id": 201, "p": "b", "v": 2010}),
        "b",
    ),
}


#: the writers that mark rows deleted in a deletion vector instead of removing the file
DV_WRITERS = {"delete-dv", "update-dv"}
#: every case where only the engine's conflict checker can catch it; where the job's own input
#: check catches it first, a replaced deletion vector
REMOVER_RUNS = [(case, COMMITTING) for case in sorted(REMOVERS)] + [("delete-dv", REWRITTEN)]


@pytest.mark.parametrize(("case", "point"), REMOVER_RUNS)
def test_writer_removing_a_file_of_one_bin(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path, case: str, point: str
) -> None:
    variant, statement, change, partition = REMOVERS[case]
    path, result = interleave(
        delta_spark, templates, tmp_path, variant, point, sql(statement)(delta_spark)
    )
    doc = result.doc
    assert doc["binsCommitted"] == 1 and doc["binsSkipped"] == 1, doc
    (lost,) = doc["skipped"]
    if case in DV_WRITERS:  # the file stays, with a new deletion vector
        assert lost["reason"].startswith("rows deleted from inputs concurrently"), lost
    else:
        assert lost["reason"] == "inputs removed concurrently", lost
    if partition is not None:
        assert lost["partitionValues"] == {"p": partition}, lost
    (info,) = ours(path, result)
    if point == COMMITTING:
        # the engine's conflict checker refused the batch; the job re-checked its inputs,
        # dropped the bin that lost and committed the other in a new transaction
        assert conflicts(result) == {"ConcurrentDeleteReadException": 1}, doc
        assert result.pauses == 2 and info["readVersion"] == 1
    else:
        assert conflicts(result) == {} and result.pauses == 1 and info["readVersion"] == 1
    assert operations(path)[-1] == "OPTIMIZE"
    expected = Rows()
    change(expected)
    check_table(delta_spark, path, expected, f"{case} at {point}")


def test_delete_in_another_bins_file_while_a_batch_commits_is_no_conflict(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path
) -> None:
    """One bin per batch: delta-spark deletes a row of the second bin's file while the first
    batch commits. Delta's OPTIMIZE records as read only the files it compacts
    (``trackFilesRead``), so the first batch has no conflict and commits in its own transaction;
    the second bin is dropped by the input check."""
    path = copy_table(templates["flat"], tmp_path / "t")
    options = OptimizeOptions(max_files_per_bin=2, partial_commit_size=1)
    _first, second = plan(Table.open(str(path)), options).batches()
    victim = pq.read_table(path / second[0].paths[0], columns=["id"]).column("id")[0].as_py()
    with paused_optimize(
        path, "optimize:committing", tmp_path, "--max-files-per-bin", "2", "--commit-every", "1"
    ) as job:
        delta_spark.sql(f"DELETE FROM {sql_table(path)} WHERE id = {victim}")
        result = job.resume()
    doc = result.doc
    assert result.code == 0 and doc["binsCommitted"] == 1 and doc["binsSkipped"] == 1, doc
    assert doc["skipped"][0]["reason"] == "inputs removed concurrently", doc
    assert conflicts(result) == {}, doc
    (info,) = ours(path, result)
    assert info["readVersion"] == 0 and info["txntableAttempt"] == 2, info
    assert result.pauses == 1  # the second batch never got as far as committing
    expected = Rows()
    expected.delete(victim)
    check_table(delta_spark, path, expected, "delete in the other bin's file")


# -- metadata: a new column stops the run, a property change is absorbed ------------------------


def test_add_column_stops_the_run_with_nothing_committed(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path
) -> None:
    op = sql("ALTER TABLE {t} ADD COLUMNS (extra STRING)")(delta_spark)
    path, result = interleave(delta_spark, templates, tmp_path, "flat", COMMITTING, op)
    doc = result.doc
    assert doc["binsCommitted"] == 0 and doc["commits"] == [], doc
    assert {s["reason"] for s in doc["skipped"]} == {"table schema changed since planning"}
    assert conflicts(result) == {"MetadataChangedException": 1}, doc
    assert operations(path) == ["CREATE TABLE AS SELECT", "ADD COLUMNS"]
    assert sorted(p.name for p in path.rglob("*.parquet")) == sorted(
        p.name for p in templates["flat"].rglob("*.parquet")
    ), "the job left files of its dropped bins behind"
    expected = Rows()
    expected.add_column("extra")
    check_table(delta_spark, path, expected, "add column")


def test_property_change_is_absorbed(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path
) -> None:
    op = sql(
        "ALTER TABLE {t} SET TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 60 days')"
    )
    path, result = interleave(
        delta_spark, templates, tmp_path, "part-dv", COMMITTING, op(delta_spark)
    )
    assert result.doc["binsCommitted"] == 2, result.doc
    assert conflicts(result) == {"MetadataChangedException": 1}, result.doc
    (info,) = ours(path, result)
    assert info["readVersion"] == 1 and result.pauses == 2
    check_table(delta_spark, path, Rows(), "property change")


# -- delta-spark's own OPTIMIZE at our pause: one of the two compacts ---------------------------


def test_their_optimize_at_our_pause(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path
) -> None:
    op = sql("OPTIMIZE {t}")(delta_spark)
    path, result = interleave(delta_spark, templates, tmp_path, "flat-dv", COMMITTING, op)
    doc = result.doc
    assert doc["binsCommitted"] == 0 and doc["binsSkipped"] == 2 and doc["commits"] == [], doc
    assert {s["reason"] for s in doc["skipped"]} == {"inputs removed concurrently"}
    assert conflicts(result) == {"ConcurrentDeleteReadException": 1}, doc
    assert operations(path) == ["CREATE TABLE AS SELECT", "OPTIMIZE"]
    check_table(delta_spark, path, Rows(), "their OPTIMIZE")


# -- the reverse: delta-spark's transaction reads, our OPTIMIZE commits, delta-spark commits ----


def reverse(
    ds: DeltaSpark,
    templates: dict[str, Path],
    tmp_path: Path,
    variant: str,
    statement: str,
    column: str = "id",
) -> tuple[Path, DeltaSparkError | None]:
    """delta-spark runs ``statement`` (``{t}``: the table, ``{gate}``: the gate's call over
    ``column``) until it blocks at the gate, our OPTIMIZE runs to its end, the gate opens;
    returns what delta-spark answered (None: it committed)."""
    path = copy_table(templates[variant], tmp_path / "t")
    gate = Gate(tmp_path)
    pending = ds.submit("sql", sql=statement.format(t=sql_table(path), gate=gate.call(column)))
    try:
        gate.wait_reached(pending)
        result = run_optimize(path, *job_args(variant))
    finally:
        gate.open()
    assert result.code == 0 and result.doc["binsCommitted"] == 2, result.doc
    try:
        pending.result(timeout=300)
    except DeltaSparkError as exc:
        return path, exc
    return path, None


def test_reverse_append_commits_over_our_optimize(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path
) -> None:
    statement = (
        "INSERT INTO {t} SELECT * FROM VALUES (100, 'a', 1000), (101, 'b', 1010) AS s(id, p, v) "
        "WHERE {gate}"
    )
    path, error = reverse(delta_spark, templates, tmp_path, "part-dv", statement)
    assert error is None, error
    assert operations(path) == ["CREATE TABLE AS SELECT", "OPTIMIZE", "WRITE"]
    info = commit_info(path, 2)
    assert info["readVersion"] == 0 and info["isBlindAppend"] is True, info
    expected = Rows()
    expected.add({"id": 100, "p": "a", "v": 1000}, {"id": 101, "p": "b", "v": 1010})
    check_table(delta_spark, path, expected, "reverse append")


#: (variant, statement with the gate)
READERS: dict[str, tuple[str, str]] = {
    "delete-copy-on-write": (
        "flat",
        "DELETE FROM {t} WHERE id = 5 AND {gate}",
    ),
    "delete-dv": ("part-dv", "DELETE FROM {t} WHERE id = 4 AND {gate}"),
    "update-dv": (
        "flat-dv",
        "UPDATE {t} SET v = -1 WHERE id = 7 AND {gate}",
    ),
    "merge": (
        "part",
        "MERGE INTO {t} AS t USING (SELECT id, -9 AS v FROM VALUES (9) AS s(id) WHERE {gate}) "
        "AS s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v",
    ),
}
#: what Delta's conflict checker may answer a DELETE/UPDATE/MERGE that read a partition an
#: OPTIMIZE compacted (its adds match the read: ConcurrentAppend, checked first; its removes
#: hit the files read: ConcurrentDeleteRead)
READER_LOSSES = {"ConcurrentAppendException", "ConcurrentDeleteReadException"}


@pytest.mark.parametrize("case", sorted(READERS))
def test_reverse_reader_loses_to_our_optimize(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path, case: str
) -> None:
    variant, statement = READERS[case]
    path, error = reverse(delta_spark, templates, tmp_path, variant, statement)
    assert error is not None and error.short_class in READER_LOSSES, error
    assert "OPTIMIZE" in error.message, error.message
    assert operations(path) == ["CREATE TABLE AS SELECT", "OPTIMIZE"]
    check_table(delta_spark, path, Rows(), f"reverse {case}: the loser changed nothing")


def test_reverse_their_optimize_loses_to_ours(
    delta_spark: DeltaSpark, templates: dict[str, Path], tmp_path: Path
) -> None:
    """delta-spark's OPTIMIZE read the files ours compacted: its commit fails as a whole
    (Delta's rule; no duplicate rows either way)."""
    path, error = reverse(
        delta_spark, templates, tmp_path, "part", "OPTIMIZE {t} WHERE {gate}", column="p"
    )
    assert error is not None and error.short_class == "ConcurrentDeleteReadException", error
    assert operations(path) == ["CREATE TABLE AS SELECT", "OPTIMIZE"]
    check_table(delta_spark, path, Rows(), "reverse OPTIMIZE")


@pytest.mark.parametrize(
    ("change", "op", "extra"),
    [
        ("ADD COLUMNS (extra STRING)", "ADD COLUMNS", {"extra": None}),
        (
            "SET TBLPROPERTIES ('delta.logRetentionDuration' = 'interval 60 days')",
            "SET TBLPROPERTIES",
            {},
        ),
    ],
    ids=["add-column", "property"],
)
def test_reference_their_optimize_against_a_metadata_change(
    delta_spark: DeltaSpark,
    tmp_path: Path,
    templates: dict[str, Path],
    change: str,
    op: str,
    extra: dict[str, Any],
) -> None:
    """What delta-spark's own OPTIMIZE does when the metadata changes between its read and its
    commit: it keeps its work in both cases. Ours absorbs the property change but drops its
    bins on a schema change (a stricter rule: the work is thrown away, never a wrong commit)."""
    path = copy_table(templates["part"], tmp_path / "t")
    gate = Gate(tmp_path)
    table = sql_table(path)
    pending = delta_spark.submit("sql", sql=f"OPTIMIZE {table} WHERE {gate.call('p')}")
    try:
        gate.wait_reached(pending)
        delta_spark.sql(f"ALTER TABLE {table} {change}")
    finally:
        gate.open()
    try:
        pending.result(timeout=300)
        outcome = "committed"
    except DeltaSparkError as exc:
        outcome = exc.short_class
    # its commit fails with MetadataChangedException; OPTIMIZE's own retry finds every input
    # still live and the partition columns unchanged, and commits (OptimizeTableCommand)
    assert outcome == "committed", outcome
    assert operations(path)[1:] == [op, "OPTIMIZE"]
    assert commit_info(path, 2)["readVersion"] == 1
    found = sorted(rows(load(path)), key=lambda r: int(r["id"]))
    assert found == [dict(r, **extra) for r in Rows().sorted()]
