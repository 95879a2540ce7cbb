"""Parquet writer settings: precedence (asked for, then the table property, then the defaults),
errors that name the bad value and the accepted ones before anything is written, and files whose
footers show the settings."""

from __future__ import annotations

import datetime as dt
import io
import uuid
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.unit.case_ids import readable
from txntable.engine.errors import InvalidArgumentError
from txntable.engine.model.actions import Metadata
from txntable.engine.model.schema import schema_string_from_arrow
from txntable.engine.storage.base import MemoryStorage
from txntable.engine.storage.factory import open_storage
from txntable.engine.write.parquet_options import (
    CODEC_PROPERTY,
    ParquetSettings,
    ParquetWriteOptions,
    dictionary_columns,
    resolve,
)
from txntable.engine.write.writer import write_data_files


def test_defaults_are_zstd_1_with_auto_dictionary() -> None:
    got = resolve({})
    assert (got.codec, got.level, got.row_group_rows, got.dictionary, got.source) == (
        "zstd",
        1,
        1_048_576,
        "auto",
        "default",
    )


def test_the_table_property_beats_the_default() -> None:
    got = resolve({CODEC_PROPERTY: "SNAPPY"})
    assert (got.codec, got.level, got.source) == ("snappy", None, "table")


def test_what_is_asked_for_beats_the_table_property() -> None:
    got = resolve({CODEC_PROPERTY: "snappy"}, ParquetSettings(codec="gzip", level=9))
    assert (got.codec, got.level, got.source) == ("gzip", 9, "requested")


def test_a_level_alone_applies_to_the_tables_codec() -> None:
    got = resolve({CODEC_PROPERTY: "gzip"}, ParquetSettings(level=2))
    assert (got.codec, got.level, got.source) == ("gzip", 2, "table")
    with pytest.raises(
        InvalidArgumentError, match=f"snappy \\(from the table property {CODEC_PROPERTY}"
    ):
        resolve({CODEC_PROPERTY: "snappy"}, ParquetSettings(level=2))


@pytest.mark.parametrize(
    ("given", "codec"), [("none", "uncompressed"), (" Zstd ", "zstd"), ("LZ4_RAW", "lz4_raw")]
)
def test_codec_names_are_case_insensitive_with_none_for_uncompressed(
    given: str, codec: str
) -> None:
    assert resolve({}, ParquetSettings(codec=given)).codec == codec


_ACCEPTED = r"\(accepted: zstd, snappy, gzip, lz4_raw, uncompressed or none\)"
_TABLE = {CODEC_PROPERTY: "lzo"}
S = ParquetSettings


@pytest.mark.parametrize(
    ("configuration", "settings", "message"),
    [
        ({}, S(codec="brotli"), rf"unknown Parquet compression codec 'brotli' {_ACCEPTED}"),
        (_TABLE, None, rf"table property {CODEC_PROPERTY}: unknown .* codec 'lzo' {_ACCEPTED}"),
        ({}, S(codec="lz4"), "Hadoop-framed LZ4.*use lz4_raw"),
        ({}, S(codec="zstd", level=0), r"level 0 is out of range for zstd \(accepted: 1 to 22\)"),
        ({}, S(codec="zstd", level=23), "level 23 is out of range for zstd"),
        ({}, S(codec="gzip", level=10), r"level 10 is out of range for gzip \(accepted: 1 to 9\)"),
        ({}, S(codec="snappy", level=1), "codec snappy takes no compression level"),
        ({}, S(level=True), "compression level True is not an integer"),
        ({}, S(row_group_rows=0), "row group rows 0 must be an integer from 1"),
        ({}, S(dictionary="sometimes"), r"dictionary mode 'sometimes' \(accepted: auto, on, off\)"),
    ],
    ids=readable,
)
def test_invalid_settings_name_the_value_and_the_accepted_ones(
    configuration: dict[str, str], settings: ParquetSettings | None, message: str
) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        resolve(configuration, settings)


def test_options_travel_as_json() -> None:
    options = resolve(
        {}, ParquetSettings(codec="gzip", level=4, row_group_rows=7, dictionary="off")
    )
    assert ParquetWriteOptions.from_json(options.to_json()) == options
    with pytest.raises(InvalidArgumentError, match="brotli"):
        ParquetWriteOptions.from_json({**options.to_json(), "codec": "brotli"})


def _footer(options: ParquetWriteOptions, table: pa.Table) -> pq.FileMetaData:
    sink = pa.BufferOutputStream()
    options.write(table, sink)
    buf = sink.getvalue()
    assert pq.read_table(pa.BufferReader(buf)).equals(table)
    return pq.ParquetFile(pa.BufferReader(buf)).metadata


_DATA = pa.table(
    {
        "id": pa.array(range(2000), pa.int64()),
        "country": [["DE", "FR", "US"][i % 3] for i in range(2000)],
        "tags": [[f"t{i % 4}"] for i in range(2000)],
    }
)


@pytest.mark.parametrize(
    ("codec", "level", "footer"),
    [
        ("zstd", 1, "ZSTD"),
        ("snappy", None, "SNAPPY"),
        ("gzip", 9, "GZIP"),
        ("lz4_raw", None, "LZ4"),  # pyarrow names LZ4_RAW "LZ4" when reading
        ("uncompressed", None, "UNCOMPRESSED"),
    ],
)
def test_every_codec_is_written_as_its_footer_says(
    codec: str, level: int | None, footer: str
) -> None:
    meta = _footer(resolve({}, ParquetSettings(codec=codec, level=level)), _DATA)
    codecs = {
        meta.row_group(r).column(c).compression
        for r in range(meta.num_row_groups)
        for c in range(meta.num_columns)
    }
    assert codecs == {footer}


def test_row_groups_hold_at_most_the_rows_asked_for() -> None:
    meta = _footer(resolve({}, ParquetSettings(row_group_rows=600)), _DATA)
    assert [meta.row_group(i).num_rows for i in range(meta.num_row_groups)] == [600, 600, 600, 200]


def _dictionary_by_column(meta: pq.FileMetaData) -> dict[str, bool]:
    group = meta.row_group(0)
    return {
        group.column(c).path_in_schema: group.column(c).has_dictionary_page
        for c in range(meta.num_columns)
    }


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        # auto: the unique ids go plain, the repeated country and list elements use a dictionary
        ("auto", {"id": False, "country": True, "tags.list.element": True}),
        ("on", {"id": True, "country": True, "tags.list.element": True}),
        ("off", {"id": False, "country": False, "tags.list.element": False}),
    ],
    ids=readable,
)
def test_dictionary_modes(mode: str, expected: dict[str, bool]) -> None:
    meta = _footer(resolve({}, ParquetSettings(dictionary=mode)), _DATA)
    assert _dictionary_by_column(meta) == expected


def test_auto_dictionary_writes_every_column_type() -> None:
    n = 40_000
    table = pa.table(
        {
            "null": pa.nulls(n),
            "flag": pa.array([True, False] * (n // 2)),
            "dec": pa.array([Decimal("1.50")] * n, pa.decimal128(5, 2)),
            "bin": pa.array([b"x"] * n),
            "fixed": pa.array([b"ab"] * n, pa.binary(2)),
            "encoded": pa.array(["a", "b"] * (n // 2)).dictionary_encode(),
            "day": pa.array([dt.date(2020, 1, 1)] * n),
            "ts": pa.array(range(n), pa.timestamp("us", tz="UTC")),
            "ntz": pa.array(range(n), pa.timestamp("us")),
            "f32": pa.array([float(i) for i in range(n)], pa.float32()),
        }
    )
    chosen = dictionary_columns(table)
    assert "ts" not in chosen and "ntz" not in chosen and "f32" not in chosen
    assert {"null", "flag", "dec", "bin", "fixed", "encoded", "day"} <= set(chosen)
    meta = _footer(resolve({}), table)
    assert meta.num_rows == n


def test_auto_dictionary_handles_an_empty_table() -> None:
    assert dictionary_columns(_DATA.slice(0, 0)) == ["id", "country", "tags.list.element"]


def _metadata(configuration: dict[str, str]) -> Metadata:
    return Metadata(
        id=str(uuid.uuid4()),
        schema_string=schema_string_from_arrow(pa.schema([("id", pa.int64())])),
        partition_columns=[],
        configuration=configuration,
    )


def _store() -> MemoryStorage:
    store = open_storage(f"memory://parquet-options-{uuid.uuid4().hex}")
    assert isinstance(store, MemoryStorage)
    return store


def test_appends_follow_the_table_property_and_name_the_codec() -> None:
    store = _store()
    data = pa.table({"id": [1, 2, 3]})
    [add] = write_data_files(store, _metadata({CODEC_PROPERTY: "gzip"}), data)
    assert add.path.endswith(".c000.gzip.parquet")
    meta = pq.ParquetFile(io.BytesIO(store.read(add.path))).metadata
    assert meta.row_group(0).column(0).compression == "GZIP"
    [add] = write_data_files(store, _metadata({}), data, parquet=ParquetSettings(codec="snappy"))
    assert add.path.endswith(".c000.snappy.parquet")


def test_a_bad_table_property_writes_nothing() -> None:
    store = _store()
    with pytest.raises(InvalidArgumentError, match="'brotli'"):
        write_data_files(store, _metadata({CODEC_PROPERTY: "brotli"}), pa.table({"id": [1]}))
    assert list(store.list_tree()) == []
