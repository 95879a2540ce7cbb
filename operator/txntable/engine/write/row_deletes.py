"""Row-level DELETE through deletion vectors, and reading live rows with the vectors applied.

On a table with the ``deletionVectors`` feature and ``delta.enableDeletionVectors=true``, a
DELETE whose predicate names data columns does not rewrite files (as Spark does there): each
candidate file is read (only the columns the predicate needs), the predicate is evaluated over its
rows with the engine's predicate tree (partition columns as constants of the file), and the
positions it matches are added to the file's deletion vector. The file is then committed again
under the same path with the union of its old and new vectors (``remove`` of the old logical
file, ``add`` with the new vector, ``dataChange=true``), or removed outright when no row is left.
The physical row count goes into ``numRecords`` and ``tightBounds`` becomes false, as the protocol
asks of a logical file with a vector. ``write.api.delete`` writes the vectors and commits.

``live_rows`` reads a snapshot's rows the way a reader must (vectors applied, partition values
filled in); it is the engine's own check of what a delete left, next to deltalake's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyroaring import BitMap64

from txntable.engine.commit.validate import is_true
from txntable.engine.errors import (
    CorruptLogError,
    InvalidArgumentError,
    UnsupportedWriterFeatureError,
)
from txntable.engine.model.actions import Action, AddFile, DeletionVector
from txntable.engine.model.deletion_vectors import deleted_bitmap, deleted_rows, keep_mask
from txntable.engine.model.features import writer_features
from txntable.engine.model.predicate_tree import TRUE, And, Predicate
from txntable.engine.model.predicates import BoundPredicate, typed_partition_values
from txntable.engine.read.data_files import check_legacy_calendar, parquet_file, read_table
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.storage.paths import decode_path, has_scheme

FEATURE = "deletionVectors"
ENABLE_KEY = "delta.enableDeletionVectors"
_CDF_KEY = "delta.enableChangeDataFeed"


def vectors_enabled(snapshot: Snapshot) -> bool:
    """The protocol supports deletion vectors and the table turned them on for writers."""
    return FEATURE in writer_features(snapshot.protocol) and is_true(
        snapshot.configuration.get(ENABLE_KEY)
    )


def full_predicate(bound: BoundPredicate) -> Predicate:
    """The partition part and every data conjunct as one predicate."""
    combined = bound.partition
    for conjunct in bound.data:
        combined = conjunct if combined == TRUE else And(combined, conjunct)
    return combined


@dataclass(frozen=True)
class FileDeletion:
    """One live file the delete touches: its rows deleted after the commit, and how many are
    newly deleted by it."""

    add: AddFile
    deleted: BitMap64
    newly_deleted: int
    num_records: int

    @property
    def removes_file(self) -> bool:
        return len(self.deleted) >= self.num_records


def plan(snapshot: Snapshot, bound: BoundPredicate, files: pa.Table) -> list[FileDeletion]:
    """The files among ``files`` (``ADD_SCHEMA`` rows of ``snapshot``) with rows ``bound``
    matches that no deletion vector deletes yet, with their new sets of deleted rows.

    Reads and evaluates before anything is written, so a predicate that cannot be evaluated
    (a literal that is no value of its column's type) changes nothing."""
    if is_true(snapshot.configuration.get(_CDF_KEY)):
        raise UnsupportedWriterFeatureError(
            f"{_CDF_KEY}=true: a row-level delete would have to write change data files, which "
            "this engine does not; delete whole partitions or disable the change data feed",
            ("changeDataFeed",),
        )
    predicate = full_predicate(bound)
    types = {f.name: f.type for f in snapshot.fields}
    wanted = sorted(predicate.columns())
    by_path = {a.path: a for a in snapshot.add_actions()}
    out: list[FileDeletion] = []
    for raw in files.column("path").to_pylist():
        add = by_path[raw]
        values, num_rows = _predicate_columns(snapshot, add, wanted)
        try:
            mask = pc.fill_null(predicate.evaluate(values, types), False)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
            raise InvalidArgumentError(
                f"the predicate {predicate.sql()} cannot be evaluated on {raw}: {exc}"
            ) from exc
        matched = BitMap64(pc.indices_nonzero(mask).to_pylist())
        existing = deleted_bitmap(snapshot.storage, _dv_json(add))
        newly = matched - existing
        if not newly:
            continue
        out.append(FileDeletion(add, existing | newly, len(newly), num_rows))
    return out


def deletion_actions(
    deletions: Sequence[FileDeletion], vectors: Sequence[DeletionVector], now_ms: int
) -> list[Action]:
    """``remove`` of each touched logical file, and ``add`` of the same path with its new
    vector (``vectors`` aligned with the deletions that keep rows) unless no row is left."""
    actions: list[Action] = []
    kept = iter(vectors)
    for deletion in deletions:
        old = deletion.add
        actions.append(old.to_remove(now_ms, True))
        if deletion.removes_file:
            continue
        actions.append(
            replace(
                old,
                data_change=True,
                deletion_vector=next(kept),
                stats=_stats_with(old.stats, deletion.num_records),
            )
        )
    return actions


def operation_metrics(deletions: Sequence[FileDeletion]) -> dict[str, str]:
    """Spark's DELETE metrics for a delete through deletion vectors."""
    removed = [d for d in deletions if d.removes_file]
    kept = [d for d in deletions if not d.removes_file]
    had_vector = sum(1 for d in deletions if d.add.deletion_vector is not None)
    return {
        "numRemovedFiles": str(len(removed)),
        "numRemovedBytes": str(sum(d.add.size for d in removed)),
        "numDeletedRows": str(sum(d.newly_deleted for d in deletions)),
        "numCopiedRows": "0",
        "numAddedFiles": "0",
        "numAddedBytes": "0",
        "numAddedChangeFiles": "0",
        "numDeletionVectorsAdded": str(len(kept)),
        "numDeletionVectorsRemoved": str(had_vector),
        "numDeletionVectorsUpdated": str(sum(1 for d in kept if d.add.deletion_vector is not None)),
    }


def _stats_with(stats: str | None, num_records: int) -> str:
    try:
        parsed: dict[str, Any] = json.loads(stats) if stats else {}
    except ValueError:
        parsed = {}
    if not isinstance(parsed, dict):
        parsed = {}
    parsed["numRecords"] = num_records
    parsed["tightBounds"] = False
    return json.dumps(parsed, separators=(",", ":"))


def _dv_json(add: AddFile) -> dict[str, Any] | None:
    return add.deletion_vector.to_json() if add.deletion_vector else None


def _read(snapshot: Snapshot, raw: str, columns: Sequence[str] | None) -> tuple[pa.Table, int]:
    """The named columns of a data file that it has (all with ``None``), in file order, and the
    file's number of rows."""
    decoded = decode_path(raw)
    if has_scheme(raw) or decoded.startswith("/"):
        data = read_table(snapshot.resolve(raw))
        num_rows = data.num_rows
        if columns is not None:
            data = data.select([c for c in columns if c in data.schema.names])
        return data, num_rows
    source = snapshot.storage.open_input(decoded)
    try:
        parquet = parquet_file(source)
        names = parquet.schema_arrow.names
        present = None if columns is None else [c for c in columns if c in names]
        data = parquet.read(columns=present)
        check_legacy_calendar(parquet, data, raw)
        return data, parquet.metadata.num_rows
    finally:
        if not isinstance(source, str):
            source.close()


def _predicate_columns(
    snapshot: Snapshot, add: AddFile, wanted: Sequence[str]
) -> tuple[pa.Table, int]:
    """The predicate's columns over every physical row of ``add``'s file: data columns read
    (nulls where the file lacks one), partition columns as the file's typed values."""
    partition = set(snapshot.partition_columns)
    data, num_rows = _read(snapshot, add.path, [c for c in wanted if c not in partition])
    records = _num_records(add)
    if records is not None and records != num_rows:
        raise CorruptLogError(
            f"data file {add.path} holds {num_rows} rows but its numRecords says {records}"
        )
    return _complete(snapshot, add, data, wanted, num_rows), num_rows


def _complete(
    snapshot: Snapshot, add: AddFile, data: pa.Table, wanted: Sequence[str], num_rows: int
) -> pa.Table:
    """``data`` with the ``wanted`` columns it lacks: partition values, else typed nulls."""
    schema = snapshot.schema
    typed = typed_partition_values(
        [add.partition_values], snapshot.fields, snapshot.partition_columns
    )
    arrays: list[pa.Array | pa.ChunkedArray] = []
    for name in wanted:
        if name in snapshot.partition_columns:
            arrays.append(pa.repeat(typed.column(name)[0], num_rows))
        elif name in data.column_names:
            arrays.append(_as_schema_type(data.column(name), schema.field(name).type))
        else:
            arrays.append(pa.nulls(num_rows, schema.field(name).type))
    return pa.Table.from_arrays(arrays, names=list(wanted))


def _as_schema_type(column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """A file's column in the table's type where a lossless cast gets it there: an INT96
    timestamp is read without a time zone (the file says none; the schema says UTC), an older
    file may hold a narrower type. Anything else is left as read."""
    if column.type == target:
        return column
    try:
        return column.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return column


def _num_records(add: AddFile) -> int | None:
    try:
        value = json.loads(add.stats).get("numRecords") if add.stats else None
    except (ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def live_rows(snapshot: Snapshot) -> pa.Table:
    """Every live row of ``snapshot`` in the table schema (partition values filled in, rows that
    deletion vectors delete left out); for tests and inspection, not a query engine."""
    schema = snapshot.schema
    parts: list[pa.Table] = []
    for add in snapshot.add_actions():
        data, num_rows = _read(snapshot, add.path, None)
        full = _complete(snapshot, add, data, schema.names, num_rows).cast(schema)
        dv = _dv_json(add)
        if dv is not None:
            full = full.filter(keep_mask(full.num_rows, deleted_rows(snapshot.storage, dv)))
        parts.append(full)
    return pa.concat_tables(parts) if parts else schema.empty_table()


__all__ = [
    "ENABLE_KEY",
    "FEATURE",
    "FileDeletion",
    "deletion_actions",
    "full_predicate",
    "live_rows",
    "operation_metrics",
    "plan",
    "vectors_enabled",
]
