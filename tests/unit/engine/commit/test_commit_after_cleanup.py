"""A commit is never acknowledged in a hole that log cleanup left below a newer checkpoint.

Put-if-absent succeeds on a version whose file cleanup deleted; before the probe and the
confirmation in the commit loop, a writer holding an old snapshot was told "committed at N" while
every reader started from the newer checkpoint and never saw its rows.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tests.unit.txn_support import add, fast, log_versions, new_table
from txntable.engine.checkpoint.cleanup import cleanup_expired_logs
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.errors import ConcurrentModificationException, TransactionTooOldError
from txntable.engine.storage.base import LocalStorage
from txntable.engine.table import Table


def _append(table: Table, name: str) -> int:
    txn = table.transaction(fast())
    txn.add(add(name))
    return txn.commit("WRITE").version


def _age_log(table: Table, days: int) -> None:
    """Set every log file's modification time ``days`` back (an aged log)."""
    assert isinstance(table.storage, LocalStorage)
    log_dir = Path(table.storage.root_path) / "_delta_log"
    old = time.time() - days * 86400
    for entry in log_dir.iterdir():
        if entry.is_file():
            os.utime(entry, (old, old))


def _aged_and_cleaned(tmp_path: Path) -> tuple[Table, int]:
    """Versions 0-20, a checkpoint at 15, everything older than the retention: cleanup keeps
    15 and later only."""
    table = new_table("local", tmp_path)
    for i in range(20):
        _append(table, f"p=1/f{i}")
    write_checkpoint(table.snapshot(version=15))
    _age_log(table, 40)
    result = cleanup_expired_logs(table.snapshot())
    assert result.checkpoint_version == 15
    assert log_versions(table)[0] == 15
    return table, 20


def test_old_snapshot_cannot_commit_into_a_cleaned_version(tmp_path: Path) -> None:
    table = new_table("local", tmp_path)
    for i in range(20):
        _append(table, f"p=1/f{i}")
    old = table.snapshot(version=5)
    write_checkpoint(table.snapshot(version=15))
    _age_log(table, 40)
    cleanup_expired_logs(table.snapshot())
    before = table.snapshot()

    txn = table.transaction(fast())
    txn.snapshot, txn.read_version = old, old.version  # a writer that read long ago
    txn.add(add("p=1/late"))
    with pytest.raises(TransactionTooOldError, match="read the table again"):
        txn.commit("WRITE")

    assert 6 not in log_versions(table)  # nothing written into the hole
    after = table.snapshot()
    assert after.version == before.version
    assert after.num_files == before.num_files


def test_too_old_is_a_concurrent_modification(tmp_path: Path) -> None:
    # callers that redo work on a conflict (OPTIMIZE bins, write retries) redo it here too
    assert issubclass(TransactionTooOldError, ConcurrentModificationException)
    table, latest = _aged_and_cleaned(tmp_path)
    assert _append(table, "p=1/fresh") == latest + 1


def test_hole_opened_during_the_write_is_withdrawn(tmp_path: Path) -> None:
    """Cleanup empties version N between the probe and the write: the commit that lands there is
    withdrawn and refused, never acknowledged."""
    table = new_table("local", tmp_path)
    for i in range(5):
        _append(table, f"p=1/f{i}")
    storage = table.storage
    assert isinstance(storage, LocalStorage)

    class Racing(LocalStorage):
        raced = False

        def write_if_absent(self, relative: str, data: bytes) -> None:
            if relative.endswith(f"{6:020d}.json") and not self.raced:
                self.raced = True
                other = Table(LocalStorage(storage.root_path))
                _append(other, "p=2/winner6")  # version 6
                _append(other, "p=2/winner7")  # version 7
                write_checkpoint(other.snapshot())
                time.sleep(0.01)
                for v in range(7):  # cleanup below the checkpoint at 7
                    os.unlink(Path(storage.root_path) / "_delta_log" / f"{v:020d}.json")
            super().write_if_absent(relative, data)

    racing = Table(Racing(storage.root_path))
    txn = racing.transaction(fast())
    txn.add(add("p=1/lost"))
    with pytest.raises(TransactionTooOldError, match="withdrawn"):
        txn.commit("WRITE")
    assert log_versions(table) == [7]
    latest = table.snapshot()
    paths = set(latest.files().column("path").to_pylist())
    assert "p=1/lost" not in paths and {"p=2/winner6", "p=2/winner7"} <= paths


def test_fresh_commit_after_a_legitimate_cleanup_is_confirmed(tmp_path: Path) -> None:
    """A checkpoint written after our commit covers it even when cleanup then removes the commit
    before ours: that commit is part of the history and is acknowledged."""
    table = new_table("local", tmp_path)
    _append(table, "p=1/a0")
    storage = table.storage
    assert isinstance(storage, LocalStorage)

    class CleanedRightAfter(LocalStorage):
        def write_if_absent(self, relative: str, data: bytes) -> None:
            super().write_if_absent(relative, data)
            if relative.endswith(f"{2:020d}.json"):
                time.sleep(0.01)
                write_checkpoint(Table(LocalStorage(storage.root_path)).snapshot())
                os.unlink(Path(storage.root_path) / "_delta_log" / f"{1:020d}.json")

    txn = Table(CleanedRightAfter(storage.root_path)).transaction(fast())
    txn.add(add("p=1/mine"))
    assert txn.commit("WRITE").version == 2
    assert "p=1/mine" in table.snapshot().files().column("path").to_pylist()
