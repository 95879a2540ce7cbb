"""A table's health, computed from a snapshot the controller already holds.

The observation timer refreshes the table's snapshot incrementally (engine I/O, in the
handlers) and hands it here; everything below is arithmetic over Arrow columns, so one tick
costs a listing plus the new commits, never a replay.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc

from txntable.engine import Snapshot, retention
from txntable.engine.errors import InvalidArgumentError, UnsupportedFeatureError
from txntable.engine.features import check_writable


@dataclass(frozen=True, slots=True)
class TableHealth:
    """What the log says about a table at one version."""

    version: int
    min_reader_version: int
    min_writer_version: int
    reader_features: tuple[str, ...]
    writer_features: tuple[str, ...]
    files: int
    size_bytes: int
    small_files: int
    small_file_bytes: int
    #: small files in partitions holding at least two of them (what compaction can merge)
    compactable_small_files: int
    partitions: int
    last_commit_time: datetime
    checkpoint_version: int | None
    checkpoint_time: datetime | None
    commits_since_checkpoint: int
    writable: bool
    unwritable_reason: str | None = None
    #: live files carrying a deletion vector, and the rows those vectors delete
    files_with_deletion_vectors: int = 0
    deleted_rows: int = 0
    #: bytes of removed files whose tombstones are older than the table's
    #: delta.deletedFileRetentionDuration: what VACUUM would reclaim (a lower bound: files never
    #: committed, and tombstones already expired from checkpoints, are not known to the log)
    reclaimable_bytes: int = 0

    @property
    def small_file_percent(self) -> float:
        return 100.0 * self.small_files / self.files if self.files else 0.0


def observe(snapshot: Snapshot, min_file_size: int) -> TableHealth:
    """Health of ``snapshot``; files strictly smaller than ``min_file_size`` count as small."""
    files = snapshot.files()
    sizes = files.column("size")
    small_mask = pc.less(sizes, min_file_size)
    small = int(pc.sum(pc.cast(small_mask, "int64")).as_py() or 0)
    small_bytes = int(pc.sum(pc.filter(sizes, small_mask)).as_py() or 0) if small else 0
    partitions, compactable = _partition_stats(snapshot, small_mask)
    protocol = snapshot.protocol
    writable, reason = True, None
    try:
        check_writable(protocol, snapshot.metadata, rows_unchanged=True)
    except UnsupportedFeatureError as exc:
        writable, reason = False, str(exc)
    checkpoint = snapshot.checkpoint_version
    since = snapshot.version - checkpoint if checkpoint is not None else snapshot.version + 1
    return TableHealth(
        version=snapshot.version,
        min_reader_version=protocol.min_reader_version,
        min_writer_version=protocol.min_writer_version,
        reader_features=tuple(protocol.reader_features or ()),
        writer_features=tuple(protocol.writer_features or ()),
        files=snapshot.num_files,
        size_bytes=snapshot.size_bytes,
        small_files=small,
        small_file_bytes=small_bytes,
        compactable_small_files=compactable,
        partitions=partitions,
        last_commit_time=datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC),
        checkpoint_version=checkpoint,
        checkpoint_time=(
            datetime.fromtimestamp(snapshot.checkpoint.files[0].mtime_ms / 1000, UTC)
            if snapshot.checkpoint
            else None
        ),
        commits_since_checkpoint=since,
        writable=writable,
        unwritable_reason=reason,
        **_deletion_figures(snapshot),
    )


def _deletion_figures(snapshot: Snapshot, now_ms: int | None = None) -> dict[str, int]:
    """Deletion-vector and VACUUM figures, column-wise over the snapshot's Arrow state."""
    dv = snapshot.files().column("deletionVector")
    with_dv = len(dv) - dv.null_count
    deleted = 0
    if with_dv:
        deleted = int(pc.sum(pc.struct_field(dv, "cardinality")).as_py() or 0)
    tombstones = snapshot.tombstones()
    reclaimable = 0
    if tombstones.num_rows:
        try:
            keep_ms = retention.duration_ms(
                snapshot.configuration,
                retention.DELETED_FILE_RETENTION,
                retention.DEFAULT_DELETED_FILE_RETENTION_MS,
            )
        except InvalidArgumentError:
            keep_ms = None  # a broken property: VACUUM refuses it too, so nothing is reclaimable
        if keep_ms is not None:
            now = int(time.time() * 1000) if now_ms is None else now_ms
            old = pc.less(pc.fill_null(tombstones.column("deletionTimestamp"), now), now - keep_ms)
            reclaimable = int(pc.sum(pc.filter(tombstones.column("size"), old)).as_py() or 0)
    return {
        "files_with_deletion_vectors": with_dv,
        "deleted_rows": deleted,
        "reclaimable_bytes": reclaimable,
    }


def _partition_stats(snapshot: Snapshot, small_mask: pa.ChunkedArray) -> tuple[int, int]:
    """Distinct partitions among live files, and the small files that share a partition with
    another small file (vectorised group-by)."""
    if snapshot.num_files == 0:
        return 0, 0
    small = pc.cast(small_mask, "int64")
    if not snapshot.partition_columns:
        total = int(pc.sum(small).as_py() or 0)
        return 1, total if total >= 2 else 0
    values = snapshot.files().column("partitionValues").combine_chunks()
    by_name = {f.name: f.physical_name for f in snapshot.fields}
    columns = {
        f"p{i}": pc.map_lookup(values, pa.scalar(by_name.get(name, name)), "first")
        for i, name in enumerate(snapshot.partition_columns)
    }
    keys = list(columns)
    grouped = pa.table({**columns, "small": small}).group_by(keys).aggregate([("small", "sum")])
    sums = grouped.column("small_sum")
    mergeable = pc.sum(pc.if_else(pc.greater_equal(sums, 2), sums, 0)).as_py()
    return int(grouped.num_rows), int(mergeable or 0)
