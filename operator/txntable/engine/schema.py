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

from txntable.engine.errors import InvalidActionError

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
    """Typed partition values from their log strings; empty string and null become null."""
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
