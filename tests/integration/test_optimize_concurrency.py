"""OPTIMIZE against other writers in other processes: appends (ours and deltalake) never lose a
row, and a racing DELETE or OVERWRITE never sees its rows come back.

The appenders and deleters are separate processes committing through their own engines while
this process runs OPTIMIZE repeatedly with one bin per commit (many commits, many chances to
race). A deterministic variant forces the race at the commit itself: the delete lands after the
pre-commit check, so the engine's conflict checker must catch it.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

import txntable.maintenance.optimize as optimize_module
from tests.integration.optimize_helpers import fragmented_table, rows_multiset
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor
from txntable.maintenance.optimize import optimize

pytestmark = pytest.mark.integration

ONE_BIN_PER_COMMIT = OptimizeOptions(partial_commit_size=1)

APPEND_DELTALAKE = """
import sys, pyarrow as pa
from deltalake import write_deltalake
from tests.integration.optimize_helpers import batch
path, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
for i in range(n):
    write_deltalake(path, batch(start + i * 5, 5), mode="append", partition_by=["p"])
"""

APPEND_OURS = """
import sys
from txntable.engine.table import Table
from tests.integration.optimize_helpers import batch
path, start, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
table = Table.open(path)
for i in range(n):
    table.append(batch(start + i * 5, 5))
"""

# A DELETE or OVERWRITE that reads a partition OPTIMIZE is compacting conflicts with it (Delta's
# rule of Delta's conflict matrix: the compacted adds match its read), so like any client it
# retries.
DELETE_DELTALAKE = """
import sys, time
from deltalake import DeltaTable
time.sleep(float(sys.argv[3]))
for attempt in range(50):
    try:
        DeltaTable(sys.argv[1]).delete(sys.argv[2])
        break
    except Exception as exc:
        if "concurrent" not in str(exc).lower() or attempt == 49:
            raise
"""

OVERWRITE_DELTALAKE = """
import sys, time
from deltalake import write_deltalake
from tests.integration.optimize_helpers import batch
time.sleep(float(sys.argv[2]))
rows = batch(900_000, 30, partitions=1).set_column(1, "p", [["part1"] * 30])
for attempt in range(50):
    try:
        write_deltalake(sys.argv[1], rows, mode="overwrite", predicate="p = 'part1'")
        break
    except Exception as exc:
        if "concurrent" not in str(exc).lower() or attempt == 49:
            raise
"""


def spawn(script: str, *args: object) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", script, *map(str, args)],
        cwd=Path(__file__).resolve().parents[2],
        stderr=subprocess.PIPE,
        text=True,
    )


def optimize_until(procs: list[subprocess.Popen[str]], path: Path) -> list:
    """Run OPTIMIZE over and over while ``procs`` run, then once more after they finish."""
    results = []
    while any(p.poll() is None for p in procs):
        results.append(optimize(Table.open(str(path)), ONE_BIN_PER_COMMIT, ArrowExecutor()))
        time.sleep(0.01)
    results.append(optimize(Table.open(str(path)), ONE_BIN_PER_COMMIT, ArrowExecutor()))
    for p in procs:
        _, err = p.communicate()
        assert p.returncode == 0, err[-2000:]
    return results


def ids(path: Path) -> Counter[int]:
    return Counter(DeltaTable(str(path)).to_pyarrow_table().column("id").to_pylist())


def test_appends_from_both_engines_are_never_lost(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=12, rows=20, partitioned=True)
    base = ids(path)
    procs = [spawn(APPEND_DELTALAKE, path, 100_000, 25), spawn(APPEND_OURS, path, 200_000, 25)]
    results = optimize_until(procs, path)
    assert all(r.error is None for r in results), [r.error for r in results if r.error]
    assert sum(r.bins_committed for r in results) >= 4
    expected = base + Counter(range(100_000, 100_125)) + Counter(range(200_000, 200_125))
    assert ids(path) == expected
    # the log shows OPTIMIZE commits interleaved with appends, all SnapshotIsolation
    history = DeltaTable(str(path)).history()
    ops = Counter(h["operation"] for h in history)
    assert ops["OPTIMIZE"] >= 2 and ops["WRITE"] >= 12 + 50


@pytest.mark.parametrize("delay", [0.0, 0.3])
def test_racing_delete_never_resurrects_rows(tmp_path: Path, delay: float) -> None:
    path = fragmented_table(tmp_path / "t", commits=15, rows=30, partitioned=True)
    before = ids(path)
    doomed = Counter(
        r["id"] for r in DeltaTable(str(path)).to_pyarrow_table().to_pylist() if r["p"] == "part0"
    )
    procs = [spawn(DELETE_DELTALAKE, path, "p = 'part0'", delay)]
    results = optimize_until(procs, path)
    assert all(r.error is None for r in results)
    assert ids(path) == before - doomed


def test_racing_overwrite_wins_its_partition(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=15, rows=30, partitioned=True)
    table = DeltaTable(str(path)).to_pyarrow_table()
    kept = Counter(r["id"] for r in table.to_pylist() if r["p"] != "part1")
    results = optimize_until([spawn(OVERWRITE_DELTALAKE, path, 0.1)], path)
    assert all(r.error is None for r in results)
    assert ids(path) == kept + Counter(range(900_000, 900_030))


def test_delete_landing_during_the_commit_is_caught_by_the_conflict_checker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deleter commits after our input check and before our commit: the engine raises
    ConcurrentDeleteReadException, the batch is re-checked, the dead bin dropped, the others
    committed."""
    path = fragmented_table(tmp_path / "t", commits=4, rows=30, partitioned=True)
    before = rows_multiset(path)
    real_live_rows = optimize_module._live_rows
    fired: list[bool] = []

    def live_rows_then_delete(snapshot, paths):
        out = real_live_rows(snapshot, paths)
        if not fired:
            fired.append(True)
            DeltaTable(str(path)).delete("p = 'part2'")
        return out

    monkeypatch.setattr(optimize_module, "_live_rows", live_rows_then_delete)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None
    assert result.bins_skipped == 1 and result.bins_committed == 3
    assert result.attempts >= 2  # the lost race is counted
    after = DeltaTable(str(path)).to_pyarrow_table()
    assert "part2" not in after.column("p").to_pylist()
    expected = Counter({k: v for k, v in before.items() if '"p": "part2"' not in k})
    assert rows_multiset(path) == expected
    history = DeltaTable(str(path)).history(2)
    assert [h["operation"] for h in history] == ["OPTIMIZE", "DELETE"]


class ChangeDuringRun:
    """An executor that lets another writer change the table while bins are rewritten."""

    name = "arrow+change"

    def __init__(self, change) -> None:
        self.change = change
        self.inner = ArrowExecutor()

    def run(self, tasks):
        results = self.inner.run(tasks)
        self.change()
        return results


def test_property_change_during_run_is_absorbed(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=4, rows=20, partitioned=True)
    before = rows_multiset(path)

    def change() -> None:
        DeltaTable(str(path)).alter.set_table_properties(
            {"delta.logRetentionDuration": "interval 60 days"}
        )

    result = optimize(Table.open(str(path)), OptimizeOptions(), ChangeDuringRun(change))
    assert result.error is None and result.bins_committed == 4 and result.bins_skipped == 0
    assert rows_multiset(path) == before


def test_schema_change_during_run_stops_it_cleanly(tmp_path: Path) -> None:
    from deltalake.schema import Field, PrimitiveType

    path = fragmented_table(tmp_path / "t", commits=4, rows=20, partitioned=True)
    before = rows_multiset(path)

    def change() -> None:
        DeltaTable(str(path)).alter.add_columns([Field("extra", PrimitiveType("long"), True)])

    policy = OptimizeOptions(partial_commit_size=1)  # one bin per batch: the rest never runs
    result = optimize(Table.open(str(path)), policy, ChangeDuringRun(change))
    assert result.error is None and result.bins_committed == 0 and result.bins_skipped == 4
    assert result.skipped[0]["reason"] == "table schema changed since planning"
    assert result.version == result.read_version == 3 and result.commits == []
    after = rows_multiset(path)
    assert sum(after.values()) == sum(before.values())
    # no file of ours is left behind: only the inputs remain on disk
    assert len(list(path.rglob("*.parquet"))) == 16


def test_two_optimize_jobs_racing(tmp_path: Path) -> None:
    """Two OPTIMIZE processes plan the same bins: each bin is committed exactly once, the loser
    drops its copies (and deletes their files), and the rows are unchanged."""
    import json

    path = fragmented_table(tmp_path / "t", commits=10, rows=40, partitioned=True)
    before = rows_multiset(path)
    inputs = {p.resolve() for p in path.rglob("*.parquet")}
    cmd = [sys.executable, "-m", "txntable.jobs.optimize", str(path), "--executor", "arrow"]
    cmd += ["--commit-every", "1"]
    jobs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)]
    jobs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    docs = []
    for job in jobs:
        out, err = job.communicate(timeout=120)
        assert job.returncode == 0, err[-2000:]
        docs.append(json.loads(out))
    assert sum(d["binsCommitted"] for d in docs) == 4
    assert all(d["binsCommitted"] + d["binsSkipped"] == d["binsPlanned"] for d in docs)
    assert rows_multiset(path) == before
    live = {Path(u).resolve() for u in DeltaTable(str(path)).file_uris()}
    assert len(live) == 4
    on_disk = {p.resolve() for p in path.rglob("*.parquet")}
    assert on_disk == inputs | live  # the loser's files are gone


def test_delete_in_an_untouched_partition_is_no_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each batch declares only the partitions it rewrites as read: a DELETE of another
    partition landing during its commit costs no retry, and that partition's bin is dropped
    later by the input check."""
    path = fragmented_table(tmp_path / "t", commits=4, rows=30, partitioned=True)
    real_live_rows = optimize_module._live_rows
    fired: list[bool] = []

    def live_rows_then_delete(snapshot, paths):
        out = real_live_rows(snapshot, paths)
        if not fired:
            fired.append(True)
            DeltaTable(str(path)).delete("p = 'part2'")
        return out

    monkeypatch.setattr(optimize_module, "_live_rows", live_rows_then_delete)
    policy = OptimizeOptions(partial_commit_size=1)  # one bin (partition) per commit
    result = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert result.error is None and result.bins_committed == 3 and result.bins_skipped == 1
    # the DELETE took the version our first commit tried; the engine found no conflict and
    # retried the same transaction (a conflict would have made the run start a new one)
    first = next(
        h for h in reversed(DeltaTable(str(path)).history()) if h["operation"] == "OPTIMIZE"
    )
    assert first["txntableAttempt"] == 2
    assert "part2" not in DeltaTable(str(path)).to_pyarrow_table().column("p").to_pylist()


def test_delete_of_a_later_batchs_file_is_no_conflict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch records as read only the files it compacts (Spark's trackFilesRead), not every
    file of the table: a DELETE that rewrites a file of the next batch's bin, landing while the
    first batch commits, costs the first batch no conflict (the engine retries the same
    transaction), and the next bin is dropped by the input check."""
    path = fragmented_table(tmp_path / "t", commits=4, rows=30, partitioned=False)
    policy = OptimizeOptions(max_files_per_bin=2, partial_commit_size=1)
    _first, second = optimize_module.plan(Table.open(str(path)), policy).batches()
    victim = pq.read_table(path / second[0].paths[0], columns=["id"]).column("id")[0].as_py()
    real_live_rows = optimize_module._live_rows
    fired: list[bool] = []

    def live_rows_then_delete(snapshot, paths):
        out = real_live_rows(snapshot, paths)
        if not fired:
            fired.append(True)
            DeltaTable(str(path)).delete(f"id = {victim}")
        return out

    monkeypatch.setattr(optimize_module, "_live_rows", live_rows_then_delete)
    result = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1 and result.bins_skipped == 1
    assert result.skipped[0]["reason"] == "inputs removed concurrently"
    first = next(
        h for h in reversed(DeltaTable(str(path)).history()) if h["operation"] == "OPTIMIZE"
    )
    assert first["txntableAttempt"] == 2
    assert victim not in ids(path)
