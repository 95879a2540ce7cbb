"""The physical layout of data files: column mapping names and ids, type widening, variants."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pyarrow as pa
import pytest

from tests.unit.case_ids import readable
from txntable.engine.errors import (
    InvalidActionError,
    UnsupportedWriterFeatureError,
)
from txntable.engine.model.actions import Protocol
from txntable.engine.model.features import check_writable
from txntable.engine.model.physical import (
    FIELD_ID_KEY,
    PhysicalLayout,
    column_mapping_mode,
    conform_table,
    field_id,
)
from txntable.maintenance.executor_arrow import _stats_config


def _f(name: str, delta_type: Any, fid: int | None = None, **meta: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = dict(meta)
    if fid is not None:
        metadata["delta.columnMapping.id"] = fid
        metadata["delta.columnMapping.physicalName"] = f"col-{fid}"
    return {"name": name, "type": delta_type, "nullable": True, "metadata": metadata}


SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            _f("id", "long", 1),
            _f("part", "string", 2),
            _f("s", {"type": "struct", "fields": [_f("x", "integer", 4), _f("y", "string", 5)]}, 3),
            _f(
                "arr",
                {
                    "type": "array",
                    "elementType": {"type": "struct", "fields": [_f("z", "long", 7)]},
                    "containsNull": True,
                },
                6,
                **{"delta.columnMapping.nested.ids": {"col-6.element": 100}},
            ),
            _f(
                "m",
                {
                    "type": "map",
                    "keyType": "string",
                    "valueType": "double",
                    "valueContainsNull": True,
                },
                8,
                **{"delta.columnMapping.nested.ids": {"col-8.key": 101, "col-8.value": 102}},
            ),
            _f("v", "variant", 9),
        ],
    }
)


def _ids(field: pa.Field) -> Any:
    """(name, id, children) of a field, recursively."""
    t = field.type
    if pa.types.is_struct(t):
        children = [_ids(t.field(i)) for i in range(t.num_fields)]
    elif pa.types.is_map(t):
        children = [_ids(t.key_field), _ids(t.item_field)]
    elif pa.types.is_list(t):
        children = [_ids(t.value_field)]
    else:
        children = []
    return (field.name, field_id(field), children)


def test_name_and_id_modes_write_physical_names_and_field_ids() -> None:
    for mode in ("name", "id"):
        layout = PhysicalLayout.build(SCHEMA, ["part"], {"delta.columnMapping.mode": mode})
        assert layout.schema.names == ["col-1", "col-3", "col-6", "col-8", "col-9"]
        assert [_ids(f) for f in layout.schema][1:4] == [
            ("col-3", 3, [("col-4", 4, []), ("col-5", 5, [])]),
            ("col-6", 6, [("element", 100, [("col-7", 7, [])])]),
            ("col-8", 8, [("key", 101, []), ("value", 102, [])]),
        ]
        assert layout.partition_keys == {"part": "col-2"}
        assert layout.variant_paths == {("col-9",)}
        assert layout.physical_column("s") == "col-3"
        assert layout.physical_path(["s", "y"]) == ("col-3", "col-5")
        assert layout.physical_path(["s", "nope"]) is None


def test_without_column_mapping_names_are_logical_and_there_are_no_ids() -> None:
    layout = PhysicalLayout.build(SCHEMA, ["part"], {})
    assert layout.schema.names == ["id", "s", "arr", "m", "v"]
    assert all(f.metadata is None for f in layout.schema)
    assert layout.partition_keys == {"part": "part"}
    assert layout.variant_paths == {("v",)}
    assert layout.schema.field("v").type == pa.struct(
        [("value", pa.binary()), ("metadata", pa.binary())]
    )


def test_a_bad_mapping_mode_is_refused() -> None:
    assert column_mapping_mode({}) == "none"
    assert column_mapping_mode({"delta.columnMapping.mode": "Name"}) == "name"
    with pytest.raises(InvalidActionError, match=r"delta\.columnMapping\.mode"):
        column_mapping_mode({"delta.columnMapping.mode": "position"})


def _with_id(name: str, arrow_type: pa.DataType, fid: int | None) -> pa.Field:
    return pa.field(name, arrow_type, metadata={FIELD_ID_KEY: str(fid).encode()} if fid else None)


def test_id_mode_matches_columns_and_struct_fields_by_field_id() -> None:
    layout = PhysicalLayout.build(SCHEMA, ["part"], {"delta.columnMapping.mode": "id"})
    inner = pa.struct([_with_id("whatever", pa.string(), 5), _with_id("old-x", pa.int16(), 4)])
    file_schema = pa.schema([_with_id("renamed", inner, 3), _with_id("other", pa.int32(), 1)])
    data = pa.Table.from_pylist(
        [{"renamed": {"whatever": "a", "old-x": 7}, "other": 1}, {"renamed": None, "other": 2}],
        schema=file_schema,
    )
    out = layout.conform(data)
    assert out.schema.equals(layout.schema, check_metadata=True)
    rows = out.select(["col-1", "col-3", "col-6"]).to_pylist()
    assert rows == [
        {"col-1": 1, "col-3": {"col-4": 7, "col-5": "a"}, "col-6": None},
        {"col-1": 2, "col-3": None, "col-6": None},
    ]


def test_id_mode_falls_back_to_physical_names_in_a_file_without_ids() -> None:
    layout = PhysicalLayout.build(SCHEMA, ["part"], {"delta.columnMapping.mode": "id"})
    data = pa.table({"col-1": pa.array([5, 6], pa.int64()), "id": pa.array([0, 0], pa.int64())})
    assert layout.conform(data).column("col-1").to_pylist() == [5, 6]


def test_name_mode_ignores_field_ids() -> None:
    layout = PhysicalLayout.build(SCHEMA, ["part"], {"delta.columnMapping.mode": "name"})
    data = pa.Table.from_arrays(
        [pa.array([1]), pa.array([2])],
        schema=pa.schema([_with_id("col-1", pa.int64(), 99), _with_id("zzz", pa.int64(), 1)]),
    )
    assert layout.conform(data).column("col-1").to_pylist() == [1]


def test_widened_types_are_cast_through_lists_and_maps_even_when_sliced() -> None:
    element = pa.struct([("q", pa.int32())])
    target = pa.schema(
        [
            ("l", pa.list_(pa.field("element", pa.struct([("q", pa.int64())])))),
            ("m", pa.map_(pa.string(), pa.float64())),
            ("d", pa.timestamp("us")),
            ("dec", pa.decimal128(12, 4)),
        ]
    )
    source = pa.table(
        {
            "l": pa.array([[{"q": 1}], None, [{"q": 2}, None]], pa.list_(element)),
            "m": pa.array(
                [[("a", 1.5)], None, [("b", 2.5), ("c", None)]],
                pa.map_(pa.string(), pa.float32()),
            ),
            "d": pa.array([0, 1, 2], pa.date32()),
            "dec": pa.array([None, None, decimal.Decimal("1.25")], pa.decimal128(5, 2)),
        }
    ).slice(1)
    out = conform_table(source, target)
    assert out.schema.equals(target)
    assert out.to_pylist() == [
        {"l": None, "m": None, "d": dt.datetime(1970, 1, 2), "dec": None},
        {
            "l": [{"q": 2}, None],
            "m": [("b", 2.5), ("c", None)],
            "d": dt.datetime(1970, 1, 3),
            "dec": decimal.Decimal("1.2500"),
        },
    ]


def test_a_value_that_does_not_fit_is_an_error_never_a_change() -> None:
    with pytest.raises(pa.ArrowInvalid):
        conform_table(pa.table({"i": pa.array([2**40])}), pa.schema([("i", pa.int32())]))


def test_shredded_variant_data_is_refused_with_the_feature_named() -> None:
    layout = PhysicalLayout.build(SCHEMA, ["part"], {"delta.columnMapping.mode": "name"})
    shredded = pa.struct(
        [("metadata", pa.binary()), ("value", pa.binary()), ("typed_value", pa.int64())]
    )
    data = pa.table({"col-9": pa.array([{"metadata": b"\x01\x00\x00", "value": None,
                                          "typed_value": 5}], shredded)})  # fmt: skip
    with pytest.raises(UnsupportedWriterFeatureError, match="typed_value") as info:
        layout.conform(data)
    assert info.value.features == ("variantShredding",)
    plain = pa.table({"col-9": pa.array([{"metadata": b"m", "value": b"v"}],
                                        pa.struct([("metadata", pa.binary()),
                                                   ("value", pa.binary())]))})  # fmt: skip
    assert layout.conform(plain).column("col-9").to_pylist() == [{"value": b"v", "metadata": b"m"}]


def test_explicit_stats_columns_are_translated_to_physical_names() -> None:
    config = {"delta.columnMapping.mode": "name", "delta.dataSkippingStatsColumns": "s.y,id,gone"}
    layout = PhysicalLayout.build(SCHEMA, ["part"], config)
    assert _stats_config(layout, config).stats_columns == ("col-3.col-5", "col-1")


@pytest.mark.parametrize(
    "features",
    [
        ["columnMapping"],
        ["typeWidening"],
        ["typeWidening-preview"],
        ["variantType"],
        ["variantType-preview"],
        ["columnMapping", "variantType", "typeWidening", "deletionVectors"],
    ],
    ids=readable,
)
def test_rewrites_honour_layout_features_that_appends_do_not(features: list[str]) -> None:
    protocol = Protocol(3, 7, features, features)
    check_writable(protocol, rows_unchanged=True)
    with pytest.raises(UnsupportedWriterFeatureError):
        check_writable(protocol)


@pytest.mark.parametrize("feature", ["variantShredding-preview", "variantShredding"])
def test_shredding_is_refused_even_for_rewrites(feature: str) -> None:
    protocol = Protocol(3, 7, ["variantType", feature], ["variantType", feature])
    with pytest.raises(UnsupportedWriterFeatureError, match="byte for byte") as info:
        check_writable(protocol, rows_unchanged=True)
    assert info.value.features == (feature,)


@pytest.mark.parametrize(
    ("source", "target", "value"),
    [
        (pa.int8(), "short", -128),
        (pa.int16(), "integer", 32767),
        (pa.int32(), "long", -(2**31)),
        (pa.float32(), "double", 1.5),
        (pa.int32(), "double", 2**31 - 1),
        (pa.date32(), "timestamp_ntz", dt.date(2024, 2, 29)),
        (pa.decimal128(5, 2), "decimal(10,4)", decimal.Decimal("-999.99")),
        (pa.int32(), "decimal(10,0)", 2**31 - 1),
        (pa.int64(), "decimal(20,0)", -(2**63)),
    ],
    ids=readable,
)
def test_every_widening_of_the_protocol_is_lossless(
    source: pa.DataType, target: str, value: Any
) -> None:
    schema = json.dumps({"type": "struct", "fields": [_f("c", target)]})
    layout = PhysicalLayout.build(schema, [], {})
    out = layout.conform(pa.table({"c": pa.array([value, None], source)}))
    widened = out.column("c").to_pylist()[0]
    if isinstance(value, dt.date):
        assert widened == dt.datetime(value.year, value.month, value.day)
    else:
        assert widened == value
    assert out.column("c").null_count == 1
