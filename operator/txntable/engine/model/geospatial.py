"""The geospatial types (Delta's ``geospatial`` reader/writer feature) as Arrow types.

A ``geometry(<crs>)`` or ``geography(<crs>, <algorithm>)`` column (the geospatial types RFC
of delta-io/delta) holds WKB values; its data files store them as Parquet's GEOMETRY and
GEOGRAPHY logical types (BYTE_ARRAY with the CRS, and the edge algorithm for a geography), with
bounding boxes in the column chunks' geospatial statistics. In Arrow they are the GeoArrow
``geoarrow.wkb`` extension type over binary, its metadata ``{"crs": ..., "edges": ...}``:
pyarrow reads the Parquet logical types into it (with ``arrow_extensions_enabled``) and writes
it back as those logical types, computing the bounding boxes, so a rewrite keeps what a reader
of the file needs. Delta's own statistics for these columns are a null count only here (the
RFC allows a bounding box as WKT points in ``minValues``/``maxValues``, which a writer may leave
out, as delta-spark 4.4 does).

The CRS forms Delta and Parquet share (``<authority>:<code>`` such as ``OGC:CRS84`` or
``EPSG:3857``, and ``srid:<n>``) are carried as they are; ``projjson:<name>`` means a table
property in Delta but a key of the file's metadata in Parquet, and pyarrow writes geographies
with spherical edges only, so a rewrite refuses those (``unwritable``) rather than write a file
whose type says something else.
"""

from __future__ import annotations

import contextlib
import json
import re
from typing import Any

import pyarrow as pa

#: the GeoArrow extension name pyarrow maps Parquet's GEOMETRY/GEOGRAPHY logical types to
WKB_EXTENSION = "geoarrow.wkb"
#: the feature's name in the protocol
FEATURE = "geospatial"

_GEOMETRY = re.compile(r"^geometry\(\s*([^,()]+?)\s*\)$", re.IGNORECASE)
_GEOGRAPHY = re.compile(r"^geography\(\s*([^,()]+?)\s*,\s*([A-Za-z]+)\s*\)$", re.IGNORECASE)
_ALGORITHMS = ("spherical", "vincenty", "thomas", "andoyer", "karney")


class WkbType(pa.ExtensionType):  # type: ignore[misc]
    """``geoarrow.wkb``: WKB in a binary array, the CRS (and edges) in the type's metadata."""

    def __init__(self, metadata: bytes = b"{}") -> None:
        self.serialized = metadata
        super().__init__(pa.binary(), WKB_EXTENSION)

    def __arrow_ext_serialize__(self) -> bytes:
        return self.serialized

    @classmethod
    def __arrow_ext_deserialize__(cls, storage_type: pa.DataType, serialized: bytes) -> WkbType:
        return cls(serialized)

    @property
    def params(self) -> dict[str, Any]:
        try:
            found = json.loads(self.serialized or b"{}")
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}


with contextlib.suppress(pa.ArrowKeyError):  # once per process: pyarrow refuses a second
    pa.register_extension_type(WkbType())


def parse(delta_type: str) -> tuple[str, str, str | None] | None:
    """``(kind, crs, algorithm)`` of a geospatial type name (``algorithm`` None for a
    geometry); None for any other type name."""
    if m := _GEOMETRY.match(delta_type):
        return "geometry", m[1], None
    if m := _GEOGRAPHY.match(delta_type):
        algorithm = m[2].lower()
        return ("geography", m[1], algorithm) if algorithm in _ALGORITHMS else None
    return None


def arrow_type(delta_type: str) -> pa.DataType | None:
    """The Arrow type of a geospatial type name (None for any other name)."""
    parsed = parse(delta_type)
    if parsed is None:
        return None
    _, crs, algorithm = parsed
    params: dict[str, Any] = {"crs": crs}
    if algorithm is not None:
        params["edges"] = algorithm
    return WkbType(json.dumps(params, separators=(",", ":")).encode())


def is_geospatial(delta_type: Any) -> bool:
    return isinstance(delta_type, str) and parse(delta_type) is not None


def unwritable(delta_type: Any) -> str | None:
    """Why data files of a column of this type cannot be written as its type says, or None."""
    parsed = parse(delta_type) if isinstance(delta_type, str) else None
    if parsed is None:
        return None
    _, crs, algorithm = parsed
    if crs.lower().startswith("projjson:"):
        return (
            f"its CRS {crs} names a table property holding PROJJSON, which a Parquet file "
            "cannot point at (its projjson: names a key of the file's own metadata)"
        )
    if algorithm is not None and algorithm != "spherical":
        return (
            f"its edges are interpolated by {algorithm}, and the Parquet writer here (pyarrow) "
            "writes only spherical geographies"
        )
    return None


def unwritable_columns(schema_string: str) -> list[tuple[str, str]]:
    """(column path, why) of every geospatial column whose files cannot be written."""
    try:
        schema = json.loads(schema_string) if schema_string else {}
    except ValueError:
        return []
    out: list[tuple[str, str]] = []
    _walk(schema, "", out)
    return out


def _walk(delta_type: Any, where: str, out: list[tuple[str, str]]) -> None:
    if isinstance(delta_type, str):
        if (why := unwritable(delta_type)) is not None:
            out.append((where, why))
        return
    if not isinstance(delta_type, dict):
        return
    kind = delta_type.get("type")
    if kind == "struct":
        for f in delta_type.get("fields", []):
            _walk(f.get("type"), f"{where}.{f.get('name')}" if where else str(f.get("name")), out)
    elif kind == "array":
        _walk(delta_type.get("elementType"), f"{where}.element", out)
    elif kind == "map":
        _walk(delta_type.get("keyType"), f"{where}.key", out)
        _walk(delta_type.get("valueType"), f"{where}.value", out)
