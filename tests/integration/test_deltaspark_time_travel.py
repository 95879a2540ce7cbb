"""delta-spark's time travel by version and by timestamp, and RESTORE, after our maintenance
(issue 33.4, case 3).

A reader finds the version of a timestamp from the commits' timestamps: the commit files'
modification times, or, with in-commit timestamps (``delta.enableInCommitTimestamps``), the
``inCommitTimestamp`` each commit records (ours included). Our log cleanup deletes the commits
before the checkpoint it keeps; our VACUUM the files no version from then on reads. Every
version still reachable (from that checkpoint on) must read, by version and by its timestamp in
``DESCRIBE HISTORY`` (and by a time between two commits), exactly the rows the test's model holds
for it, and ``RESTORE`` to one of them must bring those rows back; a version or timestamp before
the checkpoint must fail in delta-spark with its own error for that (``DELTA_VERSION_NOT_FOUND``,
``DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION``, ``DELTA_CANNOT_RESTORE_TABLE_VERSION``), the
table unchanged, never answer other rows.

The story, on a table without and one with in-commit timestamps: delta-spark appends, deletes
and updates (versions 1-4), our OPTIMIZE (5) and checkpoint, two appends (6, 7), the log aged
and our log cleanup (versions 0-4 go), our VACUUM (8, 9), then delta-spark's time travel and a
RESTORE (to a version on the first table, to a timestamp on the second), and our checkpoint of
the restored table. The two tables' stories run side by side.
"""

from __future__ import annotations

import datetime as dt
import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.deltaspark import canon
from tests.deltaspark.client import DeltaSpark, DeltaSparkError
from tests.deltaspark.support import age_log, commit_versions
from tests.integration.deltaspark_upkeep import step, table_ref
from txntable.engine.table import Table

pytestmark = [pytest.mark.integration, pytest.mark.deltaspark, pytest.mark.timeout(900)]

Rows = dict[int, str]


def _digest(rows: Rows) -> tuple[int, str]:
    return len(rows), canon.digest({"id": k, "s": s} for k, s in rows.items())


def _got(answer: dict[str, Any]) -> tuple[int, str]:
    return answer["count"], answer["digest"]


def _commit_info(path: Path, version: int) -> dict[str, Any]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return next(json.loads(ln)["commitInfo"] for ln in text.splitlines() if "commitInfo" in ln)


def _build(ds: DeltaSpark, path: Path, ict: bool) -> dict[int, Rows]:
    """The story up to our VACUUM; the rows of every version."""
    ref = table_ref(path)
    props = " TBLPROPERTIES ('delta.enableInCommitTimestamps' = 'true')" if ict else ""
    ds.sql(f"CREATE TABLE {ref} (id BIGINT, s STRING) USING delta{props}")
    versions: dict[int, Rows] = {0: {}}
    rows: Rows = {}

    def commit(sql: str) -> None:
        ds.sql(sql)
        versions[Table.open(str(path)).version()] = dict(rows)

    def append(start: int, n: int) -> None:
        rows.update(dict.fromkeys(range(start, start + n), "a"))
        commit(
            f"INSERT INTO {ref} SELECT /*+ REPARTITION(2) */ id, 'a' "
            f"FROM range({start}, {start + n}) AS r(id)"
        )

    append(0, 30)
    append(30, 30)
    for k in [k for k in rows if k % 4 == 0]:
        del rows[k]
    commit(f"DELETE FROM {ref} WHERE id % 4 = 0")
    rows.update({k: "u" for k in rows if k < 10})
    commit(f"UPDATE {ref} SET s = 'u' WHERE id < 10")
    assert sorted(versions) == [0, 1, 2, 3, 4]
    optimized = step(ds, path, "optimize")
    assert optimized["numFilesRemoved"] > 0 and optimized["version"] == 5, optimized
    versions[5] = dict(rows)
    assert step(ds, path, "checkpoint")["version"] == 5
    append(60, 20)
    append(80, 20)
    age_log(path, days=3)
    cleaned = step(ds, path, "cleanup")
    assert cleaned["checkpointVersion"] == 5, cleaned
    assert commit_versions(path) == [5, 6, 7]
    vacuumed = step(ds, path, "vacuum")
    assert vacuumed["numDeleted"] >= optimized["numFilesRemoved"], vacuumed
    assert commit_versions(path) == [5, 6, 7, 8, 9]  # VACUUM START and END
    versions[8] = versions[9] = dict(rows)
    return versions


def _travel(ds: DeltaSpark, path: Path, ict: bool) -> None:
    """One table's story and checks; by file times RESTORE goes to a version, with in-commit
    timestamps to a timestamp."""
    ref = table_ref(path)
    versions = _build(ds, path, ict)
    reachable = [5, 6, 7, 8, 9]

    history = {int(r["version"]): r["timestamp"] for r in ds.history(path)}
    assert sorted(history) == reachable, history
    stamps = [history[v] for v in reachable]
    assert stamps == sorted(stamps) and len(set(stamps)) == len(stamps), history
    if ict:  # delta-spark takes our commits' inCommitTimestamp as their time
        for v in (5, 8, 9):
            ict_ms = _commit_info(path, v)["inCommitTimestamp"]
            assert history[v] == _iso(ict_ms), (v, history[v], ict_ms)

    by_version = ds.submit("read_versions", path=str(path), versions=reachable)
    queries = {
        v: ds.submit("query", sql=f"SELECT * FROM {ref} TIMESTAMP AS OF '{history[v]}'")
        for v in reachable
    }
    # a time between two commits is the earlier one's
    between = _iso(_ms(history[6]) + (_ms(history[7]) - _ms(history[6])) // 2)
    queries[-6] = ds.submit("query", sql=f"SELECT * FROM {ref} TIMESTAMP AS OF '{between}'")
    read = by_version.result(timeout=600)["versions"]
    for v in reachable:
        assert _got(read[str(v)]) == _digest(versions[v]), f"VERSION AS OF {v}"
        assert _got(queries[v].result(timeout=600)) == _digest(versions[v]), f"TIMESTAMP of {v}"
    assert _got(queries[-6].result(timeout=600)) == _digest(versions[6]), "between 6 and 7"

    # gone: the commits before the checkpoint our cleanup kept
    early = _iso(_ms(history[5]) - 1000)
    for sql, condition in (
        (f"SELECT * FROM {ref} VERSION AS OF 3", "DELTA_VERSION_NOT_FOUND"),
        (
            f"SELECT * FROM {ref} TIMESTAMP AS OF '{early}'",
            "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION",
        ),
        (f"RESTORE TABLE {ref} TO VERSION AS OF 2", "DELTA_CANNOT_RESTORE_TABLE_VERSION"),
    ):
        with pytest.raises(DeltaSparkError) as refused:
            ds.call("query", sql=sql)
        assert refused.value.condition == condition, (sql, str(refused.value))
    assert commit_versions(path)[-1] == 9, "a refused RESTORE committed"

    if ict:
        ds.sql(f"RESTORE TABLE {ref} TO TIMESTAMP AS OF '{history[7]}'")
        versions[10] = versions[7]
    else:
        ds.sql(f"RESTORE TABLE {ref} TO VERSION AS OF 6")
        versions[10] = versions[6]
    assert commit_versions(path)[-1] == 10
    assert step(ds, path, "checkpoint")["version"] == 10
    assert ds.call("log_segment", path=str(path))["checkpointVersion"] == 10
    assert _got(ds.read(path)) == _digest(versions[10]), "after RESTORE and our checkpoint"


def test_time_travel_and_restore_after_our_maintenance(
    delta_spark: DeltaSpark, tmp_path: Path
) -> None:
    """The two tables' stories side by side (delta-spark answers requests concurrently; its
    statements on small tables are mostly driver time, so two at once use both cores)."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        stories = [
            pool.submit(_travel, delta_spark, tmp_path / name, ict)
            for name, ict in (("file-times", False), ("in-commit-timestamps", True))
        ]
        for story in stories:
            story.result()


_EPOCH = dt.datetime(1970, 1, 1)


def _ms(iso: str) -> int:
    """Milliseconds since the epoch of a UTC time as the server answers it."""
    return (dt.datetime.fromisoformat(iso) - _EPOCH) // dt.timedelta(milliseconds=1)


def _iso(ms: int) -> str:
    return (_EPOCH + dt.timedelta(milliseconds=ms)).isoformat()
