"""Writing a checkpoint that is visible only when complete, then the ``_last_checkpoint`` hint.

Order, so a reader never sees a partial checkpoint: every Parquet file is written under a temporary
name and renamed into place on local disk (a single PUT on object stores, which is atomic), so no
reader ever sees a truncated file; the parts of a multi-part checkpoint are all written before the
hint, and readers ignore an incomplete set of parts; the hint is written last, never replacing one
that names a newer checkpoint. A crash at any step therefore leaves the table exactly as readable as
before.

Rows are assigned to the parts of a multi-part checkpoint the way Delta Spark does
(``pmod(hash(coalesce(add.path, remove.path)), numParts)``), so writers racing on the same version
produce identical parts.
"""

from __future__ import annotations

import logging
import math
import os
import time
import uuid
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from txntable.engine.checkpoint.build import build_checkpoint, uses_v2_spec
from txntable.engine.checkpoint.spark_hash import partition_ids
from txntable.engine.errors import InvalidArgumentError
from txntable.engine.model.features import check_maintainable
from txntable.engine.read import last_checkpoint
from txntable.engine.read.segment import complete_checkpoints
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.read.state import TableState
from txntable.engine.storage.base import LocalStorage, Storage
from txntable.engine.storage.paths import (
    LAST_CHECKPOINT,
    LOG_DIR,
    classic_checkpoint_name,
    listing_prefix,
    multipart_checkpoint_name,
)
from txntable.engine.testhooks import pause_point

log = logging.getLogger(__name__)

#: Rows per Parquet row group: bounds a reader's memory per batch, and lets a crash test stop a
#: writer in the middle of a file.
ROW_GROUP_SIZE = 128 * 1024


@dataclass(frozen=True, slots=True)
class CheckpointResult:
    """What was written: the fields of ``_last_checkpoint`` plus the file names."""

    version: int
    size: int
    parts: int | None
    size_in_bytes: int
    num_of_add_files: int
    files: tuple[str, ...]
    hint_written: bool
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "size": self.size,
            "parts": self.parts,
            "sizeInBytes": self.size_in_bytes,
            "numOfAddFiles": self.num_of_add_files,
            "files": list(self.files),
            "hintWritten": self.hint_written,
            "seconds": round(self.seconds, 3),
        }


def num_parts_for(file_rows: int, part_size: int | None) -> int:
    """Spark's part count: ``ceil(file actions / partSize)``; 1 means a classic single file."""
    if part_size is None:
        return 1
    if part_size <= 0:
        raise InvalidArgumentError(f"part size must be a positive number of rows, got {part_size}")
    return max(1, math.ceil(file_rows / part_size))


def split_parts(table: pa.Table, num_parts: int) -> list[pa.Table]:
    """Rows of each part, by Spark's hash partitioning on ``coalesce(add.path, remove.path)``."""
    if num_parts == 1:
        return [table]
    add_path = pc.struct_field(table.column("add"), "path")
    remove_path = pc.struct_field(table.column("remove"), "path")
    ids = partition_ids(pc.coalesce(add_path, remove_path), num_parts)
    return [table.filter(pc.equal(ids, i)) for i in range(num_parts)]


def _parquet_options() -> dict[str, Any]:
    return {
        "compression": "snappy",
        "write_statistics": False,  # readers of a checkpoint never skip row groups by stats
        "use_dictionary": True,
    }


def _write_local(storage: LocalStorage, relative: str, table: pa.Table) -> int:
    target = os.path.join(storage.root_path, relative)
    directory, name = os.path.split(target)
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        with pq.ParquetWriter(tmp, table.schema, **_parquet_options()) as writer:
            for start in range(0, max(table.num_rows, 1), ROW_GROUP_SIZE):
                writer.write_table(table.slice(start, ROW_GROUP_SIZE))
                pause_point("checkpoint:row-group-written")
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        size = os.stat(tmp).st_size
        os.replace(tmp, target)
    finally:
        with suppress(FileNotFoundError):
            os.unlink(tmp)
    dir_fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return size


def write_parquet(storage: Storage, relative: str, table: pa.Table) -> int:
    """Write a whole Parquet file atomically; returns its size in bytes."""
    if isinstance(storage, LocalStorage):
        return _write_local(storage, relative, table)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, row_group_size=ROW_GROUP_SIZE, **_parquet_options())
    data = sink.getvalue().to_pybytes()
    storage.write(relative, data)  # one PUT: atomic on object stores
    return len(data)


def write_hint(storage: Storage, fields: dict[str, Any]) -> bool:
    """Write ``_last_checkpoint`` unless it already names a newer checkpoint that exists.

    A hint naming a version the log does not hold as a complete checkpoint (beyond the log, or
    cleaned up) is repaired: our reader copes with it, other engines fail on it."""
    current = last_checkpoint.read(storage)
    if current is not None and current.version > int(fields["version"]):
        if _complete_checkpoint_at(storage, current.version):
            return False
        log.warning(
            "_last_checkpoint of %s names version %d, which has no complete checkpoint: "
            "replacing it with version %d",
            storage.root_uri,
            current.version,
            fields["version"],
        )
    storage.write(f"{LOG_DIR}/{LAST_CHECKPOINT}", last_checkpoint.render(fields))
    return True


def _complete_checkpoint_at(storage: Storage, version: int) -> bool:
    listed = storage.list_log(listing_prefix(version))
    return any(c.version == version for c in complete_checkpoints(listed))


def write_checkpoint_state(
    storage: Storage,
    state: TableState,
    *,
    part_size: int | None = None,
    now_ms: int | None = None,
) -> CheckpointResult:
    """Write the checkpoint of ``state`` (a table at exactly ``state.version``)."""
    started = time.perf_counter()
    # a checkpoint changes no row: it needs every feature of the version it holds known, not
    # writable (a checkpoint of a version before a dropped feature's protected checkpoint is
    # checked against that version's own protocol, as checkpointProtection asks)
    check_maintainable(state.protocol, "checkpoint")
    now = int(time.time() * 1000) if now_ms is None else now_ms
    table, num_adds = build_checkpoint(state, now)
    file_rows = num_adds + (table.num_rows - table.column("remove").null_count)
    num_parts = 1 if uses_v2_spec(state) else num_parts_for(file_rows, part_size)
    names: list[str] = []
    total = 0
    pause_point("checkpoint:before-parts")
    for index, part in enumerate(split_parts(table, num_parts), start=1):
        name = (
            classic_checkpoint_name(state.version)
            if num_parts == 1
            else multipart_checkpoint_name(state.version, index, num_parts)
        )
        total += write_parquet(storage, f"{LOG_DIR}/{name}", part)
        names.append(name)
        pause_point(f"checkpoint:part-written:{index}")
    fields: dict[str, Any] = {"version": state.version, "size": table.num_rows}
    if num_parts > 1:
        fields["parts"] = num_parts
    fields["sizeInBytes"] = total
    fields["numOfAddFiles"] = num_adds
    pause_point("checkpoint:before-hint")
    written = write_hint(storage, fields)
    pause_point("checkpoint:after-hint")
    return CheckpointResult(
        version=state.version,
        size=table.num_rows,
        parts=num_parts if num_parts > 1 else None,
        size_in_bytes=total,
        num_of_add_files=num_adds,
        files=tuple(names),
        hint_written=written,
        seconds=time.perf_counter() - started,
    )


def write_checkpoint(
    snapshot: Snapshot, *, part_size: int | None = None, now_ms: int | None = None
) -> CheckpointResult:
    """Checkpoint a snapshot into its own table's log."""
    if not snapshot.has_stats:
        raise InvalidArgumentError(
            "this snapshot was loaded without file statistics (stats=False); a checkpoint "
            "written from it would lose them: load it with statistics"
        )
    return write_checkpoint_state(
        snapshot.storage, snapshot.state, part_size=part_size, now_ms=now_ms
    )
