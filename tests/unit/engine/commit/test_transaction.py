"""The commit path end to end: creation, commitInfo, the retry loop, lost responses, validation
before writing, feature checks, domains, ICT, hooks."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults import FAIL_BEFORE, FAIL_READ, LANDED_EXISTS, LOST_RESPONSE, FaultyStorage
from tests.unit.txn_support import (
    add,
    fast,
    log_versions,
    metadata,
    new_table,
    raw_commit,
    read_commit,
    remove,
    removes_of,
    storage_for,
)
from txntable.engine.checkpoint.write import write_checkpoint
from txntable.engine.commit.transaction import CommitResult, Transaction
from txntable.engine.errors import (
    CommitRetriesExceededError,
    ConcurrentAppendException,
    ConcurrentTransactionException,
    ConcurrentWriteException,
    InvalidArgumentError,
    InvalidCommitError,
    ProtocolChangedException,
    StorageError,
    UnsafeCommitStorageError,
    UnsupportedWriterFeatureError,
)
from txntable.engine.model.actions import (
    AddFile,
    DomainMetadata,
    Protocol,
    SetTransaction,
)
from txntable.engine.storage.base import LocalStorage, Storage
from txntable.engine.table import Table


def _commit_info(table: Table, version: int) -> dict[str, Any]:
    first = read_commit(table, version)[0]
    assert list(first) == ["commitInfo"], "commitInfo must be the first line"
    return dict(first["commitInfo"])


# -- creation ------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["memory", "local"])
def test_create_writes_protocol_metadata_and_commit_info_first(kind: str, tmp_path: Path) -> None:
    table = Table(storage_for(kind, tmp_path))
    txn = table.transaction(fast(run_id="run-7"))
    assert txn.read_version == -1 and txn.snapshot is None
    txn.set_metadata(metadata())
    txn.add(add("p=1/a"))
    result = txn.commit("CREATE TABLE AS SELECT", {"mode": "ErrorIfExists"}, {"numFiles": 1})
    assert (result.version, result.attempts, result.operation) == (0, 1, "CREATE TABLE AS SELECT")
    lines = read_commit(table, 0)
    assert [next(iter(line)) for line in lines] == ["commitInfo", "protocol", "metaData", "add"]
    assert lines[1]["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 2}
    info = lines[0]["commitInfo"]
    assert "readVersion" not in info
    assert info["operationParameters"] == {"mode": "ErrorIfExists"}
    assert info["operationMetrics"] == {"numFiles": "1"}
    assert info["isolationLevel"] == "Serializable"
    assert info["isBlindAppend"] is True
    assert info["engineInfo"].startswith("txntable/")
    assert info["txnId"] == result.txn_id
    assert info["txntableAttempt"] == 1
    assert info["txntableRunId"] == "run-7"
    assert table.snapshot().num_files == 1


def test_two_concurrent_creates_loser_gets_protocol_changed_with_hint() -> None:
    table = Table(storage_for("memory"))
    a, b = table.transaction(fast()), table.transaction(fast())
    a.set_metadata(metadata(table_id="A"))
    b.set_metadata(metadata(table_id="B"))
    b.commit("CREATE TABLE")
    with pytest.raises(ProtocolChangedException) as info:
        a.commit("CREATE TABLE")
    assert info.value.winning_version == 0
    assert "multiple writers are writing to an empty directory" in str(info.value)
    assert log_versions(table) == [0]
    assert table.snapshot().metadata.id == "B"


def test_first_commit_without_metadata_is_refused_and_nothing_is_written() -> None:
    table = Table(storage_for("memory"))
    txn = table.transaction(fast())
    txn.add(add("p=1/a"))
    with pytest.raises(InvalidCommitError) as info:
        txn.commit("WRITE")
    assert info.value.code == "DELTA_METADATA_ABSENT"
    assert table.storage.list_log() == []


def test_commit_info_of_a_later_commit_and_extra_members() -> None:
    table = new_table()
    txn = table.transaction(fast(commit_info={"userMetadata": "nightly"}))
    txn.scan("p = '2'")
    txn.add(add("p=2/e", "2"))
    txn.commit("WRITE", {"mode": "Append"}, {"numOutputRows": 10, "ok": True})
    info = _commit_info(table, 1)
    assert info["readVersion"] == 0
    assert info["isBlindAppend"] is False
    assert info["userMetadata"] == "nightly"
    assert info["operationMetrics"] == {"numOutputRows": "10", "ok": "true"}
    assert "txntableRunId" not in info


def test_reserved_commit_info_members_and_commit_info_actions_are_refused() -> None:
    table = new_table()
    txn = table.transaction(fast(commit_info={"txnId": "mine"}))
    with pytest.raises(InvalidArgumentError):
        txn.commit("WRITE")
    from txntable.engine.model.actions import CommitInfo

    with pytest.raises(InvalidArgumentError):
        table.transaction(fast()).add(CommitInfo({"operation": "X"}))
    assert log_versions(table) == [0]


def test_empty_commit_is_written_with_commit_info_only_under_snapshot_isolation() -> None:
    table = new_table()
    result = table.transaction(fast()).commit("VACUUM START")
    assert result.version == 1
    assert result.isolation_level == "SnapshotIsolation"
    assert [next(iter(line)) for line in read_commit(table, 1)] == ["commitInfo"]


def test_txn_only_commit_keeps_the_table_level_and_dedups_identical_txns() -> None:
    table = new_table()
    txn = table.transaction(fast())
    txn.add(SetTransaction("app", 3), SetTransaction("app", 3))
    result = txn.commit("STREAMING UPDATE")
    assert result.isolation_level == "Serializable"
    assert [next(iter(x)) for x in read_commit(table, 1)] == ["commitInfo", "txn"]
    assert table.snapshot().txn_version("app") == 3


def test_a_transaction_commits_once() -> None:
    table = new_table()
    txn = table.transaction(fast())
    txn.commit("Empty Commit")
    with pytest.raises(InvalidArgumentError):
        txn.commit("Empty Commit")
    with pytest.raises(InvalidArgumentError):
        txn.add(add("p=1/z"))


# -- the retry loop ------------------------------------------------------------------------------
def _blind(table: Table, path: str, part: str, operation: str = "WRITE") -> int:
    txn = table.transaction(fast())
    txn.add(add(path, part))
    return txn.commit(operation).version


def test_several_winners_are_checked_in_order_and_the_commit_lands_after_them() -> None:
    table = new_table()
    txn = Transaction(table, table.snapshot(), fast())
    txn.scan("p = '1'")
    txn.add(add("p=1/mine"))
    for i in range(3):
        _blind(table, f"p=2/w{i}", "2")
    result = txn.commit("WRITE")
    assert (result.version, result.attempts) == (4, 2)
    assert _commit_info(table, 4)["txntableAttempt"] == 2
    assert log_versions(table) == [0, 1, 2, 3, 4]


def test_conflict_in_the_third_winner_is_reported_with_that_winner() -> None:
    table = new_table()
    txn = Transaction(table, table.snapshot(), fast())
    txn.scan("p = '1'")
    txn.add(add("p=1/mine"))
    _blind(table, "p=2/w0", "2")
    _blind(table, "p=2/w1", "2")
    _blind(table, "p=1/w2", "1", operation="MERGE")
    with pytest.raises(ConcurrentAppendException) as info:
        txn.commit("WRITE")
    assert (info.value.winning_version, info.value.winning_operation) == (3, "MERGE")
    assert log_versions(table) == [0, 1, 2, 3]


class RacingStorage(FaultyStorage):
    """Before each of our commit writes, another writer takes that version (a blind append)."""

    def write_if_absent(self, relative: str, data: bytes) -> None:
        if relative.startswith("_delta_log/") and b'"operation":"RACE"' not in data:
            version = int(relative.rsplit("/", maxsplit=1)[-1].split(".", maxsplit=1)[0])
            other = (
                b'{"commitInfo":{"operation":"RACE","isBlindAppend":true}}\n'
                + json.dumps({"add": add(f"p=2/race{version}", "2").to_json()}).encode()
                + b"\n"
            )
            self.inner.write_if_absent(relative, other)
        super().write_if_absent(relative, data)


def test_max_attempts_exhausted_reports_attempts_and_versions() -> None:
    inner = storage_for("memory")
    table = Table(inner)
    txn = table.transaction(fast())
    txn.set_metadata(metadata(config={"delta.isolationLevel": "WriteSerializable"}))
    txn.commit("CREATE TABLE")
    racing = Table(RacingStorage(inner))
    loser = racing.transaction(fast(max_attempts=3))
    loser.scan()
    loser.add(add("p=1/mine"))
    with pytest.raises(CommitRetriesExceededError) as info:
        loser.commit("WRITE")
    err = info.value
    assert (err.attempts, err.start_version, err.failed_at_version) == (3, 1, 3)
    assert err.num_actions == 1
    assert log_versions(table) == [0, 1, 2, 3]  # only the racing writer's commits


def test_lost_response_is_recognised_by_txn_id_without_a_duplicate_commit() -> None:
    faulty = FaultyStorage(storage_for("memory"))
    table = new_table_on(faulty)
    faulty.inject(LOST_RESPONSE, "_delta_log/00000000000000000001.json")
    result = _append(table)
    assert result.version == 1 and result.attempts == 1
    assert log_versions(table) == [0, 1]


def test_landed_write_reported_as_exists_is_our_own_commit() -> None:
    faulty = FaultyStorage(storage_for("memory"))
    table = new_table_on(faulty)
    faulty.inject(LANDED_EXISTS, "_delta_log/00000000000000000001.json")
    result = _append(table)
    assert (result.version, result.attempts) == (1, 1)
    assert log_versions(table) == [0, 1]
    assert _commit_info(table, 1)["txnId"] == result.txn_id


def test_write_failing_before_landing_is_retried_at_the_same_version_then_given_up() -> None:
    faulty = FaultyStorage(storage_for("memory"))
    table = new_table_on(faulty)
    faulty.inject(FAIL_BEFORE, "_delta_log/00000000000000000001.json")
    result = _append(table)
    assert (result.version, result.attempts) == (1, 2)
    faulty.inject(FAIL_BEFORE, "_delta_log/00000000000000000002.json", times=5)
    with pytest.raises(StorageError):
        _append(table)
    assert log_versions(table) == [0, 1]


def new_table_on(storage: Storage) -> Table:
    table = Table(storage)
    txn = table.transaction(fast())
    txn.set_metadata(metadata())
    txn.commit("CREATE TABLE")
    return table


def _append(table: Table, path: str = "p=1/new") -> CommitResult:
    txn = table.transaction(fast())
    txn.add(add(path))
    return txn.commit("WRITE")


def test_unreadable_winner_fails_safely() -> None:
    table = new_table()
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(add("p=1/mine"))
    table.storage.write_if_absent("_delta_log/00000000000000000001.json", b"{not json\n")
    with pytest.raises(ConcurrentWriteException) as info:
        txn.commit("WRITE")
    assert info.value.winning_version == 1
    assert log_versions(table) == [0, 1]


def test_winner_read_failure_propagates_and_nothing_is_written() -> None:
    faulty = FaultyStorage(storage_for("memory"))
    table = new_table_on(faulty)
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(add("p=1/mine"))
    _append(table, "p=1/other")
    faulty.inject(FAIL_READ, "_delta_log/00000000000000000001.json")
    with pytest.raises((StorageError, ConcurrentWriteException)):
        txn.commit("WRITE")
    assert log_versions(table) == [0, 1]


def test_refuses_storage_without_put_if_absent_unless_single_writer() -> None:
    unsafe = FaultyStorage(storage_for("memory"))
    unsafe.atomic_put_if_absent = False
    table = Table(unsafe)
    txn = table.transaction(fast())
    txn.set_metadata(metadata())
    with pytest.raises(UnsafeCommitStorageError, match=r"txntable\.singleWriter=true"):
        txn.commit("CREATE TABLE")
    assert unsafe.list_log() == []
    txn = table.transaction(fast())
    txn.set_metadata(metadata(config={"txntable.singleWriter": "true"}))
    assert txn.commit("CREATE TABLE").version == 0
    assert _append(table).version == 1


# -- validation before writing -------------------------------------------------------------------
def _rejects(table: Table, *actions: Any, code: str) -> None:
    txn = table.transaction(fast())
    txn.add(*actions)
    before = log_versions(table)
    with pytest.raises(InvalidCommitError) as info:
        txn.commit("WRITE")
    assert info.value.code == code, str(info.value)
    assert log_versions(table) == before


def test_invalid_commits_are_rejected_before_anything_is_written() -> None:
    table = new_table()
    a = add("p=1/a")
    _rejects(table, add("p=1/x"), add("p=1/x"), code="DELTA_DUPLICATE_ACTIONS_FOUND")
    _rejects(table, remove(a), remove(a), code="DELTA_DUPLICATE_ACTIONS_FOUND")
    _rejects(table, a, remove(a), code="DELTA_DUPLICATE_ACTIONS_FOUND")
    _rejects(table, metadata(), metadata(), code="DELTA_MULTIPLE_METADATA_CHANGES")
    _rejects(table, Protocol(1, 3), Protocol(1, 4), code="DELTA_MULTIPLE_PROTOCOL_CHANGES")
    _rejects(
        table,
        SetTransaction("app", 1),
        SetTransaction("app", 2),
        code="DELTA_CONFLICTING_SET_TRANSACTION",
    )
    _rejects(
        table,
        AddFile(path="x", partition_values={}, size=1, modification_time=1, data_change=True),
        code="DELTA_INVALID_PARTITIONING_SCHEMA",
    )
    _rejects(
        table,
        AddFile(
            path="x",
            partition_values={"p": "1", "q": "2"},
            size=1,
            modification_time=1,
            data_change=True,
        ),
        code="DELTA_INVALID_PARTITIONING_SCHEMA",
    )
    _rejects(table, add("p=1/x"), remove(a, dc=False), code="DELTA_INCONSISTENT_DATA_CHANGE")
    _rejects(table, Protocol(1, 1), code="DELTA_INVALID_PROTOCOL_DOWNGRADE")
    _rejects(table, DomainMetadata("d", "{}"), code="DELTA_DOMAIN_METADATA_NOT_SUPPORTED")


def test_protocol_upgrade_is_accepted() -> None:
    table = new_table()
    txn = table.transaction(fast())
    txn.set_protocol(Protocol(1, 4))
    assert txn.commit("UPGRADE PROTOCOL").isolation_level == "Serializable"
    assert table.snapshot().protocol.min_writer_version == 4


def test_append_only_table() -> None:
    table = new_table(config={"delta.appendOnly": "true"})
    a = add("p=1/a")
    _rejects(table, remove(a), code="DELTA_CANNOT_MODIFY_APPEND_ONLY")
    optimize = table.transaction(fast())
    optimize.add(*removes_of(optimize.scan("p = '1'"), dc=False), add("p=1/ab", dc=False))
    assert optimize.commit("OPTIMIZE").isolation_level == "SnapshotIsolation"
    off = table.transaction(fast())
    off.set_metadata(metadata(config={"delta.appendOnly": "false"}))
    off.commit("SET TBLPROPERTIES")
    delete = table.transaction(fast())
    delete.add(*removes_of(delete.scan("p = '2'")))
    assert delete.commit("DELETE").version == 3


def test_unsupported_writer_features_are_refused_before_writing(table_copy: Any) -> None:
    path = table_copy("table_with_column_mapping")
    table = Table.open(str(path))
    before = log_versions(table)
    txn = table.transaction(fast())
    # new rows are refused; a rewrite (dataChange=false) is not: OPTIMIZE maps the columns
    txn.add(add("new.parquet", partitioned=False))
    with pytest.raises(UnsupportedWriterFeatureError, match="columnMapping"):
        txn.commit("WRITE")
    assert log_versions(table) == before
    plain = new_table()
    txn = plain.transaction(fast())
    txn.set_protocol(Protocol(1, 7, writer_features=["appendOnly", "invariants", "fancyFuture"]))
    with pytest.raises(UnsupportedWriterFeatureError, match="fancyFuture"):
        txn.commit("UPGRADE PROTOCOL")
    assert log_versions(plain) == [0]


def test_whole_file_writes_to_a_deletion_vector_table_copy_the_dv(table_copy: Any) -> None:
    table = Table.open(str(table_copy("table-with-dv-small")))
    txn = table.transaction(fast())
    files = txn.scan()
    with_dv = [row for row in files.to_pylist() if row["deletionVector"] is not None]
    assert with_dv
    live = next(table.snapshot().add_actions())
    txn.add(live.to_remove(deletion_timestamp=1, data_change=True))
    result = txn.commit("DELETE")
    removed = read_commit(table, result.version)[1]["remove"]
    assert removed["deletionVector"] == live.deletion_vector.to_json()  # type: ignore[union-attr]
    assert table.snapshot().num_files == 0


def test_winner_upgrading_to_an_unsupported_feature_is_refused() -> None:
    table = new_table()
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(add("p=1/mine"))
    raw_commit(
        table,
        1,
        [Protocol(1, 7, writer_features=["appendOnly", "invariants", "icebergCompatV1"])],
        {"operation": "UPGRADE PROTOCOL"},
    )
    with pytest.raises(UnsupportedWriterFeatureError, match="icebergCompatV1"):
        txn.commit("WRITE")
    assert log_versions(table) == [0, 1]


# -- domains -------------------------------------------------------------------------------------
DOMAIN_PROTOCOL = Protocol(1, 7, writer_features=["appendOnly", "invariants", "domainMetadata"])


@pytest.mark.parametrize(("mine", "theirs", "conflict"), [("a", "a", True), ("a", "b", False)])
def test_domain_metadata_same_domain_conflicts(mine: str, theirs: str, conflict: bool) -> None:
    table = new_table(protocol=DOMAIN_PROTOCOL)
    snapshot = table.snapshot()
    a = Transaction(table, snapshot, fast())
    b = Transaction(table, snapshot, fast())
    a.add(DomainMetadata(mine, '{"x":1}'))
    b.add(DomainMetadata(theirs, '{"x":2}'))
    b.commit("DOMAIN UPDATE")
    if conflict:
        with pytest.raises(ConcurrentTransactionException, match="metadata domain a"):
            a.commit("DOMAIN UPDATE")
    else:
        assert a.commit("DOMAIN UPDATE").version == 2
        assert set(table.snapshot().domains) == {"a", "b"}


def test_system_domains_are_not_modified() -> None:
    table = new_table(protocol=DOMAIN_PROTOCOL)
    _rejects(
        table, DomainMetadata("delta.rowTracking", "{}"), code="DELTA_CANNOT_MODIFY_SYSTEM_DOMAIN"
    )


# -- in-commit timestamps --------------------------------------------------------------------------
ICT_PROTOCOL = Protocol(1, 7, writer_features=["appendOnly", "invariants", "inCommitTimestamp"])


def test_in_commit_timestamps_stay_monotonic_across_retries_and_future_winners() -> None:
    table = new_table(protocol=ICT_PROTOCOL, config={"delta.enableInCommitTimestamps": "true"})
    first = _commit_info(table, 0)["inCommitTimestamp"]
    txn = Transaction(table, table.snapshot(), fast())
    txn.add(add("p=1/mine"))
    future = int(time.time() * 1000) + 3_600_000
    raw_commit(
        table,
        1,
        [add("p=2/w", "2")],
        {"operation": "WRITE", "isBlindAppend": True, "inCommitTimestamp": future},
    )
    txn.commit("WRITE")
    mine = _commit_info(table, 2)["inCommitTimestamp"]
    assert first < future < mine and mine == future + 1
    assert table.snapshot().timestamp_ms == mine
    later = _append(table, "p=1/later")
    assert _commit_info(table, later.version)["inCommitTimestamp"] > mine


def test_enabling_ict_on_an_existing_table_records_the_enablement_version() -> None:
    table = new_table(protocol=ICT_PROTOCOL)
    txn = Transaction(table, table.snapshot(), fast())
    txn.set_metadata(metadata(config={"delta.enableInCommitTimestamps": "true"}))
    _append(table, "p=2/winner")  # the enablement lands at version 2, not 1
    result = txn.commit("SET TBLPROPERTIES")
    assert result.version == 2
    config = table.snapshot().configuration
    info = _commit_info(table, 2)
    assert config["delta.inCommitTimestampEnablementVersion"] == "2"
    assert config["delta.inCommitTimestampEnablementTimestamp"] == str(info["inCommitTimestamp"])
    later = _append(table, "p=1/later")
    assert _commit_info(table, later.version)["inCommitTimestamp"] > info["inCommitTimestamp"]
    assert table.version_at(info["inCommitTimestamp"]) == 2


# -- post-commit hooks and observers -------------------------------------------------------------
def test_post_commit_hooks_run_and_their_errors_never_fail_the_commit(
    caplog: pytest.LogCaptureFixture,
) -> None:
    table = new_table()
    seen: list[int] = []

    def record(t: Table, result: CommitResult) -> None:
        seen.append(result.version)

    def broken(t: Table, result: CommitResult) -> None:
        raise RuntimeError("checkpoint failed")

    txn = table.transaction(fast(post_commit_hooks=(broken, record)))
    txn.add(add("p=1/z"))
    with caplog.at_level(logging.ERROR):
        result = txn.commit("WRITE")
    assert result.version == 1 and seen == [1]
    assert "post-commit hook" in caplog.text


class _Broken:
    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any) -> None:
            raise RuntimeError("observer down")

        return fail


def test_a_failing_observer_never_fails_the_commit() -> None:
    table = new_table()
    txn = table.transaction(fast(observer=_Broken()))  # type: ignore[arg-type]
    txn.add(add("p=1/z"))
    assert txn.commit("WRITE").version == 1


def test_non_json_commit_parameters_are_refused_before_writing() -> None:
    table = new_table()
    txn = table.transaction(fast())
    with pytest.raises(InvalidArgumentError, match="not valid JSON"):
        txn.commit("WRITE", {"when": object()})
    assert log_versions(table) == [0]


def test_threads_racing_for_versions_all_land_once(tmp_path: Path) -> None:
    import threading

    table = new_table("local", tmp_path)
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            for i in range(3):
                mine = Table(table.storage)
                txn = mine.transaction(fast())
                txn.add(add(f"p=1/t{n}-{i}"))
                txn.commit("WRITE")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert log_versions(table) == list(range(19))
    assert table.snapshot().num_files == 4 + 18
    txn_ids = [_commit_info(table, v)["txnId"] for v in range(19)]
    assert len(set(txn_ids)) == 19


@pytest.mark.parametrize(("deleted", "conflict"), [("p=1/a", True), ("p=1/b", False)])
def test_optimize_tracks_only_the_files_it_compacts(deleted: str, conflict: bool) -> None:
    from txntable.engine.errors import ConcurrentDeleteReadException

    table = new_table()
    snapshot = table.snapshot()
    optimize = Transaction(table, snapshot, fast())
    files = optimize.scan("p = '1'", track_files=False)
    assert files.num_rows == 2
    optimize.track_read_files(["p=1/a"])
    optimize.add(remove(add("p=1/a"), dc=False), add("p=1/a2", dc=False))
    delete = Transaction(table, snapshot, fast())
    delete.add(remove(add(deleted)))
    delete.commit("DELETE")
    if conflict:
        with pytest.raises(ConcurrentDeleteReadException):
            optimize.commit("OPTIMIZE")
    else:
        assert optimize.commit("OPTIMIZE").version == 2


def test_in_commit_timestamp_after_a_checkpoint_follows_a_writer_whose_clock_runs_ahead(
    tmp_path: Path,
) -> None:
    """A snapshot at a checkpoint takes the checkpointed commit's inCommitTimestamp, not the file's
    modification time: our next timestamp never goes backwards after a writer a day ahead."""
    table = new_table(
        "local", tmp_path, protocol=ICT_PROTOCOL, config={"delta.enableInCommitTimestamps": "true"}
    )
    ahead = int(time.time() * 1000) + 86_400_000
    skewed = Transaction(table, table.snapshot(), fast(clock_ms=lambda: ahead))
    skewed.add(add("p=2/ahead", "2"))
    version = skewed.commit("WRITE").version
    write_checkpoint(table.snapshot())
    assert isinstance(table.storage, LocalStorage)
    fresh = Table(LocalStorage(table.storage.root_path))  # a new process: loads the checkpoint
    snapshot = fresh.snapshot()
    assert snapshot.checkpoint_version == version and snapshot.version == version
    assert snapshot.timestamp_ms == ahead
    ours = _append(fresh, "p=1/ours")
    assert _commit_info(fresh, ours.version)["inCommitTimestamp"] == ahead + 1
