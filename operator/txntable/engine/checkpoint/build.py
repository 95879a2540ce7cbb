"""The rows of a classic (V1) checkpoint, built column-wise from a snapshot's Arrow state.

A checkpoint is the reconciled state (PROTOCOL.md "Action Reconciliation") in the Parquet layout of
PROTOCOL.md "Checkpoint Schema": one nullable
struct column per action type, one action per row. The live files and tombstones are already Arrow
tables (``state.ADD_SCHEMA``/``REMOVE_SCHEMA``), so the ``add`` and ``remove`` columns are made by
re-wrapping their columns (``dataChange`` forced to false, tombstones filtered by retention and
stripped of ``stats``/``tags``) rather than by touching each row in Python; statistics as a struct
(``stats_parsed``) come from Arrow's JSON reader over the ``stats`` strings. Only the handful of
non-file actions (protocol, metadata, txns, domains) are Python values.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from txntable.engine.checkpoint import retention
from txntable.engine.errors import CorruptLogError, InvalidActionError
from txntable.engine.model.features import writer_features
from txntable.engine.model.physical import Path, PhysicalLayout, partition_physical_names
from txntable.engine.model.schema import Field, parse_partition_column, parse_schema, to_arrow_type
from txntable.engine.read.state import ADD_SCHEMA, REMOVE_SCHEMA, TableState

log = logging.getLogger(__name__)

_STR_MAP = pa.map_(pa.string(), pa.string())
TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _STR_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", _STR_MAP),
        ("createdTime", pa.int64()),
    ]
)
PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
DOMAIN_TYPE = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", _STR_MAP)])
_REMOVE_FIELDS = [f for f in REMOVE_SCHEMA if f.name not in ("stats", "tags")]
REMOVE_TYPE = pa.struct(_REMOVE_FIELDS)
_ELIGIBLE_MIN_MAX = (
    pa.types.is_integer,
    pa.types.is_floating,
    pa.types.is_decimal,
    pa.types.is_string,
    pa.types.is_date,
    pa.types.is_timestamp,
)


def _nulls(length: int, typ: pa.DataType) -> pa.Array:
    return pa.nulls(length, typ)


def _segment(schema: pa.Schema, length: int, column: str, values: Any) -> pa.Table:
    arrays = [values if f.name == column else _nulls(length, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, schema=schema)


# -- add ------------------------------------------------------------------------------------
def _stats_fields(
    fields: list[Field], partition_columns: list[str], config: Mapping[str, str]
) -> list[Field]:
    data_fields = [f for f in fields if f.name not in partition_columns]
    explicit = config.get("delta.dataSkippingStatsColumns")
    if explicit:
        wanted = {c.strip().strip("`") for c in explicit.split(",") if c.strip()}
        return [f for f in data_fields if f.name in wanted]
    limit = int(config.get("delta.dataSkippingNumIndexedCols", "32") or 32)
    return data_fields if limit < 0 else data_fields[:limit]


def _stats_member(
    typ: pa.DataType, path: Path, variants: frozenset[Path], *, counts: bool, for_json: bool
) -> pa.DataType | None:
    """Type of one stats member at physical ``path`` (None: the column has no such statistic).
    A variant column (a struct of two binaries in its files) is one value: a null count, no
    bounds (those of shredded variants are encoded variants, which are not parsed here)."""
    if path in variants:
        return pa.int64() if counts else None
    if pa.types.is_struct(typ):
        children = [
            pa.field(f.name, t)
            for f in typ
            if (
                t := _stats_member(
                    f.type, (*path, f.name), variants, counts=counts, for_json=for_json
                )
            )
            is not None
        ]
        return pa.struct(children) if children else None
    if counts:
        return pa.int64()
    if not any(check(typ) for check in _ELIGIBLE_MIN_MAX):
        return None
    if for_json and pa.types.is_date(typ):
        return pa.string()  # Arrow's JSON reader cannot parse dates: cast afterwards
    return typ


def stats_struct_type(
    fields: list[Field], configuration: Mapping[str, str], *, for_json: bool = False
) -> pa.StructType:
    """``stats_parsed`` type for the indexed columns ``fields``: named as the statistics name
    them, physically under column mapping, nested struct fields included."""
    layout = PhysicalLayout.build(
        json.dumps({"type": "struct", "fields": [_field_json(f) for f in fields]}),
        (),
        configuration,
    )

    def members(counts: bool) -> pa.StructType:
        out = []
        for f in layout.schema:
            t = _stats_member(
                f.type, (f.name,), layout.variant_paths, counts=counts, for_json=for_json
            )
            if t is not None:
                out.append(pa.field(f.name, t))
        return pa.struct(out)

    return pa.struct(
        [
            ("numRecords", pa.int64()),
            ("minValues", members(False)),
            ("maxValues", members(False)),
            ("nullCount", members(True)),
            ("tightBounds", pa.bool_()),
        ]
    )


def _field_json(field: Field) -> dict[str, Any]:
    return {
        "name": field.name,
        "type": field.type,
        "nullable": field.nullable,
        "metadata": field.metadata,
    }


def _cast_to(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast the members read as strings (dates) to their real type, struct by struct."""
    if array.type == target:
        return array
    if pa.types.is_struct(target):
        children = [
            _cast_to(pc.struct_field(array, [i]), target.field(i).type)
            for i in range(target.num_fields)
        ]
        return pa.StructArray.from_arrays(
            children, fields=list(target), mask=pc.invert(pc.is_valid(array))
        )
    return pc.cast(array, target)


def parse_stats(
    stats: pa.Array, fields: list[Field], configuration: Mapping[str, str] | None = None
) -> pa.Array:
    """``stats_parsed`` from the JSON ``stats`` strings, with Arrow's JSON reader (null where the
    stats are null)."""
    target = stats_struct_type(fields, configuration or {})
    read_type = stats_struct_type(fields, configuration or {}, for_json=True)
    n = len(stats)
    if n == 0:
        return pa.array([], target)
    # one NDJSON document: each stats string plus a newline, straight from the Arrow buffers
    lines = pc.binary_join_element_wise(pc.fill_null(stats, "{}"), "", "\n").cast(pa.large_string())
    offsets = pa.Array.from_buffers(
        pa.int64(), n + 1, [None, lines.buffers()[1]], offset=lines.offset
    )
    begin, end = int(offsets[0].as_py()), int(offsets[n].as_py())
    body = lines.buffers()[2].slice(begin, end - begin)
    longest = int(pc.max(pc.binary_length(lines)).as_py() or 0)
    table = pa_json.read_json(
        pa.BufferReader(body),
        read_options=pa_json.ReadOptions(block_size=max(1 << 22, 2 * longest)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=pa.schema(list(read_type)), unexpected_field_behavior="ignore"
        ),
    )
    if table.num_rows != n:
        raise CorruptLogError(f"statistics of {n} files parsed into {table.num_rows} rows")
    parsed = _cast_to(table.to_struct_array().combine_chunks(), target)
    return pc.if_else(pc.is_valid(stats), parsed, pa.scalar(None, target))


def parse_partition_values(
    values: pa.Array,
    fields: list[Field],
    partition_columns: list[str],
    configuration: Mapping[str, str] | None = None,
) -> pa.Array:
    """``partitionValues_parsed``: one typed member per partition column, named as
    ``partitionValues`` keys it (physically under column mapping)."""
    by_name = {f.name: f for f in fields}
    keys = partition_physical_names(fields, partition_columns, configuration or {})
    children: list[pa.Array] = []
    out_fields: list[pa.Field] = []
    for name in partition_columns:
        field = by_name.get(name)
        physical = keys[name]
        delta_type = field.type if field else "string"
        raw = (
            pc.map_lookup(values, pa.scalar(physical), "first")
            if len(values)
            else pa.array([], pa.string())
        )
        children.append(parse_partition_column(raw, delta_type))
        out_fields.append(pa.field(physical, to_arrow_type(delta_type)))
    return pa.StructArray.from_arrays(children, fields=out_fields)


def _combine(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """One array (tombstones are few: a copy is cheap)."""
    if isinstance(column, pa.ChunkedArray):
        return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    return column


#: what ``stats_parsed`` and ``partitionValues_parsed`` are built from: the schema's fields, the
#: partition columns, the indexed columns (None: no ``stats_parsed``), the table's configuration
_StructOf = tuple[list[Field], list[str], list[Field] | None, Mapping[str, str]]


def _add_chunk(
    batch: pa.RecordBatch,
    as_json: bool,
    struct_of: _StructOf | None,
) -> pa.StructArray:
    """One chunk of the ``add`` column: the batch's columns re-wrapped (no copy)."""
    n = batch.num_rows
    children: list[pa.Array] = []
    out_fields: list[pa.Field] = []
    for f in ADD_SCHEMA:
        if f.name == "stats" and not as_json:
            continue
        column = batch.column(f.name)
        if f.name == "dataChange":
            column = pa.repeat(pa.scalar(False), n) if n else pa.array([], pa.bool_())
        children.append(column)
        out_fields.append(f)
    if struct_of is not None:
        fields, partition_columns, stats_fields, config = struct_of
        if partition_columns:
            parsed_pv = parse_partition_values(
                batch.column("partitionValues"), fields, partition_columns, config
            )
            children.append(parsed_pv)
            out_fields.append(pa.field("partitionValues_parsed", parsed_pv.type))
        if stats_fields is not None:
            parsed = parse_stats(batch.column("stats"), stats_fields, config)
            children.append(parsed)
            out_fields.append(pa.field("stats_parsed", parsed.type))
    return pa.StructArray.from_arrays(children, fields=out_fields)


def add_column(state: TableState) -> pa.ChunkedArray:
    """The ``add`` struct column: every live file, ``dataChange`` false, optional parsed stats.

    Built batch by batch over the snapshot's file table, so no column is ever copied whole."""
    config = state.metadata.configuration
    as_json = retention.bool_property(config, retention.STATS_AS_JSON, True)
    as_struct = retention.bool_property(config, retention.STATS_AS_STRUCT, False)
    batches = state.files.to_batches() or [
        pa.record_batch([pa.array([], f.type) for f in ADD_SCHEMA], schema=ADD_SCHEMA)
    ]
    struct_of = None
    if as_struct:
        fields = parse_schema(state.metadata.schema_string)
        partition_columns = list(state.metadata.partition_columns)
        stats_fields = _stats_fields(fields, partition_columns, config)
        struct_of = (fields, partition_columns, stats_fields, config)
    try:
        chunks = [_add_chunk(b, as_json, struct_of) for b in batches]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, InvalidActionError) as exc:
        if struct_of is None:
            raise
        # a checkpoint without stats_parsed is still correct; losing the JSON stats is not
        # (partitionValues_parsed stays: a bad partition value is a corrupt log, and raises)
        log.warning("statistics not written as a struct (%s); writing them as JSON", exc)
        fields, partition_columns, _, config = struct_of
        without = (fields, partition_columns, None, config)
        chunks = [_add_chunk(b, True, without) for b in batches]
    return pa.chunked_array(chunks, type=chunks[0].type)


def remove_column(state: TableState, now_ms: int) -> pa.Array:
    """Tombstones still within ``delta.deletedFileRetentionDuration``; no stats, no tags."""
    retention_ms = retention.duration_ms(
        state.metadata.configuration,
        retention.DELETED_FILE_RETENTION,
        retention.DEFAULT_DELETED_FILE_RETENTION_MS,
    )
    assert retention_ms is not None
    tombs = state.tombstones
    if tombs.num_rows:
        cutoff = pa.scalar(now_ms - retention_ms, pa.int64())
        tombs = tombs.filter(pc.greater(tombs.column("deletionTimestamp"), cutoff))
    n = tombs.num_rows
    children = []
    for f in _REMOVE_FIELDS:
        if f.name == "dataChange":
            children.append(pa.repeat(pa.scalar(False), n) if n else pa.array([], pa.bool_()))
        else:
            children.append(_combine(tombs.column(f.name)) if n else pa.array([], f.type))
    return pa.StructArray.from_arrays(children, fields=_REMOVE_FIELDS)


# -- non-file actions --------------------------------------------------------------------
def _protocol_row(state: TableState) -> dict[str, Any]:
    p = state.protocol
    return {
        "minReaderVersion": p.min_reader_version,
        "minWriterVersion": p.min_writer_version,
        "readerFeatures": list(p.reader_features or []) if p.min_reader_version == 3 else None,
        "writerFeatures": list(p.writer_features or []) if p.min_writer_version == 7 else None,
    }


def _metadata_row(state: TableState) -> dict[str, Any]:
    m = state.metadata
    fmt = m.format or {}
    return {
        "id": m.id,
        "name": m.name,
        "description": m.description,
        "format": {
            "provider": fmt.get("provider", "parquet"),
            "options": list((fmt.get("options") or {}).items()),
        },
        "schemaString": m.schema_string or None,  # absent (older writers): null, not ""
        "partitionColumns": list(m.partition_columns),
        "configuration": list(m.configuration.items()),
        "createdTime": m.created_time,
    }


def _live_txns(state: TableState, now_ms: int) -> list[dict[str, Any]]:
    retention_ms = retention.duration_ms(
        state.metadata.configuration, retention.TXN_RETENTION, None
    )
    out = []
    for txn in state.txns.values():
        if retention_ms is not None and (
            txn.last_updated is None or txn.last_updated <= now_ms - retention_ms
        ):
            continue
        out.append({"appId": txn.app_id, "version": txn.version, "lastUpdated": txn.last_updated})
    return out


def uses_v2_spec(state: TableState) -> bool:
    """Tables with the ``v2Checkpoint`` feature need V2-spec checkpoints (no multi-part)."""
    return "v2Checkpoint" in writer_features(state.protocol)


def checkpoint_schema(add_type: pa.DataType, v2: bool) -> pa.Schema:
    columns = [
        ("txn", TXN_TYPE),
        ("add", add_type),
        ("remove", REMOVE_TYPE),
        ("metaData", METADATA_TYPE),
        ("protocol", PROTOCOL_TYPE),
        ("domainMetadata", DOMAIN_TYPE),
    ]
    if v2:
        columns.append(("checkpointMetadata", CHECKPOINT_METADATA_TYPE))
    return pa.schema(columns)


def build_checkpoint(state: TableState, now_ms: int) -> tuple[pa.Table, int]:
    """All rows of the checkpoint of ``state`` (non-file actions first) and the number of adds.

    Raises ``CorruptLogError`` when the add rows do not match the snapshot's file count (Spark's
    DELTA_CHECKPOINT_SNAPSHOT_MISMATCH)."""
    adds = add_column(state)
    removes = remove_column(state, now_ms)
    v2 = uses_v2_spec(state)
    schema = checkpoint_schema(adds.type, v2)
    segments = [
        _segment(schema, 1, "protocol", pa.array([_protocol_row(state)], PROTOCOL_TYPE)),
        _segment(schema, 1, "metaData", pa.array([_metadata_row(state)], METADATA_TYPE)),
    ]
    txns = _live_txns(state, now_ms)
    if txns:
        segments.append(_segment(schema, len(txns), "txn", pa.array(txns, TXN_TYPE)))
    domains = [
        {"domain": d.domain, "configuration": d.configuration, "removed": False}
        for d in state.domains.values()
        if not d.removed
    ]
    if domains:
        segments.append(
            _segment(schema, len(domains), "domainMetadata", pa.array(domains, DOMAIN_TYPE))
        )
    if v2:
        row = [{"version": state.version, "tags": None}]
        segments.append(
            _segment(schema, 1, "checkpointMetadata", pa.array(row, CHECKPOINT_METADATA_TYPE))
        )
    if len(adds):
        segments.append(_segment(schema, len(adds), "add", adds))
    if len(removes):
        segments.append(_segment(schema, len(removes), "remove", removes))
    table = pa.concat_tables(segments)
    num_adds = table.num_rows - table.column("add").null_count
    if num_adds != state.files.num_rows:
        raise CorruptLogError(
            f"checkpoint of version {state.version} would hold {num_adds} files but the snapshot "
            f"has {state.files.num_rows} (DELTA_CHECKPOINT_SNAPSHOT_MISMATCH)"
        )
    return table, num_adds
