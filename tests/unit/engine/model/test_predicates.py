"""Partition predicates: syntax, binding to a schema, SQL null semantics, scans, and the
conservative evaluation the conflict checker relies on."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from tests.unit.txn_support import fast
from txntable.engine.commit.conflicts import PendingCommit, WinningCommit, check_conflicts
from txntable.engine.commit.isolation import IsolationLevel
from txntable.engine.errors import ConcurrentAppendException, InvalidArgumentError
from txntable.engine.model.actions import AddFile, CommitInfo, Metadata
from txntable.engine.model.predicates import (
    TRUE,
    And,
    Compare,
    InList,
    IsNull,
    Not,
    Or,
    bind,
    parse_predicate,
    typed_partition_values,
)
from txntable.engine.model.schema import Field, parse_schema
from txntable.engine.storage.factory import open_storage
from txntable.engine.table import Table

FIELDS = [
    Field("date", "date", True, {}),
    Field("region", "string", True, {}),
    Field("n", "long", True, {}),
    Field("ts", "timestamp", True, {}),
    Field("flag", "boolean", True, {}),
    Field("value", "double", True, {}),
]
PARTS = ["date", "region", "n", "ts", "flag"]


def _values(*rows: dict[str, str | None]) -> pa.Table:
    return typed_partition_values(list(rows), FIELDS, PARTS)


def _mask(predicate: str, *rows: dict[str, str | None]) -> list[bool]:
    return bind(predicate, FIELDS, PARTS).matches(_values(*rows)).to_pylist()


def test_parse_builds_the_expected_tree() -> None:
    p = parse_predicate("date = '2024-01-01' AND region IN ('eu','us') OR NOT n > 3")
    assert p == Or(
        And(Compare("date", "=", "2024-01-01"), InList("region", ("eu", "us"))),
        Not(Compare("n", ">", 3)),
    )
    assert parse_predicate("3 < n") == Compare("n", ">", 3)
    assert parse_predicate("region IS NOT NULL") == IsNull("region", negated=True)
    assert parse_predicate("`my col` <> 'x''y'") == Compare("my col", "!=", "x'y")
    assert parse_predicate('region NOT IN ("a", NULL)') == InList("region", ("a", None), True)
    assert parse_predicate("ts >= TIMESTAMP '2024-01-01 00:00:00'") == Compare(
        "ts", ">=", "2024-01-01 00:00:00"
    )
    assert parse_predicate("TRUE") == TRUE
    assert parse_predicate("n == -1.5e2") == Compare("n", "=", -150.0)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty predicate"),
        ("region = ", "unexpected end"),
        ("region = 'eu", "unexpected character"),
        ("region = 'eu' extra", "unexpected 'extra'"),
        ("region = n", "one column and one literal"),
        ("'a' IN ('a')", "column on the left"),
        ("region IN (n)", "literals only"),
        ("(region = 'a'", "expected ')'"),
        ("region", "expected a comparison"),
        ("region ~ 'a'", "unexpected character"),
    ],
)
def test_bad_syntax_is_a_clear_invalid_argument(text: str, fragment: str) -> None:
    with pytest.raises(InvalidArgumentError, match="invalid predicate") as info:
        parse_predicate(text)
    assert fragment in str(info.value)


def test_unknown_column_is_refused_with_the_known_columns() -> None:
    with pytest.raises(InvalidArgumentError, match="'nope' is not in the table schema"):
        bind("nope = 1", FIELDS, PARTS)


def test_binding_resolves_case_and_splits_partition_from_data_conjuncts() -> None:
    bound = bind("REGION = 'eu' AND value > 1 AND (n = 1 OR value < 0)", FIELDS, PARTS)
    assert bound.partition == Compare("region", "=", "eu")
    assert len(bound.data) == 2
    assert bind("value > 1", FIELDS, PARTS).partition == TRUE
    assert bind(None, FIELDS, PARTS).partition == TRUE


def test_typed_comparisons() -> None:
    rows = (
        {
            "date": "2024-01-01",
            "region": "eu",
            "n": "5",
            "ts": "2024-01-01 10:00:00",
            "flag": "true",
        },
        {
            "date": "2024-02-01",
            "region": "us",
            "n": "50",
            "ts": "2024-01-02T00:00:00.000000Z",
            "flag": "false",
        },
    )
    assert _mask("date < DATE '2024-01-15'", *rows) == [True, False]
    assert _mask("n > 9", *rows) == [False, True]  # numerically, not as strings
    assert _mask("n = 5.0", *rows) == [True, False]
    assert _mask("ts > '2024-01-01 12:00:00'", *rows) == [False, True]
    assert _mask("flag = true", *rows) == [True, False]
    assert _mask("region >= 'f' OR n < 6", *rows) == [True, True]


def test_sql_null_semantics() -> None:
    rows = ({"region": None, "n": None}, {"region": "", "n": "1"}, {"region": "eu", "n": "2"})
    assert _mask("region IS NULL", *rows) == [True, True, False]  # '' is null too
    assert _mask("region != 'us'", *rows) == [False, False, True]
    assert _mask("region NOT IN ('us')", *rows) == [False, False, True]
    assert _mask("region NOT IN ('us', NULL)", *rows) == [False, False, False]
    assert _mask("region IN ('eu', NULL)", *rows) == [False, False, True]
    assert _mask("NOT (n = 1)", *rows) == [False, False, True]
    assert _mask("region = NULL", *rows) == [False, False, False]


def test_a_literal_that_does_not_fit_the_column_type_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="not a valid date"):
        _mask("date = 'yesterday'", {"date": "2024-01-01"})


def test_unparseable_winner_partition_values_count_as_a_conflict() -> None:
    schema = json.dumps(
        {
            "type": "struct",
            "fields": [{"name": "n", "type": "long", "nullable": True, "metadata": {}}],
        }
    )
    meta = Metadata(id="t", schema_string=schema, partition_columns=["n"])
    pending = PendingCommit(
        actions=[AddFile(path="x", partition_values={"n": "1"}, size=1, modification_time=1)],
        isolation_level=IsolationLevel.SERIALIZABLE,
        read_predicates=[bind("n = 1", parse_schema(schema), ["n"])],
        read_metadata=meta,
    )
    good = AddFile(path="y", partition_values={"n": "2"}, size=1, modification_time=1)
    check_conflicts(pending, WinningCommit(1, [CommitInfo({"operation": "WRITE"}), good]))
    bad = AddFile(path="z", partition_values={"n": "not-a-number"}, size=1, modification_time=1)
    with pytest.raises(ConcurrentAppendException):
        check_conflicts(pending, WinningCommit(2, [bad]))


def test_scan_prunes_by_typed_partition_values_and_records_what_it_read() -> None:
    import pyarrow.compute as pc

    from txntable.engine.model.actions import Metadata as Meta

    schema = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "id", "type": "long", "nullable": True, "metadata": {}},
                {"name": "day", "type": "date", "nullable": True, "metadata": {}},
            ],
        }
    )
    table = Table(open_storage("memory://txn-tests/scan"))
    create = table.transaction(fast())
    create.set_metadata(Meta(id="t", schema_string=schema, partition_columns=["day"]))
    days = ["2024-01-09", "2024-01-10", "2024-02-01", None]
    create.add(
        *[
            AddFile(path=f"f{i}", partition_values={"day": d}, size=1, modification_time=1)
            for i, d in enumerate(days)
        ]
    )
    create.commit("CREATE TABLE AS SELECT")
    txn = table.transaction(fast())
    files = txn.scan("day >= '2024-01-10' AND id > 3")
    assert sorted(files.column("path").to_pylist()) == ["f1", "f2"]
    assert txn.scan("day IS NULL").column("path").to_pylist() == ["f3"]
    assert txn.scan().num_rows == 4
    with pytest.raises(InvalidArgumentError):
        txn.scan("missing = 1")
    assert pc.sum(files.column("size")).as_py() == 2
