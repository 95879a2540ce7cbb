"""The log replayed by Spark tasks that read through the engine's storage, for huge logs.

The Spark checkpoint job (``jobs/checkpoint.py``) needs a table's state at one version when the
log is too large for one process to replay. The work is spread as OPTIMIZE and VACUUM spread
theirs: tasks open the table with ``open_storage`` and the run's storage options, so every store
the engine serves (local disk, S3, Azure) works on any Spark cluster without Hadoop's connectors
and with the same credentials the rest of the run uses (docs/adr/0008-log-replay-in-tasks.md).

1. **Read** (one task per slice of log files): each checkpoint part, V2 top-level file, sidecar
   (found by the driver from the top-level files' ``sidecar`` column) and commit is read with the
   engine's own readers (``checkpoint_read.read_checkpoint_file``, ``parse_commit``). Each file
   action gets its reconciliation key (path plus deletion-vector id, ``state.key_column``) and a
   rank, ``version << 32 | position in its file``, so that within one commit the later action
   wins as in the inline replay. Rows go to ``partitions`` hash partitions by key (Spark's own
   Murmur3, vectorised: Python's ``hash`` is salted per process); protocol, metadata, txn and
   domain actions go, as JSON lines, to one extra partition.
2. **Reconcile** (one task per hash partition): the newest action per key is kept
   (PROTOCOL.md "Action Reconciliation"): live ``add`` rows and tombstones come back to the
   driver as Arrow IPC, never as Python rows.
3. The driver folds the few non-file actions in version order with the engine's ``fold`` and
   assembles the ``TableState`` the checkpoint writer takes.

Rows cross Spark as Arrow IPC (``spark_support``), so types are exact and no pandas is needed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from txntable import interrupts
from txntable.engine.checkpoint.spark_hash import partition_ids
from txntable.engine.errors import CorruptLogError
from txntable.engine.model.actions import (
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    SetTransaction,
    parse_commit,
)
from txntable.engine.model.features import check_readable
from txntable.engine.read.checkpoint_read import checkpoint_sidecars, read_checkpoint_file
from txntable.engine.read.segment import LogSegment
from txntable.engine.read.state import (
    ADD_SCHEMA,
    REMOVE_SCHEMA,
    TableState,
    actions_to_table,
    empty,
    fold,
    from_struct_column,
    key_column,
)
from txntable.engine.storage.base import Storage
from txntable.engine.storage.factory import open_storage
from txntable.engine.storage.paths import LOG_DIR
from txntable.maintenance.errors import MaintenanceError, SparkJobError
from txntable.maintenance.spark_support import from_ipc, location, spark_error_line, to_ipc

log = logging.getLogger(__name__)

#: read slices and reconcile partitions per core
_TASKS_PER_CORE = 2
_RANK_BITS = 32
_ADD_TYPE = pa.struct(list(ADD_SCHEMA))
_REMOVE_TYPE = pa.struct(list(REMOVE_SCHEMA))
_ROWS = pa.schema(
    [("key", pa.string()), ("rank", pa.int64()), ("add", _ADD_TYPE), ("remove", _REMOVE_TYPE)]
)
_OTHERS = pa.schema([("rank", pa.int64()), ("line", pa.string())])
_KEPT = (Protocol, Metadata, SetTransaction, DomainMetadata)

#: one log file to read: (kind, path relative to the table root, version)
Piece = tuple[str, str, int]
CHECKPOINT, SIDECAR, COMMIT = "checkpoint", "sidecar", "commit"


def log_pieces(storage: Storage, segment: LogSegment) -> list[Piece]:
    """Every file the replay of ``segment`` reads; sidecars are found here, on the driver."""
    pieces: list[Piece] = []
    ref = segment.checkpoint
    if ref is not None:
        pieces += [(CHECKPOINT, f"{LOG_DIR}/{f.name}", ref.version) for f in ref.files]
        pieces += [(SIDECAR, path, ref.version) for path in checkpoint_sidecars(storage, ref)]
    pieces += [(COMMIT, f"{LOG_DIR}/{c.file.name}", c.version) for c in segment.commits]
    return pieces


# -- what runs on the executors ---------------------------------------------------------------
def _file_rows(table: pa.Table, column: str, ranks: pa.Array) -> pa.Table:
    """``table``'s rows (``ADD_SCHEMA`` or ``REMOVE_SCHEMA``) as shuffle rows."""
    n = table.num_rows
    struct = pa.StructArray.from_arrays(
        [c.combine_chunks() for c in table.columns], fields=list(table.schema)
    )
    other = "remove" if column == "add" else "add"
    columns = {
        "key": key_column(table),
        "rank": ranks,
        column: struct,
        other: pa.nulls(n, _ROWS.field(other).type),
    }
    return pa.table([columns[f.name] for f in _ROWS], schema=_ROWS)


def _ranks(version: int, positions: Iterable[int]) -> pa.Array:
    base = version << _RANK_BITS
    return pa.array([base + p for p in positions], pa.int64())


def read_piece(storage: Storage, piece: Piece) -> tuple[pa.Table, list[tuple[int, str]]]:
    """One log file as shuffle rows, and its protocol/metadata/txn/domain actions as
    ``(rank, JSON line)``."""
    kind, relative, version = piece
    if kind == COMMIT:
        actions = parse_commit(storage.read(relative), source=relative.rsplit("/", 1)[-1])
        adds = [(i, a) for i, a in enumerate(actions) if isinstance(a, AddFile)]
        removes = [(i, a) for i, a in enumerate(actions) if isinstance(a, RemoveFile)]
        rows = pa.concat_tables(
            [
                _file_rows(
                    actions_to_table((a for _, a in adds), ADD_SCHEMA),
                    "add",
                    _ranks(version, (i for i, _ in adds)),
                ),
                _file_rows(
                    actions_to_table((a for _, a in removes), REMOVE_SCHEMA),
                    "remove",
                    _ranks(version, (i for i, _ in removes)),
                ),
            ]
        )
        others = [
            ((version << _RANK_BITS) + i, a.to_line())
            for i, a in enumerate(actions)
            if isinstance(a, _KEPT)
        ]
        return rows, others
    got = read_checkpoint_file(storage, relative, sidecar=kind == SIDECAR)
    n_adds = got.adds.num_rows
    rows = pa.concat_tables(
        [
            _file_rows(got.adds, "add", _ranks(version, range(n_adds))),
            _file_rows(
                got.removes, "remove", _ranks(version, range(n_adds, n_adds + got.removes.num_rows))
            ),
        ]
    )
    base = version << _RANK_BITS
    return rows, [(base, a.to_line()) for a in got.others if isinstance(a, _KEPT)]


def read_pieces(
    pieces: Sequence[Piece], where: str, options: dict[str, Any], partitions: int
) -> Iterator[tuple[int, bytes]]:
    """Stage 1 (executor): ``(partition, IPC rows)`` per hash partition a file's keys reach;
    the non-file actions go to partition ``partitions``."""
    storage = open_storage(where, options)
    others: list[tuple[int, str]] = []
    for piece in pieces:
        rows, found = read_piece(storage, piece)
        others += found
        if not rows.num_rows:
            continue
        ids = partition_ids(rows.column("key"), partitions)
        order = pc.sort_indices(ids)
        rows, ids = rows.take(order), ids.take(order)
        offset = 0
        for item in pc.value_counts(ids).to_pylist():  # sorted input: partitions in order
            yield int(item["values"]), to_ipc(rows.slice(offset, item["counts"]))
            offset += item["counts"]
    if others:
        table = pa.table(
            {"rank": [r for r, _ in others], "line": [ln for _, ln in others]}, schema=_OTHERS
        )
        yield partitions, to_ipc(table)


def newest_per_key(rows: pa.Table) -> pa.Table:
    """The row with the highest rank of every key."""
    if rows.num_rows <= 1:
        return rows
    rows = rows.take(pc.sort_indices(rows, [("key", "ascending"), ("rank", "descending")]))
    keys = rows.column("key").combine_chunks()
    first = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))
    return rows.filter(pa.concat_arrays([pa.array([True]), first]))


def reconcile(index: int, items: Iterable[tuple[int, bytes]], partitions: int) -> Iterator[Any]:
    """Stage 2 (executor): partition ``index``'s newest actions as ``(kind, IPC)``."""
    tables = []
    for got, blob in items:
        if got != index:  # pragma: no cover - the partitioner is the identity
            raise MaintenanceError(f"partition {got} reached the task of partition {index}")
        tables.append(from_ipc(blob))
    if not tables:
        return
    if index == partitions:
        yield "others", to_ipc(pa.concat_tables(tables))
        return
    newest = newest_per_key(pa.concat_tables(tables))
    adds = from_struct_column(newest.column("add"), ADD_SCHEMA)
    removes = from_struct_column(newest.column("remove"), REMOVE_SCHEMA)
    if adds.num_rows:
        yield "add", to_ipc(adds)
    if removes.num_rows:
        yield "remove", to_ipc(removes)


# -- the driver -------------------------------------------------------------------------------
def _slices(pieces: Sequence[Piece], count: int) -> list[list[Piece]]:
    """Pieces dealt round-robin, checkpoint files and sidecars (the big ones) first."""
    big = [p for p in pieces if p[0] != COMMIT]
    small = [p for p in pieces if p[0] == COMMIT]
    ordered = big + small
    count = max(1, min(count, len(ordered)))
    return [ordered[k::count] for k in range(count)]


def replay(
    spark: Any,
    storage: Storage,
    segment: LogSegment,
    storage_options: dict[str, Any] | None = None,
) -> TableState:
    """The table state at ``segment.version``, reconciled by Spark tasks (module docstring).
    A Spark failure raises ``SparkJobError`` with one line saying why."""
    where = location(storage)
    options = dict(storage_options or {})
    pieces = log_pieces(storage, segment)
    sc = spark.sparkContext
    try:
        slots = max(1, int(sc.defaultParallelism))
        partitions = slots * _TASKS_PER_CORE
        slices = _slices(pieces, slots * _TASKS_PER_CORE)
        sc.setJobDescription(
            f"txntable checkpoint: replay {len(pieces)} log file(s) of version {segment.version}"
        )
        results = (
            sc.parallelize(slices, len(slices))
            .flatMap(lambda part: read_pieces(part, where, options, partitions))
            .partitionBy(partitions + 1, lambda p: p)
            .mapPartitionsWithIndex(lambda i, items: reconcile(i, items, partitions))
            .collect()
        )
    except Exception as exc:
        interrupts.reraise(exc)  # py4j's clean-up after Ctrl-C failed: still Ctrl-C
        raise SparkJobError(f"the log replay on Spark failed: {spark_error_line(exc)}") from exc
    state = assemble(segment.version, results)
    log.info(
        "replayed %d log file(s) of %s at version %d on Spark: %d live files, %d tombstones",
        len(pieces),
        storage.root_uri,
        segment.version,
        state.files.num_rows,
        state.tombstones.num_rows,
    )
    return state


def assemble(version: int, results: Iterable[tuple[str, bytes]]) -> TableState:
    """Stage 3 (driver): the reconcile tasks' output as the ``TableState`` at ``version``."""
    by_kind: dict[str, list[pa.Table]] = {"add": [], "remove": [], "others": []}
    for kind, blob in results:
        by_kind[kind].append(from_ipc(blob))
    others = pa.concat_tables(by_kind["others"]) if by_kind["others"] else _OTHERS.empty_table()
    others = others.take(pc.sort_indices(others, [("rank", "ascending")]))
    actions = parse_commit("\n".join(others.column("line").to_pylist()), source="replay")
    state = fold(None, [(version, actions)], version)
    if state is None:
        raise CorruptLogError(f"the log has no protocol or no metadata at version {version}")
    check_readable(state.protocol)
    files = pa.concat_tables(by_kind["add"]) if by_kind["add"] else empty(ADD_SCHEMA)
    tombstones = pa.concat_tables(by_kind["remove"]) if by_kind["remove"] else empty(REMOVE_SCHEMA)
    return replace(state, files=files, tombstones=tombstones)


__all__ = [
    "assemble",
    "log_pieces",
    "newest_per_key",
    "read_piece",
    "read_pieces",
    "reconcile",
    "replay",
]
