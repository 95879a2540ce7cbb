"""Delta schema strings as Arrow types, and typed partition values from their log strings."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from tests.conftest import TESTDATA, reference_tables
from tests.unit.case_ids import readable
from txntable.engine.errors import InvalidActionError
from txntable.engine.model.actions import Metadata, parse_commit
from txntable.engine.model.schema import (
    parse_partition_column,
    parse_schema,
    to_arrow_schema,
    to_arrow_type,
)

UTC = dt.UTC


def _reference_schema_strings() -> list[tuple[str, str]]:
    out = []
    for name in reference_tables():
        for path in sorted((TESTDATA / name / "_delta_log").glob("*.json")):
            for action in parse_commit(path.read_bytes()):
                if isinstance(action, Metadata):
                    out.append((f"{name}/{path.name}", action.schema_string))
    return out


@pytest.mark.parametrize(
    ("where", "schema_string"), _reference_schema_strings(), ids=lambda x: str(x)[:60]
)
def test_every_reference_schema_converts(where: str, schema_string: str) -> None:
    fields = parse_schema(schema_string)
    schema = to_arrow_schema(fields)
    assert schema.names == [f["name"] for f in json.loads(schema_string)["fields"]]


@pytest.mark.parametrize(
    ("delta", "arrow"),
    [
        ("string", pa.string()),
        ("long", pa.int64()),
        ("integer", pa.int32()),
        ("short", pa.int16()),
        ("byte", pa.int8()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("binary", pa.binary()),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ntz", pa.timestamp("us")),
        ("decimal(10,2)", pa.decimal128(10, 2)),
        ("decimal(38, 0)", pa.decimal128(38, 0)),
        (
            {"type": "array", "elementType": "long", "containsNull": False},
            pa.list_(pa.field("element", pa.int64(), False)),
        ),
        (
            {"type": "map", "keyType": "string", "valueType": "integer"},
            pa.map_(pa.string(), pa.int32()),
        ),
        (
            {"type": "struct", "fields": [{"name": "a", "type": "date", "nullable": True}]},
            pa.struct([pa.field("a", pa.date32())]),
        ),
    ],
    ids=readable,
)
def test_types(delta: Any, arrow: pa.DataType) -> None:
    assert to_arrow_type(delta) == arrow


@pytest.mark.parametrize("bad", ["varchar", "decimal(a,b)", {"type": "union"}])
def test_unknown_types_are_refused(bad: Any) -> None:
    with pytest.raises(InvalidActionError, match="unknown Delta type"):
        to_arrow_type(bad)


@pytest.mark.parametrize("bad", ["not json", '{"type": "array"}', "[]"])
def test_bad_schema_strings_are_refused(bad: str) -> None:
    with pytest.raises(InvalidActionError, match="schemaString"):
        parse_schema(bad)


def test_column_mapping_physical_names() -> None:
    fields = parse_schema(
        json.dumps(
            {
                "type": "struct",
                "fields": [
                    {"name": "Company", "type": "string", "nullable": True,
                     "metadata": {"delta.columnMapping.physicalName": "col-1"}},
                    {"name": "plain", "type": "long", "nullable": False, "metadata": {}},
                ],
            }
        )
    )  # fmt: skip
    assert [(f.name, f.physical_name, f.nullable) for f in fields] == [
        ("Company", "col-1", True),
        ("plain", "plain", False),
    ]


@pytest.mark.parametrize(
    ("delta_type", "raw", "typed"),
    [
        ("string", ["a b", "", None, "日本"], ["a b", None, None, "日本"]),
        ("integer", ["1", "-5", "", None], [1, -5, None, None]),
        ("long", ["9223372036854775807"], [9223372036854775807]),
        ("short", ["12"], [12]),
        ("byte", ["-128"], [-128]),
        ("double", ["1.5", "-0.25"], [1.5, -0.25]),
        ("float", ["2.5"], [2.5]),
        ("decimal(5,2)", ["1.50", "-0.01"], [Decimal("1.50"), Decimal("-0.01")]),
        ("date", ["2024-02-29", ""], [dt.date(2024, 2, 29), None]),
        ("boolean", ["true", "false", "TRUE", None], [True, False, True, None]),
        ("binary", ["\x01\x02", "ab"], [b"\x01\x02", b"ab"]),
        (
            "timestamp",
            [
                "2024-01-01 10:00:00",
                "2024-01-01 10:00:00.5",
                "2024-01-01T10:00:00.123456Z",
                "2024-01-01T10:00:00Z",
            ],
            [
                dt.datetime(2024, 1, 1, 10, tzinfo=UTC),
                dt.datetime(2024, 1, 1, 10, 0, 0, 500000, tzinfo=UTC),
                dt.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=UTC),
                dt.datetime(2024, 1, 1, 10, tzinfo=UTC),
            ],
        ),
        ("timestamp_ntz", ["2024-01-01 10:00:00.000001"], [dt.datetime(2024, 1, 1, 10, 0, 0, 1)]),
    ],
    ids=readable,
)
def test_partition_values_are_typed(delta_type: str, raw: list[Any], typed: list[Any]) -> None:
    out = parse_partition_column(pa.array(raw, pa.string()), delta_type)
    assert out.type == to_arrow_type(delta_type)
    assert out.to_pylist() == typed


@pytest.mark.parametrize(
    ("delta_type", "raw"),
    [
        ("integer", "abc"),
        ("long", "9223372036854775808"),
        ("date", "2024-13-01"),
        ("timestamp", "yesterday"),
        ("decimal(3,2)", "123.45"),
        ("binary", "日本"),
        ({"type": "struct", "fields": []}, "x"),
    ],
)
def test_unparseable_partition_values_are_invalid_actions(delta_type: Any, raw: str) -> None:
    with pytest.raises(InvalidActionError, match="partition values"):
        parse_partition_column(pa.array([raw], pa.string()), delta_type)


def test_empty_partition_column() -> None:
    out = parse_partition_column(pa.array([], pa.string()), "date")
    assert out.type == pa.date32()
    assert len(out) == 0
