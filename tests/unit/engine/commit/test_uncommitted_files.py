"""A failed write never leaves data files behind without saying so.

When the commit is refused for certain (a conflict, invalid actions, the log refusing the write:
permission denied, read-only) or a data file fails half way through a write, the files written
for it are deleted. When the commit's outcome is unknown
(the log write failed ambiguously, the attempts ran out right after such a write) the files may be
referenced by a commit that landed, so they are kept and the error names them
(``uncommitted_files`` and the message).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from tests.faults import FAIL_BEFORE, LANDED_EXISTS, FaultyStorage, read_only_dir
from txntable.engine.commit.transaction import CommitOptions
from txntable.engine.errors import (
    CommitRetriesExceededError,
    ConcurrentAppendException,
    StorageError,
    WriteRefusedError,
)
from txntable.engine.storage.factory import open_storage
from txntable.engine.table import Table

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])
QUICK = CommitOptions(backoff_initial_s=0.0, backoff_max_s=0.0, sleep=lambda _s: None)
FIRST_COMMIT = "_delta_log/00000000000000000001.json"


def _table(path: Path) -> tuple[Table, FaultyStorage]:
    Table.create(str(path), SCHEMA, partition_by=["p"])
    storage = FaultyStorage(open_storage(str(path)))
    return Table(storage), storage


def _parquet(path: Path) -> list[str]:
    return sorted(str(f.relative_to(path)) for f in path.rglob("*.parquet"))


def test_an_ambiguous_commit_failure_names_the_files_it_kept(tmp_path: Path) -> None:
    table, storage = _table(tmp_path / "t")
    storage.inject(FAIL_BEFORE, FIRST_COMMIT, times=10)  # every write of v1 fails, unanswered
    with pytest.raises(StorageError) as info:
        table.append(pa.table({"id": [1, 2], "p": ["a", "b"]}), options=QUICK)
    kept = _parquet(tmp_path / "t")
    assert len(kept) == 2
    assert sorted(info.value.uncommitted_files) == kept
    message = str(info.value)
    assert "injected failure" in message  # the cause is still said first
    assert all(path in message for path in kept) and "VACUUM" in message
    assert Table.open(str(tmp_path / "t")).snapshot().version == 0


def test_attempts_running_out_after_lost_races_delete_the_files(tmp_path: Path) -> None:
    """Every attempt lost its version to another writer (put-if-absent said so): the commit
    certainly did not land, so its files are deleted rather than left for VACUUM."""
    path = tmp_path / "t"
    _, storage = _table(path)
    other = Table.open(str(path))

    class Racing(FaultyStorage):
        def write_if_absent(self, relative: str, data: bytes) -> None:
            if relative == FIRST_COMMIT and not other.snapshot().version:
                other.append(pa.table({"id": [9], "p": ["z"]}))  # another writer wins v1
            super().write_if_absent(relative, data)

    racing = Table(Racing(storage.inner))
    options = CommitOptions(max_attempts=1, backoff_initial_s=0.0, sleep=lambda _s: None)
    with pytest.raises(CommitRetriesExceededError) as info:
        racing.append(pa.table({"id": [1], "p": ["a"]}), options=options)
    assert info.value.uncommitted_files == ()
    live = {add.path for add in Table.open(str(path)).snapshot().add_actions()}
    assert set(_parquet(path)) == live  # only the other writer's file


def test_attempts_running_out_right_after_an_ambiguous_write_keep_the_files(
    tmp_path: Path,
) -> None:
    table, storage = _table(tmp_path / "t")
    storage.inject(FAIL_BEFORE, FIRST_COMMIT)  # no answer: it may have landed
    options = CommitOptions(max_attempts=1, backoff_initial_s=0.0, sleep=lambda _s: None)
    with pytest.raises(CommitRetriesExceededError) as info:
        table.append(pa.table({"id": [1], "p": ["a"]}), options=options)
    (ours,) = info.value.uncommitted_files
    assert ours.startswith("p=a/") and ours in str(info.value)
    assert (tmp_path / "t" / ours).is_file()


def test_a_last_attempt_answered_already_exists_is_looked_at_before_giving_up(
    tmp_path: Path,
) -> None:
    """ "Already exists" on the last attempt can answer a client's retry of our own landed write:
    the commit is read before giving up, so a landed commit is acknowledged and its data files
    stay (deleting them, as for a lost race, would leave the log referencing missing files)."""
    path = tmp_path / "t"
    table, storage = _table(path)
    storage.inject(LANDED_EXISTS, FIRST_COMMIT)
    options = CommitOptions(max_attempts=1, backoff_initial_s=0.0, sleep=lambda _s: None)
    result = table.append(pa.table({"id": [1], "p": ["a"]}), options=options)
    assert result.version == 1
    (live,) = [add.path for add in Table.open(str(path)).snapshot().add_actions()]
    assert _parquet(path) == [live]


def test_a_refused_commit_deletes_its_files(tmp_path: Path) -> None:
    path = tmp_path / "t"
    _table(path)
    other = Table.open(str(path))

    class Racing(FaultyStorage):
        def write_if_absent(self, relative: str, data: bytes) -> None:
            if relative == FIRST_COMMIT and not other.snapshot().version:
                other.append(pa.table({"id": [2], "p": ["a"]}))  # lands in p=a meanwhile
            super().write_if_absent(relative, data)

    racing = Table(Racing(open_storage(str(path))))
    with pytest.raises(ConcurrentAppendException) as info:
        racing.overwrite(pa.table({"id": [3], "p": ["a"]}), "p = 'a'", options=QUICK)
    assert info.value.uncommitted_files == ()
    live = {a.path for a in Table.open(str(path)).snapshot().add_actions()}
    assert len(live) == 1 and set(_parquet(path)) == live  # the overwrite's file is gone


def test_a_write_failing_half_way_deletes_the_files_it_wrote(tmp_path: Path) -> None:
    path = tmp_path / "t"
    table, storage = _table(path)
    storage.inject(FAIL_BEFORE, "p=b/*.parquet")  # the second partition's file fails
    with pytest.raises(StorageError, match="injected failure") as info:
        table.append(pa.table({"id": [1, 2], "p": ["a", "b"]}), options=QUICK)
    assert info.value.uncommitted_files == ()
    assert _parquet(path) == []  # p=a's file, written first, is gone
    assert Table.open(str(path)).snapshot().version == 0


def test_a_commit_the_log_refuses_deletes_its_files(tmp_path: Path) -> None:
    """Permission denied on ``_delta_log`` (a real refusal of the file system): the commit
    certainly did not land, so its new data files are deleted, the write is not retried, and
    the error says so (issue 23: 3 new data files were left behind)."""
    path = tmp_path / "t"
    Table.create(str(path), SCHEMA, partition_by=["p"])
    table = Table.open(str(path))
    with read_only_dir(path / "_delta_log"):
        with pytest.raises(WriteRefusedError) as info:
            table.append(pa.table({"id": [1, 2, 3], "p": ["a", "b", "c"]}), options=QUICK)
        assert _parquet(path) == []
    assert info.value.uncommitted_files == ()
    assert "VACUUM" not in str(info.value)
    assert Table.open(str(path)).snapshot().version == 0


def test_an_ambiguous_failure_after_a_refused_one_still_keeps_the_files(tmp_path: Path) -> None:
    """Only a commit whose every write is known not to have landed deletes its files: one
    ambiguous write before the refusal keeps them."""
    _, storage = _table(tmp_path / "t")

    class ThenRefused(FaultyStorage):
        calls = 0

        def write_if_absent(self, relative: str, data: bytes) -> None:
            if relative == FIRST_COMMIT:
                self.calls += 1
                if self.calls == 1:
                    raise StorageError("injected timeout, outcome unknown")
                raise WriteRefusedError("injected: permission denied")
            super().write_if_absent(relative, data)

    flaky = Table(ThenRefused(storage.inner))
    with pytest.raises(WriteRefusedError) as info:
        flaky.append(pa.table({"id": [1], "p": ["a"]}), options=QUICK)
    (kept,) = _parquet(tmp_path / "t")
    assert info.value.uncommitted_files == (kept,)
