"""Conflict-aware OPTIMIZE: a partition another writer keeps rewriting is deferred, so the run
does not rewrite bytes that writer would make it drop.

Two identical tables; on each, a deltalake writer has recently DELETEd rows of partition
``part1`` and appended to it since. While OPTIMIZE rewrites its bins, the writer (a child process)
DELETEs rows of ``part1`` again, removing files the bins read (deterministic: the delete runs
after the rewrite and before the commit). The naive run loses its ``part1`` bin and the bytes it
rewrote; the run that avoids partitions with recent removes never planned it, drops nothing, and
says which partition it deferred and why. Rows are unchanged by either run (deltalake reads them).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable, write_deltalake

from tests.integration.optimize_helpers import batch, fragmented_table
from tests.oracle_read import read
from txntable.api.optimize_options import OptimizeOptions
from txntable.engine.table import Table
from txntable.maintenance.executor_arrow import ArrowExecutor, BinResult, BinTask
from txntable.maintenance.optimize import OptimizeResult, optimize

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
HOUR_MS = 3_600_000

DELETE = """
import sys
from deltalake import DeltaTable
DeltaTable(sys.argv[1]).delete(sys.argv[2])
"""


def delete_in_child(path: Path, predicate: str) -> None:
    """A DELETE by deltalake in its own process, as another team's job would run it."""
    done = subprocess.run(
        [sys.executable, "-c", DELETE, str(path), predicate],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]


def hot_table(path: Path) -> Path:
    """Four partitions of small files; part1 was rewritten by a DELETE a moment ago and has
    received small appends since (so it has work for OPTIMIZE again)."""
    fragmented_table(path, commits=6, rows=30, partitioned=True)
    delete_in_child(path, "p = 'part1' AND id % 7 = 1")
    for j in range(4):
        rows = batch(500_000 + 10 * j, 10, partitions=1)
        rows = rows.set_column(1, "p", [["part1"] * rows.num_rows])
        write_deltalake(str(path), rows, mode="append", partition_by=["p"])
    return path


class DeleteDuringRewrite:
    """Rewrites bins with Arrow, then lets the writer DELETE from part1 before the commit."""

    name = "arrow+writer"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.inner = ArrowExecutor()

    def run(self, tasks: Sequence[BinTask]) -> list[BinResult]:
        results = self.inner.run(tasks)
        delete_in_child(self.path, "p = 'part1' AND id % 2 = 0")
        return results


def run(path: Path, policy: OptimizeOptions) -> tuple[OptimizeResult, dict[str, Any]]:
    result = optimize(Table.open(str(path)), policy, DeleteDuringRewrite(path))
    assert result.error is None, result.error
    # every commit after the writer's DELETE is ours: the rows must be the DELETE's
    before_ours = min(result.commits) - 1
    assert DeltaTable(str(path)).history(1)[0]["operation"] == "OPTIMIZE"
    assert read(path) == {**read(path, before_ours), "version": read(path)["version"]}
    return result, result.to_json()


def test_avoiding_recently_rewritten_partitions_drops_no_bin(tmp_path: Path) -> None:
    naive_path = hot_table(tmp_path / "naive")
    avoid_path = hot_table(tmp_path / "avoid")

    naive, naive_doc = run(naive_path, OptimizeOptions())
    assert naive.bins_planned == 4
    assert naive.bins_skipped == 1 and naive.bins_committed == 3
    assert naive.skipped[0]["reason"] == "inputs removed concurrently"
    assert naive.skipped[0]["partitionValues"] == {"p": "part1"}
    assert naive.num_bytes_dropped > 0 and naive_doc["numBytesDropped"] == naive.num_bytes_dropped
    assert "deferredPartitions" not in naive_doc

    avoiding, doc = run(avoid_path, OptimizeOptions(avoid_recent_writes_ms=HOUR_MS))
    assert avoiding.bins_planned == 3
    assert avoiding.bins_skipped == 0 and avoiding.bins_committed == 3
    assert avoiding.num_bytes_dropped == 0
    (deferred,) = doc["deferredPartitions"]
    assert deferred["partitionValues"] == {"p": "part1"}
    assert deferred["reason"].startswith("1 commit(s) removed files here in the window (DELETE)")
    assert deferred["bins"] == 1 and deferred["bytes"] > 0


def test_the_job_flag_defers_in_the_dry_run_plan(tmp_path: Path) -> None:
    """``--avoid-partitions-written-within`` reaches the planner; ``--avoid-writes any`` also
    defers partitions that only received appends; a bad duration is refused, nothing changed."""
    path = hot_table(tmp_path / "t")
    base = [sys.executable, "-m", "txntable.jobs.optimize", str(path), "--executor", "arrow"]

    def plan(*flags: str) -> dict[str, Any]:
        done = subprocess.run(
            [*base, "--dry-run", *flags], cwd=ROOT, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr[-2000:]
        doc: dict[str, Any] = json.loads(done.stdout)
        return doc

    removes = plan("--avoid-partitions-written-within", "1h")
    assert [d["partitionValues"]["p"] for d in removes["deferredPartitions"]] == ["part1"]
    assert removes["plan"]["recentActivity"]["partitionsWithRemoves"] == 1
    assert removes["binsPlanned"] == 3
    every = plan("--avoid-partitions-written-within", "1h", "--avoid-writes", "any")
    assert len(every["deferredPartitions"]) == 4 and every["binsPlanned"] == 0
    version = DeltaTable(str(path)).version()
    bad = subprocess.run(
        [*base, "--avoid-partitions-written-within", "ten minutes"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2
    assert "--avoid-partitions-written-within" in bad.stderr and "not a duration" in bad.stderr
    assert DeltaTable(str(path)).version() == version


def test_hot_partitions_benchmark_runs_end_to_end() -> None:
    """``bench/hot_partitions.py --quick`` (writer process, both modes, rendering) still works;
    its figures are not checked here (they depend on timing)."""
    from bench import hot_partitions

    result = hot_partitions.run(quick=True)
    assert set(result["modes"]) == {"naive", "avoid"}
    for data in result["modes"].values():
        assert data["runs"] and all(r["error"] is None for r in data["runs"])
        assert data["writer"]["deletes"] >= len(hot_partitions.HOT)
    # the writer had rewritten both hot partitions before the first avoiding run planned
    assert result["modes"]["avoid"]["runs"][0]["partitions_deferred"] == 2
    assert "| naive |" in hot_partitions.render(result)
