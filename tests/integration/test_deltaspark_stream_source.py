"""A delta-spark streaming read of a table we maintain delivers every appended row exactly once
(issue 33.4, case 1).

A Delta table is a streaming source: a query remembers in its checkpoint the version (and the
file within it) it has processed, and each run reads the commits after it, skipping those whose
files carry ``dataChange=false``. Our OPTIMIZE is such a commit (it removes and adds the same
rows); our checkpoint and log cleanup change where the log starts; our VACUUM deletes the files
OPTIMIZE replaced. A stream that re-delivered OPTIMIZE's files would deliver rows twice, one that
lost its place after our log cleanup would fail or skip rows.

delta-spark appends (INSERT, two files each), a ``readStream`` of the table with
``maxFilesPerTrigger`` 2 (several micro-batches a run) and ``trigger(availableNow=True)`` runs
between our maintenance steps (server op ``stream_read``), and each run must deliver exactly the
rows appended since the previous one; a query started afresh at the end must deliver every row
of the table once. Our steps come only where a stream that keeps up with the table loses nothing
by design, as with delta-spark's own maintenance: VACUUM after the stream read the files it
deletes, log cleanup only of commits before the one the stream resumes from. A stream's offset
stays at the last file it delivered, so after an OPTIMIZE it resumes from the append before it:
a cleanup that deletes that commit makes delta-spark stop the query, by design
(``DELTA_MISSING_FILES_UNEXPECTED_VERSION``, "Delta stream cannot resume from version 3;
transaction log starts at 4"), which is why an append comes between our OPTIMIZE and cleanup.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.deltaspark.client import DeltaSpark
from tests.deltaspark.support import age_log
from tests.integration.deltaspark_upkeep import step, table_ref

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(900)]


class Stream:
    """One streaming query of the table (its checkpoint), run a trigger at a time."""

    def __init__(self, ds: DeltaSpark, path: Path, checkpoint: Path) -> None:
        self.ds, self.path, self.checkpoint = ds, path, checkpoint
        self.delivered: list[int] = []
        self.batch_ids: list[int] = []

    def run(self) -> list[int]:
        """One ``availableNow`` run; the ids it delivered, in delivery order."""
        got = self.ds.call(
            "stream_read",
            path=str(self.path),
            checkpoint=str(self.checkpoint),
            columns=["id"],
            options={"maxFilesPerTrigger": "2"},
        )
        ids = [row["id"] for batch in got["batches"] for row in batch["rows"]]
        self.batch_ids.extend(batch["batch"] for batch in got["batches"])
        self.delivered.extend(ids)
        return ids


def test_stream_delivers_each_append_once_across_our_maintenance(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    ds, path = delta_spark, tmp_path / "source"
    ref = table_ref(path)
    ds.sql(f"CREATE TABLE {ref} (id BIGINT, s STRING) USING delta")
    appended: list[int] = []

    def append(start: int, n: int = 20) -> list[int]:
        ds.sql(
            f"INSERT INTO {ref} SELECT /*+ REPARTITION(2) */ id, CAST(id AS STRING) "
            f"FROM range({start}, {start + n}) AS r(id)"
        )
        ids = list(range(start, start + n))
        appended.extend(ids)
        return ids

    stream = Stream(ds, path, tmp_path / "stream-checkpoint")
    first = append(0) + append(20)
    assert sorted(stream.run()) == first, "the initial snapshot"
    assert len(stream.batch_ids) == 2, "four files, two a micro-batch"

    pending = append(40)
    optimized = step(ds, path, "optimize")  # rewrites the three appends' six files
    assert optimized["numFilesRemoved"] >= 6, optimized
    assert sorted(stream.run()) == pending, "the append before our OPTIMIZE, OPTIMIZE skipped"

    # the stream's offset stays at the last file it delivered, so it resumes from that version's
    # commit: one more append read, and our log cleanup keeps every commit the stream needs
    pending = append(60)
    assert sorted(stream.run()) == pending
    checkpoint = step(ds, path, "checkpoint")
    age_log(path, days=3)
    cleaned = step(ds, path, "cleanup")
    assert cleaned["checkpointVersion"] == checkpoint["version"] and cleaned["numDeleted"] > 0
    pending = append(80)
    assert sorted(stream.run()) == pending, "the append after our checkpoint and log cleanup"

    optimized = step(ds, path, "optimize")
    assert optimized["numFilesRemoved"] >= 2, optimized
    vacuumed = step(ds, path, "vacuum")
    assert vacuumed["numDeleted"] >= optimized["numFilesRemoved"], vacuumed
    step(ds, path, "checkpoint")
    pending = append(120)
    assert sorted(stream.run()) == pending, "the append after our OPTIMIZE, VACUUM, checkpoint"

    assert sorted(stream.delivered) == appended, "a row delivered twice or never"
    assert stream.batch_ids == sorted(set(stream.batch_ids)), stream.batch_ids

    fresh = Stream(ds, path, tmp_path / "fresh-checkpoint")
    assert sorted(fresh.run()) == appended, "a new stream's initial snapshot of our table"
