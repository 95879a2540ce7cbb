"""Writing data files: Arrow in, Parquet files plus the ``add`` actions that describe them.

Data files are never overwritten, so every file gets a fresh UUID name; a transaction that
fails to commit leaves only unreferenced files for VACUUM. Rows are checked against the table's
schema *before* anything is written (bad input changes nothing), split by partition into
Hive-style directories, and described with Delta statistics so that other engines can skip
them. Partition values are serialised as the protocol says (PROTOCOL.md "Partition Value
Serialization"): the log holds strings, directories hold the Hive-escaped form, and action paths are
URI-encoded once (PROTOCOL.md "Add File and Remove File": ``path`` is a URI).
"""

from __future__ import annotations

import datetime as dt
import math
import time
import uuid
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any, TypeAlias

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.errors import EngineError, InvalidArgumentError, UnsupportedWriterFeatureError
from txntable.engine.model.actions import AddFile, Metadata
from txntable.engine.model.schema import parse_schema, to_arrow_schema
from txntable.engine.model.stats import StatsConfig, stats_for_table
from txntable.engine.storage.base import Storage
from txntable.engine.storage.paths import encode_path, partition_dir
from txntable.engine.write.parquet_options import (
    DEFAULT_CODEC,
    ParquetSettings,
    ParquetWriteOptions,
    resolve,
)

DataInput: TypeAlias = pa.Table | pa.RecordBatch | Iterable[pa.RecordBatch]


def to_arrow_table(data: DataInput) -> pa.Table:
    """Accept an Arrow table, one record batch, or an iterable of record batches."""
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    try:
        batches: list[Any] = list(data)
    except TypeError:
        raise InvalidArgumentError(
            f"data must be an Arrow table or record batches, not {type(data).__name__}"
        ) from None
    if not batches or not all(isinstance(b, pa.RecordBatch) for b in batches):
        raise InvalidArgumentError("data must be an Arrow table or a non-empty list of batches")
    try:
        return pa.Table.from_batches(batches)
    except pa.ArrowInvalid as exc:
        raise InvalidArgumentError(f"record batches do not share one schema: {exc}") from exc


def conform(data: pa.Table, metadata: Metadata) -> pa.Table:
    """``data`` cast to the table's schema, or a clear error naming what does not fit."""
    fields = parse_schema(metadata.schema_string)
    target = to_arrow_schema(fields)
    given = set(data.column_names)
    if len(given) != data.num_columns:
        raise InvalidArgumentError("data has duplicate column names")
    extra = sorted(given - set(target.names))
    if extra:
        raise InvalidArgumentError(
            f"data has column(s) not in the table schema: {', '.join(extra)}"
        )
    columns = []
    for field in target:
        if field.name in given:
            column = data.column(field.name)
        elif field.nullable:
            column = pa.nulls(data.num_rows, field.type)
        else:
            raise InvalidArgumentError(f"data lacks the non-nullable column {field.name!r}")
        try:
            column = column.cast(field.type)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise InvalidArgumentError(
                f"column {field.name!r} ({column.type}) cannot be stored as {field.type}: {exc}"
            ) from exc
        if not field.nullable and column.null_count:
            raise InvalidArgumentError(
                f"column {field.name!r} is NOT NULL but {column.null_count} row(s) are null"
            )
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=target)


def serialize_partition_value(value: Any) -> str | None:
    """A typed partition value as the string the log stores (PROTOCOL.md "Partition Value
    Serialization")."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.isoformat(sep=" ", timespec="microseconds")
        utc = value.astimezone(dt.UTC).replace(tzinfo=None)
        return utc.isoformat(timespec="microseconds") + "Z"
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, int | float | str):
        return str(value)
    raise InvalidArgumentError(f"unsupported partition value type {type(value).__name__}")


def _split_partitions(
    data: pa.Table, partition_columns: Sequence[str]
) -> list[tuple[dict[str, str | None], pa.Table]]:
    if not partition_columns:
        return [({}, data)]
    for name in partition_columns:
        typ = data.schema.field(name).type
        if pa.types.is_nested(typ):
            raise InvalidArgumentError(f"partition column {name!r} has nested type {typ}")
    keys = data.select(list(partition_columns)).group_by(list(partition_columns)).aggregate([])
    data_columns = [c for c in data.column_names if c not in set(partition_columns)]
    out: list[tuple[dict[str, str | None], pa.Table]] = []
    for row in keys.to_pylist():
        mask: Any = None
        for name in partition_columns:
            value = row[name]
            column = data.column(name)
            cond = _equals(column, value)
            mask = cond if mask is None else pc.and_(mask, cond)
        values = {name: serialize_partition_value(row[name]) for name in partition_columns}
        values = {k: (None if v == "" else v) for k, v in values.items()}
        out.append((values, data.filter(mask).select(data_columns)))
    if sum(part.num_rows for _, part in out) != data.num_rows:  # pragma: no cover - guard
        raise InvalidArgumentError("rows could not be assigned to partitions")
    return out


def _equals(column: pa.ChunkedArray, value: Any) -> Any:
    if value is None:
        return pc.is_null(column)
    if isinstance(value, float) and math.isnan(value):
        return pc.fill_null(pc.is_nan(column), False)
    return pc.fill_null(pc.equal(column, pa.scalar(value, column.type)), False)


def data_file_name(codec_tag: str = DEFAULT_CODEC) -> str:
    """A fresh data-file name, shaped like Spark's (``codec_tag``: ``ParquetWriteOptions.file_tag``,
    the codec the file is written with; the default codec's when not given)."""
    return f"part-00000-{uuid.uuid4()}.c000.{codec_tag}.parquet"


def write_data_files(
    storage: Storage,
    metadata: Metadata,
    data: DataInput,
    *,
    data_change: bool = True,
    max_rows_per_file: int | None = None,
    stats_config: StatsConfig | None = None,
    parquet: ParquetSettings | None = None,
) -> list[AddFile]:
    """Write ``data`` as Parquet files of the table and return their ``add`` actions.

    ``parquet``: codec, level, row groups and dictionary asked for; unset ones come from the
    table's ``delta.parquet.compression.codec`` or the defaults (``engine.write.parquet_options``).
    Nothing is written when the data does not fit the schema or a setting is invalid. Empty
    input writes no file.
    """
    mode = metadata.configuration.get("delta.columnMapping.mode", "none")
    if mode != "none":
        raise UnsupportedWriterFeatureError(
            f"writing to tables with column mapping mode {mode!r} is not supported",
            ("columnMapping",),
        )
    if max_rows_per_file is not None and max_rows_per_file < 1:
        raise InvalidArgumentError("max_rows_per_file must be at least 1")
    options = resolve(metadata.configuration, parquet)
    table = conform(to_arrow_table(data), metadata)
    if table.num_rows == 0:
        return []
    config = stats_config or StatsConfig.from_configuration(metadata.configuration)
    partition_columns = list(metadata.partition_columns)
    adds: list[AddFile] = []
    started: list[str] = []  # every file whose write began, finished or not
    try:
        for values, part in _split_partitions(table, partition_columns):
            step = max_rows_per_file or part.num_rows
            for start in range(0, part.num_rows, step):
                chunk = part.slice(start, step)
                add = _write_one(
                    storage, partition_columns, values, chunk, data_change, config, started, options
                )
                adds.append(add)
    except BaseException as exc:  # half a write is no write: nothing will reference these
        discard_files(storage, started, exc)
        raise
    return adds


def discard_files(storage: Storage, relatives: Sequence[str], error: BaseException) -> None:
    """Delete data files no commit references (their write or commit failed for certain).

    Files that cannot be deleted are named in ``error`` (``EngineError.leave_files``), so a
    failure never leaves files behind without saying so.
    """
    left = []
    for relative in relatives:
        try:
            storage.delete(relative)
        except Exception:  # the original error is the one to raise
            left.append(relative)
    if not left:
        return
    if isinstance(error, EngineError):
        error.leave_files(left, "deleting them failed")
    else:
        error.add_note(f"data files written for it and not deleted: {', '.join(left)}")


def _write_one(  # noqa: PLR0917 - private helper, one call site
    storage: Storage,
    partition_columns: list[str],
    values: dict[str, str | None],
    chunk: pa.Table,
    data_change: bool,
    config: StatsConfig,
    started: list[str],
    options: ParquetWriteOptions,
) -> AddFile:
    """Write one file; its path goes to ``started`` before the write begins."""
    directory = partition_dir(partition_columns, values) if partition_columns else ""
    name = data_file_name(options.file_tag)
    relative = f"{directory}/{name}" if directory else name
    sink = pa.BufferOutputStream()
    options.write(chunk, sink)
    payload = sink.getvalue().to_pybytes()
    stats = stats_for_table(chunk, config=config)  # before the write: nothing can fail after it
    started.append(relative)
    storage.write_new(relative, payload)
    return AddFile(
        path=encode_path(relative),
        partition_values=dict(values),
        size=len(payload),
        modification_time=int(time.time() * 1000),
        data_change=data_change,
        stats=stats,
    )
