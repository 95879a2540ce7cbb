"""OPTIMIZE with the in-process Arrow executor, checked with deltalake as the oracle.

Data unchanged (multiset of rows, many types, nulls, partitioned or not), file counts reach the
target, the commit has Delta's OPTIMIZE shape, deltalake reads our statistics, bins whose inputs
vanish are dropped, bad input changes nothing, and a second run has nothing to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from tests.integration.optimize_helpers import (
    file_count_by_partition,
    fragmented_table,
    rows_multiset,
)
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor, BinResult, BinTask
from txntable.maintenance.optimize import optimize
from txntable.maintenance.planner import ZORDER_TAG

pytestmark = pytest.mark.integration


def log_lines(path: Path, version: int) -> list[dict]:
    text = (path / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.mark.parametrize("partitioned", [True, False], ids=["partitioned", "unpartitioned"])
def test_data_unchanged_and_commit_shape(tmp_path: Path, partitioned: bool) -> None:
    path = fragmented_table(tmp_path / "t", commits=8, rows=40, partitioned=partitioned)
    before = rows_multiset(path)
    files_before = file_count_by_partition(path)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.bins_skipped == 0
    assert result.version == 8 and result.commits == [8]
    assert rows_multiset(path) == before
    assert set(file_count_by_partition(path).values()) == {1}
    assert result.num_files_removed == sum(files_before.values())
    assert result.num_files_added == len(files_before)

    lines = log_lines(path, 8)
    info = next(line["commitInfo"] for line in lines if "commitInfo" in line)
    assert info["operation"] == "OPTIMIZE"
    assert info["isolationLevel"] == "SnapshotIsolation"
    assert info["operationParameters"] == {
        "predicate": "[]",
        "zOrderBy": "[]",
        "clusterBy": "[]",
        "auto": False,
    }
    metrics = info["operationMetrics"]
    assert metrics["numRemovedFiles"] == str(result.num_files_removed)
    assert metrics["numAddedFiles"] == str(result.num_files_added)
    assert all(isinstance(v, str) for v in metrics.values())
    removes = [line["remove"] for line in lines if "remove" in line]
    adds = [line["add"] for line in lines if "add" in line]
    assert all(r["dataChange"] is False and r["extendedFileMetadata"] for r in removes)
    assert all("deletionTimestamp" in r and "size" in r and "stats" in r for r in removes)
    assert all(a["dataChange"] is False and a["stats"] for a in adds)
    # deltalake agrees on history and nothing is left to do
    assert DeltaTable(str(path)).history(1)[0]["operation"] == "OPTIMIZE"
    again = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert again.version == 8 and again.bins_planned == 0 and again.commits == []


def test_deltalake_reads_and_uses_our_statistics(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=6, rows=50, partitioned=True)
    optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    dt = DeltaTable(str(path))
    actions = pa.table(dt.get_add_actions(flatten=True)).to_pylist()
    for add in actions:
        data = pq.read_table(str(path / add["path"]))
        ids = data.column("id").to_pylist()
        assert add["num_records"] == len(ids)
        assert add["min.id"] == min(ids) and add["max.id"] == max(ids)
        assert add["null_count.s"] == data.column("s").null_count
        assert add["null_count.arr"] == data.column("arr").null_count  # nested, too
        assert add["min.ts"] is not None and add["max.d"] is not None
    # a filter on id prunes files by our min/max (the result is still exact)
    lo = min(a["min.id"] for a in actions)
    got = dt.to_pyarrow_table(filters=[("id", "<=", lo + 3)]).column("id").to_pylist()
    assert sorted(got) == list(range(lo, lo + 4))


def test_small_target_gives_several_files_per_partition(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=30, rows=40, partitioned=True)
    before = rows_multiset(path)
    sizes = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).column("size_bytes")
    target = int(sum(sizes.to_pylist()) / 4 / 3)  # about three files per partition
    policy = OptimizeOptions(target_file_size=target)
    # Tiny inputs are mostly per-file overhead, so merged files come out far below the target
    # and the next run merges them again: repeated runs converge in a few steps.
    runs = []
    for _ in range(6):
        result = optimize(Table.open(str(path)), policy, ArrowExecutor())
        assert result.error is None
        runs.append(result.bins_planned)
        if result.bins_planned == 0:
            break
    assert runs[-1] == 0 and len(runs) <= 5, runs
    assert rows_multiset(path) == before
    counts = file_count_by_partition(path)
    assert all(1 <= n <= 3 for n in counts.values()), counts
    sizes = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).column("size_bytes")
    assert max(sizes.to_pylist()) <= 2 * target


def test_zorder_clusters_and_tags(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=6, rows=60, partitioned=False)
    before = rows_multiset(path)
    policy = OptimizeOptions(z_order_by=("i32", "s"))
    result = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1
    assert rows_multiset(path) == before
    info = DeltaTable(str(path)).history(1)[0]
    assert info["operationParameters"]["zOrderBy"] == '["i32", "s"]'
    lines = log_lines(path, result.version)
    assert all(line["add"]["tags"][ZORDER_TAG] == '["i32","s"]' for line in lines if "add" in line)
    assert optimize(Table.open(str(path)), policy, ArrowExecutor()).bins_planned == 0


def test_where_and_max_bytes_limit_the_run(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=6, rows=30, partitioned=True)
    before = rows_multiset(path)
    only = OptimizeOptions(where="p = 'part1'")
    result = optimize(Table.open(str(path)), only, ArrowExecutor())
    counts = file_count_by_partition(path)
    assert counts["part1"] == 1 and counts["part0"] == 6 and result.bins_committed == 1
    info = DeltaTable(str(path)).history(1)[0]
    assert info["operationParameters"]["predicate"] == "[\"p = 'part1'\"]"
    one_bin = OptimizeOptions(max_bytes_per_run=1, partial_commit_size=1)
    first = optimize(Table.open(str(path)), one_bin, ArrowExecutor())
    assert first.bins_committed == 1
    rest = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert rest.bins_committed == 2
    assert set(file_count_by_partition(path).values()) == {1}
    assert rows_multiset(path) == before


def test_spark_written_table(table_copy) -> None:
    path = table_copy("simple_table_with_checkpoint")
    before = rows_multiset(path)
    result = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_added == 1
    assert rows_multiset(path) == before
    assert len(DeltaTable(str(path)).file_uris()) == 1


class DeleteDuringRun:
    """An executor that lets a concurrent deltalake DELETE land while bins are rewritten."""

    name = "arrow+delete"

    def __init__(self, path: Path, predicate: str) -> None:
        self.path = path
        self.predicate = predicate
        self.inner = ArrowExecutor()

    def run(self, tasks: Sequence[BinTask]) -> list[BinResult]:
        results = self.inner.run(tasks)
        DeltaTable(str(self.path)).delete(self.predicate)
        return results


def test_bin_whose_inputs_were_deleted_is_dropped(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=5, rows=30, partitioned=True)
    executor = DeleteDuringRun(path, "p = 'part0'")
    result = optimize(Table.open(str(path)), OptimizeOptions(), executor)
    assert result.error is None
    assert result.bins_skipped == 1 and result.bins_committed == 3
    assert result.skipped[0]["reason"] == "inputs removed concurrently"
    rows = DeltaTable(str(path)).to_pyarrow_table()
    assert "part0" not in rows.column("p").to_pylist()  # no deleted row came back
    # the skipped bin's output was deleted: every parquet file on disk is referenced or removed
    referenced = {Path(u).resolve() for u in DeltaTable(str(path)).file_uris()}
    part0_files = {p.resolve() for p in (path / "p=part0").glob("*.parquet")}
    assert not (part0_files & referenced)
    assert len(part0_files) == 5  # only the original inputs remain there, nothing we wrote


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    return subprocess.run(
        [sys.executable, "-m", "txntable.cli.main", "optimize", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target-size", "ten"], "--target-size: 'ten' is not a positive size"),
        (["--target-size", "64MB"], "write 64M = 64,000,000 bytes or 64Mi = 67,108,864 bytes"),
        (["--where", "nope = 1"], "not in the table schema"),
        (["--where", "p = "], "predicate"),
        (["--where", "p = 'part1' AND id > 3"], "only use partition columns (p); got id"),
        (["--zorder-by", "p"], "partition column"),
        (["--max-bytes", "0"], "--max-bytes: '0' is not a positive size"),
    ],
)
def test_bad_input_is_one_line_and_changes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    path = fragmented_table(tmp_path / "t", commits=3, rows=10, partitioned=True)
    log_before = sorted(os.listdir(path / "_delta_log"))
    done = _cli(str(path), "--executor", "arrow", *args)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines
    assert sorted(os.listdir(path / "_delta_log")) == log_before


def test_not_a_table_and_unsupported_features(tmp_path: Path, table_copy) -> None:
    done = _cli(str(tmp_path), "--executor", "arrow")
    assert done.returncode != 0 and done.stderr.startswith("error: ")
    assert len(done.stderr.strip().splitlines()) == 1
    path = table_copy("variant-stats-no-checkpoint")  # shredded variants: no rewrite
    done = _cli(str(path), "--executor", "arrow")
    assert done.returncode != 0
    assert "does not support: variantShredding-preview" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
    # a file with a deletion vector is never rewritten (its DV would have to be applied)
    path = table_copy("table-with-dv-small")
    done = _cli(str(path), "--executor", "arrow", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["plan"]["filesWithDeletionVectors"] == 1


def test_dry_run_json_changes_nothing(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=4, rows=10, partitioned=True)
    done = _cli(str(path), "--executor", "arrow", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["dryRun"] and doc["version"] == 3 and doc["plan"]["numBins"] == 4
    assert DeltaTable(str(path)).version() == 3
    done = _cli(str(path), "--executor", "arrow", "--json", "--run-id", "run-42")
    doc = json.loads(done.stdout)
    assert doc["runId"] == "run-42"
    assert DeltaTable(str(path)).history(1)[0]["txntableRunId"] == "run-42"
    expected = {
        "version",
        "numFilesRemoved",
        "numFilesAdded",
        "numBytesRemoved",
        "numBytesAdded",
        "binsCommitted",
        "binsSkipped",
        "attempts",
        "seconds",
    }
    assert expected <= set(doc) and doc["version"] == 4 and doc["numFilesRemoved"] == 16


class FlakyExecutor:
    """Batch 1 works, batch 2's bin fails in the worker, batch 3 crashes the executor."""

    name = "flaky"

    def __init__(self) -> None:
        self.inner = ArrowExecutor()
        self.calls = 0
        self.failed_files: list[str] = []

    def run(self, tasks: Sequence[BinTask]) -> list[BinResult]:
        self.calls += 1
        results = self.inner.run(tasks)
        if self.calls == 2:
            self.failed_files = [w for r in results for w in r.written]
            return [
                BinResult(r.bin_id, written=r.written, error="OSError: disk on fire")
                for r in results
            ]
        if self.calls == 3:
            raise RuntimeError("executor lost")
        return results


def test_partial_progress_survives_later_failures(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=4, rows=20, partitioned=True)
    before = rows_multiset(path)
    inputs = {p.resolve() for p in path.rglob("*.parquet")}
    policy = OptimizeOptions(partial_commit_size=1)  # one bin per batch and commit
    executor = FlakyExecutor()
    result = optimize(Table.open(str(path)), policy, executor)
    assert result.commits == [4] and result.bins_committed == 1
    assert result.bins_skipped == 1 and "disk on fire" in result.skipped[0]["reason"]
    assert result.error == "RuntimeError: executor lost"
    assert rows_multiset(path) == before
    live = {Path(u).resolve() for u in DeltaTable(str(path)).file_uris()}
    on_disk = {p.resolve() for p in path.rglob("*.parquet")}
    assert live <= on_disk and inputs <= on_disk
    # the failed bin's file was deleted; what the crashed executor wrote is unknown to the
    # run, so it stays as an unreferenced orphan (VACUUM's business), never in the log
    assert executor.failed_files and not any((path / f).exists() for f in executor.failed_files)
    assert len(on_disk - inputs - live) <= 1
    rest = optimize(Table.open(str(path)), OptimizeOptions(), ArrowExecutor())
    assert rest.bins_committed == 3 and rows_multiset(path) == before


def test_human_summary(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=3, rows=10, partitioned=False)
    done = _cli(str(path), "--executor", "arrow", "--dry-run")
    assert done.returncode == 0 and "would rewrite 3 files" in done.stdout, done.stdout
    done = _cli(str(path), "--executor", "arrow")
    assert done.returncode == 0 and "v2 -> v3, 3 files" in done.stdout, done.stdout


class MiscountingExecutor:
    """Reports one row fewer than it wrote for the first bin: the guard must refuse that bin."""

    name = "miscounting"

    def run(self, tasks: Sequence[BinTask]) -> list[BinResult]:
        results = ArrowExecutor().run(tasks)
        first = results[0]
        bad = BinResult(first.bin_id, first.adds, first.written, first.rows - 1, first.seconds)
        return [bad, *results[1:]]


def test_row_count_guard(tmp_path: Path) -> None:
    path = fragmented_table(tmp_path / "t", commits=3, rows=20, partitioned=True)
    before = rows_multiset(path)
    result = optimize(Table.open(str(path)), OptimizeOptions(), MiscountingExecutor())
    assert result.bins_skipped == 1 and result.bins_committed == 3
    assert result.skipped[0]["reason"] == "row count differs from the inputs' stats"
    assert rows_multiset(path) == before


def test_zorder_with_a_small_target_never_multiplies_the_file_count(tmp_path: Path) -> None:
    """A Z-order bin is a whole partition; with a target far below its files' size it used to be
    split by the target (8 files -> 112). Output is planned by bytes and capped by the inputs."""
    path = fragmented_table(tmp_path / "t", commits=8, rows=400, partitioned=False)
    before_files = len(DeltaTable(str(path)).file_uris())
    before = rows_multiset(path)
    sizes = pa.table(DeltaTable(str(path)).get_add_actions(flatten=True)).column("size_bytes")
    policy = OptimizeOptions(
        target_file_size=max(1, min(sizes.to_pylist()) // 14), z_order_by=("i32", "s")
    )
    result = optimize(Table.open(str(path)), policy, ArrowExecutor())
    assert result.error is None and result.bins_committed == 1
    assert 1 <= result.num_files_added <= before_files == result.num_files_removed
    assert len(DeltaTable(str(path)).file_uris()) <= before_files
    assert rows_multiset(path) == before


def test_a_table_with_check_constraints_is_compacted_but_not_appended_to(tmp_path: Path) -> None:
    """A rewrite changes no row, so rows already in the table satisfy its CHECK constraints:
    OPTIMIZE may compact it (it used to refuse 'checkConstraints'), while an append, whose rows
    we would have to check, is still refused with the feature named."""
    from deltalake import write_deltalake

    from tests.support.health_oracle import observe
    from txntable.engine.errors import UnsupportedWriterFeatureError

    path = tmp_path / "t"
    for i in range(4):
        write_deltalake(str(path), pa.table({"id": [i * 10 + 1, i * 10 + 2]}), mode="append")
    DeltaTable(str(path)).alter.add_constraint({"id_positive": "id > 0"})
    before = rows_multiset(path)
    table = Table.open(str(path))
    assert observe(table.snapshot(), 1 << 20).writable
    result = optimize(table, OptimizeOptions(), ArrowExecutor())
    assert result.error is None and result.num_files_removed == 4 and result.num_files_added == 1
    assert rows_multiset(path) == before
    dt = DeltaTable(str(path))
    assert dt.metadata().configuration["delta.constraints.id_positive"] == "id > 0"
    with pytest.raises(UnsupportedWriterFeatureError, match="checkConstraints"):
        Table.open(str(path)).append(pa.table({"id": [-5]}))
