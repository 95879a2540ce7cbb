"""Isolation levels: the table property, Spark's downgrade rule, changesData, and the
WriteSerializable interop case with writers that omit isBlindAppend (delta-rs)."""

from __future__ import annotations

import pytest

from tests.unit.txn_support import add, fast, log_versions, metadata, new_table, raw_commit, remove
from txntable.engine.commit.isolation import (
    IsolationLevel,
    level_to_use,
    operation_changes_data,
    table_isolation_level,
)
from txntable.engine.commit.transaction import Transaction
from txntable.engine.errors import ConcurrentAppendException, InvalidArgumentError
from txntable.engine.model.actions import (
    AddCDCFile,
    DomainMetadata,
    Protocol,
    SetTransaction,
)

S = IsolationLevel.SERIALIZABLE
WS = IsolationLevel.WRITE_SERIALIZABLE
SI = IsolationLevel.SNAPSHOT_ISOLATION


@pytest.mark.parametrize(
    ("value", "level"),
    [
        (None, S),
        ("", S),
        ("Serializable", S),
        ("serializable", S),
        ("WriteSerializable", WS),
        (" WRITESERIALIZABLE ", WS),
    ],
)
def test_table_level_is_read_case_insensitively(value: str | None, level: IsolationLevel) -> None:
    config = {} if value is None else {"delta.isolationLevel": value}
    assert table_isolation_level(config) is level


@pytest.mark.parametrize("value", ["SnapshotIsolation", "ReadCommitted", "x"])
def test_other_table_levels_are_refused(value: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"delta\.isolationLevel"):
        table_isolation_level({"delta.isolationLevel": value})


def test_changes_data_follows_spark() -> None:
    for op in ("WRITE", "DELETE", "MERGE", "UPDATE", "CREATE TABLE AS SELECT", "REPLACE TABLE"):
        assert operation_changes_data(op), op
    for op in ("OPTIMIZE", "CREATE TABLE", "SET TBLPROPERTIES", "VACUUM END", "Something New"):
        assert not operation_changes_data(op), op


A = add("p=1/a")
REARRANGE = [remove(A, dc=False), add("p=1/c", dc=False)]


@pytest.mark.parametrize(
    ("actions", "table_level", "changes_data", "expected"),
    [
        (REARRANGE, S, False, SI),  # OPTIMIZE
        (REARRANGE, WS, False, SI),
        (REARRANGE, WS, True, WS),  # a data-changing operation that happens to rewrite
        (REARRANGE, S, True, SI),  # Serializable only looks at the actions
        ([remove(A), add("p=1/c")], S, True, S),
        ([], S, False, SI),  # empty transaction
        ([], WS, True, WS),
        ([metadata()], S, False, S),  # a metadata-only change is never downgraded
        ([metadata()], WS, False, WS),
        ([Protocol(1, 3)], S, False, S),
        ([SetTransaction("a", 1)], S, False, S),
        ([DomainMetadata("mine", "{}"), *REARRANGE], S, False, S),
        ([DomainMetadata("delta.rowTracking", "{}"), *REARRANGE], S, False, SI),
        ([AddCDCFile(path="_change_data/x", size=1)], WS, False, SI),
    ],
    ids=[
        "rearrange-S-optimize",
        "rearrange-WS-optimize",
        "rearrange-WS-data-changing",
        "rearrange-S-data-changing",
        "remove-add-S-data-changing",
        "empty-S",
        "empty-WS-data-changing",
        "metadata-S",
        "metadata-WS",
        "protocol-S",
        "txn-S",
        "own-domain-and-rearrange-S",
        "rowTracking-domain-and-rearrange-S",
        "cdc-WS",
    ],
)
def test_downgrade_rule(
    actions: list[object], table_level: IsolationLevel, changes_data: bool, expected: IsolationLevel
) -> None:
    assert level_to_use(actions, table_level, changes_data) is expected  # type: ignore[arg-type]


@pytest.mark.parametrize("level", ["Serializable", "WriteSerializable"])
def test_optimize_commits_under_snapshot_isolation_at_both_levels(level: str) -> None:
    table = new_table(level=level)
    txn = table.transaction(fast())
    files = txn.scan("p = '1'")
    assert files.num_rows == 2
    txn.add(remove(add("p=1/a"), dc=False), remove(add("p=1/b"), dc=False))
    txn.add(add("p=1/ab", dc=False))
    assert txn.commit("OPTIMIZE").isolation_level == "SnapshotIsolation"


@pytest.mark.parametrize("level", ["Serializable", "writeserializable"])
def test_metadata_change_is_not_downgraded_and_sees_all_appends(level: str) -> None:
    table = new_table(level=level)
    snapshot = table.snapshot()
    current = Transaction(table, snapshot, fast())
    current.read_whole_table()
    current.set_metadata(metadata(config={"delta.isolationLevel": level, "comment": "x"}))
    winner = Transaction(table, snapshot, fast())
    winner.add(add("p=2/new", "2"))
    winner.commit("WRITE")
    with pytest.raises(ConcurrentAppendException):
        current.commit("SET TBLPROPERTIES")


def test_blind_metadata_change_commits_at_the_table_level() -> None:
    table = new_table(level="WriteSerializable")
    snapshot = table.snapshot()
    current = Transaction(table, snapshot, fast())
    current.set_metadata(metadata(config={"delta.isolationLevel": "WriteSerializable", "c": "1"}))
    winner = Transaction(table, snapshot, fast())
    winner.add(add("p=2/new", "2"))
    winner.commit("WRITE")
    result = current.commit("SET TBLPROPERTIES")
    assert (result.version, result.isolation_level) == (2, "WriteSerializable")


@pytest.mark.parametrize(
    ("blind_marker", "conflict"),
    [({"isBlindAppend": True}, False), ({}, True), ({"isBlindAppend": False}, True)],
    ids=["isBlindAppend=true", "isBlindAppend missing (delta-rs)", "isBlindAppend=false"],
)
def test_write_serializable_reader_writer_vs_foreign_append(
    blind_marker: dict[str, bool], conflict: bool
) -> None:
    table = new_table(level="WriteSerializable")
    current = Transaction(table, table.snapshot(), fast())
    current.add(*[remove(add(p)) for p in ("p=1/a", "p=1/b")])
    current.scan("p = '1'")
    current.add(add("p=1/rewritten"))
    info = {"operation": "WRITE", "engineInfo": "delta-rs:0.x", **blind_marker}
    raw_commit(table, 1, [add("p=1/foreign")], info)
    if conflict:
        with pytest.raises(ConcurrentAppendException) as err:
            current.commit("UPDATE")
        assert err.value.winning_version == 1
        assert log_versions(table) == [0, 1]
    else:
        result = current.commit("UPDATE")
        assert (result.version, result.isolation_level) == (2, "WriteSerializable")
