"""The data-writing operations behind ``Table``: create, append, overwrite, delete.

Each is one transaction (``engine.commit.transaction``) over data files written by
``engine.write.writer``, recorded the way Spark records the same operation, so other engines read
and reason about our commits as they would about Spark's: an append reads nothing and is a blind
append (it never conflicts with other appends); an overwrite or delete reads exactly the partitions
it replaces, so it conflicts only with writers that touched those partitions.

``delete`` drops whole files of matching partitions. On a table with deletion vectors enabled a
predicate may also name data columns: the matching rows are marked in each file's deletion
vector (``row_deletes``) instead of rewriting it. When a concurrent commit removed or added
files it had read (a compaction rewriting the partition, an append into it, another delete
changing a file's vector), it is run again against the newer table, a bounded number of times:
deleting by a predicate is the same request at any version, and re-reading means rows removed
by the other commit are never brought back and vectors are never lost.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine.commit import row_tracking
from txntable.engine.commit.transaction import CommitOptions, CommitResult, Transaction
from txntable.engine.commit.validate import is_true
from txntable.engine.errors import (
    ConcurrentAppendException,
    ConcurrentDeleteDeleteException,
    ConcurrentDeleteReadException,
    ConcurrentModificationException,
    EngineError,
    InvalidArgumentError,
    StorageError,
    TableNotFoundError,
    UnsupportedWriterFeatureError,
)
from txntable.engine.model.actions import AddFile, Metadata, Protocol, RemoveFile
from txntable.engine.model.deletion_vectors import write_vectors
from txntable.engine.model.features import check_writable
from txntable.engine.model.predicates import BoundPredicate, Predicate, bind
from txntable.engine.model.schema import (
    parse_schema,
    schema_string_from_arrow,
    uses_timestamp_ntz,
)
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.read.stats_skipping import prune
from txntable.engine.storage.base import LocalStorage
from txntable.engine.storage.paths import LOG_DIR, decode_path
from txntable.engine.write import row_deletes
from txntable.engine.write.parquet_options import CODEC_PROPERTY, parse_codec
from txntable.engine.write.writer import (
    DataInput,
    conform,
    discard_files,
    to_arrow_table,
    write_data_files,
)

if TYPE_CHECKING:
    from txntable.engine.read.handle import TableHandle

#: Table properties a new table may not set, because this engine cannot honour the feature.
_REFUSED_PROPERTIES = {
    "delta.columnMapping.mode": "columnMapping",
    "delta.enableChangeDataFeed": "changeDataFeed",
    "delta.enableInCommitTimestamps": "inCommitTimestamp",
    "delta.enableTypeWidening": "typeWidening",
    "delta.checkpointPolicy": "v2Checkpoint",
}
_PARTITION_TYPES = (
    "string",
    "long",
    "integer",
    "short",
    "byte",
    "float",
    "double",
    "boolean",
    "binary",
    "date",
    "timestamp",
    "timestamp_ntz",
)
DELETE_CONFLICT_RETRIES = 10


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _check_properties(properties: Mapping[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in properties.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidArgumentError(f"table properties must be strings: {key!r}={value!r}")
        feature = _REFUSED_PROPERTIES.get(key)
        if feature and value.strip().lower() not in ("false", "none", ""):
            raise UnsupportedWriterFeatureError(
                f"table property {key}={value} needs the {feature} feature, which this engine "
                "does not write",
                (feature,),
            )
        if key == CODEC_PROPERTY:  # every later write would fail on it: refuse it up front
            parse_codec(value, f"table property {key}")
        out[key] = value
    return out


def new_table_metadata(
    schema: pa.Schema,
    partition_by: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
) -> tuple[Protocol, Metadata]:
    """Protocol and metadata for version 0 of a new table (PROTOCOL.md "Table Features for New and
    Existing Tables")."""
    if isinstance(partition_by, str):
        partition_by = [partition_by]
    schema_string = schema_string_from_arrow(schema)
    fields = {f.name: f for f in parse_schema(schema_string)}
    seen: set[str] = set()
    for column in partition_by:
        if column not in fields:
            raise InvalidArgumentError(f"partition column {column!r} is not in the schema")
        if column in seen:
            raise InvalidArgumentError(f"partition column {column!r} is listed twice")
        if fields[column].type not in _PARTITION_TYPES:
            raise InvalidArgumentError(
                f"partition column {column!r} has type {fields[column].type!r}, "
                "which cannot be a partition column"
            )
        seen.add(column)
    if len(seen) == len(fields):
        raise InvalidArgumentError("at least one column must not be a partition column")
    config = _check_properties(properties or {})
    if uses_timestamp_ntz(json.loads(schema_string)):
        protocol = Protocol(
            3, 7, reader_features=["timestampNtz"], writer_features=["timestampNtz"]
        )
    else:
        protocol = Protocol(1, 2)
    if is_true(config.get(row_tracking.ENABLE_KEY)):
        # the feature (with its dependency) and the hidden columns' names (PROTOCOL.md)
        config = {**row_tracking.new_table_configuration(), **config}
        protocol = row_tracking_protocol(protocol)
    if is_true(config.get(row_deletes.ENABLE_KEY)):
        protocol = deletion_vectors_protocol(protocol)
    metadata = Metadata(
        id=str(uuid.uuid4()),
        name=name,
        description=description,
        schema_string=schema_string,
        partition_columns=list(partition_by),
        configuration=config,
        created_time=_now_ms(),
    )
    return protocol, metadata


def create(
    table: TableHandle,
    schema: pa.Schema,
    partition_by: Sequence[str] = (),
    properties: Mapping[str, str] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    options: CommitOptions | None = None,
) -> CommitResult:
    """Commit version 0 of a new table; refuses when a table already exists there."""
    if not isinstance(schema, pa.Schema):
        raise InvalidArgumentError(f"schema must be a pyarrow.Schema, not {type(schema).__name__}")
    protocol, metadata = new_table_metadata(schema, partition_by, properties, name, description)
    storage = table.storage
    if isinstance(storage, LocalStorage):  # a local table starts as a directory with a log dir
        with _local_errors(storage.root_path):
            os.makedirs(os.path.join(storage.root_path, LOG_DIR), exist_ok=True)
    if storage.list_log():
        raise InvalidArgumentError(f"a Delta table already exists at {table.uri}")
    txn = Transaction(table, None, options)
    txn.set_protocol(protocol)
    txn.set_metadata(metadata)
    parameters = {
        "partitionBy": json.dumps(list(metadata.partition_columns)),
        "description": description,
        "isManaged": "false",
        "properties": json.dumps(metadata.configuration, separators=(",", ":")),
    }
    return txn.commit("CREATE TABLE", parameters)


def row_tracking_protocol(protocol: Protocol) -> Protocol:
    """``protocol`` at writer version 7 with ``rowTracking`` and ``domainMetadata`` added."""
    features = list(protocol.writer_features or ())
    if protocol.min_writer_version < 7:
        features = ["appendOnly", "invariants"]  # what writer version 2 implied
    for name in ("domainMetadata", row_tracking.FEATURE):
        if name not in features:
            features.append(name)
    return replace(protocol, min_writer_version=7, writer_features=features)


def deletion_vectors_protocol(protocol: Protocol) -> Protocol:
    """``protocol`` at (3,7) with the ``deletionVectors`` reader and writer feature added."""
    writer = list(protocol.writer_features or ())
    if protocol.min_writer_version < 7:
        writer = ["appendOnly", "invariants"]  # what writer version 2 implied
    reader = list(protocol.reader_features or ()) if protocol.min_reader_version == 3 else []
    for features in (reader, writer):
        if row_deletes.FEATURE not in features:
            features.append(row_deletes.FEATURE)
    return replace(
        protocol,
        min_reader_version=3,
        min_writer_version=7,
        reader_features=reader,
        writer_features=writer,
    )


@contextmanager
def _local_errors(path: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise StorageError(f"cannot create the table directory {path}: {exc}") from exc


def _writable_snapshot(table: TableHandle) -> Snapshot:
    try:
        snapshot = table.snapshot()
    except TableNotFoundError:
        raise TableNotFoundError(
            f"no Delta table at {table.uri}; create it first with Table.create"
        ) from None
    check_writable(snapshot.protocol, snapshot.metadata)
    return snapshot


def _file_metrics(adds: Sequence[AddFile]) -> dict[str, str]:
    rows = sum(json.loads(a.stats or "{}").get("numRecords", 0) for a in adds)
    return {
        "numFiles": str(len(adds)),
        "numOutputRows": str(rows),
        "numOutputBytes": str(sum(a.size for a in adds)),
    }


def append(
    table: TableHandle, data: DataInput, *, options: CommitOptions | None = None
) -> CommitResult:
    """Add rows as new files: a blind append (reads nothing, conflicts with no other append)."""
    snapshot = _writable_snapshot(table)
    adds = write_data_files(table.storage, snapshot.metadata, data)
    txn = Transaction(table, snapshot, options)
    txn.add(*adds)
    parameters = {"mode": "Append", "partitionBy": json.dumps(snapshot.partition_columns)}
    return _commit_or_clean_up(table, txn, adds, "WRITE", parameters, _file_metrics(adds))


def _commit_or_clean_up(  # noqa: PLR0917 - private, three call sites
    table: TableHandle,
    txn: Transaction,
    adds: Sequence[AddFile],
    operation: str,
    parameters: Mapping[str, Any],
    metrics: Mapping[str, str],
    written: Sequence[str] = (),
) -> CommitResult:
    """Commit; when the commit failed for certain (a conflict, invalid actions, the log
    refused the write, or it failed before writing to the log), delete the data files it would
    have added (and the ``written`` deletion-vector files), which nothing references. When its
    outcome is unknown (an ambiguous log write, attempts run out right after one) the files may
    be referenced: they are kept and the error names them."""
    paths = [decode_path(add.path) for add in adds] + list(written)
    try:
        return txn.commit(operation, parameters, metrics)
    except (ConcurrentModificationException, InvalidArgumentError) as exc:
        discard_files(table.storage, paths, exc)
        raise
    except EngineError as exc:
        if not txn.may_have_landed:
            discard_files(table.storage, paths, exc)
        elif paths:
            exc.leave_files(paths, "the commit may have landed")
        raise


def _bind_partition_only(
    predicate: str | Predicate, snapshot: Snapshot, hint: str = ""
) -> BoundPredicate:
    bound = bind(predicate, snapshot.fields, snapshot.partition_columns)
    if bound.data:
        raise InvalidArgumentError(
            "the predicate may only use partition columns "
            f"({', '.join(snapshot.partition_columns) or 'the table has none'}); "
            f"data conditions: {' AND '.join(p.sql() for p in bound.data)}{hint}"
        )
    return bound


def _removes(snapshot: Snapshot, paths: set[str]) -> list[RemoveFile]:
    now = _now_ms()
    return [add.to_remove(now, True) for add in snapshot.add_actions() if add.path in paths]


def overwrite(
    table: TableHandle,
    data: DataInput,
    partition_predicate: str | Predicate | None = None,
    *,
    options: CommitOptions | None = None,
) -> CommitResult:
    """Replace the whole table, or only the partitions matching ``partition_predicate``
    (Spark's ``replaceWhere``); every new row must then match the predicate too."""
    snapshot = _writable_snapshot(table)
    bound = None
    if partition_predicate is not None:
        bound = _bind_partition_only(partition_predicate, snapshot)
        conformed = conform(to_arrow_table(data), snapshot.metadata)
        if snapshot.partition_columns and conformed.num_rows:
            mask = bound.matches(conformed.select(snapshot.partition_columns))
            outside = conformed.num_rows - pc.sum(pc.cast(mask, pa.int64())).as_py()
            if outside:
                raise InvalidArgumentError(
                    f"{outside} new row(s) do not match the overwrite predicate "
                    f"{bound.sql()}; nothing was written"
                )
        data = conformed
    adds = write_data_files(table.storage, snapshot.metadata, data)
    txn = Transaction(table, snapshot, options)
    files = txn.scan(bound.partition if bound else None)
    removes = _removes(snapshot, set(files.column("path").to_pylist()))
    txn.add(*removes, *adds)
    parameters: dict[str, Any] = {
        "mode": "Overwrite",
        "partitionBy": json.dumps(snapshot.partition_columns),
    }
    if bound is not None:
        parameters["predicate"] = json.dumps([bound.sql()])
    metrics = _file_metrics(adds) | {"numRemovedFiles": str(len(removes))}
    return _commit_or_clean_up(table, txn, adds, "WRITE", parameters, metrics)


def delete(
    table: TableHandle,
    predicate: str | Predicate | None,
    *,
    options: CommitOptions | None = None,
) -> CommitResult | None:
    """Delete the rows matching ``predicate`` (``None``: all rows).

    A predicate on partition columns only drops whole files. One that names data columns needs
    deletion vectors (the ``deletionVectors`` feature and ``delta.enableDeletionVectors=true``):
    the matching rows are added to each file's deletion vector, and a file left without rows is
    removed. Returns ``None`` (and commits nothing) when no row matches.
    """
    for attempt in range(DELETE_CONFLICT_RETRIES + 1):
        snapshot = _writable_snapshot(table)
        try:
            if predicate is not None and row_deletes.vectors_enabled(snapshot):
                bound = bind(predicate, snapshot.fields, snapshot.partition_columns)
                if bound.data:
                    return _delete_rows(table, snapshot, bound, options)
            return _delete_files(table, snapshot, predicate, options)
        except (
            ConcurrentDeleteReadException,
            ConcurrentDeleteDeleteException,
            ConcurrentAppendException,
        ):
            if attempt == DELETE_CONFLICT_RETRIES:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


_ROW_DELETE_HINT = (
    "; deleting rows by data columns needs deletion vectors "
    "(table property delta.enableDeletionVectors=true)"
)


def _delete_files(
    table: TableHandle,
    snapshot: Snapshot,
    predicate: str | Predicate | None,
    options: CommitOptions | None,
) -> CommitResult | None:
    """Remove every file of the partitions ``predicate`` matches."""
    bound = (
        None if predicate is None else _bind_partition_only(predicate, snapshot, _ROW_DELETE_HINT)
    )
    txn = Transaction(table, snapshot, options)
    files = txn.scan(bound.partition if bound else None)
    if files.num_rows == 0:
        return None
    removes = _removes(snapshot, set(files.column("path").to_pylist()))
    txn.add(*removes)
    rows = sum(json.loads(r.stats or "{}").get("numRecords", 0) for r in removes)
    rows -= sum(r.deletion_vector.cardinality for r in removes if r.deletion_vector)
    parameters = {"predicate": json.dumps([bound.sql()] if bound else [])}
    metrics = {
        "numRemovedFiles": str(len(removes)),
        "numDeletedRows": str(rows),
        "numCopiedRows": "0",
        "numAddedFiles": "0",
    }
    return txn.commit("DELETE", parameters, metrics)


def _delete_rows(
    table: TableHandle,
    snapshot: Snapshot,
    bound: BoundPredicate,
    options: CommitOptions | None,
) -> CommitResult | None:
    """Mark the rows ``bound`` matches in deletion vectors (``row_deletes``): one new vector
    file for the commit; deleted again when the commit is refused for certain."""
    txn = Transaction(table, snapshot, options)
    files = txn.scan(bound.partition, track_files=False)
    files = prune(
        files, row_deletes.full_predicate(bound), {f.name: f.type for f in snapshot.fields}
    )
    txn.track_read_files(files)  # files whose statistics rule out a match are not read
    deletions = row_deletes.plan(snapshot, bound, files)
    if not deletions:
        return None
    kept = [d.deleted for d in deletions if not d.removes_file]
    written = write_vectors(table.storage, kept) if kept else None
    txn.add(
        *row_deletes.deletion_actions(deletions, written.descriptors if written else (), _now_ms())
    )
    parameters = {"predicate": json.dumps([row_deletes.full_predicate(bound).sql()])}
    metrics = row_deletes.operation_metrics(deletions)
    dv_files = [written.path] if written else []
    return _commit_or_clean_up(table, txn, (), "DELETE", parameters, metrics, dv_files)
