"""Row tracking end to end: racing appenders never share row ids, OPTIMIZE keeps every row's
stable row id and row commit version, and deltalake reads the same rows before and after.

The protocol-level oracle is ``row_tracking.stable_row_ids`` (materialized value, else
``baseRowId`` + position in the file, deletion vectors applied); deltalake (in a child process)
checks the rows themselves.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests import oracle_read
from tests.row_tracking_support import delete_rows, with_deletion_vectors
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.commit import row_tracking as rt
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string()), ("s", pa.string())])
ENABLE = {rt.ENABLE_KEY: "true"}

_APPENDER = """
import sys, time, json, os
import pyarrow as pa
from txntable.engine.table import Table
from txntable.engine.commit.transaction import CommitOptions
path, worker, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
schema = pa.schema([("id", pa.int64()), ("p", pa.string()), ("s", pa.string())])
table = Table.open(path)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.01)
for seq in range(6):
    ids = [worker * 1000 + seq * 10 + k for k in range(seq + 1)]
    data = pa.table({"id": ids, "p": ["a"] * len(ids), "s": [str(i) for i in ids]}, schema=schema)
    result = table.append(data, options=CommitOptions(max_attempts=200, backoff_max_s=0.05))
    print(json.dumps({"ids": ids, "version": result.version, "attempts": result.attempts}),
          flush=True)
"""


def _stable(table: Table) -> dict[int, tuple[int, int]]:
    rows = rt.stable_row_ids(table.snapshot(), ["id"]).to_pylist()
    out = {r["id"]: (r[rt.ROW_ID], r[rt.ROW_COMMIT_VERSION]) for r in rows}
    assert len(out) == len(rows), "ids are unique in these tables"
    return out


def _ranges(table: Table) -> list[tuple[int, int]]:
    out = []
    for add in table.snapshot().add_actions():
        records = rt.num_records(add)
        assert add.base_row_id is not None and records is not None
        out.append((add.base_row_id, add.base_row_id + records))
    return sorted(out)


def test_racing_appenders_never_share_row_ids(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = Table.create(str(path), SCHEMA, ["p"], ENABLE)
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, str(path), str(w), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(1, 5)
    ]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    go.touch()
    events = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-2000:]
        events += [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert len(events) == 24
    total = sum(len(e["ids"]) for e in events)
    ranges = _ranges(table)
    for (_, end), (start, _) in itertools.pairwise(ranges):
        assert end <= start, f"row id ranges overlap: {ranges}"
    assert rt.high_water_mark(table.snapshot().domains) == total - 1
    stable = _stable(table)
    assert sorted(rid for rid, _ in stable.values()) == list(range(total))
    for event in events:  # every row carries the version its commit landed at
        assert {stable[i][1] for i in event["ids"]} == {event["version"]}
    assert oracle_read.read(path)["rows"] == total


def _fragmented(path: Path, partitioned: bool) -> Table:
    table = Table.create(str(path), SCHEMA, ["p"] if partitioned else [], ENABLE)
    with_deletion_vectors(table)
    for n in range(6):
        ids = list(range(n * 20, n * 20 + 20))
        table.append(
            pa.table(
                {"id": ids, "p": [f"p{i % 2}" for i in ids], "s": [f"s{i}" for i in ids]},
                schema=SCHEMA,
            )
        )
    return table


def _delete_some(table: Table) -> None:
    paths = sorted(a.path for a in table.snapshot().add_actions())
    delete_rows(table, paths[0], [0, 3])
    delete_rows(table, paths[-1], [1])


@pytest.mark.parametrize("partitioned", [False, True])
def test_optimize_preserves_row_ids_and_commit_versions(tmp_path: Path, partitioned: bool) -> None:
    path = tmp_path / "t"
    table = _fragmented(path, partitioned)
    _delete_some(table)
    before, read_before = _stable(table), oracle_read.read(path)
    mark = rt.high_water_mark(table.snapshot().domains)
    assert len(before) == 120 - 3
    result = optimize(table, OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.bins_committed >= 1, result.skipped
    assert _stable(table) == before
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (read_before["rows"], read_before["digest"])
    snapshot = table.snapshot()
    columns = rt.MaterializedColumns.required(snapshot.configuration)
    for add, uri in zip(snapshot.add_actions(), snapshot.file_uris(), strict=True):
        # fresh ids above the old mark, fresh commit version, hidden columns without stats
        assert add.base_row_id is not None and add.base_row_id > mark
        assert add.default_row_commit_version == result.version
        assert set(columns.names) <= set(pq.read_schema(uri).names)
        assert not set(columns.names) & set(json.loads(add.stats or "{}").get("minValues", {}))
    ranges = _ranges(table)
    assert rt.high_water_mark(snapshot.domains) == ranges[-1][1] - 1

    # round two: new rows, deletes in compacted files (materialized values), Z-order rewrite
    for n in range(3):
        ids = list(range(500 + n * 10, 510 + n * 10))
        table.append(pa.table({"id": ids, "p": ["p1"] * 10, "s": [None] * 10}, schema=SCHEMA))
    _delete_some(table)
    before, read_before = _stable(table), oracle_read.read(path)
    result = optimize(table, OptimizeOptions(z_order_by=("s",)), ArrowExecutor())
    assert result.error is None and result.bins_committed >= 1, result.skipped
    assert _stable(table) == before
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (read_before["rows"], read_before["digest"])

    # a checkpoint keeps baseRowId / defaultRowCommitVersion and the mark
    write_checkpoint(table.snapshot(), now_ms=int(time.time() * 1000))
    reopened = Table.open(str(path))
    assert reopened.snapshot().checkpoint_version == result.version
    assert _stable(reopened) == before
    assert rt.high_water_mark(reopened.snapshot().domains) == rt.high_water_mark(
        table.snapshot().domains
    )


def test_appends_after_optimize_get_ids_no_row_holds(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table = _fragmented(path, partitioned=False)
    optimize(table, OptimizeOptions(), ArrowExecutor())
    version = table.append(pa.table({"id": [9000, 9001], "p": ["x", "x"], "s": ["a", "b"]})).version
    stable = _stable(table)
    ids = [rid for rid, _ in stable.values()]
    assert len(set(ids)) == len(ids)  # stable ids unique across old, compacted and new rows
    assert stable[9000][1] == stable[9001][1] == version


def test_optimize_that_loses_to_an_append_renumbers_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An append lands between OPTIMIZE's input check and its commit: no conflict (appends never
    conflict with a rewrite), and the retry numbers the new files after the append's rows."""
    from txntable.maintenance import optimize as optimize_module

    path = tmp_path / "t"
    table = _fragmented(path, partitioned=True)
    _delete_some(table)
    real_live_rows = optimize_module._live_rows
    appended: list[int] = []

    def live_rows_then_append(snapshot, paths):  # type: ignore[no-untyped-def]
        out = real_live_rows(snapshot, paths)
        if not appended:
            data = pa.table({"id": [7000, 7001, 7002], "p": ["p0"] * 3, "s": ["x"] * 3})
            appended.append(Table.open(str(path)).append(data.cast(SCHEMA)).version)
        return out

    monkeypatch.setattr(optimize_module, "_live_rows", live_rows_then_append)
    before = _stable(table)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.bins_committed >= 1, result.skipped
    assert result.version == appended[0] + 1 and result.attempts >= 2
    stable = _stable(table)
    assert {k: v for k, v in stable.items() if k < 7000} == before
    assert {stable[i][1] for i in (7000, 7001, 7002)} == {appended[0]}
    ranges = _ranges(table)
    for (_, end), (start, _) in itertools.pairwise(ranges):
        assert end <= start, f"row id ranges overlap: {ranges}"
    assert rt.high_water_mark(table.snapshot().domains) == ranges[-1][1] - 1
    assert oracle_read.read(path)["rows"] == len(stable)


@pytest.mark.spark
def test_spark_executor_preserves_row_ids(tmp_path: Path, spark: Any) -> None:
    from txntable.maintenance.executor_spark import SparkExecutor

    path = tmp_path / "t"
    table = _fragmented(path, partitioned=True)
    _delete_some(table)
    before, read_before = _stable(table), oracle_read.read(path)
    result = optimize(table, OptimizeOptions(), SparkExecutor(spark=spark))
    assert result.error is None and result.bins_committed == 2, result.skipped
    assert _stable(table) == before
    after = oracle_read.read(path)
    assert (after["rows"], after["digest"]) == (read_before["rows"], read_before["digest"])
