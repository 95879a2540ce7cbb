"""Delta's conflict matrix (Delta Spark's documented conflicts by operation and isolation level)
through real transactions.

Every case starts transactions A (current) and B (winner) from the same snapshot at version 0,
commits B (version 1), then commits A, and asserts the exact outcome: A lands at version 2, or A
fails with the exact exception class naming B's version and operation. Each case runs under
Serializable and WriteSerializable, on a partitioned and an unpartitioned table (where ``p`` is a
data column, so ``p = '1'`` prunes nothing and is not a partition predicate).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.unit.txn_support import add, fast, metadata, new_table, read_commit, remove, removes_of
from txntable.engine.commit.transaction import Transaction
from txntable.engine.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentModificationException,
    ConcurrentTransactionException,
    MetadataChangedException,
)
from txntable.engine.model.actions import SetTransaction

S, WS = "Serializable", "WriteSerializable"
CA, CDR, CDD = (
    ConcurrentAppendException,
    ConcurrentDeleteReadException,
    ConcurrentDeleteDeleteException,
)
Expect = type[ConcurrentModificationException] | None
Step = Callable[[Transaction, bool, str], str]  # (txn, partitioned, tag) -> operation name


def _path(part: str, name: str, partitioned: bool) -> str:
    return f"p={part}/{name}" if partitioned else name


def _new(t: Transaction, part: str, partitioned: bool, tag: str, dc: bool = True) -> None:
    t.add(add(_path(part, f"{tag}-new-{part}", partitioned), part, partitioned=partitioned, dc=dc))


# -- the four operations ------------------------------------------------------------------------
def insert(t: Transaction, partitioned: bool, tag: str) -> str:
    """Blind append into p=1."""
    _new(t, "1", partitioned, tag)
    return "WRITE"


def delete_p1(t: Transaction, partitioned: bool, tag: str) -> str:
    """DELETE WHERE p = '1' removing whole files."""
    t.add(*removes_of(t.scan("p = '1'")))
    return "DELETE"


def overwrite(t: Transaction, partitioned: bool, tag: str) -> str:
    """Overwrite the whole table: read all, remove all, add one file."""
    t.read_whole_table()
    t.add(*removes_of(t.scan()))
    _new(t, "1", partitioned, tag)
    return "WRITE"


def optimize_p1(t: Transaction, partitioned: bool, tag: str) -> str:
    """Compact p=1: remove its files and add one, all with dataChange=false."""
    t.add(*removes_of(t.scan("p = '1'"), dc=False))
    _new(t, "1", partitioned, tag, dc=False)
    return "OPTIMIZE"


OPS: dict[str, Step] = {
    "INSERT": insert,
    "DELETE": delete_p1,
    "OVERWRITE": overwrite,
    "OPTIMIZE": optimize_p1,
}


def _s_only(exc: Expect) -> Callable[[str, bool], Expect]:
    """A conflict under Serializable only (WriteSerializable orders blind appends first)."""
    return lambda level, _p: exc if level == S else None


def _always(exc: Expect) -> Callable[[str, bool], Expect]:
    return lambda _l, _p: exc


# current -> winner -> expected outcome (same for partitioned and unpartitioned tables)
PAIRS: dict[tuple[str, str], Callable[[str, bool], Expect]] = {
    ("INSERT", "INSERT"): _always(None),
    ("INSERT", "DELETE"): _always(None),
    ("INSERT", "OVERWRITE"): _always(None),
    ("INSERT", "OPTIMIZE"): _always(None),
    ("DELETE", "INSERT"): _s_only(CA),
    ("DELETE", "DELETE"): _always(CDR),
    ("DELETE", "OVERWRITE"): _always(CA),
    ("DELETE", "OPTIMIZE"): _always(CA),  # compacted adds match the predicate (rule 6 first)
    ("OVERWRITE", "INSERT"): _s_only(CA),
    ("OVERWRITE", "DELETE"): _always(CDR),
    ("OVERWRITE", "OVERWRITE"): _always(CA),
    ("OVERWRITE", "OPTIMIZE"): _always(CA),
    ("OPTIMIZE", "INSERT"): _always(None),  # SnapshotIsolation
    ("OPTIMIZE", "DELETE"): _always(CDR),
    ("OPTIMIZE", "OVERWRITE"): _always(CDR),
    ("OPTIMIZE", "OPTIMIZE"): _always(CDR),
}


# -- the rows of the matrix --------------------------------------------------------------------
def read_all_append(t: Transaction, p: bool, tag: str) -> str:
    t.scan()
    _new(t, "1", p, tag)
    return "WRITE"


def read_p1_write_p1(t: Transaction, p: bool, tag: str) -> str:
    t.scan("p = '1'")
    _new(t, "1", p, tag)
    return "WRITE"


def blind_p2(t: Transaction, p: bool, tag: str) -> str:
    _new(t, "2", p, tag)
    return "WRITE"


def blind_p3(t: Transaction, p: bool, tag: str) -> str:
    _new(t, "3", p, tag)
    return "WRITE"


def read_p2_append_p2(t: Transaction, p: bool, tag: str) -> str:
    t.scan("p = '2'")
    _new(t, "2", p, tag)
    return "WRITE"


def read_p3_append_p3(t: Transaction, p: bool, tag: str) -> str:
    t.scan("p = '3'")
    _new(t, "3", p, tag)
    return "WRITE"


def replace_where_p3(t: Transaction, p: bool, tag: str) -> str:
    files = t.scan("p = '3'")
    if p:
        assert files.num_rows == 0  # an empty range
    else:
        t.add(*removes_of(files))
    _new(t, "3", p, tag)
    return "WRITE"


def change_metadata(t: Transaction, p: bool, tag: str) -> str:
    t.set_metadata(metadata(p, {"delta.isolationLevel": _level_of(t), "owner": "x"}))
    return "SET TBLPROPERTIES"


def _level_of(t: Transaction) -> str:
    assert t.snapshot is not None
    return t.snapshot.configuration["delta.isolationLevel"]


def rewrite_p1(t: Transaction, p: bool, tag: str) -> str:
    files = t.scan("p = '1'")
    t.add(*removes_of(files))
    _new(t, "1", p, tag)
    return "UPDATE"


def read_all_rewrite(t: Transaction, p: bool, tag: str) -> str:
    t.add(*removes_of(t.scan()))
    _new(t, "1", p, tag)
    return "WRITE"


def empty(t: Transaction, p: bool, tag: str) -> str:
    return "Empty Commit"


def _file_a(p: bool) -> str:
    return _path("1", "a", p)


def read_p1_and_write(t: Transaction, p: bool, tag: str) -> str:
    """Reads the files of p=1 (file a among them) and appends."""
    t.scan("p = '1'")
    _new(t, "1", p, tag)
    return "WRITE"


def delete_file_a(t: Transaction, p: bool, tag: str) -> str:
    rows = t.scan("p = '1'")
    t.add(*[r for r in removes_of(rows) if r.path == _file_a(p)])
    return "DELETE"


def delete_file_a_unread(t: Transaction, p: bool, tag: str) -> str:
    t.add(remove(add(_file_a(p), "1", partitioned=p)))
    return "DELETE"


def delete_file_c(t: Transaction, p: bool, tag: str) -> str:
    t.add(remove(add(_path("2", "c", p), "2", partitioned=p)))
    return "DELETE"


def whole_table_reader(t: Transaction, p: bool, tag: str) -> str:
    t.read_whole_table()
    _new(t, "1", p, tag)
    return "WRITE"


def app_a_read_and_write(t: Transaction, p: bool, tag: str) -> str:
    assert t.txn_version("app-a") is None
    t.add(SetTransaction(app_id="app-a", version=1))
    _new(t, "1", p, tag)
    return "STREAMING UPDATE"


def app_a_read_only(t: Transaction, p: bool, tag: str) -> str:
    t.txn_version("app-a")
    _new(t, "1", p, tag)
    return "WRITE"


def app_a_write(t: Transaction, p: bool, tag: str) -> str:
    t.add(SetTransaction(app_id="app-a", version=7))
    _new(t, "2", p, tag)
    return "STREAMING UPDATE"


def app_b_write(t: Transaction, p: bool, tag: str) -> str:
    t.add(SetTransaction(app_id="app-b", version=7))
    _new(t, "2", p, tag)
    return "STREAMING UPDATE"


def _partition_only(
    partitioned: Expect, unpartitioned_s: Expect, unpartitioned_ws: Expect
) -> Callable[[str, bool], Expect]:
    def outcome(level: str, p: bool) -> Expect:
        if p:
            return partitioned
        return unpartitioned_s if level == S else unpartitioned_ws

    return outcome


@dataclass(frozen=True)
class Row:
    name: str
    current: Step
    winner: Step
    expect: Callable[[str, bool], Expect]


ROWS = [
    Row(
        "blind append | metadata change", insert, change_metadata, _always(MetadataChangedException)
    ),
    Row("read all + append | blind append", read_all_append, insert, _s_only(CA)),
    Row("read all + append | non-blind append", read_all_append, read_p2_append_p2, _always(CA)),
    Row("blind append | remove + add", insert, rewrite_p1, _always(None)),
    Row("read all + remove + add | empty commit", read_all_rewrite, empty, _always(None)),
    Row(
        "read p=1 + write p=1 | append to p=2",
        read_p1_write_p1,
        blind_p2,
        _partition_only(None, CA, None),
    ),
    Row(
        "read p=1 + write p=1 | non-blind append to p=2",
        read_p1_write_p1,
        read_p2_append_p2,
        _partition_only(None, CA, CA),
    ),
    Row("read p=1 | append p=1", read_p1_write_p1, insert, _s_only(CA)),
    Row("full scan | append anywhere", read_all_append, blind_p2, _s_only(CA)),
    Row("read file X | remove X", read_p1_and_write, delete_file_a, _always(CDR)),
    Row("remove X (read) | remove X", delete_file_a, delete_file_a, _always(CDR)),
    Row("remove X (not read) | remove X", delete_file_a_unread, delete_file_a_unread, _always(CDD)),
    Row("rearrange A,B->C | append elsewhere", optimize_p1, blind_p2, _always(None)),
    Row(
        "rearrange A,B->C | non-blind append elsewhere",
        optimize_p1,
        read_p2_append_p2,
        _always(None),
    ),
    Row("rearrange A,B->C | remove A", optimize_p1, delete_file_a, _always(CDR)),
    Row("read_whole_table | any remove", whole_table_reader, delete_file_c, _always(CDR)),
    Row(
        "txn(a) read+write | txn(a)",
        app_a_read_and_write,
        app_a_write,
        _always(ConcurrentTransactionException),
    ),
    Row(
        "txn(a) read | txn(a)",
        app_a_read_only,
        app_a_write,
        _always(ConcurrentTransactionException),
    ),
    Row("txn(a) | txn(b)", app_a_read_and_write, app_b_write, _always(None)),
    Row("replaceWhere empty range | add inside", replace_where_p3, blind_p3, _s_only(CA)),
    Row(
        "replaceWhere empty range | non-blind add inside",
        replace_where_p3,
        read_p3_append_p3,
        _always(CA),
    ),
    Row(
        "replaceWhere empty range | add outside",
        replace_where_p3,
        blind_p2,
        _partition_only(None, CA, None),
    ),
    Row("DELETE p=1 | OPTIMIZE p=1", delete_p1, optimize_p1, _always(CA)),
    Row("OPTIMIZE | blind append", optimize_p1, insert, _always(None)),
    Row("blind append | OPTIMIZE", insert, optimize_p1, _always(None)),
]


def run_case(
    current: Step, winner: Step, level: str, partitioned: bool, kind: str, tmp_path: Path | None
) -> tuple[Expect | None, object]:
    table = new_table(kind, tmp_path, partitioned=partitioned, level=level)
    snapshot = table.snapshot()
    a = Transaction(table, snapshot, fast(table_name="matrix"))
    b = Transaction(table, snapshot, fast(table_name="matrix"))
    a_op = current(a, partitioned, "cur")
    b_op = winner(b, partitioned, "win")
    assert b.commit(b_op).version == 1
    try:
        result = a.commit(a_op)
    except ConcurrentModificationException as exc:
        assert exc.winning_version == 1
        assert exc.winning_operation == b_op
        assert exc.winning_commit_info.get("operation") == b_op
        return type(exc), exc
    assert result.version == 2
    return None, result


def _check(expected: Expect, got: Expect | None, detail: object) -> None:
    assert got is expected, f"expected {expected and expected.__name__}, got {got}: {detail}"


LEVELS = [S, WS]
LAYOUTS = [pytest.param(True, id="partitioned"), pytest.param(False, id="unpartitioned")]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("partitioned", LAYOUTS)
@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_conflict_matrix_rows(row: Row, partitioned: bool, level: str) -> None:
    got, detail = run_case(row.current, row.winner, level, partitioned, "memory", None)
    _check(row.expect(level, partitioned), got, detail)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("partitioned", LAYOUTS)
@pytest.mark.parametrize("pair", list(PAIRS), ids=[f"{c} after {w}" for c, w in PAIRS])
def test_operation_pairs(pair: tuple[str, str], partitioned: bool, level: str) -> None:
    current, winner = pair
    got, detail = run_case(OPS[current], OPS[winner], level, partitioned, "memory", None)
    _check(PAIRS[pair](level, partitioned), got, detail)


@pytest.mark.parametrize("pair", list(PAIRS), ids=[f"{c} after {w}" for c, w in PAIRS])
def test_operation_pairs_on_local_disk(pair: tuple[str, str], tmp_path: Path) -> None:
    current, winner = pair
    got, detail = run_case(OPS[current], OPS[winner], S, True, "local", tmp_path)
    _check(PAIRS[pair](S, True), got, detail)


@pytest.mark.parametrize("level", LEVELS)
def test_optimize_records_snapshot_isolation_and_append_records_table_level(level: str) -> None:
    table = new_table(level=level)
    snapshot = table.snapshot()
    a = Transaction(table, snapshot, fast())
    b = Transaction(table, snapshot, fast())
    op = optimize_p1(a, True, "cur")
    b.commit(insert(b, True, "win"))
    assert a.commit(op).isolation_level == "SnapshotIsolation"
    info = read_commit(table, 2)[0]["commitInfo"]
    assert info["isolationLevel"] == "SnapshotIsolation"
    assert info["isBlindAppend"] is False
    assert read_commit(table, 1)[0]["commitInfo"]["isolationLevel"] == level


def test_partition_hint_names_the_conflicting_partition() -> None:
    table = new_table()
    snapshot = table.snapshot()
    a = Transaction(table, snapshot, fast(table_name="events"))
    b = Transaction(table, snapshot, fast())
    read_p1_write_p1(a, True, "cur")
    b.commit(insert(b, True, "win"))
    with pytest.raises(ConcurrentAppendException) as info:
        a.commit("WRITE")
    assert info.value.partition == "[p=1]"
    assert "in the partition [p=1]" in str(info.value)
    assert "events" in str(info.value)
    assert info.value.sqlstate == "2D521"
