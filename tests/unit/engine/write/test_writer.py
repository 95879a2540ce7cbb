"""Data files: schema checks before any write, Hive partition layout, add actions, Arrow schema."""

from __future__ import annotations

import datetime as dt
import io
import json
import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.unit.case_ids import readable
from txntable.engine.errors import InvalidArgumentError, UnsupportedWriterFeatureError
from txntable.engine.model.actions import Metadata
from txntable.engine.model.schema import (
    from_arrow_type,
    parse_schema,
    schema_string_from_arrow,
    to_arrow_schema,
    uses_timestamp_ntz,
)
from txntable.engine.storage.base import MemoryStorage
from txntable.engine.storage.factory import open_storage
from txntable.engine.storage.paths import decode_path
from txntable.engine.write.writer import serialize_partition_value, write_data_files


@pytest.fixture
def storage() -> MemoryStorage:
    store = open_storage(f"memory://writer-{uuid.uuid4().hex}")
    assert isinstance(store, MemoryStorage)
    return store


def _metadata(schema: pa.Schema, partition_by: list[str] | None = None) -> Metadata:
    return Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema_string_from_arrow(schema),
        partition_columns=partition_by or [],
    )


def _read(storage: MemoryStorage, add_path: str) -> pa.Table:
    return pq.read_table(io.BytesIO(storage.read(decode_path(add_path))))


def test_unpartitioned_write_gives_one_file_with_stats(storage: MemoryStorage) -> None:
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    data = pa.table({"id": [2, 1], "name": ["b", None]}, schema=schema)
    [add] = write_data_files(storage, _metadata(schema), data)
    assert add.partition_values == {}
    assert add.path.startswith("part-00000-") and add.path.endswith(".c000.zstd.parquet")
    assert add.data_change is True and add.size == len(storage.read(add.path))
    assert add.modification_time > 0
    assert json.loads(add.stats or "{}")["minValues"] == {"id": 1, "name": "b"}
    assert _read(storage, add.path).equals(data)


def test_partitions_are_split_escaped_and_typed(storage: MemoryStorage) -> None:
    schema = pa.schema([("v", pa.int32()), ("p", pa.string()), ("d", pa.date32())])
    day = dt.date(2024, 1, 2)
    data = pa.table(
        {"v": [1, 2, 3, 4], "p": ["a b", "x=/%", None, "a b"], "d": [day, day, None, day]},
        schema=schema,
    )
    adds = write_data_files(storage, _metadata(schema, ["p", "d"]), data)
    by_value = {a.partition_values["p"]: a for a in adds}
    assert set(by_value) == {"a b", "x=/%", None}
    assert by_value[None].partition_values == {"p": None, "d": None}
    assert by_value["a b"].partition_values == {"p": "a b", "d": "2024-01-02"}
    special = by_value["x=/%"]
    assert decode_path(special.path).startswith("p=x%3D%2F%25/d=2024-01-02/")
    assert special.path.startswith("p=x%253D%252F%2525/d=2024-01-02/")
    assert decode_path(by_value[None].path).startswith(
        "p=__HIVE_DEFAULT_PARTITION__/d=__HIVE_DEFAULT_PARTITION__/"
    )
    part = _read(storage, by_value["a b"].path)
    assert part.column_names == ["v"] and sorted(part.column("v").to_pylist()) == [1, 4]
    assert sum(json.loads(a.stats or "{}")["numRecords"] for a in adds) == 4


def test_data_is_cast_to_the_table_schema_and_missing_nullable_columns_filled(
    storage: MemoryStorage,
) -> None:
    schema = pa.schema([("id", pa.int64()), ("extra", pa.string())])
    data = pa.table({"id": pa.array([1, 2], pa.int32())})
    [add] = write_data_files(storage, _metadata(schema), data)
    written = _read(storage, add.path)
    assert written.schema.field("id").type == pa.int64()
    assert written.column("extra").null_count == 2


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (pa.table({"id": [1], "zzz": [1]}), "not in the table schema: zzz"),
        (pa.table({"id": ["not a number"]}), "cannot be stored as int64"),
        (pa.table({"id": pa.array([None], pa.int64())}), "NOT NULL"),
        (pa.table({"other": [1]}), "not in the table schema"),
    ],
    ids=readable,
)
def test_bad_data_is_rejected_before_anything_is_written(
    storage: MemoryStorage, data: pa.Table, message: str
) -> None:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False)])
    with pytest.raises(InvalidArgumentError, match=message):
        write_data_files(storage, _metadata(schema), data)
    assert storage.fs.find(storage.root_path) == []


def test_record_batches_and_file_splitting(storage: MemoryStorage) -> None:
    schema = pa.schema([("id", pa.int64())])
    batches = [pa.record_batch({"id": [1, 2, 3]}), pa.record_batch({"id": [4, 5]})]
    adds = write_data_files(storage, _metadata(schema), batches, max_rows_per_file=2)
    assert len(adds) == 3
    assert sum(_read(storage, a.path).num_rows for a in adds) == 5
    assert write_data_files(storage, _metadata(schema), schema.empty_table()) == []


def test_column_mapping_tables_are_refused(storage: MemoryStorage) -> None:
    schema = pa.schema([("id", pa.int64())])
    meta = Metadata(
        id="x",
        schema_string=schema_string_from_arrow(schema),
        configuration={"delta.columnMapping.mode": "name"},
    )
    with pytest.raises(UnsupportedWriterFeatureError):
        write_data_files(storage, meta, pa.table({"id": [1]}))


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (None, None),
        (True, "true"),
        (7, "7"),
        (1.5, "1.5"),
        (Decimal("10.50"), "10.50"),
        (dt.date(2024, 2, 29), "2024-02-29"),
        (dt.datetime(2024, 1, 1, 12, 0, tzinfo=dt.UTC), "2024-01-01T12:00:00.000000Z"),
        (dt.datetime(2024, 1, 1, 12, 0, 0, 5), "2024-01-01 12:00:00.000005"),
        (b"\x01\xff", "\x01\xff"),
        ("späce", "späce"),
    ],
)
def test_partition_value_serialisation(value: object, text: str | None) -> None:
    assert serialize_partition_value(value) == text


def test_arrow_schema_round_trips_through_delta_json() -> None:
    schema = pa.schema(
        [
            pa.field("a", pa.int64(), nullable=False),
            ("t", pa.timestamp("us", tz="UTC")),
            ("n", pa.timestamp("us")),
            ("m", pa.map_(pa.string(), pa.int32())),
            ("l", pa.list_(pa.struct([("x", pa.decimal128(10, 2))]))),
        ]
    )
    text = schema_string_from_arrow(schema)
    assert json.loads(text)["fields"][0] == {
        "name": "a",
        "type": "long",
        "nullable": False,
        "metadata": {},
    }
    back = to_arrow_schema(parse_schema(text))
    assert back.field("l").type == schema.field("l").type
    assert back.field("t").type == schema.field("t").type
    assert uses_timestamp_ntz(json.loads(text)) and not uses_timestamp_ntz("timestamp")


@pytest.mark.parametrize("bad", [pa.null(), pa.uint64(), pa.duration("s")], ids=readable)
def test_types_delta_cannot_store_are_refused(bad: pa.DataType) -> None:
    with pytest.raises(InvalidArgumentError, match="no Delta equivalent"):
        from_arrow_type(bad)


def test_duplicate_and_empty_schemas_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="duplicate"):
        schema_string_from_arrow(pa.schema([("a", pa.int8()), ("a", pa.int8())]))
    with pytest.raises(InvalidArgumentError, match="at least one column"):
        schema_string_from_arrow(pa.schema([]))
