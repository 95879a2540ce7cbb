"""Writing a checkpoint that is visible only when complete, then the ``_last_checkpoint`` hint.

Order, so a reader never sees a partial checkpoint: every Parquet file is written under a temporary
name and renamed into place on local disk (a single PUT on object stores, which is atomic), so no
reader ever sees a truncated file; every part of a multi-part checkpoint is written before the first
is put in place, so a set is incomplete under its real names only while its parts are renamed one
after the other (readers skip an incomplete set, but deltalake's log cleanup takes any checkpoint
file for a checkpoint and deletes the log below it: a crash must not leave one behind for long, and
log cleanup removes one that was); the hint is written last, never replacing one that names this
or a newer checkpoint that exists. A crash at any step therefore leaves the table exactly as
readable as before.

A checkpoint that already exists complete for the version is left alone, whoever wrote it: it
holds the same state by definition, and replacing it would race the other writer and, on local
disk, leave Hadoop's checksum file of the old bytes beside the new ones (delta-spark then refuses
the file, falls back to an older checkpoint or fails). Complete means, per kind
(``read.segment.complete_checkpoints`` and ``read.checkpoint_read.checkpoint_problem``):

* classic ``v.checkpoint.parquet`` (V1 or V2 inside): a non-empty file that parses as Parquet;
* multi-part ``v.checkpoint.i.n.parquet``: all ``n`` parts of one ``n``, each non-empty and parsing;
* V2 ``v.checkpoint.<uuid>.json|parquet``: the non-empty top-level file parsing;

and for every kind exactly one protocol and one metaData action across its files, and every
sidecar it names present and parsing. Otherwise this writer writes its own files, but still
replaces none that parses: a file of its own name already there (a part of another writer's set
at the same part count, finished or in progress) is kept, and files are created only where none
exists (put-if-absent), so two writers never overwrite each other's parts; a file that does not
parse is replaced (on local disk with its Hadoop checksum, ``LocalStorage.place``).

Rows are assigned to the parts of a multi-part checkpoint the way Delta Spark does
(``pmod(hash(coalesce(add.path, remove.path)), numParts)``), so writers racing on the same version
produce parts holding the same files.
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
from txntable.engine.read.checkpoint_read import checkpoint_problem, checkpoint_sidecars
from txntable.engine.read.segment import CheckpointRef, by_preference, complete_checkpoints
from txntable.engine.read.snapshot import Snapshot
from txntable.engine.read.state import TableState
from txntable.engine.storage.base import FileExistsInStoreError, FileInfo, LocalStorage, Storage
from txntable.engine.storage.paths import (
    LAST_CHECKPOINT,
    LOG_DIR,
    LogFileKind,
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
    """The checkpoint of the version: the fields of ``_last_checkpoint`` plus the file names.

    ``existing``: it was already there complete and nothing of it was written (its figures are
    read from its files)."""

    version: int
    size: int
    parts: int | None
    size_in_bytes: int
    num_of_add_files: int
    files: tuple[str, ...]
    hint_written: bool
    seconds: float
    existing: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "size": self.size,
            "parts": self.parts,
            "sizeInBytes": self.size_in_bytes,
            "numOfAddFiles": self.num_of_add_files,
            "files": list(self.files),
            "hintWritten": self.hint_written,
            "existing": self.existing,
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


@dataclass(slots=True)
class _Staged:
    """One file of the checkpoint, finished but not yet in place: a synced temporary file on
    local disk, or the bytes of its one PUT on an object store; or, ``kept``, a file of that
    name already there that parses (another writer's), left as it is."""

    relative: str
    rows: int
    size: int
    replace: bool = False
    tmp: str | None = None
    data: bytes | None = None
    kept: bool = False

    def discard(self) -> None:
        """Remove the temporary file, if it was not placed."""
        if self.tmp is not None:
            with suppress(FileNotFoundError):
                os.unlink(self.tmp)


def _stage(storage: Storage, relative: str, table: pa.Table, *, replace: bool) -> _Staged:
    """Write ``table`` as Parquet where no reader looks: a temporary name beside the target on
    local disk (a dot name, which no engine reads as a log file), memory for an object store."""
    if not isinstance(storage, LocalStorage):
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, row_group_size=ROW_GROUP_SIZE, **_parquet_options())
        data = sink.getvalue().to_pybytes()
        return _Staged(relative, table.num_rows, len(data), replace, data=data)
    directory, name = os.path.split(os.path.join(storage.root_path, relative))
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    staged = _Staged(relative, table.num_rows, 0, replace, tmp=tmp)
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
        staged.size = os.stat(tmp).st_size
    except BaseException:
        staged.discard()
        raise
    return staged


def _place(storage: Storage, staged: _Staged) -> None:
    """Put a staged file under its name in one atomic step: a rename (link) on local disk, one
    PUT on an object store; without ``replace`` only where nothing is there, if the store can
    (``FileExistsInStoreError`` otherwise)."""
    if staged.tmp is not None:
        assert isinstance(storage, LocalStorage)
        storage.place(staged.tmp, staged.relative, replace=staged.replace)
    elif staged.data is not None:
        if staged.replace or not storage.atomic_put_if_absent:
            storage.write(staged.relative, staged.data)
        else:
            storage.write_if_absent(staged.relative, staged.data)


def write_parquet(storage: Storage, relative: str, table: pa.Table, *, replace: bool) -> int:
    """Write a whole Parquet file atomically; returns its size in bytes. Without ``replace``
    the file is created only if absent (``FileExistsInStoreError`` otherwise) where the store
    can do that atomically; with it, an existing file is replaced."""
    staged = _stage(storage, relative, table, replace=replace)
    try:
        _place(storage, staged)
    finally:
        staged.discard()
    return staged.size


def write_hint(storage: Storage, fields: dict[str, Any]) -> bool:
    """Write ``_last_checkpoint`` unless it already names this or a newer checkpoint that
    exists (a hint another writer wrote for this very checkpoint is theirs to keep).

    A hint naming a version the log does not hold as a complete checkpoint (beyond the log, or
    cleaned up) is repaired: our reader copes with it, other engines fail on it."""
    current = last_checkpoint.read(storage)
    if current is not None and current.version >= int(fields["version"]):
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


def existing_checkpoint(
    storage: Storage, listed: list[FileInfo], version: int
) -> CheckpointRef | None:
    """The complete checkpoint at ``version`` in a listing of the log, if one is there and
    whole (module docstring), the one a reader prefers first."""
    here = [c for c in complete_checkpoints(listed) if c.version == version]
    for ref in by_preference(here):
        problem = checkpoint_problem(storage, ref)
        if problem is None:
            return ref
        log.warning(
            "the checkpoint at version %d of %s (%s) is not whole: %s",
            version,
            storage.root_uri,
            ", ".join(f.name for f in ref.files),
            problem,
        )
    return None


def write_checkpoint_state(
    storage: Storage,
    state: TableState,
    *,
    part_size: int | None = None,
    now_ms: int | None = None,
) -> CheckpointResult:
    """Write the checkpoint of ``state`` (a table at exactly ``state.version``), or keep the
    complete one already there (module docstring)."""
    started = time.perf_counter()
    # a checkpoint changes no row: it needs every feature of the version it holds known, not
    # writable (a checkpoint of a version before a dropped feature's protected checkpoint is
    # checked against that version's own protocol, as checkpointProtection asks)
    check_maintainable(state.protocol, "checkpoint")
    listed = storage.list_log(listing_prefix(state.version))
    existing = existing_checkpoint(storage, listed, state.version)
    if existing is not None:
        return _keep(storage, state, existing, started)
    present = {f.name: f for f in listed}
    now = int(time.time() * 1000) if now_ms is None else now_ms
    table, num_adds = build_checkpoint(state, now)
    file_rows = num_adds + (table.num_rows - table.column("remove").null_count)
    num_parts = 1 if uses_v2_spec(state) else num_parts_for(file_rows, part_size)
    names: list[str] = []
    staged: list[_Staged] = []
    pause_point("checkpoint:before-parts")
    try:
        # every part is finished before the first is put in place: a set of parts is
        # incomplete under its real names only while they are renamed (or PUT) one after the
        # other, not while they are written. An incomplete set is not harmless to other
        # engines: deltalake's log cleanup takes any checkpoint file for a checkpoint and
        # deletes the log below it, the complete checkpoint before it too (docs/reliability.md)
        for index, part in enumerate(split_parts(table, num_parts), start=1):
            name = (
                classic_checkpoint_name(state.version)
                if num_parts == 1
                else multipart_checkpoint_name(state.version, index, num_parts)
            )
            staged.append(_stage_part(storage, name, part, present.get(name)))
            names.append(name)
            pause_point(f"checkpoint:part-written:{index}")
        placed = []
        for index, item in enumerate(staged, start=1):
            placed.append(_place_part(storage, item))
            pause_point(f"checkpoint:part-placed:{index}")
    finally:
        for item in staged:
            item.discard()
    rows = sum(r for r, _ in placed)
    total = sum(b for _, b in placed)
    fields: dict[str, Any] = {"version": state.version, "size": rows}
    if num_parts > 1:
        fields["parts"] = num_parts
    fields["sizeInBytes"] = total
    fields["numOfAddFiles"] = num_adds
    pause_point("checkpoint:before-hint")
    written = write_hint(storage, fields)
    pause_point("checkpoint:after-hint")
    return CheckpointResult(
        version=state.version,
        size=rows,
        parts=num_parts if num_parts > 1 else None,
        size_in_bytes=total,
        num_of_add_files=num_adds,
        files=tuple(names),
        hint_written=written,
        seconds=time.perf_counter() - started,
    )


def _stage_part(storage: Storage, name: str, part: pa.Table, listed: FileInfo | None) -> _Staged:
    """Stage one file of the checkpoint unless a file of that name that parses is there
    already (another writer's, kept); a file of that name that does not parse is replaced."""
    relative = f"{LOG_DIR}/{name}"
    if listed is not None:
        rows = _parquet_rows(storage, relative)
        if rows is not None:
            log.info("%s of %s is there already: kept", name, storage.root_uri)
            return _Staged(relative, rows, listed.size, kept=True)
        log.warning("%s of %s does not parse: replacing it", name, storage.root_uri)
    return _stage(storage, relative, part, replace=listed is not None)


def _place_part(storage: Storage, staged: _Staged) -> tuple[int, int]:
    """Put a staged file of the checkpoint in place; ``(rows, bytes)`` of the file there."""
    if staged.kept:
        return staged.rows, staged.size
    try:
        _place(storage, staged)
        return staged.rows, staged.size
    except FileExistsInStoreError:
        pass  # another writer created it since the listing
    name = staged.relative.rsplit("/", 1)[-1]
    rows = _parquet_rows(storage, staged.relative)
    created = next((f for f in storage.list_log(name) if f.name == name), None)
    if rows is not None and created is not None:
        return rows, created.size
    staged.replace = True  # what the other writer left does not parse
    _place(storage, staged)
    return staged.rows, staged.size


def _parquet_rows(storage: Storage, relative: str) -> int | None:
    """The row count in a Parquet file's footer; ``None`` when it is missing or does not parse."""
    try:
        source = storage.open_input(relative)
    except FileNotFoundError:
        return None
    try:
        return int(pq.ParquetFile(source).metadata.num_rows)
    except (OSError, pa.ArrowInvalid):
        return None
    finally:
        if not isinstance(source, str):
            source.close()


def _keep(
    storage: Storage, state: TableState, ref: CheckpointRef, started: float
) -> CheckpointResult:
    """The result for a complete checkpoint already there: its figures, and the hint written
    for it if the hint names an older one."""
    rows = 0
    for info in ref.files:
        relative = f"{LOG_DIR}/{info.name}"
        if info.name.endswith(".json"):
            rows += sum(1 for line in storage.read(relative).splitlines() if line.strip())
        else:
            rows += _parquet_rows(storage, relative) or 0
    rows += sum(
        _parquet_rows(storage, sidecar) or 0 for sidecar in checkpoint_sidecars(storage, ref)
    )
    parts = len(ref.files) if ref.kind is LogFileKind.CHECKPOINT_MULTIPART else None
    size = sum(f.size for f in ref.files)
    num_adds = int(state.files.num_rows)
    fields: dict[str, Any] = {"version": ref.version, "size": rows}
    if parts is not None:
        fields["parts"] = parts
    fields["sizeInBytes"] = size
    fields["numOfAddFiles"] = num_adds
    log.info(
        "the checkpoint at version %d of %s is there already (%s): kept",
        ref.version,
        storage.root_uri,
        ", ".join(f.name for f in ref.files),
    )
    written = write_hint(storage, fields)
    return CheckpointResult(
        version=ref.version,
        size=rows,
        parts=parts,
        size_in_bytes=size,
        num_of_add_files=num_adds,
        files=tuple(f.name for f in ref.files),
        hint_written=written,
        seconds=time.perf_counter() - started,
        existing=True,
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
