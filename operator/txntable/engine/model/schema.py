"""Delta's JSON schema (``metaData.schemaString``) as Arrow types, and typed partition values.

Partition values are strings in the log; queries and planners want them typed. Parsing happens
column-wise (one Arrow cast per partition column), never per row in Python, so a table with a
hundred thousand files types its partitions in milliseconds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import InvalidActionError, InvalidArgumentError
from txntable.engine.model import geospatial

_DECIMAL = re.compile(r"^decimal\((\d+),\s*(\d+)\)$")

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
    "variant": pa.struct([("value", pa.binary()), ("metadata", pa.binary())]),
}


@dataclass(frozen=True, slots=True)
class Field:
    """A top-level column: logical name, Delta type JSON, physical name (column mapping)."""

    name: str
    type: Any
    nullable: bool
    metadata: dict[str, Any]

    @property
    def physical_name(self) -> str:
        value = self.metadata.get("delta.columnMapping.physicalName")
        return value if isinstance(value, str) and value else self.name

    @property
    def arrow_type(self) -> pa.DataType:
        return to_arrow_type(self.type)


def parse_schema(schema_string: str) -> list[Field]:
    """Top-level fields of a Delta schema string."""
    try:
        obj = json.loads(schema_string) if schema_string else {"type": "struct", "fields": []}
    except ValueError as exc:
        raise InvalidActionError(f"metaData.schemaString is not valid JSON: {exc}") from exc
    if not isinstance(obj, dict) or obj.get("type") != "struct":
        raise InvalidActionError("metaData.schemaString is not a struct type")
    return [
        Field(f["name"], f["type"], bool(f.get("nullable", True)), dict(f.get("metadata") or {}))
        for f in obj.get("fields", [])
    ]


def to_arrow_type(delta_type: Any) -> pa.DataType:
    """Arrow type for a Delta type (primitive name or nested JSON object)."""
    if isinstance(delta_type, str):
        if delta_type in _PRIMITIVES:
            return _PRIMITIVES[delta_type]
        if m := _DECIMAL.match(delta_type):
            return pa.decimal128(int(m[1]), int(m[2]))
        if (geo := geospatial.arrow_type(delta_type)) is not None:
            return geo
        raise InvalidActionError(f"unknown Delta type {delta_type!r}")
    kind = delta_type.get("type")
    if kind == "struct":
        return pa.struct(
            [
                pa.field(f["name"], to_arrow_type(f["type"]), f.get("nullable", True))
                for f in delta_type["fields"]
            ]
        )
    if kind == "array":
        return pa.list_(
            pa.field(
                "element",
                to_arrow_type(delta_type["elementType"]),
                delta_type.get("containsNull", True),
            )
        )
    if kind == "map":
        return pa.map_(to_arrow_type(delta_type["keyType"]), to_arrow_type(delta_type["valueType"]))
    raise InvalidActionError(f"unknown Delta type {delta_type!r}")


def to_arrow_schema(fields: list[Field]) -> pa.Schema:
    return pa.schema([pa.field(f.name, f.arrow_type, f.nullable) for f in fields])


def parse_partition_column(values: pa.Array, delta_type: Any) -> pa.Array:
    """Typed partition values from their log strings; empty string and null become null.

    A value that does not parse as its column's type is a corrupt log, not a crash.
    """
    try:
        return _parse_partition_column(values, delta_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeEncodeError) as exc:
        raise InvalidActionError(
            f"partition values cannot be read as {json.dumps(delta_type)}: {exc}"[:500]
        ) from exc


def _parse_partition_column(values: pa.Array, delta_type: Any) -> pa.Array:
    strings = pc.if_else(pc.equal(values, ""), pa.scalar(None, pa.string()), values)
    target = to_arrow_type(delta_type)
    if pa.types.is_string(target):
        return strings
    if pa.types.is_binary(target):
        return _latin1_bytes(strings)
    if pa.types.is_boolean(target):
        lowered = pc.utf8_lower(strings)
        return pc.if_else(
            pc.equal(lowered, "true"), True, pc.if_else(pc.equal(lowered, "false"), False, None)
        )
    if pa.types.is_timestamp(target):
        return _parse_timestamps(strings, target)
    return pc.cast(strings, target)


def _latin1_bytes(strings: pa.Array) -> pa.Array:
    # Binary partition values are strings whose code points are the bytes.
    return pa.array(
        [None if s is None else s.encode("latin-1", "surrogatepass") for s in strings.to_pylist()],
        pa.binary(),
    )


def _parse_timestamps(strings: pa.Array, target: pa.TimestampType) -> pa.Array:
    # Accepted: 'YYYY-MM-DD HH:MM:SS[.ffffff]' and ISO-8601 'YYYY-MM-DDTHH:MM:SS[.ffffff]Z'.
    normalized = pc.replace_substring_regex(strings, pattern=r"Z$", replacement="")
    normalized = pc.replace_substring(normalized, pattern="T", replacement=" ")
    naive = pc.cast(normalized, pa.timestamp("us"))
    if target.tz is None:
        return naive
    return pc.assume_timezone(naive, "UTC")


# -- Arrow -> Delta (new tables, appended data) -------------------------------------------------


def from_arrow_type(arrow_type: pa.DataType) -> Any:
    """The Delta type (JSON value) for an Arrow type; types Delta cannot store are refused."""
    simple = _from_arrow_simple(arrow_type)
    if simple is not None:
        return simple
    if pa.types.is_decimal(arrow_type):
        if arrow_type.precision > 38:
            raise InvalidArgumentError(f"decimal precision {arrow_type.precision} exceeds 38")
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if pa.types.is_struct(arrow_type):
        return {
            "type": "struct",
            "fields": [_field_json(arrow_type.field(i)) for i in range(arrow_type.num_fields)],
        }
    if pa.types.is_map(arrow_type):
        return {
            "type": "map",
            "keyType": from_arrow_type(arrow_type.key_type),
            "valueType": from_arrow_type(arrow_type.item_type),
            "valueContainsNull": arrow_type.item_field.nullable,
        }
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return {
            "type": "array",
            "elementType": from_arrow_type(arrow_type.value_type),
            "containsNull": arrow_type.value_field.nullable,
        }
    raise InvalidArgumentError(f"Arrow type {arrow_type} has no Delta equivalent")


def _from_arrow_simple(arrow_type: pa.DataType) -> str | None:
    checks: list[tuple[Any, str]] = [
        (pa.types.is_boolean, "boolean"),
        (pa.types.is_int8, "byte"),
        (pa.types.is_int16, "short"),
        (pa.types.is_int32, "integer"),
        (pa.types.is_int64, "long"),
        (pa.types.is_uint8, "short"),
        (pa.types.is_uint16, "integer"),
        (pa.types.is_uint32, "long"),
        (pa.types.is_float32, "float"),
        (pa.types.is_float64, "double"),
        (pa.types.is_string, "string"),
        (pa.types.is_large_string, "string"),
        (pa.types.is_string_view, "string"),
        (pa.types.is_binary, "binary"),
        (pa.types.is_large_binary, "binary"),
        (pa.types.is_binary_view, "binary"),
        (pa.types.is_date, "date"),
    ]
    for check, name in checks:
        if check(arrow_type):
            return name
    if pa.types.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz is not None else "timestamp_ntz"
    return None


def _field_json(field: pa.Field) -> dict[str, Any]:
    return {
        "name": field.name,
        "type": from_arrow_type(field.type),
        "nullable": field.nullable,
        "metadata": {},
    }


def schema_string_from_arrow(schema: pa.Schema) -> str:
    """``metaData.schemaString`` for an Arrow schema (compact JSON, as Spark writes it)."""
    names = [f.name for f in schema]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise InvalidArgumentError(f"duplicate column name(s): {', '.join(duplicates)}")
    if not names:
        raise InvalidArgumentError("a table needs at least one column")
    obj = {"type": "struct", "fields": [_field_json(f) for f in schema]}
    return json.dumps(obj, separators=(",", ":"))


def uses_timestamp_ntz(delta_type: Any) -> bool:
    """True when a Delta type (or schema) contains ``timestamp_ntz`` anywhere."""
    if isinstance(delta_type, str):
        return delta_type == "timestamp_ntz"
    if isinstance(delta_type, list):
        return any(uses_timestamp_ntz(f) for f in delta_type)
    if isinstance(delta_type, dict):
        return any(uses_timestamp_ntz(v) for k, v in delta_type.items() if k != "metadata")
    return False
