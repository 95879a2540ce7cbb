"""Geometry and geography columns (Delta 4.4's ``geospatial`` feature, issue 33.7): their type
names, the Arrow type a rewrite reads and writes them as, and what it refuses."""

from __future__ import annotations

import io
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.feature_tables import field
from txntable.engine.errors import UnsupportedReaderFeatureError, UnsupportedWriterFeatureError
from txntable.engine.model.actions import Metadata, Protocol
from txntable.engine.model.features import check_maintainable, check_readable, check_writable
from txntable.engine.model.geospatial import WkbType, arrow_type, parse, unwritable_columns
from txntable.engine.model.physical import PhysicalLayout
from txntable.engine.model.schema import to_arrow_type

GEO = Protocol(3, 7, ["geospatial"], ["geospatial", "invariants", "appendOnly"])
POINT = bytes.fromhex("0101000000000000000000F03F0000000000000040")


def _meta(*types: str) -> Metadata:
    fields = [field("id", "long")] + [field(f"c{i}", t) for i, t in enumerate(types)]
    return Metadata(id="x", schema_string=json.dumps({"type": "struct", "fields": fields}))


@pytest.mark.parametrize(
    ("name", "parsed"),
    [
        ("geometry(OGC:CRS84)", ("geometry", "OGC:CRS84", None)),
        ("geometry(EPSG:3857)", ("geometry", "EPSG:3857", None)),
        ("geometry(srid:4326)", ("geometry", "srid:4326", None)),
        ("geography(OGC:CRS84, SPHERICAL)", ("geography", "OGC:CRS84", "spherical")),
        ("geography(OGC:CRS84, karney)", ("geography", "OGC:CRS84", "karney")),
        ("geography(OGC:CRS84, flat)", None),
        ("binary", None),
    ],
)
def test_type_names(name: str, parsed: tuple[str, str, str | None] | None) -> None:
    assert parse(name) == parsed


@pytest.mark.parametrize(
    ("name", "logical"),
    [
        ("geometry(OGC:CRS84)", "Geometry(crs=)"),  # Parquet's default CRS, left out
        ("geometry(EPSG:3857)", "Geometry(crs=EPSG:3857)"),
        ("geometry(srid:3857)", "Geometry(crs=srid:3857)"),
        ("geography(OGC:CRS84, spherical)", "Geography(crs=, algorithm=spherical)"),
    ],
)
def test_a_rewrite_writes_parquets_geospatial_types(name: str, logical: str) -> None:
    """What a file read without the extension holds (WKB as binary) conforms to the table's
    type and is written with Parquet's logical type for it, values unchanged."""
    schema = json.dumps({"type": "struct", "fields": [field("g", name)]})
    layout = PhysicalLayout.build(schema, (), {})
    assert isinstance(layout.schema.field("g").type, WkbType)
    assert to_arrow_type(name) == arrow_type(name)
    read = pa.table({"g": pa.array([POINT, None], pa.binary())})
    out = io.BytesIO()
    pq.write_table(layout.conform(read), out)
    written = pq.ParquetFile(io.BytesIO(out.getvalue()))
    assert str(written.schema.column(0).logical_type) == logical
    assert written.read().column("g").to_pylist() == [POINT, None]


def test_geospatial_tables_are_read_maintained_and_rewritten_not_appended() -> None:
    metadata = _meta("geometry(OGC:CRS84)", "geography(OGC:CRS84, spherical)")
    check_readable(GEO)
    for step in ("checkpoint", "log cleanup", "VACUUM"):
        check_maintainable(GEO, step)
    check_writable(GEO, metadata, rows_unchanged=True)
    with pytest.raises(UnsupportedWriterFeatureError, match="geospatial"):
        check_writable(GEO, metadata)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("geography(OGC:CRS84, karney)", "writes only spherical geographies"),
        ("geometry(projjson:crs_prop)", "names a table property holding PROJJSON"),
    ],
)
def test_what_a_parquet_file_cannot_say_is_refused_before_anything_is_written(
    name: str, why: str
) -> None:
    metadata = _meta(name)
    assert [column for column, _ in unwritable_columns(metadata.schema_string)] == ["c0"]
    with pytest.raises(UnsupportedWriterFeatureError, match=f"column c0 cannot be.*{why}"):
        check_writable(GEO, metadata, rows_unchanged=True)
    check_maintainable(GEO, "checkpoint")  # the log steps never write a data file


def test_an_unknown_reader_feature_still_stops_every_step() -> None:
    """The reader feature is known now; an unknown one still stops everything."""
    with pytest.raises(UnsupportedReaderFeatureError, match="geospatialV2"):
        check_readable(Protocol(3, 7, ["geospatialV2"], ["geospatialV2"]))
