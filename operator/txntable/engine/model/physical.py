"""Data files in the physical domain: column mapping, type widening and variant columns.

The Delta schema is *logical*; data files are *physical*. With column mapping (``name`` or
``id`` mode) every column and struct field is stored under its ``delta.columnMapping.physicalName``
and carries its ``delta.columnMapping.id`` as the Parquet ``field_id``; statistics and partition
values are keyed by physical names. With type widening an older file may store a column in a
narrower type than the schema says now. A ``variant`` column is a struct of two binaries.

Anything that rewrites data files (OPTIMIZE) must therefore read each input by physical name or
field id, bring it to the table's current types with lossless casts, and write it back under the
physical names and ids. This module builds that physical Arrow schema from the Delta schema and
conforms a table read from a file to it, recursively through structs, lists and maps, so the two
cannot disagree between the reader and the writer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import InvalidActionError, UnsupportedWriterFeatureError
from txntable.engine.model.schema import (
    Field,
    parse_partition_column,
    parse_schema,
    to_arrow_type,
)

#: Parquet field id as pyarrow reads and writes it (field metadata).
FIELD_ID_KEY = b"PARQUET:field_id"
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
#: a struct field's collations (the ``collations`` feature): present only for non-binary ones
COLLATIONS_KEY = "__COLLATIONS"
COLUMN_ID_KEY = "delta.columnMapping.id"
#: ids of array elements and map keys/values (IcebergCompatV2); Spark's and the protocol's keys
NESTED_IDS_KEYS = ("delta.columnMapping.nested.ids", "parquet.field.nested.ids")
_MODES = ("none", "name", "id")

Path = tuple[str, ...]


def column_mapping_mode(configuration: Mapping[str, str]) -> str:
    """``none``, ``name`` or ``id`` from ``delta.columnMapping.mode`` (absent: ``none``)."""
    raw = configuration.get("delta.columnMapping.mode")
    mode = (raw or "none").strip().lower()
    if mode not in _MODES:
        raise InvalidActionError(
            f"delta.columnMapping.mode must be one of {', '.join(_MODES)}, got {raw!r}"
        )
    return mode


def physical_name(field: Field, mode: str) -> str:
    """The name a column has in data files, statistics and partition values."""
    return field.name if mode == "none" else field.physical_name


def partition_physical_names(
    fields: Sequence[Field], partition_columns: Sequence[str], configuration: Mapping[str, str]
) -> dict[str, str]:
    """Logical partition column -> the key of ``add.partitionValues`` (physical with mapping)."""
    mode = column_mapping_mode(configuration)
    by_name = {f.name: f for f in fields}
    out: dict[str, str] = {}
    for column in partition_columns:
        field = by_name.get(column)
        out[column] = physical_name(field, mode) if field is not None else column
    return out


# -- Delta schema -> physical Arrow schema ------------------------------------------------------


def _id_metadata(value: Any) -> dict[bytes, bytes] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return {FIELD_ID_KEY: str(value).encode()}
    return None


def _nested_ids(metadata: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Nested ids of one struct field keyed by their path below it (``element``, ``key.value``);
    the stored keys start with the field's physical (Spark) or logical name."""
    out: dict[str, Any] = {}
    for key in NESTED_IDS_KEYS:
        raw = metadata.get(key)
        if not isinstance(raw, Mapping):
            continue
        for path, value in raw.items():
            for name in names:
                if isinstance(path, str) and path.startswith(name + "."):
                    out.setdefault(path[len(name) + 1 :], value)
    return out


def _physical_field(
    name: str, delta_type: Any, nullable: bool, metadata: Mapping[str, Any], mode: str
) -> pa.Field:
    if mode == "none":
        return pa.field(name, to_arrow_type(delta_type), nullable)
    physical = metadata.get(PHYSICAL_NAME_KEY)
    physical = physical if isinstance(physical, str) and physical else name
    nested = _nested_ids(metadata, (physical, name))
    arrow_type = _physical_type(delta_type, mode, "", nested)
    return pa.field(
        physical, arrow_type, nullable, metadata=_id_metadata(metadata.get(COLUMN_ID_KEY))
    )


def _physical_type(delta_type: Any, mode: str, path: str, nested: Mapping[str, Any]) -> pa.DataType:
    if isinstance(delta_type, str):
        return to_arrow_type(delta_type)
    kind = delta_type.get("type")
    if kind == "struct":
        return pa.struct(
            [
                _physical_field(
                    f["name"], f["type"], f.get("nullable", True), f.get("metadata") or {}, mode
                )
                for f in delta_type["fields"]
            ]
        )
    prefix = f"{path}." if path else ""
    if kind == "array":
        element = f"{prefix}element"
        return pa.list_(
            pa.field(
                "element",
                _physical_type(delta_type["elementType"], mode, element, nested),
                delta_type.get("containsNull", True),
                metadata=_id_metadata(nested.get(element)),
            )
        )
    if kind == "map":
        key, value = f"{prefix}key", f"{prefix}value"
        return pa.map_(
            pa.field(
                "key",
                _physical_type(delta_type["keyType"], mode, key, nested),
                False,
                metadata=_id_metadata(nested.get(key)),
            ),
            pa.field(
                "value",
                _physical_type(delta_type["valueType"], mode, value, nested),
                True,
                metadata=_id_metadata(nested.get(value)),
            ),
        )
    raise InvalidActionError(f"unknown Delta type {delta_type!r}")


def _variant_paths(delta_type: Any, path: Path, mode: str, out: list[Path]) -> None:
    if delta_type == "variant":
        out.append(path)
        return
    if not isinstance(delta_type, dict):
        return
    kind = delta_type.get("type")
    if kind == "struct":
        for f in delta_type["fields"]:
            meta = f.get("metadata") or {}
            name = f["name"]
            if mode != "none" and isinstance(meta.get(PHYSICAL_NAME_KEY), str):
                name = meta[PHYSICAL_NAME_KEY] or name
            _variant_paths(f["type"], (*path, name), mode, out)
    elif kind == "array":
        _variant_paths(delta_type["elementType"], (*path, "element"), mode, out)
    elif kind == "map":
        _variant_paths(delta_type["keyType"], (*path, "key"), mode, out)
        _variant_paths(delta_type["valueType"], (*path, "value"), mode, out)


def _collated_paths(delta_type: Any, path: Path, mode: str, out: list[Path]) -> None:
    """Physical paths of the string fields of structs (top level included) that carry a
    collation (``__COLLATIONS`` in the field's metadata): their min/max statistics would follow
    the binary order, not their collation's."""
    if not isinstance(delta_type, dict) or delta_type.get("type") != "struct":
        return
    for f in delta_type["fields"]:
        meta = f.get("metadata") or {}
        name = f["name"]
        if mode != "none" and isinstance(meta.get(PHYSICAL_NAME_KEY), str):
            name = meta[PHYSICAL_NAME_KEY] or name
        if f["type"] == "string" and COLLATIONS_KEY in meta:
            out.append((*path, name))
        _collated_paths(f["type"], (*path, name), mode, out)


@dataclass(frozen=True)
class PhysicalLayout:
    """How a table's rows are laid out in its data files (partition columns excluded from
    ``schema``; ``partition_schema`` is how they are written when materialized)."""

    fields: tuple[Field, ...]
    mode: str
    schema: pa.Schema
    #: physical paths of ``variant`` columns (``element``/``key``/``value`` through lists, maps)
    variant_paths: frozenset[Path]
    #: logical partition column -> its key in ``add.partitionValues`` and directory names
    partition_keys: Mapping[str, str]
    #: the partition columns as data files hold them when materialized: physical names, field
    #: ids, in the table's partitioning order (``partition_fields``: their schema fields)
    partition_schema: pa.Schema
    partition_fields: tuple[Field, ...]
    #: physical paths of columns that get a null count but no min/max statistics: variant
    #: columns (one value each) and collated strings
    unbounded_paths: frozenset[Path]

    @classmethod
    def build(
        cls,
        schema_string: str,
        partition_columns: Sequence[str],
        configuration: Mapping[str, str],
    ) -> PhysicalLayout:
        mode = column_mapping_mode(configuration)
        excluded = set(partition_columns)  # the schema names them logically
        every = parse_schema(schema_string)
        fields = tuple(f for f in every if f.name not in excluded)
        keys = partition_physical_names(every, partition_columns, configuration)
        schema = pa.schema(
            [_physical_field(f.name, f.type, f.nullable, f.metadata, mode) for f in fields]
        )
        by_name = {f.name: f for f in every}
        partition_fields = tuple(by_name[c] for c in partition_columns if c in by_name)
        partition_schema = pa.schema(
            [
                _physical_field(p.name, p.type, p.nullable, p.metadata, mode)
                for p in partition_fields
            ]
        )
        variants: list[Path] = []
        collated: list[Path] = []
        for f in fields:
            _variant_paths(f.type, (physical_name(f, mode),), mode, variants)
        as_struct = {
            "type": "struct",
            "fields": [{"name": f.name, "type": f.type, "metadata": f.metadata} for f in fields],
        }
        _collated_paths(as_struct, (), mode, collated)
        return cls(
            fields,
            mode,
            schema,
            frozenset(variants),
            keys,
            partition_schema,
            partition_fields,
            frozenset(variants) | frozenset(collated),
        )

    def partition_columns(self, values: Mapping[str, str | None], num_rows: int) -> pa.Table:
        """The partition columns as materialized into a data file of ``num_rows`` rows: each
        the typed value of ``values`` (keyed as ``add.partitionValues`` keys them), repeated."""
        arrays = []
        for field, target in zip(self.partition_fields, self.partition_schema, strict=True):
            raw = values.get(self.partition_keys.get(field.name, field.name))
            strings = pa.array([raw] * num_rows, pa.string())
            arrays.append(parse_partition_column(strings, field.type).cast(target.type))
        return pa.Table.from_arrays(arrays, schema=self.partition_schema)

    def physical_column(self, logical: str) -> str:
        """The physical name of a top-level data column (unknown names are returned as given)."""
        for f in self.fields:
            if f.name == logical:
                return physical_name(f, self.mode)
        return logical

    def physical_path(self, logical: Sequence[str]) -> Path | None:
        """A dotted logical column path (struct fields only) in physical names; None if absent."""
        if self.mode == "none":
            return tuple(logical)
        fields: list[dict[str, Any]] = [
            {"name": f.name, "type": f.type, "metadata": f.metadata} for f in self.fields
        ]
        out: list[str] = []
        for i, name in enumerate(logical):
            match = next((f for f in fields if f["name"] == name), None)
            if match is None:
                return None
            physical = (match.get("metadata") or {}).get(PHYSICAL_NAME_KEY)
            out.append(physical if isinstance(physical, str) and physical else name)
            kind = match["type"]
            if i + 1 < len(logical):
                if not isinstance(kind, dict) or kind.get("type") != "struct":
                    return None
                fields = list(kind["fields"])
        return tuple(out)

    def conform(self, table: pa.Table) -> pa.Table:
        """``table`` (as read from one data file) with exactly this layout's columns."""
        return conform_table(
            table, self.schema, by_id=self.mode == "id", variants=self.variant_paths
        )


# -- conforming a file's columns to the physical schema -----------------------------------------


def field_id(field: pa.Field) -> int | None:
    """The Parquet field id pyarrow read for ``field``, if any."""
    meta = field.metadata or {}
    raw = meta.get(FIELD_ID_KEY)
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _match(source: Sequence[pa.Field], target: pa.Field, by_id: bool) -> int | None:
    """Index of the source field that holds ``target``'s data: by field id when resolving by id
    and the source level has ids (else by name, as for files written without ids)."""
    wanted = field_id(target) if by_id else None
    if wanted is not None and any(field_id(f) is not None for f in source):
        for i, f in enumerate(source):
            if field_id(f) == wanted:
                return i
        return None
    for i, f in enumerate(source):
        if f.name == target.name:
            return i
    return None


def conform_table(
    table: pa.Table,
    schema: pa.Schema,
    *,
    by_id: bool = False,
    variants: frozenset[Path] = frozenset(),
) -> pa.Table:
    """``table`` with exactly ``schema``'s columns: matched by name (or field id), missing ones
    null, nested fields matched the same way, types cast losslessly (a widened column)."""
    source = list(table.schema)
    columns = []
    for target in schema:
        index = _match(source, target, by_id)
        if index is None:
            columns.append(pa.nulls(table.num_rows, target.type))
            continue
        column = table.column(index)
        chunks = [
            _conform_array(chunk, target.type, by_id, (target.name,), variants)
            for chunk in column.chunks
        ]
        columns.append(pa.chunked_array(chunks, type=target.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _conform_array(
    array: pa.Array, target: pa.DataType, by_id: bool, path: Path, variants: frozenset[Path]
) -> pa.Array:
    source = array.type
    if source.equals(target, check_metadata=True):
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(source):
        return _conform_struct(array, target, by_id, path, variants)
    if pa.types.is_map(target) and pa.types.is_map(source):
        keys, items, offsets = _list_parts(array, array.keys, array.items)
        return pa.MapArray.from_arrays(
            offsets,
            _conform_array(keys, target.key_type, by_id, (*path, "key"), variants),
            _conform_array(items, target.item_type, by_id, (*path, "value"), variants),
            type=target,
            mask=array.is_null() if array.null_count else None,
        )
    if pa.types.is_list(target) and (pa.types.is_list(source) or pa.types.is_large_list(source)):
        values, _, offsets = _list_parts(array, array.values, None)
        return pa.ListArray.from_arrays(
            offsets,
            _conform_array(values, target.value_type, by_id, (*path, "element"), variants),
            type=target,
            mask=array.is_null() if array.null_count else None,
        )
    return array.cast(target)  # safe: an overflow or lost digit is an error, never a change


def _list_parts(
    array: Any, values: pa.Array, items: pa.Array | None
) -> tuple[pa.Array, pa.Array, pa.Array]:
    """Children and zero-based int32 offsets of a (possibly sliced) list or map array."""
    offsets = array.offsets
    start = offsets[0].as_py() if len(offsets) else 0
    end = offsets[-1].as_py() if len(offsets) else 0
    rebased = pc.subtract(offsets, pa.scalar(start, offsets.type)).cast(pa.int32())
    values = values.slice(start, end - start)
    if items is not None:
        items = items.slice(start, end - start)
    return values, items if items is not None else values, rebased


def _conform_struct(
    array: pa.StructArray,
    target: pa.StructType,
    by_id: bool,
    path: Path,
    variants: frozenset[Path],
) -> pa.Array:
    source = [array.type.field(i) for i in range(array.type.num_fields)]
    if path in variants and any(f.name == "typed_value" for f in source):
        raise UnsupportedWriterFeatureError(
            f"column {'.'.join(path)} holds shredded variant data (a typed_value field); "
            "rewriting shredded variants is not supported",
            ("variantShredding",),
        )
    children = []
    targets = [target.field(i) for i in range(target.num_fields)]
    for child in targets:
        index = _match(source, child, by_id)
        if index is None:
            children.append(pa.nulls(len(array), child.type))
        else:
            children.append(
                _conform_array(array.field(index), child.type, by_id, (*path, child.name), variants)
            )
    return pa.StructArray.from_arrays(
        children, fields=targets, mask=array.is_null() if array.null_count else None
    )
